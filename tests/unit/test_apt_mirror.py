"""scripts/apt_mirror.sh: the Debian archive (and security archive) URI from a machine's apt sources.

Every case is a fixture tree in tmp_path passed with --root; the hosts are .invalid names, so no
test depends on (or names) a real mirror.
"""
import os
import re
import shutil
import subprocess

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "scripts", "apt_mirror.sh")
SHELLS = [s for s in ("sh", "bash") if shutil.which(s)]

DEBIAN_SOURCES = """\
Types: deb
# a comment inside a stanza
URIs: http://mirror.example.invalid/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
THIRD_PARTY_SOURCES = """\
Types: deb
URIs: https://nodes.example.invalid/node_20.x
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/nodesource.gpg
"""


def tree(tmp_path, files, codename="bookworm"):
    root = tmp_path / "root"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    if codename is not None:
        (root / "etc" / "os-release").write_text('PRETTY_NAME="Debian"\nVERSION_CODENAME=%s\nID=debian\n' % codename)
    return root


def run(root, *args, env=None, shell="sh"):
    full = {k: v for k, v in os.environ.items() if not k.startswith("PVETUNE_DEBIAN")}
    full.update(env or {})
    return subprocess.run([shell, SCRIPT, "--root", str(root)] + list(args), env=full, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)


def mirror(root, *args, **kwargs):
    proc = run(root, *args, **kwargs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1
    return proc.stdout.strip()


@pytest.mark.parametrize("shell", SHELLS)
def test_deb822_sources(tmp_path, shell):
    root = tree(tmp_path, {"etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES,
                           "etc/apt/sources.list.d/nodesource.sources": THIRD_PARTY_SOURCES})
    assert mirror(root, shell=shell) == "http://mirror.example.invalid/debian"  # trailing slash dropped
    assert mirror(root, "--security", shell=shell) == "http://security.example.invalid/debian-security"


@pytest.mark.parametrize("shell", SHELLS)
def test_one_line_sources(tmp_path, shell):
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    root = tree(tmp_path, {"etc/apt/sources.list": """\
# deb http://commented.example.invalid/debian bookworm main
deb cdrom:[Debian GNU/Linux 12.5.0 _Bookworm_ - Official amd64 DVD Binary-1]/ bookworm contrib main

deb [ arch=amd64 signed-by=%s ] http://one.example.invalid/debian bookworm main non-free-firmware # comment
deb-src http://one.example.invalid/debian bookworm main
deb http://one.example.invalid/debian-security bookworm-security main contrib
""" % keyring}, codename="bookworm")
    assert mirror(root, shell=shell) == "http://one.example.invalid/debian"
    assert mirror(root, "--security", shell=shell) == "http://one.example.invalid/debian-security"


def test_the_release_codename_must_match(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list.d/old.list": "deb http://old.example.invalid/debian bullseye main\n",
                           "etc/apt/sources.list.d/new.list": "deb http://new.example.invalid/debian trixie main\n"},
                codename="trixie")
    assert mirror(root) == "http://new.example.invalid/debian"
    assert mirror(root, "--codename", "bullseye") == "http://old.example.invalid/debian"
    # a suite that merely contains the codename is another suite
    root2 = tree(tmp_path / "2", {"etc/apt/sources.list": "deb http://x.example.invalid/apt cloud-sdk-trixie main\n"},
                 codename="trixie")
    assert run(root2).returncode == 1


def test_component_main_is_required(tmp_path):
    root = tree(tmp_path, {
        "etc/apt/sources.list.d/pve.list": "deb http://pve.example.invalid/debian/pve bookworm pve-no-subscription\n",
        "etc/apt/sources.list.d/z-debian.list": "deb http://d.example.invalid/debian bookworm main\n",
    })
    assert mirror(root) == "http://d.example.invalid/debian"


def test_disabled_files_and_stanzas_are_ignored(tmp_path):
    root = tree(tmp_path, {
        "etc/apt/sources.list.d/a-debian.sources.disabled-by-farm": DEBIAN_SOURCES.replace("mirror.", "disabled."),
        "etc/apt/sources.list.d/b-old.list.save": "deb http://saved.example.invalid/debian bookworm main\n",
        "etc/apt/sources.list.d/c bad,name.list": "deb http://badname.example.invalid/debian bookworm main\n",
        "etc/apt/sources.list.d/d-off.sources": DEBIAN_SOURCES.replace("mirror.", "off.").replace(
            "Types: deb\n", "Types: deb\nEnabled: no\n"),
        "etc/apt/sources.list.d/e-debian.sources": DEBIAN_SOURCES,
    })
    assert mirror(root) == "http://mirror.example.invalid/debian"
    assert mirror(root, "--security") == "http://security.example.invalid/debian-security"


def test_deb822_continuation_lines_and_field_case(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list.d/debian.sources": """\
types: deb deb-src
uris:
 http://multi.example.invalid/debian
suites: bookworm
 bookworm-updates
components: contrib
 main
"""})
    assert mirror(root) == "http://multi.example.invalid/debian"


def test_a_third_party_repo_with_codename_and_main_loses_to_debian(tmp_path):
    root = tree(tmp_path, {
        "etc/apt/sources.list.d/00-php.list":
            "deb [signed-by=/usr/share/keyrings/php.gpg] https://php.example.invalid/php/ bookworm main\n",
        "etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES,
    })
    assert mirror(root) == "http://mirror.example.invalid/debian"


def test_apt_lists_saying_origin_debian_win(tmp_path):
    """A site mirror on an unusual path beats a third-party '/debian' repo when apt's lists say it is Debian."""
    files = {
        "etc/apt/sources.list.d/00-vendor.list": "deb http://vendor.example.invalid/debian bookworm main\n",
        "etc/apt/sources.list.d/site.list": "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                                            "http://site.example.invalid/pub/archive bookworm main\n",
    }
    root = tree(tmp_path, files)
    assert mirror(root) == "http://vendor.example.invalid/debian"  # without lists: the vendor looks more Debian
    lists = root / "var" / "lib" / "apt" / "lists"
    lists.mkdir(parents=True)
    (lists / "site.example.invalid_pub_archive_dists_bookworm_InRelease").write_text(
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Debian\nLabel: Debian\nSuite: stable\n")
    (lists / "vendor.example.invalid_debian_dists_bookworm_InRelease").write_text("Origin: Vendor\n")
    assert mirror(root) == "http://site.example.invalid/pub/archive"


def test_first_in_apt_order_wins_a_tie(tmp_path):
    root = tree(tmp_path, {
        "etc/apt/sources.list": "deb http://first.example.invalid/debian bookworm main\n",
        "etc/apt/sources.list.d/00.list": "deb http://second.example.invalid/debian bookworm main\n",
    })
    assert mirror(root) == "http://first.example.invalid/debian"


def test_override_env(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES})
    env = {"PVETUNE_DEBIAN_MIRROR": "http://override.example.invalid/debian",
           "PVETUNE_DEBIAN_SECURITY_MIRROR": "http://override.example.invalid/security"}
    assert mirror(root, env=env) == "http://override.example.invalid/debian"
    assert mirror(root, "--security", env=env) == "http://override.example.invalid/security"
    # each override stands for its own archive only
    assert mirror(root, "--security", env={"PVETUNE_DEBIAN_MIRROR": "http://o.example.invalid/debian"}) == \
        "http://security.example.invalid/debian-security"
    # and works on a machine without any apt source
    empty = tree(tmp_path / "empty", {})
    assert mirror(empty, env=env) == "http://override.example.invalid/debian"


def test_no_debian_source_is_a_clear_error(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list.d/nodesource.sources": THIRD_PARTY_SOURCES,
                           "etc/apt/sources.list.d/debian.sources.disabled": DEBIAN_SOURCES})
    for args in ((), ("--security",)):
        proc = run(root, *args)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert "no enabled Debian source for suite bookworm%s with component main" % (
            "-security" if args else "") in proc.stderr
        assert ("PVETUNE_DEBIAN_SECURITY_MIRROR" if args else "PVETUNE_DEBIAN_MIRROR") in proc.stderr
    proc = run(tree(tmp_path / "none", {}))
    assert proc.returncode == 1 and "no enabled Debian source" in proc.stderr


def test_security_is_not_taken_from_the_main_archive(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list": "deb http://only.example.invalid/debian bookworm main\n"})
    assert mirror(root) == "http://only.example.invalid/debian"
    assert run(root, "--security").returncode == 1


def test_unknown_release_is_a_clear_error(tmp_path):
    root = tree(tmp_path, {"etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES}, codename=None)
    proc = run(root)
    assert proc.returncode == 1 and "cannot tell the release codename" in proc.stderr
    assert mirror(root, "--codename", "bookworm") == "http://mirror.example.invalid/debian"
    proc = run(root, "--codename", "Book worm;")
    assert proc.returncode == 1 and "odd release codename" in proc.stderr


def test_bad_arguments(tmp_path):
    proc = run(tree(tmp_path, {}), "--nope")
    assert proc.returncode == 2 and "unknown argument: --nope" in proc.stderr


def test_the_build_scripts_take_the_mirror_from_it():
    """No Debian mirror URI is written into the scripts that need one; they ask apt_mirror.sh."""
    for rel in ("scripts/build_images.sh", "tests/lab/lab.sh"):
        with open(os.path.join(TOP, rel), encoding="utf-8") as handle:
            text = handle.read()
        assert "apt_mirror.sh" in text, rel
        assert not re.search(r"(https?|ftp)://[^\s\"']*debian", text), rel
