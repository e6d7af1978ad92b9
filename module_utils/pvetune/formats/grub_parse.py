# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB default files: /etc/default/grub and /etc/default/grub.d/*.cfg, evaluated as update-grub sees them.

update-grub (grub-mkconfig, run by /bin/sh = dash) sources /etc/default/grub and then /etc/default/grub.d/*.cfg in
glob order (dash sorts globs by byte value).  ``parse_grub_file`` evaluates the subset of sh used in practice and
raises ``GrubParseError(path, line_no, message)`` for anything it cannot evaluate with certainty: control structures,
``;``/``&&``/pipes/redirections, ``$((...))``, parameter expansions other than ``$NAME``/``${NAME}``, special
parameters, unbalanced quotes, commands other than assignments/``export``.  Command substitution (``$(...)``,
backticks) runs in a subshell and cannot change other variables, so it only makes *its own* variable unknown:
Debian's stock ``GRUB_DISTRIBUTOR=`lsb_release ...``` is accepted with a warning, while one that reaches
GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT or GRUB_DEFAULT (directly or through another variable) raises.
CRLF files are read as LF with a warning (/bin/sh would keep the CR, which the kernel treats as whitespace).
``grub_effective`` chains the files (``GrubChain``) so that every effective argument can be traced to the assignment
literal it came from (the editor in grub_edit.py relies on that).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import re

from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError

# --------------------------------------------------------------------------
# Paths and names
# --------------------------------------------------------------------------
GRUB_DEFAULT_FILE = "/etc/default/grub"

GRUB_DROPIN_DIR = "/etc/default/grub.d"

CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")

NEEDED_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_DEFAULT")

DEFAULT_VAR = "GRUB_CMDLINE_LINUX_DEFAULT"


class GrubParseError(BootConfigError):
    """A GRUB default file cannot be evaluated or edited with certainty."""

    def __init__(self, path, line_no, message):
        where = path if line_no is None else "%s:%s" % (path, line_no)
        super(GrubParseError, self).__init__("%s: %s" % (where, message))
        self.path = path
        self.line_no = line_no
        self.message = message


# --------------------------------------------------------------------------
# GRUB default files: a small evaluator for the sh subset used in practice
# --------------------------------------------------------------------------
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")

_BRACED_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

_PLAIN_RUN = re.compile(r"[^ \t\r\n'\"\\$`;&|<>()]+")

_OPERATORS = ";&|<>()"

_RESERVED = frozenset(["if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until",
                       "for", "in", "function", "select", "{", "}", "!", "[[", "]]"])

SAFE_UNQUOTED = re.compile(r"^[A-Za-z0-9_.,:/+=@%^-]*\Z")

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
        elif NAME_RE.match(nxt or " "):
            m = NAME_RE.match(t, p + 1)
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


def plain_env(env):
    penv = {}
    for k, v in (env or {}).items():
        if isinstance(v, _Unknown) or (isinstance(v, list)):
            penv[k] = v
        elif v is None:
            continue
        else:
            penv[k] = [(str(v), None)]
    return penv


def parse_grub_sh(text, path, penv, needed=NEEDED_VARS):
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
                if export and len(word.segs) == 1 and w0.kind == "lit" and NAME_RE.fullmatch(w0.text):
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
    return parse_grub_sh(text, path, plain_env(env))


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
