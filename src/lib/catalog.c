/* catalog.c — see catalog.h for the files, the records and the protocols. */
#include "catalog.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>

#include "artifact.h"
#include "catalog_int.h"
#include "prepare.h"
#include "procid.h"

static const char schema_sql[] =
    "CREATE TABLE artifacts ("
    " artifact_id TEXT PRIMARY KEY NOT NULL"
    "  CHECK (length(artifact_id) = 64 AND artifact_id NOT GLOB '*[^0-9a-f]*'),"
    " state TEXT NOT NULL CHECK (state IN ('ready', 'reclaiming')),"
    " source_ref TEXT NOT NULL,"
    " manifest_digest TEXT NOT NULL,"
    " size INTEGER NOT NULL CHECK (size >= 0),"
    " created_ms INTEGER NOT NULL,"
    " last_used_ms INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE leases ("
    " artifact_id TEXT NOT NULL REFERENCES artifacts (artifact_id) ON DELETE RESTRICT,"
    " domain_id TEXT NOT NULL CHECK (length(domain_id) = 64 AND domain_id NOT GLOB '*[^0-9a-f]*'),"
    " generation INTEGER NOT NULL CHECK (generation >= 0),"
    " created_ms INTEGER NOT NULL,"
    " PRIMARY KEY (artifact_id, domain_id, generation)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE TABLE prepares ("
    " tmp_name TEXT PRIMARY KEY NOT NULL"
    "  CHECK (length(tmp_name) BETWEEN 6 AND 63 AND substr(tmp_name, 1, 5) = '.tmp-' AND instr(tmp_name, '/') = 0),"
    " artifact_id TEXT NOT NULL CHECK (length(artifact_id) = 64 AND artifact_id NOT GLOB '*[^0-9a-f]*'),"
    " owner TEXT NOT NULL CHECK (length(owner) BETWEEN 1 AND 159),"
    " started_ms INTEGER NOT NULL"
    ") STRICT;";

/* ---- small helpers ---- */

bool lz_cat_hex64(const char *s) {
    if (!s || strlen(s) != 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static bool tmp_name_valid(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return n > 5 && n < 64 && strncmp(s, ".tmp-", 5) == 0 && !strchr(s, '/');
}

int64_t lz_cat_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* artifact.json "created" (RFC 3339 UTC, seconds) to milliseconds; now when unreadable. */
static int64_t created_ms_of(const char *s) {
    struct tm tm = { 0 };
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
    if (!end || *end)
        return lz_cat_now_ms();
    time_t t = timegm(&tm);
    return t < 0 ? lz_cat_now_ms() : (int64_t)t * 1000;
}

/* ---- the bounded section: lock, open, version, one transaction ---- */

static int catalog_refuse(const char *path, int code, const struct lz_db_found *f, struct lz_error *err) {
    if (code == -EPROTONOSUPPORT)
        return lz_error_set(err, code,
                            "%s: Storage Catalog version %" PRId64 " is not supported (this Lazaret reads "
                            "version %d only); use the Lazaret that wrote it, or move the file away",
                            path, f->version, LZ_CATALOG_VERSION);
    if (f->application_id != 0)
        return lz_error_set(err, code,
                            "%s: not a Lazaret Storage Catalog (application_id 0x%08" PRIx32 ", version %" PRId64
                            "); refusing to touch it",
                            path, (uint32_t)f->application_id, f->version);
    return lz_error_set(err, code,
                        "%s: not a Lazaret Storage Catalog (application_id 0, version %" PRId64 ", %" PRId64
                        " schema entries); refusing to touch it",
                        path, f->version, f->tables);
}

static const struct lz_db_schema catalog_schema = {
    .name = "Storage Catalog",
    .application_id = LZ_CATALOG_APPLICATION_ID,
    .version = LZ_CATALOG_VERSION,
    .sql = schema_sql,
    .wal = false, /* the rollback journal */
    .mode = 0600,
    .refuse = catalog_refuse,
};

/* Commits (r >= 0) or rolls back (r < 0), closes, unlocks. Returns r, or the
 * commit error. */
int lz_cat_section_end(struct cat *c, int r, struct lz_error *err) {
    if (c->db && r >= 0) {
        int k = lz_db_commit(c->db, err);
        if (k < 0)
            r = k;
    }
    lz_db_close(c->db);
    lz_closep(&c->lock_fd);
    *c = (struct cat){ .lock_fd = -EBADF };
    return r;
}

/* flags: LZ_DB_WRITE, LZ_DB_CREATE (also creates data_root). Returns 0 with
 * the section open, 1 when there is no catalog.db (only without
 * LZ_DB_CREATE; nothing is created), or -errno. */
int lz_cat_section_begin(const char *data_root, unsigned flags, struct cat *ret, struct lz_error *err) {
    if (!data_root || data_root[0] != '/')
        return lz_error_set(err, -EINVAL, "the Storage Root must be an absolute path");
    _cleanup_free_ char *path = lz_xasprintf("%s/" LZ_CATALOG_FILE, data_root);
    struct stat st;
    int r;
    if (flags & LZ_DB_CREATE) {
        if ((r = lz_mkdir_p(data_root, 0700)) < 0)
            return lz_error_set(err, r, "cannot create the Storage Root %s: %s", data_root, strerror(-r));
    } else if (lstat(path, &st) < 0) {
        return errno == ENOENT || errno == ENOTDIR ? 1 : lz_error_set(err, -errno, "%s: %m", path);
    }
    _cleanup_free_ char *lock = lz_xasprintf("%s/" LZ_CATALOG_LOCK_FILE, data_root);
    struct cat c = { .lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600) };
    if (c.lock_fd < 0)
        return lz_error_set(err, -errno, "cannot open the Storage Catalog lock %s: %m", lock);
    r = lz_flock_timeout(c.lock_fd, LZ_CATALOG_LOCK_TIMEOUT_S);
    if (r == -ETIMEDOUT)
        lz_error_set(err, r, "the Storage Catalog is locked by another process for over %d s (%s)",
                     LZ_CATALOG_LOCK_TIMEOUT_S, lock);
    else if (r < 0)
        lz_error_set(err, r, "cannot lock %s: %s", lock, strerror(-r));
    /* Read-write even for reads: a hot journal left by a crash is rolled
     * back by the next opener. */
    struct lz_error e = { 0 };
    if (r == 0 && (r = lz_db_open(path, &catalog_schema, flags, &c.db, &e)) < 0) {
        /* Gone since the lstat above: no catalog, as then. */
        if (r != -ENOENT || (flags & LZ_DB_CREATE))
            lz_error_set(err, r, "%s", e.msg);
        else
            r = 1;
    }
    if (r != 0) {
        lz_cat_section_end(&c, -1, NULL);
        return r;
    }
    c.fresh = c.db->fresh;
    *ret = c;
    return 0;
}

int lz_cat_section_existing(const char *data_root, unsigned flags, struct cat *ret, struct lz_error *err) {
    struct cat c;
    int r = lz_cat_section_begin(data_root, flags & ~LZ_DB_CREATE, &c, err);
    if (r != 0)
        return r;
    if (c.fresh) {
        r = lz_cat_section_end(&c, 0, err);
        return r < 0 ? r : 1;
    }
    *ret = c;
    return 0;
}

/* ---- rows ---- */

struct row_artifact {
    char state[16];
    uint64_t size;
    int64_t last_used_ms;
    int64_t n_leases;
};

/* 1 and *ret when the catalog knows id, 0 when not. */
static int artifact_get(struct cat *c, const char *id, struct row_artifact *ret, struct lz_error *err) {
    if (c->fresh)
        return 0;
    sqlite3_stmt *q = NULL;
    int r = lz_db_prepare(c->db, &q, err,
                          "SELECT state, size, last_used_ms, (SELECT count(*) FROM leases l WHERE l.artifact_id = "
                          "a.artifact_id) FROM artifacts a WHERE artifact_id = ?",
                          "t", id);
    if (r == 0 && (r = lz_db_step_row(c->db, q, err)) == 1) {
        lz_db_col_copy(q, 0, ret->state, sizeof ret->state);
        int64_t sz = sqlite3_column_int64(q, 1);
        ret->size = sz > 0 ? (uint64_t)sz : 0;
        ret->last_used_ms = sqlite3_column_int64(q, 2);
        ret->n_leases = sqlite3_column_int64(q, 3);
    }
    return lz_db_finalize(c->db, &q, r, err);
}

int lz_cat_open_prepared(const char *data_root) {
    _cleanup_free_ char *p = lz_xasprintf("%s/prepared", data_root);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0 ? -errno : fd;
}

/* Inserts (or refreshes) the row of the published tree prepared/<dir> that
 * holds artifact id: state 'ready', metadata from its artifact.json. */
int lz_cat_artifact_upsert(struct cat *c, int pfd, const char *dir, const char *id, int64_t now, struct lz_error *err) {
    struct lz_prepared_info info;
    int r = lz_prepared_info_read(pfd, dir, id, &info);
    if (r < 0)
        return lz_error_set(err, -ESTALE, "prepared artifact %s is missing or incomplete (%s); prepare it again", id,
                            strerror(-r));
    r = lz_db_run(
        c->db, err,
        "INSERT INTO artifacts (artifact_id, state, source_ref, manifest_digest, size, created_ms, last_used_ms) "
        "VALUES (?, 'ready', ?, ?, ?, ?, ?) ON CONFLICT (artifact_id) DO UPDATE SET source_ref = "
        "excluded.source_ref, manifest_digest = excluded.manifest_digest, size = excluded.size, created_ms = "
        "excluded.created_ms, last_used_ms = excluded.last_used_ms WHERE state = 'ready'",
        "tttiii", id, info.source_ref, info.manifest_digest,
        (int64_t)(info.size > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : info.size), created_ms_of(info.created), now);
    lz_prepared_info_clear(&info);
    return r < 0 ? r : 0;
}

static int reclaiming_error(const char *id, struct lz_error *err) {
    return lz_error_set(err, -ESTALE,
                        "prepared artifact %s is being reclaimed by `lazaret image gc` (run it again "
                        "to finish an interrupted reclaim); prepare the image again",
                        id);
}

/* Under an open write section: the artifact is known and 'ready' with its
 * tree present (registered if needed), last_used_ms = now. */
static int ensure_ready(struct cat *c, const char *data_root, const char *id, int64_t now, struct lz_error *err) {
    struct row_artifact a;
    int r = artifact_get(c, id, &a, err);
    if (r < 0)
        return r;
    if (r == 1 && strcmp(a.state, "ready") != 0)
        return reclaiming_error(id, err);
    _cleanup_close_ int pfd = lz_cat_open_prepared(data_root);
    if (pfd < 0)
        return lz_error_set(err, -ESTALE, "prepared artifact %s is missing (%s/prepared: %s); prepare it again", id,
                            data_root, strerror(-pfd));
    return lz_cat_artifact_upsert(c, pfd, id, id, now, err);
}

int lz_catalog_known_ready(const char *data_root, const char *artifact_id, struct lz_error *err) {
    if (!lz_cat_hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID (expected 64 lowercase hex digits)");
    struct cat c;
    int r = lz_cat_section_existing(data_root, 0, &c, err);
    if (r != 0)
        return r == 1 ? 0 : r;
    struct row_artifact a;
    r = artifact_get(&c, artifact_id, &a, err);
    if (r == 1)
        r = strcmp(a.state, "ready") == 0;
    return lz_cat_section_end(&c, r, err);
}

static int check_lease_args(const char *artifact_id, const char *domain_id, int64_t generation, struct lz_error *err) {
    if (!lz_cat_hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID (expected 64 lowercase hex digits)");
    if (!lz_cat_hex64(domain_id))
        return lz_error_set(err, -EINVAL, "invalid Domain ID (expected 64 lowercase hex digits)");
    if (generation < 0)
        return lz_error_set(err, -EINVAL, "invalid generation %" PRId64, generation);
    return 0;
}

/* The section of a lease operation on valid arguments: with LZ_DB_CREATE in
 * flags lz_cat_section_begin, else lz_cat_section_existing (1: no rows). */
static int lease_section(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                         unsigned flags, struct cat *ret, struct lz_error *err) {
    int r = check_lease_args(artifact_id, domain_id, generation, err);
    if (r < 0)
        return r;
    return flags & LZ_DB_CREATE ? lz_cat_section_begin(data_root, flags, ret, err)
                                : lz_cat_section_existing(data_root, flags, ret, err);
}

/* ---- leases ---- */

int lz_catalog_lease_acquire(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                             struct lz_error *err) {
    struct cat c;
    int r = lease_section(data_root, artifact_id, domain_id, generation, LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r < 0)
        return r;
    int64_t now = lz_cat_now_ms();
    r = ensure_ready(&c, data_root, artifact_id, now, err);
    if (r >= 0)
        r = lz_db_run(c.db, err,
                      "INSERT INTO leases (artifact_id, domain_id, generation, created_ms) VALUES (?, ?, ?, ?) "
                      "ON CONFLICT DO NOTHING",
                      "ttii", artifact_id, domain_id, generation, now);
    return lz_cat_section_end(&c, r < 0 ? r : 0, err);
}

int lz_catalog_lease_release(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                             struct lz_error *err) {
    struct cat c;
    int r = lease_section(data_root, artifact_id, domain_id, generation, LZ_DB_WRITE, &c, err);
    if (r != 0)
        return r == 1 ? 0 : r;
    r = lz_db_run(c.db, err, "DELETE FROM leases WHERE artifact_id = ? AND domain_id = ? AND generation = ?", "tti",
                  artifact_id, domain_id, generation);
    if (r >= 0) {
        int removed = r > 0 ? 1 : 0;
        r = lz_db_run(c.db, err, "UPDATE artifacts SET last_used_ms = ? WHERE artifact_id = ?", "it", lz_cat_now_ms(),
                      artifact_id);
        if (r >= 0)
            r = removed;
    }
    return lz_cat_section_end(&c, r, err);
}

int lz_catalog_lease_held(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                          struct lz_error *err) {
    struct cat c;
    int r = lease_section(data_root, artifact_id, domain_id, generation, 0, &c, err);
    if (r != 0)
        return r == 1 ? 0 : r;
    int64_t one = 0;
    r = lz_db_get_int(c.db, &one, err,
                      "SELECT 1 FROM leases WHERE artifact_id = ? AND domain_id = ? AND generation = ?", "tti",
                      artifact_id, domain_id, generation);
    return lz_cat_section_end(&c, r, err);
}

/* ---- reading the whole catalog ---- */

static void fill_artifact(void *e, sqlite3_stmt *q) {
    struct lz_catalog_artifact *a = e;
    lz_db_col_copy(q, 0, a->artifact_id, sizeof a->artifact_id);
    a->state = lz_db_col_dup(q, 1, true);
    a->source_ref = lz_db_col_dup(q, 2, true);
    a->manifest_digest = lz_db_col_dup(q, 3, true);
    int64_t sz = sqlite3_column_int64(q, 4);
    a->size = sz > 0 ? (uint64_t)sz : 0;
    a->created_ms = sqlite3_column_int64(q, 5);
    a->last_used_ms = sqlite3_column_int64(q, 6);
    int64_t n = sqlite3_column_int64(q, 7);
    a->n_leases = n > 0 ? (size_t)n : 0;
}

static void clear_artifact(void *e) {
    struct lz_catalog_artifact *a = e;
    free(a->state);
    free(a->source_ref);
    free(a->manifest_digest);
}

static void fill_lease(void *e, sqlite3_stmt *q) {
    struct lz_catalog_lease *le = e;
    lz_db_col_copy(q, 0, le->artifact_id, sizeof le->artifact_id);
    lz_db_col_copy(q, 1, le->domain_id, sizeof le->domain_id);
    le->generation = sqlite3_column_int64(q, 2);
    le->created_ms = sqlite3_column_int64(q, 3);
}

static void fill_prepare(void *e, sqlite3_stmt *q) {
    struct lz_catalog_prepare *p = e;
    lz_db_col_copy(q, 0, p->tmp_name, sizeof p->tmp_name);
    lz_db_col_copy(q, 1, p->artifact_id, sizeof p->artifact_id);
    lz_db_col_copy(q, 2, p->owner, sizeof p->owner);
    p->started_ms = sqlite3_column_int64(q, 3);
}

int lz_cat_load(struct cat *c, struct lz_catalog *ret, struct lz_error *err) {
    struct lz_catalog l = { 0 };
    int r = 0;
    if (!c->fresh &&
        ((r = lz_db_read_rows(c->db, "artifacts",
                              "SELECT artifact_id, state, source_ref, manifest_digest, size, created_ms, last_used_ms, "
                              "(SELECT count(*) FROM leases l WHERE l.artifact_id = a.artifact_id) FROM artifacts a "
                              "ORDER BY artifact_id",
                              LZ_CAT_MAX_ROWS, sizeof *l.artifacts, fill_artifact, clear_artifact,
                              (void **)&l.artifacts, &l.n_artifacts, err)) < 0 ||
         (r = lz_db_read_rows(c->db, "leases",
                              "SELECT artifact_id, domain_id, generation, created_ms FROM leases "
                              "ORDER BY artifact_id, domain_id, generation",
                              LZ_CAT_MAX_ROWS, sizeof *l.leases, fill_lease, NULL, (void **)&l.leases, &l.n_leases,
                              err)) < 0 ||
         (r = lz_db_read_rows(c->db, "prepares",
                              "SELECT tmp_name, artifact_id, owner, started_ms FROM prepares ORDER BY tmp_name",
                              LZ_CAT_MAX_ROWS, sizeof *l.prepares, fill_prepare, NULL, (void **)&l.prepares,
                              &l.n_prepares, err)) < 0)) {
        lz_catalog_clear(&l);
        return r;
    }
    *ret = l;
    return 0;
}

int lz_catalog_read(const char *data_root, struct lz_catalog *ret, struct lz_error *err) {
    struct cat c;
    int r = lz_cat_section_begin(data_root, 0, &c, err);
    if (r == 1) {
        *ret = (struct lz_catalog){ 0 };
        return 0;
    }
    if (r < 0)
        return r;
    struct lz_catalog l = { 0 }; /* lz_cat_load leaves it empty when it fails */
    r = lz_cat_section_end(&c, lz_cat_load(&c, &l, err), err);
    if (r < 0) {
        lz_catalog_clear(&l);
        return r;
    }
    *ret = l;
    return 0;
}

void lz_catalog_clear(struct lz_catalog *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->n_artifacts; i++)
        clear_artifact(&c->artifacts[i]);
    free(c->artifacts);
    free(c->leases);
    free(c->prepares);
    *c = (struct lz_catalog){ 0 };
}

/* ---- prepare intent and publication ---- */

/* The section of a prepare intent's change, on a valid tmp_name (and
 * artifact_id, when not NULL), with owner this process (lz_procid_format's
 * form); flags as for lease_section. */
static int intent_section(const char *data_root, const char *tmp_name, const char *artifact_id, unsigned flags,
                          char owner[static 160], struct cat *ret, struct lz_error *err) {
    if (!tmp_name_valid(tmp_name) || (artifact_id && !lz_cat_hex64(artifact_id)))
        return lz_error_set(err, -EINVAL, "invalid prepare intent");
    struct lz_procid self;
    int r = lz_procid_self(&self);
    if (r < 0)
        return lz_error_set(err, r, "cannot identify this process (pidfd): %s", strerror(-r));
    lz_procid_format(&self, owner, 160);
    return flags & LZ_DB_CREATE ? lz_cat_section_begin(data_root, flags, ret, err)
                                : lz_cat_section_existing(data_root, flags, ret, err);
}

int lz_catalog_prepare_begin(const char *data_root, const char *tmp_name, const char *artifact_id,
                             struct lz_error *err) {
    char owner[160];
    struct cat c;
    int r = intent_section(data_root, tmp_name, artifact_id, LZ_DB_WRITE | LZ_DB_CREATE, owner, &c, err);
    if (r < 0)
        return r;
    r = lz_db_run(c.db, err, "INSERT INTO prepares (tmp_name, artifact_id, owner, started_ms) VALUES (?, ?, ?, ?)",
                  "ttti", tmp_name, artifact_id, owner, lz_cat_now_ms());
    return lz_cat_section_end(&c, r < 0 ? r : 0, err);
}

int lz_catalog_prepare_publish(const char *data_root, int prepared_fd, const char *tmp_name, const char *artifact_id,
                               struct lz_error *err) {
    if (!tmp_name_valid(tmp_name) || !lz_cat_hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared artifact publication");
    struct cat c;
    int r = lz_cat_section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r < 0)
        return r;
    struct row_artifact a;
    r = artifact_get(&c, artifact_id, &a, err);
    if (r == 1 && strcmp(a.state, "ready") != 0)
        r = reclaiming_error(artifact_id, err);
    if (r < 0)
        return lz_cat_section_end(&c, r, err);
    /* The metadata is read before the rename: a published name is only
     * ever given to a tree whose artifact.json names it. */
    struct lz_prepared_info info;
    r = lz_prepared_info_read(prepared_fd, tmp_name, artifact_id, &info);
    if (r < 0) {
        lz_error_set(err, r, "prepared tree %s is incomplete: %s", tmp_name, strerror(-r));
        return lz_cat_section_end(&c, r, err);
    }
    lz_prepared_info_clear(&info);
    int64_t now = lz_cat_now_ms();
    if (renameat2(prepared_fd, tmp_name, prepared_fd, artifact_id, RENAME_NOREPLACE) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
            r = lz_error_set(err, -errno, "cannot publish prepared artifact %s: %m", artifact_id);
            return lz_cat_section_end(&c, r, err);
        }
        /* Someone else published it first: theirs is as good as ours. */
        r = lz_cat_artifact_upsert(&c, prepared_fd, artifact_id, artifact_id, now, err);
        return lz_cat_section_end(&c, r < 0 ? r : 1, err);
    }
    if (fsync(prepared_fd) < 0) {
        r = lz_error_set(err, -errno, "cannot sync %s/prepared: %m", data_root);
    } else {
        r = lz_cat_artifact_upsert(&c, prepared_fd, artifact_id, artifact_id, now, err);
        if (r >= 0)
            r = lz_db_run(c.db, err, "DELETE FROM prepares WHERE tmp_name = ?", "t", tmp_name);
    }
    if (r < 0) {
        /* Not recorded: take the name back so the catalog and the tree agree. */
        if (renameat2(prepared_fd, artifact_id, prepared_fd, tmp_name, RENAME_NOREPLACE) == 0)
            fsync(prepared_fd);
        return lz_cat_section_end(&c, r, err);
    }
    return lz_cat_section_end(&c, 0, err);
}

int lz_catalog_prepare_forget(const char *data_root, const char *tmp_name, struct lz_error *err) {
    char owner[160];
    struct cat c;
    int r = intent_section(data_root, tmp_name, NULL, LZ_DB_WRITE, owner, &c, err);
    if (r != 0)
        return r == 1 ? 0 : r;
    r = lz_db_run(c.db, err, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", "tt", tmp_name, owner);
    return lz_cat_section_end(&c, r < 0 ? r : r > 0, err);
}

int lz_catalog_register(const char *data_root, const char *artifact_id, struct lz_error *err) {
    if (!lz_cat_hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID (expected 64 lowercase hex digits)");
    struct cat c;
    int r = lz_cat_section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r < 0)
        return r;
    r = ensure_ready(&c, data_root, artifact_id, lz_cat_now_ms(), err);
    return lz_cat_section_end(&c, r < 0 ? r : 0, err);
}
