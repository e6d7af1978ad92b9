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
  numa_pin:
    description:
      - Also pin the CPUs of every chosen GPU CT whose CPUs include none (or not all) of its GPUs' NUMA nodes, by
        setting C(lxc.cgroup2.cpuset.cpus) (C(lxc.cgroup.cpuset.cpus) on cgroup v1) to the CPUs of those nodes, in the
        same in-place write (the audit's check C(lxc.resources) decides which CTs, from the GPUs' C(numa_node),
        C(/proc/driver/nvidia/gpus/*/information) and the CT's cgroup).
      - A CT whose configured cpuset is already right is left alone; the pin takes effect at the CT's next start
        (O(restart) restarts running CTs whose config changed).
      - The role sets it from policy C(lxc_numa_pin).
    type: bool
    default: false
notes:
  - Never returns C(reboot_required=true); the host does not need a reboot for this fix.
  - With a root other than C(/) and no C(pct) stand-in, the running state of the CTs is unknown and nothing is
    restarted.
attributes:
  check_mode:
    support: full
    details: Nothing is written, no CT config lock is taken and nothing is restarted; C(pct status) still runs
      because it only reads.
  diff_mode:
    support: full
    details: The CT config diffs and, when it changes, the NVIDIA majors state file.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_gpu_health
    description: Checks afterwards that the GPUs answer inside the running CTs.
  - module: pvetune_runtime
    description: Installs the boot unit that regenerates the entries again at every boot.
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
skipped:
  description:
    - Files in the CT config directory that are no CT config to Proxmox (for example C(0101.conf), since a vmid
      has no leading zero), with the reason. The audit names the same files.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "0101.conf", "path": "/etc/pve/lxc/0101.conf", "reason": "not a CT config (leading zero)"}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.lxcgpu.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    ctids={"type": "list", "elements": "raw", "default": []},
    restart={"type": "bool", "default": False},
    restart_timeout={"type": "int", "default": 120},
    cgroup_version={"type": "str", "choices": ["auto", "1", "2"], "default": "auto"},
    fail_on_refused={"type": "bool", "default": True},
    numa_pin={"type": "bool", "default": False},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
