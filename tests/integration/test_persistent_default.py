"""A profile in a config file without `persistent_dirs` gets the default
(/etc /opt /root /usr /var, as README, docs/state.md and lazaret.toml(5)
say): what the sandbox writes there survives a restart of the Domain.
Control: `persistent_dirs = []` keeps nothing, with the same probe.
"""
import subprocess

from conftest import lz_run, wait_until, user_processes

PROBE = "cat /root/note 2>/dev/null || echo none; echo kept > /root/note; echo x > /usr/mark"


def write(env, persistent):
    # Env.write_config adds `persistent_dirs = []` unless told otherwise: write the file by hand.
    env.config.write_text(f'[storage]\ndata_root = "{env.storage}"\nlinger_seconds = 0\n\n'
                          f'[profiles.test]\nimage = "{env.image}"\n{persistent}\n')


def twice(lazaret, env, workspace):
    outs = []
    for _ in range(2):
        r = lz_run(lazaret, env, workspace, ["sh", "-c", PROBE])
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        outs.append(r.stdout.decode())
        # the Domain stops with its last session: the next run is a new generation
        assert wait_until(lambda: not user_processes("runsc"), timeout=45)
    return outs


def test_profile_without_the_key_gets_the_default(lazaret, env, workspace):
    write(env, "")
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=env.environ(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    line = next((ln for ln in r.stdout.splitlines() if "persistent_dirs" in ln), "")
    for d in ("/etc", "/opt", "/root", "/usr", "/var"):
        assert f'"{d}"' in line, r.stdout
    assert twice(lazaret, env, workspace) == ["none\n", "kept\n"]


def test_control_empty_list_keeps_nothing(lazaret, env, workspace):
    write(env, "persistent_dirs = []")
    assert twice(lazaret, env, workspace) == ["none\n", "none\n"]
