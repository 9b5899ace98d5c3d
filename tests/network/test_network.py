"""Network isolation, attacked from inside the sandbox (DESIGN.md §7).

Run as root: the test creates its own test hosts in their own network
namespaces (veth pairs to the host: an "allowed" host on 198.18.7.2 and a
"denied" one on 10.213.7.2, each with a small TCP/UDP server the test
starts) and a server on the host's own loopback; lazaret itself runs as the
unprivileged test user. Traffic only ever targets these and loopback.
"""
import os
import re
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

import netlib
from netlib import World, sh

LAZARET = os.environ.get("LAZARET_BIN", "")
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES", ""))
USER = os.environ.get("LAZARET_TEST_USER", "lztest")

HOSTS = {"allowed": ("lzt-allow", "198.18.7.1", "198.18.7.2"),
         "denied": ("lzt-deny", "10.213.7.1", "10.213.7.2")}

if os.geteuid() != 0:
    pytest.skip("network tests create test hosts and must run as root (scripts/test.sh)", allow_module_level=True)


SERVER = r'''
import socket, sys, threading
ip = sys.argv[1]; log = open(sys.argv[2], "a", buffering=1)
ts = socket.socket(); ts.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ts.bind((ip, 8080)); ts.listen(16)
us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); us.bind((ip, 53))
def tcp():
    s = ts
    while True:
        c, a = s.accept(); log.write(f"tcp {a[0]}\n"); c.sendall(b"HELLO-FROM-" + ip.encode() + b"\n"); c.close()
def udp():
    s = us
    while True:
        d, a = s.recvfrom(2048); log.write(f"udp {a[0]}\n")
        if len(d) >= 12:  # answer like a DNS server: NXDOMAIN for anything
            s.sendto(d[:2] + b"\x81\x83" + d[4:6] + b"\x00" * 6 + d[12:], a)
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)  # both sockets bound above
tcp()
'''


@pytest.fixture(scope="module")
def testhosts(tmp_path_factory):
    d = tmp_path_factory.mktemp("hosts")
    (d / "server.py").write_text(SERVER)
    w = World(ns for ns, _, _ in HOSTS.values())
    try:
        for name, (ns, hostip, peerip) in HOSTS.items():
            w.host(ns, hostip, [peerip])
            log = d / f"{name}.log"
            log.write_text("")
            w.start(["ip", "netns", "exec", ns, "/usr/bin/python3", str(d / "server.py"), peerip, str(log)], "ready",
                    stderr=None)
        yield {name: (HOSTS[name][2], d / f"{name}.log") for name in HOSTS}
    finally:
        w.end()


@pytest.fixture(scope="module")
def user_env(tmp_path_factory):
    pw = pwd.getpwnam(USER)
    base = netlib.user_base("lznet", ("config/lazaret", "run", "ws", "data"))
    img = base / "busybox-oci"
    sh("sh", str(FIXTURES / "make-busybox-oci.sh"), str(img))
    netlib.give_to(base, USER)
    e = {"base": base, "image": f"oci:{img}", "uid": pw.pw_uid}
    yield e
    shutil.rmtree(base, ignore_errors=True)


def write_config(e, extra_profile="", network=""):
    # egress = "open": these tests are about the prefix policy, whose
    # [network] default_allow (0.0.0.0/0) reaches the allowed test host;
    # under the built-in "balanced" preset it would not apply.
    egress = "" if re.search(r"^egress\s*=", extra_profile, re.M) else 'egress = "open"\n'
    cfg = e["base"] / "config/lazaret/config.toml"
    cfg.write_text(f'[storage]\ndata_root = "{e["base"]}/data"\nlinger_seconds = 0\n{network}\n'
                   f'[profiles.net]\nimage = "{e["image"]}"\n{egress}'
                   f'{"" if "persistent_dirs" in extra_profile else "persistent_dirs = []"}\n{extra_profile}\n')
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


# ---- host addresses gained while a Domain runs (src/lib/netfollow.h) ----

NEW_ADDR = "198.18.7.77"  # inside the allowed test host's /24, on a test-made veth
DUMMY = "lzt-nf0"
FOLLOW_SCRIPT = f"""
    busybox nc -w 5 198.18.7.2 8080 </dev/null; echo "before-allowed=$?"
    echo phase1
    read go
    i=0
    while [ $i -lt 20 ]; do
        out=$(busybox nc -w 1 {NEW_ADDR} 8080 </dev/null 2>&1); echo "new[$i]: rc=$? $out"
        case "$out" in *"Permission denied"*|*HELLO*) break;; esac
        i=$((i+1)); busybox sleep 0.1
    done
    busybox nc -w 5 198.18.7.2 8080 </dev/null; echo "after-allowed=$?"
    echo phase2
    read go
    out=$(busybox nc -w 1 {NEW_ADDR} 8080 </dev/null 2>&1); echo "gone: $out"
    echo phase3
"""


class Session(netlib.Session):
    """A `lazaret run -p net` of the script as the test user."""

    def __init__(self, e, script, env=None):
        environ = {"PATH": "/usr/bin:/bin", "HOME": str(e["base"]), "XDG_CONFIG_HOME": str(e["base"] / "config"),
                   "XDG_RUNTIME_DIR": str(e["base"] / "run"), "LANG": "C.UTF-8"}
        environ.update(env or {})
        super().__init__(["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in environ.items()] +
                         [LAZARET, "run", "-p", "net", "--", "busybox", "sh", "-c", script], e["base"] / "ws")


def supervisor_pid(uid):
    r = subprocess.run(["pgrep", "-u", str(uid), "-f", "__supervisor"], capture_output=True, text=True)
    pids = r.stdout.split()
    assert len(pids) == 1, f"expected one Runtime Supervisor of {USER}, found {pids}"
    return pids[0]


def enforcement_route(pid, prefix):
    """The enforcement namespace's route for exactly this prefix, read from
    the host side (root enters the Supervisor's network namespace)."""
    return sh("nsenter", "-t", pid, "-n", "ip", "-4", "route", "list", "exact", prefix).stdout.strip()


def poll(fn, timeout):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.02)


@pytest.fixture
def host_address_server():
    """A test-made interface in the namespace lazaret runs in (the host side
    of slirp4netns: a veth pair, both ends here; the kernel may lack the
    dummy driver), without addresses yet, and a TCP server on NEW_ADDR (bound
    before the address exists, IP_FREEBIND) that records every connection."""
    subprocess.run(["ip", "link", "del", DUMMY], capture_output=True)
    sh("ip", "link", "add", DUMMY, "type", "veth", "peer", "name", DUMMY + "p")
    sh("ip", "link", "set", DUMMY, "up")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
    srv.bind((NEW_ADDR, 8080))
    srv.listen(16)
    srv.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, a = srv.accept()
                hits.append(a[0])
                c.sendall(b"HELLO-FROM-HOST-ADDRESS\n")
                c.close()
            except socket.timeout:
                pass
            except OSError:
                return
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield hits
    stop.set()
    th.join(timeout=5)
    srv.close()
    subprocess.run(["ip", "link", "del", DUMMY], capture_output=True)


def run_follow_scenario(user_env, hits, env=None, expect_follow=True):
    write_config(user_env, extra_profile='allow_egress = ["198.18.7.0/24"]\n')
    s = Session(user_env, FOLLOW_SCRIPT, env=env)
    try:
        assert s.until("phase1", 90), s.out()
        assert "HELLO-FROM-198.18.7.2" in s.out() and "before-allowed=0" in s.out(), s.out()
        rs = supervisor_pid(user_env["uid"])
        assert enforcement_route(rs, f"{NEW_ADDR}/32") == ""
        # The host gains an address inside the allowed prefix.
        t0 = time.monotonic()
        sh("ip", "addr", "add", f"{NEW_ADDR}/32", "dev", DUMMY)
        route = poll(lambda: enforcement_route(rs, f"{NEW_ADDR}/32"), 2.0 if expect_follow else 0.5)
        t_route = time.monotonic() - t0
        s.send("go\n")
        assert s.until("phase2", 30), s.out()
        return s, rs, route, t_route
    except BaseException:
        s.close()
        raise


def test_new_host_address_is_denied_while_running(testhosts, user_env, host_address_server):
    hits = host_address_server
    s, rs, route, t_route = run_follow_scenario(user_env, hits)
    try:
        out = s.out()
        # Within the bound, a prohibit /32 in the enforcement namespace...
        assert route.startswith(f"prohibit {NEW_ADDR}"), (route, out)
        assert t_route < 2.0
        # ...so the sandbox's connect fails at once, the host's server saw
        # nothing, and the allowed test host still answers.
        assert "new[0]: rc=1" in out and "Permission denied" in out, out
        assert "HELLO-FROM-HOST-ADDRESS" not in out and hits == [], out
        assert "after-allowed=0" in out and out.count("HELLO-FROM-198.18.7.2") == 2, out
        # The address goes away: the follower's /32 goes with it.
        sh("ip", "addr", "del", f"{NEW_ADDR}/32", "dev", DUMMY)
        assert poll(lambda: enforcement_route(rs, f"{NEW_ADDR}/32") == "", 2.0), \
            enforcement_route(rs, f"{NEW_ADDR}/32")
        # The configured routes are untouched: the allowed /24 is still there.
        assert "via 10.0.2.2" in enforcement_route(rs, "198.18.7.0/24")
        s.send("go\n")
        assert s.until("phase3", 30), s.out()
        assert "gone:" in s.out() and "Permission denied" not in s.out().split("gone:")[1], s.out()
    finally:
        s.close()
    assert s.p.returncode == 0, s.out()
    logs = list(user_env["base"].glob("data/**/coordinator.log"))
    log = "\n".join(p.read_text(errors="replace") for p in logs)
    print("\n".join(line for line in log.splitlines() if " rs[" in line and "host address" in line))
    assert f"host address {NEW_ADDR} appeared (RTM_NEWADDR): /32 deny installed and read back in" in log, log[-3000:]
    assert f"host address {NEW_ADDR} is gone: its /32 deny removed" in log, log[-3000:]
    assert no_leftovers(user_env["uid"])


def test_new_host_address_reachable_without_follower(testhosts, user_env, host_address_server):
    """Positive control: with the follower switched off (a test-only switch),
    the same address is reachable from the sandbox: the host's server
    answers. This is what the test above would see without the defence."""
    hits = host_address_server
    s, rs, route, _ = run_follow_scenario(user_env, hits, env={"LAZARET_TEST_NETFOLLOW": "off"},
                                          expect_follow=False)
    try:
        out = s.out()
        assert route == "", route
        assert "HELLO-FROM-HOST-ADDRESS" in out and hits, out
        s.send("go\n")
        assert s.until("phase3", 30), s.out()
    finally:
        s.close()
    assert no_leftovers(user_env["uid"])


def test_host_address_present_at_start_is_denied(testhosts, user_env, host_address_server):
    """The start-time snapshot (and the follower's first reconcile) deny an
    address the host already has, even inside an allowed prefix."""
    hits = host_address_server
    write_config(user_env, extra_profile='allow_egress = ["198.18.7.0/24"]\n')
    sh("ip", "addr", "add", f"{NEW_ADDR}/32", "dev", DUMMY)
    r = lz(user_env, f"busybox nc -w 2 {NEW_ADDR} 8080 </dev/null 2>&1; echo rc=$?; "
                     f"busybox nc -w 5 198.18.7.2 8080 </dev/null; echo allowed=$?")
    out = r.stdout + r.stderr
    assert "Permission denied" in out and "HELLO-FROM-HOST-ADDRESS" not in out and hits == [], out
    assert "HELLO-FROM-198.18.7.2" in out, out


def test_address_burst_overflow_is_reconciled(testhosts, user_env, host_address_server):
    """Events lost to overflow (ENOBUFS) are not lost silently: the follower
    re-dumps the host's addresses and reconciles. The Supervisor is held
    stopped while the host gains many addresses at once, so its socket
    overflows for certain."""
    n = 600
    addrs = [f"198.18.{8 + i // 250}.{1 + i % 250}" for i in range(n)]
    write_config(user_env, extra_profile='allow_egress = ["198.18.7.0/24"]\n')
    probe = " ".join(addrs[::97])
    s = Session(user_env, f"""
        echo phase1
        read go
        for a in {probe}; do busybox nc -w 1 $a 8080 </dev/null 2>&1; done
        busybox nc -w 5 198.18.7.2 8080 </dev/null; echo "allowed=$?"
        echo phase2
        read done
    """)
    batch = Path(tempfile.mkdtemp(prefix="lznf")) / "batch"

    def denies():
        out = sh("nsenter", "-t", rs, "-n", "ip", "-4", "route", "list", "type", "prohibit").stdout
        return sum(1 for line in out.splitlines() if line.split()[1] in wanted)
    wanted = set(addrs)
    try:
        assert s.until("phase1", 90), s.out()
        rs = supervisor_pid(user_env["uid"])
        os.kill(int(rs), 19)  # SIGSTOP
        try:
            batch.write_text("".join(f"address add {a}/32 dev {DUMMY}\n" for a in addrs))
            sh("ip", "-batch", str(batch))
        finally:
            os.kill(int(rs), 18)  # SIGCONT
        assert poll(lambda: denies() == n, 20.0), denies()
        s.send("go\n")
        assert s.until("phase2", 60), s.out()
        out = s.out()
        assert out.count("Permission denied") == len(addrs[::97]) and "allowed=0" in out, out
        batch.write_text("".join(f"address del {a}/32 dev {DUMMY}\n" for a in addrs))
        sh("ip", "-batch", str(batch))
        # The session (and so the Supervisor) lives until the removals are seen.
        assert poll(lambda: denies() == 0, 20.0), denies()
        s.send("done\n")
    finally:
        s.close()
        shutil.rmtree(batch.parent, ignore_errors=True)
    log = "\n".join(p.read_text(errors="replace") for p in user_env["base"].glob("data/**/coordinator.log"))
    print("\n".join(line for line in log.splitlines() if " rs[" in line and "host address" in line))
    assert "host addresses reconciled (events lost (ENOBUFS))" in log, log[-3000:]
    assert no_leftovers(user_env["uid"])


# The start overlap (docs/network.md, "Readiness"): the helper starts and
# the policy is installed while runsc boots. The sandbox's first process
# (a test prelude beside lazaret-init, test builds only) sends to the
# denied host from its first moment, for at most 40 s or until the session
# says stop; the policy's install waits 3 s after the helper's tap is up
# (a test hook; runsc boots in well under that), so the attack runs while
# the helper is ready and the policy is not in place yet.
ATTACK = ("end=$(( $(busybox date +%s) + 40 )); i=0; "
          "while [ $i -lt 4000 ] && [ $(busybox date +%s) -lt $end ] && [ ! -e /tmp/attack.stop ]; do "
          "busybox nc -w 1 {denied} 8080 </dev/null >/dev/null 2>/tmp/attack.err; rc=$?; "
          "echo \"rc=$rc $(busybox head -c 100 /tmp/attack.err)\" >>/tmp/attack.log; i=$((i+1)); done")
OVERLAP_READ = ("busybox touch /tmp/attack.stop; busybox sleep 1.5; "
                "echo attempts=$(busybox wc -l </tmp/attack.log); "
                "echo unreachable=$(busybox grep -c nreachable /tmp/attack.log); "
                "echo connected=$(busybox grep -c '^rc=0' /tmp/attack.log)")


def overlap_attack(testhosts, user_env, extra_env):
    denied, dlog = testhosts["denied"]
    dlog.write_text("")
    write_config(user_env)
    env = {"LAZARET_TEST_INIT_PRELUDE": ATTACK.format(denied=denied), "LAZARET_TEST_NET_DELAY_MS": "3000"}
    env.update(extra_env)
    r = lz(user_env, OVERLAP_READ, env=env)
    counts = dict(re.findall(r"^(attempts|unreachable|connected)=(\d+)$", r.stdout, re.M))
    counts = {k: int(v) for k, v in counts.items()}
    print("attack:", counts)
    return r, counts, dlog.read_text()


def test_first_process_sends_nothing_before_the_policy(testhosts, user_env):
    """The sandbox's first process sends to a denied host while the helper
    is ready and the policy not yet installed: nothing leaves (no route out
    of the namespace before the policy), and after it the policy denies."""
    r, counts, dlog = overlap_attack(testhosts, user_env, {})
    assert r.returncode == 0, r.stdout + r.stderr
    # It ran before the policy was in place (no route: unreachable)...
    assert counts.get("unreachable", 0) > 0, r.stdout
    # ...and nothing of it reached the denied host, before or after.
    assert counts.get("connected", -1) == 0, r.stdout
    assert dlog == ""
    assert no_leftovers(user_env["uid"])


def test_first_process_reaches_out_when_the_helper_makes_a_route(testhosts, user_env):
    """Positive control of the test above: with the helper configuring its
    own default route (slirp4netns --configure, what the model's
    BUG_HELPER_ROUTES stands for) the same attack reaches the denied host
    in the window before the policy replaces that route."""
    r, counts, dlog = overlap_attack(testhosts, user_env, {"LAZARET_TEST_NET": "helper-configures"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts.get("connected", 0) > 0, r.stdout
    # busybox nc ends as soon as it is connected and its stdin is at its
    # end; the test host's server accepts (and logs) on its own time.
    path = testhosts["denied"][1]
    end = time.monotonic() + 10
    while "tcp " not in dlog and time.monotonic() < end:
        time.sleep(0.1)
        dlog = path.read_text()
    assert "tcp " in dlog, (r.stdout, r.stderr, dlog)
    testhosts["denied"][1].write_text("")
    assert no_leftovers(user_env["uid"])
