"""The sandbox's renames never un-hide the host's ignored files.

A rename of a host directory moves the host's hidden (ignored, untracked)
entries below it on the host's disk. Where the rules do not hide them at
the new path (`/config/secrets.env` is anchored), the sandbox would read
them there and the host's git would list them as untracked, for the
developer's next `git add -A`. The router refuses such a rename with EXDEV
(src/router/hidden.c, docs/ignored-state.md): `mv` copies what the sandbox
sees, `git mv` fails, and the hidden files stay where the host's rules hide
them.

Each attack runs inside the sandbox as a hostile agent would, then the
host's real git looks at what is left: every secret must still be ignored
at its own path and no untracked (not ignored) file may hold one. Positive
controls: the same renames made on the host show the harm the sentinel
looks for, a file the host itself puts at the new path is served, and the
renames that keep hidden files hidden really move them.
tests/router/test_ignored_rename.sh covers rename(2), RENAME_NOREPLACE and
RENAME_EXCHANGE directly.
"""
import shutil
import subprocess

import pytest

from conftest import git, git_env, lz_run

SENT = "LZSENTINEL"
RULES = "/config/secrets.env\ndeploy/keys/\nnode_modules/\n*.log\nvendor/\n"
SECRETS = ["config/secrets.env", "deploy/keys/id", "private/token"]


def make_ws(workspace, excludes):
    (workspace / ".gitignore").write_text(RULES)
    for d in ("config", "deploy/keys", "src/node_modules", "private"):
        (workspace / d).mkdir(parents=True)
    (workspace / "config" / "database.yml").write_text("db: x\n")
    (workspace / "deploy" / "app.rb").write_text("deploy\n")
    (workspace / "src" / "main.c").write_text("int main;\n")
    (workspace / "private" / "README").write_text("tracked\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "project")
    # `private/token` is hidden by a rule outside .gitignore (anchored there too).
    excludes.parent.mkdir(parents=True, exist_ok=True)
    excludes.write_text("/private/token\n")
    for i, rel in enumerate(SECRETS):
        (workspace / rel).write_text(f"{SENT}-{i}\n")
    (workspace / "src" / "node_modules" / "dep.js").write_text("host node\n")
    (workspace / "src" / "run.log").write_text("host log\n")
    return workspace


@pytest.fixture
def ws(workspace, env):
    # The host user's core.excludesFile (default $XDG_CONFIG_HOME/git/ignore),
    # in this test's own environment.
    return make_ws(workspace, env.config_home / "git" / "ignore")


@pytest.fixture
def ws_repo_excludes(workspace):
    # The repository's info/exclude (the shared Debian environment's
    # configuration is left alone).
    return make_ws(workspace, workspace / ".git" / "info" / "exclude")


def host_git(ws, env, *args):
    """The host's git as the developer runs it (with their core.excludesFile)."""
    e = git_env(XDG_CONFIG_HOME=str(env.config_home))
    return subprocess.run(["git", "-C", str(ws)] + list(args), check=True, env=e, capture_output=True,
                          text=True).stdout


def untracked_secrets(ws, env):
    """Untracked, not ignored files that hold a secret: what `git add -A` would commit."""
    out = host_git(ws, env, "ls-files", "--others", "--exclude-standard", "-z")
    return sorted(p for p in out.split("\0") if p and SENT in (ws / p).read_text(errors="replace"))


def assert_secrets_stay(ws, env):
    ignored = host_git(ws, env, "ls-files", "--others", "--ignored", "--exclude-standard").split("\n")
    for i, rel in enumerate(SECRETS):
        assert (ws / rel).read_text() == f"{SENT}-{i}\n", rel
        assert rel in ignored, (rel, ignored)
    assert untracked_secrets(ws, env) == []


def run(lazaret, env, ws, script, **kw):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script], **kw)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def test_mv_of_a_directory_holding_hidden_host_files_never_exposes_them(lazaret, env, ws, tmp_path):
    # Positive control first: the same renames made without the router
    # expose every secret to the host's git (the sentinel fires).
    control = tmp_path / "control"
    shutil.copytree(ws, control, symlinks=True)
    subprocess.run(["sh", "-c", "mv config config2 && mv deploy d2 && mkdir x && mv d2 x/ && mv private p2"],
                   cwd=control, check=True)
    assert untracked_secrets(control, env) == ["config2/secrets.env", "p2/token", "x/d2/keys/id"]

    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat config/secrets.env deploy/keys/id private/token; "
                       "mv config config2; echo mv1=$?; cat config2/secrets.env; "
                       "mv deploy d2; echo mv2=$?; cat d2/keys/id; mkdir x; mv d2 x/; cat x/d2/keys/id; "
                       "mv private p2; echo mv3=$?; cat p2/token; "
                       "mv config/../config c3; cat c3/secrets.env CONFIG/secrets.env Config/secrets.env; "
                       "ln config/secrets.env hard; "
                       "find . -path ./.git -prune -o -type f -exec cat {} +; ls -a config2 config; echo end")
    assert SENT not in out + err, out + err
    assert "end" in out, err
    # busybox mv got EXDEV and copied what it sees; it could not remove
    # the directories that still hold the host's hidden files.
    assert "mv1=1" in out and "mv2=1" in out and "mv3=1" in out, out
    assert (ws / "config2" / "database.yml").read_text() == "db: x\n"
    assert not (ws / "config" / "database.yml").exists()
    assert (ws / "x" / "d2" / "app.rb").exists()
    assert_secrets_stay(ws, env)

    # The next Domain start: still hidden, and still not movable.
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat config/secrets.env; mv config c4; echo mv4=$?; "
                       "cat c4/secrets.env; echo end")
    assert SENT not in out + err and "mv4=1" in out, out + err
    assert_secrets_stay(ws, env)
    # Positive control of the sandbox's side: a file the host itself puts at
    # the new path is served there (what the refusal kept the secret from).
    (ws / "config2" / "secrets.env").write_text("host placed\n")
    rc, out, err = run(lazaret, env, ws, "cat /workspace/config2/secrets.env")
    assert rc == 0 and out == "host placed\n", out + err


def test_renames_that_keep_hidden_files_hidden_move_them(lazaret, env, ws):
    rc, out, err = run(lazaret, env, ws, "cd /workspace; mv src lib && echo mv1=ok; cat lib/node_modules/dep.js; "
                       "mkdir -p a/b && mv lib a/b/lib && echo mv2=ok; ls a/b/lib")
    assert rc == 0 and "mv1=ok" in out and "mv2=ok" in out, out + err
    assert "host node" not in out and "host log" not in out, out
    # A real rename: the host's hidden files moved with their directory and
    # are ignored at the new path (unanchored rules).
    assert (ws / "a" / "b" / "lib" / "node_modules" / "dep.js").read_text() == "host node\n"
    assert (ws / "a" / "b" / "lib" / "run.log").read_text() == "host log\n"
    assert not (ws / "src").exists()
    ignored = host_git(ws, env, "ls-files", "--others", "--ignored", "--exclude-standard")
    assert "a/b/lib/node_modules/dep.js" in ignored and "a/b/lib/run.log" in ignored, ignored
    assert_secrets_stay(ws, env)


@pytest.mark.slow
def test_git_mv_refactors_and_clone_into_an_ignored_directory(lazaret, debian, ws_repo_excludes):
    env, ws = debian, ws_repo_excludes
    g = "git -c safe.directory='*' -c user.name=a -c user.email=a@a"
    rc, out, err = run(lazaret, env, ws, f"cd /workspace; {g} mv src lib && echo gitmv1=ok; "
                       f"{g} mv deploy d2; echo gitmv2=$?; cat d2/keys/id; "
                       f"{g} mv config config2; echo gitmv3=$?; "
                       f"{g} mv config/database.yml config/db.yml && echo gitmv4=ok; "
                       f"{g} commit -qm refactor && echo commit=ok; "
                       f"{g} init -q /tmp/up && echo up > /tmp/up/f && {g} -C /tmp/up add f && "
                       f"{g} -C /tmp/up commit -qm up && "
                       f"{g} clone -q --depth 1 file:///tmp/up vendor/up && cat vendor/up/f && echo clone=ok; "
                       # renameat2 (x86-64: 316) with RENAME_EXCHANGE (2) and RENAME_NOREPLACE (1).
                       "mkdir e; perl -e 'my ($a, $b) = (q{config}, q{e}); print syscall(316, -100, $a, -100, $b, 2) == 0 ? "
                       "qq{exch=0\\n} : qq{exch=$!\\n}'; "
                       "perl -e 'my ($a, $b) = (q{config}, q{c9}); print syscall(316, -100, $a, -100, $b, 1) == 0 ? "
                       "qq{noreplace=0\\n} : qq{noreplace=$!\\n}'; "
                       "cat e/secrets.env c9/secrets.env; "
                       f"{g} status --porcelain; echo end")
    assert SENT not in out + err, out + err
    assert "end" in out, err
    assert "gitmv1=ok" in out and "gitmv4=ok" in out and "commit=ok" in out, out + err
    assert "gitmv2=128" in out and "gitmv3=128" in out, out + err
    assert "Invalid cross-device link" in err, err
    assert "clone=ok" in out, out + err
    # gVisor (as tested) answers EINVAL to both flags on the workspace before
    # the router is asked; tests/router/test_ignored_rename.sh checks the
    # router's own answer (EXDEV) for them.
    assert "exch=" in out and "exch=0" not in out, out + err
    assert "noreplace=" in out and "noreplace=0" not in out, out + err
    # The host: the refactor is committed, its hidden files moved along and
    # ignored; the clone is the Domain's; every secret where it was.
    assert "lib/main.c" in host_git(ws, env, "ls-files")
    assert (ws / "lib" / "node_modules" / "dep.js").exists() and not (ws / "vendor").exists()
    assert (ws / "config" / "db.yml").exists()
    assert_secrets_stay(ws, env)
