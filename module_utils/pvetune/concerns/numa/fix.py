# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA-balancing fix (pvetune_sysctl): validate the sysctl settings, plan the runtime value and the pvetune
sysctl.d drop-in on a ChangeSet (refusing when a later sysctl.d file would override it), and apply them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.formats import sysctl_conf

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
        changes.apply_or_restore("the sysctl drop-in")
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


def fix(params, run_command, check_mode, diff):
    """pvetune_sysctl's one call: ``(failed, result, warnings)``."""
    try:
        return False, fix_sysctl(params, check_mode, diff), []
    except ValueError as exc:
        return True, dict(getattr(exc, "extra", {}), msg=str(exc)), []
