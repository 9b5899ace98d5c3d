/* db.c — the SQLite layer (see db.h). */
#include "db.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

int lz_db_errno(int rc) {
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
        return -EEXIST;
    switch (rc & 0xff) {
    case SQLITE_FULL: return -ENOSPC;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH: return -EACCES;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return -EBADMSG;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return -EBUSY;
    case SQLITE_CONSTRAINT: return -EINVAL;
    case SQLITE_CANTOPEN: return -ENOENT;
    case SQLITE_NOMEM: return -ENOMEM;
    default: return -EIO;
    }
}

int lz_db_error(struct lz_db *db, int rc, const char *what, struct lz_error *err) {
    return lz_error_set(err, lz_db_errno(rc), "%s %s: %s: %s", db->schema->name, db->path, what,
                        db->db ? sqlite3_errmsg(db->db) : sqlite3_errstr(rc));
}

int lz_db_exec(struct lz_db *db, const char *sql, struct lz_error *err) {
    int rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : lz_db_error(db, rc, sql, err);
}

/* ---- transactions ---- */

int lz_db_begin(struct lz_db *db, bool immediate, struct lz_error *err) {
    if (db->in_txn)
        return lz_error_set(err, -EBUSY, "%s %s: nested transaction", db->schema->name, db->path);
    int r = lz_db_exec(db, immediate ? "BEGIN IMMEDIATE" : "BEGIN", err);
    if (r == 0)
        db->in_txn = true;
    return r;
}

int lz_db_commit(struct lz_db *db, struct lz_error *err) {
    if (!db->in_txn)
        return lz_error_set(err, -EINVAL, "%s %s: commit without a transaction", db->schema->name, db->path);
    int r = lz_db_exec(db, "COMMIT", err);
    if (r < 0)
        lz_db_rollback(db);
    db->in_txn = false;
    return r;
}

void lz_db_rollback(struct lz_db *db) {
    if (db->in_txn)
        (void)sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    db->in_txn = false;
}

/* ---- statements ---- */

static int bind_va(sqlite3_stmt *q, const char *types, va_list ap) {
    for (int i = 0; types[i]; i++) {
        int rc;
        if (types[i] == 't') {
            const char *v = va_arg(ap, const char *);
            rc = v ? sqlite3_bind_text(q, i + 1, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, i + 1);
        } else {
            rc = sqlite3_bind_int64(q, i + 1, va_arg(ap, int64_t));
        }
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static int prepare_va(struct lz_db *db, sqlite3_stmt **ret, struct lz_error *err, const char *sql, const char *types,
                      va_list ap) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK && q && sqlite3_bind_parameter_count(q) != (int)strlen(types))
        return lz_db_finalize(db, &q,
                              lz_error_set(err, -EINVAL, "%s %s: %s: %d parameters, %zu values", db->schema->name,
                                           db->path, sql, sqlite3_bind_parameter_count(q), strlen(types)),
                              err);
    if (rc == SQLITE_OK)
        rc = bind_va(q, types, ap);
    if (rc != SQLITE_OK) {
        int r = lz_db_error(db, rc, sql, err);
        return lz_db_finalize(db, &q, r, err);
    }
    *ret = q;
    return 0;
}

int lz_db_prepare(struct lz_db *db, sqlite3_stmt **ret, struct lz_error *err, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    int r = prepare_va(db, ret, err, sql, types, ap);
    va_end(ap);
    return r;
}

int lz_db_step_row(struct lz_db *db, sqlite3_stmt *q, struct lz_error *err) {
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return lz_db_error(db, rc, sqlite3_sql(q), err);
}

int lz_db_step_done(struct lz_db *db, sqlite3_stmt *q, struct lz_error *err) {
    int r = lz_db_step_row(db, q, err);
    if (r > 0)
        return lz_error_set(err, -EIO, "%s %s: %s: a row where none was expected", db->schema->name, db->path,
                            sqlite3_sql(q));
    return r;
}

int lz_db_finalize(struct lz_db *db, sqlite3_stmt **q, int r, struct lz_error *err) {
    sqlite3_stmt *s = TAKE_PTR(*q);
    if (!s)
        return r;
    /* sqlite3_finalize repeats the last step's error, already reported. */
    int rc = sqlite3_finalize(s);
    if (r >= 0 && rc != SQLITE_OK)
        return lz_db_error(db, rc, "finalize", err);
    return r;
}

int lz_db_run(struct lz_db *db, struct lz_error *err, const char *sql, const char *types, ...) {
    sqlite3_stmt *q = NULL;
    va_list ap;
    va_start(ap, types);
    int r = prepare_va(db, &q, err, sql, types, ap);
    va_end(ap);
    if (r == 0)
        r = lz_db_step_done(db, q, err);
    r = lz_db_finalize(db, &q, r, err);
    return r < 0 ? r : sqlite3_changes(db->db);
}

static int get_first_va(struct lz_db *db, int64_t *ret_int, char **ret_text, struct lz_error *err, const char *sql,
                        const char *types, va_list ap) {
    sqlite3_stmt *q = NULL;
    int r = prepare_va(db, &q, err, sql, types, ap);
    if (r == 0 && (r = lz_db_step_row(db, q, err)) == 1) {
        if (ret_int)
            *ret_int = sqlite3_column_int64(q, 0);
        if (ret_text)
            *ret_text = lz_db_col_dup(q, 0, false);
    }
    return lz_db_finalize(db, &q, r, err);
}

int lz_db_get_int(struct lz_db *db, int64_t *ret, struct lz_error *err, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    int r = get_first_va(db, ret, NULL, err, sql, types, ap);
    va_end(ap);
    return r;
}

int lz_db_get_text(struct lz_db *db, char **ret, struct lz_error *err, const char *sql, const char *types, ...) {
    va_list ap;
    va_start(ap, types);
    char *t = NULL;
    int r = get_first_va(db, NULL, &t, err, sql, types, ap);
    va_end(ap);
    if (r == 1)
        *ret = t;
    else
        free(t);
    return r;
}

char *lz_db_col_dup(sqlite3_stmt *q, int i, bool empty_for_null) {
    const char *t = (const char *)sqlite3_column_text(q, i);
    return t || empty_for_null ? lz_xstrdup(t ? t : "") : NULL;
}

void lz_db_col_copy(sqlite3_stmt *q, int i, char *buf, size_t size) {
    const char *t = (const char *)sqlite3_column_text(q, i);
    snprintf(buf, size, "%s", t ? t : "");
}

int lz_db_read_rows(struct lz_db *db, const char *table, const char *sql, size_t max, size_t size,
                    void (*fill)(void *elem, sqlite3_stmt *q), void (*clear)(void *elem), void **ret, size_t *ret_n,
                    struct lz_error *err) {
    sqlite3_stmt *q = NULL;
    char *v = NULL;
    size_t n = 0, cap = 0;
    int r = lz_db_prepare(db, &q, err, sql, "");
    while (r == 0 && (r = lz_db_step_row(db, q, err)) == 1) {
        if (n == max) {
            r = lz_error_set(err, -EFBIG, "%s %s: more than %zu rows in %s", db->schema->name, db->path, max, table);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = lz_xrealloc(v, cap * size);
        }
        void *e = v + n++ * size;
        memset(e, 0, size);
        fill(e, q);
        r = 0;
    }
    r = lz_db_finalize(db, &q, r, err);
    if (r < 0) {
        for (size_t i = 0; clear && i < n; i++)
            clear(v + i * size);
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int lz_db_integrity(struct lz_db *db, size_t max, void (*bad)(void *ud, const char *line), void *ud,
                    struct lz_error *err) {
    sqlite3_stmt *q = NULL;
    int r = lz_db_prepare(db, &q, err, "PRAGMA integrity_check", "");
    int n = 0;
    while (r == 0 && (r = lz_db_step_row(db, q, err)) == 1) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        r = 0;
        if (t && strcmp(t, "ok") == 0)
            continue;
        if ((size_t)n < max)
            bad(ud, t ? t : "?");
        n++;
    }
    r = lz_db_finalize(db, &q, r, err);
    return r < 0 ? r : n;
}

/* ---- opening ---- */

static int unreadable(struct lz_db *db, int r, struct lz_error *err) {
    return lz_error_set(err, r, "the %s %s is not readable as SQLite: %s", db->schema->name, db->path,
                        sqlite3_errmsg(db->db));
}

/* 0 this store at this version, 1 an empty file, 2 this store at an older
 * version the schema upgrades (db->version), or the refusal. */
static int check_version(struct lz_db *db, struct lz_error *err) {
    const struct lz_db_schema *s = db->schema;
    struct lz_db_found f = { 0 };
    int r;
    if ((r = lz_db_get_int(db, &f.application_id, err, "PRAGMA application_id", "")) < 0 ||
        (r = lz_db_get_int(db, &f.version, err, "PRAGMA user_version", "")) < 0)
        return unreadable(db, r, err);
    if (f.application_id == s->application_id) {
        db->version = (int)f.version;
        if (f.version == s->version)
            return 0;
        if (s->upgrade && f.version >= 1 && f.version < s->version)
            return 2;
        return s->refuse(db->path, -EPROTONOSUPPORT, &f, err);
    }
    if (f.application_id != 0)
        return s->refuse(db->path, -EBADMSG, &f, err);
    if ((r = lz_db_get_int(db, &f.tables, err, "SELECT count(*) FROM sqlite_schema", "")) < 0)
        return r;
    if (f.version != 0 || f.tables != 0)
        return s->refuse(db->path, -EBADMSG, &f, err);
    return 1;
}

static int create_schema(struct lz_db *db, struct lz_error *err) {
    char v[96];
    (void)lz_snprintf(v, sizeof v, "PRAGMA application_id = %" PRId32 "; PRAGMA user_version = %d;",
                      db->schema->application_id, db->schema->version);
    int r;
    if ((r = lz_db_exec(db, db->schema->sql, err)) < 0 || (r = lz_db_exec(db, v, err)) < 0)
        return r;
    db->created = true;
    db->version = db->schema->version;
    return 0;
}

/* In the open write transaction: every step from db->version up, then the
 * version. A failure leaves the transaction to be rolled back by the
 * caller's close: the file keeps its old version and tables. */
static int upgrade_schema(struct lz_db *db, struct lz_error *err) {
    const struct lz_db_schema *s = db->schema;
    int from = db->version, r;
    for (int v = from; v < s->version; v++) {
        const char *sql = s->upgrade[v - 1];
        if (!sql)
            return lz_error_set(err, -EPROTONOSUPPORT, "%s %s: no upgrade from version %d", s->name, db->path, v);
        if ((r = lz_db_exec(db, sql, err)) < 0) {
            char what[LZ_ERROR_MAX];
            snprintf(what, sizeof what, "%s", err ? err->msg : "");
            return lz_error_set(err, r, "%s %s: upgrading from version %d to %d failed (the store is unchanged): %s",
                                s->name, db->path, v, v + 1, what);
        }
    }
    char q[64];
    (void)lz_snprintf(q, sizeof q, "PRAGMA user_version = %d;", s->version);
    if ((r = lz_db_exec(db, q, err)) < 0)
        return r;
    db->version = s->version;
    db->upgraded_from = from;
    return 0;
}

/* The file is a regular file reached without a symlink; a new one is made
 * here with the schema's mode (SQLite would use 0644 & ~umask, and its
 * journal copies the database's mode). */
static int check_file(const char *path, const struct lz_db_schema *s, unsigned flags, struct lz_error *err) {
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno != ENOENT || !(flags & LZ_DB_CREATE))
            return lz_error_set(err, -errno, "%s %s: %m", s->name, path);
    } else if (!S_ISREG(st.st_mode)) {
        return lz_error_set(err, -EINVAL, "%s is not a regular file; refusing to use it", path);
    }
    int mode = (flags & LZ_DB_READONLY) ? O_RDONLY : O_RDWR;
    _cleanup_close_ int fd = open(
        path, mode | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | ((flags & LZ_DB_CREATE) ? O_CREAT : 0), s->mode);
    if (fd < 0)
        return lz_error_set(err, -errno, "%s %s: %m", s->name, path);
    if (fstat(fd, &st) < 0)
        return lz_error_set(err, -errno, "%s %s: %m", s->name, path);
    if (!S_ISREG(st.st_mode))
        return lz_error_set(err, -EINVAL, "%s is not a regular file; refusing to use it", path);
    return 0;
}

/* An empty database file to WAL mode. The switch writes only the header,
 * through a rollback journal that synchronous=FULL would sync four times
 * (journal, directory, journal, file) on the start of every new Domain.
 * Nothing is lost without them: a crash in between leaves an empty
 * database again, created anew by the next open. What must be durable
 * before the first write-ahead commit is the header (SQLite deletes the
 * log of a database without one) and the file's directory entry: one
 * sync each. */
static int switch_to_wal(struct lz_db *db, struct lz_error *err) {
    int r = lz_db_exec(db, "PRAGMA synchronous = OFF; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;", err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(db->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    _cleanup_free_ char *dir = lz_xstrdup(db->path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    _cleanup_close_ int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0 || dfd < 0 || fsync(dfd) < 0)
        return lz_error_set(err, -errno, "%s %s: cannot sync the new file: %m", db->schema->name, db->path);
    return 0;
}

int lz_db_open(const char *path, const struct lz_db_schema *schema, unsigned flags, struct lz_db **ret,
               struct lz_error *err) {
    bool ro = flags & LZ_DB_READONLY;
    if (ro && (flags & (LZ_DB_WRITE | LZ_DB_CREATE)))
        return lz_error_set(err, -EINVAL, "%s %s: a read-only open cannot write", schema->name, path);
    int r = check_file(path, schema, flags, err);
    if (r < 0)
        return r;
    _cleanup_db_ struct lz_db *db = lz_xcalloc(1, sizeof *db);
    db->path = lz_xstrdup(path);
    db->schema = schema;
    int rc = sqlite3_open_v2(
        path, &db->db,
        (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE, NULL);
    if (rc != SQLITE_OK)
        return lz_db_error(db, rc, "open", err);
    /* Defensive: no writable_schema, no shadow-table writes, no schema
     * functions with side effects, whatever the file says. */
    if ((rc = sqlite3_db_config(db->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL)) != SQLITE_OK ||
        (rc = sqlite3_db_config(db->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL)) != SQLITE_OK ||
        (rc = sqlite3_busy_timeout(db->db, LZ_DB_BUSY_TIMEOUT_MS)) != SQLITE_OK)
        return lz_db_error(db, rc, "configure", err);
    /* Outside a transaction: both pragmas are no-ops inside one. */
    if ((r = lz_db_exec(db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;", err)) < 0)
        return unreadable(db, r, err); /* the first read of the file */
    for (int pass = 0;; pass++) {
        if ((r = lz_db_begin(db, pass > 0 || (flags & LZ_DB_WRITE), err)) < 0)
            return r;
        if ((r = check_version(db, err)) < 0)
            return r; /* rolled back by the close */
        if (r == 0)
            break;
        if (r == 2) {
            if (ro)
                break; /* read as it is: db->version says what it has */
            /* The upgrade writes: checked again under BEGIN IMMEDIATE, so
             * that no other writer upgrades (or writes) in between. */
            if (pass == 0 && !(flags & LZ_DB_WRITE)) {
                lz_db_rollback(db);
                continue;
            }
            if ((r = upgrade_schema(db, err)) < 0)
                return r;
            break;
        }
        if (!(flags & LZ_DB_CREATE)) {
            db->fresh = true;
            break;
        }
        /* journal_mode cannot change inside a transaction; the file is
         * checked again in the write transaction that creates the schema. */
        if (pass == 0 && (schema->wal || !(flags & LZ_DB_WRITE))) {
            lz_db_rollback(db);
            if (schema->wal && (r = switch_to_wal(db, err)) < 0)
                return r;
            continue;
        }
        if ((r = create_schema(db, err)) < 0)
            return r;
        break;
    }
    *ret = TAKE_PTR(db);
    return 0;
}

void lz_db_close(struct lz_db *db) {
    if (!db)
        return;
    lz_db_rollback(db);
    if (db->db)
        (void)sqlite3_close(db->db); /* every statement is finalized: SQLITE_OK */
    free(db->path);
    free(db);
}
