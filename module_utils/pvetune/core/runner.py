# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run host commands without a shell, honouring the root rule.

On the live host (root "/") a command is looked up on PATH.  With any other
root, nothing that acts on the machine running the module may run: a command is
taken from the stand-ins in ``<root>/.pvetune/bin/`` or is reported as
unavailable, so the caller can skip the step and say why.

The one exception is ``run_system()``: the *real* ``setpci`` may run for a tree,
because with ``-A linux-sysfs -O sysfs.path=<root>/sys/bus/pci`` pciutils reads
and writes only the tree's ``config`` files.  ``run_system`` enforces that shape
of command line (see its docstring); nothing else gets past it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

STANDIN_DIR = "/.pvetune/bin"
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Real binaries run_system() may run for a tree (root other than "/").
SYSTEM_FOR_TREE = ("setpci",)
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# A setpci register operation: NAME|CAP_x|ECAP_x|hex offset, optional +hex, .b/.w/.l, optional =value[:mask].
_SETPCI_OP = re.compile(r"^(?:[A-Z][A-Z0-9_]{0,31}|[0-9a-fA-F]{1,3})(?:\+[0-9a-fA-F]{1,3})?\.[bwl]"
                        r"(?:=[0-9a-fA-F]{1,8}(?::[0-9a-fA-F]{1,8})?)?$")


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

    def which_system(self, name):
        """The real executable run_system() would use for ``name`` (None when not installed)."""
        if self.fsroot.live:
            return self.which(name)
        if name not in SYSTEM_FOR_TREE:
            raise CommandUnavailable(name, "only %s may run for a tree" % ", ".join(SYSTEM_FOR_TREE))
        for directory in self.search_path:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None

    def run_system(self, name, args, data=None, environ_update=None):
        """Run the host's real ``name`` although the root may be a tree.  setpci only.

        On the live host ("/") this is ``run()``.  For any other root the command line must be
        exactly::

            setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci -s <bdf> <op> [<op> ...]

        with ``<root>`` this Runner's (real) root, one canonical address, and register
        operations only (``CAP_EXP+8.w``, ``CAP_EXP+8.w=5000:7000``); no other option (a second
        ``-A``/``-O``, ``-H``, ``-f``, ``-D``...) and no second ``-s``.  The device directory and its
        ``config`` file must resolve inside the root (no symlink out of the tree to the real
        /sys).  pciutils then opens only ``<root>/sys/bus/pci/devices/<bdf>/config``.  Anything else
        raises CommandUnavailable before a process starts.
        """
        if self.fsroot.live:
            return self.run(name, args, data=data, environ_update=environ_update)
        args = [str(a) for a in args]
        self._check_system_args(name, args)
        exe = self.which_system(name)
        if exe is None:
            raise CommandUnavailable(name, "not installed on the machine running pvetune")
        argv = [exe] + args
        env = dict(environ_update or {})
        env["PVETUNE_ROOT"] = self.fsroot.root
        self.calls.append(argv)
        return self.run_fn(argv, data=data, environ_update=env)

    def _check_system_args(self, name, args):
        def refuse(why):
            raise CommandUnavailable(name, "refusing to run the real %s for root %s: %s"
                                     % (name, self.fsroot.root, why))

        if name not in SYSTEM_FOR_TREE:
            refuse("only %s may run for a tree" % ", ".join(SYSTEM_FOR_TREE))
        sysfs = os.path.join(self.fsroot.root, "sys/bus/pci")
        prefix = ["-A", "linux-sysfs", "-O", "sysfs.path=%s" % sysfs]
        if args[:4] != prefix:
            refuse("the command line must start with %s" % " ".join(prefix))
        rest = args[4:]
        if len(rest) < 3 or rest[0] != "-s" or not _BDF.fullmatch(rest[1]):
            refuse("exactly one '-s dddd:bb:dd.f' must follow the access options")
        for op in rest[2:]:
            if not _SETPCI_OP.fullmatch(op):
                refuse("%r is not a register operation" % (op[:40],))
        inside = self.fsroot.root.rstrip("/") + "/"
        for path in (sysfs, os.path.join(sysfs, "devices", rest[1]), os.path.join(sysfs, "devices", rest[1], "config")):
            real = os.path.realpath(path)
            if not os.path.exists(real):
                refuse("%s does not exist" % path)
            if not real.startswith(inside):
                refuse("%s resolves to %s, outside the root" % (path, real))


def command_record(cmd, rc, out, err, limit=2000):
    """What a module returns for a command it ran: argv, rc and the tails of its output."""
    def tail(text):
        text = text or ""
        return text if len(text) <= limit else "..." + text[-limit:]
    return {"cmd": list(cmd), "rc": rc, "stdout": tail(out), "stderr": tail(err)}


class RunFailed(Exception):
    """A fix step failed: ``msg``, the paths put back (``restored``) and extra result keys for fail_json."""

    def __init__(self, msg, **result):
        super(RunFailed, self).__init__(msg)
        self.msg = msg
        self.result = result  # extra result keys for fail_json (``restored``: the paths put back)

    def fail_kwargs(self):
        """fail_json keyword arguments: msg and the extra result keys."""
        data = dict(self.result)
        data["msg"] = self.msg
        return data


def run_or_restore(runner, changes, name, args, what, commands=None, skipped=None, required=True, env=None,
                   purpose=""):
    """Run ``name args``; when it fails, undo ``changes``' writes and raise RunFailed.

    ``what`` says what the restore means, with one ``%s`` for the restored paths (e.g. "the boot
    configuration was restored (%s)").  ``changes=None``: nothing was written, nothing to restore, no
    ``what``.  A missing command is fatal when ``required`` (then the files are restored too); otherwise
    it is appended to ``skipped`` and None is returned.  Ran commands are appended to ``commands``.
    Returns (rc, out, err) when the command succeeded.
    """
    shown = " ".join([name] + list(args))

    def restored_suffix():
        if changes is None:
            return [], ""
        restored = changes.restore_run()
        return restored, "; " + what % (", ".join(restored) or "no file had changed")

    try:
        rc, out, err = runner.run(name, args, environ_update=env)
    except CommandUnavailable as exc:
        if required:
            _restored, suffix = restored_suffix()
            raise RunFailed("%s is needed%s but %s%s" % (name, purpose, exc.reason, suffix))
        if skipped is not None:
            skipped.append({"command": shown, "reason": exc.reason})
        return None
    if commands is not None:
        commands.append(command_record([name] + list(args), rc, out, err))
    if rc != 0:
        detail = (err or out or "").strip().splitlines()
        restored, suffix = restored_suffix()
        raise RunFailed("%s failed (rc=%s)%s%s" % (shown, rc, ": " + detail[-1] if detail else "", suffix),
                        restored=restored)
    return rc, out, err


def captured_output(fsroot, runner, command, snapshot, quiet_rcs=()):
    """``(output or None, why not or None, where)`` of a read-only command the audit runs: on a live root the
    command's stdout (``quiet_rcs``: exit codes that mean "nothing to report", as 1 of journalctl --grep), on a
    snapshot the capture collect.yml made of it at ``snapshot`` (never run for a snapshot)."""
    name, args = command
    if not fsroot.live:
        if not fsroot.isfile(snapshot):
            return None, "snapshot has no %s" % snapshot, snapshot
        return fsroot.read_text(snapshot), None, snapshot
    where = " ".join([name] + list(args))
    if not (runner and runner.which(name)):
        return None, "%s not installed" % name, where
    rc, out, err = runner.run(name, list(args))
    if rc in quiet_rcs and not out.strip() and not err.strip():
        return "", None, where
    if rc != 0:
        return None, "%s exited %d: %s" % (name, rc, (err or out).strip()[:200]), where
    return out, None, where
