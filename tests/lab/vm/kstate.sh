# shellcheck shell=bash
# tests/lab/vm/kstate.sh — run inside a lab VM (bash -s): what the running kernel and systemd say,
# as key=value lines (read from /proc, /sys, config space and the journal; never from a file the
# playbook wrote, except the CT config, whose content is the thing being tested).
set -u
kv() { printf '%s=%s\n' "$1" "$2"; }
kv boot_id "$(cat /proc/sys/kernel/random/boot_id)"
kv kernel "$(uname -r)"
kv cmdline "$(cat /proc/cmdline)"
kv max_cstate_param "$(cat /sys/module/processor/parameters/max_cstate 2>/dev/null || echo none)"
kv cpuidle_driver "$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null)"
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  n=${c##*/cpu}
  kv "cpuidle_cpu$n" "$(for s in "$c"/cpuidle/state*; do printf '%s:%s ' "$(cat "$s/name")" "$(cat "$s/disable")"; done | xargs)"
done
kv numa_balancing "$(cat /proc/sys/kernel/numa_balancing)"
kv swappiness "$(cat /proc/sys/vm/swappiness)"
kv zone_reclaim_mode "$(cat /proc/sys/vm/zone_reclaim_mode 2>/dev/null || echo absent)"
kv scaling_driver "$(cat /sys/devices/system/cpu/cpufreq/policy*/scaling_driver 2>/dev/null | sort -u | xargs)"
kv governor "$(cat /sys/devices/system/cpu/cpufreq/policy*/scaling_governor 2>/dev/null | sort -u | xargs)"
kv amd_pstate_status "$(cat /sys/devices/system/cpu/amd_pstate/status 2>/dev/null || echo absent)"
for b in $(lspci -D -n -d 10de: | cut -d' ' -f1); do
  k=${b#0000:}; k=${k//[:.]/_}
  kv "devctl_$k" "$(setpci -s "$b" CAP_EXP+8.w)"
  kv "mrrs_$k" "$(lspci -vv -s "$b" | sed -n 's/.*MaxReadReq \([0-9]*\) bytes.*/\1/p')"
done
# The IOMMU and ACS: the GPUs' groups and their domain types, the first group's type (the kernel's
# default domain), the switch downstream ports' ACS Control (setpci word and lspci's text).
kv iommu_units "$(ls /sys/class/iommu 2>/dev/null | xargs)"
kv iommu_default_type "$(cat "$(ls -d /sys/kernel/iommu_groups/* 2>/dev/null | sort -t/ -k5 -n | head -1)/type" 2>/dev/null || echo none)"
for b in $(lspci -D -n -d 10de: | cut -d' ' -f1); do
  k=${b#0000:}; k=${k//[:.]/_}
  g=$(basename "$(readlink /sys/bus/pci/devices/$b/iommu_group 2>/dev/null)" 2>/dev/null)
  kv "iommu_group_$k" "${g:-none}"
  kv "iommu_type_$k" "$(cat "/sys/kernel/iommu_groups/$g/type" 2>/dev/null || echo none)"
done
for p in 0000:42:00.0 0000:42:01.0; do
  k=${p#0000:}; k=${k//[:.]/_}
  kv "acsctl_$k" "$(setpci -s "$p" ECAP_ACS+6.w 2>/dev/null || echo none)"
  kv "lspci_acsctl_$k" "$(lspci -vvv -s "$p" | sed -n 's/^[[:space:]]*ACSCtl:[[:space:]]*//p')"
done
kv acs_ports_config "$(python3 -c 'import json; print(" ".join(json.load(open("/etc/pvetune/pcie-mrrs.json")).get("acs_ports") or []))' 2>/dev/null || echo none)"
for u in pvetune-cpufreq pvetune-pcie-mrrs pvetune-lxc-gpu; do
  kv "active_$u" "$(systemctl is-active "$u.service" 2>/dev/null)"
  kv "enabled_$u" "$(systemctl is-enabled "$u.service" 2>/dev/null)"
  kv "journal_$u" "$(journalctl -b -o cat --no-pager -u "$u.service" 2>/dev/null | grep 'pvetune-boot' | tr '\n' '|')"
done
kv uvm_major "$(printf '%d' "0x$(stat -c %t /dev/nvidia-uvm)")"
kv lab_uvm_major_file "$(cat /etc/pvetune-lab/uvm-major)"
kv proc_devices_uvm "$(awk '$2 == "nvidia-uvm" { print $1 }' /proc/devices)"
kv ct101_allow "$(grep -h '^lxc.cgroup2.devices.allow' /etc/pve/lxc/101.conf | sed 's/.*: //' | xargs)"
kv pvetune_lock "$([ -e /run/pvetune/fix.lock ] && echo present || echo absent)"
kv ansible_invocations "$(journalctl -b --no-pager -o short-unix 2>/dev/null | grep -c ' ansible-' || true)"
