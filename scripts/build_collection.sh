#!/usr/bin/env bash
# Lay the project out as the collection pvetune.gpuhost and build its tarball (`make collection`).
#
#   scripts/build_collection.sh           # build/ansible_collections/pvetune/gpuhost/ and
#                                         # build/dist/pvetune-gpuhost-<version>.tar.gz
#   scripts/build_collection.sh --layout  # the layout only (no tarball)
#
# The one place the collection's layout is made: scripts/ansible_test_sanity.sh runs ansible-test on the tarball
# this builds, tests/collection/test_collection_install.py installs it into a fresh virtualenv.
#
#   library/*.py          -> plugins/modules/        action_plugins/ -> plugins/action/
#   module_utils/pvetune/ -> plugins/module_utils/pvetune/           callback_plugins/ -> plugins/callback/
#   doc_fragments/        -> plugins/doc_fragments/  roles/, playbooks/, docs/, README.md as they are
#   collection/ (galaxy.yml, meta/runtime.yml, CHANGELOG.md) -> the collection's top directory
#
# Python files get their imports rewritten from ansible.module_utils.pvetune to the collection's path (the way
# linux-system-roles converts roles to collections), and the doc fragment and sibling-module names in the module
# docs their FQCN, which validate-modules insists on. Roles and playbooks need no rewrite: inside a collection,
# a short module or role name resolves to that collection first (tests/collection/test_collection_install.py
# runs the playbooks by FQCN with nothing of the project on the paths).
set -euo pipefail
TOP="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
export PATH="$VENV/bin:$PATH"
BUILD="${PVETUNE_BUILD_DIR:-$TOP/build}"
COLL="$BUILD/ansible_collections/pvetune/gpuhost"
DIST="$BUILD/dist"

rm -rf "$COLL"
mkdir -p "$COLL"/plugins/{modules,module_utils,doc_fragments,action,callback}
# collection/: what only the collection has (galaxy.yml, meta/runtime.yml, CHANGELOG.md).
cp -r "$TOP"/collection/. "$TOP/README.md" "$TOP/roles" "$TOP/playbooks" "$TOP/docs" "$COLL/"

rewrite='s/ansible\.module_utils\.pvetune/ansible_collections.pvetune.gpuhost.plugins.module_utils.pvetune/g'
# In the project the doc fragment is `pvetune` (ansible.cfg: doc_fragment_plugins) and a sibling module is
# `pvetune_<name>` (library/: in seealso and M() references); in the collection both need their FQCN.
docnames='/^extends_documentation_fragment:/,/^[^ -]/ s/^(  - )pvetune(\.[a-z_]+)?$/\1pvetune.gpuhost.pvetune\2/
/^seealso:/,/^[^ -]/ s/^(  - module: )(pvetune_[a-z_]+)$/\1pvetune.gpuhost.\2/
s/M\((pvetune_[a-z_]+)\)/M(pvetune.gpuhost.\1)/g'
for f in "$TOP"/library/*.py; do
  sed -E -e "$rewrite" -e "$docnames" "$f" > "$COLL/plugins/modules/$(basename "$f")"
done
copy_rewritten() {  # copy_rewritten SRC_DIR DEST_DIR: every *.py below SRC_DIR, imports rewritten
  (cd "$1" && find . -name '*.py' -not -path '*/__pycache__/*') | while read -r rel; do
    mkdir -p "$2/$(dirname "$rel")"
    sed "$rewrite" "$1/$rel" > "$2/$rel"
  done
}
copy_rewritten "$TOP/doc_fragments" "$COLL/plugins/doc_fragments"
copy_rewritten "$TOP/action_plugins" "$COLL/plugins/action"
copy_rewritten "$TOP/callback_plugins" "$COLL/plugins/callback"
# module_utils/pvetune has sub-packages (core/, formats/, concerns/, tables/): the whole tree.
copy_rewritten "$TOP/module_utils" "$COLL/plugins/module_utils"
find "$COLL" -name __pycache__ -prune -exec rm -rf {} +
if [[ -d "$TOP/tests/sanity" ]]; then mkdir -p "$COLL/tests/sanity"; cp "$TOP"/tests/sanity/*.txt "$COLL/tests/sanity/"; fi

# Nothing may still import the project's path: in the collection that import fails at run time.
if grep -rln --include='*.py' 'ansible\.module_utils\.pvetune' "$COLL/plugins"; then
  echo "build_collection: the files above still name ansible.module_utils.pvetune" >&2
  exit 1
fi
[[ "${1:-}" == --layout ]] && { echo "$COLL"; exit 0; }

mkdir -p "$DIST"
ansible-galaxy collection build "$COLL" --output-path "$DIST" --force >/dev/null
version="$(sed -n 's/^version: *//p' "$TOP/collection/galaxy.yml")"
echo "$DIST/pvetune-gpuhost-$version.tar.gz"
