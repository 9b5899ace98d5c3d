/* gitscan.c — see gitscan.h. */
#include "gitscan.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitindex.h"
#include "spawn.h"

extern char **environ;

/* ---- string vectors ---------------------------------------------------- */

struct strv {
    char **v;
    size_t n;
};

static bool strv_has(const struct strv *s, const char *x) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], x))
            return true;
    return false;
}

static void strv_push(struct strv *s, char *owned) {
    s->v = lz_xrealloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = owned;
}

/* Adds a copy unless present; true if added. */
static bool strv_add(struct strv *s, const char *x) {
    if (strv_has(s, x))
        return false;
    strv_push(s, lz_xstrdup(x));
    return true;
}

static void strv_clear(struct strv *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

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

/* Appends component c (no slash) to the canonical directory path d. */
static char *path_child(const char *d, const char *c) {
    return lz_xasprintf("%s%s%s", d, strcmp(d, "/") ? "/" : "", c);
}

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
        char *cand = path_child(cur, c);
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

/* ---- running the host's git ------------------------------------------- */

struct scan {
    char *ws;             /* canonical workspace */
    const char *home;
    char *git;
    char **envp;
    int timeout_ms;
    size_t max_entries;
    unsigned max_depth;
    struct lz_gitscan *out;
    struct strv protect, notices, log;
    struct strv links;     /* refused links, workspace-relative */
    struct strv bad_index; /* indexes the host's git must not read, with the reason */
    struct strv cfgfiles;  /* config files read with --file (lexical absolute) */
    struct strv hookdirs;  /* hooks directories looked at (canonical) */
    struct strv gitdirs;   /* Git directories walked (canonical) */
    struct strv repos;     /* repositories asked (canonical -C dir or gitdir) */
    const char *bound;     /* the bound that was exceeded, or NULL */
};

static void add_notice(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_notice(struct scan *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    va_end(ap);
    if (!strv_has(&s->notices, m))
        strv_push(&s->notices, m);
    else
        free(m);
}

static void add_log(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_log(struct scan *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    va_end(ap);
    strv_push(&s->log, m);
}

/* Protects canonical path p when it lies inside the workspace. */
static void protect_canon(struct scan *s, const char *p, const char *why) {
    const char *rel = lz_gitscan_rel(s->ws, p);
    if (!rel)
        return;
    if (!rel[0]) {
        add_notice(s, "%s is the workspace itself; Lazaret cannot keep the whole workspace read-only, so this "
                      "is not protected: point it outside the workspace",
                   why);
        return;
    }
    if (strv_add(&s->protect, rel))
        add_log(s, "%s: %s is kept read-only", why, rel);
}

struct link_ud {
    struct scan *s;
    const char *why;
};

static void on_link(void *ud, const char *link) {
    struct link_ud *l = ud;
    protect_canon(l->s, link, l->why);
}

/* Protects abs (any form) and every symlink on its way, if inside. */
static char *protect_path(struct scan *s, const char *abs, const char *why) {
    struct link_ud l = { s, why };
    char *c = lz_gitscan_canon(abs, on_link, &l);
    if (c)
        protect_canon(s, c, why);
    return c;
}

static char *find_git(void) {
    const char *path = getenv("PATH");
    if (!path || !path[0])
        path = "/usr/local/bin:/usr/bin:/bin";
    _cleanup_free_ char *dup = lz_xstrdup(path);
    char *save = NULL;
    for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue; /* a relative PATH entry would depend on the cwd */
        char *g = lz_xasprintf("%s/git", d);
        struct stat st;
        if (stat(g, &st) == 0 && S_ISREG(st.st_mode) && access(g, X_OK) == 0)
            return g;
        free(g);
    }
    return NULL;
}

/* The environment for git: the variables that select the developer's
 * configuration, nothing that could redirect the repository. */
static char **clean_env(void) {
    static const char *const keep[] = { "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                        "GIT_CONFIG_NOSYSTEM", "PATH", "LANG" };
    char **e = lz_xcalloc(LZ_ARRAY_SIZE(keep) + 1, sizeof *e);
    size_t n = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(keep); i++) {
        const char *v = getenv(keep[i]);
        if (v)
            e[n++] = lz_xasprintf("%s=%s", keep[i], v);
    }
    e[n] = NULL;
    return e;
}

/* Runs git with argv (argv[0] ignored), output into *ret (NUL-terminated).
 * Returns the exit status, or a negative errno. */
static int run_git(struct scan *s, const char *const *args, char **ret, size_t *ret_len) {
    size_t na = 0;
    while (args[na])
        na++;
    _cleanup_free_ char **argv = lz_xcalloc(na + 1, sizeof *argv);
    argv[0] = s->git;
    for (size_t i = 1; i < na; i++)
        argv[i] = (char *)args[i];
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return -errno;
    _cleanup_close_ int rd = pp[0];
    struct lz_spawn_opts o = { .path = s->git, .argv = argv, .envp = s->envp, .stdin_fd = -1,
                               .stdout_fd = pp[1], .stderr_fd = -1, .setns_pidfd = -1, .cwd = "/" };
    struct lz_child c = LZ_CHILD_NULL;
    int r = lz_spawn(&o, &c);
    close(pp[1]);
    if (r < 0)
        return r;
    size_t cap = 1 << 16, len = 0;
    char *buf = lz_xmalloc(cap);
    long deadline = lz_now_ms() + s->timeout_ms;
    r = 0;
    for (;;) {
        long left = deadline - lz_now_ms();
        struct pollfd p = { .fd = rd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            r = -ETIMEDOUT;
            break;
        }
        if (len + 4096 > cap) {
            if (cap >= 64u << 20) {
                r = -EFBIG;
                break;
            }
            cap *= 2;
            buf = lz_xrealloc(buf, cap);
        }
        ssize_t n = read(rd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    int st = 0;
    if (r < 0) {
        lz_child_stop(&c, 100, &st);
        lz_child_close(&c);
        free(buf);
        return r;
    }
    long left = deadline - lz_now_ms();
    r = lz_child_wait(&c, left > 0 ? (int)left : 0, &st);
    if (r == -ETIMEDOUT)
        lz_child_stop(&c, 100, &st);
    lz_child_close(&c);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return st;
}

/* ---- configuration files ---------------------------------------------- */

static char *dir_of(const char *path) {
    char *d = lz_xstrdup(path);
    path_up(d);
    return d;
}

static bool is_include_key(const char *k) {
    if (!strcmp(k, "include.path"))
        return true;
    size_t l = strlen(k);
    return !strncmp(k, "includeif.", 10) && l > 15 && !strcmp(k + l - 5, ".path");
}

/* Reads every include of file f (absolute, as Git names it), active or
 * not, and recurses; collects core.hooksPath values into hooks. */
static void scan_file(struct scan *s, const char *f, int depth, const char *repo, struct strv *hooks) {
    if (depth > LZ_GITSCAN_INCLUDE_DEPTH || strv_has(&s->cfgfiles, f))
        return;
    strv_add(&s->cfgfiles, f);
    struct stat st;
    if (stat(f, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    const char *args[] = { "git", "config", "--file", f, "--list", "--show-origin", "-z", "--no-includes", NULL };
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = run_git(s, args, &buf, &len);
    if (r != 0) {
        add_log(s, "git config --file %s failed (%s)", f, r < 0 ? strerror(-r) : "exit status");
        return;
    }
    _cleanup_free_ char *base = dir_of(f);
    struct lz_gitcfg_entry e;
    for (size_t off = 0; (off = lz_gitscan_next_entry(buf, len, off, false, &e)) != 0;) {
        if (!e.value)
            continue;
        if (!strcmp(e.key, "core.hookspath")) {
            strv_add(hooks, e.value);
            continue;
        }
        if (!is_include_key(e.key))
            continue;
        _cleanup_free_ char *t = lz_gitscan_join(e.value, base, s->home);
        if (!t)
            continue;
        _cleanup_free_ char *why = lz_xasprintf("%s (%s in %s)", repo, e.key, f);
        _cleanup_free_ char *c = protect_path(s, t, why);
        scan_file(s, t, depth + 1, repo, hooks);
    }
}

/* ---- hooks -------------------------------------------------------------- */

static const char *const hook_names[] = {
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
    "pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
    "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
    "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit",
    "post-index-change",
};

/* Protects name (relative to the work tree root wt) whether or not it
 * exists: the agent must not create it either. */
static void protect_in_tree(struct scan *s, const char *wt, const char *name, const char *why) {
    _cleanup_free_ char *a = lz_xasprintf("%s/%s", wt, name);
    _cleanup_free_ char *c = protect_path(s, a, why);
}

static void analyse_hook(struct scan *s, const char *repo, const char *wt, const char *hdir, const char *name) {
    _cleanup_free_ char *path = lz_xasprintf("%s/%s", hdir, name);
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
        return;
    _cleanup_free_ char *why = lz_xasprintf("%s hook %s", repo, name);
    /* The hook itself, through every symlink on its way. */
    _cleanup_free_ char *real = protect_path(s, path, why);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (lz_read_file_at(AT_FDCWD, path, 1 << 20, &text, &len) < 0 || memchr(text, '\0', len))
        return; /* a binary hook runs nothing by name that we could read */
    unsigned m = lz_gitscan_managers(text, hdir);
    const char *root = wt ? wt : hdir;
    if (m & LZ_HM_HUSKY4) {
        static const char *const rc[] = { ".huskyrc", ".huskyrc.json", ".huskyrc.yaml", ".huskyrc.yml",
                                          ".huskyrc.js", ".huskyrc.cjs", "husky.config.js", "husky.config.cjs" };
        for (size_t i = 0; i < LZ_ARRAY_SIZE(rc); i++)
            protect_in_tree(s, root, rc[i], why);
        add_notice(s, "%s: husky v4 runs the commands in the \"husky\" key of package.json, which Lazaret cannot "
                      "keep read-only (normal work edits it); review package.json before committing on the host, "
                      "or move to husky v9 (.husky/)",
                   why);
    }
    if (m & LZ_HM_PRECOMMIT) {
        _cleanup_free_ char *cfg = lz_gitscan_precommit_config(text);
        protect_in_tree(s, root, cfg, why);
        add_notice(s, "%s: pre-commit runs the hooks of %s (kept read-only); its `repo: local` hooks and the "
                      "scripts they name run files the agent can change; review them before committing on the host",
                   why, cfg);
    }
    if (m & LZ_HM_LEFTHOOK) {
        static const char *const lf[] = {
            "lefthook.yml", "lefthook.yaml", "lefthook.toml", "lefthook.json", ".lefthook.yml", ".lefthook.yaml",
            ".lefthook.toml", ".lefthook.json", "lefthook-local.yml", "lefthook-local.yaml", "lefthook-local.toml",
            "lefthook-local.json", ".lefthook-local.yml", ".lefthook-local.yaml", ".lefthook-local.toml",
            ".lefthook-local.json", ".config/lefthook.yml", ".config/lefthook.yaml", ".config/lefthook.toml",
            ".config/lefthook.json", ".config/lefthook-local.yml", ".config/lefthook-local.yaml",
            ".lefthook", ".lefthook-local",
        };
        for (size_t i = 0; i < LZ_ARRAY_SIZE(lf); i++)
            protect_in_tree(s, root, lf[i], why);
        add_notice(s, "%s: lefthook runs the commands of its configuration (kept read-only); scripts those "
                      "commands name outside .lefthook/ can be changed by the agent; review them before "
                      "committing on the host",
                   why);
    }
    if (m & LZ_HM_SIMPLE_GIT_HOOKS)
        add_notice(s, "%s: simple-git-hooks copies its commands from package.json when `simple-git-hooks` runs; "
                      "the agent can change that key: review package.json before running it on the host",
                   why);
    if (m & LZ_HM_PACKAGE_RUNNER)
        add_notice(s, "%s runs npm/npx/yarn/pnpm/bun/make or node_modules code: package.json scripts, Makefiles "
                      "and node_modules are files the agent can change, which Lazaret cannot keep read-only; "
                      "review them (or commit with --no-verify) after an agent session",
                   why);
    /* Generic: every word naming an existing file of the work tree. */
    char **tok = NULL;
    size_t nt = lz_gitscan_tokens(text, &tok);
    for (size_t i = 0; i < nt; i++) {
        _cleanup_free_ char *a = tok[i][0] == '/' ? lz_xstrdup(tok[i]) : lz_xasprintf("%s/%s", root, tok[i]);
        struct stat ts;
        /* files only: a directory word (`eslint src`) names input, not code */
        if (stat(a, &ts) == 0 && S_ISREG(ts.st_mode)) {
            _cleanup_free_ char *c = protect_path(s, a, why);
        }
        free(tok[i]);
    }
    free(tok);
}

/* Looks at one hooks directory (absolute) of a repository. */
static void scan_hooks(struct scan *s, const char *repo, const char *wt, const char *hdir, bool configured) {
    _cleanup_free_ char *why = lz_xasprintf("%s core.hooksPath", repo);
    _cleanup_free_ char *c = lz_gitscan_canon(hdir, NULL, NULL);
    if (!c || strv_has(&s->hookdirs, c))
        return;
    strv_add(&s->hookdirs, c);
    if (configured) {
        unsigned m = lz_gitscan_managers(NULL, c);
        if (m & LZ_HM_HUSKY9) {
            /* husky v9: .husky/_/HOOK runs .husky/HOOK */
            _cleanup_free_ char *parent = dir_of(c);
            _cleanup_free_ char *p = protect_path(s, parent, why);
        }
        _cleanup_free_ char *p = protect_path(s, hdir, why);
    }
    for (size_t i = 0; i < LZ_ARRAY_SIZE(hook_names); i++)
        analyse_hook(s, repo, wt, c, hook_names[i]);
}

/* ---- one repository ----------------------------------------------------- */

/* Asks git about the repository at dir (-C) or gitdir (--git-dir). */
static void scan_repo(struct scan *s, const char *dir, const char *gitdir) {
    const char *key = dir ? dir : gitdir;
    if (strv_has(&s->repos, key))
        return;
    strv_add(&s->repos, key);
    s->out->n_repos++;
    const char *loc[3] = { dir ? "-C" : NULL, dir ? dir : NULL, NULL };
    _cleanup_free_ char *gd = gitdir ? lz_xasprintf("--git-dir=%s", gitdir) : NULL;
    const char *a1[16];
    size_t n = 0;
    a1[n++] = "git";
    if (dir) {
        a1[n++] = loc[0];
        a1[n++] = loc[1];
    } else {
        a1[n++] = gd;
    }
    size_t base_n = n;
    a1[n++] = "rev-parse";
    a1[n++] = "--path-format=absolute";
    a1[n++] = "--git-common-dir";
    a1[n++] = "--git-dir";
    a1[n++] = "--is-bare-repository";
    a1[n++] = "--show-cdup";
    a1[n] = NULL;
    _cleanup_free_ char *rp = NULL;
    size_t rl = 0;
    _cleanup_free_ char *common = NULL, *wt = NULL;
    const char *rel_base = dir ? dir : gitdir;
    if (run_git(s, a1, &rp, &rl) == 0) {
        char *save = NULL;
        char *l1 = strtok_r(rp, "\n", &save);
        char *l2 = l1 ? strtok_r(NULL, "\n", &save) : NULL;
        char *l3 = l2 ? strtok_r(NULL, "\n", &save) : NULL;
        char *l4 = l3 ? strtok_r(NULL, "\n", &save) : NULL;
        if (l1)
            common = lz_xstrdup(l1);
        if (l3 && !strcmp(l3, "false") && dir) {
            _cleanup_free_ char *j = l4 ? lz_xasprintf("%s/%s", dir, l4) : lz_xstrdup(dir);
            wt = lz_gitscan_canon(j, NULL, NULL);
        }
        (void)l2;
    }
    n = base_n;
    a1[n++] = "config";
    a1[n++] = "--list";
    a1[n++] = "--show-origin";
    a1[n++] = "--show-scope";
    a1[n++] = "-z";
    a1[n++] = "--includes";
    a1[n] = NULL;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = run_git(s, a1, &buf, &len);
    const char *repo = wt ? wt : key;
    _cleanup_free_ char *repo_name = NULL;
    {
        const char *rel = lz_gitscan_rel(s->ws, repo);
        repo_name = rel ? lz_xasprintf("repository %s", rel[0] ? rel : ".") : lz_xasprintf("repository %s", repo);
    }
    struct strv hooks = { 0 };
    _cleanup_free_ char *eff_hooks = NULL;
    if (r != 0) {
        add_log(s, "%s: git config --list failed (%s); its configuration was not read", repo_name,
                r < 0 ? strerror(-r) : "non-zero exit");
    } else {
        struct strv origins = { 0 };
        struct lz_gitcfg_entry e;
        for (size_t off = 0; (off = lz_gitscan_next_entry(buf, len, off, true, &e)) != 0;) {
            if (strncmp(e.origin, "file:", 5))
                continue;
            const char *f = e.origin + 5;
            char *abs = f[0] == '/' ? lz_xstrdup(f) : lz_xasprintf("%s/%s", rel_base, f);
            if (!strv_has(&origins, abs))
                strv_push(&origins, abs);
            else
                free(abs);
            if (!strcmp(e.key, "core.hookspath") && e.value) {
                free(eff_hooks);
                eff_hooks = lz_xstrdup(e.value);
            }
        }
        for (size_t i = 0; i < origins.n; i++) {
            _cleanup_free_ char *why = lz_xasprintf("%s (configuration file)", repo_name);
            _cleanup_free_ char *c = protect_path(s, origins.v[i], why);
            scan_file(s, origins.v[i], 0, repo_name, &hooks);
        }
        strv_clear(&origins);
    }
    /* Hooks: the effective directory, and every other core.hooksPath that
     * a condition could make effective later. */
    const char *hroot = wt ? wt : (gitdir ? gitdir : common);
    if (eff_hooks)
        strv_add(&hooks, eff_hooks);
    for (size_t i = 0; i < hooks.n; i++) {
        _cleanup_free_ char *h = lz_gitscan_join(hooks.v[i], hroot, s->home);
        if (h)
            scan_hooks(s, repo_name, wt, h, true);
    }
    if (common) {
        _cleanup_free_ char *h = lz_xasprintf("%s/hooks", common);
        scan_hooks(s, repo_name, wt, h, false);
    }
    strv_clear(&hooks);
}

/* ---- the walk ----------------------------------------------------------- */

static bool count_entry(struct scan *s) {
    if (++s->out->n_entries > s->max_entries) {
        s->bound = "entries";
        return false;
    }
    return true;
}

static int entry_type(int dfd, const struct dirent *d, struct stat *st, bool *have_st) {
    *have_st = false;
    if (d->d_type != DT_UNKNOWN)
        return d->d_type;
    if (fstatat(dfd, d->d_name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return DT_UNKNOWN;
    *have_st = true;
    return S_ISDIR(st->st_mode) ? DT_DIR : S_ISLNK(st->st_mode) ? DT_LNK : S_ISREG(st->st_mode) ? DT_REG : DT_UNKNOWN;
}

static bool has_entry(int dfd, const char *name) {
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int open_dir_at(int dfd, const char *name) {
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void scan_repo_gitdir(struct scan *s, const char *abs) {
    scan_repo(s, NULL, abs);
}

/* Reads a regular file below dfd (no symlink followed) of at most max bytes. */
static int read_at(int dfd, const char *name, size_t max, char **ret, size_t *ret_len) {
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    _cleanup_free_ char *buf = lz_xmalloc((size_t)st.st_size + 1);
    ssize_t n = lz_read_full(fd, buf, (size_t)st.st_size);
    if (n < 0)
        return (int)n;
    buf[n] = '\0';
    *ret = TAKE_PTR(buf);
    *ret_len = (size_t)n;
    return 0;
}

/* An index left in a Git directory (by an agent before the router checked
 * every index, or written while no router ran) is checked like one the
 * router lets in: the host's git would act on every entry. */
static void check_index_at(struct scan *s, int gdfd, const char *name, const char *rel) {
    _cleanup_free_ char *buf = NULL, *cfg = NULL;
    size_t len = 0, cfglen = 0;
    int r = read_at(gdfd, name, LZ_GITINDEX_MAX, &buf, &len);
    if (r < 0) {
        if (r == -EFBIG)
            strv_push(&s->bad_index, lz_xasprintf("%s: larger than Lazaret checks", rel));
        return; /* unreadable: the host's git cannot read it either */
    }
    unsigned hl = read_at(gdfd, "config", 1 << 20, &cfg, &cfglen) == 0 ? lz_git_config_hash_len(cfg, cfglen) : 20;
    struct lz_error e = { 0 };
    if (lz_gitindex_verify(buf, len, hl, &e) < 0)
        strv_push(&s->bad_index, lz_xasprintf("%s: %s", rel, e.msg));
}

/* Walks a Git directory: records symlinks and multi-link files (outside
 * objects/), skips hooks/ (the developer's, read by scan_hooks), and asks
 * git about every nested Git directory (modules/<name>, worktrees/<id>). */
static int walk_gitdir_at(struct scan *s, int dfd, const char *abs, const char *rel, bool in_objects, unsigned depth) {
    if (depth > s->max_depth) {
        s->bound = "depth";
        return -E2BIG;
    }
    /* logs/ has a HEAD too: a Git directory also has objects and refs
     * (modules/<name>) or a commondir (worktrees/<id>) */
    bool is_gd = has_entry(dfd, "HEAD") &&
                 (has_entry(dfd, "commondir") || (has_entry(dfd, "objects") && has_entry(dfd, "refs")));
    if (is_gd && depth > 0)
        scan_repo_gitdir(s, abs);
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return -errno;
    }
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!count_entry(s)) {
            r = -E2BIG;
            break;
        }
        struct stat st;
        bool have;
        int t = entry_type(dfd, de, &st, &have);
        _cleanup_free_ char *crel = lz_xasprintf("%s/%s", rel, de->d_name);
        if (t == DT_LNK) {
            if (is_gd && !strcmp(de->d_name, "hooks"))
                continue; /* a symlinked hooks directory: scan_hooks reads it */
            strv_push(&s->links, lz_xasprintf("%s (symlink)", crel));
            continue;
        }
        if (t == DT_DIR) {
            if (is_gd && !strcmp(de->d_name, "hooks"))
                continue;
            _cleanup_close_ int cfd = open_dir_at(dfd, de->d_name);
            if (cfd < 0)
                continue;
            _cleanup_free_ char *cabs = lz_xasprintf("%s/%s", abs, de->d_name);
            bool obj = in_objects || (is_gd && !strcmp(de->d_name, "objects"));
            if ((r = walk_gitdir_at(s, cfd, cabs, crel, obj, depth + 1)) < 0)
                break;
            continue;
        }
        if (in_objects)
            continue; /* git clone --local hard-links objects */
        if (!have && fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_nlink > 1)
            strv_push(&s->links, lz_xasprintf("%s (%ju hard links)", crel, (uintmax_t)st.st_nlink));
        if (is_gd && S_ISREG(st.st_mode) &&
            (!strcmp(de->d_name, "index") || !strncmp(de->d_name, "sharedindex.", 12)))
            check_index_at(s, dfd, de->d_name, crel);
    }
    closedir(d);
    return r;
}

/* A Git directory found in the workspace (canonical abs). */
static int walk_gitdir(struct scan *s, const char *abs) {
    const char *rel = lz_gitscan_rel(s->ws, abs);
    if (!rel || strv_has(&s->gitdirs, abs))
        return 0;
    strv_add(&s->gitdirs, abs);
    _cleanup_close_ int fd = open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    return walk_gitdir_at(s, fd, abs, rel[0] ? rel : ".", false, 0);
}

/* The target of gitfile dir/.git, canonical, or NULL. */
static char *read_gitfile(int dfd, const char *dir) {
    char buf[4097];
    _cleanup_close_ int fd = openat(dfd, ".git", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = lz_read_full(fd, buf, sizeof buf - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    if (strncmp(buf, "gitdir: ", 8))
        return NULL;
    char *v = buf + 8;
    v[strcspn(v, "\r\n")] = '\0';
    _cleanup_free_ char *j = lz_gitscan_join(v, dir, NULL);
    return j ? lz_gitscan_canon(j, NULL, NULL) : NULL;
}

static int walk_tree(struct scan *s, int dfd, const char *abs, unsigned depth) {
    if (depth > s->max_depth) {
        s->bound = "depth";
        return -E2BIG;
    }
    /* A directory shaped like a Git directory: Git treats it as a bare
     * repository when run inside it. */
    if (depth > 0 && has_entry(dfd, "HEAD") && has_entry(dfd, "objects") && has_entry(dfd, "refs")) {
        int r = walk_gitdir(s, abs);
        scan_repo_gitdir(s, abs);
        return r;
    }
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return -errno;
    }
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!count_entry(s)) {
            r = -E2BIG;
            break;
        }
        struct stat st;
        bool have;
        int t = entry_type(dfd, de, &st, &have);
        if (!strcmp(de->d_name, ".git")) {
            if (t == DT_DIR) {
                _cleanup_free_ char *g = lz_xasprintf("%s/.git", abs);
                if ((r = walk_gitdir(s, g)) < 0)
                    break;
            } else if (t == DT_REG) {
                _cleanup_free_ char *g = read_gitfile(dfd, abs);
                if (g && (r = walk_gitdir(s, g)) < 0)
                    break;
            } else if (t == DT_LNK) {
                _cleanup_free_ char *l = lz_xasprintf("%s/.git", abs);
                _cleanup_free_ char *g = lz_gitscan_canon(l, NULL, NULL);
                if (g && (r = walk_gitdir(s, g)) < 0)
                    break;
            }
            scan_repo(s, abs, NULL);
            continue;
        }
        if (t != DT_DIR)
            continue;
        _cleanup_close_ int cfd = open_dir_at(dfd, de->d_name);
        if (cfd < 0)
            continue;
        _cleanup_free_ char *cabs = path_child(abs, de->d_name);
        if ((r = walk_tree(s, cfd, cabs, depth + 1)) < 0)
            break;
    }
    closedir(d);
    return r;
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

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    s.max_entries = o && o->max_entries ? o->max_entries
                                        : env_size(LZ_GITSCAN_ENV_MAX_ENTRIES, LZ_GITSCAN_MAX_ENTRIES_DEFAULT);
    s.max_depth = o && o->max_depth ? o->max_depth
                                    : (unsigned)env_size(LZ_GITSCAN_ENV_MAX_DEPTH, LZ_GITSCAN_MAX_DEPTH_DEFAULT);
    s.timeout_ms = o && o->timeout_ms ? o->timeout_ms : 10000;
    s.git = o && o->git ? lz_xstrdup(o->git) : find_git();
    int r = 0;
    if (!s.git) {
        out.git_missing = true;
        add_log(&s, "git is not installed on this host: there is no host Git configuration to protect");
        goto done;
    }
    s.envp = clean_env();
    /* The workspace itself first: the developer's global and system
     * configuration apply even where the workspace is no repository, and
     * a workspace inside a repository is governed by that one. */
    scan_repo(&s, s.ws, NULL);
    {
        _cleanup_close_ int fd = open(s.ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            r = lz_error_set(err, -errno, "cannot open the workspace %s: %s", s.ws, strerror(errno));
            goto done;
        }
        r = walk_tree(&s, fd, s.ws, 0);
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
        qsort(s.protect.v, s.protect.n, sizeof *s.protect.v, cmp_str);
    /* A path below another protected one is covered by it. */
    {
        _cleanup_free_ bool *covered = lz_xcalloc(s.protect.n ? s.protect.n : 1, sizeof *covered);
        for (size_t i = 0; i < s.protect.n; i++) {
            _cleanup_free_ char *p = lz_xstrdup(s.protect.v[i]);
            for (char *q = strchr(p, '/'); q && !covered[i]; q = strchr(q + 1, '/')) {
                *q = '\0';
                const char *key = p;
                covered[i] = bsearch(&key, s.protect.v, s.protect.n, sizeof *s.protect.v, cmp_str) != NULL;
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
