"""`lazaret audit [DOMAIN] [--json] [--net | --escalations]`: a Domain's
audit (escalation requests and network decisions on one chain), listed and
its hash chain verified.

Real Domains made by the real `lazaret run` (busybox image, real runsc).
Rows are appended through `lazaret audit __append DOMAIN_DIR`, a verb that
exists only in test builds (-Dtest_hooks=true) and calls the same
lz_audit_append (lz_audit_append_net for a line with "kind": "net") the
Host Coordinator calls. The edits are made the way
anyone who can write the file could: a plain SQLite connection that drops
the append-only triggers first. The row hashes are also recomputed here,
from the encoding as audit.h writes it down, independently of the C code.
"""
import hashlib
import json
import select
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import Env, lz_run, make_git_repo, wait_until

TIMEOUT = 60
ESC = "\x1b"


@pytest.fixture
def aenv(lazaret, tmp_path, busybox_image):
    """A private Storage Root with profile "test"."""
    e = Env(tmp_path / "env", tmp_path / "storage", f"oci:{busybox_image}")
    yield e
    # State Anchors hold overlay work dirs pytest's own cleanup cannot delete.
    subprocess.run([lazaret, "state", "reset", "--all", "--yes", "-p", "test"], cwd=e.base, env=e.environ(),
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)


def audit(lazaret, env, *args, cwd):
    return subprocess.run([lazaret, "audit", *args, "-p", "test"], cwd=cwd, env=env.environ(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)


def audit_json(lazaret, env, *args, cwd):
    r = audit(lazaret, env, *args, "--json", cwd=cwd)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout), r


def state_json(lazaret, env, *args):
    r = subprocess.run([lazaret, "state", *args, "--json", "-p", "test"], cwd=env.base, env=env.environ(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def running(lazaret, env, did):
    return any(d["id"] == did and d["running"] for d in state_json(lazaret, env, "ls"))


def session_echoes(p, timeout=60):
    """Wait until the `cat` session of Popen p echoes a line: the Domain
    has started (its store opened) and the session runs."""
    p.stdin.write(b"up\n")
    p.stdin.flush()
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    assert ready, "the session did not start"
    assert p.stdout.readline() == b"up\n"


def made_domain(lazaret, env, ws):
    """A Domain made by `lazaret run -- true`, stopped again: its ID and root."""
    r = lz_run(lazaret, env, ws, ["true"])
    assert r.returncode == 0, r.stderr
    did = state_json(lazaret, env, "inspect", "--workspace", str(ws))["id"]
    assert wait_until(lambda: not running(lazaret, env, did), timeout=45, interval=0.2)
    return did, Path(env.storage) / "domains" / did


def entry(n, **kw):
    e = {
        "gen": 1, "request_id": f"{n:032x}", "session_id": "ab" * 16,
        "received_ms": 1700000000000 + n * 1000, "decided_by": "rule", "decided_ref": 1,
        "decision": "auto-approved", "end_state": "completed", "argv": ["/usr/bin/true"], "edited_argv": None,
        "executable": "/usr/bin/true", "executable_sha256": "5a" * 32, "cwd": "/home/dev/ws",
        "exit_status": 0, "signal": 0, "output_bytes": 0, "ended_ms": 1700000000500 + n * 1000,
    }
    e.update(kw)
    return e


# Agent-chosen bytes, written as lz_escape renderings: an escape sequence,
# a bidi override, a zero-width space, a byte that is not UTF-8.
HOSTILE = ["/usr/bin/printf", "\\x1b[31mred\\x1b[0m", "abc\\u{202E}def", "zero\\u{200B}width", "\\xff"]

ENTRIES = [
    entry(1),
    entry(2, decided_by="developer", decided_ref=0, decision="edited", argv=HOSTILE,
          edited_argv=["/usr/bin/printf", "plain"], executable="/usr/bin/printf", output_bytes=5),
    entry(3, decided_by="none", decided_ref=0, decision="none", end_state="cancelled", argv=["sleep", "100"],
          executable="", executable_sha256="", cwd="", exit_status=-1, signal=9),
]


def append(lazaret, env, root, entries):
    r = subprocess.run([lazaret, "audit", "__append", str(root)], env=env.environ(),
                       input="".join(json.dumps(e) + "\n" for e in entries), capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


# ---- the encoding of audit.h, written again from its text ----

def unescape(s):
    """The bytes of an lz_escape rendering."""
    out, i = bytearray(), 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = s[i + 1]
        if n == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif n == "u":
            end = s.index("}", i)
            out += chr(int(s[i + 3:end], 16)).encode()
            i = end + 1
        else:
            out += {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r", '"': b'"'}[n]
            i += 2
    return bytes(out)


def row_hash(r):
    def i64(x):
        return struct.pack(">q", x)

    def s(b):
        b = b if isinstance(b, bytes) else b.encode()
        return struct.pack(">Q", len(b)) + b

    def v(lst):
        return struct.pack(">Q", len(lst)) + b"".join(s(unescape(x)) for x in lst)

    enc = (b"lazaret/v1/audit-row\0" + i64(r["seq"]) + i64(r["generation"]) + bytes.fromhex(r["request_id"])
           + bytes.fromhex(r["session_id"]) + i64(r["received_ms"]) + s(r["decided_by"]) + i64(r["decided_ref"])
           + s(r["decision"]) + s(r["end_state"]) + v(r["argv"])
           + (b"\0" if r["edited_argv"] is None else b"\1" + v(r["edited_argv"]))
           + s(unescape(r["executable"]))
           + (b"\0" if r["executable_sha256"] is None else b"\1" + bytes.fromhex(r["executable_sha256"]))
           + s(unescape(r["cwd"])) + i64(-1 if r["exit_status"] is None else r["exit_status"])
           + i64(r["signal"] or 0) + i64(r["output_bytes"]) + i64(r["ended_ms"]) + bytes.fromhex(r["prev_hash"]))
    return hashlib.sha256(enc).hexdigest()


def net_row_hash(r):
    def s(b):
        b = b if isinstance(b, bytes) else b.encode()
        return struct.pack(">Q", len(b)) + b

    enc = (b"lazaret/v1/audit-net-row\0" + struct.pack(">qqq", r["seq"], r["generation"], r["at_ms"])
           + s(r["event"]) + s(r["name"]) + struct.pack(">Q", len(r["addrs"])) + b"".join(s(a) for a in r["addrs"])
           + s(r["ports"]) + s(r["detail"]) + bytes.fromhex(r["prev_hash"]))
    return hashlib.sha256(enc).hexdigest()


def genesis(did):
    return hashlib.sha256(b"lazaret/v1/audit-genesis\0" + did.encode()).hexdigest()


# ---- tests ----

def test_lists_verifies_and_finds_the_edited_row(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did, root = made_domain(lazaret, aenv, ws)
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert "no requests recorded" in r.stdout and "audit chain intact: 0 rows" in r.stdout

    assert append(lazaret, aenv, root, ENTRIES) == [1, 2, 3]
    # This workspace's Domain by default; a prefix names it too.
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert r.stdout == audit(lazaret, aenv, did[:8], cwd=aenv.base).stdout
    assert f"Audit of Domain {did}" in r.stdout
    assert "audit chain intact: 3 rows" in r.stdout
    assert "decided by rule 1: auto-approved; end state completed, exit status 0" in r.stdout
    assert "decided by the developer: edited" in r.stdout
    assert "no decision; end state cancelled, signal 9" in r.stdout
    # Hostile argv shown escaped, one element a line; nothing a terminal
    # would interpret reaches it.
    assert 'argv[1] = "\\x1b[31mred\\x1b[0m"' in r.stdout
    assert 'argv[2] = "abc\\u{202E}def"' in r.stdout
    assert 'argv[3] = "zero\\u{200B}width"' in r.stdout
    assert 'argv[4] = "\\xff"' in r.stdout
    assert 'edited argv[1] = "plain"' in r.stdout
    assert ESC not in r.stdout and "\u202e" not in r.stdout and "\u200b" not in r.stdout

    doc, r = audit_json(lazaret, aenv, cwd=ws)
    assert r.returncode == 0
    assert doc["domain"] == did and doc["intact"] is True and doc["broken_at"] is None
    assert doc["store_version"] == 5
    rows = doc["rows"]
    assert [x["seq"] for x in rows] == [1, 2, 3]
    assert rows[1]["argv"] == HOSTILE and rows[1]["edited_argv"] == ["/usr/bin/printf", "plain"]
    assert rows[0]["edited_argv"] is None and rows[2]["executable_sha256"] is None
    assert rows[2]["exit_status"] is None and rows[2]["signal"] == 9
    # The documented encoding, recomputed: each row_hash and the chain.
    assert rows[0]["prev_hash"] == genesis(did)
    for i, x in enumerate(rows):
        assert row_hash(x) == x["row_hash"], f"row {i + 1}"
        if i:
            assert x["prev_hash"] == rows[i - 1]["row_hash"]

    db = root / "domain.db"
    con = sqlite3.connect(db)
    try:
        # The table refuses changes ...
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            con.execute("UPDATE audit SET output_bytes = 6 WHERE seq = 2")
        con.rollback()
        assert audit(lazaret, aenv, cwd=ws).returncode == 0  # positive control: still intact
        # ... unless its trigger is dropped first: then the chain shows it.
        con.execute("DROP TRIGGER audit_no_update")
        con.execute("UPDATE audit SET output_bytes = 6 WHERE seq = 2")
        con.commit()
    finally:
        con.close()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 1
    assert "audit chain broken at row 2: its contents do not match its row_hash" in r.stderr
    doc, r = audit_json(lazaret, aenv, cwd=ws)
    assert r.returncode == 1
    assert doc["intact"] is False and doc["broken_at"] == 2
    assert doc["problem"].startswith("audit chain broken at row 2:")
    assert doc["rows"][1]["output_bytes"] == 6


def test_deleted_row_and_raw_escape_in_a_column(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did, root = made_domain(lazaret, aenv, ws)
    append(lazaret, aenv, root, ENTRIES)
    con = sqlite3.connect(root / "domain.db")
    try:
        con.execute("DROP TRIGGER audit_no_update")
        con.execute("DROP TRIGGER audit_no_delete")
        con.execute("DELETE FROM audit WHERE seq = 3")  # the last row: only the head knows
        # A raw escape sequence written into a stored rendering.
        con.execute("UPDATE audit SET cwd = ? WHERE seq = 1", ("/ws" + ESC + "[2J",))
        con.commit()
    finally:
        con.close()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 1
    assert "audit chain broken at row 1: cwd is not a rendering lz_escape produces" in r.stderr
    assert ESC not in r.stdout and ESC not in r.stderr
    doc, _ = audit_json(lazaret, aenv, cwd=ws)
    assert doc["broken_at"] == 1 and doc["rows"][0]["problem"].startswith("cwd is ")
    assert ESC not in doc["rows"][0]["cwd"] and "\\x1b[2J" in doc["rows"][0]["cwd"]
    assert [x["seq"] for x in doc["rows"]] == [1, 2]


def test_reads_a_running_domain_and_upgrades_a_version_1_store(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did, root = made_domain(lazaret, aenv, ws)
    db = root / "domain.db"
    # Make the store what the previous lazaret left: version 1, no audit.
    con = sqlite3.connect(db)
    con.executescript("DROP TABLE audit_net; DROP TABLE audit; PRAGMA user_version = 1;")
    con.close()
    before = db.read_bytes()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert "its Domain Store is version 1" in r.stdout
    assert db.read_bytes() == before  # read-only: not upgraded, not written

    # The next start (the coordinator's open) upgrades it; a session keeps
    # the Domain running while `lazaret audit` reads the store beside it.
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "cat"], cwd=ws, env=aenv.environ(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The Domain lock (what `state ls` calls running) comes before the
        # store's upgrade: wait for the session itself, which follows it.
        session_echoes(p)
        doc, r = audit_json(lazaret, aenv, cwd=ws)
        assert r.returncode == 0, r.stderr
        assert doc["store_version"] == 5 and doc["rows"] == [] and doc["intact"] is True
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert wait_until(lambda: not running(lazaret, aenv, did), timeout=45, interval=0.2)
    gens = state_json(lazaret, aenv, "inspect", did)["generations"]
    assert [g["generation"] for g in gens] == [1, 2]  # kept across the upgrade

    # Rows appended, then read while the Domain runs again.
    assert append(lazaret, aenv, root, ENTRIES[:2]) == [1, 2]
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "cat"], cwd=ws, env=aenv.environ(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: running(lazaret, aenv, did), timeout=60, interval=0.2)
        r = audit(lazaret, aenv, cwd=ws)
        assert r.returncode == 0, r.stderr
        assert "audit chain intact: 2 rows" in r.stdout
        # Writers other than the coordinator need the Domain lock (store.h);
        # the reader above did not.
        r2 = subprocess.run([lazaret, "audit", "__append", str(root)], env=aenv.environ(),
                            input=json.dumps(entry(9)) + "\n", capture_output=True, text=True, timeout=TIMEOUT)
        assert r2.returncode == 1 and "is the Domain running?" in r2.stderr
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert wait_until(lambda: not running(lazaret, aenv, did), timeout=45, interval=0.2)


def test_usage(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    r = audit(lazaret, aenv, "abcd", "ef01", cwd=ws)
    assert r.returncode == 2
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 1 and "has no Domain for workspace" in r.stderr
    r = audit(lazaret, aenv, "--help", cwd=ws)
    assert r.returncode == 0 and "audit chain broken at" in r.stdout


def net(n, event, name="", addrs=(), ports="", detail=""):
    return {"kind": "net", "gen": 1, "at_ms": 1700000100000 + n * 1000, "event": event, "name": name,
            "addrs": list(addrs), "ports": ports, "detail": detail}


MIXED = [
    entry(1),
    net(2, "learned", "api.example.test", ["198.51.100.7", "198.51.100.8"], "tcp/443", "ttl 60"),
    net(3, "refused", "evil.example", detail="no rule allows it"),
    entry(4, decided_by="developer", decided_ref=0, decision="denied", end_state="denied", exit_status=-1),
    net(5, "limited", detail="1024 learned addresses"),
]


def test_network_rows_interleaved_filtered_and_verified(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did, root = made_domain(lazaret, aenv, ws)
    assert append(lazaret, aenv, root, MIXED) == [1, 2, 3, 4, 5]
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert "audit chain intact: 5 rows" in r.stdout
    lines = r.stdout.splitlines()
    net_lines = [x for x in lines if "  net " in x]
    assert net_lines == [
        "#2  2023-11-14T22:15:02Z  net learned  api.example.test  198.51.100.7,198.51.100.8  tcp/443  ttl 60"
        "  (generation 1)",
        "#3  2023-11-14T22:15:03Z  net refused  evil.example  -  -  no rule allows it  (generation 1)",
        "#5  2023-11-14T22:15:05Z  net limited  -  -  -  1024 learned addresses  (generation 1)",
    ]
    # Interleaved in seq order with the escalation rows.
    order = [x.split()[0] for x in lines if x.startswith("#")]
    assert order == ["#1", "#2", "#3", "#4", "#5"]

    # The filters choose what is listed, never what is verified.
    r = audit(lazaret, aenv, "--net", cwd=ws)
    assert r.returncode == 0, r.stderr
    assert [x.split()[0] for x in r.stdout.splitlines() if x.startswith("#")] == ["#2", "#3", "#5"]
    assert "audit chain intact: 5 rows" in r.stdout
    r = audit(lazaret, aenv, "--escalations", cwd=ws)
    assert r.returncode == 0, r.stderr
    assert [x.split()[0] for x in r.stdout.splitlines() if x.startswith("#")] == ["#1", "#4"]
    assert "  net " not in r.stdout
    r = audit(lazaret, aenv, "--net", "--escalations", cwd=ws)
    assert r.returncode == 2 and "exclude each other" in r.stderr

    doc, r = audit_json(lazaret, aenv, cwd=ws)
    assert r.returncode == 0 and doc["intact"] is True and doc["store_version"] == 5
    rows = doc["rows"]
    assert [x["kind"] for x in rows] == ["escalation", "net", "net", "escalation", "net"]
    assert rows[1]["event"] == "learned" and rows[1]["addrs"] == ["198.51.100.7", "198.51.100.8"]
    assert rows[1]["name"] == "api.example.test" and rows[1]["ports"] == "tcp/443" and rows[1]["detail"] == "ttl 60"
    assert rows[4]["name"] == "" and rows[4]["addrs"] == []
    # The documented encodings, recomputed: one chain across both kinds.
    assert rows[0]["prev_hash"] == genesis(did)
    for i, x in enumerate(rows):
        want = net_row_hash(x) if x["kind"] == "net" else row_hash(x)
        assert want == x["row_hash"], f"row {i + 1}"
        if i:
            assert x["prev_hash"] == rows[i - 1]["row_hash"]
    doc, r = audit_json(lazaret, aenv, "--net", cwd=ws)
    assert [x["seq"] for x in doc["rows"]] == [2, 3, 5] and doc["intact"] is True

    # Bad bytes are refused at append, the field named; nothing is written.
    for bad, field in ((net(6, "denied", "evil.example" + ESC + "[2J"), "name"),
                       (net(6, "learned", "a.test", ports="tcp/443\n"), "ports"),
                       (net(6, "filtered", "a.test", detail="x" * 257), "detail")):
        r = subprocess.run([lazaret, "audit", "__append", str(root)], env=aenv.environ(),
                           input=json.dumps(bad) + "\n", capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 1 and f"audit network entry: {field} " in r.stderr, r.stderr
    assert "audit chain intact: 5 rows" in audit(lazaret, aenv, cwd=ws).stdout

    db = root / "domain.db"
    con = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            con.execute("UPDATE audit_net SET detail = 'ttl 6000' WHERE seq = 2")
        con.rollback()
        assert audit(lazaret, aenv, cwd=ws).returncode == 0  # positive control: still intact
        con.execute("DROP TRIGGER audit_net_no_update")
        con.execute("DROP TRIGGER audit_net_no_delete")
        con.execute("UPDATE audit_net SET detail = 'ttl 6000' WHERE seq = 2")
        con.commit()
    finally:
        con.close()
    r = audit(lazaret, aenv, "--escalations", cwd=ws)  # a filter does not hide a broken network row
    assert r.returncode == 1
    assert "audit chain broken at row 2: its contents do not match its row_hash" in r.stderr

    # The last row, a network row, deleted: the head shows it.
    con = sqlite3.connect(db)
    try:
        con.execute("UPDATE audit_net SET detail = 'ttl 60' WHERE seq = 2")
        con.commit()
        assert audit(lazaret, aenv, cwd=ws).returncode == 0  # positive control: restored
        con.execute("DELETE FROM audit_net WHERE seq = 5")
        # A raw escape sequence written into a stored network column.
        con.execute("UPDATE audit_net SET name = ? WHERE seq = 3", ("evil" + ESC + "[2J",))
        con.commit()
    finally:
        con.close()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 1
    assert "audit chain broken at row 3: name holds a space or a byte that is not printable ASCII" in r.stderr
    assert ESC not in r.stdout and ESC not in r.stderr and "UNREADABLE" in r.stdout
    con = sqlite3.connect(db)
    try:
        con.execute("UPDATE audit_net SET name = 'evil.example' WHERE seq = 3")
        con.commit()
    finally:
        con.close()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 1
    assert "audit chain broken at row 5: the row is missing: the chain head records 5 rows" in r.stderr


def test_version_2_store_is_upgraded_and_its_rows_still_verify(lazaret, aenv, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    did, root = made_domain(lazaret, aenv, ws)
    assert append(lazaret, aenv, root, ENTRIES[:2]) == [1, 2]
    db = root / "domain.db"
    # Make the store what a version-2 lazaret left: escalation rows, no audit_net.
    con = sqlite3.connect(db)
    con.executescript("DROP TRIGGER audit_one_seq; DROP TABLE audit_net; PRAGMA user_version = 2;")
    con.close()
    before = db.read_bytes()
    r = audit(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert "audit chain intact: 2 rows" in r.stdout
    assert "no network decisions recorded (its Domain Store is version 2" in r.stdout
    assert db.read_bytes() == before  # read-only: not upgraded

    # The next start upgrades it; network rows continue the same chain.
    r = lz_run(lazaret, aenv, ws, ["true"])
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not running(lazaret, aenv, did), timeout=45, interval=0.2)
    assert append(lazaret, aenv, root, [net(3, "allowed", "*.example.test:443", ports="tcp/443",
                                            detail="for the session")]) == [3]
    doc, r = audit_json(lazaret, aenv, cwd=ws)
    assert r.returncode == 0, r.stderr
    assert doc["store_version"] == 5 and doc["intact"] is True
    assert [x["kind"] for x in doc["rows"]] == ["escalation", "escalation", "net"]
    assert doc["rows"][2]["prev_hash"] == doc["rows"][1]["row_hash"]
