# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU frequency scaling: reader of the cpufreq state (driver, governor, EPP per policy, the P-state driver's status,
CPU identity), shared by the audit, the fix and the boot helper; the per-vendor P-state driver table ``PSTATE``; the
evaluators of cpu.scaling_driver, cpu.governor and cpu.epp.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.core import cpuprofile
from ansible.module_utils.pvetune.concerns.bootargs.checks import boot_arg_state
from ansible.module_utils.pvetune.core.cpuprofile import CPU_DIR, PSTATE, PSTATE_BY_DRIVER
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error, short_list
from ansible.module_utils.pvetune.formats.cpu_list import parse_cpu_list


def gather_cpu(fsroot):
    out = read_cpuinfo_identity(fsroot)
    out.update(read_cpufreq(fsroot))
    out["boost"] = read_boost(fsroot, [{"dir": "%s/%s" % (CPUFREQ_DIR, name)} for name in sorted(
        out["policies"], key=natural_key)])
    out["evidence"].insert(0, "/proc/cpuinfo: %s (%s)" % (out.get("model"), out.get("vendor")))
    return out


def _host(facts, policy):
    """(resolved policy, host profile) of this host (core/cpuprofile.py)."""
    policy = cpuprofile.for_host(policy, facts)
    return policy, policy["host_cpu"]


# -- CPU ---------------------------------------------------------------------
def check_scaling_driver(facts, policy):
    cid = "cpu.scaling_driver"
    err = section_error(facts, "cpu")
    policy, prof = _host(facts, policy)
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    ev = list(cpu.get("evidence", []))
    if prof["why"]:
        return make_result(cid, policy, "skip", cpu.get("vendor"), prof["why"], evidence=ev)
    row = PSTATE_BY_DRIVER[prof["pstate"]]
    drivers = {}
    for name, pol in (cpu.get("policies") or {}).items():
        drivers.setdefault(pol.get("driver") or "(unreadable)", []).append(name)
    status_file = cpu.get(row["status_key"])
    current = ", ".join("%s (%d policies)" % (d, len(p)) for d, p in sorted(drivers.items())) or "no cpufreq driver"
    if status_file is not None:
        current += "; %s/status=%s" % (row["driver"], status_file)
    want, mode, mode_arg = prof["scaling_driver"], prof["pstate_mode"], prof["pstate_arg"]
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
        return _driver_pass(cid, policy, prof, facts, current, items, ev)
    arg_state = boot_arg_state(facts, mode_arg)[0]
    runtime_switch = status_file is not None and status_file != mode
    hint = (" (or switch now: echo %s > %s)" % (mode, row["status_file"]) if runtime_switch else "")
    if arg_state == "pending":
        return make_result(cid, policy, "pending", current,
                           "%s is configured in the boot loader but not on /proc/cmdline yet: reboot%s"
                           % (mode_arg, hint), items, ev, reboot_required=True)
    if runtime_switch:
        boot = ("configure %s for the next boot" % mode_arg if row["arg_always"]
                else "pvetune-cpufreq.service re-applies it at boot")
        return make_result(cid, policy, "fail", current,
                           "%s is loaded in %s mode; switch at runtime with 'echo %s > %s' and %s"
                           % (row["driver"], status_file, mode, row["status_file"], boot), items, ev,
                           reboot_required=row["arg_always"] and arg_state != "effective")
    fallback = set(policy.get("scaling_driver_fallback") or [])
    if drivers and set(drivers) <= fallback:
        # Say why the wanted driver is not there, so an accepted fallback is never a silent pass.
        why = {"effective": "%s is on /proc/cmdline but %s did not load (no %s in the firmware?)"
                            % (mode_arg, row["driver"], row["firmware"]),
               "transient": "%s is on /proc/cmdline but not configured in the boot loader" % mode_arg,
               "missing": "%s is not on the kernel command line" % mode_arg}.get(arg_state)
        return make_result(cid, policy, "warn", current,
                           "%s is accepted by this host's policy (scaling_driver_fallback) instead of %s%s"
                           % (", ".join(sorted(drivers)), want, "; " + why if why else ""), items, ev)
    if not drivers:
        return make_result(cid, policy, "fail", current,
                           "no cpufreq driver is active; expected %s (%s)" % (want, mode_arg), items, ev,
                           reboot_required=True)
    if arg_state == "effective":
        msg = ("%s is on /proc/cmdline but the driver is %s: %s did not load (is %s enabled in the BIOS?)"
               % (mode_arg, ", ".join(sorted(drivers)), row["driver"], row["firmware"]))
    else:
        msg = "driver is %s; add %s to the kernel command line and reboot" % (", ".join(sorted(drivers)), mode_arg)
    if unreadable:
        msg += "; cannot read %s" % "; ".join(unreadable[:4])
    return make_result(cid, policy, "fail", current, msg, items, ev, reboot_required=True)


def _driver_pass(cid, policy, prof, facts, current, items, ev):
    """Every policy on the wanted driver; intel_pstate without HWP is a warn (no EPP, the driver's own P-state
    algorithm instead of the hardware's)."""
    cpu = facts["cpu"]
    has_epp = any(p.get("epp") is not None for p in (cpu.get("policies") or {}).values())
    if prof["vendor"] == "intel" and prof["scaling_driver"] == "intel_pstate" and not has_epp:
        no_hwp = "intel_pstate=no_hwp" in ((facts.get("cmdline") or {}).get("args") or [])
        why = ("intel_pstate=no_hwp is on /proc/cmdline: remove it and reboot" if no_hwp
               else "HWP is off or not supported: enable Hardware P-States (HWP) in the BIOS")
        return make_result(cid, policy, "warn", current, "every policy uses intel_pstate, but without HWP (no "
                           "energy_performance_preference): %s" % why, items, ev)
    return make_result(cid, policy, "pass", current, "every policy uses %s" % prof["scaling_driver"], items, ev)


def _policy_items(policies, key, want, label):
    bad = {}
    for name, pol in policies.items():
        value = pol.get(key)
        if value != want:
            bad.setdefault(value if value is not None else "(unreadable)", []).append(name)
    items = []
    for value, names in sorted(bad.items()):
        items.append({"name": "%s=%s" % (label, value), "status": "fail", "current": value, "expected": want,
                      "message": "%d policies: %s" % (len(names), short_list(names))})
    return bad, items


def _read_errors(cpu, fname):
    """'path: reason' of the cpufreq files named ``fname`` that could not be read."""
    return ["%s: %s" % (e["path"], e["error"]) for e in (cpu.get("errors") or [])
            if str(e.get("path", "")).endswith("/" + fname)]


def check_governor(facts, policy):
    cid = "cpu.governor"
    err = section_error(facts, "cpu")
    policy, prof = _host(facts, policy)
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    policies = cpu.get("policies") or {}
    ev = list(cpu.get("evidence", []))
    if prof["why"]:
        return make_result(cid, policy, "skip", None, prof["why"], evidence=ev)
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
        msg += "; %s is not offered by the driver on %s" % (want, short_list(unavailable))
    if unreadable:
        msg += "; cannot read %s" % "; ".join(unreadable[:4])
    current = ", ".join(sorted("%s (%d)" % (v, len(n)) for v, n in bad.items()))
    return make_result(cid, policy, "fail", current, msg, items, ev)


def check_epp(facts, policy):
    cid = "cpu.epp"
    err = section_error(facts, "cpu")
    policy, prof = _host(facts, policy)
    if err:
        return make_result(cid, policy, "error", None, err)
    cpu = facts["cpu"]
    ev = list(cpu.get("evidence", []))
    if prof["why"]:
        return make_result(cid, policy, "skip", None, prof["why"], evidence=ev)
    policies = {n: p for n, p in (cpu.get("policies") or {}).items() if p.get("epp") is not None}
    if not policies:
        drivers = sorted({p.get("driver") or "?" for p in (cpu.get("policies") or {}).values()})
        return make_result(cid, policy, "skip", None,
                           "the cpufreq driver (%s) offers no energy_performance_preference (%s)"
                           % (", ".join(drivers) or "none", cpuprofile.epp_needs(prof["pstate"])), evidence=ev)
    want = policy["epp"]
    bad, items = _policy_items(policies, "epp", want, "epp")
    if not bad:
        return make_result(cid, policy, "pass", want, "all %d policies prefer %s" % (len(policies), want), evidence=ev)
    current = ", ".join(sorted("%s (%d)" % (v, len(n)) for v, n in bad.items()))
    return make_result(cid, policy, "fail", current,
                       "%d of %d policies do not prefer %s" % (sum(len(v) for v in bad.values()), len(policies), want),
                       items, ev)


def natural_key(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# -- CPU -----------------------------------------------------------------
def read_cpuinfo_identity(fsroot):
    """Vendor, model name, family and model number (x86) and the hypervisor flag from the first processor block of
    /proc/cpuinfo."""
    text = fsroot.read_text("/proc/cpuinfo", limit=16384)
    vendor = model = family = model_id = None
    hypervisor = False
    for line in text.splitlines():
        if not line.strip():
            if vendor:
                break
            continue
        key, value = line.partition(":")[::2]
        key = key.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value.strip()
        elif key == "model name" and model is None:
            model = value.strip()
        elif key == "cpu family" and family is None and value.strip().isdigit():
            family = int(value.strip())
        elif key == "model" and model_id is None and value.strip().isdigit():
            model_id = int(value.strip())
        elif key == "flags":
            hypervisor = hypervisor or "hypervisor" in value.split()
    return {"vendor": vendor, "model": model, "family": family, "model_id": model_id, "hypervisor": hypervisor}


CPUFREQ_DIR = CPU_DIR + "/cpufreq"
_POLICY_NAME = re.compile(r"^policy(\d+)$")
# (key, file) of every policy attribute read; "available_*" are space-separated lists.
_POLICY_FILES = (
    ("driver", "scaling_driver"),
    ("governor", "scaling_governor"),
    ("available_governors", "scaling_available_governors"),
    ("epp", "energy_performance_preference"),
    ("available_epp", "energy_performance_available_preferences"),
)


def read_policies(fsroot):
    """The one reader of cpufreq sysfs (the audit, the fix and the boot helper all use it): every policy*, in
    numeric order, as ``{"name", "num", "dir", "affected_cpus" (raw text or None), "cpus" ([int]; [] when unreadable
    or unparsable), <key>: value or None for each of _POLICY_FILES, "errors": [{"path", "error"}]}``."""
    names = [n for n in fsroot.listdir(CPUFREQ_DIR) if _POLICY_NAME.match(n)]
    out = []
    for name in sorted(names, key=lambda n: int(_POLICY_NAME.match(n).group(1))):
        pdir = "%s/%s" % (CPUFREQ_DIR, name)
        pol = {"name": name, "num": int(_POLICY_NAME.match(name).group(1)), "dir": pdir, "errors": []}
        pol["affected_cpus"] = fsroot.try_value(pdir + "/affected_cpus")
        try:
            pol["cpus"] = parse_cpu_list(pol["affected_cpus"]) if pol["affected_cpus"] is not None else []
        except ValueError:
            pol["cpus"] = []
        for key, fname in _POLICY_FILES:
            try:
                pol[key] = fsroot.read_value("%s/%s" % (pdir, fname))
            except FsError as exc:
                pol[key] = None
                pol["errors"].append({"path": exc.path, "error": exc.reason, "key": key})
            if key.startswith("available_") and pol[key] is not None:
                pol[key] = pol[key].split()
        out.append(pol)
    return out


def read_cpufreq(fsroot):
    """The audit's view of read_policies(): one entry per policy, plus the P-state drivers' status files.

    A policy whose ``affected_cpus`` is empty has no online CPU: the kernel keeps its
    directory but refuses reads of its scaling files (EBUSY).  It is listed in
    ``offline_policies``, not in ``policies``, so it is neither an error nor a mismatch.
    """
    out = {"policies": {}, "offline_policies": [], "errors": [], "evidence": []}
    for row in sorted(PSTATE.values(), key=lambda r: r["driver"]):
        out[row["status_key"]] = fsroot.try_value(row["status_file"])
        if out[row["status_key"]] is not None:
            out["evidence"].append(row["status_file"] + " = %s" % out[row["status_key"]])
    out["online"] = fsroot.try_value(CPU_DIR + "/online")
    policies = read_policies(fsroot)
    for pol in policies:
        if pol["affected_cpus"] == "":
            out["offline_policies"].append(pol["name"])
            continue
        out["policies"][pol["name"]] = {key: pol[key] for key, _fname in _POLICY_FILES}
        out["policies"][pol["name"]]["affected_cpus"] = pol["affected_cpus"]
        out["errors"] += [{"path": e["path"], "error": e["error"]} for e in pol["errors"]
                          if e["key"] in ("driver", "governor")]
    if policies:
        out["evidence"].append("%s/policy*/scaling_driver, scaling_governor, energy_performance_preference "
                               "(%d policies)" % (CPUFREQ_DIR, len(policies)))
        if out["offline_policies"]:
            out["evidence"].append("%s: %d policies without an online CPU (empty affected_cpus), not checked: %s"
                                   % (CPUFREQ_DIR, len(out["offline_policies"]), ", ".join(out["offline_policies"])))
    else:
        out["evidence"].append("%s: no cpufreq policies" % CPUFREQ_DIR)
    return out


# -- boost ------------------------------------------------------------------------
INTEL_NO_TURBO = CPU_DIR + "/intel_pstate/no_turbo"
GLOBAL_BOOST = CPUFREQ_DIR + "/boost"
AMD_PREFCORE = CPU_DIR + "/amd_pstate/prefcore"
SMT_DIR = CPU_DIR + "/smt"


def read_boost(fsroot, policies):
    """Reader of the boost controls (the audit's "boost" key of the section "cpu", the fix and the boot helper):
    ``files`` [(path, raw value, the value that means on)] of the files that decide it, in the kernel's precedence:
    intel_pstate's no_turbo (it has no boost file), else the per-policy ``boost`` (6.6+, amd-pstate 6.11+), else
    the global ``cpufreq/boost`` (acpi-cpufreq); and ``prefcore``, ``smt_control``, ``smt_active`` (information)."""
    out = {"prefcore": fsroot.try_value(AMD_PREFCORE), "smt_control": fsroot.try_value(SMT_DIR + "/control"),
           "smt_active": fsroot.try_value(SMT_DIR + "/active"), "files": []}
    no_turbo = fsroot.try_value(INTEL_NO_TURBO)
    if no_turbo is not None:
        out["files"] = [(INTEL_NO_TURBO, no_turbo, "0")]
        return out
    per_policy = [(p["dir"] + "/boost", fsroot.try_value(p["dir"] + "/boost")) for p in policies]
    out["files"] = [(path, raw, "1") for path, raw in per_policy if raw is not None]
    if not out["files"]:
        raw = fsroot.try_value(GLOBAL_BOOST)
        out["files"] = [(GLOBAL_BOOST, raw, "1")] if raw is not None else []
    return out


def check_boost(facts, policy):
    cid = "cpu.boost"
    err = section_error(facts, "cpu")
    if err:
        return make_result(cid, policy, "error", None, err)
    boost = facts["cpu"].get("boost") or {}
    info = "; ".join("%s %s" % (k, boost[k]) for k in ("prefcore", "smt_control", "smt_active") if boost.get(k))
    ev = ["%s = %s" % (path, raw) for path, raw, _on in (boost.get("files") or [])[:4]]
    ev.append("information: %s" % (info or "no amd_pstate prefcore or SMT control files"))
    if not policy["cpu_boost"]:
        return make_result(cid, policy, "skip", None, "cpu_boost is off in the policy", evidence=ev)
    files = boost.get("files") or []
    if not files:
        return make_result(cid, policy, "skip", None, "no boost control: the cpufreq driver has none (or a VM)",
                           evidence=ev)
    garbage = [(path, raw) for path, raw, _on in files if raw not in ("0", "1")]
    if garbage:
        return make_result(cid, policy, "error", None, "; ".join("%s holds %r, not 0 or 1" % (path, raw[:40])
                                                                 for path, raw in garbage[:4]), evidence=ev)
    off = [path for path, raw, on in files if raw != on]
    current = "%s on %d of %d" % (files[0][0].rsplit("/", 1)[-1], len(files) - len(off), len(files))
    if off:
        return make_result(cid, policy, "fail", current, "boost is off on %d of %d (%s): the cores stay at their base "
                           "clock; write %s to %s (pvetune-cpufreq.service re-applies it at boot)" % (
                               len(off), len(files), short_list(off, 2), files[0][2], files[0][0].rsplit("/", 1)[-1]),
                           evidence=ev)
    return make_result(cid, policy, "pass", current, "boost is on%s" % ("; " + info if info else ""), evidence=ev)


SECTIONS = (("cpu", lambda ctx: gather_cpu(ctx.fsroot)),)
CHECKS = {"cpu.scaling_driver": check_scaling_driver, "cpu.governor": check_governor, "cpu.epp": check_epp,
          "cpu.boost": check_boost}
