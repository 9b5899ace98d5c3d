"""What the network tests share: the test hosts' world (namespaces, their
processes, their logs), a sandbox session fed and read line by line."""
import json
import os
import queue
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path


class Session:
    """A process (a `lazaret run` as the test user) whose stdin the test
    feeds and whose output it reads line by line, each wait bounded."""

    def __init__(self, argv, cwd):
        self.p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def until(self, marker, timeout):
        """Reads lines until one is marker (or, with a trailing *, starts
        with it): that line, or None at the end or the timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if line == marker or (marker.endswith("*") and line.startswith(marker[:-1])):
                return line
        return None

    def send(self, text):
        self.p.stdin.write(text)
        self.p.stdin.flush()

    def out(self):
        return "\n".join(self.lines)

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=10)


def user_pids(uid, pattern):
    """The test user's processes whose command line matches pattern."""
    r = subprocess.run(["pgrep", "-u", str(uid), "-f", pattern], capture_output=True, text=True)
    return r.stdout.split()


def quiet(user_env):
    """The body of each module's `quiet` fixture: no Domain of the test user
    is left from an earlier test (they stop with linger_seconds = 0), so the
    enforcement namespace a test reads is its own; whatever a test leaves
    (a coordinator's crash) is ended by pid afterwards."""
    def settle(t):
        end = time.monotonic() + t
        while user_pids(user_env["uid"], "runsc|slirp4netns|lazaret") and time.monotonic() < end:
            time.sleep(0.1)
        return user_pids(user_env["uid"], "runsc|slirp4netns|lazaret")
    assert settle(45) == [], "processes of an earlier test are still running"
    yield user_env
    for pid in settle(45):
        try:
            os.kill(int(pid), 9)
        except ProcessLookupError:
            pass


def dns_answers(server, name, addr):
    """Does server answer an A query for name with addr (and nothing else)?"""
    q = struct.pack(">HHHHHH", 0x4C5A, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        try:
            s.sendto(q, (server, 53))
            msg = s.recv(4096)
        except OSError:
            return False
    return msg[:2] == q[:2] and msg[6:8] == b"\0\1" and msg.endswith(socket.inet_aton(addr))


def sh(*args, timeout=60, **kw):
    """Runs a command that must succeed; its output in the failure."""
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return r


class World:
    """Test hosts, each a network namespace of its own joined to the host by
    a veth pair (`v-NS` on the host, `eth0` inside), and the processes
    serving there. Whatever an earlier run left of it (same names) is
    removed first; end() removes it again, processes first."""

    def __init__(self, namespaces, links=()):
        self.namespaces, self.links, self.procs = list(namespaces), list(links), []
        self.end()

    def end(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)
            if p.stdout:
                p.stdout.close()
        self.procs = []
        for dev in self.links:
            subprocess.run(["ip", "link", "del", dev], capture_output=True)
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            subprocess.run(["ip", "link", "del", f"v-{ns}"], capture_output=True)

    def host(self, ns, hostip, peers, route=True):
        """Namespace ns with the addresses peers on its eth0 (/24), hostip on
        the host's end; with route, its default route via the host."""
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"v-{ns}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{hostip}/24", "dev", f"v-{ns}")
        sh("ip", "link", "set", f"v-{ns}", "up")
        for a in peers:
            sh("ip", "-n", ns, "addr", "add", f"{a}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        if route:
            sh("ip", "-n", ns, "route", "add", "default", "via", hostip)

    def start(self, cmd, expect=None, stderr=subprocess.STDOUT):
        """Starts cmd; with expect, waits for its first line to be that
        (servers print one once they listen)."""
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.procs.append(p)
        if expect is not None:
            line = p.stdout.readline().strip()
            assert line == expect, f"{cmd[:8]}: {line}"
        return p

    @staticmethod
    def wait_answered(proc, answered, what, timeout=10):
        """Polls answered() until true (the world's resolver answering),
        bounded; proc is the resolver, whose output a failure shows."""
        end = time.monotonic() + timeout
        while not answered():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < end, f"{what} did not answer in {timeout} s"
            time.sleep(0.1)


class LogFile:
    """A log a world's server appends to; mark() and read(since) give what
    was added since a point of the test."""

    def __init__(self, path):
        self.path = path

    def mark(self):
        return self.path.stat().st_size

    def read(self, since=0):
        with open(self.path, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")


class FakeLog(LogFile):
    """The fake model servers' request log (one JSON line per request)."""

    def requests(self, since=0):
        return [json.loads(ln) for ln in self.read(since).splitlines() if ln.startswith("{")]


def user_base(prefix, subdirs):
    """A test's directory under /tmp (mode 0755) with subdirs made in it;
    its `run` (the user's XDG_RUNTIME_DIR) mode 0700. give_to() hands it
    to the test user once filled."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(base, 0o755)
    for sub in subdirs:
        (base / sub).mkdir(parents=True, exist_ok=True)
    if "run" in subdirs:
        (base / "run").chmod(0o700)
    return base


def give_to(base, user):
    """base and everything in it owned by user."""
    shutil.chown(base, user, user)
    for p in base.rglob("*"):
        shutil.chown(p, user, user)


def image_builder(argv_as_user, cwd, lazaret, timeout=1800):
    """need(agent): builds the agent's image once, unless the Storage Root
    holds it (`image bootstrap --agent` keeps a stored image);
    argv_as_user(argv) runs argv as the test user with the build
    configuration."""
    done = set()

    def need(agent):
        if agent in done:
            return
        r = subprocess.run(argv_as_user([lazaret, "image", "bootstrap", "--agent", agent]), cwd=cwd,
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr[-3000:]
        done.add(agent)
    return need
