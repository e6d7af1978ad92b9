# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia.uvm_hmm fix (pvetune_nvidia_hmm, fix tag nvidia, opt-in policy nvidia_uvm_hmm_fix): one modprobe.d file
that turns nvidia-uvm's HMM off where the policy wants it off (``disable``: everywhere; ``auto``: where the driver
branch is in the HMM issues table).

A module option applies when the module loads: the loaded nvidia_uvm keeps HMM until it is reloaded (no GPU process
may run) or the host reboots, so the result asks for a reboot while the loaded module still runs HMM, and the audit
says pending until then.  rollback.yml removes the file (it is recorded in the manifest like every written file).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.nvidia.checks import read_hmm, read_state
from ansible.module_utils.pvetune.core.changeset import WriteFailed
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.module_common import fix_call
from ansible.module_utils.pvetune.core.runner import RunFailed
from ansible.module_utils.pvetune.tables.nvidia_hmm import hmm_issues

# modprobe reads /etc/modprobe.d in the order of the file names and the last value of an option wins: "zz-" puts
# this file after the driver's own (nvidia.conf, nvidia-uvm.conf) and a distribution's.
CONF = "/etc/modprobe.d/zz-pvetune-nvidia-uvm.conf"
TEXT = ("# Managed by pvetune (fix.yml --tags nvidia, check nvidia.uvm_hmm); rollback.yml removes this file.\n"
        "# nvidia-uvm's HMM off: driver branches with public HMM failures (cuInit errors, deadlocks), see\n"
        "# docs/checks.md. Takes effect when nvidia_uvm loads (reboot, or modprobe -r nvidia_uvm with no GPU\n"
        "# process running). Serving engines do not use HMM.\n"
        "options nvidia_uvm uvm_disable_hmm=1\n")
MODES = ("auto", "disable")


def _validate(params):
    if params["mode"] not in MODES:
        raise ValueError("mode: %r is not one of %s" % (params["mode"], ", ".join(MODES)))
    return {"mode": params["mode"]}


def _run(fsroot, runner, changes, request, warn):
    try:
        state = read_state(fsroot, runner)
        hmm = read_hmm(fsroot)
    except FsError as exc:
        raise RunFailed("%s: %s" % (exc.path, exc.reason))
    version = state.get("version")
    if hmm.get("error"):
        raise RunFailed(hmm["error"])
    rows = hmm_issues(int(version["version"].split(".")[0])) if version else []
    wanted = request["mode"] == "disable" or bool(rows)
    why = ("policy nvidia_uvm_hmm is disable" if request["mode"] == "disable" else
           "; ".join(row["problem"] for row in rows) or "driver %s has no known HMM issue" % (
               (version or {}).get("version") or "not loaded"))
    if wanted and hmm.get("configured") is not True:
        changes.plan_file(CONF, TEXT.encode("utf-8"))
    elif wanted and hmm.get("configured_in") != CONF:
        warn("uvm_disable_hmm=1 already comes from %s: nothing written" % hmm["configured_in"])
    loaded_on = hmm.get("disabled") is False
    if changes.files and not changes.check_mode:
        try:
            changes.apply_or_restore(CONF)
        except WriteFailed as exc:
            raise RunFailed(str(exc), restored=exc.restored)
    reboot = wanted and loaded_on
    return {"changed": changes.changed, "wanted": wanted, "why": why, "file": CONF,
            "loaded": {True: "HMM off", False: "HMM on", None: "nvidia_uvm not loaded"}[hmm.get("disabled")],
            "reboot_required": reboot, "changes": changes.summary(),
            "msg": ("configured; the loaded nvidia_uvm runs HMM until it is reloaded or the host reboots" if reboot
                    else "")}


def fix(params, run_command, check_mode, diff):
    """pvetune_nvidia_hmm's one call: (failed, result, warnings)."""
    return fix_call(params, run_command, check_mode, diff, _validate, _run)
