#!/usr/bin/env python3
"""Generate docs/checks.md from the check catalogue and the default policy, and docs/variables.md.

The catalogue (module_utils/pvetune/core/catalogue.py CATALOGUE) and the policy
(module_utils/pvetune/core/policy.py DEFAULT_POLICY, validate_policy) are the only
sources: every text below comes from them, with the default policy's values
filled into the templates.  POLICY_DOCS describes each key's meaning, the
rule validate_policy enforces for it and the checks it affects; generation
fails when a key is missing there (or described but no longer in the policy),
or when a catalogue template uses a key whose entry does not name that check.

docs/variables.md, the reference of every playbook variable, comes from the roles' argument specs and the
variables the playbooks and roles read (scripts/role_vars.py); generation fails when one of those is in no
argument spec, or when two roles document a variable differently.

Usage: scripts/gen_docs.py [--output FILE] [--variables-output FILE] [--check]
  --output FILE            docs/checks.md goes to FILE (only that file, unless --variables-output is given too)
  --variables-output FILE  docs/variables.md goes to FILE (likewise); neither option: both files, in docs/
  --check                  do not write; exit 1 when a file differs from what would be written
"""

import argparse
import difflib
import json
import os
import string
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import conftest  # noqa: E402,F401  (makes ansible.module_utils.pvetune importable)
import role_vars  # noqa: E402
from ansible.module_utils.pvetune.core.catalogue import (  # noqa: E402
    CATALOGUE,
    SEVERITIES,
    STATUSES,
    fix_needs_reboot,
    policy_context,
)
from ansible.module_utils.pvetune.tables import kernel_issues, nvidia_generations  # noqa: E402
from ansible.module_utils.pvetune.core.policy import DEFAULT_POLICY, MRRS_SIZES, merge_policy  # noqa: E402
from ansible.module_utils.pvetune.report_document import fix_argv  # noqa: E402

DEFAULT_OUTPUT = os.path.join(TOP, "docs", "checks.md")

# What each status means (docs/DESIGN.md "Result").
STATUS_DOCS = {
    "pass": "the host matches the policy",
    "fail": "it does not; `reboot_required` says whether the fix needs a reboot",
    "warn": "acceptable but worth a look (an accepted fallback, a link below its speed at idle, a next boot that "
            "would leave the kernel series)",
    "pending": "the fix is configured but only takes effect after the next reboot (boot arguments in the boot loader "
               "but not on /proc/cmdline, a kernel pinned but not running)",
    "skip": "the check does not apply (no NVIDIA GPU, not an AMD CPU, `skip_checks`, ...) and says why",
    "error": "an input could not be read or parsed; the message names the file. The other checks are still "
             "evaluated",
}

# key -> (what it means, the rule validate_policy enforces)
POLICY_DOCS = {
    "amd_pstate_mode": ("amd_pstate mode an AMD host should run; `amd_pstate=<mode>` is the kernel argument "
                        "cpu.scaling_driver looks for and boot.cmdline requires (with `cmdline_cpu_args`).",
                        "one of `active`, `passive`, `guided`",
                        ["cpu.scaling_driver"]),
    "intel_pstate_mode": ("intel_pstate mode an Intel host should run (switched at runtime and at boot through "
                          "`/sys/devices/system/cpu/intel_pstate/status`); `intel_pstate=<mode>` is required on the "
                          "command line only where intel_pstate is not loaded.",
                          "`active` or `passive`",
                          ["cpu.scaling_driver"]),
    "scaling_driver": ("cpufreq driver every policy should report (scaling_driver); empty: the driver of the "
                       "vendor's mode (`amd-pstate-epp` or `amd-pstate` on AMD, `intel_pstate` or `intel_cpufreq` "
                       "on Intel). A value set here applies to every vendor, so set it per group.",
                       "empty, or a lower-case driver name: a letter, then letters, digits, `_` or `-` (32 "
                       "characters at most)",
                       ["cpu.scaling_driver"]),
    "scaling_driver_fallback": ("Drivers accepted instead of `scaling_driver` (e.g. no CPPC in the firmware): "
                                "cpu.scaling_driver reports them as warn, not fail.",
                                "a list of driver names (same rule as `scaling_driver`)",
                                ["cpu.scaling_driver"]),
    "governor": ("cpufreq governor every policy should use.",
                 "a lower-case word: a letter, then letters, digits, `_` or `-` (32 characters at most)",
                 ["cpu.governor"]),
    "epp": ("energy_performance_preference every policy that has one should use.",
            "a lower-case word (same rule as `governor`)",
            ["cpu.epp"]),
    "max_cstate": ("Deepest allowed C-state (1 = C1; POLL is always allowed), set with the argument of the idle "
                   "driver in use: `processor.max_cstate=<n>` for acpi_idle (AMD hosts), "
                   "`intel_idle.max_cstate=<n>` for intel_idle (intel_idle ignores processor.max_cstate); it "
                   "must be effective and no deeper idle state enabled.",
                   "an integer 1-9 (not a boolean, not a string; 0 is refused: intel_idle.max_cstate=0 disables "
                   "intel_idle altogether)",
                   ["cpu.cstates"]),
    "numa_balancing": ("Required value of kernel.numa_balancing, at runtime and persisted in sysctl.d.",
                       "the integer 0 or 1 (not a boolean, not a float, not a string)",
                       ["kernel.numa_balancing"]),
    "pcie_mrrs": ("PCIe Max Read Request Size, in bytes, every NVIDIA function must use.",
                  "an integer, one of %s" % ", ".join(str(s) for s in MRRS_SIZES),
                  ["pcie.mrrs"]),
    "pcie_vendor": ("PCI vendor id of the GPUs the PCIe and NVIDIA checks look at.",
                    "`0x` and four lower-case hex digits (like `0x10de`)",
                    ["pcie.mrrs", "pcie.link", "nvidia.driver"]),
    "pcie_class_prefix": ("PCI class prefix of those functions (`0x03`: display controllers).",
                          "`0x` and 2-6 lower-case hex digits (like `0x03` or `0x0302`)",
                          ["pcie.mrrs", "pcie.link", "nvidia.driver"]),
    "gpu_p2p": ("GPU peer-to-peer through PCIe switches: `auto` fails ACS redirect bits on the switch ports "
                "between two GPUs (ports with a vfio-pci device in their switch skip), `ignore` skips pcie.acs.",
                "`auto` or `ignore`",
                ["pcie.acs"]),
    "pcie_acs_fix": ("Let fix.yml (tag pcie) clear the ACS redirect bits pcie.acs fails on, with a masked setpci "
                     "write, re-applied at every boot; off by default because it changes IOMMU isolation.",
                     "`true` or `false`",
                     ["pcie.acs"]),
    "iommu_passthrough": ("Host-owned GPUs must sit in identity IOMMU domains: iommu.mode fails translated ones and "
                          "boot.cmdline then requires `iommu=pt`.",
                          "`true` or `false`",
                          ["iommu.mode", "boot.cmdline"]),
    "lxc_min_cpus_per_gpu": ("CPUs a GPU CT needs per GPU it uses (lxc.resources): one busy host thread per GPU "
                             "worker, its NCCL proxy thread, and a share of the tokenizer, scheduler and API server. "
                             "0 disables the count.",
                             "an integer 0-256",
                             ["lxc.resources"]),
    "lxc_min_memory_per_gpu": ("Memory (MiB) a GPU CT needs per GPU it uses (lxc.resources): pinned host buffers "
                               "(CUDA, NCCL, the engine's CPU swap space, 4 GiB per GPU in vLLM) and the page cache "
                               "the weights load through. 0 disables the check.",
                               "an integer 0-4194304",
                               ["lxc.resources"]),
    "lxc_numa_pin": ("Let fix.yml (tag lxc) write `lxc.cgroup2.cpuset.cpus` with the CPUs of the NUMA nodes of a "
                     "GPU CT's GPUs where its CPUs miss them; effective at the CT's next start.",
                     "`true` or `false`",
                     ["lxc.resources"]),
    "kernel_series": ("Kernel series the host should run (and boot next); empty disables kernel.version.",
                      "`<major>.<minor>` (1-2 and 1-3 ASCII digits, like `6.14`) or the empty string",
                      ["kernel.version"]),
    "kernel_package": ("Package that provides the series (named in the remediation).",
                       "a Debian package name: lower-case letters, digits, `.`, `+`, `-`; 2-81 characters, starting "
                       "with a letter or digit",
                       ["kernel.version"]),
    "cmdline_required": ("Kernel arguments that must be configured in the active boot loader and present on "
                         "/proc/cmdline (boot.cmdline; the last occurrence of a key wins). With `cmdline_cpu_args` "
                         "the CPU's own arguments come first; setting this key without `cmdline_cpu_args` makes "
                         "it the whole list.",
                         "a list of plain kernel arguments: `key` or `key=value`; key `[A-Za-z0-9_][A-Za-z0-9_.-]` "
                         "(64 characters at most), value `[A-Za-z0-9_.,:/+@-]` (1-190 characters). No spaces, "
                         "quotes, `$`, `;`, `=` in the value, newlines or other characters a shell or boot loader "
                         "would interpret; all of them together at most 1,919 bytes (x86 keeps 2,047 bytes of the "
                         "command line, the rest is cut at boot; 128 are left for the boot loader's own)",
                         ["boot.cmdline"]),
    "cmdline_forbidden": ("Kernel arguments that must not be configured or effective: a key forbids every value, "
                          "`key=value` only that value.",
                          "a list of plain kernel arguments (same rule as `cmdline_required`)",
                          ["boot.cmdline"]),
    "cmdline_cpu_args": ("Add the CPU's own boot arguments to `cmdline_required`: `amd_pstate=<amd_pstate_mode>` "
                         "on AMD, `intel_pstate=<intel_pstate_mode>` on Intel where intel_pstate is not loaded, and "
                         "the C-state limit of the idle driver in use. Turned off when the inventory sets "
                         "`cmdline_required` without it, so an explicit list keeps exactly what it says.",
                         "`true` or `false`",
                         ["boot.cmdline"]),
    "lxc_check": ("Check the NVIDIA device allow lines of every CT config (lxc.gpu_devices).",
                  "`true` or `false` (a boolean, not 0/1 or a string)",
                  ["lxc.gpu_devices"]),
    "nvidia_persistence": ("Require persistence mode on every GPU when nvidia-smi output is available "
                           "(nvidia.driver).",
                           "`true` or `false`",
                           ["nvidia.driver"]),
    "skip_checks": ("Checks not to evaluate at all, with the reason shown in their skip result.",
                    "a mapping of check id (one of the ids above) to a reason string",
                    []),
}


def _cell(text):
    """Text for a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(value):
    return "`%s`" % json.dumps(value)


# Template values a host's CPU profile derives (catalogue.GENERIC_CPU_TEMPLATE, core/cpuprofile.py) -> the policy
# keys they come from.
DERIVED_TEMPLATE_KEYS = {"pstate_driver": (), "pstate_mode": ("amd_pstate_mode", "intel_pstate_mode"),
                         "pstate_remediation": ("amd_pstate_mode", "intel_pstate_mode"),
                         "cstate_arg": ("max_cstate",), "idle_driver": ()}


def _template_keys(entry):
    """Policy keys a catalogue entry's templates use ({cmdline_required_str} is cmdline_required)."""
    keys = set()
    for field in ("title", "expected", "remediation"):
        for _text, name, _spec, _conv in string.Formatter().parse(entry[field]):
            if name in DERIVED_TEMPLATE_KEYS:
                keys.update(DERIVED_TEMPLATE_KEYS[name])
            elif name:
                keys.add(name[:-4] if name.endswith("_str") else name)
    return keys


def _fix_command(entry):
    """The fix command line the reports show for a check (report_document.fix_argv), with placeholders."""
    argv = fix_argv("<host>", entry["id"], False, ["<inventory>"])
    if argv is None:
        return None
    line = "`%s`" % " ".join(argv)
    if fix_needs_reboot(entry["id"], True) and not fix_needs_reboot(entry["id"], False):
        line += ", with `-e pvetune_reboot_ok=true` %s" % entry["reboot"]
    return line


def render():
    unknown = sorted(set(POLICY_DOCS) - set(DEFAULT_POLICY))
    missing = sorted(set(DEFAULT_POLICY) - set(POLICY_DOCS))
    if unknown or missing:
        raise SystemExit("gen_docs.py: POLICY_DOCS out of sync with DEFAULT_POLICY (missing: %s; not in the policy: %s)"
                         % (", ".join(missing) or "-", ", ".join(unknown) or "-"))
    if set(STATUS_DOCS) != set(STATUSES):
        raise SystemExit("gen_docs.py: STATUS_DOCS out of sync with catalogue.STATUSES")
    ids = [entry["id"] for entry in CATALOGUE]
    for entry in CATALOGUE:
        for key in _template_keys(entry):
            if key not in POLICY_DOCS or entry["id"] not in POLICY_DOCS[key][2]:
                raise SystemExit("gen_docs.py: %s uses policy key %s; list it in POLICY_DOCS[%r]"
                                 % (entry["id"], key, key))
    for key, (_meaning, _rule, used_by) in POLICY_DOCS.items():
        if set(used_by) - set(ids):
            raise SystemExit("gen_docs.py: POLICY_DOCS[%r] names unknown checks %s" % (key, set(used_by) - set(ids)))
    policy = merge_policy(None)  # the defaults, validated
    ctx = policy_context(policy)

    def fill(text):
        return text.format(**ctx)

    out = [
        "# pvetune checks and policy",
        "",
        "<!-- Generated by scripts/gen_docs.py from module_utils/pvetune/core/catalogue.py and "
        "module_utils/pvetune/core/policy.py. Do not edit: run `python scripts/gen_docs.py`. "
        "tests/unit/test_docs.py runs it with --check. -->",
        "",
        "Every check pvetune's audit evaluates (`ansible-playbook audit.yml`, module `pvetune_facts`), with the "
        "expected values of the default policy. Site policies override the policy keys below "
        "(`pvetune_policy` in the inventory); the audit reports the expected values of the effective policy.",
        "",
        "## Checks",
        "",
        "| id | severity | title | expected (default policy) | fix tag | reboot |",
        "|---|---|---|---|---|---|",
    ]
    for entry in CATALOGUE:
        out.append("| [`%s`](#%s) | %s | %s | %s | %s | %s |" % (
            entry["id"], entry["id"].replace(".", ""), entry["severity"], _cell(fill(entry["title"])),
            _cell(fill(entry["expected"])), "`%s`" % entry["fix_tag"] if entry["fix_tag"] else "-",
            _cell(entry["reboot"])))
    out += [
        "",
        "Severities, highest first: %s. A host fails the audit when a check at or above `pvetune_fail_on` "
        "(default `high`) is `fail` or `error`, or when it cannot be audited." % ", ".join(
            "`%s`" % s for s in SEVERITIES),
        "",
        "The fix tag is the `fix.yml` tag that changes the setting; `-` means pvetune reports but does not fix it. "
        "Reboot says whether the fix needs one. For every check to fix on a host, the reports (audit.json "
        "`fix_command`, audit.html, the terminal summary) show the whole command: one `-i` per inventory source of "
        "the audit, `-l <host>`, the check's fix tags and, when the fix needs a reboot, `-e pvetune_reboot_ok=true` "
        "(the fix reboots the host only then). The check details below show it with placeholders.",
        "",
        "Statuses:",
        "",
    ]
    out += ["- `%s`: %s." % (s, STATUS_DOCS[s]) for s in STATUSES]
    out += ["", "## Check details", ""]
    for entry in CATALOGUE:
        out += [
            "### %s" % entry["id"],
            "",
            "**%s**" % fill(entry["title"]),
            "",
            "- severity: `%s`" % entry["severity"],
            "- fix tag: %s" % ("`%s`" % entry["fix_tag"] if entry["fix_tag"] else "none (reported only)"),
            "- reboot: %s" % entry["reboot"],
        ]
        if _fix_command(entry):
            out.append("- fix command: %s" % _fix_command(entry))
        out += [
            "- expected: %s" % fill(entry["expected"]),
            "",
            "Why it matters: %s" % entry["rationale"],
            "",
            "Remediation: %s" % fill(entry["remediation"]),
            "",
        ]
    out += [
        "## Policy keys",
        "",
        "Set in the inventory as `pvetune_policy` (a mapping); every key is optional and overrides the default "
        "key by key (lists and mappings are replaced, not merged). `validate_policy` rejects unknown keys and any "
        "value outside the rule before the audit or a fix reads anything, because these values end up on kernel "
        "command lines, in GRUB files, sysctl files and setpci arguments.",
        "",
        "| key | default | accepted values | used in |",
        "|---|---|---|---|",
    ]
    for key in sorted(DEFAULT_POLICY):
        used = [cid for cid in ids if cid in POLICY_DOCS[key][2]]  # catalogue order
        out.append("| `%s` | %s | %s | %s |" % (
            key, _cell(_value(DEFAULT_POLICY[key])), _cell(POLICY_DOCS[key][1]),
            ", ".join("`%s`" % u for u in used) or "every check"))
    out += ["", "### Policy key details", ""]
    for key in sorted(DEFAULT_POLICY):
        meaning, rule, _used = POLICY_DOCS[key]
        out += [
            "- `%s` (default %s): %s Accepted: %s." % (key, _value(DEFAULT_POLICY[key]), meaning, rule),
        ]
    out += _tables()
    out += ["", "Example (inventory `group_vars`):", "", "```yaml", "pvetune_policy:"]
    out += ["  kernel_series: \"%s\"" % DEFAULT_POLICY["kernel_series"],
            "  cmdline_required: [iommu=pt]",
            "  cmdline_cpu_args: true   # keep the CPU's own args too (without it the list above is the whole list)",
            "  skip_checks:",
            "    pcie.mrrs: \"GPUs are passed through to VMs on this host\"",
            "```", ""]
    return "\n".join(out)


def _tables():
    """The data tables nvidia.stack and kernel.known_issues evaluate, every row with its source."""
    out = ["", "## Data tables", "", "**NVIDIA GPU generations** (`nvidia.stack`)", "",
           "module_utils/pvetune/tables/nvidia_generations.py. A GPU's generation comes from the chip code name of its "
           "pci.ids name, else from the device-id ranges (%s)." % nvidia_generations.PCI_IDS, "",
           "| generation | chips | device ids (fallback) | kernel modules | first driver | last branch | sources |",
           "|---|---|---|---|---|---|---|"]
    for row in nvidia_generations.GENERATIONS_TABLE:
        sources = [row["open_source"], row.get("min_source"), row.get("max_source")]
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            row["name"], ", ".join(c + "xx" for c in row["chips"]),
            ", ".join("%04x-%04x" % r for r in row["ranges"]),
            {"required": "open required", "supported": "open or proprietary",
             "unsupported": "proprietary only"}[row["open_modules"]],
            row.get("min_driver") or "-", row.get("max_branch") or "-",
            _cell("; ".join(dict.fromkeys(x for x in sources if x)))))
    out += ["", "A device can need a later driver than its generation's first (Blackwell runs only on the open "
            "modules, so its devices' first drivers are those of %s): %s." % (nvidia_generations.OGKM, ", ".join(
                "10de:%04x %s" % kv for kv in sorted(nvidia_generations.DEVICE_MIN_DRIVER.items())))]
    out += ["", "**Known kernel issues** (`kernel.known_issues`)", "",
            "module_utils/pvetune/tables/kernel_issues.py, evaluated against the running and the next boot's kernel "
            "(the numeric part of the Proxmox version, e.g. 6.8.12 of 6.8.12-4-pve: Proxmox kernels carry backports "
            "this table does not know of).", "",
            "| id | CPU | GPU / driver | affected | fixed in | status | problem | source |",
            "|---|---|---|---|---|---|---|---|"]
    for row in kernel_issues.KNOWN_ISSUES:
        cpu = row["cpu"]
        cpu_text = "any" if cpu is None else "%s family %s%s" % (
            cpu["vendor"], "/".join("0x%x" % f for f in cpu["family"]),
            ", models 0x%x-0x%x" % cpu["models"] if cpu.get("models") else "")
        gpu = "any" if row["gpu"] is None else "NVIDIA %s" % row["gpu"]
        if row.get("driver_below"):
            gpu += ", driver < %s" % row["driver_below"]
        if row.get("driver_branches"):
            gpu += ", driver branch %s" % "/".join(str(b) for b in row["driver_branches"])
        affected = ">= %s" % row["since"] if row.get("since") else "all"
        if row.get("backports"):
            affected += " (fixed in stable %s)" % ", ".join(row["backports"])
        out.append("| `%s` | %s | %s | %s | %s | %s | %s | %s |" % (
            row["id"], cpu_text, gpu, affected, row["fixed_in"] or "-", row["status"],
            _cell(row["problem"] + (" (worked around by %s)" % ", ".join(row["mitigated_by"])
                                    if row.get("mitigated_by") else "")), _cell(row["source"])))
    return out


def _check(path, text):
    """0 when ``path`` holds ``text``, else 1 with a diff on stderr."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            current = handle.read()
    except OSError as exc:
        current = ""
        print("%s: %s" % (path, exc.strerror), file=sys.stderr)
    if current != text:
        diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                    "%s (committed)" % path, "%s (generated)" % path, n=1)
        sys.stderr.writelines(list(diff)[:80])
        print("%s is stale: run python scripts/gen_docs.py" % path, file=sys.stderr)
        return 1
    print("%s: up to date" % path)
    return 0


def _variables():
    try:
        return role_vars.render()
    except ValueError as exc:
        raise SystemExit("gen_docs.py: docs/variables.md: %s" % exc)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="where docs/checks.md goes")
    parser.add_argument("--variables-output", help="where docs/variables.md goes")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is not up to date; write nothing")
    args = parser.parse_args(argv)
    both = args.output is None and args.variables_output is None
    targets = []
    if both or args.output:
        targets.append((args.output or DEFAULT_OUTPUT, render))
    if both or args.variables_output:
        targets.append((args.variables_output or role_vars.OUTPUT, _variables))
    status = 0
    for path, make in targets:
        text = make()
        if args.check:
            status |= _check(path, text)
            continue
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        print("wrote %s" % path)
    return status


if __name__ == "__main__":
    sys.exit(main())
