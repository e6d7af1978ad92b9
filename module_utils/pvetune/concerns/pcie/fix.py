# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe Max Read Request Size of the NVIDIA functions: select, plan, apply, verify.

The write is always the masked ``setpci -s <bdf> CAP_EXP+8.w=<v>:7000`` from
pci_config.setpci_mrrs_args (bits 14:12 only; bit 15 is Initiate Function Level Reset on an
endpoint, so Device Control is never written unmasked).  After each write:

* ``setpci -s <bdf> CAP_EXP+8.w`` must answer four hex digits, and
* the function's ``config`` is read and parsed again;

both must show the target MRRS and every other Device Control bit as before.  setpci
prints "Warning: No devices selected for operation group 1" and exits 0 when the address
matches nothing: that is a failure here.

On the live host (root "/") setpci runs through Runner.run (PATH lookup).  For a tree it
runs as ``setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci ...`` through
Runner.run_system, which only ever touches the tree's config files.

MRRS is a register: it resets to the firmware's value on every boot (and on a function
reset), so ``boot_apply`` (pvetune-boot pcie-mrrs) re-applies it at every boot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.pcie import checks as pcie
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner
from ansible.module_utils.pvetune.formats import pci_config

VENDOR = re.compile(r"0x[0-9a-f]{4}")
CLASS_PREFIX = re.compile(r"0x[0-9a-f]{2,6}")
CONFIG_KEYS = ("mrrs", "vendor", "class_prefix", "bdfs")
DEFAULTS = {"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": None}
NO_DEVICES = "No devices selected"
MAX_BDFS = 256


class MrrsError(ValueError):
    """A bad option or configuration; raised before anything is read for writing or run."""


class SetpciFailed(Exception):
    pass


# -- options -------------------------------------------------------------------
def validate_options(mrrs=4096, vendor="0x10de", class_prefix="0x03", bdfs=None):
    """Normalised options; MrrsError for anything that could not go on a setpci command line."""
    if isinstance(mrrs, bool) or not isinstance(mrrs, int) or mrrs not in pci_config.PAYLOAD_SIZES:
        raise MrrsError("mrrs must be one of %s bytes, not %r"
                        % (", ".join(str(s) for s in pci_config.PAYLOAD_SIZES), mrrs if not isinstance(mrrs, str)
                           else mrrs[:40]))
    if not isinstance(vendor, str) or not VENDOR.fullmatch(vendor):
        raise MrrsError("vendor must be a PCI vendor id like 0x10de (lower-case hex), not %r"
                        % (vendor[:40] if isinstance(vendor, str) else vendor,))
    if not isinstance(class_prefix, str) or not CLASS_PREFIX.fullmatch(class_prefix):
        raise MrrsError("class_prefix must be 0x followed by 2-6 lower-case hex digits of the 24-bit class "
                        "(0x03 display, 0x0302 3D controller), not %r"
                        % (class_prefix[:40] if isinstance(class_prefix, str) else class_prefix,))
    if bdfs is not None:
        if not isinstance(bdfs, (list, tuple)):
            raise MrrsError("bdfs must be a list of PCI addresses")
        if len(bdfs) > MAX_BDFS:
            raise MrrsError("bdfs lists %d addresses; at most %d" % (len(bdfs), MAX_BDFS))
        clean = []
        for bdf in bdfs:
            try:
                pci_config.validate_bdf(bdf)
            except ValueError as exc:
                raise MrrsError("bdfs: %s" % exc)
            if bdf not in clean:
                clean.append(bdf)
        bdfs = clean or None
    return {"mrrs": mrrs, "vendor": vendor, "class_prefix": class_prefix, "bdfs": bdfs}


def validate_config(config):
    """The boot helper's /etc/pvetune/pcie-mrrs.json -> validate_options() result."""
    if not isinstance(config, dict):
        raise MrrsError("pcie-mrrs configuration must be a mapping")
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise MrrsError("unknown pcie-mrrs configuration key(s): %s (known: %s)"
                        % (", ".join(str(k) for k in unknown), ", ".join(CONFIG_KEYS)))
    merged = dict(DEFAULTS)
    merged.update((k, v) for k, v in config.items() if v is not None)
    return validate_options(**merged)


# -- selection and planning ---------------------------------------------------------
def select_functions(fsroot, opts):
    """(functions, errors): the functions to act on, and why others that were asked for cannot be.

    Functions come from pcie.list_functions (vendor, class prefix, optional explicit
    addresses).  An explicit address that is absent or does not match vendor/class, and a
    selected function whose config cannot be parsed or has no PCI Express capability, are errors.
    """
    fns = pcie.list_functions(fsroot, vendor=opts["vendor"], class_prefix=opts["class_prefix"][2:],
                              bdfs=opts["bdfs"])
    errors = []
    if opts["bdfs"]:
        found = {fn["bdf"] for fn in fns}
        for bdf in opts["bdfs"]:
            if bdf in found:
                continue
            if fsroot.exists("%s/%s" % (pci_config.SYSFS_PCI_DEVICES, bdf)):
                errors.append("%s does not match vendor %s and class prefix %s"
                              % (bdf, opts["vendor"], opts["class_prefix"]))
            else:
                errors.append("%s: no such PCI function (%s/%s)" % (bdf, pci_config.SYSFS_PCI_DEVICES, bdf))
    usable = []
    for fn in fns:
        cfg = fn["config"]
        if cfg is None or fn.get("error"):
            # Unreadable ids (vendor/class) or a config that disagrees with them: which device this is,
            # is not certain, so it is not written to.
            errors.append("%s: %s" % (fn["bdf"], fn["error"] or "config space unreadable"))
        elif cfg["cap_exp"] is None:
            errors.append("%s: no PCI Express capability, so no MaxReadReq" % fn["bdf"])
        else:
            usable.append(fn)
    return usable, errors


def devctl_with_mrrs(devctl, mrrs):
    return (devctl & ~pci_config.DEVCTL_MRRS_MASK & 0xFFFF) | (pci_config.mrrs_encoding(mrrs) << 12)


def plan(functions, mrrs):
    """One step per function: {"bdf", "device", "devctl_before", "devctl_after", "mrrs_before",
    "mrrs_after", "action": "set" | "none", "result", "message"}; devctl values as 4 hex digits
    (as setpci prints).  ``result`` is "planned"/"unchanged" until apply_step makes it "done" or
    "failed" (the module also uses "skipped")."""
    steps = []
    for fn in functions:
        before = fn["config"]["devctl"]
        after = devctl_with_mrrs(before, mrrs)
        steps.append({
            "bdf": fn["bdf"],
            "device": "%04x:%04x" % (fn["vendor_id"] or 0, fn["device_id"] or 0),
            "devctl_before": "%04x" % before,
            "devctl_after": "%04x" % after,
            "mrrs_before": pci_config.devctl_mrrs(before),
            "mrrs_after": mrrs,
            "action": "set" if before != after else "none",
            "result": "planned" if before != after else "unchanged",
            "message": None,
        })
    return steps


def runtime_key(bdf):
    return "pcie:%s:devctl" % bdf


def config_path(bdf):
    return "%s/%s/config" % (pci_config.SYSFS_PCI_DEVICES, bdf)


# -- setpci -------------------------------------------------------------------------
def setpci_available(runner):
    """Path of the setpci to use, or None (the real binary, also for a tree)."""
    return runner.which_system("setpci")


def run_setpci(runner, args):
    rc, out, err = runner.run_system("setpci", args)
    text = "%s\n%s" % (out or "", err or "")
    if rc != 0:
        raise SetpciFailed("setpci %s exited %s: %s" % (" ".join(args[-2:]), rc, (err or out or "").strip()[:300]))
    if NO_DEVICES in text:
        raise SetpciFailed("setpci %s selected no device (%r; setpci exits 0 for this)"
                           % (" ".join(args[-2:]), text.strip()[:200]))
    return out


def apply_step(fsroot, runner, step):
    """Masked write, then verify with setpci and the re-parsed config; updates ``step``.

    Raises CommandUnavailable (no setpci, or run_system refused the command line); any other
    problem sets step["result"] = "failed" with step["message"].
    """
    if step["action"] != "set":
        return step
    bdf, mrrs = step["bdf"], step["mrrs_after"]
    sysfs = pci_config.sysfs_path_for_root(fsroot.root)
    before = int(step["devctl_before"], 16)
    keep = 0xFFFF & ~pci_config.DEVCTL_MRRS_MASK
    try:
        run_setpci(runner, pci_config.setpci_mrrs_args(bdf, mrrs, sysfs))
        out = run_setpci(runner, pci_config.setpci_read_args(bdf, sysfs))
        try:
            word = pci_config.parse_setpci_word(out)
        except ValueError as exc:
            raise SetpciFailed("reading back %s: %s" % (bdf, exc))
        try:
            cfg = pci_config.parse_config(fsroot.read_bytes(config_path(bdf), limit=pci_config.EXT_CONFIG_SIZE))
        except (FsError, pci_config.PciConfigError) as exc:
            raise SetpciFailed("re-reading %s: %s" % (config_path(bdf), exc))
        if cfg["cap_exp"] is None:
            raise SetpciFailed("re-reading %s: no PCI Express capability any more" % config_path(bdf))
        cfg_word = int(cfg["devctl"])
        problems = []
        for what, value in (("setpci", word), ("config", cfg_word)):
            if pci_config.devctl_mrrs(value) != mrrs:
                problems.append("%s reads Device Control %04x: MRRS %s, not %d"
                                % (what, value, pci_config.devctl_mrrs(value), mrrs))
            if value & keep != before & keep:
                problems.append("%s reads Device Control %04x: bits other than MRRS changed (before %04x)"
                                % (what, value, before))
        if word != cfg_word:
            problems.append("setpci reads %04x but config reads %04x" % (word, cfg_word))
        if problems:
            raise SetpciFailed("%s: %s" % (bdf, "; ".join(problems)))
    except SetpciFailed as exc:
        step["result"] = "failed"
        step["message"] = str(exc)
        return step
    step["result"] = "done"
    step["devctl_readback"] = "%04x" % word
    step["message"] = "MaxReadReq %s -> %d bytes (Device Control %s -> %04x)" % (
        step["mrrs_before"], mrrs, step["devctl_before"], word)
    return step


# -- pvetune_pcie_mrrs -------------------------------------------------------------
class _Failed(Exception):
    def __init__(self, msg, **extra):
        Exception.__init__(self, msg)
        self.extra = extra


def _plan_into(fsroot, opts, changes, warnings):
    """Select the functions and plan their DevCtl writes into ``changes``; returns the steps."""
    try:
        functions, errors = select_functions(fsroot, opts)
    except (FsError, ValueError) as exc:
        raise _Failed("cannot list PCI functions: %s" % exc)
    if errors:
        raise _Failed("MaxReadReq not set: %s" % "; ".join(errors), errors=errors)
    steps = plan(functions, opts["mrrs"])
    for step in steps:
        shown = ("pcie:%s MaxReadReq" % step["bdf"],
                 "%s bytes (DevCtl %s)" % (step["mrrs_before"], step["devctl_before"]),
                 "%s bytes (DevCtl %s)" % (step["mrrs_after"], step["devctl_after"]))
        changes.plan_runtime(runtime_key(step["bdf"]), config_path(step["bdf"]), step["devctl_before"],
                             step["devctl_after"], shown=shown)
    if not functions:
        warnings.append("no PCI function matches vendor %s and class prefix %s" % (opts["vendor"],
                                                                                   opts["class_prefix"]))
    return steps


def _setpci_or_skip(fsroot, runner, steps, todo, changes, skipped_commands):
    """The steps still to do: none (all skipped) when setpci is missing and root is not the live host."""
    try:
        exe = setpci_available(runner)
    except CommandUnavailable as exc:
        raise _Failed(str(exc))
    if exe is None and not fsroot.live:
        reason = ("root is %s and setpci (pciutils) is not installed on the machine running the module; "
                  "MaxReadReq left as it is" % fsroot.root)
        skipped_commands.append({"command": "setpci", "reason": reason})
        for step in todo:
            step["result"] = "skipped"
            step["message"] = reason
        changes.runtime = []
        return []
    if exe is None:
        raise _Failed("setpci (pciutils) is not installed on this host", functions=steps)
    return todo


def _apply_steps(fsroot, runner, todo, changes):
    failures = []
    try:
        changes.apply()
        for step in todo:
            apply_step(fsroot, runner, step)
            if step["result"] == "failed":
                failures.append(step["message"])
    except CommandUnavailable as exc:
        failures.append(str(exc))
    except (OSError, IOError, FsError, ChangeError) as exc:
        failures.append("MaxReadReq: %s" % exc)
    return failures


def fix(params, run_command, check_mode, diff):
    """pvetune_pcie_mrrs's entry point: returns (failed, result, warnings) for the module to exit with."""
    warnings, skipped_commands = [], []
    try:
        opts = validate_options(params["mrrs"], params["vendor"], params["class_prefix"], params["bdfs"] or None)
        fsroot = FsRoot(params["root"])
        changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
    except (MrrsError, ValueError) as exc:
        return True, {"msg": str(exc)}, warnings
    runner = Runner(fsroot, run_command)
    try:
        steps = _plan_into(fsroot, opts, changes, warnings)
        todo = [s for s in steps if s["action"] == "set"]
        if todo and not check_mode:
            todo = _setpci_or_skip(fsroot, runner, steps, todo, changes, skipped_commands)
    except _Failed as exc:
        return True, dict(msg=str(exc), **exc.extra), warnings
    failures = _apply_steps(fsroot, runner, todo, changes) if todo and not check_mode else []
    if failures:
        # Report only what really changed.
        done = {s["bdf"] for s in steps if s["result"] == "done"}
        changes.runtime = [rt for rt in changes.runtime if rt["key"].split(":", 1)[1].rsplit(":", 1)[0] in done]
        return True, {"msg": "MaxReadReq: %d function(s) failed: %s" % (len(failures), "; ".join(failures)),
                      "functions": steps, "changes": changes.summary(), "skipped_commands": skipped_commands}, warnings
    result = {"changed": changes.changed, "functions": steps, "mrrs": opts["mrrs"], "reboot_required": False,
              "changes": changes.summary(), "skipped_commands": skipped_commands}
    if diff:
        result["diff"] = changes.diffs()
    return False, result, warnings


# -- boot ---------------------------------------------------------------------------
def boot_apply(fsroot, runner, config):
    """pvetune-boot pcie-mrrs: set MRRS on every selected function; returns (ok, [messages]).

    MaxReadReq resets to the firmware default at every boot, so this runs at every boot.
    Nothing is recorded for rollback (the fix run recorded the originals).
    """
    try:
        opts = validate_config(config)
    except MrrsError as exc:
        return False, ["configuration: %s" % exc]
    try:
        functions, errors = select_functions(fsroot, opts)
    except (FsError, ValueError) as exc:
        return False, ["cannot list PCI functions: %s" % exc]
    messages = ["cannot set %s" % e for e in errors]
    ok = not errors
    if not functions:
        messages.append("no PCI function matches vendor %s, class prefix %s%s" % (
            opts["vendor"], opts["class_prefix"], ", bdfs %s" % ",".join(opts["bdfs"]) if opts["bdfs"] else ""))
        return ok, messages
    steps = plan(functions, opts["mrrs"])
    if any(s["action"] == "set" for s in steps) and setpci_available(runner) is None:
        return False, messages + ["setpci (pciutils) is not installed; MaxReadReq not set"]
    for step in steps:
        try:
            apply_step(fsroot, runner, step)
        except CommandUnavailable as exc:
            return False, messages + ["%s: %s" % (step["bdf"], exc)]
        if step["result"] == "failed":
            ok = False
            messages.append("failed: %s" % step["message"])
        elif step["result"] == "done":
            messages.append("%s %s: %s" % (step["bdf"], step["device"], step["message"]))
    unchanged = [s["bdf"] for s in steps if s["action"] == "none"]
    if unchanged:
        messages.append("already %d bytes: %s" % (opts["mrrs"], " ".join(unchanged)))
    return ok, messages


def restore_devctl(fsroot, runner, bdf, original, check_mode):
    """Rollback: MaxReadReq back to the original Device Control's bits 14:12 (masked write, never the whole word).

    ``original`` is the Device Control word (hex) the manifest recorded.  Returns a runtime record
    (before, after, result, message).
    """
    try:
        pci_config.validate_bdf(bdf)
        mrrs = pci_config.devctl_mrrs(int(str(original), 16))
        fns = pcie.list_functions(fsroot, bdfs=[bdf])
        if not fns or fns[0].get("config") is None:
            return {"result": "skipped", "message": "%s not present now" % bdf}
        current = fns[0]["config"]["mrrs"]
        rec = {"before": "MaxReadReq %s" % current, "after": "MaxReadReq %s" % mrrs}
        if current == mrrs:
            rec["result"] = "unchanged"
            return rec
        if check_mode:
            rec["result"] = "would restore"
            return rec
        opts = validate_options(mrrs=mrrs, vendor="0x%04x" % fns[0]["vendor_id"],
                                class_prefix="0x%06x" % fns[0]["class_code"], bdfs=[bdf])
        functions, errors = select_functions(fsroot, opts)
        if errors or not functions:
            rec.update(result="failed", message="; ".join(errors) or "%s not selectable" % bdf)
            return rec
        for step in plan(functions, mrrs):
            apply_step(fsroot, runner, step)
            rec["result"] = "restored" if step.get("result") in ("done", "unchanged") else "failed"
            if step.get("message"):
                rec["message"] = step["message"]
        return rec
    except (ValueError, FsError, CommandUnavailable) as exc:
        return {"result": "failed", "message": str(exc)}
