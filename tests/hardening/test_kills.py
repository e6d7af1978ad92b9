"""A run that dies at an instruction chosen by the test, then a re-run and rollback: the host comes back byte for byte
(issue 33 (1), (2)).

The kill is core/faults.py's switch, not timing luck: PVETUNE_FAULT_KILL_AFTER=<host path> makes the module process
SIGKILL itself right after ChangeSet.apply() wrote (or removed) that path, with no finally and no cleanup, as a lost
controller or a power cut leaves a host. Each playbook run goes on after the killed module as Ansible does (the task
fails, the rollout's rescue records the host and releases its lock).

* fix.yml killed while the boot runtime is installed (after /usr/local/sbin/pvetune-boot), fix.yml again, then
  rollback.yml killed right after it removed the GRUB drop-in (as update-grub would start), rollback.yml again: the
  tree is the original except what rollback documents it keeps (the kernel package fix.yml installed and the grub.cfg
  that lists it), and grub.cfg boots none of pvetune's arguments. Before write-ahead recording the runtime files
  stayed (an enabled pvetune-cpufreq.service on a rolled-back host) and the second rollback ran no update-grub.
* fix.yml killed right after the in-place write of CT 101's config, then rollback.yml: the CT config is the original,
  byte for byte (it used to keep the new major, the original only in the run's backup directory).
"""
import json
import os

import hardening_lib as lib
from scratch_host import KEPT_KERNEL

# What the tests compare on: pvetune's own state and the stand-ins' bookkeeping are not host content; /run is a tmpfs.
STATE = (".pvetune/calls.log", ".pvetune/apt-repo.json", "var/lib/pvetune", "run")
CT_CONFIG = "/etc/pve/nodes/pve-gpu01/lxc/101.conf"


def _run(workdir, inventory, playbook, name, kill_after=None):
    env = {"PVETUNE_FAULT_KILL_AFTER": kill_after} if kill_after else None
    return lib.run_playbook(workdir, playbook, inventory, envvars=env,
                            extravars={"pvetune_report_dir": os.path.join(workdir, "reports-kills"),
                                       "pvetune_run_id_override": name})


def _killed(run, path):
    """The run failed because a module died of SIGKILL right after writing ``path``."""
    assert run.rc != 0, "the run was not killed"
    # A module killed by SIGKILL: the shell that ran it exits 128 + 9 and says "Killed", with no JSON result.
    died = [f for f in run.failures() if f["res"].get("rc") in (137, -9)]
    assert died, "no module was killed (PVETUNE_FAULT_KILL_AFTER=%s): %s" % (path, run.failures())


def _manifest(root):
    with open(os.path.join(root, "var/lib/pvetune/manifest.json")) as handle:
        return json.load(handle)


def test_killed_fix_then_rerun_then_killed_rollback_then_rollback_restore_the_host(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "kill-runtime")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "kill-runtime.yml"), {"pve-gpu01": root})
    original = lib.files_of(root, STATE)
    killed = _run(hardening_tmp, inventory, "fix.yml", "kill-fix-1", kill_after="/usr/local/sbin/pvetune-boot")
    _killed(killed, "/usr/local/sbin/pvetune-boot")
    assert "/usr/local/sbin/pvetune-boot" in _manifest(root)["files"], "the killed write was not recorded first"
    assert not os.path.exists(os.path.join(root, "run/pvetune/fix.lock")), "the failed run kept its lock"
    again = _run(hardening_tmp, inventory, "fix.yml", "kill-fix-2")
    assert again.rc == 0, again.stdout[-3000:]
    units = [p for p in _manifest(root)["files"] if p.startswith("/etc/systemd/system/pvetune-")]
    assert units, "the re-run recorded none of the boot units it installed"

    dropin = "/etc/default/grub.d/90-pvetune.cfg"
    killed = _run(hardening_tmp, inventory, "rollback.yml", "rollback-kill-1", kill_after=dropin)
    _killed(killed, dropin)
    assert not os.path.exists(root + dropin), "the rollback was killed before it removed the drop-in"
    grub_cfg = lib.read(root, "boot/grub/grub.cfg").decode()
    assert "amd_pstate=active" in grub_cfg, "update-grub ran before the kill: the test proves nothing"
    rollback = _run(hardening_tmp, inventory, "rollback.yml", "rollback-kill-2")
    assert rollback.rc == 0, rollback.stdout[-3000:]
    assert ["update-grub"] in lib.calls(root)[-5:], "the second rollback did not refresh the boot loader"
    grub_cfg = lib.read(root, "boot/grub/grub.cfg").decode()
    assert "amd_pstate=active" not in grub_cfg and "processor.max_cstate" not in grub_cfg
    assert lib.differences(original, lib.files_of(root, STATE)) == KEPT_KERNEL
    lib.rmtree(root)


def test_fix_killed_after_a_ct_config_write_is_rolled_back_byte_for_byte(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "kill-ct")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "kill-ct.yml"), {"pve-gpu01": root})
    original = lib.files_of(root, STATE)
    killed = _run(hardening_tmp, inventory, "fix.yml", "kill-ct-1", kill_after=CT_CONFIG)
    _killed(killed, CT_CONFIG)
    changed = lib.files_of(root, STATE)
    assert changed["etc/pve/nodes/pve-gpu01/lxc/101.conf"] != original["etc/pve/nodes/pve-gpu01/lxc/101.conf"]
    rollback = _run(hardening_tmp, inventory, "rollback.yml", "rollback-ct")
    assert rollback.rc == 0, rollback.stdout[-3000:]
    after = lib.files_of(root, STATE)
    assert after["etc/pve/nodes/pve-gpu01/lxc/101.conf"] == original["etc/pve/nodes/pve-gpu01/lxc/101.conf"]
    # What the killed run did before the CT write is undone as well; only the kernel package (and grub.cfg) stays.
    assert [p for p in lib.differences(original, after) if p not in KEPT_KERNEL] == []
    lib.rmtree(root)
