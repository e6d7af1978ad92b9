# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``ceph ... --format json`` outputs the cluster gate reads, as data.

* ``ceph osd ls-tree --format json <host>``: the ids of the OSDs under that CRUSH host, ``[0, 1, 2]``;
* ``ceph osd metadata --format json``: what each OSD reported when it last started, ``[{"id": 0, "hostname":
  "pve1.example.lan", ...}]`` (its host's name as the daemon saw it, whatever its CRUSH host bucket is called);
* ``ceph osd dump --format json``: ``{"flags": "noout,sortbitwise,...", "osds": [{"osd": 0, "up": 1, "in": 1}]}``;
* ``ceph status --format json``: ``{"health": {"status": "HEALTH_OK"}, "pgmap": {"num_pgs": 129,
  "pgs_by_state": [{"state_name": "active+clean", "count": 129}]}, "quorum_names": ["pve1", "pve2"]}`` (the keys
  Luminous and later print);
* ``ceph osd ok-to-stop <ids> [--max N] --format json`` (Pacific and later, ceph PR 39455): ``{"ok_to_stop": true,
  "osds": [0, 1, 5], "num_ok_pgs": 163, "num_not_ok_pgs": 0, ...}``, printed on stdout whether the answer is yes
  (exit 0) or no (EBUSY); with ``--max`` the mgr grows the set from the first OSD up its CRUSH tree, sibling by
  sibling, while the whole set stays ok to stop (DaemonServer::_maximize_ok_to_stop_set).

Every parser raises ValueError naming the command for output it cannot read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def _load(text, command):
    try:
        return json.loads(text or "")
    except ValueError:
        raise ValueError("%s printed no JSON: %r" % (command, (text or "")[:80]))


def parse_ls_tree(text):
    data = _load(text, "ceph osd ls-tree")
    if not isinstance(data, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in data):
        raise ValueError("ceph osd ls-tree: not a list of OSD ids: %r" % (text or "")[:80])
    return sorted(data)


def parse_osd_metadata(text):
    """{id: hostname} of the OSDs whose metadata names a host (an OSD that never started has none)."""
    data = _load(text, "ceph osd metadata")
    try:
        if not isinstance(data, list):
            raise TypeError(type(data).__name__)
        return {int(m["id"]): str(m["hostname"]) for m in data if m.get("hostname")}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ValueError("ceph osd metadata: not a list of {id, hostname}: %r" % (text or "")[:80])


def parse_mon_names(text):
    """``ceph mon dump --format json``: the monitors' names (Proxmox names a node's monitor after the node)."""
    data = _load(text, "ceph mon dump")
    try:
        return sorted(str(m["name"]) for m in data["mons"])
    except (KeyError, TypeError):
        raise ValueError("ceph mon dump: no 'mons' list of {name}")


def parse_osd_dump(text):
    """{"flags": [...], "up": {id: bool}}."""
    data = _load(text, "ceph osd dump")
    try:
        flags = [f for f in str(data.get("flags", "")).split(",") if f]
        up = {int(o["osd"]): bool(o["up"]) for o in data["osds"]}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ValueError("ceph osd dump: no 'osds' list of {osd, up}")
    return {"flags": flags, "up": up}


def parse_status(text):
    """{"health": "HEALTH_OK" | ..., "num_pgs", "clean_pgs" (active+clean, scrubbing or not), "states"}."""
    data = _load(text, "ceph status")
    try:
        health = data["health"]["status"]
        pgmap = data["pgmap"]
        states = {s["state_name"]: int(s["count"]) for s in pgmap.get("pgs_by_state", [])}
        num_pgs = int(pgmap["num_pgs"])
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ValueError("ceph status: no health.status or pgmap.num_pgs/pgs_by_state")
    clean = sum(count for state, count in states.items() if is_clean(state))
    quorum = data.get("quorum_names")
    if quorum is not None and not (isinstance(quorum, list) and all(isinstance(m, str) for m in quorum)):
        raise ValueError("ceph status: quorum_names is not a list of monitor names")
    return {"health": health, "num_pgs": num_pgs, "clean_pgs": clean, "states": states, "quorum_names": quorum}


def parse_ok_to_stop(text):
    """{"ok": bool, "osds": [ids]}: the set of OSDs the answer is about (with --max, the grown set)."""
    data = _load(text, "ceph osd ok-to-stop")
    try:
        ok, osds = data["ok_to_stop"], data["osds"]
        if not isinstance(ok, bool) or not all(isinstance(i, int) and not isinstance(i, bool) for i in osds):
            raise TypeError()
    except (KeyError, TypeError):
        raise ValueError("ceph osd ok-to-stop: no ok_to_stop (bool) and osds (ids): %r" % (text or "")[:80])
    return {"ok": ok, "osds": sorted(osds)}


# A PG state is "+"-joined flags; active and clean with only routine work on top (scrubbing, snaptrim) is clean.
ROUTINE = ("active", "clean", "scrubbing", "deep", "snaptrim", "snaptrim_wait", "scrub_scheduling")


def is_clean(state):
    flags = set(state.split("+"))
    return {"active", "clean"} <= flags and flags <= set(ROUTINE)


def all_clean(status):
    return status["clean_pgs"] == status["num_pgs"]
