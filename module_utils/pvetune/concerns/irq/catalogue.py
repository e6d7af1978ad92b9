# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The irq concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "irq.gpu_affinity",
        "summary": (
            "every GPU's interrupts routed to and handled on CPUs of the GPU's NUMA node (effective affinity, "
            "/proc/interrupts counts); irqbalance state in the evidence"
        ),
        "title": "GPU interrupts on the GPU's NUMA node",
        "severity": "low",
        "expected": (
            "on a host with several NUMA nodes, the effective affinity of each GPU IRQ (else smp_affinity_list) "
            "includes a CPU of the GPU's node, and most of its interrupts were handled there"
        ),
        "rationale": (
            "/proc/irq/N/smp_affinity_list names the CPUs an IRQ may be delivered to (the kernel's "
            "Documentation/core-api/irq/irq-affinity.rst); effective_affinity_list the CPUs the interrupt "
            "controller actually targets, and /proc/interrupts counts where each was handled. A GPU's interrupts "
            "(the driver's completion and fault notifications) handled on a CPU of the other node cross the "
            "socket link and run the handler and the work it wakes away from the GPU's memory and its serving "
            "process. The kernel's default affinity is every CPU, so without placement the chosen CPU may be on "
            "either node. irqbalance places a device's IRQs on the NUMA node that sysfs numa_node gives for the "
            "device (irqbalance(1), policy key numa_node; github.com/Irqbalance/irqbalance) and leaves the CPUs of "
            "IRQBALANCE_BANNED_CPULIST (or the older IRQBALANCE_BANNED_CPUS mask) in /etc/default/irqbalance "
            "without balanced IRQs. A GPU whose numa_node is -1 has no node to be local to (numa.gpu_locality)."
        ),
        "remediation": (
            "Run irqbalance (install and enable the irqbalance service), which places each GPU's IRQs by the "
            "GPU's numa_node; or write the CPUs of the GPU's node to /proc/irq/N/smp_affinity_list for each of "
            "its IRQs (the msi_irqs directory of the GPU's sysfs device), re-applied at every boot and driver "
            "load (a systemd unit), with irqbalance stopped or the IRQs banned from it (--banirq)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
