#!/usr/bin/python3
"""Host escalation: round trip and streaming throughput (any build: the two
auto-approval rules are the configuration's own [[escalation.auto_approve]]).

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

Both are measured --reps times, baseline and escalation interleaved, and
the medians compared (one run of each is noisy on a shared machine).
--only rt|thru runs one part. --runtime-parent puts XDG_RUNTIME_DIR (and so
the mailbox) elsewhere than /tmp: /run/user is a tmpfs on most hosts, and on
an ext4 without a journal every chunk file's inode allocation scans past the
recently deleted ones (recently_deleted() in the coordinator's profile).

Where the time goes (perf of the coordinator; a client built with timers):
  throughput  per 49,152-byte chunk the host signs (Ed25519 hashes the
              record twice: 0.39 s per 100 MiB on the reference machine)
              and the client, in gVisor, opens the file (~70 us), reads it
              (~180 us), verifies (~0.25 s per 100 MiB) and every 6th chunk
              makes an acknowledgement file (~0.4 ms). The signatures alone
              are ~0.6 CPU-s per 100 MiB, the bare `cat` ~0.07 s: with one
              signed file per 48 KiB the goal of 0.8 is out of reach.
  round trip  most of it is the sandbox starting a process (a shell loop
              of /bin/true alone costs ~15 ms per iteration in gVisor); the
              client's own part is ~6 ms, of which ~2-4 ms on the host
              (the host process recorded twice in the Domain Store, four
              fdatasyncs).
"""
import argparse
import os
import re
import shutil
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
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--only", choices=["rt", "thru"])
ap.add_argument("--runtime-parent", default="/tmp",
                help="where XDG_RUNTIME_DIR (and so the mailbox) is made; /run/user is a tmpfs on most hosts")
a = ap.parse_args()

TRUE, CAT = os.path.realpath("/bin/true"), os.path.realpath("/bin/cat")
base = Path(tempfile.mkdtemp(prefix="lzbench-esc"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir=a.runtime_parent))
ws = base / "ws"
ws.mkdir()
# The same bytes twice: in the workspace for the baseline (runsc exec cat),
# and beside it for the host's cat (an auto-approval rule may not name a
# file the sandbox can write: the configuration refuses it).
blob = base / "blob"
with open(blob, "wb") as f:
    for _ in range(a.mib):
        f.write(os.urandom(1 << 20))
shutil.copyfile(blob, ws / "blob")
# The rules, as a user writes them: exact argument vectors, no extra
# arguments, run in a fresh empty directory (the default cwd).
(cfgdir / "config.toml").write_text(
    f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n'
    f'[escalation]\n[[escalation.auto_approve]]\nargv = ["{TRUE}"]\n'
    f'[[escalation.auto_approve]]\nargv = ["{CAT}", "{blob}"]\n'
    f'[profiles.bench]\nimage = "{a.image}"\n')
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime), TERM="xterm")


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
empty = statistics.median(in_session(":") for _ in range(5))
med = statistics.median

if a.only != "thru":
    floors, rts, recs = [], [], []
    for _ in range(a.reps):
        for _ in range(a.n):
            t = time.perf_counter()
            runsc_exec("/bin/true")
            floors.append(time.perf_counter() - t)
        # stdin from /dev/null: the piped path an agent's tool call takes
        # (no host terminal is made); the client reports its own record
        # round trip (request written -> result-end read) on stderr.
        loop = in_session(f"rm -f /tmp/esc-t; i=0; while [ $i -lt {a.n} ]; do LAZARET_ESCALATE_TIMING=1 "
                          f"/run/lazaret/escalate -- {TRUE} </dev/null 2>>/tmp/esc-t || exit 9; "
                          f"i=$((i+1)); done")
        rts.append(max(loop - empty, 1e-9) / a.n)
        s.sendline("cat /tmp/esc-t; echo T''DONE")
        s.expect("TDONE")  # the command line echoes T''DONE, not this
        recs.extend(int(x) / 1e6 for x in re.findall(r"request to end (\d+) us", s.before))
    rt, mf, rec = med(rts), med(floors), med(recs)
    print(f"round trip, {a.reps}x{a.n} requests: auto-approved /bin/true {rt * 1000:.2f} ms each, client start "
          f"in the sandbox included (median of loop means; min {min(rts) * 1000:.2f})  bare runsc exec true "
          f"{mf * 1000:.2f} ms (median)  ratio {rt / mf:.2f} (goal <= 0.5)")
    print(f"record round trip (request written -> result-end read, reported by the client, median of "
          f"{len(recs)}): {rec * 1000:.2f} ms  ratio to runsc exec true {rec / mf:.2f}")

if a.only != "rt":
    size = a.mib << 20
    bases, escs = [], []
    runsc_exec("cat", "/workspace/blob")  # warm the page cache and the gofer
    for _ in range(a.reps):
        t = time.perf_counter()
        runsc_exec("cat", "/workspace/blob")
        bases.append(time.perf_counter() - t)
        escs.append(in_session(f"/run/lazaret/escalate -- {CAT} {blob} > /dev/null") - empty)
    base_t, esc_t = med(bases), med(escs)
    print(f"throughput, {a.reps}x{a.mib} MiB: escalation {size / esc_t / 2**20:.1f} MiB/s ({esc_t:.3f} s median, "
          f"min {min(escs):.3f})  runsc exec cat {size / base_t / 2**20:.1f} MiB/s ({base_t:.3f} s median)  "
          f"ratio {base_t / esc_t:.2f} (goal >= 0.8)")
s.sendline("exit")
s.expect(pexpect.EOF)
