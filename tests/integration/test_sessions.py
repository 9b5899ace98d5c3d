"""Several sessions share one Domain's sandbox (the coordinator serves them all)."""
import pexpect

from conftest import lz_run, user_processes

PROMPT = r"[#$] "


def spawn(lazaret, env, workspace):
    return pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=env.environ(),
                         encoding="utf-8", timeout=60, dimensions=(24, 80))


def test_two_sessions_share_one_sandbox(lazaret, env, workspace):
    a = spawn(lazaret, env, workspace)
    a.expect(PROMPT)
    a.sendline("echo from-a > /tmp/shared; echo WRO''TE")
    a.expect("WROTE")
    coords = user_processes("lazaret-core __coordinator")
    assert len(coords) == 1
    # A second session joins the same sandbox: it sees A's /tmp.
    r = lz_run(lazaret, env, workspace, ["cat", "/tmp/shared"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"from-a\n"
    assert user_processes("lazaret-core __coordinator") == coords
    # Leaving B does not stop the Domain A still uses.
    a.sendline("cat /tmp/shared")
    a.expect("from-a")
    a.sendline("exit")
    a.expect(pexpect.EOF)


def test_join_with_changed_configuration_refused(lazaret, env, workspace):
    a = spawn(lazaret, env, workspace)
    a.expect(PROMPT)
    env.write_config(extra_profile='env = { FOO = "bar" }\n')
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode == 125
    assert b"different configuration" in r.stderr
    a.sendline("exit")
    a.expect(pexpect.EOF)
