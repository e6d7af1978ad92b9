"""CT configs on a filesystem that behaves like /etc/pve (tests/pmxcfs, FUSE over the tree's etc/pve).

* The test filesystem itself: rename-over works within it (as in pmxcfs) except in the ``strict``
  variant, chmod/chown other than pmxcfs' own values are EPERM, and without quorum every change is
  EACCES while reads work - so the tests below can fail.
* pvetune_lxc_gpu rewrites the stale CT config in place on ``quorate`` and on ``strict`` (no rename,
  chmod or chown at all): same inode, content fixed, per-run backup byte-equal to the original, no
  temporary file left, and the only changing operations on /etc/pve are write and truncate of that
  one file.
* Without quorum the fix fails with a message that says so and changes nothing: not the CT config,
  not pvetune's backups or manifest (the refusal comes before any write).
* fix.yml --tags lxc over a mounted tree does the same through Ansible.
"""
import errno
import json
import os

import hardening_lib as lib
import pmxcfs
import pytest

pytestmark = pytest.mark.skipif(pmxcfs.fuse_available() is not None, reason=str(pmxcfs.fuse_available()))

CT_REL = "etc/pve/nodes/pve-gpu01/lxc/101.conf"
CT_HOST = "/" + CT_REL


@pytest.fixture
def tree(hardening_tmp, request):
    root = lib.scratch("pve-gpu01", hardening_tmp, "pmxcfs-" + request.node.name[-40:].replace("[", "-").strip("]"))
    yield root
    lib.rmtree(root)


def test_the_test_filesystem_behaves_like_pmxcfs(tree):
    with pmxcfs.mounted_over_etc_pve(tree, "quorate") as fs:
        path = os.path.join(tree, CT_REL)
        st = os.stat(path)
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, 33)
        for call in (lambda: os.chmod(path, 0o644), lambda: os.chown(path, 1000, 1000)):
            with pytest.raises(PermissionError) as exc:
                call()
            assert exc.value.errno == errno.EPERM
        os.chmod(path, 0o640)  # pmxcfs accepts its own mode as a no-op
        tmp = path + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(b"arch: amd64\n")
        os.rename(tmp, tmp + "2")  # rename works in pmxcfs (also over a file)
        os.unlink(tmp + "2")
        fs.set_mode("strict")
        with pytest.raises(PermissionError):
            os.rename(path, path + ".x")
        fs.set_mode("noquorum")
        assert os.stat(path).st_mode & 0o777 == 0o440
        data = open(path, "rb").read()
        assert data.startswith(b"#LLM")
        with pytest.raises(PermissionError) as exc:
            with open(path, "r+b") as handle:
                handle.write(b"x")
                handle.flush()
        assert exc.value.errno == errno.EACCES
        with pytest.raises(PermissionError):
            open(path + ".new", "wb")
        assert open(path, "rb").read() == data


@pytest.mark.parametrize("mode", ["quorate", "strict"])
def test_ct_config_written_in_place_with_backup(tree, mode):
    original = lib.read(tree, CT_REL)
    with pmxcfs.mounted_over_etc_pve(tree, mode) as fs:
        path = os.path.join(tree, CT_REL)
        inode = os.stat(path).st_ino
        names_before = sorted(os.listdir(os.path.dirname(path)))
        res = lib.run_module("pvetune_lxc_gpu", {"root": tree, "run_id": "pmxcfs-" + mode, "ctids": [101]})
        assert not res.get("failed"), res.get("msg")
        assert [c["status"] for c in res["cts"]] == ["changed"]
        after = lib.read(tree, CT_REL)
        assert os.stat(path).st_ino == inode, "the CT config was replaced, not written in place"
        assert sorted(os.listdir(os.path.dirname(path))) == names_before, "temporary files left in /etc/pve"
        ops = fs.operations()
    assert b"c 511:* rwm" in original and b"c 511:* rwm" not in after and b"c 509:* rwm" in after
    assert original.replace(b"c 511:* rwm", b"c 509:* rwm", 1) == after
    backup = lib.read(tree, "var/lib/pvetune/runs/pmxcfs-%s/%s" % (mode, CT_REL))
    assert backup == original
    changing = {op[0] for op in ops}
    assert changing <= {"write", "truncate"}, ops
    assert {tuple(op[1:-1]) for op in ops} == {("/nodes/pve-gpu01/lxc/101.conf",)}, ops
    assert all(op[-1] == 0 for op in ops), ops
    # After the unmount the tree holds the fixed file (the backing directory is the tree's etc/pve again).
    assert lib.read(tree, CT_REL) == after


def test_without_quorum_the_fix_fails_clearly_and_changes_nothing(tree):
    before = lib.files_of(tree, (".pvetune/calls.log", "run"))
    with pmxcfs.mounted_over_etc_pve(tree, "noquorum") as fs:
        res = lib.run_module("pvetune_lxc_gpu", {"root": tree, "run_id": "pmxcfs-noquorum", "ctids": [101]})
        ops = fs.operations()
    assert res.get("failed")
    assert "quorum" in res["msg"] and CT_HOST in res["msg"], res["msg"]
    assert not lib.no_traceback(res)
    assert ops == [], "pvetune tried to change /etc/pve without quorum: %s" % ops
    after = lib.files_of(tree, (".pvetune/calls.log", "run"))
    assert lib.differences(before, after) == []


def test_quorum_lost_after_planning_restores_nothing_half_written(tree):
    """The refusal happens before any write also when quorum goes away between audit and fix."""
    with pmxcfs.mounted_over_etc_pve(tree, "quorate") as fs:
        audit = lib.run_module("pvetune_facts", {"root": tree}, check_mode=True)
        assert {r["id"]: r["status"] for r in audit["results"]}["lxc.gpu_devices"] == "fail"
        fs.set_mode("noquorum")
        original = lib.read(tree, CT_REL)
        res = lib.run_module("pvetune_lxc_gpu", {"root": tree, "run_id": "pmxcfs-lost", "ctids": [101]})
        assert res.get("failed") and "quorum" in res["msg"]
        assert lib.read(tree, CT_REL) == original


def test_fix_playbook_on_pmxcfs(tree, hardening_tmp):
    """fix.yml --tags lxc through Ansible: in place on a quorate /etc/pve; a clear failure without quorum."""
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "pmxcfs-inventory.yml"), {"pve-gpu01": tree})
    original = lib.read(tree, CT_REL)
    with pmxcfs.mounted_over_etc_pve(tree, "noquorum"):
        run = lib.run_playbook(hardening_tmp, "fix.yml", inventory, cmdline="--tags lxc",
                               extravars={"pvetune_report_dir": os.path.join(hardening_tmp, "reports-pmxcfs"),
                                          "pvetune_run_id_override": "pmxcfs-pb-1"})
        assert run.rc != 0
        failed = run.failures("pve-gpu01")
        assert any("quorum" in json.dumps(f["res"]) for f in failed), [f["res"].get("msg") for f in failed]
        assert lib.read(tree, CT_REL) == original
    with pmxcfs.mounted_over_etc_pve(tree, "quorate"):
        inode = os.stat(os.path.join(tree, CT_REL)).st_ino
        run = lib.run_playbook(hardening_tmp, "fix.yml", inventory, cmdline="--tags lxc",
                               extravars={"pvetune_report_dir": os.path.join(hardening_tmp, "reports-pmxcfs"),
                                          "pvetune_run_id_override": "pmxcfs-pb-2"})
        assert run.rc == 0, run.stdout[-3000:]
        assert os.stat(os.path.join(tree, CT_REL)).st_ino == inode
        assert b"c 509:* rwm" in lib.read(tree, CT_REL)
