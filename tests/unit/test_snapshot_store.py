"""collect.store_snapshot, pvetune_snapshot's one call: the archive written whole and unpacked beside it, nothing in
check mode, a damaged or unsafe archive refused by name with the previous tree kept."""
import base64
import io
import os
import tarfile

from ansible.module_utils.pvetune.collect import collect, store_snapshot
from ansible.module_utils.pvetune.core.runner import Runner


def archive(tmp_path):
    root = tmp_path / "host"
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "numa_balancing").write_text("1\n")
    (root / "proc" / "cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 quiet\n")
    data, _info = collect(str(root), lambda fsroot: Runner(fsroot, lambda *a, **k: (127, "", "not here")))
    return data


def params(dest, data, **kw):
    return dict({"data": base64.b64encode(data).decode("ascii"), "dest": str(dest), "extract": True,
                 "extract_dir": None}, **kw)


def test_the_archive_is_written_and_unpacked_beside_it(tmp_path):
    data = archive(tmp_path)
    dest = tmp_path / "snapshots" / "pve-x.tar.gz"
    failed, result, warnings = store_snapshot(params(dest, data), None, False, False)
    assert (failed, warnings, result["changed"]) == (False, [], True)
    assert dest.read_bytes() == data and result["extract_dir"] == str(tmp_path / "snapshots" / "pve-x")
    assert (tmp_path / "snapshots" / "pve-x" / "proc" / "sys" / "kernel" / "numa_balancing").read_text() == "1\n"
    assert result["members"] > 2 and result["info"]["files"] >= 2
    assert sorted(os.listdir(str(tmp_path / "snapshots"))) == ["pve-x", "pve-x.tar.gz"]  # no temporary left


def test_check_mode_writes_nothing_and_says_where_it_would(tmp_path):
    dest = tmp_path / "out" / "pve-x.tar.gz"
    failed, result, _ = store_snapshot(params(dest, archive(tmp_path)), None, True, False)
    assert (failed, result["changed"], result["dest"]) == (False, False, str(dest))
    assert not (tmp_path / "out").exists()


def test_a_damaged_archive_is_refused_by_name(tmp_path):
    failed, result, _ = store_snapshot(params(tmp_path / "x.tar.gz", b"not a tarball"), None, False, False)
    assert failed and result["msg"].startswith("data is not a readable snapshot archive")
    failed, result, _ = store_snapshot(dict(params(tmp_path / "x.tar.gz", b""), data="@@@"), None, False, False)
    assert failed and result["msg"].startswith("data is not a pvetune snapshot archive")
    assert not (tmp_path / "x.tar.gz").exists()


def test_an_unsafe_archive_keeps_the_previous_tree(tmp_path):
    dest = tmp_path / "pve-x.tar.gz"
    store_snapshot(params(dest, archive(tmp_path)), None, False, False)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("./.pvetune/snapshot.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
        evil = tarfile.TarInfo("../escape")
        evil.size = 1
        tar.addfile(evil, io.BytesIO(b"x"))
    failed, result, _ = store_snapshot(params(dest, buf.getvalue()), None, False, False)
    assert failed and result["msg"].startswith("refusing to unpack %s" % dest)
    assert (tmp_path / "pve-x" / "proc" / "cmdline").exists() and not (tmp_path / "escape").exists()
    assert not (tmp_path / "pve-x.tmp").exists()
