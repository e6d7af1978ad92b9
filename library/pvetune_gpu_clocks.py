#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_gpu_clocks
short_description: Reset the applications clocks left set on NVIDIA GPUs
description:
  - Reads every GPU's applications clocks and their defaults from C(nvidia-smi -q) (the audit's reader) and resets
    each GPU whose applications clocks differ with C(nvidia-smi -i <bus id> -rac), then reads C(nvidia-smi -q)
    again, where each must show its defaults.
  - Locked clocks (C(nvidia-smi -lgc/-lmc)) do not show in C(nvidia-smi -q) and are not touched.
  - Runtime only; the clocks before are recorded in C(/var/lib/pvetune/manifest.json) for rollback.yml, which sets
    them again with C(nvidia-smi -ac). A reboot resets applications clocks too, so no boot unit is installed.
  - With O(root) other than C(/) nvidia-smi is taken from C(<root>/.pvetune/bin/) when a stand-in is there, else
    nothing is reset and RV(skipped_commands) says why.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options: {}
attributes:
  check_mode:
    support: full
    details: Nothing runs but C(nvidia-smi -q); RV(gpus) gives the planned change.
  diff_mode:
    support: full
    details: One runtime-values diff, per GPU its applications clocks (memory,graphics MHz) before and after.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_rollback
    description: Sets the recorded applications clocks again.
"""

EXAMPLES = r"""
- name: Applications clocks back to their defaults
  pvetune_gpu_clocks:
"""

RETURN = r"""
gpus:
  description: The GPUs reset, with their applications clocks (memory,graphics MHz) before and after.
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:61:00.0", "before": "14001,1410", "after": "14001,2430"}]
reboot_required:
  description: Always false.
  returned: always
  type: bool
changes:
  description: Planned or applied runtime changes; key C(gpu:<bdf>:app_clocks).
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason (no nvidia-smi stand-in in a tree).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.gpu.fix import fix_clocks
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix_clocks(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
