/* toml_lex.c — the TOML scanner: error messages, UTF-8, whitespace,
 * comments, newlines, strings and keys over the parser's bounded cursor
 * (see toml_int.h); it calls nothing of the parser (toml.c).
 * It sees only ASCII structure: lz_toml_parse() checked the whole input for
 * NUL bytes and UTF-8 first. */
#include "toml_int.h"

/* ---- errors and characters ------------------------------------------ */

int tl_perr(struct parser *ps, int line, const char *fmt, ...) {
    char msg[LZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lz_error_set(ps->err, -EINVAL, "%s:%d: %s", ps->file, line, msg);
}

bool tl_is_bare(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

const char *tl_char_disp(int c, char *buf, size_t size) {
    if (c < 0)
        snprintf(buf, size, "end of file");
    else if (c == '\n' || c == '\r')
        snprintf(buf, size, "end of line");
    else if (c > 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", (unsigned)c);
    return buf;
}

/* ---- UTF-8 ----------------------------------------------------------- */

/* Length of the well-formed sequence at s (n bytes available), 0 if none. */
size_t tl_utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool lz_utf8_valid(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t l = tl_utf8_seq(u + i, len - i);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

static void utf8_put(struct lz_buf *b, uint32_t cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    } else {
        o[0] = (char)(0xf0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    }
    lz_buf_add(b, o, n);
}

/* ---- scanning -------------------------------------------------------- */

static bool is_ctrl(int c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }

/* 1 when a newline was consumed, 0 when none is here, <0 on a bare CR. */
int tl_eat_newline(struct parser *ps) {
    int c = peek(ps, 0);
    if (c == '\n') {
        ps->p++;
        ps->line++;
        return 1;
    }
    if (c == '\r') {
        if (peek(ps, 1) != '\n')
            return tl_perr(ps, ps->line, "carriage return not followed by a line feed");
        ps->p += 2;
        ps->line++;
        return 1;
    }
    return 0;
}

/* At '#': consumes the comment up to (not including) the line end. */
int tl_skip_comment(struct parser *ps) {
    ps->p++;
    while (ps->p < ps->end && *ps->p != '\n') {
        int c = (unsigned char)*ps->p;
        if (c == '\r' && peek(ps, 1) == '\n')
            break;
        if (is_ctrl(c))
            return tl_perr(ps, ps->line, "control character 0x%02x in a comment", (unsigned)c);
        ps->p++;
    }
    return 0;
}

/* Whitespace, newlines and comments, as allowed between array elements. */
int tl_skip_ws_nl_comments(struct parser *ps) {
    for (;;) {
        skip_ws(ps);
        if (peek(ps, 0) == '#') {
            int r = tl_skip_comment(ps);
            if (r < 0)
                return r;
        }
        int r = tl_eat_newline(ps);
        if (r < 0)
            return r;
        if (r == 0)
            return 0;
    }
}

/* ---- strings --------------------------------------------------------- */

static int parse_escape(struct parser *ps, struct lz_buf *b) {
    int e = peek(ps, 1);
    char cd[32];
    ps->p += 2;
    switch (e) {
    case 'b': lz_buf_addc(b, '\b'); return 0;
    case 't': lz_buf_addc(b, '\t'); return 0;
    case 'n': lz_buf_addc(b, '\n'); return 0;
    case 'f': lz_buf_addc(b, '\f'); return 0;
    case 'r': lz_buf_addc(b, '\r'); return 0;
    case '"': lz_buf_addc(b, '"'); return 0;
    case '\\': lz_buf_addc(b, '\\'); return 0;
    case 'u':
    case 'U': {
        int nd = e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < nd; i++) {
            int h = lz_hex_value(peek(ps, (size_t)i));
            if (h < 0)
                return tl_perr(ps, ps->line, "\\%c escape needs %d hexadecimal digits", e, nd);
            cp = (cp << 4) | (uint32_t)h;
        }
        ps->p += nd;
        if (cp == 0)
            return tl_perr(ps, ps->line, "\\%c escape of NUL is not allowed", e);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return tl_perr(ps, ps->line, "\\%c escape is not a Unicode scalar value", e);
        utf8_put(b, cp);
        return 0;
    }
    default:
        if (e < 0)
            return tl_perr(ps, ps->line, "unterminated string");
        return tl_perr(ps, ps->line, "invalid escape sequence: backslash followed by %s",
                       tl_char_disp(e, cd, sizeof cd));
    }
}

/* Counts a run of quote characters q at the cursor. */
static size_t quote_run(const struct parser *ps, char q) {
    size_t n = 0;
    while (ps->p + n < ps->end && ps->p[n] == q)
        n++;
    return n;
}

/* One character c at ps->p of a string's body, not its delimiter: an
 * escape (basic strings), refused (a control character) or itself. */
static int string_char(struct parser *ps, struct lz_buf *b, bool basic, int c) {
    if (basic && c == '\\')
        return parse_escape(ps, b);
    if (is_ctrl(c))
        return tl_perr(ps, ps->line, "control character 0x%02x in a string", (unsigned)c);
    lz_buf_addc(b, (char)c);
    ps->p++;
    return 0;
}

/* At a backslash inside a basic string. */
/* At the opening quote(s). Fills b with the decoded bytes. */
int tl_parse_string(struct parser *ps, struct lz_buf *b) {
    char q = *ps->p;
    bool basic = q == '"';
    bool multi = quote_run(ps, q) >= 3;
    int start = ps->line;
    lz_buf_add(b, "", 0); /* an empty string is still a string */

    if (!multi) {
        ps->p++;
        for (;;) {
            int c = peek(ps, 0);
            if (c < 0 || c == '\n' || c == '\r')
                return tl_perr(ps, start, "unterminated string");
            if (c == q) {
                ps->p++;
                return 0;
            }
            int r = string_char(ps, b, basic, c);
            if (r < 0)
                return r;
        }
    }

    ps->p += 3;
    /* A newline right after the opening delimiter is trimmed. */
    int r = tl_eat_newline(ps);
    if (r < 0)
        return r;
    for (;;) {
        int c = peek(ps, 0);
        if (c < 0)
            return tl_perr(ps, start, "unterminated multi-line string");
        if (c == q) {
            size_t n = quote_run(ps, q);
            if (n >= 3) {
                /* Up to two quotes may sit just inside the closing delimiter. */
                if (n > 5)
                    return tl_perr(ps, ps->line, "too many quotes at the end of a multi-line string");
                lz_buf_add(b, ps->p, n - 3);
                ps->p += n;
                return 0;
            }
            lz_buf_add(b, ps->p, n);
            ps->p += n;
            continue;
        }
        if (c == '\n' || c == '\r') {
            r = tl_eat_newline(ps);
            if (r < 0)
                return r;
            lz_buf_addc(b, '\n');
            continue;
        }
        if (basic && c == '\\') {
            /* Line-ending backslash: trims the newline and the whitespace
             * (including newlines) that follows it. */
            size_t i = 1;
            while (peek(ps, i) == ' ' || peek(ps, i) == '\t')
                i++;
            int nc = peek(ps, i);
            if (nc == '\n' || nc == '\r') {
                ps->p += i;
                for (;;) {
                    skip_ws(ps);
                    r = tl_eat_newline(ps);
                    if (r < 0)
                        return r;
                    if (r == 0)
                        break;
                }
                continue;
            }
        }
        r = string_char(ps, b, basic, c);
        if (r < 0)
            return r;
    }
}

/* ---- keys ------------------------------------------------------------ */

static int parse_simple_key(struct parser *ps, char **ret) {
    int c = peek(ps, 0);
    char cd[32];
    if (c == '"' || c == '\'') {
        if (quote_run(ps, (char)c) >= 3)
            return tl_perr(ps, ps->line, "a multi-line string cannot be a key");
        struct lz_buf b = { 0 };
        int r = tl_parse_string(ps, &b);
        if (r < 0) {
            sb_done(&b);
            return r;
        }
        *ret = b.p;
        return 0;
    }
    const char *s = ps->p;
    while (ps->p < ps->end && tl_is_bare((unsigned char)*ps->p))
        ps->p++;
    if (ps->p == s)
        return tl_perr(ps, ps->line, "expected a key, found %s", tl_char_disp(c, cd, sizeof cd));
    *ret = lz_xstrndup(s, (size_t)(ps->p - s));
    return 0;
}

/* key ( '.' key )* with optional whitespace around the dots. */
int tl_parse_key(struct parser *ps, struct keyvec *kv) {
    for (;;) {
        if (kv->n >= LZ_TOML_MAX_DEPTH)
            return tl_perr(ps, ps->line, "nesting depth exceeds %d", LZ_TOML_MAX_DEPTH);
        int r = parse_simple_key(ps, &kv->k[kv->n]);
        if (r < 0)
            return r;
        kv->n++;
        skip_ws(ps);
        if (peek(ps, 0) != '.')
            return 0;
        ps->p++;
        skip_ws(ps);
    }
}
