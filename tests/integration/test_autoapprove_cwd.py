"""Auto-approval never runs the workspace's code silently
(docs/escalation.md, "Auto-approval" and "Working directory").

A rule's program runs in a fresh empty host directory unless the rule says
cwd = "workspace" with runs_workspace_code = true. Attacked from inside the
busybox sandbox as a hostile agent would: it writes a conftest.py into the
workspace and asks for an auto-approved `pytest` on the host; the sentinel
is a host file that only the conftest.py, run on the host, can create. Each
attack has its positive control (the same request where the defence does
not apply shows the harm)."""
import json
import os
import re
import subprocess
from pathlib import Path

import pexpect
import pytest

from conftest import domain_dir_for

ESC = "/run/lazaret/escalate"
PYTEST = "/usr/bin/pytest"
ECHO = os.path.realpath("/bin/echo")
PWD = os.path.realpath("/bin/pwd")
TOUCH = os.path.realpath("/usr/bin/touch")
SETTLING = "Keys are accepted in a moment"
ASKING = r"\[a\] approve once"
# pytest with nothing collected; no .pytest_cache written
PYTEST_ARGV = [PYTEST, "-q", "-p", "no:cacheprovider"]
NO_TESTS = 5

pytestmark = pytest.mark.skipif(not os.access(PYTEST, os.X_OK), reason="needs pytest on the host")


def toml_list(v):
    return "[" + ", ".join(json.dumps(x) for x in v) + "]"


def rule(argv, **kw):
    body = f"[[escalation.auto_approve]]\nargv = {toml_list(argv)}\n"
    for k, v in kw.items():
        body += f"{k} = {json.dumps(v)}\n"
    return body


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


SESSIONS = []


@pytest.fixture(autouse=True)
def close_sessions():
    """A failed assertion leaves no session (and so no Domain) behind."""
    yield
    while SESSIONS:
        c = SESSIONS.pop()
        if c.isalive():
            c.close(force=True)


def session(lazaret, env, workspace):
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=env.environ(LAZARET_DEBUG="1"),
                      timeout=120, encoding="utf-8", dimensions=(24, 120))
    SESSIONS.append(c)
    c.expect(r"[#$] ")
    return c


def plant_conftest(c, sentinel):
    """The agent's move: a conftest.py that, run anywhere, writes the host
    sentinel (a path the sandbox cannot reach)."""
    c.sendline(f"printf 'open(\"{sentinel}\", \"w\").write(\"ran\")\\n' > /workspace/conftest.py; echo planted=$?")
    c.expect("planted=0")
    c.expect(r"[#$] ")


def run_auto(c, cmd):
    """cmd runs without a prompt; its exit status."""
    c.sendline(f"{cmd}; echo rc=$?")
    i = c.expect([r"rc=(\d+)", SETTLING], timeout=120)
    assert i == 0, f"a prompt appeared for an auto-approved request: {c.before[-800:]}"
    rc = int(c.match.group(1))
    c.expect(r"[#$] ")
    return rc


def ask(c, cmd):
    c.sendline(f"{cmd}; echo rc=$?")
    i = c.expect([SETTLING, r"rc=(\d+)"], timeout=60)
    assert i == 0, f"ran without a prompt: {c.before[-800:]}"
    c.expect(ASKING, timeout=15)


def decide(c, key):
    c.send(key)
    c.expect(r"rc=(\d+)", timeout=120)
    rc = int(c.match.group(1))
    c.expect(r"[#$] ")
    return rc


def leave(c):
    c.sendline("exit")
    c.expect(pexpect.EOF, timeout=60)
    c.close()


def test_pytest_rule_does_not_run_the_agents_conftest(lazaret, env, workspace, tmp_path):
    sentinel = tmp_path / "sentinel-ws"
    env.write_config(extra=rule(PYTEST_ARGV))
    c = session(lazaret, env, workspace)
    plant_conftest(c, sentinel)
    # The attack: the auto-approved test runner, default and explicit
    # /workspace. It runs (no prompt) in an empty directory: nothing
    # collected, the conftest.py never loaded.
    assert run_auto(c, f"{ESC} -- {' '.join(PYTEST_ARGV)}") == NO_TESTS
    assert run_auto(c, f"{ESC} --cwd /workspace -- {' '.join(PYTEST_ARGV)}") == NO_TESTS
    assert not sentinel.exists()
    # Asking for a working directory in the workspace is not auto-approved
    # elsewhere: the developer is asked (and denies).
    c.sendline("mkdir -p /workspace/sub")
    ask(c, f"{ESC} --cwd /workspace/sub -- {' '.join(PYTEST_ARGV)}")
    assert decide(c, "d") == 125
    assert not sentinel.exists()
    leave(c)
    log = coord_log(env, workspace)
    assert "runs in a fresh empty directory and the request asks for --cwd /workspace/sub" in log, log[-3000:]
    assert (workspace / "conftest.py").exists()  # the attack was in place

    # Positive control: the same rule acknowledged to run in the workspace
    # runs the agent's conftest.py on the host (the harm), and said so at
    # the Domain's start.
    env.write_config(extra=rule(PYTEST_ARGV, cwd="workspace", runs_workspace_code=True))
    c = session(lazaret, env, workspace)
    start = c.before
    assert "NOTICE: escalation.auto_approve[0]" in start and "runs in the workspace without a prompt" in start, start
    assert run_auto(c, f"{ESC} -- {' '.join(PYTEST_ARGV)}") == NO_TESTS
    assert sentinel.read_text() == "ran"
    leave(c)


def test_extra_arguments_into_the_workspace_are_asked(lazaret, env, workspace, tmp_path):
    """allow_extra_args: an extra argument naming the workspace on the host
    (or climbing out with ..) is asked, not auto-approved. Positive
    control: the same shape naming a directory outside every
    sandbox-writable tree is auto-approved and pytest runs the conftest.py
    there, so such an argument does carry the harm."""
    sentinel = tmp_path / "sentinel-ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel_out = tmp_path / "sentinel-outside"
    (outside / "conftest.py").write_text(f'open("{sentinel_out}", "w").write("ran")\n')
    env.write_config(extra=rule(PYTEST_ARGV, allow_extra_args=True))
    ws = os.path.realpath(workspace)
    c = session(lazaret, env, workspace)
    plant_conftest(c, sentinel)
    for extra in (ws, f"--rootdir={ws}", f"{ws}/conftest.py", "../../..", f"/{ws}//."):
        ask(c, f"{ESC} -- {' '.join(PYTEST_ARGV)} '{extra}'")
        assert decide(c, "d") == 125, extra
    assert not sentinel.exists()
    # an ordinary extra argument is still auto-approved
    assert run_auto(c, f"{ESC} -- {' '.join(PYTEST_ARGV)} -x") == NO_TESTS
    # the positive control
    assert run_auto(c, f"{ESC} -- {' '.join(PYTEST_ARGV)} {outside}") == NO_TESTS
    assert sentinel_out.read_text() == "ran"
    assert not sentinel.exists()
    leave(c)


def test_rule_arguments_into_the_workspace_are_refused_at_load(lazaret, env, workspace):
    ws = os.path.realpath(workspace)
    e = env.environ()
    for argv in ([PYTEST, "-q", ws], [PYTEST, f"--rootdir={ws}"], [PYTEST, f"{ws}/tests"], [PYTEST, "../x"]):
        env.write_config(extra=rule(argv))
        r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=e, capture_output=True,
                           timeout=60)
        assert r.returncode != 0, (argv, r.stdout)
        assert b"escalation.auto_approve[0].argv[" in r.stderr, r.stderr
        r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e, capture_output=True,
                           timeout=60)
        assert r.returncode == 125 and b"escalation.auto_approve[0].argv[" in r.stderr, r.stderr
    # cwd = "workspace" without its acknowledgement: refused, naming the key
    env.write_config(extra=rule([PYTEST, "-q"], cwd="workspace"))
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=e, capture_output=True,
                       timeout=60)
    assert r.returncode != 0 and b"runs_workspace_code = true" in r.stderr, r.stderr
    # control: acknowledged, accepted and shown with its warning
    env.write_config(extra=rule([PYTEST, "-q"], cwd="workspace", runs_workspace_code=True))
    r = subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=workspace, env=e, capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert b'cwd = "workspace"\nruns_workspace_code = true\n# WARNING: ' in r.stdout, r.stdout


def test_everyday_rules_and_canonical_argv0(lazaret, env, workspace):
    """Rules without workspace access keep working; /bin/echo matches a rule
    for /usr/bin/echo (merged /usr) and the rule's file runs; the fresh
    directory is the developer's, private, and gone after the run."""
    env.write_config(extra=rule([ECHO, "hi"]) + rule([PWD]) + rule([TOUCH, "made-here"]))
    e = env.environ(LAZARET_DEBUG="1")

    def esc(*argv, esc_args=()):
        return subprocess.run([lazaret, "run", "-p", "test", "--", ESC, *esc_args, "--", *argv], cwd=workspace,
                              env=e, capture_output=True, timeout=180)

    r = esc(ECHO, "hi")
    assert r.returncode == 0 and r.stdout == b"hi\n", r.stderr
    r = esc("/bin/echo", "hi")  # another name of the same file
    if os.path.realpath("/bin/echo") != "/bin/echo":
        assert r.returncode == 0 and r.stdout == b"hi\n", r.stderr
    r = esc("echo", "hi")  # never a PATH lookup
    assert r.returncode == 125
    r = esc(PWD)
    assert r.returncode == 0, r.stderr
    ran_in = r.stdout.decode().strip()
    assert re.fullmatch(re.escape(str(env.runtime)) + r"/lazaret/[0-9a-f]{12}/hostcwd/run-[0-9a-f]{16}", ran_in), ran_in
    assert not os.path.exists(ran_in)  # removed after the run
    r = esc(TOUCH, "made-here")
    assert r.returncode == 0, r.stderr
    assert not (workspace / "made-here").exists()
    rows = json.loads(subprocess.run([lazaret, "audit", "-p", "test", "--json"], cwd=workspace, env=env.environ(),
                                     capture_output=True, timeout=60, check=True).stdout)["rows"]
    canon = [w for w in rows if w["argv"] == ["/bin/echo", "hi"]]
    if os.path.realpath("/bin/echo") != "/bin/echo":
        assert canon and canon[0]["decision"] == "auto-approved" and canon[0]["executable"] == ECHO, rows
    assert all("/hostcwd/run-" in w["cwd"] for w in rows if w["decision"] == "auto-approved"), rows


BUSYBOX = os.path.realpath("/usr/bin/busybox") if os.path.exists("/usr/bin/busybox") else None


@pytest.mark.skipif(BUSYBOX is None, reason="needs busybox on the host")
def test_link_named_sh_does_not_turn_a_rule_into_a_shell(lazaret, env, workspace, tmp_path):
    """Canonical matching takes another name of the rule's file; what runs
    is the rule's name for it. The attack: a link called `sh` to the
    host's busybox, in the workspace, and a script called `echo` beside it;
    the request names the link, so busybox, if it saw argv[0] = .../sh,
    would be a shell running ./echo. Positive control: the same argv run
    on the host with the link as argv[0] does run the script."""
    sentinel = tmp_path / "sentinel-sh"
    ws = os.path.realpath(workspace)
    env.write_config(extra=rule([BUSYBOX, "echo", "applet-echo"], cwd="workspace", runs_workspace_code=True))
    c = session(lazaret, env, workspace)
    c.sendline(f"ln -s {BUSYBOX} /workspace/sh && printf 'echo pwned > {sentinel}\\n' > /workspace/echo; "
               "echo planted=$?")
    c.expect("planted=0")
    c.expect(r"[#$] ")
    c.sendline(f"{ESC} -- {ws}/sh echo applet-echo; echo rc=$?")
    i = c.expect([r"applet-echo\r\nrc=0", SETTLING], timeout=120)
    assert i == 0, c.before[-800:]
    c.expect(r"[#$] ")
    assert not sentinel.exists()
    leave(c)
    assert os.path.islink(f"{ws}/sh")
    subprocess.run([f"{ws}/sh", "echo", "applet-echo"], cwd=ws, capture_output=True, timeout=30)
    assert sentinel.read_text() == "pwned\n"
