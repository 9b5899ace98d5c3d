"""`lazaret state ls|inspect|verify|reset`: the Domains of a Storage Root.

Every test has its own Storage Root (so `state ls` and `state verify` see
only its Domains), real Domains made by the real `lazaret run`, real
runsc. The interrupted resets kill `lazaret state reset` with SIGKILL at
each durable step (LAZARET_TEST_CRASH, a test-only hook) and check what
`state verify`, a second reset and the next run see.
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from conftest import Env, lz_run, make_git_repo, wait_until

STATE_TIMEOUT = 60


@pytest.fixture
def senv(lazaret, tmp_path, busybox_image):
    """A private Storage Root, profile "test" with /root persistent."""
    e = Env(tmp_path / "env", tmp_path / "storage", f"oci:{busybox_image}")
    e.write_config(extra_profile='persistent_dirs = ["/root"]')
    yield e
    # State Anchors hold mode-000 overlay work dirs and files of
    # subordinate IDs that pytest's own cleanup cannot delete.
    subprocess.run([lazaret, "state", "reset", "--all", "--yes", "-p", "test"], cwd=e.base, env=e.environ(),
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=STATE_TIMEOUT)


def state(lazaret, env, *args, cwd=None, extra_env=None, **kw):
    """`lazaret state ARGS -p test` with stdin not a terminal."""
    e = env.environ(**(extra_env or {}))
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([lazaret, "state", *args, "-p", "test"], cwd=cwd or env.base, env=e,
                          capture_output=True, text=True, timeout=STATE_TIMEOUT, **kw)


def state_json(lazaret, env, *args, **kw):
    r = state(lazaret, env, *args, "--json", **kw)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout), r


def run_ok(lazaret, env, ws, script):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script])
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.decode()


def domain_id(lazaret, env, ws):
    info, r = state_json(lazaret, env, "inspect", "--workspace", str(ws))
    assert r.returncode == 0, r.stderr
    return info["id"]


def listed(lazaret, env):
    doms, r = state_json(lazaret, env, "ls")
    assert r.returncode == 0, r.stderr
    return {d["id"]: d for d in doms}


def wait_inactive(lazaret, env, did, timeout=45):
    """The coordinator tears down after the last session: wait, bounded."""
    assert wait_until(lambda: not listed(lazaret, env)[did]["running"], timeout=timeout, interval=0.2), \
        f"Domain {did} still running after {timeout} s"


def used_domain(lazaret, env, ws, script="echo kept > /root/old"):
    run_ok(lazaret, env, ws, script)
    did = domain_id(lazaret, env, ws)
    wait_inactive(lazaret, env, did)
    return did


def root_of(env, did):
    return Path(env.storage) / "domains" / did


# ---- ls / inspect / verify ----


def end_session(p):
    """Ends a session whose command reads its standard input (`cat`)."""
    p.stdin.close()
    p.wait(timeout=60)


def assert_kept_after_stop(lazaret, env, ws, did):
    """The Domain stops, and what used_domain left in it is still there."""
    wait_inactive(lazaret, env, did)
    assert run_ok(lazaret, env, ws, "cat /root/old") == "kept\n"


def test_ls_without_domains(lazaret, senv):
    r = state(lazaret, senv, "ls")
    assert r.returncode == 0, r.stderr
    assert "no Domains" in r.stdout
    doms, _ = state_json(lazaret, senv, "ls")
    assert doms == []
    r = state(lazaret, senv, "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].endswith("no errors")


def test_ls_inspect_verify_fresh_and_used(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    # Fresh: one run that writes nothing persistent.
    did = used_domain(lazaret, senv, ws, script="true")
    assert re.fullmatch(r"[0-9a-f]{64}", did)
    d = listed(lazaret, senv)[did]
    assert d["profile"] == "test" and d["workspace"] == str(ws)
    assert d["running"] is False and d["has_store"] is True and d["problem"] is None
    assert d["size"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d["last_used"])
    assert abs(d["last_used_ms"] / 1000 - time.time()) < 600

    r = state(lazaret, senv, "ls")
    assert r.returncode == 0
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[:3] == ["DOMAIN", "PROFILE", "RUNNING"]
    assert row.split()[:3] == [did[:12], "test", "no"] and row.endswith(str(ws))

    info, r = state_json(lazaret, senv, "inspect", did[:8])
    assert r.returncode == 0, r.stderr
    assert info["id"] == did and info["running"] is False
    assert info["anchor"]["generation"] == 1 and info["anchor"]["reset_intent"] is None
    assert [g["state"] for g in info["generations"]] == ["clean"]
    assert info["persistent_dirs_source"] == "configuration"
    assert [p["path"] for p in info["persistent_dirs"]] == ["/root"]
    assert info["leases"] == []  # released when the generation ended

    r = state(lazaret, senv, "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Domain {did[:12]}" in r.stdout and "ERRORS" not in r.stdout
    assert r.stdout.splitlines()[-1] == "1 Domain checked: 0 errors, 0 warnings; no errors"

    # Used: something in the persistent dir, a second generation.
    run_ok(lazaret, senv, ws, "head -c 200000 /dev/zero > /root/blob")
    wait_inactive(lazaret, senv, did)
    info, _ = state_json(lazaret, senv, "inspect", did)
    assert [g["generation"] for g in info["generations"]] == [1, 2]
    root = info["persistent_dirs"][0]
    assert root["present"] is True and root["size"] >= 200000
    assert info["anchor"]["size"] >= root["size"]
    r = state(lazaret, senv, "inspect", did[:6])
    assert r.returncode == 0
    assert "State Anchor anchor-1" in r.stdout and "Generations (2)" in r.stdout
    verdict, r = state_json(lazaret, senv, "verify", did)
    assert r.returncode == 0
    assert verdict["ok"] is True and verdict["errors"] == 0
    assert [(v["id"], v["status"]) for v in verdict["domains"]] == [(did, "ok")]


def test_ls_order_is_last_use_first(lazaret, senv, tmp_path):
    a = used_domain(lazaret, senv, make_git_repo(tmp_path / "a"), "true")
    b = used_domain(lazaret, senv, make_git_repo(tmp_path / "b"), "true")
    doms, _ = state_json(lazaret, senv, "ls")
    assert [d["id"] for d in doms] == [b, a]


def test_domain_arguments(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws, "true")
    # Two store-less Domain Roots sharing a prefix (a Domain Root exists
    # before its first coordinator creates the store).
    pre = "ffff" if not did.startswith("ffff") else "eeee"
    for tail in ("0" * 60, "1" * 60):
        (root_of(senv, "") / (pre + tail)).mkdir(mode=0o700)

    assert state(lazaret, senv, "inspect", did).returncode == 0
    assert state(lazaret, senv, "inspect", did[:4]).returncode == 0
    assert state(lazaret, senv, "inspect", did[:10].upper()).returncode == 0
    r = state(lazaret, senv, "inspect", pre)
    assert r.returncode == 1 and "ambiguous" in r.stderr
    assert pre + "0" * 8 in r.stderr and pre + "1" * 8 in r.stderr
    r = state(lazaret, senv, "inspect", pre + "1")
    assert r.returncode == 0 and "no Domain Store yet" in r.stdout
    unknown = "0123" if not did.startswith("0123") else "3210"
    r = state(lazaret, senv, "inspect", unknown)
    assert r.returncode == 1 and f"no Domain matches {unknown}" in r.stderr
    r = state(lazaret, senv, "inspect", did[:3])
    assert r.returncode == 1 and "at least 4 hex characters" in r.stderr
    r = state(lazaret, senv, "inspect", "../etc")
    assert r.returncode == 1 and "is not a Domain" in r.stderr
    # --workspace PATH with -p.
    info, r = state_json(lazaret, senv, "inspect", "--workspace", str(ws))
    assert r.returncode == 0 and info["id"] == did
    other = make_git_repo(tmp_path / "never")
    r = state(lazaret, senv, "inspect", "--workspace", str(other))
    assert r.returncode == 1 and "has no Domain for workspace" in r.stderr
    # The store-less Roots are listed and verified (a warning, not an error).
    doms = listed(lazaret, senv)
    assert doms[pre + "0" * 60]["has_store"] is False
    assert "no Domain Store" in doms[pre + "0" * 60]["problem"]
    r = state(lazaret, senv, "verify")
    assert r.returncode == 0, r.stdout
    assert "3 Domains checked: 0 errors, 2 warnings" in r.stdout


def test_verify_reports_and_refuses_without_repairing(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    root = root_of(senv, did)
    (root / "junk").write_text("x")
    r = state(lazaret, senv, "verify", did[:8])
    assert r.returncode == 0, r.stdout
    assert "warning: unexpected entry junk" in r.stdout
    # A copy of a Domain Root under another ID is not that Domain (SR-11).
    fake = ("a" if did[0] != "a" else "b") * 64
    shutil.copytree(root, root_of(senv, fake), symlinks=True)
    # A Domain Store that is not one.
    bad = ("c" if did[0] != "c" else "d") * 64
    root_of(senv, bad).mkdir(mode=0o700)
    (root_of(senv, bad) / "domain.db").write_bytes(b"not a database" * 100)
    verdict, r = state_json(lazaret, senv, "verify")
    assert r.returncode == 1
    st = {v["id"]: v for v in verdict["domains"]}
    assert st[did]["status"] == "warning"
    assert st[fake]["status"] == "error"
    assert any("not the directory's" in f["message"] for f in st[fake]["findings"])
    assert st[bad]["status"] == "error"
    assert verdict["ok"] is False and verdict["errors"] >= 2
    r = state(lazaret, senv, "verify")
    assert r.returncode == 1
    assert "ERRORS FOUND" in r.stdout.splitlines()[-1]
    # Nothing was repaired or deleted.
    assert (root / "junk").exists() and (root_of(senv, bad) / "domain.db").read_bytes().startswith(b"not a")
    # reset refuses a Domain whose store is not its own.
    r = state(lazaret, senv, "reset", fake, "--yes")
    assert r.returncode == 1 and "refusing" in r.stderr
    assert (root_of(senv, fake) / "anchor-1" / "upper" / "root" / "old").exists()


# ---- running Domains ----


def test_running_domain_is_not_touched(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    # A session that lasts until its stdin closes.
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo started; exec cat"], cwd=ws,
                         env=senv.environ(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Its command runs, so its Domain is published (the last step of a
        # start). Before that the Domain's lock is held and its socket is
        # not there yet, which reset takes for a Domain that is stopping: it
        # waited for that (30 s) and only then refused.
        ready, _, _ = select.select([p.stdout], [], [], 60)
        line = p.stdout.readline() if ready else b"(nothing in 60 s)"
        assert line == b"started\n", line
        assert wait_until(lambda: listed(lazaret, senv)[did]["running"], timeout=60, interval=0.2)
        d = listed(lazaret, senv)[did]
        assert d["profile"] == "test" and d["workspace"] == str(ws)  # from coordinator.log
        r = state(lazaret, senv, "reset", did[:8], "--yes")
        assert r.returncode == 1
        assert f"Domain {did[:12]} is running with sessions; exit them (or run `lazaret stop`) first" in r.stderr, r.stderr
        r = state(lazaret, senv, "reset", "--all", "--yes")
        assert r.returncode == 1 and f"Domain {did[:12]} is running with sessions; skipped" in r.stderr, r.stderr
        r = state(lazaret, senv, "verify")
        assert r.returncode == 0, r.stdout
        assert "running; not verified" in r.stdout and "(1 running, not verified)" in r.stdout
        info, r = state_json(lazaret, senv, "inspect", did)
        assert r.returncode == 0 and info["running"] is True and info["generations"] == []
        r = state(lazaret, senv, "ls")
        assert re.search(rf"^{did[:12]}\s+test\s+yes\s+now\b", r.stdout, re.M), r.stdout
    finally:
        end_session(p)
    assert_kept_after_stop(lazaret, senv, ws, did)


def test_reset_during_a_start_refuses_as_soon_as_the_domain_runs(lazaret, senv, tmp_path):
    """A start holds the Domain's lock before its socket exists (publication
    is its last step), as a stopping Domain does once it removed its socket.
    A reset that comes in that window must not wait out its 30 s bound for
    a Domain that then runs with a session, but refuse it as soon as its
    socket is there. The start is held back 4 s (LAZARET_TEST_NET_DELAY_MS:
    the network policy's install waits) so that the reset comes in it."""
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo started; exec cat"], cwd=ws,
                         env=senv.environ(LAZARET_TEST_NET_DELAY_MS="4000"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The lock is taken (`ls` says running) while the start waits.
        assert wait_until(lambda: listed(lazaret, senv)[did]["running"], timeout=60, interval=0.05)
        started = time.monotonic()
        r = state(lazaret, senv, "reset", did[:8], "--yes")
        took = time.monotonic() - started
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert f"Domain {did[:12]} is running with sessions" in r.stderr, r.stderr
        # Refused once the Domain was up, not after the 30 s bound (which
        # the reset waited out before, then refused the same way).
        assert took < 20, f"the reset took {took:.1f} s"
        ready, _, _ = select.select([p.stdout], [], [], 60)
        line = p.stdout.readline() if ready else b"(nothing in 60 s)"
        assert line == b"started\n", line
    finally:
        end_session(p)
    assert_kept_after_stop(lazaret, senv, ws, did)


def test_reset_right_after_run_returns_is_not_refused(lazaret, senv, tmp_path):
    """`lazaret run -- X; lazaret state reset ID`: the run's client has its
    exit status, and the coordinator (no linger here) is about to stop, but
    its socket is still there for a moment. A reset that asks it then is
    left unanswered and sees the connection close as the coordinator ends:
    that is a stop, not "running with sessions". The test hook holds the
    coordinator in that window (before it removes its socket) for 1.5 s;
    before the fix the reset was refused."""
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    for args in ([did, "--yes"], ["--ignored-only", did, "--yes"], ["--all", "--yes"]):
        r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=ws,
                           env=senv.environ(LAZARET_TEST_EXIT_PAUSE_MS="1500"), capture_output=True,
                           timeout=STATE_TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert listed(lazaret, senv)[did]["running"]  # the window is open
        r = state(lazaret, senv, "reset", *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        assert "running with sessions" not in r.stderr, (args, r.stderr)
        assert f"{did[:12]}" in r.stdout, (args, r.stdout)


def test_interrupted_generation_is_reported_then_recovered(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    # The Host Coordinator dies (SIGKILL) once its generation is running.
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=ws,
                       env=senv.environ(LAZARET_TEST_CRASH="running"), capture_output=True, timeout=120)
    assert r.returncode != 0
    wait_inactive(lazaret, senv, did)  # its lock died with it
    verdict, r = state_json(lazaret, senv, "verify", did)
    assert r.returncode == 0, r.stdout  # a warning: the next run recovers it
    msgs = [f["message"] for f in verdict["domains"][0]["findings"] if f["severity"] == "warn"]
    assert any(m.startswith("generation 2 was left running (interrupted): the next `lazaret run` in this "
                            "Domain recovers it; recorded processes: sandbox supervisor pid") for m in msgs), msgs
    info, _ = state_json(lazaret, senv, "inspect", did)
    gen = info["generations"][-1]
    assert gen["generation"] == 2 and gen["state"] == "running"
    roles = {p["role"]: p["state"] for p in gen["participants"]}
    assert roles["prepared_lower"] == "lease_held" and roles["state_anchor"] == "prepared"
    assert any(p["role"] == "sandbox" and p["slot"] == "supervisor" for p in gen["processes"])
    assert [(l["generation"], len(l["artifact_id"])) for l in info["leases"]] == [(2, 64)]
    r = state(lazaret, senv, "inspect", did)
    assert "interrupted: the next `lazaret run` in this Domain recovers it" in r.stdout
    # reset recovers it first (exact processes, lease released), then resets.
    r = state(lazaret, senv, "reset", did, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recovery: generation 2 is clean" in r.stdout
    verdict, r = state_json(lazaret, senv, "verify", did)
    assert r.returncode == 0 and verdict["warnings"] == 0, verdict
    info, _ = state_json(lazaret, senv, "inspect", did)
    assert info["leases"] == [] and [g["state"] for g in info["generations"]] == ["clean", "clean"]
    assert run_ok(lazaret, senv, ws, "cat /root/old 2>/dev/null || echo none") == "none\n"


# ---- reset ----


def test_reset_deletes_persistent_state(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    # Also content of a non-root sandbox user (a subordinate ID on the
    # host) in a directory the host user may not write, and a mode-000 dir.
    did = used_domain(lazaret, senv, ws,
                      "echo kept > /root/old && mkdir -p /root/u/v /root/z && echo s > /root/u/v/f && "
                      "chown -R 1000:1000 /root/u && chmod 500 /root/u/v && chmod 000 /root/z")
    assert run_ok(lazaret, senv, ws, "cat /root/old") == "kept\n"
    wait_inactive(lazaret, senv, did)
    r = state(lazaret, senv, "reset", did[:8], "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{did[:12]}: reset" in r.stdout
    assert sorted(p.name for p in root_of(senv, did).glob("anchor-*")) == ["anchor-2"]
    assert list((root_of(senv, did) / "overlay").iterdir()) == []
    out = run_ok(lazaret, senv, ws, "ls -A /root; test ! -e /root/old && echo gone")
    assert out == "gone\n"
    wait_inactive(lazaret, senv, did)
    r = state(lazaret, senv, "verify", did)
    assert r.returncode == 0 and "0 warnings" in r.stdout, r.stdout


def test_reset_asks_first(lazaret, senv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    # No terminal and no --yes: refused, nothing deleted.
    r = state(lazaret, senv, "reset", did)
    assert r.returncode == 2 and "pass --yes" in r.stderr
    assert (root_of(senv, did) / "anchor-1" / "upper" / "root" / "old").exists()
    # On a terminal: asks; "n" keeps everything, "y" resets.
    for answer, status in (("n", 1), ("y", 0)):
        c = pexpect.spawn(lazaret, ["state", "reset", did[:8], "-p", "test"], cwd=str(senv.base),
                          env=senv.environ(), encoding="utf-8", timeout=STATE_TIMEOUT)
        c.expect(re.escape("Reset 1 Domain(s)? [y/N]"))
        c.sendline(answer)
        c.expect(pexpect.EOF)
        c.close()
        assert c.exitstatus == status, c.before
    assert not (root_of(senv, did) / "anchor-1").exists()
    assert run_ok(lazaret, senv, ws, "test ! -e /root/old && echo gone") == "gone\n"


def test_reset_all(lazaret, senv, tmp_path):
    a_ws, b_ws = make_git_repo(tmp_path / "a"), make_git_repo(tmp_path / "b")
    a, b = used_domain(lazaret, senv, a_ws), used_domain(lazaret, senv, b_ws)
    r = state(lazaret, senv, "reset", "--all", "--yes")
    assert r.returncode == 0, r.stderr
    assert "2 of 2 Domains reset" in r.stdout
    for did in (a, b):
        assert sorted(p.name for p in root_of(senv, did).glob("anchor-*")) == ["anchor-2"]


@pytest.mark.parametrize("point", ["reset-created", "reset-committed", "reset-deleted"])
def test_interrupted_reset(lazaret, senv, tmp_path, point):
    ws = make_git_repo(tmp_path / "ws")
    did = used_domain(lazaret, senv, ws)
    root = root_of(senv, did)
    r = state(lazaret, senv, "reset", did, "--yes", extra_env={"LAZARET_TEST_CRASH": point})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout, r.stderr)

    # verify reports what was left, as warnings (the Domain is usable).
    verdict, r = state_json(lazaret, senv, "verify", did)
    assert r.returncode == 0, r.stdout
    msgs = [f["message"] for f in verdict["domains"][0]["findings"] if f["severity"] == "warn"]
    if point == "reset-created":
        # Crash before the switch: the old State Anchor is still in use.
        assert any("anchor-2 is not the current State Anchor (anchor-1)" in m for m in msgs), msgs
        assert (root / "anchor-1" / "upper" / "root" / "old").exists()
    elif point == "reset-committed":
        assert any("left the old State Anchor anchor-1 to delete" in m for m in msgs), msgs
        assert (root / "anchor-1").exists()
    else:
        assert any("deleted anchor-1 but did not record it" in m for m in msgs), msgs
        assert not (root / "anchor-1").exists()
    info, _ = state_json(lazaret, senv, "inspect", did)
    assert info["anchor"]["generation"] == (1 if point == "reset-created" else 2)
    assert info["anchor"]["reset_intent"] == (None if point == "reset-created" else "anchor-1")
    # The Domain works in between, on the State Anchor the store names.
    out = run_ok(lazaret, senv, ws, "cat /root/old 2>/dev/null || echo none")
    assert out == ("kept\n" if point == "reset-created" else "none\n")
    wait_inactive(lazaret, senv, did)

    # A second reset completes the interrupted one and resets.
    r = state(lazaret, senv, "reset", did, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    if point == "reset-created":
        assert "deleted anchor-2, the leftover of an interrupted reset" in r.stdout
    else:
        assert "finished an interrupted reset" in r.stdout
    assert [p.name for p in root.glob("anchor-*")] == ["anchor-%d" % (2 if point == "reset-created" else 3)]
    verdict, r = state_json(lazaret, senv, "verify", did)
    assert r.returncode == 0 and verdict["warnings"] == 0, verdict
    info, _ = state_json(lazaret, senv, "inspect", did)
    assert info["anchor"]["reset_intent"] is None
    assert run_ok(lazaret, senv, ws, "cat /root/old 2>/dev/null || echo none; echo works") == "none\nworks\n"


def test_usage_errors(lazaret, senv):
    for args, msg in ((["reset"], "which Domain"), (["inspect"], "expects one Domain"),
                      (["ls", "abcd"], "takes no Domain"), (["reset", "--all", "abcd", "--yes"], "not both"),
                      (["verify", "--yes"], "does not apply"), (["frob"], "unknown subcommand")):
        r = state(lazaret, senv, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr, (args, r.stderr)


def test_verify_during_start_stop_storm_reports_no_error(lazaret, senv, tmp_path):
    """Four workspaces whose Domains start and stop over and over (each a
    loop of `lazaret run -- sleep 2`, staggered) while `state verify` runs
    back to back: a healthy machine never gets an error. (verify compared
    a catalog read at the start of its run with Domain Stores read later,
    and took a generation that ended meanwhile for an orphan lease.)"""
    import threading
    wss = [make_git_repo(tmp_path / f"ws{i}") for i in range(4)]
    stop = threading.Event()
    failures = []

    def loop(ws, delay):
        time.sleep(delay)
        while not stop.is_set():
            r = subprocess.run([lazaret, "run", "-p", "test", "--", "sleep", "2"], cwd=ws, env=senv.environ(),
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
            if r.returncode != 0:
                failures.append(r.stderr.decode(errors="replace"))
                return

    threads = [threading.Thread(target=loop, args=(ws, 0.5 * i)) for i, ws in enumerate(wss)]
    for t in threads:
        t.start()
    verifies = 0
    bad = None
    try:
        end = time.monotonic() + 25
        while time.monotonic() < end and not failures:
            r = state(lazaret, senv, "verify")
            verifies += 1
            if r.returncode != 0 or any(ln.lstrip().startswith("error") for ln in r.stdout.splitlines()):
                bad = f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=180)
    assert not failures, failures[0]
    assert bad is None, f"verify reported an error on a healthy machine after {verifies} runs:\n{bad}"
    assert verifies >= 10, "verify ran too rarely to mean anything"

    # Control: the same verify does see a real orphan lease (one whose
    # Domain has no Domain Root), so its silence above means something.
    db = str(Path(senv.storage) / "catalog.db")
    sql = ("insert into leases (artifact_id, domain_id, generation, created_ms) "
           "select artifact_id, '" + "f" * 64 + "', 7, 0 from artifacts limit 1")
    # A busy timeout (bounded): the storm's last coordinators may still be
    # writing the catalog (sqlite3 exited 5, SQLITE_BUSY, under load).
    subprocess.run(["sqlite3", "-cmd", ".timeout 10000", db, sql], check=True, capture_output=True, timeout=30)
    r = state(lazaret, senv, "verify")
    assert r.returncode != 0 and "orphan lease" in r.stdout + r.stderr, r.stdout + r.stderr
    subprocess.run(["sqlite3", "-cmd", ".timeout 10000", db, "delete from leases where domain_id = '" + "f" * 64 + "'"], check=True,
                   capture_output=True, timeout=30)


def test_reset_all_stops_a_lingering_domain_and_skips_one_with_sessions(lazaret, senv, tmp_path):
    """--all takes a Domain that only lingers after its last session (it is
    stopped, then reset) and leaves one with a session alone."""
    senv.write_config(extra_profile='persistent_dirs = ["/root"]', linger=600)
    idle, busy = make_git_repo(tmp_path / "idle"), make_git_repo(tmp_path / "busy")
    run_ok(lazaret, senv, idle, "echo kept > /root/old")
    idle_id = domain_id(lazaret, senv, idle)
    assert listed(lazaret, senv)[idle_id]["running"]  # lingering
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "cat"], cwd=busy, env=senv.environ(),
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def serving():
            out = subprocess.run([lazaret, "ps", "--json"], cwd=busy, env=senv.environ(), capture_output=True,
                                 text=True, timeout=STATE_TIMEOUT).stdout
            return any(d["sessions"] and d["workspace"] == str(busy) for d in json.loads(out or "[]"))
        assert wait_until(serving, timeout=60)
        busy_id = domain_id(lazaret, senv, busy)
        r = state(lazaret, senv, "reset", "--all", "--yes")
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert f"{idle_id[:12]}: reset" in r.stdout, r.stdout
        assert f"Domain {busy_id[:12]} is running with sessions; skipped" in r.stderr, r.stderr
        assert f"{busy_id[:12]}: reset" not in r.stdout
        assert p.poll() is None, "the session was ended"
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    subprocess.run([lazaret, "stop", "-p", "test"], cwd=busy, env=senv.environ(), capture_output=True,
                   timeout=STATE_TIMEOUT)
    wait_inactive(lazaret, senv, busy_id)
    assert run_ok(lazaret, senv, idle, "cat /root/old 2>&1 || true") != "kept\n"
    subprocess.run([lazaret, "stop", "-p", "test"], cwd=idle, env=senv.environ(), capture_output=True,
                   timeout=STATE_TIMEOUT)
    wait_inactive(lazaret, senv, idle_id)


def test_reset_right_after_the_last_session_waits_for_the_teardown(lazaret, senv, tmp_path):
    """`lazaret run -- X; lazaret state reset ID` works even while the
    coordinator is still tearing down (its socket gone, its lock held): the
    test hook holds the teardown there for 2 s."""
    ws = make_git_repo(tmp_path / "ws")
    run_ok(lazaret, senv, ws, "echo kept > /root/old")
    did = domain_id(lazaret, senv, ws)
    wait_inactive(lazaret, senv, did)
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=ws,
                       env=senv.environ(LAZARET_TEST_TEARDOWN_PAUSE_MS="2000"), capture_output=True,
                       timeout=STATE_TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert listed(lazaret, senv)[did]["running"]  # the lock is still held: the window is open
    r = state(lazaret, senv, "reset", did, "--yes")
    assert r.returncode == 0, r.stderr
    assert f"{did[:12]}: reset" in r.stdout
    # The same through --all (which skips Domains that really run).
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=ws,
                       env=senv.environ(LAZARET_TEST_TEARDOWN_PAUSE_MS="2000"), capture_output=True,
                       timeout=STATE_TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert listed(lazaret, senv)[did]["running"]
    r = state(lazaret, senv, "reset", "--all", "--yes")
    assert r.returncode == 0, r.stderr
    assert f"{did[:12]}: reset" in r.stdout and "skipped" not in r.stderr, (r.stdout, r.stderr)
    # Control: a Domain that really runs (a session in it) is refused at once.
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sleep", "30"], cwd=ws, env=senv.environ(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def serving():  # its socket answers, with the session in it
            out = subprocess.run([lazaret, "ps", "--json"], cwd=ws, env=senv.environ(), capture_output=True,
                                 text=True, timeout=STATE_TIMEOUT).stdout
            return any(d["sessions"] for d in json.loads(out or "[]"))
        assert wait_until(serving, timeout=30)
        t = time.monotonic()
        r = state(lazaret, senv, "reset", did, "--yes")
        assert r.returncode != 0 and "is running" in r.stderr, r.stderr
        assert time.monotonic() - t < 10
    finally:
        p.kill()
        p.wait(timeout=30)
    wait_inactive(lazaret, senv, did)
