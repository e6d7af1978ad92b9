"""Scenario `default`: pvetune's scheduled audit (contrib/systemd) on the container's real systemd, installed by
side_effect.yml (molecule/resources/tasks/scheduled_audit.yml) as README.md "Monitoring" says."""

CHECKOUT = "/srv/pvetune-controller"
UNITS = "/etc/systemd/system/pvetune-audit.service /etc/systemd/system/pvetune-audit.timer"


def test_the_units_verify_cleanly(host):
    out = host.run("systemd-analyze verify %s", UNITS)
    assert out.rc == 0, out.stderr
    assert "pvetune-audit" not in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_timer_is_enabled_and_scheduled(host):
    assert host.check_output("systemctl is-enabled pvetune-audit.timer") == "enabled"
    assert host.check_output("systemctl is-active pvetune-audit.timer") == "active"
    listed = host.check_output("systemctl list-timers --all --no-legend pvetune-audit.timer")
    assert "pvetune-audit.timer" in listed and "pvetune-audit.service" in listed, listed
    assert host.check_output("systemctl show -P Persistent pvetune-audit.timer") == "yes"


def test_a_run_audits_then_exports_as_the_service_user_and_a_failing_host_is_no_unit_failure(host):
    host.run("rm -f %s/reports/calls.log", CHECKOUT)
    started = host.run("systemctl start pvetune-audit.service")   # oneshot: returns when the run has ended
    assert started.rc == 0, started.stderr
    assert host.check_output("systemctl show -P Result pvetune-audit.service") == "success"
    assert host.check_output("systemctl show -P ExecMainStatus pvetune-audit.service") == "2"
    calls = host.file(CHECKOUT + "/reports/calls.log").content_string.splitlines()
    common = "pvetune %s %s/ansible.cfg -i %s/inventory/demo -e pvetune_report_dir=%s/reports --limit pve-gpu02" % (
        CHECKOUT, CHECKOUT, CHECKOUT, CHECKOUT)
    assert calls == [common + " audit.yml", common + " metrics.yml"]
