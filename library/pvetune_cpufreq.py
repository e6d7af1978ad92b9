#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_cpufreq
short_description: Set the amd_pstate mode, cpufreq governor and EPP on every CPU policy now
description:
  - Switches the amd_pstate driver mode at runtime by writing C(/sys/devices/system/cpu/amd_pstate/status)
    (kernel 6.3 or later) when it exists and differs, and verifies the switch (the status reads back and every
    online policy's C(scaling_driver) is the mode's driver, C(amd-pstate-epp) for C(active)).
  - Then sets C(scaling_governor) on every policy in C(/sys/devices/system/cpu/cpufreq/policy*), re-reads
    C(energy_performance_preference) and writes it where it still differs. With amd-pstate-epp, governor
    C(performance) makes the kernel force EPP C(performance) and refuse other EPP values (EBUSY), so that
    combination is refused before anything is written.
  - Governor and EPP names are checked against each policy's C(scaling_available_governors) and
    C(energy_performance_available_preferences); a name a policy does not offer fails the module before any write.
    Drivers without EPP (acpi-cpufreq, amd-pstate passive/guided) are skipped for EPP with the reason.
    Policies without an online CPU (empty C(affected_cpus)) are skipped and reported.
  - Runtime only. Every original value is recorded in C(/var/lib/pvetune/manifest.json) for rollback.yml; the
    fix role persists the settings with C(pvetune-cpufreq.service) (C(pvetune-boot cpufreq)), which runs the
    same code at boot.
  - When the mode cannot be reached at runtime (no amd_pstate status file because another driver such as
    acpi-cpufreq is in use, a refused write, or a switch that does not take effect) the module reports it with
    RV(reboot_required) true and says that the C(amd_pstate=<mode>) boot argument (configured by the kernel
    command line fix) is needed; it fails only with O(require_runtime_mode). When the running kernel was already
    booted with C(amd_pstate=<mode>) and amd_pstate still did not load (no CPPC in the firmware), a reboot
    changes nothing, so RV(reboot_required) is then false and the message says so.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description: Directory treated as C(/) for every read and write.
    type: path
    default: /
  run_id:
    description: Identifier of the fix run; names the per-run backup directory under C(/var/lib/pvetune/runs/).
    type: str
  amd_pstate_mode:
    description:
      - amd_pstate driver mode to switch to at runtime. Omit to leave the mode alone.
    type: str
    choices: [active, passive, guided]
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
  require_runtime_mode:
    description:
      - Fail when O(amd_pstate_mode) cannot be reached at runtime, instead of reporting it with
        RV(reboot_required) true.
    type: bool
    default: false
notes:
  - Supports check mode and diff mode. In check mode a pending mode switch is not performed, so the per-policy
    values after it are predicted from the kernel's defaults (RV(predicted) is true).
  - The diff and RV(changes) group the policies (one line per distinct change, for example
    C(cpufreq:policy[0-127]:scaling_governor)); the manifest keeps one entry per policy file.
"""

EXAMPLES = r"""
- name: amd_pstate active, governor performance, EPP performance
  pvetune_cpufreq:
    amd_pstate_mode: active
    governor: performance
    epp: performance
"""

RETURN = r"""
amd_pstate:
  description: The amd_pstate mode step.
  returned: always
  type: dict
  contains:
    requested:
      description: O(amd_pstate_mode), or null when not requested.
      type: str
    before:
      description: C(amd_pstate/status) before the run (null without the file).
      type: str
    after:
      description: C(amd_pstate/status) after the run (the target in check mode).
      type: str
    action:
      description:
        - C(not_requested), C(none) (already in that mode), C(switch) (check mode), C(switched), C(failed)
          (runtime switch refused or not effective; the old value is written back) or C(unavailable) (no
          amd_pstate status file, so another scaling driver is in use).
      type: str
    reboot_required:
      description: True when the mode needs the boot argument and a reboot.
      type: bool
    message:
      description: What happened or what is needed, in words (null when nothing to say).
      type: str
  sample: {"requested": "active", "before": "passive", "after": "active", "action": "switched",
           "reboot_required": false, "message": "amd_pstate mode passive -> active (runtime switch, kernel >= 6.3)"}
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
    - False for runtime changes. True when the requested amd_pstate mode cannot be reached at runtime (the
      C(amd_pstate=<mode>) boot argument and a reboot are needed); false when the kernel already runs with that
      argument (a reboot would not change the driver).
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
from ansible.module_utils.pvetune.cpufreq import (
    CpufreqError,
    apply_mode,
    apply_policies,
    drivers,
    group_reasons,
    group_runtime,
    group_steps,
    grouped_diff,
    plan_mode,
    plan_policies,
    predict_after_switch,
    read_state,
    validate_config,
)
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot

ARGUMENT_SPEC = {
    "root": {"type": "path", "default": "/"},
    "run_id": {"type": "str"},
    "amd_pstate_mode": {"type": "str", "choices": ["active", "passive", "guided"]},
    "governor": {"type": "str"},
    "epp": {"type": "str"},
    "require_runtime_mode": {"type": "bool", "default": False},
}


def _summary(mode_changes, policy_changes, step=None):
    """Grouped runtime changes; a mode switch that failed (and was written back) is not one."""
    entries = list(policy_changes.runtime)
    if step is None or step["action"] in ("switch", "switched"):
        entries = list(mode_changes.runtime) + entries
    return {"files": [], "runtime": group_runtime(entries)}, entries


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        cfg = validate_config({k: params[k] for k in ("amd_pstate_mode", "governor", "epp")})
        fsroot = FsRoot(params["root"])
        mode_changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=params["run_id"])
    except (CpufreqError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    policy_changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=mode_changes.run_id)
    messages = []
    step = None

    def fail(msg, **extra):
        summary = _summary(mode_changes, policy_changes, step)[0]
        module.fail_json(msg=msg, changes=summary, messages=messages, **extra)

    try:
        state = read_state(fsroot)
        step = plan_mode(state, cfg["amd_pstate_mode"])
        predicted = False
        if step["action"] == "switch":
            mode_changes.plan_runtime("amd_pstate:status", "/sys/devices/system/cpu/amd_pstate/status",
                                      step["before"], step["after"])
            if module.check_mode:
                state = predict_after_switch(state, step["after"])
                predicted = True
                messages.append("check mode: amd_pstate mode %s -> %s is not performed; per-policy values after "
                                "it are predicted" % (step["before"], step["after"]))
            else:
                mode_changes.apply()
                apply_mode(fsroot, step)
                state = read_state(fsroot)
        if step["action"] == "switched":
            messages.append("amd_pstate mode %s -> %s" % (step["before"], step["after"]))
        elif step["action"] in ("failed", "unavailable"):
            if params["require_runtime_mode"]:
                fail(step["message"], amd_pstate=step, reboot_required=True)
            messages.append(step["message"])
            module.warn(step["message"])

        plan = plan_policies(state, cfg["governor"], cfg["epp"])
        if plan["errors"]:
            fail("cpufreq settings not applied: %s" % "; ".join(plan["errors"][:8])
                 + ("; ... (%d problems)" % len(plan["errors"]) if len(plan["errors"]) > 8 else ""),
                 amd_pstate=step, errors=plan["errors"])
        for pstep in plan["governor"] + plan["epp"]:
            policy_changes.plan_runtime("cpufreq:%s:%s" % (pstep["policy"], pstep["attribute"]), pstep["path"],
                                        pstep["before"], pstep["after"])
        if not module.check_mode:
            policy_changes.apply()
            failures = apply_policies(fsroot, plan)
            state = read_state(fsroot)
            if failures:
                fail("cpufreq: %d write(s) failed: %s" % (len(failures), "; ".join(failures[:8])),
                     amd_pstate=step, failures=failures)
    except (OSError, IOError, FsError, ChangeError) as exc:
        fail("cpufreq: %s" % exc)

    groups = group_steps(plan["governor"] + plan["epp"])
    skipped = group_reasons(plan["skipped"])
    epp_skipped = group_reasons(plan["epp_skipped"])
    messages.extend("%s %s -> %s on policy %s" % (g["attribute"], g["before"], g["after"], g["policies"])
                    for g in groups)
    messages.extend("skipped policy %s: %s" % (s["policies"], s["reason"]) for s in skipped)
    messages.extend("EPP not set on policy %s: %s" % (s["policies"], s["reason"]) for s in epp_skipped)
    summary, entries = _summary(mode_changes, policy_changes, step)
    result = {
        "changed": bool(entries),
        "amd_pstate": step,
        "drivers": drivers(state),
        "policies": groups,
        "skipped_policies": skipped,
        "epp_skipped": epp_skipped,
        "messages": messages,
        "predicted": predicted,
        "reboot_required": bool(step["reboot_required"]),
        "changes": summary,
        "skipped_commands": [],
    }
    if module._diff:
        result["diff"] = [grouped_diff(entries)] if entries else []
    module.exit_json(**result)


if __name__ == "__main__":
    main()
