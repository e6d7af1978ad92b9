# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""C-states: reader of cpuidle (driver, states per CPU, enabled/disabled, latencies, the idle drivers' max_cstate
parameters) and the evaluator of cpu.cstates, which judges the limit of the idle driver in use
(core/cpuprofile.py IDLE_LIMITS). The fix is a boot argument (concerns/bootargs/fix.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.core import cpuprofile
from ansible.module_utils.pvetune.concerns.bootargs.checks import boot_arg_state
from ansible.module_utils.pvetune.concerns.cpufreq.checks import natural_key
from ansible.module_utils.pvetune.core.cpuprofile import CPU_DIR, IDLE_LIMITS
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list


def check_cstates(facts, policy):
    cid = "cpu.cstates"
    err = section_error(facts, "cpuidle")
    policy = cpuprofile.for_host(policy, facts)
    prof = policy["host_cpu"]
    if err:
        return make_result(cid, policy, "error", None, err)
    idle = facts["cpuidle"]
    ev = list(idle.get("evidence", []))
    ev.append("cpuidle driver: %s" % (idle.get("driver") or "none"))
    if prof["cstate_why"]:
        return make_result(cid, policy, "skip", idle.get("driver"), prof["cstate_why"], evidence=ev)
    limit = policy["max_cstate"]
    arg = prof["cstate_arg"]
    ev.append("/proc/cmdline: %s" % ((facts.get("cmdline") or {}).get("raw") or "").strip())
    param = idle.get(prof["cstate_param_key"])
    if param is not None:
        ev.append("%s = %s" % (prof["cstate_param"], param))
    items = []
    deep_enabled = []
    for key, st in sorted((idle.get("states") or {}).items()):
        depth = cstate_depth(st["name"])
        too_deep = depth > limit
        if too_deep and st["enabled_count"]:
            deep_enabled.append(st)
        items.append({
            "name": "%s %s" % (key, st["name"]),
            "status": "fail" if too_deep and st["enabled_count"] else "pass",
            "current": "latency %dus, enabled on %d CPUs%s" % (
                st["latency_us"], st["enabled_count"],
                (" (%s)" % st["enabled_cpus"]) if st["enabled_count"] and st["enabled_count"] < 16 else ""),
            "expected": "disabled" if too_deep else "allowed",
            "message": "",
        })
    cmdline_err = section_error(facts, "cmdline")
    state = None if cmdline_err else boot_arg_state(facts, arg)[0]
    param_ok = param is None or (param.isdigit() and int(param) <= limit)
    problems = []
    if state == "transient":
        problems.append("%s is on /proc/cmdline but not configured in the boot loader: lost at the next boot" % arg)
    elif state not in ("effective", None):
        problems.append("%s is not on /proc/cmdline" % arg)
    if not param_ok:
        problems.append("%s module max_cstate is %s" % (arg.split(".")[0], param))
    if deep_enabled:
        problems.append("enabled states deeper than C%d: %s" % (
            limit, ", ".join("%s (%dus)" % (s["name"], s["latency_us"]) for s in deep_enabled)))
    current = "%s: max_cstate param %s; enabled states: %s" % (
        prof["idle_driver"], param if param is not None else "n/a",
        ", ".join(s["name"] for s in (idle.get("states") or {}).values() if s["enabled_count"]) or "none")
    read_errors = ["%s: %s" % (e["path"], e["error"]) for e in idle.get("errors") or []]
    if read_errors and not problems and not cmdline_err:
        return make_result(cid, policy, "error", current, "cannot read %d cpuidle file(s): %s"
                           % (len(read_errors), "; ".join(read_errors[:4])), items, ev)
    if read_errors:
        problems.append("cannot read %s" % "; ".join(read_errors[:4]))
    if cmdline_err and not problems:
        return make_result(cid, policy, "error", current, "cannot tell whether %s is effective: %s"
                           % (arg, cmdline_err), items, ev)
    if cmdline_err:
        problems.append("(/proc/cmdline unreadable: %s)" % cmdline_err)
    if not problems:
        return make_result(cid, policy, "pass", current, "%s effective; nothing deeper than C%d enabled"
                           % (arg, limit), items, ev)
    if state == "pending":
        return make_result(cid, policy, "pending", current,
                           "%s is configured in the boot loader; effective after reboot (%s)"
                           % (arg, "; ".join(problems)), items, ev, reboot_required=True)
    return make_result(cid, policy, "fail", current, "; ".join(problems), items, ev, reboot_required=True)


def read_cpuidle(fsroot):
    """cpuidle state aggregated per state index over every CPU."""
    out = {"errors": [], "evidence": []}
    out["driver"] = fsroot.try_value(CPU_DIR + "/cpuidle/current_driver")
    out["governor"] = fsroot.try_value(CPU_DIR + "/cpuidle/current_governor") or fsroot.try_value(
        CPU_DIR + "/cpuidle/current_governor_ro")
    for _arg, param, key in IDLE_LIMITS.values():
        out[key] = fsroot.try_value(param)
    states = {}
    cpus = [n for n in fsroot.listdir(CPU_DIR) if re.match(r"^cpu\d+$", n)]
    cpus.sort(key=natural_key)
    cpus_with_states = 0
    for cpu in cpus:
        num = int(cpu[3:])
        idle_dir = "%s/%s/cpuidle" % (CPU_DIR, cpu)
        entries = [n for n in fsroot.listdir(idle_dir) if re.match(r"^state\d+$", n)]
        if entries:
            cpus_with_states += 1
        for entry in entries:
            sdir = "%s/%s" % (idle_dir, entry)
            try:
                name = fsroot.read_value(sdir + "/name")
                latency = int(fsroot.read_value(sdir + "/latency"))
                disable = fsroot.read_value(sdir + "/disable")
                if disable not in ("0", "1"):
                    raise FsError(sdir + "/disable", "unexpected value %r" % disable)
            except FsError as exc:
                out["errors"].append({"path": exc.path, "error": exc.reason})
                continue
            except ValueError:
                out["errors"].append({"path": sdir + "/latency", "error": "not a number"})
                continue
            st = states.setdefault(entry, {"name": name, "latency": latency, "enabled": [], "disabled": [],
                                           "names": set()})
            st["names"].add(name)
            st["latency"] = max(st["latency"], latency)
            (st["disabled"] if disable == "1" else st["enabled"]).append(num)
    out["states"] = {}
    for key in sorted(states, key=natural_key):
        st = states[key]
        out["states"][key] = {
            "name": "/".join(sorted(st["names"])),
            "latency_us": st["latency"],
            "enabled_cpus": format_cpu_list(st["enabled"]),
            "enabled_count": len(st["enabled"]),
            "disabled_count": len(st["disabled"]),
        }
    out["cpu_count"] = len(cpus)
    out["cpus_with_states"] = cpus_with_states
    out["evidence"].append("%s/cpu*/cpuidle/state*/{name,latency,disable} (%d CPUs with idle states)"
                           % (CPU_DIR, cpus_with_states))
    return out


# Letters right after the number name a deeper variant (C1E, C6S); what follows a separator is a
# driver tag (intel_idle's "C1-SKX", "C1_ACPI" for ACPI _CST states) and does not change the depth.
_CSTATE_NAME = re.compile(r"^C(\d+)([A-Za-z]*)")


def cstate_depth(name):
    """Depth of a cpuidle state by its name: POLL 0, C1 1, C1E 1.5, C2 2, C6 6, C1_ACPI 1.

    Unknown names get depth 99 so they are treated as deep (the safe side).
    """
    name = (name or "").strip()
    if name.upper() == "POLL":
        return 0
    match = _CSTATE_NAME.match(name)
    if not match:
        return 99
    depth = float(match.group(1))
    if match.group(2):
        depth += 0.5  # C1E and friends are deeper than plain C1
    return depth


SECTIONS = (("cpuidle", lambda ctx: read_cpuidle(ctx.fsroot)),)
CHECKS = {"cpu.cstates": check_cstates}
