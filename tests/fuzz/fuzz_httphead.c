/* libFuzzer target: the HTTP/1.1 request-head reader (httphead.c). The
 * input is parsed as the start of a request stream (the corpus holds
 * captured requests, heads and bodies). Checked: the result is one of the
 * three, with a reason or a bound on the bytes needed; what parses is
 * sane (every span inside the head, names that are tokens followed by
 * their colon, values without CR or LF, the Host field where host says,
 * a framing that matches the fields) and parses the same from a buffer
 * of exactly the bytes it used; a prefix of a stream that parses or waits
 * always waits, asking for no more than the whole; a stream that is
 * refused has no prefix that parses. Then what the gate will do: one
 * ordinary field's value replaced by another, the head still parses, with
 * the new value where the old one was; and the placeholder search finds
 * every needle taken from the input, at or before where it was taken. */
#include "httphead.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool span_eq(struct lz_http_span a, struct lz_http_span b) { return a.off == b.off && a.len == b.len; }

static bool same(const struct lz_http_head *a, const struct lz_http_head *b) {
    if (a->used != b->used || !span_eq(a->method, b->method) || !span_eq(a->target, b->target) ||
        !span_eq(a->path, b->path) || !span_eq(a->host, b->host) || a->form != b->form || a->framing != b->framing ||
        a->content_length != b->content_length || a->keep_alive != b->keep_alive ||
        a->expect_continue != b->expect_continue || a->n_fields != b->n_fields)
        return false;
    for (unsigned i = 0; i < a->n_fields; i++)
        if (!span_eq(a->fields[i].name, b->fields[i].name) || !span_eq(a->fields[i].value, b->fields[i].value))
            return false;
    return true;
}

static bool in(struct lz_http_span s, size_t used) { return s.off <= used && s.len <= used - s.off; }

static bool tchar(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static void check_sane(const uint8_t *b, const struct lz_http_head *h) {
    size_t u = h->used;
    if (u > LZ_HTTP_HEAD_MAX || u < 4 || memcmp(b + u - 4, "\r\n\r\n", 4) != 0)
        __builtin_trap();
    if (!in(h->method, u) || !in(h->target, u) || !in(h->path, u) || !in(h->host, u) || h->method.off != 0 ||
        h->method.len == 0 || h->target.len == 0 || h->host.len == 0)
        __builtin_trap();
    if (b[h->method.len] != ' ' || h->target.off != h->method.len + 1 ||
        h->path.off + h->path.len != h->target.off + h->target.len || h->path.off < h->target.off)
        __builtin_trap();
    if (h->form == LZ_HTTP_FORM_ORIGIN         ? b[h->target.off] != '/'
            : h->form == LZ_HTTP_FORM_ASTERISK ? h->target.len != 1 || b[h->target.off] != '*'
                                               : h->form != LZ_HTTP_FORM_ABSOLUTE)
        __builtin_trap();
    if (h->framing != LZ_HTTP_BODY_LENGTH && h->content_length != 0)
        __builtin_trap();
    if (h->n_fields < 1 || h->n_fields > LZ_HTTP_FIELDS_MAX)
        __builtin_trap();
    size_t prev = 0;
    for (unsigned i = 0; i < h->n_fields; i++) {
        const struct lz_http_field *f = &h->fields[i];
        if (!in(f->name, u) || !in(f->value, u) || f->name.len == 0 || f->name.off <= prev ||
            b[f->name.off - 1] != '\n' || b[f->name.off + f->name.len] != ':' || f->value.off <= f->name.off)
            __builtin_trap();
        for (size_t k = 0; k < f->name.len; k++)
            if (!tchar(b[f->name.off + k]))
                __builtin_trap();
        for (size_t k = 0; k < f->value.len; k++) {
            uint8_t c = b[f->value.off + k];
            if (c == '\r' || c == '\n' || c == '\0' || c == 0x7f)
                __builtin_trap();
        }
        if (f->value.len &&
            (b[f->value.off] == ' ' || b[f->value.off] == '\t' || b[f->value.off + f->value.len - 1] == ' ' ||
             b[f->value.off + f->value.len - 1] == '\t'))
            __builtin_trap();
        prev = f->name.off;
    }
    int hi = lz_http_field_find(h, b, "host", 0);
    if (hi < 0 || lz_http_field_count(h, b, "HOST") != 1 || h->fields[hi].value.off != h->host.off ||
        h->fields[hi].value.len != h->host.len)
        __builtin_trap();
    unsigned te = lz_http_field_count(h, b, "transfer-encoding"), cl = lz_http_field_count(h, b, "content-length");
    if (te > 1 || cl > 1 || (te && cl) ||
        h->framing !=
            (te       ? LZ_HTTP_BODY_CHUNKED
                 : cl ? LZ_HTTP_BODY_LENGTH
                      : LZ_HTTP_BODY_NONE))
        __builtin_trap();
    if (lz_http_field_count(h, b, "upgrade") || lz_http_field_find(h, b, "http2-settings", 0) != -ENOENT)
        __builtin_trap();
}

/* A prefix of k bytes of a stream whose whole (r, need/used: upto) is
 * known. */
static void check_prefix(const uint8_t *data, size_t k, int r, size_t upto) {
    struct lz_http_head h;
    enum lz_http_reason why = LZ_HTTP_OK;
    size_t need = 0;
    int p = lz_http_head_parse(data, k, &h, &need, &why);
    if (r == -EBADMSG) {
        if (p == 0)
            __builtin_trap();
        return;
    }
    if (p != -EAGAIN || need <= k || need > upto)
        __builtin_trap();
}

/* The fields whose value the framing rules read. */
static bool special(const uint8_t *name, size_t n) {
    static const char *const names[] = { "host",    "content-length", "transfer-encoding", "expect",
                                         "upgrade", "connection",     "http2-settings" };
    if (memchr(name, '_', n))
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp((const char *)name, names[i], n) == 0)
            return true;
    return false;
}

/* The gate's rewrite: field i's value replaced, the rest copied. */
static void check_rewrite(const uint8_t *b, const struct lz_http_head *h, unsigned i) {
    static const char cred[] = "Bearer sk-test-0123456789";
    const struct lz_http_field *f = &h->fields[i];
    if (special(b + f->name.off, f->name.len))
        return;
    size_t n = h->used - f->value.len + sizeof cred - 1;
    if (n > LZ_HTTP_HEAD_MAX)
        return;
    uint8_t *o = malloc(n);
    if (!o)
        return;
    memcpy(o, b, f->value.off);
    memcpy(o + f->value.off, cred, sizeof cred - 1);
    memcpy(o + f->value.off + sizeof cred - 1, b + f->value.off + f->value.len, h->used - f->value.off - f->value.len);
    struct lz_http_head *h2 = malloc(sizeof *h2);
    if (h2) {
        if (lz_http_head_parse(o, n, h2, NULL, NULL) != 0 || h2->used != n || h2->n_fields != h->n_fields ||
            h2->fields[i].value.off != f->value.off || h2->fields[i].value.len != sizeof cred - 1 ||
            h2->framing != h->framing || h2->content_length != h->content_length)
            __builtin_trap();
        free(h2);
    }
    free(o);
}

static void check_find(const uint8_t *data, size_t size) {
    if (size < 4)
        return;
    size_t at = data[1] * 31u % size, len = 1 + data[2] % 8;
    if (len > size - at)
        len = size - at;
    char needle[16];
    memcpy(needle, data + at, len);
    needle[len] = '\0';
    size_t nl = strlen(needle), found = (size_t)-1;
    bool ok = lz_http_find_placeholder(data, size, needle, &found);
    if (nl == 0) {
        if (ok)
            __builtin_trap();
        return;
    }
    if (!ok || found > at || memcmp(data + found, needle, nl) != 0)
        __builtin_trap();
    for (size_t k = 0; k < found; k++)
        if (memcmp(data + k, needle, nl) == 0)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_HTTP_HEAD_MAX + 1024)
        return 0;
    static struct lz_http_head h, h2;
    enum lz_http_reason why = LZ_HTTP_OK;
    size_t need = 0, upto = 0;
    int r = lz_http_head_parse(data, size, &h, &need, &why);
    if (r == 0) {
        if (h.used > size)
            __builtin_trap();
        check_sane(data, &h);
        /* From a buffer of exactly the head: nothing read past it. */
        uint8_t *head = malloc(h.used);
        if (!head)
            return 0;
        memcpy(head, data, h.used);
        if (lz_http_head_parse(head, h.used, &h2, &need, &why) != 0 || !same(&h, &h2))
            __builtin_trap();
        check_rewrite(head, &h, size > 1 ? data[size - 1] % h.n_fields : 0);
        free(head);
        upto = h.used;
    } else if (r == -EAGAIN) {
        if (need <= size || need > LZ_HTTP_HEAD_MAX)
            __builtin_trap();
        upto = need;
    } else if (r != -EBADMSG || why == LZ_HTTP_OK || why >= LZ_HTTP_R_MAX) {
        __builtin_trap();
    }
    /* A few prefixes, not all: the work per input stays linear. */
    size_t end = r == 0 ? h.used : size;
    if (end > 0) {
        check_prefix(data, end - 1, r, upto);
        check_prefix(data, end / 2, r, upto);
        check_prefix(data, (size_t)data[0] * 7 % end, r, upto);
    }
    check_find(data, size);
    return 0;
}
