"""`lazaret image gc`: product GC of prepared lowers (OR-7) through the real
binary. Each test has its own Storage Root: gc must never run on the shared
session storage that the other tests prepare into."""
import json
import os
import stat
import time
from pathlib import Path
import subprocess

import pytest

from conftest import runtime_dir


def write_config(path, data_root, image, storage_extra=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[storage]\ndata_root = "{data_root}"\nlinger_seconds = 0\n{storage_extra}\n'
                    f'[profiles.default]\nimage = "{image}"\npersistent_dirs = []\n')


@pytest.fixture
def gc_env(tmp_path, busybox_image):
    ws = tmp_path / "ws"
    ws.mkdir()
    data_root = tmp_path / "data"
    cfg = tmp_path / "config.toml"
    image = f"oci:{busybox_image}"
    write_config(cfg, data_root, image)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "LANG": "C.UTF-8",
    }
    return {"ws": ws, "data_root": data_root, "cfg": cfg, "image": image, "env": env}


def lz(lazaret, e, *args, timeout=120):
    # Options before the operands: the image subcommands stop at the first operand.
    return subprocess.run([lazaret, "image", args[0], "--config", str(e["cfg"]), *args[1:]], cwd=e["ws"],
                          env=e["env"], capture_output=True, text=True, timeout=timeout)


def prepare(lazaret, e):
    r = lz(lazaret, e, "prepare", "--json", e["image"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["artifact_id"]


def gc_json(lazaret, e, *extra):
    r = lz(lazaret, e, "gc", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_dry_run_then_reclaim(lazaret, gc_env):
    e = gc_env
    aid = prepare(lazaret, e)
    tree = e["data_root"] / "prepared" / aid
    assert (tree / "rootfs").is_dir()
    db = e["data_root"] / "catalog.db"
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600

    # The default policy (14 days) keeps a lower prepared just now.
    out = gc_json(lazaret, e)
    assert out["dry_run"] is False
    assert out["policy"] == {"prepared_keep_days": 14, "prepared_max_bytes": 0}
    assert out["reclaimed"] == [] and out["total"]["count"] == 0
    assert tree.is_dir()

    write_config(e["cfg"], e["data_root"], e["image"], "prepared_keep_days = 0")
    before = db.read_bytes()
    out = gc_json(lazaret, e, "--dry-run")
    assert out["dry_run"] is True
    assert [x["name"] for x in out["reclaimed"]] == [aid]
    assert out["reclaimed"][0]["kind"] == "artifact"
    assert out["reclaimed"][0]["size"] > 0
    assert out["total"]["count"] == 1 and out["total"]["bytes"] == out["reclaimed"][0]["size"]
    assert tree.is_dir(), "--dry-run removed the artifact"
    assert db.read_bytes() == before, "--dry-run changed the catalog"

    # The human form: one line per artifact (12-digit ID prefix) and a total.
    r = lz(lazaret, e, "gc", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert aid[:12] in r.stdout and aid[:13] not in r.stdout
    assert "would reclaim 1 item" in r.stdout

    out = gc_json(lazaret, e)
    assert [x["name"] for x in out["reclaimed"]] == [aid]
    assert out["failed"] == []
    assert not tree.exists()
    assert sorted(os.listdir(e["data_root"] / "prepared")) == []

    r = lz(lazaret, e, "ls", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prepared"] == []

    # Prepared again after gc: a fresh tree under the same ID.
    assert prepare(lazaret, e) == aid
    assert (tree / "rootfs").is_dir()


def test_foreign_and_in_progress_trees_are_kept(lazaret, gc_env):
    e = gc_env
    aid = prepare(lazaret, e)
    prepared = e["data_root"] / "prepared"
    # A preparation without a recorded intent, and names Lazaret does not use.
    foreign = (".tmp-0123456789abcdef", "notes", ".reclaim-" + "0" * 64, "1" * 64)
    for name in foreign:
        (prepared / name / "inner").mkdir(parents=True)
    write_config(e["cfg"], e["data_root"], e["image"], "prepared_keep_days = 0")
    out = gc_json(lazaret, e)
    assert [x["name"] for x in out["reclaimed"]] == [aid]
    kept = {x["name"]: x["reason"] for x in out["kept"]}
    assert set(kept) == set(foreign)
    assert "prepare intent" in kept[".tmp-0123456789abcdef"]
    for name in foreign:
        assert (prepared / name / "inner").is_dir()

    # A .reclaim-<id> that gc did not make is not deleted, so its artifact
    # cannot be moved aside: both stay.
    assert prepare(lazaret, e) == aid
    (prepared / (".reclaim-" + aid) / "inner").mkdir(parents=True)
    out = gc_json(lazaret, e)
    assert out["reclaimed"] == []
    kept = {x["name"] for x in out["kept"]}
    assert aid in kept and ".reclaim-" + aid in kept
    assert (prepared / aid / "rootfs").is_dir()
    assert (prepared / (".reclaim-" + aid) / "inner").is_dir()


def test_budget(lazaret, gc_env):
    e = gc_env
    aid = prepare(lazaret, e)
    write_config(e["cfg"], e["data_root"], e["image"], "prepared_keep_days = 1000\nprepared_max_bytes = 1")
    out = gc_json(lazaret, e)
    assert [x["name"] for x in out["reclaimed"]] == [aid]
    assert "prepared_max_bytes" in out["reclaimed"][0]["reason"]


@pytest.mark.parametrize("line,msg", [
    ("prepared_keep_days = -1", "storage.prepared_keep_days: -1 is out of range"),
    ("prepared_max_bytes = -1", "storage.prepared_max_bytes: -1 is out of range"),
    ('prepared_keep_days = "14"', "storage.prepared_keep_days: expected an integer, found a string"),
])
def test_bad_config(lazaret, gc_env, line, msg):
    e = gc_env
    write_config(e["cfg"], e["data_root"], e["image"], line)
    r = lz(lazaret, e, "gc")
    assert r.returncode == 1
    assert msg in r.stderr
    assert str(e["cfg"]) in r.stderr
    assert not e["data_root"].exists()


def test_usage(lazaret, gc_env):
    e = gc_env
    r = lz(lazaret, e, "gc", "extra")
    assert r.returncode == 2 and "takes no arguments" in r.stderr
    r = lz(lazaret, e, "ls", "--dry-run")
    assert r.returncode == 2 and "--dry-run does not apply" in r.stderr
    # Nothing to reclaim in a Storage Root that does not exist yet, and it is not created.
    out = gc_json(lazaret, e)
    assert out["total"] == {"count": 0, "bytes": 0}
    assert not e["data_root"].exists()


def test_shared_artifact_kept_until_both_domains_release_it(lazaret, tmp_path, busybox_image):
    """Two Domains on one prepared artifact: each running generation holds a
    lease; gc (keep 0 days) never removes the artifact while any lease is
    left, and reclaims it once both Domains stopped."""
    import pexpect
    import sqlite3

    data_root = tmp_path / "data"
    cfg = tmp_path / "xdg" / "lazaret" / "config.toml"
    write_config(cfg, data_root, f"oci:{busybox_image}", "prepared_keep_days = 0")
    rt = runtime_dir()  # socket paths: at most 108 bytes; names its pytest-xdist worker
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_RUNTIME_DIR": str(rt), "LANG": "C.UTF-8"}
    sessions = []
    for name in ("ws1", "ws2"):
        ws = tmp_path / name
        ws.mkdir()
        c = pexpect.spawn(lazaret, ["run"], cwd=str(ws), env=env, encoding="utf-8", timeout=90)
        c.expect(r"[#$] ")
        sessions.append(c)

    def leases():
        con = sqlite3.connect(f"file:{data_root / 'catalog.db'}?mode=ro", uri=True)
        try:
            return con.execute("SELECT artifact_id, domain_id FROM leases").fetchall()
        finally:
            con.close()

    def gc():
        r = subprocess.run([lazaret, "image", "gc", "--json"], cwd=tmp_path / "ws2", env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    held = leases()
    assert len(held) == 2 and held[0][0] == held[1][0] and held[0][1] != held[1][1]
    aid = held[0][0]
    gc()
    assert (data_root / "prepared" / aid / "rootfs").is_dir()
    sessions[0].sendline("exit")
    sessions[0].expect(pexpect.EOF)
    deadline = time.monotonic() + 45
    while len(leases()) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(leases()) == 1
    gc()
    assert (data_root / "prepared" / aid / "rootfs").is_dir()
    # The remaining Domain still works on it.
    sessions[1].sendline("echo al''ive")
    sessions[1].expect("\r\nalive\r\n")
    sessions[1].sendline("exit")
    sessions[1].expect(pexpect.EOF)
    deadline = time.monotonic() + 45
    while leases() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leases() == []
    gc()
    assert not (data_root / "prepared" / aid).exists()
