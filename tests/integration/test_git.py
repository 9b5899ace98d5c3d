"""Git through the workspace, on the real default (Debian) image.

Normal work flows both ways; and nothing the agent does inside can make
the host's own git run a program or read a config the agent wrote. Each
attack is made from inside the sandbox as root, the way a hostile agent
would, then the host's real git runs status/diff/commit (in the root and
in subdirectories) and a sentinel file shows whether anything ran.
"""
import subprocess
import textwrap

import pytest

from conftest import Env, git_env, lz_run, make_git_repo

pytestmark = pytest.mark.slow


def host_git(ws, *args, **kw):
    return subprocess.run(["git", "-C", str(ws), *args], env=git_env(), capture_output=True, text=True,
                          timeout=60, **kw)


def inside(lazaret, env, ws, script, **kw):
    return lz_run(lazaret, env, ws, ["bash", "-c", textwrap.dedent(script)], **kw)


def test_git_round_trip(lazaret, debian, workspace):
    r = inside(lazaret, debian, workspace, """
        set -e
        git config --global --add safe.directory /workspace 2>/dev/null || true
        export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=a@x.invalid
        cd /workspace
        git status --short
        echo change >> README
        git add README
        git commit -qm 'from the sandbox'
        git checkout -qb feature
        echo more > new.txt
        git add new.txt
        git stash -q
        git stash pop -q
        git commit -qm 'on feature'
        git log --oneline | head -3
    """)
    assert r.returncode == 0, r.stderr.decode()
    # The host sees the commits at once.
    log = host_git(workspace, "log", "--all", "--format=%s").stdout
    assert "from the sandbox" in log and "on feature" in log
    assert host_git(workspace, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "feature"
    # And a branch made on the host is seen inside.
    host_git(workspace, "branch", "from-host")
    r = inside(lazaret, debian, workspace, "git -C /workspace branch --list from-host")
    assert "from-host" in r.stdout.decode()
    # A host-side config change (atomic replace) is visible inside.
    host_git(workspace, "config", "lazaret.test", "seen")
    r = inside(lazaret, debian, workspace, "git -C /workspace config lazaret.test")
    assert r.stdout.decode().strip() == "seen"


ATTACKS = {
    "config-append": "printf '[core]\\n\\tfsmonitor = {cmd}\\n' >> .git/config",
    "config-replace": "cp .git/config /tmp/c && printf '[core]\\n\\tfsmonitor = {cmd}\\n' >> /tmp/c && mv -f /tmp/c .git/config",
    "config-unlink": "rm -f .git/config && printf '[core]\\n\\tfsmonitor = {cmd}\\n' > .git/config",
    "hooks": ("for h in pre-commit post-commit commit-msg post-checkout pre-auto-gc post-index-change reference-transaction fsmonitor-watchman; "
              "do printf '#!/bin/sh\\n{cmd}\\n' > .git/hooks/$h && chmod +x .git/hooks/$h; done"),
    "hooks-dir-swap": "mv .git/hooks .git/hooks.old; mkdir -p /tmp/h && printf '#!/bin/sh\\n{cmd}\\n' > /tmp/h/pre-commit && chmod +x /tmp/h/pre-commit && cp -r /tmp/h .git/hooks",
    "dotgit-rename": ("mv .git .git-moved && mkdir .git && cp -r .git-moved/objects .git-moved/refs .git-moved/HEAD .git/ "
                      "&& printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {cmd}\\n' > .git/config"),
    "commondir": ("mkdir -p evil && cp -r .git/objects .git/refs evil/ 2>/dev/null; "
                  "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {cmd}\\n' > evil/config; "
                  "echo ../evil > .git/commondir"),
    "config-worktree": "printf '[core]\\n\\tfsmonitor = {cmd}\\n' > .git/config.worktree",
    "nested-repo": ("mkdir -p sub && git init -q sub 2>/dev/null; mkdir -p sub/.git; "
                    "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {cmd}\\n' > sub/.git/config; "
                    "mkdir -p sub/.git/objects sub/.git/refs; echo 'ref: refs/heads/main' > sub/.git/HEAD"),
    "gitfile-in-subdir": ("mkdir -p evilrepo/objects evilrepo/refs sub2 && echo 'ref: refs/heads/main' > evilrepo/HEAD && "
                          "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {cmd}\\n' > evilrepo/config && "
                          "echo 'gitdir: ../evilrepo' > sub2/.git"),
    "modules-config": ("mkdir -p .git/modules/m/objects .git/modules/m/refs && echo 'ref: refs/heads/main' > .git/modules/m/HEAD; "
                       "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {cmd}\\n' > .git/modules/m/config; "
                       "printf '[submodule \"m\"]\\n\\tpath = m\\n\\turl = ./m\\n' > .gitmodules; mkdir -p m; "
                       "echo 'gitdir: ../.git/modules/m' > m/.git; "
                       "git -c safe.directory='*' update-index --add --cacheinfo 160000,$(git -c safe.directory='*' rev-parse HEAD),m"),
    "alternates": "mkdir -p /workspace/altobj && echo /workspace/altobj > .git/objects/info/alternates",
    "worktrees": ("mkdir -p .git/worktrees/w && echo ../.. > .git/worktrees/w/commondir && "
                  "printf '[core]\\n\\tfsmonitor = {cmd}\\n' > .git/worktrees/w/config.worktree"),
}


# What each attack must not leave on the host (besides the sentinel).
PLANTED = {
    "config-append": [], "config-replace": [], "config-unlink": [],
    "hooks": [".git/hooks/pre-commit", ".git/hooks/post-commit"],
    "hooks-dir-swap": [".git/hooks.old", ".git/hooks/pre-commit"],
    "dotgit-rename": [".git-moved"],
    "commondir": [".git/commondir"],
    "config-worktree": [".git/config.worktree"],
    "nested-repo": ["sub/.git"],
    "gitfile-in-subdir": ["sub2/.git"],
    "modules-config": [".git/modules/m/config", "m/.git"],
    "alternates": [".git/objects/info/alternates"],
    "worktrees": [".git/worktrees/w/commondir", ".git/worktrees/w/config.worktree"],
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_git_attack_defeated(lazaret, debian, tmp_path, name):
    ws = make_git_repo(tmp_path / "victim")
    (ws / "subdir").mkdir()
    sentinel = tmp_path / "SENTINEL"
    cmd = f"touch {sentinel}"
    script = "cd /workspace; " + ATTACKS[name].format(cmd=cmd) + "; true"
    config_before = (ws / ".git" / "config").read_bytes()
    r = inside(lazaret, debian, ws, script)
    assert r.returncode == 0, r.stderr.decode()
    planted = [p for p in PLANTED[name] if (ws / p).exists() or (ws / p).is_symlink()]
    assert planted == [], f"attack {name!r} planted {planted} on the host"
    assert (ws / ".git" / "config").read_bytes() == config_before
    # Now the developer uses the host's own git everywhere in the tree.
    (ws / "README").write_text("developer edit\n")
    for d in [ws, ws / "subdir", ws / "sub", ws / "sub2", ws / "m", ws / "evil"]:
        if d.is_dir():
            host_git(d, "status")
            host_git(d, "diff")
            host_git(d, "log", "-1")
    host_git(ws, "commit", "-qam", "developer commit")
    host_git(ws, "checkout", "-qb", "dev-branch")
    host_git(ws, "gc", "--auto")
    assert not sentinel.exists(), f"attack {name!r} made the host's git run an agent-written command"
    # The repository is still healthy for the developer.
    assert host_git(ws, "fsck", "--no-progress").returncode == 0
    assert "developer commit" in host_git(ws, "log", "-1", "--format=%s").stdout


def test_default_image_shell(lazaret, debian, workspace):
    r = lz_run(lazaret, debian, workspace, ["sh", "-c", "cat /etc/debian_version; id -u; command -v git bash"])
    assert r.returncode == 0
    out = r.stdout.decode()
    assert out.splitlines()[0].startswith("12")
    assert "\n0\n" in out


def test_hooks_path_inside_workspace_protected(lazaret, debian, tmp_path):
    """husky-style: the host's core.hooksPath names a workspace directory."""
    ws = make_git_repo(tmp_path / "husky")
    (ws / ".husky").mkdir()
    (ws / ".husky" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (ws / ".husky" / "pre-commit").chmod(0o755)
    host_git(ws, "config", "core.hooksPath", ".husky")
    sentinel = tmp_path / "SENTINEL"
    r = inside(lazaret, debian, ws, f"""
        cd /workspace
        printf '#!/bin/sh\\ntouch {sentinel}\\n' > .husky/pre-commit
        printf '#!/bin/sh\\ntouch {sentinel}\\n' > .husky/post-commit; chmod +x .husky/post-commit
        mv .husky .husky-old; mkdir -p .husky; printf '#!/bin/sh\\ntouch {sentinel}\\n' > .husky/pre-commit
        true
    """)
    assert r.returncode == 0
    (ws / "README").write_text("edit\n")
    host_git(ws, "commit", "-qam", "with hooks")
    assert not sentinel.exists()
    assert (ws / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (ws / ".husky" / "post-commit").exists()
    # Other files of the workspace stay writable.
    r = inside(lazaret, debian, ws, "echo ok > /workspace/other.txt")
    assert (ws / "other.txt").read_text() == "ok\n"


def test_fullscreen_editor_and_colours(lazaret, debian, workspace):
    """A full-screen program on the real terminal: vim edits and saves a file;
    terminfo for the host's TERM is there (256 colours)."""
    import pexpect
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace),
                      env=debian.environ(TERM="xterm-256color"), encoding="utf-8", timeout=60,
                      dimensions=(30, 100))
    c.expect(r"[#$] ")
    c.sendline("tput colors; tput cols")
    c.expect("256")
    c.expect("100")
    c.sendline("vim.tiny -N -u NONE /workspace/note.txt")
    c.expect(r"note\.txt")  # the status line of the full-screen editor
    c.send("ihello from vim")
    c.send("\x1b")
    c.send(":wq\r")
    c.expect(r"[#$] ")
    c.sendline("exit")
    c.expect(pexpect.EOF)
    assert (workspace / "note.txt").read_text() == "hello from vim\n"
