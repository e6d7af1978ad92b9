# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot-time re-application of the LXC GPU fix (``pvetune-boot lxc-gpu``, pvetune-lxc-gpu.service).

Runs before pve-guests.service starts the CTs: waits (bounded) for the NVIDIA nodes, then plans and writes the GPU
CTs' configs with the fix's own functions (concerns/lxcgpu/fix.py) and records the majors in the state file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible.module_utils.pvetune.concerns.lxcgpu.checks import list_cts, passes_nvidia
from ansible.module_utils.pvetune.concerns.lxcgpu.state import STATE_FILE, known_majors, load_state
from ansible.module_utils.pvetune.concerns.lxcgpu.fix import (
    BOOT_CONFIG_KEYS,
    BOOT_WAIT_DEFAULT,
    BOOT_WAIT_MAX,
    REFUSED,
    UNCHANGED,
    LxcFixError,
    ct_config_dir,
    effective_cgroup_version,
    host_state,
    select_and_plan,
    updated_state,
    validate_cgroup_version,
    validate_ctids,
    write_state,
)
from ansible.module_utils.pvetune.concerns.lxcgpu.pct import CtLocks, excerpt
from ansible.module_utils.pvetune.concerns.nvidia.checks import CTL_NODE, char_node, uvm_ready
from ansible.module_utils.pvetune.core.changeset import ChangeSet, WriteFailed, validate_run_id
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.runner import CommandUnavailable
from ansible.module_utils.pvetune.formats.ct_config import parse_ct_config


def validate_boot_config(config):
    if not isinstance(config, dict):
        raise ValueError("the configuration must be a JSON object")
    unknown = sorted(set(config) - set(BOOT_CONFIG_KEYS))
    if unknown:
        raise ValueError("unknown key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(BOOT_CONFIG_KEYS)))
    wait = config.get("wait_seconds", BOOT_WAIT_DEFAULT)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= BOOT_WAIT_MAX:
        raise ValueError("wait_seconds must be an integer 0-%d" % BOOT_WAIT_MAX)
    return {"ctids": validate_ctids(config.get("ctids") or []),
            "cgroup_version": validate_cgroup_version(config.get("cgroup_version", "auto")),
            "wait_seconds": wait}


def wait_for_nodes(fsroot, runner, wait_seconds, messages, sleep=time.sleep, clock=time.monotonic):
    """Wait (bounded) until nvidia-uvm and its node are there; run nvidia-modprobe -u -c0 once if needed.

    Returns the last host state read and whether it is ready.
    """
    deadline = clock() + wait_seconds
    modprobe_tried = False
    while True:
        host = host_state(fsroot)
        ready, why = uvm_ready(host)
        if ready and char_node(host, CTL_NODE) is not None:
            return host, True
        if ready:
            why = "%s does not exist" % CTL_NODE
        if not modprobe_tried and host["driver_loaded"]:
            modprobe_tried = True
            try:
                rc, out, err = runner.run("nvidia-modprobe", ["-u", "-c0"])
                messages.append("%s: ran nvidia-modprobe -u -c0 (exit %d%s)" % (
                    why, rc, (": " + excerpt(err or out, 200)) if (err or out).strip() else ""))
            except CommandUnavailable as exc:
                messages.append("%s; nvidia-modprobe unavailable: %s" % (why, exc.reason))
            continue
        if clock() >= deadline:
            messages.append("NVIDIA nodes not ready after %d s: %s" % (wait_seconds, why))
            return host, False
        sleep(1)


def boot_apply(fsroot, runner, config, sleep=time.sleep, clock=time.monotonic):
    """pvetune-boot lxc-gpu: regenerate the GPU CTs' NVIDIA entries at boot; returns (ok, [messages]).

    Runs before pve-guests.service starts the CTs, so no CT is ever restarted.
    Waits (``wait_seconds``, default 60) for nvidia-uvm and /dev/nvidia-uvm,
    running ``nvidia-modprobe -u -c0`` once when the driver is loaded but the uvm
    node is missing.  Changed configs are backed up under
    /var/lib/pvetune/runs/boot-<time>/ like a fix run.  Not ok (the unit fails,
    visibly) when the nodes did not appear, a CT was refused, the state file is
    corrupt (it is then left alone) or a write failed; every fixable CT is still
    fixed.
    """
    try:
        cfg = validate_boot_config(config)
    except ValueError as exc:
        return False, ["configuration: %s" % exc]
    messages = []
    ok = True
    try:
        base = ct_config_dir(fsroot)
        available, skipped = list_cts(fsroot, base)
    except (LxcFixError, FsError) as exc:
        return False, [str(exc)]
    messages.extend("skipped %s" % entry["reason"] for entry in skipped)
    gpu_cts = list(cfg["ctids"])
    if not gpu_cts:
        for ctid, path in sorted(available.items()):
            try:
                if passes_nvidia(parse_ct_config(fsroot.read_bytes(path), path)):
                    gpu_cts.append(ctid)
            except FsError:
                gpu_cts.append(ctid)   # unreadable: let select_and_plan report it
    try:
        if gpu_cts:
            host, ready = wait_for_nodes(fsroot, runner, cfg["wait_seconds"], messages, sleep=sleep, clock=clock)
        else:
            host, ready = host_state(fsroot), True   # nothing to wait for
    except FsError as exc:
        return False, messages + ["cannot read the NVIDIA device state: %s" % exc]
    if not ready:
        ok = False
    state, state_error = load_state(fsroot)
    if state_error:
        ok = False
        messages.append("%s; continuing without the majors earlier runs recorded, file left as it is"
                        % state_error)
    known = known_majors(state) if state else {}
    cgroup_version = effective_cgroup_version(fsroot, cfg["cgroup_version"])
    run_id = validate_run_id("boot-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    changes = ChangeSet(fsroot, check_mode=False, run_id=run_id)
    locks = CtLocks(fsroot, sleep=sleep, clock=clock)
    try:
        try:
            _base, items, _skipped = select_and_plan(fsroot, host, known, cgroup_version, cfg["ctids"], changes, locks)
        except (LxcFixError, FsError) as exc:
            return False, messages + [str(exc)]
        try:
            changes.apply_or_restore("the CT configs")
        except WriteFailed as exc:
            return False, messages + [str(exc)]
    finally:
        locks.release_all()
    for item in items:
        if item["status"] == REFUSED:
            ok = False
            messages.append("CT %d: refused: %s" % (item["ctid"], item["reason"]))
        elif item["changed"]:
            messages.append("CT %d: %s: %s" % (item["ctid"], item["path"], "; ".join(item["lines"])))
    unchanged = [str(i["ctid"]) for i in items if i["status"] == UNCHANGED]
    if unchanged:
        messages.append("CT %s: NVIDIA entries already current" % ", ".join(unchanged))
    if not items:
        messages.append("no CT passes NVIDIA devices")
    if state is not None:
        new_state, state_changed = updated_state(state, host["majors"], run_id, "pvetune-boot")
        if state_changed:
            try:
                write_state(fsroot, new_state)
                messages.append("%s: NVIDIA majors %s" % (STATE_FILE, ", ".join(
                    "%s=%d" % kv for kv in sorted(host["majors"].items()))))
            except (OSError, IOError, FsError) as exc:
                ok = False
                messages.append("cannot write %s: %s" % (STATE_FILE, exc))
    return ok, messages
