# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host concern: hostname and, for a snapshot, its metadata (``/.pvetune/snapshot.json``). No checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.pvetune.core.fsroot import SNAPSHOT_DIR


def gather_host(fsroot):
    out = {"hostname": fsroot.try_value("/proc/sys/kernel/hostname"), "snapshot": None, "live": fsroot.live}
    if not fsroot.live and fsroot.isfile(SNAPSHOT_DIR + "/snapshot.json"):
        try:
            out["snapshot"] = json.loads(fsroot.read_text(SNAPSHOT_DIR + "/snapshot.json"))
        except ValueError as exc:
            out["snapshot"] = {"error": "%s/snapshot.json: %s" % (SNAPSHOT_DIR, exc)}
    return out


SECTIONS = (("host", lambda ctx: gather_host(ctx.fsroot)),)
CHECKS = {}
