/* state_cmd.c — `lazaret state ls|inspect|verify|reset`: the Domains of the
 * Storage Root and their persistent state (see domains.h, docs/state.md). */
#include <inttypes.h>
#include <jansson.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "domains.h"

static void usage(FILE *out) {
    fputs("Usage: lazaret state COMMAND [OPTIONS]\n"
          "\n"
          "Commands:\n"
          "  ls [--json]                   list every Domain of the Storage Root\n"
          "  inspect DOMAIN [--json]       show one Domain: identity, State Anchor,\n"
          "                                generations, leases\n"
          "  verify [DOMAIN...] [--json]   check Domains (default: all) and the Storage\n"
          "                                Catalog; reports, never repairs; exit 1 on errors\n"
          "  reset DOMAIN... [--yes]       delete the persistent layers (State Anchor) and\n"
          "  reset --all [--yes]           the Ignored Workspace State of inactive Domains;\n"
          "                                asks first unless --yes\n"
          "  reset --ignored-only ...      delete only the Ignored Workspace State\n"
          "  diff                          what the sandbox changed in the host-tool\n"
          "                                configuration paths (.claude/, .vscode/, ...;\n"
          "                                kept in the Domain), as a unified diff\n"
          "  apply PATH                    copy the Domain's version of PATH (relative to\n"
          "                                the workspace root) over the host's, after review\n"
          "\n"
          "DOMAIN is a Domain ID, a unique prefix of at least 4 hex characters of one\n"
          "(see `lazaret state ls`), or --workspace PATH: the Domain of PATH and the\n"
          "profile given with -p. diff and apply act on the Domain of the current\n"
          "directory (or --workspace PATH) and the profile given with -p.\n"
          "\n"
          "Options:\n"
          "  --config FILE         read FILE instead of the default configuration\n"
          "  -p, --profile NAME    profile (default: \"default\"): with --workspace it\n"
          "                        selects the Domain; it is also the profile through\n"
          "                        which the configuration is read\n"
          "  --workspace PATH      the Domain of that workspace\n"
          "  --json                one JSON document on standard output\n"
          "  --all                 (reset) every inactive Domain\n"
          "  --yes                 (reset) do not ask\n"
          "  --ignored-only        (reset) only the git-ignored files the sandbox kept\n"
          "  -h, --help            show this help\n",
          out);
}

/* ---- formatting ---- */

static char *esc(const char *s) { return lz_cli_esc(s, "-"); }

/* A JSON string; a value that is not UTF-8 is given escaped. */
static json_t *jstr(const char *s) {
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    _cleanup_free_ char *e = esc(s);
    j = json_string(e);
    return j ? j : json_null();
}

static json_t *jtime(int64_t ms) {
    char b[32];
    lz_cli_iso_time(ms, b, sizeof b);
    return b[0] ? json_string(b) : json_null();
}

/* ---- ls ---- */

static int cmd_ls(const struct lz_config *cfg, bool json) {
    _cleanup_domain_list_ struct lz_domain_list l = { 0 };
    struct lz_error err = { 0 };
    int r = lz_domains_list(cfg->data_root, &l, &err);
    if (r < 0) {
        lz_cli_error("state ls: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (json) {
        json_t *a = json_array();
        for (size_t i = 0; i < l.n; i++) {
            const struct lz_domain_summary *s = &l.v[i];
            json_array_append_new(a,
                                  json_pack("{s:s, s:o, s:o, s:I, s:b, s:o, s:I, s:b, s:b, s:o}", "id", s->id,
                                            "profile", jstr(s->profile), "workspace", jstr(s->workspace), "size",
                                            (json_int_t)s->size, "size_partial", s->size_partial, "last_used",
                                            jtime(s->last_used_ms), "last_used_ms", (json_int_t)s->last_used_ms,
                                            "running", s->running, "has_store", s->has_store, "problem",
                                            jstr(s->problem)));
        }
        return lz_cli_print_json(a);
    }
    if (!l.n) {
        printf("no Domains under %s/domains (`lazaret run` creates one per profile and workspace)\n", cfg->data_root);
        return LZ_EXIT_OK;
    }
    printf("%-12s  %-16s  %-7s  %-20s  %10s  %s\n", "DOMAIN", "PROFILE", "RUNNING", "LAST USE", "SIZE", "WORKSPACE");
    for (size_t i = 0; i < l.n; i++) {
        const struct lz_domain_summary *s = &l.v[i];
        char sz[32], when[32];
        lz_cli_human_bytes(s->size, sz, sizeof sz);
        lz_cli_iso_time(s->last_used_ms, when, sizeof when);
        _cleanup_free_ char *prof = esc(s->profile), *ws = esc(s->workspace);
        printf("%-12.12s  %-16s  %-7s  %-20s  %10s  %s\n", s->id, prof, s->running ? "yes" : "no",
               s->running    ? "now"
                   : when[0] ? when
                             : "-",
               sz, ws);
        if (s->problem) {
            _cleanup_free_ char *p = esc(s->problem);
            printf("%-12s  (%s)\n", "", p);
        }
        /* A removed worktree (or a deleted or moved directory) leaves its
         * Domain's state behind: nothing here removes it unasked. */
        struct stat wst;
        if (s->workspace && !s->running && lstat(s->workspace, &wst) < 0 && errno == ENOENT)
            printf("%-12s  (the workspace no longer exists (a removed worktree?): `lazaret state reset %.12s` "
                   "deletes this Domain's state)\n",
                   "", s->id);
    }
    return LZ_EXIT_OK;
}

/* ---- inspect ---- */

static const struct lz_store_part *gen_part(const struct lz_store_snapshot *s, int64_t gen, size_t *it) {
    for (; *it < s->n_parts; (*it)++)
        if (s->parts[*it].gen == gen)
            return &s->parts[(*it)++];
    return NULL;
}

static const char *alive_word(int a) { return a == 1 ? "alive" : a == 0 ? "gone" : "unknown"; }

static json_t *inspect_json(const struct lz_domain_info *in) {
    json_t *root = json_pack("{s:s, s:b, s:o, s:o, s:I}", "id", in->id, "running", in->running, "profile",
                             jstr(in->profile), "workspace", jstr(in->workspace), "size", (json_int_t)in->size);
    const struct lz_store_snapshot *s = &in->snap;
    if (in->has_store) {
        json_object_set_new(root, "created", jtime(s->created_ms));
        json_object_set_new(root, "last_used", jtime(s->last_used_ms));
        json_object_set_new(root, "anchor",
                            json_pack("{s:I, s:b, s:I, s:o}", "generation", (json_int_t)s->anchor_gen, "present",
                                      in->anchor_present, "size", (json_int_t)in->anchor_size, "reset_intent",
                                      jstr(s->reset_intent)));
    } else {
        json_object_set_new(root, "created", json_null());
        json_object_set_new(root, "last_used", json_null());
        json_object_set_new(root, "anchor", json_null());
    }
    json_object_set_new(root, "ignored",
                        json_pack("{s:b, s:I}", "present", in->ignored_present, "size", (json_int_t)in->ignored_size));
    json_t *pd = json_array();
    for (size_t i = 0; i < in->n_pdirs; i++)
        json_array_append_new(pd,
                              json_pack("{s:o, s:b, s:I}", "path", jstr(in->pdirs[i].path), "present",
                                        in->pdirs[i].present, "size", (json_int_t)in->pdirs[i].size));
    json_object_set_new(root, "persistent_dirs", pd);
    json_object_set_new(root, "persistent_dirs_source",
                        !in->has_store || !in->anchor_present ? json_null()
                            : in->pdirs_from_config           ? json_string("configuration")
                                                              : json_string("anchor"));
    json_t *gens = json_array();
    for (size_t g = 0; in->has_store && g < s->n_gens; g++) {
        const struct lz_store_gen *ge = &s->gens[g];
        char hc[160];
        lz_procid_format(&ge->hc, hc, sizeof hc);
        json_t *o = json_pack("{s:I, s:s, s:o, s:o, s:o, s:s}", "generation", (json_int_t)ge->gen, "state", ge->state,
                              "started", jtime(ge->started_ms), "ended", jtime(ge->ended_ms), "fingerprint",
                              jstr(ge->fingerprint), "coordinator", hc);
        if (strcmp(ge->state, "clean") != 0) {
            json_t *parts = json_array(), *procs = json_array();
            size_t it = 0;
            for (const struct lz_store_part *p; (p = gen_part(s, ge->gen, &it));)
                json_array_append_new(parts,
                                      json_pack("{s:s, s:s, s:o, s:o, s:o}", "role", lz_role_name(p->role), "state",
                                                lz_pstate_name(p->state), "artifact_id", jstr(p->artifact_id), "mount",
                                                jstr(p->mount), "evidence", jstr(p->evidence)));
            for (size_t k = 0; k < s->n_procs; k++) {
                const struct lz_store_proc *p = &s->procs[k];
                if (p->gen != ge->gen)
                    continue;
                char id[160];
                lz_procid_format(&p->id, id, sizeof id);
                json_array_append_new(procs,
                                      json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "role", lz_role_name(p->role), "slot",
                                                p->slot, "phase", p->phase, "pid", (json_int_t)p->id.pid, "id", id,
                                                "alive", alive_word(in->proc_alive[k])));
            }
            json_t *sess = json_array();
            for (size_t k = 0; k < s->n_sessions; k++) {
                const struct lz_store_session *t = &s->sessions[k];
                if (t->gen != ge->gen)
                    continue;
                bool assigned = strcmp(t->phase, "unassigned") != 0;
                json_array_append_new(
                    sess,
                    json_pack("{s:I, s:s, s:b, s:o, s:s, s:o, s:o}", "session", (json_int_t)t->session, "state",
                              t->state, "tty", t->tty, "command", jstr(t->command), "phase", t->phase, "pid",
                              assigned ? json_integer(t->exec.pid) : json_null(), "alive",
                              assigned ? json_string(alive_word(in->session_alive[k])) : json_null()));
            }
            json_object_set_new(o, "participants", parts);
            json_object_set_new(o, "processes", procs);
            json_object_set_new(o, "sessions", sess);
        }
        json_array_append_new(gens, o);
    }
    json_object_set_new(root, "generations", gens);
    json_t *leases = json_array();
    for (size_t i = 0; i < in->n_leases; i++)
        json_array_append_new(leases,
                              json_pack("{s:s, s:I, s:o}", "artifact_id", in->leases[i].artifact_id, "generation",
                                        (json_int_t)in->leases[i].generation, "created",
                                        jtime(in->leases[i].created_ms)));
    json_object_set_new(root, "leases", leases);
    return root;
}

#define INSPECT_TEXT_GENS 10

static void inspect_text(const struct lz_domain_info *in) {
    const struct lz_store_snapshot *s = &in->snap;
    char sz[32], t1[32], t2[32];
    _cleanup_free_ char *prof = esc(in->profile), *ws = esc(in->workspace);
    printf("Domain       %s\n", in->id);
    printf("Profile      %s\n", prof);
    printf("Workspace    %s\n", ws);
    lz_cli_human_bytes(in->size, sz, sizeof sz);
    printf("Size         %s (the whole Domain Root)\n", sz);
    lz_cli_human_bytes(in->ignored_size, sz, sizeof sz);
    printf("Ignored      %s\n", in->ignored_present ? sz : "none yet");
    printf("             (the Ignored Workspace State: git-ignored files the sandbox made)\n");
    if (in->running) {
        printf("Status       running: its Host Coordinator holds the Domain; the Domain Store is not read\n"
               "             while it runs\n");
    } else if (!in->has_store) {
        printf("Status       inactive; no Domain Store yet (the Domain never started)\n");
    } else {
        lz_cli_iso_time(s->created_ms, t1, sizeof t1);
        lz_cli_iso_time(s->last_used_ms, t2, sizeof t2);
        printf("Status       inactive\n");
        printf("Created      %s\n", t1[0] ? t1 : "-");
        printf("Last use     %s\n", t2[0] ? t2 : "-");
        lz_cli_human_bytes(in->anchor_size, sz, sizeof sz);
        if (in->anchor_present)
            printf("\nState Anchor anchor-%" PRId64 " (%s)\n", s->anchor_gen, sz);
        else
            printf("\nState Anchor anchor-%" PRId64 " (not created yet)\n", s->anchor_gen);
        if (s->reset_intent) {
            _cleanup_free_ char *ri = esc(s->reset_intent);
            printf("  an interrupted reset still has to delete %s (`lazaret state reset` finishes it)\n", ri);
        }
        if (in->anchor_present && !in->n_pdirs)
            printf("  (no persistent dirs)\n");

        if (in->n_pdirs && !in->pdirs_from_config)
            printf("  (from the anchor's upper/: the Domain's profile could not be loaded)\n");
        for (size_t i = 0; i < in->n_pdirs; i++) {
            _cleanup_free_ char *p = esc(in->pdirs[i].path);
            lz_cli_human_bytes(in->pdirs[i].size, sz, sizeof sz);
            printf("  %-30s %s\n", p, in->pdirs[i].present ? sz : "(nothing written yet)");
        }
        size_t first = s->n_gens > INSPECT_TEXT_GENS ? s->n_gens - INSPECT_TEXT_GENS : 0;
        printf("\nGenerations (%zu", s->n_gens);
        if (first)
            printf("; the last %d shown, `--json` has all", INSPECT_TEXT_GENS);
        printf(")\n");
        if (s->n_gens)
            printf("  %-6s %-9s %-20s %-20s %s\n", "GEN", "STATE", "STARTED", "ENDED", "FINGERPRINT");
        for (size_t g = 0; g < s->n_gens; g++) {
            const struct lz_store_gen *ge = &s->gens[g];
            bool clean = !strcmp(ge->state, "clean");
            if (g < first && clean)
                continue;
            lz_cli_iso_time(ge->started_ms, t1, sizeof t1);
            lz_cli_iso_time(ge->ended_ms, t2, sizeof t2);
            _cleanup_free_ char *fp = esc(ge->fingerprint);
            printf("  %-6" PRId64 " %-9s %-20s %-20s %.12s\n", ge->gen, ge->state, t1[0] ? t1 : "-", t2[0] ? t2 : "-",
                   fp);
            if (clean)
                continue;
            printf("         interrupted: the next `lazaret run` in this Domain recovers it\n");
            size_t it = 0;
            for (const struct lz_store_part *p; (p = gen_part(s, ge->gen, &it));) {
                _cleanup_free_ char *ev = esc(p->evidence), *mt = esc(p->mount);
                printf("         %-15s %s", lz_role_name(p->role), lz_pstate_name(p->state));
                if (p->artifact_id)
                    printf(" artifact %.12s", p->artifact_id);
                if (p->mount)
                    printf(" mount %s", mt);
                if (p->evidence)
                    printf(" %s", ev);
                printf("\n");
            }
            for (size_t k = 0; k < s->n_procs; k++) {
                const struct lz_store_proc *p = &s->procs[k];
                if (p->gen == ge->gen)
                    printf("         process %s/%s pid %" PRId64 " (%s): %s\n", lz_role_name(p->role), p->slot,
                           p->id.pid, p->phase, alive_word(in->proc_alive[k]));
            }
            for (size_t k = 0; k < s->n_sessions; k++) {
                const struct lz_store_session *t = &s->sessions[k];
                if (t->gen != ge->gen || !strcmp(t->state, "clean"))
                    continue;
                _cleanup_free_ char *cmd = esc(t->command);
                printf("         session %" PRId64 " %s (%s)", t->session, t->state, cmd);
                if (strcmp(t->phase, "unassigned") != 0)
                    printf(": exec client pid %" PRId64 " (%s): %s", t->exec.pid, t->phase,
                           alive_word(in->session_alive[k]));
                printf("\n");
            }
        }
    }
    printf("\nLeases in the Storage Catalog\n");
    if (!in->n_leases)
        printf("  (none)\n");
    else
        printf("  %-12s  %-10s  %s\n", "ARTIFACT", "GENERATION", "CREATED");
    for (size_t i = 0; i < in->n_leases; i++) {
        lz_cli_iso_time(in->leases[i].created_ms, t1, sizeof t1);
        printf("  %-12.12s  %-10" PRId64 "  %s\n", in->leases[i].artifact_id, in->leases[i].generation,
               t1[0] ? t1 : "-");
    }
}

static int cmd_inspect(const struct lz_config *cfg, const char *config_path, const char *id, bool json) {
    _cleanup_domain_info_ struct lz_domain_info in = { 0 };
    struct lz_error err = { 0 };
    int r = lz_domain_inspect(cfg->data_root, config_path, id, &in, &err);
    if (r < 0) {
        lz_cli_error("state inspect: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    int ret = LZ_EXIT_OK;
    if (json)
        ret = lz_cli_print_json(inspect_json(&in));
    else
        inspect_text(&in);
    return ret;
}

/* ---- verify ---- */

struct finding {
    char id[LZ_DOMAIN_ID_HEX + 1]; /* "" for the Storage Root */
    char sev[8];
    char *msg;
};

struct findings {
    struct finding *v;
    size_t n;
};

static void on_finding(void *ud, const char *domain_id, const char *severity, const char *msg) {
    struct findings *f = ud;
    f->v = lz_xrealloc(f->v, (f->n + 1) * sizeof *f->v);
    struct finding *x = &f->v[f->n++];
    snprintf(x->id, sizeof x->id, "%s", domain_id ? domain_id : "");
    snprintf(x->sev, sizeof x->sev, "%s", severity);
    x->msg = lz_xstrdup(msg);
}

static const char *sev_word(const char *sev) {
    return !strcmp(sev, "error") ? "error" : !strcmp(sev, "warn") ? "warning" : "note";
}

static int cmd_verify(const struct lz_config *cfg, const char *config_path, char **ids, size_t n_ids, bool json) {
    struct findings f = { 0 };
    _cleanup_verify_result_ struct lz_verify_result res = { 0 };
    struct lz_error err = { 0 };
    int r = lz_domains_verify(cfg->data_root, config_path, (const char *const *)ids, n_ids, on_finding, &f, &res, &err);
    if (r < 0) {
        for (size_t i = 0; i < f.n; i++)
            free(f.v[i].msg);
        free(f.v);
        lz_cli_error("state verify: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    size_t n_running = 0;
    for (size_t i = 0; i < res.n; i++)
        n_running += res.v[i].running;
    int ret = res.n_errors ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
    if (json) {
        json_t *doms = json_array(), *root_f = json_array();
        for (size_t i = 0; i < res.n; i++) {
            const struct lz_domain_verdict *d = &res.v[i];
            json_t *fs = json_array();
            for (size_t k = 0; k < f.n; k++)
                if (!strcmp(f.v[k].id, d->id))
                    json_array_append_new(fs,
                                          json_pack("{s:s, s:o}", "severity", f.v[k].sev, "message", jstr(f.v[k].msg)));
            const char *status = d->running ? "running" : d->n_errors ? "error" : d->n_warnings ? "warning" : "ok";
            json_array_append_new(doms,
                                  json_pack("{s:s, s:o, s:o, s:s, s:b, s:I, s:I, s:o}", "id", d->id, "profile",
                                            jstr(d->profile), "workspace", jstr(d->workspace), "status", status,
                                            "verified", !d->running, "errors", (json_int_t)d->n_errors, "warnings",
                                            (json_int_t)d->n_warnings, "findings", fs));
        }
        for (size_t k = 0; k < f.n; k++)
            if (!f.v[k].id[0])
                json_array_append_new(root_f,
                                      json_pack("{s:s, s:o}", "severity", f.v[k].sev, "message", jstr(f.v[k].msg)));
        json_t *root = json_pack("{s:s, s:o, s:o, s:I, s:I, s:b}", "data_root", cfg->data_root, "domains", doms,
                                 "storage_root", root_f, "errors", (json_int_t)res.n_errors, "warnings",
                                 (json_int_t)res.n_warnings, "ok", res.n_errors == 0);
        if (lz_cli_print_json(root) != LZ_EXIT_OK)
            ret = LZ_EXIT_FAILURE;
    } else {
        for (size_t i = 0; i < res.n; i++) {
            const struct lz_domain_verdict *d = &res.v[i];
            _cleanup_free_ char *prof = esc(d->profile), *ws = esc(d->workspace);
            printf("Domain %.12s  %s  %s\n", d->id, prof, ws);
            for (size_t k = 0; k < f.n; k++) {
                if (strcmp(f.v[k].id, d->id) != 0)
                    continue;
                _cleanup_free_ char *m = esc(f.v[k].msg);
                if (d->running)
                    printf("  %s\n", m);
                else
                    printf("  %s: %s\n", sev_word(f.v[k].sev), m);
            }
            if (!d->running && !d->n_errors)
                printf("  %s\n", d->n_warnings ? "ok, with warnings" : "ok");
        }
        bool root_header = false;
        for (size_t k = 0; k < f.n; k++) {
            if (f.v[k].id[0])
                continue;
            if (!root_header)
                printf("Storage Root %s\n", cfg->data_root);
            root_header = true;
            _cleanup_free_ char *m = esc(f.v[k].msg);
            printf("  %s: %s\n", sev_word(f.v[k].sev), m);
        }
        printf("%zu Domain%s checked", res.n, res.n == 1 ? "" : "s");
        if (n_running)
            printf(" (%zu running, not verified)", n_running);
        printf(": %zu error%s, %zu warning%s; ", res.n_errors, res.n_errors == 1 ? "" : "s", res.n_warnings,
               res.n_warnings == 1 ? "" : "s");
        printf(res.n_errors ? "ERRORS FOUND (nothing was changed)\n" : "no errors\n");
    }
    for (size_t i = 0; i < f.n; i++)
        free(f.v[i].msg);
    free(f.v);
    return ret;
}

/* ---- reset ---- */

static void on_reset_log(void *ud, const char *msg) {
    const char *id = ud;
    _cleanup_free_ char *m = esc(msg);
    printf("%.12s: %s\n", id, m);
    fflush(stdout);
}

/* Asks on the terminal; false unless the answer is yes. */
static bool confirm(size_t n) {
    fprintf(stderr, "Reset %zu Domain(s)? [y/N] ", n);
    fflush(stderr);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return false;
    line[strcspn(line, "\r\n")] = '\0';
    return !strcmp(line, "y") || !strcmp(line, "Y") || !strcmp(line, "yes") || !strcmp(line, "YES");
}

static int cmd_reset(const struct lz_config *cfg, char **ids, size_t n_ids, bool all, bool yes, bool ignored_only) {
    if (!yes && !isatty(STDIN_FILENO)) {
        lz_cli_error("state reset: refusing to delete persistent state without confirmation: standard input is "
                     "not a terminal; pass --yes");
        return LZ_EXIT_USAGE;
    }
    struct lz_error err = { 0 };
    _cleanup_domain_list_ struct lz_domain_list l = { 0 };
    /* The listing (it walks every Domain Root) only when needed: to pick
     * the inactive Domains, or to show what the question is about. */
    int r = all || !yes ? lz_domains_list(cfg->data_root, &l, &err) : 0;
    if (r < 0) {
        lz_cli_error("state reset: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    int ret = LZ_EXIT_OK;
    /* The selection: what the user named, or every inactive Domain. */
    const char **sel = lz_xcalloc(all ? l.n : n_ids, sizeof *sel);
    size_t n_sel = 0;
    if (all) {
        for (size_t i = 0; i < l.n; i++) {
            /* A stopping one is waited for, a lingering one (no session
             * left) stopped: only sessions keep a Domain out. */
            if (l.v[i].running && lz_domain_serving(l.v[i].id)) {
                lz_cli_error("state reset: Domain %.12s is running with sessions; skipped (exit them, or run "
                             "`lazaret stop`, first)",
                             l.v[i].id);
                ret = LZ_EXIT_FAILURE;
            } else {
                sel[n_sel++] = l.v[i].id;
            }
        }
    } else {
        for (size_t i = 0; i < n_ids; i++)
            sel[n_sel++] = ids[i];
    }
    if (!n_sel) {
        printf("nothing to reset\n");
        free(sel);
        return ret;
    }
    if (!yes) {
        fprintf(stderr,
                ignored_only ? "This deletes the git-ignored files the sandbox kept (the Ignored Workspace State):\n"
                             : "This deletes everything the sandbox kept in its persistent dirs (the State "
                               "Anchor) and its git-ignored files (the Ignored Workspace State):\n");
        for (size_t i = 0; i < n_sel; i++) {
            const struct lz_domain_summary *s = NULL;
            for (size_t k = 0; k < l.n; k++)
                if (!strcmp(l.v[k].id, sel[i]))
                    s = &l.v[k];
            _cleanup_free_ char *prof = esc(s ? s->profile : NULL), *ws = esc(s ? s->workspace : NULL);
            fprintf(stderr, "  %.12s  %s  %s\n", sel[i], prof, ws);
        }
        if (!confirm(n_sel)) {
            fprintf(stderr, "nothing was reset\n");
            free(sel);
            return LZ_EXIT_FAILURE;
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < n_sel; i++) {
        err = (struct lz_error){ 0 };
        r = ignored_only ? lz_domain_reset_ignored(cfg->data_root, sel[i], on_reset_log, (void *)sel[i], &err)
                         : lz_domain_reset(cfg->data_root, sel[i], on_reset_log, (void *)sel[i], &err);
        if (r < 0) {
            lz_cli_error("state reset: %.12s: %s", sel[i], err.msg);
            ret = LZ_EXIT_FAILURE;
            continue;
        }
        printf("%.12s: reset\n", sel[i]);
        done++;
    }
    if (n_sel > 1 || all)
        printf("%zu of %zu Domain%s reset\n", done, n_sel, n_sel == 1 ? "" : "s");
    free(sel);
    return ret;
}

/* `lazaret state __rm-tree FD NAME`: the deletion helper that
 * lz_domain_reset starts inside the Domain's user namespace. */
static int rm_tree_helper(int argc, char **argv) {
    if (argc != 4)
        return LZ_EXIT_USAGE;
    char *end;
    errno = 0;
    long fd = strtol(argv[2], &end, 10);
    struct stat st;
    if (errno || *end || fd < 3 || fd > 65535 || fstat((int)fd, &st) < 0 || !S_ISDIR(st.st_mode))
        return LZ_EXIT_USAGE;
    int r = lz_domain_rm_tree_child((int)fd, argv[3]);
    return r < 0 ? (-r < 128 ? -r : EIO) : 0;
}

/* ---- arguments ---- */

/* Without --workspace only the Storage Root is needed, but loading the
 * configuration also resolves a workspace, the current directory, which
 * may contain the configuration file ($HOME) or the Storage Root and then
 * refuses. /proc can do neither, so it is tried next; the first error is
 * the one reported. */
static int load_config(const char *config_path, const char *profile, const char *workspace, struct lz_config **ret,
                       struct lz_error *err) {
    struct lz_config_opts o = { .config_path = config_path, .profile = profile, .workspace = workspace };
    int r = lz_config_load(&o, ret, err);
    if (r >= 0 || workspace)
        return r;
    o.workspace = "/proc";
    return lz_config_load(&o, ret, NULL) >= 0 ? 0 : r;
}

/* `state diff` and `state apply PATH` (state_hosttools.c): the Domain of
 * the workspace (default: the current directory) and the profile. */
static int cmd_host_tools(const char *sub, const char *config_path, const char *profile, const char *workspace,
                          char **args, size_t n_args) {
    bool apply = !strcmp(sub, "apply");
    if (apply ? n_args != 1 : n_args != 0) {
        lz_cli_error(apply ? "state apply: expects one PATH (relative to the workspace root)"
                           : "state diff: takes no argument (the Domain is the workspace's: --workspace, -p)");
        return LZ_EXIT_USAGE;
    }
    struct lz_config *cfg = NULL;
    struct lz_error err = { 0 };
    struct lz_config_opts o = { .config_path = config_path, .profile = profile, .workspace = workspace };
    if (lz_config_load(&o, &cfg, &err) < 0) {
        lz_cli_error("state %s: %s", sub, err.msg);
        return LZ_EXIT_FAILURE;
    }
    int ret = apply ? lz_state_apply(cfg, args[0]) : lz_state_diff(cfg);
    lz_config_free(cfg);
    return ret;
}

int lz_cmd_state(int argc, char **argv) {
    int ret;
    if (lz_cli_help_first(argc, argv, usage, &ret))
        return ret;
    const char *sub = argv[1];
    if (!strcmp(sub, "__rm-tree"))
        return rm_tree_helper(argc, argv);
    bool is_ls = !strcmp(sub, "ls"), is_inspect = !strcmp(sub, "inspect"), is_verify = !strcmp(sub, "verify"),
         is_reset = !strcmp(sub, "reset"), is_ht = !strcmp(sub, "diff") || !strcmp(sub, "apply");
    if (!is_ls && !is_inspect && !is_verify && !is_reset && !is_ht) {
        lz_cli_error("state: unknown subcommand \"%s\" (expected ls, inspect, verify, reset, diff or apply)", sub);
        return LZ_EXIT_USAGE;
    }
    const char *config_path = NULL, *profile = NULL, *workspace = NULL;
    bool json = false, all = false, yes = false, ignored_only = false;
    const struct lz_cli_option opts[] = {
        { "config", 0, &config_path, NULL },
        { "profile", 'p', &profile, NULL },
        { "workspace", 0, &workspace, NULL },
        { "json", 0, NULL, &json },
        { "all", 0, NULL, &all },
        { "yes", 0, NULL, &yes },
        { "ignored-only", 0, NULL, &ignored_only },
        { NULL, 0, NULL, NULL },
    };
    char **args;
    size_t n_args;
    int st;
    /* Options may follow DOMAIN arguments (`state inspect 3f2a --json`). */
    if (!lz_cli_getopt_sub(argc, argv, "state", opts, false, usage, &args, &n_args, &st))
        return st;
    if (is_ht && (json || all || yes || ignored_only)) {
        lz_cli_error("state %s: option %s does not apply", sub,
                     json      ? "--json"
                         : all ? "--all"
                         : yes ? "--yes"
                               : "--ignored-only");
        return LZ_EXIT_USAGE;
    }
    if (is_ht)
        return cmd_host_tools(sub, config_path, profile, workspace, args, n_args);
    if (json && is_reset) {
        lz_cli_error("state reset: option --json does not apply");
        return LZ_EXIT_USAGE;
    }
    if ((all || yes || ignored_only) && !is_reset) {
        lz_cli_error("state %s: option %s does not apply", sub, all ? "--all" : yes ? "--yes" : "--ignored-only");
        return LZ_EXIT_USAGE;
    }
    if (is_ls && (n_args || workspace)) {
        lz_cli_error("state ls: takes no Domain (it lists them all)");
        return LZ_EXIT_USAGE;
    }
    if (all && (n_args || workspace)) {
        lz_cli_error("state reset: give Domains or --all, not both");
        return LZ_EXIT_USAGE;
    }
    if (workspace && n_args) {
        lz_cli_error("state %s: give Domain IDs or --workspace, not both", sub);
        return LZ_EXIT_USAGE;
    }
    if (is_inspect && n_args + (workspace ? 1 : 0) != 1) {
        lz_cli_error("state inspect: expects one Domain (an ID, a prefix, or --workspace PATH)");
        return LZ_EXIT_USAGE;
    }
    if (is_reset && !all && !n_args && !workspace) {
        lz_cli_error("state reset: which Domain? give its ID or a prefix, --workspace PATH, or --all");
        return LZ_EXIT_USAGE;
    }

    struct lz_config *cfg = NULL;
    struct lz_error err = { 0 };
    int r = load_config(config_path, profile, workspace, &cfg, &err);
    if (r < 0) {
        lz_cli_error("state %s: %s", sub, err.msg);
        if (!profile && r == -ENOENT && strstr(err.msg, "is not defined"))
            fprintf(stderr, "(the configuration is read through a profile: pass -p NAME with one it defines)\n");
        return LZ_EXIT_FAILURE;
    }
    /* Every DOMAIN argument as a full, existing ID. */
    size_t n_ids = workspace ? 1 : n_args;
    char **ids = lz_xcalloc(n_ids ? n_ids : 1, sizeof *ids);
    ret = LZ_EXIT_OK;
    for (size_t i = 0; i < n_ids && ret == LZ_EXIT_OK; i++) {
        char id[LZ_DOMAIN_ID_HEX + 1];
        err = (struct lz_error){ 0 };
        r = lz_domains_resolve(cfg->data_root, workspace ? cfg->domain_id_hex : args[i], id, &err);
        if (r < 0) {
            if (workspace && r == -ENOENT) {
                _cleanup_free_ char *ws = esc(cfg->workspace);
                lz_cli_error("state %s: profile %s has no Domain for workspace %s (Domain ID %.12s): it never ran "
                             "there",
                             sub, cfg->profile.name, ws, cfg->domain_id_hex);
            } else {
                lz_cli_error("state %s: %s", sub, err.msg);
            }
            ret = LZ_EXIT_FAILURE;
            break;
        }
        ids[i] = lz_xstrdup(id);
    }
    if (ret == LZ_EXIT_OK) {
        /* The same Domain named twice counts once. */
        size_t m = 0;
        for (size_t i = 0; i < n_ids; i++) {
            bool dup = false;
            for (size_t k = 0; k < m; k++)
                dup = dup || !strcmp(ids[k], ids[i]);
            if (dup)
                free(ids[i]);
            else
                ids[m++] = ids[i];
        }
        n_ids = m;
        if (is_ls)
            ret = cmd_ls(cfg, json);
        else if (is_inspect)
            ret = cmd_inspect(cfg, config_path, ids[0], json);
        else if (is_verify)
            ret = cmd_verify(cfg, config_path, ids, n_ids, json);
        else
            ret = cmd_reset(cfg, ids, n_ids, all, yes, ignored_only);
    }
    for (size_t i = 0; i < n_ids; i++)
        free(ids[i]);
    free(ids);
    lz_config_free(cfg);
    return ret;
}
