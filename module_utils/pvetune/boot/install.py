# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pvetune_runtime's one call: validate the boot settings, install the runtime (bootunits.plan_install), reload
systemd when a unit changed (the files put back when it fails).  Returns ``(failed, result, warnings)`` for
core/module_common.finish, like every fix planner."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.concerns.cpufreq import fix as cpufreq_fix
from ansible.module_utils.pvetune.concerns.gpu import fix as gpu_fix
from ansible.module_utils.pvetune.concerns.lxcgpu import boot as lxcgpu_boot
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.concerns.pcie import acs_fix as pcie_acs_fix
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet, WriteFailed
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import RunFailed, Runner, run_or_restore

VALIDATORS = {
    "cpufreq": cpufreq_fix.validate_config,
    "pcie-mrrs": pcie_acs_fix.validate_boot_config,
    "lxc-gpu": lxcgpu_boot.validate_boot_config,
    "gpu-power": gpu_fix.validate_boot_config,
}


def validate_configs(configs, subcommands):
    """Each subcommand's settings, checked by the same validator the boot helper uses."""
    out = {}
    for sub in subcommands:
        conf = configs.get(sub)
        try:
            VALIDATORS[sub](conf)
        except (ValueError, TypeError, lxcgpu_fix.LxcFixError) as exc:
            raise ValueError("configs.%s: %s" % (sub, exc))
        out[sub] = conf
    return out


def install(params, run_command, check_mode, diff):
    """The runtime as ``params`` (root, run_id, subcommands, configs, enable) asks, on the host or a tree."""
    try:
        fsroot = FsRoot(params["root"])
        changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
        configs = validate_configs(params["configs"], params["subcommands"])
        # The files are the truth: the plan rewrites whatever differs; the manifest only says what was installed.
        drift = bootunits.manifest_drift(changes.read)
        paths = bootunits.plan_install(changes, params["subcommands"], configs, enable=params["enable"])
    except (ValueError, IOError, OSError, FsError, ChangeError) as exc:
        return True, {"msg": str(exc)}, []
    warnings = []
    if drift:
        shown = ", ".join(drift[:5]) + (" and %d more" % (len(drift) - 5) if len(drift) > 5 else "")
        warnings.append("%s lists %d file(s) that changed on the host since they were installed (or are missing); "
                        "re-installing: %s" % (bootunits.MANIFEST, len(drift), shown))
    skipped = []
    units_changed = any(f["path"].startswith(bootunits.UNIT_DIR) for f in changes.files)
    if not check_mode:
        try:
            changes.apply_or_restore("the boot-time runtime")
        except WriteFailed as exc:
            return True, {"msg": str(exc), "changes": changes.summary(), "restored": exc.restored}, warnings
        if units_changed:
            try:
                run_or_restore(Runner(fsroot, run_command), changes, "systemctl", ["daemon-reload"],
                               "the runtime files were put back as they were (%s)", skipped=skipped, required=False)
            except RunFailed as exc:
                return True, dict(changes=changes.summary(), **exc.fail_kwargs()), warnings
    result = dict(changed=changes.changed, paths=paths, changes=changes.summary(), reboot_required=False,
                  skipped_commands=skipped, drift=drift)
    if diff:
        result["diff"] = changes.diffs()
    return False, result, warnings
