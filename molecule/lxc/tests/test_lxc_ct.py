"""Scenario `lxc`: CT 101 is a real LXC container; the kernel's device cgroup decides what it may open.

The evidence of the earlier steps (/var/lib/pvetune-sim/evidence.json, written by
`pvetune-sim ct-open --record`) and the live state after the last reboot.
"""
import json
import re

ROOT = "/srv/pvetune-sim"
LXCPATH = ROOT + "/var/lib/lxc"


def evidence(host):
    return json.loads(host.file("/var/lib/pvetune-sim/evidence.json").content_string)


def current_uvm(host):
    return json.loads(host.file("/run/pvetune-sim/boot.json").content_string)["majors"]["nvidia-uvm"]


def test_each_step_saw_what_the_device_cgroup_decided(host):
    ev = evidence(host)
    # The allow lines carry trailing comments (prepare.yml): the kernel reads the rule and ignores the rest, and the
    # fix changes the major only, the comment stays byte for byte (issue 13).
    expected = {
        # step: (open result, host node, CT 101's uvm allow line)
        "before-fix": ("EPERM", "509:0", "c 511:* rwm # Die 511 anpassen"),
        "after-check": ("EPERM", "509:0", "c 511:* rwm # Die 511 anpassen"),
        "after-fix": ("ENXIO", "509:0", "c 509:* rwm # Die 511 anpassen"),
        "control-reboot": ("EPERM", "510:0", "c 509:* rwm # Die 511 anpassen"),
        "reboot": ("ENXIO", "510:0", "c 510:* rwm # Die 511 anpassen"),
    }
    for step, (result, node, allow) in expected.items():
        assert step in ev, "no evidence for step %s" % step
        seen = ev[step]
        assert (seen["result"], seen["host_node"]) == (result, node), (step, seen)
        assert "lxc.cgroup2.devices.allow: %s" % allow in seen["allow_lines"], (step, seen["allow_lines"])
        assert "lxc.cgroup2.devices.allow: c 195:* rwm # Die 195 anpassen" in seen["allow_lines"], step


def test_ct_is_a_real_running_lxc_container(host):
    assert host.check_output("lxc-info -P %s -n 101 -s -H", LXCPATH) == "RUNNING"
    pid = host.check_output("lxc-info -P %s -n 101 -p -H", LXCPATH)
    assert host.check_output("readlink /proc/%s/ns/pid", pid) != host.check_output("readlink /proc/1/ns/pid")
    assert host.check_output("cat /proc/%s/comm", pid) == "pvetune-ct-init"


def test_ct_opens_the_uvm_node_of_this_boot(host):
    major = current_uvm(host)
    assert major == 510
    assert host.check_output("stat -c '%%t:%%T' %s/dev/nvidia-uvm", ROOT) == "%x:0" % major
    assert host.check_output("/usr/local/sbin/pvetune-sim ct-open 101 /dev/nvidia-uvm") == "ENXIO"


def test_the_kernel_enforces_the_ct_config(host):
    """The running CT's v1 devices cgroup holds exactly the rule the Proxmox config's cgroup2 line names
    (the real-LXC pct adds the v1 twin because this machine runs cgroup v1)."""
    major = current_uvm(host)
    conf = host.file(ROOT + "/etc/pve/lxc/101.conf").content_string.split("\n[", 1)[0]
    assert re.findall(r"^lxc\.cgroup2\.devices\.allow: c (\d+):\* rwm # Die (?:195|511) anpassen$", conf, re.M) == [
        "195", str(major)]
    running = host.file(LXCPATH + "/101/config").content_string
    assert "lxc.cgroup.devices.allow = c %d:* rwm # Die 511 anpassen" % major in running.splitlines()
    if host.file("/sys/fs/cgroup/devices").is_directory:
        pid = host.check_output("lxc-info -P %s -n 101 -p -H", LXCPATH)
        cgroup = host.check_output("sed -n 's/^[0-9]*:devices://p' /proc/%s/cgroup", pid)
        rules = host.file("/sys/fs/cgroup/devices%s/devices.list" % cgroup).content_string.splitlines()
        assert "c %d:* rwm" % major in rules
        assert "c 509:* rwm" not in rules and "c 511:* rwm" not in rules


def test_boot_unit_fixed_the_config_before_the_guests_started(host):
    lxc_gpu_done = int(host.check_output("systemctl show -P ExecMainExitTimestampMonotonic pvetune-lxc-gpu.service"))
    guests_start = int(host.check_output("systemctl show -P ExecMainStartTimestampMonotonic pve-guests.service"))
    assert 0 < lxc_gpu_done <= guests_start
    journal = host.check_output("journalctl -b -o cat -u pvetune-lxc-gpu.service")
    assert "c 509:* rwm" in journal and "c 510:* rwm" in journal, journal
    # pve-guests started the CT in this boot: the CT got the node without anyone running a playbook.
    guests = json.loads(host.file("/run/pvetune-sim/guests.json").content_string)
    boot_id = json.loads(host.file("/run/pvetune-sim/boot.json").content_string)["boot_id"]
    assert guests["boot_id"] == boot_id and guests["cts"]["101"].startswith("start: exit 0")
    state = json.loads(host.file(ROOT + "/var/lib/pvetune/nvidia-majors.json").content_string)
    assert state["history"][-1]["source"] == "pvetune-boot"
    assert state["current"]["nvidia-uvm"] == 510


# -- CT 101's runtime state as the audit reads it (side_effect.yml kept the audits) ------------------------------------
CT_LIBS = "/usr/lib/x86_64-linux-gnu"
# Tree name (Proxmox's v2 layout) <- (v1 controller, real file): what the real-LXC pct binds on a cgroup v1 machine.
V1_AS_V2 = (("cpuset.cpus.effective", "cpuset", "cpuset.effective_cpus"), ("cpuset.cpus", "cpuset", "cpuset.cpus"),
            ("memory.max", "memory", "memory.limit_in_bytes"), ("cgroup.procs", "cpuset", "cgroup.procs"))


def kept_audit(host, name):
    return {r["id"]: r for r in json.loads(host.file("/var/lib/pvetune-sim/%s.json" % name).content_string)}


def ct_item(result, name="CT 101"):
    items = [i for i in result["items"] if i["name"] == name]
    assert len(items) == 1, result
    return items[0]


def ct_pid(host):
    return host.check_output("lxc-info -P %s -n 101 -p -H", LXCPATH)


def real_cgroup_dirs(host, pid):
    """{v1 controller: the running CT's real cgroup directory} from /proc/<pid>/cgroup."""
    dirs = {}
    for line in host.file("/proc/%s/cgroup" % pid).content_string.splitlines():
        _, ctls, path = line.split(":", 2)
        for ctl in ctls.split(","):
            if ctl in ("cpuset", "memory"):
                dirs[ctl] = "/sys/fs/cgroup/%s%s" % (ctl, path.rstrip("/"))
    return dirs


def host_module_version(host):
    text = host.file(ROOT + "/proc/driver/nvidia/version").content_string
    return re.search(r"x86_64 +([0-9]+(?:\.[0-9]+)+) ", text).group(1)


def test_the_audit_read_this_running_ct(host):
    """The kept audit saw the CT that runs now (same init), not the seed's simulated CT (init 4127)."""
    pid = ct_pid(host)
    evidence = kept_audit(host, "audit-after-reboot")["lxc.resources"]["evidence"]
    assert "1 GPU CTs: 101 (running, init %s)" % pid in evidence, evidence
    assert pid != "4127"
    assert not host.file(ROOT + "/sys/fs/cgroup/lxc/101/ns").exists   # the demo's simulated cgroup is gone


def test_the_kernel_holds_the_ct_limits(host):
    """CT 101's real v1 cgroup holds what its Proxmox config names (lxc.cgroup2.cpuset.cpus: 0, the raw
    lxc.cgroup2.memory.max after `memory: 65536`: the last write wins)."""
    dirs = real_cgroup_dirs(host, ct_pid(host))
    assert host.check_output("cat %s/cpuset.cpus", dirs["cpuset"]) == "0"
    assert host.check_output("cat %s/cpuset.effective_cpus", dirs["cpuset"]) == "0"
    assert int(host.check_output("cat %s/memory.limit_in_bytes", dirs["memory"])) == 128 << 30


def test_tree_cgroup_files_are_the_real_ones(host):
    """The tree's sys/fs/cgroup/lxc/101 files are bind mounts of the CT's real cgroup files (same inode, same bytes)."""
    pid = ct_pid(host)
    dirs = real_cgroup_dirs(host, pid)
    for tree_name, ctl, real in V1_AS_V2:
        tree_file = "%s/sys/fs/cgroup/lxc/101/%s" % (ROOT, tree_name)
        real_file = "%s/%s" % (dirs[ctl], real)
        assert host.check_output("stat -c %%d:%%i %s", tree_file) == host.check_output("stat -c %%d:%%i %s", real_file)
        if tree_name == "cgroup.procs":   # the init's sleep child changes every second: the init is in it
            assert pid in host.check_output("cat %s", tree_file).split()
        else:
            assert host.check_output("cat %s", tree_file) == host.check_output("cat %s", real_file)
    for absent in ("cpu.max", "cpu.weight", "memory.swap.max"):   # no same-format v1 file
        assert not host.file("%s/sys/fs/cgroup/lxc/101/%s" % (ROOT, absent)).exists


def test_lxc_resources_shows_configured_and_real_effective_values(host):
    pid = ct_pid(host)
    dirs = real_cgroup_dirs(host, pid)
    eff_cpus = host.check_output("cat %s/cpuset.effective_cpus", dirs["cpuset"])
    eff_mib = int(host.check_output("cat %s/memory.limit_in_bytes", dirs["memory"])) >> 20
    result = kept_audit(host, "audit-after-reboot")["lxc.resources"]
    item = ct_item(result)
    assert result["status"] == "warn" and item["status"] == "warn", item
    # configured (the CT config) ; effective (the CT's cgroup, read through the tree)
    assert item["current"] == ("cores 16, cpuset 0, cpulimit 0, memory 65536, swap 0; effective CPUs %s, quota max, "
                               "memory.max %d MiB, swap.max max" % (eff_cpus, eff_mib)), item["current"]
    assert item["message"] == ("CPUs %s (node 0), none on node 1 of its GPUs: set lxc.cgroup2.cpuset.cpus: 0-127 "
                               "(the CPUs of nodes 0-1)" % eff_cpus), item["message"]
    # The memory minimum (16 GiB per GPU, 8 GPUs) passes on the kernel's limit; the config's memory alone fails it.
    assert eff_mib >= 8 * 16384 > 65536


def test_nvidia_stack_reads_the_cts_real_root(host):
    pid = ct_pid(host)
    version = host_module_version(host)
    # The CT's real root (the kernel's /proc/<pid>/root) holds the user-space driver of the host module ...
    real = "/proc/%s/root%s" % (pid, CT_LIBS)
    names = host.check_output("ls %s", real).split()
    wanted = {"libcuda.so.%s" % version, "libnvidia-ml.so.%s" % version, "libcuda.so.1", "libnvidia-ml.so.1"}
    assert wanted <= set(names)
    assert host.check_output("lxc-attach -P %s -n 101 -- readlink %s/libcuda.so.1", LXCPATH, CT_LIBS) == \
        "libcuda.so.%s" % version
    # ... and the tree's /proc/<pid>/root is that root (same inodes), not a copy
    tree = "%s/proc/%s/root%s" % (ROOT, pid, CT_LIBS)
    for name in ("libcuda.so.%s" % version, "libnvidia-ml.so.%s" % version):
        assert host.check_output("stat -c %%d:%%i %s/%s", tree, name) == \
            host.check_output("stat -c %%d:%%i %s/%s", real, name)
    assert host.check_output("cat %s/proc/%s/status", ROOT, pid).split("\n")[0] == \
        host.check_output("cat /proc/%s/status", pid).split("\n")[0]
    result = kept_audit(host, "audit-after-reboot")["nvidia.stack"]
    item = ct_item(result)
    assert result["status"] == "pass" and item["status"] == "pass", result
    assert item["current"] == version
    assert item["message"] == "libcuda.so.1 / libnvidia-ml.so.1 point to %s (/proc/%s/root)" % (version, pid)


def test_nvidia_stack_fails_on_the_older_driver_inside_the_ct(host):
    """side_effect.yml renamed the libraries inside the running CT to 570.172.08, audited, and undid it."""
    version = host_module_version(host)
    result = kept_audit(host, "audit-ct-driver-mismatch")["nvidia.stack"]
    item = ct_item(result)
    assert result["status"] == "fail" and item["status"] == "fail", result
    assert item["current"] == "570.172.08"
    assert item["message"].startswith("libcuda.so.1 / libnvidia-ml.so.1 point to 570.172.08, the host's kernel module "
                                      "is %s: " % version), item["message"]
    # undone: the CT loads the host's version again
    assert host.check_output("readlink /proc/%s/root%s/libnvidia-ml.so.1", ct_pid(host), CT_LIBS) == \
        "libnvidia-ml.so.%s" % version
