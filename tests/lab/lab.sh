#!/usr/bin/env bash
# tests/lab/lab.sh — a cached, scripted lab of QEMU VMs that look like Proxmox VE GPU hosts.
#
# What was shown to work on this kind of machine is recorded in the workplace notes
# (shared/notes/vm-lab.md); this script follows them. In short: TCG by default (/dev/kvm here does
# not boot Debian kernels; LAB_ACCEL=kvm|auto uses KVM where /dev/kvm is usable, else falls back to
# TCG), a debootstrap'ed Debian bookworm disk booted through GRUB, 2 NUMA nodes, a pxb-pcie
# expander with an emulated PCIe switch above the two "GPUs", an extra ACPI table (lab-pm.asl)
# for acpi-cpufreq + acpi_idle, and a patched QEMU 7.2 (qemu-lab.patch) whose PCIe DevCtl
# MaxReadReq is writable, resets to 512 on reboot, whose emulated functions can carry NVIDIA's
# vendor id, and whose switch downstream ports have an ACS capability; an emulated VT-d IOMMU
# (intel_iommu=on in the image's GRUB), so the kernel enables ACS on those ports at every boot.
#
# Subcommands:
#   deps            apt-get install what the lab needs (idempotent; system apt sources untouched)
#   build           patched QEMU (in parallel with) guest image -> GRUB bake; cached by recipe hash
#   up [N]          boot N (default 2) VMs, wait for SSH, write work/inventory.yml
#   seed [N...]     put Proxmox-GPU-host state into the running VMs (NVIDIA nodes, /etc/pve CT conf)
#   down            stop the VMs (by the PID in their pidfiles) and remove their overlays
#   kill N          SIGKILL VM N's QEMU (by its pidfile PID): a power cut; `up` restarts it fresh
#   ssh N [-- cmd]  ssh into VM N
#   status          list VMs and cached artefacts
#   clean           down + remove the whole work dir
#
# Environment knobs: LAB_WORK (default tests/lab/work), LAB_PORT_BASE (22200: VM n listens on
# 127.0.0.1:LAB_PORT_BASE+n, the GRUB bake on +0), LAB_JOBS (2), LAB_MEM_PER_NODE_MB (512),
# LAB_SSH_TIMEOUT (900 s), LAB_UVM_MAJOR (511), LAB_CT_UVM_MAJOR (509), LAB_MAX_VMS (3),
# LAB_ACCEL (tcg; kvm|auto = KVM when /dev/kvm is usable, else TCG).
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=${LAB_WORK:-$LAB_DIR/work}
# The built artefacts (patched QEMU, guest image, GRUB-baked base disk) and the lab's SSH key live outside the
# clone, keyed by recipe hash: a fresh clone (CI) reuses what an earlier run on this machine built (~9 min).
C=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvetune/lab}
PORT_BASE=${LAB_PORT_BASE:-22200}
JOBS=${LAB_JOBS:-2}
MEM_NODE=${LAB_MEM_PER_NODE_MB:-512}
SSH_TIMEOUT=${LAB_SSH_TIMEOUT:-900}
MAX_VMS=${LAB_MAX_VMS:-3}

SUITE=bookworm
# The Debian archive this machine's apt uses (PVETUNE_DEBIAN_MIRROR overrides; see the script).
APT_MIRROR=$LAB_DIR/../../scripts/apt_mirror.sh
MIRROR=$("$APT_MIRROR")
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
DISK_SIZE_MB=3072

# Host packages (deps). qemu-system-x86/qemu-utils: the stock QEMU runs the GRUB bake and gives
# the firmware blobs (-L) and qemu-img; the rest builds the patched QEMU and the image.
HOST_PACKAGES=(qemu-system-x86 qemu-utils debootstrap debian-archive-keyring fdisk acpica-tools
  seabios ipxe-qemu e2fsprogs openssh-client iproute2 xz-utils
  build-essential ninja-build meson pkg-config python3 python3-venv libglib2.0-dev
  libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev dpkg-dev)

# Guest packages. Two kernel flavours of the same version give two installed kernels.
GUEST_PACKAGES=(linux-image-amd64 linux-image-cloud-amd64 initramfs-tools systemd-sysv udev dbus
  openssh-server python3 python3-apt pciutils iproute2 sudo numactl procps kmod grub-pc
  linux-cpupower)

QEMU_CONFIGURE_FLAGS=(--target-list=x86_64-softmmu --without-default-features --enable-tcg
  --enable-slirp --disable-docs --disable-werror --disable-install-blobs --disable-debug-info)

# Firmware search path for the self-built QEMU (blobs come from Debian's packages).
QEMU_FW=(-L /usr/share/qemu -L /usr/share/seabios -L /usr/lib/ipxe/qemu)
# shellcheck disable=SC2054  # one option value with commas, not array elements
TCG=(-accel tcg,thread=multi,tb-size=256)
# LAB_ACCEL for the lab VMs (the GRUB bake always runs TCG): tcg (default: works everywhere, and
# /dev/kvm on this kind of machine is a paravirtual variant that does not boot Debian kernels), or
# kvm / auto: KVM when /dev/kvm can be opened read-write, else TCG (said so in the log).
ACCEL=${LAB_ACCEL:-tcg}

KEY=$C/ssh/id_ed25519
# ConnectTimeout also bounds the SSH banner exchange: generous, as a TCG guest on a busy 2-core
# host can take many seconds to answer. Polling loops use lab_ssh_probe (5 s) instead.
SSH_BASE_OPTS=(-o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=10
  -o ServerAliveCountMax=6)

# ---------------------------------------------------------------------------------------------
# helpers

exec 3>&2   # step/timing lines always reach the terminal, even from redirected sections

log() { printf '[lab %s] %s\n' "$(date +%T)" "$*" >&3; }
die() { log "ERROR: $*"; exit 1; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
step_done() { log "step $(printf '%-10s' "$1") $2 in $(since "$3") s"; }

# hash_of ITEM...: fn:NAME (the function's text as bash prints it: comments do not count),
# file:PATH (content), str:TEXT. 16 hex digits of sha256.
hash_of() {
  local it
  for it in "$@"; do
    case $it in
      fn:*) declare -f "${it#fn:}" ;;
      file:*) printf '%s\n' "${it##*/}"; cat "${it#file:}" ;;
      str:*) printf '%s\n' "${it#str:}" ;;
      *) die "hash_of: bad item $it" ;;
    esac
  done | sha256sum | cut -c1-16
}

# Refuse to delete a tree that has anything mounted below it (debootstrap mounts proc/sys, and
# in some environments bind-mounts /dev, inside its target while it runs).
safe_rm() {
  local p
  for p in "$@"; do
    [[ -e $p ]] || continue
    p=$(readlink -f "$p")
    if awk -v p="$p/" '{ if (index($5 "/", p) == 1) { found = 1 } } END { exit !found }' \
        /proc/self/mountinfo; then
      die "refusing to delete $p: something is mounted below it (see /proc/self/mountinfo)"
    fi
    rm -rf --one-file-system "$p"
  done
}

# cached KIND KEY FUNC [ARGS...]: run FUNC OUTDIR ARGS unless $C/KIND-KEY is complete.
# Output lands in a .tmp dir that is renamed when FUNC succeeds; older KIND-* entries are pruned.
cached() {
  local kind=$1 key=$2 fn=$3 t0=$EPOCHREALTIME
  shift 3
  local dir=$C/$kind-$key
  if [[ -e $dir/.done ]]; then
    step_done "$kind" "cached ($key)" "$t0"
    return 0
  fi
  log "step $kind: building ($key) ..."
  safe_rm "$dir.tmp" "$dir"
  mkdir -p "$dir.tmp"
  "$fn" "$dir.tmp" "$@"
  date -u +%FT%TZ >"$dir.tmp/.done"
  mv "$dir.tmp" "$dir"
  local old
  for old in "$C/$kind"-*; do
    [[ $old == "$dir" || $old == *.tmp ]] && continue
    if [[ $kind == base ]] && vms_running; then continue; fi   # overlays may still use it
    safe_rm "$old"
  done
  step_done "$kind" "built ($key)" "$t0"
}

cache_dir() { printf '%s/%s-%s' "$C" "$1" "$2"; }

ensure_key() {
  [[ -s $KEY && -s $KEY.pub ]] && return 0
  mkdir -p "$C/ssh"
  chmod 700 "$C/ssh"
  rm -f "$KEY" "$KEY.pub"
  ssh-keygen -q -t ed25519 -N '' -C pvetune-lab -f "$KEY"
}

# ControlPath must fit in a unix socket path (~104 bytes); fall back to a short /tmp symlink.
control_dir() {
  local d=$W/cp
  mkdir -p "$d"
  chmod 700 "$d"
  if (( ${#d} + 42 > 100 )); then
    local s
    s=/tmp/pvetune-lab-$(printf '%s' "$d" | sha256sum | cut -c1-8)
    ln -sfn "$d" "$s"
    d=$s
  fi
  printf '%s' "$d"
}

port_of() { printf '%s' $((PORT_BASE + $1)); }

lab_ssh() {   # lab_ssh PORT ARGS...
  local port=$1
  shift
  ssh -i "$KEY" "${SSH_BASE_OPTS[@]}" -p "$port" root@127.0.0.1 "$@"
}

# lab_ssh_probe PORT: does the VM answer SSH now? (ssh keeps the first value of an option)
lab_ssh_probe() {
  ssh -o ConnectTimeout=5 -i "$KEY" "${SSH_BASE_OPTS[@]}" -p "$1" root@127.0.0.1 true \
    </dev/null >/dev/null 2>&1
}

# wait_ssh PORT TIMEOUT [PIDFILE]: until `ssh true` works; fail early if the VM process died.
wait_ssh() {
  local port=$1 timeout=$2 pidfile=${3:-} t0=$SECONDS
  while :; do
    if lab_ssh_probe "$port"; then return 0; fi
    if [[ -n $pidfile ]] && ! pid_alive "$pidfile"; then
      log "VM on port $port is not running"
      return 1
    fi
    (( SECONDS - t0 > timeout )) && { log "no SSH on port $port after ${timeout}s"; return 1; }
    sleep 1
  done
}

# read_pid PIDFILE: print the PID in the file. QEMU deletes its pidfile when it exits, so the file may vanish
# between any two commands: a file that is gone (or not a PID) is a VM that is not running, never an error.
read_pid() {
  local pid
  { pid=$(<"$1"); } 2>/dev/null || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  printf '%s' "$pid"
}

# pid_alive PIDFILE [PID]: PID (default: the one in the file) is a running QEMU started with that pidfile.
pid_alive() {
  local f=$1 pid=${2:-} cmdline
  [[ -n $pid ]] || pid=$(read_pid "$f") || return 1
  { cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline"); } 2>/dev/null || return 1
  grep -qxF -- "$f" <<<"$cmdline"
}

# stop_pidfile PIDFILE: SIGTERM, then SIGKILL after 15 s; only that PID, never by name. The PID is read once,
# so a QEMU that exits (and removes its pidfile) meanwhile is simply stopped. Fails, saying so and keeping the
# pidfile (a later `down` tries again), only when the process is still there 5 s after SIGKILL.
stop_pidfile() {
  local f=$1 pid i
  if pid=$(read_pid "$f") && pid_alive "$f" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
      pid_alive "$f" "$pid" || break
      sleep 0.25
    done
    if pid_alive "$f" "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 20; i++)); do
        pid_alive "$f" "$pid" || break
        sleep 0.25
      done
      if pid_alive "$f" "$pid"; then
        log "could not stop PID $pid ($f): still running after SIGKILL"
        return 1
      fi
    fi
  fi
  rm -f "$f"
}

vms_running() {
  local f
  for f in "$W"/vms/vm*.pid; do
    [[ -e $f ]] && pid_alive "$f" && return 0
  done
  return 1
}

port_free() { [[ -z $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }

# Pidfiles of QEMUs started by this invocation: stopped on any exit (success stops them itself).
CLEANUP_PIDFILES=()
CLEANUP_PGIDS=()
on_exit() {
  local rc=$? f g
  for g in "${CLEANUP_PGIDS[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for f in "${CLEANUP_PIDFILES[@]}"; do stop_pidfile "$f" || true; done
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------------
# deps

# apt-get with a private configuration: deb-src lists for bookworm live under $W/apt only, so the
# system's sources, lists and package cache are never touched.
apt_private() {
  local a=$W/apt security
  security=$("$APT_MIRROR" --security) || return 1  # PVETUNE_DEBIAN_SECURITY_MIRROR overrides
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d" "$a/preferences.d"
  cat >"$a/sources.list" <<EOF
deb-src [signed-by=$KEYRING] $MIRROR $SUITE main
deb-src [signed-by=$KEYRING] $MIRROR $SUITE-updates main
deb-src [signed-by=$KEYRING] $security $SUITE-security main
EOF
  apt-get -q \
    -o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts="$a/sources.list.d" \
    -o Dir::Etc::preferencesparts="$a/preferences.d" -o Dir::State::Lists="$a/lists" \
    -o Dir::Cache="$a/cache" -o APT::Sandbox::User=root "$@"
}

apt_private_update() {
  local t0=$EPOCHREALTIME
  mkdir -p "$W/logs"
  apt_private update >"$W/logs/apt-src-update.log" 2>&1 ||
    { tail -20 "$W/logs/apt-src-update.log" >&2; die "private apt-get update (deb-src) failed"; }
  step_done deb-src "updated (private lists in $W/apt)" "$t0"
}

cmd_deps() {
  local t0=$EPOCHREALTIME p missing=()
  for p in "${HOST_PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == ii* ]] || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    mkdir -p "$W/logs"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}"; } >"$W/logs/apt-install.log" 2>&1 ||
      { tail -30 "$W/logs/apt-install.log" >&2; die "apt-get install failed"; }
    step_done apt "installed ${#missing[@]} packages" "$t0"
  else
    step_done apt "nothing to install" "$t0"
  fi
  if ! compgen -G "$W/apt/lists/*Sources*" >/dev/null; then apt_private_update; fi
}

# ---------------------------------------------------------------------------------------------
# build (a): patched QEMU, only qemu-system-x86_64, TCG + slirp

build_qemu() {
  local out=$1 src=$W/src/qemu dl=$W/dl/qemu log=$W/logs/qemu-build.log
  : >"$log"
  compgen -G "$W/apt/lists/*Sources*" >/dev/null || apt_private update >>"$log" 2>&1
  mkdir -p "$dl"
  # Re-uses files already in $dl (apt skips those whose hashes match).
  (cd "$dl" && apt_private source --download-only qemu) >>"$log" 2>&1
  local dsc
  dsc=$(printf '%s\n' "$dl"/qemu_*.dsc | sort -V | tail -1)
  [[ -f $dsc ]] || die "no qemu .dsc downloaded (see $log)"
  safe_rm "$src"
  mkdir -p "$src"
  dpkg-source --no-check -x "$dsc" "$src/tree" >>"$log" 2>&1
  patch -d "$src/tree" -p1 --forward <"$LAB_DIR/qemu-lab.patch" >>"$log" 2>&1
  mkdir -p "$src/tree/build"
  (cd "$src/tree/build" && ../configure "${QEMU_CONFIGURE_FLAGS[@]}") >>"$log" 2>&1
  ninja -C "$src/tree/build" -j "$JOBS" qemu-system-x86_64 >>"$log" 2>&1
  install -m 0755 "$src/tree/build/qemu-system-x86_64" "$out/qemu-system-x86_64"
  basename "$dsc" .dsc >"$out/source-version"
  safe_rm "$src"
}
key_qemu() {
  hash_of fn:build_qemu fn:apt_private file:"$LAB_DIR/qemu-lab.patch" \
    str:"${QEMU_CONFIGURE_FLAGS[*]}" str:"$SUITE"
}

# ---------------------------------------------------------------------------------------------
# build (b): guest image

build_rootfs() {
  local out=$1 log=$W/logs/debootstrap.log
  local inc
  inc=$(IFS=,; printf '%s' "${GUEST_PACKAGES[*]}")
  debootstrap --variant=minbase --include="$inc" "$SUITE" "$out/rootfs" "$MIRROR" >"$log" 2>&1 ||
    { tail -30 "$log" >&2; die "debootstrap failed (log: $log)"; }
  du -sh "$out/rootfs" | cut -f1 >"$out/size"
}
key_rootfs() { hash_of fn:build_rootfs str:"${GUEST_PACKAGES[*]}" str:"$SUITE $MIRROR"; }

# Files written into the guest tree (host side, no chroot needed).
guest_files() {
  local t=$1
  install -d -m 0700 "$t/root/.ssh"
  install -m 0600 "$KEY.pub" "$t/root/.ssh/authorized_keys"
  echo pvelab >"$t/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\tpvelab\n' >"$t/etc/hosts"
  printf 'LABEL=rootfs\t/\text4\terrors=remount-ro\t0\t1\n' >"$t/etc/fstab"
  cat >"$t/etc/systemd/network/20-lab-dhcp.network" <<'EOF'
[Match]
Name=en*

[Network]
DHCP=yes
EOF
  mkdir -p "$t/etc/systemd/system/multi-user.target.wants" "$t/etc/systemd/system/sockets.target.wants"
  ln -sfn /lib/systemd/system/systemd-networkd.service \
    "$t/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  ln -sfn /lib/systemd/system/systemd-networkd.socket \
    "$t/etc/systemd/system/sockets.target.wants/systemd-networkd.socket"
  local u
  for u in apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer fstrim.timer \
      e2scrub_reap.service systemd-networkd-wait-online.service; do
    ln -sfn /dev/null "$t/etc/systemd/system/$u"
  done
  # GRUB as a Proxmox GPU host set up for PCI passthrough has it: intel_iommu=on (as the Proxmox
  # docs say; Debian's kernel leaves the Intel IOMMU off without it, and the VM's is an emulated
  # VT-d, see start_vm), no iommu=pt, no amd_pstate=active, no processor.max_cstate=1.
  cat >"$t/etc/default/grub" <<'EOF'
# Lab image (tests/lab/lab.sh): stock kernel command line + intel_iommu=on, serial console, short timeout.
GRUB_DEFAULT=0
GRUB_TIMEOUT=1
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"
GRUB_CMDLINE_LINUX="console=ttyS0,115200n8"
GRUB_TERMINAL="serial"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_OS_PROBER=true
EOF
  mkdir -p "$t/etc/ssh/sshd_config.d"
  printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
    >"$t/etc/ssh/sshd_config.d/lab.conf"
  # The "GPUs" carry NVIDIA's vendor id; keep nouveau off them (a real NVIDIA host does too).
  printf 'blacklist nouveau\noptions nouveau modeset=0\n' >"$t/etc/modprobe.d/lab-nouveau.conf"
}

build_image() {
  local out=$1 rootfs=$2 t=$1/tree
  cp -a --reflink=auto "$rootfs/." "$t"
  guest_files "$t"
  # Kernel + initrd of the generic flavour, for the one -kernel boot of the GRUB bake.
  local k
  # shellcheck disable=SC2010  # kernel file names are plain
  k=$(cd "$t/boot" && ls vmlinuz-*-amd64 | grep -v cloud | sort -V | tail -1)
  cp "$t/boot/$k" "$out/vmlinuz"
  cp "$t/boot/initrd.img-${k#vmlinuz-}" "$out/initrd.img"
  (cd "$t/boot" && ls vmlinuz-*) >"$out/kernels"
  truncate -s "${DISK_SIZE_MB}M" "$out/disk.raw"
  echo 'start=2048, type=83, bootable' | sfdisk -q "$out/disk.raw"
  mkfs.ext4 -q -F -L rootfs -E offset=1048576 -d "$t" "$out/disk.raw" $((DISK_SIZE_MB * 1024 - 1024))k
  safe_rm "$t"
}
key_image() {
  hash_of str:"$(key_rootfs)" fn:build_image fn:guest_files file:"$KEY.pub" str:"$DISK_SIZE_MB"
}

# build (c): boot once with -kernel/-initrd (stock QEMU: no need to wait for the patched one),
# grub-install + update-grub over SSH, power off. From then on the disk boots through BIOS+GRUB.
build_base() {
  local out=$1 img=$2 port
  port=$(port_of 0)
  port_free "$port" || die "port $port is in use (LAB_PORT_BASE)"
  cp --sparse=always "$img/disk.raw" "$out/base.img"
  local pidf=$out/bake.pid
  CLEANUP_PIDFILES+=("$pidf")
  # 3>&-: the daemonized QEMU must not keep this script's fd 3 (a dup of stderr) open, or a
  # caller reading our output through a pipe would wait for the VM to exit.
  qemu-system-x86_64 -name lab-bake "${TCG[@]}" -cpu EPYC-Rome -machine q35 -m 1024 -smp 2 \
    -nodefaults -display none \
    -drive file="$out/base.img",format=raw,if=virtio,cache=unsafe \
    -netdev user,id=n0,hostfwd=tcp:127.0.0.1:"$port"-:22 -device virtio-net-pci,netdev=n0,romfile= \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
    -append 'root=LABEL=rootfs rw console=ttyS0,115200n8 quiet' \
    -serial file:"$W/logs/bake-serial.log" -pidfile "$pidf" -daemonize 2>"$W/logs/bake-qemu.err" 3>&- ||
    { cat "$W/logs/bake-qemu.err" >&2; die "bake VM: QEMU did not start"; }
  wait_ssh "$port" 600 "$pidf" || die "bake VM: no SSH (serial log: $W/logs/bake-serial.log)"
  lab_ssh "$port" 'set -e
    grub-install --target=i386-pc /dev/vda
    update-grub
    grep -E "^\s*(menuentry|submenu|\s*linux\s)" /boot/grub/grub.cfg | head -20 >/root/grub-entries.txt
    sync' >"$W/logs/bake-grub.log" 2>&1 </dev/null ||
    { tail -20 "$W/logs/bake-grub.log" >&2; die "GRUB bake failed"; }
  lab_ssh "$port" 'systemctl poweroff' </dev/null >/dev/null 2>&1 || true
  local i
  for ((i = 0; i < 240; i++)); do pid_alive "$pidf" || break; sleep 0.5; done
  pid_alive "$pidf" && die "bake VM did not power off"
  rm -f "$pidf"
  chmod 0444 "$out/base.img"
}
key_base() { hash_of str:"$(key_image)" fn:build_base str:"${TCG[*]}"; }

build_aml() { iasl -p "$1/lab-pm" "$LAB_DIR/lab-pm.asl" >"$1/iasl.log" 2>&1; }
key_aml() { hash_of fn:build_aml file:"$LAB_DIR/lab-pm.asl"; }

cmd_build() {
  local t0=$EPOCHREALTIME
  mkdir -p "$W/logs" "$C"
  # One build at a time per cache (two clones on one machine share it).
  exec 8>"$C/.lock"
  flock 8
  ensure_key
  for c in debootstrap sfdisk mkfs.ext4 iasl qemu-system-x86_64 ssh; do
    command -v "$c" >/dev/null || die "$c missing: run '$0 deps' first"
  done
  cached aml "$(key_aml)" build_aml

  # (a) in the background, in its own process group (so a failure can stop all of it).
  local kq bg=
  kq=$(key_qemu)
  if [[ ! -e $(cache_dir qemu "$kq")/.done ]]; then
    set -m
    (cached qemu "$kq" build_qemu) </dev/null &
    bg=$!
    set +m
    CLEANUP_PGIDS+=("$bg")
    log "qemu build running in the background (log: $W/logs/qemu-build.log)"
  else
    cached qemu "$kq" build_qemu
  fi

  # (b) + (c) in the foreground.
  cached rootfs "$(key_rootfs)" build_rootfs
  cached image "$(key_image)" build_image "$(cache_dir rootfs "$(key_rootfs)")/rootfs"
  cached base "$(key_base)" build_base "$(cache_dir image "$(key_image)")"

  if [[ -n $bg ]]; then
    local tw=$EPOCHREALTIME
    if ! wait "$bg"; then
      tail -40 "$W/logs/qemu-build.log" >&2
      die "patched QEMU build failed (log: $W/logs/qemu-build.log)"
    fi
    CLEANUP_PGIDS=()
    step_done qemu-wait "waited for the background qemu build" "$tw"
  fi
  step_done build "total" "$t0"
}

# ---------------------------------------------------------------------------------------------
# up / down

artefacts() {   # sets QEMU_BIN BASE_IMG AML, or dies
  QEMU_BIN=$(cache_dir qemu "$(key_qemu)")/qemu-system-x86_64
  BASE_IMG=$(cache_dir base "$(key_base)")/base.img
  AML=$(cache_dir aml "$(key_aml)")/lab-pm.aml
  local f
  for f in "$QEMU_BIN" "$BASE_IMG" "$AML"; do
    [[ -e $f ]] || die "$f missing: run '$0 build' first"
  done
}

# vm_accel: the -accel options of the lab VMs, from LAB_ACCEL (see ACCEL above) and /dev/kvm.
vm_accel() {
  case $ACCEL in
    tcg) VM_ACCEL=("${TCG[@]}") ;;
    kvm | auto)
      if [[ -c /dev/kvm && -r /dev/kvm && -w /dev/kvm ]]; then
        VM_ACCEL=(-accel kvm)
      else
        log "LAB_ACCEL=$ACCEL: /dev/kvm is not usable here, falling back to TCG"
        VM_ACCEL=("${TCG[@]}")
      fi ;;
    *) die "LAB_ACCEL must be tcg, kvm or auto (got '$ACCEL')" ;;
  esac
}

start_vm() {
  local i=$1 port v=$W/vms VM_ACCEL=()
  vm_accel
  port=$(port_of "$i")
  local ov=$v/vm$i.qcow2 pidf=$v/vm$i.pid
  port_free "$port" || die "port $port is in use (LAB_PORT_BASE)"
  rm -f "$ov"
  qemu-img create -q -f qcow2 -F raw -b "$BASE_IMG" "$ov"
  : >"$v/vm$i.log"
  # Two NVIDIA-id functions behind one emulated PCIe switch, as GPUs sit on real hosts: the
  # pxb-pcie expander on NUMA node 0 (bus 0x40) -> root port 40:00.0 -> x3130-upstream 41:00.0
  # -> xio3130-downstream 42:00.0 and 42:01.0 -> gpu0 43:00.0, gpu1 44:00.0 (both node 0). The
  # x-lab-* properties, the writable/resetting DevCtl and the downstream ports' ACS capability
  # come from qemu-lab.patch. romfile= everywhere: no option ROMs to load, no iPXE in the boot
  # path. 3>&-: see build_base.
  # intel-iommu: an emulated VT-d (q35 only; one DMAR unit covering every PCI segment 0 device,
  # pxb buses included). It is the first -device: a PCI device realized before it would get no
  # IOMMU address space. With intel_iommu=on (baked into GRUB, guest_files) the kernel enables ACS
  # (SrcValid ReqRedir CmpltRedir UpstreamFwd, 001d) on every port with the capability at
  # enumeration and puts each "GPU" in its own IOMMU group. Defaults suffice: intremap=auto is on
  # under TCG and off under KVM's in-kernel irqchip (no kernel-irqchip=split needed); caching-mode
  # is only for VFIO in the guest.
  local gpu=(romfile= x-lab-vendor-id=0x10de x-lab-device-id=0x2bb5 x-lab-class=0x030200)
  "$QEMU_BIN" "${QEMU_FW[@]}" -name "lab-vm$i" "${VM_ACCEL[@]}" -cpu EPYC-Rome -machine q35 \
    -device intel-iommu \
    -m $((2 * MEM_NODE)) -smp 2,sockets=2,cores=1,threads=1 \
    -object memory-backend-ram,id=m0,size="${MEM_NODE}M" \
    -object memory-backend-ram,id=m1,size="${MEM_NODE}M" \
    -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
    -nodefaults -display none -no-user-config \
    -device pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1 \
    -drive if=none,id=d0,file="$ov",format=qcow2,cache=unsafe \
    -device virtio-blk-pci,bus=rp1,drive=d0,bootindex=0 \
    -device pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2 \
    -netdev user,id=n0,hostfwd=tcp:127.0.0.1:"$port"-:22 \
    -device virtio-net-pci,bus=rp2,netdev=n0,romfile= \
    -device pxb-pcie,id=pxb0,bus_nr=64,numa_node=0,bus=pcie.0 \
    -device pcie-root-port,id=gp0,bus=pxb0,chassis=10,slot=0 \
    -device x3130-upstream,id=swup,bus=gp0 \
    -device xio3130-downstream,id=swdn0,bus=swup,port=0,chassis=11,slot=0 \
    -device xio3130-downstream,id=swdn1,bus=swup,port=1,chassis=11,slot=1 \
    -device "e1000e,id=gpu0,bus=swdn0,$(IFS=,; echo "${gpu[*]}")" \
    -device "e1000e,id=gpu1,bus=swdn1,$(IFS=,; echo "${gpu[*]}")" \
    -acpitable file="$AML" \
    -serial file:"$v/vm$i.log" -pidfile "$pidf" -daemonize 2>"$v/vm$i.qemu.err" 3>&- ||
    { cat "$v/vm$i.qemu.err" >&2; die "vm$i: QEMU did not start"; }
  echo "$port" >"$v/vm$i.port"
  echo "$QEMU_BIN $BASE_IMG $AML" >"$v/vm$i.recipe"
}

write_inventory() {
  local n=$1 cp i
  cp=$(control_dir)
  {
    echo "# Written by tests/lab/lab.sh up: $n lab VM(s) shaped like Proxmox VE GPU hosts."
    echo "all:"
    echo "  children:"
    echo "    gpu_hosts:"
    echo "      hosts:"
    for ((i = 1; i <= n; i++)); do
      echo "        lab-vm$i:"
      echo "          ansible_host: 127.0.0.1"
      echo "          ansible_port: $(port_of "$i")"
    done
    echo "      vars:"
    echo "        ansible_user: root"
    echo "        ansible_ssh_private_key_file: $KEY"
    echo "        ansible_ssh_common_args: >-"
    echo "          -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    echo "          -o IdentitiesOnly=yes -o ControlMaster=auto -o ControlPersist=120s"
    echo "          -o ControlPath=$cp/%C"
    echo "        ansible_python_interpreter: /usr/bin/python3"
  } >"$W/inventory.yml"
}

cmd_up() {
  local n=${1:-2} t0=$EPOCHREALTIME i
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then die "up: N must be a positive number"; fi
  ((n <= MAX_VMS)) || die "up: at most $MAX_VMS VMs on this 2-core machine (LAB_MAX_VMS)"
  ensure_key
  artefacts
  mkdir -p "$W/vms"
  # VMs beyond N from an earlier `up` are stopped: the inventory then matches what runs.
  for f in "$W"/vms/vm*.pid; do
    [[ -e $f ]] || continue
    i=${f##*/vm}; i=${i%.pid}
    if ((i > n)); then stop_pidfile "$f"; rm -f "$W/vms/vm$i".{qcow2,port,recipe}; fi
  done
  local started=()
  for ((i = 1; i <= n; i++)); do
    if pid_alive "$W/vms/vm$i.pid"; then
      if [[ $(cat "$W/vms/vm$i.recipe" 2>/dev/null) == "$QEMU_BIN $BASE_IMG $AML" ]]; then
        log "vm$i already running (port $(port_of "$i"))"
        continue
      fi
      log "vm$i runs an older build: restarting it"
      stop_pidfile "$W/vms/vm$i.pid"
    fi
    start_vm "$i"
    started+=("$i")
    CLEANUP_PIDFILES+=("$W/vms/vm$i.pid")   # a failed `up` leaves no VM behind
  done
  # Every VM 1..N must answer SSH (those already running answer at once).
  local ts=$EPOCHREALTIME pending=() ready=() t
  for ((i = 1; i <= n; i++)); do pending+=("$i"); done
  while ((${#pending[@]})); do
    local still=()
    for i in "${pending[@]}"; do
      if lab_ssh_probe "$(port_of "$i")"; then
        t=$(since "$ts")
        log "vm$i: SSH ready after ${t} s (port $(port_of "$i"))"
        ready+=("$i")
      elif ! pid_alive "$W/vms/vm$i.pid"; then
        cat "$W/vms/vm$i.qemu.err" >&2 || true
        die "vm$i died while booting (serial log: $W/vms/vm$i.log)"
      else
        still+=("$i")
      fi
    done
    pending=("${still[@]}")
    if ((${#pending[@]})); then
      awk -v a="$(since "$ts")" -v b="$SSH_TIMEOUT" 'BEGIN{exit !(a > b)}' &&
        die "no SSH from vm(s) ${pending[*]} after ${SSH_TIMEOUT}s (serial logs in $W/vms)"
      sleep 1
    fi
  done
  local try
  for i in "${started[@]}"; do
    for try in 1 2 3; do
      lab_ssh "$(port_of "$i")" "echo lab-vm$i >/etc/hostname; hostname lab-vm$i
        sed -i 's/^127.0.1.1.*/127.0.1.1\tlab-vm$i/' /etc/hosts" </dev/null && break
      ((try < 3)) || die "vm$i: could not set the hostname over SSH"
      sleep 2
    done
  done
  CLEANUP_PIDFILES=()
  write_inventory "$n"
  step_done up "$n VM(s) SSH-ready" "$t0"
  log "inventory: $W/inventory.yml"
}

# down: every VM stopped, its overlay, port, recipe and pidfile removed. A QEMU that survives SIGKILL keeps its
# pidfile (so `status` and the next `down` see it) and is named; down then exits 1 after cleaning the rest.
cmd_down() {
  local t0=$EPOCHREALTIME f i n=0 left=()
  for f in "$W"/vms/vm*.pid; do
    [[ -e $f ]] || continue   # QEMU deletes its pidfile when it exits; stop_pidfile reads "gone" as stopped
    i=${f##*/vm}; i=${i%.pid}
    if stop_pidfile "$f"; then n=$((n + 1)); else left+=("vm$i"); fi
  done
  rm -f "$W"/vms/vm*.qcow2 "$W"/vms/vm*.port "$W"/vms/vm*.recipe "$W/inventory.yml"
  for f in "$W"/vms/vm*.pid; do
    i=${f##*/vm}; i=${i%.pid}
    [[ " ${left[*]} " == *" vm$i "* ]] || rm -f "$f"
  done
  rm -rf "$W/cp"
  if ((${#left[@]})); then
    log "down: could not stop ${left[*]} (pidfiles kept in $W/vms); everything else removed"
    return 1
  fi
  step_done down "stopped $n VM(s), overlays removed" "$t0"
}

# kill N: pull the plug on VM N (SIGKILL to the PID in its pidfile, nothing else); its overlay is
# left as it is (possibly inconsistent): the next `up` starts it from a fresh one.
cmd_kill() {
  local i=${1:-} f n
  [[ $i =~ ^[0-9]+$ ]] || die "usage: $0 kill N"
  f=$W/vms/vm$i.pid
  local pid
  if ! pid=$(read_pid "$f") || ! pid_alive "$f" "$pid"; then die "vm$i is not running"; fi
  kill -KILL "$pid" 2>/dev/null || true
  for ((n = 0; n < 40; n++)); do pid_alive "$f" "$pid" || break; sleep 0.25; done
  pid_alive "$f" "$pid" && die "vm$i: QEMU still running after SIGKILL"
  log "vm$i: QEMU killed (power cut)"
}

running_vms() {   # prints the numbers of running VMs
  local f i
  for f in "$W"/vms/vm*.pid; do
    [[ -e $f ]] || continue
    i=${f##*/vm}; i=${i%.pid}
    pid_alive "$f" && echo "$i"
  done | sort -n
}

# ---------------------------------------------------------------------------------------------
# seed: Proxmox-GPU-host state a Debian VM lacks. Done over SSH after `up` (not baked): the image
# stays generic, the state can differ per VM and per test without rebuilding, and every `up`
# starts from fresh overlays, so seeding again after `up` gives the same start state.
#
# No NVIDIA driver can load, so the kernel's /proc/devices lists no nvidia/nvidia-uvm majors. The
# boot unit below bind-mounts a copy of it with "195 nvidia" and "MAJ nvidia-uvm" added over
# /proc/devices (the way LXCFS overlays /proc files), so /proc/devices and the nodes agree as on
# a host whose driver is loaded. /proc/driver/nvidia/version does not exist (no driver).

seed_script() {
  cat <<'EOS'
set -eu
node=$(hostname)
install -d -m 0755 /etc/pvetune-lab
echo "$UVM_MAJOR" >/etc/pvetune-lab/uvm-major
cat >/usr/local/sbin/pvetune-lab-nvidia-nodes <<'EOF'
#!/bin/sh
# pvetune lab: the device nodes the NVIDIA driver would create on a Proxmox GPU host.
# nvidia-uvm's major is dynamic on real hosts; the lab reads it from /etc/pvetune-lab/uvm-major
# so a test can change it across a reboot.
set -eu
uvm=$(cat /etc/pvetune-lab/uvm-major 2>/dev/null || echo 511)
mk() { rm -f "$1"; mknod -m 0666 "$1" c "$2" "$3"; }
mk /dev/nvidia0 195 0
mk /dev/nvidiactl 195 255
mk /dev/nvidia-uvm "$uvm" 0
mk /dev/nvidia-uvm-tools "$uvm" 1
# /proc/devices as the loaded driver would show it: the kernel's own listing plus "195 nvidia" and
# "$uvm nvidia-uvm", bind-mounted over /proc/devices (as LXCFS mounts files over /proc). Without it
# pvetune (rightly) refuses to rewrite CT device entries: no registered driver, majors unknown.
umount /proc/devices 2>/dev/null || true
mkdir -p /run/pvetune-lab
{
  echo "Character devices:"
  { awk '/^Character/ { c = 1; next } /^$/ { c = 0 } c' /proc/devices
    echo "195 nvidia"
    echo "$uvm nvidia-uvm"; } | sort -s -n -k1,1 | awk '{ printf "%3d %s\n", $1, $2 }'
  echo
  sed -n '/^Block/,$p' /proc/devices
} >/run/pvetune-lab/proc-devices
mount --bind /run/pvetune-lab/proc-devices /proc/devices
EOF
chmod 0755 /usr/local/sbin/pvetune-lab-nvidia-nodes
cat >/etc/systemd/system/pvetune-lab-nvidia-nodes.service <<'EOF'
[Unit]
Description=pvetune lab: NVIDIA device nodes (/dev/nvidia0, nvidiactl, nvidia-uvm, nvidia-uvm-tools)
DefaultDependencies=no
After=systemd-udevd.service systemd-tmpfiles-setup-dev.service
Before=sysinit.target ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/pvetune-lab-nvidia-nodes

[Install]
WantedBy=sysinit.target
EOF
systemctl enable pvetune-lab-nvidia-nodes.service >/dev/null 2>&1   # reloads units too
systemctl restart pvetune-lab-nvidia-nodes.service
# /etc/pve as pmxcfs lays it out (here a plain directory, not the FUSE cluster filesystem).
mkdir -p "/etc/pve/nodes/$node/lxc" "/etc/pve/nodes/$node/qemu-server"
ln -sfn "nodes/$node" /etc/pve/local
ln -sfn "nodes/$node/lxc" /etc/pve/lxc
ln -sfn "nodes/$node/qemu-server" /etc/pve/qemu-server
cat >"/etc/pve/nodes/$node/lxc/101.conf" <<EOF
arch: amd64
cores: 8
features: nesting=1
hostname: gpu-ct101
memory: 65536
net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:10:01:01,ip=dhcp,type=veth
ostype: ubuntu
rootfs: local-lvm:vm-101-disk-0,size=64G
swap: 0
unprivileged: 0
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.cgroup2.devices.allow: c $CT_UVM_MAJOR:* rwm
lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file
lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file
lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file
lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file
EOF
echo "$node: uvm major $(cat /etc/pvetune-lab/uvm-major), CT 101 allows c $CT_UVM_MAJOR:*"
ls -l /dev/nvidia*
EOS
}

# Lab speed, not host state: tests/zipcode.py as a .pth hook of the guest's python3, so the code Ansible's modules
# import from their zip is compiled once per VM instead of at every task (LAB_ZIPCODE=0: without it). Its cache is
# /var/cache/pvetune-lab/zipcode, which the VM state listings leave out.
zipcode_script() {
  local d=/usr/lib/python3/dist-packages
  if [[ ${LAB_ZIPCODE:-1} == 0 ]]; then
    printf 'rm -f %s/pvetune_lab_zipcode.pth %s/pvetune_lab_zipcode.py\n' "$d" "$d"
    return 0
  fi
  printf "cat >%s/pvetune_lab_zipcode.py <<'EOPY'\n" "$d"
  cat "$LAB_DIR/../zipcode.py"
  printf 'EOPY\necho "import os; os.environ.setdefault(\\"PVETUNE_ZIPCODE_DIR\\", \\"/var/cache/pvetune-lab/zipcode\\"); import pvetune_lab_zipcode" >%s/pvetune_lab_zipcode.pth\n' "$d"
  printf 'python3 -c "import sys; sys.modules[\\"pvetune_lab_zipcode\\"]" 2>/dev/null ||\n'
  printf '  echo "WARNING: pvetune_lab_zipcode not loaded: every task compiles its modules again (slower)"\n'
}

cmd_seed() {   # seed [N...]: the given running VMs (default: every running VM)
  local t0=$EPOCHREALTIME i n=0
  local uvm=${LAB_UVM_MAJOR:-511} ct=${LAB_CT_UVM_MAJOR:-509}
  [[ $uvm =~ ^[0-9]+$ && $ct =~ ^[0-9]+$ ]] || die "seed: majors must be numbers"
  local pids=() rc=0 p vms=("$@")
  ((${#vms[@]})) || mapfile -t vms < <(running_vms)
  for i in "${vms[@]}"; do
    if ! [[ $i =~ ^[0-9]+$ ]] || ! pid_alive "$W/vms/vm$i.pid"; then die "seed: vm$i is not running"; fi
    { echo "UVM_MAJOR=$uvm CT_UVM_MAJOR=$ct"; seed_script; zipcode_script; } | lab_ssh "$(port_of "$i")" bash -s \
      >"$W/vms/vm$i.seed.log" 2>&1 &
    pids+=("$!:$i")
    n=$((n + 1))
  done
  ((n)) || die "seed: no VM is running (run '$0 up' first)"
  for p in "${pids[@]}"; do
    wait "${p%%:*}" || { rc=1; log "seed failed on vm${p#*:}"; }
    sed "s/^/  vm${p#*:}: /" "$W/vms/vm${p#*:}.seed.log" >&3
  done
  ((rc == 0)) || die "seed failed"
  step_done seed "$n VM(s)" "$t0"
}

# ---------------------------------------------------------------------------------------------

cmd_ssh() {
  local i=${1:-}
  [[ $i =~ ^[0-9]+$ ]] || die "usage: $0 ssh N [-- cmd...]"
  shift
  [[ ${1:-} == -- ]] && shift
  pid_alive "$W/vms/vm$i.pid" || die "vm$i is not running"
  trap - EXIT
  local first=()   # LAB_SSH_CONNECT_TIMEOUT: shorter timeout for polling (first value wins)
  [[ -n ${LAB_SSH_CONNECT_TIMEOUT:-} ]] && first=(-o "ConnectTimeout=$LAB_SSH_CONNECT_TIMEOUT")
  if (($#)); then
    exec ssh "${first[@]}" -i "$KEY" "${SSH_BASE_OPTS[@]}" -p "$(port_of "$i")" root@127.0.0.1 "$@"
  else
    exec ssh -t "${first[@]}" -i "$KEY" "${SSH_BASE_OPTS[@]/BatchMode=yes/BatchMode=no}" \
      -p "$(port_of "$i")" root@127.0.0.1
  fi
}

cmd_status() {
  local f i
  echo "work dir: $W, cache: $C"
  for f in "$C"/*; do
    [[ -e $f/.done ]] && echo "cached: ${f##*/} ($(du -sh "$f" | cut -f1), built $(<"$f/.done"))"
  done
  for i in $(running_vms); do
    echo "running: vm$i port $(port_of "$i") pid $(read_pid "$W/vms/vm$i.pid" || echo gone)"
  done
}

cmd_clean() {
  cmd_down
  safe_rm "$W"
  log "removed $W"
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

main() {
  local cmd=${1:-}
  (($#)) && shift
  case $cmd in
    deps) cmd_deps "$@" ;;
    build) cmd_build "$@" ;;
    up) cmd_up "$@" ;;
    seed) cmd_seed "$@" ;;
    down) cmd_down "$@" ;;
    kill) cmd_kill "$@" ;;
    ssh) cmd_ssh "$@" ;;
    status) cmd_status "$@" ;;
    clean) cmd_clean "$@" ;;
    -h | --help | help | '') usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
