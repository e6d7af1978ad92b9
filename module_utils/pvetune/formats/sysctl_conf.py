# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl.d files as systemd-sysctl reads them: the directories in precedence order, later files win per key,
``/proc/sys`` paths of keys, and pvetune's own drop-in.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.core.fsroot import FsError

# -- sysctl ----------------------------------------------------------------
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def render_sysctl_dropin(settings):
    """The /etc/sysctl.d drop-in pvetune owns, for {key: value}."""
    lines = ["# Managed by pvetune (fix.yml); rollback.yml removes this file.",
             "# Do not edit: changes are overwritten on the next fix run."]
    for key in sorted(settings):
        lines.append("%s = %s" % (key, settings[key]))
    return "\n".join(lines) + "\n"


def parse_sysctl_text(text):
    """[(line_no, key, value)] from a sysctl.conf-style file."""
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if "=" not in line:
            continue
        key, value = line.partition("=")[::2]
        key = key.strip().lstrip("-").replace("/", ".")
        out.append((no, key, value.strip()))
    return out


def read_sysctl_persisted(fsroot, keys):
    """Effective persisted value of each key, in systemd-sysctl's order.

    Files are ordered by basename across the sysctl.d directories; for equal
    basenames the earlier directory (/etc before /run before /usr/lib) wins.
    /etc/sysctl.conf is read last (procps semantics; Debian also links it as
    /etc/sysctl.d/99-sysctl.conf).
    """
    chosen = {}
    for directory in SYSCTL_DIRS:
        for name in fsroot.listdir(directory):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = "%s/%s" % (directory, name)
    files = [chosen[n] for n in sorted(chosen)]
    if "/etc/sysctl.d/99-sysctl.conf" not in files and fsroot.isfile("/etc/sysctl.conf"):
        files.append("/etc/sysctl.conf")
    result = dict.fromkeys(keys)
    errors = []
    for path in files:
        try:
            text = fsroot.read_text(path)
        except FsError as exc:
            errors.append({"path": exc.path, "error": exc.reason})
            continue
        for no, key, value in parse_sysctl_text(text):
            if key in result:
                result[key] = {"value": value, "file": path, "line": no}
    return {"values": result, "files": files, "errors": errors}
