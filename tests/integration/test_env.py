"""Secrets in helper processes.

A profile's `env = { TOKEN = "env:VAR" }` makes VAR's value a secret of the
user's shell. It must reach the sandbox's process and nothing else: no
Lazaret helper (coordinator, Supervisor, slirp4netns, lazaret-router, runsc
and its gofer/sandbox/exec processes) may show it in /proc/PID/environ, nor
hold it in a memfd or a pipe that can still be read once the Domain runs.
Variables the profile does not reference reach no process at all.
"""
import array
import fcntl
import os
import signal
import subprocess
import termios
import uuid

import pexpect

from conftest import RUN_TIMEOUT, of_this_worker, wait_until

PROMPT = r"[#$] "
# argv[0] basenames of the host processes that belong to a Domain.
LAZARET_NAMES = ("lazaret-core", "lazaret-router", "slirp4netns", "runsc")


def run(lazaret, workspace, e, *args):
    return subprocess.run([lazaret, "run", "-p", "test", "--", *args], cwd=workspace, env=e,
                          capture_output=True, timeout=RUN_TIMEOUT)


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def lazaret_processes():
    """Our processes that belong to Lazaret, minus the clients (`lazaret run`,
    which legitimately hold the user's environment): {pid: argv}. Under
    pytest-xdist only this worker's (of_this_worker; all of them without
    it): another worker's test may hold a process whose fds are not ours
    to read at that moment."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{d}").st_uid != os.getuid():
                continue
            argv = cmdline(d)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if not argv:
            continue
        base = os.path.basename(argv[0])
        if not base.startswith(LAZARET_NAMES):
            continue
        if base.startswith("lazaret") and len(argv) > 1 and argv[1] == "run":
            continue
        if of_this_worker(int(d)):
            found[int(d)] = argv
    return found


def scan(pids, needles):
    """Where each needle (bytes) shows in the given processes: their
    environment, their memfds (read as the same user), and the unread bytes
    of pipes they hold beyond stdio (counted without consuming: FIONREAD; a
    pipe with bytes left is reported as such, since its content cannot be
    peeked). Returns (hits, unreadable): lists of (pid, what)."""
    hits, unreadable = [], []
    for pid in pids:
        try:
            base = os.path.basename(cmdline(pid)[0])
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except (FileNotFoundError, IndexError):
            continue
        except PermissionError:
            unreadable.append((pid, "environ"))
            env = b""
        for n in needles:
            if n in env:
                hits.append((pid, f"environ has {n!r}"))
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        except PermissionError:
            unreadable.append((pid, "fd"))
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path)
            except OSError:
                continue
            if target.startswith("/memfd:runsc-memory") and base == "runsc-sandbox":
                # The guest's RAM: the sandbox's own processes, which are
                # meant to hold the value (their environment lives there).
                continue
            if target.startswith("/memfd:"):
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except PermissionError:
                    unreadable.append((pid, f"fd {fd} {target}"))
                    continue
                for n in needles:
                    if n in data:
                        hits.append((pid, f"fd {fd} {target} holds {n!r}"))
            elif target.startswith("pipe:") and int(fd) > 2:
                try:
                    rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    buf = array.array("i", [0])
                    fcntl.ioctl(rfd, termios.FIONREAD, buf, True)
                    if buf[0] > 0:
                        hits.append((pid, f"fd {fd} {target} has {buf[0]} unread bytes"))
                finally:
                    os.close(rfd)
    return hits, unreadable


def test_scan_finds_a_secret_where_there_is_one(tmp_path):
    """Positive control: the scan is not blind to environ, memfds or pipes."""
    secret = f"lzctl-{uuid.uuid4().hex}".encode()
    mfd = os.memfd_create("control")
    os.write(mfd, b"x=" + secret)
    r, w = os.pipe()
    os.write(w, secret)
    env = {"PATH": "/usr/bin:/bin", "CONTROL": secret.decode()}
    child = subprocess.Popen(["sleep", "300"], env=env, pass_fds=(mfd, r, w))
    try:
        os.close(mfd)
        os.close(r)
        os.close(w)
        # Popen returns once the close-on-exec pipe closed, a moment before
        # the kernel has set up the new environment: wait for it.
        assert wait_until(lambda: open(f"/proc/{child.pid}/environ", "rb").read() != b"", timeout=10)
        hits, _ = scan([child.pid], [secret])
        whats = " ".join(w for _, w in hits)
        assert "environ" in whats, hits
        assert "/memfd:control" in whats, hits
        assert "unread bytes" in whats, hits
        # And a process without it is clean.
        clean = subprocess.Popen(["sleep", "300"], env={"PATH": "/usr/bin:/bin"})
        try:
            assert scan([clean.pid], [secret])[0] == []
        finally:
            clean.kill()
            clean.wait(timeout=10)
    finally:
        child.kill()
        child.wait(timeout=10)


def test_referenced_secret_reaches_only_the_sandbox(lazaret, env, workspace):
    tag = uuid.uuid4().hex
    secret, unref = f"lzsecret-{tag}", f"lzunref-{tag}"
    env.write_config(extra_profile='env = { TOKEN = "env:LZ_TEST_SECRET" }\n')
    e = env.environ(LZ_TEST_SECRET=secret, LZ_TEST_UNREFERENCED=unref)
    # A long-running session on pipes and a terminal session: both exec
    # paths of the coordinator are live while we look.
    long_run = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sleep", "600"], cwd=workspace, env=e,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tty = None
    try:
        assert wait_until(lambda: any("exec" in a for a in lazaret_processes().values()), timeout=120), \
            "the long-running session did not start"
        tty = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, encoding="utf-8",
                            timeout=60, dimensions=(24, 80))
        tty.expect(PROMPT)
        tty.sendline("echo \"$TOKEN\"; echo DO''NE")
        tty.expect("DONE")
        assert secret in tty.before

        # Inside: the referenced value is there, the unreferenced one is not.
        r = run(lazaret, workspace, e, "sh", "-c", 'echo "$TOKEN"')
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().strip() == secret
        r = run(lazaret, workspace, e, "env")
        assert r.returncode == 0, r.stderr
        assert secret.encode() in r.stdout
        assert unref.encode() not in r.stdout
        assert b"LZ_TEST_UNREFERENCED" not in r.stdout

        procs = lazaret_processes()
        names = sorted({os.path.basename(a[0]) + (" " + a[1] if len(a) > 1 and a[1].startswith("__") else "")
                        for a in procs.values()})
        # Every kind of helper is there to be looked at.
        for want in ("lazaret-core __coordinator", "lazaret-core __supervisor", "slirp4netns",
                     "lazaret-router", "runsc-gofer", "runsc-sandbox"):
            assert any(n.startswith(want) for n in names), (want, names)
        execs = [p for p, a in procs.items() if os.path.basename(a[0]) == "runsc" and "exec" in a]
        assert len(execs) >= 2, procs  # the pipes session and the terminal session
        hits, unreadable = scan(procs, [secret.encode(), unref.encode()])
        assert hits == [], [(p, procs[p][0], w) for p, w in hits]
        # Nothing we looked at was hidden from us.
        assert unreadable == [], [(p, procs[p][0], w) for p, w in unreadable]
        # No spec or hand-over memfd is left anywhere either.
        for p in procs:
            try:
                targets = [os.readlink(f"/proc/{p}/fd/{fd}") for fd in os.listdir(f"/proc/{p}/fd")]
            except FileNotFoundError:
                continue
            assert not [t for t in targets if t.startswith(("/memfd:lazaret-process", "/memfd:lazaret-envpass"))]
    finally:
        if tty is not None:
            tty.sendline("exit")
            tty.expect(pexpect.EOF)
        long_run.send_signal(signal.SIGTERM)
        long_run.communicate(timeout=60)
