#!/usr/bin/env python3
"""The README's test phase table, from a run's tests/output/timings.txt (what scripts/run_tests.sh writes).

    scripts/phase_table.py                                  # print the table for tests/output/timings.txt
    scripts/phase_table.py --timings T --readme README.md --caption "clean clone at abc1234, ..."
                                                            # rewrite README.md between the phase-table markers

A timings line is "PHASE STATUS SECONDSs  cpu N.NN cores  tests N passed, ..." for a phase and
"build:NAME STATUS SECONDSs  (waited Ns)" for a background build; run_tests.sh's last line is "total Ns". A phase
that ran at the same time as another ends in "(beside OTHER)", the other in "(with PHASE beside)"; one that ran
from the start beside all the others in "(in the background from the start)".
"""
import argparse
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- phase-table:begin (scripts/phase_table.py) -->"
END = "<!-- phase-table:end -->"
LINE = re.compile(r"^(?P<name>[\w:-]+)\s+(?P<status>ok|FAILED)\s+(?P<secs>\d+)s(?P<rest>.*)$")
CPU = re.compile(r"cpu (?P<cores>[\d.]+) cores")
TESTS = re.compile(r"tests (?P<tests>[^(]+?)\s*(\(|$)")
NOTE = re.compile(r"\((?P<note>(with|beside|in the background) [^)]*)\)")
WAITED = re.compile(r"\(waited (?P<waited>\d+)s\)")
TOTAL = re.compile(r"^total\s+(?P<secs>\d+)s")


def parse(text):
    """(rows, total seconds or None) of a timings file's text; rows are dicts with name, status, secs, ..."""
    rows, total = [], None
    for raw in text.splitlines():
        line = raw.strip()
        match = TOTAL.match(line)
        if match:
            total = int(match.group("secs"))
            continue
        match = LINE.match(line)
        if not match:
            continue
        row = {"name": match.group("name"), "status": match.group("status"), "secs": int(match.group("secs"))}
        rest = match.group("rest")
        for pattern in (CPU, TESTS, WAITED, NOTE):
            found = pattern.search(rest)
            if found:
                row.update((k, v) for k, v in found.groupdict().items() if k in ("cores", "tests", "waited", "note"))
        rows.append(row)
    return rows, total


def minutes(secs):
    return "%d min %02d s" % divmod(secs, 60)


def render(rows, total, caption):
    out = []
    if caption:
        out.append(caption)
        out.append("")
    out.append("| phase | result | wall | cores busy | tests |")
    out.append("|---|---|---|---|---|")
    for row in rows:
        if row["name"].startswith("build:"):
            wall = "%d s (background, waited %s s)" % (row["secs"], row.get("waited", "?"))
        else:
            wall = "%d s" % row["secs"]
        name = row["name"] + (" (%s)" % row["note"] if row.get("note") else "")
        out.append("| %s | %s | %s | %s | %s |" % (name, row["status"], wall, row.get("cores", ""),
                                                   row.get("tests", "")))
    # A phase that ran beside others adds no wall time of its own: the sum leaves it out, like the builds.
    phases = sum(r["secs"] for r in rows if not r["name"].startswith("build:")
                 and not r.get("note", "").startswith(("beside", "in the background")))
    out.append("")
    if total is not None:
        out.append("Total %s (%d s; %d s of phases)." % (minutes(total), total, phases))
    else:
        out.append("Phases %s (%d s)." % (minutes(phases), phases))
    return "\n".join(out) + "\n"


def replace_between(text, block):
    if BEGIN not in text or END not in text:
        raise ValueError("the README has no %s ... %s markers" % (BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + block + END + tail


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timings", default=os.path.join(TOP, "tests", "output", "timings.txt"))
    parser.add_argument("--readme", help="rewrite this file's table between the markers instead of printing")
    parser.add_argument("--caption", default="", help="a sentence above the table: where and when it was measured")
    args = parser.parse_args(argv)
    try:
        with open(args.timings, encoding="utf-8") as handle:
            rows, total = parse(handle.read())
    except OSError as exc:
        sys.exit("phase_table: cannot read %s: %s" % (args.timings, exc.strerror))
    if not rows:
        sys.exit("phase_table: %s has no phase lines" % args.timings)
    block = render(rows, total, args.caption)
    if not args.readme:
        sys.stdout.write(block)
        return 0
    with open(args.readme, encoding="utf-8") as handle:
        text = handle.read()
    try:
        new = replace_between(text, block)
    except ValueError as exc:
        sys.exit("phase_table: %s: %s" % (args.readme, exc))
    with open(args.readme, "w", encoding="utf-8") as handle:
        handle.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
