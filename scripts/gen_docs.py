#!/usr/bin/env python3
"""Generate docs/checks.md from the check catalogue and the default policy, and docs/variables.md.

The catalogue (module_utils/pvetune/core/catalogue.py CATALOGUE) and the policy
(module_utils/pvetune/core/policy.py POLICY_KEYS: each key's default, meaning, the
rule validate_policy enforces and the checks that read it) are the only sources:
every text below comes from them, with the default policy's values filled into
the templates.  Generation fails when a catalogue template uses a policy key
whose entry does not name that check.

README.md's blocks between "<!-- gen_docs: NAME -->" and "<!-- /gen_docs -->" come from the same sources: the
check table (each catalogue entry's summary) and the demo fleet's summary table (the audit of the generated demo
trees with the demo inventory's policy, rendered as `make audit` prints it).

docs/variables.md, the reference of every playbook variable, comes from the roles' argument specs and the
variables the playbooks and roles read (scripts/role_vars.py); generation fails when one of those is in no
argument spec, or when two roles document a variable differently.

Usage: scripts/gen_docs.py [--output FILE] [--variables-output FILE] [--check]
  --output FILE            docs/checks.md goes to FILE (only that file, unless --variables-output is given too)
  --variables-output FILE  docs/variables.md goes to FILE (likewise); neither option: both files, in docs/, and
                           README.md's generated blocks
  --check                  do not write; exit 1 when a file differs from what would be written
"""

import argparse
import difflib
import json
import os
import re
import string
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import conftest  # noqa: E402,F401  (makes ansible.module_utils.pvetune importable)
import demo_fleet  # noqa: E402
import role_vars  # noqa: E402
import yaml  # noqa: E402
from ansible.module_utils.pvetune.audit import evaluate, gather  # noqa: E402
from ansible.module_utils.pvetune.core.catalogue import (  # noqa: E402
    CATALOGUE,
    SEVERITIES,
    STATUSES,
    fix_needs_reboot,
    policy_context,
)
from ansible.module_utils.pvetune.tables import (  # noqa: E402
    cuda_targets, kernel_issues, nvidia_generations, nvidia_hmm, nvidia_xid)
from ansible.module_utils.pvetune.core.policy import DEFAULT_POLICY, POLICY_KEYS, merge_policy  # noqa: E402
from ansible.module_utils.pvetune.core.cpuprofile import for_host  # noqa: E402
from ansible.module_utils.pvetune.core.fsroot import FsRoot  # noqa: E402
from ansible.module_utils.pvetune.report.document import build_document, entry_from_audit, fix_argv  # noqa: E402
from ansible.module_utils.pvetune.report.write import render_text  # noqa: E402

DEFAULT_OUTPUT = os.path.join(TOP, "docs", "checks.md")
README = os.path.join(TOP, "README.md")
DEMO_GROUP_VARS = os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")

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

POLICY_DOCS = {key.name: (key.meaning, key.rule, list(key.checks)) for key in POLICY_KEYS}


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
    if set(STATUS_DOCS) != set(STATUSES):
        raise SystemExit("gen_docs.py: STATUS_DOCS out of sync with catalogue.STATUSES")
    ids = [entry["id"] for entry in CATALOGUE]
    for entry in CATALOGUE:
        for key in _template_keys(entry):
            if key not in POLICY_DOCS or entry["id"] not in POLICY_DOCS[key][2]:
                raise SystemExit("gen_docs.py: %s uses policy key %s; name it in that key's checks "
                                 "(core/policy.py POLICY_KEYS)" % (entry["id"], key))
    for key, (_meaning, _rule, used_by) in POLICY_DOCS.items():
        if set(used_by) - set(ids):
            raise SystemExit("gen_docs.py: POLICY_KEYS %r names unknown checks %s" % (key, set(used_by) - set(ids)))
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
    return out + _gpu_tables()


def _gpu_tables():
    """The tables of nvidia.uvm_hmm, nvidia.compute_capability and gpu.health."""
    out = ["", "**nvidia-uvm HMM issues** (`nvidia.uvm_hmm`)", "",
           "module_utils/pvetune/tables/nvidia_hmm.py. HMM is on by default from the r535 open kernel modules on "
           "x86_64 (%s); with policy `nvidia_uvm_hmm: auto` a branch below wants it off." % nvidia_hmm.DEFAULT_ON, "",
           "| driver branches | problem | sources |", "|---|---|---|"]
    for row in nvidia_hmm.HMM_ISSUES:
        out.append("| %s | %s | %s |" % ("/".join(str(b) for b in row["branches"]), _cell(row["problem"]),
                                        _cell(row["source"])))
    out += ["", "**Compute capability and the first CUDA release that targets it** (`nvidia.compute_capability`)", "",
            "module_utils/pvetune/tables/cuda_targets.py. The capability comes from the chip in the GPU's pci.ids "
            "name (%s), else from its device id; a CT's CUDA release from the names of libcudart.so.<ver> and "
            "libcublas.so.<ver> in its library directories and /usr/local/cuda/lib64." % cuda_targets.CC_SOURCE, "",
            "| compute capability | chips | first CUDA | source |", "|---|---|---|---|"]
    for cc, (first, source) in sorted(cuda_targets.FIRST_CUDA.items(), key=lambda kv: cuda_targets.version_tuple(
            kv[0]), reverse=True):
        chips = ", ".join(p.replace("[0-9]", "x").replace("[1-9]", "x").replace("[01]", "x")
                          for p, c in cuda_targets.CHIPS if c == cc)
        out.append("| %s (sm_%s) | %s | %s | %s |" % (cc, cc.replace(".", ""), chips, first, _cell(source)))
    out += ["", "**Xid codes** (`gpu.health`)", "",
            "module_utils/pvetune/tables/nvidia_xid.py (%s). Any other code warns with its number." % nvidia_xid.SOURCE,
            "", "| Xid | grade | meaning |", "|---|---|---|"]
    for code, (grade, meaning) in sorted(nvidia_xid.XID.items()):
        out.append("| %d | %s | %s |" % (code, grade, _cell(meaning)))
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


def readme_checks():
    return "\n".join(["| id | what |", "|---|---|"] +
                     ["| `%s` | %s |" % (entry["id"], _cell(entry["summary"])) for entry in CATALOGUE]) + "\n"


def readme_fleet():
    """The fleet table `make audit` prints: the demo trees (generated when stale) audited in-process."""
    demo_fleet.ensure()
    with open(DEMO_GROUP_VARS, encoding="utf-8") as handle:
        group_vars = yaml.safe_load(handle)
    policy = merge_policy(group_vars["pvetune_policy"])
    entries = []
    for host in sorted(demo_fleet.HOSTS):
        fsroot = FsRoot(os.path.join(demo_fleet.DEFAULT_OUT, host))
        facts = gather(fsroot, None, policy)
        host_policy = for_host(policy, facts)
        entries.append(entry_from_audit(host, {"root": "/", "results": evaluate(facts, host_policy),
                                               "policy": host_policy}))
    text = render_text(build_document(entries, fail_on=group_vars["pvetune_fail_on"]), detail=False)
    return "```\n" + text.split("\n\n", 1)[0] + "\n```\n"


README_BLOCKS = {"checks": readme_checks, "fleet": readme_fleet}
_BLOCK = re.compile(r"(<!-- gen_docs: (\w+) -->\n)(.*?)(<!-- /gen_docs -->)", re.S)


def render_readme(current=None):
    """README.md with every generated block rendered anew; the rest byte for byte."""
    if current is None:
        with open(README, encoding="utf-8") as handle:
            current = handle.read()
    names = [m.group(2) for m in _BLOCK.finditer(current)]
    if sorted(names) != sorted(README_BLOCKS):
        raise SystemExit("gen_docs.py: README.md must hold each generated block once: %s (has %s)"
                         % (", ".join(sorted(README_BLOCKS)), ", ".join(names) or "none"))
    return _BLOCK.sub(lambda m: m.group(1) + README_BLOCKS[m.group(2)]() + m.group(4), current)


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
    if both:
        targets.append((README, render_readme))
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
