# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The P-state driver's mode (amd_pstate on AMD, intel_pstate on Intel; rows of cpuprofile.PSTATE): plan, switch at
runtime, verify, and predict in check mode.  Used by cpufreq_fix (module and boot helper).

Both drivers switch at runtime by writing a mode to their ``status`` file (amd_pstate from kernel 6.3, ``guided``
from 6.4): the kernel re-creates every policy with the mode's scaling driver.  Without the status file the driver
is not loaded and only its boot argument and a reboot change that (the kernel command line fix configures it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import errno
import os

from ansible.module_utils.pvetune.concerns.cpufreq import checks as cpufreq
from ansible.module_utils.pvetune.core.cpuprofile import PSTATE, PSTATE_BY_DRIVER
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list
from ansible.module_utils.pvetune.formats.kernel_cmdline import arg_key

# What the kernel offers after a mode switch (used only to predict in check mode).
ACTIVE_GOVERNORS = ["performance", "powersave"]
ACTIVE_EPP = ["default", "performance", "balance_performance", "balance_power", "power"]
GENERIC_GOVERNORS = ["conservative", "ondemand", "userspace", "powersave", "performance", "schedutil"]


def read_state(fsroot):
    """The fix's view of the cpufreq readers (concerns/cpufreq/checks.py, the one reader of each input), as plain data.

    {"vendor", "virtual", "pstate" (the vendor's driver, amd_pstate or intel_pstate, or None), "pstate_present":
     bool, "pstate_status": str|None, "cmdline", "policies": [
      {"name": "policy0", "num": 0, "dir": host path, "cpus": [int], "online": bool,
       "driver", "governor", "available_governors" ([str] or None), "epp" (None without the
       file), "available_epp", "errors": [str]}]}
    """
    try:
        ident = cpufreq.read_cpuinfo_identity(fsroot)
    except FsError:
        ident = {"vendor": None, "hypervisor": False}
    row = PSTATE.get(ident["vendor"])
    state = {
        "vendor": ident["vendor"], "virtual": ident["hypervisor"], "pstate": row["driver"] if row else None,
        "pstate_present": bool(row) and fsroot.exists(row["status_file"]),
        "pstate_status": fsroot.try_value(row["status_file"]) if row else None,
        "cmdline": fsroot.try_value("/proc/cmdline"),
        "policies": [],
    }
    for pol in cpufreq.read_policies(fsroot):
        raw = pol.pop("affected_cpus")
        pol["errors"] = []
        if raw is None:
            pol["errors"].append("%s/affected_cpus is unreadable" % pol["dir"])
        elif raw and not pol["cpus"]:
            pol["errors"].append("%s/affected_cpus: cannot parse %r" % (pol["dir"], raw[:40]))
        pol["online"] = bool(pol["cpus"])
        state["policies"].append(pol)
    return state


def write_sysfs(fsroot, host_path, value):
    """Write one sysfs value (never creates a file: O_WRONLY|O_TRUNC without O_CREAT)."""
    fd = os.open(fsroot.path(host_path), os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, (value + "\n").encode("ascii"))
    finally:
        os.close(fd)


def reason(exc):
    """An exception in words, with the errno name for OSError."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return "%s (%s)" % (os.strerror(exc.errno), errno.errorcode.get(exc.errno, exc.errno))
    return str(exc)


def row_of(state):
    """The PSTATE row of the host's P-state driver (from its CPU vendor), or None."""
    return PSTATE_BY_DRIVER.get(state.get("pstate"))


def requested_mode(state, cfg):
    """The mode the configuration asks of this host's driver (amd_pstate_mode or intel_pstate_mode), or None."""
    row = row_of(state)
    return cfg.get(row["policy_key"]) if row else None


def drivers(state):
    """{driver: "0-127"} over the online policies (policy numbers)."""
    out = {}
    for pol in state["policies"]:
        if pol["online"]:
            out.setdefault(pol["driver"] or "unknown", []).append(pol["num"])
    return {k: format_cpu_list(v) for k, v in out.items()}


def boot_arg_message(row, mode):
    return ("the boot argument %s=%s is needed and takes effect at the next boot "
            "(the kernel command line fix configures it)" % (row["driver"], mode))


def booted_with_mode(cmdline, driver, mode):
    """True when the running kernel was booted with ``<driver>=<mode>`` (the last one wins; the kernel treats "-" and
    "_" in parameter names alike)."""
    values = [arg.split("=", 1)[1] for arg in (cmdline or "").split() if "=" in arg and arg_key(arg) == driver]
    return bool(values) and values[-1].strip('"') == mode


def plan_mode(state, mode):
    """What to do about the P-state driver's mode.

    action: "not_requested" | "not_applicable" (no driver pvetune knows for this CPU, or a VM without cpufreq) |
    "none" (already) | "switch" | "unavailable" (no status file: the driver is not loaded) | "unknown" (the status
    file reads something the kernel never reports: nothing is written). An unavailable mode
    needs a reboot (reboot_required) unless the running kernel was already booted with the driver's argument: then
    it could not load (no CPPC / HWP in the firmware) and another reboot changes nothing; a fix run must not reboot
    such a host on every run.
    """
    row = row_of(state)
    current = state["pstate_status"]
    step = {"driver": row["driver"] if row else None, "requested": mode, "before": current, "after": current,
            "action": "none", "reboot_required": False, "message": None}
    if row is None:
        step.update(action="not_applicable", message="not an AMD or Intel CPU (%s): no P-state driver mode to set"
                    % (state.get("vendor") or "vendor unknown"))
        return step
    if mode is None:
        step["action"] = "not_requested"
        return step
    if not state["pstate_present"] and state.get("virtual") and not state["policies"]:
        step.update(action="not_applicable", message="no cpufreq driver in this virtual machine: the host sets the "
                    "frequency; %s mode not set" % row["driver"])
        return step
    if not state["pstate_present"]:
        found = ", ".join(sorted(drivers(state))) or "none"
        if booted_with_mode(state.get("cmdline"), row["driver"], mode):
            step.update(action="unavailable", reboot_required=False,
                        message="%s does not exist although the kernel was booted with %s=%s: %s did not load "
                        "(scaling driver: %s; is %s enabled in the firmware?); a reboot does not change that"
                        % (row["status_file"], row["driver"], mode, row["driver"], found, row["firmware"]))
            return step
        step.update(action="unavailable", reboot_required=True,
                    message="%s does not exist: %s is not the scaling driver (scaling driver: %s); %s"
                    % (row["status_file"], row["driver"], found, boot_arg_message(row, mode)))
        return step
    if current not in row["statuses"]:
        step.update(action="unknown", message="%s reads %r, which is none of the modes the kernel reports (%s): "
                    "nothing written" % (row["status_file"], (current or "")[:40], ", ".join(row["statuses"])))
        return step
    if current != mode:
        step.update(action="switch", after=mode,
                    message="%s mode %s -> %s (runtime switch)" % (row["driver"], current, mode))
    return step


def apply_mode(fsroot, step, writer=write_sysfs):
    """Write the mode and verify it; updates and returns ``step``.

    Verified twice: ``status`` reads back the mode, and every online policy's scaling_driver is the mode's driver.
    On failure action becomes "failed", reboot_required True and the message names the boot argument; when
    ``status`` was changed but the switch is not effective the old value is written back (best effort). Never
    raises for a failed write.
    """
    if step["action"] != "switch":
        return step
    row = PSTATE_BY_DRIVER[step["driver"]]
    status, mode, before = row["status_file"], step["requested"], step["before"]
    try:
        writer(fsroot, status, mode)
    except (OSError, IOError, FsError) as exc:
        step.update(action="failed", after=fsroot.try_value(status), reboot_required=True,
                    message="writing %s to %s failed: %s; %s"
                    % (mode, status, reason(exc), boot_arg_message(row, mode)))
        return step
    after = fsroot.try_value(status)
    problem = None
    if after != mode:
        problem = "%s reads %r after writing %s" % (status, after, mode)
    else:
        wrong = {d: p for d, p in drivers(read_state(fsroot)).items() if d != row["modes"][mode]}
        if wrong:
            problem = ("%s reads %s but the switch is not effective: scaling_driver is %s, expected %s"
                       % (status, mode, "; ".join("%s on policy %s" % (d, p) for d, p in sorted(wrong.items())),
                          row["modes"][mode]))
    if problem is None:
        step.update(action="switched", after=after)
        return step
    if after not in (before, None) and before is not None:
        try:
            writer(fsroot, status, before)
            problem += "; wrote %s back" % before
        except (OSError, IOError, FsError) as exc:
            problem += "; writing %s back failed too: %s" % (before, reason(exc))
    step.update(action="failed", after=fsroot.try_value(status), reboot_required=True,
                message="%s; %s" % (problem, boot_arg_message(row, mode)))
    return step


def predict_after_switch(state, mode):
    """The state a runtime mode switch is expected to produce (check mode only; ``predicted``).

    The kernel re-creates every policy: active mode offers performance/powersave and EPP and starts in the driver's
    initial governor (amd-pstate-epp on an ACPI server platform profile: performance, EPP performance;
    intel_pstate: powersave, EPP balance_performance); passive/guided start with the kernel's default governor
    (schedutil on Proxmox kernels) and have no EPP.
    """
    row = row_of(state)
    new = copy.deepcopy(state)
    new["pstate_status"] = mode
    new["predicted"] = True
    for pol in new["policies"]:
        if not pol["online"]:
            continue
        pol["driver"] = row["modes"][mode]
        if mode == "active":
            pol["available_governors"] = list(ACTIVE_GOVERNORS)
            pol["governor"] = row["initial_governor"]
            pol["available_epp"] = list(ACTIVE_EPP)
            pol["epp"] = "performance" if pol["governor"] == "performance" else "balance_performance"
        else:
            if pol["available_governors"] is None or pol["available_governors"] == ACTIVE_GOVERNORS:
                pol["available_governors"] = list(GENERIC_GOVERNORS)
            pol["governor"] = "schedutil" if "schedutil" in pol["available_governors"] else pol["governor"]
            pol["epp"] = None
            pol["available_epp"] = None
    return new
