#!/usr/bin/env bash
# Set up everything pvetune needs on a fresh Debian machine, idempotently.
#
#   scripts/bootstrap.sh runtime         # only what pvetune needs to run (make audit): venv + requirements.lock
#   scripts/bootstrap.sh                 # the development set: venv + requirements-dev.lock + the tests'
#                                        # collections (requirements-dev.yml) + base apt packages
#   scripts/bootstrap.sh containers      # ... + podman/runc/lxc/debootstrap for molecule
#   scripts/bootstrap.sh lab             # ... + QEMU lab prerequisites
#   scripts/bootstrap.sh bench           # ... + sshd for the fleet benchmark
#
# The development set contains the run time (requirements-dev.lock pins every package of requirements.lock the
# same way), so a development venv also serves `make audit` without a reinstall.
# Safe to run again: every step checks before it acts. apt runs only for missing
# packages and only as root (CI runs as root); a non-root run says what is missing.
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
PY="${PYTHON:-python3}"

declare -A APT=(
  # nodejs: runs audit.html's filter script in tests/unit/test_report_scale.py. promtool is not an apt package here:
  # Debian ships it only inside the Prometheus server package, whose postinst enables and starts a server on :9090
  # and which pulls a dozen JS libraries; the development set takes the one binary out of that .deb (below).
  [base]="pciutils make nodejs"
  # fuse3: fusermount3 and libfuse3 for tests/pmxcfs (the pmxcfs-like test filesystem, via mfusepy)
  [containers]="podman runc debootstrap lxc uidmap fuse3 libfuse3-3"
  # What tests/lab/lab.sh deps installs (HOST_PACKAGES there): stock QEMU (GRUB bake, firmware, qemu-img),
  # the guest image tools, and the build deps of the patched QEMU (Debian's qemu source, built by lab.sh build).
  [lab]="qemu-system-x86 qemu-utils debootstrap debian-archive-keyring fdisk acpica-tools seabios ipxe-qemu
         e2fsprogs openssh-client iproute2 xz-utils build-essential ninja-build meson pkg-config python3
         python3-venv libglib2.0-dev libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev dpkg-dev"
  [bench]="openssh-server openssh-client"
)

PYSET=dev
groups=()
for group in "$@"; do
  if [[ "$group" == runtime ]]; then PYSET=runtime; continue; fi
  [[ -n "${APT[$group]:-}" ]] || { echo "bootstrap: unknown group '$group'" >&2; exit 2; }
  groups+=("$group")
done
# The run time needs no apt package on the controller (base's pciutils is for setpci on the tests' trees).
want_pkgs=""
if [[ $PYSET == dev ]]; then want_pkgs="${APT[base]}"; fi
for group in "${groups[@]}"; do want_pkgs+=" ${APT[$group]}"; done

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

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "bootstrap: creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
# One stamp per lock file: the sha256 of the lock the venv was last brought up to.
lock_current() {  # lock_current NAME: the venv has NAME's packages as NAME pins them now
  [[ -f "$VENV/.pvetune-$1.sha256" && "$(cat "$VENV/.pvetune-$1.sha256")" == "$(sha256sum "$TOP/$1" | cut -d' ' -f1)" ]]
}
install_lock() {  # install_lock NAME
  lock_current "$1" && return 0
  echo "bootstrap: installing Python dependencies from $1"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$TOP/$1"
  sha256sum "$TOP/$1" | cut -d' ' -f1 > "$VENV/.pvetune-$1.sha256"
}
if [[ $PYSET == runtime ]]; then
  lock_current requirements-dev.lock || install_lock requirements.lock
else
  install_lock requirements-dev.lock
  # The tests' collections (none is needed at run time).
  "$VENV/bin/python" "$TOP/scripts/install_collections.py"
fi

# promtool (tests/promtool.py: `promtool check metrics` on the metrics pvetune writes) into the venv, from the
# Debian prometheus package of this machine's apt sources without installing it: apt-get download needs no root,
# and the binary needs only libc. Nothing of the package runs.
install_promtool() {
  [[ -x "$VENV/bin/promtool" ]] && return 0
  local tmp; tmp="$(mktemp -d)"
  if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
    if [[ $(id -u) -eq 0 ]]; then apt-get update -qq; fi
    if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null); then
      rm -rf "$tmp"
      echo "bootstrap: could not download Debian's prometheus package for promtool" >&2
      # As root (make test, CI) that is an error; a non-root run only says what is missing, as for apt packages
      # above, and the metrics tests skip without promtool (tests/promtool.py).
      if [[ $(id -u) -eq 0 ]]; then return 1; fi
      return 0
    fi
  fi
  echo "bootstrap: promtool from $(basename "$tmp"/prometheus_*.deb) into $VENV/bin"
  dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool > "$VENV/bin/promtool.part"
  chmod 0755 "$VENV/bin/promtool.part" && mv "$VENV/bin/promtool.part" "$VENV/bin/promtool"
  rm -rf "$tmp"
}
if [[ $PYSET == dev ]]; then install_promtool; fi

# The tests' compile cache (tests/zipcode.py): the modules of every playbook the tests run import their code from
# Ansible's zip and compile it at every task; this venv's Python keeps the compiled code instead (same code, ~1/3
# less CPU per playbook run). Development set only; PVETUNE_ZIPCODE=0 turns it off for one command.
install_zipcode() {
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  cmp -s "$TOP/tests/zipcode.py" "$site/pvetune_zipcode.py" && [[ -f "$site/pvetune_zipcode.pth" ]] && return 0
  cp "$TOP/tests/zipcode.py" "$site/pvetune_zipcode.py.part" && mv "$site/pvetune_zipcode.py.part" "$site/pvetune_zipcode.py"
  echo "import pvetune_zipcode" > "$site/pvetune_zipcode.pth"
}
if [[ $PYSET == dev ]]; then install_zipcode; fi
