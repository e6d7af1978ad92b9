#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_run_check
short_description: Check what a pvetune playbook run is asked to do, once, before any host is touched
description:
  - Says, in RV(refused), why a run must not start when it would do nothing and Ansible would still exit 0; the
    host pattern matches no host of the inventory, C(--limit) leaves none of its hosts, C(--tags) select nothing
    the playbook does; and on a run id (C(pvetune_run_id_override)) that cannot name directories. The role
    pvetune_run_check fails the hosts of RV(charged) with it, so the refusal is charged to the hosts it concerns.
  - Warns of C(--skip-tags) that name a tag the playbook does not have (a typo that skips nothing); Molecule's own
    C(molecule-notest) and C(notest) are ignored.
  - Checks every selected host's C(pvetune_policy) and reports the invalid ones in one message, grouping the hosts
    that share an error and naming the inventory variable. It does not fail for them; the playbook decides (the
    audit reports such a host as one that could not be audited, the fix refuses the run).
  - Refuses a run whose C(pvetune_hosts) comes from the inventory (group_vars, host_vars) instead of C(-e), and
    warns once of a C(pvetune_serial) or C(pvetune_batch) that does, naming the variable, its values and hosts, and
    what the play keyword uses instead. Play keywords (C(hosts), C(serial)) are templated before any host is known
    and never see inventory values, while the tasks do; the action plugin of the same name gives O(extra_vars) and
    O(host_vars).
  - Computation on the values it is given; of the controller's file system it only looks at the directories of
    O(report_dirs). Writes nothing.
version_added: "0.3.0"
author:
  - pvetune contributors (@pvetune)
options:
  playbook:
    description: The playbook being run; its tags are the ones O(run_tags) and O(skip_tags) may name.
    type: str
    required: true
    choices: [audit, fix, rollback, collect, metrics]
  pattern:
    description: The host pattern of the playbook's main play (C(pvetune_hosts), default C(gpu_hosts)).
    type: str
    required: true
  pattern_hosts:
    description: The inventory's hosts that O(pattern) matches, without C(--limit) (or a play's own hosts).
    type: list
    elements: str
    required: true
  play_hosts:
    description: The hosts C(--limit) leaves (C(ansible_play_hosts_all) of a play over all hosts).
    type: list
    elements: str
    required: true
  run_tags:
    description: C(ansible_run_tags).
    type: list
    elements: str
    default: [all]
  skip_tags:
    description: C(ansible_skip_tags).
    type: list
    elements: str
    default: []
  inventory:
    description: The inventory sources (C(ansible_inventory_sources)), named in the message when nothing matches.
    type: list
    elements: str
    default: []
  policies:
    description: Each host's C(pvetune_policy) (a mapping, or JSON text), by host name.
    type: dict
    default: {}
  extra_vars:
    description:
      - The names of the run's extra vars (C(-e)), which tell an inventory value from an C(-e) one.
      - The action plugin pvetune_run_check gives them (C(ansible.utils.vars.load_extra_vars)); unset, the
        play-keyword variables are not checked.
    type: list
    elements: str
  host_vars:
    description:
      - Host name to the values of C(pvetune_hosts), C(pvetune_serial) and C(pvetune_batch) that host has (its
        hostvars), for O(play_hosts) and localhost. The action plugin gives them.
    type: dict
    default: {}
  report_dirs:
    description:
      - Host name to the C(pvetune_report_dir) that host's records and reports go to (on the controller), for the
        playbooks that write them (audit, fix, rollback). A directory that cannot be written or created there, or
        C(/) itself, refuses the run before any host is touched.
      - Unset, report directories are not checked.
    type: dict
  play_keywords:
    description:
      - Whether the plays after this check template C(hosts) and C(serial) from C(pvetune_hosts),
        C(pvetune_serial) and C(pvetune_batch) (the playbooks' first play); false in a play of one's own, whose
        keywords are its own.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Writes and runs nothing in any mode (it looks at the report directories only).
  diff_mode:
    support: none
    details: Nothing is changed.
  platform:
    platforms: posix
    details: Runs on the controller (C(delegate_to) localhost, C(run_once)).
notes:
  - O(run_id) is checked when given (fix and rollback runs); the audit has none.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune.run_id
"""

EXAMPLES = r"""
- name: Check the run before any host is touched
  pvetune_run_check:
    playbook: fix
    pattern: "{{ pvetune_hosts | default('gpu_hosts') }}"
    pattern_hosts: "{{ query('ansible.builtin.inventory_hostnames', pvetune_hosts | default('gpu_hosts')) }}"
    play_hosts: "{{ ansible_play_hosts_all }}"
    run_tags: "{{ ansible_run_tags }}"
    skip_tags: "{{ ansible_skip_tags }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
hosts:
  description: The hosts the run acts on.
  returned: success
  type: list
  elements: str
refused:
  description: Why the run must not start, or an empty string.
  returned: success
  type: str
charged:
  description: The hosts a refusal is charged to (those the run would have acted on, and localhost).
  returned: success
  type: list
  elements: str
bad_policy:
  description: Host name to the error of its C(pvetune_policy), for the hosts whose policy is invalid.
  returned: success
  type: dict
policy_message:
  description: One message for all invalid policies (empty when there are none).
  returned: success
  type: str
refuse:
  description:
    - Host name to the message it fails with, for the hosts the playbook's refusal play fails
      (playbooks/shared/run_check.yml). Empty when the run may go on. A refused run charges the hosts of
      RV(charged); fix.yml also refuses the hosts of RV(bad_policy).
  returned: success
  type: dict
act_on:
  description: RV(hosts) less those of RV(bad_policy), in order; the hosts audit.yml audits.
  returned: success
  type: list
  elements: str
token:
  description:
    - 32 random lowercase hex digits naming this ansible-playbook invocation, set by the action plugin on the
      controller. The host locks record it (the C(token) option of M(pvetune_lock)), so two invocations
      given the same run id are told apart.
  returned: success
  type: str
  sample: 5f0c9a3e1b7d4c2a8e6f0b1d3c5a7e9f
controller:
  description: The controller's host name and the pid of its ansible-playbook process, recorded in the host locks.
  returned: success
  type: str
  sample: ops1 pid 41230
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.core.runcheck import ARGUMENT_SPEC, run_check


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *run_check(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
