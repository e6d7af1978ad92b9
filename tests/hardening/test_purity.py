"""Check-mode purity: audit.yml and fix.yml --check change not one byte of the AMD demo hosts or of any corpus tree
(the Intel corpus cases start from pve-gpu05). Tree digests; only the stand-ins' .pvetune/calls.log is excluded. The
full-size pve-gpu05's check run is held byte for byte by tests/integration/test_fix_playbook.py.

All trees live in one work directory and every digest covers all of them, so a write from one tree into another
(through a symlink) shows as a change there too. Two halves:

* Real playbook runs: audit.yml, then fix.yml --check --diff (every host in one batch), over the demo hosts and one
  corpus tree of each kind (the first case built on each base host). Both ran on every one of these hosts and fix.yml
  reached "Audit before" there.
* Every tree in-process (fix.yml --check cost ~14 s of CPU per host here, 113 s for these 8; the same module calls
  in-process ~0.2 s): the calls of the library modules that the real fix.yml --check run made on demo host
  pve-gpu01's tree (in order: preflight, lock, "Audit before", every fix module's check-mode path, "Audit after",
  unlock), with the arguments Ansible passed them there (the results' invocation.module_args), and audit.yml's
  pvetune_facts call, run through tests/modharness.run_module in check mode (with diff for fix.yml) on the tree. What
  differs from host to host is put in as the roles do: the root, and for the fix modules the values they take from
  the host's merged policy (this tree's pvetune_preflight result) and from the ACS fix (_fix_args). A call made twice
  with the same arguments (fix.yml's "Audit after" repeats "Audit before") runs once: same input, same tree. Every
  module runs on every tree, also after one that failed (the playbook's block would stop there): a superset of the
  playbook's calls.

The replay is held to the playbooks on every host of the real runs (the trees are replayed too): the modules the
playbook ran there are the template's, in its order, and each in-process result, the arguments the module ran with
(invocation.module_args) included, equals the playbook's (timing, the lock's timestamp, the warnings' wrapping and
Ansible's own keys aside).
"""
import json
import os

import corpus
import hardening_lib as lib
import pytest

DEMO_HOSTS = ("pve-gpu01", "pve-gpu02", "pve-gpu03")
TEMPLATE_HOST = "demo-pve-gpu01"
AUDIT_FACTS = "Gather and evaluate every pvetune check in one read-only pass"  # audit.yml's only call on a host
# Keys that differ between two runs of one module on one tree, or that Ansible adds or rewrites in a result.
VOLATILE = ("duration", "holder", "warnings", "deprecations", "skipped", "_ansible_no_log")


def _kinds(cases):
    """One corpus case per base host (the first of each, by name)."""
    kinds = {}
    for name, spec in cases:
        kinds.setdefault(spec["base"], name)
    return sorted(kinds.values())


def _comparable(res):
    out = {k: v for k, v in res.items() if k not in VOLATILE}
    out["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w for w in res.get("warnings") or []]
    if isinstance(res.get("holder"), dict):
        out["holder"] = {k: v for k, v in res["holder"].items() if k != "taken_at"}
    return out


def _fix_args(module, args, policy, acs_ports):
    """``args`` (the template host's) with what roles/pvetune_fix/tasks/*.yml takes from this host's merged policy
    (pvetune_fix_policy: pvetune_preflight's result) and from the ACS fix's result (acs_ports). The rest is the same
    on every host: the run id, the role defaults, the lock's owner, pvetune_policy as given."""
    cpu = {key: policy[key] for key in ("amd_pstate_mode", "intel_pstate_mode", "governor", "epp")}
    boost = True if policy["cpu_boost"] else None       # cpu.yml omits it, boot.yml passes null, when it is off
    pcie = {"vendor": policy["pcie_vendor"], "class_prefix": policy["pcie_class_prefix"]}
    mrrs = dict(pcie, mrrs=policy["pcie_mrrs"])
    if module == "pvetune_runtime":
        configs = dict(args["configs"], cpufreq=dict(cpu, boost=boost))
        configs["pcie-mrrs"] = dict(configs["pcie-mrrs"], acs_ports=acs_ports, **mrrs)
        return dict(args, configs=configs)
    return dict(args, **{
        "pvetune_sysctl": {"settings": {"kernel.numa_balancing": policy["numa_balancing"],
                                        "vm.swappiness": policy["vm_swappiness"],
                                        "vm.zone_reclaim_mode": policy["vm_zone_reclaim_mode"]}},
        "pvetune_cpufreq": dict(cpu, **({"boost": boost} if boost else {})),
        "pvetune_zfs_arc": {"arc_max": policy["zfs_arc_max"]},
        "pvetune_pcie_mrrs": mrrs,
        "pvetune_pcie_acs": pcie,
        "pvetune_cmdline": {"ensure": policy["cmdline_required"], "remove": policy["cmdline_forbidden"]},
        "pvetune_kernel": {"series": policy["kernel_series"], "package": policy["kernel_package"]},
        "pvetune_lxc_gpu": {"numa_pin": bool(policy["lxc_numa_pin"])},
    }.get(module, {}))


# The fix tasks that run only for some policies (their "when"): the template must have run exactly those this
# host's policy runs.
WHEN = {"pvetune_kernel": lambda policy: len(policy["kernel_series"]) > 0,
        "pvetune_pcie_acs": lambda policy: bool(policy["pcie_acs_fix"]),
        "pvetune_zfs_arc": lambda policy: bool(policy["zfs_arc_fix"])}


def _replay(calls, root):
    """Run ``calls`` ([(task, module, args, diff)]) in check mode on ``root``: {task: result}."""
    results, done, policy, acs_ports = {}, {}, None, []
    for task, module, args, diff in calls:
        args = dict(args, root=root)
        if diff and module not in ("pvetune_preflight", "pvetune_lock", "pvetune_facts"):
            assert policy is not None, (root, "pvetune_preflight failed: fix.yml would stop before the fixes")
            args = _fix_args(module, args, policy, acs_ports)
        key = json.dumps([module, args, diff], sort_keys=True, default=str)
        if key not in done:
            done[key] = lib.run_module(module, args, check_mode=True, diff=diff)
        res = results[task] = done[key]
        if module == "pvetune_preflight" and not res.get("failed"):
            policy = res["policy"]
            modules = {call[1] for call in calls}
            assert {m: when(policy) for m, when in WHEN.items()} == {m: m in modules for m in WHEN}, (root, policy)
        if module == "pvetune_pcie_acs":
            acs_ports = res.get("boot_ports") or []
    return results


@pytest.fixture(scope="module")
def purity():
    """Every tree built, the real playbook runs, the replay on every tree, and the digests between them."""
    from scratch_host import make_scratch

    workdir = lib.public_tmpdir("pvetune-purity-")
    try:
        cases = corpus.cases()
        roots = {}
        for host in DEMO_HOSTS:  # the full-size demo hosts
            roots["demo-" + host] = make_scratch(host, os.path.join(workdir, "demo-" + host))
        for name, spec in cases:
            roots["corpus-" + name] = corpus.build(name, spec, workdir, "purity-" + name)
        played = [h for h in roots if h.startswith("demo-")] + ["corpus-" + n for n in _kinds(cases)]
        inventory = lib.write_inventory(os.path.join(workdir, "purity.yml"), {h: roots[h] for h in played})
        before = {h: lib.digest(r) for h, r in roots.items()}
        audit = lib.run_playbook(workdir, "audit.yml", inventory,
                                 extravars={"pvetune_report_dir": os.path.join(workdir, "reports-audit")})
        fix = lib.run_playbook(workdir, "fix.yml", inventory, cmdline="--check --diff",
                               extravars={"pvetune_report_dir": os.path.join(workdir, "reports-fix"),
                                          "pvetune_serial": "100%", "pvetune_run_id_override": "purity"})
        after_playbooks = {h: lib.digest(r) for h, r in roots.items()}
        calls = [(task, module, args, False) for task, module, args, _res in audit.module_calls(TEMPLATE_HOST)]
        calls += [(task, module, args, True) for task, module, args, _res in fix.module_calls(TEMPLATE_HOST)]
        replayed = {h: _replay(calls, r) for h, r in roots.items()}
        after_replay = {h: lib.digest(r) for h, r in roots.items()}
        yield {"roots": roots, "played": played, "audit": audit, "fix": fix, "calls": calls, "replayed": replayed,
               "before": before, "after_playbooks": after_playbooks, "after_replay": after_replay}
    finally:
        lib.rmtree(workdir)


def test_playbooks_change_nothing_on_the_demo_hosts_and_one_tree_of_each_kind(purity):
    changed = [h for h in purity["roots"] if purity["after_playbooks"][h] != purity["before"][h]]
    assert changed == [], "audit.yml or fix.yml --check changed these trees: %s" % changed
    # Both playbooks really ran on every host (a run that stopped early would prove nothing).
    stats_audit, stats_fix = purity["audit"].stats(), purity["fix"].stats()
    assert len(purity["played"]) >= 3 + 5, purity["played"]
    for host in purity["played"]:
        assert host in stats_audit["ok"], (host, "audit.yml did not run on it")
        assert host in stats_fix["ok"], (host, "fix.yml --check did not run on it")
        reached = {e.get("task") for e in purity["fix"].task_results(host)}
        assert "Audit before" in reached, (host, sorted(t for t in reached if t))


def test_replay_makes_the_playbooks_module_calls(purity):
    calls = purity["calls"]
    tasks = [task for task, _module, _args, _diff in calls]
    assert len(tasks) == len(set(tasks)), tasks
    # The template is a whole run: audit.yml's audit, and fix.yml's preflight to unlock with every fix between.
    assert tasks[0] == AUDIT_FACTS, tasks
    assert {"Audit before", "Audit after", "Release the host's pvetune lock"} <= set(tasks), tasks
    fix_modules = {module for _task, module, _args, diff in calls if diff}
    assert {"pvetune_sysctl", "pvetune_cpufreq", "pvetune_pcie_mrrs", "pvetune_cmdline", "pvetune_kernel",
            "pvetune_lxc_gpu", "pvetune_runtime"} <= fix_modules, fix_modules
    for host in purity["played"]:
        real = purity["audit"].module_calls(host) + purity["fix"].module_calls(host)
        order = [task for task, _module, _args, _res in real]
        assert order == [t for t in tasks if t in order], (host, "not the template's calls, in its order", order)
        replayed = purity["replayed"][host]
        for task, _module, _args, res in real:
            # The whole result, the arguments the module ran with (invocation.module_args) included.
            assert _comparable(replayed[task]) == _comparable(res), (host, task, "the in-process call differs")


def test_every_tree_unchanged_by_the_in_process_audit_and_fix_planning(purity):
    changed = [h for h in purity["roots"] if purity["after_replay"][h] != purity["after_playbooks"][h]]
    assert changed == [], "audit or fix planning in check mode changed these trees: %s" % changed
    assert len(purity["roots"]) >= 3 + 40
    for host, results in purity["replayed"].items():
        # Every tree reached the fix planning: the audit before it, and every module's check-mode path.
        assert set(results) == {task for task, _module, _args, _diff in purity["calls"]}, host
        assert not results["Audit before"].get("failed"), (host, results["Audit before"].get("msg"))
        for task, res in results.items():
            assert not lib.no_traceback(res), (host, task, res.get("msg"))
