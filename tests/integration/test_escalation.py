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

from conftest import domain_dir_for, lz_run, user_processes, wait_until

ESC = "/run/lazaret/escalate"
ECHO = os.path.realpath("/bin/echo")
SH = os.path.realpath("/bin/sh")
FALSE = os.path.realpath("/bin/false")
SLEEP = os.path.realpath("/bin/sleep")
CAT = os.path.realpath("/bin/cat")
TRUE = os.path.realpath("/bin/true")


def rules(*rs):
    return "\x1e".join("\x1f".join(r) for r in rs)


def run_esc(lazaret, env, workspace, argv, rule_spec, timeout=120, esc_args=()):
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=rule_spec, LAZARET_DEBUG="1")
    cmd = [lazaret, "run", "-p", "test", "--", ESC, *esc_args, "--", *argv]
    return subprocess.run(cmd, cwd=workspace, env=e, capture_output=True, timeout=timeout)


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


def host_procs(argv_prefix):
    """PIDs of our own processes whose argv starts with argv_prefix."""
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
        if [x.decode(errors="replace") for x in a[:len(argv_prefix)]] == list(argv_prefix):
            out.append(int(p.name))
    return out


def test_auto_approved_runs_and_status_propagates(lazaret, env, workspace):
    spec = rules([ECHO, "hello"], [SH, "-c", "exit 7"], [FALSE])
    r = run_esc(lazaret, env, workspace, [ECHO, "hello"], spec)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello\n"
    # The hook reached the coordinator, and the transitions carry the model's names.
    log = coord_log(env, workspace)
    assert "auto-approval rule(s) from a test hook" in log
    for action in ("CreateTrustAnchor", "ReceiveEscalation", "AutoApprove", "StartHostExecution",
                   "CompleteHostExecution"):
        assert f"debug: model {action}(" in log, action
    assert log.index("model ReceiveEscalation(") < log.index("model AutoApprove(") \
        < log.index("model StartHostExecution(") < log.index("model CompleteHostExecution(")
    r = run_esc(lazaret, env, workspace, [SH, "-c", "exit 7"], spec)
    assert r.returncode == 7, r.stderr
    r = run_esc(lazaret, env, workspace, [FALSE], spec)
    assert r.returncode == 1, r.stderr


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
    assert "debug: model QueuePrompt(" in log
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
    c = spawn_tty(lazaret, env, workspace, rules([SLEEP, "30"]))
    c.sendline(f"{ESC} -- {SLEEP} 30; echo rc=$?")
    assert wait_until(lambda: host_procs([SLEEP, "30"]), timeout=30), (c.before, coord_log(env, workspace)[-3000:])
    pids = host_procs([SLEEP, "30"])
    c.sendintr()
    c.expect("rc=130")
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
    p += _bytes(b"/workspace") + _bytes(b"forged") + _varint(0) + b"\x00"
    ctx = b"lazaret/v1/escalation-request\x00" + len(p).to_bytes(4, "little") + p
    sig = Ed25519PrivateKey.from_private_bytes(sk_seed).sign(ctx) if sign else bytes(64)
    return bytes([1, 1]) + sig + p


def session_keys(c):
    c.sendline('echo "SID=$LAZARET_SESSION_ID" "KEY=$LAZARET_SESSION_KEY" END')
    c.expect(r"SID=([0-9a-f]{32}) KEY=([0-9a-f]{128}) END")
    return bytes.fromhex(c.match.group(1)), bytes.fromhex(c.match.group(2))[:32]


def mailbox_req(env):
    hits = list((Path(env.runtime) / "lazaret").glob("*/mailbox/req"))
    assert len(hits) == 1, hits
    return hits[0]


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
    req = mailbox_req(env)
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

    # [q]: denied, and the session ends.
    ask(a, f"{ESC} -- /bin/echo quit")
    a.send("q")
    a.expect(pexpect.EOF, timeout=30)
    log = coord_log(env, workspace)
    for action in ("QueuePrompt", "BeginPrompt", "PromptDrawn", "DiscardTypeahead", "DeveloperApprove",
                   "DeveloperDeny", "DeveloperEdit", "DeveloperApproveSession", "SessionApprove", "CancelRequest",
                   "DeveloperQuit"):
        assert f"debug: model {action}(" in log, action


def test_prompt_timeout(lazaret, env, workspace):
    env.write_config(extra="[escalation]\nprompt_timeout_seconds = 5\n")
    a = spawn_prompt_session(lazaret, env, workspace)
    ask(a, f"{ESC} -- /bin/echo late")
    a.expect(r"rc=(\d+)", timeout=20)
    assert a.match.group(1) == "125"
    assert "late\r\n" not in a.before
    a.sendline("exit")
    a.expect(pexpect.EOF, timeout=30)
    assert "debug: model PromptTimeout(" in coord_log(env, workspace)
