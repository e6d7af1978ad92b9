"""One fix run at a time per host (pvetune_lock), proven with real concurrent ansible-playbook runs.

* Two fix.yml runs against the same scratch host: the second one, started while the first holds
  the lock, fails at the lock with a message naming the first run; it does not release the first
  run's lock; the first run completes.
* A run that fails later (update-grub fails) still releases its lock, so the next run goes through.
"""
import json
import os
import subprocess
import sys
import time

import hardening_lib as lib

LOCK = "run/pvetune/fix.lock"


def _start(workdir, inventory, run_id, extra=None, name=None):
    out = open(os.path.join(workdir, "lock-%s.log" % (name or run_id)), "w")
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "fix.yml", "-i", inventory,
            "-e", json.dumps(dict({"pvetune_run_id_override": run_id,
                                   "pvetune_report_dir": os.path.join(workdir, "lock-reports")}, **(extra or {})))]
    env = dict(os.environ, **lib.runner_env())
    env["ANSIBLE_STDOUT_CALLBACK"] = "json"
    proc = subprocess.Popen(args, cwd=lib.TOP, env=env, stdout=out, stderr=subprocess.STDOUT)
    proc.log = out.name
    return proc


def _holder(root):
    try:
        with open(os.path.join(root, LOCK)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _record(workdir, run_id, reports="lock-reports"):
    with open(os.path.join(workdir, reports, "fix-%s" % run_id, "pve-gpu01.json")) as handle:
        return json.load(handle)


def test_two_concurrent_runs_do_not_interleave(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "lock-concurrent")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "lock-inventory.yml"), {"pve-gpu01": root})
    first = _start(hardening_tmp, inventory, "lock-first")
    try:
        deadline = time.monotonic() + 120
        while (_holder(root) or {}).get("run_id") != "lock-first":
            assert first.poll() is None, open(first.log).read()[-3000:]
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.05)
        second = _start(hardening_tmp, inventory, "lock-second")
        assert second.wait(timeout=300) != 0
        first_still_running = first.poll() is None
        if first_still_running:
            assert (_holder(root) or {}).get("run_id") == "lock-first", "the failed run released the other's lock"
        assert first.wait(timeout=600) == 0, open(first.log).read()[-3000:]
    finally:
        for proc in (first,):
            if proc.poll() is None:
                proc.kill()
    assert first_still_running, "the runs did not overlap; the test proves nothing"
    record = _record(hardening_tmp, "lock-second")
    assert record["result"] == "failed"
    assert record["failure"]["task"].startswith("Take the host's pvetune lock")
    assert "another pvetune run (fix.yml or rollback.yml)" in record["failure"]["message"]
    assert "lock-first" in record["failure"]["message"]
    assert record["changes"] == dict.fromkeys(record["changes"]), "the refused run changed something"
    assert _record(hardening_tmp, "lock-first")["result"] in ("ok", "pending-reboot")
    assert _holder(root) is None, "the first run did not release its lock"
    lib.rmtree(root)


def test_another_invocation_with_the_same_run_id_is_refused(hardening_tmp):
    """Issue 33 (4): two invocations given the same pvetune_run_id_override (a change ticket) both passed the lock
    and both fixed the host. The lock now holds the invocation's token (drawn by the run check): a lock of run CHG-7
    taken by another invocation (here written as such, so the overlap is certain) refuses this one, and is kept."""
    root = lib.scratch("pve-gpu01", hardening_tmp, "lock-same-id")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "lock-inventory-4.yml"), {"pve-gpu01": root})
    held = {"run_id": "CHG-7", "owner": "op@ops2", "taken_at": time.time() - 30, "token": "0" * 32,
            "controller": "ops2 pid 4711"}
    os.makedirs(os.path.join(root, "run", "pvetune"))
    with open(os.path.join(root, LOCK), "w") as handle:
        json.dump(held, handle)
    before = lib.digest(root)
    refused = _start(hardening_tmp, inventory, "CHG-7")
    assert refused.wait(timeout=300) != 0
    record = _record(hardening_tmp, "CHG-7")
    assert record["result"] == "failed" and record["failure"]["task"].startswith("Take the host's pvetune lock")
    assert "another invocation of run CHG-7 by op@ops2 from ops2 pid 4711" in record["failure"]["message"], record
    assert lib.digest(root) == before and _holder(root) == held, "the refused invocation touched the host or its lock"
    lib.rmtree(root)


def test_lock_released_after_a_failed_run(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "lock-failure")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "lock-inventory-2.yml"), {"pve-gpu01": root})
    fail = os.path.join(root, ".pvetune", "fail", "update-grub")
    os.makedirs(os.path.dirname(fail))
    open(fail, "w").close()
    failed = _start(hardening_tmp, inventory, "lock-fails")
    assert failed.wait(timeout=600) != 0
    record = _record(hardening_tmp, "lock-fails")
    assert record["result"] == "failed" and "update-grub" in record["failure"]["message"], record["failure"]
    assert _holder(root) is None, "a failed run left its lock behind"
    os.unlink(fail)
    again = _start(hardening_tmp, inventory, "lock-after")
    assert again.wait(timeout=600) == 0, open(again.log).read()[-3000:]
    assert _holder(root) is None
    lib.rmtree(root)


def test_a_record_that_cannot_be_written_still_releases_the_lock(hardening_tmp):
    """Issue 33 (3): the record step failing (here fix-<run id> exists as a file) skipped the release, and every
    later run was refused 'another pvetune fix run holds the lock' though none ran. An unusable report directory
    itself is refused by the run check before any host is touched."""
    root = lib.scratch("pve-gpu01", hardening_tmp, "lock-norecord")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "lock-inventory-3.yml"), {"pve-gpu01": root})
    before = lib.digest(root)
    not_a_dir = os.path.join(hardening_tmp, "reports-file")
    open(not_a_dir, "w").close()
    refused = _start(hardening_tmp, inventory, "lock-refused", {"pvetune_report_dir": not_a_dir})
    assert refused.wait(timeout=300) != 0
    log = open(refused.log).read()
    assert 'pvetune_report_dir \\"%s\\" cannot be created' % not_a_dir in log, log[-3000:]
    assert lib.digest(root) == before, "a refused run touched the host"
    os.makedirs(os.path.join(hardening_tmp, "lock-reports"), exist_ok=True)
    open(os.path.join(hardening_tmp, "lock-reports", "fix-lock-norecord"), "w").close()  # in the record's way
    failed = _start(hardening_tmp, inventory, "lock-norecord")
    assert failed.wait(timeout=600) != 0
    log = open(failed.log).read()
    assert "its record could not be written" in log and "lock was released" in log, log[-3000:]
    assert _holder(root) is None, "a run whose record failed left its lock behind"
    lib.rmtree(root)
