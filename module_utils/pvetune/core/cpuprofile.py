# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a well-configured CPU looks like for *this* host's vendor and idle driver (docs/DESIGN.md "CPU vendors").

``PSTATE`` (one row per CPU vendor pvetune knows: the P-state driver, its status file, its modes and the scaling
driver each mode shows) and ``IDLE_LIMITS`` (the boot argument that limits each idle driver) are data; the
cpufreq and C-state readers, evaluators and fixes all use them.  ``host_profile`` combines them with the policy
and the gathered facts; ``for_host`` returns the policy as one host sees it (``host_cpu`` and the resolved
``cmdline_required``), which the audit evaluates and the fix's preflight returns to the fix tasks.

Driver facts relied on (Documentation/admin-guide/pm/amd-pstate.rst and intel_pstate.rst,
drivers/idle/intel_idle.c): amd_pstate is not the default on EPYC servers, so ``amd_pstate=<mode>`` must be on the
command line; intel_pstate runs in active mode by default where the CPU has HWP, so ``intel_pstate=<mode>`` is only
needed when the driver is not loaded (``intel_pstate=disable``, no support); both switch modes at runtime through
their ``status`` file.  ``processor.max_cstate`` limits acpi_idle only; intel_idle ignores it and registers only
the first ``intel_idle.max_cstate`` states of its table.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.formats.kernel_cmdline import arg_key

CPU_DIR = "/sys/devices/system/cpu"

PSTATE = {
    "AuthenticAMD": {
        "vendor": "amd", "driver": "amd_pstate", "policy_key": "amd_pstate_mode",
        "status_file": CPU_DIR + "/amd_pstate/status", "status_key": "amd_pstate_status",
        "modes": {"active": "amd-pstate-epp", "passive": "amd-pstate", "guided": "amd-pstate"},
        "statuses": ("active", "passive", "guided", "disable"),  # what the kernel reports in status
        "epp_driver": "amd-pstate-epp", "arg_always": True, "firmware": "CPPC",
        "epp_needs": "EPP needs amd_pstate in active mode",
        # What the kernel offers right after a switch to active mode (check mode predicts with it).
        "initial_governor": "performance",
        "remediation": ("Add amd_pstate={mode} to the kernel command line (check boot.cmdline) and reboot; where the "
                        "kernel already runs amd_pstate, switch at runtime: echo {mode} > {status_file}. CPPC must "
                        "be enabled in the BIOS."),
    },
    "GenuineIntel": {
        "vendor": "intel", "driver": "intel_pstate", "policy_key": "intel_pstate_mode",
        "status_file": CPU_DIR + "/intel_pstate/status", "status_key": "intel_pstate_status",
        "modes": {"active": "intel_pstate", "passive": "intel_cpufreq"},
        "statuses": ("active", "passive", "off"),
        "epp_driver": "intel_pstate", "arg_always": False, "firmware": "HWP",
        "epp_needs": "EPP needs intel_pstate in active mode with HWP",
        "initial_governor": "powersave",
        "remediation": ("intel_pstate runs in active mode by default on CPUs with HWP; switch at runtime: echo {mode} "
                        "> {status_file} (pvetune-cpufreq.service re-applies it at boot); where intel_pstate is not "
                        "loaded, remove intel_pstate=disable, add intel_pstate={mode} (boot.cmdline) and reboot. "
                        "HWP (Hardware P-States) must be enabled in the BIOS."),
    },
}
PSTATE_BY_DRIVER = {row["driver"]: row for row in PSTATE.values()}
EPP_NEEDS = "EPP needs amd_pstate, or intel_pstate with HWP, in active mode"


def epp_needs(pstate):
    """Why a driver offers no EPP, for the host's P-state driver (``pstate``, a PSTATE driver name or None)."""
    row = PSTATE_BY_DRIVER.get(pstate)
    return row["epp_needs"] if row else EPP_NEEDS


# idle driver -> (boot argument that limits it, its module parameter, the cpuidle facts key of that parameter)
IDLE_LIMITS = {
    "acpi_idle": ("processor.max_cstate", "/sys/module/processor/parameters/max_cstate", "max_cstate_param"),
    "intel_idle": ("intel_idle.max_cstate", "/sys/module/intel_idle/parameters/max_cstate", "intel_max_cstate_param"),
}


def _section(facts, name):
    """(section dict, its error or None); a section gather() did not produce is an error too."""
    data = (facts or {}).get(name)
    if not isinstance(data, dict):
        return {}, "no %s facts were gathered" % name
    return data, data.get("error")


def host_profile(policy, facts):
    """The CPU side of the policy for one host: {"vendor" ("amd"|"intel"|None), "vendor_id", "model", "virtual",
    "pstate" (the PSTATE row's driver name or None), "pstate_mode", "pstate_arg", "pstate_arg_required",
    "scaling_driver", "no_cpufreq", "idle_driver", "cstate_arg", "cstate_param" (path), "cstate_param_key", "why"
    (why the frequency checks do not apply, or None), "cstate_why" (likewise for the C-state check), "error" (a
    section that could not be read, or None)}. The C-state limit depends on the idle driver alone, so an unreadable
    /proc/cpuinfo leaves it known.
    """
    (cpu, cpu_err), (idle, idle_err) = _section(facts, "cpu"), _section(facts, "cpuidle")
    prof = {"vendor": None, "vendor_id": cpu.get("vendor"), "model": cpu.get("model"),
            "virtual": bool(cpu.get("hypervisor")), "pstate": None, "pstate_mode": None, "pstate_arg": None,
            "pstate_arg_required": False, "scaling_driver": None, "idle_driver": None, "cstate_arg": None,
            "cstate_param": None, "cstate_param_key": None, "why": None, "cstate_why": None,
            "error": cpu_err or idle_err}
    prof["no_cpufreq"] = not cpu.get("policies") and not cpu.get("offline_policies")
    row = PSTATE.get(prof["vendor_id"])
    if cpu_err:
        prof["why"] = "cannot tell the CPU vendor: %s" % cpu_err
    elif row is None:
        prof["why"] = prof["cstate_why"] = (
            "not an AMD or Intel CPU (%s): pvetune has no P-state or C-state settings for it"
            % (prof["model"] or prof["vendor_id"] or "no vendor_id in /proc/cpuinfo"))
        return prof
    else:
        mode = policy.get(row["policy_key"]) or "active"
        prof.update(vendor=row["vendor"], pstate=row["driver"], pstate_mode=mode,
                    pstate_arg="%s=%s" % (row["driver"], mode),
                    scaling_driver=policy.get("scaling_driver") or row["modes"][mode])
        if prof["no_cpufreq"] and prof["virtual"]:
            prof["why"] = ("no cpufreq driver is loaded and the CPU reports the hypervisor flag: in a virtual "
                           "machine the host sets the frequency")
        loaded = cpu.get(row["status_key"]) is not None
        prof["pstate_arg_required"] = prof["why"] is None and (row["arg_always"] or not loaded)
    if idle_err:
        prof["cstate_why"] = "cannot tell the idle driver: %s" % idle_err
        return prof
    driver = idle.get("driver")
    limit = IDLE_LIMITS.get(driver)
    if limit:
        prof.update(idle_driver=driver, cstate_arg="%s=%d" % (limit[0], policy["max_cstate"]),
                    cstate_param=limit[1], cstate_param_key=limit[2])
    elif driver in (None, "", "none"):
        prof["cstate_why"] = ("no cpuidle driver is in use (%s/cpuidle/current_driver: %s)%s: there is no C-state "
                              "limit to set" % (CPU_DIR, driver or "absent",
                                                ", as in many virtual machines" if prof["virtual"] else ""))
    else:
        prof["cstate_why"] = ("the idle driver in use is %s, which no max_cstate boot argument limits (pvetune knows "
                              "%s)" % (driver, ", ".join(sorted(IDLE_LIMITS))))
    return prof


def cmdline_args(policy, prof):
    """cmdline_required as this host needs it: the vendor's boot args (unless the inventory gave cmdline_required
    itself, see merge_policy) before the policy's own; a key the policy names keeps the policy's value."""
    own = list(policy.get("cmdline_required") or [])
    if not policy.get("cmdline_cpu_args"):
        return own
    keys = {arg_key(a) for a in own}
    vendor = [a for a in (prof["pstate_arg"] if prof["pstate_arg_required"] else None, prof["cstate_arg"])
              if a and arg_key(a) not in keys]
    return vendor + own


def _with_passthrough(args, policy, facts):
    """iommu=pt after the other required args where policy iommu_passthrough asks for it (needs_passthrough), unless
    the list already names an iommu= value."""
    if not needs_passthrough(facts, policy) or arg_key(PT_ARG) in {arg_key(a) for a in args}:
        return args
    return args + [PT_ARG]


def _with_aspm(args, policy, facts):
    """pcie_aspm.policy=performance after them where policy pcie_aspm_fix asks for it and a GPU link has ASPM on
    (pcie.aspm), unless the list already names a pcie_aspm.policy."""
    if not (policy.get("pcie_aspm_fix") and policy.get("pcie_aspm") != "any") or \
            arg_key(ASPM_ARG) in {arg_key(a) for a in args} or not any(s for _g, _p, s in aspm_links(facts)):
        return args
    return args + [ASPM_ARG]


def aspm_links(facts):
    """[(gpu, its upstream port's bdf or None, the ASPM states enabled on its link: the union of both ends' LnkCtl)]
    of every GPU; cpuprofile.for_host requires pcie_aspm.policy=performance (policy pcie_aspm_fix) where one is on."""
    pci = facts.get("pci") or {}
    out = []
    for gpu in [f for f in pci.get("functions") or () if f.get("is_gpu")]:
        chain = gpu.get("chain") or []
        port = chain[-2] if len(chain) >= 2 else None
        ends = [gpu.get("lnkctl_aspm"), ((pci.get("bridges") or {}).get(port) or {}).get("lnkctl_aspm")]
        states = sorted({s for end in ends if end and end != "disabled" for s in end.split()})
        out.append((gpu, port, states))
    return out


ASPM_ARG = "pcie_aspm.policy=performance"
PT_ARG = "iommu=pt"
TRANSLATED = ("DMA", "DMA-FQ")


def gpu_domains(facts):
    """[{"gpu", "group", "type", "status" (pass, fail: host-owned in a translated domain, skip: bound to vfio-pci
    or in no group, error: the group's type is unreadable or unknown)}] for every NVIDIA GPU, from the pci and
    iommu facts.  Shared by iommu.mode and for_host, which adds iommu=pt to the required boot args when one fails."""
    io, pci = facts.get("iommu") or {}, facts.get("pci") or {}
    types = io.get("group_types") or {}
    out = []
    for gpu in pci.get("functions") or []:
        group = gpu.get("iommu_group")
        rec = {"gpu": gpu, "group": group, "type": types.get(group) if group is not None else None}
        if gpu.get("driver") == "vfio-pci":
            rec["status"] = "skip"
        elif group is None:
            rec["status"] = "skip"
        elif rec["type"] in TRANSLATED or rec["type"] == "identity":
            rec["status"] = "fail" if rec["type"] in TRANSLATED else "pass"
        else:  # unreadable, or a type this kernel should not give a host-owned device (blocked, unmanaged)
            rec["status"] = "error"
        out.append(rec)
    return out


def needs_passthrough(facts, policy):
    """True when policy iommu_passthrough asks for iommu=pt on this host: a host-owned GPU is translated."""
    return bool(policy.get("iommu_passthrough")) and not (facts.get("iommu") or {}).get("error") \
        and any(r["status"] == "fail" for r in gpu_domains(facts))


def for_host(policy, facts):
    """``policy`` as this host sees it: ``host_cpu`` (host_profile, with the catalogue's vendor-dependent template
    values under "template"), ``scaling_driver`` and ``cmdline_required`` resolved. Idempotent: a policy already
    resolved is returned as it is."""
    if "host_cpu" in policy:
        return policy
    prof = host_profile(policy, facts)
    prof["template"] = _template_values(prof)
    out = dict(policy)
    out["host_cpu"] = prof
    out["cmdline_required"] = _with_aspm(_with_passthrough(cmdline_args(policy, prof), policy, facts), policy, facts)
    if prof["scaling_driver"]:
        out["scaling_driver"] = prof["scaling_driver"]
    return out


def _template_values(prof):
    if not prof["pstate"]:
        return {}
    row = PSTATE_BY_DRIVER[prof["pstate"]]
    out = {"pstate_driver": row["driver"], "pstate_mode": prof["pstate_mode"],
           "pstate_remediation": row["remediation"].format(mode=prof["pstate_mode"], status_file=row["status_file"])}
    if prof["cstate_arg"]:
        out.update(cstate_arg=prof["cstate_arg"], idle_driver=prof["idle_driver"])
    return out
