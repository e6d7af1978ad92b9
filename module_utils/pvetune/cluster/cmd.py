# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster gate's steps share (cluster_steps, cluster_ceph): commands through the Runner that fail as
GateError naming the command, bounded waits that keep polling through a transient failure, and the log of what a
step did (``Steps``: an action that changed the cluster, or one that only looked)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.module_utils.pvetune.core.runner import CommandUnavailable


class GateError(Exception):
    """A command or file the gate needs failed; the message names it."""


def excerpt(text, limit=400):
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def run(runner, name, args, ok=(0,)):
    """(rc, out, err) of ``name args``; GateError naming the command for an rc not in ``ok`` or no such command."""
    try:
        rc, out, err = runner.run(name, args)
    except CommandUnavailable as exc:
        raise GateError("%s: %s" % (" ".join([name] + list(args)), exc.reason))
    if rc not in ok:
        raise GateError("%s exited %d: %s" % (" ".join([name] + list(args)), rc, excerpt(err or out)))
    return rc, out, err


def parsed(parse, text):
    """``parse(text)``; a ValueError (the parsers name their command) becomes a GateError."""
    try:
        return parse(text)
    except ValueError as exc:
        raise GateError(str(exc))


class Steps:
    """What a step did, in order; ``changed`` once anything changed the cluster."""

    def __init__(self):
        self.actions, self.changed = [], False

    def did(self, text):
        self.actions.append(text)
        self.changed = True

    def saw(self, text):
        self.actions.append(text)


class Waiter:
    """Bounded polling: ``until(probe, what)`` calls ``probe() -> (done, seen)`` every ``poll`` s until done or
    ``timeout``.  A probe's GateError (a command that failed once) is what it saw, not the end of the wait."""

    def __init__(self, timeout, poll, sleep=time.sleep, clock=time.monotonic):
        self.timeout, self.poll, self.sleep, self.clock = timeout, poll, sleep, clock

    def until(self, probe, what):
        deadline = self.clock() + self.timeout
        while True:
            try:
                done, seen = probe()
            except GateError as exc:
                done, seen = False, str(exc)
            if done:
                return seen
            if self.clock() >= deadline:
                raise GateError("waited %s s for %s; last seen: %s" % (self.timeout, what, seen))
            self.sleep(self.poll)
