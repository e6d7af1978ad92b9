#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_facts
short_description: Audit a Proxmox VE GPU host's performance settings in one read-only pass
description:
  - Reads every input of every pvetune check (cpufreq and cpuidle sysfs, /proc/cmdline, sysctl state and
    sysctl.d files, binary PCI config spaces of the NVIDIA functions, boot loader configuration, installed and
    pinned kernels, /proc/devices and the /dev/nvidia* nodes, Proxmox CT configs, IOMMU state) in one call and
    evaluates them against the policy.
  - Never changes anything. Everything is read through O(root), so the same module audits a live host, a
    snapshot collected with collect.yml, or a test tree.
  - With a root other than C(/) no command is run; nvidia-smi output is taken from the snapshot instead.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  policy:
    description:
      - Overrides of the default policy, key by key (see docs/checks.md for keys and defaults).
      - Unknown keys and unsafe values are rejected before anything is read.
    type: dict
    default: {}
  checks:
    description:
      - Only evaluate these check ids. All checks when empty.
    type: list
    elements: str
    default: []
  fail_on:
    description:
      - Severity at or above which a failed check makes the host count as failing in RV(summary).
    type: str
    choices: [critical, high, medium, low, info]
    default: high
  include_facts:
    description:
      - Also return the raw gathered inputs as RV(facts).
    type: bool
    default: false
  run_tags:
    description:
      - The tags of the fix run this audit gates (C(ansible_run_tags)). When given, RV(scope) says which checks
        that run answers for; C(all) selects every fix tag. Tags that are not fix tags are ignored.
    type: list
    elements: str
  skip_tags:
    description:
      - The run's C(--skip-tags) (C(ansible_skip_tags)), taken out of O(run_tags). Only with O(run_tags).
    type: list
    elements: str
    default: []
notes:
  - Reading PCI config space beyond the first 64 bytes needs root; run with become on live hosts.
  - Every check id with its severity, expected value, rationale and remediation, and every policy key with its
    default, is listed in the project's docs/checks.md (generated from the catalogue and the policy).
attributes:
  check_mode:
    support: full
    details: The module never writes, so check mode changes nothing in its behaviour.
  diff_mode:
    support: none
    details: Read-only; there is nothing to diff.
  platform:
    platforms: debian
    details:
      - Proxmox VE 8 and 9 hosts (Debian bookworm and trixie).
      - With a snapshot as O(root) it runs on any POSIX machine with Python 3 (audit.yml audits snapshots on the
        controller).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
seealso:
  - module: pvetune_report
    description: Writes the fleet reports (JSON, HTML, JUnit, text) from the results of this module.
  - module: pvetune_collect
    description: Captures everything this module reads into a snapshot that it can audit later.
"""

EXAMPLES = r"""
- name: Audit the host
  pvetune_facts:
  register: audit

- name: Audit a collected snapshot with a site policy
  pvetune_facts:
    root: /srv/snapshots/pve-gpu01
    policy:
      kernel_series: "6.14"
      cmdline_required: [amd_pstate=active, processor.max_cstate=1, iommu=pt]

- name: Only the PCIe checks, with the raw inputs
  pvetune_facts:
    checks: [pcie.mrrs, pcie.link]
    include_facts: true
"""

RETURN = r"""
results:
  description: One result per evaluated check, in catalogue order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Check id, for example C(pcie.mrrs).
      type: str
    status:
      description: One of pass, fail, warn, pending, skip, error.
      type: str
    severity:
      description: critical, high, medium, low or info.
      type: str
    current:
      description: What the host has now.
      type: raw
    expected:
      description: What the policy wants.
      type: str
    reboot_required:
      description: Whether the fix (or a configured fix) only takes effect after a reboot.
      type: bool
    message:
      description: One-line explanation of the status.
      type: str
    remediation:
      description: How to fix it.
      type: str
    evidence:
      description: Files and values that were read.
      type: list
      elements: str
    items:
      description: Per-GPU, per-policy, per-CT or per-argument details.
      type: list
      elements: dict
  sample:
    - id: pcie.mrrs
      status: fail
      severity: high
      current: MaxReadReq 512 on 8 GPUs
      expected: MaxReadReq 4096 bytes on every NVIDIA function (vendor 0x10de, class 0x03xx)
      reboot_required: false
summary:
  description: Counts per status, the failing check ids at or above I(fail_on), and whether a reboot is needed.
  returned: always
  type: dict
  sample: {"counts": {"pass": 3, "fail": 7}, "failing": ["pcie.mrrs"], "reboot_required": true}
root:
  description: The root that was read, as an absolute path without symlinks.
  returned: always
  type: str
  sample: /
policy:
  description: The effective policy after merging the overrides, as this host sees it (C(host_cpu) is its CPU
    vendor profile; C(cmdline_required) includes the vendor's boot arguments).
  returned: always
  type: dict
duration:
  description: Seconds the gathering and evaluation took on the host (junit.xml times each host's testsuite by it).
  returned: always
  type: float
  sample: 0.042
host:
  description: Hostname and snapshot metadata of the audited root.
  returned: always
  type: dict
facts:
  description: The raw gathered inputs, per section.
  returned: when include_facts is true
  type: dict
scope:
  description:
    - What a fix run with O(run_tags) answers for. A check is in scope when pvetune fixes it on this host and the run
      selected every tag its fix needs; a check whose fix needs a tag the run left out is out of scope (listed with
      the tags it lacks), never a failure of that run.
    - C(tags) the fix tags selected; C(in_scope) check ids; C(out_of_scope) a list of C(id), C(needs);
      C(bad) and C(pending) a list of C(id), C(message) of in-scope checks that fail or wait;
      C(reboots) in-scope check ids that fail or wait for a reboot; C(ct_restarts) the ids of the CTs whose fixed
      config waits for the CT's restart (pending items named C(CT <id>)), whatever the tags.
  returned: when run_tags is given
  type: dict
  sample: {"tags": ["cpu"], "in_scope": ["cpu.governor"], "out_of_scope": [{"id": "cpu.scaling_driver",
           "needs": ["cmdline"]}], "bad": [], "pending": [], "reboots": []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.audit import audit_host
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    policy=dict(type="dict", default={}),
    checks=dict(type="list", elements="str", default=[]),
    fail_on=dict(type="str", default="high", choices=["critical", "high", "medium", "low", "info"]),
    include_facts=dict(type="bool", default=False),
    run_tags=dict(type="list", elements="str"),
    skip_tags=dict(type="list", elements="str", default=[]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *audit_host(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
