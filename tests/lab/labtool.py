#!/usr/bin/env python3
"""tests/lab/labtool.py — the JSON side of tests/lab/lab-test.sh.

  labtool.py play NAME PLAYBOOK [ansible-playbook args...]
      Run a playbook with ansible-runner (project = the repo, stdout streamed), keep the events
      in $LAB_WORK/lab-test/runs/NAME/ and write summary.json there. Exits with the playbook's rc.
  labtool.py stats NAME            "host ok changed failures unreachable rescued" per host
  labtool.py events NAME           "seq time host event changed task" for every task result, in order
  labtool.py task-time NAME TASK   "host seconds" for every result of TASK
  labtool.py failures NAME         "host<TAB>task<TAB>msg" for every failed/unreachable result (incl. rescued)
  labtool.py audit REPORT_DIR      "host<TAB>check<TAB>status<TAB>message<TAB>current" from audit.json
  labtool.py res NAME HOST TASK EXPR...   a value of TASK's result on HOST (EXPR: dotted keys/indexes;
                                   TASK as ansible-playbook prints it, "ROLE : NAME" for a role's task)
  labtool.py health RECORD         "target<TAB>status<TAB>message" of a fix record's health gate
  labtool.py json FILE EXPR...     print a value of a JSON file (EXPR: dotted keys, e.g. failure.task)
  labtool.py when NAME HOST TASK   the time of TASK's result on HOST (seconds since the epoch)

res and json print one line per EXPR when given several (a newline inside a value then reads \\n), so one
process answers what a shell would otherwise ask in several: each call costs a Python start and a JSON parse.

Everything it prints is plain lines for the shell to check; it asserts nothing itself.
"""
import json
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = os.environ.get("LAB_WORK", os.path.join(TOP, "tests", "lab", "work"))
RUNS = os.path.join(WORK, "lab-test", "runs")
RESULT_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped")


def play(name, playbook, args):
    import ansible_runner

    pdd = os.path.join(RUNS, name)
    os.makedirs(pdd, exist_ok=True)
    events = []
    env = {"ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORCE_COLOR": "0",
           "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]}

    def keep(ev):
        data = ev.get("event_data") or {}
        res = data.get("res") or {}
        events.append({
            "seq": ev.get("counter"), "time": ev.get("created"), "event": ev.get("event"),
            "host": data.get("host"), "task": data.get("task"), "role": data.get("role") or None,
            "play": data.get("play"),
            "changed": bool(res.get("changed")),
            "msg": res.get("msg") if isinstance(res.get("msg"), str) else None,
            "duration": data.get("duration"), "elapsed": res.get("elapsed"),
            "res": res if ev.get("event") in RESULT_EVENTS else None,
            "stats": {k: data.get(k) for k in ("ok", "changed", "failures", "dark", "rescued", "skipped")}
            if ev.get("event") == "playbook_on_stats" else None,
        })
        return True

    result = ansible_runner.run(
        private_data_dir=pdd, project_dir=TOP, playbook=playbook, cmdline=" ".join(_quote(a) for a in args),
        envvars=env, event_handler=keep, quiet=False, rotate_artifacts=1,
    )
    stats = next((e["stats"] for e in events if e["event"] == "playbook_on_stats"), None)
    summary = {"name": name, "playbook": playbook, "args": args, "rc": result.rc, "status": result.status,
               "stats": stats, "events": [e for e in events if e["event"] != "playbook_on_stats"]}
    with open(os.path.join(pdd, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    return result.rc


def _quote(arg):
    import shlex
    return shlex.quote(arg)


def _summary(name):
    with open(os.path.join(RUNS, name, "summary.json")) as handle:
        return json.load(handle)


def stats(name):
    st = _summary(name)["stats"] or {}
    hosts = sorted(set().union(*[set(v or {}) for v in st.values()])) if st else []
    for host in hosts:
        print(host, *[(st.get(k) or {}).get(host, 0) for k in ("ok", "changed", "failures", "dark", "rescued")])


# fix.yml's sorting play: it puts each host into a group and (pvetune_reboot_ok) reads each host for the reboot wave
# plan (the audit in check mode, the cluster gate's check); it changes nothing.
SORT_PLAY = "Sort the hosts into the batch play and the rolling play"


def events(name):
    """The task results of the plays that act on the hosts: not the run check (role pvetune_run_check, the first
    play), which validates its arguments on every host but runs only on the controller, nor fix.yml's sorting play
    (SORT_PLAY)."""
    for ev in _summary(name)["events"]:
        if ev["event"] in RESULT_EVENTS and ev.get("role") != "pvetune_run_check" and ev.get("play") != SORT_PLAY:
            print(ev["seq"], ev["time"], ev["host"], ev["event"], int(ev["changed"]), ev["task"], sep="\t")


def task_time(name, task):
    """"host seconds" for every result of TASK (the module's own 'elapsed' when it reports one)."""
    for ev in _summary(name)["events"]:
        if ev["event"] in RESULT_EVENTS and _task_is(ev, task):
            secs = ev["elapsed"] if ev["elapsed"] is not None else ev["duration"]
            print(ev["host"], "%.1f" % secs if isinstance(secs, (int, float)) else "-")


def _task_is(ev, task):
    """TASK names a task as ansible-playbook prints it: "ROLE : NAME" for a role's task, else NAME."""
    return task in (ev["task"], "%s : %s" % (ev.get("role"), ev["task"]))


def res(name, host, task, *exprs):
    """Values from the result of TASK on HOST (the first one), as json_get prints them; "no result"
    when there is none (exit 0 all the same: the caller's check fails on the value, and a shell
    under `set -e` does not stop at `x=$(labtool res ...)`)."""
    for ev in _summary(name)["events"]:
        if ev["event"] in RESULT_EVENTS and ev["host"] == host and _task_is(ev, task):
            _print_values([_dig(ev["res"] or {}, expr) for expr in exprs])
            return 0
    for _expr in exprs:
        print("no result")
    return 0


def when(name, host, task):
    """The time of TASK's result on HOST (the first one) in seconds since the epoch, "none" without one. The
    runner's "created" is UTC (without an offset in some versions)."""
    from datetime import datetime, timezone

    for ev in _summary(name)["events"]:
        if ev["event"] in RESULT_EVENTS and ev["host"] == host and _task_is(ev, task) and ev.get("time"):
            stamp = datetime.fromisoformat(ev["time"])
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            print("%.3f" % stamp.timestamp())
            return 0
    print("none")
    return 0


def _print_values(values):
    """One value: as _render prints it. Several: one line each (a newline in a value reads \\n)."""
    if len(values) == 1:
        print(_render(values[0]))
        return
    for value in values:
        print(_render(value).replace("\n", "\\n"))


def health(path):
    """"target<TAB>status<TAB>message" for every health-gate target of a fix record."""
    with open(path) as handle:
        record = json.load(handle)
    for target in record.get("health") or []:
        print(target["target"], target["status"], target["message"], sep="\t")


def _dig(value, expr):
    for key in expr.split(".") if expr else []:
        if isinstance(value, list) and key.isdigit():
            value = value[int(key)] if int(key) < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def _render(value):
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def failures(name):
    for ev in _summary(name)["events"]:
        if ev["event"] in ("runner_on_failed", "runner_on_unreachable"):
            print(ev["host"], ev["task"], " ".join((ev["msg"] or "").split()), sep="\t")


def audit(report_dir):
    with open(os.path.join(report_dir, "audit.json")) as handle:
        data = json.load(handle)
    for host in data["hosts"]:
        for check in host.get("checks") or []:
            print(host["host"], check["id"], check["status"], " ".join((check["message"] or "").split()),
                  " ".join(str(check.get("current") or "").split()), sep="\t")


def json_get(path, *exprs):
    with open(path) as handle:
        data = json.load(handle)
    _print_values([_dig(data, expr) for expr in exprs])


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, rest = argv[1], argv[2:]
    if cmd == "play" and len(rest) >= 2:
        return play(rest[0], rest[1], rest[2:])
    if cmd == "res" and len(rest) >= 4:
        return res(*rest)
    if cmd == "when" and len(rest) == 3:
        return when(*rest)
    if cmd == "health" and len(rest) == 1:
        return health(rest[0]) or 0
    if cmd == "task-time" and len(rest) == 2:
        return task_time(rest[0], rest[1]) or 0
    if cmd in ("stats", "events", "failures") and len(rest) == 1:
        return {"stats": stats, "events": events, "failures": failures}[cmd](rest[0]) or 0
    if cmd == "audit" and len(rest) == 1:
        return audit(rest[0]) or 0
    if cmd == "json" and len(rest) >= 2:
        return json_get(*rest) or 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
