"""pvetune fleet compliance suite: is a Proxmox VE GPU host in the state pvetune's fix leaves it in?

pytest-testinfra tests that read the host's *live* state (sysfs and /proc, the PCIe config space
through the real setpci, the CT configs against /proc/devices and /dev, the boot configuration,
the boot-time units) and compare it with the policy. Only the policy (defaults, validation) and a
few names (the boot units, the fixed NVIDIA major) come from pvetune's module_utils; how the state is
read and judged is the suite's own code, not pvetune's: a second opinion on what the audit says.

Real hosts (read-only; setpci needs root to read past the first 64 bytes of config space)::

    pytest tests/fleet --hosts='ansible://gpu_hosts' --ansible-inventory=inventory/prod \\
        --pvetune-policy=inventory/prod/group_vars/gpu_hosts.yml --sudo

    pytest tests/fleet --hosts='ssh://root@pve-gpu07'        # one host, plain ssh
    pytest tests/fleet --hosts=local://                      # on the Proxmox VE host itself, as root

Without --hosts every test is skipped (a bare `pytest` must not judge the machine it runs on).

The Molecule scenarios run the same tests in their verify step with --hosts=podman://<container>
and PVETUNE_FLEET_ROOT=/srv/pvetune-sim (the simulated host's tree).

Options (or environment variables):
  --pvetune-root DIR     PVETUNE_FLEET_ROOT    the directory that is the host's "/" (default "/").
                         With another root, commands pvetune would run on the host (pct) are
                         taken from <root>/.pvetune/bin with PVETUNE_ROOT set, as pvetune does,
                         and setpci reads the tree's config files (-A linux-sysfs -O sysfs.path=...).
  --pvetune-policy FILE  PVETUNE_FLEET_POLICY  YAML or JSON: the policy mapping, or a vars file that
                         holds it as `pvetune_policy` (an inventory group_vars file). Keys and
                         defaults as in docs/checks.md; unset keys take pvetune's defaults.
"""
import os

import pytest
from fleetlib import Fleet, load_policy


def pytest_addoption(parser):
    group = parser.getgroup("pvetune fleet")
    group.addoption("--pvetune-root", default=os.environ.get("PVETUNE_FLEET_ROOT", "/"),
                    help="directory that is the host's / (default /, env PVETUNE_FLEET_ROOT)")
    group.addoption("--pvetune-policy", default=os.environ.get("PVETUNE_FLEET_POLICY", ""),
                    help="policy file: YAML/JSON mapping or vars file with pvetune_policy (env PVETUNE_FLEET_POLICY)")


def pytest_collection_modifyitems(config, items):
    """Only against hosts named on purpose: a bare `pytest` in the project must not judge the machine it
    runs on (testinfra's default host is local://)."""
    if config.getoption("hosts", None):
        return
    skip = pytest.mark.skip(reason="the fleet suite needs --hosts (e.g. --hosts=ansible://gpu_hosts, "
                                   "ssh://root@pve-gpu01, or local:// on a Proxmox VE host)")
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here + os.sep):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def policy(request):
    return load_policy(request.config.getoption("--pvetune-policy"))


@pytest.fixture
def fleet(host, request):
    return Fleet(host, request.config.getoption("--pvetune-root"))
