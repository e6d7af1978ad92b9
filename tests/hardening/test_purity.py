"""Check-mode purity: audit.yml and fix.yml --check over the AMD demo hosts and every corpus tree (the Intel
corpus cases start from pve-gpu05) change not one byte (tree digests; only the stand-ins' .pvetune/calls.log is
excluded). The full-size pve-gpu05's check run is held byte for byte by tests/integration/test_fix_playbook.py.

One inventory holds all trees, and each playbook runs once over all of them (all hosts in one
batch), so the whole fleet costs two playbook runs.
"""
import os

import corpus
import hardening_lib as lib

DEMO_HOSTS = ("pve-gpu01", "pve-gpu02", "pve-gpu03")


def test_audit_and_fix_check_change_nothing(hardening_tmp):
    workdir = lib.public_tmpdir("pvetune-purity-")
    try:
        from scratch_host import make_scratch

        roots = {}
        for host in DEMO_HOSTS:  # the full-size demo hosts
            roots["demo-" + host] = make_scratch(host, os.path.join(workdir, "demo-" + host))
        for name, spec in corpus.cases():
            roots["corpus-" + name] = corpus.build(name, spec, workdir, "purity-" + name)
        inventory = lib.write_inventory(os.path.join(workdir, "purity.yml"), roots)
        before = {h: lib.digest(r) for h, r in roots.items()}
        audit = lib.run_playbook(workdir, "audit.yml", inventory,
                                 extravars={"pvetune_report_dir": os.path.join(workdir, "reports-audit")})
        fix = lib.run_playbook(workdir, "fix.yml", inventory, cmdline="--check --diff",
                               extravars={"pvetune_report_dir": os.path.join(workdir, "reports-fix"),
                                          "pvetune_serial": "100%", "pvetune_run_id_override": "purity"})
        changed = [h for h, r in roots.items() if lib.digest(r) != before[h]]
        assert changed == [], "check mode changed these trees: %s" % changed
        # Both playbooks really ran on every tree (a run that stopped early would prove nothing).
        stats_audit, stats_fix = audit.stats(), fix.stats()
        for host in roots:
            assert host in stats_audit["ok"], (host, "audit.yml did not run on it")
            assert host in stats_fix["ok"], (host, "fix.yml --check did not run on it")
            reached = {e.get("task") for e in fix.task_results(host)}
            assert "Audit before" in reached, (host, sorted(t for t in reached if t))
        assert len(roots) >= 3 + 40
    finally:
        lib.rmtree(workdir)
