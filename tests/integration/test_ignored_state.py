"""Ignored Workspace State: git-ignored untracked paths come from the Domain.

Each test attacks from inside the sandbox (a hostile agent) and checks what
the host has afterwards, or what the sandbox could read, with a positive
control where the check could otherwise never fail: the same observation
made where the defence is absent (a host-side change, ignored_state =
false, a correct index blob) shows what a failure looks like.

The workspace is a Git repository whose committed .gitignore ignores
`.env`, `*.log`, `node_modules/` and `build/`; `build/keep` is tracked
anyway (force-added).
"""
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import domain_dir_for, git, lz_run

GITIGNORE = ".env\n*.log\nnode_modules/\nbuild/\n"


@pytest.fixture
def ws(workspace):
    (workspace / ".gitignore").write_text(GITIGNORE)
    (workspace / "build").mkdir()
    (workspace / "build" / "keep").write_text("kept\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.c").write_text("int main;\n")
    git(workspace, "add", ".gitignore", "src/main.c")
    git(workspace, "add", "-f", "build/keep")
    git(workspace, "commit", "-qm", "ignore rules")
    # The developer's ignored files: secrets and native build outputs.
    (workspace / ".env").write_text("HOST_SECRET=hunter2\n")
    (workspace / "host.log").write_text("host log\n")
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "host-native.node").write_text("host binary\n")
    (workspace / "build" / "out.o").write_text("host object\n")
    return workspace


def run(lazaret, env, ws, script, **kw):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script], **kw)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def test_host_ignored_files_are_invisible_inside(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; ls -a; echo ---; ls -a build node_modules 2>&1; echo ---; "
                       "cat .env host.log build/out.o node_modules/host-native.node 2>&1; echo rc=$?")
    assert rc == 0, err
    listing, rest, _ = out.split("---", 2)
    names = listing.split()
    # Tracked and ordinary files are shared; ignored ones are not.
    for shared in ("README", ".gitignore", "src", "build", ".git"):
        assert shared in names, out
    for hidden in (".env", "host.log"):
        assert hidden not in names, out
    assert "keep" in rest and "out.o" not in rest and "host-native.node" not in rest, out
    assert "hunter2" not in out and "host log" not in out and "host object" not in out and "host binary" not in out
    # node_modules is an ignored directory: inside it is the Domain's (empty).
    assert "No such file" in out


def test_sandbox_writes_to_ignored_paths_stay_private_and_persist(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; echo SANDBOX=1 > .env; mkdir -p node_modules/pkg target; "
                       "echo sbx > node_modules/pkg/index.js; echo log > run.log; echo obj > build/out.o; echo ok")
    assert rc == 0 and "ok" in out, err
    # The host's copies are untouched, nothing new appeared on the host.
    assert (ws / ".env").read_text() == "HOST_SECRET=hunter2\n"
    assert (ws / "build" / "out.o").read_text() == "host object\n"
    assert not (ws / "node_modules" / "pkg").exists()
    assert not (ws / "run.log").exists()
    # `target` is not ignored here: an ordinary shared directory.
    assert (ws / "target").is_dir()
    # The next Domain (linger 0: the first one stopped) sees its own files.
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat .env node_modules/pkg/index.js run.log build/out.o")
    assert rc == 0, err
    assert out.split() == ["SANDBOX=1", "sbx", "log", "obj"], out
    # They live in the Domain Root, not in the workspace.
    tree = domain_dir_for(env, ws) / "ignored" / "tree"
    assert (tree / ".env").read_text() == "SANDBOX=1\n"
    assert (tree / "node_modules" / "pkg" / "index.js").exists()


def test_tracked_file_matching_an_ignore_rule_stays_shared(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat build/keep; echo edited-inside >> build/keep; "
                       "echo new-inside > src/new.c; cat README")
    assert rc == 0, err
    assert "kept" in out and "hello" in out
    assert (ws / "build" / "keep").read_text() == "kept\nedited-inside\n"
    assert (ws / "src" / "new.c").read_text() == "new-inside\n"


def test_sandbox_edits_to_gitignore_never_expose_host_files(lazaret, env, ws):
    # The agent un-ignores .env and *.log, then deletes .gitignore entirely,
    # and waits for the next Domain start.
    rc, out, err = run(lazaret, env, ws, "cd /workspace; printf '!.env\\n!*.log\\n' >> .gitignore; cat .env; "
                       "echo next")
    assert rc == 0 and "hunter2" not in out, out
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat .env host.log 2>&1; rm .gitignore; echo removed")
    assert "hunter2" not in out and "host log" not in out, out
    assert not (ws / ".gitignore").exists()  # the edit itself is the sandbox's right: it reached the host
    rc, out, err = run(lazaret, env, ws, "cd /workspace; ls -a; cat .env host.log 2>&1")
    assert "hunter2" not in out and "host log" not in out, out
    # Positive control: the same exposure made by the host (the developer
    # un-ignores *.log on purpose) takes effect at the next start.
    (ws / ".gitignore").write_text(".env\nnode_modules/\nbuild/\n")
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat host.log; cat .env 2>&1")
    assert "host log" in out, out
    assert "hunter2" not in out, out


def test_gitignore_in_a_directory_moved_in_by_the_sandbox_is_not_taken(lazaret, env, ws):
    (ws / "conf").mkdir()
    (ws / "conf" / "local.env").write_text("HOST_CONF_SECRET\n")
    (ws / ".gitignore").write_text(GITIGNORE + "*.env\n")
    git(ws, "commit", "-qam", "more rules")
    # The agent prepares a directory with a negating .gitignore elsewhere
    # and moves it over (rename: the router sees no .gitignore write there).
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat conf/local.env 2>&1; mkdir stage; "
                       "printf '!local.env\\n' > stage/.gitignore; mv conf/* stage/ 2>&1; rmdir conf; "
                       "mv stage conf; ls -a conf")
    assert "HOST_CONF_SECRET" not in out, out
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat conf/local.env 2>&1; ls -a conf")
    assert "HOST_CONF_SECRET" not in out, out
    assert (ws / "conf" / "local.env").read_text() == "HOST_CONF_SECRET\n"


def test_renames_and_links_across_the_backings(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; mkdir node_modules; echo shared > a.txt; mv a.txt node_modules/a.txt && "
                       "echo mv1=$?; echo private > x.log; mv x.log shared.txt && echo mv2=$?; "
                       "ln src/main.c node_modules/hard 2>&1; echo ln=$?; ls node_modules")
    assert rc == 0, err
    assert "mv1=0" in out and "mv2=0" in out, out
    assert "ln=1" in out and "cross-device" in out.lower(), out
    assert not (ws / "a.txt").exists() and not (ws / "node_modules" / "a.txt").exists()
    assert (ws / "shared.txt").read_text() == "private\n"
    tree = domain_dir_for(env, ws) / "ignored" / "tree"
    assert (tree / "node_modules" / "a.txt").read_text() == "shared\n"
    assert not (tree / "x.log").exists()


def test_directory_with_ignored_entries_moves_and_empties_as_one(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; mkdir -p app/node_modules/dep; echo x > app/main.js; "
                       "echo d > app/node_modules/dep/i.js; mv app app2; ls app2 app2/node_modules/dep; "
                       "rmdir app2 2>&1; echo rmdir=$?; rm -rf app2; ls -a")
    assert rc == 0, err
    assert "i.js" in out and "main.js" in out, out
    assert "rmdir=1" in out, out
    assert not (ws / "app").exists() and not (ws / "app2").exists()
    tree = domain_dir_for(env, ws) / "ignored" / "tree"
    assert not (tree / "app").exists() and not (tree / "app2").exists()


def test_symlink_in_ignored_directory_never_leads_outside(lazaret, env, ws, tmp_path):
    sentinel = tmp_path / "host-sentinel"
    sentinel.write_text("HOST_HOME_SECRET\n")
    rel = os.path.relpath(sentinel, "/")
    depth = "../" * 24
    rc, out, err = run(lazaret, env, ws,
                       f"cd /workspace; mkdir -p node_modules; ln -s {sentinel} node_modules/abs; "
                       f"ln -s {depth}{rel} node_modules/rel; cat node_modules/abs node_modules/rel 2>&1; "
                       "ls -l node_modules")
    assert "HOST_HOME_SECRET" not in out, out
    # Positive control: the same links, followed by the host, do reach it
    # (the test would see a router that followed them).
    tree = domain_dir_for(env, ws) / "ignored" / "tree" / "node_modules"
    assert (tree / "abs").read_text() == "HOST_HOME_SECRET\n"


def test_ignored_state_false_shares_ignored_files(lazaret, env, ws):
    env.write_config(extra_profile="ignored_state = false\n")
    rc, out, err = run(lazaret, env, ws, "cat /workspace/.env /workspace/node_modules/host-native.node")
    assert rc == 0, err
    assert "hunter2" in out and "host binary" in out


def test_workspace_outside_git_routes_nothing(lazaret, env, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".gitignore").write_text(".env\n")
    (plain / ".env").write_text("NOT_A_REPO\n")
    rc, out, err = run(lazaret, env, plain, "cat /workspace/.env")
    assert rc == 0 and "NOT_A_REPO" in out, err


@pytest.mark.slow
def test_git_status_agrees_and_a_forged_index_entry_exposes_nothing(lazaret, debian, ws):
    host_status = git(ws, "status", "--porcelain").stdout
    rc, out, err = run(lazaret, debian, ws, "cd /workspace; git -c safe.directory='*' status --porcelain")
    assert rc == 0, err
    assert sorted(out.splitlines()) == sorted(host_status.splitlines()), (out, host_status)
    # The agent claims .env is tracked with content it made up, hoping the
    # next Domain shares the host's file.
    rc, out, err = run(lazaret, debian, ws, "cd /workspace; git -c safe.directory='*' update-index --add "
                       "--cacheinfo 100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,.env && echo forged")
    assert "forged" in out, err
    rc, out, err = run(lazaret, debian, ws, "cat /workspace/.env 2>&1")
    assert "hunter2" not in out, out
    # Positive control: an index entry whose blob is the file's content (the
    # developer force-adding it) does share it.
    git(ws, "update-index", "--add", "--cacheinfo", f"100644,{git(ws, 'hash-object', '.env').stdout.strip()},.env")
    rc, out, err = run(lazaret, debian, ws, "cat /workspace/.env 2>&1")
    assert "hunter2" in out, out


def test_state_inspect_shows_it_and_reset_ignored_only_clears_it(lazaret, env, ws):
    import json
    rc, out, err = run(lazaret, env, ws, "cd /workspace; mkdir -p node_modules/big; "
                       "head -c 300000 /dev/zero > node_modules/big/blob; echo SANDBOX=1 > .env")
    assert rc == 0, err
    e = env.environ()
    r = subprocess.run([lazaret, "state", "inspect", "--workspace", str(ws), "-p", "test", "--json"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["ignored"]["present"] and info["ignored"]["size"] >= 300000, info
    assert info["size"] >= info["ignored"]["size"]
    r = subprocess.run([lazaret, "state", "inspect", "--workspace", str(ws), "-p", "test"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert "Ignored Workspace State" in r.stdout and "KiB" in r.stdout, r.stdout
    # Without a terminal and without --yes nothing is deleted.
    r = subprocess.run([lazaret, "state", "reset", "--ignored-only", "--workspace", str(ws), "-p", "test"], env=e,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "--yes" in r.stderr
    tree = domain_dir_for(env, ws) / "ignored" / "tree"
    assert (tree / ".env").exists()
    r = subprocess.run([lazaret, "state", "reset", "--ignored-only", "--yes", "--workspace", str(ws), "-p", "test"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not (domain_dir_for(env, ws) / "ignored").exists()
    rc, out, err = run(lazaret, env, ws, "cd /workspace; ls -a node_modules 2>&1; cat .env 2>&1")
    assert "SANDBOX=1" not in out and "blob" not in out, out
    assert "hunter2" not in out, out  # still hidden: the rules are the host's


def test_directory_symlink_swap_race_never_reaches_outside(lazaret, env, ws, tmp_path):
    # The agent swaps an ignored directory and a symlink to the host's
    # files while another process keeps reading through the name; bounded.
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "f").write_text("OUTSIDE_SECRET\n")
    up = "../" * 24 + os.path.relpath(secret, "/")
    # The reader uses shell builtins (no process per read), so it reads
    # many times in each state of every swap, until the swapper is done.
    script = ("cd /workspace; mkdir -p node_modules/d; echo inner > node_modules/d/f; rm -f /tmp/swapped; "
              "( i=0; while [ $i -lt 100 ]; do mv node_modules/d node_modules/d.real; "
              f"ln -s {up} node_modules/d; rm node_modules/d; mv node_modules/d.real node_modules/d; "
              "i=$((i+1)); done; : > /tmp/swapped ) & "
              "j=0; while [ $j -lt 2000000 ] && [ ! -e /tmp/swapped ]; do "
              "{ read -r a < node_modules/d/f && echo \"$a\"; } 2>/dev/null; j=$((j+1)); done; "
              "wait; echo reads=$j; echo finished")
    rc, out, err = run(lazaret, env, ws, script, timeout=600)
    assert "finished" in out, (out[-2000:], err[-2000:])
    assert "OUTSIDE_SECRET" not in out
    assert "inner" in out  # the reads did happen
    assert int(re.search(r"reads=(\d+)", out).group(1)) > 200  # many reads per swap
    # Positive control: followed by the host, such a link does reach it.
    tree = domain_dir_for(env, ws) / "ignored" / "tree" / "node_modules"
    os.symlink(str(secret), tree / "probe")
    assert (tree / "probe" / "f").read_text() == "OUTSIDE_SECRET\n"


def test_host_creating_an_ignored_name_while_the_sandbox_looks_it_up(lazaret, env, ws):
    """A name neither backing has is answered ENOENT without the ignore
    rules; the host creating it (ignored) between the router's looks, or
    after the kernel cached the absent name, must never show the host's
    file. The host creates and removes `fresh.log` (ignored) and
    `fresh.txt` (shared: the positive control that the sandbox's reads do
    see the host's creations while this runs); bounded."""
    log, txt = ws / "fresh.log", ws / "fresh.txt"
    done = threading.Event()

    def toggle():
        for _ in range(2_000_000):
            if done.is_set():
                break
            log.write_text("HOST_LOG_SECRET\n")
            txt.write_text("HOST_TXT\n")
            log.unlink()
            txt.unlink()

    t = threading.Thread(target=toggle)
    t.start()
    try:
        # Shell builtins only (no process per look: each open is a lookup
        # of the router's, thousands of them while the host toggles).
        script = ("cd /workspace; j=0; while [ $j -lt 5000 ]; do "
                  "{ read -r a < fresh.log && echo \"$a\"; } 2>/dev/null; "
                  "{ read -r b < fresh.txt && echo \"$b\"; } 2>/dev/null; "
                  "[ -e fresh.log ] && { read -r a < fresh.log && echo \"$a\"; } 2>/dev/null; "
                  "j=$((j+1)); done; echo finished")
        rc, out, err = run(lazaret, env, ws, script, timeout=600)
    finally:
        done.set()
        t.join(timeout=60)
    assert not t.is_alive()
    assert "finished" in out, (out[-2000:], err[-2000:])
    assert "HOST_LOG_SECRET" not in out
    assert "HOST_TXT" in out  # the host's creations were seen while it ran


def test_directory_of_100k_entries_lists_both_backings(lazaret, env, ws):
    big = ws / "big"
    big.mkdir()
    for i in range(100_000):
        (big / f"f{i:06d}").touch()
    (big / "host-only.log").write_text("hidden\n")
    script = ("cd /workspace/big; echo a > sbx.log; echo b > sbx2.log; ls -a | wc -l; ls | grep -c '^f'; "
              "ls | grep log; cat f099999 && echo last-ok")
    rc, out, err = run(lazaret, env, ws, script, timeout=900)
    assert rc == 0, err[-2000:]
    lines = out.split()
    # . .. 100000 host files, 2 of the sandbox's; the host's ignored file hidden.
    assert lines[0] == "100004" and lines[1] == "100000", out[:500]
    assert "sbx.log" in lines and "sbx2.log" in lines and "host-only.log" not in lines, out[:500]
    assert "last-ok" in out
    assert not (big / "sbx.log").exists()


def test_listing_a_directory_again_shows_what_changed(lazaret, env, ws):
    # gVisor keeps a directory's handle and rewinds it: a listing taken
    # when the directory was opened would go stale (mkdir, then a glob).
    script = ("cd /workspace; for i in 1 2 3; do mkdir gen$i; echo gen*; done; "
              "mkdir -p node_modules; for i in 1 2; do : > node_modules/m$i; echo node_modules/m*; done; "
              "rm -r gen1; echo gen*")
    rc, out, err = run(lazaret, env, ws, script)
    assert rc == 0, err
    assert out.split("\n")[:6] == ["gen1", "gen1 gen2", "gen1 gen2 gen3", "node_modules/m1",
                                   "node_modules/m1 node_modules/m2", "gen2 gen3"], out
