/* test_audit.c — the escalation audit (audit.h) and the store version it
 * brought (store.h, db.h): append and read back byte-exact, the chain
 * verifies (the positive control of every tamper case), an edit of any
 * column of any row is reported at exactly that row, a deleted, reordered
 * or forged row is reported, appending never hides a break, the table's
 * triggers refuse UPDATE/DELETE, a version-1 store is upgraded with its
 * generations kept (all or nothing), a newer one is still refused, and a
 * read-only connection reads while a writer holds the store. Network rows
 * (lz_audit_append_net, table audit_net, store version 3) share the chain:
 * mixed chains read back exactly and verify, an edit of any network
 * column is reported at its row, a deleted last network row through the
 * head, a version-2 store with escalation rows is upgraded and its old
 * rows still verify, and out-of-bound entries are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "audit.h"
#include "db.h"
#include "escape.h"
#include "prepare.h"
#include "store.h"

#define DOM "2222222222222222222222222222222222222222222222222222222222222222"
#define NROWS 4

struct fixture {
    char dir[64];  /* the Domain Root of the chain built by setup */
    char db[96];   /* its domain.db */
    char work[64]; /* a second Domain Root for copies */
    char wdb[96];
};

static int setup(void **state) {
    struct fixture *f = lz_xcalloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/lz-test-audit-XXXXXX");
    snprintf(f->work, sizeof f->work, "/tmp/lz-test-auditw-XXXXXX");
    if (!mkdtemp(f->dir) || !mkdtemp(f->work))
        return -1;
    snprintf(f->db, sizeof f->db, "%s/domain.db", f->dir);
    snprintf(f->wdb, sizeof f->wdb, "%s/domain.db", f->work);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    int pfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    lz_prepare_remove_tree(pfd, f->dir + 5);
    lz_prepare_remove_tree(pfd, f->work + 5);
    close(pfd);
    free(f);
    return 0;
}

/* ---- helpers ---- */

static void plain_sql(const char *path, const char *q) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("sql %s: %s", q, msg);
    sqlite3_close(db);
}

/* SQLITE_OK or the error code of running q through a plain connection. */
static int plain_sql_rc(const char *path, const char *q) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    int rc = sqlite3_exec(db, q, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static char *slurp(const char *path, size_t *len) {
    char *buf = NULL;
    assert_int_equal(lz_read_file_at(AT_FDCWD, path, 1 << 24, &buf, len), 0);
    return buf;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = slurp(from, &n);
    unlink(to);
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, to, b, n, 0600), 0);
    free(b);
}

static struct lz_store *open_store(const char *dir, bool create) {
    struct lz_store_identity id = { .domain_id = DOM, .profile = "p", .workspace = "/w" };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    if (lz_store_open(dir, &id, create, &st, &err) < 0)
        fail_msg("store open: %s", err.msg);
    return st;
}

/* Agent-chosen bytes: an escape sequence, a bidi override, a zero-width
 * space, a byte that is not UTF-8, a backslash, an empty element. */
static const char *const argv_a[] = { "/usr/bin/printf",
                                      "%s\\n",
                                      "\x1b[2Jcleared",
                                      "abc\xe2\x80\xae"
                                      "def",
                                      "zero\xe2\x80\x8bwidth",
                                      "\xff\xfe",
                                      "",
                                      "back\\slash" };
static const char *const argv_b[] = { "/usr/bin/git", "push" };
static const char *const edited_b[] = { "/usr/bin/git", "push", "--dry-run" };

static struct lz_audit_entry entry(int i) {
    struct lz_audit_entry e = {
        .gen = 1 + i / 2,
        .received_ms = 1700000000000 + i * 1000,
        .decided_by = (enum lz_audit_decider)(i % 3),
        .decided_ref = i % 3 == 1 ? 2 : 0,
        .decision = (enum lz_audit_decision)(i % 7),
        .end_state = (enum lz_outcome)(i % 5),
        .argv = i % 2 ? argv_b : argv_a,
        .argc = i % 2 ? LZ_ARRAY_SIZE(argv_b) : LZ_ARRAY_SIZE(argv_a),
        .edited_argv = i % 2 ? edited_b : NULL,
        .edited_argc = i % 2 ? LZ_ARRAY_SIZE(edited_b) : 0,
        .executable = i % 2 ? "/usr/bin/git" : "/usr/bin/printf",
        .has_sha256 = i != 2,
        .cwd = i == 3 ? "/home/dev/ws/sub\x01"
                        "dir"
                      : "/home/dev/ws",
        .exit_status = i == 0 ? 0
            : i == 1          ? -1
                              : 3,
        .signal = i == 1 ? 9 : 0,
        .output_bytes = 12345 * i,
        .ended_ms = 1700000000500 + i * 1000,
    };
    memset(e.request_id, 0x10 + i, sizeof e.request_id);
    memset(e.session_id, 0xa0 + i % 2, sizeof e.session_id);
    memset(e.executable_sha256, 0x55 + i, sizeof e.executable_sha256);
    return e;
}

static void append_ok(struct lz_store *st, int i, int64_t want_seq) {
    struct lz_audit_entry e = entry(i);
    struct lz_error err = { 0 };
    int64_t seq = 0;
    if (lz_audit_append(st, &e, &seq, &err) < 0)
        fail_msg("append: %s", err.msg);
    assert_int_equal(seq, want_seq);
}

/* The chain of NROWS rows in f->dir. */
static void build_chain(struct fixture *f) {
    struct lz_store *st = open_store(f->dir, true);
    for (int i = 0; i < NROWS; i++)
        append_ok(st, i, i + 1);
    lz_store_close(st);
}

/* Reads and verifies the store of dir: 0 or -EBADMSG with *first_bad. */
static int verify_dir(const char *dir, int64_t *first_bad, char *msg, size_t msg_size) {
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    if (lz_store_open_readonly(dir, &id, &st, &err) < 0)
        fail_msg("open read-only: %s", err.msg);
    struct lz_audit_log log = { 0 };
    if (lz_audit_read(st, &log, &err) < 0)
        fail_msg("read: %s", err.msg);
    lz_store_close(st);
    *first_bad = 0;
    int r = lz_audit_verify(&log, first_bad, &err);
    if (msg)
        snprintf(msg, msg_size, "%s", err.msg);
    lz_audit_log_clear(&log);
    return r;
}

static void expect_intact(const char *dir) {
    int64_t bad = 0;
    char msg[LZ_ERROR_MAX];
    if (verify_dir(dir, &bad, msg, sizeof msg) != 0)
        fail_msg("expected an intact chain: %s", msg);
}

static void expect_broken_at(const char *dir, int64_t row, const char *what) {
    int64_t bad = 0;
    char msg[LZ_ERROR_MAX];
    int r = verify_dir(dir, &bad, msg, sizeof msg);
    if (r != -EBADMSG || bad != row)
        fail_msg("%s: expected broken at row %lld, got %d at %lld (%s)", what, (long long)row, r, (long long)bad, msg);
    char want[64];
    snprintf(want, sizeof want, "audit chain broken at row %lld: ", (long long)row);
    assert_non_null(strstr(msg, want));
}

/* A copy of the chain in f->work, with sql run on it through a plain
 * connection (the append-only triggers dropped first, as anyone editing
 * the file can). */
static void tamper(struct fixture *f, const char *sql) {
    copy_file(f->db, f->wdb);
    char q[1024];
    snprintf(q, sizeof q, "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; %s", sql);
    plain_sql(f->wdb, q);
}

/* ---- tests ---- */

static void test_append_read_roundtrip(void **state) {
    struct fixture *f = *state;
    build_chain(f);
    struct lz_store *st = open_store(f->dir, false);
    struct lz_audit_log log = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    lz_store_close(st);
    assert_string_equal(log.domain_id, DOM);
    assert_int_equal(log.store_version, LZ_STORE_VERSION);
    assert_int_equal(log.n, NROWS);
    assert_true(log.has_head);
    assert_int_equal(log.head_seq, NROWS);
    for (int i = 0; i < NROWS; i++) {
        const struct lz_audit_row *w = &log.rows[i];
        struct lz_audit_entry e = entry(i);
        assert_null(w->problem);
        assert_int_equal(w->seq, i + 1);
        assert_int_equal(w->e.gen, e.gen);
        assert_memory_equal(w->e.request_id, e.request_id, sizeof e.request_id);
        assert_memory_equal(w->e.session_id, e.session_id, sizeof e.session_id);
        assert_int_equal(w->e.decided_by, e.decided_by);
        assert_int_equal(w->e.decision, e.decision);
        assert_int_equal(w->e.end_state, e.end_state);
        assert_int_equal(w->e.argc, e.argc);
        for (size_t k = 0; k < e.argc; k++)
            assert_string_equal(w->e.argv[k], e.argv[k]); /* the exact bytes */
        assert_int_equal(w->e.edited_argv != NULL, e.edited_argv != NULL);
        assert_int_equal(w->e.edited_argc, e.edited_argc);
        for (size_t k = 0; k < e.edited_argc; k++)
            assert_string_equal(w->e.edited_argv[k], e.edited_argv[k]);
        assert_string_equal(w->e.executable, e.executable);
        assert_string_equal(w->e.cwd, e.cwd);
        assert_int_equal(w->e.has_sha256, e.has_sha256);
        if (e.has_sha256)
            assert_memory_equal(w->e.executable_sha256, e.executable_sha256, 32);
        assert_int_equal(w->e.exit_status, e.exit_status);
        assert_int_equal(w->e.signal, e.signal);
        assert_int_equal(w->e.output_bytes, e.output_bytes);
        assert_int_equal(w->e.ended_ms, e.ended_ms);
        if (i == 0) {
            uint8_t g[32];
            lz_audit_genesis(DOM, g);
            assert_memory_equal(w->prev_hash, g, 32);
        } else {
            assert_memory_equal(w->prev_hash, log.rows[i - 1].row_hash, 32);
        }
    }
    /* What is stored is the escaped rendering: nothing a terminal would
     * interpret, and a JSON array of strings. */
    assert_string_equal(log.rows[0].argv_text,
                        "[\"/usr/bin/printf\",\"%s\\\\\\\\n\",\"\\\\x1b[2Jcleared\","
                        "\"abc\\\\u{202E}def\",\"zero\\\\u{200B}width\",\"\\\\xff\\\\xfe\","
                        "\"\",\"back\\\\\\\\slash\"]");
    assert_null(log.rows[0].edited_argv_text);
    assert_string_equal(log.rows[3].cwd_text, "/home/dev/ws/sub\\x01dir");
    /* The positive control of every tamper test below. */
    int64_t bad = -1;
    assert_int_equal(lz_audit_verify(&log, &bad, &err), 0);
    lz_audit_log_clear(&log);
    expect_intact(f->dir);
}

static void test_hash_is_pinned(void **state) {
    (void)state;
    /* The encoding of audit.h, pinned: a change to it (field order,
     * widths, names) must be deliberate, with a store version. */
    struct lz_audit_entry e = entry(1);
    uint8_t prev[32], h[32];
    lz_audit_genesis(DOM, prev);
    lz_audit_row_hash(1, &e, prev, h);
    char hex[65];
    lz_hex(h, 32, hex);
    uint8_t h2[32];
    lz_audit_row_hash(2, &e, prev, h2);
    assert_memory_not_equal(h, h2, 32); /* seq is bound */
    e.edited_argv = NULL;
    e.edited_argc = 0;
    lz_audit_row_hash(1, &e, prev, h2);
    assert_memory_not_equal(h, h2, 32); /* absent vs present edit */
    struct lz_audit_entry a = entry(0), b = entry(0);
    /* Length prefixes: moving a byte between adjacent elements changes the hash. */
    const char *const va[] = { "ab", "c" }, *const vb[] = { "a", "bc" };
    a.argv = va;
    a.argc = 2;
    b.argv = vb;
    b.argc = 2;
    lz_audit_row_hash(1, &a, prev, h);
    lz_audit_row_hash(1, &b, prev, h2);
    assert_memory_not_equal(h, h2, 32);
    /* The golden value, computed independently from audit.h's text (the
     * same encoding as tests/integration/test_audit_cli.py's row_hash). */
    assert_string_equal(hex, "4aa15c4b95afa423b679a5930db95452d1c9213e4a01f7775671ef1bf77dea8e");
}

struct edit {
    const char *column;
    const char *set; /* SQL expression of the new value */
};

/* Every column, each to a different value its CHECK constraints accept. */
static const struct edit edits[] = {
    { "gen", "gen + 1" },
    { "request_id", "'ffffffffffffffffffffffffffffffff'" },
    { "session_id", "'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'" },
    { "received_ms", "received_ms + 1" },
    { "decided_by", "CASE decided_by WHEN 'rule' THEN 'developer' ELSE 'rule' END" },
    { "decided_ref", "decided_ref + 1" },
    { "decision", "CASE decision WHEN 'denied' THEN 'approved' ELSE 'denied' END" },
    { "end_state", "CASE end_state WHEN 'completed' THEN 'failed' ELSE 'completed' END" },
    { "argv", "'[\"/bin/true\"]'" },
    { "argv", "replace(argv, ',', ', ')" }, /* the same bytes, not the stored form */
    { "edited_argv", "CASE WHEN edited_argv IS NULL THEN '[]' ELSE NULL END" },
    { "executable", "executable || 'x'" },
    { "executable_sha256", "CASE executable_sha256 WHEN '' THEN printf('%064d', 0) ELSE '' END" },
    { "cwd", "cwd || '/'" },
    { "cwd", "'\\x'" }, /* not a rendering lz_escape produces */
    { "exit_status", "exit_status + 1" },
    { "signal", "signal + 1" },
    { "output_bytes", "output_bytes + 1" },
    { "ended_ms", "ended_ms - 1" },
    { "prev_hash", "CASE substr(prev_hash, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END || substr(prev_hash, 2)" },
    { "row_hash", "CASE substr(row_hash, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END || substr(row_hash, 2)" },
    { "row_hash", "upper(row_hash)" },
    { "seq", "seq + 1000" },
};

static void test_edit_any_field_any_row(void **state) {
    struct fixture *f = *state;
    build_chain(f);
    for (size_t c = 0; c < LZ_ARRAY_SIZE(edits); c++) {
        for (int row = 1; row <= NROWS; row++) {
            char sql[512], what[160];
            snprintf(sql, sizeof sql, "UPDATE audit SET %s = %s WHERE seq = %d", edits[c].column, edits[c].set, row);
            snprintf(what, sizeof what, "%s = %s on row %d", edits[c].column, edits[c].set, row);
            tamper(f, sql);
            expect_broken_at(f->work, row, what);
        }
    }
    /* Positive control: the same copy and trigger drop, no edit. */
    tamper(f, "SELECT 1");
    expect_intact(f->work);
}

static void test_delete_reorder_forge(void **state) {
    struct fixture *f = *state;
    build_chain(f);
    tamper(f, "DELETE FROM audit WHERE seq = 1");
    expect_broken_at(f->work, 1, "first row deleted");
    tamper(f, "DELETE FROM audit WHERE seq = 2");
    expect_broken_at(f->work, 2, "middle row deleted");
    tamper(f, "DELETE FROM audit WHERE seq = 4");
    expect_broken_at(f->work, 4, "last row deleted (the head shows it)");
    tamper(f, "DELETE FROM audit WHERE seq >= 3");
    expect_broken_at(f->work, 3, "the tail cut off");
    tamper(f, "DELETE FROM audit");
    expect_broken_at(f->work, 1, "every row deleted");
    /* Reordered: rows 2 and 3 swap places (seq values exchanged). */
    tamper(f,
           "UPDATE audit SET seq = 1000 WHERE seq = 2; UPDATE audit SET seq = 2 WHERE seq = 3;"
           " UPDATE audit SET seq = 3 WHERE seq = 1000");
    expect_broken_at(f->work, 2, "rows 2 and 3 swapped");
    /* Renumbered after a deletion, so that seq has no gap. */
    tamper(f, "DELETE FROM audit WHERE seq = 2; UPDATE audit SET seq = seq - 1 WHERE seq > 2");
    expect_broken_at(f->work, 2, "deleted and renumbered");
    /* A forged row after the last one, the head left alone. */
    tamper(f,
           "INSERT INTO audit SELECT 5, gen, request_id, session_id, received_ms, decided_by, decided_ref,"
           " decision, end_state, argv, edited_argv, executable, executable_sha256, cwd, exit_status, signal,"
           " output_bytes, ended_ms, row_hash, row_hash FROM audit WHERE seq = 4");
    expect_broken_at(f->work, 5, "forged row");
    /* The head removed or damaged. */
    tamper(f, "DELETE FROM meta WHERE key = 'audit_head'");
    expect_broken_at(f->work, NROWS, "head removed");
    tamper(f, "UPDATE meta SET value = 'four' WHERE key = 'audit_head'");
    expect_broken_at(f->work, NROWS, "head malformed");
    /* The chain moved to another Domain: the genesis hash differs. */
    tamper(f,
           "UPDATE meta SET value = '3333333333333333333333333333333333333333333333333333333333333333'"
           " WHERE key = 'domain_id'");
    int64_t bad = 0;
    struct lz_store_identity id = { .domain_id = "3333333333333333333333333333333333333333333333333333333333333333" };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_store_open_readonly(f->work, &id, &st, &err), 0);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    lz_store_close(st);
    assert_int_equal(lz_audit_verify(&log, &bad, &err), -EBADMSG);
    assert_int_equal(bad, 1);
    assert_non_null(strstr(err.msg, "genesis"));
    lz_audit_log_clear(&log);
}

static void test_append_does_not_hide_a_break(void **state) {
    struct fixture *f = *state;
    build_chain(f);
    /* An edited row stays the first broken one after more appends. */
    tamper(f, "UPDATE audit SET output_bytes = 1 WHERE seq = 2");
    struct lz_store *st = open_store(f->work, false);
    append_ok(st, 4, 5);
    lz_store_close(st);
    expect_broken_at(f->work, 2, "edited, then appended");
    /* A deleted last row is not filled in by the next append. */
    tamper(f, "DELETE FROM audit WHERE seq = 4");
    st = open_store(f->work, false);
    append_ok(st, 4, 5);
    lz_store_close(st);
    expect_broken_at(f->work, 4, "last row deleted, then appended");
    /* Positive control: appends to an intact chain keep it intact. */
    copy_file(f->db, f->wdb);
    st = open_store(f->work, false);
    append_ok(st, 5, 5);
    append_ok(st, 6, 6);
    lz_store_close(st);
    expect_intact(f->work);
}

static void test_triggers_refuse_changes(void **state) {
    struct fixture *f = *state;
    build_chain(f);
    copy_file(f->db, f->wdb);
    assert_int_equal(plain_sql_rc(f->wdb, "UPDATE audit SET output_bytes = 0 WHERE seq = 1"), SQLITE_CONSTRAINT);
    assert_int_equal(plain_sql_rc(f->wdb, "DELETE FROM audit WHERE seq = 4"), SQLITE_CONSTRAINT);
    expect_intact(f->work);
    /* Positive control: without the triggers the same UPDATE goes through. */
    assert_int_equal(
        plain_sql_rc(f->wdb, "DROP TRIGGER audit_no_update; UPDATE audit SET output_bytes = 7 WHERE seq = 1"),
        SQLITE_OK);
    expect_broken_at(f->work, 1, "after the trigger was dropped");
}

static void test_append_checks_entry(void **state) {
    struct fixture *f = *state;
    struct lz_store *st = open_store(f->dir, true);
    struct lz_error err = { 0 };
    struct lz_audit_entry e = entry(0);
    e.signal = 65;
    assert_int_equal(lz_audit_append(st, &e, NULL, &err), -EINVAL);
    e = entry(0);
    e.exit_status = 256;
    assert_int_equal(lz_audit_append(st, &e, NULL, &err), -EINVAL);
    e = entry(0);
    e.decision = (enum lz_audit_decision)99;
    assert_int_equal(lz_audit_append(st, &e, NULL, &err), -EINVAL);
    /* Nothing was written: the next row is still row 1, and it joins an
     * open transaction (rolled back with it). */
    assert_int_equal(lz_store_begin(st, &err), 0);
    append_ok(st, 0, 1);
    lz_store_rollback(st);
    append_ok(st, 0, 1);
    /* ended_ms 0: now. */
    e = entry(1);
    e.ended_ms = 0;
    assert_int_equal(lz_audit_append(st, &e, NULL, &err), 0);
    lz_store_close(st);
    expect_intact(f->dir);
}

/* The version-1 schema exactly as the previous lazaret created it. */
static const char v1_schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;"
    "CREATE TABLE generations("
    "  gen INTEGER PRIMARY KEY,"
    "  state TEXT NOT NULL CHECK(state IN ('starting','running','stopping','clean','failed')),"
    "  fingerprint TEXT NOT NULL,"
    "  hc TEXT NOT NULL,"
    "  started_ms INTEGER NOT NULL,"
    "  ended_ms INTEGER) STRICT;"
    "CREATE TABLE participants("
    "  gen INTEGER NOT NULL REFERENCES generations(gen),"
    "  role TEXT NOT NULL CHECK(role IN ('prepared_lower','state_anchor','git_routing','network',"
    "                                    'helper','sandbox','publication')),"
    "  state TEXT NOT NULL CHECK(state IN ('intent','lease_held','prepared','committed',"
    "                                      'release_intent','clean')),"
    "  artifact_id TEXT, mount TEXT, evidence TEXT,"
    "  changed_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(gen, role)) STRICT;"
    "CREATE TABLE processes("
    "  gen INTEGER NOT NULL, role TEXT NOT NULL, slot TEXT NOT NULL,"
    "  phase TEXT NOT NULL CHECK(phase IN ('staged','committed')),"
    "  boot_id TEXT NOT NULL, pidfs_dev INTEGER NOT NULL, pidfs_ino INTEGER NOT NULL,"
    "  pid INTEGER NOT NULL, start_time INTEGER NOT NULL,"
    "  PRIMARY KEY(gen, role, slot),"
    "  FOREIGN KEY(gen, role) REFERENCES participants(gen, role)) STRICT;"
    "CREATE TABLE sessions("
    "  gen INTEGER NOT NULL REFERENCES generations(gen),"
    "  session INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK(state IN ('intent','running','release_intent','clean')),"
    "  tty INTEGER NOT NULL, command TEXT NOT NULL,"
    "  phase TEXT NOT NULL CHECK(phase IN ('unassigned','staged','committed')),"
    "  boot_id TEXT, pidfs_dev INTEGER, pidfs_ino INTEGER, pid INTEGER, start_time INTEGER,"
    "  started_ms INTEGER NOT NULL, ended_ms INTEGER,"
    "  PRIMARY KEY(gen, session)) STRICT;"
    "INSERT INTO meta VALUES('domain_id', '" DOM "'), ('profile', 'p'), ('workspace', '/w'),"
    "  ('created_ms', '1700000000000'), ('last_used_ms', '1700000000000'), ('anchor_gen', '1');"
    "INSERT INTO generations VALUES(1, 'clean', 'fp1', 'boot:1:2:3:4', 1700000000000, 1700000001000),"
    "  (2, 'clean', 'fp2', 'boot:1:2:5:6', 1700000002000, 1700000003000);"
    "INSERT INTO participants VALUES(2, 'sandbox', 'clean', NULL, NULL, NULL, 1700000003000);"
    "PRAGMA application_id = 1280984147; PRAGMA user_version = 1;"; /* 0x4c5a4453 "LZDS" */

static void make_v1(const char *db) {
    plain_sql(db, "PRAGMA journal_mode = WAL");
    plain_sql(db, v1_schema);
}

static void test_upgrade_from_v1(void **state) {
    struct fixture *f = *state;
    make_v1(f->db);
    size_t len0, len1;
    char *before = slurp(f->db, &len0);

    /* A read-only open writes nothing: version 1 as it is, no rows. */
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), 0);
    assert_int_equal(lz_store_version(st), 1);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    assert_int_equal(log.store_version, 1);
    assert_int_equal(log.n, 0);
    assert_int_equal(lz_audit_verify(&log, NULL, &err), 0);
    lz_audit_log_clear(&log);
    struct lz_audit_entry e = entry(0);
    assert_true(lz_audit_append(st, &e, NULL, &err) < 0);
    lz_store_close(st);
    char *after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(after);

    /* The writer's open upgrades, keeping every generation. */
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_version(st), LZ_STORE_VERSION);
    assert_int_equal(lz_store_upgraded_from(st), 1);
    struct lz_store_snapshot s;
    assert_int_equal(lz_store_read(st, &s, &err), 0);
    assert_int_equal(s.n_gens, 2);
    assert_string_equal(s.gens[0].fingerprint, "fp1");
    assert_string_equal(s.gens[1].fingerprint, "fp2");
    assert_int_equal(s.n_parts, 1);
    lz_store_snapshot_clear(&s);
    assert_int_equal(lz_store_check(st, &err), 0);
    append_ok(st, 0, 1);
    lz_store_close(st);
    assert_int_equal(plain_sql_rc(f->db, "UPDATE audit SET gen = 9"), SQLITE_CONSTRAINT); /* with its triggers */
    expect_intact(f->dir);

    /* Opened again: nothing more to upgrade. */
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_upgraded_from(st), 0);
    lz_store_close(st);

    /* A newer store is still refused, and left as it is. */
    plain_sql(f->db, "PRAGMA user_version = 6");
    free(before);
    before = slurp(f->db, &len0);
    assert_int_equal(lz_store_open(f->dir, &id, false, &st, &err), -EPROTONOSUPPORT);
    assert_non_null(strstr(err.msg, "has version 6"));
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), -EPROTONOSUPPORT);
    after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
}

static void test_upgrade_all_or_nothing(void **state) {
    struct fixture *f = *state;
    make_v1(f->db);
    /* A table in the way: the upgrade's CREATE TABLE fails. */
    plain_sql(f->db, "CREATE TABLE audit(x INTEGER) STRICT");
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_true(lz_store_open(f->dir, &id, false, &st, &err) < 0);
    assert_non_null(strstr(err.msg, "upgrading from version 1 to 2 failed"));
    /* Still version 1, its generations there. */
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), 0);
    assert_int_equal(lz_store_version(st), 1);
    struct lz_store_snapshot s;
    assert_int_equal(lz_store_read(st, &s, &err), 0);
    assert_int_equal(s.n_gens, 2);
    lz_store_snapshot_clear(&s);
    lz_store_close(st);
    /* Positive control: without the stray table it upgrades. */
    plain_sql(f->db, "DROP TABLE audit");
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_upgraded_from(st), 1);
    lz_store_close(st);
}

static void test_readonly_beside_a_writer(void **state) {
    struct fixture *f = *state;
    /* The writer (the coordinator) keeps its connection open. */
    struct lz_store *w = open_store(f->dir, true);
    append_ok(w, 0, 1);
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *r = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &r, &err), 0);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(r, &log, &err), 0);
    assert_int_equal(log.n, 1);
    lz_audit_log_clear(&log);
    /* The writer is not blocked by the reader's connection, and a new
     * read sees its rows. */
    append_ok(w, 1, 2);
    assert_int_equal(lz_audit_read(r, &log, &err), 0);
    assert_int_equal(log.n, 2);
    assert_int_equal(lz_audit_verify(&log, NULL, &err), 0);
    lz_audit_log_clear(&log);
    /* A read-only connection cannot append. */
    struct lz_audit_entry e = entry(2);
    assert_true(lz_audit_append(r, &e, NULL, &err) < 0);
    lz_store_close(r);
    lz_store_close(w);
    /* With no writer (the WAL checkpointed and gone), read-only still works. */
    expect_intact(f->dir);
    /* Another Domain's identity is refused read-only as well (SR-11). */
    struct lz_store_identity other = { .domain_id =
                                           "4444444444444444444444444444444444444444444444444444444444444444" };
    assert_int_equal(lz_store_open_readonly(f->dir, &other, &r, &err), -EBADMSG);
}

/* ---- network rows ---- */

static const uint32_t addrs_a[] = { 0xc6336407, 0xc6336408 }; /* 198.51.100.7, .8 */
static const uint32_t addrs_c[] = { 0x0a000001 };             /* 10.0.0.1 */

static struct lz_audit_net_entry net_entry(int i) {
    static const struct lz_audit_net_entry base[] = {
        { .event = LZ_AUDIT_NET_LEARNED,
          .name = "api.example.test",
          .addrs = addrs_a,
          .n_addrs = 2,
          .ports = "tcp/443,8443",
          .detail = "ttl 60" },
        { .event = LZ_AUDIT_NET_REFUSED, .name = "evil.example", .ports = "", .detail = "no rule allows it" },
        { .event = LZ_AUDIT_NET_FILTERED,
          .name = "rebind.example.test",
          .addrs = addrs_c,
          .n_addrs = 1,
          .ports = "tcp/*",
          .detail = "private address (rebinding)" },
        { .event = LZ_AUDIT_NET_SUPPRESSED, .name = NULL, .ports = NULL, .detail = NULL },
    };
    struct lz_audit_net_entry e = base[i % 4];
    e.gen = 1 + i / 2;
    e.at_ms = 1700000100000 + i * 1000;
    return e;
}

static void append_net_ok(struct lz_store *st, int i, int64_t want_seq) {
    struct lz_audit_net_entry e = net_entry(i);
    struct lz_error err = { 0 };
    int64_t seq = 0;
    if (lz_audit_append_net(st, &e, &seq, &err) < 0)
        fail_msg("append net: %s", err.msg);
    assert_int_equal(seq, want_seq);
}

/* The mixed chain: escalation (e) and network (n) rows in this order, the
 * last one a network row. */
static const char mixed[] = "ennenen";
#define NMIXED ((int)sizeof mixed - 1)

static void build_mixed(const char *dir, bool create) {
    struct lz_store *st = open_store(dir, create);
    int ne = 0, nn = 0;
    for (int i = 0; i < NMIXED; i++) {
        if (mixed[i] == 'e')
            append_ok(st, ne++, i + 1);
        else
            append_net_ok(st, nn++, i + 1);
    }
    lz_store_close(st);
}

static void tamper_net(struct fixture *f, const char *sql) {
    copy_file(f->db, f->wdb);
    char q[1024];
    snprintf(q, sizeof q,
             "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; DROP TRIGGER audit_net_no_update;"
             " DROP TRIGGER audit_net_no_delete; %s",
             sql);
    plain_sql(f->wdb, q);
}

static void test_net_event_names(void **state) {
    (void)state;
    static const char *const want[] = { "learned", "refused",    "denied",      "filtered",           "limited",
                                        "allowed", "suppressed", "tls-refused", "credential-refused", "git-push" };
    for (int i = 0; i < 10; i++)
        assert_string_equal(lz_audit_net_event_name((enum lz_audit_net_event)(i + 1)), want[i]);
    assert_int_equal(LZ_AUDIT_NET_SUPPRESSED, 7);
    assert_int_equal(LZ_AUDIT_NET_TLS_REFUSED, 8);
    assert_null(lz_audit_net_event_name((enum lz_audit_net_event)0));
    assert_int_equal(LZ_AUDIT_NET_GIT_PUSH, 10);
    assert_null(lz_audit_net_event_name((enum lz_audit_net_event)11));
    assert_null(lz_audit_net_event_name((enum lz_audit_net_event) - 1));
}

/* Version 3 -> 4: a store whose audit_net table has version 3's CHECK
 * (no 'tls-refused'), with escalation and network rows, is upgraded by
 * the writer's open: the rows and the chain stay as they were, the
 * triggers are back, and a TLS gate row continues the chain. */
static void test_upgrade_from_v3(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    plain_sql(f->db,
              "DROP TRIGGER audit_one_seq; DROP TRIGGER audit_net_no_update; DROP TRIGGER audit_net_no_delete;"
              " DROP TRIGGER audit_net_one_seq; ALTER TABLE audit_net RENAME TO n4;"
              " CREATE TABLE audit_net(seq INTEGER PRIMARY KEY CHECK(seq >= 1), gen INTEGER NOT NULL,"
              " at_ms INTEGER NOT NULL, event TEXT NOT NULL CHECK(event IN ('learned','refused','denied',"
              "'filtered','limited','allowed','suppressed')), name TEXT NOT NULL, addrs TEXT NOT NULL,"
              " ports TEXT NOT NULL, detail TEXT NOT NULL, prev_hash TEXT NOT NULL CHECK(length(prev_hash) = 64),"
              " row_hash TEXT NOT NULL CHECK(length(row_hash) = 64)) STRICT;"
              " INSERT INTO audit_net SELECT * FROM n4; DROP TABLE n4;"
              " CREATE TRIGGER audit_net_no_update BEFORE UPDATE ON audit_net"
              "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"
              " CREATE TRIGGER audit_net_no_delete BEFORE DELETE ON audit_net"
              "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"
              " CREATE TRIGGER audit_net_one_seq BEFORE INSERT ON audit_net WHEN EXISTS(SELECT 1 FROM audit"
              "  WHERE seq = NEW.seq) BEGIN SELECT RAISE(ABORT, 'the audit already holds this seq'); END;"
              " CREATE TRIGGER audit_one_seq BEFORE INSERT ON audit WHEN EXISTS(SELECT 1 FROM audit_net"
              "  WHERE seq = NEW.seq) BEGIN SELECT RAISE(ABORT, 'the audit already holds this seq'); END;"
              " PRAGMA user_version = 3;");
    /* Positive control: version 3's table refuses the new event. */
    assert_int_equal(plain_sql_rc(f->db,
                                  "INSERT INTO audit_net VALUES(99, 1, 1, 'tls-refused', '', '', '', '',"
                                  " printf('%064d', 0), printf('%064d', 0))"),
                     SQLITE_CONSTRAINT);
    expect_intact(f->dir);
    struct lz_store *st = open_store(f->dir, false);
    assert_int_equal(lz_store_version(st), LZ_STORE_VERSION);
    assert_int_equal(lz_store_upgraded_from(st), 3);
    struct lz_audit_net_entry e = { .event = LZ_AUDIT_NET_TLS_REFUSED,
                                    .gen = 9,
                                    .at_ms = 1700000900000,
                                    .name = "front.example.test",
                                    .addrs = addrs_c,
                                    .n_addrs = 1,
                                    .ports = "tcp/443",
                                    .detail = "not learned for the server name" };
    struct lz_error err = { 0 };
    int64_t seq = 0;
    if (lz_audit_append_net(st, &e, &seq, &err) < 0)
        fail_msg("append tls-refused: %s", err.msg);
    assert_int_equal(seq, NMIXED + 1);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    assert_int_equal(log.n, NMIXED + 1);
    lz_audit_log_clear(&log);
    lz_store_close(st);
    expect_intact(f->dir);
    assert_int_equal(plain_sql_rc(f->db, "UPDATE audit_net SET gen = 9"), SQLITE_CONSTRAINT);
    assert_int_equal(plain_sql_rc(f->db, "DELETE FROM audit_net"), SQLITE_CONSTRAINT);
    assert_int_equal(plain_sql_rc(f->db,
                                  "INSERT INTO audit VALUES(1, 1, printf('%032d', 0), printf('%032d', 0), 1,"
                                  " 'none', 0, 'none', 'completed', '', NULL, '', '', '', 0, 0, 0, 0,"
                                  " printf('%064d', 0), printf('%064d', 0))"),
                     SQLITE_CONSTRAINT); /* seq 1 is a network row's: audit_one_seq is back */
}

static void test_mixed_roundtrip(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    struct lz_store *st = open_store(f->dir, false);
    struct lz_audit_log log = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    lz_store_close(st);
    assert_int_equal(log.store_version, LZ_STORE_VERSION);
    assert_int_equal(LZ_STORE_VERSION, LZ_AUDIT_CRED_STORE_VERSION);
    assert_int_equal(log.n, NMIXED);
    assert_true(log.has_head);
    assert_int_equal(log.head_seq, NMIXED);
    uint8_t prev[32];
    lz_audit_genesis(DOM, prev);
    int ne = 0, nn = 0;
    for (int i = 0; i < NMIXED; i++) {
        const struct lz_audit_row *w = &log.rows[i];
        assert_null(w->problem);
        assert_int_equal(w->seq, i + 1);
        assert_memory_equal(w->prev_hash, prev, 32); /* one chain across both kinds */
        memcpy(prev, w->row_hash, 32);
        if (mixed[i] == 'e') {
            struct lz_audit_entry e = entry(ne++);
            assert_int_equal(w->kind, LZ_AUDIT_ESCALATION);
            assert_memory_equal(w->e.request_id, e.request_id, sizeof e.request_id);
            assert_string_equal(w->e.executable, e.executable);
            assert_null(w->net.name);
            continue;
        }
        struct lz_audit_net_entry e = net_entry(nn++);
        assert_int_equal(w->kind, LZ_AUDIT_NET);
        assert_null(w->e.argv);
        assert_int_equal(w->e.argc, 0);
        assert_int_equal(w->net.gen, e.gen);
        assert_int_equal(w->net.at_ms, e.at_ms);
        assert_int_equal(w->net.event, e.event);
        assert_string_equal(w->net.name, e.name ? e.name : "");
        assert_string_equal(w->net.ports, e.ports ? e.ports : "");
        assert_string_equal(w->net.detail, e.detail ? e.detail : "");
        assert_int_equal(w->net.n_addrs, e.n_addrs);
        for (size_t k = 0; k < e.n_addrs; k++)
            assert_int_equal(w->net.addrs[k], e.addrs[k]);
    }
    /* The stored address column: dotted quads joined by ",". */
    assert_string_equal(log.rows[1].addrs_text, "198.51.100.7,198.51.100.8");
    assert_string_equal(log.rows[2].addrs_text, "");
    assert_memory_equal(log.head_hash, prev, 32);
    int64_t bad = -1;
    assert_int_equal(lz_audit_verify(&log, &bad, &err), 0); /* the positive control of the tamper tests */
    lz_audit_log_clear(&log);
    expect_intact(f->dir);
}

static void test_net_hash_is_pinned(void **state) {
    (void)state;
    struct lz_audit_net_entry e = net_entry(0);
    uint8_t prev[32], h[32], h2[32];
    lz_audit_genesis(DOM, prev);
    lz_audit_net_row_hash(1, &e, prev, h);
    char hex[65];
    lz_hex(h, 32, hex);
    /* Computed independently from audit.h's text (Python: the prefix, I, S
     * and V of the dotted quads), as test_audit_cli.py's net_row_hash. */
    assert_string_equal(hex, "ff6eb14085172d796759381e20b0e7bae09e7943c8b7c22f2a490f0968e4a9cc");
    lz_audit_net_row_hash(2, &e, prev, h2);
    assert_memory_not_equal(h, h2, 32); /* seq is bound */
    /* The address order is bound. */
    const uint32_t swapped[] = { addrs_a[1], addrs_a[0] };
    e.addrs = swapped;
    lz_audit_net_row_hash(1, &e, prev, h2);
    assert_memory_not_equal(h, h2, 32);
    /* Length prefixes: a byte moved between adjacent fields. */
    struct lz_audit_net_entry a = net_entry(0), b = net_entry(0);
    a.ports = "tcp/443";
    a.detail = "1";
    b.ports = "tcp/4431";
    b.detail = "";
    lz_audit_net_row_hash(1, &a, prev, h);
    lz_audit_net_row_hash(1, &b, prev, h2);
    assert_memory_not_equal(h, h2, 32);
    /* NULL and "" are the same value (both stored as ""). */
    a = net_entry(3);
    b = net_entry(3);
    b.name = b.ports = b.detail = "";
    lz_audit_net_row_hash(1, &a, prev, h);
    lz_audit_net_row_hash(1, &b, prev, h2);
    assert_memory_equal(h, h2, 32);
}

/* Every column of audit_net, each to a value its CHECK constraints accept. */
static const struct edit net_edits[] = {
    { "gen", "gen + 1" },
    { "at_ms", "at_ms + 1" },
    { "event", "CASE event WHEN 'denied' THEN 'learned' ELSE 'denied' END" },
    { "name", "name || 'x'" },
    { "name", "name || char(27)" },       /* a control byte */
    { "name", "name || ' '" },            /* a space */
    { "name", "name || char(0) || 'x'" }, /* a NUL inside the text */
    { "addrs", "'203.0.113.9'" },
    { "addrs", "CASE addrs WHEN '' THEN '1.2.3.4' ELSE '' END" },
    { "addrs", "'010.0.0.1'" },  /* not inet_ntop's form */
    { "addrs", "addrs || ','" }, /* an empty element */
    { "addrs", "'1.2.3.4, 5.6.7.8'" },
    { "ports", "ports || '1'" },
    { "ports", "ports || char(9)" },
    { "detail", "detail || '.'" },
    { "detail", "detail || char(10)" },
    { "detail", "detail || char(200)" }, /* UTF-8, not ASCII */
    { "prev_hash", "CASE substr(prev_hash, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END || substr(prev_hash, 2)" },
    { "row_hash", "CASE substr(row_hash, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END || substr(row_hash, 2)" },
    { "row_hash", "upper(row_hash)" },
    { "seq", "seq + 1000" },
};

static void test_net_edit_any_field_any_row(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    for (size_t c = 0; c < LZ_ARRAY_SIZE(net_edits); c++) {
        for (int row = 1; row <= NMIXED; row++) {
            if (mixed[row - 1] != 'n')
                continue;
            char sql[512], what[200];
            snprintf(sql, sizeof sql, "UPDATE audit_net SET %s = %s WHERE seq = %d", net_edits[c].column,
                     net_edits[c].set, row);
            snprintf(what, sizeof what, "%s = %s on row %d", net_edits[c].column, net_edits[c].set, row);
            tamper_net(f, sql);
            expect_broken_at(f->work, row, what);
        }
    }
    /* The escalation rows of a mixed chain still break at their row. */
    tamper_net(f, "UPDATE audit SET output_bytes = output_bytes + 1 WHERE seq = 4");
    expect_broken_at(f->work, 4, "an escalation row among network rows");
    /* Positive control: the same copy and trigger drops, no edit. */
    tamper_net(f, "SELECT 1");
    expect_intact(f->work);
}

static void test_net_delete_move_forge(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    tamper_net(f, "DELETE FROM audit_net WHERE seq = 7");
    expect_broken_at(f->work, 7, "the last (network) row deleted: the head shows it");
    tamper_net(f, "DELETE FROM audit_net WHERE seq = 3");
    expect_broken_at(f->work, 3, "a middle network row deleted");
    tamper_net(f, "DELETE FROM audit_net");
    expect_broken_at(f->work, 2, "every network row deleted");
    /* Renumbered after a deletion, so that seq has no gap. */
    tamper_net(f,
               "DELETE FROM audit_net WHERE seq = 5; UPDATE audit SET seq = 5 WHERE seq = 6;"
               " UPDATE audit_net SET seq = 6 WHERE seq = 7; UPDATE meta SET value = '6 ' || substr(value, 3)"
               " WHERE key = 'audit_head'");
    expect_broken_at(f->work, 5, "deleted and renumbered");
    /* A network row moved into the other table under the same seq: the
     * escalation encoding cannot give its hash. */
    tamper_net(f,
               "DROP TRIGGER audit_one_seq; DELETE FROM audit_net WHERE seq = 2;"
               " INSERT INTO audit SELECT 2, gen, request_id, session_id, received_ms, decided_by, decided_ref,"
               " decision, end_state, argv, edited_argv, executable, executable_sha256, cwd, exit_status, signal,"
               " output_bytes, ended_ms, (SELECT row_hash FROM audit WHERE seq = 1),"
               " '" DOM "' FROM audit WHERE seq = 1");
    expect_broken_at(f->work, 2, "a row of the other kind in its place");
    /* The same seq in both tables (the insert trigger dropped). */
    tamper_net(f,
               "DROP TRIGGER audit_net_one_seq; INSERT INTO audit_net SELECT 4, gen, at_ms, event, name, addrs,"
               " ports, detail, prev_hash, row_hash FROM audit_net WHERE seq = 3");
    expect_broken_at(f->work, 5, "a seq held twice");
    /* A forged network row after the last one, the head left alone. */
    tamper_net(f,
               "INSERT INTO audit_net SELECT 8, gen, at_ms, event, name, addrs, ports, detail, row_hash, row_hash"
               " FROM audit_net WHERE seq = 7");
    expect_broken_at(f->work, 8, "forged network row");
    /* Positive control. */
    tamper_net(f, "SELECT 1");
    expect_intact(f->work);
}

static void test_net_triggers(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    copy_file(f->db, f->wdb);
    assert_int_equal(plain_sql_rc(f->wdb, "UPDATE audit_net SET detail = 'x' WHERE seq = 2"), SQLITE_CONSTRAINT);
    assert_int_equal(plain_sql_rc(f->wdb, "DELETE FROM audit_net WHERE seq = 7"), SQLITE_CONSTRAINT);
    /* A seq already held by the other table is refused either way. */
    assert_int_equal(plain_sql_rc(f->wdb,
                                  "INSERT INTO audit_net SELECT 1, gen, at_ms, event, name, addrs, ports, detail,"
                                  " prev_hash, row_hash FROM audit_net WHERE seq = 2"),
                     SQLITE_CONSTRAINT);
    assert_int_equal(plain_sql_rc(f->wdb,
                                  "INSERT INTO audit SELECT 2, gen, request_id, session_id, received_ms, decided_by,"
                                  " decided_ref, decision, end_state, argv, edited_argv, executable,"
                                  " executable_sha256, cwd, exit_status, signal, output_bytes, ended_ms, prev_hash,"
                                  " row_hash FROM audit WHERE seq = 1"),
                     SQLITE_CONSTRAINT);
    expect_intact(f->work);
    /* Positive control: without the triggers the same statements go through. */
    assert_int_equal(plain_sql_rc(f->wdb,
                                  "DROP TRIGGER audit_net_no_update;"
                                  " UPDATE audit_net SET detail = 'x' WHERE seq = 2"),
                     SQLITE_OK);
    expect_broken_at(f->work, 2, "after the trigger was dropped");
    assert_int_equal(plain_sql_rc(f->wdb,
                                  "DROP TRIGGER audit_net_one_seq; INSERT INTO audit_net SELECT 1, gen, at_ms,"
                                  " event, name, addrs, ports, detail, prev_hash, row_hash FROM audit_net"
                                  " WHERE seq = 2"),
                     SQLITE_OK);
}

static void test_net_append_does_not_hide_a_break(void **state) {
    struct fixture *f = *state;
    build_mixed(f->dir, true);
    tamper_net(f, "UPDATE audit_net SET detail = 'ttl 61' WHERE seq = 2");
    struct lz_store *st = open_store(f->work, false);
    append_net_ok(st, 0, 8);
    append_ok(st, 0, 9);
    lz_store_close(st);
    expect_broken_at(f->work, 2, "edited, then appended");
    /* A deleted last network row is not filled in by the next append of
     * either kind. */
    tamper_net(f, "DELETE FROM audit_net WHERE seq = 7");
    st = open_store(f->work, false);
    append_ok(st, 1, 8);
    lz_store_close(st);
    expect_broken_at(f->work, 7, "last network row deleted, then appended");
    /* Positive control: both kinds appended to an intact chain. */
    copy_file(f->db, f->wdb);
    st = open_store(f->work, false);
    append_ok(st, 5, 8);
    append_net_ok(st, 1, 9);
    lz_store_close(st);
    expect_intact(f->work);
}

static void test_net_append_checks_entry(void **state) {
    struct fixture *f = *state;
    struct lz_store *st = open_store(f->dir, true);
    char long_name[LZ_AUDIT_NET_NAME_MAX + 2], long_ports[LZ_AUDIT_NET_PORTS_MAX + 2],
        long_detail[LZ_AUDIT_NET_DETAIL_MAX + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    memset(long_ports, '1', sizeof long_ports - 1);
    long_ports[sizeof long_ports - 1] = '\0';
    memset(long_detail, ' ', sizeof long_detail - 1);
    long_detail[sizeof long_detail - 1] = '\0';
    uint32_t many[LZ_AUDIT_NET_ADDRS_MAX + 1];
    for (size_t i = 0; i < LZ_ARRAY_SIZE(many); i++)
        many[i] = 0xc0000200u + (uint32_t)i;
    struct {
        struct lz_audit_net_entry e;
        const char *field;
    } bad[] = {
        { net_entry(0), "event" },  { net_entry(0), "event" },  { net_entry(0), "generation" },
        { net_entry(0), "time" },   { net_entry(0), "addrs" },  { net_entry(0), "addrs" },
        { net_entry(0), "name" },   { net_entry(0), "name" },   { net_entry(0), "name" },
        { net_entry(0), "name" },   { net_entry(0), "ports" },  { net_entry(0), "ports" },
        { net_entry(0), "detail" }, { net_entry(0), "detail" }, { net_entry(0), "detail" },
    };
    bad[0].e.event = (enum lz_audit_net_event)0;
    bad[1].e.event = (enum lz_audit_net_event)11;
    bad[2].e.gen = -1;
    bad[3].e.at_ms = -1;
    bad[4].e.addrs = many;
    bad[4].e.n_addrs = LZ_AUDIT_NET_ADDRS_MAX + 1;
    bad[5].e.addrs = NULL;
    bad[5].e.n_addrs = 1;
    bad[6].e.name = long_name;
    bad[7].e.name = "api.example.test\x1b[2J";
    bad[8].e.name = "two words";
    bad[9].e.name = "caf\xc3\xa9.example";
    bad[10].e.ports = long_ports;
    bad[11].e.ports = "tcp/443\n";
    bad[12].e.detail = long_detail;
    bad[13].e.detail = "ttl 60\r";
    bad[14].e.detail = "\x7f";
    struct lz_error err = { 0 };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        memset(&err, 0, sizeof err);
        if (lz_audit_append_net(st, &bad[i].e, NULL, &err) != -EINVAL)
            fail_msg("entry %zu (%s) was not refused", i, bad[i].field);
        if (!strstr(err.msg, bad[i].field))
            fail_msg("entry %zu: the message does not name %s: %s", i, bad[i].field, err.msg);
    }
    /* Nothing was written: the first row is still seq 1. At the bounds
     * exactly, accepted (the positive control). */
    struct lz_audit_net_entry e = net_entry(0);
    long_name[LZ_AUDIT_NET_NAME_MAX] = '\0';
    long_ports[LZ_AUDIT_NET_PORTS_MAX] = '\0';
    long_detail[LZ_AUDIT_NET_DETAIL_MAX] = '\0';
    e.name = long_name;
    e.ports = long_ports;
    e.detail = long_detail;
    e.addrs = many;
    e.n_addrs = LZ_AUDIT_NET_ADDRS_MAX;
    e.event = LZ_AUDIT_NET_ALLOWED;
    int64_t seq = 0;
    if (lz_audit_append_net(st, &e, &seq, &err) < 0)
        fail_msg("at the bounds: %s", err.msg);
    assert_int_equal(seq, 1);
    /* It joins an open transaction (rolled back with it); at_ms 0: now. */
    assert_int_equal(lz_store_begin(st, &err), 0);
    append_net_ok(st, 1, 2);
    lz_store_rollback(st);
    e = net_entry(2);
    e.at_ms = 0;
    assert_int_equal(lz_audit_append_net(st, &e, &seq, &err), 0);
    assert_int_equal(seq, 2);
    lz_store_close(st);
    expect_intact(f->dir);
    struct lz_store_identity id = { .domain_id = DOM };
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), 0);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.rows[0].net.n_addrs, LZ_AUDIT_NET_ADDRS_MAX);
    assert_int_equal(strlen(log.rows[0].net.name), LZ_AUDIT_NET_NAME_MAX);
    assert_true(log.rows[1].net.at_ms > 1700000000000);
    lz_audit_log_clear(&log);
    /* A read-only connection cannot append. */
    e = net_entry(0);
    assert_true(lz_audit_append_net(st, &e, NULL, &err) < 0);
    lz_store_close(st);
}

/* The audit table exactly as version 2 created it. */
static const char v2_audit[] =
    "CREATE TABLE audit("
    "  seq INTEGER PRIMARY KEY CHECK(seq >= 1),"
    "  gen INTEGER NOT NULL,"
    "  request_id TEXT NOT NULL CHECK(length(request_id) = 32),"
    "  session_id TEXT NOT NULL CHECK(length(session_id) = 32),"
    "  received_ms INTEGER NOT NULL,"
    "  decided_by TEXT NOT NULL CHECK(decided_by IN ('none','rule','developer')),"
    "  decided_ref INTEGER NOT NULL,"
    "  decision TEXT NOT NULL CHECK(decision IN ('none','auto-approved','approved','approved-for-session',"
    "                                            'session-approved','edited','denied')),"
    "  end_state TEXT NOT NULL CHECK(end_state IN ('completed','denied','timed-out','cancelled','failed')),"
    "  argv TEXT NOT NULL,"
    "  edited_argv TEXT,"
    "  executable TEXT NOT NULL,"
    "  executable_sha256 TEXT NOT NULL CHECK(length(executable_sha256) IN (0, 64)),"
    "  cwd TEXT NOT NULL,"
    "  exit_status INTEGER NOT NULL,"
    "  signal INTEGER NOT NULL,"
    "  output_bytes INTEGER NOT NULL,"
    "  ended_ms INTEGER NOT NULL,"
    "  prev_hash TEXT NOT NULL CHECK(length(prev_hash) = 64),"
    "  row_hash TEXT NOT NULL CHECK(length(row_hash) = 64)) STRICT;"
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"
    "PRAGMA user_version = 2;";

static void test_upgrade_from_v2(void **state) {
    struct fixture *f = *state;
    /* The escalation rows and head a version-2 lazaret wrote (the row
     * format did not change), in a version-2 store of the same Domain. */
    build_chain(f);
    copy_file(f->db, f->wdb);
    unlink(f->db);
    make_v1(f->db);
    plain_sql(f->db, v2_audit);
    char q[512];
    snprintf(q, sizeof q,
             "ATTACH '%s' AS w; INSERT INTO audit SELECT * FROM w.audit;"
             " INSERT INTO meta SELECT * FROM w.meta WHERE key = 'audit_head'; DETACH w;",
             f->wdb);
    plain_sql(f->db, q);

    /* Read-only: version 2 as it is, its rows verify, nothing written. */
    size_t len0, len1;
    char *before = slurp(f->db, &len0);
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), 0);
    assert_int_equal(lz_store_version(st), 2);
    struct lz_audit_log log = { 0 };
    assert_int_equal(lz_audit_read(st, &log, &err), 0);
    assert_int_equal(log.store_version, LZ_AUDIT_STORE_VERSION);
    assert_int_equal(log.n, NROWS);
    assert_int_equal(lz_audit_verify(&log, NULL, &err), 0);
    lz_audit_log_clear(&log);
    struct lz_audit_net_entry ne = net_entry(0);
    assert_true(lz_audit_append_net(st, &ne, NULL, &err) < 0);
    lz_store_close(st);
    char *after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);

    /* The writer's open upgrades from 2; the old rows still verify and
     * network rows continue the same chain. */
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_version(st), LZ_STORE_VERSION);
    assert_int_equal(lz_store_upgraded_from(st), 2);
    struct lz_store_snapshot s;
    assert_int_equal(lz_store_read(st, &s, &err), 0);
    assert_int_equal(s.n_gens, 2);
    lz_store_snapshot_clear(&s);
    lz_store_close(st);
    expect_intact(f->dir);
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_upgraded_from(st), 0);
    append_net_ok(st, 0, NROWS + 1);
    append_ok(st, 4, NROWS + 2);
    append_net_ok(st, 1, NROWS + 3);
    lz_store_close(st);
    expect_intact(f->dir);
    assert_int_equal(plain_sql_rc(f->db, "UPDATE audit_net SET gen = 9"), SQLITE_CONSTRAINT); /* with its triggers */
    assert_int_equal(plain_sql_rc(f->db, "UPDATE audit SET gen = 9"), SQLITE_CONSTRAINT);
    /* Positive control: an old row edited after the upgrade is found. */
    copy_file(f->db, f->wdb);
    plain_sql(f->wdb, "DROP TRIGGER audit_no_update; UPDATE audit SET cwd = '/x' WHERE seq = 3");
    expect_broken_at(f->work, 3, "an upgraded row edited");
}

static void test_upgrade_v2_all_or_nothing(void **state) {
    struct fixture *f = *state;
    make_v1(f->db);
    plain_sql(f->db, v2_audit);
    /* A table in the way: the 2 -> 3 step fails, the store stays at 2. */
    plain_sql(f->db, "CREATE TABLE audit_net(x INTEGER) STRICT");
    struct lz_store_identity id = { .domain_id = DOM };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_true(lz_store_open(f->dir, &id, false, &st, &err) < 0);
    assert_non_null(strstr(err.msg, "upgrading from version 2 to 3 failed"));
    assert_int_equal(lz_store_open_readonly(f->dir, &id, &st, &err), 0);
    assert_int_equal(lz_store_version(st), 2);
    lz_store_close(st);
    /* Positive control: without the stray table it upgrades. */
    plain_sql(f->db, "DROP TABLE audit_net");
    st = open_store(f->dir, false);
    assert_int_equal(lz_store_upgraded_from(st), 2);
    lz_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_read_roundtrip, setup, teardown),
        cmocka_unit_test(test_hash_is_pinned),
        cmocka_unit_test_setup_teardown(test_edit_any_field_any_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_reorder_forge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_does_not_hide_a_break, setup, teardown),
        cmocka_unit_test_setup_teardown(test_triggers_refuse_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_checks_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_beside_a_writer, setup, teardown),
        cmocka_unit_test(test_net_event_names),
        cmocka_unit_test_setup_teardown(test_mixed_roundtrip, setup, teardown),
        cmocka_unit_test(test_net_hash_is_pinned),
        cmocka_unit_test_setup_teardown(test_net_edit_any_field_any_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_net_delete_move_forge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_net_triggers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_net_append_does_not_hide_a_break, setup, teardown),
        cmocka_unit_test_setup_teardown(test_net_append_checks_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_v3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_v2_all_or_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
