"""The State Anchor: per-Domain persistent layers over the prepared lower.

Real runsc, real kernel overlayfs in the Domain's user namespace, real
SQLite stores; the crash tests kill the Host Coordinator with SIGKILL at
each durable step (LAZARET_TEST_CRASH, a test-only hook) and check the
recovery from outside: processes, leases, store records.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import Env, lz_run, make_git_repo, user_processes, wait_until

PERSIST = 'persistent_dirs = ["/etc", "/opt", "/root", "/usr"]'


def domain_dirs(env):
    d = Path(env.storage) / "domains"
    return sorted(p for p in d.iterdir() if p.is_dir()) if d.exists() else []


def domain_dir_of(env, workspace, before):
    new = [d for d in domain_dirs(env) if d not in before]
    assert len(new) == 1, new
    return new[0]


def store_rows(ddir, sql):
    con = sqlite3.connect(f"file:{ddir / 'domain.db'}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def catalog_leases(env, domain_id):
    db = Path(env.storage) / "catalog.db"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT artifact_id, generation FROM leases WHERE domain_id = ?",
                           (domain_id,)).fetchall()
    finally:
        con.close()


def sandbox_processes():
    return [p for pat in ("runsc", "slirp4netns", "lazaret-router", "lazaret-core __supervisor",
                          "lazaret-core __coordinator") for p in user_processes(pat)]


@pytest.fixture
def env(tmp_path, busybox_image):
    """This file's tests find their Domain as the one directory new under
    <Storage Root>/domains: a Storage Root of their own, so that Domains
    other tests create meanwhile (pytest-xdist) are not counted."""
    return Env(tmp_path / "env", tmp_path / "storage", f"oci:{busybox_image}")


@pytest.fixture
def penv(env):
    env.write_config(extra_profile=PERSIST)
    return env


def run_ok(lazaret, env, ws, script):
    r = lz_run(lazaret, env, ws, ["sh", "-c", script])
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.decode()


def test_changes_persist_per_domain_and_not_elsewhere(lazaret, penv, workspace, tmp_path):
    before = domain_dirs(penv)
    run_ok(lazaret, penv, workspace,
           "echo kept > /root/note && mkdir -p /opt/tool/bin && "
           "printf '#!/bin/sh\\necho tool-ran\\n' > /opt/tool/bin/tool && chmod 755 /opt/tool/bin/tool && "
           "echo 'export A=1' >> /etc/profile && echo x > /tmp/scratch")
    ddir = domain_dir_of(penv, workspace, before)
    out = run_ok(lazaret, penv, workspace,
                 "cat /root/note; /opt/tool/bin/tool; cat /etc/profile; ls /tmp/scratch 2>&1 || true")
    assert "kept" in out and "tool-ran" in out and "export A=1" in out
    assert "No such file" in out  # /tmp is not persistent
    # The upper layer lives in the Domain Root, owned by the developer.
    uppers = list(ddir.glob("anchor-*/upper/root/note"))
    assert len(uppers) == 1 and uppers[0].read_text() == "kept\n"
    # Another workspace is another Domain: none of it is visible there.
    other = make_git_repo(tmp_path / "other")
    out = run_ok(lazaret, penv, other, "cat /root/note 2>&1; ls /opt/tool 2>&1; cat /etc/profile 2>&1; true")
    assert "kept" not in out and "tool-ran" not in out and "export A=1" not in out


def test_whiteout_copy_up_modes_and_owners(lazaret, penv, workspace):
    run_ok(lazaret, penv, workspace,
           "rm /etc/group && echo extra >> /etc/passwd && chmod 4751 /etc/passwd && "
           "touch /root/owned && chown 1000:1000 /root/owned && chmod 0640 /root/owned && "
           "mkdir -p /usr/share/d && echo y > /usr/share/d/f && rm -r /usr/share/d && mkdir /usr/share/d")
    out = run_ok(lazaret, penv, workspace,
                 "ls /etc/group 2>&1; stat -c '%a %u:%g' /etc/passwd /root/owned; tail -1 /etc/passwd; "
                 "ls -A /usr/share/d | wc -l")
    lines = out.splitlines()
    assert "No such file" in lines[0]
    assert lines[1] == "4751 0:0"  # copy-up kept the owner, the new mode stayed
    assert lines[2] == "640 1000:1000"
    assert lines[3] == "extra"
    assert lines[4].strip() == "0"  # re-created directory is opaque


def test_network_files_never_come_from_the_upper_layer(lazaret, penv, workspace):
    before = domain_dirs(penv)
    run_ok(lazaret, penv, workspace, "true")
    ddir = domain_dir_of(penv, workspace, before)
    etc = next(ddir.glob("anchor-*/upper")) / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "resolv.conf").write_text("nameserver 203.0.113.9\n")
    (etc / "hosts").write_text("203.0.113.9 evil\n")
    out = run_ok(lazaret, penv, workspace, "cat /etc/resolv.conf /etc/hosts")
    assert "203.0.113.9" not in out
    assert "nameserver 10.0.2.3" in out


def _add_layer(src: Path, dst: Path, files: dict, remove=()):
    """Copies the OCI layout src to dst and appends a layer with `files`
    (path -> bytes) and whiteouts for `remove`."""
    shutil.copytree(src, dst)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        dirs = sorted({str(Path(p).parent) for p in list(files) + list(remove)})
        for d in dirs:
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1704067200
            t.addfile(ti)
        for p, data in sorted(files.items()):
            ti = tarfile.TarInfo(p)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1704067200
            t.addfile(ti, io.BytesIO(data))
        for p in remove:
            ti = tarfile.TarInfo(str(Path(p).parent / (".wh." + Path(p).name)))
            ti.size, ti.mtime = 0, 1704067200
            t.addfile(ti, io.BytesIO(b""))
    raw = buf.getvalue()
    gz = gzip.compress(raw, mtime=0)
    blobs = dst / "blobs" / "sha256"

    def put(b):
        h = hashlib.sha256(b).hexdigest()
        (blobs / h).write_bytes(b)
        return h

    index = json.loads((dst / "index.json").read_text())
    mdesc = index["manifests"][0]
    manifest = json.loads((blobs / mdesc["digest"][7:]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"][7:]).read_text())
    config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw).hexdigest())
    cb = json.dumps(config).encode()
    manifest["config"] = {"mediaType": manifest["config"]["mediaType"], "digest": "sha256:" + put(cb),
                          "size": len(cb)}
    manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                               "digest": "sha256:" + put(gz), "size": len(gz)})
    mb = json.dumps(manifest).encode()
    mdesc.update({"digest": "sha256:" + put(mb), "size": len(mb)})
    (dst / "index.json").write_text(json.dumps(index))


def test_image_update_keeps_upper_changes(lazaret, penv, workspace, busybox_image, tmp_path):
    run_ok(lazaret, penv, workspace, "echo mine > /etc/mine && rm /etc/group && echo changed > /etc/passwd")
    img2 = tmp_path / "img2"
    _add_layer(Path(busybox_image), img2,
               {"etc/newbase": b"from-new-image\n", "etc/passwd": b"root:x:0:0:new:/root:/bin/sh\n",
                "etc/group": b"root:x:0:\nnew:x:5:\n", "etc/hostname-base": b"b\n"})
    penv.image = f"oci:{img2}"
    penv.write_config(extra_profile=PERSIST)
    out = run_ok(lazaret, penv, workspace,
                 "cat /etc/newbase /etc/mine /etc/passwd; ls /etc/group 2>&1; true")
    assert "from-new-image" in out      # unmodified content follows the new image
    assert "mine" in out                # upper files stay
    assert "changed" in out and "new:/root" not in out  # upper copy stays authoritative
    assert "No such file" in out        # the whiteout stays authoritative


def test_symlinked_persistent_dir_is_refused(lazaret, env, workspace, tmp_path):
    env.write_config(extra_profile='persistent_dirs = ["/bin/sh"]')
    r = lz_run(lazaret, env, workspace, ["true"])
    assert r.returncode != 0
    assert b"persistent dir /bin/sh is a symbolic link" in r.stderr or b"not a directory" in r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=30)


START_STEPS = ["lower-intent", "lease-inserted", "lease-held", "anchor-intent", "anchor-mounted",
               "anchor-prepared", "router-staged", "runsc-staged", "running"]
RELEASE_STEPS = ["anchor-release-intent", "anchor-unmounted", "lower-release-intent", "lease-removed"]


@pytest.mark.parametrize("step", START_STEPS + RELEASE_STEPS)
def test_coordinator_killed_at_each_durable_step_is_recovered(lazaret, penv, workspace, step):
    before = domain_dirs(penv)
    run_ok(lazaret, penv, workspace, "echo before-crash > /root/marker")
    ddir = domain_dir_of(penv, workspace, before)
    domain_id = ddir.name
    e = penv.environ(LAZARET_TEST_CRASH=step)
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c", "echo during > /root/during"],
                       cwd=workspace, env=e, capture_output=True, timeout=120)
    if step in START_STEPS[:-1]:
        assert r.returncode != 0
        assert b"ended unexpectedly" in r.stderr or b"Coordinator" in r.stderr, r.stderr
    # The lease-loss path (the Supervisor and the helper notice the
    # coordinator is gone) stops everything on its own, bounded.
    assert wait_until(lambda: not sandbox_processes(), timeout=45), sandbox_processes()
    gens = store_rows(ddir, "SELECT gen, state FROM generations ORDER BY gen")
    assert gens[-1][1] != "clean", gens  # the crash left the generation open
    # The next run recovers: exact records cleaned, a fresh generation works.
    out = run_ok(lazaret, penv, workspace, "cat /root/marker")
    assert "before-crash" in out
    # That generation's own teardown finishes after the client returned.
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    gens = store_rows(ddir, "SELECT gen, state FROM generations ORDER BY gen")
    assert all(s == "clean" for _, s in gens), gens
    parts = store_rows(ddir, "SELECT gen, role, state FROM participants WHERE state != 'clean'")
    assert parts == []
    assert store_rows(ddir, "SELECT count(*) FROM processes") == [(0,)]
    assert catalog_leases(penv, domain_id) == []
    log = (ddir / "coordinator.log").read_text()
    assert "recovery: generation" in log


def test_stale_record_of_a_reused_pid_is_never_signalled(lazaret, penv, workspace):
    """A record whose PID now belongs to an unrelated process: recovery
    matches by pidfs identity and leaves that process alone."""
    before = domain_dirs(penv)
    e = penv.environ(LAZARET_TEST_CRASH="anchor-prepared")
    subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e,
                   capture_output=True, timeout=120)
    ddir = domain_dir_of(penv, workspace, before)
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    decoy = subprocess.Popen(["sleep", "60"])
    try:
        con = sqlite3.connect(ddir / "domain.db")
        with con:
            n = con.execute("UPDATE processes SET pid = ? WHERE role = 'sandbox'", (decoy.pid,)).rowcount
        con.close()
        assert n == 1
        run_ok(lazaret, penv, workspace, "true")
        assert wait_until(lambda: not sandbox_processes(), timeout=45)
        assert decoy.poll() is None, "the decoy with the recorded PID was signalled"
        log = (ddir / "coordinator.log").read_text()
        assert "already gone (not signalled)" in log
    finally:
        decoy.kill()
        decoy.wait(timeout=10)


def test_other_boot_records_are_not_signalled(lazaret, penv, workspace):
    """A reboot (a changed boot ID): recorded processes cannot be alive."""
    before = domain_dirs(penv)
    e = penv.environ(LAZARET_TEST_CRASH="running")
    subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e,
                   capture_output=True, timeout=120)
    ddir = domain_dir_of(penv, workspace, before)
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    e = penv.environ(LAZARET_TEST_BOOT_ID="00000000-0000-4000-8000-000000000000")
    r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=e,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    assert all(s == "clean" for _, s in store_rows(ddir, "SELECT gen, state FROM generations"))


def test_unknown_store_version_is_refused(lazaret, penv, workspace):
    before = domain_dirs(penv)
    run_ok(lazaret, penv, workspace, "true")
    ddir = domain_dir_of(penv, workspace, before)
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    con = sqlite3.connect(ddir / "domain.db")
    con.execute("PRAGMA user_version = 99")
    con.close()
    data = (ddir / "domain.db").read_bytes()
    r = lz_run(lazaret, penv, workspace, ["true"])
    assert r.returncode != 0
    assert b"version 99" in r.stderr
    assert (ddir / "domain.db").read_bytes() == data


@pytest.mark.slow
def test_apt_get_install_and_dotfiles_persist_in_the_default_layout(lazaret, debian, workspace, tmp_path):
    """The real Debian image with the default persistent dirs: a package
    installed with apt-get (from a local .deb, no network), a `pip install
    --user`-style tree under ~/.local and a ~/.bashrc edit are there in the
    next session of the same Domain and absent in another Domain."""
    debian.write_config(extra_profile='persistent_dirs = ["/etc", "/opt", "/root", "/usr", "/var"]')
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text("Package: lzdemo\nVersion: 1.0\nArchitecture: all\n"
                                        "Maintainer: t <t@example.invalid>\nDescription: test\n")
    (pkg / "usr/bin").mkdir(parents=True)
    (pkg / "usr/bin/lzdemo").write_text("#!/bin/sh\necho lzdemo-ran\n")
    (pkg / "usr/bin/lzdemo").chmod(0o755)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(pkg), str(workspace / "lzdemo.deb")],
                   check=True, capture_output=True)
    r = lz_run(lazaret, debian, workspace, ["bash", "-c",
               "apt-get install -y -q ./lzdemo.deb >/dev/null 2>&1 || dpkg -i lzdemo.deb; "
               "mkdir -p ~/.local/bin && printf '#!/bin/sh\\necho pip-tool\\n' > ~/.local/bin/ptool && "
               "chmod +x ~/.local/bin/ptool && echo 'alias ll=\"ls -l\" # lz-marker' >> ~/.bashrc"],
               timeout=300)
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not sandbox_processes(), timeout=45)
    r = lz_run(lazaret, debian, workspace, ["bash", "-c",
               "lzdemo; dpkg -s lzdemo | grep Status; ~/.local/bin/ptool; grep -c lz-marker ~/.bashrc"])
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "lzdemo-ran" in out and "install ok installed" in out and "pip-tool" in out, out
    other = make_git_repo(tmp_path / "other")
    r = lz_run(lazaret, debian, other, ["bash", "-c", "command -v lzdemo; dpkg -s lzdemo; ls ~/.local; "
                                                     "grep -c lz-marker ~/.bashrc; true"])
    out = r.stdout.decode()
    assert "lzdemo" not in out and "ptool" not in out, out
