"""Run a function as an unprivileged user (uid/gid 65534), so permission bits apply as they do for
a non-root reader, and bring its result or exception back to the test (root) process."""
import os
import pickle
import shutil
import tempfile

NOBODY = 65534


def run_as_nobody(func):
    """``func()`` in a forked child as uid/gid 65534; returns its result or re-raises its exception.

    An exception that does not pickle comes back as an AssertionError naming it.
    """
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                payload = ("ok", func())
            except Exception as exc:  # sent to the parent
                payload = ("exc", exc)
            try:
                data = pickle.dumps(payload)
                pickle.loads(data)
            except Exception:
                data = pickle.dumps(("text", "%s: %s" % (type(payload[1]).__name__, payload[1])))
            with os.fdopen(wfd, "wb") as out:
                out.write(data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the uid-65534 child failed"
    kind, value = pickle.loads(data)
    if kind == "exc":
        raise value
    if kind == "text":
        raise AssertionError("in the uid-65534 child: %s" % value)
    return value


def public_tmpdir(prefix):
    """A 0755 directory under TMPDIR (tmpfs in scripts/run_tests.sh) that uid 65534 can traverse
    (pytest's tmp_path lives under a 0700 base directory)."""
    path = tempfile.mkdtemp(prefix=prefix)
    os.chmod(path, 0o755)
    return path


def rmtree(path):
    """Remove a scratch tree, also one a test made unlistable (chmod 000 directories)."""
    if not os.path.lexists(path):
        return
    for dirpath, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, 0o755)
    shutil.rmtree(path, ignore_errors=True)
