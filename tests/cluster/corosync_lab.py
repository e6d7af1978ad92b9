"""A real corosync cluster in podman containers, for tests that need the real ``corosync-quorumtool -s``.

    with CorosyncCluster(nodes=3) as lab:            # node1..node3, one container each, systemd as PID 1
        lab.quorumtool("node1")                      # stdout of corosync-quorumtool -s on node1
        lab.stop("node3")                            # corosync stopped there = node down; waits until
        lab.start("node3")                           # the others see it go (and come back)

    with CorosyncCluster(nodes=2, qdevice=True) as lab:   # + a corosync-qnetd arbiter, algorithm ffsplit
        lab.stop_qnetd(); lab.start_qnetd()

Each node runs the image built by scripts/build_images.sh (localhost/pvetune-host:bookworm has corosync,
corosync-qdevice and corosync-qnetd, their units masked and no corosync.conf).  The harness writes a corosync.conf in
the shape ``pvecm create`` / ``pvecm addnode`` leave it (totem cluster_name, transport knet, secauth with a shared
authkey, a nodelist with name / nodeid / quorum_votes / ring0_addr = the container's address, quorum provider
corosync_votequorum; with a qdevice the ``device`` section ``pvecm qdevice setup`` adds) to
/etc/corosync/corosync.conf and a copy to /etc/pve/corosync.conf (a plain directory here; pmxcfs on Proxmox), unmasks
corosync.service and starts it through systemd.  The qdevice certificates are made the way pvecm qdevice setup makes
them (src/PVE/CLI/pvecm.pm in proxmox/pve-cluster): corosync-qnetd-certutil -i on the arbiter, the CA certificate
to every node (corosync-qdevice-net-certutil -i -c), a certificate request from the first node signed by the
arbiter (-r, -s), the signed certificate turned into a PKCS#12 file (-M) and imported on the other nodes (-m).

The containers sit on podman's default bridge network (corosync's knet UDP 5405 and qnetd's TCP 5403 pass between
them, nothing else is published), are named ``pvetune-cl-<pid>-<lab number>-<node>``, carry the
label ``org.pvetune.lab=cluster`` and are removed by ``close()`` (the fixture's teardown), at interpreter exit (atexit),
and by the next lab when the process that started them is gone.  Nothing runs --privileged.

Environment: PVETUNE_CLUSTER_IMAGE (default localhost/pvetune-host:bookworm), CONTAINERS_CONF (default
scripts/containers.conf).
"""
import atexit
import base64
import concurrent.futures
import itertools
import json
import os
import re
import shlex
import subprocess
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.environ.get("PVETUNE_CLUSTER_IMAGE", "localhost/pvetune-host:bookworm")
PREFIX = "pvetune-cl-"
LABEL = "org.pvetune.lab=cluster"
OWNER_LABEL = "org.pvetune.lab.owner"
TAG_LABEL = "org.pvetune.lab.tag"
COLLECTIONS = os.path.join(TOP, "collections")
QNETD_DB = "/etc/corosync/qnetd/nssdb"
QDEVICE_DB = "/etc/corosync/qdevice/net/nssdb"
_LAB_NUMBER = itertools.count(1)


class LabError(RuntimeError):
    """The lab could not be set up or did not reach the state asked for (the message says what it saw)."""


def podman_env():
    return dict(os.environ, CONTAINERS_CONF=os.environ.get("CONTAINERS_CONF",
                                                           os.path.join(TOP, "scripts", "containers.conf")))


def podman(*args, check=True, timeout=120, stdin=None, text=True):
    """Run podman; (rc, stdout, stderr).  check: LabError on a non-zero exit."""
    proc = subprocess.run(["podman", *args], env=podman_env(), input=stdin, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=text)
    if check and proc.returncode != 0:
        raise LabError("podman %s: rc %d: %s" % (" ".join(args[:3]), proc.returncode,
                                                 (proc.stderr or proc.stdout or "")[-800:]))
    return proc.returncode, proc.stdout, proc.stderr


def remove_stale_labs():
    """Remove lab containers whose owner process is gone (a run killed before its atexit)."""
    _rc, out, _err = podman("ps", "-a", "--filter", "label=" + LABEL, "--format", "json", check=False)
    stale = []
    for item in json.loads(out or "[]"):
        owner = (item.get("Labels") or {}).get(OWNER_LABEL, "")
        if not owner.isdigit() or not os.path.exists("/proc/%s" % owner):
            stale.extend(item.get("Names") or [])
    if stale:
        podman("rm", "-f", "-i", "-t", "0", *stale, check=False)


def corosync_conf(cluster_name, nodes, qnetd=None, config_version=1):
    """corosync.conf as pvecm writes it; ``nodes``: [(name, nodeid, address)]; ``qnetd``: the arbiter's address."""
    lines = ["logging {", "  debug: off", "  to_syslog: yes", "}", "", "nodelist {"]
    for name, nodeid, address in nodes:
        lines += ["  node {", "    name: %s" % name, "    nodeid: %d" % nodeid, "    quorum_votes: 1",
                  "    ring0_addr: %s" % address, "  }"]
    lines += ["}", "", "quorum {", "  provider: corosync_votequorum"]
    if qnetd:
        lines += ["  device {", "    model: net", "    net {", "      algorithm: ffsplit", "      host: %s" % qnetd,
                  "      tls: on", "    }", "    votes: 1", "  }"]
    lines += ["}", "", "totem {", "  cluster_name: %s" % cluster_name, "  config_version: %d" % config_version,
              "  interface {", "    linknumber: 0", "  }", "  ip_version: ipv4-6", "  link_mode: passive",
              "  secauth: on", "  transport: knet", "  version: 2", "}", ""]
    return "\n".join(lines)


def _field(text, name):
    match = re.search(r"^%s:\s*(\S+)" % re.escape(name), text or "", re.M)
    return match.group(1) if match else None


class CorosyncCluster:
    """N corosync nodes (node1..nodeN) in containers, optionally two plus a qnetd arbiter (``qdevice=True``)."""

    def __init__(self, nodes=3, qdevice=False, cluster_name="pvetune-lab", image=IMAGE, timeout=60):
        if qdevice and nodes != 2:
            raise ValueError("the qdevice lab is two nodes and an arbiter (ffsplit, as pvecm sets it up)")
        self.cluster_name = cluster_name
        self.image = image
        self.timeout = timeout
        self.qdevice = qdevice
        self.tag = "%s%d-%d" % (PREFIX, os.getpid(), next(_LAB_NUMBER))   # several labs per process
        self.nodes = ["node%d" % i for i in range(1, nodes + 1)]
        self.nodeid = {name: i for i, name in enumerate(self.nodes, 1)}
        self.qnetd = "qnetd" if qdevice else None
        self.containers = {}          # node (or "qnetd") -> container name
        self.address = {}             # node (or "qnetd") -> IPv4 address on the podman bridge
        self.down = set()             # nodes whose corosync this lab stopped
        self.qnetd_down = False
        self.timings = {}
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------------------------------
    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def up(self):
        """Start the containers, write the configuration, start corosync (and qnetd/qdevice), wait for everyone."""
        t0 = time.monotonic()
        if podman("image", "exists", self.image, check=False)[0] != 0:
            raise LabError("image %s is missing: run scripts/build_images.sh bookworm" % self.image)
        remove_stale_labs()
        atexit.register(self.close)
        hosts = self.nodes + ([self.qnetd] if self.qnetd else [])
        for host in hosts:
            name = "%s-%s" % (self.tag, host)
            podman("rm", "-f", "-i", "-t", "0", name, check=False)
            podman("run", "-d", "--name", name, "--hostname", host, "--label", LABEL,
                   "--label", "%s=%s" % (TAG_LABEL, self.tag), "--label", "%s=%d" % (OWNER_LABEL, os.getpid()),
                   "--systemd=always", "--restart=no", self.image, "/sbin/init")
            self.containers[host] = name
        self._parallel(self._wait_booted, hosts)
        for host in hosts:
            self.address[host] = podman("inspect", "-f", "{{.NetworkSettings.IPAddress}}",
                                        self.containers[host])[1].strip()
            if not re.match(r"\A\d+\.\d+\.\d+\.\d+\Z", self.address[host]):
                raise LabError("%s has no bridge address: %r" % (host, self.address[host]))
        etc_hosts = "".join("%s %s\n" % (self.address[h], h) for h in hosts)
        self._parallel(lambda h: self.sh(h, "cat >> /etc/hosts", stdin=etc_hosts), hosts)
        self.timings["containers"] = time.monotonic() - t0
        # One authkey for the cluster (pvecm create: corosync-keygen), copied to every node.
        self.sh(self.nodes[0], "corosync-keygen >/dev/null")
        authkey = self.read_file(self.nodes[0], "/etc/corosync/authkey")
        conf = corosync_conf(self.cluster_name, [(n, self.nodeid[n], self.address[n]) for n in self.nodes],
                             qnetd=self.address.get(self.qnetd))

        def configure(node):
            if node != self.nodes[0]:
                self.write_file(node, "/etc/corosync/authkey", authkey, mode="0400")
            self.write_file(node, "/etc/corosync/corosync.conf", conf)
            self.write_file(node, "/etc/pve/corosync.conf", conf)
            self.sh(node, "systemctl unmask corosync.service >/dev/null 2>&1 && systemctl start corosync.service")
        if self.qnetd:
            self._setup_qnetd()
        self._parallel(configure, self.nodes)
        if self.qnetd:
            self._parallel(lambda n: self.sh(n, "systemctl unmask corosync-qdevice.service >/dev/null 2>&1 && "
                                                "systemctl start corosync-qdevice.service"), self.nodes)
        self.wait()
        self.timings["up"] = time.monotonic() - t0
        return self

    def close(self):
        """Remove every container of this lab (idempotent; also runs at exit)."""
        if self._closed:
            return
        self._closed = True
        names = list(self.containers.values())
        if names:
            podman("rm", "-f", "-i", "-t", "0", *names, check=False, timeout=120)
        # Also any of this lab's containers a failed start left unrecorded.
        podman("rm", "-f", "-t", "0", "--filter", "label=%s=%s" % (TAG_LABEL, self.tag), check=False, timeout=120)

    # -- access -------------------------------------------------------------------------------------------------
    def exec(self, node, argv, stdin=None, timeout=60):
        """Run ``argv`` in ``node``'s container: (rc, stdout, stderr)."""
        args = ["exec"] + (["-i"] if stdin is not None else []) + [self.containers[node]] + list(argv)
        return podman(*args, check=False, stdin=stdin, timeout=timeout)

    def sh(self, node, script, stdin=None, check=True, timeout=60):
        """``sh -c script`` in ``node``; stdout (LabError naming the script on a non-zero exit when ``check``)."""
        rc, out, err = self.exec(node, ["sh", "-c", script], stdin=stdin, timeout=timeout)
        if check and rc != 0:
            raise LabError("%s: %s: rc %d: %s" % (node, script, rc, (err or out)[-800:]))
        return out

    def read_file(self, node, path):
        """A file's bytes (base64 through the pipe, so binary files survive)."""
        return base64.b64decode(self.sh(node, "base64 -w0 %s" % shlex.quote(path)))

    def write_file(self, node, path, data, mode="0644"):
        """Write ``data`` (str or bytes) to ``path`` in ``node`` (parents made)."""
        if isinstance(data, str):
            data = data.encode()
        self.sh(node, "mkdir -p %s && base64 -d > %s && chmod %s %s" % (
            shlex.quote(os.path.dirname(path)), shlex.quote(path), mode, shlex.quote(path)),
            stdin=base64.b64encode(data).decode())

    def copy_in(self, node, src, dest):
        """``podman cp src node:dest`` (a file or a directory tree, e.g. the project for a module run)."""
        podman("cp", src, "%s:%s" % (self.containers[node], dest), timeout=300)

    def quorumtool(self, node, options=("-s",)):
        """stdout of ``corosync-quorumtool -s`` on ``node`` (its exit status says quorate or not; not checked).
        ``options=("-siH",)`` gives what ``pvecm status`` shows (addresses, hex node ids)."""
        return self.exec(node, ["corosync-quorumtool", *options])[1]

    def corosync_version(self):
        out = self.exec(self.nodes[0], ["dpkg-query", "-W", "-f", "${Version}", "corosync"])[1]
        return out.strip()

    @property
    def up_nodes(self):
        return [n for n in self.nodes if n not in self.down]

    def ansible_inventory(self, **host_vars):
        """An inventory (dict, YAML/JSON-ready) with the nodes as hosts over the containers.podman.podman
        connection; run ansible with ``ansible_env()`` (collections/ on ANSIBLE_COLLECTIONS_PATH, CONTAINERS_CONF)."""
        hosts = {node: dict({"ansible_connection": "containers.podman.podman",
                             "ansible_host": self.containers[node],
                             "ansible_python_interpreter": "/usr/bin/python3",
                             "ansible_become": False}, **host_vars) for node in self.nodes}
        return {"all": {"hosts": hosts, "vars": {"pvetune_cluster_name": self.cluster_name}}}

    @staticmethod
    def ansible_env(base=None):
        """``base`` (default os.environ) plus CONTAINERS_CONF and ANSIBLE_COLLECTIONS_PATH=collections/ (where
        scripts/install_collections.py puts containers.podman), for ansible / ansible-playbook / ansible_runner."""
        env = dict(base if base is not None else os.environ)
        env["CONTAINERS_CONF"] = podman_env()["CONTAINERS_CONF"]
        env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS
        return env

    # -- state changes ------------------------------------------------------------------------------------------
    def stop(self, node):
        """Stop corosync on ``node`` (the node is down for the cluster) and wait until the others see it."""
        self.sh(node, "systemctl stop corosync-qdevice.service corosync.service" if self.qnetd
                else "systemctl stop corosync.service")
        self.down.add(node)
        self.wait()

    def start(self, node):
        """Start corosync on ``node`` again and wait until every running node sees all of them."""
        self.sh(node, "systemctl start corosync.service" + (" corosync-qdevice.service" if self.qnetd else ""))
        self.down.discard(node)
        self.wait()

    def stop_qnetd(self):
        """Stop the arbiter and wait until the nodes no longer count its vote."""
        self.sh(self.qnetd, "systemctl stop corosync-qnetd.service")
        self.qnetd_down = True
        self.wait()

    def start_qnetd(self):
        self.sh(self.qnetd, "systemctl start corosync-qnetd.service")
        self.qnetd_down = False
        self.wait()

    def ensure_all_up(self):
        """Back to the start state (for a test that failed half-way)."""
        for node in sorted(self.down):
            self.start(node)
        if self.qnetd and self.qnetd_down:
            self.start_qnetd()

    def expected_state(self):
        """What every running node's corosync-quorumtool -s must show now: {"Nodes", "Total votes"}."""
        qvote = 1 if self.qnetd and not self.qnetd_down and self.up_nodes else 0
        return {"Nodes": str(len(self.up_nodes)), "Total votes": str(len(self.up_nodes) + qvote)}

    def wait(self, timeout=None):
        """Wait until every running node's view matches ``expected_state()`` (and membership of the nodes)."""
        want = self.expected_state()
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = {}
        while True:
            for node in self.up_nodes:
                out = self.quorumtool(node)
                state = {key: _field(out, key) for key in want}
                # Node ids in the membership table: decimal, or hex (0x...) with -H.
                members = {int(i, 0) for i in re.findall(r"^\s*(0x[0-9a-fA-F]+|\d+)\s+\d+\s+\S", out, re.M)}
                ids = {self.nodeid[n] for n in self.up_nodes}
                if self.qnetd and not self.qnetd_down:
                    ids.add(0)
                seen[node] = (state, members)
                if state != want or not ids <= members:
                    break
            else:
                return
            if time.monotonic() > deadline:
                raise LabError("corosync did not reach %s on %s within %ss; last seen %r; journal: %s" % (
                    want, self.up_nodes, timeout or self.timeout, seen, self._journal()))
            time.sleep(0.3)

    # -- internals ----------------------------------------------------------------------------------------------
    def _parallel(self, func, items):
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
            for _ in pool.map(func, items):
                pass

    def _wait_booted(self, host):
        deadline = time.monotonic() + 90
        state = ""
        while time.monotonic() < deadline:
            rc, out, _err = self.exec(host, ["systemctl", "is-system-running"])
            state = out.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.3)
        raise LabError("%s did not boot (systemctl is-system-running: %r)" % (host, state))

    def _setup_qnetd(self):
        """Certificates as pvecm qdevice setup makes them, then corosync-qnetd started on the arbiter."""
        arbiter, first, others = self.qnetd, self.nodes[0], self.nodes[1:]
        self.sh(arbiter, "[ -f %s/cert9.db ] || corosync-qnetd-certutil -i >/dev/null" % QNETD_DB)
        cacert = self.read_file(arbiter, QNETD_DB + "/qnetd-cacert.crt")

        def init_node(node):
            self.write_file(node, "/etc/pve/qnetd-cacert.crt", cacert)
            self.sh(node, "rm -rf %s && corosync-qdevice-net-certutil -i -c /etc/pve/qnetd-cacert.crt >/dev/null"
                    " && rm -f /etc/pve/qnetd-cacert.crt" % QDEVICE_DB)
        self._parallel(init_node, self.nodes)
        self.sh(first, "corosync-qdevice-net-certutil -r -n %s >/dev/null" % shlex.quote(self.cluster_name))
        crq = self.read_file(first, QDEVICE_DB + "/qdevice-net-node.crq")
        self.write_file(arbiter, "/tmp/qdevice-net-node.crq", crq)
        self.sh(arbiter, "corosync-qnetd-certutil -s -c /tmp/qdevice-net-node.crq -n %s >/dev/null"
                % shlex.quote(self.cluster_name))
        crt = "cluster-%s.crt" % self.cluster_name
        self.write_file(first, QDEVICE_DB + "/" + crt, self.read_file(arbiter, QNETD_DB + "/" + crt))
        self.sh(first, "corosync-qdevice-net-certutil -M -c %s/%s >/dev/null" % (QDEVICE_DB, shlex.quote(crt)))
        p12 = self.read_file(first, QDEVICE_DB + "/qdevice-net-node.p12")
        for node in others:
            self.write_file(node, "/etc/pve/qdevice-net-node.p12", p12)
            self.sh(node, "corosync-qdevice-net-certutil -m -c /etc/pve/qdevice-net-node.p12 >/dev/null"
                    " && rm -f /etc/pve/qdevice-net-node.p12")
        self.sh(arbiter, "systemctl unmask corosync-qnetd.service >/dev/null 2>&1 && "
                "systemctl start corosync-qnetd.service")

    def _journal(self):
        out = []
        for host in self.containers:
            rc, text, _err = self.exec(host, ["journalctl", "--no-pager", "-n", "15", "-u", "corosync",
                                              "-u", "corosync-qdevice", "-u", "corosync-qnetd"])
            out.append("--- %s ---\n%s" % (host, text[-1500:]))
        return "\n".join(out)
