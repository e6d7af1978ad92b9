# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Repair the NVIDIA device entries of GPU containers (pvetune_lxc_gpu, ``pvetune-boot lxc-gpu``).

The nvidia-uvm (and nvidia-caps, nvidia-nvlink, ...) majors are dynamic.  After
a reboot or a driver update a CT whose ``lxc.cgroup2.devices.allow`` lines name
the old major still starts, but CUDA fails inside it.  This module

* reads the host's NVIDIA majors (/proc/devices) and nodes (/dev/nvidia*);
* regenerates the chosen CT configs with ``lxcgpu.regenerate`` and writes the
  changed ones in place through a ``changeset.ChangeSet`` (byte-exact backup
  first; /etc/pve is pmxcfs, see docs/DESIGN.md);
* records the NVIDIA majors in /var/lib/pvetune/nvidia-majors.json (union with
  what earlier runs saw, plus a history), so a later run still recognises an
  old NVIDIA major after the kernel handed it to another driver;
* tells which running CTs need a restart (their config changed, or the device
  rules they were started with no longer cover the nodes they use) and, when
  asked, restarts them with ``pct reboot``.

CT config paths are the resolved node path (/etc/pve/nodes/<node>/lxc/<id>.conf,
what /etc/pve/lxc links to): still under /etc/pve (written in place), and the
backup/manifest name the one node whose file was changed.

Config edits hold Proxmox's own per-CT lock (flock on
/run/lock/lxc/pve-config-<id>.lock, as ``pct set`` does), so pvetune never
interleaves with a Proxmox task on the same CT.  Not in check mode (taking a
lock creates the lock file).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import fcntl
import json
import os
import posixpath
import re
import stat
import time

from ansible.module_utils.pvetune import lxcgpu
from ansible.module_utils.pvetune.core.changeset import (ChangeError, ChangeSet, _atomic_write, _makedirs,
                                                        validate_run_id)
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.runner import CommandUnavailable

STATE_FILE = "/var/lib/pvetune/nvidia-majors.json"
STATE_VERSION = 1
HISTORY_MAX = 50
PVE_DIR = "/etc/pve"
LXC_LINK = "/etc/pve/lxc"
RUNNING_CONFIG = "/var/lib/lxc/%d/config"
LOCK_FILE = "/run/lock/lxc/pve-config-%d.lock"
LOCK_TIMEOUT = 10
CTID = re.compile(r"\A[1-9][0-9]{2,8}\Z")
PROC_DEVICES_HEADER = re.compile(r"^Character devices:", re.M)
CT_CONF = re.compile(r"\A([1-9][0-9]{2,8})\.conf\Z")
CGROUP_CHOICES = ("auto", "1", "2")
BOOT_CONFIG_KEYS = ("ctids", "cgroup_version", "wait_seconds")
BOOT_WAIT_DEFAULT = 60
BOOT_WAIT_MAX = 600
PENDING_SECTION = "pve:pending"
UVM_NODE = "/dev/nvidia-uvm"
CTL_NODE = "/dev/nvidiactl"

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
    if option != "auto":
        return option
    if fsroot.isfile("/sys/fs/cgroup/cgroup.controllers"):
        return 2
    if fsroot.isdir("/sys/fs/cgroup/devices"):
        return 1
    return None


# ---------------------------------------------------------------------------
# Host state
# ---------------------------------------------------------------------------
def read_host(fsroot):
    """/proc/devices and the NVIDIA nodes.  Raises FsError when /proc/devices is unreadable."""
    text = fsroot.read_text("/proc/devices")
    if not PROC_DEVICES_HEADER.search(text):
        # An empty or foreign file (a /proc copy that trusted st_size 0, a truncated collect) would read as
        # "no driver registers any major" and make every NVIDIA line look stale.
        raise FsError("/proc/devices", "no 'Character devices:' section (%d bytes): not a /proc/devices listing"
                      % len(text))
    devices = lxcgpu.parse_proc_devices(text)
    majors = lxcgpu.nvidia_majors(devices)
    nodes, source = lxcgpu.stat_dev_nodes(fsroot)
    return {
        "devices": devices,
        "majors": majors,
        "nodes": None if source == lxcgpu.SOURCE_NONE else nodes,
        "nodes_source": source,
        "driver_loaded": fsroot.isfile("/proc/driver/nvidia/version"),
    }


def _node(host, path):
    for node in host["nodes"] or ():
        if node["path"] == path and node["type"] == "c":
            return node
    return None


def uvm_ready(host):
    """(ready, why not): nvidia-uvm registered and /dev/nvidia-uvm carries that major."""
    major = host["majors"].get("nvidia-uvm")
    if major is None:
        return False, "nvidia-uvm is not in /proc/devices (module not loaded)"
    node = _node(host, UVM_NODE)
    if node is None:
        return False, "%s does not exist" % UVM_NODE
    if node["major"] != major:
        return False, "%s is %d:%d but nvidia-uvm is major %d" % (UVM_NODE, node["major"], node["minor"], major)
    return True, None


# ---------------------------------------------------------------------------
# State file (/var/lib/pvetune/nvidia-majors.json)
# ---------------------------------------------------------------------------
def empty_state():
    return {"version": STATE_VERSION, "nvidia_majors": [], "names": {}, "current": {}, "history": []}


def load_state(fsroot):
    """``(state, error)``; a missing file is an empty state, a corrupt one an error (state None).

    Format: ``nvidia_majors`` (every major ever seen as NVIDIA's; gather.py reads
    this list), ``names`` (major -> last NVIDIA driver name seen on it),
    ``current`` (name -> major at the last change) and ``history``
    (``[{"at", "run_id", "source", "majors"}]``, one entry per change, newest last).
    """
    if not fsroot.exists(STATE_FILE):
        return empty_state(), None
    try:
        data = json.loads(fsroot.read_text(STATE_FILE, errors="strict"))
    except (FsError, ValueError, UnicodeDecodeError) as exc:
        return None, "%s is unreadable (%s)" % (STATE_FILE, exc)
    try:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        state = empty_state()
        majors = data.get("nvidia_majors", [])
        if not isinstance(majors, list) or not all(isinstance(m, int) and not isinstance(m, bool) for m in majors):
            raise ValueError("nvidia_majors is not a list of integers")
        state["nvidia_majors"] = sorted(set(majors))
        names = data.get("names", {})
        if not isinstance(names, dict) or not all(
                str(k).isdigit() and isinstance(v, str) for k, v in names.items()):
            raise ValueError("names is not an object of major -> driver name")
        state["names"] = {str(int(k)): v for k, v in names.items()}
        current = data.get("current", {})
        if not isinstance(current, dict) or not all(isinstance(v, int) for v in current.values()):
            raise ValueError("current is not an object of driver name -> major")
        state["current"] = dict(current)
        history = data.get("history", [])
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise ValueError("history is not a list of objects")
        state["history"] = list(history)
    except ValueError as exc:
        return None, "%s: %s" % (STATE_FILE, exc)
    return state, None


def known_majors(state):
    """{major: driver name or None} for lxcgpu (majors recorded as NVIDIA's by earlier runs)."""
    out = dict.fromkeys((state or {}).get("nvidia_majors", []))
    for major, name in (state or {}).get("names", {}).items():
        out[int(major)] = name
    return out


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


def write_state(fsroot, state):
    real = fsroot.path(STATE_FILE)
    _makedirs(os.path.dirname(real))
    _atomic_write(real, render_state(state), 0o644)


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


def list_cts(fsroot, base):
    """{ctid: host path} of the CT configs in ``base``."""
    out = {}
    for name in fsroot.listdir(base):
        match = CT_CONF.match(name)
        if match:
            out[int(match.group(1))] = "%s/%s" % (base, name)
    return out


def main_value(ct, key):
    values = [line.value for line in ct.main_lines() if line.kind == "kv" and line.key == key]
    return values[-1] if values else None


def passes_nvidia(ct):
    """Whether the CT is set up for NVIDIA devices (mounts, devN entries, 195 allow lines, hooks)."""
    return bool(lxcgpu.evaluate_ct(ct, {}, None)["uses_nvidia"])


def gpu_nodes_of(ct, host_nodes=None):
    """/dev/nvidiaN paths the CT gets (mount entries and devN), in file order.

    With ``host_nodes`` only those that exist on the host (a missing optional
    mount is simply absent in the CT; a missing devN node stops its start).
    """
    paths = []
    for line in ct.main_lines():
        path = None
        if line.mount is not None:
            path = line.mount.norm_source
        elif line.dev is not None and line.dev.get("path"):
            path = posixpath.normpath(line.dev["path"])
        if path and re.match(r"^/dev/nvidia[0-9]+$", path) and path not in paths:
            paths.append(path)
    if host_nodes is not None:
        present = {n["path"] for n in host_nodes if n.get("type") == "c"}
        paths = [p for p in paths if p in present]
    return paths


def uses_node(ct, path):
    """Whether the CT mounts (or devN-passes) ``path``."""
    for line in ct.main_lines():
        if line.mount is not None and line.mount.norm_source == path:
            return True
        if line.dev is not None and line.dev.get("path") and posixpath.normpath(line.dev["path"]) == path:
            return True
    return False


def running_rules_uncovered(fsroot, ctid, ct, host, cgroup_version):
    """Nodes the CT uses that the device rules it was *started* with do not cover.

    Proxmox writes the LXC config of every start to /var/lib/lxc/<id>/config
    (raw ``lxc.*`` keys as ``key = value``, devN entries as
    ``lxc.cgroup2.devices.allow = c M:m rw`` with the majors of that moment).
    Returns a list of "path (M:m)" strings, or None when that file is missing
    or the host nodes are unknown.
    """
    if host["nodes"] is None:
        return None
    try:
        data = fsroot.read_bytes(RUNNING_CONFIG % ctid)
    except FsError:
        return None
    running = lxcgpu.parse_ct_config(data, RUNNING_CONFIG % ctid)
    # lxcgpu's analysis gives the nodes the CT uses with their current majors.
    analysis = lxcgpu._analyze(ct, host["majors"], host["nodes"], {}, host["devices"], cgroup_version)
    used = dict(analysis.mount_used)
    used.update(analysis.dev_used)
    rules = [line.rule for line in running.main_lines()
             if line.kind == "kv" and line.key in lxcgpu.DEVICE_KEYS and line.rule is not None]
    if cgroup_version in (1, 2):
        family = "v%d" % cgroup_version
    else:
        family = "v2" if any(r.family == "v2" for r in rules) or not rules else "v1"
    rules = [r for r in rules if r.family == family]
    missing = []
    for path in sorted(used):
        node = used[path]
        if not lxcgpu._covered(rules, node["major"], node["minor"]):
            missing.append("%s (%d:%d)" % (path, node["major"], node["minor"]))
    return missing


class CtLocks:
    """Proxmox's per-CT config locks (flock on /run/lock/lxc/pve-config-<id>.lock)."""

    def __init__(self, fsroot, timeout=None, sleep=time.sleep, clock=time.monotonic):
        self.fsroot = fsroot
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.sleep = sleep
        self.clock = clock
        self.held = {}

    def acquire(self, ctid):
        """Returns None, or why the lock could not be taken."""
        host_path = LOCK_FILE % ctid
        try:
            real = self.fsroot.path(host_path)
            _makedirs(os.path.dirname(real))
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except (OSError, FsError) as exc:
            return "cannot open %s: %s" % (host_path, exc)
        deadline = self.clock() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.held[ctid] = fd
                return None
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    return "cannot lock %s: %s" % (host_path, exc)
            if self.clock() >= deadline:
                os.close(fd)
                return ("%s is held by another Proxmox task (waited %s s); not changing the config while it runs"
                        % (host_path, self.timeout))
            self.sleep(0.2)

    def release_all(self):
        for fd in self.held.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self.held = {}


def plan_ct(fsroot, ctid, path, host, known, cgroup_version, changes):
    """Regenerate one CT config and plan the write on ``changes``; returns the result item."""
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
    ct = lxcgpu.parse_ct_config(data, path)
    item["_ct"] = ct
    new, edits = lxcgpu.regenerate(ct, host["majors"], host["nodes"], known_nvidia_majors=known,
                                   char_majors_registered=host["devices"], cgroup_version=cgroup_version)
    refused = [e for e in edits if e["action"] == "refused"]
    if refused:
        item.update(status=REFUSED, reason=refused[0]["reason"], lines=lxcgpu.diff_lines(edits))
        return item
    if not edits:
        return item
    lock = main_value(ct, "lock")
    if lock:
        item.update(status=REFUSED, reason="CT is locked (lock: %s); Proxmox refuses config changes while a "
                                           "'%s' task holds it" % (lock, lock), lines=lxcgpu.diff_lines(edits))
        return item
    changes.plan_file(path, new)
    item.update(changed=True, status=CHANGED, changes=edits, lines=lxcgpu.diff_lines(edits))
    item["_new"] = lxcgpu.parse_ct_config(new, path)
    return item


def select_and_plan(fsroot, host, known, cgroup_version, ctids, changes, locks=None):
    """Plan every chosen CT.  ``ctids`` empty: every CT that passes NVIDIA devices.

    Raises LxcFixError when a requested CT has no config on this node.  With
    ``locks`` (not in check mode) each chosen CT's Proxmox lock is taken before
    its config is read; a CT whose lock cannot be taken is refused.
    """
    base = ct_config_dir(fsroot)
    available = list_cts(fsroot, base)
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
                ct = lxcgpu.parse_ct_config(fsroot.read_bytes(path), path)
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
            items.append(plan_ct(fsroot, ctid, path, host, known, cgroup_version, changes))
        except FsError as exc:
            items.append({"ctid": ctid, "path": path, "changed": False, "lines": [], "changes": [],
                          "needs_restart": False, "restarted": False, "running": None, "status": REFUSED,
                          "reason": "cannot read %s: %s" % (path, exc.reason), "messages": []})
    return base, items


def public_item(item):
    return {k: v for k, v in item.items() if not k.startswith("_")}


# ---------------------------------------------------------------------------
# pct
# ---------------------------------------------------------------------------
_STATUS = re.compile(r"^status:\s*(\S+)\s*$", re.M)


def ct_status(runner, ctid):
    """``(status, error)``: "running"/"stopped"/... from ``pct status <id>``."""
    rc, out, err = runner.run("pct", ["status", str(int(ctid))])
    if rc != 0:
        return None, "pct status %d exited %d: %s" % (ctid, rc, excerpt(err or out))
    match = _STATUS.search(out or "")
    if not match:
        return None, "pct status %d printed no status: %s" % (ctid, excerpt(out))
    return match.group(1), None


def excerpt(text, limit=400):
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def restart_ct(runner, ctid, timeout):
    """``pct reboot <id> --timeout <s>``, then ``pct status``; returns None or the error."""
    rc, out, err = runner.run("pct", ["reboot", str(int(ctid)), "--timeout", str(int(timeout))])
    if rc != 0:
        return "pct reboot %d exited %d: %s" % (ctid, rc, excerpt(err or out))
    status, error = ct_status(runner, ctid)
    if error:
        return "after pct reboot: %s" % error
    if status != "running":
        return "after pct reboot CT %d is %s, not running" % (ctid, status)
    return None


def decide_restarts(fsroot, runner, items, host, cgroup_version, skipped_commands):
    """Fill ``running``/``needs_restart`` of each item.  Runs only ``pct status`` (read-only)."""
    pct_missing = None
    for item in items:
        if item["status"] == REFUSED:
            continue
        ct = item.get("_new") or item.get("_ct")
        stale_running = None
        if ct is not None and not item["changed"]:
            stale_running = running_rules_uncovered(fsroot, item["ctid"], ct, host, cgroup_version)
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
# Boot-time re-application (pvetune-boot lxc-gpu)
# ---------------------------------------------------------------------------
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
        host = read_host(fsroot)
        ready, why = uvm_ready(host)
        if ready and _node(host, CTL_NODE) is not None:
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
        available = list_cts(fsroot, base)
    except (LxcFixError, FsError) as exc:
        return False, [str(exc)]
    gpu_cts = list(cfg["ctids"])
    if not gpu_cts:
        for ctid, path in sorted(available.items()):
            try:
                if passes_nvidia(lxcgpu.parse_ct_config(fsroot.read_bytes(path), path)):
                    gpu_cts.append(ctid)
            except FsError:
                gpu_cts.append(ctid)   # unreadable: let select_and_plan report it
    try:
        if gpu_cts:
            host, ready = wait_for_nodes(fsroot, runner, cfg["wait_seconds"], messages, sleep=sleep, clock=clock)
        else:
            host, ready = read_host(fsroot), True   # nothing to wait for
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
            _base, items = select_and_plan(fsroot, host, known, cgroup_version, cfg["ctids"], changes, locks)
        except (LxcFixError, FsError) as exc:
            return False, messages + [str(exc)]
        try:
            changes.apply()
        except (OSError, IOError, FsError, ChangeError) as exc:
            restored = changes.restore_run()
            return False, messages + ["writing failed: %s (restored: %s)" % (exc, ", ".join(restored) or "none")]
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
