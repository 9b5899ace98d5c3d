"""bash completion (data/bash-completion/lazaret): source it in a real bash
and ask `complete -F` what it offers for a few prefixes, the way bash does
on TAB (COMP_WORDS/COMP_CWORD set, the function called, COMPREPLY read).

Domain IDs come from the `lazaret` the command line names: a stub prints
what `lazaret state ls` / `lazaret ps` print, so the parse is tested without
a Storage Root. test_install.py (tests/root) runs it against a real
installed lazaret.
"""
import os
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
COMPLETION = Path(os.environ.get("LAZARET_COMPLETION") or SRC / "data" / "bash-completion" / "lazaret")

STATE_LS = """DOMAIN        PROFILE           RUNNING  LAST USE                    SIZE  WORKSPACE
12612654d088  test              no       2026-12-01T15:50:16Z    60.0 KiB  /tmp/a/ws
f3d6c9f4bbdb  claude            yes      2026-12-01T15:50:15Z    60.0 KiB  /tmp/b/ws
"""
PS = """f3d6c9f4bbdb  profile claude  generation 1  1 session
    workspace /tmp/b/ws
    session 1  pty   attached  since 2026-12-01T15:50:15Z  bash
"""


def complete(line, home, lazaret="lazaret", completion=COMPLETION):
    """What completing the last word of line offers (sorted, unique)."""
    script = f"""
set -u
source {str(completion)!r}
line={line!r}
read -ra COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_WORDS[0]={lazaret!r}
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE=$line
COMP_POINT=${{#line}}
spec=$(complete -p lazaret)
[[ "$spec" == *"-F _lazaret"* ]] || {{ echo "not registered: $spec" >&2; exit 3; }}
_lazaret lazaret "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return sorted(set(w for w in r.stdout.splitlines() if w))


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    (h / ".config" / "lazaret").mkdir(parents=True)
    (h / ".config" / "lazaret" / "config.toml").write_text(
        '[storage]\ndata_root = "/nonexistent"\n\n'
        '[profiles.default]\nimage = "builtin:debian-bookworm"\n\n'
        '[profiles.claude]\nimage = "builtin:debian-bookworm"\n\n'
        '  [ profiles.codex ]  # indented, spaced\nimage = "x"\n\n'
        '[profiles.claude.env]\nA = "b"\n')
    return h


@pytest.fixture
def stub(tmp_path):
    """A `lazaret` that prints canned `state ls` / `ps` output."""
    s = tmp_path / "bin" / "lazaret"
    s.parent.mkdir()
    (tmp_path / "state_ls.txt").write_text(STATE_LS)
    (tmp_path / "ps.txt").write_text(PS)
    s.write_text(f"""#!/bin/sh
case "$1" in
  state) [ "$2" = ls ] && cat {tmp_path / 'state_ls.txt'} ;;
  ps) cat {tmp_path / 'ps.txt'} ;;
esac
""")
    s.chmod(0o755)
    return s


def test_commands(home):
    assert complete("lazaret ", home) == sorted(
        ["run", "config", "image", "state", "audit", "ps", "stop", "events", "doctor", "-h", "--help", "-V", "--version"])
    assert complete("lazaret st", home) == ["state", "stop"]
    assert complete("lazaret im", home) == ["image"]
    assert complete("lazaret image ", home) == sorted(["bootstrap", "ls", "prepare", "gc", "-h", "--help"])
    assert complete("lazaret state re", home) == ["reset"]
    assert complete("lazaret state d", home) == ["diff"]
    assert complete("lazaret state a", home) == ["apply"]


def test_options(home):
    assert complete("lazaret run --", home) == ["--", "--config", "--help", "--profile"]
    assert complete("lazaret image gc --d", home) == ["--dry-run"]
    assert complete("lazaret stop --f", home) == ["--force"]
    assert complete("lazaret image bootstrap --suite ", home) == ["bookworm", "trixie"]


def test_profiles_from_the_config_file(home, tmp_path):
    assert complete("lazaret run -p ", home) == ["claude", "codex", "default", "opencode"]
    assert complete("lazaret run --profile c", home) == ["claude", "codex"]
    # --config FILE given earlier on the line is the file read.
    other = tmp_path / "other.toml"
    other.write_text('[profiles.aider]\nimage = "x"\n')
    assert complete(f"lazaret run --config {other} -p ", home) == ["aider", "claude", "codex", "default", "opencode"]
    # Without a config file: the built-in profiles.
    assert complete("lazaret run -p ", tmp_path / "nohome") == ["claude", "codex", "default", "opencode"]


def test_domain_ids(home, stub):
    assert complete("lazaret state inspect ", home, lazaret=str(stub)) == ["12612654d088", "f3d6c9f4bbdb"]
    assert complete("lazaret state reset f3", home, lazaret=str(stub)) == ["f3d6c9f4bbdb"]
    assert complete("lazaret audit 1", home, lazaret=str(stub)) == ["12612654d088"]
    # stop offers running Domains only (from `lazaret ps`); its options on "-".
    assert complete("lazaret stop ", home, lazaret=str(stub)) == ["f3d6c9f4bbdb"]
    assert complete("lazaret stop -", home, lazaret=str(stub)) == sorted(
        ["--force", "-p", "--profile", "--config", "-h", "--help"])
    # Options are not mixed with IDs; a failing lazaret gives the options.
    assert complete("lazaret state inspect --j", home, lazaret=str(stub)) == ["--json"]
    assert complete("lazaret state inspect ", home, lazaret="/bin/false") == sorted(
        ["--json", "--config", "-p", "--profile", "--workspace", "-h", "--help"])


def test_after_dashdash_completes_a_command(home):
    """`lazaret run -- CMD`: CMD is a command of its own, not a lazaret option."""
    got = complete("lazaret run -- ech", home)
    assert "echo" in got and "--config" not in got


def test_control_a_broken_completion_fails(home, tmp_path):
    """Positive control: a completion that registers nothing (or offers the
    wrong words) is caught by the same harness."""
    broken = tmp_path / "broken"
    broken.write_text(COMPLETION.read_text().replace("complete -F _lazaret lazaret", ""))
    with pytest.raises(AssertionError):
        complete("lazaret ", home, completion=broken)
    wrong = tmp_path / "wrong"
    wrong.write_text(COMPLETION.read_text().replace("ls inspect verify reset", "ls inspect verify"))
    assert complete("lazaret state re", home, completion=wrong) == []
