/* httphead.c — the strict HTTP/1.1 request-head reader (httphead.h). */
#include "httphead.h"

#include <errno.h>
#include <string.h>

static const char *const reasons[LZ_HTTP_R_MAX] = {
    [LZ_HTTP_OK] = "ok",
    [LZ_HTTP_R_TOO_LONG] = "request head longer than 65536 bytes",
    [LZ_HTTP_R_LINE_TOO_LONG] = "request or field line longer than 16384 bytes",
    [LZ_HTTP_R_TOO_MANY_FIELDS] = "more than 128 header fields",
    [LZ_HTTP_R_BARE_LF] = "line ending in LF without CR",
    [LZ_HTTP_R_BARE_CR] = "CR not followed by LF",
    [LZ_HTTP_R_REQUEST_LINE] = "malformed request line",
    [LZ_HTTP_R_METHOD] = "malformed method",
    [LZ_HTTP_R_CONNECT] = "CONNECT is not allowed",
    [LZ_HTTP_R_H2_PREFACE] = "HTTP/2 connection preface",
    [LZ_HTTP_R_TARGET] = "malformed request target",
    [LZ_HTTP_R_ASTERISK] = "asterisk-form target with a method other than OPTIONS",
    [LZ_HTTP_R_VERSION] = "HTTP version other than HTTP/1.1",
    [LZ_HTTP_R_OBS_FOLD] = "line starting with whitespace (obs-fold)",
    [LZ_HTTP_R_FIELD_NAME] = "malformed header field name",
    [LZ_HTTP_R_SPACE_COLON] = "whitespace in a header field name or before its colon",
    [LZ_HTTP_R_FIELD_VALUE] = "control character in a header field value",
    [LZ_HTTP_R_HOST_MISSING] = "no Host header",
    [LZ_HTTP_R_HOST_DUP] = "more than one Host header",
    [LZ_HTTP_R_HOST] = "malformed Host header",
    [LZ_HTTP_R_HOST_MISMATCH] = "absolute-form target for another host than Host",
    [LZ_HTTP_R_LENGTH] = "malformed Content-Length",
    [LZ_HTTP_R_LENGTH_DUP] = "more than one Content-Length header",
    [LZ_HTTP_R_TE] = "Transfer-Encoding other than one chunked",
    [LZ_HTTP_R_LENGTH_AND_TE] = "both Content-Length and Transfer-Encoding",
    [LZ_HTTP_R_EXPECT] = "Expect other than 100-continue",
    [LZ_HTTP_R_UPGRADE] = "protocol upgrade (Upgrade, HTTP2-Settings, Connection: upgrade)",
    [LZ_HTTP_R_CONNECTION] = "malformed Connection header, or one naming a framing header",
};

const char *lz_http_reason_str(enum lz_http_reason r) {
    return (unsigned)r < LZ_HTTP_R_MAX && reasons[r] ? reasons[r] : "unknown reason";
}

static int fail(enum lz_http_reason *why, enum lz_http_reason r) {
    if (why)
        *why = r;
    return -EBADMSG;
}

/* RFC 9110 §5.6.2. */
static bool tchar(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool ows(uint8_t c) { return c == ' ' || c == '\t'; }

/* RFC 3986 §3.2.2-3.2.3 (reg-name, IP-literal, port): what an authority
 * or a Host value may hold. No '@': no userinfo. */
static bool host_char(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("-._~%!$&'()*+,;=:[]", c) != NULL;
}

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c; }

/* The n bytes at p are s, ASCII case ignored. */
static bool eq_ci(const uint8_t *p, size_t n, const char *s) {
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(p[i]) != lower((uint8_t)s[i]))
            return false;
    return true;
}

/* The n bytes at p are the start of s (lower case), ASCII case ignored. */
static bool prefix_ci(const uint8_t *p, size_t n, const char *s) {
    size_t l = strlen(s);
    for (size_t i = 0; i < n && i < l; i++)
        if (lower(p[i]) != (uint8_t)s[i])
            return false;
    return true;
}

static struct lz_http_span span(size_t off, size_t len) {
    return (struct lz_http_span){ .off = (uint32_t)off, .len = (uint32_t)len };
}

/* The line at off, as far as the len bytes of the stream go: its length
 * without CRLF in *ret_n; 1 when its CRLF is there, 0 when not yet
 * (*ret_cr: the last byte is its CR), or -EBADMSG. */
static int line_end(const uint8_t *b, size_t len, size_t off, size_t *ret_n, bool *ret_cr, enum lz_http_reason *why) {
    size_t lim = len - off;
    if (lim > LZ_HTTP_LINE_MAX)
        lim = LZ_HTTP_LINE_MAX + 1;
    for (size_t i = 0; i < lim; i++) {
        uint8_t c = b[off + i];
        if (c == '\n')
            return fail(why, LZ_HTTP_R_BARE_LF);
        if (c == '\r') {
            *ret_n = i;
            *ret_cr = off + i + 1 == len;
            if (*ret_cr)
                return 0;
            if (b[off + i + 1] != '\n')
                return fail(why, LZ_HTTP_R_BARE_CR);
            return 1;
        }
    }
    if (lim > LZ_HTTP_LINE_MAX)
        return fail(why, LZ_HTTP_R_LINE_TOO_LONG);
    *ret_n = lim;
    *ret_cr = false;
    return 0;
}

/* The request line p[0..n) (complete: its CRLF follows), checked as far
 * as it goes. The authority of an absolute-form target in *ret_auth. */
static int request_line(const uint8_t *p, size_t n, bool complete, struct lz_http_head *h,
                        struct lz_http_span *ret_auth, enum lz_http_reason *why) {
    size_t i = 0;
    while (i < n && tchar(p[i]))
        i++;
    if (i == 0 && (n > 0 || complete))
        return fail(why, LZ_HTTP_R_METHOD);
    if (i == n)
        return complete ? fail(why, LZ_HTTP_R_REQUEST_LINE) : 0;
    if (p[i] != ' ')
        return fail(why, ows(p[i]) ? LZ_HTTP_R_REQUEST_LINE : LZ_HTTP_R_METHOD);
    h->method = span(0, i);
    if (i == 7 && memcmp(p, "CONNECT", 7) == 0)
        return fail(why, LZ_HTTP_R_CONNECT);
    if (i == 3 && memcmp(p, "PRI", 3) == 0)
        return fail(why, LZ_HTTP_R_H2_PREFACE);

    size_t t = i + 1, j = t;
    while (j < n && p[j] != ' ') {
        if (p[j] < 0x21 || p[j] > 0x7e || p[j] == '#')
            return fail(why, LZ_HTTP_R_TARGET);
        j++;
    }
    bool target_done = j < n;
    size_t k = j - t; /* target bytes seen */
    if (k == 0)
        return target_done || complete ? fail(why, LZ_HTTP_R_TARGET) : 0;
    if (p[t] == '/') {
        h->form = LZ_HTTP_FORM_ORIGIN;
        h->path = span(t, k);
    } else if (p[t] == '*') {
        if (i != 7 || memcmp(p, "OPTIONS", 7) != 0)
            return fail(why, LZ_HTTP_R_ASTERISK);
        if (k > 1)
            return fail(why, LZ_HTTP_R_TARGET);
        h->form = LZ_HTTP_FORM_ASTERISK;
        h->path = span(t + 1, 0);
    } else {
        /* absolute-form: the scheme as far as it is there, then an
         * authority up to the path or query. */
        size_t slen = 0;
        if (prefix_ci(p + t, k, "http://"))
            slen = 7;
        else if (prefix_ci(p + t, k, "https://"))
            slen = 8;
        else
            return fail(why, LZ_HTTP_R_TARGET);
        if (k >= slen) {
            size_t a = t + slen, e = a;
            while (e < j && p[e] != '/' && p[e] != '?') {
                if (!host_char(p[e]))
                    return fail(why, LZ_HTTP_R_TARGET);
                e++;
            }
            if (e == a && (e < j || target_done || complete))
                return fail(why, LZ_HTTP_R_TARGET);
            *ret_auth = span(a, e - a);
            h->path = span(e, j - e);
        } else if (target_done || complete) {
            return fail(why, LZ_HTTP_R_TARGET);
        }
        h->form = LZ_HTTP_FORM_ABSOLUTE;
    }
    if (!target_done)
        return complete ? fail(why, LZ_HTTP_R_REQUEST_LINE) : 0;
    h->target = span(t, k);

    static const char version[] = "HTTP/1.1";
    size_t v = j + 1, m = n - v;
    if (m > sizeof version - 1 || memcmp(p + v, version, m) != 0 || (complete && m < sizeof version - 1))
        return fail(why, LZ_HTTP_R_VERSION);
    return 0;
}

/* A field line p[0..n) checked as far as it goes: *ret_colon, the
 * colon's offset, once it is there. */
static int field_line(const uint8_t *p, size_t n, bool complete, size_t *ret_colon, enum lz_http_reason *why) {
    if (n > 0 && ows(p[0]))
        return fail(why, LZ_HTTP_R_OBS_FOLD);
    size_t i = 0;
    while (i < n && tchar(p[i]))
        i++;
    if (i == n)
        return complete ? fail(why, LZ_HTTP_R_FIELD_NAME) : 0;
    if (ows(p[i]))
        return fail(why, LZ_HTTP_R_SPACE_COLON);
    if (p[i] != ':' || i == 0)
        return fail(why, LZ_HTTP_R_FIELD_NAME);
    *ret_colon = i;
    for (i++; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
            return fail(why, LZ_HTTP_R_FIELD_VALUE);
    return 0;
}

/* What the fields seen so far said. */
struct seen {
    bool host, length, te, expect;
};

/* The fields whose name, '_' read as '-', some servers take for these. */
static bool underscore_alias(const uint8_t *p, size_t n) {
    static const char *const names[] = { "content-length", "transfer-encoding", "http2-settings" };
    if (!memchr(p, '_', n))
        return false;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const char *s = names[k];
        if (strlen(s) != n)
            continue;
        size_t i = 0;
        while (i < n && (p[i] == '_' ? '-' : lower(p[i])) == (uint8_t)s[i])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/* Connection = #token (RFC 9110 §7.6.1): empty elements allowed. */
static int connection(const uint8_t *p, size_t n, struct lz_http_head *h, enum lz_http_reason *why) {
    size_t i = 0;
    while (i < n) {
        if (ows(p[i]) || p[i] == ',') {
            i++;
            continue;
        }
        size_t s = i;
        while (i < n && tchar(p[i]))
            i++;
        if (i == s)
            return fail(why, LZ_HTTP_R_CONNECTION);
        const uint8_t *tok = p + s;
        size_t l = i - s;
        if (eq_ci(tok, l, "upgrade"))
            return fail(why, LZ_HTTP_R_UPGRADE);
        if (eq_ci(tok, l, "close"))
            h->keep_alive = false;
        else if (eq_ci(tok, l, "host") || eq_ci(tok, l, "content-length") || eq_ci(tok, l, "transfer-encoding"))
            return fail(why, LZ_HTTP_R_CONNECTION);
        while (i < n && ows(p[i]))
            i++;
        if (i < n && p[i] != ',')
            return fail(why, LZ_HTTP_R_CONNECTION);
    }
    return 0;
}

/* A complete field line at off (n bytes, the colon at colon): kept, and
 * checked against the rules of the fields that frame the request. */
static int field(struct lz_http_head *h, struct seen *st, const uint8_t *b, size_t off, size_t n, size_t colon,
                 enum lz_http_reason *why) {
    const uint8_t *name = b + off;
    size_t vs = colon + 1, ve = n;
    while (vs < ve && ows(b[off + vs]))
        vs++;
    while (ve > vs && ows(b[off + ve - 1]))
        ve--;
    const uint8_t *v = b + off + vs;
    size_t vl = ve - vs;
    h->fields[h->n_fields++] = (struct lz_http_field){ .name = span(off, colon), .value = span(off + vs, vl) };

    if (underscore_alias(name, colon))
        return fail(why, LZ_HTTP_R_FIELD_NAME);
    if (eq_ci(name, colon, "host")) {
        if (st->host)
            return fail(why, LZ_HTTP_R_HOST_DUP);
        st->host = true;
        if (vl == 0)
            return fail(why, LZ_HTTP_R_HOST);
        for (size_t i = 0; i < vl; i++)
            if (!host_char(v[i]))
                return fail(why, LZ_HTTP_R_HOST);
        h->host = span(off + vs, vl);
    } else if (eq_ci(name, colon, "content-length")) {
        if (st->length)
            return fail(why, LZ_HTTP_R_LENGTH_DUP);
        st->length = true;
        if (vl == 0 || vl > LZ_HTTP_LENGTH_DIGITS)
            return fail(why, LZ_HTTP_R_LENGTH);
        uint64_t x = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return fail(why, LZ_HTTP_R_LENGTH);
            x = x * 10 + (uint64_t)(v[i] - '0');
        }
        h->content_length = x;
        if (st->te)
            return fail(why, LZ_HTTP_R_LENGTH_AND_TE);
    } else if (eq_ci(name, colon, "transfer-encoding")) {
        if (st->te || !eq_ci(v, vl, "chunked"))
            return fail(why, LZ_HTTP_R_TE);
        st->te = true;
        if (st->length)
            return fail(why, LZ_HTTP_R_LENGTH_AND_TE);
    } else if (eq_ci(name, colon, "expect")) {
        if (st->expect || !eq_ci(v, vl, "100-continue"))
            return fail(why, LZ_HTTP_R_EXPECT);
        st->expect = true;
        h->expect_continue = true;
    } else if (eq_ci(name, colon, "upgrade") || eq_ci(name, colon, "http2-settings")) {
        return fail(why, LZ_HTTP_R_UPGRADE);
    } else if (eq_ci(name, colon, "connection")) {
        return connection(v, vl, h, why);
    }
    return 0;
}

/* More bytes: at least k after the len scanned (or the head is too long). */
static int again(size_t len, size_t k, size_t *ret_need, enum lz_http_reason *why) {
    if (len + k > LZ_HTTP_HEAD_MAX)
        return fail(why, LZ_HTTP_R_TOO_LONG);
    if (ret_need)
        *ret_need = len + k;
    return -EAGAIN;
}

int lz_http_head_parse(const uint8_t *buf, size_t len, struct lz_http_head *ret, size_t *ret_need,
                       enum lz_http_reason *why) {
    /* Bytes past the bound are never read: a head that does not end
     * before it is too long. */
    if (len > LZ_HTTP_HEAD_MAX)
        len = LZ_HTTP_HEAD_MAX + 1;
    size_t scan = len > LZ_HTTP_HEAD_MAX ? LZ_HTTP_HEAD_MAX : len;
    struct lz_http_head h = { .keep_alive = true };
    struct lz_http_span auth = { 0 };
    struct seen st = { 0 };
    size_t n, colon = 0;
    bool cr;

    /* An incomplete line needs its CRLF and an empty line; an empty line
     * begun, its LF. */
    int r = line_end(buf, scan, 0, &n, &cr, why);
    if (r < 0)
        return r;
    int e = request_line(buf, n, r == 1, &h, &auth, why);
    if (e < 0)
        return e;
    if (r == 0)
        return again(len, cr ? 3 : 4, ret_need, why);
    size_t off = n + 2;
    for (;;) {
        if (off == scan)
            return again(len, 2, ret_need, why);
        if (buf[off] == '\r') {
            if (off + 1 == scan)
                return again(len, 1, ret_need, why);
            if (buf[off + 1] != '\n')
                return fail(why, LZ_HTTP_R_BARE_CR);
            off += 2;
            break;
        }
        if (buf[off] == '\n')
            return fail(why, LZ_HTTP_R_BARE_LF);
        if (h.n_fields == LZ_HTTP_FIELDS_MAX)
            return fail(why, LZ_HTTP_R_TOO_MANY_FIELDS);
        r = line_end(buf, scan, off, &n, &cr, why);
        if (r < 0)
            return r;
        e = field_line(buf + off, n, r == 1, &colon, why);
        if (e < 0)
            return e;
        if (r == 0)
            return again(len, cr ? 3 : 4, ret_need, why);
        e = field(&h, &st, buf, off, n, colon, why);
        if (e < 0)
            return e;
        off += n + 2;
    }

    if (!st.host)
        return fail(why, LZ_HTTP_R_HOST_MISSING);
    if (h.form == LZ_HTTP_FORM_ABSOLUTE) {
        const uint8_t *a = buf + auth.off, *o = buf + h.host.off;
        bool same = auth.len == h.host.len;
        for (size_t i = 0; same && i < auth.len; i++)
            same = lower(a[i]) == lower(o[i]);
        if (!same)
            return fail(why, LZ_HTTP_R_HOST_MISMATCH);
    }
    h.framing = st.te ? LZ_HTTP_BODY_CHUNKED : st.length ? LZ_HTTP_BODY_LENGTH : LZ_HTTP_BODY_NONE;
    if (h.framing != LZ_HTTP_BODY_LENGTH)
        h.content_length = 0;
    h.used = off;
    *ret = h;
    return 0;
}

int lz_http_field_find(const struct lz_http_head *h, const uint8_t *buf, const char *name, unsigned from) {
    for (unsigned i = from; i < h->n_fields; i++)
        if (eq_ci(buf + h->fields[i].name.off, h->fields[i].name.len, name))
            return (int)i;
    return -ENOENT;
}

unsigned lz_http_field_count(const struct lz_http_head *h, const uint8_t *buf, const char *name) {
    unsigned c = 0;
    for (unsigned i = 0; i < h->n_fields; i++)
        c += eq_ci(buf + h->fields[i].name.off, h->fields[i].name.len, name);
    return c;
}

bool lz_http_find_placeholder(const uint8_t *buf, size_t len, const char *placeholder, size_t *ret_off) {
    size_t n = strlen(placeholder);
    if (n == 0 || n > len)
        return false;
    const uint8_t *p = buf, *last = buf + (len - n); /* the last place a match can start */
    while (p <= last && (p = memchr(p, (unsigned char)placeholder[0], (size_t)(last - p) + 1))) {
        if (memcmp(p, placeholder, n) == 0) {
            if (ret_off)
                *ret_off = (size_t)(p - buf);
            return true;
        }
        p++;
    }
    return false;
}
