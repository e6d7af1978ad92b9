"""``promtool check metrics`` for the tests of pvetune's metrics (unit and integration).

scripts/bootstrap.sh puts promtool into the venv's bin, taken out of Debian's prometheus package (so in make test
and CI): there, as root, a missing promtool fails the test; elsewhere the test is skipped and says why.
"""
import os
import shutil
import subprocess
import sys

import pytest

_VENV_PROMTOOL = os.path.join(os.path.dirname(sys.executable), "promtool")
PROMTOOL = _VENV_PROMTOOL if os.access(_VENV_PROMTOOL, os.X_OK) else shutil.which("promtool")
MISSING = "promtool is not installed (scripts/bootstrap.sh puts it into the venv from Debian's prometheus package)"


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
