#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_lxc_gpu
short_description: Regenerate the NVIDIA device entries of Proxmox VE containers for the current majors
description:
  - The nvidia-uvm (and nvidia-caps, nvidia-nvlink, ...) character-device majors are dynamic and can change
    across reboots and driver updates. A container whose C(lxc.cgroup2.devices.allow) lines name an old
    major still starts, but CUDA fails inside it.
  - Reads the host's NVIDIA majors (C(/proc/devices)) and device nodes (C(/dev/nvidia*)) and rewrites only
    the NVIDIA allow lines (and missing CUDA control-node mounts) of the main section of each chosen CT
    config. Comments, snapshot sections, C([pve:pending]), other devices and unknown keys stay byte for byte.
  - Configs live on pmxcfs (C(/etc/pve)) and are written in place after a byte-exact backup to
    C(/var/lib/pvetune/runs/<run_id>/) (first touch also to C(/var/lib/pvetune/originals/), for rollback.yml).
    The path used is the node directory C(/etc/pve/lxc) links to (C(/etc/pve/nodes/<node>/lxc/<id>.conf)).
  - Each config is read and written while holding Proxmox's own CT config lock
    (C(/run/lock/lxc/pve-config-<id>.lock)), not in check mode.
  - Records the NVIDIA majors in C(/var/lib/pvetune/nvidia-majors.json) (union with earlier runs, plus a history
    of changes), so a later run still recognises an old NVIDIA major after the kernel gave it to another driver.
  - A CT that pvetune cannot rewrite with certainty (allow-all rule, C(lxc.include), unparseable rule, NVIDIA node
    missing on the host, CT locked by a Proxmox task, ...) is left unchanged and reported as C(refused).
  - A running CT keeps the device rules it was started with. It needs a restart when its config changed, or when
    the rules it was started with (C(/var/lib/lxc/<id>/config), written by Proxmox at every start) do not cover
    the NVIDIA nodes it uses. With O(restart=true) such CTs are restarted one by one with C(pct reboot).
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description:
      - Directory treated as C(/) for every read and write.
      - With a root other than C(/), C(pct) is only taken from C(<root>/.pvetune/bin/) (test stand-ins);
        without one the running state of the CTs is unknown and nothing is restarted.
    type: path
    default: /
  run_id:
    description: Identifier of the fix run; names the per-run backup directory under C(/var/lib/pvetune/runs/).
    type: str
  ctids:
    description:
      - CT ids to regenerate (integers or digit strings, 100-999999999). Every id must have a config on this node.
      - Empty means every CT that passes NVIDIA devices (NVIDIA mount entries, C(devN) entries, allow lines for
        major 195, or an NVIDIA LXC hook).
    type: list
    elements: raw
    default: []
  restart:
    description:
      - Restart running CTs that need it (see description) with C(pct reboot <id> --timeout <restart_timeout>),
        a clean shutdown and start under the CT's lock. CTs are restarted one at a time; the first failure stops
        the restarts and fails the task, naming the CT.
      - Never in check mode. A CT with pending changes (C([pve:pending])) is not restarted, because a restart
        would apply those too; it is listed in RV(restart_required).
    type: bool
    default: false
  restart_timeout:
    description: Seconds C(pct reboot) waits for the clean shutdown of a CT (0-3600).
    type: int
    default: 120
  cgroup_version:
    description:
      - Which allow-line keys must cover the nodes. V(auto) reads it from the root
        (C(/sys/fs/cgroup/cgroup.controllers) means 2); V(2) is C(lxc.cgroup2.devices.allow) (Proxmox VE 7+),
        V(1) is C(lxc.cgroup.devices.allow).
    type: str
    choices: [auto, "1", "2"]
    default: auto
  fail_on_refused:
    description:
      - Fail the task when a chosen CT was refused. Every other CT is still fixed (and restarted) first.
      - A refused GPU CT usually means CUDA is broken in it and needs a human, so this defaults to true.
        With false the task succeeds, warns, and lists the CTs in RV(refused).
    type: bool
    default: true
notes:
  - Supports check mode (nothing is written, no lock taken, nothing restarted; C(pct status) still runs because it
    only reads) and diff mode (the CT config diffs and, when it changes, the state file).
  - Never returns C(reboot_required=true); the host does not need a reboot for this fix.
"""

EXAMPLES = r"""
- name: Regenerate the NVIDIA entries of every GPU container, restart the running ones that need it
  pvetune_lxc_gpu:
    run_id: "{{ pvetune_run_id }}"
    restart: true
  register: lxc

- name: Only CT 101 and 103, report which need a restart
  pvetune_lxc_gpu:
    ctids: [101, 103]
"""

RETURN = r"""
cts:
  description: One entry per chosen CT (CTs without NVIDIA devices are left out when O(ctids) is empty).
  returned: always
  type: list
  elements: dict
  contains:
    ctid:
      description: CT id.
      type: int
    path:
      description: Config path (the node directory /etc/pve/lxc points to).
      type: str
    changed:
      description: The config was (check mode, would be) rewritten.
      type: bool
    lines:
      description: "Changed lines as C(-<line>: old) and C(+<line>: new) (C(! reason) when refused)."
      type: list
      elements: str
    changes:
      description: The edits (action replace/add/remove, line_no, old, new, reason).
      type: list
      elements: dict
    running:
      description: Running according to C(pct status); null when not asked or unknown.
      type: bool
    needs_restart:
      description: Running with device rules that are not the config's.
      type: bool
    restarted:
      description: Restarted by this run.
      type: bool
    status:
      description: unchanged, changed, refused or restart_failed.
      type: str
    reason:
      description: Why the CT was refused or failed to restart.
      type: str
    messages:
      description: Further notes.
      type: list
      elements: str
  sample: [{"ctid": 101, "path": "/etc/pve/nodes/pve-gpu01/lxc/101.conf", "changed": true,
            "lines": ["-14: lxc.cgroup2.devices.allow: c 511:* rwm", "+14: lxc.cgroup2.devices.allow: c 509:* rwm"],
            "needs_restart": true, "restarted": false, "running": true, "status": "changed"}]
host_majors:
  description: NVIDIA driver name -> current char major (from /proc/devices).
  returned: always
  type: dict
  sample: {"nvidia": 195, "nvidia-caps": 508, "nvidia-uvm": 509}
known_majors:
  description: Majors recorded as NVIDIA's by earlier runs (before this run), with their last driver name.
  returned: always
  type: dict
nodes_source:
  description: Where the host's NVIDIA nodes came from (stat, ls = .pvetune/dev_nvidia.ls of a snapshot, none).
  returned: always
  type: str
cgroup_version:
  description: The cgroup version used (null when unknown; every key family present must then cover).
  returned: always
  type: int
state_file:
  description: The NVIDIA majors state file.
  returned: always
  type: str
  sample: /var/lib/pvetune/nvidia-majors.json
state_changed:
  description: The state file was (check mode, would be) updated.
  returned: always
  type: bool
restart_required:
  description: CT ids that run with outdated device rules and were not restarted.
  returned: always
  type: list
  elements: int
restarted:
  description: CT ids restarted by this run.
  returned: always
  type: list
  elements: int
refused:
  description: CT ids left unchanged because pvetune could not rewrite them with certainty.
  returned: always
  type: list
  elements: int
reboot_required:
  description: Always false.
  returned: always
  type: bool
changes:
  description: Planned or applied file changes (changeset summary).
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason (C(pct) unavailable for a root other than C(/)).
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import lxcfix
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "run_id": {"type": "str"},
            "ctids": {"type": "list", "elements": "raw", "default": []},
            "restart": {"type": "bool", "default": False},
            "restart_timeout": {"type": "int", "default": 120},
            "cgroup_version": {"type": "str", "choices": ["auto", "1", "2"], "default": "auto"},
            "fail_on_refused": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    # Every option is checked before anything is read for writing or any command runs.
    try:
        ctids = lxcfix.validate_ctids(p["ctids"])
        cgroup_option = lxcfix.validate_cgroup_version(p["cgroup_version"])
        if not 0 <= p["restart_timeout"] <= 3600:
            raise ValueError("restart_timeout must be 0-3600 seconds")
        fsroot = FsRoot(p["root"])
        changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=p["run_id"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    runner = Runner(fsroot, module.run_command)
    result = {"changed": False, "cts": [], "host_majors": {}, "known_majors": {}, "nodes_source": None,
              "cgroup_version": None, "state_file": lxcfix.STATE_FILE, "state_changed": False,
              "restart_required": [], "restarted": [], "refused": [], "reboot_required": False,
              "changes": changes.summary(), "skipped_commands": []}

    try:
        host = lxcfix.read_host(fsroot)
    except FsError as exc:
        module.fail_json(msg="cannot read the NVIDIA device state: %s" % exc, **result)
    result["host_majors"] = host["majors"]
    result["nodes_source"] = host["nodes_source"]
    state, state_error = lxcfix.load_state(fsroot)
    if state_error:
        module.fail_json(msg="%s; fix or remove it (it records which majors were NVIDIA's)" % state_error, **result)
    known = lxcfix.known_majors(state)
    result["known_majors"] = {str(k): v for k, v in sorted(known.items())}
    cgroup_version = lxcfix.effective_cgroup_version(fsroot, cgroup_option)
    result["cgroup_version"] = cgroup_version

    locks = None if module.check_mode else lxcfix.CtLocks(fsroot)
    try:
        try:
            _base, items = lxcfix.select_and_plan(fsroot, host, known, cgroup_version, ctids, changes, locks)
        except (lxcfix.LxcFixError, FsError) as exc:
            module.fail_json(msg=str(exc), **result)
        try:
            changes.apply()
        except (OSError, IOError, FsError, ChangeError) as exc:
            restored = changes.restore_run()
            module.fail_json(msg="writing failed: %s; restored %s" % (exc, ", ".join(restored) or "nothing"),
                             **result)
    finally:
        if locks is not None:
            locks.release_all()

    new_state, state_changed = lxcfix.updated_state(state, host["majors"], changes.run_id, "pvetune_lxc_gpu")
    result["state_changed"] = state_changed
    if state_changed and not module.check_mode:
        try:
            lxcfix.write_state(fsroot, new_state)
        except (OSError, IOError, FsError) as exc:
            module.fail_json(msg="cannot write %s: %s" % (lxcfix.STATE_FILE, exc), **result)

    lxcfix.decide_restarts(fsroot, runner, items, host, cgroup_version, result["skipped_commands"])
    restart_error = None
    for item in items:
        if not item["needs_restart"]:
            continue
        ct = item.get("_ct")
        if restart_error or not p["restart"] or module.check_mode:
            continue
        if ct is not None and lxcfix.PENDING_SECTION in ct.sections:
            item["messages"].append("not restarted: the CT has pending changes ([pve:pending]) that a restart "
                                    "would apply too; restart it yourself")
            continue
        lock = lxcfix.main_value(ct, "lock") if ct is not None else None
        if lock:
            item["messages"].append("not restarted: the CT is locked (lock: %s)" % lock)
            continue
        try:
            error = lxcfix.restart_ct(runner, item["ctid"], p["restart_timeout"])
        except CommandUnavailable as exc:
            result["skipped_commands"].append({"command": "pct reboot %d" % item["ctid"], "reason": exc.reason})
            item["messages"].append("not restarted: %s" % exc.reason)
            continue
        if error:
            item["status"] = lxcfix.RESTART_FAILED
            item["reason"] = error
            restart_error = "CT %d failed to restart: %s" % (item["ctid"], error)
        else:
            item["restarted"] = True
            result["restarted"].append(item["ctid"])

    result["cts"] = [lxcfix.public_item(i) for i in items]
    result["restart_required"] = [i["ctid"] for i in items if i["needs_restart"] and not i["restarted"]]
    result["refused"] = [i["ctid"] for i in items if i["status"] == lxcfix.REFUSED]
    result["changes"] = changes.summary()
    result["changed"] = bool(changes.changed or state_changed or result["restarted"])
    if module._diff:
        diffs = changes.diffs()
        if state_changed:
            diffs.append({"before_header": lxcfix.STATE_FILE, "after_header": lxcfix.STATE_FILE,
                          "before": fsroot.read_text(lxcfix.STATE_FILE) if fsroot.exists(lxcfix.STATE_FILE) else "",
                          "after": lxcfix.render_state(new_state).decode("utf-8")})
        result["diff"] = diffs

    if restart_error:
        not_tried = [i["ctid"] for i in items if i["needs_restart"] and not i["restarted"]
                     and i["status"] != lxcfix.RESTART_FAILED]
        module.fail_json(msg="%s; restarts stopped there%s. The config changes stay applied (they are correct); "
                             "start the CT by hand once the cause is fixed"
                             % (restart_error, (" (not restarted: %s)" % ", ".join(str(c) for c in not_tried))
                                if not_tried else ""), **result)
    refused = [i for i in items if i["status"] == lxcfix.REFUSED]
    if refused:
        text = "; ".join("CT %d: %s" % (i["ctid"], i["reason"]) for i in refused)
        if p["fail_on_refused"]:
            module.fail_json(msg="refused to rewrite %s (the other CTs were handled)" % text, **result)
        module.warn("left unchanged: %s" % text)
    for item in items:
        if item["needs_restart"] and not item["restarted"] and not module.check_mode:
            module.warn("CT %d runs with outdated NVIDIA device rules; restart it (pct reboot %d) or set "
                        "restart: true" % (item["ctid"], item["ctid"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
