#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_textfile
short_description: Write pvetune's metrics into the host's node_exporter textfile directory
description:
  - Writes I(content) as C(<dir>/pvetune.prom), atomically, as node_exporter's textfile collector requires (a
    temporary file in the same directory, which the collector does not read, renamed over the old one), mode
    0644 for a new file. An unchanged content is not written again.
  - The directory is node_exporter's own and is never created; a host without it fails, naming it.
  - The file is not recorded for rollback.yml (it is pvetune's output, not host configuration);
    O(state=absent) removes it.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  dir:
    description:
      - The textfile collector's directory (node_exporter's C(--collector.textfile.directory)); Debian's
        prometheus-node-exporter reads C(/var/lib/prometheus/node-exporter) by default.
      - An absolute, normalised path of letters, digits and C(._+@-).
    type: str
    default: /var/lib/prometheus/node-exporter
  content:
    description:
      - The text exposition format, ending with a line feed (M(pvetune_metrics) renders it). Required with
        O(state=present).
    type: str
  state:
    description: V(present) writes the file, V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    details: Nothing is written or removed; C(changed) and the diff say what would be.
  diff_mode:
    support: full
    details: The file's text before and after.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.pve_host
seealso:
  - module: pvetune_metrics
    description: Renders each host's text from an audit report.
"""

EXAMPLES = r"""
- name: Export this host's metrics
  pvetune_textfile:
    content: "{{ pvetune_metrics_rendered.metrics[inventory_hostname] }}"
"""

RETURN = r"""
path:
  description: The file, as a path on the host (inside I(root)).
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/pvetune.prom
state:
  description: The state asked for.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.report.textfile import DEFAULT_DIR, export_textfile

ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    dir=dict(type="str", default=DEFAULT_DIR),
    content=dict(type="str"),
    state=dict(type="str", default="present", choices=["present", "absent"]),
)
MODULE_OPTIONS = dict(required_if=[("state", "present", ("content",))])


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, **MODULE_OPTIONS)
    finish(module, *export_textfile(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
