"""`lazaret run -- CMD` with plain pipes: exit status, byte-exact data."""
import hashlib
import os

from conftest import lz_run


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
