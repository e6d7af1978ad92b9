"""Rules of the code base that no linter holds: no private name crosses a module, and every path a comment or a
doc names exists (a renamed file must not leave directions to nowhere)."""
import ast
import os
import re
import subprocess

from conftest import TOP

TRACKED = subprocess.run(["git", "ls-files"], cwd=TOP, stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout.split()
PY = [f for f in TRACKED if f.endswith(".py")]


def private_imports(path):
    """'file:line name' for every underscore name imported from, or read off, another pvetune module."""
    with open(os.path.join(TOP, path)) as handle:
        tree = ast.parse(handle.read(), path)
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "pvetune" in node.module:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append("%s:%d %s.%s" % (path, node.lineno, node.module, alias.name))
                else:
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append("%s:%d %s.%s" % (path, node.lineno, node.value.id, node.attr))
    return found


def test_no_underscore_name_is_imported_across_modules():
    assert [hit for path in PY for hit in private_imports(path)] == []


ROOTS = ("module_utils/", "library/", "roles/", "tests/", "scripts/", "docs/", "playbooks/", "molecule/",
         "inventory/", "bench/", "callback_plugins/", "action_plugins/", "collection/", "contrib/", ".ci/")
PACKAGES = ("concerns/", "core/", "formats/", "tables/")  # named relative to module_utils/pvetune/
PATH_RE = re.compile(r"(?<![\w./-])((?:%s)[\w./-]*\.(?:py|yml|yaml|md|sh|json|txt|j2|cfg|conf))(?![\w/-])"
                     % "|".join(re.escape(r) for r in ROOTS + PACKAGES))
# Named on purpose though not in the clone: the operator's own inventory and the trees test_role_vars and
# test_gather_demo build in tmp directories. (What the suite writes, tests/output/ and tests/lab/work/, is in
# .gitignore: a path there counts as named correctly.)
NOT_IN_CLONE = ("inventory/prod/", "roles/one/", "roles/two/", "playbooks/site.yml", "module_utils/pvetune/new.py")


def ignored(path):
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=TOP).returncode == 0


def test_every_path_a_comment_or_doc_names_exists():
    missing = []
    for path in TRACKED:
        if not path.endswith((".py", ".md", ".yml", ".yaml", ".sh", ".cfg")) or path.startswith("tests/fixtures/"):
            continue
        with open(os.path.join(TOP, path), errors="replace") as handle:
            text = handle.read()
        for match in PATH_RE.finditer(text):
            named = match.group(1).rstrip(".")
            if any(c in named for c in "*<{") or named.startswith(NOT_IN_CLONE):
                continue
            where = "module_utils/pvetune/" + named if named.startswith(PACKAGES) else named
            if not os.path.exists(os.path.join(TOP, where)) and not ignored(where):
                missing.append("%s names %s" % (path, named))
    assert missing == []


MODULE_SHAPE = ("module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True%s)\n"
                "finish(module, *%s(module.params, module.run_command, module.check_mode, module._diff))\n")


def main_shape(path):
    """What keeps library/<module>.py's main() from the one module shape: MODULE_SHAPE (with ``**MODULE_OPTIONS``
    where the module needs more AnsibleModule keywords), the option dicts defined at module level (or imported from
    module_utils) and the called
    function imported from module_utils (it returns ``(failed, result, warnings)``, ``finish`` emits them)."""
    with open(os.path.join(TOP, path)) as handle:
        tree = ast.parse(handle.read(), path)
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    if len(mains) != 1:
        return "%s: no main()" % path
    body = mains[0].body
    try:
        call = body[1].value.args[1].value.func.id
    except (IndexError, AttributeError):
        return "%s: main() does not end in finish(module, *<call>(...))" % path
    shapes = [[ast.dump(stmt) for stmt in ast.parse(MODULE_SHAPE % (options, call)).body]
              for options in ("", ", **MODULE_OPTIONS")]
    if [ast.dump(stmt) for stmt in body] not in shapes:
        return "%s: main() is not the module shape (with %s)" % (path, call)
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {(n.module, a.asname or a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    # A controller module's spec may live in module_utils, beside the call: its action plugin validates with it too.
    assigned |= {name for module, name in imported if module.startswith("ansible.module_utils.pvetune.")}
    wanted = {"ARGUMENT_SPEC"} | ({"MODULE_OPTIONS"} if "MODULE_OPTIONS" in ast.dump(body[0]) else set())
    if wanted - assigned:
        return "%s: %s not defined at module level" % (path, ", ".join(sorted(wanted - assigned)))
    if not any(module.startswith("ansible.module_utils.pvetune.") and name == call for module, name in imported):
        return "%s: %s is not imported from module_utils/pvetune" % (path, call)
    return None


def test_every_module_has_the_one_module_shape():
    modules = sorted(f for f in os.listdir(os.path.join(TOP, "library")) if re.match(r"pvetune_\w+\.py\Z", f))
    assert modules
    assert [msg for msg in (main_shape("library/" + f) for f in modules) if msg] == []
