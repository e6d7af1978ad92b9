# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``ha-manager status`` as data (pve-ha-manager, src/PVE/CLI/ha_manager.pm)::

    quorum OK
    master pve1 (active, Wed Dec  2 10:00:00 2026)
    lrm pve1 (active, Wed Dec  2 10:00:01 2026)
    lrm pve2 (maintenance mode, Wed Dec  2 10:00:02 2026)
    service ct:100 (pve1, started)

A node whose LRM says "maintenance mode" is leaving (or has left) for maintenance; a service "runs" on a node in
every state in which it may run (not stopped, disabled, ignored or error: an error service stays where it is and
never moves).  Since pve-ha-manager 5.1.3 the lrm line carries the watchdog state after the LRM status
(``lrm pve2 (maintenance mode, watchdog standby, <time>)``): the status is always the first field.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_QUORUM = re.compile(r"^quorum\s+(.*?)\s*$")
_DAEMON = re.compile(r"^(master|lrm)\s+(\S+)\s+\((.*)\)\s*$")
_SERVICE = re.compile(r"^service\s+(\S+)\s+\(([^,()]+),\s*([^,()]+?)\s*(?:,.*)?\)\s*$")
# CRM states and ha-manager's display states (pve-ha-manager, tests/fixtures/realdata/cluster/FORMATS.md) in which
# nothing runs; "queued" and "request_start" may start any moment, so they count as running.
# "stopping" and "request_stop" still run on the node until they have stopped.
NOT_RUNNING = ("stopped", "disabled", "ignored", "ignore", "error", "not found", "deleting")


def parse_ha_status(text):
    """{"quorum_ok", "master", "lrm" {node: status}, "services" [{"sid", "node", "state"}]}; lines it does not
    know are skipped (ha-manager adds lines with --verbose); ValueError when it has no quorum line at all."""
    out = {"quorum_ok": None, "master": None, "lrm": {}, "services": []}
    for line in (text or "").splitlines():
        match = _QUORUM.match(line)
        if match:
            out["quorum_ok"] = match.group(1) == "OK"
            continue
        match = _DAEMON.match(line)
        if match:
            kind, node, detail = match.groups()
            status = detail.split(",")[0].strip()
            if kind == "master":
                out["master"] = {"node": node, "status": status}
            else:
                out["lrm"][node] = status
            continue
        match = _SERVICE.match(line)
        if match:
            out["services"].append({"sid": match.group(1), "node": match.group(2).strip(), "state": match.group(3)})
    if out["quorum_ok"] is None:
        raise ValueError("no 'quorum' line (not ha-manager status output?)")
    return out


def services_on(status, node):
    """The HA services that still run on ``node`` (or may: every state not in NOT_RUNNING)."""
    return [s for s in status["services"] if s["node"] == node and s["state"] not in NOT_RUNNING]
