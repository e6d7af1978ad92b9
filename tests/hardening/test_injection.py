"""No injection: every inventory value that reaches a command line or a file is validated first.

Module level: each hostile value (shell metacharacters, newlines, NUL, ``../``, option injection,
over-long values, wrong types) for each option of each module is rejected: the module fails naming
the option or the value, no command runs (the stand-ins' calls.log stays empty) and the tree does not
change by one byte.  One tree serves every attempt because none may change it.

Playbook level: the same values through fix.yml -e (run id, policy values, CT ids, PCI addresses,
cgroup version, root) stop the run before anything happens: no stand-in call, tree unchanged, and
for the run id no record or directory outside the report directory either.
"""
import json
import os

import hardening_lib as lib
import pytest

SHELL = ["1; reboot", "$(reboot)", "`reboot`", "a|sh", "a && b", "a\nreboot", "a\rb", "a\x00b", "x > /etc/passwd"]
TRAVERSAL = ["../../etc/shadow", "../x"]
OPTION = ["--foo", "-rf"]
LONG = ["9" * 5000]
HOSTILE = SHELL + TRAVERSAL + OPTION + LONG

# (module, base args, option, values); each value replaces the option in the base args.
MATRIX = [
    ("pvetune_kernel", {"series": "6.14", "package": "proxmox-kernel-6.14"}, "version",
     HOSTILE + ["6.14.8-2-pve; reboot", "6.14.8-2-pve\n"]),
    ("pvetune_kernel", {"series": "6.14"}, "package", HOSTILE + ["proxmox-kernel-6.14=6.8.12-4", "Proxmox"]),
    ("pvetune_kernel", {"package": "proxmox-kernel-6.14"}, "series", HOSTILE + ["6.14.1", "6"]),
    ("pvetune_pcie_mrrs", {}, "bdfs", [[v] for v in HOSTILE + ["0000:01:00.0\n", "01:00.0", "0000:01:00.0 -f"]]),
    ("pvetune_pcie_mrrs", {}, "vendor", HOSTILE + ["0x10DE"]),
    ("pvetune_pcie_mrrs", {}, "class_prefix", HOSTILE),
    ("pvetune_pcie_mrrs", {}, "mrrs", [4095, 0, -1, 8192]),
    ("pvetune_lxc_gpu", {}, "ctids", [[v] for v in HOSTILE + ["101; reboot", "1e3", "0101", True, 99, 10 ** 10,
                                                             "101\n"]]),
    ("pvetune_lxc_gpu", {}, "cgroup_version", HOSTILE),
    ("pvetune_lxc_gpu", {}, "restart_timeout", [-1, 10 ** 6]),
    ("pvetune_cmdline", {}, "ensure", [[v] for v in HOSTILE + ['quiet"', "a=$(id)", "a='b'", "x=`id`",
                                                              "a=b c"]]),
    ("pvetune_cmdline", {}, "remove", [[v] for v in HOSTILE]),
    ("pvetune_cmdline", {"ensure": ["amd_pstate=active"]}, "dropin",
     ["/etc/default/grub.d/../../shadow.cfg", "/etc/passwd", "/etc/default/grub.d/a;b.cfg",
      "/etc/default/grub.d/x.cfg\n", "/etc/default/grub.d/-x.cfg"]),
    ("pvetune_sysctl", {}, "settings", [{v: "0"} for v in HOSTILE + ["kernel.numa_balancing\n", "kernel..x",
                                                                    "../kernel.x"]]
     + [{"kernel.numa_balancing": v} for v in SHELL + TRAVERSAL + OPTION + LONG]),
    ("pvetune_sysctl", {"settings": {"kernel.numa_balancing": 0}}, "file",
     ["/etc/sysctl.d/../../etc/shadow.conf", "/etc/passwd", "/etc/sysctl.d/a;b.conf", "/etc/sysctl.d/x.conf\n"]),
    ("pvetune_cpufreq", {"epp": "performance"}, "governor", HOSTILE + ["Performance"]),
    ("pvetune_cpufreq", {"governor": "performance"}, "epp", HOSTILE),
    ("pvetune_cpufreq", {"governor": "performance"}, "amd_pstate_mode", HOSTILE),
    ("pvetune_lock", {}, "run_id", HOSTILE),
    ("pvetune_lock", {"run_id": "inj"}, "path", ["/run/../etc/shadow", "/etc/shadow", "/run/x\n"]),
    ("pvetune_lock", {"run_id": "inj"}, "owner", ["a\nb", "a\x00b", "x" * 300]),
    ("pvetune_lock", {"run_id": "inj"}, "token", ["$(reboot)", "ABC", "a" * 65, "0a\n"]),
    ("pvetune_lock", {"run_id": "inj"}, "controller", ["ops1\x1b[2J", "x" * 300]),
    ("pvetune_gpu_health", {}, "ctids", [[v] for v in HOSTILE + ["101; reboot"]]),
    ("pvetune_facts", {}, "policy", [{"kernel_series": v} for v in HOSTILE]
     + [{"kernel_package": v} for v in HOSTILE] + [{"cmdline_required": [v]} for v in HOSTILE]
     + [{"governor": v} for v in HOSTILE] + [{"pcie_vendor": v} for v in HOSTILE]
     + [{"numa_balancing": v} for v in ["0; reboot", True, 2]]),
]
for _module, _base in (("pvetune_kernel", {}), ("pvetune_pcie_mrrs", {}), ("pvetune_lxc_gpu", {}),
                       ("pvetune_cmdline", {}), ("pvetune_sysctl", {"settings": {"kernel.numa_balancing": 0}}),
                       ("pvetune_cpufreq", {"governor": "performance"}), ("pvetune_rollback", {})):
    MATRIX.append((_module, _base, "run_id", HOSTILE + ["x/y", ".hidden", "a" * 65]))
    MATRIX.append((_module, dict(_base, run_id="inj"), "root",
                   ["/tmp/../", "relative/dir", "/x\ny", "/.", "TREE" + "/.." * 20, "TREE/\x1b[0m"]))

ATTEMPTS = [(m, b, o, v) for m, b, o, values in MATRIX for v in values]


def _id(attempt):
    module, _base, option, value = attempt
    return "%s-%s-%s" % (module[8:], option, json.dumps(value)[:24])


@pytest.fixture(scope="module")
def target(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "injection")
    before = lib.files_of(root, ())
    yield root, before
    lib.rmtree(root)


def test_enough_attempts():
    assert len(ATTEMPTS) >= 300


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[_id(a) for a in ATTEMPTS])
def test_module_rejects_before_acting(target, attempt):
    root, before = target
    module, base, option, value = attempt
    if isinstance(value, str) and value.startswith("TREE"):
        value = value.replace("TREE", root)
    args = dict(base, root=root)
    args[option] = value
    if module not in ("pvetune_facts", "pvetune_gpu_health", "pvetune_lock") and "run_id" not in args:
        args["run_id"] = "inj"
    res = lib.run_module(module, args)
    assert res.get("failed"), "%s accepted %s=%r: %s" % (module, option, value, json.dumps(res)[:300])
    assert not lib.no_traceback(res), res.get("msg")
    assert lib.calls(root) == [], "a command ran before %s=%r was rejected" % (option, value)
    assert lib.differences(before, lib.files_of(root, ())) == [], "the tree changed"


# -- through the playbook ---------------------------------------------------------------------------------------
PLAYBOOK_ATTEMPTS = [
    ({"pvetune_run_id_override": "../../../pwned"}, "pvetune_run_id_override"),
    ({"pvetune_run_id_override": "x; touch /tmp/pvetune-pwned"}, "pvetune_run_id_override"),
    ({"pvetune_run_id_override": "--foo"}, "pvetune_run_id_override"),
    ({"pvetune_policy": {"kernel_series": "6.14; reboot"}}, "kernel_series"),
    ({"pvetune_policy": {"kernel_package": "--allow-downgrades"}}, "kernel_package"),
    ({"pvetune_policy": {"cmdline_required": ["quiet\nGRUB_DEFAULT=1"]}}, "cmdline_required"),
    ({"pvetune_policy": {"governor": "$(reboot)"}}, "governor"),
    ({"pvetune_lxc_ctids": ["101; reboot"]}, "pvetune_lxc_ctids"),
    ({"pvetune_lxc_ctids": ["../101"]}, "pvetune_lxc_ctids"),
    ({"pvetune_pcie_bdfs": ["--foo"]}, "pvetune_pcie_bdfs"),
    ({"pvetune_pcie_bdfs": ["0000:01:00.0; reboot"]}, "pvetune_pcie_bdfs"),
    ({"pvetune_lxc_cgroup_version": "2; reboot"}, "pvetune_lxc_cgroup_version"),
]


def test_playbook_rejects_before_acting(hardening_tmp):
    root = lib.scratch("pve-gpu01", hardening_tmp, "injection-playbook")
    report_dir = os.path.join(hardening_tmp, "inj-reports", "deep")
    os.makedirs(report_dir)
    inventory = lib.write_inventory(os.path.join(hardening_tmp, "inj-inventory.yml"), {"pve-gpu01": root})
    before = lib.files_of(root, ())
    for extravars, word in PLAYBOOK_ATTEMPTS + [({"pvetune_root": root + "/.." * 20}, "resolves to /")]:
        run = lib.run_playbook(hardening_tmp, "fix.yml", inventory,
                               extravars=dict(extravars, pvetune_report_dir=report_dir))
        assert run.rc != 0, extravars
        failures = run.failures()
        assert failures, extravars
        # An invalid policy is said once by the run check (a message, not a failure); each host then fails.
        said = [e["event_data"]["res"].get("msg") for e in run.events if e.get("event") == "runner_on_ok"
                and e["event_data"].get("role") == "pvetune_run_check"]
        text = json.dumps([f["res"].get("msg") for f in failures] + said)
        assert word in text, (extravars, text)
        assert "Traceback" not in text
        assert lib.calls(root) == [], (extravars, lib.calls(root))
        assert lib.differences(before, lib.files_of(root, ())) == [], extravars
        # No task of the fix role went through (its event_data names the role; task names carry no prefix).
        ran = [e["event_data"].get("task") for e in run.events
               if e.get("event") == "runner_on_ok" and e["event_data"].get("role") == "pvetune_fix"]
        assert ran == [], (extravars, ran)
    assert os.listdir(os.path.dirname(report_dir)) == ["deep"], "a record escaped the report dir"
    for dirpath, dirs, files in os.walk(os.path.dirname(report_dir)):
        assert not [n for n in dirs + files if "pwned" in n], dirpath
    assert not os.path.exists("/tmp/pvetune-pwned")
    assert not [n for n in os.listdir(hardening_tmp) if "pwned" in n]
