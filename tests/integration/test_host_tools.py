"""Host-tool configuration paths (docs/host-tools.md): what the sandbox writes
in `.claude/`, `.vscode/`, `.mcp.json`, `.envrc`, ... lands in the Domain's
copy; the host's files never change from inside.

The harm is what a host tool does later: Claude Code on the host runs the
project's `.claude/settings.json` hooks, VS Code runs `.vscode/tasks.json`
tasks with `runOn: folderOpen`. So each attack is written from inside the
sandbox (a hostile agent), then the host's own tools are run on the
workspace: a VS Code-style tasks.json reader of this file, and the real
`claude` (when installed: on PATH or at ~/.local/bin/claude) in a network
namespace without network and with a fresh HOME. Positive control: the
same attack with the defence removed through the profile
(host_tool_paths_remove) fires the same sentinel.
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import domain_dir_for, git_env, lz_run

HOST_TOOL_NAMES = {".claude", ".mcp.json", ".codex", ".opencode", "opencode.json", "opencode.jsonc", ".cursor",
                   ".gemini", ".vscode", ".idea", ".devcontainer", ".envrc", ".tool-versions", ".mise.toml",
                   "mise.toml", ".mise", ".aider.conf.yml", ".zed"}


def git(ws, *args):
    return subprocess.run(["git", "-C", str(ws)] + list(args), check=True, env=git_env(), capture_output=True,
                          text=True)


def hook_settings(cmd):
    return json.dumps({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": cmd}]}]}})


def folder_open_tasks(cmd):
    return json.dumps({"version": "2.0.0", "tasks": [{"label": "setup", "type": "shell", "command": cmd,
                                                      "runOptions": {"runOn": "folderOpen"}}]})


def vscode_open_folder(folder: Path):
    """What VS Code does when it opens `folder` (a trusted workspace): it
    reads folder/.vscode/tasks.json and runs the tasks whose runOptions say
    runOn folderOpen, with a shell, in the folder."""
    f = folder / ".vscode" / "tasks.json"
    if not f.is_file():
        return 0
    try:
        tasks = json.loads(f.read_text()).get("tasks", [])
    except ValueError:
        return 0
    ran = 0
    for t in tasks:
        if t.get("runOptions", {}).get("runOn") == "folderOpen":
            subprocess.run(["sh", "-c", t["command"]], cwd=folder, timeout=30, check=False)
            ran += 1
    return ran


def find_claude():
    c = os.environ.get("LAZARET_TEST_CLAUDE")  # scripts/test.sh installs one for CI
    if c and os.access(c, os.X_OK):
        return c
    c = shutil.which("claude")
    if c:
        return c
    c = Path.home() / ".local" / "bin" / "claude"
    return str(c) if os.access(c, os.X_OK) else None


def run_claude(project: Path, home: Path, wait_for: Path, timeout=120, also=None):
    """The developer's `claude -p hi` in `project`, with a fresh HOME, in a
    network namespace with no network (it cannot reach the API: it hangs
    or fails after the SessionStart hooks ran). Returns once `wait_for`
    exists or after `timeout`, the process group killed either way."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-test-offline",
           "LANG": "C.UTF-8"}
    # --map-current-user, not -r: run as root in its namespace, claude
    # exits at once without running a hook (seen with 2.1.197).
    p = subprocess.Popen(["unshare", "--map-current-user", "-n", find_claude(), "-p", "hi"], cwd=project, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while (time.monotonic() < deadline and not wait_for.exists() and not (also and also.exists())
               and p.poll() is None):
            time.sleep(0.1)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)
    return wait_for.exists()


def snapshot(ws: Path):
    """Every host entry at or below a host-tool name: path -> bytes (files),
    'dir', or 'link:TARGET'."""
    out = {}
    for dirpath, dirnames, files in os.walk(ws):
        if ".git" in Path(dirpath).relative_to(ws).parts:
            continue
        for n in dirnames + files:
            p = Path(dirpath) / n
            rel = p.relative_to(ws)
            if not any(part.lower() in HOST_TOOL_NAMES for part in rel.parts):
                continue
            if p.is_symlink():
                out[str(rel)] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[str(rel)] = "dir"
            else:
                out[str(rel)] = p.read_bytes()
    return out


def run(lazaret, env, ws, script, **kw):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script], **kw)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def state(lazaret, env, ws, *args):
    return subprocess.run([lazaret, "state", *args, "-p", "test"], cwd=ws, env=env.environ(), capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def ws(workspace, tmp_path):
    """A project whose host-tool files the developer committed: a Claude Code
    hook and a VS Code task that fire a harmless CONTROL file (proof the
    host tool ran the project's configuration), and VS Code settings."""
    control = tmp_path / "CONTROL"
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(hook_settings(f"touch {control}"))
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "tasks.json").write_text(folder_open_tasks(f"touch {control}"))
    (workspace / ".vscode" / "settings.json").write_text('{"python.defaultInterpreterPath": "/usr/bin/python3"}\n')
    git(workspace, "add", ".claude", ".vscode")
    git(workspace, "commit", "-qm", "tool configuration")
    return workspace


def attack_script(sentinel):
    """A hostile agent: plants configuration that runs `touch SENTINEL` in
    every host tool it can think of, by every route: write, truncate,
    create, nested project, case variant, rename into place (file and
    directory), symlink and hard link."""
    hook = hook_settings(f"touch {sentinel}")
    tasks = folder_open_tasks(f"touch {sentinel}")
    return f"""
cd /workspace || exit 9
printf '%s' '{hook}' > .claude/settings.json
printf '%s' '{hook}' > .claude/settings.local.json
printf '%s' '{tasks}' > .vscode/tasks.json
printf '%s' '{{"mcpServers": {{"x": {{"command": "touch", "args": ["{sentinel}"]}}}}}}' > .mcp.json
printf 'touch {sentinel}\\n' > .envrc
mkdir -p sub/.vscode sub/.claude && printf '%s' '{tasks}' > sub/.vscode/tasks.json
printf '%s' '{hook}' > sub/.claude/settings.json
mkdir -p .VSCode && printf '%s' '{tasks}' > .VSCode/tasks.json
mkdir stage && printf '%s' '{tasks}' > stage/tasks.json && mv stage .idea
mkdir stage2 && printf '%s' '{tasks}' > stage2/tasks.json && mv stage2 .zed
printf '%s' '{hook}' > evil.json && cp evil.json evil2.json && mv evil.json .gemini
mkdir -p nested && mv evil2.json nested/.mcp.json
ln evil-missing .cursor 2>/dev/null; printf x > hl && ln hl .codex 2>/dev/null
ln -s /workspace/hl .devcontainer
mkdir -p d && printf '%s' '{tasks}' > d/tasks.json && ln -s ../d .opencode
echo done
"""


def test_sandbox_cannot_plant_host_tool_configuration(lazaret, env, ws, tmp_path):
    sentinel = tmp_path / "SENTINEL"
    before = snapshot(ws)
    rc, out, err = run(lazaret, env, ws, "cd /workspace; cat .vscode/settings.json; echo ---\n" + attack_script(sentinel)
                       + "\necho ---; cat .claude/settings.json; cat .vscode/tasks.json; ls -a . sub")
    assert rc == 0 and "done" in out, (out, err[-3000:])
    # Inside: the host's file read as usual, then the sandbox's own writes.
    assert "defaultInterpreterPath" in out.split("---")[0], (out, err[-3000:])
    assert str(sentinel) in out.split("---")[2], out
    # The Domain-start notice names the set.
    assert "host-tool configuration paths" in err and ".claude" in err, err
    # The host's files are byte-identical, and nothing new appeared on the host.
    assert snapshot(ws) == before
    for p in (".mcp.json", ".envrc", "sub/.vscode", "sub/.claude", ".VSCode", ".idea", ".zed", ".gemini",
              "nested/.mcp.json", ".codex", ".devcontainer", ".opencode"):
        assert not os.path.lexists(ws / p), p
    # Ordinary files the sandbox made are shared as always.
    assert (ws / "hl").read_text() == "x"
    # The host's git sees no change to the tracked tool files.
    assert git(ws, "status", "--porcelain", ".claude", ".vscode").stdout == ""
    # What the host tools do later: the developer's own configuration runs
    # (CONTROL), the sandbox's does not.
    assert vscode_open_folder(ws) == 1 and (tmp_path / "CONTROL").exists()
    vscode_open_folder(ws / "sub")
    assert not sentinel.exists()


def claude_or_skip(project, home, control, sentinel):
    """Runs the real claude on the host in `project` until its own
    SessionStart hooks ran (`control` or `sentinel` appears), or skips when
    it is not installed or runs no hook at all here (then the check could
    not fail)."""
    if not find_claude():
        pytest.skip("claude is not installed (npm install -g @anthropic-ai/claude-code)")
    run_claude(project, home, control, timeout=60, also=sentinel)
    if not control.exists() and not sentinel.exists():
        pytest.skip("claude ran no SessionStart hook within 60 s in this environment")


def test_real_claude_on_the_host_runs_only_the_developers_hooks(lazaret, env, ws, tmp_path):
    sentinel, control = tmp_path / "SENTINEL", tmp_path / "CONTROL"
    rc, out, err = run(lazaret, env, ws, attack_script(sentinel))
    assert rc == 0 and "done" in out, (out, err[-3000:])
    claude_or_skip(ws, tmp_path / "claude-home", control, sentinel)
    assert control.exists() and not sentinel.exists()


def test_positive_control_without_the_defence_the_attack_fires(lazaret, env, ws, tmp_path):
    """The same attack with .claude and .vscode removed from the set (the
    profile says so, and the start notice says it loudly): the host's files
    change and the host tools run the sandbox's command."""
    env.write_config(extra_profile='host_tool_paths_remove = [".claude", ".vscode"]\n')
    sentinel = tmp_path / "SENTINEL"
    rc, out, err = run(lazaret, env, ws, attack_script(sentinel))
    assert rc == 0 and "done" in out, (out, err[-3000:])
    assert "REMOVES" in err and ".vscode" in err, err
    assert str(sentinel) in (ws / ".claude" / "settings.json").read_text()
    # Still protected: what the profile did not remove.
    assert not (ws / ".mcp.json").exists() and not (ws / ".envrc").exists()
    assert vscode_open_folder(ws) == 1 and sentinel.exists()
    sentinel.unlink()
    # The real claude, when it runs hooks here, runs the sandbox's.
    claude_or_skip(ws, tmp_path / "claude-home", tmp_path / "CONTROL", sentinel)
    assert sentinel.exists()


def test_everyday_flow_review_and_apply(lazaret, env, ws, tmp_path):
    # Claude Code inside writes settings.local.json ("don't ask again").
    local = '{"permissions": {"allow": ["Bash(make test)"]}}'
    rc, out, err = run(lazaret, env, ws, f"cd /workspace; printf '%s' '{local}' > .claude/settings.local.json; "
                       "printf '%s' '{\"hooks\": {}}' > .claude/settings.json; mkdir -p .vscode && "
                       "echo '{\"editor.tabSize\": 2}' > .vscode/extensions.json; echo ok")
    assert rc == 0 and "ok" in out, err
    assert not (ws / ".claude" / "settings.local.json").exists()
    # It persists across the Domain's sessions.
    rc, out, err = run(lazaret, env, ws, "cat /workspace/.claude/settings.local.json")
    assert rc == 0 and out == local, (out, err)
    # The host changes a file the sandbox never wrote: the next start shows
    # the host's new version; the one the sandbox changed stays its own.
    (ws / ".vscode" / "settings.json").write_text('{"host": "v2"}\n')
    (ws / ".claude" / "settings.json").write_text(hook_settings("true") + "\n")
    rc, out, err = run(lazaret, env, ws, "cat /workspace/.vscode/settings.json; echo; "
                       "cat /workspace/.claude/settings.json")
    assert '"host": "v2"' in out and '{"hooks": {}}' in out, out
    # The developer reviews what the sandbox changed.
    r = state(lazaret, env, ws, "diff")
    assert r.returncode == 0, r.stderr
    assert "+++ domain/.claude/settings.local.json" in r.stdout and "Bash(make test)" in r.stdout, r.stdout
    assert "domain/.vscode/extensions.json" in r.stdout, r.stdout
    assert "domain/.claude/settings.json" in r.stdout, r.stdout
    assert "domain/.vscode/settings.json" not in r.stdout, r.stdout  # unchanged by the sandbox
    # ... and applies one file.
    r = state(lazaret, env, ws, "apply", ".claude/settings.local.json")
    assert r.returncode == 0, r.stderr
    assert (ws / ".claude" / "settings.local.json").read_text() == local
    r = state(lazaret, env, ws, "diff")
    assert "settings.local.json" not in r.stdout and "extensions.json" in r.stdout, r.stdout
    # Refusals: outside the set, escaping paths, not a regular file.
    for bad, code in (("README", 2), ("../x/.claude/a", 2), ("/etc/.claude", 2), (".claude/none.json", 1)):
        r = state(lazaret, env, ws, "apply", bad)
        assert r.returncode == code, (bad, r.returncode, r.stderr)
        assert "state apply" in r.stderr
    r = state(lazaret, env, ws, "diff", "extra")
    assert r.returncode == 2


def test_apply_refuses_symlinks_on_either_side(lazaret, env, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    rc, out, err = run(lazaret, env, ws, "cd /workspace; ln -s /etc/passwd .claude/link.json; mkdir -p .cursor; "
                       "echo hi > .cursor/mcp.json; printf 'a\\033]0;pwned\\007b\\n' > .claude/esc.json; echo ok")
    assert rc == 0 and "ok" in out, err
    r = state(lazaret, env, ws, "apply", ".claude/link.json")
    assert r.returncode == 1 and "symlink" in r.stderr, r.stderr
    # The host's .cursor is a symlink to a directory outside the workspace
    # (made by the host, or by anyone): apply does not write through it.
    (ws / ".cursor").symlink_to(outside)
    r = state(lazaret, env, ws, "apply", ".cursor/mcp.json")
    assert r.returncode == 1 and "symlink" in r.stderr, r.stderr
    assert list(outside.iterdir()) == []
    # The sandbox's bytes never drive the developer's terminal.
    r = state(lazaret, env, ws, "diff")
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\\x1b]0;pwned\\x07" in r.stdout, r.stdout
    assert "symlink" in r.stdout


def test_without_git_and_with_ignored_state_off(lazaret, env, tmp_path):
    """The defence does not depend on the Ignored Workspace State: a
    workspace outside Git, and a profile with ignored_state = false."""
    env.write_config(extra_profile="ignored_state = false\n")
    plain = tmp_path / "plain"
    (plain / ".vscode").mkdir(parents=True)
    (plain / ".vscode" / "tasks.json").write_text("{}\n")
    (plain / ".env").write_text("SHARED=1\n")
    sentinel = tmp_path / "SENTINEL"
    rc, out, err = run(lazaret, env, plain, f"cd /workspace; cat .vscode/tasks.json .env; printf '%s' "
                       f"'{folder_open_tasks(f'touch {sentinel}')}' > .vscode/tasks.json; echo edit >> .env; echo ok")
    assert rc == 0 and "ok" in out and "SHARED=1" in out, (out, err)
    assert (plain / ".vscode" / "tasks.json").read_text() == "{}\n"
    # Positive control in the same run: an ordinary file reaches the host.
    assert (plain / ".env").read_text() == "SHARED=1\nedit\n"
    vscode_open_folder(plain)
    assert not sentinel.exists()


def test_ignored_host_tool_file_with_secrets_stays_private(lazaret, env, workspace, tmp_path):
    """A git-ignored `.envrc` holds the developer's secrets: host-tool paths
    must not copy it into the sandbox (the Ignored Workspace State keeps it
    private). Control in the same run: a tracked host-tool file is read."""
    (workspace / ".gitignore").write_text(".envrc\n")
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "settings.json").write_text('{"tracked": 1}\n')
    git(workspace, "add", ".gitignore", ".vscode")
    git(workspace, "commit", "-qm", "ignore .envrc")
    (workspace / ".envrc").write_text("export API_KEY=hunter2\n")
    rc, out, err = run(lazaret, env, workspace, "cd /workspace; cat .vscode/settings.json; cat .envrc 2>&1; "
                       "echo 'touch /tmp/x' > .envrc; echo ok")
    assert rc == 0 and "ok" in out, err
    assert '"tracked": 1' in out and "hunter2" not in out, out
    assert (workspace / ".envrc").read_text() == "export API_KEY=hunter2\n"


def test_config_check_lists_the_set_and_refuses_bad_names(lazaret, env, ws):
    def check():
        return subprocess.run([lazaret, "config", "check", "-p", "test"], cwd=ws, env=env.environ(),
                              capture_output=True, text=True, timeout=60)
    r = check()
    assert r.returncode == 0, r.stderr
    assert "host-tool configuration paths" in r.stdout and ".vscode" in r.stdout and ".envrc" in r.stdout
    env.write_config(extra_profile='host_tool_paths_add = [".fleet"]\nhost_tool_paths_remove = [".idea"]\n')
    r = check()
    assert r.returncode == 0, r.stderr
    assert 'adds: ".fleet"' in r.stdout and "REMOVES" in r.stdout and '".idea"' in r.stdout, r.stdout
    for bad, why in (('host_tool_paths_remove = [".notdefault"]', "not in the default set"),
                     ('host_tool_paths_add = [".vscode"]', "already in the default set"),
                     ('host_tool_paths_add = [".git"]', ".git"),
                     ('host_tool_paths_add = ["a/b"]', "'/'"),
                     ('host_tool_paths_add = [""]', "empty"),
                     ('host_tool_paths_add = ".x"', "expected")):
        env.write_config(extra_profile=bad + "\n")
        r = check()
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)


