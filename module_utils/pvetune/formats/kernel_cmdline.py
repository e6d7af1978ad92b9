# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command lines: /proc/cmdline, GRUB's GRUB_CMDLINE_* values and systemd-boot's /etc/kernel/cmdline.

``split_cmdline`` follows the kernel's own rules (lib/cmdline.c): arguments are separated by whitespace outside
double quotes, and the quotes stay in the token as /proc/cmdline shows them.  Parameter names treat "-" and "_" as
the same character (kernel/params.c), so keys are normalised for comparison only (``arg_key``, ``same_arg``); an
argument pvetune does not change keeps its spelling.  proxmox-boot-tool uses only the first line of
/etc/kernel/cmdline and refuses to sync a command line without ``root=``.  Pure: text in, data or text out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re

KERNEL_CMDLINE = "/etc/kernel/cmdline"

MAX_ARG_LEN = 256


class BootConfigError(ValueError):
    """A boot configuration input is invalid or an edit would be unsafe."""


# --------------------------------------------------------------------------
# Kernel command line
# --------------------------------------------------------------------------
KERNEL_SPACE = " \t\n\v\f\r"  # the kernel's isspace()

# The kernel keeps COMMAND_LINE_SIZE - 1 bytes of its command line and cuts the rest at boot, silently
# (arch/x86/include/asm/setup.h: 2048). The boot loader adds its own arguments to the configured ones (GRUB:
# BOOT_IMAGE=/boot/vmlinuz-<version> root=... ro; proxmox-boot-tool: initrd=\EFI\proxmox\<version>\...), so
# LOADER_RESERVE bytes are left for them.
COMMAND_LINE_SIZE = 2048
LOADER_RESERVE = 128
MAX_CONFIGURED_CMDLINE = COMMAND_LINE_SIZE - 1 - LOADER_RESERVE


def check_cmdline_length(args):
    """Raise BootConfigError when ``args`` (the configured arguments after pvetune's change) are too long to boot."""
    length = len(" ".join(args).encode("utf-8", "surrogateescape"))
    if length > MAX_CONFIGURED_CMDLINE:
        raise BootConfigError(
            "the configured kernel command line would be %d bytes, over the %d the kernel keeps on x86 "
            "(COMMAND_LINE_SIZE %d, less %d bytes for what the boot loader adds): the kernel would cut the rest "
            "at boot, silently; not editing it" % (length, MAX_CONFIGURED_CMDLINE, COMMAND_LINE_SIZE, LOADER_RESERVE))


def split_spans(text):
    """(start, end) of each argument, split as the kernel's next_arg() does."""
    spans = []
    start = None
    in_quote = False
    for i, ch in enumerate(text):
        if ch in KERNEL_SPACE and not in_quote:
            if start is not None:
                spans.append((start, i))
                start = None
            continue
        if start is None:
            start = i
        if ch == '"':
            in_quote = not in_quote
    if start is not None:
        spans.append((start, len(text)))
    return spans


def split_cmdline(text):
    """Kernel command line -> list of arguments (quotes kept, as in /proc/cmdline)."""
    return [text[s:e] for s, e in split_spans(text or "")]


def _arg_body(arg):
    return arg[1:] if arg.startswith('"') else arg


def arg_key(arg):
    """Parameter name of ``arg``, normalised for comparison ("-" == "_")."""
    if arg == "--":
        return "--"
    body = _arg_body(arg)
    name = body.split("=", 1)[0]
    if "=" not in body and arg.startswith('"') and name.endswith('"'):
        name = name[:-1]
    return name.replace("-", "_")


def arg_value(arg):
    """Value of ``arg`` as the kernel sees it (surrounding quotes removed); None for flags."""
    quoted = arg.startswith('"')
    body = _arg_body(arg)
    if "=" not in body:
        return None
    val = body.split("=", 1)[1]
    if val.startswith('"'):
        val = val[1:]
        if val.endswith('"'):
            val = val[:-1]
    elif quoted and val.endswith('"'):
        val = val[:-1]
    return val


_ARG_RE = re.compile(
    r'^(?P<key>[A-Za-z0-9_][A-Za-z0-9_.-]*)'
    r'(?:=(?P<value>[A-Za-z0-9_.,:/+=@-]*|"[\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7e]*"))?\Z')


def validate_arg(arg):
    """Return ``arg`` if it is a plausible kernel argument to write; else raise BootConfigError.

    Allowed: a key of ``[A-Za-z0-9_.-]`` (not starting with "-" or "."), optionally
    ``=value`` where value is ``[A-Za-z0-9_.,:/+=@-]*`` or a double-quoted string of
    printable ASCII without ``"``, ``$``, backtick or backslash; 256 characters at
    most.  ``--`` (the init-arguments separator) is refused here: pvetune never
    adds or removes it.  This guards writes into shell-sourced GRUB files.
    """
    if not isinstance(arg, str):
        raise BootConfigError("kernel argument must be a string, not %s" % type(arg).__name__)
    shown = arg if len(arg) <= 80 else arg[:77] + "..."
    if not arg:
        raise BootConfigError("empty kernel argument")
    if len(arg) > MAX_ARG_LEN:
        raise BootConfigError("kernel argument %r is longer than %d characters" % (shown, MAX_ARG_LEN))
    if arg.startswith("-"):
        raise BootConfigError("kernel argument %r starts with '-'" % shown)
    if not _ARG_RE.match(arg):
        raise BootConfigError(
            "%r is not a plausible kernel argument (key [A-Za-z0-9_.-], optional =value of "
            "[A-Za-z0-9_.,:/+=@-] or a double-quoted value without \" $ ` \\ or control characters)" % shown)
    return arg


def _same_arg(a, b):
    return arg_key(a) == arg_key(b) and arg_value(a) == arg_value(b)


def plan_args(current, ensure, remove):
    """Plan changes to an argument list.

    Returns ``(new, changes)``.  Every ``ensure`` argument ends up exactly once:
    an existing argument with the same key (``-``/``_`` insensitive) is replaced
    in place, later duplicates of the key are dropped, a missing one is appended
    (before a ``--`` separator if there is one).  ``remove`` entries are a key
    (drop every argument with that key) or ``key=value`` (drop only that value).
    Arguments after ``--`` belong to init and are never touched; all other
    arguments keep their order and spelling.  Changes are dicts with ``action``
    ("replace", "remove", "add"), ``old``/``new`` and ``index`` (into ``current``).
    """
    ensure = [validate_arg(a) for a in ensure or []]
    remove = [validate_arg(a) for a in remove or []]
    seen = {}
    for arg in ensure:
        key = arg_key(arg)
        if key in seen and not _same_arg(seen[key], arg):
            raise BootConfigError("conflicting ensure entries %r and %r" % (seen[key], arg))
        seen[key] = arg
    for arg in remove:
        key = arg_key(arg)
        if key in seen and (arg_value(arg) is None or _same_arg(arg, seen[key])):
            raise BootConfigError("%r is both ensured (%r) and removed" % (arg, seen[key]))
    ensure = list(collections.OrderedDict((arg_key(a), a) for a in ensure).values())

    current = list(current or [])
    head_len = current.index("--") if "--" in current else len(current)
    slots = list(current[:head_len])  # None marks a removed argument
    changes = []

    for want in ensure:
        key = arg_key(want)
        found = [i for i, a in enumerate(slots) if a is not None and arg_key(a) == key]
        if not found:
            continue
        first = found[0]
        if not _same_arg(slots[first], want):
            changes.append({"action": "replace", "index": first, "old": slots[first], "new": want})
            slots[first] = want
        for i in found[1:]:
            changes.append({"action": "remove", "index": i, "old": slots[i], "new": None,
                            "reason": "duplicate of %s" % want})
            slots[i] = None

    for rem in remove:
        key = arg_key(rem)
        value = arg_value(rem)
        for i, a in enumerate(slots):
            if a is None or arg_key(a) != key:
                continue
            if value is not None and arg_value(a) != value:
                continue
            changes.append({"action": "remove", "index": i, "old": a, "new": None, "reason": "requested"})
            slots[i] = None

    present = {arg_key(a) for a in slots if a is not None}
    additions = [a for a in ensure if arg_key(a) not in present]
    for a in additions:
        changes.append({"action": "add", "index": None, "old": None, "new": a})
    new = [a for a in slots if a is not None] + additions + current[head_len:]
    return new, changes


# --------------------------------------------------------------------------
# systemd-boot: /etc/kernel/cmdline
# --------------------------------------------------------------------------
def _first_line(text):
    """(first line without its ending, ending, rest)."""
    idx = text.find("\n")
    if idx < 0:
        return text, "", ""
    line = text[:idx]
    ending = "\n"
    if line.endswith("\r"):
        line, ending = line[:-1], "\r\n"
    return line, ending, text[idx + 1:]


def parse_kernel_cmdline_file(text):
    """/etc/kernel/cmdline -> (args, info); proxmox-boot-tool uses only the first line."""
    line, ending, rest = _first_line(text or "")
    args = split_cmdline(line)
    info = {
        "first_line": line,
        "ignored_lines": [ln for ln in rest.splitlines() if ln.strip()],
        "trailing_newline": (text or "").endswith("\n"),
        "crlf": ending == "\r\n",
        "empty": not args,
        "has_root": any(arg_key(a) == "root" for a in args),
    }
    return args, info


def set_kernel_cmdline_file(text, args):
    """Rewrite the first line of /etc/kernel/cmdline with ``args``; keep the rest byte for byte."""
    if not text or not text.strip():
        raise BootConfigError("/etc/kernel/cmdline is empty: proxmox-boot-tool refuses a command line "
                              "without root=; not inventing one")
    args = list(args)
    for a in args:
        if not isinstance(a, str) or not a or re.search(r"[\x00-\x20\x7f]", a):
            raise BootConfigError("invalid kernel argument %r for /etc/kernel/cmdline" % (a,))
    if not any(arg_key(a) == "root" for a in args):
        raise BootConfigError("the new /etc/kernel/cmdline has no root=: proxmox-boot-tool refuses a command "
                              "line without root=")
    _line, ending, rest = _first_line(text)
    return " ".join(args) + ending + rest
