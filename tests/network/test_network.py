"""Network isolation, attacked from inside the sandbox (DESIGN.md §7).

Run as root: the test creates its own test hosts in their own network
namespaces (veth pairs to the host: an "allowed" host on 198.18.7.2 and a
"denied" one on 10.213.7.2, each with a small TCP/UDP server the test
starts) and a server on the host's own loopback; lazaret itself runs as the
unprivileged test user. Traffic only ever targets these and loopback.
"""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

LAZARET = os.environ.get("LAZARET_BIN", "")
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES", ""))
USER = os.environ.get("LAZARET_TEST_USER", "lztest")

HOSTS = {"allowed": ("lzt-allow", "198.18.7.1", "198.18.7.2"),
         "denied": ("lzt-deny", "10.213.7.1", "10.213.7.2")}

if os.geteuid() != 0:
    pytest.skip("network tests create test hosts and must run as root (scripts/test.sh)", allow_module_level=True)


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=30, **kw)


SERVER = r'''
import socket, sys, threading
ip = sys.argv[1]; log = open(sys.argv[2], "a", buffering=1)
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((ip, 8080)); s.listen(16)
    while True:
        c, a = s.accept(); log.write(f"tcp {a[0]}\n"); c.sendall(b"HELLO-FROM-" + ip.encode() + b"\n"); c.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((ip, 53))
    while True:
        d, a = s.recvfrom(2048); log.write(f"udp {a[0]}\n")
        if len(d) >= 12:  # answer like a DNS server: NXDOMAIN for anything
            s.sendto(d[:2] + b"\x81\x83" + d[4:6] + b"\x00" * 6 + d[12:], a)
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
tcp()
'''


@pytest.fixture(scope="module")
def testhosts(tmp_path_factory):
    d = tmp_path_factory.mktemp("hosts")
    (d / "server.py").write_text(SERVER)
    procs = []
    for name, (ns, hostip, peerip) in HOSTS.items():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"v-{ns}"], capture_output=True)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"v-{ns}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{hostip}/24", "dev", f"v-{ns}")
        sh("ip", "link", "set", f"v-{ns}", "up")
        sh("ip", "-n", ns, "addr", "add", f"{peerip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", hostip)
        log = d / f"{name}.log"
        log.write_text("")
        p = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", str(d / "server.py"), peerip, str(log)],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        procs.append(p)
    yield {name: (HOSTS[name][2], d / f"{name}.log") for name in HOSTS}
    for p in procs:
        p.kill()
        p.wait(timeout=10)
    for ns, _, _ in HOSTS.values():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"v-{ns}"], capture_output=True)


@pytest.fixture(scope="module")
def user_env(tmp_path_factory):
    pw = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="lznet", dir="/tmp"))
    os.chmod(base, 0o755)
    img = base / "busybox-oci"
    sh("sh", str(FIXTURES / "make-busybox-oci.sh"), str(img))
    for sub in ("config/lazaret", "run", "ws", "data"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "run").chmod(0o700)
    shutil.chown(base, USER, USER)
    for p in base.rglob("*"):
        shutil.chown(p, USER, USER)
    e = {"base": base, "image": f"oci:{img}", "uid": pw.pw_uid}
    yield e
    shutil.rmtree(base, ignore_errors=True)


def write_config(e, extra_profile="", network=""):
    cfg = e["base"] / "config/lazaret/config.toml"
    cfg.write_text(f'[storage]\ndata_root = "{e["base"]}/data"\n{network}\n'
                   f'[profiles.net]\nimage = "{e["image"]}"\n{extra_profile}\n')
    shutil.chown(cfg, USER, USER)


def lz(e, script, env=None, timeout=120, cmd="run"):
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(e["base"]), "XDG_CONFIG_HOME": str(e["base"] / "config"),
               "XDG_RUNTIME_DIR": str(e["base"] / "run"), "LANG": "C.UTF-8"}
    environ.update(env or {})
    args = ["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in environ.items()]
    if cmd == "run":
        args += [LAZARET, "run", "-p", "net", "--", "busybox", "sh", "-c", script]
    else:
        args += [LAZARET] + cmd
    return subprocess.run(args, cwd=e["base"] / "ws", capture_output=True, text=True, timeout=timeout)


def no_leftovers(uid):
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        r = subprocess.run(["pgrep", "-u", str(uid), "-f", "runsc|slirp4netns|lazaret"], capture_output=True)
        if r.returncode != 0:
            return True
        time.sleep(0.1)
    return False


def test_allowed_host_answers_denied_hosts_fail_fast(testhosts, user_env):
    write_config(user_env)
    allowed, alog = testhosts["allowed"]
    denied, dlog = testhosts["denied"]
    script = f"""
        busybox nc -w 5 {allowed} 8080 </dev/null; echo "tcp-allowed=$?"
        busybox nc -w 5 {denied} 8080 </dev/null 2>&1; echo "tcp-denied=$?"
        busybox nslookup lazaret.test {denied} 2>&1; echo "udp-denied=$?"
        busybox nslookup lazaret.test {allowed} 2>&1; echo "udp-allowed=$?"
        busybox ping -c 1 -W 2 {denied} 2>&1; echo "icmp-denied=$?"
    """
    t = time.monotonic()
    r = lz(user_env, script)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert f"HELLO-FROM-{allowed}" in out and "tcp-allowed=0" in out
    assert "tcp-denied=1" in out and "Permission denied" in out
    assert "udp-denied=0" not in out
    # (busybox nc has no UDP mode: nslookup sends the UDP datagrams.)
    assert "icmp-denied=0" not in out
    # Nothing reached the denied host.
    assert dlog.read_text() == ""
    assert "tcp" in alog.read_text() and "udp" in alog.read_text()
    assert time.monotonic() - t < 60


def test_denied_is_immediate(testhosts, user_env):
    """A denied connect fails at once, not after a timeout."""
    write_config(user_env)
    denied, dlog = testhosts["denied"]
    r = lz(user_env, f"""
        i=0; while [ $i -lt 20 ]; do busybox nc -w 10 {denied} 8080 </dev/null 2>/dev/null; i=$((i+1)); done; echo done
    """)
    assert "done" in r.stdout
    # 20 denied connects inside one session; each would take 10 s if it hung.
    assert dlog.read_text() == ""


def test_sandbox_cannot_change_the_policy(testhosts, user_env):
    write_config(user_env)
    denied, dlog = testhosts["denied"]
    r = lz(user_env, f"""
        busybox ip route del 10.0.0.0/8 2>&1; echo "route-del=$?"
        busybox ip route add {denied}/32 via 10.0.2.2 2>&1; echo "route-add=$?"
        busybox ip addr add 10.213.7.9/24 dev tap0 2>&1; echo "addr-add=$?"
        busybox nc -w 3 {denied} 8080 </dev/null 2>&1; echo "tcp-denied=$?"
        busybox ping -c 1 -W 1 {denied} 2>&1; echo "raw=$?"
        busybox arping -c 1 -w 1 -I tap0 {denied} 2>&1; echo "packet=$?"
    """)
    out = r.stdout + r.stderr
    assert "route-del=0" not in out and "route-add=0" not in out and "addr-add=0" not in out
    assert "tcp-denied=1" in out
    assert "raw=0" not in out
    assert "packet=0" not in out and "packet=" in out
    assert dlog.read_text() == ""


def test_host_loopback_unreachable(user_env):
    write_config(user_env)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    hits = []

    def accept():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                c, _ = srv.accept()
                hits.append(1)
                c.close()
            except socket.timeout:
                pass
            except OSError:
                return  # closed by the test
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    r = lz(user_env, f"busybox nc -w 3 127.0.0.1 {port} </dev/null 2>&1; echo lo=$?; "
                     f"busybox nc -w 3 10.0.2.2 {port} </dev/null 2>&1; echo gw=$?")
    srv.close()
    assert "lo=0" not in r.stdout and "gw=0" not in r.stdout, r.stdout
    assert hits == []


def test_ipv6_unavailable(user_env):
    write_config(user_env)
    r = lz(user_env, "busybox nc -w 2 ::1 22 </dev/null 2>&1; echo v6=$?; cat /proc/net/if_inet6 2>/dev/null | wc -l")
    assert "v6=0" not in r.stdout


def test_equal_prefix_conflict_refused(user_env):
    write_config(user_env, extra_profile='allow_egress = ["10.213.0.0/16"]\ndeny_egress = ["10.213.0.0/16"]\n')
    r = lz(user_env, None, cmd=["config", "check", "-p", "net"])
    assert r.returncode == 1
    assert "10.213.0.0/16" in r.stderr


def test_profile_allow_overrides_default_deny(testhosts, user_env):
    """Longest prefix wins: a profile allow inside a denied range opens it."""
    denied, dlog = testhosts["denied"]
    write_config(user_env, extra_profile='allow_egress = ["10.213.7.0/24"]\n')
    r = lz(user_env, f"busybox nc -w 5 {denied} 8080 </dev/null; echo rc=$?")
    assert f"HELLO-FROM-{denied}" in r.stdout, r.stdout + r.stderr
    dlog.write_text("")


def test_broken_helper_refuses_domain(user_env):
    write_config(user_env)
    r = lz(user_env, "echo should-not-run", env={"LAZARET_SLIRP4NETNS": "/bin/false"})
    assert r.returncode == 125
    assert "connectivity helper" in r.stderr
    assert "should-not-run" not in r.stdout
    assert no_leftovers(user_env["uid"])


def test_dns_through_the_helpers_resolver(testhosts, user_env, tmp_path):
    """The sandbox's resolver (10.0.2.3) forwards to the host's resolver: here
    the test's own host, named in a private /etc/resolv.conf for this run."""
    allowed, alog = testhosts["allowed"]
    write_config(user_env)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"nameserver {allowed}\n")
    resolv.chmod(0o644)
    before = alog.read_text().count("udp")
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(user_env["base"]),
               "XDG_CONFIG_HOME": str(user_env["base"] / "config"),
               "XDG_RUNTIME_DIR": str(user_env["base"] / "run"), "LANG": "C.UTF-8"}
    inner = (["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in environ.items()] +
             [LAZARET, "run", "-p", "net", "--", "busybox", "sh", "-c",
              "cat /etc/resolv.conf; busybox nslookup lazaret.test 2>&1; echo rc=$?"])
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        f'mount --bind "{resolv}" /etc/resolv.conf && exec "$@"', "sh", *inner],
                       cwd=user_env["base"] / "ws", capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "nameserver 10.0.2.3" in out, out
    # The query went through slirp4netns's forwarder to the test's resolver,
    # and its NXDOMAIN answer came back to the sandbox.
    assert alog.read_text().count("udp") > before, out
    assert "NXDOMAIN" in out or "can't find" in out or "can't resolve" in out, out
