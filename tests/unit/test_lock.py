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


TOKEN_A, TOKEN_B = "a" * 32, "b" * 32


def test_two_invocations_with_one_run_id_are_two_runs(tmp_path):
    """Issue 33 (4): two fix runs given the same pvetune_run_id_override both passed the lock."""
    first = lock(tmp_path, "CHG-1", token=TOKEN_A, controller="ops1 pid 100", owner="op@ops1")
    assert first["changed"] is True and first["holder"]["controller"] == "ops1 pid 100"
    assert lock(tmp_path, "CHG-1", token=TOKEN_A)["changed"] is False          # a later task of the same invocation
    other = lock(tmp_path, "CHG-1", token=TOKEN_B, controller="ops2 pid 7")
    assert other["failed"] is True
    assert "another invocation of run CHG-1 by op@ops1 from ops1 pid 100" in other["msg"], other["msg"]
    # The other invocation's release leaves the lock alone; the holder's releases it.
    assert lock(tmp_path, "CHG-1", token=TOKEN_B, state="absent")["changed"] is False
    assert json.loads((tmp_path / "run/pvetune/fix.lock").read_text())["token"] == TOKEN_A
    assert lock(tmp_path, "CHG-1", token=TOKEN_A, state="absent")["changed"] is True
    assert not (tmp_path / "run/pvetune").exists()


def test_a_lock_without_a_token_is_matched_by_run_id(tmp_path):
    """A lock written before tokens existed (or by a caller with none) is still its run's."""
    lock(tmp_path, "run-a")
    assert lock(tmp_path, "run-a", token=TOKEN_A)["changed"] is False
    assert lock(tmp_path, "run-a", token=TOKEN_A, state="absent")["changed"] is True


def _announce(root, pid, run_id, started="4242"):
    """A pvetune module process that runs (proc/<pid>/stat under the root) and announced itself."""
    (root / "proc" / str(pid)).mkdir(parents=True)
    # The name (field 2) may hold spaces and ')'; the start time is field 22.
    (root / "proc" / str(pid) / "stat").write_text(
        "%d (python3 (x) y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 %s 20 21\n" % (pid, started))
    busy_dir = root / "run" / "pvetune"
    busy_dir.mkdir(parents=True, exist_ok=True)
    (busy_dir / ("busy.%d" % pid)).write_text(json.dumps({"pid": pid, "run_id": run_id, "what": "writing 3 path(s)",
                                                          "started": "4242"}))


def test_a_stale_lock_is_not_broken_while_a_module_of_a_run_still_changes_the_host(tmp_path):
    """Issue 33 (4): a killed controller leaves its module running on the host (setsid); breaking its lock would let
    a second run write beside it."""
    path = tmp_path / "run/pvetune/fix.lock"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run_id": "old", "owner": "x", "taken_at": time.time() - 100000}))
    _announce(tmp_path, 31337, "old")
    res = lock(tmp_path, "new", break_stale=True)
    assert res["failed"] is True
    assert "pid 31337 (run old, writing 3 path(s))" in res["msg"] and "not broken while it runs" in res["msg"]
    assert json.loads(path.read_text())["run_id"] == "old"
    # The pid now belongs to another process (another start time): the module is gone, the break goes through.
    (tmp_path / "proc/31337/stat").write_text("31337 (bash) S" + " 0" * 18 + " 9999 0\n")
    assert lock(tmp_path, "new", break_stale=True)["changed"] is True


def test_an_announcement_lives_while_the_change_is_written_and_leaves_nothing(tmp_path):
    import os
    from ansible.module_utils.pvetune.core import busy
    from ansible.module_utils.pvetune.core.fsroot import FsRoot
    fsroot = FsRoot(str(tmp_path))
    (tmp_path / "proc" / str(os.getpid())).mkdir(parents=True)
    (tmp_path / "proc" / str(os.getpid()) / "stat").write_text("1 (p) S" + " 0" * 18 + " 77 0\n")
    with busy.Announcement(fsroot, "run-x", "writing 1 path(s)"):
        seen = busy.live(fsroot)
        assert seen == [{"pid": os.getpid(), "run_id": "run-x", "what": "writing 1 path(s)"}]
        assert busy.live(fsroot, own_pid=os.getpid()) == []
    assert not (tmp_path / "run").exists()     # the directories it created are gone with it
    assert busy.live(fsroot) == []


def test_the_next_write_sweeps_the_announcement_a_killed_module_left(tmp_path):
    from ansible.module_utils.pvetune.core import busy
    from ansible.module_utils.pvetune.core.fsroot import FsRoot
    fsroot = FsRoot(str(tmp_path))
    _announce(tmp_path, 555, "killed-run")
    __import__("shutil").rmtree(str(tmp_path / "proc" / "555"))     # SIGKILL: the process is gone, its file is not
    assert busy.live(fsroot) == [] and busy.announced(fsroot) == [555]
    with busy.Announcement(fsroot, "run-y", "writing 1 path(s)"):
        assert busy.announced(fsroot) == [__import__("os").getpid()]
    assert not (tmp_path / "run/pvetune").exists()
