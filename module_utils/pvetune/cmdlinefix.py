# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line fix: plan the boot configuration edit and the command that activates it.

Used by library/pvetune_cmdline.py.  Pure planning on top of bootcfg.py:

* GRUB (plain or via proxmox-boot-tool): ``bootcfg.plan_grub_edit`` over
  /etc/default/grub + /etc/default/grub.d/*.cfg (additions in the pvetune
  drop-in, replacements/removals in place where the argument is written);
* systemd-boot: the first line of /etc/kernel/cmdline (``set_kernel_cmdline_file``).

Which command makes a changed configuration effective (``refresh_command``):

* systemd-boot: ``proxmox-boot-tool refresh`` (copies kernels and writes the
  loader entries with the first line of /etc/kernel/cmdline on every ESP);
* GRUB on ESPs managed by proxmox-boot-tool (/etc/kernel/proxmox-boot-uuids
  exists): ``proxmox-boot-tool refresh``; its zz-proxmox-boot hook runs
  update-grub with each ESP bind-mounted on /boot.  A plain ``update-grub``
  there would only regenerate /boot/grub/grub.cfg, which those disks do not
  boot from (Proxmox's 000_proxmox_boot_header then warns and calls refresh
  itself) - so pvetune calls refresh directly;
* plain GRUB: ``update-grub``.

Whether a reboot is needed compares only the arguments pvetune manages (the
keys of ``ensure`` and ``remove``) between the configured and the running
command line: BOOT_IMAGE=, initrd= and the like legitimately differ.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re

from ansible.module_utils.pvetune import bootcfg
from ansible.module_utils.pvetune.bootcfg import BootConfigError
from ansible.module_utils.pvetune.core.fsroot import FsError

LOADERS = ("auto", "grub", "systemd-boot")
DROPIN_RE = re.compile(r"^/etc/default/grub\.d/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.cfg\Z")
PBT = "proxmox-boot-tool"
UPDATE_GRUB = "update-grub"
MAX_ARGS = 64


def validate_request(ensure, remove):
    """Validated copies of ``ensure`` and ``remove``; BootConfigError when unsafe or contradictory."""
    out = []
    for what, args in (("ensure", ensure), ("remove", remove)):
        args = list(args or [])
        if len(args) > MAX_ARGS:
            raise BootConfigError("%s: more than %d arguments" % (what, MAX_ARGS))
        checked = []
        for arg in args:
            try:
                checked.append(bootcfg.validate_arg(arg))
            except BootConfigError as exc:
                raise BootConfigError("%s: %s" % (what, exc))
        out.append(checked)
    ensure, remove = out
    bootcfg.plan_args([], ensure, remove)  # raises on conflicting entries
    return ensure, remove


def validate_dropin(path):
    if not isinstance(path, str) or not DROPIN_RE.match(path) or "/../" in path:
        raise BootConfigError("dropin must be /etc/default/grub.d/<name>.cfg, got %r" % (path,))
    return path


def managed_keys(ensure, remove):
    return {bootcfg.arg_key(a) for a in list(ensure) + list(remove)}


def managed_args(args, ensure, remove):
    """The (key, value) pairs of ``args`` whose key pvetune manages, in order."""
    keys = managed_keys(ensure, remove)
    return [(bootcfg.arg_key(a), bootcfg.arg_value(a)) for a in args or [] if bootcfg.arg_key(a) in keys]


def satisfied(args, ensure, remove):
    """True when ``args`` already hold every ensured argument once and none to remove."""
    _new, changes = bootcfg.plan_args(list(args or []), ensure, remove)
    return not changes


def reboot_needed(configured, effective, ensure, remove):
    """True when the managed arguments of the configured and the running command line differ."""
    if effective is None:
        return bool(managed_keys(ensure, remove))  # running command line unknown: assume it differs
    return (collections.Counter(managed_args(configured, ensure, remove))
            != collections.Counter(managed_args(effective, ensure, remove)))


def refresh_command(loader, managed_by_pbt):
    """(name, args) of the command that makes a changed boot configuration effective."""
    if loader == "systemd-boot" or managed_by_pbt:
        return PBT, ["refresh"]
    return UPDATE_GRUB, []


_LINUX_LINE = re.compile(r"^\s*linux(?:16|efi)?\s+(\S+)(.*)$")


def grub_cfg_args(text):
    """Kernel arguments of the first ``linux`` line in a grub.cfg (the default entry's), or None."""
    for line in (text or "").splitlines():
        m = _LINUX_LINE.match(line)
        if m:
            return bootcfg.split_cmdline(m.group(2))
    return None


def _files_with(files, plan):
    """[(path, text)] in sourcing order after applying a plan_grub_edit plan."""
    new = {path: text for path, _old, text in plan}
    merged = [(p, new.pop(p, t)) for p, t in files]
    merged.extend(sorted(new.items()))
    head = [f for f in merged if f[0] == bootcfg.GRUB_DEFAULT_FILE]
    rest = sorted((f for f in merged if f[0] != bootcfg.GRUB_DEFAULT_FILE),
                  key=lambda f: f[0].encode("utf-8", "surrogateescape"))
    return head + rest


def plan_grub(fsroot, ensure, remove, dropin=bootcfg.DROPIN_PATH):
    """Plan the GRUB default file edits; see plan_cmdline for the result."""
    files = bootcfg.read_grub_files(fsroot)
    before = bootcfg.grub_effective(files)
    plan = bootcfg.plan_grub_edit(files, ensure, remove, dropin_path=dropin)
    after = bootcfg.grub_effective(_files_with(files, plan)) if plan else before
    _new, arg_changes = bootcfg.plan_args(before["args"], ensure, remove)
    return {"files": plan, "before": before["args"], "after": after["args"], "arg_changes": arg_changes,
            "sources": before["files"], "warnings": list(after["warnings"])}


def plan_systemd_boot(fsroot, ensure, remove):
    """Plan the /etc/kernel/cmdline edit; see plan_cmdline for the result."""
    path = bootcfg.KERNEL_CMDLINE
    try:
        data = fsroot.read_bytes(path)
    except FsError as exc:
        raise BootConfigError("%s: %s; systemd-boot takes its kernel command line from this file and pvetune "
                              "does not invent one (proxmox-boot-tool needs root=)" % (path, exc.reason))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BootConfigError("%s is not valid UTF-8; not editing it" % path)
    args, info = bootcfg.parse_kernel_cmdline_file(text)
    new_args, arg_changes = bootcfg.plan_args(args, ensure, remove)
    warnings = []
    if info["ignored_lines"]:
        warnings.append("%s: proxmox-boot-tool uses only the first line; %d further line(s) are ignored"
                        % (path, len(info["ignored_lines"])))
    if not info["has_root"]:
        warnings.append("%s has no root= argument: proxmox-boot-tool refresh refuses such a command line" % path)
    files = []
    if arg_changes:
        files.append((path, text, bootcfg.set_kernel_cmdline_file(text, new_args)))
    return {"files": files, "before": args, "after": new_args if arg_changes else args,
            "arg_changes": arg_changes, "sources": [path], "warnings": warnings}


def plan_cmdline(fsroot, loader, ensure, remove, dropin=bootcfg.DROPIN_PATH):
    """Plan the boot configuration change for ``loader`` ("grub" or "systemd-boot").

    Returns {"files": [(path, old_text or None, new_text)], "before": [args], "after": [args],
    "arg_changes": [plan_args changes], "sources": [paths read], "warnings": [str]}.
    Raises BootConfigError (GrubParseError) when the change cannot be planned with certainty.
    """
    if loader == "systemd-boot":
        return plan_systemd_boot(fsroot, ensure, remove)
    if loader == "grub":
        return plan_grub(fsroot, ensure, remove, dropin)
    raise BootConfigError("unknown boot loader %r" % (loader,))


def detect(fsroot, runner, loader="auto"):
    """Boot loader info (bootcfg.detect_loader) plus the status command that was run, if any.

    With loader "auto" on a host that has the proxmox-boot-tool ESP list,
    ``proxmox-boot-tool status`` (read-only) is asked first, so the ESPs' real
    configuration decides (rule 1); without the tool the file rules decide.
    Returns (info, command record or None).
    """
    record = None
    if loader != "auto":
        managed = fsroot.exists(bootcfg.ESP_LIST)
        info = {"loader": loader, "managed_by_pbt": managed, "uefi": fsroot.isdir(bootcfg.EFI_DIR),
                "rule": "option", "reason": "loader=%s was requested" % loader, "evidence": [], "esps": [],
                "notes": [], "cmdline_path": bootcfg.KERNEL_CMDLINE if loader == "systemd-boot"
                else bootcfg.GRUB_DEFAULT_FILE}
        return info, None
    status_text = None
    if fsroot.exists(bootcfg.ESP_LIST) and runner is not None and runner.which(PBT):
        rc, out, err = runner.run(PBT, ["status"])
        record = command_record([PBT, "status"], rc, out, err)
        if rc == 0:
            status_text = out
    info = bootcfg.detect_loader(fsroot, status_text)
    if record is not None and record["rc"] != 0:
        info["notes"].append("proxmox-boot-tool status failed (rc=%s); decided from files" % record["rc"])
    return info, record


def tail(text, limit=2000):
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]


def command_record(cmd, rc, out, err):
    return {"cmd": list(cmd), "rc": rc, "stdout": tail(out), "stderr": tail(err)}
