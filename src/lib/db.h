/* db.h — the one SQLite layer under the Domain Store (store.c) and the
 * Storage Catalog (catalog.c).
 *
 * Opening (lz_db_open) does, in this order, for both:
 *   - the file's identity: a regular file, never through a symlink
 *     (lstat, then O_NOFOLLOW; a new file is made by open() with the
 *     caller's mode, never by SQLite);
 *   - SQLITE_DBCONFIG_DEFENSIVE on, TRUSTED_SCHEMA off, extended result
 *     codes, a busy timeout, foreign_keys=ON and synchronous=FULL;
 *   - one transaction (BEGIN, or BEGIN IMMEDIATE with LZ_DB_WRITE), in which
 *     the store version (PRAGMA application_id and user_version) is checked
 *     before any row is read. Another version of this store is refused with
 *     -EPROTONOSUPPORT, a file that is not this store at all with -EBADMSG,
 *     both through the schema's refuse() so that each store keeps its own
 *     message, and nothing is written;
 *   - an empty file gets the schema (LZ_DB_CREATE) in that transaction, the
 *     version last; without LZ_DB_CREATE it stays empty and `fresh` says so;
 *   - a file of an older version that the schema can upgrade (`upgrade`) is
 *     upgraded in one BEGIN IMMEDIATE transaction: each step's SQL, then
 *     user_version = the schema's version, all or nothing (the store stays
 *     at its old version when any step fails). A newer version is refused
 *     as before. With LZ_DB_READONLY nothing is upgraded: an older
 *     upgradable file opens as it is and `version` says which it is, for the
 *     caller to read only what that version has.
 * lz_db_open returns with the transaction open: the caller reads or writes,
 * then lz_db_commit() or lz_db_rollback().
 *
 * Every sqlite3_prepare/bind/step/finalize result is checked; a failure
 * fills err with "<store> <path>: <what>: <SQLite's message>" and an errno
 * (lz_db_errno). Result sets are read with a row cap (lz_db_read_rows):
 * more rows than the cap is an error, never a silent truncation.
 */
#pragma once

#include <sqlite3.h>

#include "util.h"

#define LZ_DB_BUSY_TIMEOUT_MS 5000

struct lz_db_found {
    int64_t application_id, version, tables;
};

struct lz_db_schema {
    const char *name; /* "Domain Store", "Storage Catalog": the start of every message */
    int32_t application_id;
    int version;
    const char *sql; /* the tables of a new file */
    bool wal;        /* journal_mode=WAL, set when the file is created */
    mode_t mode;     /* of a new file (less the umask) */
    /* Fills err for a file that is not this store at this version and
     * returns code: -EPROTONOSUPPORT (this store, another version) or
     * -EBADMSG (not this store). */
    int (*refuse)(const char *path, int code, const struct lz_db_found *found, struct lz_error *err);
    /* upgrade[v - 1] takes a file of version v to v + 1 (v = 1 ..
     * version - 1); NULL when no older version is accepted. */
    const char *const *upgrade;
};

enum {
    LZ_DB_WRITE = 1u << 0,  /* the open transaction is BEGIN IMMEDIATE */
    LZ_DB_CREATE = 1u << 1, /* create the file and give an empty one the schema */
    /* SQLITE_OPEN_READONLY, the file opened O_RDONLY: for readers that do
     * not hold the store's lock (a running Domain's WAL store is read
     * without blocking its writer). Not with LZ_DB_WRITE or LZ_DB_CREATE. */
    LZ_DB_READONLY = 1u << 2,
};

struct lz_db {
    sqlite3 *db;
    char *path;
    const struct lz_db_schema *schema;
    bool in_txn;
    bool fresh;        /* empty file, no schema (only without LZ_DB_CREATE): reads as empty */
    bool created;      /* the schema was created by this open (in the open transaction) */
    int version;       /* of the file as it is now (< schema->version only read-only) */
    int upgraded_from; /* the version this open upgraded from, or 0 */
};

/* -ENOENT (err set) when path is absent and !LZ_DB_CREATE. */
int lz_db_open(const char *path, const struct lz_db_schema *schema, unsigned flags, struct lz_db **ret,
               struct lz_error *err);
/* Rolls back an open transaction, closes. NULL is fine. */
void lz_db_close(struct lz_db *db);
static inline void lz_db_closep(struct lz_db **db) { lz_db_close(*db); }
#define _cleanup_db_ _cleanup_(lz_db_closep)

/* The errno of an SQLite (extended) result code: -EEXIST for a primary
 * key or unique conflict, -ENOSPC, -EACCES, -EBADMSG (corrupt), -EBUSY,
 * -EINVAL (other constraints), -ENOENT, -ENOMEM, else -EIO. */
int lz_db_errno(int rc);
/* Fills err for the failed SQLite call rc and returns its errno. */
int lz_db_error(struct lz_db *db, int rc, const char *what, struct lz_error *err);

/* ---- transactions ---- */
int lz_db_begin(struct lz_db *db, bool immediate, struct lz_error *err);
/* On failure the transaction is rolled back. */
int lz_db_commit(struct lz_db *db, struct lz_error *err);
/* Nothing to report: the transaction is gone either way (a failed ROLLBACK
 * leaves SQLite to roll back when the connection closes). */
void lz_db_rollback(struct lz_db *db);

/* ---- statements ----
 * types: one letter per ?N parameter: 't' text (const char *, NULL binds
 * NULL), 'i' int64_t. */
int lz_db_exec(struct lz_db *db, const char *sql, struct lz_error *err);
int lz_db_prepare(struct lz_db *db, sqlite3_stmt **ret, struct lz_error *err, const char *sql, const char *types, ...);
/* 1 with a row, 0 when done, or -errno. */
int lz_db_step_row(struct lz_db *db, sqlite3_stmt *q, struct lz_error *err);
/* 0 when the statement ran to its end without a row, or -errno. */
int lz_db_step_done(struct lz_db *db, sqlite3_stmt *q, struct lz_error *err);
/* Finalizes *q (NULL is fine) and returns r, or the finalize error when
 * r >= 0 and finalizing failed. */
int lz_db_finalize(struct lz_db *db, sqlite3_stmt **q, int r, struct lz_error *err);
/* Runs one statement without result rows; returns the number of rows it
 * changed (>= 0) or -errno. */
int lz_db_run(struct lz_db *db, struct lz_error *err, const char *sql, const char *types, ...);
/* The first column of the first row: 1 with *ret set, 0 when no row. */
int lz_db_get_int(struct lz_db *db, int64_t *ret, struct lz_error *err, const char *sql, const char *types, ...);
/* Text (NULL stays NULL), malloc'd. */
int lz_db_get_text(struct lz_db *db, char **ret, struct lz_error *err, const char *sql, const char *types, ...);

/* Reads every row of sql (no parameters) into a growing array of elements
 * of `size` bytes, each zeroed and then filled by fill(). More than max
 * rows is -EFBIG ("<store> <path>: more than <max> rows in <table>"). On
 * failure *ret is freed with clear(elem) called on each filled element. */
int lz_db_read_rows(struct lz_db *db, const char *table, const char *sql, size_t max, size_t size,
                    void (*fill)(void *elem, sqlite3_stmt *q), void (*clear)(void *elem), void **ret, size_t *ret_n,
                    struct lz_error *err);

/* The text of column i, malloc'd; NULL when it is NULL (or "" with
 * empty_for_null). */
char *lz_db_col_dup(sqlite3_stmt *q, int i, bool empty_for_null);
/* The text of column i into buf ("" for NULL), truncated to fit. */
void lz_db_col_copy(sqlite3_stmt *q, int i, char *buf, size_t size);

/* PRAGMA integrity_check: calls bad(ud, line) for each line that is not
 * "ok" (at most max) and returns how many there were, or -errno. */
int lz_db_integrity(struct lz_db *db, size_t max, void (*bad)(void *ud, const char *line), void *ud,
                    struct lz_error *err);
