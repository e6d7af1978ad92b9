#!/usr/bin/env bash
# tests/lab/lab-test.sh — end to end on real kernels: audit -> fix -> reboot -> verify, in two QEMU
# VMs shaped like Proxmox VE GPU hosts (tests/lab/README.md). What `make lab-test` and the `lab`
# phase of scripts/run_tests.sh run.
#
#   deps -> build (cached) -> up 2 -> seed, then
#   1 audit-before     audit.yml with the lab policy (tests/lab/policy.yml): the expected checks fail
#                      (pcie.acs on the switch ports the kernel set ACS on, iommu.mode on the GPUs'
#                      translated groups), the fallback is a warn with its reason, and nothing on
#                      either VM changed (tests/lab/vm/state.sh listing before == after).
#   2 check-diff       fix.yml --check --diff -e pvetune_reboot_ok=true: every fix reports the change it would
#                      make (the diff lines are checked), and nothing on either VM changed (listing,
#                      boot_id, kernel values, no lock).
#   3 rollout-failure  fix.yml --tags cmdline -e pvetune_reboot_ok=true on both VMs (one fix that needs a reboot is
#                      enough to prove the stop; the full fix is phase 5), and a watcher that pulls the plug on
#                      vm1's QEMU when its kernel restarts: the rollout stops at vm1 (record + failure
#                      message say why) and vm2 is untouched (same listing, no lock, no manifest, no
#                      module ran on it).
#   4 vm1-fresh        vm1 restarted from a fresh overlay (the boot starts in the background as soon as phase 3's
#                      run has ended, under phase 3's checks) and seeded; vm2 keeps running, unchanged.
#   5 fix              the nvidia-uvm major of the NEXT boot is changed on both VMs (lab file), then
#                      fix.yml -e pvetune_reboot_ok=true, serial 1: vm1 fixed, rebooted and gated before vm2
#                      is touched (ansible-runner event order).
#   6 verify           the running kernels, read over SSH (tests/lab/vm/kstate.sh): /proc/cmdline, the
#                      processor module's max_cstate, cpuidle states, numa_balancing, MaxReadReq read
#                      with setpci after the reboot reset it and ACS Control after the kernel set it
#                      again (both restored by pvetune-pcie-mrrs.service), identity IOMMU groups (iommu=pt),
#                      uname -r = the pinned non-default kernel, CT 101 allows this boot's uvm major
#                      (rewritten at boot by pvetune-lxc-gpu.service).
#   7 audit-after      every check the VM can satisfy passes; cpu.scaling_driver is warn (no CPPC);
#                      nothing fails or errors.
#   8 fix-again        0 changed, no reboot (both VMs in one batch).
#   9 rollback         rollback.yml (no reboot, both VMs in one batch): the runtime values are back,
#                      ACS Control 001d on both switch ports, DevCtl 2000, the boot units removed.
# Every VM is stopped at the end, also on failure. Phase times: tests/lab/work/timings.txt.
#
# Knobs: LAB_WORK (tests/lab/work), PVETUNE_VENV (.venv), LAB_TEST_REBOOT_TIMEOUT (900 s, the fix
# run's reboot timeout), LAB_TEST_FAIL_TIMEOUT (30 s, how long the failing run waits for the
# killed VM: it must cover vm1's shutdown, and a check makes sure the kill came before the run gave up, i.e. that
# it was the kill, not a slow reboot, that failed it).
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$LAB_DIR/../.." && pwd)
LAB=$LAB_DIR/lab.sh
W=${LAB_WORK:-$LAB_DIR/work}
export LAB_WORK=$W
OUT=$W/lab-test
VENV=${PVETUNE_VENV:-$TOP/.venv}
PY=$VENV/bin/python
POLICY=$LAB_DIR/policy.yml
INV=$W/inventory.yml
REPORTS=$OUT/reports
REBOOT_TIMEOUT=${LAB_TEST_REBOOT_TIMEOUT:-900}
FAIL_TIMEOUT=${LAB_TEST_FAIL_TIMEOUT:-30}
N=2
UVM_SEED=511     # lab.sh seed default (LAB_UVM_MAJOR)
UVM_NEXT=512     # the major the boot after the fix gets (simulates a driver reload/update)
UVM_CT=509       # the stale major CT 101 allows (lab.sh seed default, LAB_CT_UVM_MAJOR)
REBOOT_TASK='Reboot (a fix needs it and pvetune_reboot_ok is true)'

export ANSIBLE_CONFIG=$TOP/ansible.cfg PATH=$VENV/bin:$PATH ANSIBLE_NOCOLOR=1 PYTHONDONTWRITEBYTECODE=1

PASS=0 FAIL=0
PHASES=()
T_ALL=$EPOCHREALTIME
WATCHER=

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
say() { printf '[lab-test %s] %s\n' "$(date +%T)" "$*"; }
die() { say "ABORT: $*"; exit 1; }
SUBTIMES=()   # detail lines a phase adds under its own line (reboot durations)
phase() {   # phase NAME CMD...: run, time, record
  local name=$1 t0=$EPOCHREALTIME t
  shift
  say "== $name"
  "$@"
  t=$(since "$t0")
  PHASES+=("$(printf '%-34s %8s s' "$name" "$t")")
  PHASES+=("${SUBTIMES[@]}")
  SUBTIMES=()
  say "== $name: ${t} s"
}
# result, check, check_eq, check_has, check_no
# shellcheck source=tests/lab/asserts.sh
. "$LAB_DIR/asserts.sh"

# On any exit but the normal end (which stops the VMs itself, down_and_verify): stop what runs in the background
# first (a VM restart still under way would start its QEMU after `down`; terminated, lab.sh stops the QEMU it
# started), then every VM. Nothing here changes the exit status: what could not be cleaned is said, not failed.
cleanup() {
  local rc=$? p
  for p in $(jobs -p); do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$LAB" down || say "teardown: lab.sh down could not clean everything (above)"
  if ((rc != 0)); then
    say "lab-test aborted (rc $rc) after $(since "$T_ALL") s; $PASS passed, $FAIL failed so far"
    write_timings || say "could not write $W/timings.txt"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

write_timings() {
  mkdir -p "$W"
  {
    echo "# tests/lab/lab-test.sh phase times ($(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
    printf '%s\n' "${PHASES[@]}"
    printf '%-34s %8s s\n' total "$(since "$T_ALL")"
  } >"$W/timings.txt"
}

vssh() { local i=$1; shift; "$LAB" ssh "$i" -- "$@" </dev/null; }

declare -A K   # kstate of the VM last loaded
declare -A BOOT_ID   # boot_id per VM before the run under test
MARK='@@pvetune-lab-state.sh@@'
# fetch KTAG STAG I: read vm I in one SSH session: kstate.sh (what the running kernel says) into
# $OUT/kstate-KTAG-vmI, then state.sh (the listing of pvetune-relevant files/values) into $OUT/state-STAG-vmI;
# '-' skips one. Both only read. Fails (saying so) when the listing did not complete.
fetch() {
  local kt=$1 st=$2 i=$3 raw=$OUT/fetch-$1-$2-vm$3 rc=0
  {
    if [[ $kt != - ]]; then printf '(\n'; cat "$LAB_DIR/vm/kstate.sh"; printf '\n) || true\n'; fi
    if [[ $st != - ]]; then printf 'echo %s\n(\n' "$MARK"; cat "$LAB_DIR/vm/state.sh"; printf '\n)\n'; fi
  } | "$LAB" ssh "$i" -- bash -s >"$raw" 2>&1 || rc=$?
  if [[ $kt != - ]]; then sed "/^$MARK\$/,\$d" "$raw" >"$OUT/kstate-$kt-vm$i"; fi
  if [[ $st != - ]]; then
    sed "0,/^$MARK\$/d" "$raw" >"$OUT/state-$st-vm$i"
    if ((rc != 0)) || ! grep -qxF -- "$MARK" "$raw"; then
      say "vm$i: state listing failed (rc $rc, $raw)"
      return 1
    fi
  fi
  rm -f "$raw"
}
use_kstate() {    # use_kstate TAG I: load K from $OUT/kstate-TAG-vmI (fetch wrote it)
  local k v
  K=()
  while IFS='=' read -r k v; do [[ -n $k ]] && K[$k]=$v; done <"$OUT/kstate-$1-vm$2"
}
# each_vm CMD ARGS...: CMD ARGS I for every VM I at once, then wait for all of them; fails if one did. The VMs'
# vCPUs then run on both host cores instead of taking turns. Only for what writes files (a background job's
# variables are lost).
each_vm() {
  local i pids=() p rc=0
  for ((i = 1; i <= N; i++)); do "$@" "$i" & pids+=("$!"); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return "$rc"
}
same_state() {    # same_state DESCRIPTION TAG_A TAG_B I
  local a=$OUT/state-$2-vm$4 b=$OUT/state-$3-vm$4 d
  d=$(diff "$a" "$b" | grep '^[<>]' | head -6 | tr '\n' ' ' || true)
  check_eq "$1 ($(wc -l <"$a") files/values, sha $(sha256sum <"$a" | cut -c1-12))" "${d:-identical}" identical
}

labtool() { "$PY" "$LAB_DIR/labtool.py" "$@"; }
play() {          # play NAME PLAYBOOK ARGS...: returns the playbook's rc; output in $OUT/NAME.log
  local name=$1 book=$2 rc=0
  shift 2
  # The policy file first: a later -e (ARGS) overrides what it sets (pvetune_reboot_timeout).
  labtool play "$name" "$book" -i "$INV" -e "@$POLICY" -e "pvetune_report_dir=$REPORTS" "$@" \
    >"$OUT/$name.log" 2>&1 || rc=$?
  grep -A$((N + 1)) '^PLAY RECAP' "$OUT/$name.log" | sed 's/^/    /' || true
  return "$rc"
}
audit_lines() { labtool audit "$REPORTS/latest"; }
status_of() {     # status_of LINES HOST CHECK -> "status<TAB>message<TAB>current"
  awk -F'\t' -v h="$2" -v c="$3" '$1 == h && $2 == c { print $3 "\t" $4 "\t" $5 }' <<<"$1"
}
record() { local f=$REPORTS/fix-$1/$2.json; shift 2; labtool json "$f" "$@"; }   # record RUN_ID HOST KEY...

# ---------------------------------------------------------------------------------------------
# phases

preflight() {
  [[ -x $PY ]] || die "no virtualenv at $VENV: run scripts/bootstrap.sh lab (or make lab-test)"
  "$PY" -c 'import ansible_runner' 2>/dev/null || die "ansible-runner missing in $VENV"
  rm -rf "$OUT"
  mkdir -p "$OUT" "$REPORTS"
  "$LAB" down   # every phase starts from fresh overlays, never from VMs an earlier run left
}

PIN=
discover() {
  # The kernel to pin: the generic flavour, i.e. NOT the one GRUB boots by default (-cloud-amd64
  # sorts first), so a booted pin is visible in uname -r.
  local booted k
  k=$(vssh 1 'ls /boot/vmlinuz-*-amd64 | sed "s#.*/vmlinuz-##" | grep -v cloud | sort -V | tail -1; uname -r')
  PIN=$(sed -n 1p <<<"$k")
  booted=$(sed -n 2p <<<"$k")
  say "kernels: GRUB default (booted) $booted, pin target $PIN"
  check "pin target is a generic -amd64 kernel" "$PIN" '[0-9.]+-[0-9]+-amd64'
  check_no "pin target is not the booted default" "$booted" "^${PIN//./\\.}\$"
}

audit_before() {
  local i rc=0 lines s
  each_vm fetch - audit-pre || die "state listing failed"
  play audit-before audit.yml || rc=$?
  # What the kernel itself did at boot, and the listing after the audit: both VMs at once.
  each_vm fetch audit audit-post || die "state listing failed"
  check_eq "audit exits non-zero (hosts fail high-severity checks)" "$rc" 2
  lines=$(audit_lines)
  printf '%s\n' "$lines" | sed 's/^/    /' | cut -c1-160
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i c want
    for c in cpu.governor:fail cpu.cstates:fail kernel.numa_balancing:fail pcie.mrrs:fail boot.cmdline:fail \
        lxc.gpu_devices:fail cpu.scaling_driver:warn cpu.epp:skip nvidia.driver:skip pcie.link:pass \
        kernel.version:pass pcie.acs:fail iommu.mode:fail pcie.topology:pass pcie.bar1:pass pcie.sriov:skip; do
      want=${c#*:}
      s=$(status_of "$lines" "$h" "${c%%:*}")
      check_eq "$h ${c%%:*} before the fix" "${s%%$'\t'*}" "$want"
    done
    s=$(status_of "$lines" "$h" cpu.scaling_driver)
    check_has "$h cpu.scaling_driver warn says why (fallback)" "$s" "scaling_driver_fallback"
    check_has "$h cpu.scaling_driver warn says why (cmdline)" "$s" "amd_pstate=active is not on the kernel command line"
    s=$(status_of "$lines" "$h" nvidia.driver)
    check_has "$h nvidia.driver skip has the policy's reason" "$s" "skipped by policy: lab VM"
    s=$(status_of "$lines" "$h" lxc.gpu_devices)
    check_has "$h lxc.gpu_devices names the stale uvm line" "$s" "c $UVM_CT:* rwm"
    s=$(status_of "$lines" "$h" pcie.acs)
    check_has "$h pcie.acs names both switch downstream ports" "$s" \
      "ACS redirects GPU peer traffic to the root complex on 0000:42:00.0, 0000:42:01.0"
    s=$(status_of "$lines" "$h" iommu.mode)
    check_has "$h iommu.mode: both GPUs translated (DMA-FQ)" "$s" "2 host-owned GPUs in a translated IOMMU domain (DMA-FQ)"
    # What the kernel itself did at boot (IOMMU on): ACS SV RR CR UF on both ports, a translated group per GPU.
    use_kstate audit "$i"
    check_eq "$h kernel set ACSCtl 001d on 42:00.0 / 42:01.0 at boot (setpci)" \
      "${K[acsctl_42_00_0]} ${K[acsctl_42_01_0]}" "001d 001d"
    check_eq "$h lspci 42:00.0 ACSCtl at boot" "${K[lspci_acsctl_42_00_0]}" "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    check_eq "$h IOMMU default domain, GPU groups' types (no iommu=pt)" \
      "${K[iommu_default_type]} ${K[iommu_type_43_00_0]} ${K[iommu_type_44_00_0]}" "DMA-FQ DMA-FQ DMA-FQ"
    check_no "$h GPUs in different IOMMU groups" "${K[iommu_group_43_00_0]}" "^${K[iommu_group_44_00_0]}\$"
    same_state "$h unchanged by the audit" audit-pre audit-post "$i"
  done
}

# fix.yml --check --diff, pvetune_reboot_ok=true (the most a real run would do): it shows every planned change
# (file diffs, runtime before/after) and changes nothing: same listing, same boot, same kernel values.
check_diff() {
  local i rc=0 run stats diffs d
  run=lab-check-$(date -u +%Y%m%dT%H%M%SZ)
  each_vm fetch pre-check -
  for ((i = 1; i <= N; i++)); do
    use_kstate pre-check "$i"
    BOOT_ID[$i]=${K[boot_id]}
  done
  # Both VMs in one batch: nothing is applied, so the rolling order proves nothing here.
  play check-diff fix.yml --check --diff -e pvetune_reboot_ok=true -e "pvetune_kernel_version=$PIN" -e pvetune_serial=2 \
    -e "pvetune_run_id_override=$run" || rc=$?
  check_eq "fix.yml --check --diff succeeds" "$rc" 0
  stats=$(labtool stats check-diff)
  # The planned changes, as --diff prints them (one block per VM; the runner's pty ends lines in CR LF).
  diffs=$(tr -d '\r' <"$OUT/check-diff.log")
  # shellcheck disable=SC2016  # a literal $GRUB_CMDLINE_LINUX_DEFAULT: what the drop-in says
  for d in '+kernel.numa_balancing = 0' '+cpufreq:policy[0-1]:scaling_governor = performance' \
      '+pcie:0000:43:00.0 MaxReadReq = 4096 bytes (DevCtl 5000)' \
      '+pcie:0000:44:00.0 MaxReadReq = 4096 bytes (DevCtl 5000)' \
      '+GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_pstate=active processor.max_cstate=1 iommu=pt"' \
      '-pcie:0000:42:00.0 ACSCtl = 001d (SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-)' \
      '+pcie:0000:42:00.0 ACSCtl = 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-)' \
      '-pcie:0000:42:01.0 ACSCtl = 001d (SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-)' \
      '+pcie:0000:42:01.0 ACSCtl = 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-)' \
      "+$PIN" "+pin: $PIN"; do
    check_eq "diff shows, per VM: ${d:0:70}" "$(grep -cxF -- "$d" <<<"$diffs")" "$N"
  done
  # The boot runtime as one summary entry (paths, sizes, sha256), not its source.
  check_eq "diff shows, per VM: +create /etc/systemd/system/pvetune-pcie-mrrs.service (<size, sha256>)" \
    "$(grep -c '^+create /etc/systemd/system/pvetune-pcie-mrrs.service ([0-9]* bytes, sha256 [0-9a-f]*)$' \
       <<<"$diffs")" "$N"
  check_eq "diff shows no Python source of the runtime" "$(grep -c '^+def \|^+import ' <<<"$diffs")" 0
  each_vm fetch post-check check-post || die "state listing failed"
  # CT 101's stale allow line: planned once per VM, by the role's regeneration (the play's post-reboot one
  # runs only after a real reboot, so check mode does not print the same diff twice).
  for d in "-lxc.cgroup2.devices.allow: c $UVM_CT:* rwm" "+lxc.cgroup2.devices.allow: c $UVM_SEED:* rwm"; do
    check_eq "diff shows, once per VM: $d" "$(grep -cxF -- "$d" <<<"$diffs")" "$N"
  done
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i t
    check_eq "$h check run: failures / unreachable" "$(awk -v h=$h '$1 == h { print $4, $5 }' <<<"$stats")" "0 0"
    # Every fix of the role reports the change it would make (changed, in check mode).
    for t in 'Set the sysctls now and persist them in /etc/sysctl.d' \
        'Set the P-state driver mode, governor and EPP on every CPU policy' 'Set PCIe MaxReadReq on the NVIDIA functions' \
        'Ensure the kernel command line arguments' 'Install and pin the kernel series' \
        'Regenerate the NVIDIA device entries of the GPU containers' \
        'Clear the ACS redirect bits between GPUs that share a PCIe switch' \
        'Install the boot-time re-application (library, helper, settings, units)'; do
      check_eq "$h would change: ${t:0:56}" "$(labtool res check-diff "$h" "pvetune_fix : $t" changed)" true
    done
    local rec=()
    mapfile -t rec < <(record "$run" "$h" check_mode reboot_needed rebooted would_reboot result)
    check_eq "$h record: check_mode, reboot needed" "${rec[0]:-} ${rec[1]:-}" "true true"
    check_eq "$h record: not rebooted, would reboot, pending-reboot" "${rec[2]:-} ${rec[3]:-} ${rec[4]:-}" \
      "false true pending-reboot"
    same_state "$h unchanged by fix.yml --check" audit-post check-post "$i"
    use_kstate post-check "$i"
    check_eq "$h same boot, kernel values unchanged (cmdline/numa/governor/devctl)" \
      "${K[boot_id]} ${K[numa_balancing]} ${K[governor]} ${K[devctl_43_00_0]} ${K[devctl_44_00_0]} ${K[max_cstate_param]}" \
      "${BOOT_ID[$i]} 1 schedutil 2000 2000 8"
    check_eq "$h ACSCtl unchanged by the check run (42:00.0 / 42:01.0)" \
      "${K[acsctl_42_00_0]} ${K[acsctl_42_01_0]}" "001d 001d"
    check_eq "$h no pvetune lock after the check run" "${K[pvetune_lock]}" absent
  done
}

# Pull the plug on vm I when its kernel restarts (serial console line), i.e. the reboot the fix
# run asked for never comes back.
# The epoch of the kill ends its line (rollout_failure compares it with the reboot task's failure).
watch_and_kill() {
  local i=$1 log=$W/vms/vm$1.log start t
  start=$(stat -c %s "$log")
  for ((t = 0; t < 3600; t++)); do
    # Not `tail | grep -q`: grep leaving early would fail tail with SIGPIPE, and pipefail would hide the match.
    if grep -q 'reboot: Restarting system' < <(tail -c +$((start + 1)) "$log"); then
      echo "$(date +%T) vm$i: kernel restarting: killing its QEMU at $EPOCHREALTIME"
      "$LAB" kill "$i"
      return 0
    fi
    sleep 0.5
  done
  echo "vm$i never restarted"
  return 1
}

declare -A JOURNAL_N
VM1_UP=   # the background `lab.sh up` that restarts vm1 after the stopped rollout (vm1_fresh joins it)
rollout_failure() {
  local i rc=0 run t
  run=lab-fail-$(date -u +%Y%m%dT%H%M%SZ)
  each_vm fetch pre-fail -
  for ((i = 1; i <= N; i++)); do
    use_kstate pre-fail "$i"
    JOURNAL_N[$i]=${K[ansible_invocations]}
  done
  watch_and_kill 1 >"$OUT/watcher.log" 2>&1 &
  WATCHER=$!
  # Only the command-line fix (it needs the reboot): what stops the rollout is the reboot, not which fixes ran.
  play rollout-failure fix.yml --tags cmdline -e pvetune_reboot_ok=true -e "pvetune_kernel_version=$PIN" \
    -e "pvetune_reboot_timeout=$FAIL_TIMEOUT" -e "pvetune_run_id_override=$run" || rc=$?
  local wrc=0 killed gave_up
  # The watcher ends by itself once it has killed vm1 (long before the run gives up, see below); a watcher still
  # running 30 s after the run means vm1 never restarted: stop it (the check below then fails).
  for ((t = 0; t < 60; t++)); do kill -0 "$WATCHER" 2>/dev/null || break; sleep 0.5; done
  kill "$WATCHER" 2>/dev/null || true
  wait "$WATCHER" || wrc=$?
  WATCHER=
  # vm1 restarts from a fresh overlay in the background while the checks below run (vm1_fresh joins it). Only now:
  # while the run still polled vm1's port, a new vm1 there would have passed its reboot check.
  if ((wrc == 0)); then
    "$LAB" up "$N" </dev/null >"$OUT/vm1-up.log" 2>&1 &
    VM1_UP=$!
  fi
  check_eq "the watcher killed vm1 when it rebooted" "$wrc $(grep -c 'killing its QEMU' "$OUT/watcher.log")" "0 1"
  # The run gave up because vm1 was gone, not because its reboot was slow: the kill came before the reboot task
  # failed (LAB_TEST_FAIL_TIMEOUT, the run's reboot timeout, must cover vm1's shutdown).
  killed=$(sed -n 's/.*killing its QEMU at \([0-9.]*\)$/\1/p' "$OUT/watcher.log")
  gave_up=$(labtool when rollout-failure lab-vm1 "$REBOOT_TASK")
  say "vm1 killed at ${killed:-never}, its reboot task failed at $gave_up (reboot timeout $FAIL_TIMEOUT s)"
  check_eq "vm1 was killed before its reboot task gave up" \
    "$(awk -v k="${killed:-0}" -v g="$gave_up" 'BEGIN { print (k > 0 && g + 0 > k) ? "yes" : "no" }')" yes
  check_no "fix.yml fails" "$rc" '^0$'
  local msg
  msg=$(grep -o "Rollout stopped at [^.]*\. Hosts after it in the inventory were not touched" \
    "$OUT/rollout-failure.log" | head -1 || true)
  check_has "playbook says the rollout stopped at vm1" "$msg" "Rollout stopped at lab-vm1: task '$REBOOT_TASK' failed"
  say "failure message: $(grep -o "Rollout stopped at .*" "$OUT/rollout-failure.log" | head -1 | cut -c1-300)"
  local rec=()
  mapfile -t rec < <(record "$run" lab-vm1 result failure.task failure.message reboot_needed)
  check_eq "vm1 record: result" "${rec[0]:-}" failed
  check_eq "vm1 record: failed task" "${rec[1]:-}" "$REBOOT_TASK"
  check_has "vm1 record: why" "${rec[2]:-}" "Timed out"
  check_eq "vm1 record: it needed the reboot" "${rec[3]:-}" true
  # (waves.json: the run's reboot plan, written before any host is touched)
  check_eq "no record for vm2" "$(ls "$REPORTS/fix-$run/" | grep -vx waves.json)" lab-vm1.json
  check_eq "no task ran for vm2 (runner events)" \
    "$(labtool events rollout-failure | awk -F'\t' '$3 == "lab-vm2"' | wc -l)" 0
  labtool failures rollout-failure | cut -c1-220 | sed 's/^/    /'
  fetch after-fail after-fail 2 || die "state listing failed"
  same_state "vm2 untouched by the stopped rollout" audit-post after-fail 2
  use_kstate after-fail 2
  # Two read-only modules of the reboot plan's discovery (fix.yml's sorting play): the audit in check mode and the
  # cluster gate's check.
  check_eq "vm2: no ansible module ran on it but the plan's two reads (journal)" "${K[ansible_invocations]}" \
    "$((${JOURNAL_N[2]} + 2))"
  check_eq "vm2: no pvetune lock" "${K[pvetune_lock]}" absent
  check "vm2: no pvetune manifest/backups" "$(grep '^/var/lib/pvetune/' "$OUT/state-after-fail-vm2")" \
    '/var/lib/pvetune/ missing'
  check_eq "vm2: still the seeded boot" "${K[boot_id]}" "$(grep '^boot_id=' "$OUT/kstate-pre-fail-vm2" | cut -d= -f2)"
}

# Joins the restart rollout_failure started (its log is printed here), then seeds vm1 (vm2 keeps its state).
vm1_fresh() {
  local rc=0
  if [[ -n $VM1_UP ]]; then
    wait "$VM1_UP" || rc=$?
    VM1_UP=
    sed 's/^/  /' "$OUT/vm1-up.log"
    ((rc == 0)) || die "restarting vm1 failed (rc $rc)"
  else
    "$LAB" up "$N"   # the watcher did not kill vm1 (a failed check above): start what is missing
  fi
  "$LAB" seed 1
  fetch fresh fresh 1 || die "state listing failed"
  use_kstate fresh 1
  check_eq "vm1 fresh: seeded uvm major" "${K[uvm_major]}" "$UVM_SEED"
  check "vm1 fresh: stock cmdline" "$(grep -c 'max_cstate' <<<"${K[cmdline]}" || true)" 0
  check "vm1 fresh: no pvetune files" "$(grep -c '^/var/lib/pvetune/ missing' "$OUT/state-fresh-vm1")" 1
}

prepare_fix() { vssh "$1" "echo $UVM_NEXT >/etc/pvetune-lab/uvm-major" && fetch pre-fix - "$1"; }
fix_run() {
  local i rc=0 run
  run=lab-fix-$(date -u +%Y%m%dT%H%M%SZ)
  # Only the lab's file: the nodes of this boot keep $UVM_SEED; the next boot gets $UVM_NEXT.
  each_vm prepare_fix || die "could not prepare the VMs for the fix run"
  for ((i = 1; i <= N; i++)); do
    use_kstate pre-fix "$i"
    BOOT_ID[$i]=${K[boot_id]}
  done
  play fix fix.yml -e pvetune_reboot_ok=true -e "pvetune_kernel_version=$PIN" \
    -e "pvetune_reboot_timeout=$REBOOT_TIMEOUT" -e "pvetune_run_id_override=$run" || rc=$?
  check_eq "fix.yml succeeds" "$rc" 0
  local stats
  stats=$(labtool stats fix)
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i
    check "$h: no failed/unreachable task" "$(awk -v h=$h '$1 == h { print $4, $5 }' <<<"$stats")" '0 0'
    local rec=()
    mapfile -t rec < <(record "$run" "$h" result rebooted)
    check_eq "$h record: result" "${rec[0]:-}" ok
    check_eq "$h record: rebooted" "${rec[1]:-}" true
    # The health gate: no nvidia-smi and no pct in the lab, so both targets are skipped, with the reason.
    check_eq "$h health gate: host and CT 101 skipped with reasons" \
      "$(labtool health "$REPORTS/fix-$run/$h.json" | tr '\t\n' '| ')" \
      "host|skip|nvidia-smi not run: not installed on this host ct:101|skip|pct not run: not installed on this host "
    # pvetune_kernel: the series is installed (nothing to install), the generic flavour is pinned the
    # GRUB way (no proxmox-boot-tool): pin snippet + update-grub, and the next boot uses it.
    local kt='pvetune_fix : Install and pin the kernel series' v=()
    mapfile -t v < <(labtool res fix "$h" "$kt" package_installed version loader.name loader.managed_by_pbt \
      commands.0.cmd next_boot_kernel package series_installed)
    check_eq "$h kernel: no install, pin $PIN via GRUB (update-grub), next boot $PIN" \
      "${v[0]:-}/${v[1]:-}/${v[2]:-}/${v[3]:-}/${v[4]:-}/${v[5]:-}" \
      "false/$PIN/grub/false/[\"update-grub\"]/$PIN"
    check_eq "$h kernel: Debian package name, series kernels already there" \
      "${v[6]:-} ${v[7]:-}" \
      "linux-image-amd64 [\"$PIN\", \"${PIN/-amd64/-cloud-amd64}\"]"
    local at='pvetune_fix : Clear the ACS redirect bits between GPUs that share a PCIe switch' a
    mapfile -t v < <(labtool res fix "$h" "$at" changed boot_ports ports.0.bdf ports.0.result ports.0.message \
      ports.1.bdf ports.1.result ports.1.message)
    check_eq "$h ACS fix: changed, boot_ports both switch ports" "${v[0]:-}/${v[1]:-}" \
      'true/["0000:42:00.0", "0000:42:01.0"]'
    for a in 0 1; do
      check_eq "$h ACS fix: port $a written and verified" \
        "${v[2 + 3 * a]:-} ${v[3 + 3 * a]:-} ${v[4 + 3 * a]:-}" \
        "0000:42:0$a.0 done ACS Control 001d -> 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-)"
    done
    check_eq "$h cpufreq: amd_pstate needs the boot arg (first run: reboot_required)" \
      "$(labtool res fix "$h" 'pvetune_fix : Set the P-state driver mode, governor and EPP on every CPU policy' \
        reboot_required)" true
  done
  # Rolling: nothing happened on vm2 before vm1 had passed its gates and released its lock.
  local ev first2 gate1 unlock1 last1
  ev=$(labtool events fix)
  first2=$(awk -F'\t' '$3 == "lab-vm2" { print $1; exit }' <<<"$ev")
  last1=$(awk -F'\t' '$3 == "lab-vm1" { n = $1 } END { print n }' <<<"$ev")
  gate1=$(awk -F'\t' '$3 == "lab-vm1" && $4 == "runner_on_ok" && $6 ~ /^Audit gate/ { print $1 }' <<<"$ev")
  unlock1=$(awk -F'\t' '$3 == "lab-vm1" && $6 ~ /^Release the host/ { print $1 }' <<<"$ev")
  say "events: vm1 gate passed #$gate1, vm1 unlocked #$unlock1, vm1 last #$last1, vm2 first #$first2"
  check "vm1 passed its audit gate" "${gate1:-none}" '[0-9]+'
  check_eq "vm2's first task after vm1's gate, unlock and last task" \
    "$((first2 > gate1 && first2 > unlock1 && first2 > last1))" 1
  local t1 t2
  t1=$(awk -F'\t' -v s="$last1" '$1 == s { print $2 }' <<<"$ev")
  t2=$(awk -F'\t' -v s="$first2" '$1 == s { print $2 }' <<<"$ev")
  say "vm1 done at $t1, vm2 started at $t2"
  while read -r h s; do SUBTIMES+=("$(printf '%-34s %8s s' "  reboot $h (reboot module elapsed)" "$s")"); done \
    < <(labtool task-time fix "$REBOOT_TASK")
  # The post-reboot regeneration in the play found nothing to do: the boot unit had done it.
  check_eq "post-reboot CT regeneration in the play changed nothing (boot unit did it)" \
    "$(awk -F'\t' '$6 ~ /^Regenerate the GPU CTs/ { s = s $4 ":" $5 " " } END { print s }' <<<"$ev")" \
    "runner_on_ok:0 runner_on_ok:0 "
}

verify() {
  local i
  each_vm fetch after-fix -
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i b
    use_kstate after-fix "$i"
    check_no "$h rebooted (new boot_id)" "${K[boot_id]}" "^${BOOT_ID[$i]}\$"
    check_eq "$h uname -r is the pinned kernel (GRUB fallback pin)" "${K[kernel]}" "$PIN"
    check_has "$h /proc/cmdline has amd_pstate=active" "${K[cmdline]}" " amd_pstate=active"
    check_has "$h /proc/cmdline has processor.max_cstate=1" "${K[cmdline]}" " processor.max_cstate=1"
    check_has "$h /proc/cmdline is the pinned kernel's" "${K[cmdline]}" "BOOT_IMAGE=/boot/vmlinuz-$PIN "
    check_eq "$h /sys/module/processor/parameters/max_cstate" "${K[max_cstate_param]}" 1
    check_eq "$h cpuidle states cpu0 (only POLL/C1)" "${K[cpuidle_cpu0]}" "POLL:0 C1:0"
    check_eq "$h cpuidle states cpu1 (only POLL/C1)" "${K[cpuidle_cpu1]}" "POLL:0 C1:0"
    check_eq "$h /proc/sys/kernel/numa_balancing" "${K[numa_balancing]}" 0
    # mem.sysctl, on the real kernel: persisted in the same drop-in, applied by systemd-sysctl at this boot
    check_eq "$h /proc/sys/vm/swappiness, zone_reclaim_mode" "${K[swappiness]} ${K[zone_reclaim_mode]}" "10 0"
    for b in 43_00_0 44_00_0; do
      check_eq "$h setpci ${b//_/:} CAP_EXP+8.w MRRS field = 5 (4096)" \
        "$(( (0x${K[devctl_$b]:-0} >> 12) & 7 ))" 5
      check_eq "$h lspci ${b//_/:} MaxReadReq after the reboot" "${K[mrrs_$b]}" 4096
    done
    check_eq "$h pvetune-pcie-mrrs.service active/enabled" \
      "${K[active_pvetune-pcie-mrrs]}/${K[enabled_pvetune-pcie-mrrs]}" active/enabled
    # The reboot reset DevCtl to 512 and the unit wrote 4096 back (its own journal lines).
    check_eq "$h pcie-mrrs unit restored both functions this boot (journal 512 -> 4096)" \
      "$(grep -o 'MaxReadReq 512 -> 4096' <<<"${K[journal_pvetune-pcie-mrrs]}" | wc -l)" 2
    # ACS: the kernel set 001d again at enumeration (IOMMU on); the same unit cleared RR CR (journal), so
    # config space now reads 0011 on both switch downstream ports.
    check_eq "$h boot configuration acs_ports" "${K[acs_ports_config]}" "0000:42:00.0 0000:42:01.0"
    check_eq "$h setpci 42:00.0 / 42:01.0 ECAP_ACS+6.w after the reboot" \
      "${K[acsctl_42_00_0]} ${K[acsctl_42_01_0]}" "0011 0011"
    check_has "$h lspci -vvv 42:00.0 ACSCtl after the reboot" "${K[lspci_acsctl_42_00_0]}" "ReqRedir- CmpltRedir-"
    check_has "$h lspci -vvv 42:01.0 ACSCtl after the reboot" "${K[lspci_acsctl_42_01_0]}" "ReqRedir- CmpltRedir-"
    for b in 0000:42:00.0 0000:42:01.0; do
      check_has "$h pcie-mrrs unit cleared ACS on $b this boot (journal)" \
        "${K[journal_pvetune-pcie-mrrs]}" "ACS $b: ACS Control 001d -> 0011"
    done
    check_has "$h /proc/cmdline has iommu=pt (intel_iommu=on kept)" "${K[cmdline]}" " intel_iommu=on amd_pstate=active processor.max_cstate=1 iommu=pt"
    check_eq "$h IOMMU default domain, GPU groups' types (iommu=pt)" \
      "${K[iommu_default_type]} ${K[iommu_type_43_00_0]} ${K[iommu_type_44_00_0]}" "identity identity identity"
    check_no "$h GPUs still in different IOMMU groups" "${K[iommu_group_43_00_0]}" "^${K[iommu_group_44_00_0]}\$"
    check_eq "$h pvetune-cpufreq.service active" "${K[active_pvetune-cpufreq]}" active
    check_eq "$h governor (pvetune-cpufreq at boot)" "${K[governor]}" performance
    check_has "$h cpufreq unit says why amd_pstate is absent" "${K[journal_pvetune-cpufreq]}" "did not load"
    check_eq "$h scaling driver (no CPPC in the lab: amd_pstate cannot load)" \
      "${K[scaling_driver]}/${K[amd_pstate_status]}" "acpi-cpufreq/absent"
    check_eq "$h /dev/nvidia-uvm major of this boot" "${K[uvm_major]}/${K[proc_devices_uvm]}" "$UVM_NEXT/$UVM_NEXT"
    check_eq "$h CT 101 allows this boot's uvm major" "${K[ct101_allow]}" "c 195:* rwm c $UVM_NEXT:* rwm"
    check_eq "$h pvetune-lxc-gpu.service active" "${K[active_pvetune-lxc-gpu]}" active
    check_has "$h pvetune-lxc-gpu rewrote CT 101 at boot ($UVM_SEED -> $UVM_NEXT)" \
      "${K[journal_pvetune-lxc-gpu]}" "c $UVM_SEED:* rwm; +12: lxc.cgroup2.devices.allow: c $UVM_NEXT:* rwm"
    check_eq "$h pvetune lock released" "${K[pvetune_lock]}" absent
  done
}

audit_after() {
  local rc=0 lines i
  play audit-after audit.yml || rc=$?
  check_eq "audit passes" "$rc" 0
  lines=$(audit_lines)
  printf '%s\n' "$lines" | sed 's/^/    /' | cut -c1-200
  check_eq "no check fails or errors" "$(awk -F'\t' '$3 == "fail" || $3 == "error"' <<<"$lines" | wc -l)" 0
  check_eq "nothing pending" "$(awk -F'\t' '$3 == "pending"' <<<"$lines" | wc -l)" 0
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i c s
    for c in cpu.governor cpu.cstates kernel.numa_balancing pcie.mrrs pcie.link kernel.version boot.cmdline \
        lxc.gpu_devices iommu.mode pcie.acs pcie.topology pcie.bar1; do
      s=$(status_of "$lines" "$h" "$c")
      check_eq "$h $c after the fix" "${s%%$'\t'*}" pass
    done
    s=$(status_of "$lines" "$h" cpu.scaling_driver)
    check_eq "$h cpu.scaling_driver is warn (policy fallback)" "${s%%$'\t'*}" warn
    check_has "$h cpu.scaling_driver says why" "$s" "amd_pstate=active is on /proc/cmdline but amd_pstate did not load"
    s=$(status_of "$lines" "$h" cpu.epp)
    check_has "$h cpu.epp skip with reason" "$s" \
      "skip"$'\t'"the cpufreq driver (acpi-cpufreq) offers no energy_performance_preference"
    s=$(status_of "$lines" "$h" nvidia.driver)
    check_has "$h nvidia.driver skip with reason" "$s" "skipped by policy: lab VM"
    s=$(status_of "$lines" "$h" lxc.gpu_devices)
    check_has "$h lxc.gpu_devices: current majors" "$s" "nvidia-uvm=$UVM_NEXT"
    s=$(status_of "$lines" "$h" pcie.sriov)
    check_eq "$h pcie.sriov skip (the emulated functions have no SR-IOV)" "${s%%$'\t'*}" skip
  done
}

fix_again() {
  local rc=0 run i stats
  run=lab-fix2-$(date -u +%Y%m%dT%H%M%SZ)
  # Both VMs in one batch (serial 2): idempotence does not need the rolling order, and the two
  # VMs' module runs then share the host's cores instead of taking turns.
  play fix-again fix.yml -e pvetune_reboot_ok=true -e "pvetune_kernel_version=$PIN" -e pvetune_serial=2 \
    -e "pvetune_reboot_timeout=$REBOOT_TIMEOUT" -e "pvetune_run_id_override=$run" || rc=$?
  check_eq "second fix.yml succeeds" "$rc" 0
  stats=$(labtool stats fix-again)
  local ev
  ev=$(labtool events fix-again)
  each_vm fetch after-fix2 -
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i
    check_eq "$h second run: changed / failures / unreachable" \
      "$(awk -v h=$h '$1 == h { print $3, $4, $5 }' <<<"$stats")" "0 0 0"
    check_eq "$h second run: reboot task skipped" \
      "$(awk -F'\t' -v h=$h -v t="$REBOOT_TASK" '$3 == h && $6 == t { print $4 }' <<<"$ev")" \
      runner_on_skipped
    check_eq "$h record: not rebooted, result ok" "$(record "$run" "$h" rebooted result | paste -sd' ' -)" "false ok"
    # Booted with amd_pstate=active and still acpi-cpufreq (no CPPC): a reboot would not help.
    check_eq "$h cpufreq: no reboot asked for amd_pstate (booted with the arg already)" \
      "$(labtool res fix-again "$h" 'pvetune_fix : Set the P-state driver mode, governor and EPP on every CPU policy' \
        reboot_required)" false
    use_kstate after-fix2 "$i"
    check_eq "$h same boot as after the first fix" "${K[boot_id]}" \
      "$(grep '^boot_id=' "$OUT/kstate-after-fix-vm$i" | cut -d= -f2)"
  done
}

# rollback.yml without a reboot (both VMs in one batch): the runtime values go back to the manifest's
# originals at once; here the ACS redirect bits (the kernel's 001d, not the lab's reset value). No force:
# CT 101's config, rewritten at boot by pvetune-lxc-gpu.service, is still what the manifest records.
rollback() {
  local rc=0 run i stats rt
  local rt_task='Restore the originals, remove what pvetune installed, put runtime values back'
  run=rollback-lab-$(date -u +%Y%m%dT%H%M%SZ)
  play rollback rollback.yml -e pvetune_serial=2 -e "pvetune_run_id_override=$run" || rc=$?
  check_eq "rollback.yml succeeds" "$rc" 0
  stats=$(labtool stats rollback)
  each_vm fetch after-rollback -
  for ((i = 1; i <= N; i++)); do
    local h=lab-vm$i
    check_eq "$h rollback: failures / unreachable" "$(awk -v h=$h '$1 == h { print $4, $5 }' <<<"$stats")" "0 0"
    check_eq "$h rollback: no conflicts" "$(labtool res rollback "$h" "$rt_task" conflicts)" "[]"
    rt=$(labtool res rollback "$h" "$rt_task" runtime | "$PY" -c 'import json, sys
for r in json.load(sys.stdin) or []:
    if r.get("key", "").endswith(":acsctl"):
        print(r["key"], r["result"], r.get("before"), "->", r.get("after"))' 2>&1 | xargs)
    check_eq "$h rollback restored ACS Control (module result)" "$rt" \
      "pcie:0000:42:00.0:acsctl restored ACSCtl 0011 -> ACSCtl 001d pcie:0000:42:01.0:acsctl restored ACSCtl 0011 -> ACSCtl 001d"
    use_kstate after-rollback "$i"
    check_eq "$h setpci ACSCtl 42:00.0 / 42:01.0 after rollback" "${K[acsctl_42_00_0]} ${K[acsctl_42_01_0]}" "001d 001d"
    check_eq "$h DevCtl 43:00.0 / 44:00.0 after rollback" "${K[devctl_43_00_0]} ${K[devctl_44_00_0]}" "2000 2000"
    # the sysctls go back to what the manifest recorded before the first fix (the kernel's 60 on Debian)
    check_eq "$h vm.swappiness after rollback" "${K[swappiness]}" \
      "$(grep '^swappiness=' "$OUT/kstate-pre-check-vm$i" | cut -d= -f2)"
    check_no "$h pvetune-pcie-mrrs.service no longer enabled" "${K[enabled_pvetune-pcie-mrrs]}" '^enabled$'
    check_eq "$h same boot (no reboot)" "${K[boot_id]}" "$(grep '^boot_id=' "$OUT/kstate-after-fix-vm$i" | cut -d= -f2)"
  done
}

# lab.sh down, then the check that it stopped every QEMU; a down that could not clean something says what and
# does not abort the run (the check is what counts).
down_and_verify() {
  local rc=0
  qemus_before_down
  "$LAB" down || rc=$?
  ((rc == 0)) || say "teardown: lab.sh down exited $rc (what it could not clean is above)"
  check "all lab QEMUs stopped" "$(qemus_left)" none
}

# ---------------------------------------------------------------------------------------------

cd "$TOP"
preflight
phase deps "$LAB" deps
phase build "$LAB" build
phase "up $N (boot to SSH)" "$LAB" up "$N"
phase seed "$LAB" seed
phase discover discover
phase "1 audit-before" audit_before
phase "2 check-diff (fix.yml --check --diff)" check_diff
phase "3 rollout-failure" rollout_failure
phase "4 vm1-fresh (boot to SSH + seed)" vm1_fresh
phase "5 fix (2 x fix + reboot, serial)" fix_run
phase "6 verify" verify
phase "7 audit-after" audit_after
phase "8 fix-again" fix_again
phase "9 rollback (no reboot)" rollback
phase down down_and_verify
trap - EXIT

write_timings || say "could not write $W/timings.txt"
say "phase times (also in $W/timings.txt):"
cat "$W/timings.txt"
echo "lab-test: $PASS passed, $FAIL failed"
((FAIL == 0))
