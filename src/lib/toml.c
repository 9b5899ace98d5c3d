/* toml.c — see toml.h; the scanner is toml_lex.c.
 *
 * A recursive-descent parser over a bounded cursor. Recursion happens only in
 * value parsing (arrays, inline tables) and is capped by LZ_TOML_MAX_DEPTH;
 * the whole input is checked for NUL bytes and UTF-8 before parsing, so the
 * scanner (toml_lex.c) only has to care about ASCII structure. */
#include "toml_int.h"

/* ---- messages -------------------------------------------------------- */

/* A key as it should appear in a message: bare keys verbatim, anything else
 * quoted with control characters escaped; long keys are cut. */
static const char *key_disp(const char *k, char *buf, size_t size) {
    bool bare = k[0] != '\0';
    for (const char *q = k; *q; q++)
        if (!tl_is_bare((unsigned char)*q))
            bare = false;
    size_t o = 0;
    if (!bare && o + 1 < size)
        buf[o++] = '"';
    for (const char *q = k; *q && o + 8 < size; q++) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
            int r = snprintf(buf + o, size - o, c == '"' || c == '\\' ? "\\%c" : "\\x%02x", c);
            if (r > 0)
                o += (size_t)r;
        } else {
            buf[o++] = (char)c;
        }
        if (o + 8 >= size && q[1]) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
    }
    if (!bare && o + 1 < size)
        buf[o++] = '"';
    buf[o < size ? o : size - 1] = '\0';
    return buf;
}

/* "prefix.a.b.\"c d\"" for the first n keys of kv (prefix may be NULL). */
static const char *path_disp_in(const char *prefix, const struct keyvec *kv, size_t n, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = '\0';
    if (prefix && prefix[0]) {
        int r = snprintf(buf, size, "%s", prefix);
        o = r > 0 && (size_t)r < size ? (size_t)r : 0;
    }
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        char one[128];
        int r = snprintf(buf + o, size - o, "%s%s", o ? "." : "", key_disp(kv->k[i], one, sizeof one));
        if (r < 0 || (size_t)r >= size - o)
            break;
        o += (size_t)r;
    }
    return buf;
}

static const char *path_disp(const struct keyvec *kv, size_t n, char *buf, size_t size) {
    return path_disp_in(NULL, kv, n, buf, size);
}

/* "an integer", "a table", "an array of tables", ... for messages. */
static const char *what(const struct lz_toml_value *v) {
    switch (v->type) {
    case LZ_TOML_TABLE: return "a table";
    case LZ_TOML_ARRAY: return (v->flags & LZ_TOML_F_AOT) ? "an array of tables" : "an array";
    case LZ_TOML_STRING: return "a string";
    case LZ_TOML_INTEGER: return "an integer";
    case LZ_TOML_BOOL: return "a boolean";
    }
    return "a value";
}

/* ---- nodes ----------------------------------------------------------- */

static struct lz_toml_value *node_new(enum lz_toml_type type, int line) {
    struct lz_toml_value *v = lz_xcalloc(1, sizeof *v);
    v->type = type;
    v->line = line;
    return v;
}

void lz_toml_free(struct lz_toml_value *v) {
    if (!v)
        return;
    switch (v->type) {
    case LZ_TOML_TABLE:
        for (size_t i = 0; i < v->u.table.n; i++) {
            free(v->u.table.entries[i].key);
            lz_toml_free(v->u.table.entries[i].value);
        }
        free(v->u.table.entries);
        break;
    case LZ_TOML_ARRAY:
        for (size_t i = 0; i < v->u.array.n; i++)
            lz_toml_free(v->u.array.items[i]);
        free(v->u.array.items);
        break;
    case LZ_TOML_STRING: free(v->u.string.s); break;
    case LZ_TOML_INTEGER:
    case LZ_TOML_BOOL: break;
    }
    free(v);
}

static struct lz_toml_entry *table_find(const struct lz_toml_value *t, const char *key) {
    if (!t || t->type != LZ_TOML_TABLE)
        return NULL;
    for (size_t i = 0; i < t->u.table.n; i++)
        if (strcmp(t->u.table.entries[i].key, key) == 0)
            return &t->u.table.entries[i];
    return NULL;
}

/* Takes ownership of key and v, also on failure. */
static int table_add(struct parser *ps, struct lz_toml_value *t, char *key, int line, struct lz_toml_value *v) {
    if (t->u.table.n >= LZ_TOML_MAX_ITEMS) {
        free(key);
        lz_toml_free(v);
        return tl_perr(ps, line, "too many keys in one table (more than %d)", LZ_TOML_MAX_ITEMS);
    }
    if (t->u.table.n == t->u.table.cap) {
        t->u.table.cap = t->u.table.cap ? t->u.table.cap * 2 : 8;
        t->u.table.entries = lz_xrealloc(t->u.table.entries, t->u.table.cap * sizeof *t->u.table.entries);
    }
    t->u.table.entries[t->u.table.n++] = (struct lz_toml_entry){ .key = key, .line = line, .value = v };
    return 0;
}

/* Takes ownership of v, also on failure. */
static int array_add(struct parser *ps, struct lz_toml_value *a, struct lz_toml_value *v) {
    if (a->u.array.n >= LZ_TOML_MAX_ITEMS) {
        int line = v->line;
        lz_toml_free(v);
        return tl_perr(ps, line, "too many elements in one array (more than %d)", LZ_TOML_MAX_ITEMS);
    }
    if (a->u.array.n == a->u.array.cap) {
        a->u.array.cap = a->u.array.cap ? a->u.array.cap * 2 : 8;
        a->u.array.items = lz_xrealloc(a->u.array.items, a->u.array.cap * sizeof *a->u.array.items);
    }
    a->u.array.items[a->u.array.n++] = v;
    return 0;
}

/* ---- values ---------------------------------------------------------- */

static bool is_value_end(int c) {
    return c < 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ']' || c == '}' || c == '#';
}

static int parse_value(struct parser *ps, int depth, struct lz_toml_value **ret);
static int insert_kv(struct parser *ps, struct lz_toml_value *t, const char *prefix, struct keyvec *kv, int base_depth,
                     int line);

static int parse_integer(struct parser *ps, struct lz_toml_value **ret) {
    int line = ps->line;
    bool neg = false;
    size_t i = 0;
    char cd[32];
    if (peek(ps, 0) == '+' || peek(ps, 0) == '-') {
        neg = peek(ps, 0) == '-';
        i++;
    }
    if ((peek(ps, i) == 'i' && peek(ps, i + 1) == 'n' && peek(ps, i + 2) == 'f') ||
        (peek(ps, i) == 'n' && peek(ps, i + 1) == 'a' && peek(ps, i + 2) == 'n'))
        return tl_perr(ps, line, "floating-point values are not supported");
    if (peek(ps, i) < '0' || peek(ps, i) > '9')
        return tl_perr(ps, line, "invalid value");
    if (peek(ps, i) == '0' && (peek(ps, i + 1) == 'x' || peek(ps, i + 1) == 'o' || peek(ps, i + 1) == 'b'))
        return tl_perr(ps, line, "only decimal integers are supported");

    size_t first = i, ndigits = 0;
    bool prev_digit = false;
    for (;; i++) {
        int c = peek(ps, i);
        if (c >= '0' && c <= '9') {
            prev_digit = true;
            ndigits++;
        } else if (c == '_') {
            if (!prev_digit || peek(ps, i + 1) < '0' || peek(ps, i + 1) > '9')
                return tl_perr(ps, line, "'_' in an integer must sit between two digits");
            prev_digit = false;
        } else {
            break;
        }
    }
    int c = peek(ps, i);
    if (c == '.' || c == 'e' || c == 'E')
        return tl_perr(ps, line, "floating-point values are not supported");
    if (c == '-' || c == ':')
        return tl_perr(ps, line, "date-time values are not supported");
    if (!is_value_end(c))
        return tl_perr(ps, line, "invalid integer: unexpected %s", tl_char_disp(c, cd, sizeof cd));
    if (ps->p[first] == '0' && ndigits > 1)
        return tl_perr(ps, line, "leading zeros are not allowed in integers");

    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, acc = 0;
    for (size_t j = first; j < i; j++) {
        if (ps->p[j] == '_')
            continue;
        unsigned d = (unsigned)(ps->p[j] - '0');
        if (acc > (limit - d) / 10)
            return tl_perr(ps, line, "integer out of range");
        acc = acc * 10 + d;
    }
    ps->p += i;
    struct lz_toml_value *v = node_new(LZ_TOML_INTEGER, line);
    if (neg)
        v->u.integer = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    else
        v->u.integer = (int64_t)acc;
    *ret = v;
    return 0;
}

static int parse_array(struct parser *ps, int depth, struct lz_toml_value **ret) {
    int start = ps->line;
    char cd[32];
    struct lz_toml_value *a = node_new(LZ_TOML_ARRAY, start);
    int r;
    ps->p++;
    for (;;) {
        r = tl_skip_ws_nl_comments(ps);
        if (r < 0)
            goto fail;
        if (peek(ps, 0) < 0) {
            r = tl_perr(ps, start, "unterminated array");
            goto fail;
        }
        if (peek(ps, 0) == ']')
            break;
        struct lz_toml_value *item = NULL;
        r = parse_value(ps, depth + 1, &item);
        if (r < 0)
            goto fail;
        r = array_add(ps, a, item);
        if (r < 0)
            goto fail;
        r = tl_skip_ws_nl_comments(ps);
        if (r < 0)
            goto fail;
        if (peek(ps, 0) == ',') {
            ps->p++;
            continue;
        }
        if (peek(ps, 0) == ']')
            break;
        if (peek(ps, 0) < 0)
            r = tl_perr(ps, start, "unterminated array");
        else
            r = tl_perr(ps, ps->line, "expected ',' or ']' in an array, found %s",
                        tl_char_disp(peek(ps, 0), cd, sizeof cd));
        goto fail;
    }
    ps->p++;
    *ret = a;
    return 0;
fail:
    lz_toml_free(a);
    return r;
}

/* Closes an inline table and every table created inside it. */
static void mark_inline(struct lz_toml_value *t) {
    t->flags |= LZ_TOML_F_INLINE;
    for (size_t i = 0; i < t->u.table.n; i++)
        if (t->u.table.entries[i].value->type == LZ_TOML_TABLE &&
            !(t->u.table.entries[i].value->flags & LZ_TOML_F_INLINE))
            mark_inline(t->u.table.entries[i].value);
}

static int parse_inline_table(struct parser *ps, int depth, struct lz_toml_value **ret) {
    int start = ps->line;
    char cd[32];
    struct lz_toml_value *t = node_new(LZ_TOML_TABLE, start);
    t->flags = LZ_TOML_F_DEFINED;
    int r;
    ps->p++;
    skip_ws(ps);
    if (peek(ps, 0) == '}') {
        ps->p++;
        goto done;
    }
    for (;;) {
        skip_ws(ps);
        int c = peek(ps, 0);
        if (c < 0 || c == '\n' || c == '\r' || c == '#') {
            r = tl_perr(ps, start, "an inline table must be closed on the line where it starts");
            goto fail;
        }
        struct keyvec kv = { 0 };
        r = tl_parse_key(ps, &kv);
        if (r >= 0) {
            if (peek(ps, 0) != '=')
                r = tl_perr(ps, ps->line, "expected '=' after a key, found %s",
                            tl_char_disp(peek(ps, 0), cd, sizeof cd));
            else {
                ps->p++;
                skip_ws(ps);
                r = insert_kv(ps, t, NULL, &kv, depth, ps->line);
            }
        }
        keyvec_done(&kv);
        if (r < 0)
            goto fail;
        skip_ws(ps);
        c = peek(ps, 0);
        if (c == ',') {
            ps->p++;
            skip_ws(ps);
            if (peek(ps, 0) == '}') {
                r = tl_perr(ps, ps->line, "trailing comma in an inline table");
                goto fail;
            }
            continue;
        }
        if (c == '}') {
            ps->p++;
            break;
        }
        if (c < 0 || c == '\n' || c == '\r' || c == '#')
            r = tl_perr(ps, start, "an inline table must be closed on the line where it starts");
        else
            r = tl_perr(ps, ps->line, "expected ',' or '}' in an inline table, found %s",
                        tl_char_disp(c, cd, sizeof cd));
        goto fail;
    }
done:
    mark_inline(t);
    *ret = t;
    return 0;
fail:
    lz_toml_free(t);
    return r;
}

static int parse_value(struct parser *ps, int depth, struct lz_toml_value **ret) {
    int line = ps->line;
    char cd[32];
    if (depth > LZ_TOML_MAX_DEPTH)
        return tl_perr(ps, line, "nesting depth exceeds %d", LZ_TOML_MAX_DEPTH);
    int c = peek(ps, 0);
    switch (c) {
    case '"':
    case '\'': {
        struct lz_buf b = { 0 };
        int r = tl_parse_string(ps, &b);
        if (r < 0) {
            sb_done(&b);
            return r;
        }
        struct lz_toml_value *v = node_new(LZ_TOML_STRING, line);
        v->u.string.s = b.p;
        v->u.string.len = b.len;
        *ret = v;
        return 0;
    }
    case '[': return parse_array(ps, depth, ret);
    case '{': return parse_inline_table(ps, depth, ret);
    case 't':
    case 'f': {
        size_t n = c == 't' ? 4 : 5;
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, c == 't' ? "true" : "false", n) == 0 &&
            is_value_end(peek(ps, n))) {
            ps->p += n;
            struct lz_toml_value *v = node_new(LZ_TOML_BOOL, line);
            v->u.boolean = c == 't';
            *ret = v;
            return 0;
        }
        return tl_perr(ps, line, "invalid value (strings must be quoted)");
    }
    case 'i':
    case 'n':
        if (peek(ps, 1) == (c == 'i' ? 'n' : 'a') && peek(ps, 2) == (c == 'i' ? 'f' : 'n'))
            return tl_perr(ps, line, "floating-point values are not supported");
        return tl_perr(ps, line, "invalid value (strings must be quoted)");
    default:
        if (c == '+' || c == '-' || (c >= '0' && c <= '9'))
            return parse_integer(ps, ret);
        if (c < 0 || c == '\n' || c == '\r' || c == '#')
            return tl_perr(ps, line, "expected a value");
        if (tl_is_bare(c))
            return tl_perr(ps, line, "invalid value (strings must be quoted)");
        return tl_perr(ps, line, "expected a value, found %s", tl_char_disp(c, cd, sizeof cd));
    }
}

/* ---- tables ---------------------------------------------------------- */

/* Adds `k1.k2...kn = value` (value at the cursor) to table t. Dotted keys may
 * only pass through tables that dotted keys created, as in TOML 1.0. */
static int insert_kv(struct parser *ps, struct lz_toml_value *t, const char *prefix, struct keyvec *kv, int base_depth,
                     int line) {
    char kd[512];
    if (base_depth + (int)kv->n > LZ_TOML_MAX_DEPTH)
        return tl_perr(ps, line, "nesting depth exceeds %d", LZ_TOML_MAX_DEPTH);
    for (size_t i = 0; i + 1 < kv->n; i++) {
        struct lz_toml_entry *e = table_find(t, kv->k[i]);
        if (!e) {
            struct lz_toml_value *nt = node_new(LZ_TOML_TABLE, line);
            nt->flags = LZ_TOML_F_DOTTED;
            int r = table_add(ps, t, lz_xstrdup(kv->k[i]), line, nt);
            if (r < 0)
                return r;
            t = nt;
            continue;
        }
        struct lz_toml_value *v = e->value;
        if (v->type == LZ_TOML_TABLE && (v->flags & LZ_TOML_F_DOTTED) && !(v->flags & LZ_TOML_F_INLINE)) {
            t = v;
            continue;
        }
        if (v->type == LZ_TOML_TABLE && (v->flags & LZ_TOML_F_INLINE))
            return tl_perr(ps, line, "cannot add keys to inline table %s (defined at line %d)",
                           path_disp_in(prefix, kv, i + 1, kd, sizeof kd), v->line);
        if (v->type == LZ_TOML_TABLE)
            return tl_perr(ps, line, "table %s is defined at line %d; a dotted key cannot extend it",
                           path_disp_in(prefix, kv, i + 1, kd, sizeof kd), v->line);
        return tl_perr(ps, line, "key %s is already defined as %s at line %d",
                       path_disp_in(prefix, kv, i + 1, kd, sizeof kd), what(v), e->line);
    }
    const char *last = kv->k[kv->n - 1];
    struct lz_toml_entry *e = table_find(t, last);
    if (e)
        return tl_perr(ps, line, "duplicate key %s (first defined at line %d)",
                       path_disp_in(prefix, kv, kv->n, kd, sizeof kd), e->line);
    struct lz_toml_value *v = NULL;
    int r = parse_value(ps, base_depth + (int)kv->n, &v);
    if (r < 0)
        return r;
    return table_add(ps, t, lz_xstrdup(last), line, v);
}

/* One step of a header path (not the last key): descends into a table or
 * the last table of an array of tables, creating implicit tables. */
static int header_descend(struct parser *ps, struct lz_toml_value *t, const struct keyvec *kv, size_t i, int line,
                          struct lz_toml_value **ret) {
    char kd[256];
    struct lz_toml_entry *e = table_find(t, kv->k[i]);
    if (!e) {
        struct lz_toml_value *nt = node_new(LZ_TOML_TABLE, line);
        nt->flags = LZ_TOML_F_IMPLICIT;
        int r = table_add(ps, t, lz_xstrdup(kv->k[i]), line, nt);
        if (r < 0)
            return r;
        *ret = nt;
        return 0;
    }
    struct lz_toml_value *v = e->value;
    if (v->type == LZ_TOML_TABLE) {
        if (v->flags & LZ_TOML_F_INLINE)
            return tl_perr(ps, line, "cannot extend inline table %s (defined at line %d)",
                           path_disp(kv, i + 1, kd, sizeof kd), v->line);
        *ret = v;
        return 0;
    }
    if (v->type == LZ_TOML_ARRAY && (v->flags & LZ_TOML_F_AOT) && v->u.array.n > 0) {
        *ret = v->u.array.items[v->u.array.n - 1];
        return 0;
    }
    return tl_perr(ps, line, "key %s is already defined as %s at line %d", path_disp(kv, i + 1, kd, sizeof kd), what(v),
                   e->line);
}

static int parse_header(struct parser *ps) {
    int line = ps->line;
    char cd[32], kd[256];
    bool aot = peek(ps, 1) == '[';
    ps->p += aot ? 2 : 1;
    skip_ws(ps);
    struct keyvec kv = { 0 };
    int r = tl_parse_key(ps, &kv);
    if (r < 0)
        goto out;
    if (peek(ps, 0) != ']' || (aot && peek(ps, 1) != ']')) {
        r = tl_perr(ps, line, "expected '%s' to close the table header, found %s", aot ? "]]" : "]",
                    tl_char_disp(peek(ps, aot && peek(ps, 0) == ']' ? 1 : 0), cd, sizeof cd));
        goto out;
    }
    ps->p += aot ? 2 : 1;

    struct lz_toml_value *t = ps->root;
    for (size_t i = 0; i + 1 < kv.n; i++) {
        r = header_descend(ps, t, &kv, i, line, &t);
        if (r < 0)
            goto out;
    }
    const char *last = kv.k[kv.n - 1];
    struct lz_toml_entry *e = table_find(t, last);
    path_disp(&kv, kv.n, kd, sizeof kd);
    if (aot) {
        struct lz_toml_value *a;
        if (!e) {
            a = node_new(LZ_TOML_ARRAY, line);
            a->flags = LZ_TOML_F_AOT;
            r = table_add(ps, t, lz_xstrdup(last), line, a);
            if (r < 0)
                goto out;
        } else if (e->value->type == LZ_TOML_ARRAY && (e->value->flags & LZ_TOML_F_AOT)) {
            a = e->value;
        } else {
            r = tl_perr(ps, line, "cannot define [[%s]]: %s is already defined as %s at line %d", kd, kd,
                        what(e->value), e->line);
            goto out;
        }
        struct lz_toml_value *nt = node_new(LZ_TOML_TABLE, line);
        nt->flags = LZ_TOML_F_DEFINED;
        r = array_add(ps, a, nt);
        if (r < 0)
            goto out;
        ps->cur = nt;
    } else {
        if (!e) {
            struct lz_toml_value *nt = node_new(LZ_TOML_TABLE, line);
            nt->flags = LZ_TOML_F_DEFINED;
            r = table_add(ps, t, lz_xstrdup(last), line, nt);
            if (r < 0)
                goto out;
            ps->cur = nt;
        } else if (e->value->type == LZ_TOML_TABLE && e->value->flags == LZ_TOML_F_IMPLICIT) {
            e->value->flags = LZ_TOML_F_DEFINED;
            e->value->line = line;
            ps->cur = e->value;
        } else if (e->value->type == LZ_TOML_TABLE) {
            r = tl_perr(ps, line, "table [%s] is defined twice (first at line %d)", kd, e->value->line);
            goto out;
        } else {
            r = tl_perr(ps, line, "cannot define table [%s]: %s is already defined as %s at line %d", kd, kd,
                        what(e->value), e->line);
            goto out;
        }
    }
    ps->cur_depth = (int)kv.n;
    snprintf(ps->cur_name, sizeof ps->cur_name, "%s", kd);
    r = 0;
out:
    keyvec_done(&kv);
    return r;
}

static int parse_kv_line(struct parser *ps) {
    int line = ps->line;
    char cd[32];
    struct keyvec kv = { 0 };
    int r = tl_parse_key(ps, &kv);
    if (r >= 0) {
        if (peek(ps, 0) != '=') {
            r = tl_perr(ps, line, "expected '=' after a key, found %s", tl_char_disp(peek(ps, 0), cd, sizeof cd));
        } else {
            ps->p++;
            skip_ws(ps);
            r = insert_kv(ps, ps->cur, ps->cur_name, &kv, ps->cur_depth, line);
        }
    }
    keyvec_done(&kv);
    return r;
}

/* ---- entry points ---------------------------------------------------- */

int lz_toml_parse(const char *buf, size_t len, const char *filename, struct lz_toml_value **ret_root,
                  struct lz_error *err) {
    struct parser ps = { .p = buf, .end = buf + len, .line = 1, .file = filename ? filename : "<input>", .err = err };
    char cd[32];
    int r;

    if (len > LZ_TOML_MAX_INPUT)
        return lz_error_set(err, -EFBIG, "%s: larger than %d bytes", ps.file, LZ_TOML_MAX_INPUT);

    /* NUL bytes and UTF-8 first, so the scanner sees only valid text. */
    int line = 1;
    const unsigned char *u = (const unsigned char *)buf;
    for (size_t i = 0; i < len;) {
        if (u[i] == 0)
            return tl_perr(&ps, line, "NUL byte in input");
        if (u[i] == '\n')
            line++;
        size_t l = tl_utf8_seq(u + i, len - i);
        if (l == 0)
            return tl_perr(&ps, line, "invalid UTF-8");
        i += l;
    }

    ps.root = node_new(LZ_TOML_TABLE, 1);
    ps.root->flags = LZ_TOML_F_DEFINED;
    ps.cur = ps.root;

    while (ps.p < ps.end) {
        skip_ws(&ps);
        int c = peek(&ps, 0);
        if (c < 0)
            break;
        if (c == '[')
            r = parse_header(&ps);
        else if (c != '#' && c != '\n' && c != '\r')
            r = parse_kv_line(&ps);
        else
            r = 0;
        if (r < 0)
            goto fail;
        skip_ws(&ps);
        if (peek(&ps, 0) == '#') {
            r = tl_skip_comment(&ps);
            if (r < 0)
                goto fail;
        }
        r = tl_eat_newline(&ps);
        if (r < 0)
            goto fail;
        if (r == 0 && ps.p < ps.end) {
            r = tl_perr(&ps, ps.line, "expected the end of the line, found %s",
                        tl_char_disp(peek(&ps, 0), cd, sizeof cd));
            goto fail;
        }
    }
    *ret_root = ps.root;
    return 0;
fail:
    lz_toml_free(ps.root);
    return r;
}

const struct lz_toml_entry *lz_toml_table_entry(const struct lz_toml_value *t, const char *key) {
    return table_find(t, key);
}

const struct lz_toml_value *lz_toml_table_get(const struct lz_toml_value *t, const char *key) {
    const struct lz_toml_entry *e = table_find(t, key);
    return e ? e->value : NULL;
}

const struct lz_toml_value *lz_toml_array_at(const struct lz_toml_value *a, size_t i) {
    if (!a || a->type != LZ_TOML_ARRAY || i >= a->u.array.n)
        return NULL;
    return a->u.array.items[i];
}

size_t lz_toml_len(const struct lz_toml_value *v) {
    if (!v)
        return 0;
    if (v->type == LZ_TOML_TABLE)
        return v->u.table.n;
    if (v->type == LZ_TOML_ARRAY)
        return v->u.array.n;
    return 0;
}

const char *lz_toml_type_name(enum lz_toml_type t) {
    switch (t) {
    case LZ_TOML_TABLE: return "table";
    case LZ_TOML_ARRAY: return "array";
    case LZ_TOML_STRING: return "string";
    case LZ_TOML_INTEGER: return "integer";
    case LZ_TOML_BOOL: return "boolean";
    }
    return "value";
}
