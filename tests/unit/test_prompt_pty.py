"""The escalation prompt (src/lib/prompt.c) on a real terminal.

prompt_demo (tests/unit/prompt_demo.c) runs the prompt's state machine with
a poll loop on a PTY, the way the Host Coordinator will; pexpect plays the
developer. Run by `meson test pty-prompt` (PROMPT_DEMO names the binary);
needs no sandbox and no test user. Every wait is bounded (pexpect timeout).
"""
import os
import re
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

DEMO = os.environ.get("PROMPT_DEMO") or str(Path(__file__).resolve().parents[2] / "build" / "prompt_demo")
ENTER_ALT = "\x1b[?1049h"
LEAVE_ALT = "\x1b[?1049l"
SETTLE_MS = 300


def spawn_shell():
    """A shell on a fresh PTY: the demo runs inside it, so we can check the
    terminal's modes before and after (restored = the same `stty -g`)."""
    if not os.access(DEMO, os.X_OK):
        pytest.fail(f"prompt_demo not found at {DEMO}: build with -Dtests=true")
    sh = pexpect.spawn("/bin/sh", ["-i"], env={"PS1": "$ ", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                             "TERM": "xterm"},
                       encoding="utf-8", codec_errors="replace", timeout=15, dimensions=(30, 100))
    sh.expect_exact("$ ")
    sh.sendline("stty -g; echo STTY-END")
    sh.expect(r"([0-9a-f]+(?::[0-9a-f]+){10,})\r?\nSTTY-END")
    return sh, sh.match.group(1)


def run_demo(sh, *argv, settle=SETTLE_MS, env=""):
    sh.sendline(f"{env}{DEMO} --settle {settle} -- " + " ".join(argv) + "; echo DEMO-EXIT=$?")
    sh.expect_exact(ENTER_ALT)
    # The screen: the argv and the escaped justification.
    sh.expect_exact("Command line (")
    sh.expect_exact("Keys are accepted in a moment")


def wait_ready(sh):
    # The footer changes once the settle delay has passed.
    sh.expect_exact("[a] approve once")


def finish(sh, stty_before, restored=True):
    sh.expect_exact(LEAVE_ALT)
    sh.expect(r"RESULT ([a-z-]+) edited=(\d) argc=(\d+) argv=(.*?) discarded=(\d+)\r?\n")
    m = sh.match
    result = {"decision": m.group(1), "edited": m.group(2) == "1", "argc": int(m.group(3)),
              "argv": m.group(4), "discarded": int(m.group(5))}
    sh.expect(r"DEMO-EXIT=(\d+)")
    assert sh.match.group(1) == "0"
    sh.expect_exact("$ ")
    # The terminal is restored: the same modes as before (raw mode undone).
    sh.sendline("stty -g; echo STTY-END")
    sh.expect(r"([0-9a-f]+(?::[0-9a-f]+){10,})\r?\nSTTY-END")
    assert (sh.match.group(1) == stty_before) == restored
    sh.close(force=True)
    return result


def test_approve():
    sh, stty = spawn_shell()
    run_demo(sh, "/usr/bin/git", "log", "--oneline")
    # The justification's ESC and bidi override are shown escaped.
    text = sh.before
    wait_ready(sh)
    screen = text + sh.before
    assert "\\x1b[2J Really \\u{202E}desrever\\u{200B}." in screen
    assert "\u202e" not in screen
    sh.send("a")
    r = finish(sh, stty)
    assert r["decision"] == "approved"
    assert not r["edited"]
    assert r["argv"] == 'argv[0] = "/usr/bin/git" argv[1] = "log" argv[2] = "--oneline" '


def test_typeahead_then_deny():
    sh, stty = spawn_shell()
    # 'a' typed before the prompt is up is discarded: it must not approve.
    sh.sendline(f"{DEMO} --settle 1500 -- /bin/echo hi; echo DEMO-EXIT=$?")
    sh.expect_exact(ENTER_ALT)
    sh.send("a")
    sh.expect_exact("1 key typed before the prompt was ignored")
    wait_ready(sh)
    sh.send("\r")  # Enter alone: deny
    r = finish(sh, stty)
    assert r["decision"] == "denied"
    assert r["discarded"] == 1


def test_edit_then_approve():
    sh, stty = spawn_shell()
    run_demo(sh, "/usr/bin/git", "log", "--oneline")
    wait_ready(sh)
    sh.send("e")
    sh.expect_exact("> /usr/bin/git log --oneline")
    # Ctrl-W twice removes "--oneline" and "log"; type the new argv[1].
    sh.send("\x17\x17show HEAD\r")
    sh.expect_exact("AS YOU EDITED IT")
    wait_ready(sh)
    sh.send("a")
    r = finish(sh, stty)
    assert r["decision"] == "approved"
    assert r["edited"]
    assert r["argv"] == 'argv[0] = "/usr/bin/git" argv[1] = "show" argv[2] = "HEAD" '


def test_edit_error_stays_then_deny():
    sh, stty = spawn_shell()
    run_demo(sh, "/bin/echo", "hi")
    wait_ready(sh)
    sh.send("e")
    sh.expect_exact("> /bin/echo hi")
    sh.send(" 'open\r")
    sh.expect(re.escape("Not accepted: single quote opened at column ") + r"\d+")
    sh.send("\x1b")  # back to the prompt, unchanged
    wait_ready(sh)
    sh.send("d")
    r = finish(sh, stty)
    assert r["decision"] == "denied"


def test_restore_check_fires():
    """Positive control: a program that leaves raw mode behind is caught by
    the stty comparison the tests above rely on."""
    sh, stty = spawn_shell()
    run_demo(sh, "/bin/echo", "hi", env="PROMPT_DEMO_BROKEN=1 ")
    wait_ready(sh)
    sh.send("q")
    r = finish(sh, stty, restored=False)
    assert r["decision"] == "quit"
