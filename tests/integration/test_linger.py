"""The warm linger ([storage] linger_seconds, docs/state.md): a Domain stays
up for a while after its last session, so the next command joins it warm;
`lazaret stop` ends it at once; a configuration change still refuses."""
import json
import subprocess

from conftest import domain_dir_for, wait_until


def lz_run(lazaret, env, workspace, args):
    return subprocess.run([lazaret, "run", "-p", "test", "--", *args], cwd=workspace,
                          env=env.environ(LAZARET_DEBUG="1"), capture_output=True, timeout=120)


def stop(lazaret, env, workspace):
    r = subprocess.run([lazaret, "stop", "-p", "test"], cwd=workspace, env=env.environ(), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr


def ps(lazaret, env, workspace):
    r = subprocess.run([lazaret, "ps", "--json"], cwd=workspace, env=env.environ(), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


def test_next_command_joins_the_lingering_domain(lazaret, env, workspace):
    env.write_config(linger=4)
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode == 0, r.stderr
    (d,) = ps(lazaret, env, workspace)
    assert d["lingering"] is True and d["sessions"] == [] and 0 < d["linger_left_ms"] <= 4000, d
    text = subprocess.run([lazaret, "ps"], cwd=workspace, env=env.environ(), capture_output=True, text=True,
                          timeout=60).stdout
    assert "(lingering, stops in" in text, text
    # The next command joins the same generation (no cold start).
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "echo joined"])
    assert r.returncode == 0 and r.stdout == b"joined\n", r.stderr
    (d2,) = ps(lazaret, env, workspace)
    assert d2["coordinator_pid"] == d["coordinator_pid"] and d2["generation"] == d["generation"], (d, d2)
    log = coord_log(env, workspace)
    assert "a session joined: the linger ends" in log and log.count("debug: model StartLinger(") >= 1, log[-2000:]
    # With no one joining, it stops when the linger is over.
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=30)
    assert wait_until(lambda: "Domain stopped" in coord_log(env, workspace), timeout=30)
    log = coord_log(env, workspace)
    assert "the linger is over" in log
    assert log.index("the linger is over") < log.index("debug: model BeginTeardown(")


def test_stop_ends_the_linger_at_once(lazaret, env, workspace):
    env.write_config(linger=600)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    (d,) = ps(lazaret, env, workspace)
    assert d["lingering"] is True
    stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)


def test_configuration_change_refuses_while_lingering(lazaret, env, workspace):
    env.write_config(linger=600)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    env.write_config(linger=600, extra_profile='allow_egress = ["192.0.2.0/24"]\n')
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode != 0
    assert b"different configuration, with no session" in r.stderr and b"lazaret stop" in r.stderr, r.stderr
    stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)
    # Control: after the stop, the new configuration starts.
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode == 0, r.stderr
    stop(lazaret, env, workspace)


def test_linger_zero_stops_at_once(lazaret, env, workspace):
    env.write_config(linger=0)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=10)
    assert "StartLinger" not in coord_log(env, workspace)
