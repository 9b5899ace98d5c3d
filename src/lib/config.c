/* config.c — see config.h.
 *
 * Order of work (003 §3.2): parse; decode and structurally validate every
 * profile (types, names, tokens, lexical paths, prefixes, allow/deny
 * conflicts); select the profile; resolve the selected profile's host paths
 * against the filesystem (canonical paths, SR-2); only then resolve its
 * environment references; finally derive the Domain ID and fingerprint. */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>

#include "domain_id.h"
#include "toml.h"

struct loader {
    const char *file; /* name used in messages: canonical config path */
    struct lz_error *err;
    const char *home; /* may be NULL: then "~" cannot be expanded */
    int data_root_line, socket_dir_line; /* 0 when not from the file */
    const char *(*lookup_env)(void *ud, const char *name); /* NULL: secure_getenv */
    void *lookup_env_ud;
};

/* One prefix list with the line of every element, for conflict messages. */
struct prefix_list {
    char **v;
    int *lines;
    size_t n;
    const char *key; /* e.g. "network.default_deny" or "profiles.x.deny_egress" */
};

static void prefix_list_done(struct prefix_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    free(l->lines);
    l->v = NULL;
    l->lines = NULL;
    l->n = 0;
}

static void strv_free(char **v, size_t n) {
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- messages -------------------------------------------------------- */

static int cerr(struct loader *ld, int line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cerr(struct loader *ld, int line, const char *key, const char *fmt, ...) {
    char msg[LZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0 && key)
        return lz_error_set(ld->err, -EINVAL, "%s:%d: %s: %s", ld->file, line, key, msg);
    if (line > 0)
        return lz_error_set(ld->err, -EINVAL, "%s:%d: %s", ld->file, line, msg);
    if (key)
        return lz_error_set(ld->err, -EINVAL, "%s: %s: %s", ld->file, key, msg);
    return lz_error_set(ld->err, -EINVAL, "%s: %s", ld->file, msg);
}

/* A string for a message: quoted, control bytes escaped, cut at ~200 bytes. */
static const char *disp(const char *s, char *buf, size_t size) {
    size_t o = 0;
    buf[o++] = '"';
    for (; *s && o + 10 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) {
            int r = snprintf(buf + o, size - o, "\\x%02x", c);
            o += r > 0 ? (size_t)r : 0;
        } else if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else {
            buf[o++] = (char)c;
        }
    }
    if (*s) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}
#define DISP_MAX 256

/* A key for a message: bare keys as they are, anything else quoted. */
static const char *kdisp(const char *k, char *buf, size_t size) {
    bool bare = k[0] != '\0';
    for (const char *q = k; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' ||
              *q == '-'))
            bare = false;
    if (bare && strlen(k) < size) {
        memcpy(buf, k, strlen(k) + 1);
        return buf;
    }
    return disp(k, buf, size);
}

static const char *type_article(enum lz_toml_type t) {
    switch (t) {
    case LZ_TOML_TABLE: return "a table";
    case LZ_TOML_ARRAY: return "an array";
    case LZ_TOML_STRING: return "a string";
    case LZ_TOML_INTEGER: return "an integer";
    case LZ_TOML_BOOL: return "a boolean";
    }
    return "a value";
}

/* ---- small predicates ------------------------------------------------ */

bool lz_profile_name_valid(const char *name) {
    size_t n = strlen(name);
    if (n < 2 || n > LZ_PROFILE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static bool env_name_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 255 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

static bool has_ctrl(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

static bool has_dotdot(const char *p) {
    for (const char *s = p;;) {
        const char *e = strchrnul(s, '/');
        if (e - s == 2 && s[0] == '.' && s[1] == '.')
            return true;
        if (!*e)
            return false;
        s = e + 1;
    }
}

/* NULL when p is an absolute, normalized path; otherwise why not. */
static const char *path_problem(const char *p) {
    if (has_dotdot(p))
        return "has a '..' segment";
    if (has_ctrl(p))
        return "contains a control character";
    if (p[0] != '/')
        return "is not an absolute path";
    if (p[1] == '\0')
        return NULL;
    for (const char *s = p + 1;;) {
        const char *e = strchrnul(s, '/');
        if (e == s)
            return *e ? "has an empty segment ('//')" : "has a trailing '/'";
        if (e - s == 1 && s[0] == '.')
            return "has a '.' segment";
        if (!*e)
            return NULL;
        s = e + 1;
    }
}

/* p equals anc or lies beneath it (both normalized absolute). */
static bool path_within(const char *p, const char *anc) {
    size_t n = strlen(anc);
    if (n == 1 && anc[0] == '/')
        return true;
    return strncmp(p, anc, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static bool path_strictly_within(const char *p, const char *anc) {
    return path_within(p, anc) && strcmp(p, anc) != 0;
}

static bool paths_overlap(const char *a, const char *b) { return path_within(a, b) || path_within(b, a); }

/* ---- IPv4 prefixes --------------------------------------------------- */

static int parse_dec(const char **s, unsigned max, unsigned *ret) {
    const char *p = *s;
    unsigned v = 0;
    size_t n = 0;
    while (*p >= '0' && *p <= '9') {
        if (n == 1 && v == 0)
            return -EINVAL; /* leading zero: octal ambiguity */
        v = v * 10 + (unsigned)(*p - '0');
        if (v > max || ++n > 3)
            return -EINVAL;
        p++;
    }
    if (n == 0)
        return -EINVAL;
    *s = p;
    *ret = v;
    return 0;
}

int lz_ipv4_prefix_parse(const char *s, char ret[static 19], uint32_t *ret_addr, unsigned *ret_len,
                         const char **ret_why) {
    const char *why = NULL;
    if (strchr(s, ':')) {
        why = "is an IPv6 prefix; IPv6 is disabled in v1";
        goto bad;
    }
    const char *p = s;
    uint32_t addr = 0;
    unsigned v, len;
    for (int i = 0; i < 4; i++) {
        if (parse_dec(&p, 255, &v) < 0 || (i < 3 && *p++ != '.')) {
            why = "is not an IPv4 prefix of the form a.b.c.d/len";
            goto bad;
        }
        addr = (addr << 8) | v;
    }
    if (*p != '/') {
        why = "has no prefix length (write a.b.c.d/len, e.g. /32 for one address)";
        goto bad;
    }
    p++;
    if (parse_dec(&p, 32, &len) < 0 || *p != '\0') {
        why = "has an invalid prefix length (0 to 32)";
        goto bad;
    }
    uint32_t mask = len == 0 ? 0 : UINT32_MAX << (32 - len);
    snprintf(ret, 19, "%u.%u.%u.%u/%u", (addr & mask) >> 24, ((addr & mask) >> 16) & 255,
             ((addr & mask) >> 8) & 255, (addr & mask) & 255, len);
    if (ret_addr)
        *ret_addr = addr & mask;
    if (ret_len)
        *ret_len = len;
    if (addr & ~mask) {
        /* ret holds the masked prefix as a suggestion. */
        why = "has host bits set";
        goto bad;
    }
    return 0;
bad:
    if (ret_why)
        *ret_why = why;
    return -EINVAL;
}

/* ---- typed lookups --------------------------------------------------- */

/* Refuses keys of t that are not in allowed (NULL-terminated). */
static int check_keys(struct loader *ld, const struct lz_toml_value *t, const char *prefix,
                      const char *const *allowed) {
    for (size_t i = 0; i < t->u.table.n; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, e->key) == 0)
                ok = true;
        if (ok)
            continue;
        char expect[256] = "", kd[DISP_MAX];
        size_t o = 0;
        for (const char *const *a = allowed; *a && o < sizeof expect; a++) {
            int r = snprintf(expect + o, sizeof expect - o, "%s%s", a == allowed ? "" : ", ", *a);
            o += r > 0 ? (size_t)r : 0;
        }
        return cerr(ld, e->line, NULL, "%s%s%s: unknown key (expected one of: %s)", prefix ? prefix : "",
                    prefix ? "." : "", kdisp(e->key, kd, sizeof kd), expect);
    }
    return 0;
}

static int want_type(struct loader *ld, const struct lz_toml_value *v, enum lz_toml_type type, const char *key) {
    if (v->type == type)
        return 0;
    return cerr(ld, v->line, key, "expected %s, found %s", type_article(type), type_article(v->type));
}

static int check_string(struct loader *ld, const struct lz_toml_value *v, const char *key) {
    int r = want_type(ld, v, LZ_TOML_STRING, key);
    if (r < 0)
        return r;
    if (v->u.string.len > LZ_CONFIG_MAX_STRING)
        return cerr(ld, v->line, key, "string longer than %d bytes", LZ_CONFIG_MAX_STRING);
    return 0;
}

static int check_array(struct loader *ld, const struct lz_toml_value *v, const char *key) {
    int r = want_type(ld, v, LZ_TOML_ARRAY, key);
    if (r < 0)
        return r;
    if (v->u.array.n > LZ_CONFIG_MAX_LIST)
        return cerr(ld, v->line, key, "more than %d elements", LZ_CONFIG_MAX_LIST);
    return 0;
}

/* An integer in [0, max]. */
static int get_count(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key,
                     int64_t max, int64_t def, int64_t *ret) {
    const struct lz_toml_value *v = lz_toml_table_get(t, name);
    if (!v) {
        *ret = def;
        return 0;
    }
    int r = want_type(ld, v, LZ_TOML_INTEGER, key);
    if (r < 0)
        return r;
    if (v->u.integer < 0 || v->u.integer > max)
        return cerr(ld, v->line, key, "%" PRId64 " is out of range (0 to %" PRId64 ")", v->u.integer, max);
    *ret = v->u.integer;
    return 0;
}

static int get_bool(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key, bool def,
                    bool *ret) {
    const struct lz_toml_value *v = lz_toml_table_get(t, name);
    if (!v) {
        *ret = def;
        return 0;
    }
    int r = want_type(ld, v, LZ_TOML_BOOL, key);
    if (r < 0)
        return r;
    *ret = v->u.boolean;
    return 0;
}

/* ---- expansion ------------------------------------------------------- */

struct expand_ctx {
    const char *profile_name, *profile_dir, *domain_dir, *domain_hash, *workspace;
};

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
#define APPEND(p, n)                                                                       \
    do {                                                                                   \
        size_t _n = (n);                                                                   \
        if (len + _n >= PATH_MAX)                                                          \
            return cerr(ld, line, key, "%s is longer than %d bytes after expansion",      \
                        disp(raw, d, sizeof d), PATH_MAX - 1);                             \
        if (len + _n + 1 > cap) {                                                          \
            while (cap < len + _n + 1)                                                     \
                cap *= 2;                                                                  \
            out = lz_xrealloc(out, cap);                                                   \
        }                                                                                  \
        memcpy(out + len, (p), _n);                                                        \
        len += _n;                                                                         \
        out[len] = '\0';                                                                   \
    } while (0)

    out = lz_xmalloc(cap);
    out[0] = '\0';
    if (s[0] == '~' && (s[1] == '\0' || s[1] == '/')) {
        if (!ld->home)
            return cerr(ld, line, key, "cannot expand '~' in %s: no home directory", disp(raw, d, sizeof d));
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
                        val = i == 0 ? x->profile_dir : i == 1 ? x->domain_dir : i == 2 ? x->profile_name
                            : i == 3 ? x->domain_hash : x->workspace;
                }
            }
            if (tn == 0) {
                const char *e = strchr(s, '}');
                size_t n = e && *s == '{' ? (size_t)(e - s) + 1 : 1;
                _cleanup_free_ char *tok = lz_xstrndup(s, n > 64 ? 64 : n);
                char t[DISP_MAX];
                return cerr(ld, line, key, "unknown expansion token %s in %s (known: {profile_dir}, {domain_dir}, "
                            "{profile_name}, {domain_hash}, {workspace_dir})",
                            disp(tok, t, sizeof t), disp(raw, d, sizeof d));
            }
            if (!x)
                return cerr(ld, line, key, "expansion tokens are not allowed here: %s", disp(raw, d, sizeof d));
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
            return cerr(ld, line, key, "%s is not canonical (it resolves to %s)", disp(path, d, sizeof d),
                        disp(rp, d2, sizeof d2));
        *ret_exists = true;
        return 0;
    }
    if (errno != ENOENT)
        return lz_error_set(ld->err, -errno, "%s:%d: %s: %s: %s", ld->file, line, key, disp(path, d, sizeof d),
                            strerror(errno));
    struct stat st;
    if (lstat(path, &st) == 0)
        return cerr(ld, line, key, "%s is a dangling symbolic link", disp(path, d, sizeof d));

    _cleanup_free_ char *anc = lz_xstrdup(path);
    for (;;) {
        char *slash = strrchr(anc, '/');
        if (!slash)
            return cerr(ld, line, key, "%s has no existing ancestor", disp(path, d, sizeof d));
        if (slash == anc)
            slash[1] = '\0';
        else
            slash[0] = '\0';
        free(rp);
        rp = realpath(anc, NULL);
        if (rp)
            break;
        if (errno != ENOENT)
            return lz_error_set(ld->err, -errno, "%s:%d: %s: %s: %s", ld->file, line, key, disp(anc, d, sizeof d),
                                strerror(errno));
        if (lstat(anc, &st) == 0)
            return cerr(ld, line, key, "%s is a dangling symbolic link", disp(anc, d, sizeof d));
        if (strcmp(anc, "/") == 0)
            return cerr(ld, line, key, "%s has no existing ancestor", disp(path, d, sizeof d));
    }
    if (strcmp(rp, anc) != 0)
        return cerr(ld, line, key, "%s is not canonical (its ancestor %s resolves to %s)", disp(path, d, sizeof d),
                    disp(anc, d2, sizeof d2), disp(rp, d3, sizeof d3));
    if (stat(anc, &st) < 0 || !S_ISDIR(st.st_mode))
        return cerr(ld, line, key, "%s: ancestor is not a directory", disp(path, d, sizeof d));
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

/* ---- sections -------------------------------------------------------- */

static const char *const builtin_deny[] = {
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
    "100.64.0.0/10", "127.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4",
};
static const char *const builtin_allow[] = { "0.0.0.0/0" };

static void prefix_list_builtin(struct prefix_list *l, const char *const *v, size_t n, const char *key) {
    l->v = lz_xcalloc(n, sizeof *l->v);
    l->lines = lz_xcalloc(n, sizeof *l->lines);
    for (size_t i = 0; i < n; i++)
        l->v[i] = lz_xstrdup(v[i]);
    l->n = n;
    l->key = key;
}

static int parse_prefix_list(struct loader *ld, const struct lz_toml_value *arr, const char *key,
                             struct prefix_list *l) {
    char d[DISP_MAX], kb[512];
    int r = check_array(ld, arr, key);
    if (r < 0)
        return r;
    size_t n = arr->u.array.n;
    l->v = lz_xcalloc(n ? n : 1, sizeof *l->v);
    l->lines = lz_xcalloc(n ? n : 1, sizeof *l->lines);
    l->key = key;
    for (size_t i = 0; i < n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(kb, sizeof kb, "%s[%zu]", key, i);
        r = check_string(ld, e, kb);
        if (r < 0)
            return r;
        char canon[19];
        const char *why = NULL;
        if (lz_ipv4_prefix_parse(e->u.string.s, canon, NULL, NULL, &why) < 0) {
            if (strcmp(why, "has host bits set") == 0)
                return cerr(ld, e->line, kb, "%s has host bits set (did you mean \"%s\"?)",
                            disp(e->u.string.s, d, sizeof d), canon);
            return cerr(ld, e->line, kb, "%s %s", disp(e->u.string.s, d, sizeof d), why);
        }
        l->v[l->n] = lz_xstrdup(canon);
        l->lines[l->n++] = e->line;
    }
    return 0;
}

/* SR-6: the same prefix may not be both allowed and denied. The message
 * names both places; built-in lists have no line. */
static int check_conflicts(struct loader *ld, const struct prefix_list *const *allow, size_t na,
                           const struct prefix_list *const *deny, size_t nd) {
    for (size_t a = 0; a < na; a++)
        for (size_t i = 0; i < allow[a]->n; i++)
            for (size_t b = 0; b < nd; b++)
                for (size_t j = 0; j < deny[b]->n; j++) {
                    if (strcmp(allow[a]->v[i], deny[b]->v[j]) != 0)
                        continue;
                    char ka[512], kd[512], where[64] = "";
                    int la = allow[a]->lines[i], ldn = deny[b]->lines[j];
                    snprintf(ka, sizeof ka, "%s%s[%zu]", la > 0 ? "" : "built-in ", allow[a]->key, i);
                    snprintf(kd, sizeof kd, "%s%s[%zu]", ldn > 0 ? "" : "built-in ", deny[b]->key, j);
                    if (ldn > 0)
                        snprintf(where, sizeof where, " at line %d", ldn);
                    if (la > 0 || ldn <= 0)
                        return cerr(ld, la, ka, "\"%s\" is also denied by %s%s; the same prefix cannot be both "
                                    "allowed and denied", allow[a]->v[i], kd, where);
                    return cerr(ld, ldn, kd, "\"%s\" is also allowed by %s; the same prefix cannot be both "
                                "allowed and denied", deny[b]->v[j], ka);
                }
    return 0;
}

/* Moves a prefix list into a deduplicated string vector. */
static void prefix_list_take(struct prefix_list *l, char ***ret, size_t *ret_n) {
    size_t m = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool dup = false;
        for (size_t j = 0; j < m; j++)
            if (strcmp(l->v[j], l->v[i]) == 0)
                dup = true;
        if (dup)
            free(l->v[i]);
        else
            l->v[m++] = l->v[i];
    }
    *ret = l->v;
    *ret_n = m;
    l->v = NULL;
    l->n = 0;
    free(l->lines);
    l->lines = NULL;
}

/* Container destinations: absolute, normalized, not "/", and clear of the
 * protected destinations in both ancestry directions. */
static int check_container_path(struct loader *ld, int line, const char *key, const char *p) {
    char d[DISP_MAX];
    const char *why = path_problem(p);
    if (why)
        return cerr(ld, line, key, "%s %s", disp(p, d, sizeof d), why);
    if (strcmp(p, "/") == 0)
        return cerr(ld, line, key, "\"/\" cannot be a destination");
    static const char *const protected_dest[] = { LZ_SANDBOX_WORKSPACE, LZ_SANDBOX_CONTROL };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(protected_dest); i++)
        if (paths_overlap(p, protected_dest[i]))
            return cerr(ld, line, key, "%s overlaps the protected sandbox destination %s", disp(p, d, sizeof d),
                        protected_dest[i]);
    return 0;
}

/* Lexical checks of an expanded host path. */
static int check_host_path(struct loader *ld, int line, const char *key, const char *raw, const char *p) {
    char d[DISP_MAX], d2[DISP_MAX];
    if (has_dotdot(raw))
        return cerr(ld, line, key, "%s has a '..' segment", disp(raw, d, sizeof d));
    const char *why = path_problem(p);
    if (why) {
        if (strcmp(raw, p) == 0)
            return cerr(ld, line, key, "%s %s", disp(raw, d, sizeof d), why);
        return cerr(ld, line, key, "%s (expanded to %s) %s", disp(raw, d, sizeof d), disp(p, d2, sizeof d2), why);
    }
    return 0;
}

/* One profile table, structurally. Host paths are expanded and checked
 * lexically; the filesystem is not consulted here. */
struct profile_in {
    const char *name;
    const struct lz_toml_value *tbl;
    struct lz_profile p;
    struct prefix_list allow, deny;
    char *profile_dir, *domain_dir, domain_hash[LZ_DOMAIN_HASH_LEN + 1];
    uint8_t domain_id[32];
};

static void profile_done(struct lz_profile *p) {
    free(p->name);
    free(p->image);
    strv_free(p->persistent_dirs, p->n_persistent_dirs);
    strv_free(p->allow_egress, p->n_allow_egress);
    strv_free(p->deny_egress, p->n_deny_egress);
    for (size_t i = 0; i < p->n_env; i++) {
        free(p->env[i].name);
        free(p->env[i].reference);
        if (p->env[i].value) {
            explicit_bzero(p->env[i].value, strlen(p->env[i].value));
            free(p->env[i].value);
        }
    }
    free(p->env);
    for (size_t i = 0; i < p->n_volumes; i++) {
        free(p->volumes[i].host);
        free(p->volumes[i].container);
        free(p->volumes[i].mode);
    }
    free(p->volumes);
    memset(p, 0, sizeof *p);
}

static void profile_in_done(struct profile_in *pi) {
    profile_done(&pi->p);
    prefix_list_done(&pi->allow);
    prefix_list_done(&pi->deny);
    free(pi->profile_dir);
    free(pi->domain_dir);
    free((char *)pi->allow.key);
    free((char *)pi->deny.key);
    pi->allow.key = pi->deny.key = NULL;
    pi->profile_dir = pi->domain_dir = NULL;
}

static int parse_persistent(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr) {
    char key[128], d[DISP_MAX], d2[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.persistent_dirs", pi->name);
    int r = check_array(ld, arr, key);
    if (r < 0)
        return r;
    struct lz_profile *p = &pi->p;
    p->persistent_dirs = lz_xcalloc(arr->u.array.n ? arr->u.array.n : 1, sizeof *p->persistent_dirs);
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.persistent_dirs[%zu]", pi->name, i);
        if ((r = check_string(ld, e, key)) < 0 || (r = check_container_path(ld, e->line, key, e->u.string.s)) < 0)
            return r;
        for (size_t j = 0; j < i; j++) {
            const char *o = p->persistent_dirs[j];
            if (strcmp(o, e->u.string.s) == 0)
                return cerr(ld, e->line, key, "%s is listed twice (also persistent_dirs[%zu])",
                            disp(e->u.string.s, d, sizeof d), j);
            if (paths_overlap(o, e->u.string.s))
                return cerr(ld, e->line, key, "%s overlaps persistent_dirs[%zu] %s (no persistent directory may "
                            "contain another)",
                            disp(e->u.string.s, d, sizeof d), j, disp(o, d2, sizeof d2));
        }
        p->persistent_dirs[p->n_persistent_dirs++] = lz_xstrdup(e->u.string.s);
    }
    return 0;
}

static int cmp_env_entry(const void *a, const void *b) {
    return strcmp(((const struct lz_env_entry *)a)->name, ((const struct lz_env_entry *)b)->name);
}

static int parse_env(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t) {
    char key[512], d[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.env", pi->name);
    int r = want_type(ld, t, LZ_TOML_TABLE, key);
    if (r < 0)
        return r;
    if (t->u.table.n > LZ_CONFIG_MAX_LIST)
        return cerr(ld, t->line, key, "more than %d entries", LZ_CONFIG_MAX_LIST);
    struct lz_profile *p = &pi->p;
    p->env = lz_xcalloc(t->u.table.n ? t->u.table.n : 1, sizeof *p->env);
    for (size_t i = 0; i < t->u.table.n; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        if (!env_name_valid(e->key))
            return cerr(ld, e->line, NULL, "%s.%s: not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                        key, kdisp(e->key, d, sizeof d));
        snprintf(key, sizeof key, "profiles.%s.env.%s", pi->name, e->key);
        if ((r = check_string(ld, e->value, key)) < 0)
            return r;
        const char *v = e->value->u.string.s;
        struct lz_env_entry *ent = &p->env[p->n_env];
        if (strncmp(v, "env:", 4) == 0) {
            if (!env_name_valid(v + 4))
                return cerr(ld, e->value->line, key, "%s does not name a valid host environment variable",
                            disp(v, d, sizeof d));
            ent->reference = lz_xstrdup(v);
        } else {
            ent->value = lz_xstrdup(v);
        }
        ent->name = lz_xstrdup(e->key);
        p->n_env++;
        snprintf(key, sizeof key, "profiles.%s.env", pi->name);
    }
    return 0;
}

static int parse_volumes(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr,
                         const struct expand_ctx *x) {
    char key[128], kb[160], d[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.volumes", pi->name);
    int r = check_array(ld, arr, key);
    if (r < 0)
        return r;
    struct lz_profile *p = &pi->p;
    p->volumes = lz_xcalloc(arr->u.array.n ? arr->u.array.n : 1, sizeof *p->volumes);
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.volumes[%zu]", pi->name, i);
        if ((r = want_type(ld, e, LZ_TOML_TABLE, key)) < 0 ||
            (r = check_keys(ld, e, key, (const char *const[]){ "host", "container", "mode", NULL })) < 0)
            return r;
        const struct lz_toml_value *h = lz_toml_table_get(e, "host"), *c = lz_toml_table_get(e, "container"),
                                   *m = lz_toml_table_get(e, "mode");
        if (!h || !c || !m)
            return cerr(ld, e->line, key, "missing required key %s", !h ? "host" : !c ? "container"
                        : "mode (one of \"rw\", \"ro\", \"z\")");
        snprintf(kb, sizeof kb, "%s.mode", key);
        if ((r = check_string(ld, m, kb)) < 0)
            return r;
        if (strcmp(m->u.string.s, "rw") != 0 && strcmp(m->u.string.s, "ro") != 0 && strcmp(m->u.string.s, "z") != 0)
            return cerr(ld, m->line, kb, "%s is not a volume mode (one of \"rw\", \"ro\", \"z\")",
                        disp(m->u.string.s, d, sizeof d));
        snprintf(kb, sizeof kb, "%s.container", key);
        if ((r = check_string(ld, c, kb)) < 0 || (r = check_container_path(ld, c->line, kb, c->u.string.s)) < 0)
            return r;
        for (size_t j = 0; j < p->n_volumes; j++)
            if (strcmp(p->volumes[j].container, c->u.string.s) == 0)
                return cerr(ld, c->line, kb, "%s is also the destination of volumes[%zu]",
                            disp(c->u.string.s, d, sizeof d), j);
        for (size_t j = 0; j < p->n_persistent_dirs; j++)
            if (strcmp(p->persistent_dirs[j], c->u.string.s) == 0)
                return cerr(ld, c->line, kb, "%s is also persistent_dirs[%zu]", disp(c->u.string.s, d, sizeof d), j);

        snprintf(kb, sizeof kb, "%s.host", key);
        if ((r = check_string(ld, h, kb)) < 0)
            return r;
        _cleanup_free_ char *host = NULL;
        if (has_dotdot(h->u.string.s))
            return cerr(ld, h->line, kb, "%s has a '..' segment", disp(h->u.string.s, d, sizeof d));
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

static int parse_profile(struct loader *ld, struct lz_config *c, struct profile_in *pi,
                         const struct prefix_list *defallow, const struct prefix_list *defdeny) {
    char key[128], d[DISP_MAX];
    const struct lz_toml_value *t = pi->tbl;
    int r;
    snprintf(key, sizeof key, "profiles.%s", pi->name);
    static const char *const keys[] = { "image", "persistent_dirs", "allow_egress", "deny_egress", "env", "volumes",
                                        "ignored_state", NULL };
    if ((r = check_keys(ld, t, key, keys)) < 0)
        return r;

    pi->p.name = lz_xstrdup(pi->name);
    const struct lz_toml_value *img = lz_toml_table_get(t, "image");
    snprintf(key, sizeof key, "profiles.%s.image", pi->name);
    if (!img)
        return cerr(ld, t->line, NULL, "profiles.%s: missing required key image", pi->name);
    if ((r = check_string(ld, img, key)) < 0)
        return r;
    if (img->u.string.len == 0 || strpbrk(img->u.string.s, " \t") || has_ctrl(img->u.string.s))
        return cerr(ld, img->line, key, "%s is not an image reference", disp(img->u.string.s, d, sizeof d));
    pi->p.image = lz_xstrdup(img->u.string.s);

    const struct lz_toml_value *v;
    if ((v = lz_toml_table_get(t, "persistent_dirs")) && (r = parse_persistent(ld, pi, v)) < 0)
        return r;

    pi->allow.key = lz_xasprintf("profiles.%s.allow_egress", pi->name);
    pi->deny.key = lz_xasprintf("profiles.%s.deny_egress", pi->name);
    if ((v = lz_toml_table_get(t, "allow_egress")) && (r = parse_prefix_list(ld, v, pi->allow.key, &pi->allow)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "deny_egress")) && (r = parse_prefix_list(ld, v, pi->deny.key, &pi->deny)) < 0)
        return r;

    if ((v = lz_toml_table_get(t, "env")) && (r = parse_env(ld, pi, v)) < 0)
        return r;

    snprintf(key, sizeof key, "profiles.%s.ignored_state", pi->name);
    if ((r = get_bool(ld, t, "ignored_state", key, true, &pi->p.ignored_state)) < 0)
        return r;

    /* Expansion context of this profile (for unselected profiles too, so
     * their tokens and resulting paths are checked the same way). */
    if ((r = lz_domain_id_v1(pi->name, c->workspace, pi->domain_id)) < 0)
        return lz_error_set(ld->err, r, "%s: cannot compute the Domain ID", ld->file);
    char hex[65];
    lz_hex(pi->domain_id, 32, hex);
    lz_domain_hash(pi->domain_id, pi->domain_hash);
    pi->profile_dir = lz_xasprintf("%s/%s", c->data_root, pi->name);
    pi->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, hex);
    struct expand_ctx x = { .profile_name = pi->name, .profile_dir = pi->profile_dir, .domain_dir = pi->domain_dir,
                            .domain_hash = pi->domain_hash, .workspace = c->workspace };
    if ((v = lz_toml_table_get(t, "volumes")) && (r = parse_volumes(ld, pi, v, &x)) < 0)
        return r;

    const struct prefix_list *allow[] = { defallow, &pi->allow }, *deny[] = { defdeny, &pi->deny };
    return check_conflicts(ld, allow, 2, deny, 2);
}

static int parse_escalation(struct loader *ld, struct lz_config *c, const struct lz_toml_value *t) {
    char key[128], d[DISP_MAX];
    int r;
    if ((r = want_type(ld, t, LZ_TOML_TABLE, "escalation")) < 0 ||
        (r = check_keys(ld, t, "escalation",
                        (const char *const[]){ "enabled", "socket_dir", "auto_approve", NULL })) < 0 ||
        (r = get_bool(ld, t, "enabled", "escalation.enabled", true, &c->escalation_enabled)) < 0)
        return r;
    const struct lz_toml_value *v = lz_toml_table_get(t, "socket_dir");
    if (v) {
        _cleanup_free_ char *p = NULL;
        bool exists;
        if ((r = check_string(ld, v, "escalation.socket_dir")) < 0)
            return r;
        if (has_dotdot(v->u.string.s))
            return cerr(ld, v->line, "escalation.socket_dir", "%s has a '..' segment",
                        disp(v->u.string.s, d, sizeof d));
        if ((r = expand(ld, v->line, "escalation.socket_dir", v->u.string.s, NULL, &p)) < 0 ||
            (r = check_host_path(ld, v->line, "escalation.socket_dir", v->u.string.s, p)) < 0 ||
            (r = check_canonical(ld, v->line, "escalation.socket_dir", p, &exists)) < 0)
            return r;
        c->escalation_socket_dir = TAKE_PTR(p);
        ld->socket_dir_line = v->line;
    }
    v = lz_toml_table_get(t, "auto_approve");
    if (!v)
        return 0;
    if ((r = check_array(ld, v, "escalation.auto_approve")) < 0)
        return r;
    c->auto_approve = lz_xcalloc(v->u.array.n ? v->u.array.n : 1, sizeof *c->auto_approve);
    for (size_t i = 0; i < v->u.array.n; i++) {
        const struct lz_toml_value *rule = v->u.array.items[i];
        snprintf(key, sizeof key, "escalation.auto_approve[%zu]", i);
        if ((r = want_type(ld, rule, LZ_TOML_TABLE, key)) < 0 ||
            (r = check_keys(ld, rule, key, (const char *const[]){ "argv", "allow_extra_args", NULL })) < 0)
            return r;
        struct lz_auto_approve *a = &c->auto_approve[c->n_auto_approve++];
        snprintf(key, sizeof key, "escalation.auto_approve[%zu].allow_extra_args", i);
        if ((r = get_bool(ld, rule, "allow_extra_args", key, false, &a->allow_extra_args)) < 0)
            return r;
        const struct lz_toml_value *argv = lz_toml_table_get(rule, "argv");
        snprintf(key, sizeof key, "escalation.auto_approve[%zu]", i);
        if (!argv)
            return cerr(ld, rule->line, key, "missing required key argv");
        snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv", i);
        if ((r = check_array(ld, argv, key)) < 0)
            return r;
        if (argv->u.array.n == 0)
            return cerr(ld, argv->line, key, "must not be empty");
        a->argv = lz_xcalloc(argv->u.array.n + 1, sizeof *a->argv);
        for (size_t j = 0; j < argv->u.array.n; j++) {
            const struct lz_toml_value *s = argv->u.array.items[j];
            snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv[%zu]", i, j);
            if ((r = check_string(ld, s, key)) < 0)
                return r;
            if (j == 0 && s->u.string.len == 0)
                return cerr(ld, s->line, key, "the executable must not be empty");
            a->argv[a->argc++] = lz_xstrdup(s->u.string.s);
        }
    }
    return 0;
}

/* ---- the selected profile against the filesystem and environment ----- */

static int resolve_paths(struct loader *ld, struct lz_config *c) {
    char d[DISP_MAX], d2[DISP_MAX], key[160];
    int r;
    if (paths_overlap(c->data_root, c->workspace))
        return cerr(ld, ld->data_root_line, ld->data_root_line ? "storage.data_root" : NULL,
                    "the Storage Root %s and the workspace %s overlap; the sandbox could reach Lazaret's own "
                    "state; run lazaret in a project directory, or set [storage] data_root outside the workspace",
                    disp(c->data_root, d, sizeof d), disp(c->workspace, d2, sizeof d2));
    /* SR-2: host configuration never lies beneath a path the sandbox sees. */
    if (c->source_path && path_within(c->source_path, c->workspace))
        return lz_error_set(ld->err, -EINVAL,
                            "%s: the configuration file is inside the workspace %s; host configuration must not be "
                            "reachable from the sandbox (SR-2)",
                            ld->file, disp(c->workspace, d, sizeof d));

    if (c->escalation_socket_dir && paths_overlap(c->escalation_socket_dir, c->workspace))
        return cerr(ld, ld->socket_dir_line, "escalation.socket_dir", "%s and the workspace %s overlap",
                    disp(c->escalation_socket_dir, d, sizeof d), disp(c->workspace, d2, sizeof d2));
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
            if (!path_strictly_within(v->host, c->profile_dir))
                return cerr(ld, v->line, key, "%s does not exist (only volumes strictly beneath {profile_dir} are "
                            "created)", disp(v->host, d, sizeof d));
            v->create = true;
        }
        if (c->source_path && path_within(c->source_path, v->host))
            return cerr(ld, v->line, key, "%s contains the configuration file; host configuration must not be "
                        "mounted into the sandbox (SR-2)", disp(v->host, d, sizeof d));
        if (path_within(c->workspace, v->host))
            return cerr(ld, v->line, key, "%s contains the workspace; it is mounted only at /workspace, with "
                        "its .git protections", disp(v->host, d, sizeof d));
        if (path_within(v->host, gitdir))
            return cerr(ld, v->line, key, "%s is inside the workspace's .git directory (SR-4)",
                        disp(v->host, d, sizeof d));
        if (path_within(v->host, c->data_root) && !path_strictly_within(v->host, c->profile_dir) &&
            !path_strictly_within(v->host, c->domain_dir))
            return cerr(ld, v->line, key, "%s is Lazaret's own state under the Storage Root; only paths strictly "
                        "beneath {profile_dir} or {domain_dir} may be volumes", disp(v->host, d, sizeof d));
        if (path_within(c->data_root, v->host))
            return cerr(ld, v->line, key, "%s contains the Storage Root", disp(v->host, d, sizeof d));
        if (c->escalation_socket_dir && paths_overlap(c->escalation_socket_dir, v->host))
            return cerr(ld, v->line, key, "%s overlaps escalation.socket_dir", disp(v->host, d, sizeof d));
    }
    return 0;
}

static int resolve_env(struct loader *ld, struct lz_config *c, const struct lz_toml_value *ptbl) {
    char key[512], d[DISP_MAX];
    const struct lz_toml_value *envt = lz_toml_table_get(ptbl, "env");
    for (size_t i = 0; i < c->profile.n_env; i++) {
        struct lz_env_entry *e = &c->profile.env[i];
        if (!e->reference)
            continue;
        const struct lz_toml_entry *te = lz_toml_table_entry(envt, e->name);
        int line = te ? te->value->line : 0;
        snprintf(key, sizeof key, "profiles.%s.env.%s", c->profile.name, e->name);
        const char *var = e->reference + 4;
        const char *val = ld->lookup_env ? ld->lookup_env(ld->lookup_env_ud, var) : secure_getenv(var);
        if (!val)
            return cerr(ld, line, key, "host environment variable %s is not set", disp(var, d, sizeof d));
        size_t n = strlen(val);
        if (n > LZ_CONFIG_MAX_ENV_VALUE)
            return cerr(ld, line, key, "host environment variable %s is longer than %d bytes",
                        disp(var, d, sizeof d), LZ_CONFIG_MAX_ENV_VALUE);
        /* A C string cannot carry NUL, so only UTF-8 remains to check. */
        if (!lz_utf8_valid(val, n))
            return cerr(ld, line, key, "host environment variable %s is not valid UTF-8", disp(var, d, sizeof d));
        e->value = lz_xstrdup(val);
    }
    if (c->profile.n_env > 1)
        qsort(c->profile.env, c->profile.n_env, sizeof *c->profile.env, cmp_env_entry);
    return 0;
}

/* ---- top level ------------------------------------------------------- */

static int default_data_root(struct loader *ld, char **ret) {
    const char *x = secure_getenv("XDG_DATA_HOME");
    _cleanup_free_ char *p = NULL;
    if (x && x[0] == '/')
        p = lz_xasprintf("%s/lazaret", x);
    else if (ld->home)
        p = lz_xasprintf("%s/.local/share/lazaret", strcmp(ld->home, "/") == 0 ? "" : ld->home);
    else
        return lz_error_set(ld->err, -ENOENT, "cannot determine the Storage Root: neither XDG_DATA_HOME nor a home "
                            "directory is available");
    if (path_problem(p))
        return lz_error_set(ld->err, -EINVAL, "the default Storage Root \"%s\" is not a normalized absolute path", p);
    *ret = canonicalize_default(p);
    return 0;
}

static int resolve_workspace(const struct lz_config_opts *opts, struct lz_config *c, struct lz_error *err) {
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
        return lz_error_set(err, -errno, "workspace %s: %s", disp(w, d, sizeof d), strerror(errno));
    c->workspace = rp;
    struct stat st;
    if (stat(rp, &st) < 0)
        return lz_error_set(err, -errno, "workspace %s: %s", disp(rp, d, sizeof d), strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return lz_error_set(err, -ENOTDIR, "workspace %s is not a directory", disp(rp, d, sizeof d));
    if (strlen(rp) > LZ_CONFIG_MAX_STRING)
        return lz_error_set(err, -ENAMETOOLONG, "workspace path is longer than %d bytes", LZ_CONFIG_MAX_STRING);
    return 0;
}

/* Finds the configuration file. *ret_path NULL means "none: built-in". */
static int locate_config(const struct lz_config_opts *opts, const char *home, char **ret_path,
                         struct lz_error *err) {
    char d[DISP_MAX];
    if (opts && opts->config_path) {
        const char *p = opts->config_path;
        if (p[0] == '\0' || has_dotdot(p) || has_ctrl(p))
            return lz_error_set(err, -EINVAL, "--config %s: not a usable path (no '..' segments or control "
                                "characters)", disp(p, d, sizeof d));
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

static int load_builtin(struct loader *ld, struct lz_config *c, const char *profile) {
    if (strcmp(profile, LZ_DEFAULT_PROFILE) != 0)
        return lz_error_set(ld->err, -ENOENT, "profile \"%s\" is not defined: no configuration file exists and "
                            "the built-in configuration defines only \"%s\"", profile, LZ_DEFAULT_PROFILE);
    c->builtin_default = true;
    c->prepared_keep_days = LZ_PREPARED_KEEP_DAYS_DEFAULT;
    c->prepared_max_bytes = LZ_PREPARED_MAX_BYTES_DEFAULT;
    int r = default_data_root(ld, &c->data_root);
    if (r < 0)
        return r;
    c->n_default_allow = LZ_ARRAY_SIZE(builtin_allow);
    c->default_allow = lz_xcalloc(c->n_default_allow, sizeof(char *));
    for (size_t i = 0; i < c->n_default_allow; i++)
        c->default_allow[i] = lz_xstrdup(builtin_allow[i]);
    c->n_default_deny = LZ_ARRAY_SIZE(builtin_deny);
    c->default_deny = lz_xcalloc(c->n_default_deny, sizeof(char *));
    for (size_t i = 0; i < c->n_default_deny; i++)
        c->default_deny[i] = lz_xstrdup(builtin_deny[i]);
    c->escalation_enabled = true;
    struct lz_profile *p = &c->profile;
    p->name = lz_xstrdup(LZ_DEFAULT_PROFILE);
    p->image = lz_xstrdup(LZ_BUILTIN_IMAGE);
    /* Where a package manager writes, so that `apt-get install` persists. */
    static const char *const pdirs[] = { "/etc", "/opt", "/root", "/usr", "/var" };
    p->persistent_dirs = lz_xcalloc(LZ_ARRAY_SIZE(pdirs), sizeof(char *));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(pdirs); i++)
        p->persistent_dirs[p->n_persistent_dirs++] = lz_xstrdup(pdirs[i]);
    p->ignored_state = true;
    c->profile_names = lz_xcalloc(1, sizeof(char *));
    c->profile_names[c->n_profile_names++] = lz_xstrdup(LZ_DEFAULT_PROFILE);
    return 0;
}

static int load_file(struct loader *ld, struct lz_config *c, const char *profile) {
    char d[DISP_MAX];
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = lz_read_file_at(AT_FDCWD, c->source_path, LZ_CONFIG_MAX_FILE, &buf, &len);
    if (r == -EFBIG)
        return lz_error_set(ld->err, r, "%s: larger than %d bytes", ld->file, LZ_CONFIG_MAX_FILE);
    if (r == -EINVAL)
        return lz_error_set(ld->err, r, "%s: not a regular file", ld->file);
    if (r < 0)
        return lz_error_set(ld->err, r, "%s: %s", ld->file, strerror(-r));

    _cleanup_toml_ struct lz_toml_value *root = NULL;
    if ((r = lz_toml_parse(buf, len, ld->file, &root, ld->err)) < 0)
        return r;
    if ((r = check_keys(ld, root, NULL,
                        (const char *const[]){ "storage", "network", "escalation", "profiles", NULL })) < 0)
        return r;

    /* [storage] */
    const struct lz_toml_value *t = lz_toml_table_get(root, "storage"), *v;
    if (t) {
        if ((r = want_type(ld, t, LZ_TOML_TABLE, "storage")) < 0 ||
            (r = check_keys(ld, t, "storage",
                            (const char *const[]){ "data_root", "prepared_keep_days", "prepared_max_bytes", NULL })) <
                0)
            return r;
    }
    {
        int64_t days, bytes;
        if ((r = get_count(ld, t, "prepared_keep_days", "storage.prepared_keep_days", LZ_PREPARED_KEEP_DAYS_MAX,
                           LZ_PREPARED_KEEP_DAYS_DEFAULT, &days)) < 0 ||
            (r = get_count(ld, t, "prepared_max_bytes", "storage.prepared_max_bytes", INT64_MAX,
                           LZ_PREPARED_MAX_BYTES_DEFAULT, &bytes)) < 0)
            return r;
        c->prepared_keep_days = days;
        c->prepared_max_bytes = (uint64_t)bytes;
    }
    if ((v = lz_toml_table_get(t, "data_root"))) {
        _cleanup_free_ char *p = NULL;
        bool exists;
        if ((r = check_string(ld, v, "storage.data_root")) < 0)
            return r;
        if (has_dotdot(v->u.string.s))
            return cerr(ld, v->line, "storage.data_root", "%s has a '..' segment", disp(v->u.string.s, d, sizeof d));
        if ((r = expand(ld, v->line, "storage.data_root", v->u.string.s, NULL, &p)) < 0 ||
            (r = check_host_path(ld, v->line, "storage.data_root", v->u.string.s, p)) < 0 ||
            (r = check_canonical(ld, v->line, "storage.data_root", p, &exists)) < 0)
            return r;
        if (strcmp(p, "/") == 0)
            return cerr(ld, v->line, "storage.data_root", "\"/\" cannot be the Storage Root");
        c->data_root = TAKE_PTR(p);
        ld->data_root_line = v->line;
    } else if ((r = default_data_root(ld, &c->data_root)) < 0) {
        return r;
    }

    /* [network] — a missing list takes the built-in value. */
    __attribute__((cleanup(prefix_list_done))) struct prefix_list defallow = { 0 }, defdeny = { 0 };
    t = lz_toml_table_get(root, "network");
    if (t && ((r = want_type(ld, t, LZ_TOML_TABLE, "network")) < 0 ||
              (r = check_keys(ld, t, "network", (const char *const[]){ "default_allow", "default_deny", NULL })) < 0))
        return r;
    if ((v = lz_toml_table_get(t, "default_allow"))) {
        if ((r = parse_prefix_list(ld, v, "network.default_allow", &defallow)) < 0)
            return r;
    } else {
        prefix_list_builtin(&defallow, builtin_allow, LZ_ARRAY_SIZE(builtin_allow), "network.default_allow");
    }
    if ((v = lz_toml_table_get(t, "default_deny"))) {
        if ((r = parse_prefix_list(ld, v, "network.default_deny", &defdeny)) < 0)
            return r;
    } else {
        prefix_list_builtin(&defdeny, builtin_deny, LZ_ARRAY_SIZE(builtin_deny), "network.default_deny");
    }
    {
        const struct prefix_list *a[] = { &defallow }, *dn[] = { &defdeny };
        if ((r = check_conflicts(ld, a, 1, dn, 1)) < 0)
            return r;
    }

    /* [escalation] */
    c->escalation_enabled = true;
    if ((t = lz_toml_table_get(root, "escalation")) && (r = parse_escalation(ld, c, t)) < 0)
        return r;

    /* [profiles.*]: every profile structurally, then the selected one. */
    t = lz_toml_table_get(root, "profiles");
    if (t && (r = want_type(ld, t, LZ_TOML_TABLE, "profiles")) < 0)
        return r;
    size_t np = lz_toml_len(t);
    if (np > LZ_CONFIG_MAX_LIST)
        return cerr(ld, t->line, "profiles", "more than %d profiles", LZ_CONFIG_MAX_LIST);
    c->profile_names = lz_xcalloc(np ? np : 1, sizeof(char *));
    ssize_t sel = -1;
    /* Freed on every return below; emptied once moved into c. */
    __attribute__((cleanup(profile_in_done))) struct profile_in selected = { 0 };
    for (size_t i = 0; i < np; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        if (!lz_profile_name_valid(e->key))
            return cerr(ld, e->line, NULL, "profiles.%s: invalid profile name (must match ^[a-z0-9_-]{2,32}$)",
                        kdisp(e->key, d, sizeof d));
        /* {data_root}/{profile} must not collide with Lazaret's own
         * directories of the Storage Root. */
        static const char *const reserved[] = { "domains", "images", "prepared" };
        for (size_t k = 0; k < LZ_ARRAY_SIZE(reserved); k++)
            if (strcmp(e->key, reserved[k]) == 0)
                return cerr(ld, e->line, NULL, "profiles.%s: the profile name \"%s\" is reserved "
                            "({data_root}/%s is Lazaret's own)", reserved[k], reserved[k], reserved[k]);
        char key[64];
        snprintf(key, sizeof key, "profiles.%s", e->key);
        if ((r = want_type(ld, e->value, LZ_TOML_TABLE, key)) < 0)
            return r;
        c->profile_names[c->n_profile_names++] = lz_xstrdup(e->key);
        struct profile_in pi = { .name = e->key, .tbl = e->value };
        r = parse_profile(ld, c, &pi, &defallow, &defdeny);
        if (r >= 0 && strcmp(e->key, profile) == 0) {
            sel = (ssize_t)i;
            selected = pi;
        } else {
            profile_in_done(&pi);
        }
        if (r < 0)
            return r;
    }
    if (sel < 0) {
        char list[512] = "";
        size_t o = 0;
        for (size_t i = 0; i < c->n_profile_names && o < sizeof list; i++) {
            int n = snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", c->profile_names[i]);
            o += n > 0 ? (size_t)n : 0;
        }
        return lz_error_set(ld->err, -ENOENT, "%s: profile %s is not defined (%s%s)", ld->file,
                            disp(profile, d, sizeof d), np ? "defined profiles: " : "no profiles are defined",
                            list);
    }

    c->profile = selected.p;
    memset(&selected.p, 0, sizeof selected.p);
    prefix_list_take(&selected.allow, &c->profile.allow_egress, &c->profile.n_allow_egress);
    prefix_list_take(&selected.deny, &c->profile.deny_egress, &c->profile.n_deny_egress);
    prefix_list_take(&defallow, &c->default_allow, &c->n_default_allow);
    prefix_list_take(&defdeny, &c->default_deny, &c->n_default_deny);

    c->profile_dir = lz_xasprintf("%s/%s", c->data_root, c->profile.name);
    if ((r = lz_domain_id_v1(c->profile.name, c->workspace, c->domain_id)) < 0)
        return lz_error_set(ld->err, r, "cannot compute the Domain ID");
    lz_hex(c->domain_id, sizeof c->domain_id, c->domain_id_hex);
    c->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, c->domain_id_hex);

    if ((r = resolve_paths(ld, c)) < 0)
        return r;
    return resolve_env(ld, c, t->u.table.entries[sel].value);
}

int lz_config_load(const struct lz_config_opts *opts, struct lz_config **ret, struct lz_error *err) {
    const char *profile = opts && opts->profile ? opts->profile : LZ_DEFAULT_PROFILE;
    char d[DISP_MAX];
    if (!lz_profile_name_valid(profile))
        return lz_error_set(err, -EINVAL, "invalid profile name %s (must match ^[a-z0-9_-]{2,32}$)",
                            disp(profile, d, sizeof d));

    _cleanup_config_ struct lz_config *c = lz_xcalloc(1, sizeof *c);
    struct loader ld = { .err = err, .home = lz_home_dir(), .lookup_env = opts ? opts->lookup_env : NULL,
                         .lookup_env_ud = opts ? opts->lookup_env_ud : NULL };
    int r = resolve_workspace(opts, c, err);
    if (r < 0)
        return r;
    if ((r = locate_config(opts, ld.home, &c->source_path, err)) < 0)
        return r;

    if (c->source_path) {
        ld.file = c->source_path;
        r = load_file(&ld, c, profile);
    } else {
        ld.file = "built-in configuration";
        r = load_builtin(&ld, c, profile);
        if (r >= 0) {
            c->profile_dir = lz_xasprintf("%s/%s", c->data_root, c->profile.name);
            if ((r = lz_domain_id_v1(c->profile.name, c->workspace, c->domain_id)) < 0)
                return lz_error_set(err, r, "cannot compute the Domain ID");
            lz_hex(c->domain_id, sizeof c->domain_id, c->domain_id_hex);
            c->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, c->domain_id_hex);
            r = resolve_paths(&ld, c);
        }
    }
    if (r < 0)
        return r;

    if ((r = lz_config_fingerprint_v1(c, c->fingerprint)) < 0)
        return lz_error_set(err, r, "cannot compute the Configuration Fingerprint");
    lz_hex(c->fingerprint, sizeof c->fingerprint, c->fingerprint_hex);
    *ret = TAKE_PTR(c);
    return 0;
}

void lz_config_free(struct lz_config *c) {
    if (!c)
        return;
    free(c->source_path);
    free(c->data_root);
    strv_free(c->default_allow, c->n_default_allow);
    strv_free(c->default_deny, c->n_default_deny);
    free(c->escalation_socket_dir);
    for (size_t i = 0; i < c->n_auto_approve; i++)
        strv_free(c->auto_approve[i].argv, c->auto_approve[i].argc);
    free(c->auto_approve);
    profile_done(&c->profile);
    free(c->workspace);
    free(c->profile_dir);
    free(c->domain_dir);
    strv_free(c->profile_names, c->n_profile_names);
    free(c);
}

/* ---- printing -------------------------------------------------------- */

static void print_list(FILE *out, const char *label, char *const *v, size_t n) {
    char d[DISP_MAX];
    fprintf(out, "%s = [", label);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%s", i ? ", " : "", disp(v[i], d, sizeof d));
    fprintf(out, "]\n");
}

void lz_config_print(FILE *out, const struct lz_config *c) {
    char d[DISP_MAX], d2[DISP_MAX];
    const struct lz_profile *p = &c->profile;
    fprintf(out, "# configuration: %s\n", c->builtin_default ? "built-in default" : disp(c->source_path, d, sizeof d));
    fprintf(out, "# workspace: %s\n", disp(c->workspace, d, sizeof d));
    fprintf(out, "\n[storage]\ndata_root = %s\n", disp(c->data_root, d, sizeof d));
    fprintf(out, "prepared_keep_days = %" PRId64 "\nprepared_max_bytes = %" PRIu64 "\n", c->prepared_keep_days,
            c->prepared_max_bytes);
    fprintf(out, "\n[network]\n");
    print_list(out, "default_allow", c->default_allow, c->n_default_allow);
    print_list(out, "default_deny", c->default_deny, c->n_default_deny);
    fprintf(out, "\n[escalation]\nenabled = %s\n", c->escalation_enabled ? "true" : "false");
    if (c->escalation_socket_dir)
        fprintf(out, "socket_dir = %s\n", disp(c->escalation_socket_dir, d, sizeof d));
    else
        fprintf(out, "# socket_dir: default (beneath $XDG_RUNTIME_DIR)\n");
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        fprintf(out, "\n[[escalation.auto_approve]]\n");
        print_list(out, "argv", c->auto_approve[i].argv, c->auto_approve[i].argc);
        fprintf(out, "allow_extra_args = %s\n", c->auto_approve[i].allow_extra_args ? "true" : "false");
    }
    fprintf(out, "\n[profiles.%s]\nimage = %s\n", p->name, disp(p->image, d, sizeof d));
    print_list(out, "persistent_dirs", p->persistent_dirs, p->n_persistent_dirs);
    print_list(out, "allow_egress", p->allow_egress, p->n_allow_egress);
    print_list(out, "deny_egress", p->deny_egress, p->n_deny_egress);
    fprintf(out, "ignored_state = %s\n", p->ignored_state ? "true" : "false");
    fprintf(out, "volumes = [%s", p->n_volumes ? "\n" : "");
    for (size_t i = 0; i < p->n_volumes; i++)
        fprintf(out, "  { host = %s, container = %s, mode = \"%s\" },%s\n", disp(p->volumes[i].host, d, sizeof d),
                disp(p->volumes[i].container, d2, sizeof d2), p->volumes[i].mode,
                p->volumes[i].create ? "  # created on first use" : "");
    fprintf(out, "]\n");
    fprintf(out, "\n[profiles.%s.env]  # values redacted\n", p->name);
    for (size_t i = 0; i < p->n_env; i++) {
        if (p->env[i].reference)
            fprintf(out, "%s = \"<redacted>\"  # from %s\n", p->env[i].name, disp(p->env[i].reference, d, sizeof d));
        else
            fprintf(out, "%s = \"<redacted>\"  # literal\n", p->env[i].name);
    }
    fprintf(out, "\n# Profile directory: %s\n", disp(c->profile_dir, d, sizeof d));
    fprintf(out, "# Domain Root: %s\n", disp(c->domain_dir, d, sizeof d));
    fprintf(out, "# Domain ID: %s\n", c->domain_id_hex);
    fprintf(out, "# Configuration Fingerprint: %s\n", c->fingerprint_hex);
}
