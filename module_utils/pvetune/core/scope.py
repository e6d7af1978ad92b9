# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one fix run answers for: the checks its gates judge, decided once, from the catalogue.

A run selects fix tags (``--tags``, ``--skip-tags``).  A check is *in scope* when pvetune fixes it on this host
(its result's fix_tag is not "") and the run selected every tag its fix needs (catalogue.fix_tags: the CPU
driver needs ``cmdline`` for the boot argument and ``cpu`` for the runtime settings).  A check whose fix needs a
tag the run left out is *out of scope*: reported with the tags it lacks, never a failure, since that run could
not have fixed it (``--tags lxc`` then ``--tags cpu`` must not stop at the CPU driver, which needs a reboot
with a boot argument neither run was asked to write).  fix.yml's audit gate fails a host for in-scope checks
that fail (and, after a reboot, still wait for one); its sorting play sends a host to the rolling play when an
in-scope check needs a reboot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.core.catalogue import BY_ID, FIX_TAGS, fix_tags

ALL = "all"


def selected_tags(run_tags, skip_tags=()):
    """The fix tags a run selects: ``--tags`` (``all`` when none were given) less ``--skip-tags``."""
    run_tags = list(run_tags or [ALL])
    chosen = set(FIX_TAGS) if ALL in run_tags else set(run_tags) & set(FIX_TAGS)
    return sorted(chosen - set(skip_tags or ()))


def ct_restarts(results):
    """Sorted ids of the CTs that pending result items name ("CT 101": fixed in the config, not yet in the CT)."""
    out = set()
    for res in results:
        for item in res.get("items") or ():
            name = str(item.get("name", ""))
            if item.get("status") == "pending" and name.startswith("CT ") and name[3:].isdigit():
                out.add(int(name[3:]))
    return sorted(out)


def run_scope(results, run_tags, skip_tags=()):
    """The gates' view of audit ``results`` for a run with these tags, as a dict of lists:

    in_scope      ids of the checks the run answers for
    out_of_scope  [{"id", "needs": tags the run did not select}] for checks it touched only in part
    bad           [{"id", "message"}] in scope and failing (fail or error)
    pending       [{"id", "message"}] in scope and waiting (a reboot, a CT restart)
    reboots       ids in scope that fail or wait and whose fix needs a reboot
    ct_restarts   CT ids whose fixed config waits for the CT's restart (pending items "CT <id>": lxc.gpu_devices,
                  lxc.resources), whatever the run's tags: the health gate expects them not to work yet
    """
    chosen = set(selected_tags(run_tags, skip_tags))
    scope = {"tags": sorted(chosen), "in_scope": [], "out_of_scope": [], "bad": [], "pending": [], "reboots": [],
             "ct_restarts": ct_restarts(results)}
    for res in results:
        check_id = res.get("id")
        if check_id not in BY_ID or not res.get("fix_tag"):
            continue  # not fixed by pvetune (here: a result may say its problems are the operator's)
        needs = fix_tags(check_id)
        missing = [tag for tag in needs if tag not in chosen]
        if missing:
            if len(missing) < len(needs):
                scope["out_of_scope"].append({"id": check_id, "needs": missing})
            continue
        scope["in_scope"].append(check_id)
        status = res.get("status")
        if status in ("fail", "error"):
            scope["bad"].append({"id": check_id, "message": res.get("message", "")})
        elif status == "pending":
            scope["pending"].append({"id": check_id, "message": res.get("message", "")})
        if status in ("fail", "pending") and res.get("reboot_required"):
            scope["reboots"].append(check_id)
    return scope
