#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_report
short_description: Write the pvetune fleet audit reports (JSON, HTML, JUnit, text)
description:
  - Takes the per-host results of the pvetune_facts module and writes C(audit.json) (schema_version 1),
    a self-contained C(audit.html), C(junit.xml) (one testcase per host and check), C(summary.txt) and
    C(pvetune.prom) (the fleet's metrics in the Prometheus text format, for node_exporter's textfile collector) into
    C(<dest>/<timestamp>/), then points C(<dest>/latest) at that directory.
  - A host that could not be audited (unreachable, or pvetune_facts failed) is reported as such, apart from the
    hosts that fail checks; both fail the run (RV(fleet_failed)).
  - Also writes C(summary.md), a short Markdown summary to paste into a ticket. Every report says what changed on
    each host since its previous audit under I(dest) (the most recent earlier run directory that audited it).
  - "Runs on the controller (C(delegate_to: localhost)); it writes reports, never host state."
  - In check mode nothing is written; the rendered summary is still returned.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  hosts:
    description:
      - Names of every host of the audit, including those where the audit did not run.
    type: list
    elements: str
    required: true
  audits:
    description:
      - The registered result of pvetune_facts per host name.
      - A host without an entry, or whose result has no C(results), is reported as an error with the result's
        C(msg); an unreachable result marks the host unreachable.
    type: dict
    default: {}
  dest:
    description:
      - Directory that receives one sub-directory per run and the C(latest) link.
    type: path
    required: true
  fail_on:
    description:
      - Severity at or above which a failed or errored check makes a host fail.
    type: str
    choices: [critical, high, medium, low, info]
    default: high
  run:
    description:
      - Free-form facts about the run recorded in the JSON (playbook, inventory, user).
      - C(inventory), the list of inventory sources (C(ansible_inventory_sources)), goes into the fix command the
        reports show for each check to fix (one C(-i) per source, as given; none when the list is empty).
    type: dict
    default: {}
  timestamp:
    description:
      - Name of the run directory, C(YYYYMMDDTHHMMSSZ). Defaults to the current UTC time.
    type: str
  junit_warn_as_failure:
    description:
      - Report a C(warn) result in C(junit.xml) as a C(<failure type="warn">) instead of a passing testcase (every
        testcase carries its status and severity as C(pvetune.status) and C(pvetune.severity) properties either way).
      - Only junit.xml changes; a warn never fails the run.
    type: bool
    default: false
  not_audited:
    description:
      - Host name to the reason, for hosts of O(hosts) that were not audited because their C(pvetune_policy) is
        invalid (pvetune_run_check's C(bad_policy)); each is reported as a host that could not be audited, with
        that reason. Takes precedence over an entry of O(audits) for the same host.
    type: dict
    default: {}
attributes:
  check_mode:
    support: partial
    details:
      - Nothing is written; RV(report_dir) and RV(summary_text) are still returned.
      - Reports no change, while a real run always writes a new run directory and reports a change.
  diff_mode:
    support: none
    details: The reports are new files per run; there is no diff.
  platform:
    platforms: posix
    details: The controller (C(delegate_to) C(localhost)), where the action plugin of the same name runs it.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: pvetune_facts
    description: The audit whose registered results this module reports.
"""

EXAMPLES = r"""
- name: Write the fleet reports
  pvetune_report:
    hosts: "{{ ansible_play_hosts_all }}"
    audits: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)
                | map(attribute='pvetune_audit', default={}))) }}"
    dest: "{{ playbook_dir }}/../reports"
    fail_on: high
  delegate_to: localhost
  run_once: true
  check_mode: false
"""

RETURN = r"""
report_dir:
  description: Directory the reports were (or, in check mode, would be) written to.
  returned: always
  type: str
  sample: /home/op/pvetune/reports/20261129T193000Z
files:
  description: Paths of the written files.
  returned: always
  type: list
  elements: str
summary_text:
  description: The terminal fleet summary (also in summary.txt).
  returned: always
  type: str
failed_hosts:
  description: Every host that fails the run, sorted; those of RV(failing_hosts) and of RV(unaudited_hosts).
  returned: always
  type: list
  elements: str
failing_hosts:
  description: Audited hosts with a failed or errored check at or above I(fail_on).
  returned: always
  type: list
  elements: str
hosts_failing:
  description: The failing check ids (at or above I(fail_on)) of each host in RV(failing_hosts).
  returned: always
  type: dict
  sample: {"pve-gpu01": ["pcie.mrrs", "lxc.gpu_devices"]}
unaudited_hosts:
  description: Hosts that could not be audited (unreachable, or the audit module failed), sorted.
  returned: always
  type: list
  elements: str
unaudited:
  description: Why each host of RV(unaudited_hosts) could not be audited, C(unreachable (...)) or the module's message.
  returned: always
  type: dict
  sample: {"pve-gpu04": "unreachable (Failed to connect to the host via ssh)"}
host_verdicts:
  description: Every host's verdict, C(pass), C(fail) (in RV(failing_hosts)) or C(unaudited) (in RV(unaudited_hosts)).
  returned: always
  type: dict
  sample: {"pve-gpu01": "fail", "pve-gpu02": "pass", "pve-gpu04": "unaudited"}
host_messages:
  description: What the playbook says of each host that does not pass (why it fails or could not be audited).
  returned: always
  type: dict
  sample: {"pve-gpu01": "pve-gpu01 fails checks of severity high or higher: pcie.mrrs"}
fleet_failed:
  description: Whether RV(failed_hosts) is not empty (the playbook decides the exit status from this).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.report.write import ARGUMENT_SPEC, write_fleet_reports

# The controller runs this through the action plugin of the same name (action_plugins/pvetune_report.py), which
# validates with this ARGUMENT_SPEC and calls write_fleet_reports in-process (core/module_exit.run_in_process).


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *write_fleet_reports(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
