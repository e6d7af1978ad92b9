#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_preflight
short_description: Check every input of a pvetune fix run before anything is changed
description:
  - Validates the values a fix run takes from the inventory or the command line (run id, policy, CT ids, PCI
    addresses, cgroup version, root) with the same checks the fix modules apply, so that a bad value stops the
    run on a host before the first fix changes anything or runs any command.
  - Reads nothing and writes nothing; runs no command.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  run_id:
    description: Identifier of the fix run (names backup directories, the lock and the records).
    type: str
    required: true
  policy:
    description: The pvetune_policy overrides (see docs/checks.md).
    type: dict
    default: {}
  ctids:
    description: CT ids for the LXC fix (integers or digit strings, 100-999999999).
    type: list
    elements: raw
    default: []
  bdfs:
    description: PCI addresses for the MaxReadReq fix (dddd:bb:dd.f, lower-case hex).
    type: list
    elements: raw
    default: []
  cgroup_version:
    description: auto, 1 or 2.
    type: str
    default: auto
  root:
    description: Directory treated as C(/) (see the fix modules).
    type: path
    default: /
notes:
  - Supports check mode (it never changes anything).
"""

EXAMPLES = r"""
- name: Check the inputs of this run
  pvetune_preflight:
    run_id: "{{ pvetune_run_id }}"
    policy: "{{ pvetune_policy }}"
    ctids: "{{ pvetune_lxc_ctids }}"
    bdfs: "{{ pvetune_pcie_bdfs }}"
"""

RETURN = r"""
policy:
  description: The effective policy.
  returned: success
  type: dict
ctids:
  description: The CT ids, normalised.
  returned: success
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import lxcfix, pciefix
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy


def main():
    module = AnsibleModule(
        argument_spec={
            "run_id": {"type": "str", "required": True},
            "policy": {"type": "dict", "default": {}},
            "ctids": {"type": "list", "elements": "raw", "default": []},
            "bdfs": {"type": "list", "elements": "raw", "default": []},
            "cgroup_version": {"type": "str", "default": "auto"},
            "root": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    p = module.params
    checks = (
        ("run_id", lambda: validate_run_id(p["run_id"])),
        ("root", lambda: FsRoot(p["root"])),
        ("pvetune_policy", lambda: merge_policy(p["policy"])),
        ("pvetune_lxc_ctids", lambda: lxcfix.validate_ctids(p["ctids"])),
        ("pvetune_lxc_cgroup_version", lambda: lxcfix.validate_cgroup_version(p["cgroup_version"])),
        ("pvetune_pcie_bdfs", lambda: pciefix.validate_options(bdfs=p["bdfs"] or None)),
    )
    out = {}
    for what, check in checks:
        try:
            out[what] = check()
        except ValueError as exc:
            module.fail_json(msg="%s: %s; nothing was changed" % (what, exc))
    module.exit_json(changed=False, policy=out["pvetune_policy"], ctids=out["pvetune_lxc_ctids"])


if __name__ == "__main__":
    main()
