#!/usr/bin/env bash
# `make fix-demo`: fix.yml on scratch copies of the demo fleet, no reboot, stand-ins for the
# Proxmox-only and hardware-only tools (tests/standins/), then audit, a second fix run and
# rollback.yml -- the steps of tests/integration/test_fix_playbook.py, with its assertions.
#
# Everything stays in ${PVETUNE_FIX_DEMO_DIR:-build/fix-demo}/ afterwards: the scratch trees,
# inventory.yml and the reports (fix records in reports-fix*/, the audit in reports-audit/).
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="${PVETUNE_VENV:-$TOP/.venv}/bin:$PATH"
export ANSIBLE_CONFIG="$TOP/ansible.cfg"
export PVETUNE_FIX_DEMO_DIR="${PVETUNE_FIX_DEMO_DIR:-$TOP/build/fix-demo}"
cd "$TOP"
python -m pytest -v -p no:cacheprovider tests/integration/test_fix_playbook.py
echo
echo "Scratch fleet, inventory and reports: $PVETUNE_FIX_DEMO_DIR"
for record in "$PVETUNE_FIX_DEMO_DIR"/reports-fix/fix-*/*.json; do
  python - "$record" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
changed = {k: len((v or {}).get("files", [])) + len((v or {}).get("runtime", [])) for k, v in r["changes"].items()}
print("%-10s %-18s reboot needed: %-5s changes per concern: %s" % (
    r["host"], r["result"], r["reboot_needed"], ", ".join("%s %d" % kv for kv in sorted(changed.items()))))
PY
done
