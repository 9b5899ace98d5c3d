"""What the developer approved is what runs, for scripts too
(docs/escalation.md, "What runs").

Attacked from inside the sandbox as an agent would: it writes a script in
the workspace, asks to run it on the host, and once the developer approved
and the script runs, appends a line to it. The executable runs from a
sealed copy, so the line never runs; the positive control asks for
`/bin/sh SCRIPT` (an interpreter reading a script it is given, which the
prompt says may change after approval) and the same append does run. The
prompt's warning lines and the --cwd refusal before the prompt are checked
on a real terminal (pexpect)."""
import hashlib
import json
import os
import re
import subprocess

import pexpect

from conftest import domain_dir_for

ESC = "/run/lazaret/escalate"
SETTLING = "Keys are accepted in a moment"
ASKING = r"\[a\] approve once"
SH = os.path.realpath("/bin/sh")


def spawn_session(lazaret, env, workspace):
    e = env.environ(LAZARET_DEBUG="1")
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, timeout=60, encoding="utf-8",
                      dimensions=(40, 200))
    c.expect(r"[#$] ")
    return c


def ask(c, cmd):
    """Runs cmd in the sandbox's shell; returns the prompt's text once it is
    drawn and settled."""
    c.sendline(f"{cmd}; echo rc=$?")
    c.expect(SETTLING, timeout=60)
    seen = c.before
    c.expect(ASKING, timeout=10)
    return seen + c.before


def result(c, timeout=90):
    c.expect(r"rc=(\d+)", timeout=timeout)
    return int(c.match.group(1)), c.before


def audit_rows(lazaret, env, workspace):
    r = subprocess.run([lazaret, "audit", "-p", "test", "--json"], cwd=workspace, env=env.environ(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["intact"] is True, doc
    return doc["rows"]


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


def stage_attack(c, host_ws, name):
    """In the sandbox: the script, and a background job that appends a line
    to it once the host runs it (it creates `started`), then lets it go on
    (`go`). Every wait is bounded (60 s on the host, 120 s inside).
    Returns the script's bytes as the prompt will show them."""
    script = (
        "#!/bin/sh\n"
        "echo step-one\n"
        f": > {host_ws}/started\n"
        f"i=0; while [ ! -e {host_ws}/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
        "echo step-two\n")
    one_line = script.replace("\n", "\\n")
    c.sendline(f"rm -f /workspace/started /workspace/go; printf '{one_line}' > /workspace/{name}; "
               f"chmod 755 /workspace/{name}; echo sta''ged")
    c.expect("staged\r\n")
    c.sendline(f"(i=0; while [ ! -e /workspace/started ] && [ $i -lt 120 ]; do sleep 1; i=$((i+1)); done; "
               f"echo 'touch {host_ws}/SENTINEL-{name}' >> /workspace/{name}; : > /workspace/go) &")
    c.expect(r"[#$] ")
    return script.encode()


def test_script_appended_after_approval_does_not_run(lazaret, env, workspace):
    host_ws = os.path.realpath(workspace)
    c = spawn_session(lazaret, env, workspace)

    # The attack: the executable is the script itself.
    # Just written by the agent: before the sealed copy, running it from
    # the host failed with "Text file busy" (the router may still hold it
    # open for writing); it must run.
    approved = stage_attack(c, host_ws, "y")
    shown = ask(c, f"{ESC} -- {host_ws}/y")
    assert "WRITABLE BY THE SANDBOX: the executable lies in the workspace" in shown, shown
    c.send("a")
    rc, out = result(c)
    assert rc == 0, out
    assert "step-one" in out and "step-two" in out, out  # the approved script ran to its end
    assert os.path.exists(f"{host_ws}/go")  # the append happened while it ran
    with open(f"{host_ws}/y") as f:
        assert "SENTINEL-y" in f.read()
    assert not os.path.exists(f"{host_ws}/SENTINEL-y"), "the line appended after approval ran on the host"

    # Positive control: the shell given the script as an argument reads the
    # file itself; the prompt says so, and the same append runs.
    stage_attack(c, host_ws, "z")
    shown = ask(c, f"{ESC} -- {SH} {host_ws}/z")
    assert "WRITABLE BY THE SANDBOX: argv[1] names a file in the workspace" in shown, shown
    assert "THE SCRIPT MAY CHANGE AFTER APPROVAL" in shown, shown
    assert "WRITABLE BY THE SANDBOX: the executable" not in shown  # /bin/sh is the developer's
    c.send("a")
    rc, out = result(c)
    assert rc == 0 and "step-two" in out, out
    assert os.path.exists(f"{host_ws}/SENTINEL-z"), "control: the append should have run (harm shown)"

    # Everyday flow: a host tool outside every writable tree draws no warning.
    shown = ask(c, f"{ESC} -- /bin/echo plain")
    assert "WRITABLE BY THE SANDBOX" not in shown and "MAY CHANGE" not in shown, shown
    c.send("a")
    rc, out = result(c)
    assert rc == 0 and "plain" in out, out
    c.sendline("exit")
    c.expect(pexpect.EOF, timeout=60)
    # The audit records the hash of what ran: the approved bytes, not the
    # file as it is now (with the appended line).
    rows = [w for w in audit_rows(lazaret, env, workspace) if w["executable"] == f"{host_ws}/y"]
    assert len(rows) == 1 and rows[0]["end_state"] == "completed", rows
    assert rows[0]["executable_sha256"] == hashlib.sha256(approved).hexdigest()
    with open(f"{host_ws}/y", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() != rows[0]["executable_sha256"]


def test_bad_cwd_is_refused_before_the_prompt(lazaret, env, workspace):
    c = spawn_session(lazaret, env, workspace)
    c.sendline("ln -s /etc /workspace/out; mkdir -p /workspace/sub; echo ma''de")
    c.expect("made\r\n")
    for cwd, why in (("/workspace/out", "not a directory inside the workspace"),
                     ("/workspace/sub/..", "may not contain . or .. components"),
                     ("/tmp", "must be /workspace or below it")):
        c.sendline(f"{ESC} --cwd {cwd} -- /bin/echo hi; echo rc=$?")
        i = c.expect([SETTLING, r"rc=(\d+)"], timeout=60)
        assert i == 1, f"a prompt was drawn for --cwd {cwd}"
        assert c.match.group(1) == "125", c.before
        text = re.sub(r"\s+", " ", c.before)
        assert "refused before the prompt: --cwd:" in text and why in text, text
    # Control: a good --cwd reaches the prompt (denied there).
    shown = ask(c, f"{ESC} --cwd /workspace/sub -- /bin/echo hi")
    assert "sub" in shown
    c.send("d")
    rc, out = result(c)
    assert rc == 125, out
    c.sendline("exit")
    c.expect(pexpect.EOF, timeout=60)
    log = coord_log(env, workspace)
    assert log.count("debug: model DenyWithoutPrompt(") == 3, log[-3000:]
    assert log.count("debug: model BeginPrompt(") == 1, log[-3000:]


def test_bad_cwd_reason_reaches_a_piped_client(lazaret, env, workspace):
    """Without a terminal (an agent's tool call), the reason is on stderr."""
    cmd = [lazaret, "run", "-p", "test", "--", ESC, "--cwd", "/workspace/..", "--", "/bin/echo", "hi"]
    r = subprocess.run(cmd, cwd=workspace, env=env.environ(), capture_output=True, timeout=120)
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert b"refused before the prompt: --cwd: the working directory may not contain . or .. components" \
        in r.stderr, r.stderr
    assert r.stdout == b""
    # Control: a good --cwd gets past the check (no terminal to ask on: denied there).
    cmd[cmd.index("/workspace/..")] = "/workspace"
    r = subprocess.run(cmd, cwd=workspace, env=env.environ(), capture_output=True, timeout=120)
    assert r.returncode == 125 and b"refused before the prompt" not in r.stderr, r.stderr
    assert b"no terminal to ask on" in r.stderr, r.stderr


def test_interpreter_with_a_workspace_script_is_flagged(lazaret, env, workspace):
    """`python3 x.py` (relative, from the working directory, the workspace):
    the prompt says the script may change after approval; the control,
    `python3 -c ...` with no file argument, says nothing."""
    py = os.path.realpath("/usr/bin/python3")
    c = spawn_session(lazaret, env, workspace)
    c.sendline("echo 'print(1)' > /workspace/x.py; echo wr''ote")
    c.expect("wrote\r\n")
    shown = ask(c, f"{ESC} -- {py} x.py")
    assert "WRITABLE BY THE SANDBOX: argv[1] names a file in the workspace" in shown, shown
    assert "THE SCRIPT MAY CHANGE AFTER APPROVAL: this interpreter reads argv[1]" in shown, shown
    c.send("d")
    assert result(c)[0] == 125
    shown = ask(c, f"{ESC} -- {py} -c pass")
    assert "WRITABLE BY THE SANDBOX" not in shown and "MAY CHANGE" not in shown, shown
    c.send("d")
    assert result(c)[0] == 125
    c.sendline("exit")
    c.expect(pexpect.EOF, timeout=60)


def test_what_runs_from_a_copy_and_what_from_itself(lazaret, env, workspace):
    """A program the developer owns runs from the sealed copy (its
    /proc/self/exe names the memfd); a root-owned one that only host root
    can change runs from itself (its /proc/self/exe is its path)."""
    readlink = os.path.realpath("/usr/bin/readlink")
    own = os.path.join(os.path.realpath(workspace), "myreadlink")
    with open(readlink, "rb") as src, open(own, "wb") as dst:
        dst.write(src.read())
    os.chmod(own, 0o755)
    c = spawn_session(lazaret, env, workspace)
    ask(c, f"{ESC} -- {own} /proc/self/exe")
    c.send("a")
    rc, out = result(c)
    assert rc == 0 and "/memfd:lazaret:myreadlink (deleted)" in out, out
    ask(c, f"{ESC} -- {readlink} /proc/self/exe")
    c.send("a")
    rc, out = result(c)
    assert rc == 0 and f"{readlink}\r\n" in out and "memfd" not in out, out
    c.sendline("exit")
    c.expect(pexpect.EOF, timeout=60)
