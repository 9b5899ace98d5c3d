"""The suite's own isolation under pytest-xdist (conftest.of_this_worker):
a worker sees its own tests' processes, never another worker's, and never
hides a process that nothing attributes. No sandbox: stand-in processes
whose command lines carry the paths the real ones do (docs/hacking.md)."""
import os
import signal
import subprocess

import pytest

import conftest
from conftest import user_processes, wait_until


@pytest.fixture
def as_worker(monkeypatch):
    """Pretend to be worker gw7 (the attribution is the same code with and
    without -n; only WORKER switches it on)."""
    monkeypatch.setattr(conftest, "WORKER", "gw7")
    monkeypatch.setattr(conftest, "_WNUM", "7")


@pytest.fixture
def spawn(tmp_path):
    procs = []

    def start(argv0, *args, detach=False):
        """A bash that sleeps, whose argv is argv0, -c, its script, args;
        detach: reparented away from this process (double fork), as a
        daemon or an orphan is."""
        run = 'n=$1; shift; exec -a "$n" bash -c "sleep 60; :" "$@"'
        if detach:
            pidfile = tmp_path / f"pid{len(procs)}"
            subprocess.run(["bash", "-c", f'(bash -c \'{run}\' _ "$@" </dev/null >/dev/null 2>&1 & echo $! > {pidfile})',
                            "_", argv0, *args], check=True, timeout=30)
            pid = int(pidfile.read_text())
        else:
            p = subprocess.Popen(["bash", "-c", run, "_", argv0, *args])
            procs.append(p)
            pid = p.pid
        assert wait_until(lambda: argv0.encode() in open(f"/proc/{pid}/cmdline", "rb").read(), timeout=10)
        if detach:
            procs.append(pid)
        return pid
    yield start
    for p in procs:
        try:
            os.kill(p if isinstance(p, int) else p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not isinstance(p, int):
            p.wait(timeout=30)


def test_worker_sees_its_own_processes_not_anothers(as_worker, spawn):
    mine = spawn("lzfake-runsc --root /tmp/lzrt7-abc/lazaret/x/runsc")
    theirs = spawn("lzfake-runsc --root /tmp/lzrt17-abc/lazaret/x/runsc", detach=True)
    theirs2 = spawn("lzfake-runsc --workspace /tmp/pytest-of-u/pytest-1/popen-gw1/t0/ws", detach=True)
    mine2 = spawn("lzfake-runsc --workspace /tmp/pytest-of-u/pytest-1/popen-gw7/t0/ws", detach=True)
    seen = user_processes("lzfake-runsc")
    assert mine in seen and mine2 in seen, seen
    # Positive control of the hiding: another worker's are among our user's
    # processes (pgrep finds them), only the attribution leaves them out.
    everyone = [int(p) for p in subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "lzfake-runsc"],
                                               capture_output=True, text=True).stdout.split()]
    assert theirs in everyone and theirs2 in everyone, everyone
    assert theirs not in seen and theirs2 not in seen, seen


def test_unattributed_processes_count_for_every_worker(as_worker, spawn):
    child = spawn("lzfake-helper --configure tap0")  # a child of this worker: by its parent
    orphan = spawn("lzfake-helper --configure tap0", detach=True)  # nothing says whose
    seen = user_processes("lzfake-helper")
    assert child in seen and orphan in seen, seen


def test_slirp4netns_goes_with_the_process_it_serves(as_worker, spawn):
    theirs_sup = spawn("lzfake-sup --state /tmp/lzrt3-abc/lazaret/x/runsc", detach=True)
    mine_sup = spawn("lzfake-sup --state /tmp/lzrt7-abc/lazaret/x/runsc", detach=True)
    theirs = spawn("/usr/bin/slirp4netns", "--configure", str(theirs_sup), "tap0", detach=True)
    mine = spawn("/usr/bin/slirp4netns", "--configure", str(mine_sup), "tap0", detach=True)
    assert conftest.of_this_worker(mine) and not conftest.of_this_worker(theirs)
    # Once the process it serves is gone, nothing attributes it: seen by all.
    os.kill(theirs_sup, signal.SIGKILL)
    assert wait_until(lambda: not os.path.exists(f"/proc/{theirs_sup}") or
                      b"Z" in open(f"/proc/{theirs_sup}/stat", "rb").read().rsplit(b")", 1)[1][:3], timeout=10)
    assert wait_until(lambda: conftest.of_this_worker(theirs), timeout=10)


def test_without_xdist_every_process_is_seen(monkeypatch, spawn):
    monkeypatch.setattr(conftest, "WORKER", "")
    monkeypatch.setattr(conftest, "_WNUM", "")
    theirs = spawn("lzfake-runsc --root /tmp/lzrt17-abc/lazaret/x/runsc", detach=True)
    assert theirs in user_processes("lzfake-runsc")
