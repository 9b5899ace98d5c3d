"""scripts/setup.sh's choice of packages by release (fast, needs no root).

`setup.sh --print-packages OS-RELEASE` prints what it would do on a fresh
machine of that release and changes nothing: the release line, the APT
suites it adds, the exact `apt-get install` arguments. Checked here against
os-release files of Debian 12 and 13 (as those releases ship them), of
releases it refuses (Ubuntu, Debian testing and unstable), and with the
LAZARET_SETUP_RELEASE override. The names are checked against a real
archive too: this host's, when it is Debian 12 (`apt-get install
--simulate` of the bookworm list), and a Debian 13 root filesystem when
LAZARET_TEST_TRIXIE_ROOT names one (made with `mmdebstrap --variant=apt
trixie DIR`; docs/notes/2026-12-04-newcomer-machines.md).
"""
import os
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
SETUP = SRC / "scripts" / "setup.sh"

BOOKWORM = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"""
TRIXIE = """PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
VERSION_CODENAME=trixie
DEBIAN_VERSION_FULL=13.2
ID=debian
"""
UBUNTU = """PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=noble
"""
TESTING = 'PRETTY_NAME="Debian GNU/Linux forky/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=forky\nID=debian\n'
SID = 'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nNAME="Debian GNU/Linux"\nID=debian\n'

# What every release's list holds: the build, the runtime and the tests.
COMMON = ["build-essential", "meson", "ninja-build", "clang", "clang-format", "libfuse3-dev", "libcmocka-dev",
          "libgit2-dev", "libarchive-dev", "libsodium-dev", "libssl-dev", "fuse3", "fuse-overlayfs", "uidmap",
          "slirp4netns", "mmdebstrap", "skopeo", "python3-pytest", "python3-pytest-xdist", "python3-pexpect", "spin", "cppcheck"]


def select(tmp_path, text, env=None):
    f = tmp_path / "os-release"
    f.write_text(text)
    e = {k: v for k, v in os.environ.items() if k != "LAZARET_SETUP_RELEASE"}
    e.update(env or {})
    return subprocess.run(["bash", str(SETUP), "--print-packages", str(f)], capture_output=True, text=True,
                          env=e, timeout=30)


def parsed(r):
    assert r.returncode == 0, r.stderr
    out = {"release": [], "suite": [], "package": []}
    for line in r.stdout.splitlines():
        kind, _, value = line.partition(" ")
        out[kind].append(value)
    assert len(out["release"]) == 1, r.stdout
    assert len(set(out["package"])) == len(out["package"]), r.stdout
    return out


def test_bookworm(tmp_path):
    o = parsed(select(tmp_path, BOOKWORM))
    assert o["release"] == ["bookworm"]
    assert o["suite"] == ["bookworm-backports"]
    pkgs = o["package"]
    assert set(COMMON) <= set(pkgs)
    # runsc 2024 exists only in backports; clang 14 is bookworm's.
    assert "runsc/bookworm-backports" in pkgs and "runsc" not in pkgs
    assert "libclang-rt-14-dev" in pkgs and "pkg-config" in pkgs


def test_trixie(tmp_path):
    o = parsed(select(tmp_path, TRIXIE))
    assert o["release"] == ["trixie"]
    assert o["suite"] == []
    pkgs = o["package"]
    assert set(COMMON) <= set(pkgs)
    assert "runsc" in pkgs and "libclang-rt-19-dev" in pkgs and "pkgconf" in pkgs
    assert not [p for p in pkgs if "/" in p or "14" in p or p == "pkg-config"], pkgs
    assert "bookworm" not in (select(tmp_path, TRIXIE).stdout)


def test_version_id_alone(tmp_path):
    # Some images drop VERSION_CODENAME; the version number is enough.
    assert parsed(select(tmp_path, 'ID=debian\nVERSION_ID="13"\n'))["release"] == ["trixie"]
    assert parsed(select(tmp_path, "ID=debian\nVERSION_ID=12\n"))["release"] == ["bookworm"]


@pytest.mark.parametrize("text,name", [(UBUNTU, "Ubuntu 24.04.1 LTS"), (TESTING, "forky/sid"),
                                       (SID, "trixie/sid"), ('ID=fedora\nVERSION_ID=41\n', "ID=fedora"),
                                       ("", "ID=?")])
def test_refused(tmp_path, text, name):
    r = select(tmp_path, text)
    assert r.returncode == 1
    assert r.stdout == ""
    assert name in r.stderr and "is not supported" in r.stderr, r.stderr
    assert "Supported: Debian 12 (bookworm" in r.stderr and "Debian 13 (trixie)" in r.stderr
    assert "LAZARET_SETUP_RELEASE" in r.stderr and "packaging/apparmor/lazaret" in r.stderr


def test_unreadable(tmp_path):
    r = subprocess.run(["bash", str(SETUP), "--print-packages", str(tmp_path / "none")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "cannot read" in r.stderr and r.stdout == ""


def test_override(tmp_path):
    o = parsed(select(tmp_path, UBUNTU, {"LAZARET_SETUP_RELEASE": "trixie"}))
    assert o["release"] == ["trixie"] and "runsc" in o["package"]
    r = select(tmp_path, BOOKWORM, {"LAZARET_SETUP_RELEASE": "noble"})
    assert r.returncode == 1 and "names bookworm or trixie" in r.stderr


def test_os_release_is_not_run(tmp_path):
    # os-release is read, not sourced: nothing in it runs.
    mark = tmp_path / "ran"
    r = select(tmp_path, f'ID=$(touch {mark})\nVERSION_CODENAME=`touch {mark}`\n')
    assert r.returncode == 1
    assert not mark.exists()


def test_unknown_argument():
    r = subprocess.run(["bash", str(SETUP), "--bogus"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown argument --bogus" in r.stderr


def simulate(prefix, pkgs):
    r = subprocess.run([*prefix, "apt-get", "install", "--simulate", "--no-install-recommends", *pkgs],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return r.stdout


def host_release():
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    return "bookworm" if "VERSION_CODENAME=bookworm" in text and "ID=debian" in text else None


@pytest.mark.skipif(host_release() != "bookworm", reason="this host is not Debian 12")
def test_bookworm_names_exist_here(tmp_path):
    # setup.sh ran on this host, so bookworm-backports is in its sources.
    pkgs = parsed(select(tmp_path, BOOKWORM))["package"]
    simulate([], pkgs)


@pytest.mark.skipif(not os.environ.get("LAZARET_TEST_TRIXIE_ROOT"),
                    reason="LAZARET_TEST_TRIXIE_ROOT names no Debian 13 root filesystem")
def test_trixie_names_exist_in_trixie(tmp_path):
    root = Path(os.environ["LAZARET_TEST_TRIXIE_ROOT"])
    if os.geteuid() != 0:
        pytest.fail("chroot needs root")
    o = parsed(subprocess.run(["bash", str(SETUP), "--print-packages", str(root / "etc/os-release")],
                              capture_output=True, text=True, timeout=30))
    assert o["release"] == ["trixie"]
    out = simulate(["chroot", str(root)], o["package"])
    # runsc 2024 from trixie itself, not from any backports suite.
    assert "Inst runsc (0.0~2024" in out or "runsc is already the newest version (0.0~2024" in out, out[-2000:]
