# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Editing GRUB kernel arguments: a drop-in first, an in-place edit where needed.

``plan_grub_edit`` is what the boot-args fix uses.  Arguments that only need to be *added* go to
``/etc/default/grub.d/90-pvetune.cfg`` (``render_dropin``): reversible by deleting one file, the package-managed
/etc/default/grub untouched (no ucf prompt on grub upgrades).  A drop-in can only append, so an argument that must be
*replaced* or *removed* (``processor.max_cstate=5`` in /etc/default/grub) is edited where it is written: the planner
traces every effective argument to its assignment literal (grub_parse's chain) and edits that literal; when it edits
a file anyway, added arguments go into the same assignment.  Every plan is verified by re-evaluating all files with
the new texts (ensured arguments present exactly once, no conflicting value left, every other argument kept);
otherwise the next candidate is tried, and GrubParseError is raised when none works.  CRLF endings are kept.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re

from ansible.module_utils.pvetune.formats.grub_chain import GrubChain
from ansible.module_utils.pvetune.formats.grub_parse import (
    SAFE_UNQUOTED,
    CMDLINE_VARS,
    DEFAULT_VAR,
    GRUB_DEFAULT_FILE,
    GrubParseError,
)
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError, plan_args, validate_arg

DROPIN_PATH = "/etc/default/grub.d/90-pvetune.cfg"


# -- editing ---------------------------------------------------------------
def _dq_escape(value):
    return re.sub(r'([\\"$`])', r"\\\1", value)


def quote_value(value, style):
    if style == "'" and "'" not in value:
        return "'" + value + "'"
    if style == "" and SAFE_UNQUOTED.match(value):
        return value
    return '"' + _dq_escape(value) + '"'


def render_value(asg, literal):
    if asg.prefix is not None:
        src = asg.prefix_src or ("$" + asg.prefix)
        if not src.startswith("${") and re.match(r"[A-Za-z0-9_]", literal):
            src = "${%s}" % asg.prefix
        return '"' + src + _dq_escape(literal) + '"'
    return quote_value(literal, asg.quote)


def _eol(text):
    return "\r\n" if "\r\n" in text else "\n"


def append_line(text, line):
    eol = _eol(text)
    if not text:
        return line + eol
    if text.endswith("\n"):
        return text + line + eol
    return text + eol + line


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


def apply_plan(files, plan):
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
            text = text[:asg.value_start] + render_value(asg, lit) + text[asg.value_end:]
        if target is not None and target[0] == "append" and gf.path == target[1]:
            text = append_line(text, '%s="$%s %s"' % (var, var, _dq_escape(" ".join(adds))))
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
    chain = GrubChain(files)
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
        new_files = apply_plan(files, plan)
        try:
            check = GrubChain(new_files)
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
