#!/usr/bin/env python3
"""Generate the demo fleet's snapshot trees (demo/snapshots/<host>/).

Three Proxmox VE hosts with 2x AMD EPYC 9335 (128 CPUs) and 8 NVIDIA RTX PRO
6000 Blackwell Server Edition GPUs, laid out exactly like the real files:
sysfs directories and symlinks, binary PCI config spaces with real capability
chains (build_config), /proc files, /etc files and Proxmox CT configs.

  pve-gpu01  the reference case before the fix (acpi-cpufreq, deep C-states,
             numa_balancing=1, kernel 6.8.12, MaxReadReq 512, GRUB without the
             boot args, a GPU CT whose allow line names an old nvidia-uvm major)
  pve-gpu02  the same host after the fix, booted with systemd-boot (ZFS on UEFI)
  pve-gpu03  half done: boot args and kernel pin configured but not rebooted,
             amd-pstate in passive mode
  pve-gpu04  the PCIe side: 8 GPUs behind 4 PCIe switches (Broadcom PEX890xx ids, the capability chain of
             the real PLX PEX 8747/8749 ports), ACS redirect set on the switch ports, GPU 5's BAR1 at 256MB of
             128GB, the IOMMU translating (DMA); CPU, kernel, sysctl and CTs right
  pve-gpu05  an Intel host: 2x Xeon Platinum 8460H (160 CPUs), the same 8 GPUs, GRUB;
             kernel, sysctl, PCIe and CTs right, but intel_pstate in powersave with EPP
             balance_performance and intel_idle with C1E and C6 enabled (cpuinfo, cpufreq and
             cpuidle values from tests/fixtures/realdata/intel, real Sapphire Rapids sysfs)

What the fix leaves on pve-gpu02 (units, settings, sysctl drop-in, state) is
written here literally, not by pvetune's renderers (tests/unit/test_demo_expected.py
compares the two).  Its runtime library is installed by the real installer
(scripts/scratch_host.install_runtime), so `fix.yml --check` there has nothing to do.

The trees are generated, not tracked: `--ensure` (make audit, make test,
scripts/run_tests.sh and every pytest run call it) builds them when they are
missing or when a file the generator read has changed since (the digests in
demo/snapshots.generated.json), in seconds, the hosts in parallel.  `--check`
regenerates into a temporary directory and fails if anything differs (the
generator is deterministic; a unit test runs it).

Usage: scripts/demo_fleet.py [--out DIR] [--ensure | --check] [--hosts a,b]
"""

import argparse
import fcntl
import filecmp
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import modharness  # noqa: E402,F401  (makes ansible.module_utils.pvetune importable; no pytest needed)
import demo_cts  # noqa: E402
import demo_platform  # noqa: E402
from pcibuild import build_config  # noqa: E402
from scratch_host import install_runtime  # noqa: E402

DEFAULT_OUT = os.path.join(TOP, "demo", "snapshots")
COLLECTED_AT = "2026-11-20T09:30:00Z"

# Eight GPUs, one per EPYC root complex quadrant: socket 0 -> NUMA node 0, socket 1 -> node 1.
# (root bus, root port device.function, GPU bus)
GPU_SLOTS = [
    ("00", "01.1", "01"), ("20", "01.1", "21"), ("40", "01.1", "41"), ("60", "01.1", "61"),
    ("80", "01.1", "81"), ("a0", "01.1", "a1"), ("c0", "01.1", "c1"), ("e0", "01.1", "e1"),
]
GPU_DEVICE_ID = 0x2BB5  # RTX PRO 6000 Blackwell Server Edition
GPU_SUBSYS = (0x10DE, 0x204E)
ROOT_PORT_ID = {"epyc": (0x1022, 0x14AB),  # AMD Turin/Genoa GPP bridge
                "xeon": (0x8086, 0x352A)}  # Intel; the device id is a stand-in (no check reads it)
INTEL_DIR = os.path.join(TOP, "tests", "fixtures", "realdata", "intel")

# CPU numbering as Linux enumerates it: every core of socket 0, of socket 1, then their SMT siblings.
LAYOUTS = {"epyc": {"ncpu": 128, "cores": 32}, "xeon": {"ncpu": 160, "cores": 40}}


def node_cpulist(spec, node):
    cores = LAYOUTS[spec["cpu"]]["cores"]
    return "%d-%d,%d-%d" % (node * cores, node * cores + cores - 1, 2 * cores + node * cores,
                            2 * cores + node * cores + cores - 1)


def intel_fixture(name, prefix=None):
    """The real lines of tests/fixtures/realdata/intel/<name> (source comments dropped); with ``prefix``,
    {path relative to prefix: value} of its ``rw|<path>|<value>`` sysfs lines."""
    with open(os.path.join(INTEL_DIR, name)) as handle:
        lines = [ln.rstrip("\n") for ln in handle if not ln.startswith("# ")]
    if prefix is None:
        return lines
    out = {}
    for line in lines:
        _rw, path, value = line.split("|", 2)
        if path.startswith(prefix):
            out[path[len(prefix):]] = value
    return out

EPYC_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
    "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid "
    "extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
    "aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch "
    "osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 "
    "hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase tsc_adjust bmi1 avx2 smep "
    "bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni "
    "avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 clzero irperf xsaveerptr rdpru "
    "wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists "
    "pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku ospke "
    "avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq la57 rdpid bus_lock_detect "
    "movdiri movdir64b overflow_recov succor smca fsrm avx512_vp2intersect flush_l1d debug_swap"
)

# What the runtime fixes leave (pve-gpu02, and pve-gpu03/05 where those fixes are done).
FIXED_RUNTIME = {"numa_balancing": "0", "sysctl_file": "90-pvetune.conf", "mrrs": 4096, "lnksta": [("32GT/s", 16)] * 8}

# Each host's "expect": the audit status of every check that does not pass on it (what the host is built to show;
# tests/unit/test_gather_demo.py holds the generated trees to it). A new check that does not pass somewhere is
# named here, beside the spec that makes it so.
HOSTS = {
    "pve-gpu01": {
        "expect": {"cpu.scaling_driver": "fail", "cpu.epp": "skip", "cpu.cstates": "fail",
                   "kernel.numa_balancing": "fail", "pcie.mrrs": "fail", "pcie.link": "warn", "pcie.acs": "skip",
                   "pcie.sriov": "skip", "kernel.version": "fail", "boot.cmdline": "fail", "lxc.gpu_devices": "fail",
                   "iommu.mode": "fail", "lxc.resources": "fail", "kernel.known_issues": "fail",
                   "nvidia.uvm_hmm": "warn", "nvidia.compute_capability": "fail", "cpu.boost": "fail",
                   "mem.sysctl": "fail", "pcie.aspm": "fail", "irq.gpu_affinity": "warn", "lxc.shm_memlock": "warn",
                   "storage.zfs_arc": "fail", "storage.weights": "warn", "storage.zfs_dataset": "skip"},
        "state": "before",
        "cpu": "epyc",
        "kernel": "6.8.12-4-pve",
        "installed": ["6.8.12-4-pve", "6.8.8-2-pve"],
        "loader": "grub",
        "cpufreq": "acpi-cpufreq",
        "amd_pstate_status": None,
        "governor": "performance",
        "epp": None,
        "max_cstate": "8",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2),
                   ("C2", "ACPI IOPORT 0x814", 400, 800)],
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet",
        "grub_default_args": "quiet",
        "grub_dropin": None,
        "numa_balancing": "1",
        "sysctl_file": None,
        "mrrs": 512,
        "lnksta": [("2.5GT/s", 16)] * 6 + [("32GT/s", 16)] * 2,
        "uvm_major": 509, "caps_major": 508, "nvlink_major": 507,
        "ct_uvm_major": 511,
        "iommu": "DMA-FQ",
        "persistence": True,
        "pin": None,
        # nvidia_uvm runs HMM on a branch with known HMM failures; CT 101 ships CUDA 12.4, which predates sm_120.
        "hmm": "N",
        "ct_cuda": "12.4",
        # 512 GiB, no modprobe.d ARC cap and a runtime one ZFS ignored; the models on NFS; the kernel's swappiness;
        # boost off in the firmware's default; ASPM L1 on every GPU link; no irqbalance.
        "ram_gib": 512, "arc": "runtime-ignored", "models": "nfs", "swappiness": "60", "boost": "0",
        "aspm": "L1", "irqbalance": False,
    },
    "pve-gpu02": {
        "expect": {"pcie.acs": "skip", "pcie.sriov": "skip"},
        "state": "after",
        "cpu": "epyc",
        "kernel": "6.14.8-2-pve",
        "installed": ["6.14.8-2-pve", "6.8.12-4-pve"],
        "loader": "systemd-boot",
        "cpufreq": "amd-pstate-epp",
        "amd_pstate_status": "active",
        "governor": "performance",
        "epp": "performance",
        "max_cstate": "1",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2)],
        "cmdline": ("initrd=\\EFI\\proxmox\\6.14.8-2-pve\\initrd.img-6.14.8-2-pve root=ZFS=rpool/ROOT/pve-1 "
                    "boot=zfs amd_pstate=active processor.max_cstate=1 iommu=pt"),
        "kernel_cmdline_file": "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active processor.max_cstate=1 iommu=pt\n",
        **FIXED_RUNTIME,
        "uvm_major": 510, "caps_major": 509, "nvlink_major": 508,
        "ct_uvm_major": 510,
        "iommu": "identity",
        "persistence": True,
        "pin": "6.14.8-2-pve",
        "zfs_root": True,
        # CT 101 started with lxc.prlimit.memlock: unlimited.
        "memlock": "unlimited",
    },
    "pve-gpu03": {
        "expect": {"cpu.scaling_driver": "pending", "cpu.epp": "skip", "cpu.cstates": "pending", "pcie.acs": "skip",
                   "pcie.sriov": "skip", "kernel.version": "pending", "boot.cmdline": "pending",
                   "iommu.mode": "pending", "kernel.known_issues": "pending", "nvidia.uvm_hmm": "pending",
                   "gpu.clocks": "fail", "cpu.boost": "skip", "lxc.shm_memlock": "warn"},
        "state": "half",
        "cpu": "epyc",
        "kernel": "6.8.12-4-pve",
        "installed": ["6.14.8-2-pve", "6.8.12-4-pve"],
        "loader": "grub",
        "cpufreq": "amd-pstate",
        "amd_pstate_status": "passive",
        "governor": "performance",
        "epp": None,
        "max_cstate": "8",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2),
                   ("C2", "ACPI IOPORT 0x814", 400, 800)],
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet amd_pstate=passive",
        "grub_default_args": "quiet amd_pstate=passive",
        "grub_dropin": "amd_pstate=active processor.max_cstate=1 iommu=pt",
        **FIXED_RUNTIME,
        "uvm_major": 511, "caps_major": 510, "nvlink_major": 509,
        "ct_uvm_major": 511,
        "iommu": "DMA-FQ",
        "persistence": True,
        "pin": "6.14.8-2-pve",
        # uvm_disable_hmm=1 is configured, nvidia_uvm not reloaded since; GPU 3 keeps a benchmark's nvidia-smi -ac.
        "hmm": "N",
        "hmm_conf": True,
        "app_clocks": {3: (1410, 14001)},
    },
    "pve-gpu04": {
        "expect": {"pcie.acs": "fail", "pcie.bar1": "warn", "pcie.sriov": "skip", "boot.cmdline": "fail",
                   "iommu.mode": "fail", "lxc.resources": "fail", "nvidia.stack": "fail", "gpu.health": "fail",
                   "lxc.shm_memlock": "warn", "storage.weights": "warn"},
        "state": "pcie",
        "cpu": "epyc",
        "kernel": "6.14.8-2-pve",
        "installed": ["6.14.8-2-pve", "6.8.12-4-pve"],
        "loader": "grub",
        "cpufreq": "amd-pstate-epp",
        "amd_pstate_status": "active",
        "governor": "performance",
        "epp": "performance",
        "max_cstate": "1",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "ACPI FFH MWAIT 0x0", 1, 2)],
        "cmdline": ("BOOT_IMAGE=/boot/vmlinuz-6.14.8-2-pve root=/dev/mapper/pve-root ro quiet amd_pstate=active "
                    "processor.max_cstate=1"),
        "grub_default_args": "quiet amd_pstate=active processor.max_cstate=1",
        "grub_dropin": None,
        **FIXED_RUNTIME,
        "uvm_major": 510, "caps_major": 509, "nvlink_major": 508,
        "ct_uvm_major": 510,
        # The IOMMU translates (no iommu=pt), and with it on the kernel set ACS SrcValid, ReqRedir, CmpltRedir and
        # UpstreamFwd on every port (pci_std_enable_acs): NCCL's P2P between the two GPUs of a switch goes to the
        # root complex. GPU 5's firmware left BAR1 at 256MB (Resizable BAR off for that slot).
        "iommu": "DMA",
        "switches": True,
        "switch_acs": 0x001D,
        "small_bar1": {5: 256 << 20},
        "persistence": True,
        "pin": None,
        # GPU 6 fell off the bus once this boot; its switch port logged completion timeouts, its link replays.
        "xid": {6: [("08:14:03", 79, "pid=48213, name=python3, GPU has fallen off the bus.")]},
        "aer": {(6, "dsp"): {"nonfatal": {"CmpltTO": 3}, "correctable": {"BadTLP": 41, "RxErr": 12}},
                (6, "gpu"): {"correctable": {"BadDLLP": 7}}},
        # One NVMe of the models pool trained at 8 GT/s of its 16 GT/s.
        "slow_nvme": 3,
    },
    "pve-gpu05": {
        "expect": {"cpu.governor": "fail", "cpu.epp": "fail", "cpu.cstates": "fail", "pcie.acs": "skip",
                   "pcie.sriov": "skip", "boot.cmdline": "fail", "gpu.power_limit": "fail",
                   "nvidia.persistence": "warn", "mem.sysctl": "warn", "lxc.shm_memlock": "warn",
                   "storage.zfs_dataset": "warn"},
        "state": "intel",
        "cpu": "xeon",
        "kernel": "6.14.8-2-pve",
        "installed": ["6.14.8-2-pve", "6.8.12-4-pve"],
        "loader": "grub",
        "cpufreq": "intel_pstate",
        "amd_pstate_status": None,
        "governor": "powersave",
        "epp": "balance_performance",
        "max_cstate": "9",
        "states": None,  # intel_idle's, from the fixture
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.14.8-2-pve root=/dev/mapper/pve-root ro quiet iommu=pt",
        "grub_default_args": "quiet iommu=pt",
        "grub_dropin": None,
        **FIXED_RUNTIME,
        "uvm_major": 510, "caps_major": 509, "nvlink_major": 508,
        "ct_uvm_major": 510,
        "iommu": "identity",
        "persistence": True,
        "pin": None,
        # GPU 2 was capped to 300 W (a power test left it); persistence set with nvidia-smi -pm 1, no daemon.
        "power_caps": {2: 300.0},
        "persistenced": False,
        # 64 GiB reserved as 1 GiB huge pages for a VM that moved; the models dataset kept the default recordsize.
        "hugepages_1g": 64, "models_recordsize": "128K",
    },
}


def expected_statuses(host, check_ids):
    """{check id: status} the audit of ``host`` must give: "pass" unless its spec's "expect" says otherwise."""
    expect = HOSTS[host]["expect"]
    unknown = sorted(set(expect) - set(check_ids))
    if unknown:
        raise ValueError("%s: expect names checks the catalogue does not have: %s" % (host, ", ".join(unknown)))
    return {cid: expect.get(cid, "pass") for cid in check_ids}


class Tree:
    def __init__(self, root):
        self.root = root
        self._dirs = set()  # directories made so far: 32,000 files, most of them in a few hundred dirs
        umask = os.umask(0)
        os.umask(umask)
        self._created_mode = 0o666 & ~umask

    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _parent(self, full):
        parent = os.path.dirname(full)
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)

    def write(self, path, content, mode=0o644):
        full = self._p(path)
        self._parent(full)
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        with open(full, "wb") as handle:
            handle.write(data)
        if mode != self._created_mode:
            os.chmod(full, mode)

    def mkdir(self, path):
        os.makedirs(self._p(path), exist_ok=True)

    def link(self, path, target):
        full = self._p(path)
        self._parent(full)
        os.symlink(target, full)


# -- /proc ------------------------------------------------------------------
def cpuinfo(spec):
    if spec["cpu"] == "xeon":
        return xeon_cpuinfo()
    ncpu = LAYOUTS["epyc"]["ncpu"]
    blocks = []
    for cpu in range(ncpu):
        socket = cpu_socket(cpu)
        core = cpu % 32
        thread = cpu // 64
        apic = socket * 128 + core * 2 + thread
        blocks.append("\n".join([
            "processor\t: %d" % cpu,
            "vendor_id\t: AuthenticAMD",
            "cpu family\t: 26",
            "model\t\t: 2",
            "model name\t: AMD EPYC 9335 32-Core Processor",
            "stepping\t: 1",
            "microcode\t: 0xb002116",
            "cpu MHz\t\t: 3000.000",
            "cache size\t: 1024 KB",
            "physical id\t: %d" % socket,
            "siblings\t: 64",
            "core id\t\t: %d" % core,
            "cpu cores\t: 32",
            "apicid\t\t: %d" % apic,
            "initial apicid\t: %d" % apic,
            "fpu\t\t: yes",
            "fpu_exception\t: yes",
            "cpuid level\t: 16",
            "wp\t\t: yes",
            "flags\t\t: %s" % EPYC_FLAGS,
            "bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass srso",
            "bogomips\t: 5999.87",
            "TLB size\t: 192 4K pages",
            "clflush size\t: 64",
            "cache_alignment\t: 64",
            "address sizes\t: 52 bits physical, 57 bits virtual",
            "power management: ts ttp tm hwpstate cpb eff_freq_ro [13] [14] [15]",
        ]))
    return "\n\n".join(blocks) + "\n\n"


def xeon_cpuinfo():
    """The real cpu0 block of the 8460H, once per CPU with its own numbering (2 sockets x 40 cores x 2)."""
    block = intel_fixture("pepc_spr_spr1_proc_cpuinfo_cpu0.txt")
    cores, ncpu = LAYOUTS["xeon"]["cores"], LAYOUTS["xeon"]["ncpu"]
    out = []
    for cpu in range(ncpu):
        socket, core, thread = cpu_socket(cpu, "xeon"), cpu % cores, cpu // (2 * cores)
        apic = socket * 128 + core * 2 + thread
        values = {"processor": cpu, "physical id": socket, "core id": core, "apicid": apic, "initial apicid": apic}
        lines = []
        for line in block:
            key = line.split(":", 1)[0].rstrip("\t ")
            lines.append("%s: %d" % (line.split(":", 1)[0], values[key]) if key in values else line)
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n\n"


def cpu_socket(cpu, layout="epyc"):
    cores = LAYOUTS[layout]["cores"]
    return (cpu % (2 * cores)) // cores


def proc_devices(spec):
    char = [(1, "mem"), (4, "/dev/vc/0"), (4, "tty"), (4, "ttyS"), (5, "/dev/tty"), (5, "/dev/console"),
            (5, "/dev/ptmx"), (7, "vcs"), (10, "misc"), (13, "input"), (21, "sg"), (29, "fb"), (89, "i2c"),
            (128, "ptm"), (136, "pts"), (162, "raw"), (180, "usb"), (188, "ttyUSB"), (189, "usb_device"),
            (195, "nvidia"), (202, "cpu/msr"), (203, "cpu/cpuid"), (226, "drm"), (238, "ipmidev"),
            (239, "hidraw"), (240, "ttyDBC"), (241, "wwan_port"), (242, "aux"), (243, "cec"), (244, "lirc"),
            (245, "vfio"), (246, "bsg"), (247, "watchdog"), (248, "remoteproc"), (249, "ptp"), (250, "pps"),
            (251, "rtc"), (252, "dma_heap"), (253, "dax"), (254, "gpiochip"),
            (spec["uvm_major"], "nvidia-uvm"), (spec["caps_major"], "nvidia-caps"),
            (spec["nvlink_major"], "nvidia-nvlink"), (506, "nvidia-caps-imex-channels")]
    char.sort(key=lambda kv: kv[0])
    block = [(7, "loop"), (8, "sd"), (9, "md"), (65, "sd"), (66, "sd"), (67, "sd"), (68, "sd"), (69, "sd"),
             (70, "sd"), (71, "sd"), (128, "sd"), (129, "sd"), (130, "sd"), (131, "sd"), (132, "sd"),
             (133, "sd"), (134, "sd"), (135, "sd"), (230, "zvol"), (252, "device-mapper"), (253, "virtblk"),
             (254, "mdp"), (259, "blkext")]
    lines = ["Character devices:"] + ["%3d %s" % kv for kv in char] + ["", "Block devices:"]
    lines += ["%3d %s" % kv for kv in block]
    return "\n".join(lines) + "\n"


def dev_listing(spec):
    uvm, caps = spec["uvm_major"], spec["caps_major"]
    lines = []
    for i in range(8):
        lines.append("crw-rw-rw- 1 root root 195,   %d Nov 20 09:12 /dev/nvidia%d" % (i, i))
    lines.append("crw-rw-rw- 1 root root %d,   0 Nov 20 09:12 /dev/nvidia-uvm" % uvm)
    lines.append("crw-rw-rw- 1 root root %d,   1 Nov 20 09:12 /dev/nvidia-uvm-tools" % uvm)
    lines.append("crw-rw-rw- 1 root root 195, 254 Nov 20 09:12 /dev/nvidia-modeset")
    lines.append("crw-rw-rw- 1 root root 195, 255 Nov 20 09:12 /dev/nvidiactl")
    lines.append("")
    lines.append("/dev/nvidia-caps:")
    lines.append("total 0")
    lines.append("cr-------- 1 root root %d, 1 Nov 20 09:12 nvidia-cap1" % caps)
    lines.append("cr--r--r-- 1 root root %d, 2 Nov 20 09:12 nvidia-cap2" % caps)
    return "\n".join(lines) + "\n"


# The RTX PRO 6000 Blackwell Server Edition's applications clocks as the demo -q prints them (graphics, memory MHz).
DEFAULT_APP_CLOCKS = (2430, 14001)


def nvidia_smi_q(spec):
    gpus = []
    for idx, _node, path in pci_topology(spec):
        bus = path[-1][0][5:7]
        bar1 = gpu_bar1(spec, idx) >> 20
        limit = spec.get("power_caps", {}).get(idx, 600.0)
        app = spec.get("app_clocks", {}).get(idx, DEFAULT_APP_CLOCKS)
        events = ("Idle", "Applications Clocks Setting") if app != DEFAULT_APP_CLOCKS else ("Idle",)
        gpus.append("\n".join([
            "GPU 00000000:%s:00.0" % bus.upper(),
            "    Product Name                          : NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "    Product Brand                         : NVIDIA RTX",
            "    Product Architecture                  : Blackwell",
            "    Display Mode                          : Requested functionality has been deprecated",
            "    Persistence Mode                      : %s" % ("Enabled" if spec["persistence"] else "Disabled"),
            "    Addressing Mode                       : %s" % ("None" if spec.get("hmm", "Y") == "Y" else "HMM"),
            "    Minor Number                          : %d" % idx,
            "    PCI",
            "        Bus                               : 0x%s" % bus,
            "        Device                            : 0x00",
            "        Domain                            : 0x0000",
            "        Device Id                         : 0x2BB510DE",
            "        Bus Id                            : 00000000:%s:00.0" % bus.upper(),
            "        Replays Since Reset               : 0",
            "    Performance State                     : P8",
            "    Clocks Event Reasons",
        ] + ["        %-34s: %s" % (reason, "Active" if reason in events else "Not Active") for reason in (
            "Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown")] + [
            "            %-30s: %s" % (reason, "Active" if reason in events else "Not Active") for reason in (
                "HW Thermal Slowdown", "HW Power Brake Slowdown")] + [
            "        %-34s: %s" % (reason, "Active" if reason in events else "Not Active") for reason in (
                "Sync Boost", "SW Thermal Slowdown", "Display Clock Setting")] + [
            "    FB Memory Usage",
            "        Total                             : 97887 MiB",
            "        Reserved                          : 599 MiB",
            "        Used                              : 0 MiB",
            "        Free                              : 97288 MiB",
            "    BAR1 Memory Usage",
            "        Total                             : %d MiB" % bar1,
            "        Used                              : 2 MiB",
            "        Free                              : %d MiB" % (bar1 - 2),
            "    GPU Power Readings",
            "        Power Draw                        : 34.61 W",
            "        Current Power Limit               : %.2f W" % limit,
            "        Requested Power Limit             : %.2f W" % limit,
            "        Default Power Limit               : 600.00 W",
            "        Min Power Limit                   : 150.00 W",
            "        Max Power Limit                   : 600.00 W",
            "    Applications Clocks",
            "        Graphics                          : %d MHz" % app[0],
            "        Memory                            : %d MHz" % app[1],
            "    Default Applications Clocks",
            "        Graphics                          : %d MHz" % DEFAULT_APP_CLOCKS[0],
            "        Memory                            : %d MHz" % DEFAULT_APP_CLOCKS[1],
        ]))
    head = ["", "==============NVSMI LOG==============", "",
            "Timestamp                                 : Thu Nov 20 09:30:00 2026",
            "Driver Version                            : 580.95.05",
            "CUDA Version                              : 13.0", "",
            "Attached GPUs                             : 8"]
    return "\n".join(head) + "\n" + "\n\n".join(gpus) + "\n\n"


# -- sysfs ------------------------------------------------------------------
def write_cpu_sysfs(t, spec):
    ncpu = LAYOUTS[spec["cpu"]]["ncpu"]
    base = "/sys/devices/system/cpu"
    for name in ("online", "possible", "present"):
        t.write("%s/%s" % (base, name), "0-%d\n" % (ncpu - 1))
    t.write(base + "/offline", "\n")
    t.write(base + "/kernel_max", "8191\n")
    intel = spec["cpu"] == "xeon"
    if intel:
        for name, value in intel_fixture("pepc_spr_spr1_cpuidle_sysfs.txt", base + "/cpuidle/").items():
            t.write(base + "/cpuidle/" + name, value + "\n")
        t.write("/sys/module/intel_idle/parameters/max_cstate", spec["max_cstate"] + "\n")
        t.write("/sys/module/processor/parameters/max_cstate", "9\n")
        for name, value in intel_fixture("pepc_spr_spr1_cpufreq_policy0_intel_pstate_sysfs.txt",
                                         base + "/intel_pstate/").items():
            t.write(base + "/intel_pstate/" + name, value + "\n")
        policy0 = intel_fixture("pepc_spr_spr1_cpufreq_policy0_intel_pstate_sysfs.txt", base + "/cpufreq/policy0/")
        idle0 = intel_fixture("pepc_spr_spr1_cpuidle_sysfs.txt", base + "/cpu0/cpuidle/")
    else:
        t.write(base + "/cpuidle/current_driver", "acpi_idle\n")
        t.write(base + "/cpuidle/current_governor", "menu\n")
        t.write(base + "/cpuidle/current_governor_ro", "menu\n")
        t.write(base + "/cpuidle/available_governors", "ladder menu teo \n")
        t.write("/sys/module/processor/parameters/max_cstate", spec["max_cstate"] + "\n")
    driver = spec["cpufreq"]
    if spec["amd_pstate_status"]:
        t.write(base + "/amd_pstate/status", spec["amd_pstate_status"] + "\n")
        t.write(base + "/amd_pstate/prefcore", "enabled\n" if spec["amd_pstate_status"] == "active" else "disabled\n")
    if driver == "acpi-cpufreq":
        t.write(base + "/cpufreq/boost", spec.get("boost", "1") + "\n")
    # Per-policy boost: amd-pstate from 6.11 (the global file stays acpi-cpufreq's here).
    policy_boost = driver.startswith("amd-pstate") and not spec["kernel"].startswith("6.8")
    for cpu in range(ncpu):
        cdir = "%s/cpu%d" % (base, cpu)
        if cpu:
            t.write(cdir + "/online", "1\n")
        t.link(cdir + "/cpufreq", "../cpufreq/policy%d" % cpu)
        socket = cpu_socket(cpu, spec["cpu"])
        t.write(cdir + "/topology/physical_package_id", "%d\n" % socket)
        t.write(cdir + "/topology/core_id", "%d\n" % (cpu % LAYOUTS[spec["cpu"]]["cores"]))
        t.link(cdir + "/node%d" % socket, "../../node/node%d" % socket)
        pdir = "%s/cpufreq/policy%d" % (base, cpu)
        if intel:
            write_xeon_cpu(t, spec, cpu, cdir, pdir, policy0, idle0)
            continue
        t.write(pdir + "/affected_cpus", "%d\n" % cpu)
        t.write(pdir + "/related_cpus", "%d\n" % cpu)
        t.write(pdir + "/scaling_driver", driver + "\n")
        t.write(pdir + "/scaling_governor", spec["governor"] + "\n")
        t.write(pdir + "/scaling_setspeed", "<unsupported>\n")
        if policy_boost:
            t.write(pdir + "/boost", spec.get("boost", "1") + "\n")
        if driver == "acpi-cpufreq":
            t.write(pdir + "/cpuinfo_max_freq", "3000000\n")
            t.write(pdir + "/cpuinfo_min_freq", "1500000\n")
            t.write(pdir + "/cpuinfo_transition_latency", "0\n")
            t.write(pdir + "/scaling_available_frequencies", "3000000 2200000 1500000 \n")
            t.write(pdir + "/scaling_available_governors",
                    "conservative ondemand userspace powersave performance schedutil \n")
            t.write(pdir + "/scaling_max_freq", "3000000\n")
            t.write(pdir + "/scaling_min_freq", "1500000\n")
            t.write(pdir + "/scaling_cur_freq", "3000000\n")
        else:
            t.write(pdir + "/cpuinfo_max_freq", "4400000\n")
            t.write(pdir + "/cpuinfo_min_freq", "400000\n")
            t.write(pdir + "/cpuinfo_transition_latency", "20000\n" if driver == "amd-pstate" else "0\n")
            t.write(pdir + "/amd_pstate_highest_perf", "196\n")
            t.write(pdir + "/amd_pstate_max_freq", "4400000\n")
            t.write(pdir + "/amd_pstate_lowest_nonlinear_freq", "1500000\n")
            t.write(pdir + "/amd_pstate_hw_prefcore", "enabled\n")
            t.write(pdir + "/amd_pstate_prefcore_ranking", "%d\n" % (236 - (cpu % 32) * 2))
            t.write(pdir + "/scaling_max_freq", "4400000\n")
            t.write(pdir + "/scaling_min_freq", "1500000\n")
            t.write(pdir + "/scaling_cur_freq", "3000000\n")
            if driver == "amd-pstate-epp":
                t.write(pdir + "/scaling_available_governors", "performance powersave \n")
                t.write(pdir + "/energy_performance_available_preferences",
                        "default performance balance_performance balance_power power \n")
                t.write(pdir + "/energy_performance_preference", spec["epp"] + "\n")
            else:
                t.write(pdir + "/scaling_available_governors",
                        "conservative ondemand userspace powersave performance schedutil \n")
        for idx, (name, desc, latency, residency) in enumerate(spec["states"]):
            sdir = "%s/cpuidle/state%d" % (cdir, idx)
            t.write(sdir + "/name", name + "\n")
            t.write(sdir + "/desc", desc + "\n")
            t.write(sdir + "/latency", "%d\n" % latency)
            t.write(sdir + "/residency", "%d\n" % residency)
            t.write(sdir + "/disable", "0\n")
            t.write(sdir + "/default_status", "enabled\n")
            t.write(sdir + "/power", "0\n" if name == "POLL" else "4294967295\n")
            t.write(sdir + "/usage", "%d\n" % (1000 + cpu * 7 + idx * 131))
            t.write(sdir + "/time", "%d\n" % (90000 + cpu * 13 + idx * 977))
    for node in (0, 1):
        t.write("/sys/devices/system/node/node%d/cpulist" % node, "%s\n" % node_cpulist(spec, node))


IDLE_STATE_FILES = ("name", "desc", "latency", "residency", "disable", "default_status", "power", "usage", "time")


def write_xeon_cpu(t, spec, cpu, cdir, pdir, policy0, idle0):
    """One CPU of the Xeon host: policy0's and cpu0's real files, with this CPU's number and the spec's
    governor and EPP (the fixture host ran powersave / balance_performance, as pve-gpu05 does)."""
    for name, value in sorted(policy0.items()):
        if name in ("affected_cpus", "related_cpus"):
            value = str(cpu)
        elif name == "scaling_governor":
            value = spec["governor"]
        elif name == "energy_performance_preference":
            value = spec["epp"]
        t.write(pdir + "/" + name, value + "\n")
    for name, value in sorted(idle0.items()):
        # The state files the EPYC hosts carry too (the fixture also has above/below/rejected/s2idle counters).
        if name.split("/")[-1] in IDLE_STATE_FILES:
            t.write(cdir + "/cpuidle/" + name, value + "\n")


PCI_IDS_EXCERPT = os.path.join(TOP, "tests", "fixtures", "realdata", "pci_ids", "pci.ids.excerpt")
# pve-gpu04: four Broadcom PEX890xx switches, two GPUs behind each: root port -> upstream port (bus+1, 00.0) ->
# downstream ports 08.0 and 10.0 (bus+2) -> a GPU on each (bus+3, bus+4).
SWITCH_ID = (0x1000, 0xC030)
SWITCH_ROOTS = ["00", "20", "80", "a0"]


def pci_topology(spec):
    """[(gpu index, [(bdf, dir, kind, config bytes, numa node)] from the root port down to the GPU)]."""
    port_id = ROOT_PORT_ID[spec["cpu"]]
    out = []
    if spec.get("switches"):
        for sw, root_bus in enumerate(SWITCH_ROOTS):
            node, rb = 0 if sw < 2 else 1, int(root_bus, 16)
            rp = ("0000:%s:01.1" % root_bus, "rp", build_config(
                port_id[0], port_id[1], 0x060400, header_type=1, mrrs=512, mps=256, devcap_mps=512,
                lnkcap=("32GT/s", 16), buses=(rb, rb + 1, rb + 4), acs_ctrl=spec["switch_acs"],
                aspm=spec.get("aspm", "disabled")))
            usp = ("0000:%02x:00.0" % (rb + 1), "usp", build_config(
                SWITCH_ID[0], SWITCH_ID[1], 0x060400, header_type=1, pcie_type=5, switch=True, mrrs=512,
                devcap_mps=512, buses=(rb + 1, rb + 2, rb + 4), aspm=spec.get("aspm", "disabled")))
            for k, dev in enumerate(("08.0", "10.0")):
                idx, gbus = sw * 2 + k, rb + 3 + k
                dsp = ("0000:%02x:%s" % (rb + 2, dev), "dsp", build_config(
                    SWITCH_ID[0], SWITCH_ID[1], 0x060400, header_type=1, pcie_type=6, switch=True, mrrs=512,
                    devcap_mps=512, buses=(rb + 2, gbus, gbus), acs_ctrl=spec["switch_acs"],
                    aspm=spec.get("aspm", "disabled")))
                gpu = ("0000:%02x:00.0" % gbus, "gpu", gpu_config(spec, idx, rb, gbus))
                out.append((idx, node, [rp, usp, dsp, gpu]))
        return out
    for idx, (root_bus, port, bus) in enumerate(GPU_SLOTS):
        speed, width = spec["lnksta"][idx]
        rb, gb = int(root_bus, 16), int(bus, 16)
        rp = ("0000:%s:%s" % (root_bus, port), "rp", build_config(
            port_id[0], port_id[1], 0x060400, header_type=1, mrrs=512, mps=256, devcap_mps=512,
            lnkcap=("32GT/s", 16), lnksta=(speed, width), buses=(rb, gb, gb), aspm=spec.get("aspm", "disabled")))
        out.append((idx, 0 if idx < 4 else 1, [rp, ("0000:%s:00.0" % bus, "gpu", gpu_config(spec, idx, rb, gb))]))
    return out


def gpu_config(spec, idx, root_bus, bus):
    speed, width = spec["lnksta"][idx]
    return build_config(0x10DE, GPU_DEVICE_ID, 0x030200, mrrs=spec["mrrs"], mps=256, devcap_mps=256,
                        lnkcap=("32GT/s", 16), lnksta=(speed, width), subsystem=GPU_SUBSYS,
                        buses=(root_bus, bus, bus), bar1=(gpu_bar1(spec, idx), 128 << 30),
                        aspm=spec.get("aspm", "disabled"))


def gpu_bar1(spec, idx):
    return (spec.get("small_bar1") or {}).get(idx, 128 << 30)


def resource_file(idx, bar1):
    """sysfs resource of a GPU: BAR0 16M, BAR1 (64-bit prefetchable, above 4G when large), BAR3 32M, BAR5 I/O,
    the ROM, then the six SR-IOV lines (zero)."""
    zero = "0x%016x 0x%016x 0x%016x" % (0, 0, 0)
    base1 = 0x20000000000 + idx * (256 << 30) if bar1 > (256 << 20) else 0xd0000000
    lines = ["0x%016x 0x%016x 0x%016x" % (0xf2000000 + idx * 0x2000000, 0xf2ffffff + idx * 0x2000000, 0x40200),
             "0x%016x 0x%016x 0x%016x" % (base1, base1 + bar1 - 1, 0x14220c), zero,
             "0x%016x 0x%016x 0x%016x" % (0x30000000000 + idx * (32 << 20), 0x30000000000 + (idx + 1) * (32 << 20) - 1,
                                          0x14220c), zero,
             "0x%016x 0x%016x 0x%016x" % (0x2000 + idx * 0x1000, 0x207f + idx * 0x1000, 0x40101),
             "0x%016x 0x%016x 0x%016x" % (0xf3000000 + idx * 0x2000000, 0xf307ffff + idx * 0x2000000, 0x46200)]
    return "\n".join(lines + [zero] * 6) + "\n"


def write_pci_sysfs(t, spec):
    # Git keeps no empty directories: every directory of the tree holds a file, as in real sysfs.
    for drv in ("nvidia", "pcieport"):
        t.write("/sys/bus/pci/drivers/%s/uevent" % drv, "")
    t.link("/sys/bus/pci/drivers/nvidia/module", "../../../../module/nvidia")
    with open(PCI_IDS_EXCERPT) as handle:
        t.write("/usr/share/misc/pci.ids", handle.read())
    seen = set()
    for idx, node, path in pci_topology(spec):
        speed, width = spec["lnksta"][idx]
        ddir = "/sys/devices/pci0000:%s" % path[0][0][5:7]
        for bdf, kind, cfg in path:
            ddir += "/" + bdf
            if bdf in seen:
                continue
            seen.add(bdf)
            gpu = kind == "gpu"
            vendor, device = (0x10DE, GPU_DEVICE_ID) if gpu else (
                SWITCH_ID if kind in ("usp", "dsp") else ROOT_PORT_ID[spec["cpu"]])
            cls, driver = (0x030200, "nvidia") if gpu else (0x060400, "pcieport")
            t.write(ddir + "/config", cfg)
            t.write(ddir + "/vendor", "0x%04x\n" % vendor)
            t.write(ddir + "/device", "0x%04x\n" % device)
            t.write(ddir + "/class", "0x%06x\n" % cls)
            t.write(ddir + "/revision", "0xa1\n" if gpu else "0x01\n")
            t.write(ddir + "/numa_node", "%d\n" % node)
            t.write(ddir + "/local_cpulist", "%s\n" % node_cpulist(spec, node))
            t.write(ddir + "/irq", "%d\n" % (150 + idx * 4 + len(seen) % 4))
            t.write(ddir + "/enable", "1\n")
            t.write(ddir + "/resource", resource_file(idx, gpu_bar1(spec, idx)) if gpu else "")
            sp = {"2.5GT/s": "2.5 GT/s PCIe", "32GT/s": "32.0 GT/s PCIe"}[speed if gpu or kind == "rp" else "32GT/s"]
            t.write(ddir + "/current_link_speed", sp + "\n")
            t.write(ddir + "/current_link_width", "%d\n" % (width if gpu or kind == "rp" else 16))
            t.write(ddir + "/max_link_speed", "32.0 GT/s PCIe\n")
            t.write(ddir + "/max_link_width", "16\n")
            if gpu:
                t.write(ddir + "/subsystem_vendor", "0x%04x\n" % GPU_SUBSYS[0])
                t.write(ddir + "/subsystem_device", "0x%04x\n" % GPU_SUBSYS[1])
                group = 32 + idx
                t.link(ddir + "/iommu_group", os.path.relpath("/sys/kernel/iommu_groups/%d" % group, ddir))
                t.link("/sys/kernel/iommu_groups/%d/devices/%s" % (group, bdf),
                       os.path.relpath(ddir, "/sys/kernel/iommu_groups/%d/devices" % group))
                t.write("/sys/kernel/iommu_groups/%d/type" % group, spec["iommu"] + "\n")
            t.link(ddir + "/driver", os.path.relpath("/sys/bus/pci/drivers/%s" % driver, ddir))
            write_aer(t, ddir, spec.get("aer", {}).get((idx, kind), {}))
            t.link("/sys/bus/pci/devices/%s" % bdf, "../../..%s" % ddir[len("/sys"):])


# The counters of aer_dev_* as a 6.x kernel lists them (drivers/pci/pcie/aer.c; the real set in
# tests/fixtures/realdata/gpu_runtime/fwupd_aer_dev_umockdev_record.txt).
AER_NAMES = {
    "correctable": ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF"),
    "fatal": ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP", "ECRC",
              "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
              "PoisonTLPBlocked"),
}
AER_NAMES["nonfatal"] = AER_NAMES["fatal"]
AER_TOTAL = {"correctable": "TOTAL_ERR_COR", "fatal": "TOTAL_ERR_FATAL", "nonfatal": "TOTAL_ERR_NONFATAL"}


def write_aer(t, ddir, counts):
    """aer_dev_{correctable,nonfatal,fatal} of one device, ``counts`` {kind: {name: n}} (zero elsewhere)."""
    for kind, names in AER_NAMES.items():
        own = counts.get(kind, {})
        lines = ["%s %d" % (name, own.get(name, 0)) for name in names]
        t.write("%s/aer_dev_%s" % (ddir, kind), "\n".join(lines + ["%s %d" % (AER_TOTAL[kind], sum(own.values()))])
                + "\n")


def kernel_xid(spec):
    """The snapshot's kernel-xid.txt: what journalctl -k --grep 'NVRM: Xid|fallen off the bus' prints."""
    lines = []
    for idx, _node, path in pci_topology(spec):
        bus = path[-1][0][:-2]
        for stamp, code, detail in spec.get("xid", {}).get(idx, ()):
            lines.append("2026-11-20T%s+0000 %s kernel: NVRM: Xid (PCI:%s): %d, %s" % (
                stamp, spec.get("hostname", "pve"), bus, code, detail))
    return "".join(line + "\n" for line in lines)


def write_iommu(t, spec):
    if spec["cpu"] == "xeon":
        for unit in range(4):
            t.write("/sys/devices/virtual/iommu/dmar%d/intel-iommu/cap" % unit, "19ed008c40780c66\n")
            t.link("/sys/class/iommu/dmar%d" % unit, "../../devices/virtual/iommu/dmar%d" % unit)
        for group in range(16):
            t.write("/sys/kernel/iommu_groups/%d/type" % group, spec["iommu"] + "\n")
        return
    for unit in range(8):
        t.write("/sys/devices/pci0000:%02x/0000:%02x:00.2/iommu/ivhd%d/amd-iommu/cap"
                % (unit * 0x20, unit * 0x20, unit), "0x00190064\n")
        t.link("/sys/class/iommu/ivhd%d" % unit,
               "../../devices/pci0000:%02x/0000:%02x:00.2/iommu/ivhd%d" % (unit * 0x20, unit * 0x20, unit))
    for group in range(16):
        t.write("/sys/kernel/iommu_groups/%d/type" % group, spec["iommu"] + "\n")


# -- /etc, /boot ---------------------------------------------------------------
GRUB_DEFAULT_FILE = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="Proxmox VE"
GRUB_CMDLINE_LINUX_DEFAULT="{default_args}"
GRUB_CMDLINE_LINUX=""

# If your computer has multiple operating systems installed, then you
# probably want to run os-prober. However, if your computer is a host
# for guest OSes installed via LXC or KVM, or if you don't use os-prober,
# you can safely disable it by uncommenting the following line:
#GRUB_DISABLE_OS_PROBER=true

# Uncomment to enable BadRAM filtering, modify to suit your needs
# This works with Linux (no patch required) and with any kernel that obtains
# the memory map information from GRUB (GNU Mach, kernel of FreeBSD ...)
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console

# The resolution used on graphical terminal
# note that you can use only modes which your graphic card supports via VBE
# you can see them in real GRUB with the command `vbeinfo'
#GRUB_GFXMODE=640x480

# Uncomment if you don't want GRUB to pass "root=UUID=xxx" parameter to Linux
#GRUB_DISABLE_LINUX_UUID=true

# Uncomment to disable generation of recovery mode menu entries
#GRUB_DISABLE_RECOVERY="true"

# Uncomment to get a beep at grub start
#GRUB_INIT_TUNE="480 440 1"
"""

ROOT_DEVID = "7b5a1c2e-0f3d-4c55-9a10-3e8d6f2b9c41"


def grub_cfg(installed, args):
    out = ["#", "# DO NOT EDIT THIS FILE", "#", "# It is automatically generated by grub-mkconfig using templates",
           "# from /etc/grub.d and settings from /etc/default/grub", "#", "",
           "### BEGIN /etc/grub.d/10_linux ###"]
    newest = installed[0]
    out.append("menuentry 'Proxmox VE GNU/Linux' --class proxmox --class gnu-linux --class gnu --class os "
               "$menuentry_id_option 'gnulinux-simple-%s' {" % ROOT_DEVID)
    out.append("\tlinux\t/boot/vmlinuz-%s root=/dev/mapper/pve-root ro %s" % (newest, args))
    out.append("\tinitrd\t/boot/initrd.img-%s" % newest)
    out.append("}")
    out.append("submenu 'Advanced options for Proxmox VE GNU/Linux' $menuentry_id_option "
               "'gnulinux-advanced-%s' {" % ROOT_DEVID)
    for ver in installed:
        out.append("\tmenuentry 'Proxmox VE GNU/Linux, with Linux %s' --class proxmox --class gnu-linux --class gnu "
                   "--class os $menuentry_id_option 'gnulinux-%s-advanced-%s' {" % (ver, ver, ROOT_DEVID))
        out.append("\t\tlinux\t/boot/vmlinuz-%s root=/dev/mapper/pve-root ro %s" % (ver, args))
        out.append("\t\tinitrd\t/boot/initrd.img-%s" % ver)
        out.append("\t}")
    out.append("}")
    out.append("### END /etc/grub.d/10_linux ###")
    return "\n".join(out) + "\n"


def ct_config_gpu(ctid, hostname, uvm_major, style="cgroup2", limits=None):
    lim = dict({"cores": "48", "memory": "393216", "swap": "0"}, **(limits or {}))
    lines = [
        "#LLM serving (vLLM) on all 8 GPUs",
        "arch: amd64",
        "cores: %s" % lim["cores"],
        "features: nesting=1",
        "hostname: %s" % hostname,
        "memory: %s" % lim["memory"],
        "net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:3C:01,ip=dhcp,type=veth",
        "onboot: 1",
        "ostype: ubuntu",
        "rootfs: local-zfs:subvol-%d-disk-0,size=500G" % ctid,
        "swap: %s" % lim["swap"],
        "unprivileged: 0",
        "lxc.cgroup2.devices.allow: c 195:* rwm",
        "lxc.cgroup2.devices.allow: c %d:* rwm" % uvm_major,
    ]
    for i in range(8):
        lines.append("lxc.mount.entry: /dev/nvidia%d dev/nvidia%d none bind,optional,create=file" % (i, i))
    for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        lines.append("lxc.mount.entry: /dev/%s dev/%s none bind,optional,create=file" % (node, node))
    if "cpulimit" in lim:   # added by hand after the device lines (keeps their line numbers, which tests name)
        lines.append("cpulimit: %s" % lim["cpulimit"])
    lines.append("mp0: /tank/models,mp=/models,ro=1")
    lines.append("")
    lines.append("[before-driver-580]")
    lines.append("#LLM serving (vLLM) on all 8 GPUs")
    lines.append("arch: amd64")
    lines.append("cores: 48")
    lines.append("hostname: %s" % hostname)
    lines.append("lxc.cgroup2.devices.allow: c 195:* rwm")
    lines.append("lxc.cgroup2.devices.allow: c 236:* rwm")
    lines.append("memory: 393216")
    lines.append("ostype: ubuntu")
    lines.append("parent: clean-install")
    lines.append("rootfs: local-zfs:subvol-%d-disk-0,size=500G" % ctid)
    lines.append("snaptime: 1760000000")
    lines.append("")
    return "\n".join(lines) + "\n"


def ct_config_plain(ctid, hostname):
    return "\n".join([
        "arch: amd64",
        "cores: 2",
        "hostname: %s" % hostname,
        "memory: 2048",
        "net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:3C:%02X,ip=dhcp,type=veth" % ctid,
        "ostype: debian",
        "rootfs: local-zfs:subvol-%d-disk-0,size=8G" % ctid,
        "swap: 512",
        "unprivileged: 1",
    ]) + "\n"


def ct_config_devn(ctid, hostname):
    return "\n".join([
        "#Jupyter on GPU 7 (Proxmox 8.1+ device passthrough)",
        "arch: amd64",
        "cores: 8",
        "dev0: /dev/nvidia7,gid=44",
        "dev1: /dev/nvidiactl,gid=44",
        "dev2: /dev/nvidia-uvm,gid=44",
        "dev3: /dev/nvidia-uvm-tools,gid=44",
        "hostname: %s" % hostname,
        "memory: 65536",
        "net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:3C:%02X,ip=dhcp,type=veth" % ctid,
        "ostype: debian",
        "rootfs: local-zfs:subvol-%d-disk-0,size=64G" % ctid,
        "swap: 0",
        "unprivileged: 1",
    ]) + "\n"


# -- what the fix leaves (pve-gpu02; the sysctl drop-in also on pve-gpu03) -----------------------
# Written out by hand as an operator would, NOT by pvetune's renderers: the tests that compare a fix
# run with pve-gpu02 must be able to fail.  tests/unit/test_demo_expected.py holds these literals and
# the real renderers together.  Only the runtime library is installed by the real installer
# (bootunits.plan_install, write_runtime_library below): "installed" means what that installer writes.
SYSCTL_DROPIN = """\
# Managed by pvetune (fix.yml); rollback.yml removes this file.
# Do not edit: changes are overwritten on the next fix run.
kernel.numa_balancing = 0
vm.swappiness = 10
vm.zone_reclaim_mode = 0
"""

# What fix.yml's boot.yml passes to pvetune_runtime with the demo policy, as /etc/pvetune/<sub>.json.
FIXED_CONFIGS = {
    "/etc/pvetune/cpufreq.json": """\
{
  "amd_pstate_mode": "active",
  "boost": true,
  "epp": "performance",
  "governor": "performance",
  "intel_pstate_mode": "active"
}
""",
    "/etc/pvetune/pcie-mrrs.json": """\
{
  "acs_ports": [],
  "bdfs": [],
  "class_prefix": "0x03",
  "mrrs": 4096,
  "vendor": "0x10de"
}
""",
    "/etc/pvetune/gpu-power.json": """\
{
  "power_limit": "default"
}
""",
    "/etc/pvetune/lxc-gpu.json": """\
{
  "cgroup_version": "auto",
  "ctids": [],
  "wait_seconds": 60
}
""",
}

FIXED_UNITS = {
    "pvetune-cpufreq.service": """\
# Managed by pvetune (fix.yml); rollback.yml removes this unit.
# Re-applies the P-state driver mode (amd_pstate, intel_pstate), cpufreq governor and EPP from
# /etc/pvetune/cpufreq.json at boot (runtime sysfs values do not survive a reboot), before the
# guests start.
# cpufreq governors built as modules are loaded by systemd-modules-load; run after anything else
# that sets governors (cpufrequtils, cpupower) so pvetune's values are the ones that stay.
[Unit]
Description=pvetune: P-state driver mode, cpufreq governor and EPP
Documentation=man:cpupower(1) https://docs.kernel.org/admin-guide/pm/amd-pstate.html
Documentation=https://docs.kernel.org/admin-guide/pm/intel_pstate.html
After=systemd-modules-load.service cpufrequtils.service cpupower.service
Before=pve-guests.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/pvetune-boot cpufreq

[Install]
WantedBy=multi-user.target
""",
    "pvetune-pcie-mrrs.service": """\
# Managed by pvetune (fix.yml); rollback.yml removes this unit.
# Re-applies the PCIe Max Read Request Size of the NVIDIA functions from /etc/pvetune/pcie-mrrs.json
# at boot: Device Control resets to the firmware default on every boot (and on a function reset).
# It also clears the ACS redirect bits of the switch ports in acs_ports (the kernel sets ACS when it
# enumerates them with an IOMMU on), leaving any port with a vfio-pci device in its switch as it is.
# The NVIDIA driver is bound by udev coldplug / modules-load and its probe (and nvidia-persistenced
# initialising the GPUs) may reconfigure the function: run after those, before any guest starts.
# systemd-udev-settle is only ordered against (After=, no Wants=).
[Unit]
Description=pvetune: PCIe MaxReadReq of the NVIDIA GPUs
Documentation=man:setpci(8)
After=systemd-modules-load.service systemd-udev-trigger.service systemd-udev-settle.service
After=nvidia-persistenced.service
Before=pve-guests.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/pvetune-boot pcie-mrrs

[Install]
WantedBy=multi-user.target
""",
    "pvetune-gpu-power.service": """\
# Managed by pvetune (fix.yml); rollback.yml removes this unit.
# Sets each GPU below its target power limit (/etc/pvetune/gpu-power.json: default or watts) to it
# with nvidia-smi -pl at boot: a power limit does not survive a reboot or a driver reload. It runs
# after nvidia-persistenced (which keeps the GPUs initialised, so the limit stays), before any guest
# starts.
[Unit]
Description=pvetune: power limits of the NVIDIA GPUs
Documentation=man:nvidia-smi(1)
After=systemd-modules-load.service nvidia-persistenced.service
Before=pve-guests.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/pvetune-boot gpu-power

[Install]
WantedBy=multi-user.target
""",
    "pvetune-lxc-gpu.service": """\
# Managed by pvetune (fix.yml); rollback.yml removes this unit.
# The nvidia-uvm (and nvidia-caps, ...) majors are assigned at module load and can differ after every
# boot or driver update. This unit rewrites the NVIDIA allow lines of the GPU containers
# (/etc/pvetune/lxc-gpu.json) for the majors of this boot, before pve-guests.service starts them.
# It never starts, stops or restarts a container. /etc/pve (pmxcfs) must be mounted: Wants=, not
# Requires=, so a pmxcfs failure makes this unit fail with that message instead of being skipped.
[Unit]
Description=pvetune: NVIDIA device entries of the GPU containers for this boot's majors
Wants=pve-cluster.service
After=pve-cluster.service systemd-modules-load.service nvidia-persistenced.service
Before=pve-guests.service

[Service]
Type=oneshot
RemainAfterExit=yes
# Load nvidia-uvm and create /dev/nvidia-uvm(-tools) if udev has not; '-': not fatal,
# the helper waits for the nodes (wait_seconds in lxc-gpu.json) and says why.
ExecStartPre=-/usr/bin/nvidia-modprobe -u -c0
TimeoutStartSec=300
ExecStart=/usr/local/sbin/pvetune-boot lxc-gpu

[Install]
WantedBy=multi-user.target
""",
}

# /var/lib/pvetune/nvidia-majors.json after the fix run of FIX_RUN_ID (majors of pve-gpu02's boot).
FIX_RUN_ID = "20261118T140000Z"
STATE_FILE = "/var/lib/pvetune/nvidia-majors.json"
STATE_TEMPLATE = """\
{{
  "current": {{
    "nvidia": 195,
    "nvidia-caps": {caps},
    "nvidia-caps-imex-channels": 506,
    "nvidia-nvlink": {nvlink},
    "nvidia-uvm": {uvm}
  }},
  "history": [
    {{
      "at": "2026-11-18T14:00:00Z",
      "majors": {{
        "nvidia": 195,
        "nvidia-caps": {caps},
        "nvidia-caps-imex-channels": 506,
        "nvidia-nvlink": {nvlink},
        "nvidia-uvm": {uvm}
      }},
      "run_id": "{run_id}",
      "source": "fix"
    }}
  ],
  "names": {{
    "195": "nvidia",
    "506": "nvidia-caps-imex-channels",
    "{nvlink}": "nvidia-nvlink",
    "{caps}": "nvidia-caps",
    "{uvm}": "nvidia-uvm"
  }},
  "nvidia_majors": [
    195,
    506,
    {nvlink},
    {caps},
    {uvm}
  ],
  "version": 1
}}
"""


def write_fixed_runtime(t):
    """Settings, units and their multi-user.target.wants links, as fix.yml leaves them; then the runtime."""
    for path, text in FIXED_CONFIGS.items():
        t.write(path, text)
    for name, text in FIXED_UNITS.items():
        t.write("/etc/systemd/system/" + name, text)
        t.link("/etc/systemd/system/multi-user.target.wants/" + name, "/etc/systemd/system/" + name)
    write_runtime_library(t)


def write_runtime_library(t):
    """The runtime library, the helper and MANIFEST.json, as the real installer writes them."""
    install_runtime(t.root)


def write_state_file(t, spec):
    t.write(STATE_FILE, STATE_TEMPLATE.format(uvm=spec["uvm_major"], caps=spec["caps_major"],
                                              nvlink=spec["nvlink_major"], run_id=FIX_RUN_ID))


def write_host(t, host, spec):
    t.write("/.pvetune/snapshot.json", json.dumps({
        "host": host, "collected_at": COLLECTED_AT, "collector": "scripts/demo_fleet.py",
        "note": "demo fleet: generated, modelled on real files (see scripts/demo_fleet.py)",
        "state": spec["state"]}, indent=2, sort_keys=True) + "\n")
    t.write("/.pvetune/dev_nvidia.ls", dev_listing(spec))
    t.write("/.pvetune/nvidia-smi-q.txt", nvidia_smi_q(spec))
    t.write("/.pvetune/kernel-xid.txt", kernel_xid(dict(spec, hostname=host)))
    t.write("/etc/hostname", host + "\n")
    t.write("/proc/sys/kernel/hostname", host + "\n")
    t.write("/proc/sys/kernel/osrelease", spec["kernel"] + "\n")
    t.write("/proc/sys/kernel/numa_balancing", spec["numa_balancing"] + "\n")
    t.write("/proc/cmdline", spec["cmdline"] + "\n")
    t.write("/proc/cpuinfo", cpuinfo(spec))
    t.write("/proc/devices", proc_devices(spec))
    t.write("/proc/driver/nvidia/version",
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:55:41 UTC 2025\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n")
    write_cpu_sysfs(t, spec)
    write_pci_sysfs(t, spec)
    write_iommu(t, spec)
    t.write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
    t.write("/sys/module/nvidia/version", "580.95.05\n")
    t.write("/sys/module/nvidia/initstate", "live\n")
    t.write("/sys/module/nvidia_uvm/initstate", "live\n")
    t.write("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", spec.get("hmm", "Y") + "\n")
    if spec.get("hmm_conf", spec.get("hmm", "Y") == "Y"):
        t.write("/etc/modprobe.d/nvidia-uvm-hmm.conf", "# HMM off: cuInit failures with HMM on this driver branch\n"
                "options nvidia_uvm uvm_disable_hmm=1\n")
    if spec.get("persistenced", True):
        t.write("/run/nvidia-persistenced/nvidia-persistenced.pid", "2187\n")
        t.write("/proc/2187/comm", "nvidia-persiste\n")
    for ver in spec["installed"]:
        t.write("/boot/vmlinuz-%s" % ver, "")
        t.write("/boot/initrd.img-%s" % ver, "")
        t.write("/boot/config-%s" % ver, "CONFIG_X86_AMD_PSTATE=y\nCONFIG_X86_AMD_PSTATE_DEFAULT_MODE=3\n")
        t.write("/lib/modules/%s/modules.dep" % ver, "")
    if spec["loader"] == "grub":
        t.write("/etc/default/grub", GRUB_DEFAULT_FILE.format(default_args=spec["grub_default_args"]))
        t.write("/boot/grub/grub.cfg", grub_cfg(spec["installed"], spec["grub_default_args"]))
        t.grub_host = True
        if spec["grub_dropin"]:
            t.write("/etc/default/grub.d/90-pvetune.cfg",
                    "# Managed by pvetune (boot.cmdline); remove with rollback.yml\n"
                    'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT %s"\n' % spec["grub_dropin"])
        if spec["pin"]:
            t.write("/etc/default/grub.d/proxmox-kernel-pin.cfg",
                    'GRUB_DEFAULT="gnulinux-advanced-%s>gnulinux-%s-advanced-%s"\n' % (ROOT_DEVID, spec["pin"],
                                                                                       ROOT_DEVID))
            t.write("/etc/kernel/proxmox-boot-pin", spec["pin"] + "\n")
    else:
        t.write("/etc/kernel/cmdline", spec["kernel_cmdline_file"])
        t.write("/etc/kernel/proxmox-boot-uuids", "8E4F-1C2A\n")
        t.write("/etc/kernel/proxmox-boot-pin", spec["pin"] + "\n")
        t.write("/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f",
                b"\x06\x00\x00\x00" + "systemd-boot 252.38-1~deb12u1".encode("utf-16-le") + b"\x00\x00")
        t.write("/sys/firmware/efi/fw_platform_size", "64\n")
        t.write("/.pvetune/proxmox-boot-tool-status.txt",
                "Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..\n"
                "System currently booted with uefi\n"
                "8E4F-1C2A is configured with: uefi (versions: %s)\n" % ", ".join(sorted(spec["installed"])))
    if spec["sysctl_file"]:
        t.write("/etc/sysctl.d/" + spec["sysctl_file"], SYSCTL_DROPIN)
    t.write("/etc/sysctl.d/99-sysctl.conf", "# see /etc/sysctl.conf\n")
    t.write("/etc/sysctl.conf", "#kernel.domainname = example.com\n#net.ipv4.ip_forward=1\n")
    t.write("/usr/lib/sysctl.d/50-pid-max.conf", "kernel.pid_max = 4194304\n")
    # /etc/pve is pmxcfs: /etc/pve/lxc links to this node's directory.
    t.link("/etc/pve/local", "nodes/%s" % host)
    t.link("/etc/pve/lxc", "nodes/%s/lxc" % host)
    t.write("/etc/pve/nodes/%s/lxc/101.conf" % host, ct_config_gpu(101, "llm", spec["ct_uvm_major"],
                                                                  limits=demo_cts.CT101.get(host, {}).get("limits")))
    t.write("/etc/pve/nodes/%s/lxc/102.conf" % host, ct_config_plain(102, "monitoring"))
    for ctid, text in sorted(demo_cts.extra_ct_configs(host).items()):
        t.write("/etc/pve/nodes/%s/lxc/%d.conf" % (host, ctid), text)
    topology = pci_topology(spec)
    demo_cts.write_host_cts(t, host, spec, [path[-1][0] for _idx, _node, path in topology])
    gpus = [(idx, path[-1][0], "/sys/devices/pci0000:%s/%s" % (path[0][0][5:7], "/".join(p[0] for p in path)), node)
            for idx, node, path in topology]
    demo_platform.write_platform(t, host, spec, gpus, demo_cts.running_cts(host), LAYOUTS[spec["cpu"]]["ncpu"],
                                 {node: int(node_cpulist(spec, node).split("-")[0]) for node in (0, 1)})
    if spec["state"] == "after":
        t.write("/etc/pve/nodes/%s/lxc/103.conf" % host, ct_config_devn(103, "jupyter"))
        write_fixed_runtime(t)
        write_state_file(t, spec)


def run_update_grub(root):
    """Regenerate /boot/grub/grub.cfg from the tree's GRUB configuration, as update-grub would after the
    last change (tests/standins/update-grub emulates it on a tree), so grub.cfg and config agree."""
    env = dict(os.environ, PVETUNE_ROOT=root)
    subprocess.run([os.path.join(TOP, "tests", "standins", "update-grub")], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for leftover in (os.path.join(root, ".pvetune", "calls.log"),):
        if os.path.exists(leftover):
            os.unlink(leftover)


def generate_host(out, host):
    dest = os.path.join(out, host)
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    tree = Tree(dest)
    write_host(tree, host, HOSTS[host])
    if getattr(tree, "grub_host", False):
        run_update_grub(dest)
    empty = [d for d, subdirs, files in os.walk(dest) if not subdirs and not files]
    if empty:  # a collected snapshot (a tarball of files) has none either
        raise SystemExit("empty directories in %s: %s" % (host, empty[:5]))
    return host


def generate(out, hosts):
    """Write the hosts' trees under ``out``, at most one host per CPU at a time (they are independent)."""
    os.makedirs(out, exist_ok=True)
    if len(hosts) < 2 or (os.cpu_count() or 1) < 2:
        for host in hosts:
            generate_host(out, host)
        return
    with multiprocessing.get_context("fork").Pool(min(len(hosts), os.cpu_count())) as pool:
        pool.starmap(generate_host, [(out, host) for host in hosts])


# -- generated on demand ----------------------------------------------------
STAMP = ".generated.json"  # beside the trees: <out>.generated.json
# Every file the trees are made from: the generator's own modules (tests/unit/test_gather_demo.py checks
# that these are all the clone's modules it loads), the runtime library it installs, stand-ins and data.
GENERATOR_FILES = ("scripts/demo_fleet.py", "scripts/demo_cts.py", "scripts/demo_platform.py",
                   "scripts/scratch_host.py", "tests/pcibuild.py", "tests/modharness.py")
INPUT_DIRS = ("module_utils", "tests/standins", "tests/fixtures/realdata")


def input_digests():
    """{path relative to the clone: sha256} of GENERATOR_FILES and every file under INPUT_DIRS."""
    paths = set(GENERATOR_FILES)
    for top in INPUT_DIRS:
        for base, dirs, files in os.walk(os.path.join(TOP, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            paths.update(os.path.relpath(os.path.join(base, f), TOP) for f in files if not f.endswith(".pyc"))
    digests = {}
    for rel in sorted(paths):
        with open(os.path.join(TOP, rel), "rb") as handle:
            digests[rel] = hashlib.sha256(handle.read()).hexdigest()
    return digests


def read_stamp(out):
    try:
        with open(os.path.abspath(out) + STAMP) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def ensure(out=DEFAULT_OUT):
    """Generate every host's tree into ``out`` unless it is already there from the same inputs.
    Returns True when it generated.  Concurrent callers (pytest-xdist, parallel phases) wait on a lock;
    a half-written generation never replaces a good one (new trees are built beside and renamed in)."""
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    with open(os.path.abspath(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = read_stamp(out)
        if stamp.get("hosts") == sorted(HOSTS) and stamp.get("inputs") == input_digests():
            return False
        fresh = tempfile.mkdtemp(prefix=".snapshots-", dir=parent)
        os.chmod(fresh, 0o755)
        try:
            if os.path.exists(os.path.abspath(out) + STAMP):
                os.unlink(os.path.abspath(out) + STAMP)  # (a run killed from here on regenerates next time)
            generate(fresh, sorted(HOSTS))
            old = None
            if os.path.lexists(out):
                old = tempfile.mkdtemp(prefix=".snapshots-old-", dir=parent)
                os.rename(out, os.path.join(old, "snapshots"))
            os.rename(fresh, out)
            fresh = None
            if old:
                shutil.rmtree(old)
            with open(os.path.abspath(out) + STAMP, "w") as handle:
                json.dump({"generator": "scripts/demo_fleet.py --ensure", "hosts": sorted(HOSTS),
                           "inputs": input_digests()}, handle, indent=1, sort_keys=True)
        finally:
            if fresh:
                shutil.rmtree(fresh, ignore_errors=True)
        return True


def compare(a, b):
    """Differences between two trees (files, symlinks, modes), as strings."""
    diffs = []
    cmp = filecmp.dircmp(a, b)

    def walk(dc, rel):
        for name in dc.left_only:
            diffs.append("only in the existing tree: %s" % os.path.join(rel, name))
        for name in dc.right_only:
            diffs.append("only in generated tree: %s" % os.path.join(rel, name))
        for name in dc.common_files + dc.common_dirs:
            pa, pb = os.path.join(dc.left, name), os.path.join(dc.right, name)
            if os.path.islink(pa) or os.path.islink(pb):
                if not (os.path.islink(pa) and os.path.islink(pb)) or os.readlink(pa) != os.readlink(pb):
                    diffs.append("symlink differs: %s" % os.path.join(rel, name))
        for name in dc.common_files:
            pa, pb = os.path.join(dc.left, name), os.path.join(dc.right, name)
            if os.path.islink(pa) or os.path.islink(pb):
                continue  # (compared as links above)
            with open(pa, "rb") as fa, open(pb, "rb") as fb:
                if fa.read() != fb.read():
                    diffs.append("content differs: %s" % os.path.join(rel, name))
        for name, sub in dc.subdirs.items():
            if not os.path.islink(os.path.join(dc.left, name)):
                walk(sub, os.path.join(rel, name))

    walk(cmp, "")
    return diffs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--hosts", default=",".join(sorted(HOSTS)))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--ensure", action="store_true", help="generate all hosts into --out unless up to date")
    mode.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare with --out")
    args = parser.parse_args()
    hosts = [h for h in args.hosts.split(",") if h]
    for host in hosts:
        if host not in HOSTS:
            parser.error("unknown host %s" % host)
    if args.ensure:
        made = ensure(args.out)
        print("demo fleet %s %s" % ("generated in" if made else "up to date in", args.out))
        return 0
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp, hosts)
            diffs = []
            for host in hosts:
                diffs += compare(os.path.join(args.out, host), os.path.join(tmp, host))
        for line in diffs[:50]:
            print(line)
        print("demo fleet: %s" % ("the same when generated again" if not diffs else
                                  "%d differences between two generations" % len(diffs)))
        return 1 if diffs else 0
    generate(args.out, hosts)
    print("demo fleet written to %s (%s)" % (args.out, ", ".join(hosts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
