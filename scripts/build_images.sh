#!/usr/bin/env bash
# Build the Debian host images pvetune's container tests run on, without any registry.
#
#   scripts/build_images.sh                 # bookworm (Proxmox VE 8 base) and trixie (PVE 9 base)
#   scripts/build_images.sh trixie          # just one release
#   scripts/build_images.sh --force bookworm   # rebuild even if up to date (keeps the deb cache)
#   scripts/build_images.sh --print-hash bookworm   # print the recipe hash and exit
#
# Result: localhost/pvetune-host:<release>, labelled org.pvetune.recipe=<hash>.
# No container registry is reachable from the build machines, so the root file system is made
# with debootstrap (minbase) and turned into an image with `podman import`.
#
# Caching (all under ~/.cache/pvetune/images/, outside the clone so a fresh clone on this machine reuses it):
#   * the image is left alone when it exists and its recipe label matches;
#   * else the rootfs tarball rootfs-<release>-<hash>.tar.zst (.tar.gz without zstd) is imported
#     when present (so `podman rmi` costs an import, ~5 s, not a debootstrap);
#   * else debootstrap runs (both releases in parallel, each on its own tmpfs when RAM allows),
#     with downloaded .debs kept in debs/<release>/; its output goes to debootstrap-<release>.log.
# The recipe hash covers this script (package list and image customisation included), the release,
# the mirror and the debootstrap version: editing this file rebuilds both images (~1-2 min).
#
# Environment: PVETUNE_DEBIAN_MIRROR (default: this machine's Debian archive, scripts/apt_mirror.sh),
# PVETUNE_IMAGE_CACHE, PVETUNE_IMAGE_PARALLEL=0 (one debootstrap at a time), PVETUNE_IMAGE_TMPFS=0 (on disk).
#
# Runs as root (CI: root on a fresh clone after `scripts/bootstrap.sh containers`).
# Uses scripts/containers.conf through CONTAINERS_CONF; nothing under /etc is changed.
set -euo pipefail

TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$TOP/scripts/build_images.sh"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$TOP/scripts/containers.conf}"
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"
export LC_ALL=C.UTF-8

MIRROR="$("$TOP/scripts/apt_mirror.sh")"  # PVETUNE_DEBIAN_MIRROR, else this machine's apt sources
CACHE="${PVETUNE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvetune/images}"
IMAGE_REPO="localhost/pvetune-host"
LABEL="org.pvetune.recipe"
DEFAULT_RELEASES=(bookworm trixie)
# zstd is optional on the host (debootstrap only suggests it); gzip -1 is the fallback.
if command -v zstd > /dev/null; then COMPRESS=(zstd -q -T0 -3); EXT=tar.zst
else COMPRESS=(gzip -1); EXT=tar.gz; fi

# ---- recipe -----------------------------------------------------------------------------------
# Packages on top of debootstrap's minbase. Why each is here:
#   python3, python3-apt       Ansible modules (apt/package_facts need python3-apt; offline tests
#                              cannot let the apt module install it on demand)
#   systemd, systemd-sysv, dbus  systemd as PID 1 (`/sbin/init`), systemctl, boot-time units
#   pciutils, kmod, procps     lspci/setpci, modprobe/lsmod/modinfo, sysctl/ps
#   iproute2, sudo             ip; become tests
#   dpkg-dev                   dpkg-scanpackages, so tests can build a local (offline) apt repository
#   lxc                        lxc-* tools for the LXC scenario (Proxmox hosts have lxc-pve); its
#                              services are masked below so systemd boots clean without CAP_NET_ADMIN;
#                              /usr/local/sbin/pvetune-lxchost-init (below) is that scenario's entrypoint
#   corosync, corosync-qdevice, corosync-qnetd   the real votequorum for tests/cluster (a corosync cluster
#                              in containers, 2 nodes + a qnetd arbiter for the qdevice case); the
#                              services are masked below and the package's sample corosync.conf is
#                              removed, so every container is a standalone host (as on Proxmox VE before
#                              `pvecm create`) until tests/cluster/corosync_lab.py writes one and unmasks them
PACKAGES=(
  python3 python3-apt
  systemd systemd-sysv dbus
  pciutils kmod procps
  iproute2 sudo
  dpkg-dev
  lxc
  corosync corosync-qdevice corosync-qnetd
)
# Units that cannot work in an unprivileged container and would leave systemd "degraded", and the cluster
# services, which only tests/cluster starts (after writing the corosync.conf they need).
MASK_UNITS=(lxc.service lxc-net.service lxc-monitord.service
            corosync.service corosync-qdevice.service corosync-qnetd.service)

customize_rootfs() {  # $1 = rootfs directory, $2 = release
  local root="$1" rel="$2" unit
  for unit in "${MASK_UNITS[@]}"; do
    ln -sfn /dev/null "$root/etc/systemd/system/$unit"
  done
  # No cluster until a test makes one (Debian ships a one-node sample; Proxmox VE has none before pvecm create).
  rm -f "$root/etc/corosync/corosync.conf"
  # One mirror line; later tests replace it with a local file: repository when offline.
  printf 'deb %s %s main\n' "$MIRROR" "$rel" > "$root/etc/apt/sources.list"
  # Don't pull recommends into test containers (keeps offline installs predictable).
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    > "$root/etc/apt/apt.conf.d/90pvetune-norecommends"
  # A machine-id is generated per container at boot; an empty file makes systemd do that.
  : > "$root/etc/machine-id"
  rm -f "$root/var/lib/dbus/machine-id"
  echo "pvetune-$rel" > "$root/etc/hostname"
  # Slim: downloaded .debs and apt lists (`apt-get update` restores lists; dpkg status is kept).
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
         "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/* 2>/dev/null || true
  mkdir -p "$root/var/lib/apt/lists/partial"
  install -m 0755 /dev/stdin "$root/usr/local/sbin/pvetune-lxchost-init" <<'INIT'
#!/bin/sh
# Entrypoint for a container that plays a Proxmox VE host running real LXC CTs, with systemd as
# PID 1, on a cgroup v1 machine. Not --privileged; run it as:
#   podman run -d --systemd=false --cgroupns=private --cap-add=SYS_ADMIN \
#     --device-cgroup-rule='c MAJOR:* rwm' IMAGE /usr/local/sbin/pvetune-lxchost-init
# (one --device-cgroup-rule per major a CT may be granted: a v1 devices cgroup cannot pass on more
# than its parent holds, and LXC only warns when an allow line is refused).
# It makes podman's read-only cgroup mounts (the container's own subtree, thanks to the private
# cgroup namespace) writable so LXC can nest CT cgroups, gives systemd fresh /run and /tmp (what
# podman's --systemd mode would do), puts /var/lib/lxc on a tmpfs (an overlay upperdir cannot be
# on overlayfs) and execs systemd. CT configs need `lxc.cgroup.relative = 1` (PID 1 sits in
# /init.scope). --systemd=always is not used: on cgroup v1 it mounts the name=systemd hierarchy
# outside the cgroup namespace, and systemd's units would land in the machine's root cgroup.
set -eu
if ! grep -q '^[0-9]*:devices:/$' /proc/self/cgroup; then
  echo "pvetune-lxchost-init: needs --cgroupns=private (refusing: would expose the machine's cgroups)" >&2
  exit 1
fi
for d in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$d"; done
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /var/lib/lxc
exec /sbin/init "$@"
INIT
}
# ---- end of recipe ----------------------------------------------------------------------------

log() { printf '[build_images %s] %s\n' "$(date +%T)" "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

recipe_hash() {  # $1 = release
  { cat "$SELF"; echo "release=$1 mirror=$MIRROR"; debootstrap --version; } \
    | sha256sum | cut -c1-16
}

image_label() {  # $1 = image; prints the recipe label or nothing
  podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$1" 2>/dev/null || true
}

build_tarball() {  # $1 = release, $2 = tarball path
  local rel="$1" tarball="$2" work rootfs t
  work="$CACHE/work-$rel"
  rootfs="$work/rootfs"
  cleanup_work "$work"
  mkdir -p "$work" "$CACHE/debs/$rel"
  # dpkg fsyncs every file; on a tmpfs that costs nothing (and removing the tree is instant).
  # Needs ~0.5 GB of RAM while building; falls back to the disk when it cannot mount.
  if [[ "${PVETUNE_IMAGE_TMPFS:-1}" == 1 ]] && (( $(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo) > 2048 )) \
     && mount -t tmpfs -o size=2g,mode=0755 pvetune-rootfs "$work" 2> /dev/null; then
    log "$rel: building on a tmpfs"
  fi
  mkdir -p "$rootfs"
  t=$(now)
  log "$rel: debootstrap --variant=minbase ($MIRROR)"
  local include
  include=$(IFS=,; echo "${PACKAGES[*]}")
  if ! debootstrap --variant=minbase --include="$include" --cache-dir="$CACHE/debs/$rel" \
        "$rel" "$rootfs" "$MIRROR" > "$CACHE/debootstrap-$rel.log" 2>&1; then
    tail -n 30 "$CACHE/debootstrap-$rel.log" >&2
    [[ -f "$rootfs/debootstrap/debootstrap.log" ]] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    log "$rel: debootstrap failed (log: $CACHE/debootstrap-$rel.log)"
    return 1
  fi
  log "$rel: debootstrap took $(elapsed "$t")"
  customize_rootfs "$rootfs" "$rel"
  t=$(now)
  # /dev is a tmpfs in every container; leave its contents out of the image.
  tar -C "$rootfs" --numeric-owner --xattrs --xattrs-include='security.capability' \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . \
    | "${COMPRESS[@]}" > "$tarball.tmp"
  mv -f "$tarball.tmp" "$tarball"
  log "$rel: rootfs tarball $(du -h "$tarball" | cut -f1) in $(elapsed "$t")"
  cleanup_work "$work"
}

cleanup_work() {  # $1 = work dir: unmount the tmpfs (if any) and remove what is left
  # Recursively: debootstrap can leave rootfs/proc mounted (seen under load), which makes a plain umount "busy".
  if mountpoint -q "$1"; then umount -R "$1" 2> /dev/null || umount -lR "$1"; fi
  rm -rf "$1"
}

import_release() {  # $1 = release, $2 = hash, $3 = tarball
  local rel="$1" hash="$2" tarball="$3" image="$IMAGE_REPO:$1" t old
  t=$(now)
  podman import --quiet \
    --change "LABEL $LABEL=$hash" \
    --change "LABEL org.pvetune.release=$rel" \
    --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' \
    --change 'CMD ["/sbin/init"]' \
    --message "pvetune host $rel, recipe $hash" \
    "$tarball" "$image" > /dev/null
  log "$rel: imported $image in $(elapsed "$t") ($(podman image inspect --format '{{.Size}}' "$image" \
    | awk '{ printf "%d MB", $1 / 1e6 }'))"
  # Old tarballs of this release (other recipe hashes) and the image they replaced.
  for old in "$CACHE"/rootfs-"$rel"-*.tar.*; do
    [[ "$old" == "$tarball" || ! -e "$old" ]] || rm -f "$old"
  done
  podman image prune --force --filter "label=org.pvetune.release=$rel" > /dev/null 2>&1 || true
}

cleanup_all() {
  local pid w
  for pid in $(jobs -p); do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  for w in "$CACHE"/work-*; do [[ -e "$w" ]] && cleanup_work "$w"; done
  return 0
}

main() {
  FORCE=0
  local print_hash=0 releases=() rel t_all t hash tarball failed=0
  local -A HASH=() TARBALL=() PID=()
  local to_import=()
  while (($#)); do
    case "$1" in
      --force) FORCE=1 ;;
      --print-hash) print_hash=1 ;;
      -h|--help) sed -n '2,26p' "$SELF"; exit 0 ;;
      bookworm|trixie) releases+=("$1") ;;
      *) echo "build_images: unknown argument '$1' (releases: ${DEFAULT_RELEASES[*]})" >&2; exit 2 ;;
    esac
    shift
  done
  ((${#releases[@]})) || releases=("${DEFAULT_RELEASES[@]}")
  if ((print_hash)); then
    for rel in "${releases[@]}"; do echo "$rel $(recipe_hash "$rel")"; done
    exit 0
  fi
  [[ $(id -u) -eq 0 ]] || { echo "build_images: run as root (debootstrap, rootful podman)" >&2; exit 1; }
  local tool
  for tool in debootstrap podman flock mountpoint; do
    command -v "$tool" > /dev/null || { echo "build_images: $tool missing; run scripts/bootstrap.sh containers" >&2; exit 1; }
  done
  mkdir -p "$CACHE"
  # One build at a time (parallel molecule scenarios may all call this script).
  exec 9> "$CACHE/.lock"
  flock 9
  trap cleanup_all EXIT
  t_all=$(now)

  # Plan: up to date / import a cached rootfs / debootstrap (all debootstraps run in parallel).
  for rel in "${releases[@]}"; do
    hash=$(recipe_hash "$rel")
    tarball="$CACHE/rootfs-$rel-$hash.$EXT"
    HASH[$rel]=$hash; TARBALL[$rel]=$tarball
    if ((FORCE == 0)) && podman image exists "$IMAGE_REPO:$rel" \
        && [[ "$(image_label "$IMAGE_REPO:$rel")" == "$hash" ]]; then
      log "$rel: $IMAGE_REPO:$rel is up to date (recipe $hash)"
      continue
    fi
    ((FORCE == 0)) || rm -f "$tarball"
    to_import+=("$rel")
    if [[ -s "$tarball" ]]; then
      log "$rel: using cached rootfs $tarball"
    elif [[ "${PVETUNE_IMAGE_PARALLEL:-1}" == 1 ]]; then
      build_tarball "$rel" "$tarball" & PID[$rel]=$!
    else
      build_tarball "$rel" "$tarball"
    fi
  done
  for rel in "${!PID[@]}"; do
    wait "${PID[$rel]}" || { log "$rel: build failed"; failed=1; }
  done
  ((failed == 0)) || exit 1
  for rel in "${to_import[@]}"; do import_release "$rel" "${HASH[$rel]}" "${TARBALL[$rel]}"; done
  log "done in $(elapsed "$t_all"): $(podman images --filter "reference=$IMAGE_REPO" \
    --format '{{.Repository}}:{{.Tag}} {{.Size}}' | paste -sd ';' | sed 's/;/; /g')"
}

main "$@"
