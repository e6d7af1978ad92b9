"""Tests for module_utils/pvetune/core/fsroot.py: every read of the audit goes through an FsRoot.

The trees are built in tmp_path; nothing outside them is ever read.  Tests that need a real
"Permission denied" drop privileges in a forked child when they run as root (root's reads
ignore permission bits).
"""
import errno
import os
import stat

import pytest
from ansible.module_utils.pvetune.core.fsroot import MAX_SYMLINKS, FsError, FsRoot
from privdrop import run_as_nobody as run_unprivileged


def write(root, host_path, text, mode=None):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)
    return path


def link(root, host_path, target):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
    return path


# -- construction and mapping --------------------------------------------------------------------
def test_root_must_be_absolute_non_empty_and_nul_free():
    for bad in ("", "relative/dir", "/tmp/a\x00b", None):
        with pytest.raises(ValueError):
            FsRoot(bad)


def test_live_root_maps_paths_to_themselves():
    fs = FsRoot("/")
    assert fs.live
    assert fs.path("/proc/cmdline") == "/proc/cmdline"
    assert fs.path("/etc/../proc/./cmdline") == "/proc/cmdline"


def test_host_paths_are_rerooted(tmp_path):
    write(tmp_path, "/proc/cmdline", "ro quiet\n")
    fs = FsRoot(str(tmp_path))
    assert not fs.live
    assert fs.path("/proc/cmdline") == os.path.join(str(tmp_path), "proc/cmdline")
    assert fs.path("/") == str(tmp_path)
    assert fs.read_value("/proc/cmdline") == "ro quiet"
    assert fs.host_path(os.path.join(str(tmp_path), "proc/cmdline")) == "/proc/cmdline"
    assert fs.host_path(str(tmp_path)) == "/"


def test_root_itself_is_resolved(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    write(real, "/etc/hostname", "pve\n")
    os.symlink(str(real), str(tmp_path / "alias"))
    fs = FsRoot(str(tmp_path / "alias"))
    assert fs.root == str(real)
    assert fs.read_value("/etc/hostname") == "pve"


def test_relative_host_paths_are_refused(tmp_path):
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError) as info:
        fs.path("etc/passwd")
    assert "absolute" in info.value.reason
    with pytest.raises(FsError):
        fs.read_value("proc/cmdline")


def test_host_path_outside_the_root_is_refused(tmp_path):
    (tmp_path / "root").mkdir()
    fs = FsRoot(str(tmp_path / "root"))
    with pytest.raises(FsError):
        fs.host_path(str(tmp_path / "elsewhere"))


@pytest.mark.parametrize("host_path", [
    "/../../../../etc/passwd",
    "/etc/../../../../etc/passwd",
    "/proc/../../etc/./passwd",
    "/a/b/c/../../../../../../etc/passwd",
])
def test_dotdot_cannot_escape(tmp_path, host_path):
    root = tmp_path / "root"
    write(root, "/etc/passwd", "tree-passwd\n")
    write(tmp_path, "/etc/passwd", "outside\n")  # a file the escape would hit
    fs = FsRoot(str(root))
    real = fs.path(host_path)
    assert real == os.path.join(str(root), "etc/passwd")
    assert fs.read_value(host_path) == "tree-passwd"


def test_dotdot_stops_at_root_when_target_missing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    write(tmp_path, "/secret", "outside\n")
    fs = FsRoot(str(root))
    assert fs.path("/../secret") == os.path.join(str(root), "secret")
    with pytest.raises(FsError) as info:
        fs.read_value("/../secret")
    assert info.value.reason == os.strerror(errno.ENOENT)


# -- symlinks ------------------------------------------------------------------------------------
def test_absolute_symlink_is_rerooted_never_the_real_etc(tmp_path):
    root = tmp_path / "root"
    write(root, "/etc/os-release", 'PRETTY_NAME="tree"\n')
    link(root, "/etc/alias", "/etc/os-release")
    link(root, "/etc/passwd-link", "/etc/passwd")  # the real /etc/passwd exists; the tree's does not
    fs = FsRoot(str(root))
    assert fs.read_value("/etc/alias") == 'PRETTY_NAME="tree"'
    assert fs.path("/etc/passwd-link") == os.path.join(str(root), "etc/passwd")
    with pytest.raises(FsError) as info:
        fs.read_text("/etc/passwd-link")
    assert info.value.path == "/etc/passwd-link"
    assert not fs.exists("/etc/passwd-link")
    assert fs.readlink("/etc/passwd-link") == "/etc/passwd"


def test_absolute_symlink_in_a_directory_component_is_rerooted(tmp_path):
    root = tmp_path / "root"
    write(root, "/data/pve/lxc/101.conf", "arch: amd64\n")
    link(root, "/etc/pve", "/data/pve")
    fs = FsRoot(str(root))
    assert fs.listdir("/etc/pve/lxc") == ["101.conf"]
    assert fs.read_value("/etc/pve/lxc/101.conf") == "arch: amd64"
    assert fs.path("/etc/pve/lxc/101.conf") == os.path.join(str(root), "data/pve/lxc/101.conf")


def test_relative_symlinks_escaping_upwards_stay_inside(tmp_path):
    root = tmp_path / "root"
    write(root, "/etc/shadow", "tree\n")
    link(root, "/var/lib/x/evil", "../../../../../../../../etc/shadow")
    fs = FsRoot(str(root))
    assert fs.path("/var/lib/x/evil") == os.path.join(str(root), "etc/shadow")
    assert fs.read_value("/var/lib/x/evil") == "tree"


def test_sysfs_style_relative_symlinks(tmp_path):
    """/sys/bus/pci/devices/<bdf> -> ../../../devices/pci0000:00/<port>/<bdf>, as on a real host."""
    root = tmp_path / "root"
    dev = "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"
    write(root, dev + "/vendor", "0x10de\n")
    link(root, "/sys/bus/pci/devices/0000:01:00.0", "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0")
    link(root, dev + "/subsystem", "../../../../bus/pci")
    link(root, "/sys/bus/pci/drivers/nvidia/0000:01:00.0", "../../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0")
    link(root, dev + "/driver", "../../../../bus/pci/drivers/nvidia")
    fs = FsRoot(str(root))
    assert fs.read_value("/sys/bus/pci/devices/0000:01:00.0/vendor") == "0x10de"
    # ".." after a symlink applies to the link's target, as in the kernel's path walk
    assert fs.path("/sys/bus/pci/devices/0000:01:00.0/../0000:01:00.0/vendor") == \
        os.path.join(str(root), dev.lstrip("/"), "vendor")
    assert fs.listdir("/sys/bus/pci/devices/0000:01:00.0/subsystem/devices") == ["0000:01:00.0"]
    assert fs.readlink("/sys/bus/pci/devices/0000:01:00.0/driver") == "../../../../bus/pci/drivers/nvidia"
    assert os.path.basename(fs.path("/sys/bus/pci/devices/0000:01:00.0/driver")) == "nvidia"
    assert fs.read_value("/sys/bus/pci/drivers/nvidia/0000:01:00.0/vendor") == "0x10de"


def test_lstat_does_not_follow_the_last_link(tmp_path):
    root = tmp_path / "root"
    write(root, "/target", "x")
    link(root, "/l", "/target")
    fs = FsRoot(str(root))
    assert stat.S_ISLNK(fs.lstat("/l").st_mode)
    assert stat.S_ISREG(fs.stat("/l").st_mode)


@pytest.mark.parametrize("links", [
    {"/loop": "/loop"},                        # self loop, absolute
    {"/a": "b", "/b": "a"},                    # two-link cycle, relative
    {"/d/x": "../d/x"},                        # relative self loop through ..
])
def test_symlink_loops_raise_eloop(tmp_path, links):
    root = tmp_path / "root"
    root.mkdir()
    for path, target in links.items():
        link(root, path, target)
    fs = FsRoot(str(root))
    first = sorted(links)[0]
    with pytest.raises(FsError) as info:
        fs.read_value(first)
    assert info.value.reason == os.strerror(errno.ELOOP)
    assert info.value.path == first
    # try_value / exists swallow it
    assert fs.try_value(first, "dflt") == "dflt"
    assert fs.exists(first) is False


def test_symlink_loop_in_a_directory_component(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    link(root, "/sys/loop", "/sys/loop")
    fs = FsRoot(str(root))
    with pytest.raises(FsError) as info:
        fs.read_value("/sys/loop/cpu/online")
    assert info.value.reason == os.strerror(errno.ELOOP)
    assert info.value.path == "/sys/loop/cpu/online"  # the path asked for, not the partly resolved one
    with pytest.raises(FsError):
        fs.listdir("/sys/loop/cpu")


def test_loop_behind_a_directory_symlink_names_the_requested_path(tmp_path):
    """/etc/pve/lxc -> nodes/<node>/lxc as on a Proxmox host; a looping CT config is reported as asked."""
    root = tmp_path / "root"
    (root / "etc/pve/nodes/pve1/lxc").mkdir(parents=True)
    link(root, "/etc/pve/lxc", "nodes/pve1/lxc")
    link(root, "/etc/pve/nodes/pve1/lxc/101.conf", "/etc/pve/lxc/101.conf")
    fs = FsRoot(str(root))
    with pytest.raises(FsError) as info:
        fs.read_text("/etc/pve/lxc/101.conf")
    assert (info.value.path, info.value.reason) == ("/etc/pve/lxc/101.conf", os.strerror(errno.ELOOP))


def test_long_but_finite_chain_resolves(tmp_path):
    root = tmp_path / "root"
    write(root, "/end", "done\n")
    hops = MAX_SYMLINKS - 1
    for i in range(hops):
        link(root, "/l%d" % i, "/l%d" % (i + 1) if i + 1 < hops else "/end")
    fs = FsRoot(str(root))
    assert fs.read_value("/l0") == "done"


def test_chain_longer_than_the_limit_is_eloop(tmp_path):
    root = tmp_path / "root"
    write(root, "/end", "done\n")
    hops = MAX_SYMLINKS + 2
    for i in range(hops):
        link(root, "/l%d" % i, "/l%d" % (i + 1) if i + 1 < hops else "/end")
    fs = FsRoot(str(root))
    with pytest.raises(FsError) as info:
        fs.read_value("/l0")
    assert info.value.reason == os.strerror(errno.ELOOP)


# -- values ----------------------------------------------------------------------------------------
def test_read_value_strips_and_try_value_defaults(tmp_path):
    write(tmp_path, "/sys/devices/system/cpu/online", "  0-127\n\n")
    fs = FsRoot(str(tmp_path))
    assert fs.read_value("/sys/devices/system/cpu/online") == "0-127"
    assert fs.try_value("/sys/devices/system/cpu/offline") is None
    assert fs.try_value("/sys/devices/system/cpu/offline", "") == ""
    with pytest.raises(FsError) as info:
        fs.read_value("/sys/devices/system/cpu/offline")
    assert info.value.path == "/sys/devices/system/cpu/offline"
    assert info.value.reason == os.strerror(errno.ENOENT)
    assert "/sys/devices/system/cpu/offline" in str(info.value)


def test_read_value_of_an_empty_file_is_empty_not_none(tmp_path):
    write(tmp_path, "/sys/devices/system/cpu/cpufreq/policy3/affected_cpus", "\n")
    fs = FsRoot(str(tmp_path))
    assert fs.try_value("/sys/devices/system/cpu/cpufreq/policy3/affected_cpus") == ""


def test_read_text_replaces_invalid_utf8_and_honours_limit(tmp_path):
    path = os.path.join(str(tmp_path), "f")
    with open(path, "wb") as handle:
        handle.write(b"ab\xffcd" + b"x" * 100)
    fs = FsRoot(str(tmp_path))
    assert fs.read_text("/f", limit=5) == "ab\ufffdcd"
    assert len(fs.read_bytes("/f")) == 105


def test_reading_a_directory_names_the_path(tmp_path):
    (tmp_path / "etc" / "pve" / "lxc" / "101.conf").mkdir(parents=True)
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError) as info:
        fs.read_text("/etc/pve/lxc/101.conf")
    assert info.value.path == "/etc/pve/lxc/101.conf"
    assert info.value.reason == os.strerror(errno.EISDIR)


def test_exists_isdir_isfile(tmp_path):
    write(tmp_path, "/etc/default/grub", "x")
    fs = FsRoot(str(tmp_path))
    assert fs.exists("/etc/default/grub") and fs.isfile("/etc/default/grub") and not fs.isdir("/etc/default/grub")
    assert fs.isdir("/etc/default") and not fs.isfile("/etc/default")
    assert not fs.exists("/etc/default/grub.d") and not fs.isdir("/etc/default/grub.d")


# -- listdir ---------------------------------------------------------------------------------------
def test_listdir_sorted_and_missing_is_empty(tmp_path):
    for name in ("b.conf", "a.conf", "10.conf"):
        write(tmp_path, "/etc/sysctl.d/" + name, "")
    fs = FsRoot(str(tmp_path))
    assert fs.listdir("/etc/sysctl.d") == ["10.conf", "a.conf", "b.conf"]
    assert fs.listdir("/run/sysctl.d") == []
    assert fs.listdir("/no/such/deep/dir") == []


def test_listdir_of_a_file_raises_naming_the_path(tmp_path):
    write(tmp_path, "/etc/sysctl.d", "not a directory")
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError) as info:
        fs.listdir("/etc/sysctl.d")
    assert info.value.path == "/etc/sysctl.d"
    assert info.value.reason == os.strerror(errno.ENOTDIR)


# -- NUL and odd paths ----------------------------------------------------------------------------
def test_nul_in_path_is_an_fserror_not_a_valueerror(tmp_path):
    write(tmp_path, "/proc/cmdline", "ro\n")
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError) as info:
        fs.read_value("/proc/cmdline\x00/../../etc/passwd")
    assert "NUL" in info.value.reason
    assert "\x00" not in info.value.path
    assert fs.try_value("/proc/cmd\x00line") is None
    assert fs.exists("/proc/cmd\x00line") is False
    with pytest.raises(FsError):
        fs.listdir("/proc\x00")


# -- permission denied ------------------------------------------------------------------------------
def _permission_tree(base):
    root = base / "root"
    write(root, "/etc/pve/lxc/101.conf", "arch: amd64\n", mode=0o000)
    os.makedirs(os.path.join(str(root), "etc/sysctl.d"))
    write(root, "/etc/sysctl.d/10-x.conf", "kernel.x = 1\n")
    os.chmod(os.path.join(str(root), "etc/sysctl.d"), 0o000)
    for dirpath, _dirs, _files in os.walk(str(root)):
        if not dirpath.endswith("sysctl.d"):
            os.chmod(dirpath, 0o755)
    return root


def _read_denied(root):
    fs = FsRoot(str(root))
    out = {}
    for name, call in (("read", lambda: fs.read_text("/etc/pve/lxc/101.conf")),
                       ("listdir", lambda: fs.listdir("/etc/sysctl.d")),
                       ("inside", lambda: fs.read_text("/etc/sysctl.d/10-x.conf"))):
        try:
            call()
            out[name] = None
        except FsError as exc:
            out[name] = (exc.path, exc.reason)
    out["try"] = fs.try_value("/etc/pve/lxc/101.conf", "dflt")
    return out


def _assert_denied(out):
    denied = os.strerror(errno.EACCES)
    assert out["read"] == ("/etc/pve/lxc/101.conf", denied)
    assert out["listdir"] == ("/etc/sysctl.d", denied)
    assert out["inside"] == ("/etc/sysctl.d/10-x.conf", denied)
    assert out["try"] == "dflt"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permission bits")
def test_permission_denied_names_the_path_unprivileged(public_tmp):
    _assert_denied(_read_denied(_permission_tree(public_tmp)))


@pytest.mark.skipif(os.geteuid() != 0, reason="drops privileges in a forked child; needs root")
def test_permission_denied_names_the_path_as_dropped_root(public_tmp):
    root = _permission_tree(public_tmp)
    # as root the same reads succeed (this is why the check runs in a child as nobody)
    fs = FsRoot(str(root))
    assert fs.read_value("/etc/pve/lxc/101.conf") == "arch: amd64"
    _assert_denied(run_unprivileged(lambda: _read_denied(root)))


@pytest.mark.parametrize("make", ["missing", "file", "loop"])
def test_a_root_that_is_no_directory_is_refused_by_name(tmp_path, make):
    """Issue 33 (8): a regular file or a symlink loop as pvetune_root was blamed on the policy, then on the lock's
    release with a raw [Errno 40]."""
    root = tmp_path / "root"
    if make == "file":
        root.write_text("x")
    elif make == "loop":
        root.symlink_to(root)
    with pytest.raises(ValueError) as info:
        FsRoot(str(root))
    assert str(info.value) == "root %s is not a directory" % root
