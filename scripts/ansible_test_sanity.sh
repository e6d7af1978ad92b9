#!/usr/bin/env bash
# Run `ansible-test sanity` on the collection pvetune.gpuhost: the tarball scripts/build_collection.sh builds
# (modules, module_utils, action, callback and doc fragment plugins, roles, playbooks), installed under
# build/sanity/ansible_collections/pvetune/gpuhost.
# ansible-test wants to fetch get-pip from the network, which is unreachable
# here: a local stand-in bootstraps pip with ensurepip instead.
#
#   scripts/ansible_test_sanity.sh                 # all sanity tests that apply
#   scripts/ansible_test_sanity.sh --test validate-modules
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
export PATH="$VENV/bin:$PATH"
PYVER="$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# The artefact, as users get it: the tarball `make collection` builds, installed where ansible-test wants it.
tarball="$("$TOP/scripts/build_collection.sh")"
SANITY="$TOP/build/sanity"
COLL="$SANITY/ansible_collections/pvetune/gpuhost"
rm -rf "$SANITY"
ANSIBLE_COLLECTIONS_PATH="$SANITY" ansible-galaxy collection install "$tarball" -p "$SANITY" --force >/dev/null

# get-pip stand-in (ansible-test caches it under this name; the real one comes from an unreachable host).
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
for name in get_pip_24_2.py get_pip_25_1_1.py get_pip_25_2.py get_pip_25_3.py; do
  cat > "$cache/$name" <<'PY'
# Stand-in for get-pip.py (no network): bootstrap pip with ensurepip, then install what was asked.
import subprocess, sys
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + args)
PY
done

cd "$COLL"
git init -q . 2>/dev/null || true
git add -A . >/dev/null 2>&1 || true
set -x
ansible-test sanity --local --python "$PYVER" "$@"
