#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_cluster_gate
short_description: Decide whether a Proxmox VE node may reboot, and prepare and release it around the reboot
description:
  - O(state=check) reads the cluster the way Proxmox does and says whether this node may reboot now. The cluster
    must stay quorate without this node, counting the nodes already down (not in C(corosync-quorumtool -s)), the
    nodes whose HA LRM is in maintenance, shutdown or reboot mode and the other nodes of O(leaving).
  - Ceph must not be C(HEALTH_ERR), and C(ceph osd ok-to-stop) and C(ceph mon ok-to-stop) must agree for the up
    OSDs and the monitors of this node and of the O(leaving) nodes together.
  - With O(running_guests=refuse), no guest may run other than the GPU CTs pvetune manages and the HA services
    that maintenance moves away. A host without corosync.conf is standalone and passes the quorum rule.
  - O(state=enter) decides the same way and fails with the reasons when the reboot is refused. When it is
    allowed, it puts the node into HA maintenance and waits until no HA service runs there, and it sets noout for
    the node's OSDs. What it did is recorded in C(/var/lib/pvetune/cluster-gate.json) so that the later states undo
    exactly that.
  - O(state=rejoin), after the reboot, waits until the node is a quorate member again and pmxcfs serves a
    writable C(/etc/pve). It then waits until the node's OSDs are up, clears noout and waits until every PG is
    active+clean.
  - O(state=release), after the post-reboot gates, leaves HA maintenance and removes the record.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  state:
    description: Which step to run.
    type: str
    choices: [check, enter, rejoin, release]
    default: check
  leaving:
    description:
      - Corosync names of other nodes that may be down at the same time (the other reboots of the same rollout
        batch). They are counted as gone. Names of nodes in another cluster count nothing.
    type: list
    elements: str
    default: []
  ceph_sets:
    description:
      - Also ask Ceph which other nodes of the cluster may stop together with this one (C(ceph osd ok-to-stop
        <this node's up OSDs> --max <up OSDs> --format json)) and how many monitors may stop. The reboot wave
        planner's discovery (M(pvetune_waves)) asks it; RV(cluster.wave) carries the answer.
      - On a Ceph release without C(--max) (before Pacific) the answer is this node alone.
    type: bool
    default: false
  wait_ha:
    description:
      - With O(state=enter), V(false) only puts the node into HA maintenance (and records it). The rollout does that
        first for every node of a reboot wave, so that the HA manager does not move a service onto another node of
        the same wave (best effort, as it acts on a node's request when that node's LRM acknowledges it); the next
        O(state=enter) call of the same O(run_id) waits for the services to leave and sets noout. When that call
        refuses the reboot, it takes the node out of the maintenance the first call set.
    type: bool
    default: true
  ctids:
    description: The GPU CTs pvetune manages, which the reboot may stop. V([]) means every CT whose config passes
      NVIDIA devices.
    type: list
    elements: int
    default: []
  running_guests:
    description:
      - V(refuse) refuses the reboot while any other guest (CT or VM) runs on the node.
      - V(stop) lets the reboot stop them in Proxmox's shutdown order (C(pve-guests.service)).
    type: str
    choices: [refuse, stop]
    default: refuse
  timeout:
    description: Seconds each wait (HA services, quorum, pmxcfs, OSDs, PGs) may take before the task fails.
    type: int
    default: 900
  poll:
    description: Seconds between two looks during a wait.
    type: int
    default: 5
notes:
  - Commands run without a shell. With a root other than C(/) they come only from the stand-ins in
    C(<root>/.pvetune/bin/).
  - C(ha-manager crm-command node-maintenance) needs pve-ha-manager 3.6.0 or later (Proxmox VE 7.4). C(ceph osd
    add-noout) falls back to the global noout flag on releases without it.
attributes:
  check_mode:
    support: full
    details:
      - O(state=check) and O(state=enter) read and decide; O(state=enter) reports the steps it would take and does
        not fail on a refusal, so the plan of every host is shown. O(state=rejoin) and O(state=release) do nothing
        (no reboot happened).
  diff_mode:
    support: none
    details: The decision and RV(actions) say what happens; nothing here is a file diff.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
"""

EXAMPLES = r"""
- name: May this node reboot? (read-only)
  pvetune_cluster_gate:
    state: check
  register: gate

- name: Prepare the reboot (fails with the reasons when it would break quorum)
  pvetune_cluster_gate:
    state: enter
    run_id: "{{ pvetune_run_id }}"
    running_guests: refuse

- name: After the reboot, wait for quorum, pmxcfs and Ceph
  pvetune_cluster_gate:
    state: rejoin
    run_id: "{{ pvetune_run_id }}"
"""

RETURN = r"""
cluster:
  description: The decision (O(state=check) and O(state=enter)).
  returned: when state is check or enter
  type: dict
  contains:
    standalone:
      description: No corosync.conf.
      type: bool
    cluster_name:
      description: C(totem.cluster_name) of corosync.conf.
      type: str
    node:
      description: Corosync's name for this node.
      type: str
    allowed:
      description: Whether the node may reboot now.
      type: bool
    refusals:
      description: Why not, one entry per reason.
      type: list
      elements: str
    quorum:
      description: The quorum arithmetic (votes_after, quorum, reason).
      type: dict
    counted_gone:
      description: Other nodes counted as gone (HA maintenance, O(leaving)).
      type: list
      elements: str
    plan:
      description: Steps O(state=enter) takes (ha-maintenance, ceph-noout).
      type: list
      elements: str
    guests:
      description: Running guests other than the GPU CTs pvetune manages.
      type: list
      elements: dict
    ceph:
      description: The node's OSDs, ok-to-stop and Ceph health, or null without Ceph.
      type: dict
    ha_services_on_node:
      description: HA services that run on this node now.
      type: list
      elements: dict
    wave:
      description:
        - What the reboot wave planner (M(pvetune_waves)) needs of this node; C(cluster) is null for a standalone host
          or a one-node cluster without a qdevice.
        - C(cluster), C(members), C(node), C(votes), C(total_votes), C(quorum), C(quorate), C(maintenance_votes) (of
          the other nodes in HA maintenance), C(ha_master) (this node runs the HA manager master), C(ceph).
        - With O(ceph_sets), C(ceph_with) (the corosync names Ceph lets stop together with this node, itself first;
          null when no up OSD of this node holds it back), C(ceph_why), C(mon) (this node runs a monitor) and
          C(mon_spare) (how many monitors may stop and keep a majority).
      type: dict
actions:
  description: What this call did (or, in check mode, would do), in order.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.cluster.steps import STATES, cluster_gate
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    run_id=dict(type="str"),
    state=dict(type="str", default="check", choices=list(STATES)),
    leaving=dict(type="list", elements="str", default=[]),
    ceph_sets=dict(type="bool", default=False),
    wait_ha=dict(type="bool", default=True),
    ctids=dict(type="list", elements="int", default=[]),
    running_guests=dict(type="str", default="refuse", choices=["refuse", "stop"]),
    timeout=dict(type="int", default=900),
    poll=dict(type="int", default=5),
)
MODULE_OPTIONS = dict(required_if=[("state", "enter", ["run_id"])])


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, **MODULE_OPTIONS)
    finish(module, *cluster_gate(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
