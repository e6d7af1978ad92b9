# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line fix: plan the boot configuration edit and the command that activates it.

Used by library/pvetune_cmdline.py.  Pure planning on top of formats/grub_edit.py and formats/kernel_cmdline.py:

* GRUB (plain or via proxmox-boot-tool): ``grub_edit.plan_grub_edit`` over
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

from ansible.module_utils.pvetune.concerns.bootargs import checks as bootargs
from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
from ansible.module_utils.pvetune.core.changeset import WriteFailed
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, RunFailed, command_record, run_or_restore
from ansible.module_utils.pvetune.formats import grub_chain, grub_edit, grub_parse, kernel_cmdline
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError

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
                checked.append(kernel_cmdline.validate_arg(arg))
            except BootConfigError as exc:
                raise BootConfigError("%s: %s" % (what, exc))
        out.append(checked)
    ensure, remove = out
    kernel_cmdline.plan_args([], ensure, remove)  # raises on conflicting entries
    return ensure, remove


def validate_dropin(path):
    if not isinstance(path, str) or not DROPIN_RE.match(path) or "/../" in path:
        raise BootConfigError("dropin must be /etc/default/grub.d/<name>.cfg, got %r" % (path,))
    return path


def managed_keys(ensure, remove):
    return {kernel_cmdline.arg_key(a) for a in list(ensure) + list(remove)}


def managed_args(args, ensure, remove):
    """The (key, value) pairs of ``args`` whose key pvetune manages, in order."""
    keys = managed_keys(ensure, remove)
    return [(kernel_cmdline.arg_key(a), kernel_cmdline.arg_value(a))
            for a in args or [] if kernel_cmdline.arg_key(a) in keys]


def satisfied(args, ensure, remove):
    """True when ``args`` already hold every ensured argument once and none to remove."""
    _new, changes = kernel_cmdline.plan_args(list(args or []), ensure, remove)
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
            return kernel_cmdline.split_cmdline(m.group(2))
    return None


def _files_with(files, plan):
    """[(path, text)] in sourcing order after applying a plan_grub_edit plan."""
    new = {path: text for path, _old, text in plan}
    merged = [(p, new.pop(p, t)) for p, t in files]
    merged.extend(sorted(new.items()))
    head = [f for f in merged if f[0] == grub_parse.GRUB_DEFAULT_FILE]
    rest = sorted((f for f in merged if f[0] != grub_parse.GRUB_DEFAULT_FILE),
                  key=lambda f: f[0].encode("utf-8", "surrogateescape"))
    return head + rest


def plan_grub(fsroot, ensure, remove, dropin=grub_edit.DROPIN_PATH):
    """Plan the GRUB default file edits; see plan_cmdline for the result."""
    files = grub_parse.read_grub_files(fsroot)
    before = grub_chain.grub_effective(files)
    plan = grub_edit.plan_grub_edit(files, ensure, remove, dropin_path=dropin)
    after = grub_chain.grub_effective(_files_with(files, plan)) if plan else before
    _new, arg_changes = kernel_cmdline.plan_args(before["args"], ensure, remove)
    return {"files": plan, "before": before["args"], "after": after["args"], "arg_changes": arg_changes,
            "sources": before["files"], "warnings": list(after["warnings"])}


def plan_systemd_boot(fsroot, ensure, remove):
    """Plan the /etc/kernel/cmdline edit; see plan_cmdline for the result."""
    path = kernel_cmdline.KERNEL_CMDLINE
    try:
        data = fsroot.read_bytes(path)
    except FsError as exc:
        raise BootConfigError("%s: %s; systemd-boot takes its kernel command line from this file and pvetune "
                              "does not invent one (proxmox-boot-tool needs root=)" % (path, exc.reason))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BootConfigError("%s is not valid UTF-8; not editing it" % path)
    args, info = kernel_cmdline.parse_kernel_cmdline_file(text)
    new_args, arg_changes = kernel_cmdline.plan_args(args, ensure, remove)
    warnings = []
    if info["ignored_lines"]:
        warnings.append("%s: proxmox-boot-tool uses only the first line; %d further line(s) are ignored"
                        % (path, len(info["ignored_lines"])))
    if not info["has_root"]:
        warnings.append("%s has no root= argument: proxmox-boot-tool refresh refuses such a command line" % path)
    files = []
    if arg_changes:
        files.append((path, text, kernel_cmdline.set_kernel_cmdline_file(text, new_args)))
    return {"files": files, "before": args, "after": new_args if arg_changes else args,
            "arg_changes": arg_changes, "sources": [path], "warnings": warnings}


def plan_cmdline(fsroot, loader, ensure, remove, dropin=grub_edit.DROPIN_PATH):
    """Plan the boot configuration change for ``loader`` ("grub" or "systemd-boot").

    Returns {"files": [(path, old_text or None, new_text)], "before": [args], "after": [args],
    "arg_changes": [plan_args changes], "sources": [paths read], "warnings": [str]}.
    Raises BootConfigError (GrubParseError) when the change cannot be planned with certainty.
    """
    if loader == "systemd-boot":
        plan = plan_systemd_boot(fsroot, ensure, remove)
    elif loader == "grub":
        plan = plan_grub(fsroot, ensure, remove, dropin)
    else:
        raise BootConfigError("unknown boot loader %r" % (loader,))
    if plan["files"]:
        kernel_cmdline.check_cmdline_length(plan["after"])
    return plan


def detect(fsroot, runner, loader="auto"):
    """Boot loader info (bootargs.detect_loader) plus the status command that was run, if any.

    With loader "auto" on a host that has the proxmox-boot-tool ESP list,
    ``proxmox-boot-tool status`` (read-only) is asked first, so the ESPs' real
    configuration decides (rule 1); without the tool the file rules decide.
    Returns (info, command record or None).
    """
    record = None
    if loader != "auto":
        managed = fsroot.exists(bootargs.ESP_LIST)
        info = {"loader": loader, "managed_by_pbt": managed, "uefi": fsroot.isdir(bootargs.EFI_DIR),
                "rule": "option", "reason": "loader=%s was requested" % loader, "evidence": [], "esps": [],
                "notes": [], "cmdline_path": kernel_cmdline.KERNEL_CMDLINE if loader == "systemd-boot"
                else grub_parse.GRUB_DEFAULT_FILE}
        return info, None
    status_text = None
    if fsroot.exists(bootargs.ESP_LIST) and runner is not None and runner.which(PBT):
        rc, out, err = runner.run(PBT, ["status"])
        record = command_record([PBT, "status"], rc, out, err)
        if rc == 0:
            status_text = out
    info = bootargs.detect_loader(fsroot, status_text)
    if record is not None and record["rc"] != 0:
        info["notes"].append("proxmox-boot-tool status failed (rc=%s); decided from files" % record["rc"])
    return info, record


def _loader_result(info):
    return {"name": info["loader"], "managed_by_pbt": bool(info.get("managed_by_pbt")), "rule": info.get("rule"),
            "reason": info.get("reason"), "notes": info.get("notes", [])}


def run_cmdline_fix(fsroot, runner, changes, params, check_mode, warn, ensure, remove, dropin):
    """pvetune_cmdline's flow: detect the loader, plan the edit, write it, activate it.

    ``ensure``/``remove``/``dropin`` are the validated options.  Returns the module result (without
    ``diff``); raises RunFailed (msg + result keys) on a failure, with the files restored where any were written.
    """
    commands, skipped = [], []
    try:
        info, record = detect(fsroot, runner, params["loader"])
    except (FsError, CommandUnavailable) as exc:
        raise RunFailed("boot loader detection failed: %s" % exc)
    if record is not None:
        commands.append(record)
    loader, managed = info["loader"], bool(info.get("managed_by_pbt"))
    loader_ret = _loader_result(info)
    try:
        plan = plan_cmdline(fsroot, loader, ensure, remove, dropin)
    except (BootConfigError, FsError) as exc:
        raise RunFailed("cannot plan the %s kernel command line change: %s" % (loader, exc),
                        loader=loader_ret, commands=commands)
    for warning in plan["warnings"]:
        warn(warning)
    for path, old, new in plan["files"]:
        if old is not None and changes.read(path) != old.encode("utf-8"):
            raise RunFailed("%s is not valid UTF-8 (or changed while planning); not editing it" % path,
                            loader=loader_ret, commands=commands)
        changes.plan_file(path, new)

    # A plain GRUB host whose grub.cfg does not carry the configured arguments needs update-grub too.
    regenerate = False
    if not changes.changed and loader == "grub" and not managed:
        cfg = fsroot.read_text(kernel.GRUB_CFG) if fsroot.isfile(kernel.GRUB_CFG) else None
        cfg_args = grub_cfg_args(cfg)
        if cfg_args is not None and not satisfied(cfg_args, ensure, remove):
            regenerate = True
            warn("%s does not carry the configured kernel arguments (update-grub was not run after the "
                 "last edit); regenerating it" % kernel.GRUB_CFG)

    name, args = refresh_command(loader, managed)
    shown = " ".join([name] + args)
    activated = False
    if changes.changed or regenerate:
        if not params["refresh"]:
            skipped.append({"command": shown, "reason": "refresh=false: configuration written, not activated"})
        elif check_mode:
            skipped.append({"command": shown, "reason": "check mode"})
        else:
            try:
                changes.apply_or_restore("the boot configuration")
            except WriteFailed as exc:
                raise RunFailed(str(exc), changes=changes.summary(), loader=loader_ret, commands=commands)
            try:
                ran = run_or_restore(runner, changes, name, args,
                                     "the boot configuration was restored (%s), so the next boot uses the previous "
                                     "command line", commands=commands, skipped=skipped, required=fsroot.live,
                                     purpose=" to activate the boot configuration")
            except RunFailed as exc:
                exc.result.update(changes=changes.summary(), loader=loader_ret, commands=commands)
                raise
            activated = ran is not None

    effective_text = fsroot.try_value("/proc/cmdline")
    effective = kernel_cmdline.split_cmdline(effective_text) if effective_text is not None else None
    if effective is None:
        warn("/proc/cmdline cannot be read; assuming a reboot is needed")
    configured = plan["after"]
    regenerated = regenerate and (activated or check_mode)
    return {
        "changed": changes.changed or regenerated,
        "loader": loader_ret,
        "configured_args": configured,
        "configured_args_before": plan["before"],
        "effective_args": effective,
        "arg_changes": plan["arg_changes"],
        "files": [path for path, _old, _new in plan["files"]],
        "commands": commands,
        "skipped_commands": skipped,
        "regenerated": regenerated,
        "reboot_required": reboot_needed(configured, effective, ensure, remove),
        "changes": changes.summary(),
    }


def fix(params, run_command, check_mode, diff):
    """pvetune_cmdline's one call: ``(failed, result, warnings)``.  Every option is validated before anything is
    read for writing or run."""
    def validate(p):
        ensure, remove = validate_request(p["ensure"], p["remove"])
        return ensure, remove, validate_dropin(p["dropin"])

    def run(fsroot, runner, changes, request, warn):
        ensure, remove, dropin = request
        return run_cmdline_fix(fsroot, runner, changes, params, check_mode, warn, ensure, remove, dropin)
    return fix_call(params, run_command, check_mode, diff, validate, run)
