"""Shared Domains: many sessions in one sandbox, `ps`/`stop`, races, and
recovery after any Lazaret process is killed (checked from outside).

Real runsc, real PTYs (pexpect), real stores. Every wait is bounded.
"""
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from conftest import FIXTURES, domain_dir_for, lz_run, user_processes, wait_until

PROMPT = r"[#$] "


def spawn(lazaret, env, workspace, args=()):
    return pexpect.spawn(lazaret, ["run", "-p", "test", *args], cwd=str(workspace), env=env.environ(),
                         encoding="utf-8", timeout=60, dimensions=(24, 80))


def sandbox_processes():
    return [p for pat in ("runsc", "slirp4netns", "lazaret-router", "lazaret-core __supervisor",
                          "lazaret-core __coordinator") for p in user_processes(pat)]


def generations(ddir):
    con = sqlite3.connect(f"file:{ddir / 'domain.db'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT gen, state FROM generations ORDER BY gen").fetchall()
    finally:
        con.close()


def ps_json(lazaret, env):
    r = subprocess.run([lazaret, "ps", "--json"], env=env.environ(), capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("n", [2, 8])
def test_n_sessions_share_one_sandbox(lazaret, env, workspace, n):
    ss = []
    try:
        for i in range(n):
            c = spawn(lazaret, env, workspace)
            c.expect(PROMPT)
            ss.append(c)
        assert len(user_processes(f"__coordinator .*--workspace {workspace}")) == 1
        ss[0].sendline("echo from-0 > /tmp/shared; sleep 300 & echo START''ED")
        ss[0].expect("\r\nSTARTED\r\n")
        for i, c in enumerate(ss[1:], 1):
            c.sendline(f"cat /tmp/shared; ps | grep -c 'sleep 30[0]'; echo DONE-{i}")
            c.expect(f"from-0\\s+1\\s+DONE-{i}")
        doms = ps_json(lazaret, env)
        assert len(doms) == 1 and len(doms[0]["sessions"]) == n
    finally:
        for c in ss:
            c.sendline("exit")
        for c in ss:
            c.expect(pexpect.EOF)
    # The last one leaving tears the Domain down.
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    assert ps_json(lazaret, env) == []


def test_keystrokes_are_not_delayed_by_another_sessions_flood(lazaret, env, workspace):
    flood = spawn(lazaret, env, workspace)
    flood.expect(PROMPT)
    quiet = spawn(lazaret, env, workspace)
    quiet.expect(PROMPT)
    flood.sendline("yes 0123456789abcdefghijklmnopqrstuvwxyz")
    flood.expect("0123456789abcdef")
    # The flooding client reads nothing more: its output backs up into the
    # coordinator (bounded queue, PTY backpressure) while the other session
    # still gets every keystroke echoed.
    for i in range(20):
        quiet.send(f"echo ping-{i}\r")
        quiet.expect(f"ping-{i}\\r\\n", timeout=10)
    flood.sendcontrol("c")
    flood.expect(PROMPT, timeout=30)
    for c in (flood, quiet):
        c.sendline("exit")
        c.expect(pexpect.EOF)


def test_sixteen_concurrent_runs_make_one_generation(lazaret, env, workspace):
    procs = [subprocess.Popen([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=env.environ(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(16)]
    results = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    ddir = domain_dir_for(env, workspace)
    gens = generations(ddir)
    # Runs that arrive while the Domain stops start the next generation;
    # concurrent ones share one. Every generation ends clean.
    assert all(s == "clean" for _, s in gens), gens
    assert len(gens) < 16


def test_stop_ends_sessions_with_a_reason(lazaret, env, workspace):
    a = spawn(lazaret, env, workspace)
    a.expect(PROMPT)
    b = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sleep", "300"], cwd=workspace, env=env.environ(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert wait_until(lambda: ps_json(lazaret, env) and len(ps_json(lazaret, env)[0]["sessions"]) == 2,
                      timeout=60)
    out = subprocess.run([lazaret, "ps"], env=env.environ(), capture_output=True, text=True, timeout=30).stdout
    assert "2 sessions" in out and "sleep" in out
    r = subprocess.run([lazaret, "stop", "-p", "test"], cwd=workspace, env=env.environ(), capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    a.expect("being stopped")
    a.expect(pexpect.EOF)
    assert b.wait(timeout=60) == 129  # SIGHUP: the session was released
    assert b"being stopped (lazaret stop)" in b.stderr.read()
    assert not sandbox_processes()
    r = subprocess.run([lazaret, "stop", "-p", "test"], cwd=workspace, env=env.environ(), capture_output=True,
                       timeout=30)
    assert r.returncode == 1 and b"not running" in r.stderr


def test_stop_force_and_bad_domain_argument(lazaret, env, workspace):
    b = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", "trap '' HUP TERM; sleep 300"],
                         cwd=workspace, env=env.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert wait_until(lambda: len(ps_json(lazaret, env)) == 1, timeout=60)
    did = ps_json(lazaret, env)[0]["domain_id"]
    r = subprocess.run([lazaret, "stop", "zz"], env=env.environ(), capture_output=True, timeout=30)
    assert r.returncode == 2 and b"not a Domain ID" in r.stderr
    r = subprocess.run([lazaret, "stop", "--force", did[:8]], env=env.environ(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert b.wait(timeout=30) == 137  # SIGKILL at once, the traps did not matter


def test_resolver_that_cannot_start_stops_the_domain_with_the_reason(lazaret, env, workspace):
    """The Domain's resolver and TLS gate start once the first session has
    its process (their sockets exist since the boot, so nothing sent to
    them is lost meanwhile). A start of theirs that fails must stop the
    Domain, with the reason on the session's terminal, not leave the
    sandbox running without names. LAZARET_TEST_RESOLVER=fail makes it
    fail."""
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c", "sleep 20; echo survived"], cwd=workspace,
                       env=env.environ(LAZARET_TEST_RESOLVER="fail"), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "survived" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "the Domain's resolver could not start: the test hook LAZARET_TEST_RESOLVER=fail" in r.stderr, r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    # Control: the same command without the hook runs to its end.
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo survived"], cwd=workspace,
                       env=env.environ(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "survived\n", (r.stdout, r.stderr)


KILL_TARGETS = ["coordinator", "supervisor", "runsc", "slirp4netns", "router"]


def target_pid(target, env, workspace):
    """The PID of that process of this test's Domain only (other Domains
    of this user may be running)."""
    rt = env.runtime
    if target == "coordinator":
        pids = user_processes(f"__coordinator .*--workspace {workspace}")
    elif target == "supervisor":
        pids = user_processes(f"__supervisor .*--state {rt}/")
    elif target == "runsc":
        pids = user_processes(f"^/usr/bin/runsc --root {rt}/.* run ")
    elif target == "router":
        pids = user_processes(f"lazaret-router .*--mountpoint {rt}/")
    else:
        (hc,) = user_processes(f"__coordinator .*--workspace {workspace}")
        out = subprocess.run(["pgrep", "-P", str(hc), "slirp4netns"], capture_output=True, text=True).stdout
        pids = [int(x) for x in out.split()]
    assert len(pids) == 1, (target, pids)
    return pids[0]


@pytest.mark.parametrize("target", KILL_TARGETS)
def test_sigkill_of_any_lazaret_process_is_recovered(lazaret, env, workspace, target):
    env.write_config(extra_profile='persistent_dirs = ["/root"]')
    a = spawn(lazaret, env, workspace)
    a.expect(PROMPT)
    a.sendline("echo kept > /root/k; echo O''K")  # the typed line echoes too: match the output only
    a.expect("\r\nOK\r\n")
    os.kill(target_pid(target, env, workspace), signal.SIGKILL)
    # The session ends (with the coordinator's reason, or runsc's own error
    # when the exec client noticed first) and the terminal comes back.
    a.expect(pexpect.EOF, timeout=60)
    text = a.before
    a.close()
    assert a.exitstatus != 0, text
    assert any(m in text for m in ("ended unexpectedly", "stopped unexpectedly", "died", "urpc", "EOF")), text
    # Everything of that generation goes away (lease loss), bounded.
    assert wait_until(lambda: not sandbox_processes(), timeout=60), sandbox_processes()
    # The next session works and sees the persistent state; afterwards
    # every generation is clean and no lease is left.
    r = lz_run(lazaret, env, workspace, ["cat", "/root/k"])
    assert r.returncode == 0 and r.stdout == b"kept\n", r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    ddir = domain_dir_for(env, workspace)
    assert all(s == "clean" for _, s in generations(ddir)), generations(ddir)
    con = sqlite3.connect(f"file:{Path(env.storage) / 'catalog.db'}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM leases WHERE domain_id = ?", (ddir.name,)).fetchone() == (0,)
    finally:
        con.close()


def test_killed_client_session_is_closed_not_reattached(lazaret, env, workspace):
    a = spawn(lazaret, env, workspace)
    a.expect(PROMPT)
    b = spawn(lazaret, env, workspace)
    b.expect(PROMPT)
    b.sendline("sleep 300")
    time.sleep(0.5)  # not synchronisation: just lets the shell start sleep before the kill
    os.kill(b.pid, signal.SIGKILL)
    b.close()
    assert wait_until(lambda: len(ps_json(lazaret, env)[0]["sessions"]) == 1, timeout=30)
    a.sendline("ps | grep -c 'sleep 30[0]'; echo COUNTED")
    a.expect(r"\b0\s+COUNTED")
    a.sendline("exit")
    a.expect(pexpect.EOF)


@pytest.mark.parametrize("step", ["session-staged", "session-running"])
def test_coordinator_killed_while_a_session_starts(lazaret, env, workspace, step):
    e = env.environ(LAZARET_TEST_CRASH=step)
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e, capture_output=True,
                       timeout=120)
    assert r.returncode != 0
    assert wait_until(lambda: not sandbox_processes(), timeout=60), sandbox_processes()
    r = lz_run(lazaret, env, workspace, ["echo", "fine"])
    assert r.returncode == 0 and r.stdout == b"fine\n", r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    ddir = domain_dir_for(env, workspace)
    assert all(s == "clean" for _, s in generations(ddir))
    con = sqlite3.connect(f"file:{ddir / 'domain.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT state, phase FROM sessions").fetchall()
    finally:
        con.close()
    assert rows and all(r == ("clean", "unassigned") for r in rows), rows


# The start overlap: the helper is launched, runsc boots, and only then is
# the policy in place (NET after runsc's release) and the sandbox ready.
MODEL_ORDER = ["StartNewDomain", "MountStateAnchor", "CreateTrustAnchor", "LaunchSidecar", "BootSandbox",
               "StartSidecar", "StartSandbox", "PublishDomain",
               "RegisterSession", "BeginTeardown", "StopSandbox", "StopSidecar", "UnmountStateAnchor",
               "FinishTeardown"]


def test_transitions_follow_the_protocol_model(lazaret, env, workspace):
    """With LAZARET_DEBUG the coordinator logs each modelled transition with
    the action name of docs/model/lazaret.pml: a Domain's life follows the
    model's order (anchor, sidecar, sandbox up; sandbox, sidecar, anchor
    down)."""
    env.write_config(extra_profile='persistent_dirs = ["/root"]')
    e = env.environ(LAZARET_DEBUG="1")
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    log = (domain_dir_for(env, workspace) / "coordinator.log").read_text()
    actions = [line.split("debug: model ")[1].split("(")[0] for line in log.splitlines() if "debug: model " in line]
    assert actions == MODEL_ORDER, actions
    # The action names are the model's own.
    staged = FIXTURES / "lazaret.pml"
    pml = staged if staged.exists() else Path(__file__).resolve().parents[2] / "docs" / "model" / "lazaret.pml"
    text = pml.read_text()
    for a in MODEL_ORDER:
        assert f"inline {a}(" in text, a


@pytest.mark.parametrize("step", ["rs-anchored", "rs-router-released", "rs-runsc-released", "rs-sandbox-stopped"])
def test_supervisor_killed_at_each_step_is_recovered(lazaret, env, workspace, step):
    """The Runtime Supervisor dies (SIGKILL, test-only hook) at each of its
    steps: the session ends with a clear error or the generation is left
    for recovery, nothing of it survives, and the next run works."""
    env.write_config(extra_profile='persistent_dirs = ["/root"]')
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "echo kept > /root/k"])
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    e = env.environ(LAZARET_TEST_CRASH=step)
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e, capture_output=True,
                       timeout=120)
    if step != "rs-sandbox-stopped":
        assert r.returncode != 0 and r.stderr, r
    assert wait_until(lambda: not sandbox_processes(), timeout=60), sandbox_processes()
    r = lz_run(lazaret, env, workspace, ["cat", "/root/k"])
    assert r.returncode == 0 and r.stdout == b"kept\n", r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    ddir = domain_dir_for(env, workspace)
    assert all(s == "clean" for _, s in generations(ddir)), generations(ddir)
    con = sqlite3.connect(f"file:{ddir / 'domain.db'}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM processes").fetchone() == (0,)
    finally:
        con.close()
