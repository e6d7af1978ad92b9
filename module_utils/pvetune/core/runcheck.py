# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a playbook run is asked to do, checked once on the controller before any host is touched.

Ansible itself exits 0 when a play's host pattern matches nothing and when ``--tags`` select no task; a cron
or CI job would stay green without auditing or fixing anything.  ``check_run`` turns those into errors that
say why, warns of ``--skip-tags`` that name a tag nobody has (a typo that skips nothing; Molecule always
passes its own ``molecule-notest,notest``, so that cannot be an error), and
checks every selected host's ``pvetune_policy`` here, once, so a bad policy is reported one time for
all hosts that share it, by its inventory variable name, instead of once per host by module argument.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.common.validation import check_type_dict
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.policy import PolicyError, merge_policy

PLAYBOOKS = ("audit", "fix", "rollback", "collect", "metrics")
# The fix role's tags are the catalogue's fix_tag values (tests/unit/test_concern_tags.py holds them so).
FIX_TAGS = tuple(sorted({c["fix_tag"] for c in CATALOGUE if c.get("fix_tag")}))
# Tags each playbook's tasks carry; audit.yml and rollback.yml always do the whole job.
PLAYBOOK_TAGS = {"audit": (), "fix": FIX_TAGS, "rollback": (), "collect": (), "metrics": ()}
# Ansible's own tag: "always" next to a real tag selects nothing more. (--skip-tags always would skip this check
# itself, which is tagged always; the run then fails on the missing run id.)
ALWAYS = "always"
# Tags Molecule passes to --skip-tags on every run (its documented "notest" convention).
MOLECULE_SKIP_TAGS = ("molecule-notest", "notest", "molecule-idempotence-notest")
POLICY_HINT = ("give it in the inventory (group_vars) or, on the command line, as JSON: "
               "-e '{\"pvetune_policy\": {\"kernel_series\": \"6.14\"}}' (an -e value replaces the "
               "inventory's pvetune_policy as a whole; it is not merged with it)")


class RunRefused(ValueError):
    pass


def _shown(items):
    return ", ".join(items) if items else "none"


def selected_hosts(pattern_hosts, play_hosts):
    """The hosts the run acts on: those of the pattern that --limit (``play_hosts``) leaves, in pattern order."""
    return [h for h in pattern_hosts if h in set(play_hosts)]


def check_hosts(pattern, pattern_hosts, play_hosts, inventory):
    """selected_hosts, or RunRefused saying why there are none."""
    chosen = selected_hosts(pattern_hosts, play_hosts)
    if chosen:
        return chosen
    where = "inventory %s" % _shown(list(inventory)) if inventory else "the inventory"
    if not pattern_hosts:
        raise RunRefused("the host pattern %r matches no host of %s: nothing would be done. Give the GPU hosts "
                         "a group gpu_hosts, or name them with -e pvetune_hosts=<pattern>" % (pattern, where))
    raise RunRefused("--limit leaves none of the %d host(s) of %r (%s): nothing would be done"
                     % (len(pattern_hosts), pattern, ", ".join(pattern_hosts[:10])
                        + (", ..." if len(pattern_hosts) > 10 else "")))


def check_tags(playbook, run_tags, skip_tags):
    """--tags must name tags the playbook has (``run_tags`` ['all'] is no --tags); returns the warnings for
    --skip-tags that name none of them."""
    known = PLAYBOOK_TAGS[playbook]
    offered = ("its tags are %s" % ", ".join(known)) if known else "it has no tags: it always does the whole job"
    run = [t for t in run_tags if t != "all"]
    if ALWAYS in run and len(run) > 1:
        run = [t for t in run if t != ALWAYS]
    unknown = [t for t in run if t not in known]
    if unknown:
        raise RunRefused("--tags %s selects nothing %s.yml does (%s)" % (",".join(unknown), playbook, offered))
    if known and run and not (set(known) - set(skip_tags)) & set(run):
        raise RunRefused("--tags %s with --skip-tags %s leaves no fix to run"
                         % (",".join(run), ",".join(skip_tags)))
    unknown = [t for t in skip_tags if t not in known and t not in MOLECULE_SKIP_TAGS]
    if unknown:
        return ["--skip-tags %s names nothing %s.yml does, so it skips nothing (%s)"
                % (",".join(unknown), playbook, offered)]
    return []


def check_policies(policies):
    """{host: error} for the hosts whose pvetune_policy is invalid, and one message grouping the hosts that
    share an error."""
    bad = {}
    for host in sorted(policies):
        try:
            merge_policy(policies[host])
        except PolicyError as exc:
            bad[host] = str(exc)
        except (TypeError, ValueError) as exc:  # a value of an unexpected type deep inside the policy
            bad[host] = "pvetune_policy: %s" % exc
    groups = {}
    for host, error in bad.items():
        groups.setdefault(error, []).append(host)
    message = "; ".join("%s (host%s %s)" % (err, "s" if len(hosts) > 1 else "", ", ".join(hosts))
                        for err, hosts in sorted(groups.items(), key=lambda kv: kv[1][0]))
    return bad, (message + ". " + POLICY_HINT) if bad else ""


def _policy_of(value):
    """A policy given as text (-e pvetune_policy=<text>) is read as the modules' type=dict option reads it
    (JSON, or k=v pairs), so the run check and the modules agree on it."""
    if isinstance(value, str):
        try:
            return check_type_dict(value)
        except TypeError:
            return value
    return value


def charged_hosts(hosts, play_hosts):
    """Who a refused run is charged to: the hosts it would have acted on (and localhost, the controller); with none,
    localhost when --limit kept it, else every host --limit left."""
    if hosts:
        return list(hosts) + (["localhost"] if "localhost" in play_hosts else [])
    return ["localhost"] if "localhost" in play_hosts else list(play_hosts)


def check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory=(), run_id=None,
              policies=None):
    """The run's verdict: {"hosts", "refused" (why the run must not start, or ""), "charged" (the hosts a refusal
    fails), "bad_policy": {host: error}, "policy_message", "warnings"}."""
    try:
        return dict(_check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory, run_id,
                               policies), refused="", charged=[])
    except RunRefused as exc:
        hosts = selected_hosts(list(pattern_hosts), list(play_hosts))
        return {"hosts": hosts, "refused": str(exc), "charged": charged_hosts(hosts, list(play_hosts)),
                "bad_policy": {}, "policy_message": "", "warnings": []}


def _check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory, run_id, policies):
    """check_run's checks; raises RunRefused when the run as a whole must not start (no host, tags that select
    nothing, a bad run id)."""
    if playbook not in PLAYBOOKS:
        raise RunRefused("unknown playbook %r (one of %s)" % (playbook, ", ".join(PLAYBOOKS)))
    hosts = check_hosts(pattern, list(pattern_hosts), list(play_hosts), inventory)
    warnings = check_tags(playbook, list(run_tags), list(skip_tags))
    if run_id is not None:
        try:
            validate_run_id(run_id)
        except ValueError:
            raise RunRefused("pvetune_run_id_override must be 1-64 characters of [A-Za-z0-9._-], starting with "
                             "a letter or digit (it names directories), got %s" % json.dumps(str(run_id)[:80]))
    policies = {h: _policy_of((policies or {}).get(h)) for h in hosts}
    bad, message = check_policies(policies)
    return {"hosts": hosts, "bad_policy": bad, "policy_message": message, "warnings": warnings}
