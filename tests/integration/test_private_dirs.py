"""private_dirs: git-ignored directories bound from the Domain's store.

A profile's `private_dirs` are given to gVisor as direct binds of their
copies in the Ignored Workspace State (docs/ignored-state.md, "Private
directories"), without the router. Each test attacks the new boundary from
inside the sandbox, or changes the host's rules, and checks what the host
has afterwards, with a positive control where the check could otherwise
never fail.

The workspace is a Git repository whose committed .gitignore ignores
`.env`, `node_modules/`, `target/` and `build/`; `build/keep` is tracked
anyway (force-added), and the host has its own `node_modules/`.
"""
import os
import shutil
import stat
import subprocess

import pytest
from pathlib import Path

from conftest import domain_dir_for, git, lz_run

GITIGNORE = ".env\nnode_modules/\ntarget/\nbuild/\n"
PRIVATE = 'private_dirs = ["node_modules", "target"]\n'


@pytest.fixture
def ws(workspace):
    (workspace / ".gitignore").write_text(GITIGNORE)
    (workspace / "build").mkdir()
    (workspace / "build" / "keep").write_text("kept\n")
    git(workspace, "add", ".gitignore")
    git(workspace, "add", "-f", "build/keep")
    git(workspace, "commit", "-qm", "ignore rules")
    (workspace / ".env").write_text("HOST_SECRET=hunter2\n")
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "host-native.node").write_text("host binary\n")
    return workspace


@pytest.fixture
def debian_private(debian):
    """The shared Debian environment (one per worker) with PRIVATE, put
    back as it was afterwards: the next tests of the worker share it."""
    debian.write_config(extra_profile=PRIVATE)
    yield debian
    debian.write_config()


def run(lazaret, env, ws, script, **kw):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script], **kw)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def tree_of(env, ws):
    return domain_dir_for(env, ws) / "ignored" / "tree"


def test_private_dir_is_the_store_bound_directly_and_persists(lazaret, env, ws):
    # Before private_dirs: the router serves node_modules from the store.
    rc, out, err = run(lazaret, env, ws, "mkdir -p /workspace/node_modules/old && echo routed > "
                       "/workspace/node_modules/old/i.js")
    assert rc == 0, err
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "cd /workspace; ls -a; echo ---; cat node_modules/old/i.js; "
                       "mkdir -p node_modules/pkg target/debug; echo sbx > node_modules/pkg/index.js; "
                       "echo bin > target/debug/app; stat -c '%d %n' . node_modules target build; "
                       "grep -c ' /workspace/node_modules ' /proc/mounts")
    assert rc == 0, err
    listing, rest = out.split("---", 1)
    # The router still lists them (their store directories exist).
    assert "node_modules" in listing.split() and "target" in listing.split(), out
    # What the router kept there before is what the bind shows.
    assert "routed" in rest, out
    devs = {line.split()[1]: line.split()[0] for line in rest.splitlines() if line.count(" ") == 1}
    # Each private directory is a mount of its own: another device...
    assert devs["node_modules"] != devs["."] and devs["target"] != devs["."], out
    # ...while an ignored directory that is not private is the router's
    # (the positive control of the device check).
    assert devs["build"] == devs["."], out
    # The host's own node_modules is untouched; nothing reached the host.
    assert sorted(os.listdir(ws / "node_modules")) == ["host-native.node"]
    assert not (ws / "target").exists()
    tree = tree_of(env, ws)
    assert (tree / "node_modules" / "pkg" / "index.js").read_text() == "sbx\n"
    assert (tree / "target" / "debug" / "app").read_text() == "bin\n"
    # The next Domain sees the same files, the host's still hidden.
    rc, out, err = run(lazaret, env, ws, "cat /workspace/node_modules/pkg/index.js /workspace/target/debug/app; "
                       "cat /workspace/node_modules/host-native.node 2>&1")
    assert rc != 0 and "sbx" in out and "bin" in out and "host binary" not in out, out
    # And without private_dirs the router serves the same store again.
    env.write_config()
    rc, out, err = run(lazaret, env, ws, "cat /workspace/node_modules/pkg/index.js")
    assert rc == 0 and "sbx" in out, out


def test_a_directory_that_is_not_ignored_is_refused(lazaret, env, ws):
    env.write_config(extra_profile='private_dirs = ["vendor"]\n')
    (ws / "vendor").mkdir()
    (ws / "vendor" / "lib.c").write_text("host vendor\n")
    rc, out, err = run(lazaret, env, ws, "echo started")
    assert rc != 0 and "started" not in out
    assert "vendor is not git-ignored" in err and ".gitignore" in err, err
    # Positive control: the developer ignores it on the host; it starts,
    # and the host's vendor/ is hidden behind the Domain's.
    with open(ws / ".gitignore", "a") as f:
        f.write("/vendor/\n")
    rc, out, err = run(lazaret, env, ws, "ls -a /workspace/vendor; echo started")
    assert rc == 0 and "started" in out and "lib.c" not in out, (out, err)


def test_a_directory_with_tracked_files_is_refused(lazaret, env, ws):
    env.write_config(extra_profile='private_dirs = ["build"]\n')
    rc, out, err = run(lazaret, env, ws, "echo started")
    assert rc != 0 and "started" not in out
    assert "tracked" in err and "build/keep" in err, err
    # Positive control: untracked on the host, it is accepted.
    git(ws, "rm", "-q", "--cached", "build/keep")
    git(ws, "commit", "-qm", "untrack")
    rc, out, err = run(lazaret, env, ws, "ls -a /workspace/build; echo started")
    assert rc == 0 and "started" in out and "keep" not in out, (out, err)


def test_a_rule_change_takes_effect_at_the_next_start(lazaret, env, ws):
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "echo x > /workspace/node_modules/f; echo ok")
    assert rc == 0 and "ok" in out, err
    # The agent stops ignoring node_modules (the edit reaches the host's
    # .gitignore, a tracked file): the next start is refused, nothing of
    # the store reaches the host, and the message says what to do.
    rc, out, err = run(lazaret, env, ws, "cd /workspace; printf '.env\\ntarget/\\nbuild/\\n' > .gitignore; echo ok")
    assert rc == 0 and "ok" in out, err
    rc, out, err = run(lazaret, env, ws, "echo started")
    assert rc != 0 and "node_modules is not git-ignored" in err and ".gitignore" in err, err
    assert sorted(os.listdir(ws / "node_modules")) == ["host-native.node"]
    # Positive control: the developer restores the rule; the Domain's
    # files are all there.
    (ws / ".gitignore").write_text(GITIGNORE)
    rc, out, err = run(lazaret, env, ws, "cat /workspace/node_modules/f")
    assert rc == 0 and out == "x\n", (out, err)


def test_renames_and_links_across_the_boundary_give_exdev(lazaret, debian_private, ws):
    debian = debian_private
    script = r"""cd /workspace; echo in > node_modules/a; echo out > b; mkdir node_modules/d
rn() { perl -e 'rename($ARGV[0], $ARGV[1]) or die "$!\n"; print "ok\n"' "$1" "$2" 2>&1; }
echo "out1 $(rn node_modules/a a)"
echo "in1 $(rn b node_modules/b)"
echo "dir $(rn node_modules/d d)"
echo "self $(rn node_modules nm2)"
echo "link $(ln b node_modules/hb 2>&1 && echo ok)"
echo "inside $(rn node_modules/a node_modules/a2)"
echo "shared $(rn b b2)"
rmdir node_modules 2>&1; echo rmdir=$?
mv b2 node_modules/ && echo mv=$?
"""
    rc, out, err = run(lazaret, debian, ws, script)
    assert rc == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    for k in ("out1", "in1", "dir", "link"):
        assert "cross-device" in lines[k], out
    # The mount point itself cannot be moved away (nor removed).
    assert "busy" in lines["self"].lower(), out
    assert "rmdir=1" in out and "busy" in out.lower().split("rmdir=1")[0].splitlines()[-1], out
    # Positive controls: rename(2) works within each side.
    assert lines["inside"] == "ok" and lines["shared"] == "ok", out
    # mv copies across (EXDEV), as between two file systems.
    assert "mv=0" in out, out
    tree = tree_of(debian, ws)
    assert sorted(os.listdir(tree / "node_modules")) == ["a2", "b2", "d"]
    assert not (ws / "a").exists() and not (ws / "b2").exists() and not (ws / "nm2").exists()
    assert sorted(os.listdir(ws / "node_modules")) == ["host-native.node"]


def test_symlinks_planted_there_resolve_inside(lazaret, env, ws, tmp_path):
    sentinel = tmp_path / "host-sentinel"
    sentinel.write_text("HOST_HOME_SECRET\n")
    env.write_config(extra_profile=PRIVATE)
    up = "../" * 24 + os.path.relpath(sentinel, "/")
    rc, out, err = run(lazaret, env, ws, f"cd /workspace/node_modules; ln -s {sentinel} abs; ln -s {up} rel; "
                       "ln -s /workspace/.env env; cat abs rel env 2>&1; echo done")
    assert "done" in out, err
    assert "HOST_HOME_SECRET" not in out and "hunter2" not in out, out
    # Positive control: followed by the host, the link does reach it.
    assert (tree_of(env, ws) / "node_modules" / "abs").read_text() == "HOST_HOME_SECRET\n"


def test_the_directory_swapped_for_a_symlink_is_refused(lazaret, env, ws, tmp_path):
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "f").write_text("OUTSIDE_SECRET\n")
    # (The host's own node_modules would keep the sandbox's rmdir from
    # succeeding: ENOTEMPTY for hidden host files.)
    shutil.rmtree(ws / "node_modules")
    swap = f"cd /workspace; rm -rf node_modules; ln -s {secret} node_modules; echo swapped"
    # 1. A `node_modules/` rule matches directories only: the agent's
    # symlink of that name is an ordinary file, the host's.
    rc, out, err = run(lazaret, env, ws, swap)
    assert rc == 0 and "swapped" in out, err
    assert (ws / "node_modules").is_symlink()
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "cat /workspace/node_modules/f 2>&1; echo started")
    assert rc != 0 and "OUTSIDE_SECRET" not in out and "started" not in out, out
    assert "node_modules is a symlink in the workspace" in err, err
    (ws / "node_modules").unlink()
    # 2. With a rule for any type (`node_modules`), the agent's symlink is
    # the store's, made in a run without private_dirs.
    (ws / ".gitignore").write_text(GITIGNORE.replace("node_modules/", "node_modules"))
    env.write_config()
    rc, out, err = run(lazaret, env, ws, swap)
    assert rc == 0 and "swapped" in out, err
    link = tree_of(env, ws) / "node_modules"
    # Positive control: the store holds the link, and it leads outside.
    assert link.is_symlink() and (link / "f").read_text() == "OUTSIDE_SECRET\n"
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "cat /workspace/node_modules/f 2>&1; echo started")
    assert rc != 0 and "OUTSIDE_SECRET" not in out and "started" not in out, out
    assert "node_modules" in err and "reset --ignored-only" in err, err
    # The same for a file in the way.
    link.unlink()
    (tree_of(env, ws) / "target").write_text("a file\n")
    rc, out, err = run(lazaret, env, ws, "echo started")
    assert rc != 0 and "target" in err and "reset --ignored-only" in err, err


def test_no_device_nodes_and_set_id_files_stay_in_the_domain(lazaret, env, ws):
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "cd /workspace/node_modules; mknod null c 1 3 2>&1; echo nm=$?; "
                       "mknod /tmp/null c 1 3 2>&1; echo tmp=$?; cp /bin/busybox suid; chmod 4755 suid; "
                       "echo chmod=$?")
    assert rc == 0, err
    res = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    # No device node through the bind (runsc's gofer makes none)...
    assert res["nm"] != "0", out
    assert not (tree_of(env, ws) / "node_modules" / "null").exists()
    # ...positive control: the sandbox may make one in its own tmpfs.
    assert res["tmp"] == "0", out
    # A set-id bit may reach the store's copy (this runsc ignores the
    # spec's nosuid, and honours no set-id bit inside anyway), but the
    # file is the host user's own, in the Domain Root no other user can
    # enter.
    f = tree_of(env, ws) / "node_modules" / "suid"
    assert f.stat().st_uid == os.getuid()
    assert stat.S_IMODE((Path(env.storage) / "domains").stat().st_mode) & 0o077 == 0


def test_reset_ignored_only_clears_private_dirs(lazaret, env, ws):
    env.write_config(extra_profile=PRIVATE)
    rc, out, err = run(lazaret, env, ws, "echo sbx > /workspace/node_modules/f; echo ok")
    assert rc == 0 and "ok" in out, err
    r = subprocess.run([lazaret, "state", "reset", "--ignored-only", "--yes", "--workspace", str(ws), "-p", "test"],
                       env=env.environ(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rc, out, err = run(lazaret, env, ws, "ls -a /workspace/node_modules; echo started")
    assert rc == 0 and "started" in out and " f" not in out and "\nf\n" not in out, (out, err)


def test_nested_git_directories_there_are_the_domains(lazaret, debian_private, ws):
    debian = debian_private
    rc, out, err = run(lazaret, debian, ws, "cd /workspace; git init -q node_modules/pkg && echo init=$?; "
                       "git init -q sub 2>&1; echo shared=$?")
    assert "init=0" in out, (out, err)
    # Positive control: a nested repository on a shared path is refused
    # (docs/security-git.md).
    assert "shared=0" not in out, out
    assert (tree_of(debian, ws) / "node_modules" / "pkg" / ".git").is_dir()
    assert not (ws / "node_modules" / "pkg").exists() and not (ws / "sub" / ".git").exists()
