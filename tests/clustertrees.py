"""Simulated Proxmox clusters of test trees for the cluster gate (tests/standins/cluster-sim).

    cluster = make_cluster(tmp_path, ["pve-a", "pve-b", "pve-c"], ha_services=[("vm:300", "pve-a")])
    cluster.trees["pve-a"]       # a tree whose stand-ins see the shared cluster.json
    cluster.set_up("pve-c", False); cluster.state()["ceph"]; cluster.calls("pve-a")

Each tree gets what a Proxmox VE node has: /etc/hostname, /etc/pve/corosync.conf in the layout pvecm writes,
/etc/pve/.members (pmxcfs), /etc/pve/nodes/<node>/, optionally /etc/pve/ceph.conf; the stand-ins go into
.pvetune/bin and .pvetune/cluster.json is a symlink to the one state file of the cluster.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from scratch_host import install_standins


def corosync_conf(name, nodes, qdevice=None, two_node=False):
    lines = ["logging {", "  debug: off", "  to_syslog: yes", "}", "", "nodelist {"]
    for node in nodes:
        lines += ["  node {", "    name: %s" % node["name"], "    nodeid: %d" % node["nodeid"],
                  "    quorum_votes: %d" % node["votes"], "    ring0_addr: %s" % node["addr"], "  }"]
    lines += ["}", "", "quorum {", "  provider: corosync_votequorum"]
    if qdevice:
        lines += ["  device {", "    model: net", "    net {", "      algorithm: ffsplit", "      host: 10.10.0.250",
                  "      tls: on", "    }", "    votes: %d" % qdevice["votes"], "  }"]
    if two_node:
        lines.append("  two_node: 1")
    lines += ["}", "", "totem {", "  cluster_name: %s" % name, "  config_version: 4", "  interface {",
              "    linknumber: 0", "  }", "  ip_version: ipv4-6", "  link_mode: passive", "  secauth: on",
              "  version: 2", "}", ""]
    return "\n".join(lines)


class Cluster:
    def __init__(self, base, state_path, trees):
        self.base, self.state_path, self.trees = base, state_path, trees

    def state(self):
        with open(self.state_path) as handle:
            return json.load(handle)

    def write(self, state):
        with open(self.state_path, "w") as handle:
            json.dump(state, handle, indent=1)

    def set_up(self, name, up=True):
        state = self.state()
        for node in state["nodes"]:
            if node["name"] == name:
                node["up"] = up
        self.write(state)

    def calls(self, name, tool=None):
        path = os.path.join(self.trees[name], ".pvetune", "calls.log")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            calls = [json.loads(line) for line in handle if line.strip()]
        # Without ceph's --connect-timeout N (every gate call has it), so tests read the command itself.
        calls = [c[:1] + c[3:] if c[1:2] == ["--connect-timeout"] else c for c in calls]
        return [c for c in calls if tool is None or c[0] == tool]


def add_node(tree, name, state_path, conf_text):
    """Make ``tree`` (a new directory or a scratch host) node ``name`` of the cluster whose state is ``state_path``."""
    tree = str(tree)
    for sub in ("etc/pve/nodes/%s" % name, ".pvetune"):
        os.makedirs(os.path.join(tree, sub), exist_ok=True)
    with open(os.path.join(tree, "etc", "hostname"), "w") as handle:
        handle.write(name + "\n")
    with open(os.path.join(tree, "etc", "pve", "corosync.conf"), "w") as handle:
        handle.write(conf_text)
    state = json.load(open(state_path))
    nodelist = {n["name"]: {"id": n["nodeid"], "online": int(n["up"]), "ip": n["addr"]} for n in state["nodes"]}
    with open(os.path.join(tree, "etc", "pve", ".members"), "w") as handle:
        json.dump({"nodename": name, "version": 9, "cluster": {"name": state["name"], "version": 4,
                                                               "nodes": len(nodelist), "quorate": 1},
                   "nodelist": nodelist}, handle, indent=1)
    if state.get("ceph") is not None:
        with open(os.path.join(tree, "etc", "pve", "ceph.conf"), "w") as handle:
            handle.write("[global]\n\tfsid = 5f6c0d2e-0000-4000-8000-000000000001\n")
        for osd in state["ceph"]["osds"]:  # the data directory ceph-volume mounts for each OSD the node runs
            if osd["host"] == name:
                os.makedirs(os.path.join(tree, "var", "lib", "ceph", "osd", "ceph-%d" % osd["id"]), exist_ok=True)
    install_standins(tree)
    link = os.path.join(tree, ".pvetune", "cluster.json")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(state_path, link)


def make_cluster(base, names, qdevice=None, two_node=False, ha_services=(), osds=None, vms=None, trees=None,
                 name="gpu-cluster"):
    """A cluster of one-vote nodes ``names``; ``osds`` {node: [ids]} adds Ceph; ``trees`` {node: existing tree}."""
    base = str(base)
    os.makedirs(base, exist_ok=True)
    nodes = [{"name": n, "nodeid": i, "votes": 1, "addr": "10.10.0.%d" % i, "up": True}
             for i, n in enumerate(names, 1)]
    state = {"name": name, "two_node": two_node, "nodes": nodes,
             "qdevice": {"votes": 1, "up": True} if qdevice else None,
             "ha": {"services": [{"sid": s, "node": n, "state": "started"} for s, n in ha_services],
                    "maintenance": [], "move_after": 2},
             "ceph": None if osds is None else {
                 "health": "HEALTH_OK", "num_pgs": 128, "add_noout": True, "global_noout": False, "scrubbing": 3,
                 "mons": list(names), "mons_down": [],
                 "osds": [{"id": i, "host": n, "up": True, "noout": False} for n, ids in sorted(osds.items())
                          for i in ids], "not_ok_to_stop": [], "unclean_after_rm_noout": 0},
             "vms": vms or {}}
    state_path = os.path.join(base, "cluster.json")
    with open(state_path, "w") as handle:
        json.dump(state, handle, indent=1)
    conf = corosync_conf(name, nodes, state["qdevice"], two_node)
    out = {}
    for n in names:
        out[n] = str((trees or {}).get(n) or os.path.join(base, n))
        add_node(out[n], n, state_path, conf)
    return Cluster(base, state_path, out)
