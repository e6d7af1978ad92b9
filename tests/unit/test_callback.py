"""callback_plugins/pvetune.py: which "ok" results are not printed."""
import importlib.util
import os

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def plugin():
    spec = importlib.util.spec_from_file_location("pvetune_callback", os.path.join(TOP, "callback_plugins",
                                                                                   "pvetune.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("result", [
    {"changed": False}, {"changed": False, "msg": "The arg spec validation passed"},
    {"changed": False, "diff": {"before": "a", "after": "a"}}, {"ansible_facts": {"x": 1}}])
def test_results_with_only_an_ok_line_are_uneventful(plugin, result):
    assert plugin.uneventful(result)


@pytest.mark.parametrize("result", [
    {"changed": True}, {"changed": False, "warnings": ["w"]}, {"deprecations": [{"msg": "d"}]},
    {"msg": "pending a reboot", "_ansible_verbose_always": True}])
def test_changes_warnings_and_debug_messages_are_shown(plugin, result):
    assert not plugin.uneventful(result)
