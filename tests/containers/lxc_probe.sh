#!/usr/bin/env bash
# Prove the LXC-in-podman pattern the `lxc` Molecule scenario will use: a podman container plays a
# Proxmox VE host (systemd as PID 1) and runs real LXC CTs; the CT's device cgroup decides whether
# the CT may open a bind-mounted NVIDIA node:
#   ENXIO = the cgroup let the open through (no driver owns the major)  -> allow line effective
#   EPERM = the device cgroup refused it                                -> allow line missing/ignored
#
#   tests/containers/lxc_probe.sh [bookworm|trixie ...]   # default both; exit 0 = all expectations met
#   tests/containers/lxc_probe.sh --ablate [release]      # drop each host option in turn, show what breaks
#
# Phase 1 (mechanics): CT 100 without an allow line -> EPERM; with only a cgroup2 line -> EPERM (v1
#   machine: LXC ignores it); with `lxc.cgroup.devices.allow = c MAJOR:* rwm` -> ENXIO; a mount entry
#   without `optional` whose source is missing -> lxc-start fails.
# Phase 2 (boot): a unit ordered Before=pve-guests.service creates /dev/nvidia-uvm, a stand-in
#   pve-guests.service starts CT 100 (onboot) through a stand-in pct; `podman restart` = reboot;
#   then the same with the unit disabled -> the CT does not come up.
#
# The host container is NOT --privileged (see HOST_OPTS; scripts/build_images.sh documents the
# entrypoint /usr/local/sbin/pvetune-lxchost-init). Nothing of the machine's /sys or /proc is mounted.
# CT configs are written Proxmox-style (/etc/pve/lxc/<id>.conf, `key: value`); the stand-in pct passes
# raw `lxc.*` keys through as `key = value`, as the real pct does.
set -euo pipefail
TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/containers/env.sh
. "$TOP/tests/containers/env.sh"

MAJOR="${PVETUNE_PROBE_MAJOR:-511}"   # no driver registers it (checked against /proc/devices below)
ENTRYPOINT=/usr/local/sbin/pvetune-lxchost-init

# Host container options; each one is needed (`--ablate` shows what fails without it).
HOST_OPTS=(
  # The container's cgroup becomes its "/": podman's read-only cgroup mounts show only that subtree,
  # the entrypoint can make them writable for LXC, and systemd's own cgroups stay inside it.
  --cgroupns=private
  # mount (remount cgroups rw, CT rootfs overlay, CT /proc and /sys), pivot_root, namespaces, and
  # writes to the v1 devices.allow/devices.deny files (the kernel checks CAP_SYS_ADMIN for those,
  # in the initial user namespace: a user-namespaced container cannot do it).
  --cap-add=SYS_ADMIN
  # A v1 devices cgroup cannot grant more than its parent holds: the host container must hold every
  # major a CT is granted in a test. LXC only WARNs when an allow line is refused, so without this
  # the allow line silently does nothing (EPERM).
  "--device-cgroup-rule=c $MAJOR:* rwm"
)
# Not needed (found by trying): --privileged, --security-opt seccomp=unconfined (podman's default
# profile allows mount/unshare/setns/pivot_root once CAP_SYS_ADMIN is there), apparmor/label options
# (no LSM here), NET_ADMIN (lxc.net.0.type = empty; LXC warns "Failed to allocate new network
# namespace id"), MKNOD (in podman's default set), device rules for 5:1 and 10:229 that LXC's
# common.conf allows (LXC warns and goes on), mounting the machine's /sys/fs/cgroup.

say() { printf '[lxc_probe] %s\n' "$*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }

if grep -qE "^ *$MAJOR " /proc/devices; then
  say "major $MAJOR is registered on this machine (/proc/devices); set PVETUNE_PROBE_MAJOR"; exit 2
fi
if ! grep -q ' /sys/fs/cgroup/devices ' /proc/self/mountinfo; then
  say "no cgroup v1 devices hierarchy here: this probe (lxc.cgroup.devices.*) needs cgroup v1"; exit 2
fi

# ---- set-up inside the host container: stand-in pct, CT init, unit files ----------------------
SETUP=$(cat <<'SETUP_EOF'
set -euo pipefail
MAJOR="$1"
# CT init: waits, exits on SIGPWR (lxc-stop's halt signal), so a clean stop takes milliseconds.
cat > /usr/local/sbin/ct-init <<'EOF'
#!/bin/sh
trap 'exit 0' PWR TERM INT
while :; do sleep 1 & wait $!; done
EOF
# Stand-in for pct: /etc/pve/lxc/<id>.conf (key: value) -> /var/lib/lxc/<id>/config.
# The real pct generates many more lines from PVE keys (arch, rootfs, netN, mpN, ...); raw lxc.*
# keys are appended verbatim as `key = value`; snapshot sections ([name]) are not the running CT.
cat > /usr/local/sbin/pct <<'EOF'
#!/bin/bash
set -euo pipefail
cmd="$1"; id="${2:-}"
conf="/etc/pve/lxc/$id.conf"; dir="/var/lib/lxc/$id"
case "$cmd" in
  start)
    [[ -d "$dir" ]] || lxc-create -n "$id" -t none > /dev/null
    {
      echo "lxc.uts.name = $(sed -n 's/^hostname: *//p' "$conf" | head -n1)"
      echo "lxc.rootfs.path = overlay:/:$dir/delta0"   # the host container's own root, copy-on-write
      echo "lxc.include = /usr/share/lxc/config/common.conf"
      echo "lxc.apparmor.profile = unconfined"
      echo "lxc.net.0.type = empty"
      echo "lxc.init.cmd = /usr/local/sbin/ct-init"
      echo "lxc.console.path = none"
      echo "lxc.tty.max = 0"
      echo "lxc.cgroup.relative = 1"                  # systemd (PID 1) sits in /init.scope
      awk '/^\[/ { exit } /^lxc\.[^:]*:/ { k = $0; sub(/:.*/, "", k); v = $0; sub(/^[^:]*: */, "", v); print k " = " v }' "$conf"
    } > "$dir/config"
    lxc-start -n "$id" -l WARN -o "$dir/start.log" || { cat "$dir/start.log" >&2; exit 1; }
    lxc-wait -n "$id" -s RUNNING -t 10 ;;
  stop) lxc-stop -n "$id" -t 10 ;;
  status) echo "status: $(lxc-info -n "$id" -s -H 2> /dev/null | tr 'A-Z' 'a-z' || echo stopped)" ;;
  startall) for f in /etc/pve/lxc/*.conf; do grep -qx 'onboot: 1' "$f" && "$0" start "$(basename "$f" .conf)"; done; true ;;
  stopall) for d in /var/lib/lxc/*/; do lxc-stop -n "$(basename "$d")" -t 10 2> /dev/null || true; done ;;
  *) echo "stand-in pct: $cmd not supported" >&2; exit 2 ;;
esac
EOF
chmod 755 /usr/local/sbin/ct-init /usr/local/sbin/pct
cat > /etc/systemd/system/pve-guests.service <<'EOF'
[Unit]
Description=Stand-in for PVE guests (starts CTs with onboot: 1)
After=local-fs.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/pct startall
ExecStop=/usr/local/sbin/pct stopall
[Install]
WantedBy=multi-user.target
EOF
cat > /etc/systemd/system/pvetune-probe-nodes.service <<'EOF'
[Unit]
Description=Stand-in for a boot-time unit that creates NVIDIA nodes before guests start
Before=pve-guests.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'test -c /dev/nvidia-uvm || mknod -m 666 /dev/nvidia-uvm c MAJOR 0'
[Install]
WantedBy=multi-user.target
EOF
sed -i "s/MAJOR/$MAJOR/" /etc/systemd/system/pvetune-probe-nodes.service
systemctl daemon-reload
mkdir -p /etc/pve/lxc
SETUP_EOF
)

# ---- phase 1, inside the host container; prints "RESULT name=value" lines -----------------------
MECHANICS=$(cat <<'MECH_EOF'
set -euo pipefail
MAJOR="$1"
ms() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }
step() { echo "STEP $*"; }
res() { echo "RESULT $*"; }
open_errno='import errno, os
try:
    os.close(os.open("/dev/nvidia-uvm", os.O_RDWR)); print("OPENED")
except OSError as e:
    print(errno.errorcode[e.errno])'
start() { local t; t=$(date +%s.%N); pct start 100; res "start_s=$(ms "$t")"; }
stop() { local t; t=$(date +%s.%N); pct stop 100; res "stop_s=$(ms "$t")"; }
base='arch: amd64
hostname: ct100
memory: 512
ostype: debian
rootfs: local-lvm:vm-100-disk-0,size=8G
lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file'

step mknod
rm -f /dev/nvidia-uvm; mknod -m 666 /dev/nvidia-uvm c "$MAJOR" 0
res "host_open=$(python3 -c "$open_errno")"

step ct-no-allow
printf '%s\n' "$base" > /etc/pve/lxc/100.conf
start
res "no_allow=$(lxc-attach -n 100 -- python3 -c "$open_errno")"
res "ct_identity=$(lxc-attach -n 100 -- sh -c 'echo "$(hostname)/$(cat /proc/1/comm)/$(readlink /proc/1/ns/pid | tr -dc 0-9)"')"
res "host_pidns=$(readlink /proc/1/ns/pid | tr -dc 0-9)"
stop

step ct-cgroup2-allow-only
printf '%s\nlxc.cgroup2.devices.allow: c %s:* rwm\n' "$base" "$MAJOR" > /etc/pve/lxc/100.conf
start
res "cgroup2_allow_only=$(lxc-attach -n 100 -- python3 -c "$open_errno")"
grep -q 'Ignoring cgroup2 limits on legacy cgroup system' /var/lib/lxc/100/start.log \
  && res "cgroup2_ignored_warning=yes" || res "cgroup2_ignored_warning=no"
stop

step ct-cgroup-v1-allow
printf '%s\nlxc.cgroup.devices.allow: c %s:* rwm\n' "$base" "$MAJOR" > /etc/pve/lxc/100.conf
start
res "v1_allow=$(lxc-attach -n 100 -- python3 -c "$open_errno")"
res "ct_devices_list_has_major=$(grep -c "^c $MAJOR:\* rwm$" "/sys/fs/cgroup/devices/$(sed -n 's/^[0-9]*:devices://p' /proc/"$(lxc-info -n 100 -p -H)"/cgroup)/devices.list")"
stop

step ct-mount-without-optional
# Without `optional`, a missing source (NVIDIA nodes not created yet at boot) aborts lxc-start.
rm -f /dev/nvidia-uvm
printf '%s\n' "$base" | sed 's/bind,optional,create=file/bind,create=file/' > /etc/pve/lxc/100.conf
if pct start 100 2> /dev/null; then res "missing_source_start=started"; pct stop 100
else res "missing_source_start=failed"; fi
lxc-destroy -n 100 -f > /dev/null 2>&1 || true
res "done=yes"
MECH_EOF
)

WORK=$(mktemp -d)
cleanup() {
  local rel
  for rel in bookworm trixie; do podman rm -f -t 0 "pvetune-lxcprobe-$rel" > /dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
FAILS=0

check() {  # description, command...
  local what="$1"; shift
  if "$@"; then say "  ok   $what"; else say "  FAIL $what"; FAILS=$((FAILS + 1)); fi
}
expect() {  # results file, key, expected value
  local got
  got=$(sed -n "s/^RESULT $2=//p" "$1" | tail -n1)
  if [[ "$got" == "$3" ]]; then say "  ok   $2=$got"; else say "  FAIL $2=${got:-<missing>} (expected $3)"; FAILS=$((FAILS + 1)); fi
}

boot_token() { podman exec "$1" awk '{print $22}' /proc/1/stat 2> /dev/null || true; }
wait_booted() {  # container, previous boot token; prints systemd's final state ('exited', 'timeout')
  local c="$1" old="$2" tok state i
  for i in $(seq 1 300); do
    if [[ "$(podman inspect -f '{{.State.Running}}' "$c" 2> /dev/null)" != true ]]; then
      if ((i > 30)); then echo exited; return 0; fi
    else
      tok=$(boot_token "$c")
      if [[ -n "$tok" && "$tok" != "$old" ]]; then
        # Empty when the exec raced the container's start: try again.
        state=$(podman exec "$c" systemctl is-system-running --wait 2> /dev/null || true)
        case "$state" in running|degraded|maintenance) echo "$state"; return 0 ;; esac
      fi
    fi
    sleep 0.1
  done
  echo timeout
}

start_host() {  # release, options...; container name in $HOST
  local rel="$1"; shift
  HOST="pvetune-lxcprobe-$rel"
  podman rm -f -t 0 "$HOST" > /dev/null 2>&1 || true
  podman run -d --name "$HOST" --hostname "pve-$rel" --systemd=false "$@" \
    "localhost/pvetune-host:$rel" "$ENTRYPOINT" > /dev/null
}

probe_release() {
  local rel="$1" t state tok
  say "== $rel: podman run --systemd=false ${HOST_OPTS[*]} localhost/pvetune-host:$rel $ENTRYPOINT"
  t=$(now)
  start_host "$rel" "${HOST_OPTS[@]}"
  state=$(wait_booted "$HOST" "")
  say "host container booted ($state) in $(elapsed "$t")"
  check "systemd in the LXC host container reaches 'running'" test "$state" == running
  podman exec -i "$HOST" bash -s -- "$MAJOR" <<< "$SETUP"

  say "-- phase 1: device cgroup mechanics"
  t=$(now)
  if ! podman exec -i "$HOST" bash -s -- "$MAJOR" <<< "$MECHANICS" > "$WORK/out" 2> "$WORK/err"; then
    sed 's/^/[lxc_probe]   | /' "$WORK/out" "$WORK/err"; say "  FAIL phase 1 aborted"; FAILS=$((FAILS + 1)); return
  fi
  say "phase 1 took $(elapsed "$t"); pct start (lxc-start+wait): $(sed -n 's/^RESULT start_s=//p' "$WORK/out" | paste -sd' ') s;" \
      "pct stop (clean, SIGPWR): $(sed -n 's/^RESULT stop_s=//p' "$WORK/out" | paste -sd' ') s"
  expect "$WORK/out" host_open ENXIO
  expect "$WORK/out" no_allow EPERM
  local ident hostns
  ident=$(sed -n 's/^RESULT ct_identity=//p' "$WORK/out"); hostns=$(sed -n 's/^RESULT host_pidns=//p' "$WORK/out")
  check "CT 100 runs ct-init as PID 1 in its own pid namespace ($ident)" \
    test "${ident%/*}" == ct100/ct-init -a "${ident##*/}" != "$hostns"
  expect "$WORK/out" cgroup2_allow_only EPERM
  expect "$WORK/out" cgroup2_ignored_warning yes
  expect "$WORK/out" v1_allow ENXIO
  expect "$WORK/out" ct_devices_list_has_major 1
  expect "$WORK/out" missing_source_start failed
  expect "$WORK/out" done yes

  say "-- phase 2: boot-time unit Before=pve-guests.service, CT 100 onboot, podman restart = reboot"
  podman exec -i "$HOST" bash -s -- "$MAJOR" <<'EOF'
set -e
printf '%s\n' 'arch: amd64' 'hostname: ct100' 'onboot: 1' 'ostype: debian' \
  'lxc.cgroup.devices.allow: c '"$1"':* rwm' \
  'lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,create=file' > /etc/pve/lxc/100.conf
systemctl enable --quiet pvetune-probe-nodes.service pve-guests.service
EOF
  tok=$(boot_token "$HOST"); t=$(now)
  podman restart "$HOST" > /dev/null
  state=$(wait_booted "$HOST" "$tok")
  say "podman restart to '$state' in $(elapsed "$t")"
  check "after reboot: systemd running, pve-guests active" test "$state" == running
  check "after reboot: CT 100 running (started by pve-guests)" \
    test "$(podman exec "$HOST" pct status 100)" == "status: running"
  check "after reboot: CT 100 opens /dev/nvidia-uvm -> ENXIO" \
    test "$(podman exec "$HOST" lxc-attach -n 100 -- python3 -c 'import errno, os
try:
    os.open("/dev/nvidia-uvm", os.O_RDWR)
except OSError as e:
    print(errno.errorcode[e.errno])')" == ENXIO
  check "node unit finished before pve-guests started" podman exec "$HOST" sh -c '
    a=$(systemctl show -P ExecMainExitTimestampMonotonic pvetune-probe-nodes.service)
    b=$(systemctl show -P ExecMainStartTimestampMonotonic pve-guests.service)
    test "$a" -gt 0 -a "$a" -le "$b"'

  podman exec "$HOST" systemctl disable --quiet pvetune-probe-nodes.service
  tok=$(boot_token "$HOST"); t=$(now)
  podman restart "$HOST" > /dev/null
  state=$(wait_booted "$HOST" "$tok")
  say "podman restart (node unit disabled) to '$state' in $(elapsed "$t")"
  check "without the node unit: /dev/nvidia-uvm is gone after reboot (/dev is fresh)" \
    podman exec "$HOST" test ! -e /dev/nvidia-uvm
  check "without the node unit: pve-guests failed, CT 100 not running, system degraded" \
    test "$state" == degraded -a "$(podman exec "$HOST" pct status 100)" == "status: stopped"

  t=$(now)
  podman stop "$HOST" > /dev/null
  say "podman stop (systemd shutdown) in $(elapsed "$t")"
  podman rm -f -t 0 "$HOST" > /dev/null
}

ablate() {
  local rel="$1" i opts state
  say "== ablation on $rel: each run drops one option from the minimum"
  for i in "${!HOST_OPTS[@]}"; do
    opts=("${HOST_OPTS[@]}"); unset "opts[$i]"
    start_host "$rel" "${opts[@]}"
    state=$(wait_booted "$HOST" "")
    if [[ "$state" != running ]]; then
      say "  without ${HOST_OPTS[$i]}: host container $state: $(podman logs "$HOST" 2>&1 | grep -v '^$' | head -n1 | cut -c1-160)"
      continue
    fi
    podman exec -i "$HOST" bash -s -- "$MAJOR" <<< "$SETUP"
    if podman exec -i "$HOST" bash -s -- "$MAJOR" <<< "$MECHANICS" > "$WORK/out" 2> "$WORK/err"; then
      say "  without ${HOST_OPTS[$i]}: probe ran: $(sed -n 's/^RESULT \(host_open\|no_allow\|v1_allow\)=/\1=/p' "$WORK/out" | paste -sd' ')"
    else
      say "  without ${HOST_OPTS[$i]}: FAILS at step '$(sed -n 's/^STEP //p' "$WORK/out" | tail -n1)':" \
          "$(grep -m1 -iE 'error|denied|not permitted|failed' "$WORK/err" | cut -c1-160)"
    fi
  done
  podman rm -f -t 0 "$HOST" > /dev/null 2>&1 || true
}

ABLATE=0
RELEASES=()
for arg in "$@"; do
  case "$arg" in
    --ablate) ABLATE=1 ;;
    bookworm|trixie) RELEASES+=("$arg") ;;
    *) echo "lxc_probe: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if ((ABLATE)); then ablate "${RELEASES[0]:-bookworm}"; exit 0; fi
((${#RELEASES[@]})) || RELEASES=(bookworm trixie)
T0=$(now)
for rel in "${RELEASES[@]}"; do probe_release "$rel"; done
say "total $(elapsed "$T0")"
if ((FAILS)); then say "$FAILS expectation(s) failed"; exit 1; fi
say "all expectations met"
