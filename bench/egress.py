#!/usr/bin/python3
"""Egress by name benchmark (run as root: it makes its own test world).

Names against today's prefix policy, same runtime configuration, same data,
interleaved in one run:

- first connection to a newly resolved name: one A lookup through the
  Domain's resolver, then a TCP connect to the answer (bench/dnsconn.c,
  timed inside the sandbox, every name new and every address distinct, so
  under "locked" each lookup installs a route before its answer);
- a burst of 1,000 lookups (A only);
- TCP throughput (bench/blast.c, large writes) to an address learned by
  name vs to the same address under the prefix policy;
- TCP/443 throughput through the TLS gate (a ClientHello naming the sink,
  then the data, spliced by lazaret-gate) vs the same profile with
  tls_gate = "off" (routed through slirp4netns like any port).

"names" is a profile with egress = "locked" and allow_hosts =
["*.bench.test:9000,9443"]; "prefix" is egress = "open" (the public prefix
allowed, every name resolved, no routes learned). Both use the same
resolver, the test world's dnsmasq, through [network] resolver.

The world: a network namespace (198.18.11.2, with 198.18.16.0/21 local on
its lo so that every name can have an address of its own) running dnsmasq
and two TCP servers (9443: accept and close; 9000: a sink). Only those
addresses are ever contacted (DESIGN.md §7).

Usage (as root):
  bench/egress.py --lazaret build/lazaret --image oci:DIR [--user lztest] [--rounds 3] [--names 200]
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

def ask_a(server, name):
    """One A query over UDP (no resolver tools needed): the first address
    of the answer, or None."""
    q = struct.pack(">HHHHHH", 0x4c5a, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        try:
            s.sendto(q, (server, 53))
            r = s.recv(4096)
        except OSError:
            return None
    if len(r) < 12 or struct.unpack(">H", r[6:8])[0] == 0:
        return None
    return socket.inet_ntoa(r[-4:]) if struct.unpack(">H", r[-6:-4])[0] == 4 else None


ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True)
ap.add_argument("--user", default="lztest")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--names", type=int, default=200)
ap.add_argument("--burst", type=int, default=1000)
ap.add_argument("--mib", type=int, default=200)
ap.add_argument("--gate-mib", type=int, default=1000)
a = ap.parse_args()

NS, HOST_IP, PEER = "lzb-egress", "198.18.11.1", "198.18.11.2"
POOL = "198.18.16.0/21"  # local on the world's lo: 2048 addresses
SERVER = r'''
import socket, sys, threading
def acceptor(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", port)); s.listen(512)
    while True:
        c, _ = s.accept(); c.close()
def sink(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", port)); s.listen(16)
    while True:
        c, _ = s.accept()
        while c.recv(1 << 20): pass
        c.close()
threading.Thread(target=acceptor, args=(9443,), daemon=True).start()
threading.Thread(target=sink, args=(443,), daemon=True).start()
print("ready", flush=True)
sink(9000)
'''


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


def pool_addr(i):
    return f"198.18.{16 + i // 256}.{i % 256}"


subprocess.run(["ip", "netns", "del", NS], capture_output=True)
subprocess.run(["ip", "link", "del", f"v-{NS}"], capture_output=True)
subprocess.run(["ip", "route", "del", POOL], capture_output=True)
sh("ip", "netns", "add", NS)
sh("ip", "link", "add", f"v-{NS}", "type", "veth", "peer", "name", "eth0", "netns", NS)
sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", f"v-{NS}")
sh("ip", "link", "set", f"v-{NS}", "up")
sh("ip", "-n", NS, "addr", "add", f"{PEER}/24", "dev", "eth0")
sh("ip", "-n", NS, "addr", "add", POOL, "dev", "lo")
sh("ip", "-n", NS, "link", "set", "eth0", "up")
sh("ip", "-n", NS, "link", "set", "lo", "up")
sh("ip", "-n", NS, "route", "add", "default", "via", HOST_IP)
sh("ip", "route", "add", POOL, "via", PEER)

base = Path(tempfile.mkdtemp(prefix="lzbe", dir="/tmp"))
os.chmod(base, 0o755)
procs = []
try:
    (base / "server.py").write_text(SERVER)
    # Every name of every round has an address of its own; the burst's
    # names share one.
    hosts = []
    n = 0
    for r in range(a.rounds):
        for prof in ("names", "prefix"):
            for i in range(a.names):
                hosts.append(f"{pool_addr(n)} r{r}-{prof}-n{i}.bench.test")
                n += 1
    assert n <= 2046, "too many names for the address pool"
    for i in range(a.burst):
        hosts.append(f"{PEER} b{i}.bench.test")
    hosts.append(f"{PEER} sink.bench.test")
    (base / "hosts").write_text("\n".join(hosts) + "\n")
    dns = subprocess.Popen(["ip", "netns", "exec", NS, "dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                            f"--addn-hosts={base}/hosts", f"--listen-address={PEER}", "--bind-interfaces",
                            "--port=53", "--local-ttl=300", "--cache-size=10000", "--user=root",
                            f"--pid-file={base}/dnsmasq.pid"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(dns)
    srv = subprocess.Popen(["ip", "netns", "exec", NS, "/usr/bin/python3", str(base / "server.py")],
                           stdout=subprocess.PIPE, text=True)
    procs.append(srv)
    assert srv.stdout.readline().strip() == "ready"
    for _ in range(100):  # dnsmasq answers
        if ask_a(PEER, "sink.bench.test") == PEER:
            break
        time.sleep(0.05)
    else:
        raise SystemExit("dnsmasq did not answer")

    (base / "ws").mkdir()
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    try:
        ctx.wrap_bio(bio_in, bio_out, server_hostname="sink.bench.test").do_handshake()
    except ssl.SSLWantReadError:
        pass
    (base / "ws" / "hello.bin").write_bytes(bio_out.read())
    here = Path(__file__).resolve().parent
    for tool in ("dnsconn", "blast"):
        subprocess.run(["gcc", "-O2", "-static", "-o", str(base / "ws" / tool), str(here / f"{tool}.c")], check=True)
    for d in ("config/lazaret", "run", "data"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "run").chmod(0o700)
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{base}/data"\nlinger_seconds = 0\n'
        f'[network]\nresolver = "{PEER}"\n'
        f'[profiles.names]\nimage = "{a.image}"\npersistent_dirs = []\negress = "locked"\n'
        f'allow_hosts = ["*.bench.test:9000,9443"]\n'
        f'[profiles.prefix]\nimage = "{a.image}"\npersistent_dirs = []\negress = "open"\n'
        f'[profiles.gated]\nimage = "{a.image}"\npersistent_dirs = []\negress = "locked"\n'
        f'allow_hosts = ["sink.bench.test:443"]\n'
        f'[profiles.ungated]\nimage = "{a.image}"\npersistent_dirs = []\negress = "locked"\n'
        f'allow_hosts = ["sink.bench.test:443"]\ntls_gate = "off"\n')
    for p in [base, *base.rglob("*")]:
        shutil.chown(p, a.user, a.user)
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={base}", f"XDG_CONFIG_HOME={base}/config",
           f"XDG_RUNTIME_DIR={base}/run"]

    def in_sandbox(profile, script):
        t = time.perf_counter()
        r = subprocess.run(["runuser", "-u", a.user, "--", *env, a.lazaret, "run", "-p", profile, "--",
                            "busybox", "sh", "-c", script], cwd=base / "ws", capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"{profile}: {script}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return time.perf_counter() - t, r.stdout

    def elapsed_s(out):
        m = re.search(r"elapsed_us (\d+)", out)
        assert m, out
        return int(m.group(1)) / 1e6

    def per_op_us(out):
        m = re.search(r"ops (\d+) total_us (\d+) max_us (\d+) failed (\d+)", out)
        assert m and m.group(4) == "0", out
        return int(m.group(2)) / int(m.group(1)), int(m.group(3))

    first = {"names": [], "prefix": []}
    burst = {"names": [], "prefix": []}
    tput = {"names": [], "prefix": []}
    gate = {"gated": [], "ungated": []}
    for r in range(a.rounds):
        order = ("names", "prefix") if r % 2 == 0 else ("prefix", "names")
        for prof in order:
            _, out = in_sandbox(prof, f"/workspace/dnsconn connect r{r}-{prof}-n%d.bench.test 0 {a.names} 9443")
            first[prof].append(per_op_us(out))
        for prof in order:
            _, out = in_sandbox(prof, f"/workspace/dnsconn lookup b%d.bench.test 0 {a.burst}")
            burst[prof].append(per_op_us(out))
        for prof in order:
            # The name first (under "locked" that learns the route), then
            # the transfer to its address.
            _, out = in_sandbox(prof, f"/workspace/dnsconn lookup sink.bench.test 0 1 >/dev/null && "
                                      f"/workspace/blast {PEER} 9000 {a.mib}")
            tput[prof].append(elapsed_s(out))
        for prof in (("gated", "ungated") if r % 2 == 0 else ("ungated", "gated")):
            _, out = in_sandbox(prof, f"/workspace/dnsconn lookup sink.bench.test 0 1 >/dev/null && "
                                      f"/workspace/blast {PEER} 443 {a.gate_mib} /workspace/hello.bin")
            gate[prof].append(elapsed_s(out))

    def med(xs, k=0):
        return statistics.median(x[k] if isinstance(x, tuple) else x for x in xs)

    fn, fp = med(first["names"]), med(first["prefix"])
    bn, bp = med(burst["names"]), med(burst["prefix"])
    tn, tp = med(tput["names"]), med(tput["prefix"])
    print(f"first connection to a new name (lookup + connect, {a.names} names x {a.rounds} rounds): "
          f"names {fn:.0f} us, prefix {fp:.0f} us, ratio {fn / fp:.2f} "
          f"(max {med(first['names'], 1):.0f} vs {med(first['prefix'], 1):.0f} us)")
    print(f"burst of {a.burst} lookups: names {bn:.0f} us per lookup, prefix {bp:.0f} us, ratio {bn / bp:.2f}")
    print(f"TCP throughput ({a.mib} MiB, large writes): names {a.mib / tn:.0f} MiB/s, prefix {a.mib / tp:.0f} MiB/s, "
          f"ratio {tn / tp:.2f} (time names/prefix; above 1: names slower)")
    gg, gu = med(gate["gated"]), med(gate["ungated"])
    print(f"TCP/443 throughput ({a.gate_mib} MiB after a ClientHello): through the TLS gate {a.gate_mib / gg:.0f} MiB/s, "
          f"tls_gate off {a.gate_mib / gu:.0f} MiB/s, throughput ratio gate/off {gu / gg:.2f} (goal >= 0.9)")
finally:
    for p in procs:
        p.kill()
        p.wait(timeout=10)
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "link", "del", f"v-{NS}"], capture_output=True)
    subprocess.run(["ip", "route", "del", POOL], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)
