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
    a self-contained C(audit.html), C(junit.xml) (one testcase per host and check) and C(summary.txt) into
    C(<dest>/<timestamp>/), then points C(<dest>/latest) at that directory.
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
    type: dict
    default: {}
  timestamp:
    description:
      - Name of the run directory, C(YYYYMMDDTHHMMSSZ). Defaults to the current UTC time.
    type: str
notes:
  - Supports check mode.
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
  description: Hosts with a failed or errored check at or above I(fail_on), or unreachable hosts.
  returned: always
  type: list
  elements: str
fleet_failed:
  description: Whether any host failed (the playbook decides the exit status from this).
  returned: always
  type: bool
"""

import datetime
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import report

TIMESTAMP = re.compile(r"^\d{8}T\d{6}Z(-\d{1,3})?$")


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.rename(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="list", elements="str", required=True),
            audits=dict(type="dict", default={}),
            dest=dict(type="path", required=True),
            fail_on=dict(type="str", default="high", choices=["critical", "high", "medium", "low", "info"]),
            run=dict(type="dict", default={}),
            timestamp=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = params["timestamp"] or now.strftime("%Y%m%dT%H%M%SZ")
    if not TIMESTAMP.match(stamp):
        module.fail_json(msg="timestamp must look like 20261129T193000Z")
    entries = [report.entry_from_audit(host, params["audits"].get(host)) for host in params["hosts"]]
    doc = report.build_document(entries, fail_on=params["fail_on"],
                                generated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), run=params["run"])
    text = report.render_text(doc)
    dest = os.path.abspath(params["dest"])
    run_dir = os.path.join(dest, stamp)
    suffix = 1
    while os.path.exists(run_dir) and not module.check_mode:
        run_dir = os.path.join(dest, "%s-%d" % (stamp, suffix))
        suffix += 1
    names = {"audit.json": report.render_json(doc), "audit.html": report.render_html(doc),
             "junit.xml": report.render_junit(doc), "summary.txt": text}
    files = [os.path.join(run_dir, n) for n in sorted(names)]
    if not module.check_mode:
        os.makedirs(run_dir, exist_ok=True)
        for name, content in names.items():
            _write(os.path.join(run_dir, name), content)
        latest = os.path.join(dest, "latest")
        tmp_link = latest + ".tmp"
        if os.path.lexists(tmp_link):
            os.unlink(tmp_link)
        os.symlink(os.path.basename(run_dir), tmp_link)
        os.rename(tmp_link, latest)
    module.exit_json(changed=not module.check_mode, report_dir=run_dir, files=files, summary_text=text,
                     failed_hosts=doc["summary"]["failed_hosts"], fleet_failed=bool(doc["summary"]["failed_hosts"]))


if __name__ == "__main__":
    main()
