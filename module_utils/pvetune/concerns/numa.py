# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA balancing: reader of kernel.numa_balancing (runtime and persisted in sysctl.d) and the evaluator of
kernel.numa_balancing; the fix is in numa_fix.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.pvetune.concerns.bootargs import _configured_args, _effective_args
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats import sysctl_conf

SYSCTL_KEYS = ("kernel.numa_balancing",)


def gather_sysctl(fsroot):
    persisted = sysctl_conf.read_sysctl_persisted(fsroot, SYSCTL_KEYS)
    out = {}
    for key in SYSCTL_KEYS:
        out[key] = {"runtime": fsroot.try_value(sysctl_conf.sysctl_path(key)),
                    "persisted": persisted["values"][key], "files": persisted["files"]}
    out["errors"] = persisted["errors"]
    return out


# -- sysctl ------------------------------------------------------------------
def check_numa_balancing(facts, policy):
    cid = "kernel.numa_balancing"
    err = section_error(facts, "sysctl")
    if err:
        return make_result(cid, policy, "error", None, err)
    data = (facts["sysctl"] or {}).get("kernel.numa_balancing") or {}
    runtime = data.get("runtime")
    persisted = data.get("persisted")
    want = str(policy["numa_balancing"])
    ev = ["/proc/sys/kernel/numa_balancing = %s" % runtime]
    if persisted:
        ev.append("%s:%d kernel.numa_balancing = %s" % (persisted["file"], persisted["line"], persisted["value"]))
    else:
        ev.append("no kernel.numa_balancing in %s" % ", ".join(data.get("files") or ["sysctl.d"]))
    if runtime is None:
        return make_result(cid, policy, "skip", None,
                           "/proc/sys/kernel/numa_balancing does not exist (kernel without NUMA balancing or one node)",
                           evidence=ev)
    if not runtime.isdigit():
        return make_result(cid, policy, "error", runtime[:40],
                           "/proc/sys/kernel/numa_balancing holds %r, not a number" % runtime[:40], evidence=ev)
    cmdline_off = "numa_balancing=disable" in _effective_args(facts)
    conf_off = "numa_balancing=disable" in (_configured_args(facts) or [])
    persisted_ok = (persisted is not None and persisted["value"] == want) or (want == "0" and conf_off)
    if persisted:
        persisted_text = persisted["value"]
    else:
        persisted_text = "cmdline numa_balancing=disable" if conf_off else "no"
    current = "runtime %s, persisted %s" % (runtime, persisted_text)
    if runtime == want and persisted_ok:
        return make_result(cid, policy, "pass", current, "numa_balancing is %s and persisted" % want, evidence=ev)
    if runtime == want:
        return make_result(cid, policy, "fail", current,
                           "numa_balancing is %s now but not persisted: it returns to the kernel default at the next "
                           "boot" % want, evidence=ev)
    msg = "numa_balancing is %s at runtime" % runtime
    if persisted_ok:
        msg += " although %s is persisted (set it at runtime: sysctl -w kernel.numa_balancing=%s)" % (want, want)
    if cmdline_off:
        msg += "; numa_balancing=disable is on the command line"
    return make_result(cid, policy, "fail", current, msg, evidence=ev)


SECTIONS = (("sysctl", lambda ctx: gather_sysctl(ctx.fsroot)),)
CHECKS = {"kernel.numa_balancing": check_numa_balancing}
