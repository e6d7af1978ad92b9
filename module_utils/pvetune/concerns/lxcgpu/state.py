# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA majors pvetune has seen on a host (/var/lib/pvetune/nvidia-majors.json): the one loader.

The audit (concerns/lxcgpu), the fix and the boot helper read it through ``load_state``; lxcgpu_fix writes it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.pvetune.core.fsroot import FsError

# Majors seen as NVIDIA's by earlier fix runs (written by lxcgpu_fix.updated_state/write_state).
STATE_FILE = "/var/lib/pvetune/nvidia-majors.json"
STATE_VERSION = 1


def empty_state():
    return {"version": STATE_VERSION, "nvidia_majors": [], "names": {}, "current": {}, "history": []}


def load_state(fsroot):
    """``(state, error)``; a missing file is an empty state, a corrupt one an error (state None).

    Format: ``nvidia_majors`` (every major ever seen as NVIDIA's; the audit and
    the fix read it through known_majors()), ``names`` (major -> last NVIDIA driver name seen on it),
    ``current`` (name -> major at the last change) and ``history``
    (``[{"at", "run_id", "source", "majors"}]``, one entry per change, newest last).
    """
    if not fsroot.exists(STATE_FILE):
        return empty_state(), None
    try:
        data = json.loads(fsroot.read_text(STATE_FILE, errors="strict"))
    except (FsError, ValueError, UnicodeDecodeError) as exc:
        return None, "%s is unreadable (%s)" % (STATE_FILE, exc)
    try:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        state = empty_state()
        majors = data.get("nvidia_majors", [])
        if not isinstance(majors, list) or not all(isinstance(m, int) and not isinstance(m, bool) for m in majors):
            raise ValueError("nvidia_majors is not a list of integers")
        state["nvidia_majors"] = sorted(set(majors))
        names = data.get("names", {})
        if not isinstance(names, dict) or not all(
                str(k).isdigit() and isinstance(v, str) for k, v in names.items()):
            raise ValueError("names is not an object of major -> driver name")
        state["names"] = {str(int(k)): v for k, v in names.items()}
        current = data.get("current", {})
        if not isinstance(current, dict) or not all(isinstance(v, int) for v in current.values()):
            raise ValueError("current is not an object of driver name -> major")
        state["current"] = dict(current)
        history = data.get("history", [])
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise ValueError("history is not a list of objects")
        state["history"] = list(history)
    except ValueError as exc:
        return None, "%s: %s" % (STATE_FILE, exc)
    return state, None


def known_majors(state):
    """{major: driver name or None} for evaluate_ct (majors recorded as NVIDIA's by earlier runs)."""
    out = dict.fromkeys((state or {}).get("nvidia_majors", []))
    for major, name in (state or {}).get("names", {}).items():
        out[int(major)] = name
    return out
