#!/usr/bin/python3
"""Host escalation: round trip and streaming throughput (test builds only:
the rules come from the test hook LAZARET_TEST_AUTO_APPROVE).

Run as an unprivileged user (bench/run.sh escalation). Ratios against a
baseline measured in this one run, into the same Domain:

  round trip  an auto-approved /bin/true through the mailbox (request,
              ack, decision, host execution, end), timed inside a session
              over N requests, vs a bare `runsc exec <sandbox> /bin/true`
              (nsenter into the Supervisor's namespaces, as bench/domains.py):
              goal <= 0.5
  throughput  100 MiB of a host file streamed through the 8-chunk ack window
              into the sandbox (> /dev/null there) vs `runsc exec cat` of the
              same bytes from the workspace: goal >= 0.8
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
ap.add_argument("-n", type=int, default=30)
ap.add_argument("--mib", type=int, default=100)
a = ap.parse_args()

TRUE, CAT = os.path.realpath("/bin/true"), os.path.realpath("/bin/cat")
base = Path(tempfile.mkdtemp(prefix="lzbench-esc"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
(cfgdir / "config.toml").write_text(f'[storage]\ndata_root = "{storage}"\n[profiles.bench]\nimage = "{a.image}"\n')
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
ws = base / "ws"
ws.mkdir()
blob = ws / "blob"
with open(blob, "wb") as f:
    for _ in range(a.mib):
        f.write(os.urandom(1 << 20))
rules = "\x1e".join(["\x1f".join([TRUE]), "\x1f".join([CAT, str(blob)])])
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime), TERM="xterm",
           LAZARET_TEST_AUTO_APPROVE=rules)


def pgrep(pattern):
    out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


s = pexpect.spawn(a.lazaret, ["run", "-p", "bench"], cwd=str(ws), env=env, encoding="utf-8", timeout=600,
                  dimensions=(24, 200))
s.delaybeforesend = None
s.expect(r"[#$] ")
(rs,) = pgrep(f"__supervisor .*--state {runtime}/")
state = next(runtime.glob("lazaret/*/runsc"))
cid = "lz-" + state.parent.name


def runsc_exec(*argv, out=subprocess.DEVNULL):
    subprocess.run(["nsenter", "-t", str(rs), "-U", "-m", "-n", "--preserve-credentials", "runsc", "--root",
                    str(state), "exec", cid, *argv], check=True, stdout=out, stderr=subprocess.DEVNULL)


def in_session(cmd):
    """Wall time of one shell command line in the session (marker to marker)."""
    s.sendline(f"{cmd}; echo E''ND$?")
    t = time.perf_counter()
    s.expect(r"END(\d+)")
    el = time.perf_counter() - t
    assert s.match.group(1) == "0", (cmd, s.before)
    return el


in_session(f"/run/lazaret/escalate -- {TRUE}")  # warm
floor = []
for _ in range(a.n):
    t = time.perf_counter()
    runsc_exec("/bin/true")
    floor.append(time.perf_counter() - t)
empty = statistics.median(in_session(":") for _ in range(5))
loop = in_session(f"i=0; while [ $i -lt {a.n} ]; do /run/lazaret/escalate -- {TRUE} || exit 9; i=$((i+1)); done")
rt = max(loop - empty, 1e-9) / a.n
mf = statistics.median(floor)
print(f"round trip, {a.n} requests: auto-approved /bin/true {rt * 1000:.2f} ms each  "
      f"bare runsc exec true {mf * 1000:.2f} ms (median)  ratio {rt / mf:.2f} (goal <= 0.5)")

size = a.mib << 20
t = time.perf_counter()
runsc_exec("cat", "/workspace/blob")
base_t = time.perf_counter() - t
esc_t = in_session(f"/run/lazaret/escalate -- {CAT} {blob} > /dev/null") - empty
print(f"throughput, {a.mib} MiB: escalation {size / esc_t / 2**20:.1f} MiB/s ({esc_t:.2f} s)  "
      f"runsc exec cat {size / base_t / 2**20:.1f} MiB/s ({base_t:.2f} s)  ratio {base_t / esc_t:.2f} (goal >= 0.8)")
s.sendline("exit")
s.expect(pexpect.EOF)
