"""Fixtures for tests against a real corosync cluster in podman containers (tests/cluster/corosync_lab.py).

``corosync_cluster``: three nodes (node1..node3), session-wide; ``corosync_qdevice_cluster``: two nodes and a
corosync-qnetd arbiter (ffsplit).  A test that stops a node or the arbiter starts it again (``ensure_all_up``
in a ``finally``), so the next test sees the whole cluster.  ``record_output``: with PVETUNE_CLUSTER_CAPTURE=DIR a
state's ``corosync-quorumtool -s`` is written to DIR/corosync-quorumtool-s-<state>-lab.txt; without it the live
output must equal the stored copy in tests/fixtures/realdata/corosync/ (Date and Ring ID aside), so the fixtures stay
what this harness really produces.

Needs root, podman (scripts/bootstrap.sh containers) and localhost/pvetune-host:bookworm (built when missing).
"""
import os
import shutil
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import corosync_lab  # noqa: E402

REALDATA = os.path.join(TOP, "tests", "fixtures", "realdata", "corosync")


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt("SIGTERM")


def _need_image():
    # A SIGTERM (a CI timeout, run_tests.sh's caller) ends the run like Ctrl-C: the fixtures' teardown removes the
    # containers (Python's default SIGTERM skips atexit; a SIGKILL leaves them to the next run's stale sweep).
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    if os.geteuid() != 0:
        pytest.fail("tests/cluster need root (rootful podman)")
    if not shutil.which("podman"):
        pytest.fail("podman is not installed (scripts/bootstrap.sh containers)")
    if corosync_lab.podman("image", "exists", corosync_lab.IMAGE, check=False)[0] != 0:
        subprocess.run([os.path.join(TOP, "scripts", "build_images.sh"), "bookworm"], check=True, timeout=1500)


@pytest.fixture(scope="session")
def corosync_cluster():
    """A real three-node corosync cluster (node1..node3), all members up."""
    _need_image()
    with corosync_lab.CorosyncCluster(nodes=3) as lab:
        yield lab


@pytest.fixture(scope="session")
def corosync_qdevice_cluster():
    """Two real corosync nodes and a corosync-qnetd arbiter (qdevice model net, algorithm ffsplit, 1 vote)."""
    _need_image()
    with corosync_lab.CorosyncCluster(nodes=2, qdevice=True, cluster_name="pvetune-qdev") as lab:
        yield lab


def normalized(text):
    """quorumtool output without what differs from run to run (the date, the ring id)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith(("Date:", "Ring ID:")))


@pytest.fixture
def record_output():
    def record(state, text):
        name = "corosync-quorumtool-s-%s-lab.txt" % state
        capture = os.environ.get("PVETUNE_CLUSTER_CAPTURE")
        if capture:
            os.makedirs(capture, exist_ok=True)
            with open(os.path.join(capture, name), "w") as handle:
                handle.write(text)
            return
        path = os.path.join(REALDATA, name)
        if os.path.exists(path):
            with open(path) as handle:
                assert normalized(text) == normalized(handle.read()), "live output differs from %s" % path
    return record
