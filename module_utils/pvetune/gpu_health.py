# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health gate: do the GPUs answer on the host and inside each running GPU container?

Targets and checks (every command only reads):

* host: ``nvidia-smi -L`` lists as many GPUs as the host has /dev/nvidiaN
  nodes.  Skipped (with the reason) when nvidia-smi is not installed or no
  NVIDIA driver is loaded (exit 9, "couldn't communicate with the NVIDIA driver").
* each running CT that passes NVIDIA devices:
  - ``pct exec <id> -- nvidia-smi -L`` lists as many GPUs as the CT gets
    /dev/nvidiaN nodes (mount entries and devN entries whose node exists on the
    host).  Skipped when the CT has no nvidia-smi (lxc-attach exit 127,
    "Failed to exec"/"not found").
  - ``pct exec <id> -- dd if=/dev/nvidia-uvm of=/dev/null bs=1 count=0`` when the
    CT uses /dev/nvidia-uvm: opens the node CUDA needs (cuInit opens it; nvidia-smi
    never does, so nvidia-smi works in a CT whose uvm allow line names a stale
    major while CUDA fails).  "Operation not permitted" means the CT's device
    cgroup does not allow the current uvm major: fail.  ``count=0`` reads nothing.
  A stopped CT is skipped.

A target fails when any of its checks fails; it is skipped when no check could
run or a check was skipped and none failed.

Baseline: the fix rollout runs this once before its first change and passes those targets to the gate after it.
A target that fails now only in checks that already failed then is ``broken-before``: reported, not blamed on the
run (a CT whose stale uvm line predates a ``--tags cmdline`` run must not stop the rollout).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.lxcgpu import checks as lxcgpu
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.concerns.lxcgpu import pct as lxcgpu_pct
from ansible.module_utils.pvetune.concerns.lxcgpu import sources as lxcgpu_sources
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner
from ansible.module_utils.pvetune.formats import ct_config, dev_nodes

OK = "ok"
SKIP = "skip"
FAIL = "fail"
PENDING = "pending"  # a CT that needs a restart the run was not allowed to do
BROKEN_BEFORE = "broken-before"  # failing as it already did before the run's first change (the baseline)
EXCERPT = 600
UVM_PROBE = ["dd", "if=/dev/nvidia-uvm", "of=/dev/null", "bs=1", "count=0"]
_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*(GPU-[0-9A-Za-z-]+)\)\s*$")
_NO_DRIVER = "couldn't communicate with the nvidia driver"
_NOT_FOUND = re.compile(r"failed to exec|not found|no such file or directory", re.I)


def parse_smi_list(text):
    """``nvidia-smi -L`` -> [{"index", "name", "uuid"}] (MIG device lines are not GPUs)."""
    gpus = []
    for line in (text or "").splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2), "uuid": match.group(3)})
    return gpus


def _excerpt(*texts):
    text = "\n".join(t.strip() for t in texts if t and t.strip())
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def _check(name, status, message, rc=None, output=""):
    return {"name": name, "status": status, "message": message, "rc": rc, "output": output}


def _target(name, ctid=None):
    return {"target": name, "ctid": ctid, "status": SKIP, "expected_gpus": None, "gpus": [], "checks": [],
            "message": "", "output": ""}


def _finish(target):
    statuses = [c["status"] for c in target["checks"]]
    if FAIL in statuses:
        target["status"] = FAIL
    elif statuses and all(s == OK for s in statuses):
        target["status"] = OK
    else:
        target["status"] = SKIP
    chosen = [c for c in target["checks"] if c["status"] == target["status"]] or target["checks"]
    target["message"] = "; ".join(c["message"] for c in chosen)
    target["output"] = _excerpt(*[c["output"] for c in chosen])
    return target


def _count_check(name, rc, out, err, expected, where):
    """A ``nvidia-smi -L`` result as a check; returns (check, gpus)."""
    output = _excerpt(out, err)
    if rc != 0:
        return _check(name, FAIL, "nvidia-smi -L %s exited %d" % (where, rc), rc, output), []
    gpus = parse_smi_list(out)
    if expected is not None and len(gpus) != expected:
        return _check(name, FAIL, "nvidia-smi -L %s lists %d GPU(s), expected %d" % (where, len(gpus), expected),
                      rc, output), gpus
    return _check(name, OK, "nvidia-smi -L %s lists %d GPU(s)" % (where, len(gpus)), rc, output), gpus


def check_host(runner, host_nodes):
    target = _target("host")
    expected = None
    if host_nodes is not None:
        expected = len([n for n in host_nodes if n["type"] == "c" and re.match(r"^/dev/nvidia[0-9]+$", n["path"])])
        expected = expected or None
    target["expected_gpus"] = expected
    try:
        rc, out, err = runner.run("nvidia-smi", ["-L"])
    except CommandUnavailable as exc:
        target["checks"].append(_check("nvidia-smi", SKIP, "nvidia-smi not run: %s" % exc.reason))
        return _finish(target)
    if rc == 9 or _NO_DRIVER in (out + err).lower():
        target["checks"].append(_check("nvidia-smi", SKIP, "no NVIDIA driver loaded (nvidia-smi exited %d)" % rc,
                                       rc, _excerpt(out, err)))
        return _finish(target)
    check, gpus = _count_check("nvidia-smi", rc, out, err, expected, "on the host")
    if check["status"] == FAIL and expected is not None and rc == 0:
        check["message"] += " (/dev has %d /dev/nvidiaN nodes)" % expected
    target["checks"].append(check)
    target["gpus"] = gpus
    return _finish(target)


def check_ct(runner, ctid, ct, host_nodes, uvm_probe=True):
    target = _target("ct:%d" % ctid, ctid)
    expected = len(lxcgpu_sources.gpu_nodes_of(ct, host_nodes))
    target["expected_gpus"] = expected or None
    try:
        status, error = lxcgpu_pct.ct_status(runner, ctid)
    except CommandUnavailable as exc:
        target["checks"].append(_check("pct status", SKIP, "pct not run: %s" % exc.reason))
        return _finish(target)
    if error:
        target["checks"].append(_check("pct status", FAIL, error))
        return _finish(target)
    if status != "running":
        target["checks"].append(_check("pct status", SKIP, "CT %d is %s" % (ctid, status)))
        return _finish(target)
    rc, out, err = runner.run("pct", ["exec", str(ctid), "--", "nvidia-smi", "-L"])
    if rc == 127 or (rc != 0 and _NOT_FOUND.search(err or "") and "nvidia-smi" in (err or "")):
        target["checks"].append(_check("nvidia-smi", SKIP, "the CT has no nvidia-smi (exit %d)" % rc, rc,
                                       _excerpt(out, err)))
    elif rc == 9 or _NO_DRIVER in (out + err).lower():
        target["checks"].append(_check("nvidia-smi", FAIL, "nvidia-smi in the CT cannot reach the NVIDIA driver "
                                       "(exit %d): /dev/nvidiactl missing in the CT, or no driver on the host" % rc,
                                       rc, _excerpt(out, err)))
    else:
        check, gpus = _count_check("nvidia-smi", rc, out, err, target["expected_gpus"], "in CT %d" % ctid)
        if check["status"] == FAIL and "Unknown Error" in out + err:
            check["message"] += " (NVML 'Unknown Error': the CT's device cgroup denies an NVIDIA node)"
        target["checks"].append(check)
        target["gpus"] = gpus
    if uvm_probe and lxcgpu_sources.uses_node(ct, nvidia.UVM_NODE):
        rc, out, err = runner.run("pct", ["exec", str(ctid), "--"] + UVM_PROBE)
        output = _excerpt(out, err)
        if rc == 0:
            target["checks"].append(_check("nvidia-uvm", OK, "/dev/nvidia-uvm opens in CT %d" % ctid, rc, output))
        elif "operation not permitted" in (err + out).lower():
            target["checks"].append(_check(
                "nvidia-uvm", FAIL, "CT %d may not open /dev/nvidia-uvm: its device cgroup does not allow the "
                "current nvidia-uvm major (stale allow line, or started before the fix); CUDA fails there "
                "(cuInit: CUDA_ERROR_UNKNOWN)" % ctid, rc, output))
        elif rc == 127:
            target["checks"].append(_check("nvidia-uvm", SKIP, "the CT has no dd to open /dev/nvidia-uvm", rc,
                                           output))
        else:
            target["checks"].append(_check("nvidia-uvm", FAIL, "opening /dev/nvidia-uvm in CT %d failed (exit %d)"
                                           % (ctid, rc), rc, output))
    return _finish(target)


def mark_pending_restart(target):
    """A CT whose config was fixed but that was not allowed to restart runs with its old device rules:
    report what fails now, but as pending its restart, not as a failure of the fix."""
    if target["status"] != FAIL:
        return target
    target["status"] = PENDING
    target["message"] = ("its config is fixed; it still runs with the device rules of its last start and needs a "
                         "restart (pvetune_restart_cts=true, or pct reboot %s): %s" % (target["ctid"],
                                                                                       target["message"]))
    return target


def baseline_failures(baseline):
    """{target name: names of its failing checks} of a baseline (the ``targets`` of an earlier run_health); raises
    ValueError naming what is wrong with a baseline that is not such a list."""
    if not isinstance(baseline, list):
        raise ValueError("baseline must be the targets list of an earlier pvetune_gpu_health run")
    failures = {}
    for i, target in enumerate(baseline):
        if not (isinstance(target, dict) and isinstance(target.get("target"), str)
                and isinstance(target.get("checks", []), list)):
            raise ValueError("baseline[%d] is not a pvetune_gpu_health target (target, status, checks)" % i)
        failures[target["target"]] = {c.get("name") for c in target.get("checks", [])
                                      if isinstance(c, dict) and c.get("status") == FAIL}
    return failures


def judge_against(target, failures):
    """A failing target whose failing checks all failed in the baseline already: ``broken-before``, not the run's."""
    now = {c["name"] for c in target["checks"] if c["status"] == FAIL}
    before = failures.get(target["target"])
    if target["status"] != FAIL or not before or not now <= before:
        return target
    target["status"] = BROKEN_BEFORE
    target["message"] = "already failing before this run's first change, not made worse by it: %s" % target["message"]
    return target


def check_health(params, run_command, check_mode, diff):
    """pvetune_gpu_health's one call: ``(failed, result, warnings)``.  Fails when a target fails (the message names
    each with its reason); a ``broken-before`` target is a warning, not a failure."""
    try:
        ctids = lxcgpu_fix.validate_ctids(params["ctids"])
        pending = lxcgpu_fix.validate_ctids(params["pending_restart"])
        fsroot = FsRoot(params["root"])
    except (ValueError, lxcgpu_fix.LxcFixError) as exc:
        return True, {"msg": str(exc)}, []
    runner = Runner(fsroot, run_command)
    try:
        res = run_health(fsroot, runner, ctids, check_host_gpus=params["host"], check_cts=params["cts"],
                         uvm_probe=params["uvm_probe"], pending_restart=pending, baseline=params["baseline"])
    except (lxcgpu_fix.LxcFixError, FsError, ValueError) as exc:
        return True, {"msg": str(exc), "changed": False}, []
    result = dict(changed=False, **res)
    warnings = ["%s: %s" % (t["target"], t["message"]) for t in res["targets"] if t["status"] == BROKEN_BEFORE]
    if res["failed_targets"]:
        details = ["%s: %s" % (t["target"], t["message"]) for t in res["targets"] if t["status"] == FAIL]
        return True, dict(result, msg="GPU health check failed: %s" % "; ".join(details)), warnings
    return False, result, warnings


def run_health(fsroot, runner, ctids=(), check_host_gpus=True, check_cts=True, uvm_probe=True,
               pending_restart=(), baseline=None):
    """All targets; returns {"targets", "failed_targets", "broken_before", "summary", "skipped_commands"}.  Raises
    LxcFixError/FsError only for a requested CT without a config or an unreadable /etc/pve; ValueError for a bad
    ``baseline`` (see baseline_failures)."""
    failures = baseline_failures(baseline) if baseline is not None else {}
    result = {"targets": [], "failed_targets": [], "broken_before": [],
              "summary": {OK: 0, SKIP: 0, FAIL: 0, PENDING: 0, BROKEN_BEFORE: 0}, "skipped_commands": []}
    # Only the nodes: nvidia.read_state() would also require /proc/devices, which the health check does not use.
    nodes, source = dev_nodes.stat_dev_nodes(fsroot)
    host_nodes = None if source == dev_nodes.SOURCE_NONE else nodes
    if check_host_gpus:
        result["targets"].append(check_host(runner, host_nodes))
    if check_cts:
        cts = []
        if ctids or fsroot.exists(lxcgpu_fix.LXC_LINK):
            base = lxcgpu_fix.ct_config_dir(fsroot)
            available, _skipped = lxcgpu.list_cts(fsroot, base)   # no CT configs: nothing to check
            missing = [c for c in ctids if c not in available]
            if missing:
                raise lxcgpu_fix.LxcFixError("no config for CT %s in %s" % (", ".join(str(c) for c in missing), base))
            for ctid in ctids or sorted(available):
                try:
                    ct = ct_config.parse_ct_config(fsroot.read_bytes(available[ctid]), available[ctid])
                except FsError as exc:
                    target = _target("ct:%d" % ctid, ctid)
                    target["checks"].append(_check("config", FAIL, "cannot read %s: %s" % (exc.path, exc.reason)))
                    result["targets"].append(_finish(target))
                    continue
                if ctids or lxcgpu.passes_nvidia(ct):
                    cts.append((ctid, ct))
        pct_missing = None
        for ctid, ct in cts:
            if pct_missing:
                target = _target("ct:%d" % ctid, ctid)
                target["checks"].append(_check("pct", SKIP, "pct not run: %s" % pct_missing))
                result["targets"].append(_finish(target))
                continue
            target = check_ct(runner, ctid, ct, host_nodes, uvm_probe)
            if ctid in set(pending_restart):
                target = mark_pending_restart(target)
            for check in target["checks"]:
                if check["name"] == "pct status" and check["message"].startswith("pct not run: "):
                    pct_missing = check["message"][len("pct not run: "):]
                    result["skipped_commands"].append({"command": "pct", "reason": pct_missing})
            result["targets"].append(target)
    for target in result["targets"]:
        judge_against(target, failures)
        result["summary"][target["status"]] += 1
        if target["status"] == FAIL:
            result["failed_targets"].append(target["target"])
        elif target["status"] == BROKEN_BEFORE:
            result["broken_before"].append(target["target"])
    for target in result["targets"]:
        for check in target["checks"]:
            if check["status"] == SKIP and check["message"].startswith("nvidia-smi not run: "):
                result["skipped_commands"].append({"command": "nvidia-smi -L",
                                                   "reason": check["message"][len("nvidia-smi not run: "):]})
    return result
