"""Shared fixtures for Lazaret's integration tests.

These tests drive the real `lazaret` binary, with the real runsc, as an
unprivileged user (scripts/test.sh runs them as the test user). Nothing is
mocked. Every wait is bounded.
"""
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAZARET = os.environ.get("LAZARET_BIN") or str(ROOT / "build" / "lazaret")
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES") or ROOT / "tests" / "fixtures")

RUN_TIMEOUT = 120

# Under pytest-xdist (scripts/test.sh runs this suite with -n) each worker is
# its own process, named gw0, gw1, ... Everything a test makes is under its
# worker's basetemp (.../popen-gwN/...) and its runtime directories are
# /tmp/lzrtN-*, so every Lazaret process of a test names its worker on its
# command line (or descends from one that does): user_processes() sees only
# the processes of this worker, as a serial run sees only those of the test.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WNUM = WORKER[2:] if re.fullmatch(r"gw[0-9]+", WORKER) else ""
_MARK = re.compile(rb"/popen-gw([0-9]+)/|/tmp/lzrt([0-9]+)-")


def runtime_dir() -> Path:
    """A fresh, short runtime directory (Unix socket paths: at most 108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix=f"lzrt{_WNUM}-" if _WNUM else "lzrt", dir="/tmp"))
    os.chmod(d, 0o700)
    return d


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: needs the real default image (mmdebstrap bootstrap)")
    config.addinivalue_line("markers", "network: needs the Debian mirror and the npm registry (agent images)")
    config.addinivalue_line("markers", "measure: a measurement that prints figures, not a test: skipped unless "
                            "selected with -m measure")
    config.addinivalue_line("markers", "serial: must run alone, not beside other tests (under pytest-xdist it "
                            "is left out; scripts/test.sh runs it in a second pass, -m serial, without -n)")
    if os.geteuid() == 0:
        raise pytest.UsageError("run the integration tests as an unprivileged user (scripts/test.sh does)")


@pytest.fixture(scope="session")
def lazaret():
    if not os.access(LAZARET, os.X_OK):
        pytest.fail(f"lazaret binary not found at {LAZARET}: build first (scripts/test.sh)")
    return LAZARET


def pytest_collection_modifyitems(config, items):
    """With -n (pytest-xdist), tests marked serial are left out: they must
    not run beside others. scripts/test.sh and scripts/itest.sh -j run them
    afterwards in a pass of their own (-m serial, without -n)."""
    if not getattr(config.option, "numprocesses", None):
        return
    alone = [i for i in items if i.get_closest_marker("serial")]
    if alone:
        config.hook.pytest_deselected(items=alone)
        items[:] = [i for i in items if not i.get_closest_marker("serial")]


@pytest.fixture(scope="session")
def storage(tmp_path_factory):
    """A Storage Root shared by the whole session, so images are prepared once.

    Under pytest-xdist every worker shares one Storage Root (in the run's
    basetemp), so the Debian and agent images are built once per run, not
    once per worker: Lazaret itself runs one bootstrap at a time per Storage
    Root and the others wait for it. Tests that list or count what is in
    the Storage Root make their own (test_state_cli.py, test_image_gc.py,
    test_anchor.py, test_volumes.py).

    LAZARET_TEST_STORAGE names a directory to use instead: scripts/test.sh
    passes one shared by its parallel and serial passes (and bootstrapped
    while the earlier stages run); in development it is kept across runs,
    so the Debian bootstrap happens once, not per run."""
    keep = os.environ.get("LAZARET_TEST_STORAGE")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    if WORKER:
        shared = tmp_path_factory.getbasetemp().parent / "storage"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("storage")


@pytest.fixture(scope="session")
def busybox_image(tmp_path_factory):
    out = tmp_path_factory.mktemp("images") / "busybox-oci"
    subprocess.run(["sh", str(FIXTURES / "make-busybox-oci.sh"), str(out)], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    return out


class Env:
    """An isolated user environment: its own XDG dirs and config file."""

    def __init__(self, base: Path, storage: Path, image: str):
        self.base = base
        self.home = base / "home"
        self.config_home = base / "config"
        # A short runtime directory: Unix socket paths are limited to 108 bytes.
        self.runtime = runtime_dir()
        for d in (self.home, self.config_home):
            d.mkdir(parents=True, exist_ok=True)
        self.storage = storage
        self.image = image
        self.config = self.config_home / "lazaret" / "config.toml"
        self.write_config()

    def write_config(self, extra_profile="", extra="", linger=0):
        """linger: [storage] linger_seconds (0 here, so that each test's
        Domain stops when its last session ends; test_linger.py tests it)."""
        self.config.parent.mkdir(parents=True, exist_ok=True)
        # No persistent dirs unless a test asks for them (a profile without
        # the key gets the default five, each a State Anchor layer).
        if "persistent_dirs" not in extra_profile:
            extra_profile = "persistent_dirs = []\n" + extra_profile
        self.config.write_text(
            f'[storage]\ndata_root = "{self.storage}"\nlinger_seconds = {linger}\n\n'
            f'{extra}\n'
            f'[profiles.test]\nimage = "{self.image}"\n{extra_profile}\n')

    def environ(self, **kw):
        e = {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.config_home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            # The host's CA certificates (host_ca_certificates) come from a
            # directory of the test's, empty unless a test fills it.
            "LAZARET_TEST_HOST_CA_DIR": str(self.base / "host-ca"),
        }
        # LAZARET_TEST_FUSE=classic in the tests' own environment runs
        # every test's routers on /dev/fuse where FUSE over io_uring is on
        # (test_fuse_transport.py tests both).
        if os.environ.get("LAZARET_TEST_FUSE"):
            e["LAZARET_TEST_FUSE"] = os.environ["LAZARET_TEST_FUSE"]
        e.update(kw)
        return e


def git(ws, *args, check=True):
    """The host's git in the work tree ws, with the tests' clean environment."""
    return subprocess.run(["git", "-C", str(ws)] + list(args), check=check, env=git_env(), capture_output=True,
                          text=True)


def make_git_repo(path: Path):
    path.mkdir(parents=True, exist_ok=True)
    env = git_env()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "README").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "initial"], check=True, env=env)
    return path


def git_env(**kw):
    e = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid",
        "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.invalid",
    }
    e.update(kw)
    return e


@pytest.fixture
def env(tmp_path, storage, busybox_image):
    return Env(tmp_path / "env", storage, f"oci:{busybox_image}")


@pytest.fixture
def workspace(tmp_path):
    return make_git_repo(tmp_path / "ws")


def lz_run(lazaret, env, workspace, args, input=None, timeout=RUN_TIMEOUT, profile="test", **kw):
    cmd = [lazaret, "run"] + (["-p", profile] if profile else []) + ["--"] + list(args)
    return subprocess.run(cmd, cwd=workspace, env=env.environ(), input=input, capture_output=True,
                          timeout=timeout, **kw)


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def of_this_worker(pid: int) -> bool:
    """Whether a process belongs to this pytest-xdist worker's tests (always
    true without xdist). The first process up its parent chain that names
    a worker decides: by a path on its command line (.../popen-gwN/...,
    /tmp/lzrtN-...), by being this worker, or by being another worker (a
    child of the same xdist controller). A process that nothing attributes
    (slirp4netns whose coordinator is gone, say) counts for every worker, as
    it would in a serial run: never hidden."""
    if not WORKER:
        return True
    me, controller = os.getpid(), os.getppid()
    p, first = pid, True
    for _ in range(128):
        if p == me:
            return True
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
            parent = _ppid(p)
        except (OSError, ValueError, IndexError):
            return not first  # the process itself is gone: not running
        m = _MARK.search(cmd)
        if m:
            return (m.group(1) or m.group(2)).decode() == _WNUM
        argv = cmd.split(b"\0")[:-1]
        if first and argv and argv[0].endswith(b"slirp4netns") and len(argv) >= 3 and argv[-2].isdigit() \
                and os.path.exists(f"/proc/{int(argv[-2])}"):
            # slirp4netns names no path: its last arguments are the PID
            # whose network namespace it serves (the Supervisor) and the
            # interface; its coordinator may be gone (a crash test).
            return of_this_worker(int(argv[-2]))
        if parent == controller:
            return False  # a child of another worker
        if parent <= 1:
            return True
        p, first = parent, False
    return True


def user_processes(pattern: str):
    """PIDs of our own processes whose command line contains pattern (under
    pytest-xdist: those of this worker's tests, of_this_worker)."""
    out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split() if int(p) != os.getpid() and of_this_worker(int(p))]


def wait_until(pred, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def stuck_report() -> str:
    """What this worker's Lazaret and runsc processes are doing: each
    thread's state and the kernel function it waits in (wchan), read before
    they are killed. A hang (a FUSE request nobody answers, a lock) shows
    here: which process waits, in which thread, on what."""
    lines = []
    pids = sorted(set(user_processes("lazaret") + user_processes("runsc")))
    for pid in pids[:40]:
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"{pid} {cmd[:160]}")
            waits = {}
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    stat = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[0]
                    comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
                    wchan = open(f"/proc/{pid}/task/{tid}/wchan").read().strip() or "-"
                except OSError:
                    continue
                waits.setdefault(f"{stat} {wchan} ({comm})", []).append(tid)
            for k, tids in sorted(waits.items()):
                lines.append(f"    {len(tids):3d} thread(s) {k}")
        except OSError:
            continue
    return "\n".join(lines)


@pytest.fixture(autouse=True)
def no_leftover_sandboxes(request):
    """After each test every Domain it started must be torn down."""
    yield
    ok = wait_until(lambda: not user_processes("runsc"), timeout=45)
    if not ok:
        report = stuck_report()
        for pid in user_processes("lazaret-core __coordinator"):
            os.kill(pid, signal.SIGKILL)
        for pid in user_processes("runsc"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail("runsc processes were still running 45 s after the test; what they were doing:\n" + report)


@pytest.fixture(scope="session")
def debian(tmp_path_factory, storage, lazaret):
    """An environment on the built-in Debian image, bootstrapped once."""
    e = Env(tmp_path_factory.mktemp("debian-env"), storage, "builtin:debian-bookworm")
    ws = make_git_repo(tmp_path_factory.mktemp("warm") / "ws")
    r = lz_run(lazaret, e, ws, ["git", "--version"], timeout=900)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return e


def domain_dirs_for(env, workspace):
    """The Domain Roots whose stores record this workspace."""
    hits = []
    for d in (Path(env.storage) / "domains").iterdir():
        db = d / "domain.db"
        if not db.exists():
            continue
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'workspace'").fetchone()
        except sqlite3.Error:
            # Another worker's store being made (no schema yet): not this
            # workspace's, whose Domain has already run.
            row = None
        finally:
            con.close()
        if row and row[0] == str(workspace):
            hits.append(d)
    return hits


def domain_dir_for(env, workspace):
    """The Domain Root whose store records this workspace."""
    hits = domain_dirs_for(env, workspace)
    assert len(hits) == 1, hits
    return hits[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran in a workspace keeps the end of its Domains'
    coordinator.log in the report: the Storage Root is gone after the run,
    and a Host Coordinator that "ended unexpectedly" says why only there."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    env, ws = item.funcargs.get("env"), item.funcargs.get("workspace")
    if env is None or ws is None or not hasattr(env, "storage"):
        return
    try:
        found = domain_dirs_for(env, ws)
        for d in found:
            log = d / "coordinator.log"
            if log.exists():
                rep.sections.append((f"coordinator.log of {d.name[:12]} (last 6000 bytes)",
                                     log.read_text(errors="replace")[-6000:]))
    except (OSError, sqlite3.Error) as e:
        rep.sections.append(("coordinator.log", f"not read: {e}"))
