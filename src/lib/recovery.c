/* recovery.c — see recovery.h. */
#include "recovery.h"
#include "anchor.h"
#include "catalog.h"
#include "evidence.h"

#include <inttypes.h>

#define KILL_WAIT_MS 10000
#define NS_WAIT_MS 10000

uint64_t lz_evidence_u64(const char *evidence, const char *key) {
    uint64_t v = 0;
    return lz_evidence_get_u64(evidence, key, &v) == 1 ? v : 0;
}

static const struct lz_store_part *find_part(const struct lz_store_snapshot *s, int64_t gen, enum lz_role role) {
    for (size_t i = 0; i < s->n_parts; i++)
        if (s->parts[i].gen == gen && s->parts[i].role == role)
            return &s->parts[i];
    return NULL;
}

static int recover_gen(struct lz_store *st, const struct lz_store_snapshot *s, const struct lz_store_gen *g,
                       const char *data_root, const char *domain_id, lz_recovery_log_fn log,
                       lz_recovery_report_fn report, void *ud, struct lz_error *err) {
    int r;
    int64_t gen = g->gen;
    lz_logf(log, ud, "recovery: generation %" PRId64 " was left %s", gen, g->state);
    const struct lz_store_part *lower = find_part(s, gen, LZ_ROLE_PREPARED_LOWER);
    const struct lz_store_part *anchor = find_part(s, gen, LZ_ROLE_STATE_ANCHOR);
    const struct lz_store_part *sandbox = find_part(s, gen, LZ_ROLE_SANDBOX);

    /* A held lease the catalog does not have is inconsistent: fail closed
     * before touching anything. */
    if (lower && lower->state == LZ_P_LEASE_HELD && lower->artifact_id) {
        r = lz_catalog_lease_held(data_root, lower->artifact_id, domain_id, gen, err);
        if (r < 0)
            return r;
        if (r == 0)
            return lz_error_set(err, -EBADMSG,
                                "the Domain Store says generation %" PRId64 " holds a lease on prepared "
                                "artifact %.12s, but the Storage Catalog has no such lease; refusing to "
                                "guess (see `lazaret state verify`)",
                                gen, lower->artifact_id);
    }

    /* 1. Exact processes, Supervisor first. */
    static const enum lz_role order[] = { LZ_ROLE_SANDBOX,       LZ_ROLE_HELPER,  LZ_ROLE_GIT_ROUTING,
                                          LZ_ROLE_STATE_ANCHOR,  LZ_ROLE_NETWORK, LZ_ROLE_PUBLICATION,
                                          LZ_ROLE_PREPARED_LOWER };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(order); k++)
        for (size_t i = 0; i < s->n_procs; i++) {
            const struct lz_store_proc *p = &s->procs[i];
            if (p->gen != gen || p->role != order[k])
                continue;
            r = lz_procid_kill(&p->id, KILL_WAIT_MS);
            if (r < 0)
                return lz_error_set(err, r, "recovery: the %s process %s (pid %" PRId64 ") did not exit",
                                    lz_role_name(p->role), p->slot, p->id.pid);
            lz_logf(log, ud, "recovery: %s %s process (pid %" PRId64 ", %s): %s", lz_role_name(p->role), p->slot,
                    p->id.pid, p->phase, r == 1 ? "killed" : "already gone (not signalled)");
        }

    /* Session Terminals: their exec clients, exactly. */
    for (size_t i = 0; i < s->n_sessions; i++) {
        const struct lz_store_session *t = &s->sessions[i];
        if (t->gen != gen || !strcmp(t->state, "clean") || !strcmp(t->phase, "unassigned"))
            continue;
        r = lz_procid_kill(&t->exec, KILL_WAIT_MS);
        if (r < 0)
            return lz_error_set(err, r, "recovery: the exec client of session %" PRId64 " did not exit", t->session);
        lz_logf(log, ud, "recovery: session %" PRId64 " exec client (pid %" PRId64 "): %s", t->session, t->exec.pid,
                r == 1 ? "killed" : "already gone (not signalled)");
    }

    /* 2. Independent absence proof: nothing left in the Domain user
     * namespace of that generation (this boot only). */
    uint64_t userns = 0;
    if (sandbox && lz_evidence_get_u64(sandbox->evidence, "userns", &userns) < 0)
        return lz_error_set(err, -EBADMSG,
                            "the Domain Store's evidence of generation %" PRId64 "'s sandbox is malformed; "
                            "refusing to guess whether its processes are gone (see `lazaret state verify`)",
                            gen);
    bool same_boot = g->hc.boot_id[0] && !strcmp(g->hc.boot_id, lz_boot_id());
    if (userns && same_boot) {
        r = lz_ns_wait_unused("user", userns, NS_WAIT_MS);
        if (r < 0)
            return lz_error_set(err, -EBUSY,
                                "recovery: processes of generation %" PRId64 " are still running in its user "
                                "namespace (%" PRIu64 ") and are not recorded as Lazaret's; refusing to touch "
                                "its State Anchor",
                                gen, userns);
    }

    /* 3. Records, in the release order. */
    bool anchor_live = anchor && anchor->state != LZ_P_CLEAN;
    bool lower_live = lower && lower->state != LZ_P_CLEAN;
    if (anchor_live) {
        if ((r = lz_store_begin(st, err)) < 0)
            return r;
        if ((r = lz_store_part_set(st, gen, LZ_ROLE_STATE_ANCHOR, LZ_P_CLEAN, NULL, NULL, NULL, err)) < 0 ||
            (lower_live && lower->state != LZ_P_RELEASE_INTENT &&
             (r = lz_store_part_set(st, gen, LZ_ROLE_PREPARED_LOWER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err)) <
                 0)) {
            lz_store_rollback(st);
            return r;
        }
        if ((r = lz_store_commit(st, err)) < 0)
            return r;
        lz_logf(log, ud, "recovery: State Anchor of generation %" PRId64 " is unmounted (proven) and clean", gen);
    }
    if (lower_live) {
        if (lower->state != LZ_P_RELEASE_INTENT && !anchor_live &&
            (r = lz_store_part_set(st, gen, LZ_ROLE_PREPARED_LOWER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err)) < 0)
            return r;
        if (lower->artifact_id) {
            r = lz_catalog_lease_release(data_root, lower->artifact_id, domain_id, gen, err);
            if (r < 0)
                return r;
            lz_logf(log, ud, "recovery: lease of generation %" PRId64 " on %.12s %s", gen, lower->artifact_id,
                    r == 1 ? "removed" : "was already absent");
        }
        if ((r = lz_store_part_set(st, gen, LZ_ROLE_PREPARED_LOWER, LZ_P_CLEAN, NULL, NULL, NULL, err)) < 0)
            return r;
    }
    if ((r = lz_store_begin(st, err)) < 0)
        return r;
    for (size_t i = 0; i < s->n_parts; i++) {
        const struct lz_store_part *p = &s->parts[i];
        if (p->gen != gen || p->state == LZ_P_CLEAN || p->role == LZ_ROLE_PREPARED_LOWER ||
            p->role == LZ_ROLE_STATE_ANCHOR)
            continue;
        if ((r = lz_store_part_set(st, gen, p->role, LZ_P_CLEAN, NULL, NULL, NULL, err)) < 0) {
            lz_store_rollback(st);
            return r;
        }
    }
    for (size_t i = 0; i < s->n_sessions; i++) {
        const struct lz_store_session *t = &s->sessions[i];
        if (t->gen == gen && strcmp(t->state, "clean") &&
            (r = lz_store_session_set(st, gen, t->session, "clean", t->tty, NULL, NULL, NULL, err)) < 0) {
            lz_store_rollback(st);
            return r;
        }
    }
    if ((r = lz_store_gen_set_state(st, gen, "clean", err)) < 0) {
        lz_store_rollback(st);
        return r;
    }
    if ((r = lz_store_commit(st, err)) < 0)
        return r;
    lz_logf(log, ud, "recovery: generation %" PRId64 " is clean", gen);
    if (report)
        report(ud, &(struct lz_recovery_report){ .event = LZ_RECOVERY_GEN_CLEAN, .gen = gen });
    return 0;
}

int lz_domain_recover(struct lz_store *st, const char *data_root, const char *domain_id, lz_recovery_log_fn log,
                      void *ud, struct lz_error *err) {
    return lz_domain_recover_report(st, data_root, domain_id, log, NULL, ud, err);
}

int lz_domain_recover_report(struct lz_store *st, const char *data_root, const char *domain_id, lz_recovery_log_fn log,
                             lz_recovery_report_fn report, void *ud, struct lz_error *err) {
    struct lz_store_snapshot s;
    int r = lz_store_read(st, &s, err);
    if (r < 0)
        return r;
    int n = 0;
    for (size_t i = 0; i < s.n_gens && r >= 0; i++) {
        if (!strcmp(s.gens[i].state, "clean"))
            continue;
        r = recover_gen(st, &s, &s.gens[i], data_root, domain_id, log, report, ud, err);
        if (r == 0)
            n++;
    }
    lz_store_snapshot_clear(&s);
    return r < 0 ? r : n;
}
