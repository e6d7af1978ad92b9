"""Two fix runs with different tags on one host (issue 28): `--tags lxc` rewrites CT 101's device entries without
restarting it, then `--tags cpu` must complete. Its audit gate judges only the checks whose every fix tag it
selected (core/scope.py): the CPU driver and C-states need `cmdline` too and are out of scope, named in the record,
never a failure. CT 101 runs with the device rules of its last start until it restarts: the audit says
lxc.gpu_devices is pending (from Proxmox's /var/lib/lxc/101/config), the same in both runs, and both records and
health gates name it as waiting for a restart, not as broken.
"""
import glob
import json
import os

from conftest import run_playbook
from scratch_host import make_scratch
from treeinventory import write_inventory


def record(reports, run_index):
    runs = sorted(glob.glob(os.path.join(reports, "fix-*")))
    with open(os.path.join(runs[run_index], "pve-gpu01.json")) as handle:
        return json.load(handle)


def test_tags_lxc_then_tags_cpu_both_complete(tmp_path):
    root = make_scratch("pve-gpu01", str(tmp_path / "pve-gpu01"))
    inventory = str(write_inventory(tmp_path / "inventory.yml", {"pve-gpu01": root}))
    reports = str(tmp_path / "reports")
    runs = []
    for step, tags in (("lxc", "lxc"), ("cpu", "cpu")):
        (tmp_path / step).mkdir()
        runs.append(run_playbook(tmp_path / step, "fix.yml", inventory=inventory, cmdline="--tags " + tags,
                                 extravars={"pvetune_report_dir": reports}))
        assert runs[-1].rc == 0, runs[-1].stdout[-3000:]

    first, second = record(reports, 0), record(reports, 1)
    assert (first["result"], first["pending_ct_restart"], first["out_of_scope"]) == ("pending-ct-restart", [101], [])
    assert first["after"]["lxc.gpu_devices"] == second["before"]["lxc.gpu_devices"] == "pending"
    assert second["failure"] is None and second["tags"] == ["cpu"]
    assert second["pending_ct_restart"] == [101]  # its result: pending-reboot (the CPU driver), which outranks it
    assert {"id": "cpu.scaling_driver", "needs": ["cmdline"]} in second["out_of_scope"]
    assert second["after"]["cpu.scaling_driver"] == "fail"  # still failing, and not this run's to fix
    (gate,) = runs[1].results("Audit gate (what pvetune fixed passes, or waits for a reboot that was not allowed)")
    assert "out of scope for this run: cpu.scaling_driver needs --tags cmdline" in gate["res"]["msg"]
    ct101 = [t for t in second["health"] if t.get("ctid") == 101]
    assert ct101 and ct101[0]["status"] == "pending", ct101
    assert "CTs to restart (fixed config, old device rules): 101" in gate["res"]["msg"]
