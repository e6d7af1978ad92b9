#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_runtime
short_description: Install pvetune's boot-time re-application (library, helper, settings, units)
description:
  - Installs what makes pvetune's runtime fixes survive a reboot, in one call - the runtime library (the
    module_utils/pvetune code this module itself carries, so the boot helper runs exactly the code the modules
    ran), C(/usr/local/sbin/pvetune-boot), C(/etc/pvetune/<subcommand>.json) with the settings to re-apply, and
    one oneshot unit per subcommand ordered before C(pve-guests.service), enabled through the
    C(multi-user.target.wants) link that C(systemctl enable) creates.
  - Every file is planned on pvetune's change set, so it is backed up, recorded in the manifest and removed by
    rollback.yml. On a live host (root C(/)) C(systemctl daemon-reload) runs when a unit changed; when it fails,
    the files it wrote are put back and the module fails.
  - Only the listed subcommands are installed; units of other subcommands are left alone.
  - C(/usr/local/lib/pvetune/MANIFEST.json) records the tool version and the path, sha256 and mode of every
    library file and the helper. A file that differs from it is reported with a warning and re-installed (the
    files are the truth; the manifest says what was installed).
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  subcommands:
    description: Which boot-time re-applications to install.
    type: list
    elements: str
    choices: [cpufreq, pcie-mrrs, lxc-gpu, gpu-power]
    required: true
  configs:
    description:
      - Settings per subcommand, written as C(/etc/pvetune/<subcommand>.json).
      - C(cpufreq) takes C(amd_pstate_mode), C(governor), C(epp); C(pcie-mrrs) takes C(mrrs), C(vendor),
        C(class_prefix), C(bdfs), C(acs_ports) (the switch ports whose ACS redirect bits it clears);
        C(lxc-gpu) takes C(ctids), C(cgroup_version), C(wait_seconds); C(gpu-power) takes C(power_limit)
        (C(default) or watts).
      - Each is validated the way the boot helper will read it.
    type: dict
    required: true
  enable:
    description: Enable the units (create the C(multi-user.target.wants) links).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Nothing is written and C(systemctl daemon-reload) does not run; RV(paths) and RV(changes) are the plan.
  diff_mode:
    support: full
    details:
      - One diff per settings file it installs or changes (C(/etc/pvetune/*.json)), and one summary entry for
        the files this version ships (library, helper, MANIFEST.json, units, enable links); their paths, sizes
        and sha256 and the versions before and after, not their contents.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_rollback
    description: Removes everything this module installed.
"""

EXAMPLES = r"""
- name: Re-apply MaxReadReq and the CT device entries at boot
  pvetune_runtime:
    subcommands: [pcie-mrrs, lxc-gpu]
    configs:
      pcie-mrrs: {mrrs: 4096, vendor: "0x10de", class_prefix: "0x03", bdfs: []}
      lxc-gpu: {ctids: [], cgroup_version: auto, wait_seconds: 60}
"""

RETURN = r"""
drift:
  description: The files MANIFEST.json lists that were changed or removed on the host since they were installed
    (re-installed by this run; the warning names the first five).
  returned: success
  type: list
  elements: str
paths:
  description: Every host path this call manages.
  returned: always
  type: list
  elements: str
changes:
  description: Planned or applied file changes.
  returned: always
  type: dict
reboot_required:
  description: Always false.
  returned: always
  type: bool
skipped_commands:
  description: Commands not run (for example systemctl daemon-reload for a tree without a stand-in), with why.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

# The runtime library is read from this module's own payload: importing the boot helper here makes
# Ansible ship it and everything it imports with the module.
from ansible.module_utils.pvetune.boot import (  # noqa: F401  pylint: disable=unused-import
    helper as boothelper,
    units as bootunits,
)
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.boot.install import install


ARGUMENT_SPEC = dict(
    FIX_ARGS,
    subcommands=dict(type="list", elements="str", required=True, choices=list(bootunits.SUBCOMMANDS)),
    configs=dict(type="dict", required=True),
    enable=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *install(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
