#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_lock
short_description: Hold a per-host lock for the duration of a pvetune fix run
description:
  - With O(state=present), creates the lock file atomically (O_EXCL) and records the run id, the controller
    and the time. A second run against the same host fails with a message that names the holder and its age.
    Taking the lock again with the same run id succeeds (a rerun of the same playbook run).
  - With O(state=absent), releases the lock if this run holds it; a lock held by another run is left alone.
  - A lock older than O(stale_after) seconds is reported as stale; it is only broken with O(break_stale=true).
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description: Directory treated as C(/).
    type: path
    default: /
  run_id:
    description: Identifier of the fix run that takes or releases the lock.
    type: str
    required: true
  state:
    description: Take (V(present)) or release (V(absent)) the lock.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The lock file. Under C(/run) it disappears with a reboot, which is what a crashed run needs.
    type: path
    default: /run/pvetune/fix.lock
  owner:
    description: Who takes the lock (shown to a second run), for example the controller's user and host name.
    type: str
    default: ""
  stale_after:
    description: Age in seconds after which a lock held by another run counts as stale.
    type: int
    default: 21600
  break_stale:
    description: Take over a stale lock held by another run.
    type: bool
    default: false
notes:
  - Supports check mode; in check mode a held lock is still reported (that is read-only) but nothing is written.
"""

EXAMPLES = r"""
- name: Only one fix run per host
  pvetune_lock:
    run_id: "{{ pvetune_run_id }}"
    owner: "{{ lookup('env', 'USER') }}@{{ lookup('pipe', 'hostname') }}"

- name: Release it
  pvetune_lock:
    run_id: "{{ pvetune_run_id }}"
    state: absent
"""

RETURN = r"""
holder:
  description: The lock's content (run id, owner, time taken) after the call, or empty when released.
  returned: always
  type: dict
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.fsroot import FsRoot


def read_holder(real):
    try:
        with open(real, "rb") as handle:
            return json.loads(handle.read().decode("utf-8") or "{}")
    except FileNotFoundError:
        return None
    except ValueError:
        return {"run_id": "(unreadable lock file)", "taken_at": os.path.getmtime(real)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            run_id=dict(type="str", required=True),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            path=dict(type="path", default="/run/pvetune/fix.lock"),
            owner=dict(type="str", default=""),
            stale_after=dict(type="int", default=21600),
            break_stale=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        validate_run_id(p["run_id"])
        fsroot = FsRoot(p["root"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if (not p["path"].startswith(("/run/", "/var/lock/", "/var/lib/pvetune/")) or ".." in p["path"].split("/")
            or any(ord(c) < 32 or ord(c) == 127 for c in p["path"])):
        module.fail_json(msg="path must be under /run, /var/lock or /var/lib/pvetune, got %r" % p["path"])
    if len(p["owner"]) > 200 or any(c in p["owner"] for c in "\n\r\x00"):
        module.fail_json(msg="owner must be one short line")
    real = fsroot.path(p["path"])
    holder = read_holder(real)
    now = time.time()
    if p["state"] == "absent":
        if holder is None or holder.get("run_id") != p["run_id"]:
            module.exit_json(changed=False, holder=holder or {},
                             msg="not held by this run" if holder else "not held")
        if not module.check_mode:
            os.unlink(real)
            try:
                os.rmdir(os.path.dirname(real))  # pvetune's own lock directory, if nothing else is in it
            except OSError:
                pass
        module.exit_json(changed=True, holder={})
    if holder is not None:
        if holder.get("run_id") == p["run_id"]:
            module.exit_json(changed=False, holder=holder)
        age = now - float(holder.get("taken_at") or 0)
        stale = age > p["stale_after"]
        if not (stale and p["break_stale"]):
            module.fail_json(
                msg="another pvetune fix run holds %s on this host: run %s by %s since %s (%d s ago)%s. Wait for it "
                    "to finish; if it crashed, remove the file or rerun with pvetune_break_stale_lock=true once it "
                    "is older than %d s." % (p["path"], holder.get("run_id"), holder.get("owner") or "unknown",
                                             time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                           time.gmtime(float(holder.get("taken_at") or 0))),
                                             age, ", stale" if stale else "", p["stale_after"]),
                holder=holder)
    new = {"run_id": p["run_id"], "owner": p["owner"], "taken_at": now, "pid_note": "held across tasks, not a pid"}
    if module.check_mode:
        # Nothing is taken in check mode: say what would happen, report no change.
        module.exit_json(changed=False, holder=new, msg="check mode: the lock would be taken")
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    if holder is not None:  # breaking a stale lock
        os.unlink(real)
    try:
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        module.fail_json(msg="another pvetune fix run took %s a moment ago: %s" % (p["path"], read_holder(real)))
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(new, sort_keys=True) + "\n")
    module.exit_json(changed=True, holder=new)


if __name__ == "__main__":
    main()
