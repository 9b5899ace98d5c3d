#!/usr/bin/env bash
# tests/model/check.sh -- model-check the protocol model docs/model/lazaret.pml
# with spin (see docs/model/README.md).
#
#   bash tests/model/check.sh            # from any directory
#
# Runs, each as its own pan binary built in a temporary directory:
#   - the seed fixture (Lazaret.cfg sizes): safety (the twelve TLA+
#     invariants, our extras -- ResourceNesting, QuiescentStateClean and the
#     escalation/linger extension's ExecutedEqualsApproved,
#     ApprovalOnlyAfterDraw, SessionApprovalScoped, LingerOnlyWhenIdle,
#     PromptStateClosed -- assertions, invalid end states) and each ltl
#     property separately under weak fairness (pan -a -f), all exhaustive;
#   - three extra fixtures (FIXTURE_MISMATCH, FIXTURE_ESC, FIXTURE_WIDE),
#     likewise (FIXTURE_ESC also as ESC_OTHER_IDENTITY, safety only);
#   - self-tests: deliberately broken variants of the model (spin -DBUG_...)
#     and an unfair search, which must make pan report errors.
# Exits non-zero if any run does not end as expected ("errors: 0" for a
# check, "errors: N>0" for a self-test), times out, or is truncated.
#
# Environment:
#   LAZARET_MODEL_TIMEOUT  seconds allowed to one pan run (default 240)
#   LAZARET_MODEL_FULL=1   also run EmptyDomainStopsWhenIdle and
#                          DomainEventuallyStops on FIXTURE_WIDE (about
#                          2 minutes and 0.55 GB together; allowed at least
#                          900 s each)
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
model="$root/docs/model/lazaret.pml"
run_timeout=${LAZARET_MODEL_TIMEOUT:-240}
full=${LAZARET_MODEL_FULL:-0}
depth=100000

for tool in spin gcc timeout awk sed; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check.sh: '$tool' not found (Debian: apt-get install spin gcc coreutils)" >&2
        exit 2
    fi
done
[[ -r $model ]] || { echo "check.sh: $model not readable" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/lazaret-model.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

failures=0
runs=0
script_t0=$(date +%s.%N)

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

note_failure() {
    failures=$((failures + 1))
    echo "FAIL $*" >&2
}

# build NAME KIND [SPIN_DEFINE...]
#   KIND: safety (pan -DSAFETY -DNOCLAIM) or fairN (pan with -DNFAIR=N, for
#   pan -a [-f] -N claim). The spin defines are kept for trail replay.
build_now() {
    local name=$1 kind=$2
    shift 2
    local dir="$work/$name"
    local -a cflags
    mkdir -p "$dir"
    cp -- "$model" "$dir/lazaret.pml"
    : >"$dir/defines"
    if (($# > 0)); then
        printf '%s\n' "$@" >"$dir/defines"
    fi
    case $kind in
        safety) cflags=(-DSAFETY -DNOCLAIM) ;;
        fair*)  cflags=("-DNFAIR=${kind#fair}") ;;
        *) echo "check.sh: bad build kind $kind" >&2; exit 2 ;;
    esac
    if ! (cd "$dir" && spin "$@" -a lazaret.pml) >"$dir/spin.log" 2>&1 ||
        grep -q 'Error' "$dir/spin.log" || [[ ! -f $dir/pan.c ]]; then
        cat "$dir/spin.log" >&2
        note_failure "build $name: spin -a $*"
        return 1
    fi
    # -w: pan.c's generated array writes are bounds-checked by pan itself;
    # gcc 12 warns about them (-Wstringop-overflow) without cause.
    if ! (cd "$dir" && gcc -O2 -w "${cflags[@]}" -o pan pan.c) >"$dir/gcc.log" 2>&1; then
        cat "$dir/gcc.log" >&2
        note_failure "build $name: gcc ${cflags[*]}"
        return 1
    fi
}

# build NAME KIND [SPIN_DEFINE...]: with prebuild=1 (the first pass over
# the checks below), start build_now in the background, at most ncpu at a
# time, and remember its arguments; in the second pass, a build whose
# arguments match a finished one is not redone (a failed one is redone in
# the foreground, which reports it).
prebuild=0
ncpu=$(nproc 2>/dev/null || echo 1)
build() {
    local name=$1
    if ((prebuild)); then
        while (($(jobs -rp | wc -l) >= ncpu)); do wait -n || true; done
        (build_now "$@" >/dev/null 2>&1 && printf '%s\n' "$@" >"$work/$name.built") &
        return 0
    fi
    if [[ -f $work/$name.built ]] && [[ $(cat "$work/$name.built") == "$(printf '%s\n' "$@")" ]]; then
        return 0
    fi
    build_now "$@"
}

# check EXPECT FIXTURE LABEL BUILD [PAN_ARG...]
#   EXPECT: pass (errors: 0) or fail (errors > 0).
# Sets LAST_LOG to the pan output.
check() {
    ((prebuild)) && return 0
    local expect=$1 fixture=$2 label=$3 name=$4
    shift 4
    local dir="$work/$name"
    local log="$dir/run$runs.log"
    runs=$((runs + 1))
    LAST_LOG=$log
    if [[ ! -x $dir/pan ]]; then
        note_failure "$fixture $label: no pan binary (build $name failed)"
        return 0
    fi
    local t0 rc=0
    t0=$(date +%s.%N)
    (cd "$dir" && timeout "$run_timeout" ./pan "$@") >"$log" 2>&1 || rc=$?
    local wall
    wall=$(elapsed "$t0")
    local errors states visited trans dep ptime problem=""
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    states=$(awk '/states, stored/ { print $1; exit }' "$log")
    visited=$(sed -n 's/.*states, stored (\([^ ]*\) visited).*/\1/p' "$log" | head -n 1)
    trans=$(awk '/transitions \(= / { print $1; exit }' "$log")
    dep=$(sed -n 's/.*depth reached \([0-9][0-9]*\),.*/\1/p' "$log" | head -n 1)
    ptime=$(sed -n 's/^pan: elapsed time \([^ ]*\) seconds.*/\1/p' "$log" | tail -n 1)
    if ((rc == 124)); then
        problem="timed out after ${run_timeout}s"
    elif ((rc >= 126)); then
        problem="pan exited with status $rc"
    elif [[ -z $errors ]]; then
        problem="no 'errors:' line in pan output"
    elif grep -q 'max search depth too small' "$log"; then
        problem="search truncated (max search depth too small)"
    elif grep -Eq 'out of memory|too many processes|pan: error' "$log"; then
        problem=$(grep -Em1 'out of memory|too many processes|pan: error' "$log")
    fi
    local verdict
    if [[ -n $problem ]]; then
        verdict=FAIL
    elif [[ $expect == pass && $errors == 0 ]]; then
        verdict=PASS
    elif [[ $expect == fail && $errors != 0 ]]; then
        # the error must be of the kind the run is about: an acceptance
        # cycle for an ltl run, an assertion for a safety run
        local want='assertion violated' arg
        for arg in "$@"; do
            [[ $arg == -a ]] && want='acceptance cycle'
        done
        if grep -q "pan:[0-9]*: $want" "$log"; then
            verdict=PASS
        else
            verdict=FAIL
            problem="expected '$want', pan reported: $(grep -m1 '^pan:[0-9]*:' "$log" || echo nothing)"
        fi
    else
        verdict=FAIL
        problem="expected $([[ $expect == pass ]] && echo 'errors: 0' || echo 'errors > 0'), got errors: $errors"
    fi
    local statestr="states=${states:-?}"
    [[ -n $visited ]] && statestr+=" (visited ${visited})"
    printf '%s %-9s %-52s errors=%s %s transitions=%s depth=%s pan=%ss wall=%ss\n' \
        "$verdict" "$fixture" "$label" "${errors:-?}" "$statestr" "${trans:-?}" \
        "${dep:-?}" "${ptime:-?}" "$wall"
    if [[ $verdict == FAIL ]]; then
        sed 's/^/    | /' "$log" | head -n 40 >&2
        note_failure "$fixture $label: $problem"
    fi
}

# replay_names BUILD: the names of the invariants reported VIOLATED on pan's
# error trail (the monitor prints them; pan itself only shows the expression).
replay_names() {
    local dir="$work/$1"
    local -a defs=()
    mapfile -t defs <"$dir/defines"
    (cd "$dir" && spin -t "${defs[@]}" lazaret.pml 2>&1) |
        sed -n 's/.*VIOLATED \([A-Za-z]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# expect_violation BUILD INVARIANT
expect_violation() {
    ((prebuild)) && return 0
    local got
    got=$(replay_names "$1")
    if [[ " $got " == *" $2 "* ]]; then
        printf '     %-9s   trail replay: VIOLATED %s\n' "" "$2"
    else
        note_failure "$1: expected the trail to violate $2, replay shows: ${got:-nothing}"
    fi
}

# coverage FIXTURE EXPECTED_DEAD...: every action but the expected ones must
# have been taken at least once in the last (COVERAGE) safety run.
coverage() {
    ((prebuild)) && return 0
    local fixture=$1
    shift
    local expected_dead
    expected_dead=$(printf '%s\n' "$@" | sort | tr '\n' ' ' | sed 's/ $//')
    local total dead
    total=$(grep -c '^coverage ' "$LAST_LOG" || true)
    dead=$(awk '$1 == "coverage" && $3 == 0 { print $2 }' "$LAST_LOG" | sort | tr '\n' ' ' | sed 's/ $//')
    if ((total == 0)); then
        note_failure "$fixture coverage: no coverage lines in pan output"
        return 0
    fi
    printf '     %-9s   action coverage: %d of %d actions taken; never enabled: %s\n' \
        "$fixture" "$((total - $(wc -w <<<"$dead")))" "$total" "${dead:-none}"
    if [[ $dead != "$expected_dead" ]]; then
        note_failure "$fixture coverage: never-enabled actions '${dead}' differ from expected '${expected_dead}'"
    fi
}

liveness=(SessionEventuallyResolves RequestEventuallyResolves
          PromptEventuallyRestoresTerminal EmptyDomainEventuallyStops
          EmptyDomainStopsWhenIdle PromptEventuallyEnds DomainEventuallyStops)
# the slow ones on FIXTURE_WIDE, run only with LAZARET_MODEL_FULL=1
wide_full_only=" EmptyDomainStopsWhenIdle DomainEventuallyStops "
safety_label="safety: 12 TLA+ invariants + 8 extras"
# actions of the prompt, never enabled where no prompt can happen
prompt_actions=(QueuePrompt BeginPrompt PromptDrawn DiscardTypeahead
                DeveloperApprove DeveloperApproveSession DeveloperEdit
                DeveloperDeny DeveloperQuit PromptTimeout DenyWithoutPrompt)

echo "== spin model check of docs/model/lazaret.pml ($(spin -V | head -n 1))"

# all_checks: every build and check, in order. Run twice: first with
# prebuild=1 (check, coverage and expect_violation return at once), so
# the pan binaries are built in parallel; then for real.
all_checks() {

# --- seed fixture (Lazaret.cfg): D1; S1, S2; R1, R2, R3; 4 commands ----------
# (no session has two requests of one identity: SessionApprove is dead)
build seed-safety safety -DNO_STUTTER -DCOVERAGE || true
check pass seed "$safety_label" seed-safety -m"$depth"
coverage seed RejectConfigurationMismatch SessionApprove
build seed-live fair3 || true
for p in "${liveness[@]}"; do
    check pass seed "ltl $p (-a -f)" seed-live -a -f -m"$depth" -N "$p"
done

# --- extra fixture MISMATCH: as the seed, but S2 has fingerprint config-b ---
build mismatch-safety safety -DFIXTURE_MISMATCH -DNO_STUTTER -DCOVERAGE || true
check pass mismatch "$safety_label" mismatch-safety -m"$depth"
coverage mismatch "${prompt_actions[@]}" SessionApprove
build mismatch-live fair3 -DFIXTURE_MISMATCH || true
for p in "${liveness[@]}"; do
    check pass mismatch "ltl $p (-a -f)" mismatch-live -a -f -m"$depth" -N "$p"
done

# --- extra fixture ESC: D1; S1 with R1, R2 and S2 with R3, one identity ----
build esc-safety safety -DFIXTURE_ESC -DNO_STUTTER -DCOVERAGE || true
check pass esc "$safety_label" esc-safety -m"$depth"
coverage esc RejectConfigurationMismatch AutoApprove
build esc2-safety safety -DFIXTURE_ESC -DESC_OTHER_IDENTITY -DNO_STUTTER -DCOVERAGE || true
check pass esc2 "$safety_label (R2 other identity)" esc2-safety -m"$depth"
coverage esc2 RejectConfigurationMismatch AutoApprove SessionApprove
build esc-live fair3 -DFIXTURE_ESC || true
for p in "${liveness[@]}"; do
    check pass esc "ltl $p (-a -f)" esc-live -a -f -m"$depth" -N "$p"
done

# --- extra fixture WIDE: + D2 with S3 and R4 (authenticated shell request) --
build wide-safety safety -DFIXTURE_WIDE -DNO_STUTTER -DCOVERAGE || true
check pass wide "$safety_label" wide-safety -m"$depth"
coverage wide RejectConfigurationMismatch SessionApprove
build wide-live fair4 -DFIXTURE_WIDE || true
for p in "${liveness[@]}"; do
    if [[ $wide_full_only == *" $p "* && $full != 1 ]]; then
        printf 'SKIP %-9s %-52s (LAZARET_MODEL_FULL=1 runs it)\n' wide "ltl $p (-a -f)"
        continue
    fi
    if [[ $wide_full_only == *" $p "* ]]; then
        saved_timeout=$run_timeout
        run_timeout=$((run_timeout > 900 ? run_timeout : 900))
        check pass wide "ltl $p (-a -f)" wide-live -a -f -m"$depth" -N "$p"
        run_timeout=$saved_timeout
        continue
    fi
    check pass wide "ltl $p (-a -f)" wide-live -a -f -m"$depth" -N "$p"
done

# --- self-tests: the checks can fail -----------------------------------------
echo "-- self-tests (each must report errors)"
# safety_bug FIXTURE BUILD INVARIANT SPIN_DEFINE...: a broken variant whose
# safety run must fail, with INVARIANT on the replayed trail
safety_bug() {
    local fixture=$1 name=$2 inv=$3
    shift 3
    local label=${1#-D}
    build "$name" safety "$@" -DNO_STUTTER || true
    check fail "$fixture" "$label: safety" "$name" -m"$depth"
    expect_violation "$name" "$inv"
}
safety_bug seed bug-teardown OrderedNetworkStartup -DBUG_TEARDOWN_ORDER
safety_bug seed bug-anchor ResourceNesting -DBUG_ANCHOR_ORDER
safety_bug seed bug-unauth AuthenticatedRequestsOnly -DBUG_UNAUTHENTICATED
safety_bug wide bug-autoshell-wide AutoApprovalNoShell -DBUG_AUTO_SHELL -DFIXTURE_WIDE
safety_bug seed bug-edit-no-confirm ExecutedEqualsApproved -DBUG_EDIT_NO_CONFIRM
safety_bug seed bug-exec-original ExecutedEqualsApproved -DBUG_EXEC_ORIGINAL
safety_bug seed bug-typeahead ApprovalOnlyAfterDraw -DBUG_TYPEAHEAD
safety_bug esc bug-grant-any-session SessionApprovalScoped -DBUG_GRANT_ANY_SESSION -DFIXTURE_ESC
safety_bug esc2 bug-grant-any-identity SessionApprovalScoped -DBUG_GRANT_ANY_IDENTITY -DFIXTURE_ESC -DESC_OTHER_IDENTITY
safety_bug seed bug-grant-outlives-session SessionApprovalScoped -DBUG_GRANT_OUTLIVES_SESSION
safety_bug seed bug-cancel-orphan NoOrphanHostProcess -DBUG_CANCEL_ORPHAN
safety_bug seed bug-disconnect-orphan NoOrphanHostProcess -DBUG_DISCONNECT_ORPHAN
safety_bug seed bug-linger-no-cancel LingerOnlyWhenIdle -DBUG_LINGER_NO_CANCEL
safety_bug seed bug-prompt-leak PromptStateClosed -DBUG_PROMPT_LEAK
safety_bug seed bug-helper-routes EgressOnlyThroughPolicy -DBUG_HELPER_ROUTES
safety_bug seed bug-ready-before-policy OrderedNetworkStartup -DBUG_READY_BEFORE_POLICY

build bug-noprompttimeout fair3 -DBUG_NO_PROMPT_TIMEOUT || true
for p in PromptEventuallyEnds RequestEventuallyResolves; do
    check fail seed "BUG_NO_PROMPT_TIMEOUT: ltl $p" bug-noprompttimeout \
        -a -f -m"$depth" -N "$p"
done

build bug-noteardown fair3 -DBUG_NO_TEARDOWN || true
for p in EmptyDomainStopsWhenIdle DomainEventuallyStops; do
    check fail seed "BUG_NO_TEARDOWN: ltl $p" bug-noteardown \
        -a -f -m"$depth" -N "$p"
done

check fail seed "no fairness: ltl SessionEventuallyResolves (-a)" seed-live \
    -a -m"$depth" -N SessionEventuallyResolves

echo "-- documented blind spots (expected to pass although the model is broken)"
build bug-autoshell-seed safety -DBUG_AUTO_SHELL -DNO_STUTTER || true
check pass seed "BUG_AUTO_SHELL: safety (R3 never verified)" bug-autoshell-seed -m"$depth"
check pass seed "BUG_NO_TEARDOWN: ltl EmptyDomainEventuallyStops" bug-noteardown \
    -a -f -m"$depth" -N EmptyDomainEventuallyStops
build bug-anchor-tla safety -DBUG_ANCHOR_ORDER -DTLA_INVARIANTS_ONLY -DNO_STUTTER || true
check pass seed "BUG_ANCHOR_ORDER: 12 TLA+ invariants only" bug-anchor-tla -m"$depth"
}

prebuild=1
all_checks >/dev/null 2>&1
wait
prebuild=0
printf -- "-- %s pan binaries built, %d at a time, %ss\n" "$(ls "$work"/*.built 2>/dev/null | wc -l)" "$ncpu" "$(elapsed "$script_t0")"
all_checks

echo "== $runs pan runs, $failures failure(s), $(elapsed "$script_t0")s"
if ((failures > 0)); then
    exit 1
fi
