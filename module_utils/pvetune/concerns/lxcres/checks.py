# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU CT resources: the one reader of the GPU CTs' runtime state, and the ``lxc.resources`` check.

``read_runtime`` (facts section "ct_runtime") takes the CT configs the LXC reader read (section "lxc") and, for every
CT that passes NVIDIA devices, reads what the running CT really gets: its cgroup's files (v2 under
/sys/fs/cgroup/lxc/<vmid>, v1 under each controller's lxc/<vmid>), the PID of its init (the process of its cgroup
whose innermost NSpid is 1), and the NVIDIA user-space library names in its root (/proc/<init>/root while it runs;
its rootfs on the host when stopped and that is a plain directory).  ``nvidia.stack`` judges the library versions;
``check_resources`` judges the limits, configured (the CT config) against effective (the cgroup).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import stat

from ansible.module_utils.pvetune.concerns.lxcgpu.sources import gpu_nodes_of
from ansible.module_utils.pvetune.concerns.nvidia.checks import lib_versions
from ansible.module_utils.pvetune.concerns.numa.topology import facts_nodes
from ansible.module_utils.pvetune.concerns.storage.checks import unreadable_ct_items
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.formats import cgroup_files as cg
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list, parse_cpu_list
from ansible.module_utils.pvetune.formats.ct_config import main_value, parse_ct_config
from ansible.module_utils.pvetune.formats.proc_text import mount_option, parse_memlock, parse_mounts
from ansible.module_utils.pvetune.formats.pve_storage import STORAGE_CFG, rootfs_dir

CG2_DIR = "/sys/fs/cgroup/lxc/%s"
V2_FILES = ("cpuset.cpus.effective", "cpuset.cpus", "cpu.max", "cpu.weight", "memory.max", "memory.swap.max")
V1_FILES = (("cpuset", "cpuset.effective_cpus"), ("cpuset", "cpuset.cpus"), ("cpu", "cpu.cfs_quota_us"),
            ("cpu", "cpu.cfs_period_us"), ("cpu", "cpu.shares"), ("memory", "memory.limit_in_bytes"),
            ("memory", "memory.memsw.limit_in_bytes"))
# Where distributions put libcuda/libnvidia-ml (Debian/Ubuntu multiarch, RHEL, Arch, unmerged /lib).
# The distribution's library directories, and the CUDA toolkit's (libcudart for nvidia.compute_capability).
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64")
LIB_LINKS = ("libcuda.so.1", "libnvidia-ml.so.1")
# The CT config keys that set a CT's CPU and memory limits (pct's and raw LXC ones, v2 and v1).
CONFIG_KEYS = ("cores", "cpulimit", "cpuunits", "memory", "swap", "lxc.cgroup2.cpuset.cpus", "lxc.cgroup.cpuset.cpus",
               "lxc.cgroup2.cpu.max", "lxc.cgroup.cpu.cfs_quota_us", "lxc.cgroup2.memory.max",
               "lxc.cgroup2.memory.swap.max", "lxc.cgroup.memory.limit_in_bytes")
# What a CT gets for keys its config leaves out: memory's schema default (pve-container Config.pm), and no swap
# (LXC.pm writes memory.swap.max from "swap // 0"); pct create writes "swap: 512" into new configs.
PVE_DEFAULTS = {"memory": "512", "swap": "0"}
_PID = re.compile(r"\A[0-9]{1,9}\Z")
MAX_PIDS = 64     # a CT's cgroup can hold thousands of processes; the init is among the first of ns/init.scope


# -- reader --------------------------------------------------------------------------------------------------
def _cgroup_dirs(version, ctid):
    """{controller or "": directory} of a CT's cgroup."""
    if version == 1:
        return {ctl: "/sys/fs/cgroup/%s/lxc/%s" % (ctl, ctid) for ctl in ("cpuset", "cpu", "memory")}
    return {"": CG2_DIR % ctid}


def _cg_value(fsroot, path, errors):
    """A cgroup file's value; None when the file is not there (its controller is off), and ``errors`` gets the
    files that are there but cannot be read (a directory, no permission, a symlink loop): never "no limit"."""
    try:
        return fsroot.read_value(path)
    except FsError as exc:
        if exc.reason != os.strerror(errno.ENOENT) and errors is not None:
            errors.append("%s: %s" % (path, exc.reason))
        return None


def read_cgroup(fsroot, version, ctid, errors=None):
    """(running, {file: raw value or None}, base directory) of a CT's cgroup (unreadable files into ``errors``)."""
    dirs = _cgroup_dirs(version, ctid)
    base = dirs.get("") or dirs["cpuset"]
    if not fsroot.isdir(base):
        return False, {}, base
    files = {}
    if version == 1:
        for ctl, name in V1_FILES:
            files[name] = _cg_value(fsroot, "%s/%s" % (dirs[ctl], name), errors)
    else:
        for name in V2_FILES:
            files[name] = _cg_value(fsroot, "%s/%s" % (base, name), errors)
    return True, files, base


def _nspid_is_init(fsroot, pid):
    """Whether a host process is the init of a PID namespace one level down (NSpid: <host pid> 1); a container
    nested in the CT (a Docker init) has three ids and is not the CT's init."""
    status = fsroot.try_value("/proc/%s/status" % pid) or ""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return ids == [str(pid), "1"]
    return False


def find_init_pid(fsroot, base):
    """The host PID of a running CT's init: the first process of its cgroup (ns/init.scope for a systemd CT, ns, the
    CT's own directory) whose NSpid is "<pid> 1"; None when there is none (or no NSpid line, kernels < 4.1)."""
    for sub in ("/ns/init.scope", "/ns", ""):
        text = fsroot.try_value(base + sub + "/cgroup.procs") or ""
        for pid in text.split()[:MAX_PIDS]:
            if _PID.match(pid) and _nspid_is_init(fsroot, pid):
                return int(pid)
    return None


def _confined(fs, root, lib_dir):
    """Whether every directory from a stopped CT's rootfs down to lib_dir is a directory, not a symlink: a link in
    the CT's tree means a path inside the CT, which the host would resolve against its own root."""
    path = root.rstrip("/")
    for part in lib_dir.strip("/").split("/"):
        path += "/" + part
        try:
            if stat.S_ISLNK(fs.lstat(path).st_mode):
                return False
        except FsError:
            return False
    return True


def is_nvidia_lib(name):
    """The names the coherence check reads in a CT's library directories (collect.yml keeps only these)."""
    return name in LIB_LINKS or bool(lib_versions([name]))


def _list_libs(fs, root, confined=False):
    """(versions per library, {link: target}, directories read) below ``root`` through ``fs``."""
    names, links, dirs = [], {}, []
    for lib_dir in LIB_DIRS:
        path = root.rstrip("/") + lib_dir
        if not fs.isdir(path) or (confined and not _confined(fs, root, lib_dir)):
            continue
        entries = fs.listdir(path)
        dirs.append(lib_dir)
        names.extend(entries)
        for link in LIB_LINKS:
            if link in entries and link not in links:
                try:
                    links[link] = fs.readlink("%s/%s" % (path, link)).rsplit("/", 1)[-1]
                except FsError:
                    links[link] = None   # a file, not a link (a copied library)
    return lib_versions(names), links, dirs


def _read_libs(fsroot, ct, entry, storages):
    """The NVIDIA library names of a CT (an entry of the "lxc" section): through /proc/<init>/root while it runs,
    else in its rootfs directory (the config is parsed only then, for its rootfs)."""
    if entry["running"]:
        if entry["init_pid"] is None:
            return {"reason": "running, but no process of its cgroup is its init (NSpid)"}
        root = where = "/proc/%d/root" % entry["init_pid"]   # the kernel resolves it in the CT's mount namespace
    else:
        value = main_value(parse_ct_config(ct["config"], ct["path"]), "rootfs")
        if not value:
            return {"reason": "stopped, and its config has no rootfs"}
        if storages is None:
            return {"reason": "stopped, and %s is unreadable" % STORAGE_CFG}
        host_dir, why = rootfs_dir(value, storages)
        if host_dir is None:
            return {"reason": "stopped: " + why}
        if not fsroot.isdir(host_dir):
            return {"reason": "stopped: its rootfs directory %s is not there (not mounted?)" % host_dir}
        root, where = host_dir, host_dir
    try:
        versions, links, dirs = _list_libs(fsroot, root, confined=not entry["running"])
    except FsError as exc:
        return {"reason": "%s: %s" % (exc.path, exc.reason)}
    return {"root": where, "versions": versions, "links": links, "dirs": dirs, "reason": None}


def read_runtime(ctx):
    """Reader of the facts section "ct_runtime": ``cts`` ([{"ctid", "running", "cgroup" {file: raw}, "cgroup_dir",
    "cgroup_errors" (files there but unreadable), "init_pid", "libs" {"root", "versions", "links", "dirs", "reason"}}],
    GPU CTs only), ``evidence``."""
    fsroot = ctx.fsroot
    lxc = ctx.facts.get("lxc") or {}
    out = {"cts": [], "evidence": []}
    if not lxc.get("present"):
        return out
    version = lxc.get("cgroup_version")
    storage = ctx.facts.get("storage") or {}
    storages = storage.get("storages")          # the storage reader's storage.cfg, and what it said about it
    out["evidence"].extend(storage.get("cfg_notes") or [])
    for ct in lxc.get("cts") or ():
        if ct.get("error") or not ct.get("passes_nvidia"):    # the LXC reader's passes_nvidia()
            continue
        cgroup_errors = []
        running, files, base = read_cgroup(fsroot, version, ct["ctid"], cgroup_errors)
        entry = {"ctid": ct["ctid"], "running": running, "cgroup": files, "cgroup_dir": base,
                 "cgroup_errors": cgroup_errors, "init_pid": find_init_pid(fsroot, base) if running else None}
        entry["libs"] = _read_libs(fsroot, ct, entry, storages)
        entry["shm"], entry["memlock"] = read_shm_memlock(fsroot, entry["init_pid"])
        out["cts"].append(entry)
    out["evidence"].append("%d GPU CTs: %s" % (len(out["cts"]), ", ".join(
        "%s (%s)" % (c["ctid"], "running, init %s" % c["init_pid"] if c["running"] else "stopped")
        for c in out["cts"]) or "none"))
    return out


def read_shm_memlock(fsroot, pid):
    """``(shm, memlock)`` of a running CT, read through its init: shm ``{"size": bytes or None (tmpfs's default,
    half of RAM), "raw", "fstype", "missing": no /dev/shm mount at all}`` of its mounts, or ``{"error"}`` (None
    when the CT does not run); memlock
    ``{"soft", "hard"}`` (bytes, None = unlimited) of its init's limits, or ``{"error"}``."""
    if pid is None:
        return None, None
    shm = memlock = None
    path = "/proc/%d/mounts" % pid
    try:
        mounts = [m for m in parse_mounts(fsroot.read_text(path), path) if m["target"] == "/dev/shm"]
        if mounts:
            size = mount_option(mounts[-1], "size")
            shm = {"size": tmpfs_size(size), "raw": size, "fstype": mounts[-1]["fstype"]}
        else:
            shm = {"size": None, "raw": None, "fstype": None, "missing": True}
    except FsError as exc:
        shm = {"error": "%s: %s" % (exc.path, exc.reason)}
    except ValueError as exc:
        shm = {"error": str(exc)}
    path = "/proc/%d/limits" % pid
    try:
        soft, hard = parse_memlock(fsroot.read_text(path), path)
        memlock = {"soft": soft, "hard": hard}
    except FsError as exc:
        memlock = {"error": "%s: %s" % (exc.path, exc.reason)}
    except ValueError as exc:
        memlock = {"error": str(exc)}
    return shm, memlock


def tmpfs_size(raw):
    """Bytes of a tmpfs size= option ("65536k", "64g", "1073741824"); None for none or a percentage (of RAM)."""
    match = re.match(r"\A([0-9]+)([kmgKMG]?)\Z", raw or "")
    if not match:
        return None
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]


# -- evaluator -------------------------------------------------------------------------------------------------
def _configured(ct):
    """{key: raw value} of the limit keys in the CT config's main section (what the CT gets where it has none)."""
    values = {key: main_value(ct, key) for key in CONFIG_KEYS}
    for key, default in PVE_DEFAULTS.items():
        if values[key] is None:
            values[key] = default
    # The values end up in messages: a byte that is no UTF-8 (kept by surrogateescape) is shown as \xNN, since
    # Ansible refuses a module result with surrogates ("Refusing to deserialize an invalid UTF8 string value").
    return {k: v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            for k, v in values.items() if v is not None}


def _parse(problems, what, parse, *args):
    try:
        return parse(*args)
    except ValueError as exc:
        problems.append("%s: %s" % (what, exc))
        return None


def _limits(ct, conf, runtime, problems):
    """What the CT gets, configured and (running) effective: CPUs, quota, memory and swap."""
    path = ct.path
    lim = {"cores": None, "cpuset": None, "quota": None, "memory": None, "swap": None}
    if "cores" in conf:
        lim["cores"] = _parse(problems, "%s: cores" % path, cg.pve_number, conf["cores"], int)
    raw_set = conf.get("lxc.cgroup2.cpuset.cpus") or conf.get("lxc.cgroup.cpuset.cpus")
    if raw_set:
        lim["cpuset"] = _parse(problems, "%s: cpuset.cpus" % path, parse_cpu_list, raw_set)
    if "cpulimit" in conf:
        value = _parse(problems, "%s: cpulimit" % path, cg.pve_number, conf["cpulimit"])
        lim["quota"] = value or None     # 0 = no limit
    if "memory" in conf:
        lim["memory"] = _parse(problems, "%s: memory" % path, cg.pve_number, conf["memory"], int)
    if "swap" in conf:
        lim["swap"] = _parse(problems, "%s: swap" % path, cg.pve_number, conf["swap"], int)
    eff = None
    if runtime and runtime.get("running"):
        files, base = runtime.get("cgroup") or {}, runtime.get("cgroup_dir")
        problems.extend(runtime.get("cgroup_errors") or ())
        eff = {}

        v1 = {name: ctl for ctl, name in V1_FILES} if "cpu.max" not in files else {}

        def where(name):
            """The file's host path: a v1 file is in its controller's directory, not in cpuset's."""
            return "%s/%s" % (_cgroup_dirs(1, ct.ctid)[v1[name]] if name in v1 else base, name)

        def parsed(name, parse, *args):
            return _parse(problems, where(name), parse, *args) if files.get(name) is not None else None

        eff_name = "cpuset.cpus.effective" if "cpuset.cpus.effective" in files else "cpuset.effective_cpus"
        cpus = files.get(eff_name)
        eff["cpuset"] = _parse(problems, where(eff_name), parse_cpu_list, cpus) if cpus else None
        if "cpu.max" in files:
            quota = parsed("cpu.max", cg.parse_cpu_max, files.get("cpu.max"))
            eff["quota"] = cg.cpu_quota_cpus(*quota) if quota else None
            mem = parsed("memory.max", cg.parse_bytes_limit, files.get("memory.max"))
            swap = parsed("memory.swap.max", cg.parse_bytes_limit, files.get("memory.swap.max"))
        else:
            quota = parsed("cpu.cfs_quota_us", cg.parse_v1_quota, files.get("cpu.cfs_quota_us"),
                           files.get("cpu.cfs_period_us"))
            eff["quota"] = cg.cpu_quota_cpus(*quota) if quota else None
            mem = parsed("memory.limit_in_bytes", cg.parse_v1_limit, files.get("memory.limit_in_bytes"))
            memsw = parsed("memory.memsw.limit_in_bytes", cg.parse_v1_limit, files.get("memory.memsw.limit_in_bytes"))
            swap = None if memsw is None or mem is None else max(0, memsw - mem)
        eff["memory"] = None if mem is None else mem // (1 << 20)
        eff["swap"] = None if swap is None else swap // (1 << 20)
    return lim, eff


def _gpu_nodes(ct, facts):
    """(GPUs the CT gets, their NUMA nodes or None when the minors are unknown)."""
    nvidia = facts.get("nvidia") or {}
    paths = gpu_nodes_of(ct, nvidia.get("nodes"))
    by_minor = {minor: bdf for bdf, minor in (nvidia.get("gpu_minors") or {}).items()}
    numa = {f["bdf"]: f.get("numa_node") for f in (facts.get("pci") or {}).get("functions") or () if f.get("is_gpu")}
    bdfs = [by_minor.get(int(p[len("/dev/nvidia"):])) for p in paths]
    if not bdfs or None in bdfs:
        return len(paths), None
    nodes = {numa.get(b) for b in bdfs}
    return len(paths), None if None in nodes or any(n is None or n < 0 for n in nodes) else sorted(nodes)


def _fmt_cpus(cpus):
    return format_cpu_list(cpus) if cpus else "none"


def placement(ct, runtime, facts, problems=None):
    """Where a GPU CT's CPUs are against its GPUs' NUMA nodes: ``{"gpus", "gpu_nodes", "cpus" (effective while it
    runs, else the configured cpuset, None = unpinned), "on_nodes", "want_cpus", "verdict" (pass, warn, fail, or
    None when the host has one node or the GPUs' nodes are unknown), "limits", "effective", "conf"}``."""
    problems = [] if problems is None else problems
    conf = _configured(ct)
    lim, eff = _limits(ct, conf, runtime, problems)
    n_gpus, gpu_nodes = _gpu_nodes(ct, facts)
    nodes = facts_nodes(facts)
    cpus = eff.get("cpuset") if eff else lim["cpuset"]
    want = sorted({c for n in gpu_nodes or () for c in nodes.get(n, {}).get("cpus", ())})
    on = sorted(n for n, info in nodes.items() if cpus and set(info["cpus"]) & set(cpus))
    verdict = None
    if gpu_nodes and len([n for n in nodes.values() if n["cpus"]]) > 1 and cpus:
        verdict = "fail" if not set(on) & set(gpu_nodes) else "warn" if not set(gpu_nodes) <= set(on) else "pass"
    return {"gpus": n_gpus, "gpu_nodes": gpu_nodes, "cpus": cpus, "on_nodes": on, "want_cpus": want,
            "verdict": verdict, "limits": lim, "effective": eff, "conf": conf}


def _nodes_text(nodes):
    return "node%s %s" % ("s" if len(nodes) > 1 else "", format_cpu_list(nodes) or "none")


def evaluate_ct(ct, runtime, facts, policy):
    """One GPU CT's item: status, current (configured / effective) and what to set."""
    problems, fails, warns, pending = [], [], [], []
    place = placement(ct, runtime, facts, problems)
    conf, lim, eff = place["conf"], place["limits"], place["effective"]
    n_gpus, gpu_nodes, cpus, want_cpus = place["gpus"], place["gpu_nodes"], place["cpus"], place["want_cpus"]
    host_cpus = sorted({c for n in facts_nodes(facts).values() for c in n["cpus"]})
    restart_fixes = bool(eff and lim["cpuset"] and eff.get("cpuset") and set(lim["cpuset"]) != set(eff["cpuset"])
                         and placement(ct, None, facts)["verdict"] == "pass")
    if restart_fixes:
        pending.append("cpuset configured %s (%s), effective %s until the CT restarts" % (
            _fmt_cpus(lim["cpuset"]), _nodes_text(gpu_nodes), _fmt_cpus(eff["cpuset"])))
    elif place["verdict"] in ("fail", "warn"):
        shown = "CPUs %s (%s)" % (_fmt_cpus(cpus), _nodes_text(place["on_nodes"]))
        fix = "lxc.cgroup2.cpuset.cpus: %s (the CPUs of %s)" % (_fmt_cpus(want_cpus), _nodes_text(gpu_nodes))
        if place["verdict"] == "fail":
            fails.append("%s, none on its GPUs' %s: set %s" % (shown, _nodes_text(gpu_nodes), fix))
        else:
            warns.append("%s, none on %s of its GPUs: set %s" % (
                shown, _nodes_text(sorted(set(gpu_nodes) - set(place["on_nodes"]))), fix))
    # CPU count.
    need = policy["lxc_min_cpus_per_gpu"] * n_gpus
    # A cpuset (effective, or a raw line, which PVE applies after cores and pvestatd then leaves alone) is the count.
    have = len(cpus) if cpus else (lim["cores"] or len(host_cpus))
    if need and have and have < need:
        fails.append("%d CPUs (cores %s%s) for %d GPUs: set cores: %d or more" % (
            have, lim["cores"] or "unset", ", effective cpuset %s" % _fmt_cpus(cpus) if eff and cpus else "",
            n_gpus, need))
    # CPU quota.
    eff_quota = (eff or {}).get("quota")
    if lim["quota"] or eff_quota:
        fails.append("CPU quota: cpulimit %s, effective %s: remove cpulimit (a GPU CT must not be throttled)" % (
            conf.get("cpulimit", "unset"), "%.4g CPUs" % eff_quota if eff_quota else "none" if eff else "not running"))
    # Memory.
    need_mem = policy["lxc_min_memory_per_gpu"] * n_gpus
    mem = (eff or {}).get("memory") if eff and eff.get("memory") is not None else lim["memory"]
    if need_mem and mem is not None and mem < need_mem:
        fails.append("memory %s MiB (effective %s) for %d GPUs: set memory: %d or more" % (
            conf.get("memory"), "%d MiB" % eff["memory"] if eff and eff.get("memory") is not None else
            ("unlimited" if eff else "not running"), n_gpus, need_mem))
    # Swap.
    swap = (eff or {}).get("swap") if eff and eff.get("swap") is not None else lim["swap"]
    if swap:
        fails.append("swap %s MiB (effective %s): set swap: 0" % (
            conf.get("swap"),
            "%d MiB" % eff["swap"] if eff and eff.get("swap") is not None else "unknown" if eff else "not running"))
    current = "cores %s, cpuset %s, cpulimit %s, memory %s, swap %s" % (
        conf.get("cores", "all"), _fmt_cpus(lim["cpuset"]) if lim["cpuset"] else "unset",
        conf.get("cpulimit", "0"), conf.get("memory"), conf.get("swap"))
    if eff is not None:
        current += "; effective CPUs %s, quota %s, memory.max %s, swap.max %s" % (
            _fmt_cpus(eff.get("cpuset")), "%.4g" % eff_quota if eff_quota else "max",
            "%d MiB" % eff["memory"] if eff.get("memory") is not None else "max",
            "%d MiB" % eff["swap"] if eff.get("swap") is not None else "max")
    else:
        current += "; not running"
    status = "error" if problems else "fail" if fails else "pending" if pending else "warn" if warns else "pass"
    # What lxc_numa_pin fixes: the placement alone (the other limits stay the operator's).
    placed = place["verdict"] in ("fail", "warn") and not restart_fixes
    placement_only = not problems and len(fails) + len(warns) == (1 if placed else 0)
    message = "; ".join(problems + fails + pending + warns) or "%d GPUs%s" % (
        n_gpus, ", CPUs on node %s" % format_cpu_list(gpu_nodes) if gpu_nodes else "")
    return {"name": "CT %s" % ct.ctid, "status": status, "current": current, "message": message,
            "expected": ">= %d CPUs%s, >= %d MiB, no cpulimit, swap 0" % (
                need, " on node %s" % format_cpu_list(gpu_nodes) if gpu_nodes else "", need_mem),
            "_pin_fixes": placement_only}


def check_resources(facts, policy):
    cid = "lxc.resources"
    err = section_error(facts, "lxc") or section_error(facts, "ct_runtime")
    if err:
        return make_result(cid, policy, "error", None, err)
    lxc = facts.get("lxc") or {}
    runtime = facts.get("ct_runtime") or {}
    ev = list(runtime.get("evidence") or [])
    if not lxc.get("present"):
        return make_result(cid, policy, "skip", None, "no /etc/pve/lxc directory (not a Proxmox VE node?)", evidence=ev)
    by_id = {c["ctid"]: c for c in runtime.get("cts") or ()}
    items = []
    for ct in lxc.get("cts") or ():
        if ct.get("error") or ct["ctid"] not in by_id:
            continue
        items.append(evaluate_ct(parse_ct_config(ct["config"], ct["path"]), by_id[ct["ctid"]], facts, policy))
    if not items:
        return make_result(cid, policy, "skip", None, "no CT config passes NVIDIA devices", evidence=ev)
    order = ("error", "fail", "pending", "warn")
    worst = next((s for s in order if any(i["status"] == s for i in items)), "pass")
    bad = [i for i in items if i["status"] != "pass"]
    # fix.yml --tags lxc answers for this result (its gate, the reports' fix command) only when every problem is
    # one the pin fixes and policy lxc_numa_pin lets it; CPU counts, quotas, memory and swap are the operator's.
    fixable = policy["lxc_numa_pin"] and all(i["_pin_fixes"] for i in bad if i["status"] in ("fail", "warn"))
    for i in items:
        i.pop("_pin_fixes")
    current = "%d GPU CTs: %s" % (len(items), ", ".join("%s %s" % (i["name"], i["status"]) for i in items))
    if bad:
        res = make_result(cid, policy, worst, current, " | ".join("%s: %s" % (i["name"], i["message"]) for i in bad),
                          items, ev)
        if not fixable:
            res["fix_tag"] = ""
        return res
    return make_result(cid, policy, "pass", current, "%d GPU CTs: CPUs on their GPUs' nodes, enough CPUs and "
                       "memory, no quota, no swap" % len(items), items, ev)


def _mib(value):
    return "unlimited" if value is None else "%d MiB" % (value >> 20) if value >= 1 << 20 else "%d KiB" % (value >> 10)


def shm_memlock_item(ct, policy):
    """One running GPU CT's /dev/shm and memlock item (pvetune suggests the CT config lines, it writes none)."""
    name = "CT %s" % ct["ctid"]
    if not ct.get("running"):
        return {"name": name, "status": "skip", "current": "stopped", "expected": None,
                "message": "stopped: its /dev/shm and limits are read while it runs"}
    shm, memlock = ct.get("shm") or {}, ct.get("memlock") or {}
    errors = [x["error"] for x in (shm, memlock) if x.get("error")]
    if errors or not (shm and memlock):
        return {"name": name, "status": "error", "current": None, "expected": None,
                "message": "; ".join(errors) or "its init's mounts and limits were not read"}
    want_shm = policy["lxc_min_shm_mib"] << 20
    shm_text = ("none" if shm.get("missing") else "half of RAM (tmpfs default)" if shm["size"] is None
                else _mib(shm["size"]))
    current = "/dev/shm %s, memlock %s" % (shm_text, _mib(memlock["soft"]))
    lines, notes = [], []
    if want_shm and shm.get("missing"):
        notes.append("no /dev/shm is mounted (an init that mounts none): NCCL cannot create its segments")
    elif want_shm and shm["size"] is not None and shm["size"] < want_shm:
        notes.append("/dev/shm is %s, less than %s" % (_mib(shm["size"]), _mib(want_shm)))
    if notes and want_shm:
        lines.append("lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=%dm,create=dir 0 0"
                     % policy["lxc_min_shm_mib"])
    if policy["lxc_memlock_unlimited"] and memlock["soft"] is not None:
        notes.append("its init may lock %s of memory (soft limit)" % _mib(memlock["soft"]))
        lines.append("lxc.prlimit.memlock: unlimited")
    if not notes:
        return {"name": name, "status": "pass", "current": current, "expected": None, "message": current}
    return {"name": name, "status": "warn", "current": current, "expected": None, "message": "%s; add to "
            "/etc/pve/lxc/%s.conf and restart it: %s" % ("; ".join(notes), ct["ctid"], " | ".join(lines))}


def check_shm_memlock(facts, policy):
    cid = "lxc.shm_memlock"
    err = section_error(facts, "lxc") or section_error(facts, "ct_runtime")
    if err:
        return make_result(cid, policy, "error", None, err)
    runtime = facts.get("ct_runtime") or {}
    ev = list(runtime.get("evidence") or [])
    items = unreadable_ct_items(facts) + [shm_memlock_item(ct, policy) for ct in runtime.get("cts") or ()]
    if not items:
        return make_result(cid, policy, "skip", None, "no CT config passes NVIDIA devices", evidence=ev)
    current = "; ".join("%s: %s" % (i["name"], i["current"] or i["status"]) for i in items)
    return worst_of(cid, policy, items, current, "every running GPU CT has enough /dev/shm and may lock memory "
                    "without limit", ev, skip_message="no GPU CT runs")


SECTIONS = (("ct_runtime", read_runtime),)
CHECKS = {"lxc.resources": check_resources, "lxc.shm_memlock": check_shm_memlock}
