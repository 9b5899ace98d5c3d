#!/usr/bin/python3
"""State Anchor cost: persistent dirs (kernel overlayfs in the Domain's user
namespace, bound into the sandbox) against a non-persistent path of the
same sandbox (runsc's own root overlay), measured in one invocation.

  storm   create 20k small files in 200 directories, stat them all, delete
          them all: in /root (persistent) vs /srv (not persistent), same
          sandbox, timed inside the sandbox
  apt     `apt-get install ./pkg.deb` of a local package (built here with
          dpkg-deb, 2000 files, no network) in a Domain whose /usr /var /etc
          are persistent vs a Domain with no persistent dirs; needs the
          Debian image (--debian-image, e.g. builtin:debian-bookworm)

Run as an unprivileged user (bench/run.sh anchor does). Prints medians and
ratios.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--lazaret", required=True)
ap.add_argument("--image", required=True, help="small image for the storm, e.g. oci:/path")
ap.add_argument("--debian-image", default="", help="Debian image for the apt-get part (skipped when empty)")
ap.add_argument("-n", type=int, default=3)
ap.add_argument("--files", type=int, default=20000)
a = ap.parse_args()

base = Path(tempfile.mkdtemp(prefix="lzbench-anchor"))
cfgdir = base / "config" / "lazaret"
cfgdir.mkdir(parents=True)
storage = base / "storage"
(cfgdir / "config.toml").write_text(
    f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n'
    f'[profiles.storm]\nimage = "{a.image}"\npersistent_dirs = ["/root"]\n'
    + (f'[profiles.aptp]\nimage = "{a.debian_image}"\npersistent_dirs = ["/etc", "/usr", "/var"]\n'
       f'[profiles.aptn]\nimage = "{a.debian_image}"\npersistent_dirs = []\n' if a.debian_image else ""))
runtime = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
env = dict(os.environ, XDG_CONFIG_HOME=str(base / "config"), XDG_RUNTIME_DIR=str(runtime))
ws = base / "ws"
ws.mkdir()


def lz(profile, script, timeout=900):
    r = subprocess.run([a.lazaret, "run", "-p", profile, "--", "sh", "-c", script], cwd=ws, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"lazaret run failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


# One sandbox, both paths, alternating, timed inside with nanosecond clocks.
STORM = r"""
now_cs() { read up _ < /proc/uptime; echo "${up%.*}${up#*.}"; }  # centiseconds; busybox date has no %N
storm() {
  d=$1; mkdir -p $d/s
  t0=$(now_cs)
  i=0; while [ $i -lt 200 ]; do mkdir $d/s/$i; i=$((i+1)); done
  i=0; while [ $i -lt NFILES ]; do printf '%04096d' 0 > $d/s/$((i % 200))/f$i; i=$((i+1)); done
  ls -lR $d/s > /dev/null
  rm -r $d/s
  t1=$(now_cs)
  echo "$2 $(( (t1 - t0) * 10 ))"
}
mkdir -p /srv
for k in $(seq NRUNS); do storm /root persistent; storm /srv plain; done
""".replace("NFILES", str(a.files)).replace("NRUNS", str(a.n))

res = {"persistent": [], "plain": []}
for line in lz("storm", STORM).splitlines():
    k, ms = line.split()
    res[k].append(int(ms) / 1000)
mp, mn = statistics.median(res["persistent"]), statistics.median(res["plain"])
print(f"storm of {a.files} files (create+stat+delete), medians of {a.n} (s): "
      f"persistent /root {mp:.2f}  plain /srv {mn:.2f}  ratio {mp / mn:.2f}")

if a.debian_image:
    pkg = base / "pkg"
    for i in range(2000):
        d = pkg / "usr/share/lzbench" / str(i % 50)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}").write_text("x" * 2048)
    (pkg / "DEBIAN").mkdir()
    (pkg / "DEBIAN/control").write_text("Package: lzbench\nVersion: 1.0\nArchitecture: all\n"
                                        "Maintainer: bench <b@example.invalid>\nDescription: bench\n")
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "-b", str(pkg), str(ws / "lzbench.deb")],
                   check=True, capture_output=True)
    APT = r"""
for k in $(seq NRUNS); do
  t0=$(date +%s%N)
  apt-get install -y -q ./lzbench.deb > /dev/null 2>&1 || { echo FAIL; exit 1; }
  t1=$(date +%s%N)
  dpkg --purge lzbench > /dev/null
  echo "$(( (t1 - t0) / 1000000 ))"
done
""".replace("NRUNS", str(a.n))
    apt = {}
    for prof in ("aptp", "aptn"):
        apt[prof] = statistics.median(int(x) / 1000 for x in lz(prof, APT).split())
    print(f"apt-get install of a 2000-file package, medians of {a.n} (s): persistent /usr /var /etc "
          f"{apt['aptp']:.2f}  no persistent dirs {apt['aptn']:.2f}  ratio {apt['aptp'] / apt['aptn']:.2f}")
