#!/usr/bin/env bash
# Run pvetune's Molecule scenarios (the `molecule` phase of scripts/run_tests.sh / `make test`).
#
#   scripts/run_molecule.sh                      # default, then lxc
#   scripts/run_molecule.sh lxc                  # one scenario
#   PVETUNE_MOLECULE_ARGS='--destroy=never' scripts/run_molecule.sh default   # keep the containers
#   PVETUNE_MOLECULE_PARALLEL=1 scripts/run_molecule.sh   # both scenarios at once (their own containers)
#
# Does every setup step itself, idempotently, so it works on a fresh clone as root:
#   scripts/bootstrap.sh containers   apt packages (podman, runc, lxc, debootstrap), venv, collections
#   scripts/build_images.sh           localhost/pvetune-host:{bookworm,trixie} (debootstrap; cached)
#   host checks                       the fake NVIDIA majors the scenarios use (507-511) are not
#                                     registered by a driver of this machine; the lxc scenario needs
#                                     the cgroup v1 devices controller and no NVIDIA driver (195) on
#                                     the machine (see molecule/lxc/molecule.yml)
# then `molecule test -s <scenario>` for each scenario, output in tests/output/molecule-<scenario>.log,
# wall-clock times in tests/output/molecule-timings.txt. Exit status non-zero if any scenario failed.
# Cleanup never fails a scenario whose verify step passed: a failing destroy, or a container of the scenario
# still present after the run, is reported (tests/output/molecule-timings.txt, "cleanup:") and removed if it can be.
set -uo pipefail
TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$TOP" || exit 1

SCENARIOS=("$@")
((${#SCENARIOS[@]})) || SCENARIOS=(default lxc)
OUT="$TOP/tests/output"
mkdir -p "$OUT"
TIMINGS="$OUT/molecule-timings.txt"
: > "$TIMINGS"

say() { printf '[run_molecule %s] %s\n' "$(date +%T)" "$*"; }
step_times() {  # $1 = timestamped molecule log; prints "  step  seconds" per Molecule step
  awk '/\] Executing$/ { match($0, /> [a-z_]+\]/); step = substr($0, RSTART + 2, RLENGTH - 3); start = $1 }
       /\] Executed: / && step != "" { printf "  %-12s %5ds %s\n", step, $1 - start, $NF; step = "" }' "$1"
}
stamp() { date +%s; }

t0=$(stamp)
"$TOP/scripts/bootstrap.sh" containers || { say "bootstrap failed"; exit 1; }
# shellcheck source=tests/containers/env.sh
. "$TOP/tests/containers/env.sh"
# Scratch files (seeds, ansible's local temp) on tmpfs: the disk is slow for many small files.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT
if [[ -z "${TMPDIR:-}" && -d /dev/shm && -w /dev/shm ]]; then
  export TMPDIR="/dev/shm/pvetune-molecule-$$"
  mkdir -p "$TMPDIR"
  scratch+=("$TMPDIR")
fi
export ANSIBLE_LOCAL_TEMP="${TMPDIR:-/tmp}/ansible-local"
# The simulated hosts' seeds, built once per run and shared by the scenarios (molecule/resources/playbooks/prepare.yml).
PVETUNE_MOLECULE_SEEDS="$(mktemp -d "${TMPDIR:-/tmp}/pvetune-seeds.XXXXXX")" || exit 1
export PVETUNE_MOLECULE_SEEDS
scratch+=("$PVETUNE_MOLECULE_SEEDS")
export PYTHONDONTWRITEBYTECODE=1
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1

[[ $(id -u) -eq 0 ]] || { say "run as root (rootful podman, debootstrap)"; exit 1; }
for major in 507 508 509 510 511; do
  if awk -v m="$major" '/^Character devices:/ { c = 1; next } /^Block devices:/ { c = 0 } c && $1 == m { f = 1 } END { exit !f }' /proc/devices; then
    say "character major $major is registered on this machine (/proc/devices): the scenarios use 507-511 as"
    say "fake NVIDIA majors and a CT opening one must not reach a real driver; refusing"
    exit 1
  fi
done
t=$(stamp)
"$TOP/scripts/build_images.sh" || { say "building the images failed"; exit 1; }
printf '%-10s %5ds\n' "images" $(( $(stamp) - t )) | tee -a "$TIMINGS"

scenario_names() {  # $1 = scenario; the container names of its platforms
  awk '/^platforms:/ { p = 1; next } /^[a-z]/ { p = 0 } p && /^  - name: / { print $3 }' "$TOP/molecule/$1/molecule.yml"
}

run_scenario() {  # $1 = scenario; writes $OUT/molecule-$1.log and $OUT/molecule-$1.result (status, seconds, steps)
  local scenario="$1" log="$OUT/molecule-$1.log" result="$OUT/molecule-$1.result" t rc status names left
  : > "$result"
  if [[ ! -f "$TOP/molecule/$scenario/molecule.yml" ]]; then
    say "no scenario $scenario"; echo "FAILED 0" > "$result"; return
  fi
  if [[ "$scenario" == lxc ]] && ! grep -q ' /sys/fs/cgroup/devices ' /proc/self/mountinfo; then
    say "lxc: this machine has no cgroup v1 devices controller; the lxc scenario's host container"
    say "(pvetune-lxchost-init, the pct stand-in's v1 twins) is built for cgroup v1 hosts: FAILED"
    echo "FAILED 0" > "$result"; return
  fi
  if [[ "$scenario" == lxc ]] && awk '/^Character devices:/ { c = 1; next } /^Block devices:/ { c = 0 } c && $1 == 195 { f = 1 } END { exit !f }' /proc/devices; then
    say "lxc: this machine has an NVIDIA driver (major 195 in /proc/devices); the scenario's CT opens fake"
    say "nodes with major 195 and must not reach a real GPU: FAILED (run it on a machine without NVIDIA GPUs)"
    echo "FAILED 0" > "$result"; return
  fi
  say "molecule test -s $scenario (log: ${log#"$TOP"/})"
  t=$(stamp)
  # Every output line gets the epoch second it was written at (bash's printf, no extra tool), so
  # the log tells how long each Molecule step took.
  # shellcheck disable=SC2086 # PVETUNE_MOLECULE_ARGS is a list of options
  molecule test -s "$scenario" ${PVETUNE_MOLECULE_ARGS:-} 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$log"
  rc=${PIPESTATUS[0]}
  if ((rc == 0)); then
    status=ok
  elif grep -q '> verify\] Executed: Successful' "$log" \
      && [[ "$(grep -o '> [a-z_]*\] Executing$' "$log" | tail -n 1)" == "> destroy] Executing" ]]; then
    # Every assertion passed; only the final destroy failed. Reported, not a failure of the scenario.
    status=ok; echo "cleanup: $scenario: molecule's destroy failed (exit $rc) after verify passed; see ${log#"$TOP"/}" >> "$result"
  else
    status=FAILED
  fi
  # Containers of the scenario still present (a destroy that could not remove them): reported, then removed.
  names=$(scenario_names "$scenario")
  if [[ -n "$names" && " ${PVETUNE_MOLECULE_ARGS:-} " != *" --destroy=never "* ]]; then
    # shellcheck disable=SC2046 # one filter per name
    left=$(podman container ls -a --format '{{.Names}}' $(sed 's/^/--filter=name=^/; s/$/$/' <<< "$names") 2> /dev/null)
    if [[ -n "$left" ]]; then
      echo "cleanup: $scenario: containers left after the run: $left" >> "$result"
      # shellcheck disable=SC2086
      podman rm --force --ignore --time 0 $left > /dev/null 2>&1 \
        || echo "cleanup: $scenario: could not remove $left" >> "$result"
    fi
  fi
  { echo "$status $(( $(stamp) - t ))"; cat "$result"; } > "$result.new" && mv "$result.new" "$result"
}

report_scenario() {  # $1 = scenario: its line and steps in the timings, its log's end if it failed
  local scenario="$1" status dt
  read -r status dt < "$OUT/molecule-$scenario.result"
  printf '%-10s %5ds %s\n' "$scenario" "$dt" "$status" | tee -a "$TIMINGS"
  [[ -f "$OUT/molecule-$scenario.log" ]] && step_times "$OUT/molecule-$scenario.log" | tee -a "$TIMINGS"
  grep '^cleanup: ' "$OUT/molecule-$scenario.result" | tee -a "$TIMINGS"
  if [[ "$status" != ok ]]; then
    failed+=("$scenario")
    say "$scenario failed; the end of its log:"
    [[ -f "$OUT/molecule-$scenario.log" ]] && tail -n 80 "$OUT/molecule-$scenario.log"
  fi
}

failed=()
if [[ "${PVETUNE_MOLECULE_PARALLEL:-0}" == 1 && ${#SCENARIOS[@]} -gt 1 ]]; then
  # Each scenario has its own containers, ephemeral directory and log.
  pids=()
  for scenario in "${SCENARIOS[@]}"; do
    : > "$OUT/molecule-$scenario.log"
    run_scenario "$scenario" & pids+=($!)
    # The next one starts when this one has passed molecule's prerun (ansible-compat's cache is not made for two
    # writers at once): its first step runs, or it has ended.
    until grep -qs '\] Executing$' "$OUT/molecule-$scenario.log" || ! kill -0 "${pids[-1]}" 2> /dev/null; do
      sleep 0.5
    done
  done
  wait "${pids[@]}"
  for scenario in "${SCENARIOS[@]}"; do report_scenario "$scenario"; done
else
  for scenario in "${SCENARIOS[@]}"; do run_scenario "$scenario"; report_scenario "$scenario"; done
fi
printf '%-10s %5ds\n' "total" $(( $(stamp) - t0 )) | tee -a "$TIMINGS"
if ((${#failed[@]})); then say "FAILED: ${failed[*]}"; exit 1; fi
say "all scenarios passed"
