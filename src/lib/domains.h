/* domains.h — the Domain Roots of a Storage Root: listing, inspection,
 * structural verification and reset (the library side of `lazaret state`).
 *
 * Paths (SR-11, SR-14)
 * --------------------
 * Only <data_root>/domains/<ID> is ever touched, where data_root is the
 * canonical Storage Root of the loaded configuration and ID exactly 64
 * lowercase hex characters. Everything inside a Domain Root is reached
 * relative to a directory fd opened with O_NOFOLLOW: no symlink is followed
 * and no walk crosses into another filesystem. A Domain Root that is itself
 * a symlink or not a directory is reported, never entered.
 *
 * Locking
 * -------
 * A Domain is active while its Host Coordinator holds the flock on
 * <domain_dir>/lock. Every function here takes that flock with LOCK_NB
 * before it opens the Domain Store and keeps it until the store is closed.
 * When the flock is held by someone else the Domain is "running": its store
 * is not opened and nothing of it is written; what is shown then comes from
 * the directory itself (size) and from the first line of coordinator.log,
 * accepted only when re-deriving the Domain ID from the profile and
 * workspace it names gives this very ID.
 *
 * Reset
 * -----
 * lz_domain_reset() replaces the State Anchor anchor-<N> (meta anchor_gen N)
 * by a new empty anchor-<N+1>, crash-safely:
 *   0. recover interrupted generations (recovery.h); finish a pending reset
 *      (meta reset_intent) and delete every anchor-<M> other than anchor-<N>
 *   1. mkdir anchor-<N+1> (0700), fsync the Domain Root
 *   2. one store transaction: anchor_gen = N+1, reset_intent = "anchor-<N>"
 *   3. delete anchor-<N>
 *   4. delete reset_intent; empty overlay/ (runsc scratch, not state)
 * A crash before 2 leaves the old State Anchor in use and an empty
 * anchor-<N+1> that verify reports and the next reset deletes; a crash after
 * 2 leaves the new empty one in use and the intent that the next reset
 * finishes. Content owned by the Domain's subordinate IDs (files a non-root
 * sandbox user created) is deleted from inside a user namespace with the
 * Domain's own ID mapping, never with more privilege than the sandbox had.
 */
#pragma once

#include "catalog.h"
#include "recovery.h"
#include "store.h"
#include "util.h"

#define LZ_DOMAIN_ID_HEX 64
#define LZ_DOMAIN_PREFIX_MIN 4

/* 64 lowercase hex characters. */
bool lz_domain_id_valid(const char *s);

/* ---- listing ---- */

struct lz_domain_summary {
    char id[LZ_DOMAIN_ID_HEX + 1];
    bool running;         /* the Domain flock is held by another process */
    bool has_store;       /* the Domain Store was read */
    char *profile;        /* NULL when unknown */
    char *workspace;      /* NULL when unknown */
    int64_t last_used_ms; /* wall clock; 0 when unknown (or running) */
    uint64_t size;        /* bytes allocated by the Domain Root (st_blocks * 512) */
    bool size_partial;    /* some directory could not be read */
    char *problem;        /* why the store could not be read, or NULL */
};

struct lz_domain_list {
    struct lz_domain_summary *v; /* running first, then last use descending, then ID */
    size_t n;
    char **strays; /* names under domains/ that are not Domain Roots (sorted) */
    size_t n_strays;
};

/* Every Domain Root under <data_root>/domains. A missing domains/ is an
 * empty list. */
int lz_domains_list(const char *data_root, struct lz_domain_list *ret, struct lz_error *err);
void lz_domain_list_clear(struct lz_domain_list *l);
/* For a zero-initialised struct lz_domain_list. */
#define _cleanup_domain_list_ _cleanup_(lz_domain_list_clear)

/* Resolves a DOMAIN argument: a full ID or a unique prefix of at least
 * LZ_DOMAIN_PREFIX_MIN hex characters (case-insensitive). -ENOENT unknown,
 * -EINVAL malformed, -EEXIST ambiguous (the message lists the candidates). */
int lz_domains_resolve(const char *data_root, const char *arg, char ret_id[static LZ_DOMAIN_ID_HEX + 1],
                       struct lz_error *err);

/* ---- inspection ---- */

struct lz_domain_pdir {
    char *path;   /* sandbox path ("/root"), or the name beneath upper/ */
    bool present; /* the upper directory exists */
    uint64_t size;
};

struct lz_domain_info {
    char id[LZ_DOMAIN_ID_HEX + 1];
    bool running;
    char *profile, *workspace; /* NULL when unknown */
    uint64_t size;
    bool has_store;
    struct lz_store_snapshot snap; /* valid when has_store */
    int *proc_alive;               /* per snap.procs[i]: 1 alive, 0 gone, -errno unknown */
    int *session_alive;            /* per snap.sessions[i]'s exec client, likewise */
    bool anchor_present;           /* anchor-<anchor_gen> exists */
    uint64_t anchor_size;
    bool ignored_present; /* ignored/: the Ignored Workspace State */
    uint64_t ignored_size;
    struct lz_domain_pdir *pdirs;
    size_t n_pdirs;
    bool pdirs_from_config;          /* the profile's persistent_dirs (else: what upper/ holds) */
    struct lz_catalog_lease *leases; /* of this Domain */
    size_t n_leases;
};

/* Reads what is known of one Domain. config_path (may be NULL) is used to
 * load the Domain's own profile for its persistent_dirs; when that fails the
 * top-level entries of the anchor's upper/ are shown instead. A running
 * Domain is not an error (info->running). */
int lz_domain_inspect(const char *data_root, const char *config_path, const char *id, struct lz_domain_info *ret,
                      struct lz_error *err);
void lz_domain_info_clear(struct lz_domain_info *i);
/* For a zero-initialised struct lz_domain_info. */
#define _cleanup_domain_info_ _cleanup_(lz_domain_info_clear)

/* ---- verification (never repairs) ---- */

/* severity: "error", "warn" or "info" (as lz_catalog_verify); domain_id
 * NULL for findings about the Storage Root itself. */
typedef void (*lz_domain_report_fn)(void *ud, const char *domain_id, const char *severity, const char *msg);

struct lz_domain_verdict {
    char id[LZ_DOMAIN_ID_HEX + 1];
    bool running;              /* not verified */
    char *profile, *workspace; /* NULL when unknown */
    size_t n_errors, n_warnings;
};

struct lz_verify_result {
    struct lz_domain_verdict *v; /* in the order checked */
    size_t n;
    size_t n_errors, n_warnings; /* over everything, catalog included */
};

/* Checks the given Domains (n_ids 0: every Domain Root and every catalog
 * lease naming a Domain that has none), then the Storage Catalog once.
 * Returns 0 (errors are findings: see ret->n_errors) or -errno when the
 * check itself could not run. */
int lz_domains_verify(const char *data_root, const char *config_path, const char *const *ids, size_t n_ids,
                      lz_domain_report_fn report, void *ud, struct lz_verify_result *ret, struct lz_error *err);
void lz_verify_result_clear(struct lz_verify_result *r);
/* For a zero-initialised struct lz_verify_result. */
#define _cleanup_verify_result_ _cleanup_(lz_verify_result_clear)

/* ---- reset ---- */

typedef lz_recovery_log_fn lz_domain_log_fn;

/* See the contract above. -EBUSY when the Domain is running. log (may be
 * NULL) receives one line per step taken. */
int lz_domain_reset(const char *data_root, const char *id, lz_domain_log_fn log, void *ud, struct lz_error *err);
/* Deletes only the Domain's Ignored Workspace State (`ignored/`: the
 * git-ignored files the sandbox made, and the accepted ignore rules), as
 * lz_domain_reset does too, with the same locking. */
int lz_domain_reset_ignored(const char *data_root, const char *id, lz_domain_log_fn log, void *ud,
                            struct lz_error *err);
/* A running Domain whose coordinator answers and does not linger: it has
 * sessions (or is starting one), and lz_domain_reset refuses it. A Domain
 * without a socket (starting, or stopping), one that lingers (no session
 * left) and one whose coordinator ends while asked are not: the reset
 * waits for them or stops them. Only a hint for choosing (the answer may
 * change a moment later); the coordinator decides again when the reset
 * asks it to stop. */
bool lz_domain_serving(const char *id);

/* Opens the Domain Store of Domain `id` (a validated ID) under data_root
 * read-only, without the Domain flock: the coordinator of a running Domain
 * holds it, and a WAL reader needs none. The stored identity must still
 * equal `id` (SR-11). -ENOENT when the Domain or its store does not exist. */
int lz_domain_store_open_readonly(const char *data_root, const char *id, struct lz_store **ret, struct lz_error *err);

/* The child side of the deletion in the Domain's user namespace
 * (`lazaret state __rm-tree`): deletes `name` beneath dirfd. */
int lz_domain_rm_tree_child(int dirfd, const char *name);
