"""Every malformed-input case (tests/fixtures/corpus) through the audit and the fix modules.

Audit (pvetune_facts on the case's tree, as uid 65534 for the permission cases): the module
succeeds, no result carries a Python traceback or "internal error", no gather error is an
unexpected exception, and each check named in the case has an expected status and a message
(or items) naming the file and the problem.  The audit changes nothing.

Fix (the modules the case names, in-process, not in check mode): the expected outcome
(changed / unchanged / refused / failed), the words of the failure message, and nothing lost:
when the module refuses or fails, every byte of the tree is as before (pvetune's own state and
/run excepted); when it changes a CT config, every line it did not report as changed is still
there, byte for byte and in order, and the per-run backup equals the original.
"""
import base64
import json
import os

import corpus
import hardening_lib as lib
import pytest

CASES = corpus.cases()


def test_corpus_is_big_enough_and_described():
    assert len(CASES) >= 40
    for name, spec in CASES:
        assert spec.get("description") and "\n" not in spec["description"], name
        assert spec.get("audit") or spec.get("fix"), name


def _result(res, check_id):
    for item in res["results"]:
        if item["id"] == check_id:
            return item
    raise AssertionError("no result for %s" % check_id)


def _audit(tree, nobody):
    args = {"root": tree, "include_facts": True}
    if nobody:
        lib.load_modules_for_fork()
        return lib.run_as_nobody(lambda: lib.run_module("pvetune_facts", args, check_mode=True))
    return lib.run_module("pvetune_facts", args, check_mode=True)


def _lines(data):
    """Lines with their endings (LF, CRLF, or none for the last)."""
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _is_subsequence(needles, haystack):
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def _check_preserved(tree, rel, before, ct_result, run_id):
    after = lib.read(tree, rel)
    changed_lines = {c["line_no"] for c in ct_result["changes"] if c["action"] in ("replace", "remove")}
    old = _lines(before)
    kept = [line for no, line in enumerate(old, 1) if no not in changed_lines]
    new = _lines(after)
    # A line is "kept" also when only its ending was normalised because a line was added after the last one.
    assert _is_subsequence([k.rstrip(b"\n") if i == len(kept) - 1 else k for i, k in enumerate(kept)],
                           [n.rstrip(b"\n") if i == len(new) - 1 else n for i, n in enumerate(new)]), \
        "%s: lines pvetune did not report as changed were lost or reordered" % rel
    backup = os.path.join(tree, "var/lib/pvetune/runs", run_id, rel)
    assert lib.read(tree, os.path.relpath(backup, tree)) == before, "%s: backup differs from the original" % rel
    return old, new


def _fix_run(name, spec, run, tree, index):
    run_id = "corpus-%s-%d" % (name.split("-", 1)[0], index)
    args = dict(run["args"], root=tree, run_id=run_id)
    before_files = lib.files_of(tree, corpus.STATE_IGNORED)
    res = lib.run_module(run["module"], args)
    problems = lib.no_traceback(res)
    assert not problems, (name, run["module"], problems, res.get("msg"))
    after_files = lib.files_of(tree, corpus.STATE_IGNORED)
    outcome = run["outcome"]
    msg = res.get("msg") or ""
    if outcome in ("failed", "refused"):
        assert res.get("failed"), (name, "expected the module to fail/refuse", res)
        assert msg and "Traceback" not in msg
        if outcome == "refused":
            assert res.get("refused") or "refus" in msg, (name, msg)
        # Nothing lost, nothing written: the whole tree is as before.
        assert lib.differences(before_files, after_files) == [], (name, msg)
    elif outcome in ("changed", "unchanged", "ok"):
        assert not res.get("failed"), (name, msg)
        if outcome != "ok":
            # What the module changed on the host: its planned files and runtime values (pvetune's own
            # state file, e.g. nvidia-majors.json, does not count).
            summary = res.get("changes") or {}
            changed = bool(summary.get("files") or summary.get("runtime")) if "changes" in res else res["changed"]
            assert changed == (outcome == "changed"), (name, summary)
    for word in run.get("message") or []:
        assert word in msg or word in json.dumps(res), (name, word, msg)
    for rel in run.get("unchanged") or []:
        assert before_files.get(rel) == after_files.get(rel), (name, rel, "changed")
    for rel in run.get("preserve") or []:
        cts = [c for c in res.get("cts", []) if c["path"].lstrip("/") == rel]
        assert cts and cts[0]["status"] == "changed", (name, cts)
        old, new = _check_preserved(tree, rel, before_files[rel][1], cts[0], run_id)
        if run.get("untouched_after_line"):
            tail = old[run["untouched_after_line"] - 1:]
            assert new[-len(tail):] == tail, (name, "snapshot/pending sections changed")
        for needle in run.get("contains") or []:
            assert base64.b64decode(needle) in lib.read(tree, rel), (name, base64.b64decode(needle))
        for needle in run.get("absent") or []:
            assert base64.b64decode(needle) not in lib.read(tree, rel), (name, base64.b64decode(needle))
    if isinstance(run.get("contains"), dict):
        for rel, needles in run["contains"].items():
            for needle in needles:
                assert base64.b64decode(needle) in lib.read(tree, rel), (name, rel, base64.b64decode(needle))
    if isinstance(run.get("absent"), dict):
        for rel, needles in run["absent"].items():
            for needle in needles:
                assert base64.b64decode(needle) not in lib.read(tree, rel), (name, rel, base64.b64decode(needle))
    return res


@pytest.mark.parametrize("name,spec", CASES, ids=[c[0] for c in CASES])
def test_case(name, spec, hardening_tmp):
    tree = corpus.build(name, spec, hardening_tmp, "corpus-" + name)
    try:
        before = lib.digest(tree)
        res = _audit(tree, spec.get("nobody"))
        assert not res.get("failed"), (name, res.get("msg"))
        problems = lib.no_traceback(res)
        assert not problems, (name, problems)
        for err in res.get("gather_errors") or []:
            assert "trace" not in err, (name, "unexpected exception while gathering", err)
        for check_id, want in spec.get("audit", {}).items():
            result = _result(res, check_id)
            assert result["status"] in want["status"], (name, check_id, result["status"], result["message"])
            shown = json.dumps({"message": result["message"], "items": result["items"],
                                "evidence": result["evidence"]})
            for word in want.get("message") or []:
                assert word in shown, (name, check_id, word, result["message"])
            if result["status"] in ("error", "skip"):
                assert result["message"], (name, check_id)
        assert lib.digest(tree) == before, (name, "the audit changed the tree")
        for index, run in enumerate(spec.get("fix") or []):
            _fix_run(name, spec, run, tree, index)
    finally:
        lib.rmtree(tree)
