#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_snapshot
short_description: Save (and unpack) a pvetune snapshot archive on the controller
description:
  - Writes the archive returned by the pvetune_collect module to O(dest) and, with O(extract), unpacks it into
    O(extract_dir) so that C(audit.yml) can audit it with C(pvetune_root) pointing there.
  - Unpacking accepts regular files, directories and symlinks only, refuses absolute or C(..) member names and
    symlinks that leave the snapshot, and never writes through a symlink.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  data:
    description: The base64-encoded tar.gz (C(archive_b64) of pvetune_collect).
    type: str
    required: true
  dest:
    description: Path of the tar.gz to write.
    type: path
    required: true
  extract:
    description: Also unpack the archive.
    type: bool
    default: true
  extract_dir:
    description: Directory to unpack into (replaced if it exists). Defaults to O(dest) without C(.tar.gz).
    type: path
attributes:
  check_mode:
    support: partial
    details:
      - Nothing is written or unpacked (RV(members) is 0).
      - Reports no change, while a real run always writes the archive and reports a change.
  diff_mode:
    support: none
    details: The archive is binary; there is no diff.
  platform:
    platforms: posix
    details: The controller (C(delegate_to) C(localhost)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: pvetune_collect
    description: Captures the archive this module saves.
  - module: pvetune_facts
    description: Audits the unpacked snapshot when its root option points there.
"""

EXAMPLES = r"""
- name: Save the snapshot next to the others
  pvetune_snapshot:
    data: "{{ snap.archive_b64 }}"
    dest: "snapshots/{{ inventory_hostname }}.tar.gz"
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The archive path.
  returned: always
  type: str
extract_dir:
  description: Where the snapshot was unpacked (when O(extract) is true).
  returned: always
  type: str
members:
  description: Number of archive members unpacked.
  returned: always
  type: int
info:
  description: The snapshot's C(.pvetune/snapshot.json).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.collect import store_snapshot
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    data=dict(type="str", required=True, no_log=False),
    dest=dict(type="path", required=True),
    extract=dict(type="bool", default=True),
    extract_dir=dict(type="path"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *store_snapshot(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
