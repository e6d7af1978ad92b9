"""Unit tests for module_utils/pvetune/concerns/lxcgpu/checks.py (NVIDIA passthrough to LXC CTs).

Real inputs live in tests/fixtures/realdata/ (see SOURCES.md there); the /proc/devices texts in
tests/fixtures/lxcgpu/ are constructed from the real majors (their headers say from which file).
"""

import os
import re
import stat

import pytest
from ansible.module_utils.pvetune.concerns.lxcgpu.checks import evaluate_ct
from ansible.module_utils.pvetune.concerns.lxcgpu.regen import diff_lines, regenerate
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.ct_config import (
    KEY_ALLOW_V1,
    KEY_ALLOW_V2,
    parse_ct_config,
    parse_device_rule,
)
from ansible.module_utils.pvetune.formats.dev_nodes import parse_ls_dev, stat_dev_nodes
from ansible.module_utils.pvetune.formats.proc_devices import nvidia_majors, parse_proc_devices

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
REAL = os.path.join(FIXTURES, "realdata")
OWN = os.path.join(FIXTURES, "lxcgpu")
CT_PATH = "/etc/pve/lxc/101.conf"


def read(*parts):
    with open(os.path.join(*parts), "rb") as handle:
        return handle.read()


def lines_of(data):
    """Lines with their endings (only LF splits: a CR stays with its line)."""
    return re.findall(rb"[^\n]*\n|[^\n]+$", data)


def proc(name):
    return parse_proc_devices(read(OWN, name))


def listing(name):
    return parse_ls_dev(read(REAL, "dev_listing", name).decode("utf-8"))


def host(proc_name, listing_name=None, nodes=None):
    """(host_majors, host_nodes, registered) for a constructed /proc/devices + a real listing."""
    devices = proc(proc_name)
    return nvidia_majors(devices), nodes if nodes is not None else listing(listing_name), devices


def uvm_nodes(uvm_major, gpus=(0,)):
    """A standard NVIDIA node set with the given nvidia-uvm major (for majors no real listing has)."""
    nodes = [{"path": "/dev/nvidia%d" % g, "type": "c", "major": 195, "minor": g, "mode": "crw-rw-rw-"}
             for g in gpus]
    nodes += [
        {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255, "mode": "crw-rw-rw-"},
        {"path": "/dev/nvidia-modeset", "type": "c", "major": 195, "minor": 254, "mode": "crw-rw-rw-"},
        {"path": "/dev/nvidia-uvm", "type": "c", "major": uvm_major, "minor": 0, "mode": "crw-rw-rw-"},
        {"path": "/dev/nvidia-uvm-tools", "type": "c", "major": uvm_major, "minor": 1, "mode": "crw-rw-rw-"},
    ]
    return nodes


def ct_of(data, path=CT_PATH):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return parse_ct_config(data, path)


def fix(data, *args, **kwargs):
    """regenerate() on bytes; also asserts idempotence and byte-exact parsing."""
    ct = ct_of(data)
    assert ct.to_bytes() == (data.encode() if isinstance(data, str) else data)
    new, changes = regenerate(ct, *args, **kwargs)
    again, more = regenerate(parse_ct_config(new, CT_PATH), *args, **kwargs)
    assert (again, more) == (new, [])
    return new, changes


def privileged(data):
    """The same config as a privileged CT, where the device list is an allow-list and allow lines count."""
    assert b"unprivileged: 1\n" in data
    return data.replace(b"unprivileged: 1\n", b"unprivileged: 0\n")


def changed_indexes(old, new):
    old_lines, new_lines = lines_of(old), lines_of(new)
    assert len(old_lines) == len(new_lines)
    return [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]


# ---------------------------------------------------------------------------
# /proc/devices
# ---------------------------------------------------------------------------
def test_parse_proc_devices_sections():
    devices = proc("proc_devices_duaneya_boot_uvm511.txt")
    assert devices["char"][195] == ["nvidia-frontend"]
    assert devices["char"][511] == ["nvidia-uvm"]
    assert devices["char"][5] == ["/dev/tty", "/dev/console", "/dev/ptmx", "ttyprintk"]
    assert 254 not in devices["char"] and devices["block"][254] == ["mdp"]
    assert devices["block"][8] == ["sd"]


def test_nvidia_majors_same_host_two_boots():
    assert nvidia_majors(proc("proc_devices_duaneya_boot_uvm511.txt")) == {
        "nvidia-frontend": 195, "nvidia-nvlink": 235, "nvidia-uvm": 511}
    assert nvidia_majors(proc("proc_devices_duaneya_boot_uvm234.txt")) == {
        "nvidia-frontend": 195, "nvidia-uvm": 234, "nvidia-nvlink": 236}


def test_constructed_proc_devices_match_real_kernel_log():
    """The constructed fixtures carry the majors the real log shows for the same host."""
    log = read(REAL, "dev_majors", "duaneya_dmesg_uvm_nvlink_majors_change.txt").decode("utf-8", "replace")
    uvm = {int(m) for m in re.findall(r"nvidia-uvm: Loaded the UVM driver.*major device number (\d+)", log)}
    nvlink = {int(m) for m in re.findall(r"nvidia-nvlink: Nvlink Core is being initialized, major device "
                                         r"number (\d+)", log)}
    assert uvm == {511, 234} and nvlink == {235, 236}
    boot_a = nvidia_majors(proc("proc_devices_duaneya_boot_uvm511.txt"))
    boot_b = nvidia_majors(proc("proc_devices_duaneya_boot_uvm234.txt"))
    assert {boot_a["nvidia-uvm"], boot_b["nvidia-uvm"]} == uvm
    assert {boot_a["nvidia-nvlink"], boot_b["nvidia-nvlink"]} == nvlink
    eler = read(REAL, "dev_majors", "eler_dmesg_uvm_nvlink_majors.txt").decode("utf-8", "replace")
    assert re.findall(r"nvidia-uvm: Loaded the UVM driver.*major device number (\d+)", eler) == ["244"]


def test_nvidia_majors_caps_and_imex_are_different_drivers():
    real = parse_proc_devices(read(REAL, "proc_devices", "nvidia_imex_guide_grep.txt"))
    assert nvidia_majors(real) == {"nvidia-caps-imex-channels": 234}
    majors = nvidia_majors(proc("proc_devices_imex_caps.txt"))
    assert majors["nvidia-caps"] == 511
    assert majors["nvidia-caps-imex-channels"] == 234
    assert majors["nvidia"] == 195
    assert "nvidia-uvm" not in majors


def test_nvidia_majors_frontend_names():
    old = nvidia_majors(parse_proc_devices("Character devices:\n195 nvidia-frontend\n"))
    new = nvidia_majors(parse_proc_devices("Character devices:\n195 nvidia\n"))
    assert old == {"nvidia-frontend": 195} and new == {"nvidia": 195}
    assert nvidia_majors(proc("proc_devices_nixpkgs_595_uvm510.txt")) == {
        "nvidia": 195, "nvidia-caps": 237, "nvidia-uvm": 510}


# ---------------------------------------------------------------------------
# /dev listings
# ---------------------------------------------------------------------------
def majmin(nodes):
    return {n["path"]: (n["major"], n["minor"]) for n in nodes if n["type"] == "c"}


@pytest.mark.parametrize("name, expected", [
    ("nct_50_ls_dev_nv.txt", {"/dev/nvram": (10, 144), "/dev/nvidiactl": (195, 255), "/dev/nvidia0": (195, 0),
                              "/dev/nvidia-uvm-tools": (234, 1), "/dev/nvidia-uvm": (234, 0),
                              "/dev/nvidia-modeset": (195, 254)}),
    ("negativo17_29_ls_nvidia.txt", {"/dev/nvidia0": (195, 0), "/dev/nvidiactl": (195, 255),
                                     "/dev/nvidia-modeset": (195, 254), "/dev/nvidia-uvm": (239, 0),
                                     "/dev/nvidia-uvm-tools": (239, 1)}),
    ("saberwolf64_ls_dev_nvidia_in_ct.txt", {"/dev/nvidia-modeset": (195, 254), "/dev/nvidia-uvm": (511, 0),
                                             "/dev/nvidia-uvm-tools": (511, 1), "/dev/nvidia0": (195, 0),
                                             "/dev/nvidiactl": (195, 255)}),
    ("lfedge_eve_6387_ls.txt", {"/dev/nvidia-modeset": (195, 254), "/dev/nvidia-uvm": (487, 0),
                                "/dev/nvidia-uvm-tools": (487, 1)}),
    ("nixpkgs_525475_ll_dev_nvidia_595.txt", {"/dev/nvidia-modeset": (195, 254), "/dev/nvidia-uvm": (510, 0),
                                              "/dev/nvidia-uvm-tools": (510, 1), "/dev/nvidia0": (195, 0),
                                              "/dev/nvidiactl": (195, 255),
                                              "/dev/nvidia-caps/nvidia-cap1": (237, 1),
                                              "/dev/nvidia-caps/nvidia-cap2": (237, 2)}),
    ("dra_driver_304_ls_dev_nvidia_caps.txt", {"/dev/nvidia-caps/nvidia-cap1": (511, 1),
                                               "/dev/nvidia-caps/nvidia-cap2": (511, 2),
                                               "/dev/nvidia-caps/nvidia-cap4323": (234, 4323)}),
])
def test_parse_ls_dev_real(name, expected):
    nodes = listing(name)
    assert majmin(nodes) == expected
    assert all(n["mode"].startswith("c") and len(n["mode"]) == 10 for n in nodes)


def test_parse_ls_dev_eza_icons_and_caps_block():
    text = read(REAL, "dev_listing", "nixpkgs_525475_ll_dev_nvidia_595.txt").decode("utf-8")
    assert "/dev/nvidia-caps:" in text
    assert any(0xF0000 <= ord(char) <= 0xFFFFD for char in text)      # eza icon glyphs (private use area)
    nodes = parse_ls_dev(text)
    assert [n["path"] for n in nodes][-2:] == ["/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"]
    assert nodes[-1]["mode"] == "cr--r--r--"


def test_parse_ls_dev_other_shapes():
    text = ("ls: cannot access '/dev/nvidia1': No such file or directory\n"
            "drwxr-xr-x  2 root root      80 Mar 25 16:33 /dev/nvidia-caps\n"
            "lrwxrwxrwx  1 root root       7 Mar 25 16:33 /dev/nvidia-alias -> nvidia0\n"
            "crw-rw-rw-+ 1 root video 195,   0 Mar 25 16:33 /dev/nvidia0\n"
            "total 0\n"
            "/dev/nvidia-caps-imex-channels:\n"
            "cr--------  1 root root 234,    0 Mar 25 16:33 channel0\n")
    nodes = parse_ls_dev(text)
    assert nodes == [
        {"path": "/dev/nvidia-caps", "type": "d", "major": None, "minor": None, "mode": "drwxr-xr-x"},
        {"path": "/dev/nvidia-alias", "type": "l", "major": None, "minor": None, "mode": "lrwxrwxrwx"},
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "mode": "crw-rw-rw-"},
        {"path": "/dev/nvidia-caps-imex-channels/channel0", "type": "c", "major": 234, "minor": 0,
         "mode": "cr--------"},
    ]
    assert parse_ls_dev("cr-------- 1 root root 511, 1 Mar 25 16:33 nvidia-cap1\n", directory="/x")[0]["path"] == \
        "/x/nvidia-cap1"


# ---------------------------------------------------------------------------
# stat_dev_nodes
# ---------------------------------------------------------------------------
def _mknod(path, major, minor):
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    except (OSError, AttributeError) as exc:
        pytest.skip("cannot create device nodes here: %s" % exc)


def test_stat_dev_nodes_real_nodes(tmp_path):
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    _mknod(str(dev / "nvidia0"), 195, 0)
    _mknod(str(dev / "nvidia-uvm"), 509, 0)
    _mknod(str(dev / "nvidia-caps" / "nvidia-cap1"), 237, 1)
    _mknod(str(dev / "null"), 1, 3)
    (tmp_path / ".pvetune").mkdir()
    (tmp_path / ".pvetune" / "dev_nvidia.ls").write_bytes(read(REAL, "dev_listing", "nct_50_ls_dev_nv.txt"))
    nodes, source = stat_dev_nodes(FsRoot(str(tmp_path)))
    assert source == "stat"
    assert majmin(nodes) == {"/dev/nvidia0": (195, 0), "/dev/nvidia-uvm": (509, 0),
                             "/dev/nvidia-caps/nvidia-cap1": (237, 1)}
    assert [n["path"] for n in nodes if n["type"] == "d"] == ["/dev/nvidia-caps"]


def test_stat_dev_nodes_live_like_root_without_nvidia(tmp_path):
    (tmp_path / "dev").mkdir()
    _mknod(str(tmp_path / "dev" / "null"), 1, 3)
    (tmp_path / ".pvetune").mkdir()
    (tmp_path / ".pvetune" / "dev_nvidia.ls").write_bytes(read(REAL, "dev_listing", "nct_50_ls_dev_nv.txt"))
    assert stat_dev_nodes(str(tmp_path)) == ([], "stat")


def test_stat_dev_nodes_git_tree_falls_back_to_listing(tmp_path):
    (tmp_path / "dev" / "nvidia-caps").mkdir(parents=True)        # directories survive git, nodes do not
    (tmp_path / "dev" / "nvidia0").write_text("placeholder")
    (tmp_path / ".pvetune").mkdir()
    data = read(REAL, "dev_listing", "nixpkgs_525475_ll_dev_nvidia_595.txt")
    (tmp_path / ".pvetune" / "dev_nvidia.ls").write_bytes(data)
    nodes, source = stat_dev_nodes(FsRoot(str(tmp_path)))
    assert source == "ls"
    assert nodes == parse_ls_dev(data.decode("utf-8"))


def test_stat_dev_nodes_nothing(tmp_path):
    assert stat_dev_nodes(str(tmp_path)) == ([], "none")


# ---------------------------------------------------------------------------
# CT config model
# ---------------------------------------------------------------------------
REAL_CONFS = ["gma1n_jellyfin_fragment.conf", "mrbloodrune_jellyfin.conf", "mrbloodrune_ollama.conf",
              "saberwolf64_hook_fragment.conf"]


@pytest.mark.parametrize("name", REAL_CONFS)
def test_parse_real_configs_roundtrip(name):
    data = read(REAL, "lxc_conf", name)
    ct = parse_ct_config(data, "/etc/pve/lxc/%s" % name)
    assert ct.to_bytes() == data
    assert ct.sections == [] and ct.warnings == []
    assert ct.lines[0].kind == "comment" and ct.lines[0].display.startswith("# source:")
    assert all(line.section is None for line in ct.lines)


def test_parse_model_details():
    data = (b"# description line\r\n"
            b"arch: amd64\r\n"
            b"cores: 4\r\n"
            b"cores: 8\r\n"
            b"lxc.cgroup2.devices.allow: c 195:* rwm\r\n"
            b"lxc.cgroup.devices.allow = c 510:0 rw\r\n"
            b"lxc.cgroup2.devices.allow: a\r\n"
            b"lxc.cgroup2.devices.deny: c *:* m\r\n"
            b"lxc.cgroup2.devices.allow: c 195 rwm\r\n"
            b"futurekey: whatever\r\n"
            b"\x00\xff\xfe binary \x01 garbage\r\n"
            b"dev0: /dev/nvidia0,gid=44\r\n"
            b"dev1: path=/dev/nvidiactl,mode=0666\r\n"
            b"\r\n"
            b"[snap1]\r\n"
            b"lxc.cgroup2.devices.allow: c 506:* rwm\r\n"
            b"[pve:pending]\r\n"
            b"cores: 2")
    ct = parse_ct_config(data, "/etc/pve/lxc/205.conf")
    assert ct.to_bytes() == data
    assert ct.ctid == "205" and ct.eol == b"\r\n" and not ct.ends_with_newline
    assert ct.sections == ["snap1", "pve:pending"]
    assert [line.kind for line in ct.lines[:4]] == ["comment", "kv", "kv", "kv"]
    v2, v1, allow_all, deny, bad = ct.lines[4:9]
    assert (v2.rule.family, v2.rule.major, v2.rule.minor, v2.rule.access) == ("v2", 195, None, "rwm")
    assert (v1.rule.family, v1.separator, v1.sep, v1.rule.major, v1.rule.minor) == ("v1", "=", " = ", 510, 0)
    assert allow_all.rule.all and deny.rule.kind == "deny" and deny.rule.major is None
    assert bad.rule is None and "'c 195 rwm'" in bad.problem
    assert ct.lines[9].key == "futurekey"
    garbage = ct.lines[10]
    assert garbage.kind == "garbage" and not garbage.decodable
    assert garbage.raw == b"\x00\xff\xfe binary \x01 garbage\r\n"
    assert ct.lines[11].dev["path"] == "/dev/nvidia0" and ct.lines[12].dev["path"] == "/dev/nvidiactl"
    assert ct.lines[15].section == "snap1" and ct.lines[15].rule.major == 506
    assert ct.lines[-1].section == "pve:pending" and ct.lines[-1].eol == b""
    problems = {w["line_no"]: w["message"] for w in ct.warnings}
    assert "duplicate key cores (also line 3)" in problems[4]
    assert 9 in problems and 11 in problems
    assert set(problems) == {4, 9, 11}
    assert ct.get_all("cores") == ["4", "8"] and ct.get_all("cores", "pve:pending") == ["2"]


# As LXC reads them (lxc src/lxc/cgroups/cgfsng.c device_cgroup_rule_parse at v6.0.5, the version Proxmox VE ships;
# docs/DESIGN.md "CT configs as pct and LXC read them"): up to three access characters, the rest never read.
@pytest.mark.parametrize("value, expected", [
    ("c 195:* rwm", ("c", 195, None, "rwm", "")),
    ("c 195:0 rw", ("c", 195, 0, "rw", "")),
    ("c 510:1 rw", ("c", 510, 1, "rw", "")),
    ("c *:* m", ("c", None, None, "m", "")),
    ("a", ("a", None, None, "", "")),
    ("b 8:* r", ("b", 8, None, "r", "")),
    ("c 195:* rwm # adjust 195", ("c", 195, None, "rwm", " # adjust 195")),
    ("c 195:* rwm#x", ("c", 195, None, "rwm", "#x")),
    ("c 195:* rrw", ("c", 195, None, "rrw", "")),
    ("c\t195:* mrw", ("c", 195, None, "mrw", "")),
    ('"c 195:* rwm"', ("c", 195, None, "rwm", "")),
    ("a *:* rwm", ("a", None, None, "rwm", "")),
])
def test_parse_device_rule(value, expected):
    rule, problem = parse_device_rule(value)
    assert problem is None
    assert (rule.type, rule.major, rule.minor, rule.access, rule.ignored) == expected
    if rule.major is not None:
        start, end = rule.major_span
        assert value[start:end] == str(rule.major)


@pytest.mark.parametrize("value, why", [
    ("c 195 rwm", "lacks major:minor"),
    ("x 1:2 rw", "type must be a, b or c"),
    ("C 1:2 rw", "type must be a, b or c"),
    ("c 195:* rwx", "each must be r, w or m"),
    ("c 195:* rw # note", "found ' '"),       # the third access character is a blank: LXC rejects it
    ("c 195:* r #x", "found ' '"),
    ("c 195:* rw#x", "found '#'"),
    ("c  195:* rwm", "exactly one blank"),     # two blanks after the type
    ("c 195:*  rwm", "found ' '"),             # two blanks before the access field
    ("c 226:128", "access field must follow"),  # no access field at all
    ("", "type must be a, b or c"),
])
def test_parse_device_rule_bad(value, why):
    rule, problem = parse_device_rule(value)
    assert rule is None and why in problem


def test_parse_path_rule():
    rule, problem = parse_device_rule("/dev/nvidia0 rw # the GPU")
    assert problem is None and rule.path == "/dev/nvidia0" and rule.access == "rw" and rule.major is None
    assert parse_device_rule("/dev/nvidia0")[0] is None
    assert parse_device_rule("/dev/nvidia0 rw", kind="deny")[0] is None


def test_parse_rejects_non_text():
    with pytest.raises(TypeError):
        parse_ct_config(None)
    assert parse_ct_config(b"").to_bytes() == b""
    assert parse_ct_config("x: é\n").to_bytes() == "x: é\n".encode("utf-8")


# ---------------------------------------------------------------------------
# Real CT configs, uvm major moved
# ---------------------------------------------------------------------------
def _assert_fixed(data, new, changes, expected):
    """expected: {0-based line index: new line bytes}; everything else byte-identical."""
    assert changed_indexes(data, new) == sorted(expected)
    new_lines = lines_of(new)
    for index, line in expected.items():
        assert new_lines[index] == line
    assert [c["action"] for c in changes] == ["replace"] * len(expected)
    assert [c["line_no"] for c in changes] == [i + 1 for i in sorted(expected)]


@pytest.mark.parametrize("name, stale_line", [("mrbloodrune_ollama.conf", 23), ("mrbloodrune_jellyfin.conf", 15)])
def test_mrbloodrune_506_to_509_recorded_major(name, stale_line):
    """uvm moved 506 -> 509; 506 was recorded as NVIDIA's by an earlier run (no /proc/devices needed)."""
    data = privileged(read(REAL, "lxc_conf", name))
    ct = parse_ct_config(data, CT_PATH)
    majors = {"nvidia-frontend": 195, "nvidia-uvm": 509}
    known = {506: "nvidia-uvm"}
    result = evaluate_ct(ct, majors, uvm_nodes(509), known_nvidia_majors=known)
    assert result["status"] == "fail" and result["uses_nvidia"]
    assert [(s["line_no"], s["major"]) for s in result["stale_lines"]] == [(stale_line, 506)]
    assert "recorded as NVIDIA's (nvidia-uvm)" in result["stale_lines"][0]["reason"]
    assert [(u["node"], u["major"]) for u in result["uncovered"]] == [("/dev/nvidia-uvm", 509),
                                                                     ("/dev/nvidia-uvm-tools", 509)]
    new, changes = fix(data, majors, uvm_nodes(509), known_nvidia_majors=known)
    _assert_fixed(data, new, changes, {stale_line - 1: b"lxc.cgroup2.devices.allow: c 509:* rwm\n"})
    assert changes[0]["old"] == "lxc.cgroup2.devices.allow: c 506:* rwm"
    after = evaluate_ct(parse_ct_config(new), majors, uvm_nodes(509), known_nvidia_majors=known)
    assert after["status"] == "pass" and after["stale_lines"] == [] and after["uncovered"] == []


@pytest.mark.parametrize("name, stale_line", [("mrbloodrune_ollama.conf", 23), ("mrbloodrune_jellyfin.conf", 15)])
def test_mrbloodrune_506_on_real_595_host(name, stale_line):
    """Real driver-595 listing (eza `ll`, uvm 510): 506 is registered to no driver -> stale, rewritten to 510."""
    data = privileged(read(REAL, "lxc_conf", name))
    majors, nodes, registered = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
    result = evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered)
    assert [(s["line_no"], s["major"]) for s in result["stale_lines"]] == [(stale_line, 506)]
    assert "registered to no driver" in result["stale_lines"][0]["reason"]
    new, changes = fix(data, majors, nodes, char_majors_registered=registered)
    _assert_fixed(data, new, changes, {stale_line - 1: b"lxc.cgroup2.devices.allow: c 510:* rwm\n"})
    assert evaluate_ct(parse_ct_config(new), majors, nodes, char_majors_registered=registered)["status"] == "pass"


@pytest.mark.parametrize("name", ["mrbloodrune_ollama.conf", "mrbloodrune_jellyfin.conf"])
def test_unprivileged_ct_allow_lines_have_no_effect(name):
    """As published (unprivileged: 1): Proxmox VE 7+ gives an unprivileged CT an allow-all device list
    (pve-container src/lxc-pve-userns.conf), and LXC skips allow rules in that mode: the stale 506 does no harm."""
    data = read(REAL, "lxc_conf", name)
    majors, nodes, registered = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
    result = evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered)
    assert result["status"] == "pass" and result["stale_lines"] == [] and result["uncovered"] == []
    assert any(m.startswith("unprivileged CT: Proxmox VE 7+") and "do no harm" in m for m in result["messages"])
    assert regenerate(parse_ct_config(data), majors, nodes, char_majors_registered=registered) == (data, [])
    # a deny rule still counts in that mode
    denied = data + b"lxc.cgroup2.devices.deny: c 510:* rwm\n"
    assert evaluate_ct(parse_ct_config(denied), majors, nodes, char_majors_registered=registered)["status"] == "warn"


def test_gma1n_per_minor_510_to_234():
    """Per-minor rw lines stay per-minor: 510:0 -> 234:0, 510:1 -> 234:1; nvram 10:144 untouched."""
    data = read(REAL, "lxc_conf", "gma1n_jellyfin_fragment.conf")
    majors, nodes, registered = host("proc_devices_duaneya_boot_uvm234.txt", "nct_50_ls_dev_nv.txt")
    result = evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered)
    assert result["status"] == "fail"
    assert [(s["line_no"], s["major"]) for s in result["stale_lines"]] == [(6, 510), (7, 510)]
    new, changes = fix(data, majors, nodes, char_majors_registered=registered)
    _assert_fixed(data, new, changes, {5: b"lxc.cgroup2.devices.allow: c 234:0 rw\n",
                                       6: b"lxc.cgroup2.devices.allow: c 234:1 rw\n"})
    assert b"lxc.cgroup2.devices.allow: c 10:144 rw\n" in lines_of(new)
    assert evaluate_ct(parse_ct_config(new), majors, nodes, char_majors_registered=registered)["status"] == "pass"


def test_gma1n_on_host_where_510_is_current():
    data = read(REAL, "lxc_conf", "gma1n_jellyfin_fragment.conf")
    majors, nodes, registered = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
    result = evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered)
    assert result["status"] == "pass", result["messages"]
    assert regenerate(parse_ct_config(data), majors, nodes, char_majors_registered=registered) == (data, [])


def test_saberwolf64_hook_variant_is_left_alone():
    data = read(REAL, "lxc_conf", "saberwolf64_hook_fragment.conf")
    majors, nodes, registered = host("proc_devices_duaneya_boot_uvm234.txt", "nct_50_ls_dev_nv.txt")
    result = evaluate_ct(parse_ct_config(data), majors, nodes, char_majors_registered=registered)
    assert result["status"] == "skip" and result["uses_nvidia"]
    assert result["stale_lines"] == [] and "hook" in result["messages"][0]
    assert regenerate(parse_ct_config(data), majors, nodes, char_majors_registered=registered) == (data, [])


def test_same_host_reboot_511_to_234_and_back():
    """The duaneya host: uvm 511 on one boot, 234 after the reboot (real kernel log)."""
    data = (b"arch: amd64\n"
            b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
            b"lxc.cgroup2.devices.allow: c 511:* rwm\n"
            b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            b"lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            b"lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            b"lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n")
    boot_a = host("proc_devices_duaneya_boot_uvm511.txt", nodes=uvm_nodes(511))
    boot_b = host("proc_devices_duaneya_boot_uvm234.txt", nodes=uvm_nodes(234))
    assert evaluate_ct(ct_of(data), boot_a[0], boot_a[1], char_majors_registered=boot_a[2])["status"] == "pass"
    moved, _ = fix(data, boot_b[0], boot_b[1], char_majors_registered=boot_b[2])
    assert changed_indexes(data, moved) == [2]
    assert lines_of(moved)[2] == b"lxc.cgroup2.devices.allow: c 234:* rwm\n"
    back, _ = fix(moved, boot_a[0], boot_a[1], char_majors_registered=boot_a[2])
    assert back == data


# ---------------------------------------------------------------------------
# Layout preservation
# ---------------------------------------------------------------------------
GPU_CT = ("arch: amd64\n"
          "lxc.cgroup2.devices.allow: c 195:* rwm\n"
          "lxc.cgroup2.devices.allow: c 506:* rwm\n"
          "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
          "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
          "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
          "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n")
H509 = ({"nvidia": 195, "nvidia-uvm": 509}, uvm_nodes(509))
KNOWN = {506: "nvidia-uvm"}


def test_crlf_and_missing_final_newline():
    data = GPU_CT.replace("\n", "\r\n").encode()[:-2]
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert new == data.replace(b"c 506:* rwm", b"c 509:* rwm")
    assert not new.endswith(b"\n") and new.count(b"\r\n") == data.count(b"\r\n")


def test_crlf_no_final_newline_with_added_lines():
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\r\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file").encode()
    new, changes = fix(data, *H509)
    assert new == ("lxc.cgroup2.devices.allow: c 195:* rwm\r\n"
                   "lxc.cgroup2.devices.allow: c 509:* rwm\r\n"
                   "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\r\n"
                   "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\r\n"
                   "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\r\n"
                   "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file"
                   ).encode()
    assert [c["action"] for c in changes] == ["add"] * 4


def test_snapshot_and_pending_sections_untouched():
    snap = ("\n[snap1]\n"
            "arch: amd64\n"
            "lxc.cgroup2.devices.allow: c 506:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "snaptime: 1700000000\n"
            "\n[pve:pending]\n"
            "lxc.cgroup2.devices.allow: c 506:* rwm\n"
            "cores: 8\n")
    data = (GPU_CT + snap).encode()
    ct = ct_of(data)
    result = evaluate_ct(ct, *H509, known_nvidia_majors=KNOWN)
    assert [s["line_no"] for s in result["stale_lines"]] == [3]
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [2]
    assert new.endswith(snap.encode()) and new.count(b"c 506:* rwm") == 2


def test_snapshot_only_stale_line_means_no_change():
    snap = "\n[snap1]\nlxc.cgroup2.devices.allow: c 506:* rwm\n"
    data = (GPU_CT.replace("c 506:* rwm", "c 509:* rwm") + snap).encode()
    assert evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)["status"] == "pass"
    assert regenerate(ct_of(data), *H509, known_nvidia_majors=KNOWN) == (data, [])


def test_duplicate_unknown_keys_garbage_and_comments_kept():
    data = (b"# CT description, %3A encoded\n"
            b"cores: 2\n"
            b"cores: 4\n"
            b"futurekey: keep me\n"
            b"\x00\xff\xfe binary garbage \x01\n"
            b"   \n"
            + GPU_CT.encode() +
            b"lxc.cgroup2.devices.allow: c 195:* rwm\n")
    ct = ct_of(data)
    assert {w["line_no"] for w in ct.warnings} == {3, 5}
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [8]
    assert lines_of(new)[8] == b"lxc.cgroup2.devices.allow: c 509:* rwm\n"


def test_other_devices_never_stale():
    """Coral (120), /dev/dri (226), nvram (10:144), fb (29) lines: not NVIDIA's business."""
    extra = ("lxc.cgroup2.devices.allow: c 226:0 rwm\n"
             "lxc.cgroup2.devices.allow: c 226:128 rwm\n"
             "lxc.cgroup2.devices.allow: c 120:* rwm\n"
             "lxc.cgroup2.devices.allow: c 10:144 rw\n"
             "lxc.cgroup2.devices.allow: c 29:0 rwm\n"
             "lxc.mount.entry: /dev/dri dev/dri none bind,optional,create=dir\n"
             "lxc.mount.entry: /dev/apex_0 dev/apex_0 none bind,optional,create=file\n")
    data = (GPU_CT + extra).encode()
    majors, nodes, registered = host("proc_devices_duaneya_boot_uvm234.txt", nodes=uvm_nodes(234))
    assert 120 not in registered["char"] and 29 in registered["char"]
    result = evaluate_ct(ct_of(data), majors, nodes, char_majors_registered=registered)
    assert [s["major"] for s in result["stale_lines"]] == [506]
    new, changes = fix(data, majors, nodes, char_majors_registered=registered)
    assert changed_indexes(data, new) == [2]
    assert new.endswith(extra.encode())


def test_major_registered_to_another_driver_is_left_alone():
    """246 was recorded as nvidia-uvm's, but hidraw owns it now: keep it, warn, add the real uvm major."""
    data = GPU_CT.replace("c 506:* rwm", "c 246:* rwm").encode()
    majors, nodes, registered = host("proc_devices_duaneya_boot_uvm234.txt", nodes=uvm_nodes(234))
    known = {246: "nvidia-uvm"}
    result = evaluate_ct(ct_of(data), majors, nodes, known_nvidia_majors=known, char_majors_registered=registered)
    assert result["stale_lines"] == [] and result["status"] == "fail"
    assert result["foreign_lines"][0]["line_no"] == 3 and "hidraw" in result["foreign_lines"][0]["message"]
    new, changes = fix(data, majors, nodes, known_nvidia_majors=known, char_majors_registered=registered)
    assert [(c["action"], c["new"], c["after_line"]) for c in changes] == [
        ("add", "lxc.cgroup2.devices.allow: c 234:* rwm", 2)]
    assert lines_of(new) == lines_of(data)[:2] + [b"lxc.cgroup2.devices.allow: c 234:* rwm\n"] + lines_of(data)[2:]


def test_raw_lxc_equals_style_kept():
    data = GPU_CT.replace(": ", " = ").encode()
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [2]
    assert lines_of(new)[2] == b"lxc.cgroup2.devices.allow = c 509:* rwm\n"
    nv0_only = ("lxc.cgroup2.devices.allow = c 195:0 rw\n"
                "lxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file 0 0\n").encode()
    new, _ = fix(nv0_only, *H509)
    assert lines_of(new) == [
        b"lxc.cgroup2.devices.allow = c 195:0 rw\n",
        b"lxc.cgroup2.devices.allow = c 195:255 rw\n",
        b"lxc.cgroup2.devices.allow = c 509:0 rw\n",
        b"lxc.cgroup2.devices.allow = c 509:1 rw\n",
        b"lxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file 0 0\n",
        b"lxc.mount.entry = /dev/nvidiactl dev/nvidiactl none bind,optional,create=file 0 0\n",
        b"lxc.mount.entry = /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file 0 0\n",
        b"lxc.mount.entry = /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file 0 0\n",
    ]


def test_absolute_mount_target_is_skipped_by_lxc():
    """LXC mounts an absolute target only inside the CT's rootfs ("Ignoring mount point" otherwise)."""
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 /dev/nvidia0 none bind,optional,create=file 0 0\n")
    res = evaluate_ct(ct_of(data), *H509)
    assert res["status"] == "warn"
    assert any("LXC skips this mount entry" in m and "write dev/nvidia0" in m for m in res["messages"])
    inside = data.replace(" /dev/nvidia0 none", " /var/lib/lxc/101/rootfs/dev/nvidia0 none")
    res = evaluate_ct(ct_of(inside), *H509)
    assert not any("LXC skips" in m for m in res["messages"]) and res["missing_control_nodes"]


# ---------------------------------------------------------------------------
# Granularity, keys, devN
# ---------------------------------------------------------------------------
def test_per_minor_never_broadens():
    """A CT that mounts only /dev/nvidia0 keeps 195:0; a host with two GPUs does not change that."""
    data = ("lxc.cgroup2.devices.allow: c 195:0 rw\n"
            "lxc.cgroup2.devices.allow: c 195:255 rw\n"
            "lxc.cgroup2.devices.allow: c 506:0 rw\n"
            "lxc.cgroup2.devices.allow: c 506:1 rw\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n").encode()
    majors, nodes = {"nvidia": 195, "nvidia-uvm": 509}, uvm_nodes(509, gpus=(0, 1))
    new, changes = fix(data, majors, nodes, known_nvidia_majors=KNOWN)
    # uvm-tools is added as a mount (CUDA control node), so 506:1 -> 509:1 is kept, not dropped.
    assert lines_of(new)[:4] == [b"lxc.cgroup2.devices.allow: c 195:0 rw\n",
                                 b"lxc.cgroup2.devices.allow: c 195:255 rw\n",
                                 b"lxc.cgroup2.devices.allow: c 509:0 rw\n",
                                 b"lxc.cgroup2.devices.allow: c 509:1 rw\n"]
    assert b"195:1" not in new and b"195:*" not in new and b"509:*" not in new
    assert lines_of(new)[-1] == b"lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none " \
                                b"bind,optional,create=file\n"


def test_per_minor_stale_line_for_unmounted_node_is_removed():
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 506:0 rw\n"
            "lxc.cgroup2.devices.allow: c 506:7 rw\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n").encode()
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert [(c["action"], c["line_no"]) for c in changes] == [("replace", 2), ("remove", 3), ("add", None)]
    assert lines_of(new)[:3] == [b"lxc.cgroup2.devices.allow: c 195:* rwm\n",
                                 b"lxc.cgroup2.devices.allow: c 509:0 rw\n",
                                 b"lxc.cgroup2.devices.allow: c 509:1 rw\n"]


def test_second_gpu_mounted_gets_per_minor_line():
    data = ("lxc.cgroup2.devices.allow: c 195:0 rwm\n"
            "lxc.cgroup2.devices.allow: c 195:255 rwm\n"
            "lxc.cgroup2.devices.allow: c 509:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n").encode()
    majors, nodes = {"nvidia": 195, "nvidia-uvm": 509}, uvm_nodes(509, gpus=(0, 1))
    result = evaluate_ct(ct_of(data), majors, nodes)
    assert [u["node"] for u in result["uncovered"]] == ["/dev/nvidia1"]
    new, changes = fix(data, majors, nodes)
    assert [(c["action"], c["new"], c["after_line"]) for c in changes] == [
        ("add", "lxc.cgroup2.devices.allow: c 195:1 rwm", 3)]
    assert lines_of(new)[3] == b"lxc.cgroup2.devices.allow: c 195:1 rwm\n"


def test_duplicate_stale_lines_collapse_only_what_we_create():
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 506:* rwm\n"
            "lxc.cgroup2.devices.allow: c 506:* rwm\n" + GPU_CT.split("\n", 3)[3]).encode()
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert [(c["action"], c["line_no"]) for c in changes] == [("replace", 3), ("remove", 4)]
    assert new.count(b"c 195:* rwm") == 2      # the user's own duplicate stays
    assert new.count(b"c 509:* rwm") == 1


def test_cgroup_v1_key_kept():
    data = GPU_CT.replace(KEY_ALLOW_V2, KEY_ALLOW_V1).encode()
    result = evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert result["cgroup_keys"] == {"v2": False, "v1": True}
    assert any("ignores them" in m for m in result["messages"])
    new, _ = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [2]
    assert lines_of(new)[2] == b"lxc.cgroup.devices.allow: c 509:* rwm\n"
    assert evaluate_ct(ct_of(new), *H509)["status"] == "warn"     # v1-only is still worth a warning
    # On a known cgroup v2 host the v1 lines do not count: cgroup2 lines are added.
    new2, changes = fix(data, *H509, known_nvidia_majors=KNOWN, cgroup_version=2)
    assert b"lxc.cgroup2.devices.allow: c 195:0 rwm\n" in lines_of(new2)
    assert b"lxc.cgroup2.devices.allow: c 509:* rwm\n" in lines_of(new2)
    assert b"lxc.cgroup.devices.allow: c 509:* rwm\n" in lines_of(new2)


def test_both_cgroup_keys_each_fixed():
    v1 = GPU_CT.split("\n")[1:3]
    data = (GPU_CT + "\n".join(x.replace(KEY_ALLOW_V2, KEY_ALLOW_V1) for x in v1) + "\n").encode()
    result = evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert result["cgroup_keys"] == {"v2": True, "v1": True}
    assert [s["line_no"] for s in result["stale_lines"]] == [3, 9]
    new, _ = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [2, 8]
    assert lines_of(new)[8] == b"lxc.cgroup.devices.allow: c 509:* rwm\n"


def test_dev_entries_only_ct_passes():
    data = (b"arch: amd64\n"
            b"dev0: /dev/nvidia0,gid=44\n"
            b"dev1: path=/dev/nvidiactl\n"
            b"dev2: /dev/nvidia-uvm\n"
            b"dev3: /dev/nvidia-uvm-tools\n")
    result = evaluate_ct(ct_of(data), *H509)
    assert result["status"] == "pass" and result["uses_nvidia"]
    assert [(d["path"], d["present"]) for d in result["dev_entries"]] == [
        ("/dev/nvidia0", True), ("/dev/nvidiactl", True), ("/dev/nvidia-uvm", True), ("/dev/nvidia-uvm-tools", True)]
    assert regenerate(ct_of(data), *H509) == (data, [])
    # A leftover allow line for the old uvm major is stale; nothing needs replacing it (devN is covered by Proxmox).
    stale = data + b"lxc.cgroup2.devices.allow: c 506:* rwm\n"
    new, changes = fix(stale, *H509, known_nvidia_majors=KNOWN)
    assert new == data and [c["action"] for c in changes] == ["remove"]


def test_no_nvidia_ct_skipped():
    data = b"arch: amd64\nlxc.cgroup2.devices.allow: c 226:0 rwm\nlxc.mount.entry: /dev/dri dev/dri none bind\n"
    result = evaluate_ct(ct_of(data), *H509)
    assert result["status"] == "skip" and not result["uses_nvidia"]
    assert regenerate(ct_of(data), *H509) == (data, [])


def test_control_nodes_added_in_style():
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "mp0: /mnt/media,mp=/media\n").encode()
    new, changes = fix(data, *H509)
    assert lines_of(new) == [
        b"lxc.cgroup2.devices.allow: c 195:* rwm\n",
        b"lxc.cgroup2.devices.allow: c 509:* rwm\n",
        b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n",
        b"lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n",
        b"lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n",
        b"lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n",
        b"mp0: /mnt/media,mp=/media\n",
    ]
    assert diff_lines(changes)[0] == "+after 2: lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none " \
                                     "bind,optional,create=file"


def test_no_allow_lines_at_all_added_after_mounts():
    data = ("arch: amd64\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n"
            "hostname: gpu\n").encode()
    result = evaluate_ct(ct_of(data), *H509)
    assert result["status"] == "fail" and len(result["uncovered"]) == 4
    new, _ = fix(data, *H509)
    assert lines_of(new)[5:8] == [b"lxc.cgroup2.devices.allow: c 195:0 rwm\n",
                                  b"lxc.cgroup2.devices.allow: c 195:255 rwm\n",
                                  b"lxc.cgroup2.devices.allow: c 509:* rwm\n"]
    assert lines_of(new)[-1] == b"hostname: gpu\n"


def test_recorded_names_map_each_stale_major():
    """Two stale majors: the recorded names decide which current major replaces which."""
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 505:* rwm\n"
            "lxc.cgroup2.devices.allow: c 506:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-caps dev/nvidia-caps none bind,optional,create=dir\n").encode()
    majors, nodes, registered = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
    known = {"505": "nvidia-uvm", "506": "nvidia-caps"}
    new, _ = fix(data, majors, nodes, known_nvidia_majors=known, char_majors_registered=registered)
    assert lines_of(new)[1:3] == [b"lxc.cgroup2.devices.allow: c 510:* rwm\n",
                                  b"lxc.cgroup2.devices.allow: c 237:* rwm\n"]


# ---------------------------------------------------------------------------
# Missing sources, caps vs imex
# ---------------------------------------------------------------------------
def test_missing_sources_optional_and_fatal():
    nodes = [n for n in uvm_nodes(509) if "uvm" not in n["path"]]     # nvidia-uvm not loaded yet
    majors = {"nvidia": 195}
    result = evaluate_ct(ct_of(GPU_CT), majors, nodes, known_nvidia_majors=KNOWN)
    assert [(m["source"], m["optional"], m["aborts_start"]) for m in result["missing_sources"]] == [
        ("/dev/nvidia-uvm", True, False), ("/dev/nvidia-uvm-tools", True, False)]
    assert result["status"] == "fail"          # 506 is still stale
    assert any("not fully known" in m for m in result["messages"])
    new, changes = regenerate(ct_of(GPU_CT), majors, nodes, known_nvidia_majors=KNOWN)
    assert new == GPU_CT.encode() and changes[0]["action"] == "refused"
    assert "/dev/nvidia-uvm" in changes[0]["reason"]
    fixed = GPU_CT.replace("c 506:* rwm", "c 509:* rwm")
    result = evaluate_ct(ct_of(fixed), majors, nodes)
    assert result["status"] == "warn" and result["stale_lines"] == []
    fatal = fixed.replace("/dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file",
                          "/dev/nvidia-uvm dev/nvidia-uvm none bind,create=file")
    result = evaluate_ct(ct_of(fatal), majors, nodes)
    assert result["status"] == "fail"
    assert [(m["source"], m["aborts_start"]) for m in result["missing_sources"]] == [
        ("/dev/nvidia-uvm", True), ("/dev/nvidia-uvm-tools", False)]
    assert any("will not start" in m for m in result["messages"])


def test_caps_and_imex_majors():
    """dra-driver PR 304: nvidia-caps 511; a node wrongly created with the imex-channels major 234."""
    majors, nodes, registered = host("proc_devices_imex_caps.txt", "dra_driver_304_ls_dev_nvidia_caps.txt")
    data = ("lxc.cgroup2.devices.allow: c 511:* rwm\n"
            "lxc.cgroup2.devices.allow: c 234:* rwm\n"
            "lxc.mount.entry: /dev/nvidia-caps/nvidia-cap1 dev/nvidia-caps/nvidia-cap1 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-caps/nvidia-cap2 dev/nvidia-caps/nvidia-cap2 none bind,optional,create=file\n"
            ).encode()
    result = evaluate_ct(ct_of(data), majors, nodes, char_majors_registered=registered)
    assert [(s["line_no"], s["major"]) for s in result["stale_lines"]] == [(2, 234)]
    assert "nvidia-caps-imex-channels" in result["stale_lines"][0]["reason"]
    new, changes = fix(data, majors, nodes, char_majors_registered=registered)
    assert [(c["action"], c["line_no"]) for c in changes] == [("remove", 2)]
    assert b"234" not in new
    # Mounting the whole directory uses every node in it, the odd 234:4323 one included.
    whole = ("lxc.cgroup2.devices.allow: c 511:* rwm\n"
             "lxc.mount.entry: /dev/nvidia-caps dev/nvidia-caps none bind,optional,create=dir\n").encode()
    result = evaluate_ct(ct_of(whole), majors, nodes, char_majors_registered=registered)
    assert [(u["node"], u["major"]) for u in result["uncovered"]] == [("/dev/nvidia-caps/nvidia-cap4323", 234)]


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("extra, reason", [
    (b"lxc.cgroup2.devices.allow: a\nlxc.cgroup2.devices.deny: a\n", "allows all devices"),
    (b"lxc.include: /usr/share/lxc/config/nvidia.conf\n", "lxc.include"),
    (b"lxc.cgroup2.devices.allow: c 5\xff10:* rwm\n", "LXC cannot parse this device rule"),
    (b"lxc.cgroup2.devices.allow: c 195 rwm\n", "LXC cannot parse this device rule"),
    (b"lxc.mount.entry: /dev/nvidia\xff dev/nvidia none bind\n", "undecodable"),
])
def test_refuses_when_uncertain(extra, reason):
    data = GPU_CT.encode() + extra
    new, changes = regenerate(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert new == data
    assert len(changes) == 1 and changes[0]["action"] == "refused" and reason in changes[0]["reason"]
    assert evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)["status"] in ("fail", "warn")


def test_allow_all_makes_allow_lines_moot():
    """A bare 'a' allow resets the list to allow-all: LXC then skips allow rules, so stale ones cost nothing."""
    data = GPU_CT.encode() + b"lxc.cgroup2.devices.allow: a\n"
    result = evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert result["status"] == "warn" and result["stale_lines"] == []
    assert any("resets the device list to allow-all" in m for m in result["messages"])
    assert regenerate(ct_of(data), *H509, known_nvidia_majors=KNOWN) == (data, [])


def test_deny_lines():
    """A deny that only takes away mknod is harmless; one that takes rw from a mounted node stops the rewrite."""
    harmless = GPU_CT.encode() + b"lxc.cgroup2.devices.deny: c *:* m\n"
    new, _ = fix(harmless, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(harmless, new) == [2]
    blocking = GPU_CT.encode() + b"lxc.cgroup2.devices.deny: c 195:0 rw\n"
    result = evaluate_ct(ct_of(blocking), *H509, known_nvidia_majors=KNOWN)
    assert {u["node"] for u in result["uncovered"]} >= {"/dev/nvidia0"}
    assert any("denies a mounted NVIDIA node" in m for m in result["messages"])
    new, changes = regenerate(ct_of(blocking), *H509, known_nvidia_majors=KNOWN)
    assert new == blocking and "deny rule" in changes[0]["reason"]


def test_current_major_not_stale_when_only_control_mounts_are_missing():
    data = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 509:* rwm\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n").encode()
    result = evaluate_ct(ct_of(data), *H509)
    assert result["stale_lines"] == [] and result["status"] == "warn"
    assert result["missing_control_nodes"] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    new, changes = fix(data, *H509)
    assert [c["action"] for c in changes] == ["add"] * 3
    assert lines_of(new)[:3] == lines_of(data)


def test_removed_stale_lines_keep_their_place_for_new_lines():
    """Only a per-minor stale line for a node the CT does not mount: new per-minor lines go where it was."""
    data = ("arch: amd64\n"
            "lxc.cgroup2.devices.allow: c 506:7 rw\n"
            "hostname: x\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n").encode()
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert lines_of(new) == [b"arch: amd64\n",
                             b"lxc.cgroup2.devices.allow: c 509:0 rw\n",
                             b"hostname: x\n",
                             b"lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"]
    assert [c["action"] for c in changes] == ["remove", "add"]


def test_unrelated_garbage_does_not_block():
    data = GPU_CT.encode() + b"\x00\xff\xfe binary \x01\n"
    new, changes = fix(data, *H509, known_nvidia_majors=KNOWN)
    assert changed_indexes(data, new) == [2]


def test_host_nodes_unknown_refuses():
    new, changes = regenerate(ct_of(GPU_CT), {"nvidia": 195}, None, known_nvidia_majors=KNOWN)
    assert new == GPU_CT.encode() and changes[0]["action"] == "refused"
    assert "device nodes unknown" in changes[0]["reason"]
    result = evaluate_ct(ct_of(GPU_CT), {"nvidia": 195, "nvidia-uvm": 509}, None)
    assert result["status"] == "warn" and result["missing_sources"] == [] and result["stale_lines"] == []
    assert "host NVIDIA device nodes unknown" in result["messages"][0]


def test_no_mounts_cannot_know_needed_majors():
    data = b"lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 506:* rwm\n"
    result = evaluate_ct(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert [s["major"] for s in result["stale_lines"]] == [506]
    new, changes = regenerate(ct_of(data), *H509, known_nvidia_majors=KNOWN)
    assert new == data and changes[0]["action"] == "refused"
    # A current NVIDIA major is never called stale when the CT mounts nothing we can see.
    current = b"lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 509:* rwm\n"
    assert evaluate_ct(ct_of(current), *H509)["stale_lines"] == []


def test_evaluate_result_shape():
    result = evaluate_ct(ct_of(GPU_CT), *H509, known_nvidia_majors=KNOWN)
    for key in ("ctid", "uses_nvidia", "status", "stale_lines", "uncovered", "missing_sources", "dev_entries",
                "messages"):
        assert key in result
    assert result["ctid"] == "101"
    assert set(result["stale_lines"][0]) >= {"line_no", "text", "major", "reason"}
    assert set(result["uncovered"][0]) >= {"node", "major", "minor"}
