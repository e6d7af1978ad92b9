# shellcheck shell=bash
# tests/lab/vm/state.sh — run inside a lab VM (bash -s): one line per file pvetune's fix may write
# and per runtime value it may change, content hashed (not mtimes), sorted. lab-test.sh compares
# two listings to prove "nothing changed" (audit) and "this VM was not touched" (stopped rollout).
set -u
h() { sha256sum | cut -c1-16; }
file_line() {   # path -> "path <hash>" / "path -> target" / "path missing"
  if [ -L "$1" ]; then echo "$1 -> $(readlink "$1")"
  elif [ -f "$1" ]; then echo "$1 $(h <"$1")"
  elif [ -e "$1" ]; then echo "$1 (not a regular file)"
  else echo "$1 missing"; fi
}
tree_lines() {  # every file/symlink below a directory, or "dir missing"
  if [ -d "$1" ]; then
    find "$1" \( -type f -o -type l \) -print | LC_ALL=C sort | while read -r f; do file_line "$f"; done
    echo "$1/ $(find "$1" -printf '%P %y\n' | LC_ALL=C sort | h)"
  else
    echo "$1/ missing"
  fi
}
{
  for f in /etc/default/grub /boot/grub/grub.cfg /boot/grub/grubenv /etc/kernel/proxmox-boot-pin \
      /etc/kernel/next-boot-pin /etc/sysctl.conf /usr/local/sbin/pvetune-boot /run/pvetune/fix.lock; do
    file_line "$f"
  done
  for d in /etc/default/grub.d /etc/sysctl.d /etc/pve/nodes /etc/pvetune /usr/local/lib/pvetune \
      /var/lib/pvetune /run/pvetune; do
    tree_lines "$d"
  done
  for f in /etc/systemd/system/pvetune-*.service /etc/systemd/system/*.wants/pvetune-*; do
    [ -e "$f" ] || [ -L "$f" ] && file_line "$f"
  done
  echo "runtime numa_balancing $(cat /proc/sys/kernel/numa_balancing)"
  for p in /sys/devices/system/cpu/cpufreq/policy*; do
    echo "runtime $p/scaling_governor $(cat "$p/scaling_governor" 2>/dev/null)"
  done
  for s in /sys/devices/system/cpu/cpu*/cpuidle/state*; do
    echo "runtime $s $(cat "$s/name") disable=$(cat "$s/disable")"
  done
  for b in $(lspci -D -n -d 10de: | cut -d' ' -f1); do
    echo "runtime pci $b devctl=$(setpci -s "$b" CAP_EXP+8.w)"
  done
  for p in 0000:42:00.0 0000:42:01.0; do
    echo "runtime pci $p acsctl=$(setpci -s "$p" ECAP_ACS+6.w 2>&1)"
  done
  echo "runtime ct101.conf-allow $(grep -h '^lxc.cgroup2.devices.allow' /etc/pve/lxc/101.conf 2>/dev/null | tr '\n' ' ')"
} 2>&1
