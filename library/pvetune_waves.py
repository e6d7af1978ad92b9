#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_waves
short_description: Plan a fleet's reboots in cluster-aware waves, and say before each wave whether it may start
description:
  - With O(state=plan), plans which hosts of a fix run reboot together, once, before any host is touched, from the
    read-only discovery of every host (the audit's reboot need and the cluster gate's C(check) reading). Each
    cluster gets a budget of nodes that may be down together, the smaller of O(cluster_max_down) and what quorum
    allows (its votes now, less the votes of nodes in HA maintenance, less the quorum). Where the cluster runs Ceph,
    nodes go together only when one node's C(ceph osd ok-to-stop --max) answer (C(ceph_with) in the gate's C(wave))
    holds the others' OSDs, and with no more monitors than may stop (C(mon_spare)).
  - A canary wave comes first (O(canary) hosts, standalone ones preferred); then each wave takes up to each
    cluster's budget, the clusters with the most nodes left first, standalone hosts fill the free slots, and no
    wave has more than O(max_parallel) hosts. The node that runs the HA manager master goes last in its cluster. A
    host the cluster gate refuses now is blocked, with the reason.
  - With O(state=between), says whether the next wave may start (C(fix.stop) and C(fix.pause) in O(control_dir),
    the maintenance O(windows), the O(gate_cmd)); it waits while the pause file exists.
  - Runs on the controller; the action plugin of the same name runs it in-process and gives O(forks).
version_added: "0.4.0"
author:
  - pvetune contributors (@pvetune)
options:
  state:
    description: C(plan) before the rollout, C(between) before each wave.
    type: str
    choices: [plan, between]
    default: plan
  discovery:
    description:
      - Host name to C({reboot, gate}), in inventory order. C(reboot) is whether the host's fixes need a reboot (the
        audit's prediction); C(gate) the C(cluster) result of M(pvetune_cluster_gate) with O(state=check) (its
        C(wave), C(allowed) and C(refusals)), required for a host that needs a reboot.
    type: dict
    default: {}
  cluster_max_down:
    description: The most nodes of one cluster down at once (C(pvetune_cluster_max_down)).
    type: int
    default: 1
  max_parallel:
    description: The most reboots at once fleet-wide (C(pvetune_max_parallel)).
    type: int
    default: 10
  canary:
    description: Hosts in the first wave, alone before the others (C(pvetune_canary)); 0 for none.
    type: int
    default: 1
  minutes:
    description: Minutes one wave takes (fix, reboot, gates), for the plan's expected wall time.
    type: float
    default: 6.0
  batch:
    description: Whether the hosts that need no reboot go to fix.yml's batch play (C(pvetune_batch) is set).
    type: bool
    default: false
  serial:
    description: C(pvetune_serial), how many of the hosts that do not reboot by the plan the rolling play takes at once.
    type: raw
    default: 1
  forks:
    description: Ansible's forks; the plan warns when a wave is larger. The action plugin sets it.
    type: int
  wave:
    description: With O(state=between), the index (from 0) of the wave about to start.
    type: int
    default: 0
  waves:
    description: With O(state=between), how many waves the plan has.
    type: int
    default: 0
  control_dir:
    description: With O(state=between), the directory of the stop file C(fix.stop) and the pause file C(fix.pause).
    type: path
  windows:
    description:
      - Maintenance windows (C(pvetune_reboot_windows)), in the controller's local time; outside them no wave
        starts. Each is C({days, start, end}); C(days) are C(mon) to C(sun) (all when absent), C(start) and C(end)
        C(HH:MM). A range whose end is not after its start runs past midnight. Empty, a wave may start any time.
    type: list
    elements: raw
    default: []
  gate_cmd:
    description: A command (a list of words, or a string split as a shell would; no shell runs it) whose non-zero
      exit stops the rollout before the next wave (C(pvetune_wave_gate_cmd)).
    type: raw
  gate_timeout:
    description: Seconds the gate command may take; a timeout counts as a non-zero exit.
    type: int
    default: 300
  pause_poll:
    description: Seconds between looks at the pause file.
    type: int
    default: 10
  pause_timeout:
    description: Seconds to wait while the pause file exists before stopping instead (C(pvetune_pause_timeout)).
    type: int
    default: 86400
attributes:
  check_mode:
    support: full
    details: With O(state=between) it says what it would do, and never waits, runs the gate command or stops.
  diff_mode:
    support: none
    details: Nothing is changed.
  platform:
    platforms: posix
    details: Runs on the controller (C(delegate_to) localhost, C(run_once)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
"""

EXAMPLES = r"""
- name: Plan the reboot waves
  pvetune_waves:
    discovery: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'pvetune_found'))) }}"
    cluster_max_down: 1
    max_parallel: 10
  delegate_to: localhost
  run_once: true
  register: plan

- name: May the next wave start?
  pvetune_waves:
    state: between
    wave: 1
    waves: 4
    control_dir: /srv/pvetune/reports
    windows:
      - {days: [sat, sun], start: "22:00", end: "06:00"}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
plan:
  description: With O(state=plan), C(waves) (lists of hosts), C(why) (host to why its wave), C(blocked) (host to
    reason), C(budgets) (cluster to its budget and reason), C(no_reboot), C(cap), C(max_parallel), C(canary).
  returned: state is plan
  type: dict
order:
  description: The rolling play's hosts in order, those that do not reboot by the plan first, then the waves.
  returned: state is plan
  type: list
  elements: str
serial:
  description: The rolling play's batch sizes for RV(order).
  returned: state is plan
  type: list
  elements: int
wave_of:
  description: Host name to the index of its wave.
  returned: state is plan
  type: dict
lines:
  description: The plan as the operator reads it.
  returned: state is plan
  type: list
  elements: str
stop:
  description: With O(state=between), whether the rollout stops before this wave (never in check mode).
  returned: state is between
  type: bool
reason:
  description: Why it stops (or would), or an empty string.
  returned: state is between
  type: str
waited:
  description: Seconds waited for the pause file to go.
  returned: state is between
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.cluster.waves import ARGUMENT_SPEC, waves_call
from ansible.module_utils.pvetune.core.module_exit import finish


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *waves_call(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
