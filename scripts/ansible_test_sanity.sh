#!/usr/bin/env bash
# Run `ansible-test sanity` on pvetune's modules and module_utils.
#
# ansible-test only works on a collection, so this lays the project's library/,
# module_utils/ and doc_fragments/ out as the collection pvetune.gpuhost under
# build/ (imports rewritten from ansible.module_utils.pvetune to the collection
# path, the way linux-system-roles converts roles to collections; the doc
# fragment and sibling-module names in the module docs rewritten to their FQCN)
# and runs ansible-test there.
# ansible-test wants to fetch get-pip from the network, which is unreachable
# here: a local stand-in bootstraps pip with ensurepip instead.
#
#   scripts/ansible_test_sanity.sh                 # all sanity tests that apply
#   scripts/ansible_test_sanity.sh --test validate-modules
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
export PATH="$VENV/bin:$PATH"
COLL="$TOP/build/ansible_collections/pvetune/gpuhost"
PYVER="$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

rm -rf "$COLL"
mkdir -p "$COLL/plugins/modules" "$COLL/plugins/module_utils" "$COLL/plugins/doc_fragments" "$COLL/meta"
cat > "$COLL/galaxy.yml" <<'YML'
namespace: pvetune
name: gpuhost
version: 0.1.0
readme: README.md
authors: [pvetune contributors]
description: Audit and fix Proxmox VE GPU host performance settings (build artefact for ansible-test)
license: [GPL-3.0-or-later]
YML
printf -- '---\nrequires_ansible: ">=2.19.0"\n' > "$COLL/meta/runtime.yml"
echo "build artefact of scripts/ansible_test_sanity.sh" > "$COLL/README.md"
rewrite='s/ansible\.module_utils\.pvetune/ansible_collections.pvetune.gpuhost.plugins.module_utils.pvetune/g'
# In the project the doc fragment is `pvetune` (ansible.cfg: doc_fragment_plugins) and a sibling module is
# `pvetune_<name>` (library/); in the collection both need their FQCN, which validate-modules insists on.
docnames='/^extends_documentation_fragment:/,/^[^ -]/ s/^(  - )pvetune(\.[a-z_]+)?$/\1pvetune.gpuhost.pvetune\2/
/^seealso:/,/^[^ -]/ s/^(  - module: )(pvetune_[a-z_]+)$/\1pvetune.gpuhost.\2/'
for f in "$TOP"/library/*.py; do
  sed -E -e "$rewrite" -e "$docnames" "$f" > "$COLL/plugins/modules/$(basename "$f")"
done
for f in "$TOP"/doc_fragments/*.py; do sed "$rewrite" "$f" > "$COLL/plugins/doc_fragments/$(basename "$f")"; done
# The stdout callback (callback_plugins/) is a plugin with documentation too.
mkdir -p "$COLL/plugins/callback"
for f in "$TOP"/callback_plugins/*.py; do sed "$rewrite" "$f" > "$COLL/plugins/callback/$(basename "$f")"; done
# module_utils/pvetune has sub-packages (core/, formats/, concerns/): copy the whole tree.
(cd "$TOP/module_utils" && find pvetune -name '*.py') | while read -r rel; do
  mkdir -p "$COLL/plugins/module_utils/$(dirname "$rel")"
  sed "$rewrite" "$TOP/module_utils/$rel" > "$COLL/plugins/module_utils/$rel"
done
if [[ -d "$TOP/tests/sanity" ]]; then mkdir -p "$COLL/tests/sanity"; cp "$TOP"/tests/sanity/*.txt "$COLL/tests/sanity/"; fi

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
