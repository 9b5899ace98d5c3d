"""`lazaret run -- CMD` with plain pipes: exit status, byte-exact data."""
import hashlib
import os
import select
import signal
import subprocess

from conftest import domain_dir_for, lz_run, wait_until


def test_exit_status_passthrough(lazaret, env, workspace):
    assert lz_run(lazaret, env, workspace, ["true"]).returncode == 0
    assert lz_run(lazaret, env, workspace, ["sh", "-c", "exit 7"]).returncode == 7
    # Killed by a signal: 128+N, like ssh and docker exec.
    assert lz_run(lazaret, env, workspace, ["sh", "-c", "kill -INT $$"]).returncode == 130
    assert lz_run(lazaret, env, workspace, ["sh", "-c", "kill -TERM $$"]).returncode == 143


def test_stdin_to_command(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["wc", "-c"], input=b"x\n")
    assert r.returncode == 0
    assert r.stdout.strip() == b"2"


def test_stdout_and_stderr_separate(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "echo out; echo err >&2"])
    assert r.stdout == b"out\n"
    assert r.stderr.endswith(b"err\n")
    assert b"out" not in r.stderr


def test_binary_exact_10mib_both_ways(lazaret, env, workspace, tmp_path):
    data = os.urandom(10 * 1024 * 1024)
    r = lz_run(lazaret, env, workspace, ["cat"], input=data)
    assert r.returncode == 0
    assert len(r.stdout) == len(data)
    assert hashlib.sha256(r.stdout).digest() == hashlib.sha256(data).digest()
    # And from a file in the workspace to stdout and to stderr.
    (workspace / "blob").write_bytes(data)
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "cat /workspace/blob; cat /workspace/blob >&2"])
    assert r.stdout == data
    assert r.stderr.endswith(data)


def test_sha256_inside_matches(lazaret, env, workspace):
    data = os.urandom(3 * 1024 * 1024 + 17)
    r = lz_run(lazaret, env, workspace, ["sha256sum"], input=data)
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_arguments_arrive_verbatim(lazaret, env, workspace):
    args = ["printf", "[%s]\\n", "a b", "", "$HOME", "'q'", "ünï"]
    r = lz_run(lazaret, env, workspace, args)
    assert r.returncode == 0
    assert r.stdout.decode() == "[a b]\n[]\n[$HOME]\n['q']\n[ünï]\n"


def test_command_not_found(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["/no/such/program"])
    assert r.returncode != 0


def test_exit_status_reaches_a_client_that_sends_after_the_command_ended(lazaret, env, workspace):
    """The command ends and the Domain stops (linger 0) while the client is
    not running (SIGSTOP: a loaded machine); when it runs again it has stdin
    to send (its EOF) to a coordinator that is gone. The output and the
    exit status wait in its receive queue: it must print them and exit with
    the command's status, not report a coordinator that ended
    unexpectedly (CI saw that for short commands under load)."""
    r_fd, w_fd = os.pipe()
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo started; sleep 1; echo done; exit 3"],
                         cwd=workspace, env=env.environ(), stdin=r_fd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    os.close(r_fd)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 120)
        assert ready, "the session did not start"
        assert p.stdout.readline() == b"started\n"
        os.kill(p.pid, signal.SIGSTOP)
        log = domain_dir_for(env, workspace) / "coordinator.log"
        assert wait_until(lambda: "Domain stopped" in log.read_text(errors="replace"), timeout=60), \
            log.read_text(errors="replace")[-3000:]
    finally:
        os.close(w_fd)
        os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert out == b"done\n", (out, err)
