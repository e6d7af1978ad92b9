"""fix.yml --tags lxc with lxc_numa_pin on pve-gpu04 (CT 104 pinned to node 1, its GPUs on node 0): the cpuset line
is rewritten in place and nothing else changes, a second run changes nothing, the audit says pending until the CT
restarts, and rollback.yml puts the file back byte for byte.
"""
import json
import os

from conftest import run_playbook
from scratch_host import make_scratch
from treeinventory import write_inventory

CONF = "etc/pve/nodes/pve-gpu04/lxc/104.conf"


def play(tmp_path, step, playbook, inventory, **kwargs):
    """One private data dir per run: ansible-runner keeps a run's extravars in <dir>/env/ for the next one."""
    (tmp_path / step).mkdir()
    return run_playbook(tmp_path / step, playbook, inventory=inventory, **kwargs)


def test_numa_pin_through_fix_yml_then_again_then_rollback(tmp_path):
    root = make_scratch("pve-gpu04", str(tmp_path / "pve-gpu04"))
    inventory = write_inventory(tmp_path / "inventory.yml", {"pve-gpu04": root},
                                host_vars={"pve-gpu04": {"pvetune_policy": {"lxc_numa_pin": True}}})
    conf = os.path.join(root, CONF)
    lxc_dir = os.path.dirname(conf)
    before = {n: open(os.path.join(lxc_dir, n), "rb").read() for n in os.listdir(lxc_dir)}
    reports = str(tmp_path / "reports")

    run = play(tmp_path, "fix", "fix.yml", str(inventory), cmdline="--tags lxc",
               extravars={"pvetune_report_dir": reports})
    assert run.rc == 0, run.stdout[-3000:]
    after = {n: open(os.path.join(lxc_dir, n), "rb").read() for n in os.listdir(lxc_dir)}
    assert after[os.path.basename(CONF)] == before[os.path.basename(CONF)].replace(
        b"lxc.cgroup2.cpuset.cpus: 32-63,96-127", b"lxc.cgroup2.cpuset.cpus: 0-31,64-95")
    assert {n: b for n, b in after.items() if n != "104.conf"} == {n: b for n, b in before.items() if n != "104.conf"}

    again = play(tmp_path, "again", "fix.yml", str(inventory), cmdline="--tags lxc",
                 extravars={"pvetune_report_dir": reports})
    assert again.rc == 0, again.stdout[-3000:]
    assert again.stats()["changed"].get("pve-gpu04", 0) == 0
    assert open(conf, "rb").read() == after["104.conf"]

    audit = play(tmp_path, "audit", "audit.yml", str(inventory), extravars={"pvetune_report_dir": reports})
    doc = json.load(open(os.path.join(reports, "latest", "audit.json")))
    (res,) = [c for c in doc["hosts"][0]["checks"] if c["id"] == "lxc.resources"]
    ct104 = [i for i in res["items"] if i["name"] == "CT 104"][0]
    assert ct104["status"] == "pending" and "until the CT restarts" in ct104["message"], (audit.rc, ct104)

    back = play(tmp_path, "rollback", "rollback.yml", str(inventory))
    assert back.rc == 0, back.stdout[-3000:]
    assert {n: open(os.path.join(lxc_dir, n), "rb").read() for n in os.listdir(lxc_dir)} == before
