# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA balancing: reader of kernel.numa_balancing (runtime and persisted in sysctl.d) and the evaluator of
kernel.numa_balancing; ``plan_sysctl`` is the fix (runtime value and the pvetune sysctl.d drop-in).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.bootargs import _configured_args, _effective_args
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats import sysctl_conf

SYSCTL_KEYS = ("kernel.numa_balancing",)


def gather_sysctl(fsroot):
    persisted = sysctl_conf.read_sysctl_persisted(fsroot, SYSCTL_KEYS)
    out = {}
    for key in SYSCTL_KEYS:
        out[key] = {"runtime": fsroot.try_value(sysctl_conf.sysctl_path(key)),
                    "persisted": persisted["values"][key], "files": persisted["files"]}
    out["errors"] = persisted["errors"]
    return out


# -- sysctl ------------------------------------------------------------------
def check_numa_balancing(facts, policy):
    cid = "kernel.numa_balancing"
    err = section_error(facts, "sysctl")
    if err:
        return make_result(cid, policy, "error", None, err)
    data = (facts["sysctl"] or {}).get("kernel.numa_balancing") or {}
    runtime = data.get("runtime")
    persisted = data.get("persisted")
    want = str(policy["numa_balancing"])
    ev = ["/proc/sys/kernel/numa_balancing = %s" % runtime]
    if persisted:
        ev.append("%s:%d kernel.numa_balancing = %s" % (persisted["file"], persisted["line"], persisted["value"]))
    else:
        ev.append("no kernel.numa_balancing in %s" % ", ".join(data.get("files") or ["sysctl.d"]))
    if runtime is None:
        return make_result(cid, policy, "skip", None,
                           "/proc/sys/kernel/numa_balancing does not exist (kernel without NUMA balancing or one node)",
                           evidence=ev)
    if not runtime.isdigit():
        return make_result(cid, policy, "error", runtime[:40],
                           "/proc/sys/kernel/numa_balancing holds %r, not a number" % runtime[:40], evidence=ev)
    cmdline_off = "numa_balancing=disable" in _effective_args(facts)
    conf_off = "numa_balancing=disable" in (_configured_args(facts) or [])
    persisted_ok = (persisted is not None and persisted["value"] == want) or (want == "0" and conf_off)
    if persisted:
        persisted_text = persisted["value"]
    else:
        persisted_text = "cmdline numa_balancing=disable" if conf_off else "no"
    current = "runtime %s, persisted %s" % (runtime, persisted_text)
    if runtime == want and persisted_ok:
        return make_result(cid, policy, "pass", current, "numa_balancing is %s and persisted" % want, evidence=ev)
    if runtime == want:
        return make_result(cid, policy, "fail", current,
                           "numa_balancing is %s now but not persisted: it returns to the kernel default at the next "
                           "boot" % want, evidence=ev)
    msg = "numa_balancing is %s at runtime" % runtime
    if persisted_ok:
        msg += " although %s is persisted (set it at runtime: sysctl -w kernel.numa_balancing=%s)" % (want, want)
    if cmdline_off:
        msg += "; numa_balancing=disable is on the command line"
    return make_result(cid, policy, "fail", current, msg, evidence=ev)


# -- fix: runtime value and the pvetune sysctl.d drop-in (pvetune_sysctl) -----------------------------------
# \Z, not $: "$" also matches before a trailing newline ("kernel.numa_balancing\n" would pass).
KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+\Z")
VALUE = re.compile(r"^[A-Za-z0-9 ._:/-]{1,64}\Z")
SYSCTL_FILE = re.compile(r"^/etc/sysctl\.d/[A-Za-z0-9_.-]+\.conf$")


class SysctlError(ValueError):
    """A bad option or host state; the message is the module's msg."""

    def __init__(self, msg, **extra):
        ValueError.__init__(self, msg)
        self.extra = extra


def validate_settings(raw, dropin):
    settings = {}
    for key, value in raw.items():
        if isinstance(value, bool):
            value = int(value)
        value = str(value).strip()
        if not KEY.match(key):
            raise SysctlError("settings: %r is not a sysctl key" % key)
        if not VALUE.match(value) or (value.startswith("-") and not value[1:2].isdigit()) or ".." in value:
            raise SysctlError("settings: value %r of %s is not a plain sysctl value (%s, no leading '-' except "
                              "a negative number, no '..')" % (value[:40], key, VALUE.pattern))
        settings[key] = value
    if not settings:
        raise SysctlError("settings must not be empty")
    if not SYSCTL_FILE.match(dropin):
        raise SysctlError("file must be /etc/sysctl.d/<name>.conf, got %r" % dropin)
    return settings


def plan_sysctl(fsroot, changes, settings, dropin, runtime=True, persist=True):
    """Plan the runtime writes and the drop-in into ``changes``; returns {key: {before, after}}."""
    planned = {}
    for key, value in sorted(settings.items()):
        path = sysctl_conf.sysctl_path(key)
        current = fsroot.try_value(path)
        if current is None:
            raise SysctlError("%s does not exist: the running kernel has no sysctl %s" % (path, key))
        if not VALUE.match(current):
            raise SysctlError("%s holds %r, which is not a sysctl value; not changing it (is this procfs?)"
                              % (path, current[:40]))
        planned[key] = {"before": current, "after": value if runtime else current}
        if runtime:
            changes.plan_runtime("sysctl:" + key, path, current, value)
    if persist:
        changes.plan_file(dropin, sysctl_conf.render_sysctl_dropin(settings))
        # Would a later sysctl.d file override ours at boot?
        overridden = []
        effective = sysctl_conf.read_sysctl_persisted(changes.planned_view(), list(settings))
        for key, value in settings.items():
            eff = effective["values"].get(key)
            if eff is None or eff["value"] != value:
                where = "%s:%s sets %s" % (eff["file"], eff["line"], eff["value"]) if eff else "nothing sets it"
                overridden.append("%s: %s" % (key, where))
        if overridden:
            raise SysctlError("a later sysctl file overrides pvetune's drop-in at boot: %s; fix that file or "
                              "choose a later drop-in name (option file)" % "; ".join(overridden))
    return planned


def apply_sysctl(fsroot, changes):
    try:
        changes.apply()
        for rt in changes.runtime:
            with open(fsroot.path(rt["path"]), "w") as handle:
                handle.write(rt["after"] + "\n")
            now = fsroot.read_value(rt["path"])
            if now != rt["after"]:
                raise SysctlError("%s still reads %s after writing %s" % (rt["path"], now, rt["after"]))
    except (OSError, IOError, FsError, ChangeError) as exc:
        raise SysctlError("writing failed: %s" % exc, changes=changes.summary())


def fix_sysctl(params, check_mode, diff):
    """pvetune_sysctl's entry point: the module result; raises ValueError (SysctlError: msg, extra) on failure."""
    settings = validate_settings(params["settings"], params["file"])
    fsroot = FsRoot(params["root"])
    changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
    planned = plan_sysctl(fsroot, changes, settings, params["file"], params["runtime"], params["persist"])
    if not check_mode:
        apply_sysctl(fsroot, changes)
    result = {"changed": changes.changed, "runtime": planned, "file": params["file"],
              "reboot_required": False, "changes": changes.summary()}
    if diff:
        result["diff"] = changes.diffs()
    return result


SECTIONS = (("sysctl", lambda ctx: gather_sysctl(ctx.fsroot)),)
CHECKS = {"kernel.numa_balancing": check_numa_balancing}
