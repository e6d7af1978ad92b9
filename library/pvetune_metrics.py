#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_metrics
short_description: Render each host's pvetune metrics from an audit report (Prometheus text format)
description:
  - Reads an C(audit.json) that audit.yml wrote and renders, for each named host, that host's series of the
    metrics audit.yml also writes for the whole fleet as C(pvetune.prom) (C(pvetune_check_status),
    C(pvetune_host_verdict), C(pvetune_host_reboot_required), C(pvetune_host_pending_reboot),
    C(pvetune_audit_timestamp_seconds)), in the text exposition format node_exporter's textfile collector reads.
  - "Runs on the controller (C(delegate_to: localhost)) and only reads; playbooks/metrics.yml hands each host's
    text to M(pvetune_textfile)."
  - A file that cannot be read, is not JSON or lacks what the metrics need fails with the file and the key named.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  report:
    description:
      - The C(audit.json) to read (audit.yml writes it as C(<pvetune_report_dir>/<timestamp>/audit.json);
        C(<pvetune_report_dir>/latest/audit.json) is the last run's).
    type: path
    required: true
  hosts:
    description:
      - The inventory names of the hosts to render; names the report does not have are returned in RV(missing).
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    support: full
    details: The module only reads; check mode changes nothing it does.
  diff_mode:
    support: none
    details: Nothing is written.
  platform:
    platforms: posix
    details: The controller (C(delegate_to) C(localhost)), where the reports are.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: pvetune_textfile
    description: Writes a host's text into its node_exporter textfile directory.
  - module: pvetune_report
    description: Writes the reports, C(audit.json) and the fleet's C(pvetune.prom) among them.
"""

EXAMPLES = r"""
- name: Render the metrics of every host of the play from the last audit
  pvetune_metrics:
    report: "{{ playbook_dir }}/../reports/latest/audit.json"
    hosts: "{{ ansible_play_hosts }}"
  delegate_to: localhost
  become: false
  run_once: true
  register: pvetune_metrics_rendered
"""

RETURN = r"""
metrics:
  description: Each rendered host's own text (the fleet file's lines of that host, with the HELP and TYPE lines).
  returned: always
  type: dict
  sample: {"pve-gpu02": "# HELP pvetune_audit_timestamp_seconds ...\n"}
missing:
  description: The names of I(hosts) that the report does not have (not audited in that run).
  returned: always
  type: list
  elements: str
generated_at:
  description: When the audit of the report ran (UTC).
  returned: always
  type: str
  sample: "2026-11-29T20:06:52Z"
report:
  description: The report read, as given.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.report.metrics import read_host_metrics

ARGUMENT_SPEC = dict(
    report=dict(type="path", required=True),
    hosts=dict(type="list", elements="str", required=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *read_host_metrics(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
