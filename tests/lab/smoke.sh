#!/usr/bin/env bash
# tests/lab/smoke.sh — builds the lab (cached), boots N VMs (default 2) and checks, over SSH, that
# each looks like an untuned Proxmox VE GPU host the pvetune playbooks will later have to fix:
#   numa_balancing = 1; acpi-cpufreq with a non-performance governor; acpi_idle with
#   POLL/C1/C2/C3 enabled; two NVIDIA-id PCIe functions at MaxReadReq 512, at 43:00.0 and 44:00.0
#   behind two downstream ports of one emulated switch (NUMA node 0), whose ACS capability is
#   there with ACS Control 001d (SV RR CR UF: the VM has an emulated VT-d and intel_iommu=on, so
#   the kernel enables ACS at enumeration); each function in its own, translated IOMMU group;
#   two kernels, GRUB booting its default; the seeded /dev/nvidia* nodes and CT 101 config.
# Then: a masked setpci write (CAP_EXP+8.w=5000:7000) really moves MaxReadReq to 4096, masked
# ECAP_ACS+6.w writes set and clear ACS Control bits on the downstream ports, and one reboot
# shows (a) MaxReadReq back at 512 and ACS Control set by the kernel again, 001d (what a boot-time
# unit must fix),
# (b) the edited GRUB_CMDLINE_LINUX_DEFAULT (+ update-grub) in /proc/cmdline, (c) the uvm major
# read from /etc/pvetune-lab/uvm-major at boot. Every VM is stopped at the end (also on failure).
# Prints the time of every phase and closes with 'N passed, N failed'.
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB=$LAB_DIR/lab.sh
N=${SMOKE_VMS:-2}
REBOOT_TIMEOUT=${SMOKE_REBOOT_TIMEOUT:-600}
NEW_DEFAULT='quiet intel_iommu=on amd_pstate=active processor.max_cstate=1'   # keeps the IOMMU on
UVM_AFTER=510

PASS=0 FAIL=0
PHASES=()
T_ALL=$EPOCHREALTIME

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
say() { printf '[smoke %s] %s\n' "$(date +%T)" "$*"; }
phase() {   # phase NAME CMD...: run, time, record
  local name=$1 t0=$EPOCHREALTIME
  shift
  say "== $name"
  "$@"
  local t
  t=$(since "$t0")
  PHASES+=("$(printf '%-22s %7s s' "$name" "$t")")
  say "== $name: ${t} s"
}
# result, check, check_eq, check_no
# shellcheck source=tests/lab/asserts.sh
. "$LAB_DIR/asserts.sh"

cleanup() {
  local rc=$?
  "$LAB" down || true
  exit "$rc"
}
trap cleanup EXIT

vssh() { local i=$1; shift; "$LAB" ssh "$i" -- "$@" </dev/null; }

# Facts as key=value lines, gathered in one SSH round trip per VM.
FACTS_SCRIPT=$(cat <<'EOF'
set -u
echo "boot_id=$(cat /proc/sys/kernel/random/boot_id)"
echo "hostname=$(hostname)"
echo "kernel=$(uname -r)"
echo "cmdline=$(cat /proc/cmdline)"
echo "numa_balancing=$(cat /proc/sys/kernel/numa_balancing)"
echo "numa_nodes=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)"
echo "cpufreq_driver=$(cat /sys/devices/system/cpu/cpufreq/policy*/scaling_driver 2>/dev/null | sort -u | xargs)"
echo "governor=$(cat /sys/devices/system/cpu/cpufreq/policy*/scaling_governor 2>/dev/null | sort -u | xargs)"
echo "cpuidle_driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver)"
echo "cpuidle_states=$(for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do printf '%s:%s ' "$(cat $s/name)" "$(cat $s/disable)"; done | xargs)"
echo "kernels=$(cd /boot && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | xargs)"
echo "newest_kernel=$(cd /boot && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -1)"
echo "grub_first_kernel=$(sed -n 's#^[[:space:]]*linux[[:space:]]\+/boot/vmlinuz-\([^[:space:]]\+\).*#\1#p' /boot/grub/grub.cfg | head -1)"
bdfs=$(lspci -D -n -d 10de: | cut -d' ' -f1 | xargs)
echo "nvidia_bdfs=$bdfs"
echo "nvidia_count=$(echo $bdfs | wc -w)"
i=0
for b in $bdfs; do
  echo "gpu${i}_bdf=$b"
  echo "gpu${i}_class=$(lspci -n -s $b | cut -d' ' -f2-3 | xargs)"
  echo "gpu${i}_devctl=$(setpci -s $b CAP_EXP+8.w)"
  echo "gpu${i}_mrrs=$(lspci -vv -s $b | sed -n 's/.*MaxReadReq \([0-9]*\) bytes.*/\1/p')"
  echo "gpu${i}_numa=$(cat /sys/bus/pci/devices/$b/numa_node)"
  # the port above the function and the one above that (the switch's upstream port)
  p=$(basename "$(readlink -f /sys/bus/pci/devices/$b/..)")
  u=$(basename "$(readlink -f /sys/bus/pci/devices/$b/../..)")
  echo "gpu${i}_port=$p"
  echo "gpu${i}_port_type=$(lspci -vv -s $p | sed -n 's/.*Express (v[0-9]) \([A-Za-z ]*Port\).*/\1/p' | head -1)"
  echo "gpu${i}_switch=$u"
  echo "gpu${i}_switch_type=$(lspci -vv -s $u | sed -n 's/.*Express (v[0-9]) \([A-Za-z ]*Port\).*/\1/p' | head -1)"
  echo "gpu${i}_acscap=$(setpci -s $p ECAP_ACS+4.w 2>/dev/null || echo none)"
  echo "gpu${i}_acsctl=$(setpci -s $p ECAP_ACS+6.w 2>/dev/null || echo none)"
  g=$(basename "$(readlink /sys/bus/pci/devices/$b/iommu_group 2>/dev/null)" 2>/dev/null)
  echo "gpu${i}_group=${g:-none}"
  echo "gpu${i}_group_type=$(cat /sys/kernel/iommu_groups/$g/type 2>/dev/null || echo none)"
  echo "gpu${i}_group_devices=$(ls /sys/kernel/iommu_groups/$g/devices 2>/dev/null | xargs)"
  i=$((i + 1))
done
dev() { [ -c "$1" ] && printf '%d:%d' "0x$(stat -c %t "$1")" "0x$(stat -c %T "$1")" || echo missing; }
echo "iommu_units=$(ls /sys/class/iommu 2>/dev/null | xargs)"
echo "iommu_groups=$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)"
echo "rootport_acsctl=$(setpci -s 40:00.0 ECAP_ACS+6.w 2>/dev/null || echo none)"
echo "dev_nvidia0=$(dev /dev/nvidia0)"
echo "dev_nvidiactl=$(dev /dev/nvidiactl)"
echo "dev_uvm=$(dev /dev/nvidia-uvm)"
echo "dev_uvm_tools=$(dev /dev/nvidia-uvm-tools)"
echo "proc_devices_nvidia=$(grep -c -i nvidia /proc/devices)"
echo "ct101_allow=$(grep '^lxc.cgroup2.devices.allow' /etc/pve/lxc/101.conf 2>/dev/null | sed 's/.*: //' | xargs)"
EOF
)

FACTS_DIR=${LAB_WORK:-$LAB_DIR/work}/smoke-facts
declare -A F   # facts of the VM last loaded
gather_all() { # gather_all TAG: every VM's facts, in parallel, into $FACTS_DIR/TAG-vmN
  local i p pids=()
  mkdir -p "$FACTS_DIR"
  for ((i = 1; i <= N; i++)); do
    "$LAB" ssh "$i" -- bash -s <<<"$FACTS_SCRIPT" >"$FACTS_DIR/$1-vm$i" 2>&1 &
    pids+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
}
load_facts() { # load_facts TAG I
  local k v
  F=()
  while IFS='=' read -r k v; do
    [[ -n $k ]] && F[$k]=$v
  done <"$FACTS_DIR/$1-vm$2"
}

show() {   # the relevant facts, briefly
  local k
  for k in kernel cmdline numa_balancing cpufreq_driver governor cpuidle_driver cpuidle_states \
      kernels grub_first_kernel nvidia_bdfs gpu0_class gpu0_devctl gpu0_mrrs gpu0_numa gpu1_devctl \
      gpu1_mrrs gpu1_numa gpu0_port gpu1_port gpu0_switch gpu0_acsctl gpu1_acsctl rootport_acsctl iommu_units \
      gpu0_group gpu0_group_type gpu0_group_devices gpu1_group gpu1_group_type gpu1_group_devices dev_uvm \
      ct101_allow; do
    printf '    %-18s %s\n' "$k" "${F[$k]:-}"
  done
}

declare -A BOOT_ID DEVCTL

check_initial() {
  local i
  gather_all initial
  for ((i = 1; i <= N; i++)); do
    load_facts initial "$i"
    BOOT_ID[$i]=${F[boot_id]}
    say "vm$i facts:"
    show
    check "vm$i numa nodes" "${F[numa_nodes]}" 2
    check "vm$i kernel.numa_balancing" "${F[numa_balancing]}" 1
    check "vm$i cpufreq driver" "${F[cpufreq_driver]}" acpi-cpufreq
    check_no "vm$i governor is not performance" "${F[governor]:-none}" 'performance|none'
    check "vm$i cpuidle driver" "${F[cpuidle_driver]}" acpi_idle
    check "vm$i cpuidle states enabled" "${F[cpuidle_states]}" 'POLL:0 C1:0 C2:0 C3:0'
    check_no "vm$i stock cmdline (no max_cstate/amd_pstate)" "${F[cmdline]}" 'max_cstate|amd_pstate'
    check "vm$i two kernels installed" "$(wc -w <<<"${F[kernels]}" | xargs)" 2
    check_eq "vm$i GRUB default (first entry) is booted" "${F[kernel]}" "${F[grub_first_kernel]}"
    check_eq "vm$i GRUB default is the newest (sort -V)" "${F[grub_first_kernel]}" "${F[newest_kernel]}"
    check "vm$i NVIDIA-id functions" "${F[nvidia_count]}" 2
    check "vm$i gpu0 class/id" "${F[gpu0_class]}" '0302: 10de:2bb5'
    check "vm$i gpu0 at 43:00.0" "${F[gpu0_bdf]}" '0000:43:00\.0'
    check "vm$i gpu1 at 44:00.0" "${F[gpu1_bdf]}" '0000:44:00\.0'
    check "vm$i gpu0 NUMA node" "${F[gpu0_numa]}" 0
    check "vm$i gpu1 NUMA node (same switch, same node)" "${F[gpu1_numa]}" 0
    check "vm$i gpu0 below a switch downstream port (42:00.0)" \
      "${F[gpu0_port]} ${F[gpu0_port_type]}" '0000:42:00\.0 Downstream Port'
    check "vm$i gpu1 below a switch downstream port (42:01.0)" \
      "${F[gpu1_port]} ${F[gpu1_port_type]}" '0000:42:01\.0 Downstream Port'
    check "vm$i both ports below one switch upstream port (41:00.0)" \
      "${F[gpu0_switch]} ${F[gpu1_switch]} ${F[gpu0_switch_type]}" '0000:41:00\.0 0000:41:00\.0 Upstream Port'
    check "vm$i gpu0 port ACSCap SV TB RR CR UF DT (setpci)" "${F[gpu0_acscap]}" 005f
    check "vm$i gpu1 port ACSCap SV TB RR CR UF DT (setpci)" "${F[gpu1_acscap]}" 005f
    check "vm$i IOMMU on (intel_iommu=on, one DMAR unit)" "$(grep -o 'intel_iommu=on' <<<"${F[cmdline]}") ${F[iommu_units]}" \
      'intel_iommu=on dmar0'
    check "vm$i gpu0 port ACSCtl SV RR CR UF at boot (kernel, IOMMU on)" "${F[gpu0_acsctl]}" 001d
    check "vm$i gpu1 port ACSCtl SV RR CR UF at boot (kernel, IOMMU on)" "${F[gpu1_acsctl]}" 001d
    check "vm$i root port 40:00.0 ACSCtl at boot" "${F[rootport_acsctl]}" 001d
    check "vm$i gpu0 alone in its IOMMU group" "${F[gpu0_group_devices]}" "${F[gpu0_bdf]//./\\.}"
    check "vm$i gpu1 alone in its IOMMU group" "${F[gpu1_group_devices]}" "${F[gpu1_bdf]//./\\.}"
    check "vm$i GPU groups translated (Debian default domain, no iommu=pt)" \
      "${F[gpu0_group_type]} ${F[gpu1_group_type]}" 'DMA-FQ DMA-FQ'
    check "vm$i gpu0 MaxReadReq (lspci)" "${F[gpu0_mrrs]}" 512
    check "vm$i gpu1 MaxReadReq (lspci)" "${F[gpu1_mrrs]}" 512
    DEVCTL[$i:${F[gpu0_bdf]}]=${F[gpu0_devctl]}
    DEVCTL[$i:${F[gpu1_bdf]}]=${F[gpu1_devctl]}
    check "vm$i gpu0 DevCtl MRRS field (setpci)" "$(( (0x${F[gpu0_devctl]} >> 12) & 7 ))" 2
    check "vm$i gpu1 DevCtl MRRS field (setpci)" "$(( (0x${F[gpu1_devctl]} >> 12) & 7 ))" 2
    check "vm$i /dev/nvidia0" "${F[dev_nvidia0]}" 195:0
    check "vm$i /dev/nvidiactl" "${F[dev_nvidiactl]}" 195:255
    check "vm$i /dev/nvidia-uvm (seeded)" "${F[dev_uvm]}" 511:0
    check "vm$i /dev/nvidia-uvm-tools (seeded)" "${F[dev_uvm_tools]}" 511:1
    check "vm$i CT 101 allows a stale uvm major" "${F[ct101_allow]}" 'c 195:\* rwm c 509:\* rwm'
  done
}

masked_write() {
  local i b out
  for ((i = 1; i <= N; i++)); do
    # shellcheck disable=SC2016  # expands in the VM
    out=$(vssh "$i" 'for b in $(lspci -D -n -d 10de: | cut -d" " -f1); do
        setpci -s $b CAP_EXP+8.w=5000:7000
        echo "$b $(setpci -s $b CAP_EXP+8.w) $(lspci -vv -s $b | sed -n "s/.*MaxReadReq \([0-9]*\) bytes.*/\1/p")"
      done')
    while read -r b dc mrrs; do
      say "vm$i $b after masked write: DevCtl=$dc MaxReadReq=$mrrs"
      check "vm$i $b MaxReadReq after CAP_EXP+8.w=5000:7000" "$mrrs" 4096
      check_eq "vm$i $b DevCtl = (old & ~0x7000) | 0x5000" "$dc" \
        "$(printf '%04x' $(( (0x${DEVCTL[$i:$b]:-0} & 0x8fff) | 0x5000 )))"
    done <<<"$out"
  done
}

# ACS Control on the GPUs' switch downstream ports, 001d from the kernel at boot: clear RR CR EC only
# (a masked write; EC is not implemented: stays 0), set SV RR CR UF again (what the kernel enables),
# clear again (the reboot must then show the kernel setting them once more).
masked_acs_write() {
  local i p clr set clr2 ctl out
  for ((i = 1; i <= N; i++)); do
    # shellcheck disable=SC2016  # expands in the VM
    out=$(vssh "$i" 'for b in $(lspci -D -n -d 10de: | cut -d" " -f1); do
        p=$(basename "$(readlink -f /sys/bus/pci/devices/$b/..)")
        setpci -s $p ECAP_ACS+6.w=0000:002c; c=$(setpci -s $p ECAP_ACS+6.w)
        setpci -s $p ECAP_ACS+6.w=001d:001d; s=$(setpci -s $p ECAP_ACS+6.w)
        setpci -s $p ECAP_ACS+6.w=0000:002c; c2=$(setpci -s $p ECAP_ACS+6.w)
        echo "$p $c $s $c2 $(lspci -vvv -s $p | sed -n "s/^[[:space:]]*ACSCtl:[[:space:]]*//p")"
      done')
    while read -r p clr set clr2 ctl; do
      say "vm$i $p ACSCtl after =0000:002c: $clr, after =001d:001d: $set, after =0000:002c: $clr2 ($ctl)"
      check "vm$i $p ACSCtl after ECAP_ACS+6.w=0000:002c (RR CR cleared)" "$clr" 0011
      check "vm$i $p ACSCtl after ECAP_ACS+6.w=001d:001d" "$set" 001d
      check "vm$i $p ACSCtl after ECAP_ACS+6.w=0000:002c again" "$clr2" 0011
      check "vm$i $p lspci ACSCtl" "$ctl" \
        'SrcValid\+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd\+ EgressCtrl- DirectTrans-'
    done <<<"$out"
  done
}

edit_grub_and_uvm() {
  local i pids=()
  for ((i = 1; i <= N; i++)); do
    (set -o pipefail; vssh "$i" "set -e
      sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"$NEW_DEFAULT\"/' /etc/default/grub
      grep '^GRUB_CMDLINE_LINUX_DEFAULT=' /etc/default/grub
      update-grub 2>&1 | tail -1
      echo $UVM_AFTER >/etc/pvetune-lab/uvm-major" | sed "s/^/  vm$i: /") &
    pids+=("$!")
  done
  local p
  for p in "${pids[@]}"; do wait "$p"; done
}

reboot_all() {
  local i t0=$EPOCHREALTIME
  for ((i = 1; i <= N; i++)); do
    # a transient timer lets this SSH session end cleanly; AccuracySec: the default (1 min) lets
    # systemd postpone a 1 s timer by up to a minute.
    vssh "$i" 'systemd-run --quiet --on-active=1 --timer-property=AccuracySec=100ms systemctl reboot' ||
      true
  done
  local pending=() still
  for ((i = 1; i <= N; i++)); do pending+=("$i"); done
  while ((${#pending[@]})); do
    still=()
    for i in "${pending[@]}"; do
      local id
      id=$(LAB_SSH_CONNECT_TIMEOUT=5 vssh "$i" 'cat /proc/sys/kernel/random/boot_id' 2>/dev/null) ||
        id=
      if [[ -n $id && $id != "${BOOT_ID[$i]}" ]]; then
        say "vm$i back on SSH $(since "$t0") s after the reboot request"
      else
        still+=("$i")
      fi
    done
    pending=("${still[@]}")
    if ((${#pending[@]})); then
      awk -v a="$(since "$t0")" -v b="$REBOOT_TIMEOUT" 'BEGIN{exit !(a > b)}' &&
        { say "vm(s) ${pending[*]} not back after ${REBOOT_TIMEOUT}s"; return 1; }
      sleep 3
    fi
  done
}

check_after_reboot() {
  local i
  gather_all rebooted
  for ((i = 1; i <= N; i++)); do
    load_facts rebooted "$i"
    say "vm$i facts after reboot:"
    show
    check "vm$i rebooted (new boot_id)" "$([[ ${F[boot_id]} != "${BOOT_ID[$i]}" ]] && echo yes)" yes
    check "vm$i gpu0 MaxReadReq reset to 512" "${F[gpu0_mrrs]}" 512
    check "vm$i gpu1 MaxReadReq reset to 512" "${F[gpu1_mrrs]}" 512
    check "vm$i gpu0 port ACSCtl set again by the kernel (001d)" "${F[gpu0_acsctl]}" 001d
    check "vm$i gpu1 port ACSCtl set again by the kernel (001d)" "${F[gpu1_acsctl]}" 001d
    check "vm$i /proc/cmdline has processor.max_cstate=1" \
      "$(grep -o 'processor.max_cstate=1' <<<"${F[cmdline]}")" 'processor.max_cstate=1'
    check "vm$i /proc/cmdline has amd_pstate=active" \
      "$(grep -o 'amd_pstate=active' <<<"${F[cmdline]}")" 'amd_pstate=active'
    check "vm$i cpuidle states with max_cstate=1" "${F[cpuidle_states]}" 'POLL:0 C1:0'
    check_eq "vm$i still boots the GRUB default" "${F[kernel]}" "${F[grub_first_kernel]}"
    check "vm$i uvm major from uvm-major at boot" "${F[dev_uvm]}" "$UVM_AFTER:0"
    check "vm$i numa_balancing after reboot" "${F[numa_balancing]}" 1
    say "vm$i cpufreq driver with amd_pstate=active (no _CPC in the lab): ${F[cpufreq_driver]:-none}"
  done
}

# lab.sh down, then the check that it stopped every QEMU (asserts.sh); a down that could not clean something says
# what and does not abort the run (the check is what counts).
down_and_verify() {
  local rc=0
  qemus_before_down
  "$LAB" down || rc=$?
  ((rc == 0)) || say "teardown: lab.sh down exited $rc (what it could not clean is above)"
  check "all lab QEMUs stopped" "$(qemus_left)" none
}

phase deps "$LAB" deps
phase build "$LAB" build
phase "up $N" "$LAB" up "$N"
phase seed "$LAB" seed
phase check-initial check_initial
phase masked-mrrs-write masked_write
phase masked-acs-write masked_acs_write
phase grub-edit+uvm-major edit_grub_and_uvm
phase reboot-to-ssh reboot_all
phase check-after-reboot check_after_reboot
phase down down_and_verify
trap - EXIT

say "phase times:"
printf '  %s\n' "${PHASES[@]}"
say "total $(since "$T_ALL") s"
echo "smoke: $PASS passed, $FAIL failed"
((FAIL == 0))
