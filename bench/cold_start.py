#!/usr/bin/python3
"""Cold start of `lazaret run -- true` against bare `runsc run` (the floor).

Run as an unprivileged user (bench/run.sh does). Prints medians and ratios,
all measured in this one invocation:

  floor      bare `runsc run` of Lazaret's own OCI spec (captured from a
             running Domain: the same prepared rootfs, mounts, capabilities,
             hostname; /workspace a plain bind of the workspace, the State
             Anchor's persistent directories plain binds of the rootfs's; the process
             /bin/true) with Lazaret's runsc flags (--network=host inside a
             fresh network namespace, --overlay2=root:dir=..., --ignore-cgroups),
             inside a user+net+mount namespace like Lazaret's (unshare): the
             like-for-like floor (issue: start fast)
  floor-none the old floor: a minimal spec with --network=none (no host
             networking, whose seccomp filter this runsc builds at every boot)
  fresh      `lazaret run -- true` in a new workspace each time (a new Domain;
             the image is already prepared)
  existing   `lazaret run -- true` again in one workspace (Domain Root exists)
"""
import argparse
import datetime
import json
import os
import re
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
ap.add_argument("--baseline", help="another build's lazaret, measured interleaved as 'fresh (baseline)'")
ap.add_argument("--keep-logs", help="copy each fresh Domain's coordinator.log into this directory")
ap.add_argument("--raw", help="write every run's seconds and phases (JSON) to this file, for paired ratios")
ap.add_argument("--exec-floor", action="store_true",
                help="also time runsc's own `exec /bin/true` into a running sandbox of the same spec (the part "
                     "of a session's start that is runsc's, with no Lazaret in it), and its boot of that spec "
                     "to its first process, in N rounds after the others")
ap.add_argument("--git", action="store_true",
                help="make each fresh workspace a small Git repository (one commit), as a user's project is: "
                     "the host Git scan and the router's repository read are then on the path")
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
(cfgdir / "config.toml").write_text(f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n[profiles.bench]\nimage = "{a.image}"\n')
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime))


def lz(ws, wall=None, exe=None):
    w0 = time.time()
    t = time.perf_counter()
    subprocess.run([exe or a.lazaret, "run", "-p", "bench", "--", "true"], cwd=ws, env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = time.perf_counter() - t
    if wall is not None:
        wall.extend((w0, w0 + d))
    return d


# Phases of Lazaret's own time, from the coordinator log's timestamps (UTC,
# ms): each phase ends at the first line matching its pattern after the
# previous phase's end. The first starts when the client is started, the
# last ends when it exits (the teardown after the session's EXIT is not on
# the client's path).
PHASES = [
    ("client, config, image lookup, coordinator spawn", r"coordinator for Domain "),
    ("Domain lock, store, recovery, generation row", r"generation \d+ \(State Anchor"),
    ("lease, host Git scan, Supervisor spawn", r"Runtime Supervisor started"),
    # Without persistent directories there is no State Anchor: the phase
    # then ends at the Trust Anchor.
    ("Supervisor staged, ID maps, released, State Anchor mounted", r"State Anchor mounted|Trust Anchor created"),
    ("Trust Anchor, network intents, slirp4netns staged", r"helper process slirp4netns staged"),
    # Since the start overlap (docs/network.md, "Readiness") the helper is
    # only launched here; its readiness, its commit and the policy come
    # while runsc boots (inside "runsc run to init ready"). Builds before
    # it log "started" after the helper was ready and committed.
    ("slirp4netns launched (before the overlap: to ready, committed)", r"connectivity helper slirp4netns (started|launched)"),
    ("bundle, BOOT, routers, runsc staged (before: NET, policy too)", r"sandbox process runsc staged"),
    ("runsc run to init ready (and the policy, since the overlap)", r"sandbox ready:"),
    ("ready commit, publication", r"generation \d+ publication -> committed"),
    # The first session's runsc exec client is started while runsc boots
    # (session.c, hc_session_prestart): here only its process spec is given.
    ("client join, hello, process spec to the exec client", r"session \d+: exec started"),
    ("runsc exec + command to its exit", r"session \d+: ended"),
    ("exit to client", None),
]


def log_times(path):
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) hc\[\d+\]: (.*)", line)
        if m:
            ts = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
            out.append((ts.replace(tzinfo=datetime.timezone.utc).timestamp(), m.group(2)))
    return out


def phases(ws, wall):
    """Per-phase ms of one fresh start whose client ran during wall."""
    logs = []
    for p in storage.glob("domains/*/coordinator.log"):
        try:
            if f"workspace {ws})" in p.read_text(errors="replace"):
                logs.append(p)
        except OSError:
            pass
    if len(logs) != 1:
        return None
    if a.keep_logs:
        Path(a.keep_logs, f"{ws.name}.log").write_text(logs[0].read_text(errors="replace"))
    lines = [x for x in log_times(logs[0]) if wall[0] - 1 <= x[0] <= wall[1] + 1]
    res, prev, i = {}, wall[0], 0
    for name, pat in PHASES:
        if pat is None:
            end = wall[1]
        else:
            while i < len(lines) and not re.search(pat, lines[i][1]):
                i += 1
            if i == len(lines):
                return None
            end = lines[i][0]
        res[name] = 1000 * (end - prev)
        prev = end
    return res


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

def capture_spec():
    """Lazaret's own config.json, from a Domain kept running for a moment."""
    ws = base / "capture"
    ws.mkdir()
    p = subprocess.Popen([a.lazaret, "run", "-p", "bench", "--", "sleep", "5"], cwd=ws, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            found = list(runtime.glob("lazaret/*/bundle/config.json"))
            if found:
                spec = json.loads(found[0].read_text())
                # Which bind sources are directories, while they exist.
                for m in spec["mounts"]:
                    m["_dir"] = os.path.isdir(m.get("source", ""))
                return spec, found[0].parent.parent, ws
            time.sleep(0.025)
        sys.exit("cold_start: no Lazaret bundle appeared within 10 s")
    finally:
        p.wait(timeout=60)
        wait_gone()


spec, rtdir, capture_ws = capture_spec()
files = base / "files"
files.mkdir()
for m in spec["mounts"]:
    src = m.get("source", "")
    is_dir = m.pop("_dir")
    if m["destination"] == "/workspace":
        m["source"] = str(capture_ws)  # a plain bind, where Lazaret has its router
    elif src.startswith(str(rtdir) + "/") and "/anchor/" in src:
        # The State Anchor's overlay of a persistent directory: here a plain
        # bind of the prepared rootfs's own directory.
        m["source"] = str(rootfs) + m["destination"]
    elif src.startswith(str(rtdir) + "/"):
        copy = files / m["destination"].strip("/").replace("/", "_")
        if is_dir:  # the escalation mailbox: empty, as at start
            copy.mkdir()
        else:  # resolv.conf, hosts, hostname: same content, kept
            copy.write_text(Path(src).read_text() if Path(src).exists() else "")
        m["source"] = str(copy)
spec["process"]["args"] = ["/bin/true"]
spec["process"]["terminal"] = False
# --network=host uses the namespace runsc runs in (a fresh one from unshare).
spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
bundle = base / "bundle"
bundle.mkdir()
(bundle / "config.json").write_text(json.dumps(spec))
overlay = base / "overlay"
overlay.mkdir()

bundle_none = base / "bundle-none"
bundle_none.mkdir()
(bundle_none / "config.json").write_text(json.dumps({
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
                    "--network=host", "--ignore-cgroups", f"--overlay2=root:dir={overlay}", "run", "--bundle",
                    str(bundle), f"h{i}"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def floor_none(i):
    t = time.perf_counter()
    subprocess.run(["unshare", "--map-root-user", "--map-auto", "--net", "--mount", "runsc", "--root", str(state),
                    "--network=none", "--ignore-cgroups", "run", "--bundle", str(bundle_none), f"b{i}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


# The exec floor: one shell in the same kind of namespaces runs the sandbox
# detached (its first process sleeps), times runsc's `exec /bin/true` into
# it (date +%s%N around it), then kills and deletes it.
bundle_sleep = base / "bundle-sleep"
bundle_sleep.mkdir()
spec_sleep = json.loads((bundle / "config.json").read_text())
spec_sleep["process"]["args"] = ["/bin/sleep", "120"]
(bundle_sleep / "config.json").write_text(json.dumps(spec_sleep))


def exec_floor(i):
    r = ["runsc", "--root", str(state), "--network=host", "--ignore-cgroups", f"--overlay2=root:dir={overlay}"]
    q = " ".join(r)
    script = (f"b0=$(date +%s%N); {q} run -detach --bundle {bundle_sleep} x{i} >/dev/null 2>&1 </dev/null || exit 1; "
              f"t0=$(date +%s%N); {q} exec x{i} /bin/true </dev/null >/dev/null 2>&1; rc=$?; t1=$(date +%s%N); "
              f"{q} kill x{i} KILL >/dev/null 2>&1; {q} delete -force x{i} >/dev/null 2>&1; "
              f"[ $rc -eq 0 ] && echo $((t0 - b0)) $((t1 - t0))")
    out = subprocess.run(["unshare", "--map-root-user", "--map-auto", "--net", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    f = out.stdout.split()
    if out.returncode != 0 or len(f) != 2 or not all(x.isdigit() for x in f):
        sys.exit(f"cold_start: the exec floor failed: {out.stderr[-500:]}")
    # `delete -force` returns before the killed sandbox's processes are all
    # gone: a bounded wait for them, so that the next round starts alone.
    for _ in range(400):
        if subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "runsc"], capture_output=True).returncode != 0:
            break
        time.sleep(0.025)
    return int(f[0]) / 1e9, int(f[1]) / 1e9


def new_workspace(ws):
    ws.mkdir()
    if a.git:
        (ws / "README").write_text("bench\n")
        g = ["git", "-C", str(ws), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        for cmd in (["init", "-q"], ["add", "README"], ["commit", "-q", "-m", "bench"]):
            subprocess.run(g + cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


res = {"floor": [], "floor-none": [], "fresh": [], "existing": []}
phase_runs, base_phase_runs = [], []
for i in range(a.n):
    res["floor"].append(floor(i))
    res["floor-none"].append(floor_none(i))
    ws = base / f"fresh{i}"
    new_workspace(ws)
    wall = []
    res["fresh"].append(lz(ws, wall))
    wait_gone()
    ph = phases(ws, wall)
    if ph:
        phase_runs.append(ph)
    if a.baseline:
        ws = base / f"base{i}"
        new_workspace(ws)
        wall = []
        res.setdefault("fresh (baseline)", []).append(lz(ws, wall, a.baseline))
        wait_gone()
        ph = phases(ws, wall)
        if ph:
            base_phase_runs.append(ph)
    res["existing"].append(lz(ws0))
    wait_gone()

# The exec floor in rounds of its own, after the others: interleaved in
# front of a fresh start, the killed sandbox's exit ran beside that start
# (measured: the fresh start after it 2-5 % slower) and biased the pairs.
for i in range(a.n if a.exec_floor else 0):
    boot, ex = exec_floor(i)
    res.setdefault("runsc run -detach", []).append(boot)
    res.setdefault("runsc exec", []).append(ex)

if a.raw:
    Path(a.raw).write_text(json.dumps({"runs": res, "phases": phase_runs, "baseline_phases": base_phase_runs}))
med = {k: statistics.median(v) for k, v in res.items()}
# Paired per round (floor, fresh and baseline measured back to back): the
# median of the per-round ratios is steadier than the ratio of medians
# when the machine's load drifts during a run.
paired = [f / fl for f, fl in zip(res["fresh"], res["floor"])]
print(f"paired fresh/floor, median of {len(paired)} rounds: {statistics.median(paired):.2f}")
if a.baseline:
    pb = [b / fl for b, fl in zip(res["fresh (baseline)"], res["floor"])]
    pf = [f / b for f, b in zip(res["fresh"], res["fresh (baseline)"])]
    print(f"paired baseline fresh/floor: {statistics.median(pb):.2f}; paired fresh/baseline fresh: "
          f"{statistics.median(pf):.3f}")
print(f"fresh workspaces: {'small Git repositories' if a.git else 'plain directories'}")
print(f"cold start, medians of {a.n} (s): floor (Lazaret's spec, --network=host) {med['floor']:.3f}  "
      f"floor (--network=none) {med['floor-none']:.3f}  fresh Domain {med['fresh']:.3f}  "
      f"existing Domain {med['existing']:.3f}")
# The spread of each line: the interquartile range and the extremes.
for k, v in res.items():
    q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
    print(f"  {k:18} median {med[k]:.3f}  quartiles {q[0]:.3f}-{q[2]:.3f}  min-max {min(v):.3f}-{max(v):.3f} s")
print(f"ratio fresh/floor         = {med['fresh'] / med['floor']:.2f}  (goal <= 1.10)")
print(f"ratio existing/floor      = {med['existing'] / med['floor']:.2f}")
print(f"ratio fresh/floor-none    = {med['fresh'] / med['floor-none']:.2f}  (the old floor)")
print(f"Lazaret's own time per fresh start: {1000 * (med['fresh'] - med['floor']):.0f} ms")
if a.baseline:
    print(f"fresh Domain (baseline build) {med['fresh (baseline)']:.3f}  "
          f"ratio baseline fresh/floor = {med['fresh (baseline)'] / med['floor']:.2f}  "
          f"own time {1000 * (med['fresh (baseline)'] - med['floor']):.0f} ms")
if a.exec_floor:
    ex = [r["runsc exec + command to its exit"] for r in phase_runs]
    print(f"runsc's own exec of /bin/true into a running sandbox: median {1000 * med['runsc exec']:.1f} ms"
          + (f"; Lazaret's first session, spec given to exit (below): {statistics.median(ex):.1f} ms" if ex else ""))
    print(f"runsc's own boot of the same spec to its first process started (run -detach): median "
          f"{1000 * med['runsc run -detach']:.1f} ms")
if phase_runs:
    cols = [phase_runs] + ([base_phase_runs] if base_phase_runs else [])
    print(f"fresh Domain phases (coordinator log, ms resolution; medians of {len(phase_runs)})"
          + (": this build, baseline build" if len(cols) > 1 else ":"))
    for name, _ in PHASES:
        print("  " + "  ".join(f"{statistics.median(r[name] for r in c):7.1f}" for c in cols) + f" ms  {name}")
    print("  " + "  ".join(f"{statistics.median(sum(r.values()) for r in c):7.1f}" for c in cols) + " ms  total")
else:
    print("fresh Domain phases: no coordinator log matched")
