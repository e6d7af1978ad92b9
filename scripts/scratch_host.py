#!/usr/bin/env python3
"""Make a scratch copy of a demo host that the fix can run on without touching this machine.

  scripts/scratch_host.py pve-gpu01 /tmp/scratch/pve-gpu01 [--force]

Copies demo/snapshots/<host> to DEST (symlinks kept) and installs the
stand-in tools from tests/standins/ into DEST/.pvetune/bin, where the fix
modules look for commands when their root is not "/".  install_runtime() is
the installer run on a tree (scripts/demo_fleet.py uses it for pve-gpu02, the
host after the fix).  Prints DEST.
"""
import argparse
import os
import shutil
import stat
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(TOP, "demo", "snapshots")
STANDINS = os.path.join(TOP, "tests", "standins")


def install_standins(dest):
    bindir = os.path.join(dest, ".pvetune", "bin")
    os.makedirs(bindir, exist_ok=True)
    for name in sorted(os.listdir(STANDINS)):
        src = os.path.join(STANDINS, name)
        if not os.path.isfile(src) or name.startswith((".", "_")) or name.endswith((".md", ".py")):
            continue
        target = os.path.join(bindir, name)
        shutil.copyfile(src, target)
        os.chmod(target, os.stat(target).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


RUNTIME_MANIFEST = "/usr/local/lib/pvetune/MANIFEST.json"  # bootunits.MANIFEST (checked by test_demo_expected)


def install_runtime(dest):
    """Install the runtime library and the boot helper into DEST with the real installer
    (bootunits.plan_install, as pvetune_runtime runs it), not recorded for rollback: the tree stands for
    a host an earlier fix run installed it on.  Returns the host paths written."""
    import ansible.module_utils

    module_utils = os.path.join(TOP, "module_utils")
    if module_utils not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(module_utils)
    from ansible.module_utils.pvetune.boot import units as bootunits
    from ansible.module_utils.pvetune.core.changeset import ChangeSet
    from ansible.module_utils.pvetune.core.fsroot import FsRoot

    plan = ChangeSet(FsRoot(dest), check_mode=True, run_id="scratch")
    bootunits.plan_install(plan, [], {})
    for item in plan.files:
        real = os.path.join(dest, item["path"].lstrip("/"))
        if item["remove"]:
            os.unlink(real)
            continue
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as handle:
            handle.write(item["after"])
        os.chmod(real, item["mode"] or 0o644)
    return [item["path"] for item in plan.files]


def make_scratch(host, dest, force=False):
    src = os.path.join(DEMO, host)
    if not os.path.isdir(src):
        raise SystemExit("no demo host %s in %s" % (host, DEMO))
    if os.path.lexists(dest):
        if not force:
            raise SystemExit("%s exists (use --force to replace it)" % dest)
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True)
    install_standins(dest)
    write_apt_repo(dest)
    boot_containers(dest)
    return dest


def boot_containers(dest):
    """Let the pct stand-in "boot" the host once (start onboot CTs, as pve-guests.service would),
    so that the tree is in a steady state before anything is measured against it."""
    import subprocess

    env = dict(os.environ, PVETUNE_ROOT=dest)
    subprocess.run([os.path.join(dest, ".pvetune", "bin", "pct"), "list"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = os.path.join(dest, ".pvetune", "calls.log")
    if os.path.exists(log):
        os.unlink(log)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("dest")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    print(make_scratch(args.host, os.path.abspath(args.dest), args.force))
    return 0


# Appended by the boot/kernel fix work: the "archive" the apt-get stand-in installs from.
DEFAULT_APT_REPO = {"proxmox-kernel-6.14": ["6.14.8-2-pve"]}


# What fix.yml's kernel fix installs through the apt-get stand-in (pve-gpu01's 6.14: KERNEL_FILES, the package's files)
# and rollback keeps (it may be the running kernel: KEPT_KERNEL, those, their directory and the grub.cfg that lists
# it). The kernel, integration and hardening tests compare on them.
KERNEL_FILES = ["boot/vmlinuz-6.14.8-2-pve", "boot/initrd.img-6.14.8-2-pve", "boot/initrd.img-6.14.8-2-pve.modprobe.d",
                "boot/config-6.14.8-2-pve", "lib/modules/6.14.8-2-pve/modules.dep"]
KEPT_KERNEL = sorted(KERNEL_FILES + ["boot/grub/grub.cfg", "lib/modules/6.14.8-2-pve"])


def write_apt_repo(dest, packages=None):
    """Write DEST/.pvetune/apt-repo.json (package -> kernel ABI versions) for tests/standins/apt-get."""
    import json
    path = os.path.join(dest, ".pvetune", "apt-repo.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(DEFAULT_APT_REPO if packages is None else packages, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
