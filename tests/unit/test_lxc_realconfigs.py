"""35 real CT configs from public sources (tests/fixtures/realdata/lxc_conf, SOURCES.md), judged on one real host.

The host: driver 595.71.05 with nvidia-uvm 510 and nvidia-caps 237 (tests/fixtures/realdata/dev_listing/
nixpkgs_525475_ll_dev_nvidia_595.txt, its /proc/devices in tests/fixtures/lxcgpu), one GPU, cgroup v2.  For each
config: the audit's verdict, what the fix does (rewritten / unchanged / refused), a fragment of what the audit says,
and the verdict after the fix.  Every rewrite keeps every other byte and is a fixed point; nothing LXC accepts is
refused without a reason that names the line.
"""
import os
import re

import pytest
from ansible.module_utils.pvetune.concerns.lxcgpu.checks import evaluate_ct
from ansible.module_utils.pvetune.concerns.lxcgpu.regen import regenerate
from ansible.module_utils.pvetune.formats.ct_config import parse_ct_config

from test_lxcgpu import REAL, host, lines_of

HOST = host("proc_devices_nixpkgs_595_uvm510.txt", "nixpkgs_525475_ll_dev_nvidia_595.txt")
CONF_DIR = os.path.join(REAL, "lxc_conf")
NO_NVIDIA = "CT passes no NVIDIA devices"
UNPRIVILEGED = "unprivileged CT: Proxmox VE 7+ starts its device list as allow-all"
# The custom node directory of frigate issue 8652 (terrelsa13): the admin's nodes, made for the GPUs.
CUSTOM_NODES = [{"path": "/lxc/102010/devices/nvidia%d" % i, "type": "c", "major": 195, "minor": i,
                 "mode": "crw-rw-rw-"} for i in (0, 1)]

# name: (audit status, fix outcome, fragment of a message, status after the fix)
TABLE = {
    "charlzyx_tv_intel_v1_a_v2": ("skip", "unchanged", NO_NVIDIA, None),
    "cigas4_frigate1807_intel_coral_a": ("skip", "unchanged", NO_NVIDIA, None),
    "devzeebo_frigate_arch_devn_gid985_fragment": ("pass", "unchanged", "devN: entries only", None),
    "dockserver_intel_v1_equals_autodev_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "dockserver_intel_v2_pasted_line_numbers_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "en4ble1337_105_caps_fragment": ("fail", "rewritten", "'lxc.cgroup2.devices.allow: c 235:* rwm': stale", "pass"),
    # a bare "a" resets the device list to allow-all: the stale lines of these GPU-rental CTs cost nothing
    "en4ble1337_gpuaas_6004_double_spaced": ("warn", "unchanged", "line 46 resets the device list to allow-all", None),
    "en4ble1337_gpuaas_6005_vast_commented": ("warn", "unchanged", "line 29 resets the device list", None),
    "en4ble1337_gpuaas_6006_quickpod": ("warn", "unchanged", "line 25 resets the device list", None),
    "en4ble1337_vllm_partial": ("pass", "unchanged", UNPRIVILEGED, None),
    "epic0421_jellyfin982_intel_devn_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "gma1n_jellyfin_fragment": ("pass", "unchanged", None, None),
    "gymnae_steam_headless_devn_comments": ("fail", "rewritten", "c 235:* rwm': stale NVIDIA allow line", "pass"),
    "h3rz3n_dri_v1_unprivileged_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "jellyfindocs_nvidia_pve71_fragment": ("fail", "rewritten", "no NVIDIA node the CT uses has major 243", "pass"),
    "jimsgarage_intel_idmap": ("skip", "unchanged", NO_NVIDIA, None),
    "johnheberty_portuguese_lib_mounts_fragment": ("pass", "unchanged", None, None),
    "kelvinpun_intel_mount_opts_comma_zero_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "kentsx_chinese_comment_intel_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "loeeeee_many_majors_fragment": ("fail", "rewritten", "has major 254", "pass"),
    "mrbloodrune_jellyfin": ("pass", "unchanged", UNPRIVILEGED, None),
    "mrbloodrune_ollama": ("pass", "unchanged", UNPRIVILEGED, None),
    "saberwolf64_hook_fragment": ("skip", "unchanged", "NVIDIA devices come from an LXC hook", None),
    # issue 13 case 1: the trailing comment is not part of the rule (LXC reads three access characters)
    "schmidtsilas_german_comments_fragment": ("fail", "rewritten", "c 511:* rwm # Die 511 anpassen': stale", "pass"),
    # a relative bind source (dev/nvidia-modeset) is optional and missing: the fix still rewrites the stale 508
    "simoncaron_manual_typo_modeset_fragment": ("fail", "rewritten", "a bind source must be an absolute host path",
                                                "warn"),
    "simoncaron_nvidia_hook_env_fragment": ("skip", "unchanged", "NVIDIA devices come from an LXC hook", None),
    "siv237_gailery_space_separated_opts_fragment": ("fail", "rewritten", "'lxc.cgroup2.devices.allow: c 509:0 rw'",
                                                     "pass"),
    "smtdev_tteck1089_intel_rbind_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "techmatlock_amd_crlf_equals_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "telmate1138_nvidia_caps_dir_apex_fragment": ("fail", "rewritten", "has major 506", "pass"),
    # issue 13 case 2: GPU nodes bound from /lxc/102010/devices; CUDA's control nodes missing
    "terrelsa13_frigate_2051_custom_dev_dir_fragment": ("warn", "rewritten", "mounts a GPU but not /dev/nvidiactl",
                                                        "pass"),
    "thehellsite_amd_kfd_prestart_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "thehellsite_render_prestart_fragment": ("skip", "unchanged", NO_NVIDIA, None),
    "wolf_nvidia_devn_caps_fragment": ("pass", "unchanged", "devN: entries only", None),
    "wouldntyouknow_i915_308_intel_devn": ("skip", "unchanged", NO_NVIDIA, None),
}


def judge(data, sources):
    majors, nodes, registered = HOST
    ct = parse_ct_config(data, "/etc/pve/lxc/101.conf")
    result = evaluate_ct(ct, majors, nodes, char_majors_registered=registered, cgroup_version=2, sources=sources)
    new, changes = regenerate(ct, majors, nodes, char_majors_registered=registered, cgroup_version=2, sources=sources)
    return result, new, changes


def test_every_fixture_is_in_the_table():
    assert sorted(TABLE) == sorted(n[:-5] for n in os.listdir(CONF_DIR) if n.endswith(".conf"))
    assert len(TABLE) >= 30


@pytest.mark.parametrize("name", sorted(TABLE))
def test_real_config(name):
    status, outcome, fragment, after = TABLE[name]
    with open(os.path.join(CONF_DIR, name + ".conf"), "rb") as handle:
        data = handle.read()
    sources = {"nodes": CUSTOM_NODES if name.startswith("terrelsa13") else [], "unknown": [], "hooks": {}}
    assert parse_ct_config(data).to_bytes() == data
    result, new, changes = judge(data, sources)
    assert result["status"] == status, result["messages"]
    if fragment:
        assert any(fragment in m for m in result["messages"]), result["messages"]
    actions = {c["action"] for c in changes}
    got = "refused" if "refused" in actions else ("rewritten" if changes else "unchanged")
    assert got == outcome, changes
    if outcome == "refused":
        assert "line " in changes[0]["reason"]   # it names the line
        return
    if outcome == "unchanged":
        assert new == data
        return
    # Only the lines the changes name differ; every other byte (comments, CRLF, odd spacing) is kept.
    old_lines, new_lines = lines_of(data), lines_of(new)
    touched = {c["line_no"] for c in changes if c["action"] in ("replace", "remove")}
    kept_old = [line for i, line in enumerate(old_lines, 1) if i not in touched]
    assert all(line in new_lines for line in kept_old)
    for change in changes:
        if change["action"] == "replace":   # only the major's digits changed on the line
            assert re.sub("[0-9]+", "#", change["old"]) == re.sub("[0-9]+", "#", change["new"]), change
    again, more = judge(new, sources)[1:]
    assert (again, more) == (new, [])
    assert judge(new, sources)[0]["status"] == after


def test_trailing_comment_kept_byte_for_byte():
    with open(os.path.join(CONF_DIR, "schmidtsilas_german_comments_fragment.conf"), "rb") as handle:
        data = handle.read()
    _result, new, changes = judge(data, None)
    assert [c["new"] for c in changes] == ["lxc.cgroup2.devices.allow: c 510:* rwm # Die 511 anpassen"]
    assert new == data.replace(b"c 511:* rwm # Die 511", b"c 510:* rwm # Die 511")


def test_trailing_comment_after_two_access_characters_is_what_lxc_rejects():
    data = (b"lxc.cgroup2.devices.allow: c 195:* rw # GPU\n"
            b"lxc.cgroup2.devices.allow: c 509:* rwm\n"
            b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            b"lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
    result, new, changes = judge(data, None)
    assert result["status"] == "fail"
    assert any("line 1: LXC cannot parse this device rule, so the CT does not start" in m and
               "write 'c 195:* rw'" in m for m in result["messages"])
    assert new == data and changes[0]["action"] == "refused" and "line 1" in changes[0]["reason"]
    v1 = data.replace(b"lxc.cgroup2.devices.allow: c 195:* rw # GPU", b"lxc.cgroup.devices.allow: c 195:* rw # GPU")
    result, new, changes = judge(v1, None)
    assert any("LXC ignores lxc.cgroup.* keys on a cgroup v2 host" in m for m in result["messages"])
    assert [c["action"] for c in changes] != ["refused"]   # an ignored line does not block the rewrite
