# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run host commands without a shell, honouring the root rule.

On the live host (root "/") a command is looked up on PATH.  With any other
root, nothing that acts on the machine running the module may run: a command is
taken from the stand-ins in ``<root>/.pvetune/bin/`` or is reported as
unavailable, so the caller can skip the step and say why.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

STANDIN_DIR = "/.pvetune/bin"
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class CommandUnavailable(Exception):
    def __init__(self, name, reason):
        super(CommandUnavailable, self).__init__("%s: %s" % (name, reason))
        self.name = name
        self.reason = reason


class Runner:
    """``run_fn(argv, **kw) -> (rc, out, err)``; AnsibleModule.run_command fits."""

    def __init__(self, fsroot, run_fn, path=SYSTEM_PATH):
        self.fsroot = fsroot
        self.run_fn = run_fn
        self.search_path = path
        self.calls = []

    def which(self, name):
        """Absolute path of the executable to use for ``name``, or None."""
        if not SAFE_NAME.match(name):
            raise ValueError("unsafe command name %r" % name)
        if self.fsroot.live:
            for directory in self.search_path:
                candidate = os.path.join(directory, name)
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return candidate
            return None
        candidate = self.fsroot.path(os.path.join(STANDIN_DIR, name))
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        return None

    def require(self, name):
        exe = self.which(name)
        if exe is None:
            if self.fsroot.live:
                raise CommandUnavailable(name, "not installed on this host")
            raise CommandUnavailable(
                name, "root is %s and it provides no stand-in at %s/%s; "
                "not running the real command against this machine" % (self.fsroot.root, STANDIN_DIR, name))
        return exe

    def run(self, name, args, data=None, environ_update=None):
        """Run ``name`` with ``args`` (a list); returns (rc, stdout, stderr)."""
        exe = self.require(name)
        argv = [exe] + [str(a) for a in args]
        env = dict(environ_update or {})
        if not self.fsroot.live:
            # Stand-ins act on the tree, never on "/".
            env["PVETUNE_ROOT"] = self.fsroot.root
        self.calls.append(argv)
        rc, out, err = self.run_fn(argv, data=data, environ_update=env)
        return rc, out, err
