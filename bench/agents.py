#!/usr/bin/python3
"""Agent start: `lazaret run -p claude` on a machine with the image prepared,
to Claude Code's first screen ("Welcome to Claude Code"), against `runsc
exec` of `claude --version` into the same running Domain (the floor: the
agent's own start in gVisor), interleaved; and the size of each agent image
in the store. Run as a user whose Storage Root already holds the agent
images (bench/run.sh does not build them; `lazaret image bootstrap --agent
claude` does, once):

  python3 bench/agents.py --lazaret build/lazaret --storage /home/U/storage
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pexpect

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--storage", required=True, help="a Storage Root holding builtin:agent-* images")
ap.add_argument("-n", type=int, default=5)
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench-agents"))
cfg = base / "config" / "lazaret"
cfg.mkdir(parents=True)
(cfg / "config.toml").write_text(f'[storage]\ndata_root = "{a.storage}"\nlinger_seconds = 0\n'
                                 '[profiles.default]\nimage = "builtin:debian-bookworm"\n')
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
ws = base / "ws"
ws.mkdir()
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime), TERM="xterm-256color",
           HOME=str(base))


def first_screen():
    t = time.perf_counter()
    c = pexpect.spawn(a.lazaret, ["run", "-p", "claude"], cwd=str(ws), env=env, encoding="utf-8", timeout=300,
                      dimensions=(40, 120))
    c.expect(r"Welcome.{0,40}?to.{0,40}?Claude.{0,40}?Code")
    el = time.perf_counter() - t
    c.sendcontrol("c")
    c.sendcontrol("c")
    c.expect(pexpect.EOF, timeout=60)
    return el


def wait_stopped():
    for _ in range(600):  # bounded: 30 s
        r = subprocess.run([a.lazaret, "ps", "--json"], cwd=ws, env=env, capture_output=True, text=True)
        if r.stdout.strip() in ("[]", ""):
            return
        time.sleep(0.05)


def exec_floor():
    """runsc exec claude --version into a running Domain of the profile."""
    p = subprocess.Popen([a.lazaret, "run", "-p", "claude", "--", "sleep", "600"], cwd=ws, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", f"__supervisor .*--state {runtime}/"],
                                 capture_output=True, text=True).stdout.split()
            states = list(runtime.glob("lazaret/*/runsc"))
            if out and states:
                break
            time.sleep(0.05)
        rs, state = out[0], states[0]
        cid = "lz-" + state.parent.name
        argv = ["nsenter", "-t", rs, "-U", "-m", "-n", "--preserve-credentials", "runsc", "--root", str(state),
                "exec", cid, "claude", "--version"]
        for _ in range(600):  # the sandbox may not be ready yet
            if subprocess.run(argv, capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        ts = []
        for _ in range(a.n):
            t = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            ts.append(time.perf_counter() - t)
        return ts
    finally:
        p.kill()
        p.wait()
        wait_stopped()


first_screen()  # prepares (once) and warms the page cache
wait_stopped()
screens, floors = [], []
for _ in range(a.n):
    screens.append(first_screen())
    wait_stopped()
floors = exec_floor()
fs, fl = statistics.median(screens), statistics.median(floors)
print(f"claude: `lazaret run -p claude` to the first screen {fs * 1000:.0f} ms (median of {a.n}, a cold Domain "
      f"each time)  runsc exec `claude --version` {fl * 1000:.0f} ms  ratio {fs / fl:.2f}")
imgs = subprocess.run([a.lazaret, "image", "ls", "--json"], cwd=ws, env=env, capture_output=True, text=True)
try:
    for im in json.loads(imgs.stdout).get("images", []):
        if "agent-" in im.get("name", ""):
            print(f"image {im['name']}: {im.get('size', 0) / 2**20:.0f} MiB (compressed layers in the store)")
except (ValueError, AttributeError):
    print(imgs.stdout)
