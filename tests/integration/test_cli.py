"""The command line itself: help, version, usage errors."""
import subprocess


def run(lazaret, *args):
    return subprocess.run([lazaret, *args], capture_output=True, text=True, timeout=30)


def test_help_and_version(lazaret):
    r = run(lazaret, "--help")
    assert r.returncode == 0
    for cmd in ("run", "config check", "image bootstrap", "image ls", "doctor"):
        assert cmd in r.stdout
    r = run(lazaret, "--version")
    assert r.returncode == 0 and r.stdout.startswith("lazaret ")


def test_command_help(lazaret):
    for cmd in (["run"], ["config"], ["image"], ["doctor"]):
        r = run(lazaret, *cmd, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        assert "Usage: lazaret " + cmd[0] in r.stdout


def test_unknown_command(lazaret):
    r = run(lazaret, "frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr


def test_no_arguments(lazaret):
    r = run(lazaret)
    assert r.returncode == 2
    assert "Usage" in r.stderr


def test_run_bad_option(lazaret):
    r = run(lazaret, "run", "--bogus")
    assert r.returncode == 2


def test_doctor_reports_each_check(lazaret):
    r = run(lazaret, "doctor")
    for name in ("kernel", "user namespaces", "runsc", "slirp4netns", "/dev/fuse", "/dev/net/tun", "disk"):
        assert name in r.stdout, r.stdout
    # setup.sh prepared this machine: everything passes.
    assert r.returncode == 0, r.stdout


def test_image_commands_work_in_the_home_directory(lazaret, tmp_path):
    """`lazaret image ...` starts no sandbox: in $HOME, which holds the
    configuration file and the Storage Root, it works; `lazaret run` there
    is refused (the control: the workspace's own checks still apply)."""
    home = tmp_path / "home"
    cfg = home / ".config" / "lazaret" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[escalation]\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    (tmp_path / "run").mkdir(mode=0o700)
    r = subprocess.run([lazaret, "image", "ls"], cwd=home, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "IMAGES" in r.stdout
    r = subprocess.run([lazaret, "run", "--", "true"], cwd=home, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "overlap" in r.stderr and str(home / ".local" / "share" / "lazaret") in r.stderr, r.stderr
