"""An installed Lazaret (the Quick start's install step, scripts/install.sh):
run as root by scripts/test.sh, it installs a release build into a private
prefix, then runs the installed `lazaret` as the unprivileged test user from
another directory: `--version`, `doctor` and `run -- true` must work from the
installed files alone (the front end finds lazaret-core and the helpers in
PREFIX/libexec/lazaret, compiled in from meson's prefix), and the man pages
and bash completion must be where man and bash-completion look.

The install goes into a temporary prefix, not /usr/local: the test suite
must not depend on (or change) an install it did not do. Positive control:
with PREFIX/libexec/lazaret moved away the same binary fails, saying so.
"""
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES") or SRC / "tests" / "fixtures")
USER = os.environ.get("LAZARET_TEST_USER", "lztest")
HELPERS = ["lazaret-core", "lazaret-router", "lazaret-init", "lazaret-escalate", "lazaret-gate"]


@pytest.fixture(scope="module")
def inst():
    if os.geteuid() != 0:
        pytest.fail("run as root (scripts/test.sh does)")
    pw = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="lz-inst-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    prefix = base / "prefix"
    r = subprocess.run(["bash", str(SRC / "scripts" / "install.sh"), "--prefix", str(prefix),
                        "--builddir", str(base / "build")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"lazaret installed in {prefix}" in r.stdout
    # The user's side: a busybox image, a config naming it as the default
    # profile, a Storage Root, a runtime dir, a workspace elsewhere.
    home = base / "home"
    for d in (home / ".config" / "lazaret", base / "storage", base / "ws", base / "other"):
        d.mkdir(parents=True)
    subprocess.run(["sh", str(FIXTURES / "make-busybox-oci.sh"), str(base / "busybox")], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    (home / ".config" / "lazaret" / "config.toml").write_text(
        f'[storage]\ndata_root = "{base / "storage"}"\nlinger_seconds = 0\n\n'
        f'[profiles.default]\nimage = "oci:{base / "busybox"}"\npersistent_dirs = []\n')
    rt = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
    for p in (home, base / "storage", base / "ws", base / "other", rt):
        subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", str(p)], check=True)
    os.chmod(rt, 0o700)
    yield {"prefix": prefix, "base": base, "home": home, "rt": rt, "ws": base / "ws",
           "other": base / "other"}
    as_user({"prefix": prefix, "home": home, "rt": rt}, ["lazaret", "state", "reset", "--all", "--yes"], base / "ws")
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(rt, ignore_errors=True)


def as_user(inst, argv, cwd, timeout=300):
    """argv as the test user, with the installed bin/ first on PATH (as
    /usr/local/bin is) and nothing of the build tree anywhere."""
    env = ["env", "-i", f"PATH={inst['prefix']}/bin:/usr/local/bin:/usr/bin:/bin", f"HOME={inst['home']}",
           f"USER={USER}", "LANG=C.UTF-8", f"XDG_RUNTIME_DIR={inst['rt']}"]
    return subprocess.run(["runuser", "-u", USER, "--"] + env + argv, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_layout(inst):
    p = inst["prefix"]
    assert sorted(os.listdir(p / "bin")) == ["lazaret"]
    assert sorted(os.listdir(p / "libexec" / "lazaret")) == sorted(HELPERS)
    for h in HELPERS:
        assert os.access(p / "libexec" / "lazaret" / h, os.X_OK), h
    assert (p / "share" / "man" / "man1" / "lazaret.1").is_file()
    assert (p / "share" / "man" / "man5" / "lazaret.toml.5").is_file()
    assert (p / "share" / "bash-completion" / "completions" / "lazaret").is_file()
    # A release build: the test hooks' names are not in it.
    assert b"LAZARET_TEST_CRASH" not in (p / "libexec" / "lazaret" / "lazaret-core").read_bytes()


def test_installed_lazaret_works_from_any_directory(inst):
    r = as_user(inst, ["lazaret", "--version"], inst["other"])
    assert r.returncode == 0 and r.stdout.startswith("lazaret "), r.stdout + r.stderr
    r = as_user(inst, ["lazaret", "doctor"], inst["other"])
    line = next((ln for ln in r.stdout.splitlines() if "Lazaret helpers" in ln), "")
    assert line.startswith("[ok") and f"{inst['prefix']}/libexec/lazaret" in line, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    r = as_user(inst, ["lazaret", "run", "--", "true"], inst["ws"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = as_user(inst, ["lazaret", "run", "--", "sh", "-c", "echo hi from $LAZARET"], inst["ws"])
    assert r.returncode == 0 and r.stdout == "hi from 1\n", r.stdout + r.stderr
    r = as_user(inst, ["lazaret", "state", "ls"], inst["other"])
    assert r.returncode == 0 and str(inst["ws"]) in r.stdout, r.stdout + r.stderr
    # The installed completion offers that Domain's ID, from the installed lazaret.
    did = next(ln.split()[0] for ln in r.stdout.splitlines() if str(inst["ws"]) in ln)
    comp = inst["prefix"] / "share" / "bash-completion" / "completions" / "lazaret"
    script = (f"source {comp}; COMP_WORDS=(lazaret state inspect ''); COMP_CWORD=3; _lazaret; "
              "printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = as_user(inst, ["bash", "--norc", "-c", script], inst["other"])
    assert did in r.stdout.split(), r.stdout + r.stderr


def test_control_without_the_helpers_it_fails(inst):
    """Positive control: the same installed binary without PREFIX/libexec/lazaret."""
    lib = inst["prefix"] / "libexec" / "lazaret"
    away = inst["base"] / "libexec-away"
    lib.rename(away)
    try:
        r = as_user(inst, ["lazaret", "doctor"], inst["other"])
        assert r.returncode != 0
        assert "lazaret-core not found" in r.stderr and "reinstall lazaret" in r.stderr, r.stdout + r.stderr
        r = as_user(inst, ["lazaret", "run", "--", "true"], inst["ws"])
        assert r.returncode != 0 and "reinstall lazaret" in r.stderr, r.stdout + r.stderr
        # Only the router missing: doctor (run by lazaret-core) names it.
        lib.mkdir()
        shutil.copy2(away / "lazaret-core", lib / "lazaret-core")
        r = as_user(inst, ["lazaret", "doctor"], inst["other"])
        line = next((ln for ln in r.stdout.splitlines() if "Lazaret helpers" in ln), "")
        assert r.returncode != 0 and line.startswith("[FAIL") and "lazaret-router not found" in line, r.stdout
    finally:
        shutil.rmtree(lib, ignore_errors=True)
        away.rename(lib)
    r = as_user(inst, ["lazaret", "doctor"], inst["other"])
    assert r.returncode == 0, r.stdout
