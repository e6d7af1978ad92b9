"""Run a function as an unprivileged user (uid/gid 65534), so permission bits apply as they do for
a non-root reader, and bring its result or exception back to the test (root) process."""
import os
import pickle

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
