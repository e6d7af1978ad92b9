#!/usr/bin/env python3
"""What Ansible ships to a host for one module call: the pvetune files in a module's AnsiballZ payload and their size.

    bench/payload_size.py [pvetune_facts]      # JSON on stdout

Runs the module once against the demo host pve-gpu01 (local connection, a snapshot root) with
ANSIBLE_KEEP_REMOTE_FILES so the payload Ansible built stays on disk, then lists the zip inside it.
"""
import base64
import glob
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def payload(module="pvetune_facts", args=None):
    venv_bin = os.path.join(TOP, ".venv", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=tmp,
                   ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"))
        args = args or "root=%s" % os.path.join(TOP, "demo", "snapshots", "pve-gpu01")
        subprocess.run([os.path.join(venv_bin, "ansible"), "localhost", "-c", "local", "-m", module, "-a", args,
                        "-e", "ansible_python_interpreter=%s" % os.path.join(venv_bin, "python")],
                       cwd=TOP, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        found = glob.glob(os.path.join(tmp, "*", "AnsiballZ_%s.py" % module))
        if not found:
            raise SystemExit("no AnsiballZ_%s.py was kept" % module)
        text = open(found[0]).read()
    blob = max(re.findall(r"[A-Za-z0-9+/=]{5000,}", text), key=len)
    data = base64.b64decode(blob)
    files = {i.filename: i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist()
             if "pvetune" in i.filename}
    return {"module": module, "ansiballz_bytes": len(text), "zip_bytes": len(data),
            "pvetune_bytes": sum(files.values()), "pvetune_files": dict(sorted(files.items()))}


if __name__ == "__main__":
    print(json.dumps(payload(*sys.argv[1:2]), indent=2))
