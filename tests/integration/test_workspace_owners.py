"""Every sandbox user can work in /workspace, and host files stay the developer's.

gVisor checks permissions itself against the owners it is shown, and gives
a new file to its creator. The router keeps that sandbox-side owner in the
host file's `user.lazaret.owner` xattr and shows it inside; on the host the
file belongs to the developer (the test user).
"""
import os
import subprocess

import pytest

from conftest import lz_run

AS_USER = "setpriv --reuid 1000 --regid 1000 --clear-groups"


@pytest.mark.slow
def test_non_root_user_creates_and_owns_files_in_workspace(lazaret, debian, workspace):
    (workspace / "shared").mkdir()
    os.chmod(workspace / "shared", 0o777)
    (workspace / "mine").mkdir()
    os.chmod(workspace / "mine", 0o755)
    script = (f"cd /workspace; {AS_USER} sh -c 'mkdir shared/d && echo data > shared/d/f && "
              "chmod 600 shared/d/f && cat shared/d/f && echo created'; "
              f"{AS_USER} sh -c 'touch mine/x' 2>&1; echo denied=$?; "
              "ls -ln shared/d/f | cut -d' ' -f3,4; "
              "chown 1234:1234 shared/d/f && ls -ln shared/d/f | cut -d' ' -f3,4; "
              f"{AS_USER} sh -c 'cat shared/d/f' 2>&1; echo other=$?")
    r = lz_run(lazaret, debian, workspace, ["sh", "-c", script])
    out = r.stdout.decode()
    assert r.returncode == 0, (out, r.stderr.decode())
    lines = out.split("\n")
    assert "data" in lines and "created" in lines, out
    # A root-owned 0755 directory refuses uid 1000, as on a local disk.
    assert "Permission denied" in out and "denied=1" in out, out
    assert "1000 1000" in lines, out
    assert "1234 1234" in lines, out
    # mode 600 and now owned by 1234: uid 1000 may not read it any more.
    assert "other=1" in out, out
    # On the host: the developer's files, the sandbox-side owner beside them.
    f = workspace / "shared" / "d" / "f"
    st = os.stat(f)
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert os.getxattr(f, "user.lazaret.owner") == b"1234:1234"
    assert (f.stat().st_mode & 0o777) == 0o600
    assert os.stat(workspace / "shared" / "d").st_uid == os.getuid()


@pytest.mark.slow
def test_owner_shown_inside_comes_only_from_the_host_side_record(lazaret, debian, workspace):
    f = workspace / "owned.txt"
    f.write_text("x\n")
    # The sandbox cannot set xattrs on the workspace (gVisor refuses them:
    # tests/posix xattr.user.set) and the router serves none, so this record
    # is the host's alone.
    script = "cd /workspace; ls -ln owned.txt | cut -d' ' -f3,4"
    r = lz_run(lazaret, debian, workspace, ["sh", "-c", script])
    assert r.stdout.decode().split("\n")[0] == "0 0", r.stdout
    # Positive control: the record on the host is what is shown inside.
    os.setxattr(f, "user.lazaret.owner", b"4321:4321")
    r = lz_run(lazaret, debian, workspace, ["sh", "-c", script])
    assert r.stdout.decode().split("\n")[0] == "4321 4321", r.stdout
