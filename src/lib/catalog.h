/* catalog.h — the Storage Catalog: leases on prepared artifacts, durable
 * prepare intents, and product GC of prepared lowers (FR-17, FR-21, OR-6,
 * OR-7).
 *
 * Files (data_root is the canonical Storage Root, see image.h):
 *
 *   <data_root>/catalog.db            SQLite 3 database, mode 0600, default
 *                                     rollback journal, synchronous=FULL
 *   <data_root>/storage-catalog.lock  host-wide flock of the catalog
 *   <data_root>/storage-gc.lock       serialises `lazaret image gc` runs
 *
 * Bounded sections: every catalog operation below is one section — flock
 * storage-catalog.lock (at most LZ_CATALOG_LOCK_TIMEOUT_S seconds, then
 * -ETIMEDOUT "the Storage Catalog is locked by another process for over
 * 30 s"), open catalog.db, check its store version, one transaction, close,
 * unlock. There is no daemon and no long-lived open; several Domain
 * coordinators share the catalog through the lock alone.
 *
 * Store version: PRAGMA application_id must be LZ_CATALOG_APPLICATION_ID
 * and PRAGMA user_version LZ_CATALOG_VERSION. This is checked before any
 * row is read; a database with another version or a foreign application_id
 * is refused (-EPROTONOSUPPORT for another version of the catalog, the one
 * code of an unknown store version, as in store.h; -EBADMSG for a file that
 * is not a catalog; the message names the file and the version) and
 * nothing is written. An empty (new) database gets the schema in the first
 * write section.
 *
 * Records:
 *   artifacts(artifact_id, state 'ready'|'reclaiming', source_ref,
 *             manifest_digest, size, created_ms, last_used_ms)
 *   leases(artifact_id -> artifacts, domain_id, generation, created_ms)
 *             the exact (prepared-artifact ID, Domain ID, generation) lease
 *   prepares(tmp_name, artifact_id, owner, started_ms)
 *             a preparation in progress in <data_root>/prepared/<tmp_name>,
 *             owner = lz_procid_format() of the preparing process
 * Times are wall-clock milliseconds since the Unix epoch.
 *
 * Reclaim protocol (lz_catalog_gc): in one section, an unleased 'ready'
 * artifact chosen by the policy becomes 'reclaiming'; outside the lock its
 * tree is renamed to prepared/.reclaim-<id> and deleted; one more section
 * deletes the 'reclaiming' row. A 'reclaiming' artifact refuses leases,
 * registration and publication (-ESTALE), so nothing can start using a tree
 * that is being deleted. A 'reclaiming' row left by a crash is finished by
 * the next gc. gc runs are serialised by storage-gc.lock (a second one fails
 * with -EBUSY), so a 'reclaiming' row or an abandoned prepare seen by gc is
 * never being worked on by another gc.
 */
#pragma once

#include "util.h"

#define LZ_CATALOG_FILE "catalog.db"
#define LZ_CATALOG_LOCK_FILE "storage-catalog.lock"
#define LZ_CATALOG_GC_LOCK_FILE "storage-gc.lock"
#define LZ_CATALOG_APPLICATION_ID 0x4c7a4354 /* "LzCT" */
#define LZ_CATALOG_VERSION 1
#define LZ_CATALOG_LOCK_TIMEOUT_S 30

struct lz_catalog_lease {
    char artifact_id[65];
    char domain_id[65];
    int64_t generation;
    int64_t created_ms;
};

struct lz_catalog_artifact {
    char artifact_id[65];
    char *state; /* "ready" or "reclaiming" */
    char *source_ref;
    char *manifest_digest;
    uint64_t size; /* bytes on disk, from artifact.json */
    int64_t created_ms, last_used_ms;
    size_t n_leases;
};

struct lz_catalog_prepare {
    char tmp_name[64];
    char artifact_id[65];
    char owner[160];
    int64_t started_ms;
};

struct lz_catalog {
    struct lz_catalog_artifact *artifacts; /* sorted by artifact_id */
    size_t n_artifacts;
    struct lz_catalog_lease *leases; /* sorted by artifact, domain, generation */
    size_t n_leases;
    struct lz_catalog_prepare *prepares; /* sorted by tmp_name */
    size_t n_prepares;
};

/* ---- leases (the Host Coordinator) ---- */

/* Inserts exactly the (artifact, domain, generation) lease in one catalog
 * transaction. Registers the artifact ('ready', metadata from
 * <data_root>/prepared/<id>/artifact.json) if the catalog does not know it
 * yet but the published tree exists. Refuses with -ESTALE if the artifact is
 * 'reclaiming' or its tree is missing or incomplete. Updates last_used_ms.
 * Idempotent: 0 also when that exact lease already exists. */
int lz_catalog_lease_acquire(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                             struct lz_error *err);
/* Removes only that exact lease. Returns 1 removed, 0 it was absent.
 * Updates last_used_ms of a known artifact. */
int lz_catalog_lease_release(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                             struct lz_error *err);
/* 1 if exactly that lease exists, 0 if not (a missing catalog holds none). */
int lz_catalog_lease_held(const char *data_root, const char *artifact_id, const char *domain_id, int64_t generation,
                          struct lz_error *err);

/* ---- inspection ---- */

/* Snapshot of the whole catalog (one read transaction). A missing
 * catalog.db reads as empty without creating it. Free with
 * lz_catalog_clear. */
int lz_catalog_read(const char *data_root, struct lz_catalog *ret, struct lz_error *err);
void lz_catalog_clear(struct lz_catalog *c);

/* Structural check, never repairs: the catalog is readable, its version is
 * supported and PRAGMA integrity_check says ok; every 'ready' artifact has
 * its tree with a matching artifact.json; every lease names a known, 'ready'
 * artifact; prepare intents whose owner is gone are reported as abandoned
 * (warn); prepared/ entries the catalog does not know are reported (info).
 * Calls report(ud, "error"|"warn"|"info", message) per finding. Returns the
 * number of errors (>= 0) or -errno when the check itself could not run. */
int lz_catalog_verify(const char *data_root, void (*report)(void *ud, const char *severity, const char *msg), void *ud,
                      struct lz_error *err);

/* ---- prepare intent and publication (image.c) ---- */

/* Records the durable intent to prepare artifact_id in
 * <data_root>/prepared/<tmp_name> (tmp_name ".tmp-*", no '/'), owned by the
 * calling process. Called before the directory is created. -EEXIST when
 * that tmp_name is already recorded. */
int lz_catalog_prepare_begin(const char *data_root, const char *tmp_name, const char *artifact_id,
                             struct lz_error *err);
/* Publishes a complete preparation: under the catalog lock, renames
 * prepared/<tmp_name> to prepared/<artifact_id> (RENAME_NOREPLACE, beneath
 * prepared_fd), records the artifact 'ready' with the metadata of its
 * artifact.json and deletes the prepare intent, in one transaction.
 * Returns 0 when published; 1 when <artifact_id> was already published by
 * someone else (registered if needed, last_used_ms updated; the tmp tree
 * and the intent are left to the caller); -ESTALE when the artifact is
 * being reclaimed (nothing renamed); other -errno on error. */
int lz_catalog_prepare_publish(const char *data_root, int prepared_fd, const char *tmp_name, const char *artifact_id,
                               struct lz_error *err);
/* Deletes the prepare intent tmp_name of the calling process, after the
 * creator deleted its tree (failure or lost publication race). 1 removed,
 * 0 absent. */
int lz_catalog_prepare_forget(const char *data_root, const char *tmp_name, struct lz_error *err);

/* Registers a published artifact the catalog may not know yet ('ready',
 * metadata from its artifact.json) and updates its last_used_ms; no lease.
 * -ESTALE when it is 'reclaiming' or its tree is missing or incomplete. */
int lz_catalog_register(const char *data_root, const char *artifact_id, struct lz_error *err);
/* Read-only: 1 when the catalog knows the artifact as 'ready', 0 when not
 * (no catalog, no row, or another state), -errno on error. Nothing is
 * written, so nothing is synced: the lookup of an image used before, whose
 * lease (lz_catalog_lease_acquire) checks it again and updates last_used_ms. */
int lz_catalog_known_ready(const char *data_root, const char *artifact_id, struct lz_error *err);

/* ---- product GC (`lazaret image gc`) ---- */

struct lz_gc_policy {
    int64_t keep_days;  /* unleased and unused for more than this many days; 0 = every unleased artifact */
    uint64_t max_bytes; /* 0 = no budget; else reclaim least recently used unleased ones until under it */
};

enum lz_gc_action {
    LZ_GC_RECLAIMED, /* removed (or, with dry_run, would be) */
    LZ_GC_KEPT,      /* left in place, with the reason (in progress, foreign, leased over budget) */
    LZ_GC_FAILED,    /* could not be removed; the reason says why */
};

struct lz_gc_event {
    enum lz_gc_action action;
    const char *kind;   /* "artifact", "prepare" (an abandoned preparation), "entry" (a prepared/ name) */
    const char *name;   /* artifact ID, or the name under prepared/ */
    uint64_t size;      /* bytes (artifact.json size for artifacts, 0 when unknown) */
    const char *reason; /* one line */
};

struct lz_gc_result {
    size_t n_reclaimed;
    uint64_t bytes_reclaimed;
    size_t n_kept;
    size_t n_failed;
};

/* Reclaims unleased prepared artifacts per policy, finishes interrupted
 * reclaims, and reclaims abandoned preparations (a .tmp-* whose prepare
 * intent's owner is gone). Never deletes a leased artifact, a preparation
 * whose owner is alive, a .tmp-* without an intent, or any other name it
 * does not own; those are reported (LZ_GC_KEPT) and left. A published tree
 * the catalog does not know yet is registered first (last used: now).
 * With dry_run nothing is changed (not even catalog.db created) and the
 * events say what would be reclaimed. report may be NULL. Returns 0 (see
 * ret for the counts; failures to delete one tree are events, not errors)
 * or -errno (-EBUSY: another gc is running). */
int lz_catalog_gc(const char *data_root, const struct lz_gc_policy *policy, bool dry_run,
                  void (*report)(void *ud, const struct lz_gc_event *ev), void *ud, struct lz_gc_result *ret,
                  struct lz_error *err);
