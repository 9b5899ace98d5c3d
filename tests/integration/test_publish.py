"""Published ports (issue 25 §3; docs/network.md "Publishing a port"): a
server inside the sandbox reached from the host at the published port, and
nothing else of the sandbox reachable; the answers' route cannot be used to
reach the host; a taken host port and a malformed --publish are refused
with a message that says so; `lazaret ps` lists the ports."""
import socket
import subprocess
import threading
import urllib.request

import pexpect

from conftest import RUN_TIMEOUT, lz_run, wait_until


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_on(port):
    """The local addresses of TCP sockets listening on port (this network
    namespace, /proc/net/tcp)."""
    found = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, st = fields[1], fields[3]
            addr, p = local.split(":")
            if st == "0A" and int(p, 16) == port:
                found.append(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


def refused(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return False
    except ConnectionRefusedError:
        return True


# Two servers inside: 8081 published, 8082 not. Then the sandbox tries the
# answers' route: its server on 8081 stopped, a connection from source port
# 8081 (the one port whose packets to 10.0.2.2 are routed) to slirp4netns's
# 10.0.2.2, i.e. the host's loopback through the helper, which must refuse
# it.
SCRIPT = r'''
mkdir -p /tmp/www /tmp/www2
echo SANDBOX-PAGE > /tmp/www/index.html
echo HIDDEN-PAGE > /tmp/www2/index.html
busybox httpd -f -p 8081 -h /tmp/www & P1=$!
busybox httpd -f -p 8082 -h /tmp/www2 &
i=0; while [ $i -lt 100 ] && ! busybox nc -w 1 127.0.0.1 8081 </dev/null; do i=$((i+1)); busybox usleep 50000; done
echo SERVERS-UP
read go
kill $P1; wait $P1 2>/dev/null
o=$(echo PROBE | busybox nc -w 3 -p 8081 10.0.2.2 HOSTPORT 2>&1); echo "ALIAS rc=$? $o"
echo ALL-DONE
read end
'''


def test_published_port_reaches_the_server_inside_and_nothing_else(lazaret, env, workspace):
    hp = free_port()
    # The route of the answers, attacked: a host service on loopback the
    # sandbox must not reach through 10.0.2.2 (its positive control: the
    # host reaches it).
    host_srv = socket.socket()
    host_srv.bind(("127.0.0.1", 0))
    host_srv.listen(4)
    host_port = host_srv.getsockname()[1]
    hits = []

    def serve():
        host_srv.settimeout(60)
        try:
            while True:
                c, _ = host_srv.accept()
                hits.append(c.recv(100))
                c.close()
        except OSError:
            pass
    threading.Thread(target=serve, daemon=True).start()
    with socket.create_connection(("127.0.0.1", host_port), timeout=3) as c:
        c.sendall(b"CONTROL")
    assert wait_until(lambda: hits == [b"CONTROL"], timeout=5)

    script = SCRIPT.replace("HOSTPORT", str(host_port))
    c = pexpect.spawn(lazaret, ["run", "-p", "test", "--publish", f"{hp}:8081", "--", "busybox", "sh", "-c", script],
                      cwd=str(workspace), env=env.environ(), timeout=RUN_TIMEOUT, encoding="utf-8")
    try:
        c.expect("SERVERS-UP")
        # The published port: on the host's loopback only, and it answers.
        assert listening_on(hp) == ["127.0.0.1"], listening_on(hp)
        with urllib.request.urlopen(f"http://127.0.0.1:{hp}/index.html", timeout=10) as r:
            assert r.read() == b"SANDBOX-PAGE\n"
        # Several connections (a browser opens many).
        for _ in range(5):
            with urllib.request.urlopen(f"http://127.0.0.1:{hp}/", timeout=10) as r:
                assert r.read() == b"SANDBOX-PAGE\n"
        # The unpublished server is not reachable from the host.
        assert listening_on(8082) == [] and refused(8082)
        ps = subprocess.run([lazaret, "ps"], env=env.environ(), capture_output=True, text=True, timeout=30)
        assert f"published 127.0.0.1:{hp} -> sandbox port 8081" in ps.stdout, ps.stdout
        c.sendline("go")
        c.expect(r"ALIAS rc=(\d+)([^\r\n]*)")
        assert c.match.group(1) != "0", f"the probe through 10.0.2.2 must fail: {c.match.group(0)}"
        c.expect("ALL-DONE")
        c.sendline("end")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
        host_srv.close()
    assert hits == [b"CONTROL"], f"the sandbox reached the host's loopback service: {hits}"
    # The Domain is gone with its last session, and so is the host port.
    assert wait_until(lambda: listening_on(hp) == [], timeout=30)


def test_taken_host_port_and_bad_text_are_refused_clearly(lazaret, env, workspace):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        r = lz_run(lazaret, env, workspace, ["true"])  # positive control: the Domain starts
        assert r.returncode == 0, r.stderr
        r = subprocess.run([lazaret, "run", "-p", "test", "--publish", f"{port}:8081", "--", "true"], cwd=workspace,
                           env=env.environ(), capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert r.returncode == 125, (r.returncode, r.stderr)
        assert f"127.0.0.1:{port} is in use on this host" in r.stderr, r.stderr
    finally:
        taken.close()
    for text, why in (("http", "a port must be a number"), ("70000", "a port must be a number"),
                      ("1:2:3", "need an address first"), ("1.2.3:80", "not an IPv4 address")):
        r = subprocess.run([lazaret, "run", "-p", "test", "--publish", text, "--", "true"], cwd=workspace,
                           env=env.environ(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 125 and why in r.stderr, (text, r.returncode, r.stderr)


def test_profile_publish_key_and_config_check(lazaret, env, workspace):
    hp = free_port()
    env.write_config(extra_profile=f'publish = ["{hp}:8081"]\n')
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=env.environ(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f'publish = ["127.0.0.1:{hp}:8081"]' in r.stdout, r.stdout
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c",
                          "mkdir /tmp/w && echo KEY-PAGE > /tmp/w/index.html && busybox httpd -p 8081 -h /tmp/w && "
                          "i=0; while [ $i -lt 100 ] && ! busybox nc -w 1 127.0.0.1 8081 </dev/null; do i=$((i+1)); "
                          "busybox usleep 50000; done; echo UP; read x"],
                         cwd=workspace, env=env.environ(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "UP"
        with urllib.request.urlopen(f"http://127.0.0.1:{hp}/index.html", timeout=10) as resp:
            assert resp.read() == b"KEY-PAGE\n"
    finally:
        p.stdin.close()
        p.wait(timeout=60)
