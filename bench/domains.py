#!/usr/bin/python3
"""Shared Domains: warm join, coordinator memory, keystroke latency.

Run as an unprivileged user (bench/run.sh domains does). All figures are
measured in this one invocation, ratios against a baseline of the same run:

  join      `lazaret run -- true` into a running Domain vs bare
            `runsc exec <sandbox> /bin/true` into the same sandbox (entered
            with nsenter into the Supervisor's namespaces, like the
            coordinator does): goal <= 1.15
  memory    the Host Coordinator's resident set (VmRSS) with 1 and with 16
            attached sessions
  latency   keystroke echo round trip in one PTY session while another
            session floods its terminal (`yes`), vs the same with no flood
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pexpect

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True)
ap.add_argument("-n", type=int, default=15)
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench-dom"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
(cfgdir / "config.toml").write_text(f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n[profiles.bench]\nimage = "{a.image}"\n')
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime), TERM="xterm")
ws = base / "ws"
ws.mkdir()


def pgrep(pattern):
    out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def wait_for(pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    raise SystemExit("timed out")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def spawn_session(args=()):
    c = pexpect.spawn(a.lazaret, ["run", "-p", "bench", *args], cwd=str(ws), env=env, encoding="utf-8",
                      timeout=60, dimensions=(24, 80))
    c.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default
    return c


# A Domain kept running by one session.
holder = spawn_session()
holder.expect(r"[#$] ")
(hc,) = pgrep(f"__coordinator .*--workspace {ws}")
(rs,) = pgrep(f"__supervisor .*--state {runtime}/")
state = next(runtime.glob("lazaret/*/runsc"))
cid = "lz-" + state.parent.name

join, floor = [], []
for i in range(a.n):
    t = time.perf_counter()
    subprocess.run(["nsenter", "-t", str(rs), "-U", "-m", "-n", "--preserve-credentials", "runsc", "--root",
                    str(state), "exec", cid, "/bin/true"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    floor.append(time.perf_counter() - t)
    t = time.perf_counter()
    subprocess.run([a.lazaret, "run", "-p", "bench", "--", "true"], cwd=ws, env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    join.append(time.perf_counter() - t)
mj, mf = statistics.median(join), statistics.median(floor)
print(f"warm join, medians of {a.n} (s): lazaret run -- true {mj:.4f}  bare runsc exec {mf:.4f}  "
      f"ratio {mj / mf:.2f} (goal <= 1.15)")

rss1 = rss_kib(hc)
more = []
for i in range(15):
    c = spawn_session()
    c.expect(r"[#$] ")
    more.append(c)
rss16 = rss_kib(hc)
print(f"coordinator VmRSS: 1 session {rss1} KiB, 16 sessions {rss16} KiB "
      f"({(rss16 - rss1) / 15:.0f} KiB per extra session)")
for c in more:
    c.sendline("exit")
for c in more:
    c.expect(pexpect.EOF)


def echo_latency(sess, n):
    """Median time from a keystroke to its echo, through the session PTY
    (guest: raw mode, `head -c n` writes each byte back)."""
    sess.sendline(f"stty raw -echo; head -c {n}; stty sane; echo; echo DO''NE")
    time.sleep(0.3)  # lets stty take effect; not part of what is measured
    lat = []
    for i in range(n):
        ch = chr(ord("a") + i % 26)
        t = time.perf_counter()
        sess.send(ch)
        sess.expect_exact(ch, timeout=10)
        lat.append(time.perf_counter() - t)
    sess.expect("DONE")
    sess.expect(r"[#$] ")
    return statistics.median(lat)


quiet = spawn_session()
quiet.expect(r"[#$] ")
base_lat = echo_latency(quiet, a.n * 4)
flood = spawn_session()
flood.expect(r"[#$] ")
flood.sendline("yes 0123456789abcdefghijklmnopqrstuvwxyz")
flood.expect("0123456789abcdef")
flood_lat = echo_latency(quiet, a.n * 4)
print(f"keystroke echo, median (ms): quiet {base_lat * 1000:.2f}  while another session floods "
      f"{flood_lat * 1000:.2f}  ratio {flood_lat / base_lat:.2f}")
flood.sendcontrol("c")
flood.expect(r"[#$] ", timeout=30)
for c in (flood, quiet, holder):
    c.sendline("exit")
    c.expect(pexpect.EOF)
