"""NVIDIA nodes a CT gets from other directories and from hook scripts (concerns/lxcgpu_sources), through a root."""
import os
import stat

import pytest
from ansible.module_utils.pvetune.concerns.lxcgpu.checks import evaluate_ct
from ansible.module_utils.pvetune.concerns.lxcgpu.regen import regenerate
from ansible.module_utils.pvetune.concerns.lxcgpu.sources import custom_sources, hook_nodes, read_ct_sources
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.ct_config import parse_ct_config
from ansible.module_utils.pvetune.formats.dev_nodes import stat_paths

from test_lxcgpu import host, read, REAL

# The real driver-595 host (uvm 510, caps 237) and the real custom-directory CT of frigate issue 8652.
HOST = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
TERRELSA = read(REAL, "lxc_conf", "terrelsa13_frigate_2051_custom_dev_dir_fragment.conf")
CUSTOM = "/lxc/102010/devices"


def node(path, major, minor):
    return {"path": path, "type": "c", "major": major, "minor": minor, "mode": "crw-rw-rw-"}


def sources(*nodes, unknown=(), hooks=None):
    return {"nodes": list(nodes), "unknown": list(unknown), "hooks": hooks or {}}


def evaluate(data, src):
    majors, nodes, registered = HOST
    return evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered, cgroup_version=2,
                       sources=src)


def regen(data, src):
    majors, nodes, registered = HOST
    return regenerate(parse_ct_config(data), majors, nodes, char_majors_registered=registered, cgroup_version=2,
                      sources=src)


def test_custom_directory_nodes_are_the_cts_nvidia_nodes():
    """Issue 13 case 2: nodes bound from /lxc/102010/devices to dev/nvidia0/1 are NVIDIA nodes (by their target)."""
    ct = parse_ct_config(TERRELSA)
    assert custom_sources(ct) == [CUSTOM + "/nvidia0", CUSTOM + "/nvidia1"]   # not the Coral apex nodes
    src = sources(node(CUSTOM + "/nvidia0", 195, 0), node(CUSTOM + "/nvidia1", 195, 1))
    result = evaluate(TERRELSA, src)
    assert result["uses_nvidia"] and result["status"] == "warn"
    assert result["missing_control_nodes"] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    # unprivileged: 1, so its device list is allow-all (Proxmox VE 7+) and only the control nodes are missing
    assert result["uncovered"] == [] and not any("not allowed" in m for m in result["messages"])
    new, changes = regen(TERRELSA, src)
    assert [c["new"] for c in changes] == [
        "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file",
    ]
    assert evaluate(new, src)["status"] == "pass"
    assert regen(new, src) == (new, [])


def test_custom_directory_privileged_ct_gets_allow_lines_too():
    data = TERRELSA.replace(b"unprivileged: 1\n", b"unprivileged: 0\n")
    src = sources(node(CUSTOM + "/nvidia0", 195, 0), node(CUSTOM + "/nvidia1", 195, 1))
    assert evaluate(data, src)["status"] == "warn"   # the GPUs are allowed; the control nodes are not mounted
    new, changes = regen(data, src)
    assert [c["new"] for c in changes][3:] == [
        "lxc.cgroup2.devices.allow: c 195:255 rwm",   # per-minor, like the CT's own 195:0 / 195:1 lines
        "lxc.cgroup2.devices.allow: c 510:0 rwm",
        "lxc.cgroup2.devices.allow: c 510:1 rwm",
    ]
    assert evaluate(new, src)["status"] == "pass"
    assert regen(new, src) == (new, [])


def test_custom_source_gone_or_unknown():
    src = sources(node(CUSTOM + "/nvidia0", 195, 0))   # nvidia1 was deleted (optional: the CT starts without it)
    result = evaluate(TERRELSA, src)
    assert any(CUSTOM + "/nvidia1 does not exist on the host (optional" in m for m in result["messages"])
    snapshot = sources(unknown=[CUSTOM + "/nvidia0", CUSTOM + "/nvidia1"])
    result = evaluate(TERRELSA, snapshot)
    assert result["status"] == "warn"
    assert any("cannot tell what %s/nvidia0 is" % CUSTOM in m for m in result["messages"])


def test_custom_node_with_an_old_major_fails_and_the_fix_says_what_to_do():
    data = (b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
            b"lxc.cgroup2.devices.allow: c 509:* rwm\n"
            b"lxc.mount.entry: /srv/nv/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            b"lxc.mount.entry: /srv/nv/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            b"lxc.mount.entry: /srv/nv/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            b"lxc.mount.entry: /srv/nv/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n")
    src = sources(node("/srv/nv/nvidia0", 195, 0), node("/srv/nv/nvidiactl", 195, 255),
                  node("/srv/nv/nvidia-uvm", 509, 0), node("/srv/nv/nvidia-uvm-tools", 509, 1))
    result = evaluate(data, src)
    assert result["status"] == "fail"
    assert [(n["source"], n["major"], n["host_major"]) for n in result["stale_nodes"]] == [
        ("/srv/nv/nvidia-uvm", 509, 510), ("/srv/nv/nvidia-uvm-tools", 509, 510)]
    assert any("recreate it (mknod -m 666 /srv/nv/nvidia-uvm c 510 0) or bind /dev/nvidia-uvm" in m
               for m in result["messages"])
    new, changes = regen(data, src)
    assert new == data and changes[0]["action"] == "refused"
    assert "line 5: /srv/nv/nvidia-uvm" in changes[0]["reason"] and "mknod -m 666" in changes[0]["reason"]


def test_hook_that_mknods_literal_majors():
    script = ("#!/bin/sh\n# make the NVIDIA nodes\n"
              "mknod -m 666 ${LXC_ROOTFS_MOUNT}/dev/nvidia0 c 195 0\n"
              "mknod -m 666 ${LXC_ROOTFS_MOUNT}/dev/nvidiactl c 195 255\n"
              "mknod -m 666 ${LXC_ROOTFS_MOUNT}/dev/nvidia-uvm c 509 0  # uvm\n"
              "mknod -m 666 ${LXC_ROOTFS_MOUNT}/dev/nvidia-uvm-tools c $(awk '/nvidia-uvm/{print $1}' "
              "/proc/devices) 1\n")
    made = hook_nodes(script)
    assert [(n["ct_path"], n["major"], n["literal"]) for n in made] == [
        ("/dev/nvidia0", 195, True), ("/dev/nvidiactl", 195, True), ("/dev/nvidia-uvm", 509, True),
        ("/dev/nvidia-uvm-tools", None, False)]
    data = (b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
            b"lxc.cgroup2.devices.allow: c 509:* rwm\n"
            b"lxc.hook.autodev: /var/lib/lxc/101/mknod-nvidia.sh\n")
    result = evaluate(data, sources(hooks={"/var/lib/lxc/101/mknod-nvidia.sh": script}))
    assert result["status"] == "fail"
    assert any("hook /var/lib/lxc/101/mknod-nvidia.sh (its line 5) makes /dev/nvidia-uvm with major 509" in m
               for m in result["messages"])
    fixed = script.replace("c 509 0", "c 510 0")
    result = evaluate(data, sources(hooks={"/var/lib/lxc/101/mknod-nvidia.sh": fixed}))
    assert result["status"] == "fail" and any("stale NVIDIA allow line" in m for m in result["messages"])
    new, changes = regen(data, sources(hooks={"/var/lib/lxc/101/mknod-nvidia.sh": fixed}))
    assert [c["action"] for c in changes] == ["replace"] and b"c 510:* rwm" in new


def test_unreadable_hook_cannot_tell():
    data = (b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
            b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            b"lxc.hook.pre-start: /root/gpu-hook.sh start\n")
    result = evaluate(data, sources(hooks={"/root/gpu-hook.sh": {"error": "No such file or directory"}}))
    assert any("cannot tell which device nodes hook /root/gpu-hook.sh makes (No such file or directory)" in m
               for m in result["messages"])


def test_read_ct_sources_and_stat_paths_through_a_root(tmp_path):
    """A git-like tree (no char devices under /dev): the snapshot listing says what the custom nodes are."""
    root = tmp_path / "root"
    (root / ".pvetune").mkdir(parents=True)
    (root / "dev").mkdir()
    (root / ".pvetune" / "dev_nvidia.ls").write_text(
        "crw-rw-rw- 1 root root 195, 0 Jan  1 00:00 /dev/nvidia0\n"
        "crw-rw-rw- 1 root root 195, 0 Jan  1 00:00 /lxc/102010/devices/nvidia0\n")
    (root / "lxc" / "hooks").mkdir(parents=True)
    (root / "lxc" / "hooks" / "gpu.sh").write_text("mknod /dev/nvidia0 c 195 0\n")
    fsroot = FsRoot(str(root))
    nodes, unknown = stat_paths(fsroot, [CUSTOM + "/nvidia0", CUSTOM + "/nvidia1"])
    assert [n["path"] for n in nodes] == [CUSTOM + "/nvidia0"] and unknown == [CUSTOM + "/nvidia1"]
    ct = parse_ct_config(TERRELSA + b"lxc.hook.mount: /lxc/hooks/gpu.sh\nlxc.hook.autodev: /lxc/hooks/none.sh\n")
    src = read_ct_sources(fsroot, ct)
    assert src["unknown"] == [CUSTOM + "/nvidia1"]
    assert src["hooks"]["/lxc/hooks/gpu.sh"].startswith("mknod") and "error" in src["hooks"]["/lxc/hooks/none.sh"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_stat_paths_live_nodes(tmp_path):
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    os.mknod(str(root / "dev" / "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (root / "srv" / "nv").mkdir(parents=True)
    os.mknod(str(root / "srv" / "nv" / "nvidia-uvm"), 0o666 | stat.S_IFCHR, os.makedev(509, 0))
    nodes, unknown = stat_paths(FsRoot(str(root)), ["/srv/nv", "/srv/gone"])
    assert unknown == [] and [(n["path"], n["type"], n["major"]) for n in nodes] == [
        ("/srv/nv", "d", None), ("/srv/nv/nvidia-uvm", "c", 509)]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_collect_describes_custom_nodes_in_the_snapshot_listing(tmp_path):
    """collect.yml's snapshot lists the nodes a CT binds from another directory, so its audit can judge them."""
    import io
    import tarfile

    from ansible.module_utils.pvetune.collect import collect
    from ansible.module_utils.pvetune.core.runner import Runner

    root = tmp_path / "root"
    for rel in ("dev", "srv/nv", "etc/pve/lxc", "proc"):
        (root / rel).mkdir(parents=True)
    os.mknod(str(root / "dev" / "nvidia0"), 0o666 | stat.S_IFCHR, os.makedev(195, 0))
    os.mknod(str(root / "srv" / "nv" / "nvidia-uvm"), 0o666 | stat.S_IFCHR, os.makedev(509, 0))
    (root / "proc" / "devices").write_text("Character devices:\n195 nvidia\n510 nvidia-uvm\n\nBlock devices:\n")
    (root / "etc" / "pve" / "lxc" / "101.conf").write_text(
        "lxc.cgroup2.devices.allow: c 195:* rwm\n"
        "lxc.mount.entry: /srv/nv/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
    data, _info = collect(str(root), lambda fsroot: Runner(fsroot, lambda *a, **k: (127, "", "not here")))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        listing = tar.extractfile("./.pvetune/dev_nvidia.ls").read().decode()
    assert "509,   0 Jan  1 00:00 /srv/nv/nvidia-uvm" in listing and "/dev/nvidia0" in listing


def test_devn_deny_write_is_a_warning():
    data = b"dev0: /dev/nvidia0,deny-write=1\ndev1: /dev/nvidiactl\ndev2: /dev/nvidia-uvm\n"
    result = evaluate(data, None)
    assert result["status"] == "warn"
    assert any("line 1: dev0 has deny-write" in m for m in result["messages"])
    assert evaluate(data.replace(b",deny-write=1", b""), None)["status"] == "pass"


def test_blank_before_colon_is_a_line_pct_drops():
    """parse_pct_config: an lxc.* key takes ':' right after it; 'lxc.x : y' is dropped, so LXC never reads it."""
    data = (b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
            b"lxc.cgroup2.devices.allow : c 510:* rwm\n"
            b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            b"lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
    ct = parse_ct_config(data)
    assert ct.lines[1].kind == "garbage" and ct.lines[1].rule is None and "pct drops" in ct.lines[1].problem
    result = evaluate(data, None)
    assert result["status"] == "fail"   # /dev/nvidia-uvm is not allowed: the 510 line never reaches LXC
    assert any("line 2: cannot be read with certainty: pct drops this line" in m for m in result["messages"])
    new, changes = regen(data, None)
    assert changes[0]["action"] == "refused" and "line 2" in changes[0]["reason"]
