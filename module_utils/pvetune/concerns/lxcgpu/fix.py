# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LXC GPU devices fix: repair the NVIDIA device entries of GPU containers (pvetune_lxc_gpu, ``pvetune-boot lxc-gpu``).

* reads the host through concerns/nvidia.read_state and the CTs through concerns/lxcgpu.list_cts (the audit's own
  readers, so the audit and the fix see the same CTs and majors);
* regenerates the chosen CT configs with ``lxcgpu_regen.regenerate`` and writes the changed ones in place through a
  ``changeset.ChangeSet`` (byte-exact backup first; /etc/pve is pmxcfs, see docs/DESIGN.md);
* records the NVIDIA majors in lxcgpu_state.STATE_FILE (union with what earlier runs saw, plus a history), so a
  later run still recognises an old NVIDIA major after the kernel handed it to another driver;
* tells which running CTs need a restart (their config changed, or the device rules they were started with no
  longer cover the nodes they use) and, when asked, restarts them (``run_fix``; pct and locks in lxcgpu_pct).

CT config paths are the resolved node path (/etc/pve/nodes/<node>/lxc/<id>.conf, what /etc/pve/lxc links to): still
under /etc/pve (written in place), and the backup/manifest name the one node whose file was changed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import posixpath
import stat

from ansible.module_utils.pvetune.concerns.lxcgpu.checks import (
    list_cts,
    passes_nvidia,
    started_uncovered,
)
from ansible.module_utils.pvetune.concerns.lxcgpu.pct import CtLocks, ct_status, restart_ct
from ansible.module_utils.pvetune.concerns.lxcgpu.sources import cgroup_version_of, read_ct_sources, read_started_config
from ansible.module_utils.pvetune.concerns.lxcres.fix import pin_context, plan_pin
from ansible.module_utils.pvetune.concerns.lxcgpu.state import STATE_FILE, known_majors, load_state
from ansible.module_utils.pvetune.concerns.lxcgpu.regen import diff_lines, regenerate
from ansible.module_utils.pvetune.concerns.nvidia.checks import read_state
from ansible.module_utils.pvetune.core.changeset import WriteFailed
from ansible.module_utils.pvetune.core.filewrite import atomic_write, makedirs
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, RunFailed
from ansible.module_utils.pvetune.formats.ct_config import CTID, main_value, parse_ct_config

HISTORY_MAX = 50
PVE_DIR = "/etc/pve"
LXC_LINK = "/etc/pve/lxc"
CGROUP_CHOICES = ("auto", "1", "2")
BOOT_CONFIG_KEYS = ("ctids", "cgroup_version", "wait_seconds")
BOOT_WAIT_DEFAULT = 60
BOOT_WAIT_MAX = 600
PENDING_SECTION = "pve:pending"
# status values of a per-CT result
UNCHANGED = "unchanged"
CHANGED = "changed"
REFUSED = "refused"
RESTART_FAILED = "restart_failed"


class LxcFixError(Exception):
    """A problem that stops the whole run (bad option, /etc/pve unreadable, ...)."""


# ---------------------------------------------------------------------------
# Option validation
# ---------------------------------------------------------------------------
def _show(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def validate_ctids(values):
    """CT ids (ints or digit strings, 100..999999999) -> sorted list of unique ints.

    Anything else (``"101; reboot"``, ``"../101"``, ``"--force"``, ``"1e3"``, floats,
    booleans, a trailing newline, more than nine digits) raises ValueError.
    """
    if values is None:
        return []
    if not isinstance(values, (list, tuple)):
        raise ValueError("ctids must be a list of CT ids, got %s" % type(values).__name__)
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError("ctids: %s is not a CT id (an integer 100-999999999)" % _show(value))
        if not CTID.match(str(value)):
            raise ValueError("ctids: %s is not a CT id (an integer 100-999999999)" % _show(value))
        ctid = int(value)
        if ctid not in out:
            out.append(ctid)
    return sorted(out)


def validate_cgroup_version(value):
    """"auto" (or None) / 1 / 2 -> "auto" or an int."""
    if value is None or value == "auto":
        return "auto"
    if isinstance(value, bool):
        raise ValueError("cgroup_version must be auto, 1 or 2, got %s" % _show(value))
    if str(value) in ("1", "2"):
        return int(value)
    raise ValueError("cgroup_version must be auto, 1 or 2, got %s" % _show(value))


def effective_cgroup_version(fsroot, option):
    """The cgroup version the CT configs are checked for (None: the root does not say)."""
    return option if option != "auto" else cgroup_version_of(fsroot)


def host_state(fsroot):
    """concerns/nvidia.read_state() for the fix; raises FsError when /proc/devices is unreadable or no listing."""
    host = read_state(fsroot)
    if host["devices_error"]:
        raise FsError("/proc/devices", host["devices_error"])
    return host


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def updated_state(state, host_majors, run_id, source, now=None):
    """``(new_state, changed)``: ``state`` plus the current NVIDIA majors.

    Nothing is recorded while no NVIDIA driver is registered (``host_majors``
    empty): an unloaded driver says nothing about its majors.  A history entry is
    added only when the majors differ from the last one, so repeated runs leave
    the file byte-identical.
    """
    new = json.loads(json.dumps(state))
    if not host_majors:
        return new, False
    current = {name: int(major) for name, major in host_majors.items()}
    new["nvidia_majors"] = sorted(set(new["nvidia_majors"]) | set(current.values()))
    for name, major in sorted(current.items()):
        new["names"][str(major)] = name
    last = new["history"][-1].get("majors") if new["history"] else None
    if last != current:
        new["history"].append({"at": now or _now(), "run_id": run_id, "source": source, "majors": current})
        new["history"] = new["history"][-HISTORY_MAX:]
    new["current"] = current
    return new, new != state


def render_state(state):
    return (json.dumps(state, indent=2, sort_keys=True) + "\n").encode("utf-8")


def state_diff(before, after):
    """The diff entry of the state file: the majors it records and its history length, one line per side
    (pvetune's own bookkeeping; the whole JSON would be 40 lines per host in every --diff)."""
    def line(state):
        if state is None:
            return "absent\n"
        majors = ", ".join("%s %s" % (n, m) for n, m in sorted((state.get("current") or {}).items())) or "none"
        seen = ", ".join(str(m) for m in state.get("nvidia_majors") or []) or "none"
        return "current NVIDIA majors: %s; %d history entries; all NVIDIA majors seen: %s\n" % (
            majors, len(state.get("history") or []), seen)
    return {"before_header": STATE_FILE, "after_header": STATE_FILE, "before": line(before), "after": line(after)}


def write_state(fsroot, state):
    real = fsroot.path(STATE_FILE)
    makedirs(os.path.dirname(real))
    atomic_write(real, render_state(state), 0o644)


# ---------------------------------------------------------------------------
# CT configs
# ---------------------------------------------------------------------------
def ct_config_dir(fsroot):
    """Host path of this node's CT config directory (what /etc/pve/lxc points to).

    Raises LxcFixError when /etc/pve/lxc is missing (not a Proxmox VE node, or
    pmxcfs not mounted) or points outside /etc/pve.
    """
    try:
        st = fsroot.lstat(LXC_LINK)
    except FsError:
        raise LxcFixError("%s does not exist: not a Proxmox VE node, or /etc/pve (pmxcfs, pve-cluster.service) "
                          "is not mounted" % LXC_LINK)
    if not stat.S_ISLNK(st.st_mode):   # a plain directory (test trees)
        if not fsroot.isdir(LXC_LINK):
            raise LxcFixError("%s is not a directory" % LXC_LINK)
        return LXC_LINK
    target = fsroot.readlink(LXC_LINK)
    resolved = posixpath.normpath(target if target.startswith("/") else posixpath.join(PVE_DIR, target))
    if not resolved.startswith(PVE_DIR + "/"):
        raise LxcFixError("%s points to %s, outside %s; refusing to write CT configs there"
                          % (LXC_LINK, target, PVE_DIR))
    if not fsroot.isdir(resolved):
        raise LxcFixError("%s points to %s, which is not a directory" % (LXC_LINK, resolved))
    return resolved


def running_rules_uncovered(fsroot, ctid, ct, host, cgroup_version, sources=None):
    """Nodes the CT uses that the device rules it was *started* with do not cover (checks.started_uncovered), or
    None when it has no started config or the host nodes are unknown."""
    return started_uncovered(read_started_config(fsroot, ctid), ctid, ct, host["majors"], host["nodes"],
                             host["devices"], cgroup_version, sources)


def plan_ct(fsroot, ctid, path, host, known, cgroup_version, changes, pin_ctx=None):
    """Regenerate one CT config (and, with ``pin_ctx``, pin its CPUs: lxcres_fix) and plan the write on
    ``changes``; returns the result item."""
    item = {"ctid": ctid, "path": path, "changed": False, "lines": [], "changes": [], "needs_restart": False,
            "restarted": False, "running": None, "status": UNCHANGED, "reason": None, "messages": []}
    st = fsroot.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        # pmxcfs holds only regular files; a symlink here (a copied or hand-made tree) would make the
        # in-place write land wherever it points.
        what = "a symlink to %s" % fsroot.readlink(path) if stat.S_ISLNK(st.st_mode) else "not a regular file"
        item.update(status=REFUSED, reason="%s is %s; not writing through it" % (path, what))
        return item
    data = fsroot.read_bytes(path)
    ct = parse_ct_config(data, path)
    item["_ct"] = ct
    item["_sources"] = read_ct_sources(fsroot, ct)   # once per CT: the plan and the restart decision use it
    new, edits = regenerate(ct, host["majors"], host["nodes"], known_nvidia_majors=known,
                            char_majors_registered=host["devices"], cgroup_version=cgroup_version,
                            sources=item["_sources"])
    refused = [e for e in edits if e["action"] == "refused"]
    if refused:
        item.update(status=REFUSED, reason=refused[0]["reason"], lines=diff_lines(edits))
        return item
    if pin_ctx is not None:
        pinned, change = plan_pin(fsroot, parse_ct_config(new, path), pin_ctx)
        if pinned is not None:
            new, edits = pinned, list(edits) + [change]
    if not edits:
        return item
    lock = main_value(ct, "lock")
    if lock:
        item.update(status=REFUSED, reason="CT is locked (lock: %s); Proxmox refuses config changes while a "
                                           "'%s' task holds it" % (lock, lock), lines=diff_lines(edits))
        return item
    changes.plan_file(path, new)
    item.update(changed=True, status=CHANGED, changes=edits, lines=diff_lines(edits))
    item["_new"] = parse_ct_config(new, path)
    return item


def select_and_plan(fsroot, host, known, cgroup_version, ctids, changes, locks=None, pin_ctx=None):
    """``(base, items, skipped)``: plan every chosen CT.  ``ctids`` empty: every CT that passes NVIDIA devices.

    ``skipped`` is lxcgpu.list_cts()'s: ``*.conf`` files that are no CT config (``0101.conf``), as the audit says too.

    Raises LxcFixError when a requested CT has no config on this node.  With
    ``locks`` (not in check mode) each chosen CT's Proxmox lock is taken before
    its config is read; a CT whose lock cannot be taken is refused.
    """
    base = ct_config_dir(fsroot)
    available, skipped = list_cts(fsroot, base)
    missing = [c for c in ctids if c not in available]
    if missing:
        raise LxcFixError("no config for CT %s in %s (not on this node?)" % (
            ", ".join(str(c) for c in missing), base))
    chosen = ctids or sorted(available)
    items = []
    for ctid in chosen:
        path = available[ctid]
        if not ctids:
            try:
                ct = parse_ct_config(fsroot.read_bytes(path), path)
            except FsError as exc:
                items.append({"ctid": ctid, "path": path, "changed": False, "lines": [], "changes": [],
                              "needs_restart": False, "restarted": False, "running": None, "status": REFUSED,
                              "reason": "cannot read %s: %s" % (path, exc.reason), "messages": []})
                continue
            if not passes_nvidia(ct):
                continue
        if locks is not None:
            why = locks.acquire(ctid)
            if why:
                items.append({"ctid": ctid, "path": path, "changed": False, "lines": [], "changes": [],
                              "needs_restart": False, "restarted": False, "running": None, "status": REFUSED,
                              "reason": why, "messages": []})
                continue
        try:
            items.append(plan_ct(fsroot, ctid, path, host, known, cgroup_version, changes, pin_ctx))
        except FsError as exc:
            items.append({"ctid": ctid, "path": path, "changed": False, "lines": [], "changes": [],
                          "needs_restart": False, "restarted": False, "running": None, "status": REFUSED,
                          "reason": "cannot read %s: %s" % (path, exc.reason), "messages": []})
    return base, items, skipped


def public_item(item):
    return {k: v for k, v in item.items() if not k.startswith("_")}


# ---------------------------------------------------------------------------
# pct
# ---------------------------------------------------------------------------
def decide_restarts(fsroot, runner, items, host, cgroup_version, skipped_commands):
    """Fill ``running``/``needs_restart`` of each item.  Runs only ``pct status`` (read-only)."""
    pct_missing = None
    for item in items:
        if item["status"] == REFUSED:
            continue
        ct = item.get("_new") or item.get("_ct")
        stale_running = None
        if ct is not None and not item["changed"]:
            stale_running = running_rules_uncovered(fsroot, item["ctid"], ct, host, cgroup_version,
                                                    item.get("_sources"))
            if not stale_running:
                continue
        if pct_missing:
            item["running"] = None
            item["messages"].append("running state unknown: %s" % pct_missing)
            continue
        try:
            status, error = ct_status(runner, item["ctid"])
        except CommandUnavailable as exc:
            pct_missing = exc.reason
            skipped_commands.append({"command": "pct status", "reason": exc.reason})
            item["messages"].append("running state unknown: %s" % exc.reason)
            continue
        if error:
            item["messages"].append(error)
            item["running"] = None
            continue
        item["running"] = status == "running"
        if item["running"]:
            item["needs_restart"] = True
            if stale_running:
                item["messages"].append("running with device rules that do not cover %s (started before the "
                                        "majors changed)" % ", ".join(stale_running))


# ---------------------------------------------------------------------------
# The pvetune_lxc_gpu run
# ---------------------------------------------------------------------------
def validate_options(params):
    """The module's options, checked before anything is read for writing or any command runs (ValueError)."""
    if not 0 <= params["restart_timeout"] <= 3600:
        raise ValueError("restart_timeout must be 0-3600 seconds")
    return {"ctids": validate_ctids(params["ctids"]),
            "cgroup_version": validate_cgroup_version(params["cgroup_version"]),
            "restart": bool(params["restart"]), "restart_timeout": params["restart_timeout"],
            "fail_on_refused": bool(params["fail_on_refused"]), "numa_pin": bool(params.get("numa_pin"))}


def restart_needed(runner, items, restart, timeout, skipped_commands):
    """Restart (``pct reboot``) the items that need it, one by one; returns the first failure or None.

    Not restarted: a CT with pending changes (a restart would apply them too), a locked CT, every CT after a
    failure.  Fills ``restarted``, ``status``/``reason`` (RESTART_FAILED) and ``messages`` of the items.
    """
    for item in items:
        if not item["needs_restart"] or not restart:
            continue
        ct = item.get("_ct")
        if ct is not None and PENDING_SECTION in ct.sections:
            item["messages"].append("not restarted: the CT has pending changes ([pve:pending]) that a restart "
                                    "would apply too; restart it yourself")
            continue
        lock = main_value(ct, "lock") if ct is not None else None
        if lock:
            item["messages"].append("not restarted: the CT is locked (lock: %s)" % lock)
            continue
        try:
            error = restart_ct(runner, item["ctid"], timeout)
        except CommandUnavailable as exc:
            skipped_commands.append({"command": "pct reboot %d" % item["ctid"], "reason": exc.reason})
            item["messages"].append("not restarted: %s" % exc.reason)
            continue
        if error:
            item["status"] = RESTART_FAILED
            item["reason"] = error
            return "CT %d failed to restart: %s" % (item["ctid"], error)
        item["restarted"] = True
    return None


def _outcome(items, restart_error, fail_on_refused, check_mode):
    """``(error message or None, [warnings])`` of a finished run."""
    warnings = []
    if restart_error:
        not_tried = [i["ctid"] for i in items if i["needs_restart"] and not i["restarted"]
                     and i["status"] != RESTART_FAILED]
        return ("%s; restarts stopped there%s. The config changes stay applied (they are correct); start the CT by "
                "hand once the cause is fixed" % (restart_error, (" (not restarted: %s)" % ", ".join(
                    str(c) for c in not_tried)) if not_tried else "")), warnings
    refused = [i for i in items if i["status"] == REFUSED]
    if refused:
        text = "; ".join("CT %d: %s" % (i["ctid"], i["reason"]) for i in refused)
        if fail_on_refused:
            return "refused to rewrite %s (the other CTs were handled)" % text, warnings
        warnings.append("left unchanged: %s" % text)
    for item in items:
        if item["needs_restart"] and not item["restarted"] and not check_mode:
            warnings.append("CT %d runs with outdated NVIDIA device rules; restart it (pct reboot %d) or set "
                            "restart: true" % (item["ctid"], item["ctid"]))
    return None, warnings


def run_fix(fsroot, runner, changes, opts, check_mode, diff):
    """pvetune_lxc_gpu: ``(result, error message or None, [warnings])``; the module exits with them.

    ``opts`` from validate_options().  Plans and writes the CT configs (under their Proxmox locks unless in check
    mode), updates the state file, decides and (with ``restart``, not in check mode) performs the restarts.
    """
    result = {"changed": False, "cts": [], "host_majors": {}, "known_majors": {}, "nodes_source": None,
              "cgroup_version": None, "state_file": STATE_FILE, "state_changed": False, "skipped": [],
              "restart_required": [], "restarted": [], "refused": [], "reboot_required": False,
              "changes": changes.summary(), "skipped_commands": []}
    try:
        host = host_state(fsroot)
    except FsError as exc:
        return result, "cannot read the NVIDIA device state: %s" % exc, []
    result.update(host_majors=host["majors"], nodes_source=host["nodes_source"])
    state, state_error = load_state(fsroot)
    if state_error:
        return result, "%s; fix or remove it (it records which majors were NVIDIA's)" % state_error, []
    known = known_majors(state)
    result["known_majors"] = {str(k): v for k, v in sorted(known.items())}
    cgroup_version = result["cgroup_version"] = effective_cgroup_version(fsroot, opts["cgroup_version"])
    locks = None if check_mode else CtLocks(fsroot)
    try:
        try:
            pin_ctx = pin_context(fsroot, host, cgroup_version) if opts["numa_pin"] else None
            _base, items, result["skipped"] = select_and_plan(fsroot, host, known, cgroup_version, opts["ctids"],
                                                              changes, locks, pin_ctx)
        except (LxcFixError, FsError) as exc:
            return result, str(exc), []
        try:
            changes.apply_or_restore("the CT configs")
        except WriteFailed as exc:
            return result, str(exc), []
    finally:
        if locks is not None:
            locks.release_all()
    new_state, state_changed = updated_state(state, host["majors"], changes.run_id, "pvetune_lxc_gpu")
    state_before = state if fsroot.exists(STATE_FILE) else None  # for the diff: before write_state creates it
    result["state_changed"] = state_changed
    if state_changed and not check_mode:
        try:
            write_state(fsroot, new_state)
        except (OSError, IOError, FsError) as exc:
            return result, "cannot write %s: %s" % (STATE_FILE, exc), []
    decide_restarts(fsroot, runner, items, host, cgroup_version, result["skipped_commands"])
    restart_error = restart_needed(runner, items, opts["restart"] and not check_mode, opts["restart_timeout"],
                                   result["skipped_commands"])
    result["cts"] = [public_item(i) for i in items]
    result["restarted"] = [i["ctid"] for i in items if i["restarted"]]
    result["restart_required"] = [i["ctid"] for i in items if i["needs_restart"] and not i["restarted"]]
    result["refused"] = [i["ctid"] for i in items if i["status"] == REFUSED]
    result["changes"] = changes.summary()
    result["changed"] = bool(changes.changed or state_changed or result["restarted"])
    if diff:
        result["diff"] = changes.diffs()
        if state_changed:
            result["diff"].append(state_diff(state_before, new_state))
    error, warnings = _outcome(items, restart_error, opts["fail_on_refused"], check_mode)
    return result, error, warnings


def fix(params, run_command, check_mode, diff):
    """pvetune_lxc_gpu's one call: ``(failed, result, warnings)``; every option is checked before anything is read
    for writing or any command runs."""
    def run(fsroot, runner, changes, opts, warn):
        result, error, warnings = run_fix(fsroot, runner, changes, opts, check_mode, diff)
        for warning in warnings:
            warn(warning)
        if error:
            raise RunFailed(error, **result)
        return result
    # diff False for fix_call: run_fix puts the ChangeSet's diffs (and the state file's) in the result itself
    return fix_call(params, run_command, check_mode, False, validate_options, run)
