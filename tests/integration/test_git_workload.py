"""Everyday Git work inside the sandbox, through the router, on the real
Debian image: it must keep working while the host's git is protected.

One interactive session runs the steps one by one; after each step the
host's own git (as the developer, while the Domain is still running) must
see the same HEAD and the same `git status`.
"""
import re
import subprocess

import pexpect
import pytest

from conftest import Env, git_env, make_git_repo

pytestmark = pytest.mark.slow

SETUP = ("stty -echo; PS1=''; PS2=''; bind 'set enable-bracketed-paste off'; "
         "export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@x.invalid GIT_COMMITTER_NAME=Agent "
         "GIT_COMMITTER_EMAIL=agent@x.invalid GIT_EDITOR=true GIT_PAGER=cat "
         "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'; "
         "cd /workspace; echo @@REA''DY")


def host_git(ws, *args):
    return subprocess.run(["git", "-C", str(ws), *args], env=git_env(), capture_output=True, text=True,
                          timeout=60)


class Shell:
    """bash in the sandbox on a PTY, one command at a time, no echo."""

    def __init__(self, lazaret, env, ws):
        self.c = pexpect.spawn(lazaret, ["run", "-p", "test", "--", "bash", "--norc", "--noprofile", "-i"],
                               cwd=str(ws), env=env.environ(), encoding="utf-8", timeout=120,
                               dimensions=(50, 250))
        try:
            # Typed before the shell's first prompt, a line may be discarded.
            self.c.expect(r"[#$] ")
            self.c.sendline(SETUP)
            self.c.expect("@@READY")
        except Exception:
            self.c.close(force=True)
            raise
        self.n = 0

    def run(self, cmd):
        """Runs one line; returns (exit status, output)."""
        self.n += 1
        self.c.sendline(f"echo @@BEGIN-{self.n}; {{ {cmd}\n}} 2>&1; echo \"@@END-{self.n} $?\"")
        self.c.expect(rf"@@BEGIN-{self.n}\r?\n")
        self.c.expect(rf"@@END-{self.n} (\d+)\r?\n")
        out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.c.before).replace("\r", "")
        return int(self.c.match.group(1)), out

    def close(self):
        self.c.sendline("exit 0")
        try:
            self.c.expect(pexpect.EOF, timeout=30)
        finally:
            self.c.close(force=True)


def state_inside(sh):
    rc, out = sh.run("git rev-parse HEAD; echo @@; git status --porcelain")
    assert rc == 0, out
    head, _, status = out.partition("@@\n")
    return head.strip(), sorted(status.splitlines())


def state_host(ws):
    head = host_git(ws, "rev-parse", "HEAD").stdout.strip()
    r = host_git(ws, "status", "--porcelain")
    assert r.returncode == 0, r.stderr
    return head, sorted(r.stdout.splitlines())


STEPS = [
    ("status", "git status --short"),
    ("clone a local bare repository into /tmp",
     "git clone -q /upstream/up.git /tmp/clone && git -C /tmp/clone log -1 --format=%s | grep -qx upstream"),
    ("branch and commit",
     "git checkout -qb feature && echo f1 > f1.txt && git add f1.txt && git commit -qm 'feature 1'"),
    ("stash and pop",
     "echo change >> README && git stash -q && git stash list | grep -q 'stash@{0}' && git stash pop -q "
     "&& git commit -qam 'feature 2'"),
    ("commit on main",
     "git checkout -q main && echo m > main.txt && git add main.txt && git commit -qm 'main 1'"),
    ("rebase", "git checkout -q feature && git rebase -q main"),
    ("interactive rebase (squash)",
     "GIT_SEQUENCE_EDITOR=\"sed -i '2s/^pick/squash/'\" git rebase -q -i main "
     "&& test \"$(git rev-list --count main..feature)\" = 1"),
    ("interactive rebase (no-op)", "GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1"),
    ("merge with a conflict",
     "git checkout -q main && git checkout -qb side && echo A > c.txt && git add c.txt && git commit -qm 'side c' "
     "&& git checkout -q main && echo B > c.txt && git add c.txt && git commit -qm 'main c' "
     "&& { git merge -q side >/dev/null; test $? -ne 0; } && grep -q '<<<<<<<' c.txt"),
    ("resolve the conflict",
     "echo resolved > c.txt && git add c.txt && git commit -q --no-edit"),
    ("merge the feature", "git merge -q --no-edit feature"),
    ("gc and repack", "git gc -q && git repack -adq && git count-objects -v | grep -qx 'packs: 1'"),
    ("add -N", "echo n > intent.txt && git add -N intent.txt && git status --porcelain | grep -q '^ A intent.txt'"),
    ("index version 4", "git update-index --index-version 4 && git status --short"),
    ("commit --amend", "git add intent.txt && git commit -q --amend --no-edit"),
    ("reset --hard", "echo junk >> README && git reset -q --hard && ! grep -q junk README"),
    ("checkout -- .", "echo junk >> README && git checkout -- . && ! grep -q junk README"),
    ("submodule set up by the host",
     "git submodule status | grep -q ' sub ' && grep -qx hello sub/README "
     "&& git -C sub log -1 --format=%s | grep -qx initial"),
    ("worktree list", "git worktree list | grep -q '^/workspace '"),
    ("fsck", "git fsck --no-progress"),
]


def test_git_workload_inside(lazaret, debian, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    # A submodule made by the developer (gitlink, .gitmodules, .git/modules/sub).
    sub_src = make_git_repo(tmp_path / "subsrc")
    r = host_git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_src), "sub")
    assert r.returncode == 0, r.stderr
    assert host_git(ws, "commit", "-qm", "add submodule").returncode == 0
    # An upstream to clone from, on a read-only volume.
    vol = (tmp_path / "vol").resolve()
    up = make_git_repo(tmp_path / "upsrc")
    host_git(up, "commit", "-q", "--allow-empty", "-m", "upstream")
    assert subprocess.run(["git", "clone", "-q", "--bare", str(up), str(vol / "up.git")], env=git_env(),
                          timeout=60).returncode == 0
    env = Env(tmp_path / "env", debian.storage, debian.image)
    env.write_config(extra_profile=f'volumes = [{{ host = "{vol}", container = "/upstream", mode = "ro" }}]')

    sh = Shell(lazaret, env, ws)
    try:
        for name, cmd in STEPS:
            rc, out = sh.run(cmd)
            assert rc == 0, f"step {name!r} failed inside the sandbox:\n{out}"
            inside = state_inside(sh)
            host = state_host(ws)
            assert inside == host, f"after {name!r} the host's git disagrees:\ninside {inside}\nhost   {host}"
    finally:
        sh.close()
    log = host_git(ws, "log", "--all", "--format=%s").stdout
    for subject in ["feature 1", "main 1", "side c", "main c", "add submodule"]:
        assert subject in log
    assert host_git(ws, "fsck", "--no-progress").returncode == 0
    assert host_git(ws, "submodule", "status").stdout.startswith(" ")
    assert re.search(r"^resolved$", (ws / "c.txt").read_text(), re.M)
