"""GPU containers: their device allow lines match this boot's NVIDIA majors, and CUDA's node opens in them."""
import re

import pytest
from ansible.module_utils.pvetune.formats.proc_devices import NVIDIA_MAJOR
from fleetlib import proc_devices, skipped

# As LXC and the kernel's devices.allow parser read a rule: exactly one blank between the fields, then up to three
# access characters; what follows them (a trailing comment) is never read.
RULE = re.compile(r"^(?:(a)|([abc]) (\*|\d+):(\*|\d+) ([rwm]{3}|[rwm]{1,2}$).*)$")
FAMILY_KEY = {2: "lxc.cgroup2.devices.", 1: "lxc.cgroup.devices."}


def host_nodes(fleet):
    """{path: (major, minor)} of the character devices /dev/nvidia* and /dev/nvidia-caps/*."""
    out = fleet.run("stat -c '%%n|%%F|%%t|%%T' %s %s 2>/dev/null; true"
                    % (fleet.q("/dev/nvidia*"), fleet.q("/dev/nvidia-caps/*"))).stdout
    nodes = {}
    for line in out.splitlines():
        path, kind, major, minor = line.rsplit("|", 3)
        if kind == "character special file":
            nodes["/" + path[len(fleet.root):].lstrip("/") if not fleet.live else path] = (int(major, 16),
                                                                                          int(minor, 16))
    return nodes


def main_section(text):
    out = []
    for line in text.splitlines():
        if re.match(r"^\s*\[[^\]]+\]\s*$", line):
            break
        m = re.match(r"^\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*[:=]\s*(.*?)\s*$", line)
        if m and not line.lstrip().startswith("#"):
            out.append((m.group(1), m.group(2)))
    return out


def used_nodes(conf, nodes):
    """(nodes the CT binds through lxc.mount.entry, nodes passed with devN:, missing sources)."""
    mounted, devn, missing = {}, {}, []
    for key, value in conf:
        if key == "lxc.mount.entry":
            fields = value.split()
            if not fields or not fields[0].startswith("/dev/nvidia"):
                continue
            src = fields[0].rstrip("/")
            found = {p: n for p, n in nodes.items() if p == src or p.startswith(src + "/")}
            if found:
                mounted.update(found)
            else:
                missing.append(src)
        elif re.match(r"^dev\d+$", key):
            parts = value.split(",")
            path = next((p[5:] for p in parts if p.startswith("path=")), parts[0])
            if path.startswith("/dev/nvidia"):
                if path in nodes:
                    devn[path] = nodes[path]
                else:
                    missing.append(path)
    return mounted, devn, missing


def covered(rules, major, minor):
    access = set()
    for verdict, kind, rmaj, rmin, acc in rules:
        if kind == "a":
            access = set("rwm") if verdict == "allow" else set()
            continue
        if kind != "c" or rmaj not in ("*", str(major)) or rmin not in ("*", str(minor)):
            continue
        access = access | set(acc) if verdict == "allow" else access - set(acc)
    return {"r", "w"} <= access


def gpu_cts(fleet):
    configs = fleet.cat_files("/etc/pve/lxc/*.conf")
    nodes = host_nodes(fleet)
    out = {}
    for path, text in sorted(configs.items()):
        vmid = path.rsplit("/", 1)[1][:-5]
        conf = main_section(text)
        mounted, devn, missing = used_nodes(conf, nodes)
        if mounted or devn or missing:
            out[vmid] = {"conf": conf, "mounted": mounted, "devn": devn, "missing": missing}
    return out, nodes


@pytest.fixture
def lxc_state(fleet, policy):
    skipped(policy, "lxc.gpu_devices")
    if not policy["lxc_check"]:
        pytest.skip("policy lxc_check is false")
    if not fleet.exists("/etc/pve/lxc"):
        pytest.skip("no /etc/pve/lxc (not a Proxmox VE node, or pmxcfs not mounted)")
    cts, nodes = gpu_cts(fleet)
    if not cts:
        pytest.skip("no CT passes NVIDIA devices")
    return cts, nodes


def test_uvm_node_carries_the_driver_major(fleet, lxc_state):
    _cts, nodes = lxc_state
    registered = {name: major for major, name in proc_devices(fleet.read("/proc/devices")).items()}
    if "nvidia-uvm" not in registered:
        pytest.fail("nvidia-uvm is not in /proc/devices: the module is not loaded (CUDA cannot work)")
    node = nodes.get("/dev/nvidia-uvm")
    assert node is not None, "/dev/nvidia-uvm does not exist"
    assert node[0] == registered["nvidia-uvm"], "/dev/nvidia-uvm is %d:%d, nvidia-uvm is major %d" % (
        node[0], node[1], registered["nvidia-uvm"])


def test_gpu_ct_allow_lines_match_this_boot(fleet, lxc_state):
    """Every NVIDIA node a CT binds is allowed (rw) by the allow lines of the host's cgroup version,
    no NVIDIA allow line names a major no driver registers (a stale dynamic major), devN nodes exist."""
    cts, _nodes = lxc_state
    registered = proc_devices(fleet.read("/proc/devices"))
    version = fleet.cgroup_version()
    families = [version] if version else [2, 1]
    problems = []
    for vmid, ct in cts.items():
        for src in ct["missing"]:
            problems.append("CT %s: %s does not exist on the host" % (vmid, src))
        for family in families:
            prefix = FAMILY_KEY[family]
            rules = []
            for key, value in ct["conf"]:
                if key in (prefix + "allow", prefix + "deny"):
                    m = RULE.match(value)
                    if not m:
                        problems.append("CT %s: unparsable rule %s: %s" % (vmid, key, value))
                        continue
                    kind = m.group(1) or m.group(2)
                    rmaj, rmin, acc = m.group(3) or "*", m.group(4) or "*", m.group(5) or "rwm"
                    rules.append(("allow" if key.endswith("allow") else "deny", kind, rmaj, rmin, acc))
                    if (key.endswith("allow") and kind == "c" and rmaj != "*" and int(rmaj) != NVIDIA_MAJOR
                            and int(rmaj) not in registered):
                        problems.append("CT %s: '%s: %s' names major %s, which no driver registers in /proc/devices "
                                        "(stale)" % (vmid, key, value, rmaj))
            for path, (major, minor) in sorted(ct["mounted"].items()):
                if not covered(rules, major, minor):
                    problems.append("CT %s: %s (%d:%d) is bound into the CT but no %sallow line grants it"
                                    % (vmid, path, major, minor, prefix))
    assert not problems, "\n".join(problems)


def test_running_gpu_cts_open_nvidia_uvm(fleet, lxc_state):
    """The node CUDA's cuInit opens must open inside every running GPU CT (nvidia-smi never opens it)."""
    cts, _nodes = lxc_state
    pct = fleet.tool("pct")
    if pct is None:
        pytest.skip("no pct on this host")
    listing = fleet.check_output("%s list" % pct)
    running = {line.split()[0] for line in listing.splitlines()[1:] if len(line.split()) > 1
               and line.split()[1] == "running"}
    probed, failures = [], []
    for vmid, ct in sorted(cts.items()):
        uses_uvm = "/dev/nvidia-uvm" in ct["mounted"] or "/dev/nvidia-uvm" in ct["devn"]
        if vmid not in running or not uses_uvm:
            continue
        result = fleet.run("%s exec %s -- dd if=/dev/nvidia-uvm of=/dev/null bs=1 count=0" % (pct, vmid))
        probed.append(vmid)
        if result.rc != 0:
            failures.append("CT %s: exit %d: %s" % (vmid, result.rc, (result.stderr or result.stdout).strip()))
    if not probed:
        pytest.skip("no running CT uses /dev/nvidia-uvm")
    assert not failures, "\n".join(failures)
