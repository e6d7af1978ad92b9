"""Install the boot helper into a test tree the way pvetune_runtime does, and run it."""
import os
import subprocess
import sys

from ansible.module_utils.pvetune.boot import units as bootunits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
from scratch_host import install_runtime


def install_helper(tree):
    """Runtime library + /usr/local/sbin/pvetune-boot inside ``tree`` (no units, no settings), written by
    the real installer (scripts/scratch_host.install_runtime)."""
    tree = str(tree)
    install_runtime(tree)
    return os.path.join(tree, bootunits.HELPER.lstrip("/"))


def run_helper(tree, *args, timeout=120):
    """Run <tree>/usr/local/sbin/pvetune-boot --root <tree> ARGS as a separate process."""
    tree = str(tree)
    helper = os.path.join(tree, bootunits.HELPER.lstrip("/"))
    entry = os.path.join(tree, bootunits.PKG_DIR.lstrip("/"), bootunits.ENTRY_MODULE.replace(".", "/") + ".py")
    if not (os.path.exists(helper) and os.path.exists(entry)):
        install_helper(tree)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PVETUNE"))}
    return subprocess.run([sys.executable, helper, "--root", tree] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False)
