"""Test-only: set one GRUB variable by rewriting its last assignment in a file (``set_grub_var``).

The fix never does this (it plans edits with grub_edit.plan_grub_edit); the tests use it to exercise the quoting and
in-place rewriting helpers that plan_grub_edit shares, on single files.
"""
import re

from ansible.module_utils.pvetune.formats.grub_edit import append_line, quote_value, render_value
from ansible.module_utils.pvetune.formats.grub_parse import (
    NAME_RE, NEEDED_VARS, GrubParseError, plain_env, parse_grub_sh)
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError


def _check_value(value, what):
    if not isinstance(value, str):
        raise BootConfigError("%s must be a string" % what)
    if re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value):
        raise BootConfigError("%s contains a newline or control character" % what)


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
    if not NAME_RE.fullmatch(var or ""):
        raise BootConfigError("invalid variable name %r" % var)
    penv = plain_env(env)
    gf = parse_grub_sh(text, path, penv, needed=NEEDED_VARS + (var,))
    asg = gf.last(var)
    if asg is None:
        new_text = append_line(text, "%s=%s" % (var, quote_value(new_value, '"')))
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
        new_text = text[:asg.value_start] + render_value(asg, literal) + text[asg.value_end:]
    check = parse_grub_sh(new_text, path, penv, needed=NEEDED_VARS + (var,))
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
