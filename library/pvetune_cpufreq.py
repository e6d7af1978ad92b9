#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_cpufreq
short_description: Set the P-state driver mode, cpufreq governor and EPP on every CPU policy now
description:
  - Switches the mode of the CPU vendor's P-state driver at runtime when its status file exists and differs,
    C(amd_pstate) on AMD (C(/sys/devices/system/cpu/amd_pstate/status), kernel 6.3 or later) to O(amd_pstate_mode),
    C(intel_pstate) on Intel (C(/sys/devices/system/cpu/intel_pstate/status)) to O(intel_pstate_mode). The vendor is
    read from C(/proc/cpuinfo); the other vendor's option is ignored, and a CPU of another vendor gets no mode
    switch. The switch is verified (the status reads back and every online policy's C(scaling_driver) is the
    mode's driver, C(amd-pstate-epp) or C(intel_pstate) for C(active)).
  - Then sets C(scaling_governor) on every policy in C(/sys/devices/system/cpu/cpufreq/policy*), re-reads
    C(energy_performance_preference) and writes it where it still differs. With amd-pstate-epp and intel_pstate
    (HWP), governor C(performance) makes the kernel force EPP C(performance) and refuse other EPP values (EBUSY),
    so that combination is refused before anything is written.
  - Governor and EPP names are checked against each policy's C(scaling_available_governors) and
    C(energy_performance_available_preferences); a name a policy does not offer fails the module before any write.
    Drivers without EPP (acpi-cpufreq, amd-pstate passive/guided, intel_cpufreq, intel_pstate without HWP) are
    skipped for EPP with the reason. Policies without an online CPU (empty C(affected_cpus)) are skipped and
    reported.
  - Runtime only. Every original value is recorded in C(/var/lib/pvetune/manifest.json) for rollback.yml; the
    fix role persists the settings with C(pvetune-cpufreq.service) (C(pvetune-boot cpufreq)), which runs the
    same code at boot.
  - When the mode cannot be reached at runtime (no status file because the driver is not loaded, a refused
    write, or a switch that does not take effect) the module reports it with RV(reboot_required) true and says
    that the driver's boot argument (C(amd_pstate=<mode>), C(intel_pstate=<mode>); configured by the kernel
    command line fix) is needed; it fails only with O(require_runtime_mode). When the running kernel was already
    booted with that argument and the driver still did not load (no CPPC / HWP in the firmware), a reboot
    changes nothing, so RV(reboot_required) is then false and the message says so. A virtual machine without
    any cpufreq driver gets no mode switch and no reboot.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  amd_pstate_mode:
    description:
      - amd_pstate driver mode to switch to at runtime on an AMD CPU. Omit to leave the mode alone.
    type: str
    choices: [active, passive, guided]
  intel_pstate_mode:
    description:
      - intel_pstate driver mode to switch to at runtime on an Intel CPU. Omit to leave the mode alone.
    type: str
    choices: [active, passive]
  governor:
    description:
      - Governor (policy) for every online policy, for example C(performance). Omit to leave it.
      - A lower-case word (letters, digits, C(_); at most 32 characters) offered by every online policy.
    type: str
  epp:
    description:
      - Energy performance preference for every online policy that has one, for example C(performance).
        Omit to leave it.
      - A lower-case word offered by every policy that has EPP.
    type: str
  boost:
    description:
      - Turn CPU boost (turbo) on (V(true)) or off on every file that decides it, in the kernel's precedence
        C(intel_pstate/no_turbo), else every online policy's C(boost), else the global C(cpufreq/boost). Omit to
        leave it.
    type: bool
  require_runtime_mode:
    description:
      - Fail when the requested mode of the host's driver cannot be reached at runtime, instead of reporting it with
        RV(reboot_required) true.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Nothing is written. A pending mode switch is not performed, so the per-policy values after it are
        predicted from the kernel's defaults (RV(predicted) is true).
  diff_mode:
    support: full
    details:
      - One diff of the runtime values. Like RV(changes) it groups the policies (one line per distinct change,
        for example C(cpufreq:policy[0-127]:scaling_governor)); the manifest keeps one entry per policy file.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_runtime
    description: Installs the boot unit that re-applies these settings at every boot.
  - module: pvetune_rollback
    description: Puts the recorded original values back.
"""

EXAMPLES = r"""
- name: P-state driver active (amd_pstate or intel_pstate), governor performance, EPP performance
  pvetune_cpufreq:
    amd_pstate_mode: active
    intel_pstate_mode: active
    governor: performance
    epp: performance
    boost: true
"""

RETURN = r"""
pstate:
  description: The P-state driver mode step.
  returned: always
  type: dict
  contains:
    driver:
      description: C(amd_pstate), C(intel_pstate), or null for a CPU of another vendor.
      type: str
    requested:
      description: O(amd_pstate_mode) or O(intel_pstate_mode) (the host's driver), or null when not requested.
      type: str
    before:
      description: The driver's C(status) before the run (null without the file).
      type: str
    after:
      description: The driver's C(status) after the run (the target in check mode).
      type: str
    action:
      description:
        - C(not_requested), C(not_applicable) (another CPU vendor, or a virtual machine without cpufreq),
          C(none) (already in that mode), C(switch) (check mode), C(switched), C(failed) (runtime switch refused or
          not effective; the old value is written back), C(unavailable) (no status file, so the driver is not
          loaded) or C(unknown) (the status file reads no mode the kernel reports; nothing is written).
      type: str
    reboot_required:
      description: True when the mode needs the boot argument and a reboot.
      type: bool
    message:
      description: What happened or what is needed, in words (null when nothing to say).
      type: str
  sample: {"driver": "amd_pstate", "requested": "active", "before": "passive", "after": "active",
           "action": "switched", "reboot_required": false,
           "message": "amd_pstate mode passive -> active (runtime switch)"}
drivers:
  description: Scaling driver of the online policies (after the run; predicted in check mode) and the policy numbers.
  returned: always
  type: dict
  sample: {"amd-pstate-epp": "0-127"}
policies:
  description: Per-policy changes, grouped by attribute, before and after value.
  returned: always
  type: list
  elements: dict
  sample: [{"attribute": "scaling_governor", "before": "powersave", "after": "performance", "policies": "0-127",
            "count": 128}]
skipped_policies:
  description: Policies left alone because none of their CPUs is online, grouped by reason.
  returned: always
  type: list
  elements: dict
  sample: [{"policies": "5,7", "count": 2, "reason": "affected_cpus is empty: every CPU of the policy is offline"}]
epp_skipped:
  description: Policies where EPP was not set because the driver offers none, grouped by reason.
  returned: always
  type: list
  elements: dict
messages:
  description: What was done or is still needed, in words.
  returned: always
  type: list
  elements: str
predicted:
  description: True in check mode when a mode switch is pending and per-policy values are predicted.
  returned: always
  type: bool
reboot_required:
  description:
    - False for runtime changes. True when the requested mode cannot be reached at runtime (the driver's
      boot argument and a reboot are needed); false when the kernel already runs with that argument (a reboot
      would not change the driver).
  returned: always
  type: bool
changes:
  description: Planned or applied runtime changes, grouped like RV(policies) (C(files) is always empty).
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason. Always empty (this module writes sysfs, it runs no command).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.cpufreq.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    amd_pstate_mode={"type": "str", "choices": ["active", "passive", "guided"]},
    intel_pstate_mode={"type": "str", "choices": ["active", "passive"]},
    governor={"type": "str"},
    epp={"type": "str"},
    boost={"type": "bool"},
    require_runtime_mode={"type": "bool", "default": False},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
