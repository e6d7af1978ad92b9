# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit: gather every concern's facts in one pass over a root, then evaluate every catalogue check.

``gather(fsroot, runner, policy)`` returns one section per reader of the concerns in ``CONCERNS`` (in that order:
a reader may build on an earlier section, as the LXC reader does on the NVIDIA one).  A section that cannot be read
becomes ``{"error": "<path>: <problem>"}`` and is listed in ``facts["errors"]``; the other sections are still
gathered.  ``evaluate(facts, policy)`` runs, for every catalogue entry, the evaluator its concern registers.
``audit_host`` is pvetune_facts' one call: both, on the root the module names.  Nothing here writes anything.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
import traceback

from ansible.module_utils.pvetune.concerns.bootargs import checks as bootargs
from ansible.module_utils.pvetune.concerns.cpufreq import checks as cpufreq
from ansible.module_utils.pvetune.concerns.cstates import checks as cstates
from ansible.module_utils.pvetune.concerns.gpu import checks as gpu
from ansible.module_utils.pvetune.concerns.host import checks as host
from ansible.module_utils.pvetune.concerns.iommu import checks as iommu
from ansible.module_utils.pvetune.concerns.irq import checks as irq
from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
from ansible.module_utils.pvetune.concerns.lxcgpu import checks as lxcgpu
from ansible.module_utils.pvetune.concerns.lxcres import checks as lxcres
from ansible.module_utils.pvetune.concerns.mem import checks as mem
from ansible.module_utils.pvetune.concerns.numa import checks as numa
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.concerns.nvidia_stack import checks as nvidia_stack
from ansible.module_utils.pvetune.concerns.pcie import checks as pcie
from ansible.module_utils.pvetune.concerns.storage import checks as storage
from ansible.module_utils.pvetune.core import cpuprofile
from ansible.module_utils.pvetune.core.catalogue import BY_ID, CATALOGUE
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.policy import PolicyError, merge_policy
from ansible.module_utils.pvetune.core.result import make_result, summarize
from ansible.module_utils.pvetune.core.runner import Runner
from ansible.module_utils.pvetune.core.scope import run_scope

# Gather order. The catalogue's "concern" of each check names one of these (held together by a test).
CONCERNS = (host, cpufreq, cstates, bootargs, numa, mem, pcie, irq, kernel, nvidia, nvidia_stack, lxcgpu, storage,
            lxcres, iommu, gpu)
BY_NAME = {c.__name__.split(".")[-2]: c for c in CONCERNS}  # concerns/<name>/checks.py


class Context(object):
    """What a reader gets: the root, the command runner, the merged policy and the sections read so far."""

    def __init__(self, fsroot, runner, policy, facts):
        self.fsroot = fsroot
        self.runner = runner
        self.policy = policy
        self.facts = facts


def _section(facts, name, reader, ctx):
    try:
        facts[name] = reader(ctx)
    except FsError as exc:
        facts[name] = {"error": "%s: %s" % (exc.path, exc.reason)}
        facts["errors"].append({"section": name, "path": exc.path, "error": exc.reason})
    except Exception as exc:  # keep the other sections; say where it broke
        msg = "%s: %s" % (type(exc).__name__, exc)
        facts[name] = {"error": msg}
        facts["errors"].append({"section": name, "path": None, "error": msg,
                                "trace": traceback.format_exc(limit=3)})


def gather(fsroot, runner=None, policy=None, sections=None):
    """All facts for all checks (or only the named ``sections``), in one pass."""
    policy = policy or merge_policy(None)
    facts = {"schema": 1, "root": fsroot.root, "errors": []}
    ctx = Context(fsroot, runner, policy, facts)
    for concern in CONCERNS:
        for name, reader in concern.SECTIONS:
            if sections is None or name in sections:
                _section(facts, name, reader, ctx)
    return facts


def host_policy(fsroot, policy):
    """``policy`` resolved for the host under ``fsroot`` (cpuprofile.for_host on its cpu, cpuidle, pci and iommu
    sections), for the fix: raises ValueError when the CPU boot args cannot be told."""
    resolved = cpuprofile.for_host(policy, gather(fsroot, None, policy, sections=("cpu", "cpuidle", "pci", "iommu")))
    if resolved["host_cpu"]["error"] and policy.get("cmdline_cpu_args"):
        raise ValueError("cannot tell which CPU boot args this host needs (policy cmdline_cpu_args): %s"
                         % resolved["host_cpu"]["error"])
    return resolved


def evaluate(facts, policy, only=None):
    """Run every catalogue check (or the ids in ``only``) in catalogue order, against ``policy`` as this host sees it
    (cpuprofile.for_host: the CPU vendor's boot args, driver and C-state limit)."""
    policy = cpuprofile.for_host(policy, facts)
    results = []
    skips = policy.get("skip_checks") or {}
    for entry in CATALOGUE:
        cid = entry["id"]
        if only and cid not in only:
            continue
        if cid in skips:
            results.append(make_result(cid, policy, "skip", None, "skipped by policy: %s" % skips[cid]))
            continue
        try:
            res = BY_NAME[entry["concern"]].CHECKS[cid](facts, policy)
        except Exception as exc:  # an evaluator bug must not hide the other checks
            res = make_result(cid, policy, "error", None, "internal error evaluating %s: %s: %s"
                              % (cid, type(exc).__name__, exc))
        if entry.get("opt_in") and not policy[entry["opt_in"]] and res["status"] in ("fail", "warn", "pending"):
            # fix.yml fixes it only with its opt-in policy key: without it, neither its gate nor the reports' fix
            # command answer for the result.
            res["fix_tag"] = ""
        results.append(res)
    return results


def audit_host(params, run_command, check_mode, diff):
    """pvetune_facts' one call: ``(failed, result, warnings)``.  The policy, the check ids and the root are checked
    before anything is read; then one gather() and evaluate() of the host under ``root`` (or of ``checks``), the
    summary against ``fail_on``, the run's scope when ``run_tags`` is given and the facts with ``include_facts``."""
    try:
        policy = merge_policy(params["policy"])
    except PolicyError as exc:
        return True, {"msg": str(exc)}, []
    unknown = [c for c in params["checks"] if c not in BY_ID]
    if unknown:
        return True, {"msg": "unknown check id(s): %s; known: %s" % (", ".join(unknown), ", ".join(sorted(BY_ID)))}, []
    try:
        fsroot = FsRoot(params["root"])   # a root that is no directory is refused here, by name
    except ValueError as exc:
        return True, {"msg": str(exc)}, []
    runner = Runner(fsroot, run_command)
    started = time.monotonic()
    facts = gather(fsroot, runner, policy)
    policy = cpuprofile.for_host(policy, facts)
    results = evaluate(facts, policy, only=set(params["checks"]) or None)
    out = {
        "changed": False,
        "root": fsroot.root,
        "results": results,
        "summary": summarize(results, params["fail_on"]),
        "policy": policy,
        "host": facts.get("host") if isinstance(facts.get("host"), dict) else {},
        "gather_errors": facts["errors"],
        "duration": round(time.monotonic() - started, 4),
    }
    if params["run_tags"] is not None:
        out["scope"] = run_scope(results, params["run_tags"], params["skip_tags"])
    if params["include_facts"]:
        out["facts"] = facts
    return False, out, []
