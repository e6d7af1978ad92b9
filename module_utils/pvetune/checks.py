# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evaluate gathered facts against the policy: one result per catalogue check.

Every evaluator is a pure function ``(facts, policy) -> result``.  Results
carry the catalogue's texts, the current value, the status and the evidence
(files and values read), so a report can be written from them alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.bootcfg import arg_key, arg_value
from ansible.module_utils.pvetune.core.catalogue import BY_ID, CATALOGUE, render
from ansible.module_utils.pvetune.hostinfo import cstate_depth

SCHEMA_VERSION = 1
SEVERITY_RANK = {"critical": 4, "high": 3, "medium": 2, "low": 1, "info": 0}


def _arg_key(arg):
    return arg_key(arg)


def _same_arg(a, b):
    # The kernel (and bootcfg.plan_args, which the fix uses) treats "-"/"_" in names and quoted values alike.
    return arg_key(a) == arg_key(b) and arg_value(a) == arg_value(b)


def _arg_map(args):
    """{normalised key: [full args]} for a list of kernel args."""
    out = {}
    for arg in args or []:
        out.setdefault(_arg_key(arg), []).append(arg)
    return out


def make_result(check_id, policy, status, current, message, items=None, evidence=None, reboot_required=False):
    entry = BY_ID[check_id]
    return {
        "id": check_id,
        "title": render(check_id, "title", policy),
        "severity": entry["severity"],
        "status": status,
        "current": current,
        "expected": render(check_id, "expected", policy),
        "reboot_required": bool(reboot_required),
        "message": message,
        "rationale": entry["rationale"],
        "remediation": render(check_id, "remediation", policy),
        "fix_tag": entry["fix_tag"],
        "evidence": list(evidence or []),
        "items": list(items or []),
    }


def _section_error(facts, section):
    data = facts.get(section)
    if isinstance(data, dict) and data.get("error"):
        return data["error"]
    return None


def _is_amd(facts):
    return (facts.get("cpu") or {}).get("vendor") == "AuthenticAMD"


def _configured_args(facts):
    return (facts.get("boot") or {}).get("configured_args")


def _effective_args(facts):
    return (facts.get("cmdline") or {}).get("args") or []


def _arg_state(facts, arg):
    """('effective'|'pending'|'missing'|'transient', detail) for one required arg."""
    key = _arg_key(arg)
    eff = _arg_map(_effective_args(facts)).get(key, [])
    configured = _configured_args(facts)
    conf = _arg_map(configured or []).get(key, []) if configured is not None else None
    # For repeated parameters the kernel (and GRUB's concatenation) lets the last one win.
    on_now = bool(eff) and _same_arg(eff[-1], arg)
    if conf is None:
        return ("effective" if on_now else "missing"), eff
    in_conf = bool(conf) and _same_arg(conf[-1], arg)
    if on_now and in_conf:
        return "effective", eff
    if in_conf:
        return "pending", eff
    if on_now:
        return "transient", conf
    return "missing", conf or eff


# -- CPU ---------------------------------------------------------------------
def check_scaling_driver(facts, policy):
    cid = "cpu.scaling_driver"
    err = _section_error(facts, "cpu")
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    ev = list(cpu.get("evidence", []))
    if not _is_amd(facts):
        return make_result(cid, policy, "skip", cpu.get("vendor"),
                           "not an AMD CPU (%s): amd_pstate does not apply" % (cpu.get("model") or cpu.get("vendor")),
                           evidence=ev)
    policies = cpu.get("policies") or {}
    drivers = {}
    for name, pol in policies.items():
        drivers.setdefault(pol.get("driver") or "(unreadable)", []).append(name)
    status_file = cpu.get("amd_pstate_status")
    current = ", ".join("%s (%d policies)" % (d, len(p)) for d, p in sorted(drivers.items())) or "no cpufreq driver"
    if status_file is not None:
        current += "; amd_pstate/status=%s" % status_file
    want = policy["scaling_driver"]
    mode_arg = "amd_pstate=%s" % policy["amd_pstate_mode"]
    items = [{"name": d, "status": "pass" if d == want else "fail", "current": d, "expected": want,
              "message": "policies: %s" % ",".join(sorted(p, key=lambda x: int(x[6:]) if x[6:].isdigit() else 0)[:8])
              + (" …" if len(p) > 8 else "")} for d, p in sorted(drivers.items())]
    unreadable = _read_errors(cpu, "scaling_driver")
    if unreadable:
        current += "; cannot read %s" % "; ".join(unreadable[:4])
        if set(drivers) <= {want, "(unreadable)"}:
            return make_result(cid, policy, "error", current, "cannot read the cpufreq driver of %d policies: %s"
                               % (len(unreadable), "; ".join(unreadable[:4])), items, ev)
    if drivers and set(drivers) == {want}:
        return make_result(cid, policy, "pass", current, "every policy uses %s" % want, items, ev)
    arg_state = _arg_state(facts, mode_arg)[0]
    runtime_switch = status_file in ("passive", "guided", "disable") and status_file != policy["amd_pstate_mode"]
    hint = (" (or switch now: echo %s > /sys/devices/system/cpu/amd_pstate/status)" % policy["amd_pstate_mode"]
            if runtime_switch else "")
    if arg_state == "pending":
        return make_result(cid, policy, "pending", current,
                           "%s is configured in the boot loader but not on /proc/cmdline yet: reboot%s"
                           % (mode_arg, hint), items, ev, reboot_required=True)
    if runtime_switch:
        return make_result(cid, policy, "fail", current,
                           "amd_pstate is loaded in %s mode; switch at runtime with 'echo %s > "
                           "/sys/devices/system/cpu/amd_pstate/status' and configure %s for the next boot"
                           % (status_file, policy["amd_pstate_mode"], mode_arg), items, ev,
                           reboot_required=arg_state != "effective")
    fallback = set(policy.get("scaling_driver_fallback") or [])
    if drivers and set(drivers) <= fallback:
        # Say why the wanted driver is not there, so an accepted fallback is never a silent pass.
        why = {"effective": "%s is on /proc/cmdline but amd_pstate did not load (no CPPC in the firmware?)"
                            % mode_arg,
               "transient": "%s is on /proc/cmdline but not configured in the boot loader" % mode_arg,
               "missing": "%s is not on the kernel command line" % mode_arg}.get(arg_state)
        return make_result(cid, policy, "warn", current,
                           "%s is accepted by this host's policy (scaling_driver_fallback) instead of %s%s"
                           % (", ".join(sorted(drivers)), want, "; " + why if why else ""), items, ev)
    if not drivers:
        return make_result(cid, policy, "fail", current,
                           "no cpufreq driver is active; expected %s" % want, items, ev, reboot_required=True)
    if arg_state == "effective":
        msg = ("%s is on /proc/cmdline but the driver is %s: amd_pstate did not load "
               "(is CPPC enabled in the BIOS?)" % (mode_arg, ", ".join(sorted(drivers))))
    else:
        msg = "driver is %s; add %s to the kernel command line and reboot" % (", ".join(sorted(drivers)), mode_arg)
    if unreadable:
        msg += "; cannot read %s" % "; ".join(unreadable[:4])
    return make_result(cid, policy, "fail", current, msg, items, ev, reboot_required=True)


def _policy_items(policies, key, want, label):
    bad = {}
    for name, pol in policies.items():
        value = pol.get(key)
        if value != want:
            bad.setdefault(value if value is not None else "(unreadable)", []).append(name)
    items = []
    for value, names in sorted(bad.items()):
        items.append({"name": "%s=%s" % (label, value), "status": "fail", "current": value, "expected": want,
                      "message": "%d policies: %s" % (len(names), _short_list(names))})
    return bad, items


def _short_list(names, limit=8):
    names = sorted(names, key=lambda n: (len(n), n))
    return ", ".join(names[:limit]) + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


def _read_errors(cpu, fname):
    """'path: reason' of the cpufreq files named ``fname`` that could not be read."""
    return ["%s: %s" % (e["path"], e["error"]) for e in (cpu.get("errors") or [])
            if str(e.get("path", "")).endswith("/" + fname)]


def check_governor(facts, policy):
    cid = "cpu.governor"
    err = _section_error(facts, "cpu")
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    policies = cpu.get("policies") or {}
    ev = list(cpu.get("evidence", []))
    if not policies:
        return make_result(cid, policy, "skip", None, "no cpufreq policies: no frequency scaling driver is active",
                           evidence=ev)
    want = policy["governor"]
    bad, items = _policy_items(policies, "governor", want, "governor")
    unreadable = _read_errors(cpu, "scaling_governor")
    if unreadable and not [v for v in bad if v != "(unreadable)"]:
        return make_result(cid, policy, "error", None, "cannot read the governor of %d of %d policies: %s"
                           % (len(unreadable), len(policies), "; ".join(unreadable[:4])), items, ev)
    if not bad:
        return make_result(cid, policy, "pass", want, "all %d policies use %s" % (len(policies), want), evidence=ev)
    unavailable = [n for n, p in policies.items()
                   if p.get("available_governors") and want not in p["available_governors"]]
    msg = "%d of %d policies are not on %s" % (sum(len(v) for v in bad.values()), len(policies), want)
    if unavailable:
        msg += "; %s is not offered by the driver on %s" % (want, _short_list(unavailable))
    if unreadable:
        msg += "; cannot read %s" % "; ".join(unreadable[:4])
    current = ", ".join(sorted("%s (%d)" % (v, len(n)) for v, n in bad.items()))
    return make_result(cid, policy, "fail", current, msg, items, ev)


def check_epp(facts, policy):
    cid = "cpu.epp"
    err = _section_error(facts, "cpu")
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    ev = list(cpu.get("evidence", []))
    policies = {n: p for n, p in (cpu.get("policies") or {}).items() if p.get("epp") is not None}
    if not policies:
        drivers = sorted({p.get("driver") or "?" for p in (cpu.get("policies") or {}).values()})
        return make_result(cid, policy, "skip", None,
                           "the cpufreq driver (%s) offers no energy_performance_preference"
                           % (", ".join(drivers) or "none"), evidence=ev)
    want = policy["epp"]
    bad, items = _policy_items(policies, "epp", want, "epp")
    if not bad:
        return make_result(cid, policy, "pass", want, "all %d policies prefer %s" % (len(policies), want), evidence=ev)
    current = ", ".join(sorted("%s (%d)" % (v, len(n)) for v, n in bad.items()))
    return make_result(cid, policy, "fail", current,
                       "%d of %d policies do not prefer %s" % (sum(len(v) for v in bad.values()), len(policies), want),
                       items, ev)


def check_cstates(facts, policy):
    cid = "cpu.cstates"
    err = _section_error(facts, "cpuidle")
    if err:
        return make_result(cid, policy, "error", None, err)
    idle = facts["cpuidle"]
    limit = policy["max_cstate"]
    arg = "processor.max_cstate=%d" % limit
    ev = list(idle.get("evidence", []))
    ev.append("/proc/cmdline: %s" % ((facts.get("cmdline") or {}).get("raw") or "").strip())
    param = idle.get("max_cstate_param")
    if param is not None:
        ev.append("/sys/module/processor/parameters/max_cstate = %s" % param)
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
    cmdline_err = _section_error(facts, "cmdline")
    state = None if cmdline_err else _arg_state(facts, arg)[0]
    param_ok = param is None or (param.isdigit() and int(param) <= limit)
    problems = []
    if state == "transient":
        problems.append("%s is on /proc/cmdline but not configured in the boot loader: lost at the next boot" % arg)
    elif state not in ("effective", None):
        problems.append("%s is not on /proc/cmdline" % arg)
    if not param_ok:
        problems.append("processor module max_cstate is %s" % param)
    if deep_enabled:
        problems.append("enabled states deeper than C%d: %s" % (
            limit, ", ".join("%s (%dus)" % (s["name"], s["latency_us"]) for s in deep_enabled)))
    current = "max_cstate param %s; enabled states: %s" % (
        param if param is not None else "n/a",
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


# -- sysctl ------------------------------------------------------------------
def check_numa_balancing(facts, policy):
    cid = "kernel.numa_balancing"
    err = _section_error(facts, "sysctl")
    if err:
        return make_result(cid, policy, "error", None, err)
    data = (facts["sysctl"] or {}).get("kernel.numa_balancing") or {}
    runtime = data.get("runtime")
    persisted = data.get("persisted")
    want = str(policy["numa_balancing"])
    ev = ["/proc/sys/kernel/numa_balancing = %s" % runtime]
    if persisted:
        ev.append("%s:%d kernel.numa_balancing = %s" % (persisted["file"], persisted["line"], persisted["value"]))
    else:
        ev.append("no kernel.numa_balancing in %s" % ", ".join(data.get("files") or ["sysctl.d"]))
    if runtime is None:
        return make_result(cid, policy, "skip", None,
                           "/proc/sys/kernel/numa_balancing does not exist (kernel without NUMA balancing or one node)",
                           evidence=ev)
    if not runtime.isdigit():
        return make_result(cid, policy, "error", runtime[:40],
                           "/proc/sys/kernel/numa_balancing holds %r, not a number" % runtime[:40], evidence=ev)
    cmdline_off = "numa_balancing=disable" in _effective_args(facts)
    conf_off = "numa_balancing=disable" in (_configured_args(facts) or [])
    persisted_ok = (persisted is not None and persisted["value"] == want) or (want == "0" and conf_off)
    if persisted:
        persisted_text = persisted["value"]
    else:
        persisted_text = "cmdline numa_balancing=disable" if conf_off else "no"
    current = "runtime %s, persisted %s" % (runtime, persisted_text)
    if runtime == want and persisted_ok:
        return make_result(cid, policy, "pass", current, "numa_balancing is %s and persisted" % want, evidence=ev)
    if runtime == want:
        return make_result(cid, policy, "fail", current,
                           "numa_balancing is %s now but not persisted: it returns to the kernel default at the next "
                           "boot" % want, evidence=ev)
    msg = "numa_balancing is %s at runtime" % runtime
    if persisted_ok:
        msg += " although %s is persisted (set it at runtime: sysctl -w kernel.numa_balancing=%s)" % (want, want)
    if cmdline_off:
        msg += "; numa_balancing=disable is on the command line"
    return make_result(cid, policy, "fail", current, msg, evidence=ev)


# -- PCIe --------------------------------------------------------------------
def _gpus(facts):
    return [f for f in ((facts.get("pci") or {}).get("functions") or []) if f.get("is_gpu")]


def check_mrrs(facts, policy):
    cid = "pcie.mrrs"
    err = _section_error(facts, "pci")
    if err:
        return make_result(cid, policy, "error", None, err)
    gpus = _gpus(facts)
    ev = list((facts.get("pci") or {}).get("evidence", []))
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU (vendor %s, class %sxx) found"
                           % (policy["pcie_vendor"], policy["pcie_class_prefix"]), evidence=ev)
    want = policy["pcie_mrrs"]
    items = []
    for gpu in gpus:
        name = "%s %s" % (gpu["bdf"], gpu.get("name") or "")
        if gpu.get("error") or gpu.get("mrrs") is None:
            items.append({"name": name.strip(), "status": "error", "current": None, "expected": "MaxReadReq %d" % want,
                          "message": gpu.get("error") or "no PCI Express capability found"})
            continue
        ok = gpu["mrrs"] == want
        items.append({"name": name.strip(), "status": "pass" if ok else "fail",
                      "current": "MaxReadReq %d, MaxPayload %d (cap %s)" % (
                          gpu["mrrs"], gpu.get("mps") or 0, gpu.get("devcap_mps")),
                      "expected": "MaxReadReq %d" % want, "message": ""})
    fails = [i for i in items if i["status"] == "fail"]
    errors = [i for i in items if i["status"] == "error"]
    values = sorted({g.get("mrrs") for g in gpus if g.get("mrrs") is not None})
    current = "MaxReadReq %s on %d GPUs" % ("/".join(str(v) for v in values) or "?", len(gpus))
    if fails:
        return make_result(cid, policy, "fail", current, "%d of %d GPUs below MaxReadReq %d: %s%s" % (
            len(fails), len(gpus), want, ", ".join(i["name"].split()[0] for i in fails),
            "; could not read %d: %s" % (len(errors), "; ".join(i["message"] for i in errors)) if errors else ""),
            items, ev)
    if errors:
        return make_result(cid, policy, "error", current, "could not read %d GPU config spaces: %s" % (
            len(errors), "; ".join(i["message"] for i in errors)), items, ev)
    return make_result(cid, policy, "pass", current, "all %d GPUs at MaxReadReq %d" % (len(gpus), want), items, ev)


def _speed_value(speed):
    try:
        return float((speed or "").replace("GT/s", ""))
    except ValueError:
        return None


def check_link(facts, policy):
    cid = "pcie.link"
    err = _section_error(facts, "pci")
    if err:
        return make_result(cid, policy, "error", None, err)
    gpus = _gpus(facts)
    ev = list((facts.get("pci") or {}).get("evidence", []))
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    items = []
    for gpu in gpus:
        name = gpu["bdf"]
        if gpu.get("error") or gpu.get("lnkcap_width") is None:
            items.append({"name": name, "status": "error", "current": None, "expected": None,
                          "message": gpu.get("error") or "no PCI Express capability found"})
            continue
        cur = "%s x%d" % (gpu["lnksta_speed"], gpu["lnksta_width"])
        cap = "%s x%d" % (gpu["lnkcap_speed"], gpu["lnkcap_width"])
        if gpu["lnksta_width"] < gpu["lnkcap_width"]:
            status, msg = "fail", "link trained at x%d of x%d lanes" % (gpu["lnksta_width"], gpu["lnkcap_width"])
        elif (_speed_value(gpu["lnksta_speed"]) or 0) < (_speed_value(gpu["lnkcap_speed"]) or 0):
            status = "warn"
            msg = "speed below capability at full width: usually idle power management; check under load"
        else:
            status, msg = "pass", ""
        items.append({"name": name, "status": status, "current": cur, "expected": cap, "message": msg})
    counts = {s: sum(1 for i in items if i["status"] == s) for s in ("fail", "warn", "error")}
    current = ", ".join(sorted({i["current"] for i in items if i["current"]})) or None
    if counts["fail"]:
        return make_result(cid, policy, "fail", current, "%d GPU links narrower than their capability%s" % (
            counts["fail"], "; could not read %d: %s" % (counts["error"], "; ".join(
                i["message"] for i in items if i["status"] == "error")) if counts["error"] else ""), items, ev)
    if counts["error"]:
        return make_result(cid, policy, "error", current, "could not read %d GPU links: %s" % (
            counts["error"], "; ".join(i["message"] for i in items if i["status"] == "error")), items, ev)
    if counts["warn"]:
        return make_result(cid, policy, "warn", current, "%d of %d GPUs below capable speed at full width (idle "
                           "downclock is normal; re-check under load)" % (counts["warn"], len(gpus)), items, ev)
    return make_result(cid, policy, "pass", current, "all %d GPU links at capability" % len(gpus), items, ev)


# -- kernel and boot -----------------------------------------------------------
def check_kernel_version(facts, policy):
    cid = "kernel.version"
    series = policy["kernel_series"]
    err = _section_error(facts, "kernel")
    if err:
        return make_result(cid, policy, "error", None, err)
    kern = facts["kernel"]
    ev = list(kern.get("evidence", []))
    if not series:
        return make_result(cid, policy, "skip", kern.get("running"), "kernel_series is empty in the policy",
                           evidence=ev)
    running = kern.get("running") or ""
    nxt = kern.get("next_boot_kernel")
    rule = kern.get("next_boot_rule") or ""
    in_series = [v for v in kern.get("installed") or [] if _in_series(v, series)]
    current = "running %s; next boot %s (%s); installed %s" % (
        running or "?", nxt or "?", rule, ", ".join(kern.get("installed") or []) or "none")
    items = [{"name": "running", "status": "pass" if _in_series(running, series) else "fail",
              "current": running, "expected": "%s.x" % series, "message": ""},
             {"name": "next boot", "status": "pass" if _in_series(nxt or "", series) else "fail",
              "current": nxt, "expected": "%s.x" % series, "message": rule}]
    if _in_series(running, series):
        if nxt and not _in_series(nxt, series):
            return make_result(cid, policy, "warn", current,
                               "running %s but the next boot would start %s (%s)" % (running, nxt, rule), items, ev)
        return make_result(cid, policy, "pass", current, "running %s" % running, items, ev)
    if nxt and _in_series(nxt, series):
        return make_result(cid, policy, "pending", current, "%s is %s; running %s until the next reboot" % (
            nxt, "pinned" if "pin" in rule else "the default", running), items, ev, reboot_required=True)
    if in_series:
        msg = "%s installed but not pinned (next boot: %s)" % (", ".join(in_series), nxt)
    else:
        msg = "no %s kernel installed (install %s)" % (series, policy["kernel_package"])
    return make_result(cid, policy, "fail", current, "running %s; %s" % (running, msg), items, ev, reboot_required=True)


def _in_series(version, series):
    return bool(version) and (version == series or version.startswith((series + ".", series + "-")))


def check_cmdline(facts, policy):
    cid = "boot.cmdline"
    boot = facts.get("boot") or {}
    if boot.get("error"):
        return make_result(cid, policy, "error", None, boot["error"], evidence=boot.get("evidence"))
    cmdline_err = _section_error(facts, "cmdline")
    if cmdline_err:
        # Without /proc/cmdline every configured arg would look "pending".
        return make_result(cid, policy, "error", None, "cannot tell which args are effective: %s" % cmdline_err,
                           evidence=boot.get("evidence"))
    ev = list(boot.get("evidence", []))
    ev.append("/proc/cmdline: %s" % ((facts.get("cmdline") or {}).get("raw") or "").strip())
    required = policy["cmdline_required"]
    forbidden = policy["cmdline_forbidden"]
    loader = boot.get("loader") or "?"
    where = boot.get("config_path") or loader
    items = []
    states = []
    for arg in required:
        state, seen = _arg_state(facts, arg)
        states.append(state)
        msg = {"effective": "configured and effective",
               "pending": "configured in %s, not on /proc/cmdline until reboot" % where,
               "transient": "on /proc/cmdline but not configured in %s: lost at next boot" % where,
               "missing": "not configured in %s" % where}[state]
        if state == "missing" and seen:
            msg += " (found conflicting %s)" % " ".join(seen)
        items.append({"name": arg, "status": {"effective": "pass", "pending": "pending"}.get(state, "fail"),
                      "current": " ".join(seen) if seen else None, "expected": arg, "message": msg})
    eff_keys = _arg_map(_effective_args(facts))
    conf_keys = _arg_map(_configured_args(facts) or [])
    for arg in forbidden:
        key = _arg_key(arg)
        found = [a for a in eff_keys.get(key, []) + conf_keys.get(key, []) if _same_arg(a, arg) or "=" not in arg]
        items.append({"name": "no %s" % arg, "status": "fail" if found else "pass",
                      "current": " ".join(sorted(set(found))) or None, "expected": "absent",
                      "message": "remove it from %s" % where if found else ""})
    current = "%s: %s" % (loader, " ".join(_configured_args(facts) or []) or "(empty)")
    fails = [i for i in items if i["status"] == "fail"]
    if fails:
        return make_result(cid, policy, "fail", current, "; ".join("%s: %s" % (i["name"], i["message"]) for i in fails),
                           items, ev, reboot_required=True)
    if "pending" in states:
        return make_result(cid, policy, "pending", current,
                           "configured in %s; effective after the next reboot" % where, items, ev, reboot_required=True)
    return make_result(cid, policy, "pass", current, "all required args configured in %s and effective" % where,
                       items, ev)


# -- LXC ---------------------------------------------------------------------
def check_lxc(facts, policy):
    cid = "lxc.gpu_devices"
    if not policy["lxc_check"]:
        return make_result(cid, policy, "skip", None, "lxc_check is off in the policy")
    err = _section_error(facts, "lxc")
    if err:
        return make_result(cid, policy, "error", None, err)
    lxc = facts.get("lxc") or {}
    ev = list(lxc.get("evidence", []))
    cts = lxc.get("cts") or []
    if not lxc.get("present"):
        return make_result(cid, policy, "skip", None, "no /etc/pve/lxc directory (not a Proxmox VE node?)", evidence=ev)
    gpu_cts = [c for c in cts if c.get("uses_nvidia")]
    if not gpu_cts:
        return make_result(cid, policy, "skip", "%d CTs, none passes NVIDIA devices" % len(cts),
                           "no CT config passes NVIDIA devices", evidence=ev)
    items = []
    for ct in gpu_cts:
        items.append({"name": "CT %s" % ct["ctid"], "status": ct["status"],
                      "current": "; ".join(ct.get("messages") or []) or "allow lines cover the current majors",
                      "expected": "allow lines for the current majors of every NVIDIA node the CT uses",
                      "message": ct.get("path", "")})
    bad = [i for i in items if i["status"] in ("fail", "error")]
    warns = [i for i in items if i["status"] == "warn"]
    majors = lxc.get("host_majors") or {}
    current = "host majors: %s" % ", ".join("%s=%s" % kv for kv in sorted(majors.items()))
    if bad:
        return make_result(cid, policy, "fail" if any(i["status"] == "fail" for i in bad) else "error", current,
                           "%s: %s" % (", ".join(i["name"] for i in bad), " | ".join(i["current"] for i in bad)),
                           items, ev)
    if warns:
        return make_result(cid, policy, "warn", current,
                           " | ".join("%s: %s" % (i["name"], i["current"]) for i in warns), items, ev)
    return make_result(cid, policy, "pass", current, "%d GPU CTs allow the current NVIDIA majors" % len(gpu_cts),
                       items, ev)


# -- NVIDIA and IOMMU ------------------------------------------------------------
def check_nvidia_driver(facts, policy):
    cid = "nvidia.driver"
    err = _section_error(facts, "nvidia")
    if err:
        return make_result(cid, policy, "error", None, err)
    nv = facts.get("nvidia") or {}
    ev = list(nv.get("evidence", []))
    gpus = _gpus(facts)
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    drivers = sorted({g.get("driver") or "none" for g in gpus})
    if drivers == ["vfio-pci"]:
        return make_result(cid, policy, "skip", "vfio-pci", "all NVIDIA GPUs are bound to vfio-pci (VM passthrough)",
                           evidence=ev)
    version = nv.get("version")
    if not version:
        return make_result(cid, policy, "fail", "not loaded (GPU drivers: %s)" % ", ".join(drivers),
                           "/proc/driver/nvidia/version is missing: the NVIDIA driver is not loaded", evidence=ev)
    current = "%s%s" % (version["version"], " (open kernel module)" if version.get("open") else "")
    smi = nv.get("smi")
    if not policy["nvidia_persistence"]:
        return make_result(cid, policy, "pass", current, "driver %s loaded" % version["version"], evidence=ev)
    if not smi or not smi.get("gpus"):
        return make_result(cid, policy, "pass", current, "driver %s loaded; persistence mode not checked (%s)" % (
            version["version"], nv.get("smi_reason") or "nvidia-smi output not available"), evidence=ev)
    items = [{"name": g.get("bus_id"), "status": "pass" if g.get("persistence") else "fail",
              "current": "persistence %s" % ("on" if g.get("persistence") else "off"), "expected": "persistence on",
              "message": g.get("name", "")} for g in smi["gpus"]]
    off = [i for i in items if i["status"] == "fail"]
    current += "; persistence on %d/%d GPUs" % (len(items) - len(off), len(items))
    if off:
        return make_result(cid, policy, "fail", current, "persistence mode off on %d GPUs" % len(off), items, ev)
    return make_result(cid, policy, "pass", current, "driver %s, persistence mode on every GPU" % version["version"],
                       items, ev)


def check_iommu(facts, policy):
    cid = "iommu.mode"
    io = facts.get("iommu") or {}
    if io.get("error"):
        return make_result(cid, policy, "error", None, io["error"])
    args = _effective_args(facts)
    pt = "iommu=pt" in args
    on = bool(io.get("units")) or bool(io.get("groups"))
    dtype = io.get("default_domain_type")
    current = "IOMMU %s%s, default domain %s" % ("on" if on else "off", ", iommu=pt" if pt else "", dtype or "n/a")
    if not on:
        msg = "IOMMU off (no units in /sys/class/iommu): no DMA translation overhead, no VFIO passthrough"
    elif pt or dtype == "identity":
        msg = "IOMMU on in passthrough mode for host devices"
    else:
        msg = "IOMMU translates host DMA (%s); iommu=pt avoids that overhead if the GPUs stay on the host" % (dtype,)
    return make_result(cid, policy, "pass", current, msg, evidence=io.get("evidence"))


EVALUATORS = {
    "cpu.scaling_driver": check_scaling_driver,
    "cpu.governor": check_governor,
    "cpu.epp": check_epp,
    "cpu.cstates": check_cstates,
    "kernel.numa_balancing": check_numa_balancing,
    "pcie.mrrs": check_mrrs,
    "pcie.link": check_link,
    "kernel.version": check_kernel_version,
    "boot.cmdline": check_cmdline,
    "lxc.gpu_devices": check_lxc,
    "nvidia.driver": check_nvidia_driver,
    "iommu.mode": check_iommu,
}


def evaluate(facts, policy, only=None):
    """Run every catalogue check (or the ids in ``only``) in catalogue order."""
    results = []
    skips = policy.get("skip_checks") or {}
    for entry in CATALOGUE:
        cid = entry["id"]
        if only and cid not in only:
            continue
        if cid in skips:
            results.append(make_result(cid, policy, "skip", None, "skipped by policy: %s" % skips[cid]))
            continue
        try:
            results.append(EVALUATORS[cid](facts, policy))
        except Exception as exc:  # an evaluator bug must not hide the other checks
            results.append(make_result(cid, policy, "error", None, "internal error evaluating %s: %s: %s"
                                       % (cid, type(exc).__name__, exc)))
    return results


def summarize(results, fail_on="high"):
    """Counts per status and whether the host fails at ``fail_on`` severity or above."""
    counts = dict.fromkeys(("pass", "fail", "warn", "pending", "skip", "error"), 0)
    threshold = SEVERITY_RANK[fail_on]
    failing = []
    for res in results:
        counts[res["status"]] += 1
        if res["status"] in ("fail", "error") and SEVERITY_RANK[res["severity"]] >= threshold:
            failing.append(res["id"])
    return {"counts": counts, "failing": failing, "reboot_required": any(r["reboot_required"] for r in results)}
