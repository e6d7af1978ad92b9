"""The suite's own bookkeeping: run_tests.sh's per-phase test counts and scripts/phase_table.py, which turns a run's
timings.txt into the README's phase table."""
import os
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import phase_table  # noqa: E402

TIMINGS = """\
build:images ok        3s  (waited 0s)
static       ok        5s  cpu 1.01 cores
unit         ok       81s  cpu 1.93 cores  tests 2377 passed, 1 skipped
cluster      FAILED   99s  cpu 0.41 cores  tests 12 passed, 1 failed  (with sanity beside)
sanity       ok      150s  cpu 1.60 cores  tests 7 passed  (beside cluster)
build:lab    ok      512s  (waited 7s)
lab          ok      450s  cpu 1.62 cores  tests 276 passed, 0 failed
lab2         ok      900s  cpu 1.90 cores  tests 3 passed  (in the background from the start)
total          1150s
"""


def shell_test_counts(log_text, tmp_path):
    """run_tests.sh's test_counts function, run by bash on a phase log."""
    log = tmp_path / "phase.log"
    log.write_text(log_text)
    script = "source <(sed -n '/^test_counts() {/,/^}/p' %s); test_counts %s" % (
        os.path.join(TOP, "scripts", "run_tests.sh"), log)
    out = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return out.stdout


def test_counts_sum_every_closing_line_of_a_phase(tmp_path):
    log = ("collected 40 items\n"
           "2377 passed, 1 skipped in 822.76s (0:13:42)\n"
           "============ 13 passed in 99.1s =============\n"
           "3 failed, 10 passed, 2 errors in 3.1s\n"
           "lab-test: 276 passed, 0 failed\n"
           "the module passed 2 checks\n")
    assert shell_test_counts(log, tmp_path) == "  tests 2676 passed, 3 failed, 2 errors, 1 skipped"


def test_counts_say_nothing_for_a_phase_without_a_test_runner(tmp_path):
    assert shell_test_counts("ruff: All checks passed!\n", tmp_path) == ""


def test_the_table_has_every_phase_its_cores_and_counts():
    rows, total = phase_table.parse(TIMINGS)
    assert [r["name"] for r in rows] == ["build:images", "static", "unit", "cluster", "sanity", "build:lab", "lab",
                                         "lab2"]
    assert total == 1150
    table = phase_table.render(rows, total, "Measured somewhere.")
    assert table.startswith("Measured somewhere.\n\n| phase | result | wall | cores busy | tests |")
    assert "| unit | ok | 81 s | 1.93 | 2377 passed, 1 skipped |" in table
    assert "| cluster (with sanity beside) | FAILED | 99 s | 0.41 | 12 passed, 1 failed |" in table
    assert "| sanity (beside cluster) | ok | 150 s | 1.60 | 7 passed |" in table
    assert "| lab2 (in the background from the start) | ok | 900 s | 1.90 | 3 passed |" in table
    assert "| build:lab | ok | 512 s (background, waited 7 s) |  |  |" in table
    # The phases' sum leaves out the background builds and a phase that ran beside another.
    assert table.endswith("Total 19 min 10 s (1150 s; 635 s of phases).\n")


def test_the_readme_is_rewritten_between_its_markers_only(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n%s\nold table\n%s\noutro\n" % (phase_table.BEGIN, phase_table.END))
    timings = tmp_path / "timings.txt"
    timings.write_text(TIMINGS)
    assert phase_table.main(["--timings", str(timings), "--readme", str(readme), "--caption", "New."]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n%s\nNew.\n" % phase_table.BEGIN)
    assert "old table" not in text and text.endswith("%s\noutro\n" % phase_table.END)


def test_bad_input_is_named(tmp_path):
    with pytest.raises(SystemExit) as exc:
        phase_table.main(["--timings", str(tmp_path / "missing.txt")])
    assert "missing.txt" in str(exc.value)
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    timings = tmp_path / "timings.txt"
    timings.write_text(TIMINGS)
    with pytest.raises(SystemExit) as exc:
        phase_table.main(["--timings", str(timings), "--readme", str(readme)])
    assert "README.md" in str(exc.value) and "markers" in str(exc.value)
    assert readme.read_text() == "no markers\n"


def test_the_readme_has_the_markers():
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert text.count(phase_table.BEGIN) == 1 and text.count(phase_table.END) == 1
