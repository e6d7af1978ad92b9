# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel: the running, installed and pinned kernels and the one the next boot uses (``kernel_state``), kernel
version order and series membership (``in_series``, the one definition the audit and the fix share), and the
evaluator of version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.pvetune.concerns.bootargs.checks import configured_boot_args, effective_args, detect_loader
from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.tables import kernel_issues
from ansible.module_utils.pvetune.tables.nvidia_generations import generation_of
from ansible.module_utils.pvetune.formats.grub_chain import grub_effective
from ansible.module_utils.pvetune.formats.grub_menu import parse_grubenv, grub_default_kernel
from ansible.module_utils.pvetune.formats.grub_parse import GRUB_DEFAULT_FILE, GrubParseError, read_grub_files
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError, arg_key
from ansible.module_utils.pvetune.formats.kernel_version import (
    in_series,
    kernel_sort_key,
    validate_kernel_version,
)


def gather_kernel(ctx):
    """The kernel section. The boot section (read just before) already detected the loader and evaluated the
    GRUB files: both are taken from it instead of being read twice; when it could not be read, they are read here."""
    boot = ctx.facts.get("boot")
    if not isinstance(boot, dict) or boot.get("error") or not boot.get("loader"):
        return kernel_state(ctx.fsroot)
    return kernel_state(ctx.fsroot, loader_info=boot, grub_eff=boot.get("grub"))


# -- kernel and boot -----------------------------------------------------------
def check_kernel_version(facts, policy):
    cid = "kernel.version"
    series = policy["kernel_series"]
    err = section_error(facts, "kernel")
    if err:
        return make_result(cid, policy, "error", None, err)
    kern = facts["kernel"]
    ev = list(kern.get("evidence", []))
    if not series:
        return make_result(cid, policy, "skip", kern.get("running"), "kernel_series is empty in the policy",
                           evidence=ev)
    running = kern.get("running") or ""
    nxt = kern.get("next_boot_kernel")
    rule = kern.get("next_boot_rule") or ""
    matching = [v for v in kern.get("installed") or [] if in_series(v, series)]
    current = "running %s; next boot %s (%s); installed %s" % (
        running or "?", nxt or "?", rule, ", ".join(kern.get("installed") or []) or "none")
    items = [{"name": "running", "status": "pass" if in_series(running, series) else "fail",
              "current": running, "expected": "%s.x" % series, "message": ""},
             {"name": "next boot", "status": "pass" if in_series(nxt or "", series) else "fail",
              "current": nxt, "expected": "%s.x" % series, "message": rule}]
    if in_series(running, series):
        if nxt and not in_series(nxt, series):
            return make_result(cid, policy, "warn", current,
                               "running %s but the next boot would start %s (%s)" % (running, nxt, rule), items, ev)
        return make_result(cid, policy, "pass", current, "running %s" % running, items, ev)
    if nxt and in_series(nxt, series):
        return make_result(cid, policy, "pending", current, "%s is %s; running %s until the next reboot" % (
            nxt, "pinned" if "pin" in rule else "the default", running), items, ev, reboot_required=True)
    if matching:
        msg = "%s installed but not pinned (next boot: %s)" % (", ".join(matching), nxt)
    else:
        msg = "no %s kernel installed (install %s)" % (series, policy["kernel_package"])
    return make_result(cid, policy, "fail", current, "running %s; %s" % (running, msg), items, ev, reboot_required=True)


GRUB_PIN_SNIPPET = "/etc/default/grub.d/proxmox-kernel-pin.cfg"

GRUB_CFG = "/boot/grub/grub.cfg"

GRUB_ENV = "/boot/grub/grubenv"

PIN_FILE = "/etc/kernel/proxmox-boot-pin"

NEXT_BOOT_PIN = "/etc/kernel/next-boot-pin"

OSRELEASE = "/proc/sys/kernel/osrelease"


def _first_line_of(fsroot, path):
    try:
        text = fsroot.read_text(path, limit=4096)
    except FsError:
        return None
    line = text.split("\n", 1)[0].strip()
    return line or None


def _versions_from(fsroot, directory, prefix):
    found = []
    for name in fsroot.listdir(directory):
        if not name.startswith(prefix):
            continue
        ver = name[len(prefix):]
        try:
            found.append(validate_kernel_version(ver))
        except BootConfigError:
            continue
    return found


def kernel_state(fsroot, loader_info=None, grub_eff=None):
    """Running, installed and pinned kernels, and the kernel the next boot will use. ``loader_info``
    (bootargs.detect_loader) and ``grub_eff`` (grub_chain.grub_effective of the GRUB files) are read here unless the
    caller already has them.

    next_boot_kernel / next_boot_rule:
      hosts managed by proxmox-boot-tool: the next-boot pin ("next-boot-pin"),
      else the pin ("pin") - applied to the ESPs by proxmox-boot-tool refresh;
      otherwise, and on plain GRUB hosts, GRUB_DEFAULT: a kernel id/title
      ("grub-pin" when proxmox-boot-tool's proxmox-kernel-pin.cfg set it, else
      "grub-default"), "saved" read from /boot/grub/grubenv ("grub-saved-entry"),
      unset/0 or a default naming a kernel that is not installed ("newest-installed":
      entry 0, the newest /boot/vmlinuz-* by version sort, as update-grub orders
      them); "unknown" when it cannot be told (a menu index, unreadable files).
      On plain GRUB hosts the pin files only feed proxmox-boot-tool's GRUB
      snippet; a pin that disagrees with GRUB_DEFAULT is reported in warnings.
    """
    if loader_info is None:
        loader_info = detect_loader(fsroot)
    state = {"running": fsroot.try_value(OSRELEASE), "installed": [], "images": [], "modules": [],
             "pinned": _first_line_of(fsroot, PIN_FILE), "next_boot": _first_line_of(fsroot, NEXT_BOOT_PIN),
             "grub_default": None, "next_boot_kernel": None, "next_boot_rule": "unknown",
             "next_boot_reason": "", "loader": loader_info.get("loader"),
             "managed_by_pbt": bool(loader_info.get("managed_by_pbt")), "warnings": [], "errors": []}
    images = _versions_from(fsroot, "/boot", "vmlinuz-")
    modules = _versions_from(fsroot, "/lib/modules", "")
    state["images"] = sorted(images, key=kernel_sort_key)
    state["modules"] = sorted(modules, key=kernel_sort_key)
    state["installed"] = sorted(set(images) | set(modules), key=kernel_sort_key)
    newest = state["images"][-1] if state["images"] else None
    for key in ("pinned", "next_boot"):
        if state[key] is not None:
            try:
                validate_kernel_version(state[key])
            except BootConfigError as exc:
                state["errors"].append({"path": PIN_FILE if key == "pinned" else NEXT_BOOT_PIN, "error": str(exc)})
                state[key] = None
                continue
            if state[key] not in images:
                state["warnings"].append("%s kernel %s has no /boot/vmlinuz-%s" % (key, state[key], state[key]))

    grub = {"value": None, "path": None, "line": None, "kernel": None, "form": None}
    try:
        eff = grub_eff if grub_eff is not None else grub_effective(read_grub_files(fsroot))
        grub["value"] = eff["GRUB_DEFAULT"]
        if eff["set_by"]["GRUB_DEFAULT"]:
            grub["path"] = eff["set_by"]["GRUB_DEFAULT"]["path"]
            grub["line"] = eff["set_by"]["GRUB_DEFAULT"]["line"]
        grub["kernel"], grub["form"] = grub_default_kernel(grub["value"])
        if grub["form"] == "saved":
            try:
                env = parse_grubenv(fsroot.read_text(GRUB_ENV))
            except FsError:
                env = {}
            entry = env.get("next_entry") or env.get("saved_entry")
            grub["saved_entry"] = entry
            grub["kernel"], form = grub_default_kernel(entry)
            grub["saved_form"] = form
    except (GrubParseError, FsError) as exc:
        state["errors"].append({"path": getattr(exc, "path", GRUB_DEFAULT_FILE), "error": str(exc)})
        grub["form"] = "unknown"
    state["grub_default"] = grub

    def decide(kernel, rule, reason):
        state.update({"next_boot_kernel": kernel, "next_boot_rule": rule, "next_boot_reason": reason})
        return state

    if state["managed_by_pbt"]:
        if state["next_boot"]:
            return decide(state["next_boot"], "next-boot-pin", "%s (proxmox-boot-tool)" % NEXT_BOOT_PIN)
        if state["pinned"]:
            return decide(state["pinned"], "pin", "%s (proxmox-boot-tool)" % PIN_FILE)
        if state["loader"] == "systemd-boot":
            if newest is None:
                return decide(None, "unknown", "no /boot/vmlinuz-* found")
            return decide(newest, "newest-installed", "systemd-boot default proxmox-*: the newest kernel")
    else:
        for key, path in (("next_boot", NEXT_BOOT_PIN), ("pinned", PIN_FILE)):
            if state[key] and grub["kernel"] != state[key]:
                state["warnings"].append(
                    "%s names %s but GRUB_DEFAULT selects %s; GRUB follows GRUB_DEFAULT "
                    "(run proxmox-boot-tool kernel pin again)" % (path, state[key], grub["kernel"] or "entry 0"))
                break
    form = grub.get("saved_form") if grub["form"] == "saved" else grub["form"]
    if grub["form"] == "saved":
        rule = "grub-saved-entry"
    elif grub["path"] == GRUB_PIN_SNIPPET:
        rule = "grub-pin"  # GRUB_DEFAULT written by proxmox-boot-tool kernel pin
    else:
        rule = "grub-default"
    if form in ("id", "title"):
        if grub["kernel"] in images:
            return decide(grub["kernel"], rule, "GRUB_DEFAULT=%s" % grub["value"])
        state["warnings"].append("GRUB default entry names kernel %s, which is not installed; GRUB falls back "
                                 "to entry 0" % grub["kernel"])
        form = "entry0"
    if form == "entry0":
        if newest is None:
            return decide(None, "unknown", "no /boot/vmlinuz-* found")
        return decide(newest, "newest-installed", "GRUB entry 0 boots the newest kernel (version sort)")
    return decide(None, "unknown", "GRUB_DEFAULT=%r cannot be resolved to a kernel without grub.cfg"
                  % grub["value"])


def _issue_text(row):
    fixed = "fixed in %s" % row["fixed_in"] if row["fixed_in"] else "no fixed kernel known"
    return "%s (%s; %s; %s)" % (row["problem"], row["id"], fixed, row["source"])


def check_known_issues(facts, policy):
    cid = "kernel.known_issues"
    err = section_error(facts, "kernel")
    if err:
        return make_result(cid, policy, "error", None, err)
    kern = facts["kernel"]
    cpu = facts.get("cpu") if isinstance(facts.get("cpu"), dict) and not facts["cpu"].get("error") else {}
    gens = sorted({generation_of(f.get("device_id"), f.get("model"))
                   for f in gpu_functions(facts)} - {None})
    driver = ((facts.get("nvidia") or {}).get("version") or {}).get("version")
    rows = kernel_issues.applicable(cpu, gens, driver)
    host = "%s (family 0x%s, model 0x%s), GPUs: %s, NVIDIA driver %s" % (
        cpu.get("model") or cpu.get("vendor") or "unknown CPU",
        "%x" % cpu["family"] if cpu.get("family") is not None else "?",
        "%x" % cpu["model_id"] if cpu.get("model_id") is not None else "?", ", ".join(gens) or "none known",
        driver or "not loaded")
    ids = ", ".join(r["id"] for r in rows) or "none"
    ev = ["%s; %d of %d table rows apply: %s" % (host, len(rows), len(kernel_issues.KNOWN_ISSUES), ids)]
    # The workaround a row names counts where it is effective (running) or configured (next boot).
    kernels = [("running", kern.get("running"), {arg_key(a) for a in effective_args(facts)})]
    if kern.get("next_boot_kernel") and kern.get("next_boot_kernel") != kern.get("running"):
        kernels.append(("next boot", kern["next_boot_kernel"], {arg_key(a) for a in configured_boot_args(facts) or ()}))
    items, hit = [], {}
    for label, version, args in kernels:
        if not version:
            continue
        found = [r for r in rows if kernel_issues.affects(r, version)
                 and not set(r.get("mitigated_by") or ()) & args]
        hit[label] = found
        worst = "fail" if any(r["status"] == "fail" for r in found) else "warn" if found else "pass"
        items.append({"name": "%s %s" % (label, version), "status": worst,
                      "current": ", ".join(r["id"] for r in found) or "no known issue", "expected": "no known issue",
                      "message": " | ".join(_issue_text(r) for r in found)})
    current = "; ".join("%s: %s" % (i["name"], i["current"]) for i in items) or "kernel unknown"
    if not rows:
        return make_result(cid, policy, "pass", current, "no row of the table applies to %s" % host, items, ev)
    nxt = hit.get("next boot", hit.get("running")) or []
    if hit.get("running") and not nxt:
        return make_result(cid, policy, "pending", current, "the running kernel has %s; the next boot's kernel "
                           "has no such problem" % ", ".join(r["id"] for r in hit["running"]), items, ev,
                           reboot_required=True)
    if nxt:
        status = "fail" if any(r["status"] == "fail" for r in nxt) else "warn"
        return make_result(cid, policy, status, current, " | ".join(_issue_text(r) for r in nxt), items, ev,
                           reboot_required=status == "fail")
    return make_result(cid, policy, "pass", current, "no known issue for %s in %s" % (
        host, ", ".join(v for _l, v, _a in kernels if v)), items, ev)


SECTIONS = (("kernel", gather_kernel),)
CHECKS = {"kernel.version": check_kernel_version, "kernel.known_issues": check_known_issues}
