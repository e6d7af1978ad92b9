# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster gate's Ceph part: may this node's OSDs and monitor stop (together with the other nodes of the same
batch), noout around the reboot, and after it the wait until its OSDs are up and every PG is active+clean.

Every ``ceph`` call carries ``--connect-timeout`` so that a cluster without a monitor answers with an error instead
of hanging the gate.  ``ceph osd ok-to-stop`` exits 0 when stopping the OSDs keeps every PG available, EBUSY (16)
or EAGAIN (11) when not; ``ceph mon ok-to-stop`` the same for monitors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.cluster.cmd import GateError, excerpt, parsed, run
from ansible.module_utils.pvetune.formats import ceph_json

CEPH_CONFS = ("/etc/pve/ceph.conf", "/etc/ceph/ceph.conf")
OSD_DIR = "/var/lib/ceph/osd"
OSD_DIR_NAME = re.compile(r"[A-Za-z0-9_-]+-(\d+)\Z")
CONNECT_TIMEOUT = "30"
ENOENT, EINVAL = 2, 22


def ceph(runner, args, ok=(0,)):
    return run(runner, "ceph", ["--connect-timeout", CONNECT_TIMEOUT] + list(args), ok)


def _ok_to_stop(runner, kind, ids):
    rc, out, err = ceph(runner, [kind, "ok-to-stop"] + [str(i) for i in ids], ok=range(256))
    return rc == 0, "" if rc == 0 else "exit %d: %s" % (rc, excerpt(err or out))


def _crush_osds(runner, host):
    # No CRUSH bucket of that name (ENOENT): no OSD under that name.
    rc, out, _err = ceph(runner, ["osd", "ls-tree", "--format", "json", host], (0, ENOENT))
    return [] if rc == ENOENT else parsed(ceph_json.parse_ls_tree, out)


def _short(name):
    return name.split(".", 1)[0].lower()


def node_osds(crush, metadata, node):
    """The OSDs of ``node``: those under its CRUSH host bucket (``crush``, by the node's name) and those whose own
    metadata (``metadata``, {id: hostname}) names the node's host, short names compared: a CRUSH host named
    otherwise (an FQDN, a name an orchestrator sanitised) still finds them."""
    return sorted(set(crush) | {i for i, host in metadata.items() if _short(host) == _short(node)})


def local_osds(fsroot):
    """The OSD ids this node runs: ceph-volume activates each OSD at /var/lib/ceph/osd/<cluster>-<id>."""
    return sorted(int(m.group(1)) for m in (OSD_DIR_NAME.match(n) for n in fsroot.listdir(OSD_DIR)) if m)


def unfound_osds(own, running, node, metadata):
    """GateError's text when this node runs OSDs (``running``) that neither its CRUSH host nor the OSD metadata
    gives it: ok-to-stop would not ask about them and noout would not cover them."""
    missing = sorted(set(running) - set(own))
    if not missing:
        return ""
    named = ", ".join("osd.%d on %s" % (i, metadata[i]) for i in missing if i in metadata) or "no metadata"
    ids = ", ".join("osd.%d" % i for i in missing)
    return ("this node runs OSDs %s (%s/ceph-*), but neither the CRUSH host %s nor the OSDs' metadata (%s) names "
            "this node: ok-to-stop and noout would not cover them. Make the CRUSH host or the host name match the "
            "node name %s (ceph osd crush move, or hostname)" % (ids, OSD_DIR, node, named, node))


def mon_spare(mons, quorum_names):
    """How many more monitors may stop: those in quorum less a majority of the monmap (Paxos: a majority of all
    monitors must stay), or None when ``ceph status`` names no quorum (releases before Luminous)."""
    if quorum_names is None:
        return None
    return max(0, len(set(quorum_names) & set(mons)) - (len(mons) // 2 + 1))


def stop_set(runner, node, own_up, up, osds_of, members):
    """Ceph's own answer to "which other nodes may stop together with this one": ``ceph osd ok-to-stop <own up OSDs>
    --max <every up OSD>`` grows the set up the CRUSH tree while every PG stays available; the members (corosync
    names) whose up OSDs all made it into the set may stop with this node.  ({"with": [nodes], "why": text}); a
    release without ``--max`` (before Pacific) or an answer without JSON: this node alone."""
    total = sum(1 for is_up in up.values() if is_up)
    argv = ["osd", "ok-to-stop"] + [str(i) for i in own_up] + ["--max", str(total), "--format", "json"]
    rc, out, err = ceph(runner, argv, ok=range(256))
    try:
        answer = ceph_json.parse_ok_to_stop(out)
    except ValueError:
        return {"with": [node], "why": "ceph osd ok-to-stop --max gave no answer (exit %d: %s): this node alone"
                % (rc, excerpt(err or out))}
    if not answer["ok"]:   # it said yes a moment ago without --max: the cluster changed in between
        return {"with": [], "why": "ceph osd ok-to-stop %s says no" % " ".join(str(i) for i in own_up)}
    stopping = set(answer["osds"])
    others = []
    for member in sorted(set(members) - {node}):
        theirs = [i for i in osds_of(member) if up.get(i)]
        if theirs and set(theirs) <= stopping:
            others.append(member)
    return {"with": [node] + others, "why": "ceph osd ok-to-stop --max %d: %d OSD(s) may stop together (%s)" % (
        total, len(stopping), ", ".join([node] + others))}


def read_ceph(fsroot, runner, node, leaving=(), members=()):
    """None without a ceph.conf; else what gate_decision() judges: the node's OSDs (and which are up: only those are
    waited for after the reboot), whether they may stop together with the up OSDs of ``leaving``, the same for the
    monitors of this node and of ``leaving``, and the cluster's health.  With ``members`` (the cluster's corosync
    names; the wave planner's discovery) also which of them Ceph lets stop together with this node (``with``, see
    stop_set) and how many monitors may stop (``mon_spare``)."""
    if not any(fsroot.isfile(path) for path in CEPH_CONFS):
        return None
    status = parsed(ceph_json.parse_status, ceph(runner, ["status", "--format", "json"])[1])
    up = parsed(ceph_json.parse_osd_dump, ceph(runner, ["osd", "dump", "--format", "json"])[1])["up"]
    metadata = parsed(ceph_json.parse_osd_metadata, ceph(runner, ["osd", "metadata", "--format", "json"])[1])

    def osds_of(name):
        return node_osds(_crush_osds(runner, name), metadata, name)
    own = osds_of(node)
    unfound = unfound_osds(own, local_osds(fsroot), node, metadata)
    if unfound:
        raise GateError(unfound)
    peers = sorted({i for peer in sorted(set(leaving) - {node}) for i in osds_of(peer)})
    out = {"osds": own, "up_osds": [i for i in own if up.get(i)], "peer_osds": peers, "ok_to_stop": True, "why": "",
           "mons": [], "mon_ok_to_stop": True, "mon_why": "", "health": status["health"]}
    stopping = sorted(set(out["up_osds"]) | {i for i in peers if up.get(i)})
    if stopping:
        out["ok_to_stop"], out["why"] = _ok_to_stop(runner, "osd", stopping)
        out["stopping"] = stopping
    mons = parsed(ceph_json.parse_mon_names, ceph(runner, ["mon", "dump", "--format", "json"])[1])
    out["mons"] = [m for m in mons if m == node or m in set(leaving)]
    # A monitor already out of quorum takes nothing from the majority when its node stops.
    out["mon"] = node in mons and (status["quorum_names"] is None or node in status["quorum_names"])
    if node in mons:
        out["mon_ok_to_stop"], out["mon_why"] = _ok_to_stop(runner, "mon", out["mons"])
    if members:
        out["mon_spare"] = mon_spare(mons, status["quorum_names"])
        out["with"], out["with_why"] = None, "no up OSD on this node: Ceph's data does not hold it back"
        if out["up_osds"] and not out["ok_to_stop"]:
            out["with"], out["with_why"] = [], "ceph osd ok-to-stop says no for this node's own OSDs"
        elif out["up_osds"]:
            answer = stop_set(runner, node, out["up_osds"], up, osds_of, members)
            out["with"], out["with_why"] = answer["with"], answer["why"]
    return out


def set_noout(runner, osds, steps):
    """noout for ``osds`` (ceph osd add-noout, Luminous and later; the global flag where the command is unknown).
    Returns "osds" or "global"."""
    names = ["osd.%d" % i for i in osds]
    rc, _out, err = ceph(runner, ["osd", "add-noout"] + names, ok=range(256))
    if rc == EINVAL and "add-noout" in (err or ""):
        ceph(runner, ["osd", "set", "noout"])
        steps.did("ceph osd set noout (this release has no add-noout)")
        return "global"
    if rc != 0:
        raise GateError("ceph osd add-noout %s exited %d: %s" % (" ".join(names), rc, excerpt(err)))
    steps.did("ceph osd add-noout %s" % " ".join(names))
    return "osds"


def wait_osds_up(runner, osds, waiter, steps):
    def probe():
        up = parsed(ceph_json.parse_osd_dump, ceph(runner, ["osd", "dump", "--format", "json"])[1])["up"]
        down = [i for i in osds if not up.get(i)]
        return not down, "down: %s" % (", ".join("osd.%d" % i for i in down) or "none")
    steps.saw("OSDs up (%s)" % waiter.until(probe, "OSDs %s to come up" % osds))


def clear_noout(runner, kind, osds, steps):
    if kind == "global":
        ceph(runner, ["osd", "unset", "noout"])
        steps.did("ceph osd unset noout")
    else:
        ceph(runner, ["osd", "rm-noout"] + ["osd.%d" % i for i in osds])
        steps.did("ceph osd rm-noout %s" % " ".join("osd.%d" % i for i in osds))


def wait_clean(runner, waiter, steps):
    def probe():
        status = parsed(ceph_json.parse_status, ceph(runner, ["status", "--format", "json"])[1])
        states = ", ".join("%s %d" % kv for kv in sorted(status["states"].items()))
        return ceph_json.all_clean(status), "%d of %d PGs active+clean (%s)" % (
            status["clean_pgs"], status["num_pgs"], states)
    steps.saw(waiter.until(probe, "the PGs to be active+clean"))
