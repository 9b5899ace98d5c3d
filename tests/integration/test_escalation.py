"""Host escalation, auto-approved requests (docs/escalation.md).

The Escalation Client (/run/lazaret/escalate, static) runs inside the
busybox sandbox; auto-approval rules come from the test hook
LAZARET_TEST_AUTO_APPROVE (test builds only: rules separated by \\x1e,
argv elements by \\x1f, a leading "+" element = allow_extra_args), which
the client's environment hands to the coordinator."""
import hashlib
import re
import os
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from conftest import domain_dir_for, lz_run, of_this_worker, user_processes, wait_until

ESC = "/run/lazaret/escalate"
ECHO = os.path.realpath("/bin/echo")
SH = os.path.realpath("/bin/sh")
FALSE = os.path.realpath("/bin/false")
SLEEP = os.path.realpath("/bin/sleep")
CAT = os.path.realpath("/bin/cat")
TRUE = os.path.realpath("/bin/true")
SHA256SUM = os.path.realpath("/usr/bin/sha256sum")
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def rules(*rs):
    return "\x1e".join("\x1f".join(r) for r in rs)


def run_esc(lazaret, env, workspace, argv, rule_spec, timeout=120, esc_args=()):
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=rule_spec, LAZARET_DEBUG="1")
    cmd = [lazaret, "run", "-p", "test", "--", ESC, *esc_args, "--", *argv]
    return subprocess.run(cmd, cwd=workspace, env=e, capture_output=True, timeout=timeout)


def audit_rows(lazaret, env, workspace):
    """`lazaret audit --json` of the workspace's test Domain: its rows, the
    chain checked intact."""
    import json
    r = subprocess.run([lazaret, "audit", "-p", "test", "--json"], cwd=workspace, env=env.environ(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["intact"] is True, doc
    return doc["rows"]


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


def host_procs(argv_prefix):
    """PIDs of our own processes whose argv starts with argv_prefix (under
    pytest-xdist: of this worker's tests)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if p.stat().st_uid != os.getuid():
                continue
            a = (p / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if [x.decode(errors="replace") for x in a[:len(argv_prefix)]] == list(argv_prefix) \
                and of_this_worker(int(p.name)):
            out.append(int(p.name))
    return out


def test_auto_approved_runs_and_status_propagates(lazaret, env, workspace):
    spec = rules([ECHO, "hello"], [SH, "-c", "exit 7"], [FALSE])
    r = run_esc(lazaret, env, workspace, [ECHO, "hello"], spec)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello\n"
    assert b"host commands:" not in r.stderr  # the login message is for interactive shells only
    # The hook reached the coordinator, and the transitions carry the model's names.
    log = coord_log(env, workspace)
    assert "auto-approval rule(s) from a test hook" in log
    for action in ("CreateTrustAnchor", "ReceiveEscalation", "AutoApprove", "StartHostExecutionPiped",
                   "CompleteHostExecution"):
        assert f"debug: model {action}(" in log, action
    assert log.index("model ReceiveEscalation(") < log.index("model AutoApprove(") \
        < log.index("model StartHostExecutionPiped(") < log.index("model CompleteHostExecution(")
    r = run_esc(lazaret, env, workspace, [SH, "-c", "exit 7"], spec)
    assert r.returncode == 7, r.stderr
    r = run_esc(lazaret, env, workspace, [FALSE], spec)
    assert r.returncode == 1, r.stderr
    # Each request has its audit row: decided by which rule, what ran, how it ended.
    rows = audit_rows(lazaret, env, workspace)
    assert [(w["decided_by"], w["decided_ref"], w["decision"], w["end_state"]) for w in rows] == \
        [("rule", 1, "auto-approved", "completed"), ("rule", 2, "auto-approved", "completed"),
         ("rule", 3, "auto-approved", "completed")], rows
    assert [w["argv"] for w in rows] == [[ECHO, "hello"], [SH, "-c", "exit 7"], [FALSE]]
    assert [w["exit_status"] for w in rows] == [0, 7, 1]
    assert [w["output_bytes"] for w in rows] == [6, 0, 0]
    assert rows[0]["executable"] == ECHO and rows[0]["edited_argv"] is None
    assert rows[0]["executable_sha256"] == hashlib.sha256(Path(ECHO).read_bytes()).hexdigest()
    # No cwd = "workspace" in the rule: a fresh empty directory of the
    # coordinator's, not the workspace (test_autoapprove_cwd.py).
    assert "/hostcwd/run-" in rows[0]["cwd"] and not rows[0]["cwd"].startswith(os.path.realpath(workspace))


def test_ten_mib_through_the_window(lazaret, env, workspace, tmp_path):
    data = os.urandom(10 * 1024 * 1024)
    f = tmp_path / "blob"
    f.write_bytes(data)
    spec = rules([CAT, str(f)])
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=spec)
    cmd = [lazaret, "run", "-p", "test", "--", "sh", "-c",
           f"{ESC} -- {CAT} {f} | sha256sum; echo rc=$?"]
    r = subprocess.run(cmd, cwd=workspace, env=e, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(data).hexdigest().encode() in r.stdout, (r.stdout, r.stderr)
    log = coord_log(env, workspace)
    assert re.search(r"ended Completed \(exit 0, signal 0, \d+ chunks, 10485760 bytes\)", log), log[-2000:]


def test_unmatched_is_denied(lazaret, env, workspace):
    r = run_esc(lazaret, env, workspace, [ECHO, "not", "a", "rule"], rules([ECHO, "hello"]))
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert b"denied" in r.stderr
    assert r.stdout == b""
    # A session without a terminal (pipes) cannot be asked: denied, and said so.
    assert b"no terminal to ask on" in r.stderr, r.stderr
    log = coord_log(env, workspace)
    assert "no terminal to prompt on (pipes); denied" in log
    assert "debug: model QueuePrompt(" in log and "debug: model DenyWithoutPrompt(" in log
    assert "StartHostExecution" not in log


def test_extra_argument_and_relative_argv0(lazaret, env, workspace):
    spec = rules([ECHO, "hi"], ["+", TRUE, "a"])
    r = run_esc(lazaret, env, workspace, [ECHO, "hi", "extra"], spec)
    assert r.returncode == 125
    r = run_esc(lazaret, env, workspace, [TRUE, "a", "extra"], spec)  # allow_extra_args
    assert r.returncode == 0, r.stderr
    r = run_esc(lazaret, env, workspace, ["echo", "hi"], spec)  # relative: never
    assert r.returncode == 125
    r = run_esc(lazaret, env, workspace, [ECHO, "hi"], spec)  # positive control
    assert r.returncode == 0 and r.stdout == b"hi\n"


def spawn_tty(lazaret, env, workspace, spec):
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=spec, LAZARET_DEBUG="1")
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, timeout=60, encoding="utf-8",
                      dimensions=(24, 80))
    c.expect(r"[#$] ")
    return c


def test_ctrl_c_cancels_the_host_process(lazaret, env, workspace):
    # The client's output is piped, so the host command does not get the
    # terminal (that case: test_host_command_gets_the_session_terminal):
    # Ctrl-C reaches the sandbox's foreground job, the client cancels.
    c = spawn_tty(lazaret, env, workspace, rules([SLEEP, "30"]))
    c.sendline(f"{ESC} -- {SLEEP} 30 | cat")
    assert wait_until(lambda: host_procs([SLEEP, "30"]), timeout=30), (c.before, coord_log(env, workspace)[-3000:])
    pids = host_procs([SLEEP, "30"])
    c.sendintr()
    c.expect("lazaret-escalate: cancelled")
    assert wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), timeout=10)
    c.sendline("exit")
    c.expect(pexpect.EOF)
    log = coord_log(env, workspace)
    assert "debug: model CancelRequest(" in log


def test_disconnect_kills_the_host_process(lazaret, env, workspace):
    c = spawn_tty(lazaret, env, workspace, rules([SLEEP, "31"]))
    c.sendline(f"{ESC} -- {SLEEP} 31")
    assert wait_until(lambda: host_procs([SLEEP, "31"]), timeout=30)
    c.kill(signal.SIGKILL)  # the `lazaret run` client dies
    assert wait_until(lambda: not host_procs([SLEEP, "31"]), timeout=15)


def test_coordinator_kill9_leaves_no_host_process(lazaret, env, workspace):
    c = spawn_tty(lazaret, env, workspace, rules([SLEEP, "32"]))
    c.sendline(f"{ESC} -- {SLEEP} 32")
    assert wait_until(lambda: host_procs([SLEEP, "32"]), timeout=30)
    coords = user_processes("lazaret-core __coordinator")
    assert len(coords) == 1, coords
    os.kill(coords[0], signal.SIGKILL)
    c.expect(pexpect.EOF, timeout=30)
    # The next start of the Domain recovers: the recorded host process is ended.
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode == 0, r.stderr
    assert not host_procs([SLEEP, "32"])
    log = coord_log(env, workspace)
    assert "hostexec0 process" in log, log[-3000:]


# ---- forged and hostile records -------------------------------------------------

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes(b):
    return _varint(len(b)) + b


def request_record(sk_seed, rid, sid, argv, created_ms=None, expires_ms=None, sign=True):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    now = int(time.time() * 1000)
    created_ms = now if created_ms is None else created_ms
    expires_ms = now + 60000 if expires_ms is None else expires_ms
    p = rid + sid + _varint(created_ms) + _varint(expires_ms) + _varint(len(argv))
    for a in argv:
        p += _bytes(a.encode())
    p += _bytes(b"/workspace") + _bytes(b"forged") + _varint(0) + b"\x00\x00"  # stdin, terminal
    ctx = b"lazaret/v1/escalation-request\x00" + len(p).to_bytes(4, "little") + p
    sig = Ed25519PrivateKey.from_private_bytes(sk_seed).sign(ctx) if sign else bytes(64)
    return bytes([1, 1]) + sig + p


def session_keys(c):
    c.sendline('echo "SID=$LAZARET_SESSION_ID" "KEY=$LAZARET_SESSION_KEY" END')
    c.expect(r"SID=([0-9a-f]{32}) KEY=([0-9a-f]{128}) END")
    return bytes.fromhex(c.match.group(1)), bytes.fromhex(c.match.group(2))[:32]


def mailbox_req(env, workspace):
    """req/ as the sandbox has it: a tmpfs in the Domain's mount namespace
    (mailbox.h), reached through the Supervisor's /proc/PID/root; the
    runtime directory holds only its mount point."""
    hits = list((Path(env.runtime) / "lazaret").glob("*/mailbox/req"))
    assert len(hits) == 1, hits
    pids = re.findall(r"Runtime Supervisor started \(pid (\d+)\)", coord_log(env, workspace))
    return Path(f"/proc/{pids[-1]}/root{hits[0]}")


def drop(req, rid, data):
    tmp = req / (".tmp-" + rid.hex())
    tmp.write_bytes(data)
    tmp.rename(req / f"{rid.hex()}.escalation-request.0")


def test_hostile_records_are_rejected(lazaret, env, workspace):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives import serialization
    a = spawn_tty(lazaret, env, workspace, rules([ECHO, "forged-ok"]))
    b = spawn_tty(lazaret, env, workspace, rules([ECHO, "forged-ok"]))
    sid_a, sk_a = session_keys(a)
    sid_b, sk_b = session_keys(b)
    other = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                        serialization.NoEncryption())
    req = mailbox_req(env, workspace)
    argv = [ECHO, "forged-ok"]
    log = lambda: coord_log(env, workspace)  # noqa: E731

    # Positive control: a correctly signed request of session A runs.
    good = os.urandom(16)
    rec = request_record(sk_a, good, sid_a, argv)
    drop(req, good, rec)
    assert wait_until(lambda: f"request {good.hex()[:12]}: running" in log(), timeout=10), log()[-2000:]

    now = int(time.time() * 1000)
    cases = {
        "malformed": (os.urandom(16), lambda rid: os.urandom(300)),
        "oversized": (os.urandom(16), lambda rid: request_record(sk_a, rid, sid_a, argv) + bytes(70000)),
        "truncated": (os.urandom(16), lambda rid: request_record(sk_a, rid, sid_a, argv)[:-5]),
        "unsigned": (os.urandom(16), lambda rid: request_record(sk_a, rid, sid_a, argv, sign=False)),
        "wrong key": (os.urandom(16), lambda rid: request_record(other, rid, sid_a, argv)),
        "expired": (os.urandom(16), lambda rid: request_record(sk_a, rid, sid_a, argv, now - 600000, now - 300000)),
        "cross-session": (os.urandom(16), lambda rid: request_record(sk_b, rid, sid_a, argv)),
        "unknown session": (os.urandom(16), lambda rid: request_record(sk_a, rid, os.urandom(16), argv)),
    }
    for name, (rid, make) in cases.items():
        drop(req, rid, make(rid))
    drop(req, good, rec)  # replayed: the same request ID again
    assert wait_until(lambda: log().count("escalation: rejected") + log().count("refused mailbox entry")
                      >= len(cases) + 1, timeout=10), log()[-4000:]
    text = log()
    for name, (rid, _) in cases.items():
        assert f"request {rid.hex()[:12]}: running" not in text, name
        assert rid.hex() in text, (name, text[-3000:])
    assert "replayed request ID" in text
    assert "expired" in text
    assert "larger than a record may be" in text
    assert text.count(f"request {good.hex()[:12]}: running") == 1
    assert not list(req.iterdir())

    # Entries that are not regular files with one link, dropped from inside.
    base = "/run/lazaret/mailbox/req/"
    names = [os.urandom(16).hex() + ".escalation-request.0" for _ in range(4)]
    a.sendline(f"ln -s /etc/passwd {base}{names[0]}; mkfifo {base}{names[1]}; mkdir {base}{names[2]}; "
               f"echo x > /tmp/f; ln /tmp/f {base}{names[3]} 2>/dev/null || cp /tmp/f {base}.x; echo DR''OPPED")
    a.expect("DROPPED")
    assert wait_until(lambda: log().count("refused mailbox entry") >= 3, timeout=10), log()[-3000:]
    text = log()
    assert "a symbolic link" in text and "not a regular file" in text
    assert wait_until(lambda: not [n for n in names[:3] if (req / n).exists() or (req / n).is_symlink()], timeout=10)
    # The coordinator is alive and the sessions are interactive.
    a.sendline("echo AL''IVE")
    a.expect("ALIVE")
    for c in (a, b):
        c.sendline("exit")
        c.expect(pexpect.EOF)


# ---- --stdin (docs/escalation.md, "stdin") ------------------------------------

def sandbox_sh(lazaret, env, workspace, script, spec, timeout=300):
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=spec, LAZARET_DEBUG="1")
    cmd = [lazaret, "run", "-p", "test", "--", "sh", "-c", script]
    return subprocess.run(cmd, cwd=workspace, env=e, capture_output=True, timeout=timeout)


def test_stdin_streams_through_the_window(lazaret, env, workspace):
    """More than the window (8 chunks of 48 KiB) of stdin reaches the host
    command in order; without --stdin it reads nothing (the positive
    control for the digest: the same pipeline with --stdin gets the data)."""
    data = os.urandom(4 * 1024 * 1024 + 12345)
    (workspace / "blob").write_bytes(data)
    spec = rules([SHA256SUM])
    r = sandbox_sh(lazaret, env, workspace, f"cat /workspace/blob | {ESC} --stdin -- {SHA256SUM}; echo rc=$?", spec)
    assert r.returncode == 0, r.stderr
    assert f"{hashlib.sha256(data).hexdigest()}  -".encode() in r.stdout, (r.stdout, r.stderr)
    assert b"rc=0" in r.stdout
    log = coord_log(env, workspace)
    m = re.search(r"stdin: (\d+) bytes in (\d+) chunks to the host process, to its end; 0 bytes dropped", log)
    assert m, log[-3000:]
    assert int(m.group(1)) == len(data) and int(m.group(2)) > 8, m.group(0)
    # Without --stdin: /dev/null, whatever the client's stdin holds.
    r = sandbox_sh(lazaret, env, workspace, f"cat /workspace/blob | {ESC} -- {SHA256SUM}; echo rc=$?", spec)
    assert r.returncode == 0, r.stderr
    assert f"{EMPTY_SHA256}  -".encode() in r.stdout, (r.stdout, r.stderr)
    # A closed stdin is the end of input at once; an empty one too.
    r = sandbox_sh(lazaret, env, workspace, f"{ESC} --stdin -- {SHA256SUM} <&-; echo rc=$?", spec, timeout=120)
    assert f"{EMPTY_SHA256}  -".encode() in r.stdout and b"rc=0" in r.stdout, (r.stdout, r.stderr)
    r = sandbox_sh(lazaret, env, workspace, f"{ESC} --stdin -- {SHA256SUM} </dev/null; echo rc=$?", spec,
                   timeout=120)
    assert f"{EMPTY_SHA256}  -".encode() in r.stdout and b"rc=0" in r.stdout, (r.stdout, r.stderr)


def test_stdin_host_command_that_does_not_read(lazaret, env, workspace):
    """A host command that exits without reading its stdin ends the request
    promptly with its status; the rest of the input is dropped, nothing
    waits for it."""
    spec = rules([TRUE])
    t0 = time.monotonic()
    r = sandbox_sh(lazaret, env, workspace,
                   f"head -c 50000000 /dev/zero | {ESC} --stdin -- {TRUE}; echo rc=$?", spec, timeout=120)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert b"rc=0" in r.stdout, (r.stdout, r.stderr)
    # 50 MB through the stream would take far longer than the request does.
    assert elapsed < 60, elapsed
    log = coord_log(env, workspace)
    assert re.search(r"ended Completed \(exit 0, signal 0", log), log[-3000:]
    assert "not to its end" in log, log[-3000:]


def stdin_record(sk_seed, rid, sid, seq, data, eof=False):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    p = rid + sid + _varint(seq) + _bytes(data) + (b"\x01" if eof else b"\x00")
    ctx = b"lazaret/v1/stdin-chunk\x00" + len(p).to_bytes(4, "little") + p
    return bytes([1, 8]) + Ed25519PrivateKey.from_private_bytes(sk_seed).sign(ctx) + p


def drop_stdin(req, rid, seq, data):
    tmp = req / (".tmp-" + os.urandom(8).hex())
    tmp.write_bytes(data)
    tmp.rename(req / f"{rid.hex()}.stdin-chunk.{seq}")


def test_stdin_hostile_records(lazaret, env, workspace):
    """stdin-chunks with another key, out of the window, already taken, too
    large or malformed are rejected and the stream goes on; the positive
    control: a chunk signed with the session's key is taken (any process of
    the sandbox can hold that key, docs/escalation.md)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives import serialization
    a = spawn_tty(lazaret, env, workspace, rules([SHA256SUM]))
    sid, sk = session_keys(a)
    other = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                        serialization.NoEncryption())
    req = mailbox_req(env, workspace)
    res = req.parent / "res"
    log = lambda: coord_log(env, workspace)  # noqa: E731
    a.sendline(f"(echo first; sleep 15; echo second; sleep 1) | {ESC} --stdin -- {SHA256SUM}; echo rc=$?")
    assert wait_until(lambda: list(res.glob("*.request-ack.0")), timeout=30), log()[-2000:]
    rid = bytes.fromhex(next(res.glob("*.request-ack.0")).name.split(".")[0])
    assert wait_until(lambda: f"request {rid.hex()[:12]}: running" in log(), timeout=10), log()[-2000:]

    def rejected(seq, why, count=1):
        return wait_until(lambda: sum(1 for line in log().splitlines()
                                      if f"{rid.hex()}.stdin-chunk.{seq}" in line and why in line) >= count,
                          timeout=10)

    # Another key at the next seq (1): taken once seq 0 ("first") went in, and refused.
    drop_stdin(req, rid, 1, stdin_record(other, rid, sid, 1, b"other key\n"))
    assert rejected(1, "signature does not verify"), log()[-3000:]
    drop_stdin(req, rid, 1, os.urandom(300))
    assert rejected(1, "rejected", 2), log()[-3000:]
    drop_stdin(req, rid, 2, stdin_record(sk, rid, sid, 2, b"x") + bytes(70000))
    assert rejected(2, "larger than a record may be"), log()[-3000:]
    drop_stdin(req, rid, 100, stdin_record(sk, rid, sid, 100, b"far ahead\n"))
    assert rejected(100, "outside the window"), log()[-3000:]
    drop_stdin(req, rid, 0, stdin_record(sk, rid, sid, 0, b"first again\n"))
    assert rejected(0, "already taken (duplicate)"), log()[-3000:]
    drop_stdin(req, rid, 1, stdin_record(sk, rid, sid, 2, b"named 1, says 2\n"))
    assert rejected(1, "the name does not match the record"), log()[-3000:]
    # Positive control: the session's key at the next seq is taken; the
    # client's own seq 1 ("second") then comes as a duplicate.
    drop_stdin(req, rid, 1, stdin_record(sk, rid, sid, 1, b"injected\n"))
    a.expect(r"rc=(\d+)", timeout=60)
    assert a.match.group(1) == "0", a.before
    assert hashlib.sha256(b"first\ninjected\n").hexdigest() in a.before, a.before
    text = log()
    assert sum(1 for line in text.splitlines() if f"{rid.hex()}.stdin-chunk.1" in line
               and "duplicate" in line) == 1, text[-3000:]
    assert "stdin: 15 bytes in 3 chunks to the host process, to its end" in text, text[-3000:]
    # The coordinator is alive, the session interactive, req/ empty.
    a.sendline("echo AL''IVE")
    a.expect("ALIVE")
    assert wait_until(lambda: not list(req.iterdir()), timeout=10), list(req.iterdir())
    a.sendline("exit")
    a.expect(pexpect.EOF)


def test_rules_from_the_configuration(lazaret, env, workspace):
    """[[escalation.auto_approve]] in the configuration file (no test hook):
    the exact argv runs; one more argument is not auto-approved (and, with
    no prompt wired in this build, denied)."""
    env.write_config(extra=f'[[escalation.auto_approve]]\nargv = ["{ECHO}", "from-config"]\n')
    e = env.environ(LAZARET_DEBUG="1")
    cmd = [lazaret, "run", "-p", "test", "--", ESC, "--", ECHO, "from-config"]
    r = subprocess.run(cmd, cwd=workspace, env=e, capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"from-config\n", r.stderr
    assert "1 auto-approval rule(s) from the configuration" in coord_log(env, workspace)
    r = subprocess.run(cmd + ["more"], cwd=workspace, env=e, capture_output=True, timeout=120)
    assert r.returncode == 125 and b"from-config" not in r.stdout, (r.stdout, r.stderr)


# ---- the prompt (docs/escalation.md, "The prompt") ----

SETTLING = "Keys are accepted in a moment"
ASKING = r"\[a\] approve once"


def spawn_prompt_session(lazaret, env, workspace):
    e = env.environ(LAZARET_DEBUG="1")
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, timeout=60, encoding="utf-8",
                      dimensions=(24, 100))
    c.expect(r"[#$] ")
    return c


def ask(c, cmd):
    """Runs cmd (an escalation with no rule) and returns once the prompt is
    drawn and settled (keys are decisions)."""
    c.sendline(f"{cmd}; echo rc=$?")
    c.expect(SETTLING, timeout=30)
    c.expect(ASKING, timeout=10)


def no_result(c, secs=1.5):
    """Nothing came back from the escalation (the prompt is still up)."""
    i = c.expect([r"rc=\d+", pexpect.TIMEOUT], timeout=secs)
    assert i == 1, c.before


def test_prompt_decisions(lazaret, env, workspace):
    a = spawn_prompt_session(lazaret, env, workspace)
    # Typed ahead: a key sent as soon as the prompt is drawn (settling) is
    # discarded and said so; it approves nothing.
    a.sendline(f"{ESC} -- /bin/echo hi; echo rc=$?")
    a.expect(SETTLING, timeout=30)
    a.send("a")
    a.expect("1 key typed before the prompt was ignored", timeout=10)
    a.expect(ASKING, timeout=10)
    no_result(a)
    a.send("a")
    a.expect(r"hi\r\nrc=0", timeout=30)
    a.expect(r"[#$] ")

    # [d] and Enter deny.
    ask(a, f"{ESC} -- /bin/echo no1")
    a.send("d")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "125"
    ask(a, f"{ESC} -- /bin/echo no2")
    a.send("\r")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "125"
    assert "no1\r\n" not in a.before and "no2\r\n" not in a.before

    # [e]: the edited argv is shown, settles again, and [a] runs it.
    ask(a, f"{ESC} -- /bin/echo hi")
    a.send("e")
    a.send("\x15/bin/echo edited\r")
    a.expect("This is your edit", timeout=10)
    a.send("a")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0"
    assert "edited\r\n" in a.before and "hi\r\n" not in a.before.replace("echo hi", ""), a.before

    # Escapes: an ESC sequence and U+202E in argv are shown as text.
    a.sendline(f"{ESC} -- /bin/echo \"$(printf 'X\\033[31mRED\\342\\200\\256Y')\"; echo rc=$?")
    a.expect(SETTLING, timeout=30)
    a.expect(ASKING, timeout=10)
    screen = a.before + a.after
    assert "\x1b[31m" not in screen, repr(screen)
    assert "\u202e" not in screen, repr(screen)
    assert "\\u{202E}" in screen, repr(screen)
    a.send("d")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "125"

    # While A shows a prompt, B (same Domain) stays interactive; cancelling
    # A's request from the sandbox (SIGINT to its Escalation Client) closes
    # A's prompt.
    ask(a, f"{ESC} -- /bin/echo waiting")
    b = spawn_prompt_session(lazaret, env, workspace)
    b.sendline("echo b-alive-$((40+2))")
    b.expect("b-alive-42", timeout=20)
    no_result(a, 0.5)
    # Output of the sandbox to A's terminal is held while the prompt is up
    # (more than the 64 KiB buffer: backpressure, nothing dropped) and
    # follows once the screen is restored.
    b.sendline("P=$(pidof escalate); (echo HELD-1; yes x | head -c 200000; echo HELD-END) > /proc/$P/fd/2 & "
               "echo bg=$?")
    b.expect("bg=0", timeout=20)
    no_result(a, 1.5)
    assert "HELD" not in a.before and "x\r\nx" not in a.before, a.before[-500:]
    b.sendline("kill -INT $P; echo sent=$?")
    b.expect("sent=0", timeout=20)
    a.expect("HELD-END", timeout=60)
    out = a.before
    assert "\x1b[?1049l" in out  # the screen was restored
    assert out.index("\x1b[?1049l") < out.index("HELD-1"), out[:2000]
    held = out[out.index("HELD-1"):]
    assert held.count("x") == 100000, held.count("x")
    if "rc=130" not in out:
        a.expect(r"rc=(\d+)", timeout=30)
        assert a.match.group(1) == "130"
    a.sendline("echo sync-$((1+2))")  # the shell's prompt may have come before HELD-END
    a.expect("sync-3", timeout=20)
    a.expect(r"[#$] ", timeout=10)

    # [s]: this exact request again in A runs without a prompt; in B it is asked.
    ask(a, f"{ESC} -- /bin/echo grant")
    a.send("s")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0"
    a.sendline(f"{ESC} -- /bin/echo grant; echo rc=$?")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0" and SETTLING not in a.before, a.before
    ask(b, f"{ESC} -- /bin/echo grant")
    b.send("d")
    b.expect(r"rc=(\d+)", timeout=30)
    assert b.match.group(1) == "125"
    b.sendline("exit")
    b.expect(pexpect.EOF, timeout=30)

    # Ctrl-C at the prompt cancels the request (130), as Ctrl-C in the
    # sandbox would; it is not a denial.
    ask(a, f"{ESC} -- /bin/echo ctrlc")
    a.send("\x03")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "130", a.before
    assert "ctrlc\r\n" not in a.before.replace("echo ctrlc", "")

    # [q]: denied, and the session ends.
    ask(a, f"{ESC} -- /bin/echo quit")
    a.send("q")
    a.expect(pexpect.EOF, timeout=30)
    log = coord_log(env, workspace)
    for action in ("QueuePrompt", "BeginPrompt", "PromptDrawn", "DiscardTypeahead", "DeveloperApprove",
                   "DeveloperDeny", "DeveloperEdit", "DeveloperApproveSession", "SessionApprove", "CancelRequest",
                   "DeveloperQuit"):
        assert f"debug: model {action}(" in log, action

    # The audit: every request, who decided, what, how it ended.
    rows = audit_rows(lazaret, env, workspace)
    got = [(w["argv"][1:], w["decided_by"], w["decision"], w["end_state"]) for w in rows]
    assert got == [
        (["hi"], "developer", "approved", "completed"),
        (["no1"], "developer", "denied", "denied"),
        (["no2"], "developer", "denied", "denied"),
        (["hi"], "developer", "edited", "completed"),
        (["X\\x1b[31mRED\\u{202E}Y"], "developer", "denied", "denied"),
        (["waiting"], "none", "none", "cancelled"),
        (["grant"], "developer", "approved-for-session", "completed"),
        (["grant"], "developer", "session-approved", "completed"),
        (["grant"], "developer", "denied", "denied"),
        (["ctrlc"], "developer", "none", "cancelled"),
        (["quit"], "developer", "denied", "denied"),
    ], got
    assert rows[3]["edited_argv"] == ["/bin/echo", "edited"] and rows[0]["edited_argv"] is None
    assert rows[7]["decided_ref"] == rows[6]["seq"]
    assert rows[0]["exit_status"] == 0 and rows[0]["output_bytes"] == 4  # "hi\r\n": it ran on a terminal
    assert rows[1]["exit_status"] is None and rows[1]["executable"] == ""


def test_prompt_timeout(lazaret, env, workspace):
    env.write_config(extra="[escalation]\nprompt_timeout_seconds = 5\n")
    a = spawn_prompt_session(lazaret, env, workspace)
    ask(a, f"{ESC} -- /bin/echo late")
    a.expect(r"rc=(\d+)", timeout=20)
    assert a.match.group(1) == "124"  # timed out: a denial, with its own status
    assert "late\r\n" not in a.before
    a.sendline("exit")
    a.expect(pexpect.EOF, timeout=30)
    assert "debug: model PromptTimeout(" in coord_log(env, workspace)
    rows = audit_rows(lazaret, env, workspace)
    assert [(w["decided_by"], w["decision"], w["end_state"]) for w in rows] == [("none", "none", "timed-out")]


# ---- route HostProcess: the host command on the session's terminal ----

TTY = os.path.realpath("/usr/bin/tty")


def test_host_command_gets_the_session_terminal(lazaret, env, workspace):
    e = env.environ(LAZARET_DEBUG="1", LAZARET_TEST_AUTO_APPROVE=rules([TTY]))
    a = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, timeout=60, encoding="utf-8",
                      dimensions=(24, 100))
    # The interactive shell's login message names the client, in one line.
    a.expect(r"lazaret: host commands: lazaret-escalate -- /ABSOLUTE/PATH ARGS\.\.\. asks you here[^\r\n]*\r\n")
    a.expect(r"[#$] ")
    # Auto-approved, from a client on a terminal: the host command has a
    # terminal of its own (a host pts), shown once (the client does not
    # print its copy of the output again).
    a.sendline(f"{ESC} -- {TTY}; echo rc=$?")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0", a.before
    assert re.search(r"/dev/pts/\d+\r\n", a.before) and a.before.count("/dev/pts/") == 1, a.before
    # Control: the same request with its output piped gets no terminal.
    a.sendline(f"{ESC} -- {TTY} | cat; echo rc=$?")
    a.expect(r"rc=(\d+)", timeout=30)
    assert "not a tty" in a.before, a.before

    # Approved on the prompt: it asks a question, the developer answers on
    # the same terminal, and its TERM is the session's.
    script = 'printf "name? "; read x; echo "got:$x term:$TERM"'
    a.sendline(f"{ESC} -- {SH} -c '{script}'; echo rc=$?")
    a.expect(SETTLING, timeout=30)
    a.expect(ASKING, timeout=10)
    a.send("a")
    a.expect("name\\? ", timeout=30)
    assert wait_until(lambda: host_procs([SH, "-c", script]), timeout=10)
    # While the host command has the terminal, the sandbox's output waits.
    a.send("bob\r")
    a.expect(r"got:bob term:(\S+)", timeout=30)
    assert a.match.group(1) != "dumb"
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0"

    # Ctrl-C on the terminal reaches the host command (SIGINT), not the
    # sandbox: the request completes with 128+2 and no host process is left.
    a.sendline(f"{ESC} -- {SLEEP} 33; echo rc=$?")
    a.expect(SETTLING, timeout=30)
    a.expect(ASKING, timeout=10)
    a.send("a")
    assert wait_until(lambda: host_procs([SLEEP, "33"]), timeout=30)
    a.send("\x03")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "130", a.before
    assert wait_until(lambda: not host_procs([SLEEP, "33"]), timeout=10)
    a.sendline("echo back-$((2+3))")
    a.expect("back-5", timeout=20)
    a.sendline("exit")
    a.expect(pexpect.EOF, timeout=30)
    log = coord_log(env, workspace)
    assert "debug: model StartHostExecution(" in log and "debug: model StartHostExecutionPiped(" in log


def test_executable_replaced_before_approval_is_refused(lazaret, env, workspace, tmp_path):
    """The prompt shows a file; the developer approves; a different file
    sits at that path by then: nothing runs (FailHostExecution)."""
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho original-ran\n")
    tool.chmod(0o755)
    a = spawn_prompt_session(lazaret, env, workspace)
    ask(a, f"{ESC} -- {tool}")
    evil = tmp_path / "evil"
    evil.write_text("#!/bin/sh\necho replaced-ran\n")
    evil.chmod(0o755)
    os.rename(evil, tool)  # same path, another file
    a.send("a")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "126", a.before
    assert "replaced-ran" not in a.before and "original-ran" not in a.before
    # Control: the same flow without the swap runs the file.
    ask(a, f"{ESC} -- {tool}")
    a.send("a")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0" and "replaced-ran" in a.before, a.before
    a.sendline("exit")
    a.expect(pexpect.EOF, timeout=30)
    log = coord_log(env, workspace)
    assert "debug: model FailHostExecution(" in log and "is no longer the file the prompt showed" in log, log[-3000:]
    assert log.count("debug: model QueuePrompt(") == 2  # once per request
    rows = audit_rows(lazaret, env, workspace)
    assert [(w["decision"], w["end_state"]) for w in rows] == [("approved", "failed"), ("approved", "completed")]


# ---- --allow-host: the sandbox asks to reach a host by name ----

NET_ASKING = r"\[s\] allow, for every session of this Domain"


def ask_host(c, args):
    """lazaret-escalate --allow-host ARGS; returns the prompt's screen once
    it is drawn and settled."""
    c.sendline(f"{ESC} --allow-host {args}; echo rc=$?")
    c.expect(SETTLING, timeout=30)
    screen = c.before + c.after
    c.expect(NET_ASKING, timeout=10)
    return screen + c.before + c.after


def test_allow_host_prompt(lazaret, env, workspace):
    a = spawn_prompt_session(lazaret, env, workspace)
    # A wildcard is refused in the sandbox before anything is sent (the
    # coordinator refuses it again: tests/unit/test_escalation.c).
    a.sendline(f"{ESC} --allow-host '*.example.com' --justification x; echo rc=$?")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "2" and "not a wildcard" in a.before, a.before

    # The network screen: the host and its port, the justification; [a] is
    # not an answer; [d] denies: exit 1 with one line saying so.
    screen = ask_host(a, "Example.COM:443 --justification 'read the docs'")
    assert "NETWORK ACCESS" in screen, screen
    assert "The sandbox asks to reach example.com on TCP port 443" in screen, screen
    assert "read the docs" in screen and "[a] approve" not in screen and "[e] edit" not in screen, screen
    a.send("a")
    a.expect(r"\[a\] is not offered for a network request", timeout=10)
    no_result(a, 1)
    a.send("d")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "1", a.before
    assert "denied: Example.COM:443" in a.before, a.before

    # [s] allows: exit 0.
    screen = ask_host(a, "example.org --justification x")
    assert "The sandbox asks to reach example.org on every TCP port" in screen, screen
    a.send("s")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "0", a.before
    assert "allowed: example.org" in a.before, a.before

    # The same name again is asked again (nothing is decided from the
    # sandbox's claim); Ctrl-C cancels it (130).
    ask_host(a, "example.org --justification again")
    a.send("\x03")
    a.expect(r"rc=(\d+)", timeout=30)
    assert a.match.group(1) == "130", a.before
    a.sendline("exit")
    a.expect(pexpect.EOF, timeout=30)

    log = coord_log(env, workspace)
    assert "host rule example.org allowed in this Domain" in log, log[-3000:]
    assert "host rule example.com:443 allowed" not in log
    rows = audit_rows(lazaret, env, workspace)
    # The network decision is on the same chain: the developer's allowance.
    net = [(w["event"], w["name"]) for w in rows if w.get("kind") == "net"]
    assert ("allowed", "example.org") in net and not [n for n in net if n[1].startswith("example.com")], net
    got = [(w["argv"], w["decided_by"], w["decision"], w["end_state"]) for w in rows if w.get("kind") != "net"]
    assert got == [
        (["--allow-host", "Example.COM:443"], "developer", "denied", "denied"),
        (["--allow-host", "example.org"], "developer", "approved-for-session", "completed"),
        (["--allow-host", "example.org"], "developer", "none", "cancelled"),
    ], got


def test_allow_host_without_a_terminal_is_denied(lazaret, env, workspace):
    # Pipes: no terminal to ask on: denied (exit 1), never allowed.
    r = subprocess.run([lazaret, "run", "-p", "test", "--", ESC, "--allow-host", "example.org:443",
                        "--justification", "x"], cwd=workspace, env=env.environ(LAZARET_DEBUG="1"),
                       capture_output=True, timeout=300)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert b"denied: example.org:443" in r.stderr, r.stderr
    assert "allowed in this Domain" not in coord_log(env, workspace)


def host_record(sk_seed, rid, sid, host, context=b"host-request"):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    now = int(time.time() * 1000)
    p = rid + sid + _varint(now) + _varint(now + 60000) + _bytes(host) + _bytes(b"forged")
    ctx = b"lazaret/v1/" + context + b"\x00" + len(p).to_bytes(4, "little") + p
    return bytes([1, 9]) + Ed25519PrivateKey.from_private_bytes(sk_seed).sign(ctx) + p


def test_allow_host_hostile_records(lazaret, env, workspace):
    """host-request records written from inside without the Escalation
    Client's check: the coordinator's parse is the one that counts. Even an
    auto-approval rule matching everything the record could name does not
    approve one."""
    a = spawn_tty(lazaret, env, workspace, rules(["+", ECHO]))
    sid, sk = session_keys(a)
    req = mailbox_req(env, workspace)
    log = lambda: coord_log(env, workspace)  # noqa: E731

    def drop_host(rid, data):
        tmp = req / (".tmp-" + rid.hex())
        tmp.write_bytes(data)
        tmp.rename(req / f"{rid.hex()}.host-request.0")

    cases = {
        "wildcard": (b"*.example.com", "takes an exact host name, not a wildcard"),
        "wildcard with port": (b"*.example.com:443", "takes an exact host name, not a wildcard"),
        "underscore": (b"exa_mple.com", "--allow-host: host rule"),
        "port 0": (b"example.com:0", "--allow-host: host rule"),
        "address": (b"10.0.2.2", "--allow-host: host rule"),
        "backslash": (b"example.com\\.evil.test", "--allow-host: host rule"),
        "whole TLD": (b"*.test", "--allow-host: host rule"),
    }
    rids = {}
    for name, (host, _) in cases.items():
        rids[name] = os.urandom(16)
        drop_host(rids[name], host_record(sk, rids[name], sid, host))
    # Signed for another kind: never opened as a host-request.
    confused = os.urandom(16)
    drop_host(confused, host_record(sk, confused, sid, b"example.net", b"escalation-request"))
    assert wait_until(lambda: all(f"request {r.hex()[:12]} denied" in log() for r in rids.values()), timeout=15), \
        log()[-4000:]
    assert wait_until(lambda: confused.hex() in log(), timeout=10), log()[-3000:]
    text = log()
    for name, (host, why) in cases.items():
        line = [ln for ln in text.splitlines() if f"request {rids[name].hex()[:12]} denied" in ln]
        assert line and why in line[0], (name, line)
    assert f"request {confused.hex()[:12]} from session" not in text
    assert "signature does not verify" in text
    assert "allowed in this Domain" not in text and "prompting on the terminal" not in text

    # Positive control: a well-formed one is asked on the session's
    # terminal (never auto-approved), and [d] denies it.
    good = os.urandom(16)
    drop_host(good, host_record(sk, good, sid, b"example.net:443"))
    a.expect(NET_ASKING, timeout=30)
    assert "The sandbox asks to reach example.net on TCP port 443" in a.before
    a.send("d")
    assert wait_until(lambda: f"request {good.hex()[:12]} denied: denied by the developer" in log(), timeout=10), \
        log()[-3000:]
    assert "allowed in this Domain" not in log()
    assert "debug: model AutoApprove(" not in log()
    a.sendline("echo AL''IVE")
    a.expect("ALIVE")
    a.sendline("exit")
    a.expect(pexpect.EOF)
