"""Tests for module_utils/pvetune/core/changeset.py: planned, backed-up, check-mode-safe changes.

Every test works on a tree in tmp_path seen through an FsRoot; the state directory
(/var/lib/pvetune) is therefore <tree>/var/lib/pvetune.  /etc/pve/ paths stand for pmxcfs: the
pmxcfs tests make rename, chmod and chown fail there as pmxcfs does, so a write that needs them fails.
"""
import errno
import hashlib
import json
import os
import stat

import pytest
from ansible.module_utils.pvetune.core import changeset
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot

STATE = "var/lib/pvetune"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def put(root, host_path, data, mode=None):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def real(root, host_path):
    return os.path.join(str(root), host_path.lstrip("/"))


def get(root, host_path):
    with open(real(root, host_path), "rb") as handle:
        return handle.read()


def snapshot(root):
    """Everything in the tree: path -> (kind, mode, content or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(str(root)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, str(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(full, "rb") as handle:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), handle.read())
    return out


def manifest(root):
    with open(real(root, "/%s/manifest.json" % STATE), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    put(root, "/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 60\n", 0o640)
    put(root, "/etc/default/grub", b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    put(root, "/etc/pve/nodes/n1/lxc/101.conf", b"arch: amd64\n", 0o640)
    os.symlink("nodes/n1/lxc", real(root, "/etc/pve/lxc"))
    return root


def changes(tree, **kwargs):
    kwargs.setdefault("run_id", "run1")
    return ChangeSet(FsRoot(str(tree)), **kwargs)


# -- run ids ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["../x", "a/b", ".hidden", "x" * 65, "a b", 7])
def test_bad_run_ids_are_refused(tree, bad):
    with pytest.raises(ValueError):
        changes(tree, run_id=bad)


def test_default_run_id_is_a_utc_timestamp(tree):
    for cs in (ChangeSet(FsRoot(str(tree))), ChangeSet(FsRoot(str(tree)), run_id="")):
        assert len(cs.run_id) == 16 and cs.run_id[8] == "T" and cs.run_id.endswith("Z")


# -- planning --------------------------------------------------------------------------------------
def test_plan_file_reports_only_real_changes(tree):
    cs = changes(tree)
    assert cs.plan_file("/etc/default/grub", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n') is False  # str is utf-8
    assert not cs.changed and cs.files == []
    assert cs.plan_file("/etc/default/grub", b"X\n") is True
    assert cs.plan_file("/etc/new.conf", "ü\n") is True
    assert cs.changed
    assert [(f["path"], f["before"], f["after"]) for f in cs.files] == [
        ("/etc/default/grub", b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', b"X\n"),
        ("/etc/new.conf", None, "ü\n".encode("utf-8")),
    ]


def test_plan_runtime_skips_equal_values(tree):
    cs = changes(tree)
    assert cs.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "60", "60") is False
    assert not cs.changed
    assert cs.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "60", "10") is True
    assert cs.changed and cs.runtime == [{"key": "sysctl:vm.swappiness", "path": "/proc/sys/vm/swappiness",
                                          "before": "60", "after": "10"}]


def test_plan_remove_of_a_missing_file_is_no_change(tree):
    cs = changes(tree)
    assert cs.plan_remove("/etc/nothing") is False
    assert cs.plan_remove("/etc/default/grub") is True
    assert cs.summary()["files"] == [{"path": "/etc/default/grub", "action": "remove"}]


def test_unreadable_path_is_an_error_not_absent(tree):
    """Only ENOENT means 'absent': a path below a regular file must not be planned as a new file."""
    cs = changes(tree)
    with pytest.raises(changeset.FsError):
        cs.plan_file("/etc/default/grub/sub", b"x")


def test_planned_view_shows_planned_content(tree):
    cs = changes(tree)
    cs.plan_file("/etc/sysctl.d/91-new.conf", b"a = 1\n")
    cs.plan_remove("/etc/sysctl.d/90-pvetune.conf")
    view = cs.planned_view()
    assert view.listdir("/etc/sysctl.d") == ["91-new.conf"]
    assert view.read_text("/etc/sysctl.d/91-new.conf") == "a = 1\n"
    assert view.isfile("/etc/sysctl.d/91-new.conf") and not view.exists("/etc/sysctl.d/90-pvetune.conf")
    assert view.read_value("/etc/default/grub") == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"'
    assert get(tree, "/etc/sysctl.d/90-pvetune.conf") == b"vm.swappiness = 60\n"  # nothing written


# -- diffs and summary -----------------------------------------------------------------------------
def test_diffs_and_summary(tree):
    os.symlink("/old.service", real(tree, "/etc/old-link"))
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.plan_file("/etc/created", b"c\n")
    cs.plan_remove("/etc/sysctl.d/90-pvetune.conf")
    cs.plan_symlink("/etc/new-link", "/lib/a.service")
    cs.plan_symlink("/etc/old-link", "/new.service")
    cs.plan_remove_link("/etc/old-link")
    cs.plan_runtime("sysctl:kernel.numa_balancing", "/proc/sys/kernel/numa_balancing", "1", "0")
    cs.plan_runtime("amd_pstate:status", "/sys/devices/system/cpu/amd_pstate/status", "passive", "active")
    assert cs.diffs() == [
        {"before_header": "/etc/default/grub", "after_header": "/etc/default/grub",
         "before": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', "after": "NEW\n"},
        {"before_header": "/etc/created (absent)", "after_header": "/etc/created", "before": "", "after": "c\n"},
        {"before_header": "/etc/sysctl.d/90-pvetune.conf", "after_header": "/etc/sysctl.d/90-pvetune.conf (removed)",
         "before": "vm.swappiness = 60\n", "after": ""},
        {"before_header": "/etc/new-link", "after_header": "/etc/new-link", "before": "",
         "after": "symlink -> /lib/a.service\n"},
        {"before_header": "/etc/old-link", "after_header": "/etc/old-link", "before": "symlink -> /old.service\n",
         "after": "symlink -> /new.service\n"},
        {"before_header": "/etc/old-link", "after_header": "/etc/old-link (removed)",
         "before": "symlink -> /old.service\n", "after": ""},
        {"before_header": "runtime values", "after_header": "runtime values",
         "before": "sysctl:kernel.numa_balancing = 1\namd_pstate:status = passive\n",
         "after": "sysctl:kernel.numa_balancing = 0\namd_pstate:status = active\n"},
    ]
    assert cs.summary() == {
        "files": [{"path": "/etc/default/grub", "action": "update"},
                  {"path": "/etc/created", "action": "create"},
                  {"path": "/etc/sysctl.d/90-pvetune.conf", "action": "remove"},
                  {"path": "/etc/new-link", "action": "create symlink"},
                  {"path": "/etc/old-link", "action": "update symlink"},
                  {"path": "/etc/old-link", "action": "remove"}],
        "runtime": [{"key": "sysctl:kernel.numa_balancing", "before": "1", "after": "0"},
                    {"key": "amd_pstate:status", "before": "passive", "after": "active"}],
    }


def test_no_runtime_diff_without_runtime_changes(tree):
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    assert [d["before_header"] for d in cs.diffs()] == ["/etc/default/grub"]


# -- check mode ------------------------------------------------------------------------------------
def test_check_mode_writes_nothing(tree):
    before = snapshot(tree)
    cs = changes(tree, check_mode=True)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.plan_file("/etc/modprobe.d/deep/new.conf", b"new\n")
    cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\nx: y\n")
    cs.plan_remove("/etc/sysctl.d/90-pvetune.conf")
    cs.plan_symlink("/etc/systemd/system/multi-user.target.wants/x.service", "/etc/systemd/system/x.service")
    cs.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "60", "10")
    assert cs.apply() == []
    assert cs.written == [] and cs.created_dirs == []
    assert snapshot(tree) == before  # no file, no backup, no manifest, no directory
    assert len(cs.diffs()) == 6  # still reported


# -- apply: files, backups, manifest ----------------------------------------------------------------
def test_apply_writes_backs_up_and_records(tree):
    cs = changes(tree)
    cs.plan_file("/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 10\n")
    cs.plan_file("/etc/created.conf", b"new\n", mode=0o600)
    cs.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "60", "10")
    assert cs.apply() == ["/etc/sysctl.d/90-pvetune.conf", "/etc/created.conf"]
    assert cs.apply() == []  # once only
    assert get(tree, "/etc/sysctl.d/90-pvetune.conf") == b"vm.swappiness = 10\n"
    assert stat.S_IMODE(os.stat(real(tree, "/etc/sysctl.d/90-pvetune.conf")).st_mode) == 0o640  # mode kept
    assert stat.S_IMODE(os.stat(real(tree, "/etc/created.conf")).st_mode) == 0o600  # mode of a new file
    # the per-run backup, under the run directory, private
    backup = "/%s/runs/run1/etc/sysctl.d/90-pvetune.conf" % STATE
    assert get(tree, backup) == b"vm.swappiness = 60\n"
    assert stat.S_IMODE(os.stat(real(tree, backup)).st_mode) == 0o600
    assert not os.path.exists(real(tree, "/%s/runs/run1/etc/created.conf" % STATE))  # nothing to back up
    data = manifest(tree)
    assert data["version"] == changeset.MANIFEST_VERSION
    assert data["files"]["/etc/sysctl.d/90-pvetune.conf"] == {
        "existed": True, "original_sha256": sha(b"vm.swappiness = 60\n"), "first_run": "run1", "last_run": "run1",
        "original": "/var/lib/pvetune/originals/etc/sysctl.d/90-pvetune.conf", "mode": 0o640,
        "uid": os.stat(real(tree, "/etc/sysctl.d/90-pvetune.conf")).st_uid,
        "gid": os.stat(real(tree, "/etc/sysctl.d/90-pvetune.conf")).st_gid,
        "written_sha256": sha(b"vm.swappiness = 10\n"),
    }
    assert data["files"]["/etc/created.conf"] == {"existed": False, "original_sha256": None, "first_run": "run1",
                                                  "last_run": "run1", "written_sha256": sha(b"new\n")}
    assert get(tree, "/%s/originals/etc/sysctl.d/90-pvetune.conf" % STATE) == b"vm.swappiness = 60\n"
    assert data["runtime"] == {"sysctl:vm.swappiness": {"path": "/proc/sys/vm/swappiness", "original": "60",
                                                        "first_run": "run1", "last": "10"}}
    assert stat.S_IMODE(os.stat(real(tree, "/%s/manifest.json" % STATE)).st_mode) == 0o600
    assert not [n for n in os.listdir(real(tree, "/etc")) if n.endswith(".pvetune-tmp")]


def test_originals_are_kept_once_across_runs(tree):
    first = changes(tree, run_id="run1")
    first.plan_file("/etc/default/grub", b"ONE\n")
    first.plan_file("/etc/made-by-pvetune", b"1\n")
    first.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "60", "10")
    first.apply()
    second = changes(tree, run_id="run2")
    second.plan_file("/etc/default/grub", b"TWO\n")
    second.plan_file("/etc/made-by-pvetune", b"2\n")
    second.plan_runtime("sysctl:vm.swappiness", "/proc/sys/vm/swappiness", "10", "20")
    second.apply()
    data = manifest(tree)
    grub = data["files"]["/etc/default/grub"]
    assert grub["original_sha256"] == sha(b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    assert (grub["first_run"], grub["last_run"], grub["written_sha256"]) == ("run1", "run2", sha(b"TWO\n"))
    assert get(tree, "/%s/originals/etc/default/grub" % STATE) == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    assert get(tree, "/%s/runs/run1/etc/default/grub" % STATE) == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    assert get(tree, "/%s/runs/run2/etc/default/grub" % STATE) == b"ONE\n"  # each run backs up what it found
    made = data["files"]["/etc/made-by-pvetune"]
    assert made["existed"] is False and "original" not in made  # still "pvetune created it"
    assert not os.path.exists(real(tree, "/%s/originals/etc/made-by-pvetune" % STATE))
    assert data["runtime"]["sysctl:vm.swappiness"] == {"path": "/proc/sys/vm/swappiness", "original": "60",
                                                       "first_run": "run1", "last": "20"}


def test_record_false_keeps_run_backups_but_leaves_the_manifest_alone(tree):
    cs = changes(tree, record=False)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.plan_file("/etc/a/b/new", b"x\n")
    cs.apply()
    assert get(tree, "/etc/default/grub") == b"NEW\n"
    assert get(tree, "/%s/runs/run1/etc/default/grub" % STATE) == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    assert not os.path.exists(real(tree, "/%s/manifest.json" % STATE))
    assert not os.path.exists(real(tree, "/%s/originals" % STATE))
    assert cs.created_dirs == [real(tree, "/etc/a"), real(tree, "/etc/a/b")]  # restore_run still knows them


def test_remove_backs_up_and_deletes(tree):
    cs = changes(tree)
    cs.plan_remove("/etc/sysctl.d/90-pvetune.conf")
    assert cs.apply() == ["/etc/sysctl.d/90-pvetune.conf"]
    assert not os.path.exists(real(tree, "/etc/sysctl.d/90-pvetune.conf"))
    assert get(tree, "/%s/runs/run1/etc/sysctl.d/90-pvetune.conf" % STATE) == b"vm.swappiness = 60\n"
    entry = manifest(tree)["files"]["/etc/sysctl.d/90-pvetune.conf"]
    assert entry["existed"] is True and entry["written_sha256"] is None


def test_corrupt_manifest_refuses_before_writing(tree):
    put(tree, "/%s/manifest.json" % STATE, b"{not json")
    before = snapshot(tree)
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    with pytest.raises(ChangeError, match="manifest.json is corrupt"):
        cs.apply()
    assert snapshot(tree) == before


def test_parent_directories_are_created_and_recorded(tree):
    cs = changes(tree)
    cs.plan_file("/etc/modprobe.d/a/b/pvetune.conf", b"options x y=1\n")
    cs.apply()
    assert get(tree, "/etc/modprobe.d/a/b/pvetune.conf") == b"options x y=1\n"
    assert cs.created_dirs == [real(tree, p) for p in ("/etc/modprobe.d", "/etc/modprobe.d/a", "/etc/modprobe.d/a/b")]
    assert sorted(manifest(tree)["dirs"]) == ["/etc/modprobe.d", "/etc/modprobe.d/a", "/etc/modprobe.d/a/b"]
    # a later run that creates another directory adds it, without repeating the others
    again = changes(tree, run_id="run2")
    again.plan_file("/etc/modprobe.d/a/c/x.conf", b"x\n")
    again.plan_file("/etc/modprobe.d/a/b/pvetune.conf", b"options x y=2\n")
    again.apply()
    assert again.created_dirs == [real(tree, "/etc/modprobe.d/a/c")]
    assert sorted(manifest(tree)["dirs"]) == ["/etc/modprobe.d", "/etc/modprobe.d/a", "/etc/modprobe.d/a/b",
                                              "/etc/modprobe.d/a/c"]


# -- symlinks --------------------------------------------------------------------------------------
def test_plan_symlink_creates_updates_and_records(tree):
    unit = "/etc/systemd/system/pvetune-x.service"
    link = "/etc/systemd/system/multi-user.target.wants/pvetune-x.service"
    cs = changes(tree)
    assert cs.plan_symlink(link, unit) is True
    assert cs.apply() == [link]
    assert os.readlink(real(tree, link)) == unit
    assert cs.created_dirs == [real(tree, "/etc/systemd"), real(tree, "/etc/systemd/system"),
                               real(tree, "/etc/systemd/system/multi-user.target.wants")]
    entry = manifest(tree)["files"][link]
    assert entry == {"existed": False, "symlink": True, "original_target": None, "written_target": unit,
                     "first_run": "run1", "last_run": "run1"}
    same = changes(tree, run_id="run2")
    assert same.plan_symlink(link, unit) is False
    other = changes(tree, run_id="run3")
    assert other.plan_symlink(link, "/lib/systemd/system/other.service") is True
    other.apply()
    assert os.readlink(real(tree, link)) == "/lib/systemd/system/other.service"
    entry = manifest(tree)["files"][link]
    assert (entry["original_target"], entry["written_target"], entry["first_run"], entry["last_run"]) == (
        None, "/lib/systemd/system/other.service", "run1", "run3")


def test_plan_symlink_never_replaces_a_file(tree):
    cs = changes(tree)
    with pytest.raises(ChangeError, match="exists and is not a symlink"):
        cs.plan_symlink("/etc/default/grub", "/elsewhere")
    assert get(tree, "/etc/default/grub") == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'


def test_plan_remove_link_removes_the_link_not_its_target(tree):
    put(tree, "/lib/systemd/system/x.service", b"[Unit]\n")
    os.symlink("/lib/systemd/system/x.service", real(tree, "/etc/x.service"))
    cs = changes(tree)
    assert cs.plan_remove_link("/etc/default/grub") is False  # a regular file is not a link: left alone
    assert cs.plan_remove_link("/etc/x.service") is True
    cs.apply()
    assert not os.path.lexists(real(tree, "/etc/x.service"))
    assert get(tree, "/lib/systemd/system/x.service") == b"[Unit]\n"
    assert get(tree, "/etc/default/grub") == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'


def test_files_are_never_written_or_removed_through_a_symlink(tree):
    """Inside a tree a write through a symlink lands on its target; on the live host the rename
    replaces the link (and a removal removes the link).  The change set refuses both."""
    put(tree, "/usr/share/x/target.conf", b"target\n")
    os.symlink("/usr/share/x/target.conf", real(tree, "/etc/linked.conf"))
    before = snapshot(tree)
    cs = changes(tree)
    assert cs.plan_file("/etc/linked.conf", b"target\n") is False  # already so: nothing to write, no error
    with pytest.raises(ChangeError, match="is a symlink to /usr/share/x/target.conf; not writing through it"):
        cs.plan_file("/etc/linked.conf", b"new\n")
    with pytest.raises(ChangeError, match="is a symlink"):
        cs.plan_remove("/etc/linked.conf")
    assert cs.files == []
    cs.apply()
    assert snapshot(tree) == before


def test_directory_symlinks_on_the_way_are_followed(tree):
    """/etc/pve/lxc is pmxcfs's own symlink to nodes/<node>/lxc: writes below it are normal."""
    cs = changes(tree)
    assert cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\ncores: 2\n") is True
    cs.apply()
    assert get(tree, "/etc/pve/nodes/n1/lxc/101.conf") == b"arch: amd64\ncores: 2\n"
    assert os.path.islink(real(tree, "/etc/pve/lxc"))


# -- /etc/pve (pmxcfs): in place, no rename, no chmod ----------------------------------------------------
@pytest.fixture
def pmxcfs_rules(tree, monkeypatch):
    """rename, chmod and chown of anything under <tree>/etc/pve fail with EPERM, as on pmxcfs."""
    pve = os.path.realpath(real(tree, "/etc/pve")) + os.sep
    calls = []

    def guard(name, original):
        def wrapped(path, *args, **kwargs):
            paths = [path] + [a for a in args[:1] if isinstance(a, str)] if name == "rename" else [path]
            if any(isinstance(p, str) and os.path.realpath(p).startswith(pve) for p in paths):
                calls.append((name, path))
                raise OSError(errno.EPERM, os.strerror(errno.EPERM), path)
            return original(path, *args, **kwargs)
        return wrapped

    for name in ("rename", "chmod", "chown"):
        monkeypatch.setattr(changeset.os, name, guard(name, getattr(os, name)))
    return calls


def test_pmxcfs_files_are_written_in_place(tree, pmxcfs_rules):
    path = real(tree, "/etc/pve/nodes/n1/lxc/101.conf")
    inode = os.stat(path).st_ino
    cs = changes(tree)
    cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\nlxc.cgroup2.devices.allow: c 195:* rwm\n")
    cs.plan_file("/etc/pve/lxc/102.conf", b"arch: amd64\n")  # a new CT config: created in place too
    assert cs.apply() == ["/etc/pve/lxc/101.conf", "/etc/pve/lxc/102.conf"]
    assert pmxcfs_rules == []  # no rename, chmod or chown was even tried
    assert os.stat(path).st_ino == inode
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert get(tree, "/etc/pve/lxc/101.conf") == b"arch: amd64\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
    assert get(tree, "/etc/pve/lxc/102.conf") == b"arch: amd64\n"
    assert not [n for n in os.listdir(os.path.dirname(path)) if "pvetune-tmp" in n]
    # backups and originals live outside /etc/pve
    assert get(tree, "/%s/runs/run1/etc/pve/lxc/101.conf" % STATE) == b"arch: amd64\n"
    assert get(tree, "/%s/originals/etc/pve/lxc/101.conf" % STATE) == b"arch: amd64\n"


def test_pmxcfs_guard_catches_a_rename(tree, pmxcfs_rules):
    """The emulation itself: the atomic (rename) write used elsewhere fails under /etc/pve."""
    with pytest.raises(OSError):
        changeset.atomic_write(real(tree, "/etc/pve/nodes/n1/lxc/101.conf"), b"x\n", None)
    assert pmxcfs_rules and pmxcfs_rules[0][0] in ("chmod", "rename")


def test_read_only_pmxcfs_is_refused_before_anything_is_written(tree):
    lxc = real(tree, "/etc/pve/nodes/n1/lxc")
    os.chmod(real(tree, "/etc/pve/nodes/n1/lxc/101.conf"), 0o440)  # pmxcfs without quorum
    os.chmod(lxc, 0o555)
    try:
        before = snapshot(tree)
        cs = changes(tree)
        cs.plan_file("/etc/default/grub", b"NEW\n")  # planned first: still not written
        cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\ncores: 2\n")
        with pytest.raises(ChangeError, match=r"/etc/pve/lxc/101.conf is read-only \(mode 0440\).*nothing was"):
            cs.apply()
        assert snapshot(tree) == before
        new = changes(tree, run_id="run2")
        new.plan_file("/etc/pve/lxc/103.conf", b"arch: amd64\n")
        with pytest.raises(ChangeError, match=r"/etc/pve/lxc is read-only \(mode 0555\)"):
            new.apply()
    finally:
        os.chmod(lxc, 0o755)


def test_inplace_write_that_does_not_read_back_fails(tmp_path, monkeypatch):
    target = tmp_path / "f"
    target.write_bytes(b"old")
    real_open = open

    def short_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if mode == "rb":
            handle.read(1)  # the read-back sees one byte less
        return handle

    from ansible.module_utils.pvetune.core import filewrite
    monkeypatch.setattr(filewrite, "open", short_open, raising=False)
    with pytest.raises(ChangeError, match="does not read back what was written"):
        filewrite.inplace_write(str(target), b"new data", "/etc/pve/x.conf")


# -- restore_run after a failure -------------------------------------------------------------------
def _fail_on(monkeypatch, name, host_suffix, partial=None):
    original = getattr(changeset, name)

    def failing(real_path, data, *args):
        if real_path.endswith(host_suffix):
            if partial is not None:
                with open(real_path, "r+b") as handle:
                    handle.write(partial)
            raise ChangeError("simulated failure writing %s" % real_path)
        return original(real_path, data, *args)

    monkeypatch.setattr(changeset, name, failing)


def test_restore_run_after_a_failure_puts_everything_back(tree, monkeypatch):
    os.symlink("/old/target.service", real(tree, "/etc/relink.service"))
    os.symlink("/gone.service", real(tree, "/etc/unlink.service"))
    before = snapshot(tree)
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.plan_file("/etc/new/dir/created.conf", b"new\n")
    cs.plan_remove("/etc/sysctl.d/90-pvetune.conf")
    cs.plan_symlink("/etc/relink.service", "/new/target.service")
    cs.plan_symlink("/etc/systemd/new.service", "/x.service")
    cs.plan_remove_link("/etc/unlink.service")
    cs.plan_file("/etc/zz-fails.conf", b"boom\n")
    _fail_on(monkeypatch, "atomic_write", "/etc/zz-fails.conf")
    with pytest.raises(ChangeError, match="simulated failure"):
        cs.apply()
    assert get(tree, "/etc/default/grub") == b"NEW\n"  # the earlier writes did happen
    restored = cs.restore_run()
    assert restored == ["/etc/unlink.service", "/etc/systemd/new.service", "/etc/relink.service",
                        "/etc/sysctl.d/90-pvetune.conf", "/etc/new/dir/created.conf", "/etc/default/grub"]
    after = {p: v for p, v in snapshot(tree).items() if not p.startswith("var")}  # the state dir stays
    assert after == before  # contents, modes (the removed 0640 file too), links; created dirs removed
    assert cs.written == [] and cs.created_dirs == []
    # the manifest knows the run's state; the failed file's entry was written ahead of the write that failed (its
    # file is absent, which rollback reads as already original)
    data = manifest(tree)
    assert data["files"]["/etc/zz-fails.conf"]["written_sha256"] == sha(b"boom\n")
    assert data["files"]["/etc/zz-fails.conf"]["existed"] is False
    assert data["files"]["/etc/default/grub"]["written_sha256"] == sha(b"NEW\n")


def test_restore_run_after_a_half_written_pmxcfs_file(tree, monkeypatch):
    cs = changes(tree)
    cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\ncores: 64\n")
    _fail_on(monkeypatch, "inplace_write", "/101.conf", partial=b"XXXX")
    with pytest.raises(ChangeError):
        cs.apply()
    assert get(tree, "/etc/pve/lxc/101.conf").startswith(b"XXXX")
    assert cs.written == [("/etc/pve/lxc/101.conf", b"arch: amd64\n")]  # recorded before the write
    monkeypatch.undo()
    assert cs.restore_run() == ["/etc/pve/lxc/101.conf"]
    assert get(tree, "/etc/pve/lxc/101.conf") == b"arch: amd64\n"


def test_restore_run_keeps_a_directory_someone_filled(tree):
    cs = changes(tree)
    cs.plan_file("/etc/newdir/a.conf", b"a\n")
    cs.apply()
    put(tree, "/etc/newdir/other", b"not ours\n")
    assert cs.restore_run() == ["/etc/newdir/a.conf"]
    assert not os.path.exists(real(tree, "/etc/newdir/a.conf"))
    assert get(tree, "/etc/newdir/other") == b"not ours\n"


def test_restore_run_never_raises_and_names_what_is_left(tree, monkeypatch):
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.apply()
    monkeypatch.setattr(changeset, "atomic_write", lambda *a: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))
    restored = cs.restore_run()
    assert len(restored) == 1
    assert restored[0].startswith("/etc/default/grub (NOT restored: ")
    assert "the original is in /var/lib/pvetune/runs/run1" in restored[0]


def test_apply_or_restore_puts_back_what_it_wrote_when_a_later_write_fails(tree):
    """The first file is written, the second cannot be (its parent became a file): the first is put back and the
    error names what was being written, the reason and the restored path."""
    cs = changes(tree)
    cs.plan_file("/etc/default/grub", b"NEW\n")
    cs.plan_file("/etc/modprobe.d/deep/new.conf", b"new\n")
    put(tree, "/etc/modprobe.d", b"a file where a directory must go\n")
    with pytest.raises(changeset.WriteFailed) as info:
        cs.apply_or_restore("the boot configuration")
    assert str(info.value).startswith("writing the boot configuration failed: ")
    assert info.value.restored == ["/etc/default/grub"]
    assert str(info.value).endswith("; restored: /etc/default/grub")
    with open(real(tree, "/etc/default/grub"), "rb") as handle:
        assert handle.read() == b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    assert isinstance(info.value, ChangeError)  # callers that catch ChangeError still do


# -- bundles and shown runtime values (issue 15: a readable --diff) ------------------------------------------
def test_bundled_files_are_one_summary_entry_listed_or_counted(tmp_path):
    tree = tmp_path / "root"
    (tree / "opt/lib").mkdir(parents=True)
    (tree / "opt/lib/old.py").write_bytes(b"old\n")
    cs = ChangeSet(FsRoot(str(tree)))
    cs.add_bundle("the runtime", lambda p: p.startswith("/opt/"), before_note="version 1", after_note="version 2")
    for i in range(7):
        cs.plan_file("/opt/lib/m%d.py" % i, b"x" * (i + 1))
    cs.plan_file("/opt/lib/old.py", b"new!\n")
    cs.plan_file("/opt/helper", b"#!/bin/sh\n")
    cs.plan_file("/etc/site.json", b"{}\n")
    diffs = cs.diffs()
    assert [d["after_header"] for d in diffs] == ["/etc/site.json", "the runtime"]
    bundle = diffs[1]
    assert bundle["before"].splitlines() == ["version 1", "/opt/lib/old.py (4 bytes, sha256 %s)"
                                             % changeset.sha256(b"old\n")[:16]]
    assert bundle["after"].splitlines() == [
        "version 2",
        "create /opt/helper (10 bytes, sha256 %s)" % changeset.sha256(b"#!/bin/sh\n")[:16],
        "create 7 files under /opt/lib (28 bytes)",
        "update /opt/lib/old.py (5 bytes, sha256 %s)" % changeset.sha256(b"new!\n")[:16]]
    # the summary is only what diffs() shows: the plan and the manifest keep every file
    assert len(cs.summary()["files"]) == 10


def test_a_bundle_with_nothing_planned_shows_nothing(tmp_path):
    cs = ChangeSet(FsRoot(str(tmp_path)))
    cs.add_bundle("the runtime", lambda p: True)
    assert cs.diffs() == []


def test_runtime_values_can_be_shown_in_the_operators_unit(tmp_path):
    cs = ChangeSet(FsRoot(str(tmp_path)))
    cs.plan_runtime("pcie:0000:01:00.0:devctl", "/sys/x", "2137", "5137",
                    shown=("pcie:0000:01:00.0 MaxReadReq", "512 bytes", "4096 bytes"))
    cs.plan_runtime("sysctl:kernel.numa_balancing", "/proc/x", "1", "0")
    [diff] = cs.diffs()
    assert diff["before"] == "pcie:0000:01:00.0 MaxReadReq = 512 bytes\nsysctl:kernel.numa_balancing = 1\n"
    assert diff["after"] == "pcie:0000:01:00.0 MaxReadReq = 4096 bytes\nsysctl:kernel.numa_balancing = 0\n"
    # what rollback restores is the stored value, not the shown one
    assert cs.summary()["runtime"][0] == {"key": "pcie:0000:01:00.0:devctl", "before": "2137", "after": "5137"}


# -- a run that dies between two instructions (issue 33 (1)) ----------------------------------------------------------
def _killed_during_apply(cs, kill_after):
    """apply() in a child process that dies (os._exit: no finally, no atexit, as SIGKILL) right after its write of
    the host path ``kill_after``; returns the child's exit status."""
    pid = os.fork()
    if pid == 0:  # the child
        try:
            real_write, real_inplace = changeset.atomic_write, changeset.inplace_write

            def die_after(write):
                def wrapped(path, data, *args):
                    write(path, data, *args)
                    if path == cs.fsroot.path(kill_after):
                        os._exit(9)
                return wrapped
            changeset.atomic_write, changeset.inplace_write = die_after(real_write), die_after(real_inplace)
            cs.apply()
        finally:
            os._exit(3)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("kill_after", ["/etc/sysctl.d/90-pvetune.conf", "/etc/pve/lxc/101.conf",
                                        "/etc/pvetune/new/settings.json"])
def test_a_write_is_recorded_before_it_is_made(tree, kill_after):
    """The manifest entry (with the original) is saved before each write: a run killed right after one leaves a
    record that rollback undoes byte for byte. The manifest used to be saved once, at the end of apply()."""
    from ansible.module_utils.pvetune.rollback import plan_rollback
    before = snapshot(tree)
    cs = changes(tree)
    cs.plan_file("/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 10\n")
    cs.plan_file("/etc/pve/lxc/101.conf", b"arch: amd64\nlxc.cgroup2.devices.allow: c 511:* rwm\n")
    cs.plan_file("/etc/pvetune/new/settings.json", b"{}\n")
    assert _killed_during_apply(cs, kill_after) == 9
    recorded = manifest(tree)
    assert recorded["files"][kill_after]["written_sha256"] == sha(cs.files[[f["path"] for f in cs.files]
                                                                           .index(kill_after)]["after"])
    undo = changes(tree, run_id="rollback1", record=False)
    plan = plan_rollback(undo, recorded)
    assert plan["conflicts"] == []
    undo.apply()
    for host_dir in recorded.get("dirs", []):
        os.rmdir(real(tree, host_dir))   # what rollback's remove_created_dirs does
    after = snapshot(tree)
    # The state dir stays; so does the run/ the killed writer created for its announcement (core/busy.py; a tmpfs
    # on a host), which the rollback's own write swept: nothing of pvetune is left in it.
    assert [k for k in after if k.startswith("run")] == ["run"]
    assert {k: v for k, v in after.items() if not k.startswith(("var", "run"))} == before


def test_temporary_files_a_killed_run_left_are_swept(tree):
    leftover = real(tree, "/etc/sysctl.d/.99-other.conf.pvetune-tmp")
    with open(leftover, "wb") as handle:
        handle.write(b"half")
    os.mkdir(real(tree, "/etc/sysctl.d/.dir.pvetune-tmp"))   # not a file of ours: left alone
    cs = changes(tree)
    cs.plan_file("/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 10\n")
    cs.apply()
    assert not os.path.exists(leftover) and cs.swept == ["/etc/sysctl.d/.99-other.conf.pvetune-tmp"]
    assert os.path.isdir(real(tree, "/etc/sysctl.d/.dir.pvetune-tmp"))
