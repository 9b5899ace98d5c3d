/* escalation_rules.c — lz_esc_decide and the test-hook rule source
 * (escalation.h). Free of coordinator state, so unit tests link it alone. */
#include "escalation.h"

#include <limits.h>

/* The working directory the sandbox asks for when it names none. */
#define ESC_DEFAULT_CWD "/workspace"
/* The extra arguments' '/' (and '~') checked per request (see below). */
#define ESC_EXTRA_SLASHES_MAX 256

int lz_esc_decide_why(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule, char *why,
                      size_t why_size) {
    if (why && why_size)
        why[0] = '\0';
    if (!p || r->argc == 0 || !r->argv || !r->argv[0] || r->argv[0][0] != '/')
        return LZ_ESC_PROMPT;
    /* argv[0] as the host resolves it now, absolute only (no PATH lookup):
     * /bin/echo names the rule's /usr/bin/echo on a merged-/usr system.
     * Only the comparison uses it; what runs is the rule's own path
     * (escalation.h), so what the link names later does not matter. */
    char canon[PATH_MAX];
    bool have_canon = realpath(r->argv[0], canon) != NULL && strcmp(canon, r->argv[0]) != 0;
    char **v = lz_xcalloc(r->argc + 1, sizeof *v);
    memcpy(v, r->argv, r->argc * sizeof *v);
    const char *cwd = r->cwd && *r->cwd ? r->cwd : ESC_DEFAULT_CWD;
    int d = LZ_ESC_PROMPT;
    for (size_t i = 0; i < p->n_rules && d == LZ_ESC_PROMPT; i++) {
        const struct lz_esc_rule *rule = &p->rules[i];
        v[0] = r->argv[0];
        bool m = lz_autoapprove_match(rule, 1, v, r->argc, NULL);
        if (!m && have_canon) {
            v[0] = canon;
            m = lz_autoapprove_match(rule, 1, v, r->argc, NULL);
        }
        if (!m)
            continue;
        if (!rule->cwd_workspace && strcmp(cwd, ESC_DEFAULT_CWD) != 0) {
            if (why && why_size)
                snprintf(why, why_size,
                         "rule %zu runs in a fresh empty directory and the request asks for --cwd %s; asked instead",
                         i + 1, cwd);
            continue;
        }
        bool bad = false;
        /* Each '/' of an extra argument costs host lookups on the
         * coordinator's event loop: a request with more is asked. */
        size_t slashes = 0;
        for (size_t j = rule->argc; j < r->argc; j++)
            for (const char *c = r->argv[j]; *c; c++)
                slashes += *c == '/' || *c == '~';
        if (slashes > ESC_EXTRA_SLASHES_MAX) {
            if (why && why_size)
                snprintf(why, why_size, "rule %zu: the extra arguments have more than %d '/' to check; asked instead",
                         i + 1, ESC_EXTRA_SLASHES_MAX);
            continue;
        }
        for (size_t j = rule->argc; j < r->argc && !bad; j++) {
            char w[512];
            if (lz_autoapprove_arg_reaches(r->argv[j], (const char *const *)p->trees, p->n_trees, NULL, w, sizeof w) <
                0) {
                if (why && why_size)
                    snprintf(why, why_size, "rule %zu: argv[%zu]: %s; asked instead", i + 1, j, w);
                bad = true;
            }
        }
        if (bad)
            continue;
        if (ret_rule)
            *ret_rule = i;
        d = LZ_ESC_AUTO;
    }
    free(v);
    return d;
}

int lz_esc_decide(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule) {
    return lz_esc_decide_why(p, r, ret_rule, NULL, 0);
}

void lz_esc_policy_clear(struct lz_esc_policy *p) {
    for (size_t i = 0; i < p->n_rules && !p->borrowed; i++) {
        for (size_t k = 0; k < p->rules[i].argc; k++)
            free(p->rules[i].argv[k]);
        free(p->rules[i].argv);
    }
    free(p->rules);
    lz_strv_free(p->trees, p->n_trees);
    *p = (struct lz_esc_policy){ 0 };
}

int lz_esc_rules_parse(const char *spec, struct lz_esc_policy *ret, struct lz_error *err) {
    struct lz_esc_policy p = { 0 };
    for (const char *rs = spec; rs && *rs;) {
        const char *re = strchr(rs, '\x1e');
        size_t rl = re ? (size_t)(re - rs) : strlen(rs);
        struct lz_esc_rule u = { 0 };
        for (size_t off = 0; off <= rl;) {
            const char *fe = memchr(rs + off, '\x1f', rl - off);
            size_t fl = fe ? (size_t)(fe - (rs + off)) : rl - off;
            if (u.argc == 0 && !u.allow_extra_args && fl == 1 && rs[off] == '+') {
                u.allow_extra_args = true;
            } else if (u.argc == 0 && !u.cwd_workspace && fl == 10 && memcmp(rs + off, "@workspace", 10) == 0) {
                u.cwd_workspace = true;
            } else {
                u.argv = lz_xrealloc(u.argv, (u.argc + 2) * sizeof *u.argv);
                u.argv[u.argc++] = lz_xstrndup(rs + off, fl);
                u.argv[u.argc] = NULL;
            }
            off += fl + 1;
        }
        char canon[PATH_MAX];
        bool ok = u.argc >= 1 && u.argv[0][0] == '/' && realpath(u.argv[0], canon) && !strcmp(canon, u.argv[0]);
        p.rules = lz_xrealloc(p.rules, (p.n_rules + 1) * sizeof *p.rules);
        p.rules[p.n_rules++] = u;
        if (!ok) {
            int r = lz_error_set(err, -EINVAL, "auto-approval rule %zu: %s is not a canonical absolute path", p.n_rules,
                                 u.argc ? u.argv[0] : "(empty)");
            lz_esc_policy_clear(&p);
            return r;
        }
        rs = re ? re + 1 : NULL;
    }
    *ret = p;
    return 0;
}
