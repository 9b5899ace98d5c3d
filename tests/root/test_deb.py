"""The Debian package (scripts/build-deb): run as root by scripts/test.sh,
it builds lazaret_<version>-1_amd64.deb from this tree, checks its control
fields and lintian, installs it with `apt-get install ./lazaret_*.deb` into
/usr, runs the installed /usr/bin/lazaret as the unprivileged test user
(`doctor`, `run -- true` on a busybox image), then removes the package
(its conffile, the AppArmor profile where it has one, stays until the purge)
and purges it, and checks that none of its files is left.

The tests run in file order (install, use, control, removal) on one
module-scoped install. /usr/local may hold a lazaret of scripts/install.sh:
every command names /usr/bin/lazaret, PATH has no /usr/local, and doctor
must report the helpers in /usr/libexec/lazaret. A lazaret package that was
installed before the test is not replaced (the test skips): the test
removes what it installs. Positive controls: with /usr/libexec/lazaret's
helpers moved away the installed binary fails, saying so; the leftover check
finds the package's files before the removal.
"""
import fcntl
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES") or SRC / "tests" / "fixtures")
USER = os.environ.get("LAZARET_TEST_USER", "lztest")
LIBEXEC = Path("/usr/libexec/lazaret")
HELPERS = ["lazaret-core", "lazaret-router", "lazaret-init", "lazaret-escalate", "lazaret-gate"]
APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]


def run(argv, timeout=600):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def pkg_installed():
    r = run(["dpkg-query", "-W", "-f=${db:Status-Status}", "lazaret"])
    return r.returncode == 0 and r.stdout == "installed"


def leftovers(files):
    """The package's regular files still on disk (its directories may be
    shared, e.g. /usr/bin)."""
    return [f for f in files if os.path.lexists(f) and not os.path.isdir(f)]


@pytest.fixture(scope="module")
def deb():
    if os.geteuid() != 0:
        pytest.fail("run as root (scripts/test.sh does)")
    if pkg_installed():
        pytest.skip("a lazaret package is already installed: this test installs and removes its own")
    pw = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="lz-deb-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    r = run(["bash", str(SRC / "scripts" / "build-deb"), "--builddir", str(base / "build"),
             "--outdir", str(base / "out")], timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.is_file() and re.fullmatch(r"lazaret_[0-9.]+-[0-9]+_amd64\.deb", path.name), r.stdout
    os.chmod(base / "out", 0o755)
    os.chmod(path, 0o644)
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
    d = {"deb": path, "base": base, "home": home, "rt": rt, "ws": base / "ws", "other": base / "other",
         "files": []}
    yield d
    if pkg_installed():
        wait_domains_stopped(d)
        as_user(d, ["/usr/bin/lazaret", "state", "reset", "--all", "--yes"], base / "ws")
        run(APT + ["purge", "lazaret"])
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(rt, ignore_errors=True)


def wait_domains_stopped(d, timeout=90):
    """With linger_seconds = 0 a Domain stops on its own after its last
    session, asynchronously: its coordinator holds DATA_ROOT/domains/ID/lock
    until its teardown is done (as `lazaret stop` waits, control.c). Once
    the Domain is no longer published, `stop` says it is not running while
    the teardown still goes on, so wait for the lock itself."""
    def expire(signum, frame):
        raise TimeoutError(f"a Domain of {d['base']} did not stop within {timeout} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(timeout)
    locks = sorted((d["base"] / "storage" / "domains").glob("*/lock"))
    try:
        for lock in locks:
            with open(lock, "rb+") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                fcntl.flock(f, fcntl.LOCK_UN)
        return len(locks)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def as_user(d, argv, cwd, timeout=300):
    """argv as the test user, with no /usr/local and nothing of the build
    tree on PATH."""
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={d['home']}", f"USER={USER}", "LANG=C.UTF-8",
           f"XDG_RUNTIME_DIR={d['rt']}"]
    return subprocess.run(["runuser", "-u", USER, "--"] + env + argv, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_control_fields_and_lintian(deb):
    f = {}
    for k in ("Package", "Version", "Architecture", "Maintainer", "Depends", "Section", "Priority",
              "Description"):
        r = run(["dpkg-deb", "-f", str(deb["deb"]), k])
        assert r.returncode == 0 and r.stdout.strip(), (k, r.stderr)
        f[k] = r.stdout.strip()
    version = re.search(r"version : '([^']+)'", (SRC / "meson.build").read_text()).group(1)
    assert f["Package"] == "lazaret" and f["Version"] == f"{version}-1" and f["Architecture"] == "amd64"
    assert deb["deb"].name == f"lazaret_{version}-1_amd64.deb"
    deps = {re.split(r"[ (]", d.strip())[0]: d.strip() for d in f["Depends"].split(",")}
    for p in ("runsc", "slirp4netns", "uidmap", "fuse3", "git", "mmdebstrap", "libc6", "libsodium23",
              "libsqlite3-0", "libjansson4", "libarchive13", "libmnl0"):
        assert p in deps, (p, f["Depends"])
    # The release's libfuse3 (libfuse3-3 on Debian 12, libfuse3-4 on 13) and
    # libgit2 (dlopened: named by build-deb, as libgit2-dev depends on it).
    assert [p for p in deps if re.fullmatch(r"libfuse3-\d+", p)], f["Depends"]
    git2 = re.search(r"libgit2-[0-9][0-9.]*[0-9]", run(["dpkg-query", "-W", "-f=${Depends}", "libgit2-dev"]).stdout)
    assert git2 and git2.group(0) in deps, f["Depends"]
    # bookworm's own runsc (0.0~20221219) must not satisfy it, backports' must.
    assert re.fullmatch(r"runsc \(>= 0\.0~2024\d{4}\)", deps["runsc"]), deps["runsc"]
    for old, ok in (("0.0~20221219.0-3", False), ("0.0~20240729.0-4~bpo12+2", True)):
        want = deps["runsc"][len("runsc (>= "):-1]
        r = subprocess.run(["dpkg", "--compare-versions", old, "ge", want])
        assert (r.returncode == 0) == ok, (old, want)
    if shutil.which("lintian"):
        # As the test user: lintian refuses to be trusted as root.
        # From the package's directory: the checkout may be one the test
        # user cannot enter (a clone in /root is mode 0700).
        r = subprocess.run(["runuser", "-u", USER, "--", "lintian", "--pedantic", str(deb["deb"])],
                           cwd=deb["deb"].parent, capture_output=True, text=True, timeout=300)
        tags = [ln for ln in r.stdout.splitlines() if re.match(r"^[EWIP]: ", ln)]
        assert r.returncode == 0 and not tags, r.stdout + r.stderr


def test_apt_install(deb):
    r = run(APT + ["install", str(deb["deb"])])
    assert r.returncode == 0, r.stdout + r.stderr
    assert pkg_installed()
    deb["files"] = run(["dpkg-query", "-L", "lazaret"]).stdout.split()
    for f in (["/usr/bin/lazaret"] + [str(LIBEXEC / h) for h in HELPERS] +
              ["/usr/share/man/man1/lazaret.1.gz", "/usr/share/man/man5/lazaret.toml.5.gz",
               "/usr/share/man/man1/lazaret-escalate.1.gz",
               "/usr/share/bash-completion/completions/lazaret",
               "/usr/share/doc/lazaret/copyright", "/usr/share/doc/lazaret/changelog.Debian.gz"]):
        assert f in deb["files"] and os.path.isfile(f), f
    for h in HELPERS:
        assert os.access(LIBEXEC / h, os.X_OK), h
    # The AppArmor profile, a conffile, except in a package built on Debian 12
    # (whose AppArmor 3.0 cannot parse it; docs/packaging.md).
    bookworm = "VERSION_CODENAME=bookworm" in Path("/etc/os-release").read_text()
    profile = "/etc/apparmor.d/lazaret"
    assert (profile in deb["files"]) == (not bookworm), deb["files"]
    if not bookworm:
        assert Path(profile).read_bytes() == (SRC / "packaging" / "apparmor" / "lazaret").read_bytes()
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "lazaret"]).stdout.split()
        assert conffiles[:1] == [profile], conffiles
    # A release build: the test hooks' names are not in it.
    assert b"LAZARET_TEST_CRASH" not in (LIBEXEC / "lazaret-core").read_bytes()
    r = run(["dpkg", "--verify", "lazaret"])
    assert r.returncode == 0 and not r.stdout, r.stdout + r.stderr


def test_installed_lazaret_works(deb):
    r = as_user(deb, ["/usr/bin/lazaret", "--version"], deb["other"])
    assert r.returncode == 0 and r.stdout.startswith("lazaret "), r.stdout + r.stderr
    r = as_user(deb, ["/usr/bin/lazaret", "doctor"], deb["other"])
    line = next((ln for ln in r.stdout.splitlines() if "Lazaret helpers" in ln), "")
    assert line.startswith("[ok") and "in /usr/libexec/lazaret" in line, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    r = as_user(deb, ["/usr/bin/lazaret", "run", "--", "true"], deb["ws"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = as_user(deb, ["/usr/bin/lazaret", "run", "--", "sh", "-c", "echo hi from $LAZARET"], deb["ws"])
    assert r.returncode == 0 and r.stdout == "hi from 1\n", r.stdout + r.stderr
    # The installed completion, found where bash-completion looks, offers
    # the installed lazaret's Domain IDs.
    r = as_user(deb, ["/usr/bin/lazaret", "state", "ls"], deb["other"])
    assert r.returncode == 0 and str(deb["ws"]) in r.stdout, r.stdout + r.stderr
    did = next(ln.split()[0] for ln in r.stdout.splitlines() if str(deb["ws"]) in ln)
    script = ("source /usr/share/bash-completion/completions/lazaret; "
              "COMP_WORDS=(lazaret state inspect ''); COMP_CWORD=3; _lazaret; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = as_user(deb, ["bash", "--norc", "-c", script], deb["other"])
    assert did in r.stdout.split(), r.stdout + r.stderr


def test_control_without_the_helpers_it_fails(deb):
    """Positive control: the installed binary without its helpers fails,
    and dpkg --verify sees the damage."""
    away = deb["base"] / "libexec-away"
    away.mkdir()
    try:
        shutil.move(str(LIBEXEC / "lazaret-router"), str(away / "lazaret-router"))
        r = as_user(deb, ["/usr/bin/lazaret", "doctor"], deb["other"])
        line = next((ln for ln in r.stdout.splitlines() if "Lazaret helpers" in ln), "")
        assert r.returncode != 0 and line.startswith("[FAIL") and "lazaret-router not found" in line, r.stdout
        assert "lazaret-router" in run(["dpkg", "--verify", "lazaret"]).stdout
        shutil.move(str(LIBEXEC / "lazaret-core"), str(away / "lazaret-core"))
        r = as_user(deb, ["/usr/bin/lazaret", "run", "--", "true"], deb["ws"])
        assert r.returncode != 0 and "reinstall lazaret" in r.stderr, r.stdout + r.stderr
    finally:
        for f in away.iterdir():
            shutil.move(str(f), str(LIBEXEC / f.name))
    r = as_user(deb, ["/usr/bin/lazaret", "doctor"], deb["other"])
    assert r.returncode == 0, r.stdout


def test_apt_remove_leaves_nothing(deb):
    assert deb["files"], "test_apt_install did not run"
    # The Domain of test_installed_lazaret_works (the wait is not vacuous).
    assert wait_domains_stopped(deb) >= 1
    r = as_user(deb, ["/usr/bin/lazaret", "state", "reset", "--all", "--yes"], deb["ws"])
    assert r.returncode == 0, r.stdout + r.stderr
    # Positive control of the check below: it sees the installed files.
    assert "/usr/bin/lazaret" in leftovers(deb["files"])
    r = run(APT + ["remove", "lazaret"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert not pkg_installed()
    # Only its conffiles stay (Debian policy), until the purge.
    assert leftovers(deb["files"]) == [f for f in deb["files"] if f.startswith("/etc/")]
    # dpkg, not apt: without conffiles nothing of it is known any more.
    r = run(["dpkg", "--purge", "lazaret"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert leftovers(deb["files"]) == []
    assert not LIBEXEC.exists() and not Path("/usr/share/doc/lazaret").exists()
