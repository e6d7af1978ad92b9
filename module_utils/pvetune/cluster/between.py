# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operator control between reboot waves (issue 29), checked on the controller before each wave of fix.yml.

In this order: a stop file (``<control_dir>/fix.stop``: stop before the next wave), the maintenance windows
(``pvetune_reboot_windows``: outside them the run stops before the next wave), a pause file
(``<control_dir>/fix.pause``: wait while it exists, still honouring the stop file and the windows), and a gate
command (``pvetune_wave_gate_cmd``, e.g. a script that asks Alertmanager whether anything fires: a non-zero exit
stops before the next wave).  A stop is clean: the hosts of the waves already run are done, the others were not
touched and stay pending for the next run.  Windows are in the controller's local time (kured's reboot days and
times work the same way); a range whose end is not after its start runs past midnight and belongs to the day it
starts on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex
import subprocess
import time
from datetime import datetime

STOP_NAME, PAUSE_NAME = "fix.stop", "fix.pause"
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HHMM = re.compile(r"(?:([01]\d|2[0-3]):([0-5]\d)|(24):(00))\Z")
OUTPUT_LIMIT = 300


def _minutes(value, where):
    match = HHMM.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError("%s must be a time HH:MM (00:00-24:00), got %r" % (where, value))
    hour, minute = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return int(hour) * 60 + int(minute)


def parse_windows(windows):
    """pvetune_reboot_windows: [{"days": ["mon", ...] (every day when absent), "start": "HH:MM", "end": "HH:MM"}],
    as [(day numbers, start minute, end minute)]; ValueError naming the entry."""
    if not isinstance(windows, list):
        raise ValueError("pvetune_reboot_windows must be a list of {days, start, end}, got %r" % (windows,))
    out = []
    for i, window in enumerate(windows):
        where = "pvetune_reboot_windows[%d]" % i
        if not isinstance(window, dict) or set(window) - {"days", "start", "end"}:
            raise ValueError("%s must be a mapping of days, start and end, got %r" % (where, window))
        days = window.get("days", list(DAYS))
        if not isinstance(days, list) or not days or any(str(d).lower()[:3] not in DAYS for d in days):
            raise ValueError("%s.days must be a list of day names (%s), got %r" % (where, ", ".join(DAYS), days))
        start, end = _minutes(window.get("start"), where + ".start"), _minutes(window.get("end"), where + ".end")
        if start == end or start == 24 * 60:
            raise ValueError("%s: start %s and end %s make no range" % (where, window["start"], window["end"]))
        out.append((sorted({DAYS.index(str(d).lower()[:3]) for d in days}), start, end))
    return out


def in_window(windows, now):
    """(open, why) for the parsed ``windows`` at ``now`` (a datetime); no windows: always open."""
    if not windows:
        return True, "no reboot windows set"
    minute, today = now.hour * 60 + now.minute, now.weekday()
    for days, start, end in windows:
        if start < end:
            hit = today in days and start <= minute < end
        else:   # past midnight: from start on a listed day to end on the next
            hit = (today in days and minute >= start) or ((today - 1) % 7 in days and minute < end)
        if hit:
            return True, "inside the window %s %02d:%02d-%02d:%02d" % (
                ",".join(DAYS[d] for d in days), start // 60, start % 60, end // 60, end % 60)
    return False, "outside every reboot window (now %s %s, controller local time)" % (
        DAYS[today], now.strftime("%H:%M"))


def gate_argv(value):
    """pvetune_wave_gate_cmd as an argv (a list of words, or one string split as a shell would, never run by one)."""
    if value is None or value == "" or value == []:
        return []
    argv = shlex.split(value) if isinstance(value, str) else value
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
        raise ValueError("pvetune_wave_gate_cmd must be a command line or a list of words, got %r" % (value,))
    return argv


def run_gate(argv, timeout):
    """(rc, output) of the gate command, without a shell; a command that cannot start or times out is a non-zero."""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def between_waves(params, check_mode, now=datetime.now, sleep=time.sleep, gate=run_gate, exists=os.path.exists):
    """May the next wave start?  {"stop", "msg", "waited"}; with ``check_mode`` it says what it would do and never
    waits, runs the gate command or stops.  ValueError names a bad variable."""
    windows = parse_windows(params["windows"])
    argv = gate_argv(params["gate_cmd"])
    label = "wave %d of %d" % (params["wave"] + 1, params["waves"])
    stop_file = os.path.join(params["control_dir"], STOP_NAME)
    pause_file = os.path.join(params["control_dir"], PAUSE_NAME)
    waited, notes = 0, []
    while True:
        reason = ""
        if exists(stop_file):
            reason = "the stop file %s exists (remove it to let a later run go on)" % stop_file
        else:
            is_open, why = in_window(windows, now())
            reason = "" if is_open else why
        if reason or not exists(pause_file):
            break
        if check_mode:
            notes.append("would wait while the pause file %s exists" % pause_file)
            break
        if waited >= params["pause_timeout"]:
            reason = "the pause file %s was there for %d s (pvetune_pause_timeout)" % (pause_file, waited)
            break
        sleep(params["pause_poll"])
        waited += params["pause_poll"]
    if not reason and argv:
        if check_mode:
            notes.append("would run the gate command %s" % " ".join(shlex.quote(a) for a in argv))
        else:
            rc, output = gate(argv, params["gate_timeout"])
            if rc != 0:
                reason = "the gate command %s exited %d: %s" % (" ".join(shlex.quote(a) for a in argv), rc,
                                                                output.strip()[-OUTPUT_LIMIT:] or "(no output)")
            else:
                notes.append("the gate command passed")
    if waited:
        notes.append("waited %d s for the pause file to go" % waited)
    if reason:
        verb = "would stop" if check_mode else "stopped"
        return {"stop": not check_mode, "waited": waited, "reason": reason,
                "msg": "%s before %s: %s" % (verb, label, reason)}
    return {"stop": False, "waited": waited, "reason": "",
            "msg": "%s may start%s" % (label, (": " + "; ".join(notes)) if notes else "")}
