"""``promtool check metrics`` for the tests of pvetune's metrics (unit and integration).

promtool comes with Debian's prometheus package, which scripts/bootstrap.sh installs as root (so in make test and
CI): there a missing promtool fails the test; elsewhere (a non-root developer, whom bootstrap only tells what is
missing) the test is skipped and says why.
"""
import os
import shutil
import subprocess

import pytest

PROMTOOL = shutil.which("promtool")
MISSING = "promtool is not installed (apt: prometheus; scripts/bootstrap.sh installs it as root)"


def promtool_check(text):
    """(exit status, output) of ``promtool check metrics`` reading ``text``: 0 and no output when it is valid and
    passes promtool's lint (naming conventions, HELP and TYPE)."""
    if not PROMTOOL:
        if os.geteuid() == 0 or os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    return proc.returncode, proc.stdout + proc.stderr
