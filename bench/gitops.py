#!/usr/bin/python3
"""Git in a large workspace, through the router: two Lazaret builds compared.

  bench/gitops.py --base OLD/lazaret --new NEW/lazaret [--storage DIR] [--user lztest]

Each build's directory must also hold lazaret-core, lazaret-init and
lazaret-router (a meson build directory does). Run as root, the script
copies both builds to a directory the user can read and runs itself again as
that user (like bench/run.sh); run as that user, it runs directly.

A repository of 30 000 small files in 1 500 directories is made once on the
host and copied, one copy per build. Then, on the real Debian image
(--storage names a Storage Root where it is already bootstrapped, or it is
bootstrapped once, ~4 min), rounds alternate between the builds (base, new,
base, new, ...) and each round is one `lazaret run` timing, inside:

  status   `git status`, warm (after one untimed run), 5 times
  add      `git add -A` after appending a line to 100 files
  commit   `git commit`

It prints the median of each operation per build and the ratio new/base,
and, for scale, the host's own `git status` on the same tree.

Noise: on a shared 2-core machine, base against itself gave ratios of
0.77-1.06 (4 rounds; single samples spread 4-9 s for status), so only a
change well beyond that is a finding; raise --rounds on a busy machine.
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

BINARIES = ["lazaret", "lazaret-core", "lazaret-init", "lazaret-router"]

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True, help="path of the old build's lazaret binary")
ap.add_argument("--new", required=True, help="path of the new build's lazaret binary")
ap.add_argument("--storage", help="a Storage Root to reuse (the Debian image bootstrapped there once)")
ap.add_argument("--user", default="lztest", help="the unprivileged user to run as, when started as root")
ap.add_argument("--rounds", type=int, default=4, help="rounds per build")
ap.add_argument("--files", type=int, default=30000)
ap.add_argument("--dirs", type=int, default=1500)
a = ap.parse_args()


def reexec_as_user():
    """As root: stage both builds where the user can read them, run as the user."""
    return run_staged_as_user(
        __file__, a.user, a.storage,
        {"base": Path(a.base).resolve().parent, "new": Path(a.new).resolve().parent},
        lambda st: ["--base", str(st / "base" / "lazaret"), "--new", str(st / "new" / "lazaret"),
                    "--rounds", str(a.rounds), "--files", str(a.files), "--dirs", str(a.dirs)], BINARIES)


if os.geteuid() == 0:
    sys.exit(reexec_as_user())

GIT_ENV = {
    "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x.invalid",
    "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x.invalid",
}

# Timed inside the sandbox with bash's $EPOCHREALTIME (microseconds).
INSIDE = r"""
set -e
export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=a@x.invalid
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
cd /workspace
us() { echo "${EPOCHREALTIME/./}"; }
git status >/dev/null
for i in 1 2 3 4 5; do t=$(us); git status >/dev/null; echo "status $(( $(us) - t ))"; done
for i in $(seq 0 99); do echo "round $ROUND" >> "d$(( i * 15 ))/f0.txt"; done
t=$(us); git add -A; echo "add $(( $(us) - t ))"
t=$(us); git commit -qm "round $ROUND"; echo "commit $(( $(us) - t ))"
"""


def make_repo(path: Path):
    path.mkdir(parents=True)
    per_dir = a.files // a.dirs
    for d in range(a.dirs):
        dd = path / f"d{d}"
        dd.mkdir()
        for f in range(per_dir):
            (dd / f"f{f}.txt").write_text(f"file {d}/{f}\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "-c", "gc.auto=0", "commit", "-qm", "initial"], check=True, env=GIT_ENV)
    # Packed, like a real repository (and no background gc while it is copied).
    subprocess.run(["git", "-C", str(path), "gc", "-q"], check=True, env=GIT_ENV)


class Build:
    def __init__(self, name, lazaret, base: Path, storage: Path, repo: Path):
        self.name, self.lazaret = name, lazaret
        self.ws = base / f"ws-{name}"
        subprocess.run(["cp", "-a", str(repo), str(self.ws)], check=True)
        cfg = base / f"config-{name}"
        (cfg / "lazaret").mkdir(parents=True)
        (cfg / "lazaret" / "config.toml").write_text(
            f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n\n[profiles.bench]\nimage = "builtin:debian-bookworm"\n')
        self.runtime = runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
        os.chmod(runtime, 0o700)
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": os.environ.get("HOME", "/"),
                    "XDG_CONFIG_HOME": str(cfg), "XDG_RUNTIME_DIR": str(runtime), "LANG": "C.UTF-8"}
        self.samples = {"status": [], "add": [], "commit": []}

    def round(self, n, timeout=900):
        r = subprocess.run([self.lazaret, "run", "-p", "bench", "--", "bash", "-c", INSIDE.replace("$ROUND", str(n))],
                           cwd=self.ws, env=self.env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise SystemExit(f"{self.name}: round {n} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        for line in r.stdout.splitlines():
            op, _, us = line.partition(" ")
            if op in self.samples:
                self.samples[op].append(int(us) / 1000.0)
        # The next round starts from a stopped Domain, as this one did.
        subprocess.run([self.lazaret, "stop", "-p", "bench"], cwd=self.ws, env=self.env, capture_output=True,
                       timeout=120)


def main():
    base = Path(tempfile.mkdtemp(prefix="lzbench-git."))
    storage = Path(a.storage) if a.storage else base / "storage"
    repo = base / "repo"
    print(f"making a repository of {a.files} files in {a.dirs} directories ...", flush=True)
    make_repo(repo)
    builds = [Build("base", a.base, base, storage, repo), Build("new", a.new, base, storage, repo)]
    # Round 0 of each build is a warm-up (it may bootstrap the image); not counted.
    for b in builds:
        b.round(0, timeout=1800)
        for v in b.samples.values():
            v.clear()
    for n in range(1, a.rounds + 1):
        for b in (builds if n % 2 else builds[::-1]):
            b.round(n)
    print(f"\n{'operation':10} {'base ms':>10} {'new ms':>10} {'new/base':>9}   (medians; {a.rounds} rounds each)")
    for op in ["status", "add", "commit"]:
        mb = statistics.median(builds[0].samples[op])
        mn = statistics.median(builds[1].samples[op])
        print(f"{op:10} {mb:10.1f} {mn:10.1f} {mn / mb:9.3f}")
    # For scale: the same warm `git status` by the host's git, no sandbox.
    host = []
    for _ in range(5):
        t = time.monotonic()
        subprocess.run(["git", "-C", str(builds[0].ws), "status"], env=GIT_ENV, capture_output=True, check=True)
        host.append((time.monotonic() - t) * 1000)
    print(f"{'(host)':10} {'status':>10} {statistics.median(host):10.1f}  (the host's git on the same tree, no sandbox)")
    for b in builds:
        print(f"{b.name}: " + "; ".join(f"{op} {' '.join(f'{x:.0f}' for x in v)}" for op, v in b.samples.items()))
    shutil.rmtree(base, ignore_errors=True)
    for b in builds:
        shutil.rmtree(b.runtime, ignore_errors=True)


main()
