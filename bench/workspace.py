#!/usr/bin/python3
"""The workspace through the router against a plain runsc bind, one run.

  bench/workspace.py --build BUILD_DIR [--storage DIR] [--user lzt3]
                     [--modes bind,watch,shared] [--rounds 2]
                     [--files 30000] [--dirs 630] [--storm 20000]
                     [--ops first,status,...] [--image REF]

BUILD_DIR is a meson build directory; a release build will do
(`meson setup build-rel --buildtype=release -Dtest_hooks=false`) for the
default modes:

  bind     the baseline (issue 12): bare `runsc run` of Lazaret's own OCI
           spec, captured from a running Domain of the same profile (as
           bench/cold_start.py's floor): the same prepared rootfs, the
           State Anchor's persistent directories the same kernel overlays
           (a fresh upper layer of this mode's), the same tmpfs and binds,
           with /workspace (and its .git) a plain bind of this mode's copy
           of the repository (no router, no Git policy); Lazaret's runsc
           flags (--network=host inside a fresh network namespace,
           --overlay2=root:dir=..., --ignore-cgroups) inside a user+net+
           mount namespace like the Supervisor's (unshare --map-root-user
           --map-auto); the process the timing script below with the
           environment, user and capabilities of a Lazaret session
  watch    the router as shipped: --watch 10 (long timeouts, inotify
           invalidation)
  shared   the router as shipped but with ignored_state = false (no
           ignored-state routing): what the routing itself costs
  private  the router as shipped with private_dirs = ["node_modules"]:
           node_modules/ a direct bind of the Domain's store (istorm and
           burst run there without the router)

These need a build configured with -Dtest_hooks=true (scripts/itest.sh
turns it on; they are chosen with the test hook LAZARET_TEST_WORKSPACE, and
the script refuses them on a build without the hook):

  bind-hook the old baseline: `lazaret run` with /workspace a plain runsc
           bind of the directory (LAZARET_TEST_WORKSPACE=bind: the Domain
           as usual, no router in the sandbox's /workspace); `bind` was
           checked against it (docs/notes/2026-12-04-workspace-bench-release.md)
  nowatch  the router with timeouts of 0 (before --watch)
  eager    the router as shipped but with --eager-open: an OPEN and a
           RELEASE per file opened (before zero-message opens)
  classic  the router as shipped but on /dev/fuse even where FUSE over
           io_uring is on (LAZARET_TEST_FUSE=classic)
  pinned   the same with its one /dev/fuse thread pinned to one CPU
           (LAZARET_TEST_FUSE=pinned)

With --before BUILD_DIR, a second build (the build before a change):

  before   that build's `watch`, in the same run and rounds (interleaved
           with the others), so that a change is measured against the
           build before it

Run as root, the script stages the binaries where the user can read them
and runs itself again as that user. A repository of --files small files in
--dirs directories is made once and copied per mode. Rounds alternate the
order of the modes; each round is one `lazaret run` per mode (one bare
`runsc run` for `bind`) on the real Debian image (--storage: a Storage
Root where it is bootstrapped), timing inside with bash's $EPOCHREALTIME:

  first    the session's first `git status` (gVisor's inode numbers and
           owners differ from the index's; with the sessions'
           core.checkStat=minimal git no longer re-reads every file)
  status   warm `git status`, 3 times
  storm    20 000 files: create (bash `: >`), stat (`[ -f ]`), delete (`rm -r`):
           bash builtins, 2 processes
           in 100 new directories of the tree (untracked)
  istorm   the same in node_modules/ (git-ignored: the Domain's store)
  grep     `grep -r` of a string no file holds over the tracked tree
  burst    an `npm install`-like write burst: 1000 packages of 5 small files
           each in node_modules/ (their directories made by one `mkdir -p`,
           the files by bash: one process, as npm is), then `rm -r`

  npmci    (only when named in --ops) a real `npm ci --offline` of
           bench/npm/ (467 packages, about 11 000 entries in node_modules/:
           express, react, lodash, typescript, eslint, webpack, jest) from
           a prepared npm cache, with --ignore-scripts; then `rm -rf` of
           what it installed (npmrm). The cache is filled once per run on
           the host (from the npm registry, before the rounds; `npm` must
           be on the host) and given to each session on its standard input
           as a tar stream, unpacked into /tmp untimed: the sandbox needs no
           network. The image must hold npm: --image builtin:agent-claude
           (bootstrapped in the Storage Root, or built the first time).

The repository's committed .gitignore ignores node_modules/ (with npmci,
bench/npm's package.json and package-lock.json are committed too).

It prints medians per mode and the ratio to the first mode (`bind` by
default), and the host's own `git status` for scale. The Domain is stopped
after every round.
"""
import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import run_staged_as_user  # noqa: E402

BINARIES = ["lazaret", "lazaret-core", "lazaret-init", "lazaret-router", "lazaret-escalate", "lazaret-gate"]
# Modes chosen with the test hook LAZARET_TEST_WORKSPACE (test builds only),
# and the hook's value for each.
HOOK_MODES = {"bind-hook": "bind", "nowatch": "nowatch", "eager": "eager"}
# Modes chosen with the test hook LAZARET_TEST_FUSE (test builds only).
FUSE_MODES = {"classic": "classic", "pinned": "pinned"}
MODES = ["bind", "watch", "shared", "private", "before", *HOOK_MODES, *FUSE_MODES]
DEFAULT_OPS = ["first", "status", "storm", "istorm", "grep", "burst"]
ALL_OPS = [*DEFAULT_OPS, "npmci"]
NPM_DIR = Path(__file__).resolve().parent / "npm"

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True, help="meson build directory (a release build will do)")
ap.add_argument("--storage", help="a Storage Root to reuse (the Debian image bootstrapped there once)")
ap.add_argument("--user", default="lztest", help="the unprivileged user to run as, when started as root")
ap.add_argument("--modes", default="bind,watch,shared",
                help=f"comma-separated, the first the reference of the ratios: {', '.join(MODES)}")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--files", type=int, default=30000)
ap.add_argument("--dirs", type=int, default=630)
ap.add_argument("--storm", type=int, default=20000)
ap.add_argument("--ops", default=",".join(DEFAULT_OPS),
                help=f"comma-separated, in this order: {', '.join(ALL_OPS)} (npmci also times npmrm)")
ap.add_argument("--image", default="builtin:debian-bookworm",
                help="the bench profile's image (npmci needs npm: builtin:agent-claude)")
ap.add_argument("--before", help="a second build directory, for the mode `before`")
a = ap.parse_args()

modes_asked = a.modes.split(",")
for m in modes_asked:
    if m not in MODES:
        ap.error(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
if len(set(modes_asked)) != len(modes_asked):
    ap.error("a mode is named twice")
ops_asked = a.ops.split(",")
for o in ops_asked:
    if o not in ALL_OPS:
        ap.error(f"unknown operation {o!r} (operations: {', '.join(ALL_OPS)})")
if ops_asked != [o for o in ALL_OPS if o in ops_asked]:
    ap.error(f"--ops: name the operations once each, in this order: {', '.join(ALL_OPS)}")
NPM = "npmci" in ops_asked
if NPM and not all((NPM_DIR / f).is_file() for f in ("package.json", "package-lock.json")):
    sys.exit(f"workspace.py: npmci needs {NPM_DIR}/package.json and package-lock.json")
if NPM and not shutil.which("npm"):
    sys.exit("workspace.py: npmci fills its npm cache on the host first: install npm (apt-get install npm)")
if ("before" in modes_asked) != bool(a.before):
    ap.error("the mode `before` and --before BUILD_DIR go together")


def has_test_hooks(build):
    """Whether the build honours LAZARET_TEST_WORKSPACE: a test-hooks build
    (-Dtest_hooks=true) passes the name on to the coordinator and the
    Supervisor (procenv.c's list of hooks); a release build never holds it."""
    return b"LAZARET_TEST_WORKSPACE" in (Path(build) / "lazaret-core").read_bytes()


hooked = [m for m in modes_asked if m in HOOK_MODES or m in FUSE_MODES]
if hooked and not has_test_hooks(a.build):
    sys.exit(f"workspace.py: mode{'s' if len(hooked) > 1 else ''} {', '.join(hooked)} need{'' if len(hooked) > 1 else 's'}"
             f" a build configured with -Dtest_hooks=true (they are chosen with the test hook"
             f" LAZARET_TEST_WORKSPACE); {a.build} has no test hooks. The modes of any build: bind, watch, shared.")


def reexec_as_user():
    """As root: stage the build where the user can read it, run as the user."""
    return run_staged_as_user(
        __file__, a.user, a.storage, {"bin": a.build, **({"before": a.before} if a.before else {})},
        lambda st: ["--build", str(st / "bin"), "--modes", a.modes, "--rounds", str(a.rounds),
                    "--files", str(a.files), "--dirs", str(a.dirs), "--storm", str(a.storm),
                    "--ops", a.ops, "--image", a.image]
        + (["--before", str(st / "before")] if a.before else []), BINARIES,
        extra={"npm/package.json": NPM_DIR / "package.json", "npm/package-lock.json": NPM_DIR / "package-lock.json"}
        if NPM else None)


if os.geteuid() == 0:
    sys.exit(reexec_as_user())

GIT_ENV = {
    "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x.invalid",
    "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x.invalid",
}
# The script each session runs: one part per operation of --ops, in
# order; each part prints "OP MICROSECONDS".
INSIDE_PARTS = {
    "": r"""
set -e
cd /workspace
us() { echo "${EPOCHREALTIME/./}"; }
n=STORM; per=$(( n / 100 ))
""",
    "first": r"""
t=$(us); git status >/dev/null; echo "first $(( $(us) - t ))"
""",
    "status": r"""
for i in 1 2 3; do t=$(us); git status >/dev/null; echo "status $(( $(us) - t ))"; done
""",
    "storm": r"""
t=$(us)
mkdir storm{0..99}
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do : > "storm$d/f$f"; done; done
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do [ -f "storm$d/f$f" ]; done; done
rm -r storm*
echo "storm $(( $(us) - t ))"
""",
    "istorm": r"""
mkdir -p node_modules; t=$(us)
mkdir node_modules/storm{0..99}
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do : > "node_modules/storm$d/f$f"; done; done
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do [ -f "node_modules/storm$d/f$f" ]; done; done
rm -r node_modules/storm*
echo "istorm $(( $(us) - t ))"
""",
    "grep": r"""
t=$(us); grep -r -q NOT-IN-ANY-FILE d* || true; echo "grep $(( $(us) - t ))"
""",
    "burst": r"""
t=$(us)
mkdir -p node_modules/pkg{0..999}/lib
for ((p = 0; p < 1000; p++)); do
  for f in package.json index.js README.md lib/a.js lib/b.js; do echo "module $p $f" > node_modules/pkg$p/$f; done
done
rm -r node_modules/pkg*
echo "burst $(( $(us) - t ))"
""",
    # The npm cache arrives on standard input (a tar stream), unpacked untimed.
    "npmci": r"""
command -v npm >/dev/null || { echo "npmci: no npm in this image (--image builtin:agent-claude)" >&2; exit 3; }
c=$(mktemp -d /tmp/npmc.XXXXXX); tar -x -C "$c"
t=$(us); npm ci --offline --cache "$c" --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
echo "npmci $(( $(us) - t ))"
echo "npmfiles $(find node_modules | wc -l)"
t=$(us); rm -rf node_modules/* node_modules/.[!.]*; echo "npmrm $(( $(us) - t ))"
rm -rf "$c"
""",
}
OPS = [*ops_asked, *(["npmrm"] if NPM else [])]
INSIDE = "".join(INSIDE_PARTS[o] for o in ["", *ops_asked]).replace("STORM", str(a.storm))


def make_repo(path: Path):
    path.mkdir(parents=True)
    per_dir = a.files // a.dirs
    for d in range(a.dirs):
        dd = path / f"d{d // 30:02d}" / f"s{d % 30:02d}"
        dd.mkdir(parents=True)
        for f in range(per_dir):
            (dd / f"f{f:02d}.txt").write_text(f"file {d}/{f}\n")
    (path / ".gitignore").write_text("node_modules/\n")
    if NPM:
        for f in ("package.json", "package-lock.json"):
            shutil.copyfile(NPM_DIR / f, path / f)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "-c", "gc.auto=0", "commit", "-qm", "initial"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "gc", "-q"], check=True, env=GIT_ENV)


def lazaret_env(base: Path, storage: Path, name, ignored_state=True, hook=None, private=False, fuse=None):
    """The environment of `lazaret run` for one mode: its own configuration
    (the bench profile on the Debian image) and runtime directory."""
    cfg = base / f"config-{name}"
    (cfg / "lazaret").mkdir(parents=True)
    (cfg / "lazaret" / "config.toml").write_text(
        f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n\n[profiles.bench]\nimage = "{a.image}"\n'
        + ("" if ignored_state else "ignored_state = false\n")
        + ('private_dirs = ["node_modules"]\n' if private else ""))
    runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
    os.chmod(runtime, 0o700)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": os.environ.get("HOME", "/"),
           "XDG_CONFIG_HOME": str(cfg), "XDG_RUNTIME_DIR": str(runtime), "LANG": "C.UTF-8"}
    if hook:
        env["LAZARET_TEST_WORKSPACE"] = hook
    if fuse:
        env["LAZARET_TEST_FUSE"] = fuse
    return env, runtime


LAZARET = str(Path(a.build) / "lazaret")
NPM_TAR = None  # the npm cache as a tar stream (npmci), made by prepare_npm()


def session_stdin():
    """Each session's standard input: the npm cache for npmci, else nothing."""
    return open(NPM_TAR, "rb") if NPM else subprocess.DEVNULL


def prepare_npm(base: Path):
    """Fills an npm cache for bench/npm/ on the host (from the registry,
    once per run) and packs it as the sessions' tar stream."""
    global NPM_TAR
    proj, cache = base / "npm-project", base / "npm-cache"
    proj.mkdir()
    for f in ("package.json", "package-lock.json"):
        shutil.copyfile(NPM_DIR / f, proj / f)
    t = time.monotonic()
    r = subprocess.run(["npm", "ci", "--cache", str(cache), "--ignore-scripts", "--no-audit", "--no-fund",
                        "--loglevel=error"], cwd=proj, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"workspace.py: filling the npm cache on the host failed (the npm registry must be reachable"
                 f" from the host):\n{r.stderr[-2000:]}")
    entries = sum(1 for _ in (proj / "node_modules").rglob("*"))
    print(f"npm cache filled on the host in {time.monotonic() - t:.0f} s ({entries} entries in node_modules/ there)",
          flush=True)
    shutil.rmtree(proj / "node_modules")
    NPM_TAR = base / "npm-cache.tar"
    subprocess.run(["tar", "-c", "-f", str(NPM_TAR), "-C", str(cache), "."], check=True)
    shutil.rmtree(cache)
END = b"\0LZBENCH-ENV-END\0"


def capture(base: Path, storage: Path):
    """Lazaret's own OCI spec (the bundle's config.json under the runtime
    directory) and a session's environment, from a Domain of the bench
    profile kept running for a moment, as bench/cold_start.py's floor. The
    first `lazaret run` of a new Storage Root bootstraps the Debian image.
    Returns the spec with every source that lives only while the Domain
    runs replaced: the workspace's (the router's view, the workspace's own
    .git/config) by ("ws", rest of the path), the State Anchor's by
    ("anchor", P), the run-time files (resolv.conf, hosts, hostname, the
    escalation mailbox) by copies."""
    ws = base / "capture"
    ws.mkdir()
    # A Git repository as the bench's: the spec's .git binds and hooks tmpfs.
    (ws / ".gitignore").write_text("node_modules/\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "gc.auto=0", "commit", "-qm", "initial"]):
        subprocess.run(["git", "-C", str(ws), *cmd], check=True, env=GIT_ENV)
    env, runtime = lazaret_env(base, storage, "capture")
    # The session prints the environment it was started with, then waits
    # for its stdin to end (bounded).
    script = f'cat /proc/$$/environ; printf "{END.decode().replace(chr(0), chr(92) + "0")}"; read -r -t 600 _ || true'
    errf = open(base / "capture.stderr", "w+b")
    p = subprocess.Popen([LAZARET, "run", "-p", "bench", "--", "bash", "-c", script], cwd=ws, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf)
    try:
        out = b""
        deadline = time.monotonic() + 1800  # a Debian bootstrap included
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        while END not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit("workspace.py: the capture session printed no environment within 30 min")
            if not sel.select(timeout=left):
                continue
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                errf.seek(0)
                sys.exit(f"workspace.py: the capture session ended early:\n{errf.read()[-2000:].decode(errors='replace')}")
            out += chunk
        # The session's key authenticates to that Domain only: not kept.
        envv = [e.decode() for e in out.split(END)[0].split(b"\0") if e and not e.startswith(b"LAZARET_SESSION_KEY=")]
        found = list(runtime.glob("lazaret/*/bundle/config.json"))
        if len(found) != 1:
            sys.exit(f"workspace.py: {len(found)} Lazaret bundles under {runtime} (one expected)")
        spec = json.loads(found[0].read_text())
        rtdir = str(found[0].parent.parent)
        view = next(m["source"] for m in spec["mounts"] if m["destination"] == "/workspace")
        files = base / "floor-files"
        files.mkdir()
        for m in spec["mounts"]:
            src = m.get("source", "")
            if m.get("type") != "bind":
                continue
            for root in (view, str(ws)):
                if src == root or src.startswith(root + "/"):
                    m["source"] = ("ws", src[len(root):])
                    break
            else:
                if src.startswith(rtdir + "/") and src.endswith("/anchor" + m["destination"]):
                    m["source"] = ("anchor", m["destination"])
                elif src.startswith(rtdir + "/"):
                    copy = files / m["destination"].strip("/").replace("/", "_")
                    if os.path.isdir(src):  # the escalation mailbox: empty, as at start
                        copy.mkdir()
                    else:  # resolv.conf, hosts, hostname: the same content
                        shutil.copyfile(src, copy)
                    m["source"] = str(copy)
        left = [m["source"] for m in spec["mounts"] if isinstance(m.get("source"), str)
                and (m["source"].startswith(rtdir) or m["source"].startswith(str(ws)))]
        if left:
            sys.exit(f"workspace.py: the captured spec binds {left}: not known here")
        return spec, envv
    finally:
        p.stdin.close()  # the session's `read` ends
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
        subprocess.run([LAZARET, "stop", "-p", "bench"], cwd=ws, env=env, capture_output=True, timeout=120)
        errf.close()
        shutil.rmtree(runtime, ignore_errors=True)


class Mode:
    """A mode through Lazaret: one `lazaret run` per round."""

    def __init__(self, name, base: Path, storage: Path, repo: Path):
        self.name = name
        self.ws = base / f"ws-{name}"
        subprocess.run(["cp", "-a", str(repo), str(self.ws)], check=True)
        self.samples = {op: [] for op in OPS}
        self.npmfiles = set()
        self.env, self.runtime = lazaret_env(base, storage, name, ignored_state=name != "shared",
                                             hook=HOOK_MODES.get(name), private=name == "private",
                                             fuse=FUSE_MODES.get(name))
        self.lazaret = str(Path(a.before) / "lazaret") if name == "before" else LAZARET

    def run_inside(self, timeout):
        return subprocess.run([self.lazaret, "run", "-p", "bench", "--", "bash", "-c", INSIDE],
                              cwd=self.ws, env=self.env, stdin=session_stdin(), capture_output=True, text=True,
                              timeout=timeout)

    def after_round(self):
        subprocess.run([self.lazaret, "stop", "-p", "bench"], cwd=self.ws, env=self.env, capture_output=True, timeout=120)

    def round(self, timeout=1800):
        r = self.run_inside(timeout)
        if r.returncode != 0:
            raise SystemExit(f"{self.name}: round failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        for line in r.stdout.splitlines():
            op, _, us = line.partition(" ")
            if op in self.samples:
                self.samples[op].append(int(us) / 1000.0)
            elif op == "npmfiles":
                self.npmfiles.add(int(us))
        self.after_round()

    def cleanup(self):
        shutil.rmtree(self.runtime, ignore_errors=True)


# In the bare runsc's namespaces: the State Anchor's overlays, mounted as
# the Supervisor mounts them (anchor.c: userxattr, index=off, metacopy=off,
# nodev), then runsc.
MOUNT_ANCHORS = r"""
set -e
while [ "$1" != -- ]; do
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3,userxattr,index=off,metacopy=off,nodev" "$4"
    shift 4
done
shift
exec "$@"
"""


class Floor(Mode):
    """`bind`: bare `runsc run` of Lazaret's spec, /workspace a plain bind."""

    def __init__(self, name, base: Path, repo: Path, captured):
        self.name = name
        self.ws = base / f"ws-{name}"
        subprocess.run(["cp", "-a", str(repo), str(self.ws)], check=True)
        self.samples = {op: [] for op in OPS}
        self.npmfiles = set()
        spec, envv = json.loads(json.dumps(captured[0])), captured[1]
        d = base / f"floor-{name}"
        rootfs = spec["root"]["path"]
        self.anchors = []
        for m in spec["mounts"]:
            src = m.get("source")
            if isinstance(src, list) and src[0] == "ws":
                m["source"] = str(self.ws) + src[1]
            elif isinstance(src, list) and src[0] == "anchor":
                lower, upper, work, target = (Path(rootfs + src[1]),) + tuple(
                    Path(f"{d}/{k}{src[1]}") for k in ("upper", "work", "target"))
                if not lower.is_dir():  # as the Supervisor: an empty lower
                    lower = Path(f"{d}/empty{src[1]}")
                    lower.mkdir(parents=True)
                for x in (upper, work, target):
                    x.mkdir(parents=True)
                for x in (lower, upper, work):
                    if any(c in str(x) for c in ",:\\"):
                        sys.exit(f"workspace.py: {x}: a path mount -o cannot take")
                self.anchors += [str(lower), str(upper), str(work), str(target)]
                m["source"] = str(target)
        # The session's process: its environment, user and capabilities.
        spec["process"].update(args=["bash", "-c", INSIDE], env=envv,
                               cwd="/workspace", terminal=False)
        # --network=host uses the namespace runsc runs in (a fresh one from unshare).
        spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
        self.bundle, self.overlay, self.state = d / "bundle", d / "overlay", d / "state"
        for x in (self.bundle, self.overlay, self.state):
            x.mkdir(parents=True)
        (self.bundle / "config.json").write_text(json.dumps(spec))
        self.n = 0

    def run_inside(self, timeout):
        self.n += 1
        return subprocess.run(
            ["unshare", "--map-root-user", "--map-auto", "--net", "--mount", "sh", "-c", MOUNT_ANCHORS, "sh",
             *self.anchors, "--", "runsc", "--root", str(self.state), "--network=host", "--ignore-cgroups",
             f"--overlay2=root:dir={self.overlay}", "run", "--bundle", str(self.bundle), f"lzws-{os.getpid()}-{self.n}"],
            stdin=session_stdin(), capture_output=True, text=True, timeout=timeout)

    def after_round(self):
        pass

    def cleanup(self):
        pass


def paired(m, ref, op):
    """The median over rounds of m's time / ref's time in the same round
    (an operation timed k times a round: the sum of its k runs)."""
    k = len(m.samples[op]) // a.rounds
    per = [(sum(m.samples[op][i * k:(i + 1) * k]), sum(ref.samples[op][i * k:(i + 1) * k])) for i in range(a.rounds)]
    return statistics.median(x / y for x, y in per)


def main():
    base = Path(tempfile.mkdtemp(prefix="lzbench-ws."))
    storage = Path(a.storage) if a.storage else base / "storage"
    repo = base / "repo"
    print(f"repository: {a.files} files in {a.dirs} directories; storm {a.storm} files", flush=True)
    make_repo(repo)
    if NPM:
        prepare_npm(base)
    captured = capture(base, storage) if "bind" in modes_asked else None
    modes = [Floor(m, base, repo, captured) if m == "bind" else Mode(m, base, storage, repo) for m in modes_asked]
    for n in range(a.rounds):
        for m in (modes if n % 2 == 0 else modes[::-1]):
            m.round()
            print(f"round {n} {m.name}: " + "; ".join(f"{op} {v[-1]:.0f}" for op, v in m.samples.items() if v)
                  + f"  (load {os.getloadavg()[0]:.2f})", flush=True)
    ref = modes[0]
    w = max(16, len("status/" + ref.name) + 2)
    print(f"\n{'mode':9}" + "".join(f"{op + ' ms':>12}" for op in OPS) + "".join(
        f"{op + '/' + ref.name:>{w}}" for op in OPS) + f"   (medians; {a.rounds} rounds)")
    for m in modes:
        med = [statistics.median(m.samples[op]) for op in OPS]
        rmed = [statistics.median(ref.samples[op]) for op in OPS]
        print(f"{m.name:9}" + "".join(f"{x:12.0f}" for x in med) + "".join(f"{x / y:{w}.2f}" for x, y in zip(med, rmed)))
    # Paired: per round, each mode against `before` (or the first mode) of
    # the same round; the median over rounds. The machine's load moves
    # between rounds, much less within one.
    pref = next((m for m in modes if m.name == "before"), ref)
    print(f"\n{'paired':9}" + "".join(f"{op + '/' + pref.name:>{w}}" for op in OPS)
          + "   (median over rounds of the round's ratio; status: its 3 runs' sum)")
    for m in modes:
        if m is not pref:
            print(f"{m.name:9}" + "".join(f"{paired(m, pref, op):{w}.2f}" for op in OPS))
    host = []
    for _ in range(3):
        t = time.monotonic()
        subprocess.run(["git", "-C", str(modes[0].ws), "status"], env=GIT_ENV, capture_output=True, check=True)
        host.append((time.monotonic() - t) * 1000)
    print(f"native   status {statistics.median(host):.0f} ms (the host's git on the same tree)")
    for m in modes:
        print(f"{m.name}: " + "; ".join(f"{op} {' '.join(f'{x:.0f}' for x in v)}" for op, v in m.samples.items()))
    if NPM:  # every mode installed the same tree
        print("npm ci entries in node_modules/: " + "; ".join(f"{m.name} {sorted(m.npmfiles)}" for m in modes))
    for m in modes:
        m.cleanup()
    # overlayfs leaves its work directories mode 000.
    subprocess.run(["chmod", "-R", "u+rwX", str(base)], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


main()
