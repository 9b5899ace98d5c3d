/* domains_verify.c — `lazaret state verify`: structural checks of Domain
 * Roots, their Domain Stores and the Storage Catalog's leases; reports,
 * never repairs (see domains.h). */
#include "domains_int.h"
#include "domain_id.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

/* ---- verification ---- */

struct vctx {
    const char *data_root;
    const char *config_path;
    lz_domain_report_fn report;
    void *ud;
    const struct lz_catalog *cat; /* NULL when it could not be read */
    struct lz_verify_result *res;
    struct lz_domain_verdict *cur; /* NULL for the Storage Root */
};

static void vreport(struct vctx *v, const char *sev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void vreport(struct vctx *v, const char *sev, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!strcmp(sev, "error")) {
        v->res->n_errors++;
        if (v->cur)
            v->cur->n_errors++;
    } else if (!strcmp(sev, "warn")) {
        v->res->n_warnings++;
        if (v->cur)
            v->cur->n_warnings++;
    }
    if (v->report)
        v->report(v->ud, v->cur ? v->cur->id : NULL, sev, msg);
}

static const struct lz_store_gen *find_gen(const struct lz_store_snapshot *s, int64_t gen) {
    for (size_t i = 0; i < s->n_gens; i++)
        if (s->gens[i].gen == gen)
            return &s->gens[i];
    return NULL;
}

static const struct lz_store_part *find_part(const struct lz_store_snapshot *s, int64_t gen, enum lz_role role) {
    for (size_t i = 0; i < s->n_parts; i++)
        if (s->parts[i].gen == gen && s->parts[i].role == role)
            return &s->parts[i];
    return NULL;
}

static bool has_lease(const struct lz_catalog *cat, const char *artifact, const char *domain, int64_t gen) {
    for (size_t i = 0; i < cat->n_leases; i++)
        if (cat->leases[i].generation == gen && !strcmp(cat->leases[i].domain_id, domain) &&
            !strcmp(cat->leases[i].artifact_id, artifact))
            return true;
    return false;
}

/* Is `name` (an entry of the Domain Root) the top of a volume of the
 * Domain's profile ({domain_dir}/...)? */
static bool is_volume_top(const struct lz_config *c, const char *name) {
    if (!c)
        return false;
    size_t dl = strlen(c->domain_dir), nl = strlen(name);
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        const char *h = c->profile.volumes[i].host;
        if (!strncmp(h, c->domain_dir, dl) && h[dl] == '/' && !strncmp(h + dl + 1, name, nl) &&
            (h[dl + 1 + nl] == '/' || h[dl + 1 + nl] == '\0'))
            return true;
    }
    return false;
}

static void verify_entries(struct vctx *v, int rootfd, const struct lz_store_snapshot *snap,
                           const struct lz_config *c) {
    char **names = NULL;
    size_t n = 0;
    int r = lz_dir_names(rootfd, SIZE_MAX, &names, &n);
    if (r < 0) {
        vreport(v, "error", "cannot read the Domain Root: %s", strerror(-r));
        return;
    }
    bool current_seen = false;
    for (size_t i = 0; i < n; i++) {
        const char *nm = names[i];
        struct stat st;
        if (fstatat(rootfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        int64_t g;
        bool want_dir = false, want_reg = false;
        /* SQLite's -wal/-shm exist while a store is open (ours, now). */
        if (!strcmp(nm, "lock") || !strcmp(nm, "domain.db") || !strcmp(nm, "domain.db-journal") ||
            !strcmp(nm, "domain.db-wal") || !strcmp(nm, "domain.db-shm") || !strcmp(nm, "coordinator.log")) {
            want_reg = true;
        } else if (!strcmp(nm, "overlay") || !strcmp(nm, "ignored")) {
            want_dir = true;
        } else if (!strcmp(nm, "ignored.reset")) {
            want_dir = true;
            vreport(v, "warn",
                    "an interrupted `lazaret state reset` left the old Ignored Workspace State to delete "
                    "(ignored.reset); the next `lazaret state reset --ignored-only` finishes it");
        } else if (dom_anchor_name_gen(nm, &g)) {
            want_dir = true;
            if (snap && g == snap->anchor_gen) {
                current_seen = S_ISDIR(st.st_mode);
            } else if (snap && snap->reset_intent && !strcmp(snap->reset_intent, nm)) {
                vreport(v, "warn",
                        "an interrupted `lazaret state reset` left the old State Anchor %s to delete (the Domain "
                        "already uses the new, empty anchor-%" PRId64 "); the next `lazaret state reset` finishes it",
                        nm, snap->anchor_gen);
            } else if (snap) {
                vreport(v, "warn",
                        "%s is not the current State Anchor (anchor-%" PRId64 "): a leftover of an interrupted "
                        "reset; the next `lazaret state reset` deletes it",
                        nm, snap->anchor_gen);
            }
        } else if (is_volume_top(c, nm)) {
            vreport(v, "info", "%s holds a volume of profile %s", nm, c->profile.name);
            continue;
        } else {
            vreport(v, "warn", "unexpected entry %s in the Domain Root (Lazaret did not create it)", nm);
            continue;
        }
        if (S_ISLNK(st.st_mode))
            vreport(v, "error", "%s is a symlink; Lazaret never follows it (SR-14)", nm);
        else if (want_dir && !S_ISDIR(st.st_mode))
            vreport(v, "error", "%s is not a directory", nm);
        else if (want_reg && !S_ISREG(st.st_mode))
            vreport(v, "error", "%s is not a regular file", nm);
    }
    if (snap && snap->reset_intent) {
        char want[32];
        snprintf(want, sizeof want, "anchor-%" PRId64, snap->anchor_gen);
        int64_t g;
        bool listed = false;
        for (size_t i = 0; i < n; i++)
            listed = listed || !strcmp(names[i], snap->reset_intent);
        if (!dom_anchor_name_gen(snap->reset_intent, &g) || !strcmp(snap->reset_intent, want))
            vreport(v, "error", "the store's reset intent \"%.64s\" does not name an old State Anchor",
                    snap->reset_intent);
        else if (!listed)
            vreport(v, "warn",
                    "an interrupted `lazaret state reset` deleted %s but did not record it; the next `lazaret "
                    "state reset` clears the intent",
                    snap->reset_intent);
    }
    if (snap && !current_seen)
        vreport(v, "info", "the State Anchor anchor-%" PRId64 " does not exist yet (the next start creates it)",
                snap->anchor_gen);
    lz_strv_free(names, n);
}

static const char *alive_text(int a) {
    return a == 1 ? "alive (recovery kills exactly this process)" : a == 0 ? "gone" : "unknown";
}

static void verify_generations(struct vctx *v, const char *id, const struct lz_store_snapshot *s) {
    for (size_t i = 0; i < s->n_gens; i++) {
        const struct lz_store_gen *g = &s->gens[i];
        if (!strcmp(g->state, "clean"))
            continue;
        char procs[1024] = "";
        size_t off = 0;
        for (size_t k = 0; k < s->n_procs && off < sizeof procs; k++) {
            const struct lz_store_proc *p = &s->procs[k];
            if (p->gen != g->gen)
                continue;
            int w = snprintf(procs + off, sizeof procs - off, "%s%s %s pid %" PRId64 " (%s): %s", off ? "; " : "",
                             lz_role_name(p->role), p->slot, p->id.pid, p->phase, alive_text(dom_proc_alive(&p->id)));
            off += w > 0 ? (size_t)w : 0;
        }
        for (size_t k = 0; k < s->n_sessions && off < sizeof procs; k++) {
            const struct lz_store_session *t = &s->sessions[k];
            if (t->gen != g->gen || !strcmp(t->state, "clean") || !strcmp(t->phase, "unassigned"))
                continue;
            int w =
                snprintf(procs + off, sizeof procs - off, "%ssession %" PRId64 " exec client pid %" PRId64 " (%s): %s",
                         off ? "; " : "", t->session, t->exec.pid, t->phase, alive_text(dom_proc_alive(&t->exec)));
            off += w > 0 ? (size_t)w : 0;
        }
        vreport(v, "warn",
                "generation %" PRId64 " was left %s (interrupted): the next `lazaret run` in this Domain recovers "
                "it; recorded processes: %s",
                g->gen, g->state, procs[0] ? procs : "none");
    }
    if (!v->cat)
        return;
    /* The store says a lease is held: the catalog must have exactly it. */
    for (size_t i = 0; i < s->n_parts; i++) {
        const struct lz_store_part *p = &s->parts[i];
        if (p->role != LZ_ROLE_PREPARED_LOWER || p->state != LZ_P_LEASE_HELD)
            continue;
        if (!p->artifact_id || !has_lease(v->cat, p->artifact_id, id, p->gen))
            vreport(v, "error",
                    "inconsistent: generation %" PRId64 " holds a lease on prepared artifact %.12s per the Domain "
                    "Store, but the Storage Catalog has no such lease; recovery refuses to guess, so `lazaret run` "
                    "and `lazaret state reset` fail in this Domain until this is resolved",
                    p->gen, p->artifact_id ? p->artifact_id : "(none)");
    }
    /* Every catalog lease of this Domain must belong to a live generation
     * that recorded that artifact. */
    for (size_t i = 0; i < v->cat->n_leases; i++) {
        const struct lz_catalog_lease *l = &v->cat->leases[i];
        if (strcmp(l->domain_id, id) != 0)
            continue;
        const struct lz_store_gen *g = find_gen(s, l->generation);
        const struct lz_store_part *p = find_part(s, l->generation, LZ_ROLE_PREPARED_LOWER);
        const char *why = NULL;
        if (!g)
            why = "the Domain Store has no such generation";
        else if (!strcmp(g->state, "clean"))
            why = "that generation is clean";
        else if (!p || p->state == LZ_P_CLEAN)
            why = "that generation holds no prepared lower";
        else if (p->artifact_id && strcmp(p->artifact_id, l->artifact_id) != 0)
            why = "that generation recorded another artifact";
        if (why)
            vreport(v, "error",
                    "orphan lease: the Storage Catalog holds a lease of generation %" PRId64 " on prepared artifact "
                    "%.12s, but %s; it keeps the artifact from being reclaimed",
                    l->generation, l->artifact_id, why);
    }
}

static void verify_one(struct vctx *v, int domfd, const char *id) {
    struct lz_verify_result *res = v->res;
    res->v = lz_xrealloc(res->v, (res->n + 1) * sizeof *res->v);
    v->cur = &res->v[res->n++];
    *v->cur = (struct lz_domain_verdict){ 0 };
    snprintf(v->cur->id, sizeof v->cur->id, "%s", id);
    struct lz_error e = { 0 };
    _cleanup_close_ int rootfd = dom_open_root(domfd, v->data_root, id, &e);
    if (rootfd < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    _cleanup_close_ int lockfd = -EBADF;
    int r = dom_lock(rootfd, &lockfd, &e);
    if (r < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    if (r == 0) {
        v->cur->running = true;
        dom_identity_from_log(rootfd, id, &v->cur->profile, &v->cur->workspace);
        vreport(v, "info", "running; not verified");
        return;
    }
    _cleanup_free_ char *path = NULL;
    _cleanup_store_ struct lz_store *st = NULL;
    if ((r = dom_root_path(v->data_root, id, rootfd, &path, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    r = lz_store_open(path, NULL, false, &st, &e);
    if (r == -ENOENT) {
        vreport(v, "warn", "no Domain Store: the Domain never completed a start (`lazaret run` creates it)");
        verify_entries(v, rootfd, NULL, NULL);
        return;
    }
    if (r < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    if ((r = lz_store_check(st, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    struct lz_store_snapshot snap;
    if ((r = lz_store_read(st, &snap, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    v->cur->profile = snap.profile ? lz_xstrdup(snap.profile) : NULL;
    v->cur->workspace = snap.workspace ? lz_xstrdup(snap.workspace) : NULL;
    /* SR-11: the store is this directory's, and the directory is the
     * Domain of the (profile, workspace) it records. */
    bool ident_ok = snap.domain_id && snap.profile && snap.workspace;
    if (!ident_ok)
        vreport(v, "error", "the Domain Store lacks its identity (domain_id, profile, workspace)");
    if (snap.domain_id && strcmp(snap.domain_id, id) != 0) {
        ident_ok = false;
        vreport(v, "error", "the Domain Store records Domain ID %.64s, not the directory's %s", snap.domain_id, id);
    }
    if (snap.profile && snap.workspace) {
        uint8_t raw[LZ_DOMAIN_ID_LEN];
        char hex[LZ_DOMAIN_ID_HEX + 1] = "";
        if (lz_domain_id_v1(snap.profile, snap.workspace, raw) == 0)
            lz_hex(raw, sizeof raw, hex);
        if (strcmp(hex, id) != 0) {
            ident_ok = false;
            vreport(v, "error",
                    "the Domain ID derived from the recorded profile and workspace is %s, not the directory's",
                    hex[0] ? hex : "(not computable)");
        }
    }
    if (snap.anchor_gen < 1)
        vreport(v, "error", "the Domain Store has no valid anchor_gen");
    if (ident_ok) {
        struct stat sb;
        if (stat(snap.workspace, &sb) < 0 && errno == ENOENT)
            vreport(v, "info", "the workspace no longer exists");
    }
    struct lz_config *c = ident_ok ? dom_config(v->config_path, id, snap.profile, snap.workspace) : NULL;
    verify_entries(v, rootfd, snap.anchor_gen >= 1 ? &snap : NULL, c);
    lz_config_free(c);
    /* The catalog read at the start of the run is older than this store:
     * the Domain may have started or stopped since. Under the Domain lock
     * its leases cannot change, so a fresh read is consistent with the
     * store just read. */
    struct lz_catalog fresh = { 0 };
    const struct lz_catalog *before = v->cat;
    if (before) {
        if (lz_catalog_read(v->data_root, &fresh, &e) == 0) {
            v->cat = &fresh;
        } else {
            vreport(v, "error", "cannot read the Storage Catalog again: %s (lease checks skipped)", e.msg);
            v->cat = NULL;
        }
    }
    verify_generations(v, id, &snap);
    v->cat = before;
    lz_catalog_clear(&fresh);
    lz_store_snapshot_clear(&snap);
}

static void catalog_report(void *ud, const char *severity, const char *msg) {
    struct vctx *v = ud;
    vreport(v, severity, "Storage Catalog: %s", msg);
}

static bool in_list(char **ids, size_t n, const char *id) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ids[i], id))
            return true;
    return false;
}

int lz_domains_verify(const char *data_root, const char *config_path, const char *const *ids, size_t n_ids,
                      lz_domain_report_fn report, void *ud, struct lz_verify_result *ret, struct lz_error *err) {
    struct lz_verify_result res = { 0 };
    struct vctx v = { .data_root = data_root, .config_path = config_path, .report = report, .ud = ud, .res = &res };
    struct lz_catalog cat = { 0 };
    struct lz_error e = { 0 };
    bool have_cat = lz_catalog_read(data_root, &cat, &e) == 0;
    if (have_cat)
        v.cat = &cat;
    else
        vreport(&v, "error", "cannot read the Storage Catalog: %s (lease checks skipped)", e.msg);

    _cleanup_close_ int domfd = dom_open_domains(data_root, err);
    if (domfd < 0 && domfd != -ENOENT) {
        lz_catalog_clear(&cat);
        lz_verify_result_clear(&res);
        return domfd;
    }
    char **all = NULL, **strays = NULL;
    size_t n_all = 0, n_strays = 0;
    if (domfd >= 0) {
        int r = dom_scan(domfd, data_root, &all, &n_all, &strays, &n_strays, err);
        if (r < 0) {
            lz_catalog_clear(&cat);
            lz_verify_result_clear(&res);
            return r;
        }
    }
    if (n_ids) {
        for (size_t i = 0; i < n_ids; i++)
            verify_one(&v, domfd, ids[i]);
    } else {
        for (size_t i = 0; i < n_all; i++)
            verify_one(&v, domfd, all[i]);
        v.cur = NULL;
        for (size_t i = 0; i < n_strays; i++)
            vreport(&v, "warn", "%s/domains/%s is not a Domain Root (not a directory named by a Domain ID)", data_root,
                    strays[i]);
        /* Leases of Domains that have no Domain Root at all. */
        for (size_t i = 0; have_cat && i < cat.n_leases; i++) {
            const struct lz_catalog_lease *l = &cat.leases[i];
            if (!in_list(all, n_all, l->domain_id))
                vreport(&v, "error",
                        "orphan lease: the Storage Catalog holds a lease of Domain %.12s generation %" PRId64
                        " on prepared artifact %.12s, but that Domain has no Domain Root",
                        l->domain_id, l->generation, l->artifact_id);
        }
    }
    v.cur = NULL;
    lz_strv_free(all, n_all);
    lz_strv_free(strays, n_strays);
    lz_catalog_clear(&cat);

    e = (struct lz_error){ 0 };
    int r = lz_catalog_verify(data_root, catalog_report, &v, &e);
    if (r < 0)
        vreport(&v, "error", "cannot verify the Storage Catalog: %s", e.msg);
    /* catalog_report already counted the catalog's errors. */
    *ret = res;
    return 0;
}

void lz_verify_result_clear(struct lz_verify_result *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].profile);
        free(r->v[i].workspace);
    }
    free(r->v);
    *r = (struct lz_verify_result){ 0 };
}
