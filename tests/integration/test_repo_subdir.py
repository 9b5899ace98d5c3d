"""A run from a subdirectory of a Git repository (a package of a monorepo):
the repository's top level is the workspace and the Domain, the session
starts in the subdirectory, and Git works inside (docs/state.md,
"Workspace and start directory")."""
import io
import json
import subprocess

import pexpect

from conftest import git_env, make_git_repo, wait_until


def repo_with_package(path):
    repo = make_git_repo(path)
    web = repo / "packages" / "web"
    web.mkdir(parents=True)
    (web / "index.js").write_text("console.log('web')\n")
    subprocess.run(["git", "-C", str(repo), "add", "packages"], check=True, env=git_env())
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "web"], check=True, env=git_env())
    return repo, web


def ps(lazaret, env, cwd):
    r = subprocess.run([lazaret, "ps", "--json"], cwd=cwd, env=env.environ(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_run_in_a_package_directory(lazaret, debian, tmp_path):
    repo, web = repo_with_package(tmp_path / "mono")
    (web / "new.txt").write_text("from the host\n")
    # config check says which workspace and start directory it uses.
    r = subprocess.run([lazaret, "config", "check"], cwd=web, env=debian.environ(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert f'# workspace: "{repo}" (the top level of the Git repository holding the current directory)\n' \
        in r.stdout, r.stdout
    assert '# start directory: "/workspace/packages/web"\n' in r.stdout, r.stdout
    r = subprocess.run([lazaret, "config", "check"], cwd=repo, env=debian.environ(), capture_output=True,
                       text=True, timeout=60)
    assert f'# workspace: "{repo}"\n# start directory: "/workspace"\n' in r.stdout, r.stdout

    # A terminal session started in the package directory...
    c = pexpect.spawn(lazaret, ["run"], cwd=str(web), env=debian.environ(), timeout=120, encoding="utf-8",
                      dimensions=(24, 120))
    c.logfile_read = seen = io.StringIO()
    try:
        c.expect(r"[#$] ")
        c.sendline("echo cwd=$(pwd) top=$(git rev-parse --show-toplevel) prefix=$(git rev-parse --show-prefix)")
        c.expect(r"cwd=(\S+) top=(\S+) prefix=(\S*)\r\n")
        assert c.match.groups() == ("/workspace/packages/web", "/workspace", "packages/web/"), seen.getvalue()
        c.expect(r"[#$] ")
        # git status shows paths relative to the start directory, as on the host
        c.sendline("echo status=$(git status --short -- . | tr '\\n' ,) log=$(git log --oneline | wc -l)")
        c.expect(r"status=([^$\r\n]*) log=(\d+)\r\n")
        assert c.match.groups() == ("?? new.txt,", "2"), seen.getvalue()
        c.expect(r"[#$] ")
        (d,) = ps(lazaret, debian, repo)  # the top level's Domain, with this session
        assert d["workspace"] == str(repo) and len(d["sessions"]) == 1, d
        # ...and a second terminal in the repository's top level joins it.
        r = subprocess.run([lazaret, "run", "--", "sh", "-c", "pwd; cat packages/web/new.txt"], cwd=repo,
                           env=debian.environ(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "/workspace\nfrom the host\n", r.stdout
        (d2,) = ps(lazaret, debian, web)
        assert d2["coordinator_pid"] == d["coordinator_pid"] and d2["generation"] == d["generation"], (d, d2)
        # A file written in the package directory inside lands there.
        c.sendline("echo sandbox > made-inside.txt; echo wrote=$?")
        c.expect("wrote=0")
        c.sendline("exit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    assert (web / "made-inside.txt").read_text() == "sandbox\n"
    assert wait_until(lambda: ps(lazaret, debian, repo) == [], timeout=30)


def test_directory_outside_a_repository_stays_the_workspace(lazaret, env, tmp_path):
    """The control: no `.git` above, the directory itself is the workspace."""
    plain = tmp_path / "plain" / "sub"
    plain.mkdir(parents=True)
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c", "pwd; ls /workspace"], cwd=plain,
                       env=env.environ(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "/workspace\n", r.stdout
