"""PCIe MaxReadReq of the NVIDIA functions, read from the config space with the real setpci."""
import shlex

import pytest
from fleetlib import skipped

DEVICES = "/sys/bus/pci/devices/*/"


def nvidia_functions(fleet, policy):
    vendors = fleet.grep_files(DEVICES + "vendor")
    classes = fleet.grep_files(DEVICES + "class")
    out = []
    for path, vendor in sorted(vendors.items()):
        directory = path.rsplit("/", 1)[0]
        cls = classes.get(directory + "/class", "")
        if vendor.lower() == policy["pcie_vendor"] and cls.lower().startswith(policy["pcie_class_prefix"]):
            out.append(directory.rsplit("/", 1)[1])
    return out


def setpci_argv(fleet):
    if fleet.live:
        return "setpci"
    return "setpci -A linux-sysfs -O %s" % shlex.quote("sysfs.path=%s/sys/bus/pci" % fleet.root)


def test_mrrs(fleet, policy):
    skipped(policy, "pcie.mrrs")
    bdfs = nvidia_functions(fleet, policy)
    if not bdfs:
        pytest.skip("no NVIDIA function (vendor %s, class %s*)" % (policy["pcie_vendor"], policy["pcie_class_prefix"]))
    script = "for b in %s; do printf '%%s ' $b; %s -s $b CAP_EXP+8.w || echo ERROR; done" % (
        " ".join(bdfs), setpci_argv(fleet))
    out = fleet.check_output(script)
    found, bad = {}, []
    for line in out.splitlines():
        bdf, _, value = line.partition(" ")
        if not value or value == "ERROR":
            bad.append("%s: setpci could not read Device Control" % bdf)
            continue
        mrrs = 128 << ((int(value, 16) >> 12) & 7)
        found[bdf] = mrrs
        if mrrs != policy["pcie_mrrs"]:
            bad.append("%s: MaxReadReq %d (Device Control %s)" % (bdf, mrrs, value))
    assert sorted(found) == sorted(bdfs) or bad, "setpci output did not cover every function: %r" % out
    assert not bad, "expected MaxReadReq %d: %s" % (policy["pcie_mrrs"], "; ".join(bad))
