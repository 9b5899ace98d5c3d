"""The sandbox's git trusts the host's index: its first `git status` does not
re-read every tracked file (core.checkStat=minimal in every session's
environment), and a profile can keep its own Git settings instead."""
import subprocess

import pytest

from conftest import Env, git_env, lz_run, make_git_repo

pytestmark = pytest.mark.slow

# Stat-dirty entries, as git's plumbing reports them without refreshing the
# index: every file whose recorded stat data does not match.
STAT_DIRTY = "git -c safe.directory='*' {opt} diff-files --name-only"


def repo_with_files(path):
    ws = make_git_repo(path)
    for i in range(20):
        (ws / f"f{i}.txt").write_text(f"{i}\n")
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True, env=git_env())
    subprocess.run(["git", "-C", str(ws), "commit", "-qm", "files"], check=True, env=git_env())
    return ws


def test_first_status_trusts_the_hosts_index(lazaret, debian, tmp_path):
    ws = repo_with_files(tmp_path / "ws")
    env = Env(tmp_path / "env", debian.storage, debian.image)
    script = ("echo CHECK=$(git config core.checkStat); "
              f"echo MINIMAL=$({STAT_DIRTY.format(opt='')} | wc -l); "
              # Positive control: Git's default check, in the same session.
              f"echo DEFAULT=$({STAT_DIRTY.format(opt='-c core.checkStat=default')} | wc -l); "
              "git -c safe.directory='*' status --porcelain | wc -l")
    r = lz_run(lazaret, env, ws, ["bash", "-c", script], timeout=300)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert "CHECK=minimal" in out, out
    # The sandbox's inode numbers and owners are not the host's: with the
    # default check every tracked file is stat-dirty (21 of them) ...
    assert "DEFAULT=21" in out, out
    # ... and with the session's setting none is, and the tree is clean.
    assert "MINIMAL=0" in out, out
    assert out.strip().endswith("0"), out


def test_profile_keeps_its_own_git_settings(lazaret, debian, tmp_path):
    ws = repo_with_files(tmp_path / "ws")
    env = Env(tmp_path / "env", debian.storage, debian.image)
    env.write_config(extra_profile='env = { GIT_CONFIG_COUNT = "1", GIT_CONFIG_KEY_0 = "user.name", '
                                   'GIT_CONFIG_VALUE_0 = "Profile" }\n')
    r = lz_run(lazaret, env, ws, ["bash", "-c",
                                  "echo NAME=$(git config user.name) CHECK=$(git config core.checkStat)"],
               timeout=300)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert "NAME=Profile CHECK=\n" in out, out
