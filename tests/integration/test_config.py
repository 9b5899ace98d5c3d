"""Configuration errors are refused with a message naming file, line and key."""
import os
import sqlite3
import stat
import subprocess
import tempfile

from conftest import Env, domain_dir_for, lz_run, make_git_repo


def check(lazaret, env, workspace, *args):
    return subprocess.run([lazaret, "config", "check", *args], cwd=workspace, env=env.environ(),
                          capture_output=True, text=True, timeout=30)


def test_config_check_prints_ids(lazaret, env, workspace):
    r = check(lazaret, env, workspace, "-p", "test")
    assert r.returncode == 0, r.stderr
    assert "Domain ID" in r.stdout or "domain" in r.stdout.lower()
    assert "ingerprint" in r.stdout


def test_unknown_key_refused(lazaret, env, workspace):
    env.write_config(extra_profile='imagee = "x"\n')
    r = check(lazaret, env, workspace, "-p", "test")
    assert r.returncode == 1
    assert str(env.config) in r.stderr
    assert "imagee" in r.stderr
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode == 125
    assert b"imagee" in r.stderr


def test_bad_profile_name_refused(lazaret, env, workspace):
    # A bad name on the command line...
    r = check(lazaret, env, workspace, "-p", "Bad.Name")
    assert r.returncode == 1
    assert "Bad.Name" in r.stderr
    # ...and in the file, even when another profile is selected.
    env.config.write_text(f'[storage]\ndata_root = "{env.storage}"\n[profiles.test]\nimage = "x"\n'
                          f'[profiles."Bad.Name"]\nimage = "x"\n')
    r = check(lazaret, env, workspace, "-p", "test")
    assert r.returncode == 1
    assert f"{env.config}:5" in r.stderr, r.stderr


def test_missing_env_reference_refused(lazaret, env, workspace):
    env.write_config(extra_profile='env = { TOKEN = "env:LZ_SURELY_UNSET_VAR" }\n')
    r = check(lazaret, env, workspace, "-p", "test")
    assert r.returncode == 1
    assert "LZ_SURELY_UNSET_VAR" in r.stderr


def test_env_values_reach_sandbox_but_not_output(lazaret, env, workspace):
    env.write_config(extra_profile='env = { TOKEN = "env:LZ_TEST_TOKEN" }\n')
    e = env.environ(LZ_TEST_TOKEN="s3cr3t-value")
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "s3cr3t-value" not in r.stdout + r.stderr
    # Files whose inode changed after this point are what the run wrote
    # (ctime cannot be set back by the writer); the images and other
    # Domains of a shared Storage Root are left out of the search, which
    # would read gigabytes.
    with tempfile.NamedTemporaryFile() as marker:
        marker_ctime_ns = os.fstat(marker.fileno()).st_ctime_ns
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo $TOKEN"], cwd=workspace, env=e,
                       capture_output=True, timeout=120)
    assert r.stdout == b"s3cr3t-value\n"
    # Never written to disk: not in the Storage Root nor the runtime dir.
    written, read = [], 0
    for root in (env.storage, env.runtime):
        for p in root.rglob("*"):
            try:
                st = p.lstat()
                if not stat.S_ISREG(st.st_mode) or st.st_ctime_ns < marker_ctime_ns:
                    continue
                written.append(str(p))
                assert b"s3cr3t-value" not in p.read_bytes(), p
                read += 1
            except (FileNotFoundError, PermissionError):
                continue  # gone since the listing, or not the test user's
    # The run's own records (store, logs) are among what was searched.
    assert read > 3, written


def test_config_inside_workspace_refused(lazaret, env, workspace):
    cfg = workspace / "lazaret.toml"
    cfg.write_text(env.config.read_text())
    r = check(lazaret, env, workspace, "--config", str(cfg), "-p", "test")
    assert r.returncode == 1
    assert "workspace" in r.stderr


def test_unknown_profile_refused(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["true"], profile="nosuch")
    assert r.returncode == 125
    assert b"nosuch" in r.stderr


def test_escalation_only_file_keeps_the_builtin_default(lazaret, env, workspace):
    """A file that only adds an auto-approval rule keeps `default` (built in)."""
    env.config.parent.mkdir(parents=True, exist_ok=True)
    env.config.write_text(f'[storage]\ndata_root = "{env.storage}"\n\n'
                          '[[escalation.auto_approve]]\nargv = ["/usr/bin/true"]\n')
    r = check(lazaret, env, workspace)
    assert r.returncode == 0, r.stderr
    assert "# built-in profile (the configuration does not define \"default\")" in r.stdout, r.stdout
    assert "[profiles.default]\nimage = \"builtin:debian-bookworm\"" in r.stdout, r.stdout
    assert '"/usr/bin/true"' in r.stdout, r.stdout
    # The control: a name neither the file nor the built-ins define refuses.
    r = check(lazaret, env, workspace, "-p", "nope")
    assert r.returncode != 0 and "profile \"nope\" is not defined" in r.stderr, r.stderr


def test_escalation_only_file_runs_the_builtin_default(lazaret, debian, tmp_path):
    """The same file, used: `lazaret run` without -p starts the built-in
    `default` profile (the Debian image) with the file's rule in force."""
    e = Env(tmp_path / "env", debian.storage, "builtin:debian-bookworm")
    e.config.write_text(f'[storage]\ndata_root = "{e.storage}"\nlinger_seconds = 0\n\n'
                        '[[escalation.auto_approve]]\nargv = ["/usr/bin/true"]\n')
    ws = make_git_repo(tmp_path / "ws")
    r = lz_run(lazaret, e, ws, ["sh", "-c", "cat /etc/debian_version && git rev-parse --is-inside-work-tree"],
               profile=None)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.splitlines()[0].startswith("12"), out
    assert out.splitlines()[-1] == "true", out
    # The Domain is the built-in default profile's.
    db = domain_dir_for(e, ws) / "domain.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (profile,) = con.execute("SELECT value FROM meta WHERE key = 'profile'").fetchone()
    finally:
        con.close()
    assert profile == "default"
