#!/usr/bin/python3
"""Cold start of `lazaret run -- true` against bare `runsc run` (the floor).

Run as an unprivileged user (bench/run.sh does). Prints medians and ratios,
all measured in this one invocation:

  floor      bare `runsc run` of the same prepared rootfs running /bin/true,
             inside a user+net+mount namespace like Lazaret's (unshare)
  fresh      `lazaret run -- true` in a new workspace each time (a new Domain;
             the image is already prepared)
  existing   `lazaret run -- true` again in one workspace (Domain Root exists)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True, help="image reference, e.g. oci:/path")
ap.add_argument("-n", type=int, default=7)
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
(cfgdir / "config.toml").write_text(f'[storage]\ndata_root = "{storage}"\n[profiles.bench]\nimage = "{a.image}"\n')
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime))


def lz(ws):
    t = time.perf_counter()
    subprocess.run([a.lazaret, "run", "-p", "bench", "--", "true"], cwd=ws, env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def wait_gone():
    for _ in range(600):
        if subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "lazaret-core __coordinator"],
                          capture_output=True).returncode != 0:
            return
        time.sleep(0.05)


# Warm up: prepares the image once.
ws0 = base / "ws0"
ws0.mkdir()
lz(ws0)
wait_gone()
rootfs = next(storage.glob("prepared/*/rootfs"))

bundle = base / "bundle"
bundle.mkdir()
(bundle / "config.json").write_text(json.dumps({
    "ociVersion": "1.0.2",
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["/bin/true"], "env": ["PATH=/bin:/usr/bin"], "cwd": "/"},
    "root": {"path": str(rootfs), "readonly": True},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")]},
}))
state = base / "state"
state.mkdir()


def floor(i):
    t = time.perf_counter()
    subprocess.run(["unshare", "--map-root-user", "--map-auto", "--net", "--mount", "runsc", "--root", str(state),
                    "--network=none", "--ignore-cgroups", "run", "--bundle", str(bundle), f"b{i}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


res = {"floor": [], "fresh": [], "existing": []}
for i in range(a.n):
    res["floor"].append(floor(i))
    ws = base / f"fresh{i}"
    ws.mkdir()
    res["fresh"].append(lz(ws))
    wait_gone()
    res["existing"].append(lz(ws0))
    wait_gone()

med = {k: statistics.median(v) for k, v in res.items()}
print(f"cold start, medians of {a.n} (s): floor {med['floor']:.3f}  fresh Domain {med['fresh']:.3f}  "
      f"existing Domain {med['existing']:.3f}")
print(f"ratio fresh/floor    = {med['fresh'] / med['floor']:.2f}  (goal <= 1.25)")
print(f"ratio existing/floor = {med['existing'] / med['floor']:.2f}")
