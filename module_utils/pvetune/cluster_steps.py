# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster gate's steps around a reboot (issue 14): read the cluster, enter, rejoin, release.

* ``read_cluster``: corosync.conf (through the root), ``corosync-quorumtool -s``, ``ha-manager status``, Ceph (when
  a ceph.conf exists: ``ceph status``, ``ceph osd ls-tree <node>``, ``ceph osd ok-to-stop``), ``pct list`` and
  ``qm list``.  cluster_gate.gate_decision() judges what it returns.
* ``enter`` (before the reboot): HA maintenance for the node, then wait until no HA service runs on it; noout for
  its OSDs (``ceph osd add-noout``; the global flag where the release lacks it).  What it did goes to STATE_FILE,
  which survives the reboot, so rejoin and release undo exactly that.
* ``rejoin`` (after the reboot, before the LXC regeneration and the GPU gates): wait until the node is a quorate
  member again, pmxcfs serves /etc/pve (``.members`` names this node) and /etc/pve takes a write; its OSDs are up;
  then noout is cleared and the PGs are waited for until active+clean.
* ``release`` (after the gates): leave HA maintenance; the state file goes.

Commands run only through the Runner (stand-ins for a root other than /); every wait is bounded and fails naming
what it waited for and what it saw last.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible.module_utils.pvetune.cluster_gate import gate_decision, local_node
from ansible.module_utils.pvetune.concerns import lxcgpu, lxcgpu_fix
from ansible.module_utils.pvetune.concerns.lxcgpu_pct import excerpt
from ansible.module_utils.pvetune.core.changeset import _atomic_write, _makedirs
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.runner import CommandUnavailable
from ansible.module_utils.pvetune.formats import ceph_json, ct_config, guest_list, ha_status
from ansible.module_utils.pvetune.formats.corosync_conf import parse_corosync_conf
from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool

# /etc/pve/corosync.conf is the cluster's copy; while pmxcfs is down /etc/pve is empty, and corosync's own copy still
# says the node is clustered (a missing /etc/pve copy must not read as "standalone").
CONF_PATHS = ("/etc/pve/corosync.conf", "/etc/corosync/corosync.conf")
CEPH_CONFS = ("/etc/pve/ceph.conf", "/etc/ceph/ceph.conf")
MEMBERS = "/etc/pve/.members"
STATE_FILE = "/var/lib/pvetune/cluster-gate.json"
ENOENT, EINVAL = 2, 22
QUORATE_RC = (0, 2)  # corosync-quorumtool -s: 0 quorate, 2 not quorate, 1 error


class GateError(Exception):
    """A command or file the gate needs failed; the message names it."""


def _run(runner, name, args, ok=(0,)):
    try:
        rc, out, err = runner.run(name, args)
    except CommandUnavailable as exc:
        raise GateError("%s: %s" % (" ".join([name] + list(args)), exc.reason))
    if rc not in ok:
        raise GateError("%s exited %d: %s" % (" ".join([name] + list(args)), rc, excerpt(err or out)))
    return rc, out, err


def _parsed(parse, text, command):
    try:
        return parse(text)
    except ValueError as exc:
        raise GateError("%s: %s" % (command, exc))


def read_conf(fsroot):
    """(path, parsed corosync.conf), or (None, None) for a standalone host."""
    for path in CONF_PATHS:
        if fsroot.isfile(path):
            try:
                return path, parse_corosync_conf(fsroot.read_text(path), path)
            except (ValueError, FsError) as exc:
                raise GateError(str(exc))
    return None, None


def read_quorum(runner):
    return _parsed(parse_quorumtool, _run(runner, "corosync-quorumtool", ["-s"], QUORATE_RC)[1],
                   "corosync-quorumtool -s")


def read_ha(runner):
    """ha-manager status, or None where the HA stack is not installed (a host that is no Proxmox VE node)."""
    if runner.which("ha-manager") is None:
        return None
    return _parsed(ha_status.parse_ha_status, _run(runner, "ha-manager", ["status"])[1], "ha-manager status")


def read_ceph(fsroot, runner, node):
    """None without a ceph.conf; else {"osds", "ok_to_stop", "why", "health"} for this node."""
    if not any(fsroot.isfile(path) for path in CEPH_CONFS):
        return None
    status = _parsed(ceph_json.parse_status, _run(runner, "ceph", ["status", "--format", "json"])[1], "ceph status")
    # No CRUSH bucket of that name (ENOENT): the node runs no OSD.
    rc, out, _err = _run(runner, "ceph", ["osd", "ls-tree", "--format", "json", node], (0, ENOENT))
    osds = [] if rc == ENOENT else _parsed(ceph_json.parse_ls_tree, out, "ceph osd ls-tree")
    out = {"osds": osds, "ok_to_stop": True, "why": "", "health": status["health"]}
    if osds:
        # Exit 0: stopping them leaves every PG available; EBUSY/EAGAIN (or any other): not now, and why.
        rc, stdout, stderr = runner.run("ceph", ["osd", "ok-to-stop"] + [str(i) for i in osds])
        out["ok_to_stop"], out["why"] = rc == 0, "" if rc == 0 else "exit %d: %s" % (rc, excerpt(stderr or stdout))
    return out


def managed_cts(fsroot, ctids):
    """The GPU CTs pvetune manages: ``ctids`` when given, else every CT whose config passes NVIDIA devices."""
    if ctids:
        return set(ctids)
    if not fsroot.exists(lxcgpu_fix.LXC_LINK):
        return set()
    found, _skipped = lxcgpu.list_cts(fsroot, lxcgpu_fix.ct_config_dir(fsroot))
    managed = set()
    for ctid, path in found.items():
        try:
            if lxcgpu.passes_nvidia(ct_config.parse_ct_config(fsroot.read_bytes(path), path)):
                managed.add(ctid)
        except FsError:
            pass  # unreadable: not known to be pvetune's, so it counts as another guest
    return managed


def read_guests(fsroot, runner, ctids):
    """Running guests other than the GPU CTs pvetune manages (``pct list``, ``qm list``; a tool that is not installed
    lists nothing)."""
    managed = managed_cts(fsroot, ctids)
    guests = []
    for tool, parse in (("pct", guest_list.parse_pct_list), ("qm", guest_list.parse_qm_list)):
        if runner.which(tool) is None:
            continue
        guests += [g for g in _parsed(parse, _run(runner, tool, ["list"])[1], "%s list" % tool)
                   if g["status"] == "running" and not (g["kind"] == "ct" and g["vmid"] in managed)]
    return guests


def read_cluster(fsroot, runner, leaving=(), ctids=()):
    """Everything gate_decision() judges.  ``node`` is corosync's name for this node (the hostname when standalone)."""
    path, conf = read_conf(fsroot)
    out = {"conf_path": path, "conf": conf, "quorum": None, "leaving": sorted(set(leaving)), "ha": None}
    if conf is None:
        out["node"] = os.uname()[1].split(".")[0] if fsroot.live else None
        out["cluster_name"] = None
    else:
        out["quorum"] = read_quorum(runner)
        try:
            out["node"] = local_node(conf, out["quorum"], path)["name"]
        except ValueError as exc:
            raise GateError(str(exc))
        out["cluster_name"] = conf["cluster_name"]
        out["ha"] = read_ha(runner)
    out["ceph"] = read_ceph(fsroot, runner, out["node"]) if out["node"] else None
    out["guests"] = read_guests(fsroot, runner, ctids)
    return out


def load_state(fsroot):
    """What enter did (STATE_FILE), or {} when it did nothing or never ran."""
    if not fsroot.isfile(STATE_FILE):
        return {}
    try:
        state = json.loads(fsroot.read_text(STATE_FILE))
    except (ValueError, FsError) as exc:
        raise GateError("%s: %s" % (STATE_FILE, exc))
    if not isinstance(state, dict):
        raise GateError("%s: not a JSON object" % STATE_FILE)
    return state


def save_state(fsroot, state):
    real = fsroot.path(STATE_FILE)
    _makedirs(os.path.dirname(real))
    _atomic_write(real, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode("utf-8"), 0o644)


def clear_state(fsroot):
    real = fsroot.path(STATE_FILE)
    if os.path.lexists(real):
        os.unlink(real)


class Waiter:
    """Bounded polling: ``until(probe, what)`` calls ``probe() -> (done, seen)`` every ``poll`` s."""

    def __init__(self, timeout, poll, sleep=time.sleep, clock=time.monotonic):
        self.timeout, self.poll, self.sleep, self.clock = timeout, poll, sleep, clock

    def until(self, probe, what):
        deadline = self.clock() + self.timeout
        while True:
            done, seen = probe()
            if done:
                return seen
            if self.clock() >= deadline:
                raise GateError("waited %s s for %s; last seen: %s" % (self.timeout, what, seen))
            self.sleep(self.poll)


def enter(fsroot, runner, cluster, run_id, waiter):
    """Before the reboot (the decision allowed it): HA maintenance and noout.  Returns the actions taken."""
    node, decision_plan, actions = cluster["node"], cluster["decision"]["plan"], []
    state = {"run_id": run_id, "node": node, "maintenance": False, "noout": None, "osds": []}
    if "ha-maintenance" in decision_plan:
        _run(runner, "ha-manager", ["crm-command", "node-maintenance", "enable", node])
        state["maintenance"] = True
        save_state(fsroot, state)
        actions.append("ha-manager crm-command node-maintenance enable %s" % node)

        def moved():
            status = _parsed(ha_status.parse_ha_status, _run(runner, "ha-manager", ["status"])[1], "ha-manager status")
            left = ha_status.services_on(status, node)
            return (status["lrm"].get(node) == "maintenance mode" and not left,
                    "lrm %s: %s; still on it: %s" % (node, status["lrm"].get(node), ", ".join(
                        "%s (%s)" % (s["sid"], s["state"]) for s in left) or "none"))
        actions.append("HA services moved away: " + waiter.until(moved, "the HA services to leave %s" % node))
    if "ceph-noout" in decision_plan:
        osds = ["osd.%d" % i for i in cluster["ceph"]["osds"]]
        rc, _out, err = runner.run("ceph", ["osd", "add-noout"] + osds)
        if rc == EINVAL and "add-noout" in (err or ""):   # a release before add-noout (Luminous): the global flag
            _run(runner, "ceph", ["osd", "set", "noout"])
            state["noout"], actions = "global", actions + ["ceph osd set noout (this release has no add-noout)"]
        elif rc != 0:
            raise GateError("ceph osd add-noout %s exited %d: %s" % (" ".join(osds), rc, excerpt(err)))
        else:
            state["noout"], actions = "osds", actions + ["ceph osd add-noout %s" % " ".join(osds)]
        state["osds"] = cluster["ceph"]["osds"]
        save_state(fsroot, state)
    return actions


def _member_now(runner, node_id):
    rc, out, err = runner.run("corosync-quorumtool", ["-s"])
    if rc not in QUORATE_RC:
        return False, "corosync-quorumtool -s exited %d: %s" % (rc, excerpt(err or out, 120))
    try:
        quorum = parse_quorumtool(out)
    except ValueError as exc:
        return False, str(exc)
    ok = quorum["quorate"] and quorum["local"]["nodeid"] == node_id
    return ok, "quorate %s, %d of %d votes, local node id %d" % (
        quorum["quorate"], quorum["total_votes"], quorum["expected_votes"], quorum["local"]["nodeid"])


def _pmxcfs_ready(fsroot, node):
    if not fsroot.isfile(MEMBERS):
        return False, "%s missing (pve-cluster not running)" % MEMBERS
    try:
        members = json.loads(fsroot.read_text(MEMBERS))
    except (ValueError, FsError) as exc:
        return False, "%s: %s" % (MEMBERS, exc)
    if not isinstance(members, dict) or members.get("nodename") != node:
        return False, "%s does not name this node %s" % (MEMBERS, node)
    probe = "/etc/pve/nodes/%s/.pvetune-write-probe" % node
    try:
        real = fsroot.path(probe)
        with open(real, "wb") as handle:
            handle.write(b"pvetune\n")
        os.unlink(real)
    except (OSError, FsError) as exc:
        return False, "/etc/pve does not take a write (%s): no quorum yet?" % exc
    return True, "pmxcfs serves /etc/pve and takes writes"


def rejoin(fsroot, runner, waiter):
    """After the reboot: quorum, pmxcfs, Ceph.  Returns the actions/waits done."""
    path, conf = read_conf(fsroot)
    state, actions = load_state(fsroot), []
    if conf is None:
        return ["standalone host: no quorum to wait for"]
    node = state.get("node")
    if node is None:
        quorum = waiter.until(lambda: _quorum_or_none(runner), "corosync-quorumtool -s to answer")
        node = local_node(conf, quorum, path)["name"]
    ids = [n["nodeid"] for n in conf["nodes"] if n["name"] == node]
    if not ids:
        raise GateError("%s names node %s, which %s does not list" % (STATE_FILE, node, path))
    node_id = ids[0]
    back = waiter.until(lambda: _member_now(runner, node_id), "%s to be a quorate member" % node)
    actions.append("in the quorum again: " + back)
    actions.append(waiter.until(lambda: _pmxcfs_ready(fsroot, node), "pmxcfs to serve a writable /etc/pve"))
    if state.get("noout"):
        osds = state["osds"]

        def osds_up():
            up = _parsed(ceph_json.parse_osd_dump, _run(runner, "ceph", ["osd", "dump", "--format", "json"])[1],
                         "ceph osd dump")["up"]
            down = [i for i in osds if not up.get(i)]
            return not down, "down: %s" % (", ".join("osd.%d" % i for i in down) or "none")
        actions.append("OSDs up (%s)" % waiter.until(osds_up, "OSDs %s to come up" % osds))
        if state["noout"] == "global":
            _run(runner, "ceph", ["osd", "unset", "noout"])
            actions.append("ceph osd unset noout")
        else:
            _run(runner, "ceph", ["osd", "rm-noout"] + ["osd.%d" % i for i in osds])
            actions.append("ceph osd rm-noout %s" % " ".join("osd.%d" % i for i in osds))
        state["noout"] = None
        save_state(fsroot, state)

        def clean():
            status = _parsed(ceph_json.parse_status, _run(runner, "ceph", ["status", "--format", "json"])[1],
                             "ceph status")
            states = ", ".join("%s %d" % kv for kv in sorted(status["states"].items()))
            return ceph_json.all_clean(status), "%d of %d PGs active+clean (%s)" % (
                status["clean_pgs"], status["num_pgs"], states)
        actions.append(waiter.until(clean, "the PGs to be active+clean"))
    return actions


def _quorum_or_none(runner):
    try:
        return True, read_quorum(runner)
    except GateError as exc:
        return False, str(exc)


def release(fsroot, runner):
    """After the post-reboot gates passed: leave HA maintenance if enter put the node there; forget the state."""
    state, actions = load_state(fsroot), []
    if state.get("noout"):
        raise GateError("%s says noout is still set for OSDs %s: rejoin did not finish" % (STATE_FILE, state["osds"]))
    if state.get("maintenance"):
        _run(runner, "ha-manager", ["crm-command", "node-maintenance", "disable", state["node"]])
        actions.append("ha-manager crm-command node-maintenance disable %s" % state["node"])
    if state:
        clear_state(fsroot)
    return actions


def decide(fsroot, runner, leaving, ctids, running_guests):
    cluster = read_cluster(fsroot, runner, leaving, ctids)
    cluster["decision"] = gate_decision(cluster, running_guests)
    return cluster


_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9.-]{0,62}\Z")
STATES = ("check", "enter", "rejoin", "release")


def validate(params):
    """The module's inputs, before any command runs; ValueError naming the option."""
    for name in params["leaving"]:
        if not _NAME.match(name):
            raise ValueError("leaving: %r is not a node name" % name)
    for ctid in params["ctids"]:
        if not 100 <= ctid <= 999999999:
            raise ValueError("ctids: %r is not a CT id (100-999999999)" % ctid)
    if params["timeout"] < 1 or params["poll"] < 1:
        raise ValueError("timeout and poll must be at least 1 s")


def summary(cluster):
    """The decision as the module returns it (without the raw command outputs)."""
    decision = cluster["decision"]
    return {"standalone": cluster["conf"] is None, "cluster_name": cluster["cluster_name"], "node": cluster["node"],
            "allowed": decision["allowed"], "refusals": decision["refusals"], "quorum": decision["quorum"],
            "counted_gone": decision["counted_gone"], "plan": decision["plan"], "guests": cluster["guests"],
            "ceph": cluster["ceph"], "ha_services_on_node": ha_status.services_on(cluster["ha"], cluster["node"])
            if cluster["ha"] else []}


def run_gate(fsroot, runner, params, check_mode, waiter):
    """(failed, result) of one module call; GateError and bad input become a failure naming the cause."""
    result = {"changed": False, "actions": [], "state": params["state"]}
    try:
        validate(params)
        if params["state"] in ("check", "enter"):
            cluster = decide(fsroot, runner, params["leaving"], params["ctids"], params["running_guests"])
            result["cluster"] = summary(cluster)
            allowed = cluster["decision"]["allowed"]
            verdict = ("may reboot: " + cluster["decision"]["quorum"]["reason"] if allowed else
                       "must not reboot: " + " | ".join(cluster["decision"]["refusals"]))
            result["msg"] = "%s %s" % (cluster["node"] or "this host", verdict)
            if params["state"] == "check" or not allowed:
                return params["state"] == "enter" and not allowed and not check_mode, result
            if check_mode:
                result["actions"] = ["would: %s" % step for step in cluster["decision"]["plan"]]
                result["changed"] = bool(result["actions"])
                return False, result
            result["actions"] = enter(fsroot, runner, cluster, params["run_id"], waiter)
        elif check_mode:
            result["msg"] = "check mode: no reboot happened, nothing to %s" % params["state"]
            return False, result
        elif params["state"] == "rejoin":
            result["actions"] = rejoin(fsroot, runner, waiter)
            result["msg"] = "back in the cluster"
        else:
            result["actions"] = release(fsroot, runner)
            result["msg"] = "released" if result["actions"] else "nothing to release"
        result["changed"] = any(not a.startswith(("standalone", "in the quorum", "pmxcfs", "OSDs up", "HA services"))
                                for a in result["actions"])
        return False, result
    except (GateError, ValueError, FsError) as exc:
        result["msg"] = str(exc)
        return True, result
