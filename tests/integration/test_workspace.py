"""The workspace is shared read-write; nothing else of the host is visible."""
import os

from conftest import lz_run


def test_edits_flow_both_ways(lazaret, env, workspace):
    (workspace / "from-host.txt").write_text("host\n")
    r = lz_run(lazaret, env, workspace, ["sh", "-c",
               "cat /workspace/from-host.txt && echo sandbox > /workspace/from-sandbox.txt && mkdir -p /workspace/d/e"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"host\n"
    assert (workspace / "from-sandbox.txt").read_text() == "sandbox\n"
    assert (workspace / "d" / "e").is_dir()
    # Files the sandbox creates belong to the developer on the host.
    assert (workspace / "from-sandbox.txt").stat().st_uid == os.getuid()


def test_cwd_is_workspace(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "pwd"])
    assert r.stdout == b"/workspace\n"


def test_host_paths_outside_workspace_invisible(lazaret, env, workspace, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("TOPSECRET-" + os.urandom(8).hex())
    home_marker = env.home / "home-marker"
    home_marker.write_text("home")
    script = (f"cat {secret} 2>/dev/null; cat {home_marker} 2>/dev/null; "
              f"ls {tmp_path} 2>/dev/null; cat /etc/shadow 2>/dev/null; ls /home 2>/dev/null; "
              f"cat /proc/1/cmdline; echo END")
    r = lz_run(lazaret, env, workspace, ["sh", "-c", script])
    out = r.stdout.decode(errors="replace")
    assert out.endswith("END\n")
    assert "TOPSECRET" not in out
    assert "home" not in out.replace("/home", "")
    # PID 1 is Lazaret's own init, not a host process.
    assert "/run/lazaret/init" in out


def test_sandbox_cannot_see_host_processes(lazaret, env, workspace):
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "ls /proc | grep -c '^[0-9]'"])
    # init, the shell, ls, grep: a handful, never the host's hundreds.
    assert int(r.stdout) < 10


def test_root_filesystem_changes_stay_in_the_sandbox(lazaret, env, workspace, storage):
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "echo x > /etc/planted && cat /etc/planted"])
    assert r.returncode == 0 and r.stdout == b"x\n"
    # The prepared lower is never written.
    planted = list(storage.glob("prepared/*/rootfs/etc/planted"))
    assert planted == []
