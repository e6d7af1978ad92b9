#!/usr/bin/env bash
# Set up everything pvetune needs on a fresh Debian machine, idempotently.
#
#   scripts/bootstrap.sh                 # venv + Python deps + collections + base apt packages
#   scripts/bootstrap.sh containers      # ... + podman/runc/lxc/debootstrap for molecule
#   scripts/bootstrap.sh lab             # ... + QEMU lab prerequisites
#   scripts/bootstrap.sh bench           # ... + sshd for the fleet benchmark
#
# Safe to run again: every step checks before it acts. apt runs only for missing
# packages and only as root (CI runs as root); a non-root run says what is missing.
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
PY="${PYTHON:-python3}"

declare -A APT=(
  [base]="pciutils make"
  # fuse3: fusermount3 and libfuse3 for tests/pmxcfs (the pmxcfs-like test filesystem, via mfusepy)
  [containers]="podman runc debootstrap lxc uidmap fuse3 libfuse3-3"
  # What tests/lab/lab.sh deps installs (HOST_PACKAGES there): stock QEMU (GRUB bake, firmware, qemu-img),
  # the guest image tools, and the build deps of the patched QEMU (Debian's qemu source, built by lab.sh build).
  [lab]="qemu-system-x86 qemu-utils debootstrap debian-archive-keyring fdisk acpica-tools seabios ipxe-qemu
         e2fsprogs openssh-client iproute2 xz-utils build-essential ninja-build meson pkg-config python3
         python3-venv libglib2.0-dev libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev dpkg-dev"
  [bench]="openssh-server openssh-client"
)

want_pkgs="${APT[base]}"
for group in "$@"; do
  [[ -n "${APT[$group]:-}" ]] || { echo "bootstrap: unknown group '$group'" >&2; exit 2; }
  want_pkgs+=" ${APT[$group]}"
done

missing=()
for pkg in $want_pkgs; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "bootstrap: missing apt packages (run as root to install): ${missing[*]}" >&2
  else
    echo "bootstrap: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

stamp="$VENV/.pvetune-lock.sha256"
lock_sum="$(sha256sum "$TOP/requirements.lock" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "bootstrap: creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
  echo "bootstrap: installing Python dependencies from requirements.lock"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$TOP/requirements.lock"
  echo "$lock_sum" > "$stamp"
fi

"$VENV/bin/python" "$TOP/scripts/install_collections.py"
