# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu.power_limit and gpu.clocks fixes.

gpu.power_limit: each GPU below its target power limit is set to it with ``nvidia-smi -i <bus> -pl W``
(pvetune_gpu_power), again at every boot (``pvetune-boot gpu-power``: the limit does not survive a reboot or a
driver reload), and put back by rollback.yml.

The GPUs and their limits come from the nvidia concern's one reader (nvidia-smi -q); the target is the policy's
gpu_power_limit ("default": each GPU's own default limit, or watts).  A GPU whose enforced limit is below a
requested limit that already meets the target is held by its board or platform: nvidia-smi -pl cannot help, so it
is left alone (gpu.power_limit warns).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.gpu.checks import WATTS_SLACK, power_target
from ansible.module_utils.pvetune.concerns.nvidia.checks import read_state
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, RunFailed

_BUS = re.compile(r"\A[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")


def runtime_key(bdf):
    return "gpu:%s:power_limit" % bdf


def validate_target(value, what="power_limit"):
    """"default" or watts (an int from 50 to 2000): the policy key gpu_power_limit's rule."""
    if value == "default" or (isinstance(value, int) and not isinstance(value, bool) and 50 <= value <= 2000):
        return value
    if isinstance(value, str) and re.match(r"\A[0-9]{2,4}\Z", value) and 50 <= int(value) <= 2000:
        return int(value)        # a module option or a JSON value passed as text
    raise ValueError("%s: %r is neither default nor watts from 50 to 2000" % (what, value))


def read_gpus(fsroot, runner):
    """{bdf: (bus id, runtime state)} of the GPUs nvidia-smi -q reports (the nvidia concern's reader); raises
    ValueError when nvidia-smi gives nothing."""
    state = read_state(fsroot, runner, smi=True)
    smi = state.get("smi")
    if not smi:
        raise ValueError("nvidia-smi -q not read: %s" % state.get("smi_reason"))
    return {bus[-12:]: (bus, gpu) for bus, gpu in (smi.get("state") or {}).items() if _BUS.match(bus)}


def read_limits(fsroot, runner):
    """{bdf: {"bus_id", "power"}}: each GPU's power readings (read_gpus)."""
    gpus = read_gpus(fsroot, runner)
    return {bdf: {"bus_id": bus, "power": gpu.get("power") or {}} for bdf, (bus, gpu) in gpus.items()}


def nvidia_smi_or_skip(fsroot, runner, skipped, what):
    """True when nvidia-smi can run; on a tree without its stand-in, False with the reason appended to ``skipped``
    (nothing is set, as for every command a tree cannot run); on the live host without it, RunFailed."""
    try:
        if runner.which("nvidia-smi"):
            return True
    except CommandUnavailable as exc:
        raise RunFailed(str(exc))
    if fsroot.live:
        raise RunFailed("nvidia-smi is not installed on this host")
    skipped.append({"command": "nvidia-smi", "reason": "root is %s and it has no nvidia-smi stand-in: %s left as "
                    "they are" % (fsroot.root, what)})
    return False


def plan(limits, target):
    """One step per GPU: ``{"bdf", "bus_id", "before", "after", "action" (set, none, hold, unknown), "message"}``."""
    steps = []
    for bdf, gpu in sorted(limits.items()):
        power = gpu["power"]
        want = power_target(power, {"gpu_power_limit": target})
        step = {"bdf": bdf, "bus_id": gpu["bus_id"], "before": power.get("limit"), "after": want, "action": "none",
                "result": "unchanged", "message": None}
        steps.append(step)
        if power.get("limit") is None or want is None:
            step.update(action="unknown", message="nvidia-smi -q gives no power limit (N/A)")
        elif power.get("requested") is not None and power["requested"] > power["limit"] + WATTS_SLACK and \
                power["requested"] >= want - WATTS_SLACK:
            step.update(action="hold", message="requested %g W, the board or platform enforces %g W" % (
                power["requested"], power["limit"]))
        elif power["limit"] < want - WATTS_SLACK:
            if power.get("max") is not None and want > power["max"] + WATTS_SLACK:
                step.update(action="unknown", message="%g W is above the GPU's maximum %g W" % (want, power["max"]))
            else:
                step.update(action="set", result="planned")
    return steps


def set_limit(runner, bus_id, watts):
    """``nvidia-smi -i <bus> -pl <watts>``; raises RunFailed with nvidia-smi's words."""
    rc, out, err = runner.run("nvidia-smi", ["-i", bus_id, "-pl", "%g" % watts])
    if rc != 0:
        raise RunFailed("nvidia-smi -i %s -pl %g exited %d: %s" % (bus_id, watts, rc, (err or out).strip()[:300]))


def _apply(fsroot, runner, todo):
    """Set each step's limit, then read nvidia-smi -q again: each must show it."""
    for step in todo:
        set_limit(runner, step["bus_id"], step["after"])
    now = read_limits(fsroot, runner)
    for step in todo:
        got = (now.get(step["bdf"]) or {}).get("power", {}).get("limit")
        if got is None or abs(got - step["after"]) > WATTS_SLACK:
            raise RunFailed("%s: nvidia-smi -q shows power.limit %s after setting %g W" % (
                step["bdf"], "N/A" if got is None else "%g W" % got, step["after"]))
        step.update(result="done", message="power.limit %g W -> %g W" % (step["before"], step["after"]))


def _validate(params):
    return {"target": validate_target(params["power_limit"], "power_limit")}


def _run(fsroot, runner, changes, request, warn):
    try:
        steps = plan(read_limits(fsroot, runner), request["target"])
    except (ValueError, FsError) as exc:
        raise RunFailed(str(exc))
    todo = [s for s in steps if s["action"] == "set"]
    for step in todo:
        changes.plan_runtime(runtime_key(step["bdf"]), "nvidia-smi:%s" % step["bus_id"], "%g" % step["before"],
                             "%g" % step["after"], shown=("gpu:%s power.limit" % step["bdf"], "%g W" % step["before"],
                                                          "%g W" % step["after"]))
    for step in steps:
        if step["action"] in ("hold", "unknown"):
            warn("%s: %s" % (step["bdf"], step["message"]))
    skipped = []
    if todo and not changes.check_mode and not nvidia_smi_or_skip(fsroot, runner, skipped, "power limits"):
        changes.runtime, todo = [], []
    if todo and not changes.check_mode:
        changes.apply()        # the originals are in the manifest before the first limit changes
        _apply(fsroot, runner, todo)
    return {"changed": changes.changed, "gpus": steps, "power_limit": request["target"], "reboot_required": False,
            "changes": changes.summary(), "skipped_commands": skipped}


def fix(params, run_command, check_mode, diff):
    """pvetune_gpu_power's one call: (failed, result, warnings)."""
    return fix_call(params, run_command, check_mode, diff, _validate, _run)


# -- boot and rollback -----------------------------------------------------------------------------------------------
def validate_boot_config(config):
    if not isinstance(config, dict) or set(config) != {"power_limit"}:
        raise ValueError("gpu-power: the configuration is {\"power_limit\": default or watts}")
    return {"power_limit": validate_target(config["power_limit"], "gpu-power power_limit")}


def boot_apply(fsroot, runner, config):
    """pvetune-boot gpu-power: every GPU below its target set to it; returns (ok, [messages])."""
    try:
        target = validate_boot_config(config)["power_limit"]
        steps = plan(read_limits(fsroot, runner), target)
        todo = [s for s in steps if s["action"] == "set"]
        if todo:
            _apply(fsroot, runner, todo)
    except (ValueError, FsError, RunFailed, CommandUnavailable) as exc:
        return False, ["power limits: %s" % exc]
    return True, ["%s: %s" % (s["bdf"], s["message"] or "power.limit %s W, at the target" % s["before"])
                  for s in steps]


def restore_power(fsroot, runner, bdf, original, check_mode):
    """Rollback: the GPU's power limit back to the recorded watts; a runtime record."""
    try:
        watts = float(original)
        gpu = read_limits(fsroot, runner).get(bdf)
        if gpu is None:
            return {"result": "skipped", "message": "GPU %s not reported by nvidia-smi now" % bdf}
        now = gpu["power"].get("limit")
        rec = {"before": "power.limit %s W" % ("N/A" if now is None else "%g" % now),
               "after": "power.limit %g W" % watts}
        if now is not None and abs(now - watts) <= WATTS_SLACK:
            rec["result"] = "unchanged"
        elif check_mode:
            rec["result"] = "would restore"
        else:
            set_limit(runner, gpu["bus_id"], watts)
            got = (read_limits(fsroot, runner).get(bdf) or {}).get("power", {}).get("limit")
            rec["result"] = "restored" if got is not None and abs(got - watts) <= WATTS_SLACK else "failed"
        return rec
    except (ValueError, TypeError, FsError, RunFailed, CommandUnavailable) as exc:
        return {"result": "failed", "message": str(exc)}


# -- gpu.clocks: applications clocks left set (pvetune_gpu_clocks, opt-in policy gpu_clocks_fix) --------------------
# nvidia-smi -rac puts them back to the defaults; a reboot or a driver reload does too, so no boot unit is needed.
# Locked clocks (-lgc/-lmc) are not in nvidia-smi -q: they are advice only (gpu.clocks).
def clocks_key(bdf):
    return "gpu:%s:app_clocks" % bdf


def _clock_pair(clocks):
    """"memory,graphics" as nvidia-smi -ac takes them, or None."""
    if clocks and clocks.get("memory") is not None and clocks.get("graphics") is not None:
        return "%d,%d" % (clocks["memory"], clocks["graphics"])
    return None


def read_clocks(fsroot, runner):
    """{bdf: {"bus_id", "applications", "default"}} ("memory,graphics" MHz or None): each GPU's applications clocks
    (read_gpus)."""
    return {bdf: {"bus_id": bus, "applications": _clock_pair((gpu.get("clocks") or {}).get("applications")),
                  "default": _clock_pair((gpu.get("clocks") or {}).get("default_applications"))}
            for bdf, (bus, gpu) in read_gpus(fsroot, runner).items()}


def _clocks_run(fsroot, runner, changes, request, warn):
    try:
        clocks = read_clocks(fsroot, runner)
    except (ValueError, FsError) as exc:
        raise RunFailed(str(exc))
    todo = [(bdf, c) for bdf, c in sorted(clocks.items())
            if c["applications"] and c["default"] and c["applications"] != c["default"]]
    for bdf, c in todo:
        changes.plan_runtime(clocks_key(bdf), "nvidia-smi:%s" % c["bus_id"], c["applications"], c["default"],
                             shown=("gpu:%s applications clocks (memory,graphics MHz)" % bdf, c["applications"],
                                    c["default"]))
    skipped = []
    if todo and not changes.check_mode and not nvidia_smi_or_skip(fsroot, runner, skipped, "applications clocks"):
        changes.runtime, todo = [], []
    if todo and not changes.check_mode:
        changes.apply()
        for _bdf, c in todo:
            rc, out, err = runner.run("nvidia-smi", ["-i", c["bus_id"], "-rac"])
            if rc != 0:
                raise RunFailed("nvidia-smi -i %s -rac exited %d: %s" % (c["bus_id"], rc, (err or out).strip()[:300]))
        now = read_clocks(fsroot, runner)
        left = [bdf for bdf, c in todo if now.get(bdf, {}).get("applications") != c["default"]]
        if left:
            raise RunFailed("applications clocks still not at their defaults after nvidia-smi -rac: %s" %
                            ", ".join(left))
    gpus = [{"bdf": bdf, "before": c["applications"], "after": c["default"]} for bdf, c in todo]
    return {"changed": changes.changed, "gpus": gpus, "reboot_required": False, "changes": changes.summary(),
            "skipped_commands": skipped}


def fix_clocks(params, run_command, check_mode, diff):
    """pvetune_gpu_clocks's one call: (failed, result, warnings)."""
    return fix_call(params, run_command, check_mode, diff, lambda params: {}, _clocks_run)


def restore_clocks(fsroot, runner, bdf, original, check_mode):
    """Rollback: the applications clocks back to the recorded "memory,graphics"; a runtime record."""
    try:
        if not re.match(r"\A[0-9]{1,6},[0-9]{1,6}\Z", str(original)):
            raise ValueError("recorded applications clocks %r are not memory,graphics" % (original,))
        gpu = read_clocks(fsroot, runner).get(bdf)
        if gpu is None:
            return {"result": "skipped", "message": "GPU %s not reported by nvidia-smi now" % bdf}
        rec = {"before": gpu["applications"], "after": original}
        if gpu["applications"] == original:
            rec["result"] = "unchanged"
        elif check_mode:
            rec["result"] = "would restore"
        else:
            rc, out, err = runner.run("nvidia-smi", ["-i", gpu["bus_id"], "-ac", original])
            got = (read_clocks(fsroot, runner).get(bdf) or {}).get("applications")
            rec["result"] = "restored" if rc == 0 and got == original else "failed"
            if rc != 0:
                rec["message"] = (err or out).strip()[:300]
        return rec
    except (ValueError, FsError, RunFailed, CommandUnavailable) as exc:
        return {"result": "failed", "message": str(exc)}
