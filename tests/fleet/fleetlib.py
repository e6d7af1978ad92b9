"""Helpers of the fleet compliance suite (see conftest.py): the host seen through its root, the policy."""
import json
import re
import shlex

import pytest

# The policy (defaults and validation) is pvetune's own, from module_utils/pvetune/core/policy.py;
# tests/conftest.py makes ansible.module_utils.pvetune importable.
from ansible.module_utils.pvetune.concerns.lxcgpu.sources import cgroup_version_of
from ansible.module_utils.pvetune.core.policy import PolicyError, merge_policy


def load_policy(path):
    """pvetune's DEFAULT_POLICY with the overrides of ``path`` (validated by pvetune's own rules)."""
    if not path:
        return merge_policy(None)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except ValueError:
        import yaml  # PyYAML: installed with ansible-core

        data = yaml.safe_load(text)
    data = data or {}
    if isinstance(data, dict) and "pvetune_policy" in data:
        data = data["pvetune_policy"] or {}
    try:
        return merge_policy(data)
    except PolicyError as exc:
        raise pytest.UsageError("--pvetune-policy %s: %s" % (path, exc))


class Fleet:
    """The host seen through its root: reads and commands in one place (one remote call each)."""

    def __init__(self, host, root):
        self.host = host
        self.root = "/" + root.strip("/") if root.strip("/") else "/"
        self.live = self.root == "/"

    def path(self, host_path):
        return host_path if self.live else self.root + "/" + host_path.lstrip("/")

    def q(self, host_path):
        """A shell word for a host path under the root (globs after the root stay globs)."""
        full = self.path(host_path)
        if self.live:
            return full
        return shlex.quote(self.root) + full[len(self.root):]

    def run(self, command, *args):
        return self.host.run(command, *args)

    def check_output(self, command, *args):
        return self.host.check_output(command, *args)

    def read(self, host_path, default=None):
        f = self.host.file(self.path(host_path))
        if not f.exists:
            if default is not None:
                return default
            pytest.fail("%s does not exist on %s" % (self.path(host_path), self.name))
        return f.content_string

    def exists(self, host_path):
        return self.host.file(self.path(host_path)).exists

    def grep_files(self, *globs):
        """{host path: first line} for every existing file matching the globs (one remote call)."""
        words = " ".join(self.q(g) for g in globs)
        out = self.run("awk 'FNR == 1 { print FILENAME \"\\t\" $0; nextfile }' %s 2>/dev/null; true" % words).stdout
        result = {}
        for line in out.splitlines():
            path, _, value = line.partition("\t")
            if not self.live:
                path = "/" + path[len(self.root):].lstrip("/")
            result[path] = value.strip()
        return result

    def cat_files(self, *globs):
        """{host path: content} of every existing file matching the globs (one remote call)."""
        words = " ".join(self.q(g) for g in globs)
        out = self.run("for f in %s; do [ -f \"$f\" ] && { printf '\\036%%s\\n' \"$f\"; cat \"$f\"; echo; }; done; true"
                       % words).stdout
        result = {}
        for record in out.split("\x1e")[1:]:
            path, _, content = record.partition("\n")
            if not self.live:
                path = "/" + path[len(self.root):].lstrip("/")
            result[path] = content[:-1] if content.endswith("\n") else content
        return result

    def tool(self, name):
        """argv prefix for a host tool: the real one on a live host, the tree's stand-in otherwise (None if absent)."""
        if self.live:
            return name if self.run("command -v %s", name).rc == 0 else None
        standin = self.path("/.pvetune/bin/" + name)
        if not self.host.file(standin).exists:
            return None
        return "env PVETUNE_ROOT=%s %s" % (shlex.quote(self.root), shlex.quote(standin))

    @property
    def name(self):
        backend = getattr(self.host, "backend", None)
        return getattr(backend, "hostname", None) or str(self.host)

    def isfile(self, host_path):
        return self.host.file(self.path(host_path)).is_file

    def isdir(self, host_path):
        return self.host.file(self.path(host_path)).is_directory

    def cgroup_version(self):
        """As the audit reads it (lxcgpu/sources.cgroup_version_of, through isfile and isdir here)."""
        return cgroup_version_of(self)


def skipped(policy, check_id):
    reason = policy.get("skip_checks", {}).get(check_id)
    if reason:
        pytest.skip("policy skips %s: %s" % (check_id, reason))


def proc_devices(text):
    """{major: name} of the character devices in a /proc/devices listing."""
    majors = {}
    section = None
    for line in text.splitlines():
        if line.startswith("Character devices"):
            section = "char"
        elif line.startswith("Block devices"):
            section = "block"
        else:
            m = re.match(r"^\s*(\d+)\s+(\S+)", line)
            if m and section == "char":
                majors.setdefault(int(m.group(1)), m.group(2))
    return majors


# What each CPU vendor needs, written out here from the kernel's documentation (admin-guide/pm/amd-pstate.rst,
# intel_pstate.rst, drivers/idle/intel_idle.c) rather than taken from pvetune, so the suite checks pvetune's table.
SCALING_DRIVERS = {"AuthenticAMD": ("amd_pstate_mode", {"active": "amd-pstate-epp", "passive": "amd-pstate",
                                                         "guided": "amd-pstate"}),
                   "GenuineIntel": ("intel_pstate_mode", {"active": "intel_pstate", "passive": "intel_cpufreq"})}
IDLE_ARGS = {"acpi_idle": "processor.max_cstate", "intel_idle": "intel_idle.max_cstate"}


def cpu_vendor(fleet):
    """(vendor_id, whether the CPU reports the hypervisor flag) of the first processor."""
    info = fleet.run("grep -m2 -E '^(vendor_id|flags)' %s" % fleet.q("/proc/cpuinfo")).stdout
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", info, re.M)
    return (vendor.group(1) if vendor else None), bool(re.search(r"^flags\s*:.*\bhypervisor\b", info, re.M))


def expected_driver(fleet, policy):
    """The scaling driver this host's policies must show (None: no vendor pvetune knows)."""
    row = SCALING_DRIVERS.get(cpu_vendor(fleet)[0])
    if row is None:
        return None
    return policy["scaling_driver"] or row[1][policy[row[0]]]


def required_args(fleet, policy):
    """cmdline_required as this host must carry it: with cmdline_cpu_args, the CPU's own first (amd_pstate=<mode> on
    AMD, intel_pstate=<mode> on Intel where intel_pstate is not loaded, none in a VM without cpufreq; the limit of
    the idle driver in use); a key the policy names keeps the policy's value."""
    own_list = list(policy["cmdline_required"])
    if not policy["cmdline_cpu_args"]:
        return own_list
    vendor, virtual = cpu_vendor(fleet)
    if vendor not in SCALING_DRIVERS:
        return own_list
    has_cpufreq = bool(fleet.grep_files("/sys/devices/system/cpu/cpufreq/policy*/scaling_driver"))
    cpu = []
    if has_cpufreq or not virtual:
        if vendor == "AuthenticAMD":
            cpu.append("amd_pstate=%s" % policy["amd_pstate_mode"])
        elif not fleet.exists("/sys/devices/system/cpu/intel_pstate/status"):
            cpu.append("intel_pstate=%s" % policy["intel_pstate_mode"])
    driver = fleet.read("/sys/devices/system/cpu/cpuidle/current_driver", "").strip()
    if driver in IDLE_ARGS:
        cpu.append("%s=%d" % (IDLE_ARGS[driver], policy["max_cstate"]))
    keys = {a.split("=", 1)[0].replace("-", "_") for a in own_list}
    return [a for a in cpu if a.split("=", 1)[0] not in keys] + own_list

