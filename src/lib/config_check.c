/* config_check.c — the configuration's messages, lexical checks (names,
 * paths, IPv4 prefixes) and typed lookups of TOML values; see
 * config_int.h. */
#include "config_int.h"

#include <inttypes.h>

/* ---- messages -------------------------------------------------------- */

int cfg_err(struct loader *ld, int line, const char *key, const char *fmt, ...) {
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

const char *cfg_disp(const char *s, char *buf, size_t size) {
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

const char *cfg_kdisp(const char *k, char *buf, size_t size) {
    bool bare = k[0] != '\0';
    for (const char *q = k; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' ||
              *q == '-'))
            bare = false;
    if (bare && strlen(k) < size) {
        memcpy(buf, k, strlen(k) + 1);
        return buf;
    }
    return cfg_disp(k, buf, size);
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

bool cfg_env_name_valid(const char *s) {
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

bool cfg_has_ctrl(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

bool cfg_has_dotdot(const char *p) {
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
const char *cfg_path_problem(const char *p) {
    if (cfg_has_dotdot(p))
        return "has a '..' segment";
    if (cfg_has_ctrl(p))
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
bool cfg_path_within(const char *p, const char *anc) {
    size_t n = strlen(anc);
    if (n == 1 && anc[0] == '/')
        return true;
    return strncmp(p, anc, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool cfg_path_strictly_within(const char *p, const char *anc) { return cfg_path_within(p, anc) && strcmp(p, anc) != 0; }

bool cfg_paths_overlap(const char *a, const char *b) { return cfg_path_within(a, b) || cfg_path_within(b, a); }

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
    snprintf(ret, 19, "%u.%u.%u.%u/%u", (addr & mask) >> 24, ((addr & mask) >> 16) & 255, ((addr & mask) >> 8) & 255,
             (addr & mask) & 255, len);
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
int cfg_check_keys(struct loader *ld, const struct lz_toml_value *t, const char *prefix, const char *const *allowed) {
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
        return cfg_err(ld, e->line, NULL, "%s%s%s: unknown key (expected one of: %s)", prefix ? prefix : "",
                       prefix ? "." : "", cfg_kdisp(e->key, kd, sizeof kd), expect);
    }
    return 0;
}

int cfg_want_type(struct loader *ld, const struct lz_toml_value *v, enum lz_toml_type type, const char *key) {
    if (v->type == type)
        return 0;
    return cfg_err(ld, v->line, key, "expected %s, found %s", type_article(type), type_article(v->type));
}

int cfg_check_string(struct loader *ld, const struct lz_toml_value *v, const char *key) {
    int r = cfg_want_type(ld, v, LZ_TOML_STRING, key);
    if (r < 0)
        return r;
    if (v->u.string.len > LZ_CONFIG_MAX_STRING)
        return cfg_err(ld, v->line, key, "string longer than %d bytes", LZ_CONFIG_MAX_STRING);
    return 0;
}

int cfg_check_array(struct loader *ld, const struct lz_toml_value *v, const char *key) {
    int r = cfg_want_type(ld, v, LZ_TOML_ARRAY, key);
    if (r < 0)
        return r;
    if (v->u.array.n > LZ_CONFIG_MAX_LIST)
        return cfg_err(ld, v->line, key, "more than %d elements", LZ_CONFIG_MAX_LIST);
    return 0;
}

/* t's value `name` when there is one (1; 0: none) and it has the type. */
static int get_typed(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key,
                     enum lz_toml_type type, const struct lz_toml_value **ret) {
    const struct lz_toml_value *v = lz_toml_table_get(t, name);
    if (!v)
        return 0;
    int r = cfg_want_type(ld, v, type, key);
    if (r < 0)
        return r;
    *ret = v;
    return 1;
}

int cfg_get_count(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key, int64_t max,
                  int64_t def, int64_t *ret) {
    const struct lz_toml_value *v = NULL;
    int r = get_typed(ld, t, name, key, LZ_TOML_INTEGER, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = def;
        return 0;
    }
    if (v->u.integer < 0 || v->u.integer > max)
        return cfg_err(ld, v->line, key, "%" PRId64 " is out of range (0 to %" PRId64 ")", v->u.integer, max);
    *ret = v->u.integer;
    return 0;
}

int cfg_get_bool(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key, bool def,
                 bool *ret) {
    const struct lz_toml_value *v = NULL;
    int r = get_typed(ld, t, name, key, LZ_TOML_BOOL, &v);
    if (r < 0)
        return r;
    *ret = r > 0 ? v->u.boolean : def;
    return 0;
}
