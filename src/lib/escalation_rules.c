/* escalation_rules.c — lz_esc_decide and the test-hook rule source
 * (escalation.h). Free of coordinator state, so unit tests link it alone. */
#include "escalation.h"

#include <limits.h>

int lz_esc_decide(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule) {
    /* One matcher for the configuration and the HC (autoapprove.h):
     * byte-equal argv[0], no PATH lookup, no shell. */
    if (!p || r->argc == 0 || !r->argv[0] || r->argv[0][0] != '/')
        return LZ_ESC_PROMPT;
    return lz_autoapprove_match(p->rules, p->n_rules, r->argv, r->argc, ret_rule) ? LZ_ESC_AUTO : LZ_ESC_PROMPT;
}

void lz_esc_policy_clear(struct lz_esc_policy *p) {
    for (size_t i = 0; i < p->n_rules && !p->borrowed; i++) {
        for (size_t k = 0; k < p->rules[i].argc; k++)
            free(p->rules[i].argv[k]);
        free(p->rules[i].argv);
    }
    free(p->rules);
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
