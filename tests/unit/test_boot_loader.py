# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot loader detection and GRUB/kernel readers (concerns/bootargs/checks.py, concerns/kernel/checks.py,
formats/grub_*.py).

Real third-party samples come from tests/fixtures/realdata/boot/ (sources in
tests/fixtures/realdata/SOURCES.md, copied from /work/shared/realdata/INDEX.md).
tests/fixtures/boot/ holds files written by the project.
"""

import os
import shutil
import subprocess

import pytest
from ansible.module_utils.pvetune.concerns.bootargs import checks as bootargs
from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
from ansible.module_utils.pvetune.concerns.bootargs.checks import detect_loader
from ansible.module_utils.pvetune.concerns.kernel.checks import kernel_state
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats import grub_edit, kernel_version
from ansible.module_utils.pvetune.formats.grub_chain import grub_effective
from ansible.module_utils.pvetune.formats.grub_edit import plan_grub_edit, render_dropin
from ansible.module_utils.pvetune.formats.grub_menu import grub_default_kernel
from ansible.module_utils.pvetune.formats.grub_parse import GrubParseError, parse_grub_file, read_grub_files
from ansible.module_utils.pvetune.formats.kernel_cmdline import (
    BootConfigError,
    arg_key,
    arg_value,
    parse_kernel_cmdline_file,
    plan_args,
    set_kernel_cmdline_file,
    split_cmdline,
    validate_arg,
)
from ansible.module_utils.pvetune.formats.kernel_version import in_series, kernel_sort_key, validate_kernel_version
from ansible.module_utils.pvetune.formats.pbt_output import parse_pbt_kernel_list, parse_pbt_status
from grub_setvar import set_grub_var

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
REAL = os.path.join(FIXTURES, "realdata", "boot")

ENSURE = ["amd_pstate=active", "processor.max_cstate=1"]
GRUB = "/etc/default/grub"
DROPIN = "/etc/default/grub.d/90-pvetune.cfg"
DIR = object()  # marks a directory in tree()


def real(name):
    """A realdata file, byte for byte (newline='' keeps line endings)."""
    with open(os.path.join(REAL, name), encoding="utf-8", newline="") as handle:
        return handle.read()


def project_fixture(name):
    with open(os.path.join(FIXTURES, "boot", name), encoding="utf-8", newline="") as handle:
        return handle.read()


def strip_header(text):
    """Drop INDEX.md header lines (# source: / # machine: / # NOTE:) before feeding a non-shell parser."""
    return "".join(ln for ln in text.splitlines(True)
                   if not ln.startswith(("# source:", "# machine:", "# NOTE:")))


def tree(tmp_path, files):
    for rel, content in files.items():
        path = tmp_path / rel.lstrip("/")
        if content is DIR:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8"))
    return FsRoot(str(tmp_path))


def apply_plan(files, plan):
    return grub_edit.apply_plan(files, plan)


# ---------------------------------------------------------------------------
# Kernel command line
# ---------------------------------------------------------------------------
class TestSplitCmdline:
    def test_realdata_proc_cmdline_grub_6_8(self):
        args = split_cmdline(real("proc_cmdline_grub_pve6.8.12-5_i915_237.txt"))
        assert args == ["BOOT_IMAGE=/boot/vmlinuz-6.8.12-5-pve", "root=/dev/mapper/pve-root", "ro", "quiet",
                        "intel_iommu=on", "i915.enable_guc=3", "i915.max_vfs=7", "module_blacklist=xe"]

    def test_realdata_proc_cmdline_grub_5_15(self):
        args = split_cmdline(real("proc_cmdline_grub_pve5.15.30-2_bootfb_1.txt"))
        assert args[0] == "BOOT_IMAGE=/boot/vmlinuz-5.15.30-2-pve"
        assert args[-3:] == ["video=efifb:off", "video=vesafb:off", "video=simplefb:off"]
        assert [arg_key(a) for a in args].count("video") == 3

    def test_realdata_loader_entry_options(self):
        text = strip_header(real("systemd_boot_loader_entry_pvedocs.conf"))
        options = [ln.split(None, 1)[1] for ln in text.splitlines() if ln.startswith("options")][0]
        assert split_cmdline(options) == ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs"]

    def test_quotes_group_and_are_kept(self):
        assert split_cmdline('a foo="x y  z" b') == ["a", 'foo="x y  z"', "b"]
        assert split_cmdline('"quoted flag" next') == ['"quoted flag"', "next"]
        assert split_cmdline('dyndbg="file x.c +p"\n') == ['dyndbg="file x.c +p"']

    def test_whitespace_kinds_and_empty(self):
        assert split_cmdline(" \t a\tb\r\nc\x0bd\x0c ") == ["a", "b", "c", "d"]
        assert split_cmdline("") == []
        assert split_cmdline(None) == []

    def test_unbalanced_quote_takes_the_rest(self):
        assert split_cmdline('a b="c d e') == ["a", 'b="c d e']


class TestArgKey:
    @pytest.mark.parametrize("arg,key", [
        ("processor.max_cstate=5", "processor.max_cstate"),
        ("processor.max-cstate=5", "processor.max_cstate"),
        ("quiet", "quiet"),
        ("root=ZFS=rpool/ROOT/pve-1", "root"),
        ('"foo=bar baz"', "foo"),
        ('"flag"', "flag"),
        ("--", "--"),
        ("amd_pstate=active", "amd_pstate"),
    ])
    def test_keys(self, arg, key):
        assert arg_key(arg) == key

    def test_dash_and_underscore_equivalent(self):
        assert arg_key("processor.max_cstate=1") == arg_key("processor.max-cstate=1")
        assert arg_key("amd-pstate=active") == arg_key("amd_pstate=passive")

    @pytest.mark.parametrize("arg,value", [
        ("quiet", None), ("a=", ""), ("a=b=c", "b=c"), ('a="x y"', "x y"), ('"a=x y"', "x y"),
        ("root=ZFS=rpool/ROOT/pve-1", "ZFS=rpool/ROOT/pve-1"),
    ])
    def test_values(self, arg, value):
        assert arg_value(arg) == value


class TestValidateArg:
    @pytest.mark.parametrize("arg", [
        "amd_pstate=active", "processor.max_cstate=1", "quiet", "iommu=pt", "pcie_aspm=off",
        "video=efifb:off", "usb_storage.quirks=0bc2:ac2b:,0bc2:2344:", "root=ZFS=rpool/ROOT/pve-1",
        "console=ttyS0,115200n8", 'dyndbg="file drivers/x.c +p"', "isolcpus=2-7", "a=", "nvme_core.x=@1",
        "x" * 256,
    ])
    def test_accepts(self, arg):
        assert validate_arg(arg) == arg

    @pytest.mark.parametrize("arg", [
        "", "foo;reboot", "foo=a;b", "$(reboot)", "foo=$(reboot)", "foo=`id`", "`id`", 'foo="a"b"',
        'foo"', "foo=a b", "foo\n", "foo=a\nGRUB_X=1", "--", "--foo", "-x", ".foo", "foo=${X}",
        'foo="$HOME"', 'foo="a\\"b"', 'foo="`id`"', 'foo="a\\b"', "foo=a'b", "foo=a|b", "foo=a&b",
        "foo=a>b", "foo=é", "x" * 257, "key=" + "v" * 300, 'foo="tab\there"',
    ])
    def test_rejects(self, arg):
        with pytest.raises(BootConfigError):
            validate_arg(arg)

    def test_rejects_non_strings(self):
        with pytest.raises(BootConfigError):
            validate_arg(None)
        with pytest.raises(BootConfigError):
            validate_arg(["quiet"])


class TestPlanArgs:
    def test_motivating_case_on_real_cmdline(self):
        current = split_cmdline(real("proc_cmdline_grub_pve6.8.12-5_i915_237.txt"))
        new, changes = plan_args(current, ENSURE, [])
        assert new == current + ENSURE
        assert [c["action"] for c in changes] == ["add", "add"]
        assert plan_args(new, ENSURE, []) == (new, [])

    def test_replace_in_place_keeps_position(self):
        current = ["ro", "quiet", "processor.max_cstate=5", "iommu=pt"]
        new, changes = plan_args(current, ENSURE, [])
        assert new == ["ro", "quiet", "processor.max_cstate=1", "iommu=pt", "amd_pstate=active"]
        assert changes[0] == {"action": "replace", "index": 2, "old": "processor.max_cstate=5",
                              "new": "processor.max_cstate=1"}

    def test_duplicates_collapse_to_first_position(self):
        current = ["processor.max-cstate=5", "quiet", "processor.max_cstate=1", "processor.max_cstate=9"]
        new, changes = plan_args(current, ["processor.max_cstate=1"], [])
        assert new == ["processor.max_cstate=1", "quiet"]
        assert [c["action"] for c in changes] == ["replace", "remove", "remove"]

    def test_equal_value_other_spelling_is_kept(self):
        current = ["quiet", "processor.max-cstate=1", "amd-pstate=active"]
        assert plan_args(current, ENSURE, []) == (current, [])

    def test_other_args_keep_order_and_spelling(self):
        current = ["BOOT_IMAGE=/boot/vmlinuz-6.8.12-5-pve", 'dyndbg="file a.c +p"', "Quiet", "x-y_z=1"]
        new, _ = plan_args(current, ENSURE, [])
        assert new[:4] == current

    def test_remove_by_key_and_by_value(self):
        current = ["intel_pstate=disable", "quiet", "video=efifb:off", "video=vesafb:off", "intel-pstate=passive"]
        new, changes = plan_args(current, [], ["intel_pstate", "video=vesafb:off"])
        assert new == ["quiet", "video=efifb:off"]
        assert all(c["action"] == "remove" for c in changes)

    def test_init_args_after_double_dash_untouched(self):
        current = ["ro", "processor.max_cstate=5", "--", "processor.max_cstate=5", "single"]
        new, _ = plan_args(current, ENSURE, ["single"])
        assert new == ["ro", "processor.max_cstate=1", "amd_pstate=active", "--", "processor.max_cstate=5", "single"]

    def test_idempotent(self):
        current = ["quiet", "processor.max_cstate=5", "intel_pstate=disable", "processor.max_cstate=3"]
        new, changes = plan_args(current, ENSURE, ["intel_pstate"])
        assert changes
        assert plan_args(new, ENSURE, ["intel_pstate"]) == (new, [])

    def test_conflicting_requests(self):
        with pytest.raises(BootConfigError):
            plan_args([], ["processor.max_cstate=1", "processor.max-cstate=5"], [])
        with pytest.raises(BootConfigError):
            plan_args([], ["amd_pstate=active"], ["amd_pstate"])
        with pytest.raises(BootConfigError):
            plan_args([], ["amd_pstate=active"], ["amd-pstate=active"])
        # removing another value of an ensured key is consistent
        assert plan_args(["processor.max_cstate=5"], ["processor.max_cstate=1"], ["processor.max_cstate=5"])[0] == \
            ["processor.max_cstate=1"]

    @pytest.mark.parametrize("bad", ["a;b", "$(reboot)", "`id`", "--", "--foo", "x=\"a\"b\"", "x\ny", "x" * 300])
    def test_injection_rejected_in_ensure_and_remove(self, bad):
        with pytest.raises(BootConfigError):
            plan_args(["quiet"], [bad], [])
        with pytest.raises(BootConfigError):
            plan_args(["quiet"], [], [bad])


# ---------------------------------------------------------------------------
# GRUB default files: evaluation
# ---------------------------------------------------------------------------
STOCK = 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'


class TestGrubParse:
    def test_project_fixture(self):
        text = project_fixture("etc_default_grub_pve_maxcstate5.cfg")
        eff = grub_effective([(GRUB, text)])
        assert eff["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet amd_iommu=on iommu=pt processor.max_cstate=5"
        assert eff["GRUB_CMDLINE_LINUX"] == ""
        assert eff["GRUB_DEFAULT"] == "0"
        assert eff["set_by"]["GRUB_CMDLINE_LINUX_DEFAULT"] == {"path": GRUB, "line": 9}
        assert eff["args"] == ["quiet", "amd_iommu=on", "iommu=pt", "processor.max_cstate=5"]
        assert eff["arg_sources"][-1] == {"arg": "processor.max_cstate=5", "sources": [GRUB + ":9"]}
        # Debian's backtick GRUB_DISTRIBUTOR is not needed: a warning, not an error
        assert any("GRUB_DISTRIBUTOR" in w and ":8:" in w for w in eff["warnings"])
        gf = parse_grub_file(text, GRUB)
        assert gf.env["GRUB_DISTRIBUTOR"] is None

    def test_realdata_dropin_expands_variable(self):
        dropin = real("grub_d_usb_quirks_mcgarrah.cfg")
        files = [(GRUB, 'GRUB_CMDLINE_LINUX="root=ZFS=rpool/ROOT/pve-1 boot=zfs"\n'),
                 ("/etc/default/grub.d/usb-quirks.cfg", dropin)]
        eff = grub_effective(files)
        assert eff["GRUB_CMDLINE_LINUX"] == ("root=ZFS=rpool/ROOT/pve-1 boot=zfs "
                                             "usb_storage.quirks=0bc2:ac2b:,0bc2:2344:,0bc2:ac41:,0bc2:ab9a:")
        assert eff["set_by"]["GRUB_CMDLINE_LINUX"] == {"path": "/etc/default/grub.d/usb-quirks.cfg", "line": 3}
        srcs = {s["arg"]: s["sources"] for s in eff["arg_sources"]}
        assert srcs["boot=zfs"] == [GRUB + ":1"]
        assert srcs["usb_storage.quirks=0bc2:ac2b:,0bc2:2344:,0bc2:ac41:,0bc2:ab9a:"] == \
            ["/etc/default/grub.d/usb-quirks.cfg:3"]
        asg = parse_grub_file(dropin, "/etc/default/grub.d/usb-quirks.cfg").last("GRUB_CMDLINE_LINUX")
        assert (asg.prefix, asg.quote, asg.editable, asg.start_line) == ("GRUB_CMDLINE_LINUX", '"', True, 2)

    def test_several_assignments_last_wins(self):
        text = ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n# later\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n'
                "GRUB_CMDLINE_LINUX_DEFAULT='quiet iommu=pt'\n")
        gf = parse_grub_file(text, GRUB)
        assert [a.line_no for a in gf.assignments] == [1, 3, 4]
        assert gf.last("GRUB_CMDLINE_LINUX_DEFAULT").quote == "'"
        assert gf.env["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet iommu=pt"

    def test_line_continuations(self):
        text = ('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet \\\n    iommu=pt \\\n    amd_iommu=on"\n'
                "GRUB_CMDLINE_LINUX=root=x\\\nyz\nexport \\\n  GRUB_DEFAULT=saved\n")
        gf = parse_grub_file(text, GRUB)
        asg = gf.last("GRUB_CMDLINE_LINUX_DEFAULT")
        assert (asg.start_line, asg.end_line, asg.line_no) == (1, 3, 2)
        assert split_cmdline(asg.value) == ["quiet", "iommu=pt", "amd_iommu=on"]
        assert gf.env["GRUB_CMDLINE_LINUX"] == "root=xyz"
        assert gf.env["GRUB_DEFAULT"] == "saved"
        assert gf.last("GRUB_DEFAULT").export

    def test_quoting_forms(self):
        text = ("A='single \"dq\" $NOT'\n"
                'B="esc \\" \\$ \\` \\\\ \\n end"\n'
                "C=plain\\ word\n"
                'D="$A"\'|lit\'"${C}"\n'
                'E=""\n'
                "F=\n"
                "G=a#b # comment\n"
                "H=cost$\n")
        env = parse_grub_file(text, "/t").env
        assert env["A"] == 'single "dq" $NOT'
        assert env["B"] == 'esc " $ ` \\ \\n end'
        assert env["C"] == "plain word"
        assert env["D"] == 'single "dq" $NOT|litplain word'
        assert env["E"] == "" and env["F"] == ""
        assert env["G"] == "a#b"
        assert env["H"] == "cost$"

    def test_env_and_unset_variables(self):
        text = 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT x ${UNSET}y"\n'
        assert parse_grub_file(text, "/d", env={"GRUB_CMDLINE_LINUX_DEFAULT": "quiet"}).env[
            "GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet x y"
        assert parse_grub_file(text, "/d").env["GRUB_CMDLINE_LINUX_DEFAULT"] == " x y"

    def test_export_forms(self):
        gf = parse_grub_file("export GRUB_X\nexport A=1 B='2 3'\nC=1 D=2\n", "/t")
        assert (gf.env["A"], gf.env["B"], gf.env["C"], gf.env["D"]) == ("1", "2 3", "1", "2")

    def test_crlf_is_read_with_a_warning(self):
        text = 'GRUB_DEFAULT=0\r\n\r\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\r\n# c\r\n'
        gf = parse_grub_file(text, GRUB)
        assert gf.env["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet iommu=pt"
        assert gf.env["GRUB_DEFAULT"] == "0"
        assert gf.crlf and any("CRLF" in w for w in gf.warnings)

    def test_dropin_order_from_fsroot(self, tmp_path):
        root = tree(tmp_path, {
            GRUB: 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
            "/etc/default/grub.d/b.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT b"\n',
            "/etc/default/grub.d/A.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT A"\n',
            "/etc/default/grub.d/90-x.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT 90"\n',
            "/etc/default/grub.d/notes.txt": "GRUB_CMDLINE_LINUX_DEFAULT=ignored\n",
            "/etc/default/grub.d/dir.cfg/x": "",
        })
        files = read_grub_files(root)
        assert [p for p, _t in files] == [GRUB, "/etc/default/grub.d/90-x.cfg", "/etc/default/grub.d/A.cfg",
                                          "/etc/default/grub.d/b.cfg"]
        assert grub_effective(files)["args"] == ["quiet", "90", "A", "b"]


class TestGrubParseErrors:
    @pytest.mark.parametrize("line,fragment", [
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet $(cat /etc/extra)"', "command substitution"),
        ("GRUB_CMDLINE_LINUX=`cat /etc/args`", "command substitution"),
        ("GRUB_DEFAULT=$(cat /etc/which)", "command substitution"),
        ('if [ -e /x ]; then GRUB_CMDLINE_LINUX="a"; fi', "operator"),
        ("if true", "control structure"),
        ("for x in a b", "control structure"),
        ('GRUB_TIMEOUT=5; GRUB_CMDLINE_LINUX="a"', "operator"),
        ('GRUB_TIMEOUT=5 && GRUB_CMDLINE_LINUX="a"', "'&&'"),
        ("GRUB_TIMEOUT=5 | cat", "operator"),
        ("GRUB_TIMEOUT=5 > /tmp/x", "operator"),
        ("GRUB_TIMEOUT=$((1+2))", "arithmetic"),
        ('GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:-quiet}"', "parameter expansion"),
        ('GRUB_CMDLINE_LINUX="${#X}"', "parameter expansion"),
        ('GRUB_CMDLINE_LINUX="$1"', "special parameter"),
        ('GRUB_CMDLINE_LINUX="quiet', "unbalanced double quote"),
        ("GRUB_CMDLINE_LINUX='quiet", "unbalanced single quote"),
        ("echo hello", "cannot evaluate command"),
        (". /etc/default/other", "cannot evaluate command"),
        ("source /etc/default/other", "cannot evaluate command"),
        ("GRUB_TIMEOUT=5 update-grub", "not an assignment"),
        ("GRUB_CMDLINE_LINUX+=quiet", "cannot evaluate command"),
        ("GRUB_X=~/foo", "tilde"),
        ("export -n GRUB_X", "export options"),
        ("(GRUB_X=1)", "operator"),
    ])
    def test_uncertain_constructs_raise_with_file_and_line(self, line, fragment):
        text = "# header\nGRUB_TIMEOUT=5\n" + line + "\nGRUB_DEFAULT=0\n"
        with pytest.raises(GrubParseError) as err:
            parse_grub_file(text, "/etc/default/grub.d/odd.cfg")
        assert err.value.path == "/etc/default/grub.d/odd.cfg"
        assert err.value.line_no == 3
        assert str(err.value).startswith("/etc/default/grub.d/odd.cfg:3: ")
        assert fragment in err.value.message

    def test_command_substitution_reaching_cmdline_through_a_variable(self):
        text = 'EXTRA=$(cat /etc/extra)\n\nGRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\n'
        with pytest.raises(GrubParseError) as err:
            parse_grub_file(text, GRUB)
        assert err.value.line_no == 3
        assert "/etc/default/grub:1" in err.value.message

    def test_command_substitution_error_names_dropin_file_in_chain(self):
        files = [(GRUB, STOCK), ("/etc/default/grub.d/50-x.cfg",
                                 '# x\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT $(hostname)"\n')]
        with pytest.raises(GrubParseError) as err:
            grub_effective(files)
        assert (err.value.path, err.value.line_no) == ("/etc/default/grub.d/50-x.cfg", 2)

    def test_unbalanced_quote_names_the_opening_line(self):
        with pytest.raises(GrubParseError) as err:
            parse_grub_file('A=1\nGRUB_CMDLINE_LINUX="quiet\nB=2\nC=3\n', GRUB)
        assert err.value.line_no == 2

    def test_unquoted_expansion_in_export_is_uncertain(self):
        with pytest.raises(GrubParseError):
            parse_grub_file('A="x y"\nexport B=$A\n', "/t")
        assert parse_grub_file('A="x y"\nexport B="$A"\nC=$A\n', "/t").env["C"] == "x y"


# ---------------------------------------------------------------------------
# GRUB editing
# ---------------------------------------------------------------------------
class TestSetGrubVar:
    def test_edits_last_assignment_in_place(self):
        text = project_fixture("etc_default_grub_pve_maxcstate5.cfg")
        new = set_grub_var(text, GRUB, "GRUB_CMDLINE_LINUX_DEFAULT",
                           "quiet amd_iommu=on iommu=pt processor.max_cstate=1 amd_pstate=active")
        old_lines, new_lines = text.splitlines(True), new.splitlines(True)
        assert len(old_lines) == len(new_lines)
        diff = [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
        assert diff == [8]
        assert new_lines[8] == ('GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=1 '
                                'amd_pstate=active"\n')
        assert set_grub_var(new, GRUB, "GRUB_CMDLINE_LINUX_DEFAULT",
                            "quiet amd_iommu=on iommu=pt processor.max_cstate=1 amd_pstate=active") == new

    def test_only_last_of_several_assignments_changes(self):
        text = 'GRUB_CMDLINE_LINUX_DEFAULT="a"\nGRUB_CMDLINE_LINUX_DEFAULT="b"  # mine\nX=1\n'
        assert set_grub_var(text, GRUB, "GRUB_CMDLINE_LINUX_DEFAULT", "b c") == \
            'GRUB_CMDLINE_LINUX_DEFAULT="a"\nGRUB_CMDLINE_LINUX_DEFAULT="b c"  # mine\nX=1\n'

    @pytest.mark.parametrize("line,value,expected", [
        ("V='quiet'", "quiet iommu=pt", "V='quiet iommu=pt'"),
        ("V=quiet", "quiet iommu=pt", 'V="quiet iommu=pt"'),
        ("V=quiet", "iommu=pt", "V=iommu=pt"),
        ('V="quiet"', 'a dyndbg="x y"', 'V="a dyndbg=\\"x y\\""'),
        ("V='quiet'", "it's", 'V="it\'s"'),
        ('V="a"\'b\'', "a b", 'V="a b"'),
        ("export V='q'", "q x", "export V='q x'"),
        ('V=""', "", 'V=""'),
        ("V=", "quiet", "V=quiet"),
        ('V=""', "quiet", 'V="quiet"'),
    ])
    def test_keeps_quote_style(self, line, value, expected):
        assert set_grub_var("# c\n" + line + "\n", "/t", "V", value) == "# c\n" + expected + "\n"

    def test_crlf_and_missing_final_newline(self):
        text = '# PVE\r\nGRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\r\nGRUB_CMDLINE_LINUX=""'
        new = set_grub_var(text, GRUB, "GRUB_CMDLINE_LINUX_DEFAULT", "quiet amd_pstate=active")
        assert new == '# PVE\r\nGRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active"\r\n' \
                      'GRUB_CMDLINE_LINUX=""'
        new2 = set_grub_var(new, GRUB, "GRUB_CMDLINE_LINUX", "x=1")
        assert new2.endswith('\r\nGRUB_CMDLINE_LINUX="x=1"')
        assert set_grub_var(new2, GRUB, "GRUB_CMDLINE_LINUX", "x=1") == new2

    def test_append_when_absent(self):
        assert set_grub_var("A=1\n", "/t", "V", "a b") == 'A=1\nV="a b"\n'
        assert set_grub_var("A=1", "/t", "V", "a b") == 'A=1\nV="a b"'
        assert set_grub_var("A=1\r\n", "/t", "V", "a") == 'A=1\r\nV="a"\r\n'
        assert set_grub_var("", "/t", "V", "a") == 'V="a"\n'

    def test_append_after_dangling_continuation_is_refused(self):
        with pytest.raises(GrubParseError):
            set_grub_var("A=1 \\", "/t", "V", "a")

    def test_continuation_assignment_is_collapsed_rest_kept(self):
        text = 'A=1\nGRUB_CMDLINE_LINUX_DEFAULT="quiet \\\n  iommu=pt"  # two lines\nB=2\n'
        assert set_grub_var(text, GRUB, "GRUB_CMDLINE_LINUX_DEFAULT", "quiet iommu=pt x") == \
            'A=1\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt x"  # two lines\nB=2\n'

    def test_expansion_prefix_is_kept(self):
        dropin = real("grub_d_usb_quirks_mcgarrah.cfg")
        env = {"GRUB_CMDLINE_LINUX": "root=ZFS=rpool/ROOT/pve-1 boot=zfs"}
        base = parse_grub_file(dropin, "/q", env=env).env["GRUB_CMDLINE_LINUX"]
        new = set_grub_var(dropin, "/q", "GRUB_CMDLINE_LINUX", base + " amd_pstate=active", env=env)
        assert new.splitlines(True)[:2] == dropin.splitlines(True)[:2]
        assert new.splitlines()[2] == ('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX usb_storage.quirks=0bc2:ac2b:,'
                                       '0bc2:2344:,0bc2:ac41:,0bc2:ab9a: amd_pstate=active"')
        assert set_grub_var(new, "/q", "GRUB_CMDLINE_LINUX", base + " amd_pstate=active", env=env) == new

    def test_expansion_prefix_needs_env_or_matching_value(self):
        text = 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT x"\n'
        with pytest.raises(GrubParseError) as err:
            set_grub_var(text, "/d", "GRUB_CMDLINE_LINUX_DEFAULT", "quiet x y")
        assert err.value.line_no == 1 and "env" in err.value.message
        with pytest.raises(GrubParseError):
            set_grub_var(text, "/d", "GRUB_CMDLINE_LINUX_DEFAULT", "other x y",
                         env={"GRUB_CMDLINE_LINUX_DEFAULT": "quiet"})
        # prefix assigned earlier in the same file: no env needed
        text2 = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n' + text
        assert set_grub_var(text2, "/d", "GRUB_CMDLINE_LINUX_DEFAULT", "quiet y").splitlines()[1] == \
            'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT y"'
        # a literal glued to the prefix gets braces so the name does not change
        assert set_grub_var(text2, "/d", "GRUB_CMDLINE_LINUX_DEFAULT", "quietx").splitlines()[1] == \
            'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT}x"'

    def test_not_certain_forms_raise(self):
        with pytest.raises(GrubParseError):
            set_grub_var('A=a\nV="x $A y"\n', "/t", "V", "x a z")
        with pytest.raises(GrubParseError):
            set_grub_var("V=`hostname`\n", "/t", "V", "x")

    def test_bad_values_refused(self):
        with pytest.raises(BootConfigError):
            set_grub_var("V=1\n", "/t", "V", "a\nB=2")
        with pytest.raises(BootConfigError):
            set_grub_var("V=1\n", "/t", "bad-name", "a")

    def test_dangerous_values_are_escaped_not_executed(self):
        new = set_grub_var('V="a"\n', "/t", "V", 'x $(reboot) `id` "q" \\')
        assert new == 'V="x \\$(reboot) \\`id\\` \\"q\\" \\\\"\n'
        assert parse_grub_file(new, "/t").env["V"] == 'x $(reboot) `id` "q" \\'


class TestRenderDropin:
    def test_text_and_roundtrip(self):
        text = render_dropin("GRUB_CMDLINE_LINUX_DEFAULT", ENSURE)
        assert text.startswith("# Managed by pvetune")
        assert text.endswith('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_pstate=active '
                             'processor.max_cstate=1"\n')
        gf = parse_grub_file(text, DROPIN, env={"GRUB_CMDLINE_LINUX_DEFAULT": "quiet"})
        assert split_cmdline(gf.env["GRUB_CMDLINE_LINUX_DEFAULT"]) == ["quiet"] + ENSURE

    def test_without_base_and_quoted_value(self):
        text = render_dropin("GRUB_CMDLINE_LINUX", ['dyndbg="file a.c +p"'], base_expr=False)
        assert text.splitlines()[-1] == 'GRUB_CMDLINE_LINUX="dyndbg=\\"file a.c +p\\""'
        assert parse_grub_file(text, DROPIN).env["GRUB_CMDLINE_LINUX"] == 'dyndbg="file a.c +p"'

    def test_rejects_injection_and_other_vars(self):
        for bad in ['a";reboot;"', "$(reboot)", "`id`", "a\nb"]:
            with pytest.raises(BootConfigError):
                render_dropin("GRUB_CMDLINE_LINUX_DEFAULT", [bad])
        with pytest.raises(BootConfigError):
            render_dropin("GRUB_DISTRIBUTOR", ["x"])


class TestPlanGrubEdit:
    def test_additions_go_to_a_new_dropin(self):
        files = [(GRUB, STOCK), ("/etc/default/grub.d/init-select.cfg", "# nothing\n")]
        plan = plan_grub_edit(files, ENSURE, [])
        assert plan == [(DROPIN, None, render_dropin("GRUB_CMDLINE_LINUX_DEFAULT", ENSURE))]
        after = apply_plan(files, plan)
        assert [p for p, _t in after] == [GRUB, DROPIN, "/etc/default/grub.d/init-select.cfg"]
        assert grub_effective(after)["args"] == ["quiet"] + ENSURE
        assert plan_grub_edit(after, ENSURE, []) == []

    def test_motivating_fixture_is_edited_in_place(self):
        text = project_fixture("etc_default_grub_pve_maxcstate5.cfg")
        files = [(GRUB, text)]
        plan = plan_grub_edit(files, ENSURE, [])
        assert len(plan) == 1 and plan[0][0] == GRUB and plan[0][1] == text
        new = plan[0][2]
        old_lines, new_lines = text.splitlines(True), new.splitlines(True)
        assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b] == [8]
        assert len(old_lines) == len(new_lines)
        assert new_lines[8] == ('GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=1 '
                                'amd_pstate=active"\n')
        after = apply_plan(files, plan)
        assert plan_grub_edit(after, ENSURE, []) == []
        # same input, same bytes
        assert plan_grub_edit(files, ENSURE, [])[0][2] == new

    def test_conflict_in_dropin_edits_the_dropin(self):
        files = [(GRUB, STOCK), ("/etc/default/grub.d/50-tuning.cfg",
                                 "# local tuning\nGRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} "
                                 "processor.max-cstate=5 nosmt\"\n")]
        plan = plan_grub_edit(files, ENSURE, [])
        assert [p for p, _o, _n in plan] == ["/etc/default/grub.d/50-tuning.cfg"]
        assert plan[0][2] == ("# local tuning\nGRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} "
                              "processor.max_cstate=1 nosmt amd_pstate=active\"\n")
        after = apply_plan(files, plan)
        assert grub_effective(after)["args"] == ["quiet", "processor.max_cstate=1", "nosmt", "amd_pstate=active"]
        assert plan_grub_edit(after, ENSURE, []) == []

    def test_existing_pvetune_dropin_is_extended(self):
        files = [(GRUB, STOCK), (DROPIN, render_dropin("GRUB_CMDLINE_LINUX_DEFAULT", ["amd_pstate=active"]))]
        plan = plan_grub_edit(files, ENSURE, [])
        assert plan == [(DROPIN, files[1][1], render_dropin("GRUB_CMDLINE_LINUX_DEFAULT", ENSURE))]

    def test_conflict_in_cmdline_linux(self):
        text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="processor.max_cstate=5 amd_pstate=passive"\n'
        plan = plan_grub_edit([(GRUB, text)], ENSURE, [])
        assert plan[0][2] == ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
                              'GRUB_CMDLINE_LINUX="processor.max_cstate=1 amd_pstate=active"\n')

    def test_conflict_spread_over_files_and_duplicates(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet processor.max_cstate=5"\nGRUB_CMDLINE_LINUX=""\n'),
                 ("/etc/default/grub.d/60-x.cfg",
                  'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT processor.max_cstate=3 '
                  'intel_pstate=disable"\n')]
        plan = plan_grub_edit(files, ENSURE, ["intel_pstate"])
        assert [p for p, _o, _n in plan] == [GRUB, "/etc/default/grub.d/60-x.cfg"]
        after = apply_plan(files, plan)
        assert grub_effective(after)["args"] == ["quiet", "processor.max_cstate=1", "amd_pstate=active"]
        assert after[1][1] == 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT"\n'
        assert plan_grub_edit(after, ENSURE, ["intel_pstate"]) == []

    def test_remove_only(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_pstate=disable"\n')]
        plan = plan_grub_edit(files, [], ["intel-pstate"])
        assert plan[0][2] == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'

    def test_later_override_falls_back_to_the_setting_file(self):
        files = [(GRUB, STOCK), ("/etc/default/grub.d/99-local.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n')]
        plan = plan_grub_edit(files, ENSURE, [])
        assert [p for p, _o, _n in plan] == ["/etc/default/grub.d/99-local.cfg"]
        after = apply_plan(files, plan)
        assert grub_effective(after)["args"] == ["quiet", "splash"] + ENSURE

    def test_argument_assembled_from_pieces_is_refused(self):
        files = [(GRUB, 'P=processor.max_\nGRUB_CMDLINE_LINUX_DEFAULT="${P}cstate=5 quiet"\n')]
        with pytest.raises(GrubParseError) as err:
            plan_grub_edit(files, ENSURE, [])
        assert err.value.path == GRUB and "several pieces" in err.value.message

    def test_argument_duplicated_by_expansion_is_refused(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX="processor.max_cstate=5"\n'
                        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX quiet"\n')]
        with pytest.raises(GrubParseError) as err:
            plan_grub_edit(files, ENSURE, [])
        assert err.value.line_no == 1 and "more than once" in err.value.message

    def test_crlf_file_keeps_crlf(self):
        text = 'GRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX_DEFAULT="quiet processor.max_cstate=5"\r\nGRUB_CMDLINE_LINUX=""'
        plan = plan_grub_edit([(GRUB, text)], ENSURE, [])
        assert plan[0][2] == ('GRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX_DEFAULT="quiet processor.max_cstate=1 '
                              'amd_pstate=active"\r\nGRUB_CMDLINE_LINUX=""')

    def test_edits_the_assignment_the_argument_comes_from(self):
        text = ('GRUB_CMDLINE_LINUX_DEFAULT="quiet processor.max_cstate=5"\n'
                'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n')
        plan = plan_grub_edit([(GRUB, text)], ENSURE, [])
        assert plan[0][2] == ('GRUB_CMDLINE_LINUX_DEFAULT="quiet processor.max_cstate=1 amd_pstate=active"\n'
                              'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n')

    def test_init_separator_in_cmdline_linux_is_refused(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX="ro -- single"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')]
        with pytest.raises(GrubParseError) as err:
            plan_grub_edit(files, ENSURE, [])
        assert "'--'" in err.value.message

    def test_hand_emptied_dropin_gets_an_assignment_appended(self):
        files = [(GRUB, STOCK), (DROPIN, "# emptied by hand\n")]
        plan = plan_grub_edit(files, ENSURE, [])
        assert plan == [(DROPIN, "# emptied by hand\n", "# emptied by hand\n"
                         'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_pstate=active '
                         'processor.max_cstate=1"\n')]

    def test_cmdline_linux_as_target_and_no_grub_file(self):
        plan = plan_grub_edit([(GRUB, STOCK)], ENSURE, [], var="GRUB_CMDLINE_LINUX")
        assert plan == [(DROPIN, None, render_dropin("GRUB_CMDLINE_LINUX", ENSURE))]
        assert grub_effective(apply_plan([], plan_grub_edit([], ENSURE, [])))["args"] == ENSURE

    def test_uncertain_file_is_never_edited(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $(cat /x)"\n')]
        with pytest.raises(GrubParseError):
            plan_grub_edit(files, ENSURE, [])

    def test_nothing_to_do(self):
        files = [(GRUB, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active processor.max-cstate=1"\n')]
        assert plan_grub_edit(files, ENSURE, []) == []

    def test_injection_in_ensure_refused(self):
        with pytest.raises(BootConfigError):
            plan_grub_edit([(GRUB, STOCK)], ['x";reboot;"'], [])


# ---------------------------------------------------------------------------
# systemd-boot /etc/kernel/cmdline
# ---------------------------------------------------------------------------
class TestKernelCmdlineFile:
    def test_realdata(self):
        text = real("etc_kernel_cmdline_zfs_i915_435.txt")
        args, info = parse_kernel_cmdline_file(text)
        assert args[:2] == ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs"]
        assert info["has_root"] and info["trailing_newline"] and not info["ignored_lines"]
        new_args, _ = plan_args(args, ENSURE, [])
        new = set_kernel_cmdline_file(text, new_args)
        assert new == text.rstrip("\n") + " amd_pstate=active processor.max_cstate=1\n"
        again, _ = plan_args(parse_kernel_cmdline_file(new)[0], ENSURE, [])
        assert set_kernel_cmdline_file(new, again) == new

    def test_only_first_line_counts_and_changes(self):
        text = "root=/dev/sda1 quiet\nthis line is ignored by proxmox-boot-tool\n\nlast"
        args, info = parse_kernel_cmdline_file(text)
        assert args == ["root=/dev/sda1", "quiet"]
        assert info["ignored_lines"] == ["this line is ignored by proxmox-boot-tool", "last"]
        assert not info["trailing_newline"]
        new = set_kernel_cmdline_file(text, args + ["iommu=pt"])
        assert new == "root=/dev/sda1 quiet iommu=pt\nthis line is ignored by proxmox-boot-tool\n\nlast"

    def test_no_trailing_newline_and_crlf(self):
        assert set_kernel_cmdline_file("root=x quiet", ["root=x"]) == "root=x"
        assert set_kernel_cmdline_file("root=x quiet\r\nrest\r\n", ["root=x", "a=1"]) == "root=x a=1\r\nrest\r\n"
        assert parse_kernel_cmdline_file("root=x\r\n")[1]["crlf"]

    def test_empty_file_and_missing_root(self):
        for text in ("", "\n", "   \n"):
            with pytest.raises(BootConfigError) as err:
                set_kernel_cmdline_file(text, ["root=x"])
            assert "root=" in str(err.value)
        with pytest.raises(BootConfigError) as err:
            set_kernel_cmdline_file("root=x quiet\n", ["quiet", "noroot=1"])
        assert "without root=" in str(err.value)
        assert parse_kernel_cmdline_file("")[1]["empty"]

    def test_bad_args_refused(self):
        with pytest.raises(BootConfigError):
            set_kernel_cmdline_file("root=x\n", ["root=x", "a\nb"])
        with pytest.raises(BootConfigError):
            set_kernel_cmdline_file("root=x\n", ["root=x", ""])


# ---------------------------------------------------------------------------
# proxmox-boot-tool status and loader detection
# ---------------------------------------------------------------------------
class TestPbtStatus:
    def test_realdata_uefi_systemd_boot(self):
        st = parse_pbt_status(real("pbt_status_mrmanuel_uefi_systemdboot.txt"))
        assert st["booted"] == "uefi" and st["managed"] is True and not st["unparsed"]
        assert st["esps"] == [{"uuid": "E014-501F", "loaders": {"uefi": ["6.8.12-4-pve"]}, "loader": "systemd-boot"}]

    def test_realdata_legacy_grub(self):
        st = parse_pbt_status(real("pbt_status_mrmanuel_grub_legacy.txt"))
        assert st["booted"] == "legacy"
        assert st["esps"][0]["loaders"] == {"grub": ["6.8.12-4-pve", "6.8.12-8-pve"]}

    @pytest.mark.parametrize("name,uuids", [
        ("pbt_status_mcgarrah_edgar_two_esps.txt", ["A4AA-5148", "EEC6-6947"]),
        ("pbt_status_mcgarrah_harlan.txt", ["D91B-B982", "D91C-8216"]),
    ])
    def test_realdata_two_esps(self, name, uuids):
        st = parse_pbt_status(real(name))
        assert [e["uuid"] for e in st["esps"]] == uuids
        assert {e["loader"] for e in st["esps"]} == {"grub"}

    def test_both_loaders_warnings_and_old_format(self):
        text = ("System currently booted with uefi\n"
                "WARN: /dev/disk/by-uuid/1234-5678 does not exist - clean "
                "'/etc/kernel/proxmox-boot-uuids'! - skipping\n"
                "AAAA-BBBB is configured with: uefi (versions: 6.14.8-2-pve, 6.8.12-9-pve), "
                "grub (versions: 6.14.8-2-pve)\n"
                "CCCC-DDDD is configured with: uefi,grub\n")
        st = parse_pbt_status(text)
        assert st["esps"][0]["loaders"] == {"uefi": ["6.14.8-2-pve", "6.8.12-9-pve"], "grub": ["6.14.8-2-pve"]}
        assert st["esps"][0]["loader"] == "both"
        assert st["esps"][1]["loaders"] == {"uefi": [], "grub": []}
        assert len(st["warnings"]) == 1

    def test_not_managed(self):
        st = parse_pbt_status("E: /etc/kernel/proxmox-boot-uuids does not exist.\n")
        assert st["managed"] is False and st["esps"] == []


class TestDetectLoader:
    def test_rule1_captured_status_systemd_boot(self, tmp_path):
        root = tree(tmp_path, {bootargs.PBT_STATUS_SNAPSHOT: real("pbt_status_mrmanuel_uefi_systemdboot.txt")})
        res = detect_loader(root)
        assert (res["loader"], res["rule"], res["managed_by_pbt"], res["uefi"]) == \
            ("systemd-boot", "pbt-status", True, True)
        assert res["evidence"] == [bootargs.PBT_STATUS_SNAPSHOT]
        assert res["cmdline_path"] == "/etc/kernel/cmdline"

    @pytest.mark.parametrize("name", ["pbt_status_mrmanuel_grub_legacy.txt", "pbt_status_mcgarrah_edgar_two_esps.txt"])
    def test_rule1_captured_status_grub(self, tmp_path, name):
        root = tree(tmp_path, {bootargs.PBT_STATUS_SNAPSHOT: real(name), "/sys/firmware/efi": DIR})
        res = detect_loader(root)
        assert (res["loader"], res["rule"], res["managed_by_pbt"], res["uefi"]) == ("grub", "pbt-status", True, False)
        assert res["cmdline_path"] == "/etc/default/grub"

    def test_rule1_live_status_text_wins(self, tmp_path):
        root = tree(tmp_path, {bootargs.PBT_STATUS_SNAPSHOT: real("pbt_status_mrmanuel_grub_legacy.txt")})
        res = detect_loader(root, pbt_status_text=real("pbt_status_mrmanuel_uefi_systemdboot.txt"))
        assert res["loader"] == "systemd-boot" and res["evidence"] == ["proxmox-boot-tool status"]

    def test_rule1_not_managed(self, tmp_path):
        root = tree(tmp_path, {"/sys/firmware/efi": DIR})
        res = detect_loader(root, pbt_status_text="E: /etc/kernel/proxmox-boot-uuids does not exist.\n")
        assert (res["loader"], res["rule"], res["managed_by_pbt"]) == ("grub", "pbt-status", False)

    def test_rule1_ambiguous_falls_to_rule2(self, tmp_path):
        root = tree(tmp_path, {bootargs.ESP_LIST: "AAAA-BBBB\n", "/sys/firmware/efi": DIR,
                               "/etc/kernel/cmdline": "root=x\n"})
        status = ("System currently booted with uefi\n"
                  "AAAA-BBBB is configured with: uefi (versions: 1), grub (versions: 1)\n")
        res = detect_loader(root, pbt_status_text=status)
        assert (res["loader"], res["rule"]) == ("systemd-boot", "esp-list+uefi")
        assert res["notes"] and "proxmox-boot-tool status" in res["evidence"]

    def test_rule2_loaderinfo_efivar(self, tmp_path):
        root = tree(tmp_path, {bootargs.ESP_LIST: "E014-501F\n", bootargs.LOADER_INFO_EFIVAR: "\x06\x00\x00\x00s"})
        res = detect_loader(root)
        assert (res["loader"], res["rule"], res["uefi"]) == ("systemd-boot", "esp-list+uefi", True)
        assert bootargs.LOADER_INFO_EFIVAR in res["evidence"]
        assert res["esp_uuids"] == ["E014-501F"]

    def test_rule2_kernel_cmdline(self, tmp_path):
        root = tree(tmp_path, {bootargs.ESP_LIST: "E014-501F\n", "/sys/firmware/efi": DIR,
                               "/etc/kernel/cmdline": real("etc_kernel_cmdline_zfs_i915_435.txt")})
        res = detect_loader(root)
        assert (res["loader"], res["rule"]) == ("systemd-boot", "esp-list+uefi")
        assert "/etc/kernel/cmdline" in res["evidence"]

    def test_rule2_uefi_grub(self, tmp_path):
        root = tree(tmp_path, {bootargs.ESP_LIST: "E014-501F\n", "/sys/firmware/efi/efivars": DIR})
        res = detect_loader(root)
        assert (res["loader"], res["rule"], res["managed_by_pbt"]) == ("grub", "esp-list+uefi", True)

    def test_rule3(self, tmp_path):
        res = detect_loader(tree(tmp_path, {"/etc/default/grub": STOCK, "/etc/kernel/cmdline": "root=x\n"}))
        assert (res["loader"], res["rule"], res["managed_by_pbt"], res["uefi"]) == \
            ("grub", "grub-default", False, False)
        res = detect_loader(tree(tmp_path / "b", {bootargs.ESP_LIST: "865E-6ADE\n"}))
        assert (res["loader"], res["rule"], res["managed_by_pbt"]) == ("grub", "grub-default", True)


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
PKG_VERSIONS = [ln.split("proxmox-kernel-", 1)[1][:-len("-signed")]
                for ln in real("pve_kernel_pkg_names_communityscripts1114.txt").splitlines() if ln.strip()]


class TestKernelVersions:
    @pytest.mark.parametrize("ver", ["6.14.8-2-pve", "6.8.12-4-pve", "6.2.11-1-pve-relaxablermrr", "6.1.0-27-amd64",
                                     "5.15.30-2-pve", "6.5.0-1~bpo12+1"] + PKG_VERSIONS)
    def test_accepts(self, ver):
        assert validate_kernel_version(ver) == ver

    @pytest.mark.parametrize("ver", ["", "-6.8.12", "6.8 12", "6.8;reboot", "6.8$(id)", "6.8`id`", "../6.8",
                                     "6.8/../../etc", "6.8..1", "6.8\n", "pve-6.8", "6.8|x", "6.8>x",
                                     "6." + "1" * 63, None])
    def test_rejects(self, ver):
        with pytest.raises(BootConfigError):
            validate_kernel_version(ver)

    def test_realdata_package_names_sort(self):
        assert sorted(PKG_VERSIONS) != PKG_VERSIONS  # a plain string sort puts 6.8.12 before 6.8.4
        assert sorted(sorted(PKG_VERSIONS), key=kernel_sort_key) == PKG_VERSIONS
        assert PKG_VERSIONS[-1] == "6.8.12-2-pve"

    def test_realdata_update_grub_order_is_reverse_version_sort(self):
        found = [ln.rsplit("vmlinuz-", 1)[1] for ln in real("pbt_kernel_pin_grub_aterfax42.txt").splitlines()
                 if ln.startswith("Found linux image:")]
        assert found == ["6.2.11-1-pve-relaxablermrr", "5.15.108-1-pve", "5.15.102-1-pve"]
        assert sorted(found, key=kernel_sort_key, reverse=True) == found

    def test_sort_like_sort_V(self):
        vers = ["6.8.12-10-pve", "6.14.8-2-pve", "6.8.12-9-pve", "6.14.8-1-pve", "6.8.4-2-pve", "6.14-rc1",
                "6.14~rc1", "6.14"]
        assert sorted(vers, key=kernel_sort_key) == [
            "6.8.4-2-pve", "6.8.12-9-pve", "6.8.12-10-pve", "6.14~rc1", "6.14", "6.14-rc1", "6.14.8-1-pve",
            "6.14.8-2-pve"]
        assert kernel_version.version_compare("6.2.11-1-pve", "6.2.11-1-pve-relaxablermrr") < 0
        assert kernel_version.version_compare("1.01", "1.1") != 0

    def test_in_series(self):
        assert in_series("6.14.8-2-pve", "6.14")
        assert in_series("6.14.0-1-pve", "6.14") and in_series("6.14-rc1", "6.14")
        assert not in_series("6.140.1-1-pve", "6.14")
        assert not in_series("6.8.12-4-pve", "6.14")
        assert in_series("6.8.12-4-pve", "6") and in_series("6.8.12-4-pve", "6.8.12")
        assert not in_series("pve", "6.14")

    def test_kernel_list_realdata(self):
        res = parse_pbt_kernel_list(real("pbt_kernel_list_aterfax42.txt"))
        assert res == {"manual": [], "auto": ["5.15.102-1-pve", "5.15.108-1-pve", "6.2.11-1-pve-relaxablermrr"],
                       "pinned": None, "next_boot": None, "unparsed": []}

    def test_kernel_list_with_pins(self):
        text = ("Manually selected kernels:\n6.8.12-4-pve\n\nAutomatically selected kernels:\n6.8.12-9-pve\n"
                "6.14.8-2-pve\n\nPinned kernel:\n6.14.8-2-pve\n\nKernel pinned on next-boot:\n6.8.12-9-pve\n")
        res = parse_pbt_kernel_list(text)
        assert res["manual"] == ["6.8.12-4-pve"]
        assert res["auto"] == ["6.8.12-9-pve", "6.14.8-2-pve"]
        assert (res["pinned"], res["next_boot"]) == ("6.14.8-2-pve", "6.8.12-9-pve")
        assert parse_pbt_kernel_list("garbage $(x)\n")["unparsed"] == ["garbage $(x)"]

    @pytest.mark.parametrize("value,expected", [
        (None, (None, "entry0")), ("0", (None, "entry0")), ("saved", (None, "saved")), ("1>2", (None, "index")),
        ("gnulinux-advanced-6b2c0f3e>gnulinux-6.14.8-2-pve-advanced-6b2c0f3e", ("6.14.8-2-pve", "id")),
        ("gnulinux-advanced-a1>gnulinux-6.8.12-4-pve-recovery-a1", ("6.8.12-4-pve", "id")),
        ("Advanced options for Proxmox VE GNU/Linux>Proxmox VE GNU/Linux, with Linux 6.8.12-4-pve",
         ("6.8.12-4-pve", "title")),
        ("gnulinux-simple-6b2c0f3e", (None, "entry0")),
        ("gnulinux-advanced-a>gnulinux-6.8;x-advanced-a", (None, "unknown")),
        ("Windows", (None, "unknown")),
    ])
    def test_grub_default_kernel(self, value, expected):
        assert grub_default_kernel(value) == expected


def kernel_tree(tmp_path, extra=None, versions=("6.8.12-9-pve", "6.14.8-2-pve", "6.8.12-10-pve")):
    files = {"/proc/sys/kernel/osrelease": "6.8.12-9-pve\n", GRUB: STOCK}
    for v in versions:
        files["/boot/vmlinuz-" + v] = "kernel"
        files["/boot/initrd.img-" + v] = "initrd"
        files["/lib/modules/%s/modules.dep" % v] = ""
    files["/lib/modules/6.5.13-6-pve/extra/x.ko"] = ""
    files.update(extra or {})
    return tree(tmp_path, files)


PIN_ID = "6b2c0f3e9a1d4e55"


def pin_snippet(ver):
    return 'GRUB_DEFAULT="gnulinux-advanced-%s>gnulinux-%s-advanced-%s"\n' % (PIN_ID, ver, PIN_ID)


class TestKernelState:
    def test_plain_grub_newest(self, tmp_path):
        st = kernel_state(kernel_tree(tmp_path))
        assert st["running"] == "6.8.12-9-pve"
        assert st["images"] == ["6.8.12-9-pve", "6.8.12-10-pve", "6.14.8-2-pve"]
        assert st["installed"] == ["6.5.13-6-pve", "6.8.12-9-pve", "6.8.12-10-pve", "6.14.8-2-pve"]
        assert st["modules"][0] == "6.5.13-6-pve"
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.14.8-2-pve", "newest-installed")
        assert st["grub_default"]["value"] == "0" and st["grub_default"]["form"] == "entry0"
        assert st["loader"] == "grub" and not st["warnings"] and not st["errors"]

    def test_grub_pin_snippet(self, tmp_path):
        root = kernel_tree(tmp_path, {GRUB_PIN: pin_snippet("6.8.12-10-pve"), kernel.PIN_FILE: "6.8.12-10-pve\n"})
        st = kernel_state(root)
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.8.12-10-pve", "grub-pin")
        assert st["grub_default"]["path"] == GRUB_PIN and st["grub_default"]["form"] == "id"
        assert st["pinned"] == "6.8.12-10-pve" and not st["warnings"]

    def test_grub_default_set_by_hand(self, tmp_path):
        title = "Advanced options for Proxmox VE GNU/Linux>Proxmox VE GNU/Linux, with Linux 6.8.12-9-pve"
        st = kernel_state(kernel_tree(tmp_path, {GRUB: STOCK.replace("GRUB_DEFAULT=0", 'GRUB_DEFAULT="%s"' % title)}))
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.8.12-9-pve", "grub-default")
        assert (st["grub_default"]["path"], st["grub_default"]["line"]) == (GRUB, 1)

    def test_grub_pin_file_disagreeing_with_grub_default_warns(self, tmp_path):
        root = kernel_tree(tmp_path, {kernel.PIN_FILE: "6.8.12-10-pve\n"})
        st = kernel_state(root)
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.14.8-2-pve", "newest-installed")
        assert any("proxmox-boot-pin" in w for w in st["warnings"])

    def test_grub_default_naming_missing_kernel_falls_back(self, tmp_path):
        st = kernel_state(kernel_tree(tmp_path, {GRUB_PIN: pin_snippet("6.2.16-3-pve")}))
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.14.8-2-pve", "newest-installed")
        assert any("not installed" in w for w in st["warnings"])

    def test_grub_saved_entry(self, tmp_path):
        grubenv = ("# GRUB Environment Block\nsaved_entry=gnulinux-advanced-%s>gnulinux-6.8.12-9-pve-advanced-%s\n"
                   % (PIN_ID, PIN_ID)) + "#" * 900
        root = kernel_tree(tmp_path, {GRUB: STOCK.replace("GRUB_DEFAULT=0", "GRUB_DEFAULT=saved"),
                                      kernel.GRUB_ENV: grubenv})
        st = kernel_state(root)
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.8.12-9-pve", "grub-saved-entry")

    def test_grub_index_is_unknown(self, tmp_path):
        st = kernel_state(kernel_tree(tmp_path, {GRUB: STOCK.replace("GRUB_DEFAULT=0", 'GRUB_DEFAULT="1>2"')}))
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == (None, "unknown")

    def test_grub_parse_error_is_recorded(self, tmp_path):
        st = kernel_state(kernel_tree(tmp_path, {GRUB: "GRUB_DEFAULT=$(cat /x)\n"}))
        assert st["errors"][0]["path"] == GRUB and ":1:" in st["errors"][0]["error"]
        assert st["next_boot_rule"] == "unknown"

    def test_systemd_boot_pins(self, tmp_path):
        base = {bootargs.ESP_LIST: "E014-501F\n", "/sys/firmware/efi/efivars": DIR, "/etc/kernel/cmdline": "root=x\n"}
        st = kernel_state(kernel_tree(tmp_path / "a", base))
        assert (st["loader"], st["next_boot_kernel"], st["next_boot_rule"]) == \
            ("systemd-boot", "6.14.8-2-pve", "newest-installed")
        st = kernel_state(kernel_tree(tmp_path / "b", dict(base, **{kernel.PIN_FILE: "6.8.12-10-pve"})))
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.8.12-10-pve", "pin")
        st = kernel_state(kernel_tree(tmp_path / "c", dict(base, **{kernel.PIN_FILE: "6.8.12-10-pve\n",
                                                                    kernel.NEXT_BOOT_PIN: "6.14.8-2-pve\n"})))
        assert (st["pinned"], st["next_boot"]) == ("6.8.12-10-pve", "6.14.8-2-pve")
        assert (st["next_boot_kernel"], st["next_boot_rule"]) == ("6.14.8-2-pve", "next-boot-pin")

    def test_bad_pin_content_is_an_error_not_a_kernel(self, tmp_path):
        base = {bootargs.ESP_LIST: "E014-501F\n", "/sys/firmware/efi/efivars": DIR, "/etc/kernel/cmdline": "root=x\n"}
        st = kernel_state(kernel_tree(tmp_path, dict(base, **{kernel.PIN_FILE: "$(reboot)\n"})))
        assert st["pinned"] is None and st["errors"][0]["path"] == kernel.PIN_FILE
        assert st["next_boot_rule"] == "newest-installed"

    def test_motivating_case_series(self, tmp_path):
        st = kernel_state(kernel_tree(tmp_path, {GRUB_PIN: pin_snippet("6.14.8-2-pve")}))
        assert in_series(st["next_boot_kernel"], "6.14")
        assert not in_series(st["running"], "6.14")


GRUB_PIN = kernel.GRUB_PIN_SNIPPET


# ---------------------------------------------------------------------------
# Differential check: the evaluator agrees with dash (the /bin/sh update-grub
# runs under) on the supported subset.  Skipped where dash is not installed.
# ---------------------------------------------------------------------------
DASH = shutil.which("dash")
DIFF_CASES = [
    STOCK,
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n# c\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n'
    "GRUB_CMDLINE_LINUX_DEFAULT='q i'\n",
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet \\\n    iommu=pt \\\n    amd_iommu=on"\nGRUB_CMDLINE_LINUX=root=x\\\nyz\n'
    "export \\\n  GRUB_DEFAULT=saved\n",
    "A='single \"dq\" $NOT'\n"
    'B="esc \\" \\$ \\` \\\\ \\n end"\n'
    "C=plain\\ word\n"
    'D="$A"\'|lit\'"${C}"\n'
    'E=""\nF=\nG=a#b # comment\nH=cost$\n',
    "export GRUB_X\nexport A=1 B='2 3'\nC=1 D=2\n",
    'P=processor.max_\nGRUB_CMDLINE_LINUX_DEFAULT="${P}cstate=5 quiet"\n'
    'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX_DEFAULT"\n',
    strip_header(real("grub_d_usb_quirks_mcgarrah.cfg")),
    real("grub_d_usb_quirks_mcgarrah.cfg"),
    'GRUB_DEFAULT="gnulinux-advanced-a1>gnulinux-6.14.8-2-pve-advanced-a1"\n',
    set_grub_var('V="a"\n', "/t", "V", 'x $(reboot) `id` "q" \\'),
    render_dropin("GRUB_CMDLINE_LINUX", ['dyndbg="file a.c +p"', "quiet"]),
]
DIFF_VARS = ["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_DEFAULT", "A", "B", "C", "D", "E", "F",
             "G", "H", "V", "P"]


@pytest.mark.skipif(DASH is None, reason="dash not installed")
@pytest.mark.parametrize("text", DIFF_CASES)
def test_evaluator_agrees_with_dash(tmp_path, text):
    path = tmp_path / "grub.cfg"
    path.write_bytes(text.encode("utf-8"))
    script = '. "$1"; for v in %s; do eval "printf \'%%s=%%s\\0\' $v \\"\\${$v-<unset>}\\""; done' % " ".join(DIFF_VARS)
    out = subprocess.run([DASH, "-c", script, "dash", str(path)], env={"PATH": "/usr/bin:/bin"},
                         stdout=subprocess.PIPE, check=True).stdout.decode("utf-8")
    shell = dict(item.split("=", 1) for item in out.split("\0") if item)
    env = parse_grub_file(text, str(path)).env
    mine = {v: env.get(v, "<unset>") for v in DIFF_VARS}
    assert mine == shell
