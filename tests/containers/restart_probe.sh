#!/usr/bin/env bash
# What a "reboot" of a podman systemd host container does, and whether a unit ordered
# Before=pve-guests.service runs at boot inside it.
#
#   tests/containers/restart_probe.sh [bookworm|trixie ...]     (default: both)
#
# Per release, in an UNPRIVILEGED container (`--systemd=always`, image CMD /sbin/init):
#   1. install a stand-in pve-guests.service and pvetune-probe.service (Before=pve-guests.service,
#      mknods /dev/nvidia-uvm-probe, writes /run/pvetune-probe, logs start/stop to /var/lib);
#   2. leave markers in /run, /tmp, /dev, /var/tmp, /etc, /var/lib;
#   3. "reboot" with `podman restart`, then with `systemctl reboot` inside (needs --restart=always);
#   4. check: ExecStop ran at shutdown, probe ran before pve-guests at boot, which markers survived.
# Exit status 0 only if every expectation holds. Idempotent: removes its containers first and last.
set -euo pipefail
TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/containers/env.sh
. "$TOP/tests/containers/env.sh"

RELEASES=("$@")
((${#RELEASES[@]})) || RELEASES=(bookworm trixie)
FAILS=0
CONTAINERS=()
cleanup() { local c; for c in "${CONTAINERS[@]}"; do podman rm -f -t 0 "$c" > /dev/null 2>&1 || true; done; }
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }
say() { printf '[restart_probe] %s\n' "$*"; }
check() {  # description, command...
  local what="$1"; shift
  if "$@"; then say "  ok   $what"; else say "  FAIL $what"; FAILS=$((FAILS + 1)); fi
}

boot_token() { podman exec "$1" awk '{print $22}' /proc/1/stat 2>/dev/null || true; }

wait_booted() {  # container, previous boot token ('' = any); waits for a new PID 1 and a booted systemd
  local c="$1" old="$2" tok state i
  for i in $(seq 1 300); do
    tok=$(boot_token "$c")
    if [[ -n "$tok" && "$tok" != "$old" ]]; then
      state=$(podman exec "$c" systemctl is-system-running --wait 2>/dev/null || true)
      if [[ "$state" == running || "$state" == degraded ]]; then
        [[ "$state" == running ]] || podman exec "$c" systemctl --failed --no-legend >&2 || true
        echo "$tok"; return 0
      fi
    fi
    sleep 0.1
  done
  say "timeout waiting for $c to boot" >&2; return 1
}

install_units() {
  podman exec -i "$1" bash -s <<'EOF'
set -euo pipefail
mkdir -p /var/lib/probe
cat > /etc/systemd/system/pve-guests.service <<'U'
[Unit]
Description=Stand-in for PVE guests autostart
After=network.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo "start pve-guests boot=$(awk "{print \\$22}" /proc/1/stat) node=$(test -c /dev/nvidia-uvm-probe && echo yes || echo no)" >> /var/lib/probe/boot.log'
ExecStop=/bin/sh -c 'echo "stop pve-guests" >> /var/lib/probe/boot.log'
[Install]
WantedBy=multi-user.target
U
cat > /etc/systemd/system/pvetune-probe.service <<'U'
[Unit]
Description=Boot-time unit ordered before pve-guests (like pvetune-lxc-gpu.service)
Before=pve-guests.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'sleep 0.5; test -e /dev/nvidia-uvm-probe || mknod -m 666 /dev/nvidia-uvm-probe c 511 0; echo ok > /run/pvetune-probe; echo "start pvetune-probe boot=$(awk "{print \\$22}" /proc/1/stat)" >> /var/lib/probe/boot.log'
ExecStop=/bin/sh -c 'echo "stop pvetune-probe" >> /var/lib/probe/boot.log'
[Install]
WantedBy=multi-user.target
U
systemctl daemon-reload
systemctl enable --quiet pvetune-probe.service pve-guests.service
systemctl start pvetune-probe.service pve-guests.service
: > /var/lib/probe/boot.log
touch /run/marker /tmp/marker /var/tmp/marker /etc/marker /var/lib/probe/marker
mknod -m 666 /dev/marker c 511 1
EOF
}

check_after_boot() {  # container, boot token
  local c="$1" tok="$2" log
  log=$(podman exec "$c" cat /var/lib/probe/boot.log)
  printf '%s\n' "$log" | sed 's/^/[restart_probe]      boot.log: /'
  check "ExecStop of both units ran at shutdown" \
    grep -qx 'stop pve-guests' <<< "$log"
  check "pvetune-probe ran in this boot" grep -qx "start pvetune-probe boot=$tok" <<< "$log"
  check "pve-guests ran in this boot after pvetune-probe and saw its /dev node" \
    awk -v t="$tok" '$0 == "start pvetune-probe boot=" t { p = NR } $0 == "start pve-guests boot=" t " node=yes" { g = NR } END { exit !(p && g > p) }' <<< "$log"
  check "/run, /tmp and /dev are fresh (markers gone)" \
    podman exec "$c" sh -c '! test -e /run/marker && ! test -e /tmp/marker && ! test -e /dev/marker'
  check "/etc, /var/tmp, /var/lib kept (container layer persists)" \
    podman exec "$c" test -e /etc/marker -a -e /var/tmp/marker -a -e /var/lib/probe/marker
  check "the unit recreated /run/pvetune-probe and /dev/nvidia-uvm-probe" \
    podman exec "$c" test -e /run/pvetune-probe -a -c /dev/nvidia-uvm-probe
  check "/etc/machine-id is the same as at first boot (derived from the container id)" \
    test "$(podman exec "$c" cat /etc/machine-id)" == "$MACHINE_ID"
  check "kernel boot_id did NOT change (it is the host's: never use it to detect a container reboot)" \
    test "$(podman exec "$c" cat /proc/sys/kernel/random/boot_id)" == "$BOOT_ID"
  # Re-arm markers and reset the log for the next "reboot".
  podman exec "$c" sh -c ': > /var/lib/probe/boot.log; touch /run/marker /tmp/marker; mknod -m 666 /dev/marker c 511 1'
}

probe_release() {
  local rel="$1" c="pvetune-restartprobe-$1" image="localhost/pvetune-host:$1" t tok tok2
  say "== $rel ($image)"
  podman rm -f -t 0 "$c" > /dev/null 2>&1 || true
  CONTAINERS+=("$c")
  t=$(now)
  podman run -d --name "$c" --hostname "pve-$rel" --systemd=always --restart=always "$image" > /dev/null
  tok=$(wait_booted "$c" "")
  say "first boot to 'running': $(elapsed "$t")"
  BOOT_ID=$(podman exec "$c" cat /proc/sys/kernel/random/boot_id)
  MACHINE_ID=$(podman exec "$c" cat /etc/machine-id)
  install_units "$c"

  say "-- podman restart"
  t=$(now)
  podman restart "$c" > /dev/null
  tok2=$(wait_booted "$c" "$tok")
  say "podman restart to 'running': $(elapsed "$t")"
  check_after_boot "$c" "$tok2"

  say "-- systemctl reboot inside (container has --restart=always)"
  t=$(now)
  podman exec "$c" systemctl reboot || true
  tok=$(wait_booted "$c" "$tok2")
  say "in-container reboot to 'running': $(elapsed "$t")"
  check_after_boot "$c" "$tok"
  podman rm -f -t 0 "$c" > /dev/null
}

for rel in "${RELEASES[@]}"; do probe_release "$rel"; done
if ((FAILS)); then say "$FAILS check(s) failed"; exit 1; fi
say "all checks passed"
