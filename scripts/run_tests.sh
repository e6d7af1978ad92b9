#!/usr/bin/env bash
# The whole pvetune test suite, phase by phase, with timings (what `make test` and CI run).
#
#   scripts/run_tests.sh                       # every phase
#   PVETUNE_TEST_PHASES="unit integration" scripts/run_tests.sh
#
# Every phase runs even if an earlier one failed; the exit status is non-zero
# if any phase failed. Timings go to tests/output/timings.txt.
set -uo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
cd "$TOP"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
export PATH="$VENV/bin:$PATH"
export ANSIBLE_CONFIG="$TOP/ansible.cfg"
export PYTHONDONTWRITEBYTECODE=1
PY="$VENV/bin/python"
# Scratch trees are thousands of small files: keep them on tmpfs (disk I/O made them 100x slower).
if [[ -d /dev/shm && -w /dev/shm ]]; then
  export TMPDIR="/dev/shm/pvetune-tests-$$"
  mkdir -p "$TMPDIR"
  trap 'rm -rf "$TMPDIR"' EXIT
fi

ALL_PHASES="static lint unit integration hardening sanity molecule lab"
PHASES="${PVETUNE_TEST_PHASES:-$ALL_PHASES}"
mkdir -p tests/output
timings=tests/output/timings.txt
: > "$timings"
failed=()

phase_static()      { "$PY" scripts/demo_fleet.py --check && "$PY" scripts/gen_docs.py --check; }
phase_lint()        { ruff check . && ansible-lint --offline -q; }
phase_unit()        { "$PY" -m pytest -q -p no:cacheprovider --basetemp="${TMPDIR:-/tmp}/unit" tests/unit; }
phase_integration() { "$PY" -m pytest -q -p no:cacheprovider --basetemp="${TMPDIR:-/tmp}/integration" tests/integration; }
# Malformed-input corpus, faults, the pmxcfs FUSE test filesystem, injection, locking, check-mode purity
# (tests/hardening). Needs fuse3 and podman (bootstrap.sh containers) and builds the bookworm image if missing.
phase_hardening()   { "$PY" tests/fixtures/corpus/make_corpus.py --check &&
                      "$PY" -m pytest -q -p no:cacheprovider --basetemp="${TMPDIR:-/tmp}/hardening" tests/hardening; }
phase_sanity()      { scripts/ansible_test_sanity.sh; }
phase_molecule()    { if [[ -x scripts/run_molecule.sh ]]; then scripts/run_molecule.sh; else echo "no molecule scenarios yet"; fi; }
phase_lab()         { if [[ -x tests/lab/lab-test.sh ]]; then tests/lab/lab-test.sh; else echo "no lab test yet"; fi; }

start_all=$(date +%s)
for phase in $PHASES; do
  echo
  echo "=== phase: $phase ==="
  t0=$(date +%s)
  if "phase_$phase"; then status=ok; else status=FAILED; failed+=("$phase"); fi
  t1=$(date +%s)
  printf '%-12s %-6s %5ds\n' "$phase" "$status" $((t1 - t0)) | tee -a "$timings"
done
total=$(( $(date +%s) - start_all ))
echo
echo "=== summary (total ${total}s) ==="
cat "$timings"
if ((${#failed[@]})); then
  echo "FAILED phases: ${failed[*]}"
  exit 1
fi
echo "all phases passed"
