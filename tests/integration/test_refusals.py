"""Refusals that explain themselves (docs/security-git.md, "When something is
refused"): what the workspace router refuses reaches the developer as one
line per kind on a plain shell's terminal (never inside a full-screen
program's screen, never on an agent's session), and every refusal is
listed by `lazaret events` with its path, its reason and what to do
instead, escaped, and bounded under a flood. One Domain, one shell, through
real PTYs, as a person would see it."""
import json
import re
import subprocess
import time

import pexpect
import pytest

pytestmark = pytest.mark.slow

PROMPT = r"[#$] "
NOTICE = "lazaret: refused"


def spawn(lazaret, env, ws, args=()):
    return pexpect.spawn(lazaret, ["run", "-p", "test", *args], cwd=str(ws), env=env.environ(), encoding="utf-8",
                         timeout=90, dimensions=(24, 200))


def run_line(c, line, mark):
    """Runs one shell line and returns what the terminal showed up to `mark`
    (echoed once the line is done)."""
    c.sendline(f"{line}; echo {mark[:3]}''{mark[3:]}")
    c.expect(mark)
    return c.before


def quiet_for(c, seconds):
    """What the terminal shows in `seconds` with nothing typed (consumed:
    an expect that times out would leave it for the next one)."""
    out = c.buffer
    # What followed the last match is in both of pexpect's buffers.
    c.buffer = c.string_type()
    c._before = c.buffer_type()
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            out += c.read_nonblocking(65536, timeout=left)
        except (pexpect.TIMEOUT, pexpect.EOF):
            break
    return out


def events_on_a_terminal(lazaret, env, ws):
    """`lazaret events` on a PTY, as the developer runs it."""
    p = pexpect.spawn(lazaret, ["events", "-p", "test"], cwd=str(ws), env=env.environ(), encoding="utf-8", timeout=30,
                      dimensions=(50, 300))
    p.expect(pexpect.EOF)
    p.close()
    assert p.exitstatus == 0, p.before
    return p.before


def test_refusals_shown_once_per_kind_and_listed(lazaret, debian, workspace):
    c = spawn(lazaret, debian, workspace)
    c.expect(PROMPT)

    # A refused `git init` in the shared tree: one line, naming the reason
    # and what to do instead.
    out = run_line(c, "cd /workspace && git init -q newrepo; echo rc=$?", "DONE-1")
    if NOTICE not in out:
        out += quiet_for(c, 3)
    assert "rc=1" in out or "rc=128" in out, out
    assert out.count(NOTICE) == 1, out
    line = out[out.index(NOTICE):].splitlines()[0]
    assert "mkdir /workspace/newrepo/.git (Operation not permitted)" in line, line
    assert "no new .git" in line and "git-ignored directory" in line and "lazaret events" in line, line

    # A second refusal of the same kind, and one at a path the agent chose
    # with escape bytes: no second line.
    out = run_line(c, "git init -q other", "DONE-2")
    out += run_line(c, r"""d="$(printf 'esc\033[31mred\033]0;pwned\007')"; mkdir -p "$d"; mkdir "$d/.git" """,
                    "DONE-3")
    out += quiet_for(c, 2)
    assert NOTICE not in out, out

    # An agent's session (a command, not a shell) gets no line; the plain
    # shell gets one for the new kind (a refusal is the Domain's, not a
    # session's).
    # (.git/hooks is a tmpfs inside; remotes/ is protected by the router.)
    a = spawn(lazaret, debian, workspace, ["--", "sh", "-c", "mkdir /workspace/.git/remotes; sleep 2; echo AGENT-DONE"])
    a.expect("AGENT-DONE")
    seen = a.before
    a.expect(pexpect.EOF)
    a.close()
    seen += a.before
    assert NOTICE not in seen, seen
    out = quiet_for(c, 3)
    assert out.count(NOTICE) == 1 and "mkdir /workspace/.git/remotes" in out and "read-only" in out, out

    # Inside a full-screen program's screen (the alternate screen) the line
    # waits until the program leaves it.
    c.sendline(r"printf '\033[?1049h'; ln -s x /workspace/.git/lnk; sleep 2; echo IN''ALT; printf '\033[?1049l';"
               r" echo LE''FT")
    c.expect("INALT")
    assert NOTICE not in c.before, c.before
    c.expect("LEFT")
    out = c.before + quiet_for(c, 3)
    assert out.count(NOTICE) == 1 and "symlink /workspace/.git/lnk" in out, out
    assert out.index("\x1b[?1049l") < out.index(NOTICE), out

    # Everything is listed, with path, reason and what to do, escaped.
    text = events_on_a_terminal(lazaret, debian, workspace)
    assert "\x1b[31m" not in text and "\x07" not in text, repr(text)
    for want in ("new-repository mkdir /workspace/newrepo/.git: Operation not permitted",
                 "new-repository mkdir /workspace/other/.git: Operation not permitted",
                 r"new-repository mkdir /workspace/esc\x1b[31mred\x1b]0;pwned\x07/.git",
                 "git-protected  mkdir /workspace/.git/remotes",
                 "git-content    symlink /workspace/.git/lnk: Operation not permitted",
                 "why: no new .git", "instead: clone or init in a git-ignored directory"):
        assert want in text, (want, text)

    # A flood stays bounded: no further line on the terminal, the history
    # keeps the newest, the counts cover all of them.
    # (bash's own redirection: no process per refusal.)
    out = run_line(c, "mkdir -p /workspace/fl; for ((i = 0; i < 3000; i++)); do { : >/workspace/fl/.git; } 2>/dev/null; "
                      "done; git init -q last", "DONE-4")
    out += quiet_for(c, 2)
    assert NOTICE not in out, out[-2000:]
    r = subprocess.run([lazaret, "events", "-p", "test", "--json"], cwd=workspace, env=debian.environ(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    counts = {k: ev[k] for k in ("total", "dropped", "kept", "by_kind")}
    assert 3000 + 6 <= ev["total"] + ev["dropped"] <= 3000 + 12, counts
    # The newest that fit one reply (64 KiB), at most the 256 kept.
    assert 200 <= ev["kept"] == len(ev["events"]) <= 256, counts
    assert ev["reasons"]["git-name"].startswith("no new .git") and "git-ignored" in ev["hints"]["new-repository"]
    assert ev["events"][-1]["path"] == "/workspace/last/.git"
    assert ev["events"][-1]["kind"] == "new-repository" and ev["events"][-1]["why"] == "git-name"
    assert ev["events"][0]["path"] == "/workspace/fl/.git"
    ps = subprocess.run([lazaret, "ps"], env=debian.environ(), capture_output=True, text=True, timeout=30)
    assert re.search(r"\d+ refused operations in the workspace \(lazaret events [0-9a-f]{12}\)", ps.stdout), ps.stdout

    c.sendline("exit 0")
    c.expect(pexpect.EOF)
    c.close()
