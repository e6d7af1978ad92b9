"""Install the boot helper into a test tree the way pvetune_runtime does, and run it."""
import os
import subprocess
import sys

from ansible.module_utils.pvetune import bootunits
from ansible.module_utils.pvetune.core.changeset import ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot


def install_helper(tree):
    """Runtime library + /usr/local/sbin/pvetune-boot inside ``tree`` (no units, no settings)."""
    tree = str(tree)
    plan = ChangeSet(FsRoot(tree), check_mode=True, run_id="test")
    bootunits.plan_install(plan, [], {})
    for item in plan.files:
        real = os.path.join(tree, item["path"].lstrip("/"))
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as handle:
            handle.write(item["after"])
        os.chmod(real, item["mode"] or 0o644)
    return os.path.join(tree, bootunits.HELPER.lstrip("/"))


def run_helper(tree, *args, timeout=120):
    """Run <tree>/usr/local/sbin/pvetune-boot --root <tree> ARGS as a separate process."""
    tree = str(tree)
    helper = os.path.join(tree, bootunits.HELPER.lstrip("/"))
    if not os.path.exists(helper):
        install_helper(tree)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PVETUNE"))}
    return subprocess.run([sys.executable, helper, "--root", tree] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False)
