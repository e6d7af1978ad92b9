"""GPU interrupts: the /proc/interrupts parser (formats/proc_interrupts) on real files, the reader of the facts
section "irq" (concerns/irq) on trees built in tmp_path, and the scenarios of irq.gpu_affinity.

Real inputs, tests/fixtures/realdata/irq (command output, copied unchanged, so no header line; sources here):
- proc_interrupts_duaneya_16cpu_4x_nvidia_tu102.txt: github duaneya/tool_man nvidia-bug-report.log (the same report
  as lspci_xxx/duaneya_4x_tu102_lspci_v_xxx.txt): 16 CPUs, four nvidia IRQs 107-110 (IR-PCI-MSI).
- proc_interrupts_eler_8cpu_3x_nvidia_gtx1080ti.txt: github eler/git_examples nvidia-bug-report.log (the report of
  lspci_xxx/eler_4x_gtx1080ti_plx_lspci_v_xxx.txt): 8 CPUs, nvidia IRQs 55-57, IRQ 57 never fired.
"""
import os
import time
import types

import pytest
from ansible.module_utils.pvetune.concerns.irq import checks as irq
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.proc_interrupts import handled, parse_proc_interrupts
from checkcases import assert_scenario, scenario_id, setv

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "..", "fixtures", "realdata", "irq")
DUANEYA = "proc_interrupts_duaneya_16cpu_4x_nvidia_tu102.txt"
ELER = "proc_interrupts_eler_8cpu_3x_nvidia_gtx1080ti.txt"


def real(name):
    with open(os.path.join(REAL, name)) as handle:
        return handle.read()


# -- the parser ---------------------------------------------------------------------------------------------------
def test_the_nvidia_irqs_of_a_real_16_cpu_host():
    rows = parse_proc_interrupts(real(DUANEYA))
    assert [r["irq"] for r in rows] == [107, 108, 109, 110]
    assert all(r["actions"] == ["nvidia"] and r["chip"] == "IR-PCI-MSI" and r["cpus"] == list(range(16))
               for r in rows)
    assert [r["type"] for r in rows] == ["1048576-edge", "1572864-edge", "68681728-edge", "69206016-edge"]
    assert handled(rows[0]) == [(7, 202866)]
    assert handled(rows[1]) == [(2, 107), (9, 21869)]
    assert rows[1]["counts"][2] == 107 and sum(rows[1]["counts"]) == 21976


def test_a_real_8_cpu_host_with_an_irq_that_never_fired():
    rows = parse_proc_interrupts(real(ELER))
    assert [(r["irq"], sum(r["counts"])) for r in rows] == [(55, 118), (56, 7), (57, 0)]
    assert handled(rows[2]) == []


def test_every_irq_of_the_real_files_without_a_filter():
    """wanted=None: every numeric row; shared IRQs split on ", ", action names keep their spaces, the letter rows
    (NMI, LOC, ERR, MIS ...) are not IRQs."""
    rows = {r["irq"]: r for r in parse_proc_interrupts(real(ELER), wanted=None)}
    assert len(rows) == 27 and min(rows) == 0 and max(rows) == 57
    assert rows[18]["actions"] == ["ehci_hcd:usb1", "ehci_hcd:usb2"] and rows[18]["type"] == "18-fasteoi"
    assert rows[25]["actions"] == ["PCIe PME"]
    assert rows[39]["actions"] == ["0000:00:11.4"]
    assert rows[48]["chip"] == "DMAR-MSI" and rows[48]["actions"] == ["dmar0"]
    assert len(parse_proc_interrupts(real(DUANEYA), wanted=None)) == 71


def test_irqs_are_parsed_by_number_whatever_their_driver():
    rows = parse_proc_interrupts(real(ELER), irqs={40, 55})  # and, by the default wanted, every nvidia IRQ
    assert [(r["irq"], r["actions"]) for r in rows] == [(40, ["enp10s0"]), (55, ["nvidia"]), (56, ["nvidia"]),
                                                         (57, ["nvidia"])]
    assert [r["irq"] for r in parse_proc_interrupts(real(ELER), wanted=None, irqs={40})] == [40]


# The column layouts of other kernels and architectures, as public /proc/interrupts outputs show them.
@pytest.mark.parametrize("tail, chip, kind, actions", [
    ("IR-PCI-MSI-0000:01:00.0    0-edge      nvidia", "IR-PCI-MSI-0000:01:00.0", "0-edge", ["nvidia"]),  # 6.x
    ("PCI-MSI-edge      nvidia", "PCI-MSI-edge", "", ["nvidia"]),                                       # 2.6 / 3.x
    ("IO-APIC-fasteoi   ehci_hcd:usb1, nvidia", "IO-APIC-fasteoi", "", ["ehci_hcd:usb1", "nvidia"]),
    ("ITS-MSI 524288 Edge      nvidia", "ITS-MSI", "524288 Edge", ["nvidia"]),                          # arm64
    ("GICv3  27 Level     kvm guest vtimer, nvidia", "GICv3", "27 Level", ["kvm guest vtimer", "nvidia"]),
    ("xen-pirq    -msi       nvidia", "xen-pirq", "-msi", ["nvidia"]),
])
def test_chip_and_type_columns_of_other_kernels(tail, chip, kind, actions):
    text = "           CPU0       CPU2\n 42:          5          0   %s\n" % tail
    (row,) = parse_proc_interrupts(text)
    assert (row["chip"], row["type"], row["actions"], row["cpus"], row["counts"]) == (chip, kind, actions, [0, 2],
                                                                                        [5, 0])


@pytest.mark.parametrize("text, line", [
    ("", 1),
    ("\n\n", 1),
    ("           CPU0       CPUX\n", 1),
    ("  0:  1  IO-APIC 2-edge timer\n", 1),                                          # no header
    ("   CPU0   CPU1\n 42:   5   PCI-MSI 1-edge nvidia\n", 2),                      # a count missing
    ("   CPU0   CPU1\n 42:   5   x7   PCI-MSI 1-edge nvidia\n", 2),                 # a count that is no number
    ("   CPU0   CPU1\n\n 41:   1   2   PCI-MSI 1-edge nvidia\nthis is no row\n", 4),  # no "<label>:"
    ("   CPU0   CPU1\n 41:   1   2   PCI-MSI 1-edge nvidia\n 42:   1\n", 3),       # truncated, but IRQ 42 is wanted
])
def test_malformed_text_names_its_line(text, line):
    with pytest.raises(ValueError, match=r"/proc/interrupts line %d: " % line):
        parse_proc_interrupts(text, irqs={42})


def test_a_256_cpu_host_parses_only_the_wanted_lines():
    header = "      " + "".join("CPU%-8d" % n for n in range(256)) + "\n"
    rows = ["%4d: %s IR-PCI-MSI-0000:41:00.0 %d-edge      %s\n" % (
        n, " ".join("%10d" % (n if c == n % 256 else 0) for c in range(256)), n,
        "nvidia" if n % 100 == 0 else "mlx5_comp%d@pci:0000:c1:00.0" % n) for n in range(1, 1001)]
    text = header + "".join(rows)
    start = time.time()
    parsed = parse_proc_interrupts(text)
    assert time.time() - start < 1.0  # about 5 ms; the generous bound only catches a full parse of every line
    assert [r["irq"] for r in parsed] == list(range(100, 1001, 100))
    assert handled(parsed[0]) == [(100, 100)] and len(parsed[0]["counts"]) == 256


# -- the reader -----------------------------------------------------------------------------------------------------
def write(root, host_path, text):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


# The duaneya host's four GPUs: on x86 a PCI-MSI hwirq >> 11 is the function's requester ID, so IRQs 107-110 are
# 02:00.0, 03:00.0, 83:00.0 and 84:00.0. The two nodes (CPUs 0-7, 8-15) are this test's own.
DUANEYA_GPUS = (("0000:02:00.0", 107, 0, "7"), ("0000:03:00.0", 108, 0, "2"), ("0000:83:00.0", 109, 1, "9"),
                ("0000:84:00.0", 110, 1, "10"))


def gpu_fn(bdf, node, driver="nvidia"):
    root = "pci0000:00" if bdf < "0000:80" else "pci0000:80"
    return {"bdf": bdf, "path": "/sys/devices/%s/%s" % (root, bdf), "numa_node": node, "is_gpu": True,
            "driver": driver}


def two_nodes():
    return {"nodes": [{"node": 0, "cpus": list(range(8)), "socket": 0},
                      {"node": 1, "cpus": list(range(8, 16)), "socket": 1}], "errors": [], "evidence": []}


def duaneya_tree(root):
    write(root, "/proc/interrupts", real(DUANEYA))
    functions = []
    for bdf, number, node, effective in DUANEYA_GPUS:
        fn = gpu_fn(bdf, node)
        functions.append(fn)
        write(root, "%s/msi_irqs/%d" % (fn["path"], number), "msi\n")
        write(root, "/proc/irq/%d/smp_affinity_list" % number, "0-15\n")
        write(root, "/proc/irq/%d/effective_affinity_list" % number, effective + "\n")
    write(root, "/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "812\n")
    write(root, "/etc/default/irqbalance", "#IRQBALANCE_BANNED_CPULIST=\nIRQBALANCE_BANNED_CPULIST=\"0-1\"\n")
    return {"pci": {"functions": functions, "evidence": []}, "numa": two_nodes()}


def read(root, facts):
    return irq.read_irq(types.SimpleNamespace(fsroot=FsRoot(str(root)), facts=facts))


def test_the_reader_on_a_real_interrupts_file(tmp_path):
    facts = duaneya_tree(tmp_path)
    data = read(tmp_path, facts)
    assert data["errors"] == []
    assert [(g["bdf"], g["node"], g["source"]) for g in data["gpus"]] == [
        (bdf, node, "msi_irqs") for bdf, _n, node, _e in DUANEYA_GPUS]
    second = data["gpus"][1]["irqs"][0]
    assert second == {"irq": 108, "affinity": list(range(16)), "effective": [2], "handled_on": [2, 9],
                      "handled_counts": [107, 21869], "count": 21976, "actions": ["nvidia"]}
    assert data["irqbalance"] == {"running": True, "installed": False, "banned": {"IRQBALANCE_BANNED_CPULIST": "0-1"},
                                  "procs_file": irq.IRQBALANCE_PROCS[0], "errors": []}
    assert "/proc/interrupts: 4 of the GPUs' 4 IRQs listed, 4 with an nvidia action" in data["evidence"]
    facts["irq"] = data
    res = irq.check_gpu_affinity(facts, {})
    assert res["status"] == "warn"
    assert res["message"] == ("0000:03:00.0: IRQ 108: 99% of its 21976 interrupts since boot handled on CPUs 9, off "
                              "node 0 | irqbalance runs with IRQBALANCE_BANNED_CPULIST=0-1")
    assert [i["status"] for i in res["items"]] == ["pass", "warn", "pass", "pass"]
    assert "irqbalance: running (%s)" % irq.IRQBALANCE_PROCS[0] in res["evidence"]


def test_the_legacy_irq_file_and_bad_files_are_one_gpus_errors(tmp_path):
    facts = {"pci": {"functions": [gpu_fn("0000:02:00.0", 0), gpu_fn("0000:03:00.0", 0), gpu_fn("0000:04:00.0", 0),
                                   gpu_fn("0000:05:00.0", 0, driver=None)]}}
    paths = [f["path"] for f in facts["pci"]["functions"]]
    write(tmp_path, paths[0] + "/irq", "42\n")                          # no msi_irqs: the legacy IRQ
    write(tmp_path, "/proc/irq/42/smp_affinity_list", "0-3\n")          # no effective_affinity_list: an older kernel
    write(tmp_path, paths[1] + "/msi_irqs/43", "msi\n")
    write(tmp_path, paths[1] + "/msi_irqs/bogus", "msi\n")
    write(tmp_path, "/proc/irq/43/smp_affinity_list", "0-3,zz\n")
    write(tmp_path, paths[2] + "/msi_irqs/44", "msi\n")                 # /proc/irq/44 missing
    write(tmp_path, paths[3] + "/irq", "11\n")                          # no driver: its INTx is not its own
    write(tmp_path, "/proc/interrupts", "   CPU0   CPU1   CPU2   CPU3\n 42:   0   0   5   0   IO-APIC 16-fasteoi   "
                                        "nvidia\n 44:   1   0   0   0   PCI-MSI 1-edge   nvidia\n")
    data = read(tmp_path, facts)
    first, second, third, fourth = data["gpus"]
    assert first["source"] == "irq" and first["errors"] == []
    assert first["irqs"] == [{"irq": 42, "affinity": [0, 1, 2, 3], "effective": None, "handled_on": [2],
                              "handled_counts": [5], "count": 5, "actions": ["nvidia"]}]
    assert second["errors"] == ["%s/msi_irqs: 'bogus' is not an IRQ number" % paths[1],
                                "/proc/irq/43/smp_affinity_list: bad CPU number 'zz'"]
    assert second["irqs"][0]["count"] == 0 and second["irqs"][0]["handled_on"] == []  # not listed: never requested
    assert third["errors"] == ["/proc/irq/44/smp_affinity_list: No such file or directory"]
    assert (fourth["source"], fourth["irqs"], fourth["errors"]) == ("no driver bound", [], [])
    assert data["errors"] == ["0000:03:00.0: " + e for e in second["errors"]] + ["0000:04:00.0: " + third["errors"][0]]
    assert data["irqbalance"]["running"] is False and data["irqbalance"]["procs_file"] is None


def test_an_unreadable_interrupts_file_is_every_gpus_error(tmp_path):
    facts = duaneya_tree(tmp_path)
    os.remove(os.path.join(str(tmp_path), "proc", "interrupts"))
    write(tmp_path, "/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "")
    data = read(tmp_path, facts)
    assert all(g["errors"] == ["/proc/interrupts: No such file or directory"] for g in data["gpus"])
    assert data["gpus"][0]["irqs"][0]["count"] is None and data["irqbalance"]["running"] is False
    write(tmp_path, "/proc/interrupts", "CPU0 CPU1\n 107: 1 PCI-MSI 1-edge nvidia\n")
    assert read(tmp_path, facts)["gpus"][0]["errors"] == [
        "/proc/interrupts line 2: IRQ 107: count 2 of 2 is 'PCI-MSI', not a number (one count per header CPU)"]


def test_no_gpu_reads_nothing(tmp_path):
    data = read(tmp_path, {"pci": {"functions": [dict(gpu_fn("0000:02:00.0", 0), is_gpu=False)]}})
    assert (data["gpus"], data["errors"]) == ([], [])


# -- irq.gpu_affinity ------------------------------------------------------------------------------------------------
def good_facts():
    """Two NUMA nodes (CPUs 0-7, 8-15), a GPU on each, each GPU's one MSI IRQ routed to and handled on its node,
    irqbalance running."""
    gpus = [("0000:41:00.0", 0, 229, 3), ("0000:c1:00.0", 1, 231, 12)]
    return {
        "pci": {"functions": [gpu_fn(bdf, node) for bdf, node, _irq, _cpu in gpus], "evidence": []},
        "numa": two_nodes(),
        "irq": {"gpus": [{"bdf": bdf, "node": node, "source": "msi_irqs", "errors": [], "irqs": [
                    {"irq": number, "affinity": list(range(16)), "effective": [cpu], "handled_on": [cpu],
                     "handled_counts": [52000], "count": 52000, "actions": ["nvidia"]}]}
                         for bdf, node, number, cpu in gpus],
                "irqbalance": {"running": True, "procs_file": irq.IRQBALANCE_PROCS[0], "installed": True,
                               "banned": {}, "errors": []},
                "errors": [], "evidence": ["0000:41:00.0: msi_irqs 229", "0000:c1:00.0: msi_irqs 231"]},
    }


def irq_of(gpu, *path):
    return ("irq", "gpus", gpu, "irqs", 0) + path


SCENARIOS = [
    ("irq.gpu_affinity", "pass", [], None, "2 IRQs of 2 GPUs on their NUMA node", False),
    ("irq.gpu_affinity", "warn", [setv(irq_of(1, "effective"), [3])], None,
     "0000:c1:00.0: IRQ 231 effective affinity CPUs 3 has no CPU of node 1", False),
    ("irq.gpu_affinity", "warn", [setv(irq_of(1, "effective"), [3]), setv(("irq", "irqbalance", "running"), False)],
     None, "| irqbalance is not running: run it (it places each IRQ on its device's numa_node) or write the GPU "
           "node's CPUs to /proc/irq/N/smp_affinity_list, re-applied at boot", False),
    ("irq.gpu_affinity", "warn", [setv(irq_of(1, "effective"), None), setv(irq_of(1, "affinity"), list(range(8)))],
     None, "IRQ 231 smp_affinity_list CPUs 0-7 has no CPU of node 1", False),
    ("irq.gpu_affinity", "warn", [setv(irq_of(0, "handled_on"), [2, 9]), setv(irq_of(0, "handled_counts"),
                                                                               [1000, 51000])],
     None, "IRQ 229: 98% of its 52000 interrupts since boot handled on CPUs 9, off node 0", False),
    ("irq.gpu_affinity", "pass", [setv(irq_of(0, "handled_on"), [3, 9]), setv(irq_of(0, "handled_counts"),
                                                                               [26000, 26000])],
     None, "2 IRQs of 2 GPUs on their NUMA node", False),                     # half off node is not "mostly"
    ("irq.gpu_affinity", "pass", [setv(("pci", "functions", 0, "numa_node"), -1)], None,
     "1 IRQ of 1 GPU on their NUMA node", False),
    ("irq.gpu_affinity", "skip", [setv(("numa", "nodes"), [{"node": 0, "cpus": list(range(16)), "socket": 0}])],
     None, "one NUMA node: every CPU is local", False),
    ("irq.gpu_affinity", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("irq.gpu_affinity", "error", [setv(("irq",), {"error": "/proc/irq: Permission denied"})], None,
     "/proc/irq: Permission denied", False),
    ("irq.gpu_affinity", "error", [setv(("irq", "gpus", 0, "errors"),
                                        ["/proc/irq/229/smp_affinity_list: Permission denied"])], None,
     "0000:41:00.0: /proc/irq/229/smp_affinity_list: Permission denied", False),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario_id(s) for s in SCENARIOS])
def test_scenario(scenario):
    assert_scenario(good_facts(), scenario)
