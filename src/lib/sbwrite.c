/* sbwrite.c — see sbwrite.h. */
#include "sbwrite.h"
#include "config.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>

void lz_sbw_add(struct lz_sbw *t, const char *path, const char *what) {
    if (!path || path[0] != '/')
        return;
    _cleanup_free_ char *rp = realpath(path, NULL);
    for (int k = 0; k < 2; k++) {
        const char *p = k == 0 ? path : rp;
        if (!p || (k == 1 && strcmp(rp, path) == 0))
            continue;
        t->v = lz_xrealloc(t->v, (t->n + 1) * sizeof *t->v);
        t->v[t->n++] = (struct lz_sbw_tree){ .path = lz_xstrdup(p), .what = what };
    }
}

void lz_sbw_trees(const struct lz_config *c, enum lz_sbw_set set, const char *const *extra,
                  const char *const *extra_what, size_t n_extra, struct lz_sbw *ret) {
    struct lz_sbw t = { 0 };
    bool reach = set == LZ_SBW_REACH;
    lz_sbw_add(&t, c->workspace, "the workspace");
    if (reach) {
        lz_sbw_add(&t, c->data_root, "the Storage Root");
        for (size_t i = 0; i < n_extra; i++)
            lz_sbw_add(&t, extra[i], extra_what[i]);
    }
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        if (reach)
            lz_sbw_add(&t, c->profile.volumes[i].host, "a volume of the selected profile");
        else if (!c->profile.volumes[i].read_only)
            lz_sbw_add(&t, c->profile.volumes[i].host, "a read-write volume");
    }
    /* After the volumes in the prompt's set: a volume beneath the Storage
     * Root ({profile_dir}) is named as the volume there. */
    if (!reach)
        lz_sbw_add(&t, c->data_root, "the Storage Root");
    if (reach) {
        lz_sbw_add(&t, c->escalation_socket_dir, "escalation.socket_dir");
        if (c->source_path) {
            _cleanup_free_ char *d = lz_xstrdup(c->source_path);
            lz_sbw_add(&t, dirname(d), "the configuration file's directory");
        }
    }
    /* Lazaret's runtime directory (paths.c lz_runtime_dir: the mailboxes
     * and sockets), both places it can be; computed, not created. */
    const char *x = secure_getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/') {
        _cleanup_free_ char *rt = lz_xasprintf("%s/lazaret", x);
        lz_sbw_add(&t, rt, "Lazaret's runtime directory");
    }
    _cleanup_free_ char *tmp = lz_xasprintf("/tmp/lazaret-%u", (unsigned)getuid());
    lz_sbw_add(&t, tmp, "Lazaret's runtime directory");
    *ret = t;
}

void lz_sbw_build(const struct lz_config *c, struct lz_sbw *ret) {
    lz_sbw_trees(c, LZ_SBW_WRITABLE, NULL, NULL, 0, ret);
}

void lz_sbw_free(struct lz_sbw *t) {
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].path);
    free(t->v);
    *t = (struct lz_sbw){ 0 };
}

static const char *within(const struct lz_sbw *t, const char *p) {
    for (size_t i = 0; i < t->n; i++) {
        const char *r = t->v[i].path;
        size_t n = strlen(r);
        if (n == 1 && r[0] == '/')
            return t->v[i].what;
        if (strncmp(p, r, n) == 0 && (p[n] == '\0' || p[n] == '/'))
            return t->v[i].what;
    }
    return NULL;
}

#define MAX_HOPS 40 /* symbolic links followed in one path, as the kernel's MAXSYMLINKS */

/* Walks path the way the kernel resolves it, one component at a time,
 * following symbolic links; every location it passes through (each
 * directory entry, each link's own place, each link's target) is looked
 * up in the trees: a component the sandbox can change changes what the
 * rest of the path names. */
static const char *walk(const struct lz_sbw *t, const char *abs) {
    char cur[PATH_MAX] = ""; /* resolved so far, no symlinks; "" is "/" */
    char rest[PATH_MAX];     /* still to walk */
    snprintf(rest, sizeof rest, "%s", abs);
    int hops = 0;
    while (rest[0]) {
        char *s = rest;
        while (*s == '/')
            s++;
        if (!*s)
            break;
        size_t n = strcspn(s, "/");
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX)
            return NULL;
        memcpy(comp, s, n);
        comp[n] = '\0';
        memmove(rest, s + n, strlen(s + n) + 1);
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            char *sl = strrchr(cur, '/');
            if (sl)
                *sl = '\0';
            continue;
        }
        char next[PATH_MAX];
        if (snprintf(next, sizeof next, "%s/%s", cur, comp) >= (int)sizeof next)
            return NULL;
        const char *w = within(t, next);
        if (w)
            return w;
        struct stat st;
        if (lstat(next, &st) < 0)
            return NULL;
        if (!S_ISLNK(st.st_mode)) {
            memcpy(cur, next, strlen(next) + 1);
            continue;
        }
        if (++hops > MAX_HOPS)
            return NULL;
        char target[PATH_MAX];
        ssize_t k = readlink(next, target, sizeof target - 1);
        if (k <= 0)
            return NULL;
        target[k] = '\0';
        char joined[PATH_MAX];
        if (snprintf(joined, sizeof joined, "%s/%s", target, rest) >= (int)sizeof joined)
            return NULL;
        memcpy(rest, joined, strlen(joined) + 1);
        if (target[0] == '/')
            cur[0] = '\0';
    }
    return within(t, cur[0] ? cur : "/");
}

const char *lz_sbw_find(const struct lz_sbw *t, const char *base, const char *path) {
    if (!path || !*path || strlen(path) >= PATH_MAX)
        return NULL;
    char abs[PATH_MAX];
    if (path[0] == '/')
        snprintf(abs, sizeof abs, "%s", path);
    else if (!base || snprintf(abs, sizeof abs, "%s/%s", base, path) >= (int)sizeof abs)
        return NULL;
    struct stat st;
    if (stat(abs, &st) < 0 || S_ISDIR(st.st_mode))
        return NULL;
    return walk(t, abs);
}

/* basename without a trailing run of digits and dots */
static void family(const char *path, char *ret, size_t size) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    while (n > 0 && (b[n - 1] == '.' || (b[n - 1] >= '0' && b[n - 1] <= '9')))
        n--;
    if (n >= size)
        n = size - 1;
    memcpy(ret, b, n);
    ret[n] = '\0';
}

bool lz_sbw_interpreter(const char *path) {
    static const char *const names[] = { "sh",      "bash",   "dash",   "zsh",     "ksh",    "mksh",      "ash",
                                         "fish",    "csh",    "tcsh",   "busybox", "python", "pypy",      "node",
                                         "nodejs",  "perl",   "ruby",   "php",     "deno",   "bun",       "tsx",
                                         "ts-node", "lua",    "luajit", "Rscript", "tclsh",  "awk",       "gawk",
                                         "mawk",    "env",    "npx",    "uv",      "pwsh",   "osascript", "java",
                                         "jshell",  "groovy", "elixir", "erl",     "escript" };
    char f[64];
    family(path, f, sizeof f);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++)
        if (!strcmp(f, names[i]))
            return true;
    return false;
}

/* The interpreter path of a #! line of the file at path, or false. */
static bool shebang_of(const char *path, char *ret, size_t size) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return false;
    char b[256];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n < 3 || b[0] != '#' || b[1] != '!')
        return false;
    b[n] = '\0';
    char *s = b + 2;
    s += strspn(s, " \t");
    size_t k = strcspn(s, " \t\n");
    if (k == 0 || k >= size)
        return false;
    memcpy(ret, s, k);
    ret[k] = '\0';
    return true;
}

static void push(char ***v, size_t *n, char *line) {
    *v = lz_xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = line;
    (*v)[*n] = NULL;
}

char **lz_sbw_warnings(const struct lz_sbw *t, const char *host_cwd, const char *exe, const char *const *argv,
                       size_t argc, size_t *ret_n) {
    char **v = NULL;
    size_t n = 0;
    const char *w = exe ? lz_sbw_find(t, NULL, exe) : NULL;
    if (w)
        push(&v, &n,
             lz_xasprintf("WRITABLE BY THE SANDBOX: the executable lies in %s: the agent wrote or can change it "
                          "(what runs is the copy shown and hashed now)",
                          w));
    char interp[PATH_MAX];
    if (exe && shebang_of(exe, interp, sizeof interp) && interp[0] == '/' && (w = lz_sbw_find(t, NULL, interp)))
        push(&v, &n,
             lz_xasprintf("WRITABLE BY THE SANDBOX: the interpreter on the executable's #! line lies in %s: the agent "
                          "can change what runs, also after you approve",
                          w));
    bool script = false;
    size_t first = 0;
    size_t lim = argc < LZ_SBW_MAX_ARGS ? argc : LZ_SBW_MAX_ARGS;
    for (size_t i = 1; i < lim; i++) {
        const char *a = argv[i];
        const char *eq = a[0] == '-' ? strchr(a, '=') : NULL;
        w = lz_sbw_find(t, host_cwd, a);
        if (!w && eq)
            w = lz_sbw_find(t, host_cwd, eq + 1);
        if (!w)
            continue;
        push(&v, &n,
             lz_xasprintf("WRITABLE BY THE SANDBOX: argv[%zu] names a file in %s: the agent wrote or can change "
                          "it, also after you approve",
                          i, w));
        if (!script)
            first = i;
        script = true;
    }
    if (argc > LZ_SBW_MAX_ARGS)
        push(&v, &n,
             lz_xasprintf("NOT CHECKED: argv[%d] and later were not checked for files the sandbox can write",
                          LZ_SBW_MAX_ARGS));
    if (script && exe && lz_sbw_interpreter(exe))
        push(&v, &n,
             lz_xasprintf("THE SCRIPT MAY CHANGE AFTER APPROVAL: this interpreter reads argv[%zu] when it runs, "
                          "not what you see now",
                          first));
    *ret_n = n;
    return v;
}
