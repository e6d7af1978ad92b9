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
