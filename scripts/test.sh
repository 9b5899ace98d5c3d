#!/usr/bin/env bash
# The whole Lazaret test suite, as CI runs it (`.ci/run` calls this).
#
#  1. host setup (packages, device modes, test user)   scripts/setup.sh
#  2. build with -Werror (gcc), unit tests             build/
#  3. ASan+UBSan build, unit tests                     build-asan/
#  4. libFuzzer targets (clang), a short run each      build-fuzz/
#  5. the protocol model (Promela) checked with spin   tests/model/check.sh
#  6. router end-to-end, network tests and root's own Domains (as root)
#  7. integration tests with the real runsc, as the unprivileged test user
#
# Options: --quick (skip sanitizer and fuzz stages), --fuzz-seconds N
# (default 6), --jobs N (pytest-xdist workers of the integration tests,
# default 2; 0: one process), LAZARET_TEST_ARGS="..." extra pytest arguments.
#
# Each stage's wall time is printed as a table at the end, also when a
# stage fails. The integration tests run in parallel (pytest-xdist), then
# those marked `serial` alone, then the agents' (test_agents.py); the
# passes share one Storage Root, in which the Debian and then the agent
# images are built in the background from the gcc build on: the agents'
# tests wait for their images, the others only for the Debian image.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

quick=0
fuzz_seconds=6 # a smoke run per target in CI; long runs: --fuzz-seconds N (results in docs/notes)
# Two pytest-xdist workers for the integration tests (they wait on sandbox
# starts more than they compute: 63-76% of one process's time on 2 cores,
# docs/notes/2026-12-04-ci-time.md); --jobs 0 runs them in one process.
jobs=${LAZARET_TEST_JOBS:-2}
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --fuzz-seconds) fuzz_seconds=$2; shift ;;
        --jobs) jobs=$2; shift ;;
        *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ "$fuzz_seconds" =~ ^[0-9]{1,6}$ ]] || { echo "test.sh: --fuzz-seconds wants a number of seconds" >&2; exit 2; }
[[ "$jobs" =~ ^[0-9]{1,2}$ ]] || { echo "test.sh: --jobs wants a number of workers (0: no pytest-xdist)" >&2; exit 2; }

TEST_USER=${LAZARET_TEST_USER:-lztest}
# The network tests run as a user of their own: they count that user's
# sandbox processes (no Domain of an earlier test may be left), while the
# test user's image builds run in the background.
NET_USER=${LAZARET_TEST_NET_USER:-lznet}

# Stage timer: step() closes the running stage and opens the next; the
# table is printed on exit, whatever the exit (a failing stage is marked).
# Each stage also gets how busy the machine's CPUs were meanwhile (all of
# them, background jobs included, from /proc/stat): a stage near 100 %
# gains nothing from running beside another, one far below it may.
stage_names=() stage_secs=() stage_cpu=()
cur_stage="" cur_start="" cur_ticks="" run_start=$EPOCHREALTIME
cpu_ticks() { # "busy total" jiffies of all CPUs so far
    awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat 2>/dev/null || echo "0 0"
}
end_stage() {
    [ -n "$cur_stage" ] || return 0
    stage_names+=("$cur_stage")
    stage_secs+=("$(awk -v a="$cur_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')")
    stage_cpu+=("$(awk -v a="$cur_ticks" -v b="$(cpu_ticks)" 'BEGIN { split(a, x, " "); split(b, y, " ");
        d = y[2] - x[2]; if (d > 0) printf "%3.0f%%", 100 * (y[1] - x[1]) / d; else printf "   -" }')")
    cur_stage=""
}
step() {
    end_stage
    cur_stage=$*; cur_start=$EPOCHREALTIME; cur_ticks=$(cpu_ticks)
    printf '\n==== %s\n' "$*"
}
cleanup_paths=()
uring_param=/sys/module/fuse/parameters/enable_uring uring_was=""
on_exit() {
    local rc=$? i failed=${cur_stage:-}
    end_stage
    printf '\n==== stage times (wall; CPUs busy; %s)\n' "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED, exit $rc")"
    for i in "${!stage_names[@]}"; do
        printf '%6d s %s  %s%s\n' "${stage_secs[$i]}" "${stage_cpu[$i]}" "${stage_names[$i]:0:70}" \
            "$([ "$rc" -ne 0 ] && [ "${stage_names[$i]}" = "$failed" ] && echo "  <- failed")"
    done
    printf '%6.0f s  total\n' "$(awk -v a="$run_start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')"
    # runuser passes the TERM on to the background image builds.
    [ -z "${boot_pid:-}" ] || { kill "$boot_pid" 2>/dev/null; wait "$boot_pid" 2>/dev/null; } || :
    [ -z "${root_pid:-}" ] || { kill "$root_pid" 2>/dev/null; wait "$root_pid" 2>/dev/null; } || :
    [ -z "${model_pid:-}" ] || { pkill -TERM -P "$model_pid" 2>/dev/null; kill "$model_pid" 2>/dev/null; wait "$model_pid" 2>/dev/null; } || :
    [ "${#cleanup_paths[@]}" -eq 0 ] || rm -rf "${cleanup_paths[@]}" || :
    [ -z "$uring_was" ] || echo "$uring_was" >"$uring_param" || :
}
trap on_exit EXIT
# Runs a command, showing its output only when it fails.
quiet() {
    local log
    log=$(mktemp)
    if ! "$@" >"$log" 2>&1; then
        cat "$log"; rm -f "$log"; echo "FAILED: $*" >&2; return 1
    fi
    rm -f "$log"
}

step "setup"
if [ "$(id -u)" -eq 0 ]; then
    bash scripts/setup.sh >/tmp/lazaret-setup.log 2>&1 || { cat /tmp/lazaret-setup.log; exit 1; }
    LAZARET_TEST_USER="$NET_USER" bash scripts/setup.sh >>/tmp/lazaret-setup.log 2>&1 ||
        { cat /tmp/lazaret-setup.log; exit 1; }
else
    sudo -n bash scripts/setup.sh >/tmp/lazaret-setup.log 2>&1 || { cat /tmp/lazaret-setup.log; exit 1; }
fi
tail -1 /tmp/lazaret-setup.log
# FUSE over io_uring (opt-in for users, docs/state.md): everything runs on
# the transport users get by default (/dev/fuse: enable_uring off), then
# the router-heavy integration tests again with it on, in a stage of their
# own (uring_stage below). The host's own setting is put back at the end
# (on_exit), and nothing is kept across boots.
uring_set() {
    [ -n "$uring_was" ] || return 0
    echo "$1" >"$uring_param"
}
if [ "$(id -u)" -eq 0 ] && [ -w "$uring_param" ]; then
    uring_was=$(cat "$uring_param")
    uring_set N
    echo "FUSE over io_uring off for this run but its own stage ($uring_param was $uring_was; put back at the end)"
else
    echo "FUSE over io_uring left as it is (${uring_param}: $(cat "$uring_param" 2>/dev/null || echo absent))"
fi

# Every build here has the test hooks (meson option test_hooks): the
# integration tests crash the coordinator and Supervisor at each step
# (LAZARET_TEST_CRASH), fake a reboot (LAZARET_TEST_BOOT_ID), turn address
# following off (LAZARET_TEST_NETFOLLOW). Release builds leave them out.
with_test_hooks() {
    local dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        quiet meson setup "$dir" "$@" -Dtest_hooks=true
    elif ! meson configure "$dir" | grep -Eq '^ *test_hooks +true'; then
        quiet meson configure "$dir" -Dtest_hooks=true
    fi
}

step "build (gcc, -Werror)"
with_test_hooks build --werror
quiet ninja -C build

# Stage the binaries and tests where the unprivileged user can read them
# (a CI clone may live under a private directory).
stage=$(mktemp -d /var/tmp/lazaret-test.XXXXXX)
cleanup_paths+=("$stage")
mkdir -p "$stage/bin" "$stage/tests"
cp build/lazaret build/lazaret-core build/lazaret-init build/lazaret-escalate build/lazaret-gate build/fscases "$stage/bin/"
[ -x build/lazaret-router ] && cp build/lazaret-router "$stage/bin/"
cp -r tests/integration tests/fixtures tests/posix "$stage/tests/"
cp docs/model/lazaret.pml "$stage/tests/fixtures/"
chmod -R a+rX "$stage"
export LAZARET_BIN="$stage/bin/lazaret" LAZARET_FIXTURES="$stage/tests/fixtures"

# The Storage Root of the integration tests (both passes, every worker):
# the Debian image and the agent images are built into it now, in the
# background (mostly downloads and package unpacking; Lazaret builds one
# at a time per Storage Root), while the next stages use the CPU. Built
# in the tests instead, they held every worker waiting at the start. If a
# build fails here, the tests build the image themselves (and fail there
# if the mirror or the npm registry is unreachable).
itstore=$(mktemp -d /var/tmp/lazaret-itstore.XXXXXX)
cleanup_paths+=("$itstore")
boot_pid=""
if [ "$(id -u)" -eq 0 ]; then
    chown "$TEST_USER:" "$itstore"
    boothome=$(mktemp -d /tmp/lzboot.XXXXXX)
    cleanup_paths+=("$boothome")
    # Its working directory is taken as a workspace: neither the
    # configuration nor the Storage Root may be inside it.
    mkdir -p "$boothome/config/lazaret" "$boothome/run" "$boothome/cwd"
    chmod 700 "$boothome/run"
    printf '[storage]\ndata_root = "%s"\n\n[profiles.default]\nimage = "builtin:debian-bookworm"\n' "$itstore" \
        >"$boothome/config/lazaret/config.toml"
    chown -R "$TEST_USER:" "$boothome" "$stage/bin"
    boot_start=$EPOCHREALTIME
    # shellcheck disable=SC2016 # expanded by that sh
    runuser -u "$TEST_USER" -- env -i -C "$boothome/cwd" PATH=/usr/local/bin:/usr/bin:/bin HOME="$boothome" LANG=C.UTF-8 \
        XDG_CONFIG_HOME="$boothome/config" XDG_RUNTIME_DIR="$boothome/run" LZ="$stage/bin/lazaret" \
        sh -c 'rc=0 t=$(date +%s); timeout 1200 "$LZ" image bootstrap || rc=1
               echo "image time: debian $(($(date +%s) - t)) s"
               : >"$HOME/debian.done"
               for a in claude codex opencode; do
                   t=$(date +%s); timeout 1200 "$LZ" image bootstrap --agent "$a" || rc=1
                   echo "image time: $a $(($(date +%s) - t)) s"
               done
               exit $rc' </dev/null >/tmp/lazaret-bootstrap.log 2>&1 &
    boot_pid=$!
    echo "building the Debian and agent images in the background (pid $boot_pid, log /tmp/lazaret-bootstrap.log)"
fi
# The real Claude Code, for test_host_tools.py's checks of what the host's
# claude runs in the workspace afterwards: a pinned release from the npm
# registry, cached between runs, installed in the background. Without npm
# (or when the install fails) those two tests say they were skipped.
claude_dir=/var/tmp/lazaret-test-claude claude_pid=""
if [ "$(id -u)" -eq 0 ] && command -v npm >/dev/null && [ ! -x "$claude_dir/node_modules/.bin/claude" ]; then
    mkdir -p "$claude_dir"
    (cd "$claude_dir" && timeout 900 npm install --no-audit --no-fund --loglevel=error \
        @anthropic-ai/claude-code@2.1.197 && chmod -R a+rX "$claude_dir") </dev/null >/tmp/lazaret-claude-install.log 2>&1 &
    claude_pid=$!
fi
step "formatting (clang-format --dry-run against .clang-format)"
# shellcheck disable=SC2046 # file names from git, no spaces
clang-format --dry-run --Werror $(git ls-files 'src/*.c' 'src/*.h' 'tests/unit/*.c' 'tests/fuzz/*.c' 'bench/*.c' \
    2>/dev/null || find src tests/unit tests/fuzz bench -name '*.[ch]') || { echo "clang-format: findings above"; exit 1; }
echo "clang-format: clean"

step "static analysis (cppcheck)"
cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr -D_GNU_SOURCE \
    -Isrc/lib --suppress=missingIncludeSystem src/ || { echo "cppcheck: findings above"; exit 1; }
echo "cppcheck: clean"

step "unit tests"
meson test -C build --print-errorlogs

if [ "$quick" -eq 0 ]; then
    step "unit tests under ASan+UBSan"
    with_test_hooks build-asan --werror -Db_sanitize=address,undefined -Db_lundef=false
    # Only what the unit tests run (test_*, prompt_demo): the programs
    # themselves are built by the gcc stage and run by the later stages.
    quiet ninja -C build-asan $(ninja -C build-asan -t targets all | sed -n 's/^\(test_[a-z0-9_]*\|prompt_demo\): .*/\1/p' | sort -u)
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --no-rebuild --print-errorlogs

    step "fuzz targets (clang libFuzzer, ${fuzz_seconds}s each, $(nproc 2>/dev/null || echo 1) at a time)"
    CC=clang with_test_hooks build-fuzz -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false
    quiet ninja -C build-fuzz $(ninja -C build-fuzz -t targets all | sed -n 's/^\(fuzz_[a-z0-9_]*\): .*/\1/p' | sort -u)
    # The targets are single-threaded: as many at a time as there are
    # cores (each still gets its full ${fuzz_seconds}s), results printed in
    # name order; the first failure stops the rest and shows its log.
    fuzz_par=$(nproc 2>/dev/null || echo 1)
    [ "$fuzz_par" -ge 1 ] || fuzz_par=1
    fuzz_one() {
        local f=$1 name=$2 corpus rc=0
        corpus=$(mktemp -d)
        [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
        "$f" -max_total_time="$fuzz_seconds" -max_len=65536 -rss_limit_mb=2048 "$corpus" \
            >"/tmp/lazaret-fuzz-$name.log" 2>&1 || rc=$?
        rm -rf "$corpus"
        return "$rc"
    }
    declare -A fuzz_running=()
    fuzz_names=() fuzz_failed=""
    fuzz_reap() {
        local pid rc=0
        wait -n -p pid "${!fuzz_running[@]}" || rc=$?
        [ "$rc" -eq 0 ] || fuzz_failed=${fuzz_running[$pid]}
        unset "fuzz_running[$pid]"
    }
    for f in build-fuzz/fuzz_*; do
        [ -f "$f" ] && [ -x "$f" ] || continue
        name=$(basename "$f"); name=${name#fuzz_}
        while [ "${#fuzz_running[@]}" -ge "$fuzz_par" ] && [ -z "$fuzz_failed" ]; do fuzz_reap; done
        [ -z "$fuzz_failed" ] || break
        fuzz_one "$f" "$name" &
        fuzz_running[$!]=$name
        fuzz_names+=("$name")
    done
    while [ "${#fuzz_running[@]}" -gt 0 ] && [ -z "$fuzz_failed" ]; do fuzz_reap; done
    if [ -n "$fuzz_failed" ]; then
        for pid in "${!fuzz_running[@]}"; do
            pkill -TERM -P "$pid" 2>/dev/null || :
            wait "$pid" 2>/dev/null || :
        done
        tail -50 "/tmp/lazaret-fuzz-$fuzz_failed.log"
        echo "fuzz_$fuzz_failed: FAILED (log above, /tmp/lazaret-fuzz-$fuzz_failed.log)"
        exit 1
    fi
    for name in "${fuzz_names[@]}"; do
        echo "fuzz_$name: $(grep -E '^#[0-9]+.*(DONE|pulse)' "/tmp/lazaret-fuzz-$name.log" | tail -1)"
    done
fi

# The protocol model (spin, CPU-bound) runs in the background while the
# router end-to-end, network and root stages run (mostly waiting on
# sandboxes and on the network tests' bounded waits); its result is
# collected after them.
model_pid="" model_start=$EPOCHREALTIME
bash tests/model/check.sh >/tmp/lazaret-model.log 2>&1 &
model_pid=$!

# The root stage (root's own Domains, the installed lazaret, the .deb)
# shares nothing with the router and network stages (another user, other
# paths, no test hosts) and they mostly wait on sandboxes: it runs beside
# them, its output kept for its own stage below.
root_pid=""
if [ "$(id -u)" -eq 0 ]; then
    root_start=$EPOCHREALTIME
    LAZARET_BIN="$LAZARET_BIN" LAZARET_TEST_USER="$TEST_USER" /usr/bin/python3 -m pytest -p no:cacheprovider -q -ra \
        tests/root >/tmp/lazaret-root.log 2>&1 &
    root_pid=$!
fi

step "router end-to-end (Git attacks through lazaret-router, host git checks)"
bash tests/router/test_router.sh "$stage/bin/lazaret-router" >/tmp/lazaret-router-e2e.log 2>&1 || {
    cat /tmp/lazaret-router-e2e.log; exit 1; }
grep -E "^== |ALL PASSED" /tmp/lazaret-router-e2e.log | tail -3

step "network isolation tests (root makes the test hosts; lazaret runs as ${NET_USER})"
if [ "$(id -u)" -eq 0 ]; then
    LAZARET_TEST_USER="$NET_USER" /usr/bin/python3 -m pytest -p no:cacheprovider -q -ra --durations=8 tests/network \
        --ignore=tests/network/test_agents_by_name.py --ignore=tests/network/test_credentials.py
else
    echo "skipped: creating test hosts needs root (CI runs as root)"
fi

step "as root: root's own Domains (subordinate range, apt-style privilege drop), the installed lazaret, the .deb (beside the router and network stages)"
if [ -n "$root_pid" ]; then
    root_rc=0
    wait "$root_pid" || root_rc=$?
    root_pid=""
    cat /tmp/lazaret-root.log
    echo "ran in $(awk -v a="$root_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s (since its start)"
    [ "$root_rc" -eq 0 ] || exit "$root_rc"
else
    echo "skipped: needs root (CI runs as root)"
fi

step "protocol model (spin: invariants, liveness under weak fairness, self-tests; in the background since the router stage)"
model_rc=0
wait "$model_pid" || model_rc=$?
model_pid=""
[ "$model_rc" -eq 0 ] || { cat /tmp/lazaret-model.log; exit 1; }
echo "checked in $(awk -v a="$model_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s (since its start)"
tail -3 /tmp/lazaret-model.log

if [ -n "$claude_pid" ]; then
    wait "$claude_pid" || { tail -5 /tmp/lazaret-claude-install.log; echo "claude: not installed (its two tests skip)"; }
fi
[ -x "$claude_dir/node_modules/.bin/claude" ] && export LAZARET_TEST_CLAUDE="$claude_dir/node_modules/.bin/claude"

# Integration tests: first in parallel (pytest-xdist, --jobs workers; the
# tests of one xdist_group on one worker), then the tests marked `serial`
# alone. pytest exits 5 when a pass selects no test.
# --durations: where the time of the pass goes, printed after its summary.
pytest_args=(-p no:cacheprovider -q -ra --durations=15 ${LAZARET_TEST_ARGS:-})
if [ "$jobs" -gt 0 ] && ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
    echo "pytest-xdist is missing (python3-pytest-xdist, scripts/setup.sh): one process"
    jobs=0
fi
# The agent images are built last in the background (the Debian image
# first): every pass but the agents' runs once the Debian image is there,
# beside the agent builds; the agents' tests and their network stage come
# after those builds (docs/notes/2026-12-04-ci-time.md).
agents_test="$stage/tests/integration/test_agents.py"
if [ "$jobs" -gt 0 ]; then passes=(parallel serial); else passes=(all); fi
if [ "$(id -u)" -eq 0 ]; then
    chown -R "$TEST_USER:" "$stage"
    home=$(getent passwd "$TEST_USER" | cut -d: -f6)
fi
# The Debian image (the background build's first): a bounded wait for its
# mark, left early if the build ended without it (the tests then build it).
if [ -n "$boot_pid" ]; then
    step "Debian image build (in the background since the gcc build)"
    for _ in $(seq 1200); do
        [ ! -e "$boothome/debian.done" ] && kill -0 "$boot_pid" 2>/dev/null || break
        sleep 1
    done
    grep '^image time: debian' /tmp/lazaret-bootstrap.log || echo "no Debian image yet: the tests build it"
fi
# integration_pass NAME TARGET...: one pytest pass over the TARGETs.
integration_pass() {
    local name=$1 rc=0 extra
    shift
    local target=("$@")
    case "$name" in
        parallel) extra=(-n "$jobs" --dist loadgroup -m "not serial" --ignore="$agents_test") ;;
        io_uring)
            extra=(-m "not serial")
            [ "$jobs" -eq 0 ] || extra+=(-n "$jobs" --dist loadgroup)
            ;;
        serial) extra=(-m serial --ignore="$agents_test") ;;
        all) extra=(--ignore="$agents_test") ;;
        agents) extra=(-m "not serial") ;;
    esac
    step "integration tests, ${name} (real runsc, as ${TEST_USER:-$(id -un)}) ${extra[*]}"
    if [ "$(id -u)" -eq 0 ]; then
        # From the staged copy: the checkout itself may be private to root
        # (the README's ~/lazaret is /root/lazaret, mode 0700), and pytest
        # looks at its working directory.
        (cd "$stage" && runuser -u "$TEST_USER" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
            USER="$TEST_USER" LANG=C.UTF-8 LAZARET_BIN="$LAZARET_BIN" LAZARET_FIXTURES="$LAZARET_FIXTURES" \
            LAZARET_TEST_STORAGE="$itstore" LAZARET_TEST_CLAUDE="${LAZARET_TEST_CLAUDE:-}" \
            /usr/bin/python3 -m pytest "${pytest_args[@]}" "${extra[@]}" "${target[@]}") || rc=$?
    else
        LAZARET_TEST_STORAGE="$itstore" \
            /usr/bin/python3 -m pytest "${pytest_args[@]}" "${extra[@]}" "${target[@]}" || rc=$?
    fi
    [ "$rc" -eq 0 ] || { [ "$rc" -eq 5 ] && [ "$name" != all ]; } || exit "$rc"
}
for name in "${passes[@]}"; do
    integration_pass "$name" "$stage/tests/integration"
done
# The router-heavy tests again on FUSE over io_uring (the opt-in
# transport): the transport's own tests (test_fuse_transport.py: both
# paths, a refused reply), Git through the router, the workspace, its
# cache and hot reload, the ignored state, private directories and the
# POSIX cases.
if [ -n "$uring_was" ]; then
    uring_set Y
    uring_sel=()
    for f in test_fuse_transport test_git test_git_workload test_workspace test_workspace_cache test_hot_reload \
        test_ignored_state test_ignored_rename test_private_dirs test_posix_cases; do
        uring_sel+=("$stage/tests/integration/$f.py")
    done
    integration_pass io_uring "${uring_sel[@]}"
    uring_set N
fi

# After the integration passes that need only the Debian image, before
# the agents' network stage and their integration tests.
if [ -n "$boot_pid" ]; then
    step "agent image builds (in the background since the gcc build; the rest of them)"
    boot_rc=0
    wait "$boot_pid" || boot_rc=$?
    boot_pid=""
    if [ "$boot_rc" -eq 0 ]; then
        echo "built in $(awk -v a="$boot_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s (since its start)"
        grep '^image time: ' /tmp/lazaret-bootstrap.log || :
    else
        tail -20 /tmp/lazaret-bootstrap.log
        echo "a background image build failed: the integration tests will try again"
    fi
fi

step "network: the real agents by name, credentials bound to endpoints (root makes their worlds; lazaret runs as ${TEST_USER}, with the images above)"
if [ "$(id -u)" -eq 0 ]; then
    LAZARET_TEST_USER="$TEST_USER" LAZARET_TEST_STORAGE="$itstore" \
        /usr/bin/python3 -m pytest -p no:cacheprovider -q -ra --durations=8 tests/network/test_agents_by_name.py \
        tests/network/test_credentials.py
else
    echo "skipped: creating test hosts needs root (CI runs as root)"
fi

integration_pass agents "$agents_test"
