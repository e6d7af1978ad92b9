#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_gpu_health
short_description: Check that the NVIDIA GPUs answer on a Proxmox VE host and inside its running GPU containers
description:
  - The gate of the fix playbook. Read-only; fails the task when any target fails.
  - "Host: C(nvidia-smi -L) must list as many GPUs as the host has C(/dev/nvidiaN) nodes. Skipped, with the reason,
    when nvidia-smi is not installed or no NVIDIA driver is loaded."
  - "Each running CT that passes NVIDIA devices (or each of O(ctids)): C(pct exec <id> -- nvidia-smi -L) must list
    as many GPUs as the CT gets C(/dev/nvidiaN) nodes (mount and devN entries whose node exists on the host);
    skipped when the CT has no nvidia-smi. When the CT uses C(/dev/nvidia-uvm),
    C(pct exec <id> -- dd if=/dev/nvidia-uvm of=/dev/null bs=1 count=0) must open it: nvidia-smi never opens
    the uvm node, so it still works in a CT whose allow line names a stale uvm major, while CUDA fails there.
    C(count=0) reads nothing. Stopped CTs are skipped."
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  ctids:
    description:
      - CT ids to check (integers or digit strings, 100-999999999); each must have a config on this node.
      - Empty means every CT that passes NVIDIA devices.
    type: list
    elements: raw
    default: []
  host:
    description: Check the host.
    type: bool
    default: true
  cts:
    description: Check the containers.
    type: bool
    default: true
  uvm_probe:
    description: Open C(/dev/nvidia-uvm) inside each running CT that uses it (see description).
    type: bool
    default: true
  pending_restart:
    description:
      - CT ids whose config this run fixed but was not allowed to restart. They still run with the device rules of
        their last start; a failure there is reported with status C(pending) (restart needed), not as a failed gate.
    type: list
    elements: raw
    default: []
  baseline:
    description:
      - The RV(targets) of a run of this module before the run's first change. A target that fails now only in
        checks that already failed then gets status C(broken-before) (reported and warned of, not a failed gate); the
        gate fails a host only for what got worse.
      - Omitted, every failing target fails the gate.
    type: list
    elements: dict
notes:
  - With a root other than C(/) and no stand-in for a target's command, that target is skipped.
  - There is no per-command timeout; an nvidia-smi that hangs on a GPU in a bad state hangs the task
    (use the task keyword C(timeout)).
attributes:
  check_mode:
    support: full
    details:
      - Runs the same read-only commands as a real run (C(nvidia-smi -L), C(pct status),
        C(pct exec ... nvidia-smi -L), C(pct exec ... dd ... count=0)), so a check-mode run gates like a real one.
      - It never reports C(changed).
  diff_mode:
    support: none
    details: Read-only; there is nothing to diff.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.pve_host
seealso:
  - module: pvetune_lxc_gpu
    description: Regenerates the CT device entries whose failure this gate reports.
"""

EXAMPLES = r"""
- name: GPU health gate
  pvetune_gpu_health:
  register: pvetune_health
"""

RETURN = r"""
targets:
  description: One entry per target (the host, then each chosen CT).
  returned: always
  type: list
  elements: dict
  contains:
    target:
      description: C(host) or C(ct:<id>).
      type: str
    ctid:
      description: CT id (null for the host).
      type: int
    status:
      description: ok, skip, fail, pending (a CT that needs a restart) or broken-before (see O(baseline)).
      type: str
    expected_gpus:
      description: GPUs the target should list (null when unknown).
      type: int
    gpus:
      description: GPUs nvidia-smi -L listed (index, name, uuid).
      type: list
      elements: dict
    checks:
      description: The individual checks (name, status, message, rc, output).
      type: list
      elements: dict
    message:
      description: Why the target has its status.
      type: str
    output:
      description: Excerpt of the command output behind the status.
      type: str
  sample: [{"target": "ct:101", "status": "fail", "expected_gpus": 8,
            "message": "CT 101 may not open /dev/nvidia-uvm: ...",
            "output": "dd: failed to open '/dev/nvidia-uvm': Operation not permitted"}]
failed_targets:
  description: Targets that failed.
  returned: always
  type: list
  elements: str
broken_before:
  description: Targets that fail as they already did in the O(baseline), not made worse by the run.
  returned: always
  type: list
  elements: str
summary:
  description: Number of targets per status.
  returned: always
  type: dict
  sample: {"ok": 2, "skip": 1, "fail": 0, "pending": 0, "broken-before": 1}
skipped_commands:
  description: Commands not run, with the reason.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.gpu_health import check_health

ARGUMENT_SPEC = {
    "root": {"type": "path", "default": "/"},
    "ctids": {"type": "list", "elements": "raw", "default": []},
    "host": {"type": "bool", "default": True},
    "cts": {"type": "bool", "default": True},
    "uvm_probe": {"type": "bool", "default": True},
    "pending_restart": {"type": "list", "elements": "raw", "default": []},
    "baseline": {"type": "list", "elements": "dict"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *check_health(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
