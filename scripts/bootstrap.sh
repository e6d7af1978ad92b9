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
  [containers]="podman runc debootstrap lxc uidmap fuse3"
  [lab]="qemu-system-x86 qemu-utils debootstrap fdisk acpica-tools seabios ipxe-qemu openssh-client e2fsprogs"
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
