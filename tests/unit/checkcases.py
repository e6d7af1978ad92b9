"""Evaluator scenarios, shared by every unit test file that holds some: tests/unit/test_checks.py (every check on
one hand-built host) and a concern's own tests/unit/test_<concern>.py (a check added later, next to its reader test).

A scenario is ``(check id, status, [mutations of the file's good facts], policy overrides or None, a fragment of the
message, reboot_required)``. A file with scenarios names them ``SCENARIOS`` at module level and runs them with
``assert_scenario``; test_checks holds every catalogue check to a passing and an error (or skip) scenario in one of
those files (``all_scenarios``), so no list of checks is written by hand anywhere.
"""
import glob
import importlib
import json
import os
import re
import zlib

from ansible.module_utils.pvetune.audit import evaluate, gather
from ansible.module_utils.pvetune.core.catalogue import STATUSES
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT_KEYS = {"id", "title", "severity", "status", "current", "expected", "reboot_required", "message",
               "rationale", "remediation", "fix_tag", "evidence", "items"}
ITEM_KEYS = {"name", "status", "current", "expected", "message"}
DEFAULT = merge_policy(None)


def by_id(results):
    return {r["id"]: r for r in results}


def run_check(facts, policy=None, check_id=None):
    return by_id(evaluate(facts, merge_policy(policy) if policy is not None else DEFAULT, only={check_id}))[check_id]


def audit_tree(root, policy=None, as_returned=False):
    """``(facts, {check id: result})`` of gather + evaluate on a tree with a merged ``policy`` (default: the
    default policy); ``as_returned``: the facts pass through JSON first, as pvetune_facts returns them."""
    policy = policy or DEFAULT
    facts = gather(FsRoot(str(root)), None, policy)
    if as_returned:
        facts = json.loads(json.dumps(facts))
    return facts, by_id(evaluate(facts, policy))


def setv(path, value):
    """Set facts[path[0]][path[1]]... = value (path is a tuple; a missing parent is created)."""
    def apply(facts):
        node = facts
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        node[path[-1]] = value
    return apply


def delv(path):
    def apply(facts):
        node = facts
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return apply


def scenario_id(scenario):
    # crc32, not hash(): str hashes are salted per process, so ids would change on every run.
    return "%s-%s-%04d" % (scenario[0], scenario[1], zlib.crc32(scenario[4].encode("utf-8")) % 10000)


def assert_scenario(facts, scenario):
    """Apply the scenario's mutations to ``facts`` (a fresh copy of the file's good facts) and check the result."""
    check_id, status, mutations, overrides, fragment, reboot = scenario
    for mutate in mutations:
        mutate(facts)
    res = run_check(facts, overrides, check_id)
    assert res["status"] == status, res["message"]
    assert fragment in res["message"]
    assert res["reboot_required"] is reboot
    assert set(res) - {"matrix"} == RESULT_KEYS and ("matrix" in res) == (check_id == "pcie.topology"
                                                                             and status == "pass")
    for item in res["items"]:
        assert set(item) == ITEM_KEYS, item
        assert item["status"] in STATUSES
    return res


def all_scenarios():
    """{test module name: its SCENARIOS} of every tests/unit file that defines them at module level."""
    out = {}
    for path in sorted(glob.glob(os.path.join(HERE, "test_*.py"))):
        with open(path, encoding="utf-8") as handle:
            if not re.search(r"^SCENARIOS = ", handle.read(), re.M):
                continue
        name = os.path.basename(path)[:-3]
        out[name] = importlib.import_module(name).SCENARIOS
    return out
