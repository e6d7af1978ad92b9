# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fix run's preflight (pvetune_preflight): every input the fix takes from the inventory or the command line,
checked with the fix modules' own checks before the first fix changes anything.  The policy is resolved for the
host under the root (audit.host_policy: reads the CPU, cpuidle, PCI and IOMMU sections only); nothing is written
and no command runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.audit import host_policy
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.concerns.pcie import fix as pcie_fix
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy

REBOOT_OK_DEPRECATION = {
    "msg": "The variable reboot_ok is deprecated, use pvetune_reboot_ok (same meaning; pvetune_reboot_ok wins when "
           "both are set)",
    "version": "1.0.0",
    "collection_name": "pvetune.gpuhost",
}


def preflight(params, run_command, check_mode, diff):
    """pvetune_preflight's one call: ``(failed, result, warnings)``.  The checks run in order and the first that
    fails names its input ("<what>: <why>; nothing was changed"); the result holds the host's merged ``policy`` and
    the checked ``ctids``, and the deprecation of ``legacy_reboot_ok`` when it is set (for finish)."""
    out = {}
    checks = (
        ("run_id", lambda: validate_run_id(params["run_id"])),
        ("root", lambda: FsRoot(params["root"])),
        ("pvetune_policy", lambda: host_policy(out["root"], merge_policy(params["policy"]))),
        ("pvetune_lxc_ctids", lambda: lxcgpu_fix.validate_ctids(params["ctids"])),
        ("pvetune_lxc_cgroup_version", lambda: lxcgpu_fix.validate_cgroup_version(params["cgroup_version"])),
        ("pvetune_pcie_bdfs", lambda: pcie_fix.validate_options(bdfs=params["bdfs"] or None)),
    )
    for what, check in checks:
        try:
            out[what] = check()
        except ValueError as exc:
            return True, {"msg": "%s: %s; nothing was changed" % (what, exc)}, []
    result = {"changed": False, "policy": out["pvetune_policy"], "ctids": out["pvetune_lxc_ctids"]}
    if params["legacy_reboot_ok"] is not None:
        result["deprecations"] = [dict(REBOOT_OK_DEPRECATION)]
    return False, result, []
