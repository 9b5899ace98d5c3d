#!/usr/bin/env bash
# Runs the benchmarks as the unprivileged test user against build/.
# Usage: bench/run.sh [cold_start|anchor|repeat|escalation|... ...] (default: cold_start)
# LAZARET_BENCH_BUILD=DIR measures DIR instead of build/ (benchmarks want a release build:
#   meson setup build-rel --buildtype=release -Dtest_hooks=false -Dtests=false).
# LAZARET_BENCH_N=7 sets cold_start's number of interleaved runs;
# LAZARET_BENCH_BASELINE=/path/to/other/build adds that build's fresh start, interleaved.
# LAZARET_BENCH_DEBIAN=builtin:debian-bookworm adds the apt-get part of anchor.
# LAZARET_BENCH_EXTRA="..." appends options to each benchmark script (e.g. cold_start's --keep-logs DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
TEST_USER=${LAZARET_TEST_USER:-lztest}
build=${LAZARET_BENCH_BUILD:-build}
stage=$(mktemp -d /var/tmp/lazaret-bench.XXXXXX)
trap 'rm -rf "$stage"' EXIT
cp "$build"/lazaret "$build"/lazaret-core "$build"/lazaret-init "$build"/lazaret-escalate "$build"/lazaret-gate "$stage/"
[ -x "$build"/lazaret-router ] && cp "$build"/lazaret-router "$stage/"
if [ -n "${LAZARET_BENCH_BASELINE:-}" ]; then
    # Another build directory, measured interleaved by cold_start.
    mkdir "$stage/baseline"
    cp "$LAZARET_BENCH_BASELINE"/{lazaret,lazaret-core,lazaret-init,lazaret-escalate,lazaret-gate,lazaret-router} "$stage/baseline/"
fi
cp bench/*.py bench/blast.c tests/fixtures/make-busybox-oci.sh "$stage/"
chmod -R a+rX "$stage"
as_user() {
    if [ "$(id -u)" -eq 0 ]; then
        chown -R "$TEST_USER:" "$stage"
        runuser -u "$TEST_USER" -- env -i PATH=/usr/bin:/bin HOME="$(getent passwd "$TEST_USER" | cut -d: -f6)" "$@"
    else
        "$@"
    fi
}
as_user sh "$stage/make-busybox-oci.sh" "$stage/busybox-oci" >/dev/null
for b in ${@:-cold_start}; do
    extra=()
    if [ "$b" = cold_start ] && [ -n "${LAZARET_BENCH_N:-}" ]; then
        extra+=(-n "$LAZARET_BENCH_N")
    fi
    if [ "$b" = cold_start ] && [ -n "${LAZARET_BENCH_BASELINE:-}" ]; then
        extra+=(--baseline "$stage/baseline/lazaret")
    fi
    if [ "$b" = anchor ] && [ -n "${LAZARET_BENCH_DEBIAN:-}" ]; then
        extra=(--debian-image "$LAZARET_BENCH_DEBIAN")
    fi
    as_user /usr/bin/python3 "$stage/$b.py" --lazaret "$stage/lazaret" --image "oci:$stage/busybox-oci" "${extra[@]}" ${LAZARET_BENCH_EXTRA:-}
done
