# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage the weights load from: the one reader of the ZFS state (section "zfs": ARC parameters and kstat, what
modprobe.d configures, the datasets' properties, the pools' devices) and of where each GPU CT's volumes live
(section "storage": /etc/pve/storage.cfg, /proc/mounts, the block devices and NVMe controllers under them); the
evaluators of storage.zfs_arc, storage.weights and storage.zfs_dataset.  The ARC fix is in fix.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

from ansible.module_utils.pvetune.core.fsroot import SNAPSHOT_DIR, FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.core.runner import captured_output
from ansible.module_utils.pvetune.formats.ct_config import parse_ct_config
from ansible.module_utils.pvetune.formats.modprobe_conf import read_options
from ansible.module_utils.pvetune.formats.proc_text import mount_of, parse_mounts
from ansible.module_utils.pvetune.formats.pve_storage import STORAGE_CFG, parse_storage_cfg, rootfs_volume
from ansible.module_utils.pvetune.formats.zfs_text import (
    ARCSTATS, parse_arcstats, parse_size, parse_zfs_get, parse_zpool_vdevs)

ZFS_PARAMS = "/sys/module/zfs/parameters"
MOUNTS = "/proc/mounts"
ARC_OPTIONS = ("zfs_arc_max", "zfs_arc_min")
ARC_KEYS = ("c", "c_min", "c_max", "size")
DATASET_PROPS = ("recordsize", "compression")
ZFS_GET = ("zfs", ("get", "-H", "-p", "-t", "filesystem", "-o", "name,property,value,source", "recordsize,compression"))
ZFS_GET_SNAPSHOT = SNAPSHOT_DIR + "/zfs-get.txt"
ZPOOL_LIST = ("zpool", ("list", "-v", "-H", "-P"))
ZPOOL_LIST_SNAPSHOT = SNAPSHOT_DIR + "/zpool-list.txt"
# Storage types and filesystems whose reads cross the network (pve-storage's plugins; the kernel's fs names).
NETWORK_TYPES = ("nfs", "cifs", "glusterfs", "cephfs", "rbd", "iscsi", "iscsidirect", "pbs")
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "ceph", "glusterfs", "fuse.glusterfs", "fuse.sshfs", "9p", "fuse.s3fs")
_VOLUME_KEY = re.compile(r"\A(rootfs|mp[0-9]{1,3})\Z")
_DISK = re.compile(r"\A(nvme[0-9]+n[0-9]+|sd[a-z]+|vd[a-z]+|xvd[a-z]+|dm-[0-9]+)(?:p?[0-9]+)?\Z")
_NVME_DISK = re.compile(r"\A(nvme[0-9]+)n[0-9]+\Z")
NVME_LINK_FILES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width", "numa_node")


# -- reader: ZFS -------------------------------------------------------------------------------------------------
def _int_param(fsroot, name, errors):
    path = "%s/%s" % (ZFS_PARAMS, name)
    raw = fsroot.try_value(path)
    if raw is None or re.match(r"\A[0-9]{1,20}\Z", raw):
        return int(raw) if raw is not None else None
    errors.append("%s: %r is not a byte count" % (path, raw[:40]))
    return None


def read_arc(fsroot):
    """The one reader of the ARC's settings (the audit's section "zfs" and the ARC fix): ``loaded``, ``params``
    ({option: bytes, 0 = the module's default}), ``arcstats`` ({c, c_min, c_max, size} in bytes), ``configured``
    (read_options of modprobe.d), ``errors``."""
    out = {"loaded": fsroot.isdir(ZFS_PARAMS), "params": {}, "arcstats": None, "errors": [],
           "configured": read_options(fsroot, "zfs", ARC_OPTIONS)}
    if not out["loaded"]:
        return out
    for name in ARC_OPTIONS:
        out["params"][name] = _int_param(fsroot, name, out["errors"])
    try:
        stats = parse_arcstats(fsroot.read_text(ARCSTATS))
        out["arcstats"] = {key: stats.get(key) for key in ARC_KEYS}
    except FsError as exc:
        out["errors"].append("%s: %s" % (exc.path, exc.reason))
    except ValueError as exc:
        out["errors"].append(str(exc))
    return out


def read_zfs(ctx):
    """Reader of the facts section "zfs": read_arc(), and ``datasets`` ({name: {recordsize, compression}}) and
    ``vdevs`` ({pool: [device path]}) with the reasons they are missing, ``evidence``."""
    fsroot = ctx.fsroot
    out = read_arc(fsroot)
    out.update({"evidence": [], "datasets": None, "datasets_reason": None, "vdevs": None, "vdevs_reason": None})
    if not out["loaded"]:
        out["evidence"].append("%s: not there (zfs module not loaded)" % ZFS_PARAMS)
        return out
    out["evidence"].append("%s/{%s}; %s" % (ZFS_PARAMS, ",".join(ARC_OPTIONS), ARCSTATS))
    if not gpu_cts(ctx.facts):
        # Only the GPU CTs' volumes need the datasets and the pools' devices: no command for a host without one.
        out["datasets_reason"] = out["vdevs_reason"] = "no GPU CT"
        return out
    for key, command, snapshot, parse in (
            ("datasets", ZFS_GET, ZFS_GET_SNAPSHOT, lambda t, w: parse_zfs_get(t, DATASET_PROPS, w)),
            ("vdevs", ZPOOL_LIST, ZPOOL_LIST_SNAPSHOT, parse_zpool_vdevs)):
        text, why, where = captured_output(fsroot, ctx.runner, command, snapshot)
        try:
            out[key] = parse(text, where) if text is not None else None
        except ValueError as exc:
            why = str(exc)
        out[key + "_reason"] = why
        out["evidence"].append(where + ("" if why is None else ": " + why))
    return out


# -- reader: where the GPU CTs' volumes live ---------------------------------------------------------------------
def _volumes(ct):
    """[(key, value)] of a CT config's rootfs and mpN lines (main section)."""
    parsed = parse_ct_config(ct["config"], ct["path"])
    return [(line.key, line.value) for line in parsed.main_lines()
            if line.kind == "kv" and _VOLUME_KEY.match(line.key or "")]


def _ct_path(key, value):
    if key == "rootfs":
        return "/"
    for opt in value.split(",")[1:]:
        name, _sep, path = opt.partition("=")
        if name.strip() == "mp":
            return path.strip()
    return None


def _block_name(fsroot, source):
    """The kernel name of a block device path (/dev/nvme0n1p3, /dev/mapper/pve-root, /dev/disk/by-id/...)."""
    path = source
    for _hop in range(4):
        name = posixpath.basename(path)
        if _DISK.match(name):
            return name
        try:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), fsroot.readlink(path)))
        except FsError:
            return None
    return None


def _disks_below(fsroot, name, depth=0):
    """The whole disks a block device lives on: a partition's disk, a device-mapper device's slaves' disks."""
    if name.startswith("dm-") and depth < 4:
        slaves = fsroot.listdir("/sys/block/%s/slaves" % name) if fsroot.isdir("/sys/block/%s/slaves" % name) else []
        out = []
        for slave in slaves:
            out.extend(d for d in _disks_below(fsroot, slave, depth + 1) if d not in out)
        return out
    match = _DISK.match(name)
    if not match:
        return []
    disk = match.group(1)
    return [disk] if fsroot.isdir("/sys/block/" + disk) else []


def _read_disk(fsroot, disk, vdev_disks):
    queue = "/sys/block/%s/queue" % disk
    info = {"scheduler": fsroot.try_value(queue + "/scheduler"), "read_ahead_kb": fsroot.try_value(
        queue + "/read_ahead_kb"), "zfs_vdev": disk in vdev_disks, "nvme": None}
    match = _NVME_DISK.match(disk)
    if match:
        info["nvme"] = match.group(1)
    return info


def _read_nvme(fsroot, ctrl):
    base = "/sys/class/nvme/%s/device" % ctrl
    return {name: fsroot.try_value("%s/%s" % (base, name)) for name in NVME_LINK_FILES}


def _pool_disks(fsroot, zfs, pool):
    """The whole disks under a pool's devices (zpool list), or None when the pool was not listed."""
    vdevs = (zfs.get("vdevs") or {}).get(pool)
    if vdevs is None:
        return None
    out = []
    for path in vdevs:
        name = _block_name(fsroot, path)
        out.extend(d for d in (_disks_below(fsroot, name) if name else []) if d not in out)
    return out


def _resolve(fsroot, volume, storages, mounts, pools, pools_reason):
    """Fill a volume's storage type, host path, mount, dataset and disks (or ``why`` they are not known)."""
    try:
        storage, name = rootfs_volume(volume["value"])
    except ValueError as exc:
        volume["why"] = str(exc)
        return
    conf = (storages or {}).get(storage) if storage else None
    volume["storage"] = storage
    if storage and conf is None:
        volume["why"] = "storage %s is not in %s" % (storage, STORAGE_CFG)
        return
    volume["type"] = conf["type"] if conf else "bind"
    if conf and conf["type"] == "zfspool":
        pool = conf.get("pool", "").strip("/")
        volume["dataset"] = "%s/%s" % (pool, name)
        disks = pools.get(pool.split("/")[0])
        volume["disks"] = disks or []
        if disks is None:
            volume["why"] = "the devices of pool %s: %s" % (pool.split("/")[0], pools_reason or "not listed")
        return
    if conf and conf["type"] in NETWORK_TYPES:
        volume["source"] = conf.get("server") or conf.get("monhost") or conf.get("portal") or ""
        return
    if conf and conf.get("path"):
        volume["host_path"] = posixpath.join(conf["path"], "images", name)
    elif conf:
        volume["why"] = "%s storage %s: a block volume; its devices are not resolved" % (conf["type"], storage)
        return
    else:
        volume["host_path"] = name
    mount = mount_of(volume["host_path"], mounts)
    if mount is None:
        volume["why"] = "no mount holds %s" % volume["host_path"] if mounts else "/proc/mounts not read"
        return
    volume.update(fstype=mount["fstype"], source=mount["source"], mount=mount["target"])
    if mount["fstype"] == "zfs":
        volume["dataset"] = mount["source"]
        volume["disks"] = pools.get(mount["source"].split("/")[0]) or []
    elif mount["source"].startswith("/dev/"):
        name = _block_name(fsroot, mount["source"])
        volume["disks"] = _disks_below(fsroot, name) if name else []


def gpu_cts(facts):
    """The CT configs the LXC reader read that pass NVIDIA devices (its passes_nvidia())."""
    return [ct for ct in (facts.get("lxc") or {}).get("cts") or () if ct.get("passes_nvidia") and not ct.get("error")]


def read_mounts(fsroot):
    """The one reader of /proc/mounts (this section, the ARC fix's root-on-ZFS test): ``(mounts, error or None)``."""
    try:
        return parse_mounts(fsroot.read_text(MOUNTS)), None
    except FsError as exc:
        return [], "%s: %s" % (exc.path, exc.reason)
    except ValueError as exc:
        return [], str(exc)


def read_storage(ctx):
    """Reader of the facts section "storage": ``volumes`` (every rootfs/mpN of each GPU CT: ``ctid``, ``key``,
    ``ct_path``, ``value``, ``storage``, ``type`` (a storage.cfg type, or "bind"), ``host_path``, ``mount``,
    ``fstype``, ``source``, ``dataset``, ``disks``, ``why`` the disks are unknown), ``disks`` ({name: scheduler,
    read_ahead_kb, zfs_vdev, nvme}), ``nvme`` ({controller: its PCI link files}), ``storages`` (storage.cfg parsed,
    None when unreadable) and ``cfg_notes`` (its parser's warnings, or why it is unreadable): the CT resource reader
    uses both, ``evidence``."""
    fsroot = ctx.fsroot
    zfs = ctx.facts.get("zfs") or {}
    out = {"volumes": [], "disks": {}, "nvme": {}, "storages": None, "cfg_notes": [], "evidence": []}
    if fsroot.isfile(STORAGE_CFG):
        try:
            out["storages"], out["cfg_notes"] = parse_storage_cfg(fsroot.read_text(STORAGE_CFG))
        except FsError as exc:
            out["cfg_notes"] = ["%s: %s" % (exc.path, exc.reason)]
    out["evidence"].extend(out["cfg_notes"])
    cts = gpu_cts(ctx.facts)
    if not cts:
        return out
    # Read whole or not at all, and never at the cost of storage.cfg, which the CT resource reader needs too.
    mounts, out["mounts_error"] = read_mounts(fsroot)
    pools = {pool: _pool_disks(fsroot, zfs, pool) for pool in (zfs.get("vdevs") or {})}
    vdev_disks = {disk for disks in pools.values() for disk in disks or ()}
    for ct in cts:
        for key, value in _volumes(ct):
            volume = {"ctid": ct["ctid"], "key": key, "value": value, "ct_path": _ct_path(key, value),
                      "storage": None, "type": None, "host_path": None, "mount": None, "fstype": None, "source": None,
                      "dataset": None, "disks": [], "why": None}
            _resolve(fsroot, volume, out["storages"], mounts, pools, zfs.get("vdevs_reason"))
            out["volumes"].append(volume)
            for disk in volume["disks"]:
                if disk not in out["disks"]:
                    out["disks"][disk] = _read_disk(fsroot, disk, vdev_disks)
                ctrl = out["disks"][disk]["nvme"]
                if ctrl and ctrl not in out["nvme"]:
                    out["nvme"][ctrl] = _read_nvme(fsroot, ctrl)
    out["evidence"].append("%s, /proc/mounts: %d volumes of %d GPU CTs on %d disks" % (
        STORAGE_CFG, len(out["volumes"]), len(cts), len(out["disks"])))
    return out


# -- evaluators ----------------------------------------------------------------------------------------------------
GIB = 1 << 30
PVE_ARC_SHARE, PVE_ARC_CAP = 10, 16 * GIB     # the PVE 8.1+ installer's zfs_arc_max: 10% of RAM, at most 16 GiB


def _gib(value):
    return "%.1f GiB" % (value / float(GIB)) if value is not None else "?"


def arc_target(policy, ram):
    """The ARC maximum (bytes) the policy wants on a host with ``ram`` bytes."""
    if policy["zfs_arc_max"] == "auto":
        return min(ram * PVE_ARC_SHARE // 100, PVE_ARC_CAP)
    return policy["zfs_arc_max"] << 20


def running_ct_memory(facts):
    """Bytes of memory the running CTs are promised (their cgroup's memory.max; "max" counts nothing)."""
    total = 0
    for ct in (facts.get("ct_runtime") or {}).get("cts") or ():
        raw = (ct.get("cgroup") or {}).get("memory.max") or ""
        if ct.get("running") and raw.isdigit():
            total += int(raw)
    return total


def check_zfs_arc(facts, policy):
    cid = "storage.zfs_arc"
    err = section_error(facts, "zfs") or section_error(facts, "memory")
    if err:
        return make_result(cid, policy, "error", None, err)
    zfs = facts["zfs"]
    ev = list(zfs.get("evidence") or [])
    if not zfs.get("loaded"):
        return make_result(cid, policy, "skip", None, "the zfs module is not loaded", evidence=ev)
    stats = zfs.get("arcstats") or {}
    ram = ((facts.get("memory") or {}).get("meminfo") or {}).get("MemTotal")
    if zfs.get("errors") or stats.get("c_max") is None or not ram:
        return make_result(cid, policy, "error", None, "; ".join(zfs.get("errors") or [
            "no c_max in %s" % ARCSTATS if ram else "no MemTotal in /proc/meminfo"]), evidence=ev)
    ram *= 1024
    c_max, c_min, size = stats["c_max"], stats.get("c_min"), stats.get("size")
    target = arc_target(policy, ram)
    cts = running_ct_memory(facts)
    current = "c_max %s (c_min %s, size %s) of %s RAM; running CTs promised %s" % (
        _gib(c_max), _gib(c_min), _gib(size), _gib(ram), _gib(cts))
    params = zfs.get("params") or {}
    conf = zfs.get("configured") or {}
    conf_max = parse_size((conf.get("zfs_arc_max") or {}).get("value"))
    conf_text = "%(value)s (%(file)s)" % conf["zfs_arc_max"] if conf.get("zfs_arc_max") else "not set"
    ev.append("zfs_arc_max: parameter %s, modprobe.d %s" % (params.get("zfs_arc_max"), conf_text))
    if conf_max and conf_max != c_max:
        # At module load arc_init() takes the configured maximum (lowering c_min below it): the next load applies it.
        return make_result(cid, policy, "pending", current, (
            "%s sets zfs_arc_max=%s, the loaded module runs with c_max %s: it applies when zfs loads again (a reboot; "
            "with root on ZFS after update-initramfs -u -k all)" % (
                conf["zfs_arc_max"]["file"], _gib(conf_max), _gib(c_max))), evidence=ev, reboot_required=True)
    if params.get("zfs_arc_max") and params["zfs_arc_max"] != c_max:
        return make_result(cid, policy, "fail", current, (
            "zfs_arc_max is %s but the ARC's c_max is %s: the cap is ignored (a zfs_arc_max written at runtime "
            "applies only above c_min, %s) and no modprobe.d file sets it for the next boot; write a lower "
            "zfs_arc_min first, and configure both in modprobe.d" % (
                _gib(params["zfs_arc_max"]), _gib(c_max), _gib(c_min))), evidence=ev)
    if c_max + cts > ram and c_max <= target * 1.05:
        # The ARC is as small as the policy wants: the CTs alone ask for more than there is; not the ARC's to fix.
        res = make_result(cid, policy, "warn", current, (
            "the ARC is capped at %s, but running CTs are promised %s of %s RAM: memory is overcommitted without it"
            % (_gib(c_max), _gib(cts), _gib(ram))), evidence=ev)
        res["fix_tag"] = ""
        return res
    if c_max + cts > ram:
        return make_result(cid, policy, "fail", current, (
            "the ARC may grow to %s while running CTs are promised %s of %s RAM: they compete with it for memory "
            "(reclaim stalls, the OOM killer); cap zfs_arc_max at %s" % (
                _gib(c_max), _gib(cts), _gib(ram), _gib(target))), evidence=ev)
    if c_max > target * 1.05:
        return make_result(cid, policy, "warn", current, "the ARC may grow to %s, more than the %s the policy allows "
                           "(zfs_arc_max %s)" % (_gib(c_max), _gib(target), policy["zfs_arc_max"]), evidence=ev)
    return make_result(cid, policy, "pass", current, "the ARC is capped at %s, within the policy's %s and beside "
                       "the running CTs' memory" % (_gib(c_max), _gib(target)), evidence=ev)


def unreadable_ct_items(facts):
    """An error item for every CT config the LXC reader could not read: it may be a GPU CT, unjudged."""
    return [{"name": "CT %s" % ct["ctid"], "status": "error", "current": None, "expected": None,
             "message": ct["error"]} for ct in (facts.get("lxc") or {}).get("cts") or () if ct.get("error")]


def gpu_ct_volumes(facts, cid, policy):
    """(volumes, error items, evidence, None), or (None, None, None, the result) when there is nothing to judge or a
    section error."""
    err = section_error(facts, "storage") or section_error(facts, "lxc")
    if err:
        return None, None, None, make_result(cid, policy, "error", None, err)
    storage = facts.get("storage") or {}
    ev = list(storage.get("evidence") or [])
    unreadable = unreadable_ct_items(facts)
    if not storage.get("volumes") and not unreadable:
        return None, None, None, make_result(cid, policy, "skip", None, "no GPU CT with a volume", evidence=ev)
    return storage.get("volumes") or [], unreadable, ev, None


def _vol_name(vol):
    return "CT %s %s %s" % (vol["ctid"], vol["key"], vol["ct_path"] or "")


def disk_problems(storage, disk, policy, gpu_nodes=()):
    info = storage["disks"].get(disk) or {}
    out = []
    nvme = storage["nvme"].get(info.get("nvme")) or {}
    node = nvme.get("numa_node")
    if gpu_nodes and node and node.isdigit() and int(node) not in gpu_nodes:
        out.append("%s is on NUMA node %s, where no GPU is: its reads cross the socket link" % (info["nvme"], node))
    speed, top = nvme.get("current_link_speed"), nvme.get("max_link_speed")
    width, top_w = nvme.get("current_link_width"), nvme.get("max_link_width")
    if speed and top and width and top_w and (speed != top or width != top_w):
        out.append("%s runs at %s x%s of %s x%s" % (info["nvme"], speed, width, top, top_w))
    if info.get("zfs_vdev"):
        return out        # ZFS schedules its vdevs' I/O itself and sets them to none; read-ahead is ZFS's prefetch
    sched = info.get("scheduler") or ""
    active = sched[sched.find("[") + 1:sched.find("]")] if "[" in sched else sched
    if info.get("nvme") and active and active != "none":
        out.append("%s uses the %s scheduler, not none" % (disk, active))
    ahead = info.get("read_ahead_kb")
    want = policy["storage_read_ahead_kb"]
    if want and ahead and ahead.isdigit() and int(ahead) < want:
        out.append("%s reads ahead %s KiB, less than %d" % (disk, ahead, want))
    return out


def check_weights(facts, policy):
    cid = "storage.weights"
    volumes, items, ev, early = gpu_ct_volumes(facts, cid, policy)
    if early:
        return early
    storage = facts["storage"]
    if storage.get("mounts_error"):
        return make_result(cid, policy, "error", None, storage["mounts_error"], evidence=ev)
    gpu_nodes = {f.get("numa_node") for f in (facts.get("pci") or {}).get("functions") or ()
                 if f.get("is_gpu") and isinstance(f.get("numa_node"), int) and f["numa_node"] >= 0}
    for vol in volumes:
        where = (vol["type"] or "unknown storage") + (" " + vol["storage"] if vol["storage"] else "")
        item = {"name": _vol_name(vol), "status": "pass", "current": where, "expected": "local NVMe", "message": ""}
        network = vol["type"] in NETWORK_TYPES or vol["fstype"] in NETWORK_FS
        if network:
            item.update(status="warn", current="%s %s" % (vol["fstype"] or vol["type"], vol["source"] or ""),
                        message="on network storage (%s%s): weights load at the network's speed" % (
                            vol["fstype"] or vol["type"], ", " + vol["source"] if vol["source"] else ""))
        elif vol["why"] and vol["type"] is None:
            item.update(status="skip", message=vol["why"])
        elif vol["why"]:
            item["message"] = "local; %s" % vol["why"]
        else:
            problems = [p for disk in vol["disks"] for p in disk_problems(storage, disk, policy, gpu_nodes)]
            item["current"] = "%s on %s" % (where, ", ".join(vol["disks"]) or "no disk found")
            if problems:
                item.update(status="warn", message="; ".join(problems))
            else:
                item["message"] = "local, on %s" % (", ".join(vol["disks"]) or "no named disk")
        items.append(item)
    return worst_of(cid, policy, items, "%d volumes of GPU CTs" % len(items),
                    "every GPU CT volume is local and its disks run at full link speed", ev)


def check_zfs_dataset(facts, policy):
    cid = "storage.zfs_dataset"
    volumes, items, ev, early = gpu_ct_volumes(facts, cid, policy)
    if early:
        return early
    zfs = facts.get("zfs") or {}
    # The weights' mounts: a rootfs holds the system, whose small files suit the default recordsize.
    judged = [v for v in volumes if v["key"] != "rootfs" and v["dataset"]]
    if not judged and not items:
        return make_result(cid, policy, "skip", None, "no GPU CT mount point is a ZFS dataset", evidence=ev)
    if zfs.get("datasets") is None and not items:
        return make_result(cid, policy, "skip", None, "dataset properties not read: %s" % (
            zfs.get("datasets_reason") or "the zfs module is not loaded"), evidence=ev)
    want = policy["zfs_recordsize"] << 10
    for vol in judged:
        props = (zfs.get("datasets") or {}).get(vol["dataset"])
        item = {"name": _vol_name(vol), "status": "pass", "current": None, "expected": "recordsize >= %s" % (
            _size_text(want)), "message": ""}
        if props is None:
            item.update(status="skip", message="%s is not among the datasets zfs get listed" % vol["dataset"])
            items.append(item)
            continue
        rsize = parse_size(props.get("recordsize"))
        comp = props.get("compression") or "?"
        item["current"] = "%s: recordsize %s, compression %s" % (vol["dataset"], _size_text(rsize), comp)
        notes = []
        if rsize is not None and rsize < want:
            notes.append("recordsize %s < %s: large sequential reads of weights take many small records; a new "
                         "recordsize applies to files written after the change only (copy the weights again)" % (
                             _size_text(rsize), _size_text(want)))
        if comp.startswith("gzip"):
            notes.append("compression %s costs CPU on every read; lz4 (or off) suits weights, which barely compress"
                         % comp)
        if notes:
            item.update(status="warn", message="; ".join(notes))
        else:
            item["message"] = item["current"]
        items.append(item)
    return worst_of(cid, policy, items, "%d datasets" % len(items), "the GPU CTs' datasets suit large sequential "
                    "reads", ev, skip_message="the datasets' properties were not listed")


def _size_text(value):
    if value is None:
        return "?"
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if value >= size and value % size == 0:
            return "%d%s" % (value // size, unit)
    return str(value)


SECTIONS = (("zfs", read_zfs), ("storage", read_storage))
CHECKS = {"storage.zfs_arc": check_zfs_arc, "storage.weights": check_weights, "storage.zfs_dataset": check_zfs_dataset}
