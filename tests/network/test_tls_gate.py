"""The TLS gate (issue 24 §1; docs/network.md "The TLS gate"), attacked from
inside the sandbox (DESIGN.md §7).

Run as root, like test_names.py, with a world of its own (other namespace
names and addresses, so the two modules never share a host):

  lzg-dns  198.18.61.2  dnsmasq, authoritative for the test's names only
  lzg-web  198.18.62.2  a TLS server on 443 (a certificate of its own; the
                        sandbox's hand-made hellos never finish a handshake,
                        and need not): it logs the server name (SNI) of
                        every ClientHello it reads, "sni NAME" or "sni -"
           198.18.62.3  the same server: another address

Names: tls.test and tls-other.test resolve to .2, front.test (allowed by no
rule) to .2 as well, far.test to .3. The profile is `egress = "locked"`,
allowing tls.test, tls-other.test and far.test on 443 with the default
`tls_gate = "strict"`; a second profile is the same with "lenient".

The sandbox (busybox) cannot speak TLS; it sends ClientHellos the test made
with Python's ssl module (a real OpenSSL hello, with or without SNI, and one
with an encrypted_client_hello extension added), the way a hostile agent
would send whatever bytes it likes. A hello that got through is one the
server logged; one that did not is a reset at the sandbox and nothing in
the server's log (the positive control: the same probe with the allowed
name, in the same session, is logged).
"""
import os
import pwd
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path

import pytest

import netlib
from netlib import World, sh

LAZARET = os.environ.get("LAZARET_BIN", "")
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES", ""))
USER = os.environ.get("LAZARET_TEST_USER", "lztest")

if os.geteuid() != 0:
    pytest.skip("network tests create test hosts and must run as root (scripts/test.sh)", allow_module_level=True)

DNS_NS, DNS_HOST, DNS_IP = "lzg-dns", "198.18.61.1", "198.18.61.2"
WEB_NS, WEB_HOST, WEB, WEB2 = "lzg-web", "198.18.62.1", "198.18.62.2", "198.18.62.3"
ALLOW = ["tls.test:443", "tls-other.test:443", "far.test:443"]

SERVER = r'''
import socket, ssl, sys, threading
cert, key, logpath = sys.argv[1], sys.argv[2], sys.argv[3]
log = open(logpath, "a", buffering=1)
lock = threading.Lock()
def note(line):
    with lock:
        log.write(line + "\n")
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
def on_sni(sock, name, c):
    ip = sock.getsockname()[0]
    note(f"sni {name or '-'} {ip}")
ctx.sni_callback = on_sni
def conn(c):
    ip = c.getsockname()[0]
    c.settimeout(20)
    try:
        t = ctx.wrap_socket(c, server_side=True)
        t.sendall(b"TLS-HELLO\n")
        while True:
            d = t.recv(65536)
            if not d:
                break
            t.sendall(d)
    except (OSError, ssl.SSLError):
        pass
    note(f"end {ip}")
    c.close()
def listener(ip):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((ip, 443)); s.listen(64)
    return s
def serve(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()
socks = [listener(ip) for ip in sys.argv[4:]]  # bound before "ready"
for ls in socks:
    threading.Thread(target=serve, args=(ls,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
'''


def client_hello(name):
    """A real ClientHello (OpenSSL's, through Python's ssl), with SNI name,
    or none when name is None."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        o.do_handshake()
    return out.read()


def with_ech(hello):
    """hello with an encrypted_client_hello extension (0xfe0d) appended: the
    outer name stays in SNI, the real one would be encrypted."""
    assert hello[0] == 22 and hello[5] == 1
    body = hello[9:]
    off = 2 + 32
    off += 1 + body[off]
    off += 2 + struct.unpack(">H", body[off:off + 2])[0]
    off += 1 + body[off]
    ext_len = struct.unpack(">H", body[off:off + 2])[0]
    exts = body[off + 2:off + 2 + ext_len]
    ech = struct.pack(">HH", 0xFE0D, 8) + bytes(range(8))
    body = body[:off] + struct.pack(">H", len(exts) + len(ech)) + exts + ech
    hs = bytes([1]) + struct.pack(">I", len(body))[1:] + body
    return bytes([22, 3, 1]) + struct.pack(">H", len(hs)) + hs


class ServerLog:
    def __init__(self, path):
        self.path = path

    def snis(self):
        return re.findall(r"^sni (\S+) (\S+)$", self.path.read_text(), re.M)

    def ends(self):
        return re.findall(r"^end (\S+)$", self.path.read_text(), re.M)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("gateworld")
    (d / "server.py").write_text(SERVER)
    w = World((DNS_NS, WEB_NS))
    try:
        w.host(DNS_NS, DNS_HOST, [DNS_IP], route=False)
        w.host(WEB_NS, WEB_HOST, [WEB, WEB2], route=False)
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"), "-out",
           str(d / "cert.pem"), "-subj", "/CN=tls.test", "-days", "2")
        log = d / "web.log"
        log.write_text("")
        w.start(["ip", "netns", "exec", WEB_NS, "/usr/bin/python3", str(d / "server.py"), str(d / "cert.pem"),
                 str(d / "key.pem"), str(log), WEB, WEB2], "ready")
        dns = w.start(["ip", "netns", "exec", DNS_NS, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
                       "--no-resolv", "--no-hosts", "--port=53", f"--listen-address={DNS_IP}", "--bind-interfaces",
                       "--user=root", "--group=root", "--pid-file=", "--local-ttl=300",
                       f"--host-record=tls.test,{WEB}", f"--host-record=tls-other.test,{WEB}",
                       f"--host-record=front.test,{WEB}", f"--host-record=far.test,{WEB2}"])
        # The harness itself: dnsmasq answers tls.test with its address.
        w.wait_answered(dns, lambda: netlib.dns_answers(DNS_IP, "tls.test", WEB), "dnsmasq")
        yield {"web": ServerLog(log)}
    finally:
        w.end()


@pytest.fixture(scope="module")
def user_env(world, tmp_path_factory):
    pw = pwd.getpwnam(USER)
    base = netlib.user_base("lzgate", ("config/lazaret", "run", "ws", "data"))
    img = base / "busybox-oci"
    sh("sh", str(FIXTURES / "make-busybox-oci.sh"), str(img))
    allow = "[" + ", ".join(f'"{x}"' for x in ALLOW) + "]"
    prof = f'image = "oci:{img}"\npersistent_dirs = []\negress = "locked"\nallow_hosts = {allow}\n'
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{base}/data"\nlinger_seconds = 0\n\n[network]\nresolver = "{DNS_IP}"\n\n'
        f'[profiles.gated]\n{prof}\n[profiles.lenient]\n{prof}tls_gate = "lenient"\n')
    ws = base / "ws"
    for n in ("tls.test", "tls-other.test", "front.test", "far.test", "evil.test"):
        (ws / f"hello-{n}.bin").write_bytes(client_hello(n))
    (ws / "hello-none.bin").write_bytes(client_hello(None))
    (ws / "hello-ech.bin").write_bytes(with_ech(client_hello("tls.test")))
    (ws / "http.bin").write_bytes(b"GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    netlib.give_to(base, USER)
    yield {"base": base, "uid": pw.pw_uid}
    if not os.environ.get("LZ_KEEP"):
        shutil.rmtree(base, ignore_errors=True)


def as_user(e, argv):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(e["base"]), "XDG_CONFIG_HOME": str(e["base"] / "config"),
           "XDG_RUNTIME_DIR": str(e["base"] / "run"), "LANG": "C.UTF-8"}
    return ["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv


# tls IP FILE: sends the hello in FILE and prints how many bytes came back
# (a server's answer: > 0; a reset: 0) with nc's status.
PROBES = r'''
look() { o=$(busybox nslookup -type=a "$1" 2>&1); echo "LOOK $1 rc=$?"; }
tls() { n=$( (busybox cat "$2"; busybox sleep 2) | busybox nc -w 4 "$1" 443 2>/dev/null | busybox wc -c); echo "TLS $1 $2 bytes=$n"; }
'''


def lz_run(e, script, profile="gated", timeout=120):
    r = subprocess.run(as_user(e, [LAZARET, "run", "-p", profile, "--", "busybox", "sh", "-c", PROBES + script]),
                       cwd=e["base"] / "ws", capture_output=True, text=True, timeout=timeout)
    return r.stdout + r.stderr


def tls_bytes(out, ip, f):
    m = re.findall(rf"^TLS {re.escape(ip)} {re.escape(f)} bytes=\s*(\d+)$", out, re.M)
    assert m, f"no probe {ip} {f}:\n{out}"
    return int(m[-1])


user_pids = netlib.user_pids


@pytest.fixture
def quiet(user_env):
    """No Domain of the test user runs before or after (netlib.quiet)."""
    yield from netlib.quiet(user_env)


def test_gate_checks_the_server_name(world, quiet):
    """After `nslookup tls.test` (198.18.62.2 learned for it): a hello
    naming tls.test passes (the positive control: the server logs it and
    answers); the same address with a hello naming front.test (no rule
    allows it, though it resolves there), evil.test, tls-other.test
    (allowed, but never looked up: the address was not learned for it), no
    name, an encrypted hello, or plain HTTP is reset, and the server never
    sees it. far.test's address, learned for far.test only, refuses
    tls.test's name (fronting across learned addresses)."""
    web = world["web"]
    before = len(web.snis())
    script = ("look tls.test; look far.test; tls %s hello-tls.test.bin; "
              "for f in front.test evil.test tls-other.test none ech; do tls %s hello-$f.bin; done; "
              "tls %s http.bin; tls %s hello-tls.test.bin; tls %s hello-far.test.bin; echo END\n"
              % (WEB, WEB, WEB, WEB2, WEB2))
    out = lz_run(quiet, script)
    assert "END" in out, out
    assert "LOOK tls.test rc=0" in out and "LOOK far.test rc=0" in out, out
    assert tls_bytes(out, WEB, "hello-tls.test.bin") > 0, f"the allowed name must pass the gate:\n{out}"
    assert tls_bytes(out, WEB2, "hello-far.test.bin") > 0, f"far.test on its own address must pass:\n{out}"
    for f in ("hello-front.test.bin", "hello-evil.test.bin", "hello-tls-other.test.bin", "hello-none.bin",
              "hello-ech.bin", "http.bin"):
        assert tls_bytes(out, WEB, f) == 0, f"{f} must be refused by the gate:\n{out}"
    assert tls_bytes(out, WEB2, "hello-tls.test.bin") == 0, f"tls.test's name on far.test's address:\n{out}"
    seen = web.snis()[before:]
    assert sorted(seen) == sorted([("tls.test", WEB), ("far.test", WEB2)]), \
        f"the server saw only the two allowed hellos: {seen}\n{out}"
    # The refusals are in the audit, with their reasons.
    r = subprocess.run(as_user(quiet, [LAZARET, "audit", "-p", "gated", "--net"]), cwd=quiet["base"] / "ws",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "tls-refused" in ln]
    assert any("front.test" in ln for ln in rows), r.stdout
    assert any("not learned for the server name tls.test" in ln for ln in rows), r.stdout
    assert any("no SNI" in ln for ln in rows), r.stdout


def test_lenient_lets_a_nameless_hello_through(world, quiet):
    """tls_gate = "lenient": a hello without a name (and an encrypted one)
    passes to a learned address; a hello naming another name is still
    refused there."""
    web = world["web"]
    before = len(web.snis())
    out = lz_run(quiet, "look tls.test; tls %s hello-none.bin; tls %s hello-ech.bin; tls %s hello-front.test.bin; "
                 "echo END\n" % (WEB, WEB, WEB), profile="lenient")
    assert "END" in out, out
    assert tls_bytes(out, WEB, "hello-none.bin") > 0, out
    assert tls_bytes(out, WEB, "hello-ech.bin") > 0, out
    assert tls_bytes(out, WEB, "hello-front.test.bin") == 0, out
    seen = web.snis()[before:]
    assert sorted(seen) == sorted([("-", WEB), ("tls.test", WEB)]), seen


def test_gate_killed_fails_closed(world, quiet):
    """A connection through the gate is open (the server saw its hello);
    the gate process is killed from the host: that connection ends, and a
    new one to the same learned address is refused (nothing else listens
    on the gate's port, nothing goes around it), while the name still
    resolves."""
    web = world["web"]
    before = len(web.snis())
    script = ("look tls.test; ( (busybox cat hello-tls.test.bin; busybox sleep 60) | busybox nc %s 443 "
              ">/tmp/held ) & echo HOLDING; read go; "
              "tls %s hello-tls.test.bin; look tls.test; echo END\n" % (WEB, WEB))
    s = netlib.Session(as_user(quiet, [LAZARET, "run", "-p", "gated", "--", "busybox", "sh", "-c",
                                       PROBES + script]), quiet["base"] / "ws")
    try:
        assert s.until("HOLDING", 60), s.out()
        end = time.monotonic() + 20
        while len(web.snis()) == before and time.monotonic() < end:
            time.sleep(0.1)
        assert len(web.snis()) == before + 1, "positive control: the held connection went through the gate"
        rs = user_pids(quiet["uid"], "__supervisor")
        assert len(rs) == 1, rs
        held = sh("nsenter", "-t", rs[0], "-n", "ss", "-Htn", "state", "established", "dst", WEB).stdout
        assert f"{WEB}:443" in held, f"positive control: the sandbox's connection is established: {held!r}"
        ends = len(web.ends())
        gates = user_pids(quiet["uid"], "lazaret-gate")
        assert len(gates) == 1, gates
        os.kill(int(gates[0]), 9)
        # Both halves end: the server sees the end of its connection, and
        # the sandbox's socket is established no more.
        end = time.monotonic() + 20
        while len(web.ends()) == ends and time.monotonic() < end:
            time.sleep(0.1)
        assert len(web.ends()) == ends + 1, "the server's side of the held connection must end with the gate"
        while time.monotonic() < end:
            held = sh("nsenter", "-t", rs[0], "-n", "ss", "-Htn", "state", "established", "dst", WEB).stdout
            if not held.strip():
                break
            time.sleep(0.1)
        assert not held.strip(), f"the sandbox's side must be cut: {held!r}"
        s.send("go\n")
        assert s.until("END", 60), s.out()
        out = s.out()
    finally:
        s.close()
    assert tls_bytes(out, WEB, "hello-tls.test.bin") == 0, f"a new connection must be refused:\n{out}"
    assert len(web.snis()) == before + 1, "nothing reached the server after the gate ended"
    assert out.count("LOOK tls.test rc=0") == 2, out
