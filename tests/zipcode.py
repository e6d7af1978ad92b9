# tests/zipcode.py — a compile cache for the code Ansible's modules import, for the tests' Python only (not pvetune):
# scripts/bootstrap.sh installs it in the development venv (pvetune_zipcode.py + a .pth that imports it at every
# start of that Python, which runs the modules of every playbook the tests run), and `lab.sh seed` in every lab VM.
# PVETUNE_ZIPCODE=0 turns it off; PVETUNE_ZIPCODE_DIR moves the cache (default ~/.cache/pvetune/zipcode).
#
# Ansible runs each module from a zip (AnsiballZ), and zipimport compiles every module it imports from there
# (ansible's module_utils, pvetune's: 400-800 KB of source per pvetune module) from source, at every task: 0.4-1 s of
# CPU per module call on the test machine (fix.yml --check on the demo fleet: 57 s of CPU without it, 38 s with
# it), seconds under TCG. This keeps the code objects zipimport compiles, keyed by the sha256 of the source (and the
# interpreter and optimization level), and hands a copy back (with the importing file's name) when the same source
# is compiled again. The same source compiles to the same code: what runs is unchanged, only the compile is skipped.
import marshal
import os
import sys
import types
import zipimport

_DIR = os.environ.get("PVETUNE_ZIPCODE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pvetune", "zipcode")
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


if os.environ.get("PVETUNE_ZIPCODE", "1") != "0":
    zipimport._compile_source = _cached_compile_source
