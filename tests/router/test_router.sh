#!/bin/bash
# End-to-end test of lazaret-router (src/router/main.c) and its Git policy.
#
#   tests/router/test_router.sh /path/to/lazaret-router
#
# LZ_ROUTER_OPTS adds router options (e.g. "--max-held-fds 16" exercises
# the reopen-by-name path on every operation).
#
# Run as root (the test switches to the unprivileged user $LZ_TEST_USER,
# default `lztest`) or directly as an unprivileged user. Needs unshare,
# /dev/fuse usable by that user, git, /usr/bin/python3.
#
# Phases:
#  1. (host) a real repository with a nested repository, a bare-repository
#     fixture, and a core.hooksPath directory; snapshot of what must not change;
#  2. (agent) in a user + mount namespace (root there = the user), mount the
#     router over the repository and try every attack through the mountpoint;
#  3. (host) outside the namespace run the host's git (status, diff, log,
#     commit, __git_ps1) in the root and in every subdirectory the agent
#     touched; no sentinel may appear; the snapshot must be unchanged;
#  4. (agent) normal Git work through the mountpoint, a 50 MiB round trip,
#     a 5000-file storm through the router and directly;
#  5. (host) the agent's commits are there and the repository is sound.
#
# Phases 2c/3c (what the host's Git shows must be what it pushes): from
# inside, replace refs (git replace, by hand, in packed-refs), grafts,
# shallow, info/attributes, a forged commit-graph and notes, on a second
# repository through the router and on its plain copy (the positive
# control); then the host's git log -p / show / diff / checkout / push to
# a bare repository the host made.
#
# Every loop and wait is bounded. Nothing leaves the temporary directory
# except the sentinel check's positive control, which also stays in it.
set -u

ROUTER=${1:-}
TEST_USER=${LZ_TEST_USER:-lztest}

# ---------------------------------------------------------------- helpers
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); printf '  PASS  %s\n' "$*"; }
fail() { FAIL=$((FAIL + 1)); printf '  FAIL  %s\n' "$*"; }

# refuse NAME CMD...: the attack must fail.
refuse() {
    local name=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        pass "refused: $name ($(printf '%s' "$out" | tail -n1 | sed 's/.*: //' | cut -c1-60))"
    else
        fail "NOT refused: $name"
    fi
}

# allow NAME CMD...: must succeed.
allow() {
    local name=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        pass "allowed: $name"
    else
        fail "should work: $name: $(printf '%s' "$out" | tail -n2 | tr '\n' ' ')"
    fi
}

finish() {
    printf '%s: %d passed, %d failed\n' "$1" "$PASS" "$FAIL"
    [ "$FAIL" -eq 0 ]
}

now_ms() { date +%s%3N; }

# With --cache-timeout the kernel may show host edits that much later.
settle() {
    case "${LZ_ROUTER_OPTS:-}" in *cache-timeout*) sleep 1.5 ;; esac
}

# start_router MNT: mounts the router on MNT, sets RPID.
start_router() {
    local mnt=$1 i
    shift
    rm -f "$W/ready"
    # shellcheck disable=SC2086 # LZ_ROUTER_OPTS: extra options, split on purpose
    "$ROUTER" --source "${RSRC:-$W/ws}" --mountpoint "$mnt" --ready-fd 3 ${LZ_ROUTER_OPTS:-} "$@" 3>"$W/ready" 2>>"$W/router.log" &
    RPID=$!
    for i in $(seq 100); do
        grep -q "^ready" "$W/ready" 2>/dev/null && return 0
        kill -0 $RPID 2>/dev/null || break
        sleep 0.05
    done
    echo "router did not become ready" >&2
    cat "$W/router.log" >&2
    return 1
}

# ---------------------------------------------------------------- phase 2: the agent's attacks
phase_attacks() {
    cd "$W" || exit 1
    start_router "$W/mnt" --protect .husky || exit 1
    grep -q "^ready" "$W/ready" && pass "router wrote 'ready' on --ready-fd"
    local M=$W/mnt S=$W/sentinel
    cd "$M" || exit 1

    echo "-- repository configuration"
    refuse "append fsmonitor to .git/config" sh -c "printf '[core]\n\tfsmonitor = touch $S/config\n' >> .git/config"
    refuse "truncate .git/config" truncate -s 0 .git/config
    refuse "chmod .git/config" chmod 666 .git/config
    refuse "touch (utimens) .git/config" touch .git/config
    refuse "rm .git/config" rm -f .git/config
    refuse "mv .git/config away" mv .git/config .git/config.old
    refuse "create .git/config.lock" sh -c 'echo x > .git/config.lock'
    refuse "git config core.fsmonitor (config.lock)" git config core.fsmonitor "touch $S/gitconfig"
    refuse "create .git/config.worktree" sh -c "printf '[core]\n\tfsmonitor = touch $S/cw\n' > .git/config.worktree"
    refuse "reopen a read-only fd of .git/config for writing" /usr/bin/python3 "$W/helper.py" reopen-write .git/config
    refuse "exchange .git/config with an agent file" sh -c "echo '[core] fsmonitor = touch $S/x' > cfg && /usr/bin/python3 $W/helper.py exchange cfg .git/config"
    refuse "rename an agent file over .git/config" mv cfg .git/config
    refuse "lower-case spelling .git/CONFIG" sh -c 'echo x > .git/CONFIG'

    echo "-- commondir / gitdir redirection"
    mkdir -p evilcommon/objects evilcommon/refs
    printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch %s/commondir\n' "$S" > evilcommon/config
    refuse "create .git/commondir -> agent dir" sh -c "echo '$M/evilcommon' > .git/commondir"
    refuse "create .git/commondir (relative)" sh -c 'echo ../evilcommon > .git/commondir'
    refuse "symlink .git/commondir" ln -s ../evilcommon/config .git/commondir
    refuse "create .git/gitdir" sh -c 'echo x > .git/gitdir'

    echo "-- hooks"
    printf '#!/bin/sh\ntouch %s/hook\n' "$S" > evilhook
    chmod +x evilhook
    refuse "create .git/hooks/pre-commit" sh -c "cp evilhook .git/hooks/pre-commit"
    refuse "symlink .git/hooks/pre-commit" ln -s ../../evilhook .git/hooks/pre-commit
    refuse "hard link agent file as .git/hooks/post-checkout" ln evilhook .git/hooks/post-checkout
    refuse "chmod a sample hook (a-x, then +x)" sh -c 'chmod a-x .git/hooks/pre-commit.sample && chmod +x .git/hooks/pre-commit.sample'
    # A chmod to the mode a file has changes nothing: gVisor sends one for
    # every directory it makes (an ANCESTOR may be made).
    allow "chmod .git/config to the mode it has (no change)" sh -c 'chmod "$(stat -c %a .git/config)" .git/config'
    refuse "chmod .git/config to another mode" sh -c 'chmod "$(printf %o $(( 0$(stat -c %a .git/config) ^ 4 )))" .git/config'
    refuse "edit a sample hook" sh -c 'echo "touch x" >> .git/hooks/pre-commit.sample'
    refuse "mv .git/hooks away" mv .git/hooks .git/hooks.old
    refuse "rm -r .git/hooks" rm -rf .git/hooks
    refuse "--protect .husky: edit .husky/pre-commit" sh -c "echo 'touch $S/husky' >> .husky/pre-commit"
    refuse "--protect .husky: mv .husky away" mv .husky husky.old
    refuse "--protect .husky: new .husky/post-checkout" cp evilhook .husky/post-checkout

    echo "-- the .git directory itself"
    refuse "mv .git x" mv .git x
    refuse "rmdir .git" rmdir .git
    refuse "chmod .git" chmod 777 .git
    refuse "exchange .git with an agent dir" /usr/bin/python3 "$W/helper.py" exchange evilcommon .git
    refuse "mkdir .git at the root (exists)" mkdir .git

    echo "-- nested repositories and gitfiles"
    mkdir -p sub2
    refuse "mkdir sub2/.git" mkdir sub2/.git
    refuse "mkdir sub2/.GIT (case variant)" mkdir sub2/.GIT
    refuse "git init sub2" git init -q sub2
    refuse "gitfile sub2/.git -> agent dir" sh -c 'echo "gitdir: ../evilcommon" > sub2/.git'
    refuse "symlink sub2/.git -> agent dir" ln -s ../evilcommon sub2/.git
    refuse "hard link agent file as sub2/.git" sh -c 'echo "gitdir: ../evilcommon" > gf && ln gf sub2/.git'
    refuse "rename agent dir to sub2/.git" mv evilcommon sub2/.git
    refuse "host nested repo: edit vendor/lib/.git/config" sh -c "printf '[core]\n\tfsmonitor = touch $S/nested\n' >> vendor/lib/.git/config"
    refuse "host nested repo: new vendor/lib/.git/hooks/post-checkout" cp evilhook vendor/lib/.git/hooks/post-checkout
    refuse "host nested repo: mv vendor/lib (holds .git)" mv vendor/lib vendor/lib2
    refuse "host nested repo: mv vendor/lib/.git" mv vendor/lib/.git vendor/lib/dotgit

    echo "-- repositories made without a .git name (bare-repository shape)"
    mkdir -p evil/objects evil/refs
    printf '[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch %s/bare\n' "$S" > evil/config
    refuse "complete a bare repository: evil/HEAD" sh -c 'echo "ref: refs/heads/main" > evil/HEAD'
    refuse "git init --bare inside the workspace" git init -q --bare evilbare.git
    mkdir -p evil3
    echo "ref: refs/heads/main" > evil3/HEAD
    refuse "HEAD + commondir shape: evil3/commondir" sh -c 'echo ../evilcommon > evil3/commondir'
    refuse "host bare fixture: edit fixtures/bare.git/config" sh -c "printf '[core]\n\tfsmonitor = touch $S/fixture\n' >> fixtures/bare.git/config"
    refuse "host bare fixture: new fixtures/bare.git/hooks/x" cp evilhook fixtures/bare.git/hooks/post-update
    allow "take a fixture apart: mv bare2.git/HEAD away" mv fixtures/bare2.git/HEAD fixtures/bare2.git/HEAD.bak
    allow "then its config is ordinary data" sh -c "printf '[core]\n\tworktree = ../..\n\tfsmonitor = touch $S/unshaped\n' >> fixtures/bare2.git/config"
    refuse "and it can never be a repository again" mv fixtures/bare2.git/HEAD.bak fixtures/bare2.git/HEAD

    echo "-- objects/info/alternates, modules, worktrees, legacy remotes"
    refuse "create .git/objects/info/alternates" sh -c "echo '$M/evilcommon/objects' > .git/objects/info/alternates"
    refuse "mv .git/objects/info away" mv .git/objects/info .git/objects/info.old
    refuse "rmdir .git/objects/info" rmdir .git/objects/info
    mkdir -p evilinfo && echo "$M/evilcommon/objects" > evilinfo/alternates
    refuse "rename agent dir to a missing objects/info" mv evilinfo fixtures/bare.git/objects/info
    refuse "symlink a missing objects/info to an agent dir" ln -s ../../../evilinfo fixtures/bare.git/objects/info
    allow "mkdir a missing objects/info (a real, empty directory)" mkdir fixtures/bare.git/objects/info
    refuse "then create alternates in it" cp evilinfo/alternates fixtures/bare.git/objects/info/alternates
    refuse "mkdir .git/modules/x" mkdir -p .git/modules/x
    refuse "rename agent dir to .git/modules" mv evilcommon .git/modules
    refuse "mkdir .git/worktrees/x" mkdir -p .git/worktrees/x
    refuse "git worktree add" git worktree add -q ../wt
    refuse "mkdir .git/remotes (legacy remote definitions)" mkdir .git/remotes
    refuse "create .git/branches/x" sh -c 'echo x > .git/branches/x'

    echo "-- links and symlinks"
    refuse "hard link .git/config elsewhere" ln .git/config cfglink
    refuse "hard link .git/config via /proc/self/fd" /usr/bin/python3 "$W/helper.py" linkfd .git/config cfglink2
    ln -s .git gitlink
    refuse "write .git/config through symlink gitlink -> .git" sh -c 'echo x >> gitlink/config'
    refuse "new hook through symlink gitlink/hooks/x" cp evilhook gitlink/hooks/pre-push
    mkdir -p deep && ln -s ../.git/hooks deep/hk
    refuse "new hook through symlink deep/hk/x" cp evilhook deep/hk/post-merge

    echo "-- host hygiene"
    refuse "mknod a device" mknod devnull c 1 3
    refuse "chown to an unmapped uid" sh -c 'touch own && chown 4242 own'
    allow "set-uid bit request (stripped)" sh -c 'cp /bin/true suidbin && chmod 4755 suidbin'

    echo "-- allowed and harmless (see docs/security-git.md)"
    refuse "write .git/info/attributes (changes what the host's diff shows)" sh -c "echo '* -diff' > .git/info/attributes"
    allow "write .gitattributes" sh -c "echo '* filter=evil' > .gitattributes"
    allow "write evil/config in a non-repository dir" sh -c "echo '[core] fsmonitor = touch $S/free' >> evil/config"

    cd "$W" || exit 1
    # Unmounting from outside must make the router exit by itself, cleanly.
    umount "$W/mnt"
    local rc i
    for i in $(seq 100); do kill -0 $RPID 2>/dev/null || break; sleep 0.05; done
    wait $RPID
    rc=$?
    [ $rc -eq 0 ] && pass "router exits 0 when unmounted" || fail "router exit status $rc after umount"
    finish "agent attacks"
}

# ---------------------------------------------------------------- phase 2b: links and indexes the host's git writes through
# plant_host_writes DIR SENT VICTIM: from inside, leave what the host's git
# would later write through (or act on). Run on the router mount, and on a
# plain copy of the same repository (the positive control: the host's git
# must fire there, or this test could not see a failure).
plant_host_writes() {
    local D=$1 S=$2 V=$3
    cd "$D" || exit 1
    export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.invalid
    export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.invalid
    # 1. COMMIT_EDITMSG -> config, after a commit whose message is config text.
    git commit -q --allow-empty -m "$(printf '[core]\n\tfsmonitor = touch %s/editmsg' "$S")" >/dev/null 2>&1
    rm -f .git/COMMIT_EDITMSG
    try "symlink .git/COMMIT_EDITMSG -> config" ln -s config .git/COMMIT_EDITMSG
    # 2. the HEAD reflog appended into a file of the developer's outside the workspace
    try "symlink .git/logs/HEAD -> a developer file" sh -c "rm -f .git/logs/HEAD && ln -s '$V/bashrc' .git/logs/HEAD"
    # 3. a reflog directory replaced by a symlink to a directory outside
    try "directory .git/logs/refs replaced by a symlink" sh -c "rm -rf .git/logs/refs && ln -s '$V/dir' .git/logs/refs"
    # 4. MERGE_MSG hard link to a tracked file, rewritten by the host's merge/commit
    try "hard link README as .git/MERGE_MSG" ln README .git/MERGE_MSG
    # (mv copies on EXDEV: planted only if a second link arrived)
    try "rename a hard-linked file into .git" sh -c 'ln README hl && mv hl .git/SQUASH_MSG && test "$(stat -c %h .git/SQUASH_MSG)" -gt 1'
    try "FIFO .git/TAG_EDITMSG" mkfifo .git/TAG_EDITMSG
    try "rename a directory with a symlink inside into .git" sh -c "mkdir -p carry && ln -sf '$V/bashrc' carry/ORIG_HEAD && mv carry .git/rebase-apply"
    # 5. a crafted index: a hook, the config, and a path outside the work tree
    local blob cfg
    blob=$(printf '#!/bin/sh\ntouch %s/index-hook\n' "$S" | git hash-object -w --stdin)
    cfg=$(printf '[core]\n\tfsmonitor = touch %s/index-config\n' "$S" | git hash-object -w --stdin)
    /usr/bin/python3 "$W/helper.py" craft-index evil.idx "100755:$blob:.git/hooks/post-checkout" \
        "100644:$cfg:.git/config" "100644:$blob:../escaped-by-index" "100644:$blob:README"
    try "crafted index by index.lock rename" sh -c 'cp evil.idx .git/index.lock && mv .git/index.lock .git/index'
    try "crafted index written in place" cp evil.idx .git/index
    try "crafted index through a handle kept open across the rename" \
        /usr/bin/python3 "$W/helper.py" write-after-rename .git/index evil.idx
    rm -rf .git/index.lock evil.idx .git/rebase-apply carry hl .git/SQUASH_MSG .git/TAG_EDITMSG .git/MERGE_MSG
    cd "$W" || exit 1
}

# try NAME CMD...: expected to be refused through the router and to work
# on the control copy; records the outcome, the host check judges.
try() {
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then echo "planted: $name"; else echo "refused: $name"; fi
}

phase_hostwrites() {
    cd "$W" || exit 1
    start_router "$W/mnt" --protect .husky || exit 1
    echo "-- through the router"
    plant_host_writes "$W/mnt" "$W/sentinel" "$W/victim" | tee "$W/planted.router" | sed 's/^/    /'
    echo "-- on the plain control copy"
    plant_host_writes "$W/ctl" "$W/ctl-sentinel" "$W/ctl-victim" | tee "$W/planted.ctl" | sed 's/^/    /'
    if grep -q '^planted' "$W/planted.router"; then
        fail "the router let the agent plant: $(grep '^planted' "$W/planted.router" | cut -d: -f2 | tr '\n' ';')"
    else
        pass "every link, FIFO and crafted index refused by the router"
    fi
    local n
    n=$(grep -c '^planted' "$W/planted.ctl")
    [ "$n" -eq "$(wc -l < "$W/planted.ctl")" ] && pass "control: all $n planted on the plain copy" \
        || fail "control: only $n planted on the plain copy"
    umount "$W/mnt"
    wait $RPID
    finish "host-write attacks"
}

# The developer's everyday commands in a repository the agent left (the
# index ones first: a config the amend rewrote breaks every later command).
host_git_daily() {
    local D=$1
    (cd "$D" &&
        git status >/dev/null 2>&1
        git checkout -- . >/dev/null 2>&1
        git restore . >/dev/null 2>&1
        git checkout-index -a -f >/dev/null 2>&1
        git status >/dev/null 2>&1
        git commit -q --amend --no-edit >/dev/null 2>&1
        git status >/dev/null 2>&1
        git stash >/dev/null 2>&1
        git status >/dev/null 2>&1)
}

phase_hostwrites_check() {
    cd "$W" || exit 1
    host_git_daily "$W/ws"
    [ -z "$(ls -A "$W/sentinel")" ] && pass "router: no sentinel after the host's checkout/restore/amend/stash" \
        || fail "router: SENTINELS $(ls -A "$W/sentinel" | tr '\n' ' ')"
    [ "$(cat "$W/victim/bashrc")" = "# bashrc" ] && pass "router: developer file untouched" || fail "router: developer file written"
    [ -z "$(ls -A "$W/victim/dir")" ] && pass "router: nothing written outside" || fail "router: written outside"
    [ ! -e "$W/escaped-by-index" ] && pass "router: no file outside the work tree" || fail "router: index escaped"
    grep -q fsmonitor "$W/ws/.git/config" && fail "router: .git/config gained fsmonitor" || pass "router: .git/config clean"
    [ "$(cat "$W/ws/README")" != "$(cat "$W/ws/.husky/pre-commit")" ] || fail "router: README replaced"

    host_git_daily "$W/ctl"
    local s c
    c=$(ls -A "$W/ctl-sentinel" | tr '\n' ' ')
    for s in editmsg index-config; do
        [ -e "$W/ctl-sentinel/$s" ] && pass "control: host git ran the planted '$s' on the plain copy" \
            || fail "control: '$s' did not fire on the plain copy (test blind; fired: $c)"
    done
    [ "$(cat "$W/ctl-victim/bashrc")" != "# bashrc" ] && pass "control: the reflog was appended to the developer's file" \
        || fail "control: developer file unchanged on the plain copy"
    [ -n "$(ls -A "$W/ctl-victim/dir")" ] && pass "control: host git wrote into a directory outside" \
        || fail "control: nothing written outside on the plain copy"
    echo "    control also: $( [ -e "$W/escaped-by-index" ] && echo "index entry ../escaped-by-index written outside;" ) fired: $c"
    finish "host-write check"
}

# ---------------------------------------------------------------- phase 2c: what the host's Git displays
# pair N: from main, branch featureN with commit "SUBJN" adding BACKDOORN to
# app.py (d.rb for N=8), and a harmless commit CLEAN on a deleted branch.
pair() {
    local f=app.py
    [ "$1" = 8 ] && f=d.rb
    git checkout -q -b "feature$1" main && echo "BACKDOOR$1" >> $f && git commit -qam "SUBJ$1: tidy" &&
        BAD=$(git rev-parse HEAD) && git checkout -q -b "clean$1" main && echo "harmless$1" >> README &&
        git commit -qam "docs $1" && CLEAN=$(git rev-parse HEAD) && git checkout -q main && git branch -q -D "clean$1"
}

# plant_display DIR SCRATCH: leave what changes the host's display.
plant_display() {
    local D=$1 X=$2 MAIN
    cd "$D" || exit 1
    export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.invalid
    export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.invalid
    MAIN=$(git rev-parse main)
    pair 2
    try "directory of replace refs renamed into .git/refs/replace" \
        sh -c "mkdir rr && echo $CLEAN > rr/$BAD && mv rr .git/refs/replace"
    rm -rf rr
    pair 1
    try "git replace" git replace "$BAD" "$CLEAN"
    echo "    git replace says: $(git replace -f "$BAD" "$CLEAN" 2>&1 | tail -n1)"
    try "loose replace ref by hand" sh -c "mkdir -p .git/refs/replace && echo $CLEAN > .git/refs/replace/$BAD"
    try "git update-ref refs/replace/" git update-ref "refs/replace/$BAD" "$CLEAN"
    pair 3
    try "packed-refs with a replace line, renamed over it" \
        sh -c "{ grep -v '^#' .git/packed-refs; echo '$CLEAN refs/replace/$BAD'; } > pr.tmp && mv pr.tmp .git/packed-refs"
    pair 4
    try "packed-refs.lock with a replace line (git's way)" \
        sh -c "{ grep -v '^#' .git/packed-refs; echo '$CLEAN refs/replace/$BAD'; } > .git/packed-refs.lock && mv .git/packed-refs.lock .git/packed-refs"
    rm -f .git/packed-refs.lock
    pair 5
    try "packed-refs rewritten in place" \
        sh -c "{ grep -v '^#' .git/packed-refs; echo '$CLEAN refs/replace/$BAD'; } > pr.tmp && cat pr.tmp > .git/packed-refs"
    try "packed-refs through a handle kept open across the rename" \
        /usr/bin/python3 "$W/helper.py" write-after-rename .git/packed-refs pr.tmp
    rm -f pr.tmp .git/packed-refs.lock
    pair 6
    git checkout -q feature6 && echo harmless-on-top >> README && git commit -qam "on top 6"
    try "info/grafts hides the backdoor commit" sh -c "echo '$(git rev-parse HEAD) $MAIN' > .git/info/grafts"
    git checkout -q main
    pair 7
    git checkout -q feature7 && echo harmless-on-top >> README && git commit -qam "on top 7"
    try "shallow hides the backdoor commit" sh -c "git rev-parse HEAD > .git/shallow"
    git checkout -q main
    pair 8
    try "info/attributes: *.rb -diff" sh -c "echo '*.rb -diff' > .git/info/attributes"
    # The commit-graph is not read in a repository with replace refs,
    # grafts or shallow: its attack runs in the nested repository cg/.
    cd cg || exit 1
    pair 9
    try "git commit-graph write" sh -c "git commit-graph write --reachable && test -s .git/objects/info/commit-graph"
    echo "    git gc says: $(git gc -q 2>&1 | tail -n1) (exit $(git gc -q >/dev/null 2>&1; echo $?))"
    # The forged graph: made on a scratch copy, the commit's tree swapped.
    rm -rf "$X" && cp -a .git "$X" && rm -f "$X/objects/info/commit-graph" &&
        git --git-dir="$X" commit-graph write --reachable &&
        /usr/bin/python3 "$W/helper.py" forge-graph "$X/objects/info/commit-graph" \
            "$(git rev-parse "$BAD^{tree}")" "$(git rev-parse "$CLEAN^{tree}")"
    try "forged commit-graph copied in" sh -c "rm -f .git/objects/info/commit-graph; cp '$X/objects/info/commit-graph' .git/objects/info/commit-graph"
    try "forged commit-graph renamed in from commit-graph.lock" sh -c "cp '$X/objects/info/commit-graph' .git/objects/info/commit-graph.lock && mv .git/objects/info/commit-graph.lock .git/objects/info/commit-graph && cmp -s '$X/objects/info/commit-graph' .git/objects/info/commit-graph"
    try "commit-graphs/ chain" sh -c "mkdir -p .git/objects/info/commit-graphs && cp '$X/objects/info/commit-graph' .git/objects/info/commit-graphs/graph-x.graph"
    cd "$D" || exit 1
    try "git notes" git notes add -m "NOTE10 reviewed by security" feature1
    try "rr-cache (turns rerere on for the host)" mkdir .git/rr-cache
    cd "$W" || exit 1
}

phase_display() {
    cd "$W" || exit 1
    mkdir -p "$W/dmnt"
    RSRC=$W/dws start_router "$W/dmnt" || exit 1
    echo "-- through the router"
    plant_display "$W/dmnt" "$W/scratch" | tee "$W/dplanted.router" | sed 's/^/    /'
    echo "-- on the plain control copy"
    plant_display "$W/dctl" "$W/ctl-scratch" | tee "$W/dplanted.ctl" | sed 's/^/    /'
    if grep -q '^planted' "$W/dplanted.router"; then
        fail "the router let the agent plant: $(grep '^planted' "$W/dplanted.router" | cut -d: -f2 | tr '\n' ';')"
    else
        pass "every display file refused by the router"
    fi
    grep -q "git replace says: error: cannot lock ref 'refs/replace/" "$W/dplanted.router" &&
        pass "git replace fails cleanly (cannot lock ref)" || fail "git replace: no clear error"
    grep -q 'git gc says: .*(exit 0)' "$W/dplanted.router" &&
        pass "git gc succeeds with the commit-graph protected" || fail "git gc failed through the router"
    local n
    n=$(grep -c '^planted' "$W/dplanted.ctl")
    [ "$n" -eq "$(grep -c '^planted\|^refused' "$W/dplanted.ctl")" ] && pass "control: all $n planted on the plain copy" \
        || fail "control: only $n planted on the plain copy"
    umount "$W/dmnt"
    wait $RPID
    finish "display attacks"
}

# shown D: one line per attack, "N shown" when the host's git displays
# what the objects say, "N HIDDEN" when it does not.
shown() {
    local D=$1 n
    cd "$D" || exit 1
    for n in 1 2 3 4 5 9; do
        if (cd "$D/$([ $n = 9 ] && echo cg)" && git log -p -1 "feature$n" | grep -q "BACKDOOR$n" &&
            git show "feature$n" | grep -q "BACKDOOR$n" && git diff main "feature$n" | grep -q "BACKDOOR$n"); then
            echo "$n shown"
        else echo "$n HIDDEN"; fi
    done
    for n in 6 7; do
        if git log --format=%s "feature$n" 2>/dev/null | grep -q "SUBJ$n"; then echo "$n shown"; else echo "$n HIDDEN"; fi
    done
    if git diff main feature8 | grep -q BACKDOOR8 && git log -p -1 feature8 | grep -q BACKDOOR8; then echo "8 shown"; else echo "8 HIDDEN"; fi
    if git log -1 feature1 | grep -q NOTE10; then echo "10 HIDDEN"; else echo "10 shown"; fi
}

phase_display_check() {
    cd "$W" || exit 1
    local r c
    r=$(shown "$W/dws" 2>/dev/null | tr '\n' ',')
    c=$(shown "$W/dctl" 2>/dev/null | tr '\n' ',')
    echo "    router:  $r"
    echo "    control: $c"
    case $r in *HIDDEN*) fail "router: the host's git displays something else than the objects: $r" ;;
        *) pass "router: log -p, show, diff display every backdoor, subject and no note" ;; esac
    local n
    for n in 1 2 3 4 5 6 7 8 9 10; do
        case ",$c" in *",$n HIDDEN,"*) pass "control $n: hidden from the host's display on the plain copy" ;;
            *) fail "control $n: shown on the plain copy (test blind)" ;; esac
    done
    # What the display hid is what push sends (the plain copy), and what
    # the router's repository shows is what it pushes.
    git init -q --bare "$W/remote.git" && git init -q --bare "$W/ctl-remote.git"
    (cd "$W/dctl" && git push -q "$W/ctl-remote.git" feature1 2>/dev/null)
    git --git-dir="$W/ctl-remote.git" show feature1:app.py 2>/dev/null | grep -q BACKDOOR1 &&
        pass "control: git push sent the backdoor the display hid" || fail "control: push did not send the backdoor"
    if (cd "$W/dws" && git push -q "$W/remote.git" feature1 feature2 feature3 feature4 feature5 feature6 feature7 feature8 main 2>&1 &&
        cd cg && git push -q "$W/remote.git" feature9 2>&1); then
        pass "router: git push of every branch works"
    else
        fail "router: git push failed"
    fi
    [ "$(git --git-dir="$W/remote.git" rev-parse feature1)" = "$(cd "$W/dws" && git rev-parse feature1)" ] &&
        git --git-dir="$W/remote.git" show feature1:app.py | grep -q BACKDOOR1 &&
        pass "router: what was shown (BACKDOOR1) is what the remote got" || fail "router: remote differs"
    (cd "$W/dws" && git checkout -q feature1 && grep -q BACKDOOR1 app.py && git checkout -q main) &&
        pass "router: git checkout feature1 writes what was shown" || fail "router: checkout wrote something else"
    (cd "$W/dctl" && git checkout -q feature1 && ! grep -q BACKDOOR1 app.py && git checkout -q main) &&
        pass "control: git checkout feature1 wrote the replacement" || fail "control: checkout wrote the backdoor (test blind)"
    (cd "$W/dws" && git fsck --no-progress >/dev/null 2>&1) && pass "router: git fsck clean" || fail "router: git fsck"
    finish "display check"
}

# ---------------------------------------------------------------- phase 4: normal work
phase_work() {
    cd "$W" || exit 1
    start_router "$W/mnt" || exit 1
    local M=$W/mnt
    export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.invalid
    export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.invalid
    cd "$M" || exit 1

    echo "-- a change of owner drops set-id bits, as on a local disk (set-user-ID always, set-group-ID of a group-executable file)"
    chown "$(id -u):$(id -g)" fixtures/setid fixtures/setgid-noexec
    local m
    m="$(stat -c %a fixtures/setid) $(stat -c %a "$W/ws/fixtures/setid") $(stat -c %a fixtures/setgid-noexec) $(stat -c %a "$W/ws/fixtures/setgid-noexec")"
    if [ "$m" = "755 755 2644 2644" ]; then pass "chown drops set-id bits (inside, host): $m"; else fail "chown drops set-id bits: want 755 755 2644 2644, got $m"; fi

    echo "-- normal Git work through the router"
    git reset -q --hard HEAD 2>/dev/null
    git clean -qfd 2>/dev/null
    allow "edit + git add + git commit" sh -c 'echo "agent line" >> README && git add README && git commit -qm "agent: edit README"'
    allow "git checkout -b feat" git checkout -q -b feat
    allow "commit on feat" sh -c 'echo feature > feature.txt && git add feature.txt && git commit -qm "agent: feature"'
    allow "git stash" sh -c 'echo wip >> README && git stash -q'
    allow "git stash pop" git stash pop -q
    allow "commit -a" git commit -qam "agent: wip"
    allow "git checkout main" git checkout -q main
    allow "git merge --no-ff feat" git merge -q --no-ff --no-edit feat
    allow "git rebase" sh -c 'git checkout -q -b rb main~1 && echo rb > rb.txt && git add rb.txt && git commit -qm "agent: rb" && git rebase -q main && git checkout -q main && git merge -q --ff-only rb'
    allow "git branch -d" git branch -q -d rb
    allow "git gc" git gc -q
    allow "git pack-refs --all (packed-refs checked, accepted)" git pack-refs --all
    allow "the developer's note packed, kept" sh -c 'grep -q " refs/notes/commits$" .git/packed-refs && git log --format=%N | grep -q "developer note"'
    allow "git branch -d of a packed branch (packed-refs rewritten with the note)" sh -c 'git branch pr2 && git pack-refs --all && git branch -q -D pr2'
    allow "branch after pack-refs" sh -c 'git branch pr-after && git branch -D pr-after && git show-ref --verify -q refs/heads/main'
    allow "git fetch from a host bare repository" git fetch -q "$W/remote.git" feature1
    allow "git log" sh -c 'git log --oneline | grep -q "agent: feature"'
    allow "git status clean" sh -c 'test -z "$(git status --porcelain)"'
    git log --oneline --graph | sed 's/^/    /'

    echo "-- file-system operations editors, compilers and package managers use"
    allow "fifo, fallocate, copy_file_range, lseek, truncate, utimens, chmod, symlink, link, rename flags, statvfs" \
        /usr/bin/python3 "$W/helper.py" ops "$M/opsdir"
    rm -rf "$M/opsdir"

    echo "-- host edits are seen at once (no caching)"
    echo one > "$W/ws/hostfile"
    settle
    allow "new host file visible" grep -qx one "$M/hostfile"
    echo two > "$W/ws/hostfile"
    settle
    allow "same-size host rewrite visible" grep -qx two "$M/hostfile"
    mv "$W/ws/hostfile" "$W/ws/hostfile2"
    settle
    allow "host rename visible" sh -c "test ! -e '$M/hostfile' && grep -qx two '$M/hostfile2'"
    rm -f "$W/ws/hostfile2"

    echo "-- an append through a held fd after a host append keeps both"
    # The kernel's size of the file is the one it saw at open: the append
    # must land at the host file's real end, not at that offset.
    echo a > "$M/appendfile"
    exec 3>>"$M/appendfile"
    echo host >> "$W/ws/appendfile"
    echo agent >&3
    exec 3>&-
    allow "host and agent appends both kept" sh -c "printf 'a\\nhost\\nagent\\n' | cmp -s - '$W/ws/appendfile'"
    rm -f "$W/ws/appendfile"
    echo "a longer first content" > "$M/truncfile"
    echo short > "$M/truncfile"
    allow "O_TRUNC of an existing file truncates it" sh -c "echo short | cmp -s - '$W/ws/truncfile'"
    rm -f "$W/ws/truncfile"

    echo "-- created files' handles do not pile up in the router"
    # Once the kernel opens files itself it sends no RELEASE for a created
    # file unlinked or reopened before its close (seen on 6.18): 20 000 such
    # files ran the router out of fds in a storm.
    /usr/bin/python3 - "$M/leaks" "$RPID" <<'PY'
import os, sys
os.mkdir(sys.argv[1])
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for i in range(3000):
    f = os.open(f"u{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=d)
    g = os.open(f"u{i}", os.O_RDONLY, dir_fd=d)
    os.unlink(f"u{i}", dir_fd=d)
    os.close(g)
    os.close(f)
for i in range(3000):
    f = os.open(f"k{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444, dir_fd=d)
    g = os.open(f"k{i}", os.O_RDONLY, dir_fd=d)
    os.write(f, b"xy")
    os.ftruncate(f, 1)
    os.close(g)
    os.close(f)
writable = 0
for fd in os.listdir(f"/proc/{sys.argv[2]}/fdinfo"):
    try:
        with open(f"/proc/{sys.argv[2]}/fdinfo/{fd}") as fi:
            flags = int(fi.read().split("flags:")[1].split()[0], 8)
    except (OSError, IndexError):
        continue
    writable += (flags & 3) != 0
print(writable)
sys.exit(0 if writable <= 1100 else 1)
PY
    [ $? -eq 0 ] && pass "writable fds in the router stay bounded after 6000 created files" \
        || fail "the router piles up created files' fds"
    allow "a file created read-only was written and truncated through its handle" sh -c "test \"\$(cat '$M/leaks/k2999')\" = x"
    rm -rf "$M/leaks"

    echo "-- the policy follows the real location of a directory, not the agent's view"
    mkdir -p "$M/plain"
    # The agent holds the directory (its cwd); the host moves it into .git/hooks.
    cd "$M/plain" || exit 1
    mv "$W/ws/plain" "$W/ws/.git/hooks/plain"
    refuse "create in a held directory the host moved into .git/hooks" sh -c 'echo x > newhook'
    mv "$W/ws/.git/hooks/plain" "$W/ws/plain"
    allow "and allowed again once it is back" sh -c 'echo x > newfile'
    cd "$M" || exit 1
    rm -rf "$M/plain"

    echo "-- ownership"
    touch "$M/owned-by-developer"

    echo "-- 50 MiB round trip"
    local t0 t1 t2
    t0=$(now_ms)
    cp "$W/big.src" "$M/big.bin"
    sync
    t1=$(now_ms)
    cmp -s "$W/big.src" "$M/big.bin" && pass "50 MiB read back through the router, byte-exact" || fail "50 MiB differs through the router"
    t2=$(now_ms)
    cmp -s "$W/big.src" "$W/ws/big.bin" && pass "50 MiB byte-exact on the source side" || fail "50 MiB differs on the source side"
    echo "    write 50 MiB: $((t1 - t0)) ms; read+compare: $((t2 - t1)) ms"
    rm -f "$M/big.bin"

    echo "-- 5000-file storm (create, stat, unlink)"
    echo "    through the router:  $(/usr/bin/python3 "$W/helper.py" storm "$M/storm" 5000)"
    echo "    directly on source:  $(/usr/bin/python3 "$W/helper.py" storm "$W/ws/storm" 5000)"
    rmdir "$M/storm" "$W/ws/storm" 2>/dev/null

    cd "$W" || exit 1
    kill -TERM $RPID
    local rc i
    for i in $(seq 100); do kill -0 $RPID 2>/dev/null || break; sleep 0.05; done
    wait $RPID
    rc=$?
    [ $rc -eq 0 ] && pass "router exits 0 on SIGTERM" || fail "router exit status $rc on SIGTERM"
    mountpoint -q "$W/mnt" && fail "still mounted after SIGTERM" || pass "unmounted after SIGTERM"
    finish "agent work"
}

# ---------------------------------------------------------------- host side
host_setup() {
    cd "$W" || exit 1
    mkdir -p home sentinel mnt
    printf '[user]\n\tname = Developer\n\temail = dev@example.invalid\n[init]\n\tdefaultBranch = main\n' > home/.gitconfig
    git init -q ws
    cd ws || exit 1
    printf 'hello\n' > README
    mkdir -p sub vendor fixtures .husky
    printf 'sub\n' > sub/file.txt
    printf '#!/bin/sh\nexit 0\n' > .husky/pre-commit
    chmod +x .husky/pre-commit
    git config core.hooksPath .husky
    git add -A && git commit -qm "initial"
    # A nested repository made by the developer.
    git init -q vendor/lib && (cd vendor/lib && echo lib > lib.c && git add lib.c && git commit -qm lib)
    # Bare repositories kept as test fixtures (not tracked).
    git init -q --bare fixtures/bare.git
    git init -q --bare fixtures/bare2.git
    rmdir fixtures/bare.git/objects/info   # lets the agent try to supply one
    # The developer's own set-id files (the agent can make none).
    cp /bin/true fixtures/setid && chmod 6755 fixtures/setid
    touch fixtures/setgid-noexec && chmod 2644 fixtures/setgid-noexec
    printf 'vendor/\nfixtures/\n' > .git/info/exclude
    # A note of the developer's: it stays when the agent's git gc and
    # pack-refs rewrite packed-refs (phase 4).
    git notes add -m "developer note" HEAD
    cd "$W" || exit 1
    # Phase 2c's repository (its refs packed, as after a host gc) and its
    # plain copy.
    git init -q dws && (cd dws && printf 'print(1)\n' > app.py && printf 'puts 1\n' > d.rb && echo readme > README &&
        git add -A && git commit -qm base && git pack-refs --all)
    git init -q dws/cg && (cd dws/cg && printf 'print(1)\n' > app.py && echo readme > README && git add -A && git commit -qm base)
    cp -a dws dctl
    # The positive control of phase 2b: a plain copy, and the developer's
    # files outside each repository that a write-through would reach.
    cp -a ws ctl
    mkdir -p ctl-sentinel victim/dir ctl-victim/dir
    echo "# bashrc" > victim/bashrc
    echo "# bashrc" > ctl-victim/bashrc
    head -c $((50 * 1024 * 1024)) /dev/urandom > big.src
}

snapshot() {
    (cd "$W/ws" && find .git/config .git/hooks .husky vendor/lib/.git/config vendor/lib/.git/hooks \
        fixtures/bare.git/config fixtures/bare.git/hooks fixtures/bare.git/HEAD \
        -printf '%p %y %m %s\n' 2>&1 | sort
     cd "$W/ws" && find .git/config .git/hooks .husky vendor/lib/.git/config fixtures/bare.git/config \
        -type f -exec sha256sum {} + | sort)
}

host_git_everywhere() {
    local d
    for d in . sub sub2 evil evil3 evilcommon deep vendor vendor/lib fixtures/bare.git fixtures/bare2.git \
        .husky .git; do
        [ -d "$W/ws/$d" ] || continue
        (cd "$W/ws/$d" &&
            git status >/dev/null 2>&1
            git diff >/dev/null 2>&1
            git log -1 >/dev/null 2>&1
            git rev-parse --git-dir --show-toplevel >/dev/null 2>&1
            bash -c 'source /usr/lib/git-core/git-sh-prompt 2>/dev/null &&
                     GIT_PS1_SHOWDIRTYSTATE=1 GIT_PS1_SHOWUNTRACKEDFILES=1 GIT_PS1_SHOWSTASHSTATE=1 \
                     __git_ps1 "%s" >/dev/null 2>&1')
    done
}

phase_host_check() {
    cd "$W" || exit 1
    echo "-- positive control: a planted fsmonitor is noticed by this test"
    git init -q control && (cd control && git config core.fsmonitor "touch $W/control-sentinel" && git status >/dev/null 2>&1)
    [ -e "$W/control-sentinel" ] && pass "control: host git runs core.fsmonitor (sentinel works)" || fail "control sentinel missing: test is blind"

    echo "-- host git in every directory the agent touched"
    host_git_everywhere
    (cd "$W/ws" && git commit -qam "host: commit after agent" >/dev/null 2>&1)
    (cd "$W/ws/vendor/lib" && git commit -qam "host: nested" >/dev/null 2>&1)
    host_git_everywhere
    if [ -z "$(ls -A "$W/sentinel")" ]; then
        pass "no sentinel after host git status/diff/log/commit/__git_ps1 everywhere"
    else
        fail "SENTINELS CREATED: $(ls "$W/sentinel" | tr '\n' ' ')"
    fi
    snapshot > "$W/snap.after"
    diff -u "$W/snap.before" "$W/snap.after" >/dev/null && pass "protected files unchanged (content, mode, listing)" \
        || { fail "protected files changed"; diff -u "$W/snap.before" "$W/snap.after" | head -20; }
    local p
    for p in .git/commondir .git/gitdir .git/config.lock .git/config.worktree .git/objects/info/alternates \
        .git/modules .git/worktrees .git/remotes .git/CONFIG sub2/.git sub2/.GIT evil/HEAD evil3/commondir \
        evilbare.git/objects fixtures/bare2.git/HEAD fixtures/bare.git/objects/info/alternates cfglink cfglink2 .git/hooks/pre-commit vendor/lib2 x; do
        [ -e "$W/ws/$p" ] || [ -L "$W/ws/$p" ] && fail "exists on host: $p" || pass "absent on host: $p"
    done
    [ -d "$W/ws/.git" ] && [ -d "$W/ws/vendor/lib/.git" ] && pass ".git directories still in place" || fail ".git moved"
    local m
    m=$(stat -c %a "$W/ws/suidbin" 2>/dev/null)
    [ "$m" = 755 ] && pass "set-uid bit stripped on host (mode $m)" || fail "suidbin mode $m"
    finish "host check"
}

phase_host_final() {
    cd "$W/ws" || exit 1
    echo "-- host sees the agent's work"
    git log --oneline | grep -q "agent: feature" && pass "host git log shows the agent's commits" || fail "agent commits missing on host"
    git log --oneline | grep -q "agent: rb" && pass "host sees the rebased commit" || fail "rebased commit missing"
    git fsck --no-progress >/dev/null 2>&1 && pass "git fsck on host" || fail "git fsck failed"
    [ "$(stat -c %U "$W/ws/owned-by-developer")" = "$(id -un)" ] && pass "agent-created file owned by $(id -un) on host" \
        || fail "owner $(stat -c %U "$W/ws/owned-by-developer")"
    [ -z "$(ls -A "$W/sentinel")" ] && pass "still no sentinel" || fail "sentinels: $(ls "$W/sentinel")"
    finish "host final"
}

write_helper() {
    cat > "$W/helper.py" <<'EOF'
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def die(e): sys.stderr.write("error: %s\n" % os.strerror(e)); sys.exit(1)
cmd = sys.argv[1]
if cmd == "exchange":          # renameat2(RENAME_EXCHANGE)
    r = libc.renameat2(-100, sys.argv[2].encode(), -100, sys.argv[3].encode(), 2)
    if r != 0: die(ctypes.get_errno())
elif cmd == "reopen-write":    # open read-only, then reopen the fd for writing
    fd = os.open(sys.argv[2], os.O_RDONLY)
    try:
        w = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)
        os.write(w, b"\n[core]\n\tfsmonitor = false\n")
    except OSError as e: die(e.errno)
elif cmd == "linkfd":          # linkat through /proc/self/fd (AT_SYMLINK_FOLLOW)
    fd = os.open(sys.argv[2], os.O_RDONLY)
    r = libc.linkat(-100, ("/proc/self/fd/%d" % fd).encode(), -100, sys.argv[3].encode(), 0x400)
    if r != 0: die(ctypes.get_errno())
elif cmd == "ops":              # every data operation, checked
    import errno, stat
    d = sys.argv[2]; os.makedirs(d)
    os.mkfifo(os.path.join(d, "fifo")); assert stat.S_ISFIFO(os.lstat(os.path.join(d, "fifo")).st_mode)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    with open(a, "wb") as f: f.write(b"x" * 10000)
    fd = os.open(a, os.O_RDWR)
    os.posix_fallocate(fd, 0, 1 << 20); assert os.fstat(fd).st_size == 1 << 20
    os.ftruncate(fd, 10000)
    hole = os.lseek(fd, 0, os.SEEK_HOLE); assert hole >= 10000 - 1, hole
    fo = os.open(b, os.O_CREAT | os.O_WRONLY, 0o644)
    n = os.copy_file_range(fd, fo, 10000, 0, 0); assert n > 0
    os.close(fo); os.close(fd)
    os.truncate(b, 5000); assert os.stat(b).st_size == 5000
    os.utime(b, (1000000000, 1000000000)); assert int(os.stat(b).st_mtime) == 1000000000
    os.chmod(b, 0o600); assert stat.S_IMODE(os.stat(b).st_mode) == 0o600
    os.symlink("a", os.path.join(d, "l")); assert os.readlink(os.path.join(d, "l")) == "a"
    os.link(a, os.path.join(d, "a2")); assert os.stat(a).st_nlink == 2
    with open(os.path.join(d, "a2"), "ab") as f: f.write(b"y")
    r = libc.renameat2(-100, a.encode(), -100, b.encode(), 1)      # RENAME_NOREPLACE
    assert r != 0 and ctypes.get_errno() == errno.EEXIST
    sa, sb = os.stat(a).st_size, os.stat(b).st_size
    r = libc.renameat2(-100, a.encode(), -100, b.encode(), 2)      # RENAME_EXCHANGE
    assert r == 0 and os.stat(a).st_size == sb and os.stat(b).st_size == sa
    os.rename(b, os.path.join(d, "c"))
    try: os.setxattr(a, "user.x", b"1"); raise SystemExit("xattr accepted")
    except OSError as e: assert e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP), e
    os.statvfs(d)
    os.mkdir(os.path.join(d, "sub")); os.rmdir(os.path.join(d, "sub"))
    assert sorted(os.listdir(d)) == ["a", "a2", "c", "fifo", "l"], os.listdir(d)
elif cmd == "craft-index":     # a version-2 index with the given entries, as Git would read it
    import hashlib, struct
    ents = []
    for spec in sys.argv[3:]:
        mode, oid, path = spec.split(":", 2)
        ents.append((path.encode(), int(mode, 8), bytes.fromhex(oid)))
    ents.sort()
    out = b"DIRC" + struct.pack(">II", 2, len(ents))
    for path, mode, oid in ents:
        e = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + oid + struct.pack(">H", min(len(path), 0xFFF)) + path
        e += b"\0" * (8 - len(e) % 8)
        out += e
    out += hashlib.sha1(out).digest()
    open(sys.argv[2], "wb").write(out)
elif cmd == "write-after-rename":   # index.lock with the current index, renamed, then written through the old fd
    idx, evil = sys.argv[2], open(sys.argv[3], "rb").read()
    good = open(idx, "rb").read()
    fd = os.open(idx + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, good)
    os.rename(idx + ".lock", idx)
    try:
        os.pwrite(fd, evil, 0)
        os.ftruncate(fd, len(evil))
    except OSError as e: die(e.errno)
elif cmd == "forge-graph":     # a commit-graph whose entry names another root tree
    path, bad, clean = sys.argv[2], bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4])
    b = open(path, "rb").read()
    if b.count(bad) != 1: sys.exit("tree not in the graph once")
    open(path, "wb").write(b.replace(bad, clean))
elif cmd == "storm":           # create, stat, unlink N small files; times in ms
    d, n = sys.argv[2], int(sys.argv[3])
    os.makedirs(d, exist_ok=True)
    names = [os.path.join(d, "f%05d" % i) for i in range(n)]
    t0 = time.monotonic()
    for p in names:
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644); os.write(fd, b"x"); os.close(fd)
    t1 = time.monotonic()
    for p in names: os.stat(p)
    t2 = time.monotonic()
    for p in names: os.unlink(p)
    t3 = time.monotonic()
    ms = lambda a, b: (b - a) * 1000
    print("create %.0f ms, stat %.0f ms, unlink %.0f ms, total %.0f ms" % (ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t0, t3)))
EOF
}

# ---------------------------------------------------------------- driver
case "${LZ_PHASE:-}" in
attacks) W=$2; ROUTER=$1; phase_attacks; exit $? ;;
work) W=$2; ROUTER=$1; phase_work; exit $? ;;
host-setup) W=$2; host_setup; snapshot > "$W/snap.before"; exit 0 ;;
host-check) W=$2; phase_host_check; exit $? ;;
hostwrites) W=$2; ROUTER=$1; phase_hostwrites; exit $? ;;
hostwrites-check) W=$2; phase_hostwrites_check; exit $? ;;
display) W=$2; ROUTER=$1; phase_display; exit $? ;;
display-check) W=$2; phase_display_check; exit $? ;;
host-final) W=$2; phase_host_final; exit $? ;;
esac

if [ -z "$ROUTER" ] || [ ! -x "$ROUTER" ]; then
    echo "usage: $0 /path/to/lazaret-router" >&2
    exit 2
fi
ROUTER=$(readlink -f "$ROUTER")

if [ "$(id -u)" -eq 0 ]; then
    id "$TEST_USER" >/dev/null 2>&1 || { echo "no user $TEST_USER" >&2; exit 2; }
    as_user() { runuser -u "$TEST_USER" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$W/home" LANG=C.UTF-8 "$@"; }
else
    as_user() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$W/home" LANG=C.UTF-8 "$@"; }
fi

W=$(mktemp -d /tmp/lz-router-test.XXXXXX)
chmod 755 "$W"
[ "$(id -u)" -eq 0 ] && chown "$TEST_USER": "$W"
cp "$0" "$W/test_router.sh"
chmod 755 "$W/test_router.sh"
write_helper
[ "$(id -u)" -eq 0 ] && chown "$TEST_USER": "$W/helper.py" "$W/test_router.sh"
cleanup() {
    if [ -n "${KEEP:-}" ]; then echo "kept $W"; return; fi
    rm -rf "$W"
}
trap cleanup EXIT

T="$W/test_router.sh"
in_ns() { as_user env LZ_PHASE="$1" LZ_ROUTER_OPTS="${LZ_ROUTER_OPTS:-}" timeout 600 unshare --map-root-user --mount bash "$T" "$ROUTER" "$W"; }
on_host() { as_user env LZ_PHASE="$1" timeout 600 bash "$T" "$ROUTER" "$W"; }

rc=0
echo "== phase 1: host repository ($W)"
on_host host-setup || rc=1
echo "== phase 2: agent attacks through the router"
in_ns attacks || rc=1
echo "== phase 3: host git outside the namespace"
on_host host-check || rc=1
echo "== phase 2b: links and indexes the host's git would write through"
in_ns hostwrites || rc=1
echo "== phase 3b: the host's everyday git, on the router's tree and on the plain control copy"
on_host hostwrites-check || rc=1
echo "== phase 2c: replace refs, grafts, shallow, attributes, commit-graph, notes"
in_ns display || rc=1
echo "== phase 3c: the host's git log -p / show / diff / push / checkout, router and plain control"
on_host display-check || rc=1
echo "== phase 4: normal agent work through the router"
in_ns work || rc=1
echo "== phase 5: host sees the result"
on_host host-final || rc=1
echo "== ignored-state renames (tests/router/test_ignored_rename.sh)"
LZ_TEST_USER=$TEST_USER bash "$(dirname "$(readlink -f "$0")")/test_ignored_rename.sh" "$ROUTER" >"$W/ignored-rename.log" 2>&1 ||
    { rc=1; cat "$W/ignored-rename.log"; }
grep -E "passed|ALL PASSED" "$W/ignored-rename.log"
echo "== router log (refusals)"
sed 's/^/    /' "$W/router.log" | head -80
echo "    ($(grep -c refused "$W/router.log") refusals logged)"
[ $rc -eq 0 ] && echo "ALL PASSED" || echo "SOME TESTS FAILED"
exit $rc
