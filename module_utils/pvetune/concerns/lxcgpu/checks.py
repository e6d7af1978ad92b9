# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LXC GPU devices concern: reader of the CT configs, analysis of their NVIDIA entries, the ``lxc.gpu_devices`` check.

The nvidia-uvm (and nvidia-caps, nvidia-nvlink, ...) char majors are dynamic and can change across reboots and
driver updates; a CT whose allow lines name an old major still starts, but CUDA fails inside it.  ``read_lxc``
lists the CT configs (``list_cts``, the one listing the fix and the boot helper use too) and returns them unjudged;
``check_lxc`` runs ``evaluate_ct`` on each against the host's NVIDIA state (facts section "nvidia").

Ownership of an allow line (type ``c``, numeric major), first rule that applies:
  1. major 195 (the fixed NVIDIA major): NVIDIA's, and never stale;
  2. a current NVIDIA major (``host_majors`` / the majors of /dev/nvidia* nodes);
  3. a major registered to another driver (``char_majors_registered``): not NVIDIA's, left alone (warned about when
     it was recorded as NVIDIA's);
  4. a major recorded as NVIDIA's by an earlier run (``known_nvidia_majors``, from STATE_FILE);
  5. a major registered to no driver at all while the CT mounts NVIDIA nodes, provided it lies in the kernel's
     dynamic char-major ranges and the registered set is known (non-empty).
An NVIDIA-owned line is *stale* when its major is not 195 and not the current major of any NVIDIA node the CT uses
(lxc.mount.entry sources and devN: entries).  Everything else (Coral, /dev/dri, nvram, ...) is never touched.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.concerns.lxcgpu import sources as sources_mod
from ansible.module_utils.pvetune.concerns.lxcgpu.sources import ct_config_path, is_nvidia_path
from ansible.module_utils.pvetune.concerns.lxcgpu.state import known_majors, load_state
from ansible.module_utils.pvetune.formats.ct_config import (
    DEV_KEY,
    DEVICE_KEYS,
    FAMILY_ALLOW_KEY,
    KEY_INCLUDE,
    KEY_MOUNT,
    ct_config_name,
    family_order,
    is_covered,
    parse_ct_config,
    pve_bool,
)
from ansible.module_utils.pvetune.formats.proc_devices import DYNAMIC_CHAR_MAJORS, NVIDIA_MAJOR, char_table

LXC_DIR = "/etc/pve/lxc"
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")

_GPU_NODE = re.compile(r"^/dev/nvidia[0-9]+$")


def _nvidia_relevant(line):
    """Whether a line could matter for NVIDIA passthrough (used to refuse on unreadable bytes)."""
    display = line.display.lower()
    if line.kind == "kv":
        if line.key in DEVICE_KEYS or line.key == KEY_INCLUDE or line.key.startswith("lxc.hook."):
            return True
        if line.key == KEY_MOUNT or DEV_KEY.match(line.key):
            return "nvidia" in display
        return False
    if line.kind == "garbage":
        return any(word in display for word in ("nvidia", "cgroup", "devices.", "lxc.mount", "lxc.include"))
    return False


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------
def _normalize_known(known):
    """known_nvidia_majors -> {major: name or None}."""
    out = {}
    if not known:
        return out
    if isinstance(known, dict):
        for key, value in known.items():
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                out[int(key)] = value if isinstance(value, str) else None
            elif isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                out[int(value)] = key
        return out
    for item in known:
        if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
            out[int(item)] = None
    return out


def _normalize_registered(registered):
    """char_majors_registered -> {major: [names]} (names may be empty)."""
    if not registered:
        return {}
    table = char_table(registered) if isinstance(registered, dict) else registered
    if isinstance(table, dict):
        return {int(k): list(v) if isinstance(v, (list, tuple)) else [] for k, v in table.items()}
    return {int(k): [] for k in table}


def node_label(node):
    return "{} ({}:{})".format(node["path"], node["major"], node["minor"])


class _Analysis:
    pass


def started_uncovered(started, ctid, ct, host_majors, host_nodes, devices, cgroup_version, sources=None):
    """Nodes CT ``ct`` uses, with their current majors, that the device rules of ``started`` (the LXC config of its
    last start, sources.read_started_config) do not cover: ["path (M:m)"]; None when either is unknown."""
    if host_nodes is None or started is None:
        return None
    running = parse_ct_config(started, sources_mod.STARTED_CONFIG % ctid)
    analysis = analyze(ct, host_majors, host_nodes, {}, devices, cgroup_version, sources)
    used = dict(analysis.mount_used, **analysis.dev_used)
    rules = [line.rule for line in running.main_lines()
             if line.kind == "kv" and line.key in DEVICE_KEYS and line.rule is not None]
    family = "v%d" % cgroup_version if cgroup_version in (1, 2) else (
        "v2" if any(r.family == "v2" for r in rules) or not rules else "v1")
    rules = [r for r in rules if r.family == family]
    return ["%s (%d:%d)" % (path, used[path]["major"], used[path]["minor"]) for path in sorted(used)
            if not is_covered(rules, used[path]["major"], used[path]["minor"])]


def analyze(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered, cgroup_version, sources=None):
    a = _Analysis()
    sources = sources or {}
    a.known = _normalize_known(known_nvidia_majors)
    a.registered = _normalize_registered(char_majors_registered)
    host_majors = dict(host_majors or {})
    a.host_majors = host_majors
    a.nodes_known = host_nodes is not None
    nodes = list(host_nodes.values()) if isinstance(host_nodes, dict) else list(host_nodes or [])
    # Nodes behind the CT's custom sources (lxcgpu_sources.read_ct_sources): looked up like host nodes, but their
    # majors are not current NVIDIA majors (a node made with mknod keeps the major it was made with).
    custom = [n for n in sources.get("nodes") or () if not is_nvidia_path(n["path"])]
    a.unknown_sources = set(sources.get("unknown") or ())
    a.char_nodes = {n["path"]: n for n in nodes + custom if n.get("type") == "c" and n.get("major") is not None}
    a.dirs = {n["path"] for n in nodes + custom if n.get("type") == "d"}
    a.current_nvidia = {int(m) for m in host_majors.values()}
    a.current_nvidia |= {n["major"] for n in a.char_nodes.values() if is_nvidia_path(n["path"])}
    a.major_names = {}
    for name, major in host_majors.items():
        a.major_names.setdefault(int(major), name)
    for major, names in a.registered.items():
        for name in names:
            if name.startswith("nvidia"):
                a.current_nvidia.add(major)
                a.major_names.setdefault(major, name)

    main = ct.main_lines()
    a.main = main
    a.rule_lines = [line for line in main if line.kind == "kv" and line.key in DEVICE_KEYS]
    a.bad_rule_lines = [line for line in a.rule_lines if line.rule is None]
    a.rules = [line for line in a.rule_lines if line.rule is not None]
    for line in a.rules:
        if line.rule.path is not None:
            sources_mod.resolve_path_rule(line.rule, a.char_nodes)
    a.allow_all = [line for line in a.rules if line.rule.kind == "allow" and line.rule.all]
    mounts = [line for line in main if line.mount is not None and sources_mod.nvidia_mount(line.mount)]
    # LXC skips an absolute target outside the CT's rootfs: that entry gives the CT nothing.
    a.ignored_mounts = [line for line in mounts if sources_mod.ignored_target(line.mount)]
    a.nv_mounts = [line for line in mounts if line not in a.ignored_mounts]
    a.nv_devs = [line for line in main if line.dev is not None and is_nvidia_path(line.dev["path"])]
    a.includes = [line for line in main if line.key == KEY_INCLUDE]
    a.hook_texts = sources.get("hooks") or {}
    a.hook_made, a.hook_unknown, a.hooks = sources_mod.hook_analysis(ct, a.hook_texts)
    a.hook_literal = [n for n in a.hook_made if n["literal"]]   # nodes with a major written into the script
    a.families_present = {line.rule.family for line in a.rules} | {
        DEVICE_KEYS[line.key][0] for line in a.bad_rule_lines}
    # Lines we cannot read with certainty but which matter for NVIDIA.
    a.unclean = [line for line in main if not line.clean and _nvidia_relevant(line)]
    # Unparseable lines that look like device rules, mounts or includes: Proxmox drops them with a warning,
    # but what the author meant cannot be known, so they block a rewrite like an unparseable rule does.
    a.unparsed = [line for line in main if line.kind == "garbage" and line.clean and _nvidia_relevant(line)]

    # Nodes the CT uses.
    a.mount_used = {}   # path -> node (bound into the CT by lxc.mount.entry)
    a.added_mounts = []  # control nodes regenerate() adds
    a.dev_used = {}     # path -> node (devN:, Proxmox grants these itself)
    a.missing = []
    a.stale_nodes = []   # custom sources whose node is not the host's node of the same name
    a.unknown_mounts = [line for line in a.nv_mounts if line.mount.norm_source in a.unknown_sources]
    for line in a.nv_mounts if a.nodes_known else ():
        if line in a.unknown_mounts:
            continue
        found = _nodes_for_source(a, line.mount.norm_source)
        stale = sources_mod.stale_custom(a, line, found) if found and not line.mount.norm_source.startswith(
            "/dev/") else []
        a.stale_nodes.extend(stale)
        if found is None:
            optional = line.mount.optional
            a.missing.append({"line_no": line.line_no, "key": line.key, "source": line.mount.norm_source,
                              "optional": optional, "aborts_start": not optional, "text": line.display})
            continue
        stale_paths = {n["source"] for n in stale}
        for node in found:
            if node["path"] not in stale_paths:
                a.mount_used.setdefault(node["path"], node)
    # Nodes a hook makes with a literal major: what the CT gets at start (stale when not the host's node's).
    a.stale_hook_nodes = []
    for node in a.hook_literal if a.nodes_known else ():
        host = a.char_nodes.get(node["ct_path"])
        if host is not None and (host["major"], host["minor"]) != (node["major"], node["minor"]):
            a.stale_hook_nodes.append(dict(node, host_major=host["major"], host_minor=host["minor"]))
        elif node["minor"] is not None:
            a.mount_used.setdefault(node["ct_path"], {"path": node["ct_path"], "type": "c", "major": node["major"],
                                                      "minor": node["minor"]})
    for line in a.nv_devs if a.nodes_known else ():
        found = _nodes_for_source(a, posixpath.normpath(line.dev["path"]))
        if not found:
            a.missing.append({"line_no": line.line_no, "key": line.key,
                              "source": posixpath.normpath(line.dev["path"]), "optional": False,
                              "aborts_start": True, "text": line.display})
            continue
        for node in found:
            a.dev_used.setdefault(node["path"], node)
    a.mounts_nvidia = bool(a.nv_mounts or a.nv_devs or a.hook_literal)
    a.usage_known = a.mounts_nvidia and a.nodes_known   # we know which NVIDIA majors the CT needs
    a.used_majors = {n["major"] for n in a.mount_used.values()} | {n["major"] for n in a.dev_used.values()}
    # CUDA control nodes a CT that mounts a GPU needs but does not mount (regenerate() adds them).
    a.implied_controls = []
    if a.nodes_known and any(_GPU_NODE.match(ct_config_path(line)) for line in a.nv_mounts):
        have = {ct_config_path(line) for line in a.nv_mounts} | set(a.dev_used) | {n["ct_path"] for n in a.hook_made}
        a.implied_controls = [p for p in CONTROL_NODES if p in a.char_nodes and p not in have]
    a.used_majors |= {a.char_nodes[p]["major"] for p in a.implied_controls}
    a.uses_nvidia = bool(a.mounts_nvidia or a.hooks or a.ignored_mounts or any(
        line.rule.type == "c" and line.rule.major == NVIDIA_MAJOR for line in a.rules))

    # Ownership and staleness of allow lines.
    a.owned = {}     # id(line) -> reason
    a.stale = []     # [(line, reason)]
    a.foreign = []   # [(line, message)] registered to another driver, recorded as NVIDIA's before
    for line in a.rules:
        rule = line.rule
        if rule.kind != "allow" or rule.type != "c" or rule.major is None or rule.path is not None:
            continue
        reason = _ownership(a, rule.major)
        if reason is None:
            if (rule.major in a.known and rule.major in a.registered and a.mounts_nvidia
                    and rule.major not in a.current_nvidia):
                names = ", ".join(a.registered[rule.major]) or "another driver"
                recorded = a.known[rule.major] or "earlier run"
                message = (f"major {rule.major} was recorded as NVIDIA's ({recorded}) but is now registered to "
                           f"{names}; the CT is granted that device")
                a.foreign.append((line, message))
            continue
        a.owned[id(line)] = reason
        if rule.major == NVIDIA_MAJOR:
            continue
        if a.usage_known:
            if rule.major not in a.used_majors:
                a.stale.append((line, f"{reason}; no NVIDIA node the CT uses has major {rule.major}{_uses_text(a)}"))
        elif rule.major not in a.current_nvidia:
            a.stale.append((line, f"{reason}; not the major of any current NVIDIA node"))
    a.stale_ids = {id(entry[0]) for entry in a.stale}

    # Which cgroup key families must cover the nodes.
    if cgroup_version in (2, "2", "v2"):
        a.families = ["v2"]
    elif cgroup_version in (1, "1", "v1"):
        a.families = ["v1"]
    else:
        a.families = family_order(a.families_present) or ["v2"]
    a.uncovered = []
    for family in a.families:
        rules = [line.rule for line in a.rules if line.rule.family == family]
        for path in sorted(a.mount_used, key=lambda p: mount_order(a, p)):
            node = a.mount_used[path]
            if not is_covered(rules, node["major"], node["minor"]):
                a.uncovered.append({"node": path, "major": node["major"], "minor": node["minor"],
                                    "key": FAMILY_ALLOW_KEY[family]})
    a.deny_hits = [line for line in a.rules if line.rule.kind == "deny" and not line.rule.all
                   and line.rule.effective_access & {"r", "w"}
                   and any(line.rule.matches(n["major"], n["minor"]) for n in a.mount_used.values())]
    # When the device list is allow-all, LXC skips every allow rule (cgroup2_devices.c: in deny-list mode only deny
    # rules count): stale or missing allow lines then cost nothing, and rewriting them would change nothing.
    a.allow_moot = _allow_moot(ct, a)
    a.moot_stale = a.stale if a.allow_moot else []
    if a.allow_moot:
        a.stale, a.stale_ids, a.uncovered = [], set(), []
    return a


def _allow_moot(ct, a):
    """Why the CT's allow lines have no effect, or None (the list is an allow-list)."""
    flag = [line.value for line in ct.main_lines() if line.kind == "kv" and line.key == "unprivileged"]
    if flag and pve_bool(flag[-1]):
        return ("unprivileged CT: Proxmox VE 7+ starts its device list as allow-all (lxc-pve-userns.conf: "
                "lxc.cgroup2.devices.allow = a), so LXC skips its allow lines")
    bare = [line for line in a.rules if line.rule.family in a.families and line.rule.all
            and line.rule.access == "" and line.rule.major is None]
    if bare and bare[-1].rule.kind == "allow":
        return "line %d resets the device list to allow-all, so LXC skips the allow lines" % bare[-1].line_no
    return None


def _uses_text(a):
    majors = sorted(a.used_majors - {NVIDIA_MAJOR})
    if not majors:
        return ""
    return " (uses {})".format(", ".join(f"{m}={a.major_names.get(m, '?')}" for m in majors))


def mount_order(a, path):
    """Sort key: the order of the CT's NVIDIA mount entries (then mounts pvetune adds)."""
    sources = [line.mount.norm_source for line in a.nv_mounts] + a.added_mounts
    for index, source in enumerate(sources):
        if path == source or path.startswith(source + "/"):
            return (index, path)
    return (len(sources), path)


def _nodes_for_source(a, source):
    """Host char nodes a source path stands for; None when it does not exist."""
    node = a.char_nodes.get(source)
    if node is not None:
        return [node]
    under = [n for p, n in sorted(a.char_nodes.items()) if p.startswith(source + "/")]
    if under or source in a.dirs:
        return under
    return None


def _ownership(a, major):
    """Why an allow line with this char major is NVIDIA's, or None."""
    if major == NVIDIA_MAJOR:
        return "fixed NVIDIA major 195"
    if major in a.current_nvidia:
        return "current NVIDIA major ({})".format(a.major_names.get(major, "NVIDIA device node"))
    if major in a.registered:
        return None
    if major in a.known:
        return "recorded as NVIDIA's%s by an earlier run" % (
            f" ({a.known[major]})" if a.known[major] else "")
    if a.registered and a.mounts_nvidia and major in DYNAMIC_CHAR_MAJORS:
        return "registered to no driver while the CT mounts NVIDIA nodes (stale dynamic major)"
    return None


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------
def evaluate_ct(ct, host_majors, host_nodes, known_nvidia_majors=(), char_majors_registered=frozenset(),
                cgroup_version=None, sources=None):
    """Audit one CT's NVIDIA passthrough against the host's current majors/nodes.

    ``host_majors``: nvidia_majors() output.  ``host_nodes``: parse_ls_dev() /
    stat_dev_nodes() nodes (None = unknown).  ``known_nvidia_majors``: majors
    recorded as NVIDIA's before (iterable, or {major: name}).
    ``char_majors_registered``: every registered char major (iterable, or the
    parse_proc_devices() output / its "char" table); empty = unknown.
    ``cgroup_version``: 2, 1 or None (unknown: every key family present must cover).
    ``sources``: lxcgpu_sources.read_ct_sources() of this CT (custom node directories, hook scripts).
    """
    a = analyze(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered, cgroup_version, sources)
    messages = []
    result = {
        "ctid": ct.ctid,
        "uses_nvidia": a.uses_nvidia,
        "status": "pass",
        "stale_lines": [{"line_no": line.line_no, "text": line.display, "major": line.rule.major,
                         "key": line.key, "reason": reason} for line, reason in a.stale],
        "uncovered": a.uncovered,
        "missing_sources": a.missing,
        "dev_entries": [{"line_no": line.line_no, "key": line.key, "path": line.dev["path"],
                         "present": _nodes_for_source(a, posixpath.normpath(line.dev["path"])) is not None}
                        for line in a.nv_devs],
        "missing_control_nodes": list(a.implied_controls),
        "cgroup_keys": {"v2": "v2" in a.families_present, "v1": "v1" in a.families_present},
        "foreign_lines": [{"line_no": line.line_no, "text": line.display, "major": line.rule.major,
                           "message": msg} for line, msg in a.foreign],
        "parse_warnings": [w for w in ct.warnings if w["section"] is None],
        "stale_nodes": a.stale_nodes + a.stale_hook_nodes,
        "messages": messages,
    }
    if not a.uses_nvidia:
        result["status"] = "skip"
        messages.append("CT passes no NVIDIA devices")
        return result
    if a.hooks and not a.mounts_nvidia and not a.rules:
        result["status"] = "skip"
        where = ", ".join(f"line {line.line_no}" for line in a.hooks)
        messages.append(f"NVIDIA devices come from an LXC hook ({where}); the hook sets up nodes and cgroup "
                        "rules at start")
        return result
    fail = warn = False
    if not a.nodes_known:
        messages.append("host NVIDIA device nodes unknown; coverage not checked")
        warn = True
    for line, reason in a.stale:
        messages.append(f"line {line.line_no} {line.display!r}: stale NVIDIA allow line: {reason}")
        fail = True
    if a.stale and a.missing:
        messages.append("some NVIDIA nodes the CT mounts are missing on the host, so the majors it needs "
                        "are not fully known; pvetune will not rewrite stale lines until they exist")
    if a.uncovered:
        what = ", ".join("{} {}".format(u["key"], node_label({"path": u["node"], "major": u["major"],
                                                              "minor": u["minor"]})) for u in a.uncovered)
        if a.includes:
            messages.append(f"not covered by this file (lxc.include may cover them): {what}")
            warn = True
        else:
            messages.append(f"NVIDIA nodes mounted but not allowed (rw): {what}")
            fail = True
    for missing in a.missing:
        if missing["aborts_start"]:
            messages.append(f"line {missing['line_no']}: {missing['source']} does not exist on the host and is "
                            "not optional: the CT will not start")
            fail = True
        else:
            relative = "" if missing["source"].startswith("/") else "; a bind source must be an absolute host path"
            messages.append(f"line {missing['line_no']}: {missing['source']} does not exist on the host "
                            f"(optional: the CT starts without it{relative})")
            warn = True
    if a.allow_all and not (a.allow_moot or "").startswith("unprivileged"):
        messages.append(f"line {a.allow_all[0].line_no}: allow-all device rule {a.allow_all[0].display!r}; "
                        "every device is allowed")
        warn = True
    if a.moot_stale:
        messages.append("%s: the old majors of line %s do no harm" % (
            a.allow_moot, ", ".join(str(line.line_no) for line, _reason in a.moot_stale)))
    for status, message in sources_mod.source_messages(a) + sources_mod.rule_messages(a):
        messages.append(message)
        fail = fail or status == "fail"
        warn = warn or status == "warn"
    for line in [x for x in a.unclean + a.unparsed if x not in a.bad_rule_lines]:
        messages.append(f"line {line.line_no}: cannot be read with certainty: {line.problem or 'unclean'}")
        warn = True
    for line in a.deny_hits:
        messages.append(f"line {line.line_no} {line.display!r} denies a mounted NVIDIA node")
        warn = True
    for line, msg in a.foreign:
        messages.append(f"line {line.line_no}: {msg}")
        warn = True
    if result["cgroup_keys"]["v1"]:
        if result["cgroup_keys"]["v2"]:
            messages.append("both lxc.cgroup2.* and lxc.cgroup.* device keys present; "
                            "Proxmox VE 7+ (cgroup v2) uses only lxc.cgroup2.*")
        else:
            messages.append("only cgroup v1 device keys (lxc.cgroup.devices.*); Proxmox VE 7+ (cgroup v2) "
                            "ignores them")
            warn = True
    if not a.mounts_nvidia:
        messages.append("allows NVIDIA devices but mounts no NVIDIA nodes (nodes created in the CT or by a hook?)")
    if a.implied_controls:
        messages.append("mounts a GPU but not %s (CUDA needs them)" % ", ".join(a.implied_controls))
        warn = True
    if a.mounts_nvidia and not a.nv_mounts:
        messages.append("NVIDIA devices passed with devN: entries only; Proxmox grants their current "
                        "majors at CT start")
    # deny-write: pct grants r and denies w (LXC.pm update_lxc_config); CUDA and NVML open the nodes read-write.
    for line in a.nv_devs:
        if pve_bool(line.dev["options"].get("deny-write")):
            messages.append(f"line {line.line_no}: {line.key} has deny-write, so the CT may not write "
                            f"{line.dev['path']} (CUDA opens NVIDIA nodes read-write): remove deny-write")
            warn = True
    result["status"] = "fail" if fail else ("warn" if warn else "pass")
    return result


def list_cts(fsroot, base):
    """``({ctid: host path}, [skipped])``: the CT configs in ``base`` and why other ``*.conf`` files are none.

    The one listing of CT configs (audit, fix, boot helper, health check): ct_config.ct_config_name() decides.
    ``skipped`` is ``[{"name", "path", "reason"}]``.
    """
    found, skipped = {}, []
    for name in sorted(fsroot.listdir(base)):
        ctid, why = ct_config_name(name)
        if ctid is not None:
            found[ctid] = "%s/%s" % (base, name)
        elif why:
            skipped.append({"name": name, "path": "%s/%s" % (base, name), "reason": why})
    return found, skipped


def read_lxc(ctx):
    """Reader of the facts section "lxc": the CT configs as read, not judged (check_lxc judges them).

    Keys: ``present``, ``cts`` (``[{"ctid", "path", "config", "sources", "passes_nvidia", "started_config"}]``,
    config texts decoded with surrogateescape so that parse_ct_config() gets the bytes back; started_config the LXC
    config of a GPU CT's last start or None; ``error`` instead of ``config`` when unreadable), ``skipped`` (list_cts),
    ``host_majors``, ``known_majors`` ({major: name}, from STATE_FILE), ``cgroup_version``, ``evidence``.
    Raises FsError when the NVIDIA device state (section "nvidia") is unavailable.
    """
    fsroot = ctx.fsroot
    if not ctx.policy.get("lxc_check", True):
        return {"present": None, "cts": [], "skipped": [], "evidence": ["lxc_check is off in the policy"]}
    out = {"present": fsroot.isdir(LXC_DIR), "cts": [], "skipped": [], "evidence": []}
    if not out["present"]:
        return out
    nvidia = ctx.facts.get("nvidia") or {}
    if nvidia.get("majors") is None:
        raise FsError("/proc/devices", "NVIDIA device state unavailable: %s"
                      % (nvidia.get("devices_error") or nvidia.get("error")))
    state, state_error = load_state(fsroot)
    if state_error:
        out["evidence"].append("%s; ignored" % state_error)
    out["known_majors"] = known_majors(state)
    out["host_majors"] = nvidia["majors"]
    out["cgroup_version"] = sources_mod.cgroup_version_of(fsroot)
    available, out["skipped"] = list_cts(fsroot, LXC_DIR)
    for ctid, path in sorted(available.items()):
        try:
            data = fsroot.read_bytes(path)
            parsed = parse_ct_config(data, path)
            gpu = passes_nvidia(parsed)
            out["cts"].append({"ctid": str(ctid), "path": path, "config": data.decode("utf-8", "surrogateescape"),
                               "sources": sources_mod.read_ct_sources(fsroot, parsed), "passes_nvidia": gpu,
                               "started_config": sources_mod.read_started_config(fsroot, ctid) if gpu else None})
        except FsError as exc:
            out["cts"].append({"ctid": str(ctid), "path": path, "error": "%s: %s" % (exc.path, exc.reason)})
    out["evidence"].append("%s/*.conf: %d CT configs" % (LXC_DIR, len(available)))
    out["evidence"].extend("skipped %s" % entry["reason"] for entry in out["skipped"])
    return out


def passes_nvidia(ct):
    """Whether the CT is set up for NVIDIA devices (mounts, devN entries, 195 allow lines, hooks)."""
    return bool(evaluate_ct(ct, {}, None)["uses_nvidia"])


def ct_verdicts(facts):
    """evaluate_ct() of every CT in the facts (with ``path``); an unreadable config is an ``error`` verdict."""
    lxc = facts.get("lxc") or {}
    nvidia = facts.get("nvidia") or {}
    out = []
    for ct in lxc.get("cts") or []:
        if ct.get("error"):
            out.append({"ctid": ct["ctid"], "path": ct["path"], "uses_nvidia": True, "status": "error",
                        "messages": [ct["error"]]})
            continue
        parsed = parse_ct_config(ct["config"], ct["path"])
        res = evaluate_ct(parsed, lxc.get("host_majors"), nvidia.get("nodes"),
                          known_nvidia_majors=lxc.get("known_majors") or {},
                          char_majors_registered=nvidia.get("devices") or {},
                          cgroup_version=lxc.get("cgroup_version"), sources=ct.get("sources"))
        res["path"] = ct["path"]
        if res["status"] == "pass" and ct.get("started_config") is not None:
            res["started_uncovered"] = started_uncovered(
                ct["started_config"], ct["ctid"], parsed, lxc.get("host_majors"), nvidia.get("nodes"),
                nvidia.get("devices") or {}, lxc.get("cgroup_version"), ct.get("sources"))
        out.append(res)
    return out


def check_lxc(facts, policy):
    cid = "lxc.gpu_devices"
    if not policy["lxc_check"]:
        return make_result(cid, policy, "skip", None, "lxc_check is off in the policy")
    err = section_error(facts, "lxc")
    if err:
        return make_result(cid, policy, "error", None, err)
    lxc = facts.get("lxc") or {}
    ev = list(lxc.get("evidence", []))
    if not lxc.get("present"):
        return make_result(cid, policy, "skip", None, "no /etc/pve/lxc directory (not a Proxmox VE node?)", evidence=ev)
    cts = ct_verdicts(facts)
    gpu_cts = [c for c in cts if c.get("uses_nvidia")]
    if not gpu_cts:
        return make_result(cid, policy, "skip", "%d CTs, none passes NVIDIA devices" % len(cts),
                           "no CT config passes NVIDIA devices", evidence=ev)
    running = set() if section_error(facts, "ct_runtime") else {
        c["ctid"] for c in (facts.get("ct_runtime") or {}).get("cts") or () if c.get("running")}
    items = []
    for ct in gpu_cts:
        item = {"name": "CT %s" % ct["ctid"], "status": ct["status"],
                "current": "; ".join(ct.get("messages") or []) or "allow lines cover the current majors",
                "expected": "allow lines for the current majors of every NVIDIA node the CT uses",
                "message": ct.get("path", "")}
        if ct.get("started_uncovered") and ct["ctid"] in running:
            # Fixed in the config, not in the running CT: the same in every run until the CT restarts.
            item.update(status="pending", current="runs with the device rules of its last start (%s), which do not "
                        "cover %s: restart it (pct reboot %s)" % (sources_mod.STARTED_CONFIG % ct["ctid"],
                                                                  ", ".join(ct["started_uncovered"]), ct["ctid"]))
        items.append(item)
    bad = [i for i in items if i["status"] in ("fail", "error")]
    warns = [i for i in items if i["status"] == "warn"]
    waiting = [i for i in items if i["status"] == "pending"]
    majors = lxc.get("host_majors") or {}
    current = "host majors: %s" % ", ".join("%s=%s" % kv for kv in sorted(majors.items()))
    if bad:
        return make_result(cid, policy, "fail" if any(i["status"] == "fail" for i in bad) else "error", current,
                           "%s: %s" % (", ".join(i["name"] for i in bad), " | ".join(i["current"] for i in bad)),
                           items, ev)
    if waiting or warns:
        return make_result(cid, policy, "pending" if waiting else "warn", current,
                           " | ".join("%s: %s" % (i["name"], i["current"]) for i in waiting + warns), items, ev)
    return make_result(cid, policy, "pass", current, "%d GPU CTs allow the current NVIDIA majors" % len(gpu_cts),
                       items, ev)


SECTIONS = (("lxc", read_lxc),)
CHECKS = {"lxc.gpu_devices": check_lxc}
