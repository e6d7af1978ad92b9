# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel series fix: install a kernel series and pin the boot to it.

Used by library/pvetune_kernel.py.  Pure functions on top of concerns/kernel/checks.py (the reader of the kernel state).

Pinning does what ``proxmox-boot-tool kernel pin <ver>`` does (proxmox-kernel-helper):

* it refuses a version without /boot/vmlinuz-<ver>;
* it writes <ver> to /etc/kernel/proxmox-boot-pin;
* with an ESP list (/etc/kernel/proxmox-boot-uuids) it only asks for
  ``proxmox-boot-tool refresh``, which syncs the ESPs and, on GRUB ESPs, writes
  the GRUB pin snippet (below) and runs update-grub;
* without one (plain GRUB host) it writes
  /etc/default/grub.d/proxmox-kernel-pin.cfg with
  ``GRUB_DEFAULT="gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>"`` (``<id>``
  taken from the ``gnulinux-advanced-<id>' {`` line of /boot/grub/grub.cfg; a
  next-boot pin, if any, wins) and runs update-grub.

pvetune plans the same files on its ChangeSet (so they are backed up, shown in
diff mode and restored if a command fails), then lets proxmox-boot-tool do the
pin itself.  Without proxmox-boot-tool the GRUB files are written by pvetune
and update-grub is run (the "GRUB fallback").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.bootargs import fix as bootargs_fix
from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
from ansible.module_utils.pvetune.core.changeset import WriteFailed
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.runner import RunFailed, run_or_restore
from ansible.module_utils.pvetune.formats import kernel_version, pbt_output
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError

PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,80}\Z")

SERIES_RE = re.compile(r"^\d{1,2}\.\d{1,3}\Z")

META_RE = re.compile(r"^(?:proxmox|pve)-kernel-(\d+\.\d+)\Z")

_ADVANCED_ID_RE = re.compile(r"^.*gnulinux-advanced-(.+)['] \{$", re.M)

PBT = "proxmox-boot-tool"

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}


def validate_package(name):
    """A Debian package name (policy 5.6.1: lower case, digits, + - . ; two characters at least)."""
    if not isinstance(name, str) or not PACKAGE_RE.match(name):
        shown = name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "..."
        raise BootConfigError("package %r is not a Debian package name ([a-z0-9][a-z0-9.+-]{1,80})" % (shown,))
    return name


def validate_series(series):
    if not isinstance(series, str) or not SERIES_RE.match(series):
        raise BootConfigError("series %r must look like 6.14" % (series,))
    return series


def validate_request(package, series, version):
    """Validated (package, series, version); BootConfigError before anything runs."""
    package = validate_package(package)
    series = validate_series(series)
    m = META_RE.match(package)
    if m and m.group(1) != series:
        raise BootConfigError("package %s installs the %s series, not %s" % (package, m.group(1), series))
    if version is not None:
        kernel_version.validate_kernel_version(version)
        if not kernel_version.in_series(version, series):
            raise BootConfigError("version %s is not in the %s series" % (version, series))
    return package, series, version


def series_kernels(images, series):
    """Installed kernel images of ``series``, oldest first (version sort)."""
    return sorted((v for v in images if kernel_version.in_series(v, series)), key=kernel_version.kernel_sort_key)


def choose_version(images, series, version=None):
    """The kernel to pin: ``version`` if given and installed, else the newest of the series; None if none."""
    if version is not None:
        return version if version in images else None
    found = series_kernels(images, series)
    return found[-1] if found else None


def grub_root_devids(grub_cfg_text):
    """The ``<id>`` of every ``gnulinux-advanced-<id>' {`` line (what proxmox-boot-tool's sed extracts)."""
    return [m.group(1) for m in _ADVANCED_ID_RE.finditer(grub_cfg_text or "")]


def grub_pin_entry(version, devid):
    return "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (devid, version, devid)


def render_grub_pin(version, devid):
    """/etc/default/grub.d/proxmox-kernel-pin.cfg as proxmox-boot-tool writes it."""
    kernel_version.validate_kernel_version(version)
    if not devid or re.search(r"[\s\"'$`\\]", devid):
        raise BootConfigError("GRUB root device id %r is not usable" % (devid,))
    return 'GRUB_DEFAULT="%s"\n' % grub_pin_entry(version, devid)


def plan_pin_files(version, loader, next_boot=None, grub_cfg_text=None):
    """Files a pin of ``version`` leaves behind: [(path, text)].

    The pin file always; on GRUB hosts also the GRUB pin snippet, for the
    next-boot pin when one is set (as proxmox-boot-tool does).  Raises
    BootConfigError when GRUB's menu entry id cannot be found in grub.cfg
    (proxmox-boot-tool would write a GRUB_DEFAULT that selects nothing).
    """
    kernel_version.validate_kernel_version(version)
    files = [(kernel.PIN_FILE, version + "\n")]
    if loader == "grub":
        ids = grub_root_devids(grub_cfg_text)
        if len(ids) != 1:
            raise BootConfigError("%s has %s 'gnulinux-advanced-<id>' submenu line(s); the GRUB default entry for "
                                  "the pin cannot be built (run update-grub first)"
                                  % (kernel.GRUB_CFG, "no" if not ids else len(ids)))
        files.append((kernel.GRUB_PIN_SNIPPET, render_grub_pin(next_boot or version, ids[0])))
    return files


def pin_commands(version, has_pbt, managed_by_pbt):
    """[(name, args)] that activate a pin (after the planned files are written)."""
    if has_pbt:
        cmds = [(PBT, ["kernel", "pin", version])]
        if managed_by_pbt:
            cmds.append((PBT, ["refresh"]))
        return cmds
    return [("update-grub", [])]


def listed_by_pbt(kernel_list_text, version):
    """(listed, parsed): is ``version`` among proxmox-boot-tool's manual/automatic kernels."""
    parsed = pbt_output.parse_pbt_kernel_list(kernel_list_text)
    return version in parsed["manual"] or version in parsed["auto"], parsed


def install_command(package):
    return "apt-get", ["install", "-y", validate_package(package)]


_SET_DEFAULT = re.compile(r'^set default="?([^"\n]*)"?\s*$', re.M)
RESTORED = "the boot configuration was restored (%s), so the next boot is unchanged"


class _Flow:
    """The result being built, the commands run and skipped; fails with all of it."""

    def __init__(self, fsroot, runner, changes):
        self.fsroot, self.runner, self.changes = fsroot, runner, changes
        self.commands, self.skipped, self.result = [], [], {}

    def fail(self, msg, **extra):
        data = dict(self.result)
        data.update(commands=self.commands, skipped_commands=self.skipped, changes=self.changes.summary())
        data.update(extra)
        raise RunFailed(msg, **data)

    def run(self, name, args, restore=False, env=None):
        """(rc, out, err), or None when the command is unavailable for a non-/ root (skipped)."""
        try:
            return run_or_restore(self.runner, self.changes if restore else None, name, args, RESTORED,
                                  commands=self.commands, skipped=self.skipped, required=self.fsroot.live, env=env)
        except RunFailed as exc:
            self.fail(exc.msg, **exc.result)

    def done(self, changed, reboot_required):
        result = dict(self.result)
        result.update(changed=changed, reboot_required=reboot_required, commands=self.commands,
                      skipped_commands=self.skipped, changes=self.changes.summary())
        return result


def kernel_diff(result, series):
    """A before/after diff entry of what a kernel fix changes (package, series kernels, pin, next boot), or
    None when nothing changes: the files it writes have their own diffs, the package and the boot entry not."""
    if not result.get("changed"):
        return None
    pinned_after = result["pinned_after"] or "none"
    if result.get("version") is None and result["package_installed"]:
        pinned_after = "the newest %s kernel, known after the install" % series
    next_after = result.get("next_boot_kernel") or (
        "%s (the pinned kernel)" % result["version"] if result.get("version") else "the pinned %s kernel" % series)
    before = ["package %s: %s" % (result["package"], "installed" if result["series_installed_before"] else
                                  "not installed"),
              "%s kernels: %s" % (series, ", ".join(result["series_installed_before"]) or "none"),
              "pin: %s" % (result["pinned_before"] or "none"),
              "next boot: %s" % (result["next_boot_before"] or "cannot tell")]
    after = ["package %s: %s" % (result["package"], "installed by this run" if result["package_installed"] else
                                 ("installed" if result["series_installed"] else "not installed")),
             "%s kernels: %s" % (series, ", ".join(result["series_installed"]) or (
                 "the one %s brings" % result["package"] if result["package_installed"] else "none")),
             "pin: %s" % pinned_after,
             "next boot: %s" % next_after]
    return {"before_header": "kernel (package, pin, next boot)", "after_header": "kernel (package, pin, next boot)",
            "before": "".join(x + "\n" for x in before), "after": "".join(x + "\n" for x in after)}


def run_kernel_fix(fsroot, runner, changes, params, check_mode, warn, package, series, version):
    """pvetune_kernel's flow: install the series when missing, then pin ``version`` (or the newest of it).

    ``package``/``series``/``version`` are the validated options.  Returns the module result (without
    ``diff``); raises RunFailed (msg + result keys) on a failure, with the files restored where any were written.
    """
    flow = _Flow(fsroot, runner, changes)
    try:
        info, _record = bootargs_fix.detect(fsroot, None, "auto")  # files only: an idempotent run runs nothing
        state = kernel.kernel_state(fsroot, info)
    except FsError as exc:
        raise RunFailed("reading the kernel state failed: %s" % exc)
    flow.result = {
        "running": state["running"], "installed": state["installed"],
        "series_installed": series_kernels(state["images"], series),
        "series_installed_before": series_kernels(state["images"], series),
        "next_boot_before": state["next_boot_kernel"],
        "version": None, "package": package, "package_installed": False,
        "pinned_before": state["pinned"], "pinned_after": state["pinned"], "next_boot_kernel": None,
        "loader": {"name": info["loader"], "managed_by_pbt": bool(info.get("managed_by_pbt")),
                   "rule": info.get("rule"), "reason": info.get("reason")},
        "regenerated": False,
    }
    for warning in state["warnings"]:
        warn(warning)
    if not flow.result["series_installed"]:
        state, early = _install(flow, params, check_mode, info, package, series, version)
        if early is not None:
            return early
    chosen = choose_version(state["images"], series, version)
    if chosen is None:
        flow.fail("kernel %s is not installed (installed %s kernels: %s), refusing to pin"
                  % (version, series, ", ".join(flow.result["series_installed"]) or "none"))
    flow.result["version"] = chosen
    if not params["pin"]:
        nb = flow.result["next_boot_kernel"] = state["next_boot_kernel"]
        return flow.done(flow.result["package_installed"], nb is not None and nb != state["running"])
    return _pin(flow, check_mode, warn, info, state, chosen)


def _install(flow, params, check_mode, info, package, series, version):
    """Install the series; (kernel state after, None) or (None, the result to return now)."""
    name, args = install_command(package)
    if not params["install"]:
        if params["pin"]:
            flow.fail("no kernel of the %s series is installed and install=false; nothing to pin" % series)
        return None, flow.done(False, False)
    if check_mode:
        flow.result["package_installed"] = True
        flow.result["version"] = version
        flow.skipped.append({"command": " ".join([name] + args), "reason": "check mode"})
        if params["pin"]:
            flow.skipped.append({"command": "pin %s" % (version or "the newest %s kernel" % series),
                                 "reason": "check mode: the kernel to pin is known after the install"})
        return None, flow.done(True, True)
    if flow.run(name, args, env=APT_ENV) is None:
        flow.skipped.append({"command": "pin", "reason": "no %s kernel installed (install skipped)" % series})
        return None, flow.done(False, False)
    flow.result["package_installed"] = True
    state = kernel.kernel_state(flow.fsroot, info)
    flow.result["installed"] = state["installed"]
    flow.result["series_installed"] = series_kernels(state["images"], series)
    if not flow.result["series_installed"]:
        flow.fail("apt-get installed %s but no %s kernel image appeared in /boot" % (package, series))
    return state, None


def _pin(flow, check_mode, warn, info, state, chosen):
    fsroot, changes = flow.fsroot, flow.changes
    loader, managed = info["loader"], bool(info.get("managed_by_pbt"))
    changed = flow.result["package_installed"]
    has_pbt = flow.runner.which(PBT) is not None
    if not has_pbt and (loader == "systemd-boot" or managed):
        if fsroot.live:
            flow.fail("proxmox-boot-tool manages this host's ESPs but is not installed; cannot pin")
        flow.skipped.append({"command": "proxmox-boot-tool kernel pin %s" % chosen,
                             "reason": "root is %s and it provides no proxmox-boot-tool stand-in" % fsroot.root})
        return flow.done(changed, chosen != state["running"])
    grub_cfg = None
    if loader == "grub":
        try:
            grub_cfg = fsroot.read_text(kernel.GRUB_CFG) if fsroot.isfile(kernel.GRUB_CFG) else None
        except FsError as exc:
            flow.fail("cannot read %s: %s" % (kernel.GRUB_CFG, exc))
    next_boot = state["next_boot"] if loader == "grub" else None
    try:
        planned = plan_pin_files(chosen, loader, next_boot=next_boot, grub_cfg_text=grub_cfg)
    except BootConfigError as exc:
        flow.fail("cannot pin %s: %s" % (chosen, exc))
    # What the host booted next before this fix, kept with the pin file's original for rollback to name.
    note = {"next_boot_before": flow.result["next_boot_before"],
            "package_installed": flow.result["package"] if flow.result["package_installed"] else None}
    for path, text in planned:
        changes.plan_file(path, text, note=note if path == kernel.PIN_FILE else None)
    if state["next_boot"] and state["next_boot"] != chosen:
        warn("%s pins %s for the next boot only; it takes precedence over the pin until it is used "
             "(proxmox-boot-tool kernel unpin --next-boot removes it)" % (kernel.NEXT_BOOT_PIN, state["next_boot"]))

    regenerate = False
    if not changes.changed and loader == "grub" and not managed and grub_cfg is not None:
        m = _SET_DEFAULT.search(grub_cfg)
        effective_default = (state["grub_default"] or {}).get("value") or "0"
        if m and m.group(1) != effective_default:
            regenerate = True
            warn("%s sets default %r but GRUB_DEFAULT is %r (update-grub was not run after the last "
                 "edit); regenerating it" % (kernel.GRUB_CFG, m.group(1), effective_default))

    if changes.changed:
        if has_pbt:
            listing = flow.run(PBT, ["kernel", "list"])
            if listing is not None:
                listed, parsed = listed_by_pbt(listing[1], chosen)
                if not listed:
                    flow.fail("kernel %s is not installed according to proxmox-boot-tool kernel list (it lists: %s), "
                              "refusing to pin" % (chosen, ", ".join(parsed["manual"] + parsed["auto"]) or "none"))
        cmds = pin_commands(chosen, has_pbt, managed)
        if check_mode:
            flow.skipped.extend({"command": " ".join([n] + a), "reason": "check mode"} for n, a in cmds)
        else:
            try:
                changes.apply_or_restore("the pin")
            except WriteFailed as exc:
                flow.fail(str(exc))
            for name, args in cmds:
                flow.run(name, args, restore=True)
    elif regenerate:
        if check_mode:
            flow.skipped.append({"command": "update-grub", "reason": "check mode"})
        else:
            flow.run("update-grub", [])
    flow.result["regenerated"] = regenerate

    if check_mode:
        flow.result["pinned_after"] = chosen
    else:
        after = kernel.kernel_state(fsroot, info)
        flow.result["pinned_after"] = after["pinned"]
        flow.result["next_boot_kernel"] = after["next_boot_kernel"]
        if after["next_boot_kernel"] is not None and after["next_boot_kernel"] != chosen:
            warn("the next boot uses %s (%s), not the pinned %s"
                 % (after["next_boot_kernel"], after["next_boot_reason"], chosen))
    changed = changed or changes.changed or regenerate
    expected = flow.result["next_boot_kernel"] or chosen
    return flow.done(changed, expected != state["running"])


def fix(params, run_command, check_mode, diff):
    """pvetune_kernel's one call: ``(failed, result, warnings)``."""
    def run(fsroot, runner, changes, request, warn):
        package, series, version = request
        result = run_kernel_fix(fsroot, runner, changes, params, check_mode, warn, package, series, version)
        if diff:
            # The package, pin and next boot as a before/after entry: a check run that would install the series
            # writes no file yet, and would otherwise show "changed" with nothing to read.
            summary = kernel_diff(result, series)
            result["diff"] = [summary] if summary else []
        return result
    return fix_call(params, run_command, check_mode, diff,
                    lambda p: validate_request(p["package"], p["series"], p["version"]), run)
