# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster gate's steps around a reboot (issue 14): read the cluster, enter, rejoin, release.

* ``read_cluster``: corosync.conf (through the root), ``corosync-quorumtool -s``, ``ha-manager status``, Ceph
  (cluster_ceph), ``pct list`` and ``qm list``.  cluster_gate.gate_decision() judges what it returns.
* ``enter`` (before the reboot): HA maintenance for the node, then wait until no HA service runs on it; noout for
  its OSDs.  What it did goes to STATE_FILE, which survives the reboot, so rejoin and release undo exactly that (and
  a later run finds what an interrupted one left).
* ``rejoin`` (after the reboot, before the LXC regeneration and the GPU gates): wait until the node is a quorate
  member again, pmxcfs serves /etc/pve (``.members`` names this node) and /etc/pve takes a write; the OSDs that were
  up are up again; then noout is cleared and the PGs are waited for until active+clean.
* ``release`` (after the gates): leave HA maintenance; the state file goes.

Commands run only through the Runner (stand-ins for a root other than /); every wait is bounded and fails naming
what it waited for and what it saw last.  What a step did before it failed stays in its ``Steps``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.module_utils.pvetune.cluster import ceph as cluster_ceph
from ansible.module_utils.pvetune.cluster.cmd import GateError, Steps, Waiter, parsed, run
from ansible.module_utils.pvetune.cluster.gate import gate_decision, local_node, wave_view
from ansible.module_utils.pvetune.concerns.lxcgpu import checks as lxcgpu
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.filewrite import atomic_write, makedirs
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import Runner
from ansible.module_utils.pvetune.formats import ct_config, guest_list, ha_status
from ansible.module_utils.pvetune.formats.corosync_conf import NODE_NAME, parse_corosync_conf
from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool

# /etc/pve/corosync.conf is the cluster's copy; while pmxcfs is down /etc/pve is empty, and corosync's own copy still
# says the node is clustered (a missing /etc/pve copy must not read as "standalone").
CONF_PATHS = ("/etc/pve/corosync.conf", "/etc/corosync/corosync.conf")
MEMBERS = "/etc/pve/.members"
STATE_FILE = "/var/lib/pvetune/cluster-gate.json"
QUORATE_RC = (0, 2)  # corosync-quorumtool -s: 0 quorate, 2 not quorate, 1 error


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
    return parsed(parse_quorumtool, run(runner, "corosync-quorumtool", ["-s"], QUORATE_RC)[1])


def read_ha(runner):
    """ha-manager status, or None where the HA stack is not installed (a host that is no Proxmox VE node)."""
    if runner.which("ha-manager") is None:
        return None
    return parsed(ha_status.parse_ha_status, run(runner, "ha-manager", ["status"])[1])


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


def read_guests(fsroot, runner, ctids, ha_moves=()):
    """Running guests other than the GPU CTs pvetune manages and the HA services that maintenance moves away
    (``ha_moves``: ``vm:<id>``/``ct:<id>``) (``pct list``, ``qm list``; a tool that is not installed lists nothing)."""
    managed = managed_cts(fsroot, ctids)
    guests = []
    for tool, parse in (("pct", guest_list.parse_pct_list), ("qm", guest_list.parse_qm_list)):
        if runner.which(tool) is None:
            continue
        guests += [g for g in parsed(parse, run(runner, tool, ["list"])[1])
                   if g["status"] == "running" and not (g["kind"] == "ct" and g["vmid"] in managed)
                   and "%s:%d" % (g["kind"], g["vmid"]) not in set(ha_moves)]
    return guests


def read_cluster(fsroot, runner, leaving=(), ctids=(), ceph_sets=False):
    """Everything gate_decision() judges.  ``node`` is corosync's name for this node (the hostname when standalone).
    ``ceph_sets``: also ask Ceph which other nodes may stop together with this one (the wave planner's discovery)."""
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
    members = [n["name"] for n in conf["nodes"]] if conf is not None and ceph_sets else ()
    out["ceph"] = cluster_ceph.read_ceph(fsroot, runner, out["node"], leaving, members) if out["node"] else None
    moves = [s["sid"] for s in ha_status.services_on(out["ha"], out["node"])] if out["ha"] else []
    out["guests"] = read_guests(fsroot, runner, ctids, moves)
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
    node, lists = state.get("node"), [state.get("osds", []), state.get("noout_osds", [])]
    if not isinstance(node, str) or not NODE_NAME.match(node) or state.get("noout") not in (None, "osds", "global") \
            or not all(isinstance(ids, list) and all(isinstance(i, int) and i >= 0 for i in ids) for ids in lists):
        raise GateError("%s: not the record pvetune writes (node, osds, noout); look at it, then remove it"
                        % STATE_FILE)
    return state


def save_state(fsroot, state):
    real = fsroot.path(STATE_FILE)
    makedirs(os.path.dirname(real))
    atomic_write(real, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode("utf-8"), 0o644)


def clear_state(fsroot):
    real = fsroot.path(STATE_FILE)
    if os.path.lexists(real):
        os.unlink(real)


def enter(fsroot, runner, cluster, run_id, waiter, steps, wait_ha=True):
    """Before the reboot (the decision allowed it): HA maintenance and noout, recorded in STATE_FILE as they happen.
    A record an interrupted run left is kept: what it set is still set and still to be undone.  ``wait_ha`` False:
    only enter HA maintenance; the rollout does that first for every node of a wave, so that the HA manager does not
    move a service onto another node of the same wave (best effort: it acts on each node's request when that node's
    LRM acknowledges it), and the next call (this run's record says maintenance is on) waits for the services to
    leave and sets noout."""
    node, plan = cluster["node"], cluster["decision"]["plan"]
    found = load_state(fsroot)
    ours = found.get("run_id") == run_id and found.get("node") == node
    if found and not ours:
        left = (found.get("run_id"), found.get("maintenance"), found.get("noout"))
        steps.saw("left over from run %s: maintenance %s, noout %s" % left)
    state = dict({"maintenance": False, "noout": None, "osds": []}, **found)
    state.update(run_id=run_id, node=node)
    # Entered by this run's first call and the LRM says so: no second request (one that the operator lifted since
    # is asked for again; the request is idempotent).
    entered = ours and state["maintenance"] and (cluster.get("ha") or {}).get("lrm", {}).get(node) == "maintenance mode"
    if "ha-maintenance" in plan and not entered:
        run(runner, "ha-manager", ["crm-command", "node-maintenance", "enable", node])
        state["maintenance"] = True
        save_state(fsroot, state)
        steps.did("ha-manager crm-command node-maintenance enable %s" % node)
    if not wait_ha:
        if found and not ours:   # a leftover record, now this run's: the next call does not say it again
            save_state(fsroot, state)
        return
    if "ha-maintenance" in plan:

        def moved():
            status = parsed(ha_status.parse_ha_status, run(runner, "ha-manager", ["status"])[1])
            left = ha_status.services_on(status, node)
            return (status["lrm"].get(node) == "maintenance mode" and not left,
                    "lrm %s: %s; still on it: %s" % (node, status["lrm"].get(node), ", ".join(
                        "%s (%s)" % (s["sid"], s["state"]) for s in left) or "none"))
        steps.saw("HA services moved away: " + waiter.until(moved, "the HA services to leave %s" % node))
    if "ceph-noout" in plan and not state["noout"]:
        state["noout"] = cluster_ceph.set_noout(runner, cluster["ceph"]["osds"], steps)
        # After the reboot only the OSDs that were up are waited for (one that was down stays down).
        state["osds"] = cluster["ceph"]["up_osds"]
        state["noout_osds"] = cluster["ceph"]["osds"]
        save_state(fsroot, state)


def _member_now(runner, node_id):
    quorum = read_quorum(runner)
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


def rejoin(fsroot, runner, waiter, steps):
    """After the reboot: quorum, pmxcfs, Ceph."""
    path, conf = read_conf(fsroot)
    state = load_state(fsroot)
    if conf is None:
        steps.saw("standalone host: no quorum to wait for")
        return
    node = state.get("node")
    if node is None:
        quorum = waiter.until(lambda: (True, read_quorum(runner)), "corosync-quorumtool -s to answer")
        node = local_node(conf, quorum, path)["name"]
    ids = [n["nodeid"] for n in conf["nodes"] if n["name"] == node]
    if not ids:
        raise GateError("%s names node %s, which %s does not list" % (STATE_FILE, node, path))
    steps.saw("in the quorum again: " + waiter.until(lambda: _member_now(runner, ids[0]),
                                                     "%s to be a quorate member" % node))
    steps.saw(waiter.until(lambda: _pmxcfs_ready(fsroot, node), "pmxcfs to serve a writable /etc/pve"))
    if state.get("noout"):
        cluster_ceph.wait_osds_up(runner, state["osds"], waiter, steps)
        cluster_ceph.clear_noout(runner, state["noout"], state.get("noout_osds", state["osds"]), steps)
        state["noout"] = None
        save_state(fsroot, state)
        cluster_ceph.wait_clean(runner, waiter, steps)


def release(fsroot, runner, steps):
    """After the post-reboot gates passed: leave HA maintenance if enter put the node there; forget the state."""
    state = load_state(fsroot)
    if state.get("noout"):
        raise GateError("%s says noout is still set for OSDs %s: rejoin did not finish (ceph osd rm-noout them once "
                        "the node is back)" % (STATE_FILE, state.get("noout_osds", state["osds"])))
    if state.get("maintenance"):
        run(runner, "ha-manager", ["crm-command", "node-maintenance", "disable", state["node"]])
        steps.did("ha-manager crm-command node-maintenance disable %s" % state["node"])
    if state:
        clear_state(fsroot)


def undo_first_call(fsroot, runner, run_id, steps):
    """A refusal after this run's first call (``wait_ha`` false) put the node into HA maintenance: leave it again,
    since no reboot follows and the rollout's release does not run for a refused host.  A record of another run is
    left as it is (its run undoes it)."""
    state = load_state(fsroot)
    if state.get("run_id") == run_id and state.get("maintenance") and not state.get("noout"):
        release(fsroot, runner, steps)


def decide(fsroot, runner, leaving, ctids, running_guests, ceph_sets=False):
    cluster = read_cluster(fsroot, runner, leaving, ctids, ceph_sets)
    cluster["decision"] = gate_decision(cluster, running_guests)
    return cluster


STATES = ("check", "enter", "rejoin", "release")


def validate(params):
    """The module's inputs, before any command runs; ValueError naming the option."""
    for name in params["leaving"]:
        if not NODE_NAME.match(name):
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
            if cluster["ha"] else [], "wave": wave_view(cluster)}


def cluster_gate(params, run_command, check_mode, diff):
    """pvetune_cluster_gate's one call: ``(failed, result, warnings)``.  A bad run id or root fails before anything
    is read; then run_gate with the Runner and a Waiter of the module's ``timeout`` and ``poll``."""
    try:
        if params["run_id"] is not None:
            validate_run_id(params["run_id"])
        fsroot = FsRoot(params["root"])
    except ValueError as exc:
        return True, {"msg": str(exc)}, []
    failed, result = run_gate(fsroot, Runner(fsroot, run_command), params, check_mode,
                              Waiter(params["timeout"], params["poll"]))
    return failed, result, []


def run_gate(fsroot, runner, params, check_mode, waiter):
    """(failed, result) of one module call; GateError and bad input become a failure naming the cause."""
    result = {"changed": False, "actions": [], "state": params["state"]}
    steps = Steps()
    try:
        validate(params)
        if params["state"] in ("check", "enter"):
            cluster = decide(fsroot, runner, params["leaving"], params["ctids"], params["running_guests"],
                             params.get("ceph_sets", False))
            result["cluster"] = summary(cluster)
            allowed = cluster["decision"]["allowed"]
            verdict = ("may reboot: " + cluster["decision"]["quorum"]["reason"] if allowed else
                       "must not reboot: " + " | ".join(cluster["decision"]["refusals"]))
            result["msg"] = "%s %s" % (cluster["node"] or "this host", verdict)
            if params["state"] == "enter" and not allowed and not check_mode:
                undo_first_call(fsroot, runner, params["run_id"], steps)
                result["actions"], result["changed"] = steps.actions, steps.changed
                return True, result
            if params["state"] == "check" or not allowed:
                return False, result
            if check_mode:
                result["actions"] = ["would: %s" % step for step in cluster["decision"]["plan"]]
                result["changed"] = bool(result["actions"])
                return False, result
            enter(fsroot, runner, cluster, params["run_id"], waiter, steps, params.get("wait_ha", True))
        elif check_mode:
            result["msg"] = "check mode: no reboot happened, nothing to %s" % params["state"]
            return False, result
        elif params["state"] == "rejoin":
            rejoin(fsroot, runner, waiter, steps)
            result["msg"] = "back in the cluster"
        else:
            release(fsroot, runner, steps)
            result["msg"] = "released" if steps.actions else "nothing to release"
        result["actions"], result["changed"] = steps.actions, steps.changed
        return False, result
    except (GateError, ValueError, FsError) as exc:
        # What was done before the failure is still in place (maintenance, noout): say so.
        result["actions"], result["changed"] = steps.actions, steps.changed
        left = load_left(fsroot)
        result["msg"] = str(exc) + (" (still in place from this gate: %s)" % left if left else "")
        return True, result


def load_left(fsroot):
    """What STATE_FILE says is still set (for a failure message), or ""."""
    try:
        state = load_state(fsroot)
    except GateError:
        return ""
    left = (["HA maintenance of %s" % state["node"]] if state.get("maintenance") else []) + (
        ["noout (%s) for OSDs %s" % (state["noout"], state.get("noout_osds", state["osds"]))] if state.get("noout")
        else [])
    return "; ".join(left)
