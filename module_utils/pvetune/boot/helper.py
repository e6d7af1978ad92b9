# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot helper (installed as /usr/local/sbin/pvetune-boot by pvetune_runtime).

  pvetune-boot [--root DIR] cpufreq     governor/EPP/P-state mode (config /etc/pvetune/cpufreq.json)
  pvetune-boot [--root DIR] pcie-mrrs   PCIe MaxReadReq of the NVIDIA functions and the ACS redirect bits of
                                        the switch ports between them (/etc/pvetune/pcie-mrrs.json)
  pvetune-boot [--root DIR] lxc-gpu     NVIDIA allow lines of the GPU CTs (/etc/pvetune/lxc-gpu.json)
  pvetune-boot [--root DIR] gpu-power   the GPUs' power limits (/etc/pvetune/gpu-power.json)

Each subcommand is the same code the Ansible modules run (module_utils/pvetune,
installed under /usr/local/lib/pvetune).  Exit status: 0 done, 1 failed,
2 usage or configuration error.  Messages go to stdout/stderr (the journal).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import subprocess
import sys

from ansible.module_utils.pvetune.concerns.cpufreq import fix as cpufreq_fix
from ansible.module_utils.pvetune.concerns.gpu import fix as gpu_fix
from ansible.module_utils.pvetune.concerns.lxcgpu import boot as lxcgpu_boot
from ansible.module_utils.pvetune.concerns.pcie import acs_fix as pcie_acs_fix
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.runner import Runner

# Imported here, not by name at run time: the runtime installer ships this module and what it imports.
SUBCOMMANDS = {
    "cpufreq": cpufreq_fix.boot_apply,
    "pcie-mrrs": pcie_acs_fix.boot_apply_pcie,
    "lxc-gpu": lxcgpu_boot.boot_apply,
    "gpu-power": gpu_fix.boot_apply,
}


def run_command(argv, data=None, environ_update=None, **_kw):
    """The subset of AnsibleModule.run_command the pvetune code uses: list argv, no shell."""
    env = dict(os.environ)
    env.update(environ_update or {})
    proc = subprocess.run(argv, input=data.encode() if isinstance(data, str) else data, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pvetune-boot", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/", help="directory treated as / (tests only)")
    parser.add_argument("subcommand", choices=sorted(SUBCOMMANDS))
    args = parser.parse_args(argv)
    fsroot = FsRoot(args.root)
    config_path = "/etc/pvetune/%s.json" % args.subcommand
    try:
        config = json.loads(fsroot.read_text(config_path))
    # Any problem with the configuration is reported the same way.
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write("pvetune-boot %s: cannot read %s: %s\n" % (args.subcommand, config_path, exc))
        return 2
    runner = Runner(fsroot, run_command)
    ok, messages = SUBCOMMANDS[args.subcommand](fsroot, runner, config)
    stream = sys.stdout if ok else sys.stderr
    for line in messages:
        stream.write("pvetune-boot %s: %s\n" % (args.subcommand, line))
    return 0 if ok else 1
