#!/usr/bin/env bash
# Run pvetune's Molecule scenarios (the `molecule` phase of scripts/run_tests.sh / `make test`).
#
#   scripts/run_molecule.sh                      # default, then lxc
#   scripts/run_molecule.sh lxc                  # one scenario
#   PVETUNE_MOLECULE_ARGS='--destroy=never' scripts/run_molecule.sh default   # keep the containers
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
if [[ -z "${TMPDIR:-}" && -d /dev/shm && -w /dev/shm ]]; then
  export TMPDIR="/dev/shm/pvetune-molecule-$$"
  mkdir -p "$TMPDIR"
  trap 'rm -rf "$TMPDIR"' EXIT
fi
export ANSIBLE_LOCAL_TEMP="${TMPDIR:-/tmp}/ansible-local"
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

failed=()
for scenario in "${SCENARIOS[@]}"; do
  if [[ ! -f "$TOP/molecule/$scenario/molecule.yml" ]]; then
    say "no scenario $scenario"; failed+=("$scenario"); continue
  fi
  if [[ "$scenario" == lxc ]] && ! grep -q ' /sys/fs/cgroup/devices ' /proc/self/mountinfo; then
    say "lxc: this machine has no cgroup v1 devices controller; the lxc scenario's host container"
    say "(pvetune-lxchost-init, the pct stand-in's v1 twins) is built for cgroup v1 hosts: FAILED"
    failed+=("$scenario"); continue
  fi
  if [[ "$scenario" == lxc ]] && awk '/^Character devices:/ { c = 1; next } /^Block devices:/ { c = 0 } c && $1 == 195 { f = 1 } END { exit !f }' /proc/devices; then
    say "lxc: this machine has an NVIDIA driver (major 195 in /proc/devices); the scenario's CT opens fake"
    say "nodes with major 195 and must not reach a real GPU: FAILED (run it on a machine without NVIDIA GPUs)"
    failed+=("$scenario"); continue
  fi
  log="$OUT/molecule-$scenario.log"
  say "molecule test -s $scenario (log: ${log#"$TOP"/})"
  t=$(stamp)
  # Every output line gets the epoch second it was written at (bash's printf, no extra tool), so
  # the log tells how long each Molecule step took.
  # shellcheck disable=SC2086 # PVETUNE_MOLECULE_ARGS is a list of options
  molecule test -s "$scenario" ${PVETUNE_MOLECULE_ARGS:-} 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$log"
  if ((PIPESTATUS[0] == 0)); then status=ok; else status=FAILED; failed+=("$scenario"); fi
  dt=$(( $(stamp) - t ))
  printf '%-10s %5ds %s\n' "$scenario" "$dt" "$status" | tee -a "$TIMINGS"
  step_times "$log" | tee -a "$TIMINGS"
  if [[ "$status" != ok ]]; then
    say "$scenario failed; the end of its log:"
    tail -n 80 "$log"
  fi
done
printf '%-10s %5ds\n' "total" $(( $(stamp) - t0 )) | tee -a "$TIMINGS"
if ((${#failed[@]})); then say "FAILED: ${failed[*]}"; exit 1; fi
say "all scenarios passed"
