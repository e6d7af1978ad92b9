"""The demo fleet's GPU CTs at runtime (scripts/demo_fleet.py writes the configs): what a running CT leaves on its
host, laid out as the kernel and pve-container lay it out.

- its cgroup v2 directory /sys/fs/cgroup/lxc/<vmid> (pve-container's lxc.cgroup.dir.container) with the files the
  CT's limits set: cpuset.cpus.effective, cpu.max ("$MAX $PERIOD"), memory.max and memory.swap.max in bytes;
- its init in ns/init.scope/cgroup.procs, and /proc/<pid>/status with the NSpid line of a PID-namespace init;
- /proc/<pid>/root: only the NVIDIA user-space library *names* (empty files, and the .so.1 links), which is all
  collect.yml captures of a CT's root;
- /proc/driver/nvidia/gpus/<bdf>/information (Device Minor = the /dev/nvidiaN the CT configs mount);
- /etc/pve/storage.cfg, so that a stopped CT on ZFS is read in its subvolume.
"""

HOST_DRIVER = "580.95.05"
# The release before it on the 580 branch (NVIDIA's Unix driver archive): a CT not updated with the host.
OLD_DRIVER = "580.82.09"
LIB_DIR = "/usr/lib/x86_64-linux-gnu"

STORAGE_CFG = """\
dir: local
\tpath /var/lib/vz
\tcontent iso,vztmpl,backup

zfspool: local-zfs
\tpool rpool/data
\tsparse
\tcontent images,rootdir
"""

# The information file of the 580 driver (fields as /proc/driver/nvidia/gpus/*/information prints them).
GPU_INFORMATION = """\
Model: \t\t NVIDIA RTX PRO 6000 Blackwell Server Edition
IRQ:   \t\t {irq}
GPU UUID: \t GPU-5f0c2a3e-8d41-4b7a-9c6e-{idx:012x}
Video BIOS: \t 98.02.52.00.06
Bus Type: \t PCIe
DMA Size: \t 52 bits
DMA Mask: \t 0xfffffffffffff
Bus Location: \t {bdf}
Device Minor: \t {idx}
GPU Firmware: \t {driver}
GPU Excluded:\t No
"""

STATUS = """\
Name:\t{name}
Umask:\t0022
State:\tS (sleeping)
Tgid:\t{pid}
Ngid:\t0
Pid:\t{pid}
PPid:\t{ppid}
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
NStgid:\t{pid}\t1
NSpid:\t{pid}\t1
NSpgid:\t{pid}\t1
NSsid:\t{pid}\t1
Threads:\t1
"""

# What each demo host's GPU CTs get: (vmid, running, init pid, cgroup files, user-space driver).
GIB = 1 << 30


def _cg(cpus, quota, mem_mib, swap_mib, pinned=""):
    return {"cpuset.cpus.effective": cpus, "cpuset.cpus": pinned,
            "cpu.max": "%s 100000" % ("max" if quota is None else quota * 100000),
            "cpu.weight": "100", "memory.max": str(mem_mib << 20), "memory.swap.max": str(swap_mib << 20)}


def gpu_information(bdf, idx, driver=HOST_DRIVER):
    return GPU_INFORMATION.format(bdf=bdf, idx=idx, irq=164 + idx * 2, driver=driver)


def write_ct_runtime(t, ctid, pid, files, driver, cuda=None):
    """A running CT: its cgroup, its init's /proc entries and the library names in its root."""
    base = "/sys/fs/cgroup/lxc/%d" % ctid
    for name, value in sorted(files.items()):
        t.write("%s/%s" % (base, name), value + "\n")
    t.write(base + "/ns/init.scope/cgroup.procs", "%d\n" % pid)
    t.write("/proc/%d/status" % pid, STATUS.format(name="systemd", pid=pid, ppid=pid - 3))
    write_libs(t, "/proc/%d/root" % pid, driver, cuda)


# CUDA releases -> (libcudart.so version, libcublas.so version) as the toolkit's lib64 names them.
CUDA_LIBS = {"12.8": ("12.8.90", "12.8.4.1"), "12.4": ("12.4.127", "12.4.5.8")}
CUDA_DIR = "/usr/local/cuda/lib64"


def write_libs(t, root, driver, cuda=None):
    for lib in ("libcuda.so", "libnvidia-ml.so"):
        t.write("%s%s/%s.%s" % (root, LIB_DIR, lib, driver), "")
        t.link("%s%s/%s.1" % (root, LIB_DIR, lib), "%s.%s" % (lib, driver))
    if cuda:
        cudart, cublas = CUDA_LIBS[cuda]
        t.write("%s%s/libcudart.so.%s" % (root, CUDA_DIR, cudart), "")
        t.write("%s%s/libcublas.so.%s" % (root, CUDA_DIR, cublas), "")


# Per host: the CT 101 limits (the case's on pve-gpu01) and its effective cgroup, and extra GPU CTs.
CT101 = {
    # The case's CT: 16 cores placed by pvestatd on socket 0, a CPU quota of 8 and 64 GiB, for 8 GPUs.
    "pve-gpu01": {"limits": {"cores": "16", "cpulimit": "8", "memory": "65536"},
                  "cgroup": _cg("0-7,64-71", 8, 65536, 0)},
    "pve-gpu02": {"cgroup": _cg("0-23,32-55", None, 393216, 0)},
    "pve-gpu03": {"cgroup": _cg("0-23,32-55", None, 393216, 0)},
    "pve-gpu04": {"cgroup": _cg("0-23,32-55", None, 393216, 0)},
    "pve-gpu05": {"cgroup": _cg("0-23,40-63", None, 393216, 0)},
}
CT101_PID = 4127


def ct_config_pinned(ctid, hostname, gpus, cpus):
    """A CT that runs an inference server on four GPUs, its CPUs pinned by a raw cpuset line."""
    lines = ["#vLLM on GPUs %s" % ",".join(str(g) for g in gpus), "arch: amd64", "cores: 32",
             "hostname: %s" % hostname, "memory: 131072",
             "net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:3C:%02X,ip=dhcp,type=veth" % ctid,
             "onboot: 1", "ostype: ubuntu", "rootfs: local-zfs:subvol-%d-disk-0,size=200G" % ctid, "swap: 0",
             "unprivileged: 0", "lxc.cgroup2.cpuset.cpus: %s" % cpus, "lxc.cgroup2.devices.allow: c 195:* rwm",
             "lxc.cgroup2.devices.allow: c 510:* rwm"]
    for g in gpus:
        lines.append("lxc.mount.entry: /dev/nvidia%d dev/nvidia%d none bind,optional,create=file" % (g, g))
    for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        lines.append("lxc.mount.entry: /dev/%s dev/%s none bind,optional,create=file" % (node, node))
    return "\n".join(lines) + "\n"


def write_host_cts(t, host, spec, gpu_bdfs):
    """Everything above for one demo host (the CT configs themselves are written by demo_fleet.write_host)."""
    t.write("/etc/pve/storage.cfg", STORAGE_CFG)
    for idx, bdf in enumerate(gpu_bdfs):
        t.write("/proc/driver/nvidia/gpus/%s/information" % bdf, gpu_information(bdf, idx))
    write_ct_runtime(t, 101, CT101_PID, CT101.get(host, CT101["pve-gpu02"])["cgroup"], HOST_DRIVER,
                     spec.get("ct_cuda", "12.8"))
    if host == "pve-gpu02":
        # CT 103 (devN, GPU 7) is stopped: its libraries are read in its ZFS subvolume.
        write_libs(t, "/rpool/data/subvol-103-disk-0", HOST_DRIVER, "12.8")
    if host == "pve-gpu04":
        # CT 104 uses GPUs 0-3 (node 0) but its cpuset pins it to node 1; CT 105 still runs the user-space driver
        # of the release before the host's.
        pids = running_cts(host)
        write_ct_runtime(t, 104, pids[104], _cg("32-63,96-127", None, 131072, 0, "32-63,96-127"), HOST_DRIVER)
        write_ct_runtime(t, 105, pids[105], _cg("8-15,72-79", None, 65536, 0, "8-15,72-79"), OLD_DRIVER)


def running_cts(host):
    """{vmid: init pid} of a demo host's running GPU CTs."""
    pids = {101: CT101_PID}
    if host == "pve-gpu04":
        pids.update({104: 6020, 105: 5311})
    return pids


def extra_ct_configs(host):
    """{vmid: config text} of the extra GPU CTs of a host."""
    if host == "pve-gpu04":
        return {104: ct_config_pinned(104, "vllm-a", (0, 1, 2, 3), "32-63,96-127"),
                105: ct_config_pinned(105, "embed", (0, 1), "8-15,72-79").replace(
                    "#vLLM on GPUs 0,1", "#Embedding server on GPUs 0,1 (not updated with the host's driver)").replace(
                    "cores: 32", "cores: 8").replace("memory: 131072", "memory: 65536").replace(
                    "size=200G", "size=64G")}
    return {}
