"""Helpers for playbook-level tests: run playbooks through ansible-runner's Python API."""
import hashlib
import os
import sys


TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import conftest as _top  # noqa: E402,F401  (ansible.module_utils.pvetune importable)

DEMO_INVENTORY = os.path.join(TOP, "inventory", "demo")
DEMO_SNAPSHOTS = os.path.join(TOP, "demo", "snapshots")


class PlaybookRun:
    def __init__(self, rc, status, events, stdout):
        self.rc = rc
        self.status = status
        self.events = events
        self.stdout = stdout

    def results(self, task_name=None, event="runner_on_ok", host=None):
        out = []
        for ev in self.events:
            if ev.get("event") != event:
                continue
            data = ev.get("event_data", {})
            if task_name and data.get("task") != task_name:
                continue
            if host and data.get("host") != host:
                continue
            out.append(data)
        return out

    def stats(self):
        for ev in self.events:
            if ev.get("event") == "playbook_on_stats":
                return ev["event_data"]
        return None


def run_playbook(tmp_path, playbook, inventory=DEMO_INVENTORY, extravars=None, cmdline=None, limit=None,
                 envvars=None):
    import ansible_runner

    events = []
    env = {"ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]}
    env.update(envvars or {})
    pdd = tmp_path / "runner"
    pdd.mkdir(parents=True, exist_ok=True)
    result = ansible_runner.run(
        private_data_dir=str(pdd),
        project_dir=TOP,
        playbook=playbook,
        inventory=inventory,
        extravars=extravars or {},
        cmdline=cmdline,
        limit=limit,
        envvars=env,
        event_handler=lambda ev: events.append(ev) or True,
        quiet=True,
        settings={"suppress_ansible_output": True},
    )
    stdout = result.stdout.read() if result.stdout else ""
    return PlaybookRun(result.rc, result.status, events, stdout)


def tree_digest(root):
    """sha256 over every file, symlink and directory of a tree (names, types, modes, contents)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            digest.update(rel.encode() + b"\0" + oct(st.st_mode).encode() + b"\0")
            if os.path.islink(path):
                digest.update(os.readlink(path).encode())
            else:
                with open(path, "rb") as handle:
                    digest.update(handle.read())
        for name in dirnames:
            digest.update(os.path.relpath(os.path.join(dirpath, name), root).encode() + b"/\0")
    return digest.hexdigest()
