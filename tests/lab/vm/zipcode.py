# tests/lab/vm/zipcode.py — installed in every lab VM by `lab.sh seed` as pvetune_lab_zipcode (a .pth file
# imports it at every python3 start; LAB_ZIPCODE=0 leaves it out). Not pvetune: lab speed only.
#
# Ansible runs each module from a zip (AnsiballZ), and zipimport compiles every module it imports from there
# (ansible's module_utils, pvetune's: 400-800 KB of source per pvetune module) from source, at every task. Under
# TCG that compile costs seconds per task. This keeps the code objects zipimport compiles, keyed by the sha256 of
# the source (and the interpreter and optimization level), in /var/cache/pvetune-lab/zipcode, and hands a copy
# back (with the importing file's name) when the same source is compiled again. The same source compiles to the
# same code: what runs is unchanged, only the compile is skipped.
import marshal
import os
import sys
import types
import zipimport

_DIR = "/var/cache/pvetune-lab/zipcode"
_TAG = ("%s-O%d" % (sys.implementation.cache_tag, sys.flags.optimize)).encode()
_compile_source = zipimport._compile_source


def _renamed(code, filename):
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile_source(pathname, source):
    import hashlib

    path = os.path.join(_DIR, hashlib.sha256(_TAG + b"\0" + source).hexdigest())
    try:
        with open(path, "rb") as handle:
            code = marshal.load(handle)
        if isinstance(code, types.CodeType):
            return _renamed(code, pathname)
    except Exception:  # not cached yet, or unreadable: compile
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(_DIR, exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as handle:
            marshal.dump(code, handle)
        os.replace(tmp, path)
    except Exception:  # a cache that cannot be written is only slower
        pass
    return code


zipimport._compile_source = _cached_compile_source
