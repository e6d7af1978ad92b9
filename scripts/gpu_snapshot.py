#!/usr/bin/env python3
"""A real GPU host's snapshot, with nvidia-smi's own answers beside it, and the comparison of the two.

On the GPU host (read-only: Python's standard library and this checkout's module_utils, nothing installed):

    python3 scripts/gpu_snapshot.py capture --out DIR

writes DIR/snapshot.tar.gz (what collect.yml's pvetune_collect packs: every file the audit reads, nvidia-smi -q, the
kernel log's Xid lines) and DIR/smi-query.csv (nvidia-smi --query-gpu of the same readings). On the controller:

    python3 scripts/gpu_snapshot.py compare DIR

audits the snapshot and compares every GPU's reading with nvidia-smi's (power limits, applications clocks,
uncorrectable ECC errors, PCIe link generation and width, persistence mode, driver, compute capability); exit 1
when one differs.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("pci.bus_id", "driver_version", "persistence_mode", "power.limit", "power.default_limit",
          "power.max_limit", "enforced.power.limit", "clocks.applications.graphics",
          "clocks.default_applications.graphics", "ecc.errors.uncorrected.volatile.total", "pcie.link.gen.current",
          "pcie.link.width.current", "compute_cap")
GEN_OF_SPEED = {"2.5GT/s": "1", "5GT/s": "2", "8GT/s": "3", "16GT/s": "4", "32GT/s": "5", "64GT/s": "6"}


def import_module_utils():
    """ansible.module_utils.pvetune from this checkout, also where Ansible is not installed (a namespace of our own,
    as the boot helper's runtime library is laid out)."""
    try:
        import ansible.module_utils as mu
        mu.__path__.append(os.path.join(TOP, "module_utils"))
        return
    except ImportError:
        pass
    base = tempfile.mkdtemp(prefix="pvetune-mu-")
    os.makedirs(os.path.join(base, "ansible", "module_utils"))
    for rel in ("ansible/__init__.py", "ansible/module_utils/__init__.py"):
        open(os.path.join(base, rel), "w").close()
    os.symlink(os.path.join(TOP, "module_utils", "pvetune"), os.path.join(base, "ansible", "module_utils", "pvetune"))
    sys.path.insert(0, base)


def run_command(argv, data=None, environ_update=None, **_kw):
    env = dict(os.environ, **(environ_update or {}))
    proc = subprocess.run(argv, input=data, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def capture(out):
    import_module_utils()
    from ansible.module_utils.pvetune.collect import collect
    from ansible.module_utils.pvetune.core.runner import Runner
    os.makedirs(out, exist_ok=True)
    data, info = collect("/", lambda fsroot: Runner(fsroot, run_command))
    with open(os.path.join(out, "snapshot.tar.gz"), "wb") as handle:
        handle.write(data)
    with open(os.path.join(out, "snapshot.json"), "w") as handle:
        json.dump(info, handle, indent=2, sort_keys=True)
    fields = list(FIELDS)
    rc, text, err = run_command(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,nounits"])
    if rc != 0 and "compute_cap" in (text + err):     # drivers before 510 do not know the field
        fields.remove("compute_cap")
        rc, text, err = run_command(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,nounits"])
    with open(os.path.join(out, "smi-query.csv"), "w") as handle:
        handle.write(text if rc == 0 else "# nvidia-smi exited %d: %s\n" % (rc, (err or text).strip()))
    print("%s: %d files, %d bytes; nvidia-smi --query-gpu exit %d" % (out, info["files"], len(data), rc))
    return 0 if rc == 0 else 1


def smi_rows(text):
    """{bdf: {field: value}} of a --query-gpu=... --format=csv,nounits output (header "pci.bus_id, ...")."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    if not rows or rows[0][0].startswith("#"):
        return {}
    head = [h.split(" [")[0].strip() for h in rows[0]]
    return {row[0].strip().lower()[-12:]: dict(zip(head, (v.strip() for v in row))) for row in rows[1:] if row}


def _num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def compare_facts(facts, smi):
    """[(bdf, reading, the audit's value, nvidia-smi's)] for every reading; a reading nvidia-smi gives as N/A is
    left out."""
    from ansible.module_utils.pvetune.tables.cuda_targets import compute_capability
    nv = facts.get("nvidia") or {}
    states = {bus[-12:]: s for bus, s in (((nv.get("smi") or {}).get("state")) or {}).items()}
    persist = {g["bus_id"][-12:]: g.get("persistence") for g in (nv.get("smi") or {}).get("gpus") or ()}
    gpus = {f["bdf"]: f for f in (facts.get("pci") or {}).get("functions") or () if f.get("is_gpu")}
    out = []
    for bdf, row in sorted(smi.items()):
        state, fn = states.get(bdf) or {}, gpus.get(bdf) or {}
        power, clocks = state.get("power") or {}, state.get("clocks") or {}
        pairs = [("power.limit (enforced)", power.get("limit"), _num(row.get("enforced.power.limit"))),
                 ("power.limit (requested)", power.get("requested"), _num(row.get("power.limit"))),
                 ("power.default_limit", power.get("default"), _num(row.get("power.default_limit"))),
                 ("power.max_limit", power.get("max"), _num(row.get("power.max_limit"))),
                 ("clocks.applications.graphics", (clocks.get("applications") or {}).get("graphics"),
                  _num(row.get("clocks.applications.graphics"))),
                 ("ecc.errors.uncorrected.volatile", (state.get("ecc_uncorrectable") or {}).get("volatile"),
                  _num(row.get("ecc.errors.uncorrected.volatile.total"))),
                 ("pcie.link.gen.current", GEN_OF_SPEED.get(fn.get("current_link_speed")),
                  row.get("pcie.link.gen.current")),
                 ("pcie.link.width.current", fn.get("current_link_width"), _num(row.get("pcie.link.width.current"))),
                 ("persistence_mode", persist.get(bdf), (row.get("persistence_mode") or "").lower() == "enabled"),
                 ("driver_version", (nv.get("version") or {}).get("version"), row.get("driver_version")),
                 ("compute_cap", compute_capability(fn.get("device_id"), fn.get("model")), row.get("compute_cap"))]
        for name, ours, theirs in pairs:
            if theirs is None or theirs in ("[N/A]", "N/A", ""):
                continue
            out.append((bdf, name, ours, theirs))
    return out


def differs(ours, theirs):
    if isinstance(theirs, float):
        return ours is None or abs(float(ours) - theirs) > 0.5
    return str(ours) != str(theirs)


def compare(directory):
    import_module_utils()
    from ansible.module_utils.pvetune.audit import gather
    from ansible.module_utils.pvetune.collect import extract
    from ansible.module_utils.pvetune.core.fsroot import FsRoot
    with open(os.path.join(directory, "smi-query.csv")) as handle:
        smi = smi_rows(handle.read())
    with open(os.path.join(directory, "snapshot.tar.gz"), "rb") as handle:
        data = handle.read()
    root = tempfile.mkdtemp(prefix="pvetune-snap-")
    extract(data, os.path.join(root, "host"))
    facts = gather(FsRoot(os.path.join(root, "host")))
    rows = compare_facts(facts, smi)
    bad = [r for r in rows if differs(r[2], r[3])]
    for bdf, name, ours, theirs in rows:
        print("%-4s %s %-34s audit %-12s nvidia-smi %s" % ("DIFF" if differs(ours, theirs) else "ok", bdf, name,
                                                           ours, theirs))
    print("%d readings of %d GPUs compared, %d differ" % (len(rows), len(smi), len(bad)))
    return 1 if bad or not smi else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("capture").add_argument("--out", required=True)
    sub.add_parser("compare").add_argument("dir")
    args = parser.parse_args(argv)
    return capture(args.out) if args.cmd == "capture" else compare(args.dir)


if __name__ == "__main__":
    sys.exit(main())
