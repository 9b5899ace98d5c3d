"""What the network tests share: a sandbox session fed and read line by line."""
import os
import queue
import socket
import struct
import subprocess
import threading
import time


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
