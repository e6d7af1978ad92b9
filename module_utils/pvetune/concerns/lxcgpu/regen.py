# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure regeneration of a CT config's NVIDIA entries for the current majors (``regenerate``, ``diff_lines``).

Works on a formats/ct_config.CtConfig and concerns/lxcgpu's analysis; returns new bytes and the list of edits, or
the original bytes and a refusal when it cannot be certain.  Reads and writes nothing: concerns/lxcgpu_fix does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

from ansible.module_utils.pvetune.concerns.lxcgpu import sources as sources_mod
from ansible.module_utils.pvetune.concerns.lxcgpu.checks import analyze, mount_order, node_label
from ansible.module_utils.pvetune.formats.ct_config import (
    FAMILY_ALLOW_KEY,
    family_order,
    is_covered,
    parse_ct_config,
    parse_device_rule,
)
from ansible.module_utils.pvetune.formats.proc_devices import NVIDIA_MAJOR

NEW_MOUNT_OPTIONS = "bind,optional,create=file"
_FIXED_MAJOR = re.compile(r"^nvidia([0-9]+|ctl|-modeset)$")


# ---------------------------------------------------------------------------
# Rewriting
# ---------------------------------------------------------------------------
def _mount_value(template, path):
    """A new mount entry value for ``path`` in the style of ``template``."""
    parts = re.split(r"([ \t]+)", template.value.strip())
    fields = parts[0::2]
    seps = parts[1::2]
    # Relative, as LXC wants it; an absolute target is mounted only inside the CT's rootfs, so keep that prefix.
    target = template.target.split("/rootfs/", 1)[0] + "/rootfs" + path if template.target.startswith("/") \
        else path.lstrip("/")
    new_fields = [path, target, "none", NEW_MOUNT_OPTIONS] + fields[4:]
    out = []
    for index, field in enumerate(new_fields):
        if index:
            out.append(seps[index - 1] if index - 1 < len(seps) else " ")
        out.append(field)
    return "".join(out)


def _rule_value(template_line, major, minor, access):
    """A new allow value; reuses the template line's inner spacing when it has one."""
    gap1 = gap2 = " "
    if template_line is not None and template_line.rule is not None:
        match = re.match(r"^[abc]([ \t]+)(?:\*|[0-9]+):(?:\*|[0-9]+)(?:([ \t]+)[A-Za-z]+)?", template_line.value)
        if match:
            gap1 = match.group(1)
            gap2 = match.group(2) or " "
    return "c{}{}:{}{}{}".format(gap1, major, "*" if minor is None else minor, gap2, access)


class _Edit:
    def __init__(self):
        self.replace = {}    # line index -> new body bytes
        self.remove = set()  # line indexes
        self.insert = {}     # line index -> [(body bytes, text)] inserted after that line
        self.changes = []


def _blocking(a):
    """What pvetune cannot repair in the CT config itself: nodes that are stale where they are made."""
    return [message for status, message in sources_mod.source_messages(a)
            if status == "fail"]


def _plan(ct, host_majors, host_nodes, known, registered, cgroup_version, sources=None):
    """Compute the edits; returns (edit, analysis, refusal reasons)."""
    a = analyze(ct, host_majors, host_nodes, known, registered, cgroup_version, sources)
    edit = _Edit()
    if not a.mounts_nvidia and not a.stale:
        return edit, a, _blocking(a)
    if a.allow_moot and not a.implied_controls:
        return edit, a, _blocking(a)
    index_of = {id(line): i for i, line in enumerate(ct.lines)}

    # 1. Control nodes CUDA needs, after the last NVIDIA mount entry.
    # new allow lines go after the last NVIDIA mount entry, else after the hook that makes the nodes
    mount_anchor = a.nv_mounts[-1] if a.nv_mounts else (a.hooks[-1] if a.hooks else None)
    added_mounts = []
    if a.implied_controls:
        for path in a.implied_controls:
            value = _mount_value(mount_anchor.mount, path)
            body = mount_anchor.prefix + value.encode("utf-8")
            added_mounts.append((body, body.decode("utf-8", "replace")))
            a.mount_used.setdefault(path, a.char_nodes[path])
            a.added_mounts.append(path)
        if added_mounts:
            edit.insert.setdefault(index_of[id(mount_anchor)], []).extend(added_mounts)
            for _after, text in added_mounts:
                edit.changes.append({"action": "add", "line_no": None, "after_line": mount_anchor.line_no,
                                     "old": None, "new": text, "reason": "CUDA control node not mounted"})

    # 2. Allow lines, per key family.
    families = list(a.families)
    for family in family_order({entry[0].rule.family for entry in a.stale}):
        if family not in families:
            families.append(family)
    stale_reason = {id(line): reason for line, reason in a.stale}
    for family in families if not a.allow_moot else ():
        _plan_family(a, ct, edit, family, index_of, stale_reason, added_mounts, mount_anchor)

    refusals = []
    if edit.replace or edit.remove or edit.insert:
        touches_existing = bool(edit.replace or edit.remove)
        if not a.nodes_known:
            refusals.append("host NVIDIA device nodes unknown")
        if a.allow_all and not a.allow_moot:
            refusals.append(f"line {a.allow_all[0].line_no} allows all devices ({a.allow_all[0].display!r}); "
                            "not rewriting")
        if a.includes:
            refusals.append("lxc.include (line {}) may hold allow lines pvetune cannot see: move the NVIDIA allow "
                            "lines of the included file into the CT config".format(", ".join(
                                str(line.line_no) for line in a.includes)))
        # A rule LXC cannot parse (the CT does not start); v1 keys on a cgroup2 host are never read by LXC.
        refusals.extend(message for status, message in sources_mod.rule_messages(a) if status == "fail")
        if a.unparsed:
            refusals.append("unparseable line(s) that mention devices, mounts or includes: line {} (pct drops "
                            "them with a warning): correct or remove them".format(
                                ", ".join(str(line.line_no) for line in a.unparsed)))
        if a.unclean:
            refusals.append("NVIDIA-related line(s) with undecodable bytes or control characters: "
                            "line {}".format(", ".join(str(line.line_no) for line in a.unclean)))
        if a.deny_hits:
            refusals.append("deny rule(s) for mounted NVIDIA nodes: line {}; remove them or the mounts they "
                            "deny".format(", ".join(str(line.line_no) for line in a.deny_hits)))
        if touches_existing and (a.unknown_mounts or a.hook_unknown):
            what = ["line %d (%s)" % (line.line_no, line.mount.norm_source) for line in a.unknown_mounts]
            what += ["line %d (hook %s)" % (line.line_no, path) for line, path, _why in a.hook_unknown]
            refusals.append("the nodes of {} cannot be known, so the majors the CT needs are not known".format(
                ", ".join(what)))
        # A missing GPU, nvidiactl or nvidia-modeset node has the fixed major 195; only a missing node with a
        # dynamic major (nvidia-uvm*, nvidia-caps, ...) leaves the majors the CT needs unknown.
        unknown_major = [m for m in a.missing if not _FIXED_MAJOR.match(posixpath.basename(m["source"]))]
        if touches_existing and unknown_major:
            refusals.append("the NVIDIA node(s) of {} do not exist on the host, so the majors the CT needs are not "
                            "known: load the driver that makes them, or remove the line(s)".format(", ".join(
                                "line %d (%s)" % (m["line_no"], m["source"]) for m in unknown_major)))
        if touches_existing and not a.host_majors:
            refusals.append("no NVIDIA driver is registered in /proc/devices (driver not loaded?), so the current "
                            "majors are not known")
        if touches_existing and a.nodes_known and not a.mounts_nvidia:
            refusals.append("the CT mounts no NVIDIA nodes, so the majors it needs are not known: add the "
                            "lxc.mount.entry lines of the nodes it uses")
    return edit, a, refusals + _blocking(a)


def _plan_family(a, ct, edit, family, index_of, stale_reason, added_mounts, mount_anchor):
    lines = [line for line in a.rules if line.rule.family == family]
    stale = [line for line in lines if id(line) in stale_reason]
    kept_rules = [line.rule for line in lines if id(line) not in stale_reason]
    needed = []
    for path in sorted(a.mount_used, key=lambda p: mount_order(a, p)):
        node = a.mount_used[path]
        if not is_covered(kept_rules, node["major"], node["minor"]):
            needed.append(node)
    needed_by_major = {}
    major_order = []
    for node in needed:
        if node["major"] not in needed_by_major:
            major_order.append(node["major"])
        needed_by_major.setdefault(node["major"], []).append(node["minor"])

    # Map stale majors to current majors: recorded names first, then file order.
    old_order = []
    for line in stale:
        if line.rule.major not in old_order:
            old_order.append(line.rule.major)
    targets = [m for m in major_order if m != NVIDIA_MAJOR]
    mapping = {}
    for old in old_order:
        name = a.known.get(old)
        current = a.host_majors.get(name) if name else None
        if current in targets and current not in mapping.values():
            mapping[old] = current
    free = [m for m in targets if m not in mapping.values()]
    for old in old_order:
        if old not in mapping and free:
            mapping[old] = free.pop(0)

    # Replace in place (same key, separator, spacing, granularity, access) or remove.
    created = set()
    new_rules = []   # rules in file order after the edit, for the coverage check
    for line in lines:
        if id(line) not in stale_reason:
            new_rules.append(line.rule)
            continue
        i = index_of[id(line)]
        rule = line.rule
        new_major = mapping.get(rule.major)
        keep_minor = rule.minor is None or (new_major is not None and rule.minor in needed_by_major.get(new_major, []))
        if new_major is None or not keep_minor:
            edit.remove.add(i)
            edit.changes.append({"action": "remove", "line_no": line.line_no, "old": line.display, "new": None,
                                 "reason": stale_reason[id(line)]})
            continue
        start, end = rule.major_span
        value = line.value[:start] + str(new_major) + line.value[end:]
        new_rule = parse_device_rule(value, rule.kind, rule.family)[0]
        if new_rule.identity() in created:
            edit.remove.add(i)
            edit.changes.append({"action": "remove", "line_no": line.line_no, "old": line.display, "new": None,
                                 "reason": "duplicate of a line pvetune rewrote"})
            continue
        created.add(new_rule.identity())
        new_rules.append(new_rule)
        body = line.with_value(value)
        edit.replace[i] = body
        edit.changes.append({"action": "replace", "line_no": line.line_no, "old": line.display,
                             "new": body.decode("utf-8", "replace"),
                             "reason": f"{stale_reason[id(line)]}; current major {new_major} "
                                       f"({a.major_names.get(new_major, '?')})"})

    # Whatever is still not covered is added after the last NVIDIA allow line.
    remaining = [n for n in needed if not is_covered(new_rules, n["major"], n["minor"])]
    if not remaining:
        return
    owned = [line for line in lines if id(line) in a.owned]
    kept = [line for line in owned if index_of[id(line)] not in edit.remove]
    if kept:
        anchor = template = kept[-1]
    elif owned:
        # Only removed stale lines: the new lines take the first one's place and style.
        anchor = template = owned[0]
    else:
        others = [line for line in a.rules if id(line) in a.owned and index_of[id(line)] not in edit.remove]
        anchor = others[-1] if others else None
        template = None
    wildcard = any(line.rule.minor is None for line in owned if line.rule.major != NVIDIA_MAJOR)
    per_minor = any(line.rule.minor is not None for line in owned)
    access = "rwm"
    if template is not None and {"r", "w"} <= template.rule.effective_access:
        access = template.rule.access or "rwm"
    new_values = []   # [(value, reason)]
    seen = {}
    for node in remaining:
        if node["major"] == NVIDIA_MAJOR or (per_minor and not wildcard):
            spec = (node["major"], node["minor"])
        else:
            spec = (node["major"], None)
        if spec in seen:
            seen[spec].append(node)
            continue
        seen[spec] = [node]
        new_values.append((_rule_value(template, spec[0], spec[1], access), seen[spec]))
    if anchor is not None:
        at = index_of[id(anchor)]
        after_line = anchor.line_no
        style = anchor
    else:
        # No allow line at all: after the last NVIDIA mount entry (and any mounts added there).
        at = index_of[id(mount_anchor)]
        after_line = mount_anchor.line_no
        style = mount_anchor
    key = FAMILY_ALLOW_KEY[family]
    lead = style.prefix[:len(style.prefix) - len(style.prefix.lstrip(b" \t"))]
    prefix = lead + key.encode("ascii") + (style.sep or ": ").encode("ascii")
    bucket = edit.insert.setdefault(at, [])
    for value, covered_nodes in new_values:
        body = prefix + value.encode("utf-8")
        bucket.append((body, body.decode("utf-8", "replace")))
        edit.changes.append({"action": "add", "line_no": None, "after_line": after_line, "old": None,
                             "new": body.decode("utf-8", "replace"),
                             "reason": "cover {}".format(", ".join(node_label(n) for n in covered_nodes))})


def _apply(ct, edit):
    out = []   # [body, eol]
    for i, line in enumerate(ct.lines):
        if i not in edit.remove:
            out.append([edit.replace.get(i, line.body), line.eol])
        for body, _origin in edit.insert.get(i, []):
            out.append([body, line.eol if line.eol not in (b"", b"\r") else ct.eol])
    for item in out[:-1]:
        if item[1] in (b"", b"\r"):
            item[1] = ct.eol
    if out and not ct.ends_with_newline:
        out[-1][1] = ct.lines[-1].eol
    return b"".join(body + eol for body, eol in out)


def regenerate(ct, host_majors, host_nodes, known_nvidia_majors=(), char_majors_registered=frozenset(),
               cgroup_version=None, sources=None, _check=True):
    """Rewrite the CT's NVIDIA allow lines/mounts for the current majors.

    Returns ``(new_bytes, changes)``.  ``changes`` lists
    ``{"action": "replace"|"add"|"remove", "line_no", "after_line", "old", "new", "reason"}``;
    when pvetune cannot be certain it returns the original bytes and a single
    ``{"action": "refused", "reason": ...}``.  Arguments as for evaluate_ct().

    Main section only: stale NVIDIA allow lines are replaced in place (same key,
    separator, spacing, access and granularity; per-minor lines only for minors
    the CT mounts), stale lines with no counterpart are removed, coverage still
    missing is added after the last NVIDIA allow line (else after the last NVIDIA
    mount entry), and a CT that mounts /dev/nvidiaN gets the missing
    nvidiactl/nvidia-uvm/nvidia-uvm-tools mounts.  Refused (no change) when a
    change is needed but: host nodes are unknown, an allow-all ``a`` rule or an
    ``lxc.include`` is present, a device rule cannot be parsed, an NVIDIA-related
    line has undecodable bytes, a deny rule takes rw from a mounted NVIDIA node,
    an NVIDIA node the CT mounts is missing on the host (for replacements and
    removals), or the result would not be a fixed point.  Idempotent.
    """
    original = ct.to_bytes()
    edit, analysis, refusals = _plan(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered,
                                     cgroup_version, sources)
    # No edit, but a node the CT gets is stale where it is made: say what to do (refused), not "nothing to do".
    if not edit.changes and not _blocking(analysis):
        return original, []
    if refusals:
        return original, [{"action": "refused", "line_no": None, "after_line": None, "old": None, "new": None,
                           "reason": "; ".join(refusals)}]
    new = _apply(ct, edit)
    for change in edit.changes:
        change.setdefault("after_line", None)
    if _check:
        again, more = regenerate(parse_ct_config(new, ct.path), host_majors, host_nodes, known_nvidia_majors,
                                 char_majors_registered, cgroup_version, sources, _check=False)
        if more or again != new:
            return original, [{"action": "refused", "line_no": None, "after_line": None, "old": None, "new": None,
                               "reason": "rewrite would not converge ({})".format("; ".join(
                                   c.get("reason") or "" for c in more))}]
    return new, edit.changes


def diff_lines(changes):
    """Human-readable ``-old``/``+new`` lines for a changes list."""
    out = []
    for change in changes:
        if change["action"] == "refused":
            out.append("! {}".format(change["reason"]))
            continue
        where = change["line_no"] if change["line_no"] is not None else "after {}".format(change.get("after_line"))
        if change["old"] is not None:
            out.append("-{}: {}".format(where, change["old"]))
        if change["new"] is not None:
            out.append("+{}: {}".format(where, change["new"]))
    return out
