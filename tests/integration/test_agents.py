"""The built-in agent profiles claude, codex and opencode (issue 13).

The image tests build the real agent images (Debian mirror + npm registry:
marked `network` and `slow`; CI has both, as for the default image) and
run the real agents in the real sandbox. The configuration tests need
neither.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, Env, lz_run, make_git_repo, user_processes, wait_until

AGENTS = ("claude", "codex", "opencode")

# Each built-in profile keeps its agent's state in <Storage Root>/NAME/,
# shared by every Domain of the profile, and the Storage Root is shared by
# the pytest-xdist workers: two agents writing one ~/.claude at once is not
# what these tests check, so they run on one worker, one after another, as
# in a serial run.
pytestmark = pytest.mark.xdist_group("agent-state")
BUILD_TIMEOUT = 1800


def config_check(lazaret, env, workspace, *args, **kw):
    return subprocess.run([lazaret, "config", "check", *args], cwd=workspace, env=env.environ(**kw),
                          capture_output=True, text=True, timeout=60)


def sandbox_processes():
    return [p for pat in ("runsc", "slirp4netns", "lazaret-router", "lazaret-core __supervisor",
                          "lazaret-core __coordinator") for p in user_processes(pat)]


@pytest.fixture
def agent_env(tmp_path, storage):
    """A configuration file that defines no agent profile: the built-ins apply."""
    return Env(tmp_path / "agent-env", storage, "builtin:debian-bookworm")


@pytest.fixture
def offline_env(agent_env):
    """The built-in profiles with no public address allowed and no name
    resolved (egress "locked": no built-in names, so not the agent's API
    either): the sandbox's own loopback still works (127/8 in the Domain's
    namespace is its own)."""
    agent_env.write_config(extra='[network]\ndefault_allow = []\negress = "locked"\n')
    return agent_env


# ---- configuration (no image needed) -----------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_config_check_shows_the_builtin(lazaret, agent_env, workspace, agent):
    r = config_check(lazaret, agent_env, workspace, "-p", agent)
    assert r.returncode == 0, r.stderr
    assert f'# built-in agent profile (the configuration does not define "{agent}")' in r.stdout
    assert f'image = "builtin:agent-{agent}"' in r.stdout
    assert f'command = ["{agent}"]' in r.stdout
    # the agent's state lives beneath {profile_dir}, never in the workspace
    assert f'host = "{agent_env.storage}/{agent}/' in r.stdout
    assert str(workspace) + "/" not in r.stdout.split("[profiles.")[1].split("# Profile directory")[0]


def test_builtin_agent_without_a_configuration_file(lazaret, agent_env, workspace):
    agent_env.config.unlink()
    r = config_check(lazaret, agent_env, workspace, "-p", "codex")
    assert r.returncode == 0, r.stderr
    assert 'using the built-in profile "codex"' in r.stderr
    assert f'host = "{agent_env.home}/.local/share/lazaret/codex/codex", container = "/root/.codex"' in r.stdout
    # positive control: a name that is neither default nor an agent is refused
    r = config_check(lazaret, agent_env, workspace, "-p", "nope")
    assert r.returncode != 0
    assert '"default", "claude", "codex" and "opencode"' in r.stderr


def test_builtin_env_passes_only_what_is_set(lazaret, agent_env, workspace):
    """The built-in claude profile's API key is a credential (docs/credentials.md):
    not used when unset on the host; when set, kept on the host (the sandbox
    gets a placeholder), never printed."""
    r = config_check(lazaret, agent_env, workspace, "-p", "claude")
    assert r.returncode == 0, r.stderr
    assert ('[profiles.claude.credentials.ANTHROPIC_API_KEY]  # not used: "ANTHROPIC_API_KEY" is not set on the host'
            in r.stdout)
    r2 = config_check(lazaret, agent_env, workspace, "-p", "claude", ANTHROPIC_API_KEY="sk-lz-secret-0123")
    assert r2.returncode == 0, r2.stderr
    assert ("[profiles.claude.credentials.ANTHROPIC_API_KEY]  # the sandbox holds a placeholder; the TLS gate adds "
            "the value for this host only") in r2.stdout
    assert "sk-lz-secret" not in r2.stdout
    # whether the key is set is not configuration: same Domain, same fingerprint
    fp = [line for line in r.stdout.splitlines() if "Configuration Fingerprint" in line]
    fp2 = [line for line in r2.stdout.splitlines() if "Configuration Fingerprint" in line]
    assert fp and fp == fp2


def test_user_profile_named_claude_overrides_the_builtin(lazaret, agent_env, workspace):
    agent_env.write_config(extra='[profiles.claude]\nimage = "builtin:debian-bookworm"\n'
                                 'env = { K = "env:LZ_AGENTS_UNSET" }\n')
    r = config_check(lazaret, agent_env, workspace, "-p", "claude")
    # the user's profile, with the strict rule for a missing variable
    assert r.returncode != 0
    assert 'host environment variable "LZ_AGENTS_UNSET" is not set' in r.stderr
    r = config_check(lazaret, agent_env, workspace, "-p", "claude", LZ_AGENTS_UNSET="x")
    assert r.returncode == 0, r.stderr
    assert "built-in agent profile" not in r.stdout
    assert 'image = "builtin:debian-bookworm"' in r.stdout
    assert "# command: none (a login shell)" in r.stdout


def test_image_bootstrap_agent_usage(lazaret, agent_env, workspace):
    for args, msg in ((["--agent", "nope"], 'unknown agent "nope"'),
                      (["--refresh"], "--refresh applies to --agent NAME"),
                      (["--agent", "claude", "--suite", "trixie"], "--agent and --suite exclude each other")):
        r = subprocess.run([lazaret, "image", "bootstrap", *args], cwd=workspace, env=agent_env.environ(),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr


def test_profile_command_is_the_default_argv(lazaret, env, workspace):
    """`command` runs when `lazaret run` has no CMD; a CMD replaces it."""
    env.write_config(extra_profile='command = ["sh", "-c", "echo from-command"]')
    r = lz_run(lazaret, env, workspace, [])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"from-command\n"
    r = lz_run(lazaret, env, workspace, ["echo", "from-argv"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"from-argv\n"
    # positive control: without the key the same run is a login shell, not the command
    env.write_config()
    r = lz_run(lazaret, env, workspace, [], input=b"echo from-shell\n")
    assert r.stdout != b"from-command\n"
    assert b"from-shell" in r.stdout


# ---- the real images ---------------------------------------------------


@pytest.fixture(scope="session")
def agent_images(tmp_path_factory, storage, lazaret):
    """Builds each agent image once per Storage Root (skipped when stored)."""
    e = Env(tmp_path_factory.mktemp("agent-build"), storage, "builtin:debian-bookworm")
    built = {}

    def build(agent):
        if agent not in built:
            r = subprocess.run([lazaret, "image", "bootstrap", "--agent", agent], env=e.environ(),
                               capture_output=True, text=True, timeout=BUILD_TIMEOUT)
            assert r.returncode == 0, r.stderr[-3000:]
            built[agent] = r.stdout
        return built[agent]
    return build


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("agent", AGENTS)
def test_agent_version_runs(lazaret, agent_images, agent_env, workspace, agent):
    agent_images(agent)
    r = lz_run(lazaret, agent_env, workspace, [agent, "--version"], profile=agent, timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert any(ch.isdigit() for ch in r.stdout.decode()), r.stdout
    # a second bootstrap without --refresh keeps the stored image
    out = agent_images(agent)
    assert f"builtin:agent-{agent}" in out


@pytest.mark.slow
@pytest.mark.network
def test_claude_state_survives_restart_is_shared_and_absent_from_workspaces(lazaret, agent_images, agent_env,
                                                                            tmp_path):
    agent_images("claude")
    ws1 = make_git_repo(tmp_path / "one")
    ws2 = make_git_repo(tmp_path / "two")
    state = Path(agent_env.storage) / "claude" / "claude"
    marker = f"lz-state-{tmp_path.name}"
    # the default command is the agent; CLAUDE_CONFIG_DIR puts .claude.json in the volume
    r = lz_run(lazaret, agent_env, ws1, ["bash", "-c",
               f'echo {marker} > /root/.claude/{marker} && echo "$CLAUDE_CONFIG_DIR" && command -v claude'],
               profile="claude", timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert r.stdout.decode().split() == ["/root/.claude", "/usr/local/bin/claude"]
    assert (state / marker).read_text() == marker + "\n"
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    # the next Domain of the same workspace (a restart), and another workspace's Domain
    for ws in (ws1, ws2):
        r = lz_run(lazaret, agent_env, ws, ["cat", f"/root/.claude/{marker}"], profile="claude", timeout=600)
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
        assert r.stdout.decode() == marker + "\n"
        assert wait_until(lambda: not sandbox_processes(), timeout=45)
    # never inside a workspace
    for ws in (ws1, ws2):
        hits = [p for p in ws.rglob("*") if marker in p.name or p.name in (".claude", ".claude.json")]
        assert hits == []
    # positive control: the same search finds the marker where it is
    assert [p for p in state.rglob("*") if marker in p.name]


@pytest.mark.slow
@pytest.mark.network
def test_user_profile_named_claude_runs_instead_of_the_builtin(lazaret, agent_env, debian, workspace):
    agent_env.write_config(extra='[profiles.claude]\nimage = "builtin:debian-bookworm"\n')
    r = lz_run(lazaret, agent_env, workspace, ["sh", "-c", "command -v claude || echo no-claude"],
               profile="claude", timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert r.stdout.decode().strip() == "no-claude"


@pytest.mark.slow
@pytest.mark.network
def test_api_keys_reach_their_profile_only_when_set(lazaret, agent_images, agent_env, workspace):
    """Under "balanced" (the agent's API host allowed) the claude profile's
    key is a credential: the sandbox holds a placeholder, never the key,
    and never another profile's key (docs/credentials.md). Nothing is
    contacted: the command only prints its environment."""
    agent_images("claude")
    agent_env.write_config(extra='[network]\ndefault_allow = []\negress = "balanced"\n')
    show = ["sh", "-c", 'echo "A=${ANTHROPIC_API_KEY-unset} O=${OPENAI_API_KEY-unset}"']
    cmd = [lazaret, "run", "-p", "claude", "--"] + show
    r = subprocess.run(cmd, cwd=workspace, capture_output=True, timeout=600,
                       env=agent_env.environ(ANTHROPIC_API_KEY="sk-lz-a-0123456789",
                                             OPENAI_API_KEY="sk-lz-o-0123456789"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    out = r.stdout.decode()
    assert re.fullmatch(r"A=lzph_[0-9a-f]{32} O=unset\n", out), out
    assert "sk-lz" not in out
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    r = subprocess.run(cmd, cwd=workspace, capture_output=True, timeout=600, env=agent_env.environ())
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert r.stdout.decode() == "A=unset O=unset\n"


@pytest.mark.slow
@pytest.mark.network
def test_claude_interactive_first_screen_and_clean_exit(lazaret, agent_images, offline_env, workspace):
    """`lazaret run -p claude` (no CMD: the profile's command) reaches Claude
    Code's first screen on a real terminal, without an API call, and exits
    on Ctrl-C with the host terminal restored. No public address is
    allowed, so nothing is contacted."""
    agent_env = offline_env
    import pexpect
    agent_images("claude")
    sh = pexpect.spawn("/bin/bash", ["--norc", "--noprofile"], cwd=str(workspace),
                       env=agent_env.environ(PS1="HOST$ "), encoding="utf-8", timeout=120,
                       dimensions=(40, 120))
    sh.expect("HOST\\$ ")
    sh.sendline("stty -g > .lz-stty-before; echo saved")
    sh.expect("saved")
    sh.expect("HOST\\$ ")
    sh.sendline(f"{lazaret} run -p claude; echo client-exit=$?")
    # The first screen (words are placed by cursor moves, not spaces). If
    # Claude Code then says it cannot reach its service and exits by itself,
    # that is seen; otherwise Ctrl-C ends it.
    sh.expect(r"Welcome.{0,40}?to.{0,40}?Claude.{0,40}?Code", timeout=300)
    for _ in range(4):
        if sh.expect([r"client-exit=(\d+)", pexpect.TIMEOUT], timeout=5) == 0:
            break
        sh.sendcontrol("c")
    else:
        pytest.fail("claude did not exit on Ctrl-C")
    # the agent's own status, not Lazaret's launch failure
    assert sh.match.group(1) != "125"
    sh.expect("HOST\\$ ")
    sh.sendline("stty -g | cmp - .lz-stty-before && echo RESTORED; rm -f .lz-stty-before")
    sh.expect("RESTORED")
    sh.sendline("exit")
    sh.expect(pexpect.EOF)
    assert wait_until(lambda: not sandbox_processes(), timeout=45)


# ---- unattended modes, against a fake model on the sandbox's loopback ----
#
# Each agent talks to a fake model server (tests/fixtures/fake-model/, one
# file per API) that runs inside the same sandbox session on 127.0.0.1. Its
# first answer asks the agent's shell tool to run `touch /workspace/MADE`;
# once the agent sends the tool's result back it answers with a final text.
# The file must appear in the host's workspace, made without any prompt
# (stdin is /dev/null). Control: the same run without the unattended flag
# reaches the same tool call (the server saw it and got a result back) and
# does not make the file.
#
# No test here contacts an agent's service: the configuration allows no
# public address and resolves no name ([network] default_allow = [] and
# egress = "locked", which apply to the built-in profiles too), so the
# fake on the sandbox's own loopback is the only thing reachable, and the agents' optional traffic is switched off
# where they have a switch.

MADE = "made-by-agent"
FAKE_DIR = ".lz-fake"

DRIVER = r"""
coproc SRV {{ exec node /workspace/{fake_dir}/{server}.js 2>/tmp/lz-fake.log; }}
read -t 30 -u "${{SRV[0]}}" port || {{ echo "fake server did not start"; cat /tmp/lz-fake.log; exit 99; }}
export FAKE_URL=http://127.0.0.1:$port
cd /workspace
{prelude}
timeout 240 {agent_cmd} </dev/null 2>&1
echo "agent-rc=$?"
kill "$SRV_PID"
echo "--- fake log"
cat /tmp/lz-fake.log
"""


def run_against_fake(lazaret, env, workspace, agent, server, agent_cmd, prelude=""):
    """Runs agent_cmd (a bash command; $FAKE_URL is the fake's base URL),
    after the bash lines prelude, in a session of the agent's built-in
    profile with the fake model `server` beside it. Returns (the session's
    output, the fake's request log)."""
    shutil.copytree(FIXTURES / "fake-model", workspace / FAKE_DIR)
    script = DRIVER.format(fake_dir=FAKE_DIR, server=server, agent_cmd=agent_cmd, prelude=prelude)
    r = lz_run(lazaret, env, workspace, ["bash", "-c", script], profile=agent, timeout=600)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0 and "--- fake log" in out, (r.returncode, out[-3000:],
                                                         r.stderr.decode(errors="replace")[-2000:])
    session, log = out.split("--- fake log\n", 1)
    requests = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    return session, requests


def tool_results(requests):
    """The shell tool's results the agent sent back, after the fake asked
    for the call (proves the agent got that far)."""
    asked = [i for i, q in enumerate(requests) if q.get("call")]
    assert asked, requests
    return [q["tool_result"] for q in requests[asked[0] + 1:] if q.get("tool_result") is not None]


def made_on_host(workspace):
    made = workspace / MADE
    if not made.exists():
        return False
    # the developer's file on the host, not a mapped root's
    assert made.stat().st_uid == os.getuid()
    return True


CLAUDE_ENV = ("env ANTHROPIC_BASE_URL=$FAKE_URL ANTHROPIC_API_KEY=sk-lz-fake "
              "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 ")
CLAUDE_GUARD = "cannot be used with root/sudo privileges"


@pytest.mark.slow
@pytest.mark.network
def test_claude_unattended_mode_runs_the_tool_without_a_prompt(lazaret, agent_images, offline_env, workspace):
    """`claude -p --dangerously-skip-permissions` runs the model's shell
    command as root inside (IS_SANDBOX=1 in the profile lets it)."""
    agent_images("claude")
    cmd = CLAUDE_ENV + f"claude -p 'create the file {MADE}' --dangerously-skip-permissions"
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "claude", "anthropic", cmd)
    assert "agent-rc=0" in out, out
    assert CLAUDE_GUARD not in out, out
    assert tool_results(reqs), reqs
    assert made_on_host(workspace), (out, reqs)


@pytest.mark.slow
@pytest.mark.network
def test_claude_without_the_flag_asks_instead(lazaret, agent_images, offline_env, workspace):
    """Control: the same run without --dangerously-skip-permissions gets
    the same tool call and refuses it (print mode cannot ask)."""
    agent_images("claude")
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "claude", "anthropic",
                                 CLAUDE_ENV + f"claude -p 'create the file {MADE}'")
    results = tool_results(reqs)
    assert results and "approval" in results[-1], (out, reqs)
    assert not made_on_host(workspace)


@pytest.mark.slow
@pytest.mark.network
def test_claude_unattended_mode_as_root_needs_the_sandbox_signal(lazaret, agent_images, offline_env, workspace):
    """Control for IS_SANDBOX=1: without it Claude Code refuses the flag as
    root before any request, so the profile's variable is what lets it."""
    agent_images("claude")
    cmd = "env IS_SANDBOX= " + CLAUDE_ENV + f"claude -p 'create the file {MADE}' --dangerously-skip-permissions"
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "claude", "anthropic", cmd)
    assert CLAUDE_GUARD in out, out
    assert not any(q.get("call") for q in reqs), reqs
    assert not made_on_host(workspace)


# A provider of the config (no key: nothing to authenticate), the model name
# unknown to Codex (it warns and uses fallback metadata).
CODEX_EXEC = ("codex exec -c model_provider=lzfake "
              "-c 'model_providers.lzfake={name=\"lzfake\", base_url=\"'$FAKE_URL'/v1\", wire_api=\"responses\"}' "
              "-m lz-fake-model ")


@pytest.mark.slow
@pytest.mark.network
def test_codex_unattended_mode_runs_the_tool_without_a_prompt(lazaret, agent_images, offline_env, workspace):
    agent_images("codex")
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "codex", "openai-responses",
                                 CODEX_EXEC + f"--dangerously-bypass-approvals-and-sandbox 'create the file {MADE}'")
    assert "agent-rc=0" in out, out
    assert "sandbox: danger-full-access" in out, out
    assert tool_results(reqs), reqs
    assert made_on_host(workspace), (out, reqs)


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write"])
def test_codex_own_sandbox_modes_do_not_run_the_tool(lazaret, agent_images, offline_env, workspace, sandbox):
    """Control: without the flag (exec's default is read-only) Codex wraps
    the command in its own sandbox (bubblewrap), which cannot be set up
    inside gVisor: even workspace-write, which would allow the file, runs
    nothing. This is why Lazaret documents the bypass flag for Codex."""
    agent_images("codex")
    flag = "" if sandbox == "read-only" else "--sandbox workspace-write "
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "codex", "openai-responses",
                                 CODEX_EXEC + flag + f"'create the file {MADE}'")
    assert f"sandbox: {sandbox}" in out, out
    results = tool_results(reqs)
    assert results and "exited with code 0" not in results[-1], (out, reqs)
    assert "bwrap" in results[-1], (out, reqs)
    assert not made_on_host(workspace)


def opencode_prelude(permission=None):
    """opencode's configuration in OPENCODE_CONFIG_CONTENT (not in the
    profile's shared config directory): an OpenAI-compatible provider (its
    SDK is bundled: nothing is downloaded) at the fake; optional traffic off."""
    cfg = {"provider": {"lzfake": {"npm": "@ai-sdk/openai-compatible", "name": "lzfake",
                                   "options": {"baseURL": "@URL@/v1", "apiKey": "sk-lz-fake"},
                                   "models": {"lz-fake-model": {"name": "lz-fake-model"}}}},
           "model": "lzfake/lz-fake-model", "autoupdate": False, "share": "disabled"}
    if permission:
        cfg["permission"] = permission
    return (f"CFG='{json.dumps(cfg)}'\n"
            'export OPENCODE_CONFIG_CONTENT="${CFG//@URL@/$FAKE_URL}"\n'
            "export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 "
            "OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1")


OPENCODE_RUN = "opencode run -m lzfake/lz-fake-model "


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("permission", [None, {"bash": "ask"}], ids=["defaults", "bash-ask"])
def test_opencode_unattended_mode_runs_the_tool_without_a_prompt(lazaret, agent_images, offline_env, workspace,
                                                                  permission):
    """`opencode run --auto` runs the call, also where the configuration
    says to ask for bash."""
    agent_images("opencode")
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "opencode", "openai-chat",
                                 OPENCODE_RUN + f"--auto 'create the file {MADE}'", opencode_prelude(permission))
    assert "agent-rc=0" in out, out
    assert tool_results(reqs), reqs
    assert made_on_host(workspace), (out, reqs)


@pytest.mark.slow
@pytest.mark.network
def test_opencode_without_the_flag_rejects_what_asks(lazaret, agent_images, offline_env, workspace):
    """Control: without --auto, a call its configuration asks about is
    rejected (run cannot ask) and nothing is made."""
    agent_images("opencode")
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "opencode", "openai-chat",
                                 OPENCODE_RUN + f"'create the file {MADE}'", opencode_prelude({"bash": "ask"}))
    assert any(q.get("call") == "bash" for q in reqs), reqs
    assert "auto-rejecting" in out, out
    assert not made_on_host(workspace)


@pytest.mark.slow
@pytest.mark.network
def test_opencode_defaults_run_bash_without_the_flag(lazaret, agent_images, offline_env, workspace):
    """What the docs say of opencode: its default permissions allow bash
    (and edits) without asking, so `opencode run` is unattended already;
    --auto matters for what a configuration sets to "ask"."""
    agent_images("opencode")
    out, reqs = run_against_fake(lazaret, offline_env, workspace, "opencode", "openai-chat",
                                 OPENCODE_RUN + f"'create the file {MADE}'", opencode_prelude())
    assert tool_results(reqs), reqs
    assert made_on_host(workspace), (out, reqs)


@pytest.mark.slow
@pytest.mark.network
def test_codex_login_prints_its_url_and_a_flow_without_callback(lazaret, agent_images, offline_env, workspace):
    """What docs/agents.md says of `codex login`: it prints the sign-in URL
    on the terminal, whose redirect is a callback server on the sandbox's
    loopback (which the host's browser cannot reach), and names the device
    flow that needs none. Nothing is contacted: printing the URL is local,
    and the configuration allows no public address."""
    agent_images("codex")
    # codex login then waits for the callback: bounded by the timeout (20 s,
    # which every run waited out), the session ends once each of the three
    # texts checked below has been printed (its lines are relayed whole).
    login = ("coproc L { exec timeout 20 codex login </dev/null 2>&1; }\n"
             "u= r= d=\n"
             "while IFS= read -r -u \"${L[0]}\" line; do\n"
             "  printf '%s\\n' \"$line\"\n"
             "  case $line in *'https://auth.openai.com/oauth/authorize?'*) u=1 ;; esac\n"
             "  case $line in *'redirect_uri=http%3A%2F%2F127.0.0.1%3A1455%2Fauth%2Fcallback'*) r=1 ;; esac\n"
             "  case $line in *'codex login --device-auth'*) d=1 ;; esac\n"
             "  [ \"$u$r$d\" = 111 ] && break\n"
             "done\n"
             "kill \"$L_PID\" 2>/dev/null; wait\n")
    r = lz_run(lazaret, offline_env, workspace, ["bash", "-c", login], profile="codex", timeout=600)
    out = r.stdout.decode(errors="replace")
    assert "https://auth.openai.com/oauth/authorize?" in out, out
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A1455%2Fauth%2Fcallback" in out, out
    assert "codex login --device-auth" in out, out
