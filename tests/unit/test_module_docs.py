"""Module documentation: shared options come from the pvetune doc fragment, and attributes match the code.

The documentation is merged the way ansible-doc merges it (ansible's fragment loader, with the project's
doc_fragments/ where ansible.cfg points it) and compared with what each module really passes to AnsibleModule.
Other test files use ``module_doc()`` to compare a module's options with its argument spec.
"""
import ast
import configparser
import glob
import inspect
import os
import textwrap

import pytest
import yaml
from ansible.module_utils import basic
from ansible.plugins.loader import PluginLoader
from ansible.utils.plugin_docs import get_docstring
from conftest import LIBRARY, TOP, load_library_module

MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LIBRARY, "pvetune_*.py")))
# Option -> the fragment that documents it; a module may only add `required` to the fragment's text.
SHARED = {"root": "pvetune", "run_id": "pvetune.run_id"}
ATTRIBUTES = "ansible.builtin.action_common_attributes"

_loader = PluginLoader("ModuleDocFragment", "ansible.plugins.doc_fragments", [], "doc_fragments")
_loader.add_directory(os.path.join(TOP, "doc_fragments"))


class _Fragments:
    """The fragment loader without Ansible's collection loader (which the CLI installs process-wide):
    ansible.builtin.<name> is ansible-core's own fragment <name>."""

    @staticmethod
    def get(name):
        return _loader.get(name[len("ansible.builtin."):] if name.startswith("ansible.builtin.") else name)


def _path(name):
    return os.path.join(LIBRARY, name + ".py")


def _source(name):
    with open(_path(name)) as handle:
        return handle.read()


def _uses_diff(name):
    """Whether the module's one call (main(): ``finish(module, *call(params, run_command, check_mode, diff))``, held
    by test_structure) reads its ``diff`` argument: every module passes module._diff, so the source says nothing."""
    main = [n for n in ast.parse(_source(name)).body if isinstance(n, ast.FunctionDef) and n.name == "main"][0]
    call = main.body[-1].value.args[1].value.func.id
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(load_library_module(name), call))))
    diff = tree.body[0].args.args[3].arg
    return any(isinstance(n, ast.Name) and n.id == diff for n in ast.walk(tree))


def raw_doc(name):
    """DOCUMENTATION as written in the module, before fragments (read without importing the module)."""
    for node in ast.parse(_source(name)).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DOCUMENTATION"]:
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % name)


def module_doc(module):
    """DOCUMENTATION with its fragments merged, as ansible-doc shows it; ``module`` is a name or a module."""
    name = module if isinstance(module, str) else module.__name__
    doc = get_docstring(_path(name), _Fragments, plugin_type="module")[0]
    assert doc, "%s: no documentation" % name
    return doc


class _Captured(Exception):
    pass


def argument_spec(name, monkeypatch):
    """(argument_spec, other AnsibleModule keyword arguments) that the module's main() passes."""
    seen = {}

    def capture(self, argument_spec, **kwargs):
        seen.update(spec=argument_spec, kwargs=kwargs)
        raise _Captured()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(_Captured):
        load_library_module(name).main()
    return seen["spec"], seen["kwargs"]


def test_ansible_cfg_points_at_the_fragments():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(TOP, "ansible.cfg"))
    assert cfg["defaults"]["doc_fragment_plugins"] == "doc_fragments"
    assert _loader.get("pvetune") is not None


@pytest.mark.parametrize("name", MODULES)
def test_shared_options_come_from_the_fragment(name, monkeypatch):
    spec, _kwargs = argument_spec(name, monkeypatch)
    raw = raw_doc(name)
    fragments = raw.get("extends_documentation_fragment") or []
    assert ATTRIBUTES in fragments, name
    for option, fragment in SHARED.items():
        if option in spec:
            assert fragment in fragments, "%s: %s must come from the %s fragment" % (name, option, fragment)
            own = (raw.get("options") or {}).get(option) or {}
            assert set(own) <= {"required"}, "%s documents %s itself: %s" % (name, option, sorted(own))
        else:
            assert fragment not in fragments, "%s has no option %s" % (name, option)


@pytest.mark.parametrize("name", MODULES)
def test_documented_options_match_argument_spec(name, monkeypatch):
    spec, _kwargs = argument_spec(name, monkeypatch)
    doc = module_doc(name).get("options") or {}
    assert sorted(doc) == sorted(spec), name
    for option, opt in spec.items():
        d = doc[option]
        assert d.get("type", "str") == opt.get("type", "str"), option
        assert d.get("default") == opt.get("default"), option
        assert bool(d.get("required", False)) == bool(opt.get("required", False)), option
        assert d.get("choices") == opt.get("choices"), option
        assert d.get("elements") == opt.get("elements"), option
        assert d.get("description"), option


@pytest.mark.parametrize("name", MODULES)
def test_attributes_say_what_the_module_does(name, monkeypatch):
    _spec, kwargs = argument_spec(name, monkeypatch)
    doc = module_doc(name)
    attributes = doc.get("attributes") or {}
    assert {"check_mode", "diff_mode", "platform"} <= set(attributes), name
    for attribute in ("check_mode", "diff_mode"):
        assert attributes[attribute]["support"] in ("full", "partial", "none"), (name, attribute)
        assert attributes[attribute].get("details"), (name, attribute)
        assert attributes[attribute].get("description"), "%s: %s not merged from %s" % (name, attribute, ATTRIBUTES)
    assert attributes["platform"].get("platforms") and attributes["platform"].get("details"), name
    check = attributes["check_mode"]["support"]
    assert (check != "none") == bool(kwargs.get("supports_check_mode")), (name, check)
    if _uses_diff(name):  # the module returns a diff
        assert attributes["diff_mode"]["support"] != "none", name
    # The attributes replace the old "Supports check mode ..." notes.
    assert not [n for n in doc.get("notes") or [] if n.startswith("Supports check mode")], name


@pytest.mark.parametrize("name", MODULES)
def test_return_and_examples_are_yaml(name):
    module = load_library_module(name)
    assert isinstance(yaml.safe_load(module.RETURN), dict), name
    assert isinstance(yaml.safe_load(module.EXAMPLES), list), name


@pytest.mark.parametrize("name", MODULES)
def test_see_also_has_real_targets(name):
    assert "example.invalid" not in _source(name)
    for item in module_doc(name).get("seealso") or []:
        if "module" in item:
            assert item["module"] in MODULES, (name, item)
        else:
            assert item.get("link", "").startswith("https://"), (name, item)
