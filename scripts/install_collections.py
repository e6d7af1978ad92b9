#!/usr/bin/env python3
"""Install the collections listed in requirements-dev.yml (the tests' collections) without Ansible Galaxy.

Galaxy is unreachable from the machines this project is built on, but PyPI is
reachable and the ``ansible`` community package ships every collection we use.
This script downloads that wheel once (cached under ~/.cache/pvetune/wheels), and extracts the
named collections into ./collections/ansible_collections/, which ansible.cfg
puts on the collections path.  It checks each extracted collection's version
against the minimum in requirements-dev.yml.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

ANSIBLE_PACKAGE = "ansible==12.3.0"
HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


def read_requirements(path):
    """Return [(name, version spec)] from a requirements file."""
    import yaml  # available in the venv (ansible-core depends on PyYAML)

    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    out = []
    for item in data.get("collections", []):
        if isinstance(item, str):
            item = {"name": item}
        name = item["name"]
        if not re.fullmatch(r"[a-z0-9_]+\.[a-z0-9_]+", name):
            raise SystemExit("bad collection name in %s: %r" % (path, name))
        out.append((name, str(item.get("version", "*"))))
    return out


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", default=os.path.join(TOP, "requirements-dev.yml"))
    parser.add_argument("--dest", default=os.path.join(TOP, "collections"))
    # Outside the clone, so a fresh clone (CI) on this machine does not download the ~45 MB wheel again.
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    parser.add_argument("--cache", default=os.path.join(cache_home, "pvetune", "wheels"))
    args = parser.parse_args()

    wanted = read_requirements(args.requirements)
    stamp = os.path.join(args.dest, ".installed.json")
    state = {"package": ANSIBLE_PACKAGE, "collections": wanted}
    if os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as handle:
            if json.load(handle) == json.loads(json.dumps(state)):
                print("collections: up to date (%s)" % ", ".join(n for n, _ in wanted))
                return 0

    os.makedirs(args.cache, exist_ok=True)
    wheels = [f for f in os.listdir(args.cache) if f.startswith("ansible-12.3.0-") and f.endswith(".whl")]
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", ANSIBLE_PACKAGE, "-d", args.cache],
            check=True,
        )
        wheels = [f for f in os.listdir(args.cache) if f.startswith("ansible-12.3.0-") and f.endswith(".whl")]
    wheel = os.path.join(args.cache, wheels[0])

    root = os.path.join(args.dest, "ansible_collections")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for name, minimum in wanted:
            namespace, coll = name.split(".")
            prefix = "ansible_collections/%s/%s/" % (namespace, coll)
            members = [m for m in names if m.startswith(prefix)]
            if not members:
                raise SystemExit("collection %s is not in %s" % (name, ANSIBLE_PACKAGE))
            target = os.path.join(root, namespace, coll)
            shutil.rmtree(target, ignore_errors=True)
            for member in members:
                archive.extract(member, args.dest)
            manifest = os.path.join(target, "MANIFEST.json")
            with open(manifest, encoding="utf-8") as handle:
                version = json.load(handle)["collection_info"]["version"]
            floor = minimum.lstrip(">=* ")
            if floor and version_tuple(version) < version_tuple(floor):
                raise SystemExit("%s %s is older than required %s" % (name, version, minimum))
            print("collections: %s %s" % (name, version))
    with open(stamp, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
