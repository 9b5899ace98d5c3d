/* catalog.c — see catalog.h for the files, the records and the protocols. */
#include "catalog.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "db.h"
#include "image.h"
#include "prepare.h"
#include "procid.h"

#define DAY_MS INT64_C(86400000)
/* A bound on what a catalog (or a prepared/ directory) can make us hold. */
#define MAX_ROWS 100000
#define MAX_KEEP_DAYS INT64_C(1000000)

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

static bool hex64(const char *s) {
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

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* artifact.json "created" (RFC 3339 UTC, seconds) to milliseconds; now when unreadable. */
static int64_t created_ms_of(const char *s) {
    struct tm tm = { 0 };
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
    if (!end || *end)
        return now_ms();
    time_t t = timegm(&tm);
    return t < 0 ? now_ms() : (int64_t)t * 1000;
}

/* A name from a directory listing, for one line of text. */
static void printable(const char *in, char *out, size_t size) {
    size_t o = 0;
    for (; *in && o + 4 < size; in++)
        out[o++] = (unsigned char)*in < 0x20 || *in == 0x7f ? '?' : *in;
    if (*in && o + 4 <= size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* ---- the bounded section: lock, open, version, one transaction ---- */

static int catalog_refuse(const char *path, int code, const struct lz_db_found *f, struct lz_error *err) {
    if (code == -EPROTONOSUPPORT)
        return lz_error_set(err, code, "%s: Storage Catalog version %" PRId64 " is not supported (this Lazaret reads "
                            "version %d only); use the Lazaret that wrote it, or move the file away",
                            path, f->version, LZ_CATALOG_VERSION);
    if (f->application_id != 0)
        return lz_error_set(err, code, "%s: not a Lazaret Storage Catalog (application_id 0x%08" PRIx32
                            ", version %" PRId64 "); refusing to touch it", path, (uint32_t)f->application_id,
                            f->version);
    return lz_error_set(err, code, "%s: not a Lazaret Storage Catalog (application_id 0, version %" PRId64 ", %"
                        PRId64 " schema entries); refusing to touch it", path, f->version, f->tables);
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

struct cat {
    int lock_fd;
    struct lz_db *db;
    bool fresh; /* no schema yet: reads as empty */
};

/* Commits (r >= 0) or rolls back (r < 0), closes, unlocks. Returns r, or the
 * commit error. */
static int section_end(struct cat *c, int r, struct lz_error *err) {
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
static int section_begin(const char *data_root, unsigned flags, struct cat *ret, struct lz_error *err) {
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
    if (r == 0)
        r = lz_db_open(path, &catalog_schema, flags, &c.db, err);
    if (r < 0) {
        section_end(&c, -1, NULL);
        return r == -ENOENT && !(flags & LZ_DB_CREATE) ? 1 : r;
    }
    c.fresh = c.db->fresh;
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

static int open_prepared(const char *data_root) {
    _cleanup_free_ char *p = lz_xasprintf("%s/prepared", data_root);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0 ? -errno : fd;
}

/* Inserts (or refreshes) the row of the published tree prepared/<dir> that
 * holds artifact id: state 'ready', metadata from its artifact.json. */
static int artifact_upsert(struct cat *c, int pfd, const char *dir, const char *id, int64_t now,
                           struct lz_error *err) {
    struct lz_prepared_info info;
    int r = lz_prepared_info_read(pfd, dir, id, &info);
    if (r < 0)
        return lz_error_set(err, -ESTALE, "prepared artifact %s is missing or incomplete (%s); prepare it again",
                            id, strerror(-r));
    r = lz_db_run(c->db, err,
            "INSERT INTO artifacts (artifact_id, state, source_ref, manifest_digest, size, created_ms, last_used_ms) "
            "VALUES (?, 'ready', ?, ?, ?, ?, ?) ON CONFLICT (artifact_id) DO UPDATE SET source_ref = "
            "excluded.source_ref, manifest_digest = excluded.manifest_digest, size = excluded.size, created_ms = "
            "excluded.created_ms, last_used_ms = excluded.last_used_ms WHERE state = 'ready'",
            "tttiii", id, info.source_ref, info.manifest_digest,
            (int64_t)(info.size > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : info.size), created_ms_of(info.created),
            now);
    lz_prepared_info_clear(&info);
    return r < 0 ? r : 0;
}

static int reclaiming_error(const char *id, struct lz_error *err) {
    return lz_error_set(err, -ESTALE, "prepared artifact %s is being reclaimed by `lazaret image gc` (run it again "
                        "to finish an interrupted reclaim); prepare the image again", id);
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
    _cleanup_close_ int pfd = open_prepared(data_root);
    if (pfd < 0)
        return lz_error_set(err, -ESTALE, "prepared artifact %s is missing (%s/prepared: %s); prepare it again", id,
                            data_root, strerror(-pfd));
    return artifact_upsert(c, pfd, id, id, now, err);
}

static int check_lease_args(const char *artifact_id, const char *domain_id, int64_t generation,
                            struct lz_error *err) {
    if (!hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID (expected 64 lowercase hex digits)");
    if (!hex64(domain_id))
        return lz_error_set(err, -EINVAL, "invalid Domain ID (expected 64 lowercase hex digits)");
    if (generation < 0)
        return lz_error_set(err, -EINVAL, "invalid generation %" PRId64, generation);
    return 0;
}

/* ---- leases ---- */

int lz_catalog_lease_acquire(const char *data_root, const char *artifact_id, const char *domain_id,
                             int64_t generation, struct lz_error *err) {
    int r = check_lease_args(artifact_id, domain_id, generation, err);
    if (r < 0)
        return r;
    struct cat c;
    if ((r = section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err)) < 0)
        return r;
    int64_t now = now_ms();
    r = ensure_ready(&c, data_root, artifact_id, now, err);
    if (r >= 0)
        r = lz_db_run(c.db, err,
                "INSERT INTO leases (artifact_id, domain_id, generation, created_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                "ttii", artifact_id, domain_id, generation, now);
    return section_end(&c, r < 0 ? r : 0, err);
}

int lz_catalog_lease_release(const char *data_root, const char *artifact_id, const char *domain_id,
                             int64_t generation, struct lz_error *err) {
    int r = check_lease_args(artifact_id, domain_id, generation, err);
    if (r < 0)
        return r;
    struct cat c;
    if ((r = section_begin(data_root, LZ_DB_WRITE, &c, err)) != 0)
        return r == 1 ? 0 : r;
    if (c.fresh)
        return section_end(&c, 0, err);
    r = lz_db_run(c.db, err, "DELETE FROM leases WHERE artifact_id = ? AND domain_id = ? AND generation = ?", "tti",
            artifact_id, domain_id, generation);
    if (r >= 0) {
        int removed = r > 0 ? 1 : 0;
        r = lz_db_run(c.db, err, "UPDATE artifacts SET last_used_ms = ? WHERE artifact_id = ?", "it", now_ms(), artifact_id);
        if (r >= 0)
            r = removed;
    }
    return section_end(&c, r, err);
}

int lz_catalog_lease_held(const char *data_root, const char *artifact_id, const char *domain_id,
                          int64_t generation, struct lz_error *err) {
    int r = check_lease_args(artifact_id, domain_id, generation, err);
    if (r < 0)
        return r;
    struct cat c;
    if ((r = section_begin(data_root, 0, &c, err)) != 0)
        return r == 1 ? 0 : r;
    if (c.fresh)
        return section_end(&c, 0, err);
    int64_t one = 0;
    r = lz_db_get_int(c.db, &one, err, "SELECT 1 FROM leases WHERE artifact_id = ? AND domain_id = ? AND generation = ?",
                      "tti", artifact_id, domain_id, generation);
    return section_end(&c, r, err);
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

static int load_all(struct cat *c, struct lz_catalog *ret, struct lz_error *err) {
    struct lz_catalog l = { 0 };
    int r = 0;
    if (!c->fresh &&
        ((r = lz_db_read_rows(c->db, "artifacts",
                              "SELECT artifact_id, state, source_ref, manifest_digest, size, created_ms, last_used_ms, "
                              "(SELECT count(*) FROM leases l WHERE l.artifact_id = a.artifact_id) FROM artifacts a "
                              "ORDER BY artifact_id",
                              MAX_ROWS, sizeof *l.artifacts, fill_artifact, clear_artifact, (void **)&l.artifacts,
                              &l.n_artifacts, err)) < 0 ||
         (r = lz_db_read_rows(c->db, "leases",
                              "SELECT artifact_id, domain_id, generation, created_ms FROM leases "
                              "ORDER BY artifact_id, domain_id, generation",
                              MAX_ROWS, sizeof *l.leases, fill_lease, NULL, (void **)&l.leases, &l.n_leases,
                              err)) < 0 ||
         (r = lz_db_read_rows(c->db, "prepares",
                              "SELECT tmp_name, artifact_id, owner, started_ms FROM prepares ORDER BY tmp_name",
                              MAX_ROWS, sizeof *l.prepares, fill_prepare, NULL, (void **)&l.prepares,
                              &l.n_prepares, err)) < 0)) {
        lz_catalog_clear(&l);
        return r;
    }
    *ret = l;
    return 0;
}

int lz_catalog_read(const char *data_root, struct lz_catalog *ret, struct lz_error *err) {
    struct cat c;
    int r = section_begin(data_root, 0, &c, err);
    if (r == 1) {
        *ret = (struct lz_catalog){ 0 };
        return 0;
    }
    if (r < 0)
        return r;
    struct lz_catalog l = { 0 }; /* load_all leaves it empty when it fails */
    r = section_end(&c, load_all(&c, &l, err), err);
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

static const struct lz_catalog_artifact *find_artifact(const struct lz_catalog *l, const char *id) {
    size_t lo = 0, hi = l->n_artifacts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->artifacts[mid].artifact_id, id);
        if (c == 0)
            return &l->artifacts[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct lz_catalog_prepare *find_prepare(const struct lz_catalog *l, const char *tmp) {
    for (size_t i = 0; i < l->n_prepares; i++)
        if (strcmp(l->prepares[i].tmp_name, tmp) == 0)
            return &l->prepares[i];
    return NULL;
}

/* Whether the recorded owner of a prepare intent is alive: 1 alive, 0 gone,
 * -errno when it cannot be told (then nothing may be deleted). */
static int owner_alive(const char *owner) {
    struct lz_procid id;
    if (lz_procid_parse(owner, &id) < 0)
        return -EBADMSG;
    int fd = lz_procid_open(&id);
    if (fd == -ESRCH)
        return 0;
    if (fd < 0)
        return fd;
    close(fd);
    return 1;
}

/* ---- prepare intent and publication ---- */

int lz_catalog_prepare_begin(const char *data_root, const char *tmp_name, const char *artifact_id,
                             struct lz_error *err) {
    if (!tmp_name_valid(tmp_name) || !hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepare intent");
    struct lz_procid self;
    int r = lz_procid_self(&self);
    if (r < 0)
        return lz_error_set(err, r, "cannot identify this process (pidfd): %s", strerror(-r));
    char owner[160];
    lz_procid_format(&self, owner, sizeof owner);
    struct cat c;
    if ((r = section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err)) < 0)
        return r;
    r = lz_db_run(c.db, err, "INSERT INTO prepares (tmp_name, artifact_id, owner, started_ms) VALUES (?, ?, ?, ?)", "ttti",
            tmp_name, artifact_id, owner, now_ms());
    return section_end(&c, r < 0 ? r : 0, err);
}

int lz_catalog_prepare_publish(const char *data_root, int prepared_fd, const char *tmp_name,
                               const char *artifact_id, struct lz_error *err) {
    if (!tmp_name_valid(tmp_name) || !hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared artifact publication");
    struct cat c;
    int r = section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r < 0)
        return r;
    struct row_artifact a;
    r = artifact_get(&c, artifact_id, &a, err);
    if (r == 1 && strcmp(a.state, "ready") != 0)
        r = reclaiming_error(artifact_id, err);
    if (r < 0)
        return section_end(&c, r, err);
    /* The metadata is read before the rename: a published name is only
     * ever given to a tree whose artifact.json names it. */
    struct lz_prepared_info info;
    r = lz_prepared_info_read(prepared_fd, tmp_name, artifact_id, &info);
    if (r < 0) {
        lz_error_set(err, r, "prepared tree %s is incomplete: %s", tmp_name, strerror(-r));
        return section_end(&c, r, err);
    }
    lz_prepared_info_clear(&info);
    int64_t now = now_ms();
    if (renameat2(prepared_fd, tmp_name, prepared_fd, artifact_id, RENAME_NOREPLACE) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
            r = lz_error_set(err, -errno, "cannot publish prepared artifact %s: %m", artifact_id);
            return section_end(&c, r, err);
        }
        /* Someone else published it first: theirs is as good as ours. */
        r = artifact_upsert(&c, prepared_fd, artifact_id, artifact_id, now, err);
        return section_end(&c, r < 0 ? r : 1, err);
    }
    if (fsync(prepared_fd) < 0) {
        r = lz_error_set(err, -errno, "cannot sync %s/prepared: %m", data_root);
    } else {
        r = artifact_upsert(&c, prepared_fd, artifact_id, artifact_id, now, err);
        if (r >= 0)
            r = lz_db_run(c.db, err, "DELETE FROM prepares WHERE tmp_name = ?", "t", tmp_name);
    }
    if (r < 0) {
        /* Not recorded: take the name back so the catalog and the tree agree. */
        if (renameat2(prepared_fd, artifact_id, prepared_fd, tmp_name, RENAME_NOREPLACE) == 0)
            fsync(prepared_fd);
        return section_end(&c, r, err);
    }
    return section_end(&c, 0, err);
}

int lz_catalog_prepare_forget(const char *data_root, const char *tmp_name, struct lz_error *err) {
    if (!tmp_name_valid(tmp_name))
        return lz_error_set(err, -EINVAL, "invalid prepare intent");
    struct lz_procid self;
    int r = lz_procid_self(&self);
    if (r < 0)
        return lz_error_set(err, r, "cannot identify this process (pidfd): %s", strerror(-r));
    char owner[160];
    lz_procid_format(&self, owner, sizeof owner);
    struct cat c;
    if ((r = section_begin(data_root, LZ_DB_WRITE, &c, err)) != 0)
        return r == 1 ? 0 : r;
    if (c.fresh)
        return section_end(&c, 0, err);
    r = lz_db_run(c.db, err, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", "tt", tmp_name, owner);
    return section_end(&c, r < 0 ? r : r > 0, err);
}

int lz_catalog_register(const char *data_root, const char *artifact_id, struct lz_error *err) {
    if (!hex64(artifact_id))
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID (expected 64 lowercase hex digits)");
    struct cat c;
    int r = section_begin(data_root, LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r < 0)
        return r;
    r = ensure_ready(&c, data_root, artifact_id, now_ms(), err);
    return section_end(&c, r < 0 ? r : 0, err);
}

/* ---- verify ---- */

static void reportf(void (*report)(void *, const char *, const char *), void *ud, const char *sev, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));
static void reportf(void (*report)(void *, const char *, const char *), void *ud, const char *sev, const char *fmt,
                    ...) {
    if (!report)
        return;
    char msg[LZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report(ud, sev, msg);
}

/* The names of prepared/ (without . and ..), sorted; at most MAX_ROWS. */
static int list_prepared(int pfd, char ***ret, size_t *ret_n) {
    int fd = dup(pfd);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = -errno;
        close(fd);
        return e;
    }
    rewinddir(d);
    char **v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n == MAX_ROWS) {
            r = -EFBIG;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = lz_xrealloc(v, cap * sizeof *v);
        }
        v[n++] = lz_xstrdup(de->d_name);
    }
    if (r == 0 && errno)
        r = -errno;
    closedir(d);
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static void names_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static bool name_listed(char *const *v, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], name) == 0)
            return true;
    return false;
}

struct integrity_report {
    void (*report)(void *ud, const char *severity, const char *msg);
    void *ud;
    const char *path;
};

static void integrity_bad(void *ud, const char *line) {
    struct integrity_report *ir = ud;
    reportf(ir->report, ir->ud, "error", "%s: integrity check: %s", ir->path, line);
}

int lz_catalog_verify(const char *data_root, void (*report)(void *ud, const char *severity, const char *msg),
                      void *ud, struct lz_error *err) {
    struct cat c;
    struct lz_catalog l = { 0 };
    int errors = 0;
    int r = section_begin(data_root, 0, &c, err);
    if (r < 0)
        return r;
    if (r == 1) {
        reportf(report, ud, "info", "%s/" LZ_CATALOG_FILE " does not exist yet (no lease was ever taken)",
                data_root);
    } else {
        struct integrity_report ir = { report, ud, c.db ? c.db->path : "" };
        if (!c.fresh && (r = lz_db_integrity(c.db, MAX_ROWS, integrity_bad, &ir, err)) > 0) {
            errors += r;
            r = 0;
        }
        if (r == 0)
            r = load_all(&c, &l, err);
        r = section_end(&c, r, err);
        if (r < 0) {
            lz_catalog_clear(&l);
            return r;
        }
    }

    _cleanup_close_ int pfd = open_prepared(data_root);
    char **names = NULL;
    size_t n_names = 0;
    if (pfd >= 0) {
        r = list_prepared(pfd, &names, &n_names);
        if (r < 0) {
            lz_catalog_clear(&l);
            return lz_error_set(err, r, "%s/prepared: %s", data_root, strerror(-r));
        }
    } else if (pfd != -ENOENT) {
        lz_catalog_clear(&l);
        return lz_error_set(err, pfd, "%s/prepared: %s", data_root, strerror(-pfd));
    }

    for (size_t i = 0; i < l.n_artifacts; i++) {
        const struct lz_catalog_artifact *a = &l.artifacts[i];
        if (strcmp(a->state, "ready") == 0) {
            struct lz_prepared_info info;
            r = pfd >= 0 ? lz_prepared_info_read(pfd, a->artifact_id, a->artifact_id, &info) : -ENOENT;
            if (r < 0) {
                reportf(report, ud, "error", "artifact %s is 'ready' but its tree is %s", a->artifact_id,
                        r == -ENOENT ? "missing" : "incomplete (artifact.json missing or not matching)");
                errors++;
            } else {
                if (strcmp(info.manifest_digest, a->manifest_digest) != 0) {
                    reportf(report, ud, "error", "artifact %s: manifest digest %s in the catalog, %s in artifact.json",
                            a->artifact_id, a->manifest_digest, info.manifest_digest);
                    errors++;
                }
                lz_prepared_info_clear(&info);
            }
        } else {
            reportf(report, ud, "warn", "artifact %s: reclaim was interrupted; `lazaret image gc` finishes it",
                    a->artifact_id);
            if (a->n_leases) {
                reportf(report, ud, "error", "artifact %s is being reclaimed but holds %zu lease(s)", a->artifact_id,
                        a->n_leases);
                errors++;
            }
        }
    }
    for (size_t i = 0; i < l.n_leases; i++)
        if (!find_artifact(&l, l.leases[i].artifact_id)) {
            reportf(report, ud, "error", "lease (%s, %s, %" PRId64 ") names an unknown artifact",
                    l.leases[i].artifact_id, l.leases[i].domain_id, l.leases[i].generation);
            errors++;
        }
    for (size_t i = 0; i < l.n_prepares; i++) {
        const struct lz_catalog_prepare *p = &l.prepares[i];
        int alive = owner_alive(p->owner);
        if (alive == 0)
            reportf(report, ud, "warn", "preparation %s of %s is abandoned (owner %s is gone); `lazaret image gc` "
                    "reclaims it", p->tmp_name, p->artifact_id, p->owner);
        else if (alive < 0)
            reportf(report, ud, "warn", "preparation %s: cannot tell whether its owner %s is alive: %s", p->tmp_name,
                    p->owner, strerror(-alive));
        else
            reportf(report, ud, "info", "preparation %s of %s is in progress", p->tmp_name, p->artifact_id);
    }
    for (size_t i = 0; i < n_names; i++) {
        const char *nm = names[i];
        char pn[128];
        printable(nm, pn, sizeof pn);
        if (hex64(nm)) {
            if (!find_artifact(&l, nm))
                reportf(report, ud, "info", "prepared/%s is not in the catalog (registered on next use or gc)", pn);
        } else if (strncmp(nm, ".tmp-", 5) == 0) {
            if (!find_prepare(&l, nm))
                reportf(report, ud, "info", "prepared/%s has no prepare intent (in progress, or left by an older "
                        "Lazaret); never deleted automatically", pn);
        } else if (strncmp(nm, ".reclaim-", 9) == 0 && hex64(nm + 9)) {
            const struct lz_catalog_artifact *a = find_artifact(&l, nm + 9);
            if (!a || strcmp(a->state, "reclaiming") != 0)
                reportf(report, ud, "info", "prepared/%s is not a reclaim recorded in the catalog", pn);
        } else {
            reportf(report, ud, "info", "prepared/%s is not a name Lazaret uses; left alone", pn);
        }
    }
    names_free(names, n_names);
    lz_catalog_clear(&l);
    return errors;
}

/* ---- gc ---- */

enum plan_kind {
    PLAN_ARTIFACT,  /* 'reclaiming' (now or before): rename, delete, drop the row */
    PLAN_ABANDONED, /* an abandoned .tmp-* tree: delete, drop the intent */
};

struct plan {
    enum plan_kind kind;
    char name[80];   /* artifact ID or tmp_name */
    char owner[160]; /* PLAN_ABANDONED: the dead owner */
    bool finish;     /* PLAN_ARTIFACT already 'reclaiming' when gc started: .reclaim-<id> is ours */
    uint64_t size;
    char reason[160];
};

struct event {
    enum lz_gc_action action;
    const char *kind;
    char *name;
    uint64_t size;
    char *reason;
};

struct gc {
    const char *data_root;
    bool dry_run;
    struct plan *plans;
    size_t n_plans, cap_plans;
    struct event *events;
    size_t n_events, cap_events;
    struct lz_gc_result res;
};

static void gc_event(struct gc *g, enum lz_gc_action action, const char *kind, const char *name, uint64_t size,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void gc_event(struct gc *g, enum lz_gc_action action, const char *kind, const char *name, uint64_t size,
                     const char *fmt, ...) {
    if (g->n_events == g->cap_events) {
        g->cap_events = g->cap_events ? g->cap_events * 2 : 16;
        g->events = lz_xrealloc(g->events, g->cap_events * sizeof *g->events);
    }
    char pn[128], reason[LZ_ERROR_MAX];
    printable(name, pn, sizeof pn);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    g->events[g->n_events++] =
        (struct event){ .action = action, .kind = kind, .name = lz_xstrdup(pn), .size = size, .reason = lz_xstrdup(reason) };
    switch (action) {
    case LZ_GC_RECLAIMED:
        g->res.n_reclaimed++;
        g->res.bytes_reclaimed += size;
        break;
    case LZ_GC_KEPT: g->res.n_kept++; break;
    case LZ_GC_FAILED: g->res.n_failed++; break;
    }
}

static struct plan *gc_plan(struct gc *g, enum plan_kind kind, const char *name, uint64_t size) {
    if (g->n_plans == g->cap_plans) {
        g->cap_plans = g->cap_plans ? g->cap_plans * 2 : 16;
        g->plans = lz_xrealloc(g->plans, g->cap_plans * sizeof *g->plans);
    }
    struct plan *p = &g->plans[g->n_plans++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->size = size;
    return p;
}

static void gc_done(struct gc *g) {
    for (size_t i = 0; i < g->n_events; i++) {
        free(g->events[i].name);
        free(g->events[i].reason);
    }
    free(g->events);
    free(g->plans);
}

/* In-memory view of one artifact during planning. */
struct cand {
    const char *id;
    bool ready, present, leased, chosen, blocked;
    uint64_t size;
    int64_t last_used_ms;
};

static int cmp_lru(const void *a, const void *b) {
    const struct cand *x = *(const struct cand *const *)a, *y = *(const struct cand *const *)b;
    if (x->last_used_ms != y->last_used_ms)
        return x->last_used_ms < y->last_used_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

static void human_days(int64_t ms, char *out, size_t size) {
    int64_t d = ms / DAY_MS, h = ms / 3600000;
    if (d >= 1)
        snprintf(out, size, "%" PRId64 " day%s", d, d == 1 ? "" : "s");
    else if (h >= 1)
        snprintf(out, size, "%" PRId64 " hour%s", h, h == 1 ? "" : "s");
    else
        snprintf(out, size, "less than an hour");
}

/* Section 1: look at prepared/ and the catalog under the lock; register
 * unknown published trees; mark the chosen artifacts 'reclaiming'; drop
 * rows that need no deleting. */
static int gc_plan_locked(struct gc *g, struct cat *c, int pfd, const struct lz_gc_policy *pol,
                          struct lz_error *err) {
    struct lz_catalog l = { 0 };
    char **names = NULL;
    size_t n_names = 0;
    struct cand *cands = NULL;
    struct cand **lru = NULL;
    int64_t now = now_ms();
    int r = load_all(c, &l, err);
    if (r < 0)
        return r;
    if (pfd >= 0 && (r = list_prepared(pfd, &names, &n_names)) < 0) {
        lz_error_set(err, r, "%s/prepared: %s", g->data_root, strerror(-r));
        goto out;
    }

    /* Published trees the catalog does not know yet are registered first:
     * they are Lazaret's (a 64-hex name is given only by publication). */
    size_t n_new = 0;
    char **new_ids = lz_xcalloc(n_names ? n_names : 1, sizeof *new_ids);
    struct lz_prepared_info *new_info = lz_xcalloc(n_names ? n_names : 1, sizeof *new_info);
    for (size_t i = 0; i < n_names; i++) {
        const char *nm = names[i];
        if (!hex64(nm) || find_artifact(&l, nm))
            continue;
        if (lz_prepared_info_read(pfd, nm, nm, &new_info[n_new]) < 0) {
            gc_event(g, LZ_GC_KEPT, "entry", nm, 0, "not a complete prepared artifact (no matching artifact.json); "
                     "left alone");
            continue;
        }
        new_ids[n_new++] = names[i];
    }
    size_t n_cands = l.n_artifacts + n_new;
    cands = lz_xcalloc(n_cands ? n_cands : 1, sizeof *cands);
    lru = lz_xcalloc(n_cands ? n_cands : 1, sizeof *lru);
    for (size_t i = 0; i < l.n_artifacts; i++) {
        const struct lz_catalog_artifact *a = &l.artifacts[i];
        cands[i] = (struct cand){ .id = a->artifact_id, .ready = strcmp(a->state, "ready") == 0,
                                  .present = name_listed(names, n_names, a->artifact_id), .leased = a->n_leases > 0,
                                  .size = a->size, .last_used_ms = a->last_used_ms };
    }
    for (size_t i = 0; i < n_new && r >= 0; i++) {
        cands[l.n_artifacts + i] = (struct cand){ .id = new_ids[i], .ready = true, .present = true,
                                                  .size = new_info[i].size, .last_used_ms = now };
        if (!g->dry_run)
            r = artifact_upsert(c, pfd, new_ids[i], new_ids[i], now, err);
    }
    /* A .reclaim-<id> that is not a recorded reclaim is not ours: the
     * artifact cannot be moved aside without touching it. */
    for (size_t i = 0; i < n_cands; i++) {
        char rec[80];
        (void)lz_snprintf(rec, sizeof rec, ".reclaim-%s", cands[i].id);
        cands[i].blocked = cands[i].ready && name_listed(names, n_names, rec);
    }
    for (size_t i = 0; i < n_new; i++)
        lz_prepared_info_clear(&new_info[i]);
    free(new_info);
    free(new_ids);
    if (r < 0)
        goto out;

    /* The other names under prepared/. */
    for (size_t i = 0; i < n_names; i++) {
        const char *nm = names[i];
        if (hex64(nm))
            continue;
        if (strncmp(nm, ".tmp-", 5) == 0) {
            const struct lz_catalog_prepare *p = find_prepare(&l, nm);
            if (!p) {
                gc_event(g, LZ_GC_KEPT, "entry", nm, 0, "preparation without a prepare intent (in progress, or "
                         "left by an older Lazaret); left alone");
                continue;
            }
            int alive = owner_alive(p->owner);
            if (alive > 0) {
                gc_event(g, LZ_GC_KEPT, "prepare", nm, 0, "preparation in progress (its owner is alive)");
            } else if (alive < 0) {
                gc_event(g, LZ_GC_KEPT, "prepare", nm, 0, "cannot tell whether its owner %s is alive (%s); left "
                         "alone", p->owner, strerror(-alive));
            } else {
                struct plan *pl = gc_plan(g, PLAN_ABANDONED, nm, 0);
                snprintf(pl->owner, sizeof pl->owner, "%s", p->owner);
                snprintf(pl->reason, sizeof pl->reason, "abandoned preparation of %.12s (its owner is gone)",
                         p->artifact_id);
            }
            continue;
        }
        if (strncmp(nm, ".reclaim-", 9) == 0 && hex64(nm + 9)) {
            const struct lz_catalog_artifact *a = find_artifact(&l, nm + 9);
            if (a && strcmp(a->state, "reclaiming") == 0)
                continue; /* finished with its row below */
            gc_event(g, LZ_GC_KEPT, "entry", nm, 0, "not a reclaim recorded in the catalog; left alone");
            continue;
        }
        gc_event(g, LZ_GC_KEPT, "entry", nm, 0, "not a name Lazaret uses; left alone");
    }

    /* Intents whose directory was never made (or is gone). */
    for (size_t i = 0; i < l.n_prepares; i++) {
        const struct lz_catalog_prepare *p = &l.prepares[i];
        if (name_listed(names, n_names, p->tmp_name) || owner_alive(p->owner) != 0)
            continue;
        if (!g->dry_run &&
            (r = lz_db_run(c->db, err, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", "tt", p->tmp_name, p->owner)) <
                0)
            goto out;
        gc_event(g, LZ_GC_RECLAIMED, "prepare", p->tmp_name, 0, "abandoned prepare intent without a tree");
    }

    /* Artifacts: interrupted reclaims, rows without trees, then the policy. */
    for (size_t i = 0; i < n_cands; i++) {
        struct cand *a = &cands[i];
        if (!a->ready) {
            struct plan *pl = gc_plan(g, PLAN_ARTIFACT, a->id, a->size);
            snprintf(pl->reason, sizeof pl->reason, "finishing an interrupted reclaim");
            pl->finish = true;
            a->chosen = true;
        } else if (!a->present) {
            a->chosen = true;
            if (a->leased) {
                gc_event(g, LZ_GC_KEPT, "artifact", a->id, a->size, "leased, but its tree is missing");
                continue;
            }
            if (!g->dry_run && (r = lz_db_run(c->db, err,
                                        "DELETE FROM artifacts WHERE artifact_id = ? AND state = 'ready' AND NOT "
                                        "EXISTS (SELECT 1 FROM leases WHERE artifact_id = ?)",
                                        "tt", a->id, a->id)) < 0)
                goto out;
            gc_event(g, LZ_GC_RECLAIMED, "artifact", a->id, 0, "its tree was already gone");
        }
    }
    int64_t keep_ms = pol->keep_days * DAY_MS;
    for (size_t i = 0; i < n_cands; i++) {
        struct cand *a = &cands[i];
        if (a->chosen || a->leased)
            continue;
        int64_t idle = now - a->last_used_ms;
        if (pol->keep_days != 0 && idle <= keep_ms)
            continue;
        a->chosen = true;
        if (a->blocked) {
            gc_event(g, LZ_GC_KEPT, "artifact", a->id, a->size, "prepared/.reclaim-%.12s... exists and is not a "
                     "recorded reclaim; move it away first", a->id);
            continue;
        }
        struct plan *pl = gc_plan(g, PLAN_ARTIFACT, a->id, a->size);
        char age[32];
        human_days(idle > 0 ? idle : 0, age, sizeof age);
        if (pol->keep_days == 0)
            snprintf(pl->reason, sizeof pl->reason, "unleased (prepared_keep_days = 0), unused for %s", age);
        else
            snprintf(pl->reason, sizeof pl->reason, "unused for %s (prepared_keep_days = %" PRId64 ")", age,
                     pol->keep_days);
    }
    if (pol->max_bytes) {
        uint64_t total = 0;
        size_t n_lru = 0;
        for (size_t i = 0; i < n_cands; i++)
            if (!cands[i].chosen) {
                total += cands[i].size;
                if (!cands[i].leased)
                    lru[n_lru++] = &cands[i];
            }
        qsort(lru, n_lru, sizeof *lru, cmp_lru);
        for (size_t i = 0; i < n_lru && total > pol->max_bytes; i++) {
            if (lru[i]->blocked) {
                gc_event(g, LZ_GC_KEPT, "artifact", lru[i]->id, lru[i]->size, "prepared/.reclaim-%.12s... exists "
                         "and is not a recorded reclaim; move it away first", lru[i]->id);
                continue;
            }
            struct plan *pl = gc_plan(g, PLAN_ARTIFACT, lru[i]->id, lru[i]->size);
            snprintf(pl->reason, sizeof pl->reason, "least recently used over prepared_max_bytes = %" PRIu64
                     " (prepared lowers total %" PRIu64 " bytes)", pol->max_bytes, total);
            lru[i]->chosen = true;
            total -= lru[i]->size;
        }
        if (total > pol->max_bytes)
            for (size_t i = 0; i < n_cands; i++)
                if (!cands[i].chosen && cands[i].leased)
                    gc_event(g, LZ_GC_KEPT, "artifact", cands[i].id, cands[i].size, "leased (in use), although "
                             "prepared lowers are over prepared_max_bytes");
    }

    /* The transition to 'reclaiming' happens only for an unleased artifact,
     * checked again in this very transaction. */
    for (size_t i = 0; i < g->n_plans && !g->dry_run; i++) {
        struct plan *pl = &g->plans[i];
        if (pl->kind != PLAN_ARTIFACT)
            continue;
        r = lz_db_run(c->db, err,
                "UPDATE artifacts SET state = 'reclaiming' WHERE artifact_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM leases WHERE artifact_id = ?)",
                "tt", pl->name, pl->name);
        if (r < 0)
            goto out;
        if (r == 0) {
            gc_event(g, LZ_GC_KEPT, "artifact", pl->name, pl->size, "leased meanwhile");
            pl->name[0] = '\0';
        }
    }
    r = 0;
out:
    free(lru);
    free(cands);
    names_free(names, n_names);
    lz_catalog_clear(&l);
    return r;
}

/* Deletes prepared/<name> beneath pfd: u+rwx is granted on each directory
 * first (a prepared tree has read-only and mode-0 directories), symlinks are
 * never followed and other filesystems never entered. */
static int remove_beneath(int pfd, const char *name) {
    return lz_prepare_remove_tree(pfd, name);
}

static int gc_reclaim_artifact(struct gc *g, int pfd, const struct plan *pl, struct lz_error *err) {
    char rec[80];
    (void)lz_snprintf(rec, sizeof rec, ".reclaim-%s", pl->name);
    struct stat st;
    int r;
    if (pfd >= 0 && fstatat(pfd, pl->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* A leftover .reclaim- of the same ID (ours: the row was already
         * 'reclaiming') would block the rename; any other one is not
         * ours and makes the rename fail. */
        r = pl->finish ? remove_beneath(pfd, rec) : 0;
        if (r == 0 && renameat2(pfd, pl->name, pfd, rec, RENAME_NOREPLACE) < 0)
            r = -errno;
        if (r < 0) {
            gc_event(g, LZ_GC_FAILED, "artifact", pl->name, pl->size, "cannot move it aside: %s", strerror(-r));
            if (pl->finish)
                return 0; /* stays 'reclaiming': the next gc retries */
            /* Untouched: usable again. */
            struct cat c;
            r = section_begin(g->data_root, LZ_DB_WRITE, &c, err);
            if (r == 0)
                r = section_end(&c, c.fresh ? 0 : lz_db_run(c.db, err, "UPDATE artifacts SET state = 'ready' WHERE "
                                                      "artifact_id = ? AND state = 'reclaiming'", "t", pl->name),
                                err);
            return r < 0 ? r : 0;
        }
        fsync(pfd);
    }
    if (pfd >= 0 && (r = remove_beneath(pfd, rec)) < 0) { /* ours: renamed above, or recorded */
        gc_event(g, LZ_GC_FAILED, "artifact", pl->name, pl->size, "cannot delete prepared/%s: %s (the next gc "
                 "retries)", rec, strerror(-r));
        return 0;
    }
    struct cat c;
    r = section_begin(g->data_root, LZ_DB_WRITE, &c, err);
    if (r == 0)
        r = section_end(&c, c.fresh ? 0 : lz_db_run(c.db, err, "DELETE FROM artifacts WHERE artifact_id = ? AND state = "
                                              "'reclaiming'", "t", pl->name), err);
    if (r < 0)
        return r;
    gc_event(g, LZ_GC_RECLAIMED, "artifact", pl->name, pl->size, "%s", pl->reason);
    return 0;
}

static int gc_reclaim_abandoned(struct gc *g, int pfd, const struct plan *pl, struct lz_error *err) {
    int r = remove_beneath(pfd, pl->name);
    if (r < 0) {
        gc_event(g, LZ_GC_FAILED, "prepare", pl->name, 0, "cannot delete prepared/%s: %s (the next gc retries)",
                 pl->name, strerror(-r));
        return 0;
    }
    struct cat c;
    r = section_begin(g->data_root, LZ_DB_WRITE, &c, err);
    if (r == 0)
        r = section_end(&c, c.fresh ? 0 : lz_db_run(c.db, err, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", "tt",
                                              pl->name, pl->owner), err);
    if (r < 0)
        return r;
    gc_event(g, LZ_GC_RECLAIMED, "prepare", pl->name, 0, "%s", pl->reason);
    return 0;
}

int lz_catalog_gc(const char *data_root, const struct lz_gc_policy *policy, bool dry_run,
                  void (*report)(void *ud, const struct lz_gc_event *ev), void *ud, struct lz_gc_result *ret,
                  struct lz_error *err) {
    if (!data_root || data_root[0] != '/')
        return lz_error_set(err, -EINVAL, "the Storage Root must be an absolute path");
    if (!policy || policy->keep_days < 0 || policy->keep_days > MAX_KEEP_DAYS)
        return lz_error_set(err, -EINVAL, "invalid gc policy: prepared_keep_days must be 0..%" PRId64,
                            MAX_KEEP_DAYS);
    struct gc g = { .data_root = data_root, .dry_run = dry_run };
    struct stat st;
    if (stat(data_root, &st) < 0) {
        if (errno != ENOENT)
            return lz_error_set(err, -errno, "%s: %m", data_root);
        if (ret)
            *ret = g.res; /* no Storage Root: nothing to reclaim */
        return 0;
    }
    _cleanup_close_ int gc_lock = -EBADF;
    if (!dry_run) {
        _cleanup_free_ char *p = lz_xasprintf("%s/" LZ_CATALOG_GC_LOCK_FILE, data_root);
        gc_lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (gc_lock < 0)
            return lz_error_set(err, -errno, "cannot open %s: %m", p);
        if (flock(gc_lock, LOCK_EX | LOCK_NB) < 0)
            return errno == EWOULDBLOCK
                       ? lz_error_set(err, -EBUSY, "another `lazaret image gc` is running on %s", data_root)
                       : lz_error_set(err, -errno, "cannot lock %s: %m", p);
    }
    _cleanup_close_ int pfd = open_prepared(data_root);
    if (pfd < 0 && pfd != -ENOENT)
        return lz_error_set(err, pfd, "%s/prepared: %s", data_root, strerror(-pfd));

    struct cat c;
    int r = section_begin(data_root, dry_run ? 0 : LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r == 1) { /* dry run without a catalog: plan against an empty one */
        c = (struct cat){ .lock_fd = -EBADF, .fresh = true };
        r = gc_plan_locked(&g, &c, pfd, policy, err);
    } else if (r == 0) {
        r = section_end(&c, gc_plan_locked(&g, &c, pfd, policy, err), err);
    }
    for (size_t i = 0; r >= 0 && i < g.n_plans; i++) {
        const struct plan *pl = &g.plans[i];
        if (!pl->name[0])
            continue;
        if (dry_run)
            gc_event(&g, LZ_GC_RECLAIMED, pl->kind == PLAN_ARTIFACT ? "artifact" : "prepare", pl->name, pl->size,
                     "%s", pl->reason);
        else if (pl->kind == PLAN_ARTIFACT)
            r = gc_reclaim_artifact(&g, pfd, pl, err);
        else
            r = gc_reclaim_abandoned(&g, pfd, pl, err);
    }
    for (size_t i = 0; report && i < g.n_events; i++) {
        const struct event *e = &g.events[i];
        struct lz_gc_event ev = { .action = e->action, .kind = e->kind, .name = e->name, .size = e->size,
                                  .reason = e->reason };
        report(ud, &ev);
    }
    if (r >= 0 && ret)
        *ret = g.res;
    gc_done(&g);
    return r < 0 ? r : 0;
}
