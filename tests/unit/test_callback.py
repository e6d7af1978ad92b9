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


def test_a_play_through_the_callback_prints_only_what_has_something_to_say(tmp_path):
    """ansible-playbook with the project's ansible.cfg: set_fact and an unchanged command are not printed; a debug
    message, a change, a warning and an include are; -v prints everything again."""
    import subprocess
    import sys
    play = tmp_path / "play.yml"
    (tmp_path / "inc.yml").write_text("- name: Inside the include\n  ansible.builtin.set_fact:\n    y: 2\n")
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Quiet fact\n      ansible.builtin.set_fact:\n        x: 1\n"
        "    - name: Quiet command\n      ansible.builtin.command: 'true'\n      changed_when: false\n"
        "    - name: Loud message\n      ansible.builtin.debug:\n        msg: hello operator\n"
        "    - name: Loud change\n      ansible.builtin.command: 'true'\n      changed_when: true\n"
        "    - name: Loud include\n      ansible.builtin.include_tasks: inc.yml\n"
        # Host-derived text with what a terminal acts on (clear screen, window title, bell, NUL, a CR).
        "    - name: Hostile text\n      ansible.builtin.fail:\n"
        "        msg: \"refused: c 509:* rwm \\u001b[2J\\u001b]0;owned\\u0007 nul\\u0000 cr\\r end\"\n"
        "      ignore_errors: true\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"])

    def run(*extra):
        proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e",
                               "ansible_python_interpreter=%s" % sys.executable, str(play)] + list(extra),
                              cwd=TOP, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # Nothing a terminal would act on reaches it: the failed task's [ERROR] line carries its message verbatim
        # in Ansible 2.19, so the callback escapes what Display prints.
        for raw in ("\x1b", "\x07", "\x00", "\r"):
            assert raw not in proc.stdout + proc.stderr, (raw, proc.stdout + proc.stderr)
        assert "rwm \\x1b[2J\\x1b]0;owned\\x07 nul\\x00 cr\\x0d end" in proc.stdout + proc.stderr
        return proc.stdout

    out = run()
    assert "Quiet fact" not in out and "Quiet command" not in out and "Inside the include" not in out
    assert "hello operator" in out and "TASK [Loud change]" in out and "included: " in out
    assert "failed=0" in out and "changed=1" in out and "ignored=1" in out  # the recap still counts every result
    verbose = run("-v")
    assert "TASK [Quiet fact]" in verbose and "TASK [Quiet command]" in verbose


def test_escape_controls_keeps_text_and_colour_only_when_asked(plugin):
    text = "a\tb\nc \x1b[2J \x1b]0;t\x07 \x00 \x7f \x9b \x1b[0;31mred\x1b[0m é"
    assert plugin.escape_controls(text) == ("a\tb\nc \\x1b[2J \\x1b]0;t\\x07 \\x00 \\x7f \\x9b \\x1b[0;31mred"
                                            "\\x1b[0m é")
    assert plugin.escape_controls(text, keep_colour=True) == ("a\tb\nc \\x1b[2J \\x1b]0;t\\x07 \\x00 \\x7f \\x9b "
                                                              "\x1b[0;31mred\x1b[0m é")
