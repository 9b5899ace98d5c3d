#!/usr/bin/python3
"""The workspace through the router against a plain runsc bind, one run.

  bench/workspace.py --build BUILD_DIR [--storage DIR] [--user lzt3]
                     [--modes bind,watch,nowatch] [--rounds 2]

BUILD_DIR is a meson build directory configured with -Dtest_hooks=true
(scripts/itest.sh turns it on): the modes are chosen with the test hook
LAZARET_TEST_WORKSPACE:

  bind     /workspace is a plain runsc bind mount of the directory (no
           router, no Git policy): the baseline of issue 12
  watch    the router as shipped: --watch 10 (long timeouts, inotify
           invalidation)
  nowatch  the router with timeouts of 0 (before --watch)
  eager    the router as shipped but with --eager-open: an OPEN and a
           RELEASE per file opened (before zero-message opens)
  shared   the router as shipped but with ignored_state = false (no
           ignored-state routing): what the routing itself costs

Run as root, the script stages the binaries where the user can read them
and runs itself again as that user. A repository of --files small files in
--dirs directories is made once and copied per mode. Rounds alternate the
order of the modes; each round is one `lazaret run` per mode on the real
Debian image (--storage: a Storage Root where it is bootstrapped), timing
inside with bash's $EPOCHREALTIME:

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

The repository's committed .gitignore ignores node_modules/.

It prints medians per mode and the ratio to `bind`, and the host's own
`git status` for scale. The Domain is stopped after every round.
"""
import argparse
import os
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

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True, help="meson build directory (test_hooks on)")
ap.add_argument("--storage", help="a Storage Root to reuse (the Debian image bootstrapped there once)")
ap.add_argument("--user", default="lztest", help="the unprivileged user to run as, when started as root")
ap.add_argument("--modes", default="bind,watch,shared")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--files", type=int, default=30000)
ap.add_argument("--dirs", type=int, default=630)
ap.add_argument("--storm", type=int, default=20000)
a = ap.parse_args()


def reexec_as_user():
    """As root: stage the build where the user can read it, run as the user."""
    return run_staged_as_user(
        __file__, a.user, a.storage, {"bin": a.build},
        lambda st: ["--build", str(st / "bin"), "--modes", a.modes, "--rounds", str(a.rounds),
                    "--files", str(a.files), "--dirs", str(a.dirs), "--storm", str(a.storm)], BINARIES)


if os.geteuid() == 0:
    sys.exit(reexec_as_user())

GIT_ENV = {
    "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x.invalid",
    "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x.invalid",
}

INSIDE = r"""
set -e
cd /workspace
us() { echo "${EPOCHREALTIME/./}"; }
t=$(us); git status >/dev/null; echo "first $(( $(us) - t ))"
for i in 1 2 3; do t=$(us); git status >/dev/null; echo "status $(( $(us) - t ))"; done
n=STORM; per=$(( n / 100 ))
t=$(us)
mkdir storm{0..99}
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do : > "storm$d/f$f"; done; done
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do [ -f "storm$d/f$f" ]; done; done
rm -r storm*
echo "storm $(( $(us) - t ))"
mkdir -p node_modules; t=$(us)
mkdir node_modules/storm{0..99}
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do : > "node_modules/storm$d/f$f"; done; done
for ((d = 0; d < 100; d++)); do for ((f = 0; f < per; f++)); do [ -f "node_modules/storm$d/f$f" ]; done; done
rm -r node_modules/storm*
echo "istorm $(( $(us) - t ))"
t=$(us); grep -r -q NOT-IN-ANY-FILE d* || true; echo "grep $(( $(us) - t ))"
t=$(us)
mkdir -p node_modules/pkg{0..999}/lib
for ((p = 0; p < 1000; p++)); do
  for f in package.json index.js README.md lib/a.js lib/b.js; do echo "module $p $f" > node_modules/pkg$p/$f; done
done
rm -r node_modules/pkg*
echo "burst $(( $(us) - t ))"
"""

OPS = ["first", "status", "storm", "istorm", "grep", "burst"]


def make_repo(path: Path):
    path.mkdir(parents=True)
    per_dir = a.files // a.dirs
    for d in range(a.dirs):
        dd = path / f"d{d // 30:02d}" / f"s{d % 30:02d}"
        dd.mkdir(parents=True)
        for f in range(per_dir):
            (dd / f"f{f:02d}.txt").write_text(f"file {d}/{f}\n")
    (path / ".gitignore").write_text("node_modules/\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "-c", "gc.auto=0", "commit", "-qm", "initial"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "gc", "-q"], check=True, env=GIT_ENV)


class Mode:
    def __init__(self, name, base: Path, storage: Path, repo: Path):
        self.name = name
        self.lazaret = str(Path(a.build) / "lazaret")
        self.ws = base / f"ws-{name}"
        subprocess.run(["cp", "-a", str(repo), str(self.ws)], check=True)
        cfg = base / f"config-{name}"
        (cfg / "lazaret").mkdir(parents=True)
        (cfg / "lazaret" / "config.toml").write_text(
            f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n\n[profiles.bench]\nimage = "builtin:debian-bookworm"\n'
            + ("ignored_state = false\n" if name == "shared" else ""))
        self.runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
        os.chmod(self.runtime, 0o700)
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": os.environ.get("HOME", "/"),
                    "XDG_CONFIG_HOME": str(cfg), "XDG_RUNTIME_DIR": str(self.runtime), "LANG": "C.UTF-8",
                    "LAZARET_TEST_WORKSPACE": "watch" if name == "shared" else name}
        self.samples = {op: [] for op in OPS}

    def round(self, timeout=1800):
        r = subprocess.run([self.lazaret, "run", "-p", "bench", "--", "bash", "-c",
                            INSIDE.replace("STORM", str(a.storm))],
                           cwd=self.ws, env=self.env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise SystemExit(f"{self.name}: round failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        for line in r.stdout.splitlines():
            op, _, us = line.partition(" ")
            if op in self.samples:
                self.samples[op].append(int(us) / 1000.0)
        subprocess.run([self.lazaret, "stop", "-p", "bench"], cwd=self.ws, env=self.env, capture_output=True,
                       timeout=120)


def main():
    base = Path(tempfile.mkdtemp(prefix="lzbench-ws."))
    storage = Path(a.storage) if a.storage else base / "storage"
    repo = base / "repo"
    print(f"repository: {a.files} files in {a.dirs} directories; storm {a.storm} files", flush=True)
    make_repo(repo)
    modes = [Mode(m, base, storage, repo) for m in a.modes.split(",")]
    for n in range(a.rounds):
        for m in (modes if n % 2 == 0 else modes[::-1]):
            m.round()
            print(f"round {n} {m.name}: " + "; ".join(f"{op} {v[-1]:.0f}" for op, v in m.samples.items() if v),
                  flush=True)
    ref = modes[0]
    print(f"\n{'mode':9}" + "".join(f"{op + ' ms':>12}" for op in OPS) + "".join(
        f"{op + '/' + ref.name:>16}" for op in OPS) + f"   (medians; {a.rounds} rounds)")
    for m in modes:
        med = [statistics.median(m.samples[op]) for op in OPS]
        rmed = [statistics.median(ref.samples[op]) for op in OPS]
        print(f"{m.name:9}" + "".join(f"{x:12.0f}" for x in med) + "".join(f"{x / y:16.2f}" for x, y in zip(med, rmed)))
    host = []
    for _ in range(3):
        t = time.monotonic()
        subprocess.run(["git", "-C", str(modes[0].ws), "status"], env=GIT_ENV, capture_output=True, check=True)
        host.append((time.monotonic() - t) * 1000)
    print(f"native   status {statistics.median(host):.0f} ms (the host's git on the same tree)")
    for m in modes:
        print(f"{m.name}: " + "; ".join(f"{op} {' '.join(f'{x:.0f}' for x in v)}" for op, v in m.samples.items()))
    shutil.rmtree(base, ignore_errors=True)
    for m in modes:
        shutil.rmtree(m.runtime, ignore_errors=True)


main()
