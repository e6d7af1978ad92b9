#!/usr/bin/env python3
"""Build the seed of a simulated Proxmox VE GPU host for the Molecule scenarios (runs on the controller).

  build_seed.py --variant grub|sdboot --out SEED.tar.gz

The seed is one tarball with two parts, unpacked in the host container by `pvetune-sim install`:

  tree/      the host's persistent files, copied to the tree pvetune works on (pvetune_root,
             /srv/pvetune-sim): /etc (GRUB or systemd-boot config, /etc/pve CT configs, sysctl),
             /boot, /lib/modules, the stand-ins in .pvetune/bin, and what real apt/dpkg need
             (/etc/apt with a file: repository, an empty /var/lib/dpkg/status);
  seed/      what the simulated kernel lays out at every boot (pvetune-sim boot):
             runtime-base.tar  /sys and /proc of the host, without the CPU parts;
             runtime-cpu-<driver>-c<max>.tar  the CPU parts (cpufreq policies, cpuidle states,
               processor.max_cstate) for the two cpufreq drivers and the two C-state limits the
               kernel command line can select;
             sim.json          root, boot loader, NVIDIA majors of the first boot, GPU count.

Variants:
  grub    demo/snapshots/pve-gpu01 as generated: the reference host before the fix, plain GRUB.
  sdboot  pve-gpu04: the same hardware and "before" state (scripts/demo_fleet.py HOSTS["pve-gpu01"]),
          installed on ZFS with UEFI, so proxmox-boot-tool manages a systemd-boot ESP (the
          simulated ESP <tree>/boot/efi-sim is initialised with the proxmox-boot-tool stand-in).

/dev/nvidia* is not part of the seed: real device nodes are made with mknod at every boot, with the
majors of that boot (so pvetune's stat_dev_nodes reads real nodes; .pvetune/dev_nvidia.ls is dropped).
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import demo_fleet  # noqa: E402  (needs the venv: it builds PCI config spaces with pvetune's module_utils)
import scratch_host  # noqa: E402

ROOT = "/srv/pvetune-sim"
APT_ARCHIVE = "/srv/pvetune-apt"
RUNTIME_DIRS = ("sys", "proc", "dev", "run")
# The CPU part of /sys: what write_cpu_sysfs() writes, regenerated per cpufreq driver / C-state limit.
CPU_PARTS = ("sys/devices/system/cpu", "sys/devices/system/node", "sys/module/processor")
# States the kernel shows for each processor.max_cstate limit (the ACPI table of pve-gpu01 has C1, C2).
STATES = {
    "c8": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2),
           ("C2", "ACPI IOPORT 0x814", 400, 800)],
    "c1": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2)],
}
# Runtime defaults of each cpufreq driver at boot (before anything sets them): acpi-cpufreq as
# pve-gpu01 was found; amd-pstate-epp with the kernel's defaults (governor powersave, EPP
# balance_performance), so only pvetune's boot-time re-application makes them "performance".
CPUFREQ = {
    "acpi-cpufreq": {"cpufreq": "acpi-cpufreq", "amd_pstate_status": None, "governor": "performance", "epp": None},
    # 6.14 (what the fix boots): amd-pstate's per-policy boost files, off as the host's firmware left boost
    # (pve-gpu01's "boost": "0"), so only pvetune-cpufreq.service turns it on.
    "amd-pstate-epp": {"cpufreq": "amd-pstate-epp", "amd_pstate_status": "active", "governor": "powersave",
                       "epp": "balance_performance", "kernel": "6.14.8-2-pve"},
}


def sdboot_spec():
    spec = copy.deepcopy(demo_fleet.HOSTS["pve-gpu01"])
    spec.update({
        "loader": "systemd-boot",
        "cmdline": ("initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img-6.8.12-4-pve root=ZFS=rpool/ROOT/pve-1 "
                    "boot=zfs"),
        "kernel_cmdline_file": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n",
        "zfs_root": True,
        "pin": "6.8.12-4-pve",   # write_host() needs one for systemd-boot; removed below (no pin before the fix)
    })
    return spec


def run_standin(tree, name, *args):
    env = dict(os.environ, PVETUNE_ROOT=tree)
    subprocess.run([os.path.join(tree, ".pvetune", "bin", name)] + list(args), env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def build_tree(variant, tree):
    if variant == "grub":
        host, spec = "pve-gpu01", demo_fleet.HOSTS["pve-gpu01"]
        shutil.copytree(os.path.join(TOP, "demo", "snapshots", host), tree, symlinks=True)
    else:
        host, spec = "pve-gpu04", sdboot_spec()
        os.makedirs(tree)
        demo_fleet.write_host(demo_fleet.Tree(tree), host, spec)
        os.unlink(os.path.join(tree, "etc/kernel/proxmox-boot-pin"))
    scratch_host.install_standins(tree)
    if variant == "sdboot":
        # The ESP as `proxmox-boot-tool init` + `refresh` leave it: one loader entry per kernel.
        run_standin(tree, "proxmox-boot-tool", "refresh")
    for name in ("calls.log", "dev_nvidia.ls", "pct-state.json"):
        path = os.path.join(tree, ".pvetune", name)
        if os.path.exists(path):
            os.unlink(path)
    with open(os.path.join(tree, ".pvetune", "snapshot.json"), "w") as handle:
        json.dump({"host": host, "collected_at": demo_fleet.COLLECTED_AT,
                   "collector": "molecule/resources/sim/build_seed.py",
                   "note": "simulated Proxmox VE GPU host (Molecule): /sys, /proc and /dev are regenerated at "
                           "every boot of the container by pvetune-sim", "state": "before"},
                  handle, indent=2, sort_keys=True)
        handle.write("\n")
    # Real apt and dpkg work on the tree (tests/standins/apt-get uses them when var/lib/dpkg/status exists).
    for d in ("etc/apt/apt.conf.d", "etc/apt/preferences.d", "etc/apt/trusted.gpg.d", "etc/apt/sources.list.d",
              "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg/info",
              "var/lib/dpkg/updates", "var/log/apt"):
        os.makedirs(os.path.join(tree, d), exist_ok=True)
    with open(os.path.join(tree, "etc/apt/sources.list.d/pve-sim.list"), "w") as handle:
        handle.write("# The Proxmox VE archive of the simulation: stand-in kernel packages built by\n"
                     "# `pvetune-sim apt-repo` in the host container.\n"
                     "deb [trusted=yes] file:%s ./\n" % APT_ARCHIVE)
    open(os.path.join(tree, "var/lib/dpkg/status"), "w").close()
    return host, spec


def cpu_variant(spec, driver, cstates, dest):
    s = copy.deepcopy(spec)
    s.update(CPUFREQ[driver])
    s["states"] = STATES[cstates]
    s["max_cstate"] = "1" if cstates == "c1" else "8"
    demo_fleet.write_cpu_sysfs(demo_fleet.Tree(dest), s)


def tar_dirs(out, base, names, compress=False):
    """GNU tar of base/<name> for each name (tarfile is ~20x slower for 30,000 small files)."""
    cmd = ["tar", "--numeric-owner", "--owner=0", "--group=0", "-C", base, "-cf", out] + list(names)
    if compress:
        cmd[1:1] = ["-I", "gzip -1"]
    subprocess.run(cmd, check=True)


def build(variant, out):
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="pvetune-seed-", dir=base)
    try:
        tree = os.path.join(work, "tree")
        host, spec = build_tree(variant, tree)
        seed = os.path.join(work, "seed")
        os.makedirs(seed)
        # /sys and /proc without the CPU parts: the base every boot starts from.
        for part in CPU_PARTS:
            shutil.rmtree(os.path.join(tree, part))
        tar_dirs(os.path.join(seed, "runtime-base.tar"), tree, ["sys", "proc"])
        for d in ("sys", "proc", "dev", "run"):
            if os.path.lexists(os.path.join(tree, d)):
                shutil.rmtree(os.path.join(tree, d))
        variants = []
        for driver in CPUFREQ:
            for cstates in STATES:
                dest = os.path.join(work, "cpu-%s-%s" % (driver, cstates))
                cpu_variant(spec, driver, cstates, dest)
                name = "runtime-cpu-%s-%s.tar" % (driver, cstates)
                tar_dirs(os.path.join(seed, name), dest, ["sys"])
                variants.append(name)
        sim = {
            "root": ROOT,
            "host": host,
            "variant": variant,
            "loader": "grub" if spec["loader"] == "grub" else "systemd-boot",
            "gpus": len(demo_fleet.GPU_SLOTS),
            "majors": {"nvidia": 195, "nvidia-uvm": spec["uvm_major"], "nvidia-caps": spec["caps_major"],
                       "nvidia-nvlink": spec["nvlink_major"], "nvidia-caps-imex-channels": 506},
            "apt_archive": APT_ARCHIVE,
            "runtime": variants,
        }
        with open(os.path.join(seed, "sim.json"), "w") as handle:
            json.dump(sim, handle, indent=2, sort_keys=True)
            handle.write("\n")
        tmp = out + ".tmp"
        tar_dirs(tmp, work, ["tree", "seed"], compress=True)
        os.replace(tmp, out)
        return sim
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("grub", "sdboot"), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sim = build(args.variant, os.path.abspath(args.out))
    print(json.dumps({"out": os.path.abspath(args.out), "host": sim["host"], "loader": sim["loader"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
