"""Faults during the rollout, each injected honestly, each with what must (not) happen.

* setpci fails: the GPU's config file is made read-only with a read-only bind mount, so the real
  setpci (run with -A linux-sysfs on the tree) gets EROFS from the kernel; pvetune_pcie_mrrs fails
  naming the function, that config space is byte-for-byte unchanged, and only the functions really
  changed are reported.
* update-grub fails (GRUB host) / proxmox-boot-tool refresh fails (systemd-boot host), through the
  stand-ins' failure injection: the boot configuration is restored from the backup, byte-compared.
* The kernel to pin is not installed (an explicit version, or apt cannot find the package): no pin,
  nothing written.
* A host does not come back from its reboot: host 1 is a real, disposable "live" host (a podman
  container booted with systemd, pvetune_root "/", a no-op update-grub), so fix.yml really reboots
  it with ansible.builtin.reboot; the container stops and never comes back.  The rollout stops
  there: hosts 2 and 3 (scratch trees) see no task, their trees do not change, and host 1's record
  names the reboot step.
* A CT fails to restart (pct stand-in injection, pvetune_restart_cts=true): host 1 fails at the CT
  step with the CT named in its record; hosts 2 and 3 are untouched.
"""
import json
import os
import shutil
import subprocess
import time

import hardening_lib as lib
import pytest

GPU_BDF = "0000:01:00.0"
GPU_CONFIG = "sys/bus/pci/devices/%s/config" % GPU_BDF
STATE = (".pvetune/calls.log", "var/lib/pvetune", "run")


@pytest.fixture
def tree(hardening_tmp, request):
    made = []

    def make(host="pve-gpu01", name=None):
        root = lib.scratch(host, hardening_tmp, name or "fault-%s-%d" % (request.node.name[-30:], len(made)))
        made.append(root)
        return root

    yield make
    for root in made:
        lib.rmtree(root)


def _inject(root, name, content=""):
    path = os.path.join(root, ".pvetune", "fail", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(content)


# -- setpci -----------------------------------------------------------------------------------------------------
def test_setpci_write_refused_by_the_kernel(tree):
    if not shutil.which("setpci"):
        pytest.fail("setpci (pciutils) is not installed; scripts/bootstrap.sh installs it")
    root = tree()
    real = os.path.realpath(os.path.join(root, GPU_CONFIG))
    before = lib.read(root, GPU_CONFIG)
    others_before = {p: lib.read(root, p) for p in lib.files_of(root) if p.endswith("/config") and "pci0000" in p}
    subprocess.run(["mount", "--bind", real, real], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", real], check=True)
        res = lib.run_module("pvetune_pcie_mrrs", {"root": root, "run_id": "fault-setpci", "mrrs": 4096})
    finally:
        subprocess.run(["umount", real], check=True)
    assert res.get("failed"), res
    assert GPU_BDF in res["msg"] and "1 function(s) failed" in res["msg"], res["msg"]
    assert not lib.no_traceback(res)
    assert lib.read(root, GPU_CONFIG) == before, "the refused config space changed"
    failed = [f for f in res["functions"] if f["result"] == "failed"]
    done = [f for f in res["functions"] if f["result"] == "done"]
    assert [f["bdf"] for f in failed] == [GPU_BDF]
    assert len(done) == 7
    reported = {r["key"] for r in res["changes"]["runtime"]}
    assert "pcie:%s:devctl" % GPU_BDF not in reported and len(reported) == 7
    changed = [p for p, data in others_before.items() if lib.read(root, p) != data]
    assert len(changed) == 7 and os.path.realpath(os.path.join(root, GPU_CONFIG)) not in [
        os.path.realpath(os.path.join(root, p)) for p in changed]


# -- boot configuration refresh ----------------------------------------------------------------------------------
@pytest.mark.parametrize("host,tool,files", [
    ("pve-gpu01", "update-grub", ["etc/default/grub", "boot/grub/grub.cfg"]),
    ("pve-gpu02", "proxmox-boot-tool@refresh", ["etc/kernel/cmdline"]),
])
def test_boot_refresh_failure_restores_the_boot_config(tree, host, tool, files):
    root = tree(host)
    _inject(root, tool)
    before = lib.files_of(root, STATE)
    res = lib.run_module("pvetune_cmdline", {"root": root, "run_id": "fault-" + host,
                                             "ensure": ["amd_pstate=active", "processor.max_cstate=1",
                                                        "pcie_aspm=off"]})
    assert res.get("failed"), res
    assert "restored" in res["msg"] and tool.split("@")[0] in res["msg"], res["msg"]
    assert not lib.no_traceback(res)
    after = lib.files_of(root, STATE)
    assert lib.differences(before, after) == [], "the boot configuration was not restored byte for byte"
    for rel in files:
        assert before[rel] == after[rel]
    assert [c[0] for c in lib.calls(root)].count(tool.split("@")[0]) >= 1, lib.calls(root)


@pytest.mark.parametrize("host,args,words", [
    # pve-gpu03 has a 6.14 kernel, but not the one asked for: nothing to install, the pin is refused.
    ("pve-gpu03", {"version": "6.14.99-1-pve"}, ["6.14.99-1-pve", "not installed", "refusing to pin"]),
    # pve-gpu01 has no 6.14 kernel and the archive does not have the package: apt fails, nothing pinned.
    ("pve-gpu01", {"package": "proxmox-kernel-6.14"}, ["apt-get", "Unable to locate package"]),
])
def test_kernel_not_installed_is_not_pinned(tree, host, args, words):
    root = tree(host)
    if "package" in args:
        from scratch_host import write_apt_repo
        write_apt_repo(root, {})  # the archive does not have the package
    before = lib.files_of(root, STATE + (".pvetune/apt-repo.json",))
    res = lib.run_module("pvetune_kernel", dict({"root": root, "run_id": "fault-kernel", "series": "6.14"}, **args))
    assert res.get("failed"), res
    for word in words:
        assert word in res["msg"], res["msg"]
    assert not lib.no_traceback(res)
    assert lib.differences(before, lib.files_of(root, STATE + (".pvetune/apt-repo.json",))) == []
    assert not [c for c in lib.calls(root) if c[:3] == ["proxmox-boot-tool", "kernel", "pin"]]
    if "version" in args:
        assert lib.calls(root) == [], "refused before any command"


# -- rollouts that stop ----------------------------------------------------------------------------------------
def _three_host_rollout(hardening_tmp, tree, first_host_vars, extravars, cmdline=None, first_root=None):
    roots = {"pve-first": first_root, "pve-second": tree("pve-gpu01", "rollout-second"),
             "pve-third": tree("pve-gpu01", "rollout-third")}
    if first_root is None and "ansible_connection" not in first_host_vars:
        roots["pve-first"] = tree("pve-gpu01", "rollout-first")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "rollout-%d.yml" % time.monotonic_ns()), roots,
                                    host_vars={"pve-first": first_host_vars})
    untouched = {h: lib.digest(roots[h]) for h in ("pve-second", "pve-third")}
    report_dir = os.path.join(hardening_tmp, "reports-rollout-%d" % time.monotonic_ns())
    run = lib.run_playbook(hardening_tmp, "fix.yml", inventory, cmdline=cmdline,
                           extravars=dict(extravars, pvetune_report_dir=report_dir),
                           envvars={"CONTAINERS_CONF": os.path.join(lib.TOP, "scripts", "containers.conf")})
    return run, roots, untouched, report_dir


def _assert_rollout_stopped(run, roots, untouched, report_dir, run_id, task_word, message_words):
    assert run.rc != 0
    for host in ("pve-second", "pve-third"):
        assert run.host_events(host) == [], "%s saw tasks after the first host failed" % host
        assert lib.digest(roots[host]) == untouched[host], host
        assert lib.calls(roots[host], discovery=False) == [], host   # the wave plan's discovery only read them
    stats = run.stats()
    # (the run check's first play validates its arguments on every host: "ok" results, no change, no failure)
    assert all(host not in stats.get(k, {}) for k in ("changed", "failures")
               for host in ("pve-second", "pve-third")), stats
    record_path = os.path.join(report_dir, "fix-%s" % run_id, "pve-first.json")
    with open(record_path) as handle:
        record = json.load(handle)
    assert record["result"] == "failed", record
    assert task_word in record["failure"]["task"], record["failure"]
    for word in message_words:
        assert word in record["failure"]["message"], record["failure"]
    assert not os.path.exists(os.path.join(report_dir, "fix-%s" % run_id, "pve-second.json"))
    return record


def test_ct_restart_failure_stops_the_rollout(hardening_tmp, tree):
    first = tree("pve-gpu01", "rollout-first")
    _inject(first, "pct@reboot")
    run, roots, untouched, report_dir = _three_host_rollout(
        hardening_tmp, tree, {}, {"pvetune_restart_cts": True, "pvetune_run_id_override": "ct-restart-1"},
        first_root=first)
    record = _assert_rollout_stopped(run, roots, untouched, report_dir, "ct-restart-1",
                                     "Regenerate the NVIDIA device entries", ["CT 101 failed to restart"])
    assert ["pct", "reboot", "101", "--timeout", "120"] in lib.calls(first)
    # The lock of the failed run was released, so the next run is not blocked.
    assert not os.path.exists(os.path.join(first, "run/pvetune/fix.lock"))
    assert record["changes"]["lxc"] is not None or record["failure"]


def test_a_ct_broken_before_the_run_does_not_fail_the_run(hardening_tmp, tree):
    """Issue 33 (5): fix.yml --tags cmdline on pve-gpu01 applied its change, then failed the host because CT 101 "may
    not open /dev/nvidia-uvm": a stale allow line older than the run, which a cmdline run does not touch. The gate now
    compares with the health taken before the first change: the CT is broken-before (warned of, in the record), the
    run passes, and its lock is released."""
    root = tree("pve-gpu01", "health-baseline")
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "health-baseline.yml"), {"pve-gpu01": root})
    report_dir = os.path.join(hardening_tmp, "reports-health-baseline")
    run = lib.run_playbook(hardening_tmp, "fix.yml", inventory, cmdline="--tags cmdline",
                           extravars={"pvetune_report_dir": report_dir, "pvetune_run_id_override": "health-baseline"})
    assert run.rc == 0, run.stdout[-3000:]
    with open(os.path.join(report_dir, "fix-health-baseline", "pve-gpu01.json")) as handle:
        record = json.load(handle)
    assert record["result"] in ("ok", "pending-reboot"), record.get("failure")
    assert record["changes"]["cmdline"], "the cmdline fix did not apply its change"
    (ct,) = [t for t in record["health"] if t["target"] == "ct:101"]
    assert ct["status"] == "broken-before" and "/dev/nvidia-uvm" in ct["message"], ct
    (gate,) = [d["res"] for d in run.task_results("pve-gpu01") if d["task"].startswith("Health gate")]
    assert "already failing before this run's first change" in json.dumps(gate.get("warnings")), gate
    assert not os.path.exists(os.path.join(root, "run/pvetune/fix.lock"))


# -- a host that does not come back -----------------------------------------------------------------------------------
IMAGE = "localhost/pvetune-host:bookworm"


def _podman(*args, check=True, timeout=120):
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(lib.TOP, "scripts", "containers.conf"))
    return subprocess.run(["podman"] + list(args), env=env, check=check, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


@pytest.fixture
def live_host():
    """A disposable systemd container that pvetune treats as a live host (root "/")."""
    if not shutil.which("podman"):
        pytest.fail("podman is not installed (scripts/bootstrap.sh containers)")
    if _podman("image", "exists", IMAGE, check=False).returncode != 0:
        # both images at once (the molecule phase needs trixie too): the debootstraps run in parallel
        subprocess.run([os.path.join(lib.TOP, "scripts", "build_images.sh")], check=True, timeout=1500)
    name = "pvetune-hardening-reboot-%d" % os.getpid()
    _podman("rm", "-f", name, check=False)
    _podman("run", "-d", "--name", name, "--hostname", "pve-first", "--systemd=always", "--restart=no", IMAGE,
            "/sbin/init")
    try:
        deadline = time.monotonic() + 90
        while True:
            state = _podman("exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                pytest.fail("the container did not boot: %s" % state)
            time.sleep(0.5)
        # The container has no GRUB; a no-op update-grub lets the boot-argument fix complete, so that
        # the host needs a reboot.  Everything else is the real thing, reboot included.
        _podman("exec", name, "sh", "-c", "printf '#!/bin/sh\\necho Generating grub configuration file ... >&2\\n"
                "echo done >&2\\n' > /usr/sbin/update-grub && chmod 755 /usr/sbin/update-grub")
        yield name
    finally:
        _podman("rm", "-f", name, check=False)


def test_host_that_does_not_come_back_stops_the_rollout(hardening_tmp, tree, live_host):
    first_vars = {"ansible_connection": "containers.podman.podman", "ansible_host": live_host,
                  "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False}
    run, roots, untouched, report_dir = _three_host_rollout(
        hardening_tmp, tree, first_vars,
        {"pvetune_reboot_ok": True, "pvetune_reboot_timeout": 20, "pvetune_post_reboot_delay": 0,
         "pvetune_run_id_override": "reboot-1",
         # The whole list: the container shows this machine's CPU (a VM needs no CPU boot args), and the test
         # needs a change that asks for a reboot whatever that CPU is.
         "pvetune_policy": {"cmdline_required": ["amd_pstate=active", "processor.max_cstate=1"]}},
        cmdline="--tags cmdline")
    # The reboot really happened: the container went down and stayed down.
    state = _podman("inspect", "-f", "{{.State.Status}}", live_host, check=False).stdout.strip()
    assert state in ("exited", "stopped"), (state, [(f.get("task"), f["res"].get("msg")) for f in run.failures()],
                                            run.stdout[-3000:])
    _assert_rollout_stopped(run, roots, untouched, report_dir, "reboot-1", "Reboot", ["imed out"])
    reboot = [e for e in run.task_results("pve-first") if e.get("task", "").startswith("Reboot")]
    assert reboot and "imed out" in json.dumps(reboot[-1]["res"]), reboot
