"""Kernel series and kernel command line: configured in the boot loader the host uses, and effective."""
import re

import pytest
from fleetlib import required_args, skipped


def boot_loader(fleet):
    """("systemd-boot", first line of /etc/kernel/cmdline) or ("grub", [non-recovery linux lines of grub.cfg]).

    proxmox-boot-tool boots systemd-boot from its ESPs when /etc/kernel/proxmox-boot-uuids exists,
    the host booted in UEFI mode and /etc/kernel/cmdline is there; every other Proxmox VE host boots
    GRUB, whose menu update-grub writes to /boot/grub/grub.cfg.
    """
    if (fleet.exists("/etc/kernel/proxmox-boot-uuids") and fleet.exists("/sys/firmware/efi")
            and fleet.exists("/etc/kernel/cmdline")):
        lines = fleet.read("/etc/kernel/cmdline").splitlines()
        return "systemd-boot", lines[0] if lines else ""
    cfg = fleet.read("/boot/grub/grub.cfg")
    linux = []
    title = ""
    for line in cfg.splitlines():
        m = re.match(r"^\s*menuentry\s+'([^']*)'", line)
        if m:
            title = m.group(1)
        m = re.match(r"^\s*linux\s+(\S+)\s*(.*)$", line)
        if m and "recovery mode" not in title:
            linux.append((m.group(1), m.group(2)))
    return "grub", linux


def test_kernel_series_running(fleet, policy):
    skipped(policy, "kernel.version")
    series = policy["kernel_series"]
    if not series:
        pytest.skip("policy kernel_series is empty")
    running = fleet.read("/proc/sys/kernel/osrelease").strip()
    assert running.startswith(series + "."), "running kernel %s is not of the %s series" % (running, series)


def test_cmdline_effective(fleet, policy):
    skipped(policy, "boot.cmdline")
    args = fleet.read("/proc/cmdline").split()
    missing = [a for a in required_args(fleet, policy) if a not in args]
    banned = policy["cmdline_forbidden"]
    forbidden = [a for a in args if a in banned or a.split("=", 1)[0] in banned]
    assert not missing and not forbidden, "/proc/cmdline %r: missing %s, forbidden %s" % (" ".join(args), missing,
                                                                                          forbidden)


def test_cmdline_configured(fleet, policy):
    skipped(policy, "boot.cmdline")
    loader, config = boot_loader(fleet)
    required = required_args(fleet, policy)
    if loader == "systemd-boot":
        words = config.split()
        missing = [a for a in required if a not in words]
        assert not missing, "/etc/kernel/cmdline %r lacks %s (systemd-boot host)" % (config, missing)
        return
    assert config, "/boot/grub/grub.cfg has no linux line"
    bad = ["%s: missing %s" % (image, [a for a in required if a not in args.split()])
           for image, args in config if any(a not in args.split() for a in required)]
    assert not bad, "GRUB menu entries without the required arguments: %s" % "; ".join(bad)
