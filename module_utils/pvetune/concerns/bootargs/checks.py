# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot arguments: which boot loader the host really uses (``detect_loader``, see docs/DESIGN.md), the configured
command line read from it and the effective one (/proc/cmdline), and the evaluator of boot.cmdline.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.core import cpuprofile
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats import grub_chain, grub_parse, kernel_cmdline
from ansible.module_utils.pvetune.formats.grub_parse import GRUB_DEFAULT_FILE
from ansible.module_utils.pvetune.formats.kernel_cmdline import KERNEL_CMDLINE, arg_key, arg_value
from ansible.module_utils.pvetune.formats.pbt_output import parse_pbt_status


def gather_cmdline(fsroot):
    raw = fsroot.read_text("/proc/cmdline", limit=65536)
    return {"raw": raw.strip(), "args": kernel_cmdline.split_cmdline(raw)}


def gather_boot(fsroot):
    det = detect_loader(fsroot)
    out = dict(det)
    out["evidence"] = list(det.get("evidence") or [])
    out["evidence"].append("boot loader: %s (rule: %s)" % (det["loader"], det.get("rule")))
    if det["loader"] == "systemd-boot":
        path = "/etc/kernel/cmdline"
        out["config_path"] = path
        if not fsroot.isfile(path):
            out["configured_args"] = None
            out["evidence"].append("%s missing: proxmox-boot-tool falls back to /proc/cmdline" % path)
            return out
        args, info = kernel_cmdline.parse_kernel_cmdline_file(fsroot.read_text(path))
        out["configured_args"] = args
        out["evidence"].append("%s (first line): %s" % (path, " ".join(args)))
        return out
    files = grub_parse.read_grub_files(fsroot)
    out["config_path"] = "/etc/default/grub" + (" + grub.d" if len(files) > 1 else "")
    if not files:
        out["configured_args"] = None
        out["evidence"].append("/etc/default/grub missing")
        return out
    try:
        eff = grub_chain.grub_effective(files)
    except grub_parse.GrubParseError as exc:
        return {"error": str(exc), "loader": det["loader"], "evidence": out["evidence"]}
    linux = eff.get("GRUB_CMDLINE_LINUX") or ""
    default = eff.get("GRUB_CMDLINE_LINUX_DEFAULT") or ""
    out["configured_args"] = kernel_cmdline.split_cmdline(linux) + kernel_cmdline.split_cmdline(default)
    out["grub"] = eff
    out["evidence"].append("GRUB files: %s" % ", ".join(entry[0] for entry in files))
    out["evidence"].append('GRUB_CMDLINE_LINUX="%s" GRUB_CMDLINE_LINUX_DEFAULT="%s"' % (linux, default))
    return out


def _arg_key(arg):
    return arg_key(arg)


def _same_arg(a, b):
    # The kernel (and kernel_cmdline.plan_args, which the fix uses) treats "-"/"_" in names and quoted values alike.
    return arg_key(a) == arg_key(b) and arg_value(a) == arg_value(b)


def _arg_map(args):
    """{normalised key: [full args]} for a list of kernel args."""
    out = {}
    for arg in args or []:
        out.setdefault(_arg_key(arg), []).append(arg)
    return out


def configured_boot_args(facts):
    return (facts.get("boot") or {}).get("configured_args")


def effective_args(facts):
    return (facts.get("cmdline") or {}).get("args") or []


def boot_arg_state(facts, arg):
    """('effective'|'pending'|'missing'|'transient', detail) for one required arg."""
    key = _arg_key(arg)
    eff = _arg_map(effective_args(facts)).get(key, [])
    configured = configured_boot_args(facts)
    conf = _arg_map(configured or []).get(key, []) if configured is not None else None
    # For repeated parameters the kernel (and GRUB's concatenation) lets the last one win.
    on_now = bool(eff) and _same_arg(eff[-1], arg)
    if conf is None:
        return ("effective" if on_now else "missing"), eff
    in_conf = bool(conf) and _same_arg(conf[-1], arg)
    if on_now and in_conf:
        return "effective", eff
    if in_conf:
        return "pending", eff
    if on_now:
        return "transient", conf
    return "missing", conf or eff


def check_cmdline(facts, policy):
    cid = "boot.cmdline"
    policy = cpuprofile.for_host(policy, facts)
    boot = facts.get("boot") or {}
    cpu_err = policy["host_cpu"]["error"] if policy.get("cmdline_cpu_args") else None
    if cpu_err:
        return make_result(cid, policy, "error", None, "cannot tell which CPU boot args this host needs: %s"
                           % cpu_err, evidence=boot.get("evidence"))
    if boot.get("error"):
        return make_result(cid, policy, "error", None, boot["error"], evidence=boot.get("evidence"))
    cmdline_err = section_error(facts, "cmdline")
    if cmdline_err:
        # Without /proc/cmdline every configured arg would look "pending".
        return make_result(cid, policy, "error", None, "cannot tell which args are effective: %s" % cmdline_err,
                           evidence=boot.get("evidence"))
    ev = list(boot.get("evidence", []))
    ev.append("/proc/cmdline: %s" % ((facts.get("cmdline") or {}).get("raw") or "").strip())
    required = policy["cmdline_required"]
    forbidden = policy["cmdline_forbidden"]
    loader = boot.get("loader") or "?"
    where = boot.get("config_path") or loader
    items = []
    states = []
    for arg in required:
        state, seen = boot_arg_state(facts, arg)
        states.append(state)
        msg = {"effective": "configured and effective",
               "pending": "configured in %s, not on /proc/cmdline until reboot" % where,
               "transient": "on /proc/cmdline but not configured in %s: lost at next boot" % where,
               "missing": "not configured in %s" % where}[state]
        if state == "missing" and seen:
            msg += " (found conflicting %s)" % " ".join(seen)
        items.append({"name": arg, "status": {"effective": "pass", "pending": "pending"}.get(state, "fail"),
                      "current": " ".join(seen) if seen else None, "expected": arg, "message": msg})
    eff_keys = _arg_map(effective_args(facts))
    conf_keys = _arg_map(configured_boot_args(facts) or [])
    for arg in forbidden:
        key = _arg_key(arg)
        found = [a for a in eff_keys.get(key, []) + conf_keys.get(key, []) if _same_arg(a, arg) or "=" not in arg]
        items.append({"name": "no %s" % arg, "status": "fail" if found else "pass",
                      "current": " ".join(sorted(set(found))) or None, "expected": "absent",
                      "message": "remove it from %s" % where if found else ""})
    current = "%s: %s" % (loader, " ".join(configured_boot_args(facts) or []) or "(empty)")
    fails = [i for i in items if i["status"] == "fail"]
    if fails:
        return make_result(cid, policy, "fail", current, "; ".join("%s: %s" % (i["name"], i["message"]) for i in fails),
                           items, ev, reboot_required=True)
    if "pending" in states:
        return make_result(cid, policy, "pending", current,
                           "configured in %s; effective after the next reboot" % where, items, ev, reboot_required=True)
    return make_result(cid, policy, "pass", current, "all required args configured in %s and effective" % where,
                       items, ev)


ESP_LIST = "/etc/kernel/proxmox-boot-uuids"

PBT_STATUS_SNAPSHOT = "/.pvetune/proxmox-boot-tool-status.txt"

EFI_DIR = "/sys/firmware/efi"

LOADER_INFO_EFIVAR = "/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"


def detect_loader(fsroot, pbt_status_text=None):
    """Which boot loader boots the host, per docs/DESIGN.md "Boot loader detection".

    ``pbt_status_text``: live ``proxmox-boot-tool status`` output, if the caller
    ran it; otherwise a captured ``/.pvetune/proxmox-boot-tool-status.txt`` is used.
    Returns {"loader", "managed_by_pbt", "uefi", "rule", "reason", "evidence",
    "esps", "cmdline_path"}; rule is "pbt-status" (1), "esp-list+uefi" (2) or
    "grub-default" (3).
    """
    managed = fsroot.exists(ESP_LIST)
    uefi = fsroot.isdir(EFI_DIR)
    result = {"loader": None, "managed_by_pbt": managed, "uefi": uefi, "rule": None, "reason": "",
              "evidence": [], "esps": [], "notes": []}

    def done(loader, rule, reason, evidence):
        result.update({"loader": loader, "rule": rule, "reason": reason})
        result["evidence"].extend(e for e in evidence if e not in result["evidence"])
        result["cmdline_path"] = KERNEL_CMDLINE if loader == "systemd-boot" else GRUB_DEFAULT_FILE
        return result

    status_text, status_src = pbt_status_text, "proxmox-boot-tool status"
    if status_text is None and fsroot.isfile(PBT_STATUS_SNAPSHOT):
        try:
            status_text, status_src = fsroot.read_text(PBT_STATUS_SNAPSHOT), PBT_STATUS_SNAPSHOT
        except FsError as exc:
            result["notes"].append(str(exc))
    if status_text is not None:
        st = parse_pbt_status(status_text)
        result["esps"] = st["esps"]
        if st["booted"] is not None:
            result["uefi"] = uefi = st["booted"] == "uefi"
        if st["esps"]:
            result["managed_by_pbt"] = managed = True
            kinds = {e["loader"] for e in st["esps"]}
            if not uefi:
                return done("grub", "pbt-status", "proxmox-boot-tool status: booted in legacy BIOS mode, "
                            "so the ESPs boot GRUB", [status_src])
            if kinds == {"systemd-boot"}:
                return done("systemd-boot", "pbt-status", "proxmox-boot-tool status: ESPs configured with uefi "
                            "(systemd-boot)", [status_src])
            if kinds == {"grub"}:
                return done("grub", "pbt-status", "proxmox-boot-tool status: ESPs configured with grub",
                            [status_src])
            result["notes"].append("proxmox-boot-tool status is ambiguous (%s); using rule 2"
                                   % ", ".join(sorted(str(k) for k in kinds)))
            result["evidence"].append(status_src)
        elif st["managed"] is False:
            result["managed_by_pbt"] = False
            return done("grub", "pbt-status", "proxmox-boot-tool status: no ESP list, plain GRUB from "
                        "/etc/default/grub", [status_src])
    if managed:
        try:
            result["esp_uuids"] = [ln.strip() for ln in fsroot.read_text(ESP_LIST).splitlines() if ln.strip()]
        except FsError as exc:
            result["notes"].append(str(exc))
    if managed and uefi:
        if fsroot.exists(LOADER_INFO_EFIVAR):
            return done("systemd-boot", "esp-list+uefi", "ESP list present, booted in UEFI mode and the "
                        "LoaderInfo EFI variable (set by systemd-boot) exists",
                        [ESP_LIST, EFI_DIR, LOADER_INFO_EFIVAR])
        if fsroot.exists(KERNEL_CMDLINE):
            return done("systemd-boot", "esp-list+uefi", "ESP list present, booted in UEFI mode and "
                        "/etc/kernel/cmdline exists", [ESP_LIST, EFI_DIR, KERNEL_CMDLINE])
        return done("grub", "esp-list+uefi", "ESP list present and UEFI, but neither the LoaderInfo EFI variable "
                    "nor /etc/kernel/cmdline exists: GRUB", [ESP_LIST, EFI_DIR])
    if managed:
        return done("grub", "grub-default", "ESP list present, booted in legacy BIOS mode: GRUB on the ESPs",
                    [ESP_LIST])
    return done("grub", "grub-default", "no %s: plain GRUB from /etc/default/grub" % ESP_LIST, [])


SECTIONS = (("cmdline", lambda ctx: gather_cmdline(ctx.fsroot)), ("boot", lambda ctx: gather_boot(ctx.fsroot)))
CHECKS = {"boot.cmdline": check_cmdline}
