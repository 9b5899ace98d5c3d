"""Volumes and symlinks, against the real router, runsc and kernel.

A writable volume is served through its own lazaret-router (--plain): what
the agent does there as root must not leave set-id programs, device nodes
or sockets on the host. Every router (workspace and volumes) refuses a
symlink the host would follow into Lazaret's own storage.

Each defence has a positive control: the same act where no router stands
(the State Anchor's /root, a symlink made on the host) does show on the
host, so the checks below would see a failure.
"""
import os
import shutil
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Env, git_env, lz_run, user_processes, wait_until

PERSIST = 'persistent_dirs = ["/root"]'


def run_ok(lazaret, env, ws, script):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script])
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.decode()


def domain_dirs(env):
    d = Path(env.storage) / "domains"
    return set(d.iterdir()) if d.exists() else set()


def anchor_upper(env, before):
    """The /root upper of the one Domain created since `before`."""
    new = domain_dirs(env) - before
    assert len(new) == 1, new
    return list(new.pop().glob("anchor-*/upper/root"))


@pytest.fixture
def env(tmp_path, busybox_image):
    """This file's tests find their Domain as the one directory new under
    <Storage Root>/domains: a Storage Root of their own, so that Domains
    other tests create meanwhile (pytest-xdist) are not counted."""
    return Env(tmp_path / "env", tmp_path / "storage", f"oci:{busybox_image}")


@pytest.fixture
def bindsock(tmp_path, workspace):
    """A static helper that binds a Unix socket (busybox cannot)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the socket helper")
    src = tmp_path / "bindsock.c"
    src.write_text(
        '#include <stdio.h>\n#include <string.h>\n#include <sys/socket.h>\n#include <sys/un.h>\n'
        'int main(int c, char **v) { struct sockaddr_un a = { .sun_family = AF_UNIX };\n'
        '  strncpy(a.sun_path, v[1], sizeof a.sun_path - 1);\n'
        '  int s = socket(AF_UNIX, SOCK_STREAM, 0);\n'
        '  if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); return 1; }\n'
        '  puts("bound"); return 0; }\n')
    out = workspace / "bindsock"
    subprocess.run([cc, "-static", "-O1", "-o", str(out), str(src)], check=True, timeout=120)
    return "/workspace/bindsock"


@pytest.fixture
def venv(env, tmp_path):
    vol = tmp_path / "vol"
    vol.mkdir()
    env.write_config(extra_profile=PERSIST + "\n" + f'volumes = [\n'
                     f'  {{ host = "{vol}", container = "/vol", mode = "rw" }},\n'
                     f'  {{ host = "{{profile_dir}}/pvol", container = "/pvol", mode = "rw" }},\n'
                     f']\n')
    env.vol = vol
    env.pvol = Path(env.storage) / "test" / "pvol"
    return env


def test_volume_strips_set_id_and_refuses_special_files(lazaret, venv, workspace, bindsock):
    before = domain_dirs(venv)
    out = run_ok(lazaret, venv, workspace,
                 "cd /vol && echo a > f && chmod 6755 f; echo chmod=$?; touch g && chmod u+s g; "
                 "touch h && chmod 2755 h; "
                 "mknod cdev c 1 3; echo mknod=$?; " + bindsock + " /vol/sock; echo sock=$?; "
                 # positive control: not router-backed (the State Anchor upper)
                 "echo b > /root/suid && chmod 6755 /root/suid && stat -c %a /root/suid")
    vol = venv.vol
    for name in ("f", "g", "h"):
        mode = (vol / name).lstat().st_mode
        assert stat.S_ISREG(mode)
        assert mode & (stat.S_ISUID | stat.S_ISGID) == 0, (name, oct(mode))
    assert (vol / "f").read_text() == "a\n"
    assert not os.path.lexists(vol / "cdev"), out
    assert not os.path.lexists(vol / "sock"), out
    # Positive control: where no router stands the bits reach the host file.
    uppers = anchor_upper(venv, before)
    assert len(uppers) == 1
    mode = (uppers[0] / "suid").lstat().st_mode
    assert mode & stat.S_ISUID and mode & stat.S_ISGID, oct(mode)


def store_rows(ddir, sql):
    con = sqlite3.connect(f"file:{ddir / 'domain.db'}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_volume_file_work_shows_on_the_host_at_once(lazaret, venv, workspace):
    vol = venv.vol
    before = domain_dirs(venv)
    (vol / "from-host").write_text("host\n")
    script = ("cd /vol && cat from-host && echo one > a && mkdir -p d/e && mv a d/e/b && "
              "ln -s e/b d/l && cat d/l && echo two >> d/e/b && touch gone && rm gone && "
              "cd /pvol && echo p > p && ln -s p pl && cat pl && "
              # wait (bounded) until the host saw it, while the sandbox still runs
              "i=0; while [ ! -e /vol/host-saw ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
              "cat /vol/host-saw")
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", script], cwd=workspace,
                         env=venv.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: os.path.lexists(vol / "d" / "l"), timeout=90)
        assert wait_until(lambda: (vol / "d" / "e" / "b").read_text() == "one\ntwo\n", timeout=10)
        assert os.readlink(vol / "d" / "l") == "e/b"
        assert not (vol / "a").exists()
        # `touch gone && rm gone` runs after the append above: wait for the rm.
        assert wait_until(lambda: not (vol / "gone").exists(), timeout=10)
        # Each writable volume router is a recorded process of the Domain.
        new = domain_dirs(venv) - before
        assert len(new) == 1
        rows = store_rows(new.pop(), "SELECT role, slot, phase FROM processes ORDER BY slot")
        assert ("git_routing", "vol0", "committed") in rows and ("git_routing", "vol1", "committed") in rows, rows
        (vol / "host-saw").write_text("seen\n")
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, (out, err)
    assert b"host\n" in out and b"one\n" in out and b"seen\n" in out
    # A volume kept under the Storage Root may link within itself.
    assert os.readlink(venv.pvol / "pl") == "p"
    # Teardown stopped every router.
    assert wait_until(lambda: not user_processes("lazaret-router"), timeout=45)


def test_volume_routers_are_recovered_after_a_coordinator_crash(lazaret, venv, workspace):
    before = domain_dirs(venv)
    e = venv.environ(LAZARET_TEST_CRASH="runsc-staged")
    subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e,
                   capture_output=True, timeout=120)
    new = domain_dirs(venv) - before
    assert len(new) == 1
    ddir = new.pop()
    slots = {r[0] for r in store_rows(ddir, "SELECT slot FROM processes")}
    assert {"router", "vol0", "vol1", "runsc"} <= slots, slots
    assert wait_until(lambda: not user_processes("lazaret-router") and not user_processes("runsc"), timeout=45)
    run_ok(lazaret, venv, workspace, "echo ok > /vol/after")
    assert (venv.vol / "after").read_text() == "ok\n"
    # That generation's teardown finishes after the client returned: the
    # coordinator forgets the processes after the routers are gone.
    assert wait_until(lambda: not user_processes("lazaret-router") and not user_processes("lazaret-core __coordinator"),
                      timeout=45)
    assert store_rows(ddir, "SELECT count(*) FROM processes") == [(0,)]
    assert "recovery: generation" in (ddir / "coordinator.log").read_text()


def make_evil_repo(path: Path, sentinel: Path):
    """What an agent could leave in the State Anchor: a repository whose
    config runs a command on `git status` (written as plain files)."""
    (path / ".git" / "objects").mkdir(parents=True)
    (path / ".git" / "refs" / "heads").mkdir(parents=True)
    (path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (path / ".git" / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch {sentinel}; false"\n')


def test_symlinks_into_lazaret_storage_refused(lazaret, venv, workspace, tmp_path):
    env = venv
    before = domain_dirs(env)
    run_ok(lazaret, env, workspace, "mkdir -p /root/evil")  # creates the Domain and its anchor
    uppers = anchor_upper(env, before)
    assert len(uppers) == 1
    evil = uppers[0] / "evil"
    sentinel = tmp_path / "SENTINEL"
    make_evil_repo(evil, sentinel)
    storage = Path(env.storage).resolve()
    ws = workspace.resolve()

    # Positive control: the same link made on the host (no router) and
    # followed by the developer runs the agent's command.
    hostlink = tmp_path / "hostlink"
    hostlink.symlink_to(evil)
    subprocess.run(["sh", "-c", f"cd {hostlink} && git status"], env=git_env(), capture_output=True,
                   timeout=60)
    assert sentinel.exists(), "the positive control did not fire: the test could not detect the attack"
    sentinel.unlink()

    # A developer-made link in the workspace that points into the storage
    # (the router never follows it; the host does).
    (ws / "hz").symlink_to(storage / "domains")
    up = os.path.relpath(storage.parent, ws)  # "../../.." + names: an ancestor
    deep_rel = "../.." + "/hz"  # from ws/a/b: ws/hz
    k = len(ws.parts)  # depth of ws + 1
    chain = "/".join(f"c{i}" for i in range(k))
    climb = "/".join([".."] * k)
    script = "; ".join([
        "cd /workspace",
        f"ln -s {evil} x; echo abs=$?",
        f"ln -s {storage}/domains/. y; echo abs2=$?",
        f"ln -s {up} up; echo anc=$?",
        f"ln -s {up}/{storage.name}/domains upd; echo ancd=$?",
        "ln -s d/../.. dd; echo dotdot=$?",
        "ln -s /usr/share/doc doc; echo doc=$?",
        "ln -s README r; echo rel=$?",
        # a relative link that is harmless here but not one level deeper
        "mkdir -p a/b",
        "ln -s ../hz/x ok1; echo ok1=$?",
        f"ln -s {deep_rel} m; echo m=$?",
        "mv m a/b/m; echo mvdeep=$?",
        # a directory whose link lands on the workspace here, on / once
        # the directory is moved up to the top
        f"mkdir -p {chain}",
        f"ln -s {climb} {chain}/w; echo w=$?",
        f"mv {chain} rr; echo mvdir=$?",
        "ls -la",
    ])
    out = run_ok(lazaret, env, workspace, script)
    res = dict(l.split("=", 1) for l in out.splitlines() if "=" in l and " " not in l)
    assert res["abs"] != "0" and res["abs2"] != "0", out
    assert res["anc"] != "0" and res["ancd"] != "0", out
    assert res["dotdot"] != "0", out
    assert res["doc"] == "0" and res["rel"] == "0", out
    assert res["m"] == "0" and res["mvdeep"] != "0", out  # ws/hz -> storage from ws/a/b
    assert res["w"] == "0" and res["mvdir"] != "0", out
    for name in ("x", "y", "up", "upd", "dd", "a/b/m", "rr"):
        assert not os.path.lexists(ws / name), name
    assert os.readlink(ws / "doc") == "/usr/share/doc"
    assert os.readlink(ws / "m") == deep_rel
    # And the developer's `cd` through what is left runs nothing.
    for name in ("doc", "m", "ok1"):
        subprocess.run(["sh", "-c", f"cd {ws / name} 2>/dev/null && git status"], env=git_env(),
                       capture_output=True, timeout=60)
    assert not sentinel.exists()


def test_what_the_sandbox_sees_of_host_paths(lazaret, venv, workspace):
    """The sandbox should not be told where the Storage Root, the runtime
    directory or the workspace are on the host."""
    out = run_ok(lazaret, venv, workspace,
                 "env; cat /proc/self/mountinfo; cat /proc/mounts; hostname; cat /etc/hostname; "
                 "cat /proc/self/cgroup 2>/dev/null; true")
    storage = str(Path(venv.storage).resolve())
    for secret in (storage, str(venv.runtime), str(workspace.resolve()), str(venv.vol), str(venv.home)):
        assert secret not in out, (secret, out)
    assert "LAZARET_DOMAIN" not in out
