# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs' own runtime state: gpu.power_limit, gpu.clocks and gpu.health.

The power limits, clocks, clock event reasons and memory health come from the ``nvidia-smi -q`` the nvidia concern
reads (facts section "nvidia", ``smi.state``); this concern's reader (facts section "gpu") adds the two inputs only
it needs: the driver's Xid lines in the kernel log of this boot, and the AER counters of each GPU and the ports
above it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions, gpu_label, smi_indices
from ansible.module_utils.pvetune.core.fsroot import SNAPSHOT_DIR, FsError
from ansible.module_utils.pvetune.core.runner import captured_output
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.formats.aer_stats import KINDS, parse_aer_counters
from ansible.module_utils.pvetune.formats.kernel_xid import parse_xid_lines
from ansible.module_utils.pvetune.tables.nvidia_xid import grade

# The kernel log of this boot, the driver's Xid lines and its probe message for a GPU gone from the bus only
# (journalctl -g exits 1 when nothing matches).
XID_COMMAND = ("journalctl", ["-k", "-b", "0", "--no-pager", "-o", "short-iso", "--grep",
                              "NVRM: Xid|fallen off the bus"])
XID_SNAPSHOT = SNAPSHOT_DIR + "/kernel-xid.txt"
# Clock event reasons that cost throughput and that only the hardware, its cooling or its power can lift.
HARDWARE_REASONS = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
# Watts of rounding between a requested and an enforced limit (nvidia-smi prints two decimals).
WATTS_SLACK = 0.5


def read_xid(fsroot, runner):
    """``(parse_xid_lines() of this boot's kernel log, why it could not be read or None, where it came from)``."""
    out, why, where = captured_output(fsroot, runner, XID_COMMAND, XID_SNAPSHOT, quiet_rcs=(1,))
    if fsroot.live:
        where = "journalctl -k -b 0 --grep '%s'" % XID_COMMAND[1][-1]
    return (parse_xid_lines(out) if out else []), why, where


def read_aer(fsroot, devices):
    """{bdf: {kind: {"total", "counters"} or None (no such file: AER not reported), "error": problem or None}}."""
    out = {}
    for bdf, path in devices:
        entry = out[bdf] = {"error": None}
        for kind in KINDS:
            file_path = "%s/aer_dev_%s" % (path, kind)
            if not fsroot.isfile(file_path):
                entry[kind] = None
                continue
            try:
                counters, total = parse_aer_counters(fsroot.read_text(file_path, limit=8192))
            except (FsError, ValueError) as exc:
                entry[kind] = None
                entry["error"] = "%s: %s" % (file_path, getattr(exc, "reason", exc))
                continue
            entry[kind] = {"total": total, "counters": counters}
    return out


def read_gpu(ctx):
    """Reader of the facts section "gpu": ``xid`` (parse_xid_lines()), ``xid_reason``, ``aer`` (read_aer() of every
    GPU and the bridges above it), ``evidence``."""
    pci = (ctx.facts.get("pci") or {}) if not section_error(ctx.facts, "pci") else {}
    gpus = [f for f in pci.get("functions") or () if f.get("is_gpu")]
    above = sorted({b for g in gpus for b in (g.get("chain") or [])[:-1]})
    bridges = pci.get("bridges") or {}
    devices = [(g["bdf"], g["path"]) for g in gpus] + [(b, bridges[b]["path"]) for b in above if b in bridges]
    xid, reason, where = read_xid(ctx.fsroot, ctx.runner)
    aer = read_aer(ctx.fsroot, devices)
    return {"xid": xid, "xid_reason": reason, "aer": aer,
            "evidence": ["%s: %s" % (where, reason or "%d Xid events" % sum(e["count"] for e in xid)),
                         "AER counters of %d GPUs and %d ports above them (/sys/bus/pci/devices/*/aer_dev_*)" % (
                             len(gpus), len(devices) - len(gpus))]}


# -- shared by the evaluators ----------------------------------------------------------------------------------------
def smi_states(facts):
    """{bdf: runtime state} from the nvidia facts' nvidia-smi -q (bus ids 00000000:41:00.0 -> 0000:41:00.0)."""
    smi = (facts.get("nvidia") or {}).get("smi") or {}
    return {bus[-12:]: state for bus, state in (smi.get("state") or {}).items()}


def _host_gpus(cid, facts, policy):
    """(host-owned GPUs, {bdf: smi state}, labels, evidence, None), or the skip/error result as the last item."""
    err = section_error(facts, "pci") or section_error(facts, "nvidia")
    if err:
        return None, None, None, None, make_result(cid, policy, "error", None, err)
    nv = facts.get("nvidia") or {}
    gpus = [g for g in gpu_functions(facts) if g.get("driver") != "vfio-pci"]
    ev = list(nv.get("evidence") or [])[-1:]
    if not gpus:
        return None, None, None, None, make_result(cid, policy, "skip", None, "no host-owned NVIDIA GPU", evidence=ev)
    smi = nv.get("smi")
    if not smi:
        return None, None, None, None, make_result(
            cid, policy, "skip", None, "nvidia-smi -q not read: %s" % (nv.get("smi_reason") or "no output"),
            evidence=ev)
    index = smi_indices(facts)
    labels = {g["bdf"]: gpu_label(g, index.get(g["bdf"])) for g in gpus}
    return gpus, smi_states(facts), labels, ev, None


def _per_gpu(cid, facts, policy, item, current, ok_message, counted):
    """A check judged GPU by GPU from the nvidia-smi -q state: ``item(label, state)`` per host-owned GPU, the worst
    decides; ``current(n counted, n)`` the current value, counting the items whose status is in ``counted``.

    fix.yml answers for the result (its audit gate, the reports' fix command) only when the fix can settle every
    problem (an item's ``_fixable``): a power brake, a hardware slowdown or a lock nvidia-smi -q does not show are the
    operator's (and without the check's opt-in policy key, every problem is: audit.evaluate)."""
    gpus, states, labels, ev, early = _host_gpus(cid, facts, policy)
    if early:
        return early
    items = [item(labels[g["bdf"]], states.get(g["bdf"])) for g in gpus]
    fixable = all(i.get("_fixable") for i in items if i["status"] in ("fail", "warn"))
    for i in items:
        i.pop("_fixable", None)
    bad = len([i for i in items if i["status"] in counted])
    res = worst_of(cid, policy, items, current(bad, len(items)), ok_message, ev)
    if not fixable and res["status"] in ("fail", "warn"):
        res["fix_tag"] = ""
    return res


def _watts(value):
    return "%g W" % value


# -- gpu.power_limit ---------------------------------------------------------------------------------------------
def power_target(power, policy):
    """The limit a GPU should run at: its default, or the policy's watts; None when it cannot be told."""
    want = policy["gpu_power_limit"]
    return power.get("default") if want == "default" else float(want)


def power_item(label, state, policy):
    power = (state or {}).get("power") or {}
    item = {"name": label, "status": "pass", "current": None, "expected": None, "message": ""}
    want = power_target(power, policy)
    if power.get("limit") is None or want is None:
        item.update(status="skip", message="nvidia-smi -q gives no power limit for this GPU (N/A)")
        return item
    limit = power["limit"]
    item["current"] = "power.limit %s" % _watts(limit)
    item["expected"] = "power.limit %s%s" % (_watts(want), " (default)" if policy["gpu_power_limit"] == "default"
                                             else " (policy)")
    requested = power.get("requested")
    if requested is not None and requested > limit + WATTS_SLACK and requested >= want - WATTS_SLACK:
        # Asked for enough: nvidia-smi -pl cannot help, something outside the setting holds it.
        item.update(status="warn", message="%s requested, %s enforced: the board or the platform (a power brake, "
                    "the PSU's signal) holds it lower" % (_watts(requested), _watts(limit)))
    elif limit < want - WATTS_SLACK:
        item["_fixable"] = power.get("max") is None or want <= power["max"] + WATTS_SLACK
        item.update(status="fail", message="capped at %s, %s below %s%s: a capped GPU runs its tensor cores at "
                    "lower clocks" % (_watts(limit), _watts(want - limit), _watts(want), (
                        " (it may go up to %s)" % _watts(power["max"]) if power.get("max") else "")))
    elif policy["gpu_power_limit"] != "default" and limit > want + WATTS_SLACK:
        item.update(status="warn", message="%s, above the policy's %s" % (_watts(limit), _watts(want)))
    else:
        item["message"] = "%s of %s max" % (_watts(limit), _watts(power["max"])) if power.get("max") else ""
    return item


def check_power_limit(facts, policy):
    target = "default" if policy["gpu_power_limit"] == "default" else _watts(policy["gpu_power_limit"])

    def current(bad, total):
        return "%d of %d GPUs below their %s limit" % (bad, total, policy["gpu_power_limit"])

    return _per_gpu("gpu.power_limit", facts, policy, lambda label, state: power_item(label, state, policy), current,
                    "every GPU at its %s power limit" % target, ("fail",))


# -- gpu.clocks --------------------------------------------------------------------------------------------------
def _mhz(clocks):
    return "%s/%s MHz" % (clocks.get("graphics", "?"), clocks.get("memory", "?"))


def clocks_item(label, state):
    state = state or {}
    clocks = state.get("clocks") or {}
    app, default = clocks.get("applications"), clocks.get("default_applications")
    item = {"name": label, "status": "pass", "current": None, "expected": None, "message": ""}
    problems, level = [], "pass"
    if app and default:
        item["current"], item["expected"] = "applications clocks %s" % _mhz(app), "default %s" % _mhz(default)
        if app != default:
            level = "fail"
            problems.append("applications clocks %s, default %s: left by nvidia-smi -ac (reset: nvidia-smi -rac)" % (
                _mhz(app), _mhz(default)))
    if "Applications Clocks Setting" in state.get("events", ()) and not problems:
        # nvidia-smi -q shows no locked clocks: with the applications clocks at their defaults, a lock is the likely
        # setting behind the reason, not a certain one.
        level = "warn"
        problems.append("the clock event reason 'Applications Clocks Setting' is active with the applications "
                        "clocks at their defaults: locked clocks (nvidia-smi -lgc/-lmc, which -q does not show) "
                        "probably hold them (reset: nvidia-smi -rgc and -rmc)")
    hardware = [r for r in state.get("throttle", ()) if r in HARDWARE_REASONS]
    if hardware:
        level = "fail" if level == "fail" else "warn"
        problems.append("held down by %s: cooling, the PSU or the platform's power brake, not a setting (advice: "
                        "check airflow, inlet temperature and power delivery)" % ", ".join(hardware))
    if not (app and default) and not state.get("events"):
        item.update(status="skip", message="nvidia-smi -q gives no applications clocks or clock event reasons")
        return item
    if problems and "SW Power Cap" in state.get("throttle", ()):
        problems.append("at its power limit now (SW Power Cap): see gpu.power_limit")
    item.update(status=level, message="; ".join(problems) or "default clocks, no hardware slowdown")
    # pvetune_gpu_clocks resets applications clocks; a lock -q does not show and hardware reasons stay
    item["_fixable"] = bool(app and default and app != default) and not hardware
    return item


def check_clocks(facts, policy):
    def current(bad, total):
        return "%d of %d GPUs with set clocks or a hardware slowdown" % (bad, total)

    return _per_gpu("gpu.clocks", facts, policy, clocks_item, current,
                    "default clocks, no hardware slowdown on any GPU", ("fail", "warn"))


# -- gpu.health --------------------------------------------------------------------------------------------------
def _aer_findings(bdf, aer, where):
    """[(grade, text)] of the non-zero AER counts of one device."""
    out = []
    entry = aer.get(bdf) or {}
    if entry.get("error"):
        out.append(("error", entry["error"]))
    for kind in KINDS:
        counts = entry.get(kind)
        if not counts or not counts["total"]:
            continue
        names = ", ".join("%s %d" % kv for kv in sorted(counts["counters"].items()))
        level = "info" if kind == "correctable" else "warn"
        detail = " (%s)" % names if names else ""
        out.append((level, "AER %s errors on %s: %d%s" % (kind, where, counts["total"], detail)))
    return out


def memory_findings(state):
    """[(grade, text)] of a GPU's ECC, page retirement and row remapping state (nvidia-smi -q)."""
    out = []
    if state.get("remap_failure"):
        out.append(("fail", "a row remapping FAILED (replace the GPU)"))
    ecc = state.get("ecc_uncorrectable") or {}
    if ecc.get("volatile"):
        out.append(("warn", "%d uncorrectable ECC errors since boot" % ecc["volatile"]))
    if state.get("remap_pending") or state.get("retired_pending"):
        out.append(("warn", "a row remap or page retirement is pending (reset the GPU to apply it)"))
    if state.get("remap_uncorrectable") or state.get("retired_double_bit"):
        out.append(("info", "%d rows remapped, %d pages retired for uncorrectable errors" % (
            state.get("remap_uncorrectable") or 0, state.get("retired_double_bit") or 0)))
    if state.get("replays"):
        out.append(("info", "%d PCIe replays since reset" % state["replays"]))
    return out


def health_item(name, findings):
    level = "pass"
    for want in ("warn", "error", "fail"):
        if any(g == want for g, _t in findings):
            level = want
    shown = [t for g, t in findings if g != "info"] or [t for _g, t in findings]
    return {"name": name, "status": level, "current": "; ".join(t for _g, t in findings) or "no errors",
            "expected": "no Xid errors, no uncorrectable PCIe or memory errors", "message": "; ".join(shown)}


def check_health(facts, policy):
    cid = "gpu.health"
    err = section_error(facts, "pci") or section_error(facts, "gpu")
    if err:
        return make_result(cid, policy, "error", None, err)
    section = facts.get("gpu") or {}
    gpus = [g for g in gpu_functions(facts) if g.get("driver") != "vfio-pci"]
    ev = list(section.get("evidence") or [])
    if not gpus:
        return make_result(cid, policy, "skip", None, "no host-owned NVIDIA GPU", evidence=ev)
    states = smi_states(facts)
    index = smi_indices(facts)
    xids = list(section.get("xid") or ())
    items = []
    for gpu in gpus:
        findings = []
        for event in [e for e in xids if gpu["bdf"].startswith(e["bus"] + ".")]:
            xids.remove(event)
            level, meaning = grade(event["xid"])
            findings.append((level, "Xid %d x%d since boot: %s (last: %s)" % (
                event["xid"], event["count"], meaning, event["last"])))
        findings += memory_findings(states.get(gpu["bdf"]) or {})
        findings += _aer_findings(gpu["bdf"], section.get("aer") or {}, "the GPU")
        for port in (gpu.get("chain") or [])[:-1]:
            findings += _aer_findings(port, section.get("aer") or {}, "its upstream port %s" % port)
        items.append(health_item(gpu_label(gpu, index.get(gpu["bdf"])), findings))
    for event in xids:       # a GPU gone from the bus leaves its Xid lines behind
        level, meaning = grade(event["xid"])
        items.append(health_item("%s (not on the PCI bus now)" % event["bus"], [(level, "Xid %d x%d since boot: %s" % (
            event["xid"], event["count"], meaning))]))
    if section.get("xid_reason"):
        items.append({"name": "kernel log", "status": "skip", "current": None, "expected": None,
                      "message": "Xid lines not read: %s" % section["xid_reason"]})
    bad = [i for i in items if i["status"] in ("fail", "warn")]
    current = "%d of %d GPUs with errors" % (len(bad), len(gpus))
    ok = "no Xid errors, no uncorrectable PCIe or memory errors on %d GPUs" % len(gpus)
    return worst_of(cid, policy, items, current, ok, ev)


SECTIONS = (("gpu", read_gpu),)
CHECKS = {"gpu.power_limit": check_power_limit, "gpu.clocks": check_clocks, "gpu.health": check_health}
