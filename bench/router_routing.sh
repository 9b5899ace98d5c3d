#!/bin/bash
# What ignored-state routing costs the router itself, without gVisor: the
# router mounted on the host (as root, no user namespace), a repository of
# 30 240 tracked files in 630 directories, `git status` through the mount
# (the first of a router's life, then a warm one), with and without
# --ignored-state, interleaved, N rounds (default 3). Both with --watch 10,
# as the product runs it.
#
#   bench/router_routing.sh BUILD_DIR [N]
set -euo pipefail
build=$(readlink -f "${1:?usage: bench/router_routing.sh BUILD_DIR [N]}")
n=${2:-3}
[ "$(id -u)" -eq 0 ] || { echo "run as root (it mounts FUSE on the host)" >&2; exit 2; }
w=$(mktemp -d /var/tmp/lz-routing.XXXXXX)
trap 'umount "$w/mnt" 2>/dev/null || true; rm -rf "$w"' EXIT
mkdir -p "$w/ws" "$w/st" "$w/mnt"
python3 - "$w/ws" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(30):
    for s in range(21):
        p = os.path.join(root, f"d{d:02}", f"s{s:02}")
        os.makedirs(p)
        for f in range(48):
            with open(os.path.join(p, f"f{f:02}.txt"), "w") as fh:
                fh.write(f"{d} {s} {f}\n")
with open(os.path.join(root, ".gitignore"), "w") as fh:
    fh.write("node_modules/\n*.o\n.env\nbuild/\n")
PY
git -C "$w/ws" init -q
git -C "$w/ws" add -A
git -C "$w/ws" -c user.email=b@x.invalid -c user.name=bench commit -qm x
now() { date +%s%N; }
one() {
    local mode=$1 extra=()
    [ "$mode" = routing ] && { rm -rf "$w/st"; mkdir "$w/st"; extra=(--ignored-state "$w/st" --git-home /nonexistent); }
    "$build/lazaret-router" --source "$w/ws" --mountpoint "$w/mnt" --quiet --watch 10 "${extra[@]}" &
    local pid=$! i
    for i in $(seq 100); do mountpoint -q "$w/mnt" && break; sleep 0.05; done
    local t0 t1 t2
    t0=$(now); git -C "$w/mnt" status --porcelain >/dev/null
    t1=$(now); git -C "$w/mnt" status --porcelain >/dev/null
    t2=$(now)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$mode $(( (t1 - t0) / 1000000 )) $(( (t2 - t1) / 1000000 ))"
}
for r in $(seq "$n"); do
    if [ $((r % 2)) -eq 1 ]; then one plain; one routing; else one routing; one plain; fi
done | tee "$w/out"
python3 - "$w/out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {m: [statistics.median(int(r[i]) for r in rows if r[0] == m) for i in (1, 2)] for m in ("plain", "routing")}
for m in ("plain", "routing"):
    print(f"{m:8} first {med[m][0]:6.0f} ms  warm {med[m][1]:6.0f} ms")
print(f"routing/plain: first {med['routing'][0] / med['plain'][0]:.2f}  warm {med['routing'][1] / med['plain'][1]:.2f}")
PY
