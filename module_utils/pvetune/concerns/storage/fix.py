# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The storage.zfs_arc fix (pvetune_zfs_arc, fix tag zfs, opt-in policy zfs_arc_fix): the ARC's maximum, and a
minimum below it where ZFS's default minimum (RAM/32) would not be, in one modprobe.d file and in the loaded module.

OpenZFS takes a runtime zfs_arc_max only above arc_c_min and a zfs_arc_min only up to arc_c_max (arc_tuning_update(),
module/zfs/arc.c), so the minimum is written first when the new maximum is below the current minimum, else last.
With root on ZFS the module loads from the initramfs, which is regenerated (update-initramfs -u -k all, as the
Proxmox VE admin guide says) so the next boot reads the file.  The ARC's c_max is read back: where the loaded module
did not move it (it ignored the value, or the root is a tree without a kernel) the result asks for a reboot.
rollback.yml removes the file, writes the parameters' old values back (0 at runtime leaves c_max where it is until
the next boot: OpenZFS ignores a runtime 0) and regenerates the initramfs again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.mem.checks import read_meminfo
from ansible.module_utils.pvetune.concerns.storage.checks import ZFS_PARAMS, arc_target, read_arc, read_mounts
from ansible.module_utils.pvetune.core.changeset import WriteFailed
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.policy import BY_KEY
from ansible.module_utils.pvetune.core.runner import RunFailed, run_or_restore
from ansible.module_utils.pvetune.formats.modprobe_conf import read_options
from ansible.module_utils.pvetune.formats.proc_text import mount_of

# After the installer's /etc/modprobe.d/zfs.conf in modprobe's name order: the last value of an option wins.
CONF = "/etc/modprobe.d/zz-pvetune-zfs.conf"
INITRAMFS = ("update-initramfs", ["-u", "-k", "all"])
HEADER = ("# Managed by pvetune (fix.yml --tags zfs, check storage.zfs_arc); rollback.yml removes this file.\n"
          "# The ARC's maximum beside the CTs' memory (docs/checks.md); read when zfs loads (from the initramfs\n"
          "# when root is on ZFS: update-initramfs -u -k all after a change).\n")


def root_on_zfs(fsroot):
    """Whether / is a ZFS dataset (then zfs loads from the initramfs); False when /proc/mounts cannot tell."""
    mount = mount_of("/", read_mounts(fsroot)[0])
    return mount is not None and mount["fstype"] == "zfs"


def _validate(params):
    error = BY_KEY["zfs_arc_max"].check(params["arc_max"])
    if error:
        raise ValueError("arc_max: %s" % error)
    return {"arc_max": params["arc_max"]}


def plan(state, ram, arc_max):
    """``(max, min or None, [(option, value)] in the order to write them at runtime)``: min is set only where ZFS's
    default minimum (RAM/32, or the current c_min) is not below the new maximum."""
    target = arc_target({"zfs_arc_max": arc_max}, ram)
    c_min = (state.get("arcstats") or {}).get("c_min") or ram // 32
    new_min = target // 2 if max(c_min, ram // 32) >= target else None
    order = [("zfs_arc_max", target)]
    if new_min is not None:
        order = [("zfs_arc_min", new_min)] + order if target <= c_min else order + [("zfs_arc_min", new_min)]
    return target, new_min, order


def _run(fsroot, runner, changes, request, warn):
    state = read_arc(fsroot)
    if not state["loaded"]:
        return {"changed": False, "reboot_required": False, "changes": changes.summary(), "skipped_commands": [],
                "msg": "%s is not there: the zfs module is not loaded, nothing to cap" % ZFS_PARAMS}
    if state["errors"]:
        raise RunFailed("; ".join(state["errors"]))
    try:
        ram = (read_meminfo(fsroot).get("MemTotal") or 0) * 1024
    except FsError as exc:
        raise RunFailed("%s: %s" % (exc.path, exc.reason))
    if not ram:
        raise RunFailed("/proc/meminfo gives no MemTotal: the ARC's cap is a share of RAM")
    target, new_min, order = plan(state, ram, request["arc_max"])
    conf = state["configured"].get("zfs_arc_max") or {}
    if (state["params"].get("zfs_arc_max") == target and (state["arcstats"] or {}).get("c_max") == target
            and conf.get("value") == str(target)):
        # Capped as wanted, configured and loaded (the installer's zfs.conf, or an earlier run): at module load ZFS
        # lowered its minimum itself, so nothing is written.
        return {"changed": False, "arc_max": target, "arc_min": None, "ram": ram, "reboot_required": False,
                "changes": changes.summary(), "commands": [], "skipped_commands": [],
                "msg": "zfs_arc_max %d is configured (%s) and loaded" % (target, conf["file"])}
    line = "options zfs %s\n" % " ".join("%s=%d" % kv for kv in sorted(order, key=lambda kv: kv[0] != "zfs_arc_min"))
    changes.plan_file(CONF, (HEADER + line).encode("utf-8"))
    effective = read_options(changes.planned_view(), "zfs", ("zfs_arc_max", "zfs_arc_min"))
    for name, value in order:
        got = effective.get(name)
        if got is None or got["value"] != str(value):
            raise RunFailed("%s sets %s=%s after %s: modprobe would use that value; remove it there" % (
                got["file"] if got else "a later file", name, got["value"] if got else "?", CONF))
    for name, value in order:
        changes.plan_runtime("zfs:" + name, "%s/%s" % (ZFS_PARAMS, name), str(state["params"][name]), str(value))
    commands, skipped = [], []
    if changes.changed and not changes.check_mode:
        try:
            changes.apply_or_restore(CONF)
            for rt in changes.runtime:
                with open(fsroot.path(rt["path"]), "w") as handle:
                    handle.write(rt["after"] + "\n")
        except (WriteFailed, OSError, IOError, FsError) as exc:
            raise RunFailed("writing failed: %s" % exc, changes=changes.summary())
        if root_on_zfs(fsroot) and any(f["path"] == CONF for f in changes.summary()["files"]):
            run_or_restore(runner, changes, INITRAMFS[0], INITRAMFS[1], "the modprobe.d file was removed again "
                           "(%s)", commands=commands, skipped=skipped, required=False,
                           purpose=" (root is on ZFS: zfs loads from the initramfs)")
    if changes.check_mode and root_on_zfs(fsroot):
        skipped.append({"command": " ".join([INITRAMFS[0]] + INITRAMFS[1]), "reason": "check mode"})
    # Did the loaded module take it? ZFS moves c_max at once (arc_tuning_update); where it did not (it ignored the
    # value, or the root is a tree without a kernel), the file applies when zfs loads again.
    c_max = (read_arc(fsroot).get("arcstats") or {}).get("c_max")
    pending = not changes.check_mode and changes.changed and c_max != target
    return {"changed": changes.changed, "arc_max": target, "arc_min": new_min, "ram": ram,
            "reboot_required": pending, "changes": changes.summary(), "commands": commands,
            "skipped_commands": skipped,
            "msg": ("the loaded zfs module kept c_max %s: the cap applies when zfs loads again" % c_max
                    if pending else "")}


def fix(params, run_command, check_mode, diff):
    """pvetune_zfs_arc's one call: (failed, result, warnings)."""
    return fix_call(params, run_command, check_mode, diff, _validate, _run)
