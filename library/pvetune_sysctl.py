#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_sysctl
short_description: Set kernel sysctls now and persist them in an /etc/sysctl.d drop-in
description:
  - Writes each setting to C(/proc/sys) (runtime) and renders a pvetune-owned drop-in in C(/etc/sysctl.d)
    so the value survives a reboot. Used by pvetune for C(kernel.numa_balancing=0).
  - Checks that no later sysctl.d file (in systemd-sysctl order) overrides the drop-in, and fails if one does.
  - Every file it writes is backed up first and recorded for rollback.yml.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description: Directory treated as C(/) for every read and write.
    type: path
    default: /
  settings:
    description:
      - Sysctl keys (dotted, for example C(kernel.numa_balancing)) and their values.
      - Keys must match C(^[a-z0-9_]+(\.[a-z0-9_-]+)+$); values may only contain letters, digits, space and C(._:/-).
    type: dict
    required: true
  file:
    description: The drop-in that holds the settings. pvetune owns the whole file.
    type: path
    default: /etc/sysctl.d/90-pvetune.conf
  runtime:
    description: Also set the values in C(/proc/sys) now.
    type: bool
    default: true
  persist:
    description: Write the drop-in.
    type: bool
    default: true
  run_id:
    description: Identifier of the fix run; names the per-run backup directory under C(/var/lib/pvetune/runs/).
    type: str
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Disable automatic NUMA balancing now and at boot
  pvetune_sysctl:
    settings:
      kernel.numa_balancing: 0
"""

RETURN = r"""
runtime:
  description: Runtime value of each key before and after.
  returned: always
  type: dict
  sample: {"kernel.numa_balancing": {"before": "1", "after": "0"}}
file:
  description: The drop-in path.
  returned: always
  type: str
reboot_required:
  description: Always false; sysctls apply at runtime.
  returned: always
  type: bool
changes:
  description: Planned or applied file and runtime changes.
  returned: always
  type: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.hostinfo import read_sysctl_persisted, render_sysctl_dropin, sysctl_path

# \Z, not $: "$" also matches before a trailing newline ("kernel.numa_balancing\n" would pass).
KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+\Z")
VALUE = re.compile(r"^[A-Za-z0-9 ._:/-]{1,64}\Z")
SYSCTL_FILE = re.compile(r"^/etc/sysctl\.d/[A-Za-z0-9_.-]+\.conf$")


def validate(module):
    settings = {}
    for key, value in module.params["settings"].items():
        if isinstance(value, bool):
            value = int(value)
        value = str(value).strip()
        if not KEY.match(key):
            module.fail_json(msg="settings: %r is not a sysctl key" % key)
        if not VALUE.match(value) or (value.startswith("-") and not value[1:2].isdigit()) or ".." in value:
            module.fail_json(msg="settings: value %r of %s is not a plain sysctl value (%s, no leading '-' except "
                                 "a negative number, no '..')" % (value[:40], key, VALUE.pattern))
        settings[key] = value
    if not settings:
        module.fail_json(msg="settings must not be empty")
    if not SYSCTL_FILE.match(module.params["file"]):
        module.fail_json(msg="file must be /etc/sysctl.d/<name>.conf, got %r" % module.params["file"])
    return settings


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            settings=dict(type="dict", required=True),
            file=dict(type="path", default="/etc/sysctl.d/90-pvetune.conf"),
            runtime=dict(type="bool", default=True),
            persist=dict(type="bool", default=True),
            run_id=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    settings = validate(module)
    try:
        fsroot = FsRoot(module.params["root"])
        changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=module.params["run_id"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    runtime = {}
    for key, value in sorted(settings.items()):
        path = sysctl_path(key)
        current = fsroot.try_value(path)
        if current is None:
            module.fail_json(msg="%s does not exist: the running kernel has no sysctl %s" % (path, key))
        if not VALUE.match(current):
            module.fail_json(msg="%s holds %r, which is not a sysctl value; not changing it (is this procfs?)"
                                 % (path, current[:40]))
        runtime[key] = {"before": current, "after": value if module.params["runtime"] else current}
        if module.params["runtime"]:
            changes.plan_runtime("sysctl:" + key, path, current, value)
    if module.params["persist"]:
        changes.plan_file(module.params["file"], render_sysctl_dropin(settings))
    # Would a later sysctl.d file override ours at boot?
    overridden = []
    if module.params["persist"]:
        effective = read_sysctl_persisted(changes.planned_view(), list(settings))
        for key, value in settings.items():
            eff = effective["values"].get(key)
            if eff is None or eff["value"] != value:
                where = "%s:%s sets %s" % (eff["file"], eff["line"], eff["value"]) if eff else "nothing sets it"
                overridden.append("%s: %s" % (key, where))
        if overridden:
            module.fail_json(msg="a later sysctl file overrides pvetune's drop-in at boot: %s; fix that file or "
                                 "choose a later drop-in name (option file)" % "; ".join(overridden))
    if not module.check_mode:
        try:
            changes.apply()
            for rt in changes.runtime:
                with open(fsroot.path(rt["path"]), "w") as handle:
                    handle.write(rt["after"] + "\n")
                now = fsroot.read_value(rt["path"])
                if now != rt["after"]:
                    module.fail_json(msg="%s still reads %s after writing %s" % (rt["path"], now, rt["after"]))
        except (OSError, IOError, FsError, ChangeError) as exc:
            module.fail_json(msg="writing failed: %s" % exc, changes=changes.summary())
    result = {"changed": changes.changed, "runtime": runtime, "file": module.params["file"],
              "reboot_required": False, "changes": changes.summary()}
    if module._diff:
        result["diff"] = changes.diffs()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
