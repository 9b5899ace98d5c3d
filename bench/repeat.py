#!/usr/bin/python3
"""Repeated commands: `lazaret run -- true` ten times in a row in one
workspace, with the warm linger ([storage] linger_seconds = 5) and without
it (0: every run a cold start). Rounds interleaved; medians per run and of
the ten-run totals, and the ratio. Run as an unprivileged user
(bench/run.sh repeat)."""
import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("-n", type=int, default=10)
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench-rep"))
storage = base / "storage"
envs = {}
for linger in (0, 5):
    cfg = base / f"config{linger}" / "lazaret"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(f'[storage]\ndata_root = "{storage}"\nlinger_seconds = {linger}\n'
                                     f'[profiles.bench]\nimage = "{a.image}"\n')
    rt = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
    envs[linger] = dict(os.environ, XDG_CONFIG_HOME=str(cfg.parent), XDG_RUNTIME_DIR=str(rt))
ws = base / "ws"
ws.mkdir()


def run(env):
    t = time.perf_counter()
    subprocess.run([a.lazaret, "run", "-p", "bench", "--", "true"], cwd=ws, env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def stop(env):
    subprocess.run([a.lazaret, "stop", "-p", "bench"], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):  # bounded: 30 s
        if subprocess.run([a.lazaret, "ps", "--json"], cwd=ws, env=env, capture_output=True,
                          text=True).stdout.strip() in ("[]", ""):
            return
        time.sleep(0.05)


run(envs[0])  # prepares the image once
stop(envs[0])
per = {0: [], 5: []}
tot = {0: [], 5: []}
for _ in range(a.rounds):
    for linger in (0, 5):
        ts = [run(envs[linger]) for _ in range(a.n)]
        per[linger].extend(ts)
        tot[linger].append(sum(ts))
        stop(envs[linger])
m0, m5 = statistics.median(tot[0]), statistics.median(tot[5])
print(f"{a.n} x `lazaret run -- true`, {a.rounds} rounds interleaved:")
print(f"  linger 0: {m0 * 1000:.0f} ms for {a.n} (median of totals), {statistics.median(per[0]) * 1000:.1f} ms per run")
print(f"  linger 5: {m5 * 1000:.0f} ms for {a.n} (median of totals), {statistics.median(per[5]) * 1000:.1f} ms per run "
      f"(the first of each round cold)")
print(f"  ratio linger/no linger: {m5 / m0:.2f}")
