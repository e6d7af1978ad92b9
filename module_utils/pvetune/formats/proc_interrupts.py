# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""/proc/interrupts: the interrupts each online CPU has handled, per IRQ.

The kernel (kernel/irq/proc.c show_interrupts) writes a header of the online CPUs (``CPU0 CPU1 ...``, numbers with
gaps when CPUs are offline), then one line per IRQ: ``<irq>: <count per CPU> <chip> <hwirq/type> <actions>``, the
actions (the names drivers passed to request_irq) joined by ", ".  The chip and type columns vary by architecture
and kernel: ``IR-PCI-MSI 524288-edge``, ``IR-PCI-MSI-0000:01:00.0    0-edge`` (per-device MSI domains, 6.x),
``PCI-MSI-edge`` (2.6/3.x: one column), ``GICv3  27 Level`` and ``ITS-MSI 524288 Edge`` (arm64).  Rows named by
letters (NMI, LOC, ERR, MIS, IPI0 ...) are per-CPU architecture counters, not IRQs, and are skipped.

A 256-CPU host's file has ~256 columns on ~1000 lines, so only the lines whose action part names one of ``wanted``
are split into counts; the others cost a substring test.  No policy and no host reads: callers pass the text.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_CPU = re.compile(r"\ACPU([0-9]{1,6})\Z")
_IRQ = re.compile(r"\A[0-9]{1,9}\Z")
_COUNT = re.compile(r"\A[0-9]{1,20}\Z")
# After the counts: the chip, then the hwirq/type in one of its forms (absent in the 2.6 "PCI-MSI-edge" form),
# then the actions.  "524288-edge", "-virq" (xen), "27 Level", "524288 Edge -edge", "Edge".
_TAIL = re.compile(
    r"\A(?P<chip>\S+)"
    r"(?:\s+(?P<type>[0-9]*-\S+|(?:[0-9]+\s+)?(?:Edge|Level)(?=\s|\Z)(?:\s+-\S+)?|[0-9]+(?=\s|\Z)))?"
    r"(?:\s+(?P<actions>\S.*?))?\s*\Z")


def _header(line, number):
    cpus = []
    for token in line.split():
        match = _CPU.match(token)
        if not match:
            raise ValueError("/proc/interrupts line %d: %r is not a CPU column of the header" % (number, token[:30]))
        cpus.append(int(match.group(1)))
    if not cpus:
        raise ValueError("/proc/interrupts line %d: no CPU header (CPU0 CPU1 ...)" % number)
    if len(set(cpus)) != len(cpus):
        raise ValueError("/proc/interrupts line %d: a CPU appears twice in the header" % number)
    return cpus


def _row(irq, body, cpus, number):
    """The IRQ's dict from the text after "<irq>:"; ValueError naming the line when it is not one."""
    parts = body.split(None, len(cpus))
    counts = parts[:len(cpus)]
    for index, count in enumerate(counts):
        if not _COUNT.match(count):
            raise ValueError("/proc/interrupts line %d: IRQ %d: count %d of %d is %r, not a number (one count per "
                             "header CPU)" % (number, irq, index + 1, len(cpus), count[:20]))
    if len(counts) < len(cpus):
        raise ValueError("/proc/interrupts line %d: IRQ %d has %d counts, not %d (one per header CPU)" % (
            number, irq, len(counts), len(cpus)))
    rest = parts[len(cpus)] if len(parts) > len(cpus) else ""
    match = _TAIL.match(rest) if rest else None
    chip, actions = "", []
    if match:
        chip = match.group("chip")
        actions = [a.strip() for a in (match.group("actions") or "").split(",") if a.strip()]
    return {"irq": irq, "counts": [int(c) for c in counts], "cpus": list(cpus), "actions": actions, "chip": chip,
            "type": (match.group("type") or "") if match else ""}


def parse_proc_interrupts(text, wanted=("nvidia",), irqs=None):
    """``[{"irq", "counts", "cpus", "actions", "chip", "type"}]`` for the numeric IRQs of ``text``, in file order.

    ``counts[i]`` is the count on CPU ``cpus[i]`` (the header's CPU numbers).  With ``wanted`` (action names, exact)
    only the IRQs one of whose actions is a wanted name, or whose number is in ``irqs``, are returned, and only
    those lines are parsed in full; ``wanted=None`` (and no ``irqs``) returns every IRQ.  ValueError names the line:
    an empty text, a header token that is not CPU<n>, a line without "<label>:", an IRQ line (of those parsed)
    without one count per header CPU.
    """
    if isinstance(wanted, str):
        wanted = (wanted,)
    if wanted is None and irqs is not None:
        wanted = ()
    irqs = frozenset(irqs or ())
    lines = (text or "").splitlines()
    cpus, out = None, []
    for index, line in enumerate(lines):
        number = index + 1
        if not line.strip():
            continue
        if cpus is None:
            cpus = _header(line, number)
            continue
        label, colon, body = line.partition(":")
        label = label.strip()
        if not colon or not label or " " in label:
            raise ValueError("/proc/interrupts line %d: %r is not '<irq>: <counts> ...'" % (number, line.strip()[:60]))
        if not _IRQ.match(label):
            continue  # NMI, LOC, ERR, MIS, IPI0 ...: architecture counters
        irq = int(label)
        if wanted is not None and irq not in irqs and not any(name in body for name in wanted):
            continue  # the cheap test: most lines stop here
        row = _row(irq, body, cpus, number)
        if wanted is None or irq in irqs or any(a in wanted for a in row["actions"]):
            out.append(row)
    if cpus is None:
        raise ValueError("/proc/interrupts line 1: empty file, no CPU header")
    return out


def handled(row):
    """``[(cpu, count)]``: the CPUs (header numbers) on which ``row`` counted interrupts, with their counts."""
    return [(cpu, count) for cpu, count in zip(row["cpus"], row["counts"]) if count > 0]
