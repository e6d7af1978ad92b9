"""Mount the pmxcfs-like test filesystem (pmxcfs_fuse.py) over a tree's /etc/pve, and unmount it reliably.

    with mounted_over_etc_pve(tree, mode="quorate") as fs:
        ...                      # tree/etc/pve is now the FUSE mount, backed by fs.backing
        fs.set_mode("noquorum")  # switch while mounted
        fs.operations()          # [[op, path..., errno], ...] since the mount

The original tree/etc/pve directory is moved aside to tree/.pvetune/pmxcfs-backing (the FUSE
filesystem serves it) and moved back after the unmount, so the tree looks exactly as before.  The
unmount runs ``fusermount3 -u`` (lazy ``-uz`` when busy), waits for the FUSE process and kills it if
needed; it also runs from an atexit hook, so a crashing test does not leave a mount behind.
"""
import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "pmxcfs_fuse.py")
_ACTIVE = {}


def fuse_available():
    """None when a FUSE mount can be made here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount3 is not installed (apt: fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return "mfusepy cannot load libfuse: %s" % exc
    return None


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 4 and fields[4].encode().decode("unicode_escape") == path:
                return True
    return False


def _fusermount():
    return shutil.which("fusermount3") or shutil.which("fusermount")


class Mount:
    def __init__(self, backing, mountpoint, mode="quorate", log=None):
        self.backing = os.path.realpath(backing)
        self.mountpoint = os.path.realpath(mountpoint)
        self.state = os.path.join(os.path.dirname(self.backing), ".pmxcfs-state-%d" % os.getpid())
        self.log = log or os.path.join(os.path.dirname(self.backing), ".pmxcfs-ops.log")
        self.proc = None
        self.stderr = os.path.join(os.path.dirname(self.backing), ".pmxcfs-stderr.log")
        self.set_mode(mode)

    def set_mode(self, mode):
        with open(self.state, "w") as handle:
            handle.write(mode + "\n")

    def operations(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def start(self, timeout=20):
        if os.path.exists(self.log):
            os.unlink(self.log)
        err = open(self.stderr, "wb")
        self.proc = subprocess.Popen([sys.executable, SCRIPT, self.backing, self.mountpoint, "--state", self.state,
                                      "--log", self.log], stdout=err, stderr=subprocess.STDOUT)
        err.close()
        _ACTIVE[self.mountpoint] = self
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(self.stderr, "rb") as handle:
                    raise RuntimeError("pmxcfs test filesystem did not mount on %s: %s"
                                       % (self.mountpoint, handle.read().decode("utf-8", "replace")[-2000:]))
            time.sleep(0.05)
        return self

    def stop(self):
        fm = _fusermount()
        if is_mounted(self.mountpoint) and fm:
            for args in (["-u"], ["-uz"]):
                if subprocess.run([fm] + args + [self.mountpoint], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL).returncode == 0:
                    break
                time.sleep(0.2)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if is_mounted(self.mountpoint):
            subprocess.run(["umount", "-l", self.mountpoint], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _ACTIVE.pop(self.mountpoint, None)
        for path in (self.state,):
            if os.path.exists(path):
                os.unlink(path)


@contextlib.contextmanager
def mounted(backing, mountpoint, mode="quorate"):
    mount = Mount(backing, mountpoint, mode).start()
    try:
        yield mount
    finally:
        mount.stop()


@contextlib.contextmanager
def mounted_over_etc_pve(tree, mode="quorate"):
    """Serve tree/etc/pve through the test filesystem for the duration of the block."""
    etc_pve = os.path.join(tree, "etc", "pve")
    backing = os.path.join(tree, ".pvetune", "pmxcfs-backing")
    os.makedirs(os.path.dirname(backing), exist_ok=True)
    os.rename(etc_pve, backing)
    os.mkdir(etc_pve, 0o755)
    try:
        with mounted(backing, etc_pve, mode) as mount:
            yield mount
    finally:
        if not is_mounted(etc_pve):
            os.rmdir(etc_pve)
            os.rename(backing, etc_pve)
        for name in (".pmxcfs-ops.log", ".pmxcfs-stderr.log"):
            path = os.path.join(tree, ".pvetune", name)
            if os.path.exists(path):
                os.unlink(path)


@atexit.register
def _unmount_all():
    for mount in list(_ACTIVE.values()):
        try:
            mount.stop()
        except Exception:
            pass
