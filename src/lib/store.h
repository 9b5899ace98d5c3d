/* store.h — the Domain Store: the durable record of one Domain.
 *
 * One SQLite database per Domain Root, <domain_dir>/domain.db, opened only
 * by the process holding the Domain flock (<domain_dir>/lock): the Host
 * Coordinator, or a `lazaret state` command acting on an inactive Domain.
 * The store version (PRAGMA application_id and user_version) is checked
 * before any row is read; an unknown version is refused (-EPROTONOSUPPORT,
 * the one code of an unknown store version, as the Storage Catalog's; a
 * file that is not a Domain Store: -EBADMSG) and nothing is written. The
 * SQLite layer is db.h (defensive mode, checked statements, row caps). The stored Domain identity (ID, profile,
 * workspace) must equal the caller's before anything is reused (SR-11).
 *
 * Records (STRICT tables):
 *   meta          domain_id, profile, workspace, created_ms, last_used_ms,
 *                 anchor_gen (the current State Anchor directory,
 *                 <domain_dir>/anchor-<N>), reset intent
 *   generations   one row per generation: state starting|running|stopping|
 *                 clean|failed, the Configuration Fingerprint, the owning
 *                 coordinator's pidfs identity, times
 *   participants  (generation, role): role prepared_lower|state_anchor|
 *                 git_routing|network|helper|sandbox|publication, state
 *                 intent|lease_held|prepared|committed|release_intent|clean,
 *                 and the physical evidence: artifact_id, mount identity,
 *                 free-form evidence (e.g. the network readiness
 *                 fingerprint)
 *   processes     (generation, role, slot): phase staged|committed and the
 *                 pidfs identity (procid.h); cleared when the role is clean
 *   sessions      (generation, session): the Session Terminals, state
 *                 intent|running|release_intent|clean, the command, and the
 *                 exec client's slot (unassigned|staged|committed + pidfs
 *                 identity), cleared when clean
 *   audit         (version 2) the escalation audit: one append-only,
 *                 hash-chained row per request and its end state (audit.h);
 *                 its chain head is meta audit_head
 *
 * Every change is one transaction (write-ahead log, synchronous=FULL: one
 * fsync per commit, durable across a crash of any process and of the
 * machine): intent is committed
 * before the physical step it announces, and clean only after absence is
 * proven (see docs/state.md for the acquisition and release orders).
 * Several changes that must land together go inside lz_store_begin() /
 * lz_store_commit().
 */
#pragma once

/* The steps this store records pass crash points between intent and
 * evidence; their callers get lz_crash_point from here. */
#include "crashpoint.h"
#include "procid.h"
#include "util.h"

enum lz_role {
    LZ_ROLE_PREPARED_LOWER,
    LZ_ROLE_STATE_ANCHOR,
    LZ_ROLE_GIT_ROUTING,
    LZ_ROLE_NETWORK,
    LZ_ROLE_HELPER,
    LZ_ROLE_SANDBOX,
    LZ_ROLE_PUBLICATION,
    LZ_ROLE_COUNT
};

enum lz_pstate {
    LZ_P_INTENT,
    LZ_P_LEASE_HELD,
    LZ_P_PREPARED,
    LZ_P_COMMITTED,
    LZ_P_RELEASE_INTENT,
    LZ_P_CLEAN,
};

const char *lz_role_name(enum lz_role r);
const char *lz_pstate_name(enum lz_pstate s);
int lz_pstate_parse(const char *s); /* enum value or -EINVAL */
int lz_role_parse(const char *s);

struct lz_store;

struct lz_store_identity {
    const char *domain_id; /* 64 hex */
    const char *profile;
    const char *workspace;
};

/* The current store version (PRAGMA user_version); versions 1 to 4 are
 * upgraded when opened for writing (2: the audit, 3: its network rows, 4:
 * their TLS gate event, 5: the gate's credential events; audit.h). */
#define LZ_STORE_VERSION 5

/* Opens (creating when absent and `create`) the store of domain_dir.
 * -ENOENT when absent and !create. A store of an older version is
 * upgraded to LZ_STORE_VERSION in one transaction (db.h) by this open:
 * the caller holds the Domain flock. */
int lz_store_open(const char *domain_dir, const struct lz_store_identity *id, bool create, struct lz_store **ret,
                  struct lz_error *err);
/* A read-only connection for a reader that does not hold the Domain flock
 * (`lazaret audit` of a running Domain: WAL readers never block the
 * coordinator, nor it them). Nothing is written, not even an upgrade: an
 * older store opens as it is (lz_store_version). id as lz_store_open
 * (SR-11). Only reads (lz_store_read, lz_audit_read) may be used on it. */
int lz_store_open_readonly(const char *domain_dir, const struct lz_store_identity *id, struct lz_store **ret,
                           struct lz_error *err);
void lz_store_close(struct lz_store *st);
static inline void lz_store_closep(struct lz_store **st) { lz_store_close(*st); }
#define _cleanup_store_ _cleanup_(lz_store_closep)
/* The version of the opened file; < LZ_STORE_VERSION only read-only. */
int lz_store_version(const struct lz_store *st);
/* The version this open upgraded the file from, or 0. */
int lz_store_upgraded_from(const struct lz_store *st);
/* The SQLite layer under the store, for the modules that own a table of it
 * (audit.c). */
struct lz_db *lz_store_db(struct lz_store *st);

int lz_store_begin(struct lz_store *st, struct lz_error *err);
int lz_store_commit(struct lz_store *st, struct lz_error *err);
void lz_store_rollback(struct lz_store *st);

/* meta */
int lz_store_meta_get(struct lz_store *st, const char *key, char **ret, struct lz_error *err); /* -ENOENT */
int lz_store_meta_set(struct lz_store *st, const char *key, const char *value, struct lz_error *err);
int lz_store_meta_del(struct lz_store *st, const char *key, struct lz_error *err);

/* generations */
int lz_store_gen_begin(struct lz_store *st, const char *fingerprint, const struct lz_procid *hc, int64_t *ret_gen,
                       struct lz_error *err);
int lz_store_gen_set_state(struct lz_store *st, int64_t gen, const char *state, struct lz_error *err);

/* participants: set the state; artifact/mount/evidence NULL keeps the
 * recorded value. Moving to LZ_P_CLEAN clears evidence and process slots. */
int lz_store_part_set(struct lz_store *st, int64_t gen, enum lz_role role, enum lz_pstate state,
                      const char *artifact_id, const char *mount, const char *evidence, struct lz_error *err);
/* process slots: phase "staged" or "committed". */
int lz_store_proc_set(struct lz_store *st, int64_t gen, enum lz_role role, const char *slot, const char *phase,
                      const struct lz_procid *id, struct lz_error *err);

/* Session Terminals: state "intent" (inserts; tty, command), "running" or
 * "release_intent" (phase "staged"/"committed" with the exec client's
 * identity, and the command when not NULL; or exec NULL to keep both),
 * "clean" (clears the identity). */
int lz_store_session_set(struct lz_store *st, int64_t gen, int64_t session, const char *state, bool tty,
                         const char *command, const char *phase, const struct lz_procid *exec, struct lz_error *err);

/* A snapshot of the whole store, for recovery and the state commands. */
struct lz_store_gen {
    int64_t gen;
    char state[16];
    char *fingerprint;
    struct lz_procid hc;
    int64_t started_ms, ended_ms;
};
struct lz_store_part {
    int64_t gen;
    enum lz_role role;
    enum lz_pstate state;
    char *artifact_id, *mount, *evidence;
};
struct lz_store_proc {
    int64_t gen;
    enum lz_role role;
    char slot[32];
    char phase[16];
    struct lz_procid id;
};
struct lz_store_session {
    int64_t gen, session;
    char state[16];
    bool tty;
    char *command;
    char phase[16];
    struct lz_procid exec; /* valid when phase is staged or committed */
    int64_t started_ms, ended_ms;
};
struct lz_store_snapshot {
    char *domain_id, *profile, *workspace;
    int64_t created_ms, last_used_ms, anchor_gen;
    char *reset_intent; /* NULL when none */
    struct lz_store_gen *gens;
    size_t n_gens;
    struct lz_store_part *parts;
    size_t n_parts;
    struct lz_store_proc *procs;
    size_t n_procs;
    struct lz_store_session *sessions;
    size_t n_sessions;
};
int lz_store_read(struct lz_store *st, struct lz_store_snapshot *ret, struct lz_error *err);
void lz_store_snapshot_clear(struct lz_store_snapshot *s);

/* PRAGMA integrity_check and foreign_key_check: 0 ok, -EBADMSG with the
 * first problem in err. */
int lz_store_check(struct lz_store *st, struct lz_error *err);
