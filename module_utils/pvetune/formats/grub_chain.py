# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The effective GRUB variables over all default files (/etc/default/grub, then grub.d/*.cfg in glob order), each
value kept as the chain of tokens it came from (``GrubChain``), so the editor (grub_edit.py) can change an argument in
the assignment literal that produced it; ``grub_effective`` is what the audit reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.formats.grub_parse import CMDLINE_VARS, NEEDED_VARS, parse_grub_sh
from ansible.module_utils.pvetune.formats.kernel_cmdline import split_spans


class _Token:
    __slots__ = ("text", "span", "origins")

    def __init__(self, text, span, origins):
        self.text = text
        self.span = span        # (assignment, start, end) in assignment.literal, or None
        self.origins = origins  # assignments the characters came from


class GrubChain:
    """All files evaluated in order, with every effective argument traced to its source."""

    def __init__(self, files):
        penv = {}
        self.files = []
        for path, text in files:
            gf = parse_grub_sh(text, path, penv)
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
        for s, e in split_spans(self.cmdline):
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
    chain = GrubChain(files)
    result = {"set_by": {}, "files": [p for p, _t in files], "warnings": chain.warnings()}
    for var in NEEDED_VARS:
        result[var] = chain.value(var)
        asg = chain.last.get(var)
        result["set_by"][var] = None if asg is None else {"path": asg.path, "line": asg.line_no}
    result["args"] = [tok.text for tok in chain.tokens]
    result["arg_sources"] = [{"arg": tok.text, "sources": ["%s:%s" % (a.path, a.line_no) for a in tok.origins]}
                             for tok in chain.tokens]
    return result
