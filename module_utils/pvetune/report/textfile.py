# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's pvetune.prom in its node_exporter textfile directory (module pvetune_textfile, playbooks/metrics.yml).

node_exporter's textfile collector reads every ``*.prom`` of its directory at each scrape, so a file must appear
whole: it is written to a temporary file in the same directory (``.pvetune.prom.pvetune-tmp``, which the collector
does not read) and renamed over the old one (core/filewrite.atomic_write, the one atomic writer).  The directory is
the collector's own (Debian's prometheus-node-exporter: /var/lib/prometheus/node-exporter); it is never created,
since a host without it has no collector to read the file.  The file is not recorded in pvetune's manifest: it is
output, not host configuration (``state: absent`` removes it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re
import stat

from ansible.module_utils.pvetune.core.filewrite import atomic_write
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot

DEFAULT_DIR = "/var/lib/prometheus/node-exporter"
TEXTFILE_NAME = "pvetune.prom"  # also the fleet file of write_reports (report_metrics imports it from here)
STATES = ("present", "absent")
# Absolute, normalised, plain characters: the path reaches a file name and the operator's diff, nothing else.
DIR_RE = re.compile(r"^(/[A-Za-z0-9_.+@-]+)+\Z")
MAX_CONTENT = 4 * 1024 * 1024


def validate_dir(path, name="pvetune_textfile_dir"):
    """The textfile directory, or ValueError naming the variable."""
    if not isinstance(path, str) or not DIR_RE.match(path) or posixpath.normpath(path) != path \
            or any(part in (".", "..") for part in path.split("/")):
        raise ValueError("%s must be an absolute, normalised directory path of letters, digits and ._+@- "
                         "(node_exporter's --collector.textfile.directory, default %s); got %r"
                         % (name, DEFAULT_DIR, path if not isinstance(path, str) else path[:200]))
    return path


def validate_content(content):
    if not isinstance(content, str) or not content.endswith("\n") or "\x00" in content:
        raise ValueError("content must be the text exposition format ending with a line feed, without NUL bytes")
    if len(content.encode("utf-8")) > MAX_CONTENT:
        raise ValueError("content is larger than %d bytes" % MAX_CONTENT)
    return content


def _current(real, host_file):
    """The file's text, or None when it does not exist; ValueError for anything but a regular file."""
    try:
        st = os.lstat(real)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise ValueError("%s is a symlink to %s; not writing through it" % (host_file, os.readlink(real)))
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("%s exists and is not a regular file" % host_file)
    with open(real, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def export_textfile(params, run_command, check_mode, diff):
    """pvetune_textfile's one call: ``(failed, result, warnings)`` of export with the module's options; a bad option
    or a file that cannot be written fails naming it."""
    try:
        result = export(params["root"], params["dir"], params["content"], params["state"], check_mode, diff)
    except (ValueError, OSError) as exc:
        return True, {"msg": str(exc)}, []
    return False, result, []


def export(root, directory, content, state="present", check_mode=False, want_diff=False):
    """Plan and (unless check_mode) write or remove <root><directory>/pvetune.prom; returns the module result."""
    directory = validate_dir(directory)
    if state not in STATES:
        raise ValueError("state must be one of %s" % ", ".join(STATES))
    if state == "present":
        validate_content(content)
    fsroot = FsRoot(root)
    host_file = posixpath.join(directory, TEXTFILE_NAME)
    try:
        real_dir = fsroot.path(directory)
    except FsError as exc:
        raise ValueError("%s: %s" % (directory, exc))
    if not os.path.isdir(real_dir):
        if state == "absent":
            return {"changed": False, "path": host_file, "state": state, "msg": "%s does not exist" % directory}
        raise ValueError("the textfile directory %s does not exist on this host: install prometheus-node-exporter "
                         "(Debian creates it) or set pvetune_textfile_dir to the directory its "
                         "--collector.textfile.directory names" % directory)
    real = os.path.join(real_dir, TEXTFILE_NAME)
    before = _current(real, host_file)
    after = content if state == "present" else None
    changed = before != after
    result = {"changed": changed, "path": host_file, "state": state}
    if want_diff and changed:
        result["diff"] = {"before_header": host_file + ("" if before is not None else " (absent)"),
                          "after_header": host_file + (" (removed)" if after is None else ""),
                          "before": before or "", "after": after or ""}
    if changed and not check_mode:
        if after is None:
            os.unlink(real)
        else:
            atomic_write(real, after.encode("utf-8"), 0o644)
    return result
