/* test_catalog.c — the Storage Catalog (FR-17, FR-21, OR-6, OR-7): exact
 * leases, store-version refusal without writing, prepare intents and
 * publication, and product GC (policies, in-progress and foreign trees,
 * abandoned preparations, dry run, interrupted reclaims).
 *
 * Each test gets a fresh Storage Root under a mkdtemp directory. Published
 * artifacts are made by hand (rootfs/ + artifact.json, as image.c writes
 * them); times are faked by setting last_used_ms through SQLite. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "catalog.h"
#include "image.h"

#define DOM1 "1111111111111111111111111111111111111111111111111111111111111111"
#define DOM2 "2222222222222222222222222222222222222222222222222222222222222222"
#define DAY INT64_C(86400000)

struct fixture {
    char parent[64];
    char data_root[96];
    char prepared[128];
    char db[128];
};

static int setup(void **state) {
    struct fixture *f = lz_xcalloc(1, sizeof *f);
    snprintf(f->parent, sizeof f->parent, "/tmp/lz-test-catalog-XXXXXX");
    if (!mkdtemp(f->parent))
        return -1;
    snprintf(f->data_root, sizeof f->data_root, "%s/data", f->parent);
    snprintf(f->prepared, sizeof f->prepared, "%s/prepared", f->data_root);
    snprintf(f->db, sizeof f->db, "%s/catalog.db", f->data_root);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    int pfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    lz_prepare_remove_tree(pfd, f->parent + 5);
    close(pfd);
    free(f);
    return 0;
}

static void make_id(unsigned n, char out[65]) { snprintf(out, 65, "%064x", n); }

static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A complete prepared tree prepared/<dir> for artifact id, with a read-only
 * and a mode-0 directory inside (as real images have). */
static void make_tree(struct fixture *f, const char *dir, const char *id, uint64_t size) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/rootfs/etc/locked", f->prepared, dir);
    assert_int_equal(lz_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/rootfs/etc/locked/secret", f->prepared, dir);
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, p, "x", 1, 0000), 0);
    snprintf(p, sizeof p, "%s/%s/rootfs/etc/locked", f->prepared, dir);
    assert_int_equal(chmod(p, 0), 0);
    snprintf(p, sizeof p, "%s/%s/rootfs/etc", f->prepared, dir);
    assert_int_equal(chmod(p, 0555), 0);
    char json[1024];
    snprintf(json, sizeof json,
             "{\"artifact_id\": \"%s\", \"preparer\": \"test\", \"source\": {\"ref\": \"oci:/src/%.8s\", "
             "\"manifest_digest\": \"sha256:%s\", \"config_digest\": \"sha256:%s\"}, \"layers\": [], "
             "\"created\": \"2024-01-02T03:04:05Z\", \"size\": %" PRIu64 "}",
             id, id, id, id, size);
    snprintf(p, sizeof p, "%s/%s/artifact.json", f->prepared, dir);
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, p, json, strlen(json), 0644), 0);
}

static void make_artifact(struct fixture *f, unsigned n, uint64_t size, char id[65]) {
    make_id(n, id);
    make_tree(f, id, id, size);
}

static bool exists(struct fixture *f, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", f->prepared, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

static bool file_exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

static void sql(struct fixture *f, const char *q) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("sql %s: %s", q, msg);
    sqlite3_close(db);
}

static void set_last_used(struct fixture *f, const char *id, int64_t ms) {
    char q[256];
    snprintf(q, sizeof q, "UPDATE artifacts SET last_used_ms = %" PRId64 " WHERE artifact_id = '%s'", ms, id);
    sql(f, q);
}

static void set_state(struct fixture *f, const char *id, const char *state) {
    char q[256];
    snprintf(q, sizeof q, "UPDATE artifacts SET state = '%s' WHERE artifact_id = '%s'", state, id);
    sql(f, q);
}

/* Known to the catalog without a lease. */
static void register_ok(struct fixture *f, const char *id) {
    struct lz_error err = { 0 };
    if (lz_catalog_register(f->data_root, id, &err) < 0)
        fail_msg("register: %s", err.msg);
}

static void read_ok(struct fixture *f, struct lz_catalog *c) {
    struct lz_error err = { 0 };
    if (lz_catalog_read(f->data_root, c, &err) < 0)
        fail_msg("read: %s", err.msg);
}

static char *slurp(const char *path, size_t *len) {
    char *buf = NULL;
    assert_int_equal(lz_read_file_at(AT_FDCWD, path, 1 << 24, &buf, len), 0);
    return buf;
}

/* ---- gc events ---- */

struct events {
    size_t n;
    struct {
        enum lz_gc_action action;
        char kind[16];
        char name[80];
        char reason[256];
    } e[64];
};

static void on_event(void *ud, const struct lz_gc_event *ev) {
    struct events *es = ud;
    assert_true(es->n < LZ_ARRAY_SIZE(es->e));
    es->e[es->n].action = ev->action;
    snprintf(es->e[es->n].kind, sizeof es->e[es->n].kind, "%s", ev->kind);
    snprintf(es->e[es->n].name, sizeof es->e[es->n].name, "%s", ev->name);
    snprintf(es->e[es->n].reason, sizeof es->e[es->n].reason, "%s", ev->reason);
    es->n++;
}

static int event_action(const struct events *es, const char *name) {
    for (size_t i = 0; i < es->n; i++)
        if (!strcmp(es->e[i].name, name))
            return (int)es->e[i].action;
    return -1;
}

static void gc_ok(struct fixture *f, int64_t keep_days, uint64_t max_bytes, bool dry_run, struct events *es,
                  struct lz_gc_result *res) {
    struct lz_gc_policy pol = { .keep_days = keep_days, .max_bytes = max_bytes };
    struct lz_error err = { 0 };
    memset(es, 0, sizeof *es);
    if (lz_catalog_gc(f->data_root, &pol, dry_run, on_event, es, res, &err) < 0)
        fail_msg("gc: %s", err.msg);
}

/* ---- leases ---- */

static void test_lease_exact(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_artifact(f, 1, 4096, a);
    struct lz_error err = { 0 };
    int64_t before = wall_ms();
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 1, &err), 1);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 2, &err), 0);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM2, 1, &err), 0);
    /* idempotent */
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 2, &err), 0);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM2, 1, &err), 0);

    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 1);
    assert_int_equal(c.n_leases, 3);
    const struct lz_catalog_artifact *ar = &c.artifacts[0];
    assert_string_equal(ar->artifact_id, a);
    assert_string_equal(ar->state, "ready");
    assert_int_equal(ar->size, 4096);
    assert_int_equal(ar->n_leases, 3);
    assert_string_equal(ar->source_ref, "oci:/src/00000000");
    assert_int_equal(strncmp(ar->manifest_digest, "sha256:", 7), 0);
    assert_int_equal(ar->created_ms, INT64_C(1704164645000));
    assert_true(ar->last_used_ms >= before);
    lz_catalog_clear(&c);

    /* release removes exactly one lease, once */
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), 1);
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 2, &err), 1);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM2, 1, &err), 1);
    set_last_used(f, a, 5);
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM2, 1, &err), 1);
    read_ok(f, &c);
    assert_int_equal(c.n_leases, 1);
    assert_true(c.artifacts[0].last_used_ms >= before); /* release is a use */
    lz_catalog_clear(&c);

    /* the files of the catalog */
    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char p[256];
    snprintf(p, sizeof p, "%s/storage-catalog.lock", f->data_root);
    assert_true(file_exists(p));
    snprintf(p, sizeof p, "%s/catalog.db-journal", f->data_root);
    assert_false(file_exists(p));
}

static void test_lease_refusals(void **state) {
    struct fixture *f = *state;
    char a[65], b[65];
    make_id(7, a);
    struct lz_error err = { 0 };
    /* no tree */
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), -ESTALE);
    assert_non_null(strstr(err.msg, a));
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 0);
    assert_int_equal(c.n_leases, 0);
    lz_catalog_clear(&c);
    /* incomplete tree (no artifact.json) */
    char p[512];
    snprintf(p, sizeof p, "%s/%s/rootfs", f->prepared, a);
    assert_int_equal(lz_mkdir_p(p, 0755), 0);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), -ESTALE);
    /* artifact.json naming another artifact */
    make_id(8, b);
    make_tree(f, a, b, 1);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), -ESTALE);
    /* bad arguments */
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, "abc", DOM1, 1, &err), -EINVAL);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, b, "ABC", 1, &err), -EINVAL);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, b, DOM1, -1, &err), -EINVAL);
    assert_int_equal(lz_catalog_lease_acquire("relative", b, DOM1, 1, &err), -EINVAL);
}

static void test_missing_catalog_reads_empty(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_id(1, a);
    struct lz_catalog c;
    struct lz_error err = { 0 };
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts + c.n_leases + c.n_prepares, 0);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), 0);
    assert_false(file_exists(f->db));
    assert_false(file_exists(f->data_root)); /* nothing created at all */
    assert_int_equal(lz_mkdir_p(f->data_root, 0700), 0);
    read_ok(f, &c);
    assert_false(file_exists(f->db));
}

static void test_reclaiming_refuses(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_artifact(f, 3, 10, a);
    struct lz_error err = { 0 };
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), 0);
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), 1);
    set_state(f, a, "reclaiming");
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 2, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "being reclaimed"));
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 2, &err), 0);
    assert_int_equal(lz_catalog_register(f->data_root, a, &err), -ESTALE);
    /* the schema refuses states it does not know */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE artifacts SET state = 'gone'", NULL, NULL, NULL), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "INSERT INTO leases VALUES ('x', 'y', 1, 0)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* Concurrent coordinators share the catalog through the lock alone. */
static void test_concurrent_sections(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_artifact(f, 1, 10, a);
    enum { KIDS = 6, EACH = 15 };
    pid_t pids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) {
            for (int i = 0; i < EACH; i++) {
                if (lz_catalog_lease_acquire(f->data_root, a, k % 2 ? DOM1 : DOM2, k * 100 + i, NULL) < 0)
                    _exit(1);
                if (i % 3 == 0 &&
                    lz_catalog_lease_release(f->data_root, a, k % 2 ? DOM1 : DOM2, k * 100 + i, NULL) != 1)
                    _exit(2);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < KIDS; k++) {
        int status;
        assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 1);
    assert_int_equal(c.n_leases, KIDS * (EACH - EACH / 3));
    lz_catalog_clear(&c);
}

/* ---- store version ---- */

/* code: -EPROTONOSUPPORT for another version of the catalog (the one code
 * of an unknown store version, as the Domain Store's), -EBADMSG for a
 * file that is not a catalog at all. */
static void expect_refused_untouched(struct fixture *f, int code, const char *what) {
    size_t len0, len1;
    char *before = slurp(f->db, &len0);
    struct stat st0, st1;
    assert_int_equal(stat(f->db, &st0), 0);
    char a[65];
    make_artifact(f, 1, 1, a);
    struct lz_error err = { 0 };
    struct lz_catalog c;
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), code);
    assert_non_null(strstr(err.msg, f->db));
    assert_non_null(strstr(err.msg, what));
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_catalog_read(f->data_root, &c, &err), code);
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), code);
    assert_int_equal(lz_catalog_lease_held(f->data_root, a, DOM1, 1, &err), code);
    assert_int_equal(lz_catalog_register(f->data_root, a, &err), code);
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-0123", a, &err), code);
    assert_true(lz_catalog_verify(f->data_root, NULL, NULL, &err) == code);
    struct lz_gc_policy pol = { .keep_days = 0 };
    assert_int_equal(lz_catalog_gc(f->data_root, &pol, false, NULL, NULL, NULL, &err), code);
    assert_int_equal(lz_catalog_gc(f->data_root, &pol, true, NULL, NULL, NULL, &err), code);
    assert_true(exists(f, a)); /* gc deleted nothing */
    char *after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    assert_int_equal(stat(f->db, &st1), 0);
    assert_int_equal(st0.st_mtim.tv_sec, st1.st_mtim.tv_sec);
    assert_int_equal(st0.st_mtim.tv_nsec, st1.st_mtim.tv_nsec);
    char p[256];
    snprintf(p, sizeof p, "%s-journal", f->db);
    assert_false(file_exists(p));
    free(before);
    free(after);
}

static void test_unknown_version_refused(void **state) {
    struct fixture *f = *state;
    assert_int_equal(lz_mkdir_p(f->data_root, 0700), 0);
    char q[256];
    snprintf(q, sizeof q, "PRAGMA application_id = %d; PRAGMA user_version = 99; CREATE TABLE future (x);",
             LZ_CATALOG_APPLICATION_ID);
    sql(f, q);
    expect_refused_untouched(f, -EPROTONOSUPPORT, "version 99");
}

static void test_foreign_application_refused(void **state) {
    struct fixture *f = *state;
    assert_int_equal(lz_mkdir_p(f->data_root, 0700), 0);
    sql(f, "PRAGMA application_id = 305419896; PRAGMA user_version = 1; CREATE TABLE artifacts (x);");
    expect_refused_untouched(f, -EBADMSG, "not a Lazaret Storage Catalog (application_id 0x12345678");
}

static void test_plain_sqlite_refused(void **state) {
    struct fixture *f = *state;
    assert_int_equal(lz_mkdir_p(f->data_root, 0700), 0);
    sql(f, "CREATE TABLE notes (x); INSERT INTO notes VALUES (1);");
    expect_refused_untouched(f, -EBADMSG, "not a Lazaret Storage Catalog (application_id 0");
}

static void test_version_recorded(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_artifact(f, 1, 1, a);
    register_ok(f, a);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), LZ_CATALOG_APPLICATION_ID);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), LZ_CATALOG_VERSION);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* ---- prepare intent and publication ---- */

static void test_prepare_publish(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_id(9, a);
    struct lz_error err = { 0 };
    assert_int_equal(lz_mkdir_p(f->prepared, 0755), 0);
    int pfd = open(f->prepared, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(pfd >= 0);

    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-aaaa", a, &err), 0);
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-aaaa", a, &err), -EEXIST); /* taken */
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, "../x", a, &err), -EINVAL);
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_prepares, 1);
    assert_string_equal(c.prepares[0].tmp_name, ".tmp-aaaa");
    assert_string_equal(c.prepares[0].artifact_id, a);
    assert_true(strlen(c.prepares[0].owner) > 40);
    lz_catalog_clear(&c);

    /* an incomplete tree is not published */
    char p[256];
    snprintf(p, sizeof p, "%s/.tmp-aaaa", f->prepared);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_true(lz_catalog_prepare_publish(f->data_root, pfd, ".tmp-aaaa", a, &err) < 0);
    assert_false(exists(f, a));
    make_tree(f, ".tmp-aaaa", a, 77);
    assert_int_equal(lz_catalog_prepare_publish(f->data_root, pfd, ".tmp-aaaa", a, &err), 0);
    assert_true(exists(f, a));
    assert_false(exists(f, ".tmp-aaaa"));
    read_ok(f, &c);
    assert_int_equal(c.n_prepares, 0);
    assert_int_equal(c.n_artifacts, 1);
    assert_string_equal(c.artifacts[0].state, "ready");
    assert_int_equal(c.artifacts[0].size, 77);
    lz_catalog_clear(&c);

    /* the loser of the race: 1, its tree and intent left to it */
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-bbbb", a, &err), 0);
    make_tree(f, ".tmp-bbbb", a, 78);
    assert_int_equal(lz_catalog_prepare_publish(f->data_root, pfd, ".tmp-bbbb", a, &err), 1);
    assert_true(exists(f, ".tmp-bbbb"));
    assert_int_equal(lz_prepare_remove_tree(pfd, ".tmp-bbbb"), 0);
    assert_int_equal(lz_catalog_prepare_forget(f->data_root, ".tmp-bbbb", &err), 1);
    assert_int_equal(lz_catalog_prepare_forget(f->data_root, ".tmp-bbbb", &err), 0);

    /* no publication onto an artifact that is being reclaimed */
    set_state(f, a, "reclaiming");
    assert_int_equal(lz_prepare_remove_tree(pfd, a), 0);
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-cccc", a, &err), 0);
    make_tree(f, ".tmp-cccc", a, 79);
    assert_int_equal(lz_catalog_prepare_publish(f->data_root, pfd, ".tmp-cccc", a, &err), -ESTALE);
    assert_true(exists(f, ".tmp-cccc"));
    assert_false(exists(f, a));
    read_ok(f, &c);
    assert_int_equal(c.n_prepares, 1);
    lz_catalog_clear(&c);
    close(pfd);
}

/* ---- gc ---- */

static void test_gc_never_removes_leased(void **state) {
    struct fixture *f = *state;
    char a[65], b[65];
    make_artifact(f, 1, 100, a);
    make_artifact(f, 2, 100, b);
    struct lz_error err = { 0 };
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), 0);
    register_ok(f, b);
    set_last_used(f, a, 1);
    set_last_used(f, b, 1);
    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 0, 1, false, &es, &res);
    assert_true(exists(f, a));
    assert_false(exists(f, b));
    assert_false(exists(f, ".reclaim-0000000000000000000000000000000000000000000000000000000000000002"));
    assert_int_equal(res.n_reclaimed, 1);
    assert_int_equal(res.bytes_reclaimed, 100);
    assert_int_equal(res.n_failed, 0);
    assert_int_equal(event_action(&es, b), LZ_GC_RECLAIMED);
    assert_int_equal(event_action(&es, a), LZ_GC_KEPT); /* over budget, but leased */
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 1);
    assert_string_equal(c.artifacts[0].artifact_id, a);
    lz_catalog_clear(&c);

    /* released: now it goes */
    assert_int_equal(lz_catalog_lease_release(f->data_root, a, DOM1, 1, &err), 1);
    gc_ok(f, 0, 0, false, &es, &res);
    assert_false(exists(f, a));
    assert_int_equal(res.n_reclaimed, 1);
}

static void test_gc_keep_days(void **state) {
    struct fixture *f = *state;
    char old[65], recent[65], fresh[65];
    make_artifact(f, 1, 10, old);
    make_artifact(f, 2, 10, recent);
    make_artifact(f, 3, 10, fresh);
    register_ok(f, old);
    register_ok(f, recent);
    register_ok(f, fresh);
    int64_t now = wall_ms();
    set_last_used(f, old, now - 20 * DAY);
    set_last_used(f, recent, now - 5 * DAY);
    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 14, 0, false, &es, &res);
    assert_false(exists(f, old));
    assert_true(exists(f, recent));
    assert_true(exists(f, fresh));
    assert_int_equal(res.n_reclaimed, 1);
    assert_non_null(strstr(es.e[0].reason, "unused for 20 days"));
    gc_ok(f, 4, 0, false, &es, &res);
    assert_false(exists(f, recent));
    assert_true(exists(f, fresh));
    gc_ok(f, 0, 0, false, &es, &res);
    assert_false(exists(f, fresh));
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 0);
    lz_catalog_clear(&c);
}

static void test_gc_max_bytes(void **state) {
    struct fixture *f = *state;
    char a[65], b[65], c3[65], d[65];
    make_artifact(f, 1, 100, a);
    make_artifact(f, 2, 200, b);
    make_artifact(f, 3, 300, c3);
    make_artifact(f, 4, 50, d);
    struct lz_error err = { 0 };
    register_ok(f, a);
    register_ok(f, b);
    register_ok(f, c3);
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, d, DOM1, 1, &err), 0);
    int64_t now = wall_ms();
    set_last_used(f, d, now - 4 * DAY); /* oldest, but leased */
    set_last_used(f, a, now - 3 * DAY);
    set_last_used(f, b, now - 2 * DAY);
    set_last_used(f, c3, now - 1 * DAY);
    struct events es;
    struct lz_gc_result res;
    /* total 650 > 400: a (100) then b (200) go, 350 remains */
    gc_ok(f, 1000, 400, true, &es, &res);
    assert_int_equal(res.n_reclaimed, 2);
    assert_true(exists(f, a) && exists(f, b));
    gc_ok(f, 1000, 400, false, &es, &res);
    assert_int_equal(res.n_reclaimed, 2);
    assert_int_equal(res.bytes_reclaimed, 300);
    assert_false(exists(f, a));
    assert_false(exists(f, b));
    assert_true(exists(f, c3));
    assert_true(exists(f, d));
    assert_non_null(strstr(es.e[0].reason, "prepared_max_bytes"));
    /* under budget: nothing */
    gc_ok(f, 1000, 400, false, &es, &res);
    assert_int_equal(res.n_reclaimed, 0);
    /* a budget the leased one alone exceeds: the rest goes, it stays */
    gc_ok(f, 1000, 10, false, &es, &res);
    assert_int_equal(res.n_reclaimed, 1);
    assert_false(exists(f, c3));
    assert_true(exists(f, d));
    assert_int_equal(event_action(&es, d), LZ_GC_KEPT);
}

/* The child records an intent, makes its tree and dies. */
static void dead_preparer(struct fixture *f, const char *tmp, const char *id) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct lz_error err = { 0 };
        if (lz_catalog_prepare_begin(f->data_root, tmp, id, &err) < 0)
            _exit(1);
        char p[256];
        snprintf(p, sizeof p, "%s/%s/rootfs/usr/locked", f->prepared, tmp);
        if (lz_mkdir_p(p, 0755) < 0 || chmod(p, 0) < 0)
            _exit(2);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_gc_prepares_and_foreign(void **state) {
    struct fixture *f = *state;
    char a[65], b[65], p[512];
    make_id(5, a);
    make_id(6, b);
    struct lz_error err = { 0 };
    dead_preparer(f, ".tmp-dead", a);
    /* a dead owner whose directory was never made */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(lz_catalog_prepare_begin(f->data_root, ".tmp-nodir", a, NULL) < 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(WEXITSTATUS(status), 0);
    /* a live owner (this process) */
    assert_int_equal(lz_catalog_prepare_begin(f->data_root, ".tmp-live", b, &err), 0);
    snprintf(p, sizeof p, "%s/.tmp-live/rootfs", f->prepared);
    assert_int_equal(lz_mkdir_p(p, 0755), 0);
    /* no intent, and names Lazaret does not own */
    static const char *const foreign[] = {
        ".tmp-norow",
        "notes",
        ".reclaim-0000000000000000000000000000000000000000000000000000000000000005",
        "0000000000000000000000000000000000000000000000000000000000000007",
        ".hidden",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(foreign); i++) {
        snprintf(p, sizeof p, "%s/%s/inner", f->prepared, foreign[i]);
        assert_int_equal(lz_mkdir_p(p, 0755), 0);
    }
    /* a registered artifact with a .reclaim- of its ID that gc did not make */
    char x[65], xr[80];
    make_artifact(f, 8, 10, x);
    register_ok(f, x);
    snprintf(xr, sizeof xr, ".reclaim-%s", x);
    snprintf(p, sizeof p, "%s/%s/inner", f->prepared, xr);
    assert_int_equal(lz_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/plainfile", f->prepared);
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, p, "x", 1, 0644), 0);
    snprintf(p, sizeof p, "%s/link", f->prepared);
    assert_int_equal(symlink("/", p), 0);

    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 0, 0, false, &es, &res);
    assert_false(exists(f, ".tmp-dead"));
    assert_true(exists(f, ".tmp-live"));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(foreign); i++) {
        assert_true(exists(f, foreign[i]));
        assert_int_equal(event_action(&es, foreign[i]), LZ_GC_KEPT);
    }
    assert_true(exists(f, x));
    assert_true(exists(f, xr));
    assert_int_equal(event_action(&es, x), LZ_GC_KEPT);
    assert_int_equal(event_action(&es, xr), LZ_GC_KEPT);
    assert_true(exists(f, "plainfile"));
    assert_true(exists(f, "link"));
    assert_int_equal(event_action(&es, ".tmp-dead"), LZ_GC_RECLAIMED);
    assert_int_equal(event_action(&es, ".tmp-nodir"), LZ_GC_RECLAIMED);
    assert_int_equal(event_action(&es, ".tmp-live"), LZ_GC_KEPT);
    assert_int_equal(res.n_reclaimed, 2);
    assert_int_equal(res.n_failed, 0);
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_prepares, 1);
    assert_string_equal(c.prepares[0].tmp_name, ".tmp-live");
    assert_int_equal(c.n_artifacts, 1);
    assert_string_equal(c.artifacts[0].state, "ready");
    lz_catalog_clear(&c);
    /* nothing outside prepared/ was touched through the symlink */
    assert_true(file_exists("/etc/passwd"));
}

static void test_gc_dry_run(void **state) {
    struct fixture *f = *state;
    char a[65], b[65], orphan[65];
    /* without a catalog: nothing is created */
    make_artifact(f, 1, 10, a);
    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 0, 0, true, &es, &res);
    assert_int_equal(res.n_reclaimed, 1); /* it would be registered, then reclaimed */
    assert_int_equal(event_action(&es, a), LZ_GC_RECLAIMED);
    assert_false(file_exists(f->db));
    char p[256];
    snprintf(p, sizeof p, "%s/storage-catalog.lock", f->data_root);
    assert_false(file_exists(p));

    register_ok(f, a);
    make_artifact(f, 2, 20, b);
    register_ok(f, b);
    set_last_used(f, a, 1);
    set_last_used(f, b, 1);
    set_state(f, b, "reclaiming");
    make_id(3, orphan);
    dead_preparer(f, ".tmp-dead", orphan);
    size_t len0, len1;
    char *before = slurp(f->db, &len0);
    gc_ok(f, 0, 0, true, &es, &res);
    assert_int_equal(res.n_reclaimed, 3);
    assert_int_equal(event_action(&es, a), LZ_GC_RECLAIMED);
    assert_int_equal(event_action(&es, b), LZ_GC_RECLAIMED);
    assert_int_equal(event_action(&es, ".tmp-dead"), LZ_GC_RECLAIMED);
    char *after = slurp(f->db, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    assert_true(exists(f, a) && exists(f, b) && exists(f, ".tmp-dead"));
    free(before);
    free(after);
    /* for real */
    gc_ok(f, 0, 0, false, &es, &res);
    assert_int_equal(res.n_reclaimed, 3);
    assert_false(exists(f, a) || exists(f, b) || exists(f, ".tmp-dead"));
}

static void test_gc_interrupted_reclaim(void **state) {
    struct fixture *f = *state;
    char a[65], b[65], moved[80];
    make_artifact(f, 1, 10, a);
    make_artifact(f, 2, 20, b);
    register_ok(f, a);
    register_ok(f, b);
    set_state(f, a, "reclaiming");
    set_state(f, b, "reclaiming");
    /* a: crashed after the rename; b: crashed before it */
    snprintf(moved, sizeof moved, ".reclaim-%s", a);
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/%s", f->prepared, a);
    snprintf(to, sizeof to, "%s/%s", f->prepared, moved);
    assert_int_equal(rename(from, to), 0);
    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 1000, 0, false, &es, &res); /* the policy alone would keep them */
    assert_int_equal(res.n_reclaimed, 2);
    assert_false(exists(f, moved));
    assert_false(exists(f, a));
    assert_false(exists(f, b));
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 0);
    lz_catalog_clear(&c);
}

static void test_gc_registers_unknown_and_serialises(void **state) {
    struct fixture *f = *state;
    char a[65];
    make_artifact(f, 1, 10, a);
    struct events es;
    struct lz_gc_result res;
    gc_ok(f, 14, 0, false, &es, &res);
    assert_int_equal(res.n_reclaimed, 0);
    struct lz_catalog c;
    read_ok(f, &c);
    assert_int_equal(c.n_artifacts, 1);
    assert_string_equal(c.artifacts[0].state, "ready");
    lz_catalog_clear(&c);
    /* a second gc at the same time is refused */
    char p[256];
    snprintf(p, sizeof p, "%s/storage-gc.lock", f->data_root);
    int fd = open(p, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int cfd = open(p, O_RDWR | O_CLOEXEC);
        if (cfd < 0 || flock(cfd, LOCK_EX) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    usleep(200 * 1000);
    struct lz_gc_policy pol = { .keep_days = 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_catalog_gc(f->data_root, &pol, false, NULL, NULL, NULL, &err), -EBUSY);
    assert_non_null(strstr(err.msg, "another `lazaret image gc` is running"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd);
    assert_int_equal(lz_catalog_gc(f->data_root, &pol, false, NULL, NULL, NULL, &err), 0);
    assert_false(exists(f, a));
    /* a bad policy */
    pol.keep_days = -1;
    assert_int_equal(lz_catalog_gc(f->data_root, &pol, false, NULL, NULL, NULL, &err), -EINVAL);
}

/* ---- verify ---- */

struct counts {
    int error, warn, info;
};

static void on_report(void *ud, const char *sev, const char *msg) {
    struct counts *c = ud;
    (void)msg;
    if (!strcmp(sev, "error"))
        c->error++;
    else if (!strcmp(sev, "warn"))
        c->warn++;
    else
        c->info++;
}

static void test_verify(void **state) {
    struct fixture *f = *state;
    struct counts n = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_catalog_verify(f->data_root, on_report, &n, &err), 0);
    assert_int_equal(n.info, 1); /* no catalog yet */
    char a[65], b[65], c3[65];
    make_artifact(f, 1, 10, a);
    make_artifact(f, 2, 10, b);
    make_artifact(f, 3, 10, c3); /* unknown to the catalog: info */
    assert_int_equal(lz_catalog_lease_acquire(f->data_root, a, DOM1, 1, &err), 0);
    register_ok(f, b);
    memset(&n, 0, sizeof n);
    assert_int_equal(lz_catalog_verify(f->data_root, on_report, &n, &err), 0);
    assert_int_equal(n.error, 0);
    assert_int_equal(n.warn, 0);
    assert_int_equal(n.info, 1);
    /* a 'ready' artifact without its tree, an abandoned preparation */
    int pfd = open(f->prepared, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(lz_prepare_remove_tree(pfd, b), 0);
    close(pfd);
    dead_preparer(f, ".tmp-dead", c3);
    memset(&n, 0, sizeof n);
    assert_int_equal(lz_catalog_verify(f->data_root, on_report, &n, &err), 1);
    assert_int_equal(n.error, 1);
    assert_int_equal(n.warn, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lease_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_catalog_reads_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaiming_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_sections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_application_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_sqlite_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prepare_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_never_removes_leased, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_keep_days, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_max_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_prepares_and_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_interrupted_reclaim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_registers_unknown_and_serialises, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
