#!/usr/bin/python3
"""Credential hosts benchmark (run as root: it makes its own test world).

HTTPS through the TLS gate that ends TLS for a credential's host (the
sandbox's TLS ended with the Domain CA's certificate, the gate's own TLS
to the server, the request head rewritten, the response scanned) against
direct TLS from the sandbox to the same server (tls_gate = "off", the key
inside), same image, same server, same data, interleaved in one run:

- throughput: one GET of --mib MiB (bench/tlsget.c, static OpenSSL);
- time to the answer on a new connection: --conns GETs of an empty body,
  each with a TCP connect and a TLS handshake of its own.

The world: a network namespace (198.18.12.2) with dnsmasq (the name
api.bench.test) and a TLS server on 443 (a certificate of a CA this run
makes) that answers GET /bytes/N with N MiB and checks that x-api-key is
the real key. Only that address is ever contacted (DESIGN.md §7).

The gate verifies the server against the host's trust store: the run's CA
is put in /usr/local/share/ca-certificates (the profile's
host_ca_certificates, which a release build reads) for the run's length
and removed at the end; update-ca-certificates is not run.

Usage (as root, a release build is enough):
  bench/credentials.py --lazaret build/lazaret --image oci:DIR [--user lztest] [--rounds 3] [--mib 500] [--conns 50]
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True)
ap.add_argument("--user", default="lztest")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--mib", type=int, default=500)
ap.add_argument("--conns", type=int, default=50)
a = ap.parse_args()

NS, HOST_IP, PEER = "lzb-cred", "198.18.12.1", "198.18.12.2"
NAME = "api.bench.test"
KEY = "sk-bench-real-key-0123456789abcdef"
HOSTCA = Path("/usr/local/share/ca-certificates")
SERVER = r'''
import socket, ssl, sys, threading
cert, key, want = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["http/1.1"])
block = bytes(1 << 20)
def conn(c):
    try:
        s = ctx.wrap_socket(c, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(65536)
            if not d:
                return
            head += d
        lines = head.split(b"\r\n")
        n = int(lines[0].split()[1].split(b"/")[-1])
        k = [l.split(b":", 1)[1].strip() for l in lines[1:] if l.lower().startswith(b"x-api-key:")]
        if k != [want.encode()]:
            s.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (n << 20))
        for _ in range(n):
            s.sendall(block)
        s.close()
    except (OSError, ssl.SSLError, ValueError, IndexError):
        pass
    finally:
        c.close()
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("0.0.0.0", 443)); l.listen(64)
print("ready", flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=conn, args=(c,), daemon=True).start()
'''


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


def cleanup_world():
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "link", "del", f"v-{NS}"], capture_output=True)


cleanup_world()
sh("ip", "netns", "add", NS)
sh("ip", "link", "add", f"v-{NS}", "type", "veth", "peer", "name", "eth0", "netns", NS)
sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", f"v-{NS}")
sh("ip", "link", "set", f"v-{NS}", "up")
sh("ip", "-n", NS, "addr", "add", f"{PEER}/24", "dev", "eth0")
sh("ip", "-n", NS, "link", "set", "eth0", "up")
sh("ip", "-n", NS, "link", "set", "lo", "up")
sh("ip", "-n", NS, "route", "add", "default", "via", HOST_IP)

base = Path(tempfile.mkdtemp(prefix="lzbc", dir="/tmp"))
os.chmod(base, 0o755)
hostca = HOSTCA / f"lazaret-bench-{os.getpid()}.crt"
procs = []
try:
    pki = base / "pki"
    pki.mkdir()
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
       "-subj", "/CN=lazaret bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign", "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.pem"))
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={NAME}",
       "-keyout", str(pki / "srv.key"), "-out", str(pki / "srv.csr"))
    (pki / "ext").write_text(f"subjectAltName=DNS:{NAME}\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", str(pki / "srv.csr"), "-CA", str(pki / "ca.pem"), "-CAkey",
       str(pki / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(pki / "ext"), "-out",
       str(pki / "srv.pem"))
    HOSTCA.mkdir(parents=True, exist_ok=True)
    shutil.copy(pki / "ca.pem", hostca)
    os.chmod(hostca, 0o644)

    (base / "hosts").write_text(f"{PEER} {NAME}\n")
    (base / "server.py").write_text(SERVER)
    procs.append(subprocess.Popen(["ip", "netns", "exec", NS, "dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                                   f"--addn-hosts={base}/hosts", f"--listen-address={PEER}", "--bind-interfaces",
                                   "--port=53", "--user=root", f"--pid-file={base}/dnsmasq.pid"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    srv = subprocess.Popen(["ip", "netns", "exec", NS, "/usr/bin/python3", str(base / "server.py"),
                            str(pki / "srv.pem"), str(pki / "srv.key"), KEY], stdout=subprocess.PIPE, text=True)
    procs.append(srv)
    assert srv.stdout.readline().strip() == "ready"
    for _ in range(100):  # dnsmasq is up when it answers TCP on 53
        try:
            socket.create_connection((PEER, 53), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise SystemExit("dnsmasq did not start")

    ws = base / "ws"
    ws.mkdir()
    shutil.copy(pki / "ca.pem", ws / "ca.pem")
    here = Path(__file__).resolve().parent
    subprocess.run(["gcc", "-O2", "-static", "-o", str(ws / "tlsget"), str(here / "tlsget.c"), "-lssl", "-lcrypto",
                    "-lpthread"], check=True, capture_output=True)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(ws / "dnsconn"), str(here / "dnsconn.c")], check=True)
    for d in ("config/lazaret", "run", "data"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "run").chmod(0o700)
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{base}/data"\nlinger_seconds = 0\n'
        f'[network]\nresolver = "{PEER}"\n'
        f'[profiles.cred]\nimage = "{a.image}"\npersistent_dirs = []\negress = "locked"\n'
        f'allow_hosts = ["{NAME}:443"]\n'
        f'[profiles.cred.credentials.BENCH_KEY]\nhost = "{NAME}"\nheader = "x-api-key"\nformat = "{{}}"\n'
        f'from_env = "BENCH_KEY"\n'
        f'[profiles.direct]\nimage = "{a.image}"\npersistent_dirs = []\negress = "locked"\n'
        f'allow_hosts = ["{NAME}:443"]\ntls_gate = "off"\nenv = {{ BENCH_KEY = "env:BENCH_KEY" }}\n')
    for p in [base, *base.rglob("*")]:
        shutil.chown(p, a.user, a.user)
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={base}", f"XDG_CONFIG_HOME={base}/config",
           f"XDG_RUNTIME_DIR={base}/run", f"BENCH_KEY={KEY}"]
    # Through the gate the client trusts the Domain CA (a busybox image has
    # no bundle for lazaret-init to add it to); direct, the run's CA.
    cafile = {"cred": "/run/lazaret/trust/domain-ca.crt", "direct": "/workspace/ca.pem"}

    def in_sandbox(profile, script):
        r = subprocess.run(["runuser", "-u", a.user, "--", *env, a.lazaret, "run", "-p", profile, "--",
                            "busybox", "sh", "-c", script], cwd=ws, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise SystemExit(f"{profile}: {script}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def tlsget(profile, mode, n):
        return in_sandbox(profile, f"/workspace/dnsconn lookup {NAME} 0 1 >/dev/null && /workspace/tlsget {PEER} "
                                   f"{NAME} {cafile[profile]} x-api-key \"$BENCH_KEY\" {mode} {n}")

    tput = {"cred": [], "direct": []}
    first = {"cred": [], "direct": []}
    ttfb = {"cred": [], "direct": []}
    for r in range(a.rounds):
        order = ("cred", "direct") if r % 2 == 0 else ("direct", "cred")
        for prof in order:
            out = tlsget(prof, "bytes", a.mib)
            m = re.search(r"elapsed_us (\d+) first_us (\d+) bytes (\d+)", out)
            assert m and int(m.group(3)) > a.mib << 20, out
            tput[prof].append(int(m.group(1)) / 1e6)
            ttfb[prof].append(int(m.group(2)))
        for prof in order:
            out = tlsget(prof, "first", a.conns)
            m = re.search(r"ops (\d+) total_us (\d+) max_us (\d+)", out)
            assert m, out
            first[prof].append(int(m.group(2)) / int(m.group(1)))

    med = statistics.median
    tc, td = med(tput["cred"]), med(tput["direct"])
    fc, fd = med(first["cred"]), med(first["direct"])
    print(f"HTTPS throughput ({a.mib} MiB, one GET): through the gate (credential host) {a.mib / tc:.0f} MiB/s, "
          f"direct TLS {a.mib / td:.0f} MiB/s, throughput ratio gate/direct {td / tc:.2f}")
    print(f"first byte of the {a.mib} MiB answer after the request: gate {med(ttfb['cred']) / 1000:.1f} ms, "
          f"direct {med(ttfb['direct']) / 1000:.1f} ms")
    print(f"new connection to the answer ({a.conns} x connect + handshake + GET): gate {fc / 1000:.2f} ms, "
          f"direct {fd / 1000:.2f} ms, ratio {fc / fd:.2f}")
finally:
    for p in procs:
        p.kill()
        p.wait(timeout=10)
    cleanup_world()
    hostca.unlink(missing_ok=True)
    shutil.rmtree(base, ignore_errors=True)
