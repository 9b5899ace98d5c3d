/* recovery.h — bootstrap recovery of a Domain's interrupted generations.
 *
 * Run by the process holding the Domain flock (a new Host Coordinator
 * before it starts its generation, or `lazaret state reset`), with the
 * Domain Store open. For every generation that is not clean:
 *
 *  1. every recorded process (staged or committed) is matched by its pidfs
 *     identity only (procid.h) and, when it is exactly that process, killed
 *     through a pidfd; the Supervisor first (its death ends runsc, the
 *     sandbox, the gofer and the router through their parent-death
 *     signals), then the connectivity helper, then the rest. A process that
 *     does not match (gone, PID reused, another boot) is never signalled;
 *  2. absence is proven independently: no process left in the generation's
 *     user namespace (recorded when the Supervisor was staged), which also
 *     proves every State Anchor mount gone (anchor.h); a previous boot's
 *     namespaces are gone by definition;
 *  3. the State Anchor becomes clean together with the prepared lower's
 *     release intent (one transaction); the exact catalog lease is removed;
 *     the prepared lower becomes clean; every other role becomes clean; the
 *     generation is marked clean.
 *
 * Fails closed, changing nothing further, when absence cannot be proven or
 * when the store says a lease is held that the Storage Catalog does not
 * have (inconsistent: `lazaret state verify` explains it).
 */
#pragma once

#include "store.h"

typedef lz_log_fn lz_recovery_log_fn;
/* The old name of lz_logf (util.h), for callers not switched yet. */
#define lz_recovery_logf lz_logf

/* Returns the number of generations recovered (>= 0) or -errno. */
int lz_domain_recover(struct lz_store *st, const char *data_root, const char *domain_id, lz_recovery_log_fn log,
                      void *ud, struct lz_error *err);

/* What recovery did, as its caller acts on it (the coordinator logs the
 * model's ResetFailedDomain for each generation made clean), rather than
 * a log line to be read back. */
enum lz_recovery_event {
    LZ_RECOVERY_GEN_CLEAN, /* generation `gen` is clean: everything of it released */
};
struct lz_recovery_report {
    enum lz_recovery_event event;
    int64_t gen;
};
typedef void (*lz_recovery_report_fn)(void *ud, const struct lz_recovery_report *rep);

/* lz_domain_recover, with report (may be NULL) called with ud after each
 * event, after its log line. */
int lz_domain_recover_report(struct lz_store *st, const char *data_root, const char *domain_id, lz_recovery_log_fn log,
                             lz_recovery_report_fn report, void *ud, struct lz_error *err);

/* Reads "key=<number>" out of an evidence string (evidence.h); 0 when
 * absent or malformed. */
uint64_t lz_evidence_u64(const char *evidence, const char *key);
