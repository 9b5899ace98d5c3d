/* catalog_gc.c — the Storage Catalog against prepared/: the structural
 * check (lz_catalog_verify) and product GC (lz_catalog_gc); see catalog.h
 * for the reclaim protocol. The sections and rows are catalog.c's
 * (catalog_int.h). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "catalog_int.h"
#include "artifact.h"
#include "prepare.h"
#include "prepare.h"
#include "procid.h"

#define DAY_MS INT64_C(86400000)
#define MAX_KEEP_DAYS INT64_C(1000000)

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

/* ---- verify ---- */

static void reportf(void (*report)(void *, const char *, const char *), void *ud, const char *sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
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

int lz_catalog_verify(const char *data_root, void (*report)(void *ud, const char *severity, const char *msg), void *ud,
                      struct lz_error *err) {
    struct cat c;
    struct lz_catalog l = { 0 };
    int errors = 0;
    int r = lz_cat_section_begin(data_root, 0, &c, err);
    if (r < 0)
        return r;
    if (r == 1) {
        reportf(report, ud, "info", "%s/" LZ_CATALOG_FILE " does not exist yet (no lease was ever taken)", data_root);
    } else {
        struct integrity_report ir = { report, ud, c.db ? c.db->path : "" };
        if (!c.fresh && (r = lz_db_integrity(c.db, LZ_CAT_MAX_ROWS, integrity_bad, &ir, err)) > 0) {
            errors += r;
            r = 0;
        }
        if (r == 0)
            r = lz_cat_load(&c, &l, err);
        r = lz_cat_section_end(&c, r, err);
        if (r < 0) {
            lz_catalog_clear(&l);
            return r;
        }
    }

    _cleanup_close_ int pfd = lz_cat_open_prepared(data_root);
    char **names = NULL;
    size_t n_names = 0;
    if (pfd >= 0) {
        r = lz_dir_names(pfd, LZ_CAT_MAX_ROWS, &names, &n_names);
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
            reportf(report, ud, "warn",
                    "preparation %s of %s is abandoned (owner %s is gone); `lazaret image gc` "
                    "reclaims it",
                    p->tmp_name, p->artifact_id, p->owner);
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
        if (lz_cat_hex64(nm)) {
            if (!find_artifact(&l, nm))
                reportf(report, ud, "info", "prepared/%s is not in the catalog (registered on next use or gc)", pn);
        } else if (strncmp(nm, ".tmp-", 5) == 0) {
            if (!find_prepare(&l, nm))
                reportf(report, ud, "info",
                        "prepared/%s has no prepare intent (in progress, or left by an older "
                        "Lazaret); never deleted automatically",
                        pn);
        } else if (strncmp(nm, ".reclaim-", 9) == 0 && lz_cat_hex64(nm + 9)) {
            const struct lz_catalog_artifact *a = find_artifact(&l, nm + 9);
            if (!a || strcmp(a->state, "reclaiming") != 0)
                reportf(report, ud, "info", "prepared/%s is not a reclaim recorded in the catalog", pn);
        } else {
            reportf(report, ud, "info", "prepared/%s is not a name Lazaret uses; left alone", pn);
        }
    }
    lz_strv_free(names, n_names);
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
    g->events[g->n_events++] = (struct event){
        .action = action, .kind = kind, .name = lz_xstrdup(pn), .size = size, .reason = lz_xstrdup(reason)
    };
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
static int gc_plan_locked(struct gc *g, struct cat *c, int pfd, const struct lz_gc_policy *pol, struct lz_error *err) {
    struct lz_catalog l = { 0 };
    char **names = NULL;
    size_t n_names = 0;
    struct cand *cands = NULL;
    struct cand **lru = NULL;
    int64_t now = lz_cat_now_ms();
    int r = lz_cat_load(c, &l, err);
    if (r < 0)
        return r;
    if (pfd >= 0 && (r = lz_dir_names(pfd, LZ_CAT_MAX_ROWS, &names, &n_names)) < 0) {
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
        if (!lz_cat_hex64(nm) || find_artifact(&l, nm))
            continue;
        if (lz_prepared_info_read(pfd, nm, nm, &new_info[n_new]) < 0) {
            gc_event(g, LZ_GC_KEPT, "entry", nm, 0,
                     "not a complete prepared artifact (no matching artifact.json); "
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
        cands[i] = (struct cand){ .id = a->artifact_id,
                                  .ready = strcmp(a->state, "ready") == 0,
                                  .present = name_listed(names, n_names, a->artifact_id),
                                  .leased = a->n_leases > 0,
                                  .size = a->size,
                                  .last_used_ms = a->last_used_ms };
    }
    for (size_t i = 0; i < n_new && r >= 0; i++) {
        cands[l.n_artifacts + i] = (struct cand){
            .id = new_ids[i], .ready = true, .present = true, .size = new_info[i].size, .last_used_ms = now
        };
        if (!g->dry_run)
            r = lz_cat_artifact_upsert(c, pfd, new_ids[i], new_ids[i], now, err);
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
        if (lz_cat_hex64(nm))
            continue;
        if (strncmp(nm, ".tmp-", 5) == 0) {
            const struct lz_catalog_prepare *p = find_prepare(&l, nm);
            if (!p) {
                gc_event(g, LZ_GC_KEPT, "entry", nm, 0,
                         "preparation without a prepare intent (in progress, or "
                         "left by an older Lazaret); left alone");
                continue;
            }
            int alive = owner_alive(p->owner);
            if (alive > 0) {
                gc_event(g, LZ_GC_KEPT, "prepare", nm, 0, "preparation in progress (its owner is alive)");
            } else if (alive < 0) {
                gc_event(g, LZ_GC_KEPT, "prepare", nm, 0,
                         "cannot tell whether its owner %s is alive (%s); left "
                         "alone",
                         p->owner, strerror(-alive));
            } else {
                struct plan *pl = gc_plan(g, PLAN_ABANDONED, nm, 0);
                snprintf(pl->owner, sizeof pl->owner, "%s", p->owner);
                snprintf(pl->reason, sizeof pl->reason, "abandoned preparation of %.12s (its owner is gone)",
                         p->artifact_id);
            }
            continue;
        }
        if (strncmp(nm, ".reclaim-", 9) == 0 && lz_cat_hex64(nm + 9)) {
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
            (r = lz_db_run(c->db, err, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", "tt", p->tmp_name,
                           p->owner)) < 0)
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
            if (!g->dry_run &&
                (r = lz_db_run(c->db, err,
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
            gc_event(g, LZ_GC_KEPT, "artifact", a->id, a->size,
                     "prepared/.reclaim-%.12s... exists and is not a "
                     "recorded reclaim; move it away first",
                     a->id);
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
                gc_event(g, LZ_GC_KEPT, "artifact", lru[i]->id, lru[i]->size,
                         "prepared/.reclaim-%.12s... exists "
                         "and is not a recorded reclaim; move it away first",
                         lru[i]->id);
                continue;
            }
            struct plan *pl = gc_plan(g, PLAN_ARTIFACT, lru[i]->id, lru[i]->size);
            snprintf(pl->reason, sizeof pl->reason,
                     "least recently used over prepared_max_bytes = %" PRIu64 " (prepared lowers total %" PRIu64
                     " bytes)",
                     pol->max_bytes, total);
            lru[i]->chosen = true;
            total -= lru[i]->size;
        }
        if (total > pol->max_bytes)
            for (size_t i = 0; i < n_cands; i++)
                if (!cands[i].chosen && cands[i].leased)
                    gc_event(g, LZ_GC_KEPT, "artifact", cands[i].id, cands[i].size,
                             "leased (in use), although "
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
    lz_strv_free(names, n_names);
    lz_catalog_clear(&l);
    return r;
}

/* Deletes prepared/<name> beneath pfd: u+rwx is granted on each directory
 * first (a prepared tree has read-only and mode-0 directories), symlinks are
 * never followed and other filesystems never entered. */
static int remove_beneath(int pfd, const char *name) { return lz_prepare_remove_tree(pfd, name); }

/* One statement with the text parameters a and b (b NULL: a only) on the
 * catalog's existing rows, in its own section; 0 or -errno. */
static int gc_catalog_run(struct gc *g, const char *sql, const char *a, const char *b, struct lz_error *err) {
    struct cat c;
    int r = lz_cat_section_existing(g->data_root, LZ_DB_WRITE, &c, err);
    if (r != 0)
        return r < 0 ? r : 0;
    r = b ? lz_db_run(c.db, err, sql, "tt", a, b) : lz_db_run(c.db, err, sql, "t", a);
    r = lz_cat_section_end(&c, r, err);
    return r < 0 ? r : 0;
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
            return gc_catalog_run(g,
                                  "UPDATE artifacts SET state = 'ready' WHERE artifact_id = ? AND state = 'reclaiming'",
                                  pl->name, NULL, err);
        }
        fsync(pfd);
    }
    if (pfd >= 0 && (r = remove_beneath(pfd, rec)) < 0) { /* ours: renamed above, or recorded */
        gc_event(g, LZ_GC_FAILED, "artifact", pl->name, pl->size,
                 "cannot delete prepared/%s: %s (the next gc "
                 "retries)",
                 rec, strerror(-r));
        return 0;
    }
    r = gc_catalog_run(g, "DELETE FROM artifacts WHERE artifact_id = ? AND state = 'reclaiming'", pl->name, NULL, err);
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
    r = gc_catalog_run(g, "DELETE FROM prepares WHERE tmp_name = ? AND owner = ?", pl->name, pl->owner, err);
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
        return lz_error_set(err, -EINVAL, "invalid gc policy: prepared_keep_days must be 0..%" PRId64, MAX_KEEP_DAYS);
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
    _cleanup_close_ int pfd = lz_cat_open_prepared(data_root);
    if (pfd < 0 && pfd != -ENOENT)
        return lz_error_set(err, pfd, "%s/prepared: %s", data_root, strerror(-pfd));

    struct cat c;
    int r = lz_cat_section_begin(data_root, dry_run ? 0 : LZ_DB_WRITE | LZ_DB_CREATE, &c, err);
    if (r == 1) { /* dry run without a catalog: plan against an empty one */
        c = (struct cat){ .lock_fd = -EBADF, .fresh = true };
        r = gc_plan_locked(&g, &c, pfd, policy, err);
    } else if (r == 0) {
        r = lz_cat_section_end(&c, gc_plan_locked(&g, &c, pfd, policy, err), err);
    }
    for (size_t i = 0; r >= 0 && i < g.n_plans; i++) {
        const struct plan *pl = &g.plans[i];
        if (!pl->name[0])
            continue;
        if (dry_run)
            gc_event(&g, LZ_GC_RECLAIMED, pl->kind == PLAN_ARTIFACT ? "artifact" : "prepare", pl->name, pl->size, "%s",
                     pl->reason);
        else if (pl->kind == PLAN_ARTIFACT)
            r = gc_reclaim_artifact(&g, pfd, pl, err);
        else
            r = gc_reclaim_abandoned(&g, pfd, pl, err);
    }
    for (size_t i = 0; report && i < g.n_events; i++) {
        const struct event *e = &g.events[i];
        struct lz_gc_event ev = {
            .action = e->action, .kind = e->kind, .name = e->name, .size = e->size, .reason = e->reason
        };
        report(ud, &ev);
    }
    if (r >= 0 && ret)
        *ret = g.res;
    gc_done(&g);
    return r < 0 ? r : 0;
}
