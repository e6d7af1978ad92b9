"""The audit's module payload carries only what the audit uses: no fix planner, editor or change set."""
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "bench"))
import payload_size  # noqa: E402


def test_facts_payload_has_no_fix_code():
    files = payload_size.payload("pvetune_facts")["pvetune_files"]
    assert any(f.endswith("/audit.py") for f in files) and any(f.endswith("/catalogue.py") for f in files)
    # concerns/<name>/fix.py, pstate_fix.py, acs_fix.py; lxcgpu's regen, boot, pct; the editors and the boot units
    fix_code = [f for f in files if f.endswith(("fix.py", "/regen.py", "/boot.py", "/pct.py", "/grub_edit.py",
                                                "/changeset.py", "/boot/units.py", "/rollback.py"))]
    assert fix_code == []
