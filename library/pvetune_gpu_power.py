#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_gpu_power
short_description: Set each NVIDIA GPU below its target power limit to it
description:
  - Reads every GPU's power limits from C(nvidia-smi -q) (the audit's reader) and sets each GPU whose enforced
    limit is below the target with C(nvidia-smi -i <bus id> -pl <watts>), then reads C(nvidia-smi -q) again, where
    each GPU must show the new limit.
  - The target is the GPU's own default limit (O(power_limit=default)) or watts. A GPU whose requested limit
    already meets the target but whose enforced limit is lower (its board or the platform holds it, e.g. a power
    brake) is left alone with a warning, as is a target above the GPU's maximum.
  - Runtime only. The original limits are recorded in C(/var/lib/pvetune/manifest.json) before the first change,
    for rollback.yml. A power limit does not survive a reboot or a driver reload, so the fix role installs
    C(pvetune-gpu-power.service) (C(pvetune-boot gpu-power)), which runs the same code at boot.
  - With O(root) other than C(/) nvidia-smi is taken from C(<root>/.pvetune/bin/) when a stand-in is there, else
    nothing is set and RV(skipped_commands) says why.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  power_limit:
    description: C(default) (each GPU's default power limit) or watts from 50 to 2000, as text or a number.
    type: raw
    default: default
attributes:
  check_mode:
    support: full
    details: Nothing runs but C(nvidia-smi -q); RV(gpus) gives each GPU's planned limit.
  diff_mode:
    support: full
    details: One runtime-values diff, per GPU its limit before and after (C(gpu:<bdf> power.limit = 300 W)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_runtime
    description: Installs the boot unit that sets the limits again at every boot.
  - module: pvetune_rollback
    description: Puts the recorded limits back with nvidia-smi -pl.
"""

EXAMPLES = r"""
- name: Every GPU at its default power limit
  pvetune_gpu_power:
    power_limit: default

- name: A deliberate 450 W cap (GPUs below it are raised to it)
  pvetune_gpu_power:
    power_limit: 450
"""

RETURN = r"""
gpus:
  description:
    - One entry per GPU nvidia-smi reports. C(action) is C(set), C(none), C(hold) (the board or platform holds
      it below what is requested) or C(unknown) (no limit reported, or a target above the maximum); C(result) is
      C(planned) (check mode), C(unchanged), C(done) or C(skipped).
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:41:00.0", "bus_id": "00000000:41:00.0", "before": 300.0, "after": 600.0, "action": "set",
            "result": "done", "message": "power.limit 300 W -> 600 W"}]
power_limit:
  description: The target, C(default) or watts.
  returned: always
  type: raw
reboot_required:
  description: Always false; the limit is set at runtime (and at every boot by pvetune-gpu-power.service).
  returned: always
  type: bool
changes:
  description: Planned or applied runtime changes; key C(gpu:<bdf>:power_limit), before and after in watts.
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason (no nvidia-smi stand-in in a tree).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.gpu.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS, power_limit={"type": "raw", "default": "default"})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
