/* gitscan.c — see gitscan.h; the modules of the scan: gitscan_int.h. The
 * bottom layer: it calls nothing of gitscan_git.c or gitscan_walk.c. */
#include "gitscan_int.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- pure parts -------------------------------------------------------- */

char *lz_gitscan_join(const char *value, const char *base, const char *home) {
    if (!value || !value[0])
        return NULL;
    if (value[0] == '/')
        return lz_xstrdup(value);
    if (value[0] == '~') {
        /* Git expands `~/` and `~user/`; the latter names another user's
         * home, never the workspace of this one unless it is inside it,
         * which Lazaret does not support. */
        if (value[1] != '/' && value[1] != '\0')
            return NULL;
        if (!home)
            return NULL;
        return lz_xasprintf("%s%s", home, value + 1);
    }
    if (!base)
        return NULL;
    return lz_xasprintf("%s/%s", base, value);
}

const char *lz_gitscan_rel(const char *ws, const char *p) {
    size_t wl = strlen(ws);
    if (wl == 1 && ws[0] == '/')
        return p[0] == '/' ? p + 1 : NULL;
    if (strncmp(p, ws, wl) != 0)
        return NULL;
    if (p[wl] == '\0')
        return p + wl;
    if (p[wl] != '/')
        return NULL;
    return p + wl + 1;
}

char *lz_gs_path_child(const char *d, const char *c) { return lz_xasprintf("%s%s%s", d, strcmp(d, "/") ? "/" : "", c); }

static void path_up(char *d) {
    char *s = strrchr(d, '/');
    if (!s)
        return;
    if (s == d)
        d[1] = '\0';
    else
        *s = '\0';
}

char *lz_gitscan_canon(const char *abs, void (*on_link)(void *ud, const char *link), void *ud) {
    if (!abs || abs[0] != '/')
        return NULL;
    /* The components still to walk, as one string consumed from the front;
     * a symlink's target is put in front of the rest. */
    char *todo = lz_xstrdup(abs);
    char *cur = lz_xstrdup("/");
    int links = 0;
    for (;;) {
        char *p = todo;
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchr(p, '/');
        size_t cl = end ? (size_t)(end - p) : strlen(p);
        _cleanup_free_ char *c = lz_xstrndup(p, cl);
        char *rest = lz_xstrdup(p + cl);
        free(todo);
        todo = rest;
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            path_up(cur);
            continue;
        }
        char *cand = lz_gs_path_child(cur, c);
        struct stat st;
        if (lstat(cand, &st) < 0) {
            /* Missing: the rest as written, unless a `..` in it would make
             * the result depend on what the agent creates there. */
            bool dotdot = false;
            for (char *q = todo; (q = strstr(q, "..")) != NULL; q += 2)
                if ((q == todo || q[-1] == '/') && (q[2] == '/' || q[2] == '\0'))
                    dotdot = true;
            if (!dotdot) {
                char *full = lz_xasprintf("%s%s", cand, todo);
                /* collapse "//" and "/./" of the written remainder */
                char *w = full;
                for (char *r = full; *r;) {
                    if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || r[2] == '\0')))) {
                        r += r[1] == '/' ? 1 : 2;
                        continue;
                    }
                    *w++ = *r++;
                }
                *w = '\0';
                if (w > full + 1 && w[-1] == '/')
                    w[-1] = '\0';
                free(cand);
                cand = full;
            }
            free(cur);
            free(todo);
            return cand;
        }
        if (S_ISLNK(st.st_mode)) {
            if (++links > 40) {
                free(cand);
                free(cur);
                free(todo);
                return NULL;
            }
            if (on_link)
                on_link(ud, cand);
            char tgt[PATH_MAX];
            ssize_t n = readlink(cand, tgt, sizeof tgt - 1);
            free(cand);
            if (n < 0) {
                free(cur);
                free(todo);
                return NULL;
            }
            tgt[n] = '\0';
            char *nt = lz_xasprintf("%s/%s", tgt, todo);
            free(todo);
            todo = nt;
            if (tgt[0] == '/') {
                free(cur);
                cur = lz_xstrdup("/");
            }
            continue;
        }
        free(cur);
        cur = cand;
        if (!S_ISDIR(st.st_mode) && *todo) {
            /* A file with more components: the kernel says ENOTDIR; keep
             * the path as written, it can never be opened as such. */
            char *full = lz_xasprintf("%s%s", cur, todo);
            free(cur);
            free(todo);
            return full;
        }
    }
    free(todo);
    return cur;
}

static bool is_sep(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '|' || c == '&' || c == '(' ||
        c == ')' || c == '<' || c == '>' || c == '"' || c == '\'' || c == '{' || c == '}';
}

size_t lz_gitscan_tokens(const char *script, char ***ret) {
    struct strv out = { 0 };
    const char *p = script;
    bool line_start = true;
    while (*p) {
        if (line_start) {
            const char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q == '#') {
                /* a comment line (also the shebang: its interpreter is
                 * outside the workspace, or found below as a word) */
                const char *nl = strchr(q, '\n');
                p = nl ? nl + 1 : q + strlen(q);
                continue;
            }
        }
        line_start = false;
        if (*p == '\n')
            line_start = true;
        if (is_sep(*p)) {
            p++;
            continue;
        }
        /* `# comment` after a blank */
        if (*p == '#' && p > script && (p[-1] == ' ' || p[-1] == '\t')) {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        const char *s = p;
        while (*p && !is_sep(*p))
            p++;
        _cleanup_free_ char *w = lz_xstrndup(s, (size_t)(p - s));
        const char *v = w;
        if (v[0] == '-') {
            const char *eq = strchr(v, '=');
            if (!eq)
                continue;
            v = eq + 1;
        } else {
            size_t il = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789");
            if (il > 0 && v[il] == '=' && !isdigit((unsigned char)v[0]))
                v += il + 1; /* VAR=value */
        }
        if (!v[0] || strpbrk(v, "$`*?[\\") || !strcmp(v, ".") || !strcmp(v, ".."))
            continue;
        strv_add(&out, v);
    }
    *ret = out.v;
    return out.n;
}

/* Whether word w occurs in s delimited by non-word characters. */
static bool has_word(const char *s, const char *w) {
    size_t wl = strlen(w);
    for (const char *p = s; (p = strstr(p, w)) != NULL; p++) {
        bool l = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-' || p[-1] == '.');
        char r = p[wl];
        bool rr = !(isalnum((unsigned char)r) || r == '_' || r == '-');
        if (l && rr)
            return true;
    }
    return false;
}

unsigned lz_gitscan_managers(const char *script, const char *hooks_dir) {
    unsigned m = 0;
    if (hooks_dir) {
        size_t l = strlen(hooks_dir);
        while (l > 1 && hooks_dir[l - 1] == '/')
            l--;
        if (l >= 8 && !strncmp(hooks_dir + l - 8, ".husky/_", 8) && (l == 8 || hooks_dir[l - 9] == '/'))
            m |= LZ_HM_HUSKY9;
    }
    if (!script)
        return m;
    if (strstr(script, "husky") && !(m & LZ_HM_HUSKY9)) {
        /* husky v9's own hook is `. "$(dirname "$0")/h"`; v4's scripts
         * source husky.sh or run node_modules/husky/run.js */
        if (strstr(script, "husky.sh") || strstr(script, "husky/run") || strstr(script, "husky/lib") ||
            strstr(script, "husky-run") || strstr(script, "husky v4") || strstr(script, "husky > "))
            m |= LZ_HM_HUSKY4;
        else if (strstr(script, ".husky/"))
            m |= LZ_HM_HUSKY9;
        else
            m |= LZ_HM_HUSKY4;
    }
    if (strstr(script, "hook-impl") || strstr(script, "pre_commit") || strstr(script, "pre-commit.com"))
        m |= LZ_HM_PRECOMMIT;
    if (strstr(script, "lefthook"))
        m |= LZ_HM_LEFTHOOK;
    if (strstr(script, "simple-git-hooks") || strstr(script, "SIMPLE_GIT_HOOKS"))
        m |= LZ_HM_SIMPLE_GIT_HOOKS;
    static const char *const runners[] = { "npx", "npm", "yarn", "pnpm", "pnpx", "bun", "bunx", "make", "gmake" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(runners); i++)
        if (has_word(script, runners[i]))
            m |= LZ_HM_PACKAGE_RUNNER;
    if (strstr(script, "node_modules"))
        m |= LZ_HM_PACKAGE_RUNNER;
    return m;
}

char *lz_gitscan_precommit_config(const char *script) {
    const char *p = script ? strstr(script, "--config") : NULL;
    if (p) {
        p += 8;
        if (*p == '=' || *p == ' ' || *p == '\t') {
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            char q = (*p == '"' || *p == '\'') ? *p++ : 0;
            const char *s = p;
            while (*p && (q ? *p != q : !is_sep(*p)))
                p++;
            if (p > s && !memchr(s, '$', (size_t)(p - s)))
                return lz_xstrndup(s, (size_t)(p - s));
        }
    }
    return lz_xstrdup(".pre-commit-config.yaml");
}

size_t lz_gitscan_next_entry(char *buf, size_t len, size_t off, bool with_scope, struct lz_gitcfg_entry *e) {
    *e = (struct lz_gitcfg_entry){ 0 };
    char *fields[3] = { NULL, NULL, NULL };
    size_t nf = with_scope ? 3 : 2;
    size_t o = off;
    for (size_t i = 0; i < nf; i++) {
        if (o >= len)
            return 0;
        char *z = memchr(buf + o, '\0', len - o);
        if (!z)
            return 0;
        fields[i] = buf + o;
        o = (size_t)(z - buf) + 1;
    }
    size_t k = 0;
    if (with_scope)
        e->scope = fields[k++];
    e->origin = fields[k++];
    char *key = fields[k];
    char *nl = strchr(key, '\n');
    if (nl) {
        *nl = '\0';
        e->value = nl + 1;
    }
    e->key = key;
    return o;
}

char *lz_gs_dir_of(const char *path) {
    char *d = lz_xstrdup(path);
    path_up(d);
    return d;
}

/* ---- the scan's record -------------------------------------------------- */

__attribute__((format(printf, 1, 0))) static char *format_v(const char *fmt, va_list ap) {
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    return m;
}

void lz_gs_notice(struct scan *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = format_v(fmt, ap);
    va_end(ap);
    if (!strv_has(&s->notices, m))
        strv_push(&s->notices, m);
    else
        free(m);
}

void lz_gs_log(struct scan *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    strv_push(&s->log, format_v(fmt, ap));
    va_end(ap);
}

/* Protects canonical path p when it lies inside the workspace. */
static void protect_canon(struct scan *s, const char *p, const char *why) {
    const char *rel = lz_gitscan_rel(s->ws, p);
    if (!rel)
        return;
    if (!rel[0]) {
        lz_gs_notice(s,
                     "%s is the workspace itself; Lazaret cannot keep the whole workspace read-only, so this "
                     "is not protected: point it outside the workspace",
                     why);
        return;
    }
    if (strv_add(&s->protect, rel))
        lz_gs_log(s, "%s: %s is kept read-only", why, rel);
}

struct link_ud {
    struct scan *s;
    const char *why;
};

static void on_link(void *ud, const char *link) {
    struct link_ud *l = ud;
    protect_canon(l->s, link, l->why);
}

char *lz_gs_protect_path(struct scan *s, const char *abs, const char *why) {
    struct link_ud l = { s, why };
    char *c = lz_gitscan_canon(abs, on_link, &l);
    if (c)
        protect_canon(s, c, why);
    return c;
}

/* ---- the result --------------------------------------------------------- */

void lz_gitscan_clear(struct lz_gitscan *g) {
    struct strv a = { g->protect, g->n_protect }, b = { g->notices, g->n_notices }, c = { g->log, g->n_log };
    strv_clear(&a);
    strv_clear(&b);
    strv_clear(&c);
    *g = (struct lz_gitscan){ 0 };
}
