/* gitscan.c — see gitscan.h; the modules of the scan: gitscan_int.h. */
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

/* ---- entry point -------------------------------------------------------- */

/* name with control characters, backslash and non-ASCII as \xNN */
static void escape_into(char *out, size_t cap, size_t *pos, const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p && *pos + 5 < cap; p++) {
        if (*p < 0x20 || *p >= 0x7f || *p == '\\')
            *pos += (size_t)snprintf(out + *pos, cap - *pos, "\\x%02x", *p);
        else
            out[(*pos)++] = (char)*p;
    }
    out[*pos] = '\0';
}

static size_t env_size(const char *name, size_t def) {
    const char *v = getenv(name);
    if (!v || !v[0])
        return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x == 0)
        return def;
    return (size_t)x;
}

void lz_gitscan_clear(struct lz_gitscan *g) {
    struct strv a = { g->protect, g->n_protect }, b = { g->notices, g->n_notices }, c = { g->log, g->n_log };
    strv_clear(&a);
    strv_clear(&b);
    strv_clear(&c);
    *g = (struct lz_gitscan){ 0 };
}

int lz_gitscan_run(const char *workspace, const struct lz_gitscan_opts *o, struct lz_gitscan *ret,
                   struct lz_error *err) {
    struct lz_gitscan out = { 0 };
    struct scan s = { .out = &out };
    s.ws = realpath(workspace, NULL);
    if (!s.ws)
        return lz_error_set(err, -errno, "cannot resolve the workspace %s: %s", workspace, strerror(errno));
    s.home = lz_home_dir();
    s.max_entries =
        o && o->max_entries ? o->max_entries : env_size(LZ_GITSCAN_ENV_MAX_ENTRIES, LZ_GITSCAN_MAX_ENTRIES_DEFAULT);
    s.max_depth =
        o && o->max_depth ? o->max_depth : (unsigned)env_size(LZ_GITSCAN_ENV_MAX_DEPTH, LZ_GITSCAN_MAX_DEPTH_DEFAULT);
    s.timeout_ms = o && o->timeout_ms ? o->timeout_ms : 10000;
    s.git = o && o->git ? lz_xstrdup(o->git) : lz_gs_find_git();
    int r = 0;
    if (!s.git) {
        out.git_missing = true;
        lz_gs_log(&s, "git is not installed on this host: there is no host Git configuration to protect");
        goto done;
    }
    s.envp = lz_gs_clean_env();
    /* The workspace itself first: the developer's global and system
     * configuration apply even where the workspace is no repository, and
     * a workspace inside a repository is governed by that one. */
    lz_gs_scan_repo(&s, s.ws, NULL);
    {
        _cleanup_close_ int fd = open(s.ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            r = lz_error_set(err, -errno, "cannot open the workspace %s: %s", s.ws, strerror(errno));
            goto done;
        }
        r = lz_gs_walk_tree(&s, fd, s.ws, 0);
    }
    if (s.bound) {
        if (!strcmp(s.bound, "entries"))
            r = lz_error_set(err, -E2BIG,
                             "the workspace has more than %zu directory entries, the bound of Lazaret's scan for "
                             "Git repositories; start from a smaller directory or raise it with %s=N",
                             s.max_entries, LZ_GITSCAN_ENV_MAX_ENTRIES);
        else
            r = lz_error_set(err, -E2BIG,
                             "the workspace has directories nested deeper than %u, the bound of Lazaret's scan for "
                             "Git repositories; raise it with %s=N",
                             s.max_depth, LZ_GITSCAN_ENV_MAX_DEPTH);
        goto done;
    }
    if (r < 0) {
        r = lz_error_set(err, r, "cannot scan the workspace for Git repositories: %s", strerror(-r));
        goto done;
    }
    if (s.links.n) {
        char msg[LZ_ERROR_MAX - 200];
        size_t pos = 0;
        msg[0] = '\0';
        size_t shown = 0;
        for (; shown < s.links.n && pos + 40 < sizeof msg - 200; shown++) {
            if (shown)
                pos += (size_t)snprintf(msg + pos, sizeof msg - pos, ", ");
            escape_into(msg, sizeof msg - 200, &pos, s.links.v[shown]);
        }
        if (shown < s.links.n)
            pos += (size_t)snprintf(msg + pos, sizeof msg - pos, " and %zu more", s.links.n - shown);
        r = lz_error_set(err, -EPERM,
                         "a Git directory of the workspace holds a link: %s; the host's git would write through "
                         "this link; check who made it, remove it, then run again",
                         msg);
        goto done;
    }
    if (s.bad_index.n) {
        char msg[LZ_ERROR_MAX - 300];
        size_t pos = 0;
        msg[0] = '\0';
        escape_into(msg, sizeof msg, &pos, s.bad_index.v[0]);
        r = lz_error_set(err, -EPERM,
                         "a Git index of the workspace is unsafe for the host's git: %s%s; its entries would make "
                         "`git checkout`/`git restore` write there; inspect it with `git ls-files --stage`, then "
                         "rebuild it (`rm INDEX && git reset`) and run again",
                         msg, s.bad_index.n > 1 ? " (and more)" : "");
        goto done;
    }
    if (s.protect.n > 1)
        qsort(s.protect.v, s.protect.n, sizeof *s.protect.v, lz_cmp_strp);
    /* A path below another protected one is covered by it. */
    {
        _cleanup_free_ bool *covered = lz_xcalloc(s.protect.n ? s.protect.n : 1, sizeof *covered);
        for (size_t i = 0; i < s.protect.n; i++) {
            _cleanup_free_ char *p = lz_xstrdup(s.protect.v[i]);
            for (char *q = strchr(p, '/'); q && !covered[i]; q = strchr(q + 1, '/')) {
                *q = '\0';
                const char *key = p;
                covered[i] = bsearch(&key, s.protect.v, s.protect.n, sizeof *s.protect.v, lz_cmp_strp) != NULL;
                *q = '/';
            }
        }
        size_t w = 0;
        for (size_t i = 0; i < s.protect.n; i++) {
            if (covered[i])
                free(s.protect.v[i]);
            else
                s.protect.v[w++] = s.protect.v[i];
        }
        s.protect.n = w;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < s.protect.n; i++)
        bytes += strlen(s.protect.v[i]) + 1 + sizeof("--protect") + 2 * sizeof(char *);
    if (s.protect.n > LZ_GITSCAN_MAX_PROTECT || bytes > LZ_GITSCAN_MAX_PROTECT_BYTES) {
        r = lz_error_set(err, -E2BIG,
                         "the host's Git configuration names %zu paths in the workspace (%zu bytes) that must be "
                         "kept read-only, more than Lazaret can pass (%d paths, %d bytes); see `lazaret config "
                         "check` and reduce the includes and hook files inside the workspace",
                         s.protect.n, bytes, LZ_GITSCAN_MAX_PROTECT, LZ_GITSCAN_MAX_PROTECT_BYTES);
        goto done;
    }
done:
    if (r >= 0) {
        out.protect = TAKE_PTR(s.protect.v);
        out.n_protect = s.protect.n;
        out.notices = TAKE_PTR(s.notices.v);
        out.n_notices = s.notices.n;
        out.log = TAKE_PTR(s.log.v);
        out.n_log = s.log.n;
        s.protect.n = s.notices.n = s.log.n = 0;
        *ret = out;
        r = 0;
    }
    strv_clear(&s.protect);
    strv_clear(&s.notices);
    strv_clear(&s.log);
    strv_clear(&s.links);
    strv_clear(&s.bad_index);
    strv_clear(&s.cfgfiles);
    strv_clear(&s.hookdirs);
    strv_clear(&s.gitdirs);
    strv_clear(&s.repos);
    if (s.envp)
        for (char **e = s.envp; *e; e++)
            free(*e);
    free(s.envp);
    free(s.git);
    free(s.ws);
    return r;
}
