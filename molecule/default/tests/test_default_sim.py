"""Scenario `default`, after fix.yml and a reboot: what the simulation shows beyond the fleet suite."""
import json

ROOT = "/srv/pvetune-sim"
UNITS = ("pvetune-cpufreq.service", "pvetune-pcie-mrrs.service", "pvetune-lxc-gpu.service")


def sim(host):
    return json.loads(host.file("/srv/pvetune-seed/sim.json").content_string)


def boot(host):
    return json.loads(host.file("/run/pvetune-sim/boot.json").content_string)


def test_booted_the_pinned_kernel_through_the_hosts_boot_loader(host):
    record = boot(host)
    assert record["ok"], record
    assert record["loader"] == sim(host)["loader"]
    assert record["kernel"] == "6.14.8-2-pve"
    if record["loader"] == "grub":
        # proxmox-boot-tool kernel pin on a GRUB host: GRUB_DEFAULT names the 6.14 entry of the submenu.
        assert record["default"].endswith(">gnulinux-6.14.8-2-pve-advanced-7b5a1c2e-0f3d-4c55-9a10-3e8d6f2b9c41")
    else:
        assert record["entry"] == "proxmox-6.14.8-2-pve.conf"
        loader_conf = host.file(ROOT + "/boot/efi-sim/loader/loader.conf").content_string
        assert "default proxmox-6.14.8-2-pve.conf" in loader_conf.splitlines()


def test_real_apt_installed_the_newest_kernel_of_the_series(host):
    """apt resolved proxmox-kernel-6.14 to its newest version in the local archive (two were offered)
    and dpkg unpacked it into the tree: the tree's dpkg database owns the kernel's files."""
    admin = "--admindir=%s/var/lib/dpkg" % ROOT
    out = host.check_output("dpkg-query %s -W -f '${Package} ${Version} ${Status}\\n'", admin)
    installed = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.endswith("install ok installed")}
    assert installed == {"proxmox-kernel-6.14": "6.14.8-2", "proxmox-kernel-6.14.8-2-pve-signed": "6.14.8-2"}
    files = host.check_output("dpkg-query %s -L proxmox-kernel-6.14.8-2-pve-signed", admin).splitlines()
    assert "/boot/vmlinuz-6.14.8-2-pve" in files and "/lib/modules/6.14.8-2-pve/modules.dep" in files
    assert host.file(ROOT + "/boot/initrd.img-6.14.8-2-pve").exists   # the kernel hook (update-initramfs)
    history = host.file(ROOT + "/var/log/apt/history.log").content_string
    assert "Commandline: /usr/bin/apt-get install -y proxmox-kernel-6.14" in history.splitlines()


def test_pvetune_units_ran_before_the_guests(host):
    guests = int(host.check_output("systemctl show -P ExecMainStartTimestampMonotonic pve-guests.service"))
    assert guests > 0
    for unit in UNITS:
        done = int(host.check_output("systemctl show -P ExecMainExitTimestampMonotonic %s", unit))
        assert 0 < done <= guests, "%s finished at %d, pve-guests started at %d" % (unit, done, guests)
        # The unit the container's systemd ran is pvetune's, generated from the tree's unit file.
        generated = host.file("/run/systemd/generator/" + unit).content_string
        assert "Before=pve-guests.service" in generated and "--root %s" % ROOT in generated


def test_boot_units_reapplied_what_resets_at_boot(host):
    """The simulated kernel boots with governor powersave, EPP balance_performance and the firmware's
    MaxReadReq 512: the journal shows pvetune's boot helper setting them."""
    journal = host.check_output("journalctl -b -o cat -u pvetune-cpufreq.service -u pvetune-pcie-mrrs.service")
    assert "MaxReadReq 512 -> 4096" in journal
    assert "scaling_governor powersave -> performance" in journal
    assert "energy_performance_preference balance_performance -> performance" in journal


def test_ct_101_runs_with_access_to_the_uvm_node(host):
    guests = json.loads(host.file("/run/pvetune-sim/guests.json").content_string)
    assert "101" in guests["cts"]
    state = json.loads(host.file(ROOT + "/.pvetune/pct-state.json").content_string)
    ct = state["cts"]["101"]
    assert ct["status"] == "running"
    assert ct["nodes"]["/dev/nvidia-uvm"] == "ok", ct["nodes"]
