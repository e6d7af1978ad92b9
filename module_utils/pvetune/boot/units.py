# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What pvetune installs on a host so its fixes survive a reboot.

* the runtime library: the module_utils/pvetune files the boot helper needs, taken
  from the running module's own payload (the code that runs at boot is exactly the
  code the modules ran), under /usr/local/lib/pvetune/ansible/module_utils/pvetune/;
* /usr/local/sbin/pvetune-boot, a stub that runs boot/helper.py main() from that library;
* /usr/local/lib/pvetune/MANIFEST.json: the tool version and, per file of the two above, its path,
  sha256 and mode, written from the same plan as the files (``runtime_files``);
* /etc/pvetune/<subcommand>.json, the settings the helper re-applies;
* one oneshot unit per subcommand, ordered before pve-guests.service, enabled with
  the multi-user.target.wants link that `systemctl enable` would create.

Everything is planned on a ChangeSet, so it is recorded in the change set's manifest and
rollback removes it again (MANIFEST.json included: it is a file the install created).  The files on
the host are the truth: each is compared with what this install ships and rewritten when it differs,
whatever MANIFEST.json says, so a host whose manifest and files match needs no change and a host
whose files were edited gets them back (``manifest_drift`` names them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import pkgutil
import posixpath
import re

from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import TOOL_VERSION

LIB_DIR = "/usr/local/lib/pvetune"
PKG_DIR = LIB_DIR + "/ansible/module_utils/pvetune"
NAMESPACE_INITS = (LIB_DIR + "/ansible/__init__.py", LIB_DIR + "/ansible/module_utils/__init__.py")
MANIFEST = LIB_DIR + "/MANIFEST.json"
MANIFEST_VERSION = 1
HELPER = "/usr/local/sbin/pvetune-boot"
UNIT_DIR = "/etc/systemd/system"
WANTS_DIR = "/etc/systemd/system/multi-user.target.wants"
CONFIG_DIR = "/etc/pvetune"
# The package the running module carries this library as: ansible.module_utils.pvetune from the project, the
# collection's plugins/module_utils path from pvetune.gpuhost (scripts/build_collection.sh rewrites the imports).
PACKAGE = __name__.rsplit(".", 2)[0]  # this file is <package>.boot.units
# The name the host's copy has, whichever of the two ran the module: the payload's files are read with their
# imports renamed back to it, so a host fixed from the project or from the collection gets the same bytes (and
# no drift). Spelt in pieces, as the collection build rewrites the whole dotted name wherever it appears.
HOST_PACKAGE = ".".join(("ansible", "module_utils", "pvetune"))

# The boot helper; the runtime library is it and everything it imports, found by reading the imports.
ENTRY_MODULE = "boot.helper"
_IMPORT = re.compile(r"^[ \t]*from " + re.escape(HOST_PACKAGE) + r"((?:\.\w+)*) import (?:\(([^)]*)\)|([^\n#]*))",
                     re.M)

SUBCOMMANDS = ("cpufreq", "pcie-mrrs", "lxc-gpu", "gpu-power")

HELPER_STUB = """#!/usr/bin/python3
# Installed by pvetune (fix.yml); rollback.yml removes it. Runs the pvetune runtime library
# installed next to it (../lib/pvetune): see `pvetune-boot --help`.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "pvetune"))
from {package}.boot.helper import main  # noqa: E402

sys.exit(main())
""".format(package=HOST_PACKAGE)

NAMESPACE_INIT = "# pvetune runtime library namespace (installed by fix.yml; rollback.yml removes it)\n"

_UNITS = {
    "cpufreq": {
        "description": "pvetune: P-state driver mode, cpufreq governor and EPP",
        "comment": [
            "Re-applies the P-state driver mode (amd_pstate, intel_pstate), cpufreq governor and EPP from",
            "/etc/pvetune/cpufreq.json at boot (runtime sysfs values do not survive a reboot), before the",
            "guests start.",
            "cpufreq governors built as modules are loaded by systemd-modules-load; run after anything else",
            "that sets governors (cpufrequtils, cpupower) so pvetune's values are the ones that stay.",
        ],
        "unit": ["Documentation=man:cpupower(1) https://docs.kernel.org/admin-guide/pm/amd-pstate.html",
                 "Documentation=https://docs.kernel.org/admin-guide/pm/intel_pstate.html",
                 "After=systemd-modules-load.service cpufrequtils.service cpupower.service",
                 "Before=pve-guests.service"],
        "service": [],
    },
    "pcie-mrrs": {
        "description": "pvetune: PCIe MaxReadReq of the NVIDIA GPUs",
        "comment": [
            "Re-applies the PCIe Max Read Request Size of the NVIDIA functions from /etc/pvetune/pcie-mrrs.json",
            "at boot: Device Control resets to the firmware default on every boot (and on a function reset).",
            "It also clears the ACS redirect bits of the switch ports in acs_ports (the kernel sets ACS when it",
            "enumerates them with an IOMMU on), leaving any port with a vfio-pci device in its switch as it is.",
            "The NVIDIA driver is bound by udev coldplug / modules-load and its probe (and nvidia-persistenced",
            "initialising the GPUs) may reconfigure the function: run after those, before any guest starts.",
            "systemd-udev-settle is only ordered against (After=, no Wants=).",
        ],
        "unit": ["Documentation=man:setpci(8)",
                 "After=systemd-modules-load.service systemd-udev-trigger.service systemd-udev-settle.service",
                 "After=nvidia-persistenced.service",
                 "Before=pve-guests.service"],
        "service": [],
    },
    "gpu-power": {
        "description": "pvetune: power limits of the NVIDIA GPUs",
        "comment": [
            "Sets each GPU below its target power limit (/etc/pvetune/gpu-power.json: default or watts) to it",
            "with nvidia-smi -pl at boot: a power limit does not survive a reboot or a driver reload. It runs",
            "after nvidia-persistenced (which keeps the GPUs initialised, so the limit stays), before any guest",
            "starts.",
        ],
        "unit": ["Documentation=man:nvidia-smi(1)",
                 "After=systemd-modules-load.service nvidia-persistenced.service",
                 "Before=pve-guests.service"],
        "service": [],
    },
    "lxc-gpu": {
        "description": "pvetune: NVIDIA device entries of the GPU containers for this boot's majors",
        "comment": [
            "The nvidia-uvm (and nvidia-caps, ...) majors are assigned at module load and can differ after every",
            "boot or driver update. This unit rewrites the NVIDIA allow lines of the GPU containers",
            "(/etc/pvetune/lxc-gpu.json) for the majors of this boot, before pve-guests.service starts them.",
            "It never starts, stops or restarts a container. /etc/pve (pmxcfs) must be mounted: Wants=, not",
            "Requires=, so a pmxcfs failure makes this unit fail with that message instead of being skipped.",
        ],
        "unit": ["Wants=pve-cluster.service",
                 "After=pve-cluster.service systemd-modules-load.service nvidia-persistenced.service",
                 "Before=pve-guests.service"],
        "service": ["# Load nvidia-uvm and create /dev/nvidia-uvm(-tools) if udev has not; '-': not fatal,",
                    "# the helper waits for the nodes (wait_seconds in lxc-gpu.json) and says why.",
                    "ExecStartPre=-/usr/bin/nvidia-modprobe -u -c0",
                    "TimeoutStartSec=300"],
    },
}


def unit_name(subcommand):
    return "pvetune-%s.service" % subcommand


def render_unit(subcommand, helper=HELPER):
    """The unit file text for one subcommand.

    Always the live host's paths: a tree (snapshot, scratch copy) stands for a host's "/", so
    the unit inside it is the one that host runs.  A test harness that wants a real systemd to
    run the helper against a tree calls ``pvetune-boot --root <tree>`` itself.
    """
    spec = _UNITS[subcommand]
    lines = ["# Managed by pvetune (fix.yml); rollback.yml removes this unit."]
    lines += ["# " + c for c in spec["comment"]]
    lines += ["[Unit]", "Description=%s" % spec["description"]] + spec["unit"]
    lines += ["", "[Service]", "Type=oneshot", "RemainAfterExit=yes"] + spec["service"]
    lines += ["ExecStart=%s %s" % (helper, subcommand)]
    lines += ["", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def _read(get_data, relpath):
    try:
        data = get_data(PACKAGE, relpath)
    except (IOError, OSError):
        return None
    return data if PACKAGE == HOST_PACKAGE or data is None else data.replace(PACKAGE.encode(), HOST_PACKAGE.encode())


def library_files(get_data=None):
    """{path below the package: bytes} of the boot helper and every pvetune module it imports, from the
    running package (the module's own payload). Packages bring their ``__init__.py``."""
    get_data = get_data or pkgutil.get_data
    out = {"__init__.py": _read(get_data, "__init__.py") or b""}
    todo = [ENTRY_MODULE]
    while todo:
        dotted = todo.pop()
        rel = dotted.replace(".", "/") + ".py"
        if rel in out:
            continue
        data = _read(get_data, rel)
        if data is None:
            raise IOError("cannot read %s/%s from the module payload" % (PACKAGE, rel))
        out[rel] = data
        parts = dotted.split(".")
        for i in range(1, len(parts)):
            init = "/".join(parts[:i]) + "/__init__.py"
            out.setdefault(init, _read(get_data, init) or b"")
        for base, grouped, plain in _IMPORT.findall(data.decode("utf-8")):
            base = base.lstrip(".")
            for name in (n.strip() for n in (grouped or plain).replace("\n", ",").split(",")):
                name = name.split(" as ")[0].strip()
                if not name:
                    continue
                sub = (base + "." + name) if base else name
                # "from pvetune.core import fsroot" names a module; "from pvetune.core.fsroot import FsRoot" a name
                if _read(get_data, sub.replace(".", "/") + ".py") is not None:
                    todo.append(sub)
                elif base:
                    todo.append(base)
    return out


def render_config(config):
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def runtime_files(lib_files=None):
    """[(host path, bytes, mode)] of the runtime library, its namespace packages and the helper, by path:
    what an install writes and MANIFEST.json lists."""
    lib_files = lib_files if lib_files is not None else library_files()
    out = [(PKG_DIR + "/" + name, data, 0o644) for name, data in lib_files.items()]
    out += [(init, NAMESPACE_INIT.encode("utf-8"), 0o644) for init in NAMESPACE_INITS]
    out.append((HELPER, HELPER_STUB.encode("utf-8"), 0o755))
    return sorted(out)


def render_manifest(files, version=TOOL_VERSION):
    """MANIFEST.json for ``runtime_files()`` output."""
    return json.dumps({
        "tool": "pvetune", "version": version, "manifest_version": MANIFEST_VERSION,
        "note": "Written by pvetune_runtime with the files it lists; rollback.yml removes them all.",
        "files": [{"path": path, "sha256": hashlib.sha256(data).hexdigest(), "mode": "%04o" % mode}
                  for path, data, mode in files],
    }, indent=2, sort_keys=True) + "\n"


def parse_manifest(data):
    """{host path: sha256} from an installed MANIFEST.json (bytes or None); {} when absent or unusable.

    Only paths an install can have written count: under LIB_DIR or the helper, normalised, so a damaged
    manifest can never make the installer touch anything else."""
    try:
        doc = json.loads(data.decode("utf-8")) if data is not None else {}
        entries = doc.get("files", []) if isinstance(doc, dict) else []
        out = {}
        for entry in entries:
            path, digest = entry.get("path"), entry.get("sha256")
            if (isinstance(path, str) and isinstance(digest, str) and path == posixpath.normpath(path)
                    and (path == HELPER or path.startswith(LIB_DIR + "/")) and path != MANIFEST):
                out[path] = digest
        return out
    except (ValueError, UnicodeDecodeError, AttributeError):
        return {}


def installed_version(data):
    """The tool version an installed MANIFEST.json (bytes or None) names, or None (no install, or unreadable)."""
    try:
        doc = json.loads(data.decode("utf-8")) if data is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, str) else None


def is_runtime_path(path):
    """What this version of pvetune ships, the same on every host: the runtime library, its namespace packages,
    the helper, MANIFEST.json, the units and their enable links (not the settings, which are the host's)."""
    name = posixpath.basename(path)
    return (path == HELPER or path.startswith(LIB_DIR + "/")
            or (posixpath.dirname(path) in (UNIT_DIR, WANTS_DIR) and name.startswith("pvetune-")))


def add_runtime_bundle(changes, version=TOOL_VERSION, removing=False, manifest=None):
    """Show the runtime's files in ``changes``' diffs as one summary (paths, sizes, sha256, versions)
    instead of thousands of lines of Python: MANIFEST.json on the host lists each file's digest.
    ``manifest``: its bytes when the caller has read them already."""
    old = installed_version(changes.read(MANIFEST) if manifest is None else manifest)
    changes.add_bundle(
        "pvetune boot runtime (%s, %s, pvetune-*.service)" % (LIB_DIR, HELPER), is_runtime_path,
        # the library counted, MANIFEST.json (every library file's sha256) listed with its own digest
        group=lambda path: LIB_DIR if path.startswith(LIB_DIR + "/") and path != MANIFEST else path,
        before_note="version %s" % old if old else "not installed",
        after_note="removed" if removing else "version %s (per-file sha256 in %s)" % (version, MANIFEST))


def _sha256_of(read, path):
    """sha256 of a host file, None when it is absent or not a readable file."""
    try:
        data = read(path)
    except FsError:
        return None
    return hashlib.sha256(data).hexdigest() if data is not None else None


def manifest_drift(read):
    """Paths MANIFEST.json lists whose file on the host is missing or has other content (someone edited
    the installed library); ``read(host path) -> bytes or None``."""
    return sorted(p for p, digest in parse_manifest(read(MANIFEST)).items() if _sha256_of(read, p) != digest)


def plan_install(changes, subcommands, configs, lib_files=None, enable=True):
    """Plan every file for ``subcommands`` on a ChangeSet; returns the host paths involved.

    The runtime library and the helper are always planned (with no subcommands: only them), each file
    against its current content, then MANIFEST.json from the same list.  A file the previous install's
    manifest lists and this one does not ship (a module renamed since) is removed when nobody changed it."""
    unknown = [s for s in subcommands if s not in SUBCOMMANDS]
    if unknown:
        raise ValueError("unknown subcommand(s): %s" % ", ".join(unknown))
    missing = [s for s in subcommands if s not in configs]
    if missing:
        raise ValueError("no configuration for: %s" % ", ".join(missing))
    files = runtime_files(lib_files)
    installed = changes.read(MANIFEST)  # read once: the bundle's version and the files it lists
    add_runtime_bundle(changes, manifest=installed)
    paths = []
    for path, data, mode in files:
        paths.append(path)
        changes.plan_file(path, data, mode=mode)
    shipped = set(paths)
    for path, digest in sorted(parse_manifest(installed).items()):
        if path not in shipped and _sha256_of(changes.read, path) == digest:
            changes.plan_remove(path)
    paths.append(MANIFEST)
    changes.plan_file(MANIFEST, render_manifest(files), mode=0o644)
    for sub in subcommands:
        conf = "%s/%s.json" % (CONFIG_DIR, sub)
        unit = "%s/%s" % (UNIT_DIR, unit_name(sub))
        paths += [conf, unit]
        changes.plan_file(conf, render_config(configs[sub]), mode=0o644)
        changes.plan_file(unit, render_unit(sub), mode=0o644)
        if enable:
            link = "%s/%s" % (WANTS_DIR, unit_name(sub))
            paths.append(link)
            changes.plan_symlink(link, unit)
    return paths
