"""The variables pvetune's playbooks and roles read, and where roles/*/meta/argument_specs.yml documents them.

One reader for the playbook tests and the generated reference (scripts/gen_docs.py writes docs/variables.md):

- ``scan()`` walks every play of playbooks/*.yml the way Ansible runs it: plays (``vars``, ``vars_files``), task
  lists, blocks, ``import_tasks``, roles (``roles:``, ``import_role``, ``include_role`` with ``tasks_from``,
  also a looped one) with their defaults, and every role's own ``tasks/main.yml`` for a role used on its own.
  A name a template reads is an *input* unless the play, block, task or role call defines it around the read
  (``vars``), a task sets it (``register``, ``set_fact``) or Ansible provides it.
- ``undocumented()`` and ``role_gaps()`` say which inputs no argument spec (or not the reading role's own)
  documents; ``render()`` is docs/variables.md.

Jinja is parsed with jinja2's own parser (``referenced``), so a name inside a filter chain or a condition counts.
"""

import json
import os
import re

import jinja2
import yaml
from jinja2 import meta

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(TOP, "docs", "variables.md")
# What Ansible itself provides besides the ansible_* variables (magic variables, lookups, the loop variable).
ANSIBLE_NAMES = {"inventory_hostname", "hostvars", "playbook_dir", "inventory_dir", "role_path", "groups",
                 "group_names", "item", "omit", "lookup", "query", "q", "now", "range", "dict"}
CONDITIONALS = ("when", "failed_when", "changed_when", "until", "that")   # bare expressions, not templates
TASK_LISTS = ("pre_tasks", "roles", "tasks", "post_tasks", "handlers")
BLOCK_KEYS = ("block", "rescue", "always")
IMPORT_TASKS = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks", "import_tasks", "include_tasks")
IMPORT_PLAYBOOK = ("ansible.builtin.import_playbook", "import_playbook")
IMPORT_ROLE = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


class _Any(dict):
    """Every filter and test name exists: the names Ansible adds (bool, to_json, skipped) are not the question."""

    def __contains__(self, name):
        return True

    def get(self, name, default=None):
        return dict.get(self, name, lambda value, *args, **kwargs: value)


ENV = jinja2.Environment()
ENV.filters, ENV.tests = _Any(ENV.filters), _Any(ENV.tests)


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def referenced(value, bare=False):
    """The root names the Jinja in ``value`` reads (under a conditional key, a string is a bare expression)."""
    names = set()
    if isinstance(value, dict):
        for key, item in value.items():
            names |= referenced(item, bare or key in CONDITIONALS)
        return names
    for text in strings(value):
        if bare and "{{" not in text:
            text = "{{ %s }}" % text
        if "{{" in text or "{%" in text:
            names |= meta.find_undeclared_variables(ENV.parse(text))
    return names


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _rel(path, top):
    return os.path.relpath(path, top)


class Scan:
    """What the walk found: ``reads`` [(name, playbook or None, role or None, file, kind)] of names not defined
    around the read (kind ``read``: a template reads it; ``declared``: a role default names it; ``default``: a role
    default's value reads it; the last two count for the specs, not as the playbook reading it), ``defined``
    (names tasks register or set), ``passed`` [(role, name, file)] (the vars of a role call) and ``via``
    [(name, playbook, default)] (``name`` is read when the role default ``default`` is)."""

    def __init__(self, top):
        self.top = top
        self.reads, self.defined, self.passed, self.via = [], set(), [], []

    def inputs(self, kinds=("read", "declared", "default")):
        """(name, playbook, role, file) of the reads of names that come from the inventory, -e or a role default
        (a role default is one even where a task sets it again)."""
        return [r[:4] for r in self.reads if r[4] in kinds and (r[4] == "declared" or (
            r[0] not in self.defined | ANSIBLE_NAMES and not r[0].startswith("ansible_")))]

    def playbooks(self):
        """{name: {playbook}}: the playbooks that read ``name`` from the inventory or -e, themselves, through
        their roles or through the role default whose value reads it."""
        out = {}
        for name, playbook, _role, _path in self.inputs(kinds=("read",)):
            if playbook:
                out.setdefault(name, set()).add(playbook)
        for name, playbook, key in self.via:
            if playbook in out.get(key, ()) and name not in self.defined | ANSIBLE_NAMES:
                out.setdefault(name, set()).add(playbook)
        return out

    # The walk. ``where`` is (playbook, role, file); ``scope`` the names defined around the node.
    def read(self, value, scope, where, kind="read"):
        for name in sorted(referenced(value) - scope):
            self.reads.append((name,) + where + (kind,))

    def tasks(self, tasks, scope, where, depth=0):
        for task in tasks or ():
            self.task(task, scope, where, depth)

    def task(self, task, scope, where, depth):
        here = scope | set(task.get("vars") or {}) | {(task.get("loop_control") or {}).get("loop_var", "item")}
        self.defined |= {task.get("register")} - {None}
        for key in SET_FACT:
            self.defined |= set(task.get(key) or {}) - {"cacheable"}
        for key in BLOCK_KEYS:
            self.tasks(task.get(key), here, where, depth)
        self.read({k: v for k, v in task.items() if k not in BLOCK_KEYS + ("name", "tags")}, here, where)
        playbook, role, path = where
        for key in IMPORT_TASKS:
            if key in task:
                target = os.path.join(os.path.dirname(os.path.join(self.top, path)), task[key])
                self.tasks(load(target), here, (playbook, role, _rel(target, self.top)), depth + 1)
        for key in IMPORT_ROLE:
            if key in task:
                spec = task[key]
                entries = spec.get("tasks_from", "main")
                entries = task.get("loop", []) if "{{" in entries else [entries]
                for entry in entries:
                    self.role(spec["name"], entry, here, set(task.get("vars") or {}), (playbook, path), depth + 1)

    def role(self, name, entry, scope, passed, caller, depth=0):
        """Role ``name`` from tasks/<entry>, called with ``passed`` (its call's vars) inside ``scope``."""
        if depth > 20:
            raise ValueError("role %s: imports nest more than 20 deep" % name)
        base = os.path.join(self.top, "roles", name)
        self.passed += [(name, var, caller[1]) for var in sorted(passed)]
        defaults_path = os.path.join(base, "defaults", "main.yml")
        defaults = (load(defaults_path) or {}) if os.path.exists(defaults_path) else {}
        where = (caller[0], name, _rel(defaults_path, self.top))
        self.reads += [(var,) + where + ("declared",) for var in sorted(defaults)]   # -e overrides a default
        for key, value in sorted(defaults.items()):
            for var in sorted(referenced(value) - scope - passed):
                self.reads.append((var,) + where + ("default",))
                self.via.append((var, caller[0], key))   # read whenever the default ``key`` is read
        entry = entry if entry.endswith((".yml", ".yaml")) else entry + ".yml"
        path = os.path.join(base, "tasks", entry)
        self.tasks(load(path), scope | passed, (caller[0], name, _rel(path, self.top)), depth)

    def play(self, play, playbook, path, outer=frozenset()):
        imported = next((play[k] for k in IMPORT_PLAYBOOK if k in play), None)
        if imported:  # its plays are the importing playbook's, with the import's vars defined
            target = os.path.join(os.path.dirname(os.path.join(self.top, path)), imported)
            for inner in load(target) or ():
                self.play(inner, playbook, _rel(target, self.top), outer | set(play.get("vars") or {}))
            return
        scope = set(outer) | set(play.get("vars") or {})
        for vars_file in play.get("vars_files") or ():
            data = load(os.path.join(os.path.dirname(os.path.join(self.top, path)), vars_file)) or {}
            scope |= set(data)
            self.read(data, scope, (playbook, None, path))
        where = (playbook, None, path)
        self.read({k: v for k, v in play.items() if k not in TASK_LISTS + ("name",)}, scope, where)
        for key in TASK_LISTS:
            if key == "roles":
                for item in play.get("roles") or ():
                    item = {"role": item} if isinstance(item, str) else item
                    self.role(item["role"], "main", scope, set(item.get("vars") or {}), (playbook, path))
            else:
                self.tasks(play.get(key), scope, where)


def playbook_files(top=TOP):
    directory = os.path.join(top, "playbooks")
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".yml"))


def role_names(top=TOP):
    return sorted(n for n in os.listdir(os.path.join(top, "roles"))
                  if os.path.isfile(os.path.join(top, "roles", n, "tasks", "main.yml")))


def scan(top=TOP):
    """Every playbook, then every role on its own (a role can be used without the playbooks)."""
    found = Scan(top)
    for path in playbook_files(top):
        for play in load(path) or ():
            found.play(play, os.path.basename(path), _rel(path, top))
    for name in role_names(top):
        found.role(name, "main", set(), set(), (None, None))
    return found


def specs(top=TOP):
    """{role: {variable: option}}: the options of every entry point of roles/<role>/meta/argument_specs.yml."""
    out = {}
    for name in role_names(top):
        path = os.path.join(top, "roles", name, "meta", "argument_specs.yml")
        data = (load(path) or {}).get("argument_specs") if os.path.exists(path) else None
        out[name] = {}
        for entry in (data or {}).values():
            out[name].update(entry.get("options") or {})
    return out


def undocumented(found, documented):
    """{name: [file, ...]} of inputs that no role's argument spec documents."""
    known = set().union(*documented.values()) if documented else set()
    missing = {}
    for name, _playbook, _role, path in found.inputs():
        if name not in known:
            missing.setdefault(name, set()).add(path)
    return {name: sorted(paths) for name, paths in sorted(missing.items())}


def role_gaps(found, documented):
    """{(role, name): [file, ...]}: a role reads or defaults ``name`` (or a caller passes it) and the role's own
    argument spec does not document it."""
    gaps = {}
    for name, _playbook, role, path in found.inputs():
        if role and name not in documented.get(role, {}):
            gaps.setdefault((role, name), set()).add(path)
    for role, name, path in found.passed:
        if name not in documented.get(role, {}):
            gaps.setdefault((role, name), set()).add(path)
    return {key: sorted(paths) for key, paths in sorted(gaps.items())}


# The reference. Ansible's doc markup in the specs' descriptions, as Markdown.
_MARKUP = re.compile(r"\b([CVOIBMRU]|RV)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def markdown(text):
    def one(match):
        kind, body = match.groups()
        if kind == "I":
            return "*%s*" % body
        if kind == "B":
            return "**%s**" % body
        if kind == "O":   # O(name) or O(name=value): the link goes to the name
            return "[`%s`](#%s)" % (body, body.split("=", 1)[0])
        return "`%s`" % body
    return " ".join(_MARKUP.sub(one, str(text)).split()).replace("|", "\\|")


FIELDS = ("type", "elements", "default", "choices", "required")


def merged(documented):
    """{variable: {"fields": {...}, "roles": {role: description paragraphs}}}; a variable several roles document
    must have the same type, elements, default, choices and required in each (else ValueError naming them)."""
    out = {}
    for role in sorted(documented):
        for name, option in documented[role].items():
            option = option or {}
            fields = {k: option[k] for k in FIELDS if k in option}
            fields.setdefault("type", "str")   # Ansible's defaults: type str, not required
            if not fields.get("required", True):
                del fields["required"]
            entry = out.setdefault(name, {"fields": fields, "roles": {}, "first": role})
            if entry["fields"] != fields:
                raise ValueError("%s: roles/%s and roles/%s document it differently (%s against %s)" % (
                    name, entry["first"], role, json.dumps(entry["fields"], sort_keys=True),
                    json.dumps(fields, sort_keys=True)))
            description = option.get("description") or []
            entry["roles"][role] = [description] if isinstance(description, str) else list(description)
    return out


def _value(value):
    return "`%s`" % json.dumps(value)


def render(found=None, documented=None, top=TOP):
    """docs/variables.md. Raises ValueError when an input is undocumented or two specs disagree."""
    found = found or scan(top)
    documented = documented if documented is not None else specs(top)
    missing = undocumented(found, documented)
    if missing:
        raise ValueError("read but in no roles/*/meta/argument_specs.yml: %s" % "; ".join(
            "%s (%s)" % (name, ", ".join(paths)) for name, paths in missing.items()))
    variables = merged(documented)
    by_playbook = found.playbooks()
    out = [
        "# pvetune playbook variables",
        "",
        "<!-- Generated by scripts/gen_docs.py (scripts/role_vars.py) from roles/*/meta/argument_specs.yml and the "
        "variables playbooks/*.yml and roles/ read. Do not edit: run `python scripts/gen_docs.py`. "
        "tests/unit/test_role_vars.py and `gen_docs.py --check` keep it in sync. -->",
        "",
        "Every variable the playbooks and roles read from the inventory, `-e` or a role default, as the roles' "
        "argument specs document it (Ansible checks the types when a role starts). \"Playbooks\" are the ones "
        "that read it from the inventory or `-e`, themselves or through their roles; \"-\": the playbooks or roles "
        "set it for the role that reads it (or only a role used on its own reads it). The policy's keys "
        "(`pvetune_policy`) are in [checks.md](checks.md#policy-keys). Play keywords (`hosts`, `serial`) are "
        "templated before any host is known, so `pvetune_hosts`, "
        "`pvetune_serial` and `pvetune_batch` must be given as extra vars (`-e`): group_vars and host_vars do not "
        "reach them (the run check refuses an inventory `pvetune_hosts` and warns of an inventory `pvetune_serial` "
        "or `pvetune_batch`).",
        "",
        "| variable | type | default | choices | playbooks | documented in |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(variables):
        fields, roles = variables[name]["fields"], variables[name]["roles"]
        kind = fields["type"] + ("/%s" % fields["elements"] if "elements" in fields else "")
        default = _value(fields["default"]) if "default" in fields else (
            "required" if fields.get("required") else "unset")
        out.append("| [`%s`](#%s) | %s | %s | %s | %s | %s |" % (
            name, name, kind, markdown(default), " ".join(_value(c) for c in fields.get("choices", [])) or "-",
            ", ".join(sorted(by_playbook.get(name, ()))) or "-", ", ".join("`%s`" % r for r in roles)))
    out += ["", "## Details", ""]
    for name in sorted(variables):
        roles = variables[name]["roles"]
        out += ["### %s" % name, ""]
        for role, paragraphs in roles.items():
            out.append("%s: %s" % ("`%s`" % role, " ".join(markdown(p) for p in paragraphs) or "(no description)"))
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
