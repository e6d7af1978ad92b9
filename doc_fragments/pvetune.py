# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by pvetune's modules.

ansible.cfg's ``doc_fragment_plugins = doc_fragments`` makes this fragment ``pvetune`` (``pvetune.run_id`` for
RUN_ID, ``pvetune.pve_host`` for PVE_HOST); scripts/build_collection.sh renames it to
``pvetune.gpuhost.pvetune`` in the collection it builds. A module that needs more than the shared text says so in
its own notes, not here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # The root (docs/DESIGN.md, "The root"): every module that reads or writes the host.
    DOCUMENTATION = r"""
options:
  root:
    description:
      - Directory treated as C(/) for every file the module reads or writes; C(..) and symlinks cannot leave it.
      - V(/) on a live host; a snapshot directory (collect.yml output) or a test tree otherwise.
      - With a root other than C(/) nothing that acts on the machine running the module is executed. A command is
        taken from the stand-in C(<root>/.pvetune/bin/<name>) when it exists (test trees); otherwise the step is
        skipped and the result says why. The one exception is C(setpci), which runs as
        C(setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci) and so only touches the tree's config files.
    type: path
    default: /
"""

    # The run id of a fix or rollback run: one per playbook run, shared by every module of that run.
    RUN_ID = r"""
options:
  run_id:
    description:
      - Identifier of the fix (or rollback) run this call belongs to.
      - A module that changes files keeps the bytes it replaced in the per-run backup directory
        C(/var/lib/pvetune/runs/<run_id>/); the fix modules also record the id in the manifest
        C(/var/lib/pvetune/manifest.json) that rollback.yml reads.
      - The playbooks pass one id (C(pvetune_run_id)) to every module of a run, so a run's backups share one
        directory.
      - 1 to 64 characters, letters, digits, C(.), C(_) and C(-), starting with a letter or a digit.
    type: str
"""

    # Where a module that acts on a Proxmox VE host runs (attributes: platform); modules that run elsewhere (the
    # controller) or on any POSIX host document their own platform instead.
    PVE_HOST = r"""
attributes:
  platform:
    platforms: debian
    details: Proxmox VE 8 and 9 hosts (Debian bookworm and trixie).
"""
