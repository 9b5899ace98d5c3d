"""The warm linger ([storage] linger_seconds, docs/state.md): a Domain stays
up for a while after its last session, so the next command joins it warm;
`lazaret stop` ends it at once; a configuration change restarts it when it
has no session and refuses while one runs; `state reset` stops it."""
import contextlib
import io
import json
import subprocess

import pexpect

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


@contextlib.contextmanager
def live_session(lazaret, env, workspace):
    """A session that stays until the block ends (the client is killed)."""
    holder = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sleep", "60"], cwd=workspace,
                              env=env.environ(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: [d for d in ps(lazaret, env, workspace) if d["sessions"]], timeout=60)
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


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


def test_configuration_change_restarts_a_lingering_domain(lazaret, env, workspace):
    env.write_config(linger=600)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    (d,) = ps(lazaret, env, workspace)
    assert d["lingering"] is True
    # A changed configuration while the Domain only lingers: the old
    # generation stops and the command runs in a new one with the new
    # configuration (here an environment variable it can see).
    env.write_config(linger=600, extra_profile='env = { LZ_LINGER_CFG = "second" }\n')
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "echo $LZ_LINGER_CFG"])
    assert r.returncode == 0 and r.stdout == b"second\n", (r.stdout, r.stderr)
    (d2,) = ps(lazaret, env, workspace)
    assert d2["coordinator_pid"] != d["coordinator_pid"], (d, d2)
    assert d2["fingerprint"] != d["fingerprint"], (d, d2)
    stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)


def test_configuration_change_refuses_while_a_session_runs(lazaret, env, workspace):
    """The control: a Domain with a live session is never restarted under it."""
    env.write_config(linger=600)
    with live_session(lazaret, env, workspace) as holder:
        env.write_config(linger=600, extra_profile='env = { LZ_LINGER_CFG = "second" }\n')
        r = lz_run(lazaret, env, workspace, ["true"])
        assert r.returncode != 0
        assert b"different configuration; end its sessions" in r.stderr, r.stderr
        assert holder.poll() is None, "the live session was ended"
    stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)


def test_state_reset_stops_a_lingering_domain(lazaret, env, workspace):
    env.write_config(linger=600)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    (d,) = ps(lazaret, env, workspace)
    assert d["lingering"] is True
    r = subprocess.run([lazaret, "state", "reset", "--yes", "--workspace", str(workspace), "-p", "test"],
                       env=env.environ(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ps(lazaret, env, workspace) == []
    assert "stopped for `lazaret state reset`" in coord_log(env, workspace)


def test_state_reset_refuses_while_a_session_runs(lazaret, env, workspace):
    """The control: reset never stops a Domain that has a session."""
    env.write_config(linger=600)
    with live_session(lazaret, env, workspace) as holder:
        r = subprocess.run([lazaret, "state", "reset", "--yes", "--workspace", str(workspace), "-p", "test"],
                           env=env.environ(), capture_output=True, timeout=120)
        assert r.returncode != 0
        assert b"is running with sessions" in r.stderr, r.stderr
        assert holder.poll() is None, "the live session was ended"
    stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)


def terminal_session(lazaret, env, workspace, script):
    """`lazaret run` on a real PTY (the way a user starts an agent): runs
    script in the sandbox's shell, then exits; the output it saw."""
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=env.environ(LAZARET_DEBUG="1"),
                      timeout=120, encoding="utf-8", dimensions=(24, 120))
    c.logfile_read = seen = io.StringIO()
    try:
        c.expect(r"[#$] ")
        c.sendline(f"{script}; exit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    assert c.exitstatus == 0, seen.getvalue()
    return seen.getvalue()


def test_state_reset_right_after_a_terminal_session_ends(lazaret, env, workspace):
    """`lazaret run`, exit, `lazaret state reset` at once (nothing waits
    between them): the Domain only lingers, so it is stopped and reset."""
    env.write_config(linger=600)
    terminal_session(lazaret, env, workspace, "true")
    r = subprocess.run([lazaret, "state", "reset", "--yes", "--workspace", str(workspace), "-p", "test"],
                       env=env.environ(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ": reset" in r.stdout, r.stdout
    assert ps(lazaret, env, workspace) == []
    assert "stopped for `lazaret state reset`" in coord_log(env, workspace)


def test_configuration_change_right_after_a_terminal_session_ends(lazaret, env, workspace):
    """A terminal session, a configuration change, and the next terminal
    session at once: the lingering Domain restarts with the new
    configuration and says so in one line."""
    env.write_config(linger=600)
    try:
        terminal_session(lazaret, env, workspace, "echo first=$LZ_LINGER_CFG")
        (d,) = ps(lazaret, env, workspace)
        env.write_config(linger=600, extra_profile='env = { LZ_LINGER_CFG = "second" }\n')
        out = terminal_session(lazaret, env, workspace, "echo value=$LZ_LINGER_CFG")
        assert "value=second" in out, out
        notes = [ln for ln in out.splitlines() if "restarting it with the new one" in ln]
        assert len(notes) == 1, out
        assert notes[0].startswith("lazaret: NOTICE: the configuration changed and the Domain had no session "
                                   "left"), out
        (d2,) = ps(lazaret, env, workspace)
        assert d2["fingerprint"] != d["fingerprint"] and d2["coordinator_pid"] != d["coordinator_pid"], (d, d2)
        # No restart without a change: the next one joins and says nothing.
        out = terminal_session(lazaret, env, workspace, "echo again=$LZ_LINGER_CFG")
        assert "again=second" in out and "restarting" not in out, out
        (d3,) = ps(lazaret, env, workspace)
        assert d3["coordinator_pid"] == d2["coordinator_pid"], (d2, d3)
    finally:
        stop(lazaret, env, workspace)
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=15)


def test_linger_zero_stops_at_once(lazaret, env, workspace):
    env.write_config(linger=0)
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    assert wait_until(lambda: ps(lazaret, env, workspace) == [], timeout=10)
    assert "StartLinger" not in coord_log(env, workspace)
