"""Linked worktrees (`git worktree add`) as workspaces.

A worktree's `.git` names its Git directory inside the main repository's
(`.git/worktrees/NAME`), outside the workspace. Lazaret serves that common
Git directory through a router of its own (linked-worktree mode) at
/run/lazaret/repo/.git and shows the sandbox a `.git` naming it there
(docs/security-git.md, "Linked worktrees"). Normal work flows both ways;
the config, hooks, info/ rules, the worktree's own commondir/gitdir, the
other worktrees and the main work tree's state stay the developer's; the
main work tree's files are not reachable. Every attack is checked by what
the host's own git does afterwards, with a positive control: the same
attack made on the host directly (as if there were no router) makes the
sentinel fire.
"""
import os
import subprocess
import textwrap
import time

import pexpect
import pytest

from conftest import git_env, lz_run, make_git_repo, wait_until

pytestmark = pytest.mark.slow

AGENT = ("export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=Agent "
         "GIT_COMMITTER_EMAIL=a@x.invalid; git config --global --add safe.directory '*' 2>/dev/null; ")
COMMON = "/run/lazaret/repo/.git"


def host_git(d, *args, **kw):
    return subprocess.run(["git", "-C", str(d), *args], env=git_env(), capture_output=True, text=True,
                          timeout=60, **kw)


def inside(lazaret, env, ws, script, **kw):
    return lz_run(lazaret, env, ws, ["bash", "-c", AGENT + textwrap.dedent(script)], **kw)


def make_worktrees(base, *names, worktree_config=False):
    """A repository `main` with an untracked file only its work tree has,
    and one linked worktree per name (branch of the same name)."""
    main = make_git_repo(base / "main")
    (main / "MAIN-ONLY-a8f3").write_text("main work tree secret\n")
    (main / "app.py").write_text("print('hello')\n")
    host_git(main, "add", "app.py")
    host_git(main, "commit", "-qm", "app")
    if worktree_config:
        host_git(main, "config", "extensions.worktreeConfig", "true")
    wts = []
    for n in names:
        r = host_git(main, "worktree", "add", "-q", str(base / n), "-b", n)
        assert r.returncode == 0, r.stderr
        wts.append(base / n)
    return main, wts


def test_worktree_round_trip(lazaret, debian, tmp_path):
    main, (wt,) = make_worktrees(tmp_path, "feature")
    r = inside(lazaret, debian, wt, f"""
        set -e
        cd /workspace
        cat .git
        git rev-parse --git-dir --git-common-dir
        git status --short
        echo change >> README
        git add README
        git commit -qm 'from the worktree sandbox'
        git branch side
        git log --oneline | head -3
        echo stashed > s.txt; git add s.txt; git stash -q; git stash pop -q; git commit -qm stash-pop
        git checkout -q side; echo side > side.txt; git add side.txt; git commit -qm on-side
        git checkout -q feature; git rebase -q side
        git log --format=%s | head -5
        ls -a /run/lazaret/repo
        git worktree list
        git pack-refs --all
        git repack -adq
        git prune
        git commit-graph write 2>/dev/null
        git worktree prune --expire now
        git gc -q 2>&1 && echo GC-RAN || echo GC-STOPPED
        cat $(git rev-parse --git-dir)/gitdir
        git status --short
    """)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode() + out
    assert f"gitdir: {COMMON}/worktrees/feature" in out
    assert f"{COMMON}/worktrees/feature\n{COMMON}\n" in out
    # Its own gitdir names where it is inside: `worktree prune` (and
    # `gc`) leave it alone.
    assert "/workspace/.git\n" in out
    assert "/workspace " in out  # git worktree list
    assert (main / ".git" / "worktrees" / "feature" / "HEAD").exists()
    assert "refs/heads/feature" in (main / ".git" / "packed-refs").read_text()
    # `git gc` stops at `reflog expire --all`, which would rewrite the main
    # work tree's reflog under its HEAD.lock (docs/security-git.md, "Linked
    # worktrees"); repack and prune, above, work.
    assert "GC-STOPPED" in out and "main-worktree/HEAD" in out
    assert list((main / ".git" / "objects" / "pack").glob("*.pack"))
    # The host sees the commits at once, on the worktree's branch.
    log = host_git(wt, "log", "--format=%s").stdout
    assert "from the worktree sandbox" in log and "on-side" in log and "stash-pop" in log
    assert host_git(wt, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "feature"
    assert "on-side" in host_git(main, "log", "side", "--format=%s").stdout
    # The main work tree is untouched and still on main.
    assert host_git(main, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"
    assert host_git(main, "status", "--porcelain").stdout.strip() == "?? MAIN-ONLY-a8f3"
    assert host_git(main, "fsck", "--no-progress").returncode == 0
    # The host's gitfile is the developer's still.
    assert (wt / ".git").read_text() == f"gitdir: {main}/.git/worktrees/feature\n"


def test_main_work_tree_not_reachable(lazaret, debian, tmp_path):
    main, (wt,) = make_worktrees(tmp_path, "wt")
    # Positive control: the search finds the marker where it is reachable.
    r = subprocess.run(["grep", "-rl", "main work tree secret", str(tmp_path)], capture_output=True, text=True)
    assert "MAIN-ONLY-a8f3" in r.stdout
    r = inside(lazaret, debian, wt, """
        grep -rl 'main work tree secret' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null
        ls -a /run/lazaret/repo
        true
    """)
    out = r.stdout.decode()
    assert "MAIN-ONLY" not in out
    assert out.split() == [".", "..", ".git"]


def test_main_state_and_other_worktrees_stay(lazaret, debian, tmp_path):
    """The main work tree's HEAD, index and logs/HEAD and another worktree's
    Git directory are read-only inside; the worktree cannot be pruned or
    added to."""
    main, (wt, other) = make_worktrees(tmp_path, "wt", "other")
    g = main / ".git"
    watched = [g / "HEAD", g / "index", g / "logs" / "HEAD", g / "worktrees" / "other" / "HEAD",
               g / "worktrees" / "other" / "index", g / "worktrees" / "wt" / "gitdir",
               g / "worktrees" / "wt" / "commondir"]
    before = {p: p.read_bytes() for p in watched}
    r = inside(lazaret, debian, wt, f"""
        G={COMMON}
        echo 'ref: refs/heads/evil' > $G/HEAD
        cp $G/index /tmp/i && mv -f /tmp/i $G/index
        echo x >> $G/logs/HEAD
        echo 'ref: refs/heads/evil' > $G/worktrees/other/HEAD
        rm -f $G/worktrees/other/index
        echo /tmp/elsewhere > $G/worktrees/wt/gitdir
        cd /workspace && git worktree prune; git worktree add -q /tmp/w3 2>&1; git worktree lock wt 2>&1
        git gc -q 2>&1
        true
    """)
    assert r.returncode == 0, r.stderr.decode()
    for p, b in before.items():
        assert p.read_bytes() == b, f"{p} changed"
    assert not (g / "worktrees" / "w3").exists() and not (g / "worktrees" / "wt" / "locked").exists()
    assert host_git(other, "status", "--porcelain").returncode == 0
    assert host_git(main, "fsck", "--no-progress").returncode == 0
    wl = host_git(main, "worktree", "list", "--porcelain").stdout
    assert str(wt) in wl and str(other) in wl and "prunable" not in wl


# Each attack: a bash snippet with $G (the common Git directory), $P (the
# worktree's own Git directory), $W (the worktree), $O (the other
# worktree's Git directory), $EVIL (a path relative to $P naming $W/evil)
# and {cmd} (the sentinel). Inside the sandbox they are the sandbox's
# paths; in the control, the host's.
FSMON = "printf '[core]\\n\\tfsmonitor = {cmd}\\n'"
ATTACKS = {
    "common-config-append": FSMON + " >> $G/config",
    "common-config-replace": "cp $G/config /tmp/c.$$ && " + FSMON + " >> /tmp/c.$$ && mv -f /tmp/c.$$ $G/config",
    "common-config-lock": FSMON + " > $G/config.lock && cat $G/config >> $G/config.lock && mv -f $G/config.lock $G/config",
    "common-hooks": ("for h in pre-commit post-commit post-checkout reference-transaction post-index-change; "
                     "do printf '#!/bin/sh\\n{cmd}\\n' > $G/hooks/$h && chmod +x $G/hooks/$h; done"),
    "commondir-retarget": ("mkdir -p $W/evil/objects $W/evil/refs && " + FSMON + " > $W/evil/config && "
                           "echo \"$EVIL\" > $P/commondir"),
    "worktree-config": FSMON + " > $P/config.worktree",
    "other-worktree-config": FSMON + " > $O/config.worktree",
    "worktree-hooks": ("mkdir -p $P/hooks && printf '#!/bin/sh\\n{cmd}\\n' > $P/hooks/post-checkout && "
                       "chmod +x $P/hooks/post-checkout"),
    "gitfile": ("mkdir -p $W/evil/objects $W/evil/refs && " + FSMON + " > $W/evil/config && "
                "echo 'ref: refs/heads/main' > $W/evil/HEAD; echo 'gitdir: evil' > $W/.git"),
    "alternates": "echo $W/altobj > $G/objects/info/alternates",
    # The same ends by other routes: a rename over, a lock renamed in, the
    # worktree's Git directory swapped, a hard link, a symlink.
    "commondir-rename": ("mkdir -p $W/evil/objects $W/evil/refs && " + FSMON + " > $W/evil/config && "
                         "mv -f $P/commondir $P/commondir.old; echo \"$EVIL\" > $P/commondir"),
    "commondir-lock": ("mkdir -p $W/evil/objects $W/evil/refs && " + FSMON + " > $W/evil/config && "
                       "echo \"$EVIL\" > $P/commondir.lock && mv -f $P/commondir.lock $P/commondir"),
    "worktree-dir-swap": ("mkdir -p $W/evil/objects $W/evil/refs && " + FSMON + " > $W/evil/config && "
                          "cp -r $P /tmp/p2.$$ && echo \"$EVIL\" > /tmp/p2.$$/commondir && "
                          "mv $P $P.old && cp -r /tmp/p2.$$ $P"),
    "config-hardlink": "ln $G/config $W/cfg && " + FSMON + " >> $W/cfg",
    "worktree-config-symlink": FSMON + " > $W/wtcfg && ln -s $W/wtcfg $P/config.worktree",
}
# Attacks that change what the host's git displays rather than run: the
# sentinel is the host's `git log -p` output.
DISPLAY = {
    "info-attributes": "mkdir -p $G/info && echo '*.py -diff' > $G/info/attributes",
}


def run_attack_host_side(base, name, script):
    """The positive control: the attack made on the host's own paths, as
    if no router were there."""
    main, (wt, other) = make_worktrees(base, "wt", "other", worktree_config=True)
    g = main / ".git"
    p = g / "worktrees" / "wt"
    env = dict(os.environ, G=str(g), P=str(p), W=str(wt), O=str(g / "worktrees" / "other"),
               EVIL=os.path.relpath(wt / "evil", p))
    subprocess.run(["bash", "-c", script + "; true"], env=env, check=True, capture_output=True)
    return main, wt, other


def host_everyday(main, wt, other):
    """The developer's everyday git in each work tree."""
    (wt / "README").write_text("developer edit\n")
    for d in (wt, main, other):
        host_git(d, "status")
        host_git(d, "diff")
        host_git(d, "log", "-1", "-p")
    host_git(wt, "commit", "-qam", "developer commit")
    host_git(wt, "checkout", "-qb", "dev-branch")
    host_git(other, "checkout", "-qb", "dev-other")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_worktree_attack_control(tmp_path, name):
    """Without the router the attack works (the sentinel would fire),
    except where Git itself ignores the file (noted)."""
    sentinel = tmp_path / "SENTINEL"
    main, wt, other = run_attack_host_side(tmp_path / "ctl", name, ATTACKS[name].format(cmd=f"touch {sentinel}"))
    if name == "alternates":
        # Alternates make git read objects elsewhere: no program; the
        # control is that the host's git honours the file.
        (wt / "altobj").mkdir(exist_ok=True)
        assert host_git(wt, "count-objects", "-v").stdout.count("alternate:") == 1
        return
    if name == "worktree-hooks":
        # Git never reads hooks from a worktree's own Git directory: the
        # attack is inert even on the host (kept so that a future Git that
        # did would be caught by the sandbox test).
        host_everyday(main, wt, other)
        assert not sentinel.exists()
        return
    host_everyday(main, wt, other)
    assert sentinel.exists(), f"control {name!r}: the host's git did not run the planted command"


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_worktree_attack_defeated(lazaret, debian, tmp_path, name):
    main, (wt, other) = make_worktrees(tmp_path, "wt", "other", worktree_config=True)
    sentinel = tmp_path / "SENTINEL"
    g = main / ".git"
    watched = [g / "config", wt / ".git", g / "worktrees" / "wt" / "commondir", g / "worktrees" / "wt" / "gitdir"]
    before = {p: p.read_bytes() for p in watched}
    evil = os.path.relpath(wt / "evil", g / "worktrees" / "wt")
    script = (f"G={COMMON}; P=$G/worktrees/wt; W=/workspace; O=$G/worktrees/other; EVIL={evil}; cd /workspace; "
              + ATTACKS[name].format(cmd=f"touch {sentinel}") + "; true")
    r = inside(lazaret, debian, wt, script)
    assert r.returncode == 0, r.stderr.decode()
    for p, b in before.items():
        assert p.read_bytes() == b, f"attack {name!r} changed {p}"
    planted = [p for p in [g / "hooks" / "pre-commit", g / "hooks" / "post-checkout",
                           g / "worktrees" / "wt" / "config.worktree", g / "worktrees" / "other" / "config.worktree",
                           g / "objects" / "info" / "alternates", g / "worktrees" / "wt.old",
                           g / "worktrees" / "wt" / "commondir.old"] if p.exists() or p.is_symlink()]
    assert planted == [], f"attack {name!r} planted {planted}"
    host_everyday(main, wt, other)
    assert not sentinel.exists(), f"attack {name!r} made the host's git run an agent-written command"
    assert host_git(main, "fsck", "--no-progress").returncode == 0
    assert "developer commit" in host_git(wt, "log", "-1", "--format=%s").stdout


def test_worktree_display_attack(lazaret, debian, tmp_path):
    """info/attributes of the common directory (`*.py -diff`) would make the
    host's `git log -p` hide a change as "Binary files differ"."""
    script = DISPLAY["info-attributes"]
    # Control: on the host, the attack hides the diff.
    main, wt, other = run_attack_host_side(tmp_path / "ctl", "info-attributes", script)
    (wt / "app.py").write_text("print('backdoor')\n")
    host_git(wt, "commit", "-qam", "py change")
    assert "Binary files" in host_git(wt, "log", "-1", "-p").stdout
    # Through the sandbox it does not.
    main, (wt,) = make_worktrees(tmp_path / "real", "wt")
    r = inside(lazaret, debian, wt, f"G={COMMON}; " + script + "; true")
    assert r.returncode == 0
    (wt / "app.py").write_text("print('backdoor')\n")
    host_git(wt, "commit", "-qam", "py change")
    out = host_git(wt, "log", "-1", "-p").stdout
    assert "Binary files" not in out and "backdoor" in out


def _agent(lazaret, env, wt, n, marker):
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(wt), env=env.environ(), encoding="utf-8",
                      timeout=180, dimensions=(30, 120))
    c.expect(r"[#$] ")
    c.sendline(AGENT + "cd /workspace; PS1='agent$ '")
    c.expect("agent\\$ ")
    # The markers are spelled apart on the command line so that its echo
    # does not match them.
    c.sendline(f"for i in $(seq 1 {n}); do echo $i >> {marker}.txt; git add {marker}.txt; "
               f"git commit -qm \"{marker} $i\" || echo COMMIT-\"\"FAILED; done; echo DONE-\"\"{marker}")
    return c


def test_two_agents_two_worktrees_commit_at_once(lazaret, debian, tmp_path):
    """Two sandboxes (two Domains) on two worktrees of one repository, each
    driven through its own PTY, committing at the same time; the host sees
    every commit of both, and the repository is sound."""
    main, (wa, wb) = make_worktrees(tmp_path, "agent-a", "agent-b")
    n = 15
    a = _agent(lazaret, debian, wa, n, "a")
    b = _agent(lazaret, debian, wb, n, "b")
    for c, m in ((a, "a"), (b, "b")):
        c.expect(f"DONE-{m}\r\n")
        assert "COMMIT-FAILED" not in c.before, c.before
    # Two Domains side by side, each saying which repository and branch.
    ps = subprocess.run([lazaret, "ps"], env=debian.environ(), capture_output=True, text=True, timeout=60).stdout
    assert f"linked worktree agent-a of {main}, branch agent-a" in ps
    assert f"linked worktree agent-b of {main}, branch agent-b" in ps
    for c in (a, b):
        c.sendline("exit")
        c.expect(pexpect.EOF)
    la = host_git(main, "log", "agent-a", "--format=%s").stdout
    lb = host_git(main, "log", "agent-b", "--format=%s").stdout
    assert all(f"a {i}" in la for i in range(1, n + 1)), la
    assert all(f"b {i}" in lb for i in range(1, n + 1)), lb
    assert host_git(main, "fsck", "--no-progress").returncode == 0
    assert host_git(wa, "status", "--porcelain").stdout == ""


def test_config_check_and_removed_worktree(lazaret, debian, tmp_path):
    main, (wt,) = make_worktrees(tmp_path, "wt")
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=wt, env=debian.environ(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"linked worktree wt of the repository {main} (branch wt)" in r.stdout
    assert "/run/lazaret/repo/.git" in r.stdout
    # The Domain ran once; then the developer removes the worktree.
    assert inside(lazaret, debian, wt, "git -C /workspace status --short").returncode == 0
    assert host_git(main, "worktree", "remove", str(wt)).returncode == 0
    # Its Domain's state stays, and `state ls` says the workspace is gone.
    wait_until(lambda: not any(str(wt) in ln and " yes " in ln for ln in subprocess.run(
        [lazaret, "state", "ls"], env=debian.environ(), capture_output=True, text=True, timeout=120).stdout.splitlines()))
    st = subprocess.run([lazaret, "state", "ls"], env=debian.environ(), capture_output=True, text=True,
                        timeout=120)
    assert st.returncode == 0, st.stderr
    lines = st.stdout.splitlines()
    at = [i for i, ln in enumerate(lines) if ln.endswith(str(wt))]
    assert len(at) == 1, st.stdout
    assert "the workspace no longer exists (a removed worktree?)" in "\n".join(lines[at[0]:at[0] + 3])
    # A worktree whose metadata was removed but whose directory is left
    # refuses to start, naming the way to mend it.
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main}/.git/worktrees/wt\n")
    r = lz_run(lazaret, debian, wt, ["true"])
    assert r.returncode != 0
    assert "git worktree repair" in r.stderr.decode()


def test_run_worktree_option(lazaret, debian, tmp_path):
    """`lazaret run --worktree NAME`: the host's git makes the worktree
    (../REPO-NAME, branch NAME) and the session runs in it; again, it
    joins the same worktree; from inside a worktree it is a sibling of the
    main work tree too."""
    main = make_git_repo(tmp_path / "proj")
    cmd = [lazaret, "run", "-p", "test", "--worktree", "feat", "--", "bash", "-c",
           "git -C /workspace rev-parse --abbrev-ref HEAD; pwd"]
    r = subprocess.run(cmd, cwd=main, env=debian.environ(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["feat", "/workspace"]
    wt = tmp_path / "proj-feat"
    assert (wt / ".git").read_text() == f"gitdir: {main}/.git/worktrees/proj-feat\n"
    assert host_git(wt, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "feat"
    # Again: the same worktree.
    r = subprocess.run(cmd, cwd=main, env=debian.environ(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    # From the worktree, an existing branch: checked out, not made.
    host_git(main, "branch", "existing")
    r = subprocess.run([lazaret, "run", "-p", "test", "--worktree", "existing", "--", "true"], cwd=wt,
                       env=debian.environ(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert host_git(tmp_path / "proj-existing", "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "existing"
    # A name that is no worktree name, and a path that is something else.
    r = subprocess.run([lazaret, "run", "-p", "test", "--worktree", "../x", "--", "true"], cwd=main,
                       env=debian.environ(), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "worktree name" in r.stderr
    (tmp_path / "proj-taken").mkdir()
    r = subprocess.run([lazaret, "run", "-p", "test", "--worktree", "taken", "--", "true"], cwd=main,
                       env=debian.environ(), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is not a linked worktree of" in r.stderr


def test_main_repository_domain_with_worktrees(lazaret, debian, tmp_path):
    """The main work tree's own Domain, while linked worktrees exist: commits
    work; the worktrees' Git directories stay read-only (as before), so
    `git gc` stops at `reflog expire --all` there too (it would rewrite each
    worktree's reflog under its HEAD.lock)."""
    main, (wt,) = make_worktrees(tmp_path, "wt")
    r = inside(lazaret, debian, main, """
        cd /workspace
        echo x >> README; git commit -qam main-commit && echo COMMITTED
        git gc -q 2>&1 && echo GC-RAN || echo GC-STOPPED
        echo 'ref: refs/heads/evil' > .git/worktrees/wt/HEAD
        true
    """)
    out = r.stdout.decode()
    assert "COMMITTED" in out
    assert "GC-STOPPED" in out, out
    assert (main / ".git" / "worktrees" / "wt" / "HEAD").read_text() == "ref: refs/heads/wt\n"
    assert host_git(wt, "status", "--porcelain").returncode == 0


def test_worktree_start_scans_common_git_dir(lazaret, env, tmp_path):
    """At Domain start the common Git directory is walked like a
    workspace's own: a symlink the host's git would write through, or an
    unsafe index in the worktree's own Git directory, refuses the start;
    removed, the Domain starts (the positive control of each)."""
    from test_git_scan import crafted_index
    main, (wt,) = make_worktrees(tmp_path, "wt")
    pgd = main / ".git" / "worktrees" / "wt"
    target = tmp_path / "elsewhere"
    target.write_text("")
    (pgd / "ORIG_HEAD").unlink(missing_ok=True)
    (pgd / "ORIG_HEAD").symlink_to(target)
    r = lz_run(lazaret, env, wt, ["sh", "-c", "echo started"])
    err = r.stderr.decode()
    assert r.returncode != 0 and "started" not in r.stdout.decode()
    assert "worktrees/wt/ORIG_HEAD (symlink)" in err, err
    (pgd / "ORIG_HEAD").unlink()
    blob = host_git(main, "hash-object", "-w", "--stdin", input="x\n").stdout.strip()
    good_index = (pgd / "index").read_bytes()
    (pgd / "index").write_bytes(crafted_index([(0o100644, blob, "../outside"), (0o100644, blob, "README")]))
    r = lz_run(lazaret, env, wt, ["sh", "-c", "echo started"])
    err = r.stderr.decode()
    assert r.returncode != 0 and "unsafe for the host's git" in err and "worktrees/wt/index" in err, err
    (pgd / "index").write_bytes(good_index)
    r = lz_run(lazaret, env, wt, ["sh", "-c", "echo started"])
    assert r.returncode == 0 and "started" in r.stdout.decode(), r.stderr.decode()


def test_worktree_git_as_is(lazaret, debian, tmp_path):
    """Git inside as an agent runs it: no safe.directory of its own (the
    router shows the Git directories as the sandbox user's), in a
    subdirectory of the worktree (the session starts there)."""
    main, (wt,) = make_worktrees(tmp_path, "wt")
    (wt / "pkg").mkdir()
    (wt / "pkg" / "mod.txt").write_text("m\n")
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "bash", "-c",
                        "pwd; git status --short && git add . && git -c user.name=A -c user.email=a@x.invalid "
                        "commit -qm from-pkg && git log -1 --format=%s"],
                       cwd=wt / "pkg", env=debian.environ(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr + r.stdout
    assert r.stdout.splitlines()[0] == "/workspace/pkg"
    assert r.stdout.splitlines()[-1] == "from-pkg"
    assert host_git(wt, "log", "-1", "--format=%s").stdout.strip() == "from-pkg"


def test_git_locks_exclude_across_two_domains(lazaret, debian, tmp_path):
    """Git's locks (`X.lock` made with O_CREAT|O_EXCL) exclude each other
    across two sandboxes whose routers serve the same common Git
    directory: two agents take the same lock in a loop and check, while
    holding it, that nobody else wrote the file it guards. Positive
    control: the same loop taking the "lock" without O_EXCL sees the other
    agent's writes."""
    main, (wa, wb) = make_worktrees(tmp_path, "la", "lb")

    def pair(take):
        loop = f"""
            G={COMMON}; me=$1; got=0; bad=0
            for i in $(seq 1 80); do
                if ({take} $me > $G/refs/heads/shared.lock) 2>/dev/null; then
                    got=$((got+1))
                    echo $me > $G/refs/guarded
                    for k in 1 2 3; do :; done
                    [ "$(cat $G/refs/guarded 2>/dev/null)" = "$me" ] || bad=$((bad+1))
                    rm -f $G/refs/heads/shared.lock
                fi
            done
            echo "got=$got bad=$bad"
        """
        procs = [subprocess.Popen([lazaret, "run", "-p", "test", "--", "bash", "-c", AGENT + loop, "x", me],
                                  cwd=w, env=debian.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for w, me in ((wa, "A"), (wb, "B"))]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (o, e) in zip(procs, outs):
            assert p.returncode == 0 and "got=" in o, e
        return [(int(o.split("got=")[1].split()[0]), int(o.split("bad=")[1].split()[0])) for o, _ in outs]

    control = pair("echo")
    assert sum(b for _, b in control) > 0, f"control: no overlap seen without O_EXCL {control}"
    real = pair("set -C; echo")
    assert sum(g for g, _ in real) > 0 and sum(b for _, b in real) == 0, real
    assert not (main / ".git" / "refs" / "heads" / "shared.lock").exists()


def test_worktree_of_a_bare_repository(lazaret, debian, tmp_path):
    """The bare-repository-plus-worktrees layout (`git clone --bare`, then
    one worktree per branch): the bare repository is the common Git
    directory; commits flow, its config stays read-only."""
    src = make_git_repo(tmp_path / "src")
    bare = tmp_path / "proj.git"
    assert host_git(tmp_path, "clone", "-q", "--bare", str(src), str(bare)).returncode == 0
    wt = tmp_path / "feature"
    assert host_git(bare, "worktree", "add", "-q", str(wt), "-b", "feature").returncode == 0
    cfg = (bare / "config").read_bytes()
    r = inside(lazaret, debian, wt, f"""
        set -e
        cd /workspace
        echo more >> README; git commit -qam from-bare-worktree
        {FSMON.format(cmd="true")} >> {COMMON}/config 2>/dev/null || echo CONFIG-REFUSED
    """)
    assert r.returncode == 0, r.stderr.decode()
    assert "CONFIG-REFUSED" in r.stdout.decode()
    assert (bare / "config").read_bytes() == cfg
    assert "from-bare-worktree" in host_git(bare, "log", "feature", "--format=%s").stdout
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=wt, env=debian.environ(),
                       capture_output=True, text=True, timeout=120)
    assert f"linked worktree feature of the repository {bare} (branch feature)" in r.stdout, r.stdout
