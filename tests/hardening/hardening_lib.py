"""Helpers shared by the hardening tests (trees, digests, in-process modules, playbooks)."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

from modharness import load_library_module, run_module  # noqa: F401  (tests/modharness.py)
from privdrop import NOBODY, public_tmpdir, rmtree, run_as_nobody  # noqa: F401  (tests/privdrop.py; used by the hardening tests)
from treeinventory import write_inventory  # noqa: F401  (tests/treeinventory.py; used by the hardening tests)

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(TOP, "tests", "fixtures", "corpus")
SMALL_NCPU = 8
_TEMPLATES = {}


# -- directories ------------------------------------------------------------------------------------
def copytree(src, dest):
    """cp -a (symlinks kept, modes kept)."""
    subprocess.run(["cp", "-a", src, dest], check=True)
    return dest


# -- base trees -----------------------------------------------------------------------------------------
def prune_cpus(root, ncpu=SMALL_NCPU):
    """Cut a demo host down to ``ncpu`` CPUs (the 128-CPU demo hosts are 95% cpu*/ files)."""
    base = os.path.join(root, "sys/devices/system/cpu")
    for name in os.listdir(base):
        m = re.match(r"^cpu(\d+)$", name)
        if m and int(m.group(1)) >= ncpu:
            shutil.rmtree(os.path.join(base, name))
    freq = os.path.join(base, "cpufreq")
    for name in os.listdir(freq):
        m = re.match(r"^policy(\d+)$", name)
        if m and int(m.group(1)) >= ncpu:
            shutil.rmtree(os.path.join(freq, name))
    for name in ("online", "possible", "present"):
        with open(os.path.join(base, name), "w") as handle:
            handle.write("0-%d\n" % (ncpu - 1))
    for node, text in ((0, "0-%d\n" % (ncpu - 1)), (1, "\n")):
        path = os.path.join(root, "sys/devices/system/node/node%d/cpulist" % node)
        if os.path.exists(path):
            with open(path, "w") as handle:
                handle.write(text)


def base_template(host, workdir):
    """A pruned scratch copy of demo host ``host`` (stand-ins installed), made once per session."""
    from scratch_host import make_scratch

    key = (host, workdir)
    if key not in _TEMPLATES:
        dest = os.path.join(workdir, "template-" + host)
        make_scratch(host, dest, force=True)
        prune_cpus(dest)
        _TEMPLATES[key] = dest
    return _TEMPLATES[key]


def scratch(host, workdir, name):
    """A fresh pruned copy of demo host ``host`` at workdir/name."""
    dest = os.path.join(workdir, name)
    rmtree(dest)
    return copytree(base_template(host, workdir), dest)


# -- tree state ------------------------------------------------------------------------------------------
IGNORED_DEFAULT = (".pvetune/calls.log",)


def files_of(root, ignored=IGNORED_DEFAULT):
    """{relative path: (kind, content or target, mode)} for every entry of a tree (symlinks not followed; a
    directory that cannot be listed counts as empty, as in os.walk). One lstat per entry, no path arithmetic:
    the purity and injection tests take it thousands of times."""
    out = {}
    prefixes = tuple(i.rstrip("/") + "/" for i in ignored)

    def walk(path, prefix):
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            rel = prefix + entry.name
            if rel in ignored or rel.startswith(prefixes):
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(entry.path), mode)
            elif stat.S_ISDIR(mode):
                out[rel] = ("dir", None, mode)
                walk(entry.path, rel + "/")
            else:
                with open(entry.path, "rb") as handle:
                    out[rel] = ("file", handle.read(), mode)

    walk(root, "")
    return out


def digest(root, ignored=IGNORED_DEFAULT):
    h = hashlib.sha256()
    for rel, (kind, content, mode) in sorted(files_of(root, ignored).items()):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + kind.encode() + b"\0" + oct(mode).encode() + b"\0")
        if content is not None:
            h.update(content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def differences(before, after):
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


# The stand-in calls of fix.yml's discovery for the reboot wave plan (the cluster gate's read-only check).
DISCOVERY_CALLS = (["pct", "list"], ["qm", "list"], ["corosync-quorumtool", "-s"], ["ha-manager", "status"])


def calls(root, discovery=True):
    """The stand-in calls logged in the tree ([[tool, arg...], ...]); ``discovery`` False leaves out the reads of the
    reboot wave plan's discovery (DISCOVERY_CALLS)."""
    path = os.path.join(root, ".pvetune", "calls.log")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        logged = [json.loads(line) for line in handle if line.strip()]
    return logged if discovery else [c for c in logged if c not in DISCOVERY_CALLS]


def read(root, rel):
    with open(os.path.join(root, rel), "rb") as handle:
        return handle.read()


# -- modules in-process ----------------------------------------------------------------------------------
# -- playbooks ---------------------------------------------------------------------------------------------
# The first play of every playbook (role pvetune_run_check): argument validation per host, the check on localhost.
RUN_CHECK_PLAY = "Check the run before any host is touched"
# fix.yml's sorting play: without pvetune_batch it only puts each host into a group, on the controller.
SORT_PLAY = "Sort the hosts into the batch play and the rolling play"


class PlaybookRun:
    def __init__(self, rc, status, events, stdout):
        self.rc = rc
        self.status = status
        self.events = events
        self.stdout = stdout

    def host_events(self, host):
        """The host's events in the plays that act on hosts (not the run check, which only validates arguments
        and runs on the controller, nor the sorting play, which groups the hosts and reads them for the reboot wave
        plan, changing nothing)."""
        return [ev for ev in self.events if (ev.get("event_data") or {}).get("host") == host
                and (ev.get("event_data") or {}).get("play") not in (RUN_CHECK_PLAY, SORT_PLAY)]

    def task_results(self, host, events=("runner_on_ok", "runner_on_failed", "runner_on_skipped",
                                         "runner_on_unreachable")):
        return [ev["event_data"] for ev in self.events
                if ev.get("event") in events and (ev.get("event_data") or {}).get("host") == host]

    def module_calls(self, host):
        """The library modules that ran on ``host`` (not those delegated to the controller), in order:
        [(task, module, the arguments Ansible passed it, result)]."""
        return [(d["task"], d["task_action"], d["res"]["invocation"]["module_args"], d["res"])
                for d in self.task_results(host, events=("runner_on_ok", "runner_on_failed"))
                if os.path.isfile(os.path.join(TOP, "library", d["task_action"] + ".py"))
                and "_ansible_delegated_vars" not in d["res"]]

    def failures(self, host=None):
        return [ev["event_data"] for ev in self.events if ev.get("event") in ("runner_on_failed",
                                                                               "runner_on_unreachable")
                and (host is None or ev["event_data"].get("host") == host)]

    def stats(self):
        for ev in self.events:
            if ev.get("event") == "playbook_on_stats":
                return ev["event_data"]
        return None


def runner_env(extra=None):
    env = {"ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"],
           "ANSIBLE_LOCAL_TEMP": os.path.join(tempfile.gettempdir(), "ansible-local")}
    env.update(extra or {})
    return env


def run_playbook(workdir, playbook, inventory, extravars=None, cmdline=None, envvars=None, limit=None):
    import ansible_runner

    events = []
    pdd = tempfile.mkdtemp(prefix="runner-", dir=workdir)
    result = ansible_runner.run(
        private_data_dir=pdd, project_dir=TOP, playbook=playbook, inventory=inventory,
        extravars=extravars or {}, cmdline=cmdline, limit=limit, envvars=runner_env(envvars),
        event_handler=lambda ev: events.append(ev) or True, quiet=True,
        settings={"suppress_ansible_output": True})
    stdout = result.stdout.read() if result.stdout else ""
    return PlaybookRun(result.rc, result.status, events, stdout)


def no_traceback(obj):
    """Problems if ``obj`` (a module result) carries a Python traceback or an internal error."""
    text = json.dumps(obj, default=str)
    return [word for word in ("Traceback", "internal error") if word in text]


def load_modules_for_fork(*names):
    """Import the library modules before forking an unprivileged child."""
    for name in names or ("pvetune_facts",):
        load_library_module(name)
