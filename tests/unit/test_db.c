/* test_db.c — the SQLite layer (db.h) and the Domain Store's use of it
 * (store.h): the file's identity, the store version checked before any
 * row (one code for an unknown version, the file left byte-identical),
 * defensive mode, the busy timeout, checked statements, row caps and
 * transactions. Each defence has its positive control: the same action
 * through a plain SQLite connection, or the accepted case next to the
 * refused one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "db.h"
#include "prepare.h"
#include "store.h"

#define APP 0x4c5a5454 /* "LZTT" */
#define DOM "1111111111111111111111111111111111111111111111111111111111111111"

struct fixture {
    char dir[64];
    char db[96];
};

static int setup(void **state) {
    struct fixture *f = lz_xcalloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/lz-test-db-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->db, sizeof f->db, "%s/t.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    int pfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    lz_prepare_remove_tree(pfd, f->dir + 5);
    close(pfd);
    free(f);
    return 0;
}

static int refuse(const char *path, int code, const struct lz_db_found *found, struct lz_error *err) {
    return lz_error_set(err, code, "%s: refused (application_id %lld, version %lld, %lld tables)", path,
                        (long long)found->application_id, (long long)found->version, (long long)found->tables);
}

static const struct lz_db_schema test_schema = {
    .name = "Test Store",
    .application_id = APP,
    .version = 3,
    .sql = "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT;",
    .wal = false,
    .mode = 0600,
    .refuse = refuse,
};

static const struct lz_db_schema wal_schema = {
    .name = "Test Store",
    .application_id = APP,
    .version = 3,
    .sql = "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT;",
    .wal = true,
    .mode = 0600,
    .refuse = refuse,
};

/* A plain connection, outside the layer. */
static void plain_sql(const char *path, const char *q) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("sql %s: %s", q, msg);
    sqlite3_close(db);
}

static int64_t plain_int(const char *path, const char *q) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static struct lz_db *open_ok(const char *path, const struct lz_db_schema *s, unsigned flags) {
    struct lz_db *db = NULL;
    struct lz_error err = { 0 };
    if (lz_db_open(path, s, flags, &db, &err) < 0)
        fail_msg("open: %s", err.msg);
    return db;
}

/* A new file with the schema, committed. */
static void create_ok(const char *path, const struct lz_db_schema *s) {
    struct lz_db *db = open_ok(path, s, LZ_DB_CREATE);
    assert_true(db->created);
    assert_int_equal(lz_db_commit(db, NULL), 0);
    lz_db_close(db);
}

static char *slurp(const char *path, size_t *len) {
    char *buf = NULL;
    assert_int_equal(lz_read_file_at(AT_FDCWD, path, 1 << 24, &buf, len), 0);
    return buf;
}

/* ---- opening ---- */

static void test_create_and_reopen(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = open_ok(f->db, &wal_schema, LZ_DB_CREATE);
    assert_true(db->created);
    assert_true(db->in_txn);
    assert_int_equal(lz_db_run(db, NULL, "INSERT INTO t VALUES(1, 'a')", ""), 1);
    assert_int_equal(lz_db_commit(db, NULL), 0);
    lz_db_close(db);
    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(plain_int(f->db, "PRAGMA application_id"), APP);
    assert_int_equal(plain_int(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(plain_int(f->db, "SELECT count(*) FROM t"), 1);
    sqlite3 *p = NULL;
    assert_int_equal(sqlite3_open(f->db, &p), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(p, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(p);

    db = open_ok(f->db, &wal_schema, 0);
    assert_false(db->created);
    assert_false(db->fresh);
    char *v = NULL;
    assert_int_equal(lz_db_get_text(db, &v, NULL, "SELECT v FROM t WHERE k = ?1", "i", (int64_t)1), 1);
    assert_string_equal(v, "a");
    free(v);
    assert_int_equal(lz_db_get_text(db, &v, NULL, "SELECT v FROM t WHERE k = ?1", "i", (int64_t)2), 0);
    lz_db_close(db);
}

static void test_missing_and_empty(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_db_open(f->db, &test_schema, LZ_DB_WRITE, &db, &err), -ENOENT);
    assert_non_null(strstr(err.msg, f->db));
    assert_null(db);
    struct stat st;
    assert_int_equal(stat(f->db, &st), -1); /* nothing created */
    /* An empty file without LZ_DB_CREATE reads as empty and stays empty. */
    int fd = open(f->db, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    db = open_ok(f->db, &test_schema, 0);
    assert_true(db->fresh);
    assert_false(db->created);
    lz_db_close(db);
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_size, 0);
}

static void test_not_a_regular_file(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = NULL;
    struct lz_error err = { 0 };
    char target[128];
    snprintf(target, sizeof target, "%s/real.db", f->dir);
    create_ok(target, &test_schema); /* control: the real file opens */
    assert_int_equal(symlink(target, f->db), 0);
    assert_int_equal(lz_db_open(f->db, &test_schema, LZ_DB_CREATE, &db, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_int_equal(unlink(f->db), 0);
    assert_int_equal(mkdir(f->db, 0700), 0);
    assert_int_equal(lz_db_open(f->db, &test_schema, 0, &db, &err), -EINVAL);
    assert_int_equal(rmdir(f->db), 0);
    assert_int_equal(mkfifo(f->db, 0600), 0);
    assert_int_equal(lz_db_open(f->db, &test_schema, LZ_DB_CREATE, &db, &err), -EINVAL);
}

static void expect_refused(struct fixture *f, int code, const char *what) {
    size_t len0, len1;
    char *before = slurp(f->db, &len0);
    struct stat st0, st1;
    assert_int_equal(stat(f->db, &st0), 0);
    for (unsigned flags = 0; flags <= (LZ_DB_WRITE | LZ_DB_CREATE); flags++) {
        struct lz_db *db = NULL;
        struct lz_error err = { 0 };
        int r = lz_db_open(f->db, &test_schema, flags, &db, &err);
        if (r != code)
            fail_msg("flags %u: %d: %s", flags, r, err.msg);
        assert_int_equal(err.code, code);
        if (!strstr(err.msg, what))
            fail_msg("flags %u: %s", flags, err.msg);
        assert_null(db);
    }
    char *after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    assert_int_equal(stat(f->db, &st1), 0);
    assert_int_equal(st0.st_mtim.tv_nsec, st1.st_mtim.tv_nsec);
    assert_int_equal(st0.st_mtim.tv_sec, st1.st_mtim.tv_sec);
    free(before);
    free(after);
}

static void test_version_refused_untouched(void **state) {
    struct fixture *f = *state;
    create_ok(f->db, &test_schema);
    lz_db_close(open_ok(f->db, &test_schema, 0)); /* control: version 3 is accepted */
    plain_sql(f->db, "PRAGMA user_version = 99");
    expect_refused(f, -EPROTONOSUPPORT, "version 99");
}

static void test_foreign_refused_untouched(void **state) {
    struct fixture *f = *state;
    plain_sql(f->db, "PRAGMA application_id = 305419896; PRAGMA user_version = 3; CREATE TABLE t(x);");
    expect_refused(f, -EBADMSG, "application_id 305419896");
}

static void test_plain_sqlite_refused_untouched(void **state) {
    struct fixture *f = *state;
    plain_sql(f->db, "CREATE TABLE notes(x); INSERT INTO notes VALUES(1);");
    expect_refused(f, -EBADMSG, "1 tables");
}

static void test_garbage_refused(void **state) {
    struct fixture *f = *state;
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, f->db, junk, sizeof junk, 0600), 0);
    expect_refused(f, -EBADMSG, "is not readable as SQLite");
}

/* ---- defensive mode and the busy timeout ---- */

static void test_defensive(void **state) {
    struct fixture *f = *state;
    const char *attack = "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = sql WHERE name = 't';";
    struct lz_db *db = open_ok(f->db, &test_schema, LZ_DB_CREATE | LZ_DB_WRITE);
    struct lz_error err = { 0 };
    assert_true(lz_db_exec(db, attack, &err) < 0);
    assert_non_null(strstr(err.msg, f->db));
    lz_db_close(db);
    plain_sql(f->db, attack); /* control: a plain connection may */
}

static void test_busy_timeout(void **state) {
    struct fixture *f = *state;
    create_ok(f->db, &test_schema);
    sqlite3 *holder = NULL;
    assert_int_equal(sqlite3_open(f->db, &holder), SQLITE_OK);
    assert_int_equal(sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    /* Readers are not blocked by a writer (rollback journal, nothing
     * written yet): the control. */
    lz_db_close(open_ok(f->db, &test_schema, 0));
    long t0 = lz_now_ms();
    struct lz_db *db = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_db_open(f->db, &test_schema, LZ_DB_WRITE, &db, &err), -EBUSY);
    long waited = lz_now_ms() - t0;
    assert_true(waited >= LZ_DB_BUSY_TIMEOUT_MS - 500);
    assert_true(waited < LZ_DB_BUSY_TIMEOUT_MS + 5000);
    sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(holder);
    lz_db_close(open_ok(f->db, &test_schema, LZ_DB_WRITE));
}

/* ---- statements ---- */

static void test_statements_checked(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = open_ok(f->db, &test_schema, LZ_DB_CREATE | LZ_DB_WRITE);
    struct lz_error err = { 0 };
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(?1, ?2)", "it", (int64_t)1, "a"), 1);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(?1, ?2)", "it", (int64_t)1, "b"), -EEXIST);
    assert_non_null(strstr(err.msg, "UNIQUE constraint failed"));
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(?1, ?2)", "it", (int64_t)2, NULL), -EINVAL);
    assert_non_null(strstr(err.msg, "NOT NULL"));
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(?1, ?2)", "i", (int64_t)3), -EINVAL);
    assert_non_null(strstr(err.msg, "2 parameters, 1 values"));
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_db_run(db, &err, "SELECT * FROM t", ""), -EIO);
    assert_non_null(strstr(err.msg, "a row where none was expected"));
    memset(&err, 0, sizeof err);
    assert_true(lz_db_run(db, &err, "SELECT * FROM nowhere", "") < 0);
    assert_non_null(strstr(err.msg, "no such table"));
    assert_int_equal(lz_db_run(db, &err, "UPDATE t SET v = 'c'", ""), 1);
    int64_t n = -1;
    assert_int_equal(lz_db_get_int(db, &n, &err, "SELECT count(*) FROM t", ""), 1);
    assert_int_equal(n, 1);
    lz_db_close(db);
}

static void test_transactions(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = open_ok(f->db, &test_schema, LZ_DB_CREATE | LZ_DB_WRITE);
    struct lz_error err = { 0 };
    assert_int_equal(lz_db_begin(db, true, &err), -EBUSY); /* nested */
    assert_int_equal(lz_db_commit(db, &err), 0);
    assert_int_equal(lz_db_commit(db, &err), -EINVAL); /* none open */
    assert_int_equal(lz_db_begin(db, true, &err), 0);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(1, 'kept')", ""), 1);
    assert_int_equal(lz_db_commit(db, &err), 0);
    assert_int_equal(lz_db_begin(db, true, &err), 0);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(2, 'dropped')", ""), 1);
    lz_db_rollback(db);
    assert_false(db->in_txn);
    assert_int_equal(lz_db_begin(db, true, &err), 0);
    assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(3, 'closed')", ""), 1);
    lz_db_close(db); /* an open transaction is rolled back */
    assert_int_equal(plain_int(f->db, "SELECT count(*) FROM t"), 1);
    assert_int_equal(plain_int(f->db, "SELECT k FROM t"), 1);
}

/* ---- row caps ---- */

struct row {
    int64_t k;
    char *v;
};

static int cleared;

static void fill_row(void *e, sqlite3_stmt *q) {
    struct row *r = e;
    r->k = sqlite3_column_int64(q, 0);
    r->v = lz_db_col_dup(q, 1, false);
}

static void clear_row(void *e) {
    free(((struct row *)e)->v);
    cleared++;
}

static void test_row_cap(void **state) {
    struct fixture *f = *state;
    struct lz_db *db = open_ok(f->db, &test_schema, LZ_DB_CREATE | LZ_DB_WRITE);
    struct lz_error err = { 0 };
    for (int64_t i = 1; i <= 40; i++)
        assert_int_equal(lz_db_run(db, &err, "INSERT INTO t VALUES(?1, 'v' || ?1)", "i", i), 1);
    struct row *rows = NULL;
    size_t n = 0;
    /* Control: exactly at the cap reads everything. */
    assert_int_equal(lz_db_read_rows(db, "t", "SELECT k, v FROM t ORDER BY k", 40, sizeof *rows, fill_row, clear_row,
                                     (void **)&rows, &n, &err),
                     0);
    assert_int_equal(n, 40);
    assert_int_equal(rows[39].k, 40);
    assert_string_equal(rows[39].v, "v40");
    for (size_t i = 0; i < n; i++)
        clear_row(&rows[i]);
    free(rows);
    rows = NULL;
    n = 0;
    cleared = 0;
    assert_int_equal(lz_db_read_rows(db, "t", "SELECT k, v FROM t ORDER BY k", 39, sizeof *rows, fill_row, clear_row,
                                     (void **)&rows, &n, &err),
                     -EFBIG);
    assert_non_null(strstr(err.msg, "more than 39 rows in t"));
    assert_int_equal(cleared, 39); /* what was read is freed */
    assert_null(rows);
    assert_int_equal(n, 0);
    lz_db_close(db);
}

static void test_errno_map(void **state) {
    (void)state;
    assert_int_equal(lz_db_errno(SQLITE_CONSTRAINT_PRIMARYKEY), -EEXIST);
    assert_int_equal(lz_db_errno(SQLITE_CONSTRAINT_CHECK), -EINVAL);
    assert_int_equal(lz_db_errno(SQLITE_BUSY_SNAPSHOT), -EBUSY);
    assert_int_equal(lz_db_errno(SQLITE_NOTADB), -EBADMSG);
    assert_int_equal(lz_db_errno(SQLITE_FULL), -ENOSPC);
    assert_int_equal(lz_db_errno(SQLITE_IOERR_FSYNC), -EIO);
}

/* ---- the Domain Store on the layer ---- */

static void test_store_version_and_identity(void **state) {
    struct fixture *f = *state;
    struct lz_store_identity id = { .domain_id = DOM, .profile = "p", .workspace = "/w" };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_store_open(f->dir, &id, false, &st, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "the Domain has no store"));
    assert_int_equal(lz_store_open(f->dir, &id, true, &st, &err), 0);
    int64_t gen = 0;
    struct lz_procid hc = { .boot_id = "b", .pid = 1 };
    assert_int_equal(lz_store_gen_begin(st, "fp", &hc, &gen, &err), 0);
    assert_int_equal(gen, 1);
    assert_int_equal(lz_store_part_set(st, gen, LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, "ev", &err), 0);
    assert_int_equal(lz_store_session_set(st, gen, 1, "intent", true, "sh", NULL, NULL, &err), 0);
    assert_int_equal(lz_store_session_set(st, gen, 1, "intent", true, "sh", NULL, NULL, &err), -EEXIST);
    struct lz_store_snapshot s;
    assert_int_equal(lz_store_read(st, &s, &err), 0);
    assert_string_equal(s.domain_id, DOM);
    assert_int_equal(s.anchor_gen, 1);
    assert_null(s.reset_intent);
    assert_int_equal(s.n_gens, 1);
    assert_string_equal(s.gens[0].fingerprint, "fp");
    assert_int_equal(s.n_parts, 1);
    assert_int_equal(s.parts[0].role, LZ_ROLE_SANDBOX);
    assert_string_equal(s.parts[0].evidence, "ev");
    assert_int_equal(s.n_sessions, 1);
    assert_true(s.sessions[0].tty);
    lz_store_snapshot_clear(&s);
    assert_int_equal(lz_store_check(st, &err), 0);
    char *v = NULL;
    assert_int_equal(lz_store_meta_get(st, "reset_intent", &v, &err), -ENOENT);
    lz_store_close(st);

    /* SR-11: another Domain's identity is refused. */
    struct lz_store_identity other = { .domain_id = DOM, .profile = "q", .workspace = "/w" };
    assert_int_equal(lz_store_open(f->dir, &other, true, &st, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "refusing to reuse it"));

    /* One code for an unknown store version, the file untouched. */
    char path[128];
    snprintf(path, sizeof path, "%s/domain.db", f->dir);
    plain_sql(path, "PRAGMA user_version = 99");
    size_t len0, len1;
    char *before = slurp(path, &len0);
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_store_open(f->dir, &id, true, &st, &err), -EPROTONOSUPPORT);
    assert_non_null(strstr(err.msg, "has version 99"));
    char *after = slurp(path, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    plain_sql(path, "PRAGMA application_id = 7; PRAGMA user_version = 1");
    assert_int_equal(lz_store_open(f->dir, &id, true, &st, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "is not a Lazaret Domain Store (application id 0x7)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_regular_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_refused_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_refused_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_sqlite_refused_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defensive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statements_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transactions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row_cap, setup, teardown),
        cmocka_unit_test(test_errno_map),
        cmocka_unit_test_setup_teardown(test_store_version_and_identity, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
