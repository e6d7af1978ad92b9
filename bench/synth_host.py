#!/usr/bin/env python3
"""Build the large synthetic host for the facts-module micro-benchmark.

2 sockets x 64 cores x 2 threads = 256 CPUs (cpufreq policy and 3 cpuidle states
each), 8 NVIDIA GPUs behind 4 PCIe switches (pve-gpu04's layout), 40 Proxmox CT configs.

Reuses scripts/demo_fleet.py's building blocks (Tree, write_host, the CT config
writers, pve-gpu01's host spec: the "before the fix" case, so every check has
work to do).  demo_fleet.py is imported, never modified: its CPU writers take a
CPU count but hard-code the 128-CPU topology, so the few topology helpers are
replaced in the imported module object for the duration of the build.

Usage: bench/synth_host.py DEST   (DEST is replaced)
"""

import os
import shutil
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import demo_fleet  # noqa: E402  (also makes ansible.module_utils.pvetune importable)
import demo_cts  # noqa: E402  (scripts/, on the path demo_fleet set up)

SOCKETS, CORES, THREADS = 2, 64, 2
NCPU = SOCKETS * CORES * THREADS  # 256
N_CTS = 40
LIB_ENTRIES = 1500
HOST = "pve-synth256"


def build(dest):
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    # pve-gpu04's PCIe side (8 GPUs behind 4 switches: 16 bridges with ACS, Resizable BAR, pci.ids names).
    spec = dict(demo_fleet.HOSTS["pve-gpu04"])
    # The demo's EPYC layout, grown to 2 x 64 cores x 2 threads (demo_fleet reads LAYOUTS for every CPU file).
    saved = dict(demo_fleet.LAYOUTS["epyc"])
    try:
        demo_fleet.LAYOUTS["epyc"].update(ncpu=NCPU, cores=CORES)
        t = demo_fleet.Tree(dest)
        demo_fleet.write_host(t, HOST, spec)
    finally:
        demo_fleet.LAYOUTS["epyc"].clear()
        demo_fleet.LAYOUTS["epyc"].update(saved)
    cpus = "0-%d" % (NCPU - 1)
    for node in range(SOCKETS):
        lo, hi = node * CORES, (node + 1) * CORES - 1
        t.write("/sys/devices/system/node/node%d/cpulist" % node,
                "%d-%d,%d-%d\n" % (lo, hi, lo + SOCKETS * CORES, hi + SOCKETS * CORES))
    t.write("/sys/devices/system/cpu/online", cpus + "\n")
    # 40 CTs: 101 and 102 come from write_host; add GPU, device-passthrough and plain CTs up to 40.
    lxc = "/etc/pve/nodes/%s/lxc" % HOST
    for i in range(N_CTS - 2):
        ctid = 103 + i
        if i % 4 == 0:
            text = demo_fleet.ct_config_gpu(ctid, "llm%d" % ctid, spec["ct_uvm_major"])
            # Running, as GPU CTs are: its cgroup, its init and a library directory of a real size (an Ubuntu
            # /usr/lib/x86_64-linux-gnu holds ~1500 entries), which the coherence check lists.
            pid = 20000 + ctid
            demo_cts.write_ct_runtime(t, ctid, pid, demo_cts.CT101["pve-gpu02"]["cgroup"], demo_cts.HOST_DRIVER)
            for n in range(LIB_ENTRIES):
                t.write("/proc/%d/root%s/libsynth%04d.so.1" % (pid, demo_cts.LIB_DIR, n), "")
        elif i % 4 == 1:
            text = demo_fleet.ct_config_devn(ctid, "jupyter%d" % ctid)
        else:
            text = demo_fleet.ct_config_plain(ctid, "svc%d" % ctid)
        t.write("%s/%d.conf" % (lxc, ctid), text)
    return dest


def describe(dest):
    cpu_dir = os.path.join(dest, "sys/devices/system/cpu")
    cpus = [n for n in os.listdir(cpu_dir) if n.startswith("cpu") and n[3:].isdigit()]
    states = len(os.listdir(os.path.join(cpu_dir, "cpu0", "cpuidle")))
    gpus = bridges = 0
    pdir = os.path.join(dest, "sys/bus/pci/devices")
    for name in os.listdir(pdir):
        with open(os.path.join(pdir, name, "class")) as handle:
            cls = handle.read().strip()
        gpus += cls.startswith("0x03")
        bridges += cls.startswith("0x0604")
    cts = len([n for n in os.listdir(os.path.join(dest, "etc/pve/nodes", HOST, "lxc")) if n.endswith(".conf")])
    files = sum(len(f) for _, _, f in os.walk(dest))
    return {"cpus": len(cpus), "cpuidle_states_per_cpu": states, "gpus": gpus, "bridges": bridges,
            "ct_configs": cts, "files": files}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(sys.argv[1])
    print(describe(sys.argv[1]))
