"""The audit's module payload carries only what the audit uses: no fix planner, editor or change set."""
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "bench"))
import payload_size  # noqa: E402


def test_facts_payload_has_no_fix_code():
    files = payload_size.payload("pvetune_facts")["pvetune_files"]
    names = [f.rsplit("/", 1)[-1] for f in files]
    assert "audit.py" in names and "catalogue.py" in names
    fix_code = [n for n in names if n.endswith(("_fix.py", "_regen.py", "_boot.py", "_pct.py"))
                or n in ("grub_edit.py", "changeset.py", "bootunits.py", "rollback.py")]
    assert fix_code == []
