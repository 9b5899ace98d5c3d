#!/usr/bin/env python3
"""Runner for bench/fuse_uring.c (issue 26 section 2): classic /dev/fuse
against FUSE over io_uring, per request, same-CPU and cross-CPU.

Builds the experiment into a temporary directory, switches
/sys/module/fuse/parameters/enable_uring on if it is off (root only), runs
every configuration once per round, the rounds interleaved, and prints the
medians as a Markdown table.  The parameter is put back as it was found.

Usage (as root): bench/fuse_uring.py [--rounds 5] [--n 100000] [--only NAME,...]
                                     [--gvisor [--gvisor-n 20000]]

--gvisor measures instead the router's real shape: the client runs inside a
runsc sandbox (runsc run, --overlay2=none, --network=none, the served
directory bind-mounted at /mnt/w the way a workspace is: shared file access,
so each stat() goes to the host) and the requests reach the FUSE server from
runsc's own threads.  Against the same stat() of a plain bind of a /tmp
directory (gvisor-bind).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

PARAM = "/sys/module/fuse/parameters/enable_uring"

# name, arguments, description.  -c: client CPU, -s: server CPU (uring:
# queue q on CPU (q + s) % ncpu), -1 in either: not pinned.
CONFIGS = [
    ("floor", ["-m", "none", "-c", "0"], "stat() of a /tmp file, no FUSE"),
    ("classic-same", ["-m", "classic", "-c", "0", "-s", "0"], "client and server thread on CPU 0"),
    ("uring-same", ["-m", "uring", "-c", "0", "-s", "0"], "client on CPU 0, queue q's thread on CPU q"),
    ("uring-same-defer", ["-m", "uring", "-c", "0", "-s", "0", "-D"], "as uring-same, rings with DEFER_TASKRUN"),
    ("uring-1ring-same", ["-m", "uring", "-c", "0", "-s", "0", "-1"], "one thread and ring for all queues, CPU 0"),
    ("classic-cross", ["-m", "classic", "-c", "0", "-s", "1"], "client on CPU 0, server thread on CPU 1"),
    ("uring-cross", ["-m", "uring", "-c", "0", "-s", "1"], "client on CPU 0, queue q's thread on CPU q+1"),
    ("classic-free", ["-m", "classic", "-c", "-1", "-s", "-1"], "nothing pinned"),
    ("uring-free-pinnedq", ["-m", "uring", "-c", "-1", "-s", "0"], "client free, queue q's thread on CPU q"),
    ("uring-free", ["-m", "uring", "-c", "-1", "-s", "-1"], "nothing pinned"),
    ("classic-2c-2s", ["-m", "classic", "-c", "-1", "-s", "-1", "-t", "2", "-T", "2"], "2 client threads, 2 server threads, free"),
    ("classic-2c-percpu", ["-m", "classic", "-c", "-1", "-s", "0", "-t", "2", "-T", str(os.cpu_count()), "-P"],
     "2 client threads free, one server thread per CPU, pinned"),
    ("uring-2c-pinnedq", ["-m", "uring", "-c", "-1", "-s", "0", "-t", "2"], "2 client threads free, queue q on CPU q"),
]


GVISOR_CONFIGS = [
    ("gvisor-bind", None, "plain bind of a /tmp directory, no FUSE"),
    ("gvisor-classic", ["-m", "classic", "-s", "-1"], "one server thread, not pinned (the router today)"),
    ("gvisor-classic-pinned", ["-m", "classic", "-s", "0"], "one server thread on CPU 0"),
    ("gvisor-classic-percpu", ["-m", "classic", "-s", "0", "-T", str(os.cpu_count()), "-P"],
     "one reader thread per CPU, pinned"),
    ("gvisor-uring", ["-m", "uring", "-s", "0"], "queue q's thread on CPU q"),
    ("gvisor-uring-1ring", ["-m", "uring", "-s", "0", "-1"], "one thread and ring for all queues, CPU 0"),
]


def gvisor_run(exe, tmp, name, args, n, rnd):
    """One run of the client inside runsc; returns a dict like parse()'s."""
    bundle = os.path.join(tmp, "bundle")
    os.makedirs(bundle, exist_ok=True)
    srv = None
    try:
        if args is None:
            src = tempfile.mkdtemp(prefix="fuse-uring-bind.")
            with open(os.path.join(src, "f"), "w") as f:
                f.write("x" * 42)
        else:
            srv = subprocess.Popen([exe] + args + ["-S"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
            line = srv.stdout.readline().strip()
            if not line.startswith("mnt="):
                raise RuntimeError(f"server did not start: {line!r}")
            src = line[4:]
        subprocess.run(["runsc", "spec", "--bundle", bundle], check=True, cwd=bundle,
                       capture_output=True) if not os.path.exists(os.path.join(bundle, "config.json")) else None
        with open(os.path.join(bundle, "config.json")) as f:
            c = json.load(f)
        c["root"] = {"path": "/", "readonly": True}
        c["process"]["terminal"] = False
        c["process"]["args"] = [exe, "-C", "/mnt/w/f", "-n", str(n)]
        c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/mnt/w"]
        c["mounts"].append({"destination": "/mnt/w", "type": "bind", "source": src, "options": ["rbind", "rw"]})
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(c, f)

        def counters():
            if not srv:
                return {}
            srv.stdin.write("s\n")
            srv.stdin.flush()
            return parse(srv.stdout.readline())

        c0 = counters()
        cid = f"fuse-uring-{os.getpid()}-{rnd}-{name}"
        p = subprocess.run(["runsc", "--network=none", "--ignore-cgroups", "--overlay2=none", "run",
                            "-bundle", bundle, cid], capture_output=True, text=True, timeout=600)
        subprocess.run(["runsc", "delete", "-force", cid], capture_output=True, timeout=60)
        c1 = counters()
        out = parse(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
        if p.returncode != 0 or "us_per_stat" not in out:
            raise RuntimeError(f"runsc: {p.returncode} {p.stderr.strip()[-300:]}")
        total = n + 2000  # the client's warm-up
        r = {"us_per_stat": out["us_per_stat"], "uring": c1.get("uring", "0"),
             "reqs_per_stat": "0", "classic_reqs": "0", "server_vcsw_per_stat": "0",
             "server_ivcsw_per_stat": "0"}
        if srv:
            r["reqs_per_stat"] = str((int(c1["served"]) - int(c0["served"])) / total)
            r["classic_reqs"] = str(int(c1["classic"]) - int(c0["classic"]))
            r["server_vcsw_per_stat"] = str((int(c1["server_vcsw"]) - int(c0["server_vcsw"])) / total)
            r["server_ivcsw_per_stat"] = str((int(c1["server_ivcsw"]) - int(c0["server_ivcsw"])) / total)
        return r
    finally:
        if srv:
            srv.stdin.close()
            try:
                srv.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait(timeout=30)
        elif args is None:
            shutil.rmtree(src, ignore_errors=True)


def parse(line):
    out = {}
    for kv in line.split():
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--only", default="")
    ap.add_argument("--raw", help="append every run's line to this file")
    ap.add_argument("--gvisor", action="store_true", help="client inside runsc instead (see above)")
    ap.add_argument("--gvisor-n", type=int, default=20000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("fuse_uring.py: needs root (mount(2) and the enable_uring parameter)")
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp(prefix="fuse-uring-bench.")
    exe = os.path.join(tmp, "fuse_uring")
    subprocess.run(["cc", "-O2", "-Wall", "-o", exe, os.path.join(here, "fuse_uring.c"),
                    "-luring", "-lpthread"], check=True)
    os.chmod(tmp, 0o755)  # the sandbox runs the client from here
    configs = [c for c in (GVISOR_CONFIGS if a.gvisor else CONFIGS)
               if not a.only or c[0] in a.only.split(",")]
    n = a.gvisor_n if a.gvisor else a.n
    with open(PARAM) as f:
        was = f.read().strip()
    results = {c[0]: [] for c in configs}
    raw = open(a.raw, "a") if a.raw else None
    try:
        if was != "Y":
            with open(PARAM, "w") as f:
                f.write("Y")
        for rnd in range(a.rounds):
            for name, args, _ in configs:
                if a.gvisor:
                    try:
                        r = gvisor_run(exe, tmp, name, args, n, rnd)
                    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                        print(f"{name}: failed: {e}", file=sys.stderr)
                        continue
                    line = " ".join(f"{k}={v}" for k, v in r.items())
                else:
                    # Bounded: the slowest configuration (cross-CPU) needs ~1 min per 100k.
                    p = subprocess.run([exe, "-n", str(n)] + args, capture_output=True, text=True,
                                       timeout=max(120, n // 500))
                    if p.returncode != 0:
                        print(f"{name}: failed ({p.returncode}): {p.stderr.strip()}", file=sys.stderr)
                        continue
                    line = p.stdout.strip()
                if raw:
                    with open("/proc/loadavg") as f:
                        load = f.read().split()[0]
                    raw.write(f"round={rnd} name={name} load1={load} {line}\n")
                    raw.flush()
                r = parse(line)
                if "uring" in name and r.get("uring") != "1":
                    print(f"{name}: io_uring was not agreed in INIT", file=sys.stderr)
                results[name].append(r)
                print(f"round {rnd} {name}: {float(r['us_per_stat']):.1f} us/stat", file=sys.stderr)
    finally:
        with open(PARAM, "w") as f:
            f.write(was)
        shutil.rmtree(tmp, ignore_errors=True)

    def med(rs, k):
        return statistics.median(float(r[k]) for r in rs)

    with open(f"/proc/sys/kernel/osrelease") as f:
        kernel = f.read().strip()
    if a.gvisor:
        print(f"kernel {kernel}, {os.cpu_count()} CPUs, client inside runsc, N={n} stat() per run, "
              f"medians of {a.rounds} interleaved rounds; enable_uring was {was}, restored")
        print()
        print("| configuration | what | µs/stat | FUSE requests/stat | server csw/stat (vol+invol) "
              "| requests on /dev/fuse |")
        print("|---|---|---:|---:|---:|---:|")
        for name, _, what in configs:
            rs = results[name]
            if not rs:
                print(f"| {name} | {what} | failed | | | |")
                continue
            print(f"| {name} | {what} | {med(rs, 'us_per_stat'):.1f} | {med(rs, 'reqs_per_stat'):.2f} "
                  f"| {med(rs, 'server_vcsw_per_stat'):.2f}+{med(rs, 'server_ivcsw_per_stat'):.2f} "
                  f"| {int(med(rs, 'classic_reqs'))} |")
        return
    print(f"kernel {kernel}, {os.cpu_count()} CPUs, N={n} stat() per run, "
          f"medians of {a.rounds} interleaved rounds; enable_uring was {was}, restored")
    print()
    print("| configuration | what | µs/stat | requests/stat | µs/request | client csw/stat (vol+invol) "
          "| server csw/stat (vol+invol) | client CPU µs/stat | requests on /dev/fuse |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, what in configs:
        rs = results[name]
        if not rs:
            print(f"| {name} | {what} | failed | | | | | | |")
            continue
        print(f"| {name} | {what} | {med(rs, 'us_per_stat'):.1f} | {med(rs, 'reqs_per_stat'):.2f} "
              f"| {med(rs, 'us_per_req'):.1f} "
              f"| {med(rs, 'client_vcsw_per_stat'):.2f}+{med(rs, 'client_ivcsw_per_stat'):.2f} "
              f"| {med(rs, 'server_vcsw_per_stat'):.2f}+{med(rs, 'server_ivcsw_per_stat'):.2f} "
              f"| {med(rs, 'client_cpu_us_per_stat'):.1f} | {int(med(rs, 'classic_reqs'))} |")


if __name__ == "__main__":
    main()
