"""Load the malformed-input corpus (tests/fixtures/corpus) and build its trees."""
import json
import os

import hardening_lib as lib

STATE_IGNORED = (".pvetune/calls.log", "var/lib/pvetune", "run")


def cases():
    out = []
    for name in sorted(os.listdir(lib.CORPUS)):
        path = os.path.join(lib.CORPUS, name, "case.json")
        if os.path.isfile(path):
            with open(path) as handle:
                out.append((name, json.load(handle)))
    return out


def build(name, spec, workdir, dest_name=None):
    """A scratch tree for case ``name``: the base host, then remove, overlay, symlinks, modes."""
    tree = lib.scratch(spec["base"], workdir, dest_name or name)
    for rel in spec.get("remove") or []:
        path = os.path.join(tree, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            lib.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    overlay = os.path.join(lib.CORPUS, name, "tree")
    for dirpath, _dirs, files in os.walk(overlay):
        for fname in files:
            src = os.path.join(dirpath, fname)
            rel = os.path.relpath(src, overlay)
            dest = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(src, "rb") as handle:
                data = handle.read()
            with open(dest, "wb") as handle:  # through the tree's own symlinks (sys/bus/pci/devices/...)
                handle.write(data)
    for rel, target in (spec.get("symlinks") or {}).items():
        path = os.path.join(tree, rel)
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(target, path)
    for rel, mode in (spec.get("modes") or {}).items():
        os.chmod(os.path.join(tree, rel), int(mode, 8))
    return tree
