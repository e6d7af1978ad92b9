# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU fix: the P-state driver's mode (concerns/cpufreq/pstate_fix.py), then cpufreq governor and EPP: read, plan,
apply (module and boot helper).

Driver semantics this code relies on (Documentation/admin-guide/pm/amd-pstate.rst and intel_pstate.rst,
drivers/cpufreq/amd-pstate.c and intel_pstate.c):

* active mode (driver ``amd-pstate-epp``, or ``intel_pstate`` with HWP) offers only the ``performance`` and
  ``powersave`` "governors" (policies), and per-policy ``energy_performance_preference``. While the policy is
  ``performance`` the kernel forces EPP to ``performance`` and refuses any other EPP write with EBUSY.  So the
  governor is written first, EPP is re-read, and only then written where it still differs; a request for governor
  performance with an EPP other than performance is refused while planning, before anything is written.
* passive/guided mode (``amd-pstate``, ``intel_cpufreq``), acpi-cpufreq and intel_pstate without HWP: no EPP file.
  EPP is skipped with that reason, not failed.
* a policy whose ``affected_cpus`` is empty has no online CPU; the kernel refuses writes to it.  It is skipped
  and reported.

The same functions serve the Ansible module (which records every runtime original on a
changeset.ChangeSet for rollback) and ``boot_apply`` (pvetune-boot cpufreq, which only
re-applies the configured values at boot and records nothing).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import re

from ansible.module_utils.pvetune.concerns.cpufreq.checks import CPUFREQ_DIR, read_boost
from ansible.module_utils.pvetune.concerns.cpufreq.pstate_fix import (
    apply_mode,
    drivers,
    plan_mode,
    predict_after_switch,
    read_state,
    reason,
    requested_mode,
    write_sysfs,
)
from ansible.module_utils.pvetune.core.cpuprofile import PSTATE, PSTATE_BY_DRIVER, epp_needs
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list

# Drivers that force EPP performance under governor performance (and refuse other EPP values then).
EPP_FORCING = frozenset(row["epp_driver"] for row in PSTATE.values())
# Governor and EPP names are single lower-case words; they are also checked against what
# each policy offers.  The pattern keeps anything shell- or option-like out before that.
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
CONFIG_KEYS = tuple(sorted(row["policy_key"] for row in PSTATE.values())) + ("governor", "epp", "boost")

GOVERNOR_FILE = "scaling_governor"
EPP_FILE = "energy_performance_preference"
_RUNTIME_KEY = re.compile(r"^cpufreq:policy(\d+):(\w+)$")


class CpufreqError(ValueError):
    """A bad option or configuration; raised before anything is written."""


# -- options -------------------------------------------------------------------
def validate_name(value, what):
    if value is None:
        return None
    if not isinstance(value, str) or not NAME.fullmatch(value):
        shown = value[:40] if isinstance(value, str) else value
        raise CpufreqError("%s must be a lower-case word such as 'performance' (letters, digits, '_'; at most "
                           "32 characters), not %r" % (what, shown))
    return value


def validate_config(config):
    """{"amd_pstate_mode", "intel_pstate_mode", "governor", "epp"} (each may be None/absent) -> normalised copy."""
    if not isinstance(config, dict):
        raise CpufreqError("cpufreq configuration must be a mapping")
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise CpufreqError("unknown cpufreq configuration key(s): %s (known: %s)"
                           % (", ".join(str(k) for k in unknown), ", ".join(CONFIG_KEYS)))
    out = {"governor": validate_name(config.get("governor"), "governor"),
           "epp": validate_name(config.get("epp"), "epp"), "boost": config.get("boost")}
    if out["boost"] not in (None, True, False):
        raise CpufreqError("boost must be true, false or omitted, not %r" % (out["boost"],))
    for row in PSTATE.values():
        key, mode = row["policy_key"], config.get(row["policy_key"])
        if mode is not None and mode not in row["modes"]:
            raise CpufreqError("%s must be one of %s, not %r" % (key, ", ".join(sorted(row["modes"])),
                                                                 mode[:40] if isinstance(mode, str) else mode))
        out[key] = mode
    return out


# -- governor and EPP -------------------------------------------------------------
def plan_policies(state, governor=None, epp=None):
    """Per-policy steps for the governor and EPP.

    Returns {"governor": [step], "epp": [step], "skipped": [{"policy", "reason"}],
    "epp_skipped": [{"policy", "reason"}], "errors": [str]}; a step is {"policy", "num",
    "path", "attribute", "before", "after"} (EPP steps also "write": False when the governor
    write alone makes the kernel set it).  ``errors`` (a name a policy does not offer, an EPP
    the kernel refuses under governor performance, unreadable files) mean: write nothing.
    """
    plan = {"governor": [], "epp": [], "skipped": [], "epp_skipped": [], "errors": []}
    if (governor or epp) and not state["policies"]:
        plan["errors"].append("%s has no policy*: no cpufreq scaling driver is loaded" % CPUFREQ_DIR)
    for pol in state["policies"]:
        name = pol["name"]
        if not pol["online"]:
            reason = "; ".join(pol["errors"]) or "affected_cpus is empty: every CPU of the policy is offline"
            plan["skipped"].append({"policy": name, "num": pol["num"], "reason": reason})
            continue
        gov_after = pol["governor"]
        if governor is not None:
            offered = pol["available_governors"]
            if pol["governor"] is None:
                plan["errors"].append("%s/%s is unreadable" % (pol["dir"], GOVERNOR_FILE))
            elif offered is None:
                plan["errors"].append("%s/scaling_available_governors is unreadable" % pol["dir"])
            elif governor not in offered:
                plan["errors"].append("%s (%s) does not offer governor %s (offers: %s)"
                                      % (name, pol["driver"], governor, " ".join(offered)))
            else:
                gov_after = governor
                if pol["governor"] != governor:
                    plan["governor"].append(_step(pol, GOVERNOR_FILE, pol["governor"], governor))
        if epp is None:
            continue
        if pol["epp"] is None:
            plan["epp_skipped"].append({"policy": name, "num": pol["num"],
                                        "reason": "scaling driver %s offers no EPP (%s): %s"
                                        % (pol["driver"], EPP_FILE, epp_needs(state.get("pstate")))})
            continue
        offered = pol["available_epp"]
        if offered is None:
            plan["errors"].append("%s/energy_performance_available_preferences is unreadable" % pol["dir"])
            continue
        if epp not in offered:
            plan["errors"].append("%s (%s) does not offer EPP %s (offers: %s)"
                                  % (name, pol["driver"], epp, " ".join(offered)))
            continue
        forced = pol["driver"] in EPP_FORCING and gov_after == "performance"
        if forced and epp != "performance":
            plan["errors"].append(
                "%s: EPP %s cannot be set while the governor is performance: %s forces EPP performance and "
                "refuses other values (EBUSY); use governor powersave with EPP %s, or EPP performance"
                % (name, epp, pol["driver"], epp))
            continue
        if pol["epp"] != epp:
            step = _step(pol, EPP_FILE, pol["epp"], epp)
            step["write"] = not forced
            plan["epp"].append(step)
    return plan


def plan_boost(fsroot, state, boost):
    """Steps that turn boost on (``boost`` true) or off on every file read_boost names: [{"key", "path", "before",
    "after"}]; per-policy files only for online policies (the kernel refuses writes to the others)."""
    if boost is None:
        return []
    online = {pol["dir"] for pol in state["policies"] if pol["online"]}
    steps = []
    for path, before, on in read_boost(fsroot, [{"dir": d} for d in sorted(online)])["files"]:
        after = on if boost else {"0": "1", "1": "0"}[on]
        if before != after:
            name = path.rsplit("/", 2)
            steps.append({"key": "cpufreq:%s:%s" % (name[1], name[2]) if name[1].startswith("policy")
                          else "cpufreq:%s" % name[2], "path": path, "before": before, "after": after})
    return steps


def write_boost(fsroot, steps, writer=write_sysfs):
    """Write the boost steps, each read back; returns [failure message]."""
    failures = []
    for step in steps:
        try:
            writer(fsroot, step["path"], step["after"])
        except (OSError, IOError, FsError) as exc:
            failures.append("writing %s to %s failed: %s" % (step["after"], step["path"], reason(exc)))
            continue
        got = fsroot.try_value(step["path"])
        if got != step["after"]:
            failures.append("%s reads %r after writing %s" % (step["path"], got, step["after"]))
    return failures


def describe_boost(steps):
    if not steps:
        return []
    first = steps[0]
    return ["boost %s -> %s on %d file(s) (%s)" % (first["before"], first["after"], len(steps), first["path"])]


def _step(pol, attribute, before, after):
    return {"policy": pol["name"], "num": pol["num"], "path": "%s/%s" % (pol["dir"], attribute),
            "attribute": attribute, "before": before, "after": after}


def apply_policies(fsroot, plan, writer=write_sysfs):
    """Write the governors, then EPP where it still differs; returns [failure message].

    Each write is read back.  EPP is re-read after the governor writes, since the kernel may
    already have set it (governor performance on amd-pstate-epp).  Steps get "result":
    "written", "set by the kernel with the governor", or "failed".
    """
    failures = []
    for step in plan["governor"] + plan["epp"]:
        if step["attribute"] == EPP_FILE:
            now = fsroot.try_value(step["path"])
            if now == step["after"]:
                step["result"] = "set by the kernel with the governor" if not step.get("write", True) \
                    else "already set"
                continue
        try:
            writer(fsroot, step["path"], step["after"])
        except (OSError, IOError, FsError) as exc:
            step["result"] = "failed"
            hint = ""
            if isinstance(exc, OSError) and exc.errno == errno.EBUSY and step["attribute"] == EPP_FILE:
                hint = " (the kernel refuses EPP writes other than performance while the governor is performance)"
            failures.append("writing %s to %s failed: %s%s" % (step["after"], step["path"], reason(exc), hint))
            continue
        got = fsroot.try_value(step["path"])
        if got != step["after"]:
            step["result"] = "failed"
            failures.append("%s reads %r after writing %s" % (step["path"], got, step["after"]))
        else:
            step["result"] = "written"
    return failures


# -- grouping (128 policies -> a few lines) ----------------------------------------
def group_steps(steps):
    """[{"attribute", "before", "after", "policies": "0-127", "count"}], one per distinct change."""
    groups = []
    index = {}
    for step in steps:
        key = (step["attribute"], step["before"], step["after"])
        if key not in index:
            index[key] = {"attribute": key[0], "before": key[1], "after": key[2], "nums": []}
            groups.append(index[key])
        index[key]["nums"].append(step["num"])
    return [{"attribute": g["attribute"], "before": g["before"], "after": g["after"],
             "policies": format_cpu_list(g["nums"]), "count": len(g["nums"])} for g in groups]


def group_reasons(items):
    """[{"policy"/"num", "reason"}] -> [{"policies": "5,7", "count", "reason"}]."""
    out = []
    index = {}
    for item in items:
        if item["reason"] not in index:
            index[item["reason"]] = []
            out.append(item["reason"])
        index[item["reason"]].append(item["num"])
    return [{"policies": format_cpu_list(index[r]), "count": len(index[r]), "reason": r} for r in out]


def group_runtime(entries):
    """ChangeSet.runtime entries -> one entry per distinct change.

    ``cpufreq:policy<N>:<attribute>`` keys with the same attribute, before and after become
    ``cpufreq:policy[0-127]:<attribute>`` with "count"; other keys stay as they are.
    """
    out = []
    index = {}
    for entry in entries:
        match = _RUNTIME_KEY.match(entry["key"])
        if not match:
            out.append({"key": entry["key"], "before": entry["before"], "after": entry["after"], "count": 1})
            continue
        gkey = (match.group(2), entry["before"], entry["after"])
        if gkey not in index:
            index[gkey] = {"attribute": gkey[0], "before": gkey[1], "after": gkey[2], "nums": []}
            out.append(index[gkey])
        index[gkey]["nums"].append(int(match.group(1)))
    result = []
    for item in out:
        if "nums" in item:
            result.append({"key": "cpufreq:policy[%s]:%s" % (format_cpu_list(item["nums"]), item["attribute"]),
                           "before": item["before"], "after": item["after"], "count": len(item["nums"])})
        else:
            result.append(item)
    return result


def grouped_diff(entries):
    """One Ansible diff entry for runtime values, grouped with group_runtime()."""
    grouped = group_runtime(entries)
    return {"before_header": "runtime values", "after_header": "runtime values",
            "before": "".join("%s = %s\n" % (g["key"], g["before"]) for g in grouped),
            "after": "".join("%s = %s\n" % (g["key"], g["after"]) for g in grouped)}


def describe(groups):
    return ["%s %s -> %s on policy %s" % (g["attribute"], g["before"], g["after"], g["policies"]) for g in groups]


# -- boot -------------------------------------------------------------------------
def boot_apply(fsroot, runner, config, writer=write_sysfs):
    """pvetune-boot cpufreq: re-apply mode, governor and EPP; returns (ok, [messages]).

    A mode that cannot be reached at runtime is reported (the boot argument is what makes it
    stick) but does not fail the unit; a governor/EPP that is not offered or cannot be
    written does.  Nothing is recorded for rollback: the fix run recorded the originals.
    ``runner`` is unused (sysfs writes need no command); it is part of the boot_apply contract.
    """
    del runner
    try:
        cfg = validate_config(config)
    except CpufreqError as exc:
        return False, ["configuration: %s" % exc]
    messages = []
    state = read_state(fsroot)
    step = plan_mode(state, requested_mode(state, cfg))
    if step["action"] == "switch":
        apply_mode(fsroot, step, writer)
        state = read_state(fsroot)
    if step["action"] == "switched":
        messages.append("%s mode %s -> %s" % (step["driver"], step["before"], step["after"]))
    elif step["message"] and step["action"] in ("failed", "unavailable", "unknown"):
        messages.append("warning: " + step["message"])
    plan = plan_policies(state, cfg["governor"], cfg["epp"])
    for item in group_reasons(plan["skipped"]):
        messages.append("skipped policy %s: %s" % (item["policies"], item["reason"]))
    for item in group_reasons(plan["epp_skipped"]):
        messages.append("EPP not set on policy %s: %s" % (item["policies"], item["reason"]))
    if plan["errors"]:
        return False, messages + ["not applied: %s" % e for e in plan["errors"]]
    boost = plan_boost(fsroot, state, cfg["boost"])
    failures = apply_policies(fsroot, plan, writer) + write_boost(fsroot, boost, writer)
    messages.extend(describe(group_steps(plan["governor"] + plan["epp"])) + describe_boost(boost))
    if failures:
        return False, messages + failures
    wanted = ["%s %s" % (k, cfg[k]) for k in ("governor", "epp") if cfg[k] is not None]
    if wanted and not plan["governor"] and not plan["epp"]:
        messages.append("%s already set where offered" % ", ".join(wanted))
    return True, messages


# -- pvetune_cpufreq ---------------------------------------------------------
class _Failed(Exception):
    def __init__(self, msg, **extra):
        Exception.__init__(self, msg)
        self.extra = extra


def _summary(mode_changes, policy_changes, step=None):
    """Grouped runtime changes; a mode switch that failed (and was written back) is not one."""
    entries = list(policy_changes.runtime)
    if step is None or step["action"] in ("switch", "switched"):
        entries = list(mode_changes.runtime) + entries
    return {"files": [], "runtime": group_runtime(entries)}, entries


def _switch_mode(fsroot, mode_changes, state, step, check_mode, messages):
    """Plan (and outside check mode perform) the mode switch; returns (state, predicted)."""
    row = PSTATE_BY_DRIVER[step["driver"]]
    mode_changes.plan_runtime("%s:status" % row["driver"], row["status_file"], step["before"], step["after"])
    if check_mode:
        messages.append("check mode: %s mode %s -> %s is not performed; per-policy values after "
                        "it are predicted" % (row["driver"], step["before"], step["after"]))
        return predict_after_switch(state, step["after"]), True
    mode_changes.apply()
    apply_mode(fsroot, step)
    return read_state(fsroot), False


def _errors_message(errors):
    return ("cpufreq settings not applied: %s" % "; ".join(errors[:8])
            + ("; ... (%d problems)" % len(errors) if len(errors) > 8 else ""))


def _apply(fsroot, mode_changes, policy_changes, cfg, check_mode, require_runtime_mode, messages, warnings,
           progress):
    """Mode first, then governor and EPP; returns (step, plan, state, predicted); raises _Failed.

    ``progress["step"]`` is the mode step once planned: a failure's change summary depends on it.
    """
    state = read_state(fsroot)
    step = progress["step"] = plan_mode(state, requested_mode(state, cfg))
    predicted = False
    if step["action"] == "switch":
        state, predicted = _switch_mode(fsroot, mode_changes, state, step, check_mode, messages)
    if step["action"] == "switched":
        messages.append("%s mode %s -> %s" % (step["driver"], step["before"], step["after"]))
    elif step["action"] in ("not_applicable", "unknown"):
        messages.append(step["message"])
    elif step["action"] in ("failed", "unavailable"):
        if require_runtime_mode:
            raise _Failed(step["message"], pstate=step, reboot_required=True)
        messages.append(step["message"])
        warnings.append(step["message"])
    plan = plan_policies(state, cfg["governor"], cfg["epp"])
    if plan["errors"]:
        raise _Failed(_errors_message(plan["errors"]), pstate=step, errors=plan["errors"])
    for pstep in plan["governor"] + plan["epp"]:
        policy_changes.plan_runtime("cpufreq:%s:%s" % (pstep["policy"], pstep["attribute"]), pstep["path"],
                                    pstep["before"], pstep["after"])
    plan["boost"] = plan_boost(fsroot, state, cfg["boost"])
    for bstep in plan["boost"]:
        policy_changes.plan_runtime(bstep["key"], bstep["path"], bstep["before"], bstep["after"])
    if not check_mode:
        policy_changes.apply()
        failures = apply_policies(fsroot, plan) + write_boost(fsroot, plan["boost"])
        state = read_state(fsroot)
        if failures:
            raise _Failed("cpufreq: %d write(s) failed: %s" % (len(failures), "; ".join(failures[:8])),
                          pstate=step, failures=failures)
    return step, plan, state, predicted


def fix(params, run_command, check_mode, diff):
    """pvetune_cpufreq's entry point: returns (failed, result, warnings) for the module to exit with."""
    try:
        cfg = validate_config({k: params[k] for k in CONFIG_KEYS})
        fsroot = FsRoot(params["root"])
        mode_changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
    except (CpufreqError, ValueError) as exc:
        return True, {"msg": str(exc)}, []
    policy_changes = ChangeSet(fsroot, check_mode=check_mode, run_id=mode_changes.run_id)
    messages, warnings, progress = [], [], {"step": None}
    try:
        try:
            step, plan, state, predicted = _apply(fsroot, mode_changes, policy_changes, cfg, check_mode,
                                                  params["require_runtime_mode"], messages, warnings, progress)
        except (OSError, IOError, FsError, ChangeError) as exc:
            raise _Failed("cpufreq: %s" % exc)
    except _Failed as exc:
        summary = _summary(mode_changes, policy_changes, progress["step"])[0]
        return True, dict(msg=str(exc), changes=summary, messages=messages, **exc.extra), warnings
    groups = group_steps(plan["governor"] + plan["epp"])
    skipped = group_reasons(plan["skipped"])
    epp_skipped = group_reasons(plan["epp_skipped"])
    messages.extend(describe(groups) + describe_boost(plan["boost"]))
    messages.extend("skipped policy %s: %s" % (s["policies"], s["reason"]) for s in skipped)
    messages.extend("EPP not set on policy %s: %s" % (s["policies"], s["reason"]) for s in epp_skipped)
    summary, entries = _summary(mode_changes, policy_changes, step)
    result = {
        "changed": bool(entries), "pstate": step, "drivers": drivers(state), "policies": groups,
        "skipped_policies": skipped, "epp_skipped": epp_skipped, "messages": messages, "predicted": predicted,
        "reboot_required": bool(step["reboot_required"]), "changes": summary, "skipped_commands": [],
    }
    if diff:
        result["diff"] = [grouped_diff(entries)] if entries else []
    return False, result, warnings
