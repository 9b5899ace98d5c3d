#!/usr/bin/env bash
# Development helper: run some integration tests (as root) against build/,
# as an unprivileged test user, without the rest of scripts/test.sh.
#
#   scripts/itest.sh [-u USER] [-s STORAGE] [-b BUILD] [-j N] [PYTEST ARGS...]
#
# -u: the test user (default lztest; must have subordinate ID ranges).
# -b: the build directory (default build/; its test_hooks option is turned on).
# -s: keep this Storage Root across runs (LAZARET_TEST_STORAGE), so the
#     Debian image is bootstrapped once. Default: a fresh one per run.
# -j: as scripts/test.sh does, N pytest-xdist workers (-n N --dist
#     loadgroup -m "not serial"), then the tests marked serial alone, both
#     passes in one Storage Root (-s, or a fresh one for this run).
#     Without -j, one process (or pass -n yourself: serial tests are then
#     left out).
set -euo pipefail
cd "$(dirname "$0")/.."
user=lztest storage= bdir=build jobs=0
while [ $# -gt 0 ]; do
    case "$1" in
        -u) user=$2; shift 2 ;;
        -s) storage=$2; shift 2 ;;
        -b) bdir=$2; shift 2 ;;
        -j) jobs=$2; shift 2 ;;
        *) break ;;   # the rest is for pytest
    esac
done
[[ "$jobs" =~ ^[0-9]{1,2}$ ]] || { echo "itest.sh: -j wants a number of workers" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "itest.sh: run as root (it switches to $user)" >&2; exit 2; }
# The crash-at-each-step tests need the test hooks compiled in (meson
# option test_hooks, off in release builds): turn it on in this build.
if [ ! -f "$bdir/build.ninja" ]; then
    meson setup "$bdir" --werror -Dtest_hooks=true >/dev/null
elif ! meson configure "$bdir" | grep -Eq '^ *test_hooks +true'; then
    meson configure "$bdir" -Dtest_hooks=true >/dev/null
fi
ninja -C "$bdir" >/dev/null
stage=$(mktemp -d /var/tmp/lazaret-itest.XXXXXX)
fresh=
if [ "$jobs" -gt 0 ] && [ -z "$storage" ]; then
    # Both passes in one Storage Root: the Debian image is built once.
    fresh=$(mktemp -d /var/tmp/lazaret-itstore.XXXXXX)
    storage=$fresh
fi
trap 'rm -rf "$stage" ${fresh:+"$fresh"}' EXIT
mkdir -p "$stage/bin" "$stage/tests"
cp "$bdir"/lazaret "$bdir"/lazaret-core "$bdir"/lazaret-init "$bdir"/lazaret-router "$bdir"/lazaret-escalate "$bdir"/lazaret-gate "$bdir"/fscases "$stage/bin/"
cp -r tests/integration tests/fixtures tests/posix "$stage/tests/"
cp docs/model/lazaret.pml "$stage/tests/fixtures/"
chmod -R a+rX "$stage"
chown -R "$user:" "$stage"
if [ -n "$storage" ]; then
    mkdir -p "$storage"; chown "$user:" "$storage"
fi
home=$(getent passwd "$user" | cut -d: -f6)
# The checkout may be private to root; the workspace of commands run
# without one is this directory, which holds no configuration (SR-2).
cd "$stage/tests"
run_pytest() {
    runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" LANG=C.UTF-8 \
        LAZARET_BIN="$stage/bin/lazaret" LAZARET_FIXTURES="$stage/tests/fixtures" \
        ${storage:+LAZARET_TEST_STORAGE="$storage"} ${LAZARET_TEST_CLAUDE:+LAZARET_TEST_CLAUDE="$LAZARET_TEST_CLAUDE"} ${LAZARET_TEST_FUSE:+LAZARET_TEST_FUSE="$LAZARET_TEST_FUSE"} \
        /usr/bin/python3 -m pytest -p no:cacheprovider -q -ra --basetemp "$stage/tmp$((++passes))" "$@" \
        "$stage/tests/integration"
}
# A fresh basetemp per pass: pytest's default (/tmp/pytest-of-USER/pytest-N)
# repeats its paths across runs, and a workspace path seen before is the
# same Domain in a kept Storage Root (-s), with that earlier run's state.
passes=0
if [ "$jobs" -eq 0 ]; then
    run_pytest "$@"
    exit
fi
# pytest exits 5 when a pass selects nothing (-k matching one pass only).
rc=0
run_pytest -n "$jobs" --dist loadgroup -m "not serial" "$@" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || exit "$rc"
rc2=0
run_pytest -m serial "$@" || rc2=$?
[ "$rc2" -eq 0 ] || [ "$rc2" -eq 5 ] || exit "$rc2"
[ "$rc" -eq 0 ] || [ "$rc2" -eq 0 ] || exit 5
