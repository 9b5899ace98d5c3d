/* config_paths.c — host paths of the configuration: "~" and token
 * expansion, canonical paths, persistent dirs and volumes, the selected
 * profile's paths against the filesystem (SR-2, SR-4), the default Storage
 * Root, the workspace and where the file is; see config_int.h. */
#include "config_int.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>

#include "autoapprove.h"
#include "hosttools.h"
#include "privdirs.h"
#include "sbwrite.h"

/* Expands a leading "~" or "~/" and, when x is non-NULL, the tokens
 * {profile_dir} {domain_dir} {profile_name} {domain_hash} {workspace_dir}.
 * Any other brace is refused. */
static int expand(struct loader *ld, int line, const char *key, const char *raw, const struct expand_ctx *x,
                  char **ret) {
    char d[DISP_MAX];
    size_t cap = strlen(raw) + 1;
    _cleanup_free_ char *out = NULL;
    size_t len = 0;
    const char *s = raw;

    /* Bounded by LZ_CONFIG_MAX_STRING inputs and PATH_MAX outputs. */
#define APPEND(p, n)                                                                                                   \
    do {                                                                                                               \
        size_t _n = (n);                                                                                               \
        if (len + _n >= PATH_MAX)                                                                                      \
            return cfg_err(ld, line, key, "%s is longer than %d bytes after expansion", cfg_disp(raw, d, sizeof d),    \
                           PATH_MAX - 1);                                                                              \
        if (len + _n + 1 > cap) {                                                                                      \
            while (cap < len + _n + 1)                                                                                 \
                cap *= 2;                                                                                              \
            out = lz_xrealloc(out, cap);                                                                               \
        }                                                                                                              \
        memcpy(out + len, (p), _n);                                                                                    \
        len += _n;                                                                                                     \
        out[len] = '\0';                                                                                               \
    } while (0)

    out = lz_xmalloc(cap);
    out[0] = '\0';
    if (s[0] == '~' && (s[1] == '\0' || s[1] == '/')) {
        if (!ld->home)
            return cfg_err(ld, line, key, "cannot expand '~' in %s: no home directory", cfg_disp(raw, d, sizeof d));
        size_t hn = strlen(ld->home);
        while (hn > 1 && ld->home[hn - 1] == '/')
            hn--;
        if (hn == 1 && s[1] == '/')
            hn = 0; /* HOME=/ : "~/x" is "/x" */
        APPEND(ld->home, hn);
        s++;
    }
    while (*s) {
        if (*s == '{' || *s == '}') {
            static const char *const names[] = { "{profile_dir}", "{domain_dir}", "{profile_name}", "{domain_hash}",
                                                 "{workspace_dir}" };
            const char *val = NULL;
            size_t tn = 0;
            for (size_t i = 0; i < LZ_ARRAY_SIZE(names) && *s == '{'; i++) {
                size_t n = strlen(names[i]);
                if (strncmp(s, names[i], n) == 0) {
                    tn = n;
                    if (x)
                        val = i == 0 ? x->profile_dir
                            : i == 1 ? x->domain_dir
                            : i == 2 ? x->profile_name
                            : i == 3 ? x->domain_hash
                                     : x->workspace;
                }
            }
            if (tn == 0) {
                const char *e = strchr(s, '}');
                size_t n = e && *s == '{' ? (size_t)(e - s) + 1 : 1;
                _cleanup_free_ char *tok = lz_xstrndup(s, n > 64 ? 64 : n);
                char t[DISP_MAX];
                return cfg_err(ld, line, key,
                               "unknown expansion token %s in %s (known: {profile_dir}, {domain_dir}, "
                               "{profile_name}, {domain_hash}, {workspace_dir})",
                               cfg_disp(tok, t, sizeof t), cfg_disp(raw, d, sizeof d));
            }
            if (!x)
                return cfg_err(ld, line, key, "expansion tokens are not allowed here: %s", cfg_disp(raw, d, sizeof d));
            APPEND(val, strlen(val));
            s += tn;
            continue;
        }
        APPEND(s, 1);
        s++;
    }
#undef APPEND
    *ret = TAKE_PTR(out);
    return 0;
}

/* ---- filesystem ------------------------------------------------------ */

/* Checks that an absolute normalized host path is canonical: equal to its
 * realpath when it exists; when it does not, its deepest existing ancestor
 * must be canonical and the first missing component must not be a dangling
 * symlink. *ret_exists tells which. */
static int check_canonical(struct loader *ld, int line, const char *key, const char *path, bool *ret_exists) {
    char d[DISP_MAX], d2[DISP_MAX], d3[DISP_MAX];
    _cleanup_free_ char *rp = realpath(path, NULL);
    if (rp) {
        if (strcmp(rp, path) != 0)
            return cfg_err(ld, line, key, "%s is not canonical (it resolves to %s)", cfg_disp(path, d, sizeof d),
                           cfg_disp(rp, d2, sizeof d2));
        *ret_exists = true;
        return 0;
    }
    if (errno != ENOENT)
        return lz_error_set(ld->err, -errno, "%s:%d: %s: %s: %s", ld->file, line, key, cfg_disp(path, d, sizeof d),
                            strerror(errno));
    struct stat st;
    if (lstat(path, &st) == 0)
        return cfg_err(ld, line, key, "%s is a dangling symbolic link", cfg_disp(path, d, sizeof d));

    _cleanup_free_ char *anc = lz_xstrdup(path);
    for (;;) {
        char *slash = strrchr(anc, '/');
        if (!slash)
            return cfg_err(ld, line, key, "%s has no existing ancestor", cfg_disp(path, d, sizeof d));
        if (slash == anc)
            slash[1] = '\0';
        else
            slash[0] = '\0';
        free(rp);
        rp = realpath(anc, NULL);
        if (rp)
            break;
        if (errno != ENOENT)
            return lz_error_set(ld->err, -errno, "%s:%d: %s: %s: %s", ld->file, line, key, cfg_disp(anc, d, sizeof d),
                                strerror(errno));
        if (lstat(anc, &st) == 0)
            return cfg_err(ld, line, key, "%s is a dangling symbolic link", cfg_disp(anc, d, sizeof d));
        if (strcmp(anc, "/") == 0)
            return cfg_err(ld, line, key, "%s has no existing ancestor", cfg_disp(path, d, sizeof d));
    }
    if (strcmp(rp, anc) != 0)
        return cfg_err(ld, line, key, "%s is not canonical (its ancestor %s resolves to %s)",
                       cfg_disp(path, d, sizeof d), cfg_disp(anc, d2, sizeof d2), cfg_disp(rp, d3, sizeof d3));
    if (stat(anc, &st) < 0 || !S_ISDIR(st.st_mode))
        return cfg_err(ld, line, key, "%s: ancestor is not a directory", cfg_disp(path, d, sizeof d));
    *ret_exists = false;
    return 0;
}

/* A canonical default path: realpath of the deepest existing ancestor plus
 * the missing rest (defaults are not the user's spelling, so a symlink in
 * $HOME is resolved rather than refused). */
static char *canonicalize_default(const char *path) {
    _cleanup_free_ char *rp = realpath(path, NULL);
    if (rp)
        return TAKE_PTR(rp);
    size_t n = strlen(path);
    for (size_t i = n; i > 0; i--) {
        if (path[i - 1] != '/' || i == 1)
            continue;
        _cleanup_free_ char *anc = lz_xstrndup(path, i - 1);
        rp = realpath(anc, NULL);
        if (rp)
            return lz_xasprintf("%s%s", strcmp(rp, "/") == 0 ? "" : rp, path + i - 1);
    }
    return lz_xstrdup(path);
}

/* Container destinations: absolute, normalized, not "/", and clear of the
 * protected destinations in both ancestry directions. */
static int check_container_path(struct loader *ld, int line, const char *key, const char *p) {
    char d[DISP_MAX];
    const char *why = cfg_path_problem(p);
    if (why)
        return cfg_err(ld, line, key, "%s %s", cfg_disp(p, d, sizeof d), why);
    if (strcmp(p, "/") == 0)
        return cfg_err(ld, line, key, "\"/\" cannot be a destination");
    static const char *const protected_dest[] = { LZ_SANDBOX_WORKSPACE, LZ_SANDBOX_CONTROL };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(protected_dest); i++)
        if (cfg_paths_overlap(p, protected_dest[i]))
            return cfg_err(ld, line, key, "%s overlaps the protected sandbox destination %s", cfg_disp(p, d, sizeof d),
                           protected_dest[i]);
    return 0;
}

/* Lexical checks of an expanded host path. */
static int check_host_path(struct loader *ld, int line, const char *key, const char *raw, const char *p) {
    char d[DISP_MAX], d2[DISP_MAX];
    if (cfg_has_dotdot(raw))
        return cfg_err(ld, line, key, "%s has a '..' segment", cfg_disp(raw, d, sizeof d));
    const char *why = cfg_path_problem(p);
    if (why) {
        if (strcmp(raw, p) == 0)
            return cfg_err(ld, line, key, "%s %s", cfg_disp(raw, d, sizeof d), why);
        return cfg_err(ld, line, key, "%s (expanded to %s) %s", cfg_disp(raw, d, sizeof d), cfg_disp(p, d2, sizeof d2),
                       why);
    }
    return 0;
}

/* A host path of the file's own settings (storage.data_root,
 * escalation.socket_dir): a string without '..' segments, "~" expanded, no
 * tokens, absolute, normalized and canonical (it need not exist). */
int cfg_host_setting(struct loader *ld, const struct lz_toml_value *v, const char *key, char **ret) {
    char d[DISP_MAX];
    _cleanup_free_ char *p = NULL;
    bool exists;
    int r;
    if ((r = cfg_check_string(ld, v, key)) < 0)
        return r;
    if (cfg_has_dotdot(v->u.string.s))
        return cfg_err(ld, v->line, key, "%s has a '..' segment", cfg_disp(v->u.string.s, d, sizeof d));
    if ((r = expand(ld, v->line, key, v->u.string.s, NULL, &p)) < 0 ||
        (r = check_host_path(ld, v->line, key, v->u.string.s, p)) < 0 ||
        (r = check_canonical(ld, v->line, key, p, &exists)) < 0)
        return r;
    *ret = TAKE_PTR(p);
    return 0;
}

/* A profile's array key: checked to be an array, with room for its
 * elements allocated (at least one). */
static int profile_array(struct loader *ld, const struct profile_in *pi, const struct lz_toml_value *arr,
                         const char *name, size_t elem, char *key, size_t key_size, void **ret) {
    snprintf(key, key_size, "profiles.%s.%s", pi->name, name);
    int r = cfg_check_array(ld, arr, key);
    if (r < 0)
        return r;
    *ret = lz_xcalloc(arr->u.array.n ? arr->u.array.n : 1, elem);
    return 0;
}

int cfg_parse_persistent(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr) {
    char key[128], d[DISP_MAX], d2[DISP_MAX];
    struct lz_profile *p = &pi->p;
    void *v = NULL;
    int r = profile_array(ld, pi, arr, "persistent_dirs", sizeof *p->persistent_dirs, key, sizeof key, &v);
    if (r < 0)
        return r;
    p->persistent_dirs = v;
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.persistent_dirs[%zu]", pi->name, i);
        if ((r = cfg_check_string(ld, e, key)) < 0 || (r = check_container_path(ld, e->line, key, e->u.string.s)) < 0)
            return r;
        for (size_t j = 0; j < i; j++) {
            const char *o = p->persistent_dirs[j];
            if (strcmp(o, e->u.string.s) == 0)
                return cfg_err(ld, e->line, key, "%s is listed twice (also persistent_dirs[%zu])",
                               cfg_disp(e->u.string.s, d, sizeof d), j);
            if (cfg_paths_overlap(o, e->u.string.s))
                return cfg_err(ld, e->line, key,
                               "%s overlaps persistent_dirs[%zu] %s (no persistent directory may "
                               "contain another)",
                               cfg_disp(e->u.string.s, d, sizeof d), j, cfg_disp(o, d2, sizeof d2));
        }
        p->persistent_dirs[p->n_persistent_dirs++] = lz_xstrdup(e->u.string.s);
    }
    return 0;
}

int cfg_parse_volumes(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr,
                      const struct expand_ctx *x) {
    char key[128], kb[160], d[DISP_MAX];
    struct lz_profile *p = &pi->p;
    void *arrv = NULL;
    int r = profile_array(ld, pi, arr, "volumes", sizeof *p->volumes, key, sizeof key, &arrv);
    if (r < 0)
        return r;
    p->volumes = arrv;
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.volumes[%zu]", pi->name, i);
        if ((r = cfg_want_type(ld, e, LZ_TOML_TABLE, key)) < 0 ||
            (r = cfg_check_keys(ld, e, key, (const char *const[]){ "host", "container", "mode", NULL })) < 0)
            return r;
        const struct lz_toml_value *h = lz_toml_table_get(e, "host"), *c = lz_toml_table_get(e, "container"),
                                   *m = lz_toml_table_get(e, "mode");
        if (!h || !c || !m)
            return cfg_err(ld, e->line, key, "missing required key %s",
                           !h       ? "host"
                               : !c ? "container"
                                    : "mode (one of \"rw\", \"ro\", \"z\")");
        snprintf(kb, sizeof kb, "%s.mode", key);
        if ((r = cfg_check_string(ld, m, kb)) < 0)
            return r;
        if (strcmp(m->u.string.s, "rw") != 0 && strcmp(m->u.string.s, "ro") != 0 && strcmp(m->u.string.s, "z") != 0)
            return cfg_err(ld, m->line, kb, "%s is not a volume mode (one of \"rw\", \"ro\", \"z\")",
                           cfg_disp(m->u.string.s, d, sizeof d));
        snprintf(kb, sizeof kb, "%s.container", key);
        if ((r = cfg_check_string(ld, c, kb)) < 0 || (r = check_container_path(ld, c->line, kb, c->u.string.s)) < 0)
            return r;
        for (size_t j = 0; j < p->n_volumes; j++)
            if (strcmp(p->volumes[j].container, c->u.string.s) == 0)
                return cfg_err(ld, c->line, kb, "%s is also the destination of volumes[%zu]",
                               cfg_disp(c->u.string.s, d, sizeof d), j);
        for (size_t j = 0; j < p->n_persistent_dirs; j++)
            if (strcmp(p->persistent_dirs[j], c->u.string.s) == 0)
                return cfg_err(ld, c->line, kb, "%s is also persistent_dirs[%zu]", cfg_disp(c->u.string.s, d, sizeof d),
                               j);

        snprintf(kb, sizeof kb, "%s.host", key);
        if ((r = cfg_check_string(ld, h, kb)) < 0)
            return r;
        _cleanup_free_ char *host = NULL;
        if (cfg_has_dotdot(h->u.string.s))
            return cfg_err(ld, h->line, kb, "%s has a '..' segment", cfg_disp(h->u.string.s, d, sizeof d));
        if ((r = expand(ld, h->line, kb, h->u.string.s, x, &host)) < 0 ||
            (r = check_host_path(ld, h->line, kb, h->u.string.s, host)) < 0)
            return r;
        struct lz_volume *v = &p->volumes[p->n_volumes++];
        v->host = TAKE_PTR(host);
        v->container = lz_xstrdup(c->u.string.s);
        v->mode = lz_xstrdup(m->u.string.s);
        v->read_only = strcmp(v->mode, "ro") == 0;
        v->line = h->line;
    }
    return 0;
}

/* ---- the selected profile against the filesystem and environment ----- */

int cfg_resolve_paths(struct loader *ld, struct lz_config *c) {
    char d[DISP_MAX], d2[DISP_MAX], key[160];
    int r;
    const bool ws = !ld->no_workspace;
    if (ws && cfg_paths_overlap(c->data_root, c->workspace))
        return cfg_err(ld, ld->data_root_line, ld->data_root_line ? "storage.data_root" : NULL,
                       "the Storage Root %s and the workspace %s overlap; the sandbox could reach Lazaret's own "
                       "state; run lazaret in a project directory, or set [storage] data_root outside the workspace",
                       cfg_disp(c->data_root, d, sizeof d), cfg_disp(c->workspace, d2, sizeof d2));
    /* SR-2: host configuration never lies beneath a path the sandbox sees. */
    if (ws && c->source_path && cfg_path_within(c->source_path, c->workspace))
        return lz_error_set(ld->err, -EINVAL,
                            "%s: the configuration file is inside the workspace %s; host configuration must not be "
                            "reachable from the sandbox (SR-2)",
                            ld->file, cfg_disp(c->workspace, d, sizeof d));

    if (ws && c->escalation_socket_dir && cfg_paths_overlap(c->escalation_socket_dir, c->workspace))
        return cfg_err(ld, ld->socket_dir_line, "escalation.socket_dir", "%s and the workspace %s overlap",
                       cfg_disp(c->escalation_socket_dir, d, sizeof d), cfg_disp(c->workspace, d2, sizeof d2));
    _cleanup_free_ char *gitdir = lz_xasprintf("%s/.git", c->workspace);
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        struct lz_volume *v = &c->profile.volumes[i];
        bool exists;
        snprintf(key, sizeof key, "profiles.%s.volumes[%zu].host", c->profile.name, i);
        if ((r = check_canonical(ld, v->line, key, v->host, &exists)) < 0)
            return r;
        if (!exists) {
            /* 003 §3.2: creation is limited to directories strictly beneath
             * the profile directory. */
            if (!cfg_path_strictly_within(v->host, c->profile_dir))
                return cfg_err(ld, v->line, key,
                               "%s does not exist (only volumes strictly beneath {profile_dir} are "
                               "created)",
                               cfg_disp(v->host, d, sizeof d));
            v->create = true;
        }
        if (c->source_path && cfg_path_within(c->source_path, v->host))
            return cfg_err(ld, v->line, key,
                           "%s contains the configuration file; host configuration must not be "
                           "mounted into the sandbox (SR-2)",
                           cfg_disp(v->host, d, sizeof d));
        if (ws && cfg_path_within(c->workspace, v->host))
            return cfg_err(ld, v->line, key,
                           "%s contains the workspace; it is mounted only at /workspace, with "
                           "its .git protections",
                           cfg_disp(v->host, d, sizeof d));
        if (ws && cfg_path_within(v->host, gitdir))
            return cfg_err(ld, v->line, key, "%s is inside the workspace's .git directory (SR-4)",
                           cfg_disp(v->host, d, sizeof d));
        if (cfg_path_within(v->host, c->data_root) && !cfg_path_strictly_within(v->host, c->profile_dir) &&
            !cfg_path_strictly_within(v->host, c->domain_dir))
            return cfg_err(ld, v->line, key,
                           "%s is Lazaret's own state under the Storage Root; only paths strictly "
                           "beneath {profile_dir} or {domain_dir} may be volumes",
                           cfg_disp(v->host, d, sizeof d));
        if (cfg_path_within(c->data_root, v->host))
            return cfg_err(ld, v->line, key, "%s contains the Storage Root", cfg_disp(v->host, d, sizeof d));
        if (c->escalation_socket_dir && cfg_paths_overlap(c->escalation_socket_dir, v->host))
            return cfg_err(ld, v->line, key, "%s overlaps escalation.socket_dir", cfg_disp(v->host, d, sizeof d));
    }
    return 0;
}

/* ---- [[escalation.auto_approve]] ------------------------------------ */

static const struct lz_sbw_tree *trees_find(const struct lz_sbw *t, const char *p) {
    for (size_t i = 0; i < t->n; i++)
        if (cfg_path_within(p, t->v[i].path))
            return &t->v[i];
    return NULL;
}

/* path with its directory resolved (the last component as it is), so that
 * a link's location is compared canonically without following the link. */
static char *dir_resolved(const char *path) {
    _cleanup_free_ char *d = lz_xstrdup(path), *b = lz_xstrdup(path);
    const char *base = basename(b);
    _cleanup_free_ char *rd = realpath(dirname(d), NULL);
    if (!rd)
        return lz_xstrdup(path);
    return lz_xasprintf("%s/%s", strcmp(rd, "/") == 0 ? "" : rd, base);
}

/* The trees no auto_approve executable (or script) may lie in, nor an
 * argument name: sbwrite.h's LZ_SBW_REACH set, with every profile's
 * volumes named by their key. */
static void build_trees(struct loader *ld, const struct lz_config *c, struct lz_sbw *t) {
    lz_sbw_trees(c, LZ_SBW_REACH, (const char *const *)ld->vol_hosts, (const char *const *)ld->vol_keys,
                 ld->n_vol_hosts, t);
}

/* A path (argv[0], a link of its chain, a script) must not lie in a tree,
 * neither where it is written nor where it resolves. */
static int check_outside(struct loader *ld, const struct lz_sbw *t, int line, const char *key, const char *what,
                         const char *p) {
    char d[DISP_MAX], d2[DISP_MAX];
    _cleanup_free_ char *dr = dir_resolved(p), *rp = realpath(p, NULL);
    const char *cand[] = { p, dr, rp };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(cand); k++) {
        const struct lz_sbw_tree *hit = cand[k] ? trees_find(t, cand[k]) : NULL;
        if (hit)
            return cfg_err(ld, line, key,
                           "%s %s lies inside %s (%s), which the sandbox can write or Lazaret controls; "
                           "an auto-approved program must live outside it",
                           what, cfg_disp(cand[k], d, sizeof d), hit->what, cfg_disp(hit->path, d2, sizeof d2));
    }
    return 0;
}

/* A bare name through PATH, the way execvp would find it — except that an
 * empty or relative PATH entry (the current directory) is never searched. */
static int path_lookup(struct loader *ld, struct lz_config *c, int line, const char *key, const char *name,
                       char **ret) {
    char d[DISP_MAX], d2[DISP_MAX];
    const char *pathv = ld->lookup_env ? ld->lookup_env(ld->lookup_env_ud, "PATH") : secure_getenv("PATH");
    if (!pathv || !*pathv)
        return cfg_err(ld, line, key, "%s is a bare name and PATH is not set%s; write an absolute path",
                       cfg_disp(name, d, sizeof d), ld->lookup_env ? " (not handed over by the client)" : "");
    for (const char *s = pathv; *s;) {
        const char *e = strchrnul(s, ':');
        if (e > s && s[0] == '/' && (size_t)(e - s) < PATH_MAX) {
            _cleanup_free_ char *cand = lz_xasprintf("%.*s/%s", (int)(e - s), s, name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
                if (!c->auto_approve_path)
                    c->auto_approve_path = lz_xstrdup(pathv);
                *ret = TAKE_PTR(cand);
                return 0;
            }
        }
        s = *e ? e + 1 : e;
    }
    return cfg_err(ld, line, key, "%s is not found in PATH (%s); write an absolute path", cfg_disp(name, d, sizeof d),
                   cfg_disp(pathv, d2, sizeof d2));
}

#define MAX_LINKS 40

static int check_args(struct loader *ld, const struct lz_sbw *t, const struct lz_auto_approve *a, size_t i) {
    char d[DISP_MAX], key[128], why[768];
    _cleanup_free_ const char **paths = lz_xcalloc(t->n ? t->n : 1, sizeof *paths);
    for (size_t k = 0; k < t->n; k++)
        paths[k] = t->v[k].path;
    for (size_t j = 1; j < a->argc; j++) {
        size_t hit = SIZE_MAX;
        if (lz_autoapprove_arg_reaches(a->argv[j], paths, t->n, &hit, why, sizeof why) == 0)
            continue;
        snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv[%zu]", i, j);
        if (hit < t->n)
            return cfg_err(ld, a->line, key,
                           "%s: %s, %s, which the sandbox can write or Lazaret controls; an auto-approved "
                           "program must not be pointed there (ask at the prompt instead)",
                           cfg_disp(a->argv[j], d, sizeof d), why, t->v[hit].what);
        return cfg_err(ld, a->line, key, "%s: %s; refused", cfg_disp(a->argv[j], d, sizeof d), why);
    }
    return 0;
}

/* The interpreter line of a #! script ("/usr/bin/env python3"), or false. */
static bool read_shebang(const char *path, char *ret, size_t size) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return false;
    char b[256];
    ssize_t n = read(fd, b, sizeof b - 1);
    if (n < 3 || b[0] != '#' || b[1] != '!')
        return false;
    b[n] = '\0';
    char *s = b + 2;
    s += strspn(s, " \t");
    size_t k = strcspn(s, "\n");
    s[k] = '\0';
    char d[DISP_MAX];
    snprintf(ret, size, "%s", cfg_disp(s, d, sizeof d));
    return true;
}

static int resolve_rule(struct loader *ld, struct lz_config *c, const struct lz_sbw *t, size_t i) {
    char d[DISP_MAX], d2[DISP_MAX], key[128];
    struct lz_auto_approve *a = &c->auto_approve[i];
    const char *w = a->argv[0];
    int r;
    snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv[0]", i);
    if (cfg_has_ctrl(w))
        return cfg_err(ld, a->line, key, "%s contains a control character", cfg_disp(w, d, sizeof d));

    /* 1. The path written, "~/" expanded, or the bare name found in PATH. */
    _cleanup_free_ char *p = NULL;
    bool bare = false;
    if (w[0] == '/' || (w[0] == '~' && w[1] == '/')) {
        if (cfg_has_dotdot(w))
            return cfg_err(ld, a->line, key, "%s has a '..' segment", cfg_disp(w, d, sizeof d));
        if ((r = expand(ld, a->line, key, w, NULL, &p)) < 0)
            return r;
    } else if (strchr(w, '/') || w[0] == '~' || strcmp(w, ".") == 0 || strcmp(w, "..") == 0) {
        return cfg_err(ld, a->line, key,
                       "%s is a relative path; write an absolute path (or a bare name, looked up in PATH when the "
                       "configuration is loaded)",
                       cfg_disp(w, d, sizeof d));
    } else {
        if ((r = path_lookup(ld, c, a->line, key, w, &p)) < 0)
            return r;
        bare = true;
    }

    /* 2. The symlink chain: every link's name is a name of the program
     * (/usr/bin/python3 -> python3.11), and no link may lie where the
     * sandbox could retarget it. */
    char *names[MAX_LINKS + 3];
    size_t nn = 0;
    names[nn++] = lz_xstrdup(w);
    _cleanup_free_ char *hop = lz_xstrdup(p);
    for (int k = 0;; k++) {
        if (k > MAX_LINKS) {
            r = cfg_err(ld, a->line, key, "%s: too many levels of symbolic links", cfg_disp(p, d, sizeof d));
            goto out;
        }
        if ((r = check_outside(ld, t, a->line, key, k ? "the symbolic link" : "the executable", hop)) < 0)
            goto out;
        struct stat st;
        if (lstat(hop, &st) < 0) {
            r = cfg_err(ld, a->line, key, "%s: %s", cfg_disp(hop, d, sizeof d), strerror(errno));
            goto out;
        }
        names[nn++] = lz_xstrdup(hop);
        if (!S_ISLNK(st.st_mode))
            break;
        char tb[PATH_MAX];
        ssize_t n = readlink(hop, tb, sizeof tb - 1);
        if (n < 0) {
            r = cfg_err(ld, a->line, key, "%s: %s", cfg_disp(hop, d, sizeof d), strerror(errno));
            goto out;
        }
        tb[n] = '\0';
        char *next;
        if (tb[0] == '/') {
            next = lz_xstrdup(tb);
        } else {
            _cleanup_free_ char *dd = lz_xstrdup(hop);
            const char *dir = dirname(dd);
            next = lz_xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, tb);
        }
        free(hop);
        hop = next;
    }

    /* 3. The canonical file: a regular executable outside every tree. */
    {
        _cleanup_free_ char *canon = realpath(p, NULL);
        if (!canon) {
            r = cfg_err(ld, a->line, key, "%s: %s", cfg_disp(p, d, sizeof d), strerror(errno));
            goto out;
        }
        struct stat st;
        if (stat(canon, &st) < 0 || !S_ISREG(st.st_mode)) {
            r = cfg_err(ld, a->line, key, "%s is not a regular file", cfg_disp(canon, d, sizeof d));
            goto out;
        }
        if (access(canon, X_OK) < 0) {
            r = cfg_err(ld, a->line, key, "%s is not executable", cfg_disp(canon, d, sizeof d));
            goto out;
        }
        if ((r = check_outside(ld, t, a->line, key, "the executable", canon)) < 0)
            goto out;
        names[nn++] = lz_xstrdup(canon);

        /* 4. The classes (autoapprove.h). */
        char why[1024];
        size_t script = 0;
        if (lz_autoapprove_check((const char *const *)names, nn, a->argv, a->argc, a->allow_extra_args, why, sizeof why,
                                 &script) < 0) {
            r = cfg_err(ld, a->line, key, "refused: %s", why);
            goto out;
        }
        if (script) {
            char skey[128];
            snprintf(skey, sizeof skey, "escalation.auto_approve[%zu].argv[%zu]", i, script);
            const char *sp = a->argv[script];
            _cleanup_free_ char *srp = realpath(sp, NULL);
            struct stat sst;
            if (cfg_has_dotdot(sp) || !srp || stat(srp, &sst) < 0 || !S_ISREG(sst.st_mode)) {
                r = cfg_err(ld, a->line, skey, "the script %s is not an existing regular file (without '..')",
                            cfg_disp(sp, d, sizeof d));
                goto out;
            }
            if ((r = check_outside(ld, t, a->line, skey, "the script", sp)) < 0)
                goto out;
        }
        /* 5. No argument may name a sandbox-writable or control tree (nor
         * climb out of the working directory with ".."): with the fresh
         * empty working directory, that is what keeps the sandbox's code
         * out of the program's reach. */
        if ((r = check_args(ld, t, a, i)) < 0)
            goto out;
        /* A script: the kernel runs its #! interpreter with the script as
         * an operand, so what it does is decided by the script (and by
         * whatever that interpreter loads). Named, not refused: the
         * arguments after it are the script's, not the interpreter's. */
        char she[256];
        if (read_shebang(canon, she, sizeof she))
            snprintf(why + strlen(why), sizeof why - strlen(why),
                     "%sa script run by %s: check what it runs and loads (a version manager's shim, for one, "
                     "chooses the program from files in the working directory, the workspace)",
                     why[0] ? "; " : "", she);
        if (st.st_mode & (S_IWGRP | S_IWOTH))
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s is writable by its group or by others",
                     why[0] ? "; " : "", cfg_disp(canon, d2, sizeof d2));
        if (a->cwd_workspace)
            snprintf(why + strlen(why), sizeof why - strlen(why),
                     "%scwd = \"workspace\" with runs_workspace_code = true: it runs in the workspace, so the "
                     "sandbox chooses code it reads there (test files, build files, tool configuration) and that "
                     "code runs on the host without a prompt",
                     why[0] ? "; " : "");
        if (why[0])
            a->warning = lz_xstrdup(why);
        a->written = a->argv[0];
        a->argv[0] = TAKE_PTR(canon);
        a->found_in_path = bare;
    }
    r = 0;
out:
    for (size_t k = 0; k < nn; k++)
        free(names[k]);
    return r;
}

int cfg_resolve_auto_approve(struct loader *ld, struct lz_config *c) {
    if (c->n_auto_approve == 0)
        return 0;
    __attribute__((cleanup(lz_sbw_free))) struct lz_sbw t = { 0 };
    build_trees(ld, c, &t);
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        int r = resolve_rule(ld, c, &t, i);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- top level ------------------------------------------------------- */

int cfg_default_data_root(struct loader *ld, char **ret) {
    const char *x = secure_getenv("XDG_DATA_HOME");
    _cleanup_free_ char *p = NULL;
    if (x && x[0] == '/')
        p = lz_xasprintf("%s/lazaret", x);
    else if (ld->home)
        p = lz_xasprintf("%s/.local/share/lazaret", strcmp(ld->home, "/") == 0 ? "" : ld->home);
    else
        return lz_error_set(ld->err, -ENOENT,
                            "cannot determine the Storage Root: neither XDG_DATA_HOME nor a home "
                            "directory is available");
    if (cfg_path_problem(p))
        return lz_error_set(ld->err, -EINVAL, "the default Storage Root \"%s\" is not a normalized absolute path", p);
    *ret = canonicalize_default(p);
    return 0;
}

/* True when p is dir or one of its ancestors (both canonical). */
static bool path_at_or_above(const char *p, const char *dir) {
    size_t n = strlen(p);
    if (!strcmp(p, "/"))
        return true;
    return !strncmp(dir, p, n) && (dir[n] == '\0' || dir[n] == '/');
}

/* The top level of the Git repository holding dir (canonical), found as
 * Git's own discovery finds it, from the host: the nearest directory at or
 * above dir with an entry named `.git` (a directory, or the gitfile of a
 * submodule or linked worktree), without crossing into another filesystem
 * (Git's default, GIT_DISCOVERY_ACROSS_FILESYSTEM). The walk never reaches
 * "/", nor home or its ancestors from a directory below home: a home
 * directory kept in Git must not become the workspace of every project
 * under it (a run in home itself keeps it). NULL: dir is in no repository (or dir is that top level). */
static char *repo_top(const char *dir, const char *home) {
    struct stat st0, st;
    if (stat(dir, &st0) < 0)
        return NULL;
    _cleanup_free_ char *home_rp = home ? realpath(home, NULL) : NULL;
    bool in_home = home_rp && path_at_or_above(home_rp, dir);
    _cleanup_free_ char *p = lz_xstrdup(dir);
    for (;;) {
        bool up = strcmp(p, dir) != 0;
        if (!strcmp(p, "/") || (up && in_home && path_at_or_above(p, home_rp)))
            return NULL;
        if (stat(p, &st) < 0 || st.st_dev != st0.st_dev)
            return NULL;
        _cleanup_free_ char *g = lz_xasprintf("%s/.git", p);
        if (lstat(g, &st) == 0) {
            if (!up)
                return NULL;
            char *top = p;
            p = NULL;
            return top;
        }
        char *slash = strrchr(p, '/');
        if (!slash) /* dir is absolute: cannot happen */
            return NULL;
        if (slash == p)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

int cfg_resolve_workspace(const struct lz_config_opts *opts, const char *home, struct lz_config *c,
                          struct lz_error *err) {
    char d[DISP_MAX];
    _cleanup_free_ char *cwd = NULL;
    const char *w = opts ? opts->workspace : NULL;
    if (!w) {
        cwd = getcwd(NULL, 0);
        if (!cwd)
            return lz_error_set(err, -errno, "cannot determine the current directory: %s", strerror(errno));
        w = cwd;
    }
    char *rp = realpath(w, NULL);
    if (!rp)
        return lz_error_set(err, -errno, "workspace %s: %s", cfg_disp(w, d, sizeof d), strerror(errno));
    c->workspace = rp;
    char *top = opts && opts->workspace_exact ? NULL : repo_top(rp, home);
    if (top) {
        c->start_dir = lz_xstrdup(rp + strlen(top) + 1);
        c->workspace = top;
        free(rp);
        rp = top;
    } else {
        c->start_dir = lz_xstrdup("");
    }
    struct stat st;
    if (stat(rp, &st) < 0)
        return lz_error_set(err, -errno, "workspace %s: %s", cfg_disp(rp, d, sizeof d), strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return lz_error_set(err, -ENOTDIR, "workspace %s is not a directory", cfg_disp(rp, d, sizeof d));
    if (strlen(rp) > LZ_CONFIG_MAX_STRING)
        return lz_error_set(err, -ENAMETOOLONG, "workspace path is longer than %d bytes", LZ_CONFIG_MAX_STRING);
    return 0;
}

/* Finds the configuration file. *ret_path NULL means "none: built-in". */
int cfg_locate_config(const struct lz_config_opts *opts, const char *home, char **ret_path, struct lz_error *err) {
    char d[DISP_MAX];
    if (opts && opts->config_path) {
        const char *p = opts->config_path;
        if (p[0] == '\0' || cfg_has_dotdot(p) || cfg_has_ctrl(p))
            return lz_error_set(err, -EINVAL,
                                "--config %s: not a usable path (no '..' segments or control "
                                "characters)",
                                cfg_disp(p, d, sizeof d));
        /* An explicit path may be a symlink: it is resolved once here and
         * the canonical target is what is read and reported. */
        char *rp = realpath(p, NULL);
        if (!rp)
            return lz_error_set(err, -errno, "%s: %s", p, strerror(errno));
        *ret_path = rp;
        return 0;
    }
    _cleanup_free_ char *p = NULL;
    const char *x = secure_getenv("XDG_CONFIG_HOME");
    if (x && x[0] == '/')
        p = lz_xasprintf("%s/lazaret/config.toml", x);
    else if (home)
        p = lz_xasprintf("%s/.config/lazaret/config.toml", strcmp(home, "/") == 0 ? "" : home);
    else {
        *ret_path = NULL;
        return 0;
    }
    char *rp = realpath(p, NULL);
    if (!rp) {
        if (errno == ENOENT) {
            struct stat st;
            if (lstat(p, &st) == 0)
                return lz_error_set(err, -ENOENT, "%s: dangling symbolic link", p);
            *ret_path = NULL;
            return 0;
        }
        return lz_error_set(err, -errno, "%s: %s", p, strerror(errno));
    }
    *ret_path = rp;
    return 0;
}

int cfg_parse_private_dirs(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr) {
    char key[128], d[DISP_MAX], d2[DISP_MAX];
    struct lz_profile *p = &pi->p;
    void *v = NULL;
    int r = profile_array(ld, pi, arr, "private_dirs", sizeof *p->private_dirs, key, sizeof key, &v);
    if (r < 0)
        return r;
    p->private_dirs = v;
    if (arr->u.array.n > LZ_PRIVDIRS_MAX)
        return cfg_err(ld, arr->line, key, "more than %d private directories", LZ_PRIVDIRS_MAX);
    /* They are the Domain's copies of git-ignored paths: without the
     * Ignored Workspace State there is no such copy (the workspace, ignored
     * files included, is the host's). */
    if (arr->u.array.n && !p->ignored_state)
        return cfg_err(ld, arr->line, key,
                       "private directories need ignored_state = true (with ignored_state = false every "
                       "path of the workspace is the host's)");
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.private_dirs[%zu]", pi->name, i);
        if ((r = cfg_check_string(ld, e, key)) < 0)
            return r;
        const char *s = e->u.string.s, *why = lz_privdir_invalid(s);
        if (strlen(s) != e->u.string.len)
            why = "it contains a NUL byte";
        if (why)
            return cfg_err(ld, e->line, key, "%s is not a workspace-relative directory: %s", cfg_disp(s, d, sizeof d),
                           why);
        /* The host-tool paths are seeded from the host's copy and shown
         * through the router (docs/host-tools.md): not a plain store. */
        size_t ht = lz_hosttools_match(p->host_tools, p->n_host_tools, s);
        if (ht)
            return cfg_err(ld, e->line, key, "%s is a host-tool configuration path (%.*s), served by the router",
                           cfg_disp(s, d, sizeof d), (int)ht, s);
        for (size_t j = 0; j < i; j++) {
            const char *o = p->private_dirs[j];
            if (strcmp(o, s) == 0)
                return cfg_err(ld, e->line, key, "%s is listed twice (also private_dirs[%zu])",
                               cfg_disp(s, d, sizeof d), j);
            if (lz_privdirs_nested(o, s))
                return cfg_err(ld, e->line, key,
                               "%s overlaps private_dirs[%zu] %s (no private directory may contain another)",
                               cfg_disp(s, d, sizeof d), j, cfg_disp(o, d2, sizeof d2));
        }
        p->private_dirs[p->n_private_dirs++] = lz_xstrdup(s);
    }
    return 0;
}
