# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check catalogue: every check pvetune knows, as data.

One entry per check: id, the concern that owns it (the package concerns/<concern>/, whose checks.py CHECKS holds
its evaluator), summary (what it holds a host to, one line of markdown: README's table), title, severity, the
expected value (a template filled from the policy), why it matters, how to fix it by hand (remediation: no pvetune
command line, the report derives that per host from the fields below), the fix playbook tag (fix_tag; fix_tags,
which includes it, when the fix needs more tags, in the order the fix runs them), and whether the fix needs a
reboot (reboot: yes, no, or "when ..." = when the result asks for one).  The evaluators produce the current value
and the status; everything an operator reads comes from here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

STATUSES = ("pass", "fail", "warn", "pending", "skip", "error")

CATALOGUE = (
    {
        "id": "cpu.scaling_driver",
        "concern": "cpufreq",
        "summary": (
            "the vendor's P-state driver in active mode: amd-pstate-epp on AMD, intel_pstate (HWP) on Intel; not "
            "acpi-cpufreq"
        ),
        "title": "CPU frequency driver: {pstate_driver} in {pstate_mode} mode",
        "severity": "high",
        "expected": "{scaling_driver} on every policy",
        "rationale": (
            "acpi-cpufreq only knows the few ACPI P-states of a server CPU and reacts in milliseconds; amd-pstate "
            "(CPPC) and intel_pstate (HWP) let the hardware pick each core's frequency within microseconds, and in "
            "active mode the EPP hint keeps the cores that feed the GPUs (kernel launches, NCCL, tokenisation) at "
            "full boost. acpi-cpufreq was one of the causes of the reference host serving 10 tok/s instead of 309."
        ),
        "remediation": "{pstate_remediation}",
        "fix_tag": "cpu",
        "fix_tags": ("cpu", "cmdline"),
        "reboot": "when the P-state driver is not loaded",
    },
    {
        "id": "cpu.governor",
        "concern": "cpufreq",
        "summary": "`performance` on every cpufreq policy",
        "title": "CPU frequency governor: performance on every policy",
        "severity": "high",
        "expected": "{governor} on every policy",
        "rationale": (
            "powersave/schedutil/ondemand lower clocks between bursts; GPU-bound serving is a stream of short "
            "CPU bursts, each of which then starts at a low clock."
        ),
        "remediation": (
            "Set scaling_governor to performance on every policy (cpupower frequency-set -g performance) and "
            "make it persistent; pvetune installs pvetune-cpufreq.service."
        ),
        "fix_tag": "cpu",
        "reboot": "no",
    },
    {
        "id": "cpu.epp",
        "concern": "cpufreq",
        "summary": "EPP `performance` where the driver offers EPP",
        "title": "Energy-performance preference: performance (where the driver offers EPP)",
        "severity": "medium",
        "expected": "{epp} on every policy that has energy_performance_preference",
        "rationale": (
            "In amd-pstate active mode the EPP hint decides how eagerly a core boosts; balance_power and power "
            "trade latency for watts. With the performance governor the driver forces EPP to performance."
        ),
        "remediation": (
            "Write performance to energy_performance_preference on every policy (after the governor); "
            "pvetune-cpufreq.service re-applies it at boot."
        ),
        "fix_tag": "cpu",
        "reboot": "no",
    },
    {
        "id": "cpu.cstates",
        "concern": "cstates",
        "summary": (
            "the limit of the idle driver in use effective (`processor.max_cstate=1` for acpi_idle, "
            "`intel_idle.max_cstate=1` for intel_idle), no enabled idle state deeper than C1"
        ),
        "title": "C-states: {cstate_arg} effective, nothing deeper than C{max_cstate} enabled",
        "severity": "high",
        "expected": "{cstate_arg} on /proc/cmdline and no enabled idle state deeper than C{max_cstate}",
        "rationale": (
            "Waking a core from a deep C-state costs tens to hundreds of microseconds; every GPU completion "
            "interrupt and every host-side step of the serving loop pays it."
        ),
        "remediation": (
            "Add {cstate_arg} to the kernel command line (the limit of {idle_driver}, the idle driver in use) and "
            "reboot; until then deeper states can be disabled at runtime through cpu*/cpuidle/state*/disable."
        ),
        "fix_tag": "cmdline",
        "fix_tags": ("cmdline", "cpu"),
        "reboot": "yes",
    },
    {
        "id": "kernel.numa_balancing",
        "concern": "numa",
        "summary": "0 at runtime and persisted",
        "title": "Automatic NUMA balancing off",
        "severity": "high",
        "expected": "kernel.numa_balancing = {numa_balancing} at runtime and persisted in /etc/sysctl.d",
        "rationale": (
            "NUMA balancing periodically unmaps pages to sample which node touches them (NUMA hinting faults) "
            "and migrates them: latency spikes in the serving process and migrations of memory the GPUs DMA "
            "from. Placement on a dual-socket GPU host is better done explicitly (numactl, CPU affinity)."
        ),
        "remediation": (
            "sysctl -w kernel.numa_balancing={numa_balancing} and persist it in /etc/sysctl.d/90-pvetune.conf "
            "(or numa_balancing=disable on the kernel command line)."
        ),
        "fix_tag": "sysctl",
        "reboot": "no",
    },
    {
        "id": "pcie.mrrs",
        "concern": "pcie",
        "summary": "MaxReadReq 4096 on every NVIDIA function, read from the binary config space",
        "title": "PCIe Max Read Request Size {pcie_mrrs} on every NVIDIA GPU",
        "severity": "high",
        "expected": ("MaxReadReq {pcie_mrrs} bytes on every NVIDIA function (vendor {pcie_vendor}, "
                     "class {pcie_class_prefix}xx)"),
        "rationale": (
            "MaxReadReq caps each DMA read the GPU issues to host memory; at 512 bytes a host-to-device copy "
            "needs eight times as many requests and completions as at 4096, which costs bandwidth on large "
            "transfers (model loading, KV-cache offload, tensor-parallel traffic through host memory)."
        ),
        "remediation": (
            "Masked write of Device Control bits 14:12: setpci -s <BDF> CAP_EXP+8.w=5000:7000 (never unmasked: "
            "bit 15 resets the function). Not persistent: pvetune installs pvetune-pcie-mrrs.service, ordered "
            "before pve-guests.service."
        ),
        "fix_tag": "pcie",
        "reboot": "no",
    },
    {
        "id": "pcie.link",
        "concern": "pcie",
        "summary": "link speed/width vs capability (idle downclock is a warning, not a failure)",
        "title": "PCIe link of every NVIDIA GPU at its capability",
        "severity": "medium",
        "expected": "LnkSta speed and width equal to LnkCap (speed may drop at idle)",
        "rationale": (
            "A link trained at fewer lanes cuts host-device bandwidth for good. A lower speed at full width is "
            "usually idle power management (the GPU retrains to full speed under load), so it is reported as a "
            "warning: check it again under load (nvidia-smi -q -d PCIE)."
        ),
        "remediation": (
            "Width below capability: reseat the GPU or riser, check the slot's bifurcation and BIOS link settings. "
            "Speed below capability at idle: re-check under load before acting."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.topology",
        "concern": "pcie",
        "summary": (
            "the path between every pair of GPUs (PIX/PXB/PHB/NODE/SYS, as `nvidia-smi topo -m`), from the sysfs "
            "device tree, so it works on a snapshot; a matrix in the HTML report"
        ),
        "title": "PCIe path between every pair of GPUs (informational)",
        "severity": "info",
        "expected": "informational: the nvidia-smi topo -m matrix, computed from the sysfs device tree",
        "rationale": (
            "Tensor-parallel serving moves activations between GPUs on every layer (NCCL all-reduce). GPUs behind "
            "one PCIe switch (PIX) exchange data through the switch; PHB goes through the CPU's root complex, NODE "
            "between root complexes of one socket and SYS over the inter-socket link, each slower than the one "
            "before. The matrix shows which GPUs to give one CT, and which ports the ACS check looks at."
        ),
        "remediation": "Give each tensor-parallel group GPUs with the closest path (PIX, else PXB, else PHB).",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.acs",
        "concern": "pcie",
        "summary": (
            "no ACS Request/Completion Redirect or Egress Control on the switch ports between two GPUs (ports of a "
            "switch with a vfio-pci device skip); fix opt-in with `pcie_acs_fix`"
        ),
        "title": "ACS lets GPU peer traffic stay inside the PCIe switch",
        "severity": "high",
        "expected": "ReqRedir- CmpltRedir- EgressCtrl- on every switch port between two GPUs (policy gpu_p2p: "
                    "{gpu_p2p})",
        "rationale": (
            "Access Control Services Request Redirect, Completion Redirect and Egress Control on a switch's "
            "downstream port send every peer-to-peer transaction of the GPU below it up to the root complex (and "
            "through the IOMMU) instead of across the switch: NCCL's P2P transfers between GPUs of one switch then "
            "run at a fraction of the switch's bandwidth, or hang. The kernel sets these bits on every port when an "
            "IOMMU is on, to keep IOMMU groups apart; that matters only where a device below the port is passed to "
            "a VM (bound to vfio-pci), and those ports are left as they are."
        ),
        "remediation": (
            "Clear only the redirect bits of ACS Control on the ports named: setpci -s <port> "
            "ECAP_ACS+6.w=0000:002c (a masked write; Source Validation and the other bits stay), re-applied at every "
            "boot; pvetune does this with policy pcie_acs_fix: true. Never on a port above a vfio-pci device. The "
            "kernel forms IOMMU groups at boot, with ACS on: afterwards the GPUs of that switch still show separate "
            "groups but are no longer isolated from each other, so do not pass one of them to a VM (hostpci) "
            "without rollback.yml and a reboot."
        ),
        "fix_tag": "pcie",
        "reboot": "no",
    },
    {
        "id": "pcie.bar1",
        "concern": "pcie",
        "summary": (
            "each GPU's BAR1 at the largest size its Resizable BAR capability supports (a warning naming the "
            "firmware settings)"
        ),
        "title": "Every GPU maps the BAR1 its Resizable BAR capability allows",
        "severity": "medium",
        "expected": "BAR1 at the largest size the GPU's Resizable BAR capability supports",
        "rationale": (
            "BAR1 is the window through which the CPU and peer devices (GPUDirect RDMA and P2P, pinned host copies "
            "through the BAR) reach GPU memory. A GPU whose Resizable BAR capability supports the whole framebuffer "
            "but maps 256 MB has its BAR1 mappings recycled under load. The firmware sizes it at boot: the OS "
            "cannot fix it for a bound driver."
        ),
        "remediation": (
            "In the BIOS/UEFI setup enable Above 4G Decoding (MMIO above 4 GB, 64-bit MMIO) and Resizable BAR "
            "(Re-Size BAR Support), and give MMIO high enough space (MMIOH size) for every GPU; then reboot."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.sriov",
        "concern": "pcie",
        "summary": "informational: GPUs that offer SR-IOV and how many VFs are on",
        "title": "SR-IOV on the GPUs (informational)",
        "severity": "info",
        "expected": "informational: the GPUs that offer SR-IOV virtual functions and how many are enabled",
        "rationale": (
            "GPUs that offer SR-IOV (vGPU on data-centre boards) can be split into virtual functions for VMs; "
            "enabled VFs take BAR space and IOMMU groups from the physical function."
        ),
        "remediation": ("Nothing to do for performance; disable unused VFs (echo 0 > sriov_numvfs) if the host keeps "
                        "the whole GPU."),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "kernel.version",
        "concern": "kernel",
        "summary": "the policy's kernel series running (pinned but not running = pending)",
        "title": "Kernel series {kernel_series} running",
        "severity": "medium",
        "expected": "a {kernel_series}.x kernel running, and pinned or default for the next boot",
        "rationale": (
            "The reference host needed the 6.14 series: the 6.8 kernel it ran lacked the amd-pstate and platform "
            "support this hardware needs. Pinning keeps an apt upgrade from silently switching series."
        ),
        "remediation": (
            "apt install {kernel_package}; proxmox-boot-tool kernel pin <version>; reboot."
        ),
        "fix_tag": "kernel",
        "reboot": "yes",
    },
    {
        "id": "boot.cmdline",
        "concern": "bootargs",
        "summary": "required args configured in the boot loader the host really uses, and effective",
        "title": "Kernel command line has the required arguments (configured and effective)",
        "severity": "high",
        "expected": "{cmdline_required_str} configured in the active boot loader and present in /proc/cmdline",
        "rationale": (
            "Boot arguments only take effect through the boot loader the host really uses: GRUB reads "
            "/etc/default/grub(.d), systemd-boot (ZFS on UEFI) reads /etc/kernel/cmdline through "
            "proxmox-boot-tool. Editing the other one changes nothing."
        ),
        "remediation": (
            "GRUB: add the args to GRUB_CMDLINE_LINUX_DEFAULT and run update-grub (proxmox-boot-tool refresh when "
            "it manages the ESPs); systemd-boot: edit /etc/kernel/cmdline and run proxmox-boot-tool refresh; then "
            "reboot."
        ),
        "fix_tag": "cmdline",
        "reboot": "yes",
    },
    {
        "id": "lxc.gpu_devices",
        "concern": "lxcgpu",
        "summary": (
            "GPU CTs allow the *current* NVIDIA majors; stale lines named. Judged as pct and LXC read the config "
            "(docs/DESIGN.md): a trailing `# comment` after `rwm` is ignored as LXC ignores it and kept on rewrite; "
            "nodes bound from any directory count by their target; hooks that mknod are read; an unprivileged CT's "
            "allow lines have no effect (Proxmox makes its device list allow-all). A running CT whose config is "
            "right but whose last start (`/var/lib/lxc/<id>/config`, written by Proxmox) had other majors is "
            "pending until it restarts"
        ),
        "title": "GPU containers allow the host's current NVIDIA device majors",
        "severity": "critical",
        "expected": ("every NVIDIA node a CT mounts is covered by an allow line with its current major, "
                     "mount sources exist"),
        "rationale": (
            "nvidia-uvm, nvidia-caps and nvidia-nvlink get dynamic character majors that change across reboots "
            "and driver updates. A CT whose lxc.cgroup2.devices.allow lines name an old major cannot open "
            "/dev/nvidia-uvm and CUDA fails inside it (cuInit error 999 / 'no CUDA-capable device')."
        ),
        "remediation": (
            "Regenerate the CT's NVIDIA allow lines from /proc/devices (or use devN: entries, Proxmox 8.1+, which "
            "follow the major automatically) and restart the CT. pvetune installs pvetune-lxc-gpu.service to do "
            "this at boot before pve-guests.service."
        ),
        "fix_tag": "lxc",
        "reboot": "no",
    },
    {
        "id": "nvidia.driver",
        "concern": "nvidia",
        "summary": "the NVIDIA driver is loaded (`/proc/driver/nvidia/version`)",
        "title": "NVIDIA driver loaded",
        "severity": "medium",
        "expected": "driver loaded (/proc/driver/nvidia/version)",
        "rationale": (
            "Without the kernel module no GPU is usable on the host or in a CT; a GPU left on nouveau or no driver "
            "after a kernel update (DKMS not built for it) is the usual cause."
        ),
        "remediation": "Install the NVIDIA driver for the running kernel (DKMS or the .run installer) and load it.",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "nvidia.persistence",
        "concern": "nvidia",
        "summary": (
            "persistence mode on every GPU, held by the `nvidia-persistenced` daemon (legacy `nvidia-smi -pm 1` "
            "warns: NVIDIA deprecates it and it is gone after a reboot)"
        ),
        "title": "Persistence mode on every GPU, held by nvidia-persistenced",
        "severity": "medium",
        "expected": "persistence mode enabled on every GPU and nvidia-persistenced running (policy "
                    "nvidia_persistence: {nvidia_persistence})",
        "rationale": (
            "Without persistence the driver tears a GPU's state down when its last client exits; the next CUDA "
            "context pays seconds of initialisation, and in CTs the first call can time out. NVIDIA's Driver "
            "Persistence guide (docs.nvidia.com/deploy/driver-persistence) names the nvidia-persistenced daemon as "
            "the way to keep it and the legacy persistence mode (nvidia-smi -pm 1) as deprecated; the legacy mode "
            "also does not survive a reboot."
        ),
        "remediation": "systemctl enable --now nvidia-persistenced (shipped with the driver).",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "nvidia.uvm_hmm",
        "concern": "nvidia",
        "summary": (
            "nvidia-uvm's HMM (`uvm_disable_hmm`, `Addressing Mode: HMM`) against a sourced table of driver "
            "branches where HMM breaks CUDA initialisation or deadlocks; configured in modprobe.d but not loaded is "
            "pending"
        ),
        "title": "nvidia-uvm HMM off where the driver branch has known HMM failures",
        "severity": "medium",
        "expected": "uvm_disable_hmm=Y where the driver branch is in the HMM issues table (policy "
                    "nvidia_uvm_hmm: {nvidia_uvm_hmm})",
        "rationale": (
            "From the r535 open kernel modules nvidia-uvm enables HMM on x86_64 when the kernel supports it. On some "
            "kernels (KASLR) HMM initialisation fails and cuInit returns CUDA_ERROR_NOT_INITIALIZED, and multi-GPU "
            "Blackwell hosts hit HMM deadlocks (the issues table in docs/checks.md, with NVIDIA's CUDA release "
            "notes' known issue). Serving engines do not use HMM: turning it off costs them nothing."
        ),
        "remediation": (
            "Add 'options nvidia_uvm uvm_disable_hmm=1' to /etc/modprobe.d/ (pvetune writes it with policy "
            "nvidia_uvm_hmm_fix), update the initramfs when it loads nvidia_uvm, and reload nvidia_uvm with no GPU "
            "process running, or reboot."
        ),
        "fix_tag": "nvidia",
        "reboot": "when the loaded nvidia_uvm still runs HMM",
    },
    {
        "id": "iommu.mode",
        "concern": "iommu",
        "summary": (
            "host-owned GPUs in identity IOMMU domains (`iommu=pt`, added by the cmdline fix); vfio-pci GPUs skip"
        ),
        "title": "Host-owned GPUs in an identity (passthrough) IOMMU domain",
        "severity": "medium",
        "expected": "IOMMU off, or each host-owned GPU's IOMMU group of type identity (iommu=pt; policy "
                    "iommu_passthrough: {iommu_passthrough})",
        "rationale": (
            "With the IOMMU translating (domain DMA or DMA-FQ) every DMA of a host-owned GPU is translated: IOTLB "
            "misses on host-device copies and peer traffic, and map/unmap work in the driver. iommu=pt gives host "
            "devices identity mappings and keeps the IOMMU for VFIO passthrough (a GPU bound to vfio-pci gets its "
            "own domain when a VM uses it)."
        ),
        "remediation": "Add iommu=pt to the kernel command line (check boot.cmdline) and reboot.",
        "fix_tag": "cmdline",
        "reboot": "yes",
    },
    {
        "id": "numa.gpu_locality",
        "concern": "numa",
        "summary": (
            "every GPU reports its NUMA node on a multi-node host (`-1` warns, naming the firmware's ACPI SRAT/_PXM); "
            "nodes per socket (NPS) in the evidence"
        ),
        "title": "Every GPU reports its NUMA node",
        "severity": "medium",
        "expected": "on a host with several NUMA nodes, numa_node >= 0 for every GPU",
        "rationale": (
            "The driver allocates a GPU's host buffers and the scheduler places its serving process by the GPU's "
            "NUMA node. A GPU whose numa_node is -1 on a multi-node host gets them wherever the kernel happens to "
            "run: host-to-device copies then cross the socket link, and CTs cannot be pinned to the GPU's CPUs. "
            "The nodes per socket (NPS1/2/4 on EPYC) in the evidence say how fine the placement can be."
        ),
        "remediation": (
            "Update the BIOS; check that its NUMA settings expose the PCIe roots' proximity domains (ACPI SRAT/_PXM; "
            "NUMA enabled, node/memory interleaving off)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "lxc.resources",
        "concern": "lxcres",
        "summary": (
            "per GPU CT, configured (the CT config) against effective (its cgroup, while it runs): CPUs on its GPUs' "
            "NUMA nodes, >= 4 CPUs and >= 16 GiB per GPU (policy), no `cpulimit`, no swap; the pin is fixed with "
            "policy `lxc_numa_pin` (`lxc.cgroup2.cpuset.cpus`, in place, pending until the CT restarts)"
        ),
        "title": "GPU CTs get CPUs on their GPUs' NUMA nodes, enough CPUs and memory, no CPU quota, no swap",
        "severity": "high",
        "expected": ("per GPU CT: CPUs on its GPUs' NUMA nodes, >= {lxc_min_cpus_per_gpu} CPUs and >= "
                     "{lxc_min_memory_per_gpu} MiB per GPU, no cpulimit, swap 0"),
        "rationale": (
            "A CT's cgroup limits are invisible inside it: nproc and /proc/meminfo show the host. A serving engine "
            "runs one busy host thread per GPU plus its NCCL proxy, tokenizer and scheduler; too few CPUs, a CPU "
            "quota (cpulimit, throttled every 100 ms period) or CPUs on the other socket stall every kernel launch. "
            "CUDA pins host memory for transfers and the engine loads weights through it; a small memory.max ends "
            "in the OOM killer, and swap turns a memory shortfall into seconds-long stalls."
        ),
        "remediation": (
            "In the CT config: cores >= the CPUs above, no cpulimit, memory >= the minimum, swap: 0, and "
            "lxc.cgroup2.cpuset.cpus set to the CPUs of the GPUs' NUMA nodes (policy lxc_numa_pin lets pvetune "
            "write it); restart the CT for it to take effect."
        ),
        "fix_tag": "lxc",
        "reboot": "no",
    },
    {
        "id": "nvidia.stack",
        "concern": "nvidia_stack",
        "summary": (
            "the kernel module flavour and first driver the GPU generation needs (Blackwell: open modules only; "
            "10de:2bb5 from 575.57.08), and in every running GPU CT the user-space driver of the host module's "
            "version (`libcuda.so.<ver>` read through `/proc/<init>/root`); the failure names both versions and the "
            "`--no-kernel-modules` install"
        ),
        "title": "NVIDIA driver fits the GPUs, and every GPU CT runs the host's user-space driver",
        "severity": "critical",
        "expected": ("the open kernel modules where the GPU generation needs them, a driver branch that supports "
                     "the GPUs, and in every running GPU CT libnvidia-ml/libcuda of the host module's version"),
        "rationale": (
            "The user-space driver (libcuda, libnvidia-ml) must be the exact version of the loaded kernel module: "
            "inside a CT that ships other libraries every CUDA and NVML call fails with 'Driver/library version "
            "mismatch', typically after the host's driver was updated. Blackwell GPUs work only with the open "
            "kernel modules, and each GPU generation needs a minimum driver branch."
        ),
        "remediation": (
            "Install the host's driver version in the CT without its kernel module (NVIDIA-Linux-x86_64-<version>"
            ".run --no-kernel-modules, or the distribution's matching user-space packages); on the host, the open "
            "kernel modules (nvidia-open / the .run installer's -m=kernel-open) of a supported branch."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "kernel.known_issues",
        "concern": "kernel",
        "summary": (
            "the running and the next boot's kernel against a sourced table (CPU family and model, GPU generation, "
            "driver): e.g. kernels before 6.13 boot EPYC Turin with acpi-cpufreq unless `amd_pstate=` is set"
        ),
        "title": "No known kernel problem for this CPU and GPU generation (running and pinned kernel)",
        "severity": "high",
        "expected": "the running and the pinned kernel outside every affected range of the known-issues table",
        "rationale": (
            "Support for new CPUs and GPUs lands in the kernel over several releases: an older series boots, but "
            "misses the CPU's frequency and power management, its sensors, or fixes the GPU driver needs. The "
            "table (docs/checks.md) lists each problem with the versions it affects and its public source."
        ),
        "remediation": "Pin a kernel of the fixed series (check kernel.version) and reboot.",
        "fix_tag": "kernel",
        "reboot": "yes",
    },
    {
        "id": "nvidia.compute_capability",
        "concern": "nvidia_stack",
        "summary": (
            "every running GPU CT's CUDA runtime (`libcudart.so.<ver>`, `libcublas.so.<ver>`) can target the GPUs' "
            "compute capability (sourced table: sm_120 needs CUDA 12.8 or later)"
        ),
        "title": "Every GPU CT's CUDA runtime supports the GPUs' compute capability",
        "severity": "high",
        "expected": "in every GPU CT, a CUDA runtime at or above the first CUDA release of the GPUs' compute "
                    "capability",
        "rationale": (
            "CUDA libraries carry machine code for the GPU architectures their release knew. A runtime older than "
            "the GPU's compute capability has no code for it: cuBLAS, cuDNN and framework kernels fail with 'no "
            "kernel image is available for execution on the device' (e.g. CUDA 12.4 on Blackwell sm_120, which "
            "CUDA 12.8 first supports: the compute capability table in docs/checks.md)."
        ),
        "remediation": (
            "Install a CUDA runtime (or a framework build) of the release in the table or later in the CT; the "
            "host's driver must support that CUDA release too (nvidia.stack)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "gpu.power_limit",
        "concern": "gpu",
        "summary": (
            "each GPU's enforced power limit at its default (or the policy's watts); a cap names the watts lost "
            "(restored with policy `gpu_power_fix`, re-applied at boot)"
        ),
        "title": "Every GPU at its default (or the policy's) power limit",
        "severity": "high",
        "expected": "power.limit at the {gpu_power_limit} limit on every GPU",
        "rationale": (
            "A power limit below the default lowers the clocks the GPU may hold under load. Throughput does not "
            "fall in proportion (a published RTX PRO 6000 sweep lost 5% of LLM output at 300 W of 600 W, and 16% at "
            "250 W), but a cap left by a test or another tool is silent: nvidia-smi shows it only in -q or "
            "--query-gpu=power.limit. An enforced limit below the requested one means the board or platform "
            "holds it (power brake)."
        ),
        "remediation": (
            "nvidia-smi -i <GPU> -pl <default watts> (or a lower cap on purpose: set the policy's gpu_power_limit "
            "to it); re-apply at every boot, the limit does not persist."
        ),
        "fix_tag": "gpu",
        "reboot": "no",
    },
    {
        "id": "gpu.clocks",
        "concern": "gpu",
        "summary": (
            "no applications clocks left set (reset with policy `gpu_clocks_fix`), no sign of locked clocks, no "
            "hardware clock event reason active (HW Slowdown, HW Thermal, Power Brake, SW Thermal: advice)"
        ),
        "title": "GPU clocks at their defaults, no hardware slowdown",
        "severity": "medium",
        "expected": "applications clocks at their defaults, no clock setting and no hardware slowdown holding the "
                    "clocks",
        "rationale": (
            "Applications clocks (nvidia-smi -ac) and locked clocks (-lgc/-lmc) survive until reset or reboot and "
            "hold every workload at them; NVML reports them as the clock event reason 'Applications Clocks "
            "Setting'. HW Slowdown, HW Thermal, HW Power Brake and SW Thermal reasons mean the GPU lowers its own "
            "clocks for heat or power delivery: no setting fixes that (NVML clock event reasons)."
        ),
        "remediation": (
            "nvidia-smi -i <GPU> -rac (applications clocks), -rgc and -rmc (locked clocks). For hardware reasons: "
            "the GPU's cooling, the inlet temperature, the PSU and the platform's power brake."
        ),
        "fix_tag": "gpu",
        "reboot": "no",
    },
    {
        "id": "gpu.health",
        "concern": "gpu",
        "summary": (
            "no Xid errors in this boot's kernel log (graded by NVIDIA's Xid catalogue), no uncorrectable AER "
            "errors on a GPU or its ports, no pending row remap, retired page or uncorrectable ECC error (advice)"
        ),
        "title": "GPUs healthy: no Xid, AER or memory errors",
        "severity": "high",
        "expected": "no Xid errors, no uncorrectable PCIe or memory errors",
        "rationale": (
            "A GPU that fell off the bus (Xid 79), lost memory (Xid 48/95, a failed row remap) or whose firmware "
            "stopped (Xid 119/120) serves nothing or corrupts results until it is reset, reseated or replaced; "
            "uncorrectable AER errors on its link usually come first. NVIDIA's Xid catalogue (docs.nvidia.com/"
            "deploy/xid-errors) grades each code; the kernel's AER counters are in sysfs."
        ),
        "remediation": (
            "Per the Xid code: reset the GPU (nvidia-smi -r with no process on it) or reboot; for Xid 79 and AER "
            "errors check the riser, the slot's seating and power; for a failed remap replace the GPU."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)

BY_ID = {c["id"]: c for c in CATALOGUE}


# Vendor-dependent template values of a policy not resolved for one host (docs/checks.md); a host's own come from
# core/cpuprofile.for_host (policy["host_cpu"]["template"]).
GENERIC_CPU_TEMPLATE = {
    "pstate_driver": "amd_pstate (AMD) or intel_pstate (Intel)",
    "pstate_remediation": ("AMD: add amd_pstate={amd} to the kernel command line and reboot, or switch a loaded "
                           "amd_pstate at runtime (echo {amd} > /sys/devices/system/cpu/amd_pstate/status); Intel: "
                           "switch intel_pstate at runtime (echo {intel} > /sys/devices/system/cpu/intel_pstate/"
                           "status), add intel_pstate={intel} only where it is not loaded; CPPC / HWP enabled in "
                           "the BIOS."),
    "cstate_arg": "processor.max_cstate={n} (acpi_idle) or intel_idle.max_cstate={n} (intel_idle)",
    "idle_driver": "acpi_idle or intel_idle",
}


def policy_context(policy):
    """Values the templates may use, derived from the policy (and, once resolved for a host, its CPU profile)."""
    ctx = dict(policy)
    own = " ".join(policy.get("cmdline_required") or [])
    ctx["cmdline_required_str"] = own or "(none)"
    amd, intel, n = policy.get("amd_pstate_mode"), policy.get("intel_pstate_mode"), policy.get("max_cstate")
    generic = {k: v.format(amd=amd, intel=intel, n=n) for k, v in GENERIC_CPU_TEMPLATE.items()}
    generic["pstate_mode"] = amd if amd == intel else "the policy's (amd_pstate_mode, intel_pstate_mode)"
    generic["scaling_driver"] = policy.get("scaling_driver") or "the mode's driver (amd-pstate-epp, intel_pstate)"
    if "host_cpu" not in policy and policy.get("cmdline_cpu_args"):
        ctx["cmdline_required_str"] = (
            "the CPU's own args (amd_pstate=%s processor.max_cstate=%s on AMD, intel_idle.max_cstate=%s on "
            "Intel)%s" % (amd, n, n, " and " + own if own else ""))
    ctx.update((k, v) for k, v in generic.items() if not ctx.get(k))
    ctx.update(((policy.get("host_cpu") or {}).get("template")) or {})
    return ctx


# The fix role's tags are the catalogue's fix_tag values (tests/unit/test_concern_tags.py holds them so).
FIX_TAGS = tuple(sorted({c["fix_tag"] for c in CATALOGUE if c.get("fix_tag")}))


def fix_tags(check_id):
    """The fix.yml tags that fix a check, in the order the fix needs them; [] when pvetune does not fix it."""
    entry = BY_ID[check_id]
    return list(entry.get("fix_tags") or ([entry["fix_tag"]] if entry["fix_tag"] else []))


def fix_needs_reboot(check_id, reboot_required=False):
    """Whether the check's fix only takes effect after a reboot: always for reboot "yes", for a "when ..." check
    when its result asks for one (``reboot_required``), never for "no"."""
    reboot = BY_ID[check_id]["reboot"]
    return reboot == "yes" or (reboot != "no" and bool(reboot_required))


def render(check_id, field, policy):
    """A catalogue text with the policy's values filled in."""
    return BY_ID[check_id][field].format(**policy_context(policy))


# The one list of severities, most severe first; everything else (ranks, choices, docs) derives from it.
SEVERITIES = ("critical", "high", "medium", "low", "info")
SEVERITY_RANK = {name: len(SEVERITIES) - 1 - i for i, name in enumerate(SEVERITIES)}
