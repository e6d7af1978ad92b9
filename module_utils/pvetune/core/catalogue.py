# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check catalogue: every check pvetune knows, as data.

One entry per check: id, the concern that owns it (the package concerns/<concern>/, whose checks.py CHECKS holds
its evaluator), summary (what it holds a host to, one line of markdown: README's table), title, severity, the
expected value (a template filled from the policy), why it matters, how to fix it by hand (remediation: no pvetune
command line, the report derives that per host from the fields below), the fix playbook tag (fix_tag; fix_tags,
which includes it, when the fix needs more tags, in the order the fix runs them; opt_in, the policy key without which
fix.yml leaves it alone: audit.evaluate then gives its fail, warn and pending results no fix_tag), and whether the fix
needs a reboot (reboot: yes, no, or "when ..." = when the result asks for one).  The evaluators produce the current
value and the status; everything an operator reads comes from here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.bootargs import catalogue as bootargs
from ansible.module_utils.pvetune.concerns.cpufreq import catalogue as cpufreq
from ansible.module_utils.pvetune.concerns.cstates import catalogue as cstates
from ansible.module_utils.pvetune.concerns.gpu import catalogue as gpu
from ansible.module_utils.pvetune.concerns.iommu import catalogue as iommu
from ansible.module_utils.pvetune.concerns.irq import catalogue as irq
from ansible.module_utils.pvetune.concerns.kernel import catalogue as kernel
from ansible.module_utils.pvetune.concerns.lxcgpu import catalogue as lxcgpu
from ansible.module_utils.pvetune.concerns.lxcres import catalogue as lxcres
from ansible.module_utils.pvetune.concerns.mem import catalogue as mem
from ansible.module_utils.pvetune.concerns.numa import catalogue as numa
from ansible.module_utils.pvetune.concerns.nvidia import catalogue as nvidia
from ansible.module_utils.pvetune.concerns.nvidia_stack import catalogue as nvidia_stack
from ansible.module_utils.pvetune.concerns.pcie import catalogue as pcie
from ansible.module_utils.pvetune.concerns.storage import catalogue as storage

STATUSES = ("pass", "fail", "warn", "pending", "skip", "error")

# Each concern's entries live beside its evaluators (concerns/<concern>/catalogue.py ENTRIES); the package's name
# is the entries' concern.
CONCERN_CATALOGUES = (bootargs, cpufreq, cstates, gpu, iommu, irq, kernel, lxcgpu, lxcres, mem, numa, nvidia,
                      nvidia_stack, pcie, storage)
# The order every list shows the checks in (reports, docs, tests, the fix record): each catalogue id once.
ORDER = (
    "cpu.scaling_driver",
    "cpu.governor",
    "cpu.epp",
    "cpu.cstates",
    "cpu.boost",
    "kernel.numa_balancing",
    "mem.sysctl",
    "pcie.mrrs",
    "pcie.link",
    "pcie.topology",
    "pcie.acs",
    "pcie.bar1",
    "pcie.sriov",
    "pcie.aspm",
    "kernel.version",
    "boot.cmdline",
    "lxc.gpu_devices",
    "nvidia.driver",
    "nvidia.persistence",
    "nvidia.uvm_hmm",
    "iommu.mode",
    "numa.gpu_locality",
    "irq.gpu_affinity",
    "lxc.resources",
    "lxc.shm_memlock",
    "nvidia.stack",
    "kernel.known_issues",
    "nvidia.compute_capability",
    "gpu.power_limit",
    "gpu.clocks",
    "gpu.health",
    "storage.zfs_arc",
    "storage.weights",
    "storage.zfs_dataset",
)


def build_catalogue(catalogues, order):
    """The catalogue in ``order``, each entry with its concern; ValueError when an id is missing, doubled or unknown."""
    entries = {}
    for module in catalogues:
        concern = module.__name__.split(".")[-2]      # concerns/<concern>/catalogue.py
        for row in module.ENTRIES:
            if row["id"] in entries:
                raise ValueError("check %s is in the catalogue twice" % row["id"])
            entry = {"id": row["id"], "concern": concern}
            entry.update(row)
            entries[row["id"]] = entry
    if sorted(entries) != sorted(order):
        raise ValueError("core/catalogue.ORDER and the concerns' entries differ: %s" % ", ".join(
            sorted(set(entries) ^ set(order)) or ["an id twice in ORDER"]))
    return tuple(entries[check_id] for check_id in order)


CATALOGUE = build_catalogue(CONCERN_CATALOGUES, ORDER)

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
