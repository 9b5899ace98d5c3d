#!/usr/bin/python3
"""Network benchmark (run as root: it makes its own test host).

TCP throughput and connection latency from the sandbox to an "allowed"
test host (198.18.8.2, in its own network namespace) vs the same from the
host, with the same client, in one run:

- large writes (bench/blast.c, static, 1 MiB write() calls): the sandbox vs
  the host directly vs a plain process behind slirp4netns (the connectivity
  helper's own ceiling, which the sandbox cannot beat);
- small writes (busybox nc, 1 KiB per poll+read+write): kept as a second
  line, it measures the tool more than the network;
- connect+close latency (a busybox nc process per connection).

Usage (as root: it makes its own test host):
  bench/network.py --lazaret build/lazaret --image oci:DIR [--user lztest]
"""
import argparse
import os
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
ap.add_argument("--mib", type=int, default=200)
ap.add_argument("--conns", type=int, default=200)
a = ap.parse_args()

NS, HOST_IP, PEER = "lzb-allow", "198.18.8.1", "198.18.8.2"
SERVER = r'''
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 9000)); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    c.close()
'''


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


subprocess.run(["ip", "netns", "del", NS], capture_output=True)
sh("ip", "netns", "add", NS)
sh("ip", "link", "add", f"v-{NS}", "type", "veth", "peer", "name", "eth0", "netns", NS)
sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", f"v-{NS}")
sh("ip", "link", "set", f"v-{NS}", "up")
sh("ip", "-n", NS, "addr", "add", f"{PEER}/24", "dev", "eth0")
sh("ip", "-n", NS, "link", "set", "eth0", "up")
sh("ip", "-n", NS, "link", "set", "lo", "up")
sh("ip", "-n", NS, "route", "add", "default", "via", HOST_IP)
base = Path(tempfile.mkdtemp(prefix="lzbn", dir="/tmp"))
os.chmod(base, 0o755)
(base / "server.py").write_text(SERVER)
(base / "ws").mkdir()
subprocess.run(["gcc", "-O2", "-static", "-o", str(base / "ws" / "blast"), str(Path(__file__).with_name("blast.c"))],
               check=True)
srv = subprocess.Popen(["ip", "netns", "exec", NS, "/usr/bin/python3", str(base / "server.py"), PEER],
                       stdout=subprocess.PIPE, text=True)
assert srv.stdout.readline().strip() == "ready"
try:
    for d in ("config/lazaret", "run", "data"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "run").chmod(0o700)
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{base}/data"\nlinger_seconds = 0\n[profiles.bench]\nimage = "{a.image}"\n')
    for p in [base, *base.rglob("*")]:
        shutil.chown(p, a.user, a.user)
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={base}", f"XDG_CONFIG_HOME={base}/config",
           f"XDG_RUNTIME_DIR={base}/run"]

    tput = (f"s=$(busybox date +%s%N 2>/dev/null); busybox dd if=/dev/zero bs=1048576 count={a.mib} 2>/dev/null"
            f" | busybox nc {PEER} 9000")
    conns = f"i=0; while [ $i -lt {a.conns} ]; do busybox nc {PEER} 9000 </dev/null; i=$((i+1)); done"

    def in_sandbox(script):
        t = time.perf_counter()
        subprocess.run(["runuser", "-u", a.user, "--", *env, a.lazaret, "run", "-p", "bench", "--",
                        "busybox", "sh", "-c", script], cwd=base / "ws", check=True, capture_output=True)
        return time.perf_counter() - t

    def on_host(script):
        t = time.perf_counter()
        subprocess.run(["busybox", "sh", "-c", script], check=True, capture_output=True)
        return time.perf_counter() - t

    blast = f"/workspace/blast {PEER} 9000 {a.mib}"

    def behind_slirp(script):
        """A plain process (no gVisor) in its own user + network namespace
        behind slirp4netns, as the sandbox is."""
        holder = subprocess.Popen(["unshare", "--user", "--map-root-user", "--net", "--fork", "sleep", "60"])
        try:
            pid = None
            for _ in range(200):  # the forked child of unshare holds the namespaces
                kids = subprocess.run(["pgrep", "-P", str(holder.pid)], capture_output=True, text=True).stdout.split()
                if kids:
                    pid = kids[0]
                    break
                time.sleep(0.01)
            assert pid, "unshare child not found"
            slirp = subprocess.Popen(["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", pid,
                                      "tap0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(200):
                    r = subprocess.run(["nsenter", "-t", pid, "-U", "-n", "--preserve-credentials", "ip", "-4", "addr",
                                        "show", "tap0"], capture_output=True, text=True)
                    if "10.0.2.100" in r.stdout:
                        break
                    time.sleep(0.02)
                t = time.perf_counter()
                subprocess.run(["nsenter", "-t", pid, "-U", "-n", "--preserve-credentials", "sh", "-c", script],
                               check=True, capture_output=True)
                return time.perf_counter() - t
            finally:
                slirp.kill()
                slirp.wait()
        finally:
            holder.kill()
            holder.wait()

    empty = statistics.median(in_sandbox("true") for _ in range(3))  # session overhead to subtract
    big_sb, big_host, big_slirp = [], [], []
    for _ in range(3):  # interleaved
        big_sb.append(in_sandbox(blast) - empty)
        big_host.append(on_host(blast.replace("/workspace", str(base / "ws"))))
        big_slirp.append(behind_slirp(blast.replace("/workspace", str(base / "ws"))))
    sb_b, host_b, slirp_b = (statistics.median(x) for x in (big_sb, big_host, big_slirp))
    print(f"TCP throughput, large writes ({a.mib} MiB): sandbox {a.mib / sb_b:.0f} MiB/s, "
          f"behind slirp4netns without gVisor {a.mib / slirp_b:.0f} MiB/s, host {a.mib / host_b:.0f} MiB/s; "
          f"sandbox/slirp4netns = {slirp_b / sb_b:.2f}")
    sb_t = statistics.median(in_sandbox(tput) for _ in range(3)) - empty
    host_t = statistics.median(on_host(tput) for _ in range(3))
    sb_c = statistics.median(in_sandbox(conns) for _ in range(3)) - empty
    host_c = statistics.median(on_host(conns) for _ in range(3))
    print(f"TCP throughput, busybox nc small writes ({a.mib} MiB): sandbox {a.mib / sb_t:.0f} MiB/s, host {a.mib / host_t:.0f} MiB/s, "
          f"ratio host/sandbox = {host_t and sb_t / host_t:.2f}")
    print(f"connect+close latency ({a.conns} conns): sandbox {sb_c / a.conns * 1000:.2f} ms, "
          f"host {host_c / a.conns * 1000:.2f} ms, ratio = {sb_c / host_c:.2f}")
finally:
    srv.kill()
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)
