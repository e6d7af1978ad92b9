#!/usr/bin/env bash
# The whole pvetune test suite, phase by phase, with timings (what `make test` and CI run).
#
#   scripts/run_tests.sh                       # every phase
#   PVETUNE_TEST_PHASES="unit integration" scripts/run_tests.sh
#   PVETUNE_TEST_WORKERS=1 ...                 # the integration phase in one process (default 2, pytest-xdist)
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
fi

ALL_PHASES="static lint unit integration cluster hardening sanity molecule lab"
PHASES="${PVETUNE_TEST_PHASES:-$ALL_PHASES}"
mkdir -p tests/output
timings=tests/output/timings.txt
: > "$timings"
failed=()

# Builds only the late phases need start at once, in the background and niced: the podman images
# (cluster, hardening, molecule) and the lab's patched QEMU and guest image. On a fresh machine their downloads
# and compile then overlap the early phases instead of adding ~10 minutes after them. A phase that needs one
# joins it first; if it failed, the phase's own build step runs again and reports the error.
declare -A PREBUILD_PID PREBUILD_T0
prebuild() {        # prebuild NAME CMD...
  local log="tests/output/prebuild-$1.log"
  set -m   # its own process group, so an interrupted suite stops all of it
  nice -n 10 "${@:2}" </dev/null >"$log" 2>&1 &
  PREBUILD_PID[$1]=$!
  set +m
  PREBUILD_T0[$1]=$(date +%s)
  echo "prebuild $1: started in the background (log $log)"
}
join_prebuild() {   # join_prebuild NAME: wait for it, record how long it ran and how long the phase waited
  local pid="${PREBUILD_PID[$1]:-}" rc=0 t0
  [[ -n "$pid" ]] || return 0
  t0=$(date +%s)
  wait "$pid" || rc=$?
  unset "PREBUILD_PID[$1]"
  printf '%-12s %-6s %5ds  (waited %ds)\n' "build:$1" "$( ((rc == 0)) && echo ok || echo FAILED)" \
    $(( $(date +%s) - PREBUILD_T0[$1] )) $(( $(date +%s) - t0 )) | tee -a "$timings"
  ((rc == 0)) || { echo "prebuild $1 failed (rc $rc); the phase builds again. Its log ends:"; tail -20 "tests/output/prebuild-$1.log"; }
}
stop_prebuilds() {
  local pid
  for pid in "${PREBUILD_PID[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap 'stop_prebuilds; [[ -n "${TMPDIR:-}" && "$TMPDIR" == /dev/shm/pvetune-tests-* ]] && rm -rf "$TMPDIR"' EXIT
wants() { [[ " $PHASES " == *" $1 "* ]]; }
if [[ $(id -u) -eq 0 && "${PVETUNE_PREBUILD:-1}" != 0 ]]; then
  if wants cluster || wants hardening || wants molecule; then prebuild images scripts/build_images.sh; fi
  if wants lab; then prebuild lab bash -c 'tests/lab/lab.sh deps && tests/lab/lab.sh build'; fi
fi

phase_static()      { "$PY" scripts/demo_fleet.py --check && "$PY" scripts/gen_docs.py --check; }
phase_lint()        { ruff check . && ansible-lint --offline -q; }
# Unit tests on both cores too (a file per worker): 2,378 tests, ~260 CPU-s.
phase_unit()        { "$PY" -m pytest -q -p no:cacheprovider --durations=8 -n "${PVETUNE_TEST_WORKERS:-2}" --dist loadfile \
                        --basetemp="${TMPDIR:-/tmp}/unit" tests/unit; }
# The playbook tests on both cores (pytest-xdist), a test file per worker (their module fixtures and numbered steps
# stay in one process): one playbook run keeps one core busy, so two halve the phase (560 CPU-s, 325 s wall).
phase_integration() { "$PY" -m pytest -q -p no:cacheprovider --durations=8 -n "${PVETUNE_TEST_WORKERS:-2}" --dist loadfile \
                        --basetemp="${TMPDIR:-/tmp}/integration" tests/integration; }
# A real corosync cluster in podman containers (tests/cluster/corosync_lab.py): three nodes, and two with a qnetd
# arbiter, answer corosync-quorumtool -s for the cluster gate. Needs podman and the bookworm image (built if missing).
phase_cluster()     { join_prebuild images
                      "$PY" -m pytest -q -p no:cacheprovider --durations=8 --basetemp="${TMPDIR:-/tmp}/cluster" tests/cluster; }
# Malformed-input corpus, faults, the pmxcfs FUSE test filesystem, injection, locking, check-mode purity
# (tests/hardening). Needs fuse3 and podman (bootstrap.sh containers) and builds the bookworm image if missing.
phase_hardening()   { join_prebuild images
                      "$PY" tests/fixtures/corpus/make_corpus.py --check &&
                      "$PY" -m pytest -q -p no:cacheprovider --durations=8 -n "${PVETUNE_TEST_WORKERS:-2}" --dist loadfile \
                        --basetemp="${TMPDIR:-/tmp}/hardening" tests/hardening; }
# The collection: ansible-test sanity on the tarball scripts/build_collection.sh builds, then that tarball installed
# into a fresh venv (ansible-core only; wheels cached in ~/.cache/pvetune/wheels/runtime) and used by FQCN (tests/collection).
phase_sanity()      { local rc=0; scripts/ansible_test_sanity.sh || rc=1
                      "$PY" -m pytest -q -p no:cacheprovider --durations=8 --basetemp="${TMPDIR:-/tmp}/collection" \
                        tests/collection || rc=1
                      return $rc; }
phase_molecule()    { join_prebuild images; if [[ -x scripts/run_molecule.sh ]]; then scripts/run_molecule.sh; else echo "no molecule scenarios yet"; fi; }
phase_lab()         { join_prebuild lab; if [[ -x tests/lab/lab-test.sh ]]; then tests/lab/lab-test.sh; else echo "no lab test yet"; fi; }

# busy_jiffies: the machine's CPU time in use so far (all cores, /proc/stat), for each phase's "cpu" column: how many
# of the cores the phase (and anything running beside it, such as a background build) kept busy on average.
# test_counts LOG: "  tests N passed, N failed, N skipped" summed over the closing lines of the phase's test runners
# (pytest's "N passed, N skipped in 12.3s", the lab's "N passed, N failed"); nothing when it printed none.
test_counts() {
  awk '/^(=+ )?([A-Za-z-]+: )?[0-9]+ (passed|failed)(,| in |$| =)/ {
         for (i = 1; i < NF; i++) if ($(i) ~ /^[0-9]+$/) { k = $(i + 1); sub(/[,=]+$/, "", k); sub(/^error$/, "errors", k); n[k] += $(i) }
       }
       END { out = ""; split("passed failed errors skipped", order, " ")
             for (i = 1; i <= 4; i++) if (order[i] in n) out = out (out == "" ? "" : ", ") n[order[i]] " " order[i]
             if (out != "") printf "  tests %s", out }' "$1"
}
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
HZ=$(getconf CLK_TCK)
start_all=$(date +%s)
for phase in $PHASES; do
  echo
  echo "=== phase: $phase ==="
  t0=$(date +%s); j0=$(busy_jiffies)
  log="tests/output/phase-$phase.log"
  # The phase in this shell (a pipe would run it in a subshell, which cannot wait for the prebuilds), its output
  # also to a log for the test counts.
  if "phase_$phase" > >(tee "$log") 2>&1; then status=ok; else status=FAILED; failed+=("$phase"); fi
  t1=$(date +%s); j1=$(busy_jiffies)
  sleep 0.2   # let tee drain
  printf '%-12s %-6s %5ds  cpu %s cores%s\n' "$phase" "$status" $((t1 - t0)) \
    "$(awk -v j=$((j1 - j0)) -v hz="$HZ" -v t=$((t1 - t0)) 'BEGIN { printf "%.2f", (t > 0 ? j / hz / t : 0) }')" \
    "$(test_counts "$log")" | tee -a "$timings"
done
total=$(( $(date +%s) - start_all ))
printf 'total        %5ds\n' "$total" >> "$timings"
echo
echo "=== summary (total ${total}s) ==="
cat "$timings"
echo "(the README's table: scripts/phase_table.py --readme README.md --caption '...')"
if ((${#failed[@]})); then
  echo "FAILED phases: ${failed[*]}"
  exit 1
fi
echo "all phases passed"
