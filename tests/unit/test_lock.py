"""pvetune_lock: one fix run per host."""
import json
import time

import pytest
from modharness import run_module


def lock(root, run_id, **kw):
    args = {"root": str(root), "run_id": run_id}
    args.update(kw)
    return run_module("pvetune_lock", args)


def test_second_run_is_refused_with_a_clear_message(tmp_path):
    first = lock(tmp_path, "run-a", owner="op@ctl1")
    assert first["changed"] is True
    again = lock(tmp_path, "run-a")
    assert again["changed"] is False and not again.get("failed")
    other = lock(tmp_path, "run-b", owner="op@ctl2")
    assert other["failed"] is True
    assert "run-a" in other["msg"] and "op@ctl1" in other["msg"]
    assert json.loads((tmp_path / "run/pvetune/fix.lock").read_text())["run_id"] == "run-a"


def test_release_only_by_the_holder(tmp_path):
    lock(tmp_path, "run-a")
    res = lock(tmp_path, "run-b", state="absent")
    assert res["changed"] is False
    assert (tmp_path / "run/pvetune/fix.lock").exists()
    res = lock(tmp_path, "run-a", state="absent")
    assert res["changed"] is True
    assert not (tmp_path / "run/pvetune/fix.lock").exists()
    assert lock(tmp_path, "run-b")["changed"] is True


def test_stale_lock_is_broken_only_when_asked(tmp_path):
    path = tmp_path / "run/pvetune/fix.lock"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run_id": "old", "owner": "x", "taken_at": time.time() - 100000}))
    res = lock(tmp_path, "new")
    assert res["failed"] and "stale" in res["msg"]
    res = lock(tmp_path, "new", break_stale=True)
    assert res["changed"] is True
    assert json.loads(path.read_text())["run_id"] == "new"


def test_check_mode_writes_nothing(tmp_path):
    res = run_module("pvetune_lock", {"root": str(tmp_path), "run_id": "r1"}, check_mode=True)
    assert res["changed"] is False and "would be taken" in res["msg"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kw", [
    {"run_id": "a; reboot"}, {"run_id": "../x"}, {"run_id": "--force"}, {"run_id": "x" * 100},
    {"run_id": "ok", "path": "/etc/passwd"}, {"run_id": "ok", "path": "/run/../etc/x"},
    {"run_id": "ok", "owner": "a\nb"},
])
def test_bad_input_rejected(tmp_path, kw):
    args = {"root": str(tmp_path)}
    args.update(kw)
    res = run_module("pvetune_lock", args)
    assert res["failed"] is True
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("content,what", [
    (b"", "(unreadable lock file: empty)"), (b"null", "(unreadable lock file: a JSON NoneType, not an object)"),
    (b"[]", "(unreadable lock file: a JSON list, not an object)"), (b"{garbage", "(unreadable lock file: not JSON)"),
    (b'{"taken_at": "soon"}', "(unreadable lock file: no run id)"),
    (b'{"run_id": "old", "taken_at": "NaN"}', "old")])
def test_a_lock_file_pvetune_did_not_write_is_named_and_dated_by_its_file(tmp_path, content, what):
    """Issue 33 (4): null, [] or nothing in the lock file gave 'run None', an AttributeError text or 'since 1970'."""
    import os
    path = tmp_path / "run/pvetune/fix.lock"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    os.utime(str(path), (time.time() - 60, time.time() - 60))
    res = lock(tmp_path, "run-b")
    assert res["failed"] is True
    assert "run %s by" % what in res["msg"], res["msg"]
    assert "1970" not in res["msg"] and "None" not in res["msg"].replace("NoneType", "")
    assert " (6" in res["msg"] and " s ago)" in res["msg"]   # its age from the file: about 60 s
    assert path.read_bytes() == content                         # left as it was
    # Old enough and asked to: broken like any stale lock.
    os.utime(str(path), (time.time() - 100000, time.time() - 100000))
    assert lock(tmp_path, "run-b", break_stale=True)["changed"] is True
