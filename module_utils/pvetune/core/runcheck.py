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
``check_play_keywords`` catches the inventory values of ``pvetune_hosts``, ``pvetune_serial`` and ``pvetune_batch``
that the plays' ``hosts`` and ``serial`` keywords never see.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex

from ansible.module_utils.common.validation import check_type_dict
from ansible.module_utils.pvetune.core.catalogue import FIX_TAGS
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.policy import PolicyError, merge_policy

PLAYBOOKS = ("audit", "fix", "rollback", "collect", "metrics")
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
DEFAULT_PATTERN = "gpu_hosts"
# A play's keywords (hosts, serial) are templated once, before any host is known, from the extra vars and the play's
# own variables: a group_vars or host_vars value never reaches them, while the tasks do read it (this check's
# pattern, fix.yml's sorting play). Each such variable: {playbook: what its keyword does without -e}, and that
# fallback's value (the same value in the inventory changes nothing).
ONE_AT_A_TIME = "keeps serial 1 (one host at a time)"
DEFAULT_HOSTS = "plays act on %s (their hosts keyword) while this check and the tasks read the inventory's pattern"
PLAY_KEYWORD_VARS = {
    "pvetune_hosts": (dict.fromkeys(PLAYBOOKS, DEFAULT_HOSTS % DEFAULT_PATTERN), DEFAULT_PATTERN),
    "pvetune_serial": ({"fix": "rolling play " + ONE_AT_A_TIME, "rollback": "play " + ONE_AT_A_TIME}, 1),
    "pvetune_batch": ({"fix": "batch play " + ONE_AT_A_TIME + ", though its sorting play reads the inventory's "
                              "value and sends the hosts needing no reboot to it"}, 1)}
# pvetune_hosts is refused, not warned of. It is the scope of the run: this check (policies, the refusals) and the
# tasks read the inventory's pattern while the plays act on gpu_hosts, every GPU host of the inventory. On a
# production cluster a run that silently changes and reboots more hosts than the operator wrote down is the one
# mistake to stop; refusing costs nothing (no host is touched yet) and the fix is one -e. A serial or batch size
# left out falls back to one host at a time, the slowest and safest rollout: a warning is enough.
REFUSED_KEYWORD_VARS = ("pvetune_hosts",)
# A value -e name=value keeps as it is: numbers, percentages, host patterns.
PLAIN_WORD = re.compile(r"[\w%.:,!&*~/@+-]+\Z")


class RunRefused(ValueError):
    pass


def _shown(items):
    return ", ".join(items) if items else "none"


def _some(items, most=10):
    """The first ``most`` items, then "..."."""
    return ", ".join(items[:most]) + (", ..." if len(items) > most else "")


def _of_hosts(hosts):
    """ "host a" or "hosts a, b", the first ten."""
    return "host%s %s" % ("s" if len(hosts) > 1 else "", _some(hosts))


def _grouped(by_host):
    """{host: key} as [(key, [hosts])], in the order each key first appears."""
    groups = {}
    for host, key in by_host.items():
        groups.setdefault(key, []).append(host)
    return list(groups.items())


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
                     % (len(pattern_hosts), pattern, _some(pattern_hosts)))


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
    message = "; ".join("%s (%s)" % (err, _of_hosts(hosts)) for err, hosts in _grouped(bad))
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


def _extra_var_option(name, value):
    """The -e option that gives ``value`` to ``name``: name=value for a word (-e splits key=value pairs at white
    space), else JSON (which keeps a list a list and a number a number), shell-quoted."""
    if isinstance(value, (str, int)) and not isinstance(value, bool) and PLAIN_WORD.match(str(value)):
        return "-e " + shlex.quote("%s=%s" % (name, value))
    return "-e " + shlex.quote(json.dumps({name: value}))


def check_play_keywords(playbook, hosts, host_vars, extra_vars):
    """The play-keyword variables (PLAY_KEYWORD_VARS) that hosts have from the inventory but the run was not given
    as extra vars (``extra_vars``: their names): (refusal text or "", [warning]), one line per variable.
    ``host_vars``: {host: {variable: value}} for the hosts of the run check's play and localhost. pvetune_serial and
    pvetune_batch count on ``hosts``, the hosts the run acts on, and localhost (implicit, it gets group_vars/all);
    pvetune_hosts on every host of host_vars too (wherever it is, it was meant to pick the run's hosts). Hosts are
    named in that order."""
    refusals, warnings = [], []
    for name, (effects, fallback) in PLAY_KEYWORD_VARS.items():
        if playbook not in effects or name in extra_vars:
            continue
        scope = list(hosts) + ["localhost"] + (list(host_vars) if name in REFUSED_KEYWORD_VARS else [])
        values = {h: host_vars[h][name] for h in dict.fromkeys(scope) if name in host_vars.get(h, {})}
        values = {h: v for h, v in values.items() if isinstance(v, (list, dict)) or str(v) != str(fallback)}
        if not values:
            continue
        groups = _grouped({h: json.dumps(v, sort_keys=True) for h, v in values.items()})
        given = ", ".join("%s (%s)" % (value, _of_hosts(hs)) for value, hs in groups)
        option = _extra_var_option(name, values[groups[0][1][0]]) if len(groups) == 1 else "-e %s=<value>" % name
        line = ("%s is %s in the inventory, but not given with -e: play keywords are templated before any host is "
                "known, from the extra vars only, so %s.yml's %s. Give it with %s%s"
                % (name, given, playbook, effects[playbook], option,
                   " (or remove it from the inventory)" if name in REFUSED_KEYWORD_VARS else ""))
        (refusals if name in REFUSED_KEYWORD_VARS else warnings).append(line)
    return "; ".join(refusals), warnings


def report_dir_problem(path):
    """Why the controller cannot keep run records under ``path`` (a pvetune_report_dir), or "" when it can: the
    directory, or the nearest directory above it that exists (the run creates the rest), must be a writable
    directory, and it must not be "/" itself. Reads the controller's file system only."""
    if not isinstance(path, str) or not path.strip():
        return "is empty"
    real = os.path.realpath(path)
    if real == os.sep:
        return "is the root directory (the runs' directories and reports/latest would be written into /)"
    probe = real
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return "cannot be created: %s is not a directory" % json.dumps(probe)
    if not os.access(probe, os.W_OK | os.X_OK):
        return "cannot be written: %s is read-only (file system or permissions)" % json.dumps(probe)
    return ""


def check_report_dirs(report_dirs):
    """RunRefused naming the variable, the path, why and which hosts, for the first unusable report directory of
    ``report_dirs`` (host -> pvetune_report_dir); checked before any host is touched, so that a run never changes
    a host and then fails to record it (which left the host's lock held)."""
    by_dir = {}
    for host, path in sorted((report_dirs or {}).items()):
        by_dir.setdefault(path if isinstance(path, str) else "", []).append(host)
    for path, hosts in sorted(by_dir.items()):
        problem = report_dir_problem(path)
        if problem:
            raise RunRefused("pvetune_report_dir %s %s (%s). Give a writable directory (-e "
                             "pvetune_report_dir=/path)" % (json.dumps(path), problem, _of_hosts(hosts)))


def charged_hosts(hosts, play_hosts):
    """Who a refused run is charged to: the hosts it would have acted on (and localhost, the controller); with none,
    localhost when --limit kept it, else every host --limit left."""
    if hosts:
        return list(hosts) + (["localhost"] if "localhost" in play_hosts else [])
    return ["localhost"] if "localhost" in play_hosts else list(play_hosts)


# The module's options (library/pvetune_run_check.py documents them); its action plugin validates with the same spec.
ARGUMENT_SPEC = dict(
    playbook=dict(type="str", required=True, choices=list(PLAYBOOKS)),
    pattern=dict(type="str", required=True),
    pattern_hosts=dict(type="list", elements="str", required=True),
    play_hosts=dict(type="list", elements="str", required=True),
    run_tags=dict(type="list", elements="str", default=["all"]),
    skip_tags=dict(type="list", elements="str", default=[]),
    inventory=dict(type="list", elements="str", default=[]),
    run_id=dict(type="str"),
    policies=dict(type="dict", default={}),
    extra_vars=dict(type="list", elements="str"),
    host_vars=dict(type="dict", default={}),
    play_keywords=dict(type="bool", default=True),
    report_dirs=dict(type="dict"),
)


def run_check(params, run_command, check_mode, diff):
    """pvetune_run_check's one call: ``(failed, result, warnings)`` of check_run with the module's options; the
    verdict's warnings go out as the module's own.  It never fails itself: the playbook acts on ``refused``."""
    result = check_run(params["playbook"], params["pattern"], params["pattern_hosts"], params["play_hosts"],
                       params["run_tags"], params["skip_tags"], inventory=params["inventory"], run_id=params["run_id"],
                       policies=params["policies"], host_vars=params["host_vars"],
                       extra_vars=params["extra_vars"] if params["play_keywords"] else None,
                       report_dirs=params["report_dirs"])
    warnings = result.pop("warnings")
    return False, dict(changed=False, **result), warnings


def check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory=(), run_id=None,
              policies=None, host_vars=None, extra_vars=None, report_dirs=None):
    """The run's verdict: {"hosts", "refused" (why the run must not start, or ""), "charged" (the hosts a refusal
    fails), "bad_policy": {host: error}, "policy_message", "warnings", "refuse": {host: message} (the hosts the
    refusal play fails, each with its message: empty when the run may go on), "act_on" (the hosts, less those
    with an invalid policy)}. The play-keyword variables are checked
    when ``extra_vars`` (the names of the run's extra vars) is given, against ``host_vars`` (check_play_keywords);
    the report directories when ``report_dirs`` (host -> pvetune_report_dir) is."""
    try:
        verdict = _check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory, run_id,
                             policies, host_vars, extra_vars)
        if report_dirs is not None:
            check_report_dirs({h: d for h, d in report_dirs.items() if h in verdict["hosts"] or h == "localhost"})
    except RunRefused as exc:
        hosts = selected_hosts(list(pattern_hosts), list(play_hosts))
        charged = charged_hosts(hosts, list(play_hosts))
        return {"hosts": hosts, "refused": str(exc), "charged": charged, "bad_policy": {}, "policy_message": "",
                "warnings": [], "act_on": [], "refuse": dict.fromkeys(charged, "pvetune refuses this run: %s" % exc)}
    bad = verdict["bad_policy"]
    # fix.yml changes hosts by their policy: one invalid policy stops the run. audit.yml reports those hosts as not
    # audited and audits the others; the other playbooks read no policy.
    refuse = {h: "pvetune refuses this run: %s's pvetune_policy is invalid (said above)" % h
              for h in verdict["hosts"] if h in bad} if playbook == "fix" else {}
    return dict(verdict, refused="", charged=[], refuse=refuse, act_on=[h for h in verdict["hosts"] if h not in bad])


def _check_run(playbook, pattern, pattern_hosts, play_hosts, run_tags, skip_tags, inventory, run_id, policies,
               host_vars, extra_vars):
    """check_run's checks; raises RunRefused when the run as a whole must not start (no host, tags that select
    nothing, a bad run id, an inventory pvetune_hosts)."""
    if playbook not in PLAYBOOKS:
        raise RunRefused("unknown playbook %r (one of %s)" % (playbook, ", ".join(PLAYBOOKS)))
    keyword_warnings = []
    if extra_vars is not None:  # before check_hosts: an inventory pvetune_hosts is why its pattern may match nothing
        refusal, keyword_warnings = check_play_keywords(
            playbook, selected_hosts(list(pattern_hosts), list(play_hosts)), host_vars or {}, list(extra_vars))
        if refusal:
            raise RunRefused(refusal)
    hosts = check_hosts(pattern, list(pattern_hosts), list(play_hosts), inventory)
    warnings = keyword_warnings + check_tags(playbook, list(run_tags), list(skip_tags))
    if run_id is not None:
        try:
            validate_run_id(run_id)
        except ValueError:
            raise RunRefused("pvetune_run_id_override must be 1-64 characters of [A-Za-z0-9._-], starting with "
                             "a letter or digit (it names directories), got %s" % json.dumps(str(run_id)[:80]))
    policies = {h: _policy_of((policies or {}).get(h)) for h in hosts}
    bad, message = check_policies(policies)
    return {"hosts": hosts, "bad_policy": bad, "policy_message": message, "warnings": warnings}
