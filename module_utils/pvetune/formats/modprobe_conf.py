# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""modprobe.d: the module options the configuration gives, as kmod reads it.

kmod reads the ``*.conf`` files of its directories in the order of their names, a name in an earlier directory
hiding the same name in a later one (/etc before /run before /usr/lib and /lib: kmod's libkmod-config.c), and the
last ``options <module> <option>=<value>`` of an option wins.  ``-`` and ``_`` are alike in a module name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.core.fsroot import FsError

MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")


def option_values(text, module, option):
    """The raw values ``options <module> ... <option>=<value>`` lines of one file give, in order."""
    values = []
    module = module.replace("-", "_")
    for line in (text or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) < 3 or words[0] != "options" or words[1].replace("-", "_") != module:
            continue
        for word in words[2:]:
            key, sep, value = word.partition("=")
            if sep and key == option:
                values.append(value)
    return values


def conf_files(fsroot):
    """The modprobe.d files kmod reads, in its order: [path]."""
    files = {}
    for directory in MODPROBE_DIRS:
        for name in fsroot.listdir(directory) if fsroot.isdir(directory) else ():
            if name.endswith(".conf"):
                files.setdefault(name, "%s/%s" % (directory, name))
    return [files[name] for name in sorted(files)]


def read_options(fsroot, module, options):
    """``{option: {"value": raw, "file": path} or None}``: what modprobe.d configures for ``module`` (last wins).
    An unreadable file is skipped (a file modprobe cannot read gives it no option either)."""
    out = dict.fromkeys(options)
    for path in conf_files(fsroot):
        try:
            text = fsroot.read_text(path, limit=65536)
        except FsError:
            continue
        for option in options:
            for value in option_values(text, module, option):
                out[option] = {"value": value, "file": path}
    return out
