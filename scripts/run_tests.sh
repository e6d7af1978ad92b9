#!/usr/bin/env bash
# The whole pvetune test suite, phase by phase, with timings (what `make test` and CI run).
#
#   scripts/run_tests.sh                       # every phase
#   PVETUNE_TEST_PHASES="unit integration" scripts/run_tests.sh
#   PVETUNE_TEST_WORKERS=1 ...                 # the integration phase in one process (default 2, pytest-xdist)
#   PVETUNE_TEST_PHASES="cluster+sanity"       # phases joined by + run at the same time (the first one's output
#                                              # streams, the others' is printed when they end)
#   PVETUNE_TEST_PHASES="&lab unit"            # &NAME: in the background from there on, joined after the last phase
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

# sanity (ansible-test: one busy core, ~200 s) runs beside cluster (a corosync lab in containers that mostly waits,
# under one core): the two fill the machine's two cores instead of leaving one idle for ~5 minutes.
# The lab (QEMU VMs under TCG: ~20 minutes, ~1.5 cores busy, waiting on the VMs the rest) runs in the background from
# the start (&lab): its build first where not cached, then its phases beside all the others. Alone after them it
# added its whole time to the suite's.
ALL_PHASES="&lab static lint unit integration cluster+sanity hardening molecule"
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
  # Its own end time goes to a file: the phase that joins it may come much later.
  ( nice -n 10 "${@:2}" </dev/null >"$log" 2>&1; rc=$?; date +%s >"tests/output/prebuild-$1.end"; exit $rc ) &
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
  local end
  end=$(cat "tests/output/prebuild-$1.end" 2>/dev/null || date +%s)
  rm -f "tests/output/prebuild-$1.end"
  printf '%-12s %-6s %5ds  (waited %ds)\n' "build:$1" "$( ((rc == 0)) && echo ok || echo FAILED)" \
    $(( end - PREBUILD_T0[$1] )) $(( $(date +%s) - t0 )) | tee -a "$timings"
  ((rc == 0)) || { echo "prebuild $1 failed (rc $rc); the phase builds again. Its log ends:"; tail -20 "tests/output/prebuild-$1.log"; }
}
stop_prebuilds() {
  local pid
  for pid in "${PREBUILD_PID[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap 'stop_prebuilds; [[ -n "${TMPDIR:-}" && "$TMPDIR" == /dev/shm/pvetune-tests-* ]] && rm -rf "$TMPDIR"' EXIT
wants() { local p=" ${PHASES//+/ } "; [[ "${p// &/ }" == *" $1 "* ]]; }
# The demo fleet is generated, not tracked (scripts/demo_fleet.py): made once here, before any phase reads it.
"$PY" scripts/demo_fleet.py --ensure
if [[ $(id -u) -eq 0 && "${PVETUNE_PREBUILD:-1}" != 0 ]]; then
  if wants cluster || wants hardening || wants molecule; then prebuild images scripts/build_images.sh; fi
  # (a lab that runs from the start builds itself: lab-test.sh runs deps and build, cached, first)
  if wants lab && [[ " $PHASES " != *" &lab "* ]]; then prebuild lab bash -c 'tests/lab/lab.sh deps && tests/lab/lab.sh build'; fi
fi

phase_static()      { "$PY" scripts/gen_docs.py --check; }
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
# Both scenarios at once (their own containers and logs): each keeps about one core busy (~300 s instead of ~480 s).
phase_molecule()    { join_prebuild images
                      if [[ -x scripts/run_molecule.sh ]]; then PVETUNE_MOLECULE_PARALLEL="${PVETUNE_MOLECULE_PARALLEL:-1}" scripts/run_molecule.sh
                      else echo "no molecule scenarios yet"; fi; }
# In the background (&lab) its build is niced like a prebuild (the phases beside it come first), and the failing
# reboot waits 90 s instead of 30 s for the killed VM (lab-test.sh phase 3: vm1's shutdown must end before it gives
# up, and it is slower with the other phases on the cores).
phase_lab()         { join_prebuild lab
                      if [[ " $PHASES " == *" &lab "* ]]; then
                        nice -n 10 tests/lab/lab.sh deps && nice -n 10 tests/lab/lab.sh build || return 1
                        export LAB_TEST_FAIL_TIMEOUT="${LAB_TEST_FAIL_TIMEOUT:-90}"
                      fi
                      tests/lab/lab-test.sh; }

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
cpu_cores() {   # cpu_cores J0 J1 SECONDS: cores busy on average between two busy_jiffies readings
  awk -v j=$(($2 - $1)) -v hz="$HZ" -v t="$3" 'BEGIN { printf "%.2f", (t > 0 ? j / hz / t : 0) }'
}
phase_line() {  # phase_line NAME STATUS SECONDS CORES LOG [NOTE]: a timings line (scripts/phase_table.py reads it)
  printf '%-12s %-6s %5ds  cpu %s cores%s%s\n' "$1" "$2" "$3" "$4" "$(test_counts "$5")" "${6:+  ($6)}" | tee -a "$timings"
}
# Background phases: a subshell each (it must not join a prebuild, which only this shell can wait for), output to
# its log only; it writes its status, end time and busy_jiffies when done, and finish_bg prints and times it.
declare -A BG_PID=() BG_T0=() BG_J0=()
start_bg() {    # start_bg NAME WHY
  echo "=== phase: $1 (in the background $2; log tests/output/phase-$1.log) ==="
  BG_T0[$1]=$(date +%s); BG_J0[$1]=$(busy_jiffies)
  ( if "phase_$1" >"tests/output/phase-$1.log" 2>&1; then st=ok; else st=FAILED; fi
    echo "$st $(date +%s) $(busy_jiffies)" >"tests/output/phase-$1.done" ) &
  BG_PID[$1]=$!
}
finish_bg() {   # finish_bg NAME NOTE: wait for it, print its log, record its line
  local status t1 j1
  wait "${BG_PID[$1]}" 2>/dev/null || true
  echo
  echo "=== phase: $1 (ran $2) ==="
  cat "tests/output/phase-$1.log"
  read -r status t1 j1 < "tests/output/phase-$1.done" 2>/dev/null || { status=FAILED; t1=$(date +%s); j1=$(busy_jiffies); }
  rm -f "tests/output/phase-$1.done"
  [[ $status == ok ]] || failed+=("$1")
  phase_line "$1" "$status" $((t1 - BG_T0[$1])) "$(cpu_cores "${BG_J0[$1]}" "$j1" $((t1 - BG_T0[$1])))" \
    "tests/output/phase-$1.log" "$2"
  unset "BG_PID[$1]"
}
start_all=$(date +%s)
from_start=()
for group in $PHASES; do
  if [[ $group == \&* ]]; then   # &NAME: from here on in the background, joined after the last phase
    start_bg "${group#&}" "from the start"
    from_start+=("${group#&}")
    continue
  fi
  IFS=+ read -r -a members <<<"$group"
  fg=${members[0]}
  for bg in "${members[@]:1}"; do start_bg "$bg" "beside $fg"; done
  echo
  echo "=== phase: $fg ==="
  t0=$(date +%s); j0=$(busy_jiffies)
  log="tests/output/phase-$fg.log"
  # The phase in this shell (a pipe would run it in a subshell, which cannot wait for the prebuilds), its output
  # also to a log for the test counts.
  if "phase_$fg" > >(tee "$log") 2>&1; then status=ok; else status=FAILED; failed+=("$fg"); fi
  t1=$(date +%s); j1=$(busy_jiffies)
  sleep 0.2   # let tee drain
  phase_line "$fg" "$status" $((t1 - t0)) "$(cpu_cores "$j0" "$j1" $((t1 - t0)))" "$log" \
    "${members[1]:+with ${members[*]:1} beside}"
  for bg in "${members[@]:1}"; do finish_bg "$bg" "beside $fg"; done
done
for bg in "${from_start[@]}"; do finish_bg "$bg" "in the background from the start"; done
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
