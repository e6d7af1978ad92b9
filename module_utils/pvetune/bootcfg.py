# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot configuration: kernel command lines, GRUB default files, systemd-boot's
/etc/kernel/cmdline, boot loader detection and kernel selection.

Everything here is pure: text in, data or text out.  Reads go through an
FsRoot; nothing is executed and nothing is written (the fix modules write the
texts this module plans).

Kernel command line
    ``split_cmdline`` follows the kernel's own rules (lib/cmdline.c): arguments
    are separated by whitespace outside double quotes, and the quotes stay in
    the token as /proc/cmdline shows them.  Parameter names treat "-" and "_"
    as the same character (kernel/params.c), so keys are normalised for
    comparison only; an argument pvetune does not change keeps its spelling.

GRUB default files
    update-grub (grub-mkconfig, run by /bin/sh = dash) sources /etc/default/grub
    and then /etc/default/grub.d/*.cfg in glob order (dash sorts globs by byte
    value).  ``parse_grub_file`` evaluates the subset of sh used in practice and
    raises ``GrubParseError(path, line_no, message)`` for anything it cannot
    evaluate with certainty: control structures, ``;``/``&&``/pipes/redirections,
    ``$((...))``, parameter expansions other than ``$NAME``/``${NAME}``, special
    parameters, unbalanced quotes, commands other than assignments/``export``.
    Command substitution (``$(...)``, backticks) runs in a subshell and cannot
    change other variables, so it only makes *its own* variable unknown: Debian's
    stock ``GRUB_DISTRIBUTOR=`lsb_release ...``` is accepted and recorded as a
    warning, while a command substitution that reaches GRUB_CMDLINE_LINUX,
    GRUB_CMDLINE_LINUX_DEFAULT or GRUB_DEFAULT (directly or through another
    variable) raises, naming the file and line.

    Files with CRLF line endings are read as if the endings were LF, and the
    GrubFile carries a warning: /bin/sh would keep the CR in values (harmless
    for the kernel, which treats CR as whitespace) and fails on blank CRLF
    lines.  Edits keep CRLF endings.

Changing GRUB kernel arguments: drop-in first, in-place edit when needed
    ``plan_grub_edit`` is what the fix uses.  Arguments that only need to be
    *added* go to ``/etc/default/grub.d/90-pvetune.cfg`` (``render_dropin``):
    ``GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_pstate=active
    ..."``.  That is the default because it is reversible by deleting one file
    (rollback), leaves the package-managed /etc/default/grub untouched (no ucf
    prompt on grub upgrades) and keeps every user line byte for byte.  A
    drop-in can only append, though: an argument that must be *replaced* or
    *removed* (``processor.max_cstate=5`` in /etc/default/grub) has to be edited
    where it is written.  The planner traces every effective argument to the
    assignment literal it came from and edits that literal in place; when it has
    to edit a file anyway, added arguments go into the same assignment (one file
    changed instead of two).  Every plan is verified by re-evaluating all files
    with the new texts: the ensured arguments must be present exactly once, no
    conflicting value may remain and every other argument must survive.
    Otherwise (e.g. a later file overrides the variable) the next candidate is
    tried, and GrubParseError is raised when none works.

systemd-boot
    proxmox-boot-tool uses only the first line of /etc/kernel/cmdline and
    refuses to sync a command line without ``root=``.

Boot loader detection
    See docs/DESIGN.md "Boot loader detection"; ``detect_loader`` names the rule
    that decided.

Kernels
    ``kernel_state`` reports the running kernel, installed kernels, the
    proxmox-boot-tool pins, the effective GRUB_DEFAULT and the kernel the next
    boot will use, with the rule that decided it (see ``kernel_state``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import collections
import functools
import re

from ansible.module_utils.pvetune.core.fsroot import FsError

# --------------------------------------------------------------------------
# Paths and names
# --------------------------------------------------------------------------
GRUB_DEFAULT_FILE = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
DROPIN_PATH = "/etc/default/grub.d/90-pvetune.cfg"
GRUB_PIN_SNIPPET = "/etc/default/grub.d/proxmox-kernel-pin.cfg"
GRUB_CFG = "/boot/grub/grub.cfg"
GRUB_ENV = "/boot/grub/grubenv"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
ESP_LIST = "/etc/kernel/proxmox-boot-uuids"
PIN_FILE = "/etc/kernel/proxmox-boot-pin"
NEXT_BOOT_PIN = "/etc/kernel/next-boot-pin"
PBT_STATUS_SNAPSHOT = "/.pvetune/proxmox-boot-tool-status.txt"
EFI_DIR = "/sys/firmware/efi"
LOADER_INFO_EFIVAR = "/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
OSRELEASE = "/proc/sys/kernel/osrelease"

CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
NEEDED_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_DEFAULT")
DEFAULT_VAR = "GRUB_CMDLINE_LINUX_DEFAULT"

MAX_ARG_LEN = 256
MAX_KERNEL_VERSION_LEN = 64


class BootConfigError(ValueError):
    """A boot configuration input is invalid or an edit would be unsafe."""


class GrubParseError(BootConfigError):
    """A GRUB default file cannot be evaluated or edited with certainty."""

    def __init__(self, path, line_no, message):
        where = path if line_no is None else "%s:%s" % (path, line_no)
        super(GrubParseError, self).__init__("%s: %s" % (where, message))
        self.path = path
        self.line_no = line_no
        self.message = message


# --------------------------------------------------------------------------
# Kernel command line
# --------------------------------------------------------------------------
KERNEL_SPACE = " \t\n\v\f\r"  # the kernel's isspace()


def _split_spans(text):
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
    return [text[s:e] for s, e in _split_spans(text or "")]


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
# GRUB default files: a small evaluator for the sh subset used in practice
# --------------------------------------------------------------------------
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_BRACED_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLAIN_RUN = re.compile(r"[^ \t\r\n'\"\\$`;&|<>()]+")
_OPERATORS = ";&|<>()"
_RESERVED = frozenset(["if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until",
                       "for", "in", "function", "select", "{", "}", "!", "[[", "]]"])
_SAFE_UNQUOTED = re.compile(r"^[A-Za-z0-9_.,:/+=@%^-]*\Z")
_GLOB_OR_SPACE = re.compile(r"[\s*?\[]")


class _Seg:
    """Part of a shell word: literal text, a $NAME expansion or a command substitution."""

    __slots__ = ("kind", "text", "quote", "start", "end")

    def __init__(self, kind, text, quote, start, end):
        self.kind = kind    # "lit" | "var" | "cmd"
        self.text = text    # literal text | variable name | command source
        self.quote = quote  # '"', "'", "" (unquoted) or "\\" (backslash-escaped character)
        self.start = start
        self.end = end


class _Word:
    __slots__ = ("segs", "start", "end")

    def __init__(self, segs, start, end):
        self.segs = segs
        self.start = start
        self.end = end


class _Unknown:
    """Value of a variable set by command substitution (not evaluated)."""

    def __init__(self, path, line_no, via=None):
        self.path = path
        self.line_no = line_no
        self.via = via

    def describe(self):
        return "set by command substitution at %s:%s" % (self.path, self.line_no)


class GrubAssignment:
    """One ``VAR=value`` in a GRUB default file.

    ``start_line``/``end_line`` are 0-based indexes of the first and last line
    of the assignment (continuations make it span several lines); ``line_no``
    is the 1-based line shown in messages.  ``quote`` is the quoting of the
    literal part: '"', "'", "" (unquoted) or "mixed".  ``prefix`` names the
    variable when the value has the form ``"$VAR literal"`` / ``"${VAR}literal"``;
    ``literal`` is the literal text after it (or the whole value).  ``editable``
    says whether pvetune can rewrite the value with certainty.
    """

    def __init__(self, path, var, line_no, start_line, end_line, value_start, value_end, segs, export):
        self.path = path
        self.var = var
        self.line_no = line_no
        self.start_line = start_line
        self.end_line = end_line
        self.value_start = value_start
        self.value_end = value_end
        self.segs = segs
        self.export = export
        self.value = None          # evaluated value (str), None when unknown
        self.prefix = None         # variable name of a leading $VAR
        self.prefix_src = None     # "$VAR" or "${VAR}" as written
        self.prefix_value = None   # value of the prefix when it was expanded
        self.literal = "".join(s.text for s in segs if s.kind == "lit")
        kinds = [s for s in segs if s.kind != "lit"]
        if not kinds:
            self.editable = True
        elif len(kinds) == 1 and segs[0] is kinds[0] and kinds[0].kind == "var":
            self.editable = True
            self.prefix = kinds[0].text
        else:
            self.editable = False
        quotes = {"" if s.quote == "\\" else s.quote for s in segs if s.kind == "lit"}
        if not quotes:
            self.quote = segs[0].quote if segs and segs[0].quote != "\\" else ""
        elif len(quotes) == 1:
            self.quote = quotes.pop()
        else:
            self.quote = "mixed"

    def as_dict(self):
        return {"path": self.path, "var": self.var, "line": self.line_no, "start_line": self.start_line,
                "end_line": self.end_line, "quote": self.quote, "value": self.value, "prefix": self.prefix,
                "editable": self.editable, "export": self.export}


class GrubFile:
    """A parsed GRUB default file: its assignments (in order) and the environment after it."""

    def __init__(self, path, text, assignments, penv, warnings):
        self.path = path
        self.text = text
        self.assignments = assignments
        self.crlf = "\r\n" in text
        self.warnings = warnings
        self._penv = penv
        self.env = {k: None if isinstance(v, _Unknown) else "".join(t for t, _o in v)
                    for k, v in penv.items()}

    def last(self, var):
        """The last assignment of ``var`` in this file, or None."""
        for asg in reversed(self.assignments):
            if asg.var == var:
                return asg
        return None


class _Parser:
    def __init__(self, text, path):
        self.t = text
        self.n = len(text)
        self.path = path
        self.pos = 0
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(self, pos):
        return bisect.bisect_right(self.line_starts, pos)

    def fail(self, pos, message):
        raise GrubParseError(self.path, self.line_of(pos), message)

    def nl(self, pos):
        """Length of the line ending at ``pos`` (LF or CRLF), 0 if none."""
        if pos < self.n:
            if self.t[pos] == "\n":
                return 1
            if self.t[pos] == "\r" and pos + 1 < self.n and self.t[pos + 1] == "\n":
                return 2
        return 0

    def skip_blanks(self):
        while self.pos < self.n:
            c = self.t[self.pos]
            if c in " \t":
                self.pos += 1
            elif c == "\\" and self.nl(self.pos + 1):
                self.pos += 1 + self.nl(self.pos + 1)
            else:
                return

    def skip_comment(self):
        while self.pos < self.n and not self.nl(self.pos):
            self.pos += 1

    def commands(self):
        """Yield the words of each simple command."""
        while True:
            self.skip_blanks()
            if self.pos >= self.n:
                return
            k = self.nl(self.pos)
            if k:
                self.pos += k
                continue
            if self.t[self.pos] == "#":
                self.skip_comment()
                continue
            words = []
            while True:
                self.skip_blanks()
                if self.pos >= self.n:
                    break
                k = self.nl(self.pos)
                if k:
                    self.pos += k
                    break
                c = self.t[self.pos]
                if c == "#":
                    self.skip_comment()
                    continue
                if c in _OPERATORS:
                    op = self.t[self.pos:self.pos + 2] if self.t[self.pos:self.pos + 2] in ("&&", "||") else c
                    self.fail(self.pos, "shell operator %r is not supported (only plain assignments are)" % op)
                words.append(self.word())
            if words:
                yield words

    def word(self):
        start = self.pos
        segs = []
        t = self.t
        while self.pos < self.n:
            c = t[self.pos]
            if c in " \t" or self.nl(self.pos) or c in _OPERATORS:
                break
            if c == "'":
                end = t.find("'", self.pos + 1)
                if end < 0:
                    self.fail(self.pos, "unbalanced single quote")
                segs.append(_Seg("lit", t[self.pos + 1:end], "'", self.pos, end + 1))
                self.pos = end + 1
            elif c == '"':
                self.dquote(segs)
            elif c == "\\":
                k = self.nl(self.pos + 1)
                if k:
                    self.pos += 1 + k
                    continue
                if self.pos + 1 >= self.n:
                    self.fail(self.pos, "backslash at end of file")
                segs.append(_Seg("lit", t[self.pos + 1], "\\", self.pos, self.pos + 2))
                self.pos += 2
            elif c == "$":
                self.dollar(segs, "")
            elif c == "`":
                self.backtick(segs, "")
            elif c == "\r":
                segs.append(_Seg("lit", c, "", self.pos, self.pos + 1))
                self.pos += 1
            else:
                m = _PLAIN_RUN.match(t, self.pos)
                segs.append(_Seg("lit", m.group(), "", self.pos, m.end()))
                self.pos = m.end()
        return _Word(segs, start, self.pos)

    def dquote(self, segs):
        t = self.t
        opening = self.pos
        self.pos += 1
        first_seg = len(segs)
        buf = []
        buf_start = self.pos

        def flush():
            if buf:
                segs.append(_Seg("lit", "".join(buf), '"', buf_start, self.pos))
                del buf[:]

        while True:
            if self.pos >= self.n:
                self.fail(opening, "unbalanced double quote")
            c = t[self.pos]
            if c == '"':
                flush()
                if len(segs) == first_seg:  # "" is an empty literal, quoted
                    segs.append(_Seg("lit", "", '"', opening, self.pos + 1))
                self.pos += 1
                return
            if c == "\\":
                k = self.nl(self.pos + 1)
                if k:
                    self.pos += 1 + k
                elif self.pos + 1 < self.n and t[self.pos + 1] in '$`"\\':
                    buf.append(t[self.pos + 1])
                    self.pos += 2
                else:
                    buf.append("\\")
                    self.pos += 1
                continue
            if c in "$`":
                flush()
                try:
                    if c == "$":
                        self.dollar(segs, '"')
                    else:
                        self.backtick(segs, '"')
                except GrubParseError as exc:
                    opened = self.line_of(opening)
                    if exc.line_no == opened:
                        raise
                    # An unbalanced quote swallows the lines after it; say where it was opened.
                    raise GrubParseError(self.path, opened, "double quote opened here is still open at line %s, "
                                         "where %s" % (exc.line_no, exc.message))
                buf_start = self.pos
                continue
            k = self.nl(self.pos)
            if k == 2:
                buf.append("\n")
                self.pos += 2
                continue
            buf.append(c)
            self.pos += 1

    def dollar(self, segs, quote):
        t = self.t
        p = self.pos
        nxt = t[p + 1] if p + 1 < self.n else ""
        if nxt == "(":
            if t.startswith("((", p + 1):
                self.fail(p, "arithmetic expansion $((...)) is not supported")
            end = self.match_paren(p)
            segs.append(_Seg("cmd", t[p:end], quote, p, end))
            self.pos = end
        elif nxt == "{":
            m = _BRACED_RE.match(t, p + 1)
            if not m:
                close = t.find("}", p)
                shown = t[p:close + 1] if 0 <= close < p + 40 else t[p:p + 20]
                self.fail(p, "parameter expansion %r is not supported (only $NAME and ${NAME})" % shown)
            segs.append(_Seg("var", m.group(1), quote, p, m.end()))
            self.pos = m.end()
        elif _NAME_RE.match(nxt or " "):
            m = _NAME_RE.match(t, p + 1)
            segs.append(_Seg("var", m.group(), quote, p, m.end()))
            self.pos = m.end()
        elif nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.fail(p, "special parameter $%s is not supported" % nxt)
        else:
            segs.append(_Seg("lit", "$", quote, p, p + 1))
            self.pos = p + 1

    def match_paren(self, p):
        """Index after the ")" closing the "$(" at ``p``."""
        t = self.t
        depth = 0
        i = p + 1
        while i < self.n:
            c = t[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                j = t.find("'", i + 1)
                if j < 0:
                    break
                i = j + 1
                continue
            if c == '"':
                j = i + 1
                while j < self.n and t[j] != '"':
                    j += 2 if t[j] == "\\" else 1
                if j >= self.n:
                    break
                i = j + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        self.fail(p, "unterminated command substitution $(...)")

    def backtick(self, segs, quote):
        t = self.t
        p = self.pos
        i = p + 1
        while i < self.n:
            if t[i] == "\\":
                i += 2
                continue
            if t[i] == "`":
                segs.append(_Seg("cmd", t[p:i + 1], quote, p, i + 1))
                self.pos = i + 1
                return
            i += 1
        self.fail(p, "unterminated command substitution `...`")


def _plain_env(env):
    penv = {}
    for k, v in (env or {}).items():
        if isinstance(v, _Unknown) or (isinstance(v, list)):
            penv[k] = v
        elif v is None:
            continue
        else:
            penv[k] = [(str(v), None)]
    return penv


def _parse(text, path, penv, needed=NEEDED_VARS):
    if not isinstance(text, str):
        raise BootConfigError("%s: text must be str" % path)
    parser = _Parser(text, path)
    penv = dict(penv)
    assignments = []
    warnings = []
    if "\r\n" in text:
        warnings.append("%s: CRLF line endings; /bin/sh keeps the CR in values and fails on blank CRLF "
                        "lines (read here as LF)" % path)
    for words in parser.commands():
        first = words[0]
        export = False
        head = first.segs[0] if first.segs else None
        plain_first = (len(first.segs) == 1 and head.kind == "lit" and head.quote == "")
        if head is not None and head.kind == "lit" and head.quote == "" and _ASSIGN_RE.match(head.text):
            targets = words
        elif plain_first and head.text == "export":
            export = True
            targets = words[1:]
        elif plain_first and head.text in _RESERVED:
            parser.fail(first.start, "shell control structure %r is not supported" % head.text)
        else:
            shown = parser.t[first.start:first.end]
            parser.fail(first.start, "cannot evaluate command %r (only VAR=value and export are supported)"
                        % shown[:40])
        for word in targets:
            w0 = word.segs[0] if word.segs else None
            m = _ASSIGN_RE.match(w0.text) if (w0 is not None and w0.kind == "lit" and w0.quote == "") else None
            if m is None:
                if export and len(word.segs) == 1 and w0.kind == "lit" and _NAME_RE.fullmatch(w0.text):
                    continue  # "export VAR": no change to the value
                shown = parser.t[word.start:word.end]
                if export and shown.startswith("-"):
                    parser.fail(word.start, "export options are not supported: %r" % shown)
                parser.fail(word.start, "%r is not an assignment; a command after an assignment is not "
                            "supported" % shown[:40])
            asg = _assignment(parser, word, m, export)
            _evaluate(parser, asg, penv, export, needed, warnings)
            assignments.append(asg)
    return GrubFile(path, text, assignments, penv, warnings)


def _assignment(parser, word, match, export):
    name = match.group(1)
    head = word.segs[0]
    rest = head.text[match.end():]
    segs = []
    value_start = head.start + match.end()
    if rest:
        segs.append(_Seg("lit", rest, "", value_start, head.end))
    segs.extend(word.segs[1:])
    start_line = parser.line_of(word.start) - 1
    end_line = parser.line_of(max(word.end - 1, word.start)) - 1
    return GrubAssignment(parser.path, name, start_line + 1, start_line, end_line, value_start, word.end,
                          segs, export)


def _evaluate(parser, asg, penv, export, needed, warnings):
    pieces = []
    unknown = None
    offset = 0
    for i, seg in enumerate(asg.segs):
        if seg.kind == "lit":
            if seg.quote == "":
                if (i == 0 and seg.text.startswith("~")) or ":~" in seg.text:
                    parser.fail(seg.start, "tilde expansion in %s is not supported" % asg.var)
                if export and _GLOB_OR_SPACE.search(seg.text):
                    parser.fail(seg.start, "unquoted glob characters in an export argument are not supported")
            pieces.append((seg.text, (asg, offset)))
            offset += len(seg.text)
        elif seg.kind == "var":
            value = penv.get(seg.text)
            if isinstance(value, _Unknown):
                if asg.var in needed:
                    parser.fail(seg.start, "%s expands $%s, which was %s; cannot evaluate with certainty"
                                % (asg.var, seg.text, value.describe()))
                unknown = unknown or _Unknown(value.path, value.line_no, via=seg.text)
                continue
            value = value or []
            if i == 0 and asg.prefix is not None:
                asg.prefix_src = parser.t[seg.start:seg.end]
                asg.prefix_value = "".join(t for t, _o in value)
            if export and seg.quote == "" and _GLOB_OR_SPACE.search("".join(t for t, _o in value)):
                parser.fail(seg.start, "unquoted $%s in an export argument would be split or globbed by some "
                            "shells; quote it" % seg.text)
            pieces.extend(value)
        else:
            if asg.var in needed:
                parser.fail(seg.start, "%s is set by command substitution %s; cannot evaluate with certainty"
                            % (asg.var, seg.text[:40]))
            unknown = _Unknown(asg.path, asg.line_no)
    if unknown is not None:
        penv[asg.var] = unknown
        asg.value = None
        warnings.append("%s:%s: %s is set by command substitution (not evaluated; pvetune does not need it)"
                        % (asg.path, asg.line_no, asg.var))
        return
    penv[asg.var] = pieces
    asg.value = "".join(t for t, _o in pieces)


def parse_grub_file(text, path, env=None):
    """Evaluate one GRUB default file; ``env`` holds variables set before it (name -> str).

    Returns a GrubFile; raises GrubParseError(path, line_no, message) for anything
    that cannot be evaluated with certainty.
    """
    return _parse(text, path, _plain_env(env))


def read_grub_files(fsroot):
    """[(path, text)] in the order update-grub sources them: /etc/default/grub, then grub.d/*.cfg."""
    files = []
    if fsroot.isfile(GRUB_DEFAULT_FILE):
        files.append((GRUB_DEFAULT_FILE, fsroot.read_text(GRUB_DEFAULT_FILE)))
    names = sorted((n for n in fsroot.listdir(GRUB_DROPIN_DIR) if n.endswith(".cfg")),
                   key=lambda n: n.encode("utf-8", "surrogateescape"))
    for name in names:
        path = GRUB_DROPIN_DIR + "/" + name
        if fsroot.isfile(path):
            files.append((path, fsroot.read_text(path)))
    return files


class _Token:
    __slots__ = ("text", "span", "origins")

    def __init__(self, text, span, origins):
        self.text = text
        self.span = span        # (assignment, start, end) in assignment.literal, or None
        self.origins = origins  # assignments the characters came from


class _Chain:
    """All files evaluated in order, with every effective argument traced to its source."""

    def __init__(self, files):
        penv = {}
        self.files = []
        for path, text in files:
            gf = _parse(text, path, penv)
            penv = gf._penv
            self.files.append(gf)
        self.penv = penv
        self.last = {}
        for gf in self.files:
            for asg in gf.assignments:
                self.last[asg.var] = asg
        chars = []
        origins = []
        self.var_origins = {}
        for n, var in enumerate(CMDLINE_VARS):
            if n:
                chars.append(" ")
                origins.append(None)
            seen = []
            for text, origin in penv.get(var) or []:
                for k, ch in enumerate(text):
                    chars.append(ch)
                    origins.append(None if origin is None else (origin[0], origin[1] + k))
                if origin is not None and origin[0] not in seen:
                    seen.append(origin[0])
            self.var_origins[var] = seen
        self.cmdline = "".join(chars)
        self.tokens = []
        for s, e in _split_spans(self.cmdline):
            orig = origins[s:e]
            asgs = []
            for o in orig:
                if o is not None and o[0] not in asgs:
                    asgs.append(o[0])
            span = None
            if None not in orig and len(asgs) == 1 and all(orig[k][1] == orig[0][1] + k for k in range(len(orig))):
                span = (asgs[0], orig[0][1], orig[-1][1] + 1)
            self.tokens.append(_Token(self.cmdline[s:e], span, asgs))

    def value(self, var):
        v = self.penv.get(var)
        return None if v is None else "".join(t for t, _o in v)

    def warnings(self):
        out = []
        for gf in self.files:
            out.extend(gf.warnings)
        return out


def grub_effective(files):
    """Evaluate GRUB default files ``[(path, text)]`` in order (as update-grub does).

    Returns ``{"GRUB_CMDLINE_LINUX": str|None, "GRUB_CMDLINE_LINUX_DEFAULT": ..., "GRUB_DEFAULT": ...,
    "set_by": {var: {"path", "line"}|None}, "args": [...], "arg_sources": [{"arg", "sources"}],
    "files": [paths], "warnings": [...]}``.  ``args`` are the arguments of normal boot entries:
    GRUB_CMDLINE_LINUX + " " + GRUB_CMDLINE_LINUX_DEFAULT.  None means unset (GRUB_DEFAULT unset = entry 0).
    """
    chain = _Chain(files)
    result = {"set_by": {}, "files": [p for p, _t in files], "warnings": chain.warnings()}
    for var in NEEDED_VARS:
        result[var] = chain.value(var)
        asg = chain.last.get(var)
        result["set_by"][var] = None if asg is None else {"path": asg.path, "line": asg.line_no}
    result["args"] = [tok.text for tok in chain.tokens]
    result["arg_sources"] = [{"arg": tok.text, "sources": ["%s:%s" % (a.path, a.line_no) for a in tok.origins]}
                             for tok in chain.tokens]
    return result


# -- editing ---------------------------------------------------------------
def _dq_escape(value):
    return re.sub(r'([\\"$`])', r"\\\1", value)


def _quote(value, style):
    if style == "'" and "'" not in value:
        return "'" + value + "'"
    if style == "" and _SAFE_UNQUOTED.match(value):
        return value
    return '"' + _dq_escape(value) + '"'


def _check_value(value, what):
    if not isinstance(value, str):
        raise BootConfigError("%s must be a string" % what)
    if re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value):
        raise BootConfigError("%s contains a newline or control character" % what)


def _render_value(asg, literal):
    if asg.prefix is not None:
        src = asg.prefix_src or ("$" + asg.prefix)
        if not src.startswith("${") and re.match(r"[A-Za-z0-9_]", literal):
            src = "${%s}" % asg.prefix
        return '"' + src + _dq_escape(literal) + '"'
    return _quote(literal, asg.quote)


def _eol(text):
    return "\r\n" if "\r\n" in text else "\n"


def _append_line(text, line):
    eol = _eol(text)
    if not text:
        return line + eol
    if text.endswith("\n"):
        return text + line + eol
    return text + eol + line


def _assignment_values(gf):
    return [(a.var, a.value) for a in gf.assignments]


def set_grub_var(text, path, var, new_value, env=None):
    """Set ``var`` to ``new_value`` by rewriting its last assignment in this file in place.

    Only the value of that assignment changes (its quote style is kept; an
    unquoted value that needs quoting gets double quotes); every other byte of
    the file stays (comments, CRLF endings, a missing final newline).  When the
    assignment is ``"$PREFIX literal"``, the prefix is kept and only the literal
    changes: ``new_value`` must then start with the prefix's value, which comes
    from earlier lines of this file or from ``env`` (variables set by files
    sourced before; required when the prefix is not assigned in this file).
    A missing variable is appended as ``VAR="value"``.  Raises GrubParseError
    when the edit is not certain.
    """
    _check_value(new_value, "new value for %s" % var)
    if not _NAME_RE.fullmatch(var or ""):
        raise BootConfigError("invalid variable name %r" % var)
    penv = _plain_env(env)
    gf = _parse(text, path, penv, needed=NEEDED_VARS + (var,))
    asg = gf.last(var)
    if asg is None:
        new_text = _append_line(text, "%s=%s" % (var, _quote(new_value, '"')))
    else:
        if not asg.editable:
            raise GrubParseError(path, asg.line_no, "%s is built from several expansions; not editing it "
                                 "automatically" % var)
        if asg.prefix is not None:
            assigned_here = any(a.var == asg.prefix and a.start_line < asg.start_line for a in gf.assignments)
            if env is None and not assigned_here:
                raise GrubParseError(path, asg.line_no, "%s extends $%s, whose value comes from files sourced "
                                     "earlier; pass env to edit it with certainty" % (var, asg.prefix))
            prefix_value = asg.prefix_value or ""
            if not new_value.startswith(prefix_value):
                raise GrubParseError(path, asg.line_no, "%s extends $%s (%r); the new value %r does not start "
                                     "with it" % (var, asg.prefix, prefix_value, new_value))
            literal = new_value[len(prefix_value):]
        else:
            literal = new_value
        new_text = text[:asg.value_start] + _render_value(asg, literal) + text[asg.value_end:]
    check = _parse(new_text, path, penv, needed=NEEDED_VARS + (var,))
    before = _assignment_values(gf)
    after = _assignment_values(check)
    if asg is None:
        ok = after[:-1] == before and after[-1:] == [(var, new_value)]
    else:
        idx = gf.assignments.index(asg)
        expected = list(before)
        expected[idx] = (var, new_value)
        ok = after == expected
    if not ok or check.env.get(var) != new_value:
        raise GrubParseError(path, None if asg is None else asg.line_no,
                             "editing %s would not give the expected value; file left alone" % var)
    return new_text


def render_dropin(var, args, base_expr=True):
    """Text of /etc/default/grub.d/90-pvetune.cfg setting ``var`` to ``$var args`` (or ``args``)."""
    if var not in CMDLINE_VARS:
        raise BootConfigError("drop-in variable must be one of %s" % ", ".join(CMDLINE_VARS))
    args = [validate_arg(a) for a in args]
    value = " ".join(args)
    if base_expr:
        value_src = "$%s%s" % (var, _dq_escape(" " + value if value else ""))
    else:
        value_src = _dq_escape(value)
    return ("# Managed by pvetune: kernel arguments for GPU host performance.\n"
            "# update-grub sources this file after /etc/default/grub; it %s %s.\n"
            "# To undo: delete this file and run update-grub.\n"
            '%s="%s"\n' % ("extends" if base_expr else "sets", var, var, value_src))


def _remove_token(lit, s, e):
    left, right = lit[:s], lit[e:]
    if right[:1] in (" ", "\t") and (not left or left[-1] in " \t"):
        right = right.lstrip(" \t")
    elif not right and left[-1:] in (" ", "\t"):
        left = left.rstrip(" \t")
    return left + right


def _append_args(lit, args, has_prefix):
    extra = " ".join(args)
    if not lit:
        return (" " + extra) if has_prefix else extra
    return lit + ("" if lit[-1] in " \t" else " ") + extra


def _insert_file(files, path, text):
    directory, name = path.rsplit("/", 1)
    files = list(files)
    for i, (p, _t) in enumerate(files):
        if i == 0 and p == GRUB_DEFAULT_FILE:
            continue
        d, n = p.rsplit("/", 1) if "/" in p else ("", p)
        if d == directory and n.encode("utf-8") > name.encode("utf-8"):
            files.insert(i, (path, text))
            return files
    files.append((path, text))
    return files


def _apply_plan(files, plan):
    out = list(files)
    for path, old, new in plan:
        if old is None:
            out = _insert_file(out, path, new)
        else:
            out = [(p, new if p == path else t) for p, t in out]
    return out


def _build_plan(chain, edits, adds, target, var, dropin_path):
    by_file = collections.OrderedDict()
    appends = {}
    new_files = []
    if target is not None:
        kind = target[0]
        if kind == "asg":
            appends[target[1]] = adds
        elif kind == "append":
            pass
        elif kind == "new":
            new_files.append((dropin_path, None, render_dropin(var, adds)))
    for asg in list(edits) + list(appends):
        by_file.setdefault(asg.path, [])
        if asg not in by_file[asg.path]:
            by_file[asg.path].append(asg)
    plan = []
    for gf in chain.files:
        text = gf.text
        asgs = sorted(by_file.get(gf.path, []), key=lambda a: a.value_start, reverse=True)
        for asg in asgs:
            lit = asg.literal
            for s, e, rep in sorted(edits.get(asg, []), key=lambda x: x[0], reverse=True):
                lit = _remove_token(lit, s, e) if rep is None else lit[:s] + rep + lit[e:]
            if asg in appends:
                lit = _append_args(lit, appends[asg], asg.prefix is not None)
            text = text[:asg.value_start] + _render_value(asg, lit) + text[asg.value_end:]
        if target is not None and target[0] == "append" and gf.path == target[1]:
            text = _append_line(text, '%s="$%s %s"' % (var, var, _dq_escape(" ".join(adds))))
        if text != gf.text:
            plan.append((gf.path, gf.text, text))
    return plan + new_files


def _add_targets(chain, edits, var, dropin_path):
    targets = []
    other = [v for v in CMDLINE_VARS if v != var][0]
    for v in (var, other):
        for asg in edits:
            if asg in chain.var_origins.get(v, []) and ("asg", asg) not in targets:
                targets.append(("asg", asg))
    for asg in edits:
        if ("asg", asg) not in targets:
            targets.append(("asg", asg))
    dropin = [gf for gf in chain.files if gf.path == dropin_path]
    if dropin:
        asg = dropin[0].last(var)
        if asg is not None and asg.editable:
            targets.append(("asg", asg))
        elif asg is None:
            targets.append(("append", dropin_path))
    else:
        targets.append(("new",))
    for v in (var, other):
        asg = chain.last.get(v)
        if asg is not None and asg.editable and ("asg", asg) not in targets:
            targets.append(("asg", asg))
    return targets


def plan_grub_edit(files, ensure, remove, var=DEFAULT_VAR, dropin_path=DROPIN_PATH):
    """Plan the edits that make GRUB's normal-entry kernel arguments contain ``ensure`` and not ``remove``.

    ``files``: [(path, text)] in sourcing order (``read_grub_files``).  Returns
    [(path, old_text, new_text)] in sourcing order; ``old_text`` is None for a
    file to create (the drop-in).  An empty list means nothing to do.

    Additions go to the pvetune drop-in (created, or its assignment extended)
    unless an assignment is edited anyway; arguments to replace or remove are
    edited in the assignment literal they come from (in whichever file).  The
    plan is verified by re-evaluating all files; GrubParseError is raised when
    no plan can be verified or a needed edit is not certain.
    """
    if var not in CMDLINE_VARS:
        raise BootConfigError("var must be one of %s" % ", ".join(CMDLINE_VARS))
    chain = _Chain(files)
    current = [tok.text for tok in chain.tokens]
    new_args, changes = plan_args(current, ensure, remove)
    if not changes:
        return []
    edits = collections.OrderedDict()
    for change in changes:
        if change["action"] not in ("replace", "remove"):
            continue
        tok = chain.tokens[change["index"]]
        if tok.span is None:
            where = tok.origins[0] if tok.origins else None
            raise GrubParseError(where.path if where else "GRUB", where.line_no if where else None,
                                 "argument %r is assembled from several pieces; cannot change it with "
                                 "certainty" % tok.text)
        asg, s, e = tok.span
        if not asg.editable:
            raise GrubParseError(asg.path, asg.line_no, "argument %r comes from an assignment pvetune cannot "
                                 "rewrite with certainty" % tok.text)
        spans = edits.setdefault(asg, [])
        if any(x[0] == s and x[1] == e for x in spans):
            raise GrubParseError(asg.path, asg.line_no, "argument %r reaches the command line more than once "
                                 "through variable expansion; fix it by hand" % tok.text)
        spans.append((s, e, change["new"] if change["action"] == "replace" else None))
    adds = [c["new"] for c in changes if c["action"] == "add"]
    targets = _add_targets(chain, edits, var, dropin_path) if adds else [None]
    failure = None
    for target in targets:
        plan = _build_plan(chain, edits, adds, target, var, dropin_path)
        new_files = _apply_plan(files, plan)
        try:
            check = _Chain(new_files)
        except GrubParseError as exc:
            failure = exc
            continue
        got = [tok.text for tok in check.tokens]
        _again, more = plan_args(got, ensure, remove)
        if not more and collections.Counter(got) == collections.Counter(new_args):
            return plan
        last = check.last.get(var)
        why = ("%s is set last here" % var) if "--" not in got else \
            "the command line contains '--'; arguments after it go to init, not the kernel"
        failure = GrubParseError(last.path if last else dropin_path, last.line_no if last else None,
                                 "planned edit does not reach the effective kernel command line (%s)" % why)
    raise failure


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


# --------------------------------------------------------------------------
# Boot loader detection
# --------------------------------------------------------------------------
_STATUS_ESP_RE = re.compile(r"^(?P<uuid>\S+) is configured with:\s*(?P<rest>.*)$")
_STATUS_LOADER_RE = re.compile(r"(uefi|grub)\s*(?:\(versions:\s*([^)]*)\))?")


def parse_pbt_status(text):
    """Parse ``proxmox-boot-tool status`` output.

    Returns {"booted": "uefi"|"legacy"|None, "esps": [{"uuid", "loaders": {"uefi"|"grub": [versions]},
    "loader": "systemd-boot"|"grub"|"both"|None}], "warnings": [...], "errors": [...],
    "managed": True|False|None, "unparsed": [...]}.
    """
    res = {"booted": None, "esps": [], "warnings": [], "errors": [], "managed": None, "unparsed": []}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("Re-executing"):
            continue
        m = re.match(r"^System currently booted with (uefi|legacy bios)$", line)
        if m:
            res["booted"] = "uefi" if m.group(1) == "uefi" else "legacy"
            continue
        m = _STATUS_ESP_RE.match(line)
        if m:
            loaders = collections.OrderedDict()
            for kind, versions in _STATUS_LOADER_RE.findall(m.group("rest")):
                loaders[kind] = [v.strip() for v in versions.split(",") if v.strip()]
            kinds = set(loaders)
            loader = ("both" if len(kinds) == 2 else "systemd-boot" if kinds == {"uefi"}
                      else "grub" if kinds == {"grub"} else None)
            res["esps"].append({"uuid": m.group("uuid"), "loaders": dict(loaders), "loader": loader})
            continue
        if line.startswith("WARN"):
            res["warnings"].append(line)
        elif line.startswith("E:"):
            res["errors"].append(line)
            if "proxmox-boot-uuids" in line and "does not exist" in line:
                res["managed"] = False
        else:
            res["unparsed"].append(line)
    if res["esps"]:
        res["managed"] = True
    return res


def detect_loader(fsroot, pbt_status_text=None):
    """Which boot loader boots the host, per docs/DESIGN.md "Boot loader detection".

    ``pbt_status_text``: live ``proxmox-boot-tool status`` output, if the caller
    ran it; otherwise a captured ``/.pvetune/proxmox-boot-tool-status.txt`` is used.
    Returns {"loader", "managed_by_pbt", "uefi", "rule", "reason", "evidence",
    "esps", "cmdline_path"}; rule is "pbt-status" (1), "esp-list+uefi" (2) or
    "grub-default" (3).
    """
    managed = fsroot.exists(ESP_LIST)
    uefi = fsroot.isdir(EFI_DIR)
    result = {"loader": None, "managed_by_pbt": managed, "uefi": uefi, "rule": None, "reason": "",
              "evidence": [], "esps": [], "notes": []}

    def done(loader, rule, reason, evidence):
        result.update({"loader": loader, "rule": rule, "reason": reason})
        result["evidence"].extend(e for e in evidence if e not in result["evidence"])
        result["cmdline_path"] = KERNEL_CMDLINE if loader == "systemd-boot" else GRUB_DEFAULT_FILE
        return result

    status_text, status_src = pbt_status_text, "proxmox-boot-tool status"
    if status_text is None and fsroot.isfile(PBT_STATUS_SNAPSHOT):
        try:
            status_text, status_src = fsroot.read_text(PBT_STATUS_SNAPSHOT), PBT_STATUS_SNAPSHOT
        except FsError as exc:
            result["notes"].append(str(exc))
    if status_text is not None:
        st = parse_pbt_status(status_text)
        result["esps"] = st["esps"]
        if st["booted"] is not None:
            result["uefi"] = uefi = st["booted"] == "uefi"
        if st["esps"]:
            result["managed_by_pbt"] = managed = True
            kinds = {e["loader"] for e in st["esps"]}
            if not uefi:
                return done("grub", "pbt-status", "proxmox-boot-tool status: booted in legacy BIOS mode, "
                            "so the ESPs boot GRUB", [status_src])
            if kinds == {"systemd-boot"}:
                return done("systemd-boot", "pbt-status", "proxmox-boot-tool status: ESPs configured with uefi "
                            "(systemd-boot)", [status_src])
            if kinds == {"grub"}:
                return done("grub", "pbt-status", "proxmox-boot-tool status: ESPs configured with grub",
                            [status_src])
            result["notes"].append("proxmox-boot-tool status is ambiguous (%s); using rule 2"
                                   % ", ".join(sorted(str(k) for k in kinds)))
            result["evidence"].append(status_src)
        elif st["managed"] is False:
            result["managed_by_pbt"] = False
            return done("grub", "pbt-status", "proxmox-boot-tool status: no ESP list, plain GRUB from "
                        "/etc/default/grub", [status_src])
    if managed:
        try:
            result["esp_uuids"] = [ln.strip() for ln in fsroot.read_text(ESP_LIST).splitlines() if ln.strip()]
        except FsError as exc:
            result["notes"].append(str(exc))
    if managed and uefi:
        if fsroot.exists(LOADER_INFO_EFIVAR):
            return done("systemd-boot", "esp-list+uefi", "ESP list present, booted in UEFI mode and the "
                        "LoaderInfo EFI variable (set by systemd-boot) exists",
                        [ESP_LIST, EFI_DIR, LOADER_INFO_EFIVAR])
        if fsroot.exists(KERNEL_CMDLINE):
            return done("systemd-boot", "esp-list+uefi", "ESP list present, booted in UEFI mode and "
                        "/etc/kernel/cmdline exists", [ESP_LIST, EFI_DIR, KERNEL_CMDLINE])
        return done("grub", "esp-list+uefi", "ESP list present and UEFI, but neither the LoaderInfo EFI variable "
                    "nor /etc/kernel/cmdline exists: GRUB", [ESP_LIST, EFI_DIR])
    if managed:
        return done("grub", "grub-default", "ESP list present, booted in legacy BIOS mode: GRUB on the ESPs",
                    [ESP_LIST])
    return done("grub", "grub-default", "no %s: plain GRUB from /etc/default/grub" % ESP_LIST, [])


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------
_KVER_RE = re.compile(r"^[0-9][A-Za-z0-9._+~-]*\Z")


def validate_kernel_version(text):
    """Return ``text`` if it is a safe kernel release string (``6.14.8-2-pve``); else raise BootConfigError."""
    if not isinstance(text, str):
        raise BootConfigError("kernel version must be a string")
    shown = text if len(text) <= 80 else text[:77] + "..."
    if len(text) > MAX_KERNEL_VERSION_LEN:
        raise BootConfigError("kernel version %r is longer than %d characters" % (shown, MAX_KERNEL_VERSION_LEN))
    if not _KVER_RE.match(text) or ".." in text:
        raise BootConfigError("%r is not a kernel version (digits first, then [A-Za-z0-9._+~-])" % shown)
    return text


def _isdigit(ch):
    return "0" <= ch <= "9"


def _order(ch):
    if ch == "~":
        return -1
    if ch.isalpha() and ch.isascii():
        return ord(ch)
    return ord(ch) + 256


def version_compare(a, b):
    """Compare like GNU ``sort -V`` (Debian version ordering of digit/non-digit runs); -1, 0 or 1."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not _isdigit(a[i])) or (j < len(b) and not _isdigit(b[j])):
            ac = _order(a[i]) if i < len(a) and not _isdigit(a[i]) else 0
            bc = _order(b[j]) if j < len(b) and not _isdigit(b[j]) else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        si = i
        while i < len(a) and _isdigit(a[i]):
            i += 1
        sj = j
        while j < len(b) and _isdigit(b[j]):
            j += 1
        na = int(a[si:i]) if i > si else 0
        nb = int(b[sj:j]) if j > sj else 0
        if na != nb:
            return -1 if na < nb else 1
    return (a > b) - (a < b)


_VersionKey = functools.cmp_to_key(version_compare)


def kernel_sort_key(version):
    """Sort key ordering kernel versions like ``sort -V``."""
    return _VersionKey(version)


def in_series(version, series):
    """True when ``version`` belongs to ``series`` ("6.14" matches 6.14.8-2-pve, not 6.140.1)."""
    want = [int(x) for x in str(series).split(".")]
    m = re.match(r"^(\d+(?:\.\d+)*)", version or "")
    if not m:
        return False
    have = [int(x) for x in m.group(1).split(".")]
    return have[:len(want)] == want


def parse_pbt_kernel_list(text):
    """Parse ``proxmox-boot-tool kernel list`` -> {"manual", "auto", "pinned", "next_boot", "unparsed"}."""
    res = {"manual": [], "auto": [], "pinned": None, "next_boot": None, "unparsed": []}
    headers = {"Manually selected kernels:": "manual", "Automatically selected kernels:": "auto",
               "Pinned kernel:": "pinned", "Kernel pinned on next-boot:": "next_boot"}
    section = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line in headers:
            section = headers[line]
            continue
        if line == "None." and section is not None:
            continue
        try:
            validate_kernel_version(line)
        except BootConfigError:
            res["unparsed"].append(line)
            continue
        if section in ("manual", "auto"):
            res[section].append(line)
        elif section in ("pinned", "next_boot") and res[section] is None:
            res[section] = line
        else:
            res["unparsed"].append(line)
    return res


_GRUB_ID_RE = re.compile(r"^gnulinux-advanced-(?P<id>[^>]+)>gnulinux-(?P<ver>.+)-(?:advanced|recovery)-(?P=id)$")
_GRUB_TITLE_RE = re.compile(r"^[^>]+>.*, with Linux (?P<ver>\S+?)(?: \(recovery mode\))?$")


def grub_default_kernel(value):
    """What a GRUB_DEFAULT / saved_entry value selects: (kernel version or None, form).

    Forms: "entry0" (unset, 0 or the simple top entry: the newest kernel),
    "id" (``gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>``, as written by
    proxmox-boot-tool), "title" (``Advanced options ...>..., with Linux <ver>``),
    "saved" (see grubenv), "index" (another menu position), "unknown".
    """
    value = (value or "").strip()
    if value in ("", "0") or value.startswith("gnulinux-simple-"):
        return None, "entry0"
    if value == "saved":
        return None, "saved"
    for rx, form in ((_GRUB_ID_RE, "id"), (_GRUB_TITLE_RE, "title")):
        m = rx.match(value)
        if m:
            try:
                return validate_kernel_version(m.group("ver")), form
            except BootConfigError:
                return None, "unknown"
    if re.match(r"^\d+(>\d+)*$", value):
        return None, "index"
    return None, "unknown"


def _parse_grubenv(text):
    env = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        env[k] = v
    return env


def _first_line_of(fsroot, path):
    try:
        text = fsroot.read_text(path, limit=4096)
    except FsError:
        return None
    line = text.split("\n", 1)[0].strip()
    return line or None


def _versions_from(fsroot, directory, prefix):
    found = []
    for name in fsroot.listdir(directory):
        if not name.startswith(prefix):
            continue
        ver = name[len(prefix):]
        try:
            found.append(validate_kernel_version(ver))
        except BootConfigError:
            continue
    return found


def kernel_state(fsroot, loader_info=None):
    """Running, installed and pinned kernels, and the kernel the next boot will use.

    next_boot_kernel / next_boot_rule:
      hosts managed by proxmox-boot-tool: the next-boot pin ("next-boot-pin"),
      else the pin ("pin") - applied to the ESPs by proxmox-boot-tool refresh;
      otherwise, and on plain GRUB hosts, GRUB_DEFAULT: a kernel id/title
      ("grub-pin" when proxmox-boot-tool's proxmox-kernel-pin.cfg set it, else
      "grub-default"), "saved" read from /boot/grub/grubenv ("grub-saved-entry"),
      unset/0 or a default naming a kernel that is not installed ("newest-installed":
      entry 0, the newest /boot/vmlinuz-* by version sort, as update-grub orders
      them); "unknown" when it cannot be told (a menu index, unreadable files).
      On plain GRUB hosts the pin files only feed proxmox-boot-tool's GRUB
      snippet; a pin that disagrees with GRUB_DEFAULT is reported in warnings.
    """
    if loader_info is None:
        loader_info = detect_loader(fsroot)
    state = {"running": fsroot.try_value(OSRELEASE), "installed": [], "images": [], "modules": [],
             "pinned": _first_line_of(fsroot, PIN_FILE), "next_boot": _first_line_of(fsroot, NEXT_BOOT_PIN),
             "grub_default": None, "next_boot_kernel": None, "next_boot_rule": "unknown",
             "next_boot_reason": "", "loader": loader_info.get("loader"),
             "managed_by_pbt": bool(loader_info.get("managed_by_pbt")), "warnings": [], "errors": []}
    images = _versions_from(fsroot, "/boot", "vmlinuz-")
    modules = _versions_from(fsroot, "/lib/modules", "")
    state["images"] = sorted(images, key=kernel_sort_key)
    state["modules"] = sorted(modules, key=kernel_sort_key)
    state["installed"] = sorted(set(images) | set(modules), key=kernel_sort_key)
    newest = state["images"][-1] if state["images"] else None
    for key in ("pinned", "next_boot"):
        if state[key] is not None:
            try:
                validate_kernel_version(state[key])
            except BootConfigError as exc:
                state["errors"].append({"path": PIN_FILE if key == "pinned" else NEXT_BOOT_PIN, "error": str(exc)})
                state[key] = None
                continue
            if state[key] not in images:
                state["warnings"].append("%s kernel %s has no /boot/vmlinuz-%s" % (key, state[key], state[key]))

    grub = {"value": None, "path": None, "line": None, "kernel": None, "form": None}
    try:
        eff = grub_effective(read_grub_files(fsroot))
        grub["value"] = eff["GRUB_DEFAULT"]
        if eff["set_by"]["GRUB_DEFAULT"]:
            grub["path"] = eff["set_by"]["GRUB_DEFAULT"]["path"]
            grub["line"] = eff["set_by"]["GRUB_DEFAULT"]["line"]
        grub["kernel"], grub["form"] = grub_default_kernel(grub["value"])
        if grub["form"] == "saved":
            try:
                env = _parse_grubenv(fsroot.read_text(GRUB_ENV))
            except FsError:
                env = {}
            entry = env.get("next_entry") or env.get("saved_entry")
            grub["saved_entry"] = entry
            grub["kernel"], form = grub_default_kernel(entry)
            grub["saved_form"] = form
    except (GrubParseError, FsError) as exc:
        state["errors"].append({"path": getattr(exc, "path", GRUB_DEFAULT_FILE), "error": str(exc)})
        grub["form"] = "unknown"
    state["grub_default"] = grub

    def decide(kernel, rule, reason):
        state.update({"next_boot_kernel": kernel, "next_boot_rule": rule, "next_boot_reason": reason})
        return state

    if state["managed_by_pbt"]:
        if state["next_boot"]:
            return decide(state["next_boot"], "next-boot-pin", "%s (proxmox-boot-tool)" % NEXT_BOOT_PIN)
        if state["pinned"]:
            return decide(state["pinned"], "pin", "%s (proxmox-boot-tool)" % PIN_FILE)
        if state["loader"] == "systemd-boot":
            if newest is None:
                return decide(None, "unknown", "no /boot/vmlinuz-* found")
            return decide(newest, "newest-installed", "systemd-boot default proxmox-*: the newest kernel")
    else:
        for key, path in (("next_boot", NEXT_BOOT_PIN), ("pinned", PIN_FILE)):
            if state[key] and grub["kernel"] != state[key]:
                state["warnings"].append(
                    "%s names %s but GRUB_DEFAULT selects %s; GRUB follows GRUB_DEFAULT "
                    "(run proxmox-boot-tool kernel pin again)" % (path, state[key], grub["kernel"] or "entry 0"))
                break
    form = grub.get("saved_form") if grub["form"] == "saved" else grub["form"]
    if grub["form"] == "saved":
        rule = "grub-saved-entry"
    elif grub["path"] == GRUB_PIN_SNIPPET:
        rule = "grub-pin"  # GRUB_DEFAULT written by proxmox-boot-tool kernel pin
    else:
        rule = "grub-default"
    if form in ("id", "title"):
        if grub["kernel"] in images:
            return decide(grub["kernel"], rule, "GRUB_DEFAULT=%s" % grub["value"])
        state["warnings"].append("GRUB default entry names kernel %s, which is not installed; GRUB falls back "
                                 "to entry 0" % grub["kernel"])
        form = "entry0"
    if form == "entry0":
        if newest is None:
            return decide(None, "unknown", "no /boot/vmlinuz-* found")
        return decide(newest, "newest-installed", "GRUB entry 0 boots the newest kernel (version sort)")
    return decide(None, "unknown", "GRUB_DEFAULT=%r cannot be resolved to a kernel without grub.cfg"
                  % grub["value"])
