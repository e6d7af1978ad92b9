# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tests' kill switch: a run that dies at a chosen instruction, not at one hit by timing luck.

PVETUNE_FAULT_KILL_AFTER=<host path> in a module's environment kills the module's process with SIGKILL right after
ChangeSet.apply() wrote or removed that path, as a lost controller or a power cut would (no finally, no cleanup).
Honoured only under a root other than ``/`` (a test tree), never on a live host. Used by tests/hardening/test_kills.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal

KILL_AFTER = "PVETUNE_FAULT_KILL_AFTER"


def kill_point(fsroot, host_path):
    if not fsroot.live and os.environ.get(KILL_AFTER) == host_path:
        os.kill(os.getpid(), signal.SIGKILL)
