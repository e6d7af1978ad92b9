#!/usr/bin/python3
"""pvetune-sim: the simulated Proxmox VE GPU host inside a Molecule host container.

Installed in the container as /usr/local/sbin/pvetune-sim (and, as a symlink, as the systemd
generator /etc/systemd/system-generators/pvetune-sim-generator). Python 3 standard library only.

The host is a tree, /srv/pvetune-sim (pvetune_root), that looks like "/" of a Proxmox VE GPU host.
Its persistent files (/etc, /boot, /lib/modules, /var) live in the container's file system and
survive a "reboot" (podman restart); its runtime file systems (/sys, /proc, /dev, /run of the tree)
are podman tmpfs mounts, empty after every container start, and filled at boot by `pvetune-sim boot`
(pvetune-sim-kernel.service, before sysinit.target) the way a kernel and its drivers would:

  boot        the boot loader the host's firmware runs (GRUB: the default entry of the tree's
              /boot/grub/grub.cfg; systemd-boot: loader.conf's default among the loader entries of
              the simulated ESP /boot/efi-sim) picks kernel version and command line; the kernel
              image must exist. Then /sys and /proc are laid out from the seed (the cpufreq driver
              and C-states follow the command line: amd_pstate=active -> amd-pstate-epp with the
              kernel's defaults governor=powersave/EPP=balance_performance, else acpi-cpufreq;
              processor.max_cstate=0/1 -> no C2; iommu=pt -> identity IOMMU domains), /proc/cmdline
              and osrelease are written, the tree's sysctl.d files are applied to its /proc/sys
              (what systemd-sysctl does), the zfs module loads with the options of /etc/modprobe.d (of
              the booted kernel's initramfs when root is on ZFS) and sizes its ARC as arc_init() does, PCIe
              config spaces come back with the firmware's MaxReadReq, and the "NVIDIA driver" loads:
              its majors (seed default, or /var/lib/pvetune-sim/next-boot.json) are registered in
              /proc/devices and real nodes are made with mknod in the tree's /dev.
  guests      start|stop: the stand-in for pve-guests.service (start every CT with onboot: 1
              through the tree's pct, stop them at shutdown).
  generator   (as pvetune-sim-generator) turns each unit pvetune installed and enabled in the tree
              (<tree>/etc/systemd/system/multi-user.target.wants/pvetune-*.service) into a unit of
              this container's systemd: the unit text is pvetune's own, only the commands are
              re-rooted (ExecStart=/usr/local/sbin/pvetune-boot SUB ->
              <tree>/usr/local/sbin/pvetune-boot --root <tree> SUB; /usr/bin/nvidia-modprobe -> the
              tree's stand-in). Any other command in a pvetune unit makes the generated unit fail.
              /var/lib/pvetune-sim/disable-pvetune-units: generate nothing (control experiment).
  install     ARCHIVE: unpack a seed (molecule/resources/sim/build_seed.py) into the tree and
              /srv/pvetune-seed.
  apt-repo    build the stand-in proxmox-kernel-6.14 packages (dpkg-deb) and the file: archive.
  digest      --save FILE [--calls LOG] PATH... | --compare FILE: type, mode, owner, content hash,
              link target and device number of every file under PATH (timestamps are not compared);
              fails on any difference, and on any stand-in call logged meanwhile that is not read-only.
              The running CTs' kernel files the real-LXC pct binds into the tree (its cgroup files,
              /proc/<init>/status and root) are recorded as binds of their source, not read.
  ct-open     VMID PATH [--record KEY]: open PATH read-write inside the running LXC CT (lxc-attach)
              and print OPENED or the errno name (ENXIO: the device cgroup allowed it and no driver
              serves the major; EPERM: the device cgroup refused it); --record KEY keeps the result
              with the node's major:minor and the CT's allow lines in /var/lib/pvetune-sim/evidence.json.
"""
import fnmatch
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

SEED = "/srv/pvetune-seed"
STATE = "/var/lib/pvetune-sim"
RUN = "/run/pvetune-sim"
NVIDIA = 195
NVIDIA_NAMES = ("nvidia", "nvidia-uvm", "nvidia-caps", "nvidia-nvlink", "nvidia-caps-imex-channels")


class BootError(Exception):
    pass


def load_sim():
    with open(os.path.join(SEED, "sim.json")) as handle:
        return json.load(handle)


def tpath(root, path):
    return os.path.join(root, path.lstrip("/"))


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        if default is None:
            raise
        return default


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


def version_key(ver):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|\D+", ver)]


# -- boot loaders ------------------------------------------------------------------------
_ENTRY = re.compile(r"^\s*(menuentry|submenu)\s+'([^']*)'.*?\$menuentry_id_option\s+'([^']*)'\s*\{\s*$")


def parse_grub_cfg(text):
    """[{"kind", "title", "id", "linux", "children"}] and the `set default` value (None if unset)."""
    top = []
    stack = [top]
    default = None
    current = []
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if m:
            item = {"kind": m.group(1), "title": m.group(2), "id": m.group(3), "linux": None, "children": []}
            stack[-1].append(item)
            current.append(item)
            stack.append(item["children"])
            continue
        if line.strip() == "}" and current:
            current.pop()
            stack.pop()
            continue
        m = re.match(r"^\s*set default=\"?([^\"]*)\"?\s*$", line)
        if m and not current and default is None:
            default = m.group(1)
            continue
        m = re.match(r"^\s*linux\s+(\S+)(.*)$", line)
        if m and current:
            current[-1]["linux"] = (m.group(1), m.group(2).strip())
    return top, default


def grub_choose(entries, default):
    path = (default or "0").split(">")
    level = entries
    chosen = None
    for part in path:
        if part.isdigit():
            idx = int(part)
            if idx >= len(level):
                raise BootError("GRUB default %r: no entry %d" % (default, idx))
            chosen = level[idx]
        else:
            found = [e for e in level if e["id"] == part or e["title"] == part]
            if not found:
                raise BootError("GRUB default %r: no menu entry %r (GRUB would fall back to entry 0 and "
                                "complain; the simulation refuses)" % (default, part))
            chosen = found[0]
        level = chosen["children"]
    if chosen["kind"] == "submenu":
        raise BootError("GRUB default %r names a submenu, not an entry" % default)
    return chosen


def boot_grub(root):
    cfg = tpath(root, "/boot/grub/grub.cfg")
    entries, default = parse_grub_cfg(read(cfg))
    if not entries:
        raise BootError("/boot/grub/grub.cfg has no menu entry")
    entry = grub_choose(entries, default)
    if not entry["linux"]:
        raise BootError("GRUB entry %r has no linux line" % entry["title"])
    image, args = entry["linux"]
    m = re.match(r"^/boot/vmlinuz-(\S+)$", image)
    if not m:
        raise BootError("GRUB entry %r loads %s, not /boot/vmlinuz-<version>" % (entry["title"], image))
    kver = m.group(1)
    if not os.path.isfile(tpath(root, image)):
        raise BootError("GRUB: error: file '%s' not found." % image)
    return {"loader": "grub", "entry": entry["id"], "default": default, "kernel": kver,
            "cmdline": "BOOT_IMAGE=%s %s" % (image, args), "args": args}


def parse_loader_entry(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\w+)\s+(.*?)\s*$", line)
        if m and not line.lstrip().startswith("#"):
            out.setdefault(m.group(1), m.group(2))
    return out


def boot_systemd_boot(root):
    esp = tpath(root, "/boot/efi-sim")
    conf = parse_loader_entry(read(os.path.join(esp, "loader/loader.conf"), ""))
    entries = {}
    for path in glob.glob(os.path.join(esp, "loader/entries/*.conf")):
        entries[os.path.basename(path)] = parse_loader_entry(read(path))
    if not entries:
        raise BootError("systemd-boot: no loader entries on the ESP")
    # systemd-boot sorts entries newest version first; `default` is a glob over entry ids.
    order = sorted(entries, key=lambda n: version_key(entries[n].get("version", n)), reverse=True)
    pattern = conf.get("default")
    matching = [n for n in order if pattern is None or fnmatch.fnmatch(n, pattern)
                or fnmatch.fnmatch(n[:-len(".conf")], pattern)]
    if not matching:
        raise BootError("systemd-boot: default %r matches no entry (%s)" % (pattern, ", ".join(order)))
    name = matching[0]
    entry = entries[name]
    linux, initrd = entry.get("linux", ""), entry.get("initrd", "")
    m = re.match(r"^/EFI/proxmox/([^/]+)/vmlinuz-\1$", linux)
    if not m:
        raise BootError("systemd-boot entry %s loads %r" % (name, linux))
    if not os.path.isfile(os.path.join(esp, linux.lstrip("/"))):
        raise BootError("systemd-boot: %s not found on the ESP" % linux)
    args = entry.get("options", "")
    return {"loader": "systemd-boot", "entry": name, "default": pattern, "kernel": m.group(1),
            "cmdline": "initrd=%s %s" % (initrd.replace("/", "\\"), args), "args": args}


# -- the kernel ----------------------------------------------------------------------------
def cpu_variant(args):
    words = args.split()
    driver = "amd-pstate-epp" if "amd_pstate=active" in words else "acpi-cpufreq"
    limit = 8
    for word in words:
        m = re.match(r"^processor\.max_cstate=(\d+)$", word)
        if m:
            limit = int(m.group(1))
    return driver, "c1" if limit <= 1 else "c8"


def iommu_domains(root, args):
    """iommu=pt gives host devices identity domains (drivers/iommu/iommu.c, iommu_set_default_passthrough):
    every group the seed has as DMA or DMA-FQ becomes identity; the kernel default otherwise. Returns the type."""
    passthrough = "iommu=pt" in args.split()
    kind = None
    for path in glob.glob(tpath(root, "/sys/kernel/iommu_groups/*/type")):
        if passthrough and read(path, "").strip() in ("DMA", "DMA-FQ"):
            write(path, "identity\n")
        kind = read(path, "").strip()
    return kind


def clear_dir(path):
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


def sysctl_files(root):
    """systemd-sysctl's order: *.conf by file name; for one name /etc wins over /run and /usr."""
    chosen = {}
    for d in ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"):
        for path in sorted(glob.glob(os.path.join(tpath(root, d), "*.conf"))):
            chosen.setdefault(os.path.basename(path), (d, path))
    return [chosen[name] for name in sorted(chosen)]


def apply_sysctl(root):
    applied = {}
    unknown = []
    for d, path in sysctl_files(root):
        for line in read(path, "").splitlines():
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            key, value = (p.strip() for p in line.split("=", 1))
            key = key.lstrip("-")
            target = tpath(root, "/proc/sys/" + key.replace(".", "/"))
            if os.path.isfile(target):
                write(target, value + "\n")
                applied[key] = "%s (%s/%s)" % (value, d, os.path.basename(path))
            else:
                unknown.append(key)
    return applied, unknown


ZFS_PARAMS = "/sys/module/zfs/parameters"
ARCSTATS = "/proc/spl/kstat/zfs/arcstats"
MIB = 1 << 20


def zfs_options(root, entry):
    """The zfs module options the boot loads it with: from the booted kernel's initramfs when root is on ZFS (the
    update-initramfs stand-in's copy of /etc/modprobe.d in the image), else from /etc/modprobe.d (the module
    loads from the root file system). Last value wins, as in modprobe."""
    if "root=ZFS=" in entry["cmdline"]:
        texts = [read(tpath(root, "/boot/initrd.img-%s.modprobe.d" % entry["kernel"]), "")]
    else:
        texts = [read(path, "") for path in sorted(glob.glob(tpath(root, "/etc/modprobe.d/*.conf")))]
    options = {}
    for text in texts:
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) > 2 and words[0] == "options" and words[1] == "zfs":
                options.update(w.split("=", 1) for w in words[2:] if "=" in w)
    return options


def load_zfs(root, entry):
    """What OpenZFS's arc_init() does at module load (module/zfs/arc.c, module/os/linux/zfs/arc_os.c of 2.2):
    c_max = zfs_arc_max when set (at least 64 MiB, below RAM), else half of RAM; c_min = zfs_arc_min when set, else
    the larger of RAM/32 and 32 MiB, lowered to the larger of zfs_arc_max/2 and 32 MiB when it is not below c_max.
    The parameters read what was passed (0 when nothing). Returns {"zfs_arc_max", "zfs_arc_min", "c_max", "c_min"}."""
    if not os.path.isdir(tpath(root, ZFS_PARAMS)):
        return None
    ram = int(re.search(r"^MemTotal:\s+(\d+)", read(tpath(root, "/proc/meminfo")), re.M).group(1)) * 1024
    opts = zfs_options(root, entry)
    arc_max, arc_min = int(opts.get("zfs_arc_max", 0)), int(opts.get("zfs_arc_min", 0))
    c_max = arc_max if 64 * MIB <= arc_max < ram else ram // 2
    c_min = arc_min if 0 < arc_min <= c_max else max(ram // 32, 32 * MIB)
    if arc_max and c_min >= c_max:
        c_min = max(arc_max // 2, 32 * MIB)
    write(tpath(root, ZFS_PARAMS + "/zfs_arc_max"), "%d\n" % arc_max)
    write(tpath(root, ZFS_PARAMS + "/zfs_arc_min"), "%d\n" % arc_min)
    stats = read(tpath(root, ARCSTATS))
    for name, value in (("c", c_max), ("c_max", c_max), ("c_min", c_min), ("size", max(c_max - (3 << 30), c_min))):
        stats = re.sub(r"^(%s\s+\d+\s+)\d+$" % name, r"\g<1>%d" % value, stats, flags=re.M)
    write(tpath(root, ARCSTATS), stats)
    return {"zfs_arc_max": arc_max, "zfs_arc_min": arc_min, "c_max": c_max, "c_min": c_min}


def proc_devices(text, majors):
    char, block, section = [], [], None
    for line in text.splitlines():
        if line.startswith("Character devices"):
            section = char
        elif line.startswith("Block devices"):
            section = block
        else:
            m = re.match(r"^\s*(\d+)\s+(\S+)\s*$", line)
            if m and section is not None:
                section.append((int(m.group(1)), m.group(2)))
    char = [(maj, name) for maj, name in char if name not in NVIDIA_NAMES]
    used = {maj for maj, _ in char}
    for name, major in majors.items():
        if major in used:
            raise BootError("major %d for %s is taken in /proc/devices" % (major, name))
        char.append((major, name))
    char.sort()
    lines = ["Character devices:"] + ["%3d %s" % kv for kv in char] + ["", "Block devices:"]
    return "\n".join(lines + ["%3d %s" % kv for kv in block]) + "\n"


def make_nodes(root, majors, gpus):
    dev = tpath(root, "/dev")
    nodes = [("nvidia%d" % i, NVIDIA, i, 0o666) for i in range(gpus)]
    nodes += [("nvidiactl", NVIDIA, 255, 0o666), ("nvidia-modeset", NVIDIA, 254, 0o666),
              ("nvidia-uvm", majors["nvidia-uvm"], 0, 0o666), ("nvidia-uvm-tools", majors["nvidia-uvm"], 1, 0o666),
              ("nvidia-caps/nvidia-cap1", majors["nvidia-caps"], 1, 0o400),
              ("nvidia-caps/nvidia-cap2", majors["nvidia-caps"], 2, 0o444)]
    made = []
    for name, major, minor, mode in nodes:
        path = os.path.join(dev, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
        os.chmod(path, mode)
        made.append("/dev/%s %d:%d" % (name, major, minor))
    return made


def cmd_boot(_args):
    sim = load_sim()
    root = sim["root"]
    os.makedirs(RUN, exist_ok=True)
    record = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "boot_id": boot_token(),
              "ok": False}
    try:
        for d in ("sys", "proc", "dev", "run"):
            clear_dir(tpath(root, d))
        entry = boot_grub(root) if sim["loader"] == "grub" else boot_systemd_boot(root)
        record.update(entry)
        if not os.path.isdir(tpath(root, "/lib/modules/" + entry["kernel"])):
            raise BootError("kernel %s: /lib/modules/%s missing (no modules: the NVIDIA driver cannot load)"
                            % (entry["kernel"], entry["kernel"]))
        driver, cstates = cpu_variant(entry["args"])
        record["cpufreq_driver"], record["cstates"] = driver, cstates
        for name in ("runtime-base.tar", "runtime-cpu-%s-%s.tar" % (driver, cstates)):
            subprocess.run(["tar", "-C", root, "-xf", os.path.join(SEED, name)], check=True)
        record["iommu_groups"] = iommu_domains(root, entry["args"])
        write(tpath(root, "/proc/cmdline"), entry["cmdline"] + "\n")
        write(tpath(root, "/proc/sys/kernel/osrelease"), entry["kernel"] + "\n")
        record["sysctl"], record["sysctl_unknown"] = apply_sysctl(root)
        record["zfs"] = load_zfs(root, entry)
        majors = dict(sim["majors"])
        nxt = os.path.join(STATE, "next-boot.json")
        if os.path.isfile(nxt):
            with open(nxt) as handle:
                majors.update(json.load(handle).get("majors", {}))
        majors = {k: int(v) for k, v in majors.items()}
        write(tpath(root, "/proc/devices"), proc_devices(read(tpath(root, "/proc/devices")), majors))
        record["majors"] = majors
        record["nodes"] = make_nodes(root, majors, int(sim["gpus"]))
        # The JSON-state pct stand-in keeps "which CT runs" in the tree; a boot starts with none.
        state = tpath(root, "/.pvetune/pct-state.json")
        if os.path.exists(state):
            os.unlink(state)
        record["ok"] = True
    except (BootError, OSError, subprocess.CalledProcessError, KeyError, ValueError) as exc:
        record["error"] = str(exc)
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write(os.path.join(RUN, "boot.json"), json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.makedirs(STATE, exist_ok=True)
    with open(os.path.join(STATE, "boots.jsonl"), "a") as handle:
        handle.write(json.dumps({k: record.get(k) for k in ("started", "boot_id", "ok", "loader", "entry",
                                                             "kernel", "majors", "error")}, sort_keys=True) + "\n")
    if not record["ok"]:
        print("pvetune-sim boot: FAILED: %s" % record["error"], file=sys.stderr)
        return 1
    print("pvetune-sim boot: %s booted %s (%s %s) with %r; cpufreq %s, %s; NVIDIA majors %s"
          % (sim["host"], entry["kernel"], entry["loader"], entry["entry"], entry["args"], driver, cstates,
             ", ".join("%s=%d" % kv for kv in sorted(majors.items()))))
    return 0


def boot_token():
    """Start time of PID 1 (the container's boot; the kernel boot_id is the machine's)."""
    return read("/proc/1/stat").rsplit(")", 1)[1].split()[19]


# -- pve-guests ------------------------------------------------------------------------------
def onboot_cts(root):
    base = tpath(root, "/etc/pve/lxc")
    if os.path.islink(base):
        base = tpath(root, "/etc/pve/" + os.readlink(base)) if not os.readlink(base).startswith("/") \
            else tpath(root, os.readlink(base))
    out = []
    for path in glob.glob(os.path.join(base, "*.conf")):
        vmid = os.path.basename(path)[:-5]
        if not vmid.isdigit():
            continue
        main = read(path).split("\n[", 1)[0]
        if re.search(r"^onboot:\s*1\s*$", main, re.M):
            out.append(vmid)
    return sorted(out, key=int)


def pct(root, *args):
    env = dict(os.environ, PVETUNE_ROOT=root)
    return subprocess.run([tpath(root, "/.pvetune/bin/pct")] + list(args), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)


def cmd_guests(args):
    sim = load_sim()
    root = sim["root"]
    action = args[0] if args else "start"
    results = {}
    failed = False
    for vmid in onboot_cts(root):
        status = pct(root, "status", vmid)
        running = "status: running" in status.stdout
        if action == "start" and not running:
            proc = pct(root, "start", vmid)
        elif action == "stop" and running:
            proc = pct(root, "shutdown", vmid, "--timeout", "10")
        else:
            results[vmid] = "already %s" % ("running" if running else "stopped")
            continue
        results[vmid] = "%s: exit %d %s" % (action, proc.returncode, (proc.stderr or proc.stdout).strip()[-300:])
        failed = failed or proc.returncode != 0
        print("pve-guests (pvetune-sim): CT %s: %s" % (vmid, results[vmid]))
    if action == "start":
        write(os.path.join(RUN, "guests.json"), json.dumps({"boot_id": boot_token(), "cts": results},
                                                           indent=2, sort_keys=True) + "\n")
    return 1 if failed else 0


# -- systemd generator -------------------------------------------------------------------------
def rewrite_unit(text, root, unit):
    out = ["# Generated by pvetune-sim-generator from %s/etc/systemd/system/%s:" % (root, unit),
           "# pvetune's unit, commands re-rooted to the simulated host's tree."]
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "[Service]":
            out += [line, "Environment=PVETUNE_ROOT=%s" % root]
            continue
        m = re.match(r"^(Exec\w+)=([-@:+!]*)(\S+)(.*)$", stripped)
        if m:
            key, prefix, exe, rest = m.groups()
            if exe == "/usr/local/sbin/pvetune-boot":
                line = "%s=%s%s --root %s%s" % (key, prefix, tpath(root, exe), root, rest)
            elif exe == "/usr/bin/nvidia-modprobe":
                line = "%s=%s%s%s" % (key, prefix, tpath(root, "/.pvetune/bin/nvidia-modprobe"), rest)
            else:
                raise ValueError("%s: %s runs %s, which the simulation does not know how to re-root"
                                 % (unit, key, exe))
        out.append(line)
    return "\n".join(out) + "\n"


def cmd_generator(args):
    normal = args[0] if args else "/run/systemd/generator"
    try:
        sim = load_sim()
    except OSError:
        return 0   # not installed yet
    root = sim["root"]
    if os.path.exists(os.path.join(STATE, "disable-pvetune-units")):
        return 0
    wants = tpath(root, "/etc/systemd/system/multi-user.target.wants")
    for link in sorted(glob.glob(os.path.join(wants, "pvetune-*.service"))):
        unit = os.path.basename(link)
        try:
            text = read(tpath(root, "/etc/systemd/system/" + unit))
            generated = rewrite_unit(text, root, unit)
        except (OSError, ValueError) as exc:
            generated = ("[Unit]\nDescription=pvetune-sim: cannot run %s\n[Service]\nType=oneshot\n"
                         "ExecStart=/bin/sh -c 'echo \"pvetune-sim-generator: %s\" >&2; exit 1'\n"
                         % (unit, str(exc).replace("'", "").replace('"', "")))
        write(os.path.join(normal, unit), generated)
        os.makedirs(os.path.join(normal, "multi-user.target.wants"), exist_ok=True)
        target = os.path.join(normal, "multi-user.target.wants", unit)
        if not os.path.lexists(target):
            os.symlink("../" + unit, target)
    return 0


# -- installation ------------------------------------------------------------------------------
def cmd_install(args):
    archive = args[0]
    work = tempfile.mkdtemp(prefix="pvetune-seed-", dir="/srv")
    try:
        subprocess.run(["tar", "-C", work, "-xzf", archive], check=True)
        with open(os.path.join(work, "seed", "sim.json")) as handle:
            root = json.load(handle)["root"]
        if os.path.isdir(SEED):
            shutil.rmtree(SEED)
        shutil.move(os.path.join(work, "seed"), SEED)
        os.makedirs(root, exist_ok=True)
        # cp -a keeps symlinks and modes; the runtime mount points (sys, proc, dev, run) are not in it.
        subprocess.run(["cp", "-a", os.path.join(work, "tree") + "/.", root + "/"], check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("pvetune-sim: installed %s into %s (seed %s)" % (archive, root, SEED))
    return 0


KERNELS = ("6.14.5-1-pve", "6.14.8-2-pve")


def cmd_apt_repo(_args):
    """Stand-in Proxmox kernel packages: proxmox-kernel-<ver>-pve-signed (image, config, modules dir)
    and two versions of the proxmox-kernel-6.14 meta package, each depending on its kernel (apt must
    pick the newest). No maintainer scripts: dpkg runs them chrooted into the tree, which has no
    shell; the apt-get stand-in runs the kernel's postinst.d hooks itself."""
    repo = load_sim()["apt_archive"]
    if os.path.isdir(repo):
        shutil.rmtree(repo)
    os.makedirs(repo)
    work = tempfile.mkdtemp(prefix="pvetune-debs-")
    try:
        for kver in KERNELS:
            deb_ver = kver[:-len("-pve")]
            files = {"boot/vmlinuz-%s" % kver: "pvetune simulated kernel image %s\n" % kver,
                     "boot/config-%s" % kver: "CONFIG_X86_AMD_PSTATE=y\nCONFIG_X86_AMD_PSTATE_DEFAULT_MODE=3\n",
                     "lib/modules/%s/modules.dep" % kver: ""}
            build_deb(work, repo, "proxmox-kernel-%s-signed" % kver, deb_ver, None, files,
                      "Proxmox Kernel Image (signed) - pvetune simulation stand-in")
            build_deb(work, repo, "proxmox-kernel-6.14", deb_ver, "proxmox-kernel-%s-signed" % kver, {},
                      "Latest Proxmox Kernel Image - pvetune simulation stand-in")
        with open(os.path.join(repo, "Packages"), "w") as handle:
            subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo, stdout=handle,
                           stderr=subprocess.DEVNULL, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("pvetune-sim: apt archive %s: %s" % (repo, ", ".join(sorted(os.listdir(repo)))))
    return 0


def build_deb(work, repo, name, version, depends, files, description):
    pkg = os.path.join(work, "%s_%s" % (name, version))
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    for path, text in files.items():
        write(os.path.join(pkg, path), text)
    control = ["Package: %s" % name, "Version: %s" % version, "Architecture: amd64",
               "Maintainer: pvetune simulation <pvetune@invalid>", "Section: admin", "Priority: optional"]
    if depends:
        control.append("Depends: %s" % depends)
    control.append("Description: %s" % description)
    write(os.path.join(pkg, "DEBIAN", "control"), "\n".join(control) + "\n")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", pkg, repo], check=True,
                   stdout=subprocess.DEVNULL)


# -- digest ---------------------------------------------------------------------------------------
def entry_digest(path):
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    info = [oct(st.st_mode), st.st_uid, st.st_gid]
    if stat.S_ISLNK(st.st_mode):
        info.append("-> " + os.readlink(path))
    elif stat.S_ISREG(st.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        info.append(digest.hexdigest())
    elif kind in (stat.S_IFCHR, stat.S_IFBLK):
        info.append("%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
    return info


def live_binds():
    """{tree path: real source} of the running CTs' runtime state the real-LXC pct binds into the tree
    (tests/standins/lxc/pct, /run/pvetune-lxc/<vmid>/exposed.json): the kernel's live files (cgroup files,
    /proc/<pid>/status, the CT's root), not host state; the digest names their source and does not read them."""
    binds = {}
    for record in glob.glob("/run/pvetune-lxc/*/exposed.json"):
        try:
            with open(record) as handle:
                binds.update((m["target"], m["source"]) for m in json.load(handle).get("mounts", []))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return binds


def tree_digest(paths, exclude):
    out = {}
    binds = live_binds()
    for top in paths:
        if not os.path.lexists(top):
            out[top] = ["absent"]
            continue
        out[top] = entry_digest(top)
        for dirpath, dirnames, filenames in os.walk(top):
            bound = [d for d in dirnames if os.path.join(dirpath, d) in binds]
            dirnames[:] = [d for d in dirnames if d not in bound]   # os.walk does not descend into them
            for name in bound + dirnames + filenames:
                path = os.path.join(dirpath, name)
                if path in exclude:
                    continue
                if path in binds:
                    out[path] = ["live bind of", binds[path]]
                    continue
                try:
                    out[path] = entry_digest(path)
                except OSError as exc:
                    out[path] = ["unreadable", exc.strerror]
    return out


READ_ONLY_CALLS = {
    # stand-in: first arguments of the calls that only read (pvetune's audit and the --check previews)
    "pct": (("status",), ("list",), ("exec",)),
    "proxmox-boot-tool": (("status",), ("kernel", "list")),
    "nvidia-smi": ((),),
}


def call_is_read_only(call):
    name, args = call[0], call[1:]
    return any(list(args[:len(prefix)]) == list(prefix) for prefix in READ_ONLY_CALLS.get(name, ()))


def cmd_digest(args):
    """digest --save FILE [--exclude PATH]... [--calls LOG] PATH... | digest --compare FILE

    The stand-ins' invocation log (--calls) is not host state; it is excluded from the digest and the
    calls appended to it meanwhile must all be read-only ones (READ_ONLY_CALLS)."""
    mode, file, rest = args[0], args[1], list(args[2:])
    if mode == "--save":
        exclude, paths, calls = [], [], None
        while rest:
            arg = rest.pop(0)
            if arg == "--exclude":
                exclude.append(rest.pop(0))
            elif arg == "--calls":
                calls = rest.pop(0)
                exclude.append(calls)
            else:
                paths.append(arg)
        offset = os.path.getsize(calls) if calls and os.path.exists(calls) else 0
        data = {"paths": paths, "exclude": exclude, "calls": calls, "calls_offset": offset,
                "entries": tree_digest(paths, set(exclude))}
        write(file, json.dumps(data, sort_keys=True) + "\n")
        total = hashlib.sha256(json.dumps(data["entries"], sort_keys=True).encode()).hexdigest()
        print(json.dumps({"entries": len(data["entries"]), "sha256": total}))
        return 0
    with open(file) as handle:
        before = json.load(handle)
    now = tree_digest(before["paths"], set(before["exclude"]))
    old = before["entries"]
    changed = sorted(p for p in set(old) | set(now) if old.get(p) != now.get(p))
    calls = []
    if before.get("calls") and os.path.exists(before["calls"]):
        with open(before["calls"]) as handle:
            handle.seek(before["calls_offset"])
            calls = [json.loads(line) for line in handle if line.strip()]
    writing_calls = [c for c in calls if not call_is_read_only(c)]
    report = {
        "entries": len(now),
        "sha256_before": hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest(),
        "sha256_after": hashlib.sha256(json.dumps(now, sort_keys=True).encode()).hexdigest(),
        "changed_count": len(changed),
        "changed": [{"path": p, "before": old.get(p), "after": now.get(p)} for p in changed[:50]],
        "stand-in calls": [" ".join(c) for c in calls],
        "calls that are not read-only": [" ".join(c) for c in writing_calls],
    }
    print(json.dumps(report, indent=1))
    return 1 if changed or writing_calls else 0


# -- LXC probe ------------------------------------------------------------------------------------
OPEN_PROBE = """import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
    print("OPENED")
except OSError as exc:
    print(errno.errorcode.get(exc.errno, str(exc.errno)))
"""


def cmd_ct_open(args):
    """ct-open VMID PATH [--record KEY]: open PATH in the CT; with --record, keep the result, the
    host node's major:minor and the CT's allow lines in /var/lib/pvetune-sim/evidence.json."""
    vmid, path = args[0], args[1]
    key = args[3] if len(args) > 3 and args[2] == "--record" else None
    root = load_sim()["root"]
    proc = subprocess.run(["lxc-attach", "-P", tpath(root, "/var/lib/lxc"), "-n", vmid, "--", "python3", "-c",
                           OPEN_PROBE, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    result = proc.stdout.strip() if proc.returncode == 0 else "ATTACH-FAILED rc=%d %s" % (
        proc.returncode, proc.stderr.strip()[-300:])
    print(result)
    if key:
        try:
            st = os.stat(tpath(root, path))
            node = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        except OSError as exc:
            node = "missing (%s)" % exc.strerror
        conf = read(tpath(root, "/etc/pve/lxc/%s.conf" % vmid), "").split("\n[", 1)[0]
        evidence_path = os.path.join(STATE, "evidence.json")
        evidence = json.loads(read(evidence_path, "{}") or "{}")
        evidence[key] = {"ct": vmid, "path": path, "result": result, "host_node": node, "boot_id": boot_token(),
                         "allow_lines": re.findall(r"^lxc\.cgroup2?\.devices\.allow\s*[:=].*$", conf, re.M),
                         "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write(evidence_path, json.dumps(evidence, indent=2, sort_keys=True) + "\n")
    return 0 if proc.returncode == 0 else 1


COMMANDS = {"boot": cmd_boot, "guests": cmd_guests, "generator": cmd_generator, "install": cmd_install,
            "apt-repo": cmd_apt_repo, "digest": cmd_digest, "ct-open": cmd_ct_open}


def main(argv):
    if os.path.basename(argv[0]) == "pvetune-sim-generator":
        return cmd_generator(argv[1:])
    if len(argv) < 2 or argv[1] not in COMMANDS:
        sys.stderr.write(__doc__)
        return 2
    return COMMANDS[argv[1]](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
