"""Every variable the playbooks and roles read is documented in a role's argument spec, and docs/variables.md is the
reference generated from those specs (scripts/role_vars.py, written by scripts/gen_docs.py)."""
import os
import sys
import textwrap

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import role_vars  # noqa: E402

@pytest.fixture(scope="module")
def found():
    return role_vars.scan()


@pytest.fixture(scope="module")
def documented():
    return role_vars.specs()


def test_every_variable_read_is_in_an_argument_spec(found, documented):
    assert role_vars.undocumented(found, documented) == {}, "add them to a roles/*/meta/argument_specs.yml"


def test_every_role_documents_what_it_reads_defaults_and_is_passed(found, documented):
    assert role_vars.role_gaps(found, documented) == {}


def test_the_walk_reaches_the_playbooks_variables(found):
    """The scan is not vacuous: names read only in a play keyword, a post_task, a looped include_role, a role
    default's value or a task file imported two levels down are all found, with the playbook that reads them."""
    reads = {(name, playbook) for name, playbook, _role, _path in found.inputs(kinds=("read",))}
    for name, playbook in [("pvetune_serial", "fix.yml"), ("pvetune_batch", "fix.yml"),
                           ("pvetune_junit_warn_as_failure", "audit.yml"), ("pvetune_snapshot_dir", "collect.yml"),
                           ("pvetune_cluster_timeout", "rollback.yml"), ("pvetune_running_guests", "fix.yml"),
                           ("pvetune_kernel_version", "fix.yml"), ("reboot_ok", "rollback.yml")]:
        assert (name, playbook) in reads
    names = {r[0] for r in found.inputs()}
    assert "pvetune_run_id" in names  # a role default, though a task sets it again
    assert not names & {"pvetune_rollout_cluster", "pvetune_report_result",
                        "pvetune_rollback_reboot", "peers", "inventory_hostname"}   # registered, vars, magic


def write(top, path, text):
    full = top / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(textwrap.dedent(text))


@pytest.fixture
def tree(tmp_path):
    """A playbook and two roles that read documented, undocumented and locally defined names."""
    write(tmp_path, "playbooks/site.yml", """\
        - hosts: "{{ site_hosts | default('all') }}"
          vars: {play_var: 1}
          roles:
            - role: one
              vars: {one_passed: "{{ play_var }}", one_stray: 2}
          tasks:
            - name: looped include_role
              ansible.builtin.include_role:
                name: two
                tasks_from: "{{ item }}"
              loop: [extra.yml]
        """)
    write(tmp_path, "roles/one/defaults/main.yml", "one_default: \"{{ one_source | default(1) }}\"\n")
    write(tmp_path, "roles/one/meta/argument_specs.yml", """\
        argument_specs:
          main:
            options:
              one_default: {type: int, default: 1, description: [Uses C(x) and O(one_passed).]}
              one_passed: {type: int}
              site_hosts: {type: str, description: The pattern.}
        """)
    write(tmp_path, "roles/one/tasks/main.yml", """\
        - name: register and set_fact define, block vars are in scope
          vars: {block_var: 1}
          block:
            - ansible.builtin.import_tasks: sub/inner.yml
        - ansible.builtin.set_fact: {one_fact: "{{ one_default }}"}
        - ansible.builtin.debug: {msg: "{{ one_fact }} {{ one_reg }}"}
          when: one_cond | bool
        """)
    write(tmp_path, "roles/one/tasks/sub/inner.yml", """\
        - ansible.builtin.command: "echo {{ block_var }} {{ one_passed }} {{ inventory_hostname }}"
          register: one_reg
        """)
    write(tmp_path, "roles/two/tasks/main.yml", "- ansible.builtin.debug: {msg: hello}\n")
    write(tmp_path, "roles/two/tasks/extra.yml", "- ansible.builtin.debug: {msg: \"{{ two_only }}\"}\n")
    return tmp_path


def test_undocumented_and_role_gaps_name_the_reading_files(tree):
    found, documented = role_vars.scan(str(tree)), role_vars.specs(str(tree))
    assert role_vars.undocumented(found, documented) == {
        "one_cond": ["roles/one/tasks/main.yml"], "one_source": ["roles/one/defaults/main.yml"],
        "two_only": ["roles/two/tasks/extra.yml"]}
    assert role_vars.role_gaps(found, documented) == {
        ("one", "one_cond"): ["roles/one/tasks/main.yml"], ("one", "one_source"): ["roles/one/defaults/main.yml"],
        ("one", "one_stray"): ["playbooks/site.yml"], ("two", "two_only"): ["roles/two/tasks/extra.yml"]}
    with pytest.raises(ValueError, match="one_cond .roles/one/tasks/main.yml.; one_source"):
        role_vars.render(found, documented, str(tree))


def test_render_of_a_documented_tree(tree):
    for name in ("one_cond", "one_source", "two_only"):
        (tree / "roles/one/meta/argument_specs.yml").write_text(
            (tree / "roles/one/meta/argument_specs.yml").read_text()
            + "      %s: {type: bool, description: Some C(text).}\n" % name)
    text = role_vars.render(top=str(tree))
    rows = [line for line in text.splitlines() if line.startswith("| [`")]
    assert rows == [
        "| [`one_cond`](#one_cond) | bool | unset | - | site.yml | `one` |",
        "| [`one_default`](#one_default) | int | `1` | - | site.yml | `one` |",
        "| [`one_passed`](#one_passed) | int | unset | - | - | `one` |",
        "| [`one_source`](#one_source) | bool | unset | - | site.yml | `one` |",
        "| [`site_hosts`](#site_hosts) | str | unset | - | site.yml | `one` |",
        "| [`two_only`](#two_only) | bool | unset | - | site.yml | `one` |",
    ]
    assert "### one_default\n\n`one`: Uses `x` and [`one_passed`](#one_passed).\n" in text


def test_two_specs_must_agree(tree):
    write(tree, "roles/two/meta/argument_specs.yml", """\
        argument_specs:
          main:
            options:
              one_default: {type: str, default: "1"}
        """)
    with pytest.raises(ValueError, match="one_default: roles/one and roles/two document it differently"):
        role_vars.merged(role_vars.specs(str(tree)))


def test_markup():
    assert role_vars.markdown("C(a|b) I(x) B(y) V(refuse) O(pvetune_serial) C(f(x)) RV(changed) O(a_b=c)") == (
        "`a\\|b` *x* **y** `refuse` [`pvetune_serial`](#pvetune_serial) `f(x)` `changed` [`a_b=c`](#a_b)")


def test_committed_variables_md_is_up_to_date(found, documented):
    with open(role_vars.OUTPUT, encoding="utf-8") as handle:
        assert handle.read() == role_vars.render(found, documented), "run: python scripts/gen_docs.py"


def test_variables_md_says_what_an_operator_must_see():
    """Written out, not derived from the specs: the rollout's operator-facing rows."""
    with open(role_vars.OUTPUT, encoding="utf-8") as handle:
        rows = {line.split(" | ")[0]: line for line in handle.read().splitlines() if line.startswith("| [`")}
    assert rows["| [`pvetune_serial`](#pvetune_serial)"] == (
        "| [`pvetune_serial`](#pvetune_serial) | raw | `1` | - | fix.yml, rollback.yml | `pvetune_rollout`, "
        "`pvetune_run_check` |")
    assert rows["| [`pvetune_running_guests`](#pvetune_running_guests)"] == (
        "| [`pvetune_running_guests`](#pvetune_running_guests) | str | `\"refuse\"` | `\"refuse\"` `\"stop\"` | "
        "fix.yml, rollback.yml | `pvetune_rollout` |")
    assert rows["| [`pvetune_root`](#pvetune_root)"].endswith(
        "| audit.yml, collect.yml, fix.yml, metrics.yml, rollback.yml | `pvetune_audit`, `pvetune_fix`, "
        "`pvetune_metrics`, `pvetune_rollout` |")
    assert "| [`pvetune_reboot_ok`](#pvetune_reboot_ok) | bool | `false` |" in rows[
        "| [`pvetune_reboot_ok`](#pvetune_reboot_ok)"]
