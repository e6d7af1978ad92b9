# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ACS redirect bits on the switch ports between GPUs: select (the audit's own pcie_topology.acs_ports), plan,
apply, verify, restore.

The write is always the masked ``setpci -s <port> ECAP_ACS+6.w=0000:002c`` (pci_ext.setpci_acs_args): Request
Redirect, Completion Redirect and Egress Control are cleared, every other ACS Control bit (Source Validation,
Translation Blocking, Upstream Forwarding) keeps its value.  Afterwards ``setpci ECAP_ACS+6.w`` and a fresh parse of
the port's config must both show the redirect bits clear and the other bits as before.

A port with a device bound to vfio-pci below it or below the switch it shares with another GPU is never written:
ACS is what keeps that device's IOMMU group apart from its neighbours'.  The boot unit (pvetune-pcie-mrrs.service,
configuration key ``acs_ports``) clears the same ports again at every boot, since the kernel sets ACS when it
enumerates them; it checks vfio-pci again first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.pcie import checks as pcie
from ansible.module_utils.pvetune.concerns.pcie import fix as pcie_fix
from ansible.module_utils.pvetune.concerns.pcie import topology as pcie_topology
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner
from ansible.module_utils.pvetune.formats import pci_config, pci_ext

MAX_PORTS = 256
MASK = pci_ext.ACS_REDIRECT_MASK


class AcsError(ValueError):
    """A bad option or an input that makes the write unsafe; raised before anything is written."""


def validate_ports(ports):
    """A list of canonical port addresses (the boot configuration's acs_ports)."""
    if ports is None:
        return []
    if not isinstance(ports, list) or len(ports) > MAX_PORTS:
        raise AcsError("acs_ports must be a list of at most %d PCI addresses" % MAX_PORTS)
    out = []
    for port in ports:
        try:
            out.append(pci_config.validate_bdf(port))
        except ValueError as exc:
            raise AcsError("acs_ports: %s" % exc)
    return out


def _policy(vendor, class_prefix):
    return {"pcie_vendor": vendor, "pcie_class_prefix": class_prefix[2:] if class_prefix.startswith("0x")
            else class_prefix}


def targets(fsroot, vendor="0x10de", class_prefix="0x03"):
    """(ports to keep clear [records of acs_ports], ports left alone [(bdf, why)], errors [str]): every port with
    ACS between two GPUs that share a switch, as the audit's pcie.acs judges them."""
    pci = pcie.gather_pci(fsroot, _policy(vendor, class_prefix))
    gpus = [f for f in pci["functions"] if f.get("is_gpu")]
    keep, left, errors = [], [], []
    for rec in pcie_topology.acs_ports(pci, gpus):
        if rec["status"] == "error":
            br = rec["bridge"] or {}
            errors.append("%s: %s" % (rec["bdf"], br.get("acs_error") or br.get("error") or "not readable"))
        elif rec["vfio"]:
            left.append((rec["bdf"], "vfio-pci in its switch: %s" % ", ".join(rec["vfio"])))
        elif (rec["bridge"] or {}).get("acs"):
            keep.append(rec)
    return keep, left, errors


def runtime_key(bdf):
    return "pcie:%s:acsctl" % bdf


def plan(records):
    """One step per port: {"bdf", "pairs", "ctrl_before", "ctrl_after", "action" (set|none), "result", "message"}."""
    steps = []
    for rec in records:
        before = rec["bridge"]["acs"]["ctrl"]
        after = before & ~MASK & 0xFFFF
        steps.append({"bdf": rec["bdf"], "pairs": ["%s-%s" % p for p in rec["pairs"]],
                      "ctrl_before": "%04x" % before, "ctrl_after": "%04x" % after,
                      "action": "set" if before != after else "none",
                      "result": "planned" if before != after else "unchanged", "message": None})
    return steps


def _read_ctrl(fsroot, runner, bdf, sysfs):
    out = pcie_fix.run_setpci(runner, pci_ext.setpci_acs_read_args(bdf, sysfs))
    try:
        word = pci_config.parse_setpci_word(out)
    except ValueError as exc:
        raise pcie_fix.SetpciFailed("reading back ACS Control of %s: %s" % (bdf, exc))
    path = pcie_fix.config_path(bdf)
    try:
        data = fsroot.read_bytes(path, limit=pci_config.EXT_CONFIG_SIZE)
        acs = pci_ext.parse_acs(data, pci_config.parse_config(data))
    except (FsError, pci_config.PciConfigError) as exc:
        raise pcie_fix.SetpciFailed("re-reading %s: %s" % (path, exc))
    if acs is None:
        raise pcie_fix.SetpciFailed("re-reading %s: no ACS capability any more" % path)
    return word, acs["ctrl"]


def write(fsroot, runner, bdf, before, value, mask):
    """Masked write of ``value`` into the ``mask`` bits of ACS Control, verified by setpci and the config file;
    returns the word read back.  SetpciFailed names what differs."""
    sysfs = pci_config.sysfs_path_for_root(fsroot.root)
    if value & mask:
        args = pci_ext.setpci_acs_restore_args(bdf, value, mask, sysfs)
    else:
        args = pci_ext.setpci_acs_args(bdf, mask, sysfs)
    pcie_fix.run_setpci(runner, args)
    word, cfg_word = _read_ctrl(fsroot, runner, bdf, sysfs)
    want = (before & ~mask) | (value & mask)
    problems = ["%s reads ACS Control %04x, not %04x" % (what, got, want)
                for what, got in (("setpci", word), ("config", cfg_word)) if got != want]
    if problems:
        raise pcie_fix.SetpciFailed("%s: %s" % (bdf, "; ".join(problems)))
    return word


def apply_step(fsroot, runner, step):
    if step["action"] != "set":
        return step
    before = int(step["ctrl_before"], 16)
    try:
        word = write(fsroot, runner, step["bdf"], before, 0, MASK)
    except pcie_fix.SetpciFailed as exc:
        step.update(result="failed", message=str(exc))
        return step
    flags = pci_ext.acs_flags(word)
    step.update(result="done", message="ACS Control %s -> %04x (%s)" % (step["ctrl_before"], word, flags))
    return step


def _shown(step):
    def word(key):
        return "%s (%s)" % (step[key], pci_ext.acs_flags(int(step[key], 16)))
    return "pcie:%s ACSCtl" % step["bdf"], word("ctrl_before"), word("ctrl_after")


# -- pvetune_pcie_acs ----------------------------------------------------------------------------------------
def fix(params, run_command, check_mode, diff):
    """pvetune_pcie_acs's entry point: (failed, result, warnings)."""
    warnings, skipped = [], []
    try:
        fsroot = FsRoot(params["root"])
        changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
        pcie_fix.validate_options(vendor=params["vendor"], class_prefix=params["class_prefix"])
        keep, left, errors = targets(fsroot, params["vendor"], params["class_prefix"])
    except (pcie_fix.MrrsError, ValueError, FsError) as exc:
        return True, {"msg": "ACS: %s" % exc}, warnings
    if errors:
        return True, {"msg": "ACS not changed: cannot read %s" % "; ".join(errors), "errors": errors}, warnings
    warnings.extend("ACS of %s left as it is: %s" % item for item in left)
    steps = plan(keep)
    for step in steps:
        changes.plan_runtime(runtime_key(step["bdf"]), pcie_fix.config_path(step["bdf"]), step["ctrl_before"],
                             step["ctrl_after"], shown=_shown(step))
    todo = [s for s in steps if s["action"] == "set"]
    failures = []
    if todo and not check_mode:
        exe = pcie_fix.setpci_available(Runner(fsroot, run_command))
        if exe is None and not fsroot.live:
            reason = "root is %s and setpci (pciutils) is not installed here; ACS left as it is" % fsroot.root
            skipped.append({"command": "setpci", "reason": reason})
            for step in todo:
                step.update(result="skipped", message=reason)
            changes.runtime, todo = [], []
        elif exe is None:
            return True, {"msg": "setpci (pciutils) is not installed on this host", "ports": steps}, warnings
    runner = Runner(fsroot, run_command)
    try:
        if todo and not check_mode:
            changes.apply()
            for step in todo:
                apply_step(fsroot, runner, step)
                if step["result"] == "failed":
                    failures.append(step["message"])
    except (CommandUnavailable, OSError, IOError, FsError, ChangeError) as exc:
        failures.append("ACS: %s" % exc)
    result = {"changed": changes.changed, "ports": steps, "left": [{"bdf": b, "reason": r} for b, r in left],
              "boot_ports": [s["bdf"] for s in steps], "reboot_required": False, "changes": changes.summary(),
              "skipped_commands": skipped}
    if failures:
        done = {s["bdf"] for s in steps if s["result"] == "done"}
        changes.runtime = [rt for rt in changes.runtime if rt["key"].split(":", 1)[1].rsplit(":", 1)[0] in done]
        result.update(msg="ACS: %d port(s) failed: %s" % (len(failures), "; ".join(failures)),
                      changes=changes.summary())
        return True, result, warnings
    if diff:
        result["diff"] = changes.diffs()
    return False, result, warnings


# -- boot and rollback ---------------------------------------------------------------------------------------
def boot_apply(fsroot, runner, ports):
    """Clear the redirect bits of the configured ports again; (ok, [messages]).  A port with a vfio-pci device
    below it now is skipped with the reason; a port that is gone or has no ACS is an error."""
    vfio = pcie.vfio_functions(fsroot)
    ok, messages = True, []
    for bdf in ports:
        fns = pcie.list_functions(fsroot, bdfs=[bdf], keep_bytes=True)
        reach = {bdf} | ({fns[0]["parent"]} if fns and fns[0].get("parent") else set())
        below = [v["bdf"] for v in vfio if v.get("chain") and reach & set(v["chain"][:-1])]
        if below:
            messages.append("%s: left as it is, vfio-pci in its switch (%s)" % (bdf, ", ".join(below)))
            continue
        try:
            if not fns or fns[0].get("config") is None:
                raise pcie_fix.SetpciFailed("%s: %s" % (bdf, (fns[0].get("error") if fns else None) or "not present"))
            acs = pci_ext.parse_acs(fns[0]["raw"], fns[0]["config"])
            if acs is None:
                raise pcie_fix.SetpciFailed("%s: no ACS capability" % bdf)
            if not acs["redirect"]:
                messages.append("%s: redirect bits already clear (ACS Control %04x)" % (bdf, acs["ctrl"]))
                continue
            word = write(fsroot, runner, bdf, acs["ctrl"], 0, MASK)
            messages.append("%s: ACS Control %04x -> %04x" % (bdf, acs["ctrl"], word))
        except (pcie_fix.SetpciFailed, pci_config.PciConfigError, CommandUnavailable) as exc:
            ok = False
            messages.append("failed: %s" % exc)
    return ok, messages


def validate_boot_config(config):
    """/etc/pvetune/pcie-mrrs.json as the boot helper reads it: pcie_fix.validate_config's keys and acs_ports."""
    if not isinstance(config, dict):
        raise AcsError("pcie-mrrs configuration must be a mapping")
    rest = dict(config)
    ports = validate_ports(rest.pop("acs_ports", None))
    out = pcie_fix.validate_config(rest)
    out["acs_ports"] = ports
    return out


def boot_apply_pcie(fsroot, runner, config):
    """pvetune-boot pcie-mrrs: MaxReadReq (pcie_fix.boot_apply), then the ACS ports of ``acs_ports``."""
    ports = []
    if isinstance(config, dict):
        config = dict(config)
        try:
            ports = validate_ports(config.pop("acs_ports", None))
        except AcsError as exc:
            return False, ["configuration: %s" % exc]
    ok, messages = pcie_fix.boot_apply(fsroot, runner, config)
    if ports:
        acs_ok, acs_messages = boot_apply(fsroot, runner, ports)
        ok, messages = ok and acs_ok, messages + ["ACS " + m for m in acs_messages]
    return ok, messages


def restore(fsroot, runner, bdf, original, check_mode):
    """Rollback: the redirect bits of ACS Control back to ``original`` (hex word the manifest recorded), masked."""
    try:
        pci_config.validate_bdf(bdf)
        want = int(str(original), 16) & MASK
        fns = pcie.list_functions(fsroot, bdfs=[bdf], keep_bytes=True)
        if not fns or fns[0].get("config") is None:
            return {"result": "skipped", "message": "%s not present now" % bdf}
        acs = pci_ext.parse_acs(fns[0]["raw"], fns[0]["config"])
        if acs is None:
            return {"result": "failed", "message": "%s has no ACS capability now" % bdf}
        rec = {"before": "ACSCtl %04x" % acs["ctrl"], "after": "ACSCtl %04x" % ((acs["ctrl"] & ~MASK) | want)}
        if acs["ctrl"] & MASK == want:
            rec["result"] = "unchanged"
        elif check_mode:
            rec["result"] = "would restore"
        else:
            write(fsroot, runner, bdf, acs["ctrl"], want, MASK)
            rec["result"] = "restored"
        return rec
    except (ValueError, FsError, CommandUnavailable, pcie_fix.SetpciFailed, pci_config.PciConfigError) as exc:
        return {"result": "failed", "message": str(exc)}
