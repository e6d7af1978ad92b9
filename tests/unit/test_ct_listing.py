"""The audit and the fix list the same CT configs (issue 10): one rule, formats/ct_config.ct_config_name.

pmxcfs (pve-cluster src/pmxcfs/memdb.c, name_is_vm_config) lists a file as a guest config only when its name starts
with 1-9 and is digits then ".conf"; pct reads CTs from that list and a vmid is 100-999999999.  So /etc/pve/lxc/
0101.conf is no CT: both the audit and the fix skip it and say why.
"""
import shutil

import pytest
from ansible.module_utils.pvetune.audit import evaluate, gather
from ansible.module_utils.pvetune.concerns.lxcgpu.checks import list_cts
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.formats.ct_config import ct_config_name
from test_lxcfix import CONF_101, fix, read, scratch, write

LXC = "etc/pve/nodes/pve-gpu01/lxc/"


@pytest.mark.parametrize("name, ctid, why", [
    ("101.conf", 101, None),
    ("999999999.conf", 999999999, None),
    ("0101.conf", None, "leading zero"),
    ("99.conf", None, "not a vmid"),
    ("1000000000.conf", None, "not a vmid"),
    ("abc.conf", None, "not <vmid>.conf"),
    ("101.conf.bak", None, None),
    ("101.conf.tmp.conf", None, "not <vmid>.conf"),
])
def test_ct_config_name(name, ctid, why):
    got, reason = ct_config_name(name)
    assert got == ctid
    if why is None:
        assert reason is None
    else:
        assert why in reason and reason.startswith(name + ": not a CT config")


def test_audit_and_fix_agree_on_0101_conf(tmp_path):
    tree = scratch(tmp_path)
    # A stale copy of CT 101 under a name pct never lists: if either side read it, the audit would fail it or the
    # fix would rewrite it.
    write(tree, LXC + "0101.conf", read(tree, CONF_101))
    before = read(tree, LXC + "0101.conf")
    fsroot = FsRoot(str(tree))
    available, skipped = list_cts(fsroot, "/" + LXC.rstrip("/"))
    assert 101 in available and [s["name"] for s in skipped] == ["0101.conf"]

    policy = merge_policy(None)
    facts = gather(fsroot, None, policy)
    audited = sorted(int(ct["ctid"]) for ct in facts["lxc"]["cts"])
    [res] = evaluate(facts, policy, only={"lxc.gpu_devices"})
    assert "CT 0101" not in " ".join(i["name"] for i in res["items"])
    assert any("0101.conf: not a CT config (leading zero" in e for e in res["evidence"])

    out = fix(tree, fail_on_refused=False)
    fixed = sorted(c["ctid"] for c in out["cts"])
    assert [s["name"] for s in out["skipped"]] == ["0101.conf"]
    assert "leading zero" in out["skipped"][0]["reason"]
    assert read(tree, LXC + "0101.conf") == before
    # Same CTs on both sides (the fix leaves out CTs without NVIDIA devices, the audit judges them as skip).
    gpu_audited = [int(i["name"].split()[1]) for i in res["items"]]
    assert set(fixed) == set(gpu_audited) and set(fixed) <= set(audited) == set(available)


def test_boot_helper_says_it_skips_0101_conf(tmp_path):
    from ansible.module_utils.pvetune.concerns.lxcgpu import boot as lxcgpu_boot
    from test_lxcfix import runner_for
    tree = scratch(tmp_path)
    shutil.copy("%s/%s" % (tree, CONF_101), "%s/%s0101.conf" % (tree, LXC))
    fsroot, runner = runner_for(tree)
    _ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"wait_seconds": 0})
    assert any(m.startswith("skipped 0101.conf: not a CT config") for m in messages)
