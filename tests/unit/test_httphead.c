/* Unit tests for the HTTP/1.1 request-head reader (httphead.c): heads
 * captured from curl, Node's fetch (undici), Python requests and git's
 * smart-HTTP push on loopback (tests/unit/data/http/capture.py), heads
 * written by hand, the request smuggling tricks of the literature, every
 * prefix of each (fed byte by byte) and every refusal with a well-formed
 * control next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "httphead.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reasons some test has seen: test_reasons checks that all were. */
static bool seen[LZ_HTTP_R_MAX];

static struct lz_http_head parse_ok(const uint8_t *b, size_t n) {
    static struct lz_http_head h;
    enum lz_http_reason why = LZ_HTTP_OK;
    size_t need = 0;
    int r = lz_http_head_parse(b, n, &h, &need, &why);
    if (r != 0)
        fail_msg("head refused (%d): %s", r, r == -EAGAIN ? "need more" : lz_http_reason_str(why));
    assert_true(h.used <= n);
    return h;
}

static bool span_eq(struct lz_http_span a, struct lz_http_span b) { return a.off == b.off && a.len == b.len; }

static void assert_same(const struct lz_http_head *a, const struct lz_http_head *b) {
    assert_int_equal(a->used, b->used);
    assert_true(span_eq(a->method, b->method) && span_eq(a->target, b->target) && span_eq(a->path, b->path) &&
                span_eq(a->host, b->host));
    assert_int_equal(a->form, b->form);
    assert_int_equal(a->framing, b->framing);
    assert_int_equal(a->content_length, b->content_length);
    assert_int_equal(a->keep_alive, b->keep_alive);
    assert_int_equal(a->expect_continue, b->expect_continue);
    assert_int_equal(a->n_fields, b->n_fields);
    for (unsigned i = 0; i < a->n_fields; i++)
        assert_true(span_eq(a->fields[i].name, b->fields[i].name) && span_eq(a->fields[i].value, b->fields[i].value));
}

/* Fed one byte at a time: -EAGAIN until the head is whole, asking for
 * more than there is and no more than the head; then the same answer
 * from the head alone as from all of b. ret, *why untouched while
 * waiting. */
static struct lz_http_head fed(const uint8_t *b, size_t n) {
    struct lz_http_head whole = parse_ok(b, n);
    for (size_t k = 0; k < whole.used; k++) {
        struct lz_http_head h;
        memset(&h, 0x5a, sizeof h);
        enum lz_http_reason why = LZ_HTTP_OK;
        size_t need = 0;
        int r = lz_http_head_parse(b, k, &h, &need, &why);
        if (r != -EAGAIN)
            fail_msg("prefix %zu of %zu: %d (%s)", k, whole.used, r, lz_http_reason_str(why));
        assert_true(need > k && need <= whole.used && need <= LZ_HTTP_HEAD_MAX);
        assert_int_equal(why, LZ_HTTP_OK);
        assert_int_equal(h.n_fields, 0x5a5a5a5a);
    }
    struct lz_http_head alone = parse_ok(b, whole.used);
    assert_same(&alone, &whole);
    return whole;
}

static struct lz_http_head ok_s(const char *s) { return fed((const uint8_t *)s, strlen(s)); }

/* A refusal: ret and need untouched, a known reason. Fed byte by byte,
 * the prefixes wait until one byte makes the head invalid; from there
 * every longer prefix is refused for the same reason. */
static enum lz_http_reason refused(const uint8_t *b, size_t n) {
    struct lz_http_head h;
    memset(&h, 0x5a, sizeof h);
    enum lz_http_reason why = LZ_HTTP_OK;
    size_t need = 77;
    assert_int_equal(lz_http_head_parse(b, n, &h, &need, &why), -EBADMSG);
    assert_int_equal(h.n_fields, 0x5a5a5a5a);
    assert_int_equal(need, 77);
    assert_true(why > LZ_HTTP_OK && why < LZ_HTTP_R_MAX);
    assert_string_not_equal(lz_http_reason_str(why), "unknown reason");
    if (n <= 4096) {
        bool bad = false;
        for (size_t k = 0; k < n; k++) {
            enum lz_http_reason w = LZ_HTTP_OK;
            int r = lz_http_head_parse(b, k, &h, &need, &w);
            if (r == -EBADMSG) {
                bad = true;
                if (w != why)
                    fail_msg("prefix %zu of %zu: %s, the whole: %s", k, n, lz_http_reason_str(w),
                             lz_http_reason_str(why));
            } else if (r != -EAGAIN || bad) {
                fail_msg("prefix %zu of %zu: %d after a refusal", k, n, r);
            }
        }
    }
    seen[why] = true;
    return why;
}

static enum lz_http_reason refused_s(const char *s) { return refused((const uint8_t *)s, strlen(s)); }

/* A POST with Host and the given field lines: refused, or parsed. */
static enum lz_http_reason with_fields(const char *fields) {
    static char b[LZ_HTTP_HEAD_MAX];
    snprintf(b, sizeof b, "POST /v1/messages HTTP/1.1\r\nHost: api.allowed.test\r\n%s\r\n", fields);
    return refused_s(b);
}
static struct lz_http_head fields_ok(const char *fields) {
    static char b[LZ_HTTP_HEAD_MAX];
    snprintf(b, sizeof b, "POST /v1/messages HTTP/1.1\r\nHost: api.allowed.test\r\n%s\r\n", fields);
    return ok_s(b);
}

/* A span of buf as a string, for the asserts. */
static const char *str(const uint8_t *buf, struct lz_http_span s) {
    static char out[4][512];
    static unsigned k;
    char *o = out[k++ % 4];
    assert_true(s.len < sizeof out[0]);
    memcpy(o, buf + s.off, s.len);
    o[s.len] = '\0';
    return o;
}

/* The value of the only field named name. */
static const char *value(const uint8_t *buf, const struct lz_http_head *h, const char *name) {
    int i = lz_http_field_find(h, buf, name, 0);
    assert_true(i >= 0);
    assert_int_equal(lz_http_field_count(h, buf, name), 1);
    return str(buf, h->fields[i].value);
}

static size_t captured(const char *file, uint8_t *buf, size_t cap) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/http/%s", src ? src : ".", file);
    FILE *f = fopen(path, "rbe");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    return n;
}

/* Where the head of a captured request ends. */
static size_t head_end(const uint8_t *b, size_t n) {
    const uint8_t *e = memmem(b, n, "\r\n\r\n", 4);
    assert_non_null(e);
    return (size_t)(e - b) + 4;
}

static void test_real_heads(void **state) {
    (void)state;
    static uint8_t b[8192];
    size_t n;
    struct lz_http_head h;

    /* curl -H 'Authorization: Bearer {}' http://.../v1/models?limit=2 */
    n = captured("curl-get.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.used, n);
    assert_string_equal(str(b, h.method), "GET");
    assert_string_equal(str(b, h.target), "/v1/models?limit=2");
    assert_string_equal(str(b, h.path), "/v1/models?limit=2");
    assert_int_equal(h.form, LZ_HTTP_FORM_ORIGIN);
    assert_memory_equal(str(b, h.host), "127.0.0.1:", 10);
    assert_int_equal(h.framing, LZ_HTTP_BODY_NONE);
    assert_int_equal(h.content_length, 0);
    assert_true(h.keep_alive);
    assert_false(h.expect_continue);
    assert_int_equal(h.n_fields, 4);
    assert_string_equal(str(b, h.fields[0].name), "Host");
    assert_string_equal(value(b, &h, "authorization"), "Bearer {}");
    assert_string_equal(value(b, &h, "User-Agent"), "curl/7.88.1");
    assert_int_equal(lz_http_field_find(&h, b, "x-api-key", 0), -ENOENT);

    /* curl -H 'x-api-key: {}' -d '{...}': the body is not read. */
    n = captured("curl-post.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.used, head_end(b, n));
    assert_string_equal(str(b, h.method), "POST");
    assert_int_equal(h.framing, LZ_HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, n - h.used);
    assert_string_equal(value(b, &h, "X-Api-Key"), "{}");
    size_t at = 0;
    assert_true(lz_http_find_placeholder(b, h.used, "{}", &at));
    assert_int_equal(at, h.fields[lz_http_field_find(&h, b, "x-api-key", 0)].value.off);
    /* ...and the placeholder is nowhere else: not in the body. */
    assert_false(lz_http_find_placeholder(b + h.used, n - h.used, "{}", NULL));

    /* Node's fetch (undici): lower-case names, Connection: keep-alive. */
    n = captured("undici-post.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.used, head_end(b, n));
    assert_string_equal(str(b, h.fields[0].name), "host");
    assert_memory_equal(str(b, h.host), "127.0.0.1:", 10);
    assert_int_equal(h.framing, LZ_HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, n - h.used);
    assert_true(h.keep_alive);
    assert_string_equal(value(b, &h, "x-api-key"), "{}");
    assert_string_equal(value(b, &h, "anthropic-version"), "2023-06-01");
    assert_int_equal(h.n_fields, 11);

    /* fetch with a ReadableStream body: chunked. */
    n = captured("undici-chunked.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.framing, LZ_HTTP_BODY_CHUNKED);
    assert_int_equal(h.content_length, 0);
    assert_string_equal(value(b, &h, "authorization"), "Bearer {}");
    assert_memory_equal(b + h.used, "a\r\n{\"part\":1}", 13);

    /* requests.post(json=..., headers={'Authorization': 'Bearer {}'}) */
    n = captured("requests-post.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.framing, LZ_HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, 30);
    assert_int_equal(h.content_length, n - h.used);
    assert_string_equal(value(b, &h, "Authorization"), "Bearer {}");
    assert_string_equal(value(b, &h, "accept-encoding"), "gzip, deflate");

    /* requests.post(data=<generator>): chunked. */
    n = captured("requests-chunked.bin", b, sizeof b);
    h = fed(b, n);
    assert_int_equal(h.framing, LZ_HTTP_BODY_CHUNKED);
    assert_memory_equal(b + h.used, "3\r\none\r\n", 8);

    /* git push over smart HTTP: the POST of the command list and pack. */
    static const char *const pushes[] = { "git-push.bin", "git-push-options.bin", "git-push-sha256.bin" };
    for (size_t i = 0; i < sizeof pushes / sizeof pushes[0]; i++) {
        n = captured(pushes[i], b, sizeof b);
        h = fed(b, n);
        assert_string_equal(str(b, h.method), "POST");
        assert_string_equal(str(b, h.target), "/repo.git/git-receive-pack");
        assert_int_equal(h.framing, LZ_HTTP_BODY_LENGTH);
        assert_int_equal(h.content_length, n - h.used);
        assert_string_equal(value(b, &h, "content-type"), "application/x-git-receive-pack-request");
        assert_string_equal(value(b, &h, "user-agent"), "git/2.39.5");
    }

    /* A second request after the first's body is the caller's to find:
     * the parse stops at the first head. */
    static const char two[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    h = parse_ok((const uint8_t *)two, sizeof two - 1);
    assert_int_equal(h.used, 28);
    h = parse_ok((const uint8_t *)two + h.used, sizeof two - 1 - h.used);
    assert_string_equal(str((const uint8_t *)two + 28, h.target), "/b");
}

static void test_request_line(void **state) {
    (void)state;
    static const uint8_t *b;
    struct lz_http_head h;

    /* The methods are tokens, case kept; the path any visible ASCII but '#'. */
    h = ok_s("DELETE /v1/files/f-1?x=|{^}&y=%zz HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(h.method.len, 6);
    h = ok_s("get / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(h.method.len, 3);
    assert_int_equal(refused_s("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_METHOD);
    assert_int_equal(refused_s(" / HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_METHOD);
    /* RFC 9112 §2.2's leading empty line is not skipped. */
    assert_int_equal(refused_s("\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_METHOD);
    assert_int_equal(refused_s("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_REQUEST_LINE);
    assert_int_equal(refused_s("GET /\t HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET\r\nHost: h\r\n\r\n"), LZ_HTTP_R_REQUEST_LINE);
    assert_int_equal(refused_s("GET /\r\nHost: h\r\n\r\n"), LZ_HTTP_R_REQUEST_LINE); /* HTTP/0.9 */
    assert_int_equal(refused_s("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / x HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET /#frag HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    static const char nul[] = "GET /\0 HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_int_equal(refused((const uint8_t *)nul, sizeof nul - 1), LZ_HTTP_R_TARGET);

    /* Versions: 1.1 only. */
    assert_int_equal(refused_s("GET / HTTP/1.0\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / HTTP/1.0\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / http/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / HTTP/1.10\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / HTTP/1.\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    assert_int_equal(refused_s("GET / HTTP/2\r\nHost: h\r\n\r\n"), LZ_HTTP_R_VERSION);
    /* The HTTP/2 preface (prior knowledge, h2c): refused at "PRI ". */
    assert_int_equal(refused_s("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), LZ_HTTP_R_H2_PREFACE);
    assert_int_equal(refused_s("PRI / HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_H2_PREFACE);
    assert_int_equal(refused_s("PRI "), LZ_HTTP_R_H2_PREFACE);
    h = ok_s("PRIX / HTTP/1.1\r\nHost: h\r\n\r\n"); /* another method */

    /* CONNECT (authority-form), refused at once; other methods with an
     * authority-form target are refused for their target. */
    assert_int_equal(refused_s("CONNECT api.allowed.test:443 HTTP/1.1\r\nHost: api.allowed.test:443\r\n\r\n"),
                     LZ_HTTP_R_CONNECT);
    assert_int_equal(refused_s("GET api.allowed.test:443 HTTP/1.1\r\nHost: api.allowed.test:443\r\n\r\n"),
                     LZ_HTTP_R_TARGET);

    /* asterisk-form: OPTIONS only, and alone. */
    h = ok_s("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(h.form, LZ_HTTP_FORM_ASTERISK);
    assert_int_equal(h.path.len, 0);
    assert_int_equal(refused_s("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_ASTERISK);
    assert_int_equal(refused_s("OPTIONS */x HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);

    /* absolute-form: its authority must be Host (case ignored). */
    static const char abs1[] =
        "GET http://Api.Allowed.Test:8080/v1/x?y HTTP/1.1\r\nHost: api.allowed.test:8080\r\n\r\n";
    b = (const uint8_t *)abs1;
    h = ok_s(abs1);
    assert_int_equal(h.form, LZ_HTTP_FORM_ABSOLUTE);
    assert_string_equal(str(b, h.target), "http://Api.Allowed.Test:8080/v1/x?y");
    assert_string_equal(str(b, h.path), "/v1/x?y");
    assert_string_equal(str(b, h.host), "api.allowed.test:8080");
    static const char abs2[] = "POST HTTPS://h HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
    b = (const uint8_t *)abs2;
    h = ok_s(abs2);
    assert_int_equal(h.path.len, 0);
    assert_int_equal(h.path.off, 14);
    h = ok_s("GET http://h?q HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(h.path.len, 2);
    /* The smuggling form: the gate checks Host, the server serves the
     * target's authority. */
    assert_int_equal(refused_s("GET http://evil.test/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"),
                     LZ_HTTP_R_HOST_MISMATCH);
    assert_int_equal(refused_s("GET http://api.allowed.test:443/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"),
                     LZ_HTTP_R_HOST_MISMATCH);
    assert_int_equal(refused_s("GET http://api.allowed.test/ HTTP/1.1\r\n\r\n"), LZ_HTTP_R_HOST_MISSING);
    assert_int_equal(refused_s("GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET http:/h/ HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET http:// HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET http HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
    assert_int_equal(refused_s("GET http://h\"/ HTTP/1.1\r\nHost: h\r\n\r\n"), LZ_HTTP_R_TARGET);
}

static void test_fields(void **state) {
    (void)state;
    struct lz_http_head h;
    static const char ows[] = "GET / HTTP/1.1\r\nHost:h\r\nX-A: \t a  b \t\r\nX-B:\r\nX-C:   \r\nx-a:2\r\n\r\n";
    const uint8_t *b = (const uint8_t *)ows;
    h = ok_s(ows);
    assert_int_equal(h.n_fields, 5);
    assert_string_equal(str(b, h.host), "h");
    assert_string_equal(str(b, h.fields[1].value), "a  b");
    assert_int_equal(h.fields[2].value.len, 0);
    assert_int_equal(h.fields[2].value.off, h.fields[2].name.off + 4);
    assert_int_equal(h.fields[3].value.len, 0);
    assert_int_equal(lz_http_field_count(&h, b, "X-A"), 2);
    assert_int_equal(lz_http_field_find(&h, b, "x-A", 0), 1);
    assert_int_equal(lz_http_field_find(&h, b, "x-A", 2), 4);
    assert_int_equal(lz_http_field_find(&h, b, "x-A", 5), -ENOENT);
    assert_int_equal(lz_http_field_find(&h, b, "x-", 0), -ENOENT);
    assert_int_equal(lz_http_field_count(&h, b, "x-d"), 0);
    /* obs-text in a value is kept. */
    h = fields_ok("X-Name: caf\xc3\xa9\r\n");
    assert_int_equal(h.fields[1].value.len, 5);
    /* Token characters in names. */
    (void)fields_ok("X-!#$%&'*+.^_`|~09az: v\r\n");

    /* obs-fold, and whitespace before the first field. */
    assert_int_equal(with_fields("X-A: a\r\n b\r\n"), LZ_HTTP_R_OBS_FOLD);
    assert_int_equal(with_fields("X-A: a\r\n\tb\r\n"), LZ_HTTP_R_OBS_FOLD);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), LZ_HTTP_R_OBS_FOLD);
    /* Content-Length folded over two lines (a reader that unfolds sees
     * "Content-Length: 5 0"). */
    assert_int_equal(with_fields("Content-Length: 5\r\n 0\r\n"), LZ_HTTP_R_OBS_FOLD);
    /* Whitespace before the colon: one reader's "Transfer-Encoding" is
     * another's unknown field. */
    assert_int_equal(with_fields("Transfer-Encoding : chunked\r\n"), LZ_HTTP_R_SPACE_COLON);
    assert_int_equal(with_fields("Content-Length\t: 3\r\n"), LZ_HTTP_R_SPACE_COLON);
    assert_int_equal(with_fields("X A: b\r\n"), LZ_HTTP_R_SPACE_COLON);
    /* Names. */
    assert_int_equal(with_fields(": b\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("X-A b\r\n"), LZ_HTTP_R_SPACE_COLON);
    assert_int_equal(with_fields("X-A\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("X(A): b\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("X-\xc3\xa9: b\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("Content_Length: 3\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("transfer_encoding: chunked\r\n"), LZ_HTTP_R_FIELD_NAME);
    assert_int_equal(with_fields("HTTP2_Settings: x\r\n"), LZ_HTTP_R_FIELD_NAME);
    (void)fields_ok("X_Content_Length: 3\r\n");
    /* Values: no control but HTAB. */
    static const char nul[] = "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n";
    assert_int_equal(refused((const uint8_t *)nul, sizeof nul - 1), LZ_HTTP_R_FIELD_VALUE);
    assert_int_equal(with_fields("X-A: a\x7f\r\n"), LZ_HTTP_R_FIELD_VALUE);
    assert_int_equal(with_fields("X-A: a\x1b[0m\r\n"), LZ_HTTP_R_FIELD_VALUE);
    assert_int_equal(with_fields("X-A: a\x0b\r\n"), LZ_HTTP_R_FIELD_VALUE);

    /* Line ends: CRLF only. */
    assert_int_equal(refused_s("GET / HTTP/1.1\nHost: h\r\n\r\n"), LZ_HTTP_R_BARE_LF);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: h\n\r\n"), LZ_HTTP_R_BARE_LF);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: h\r\n\n"), LZ_HTTP_R_BARE_LF);
    assert_int_equal(with_fields("X-A: a\nTransfer-Encoding: chunked\r\n"), LZ_HTTP_R_BARE_LF);
    assert_int_equal(refused_s("GET / HTTP/1.1\rHost: h\r\n\r\n"), LZ_HTTP_R_BARE_CR);
    assert_int_equal(with_fields("X-A: a\rb\r\n"), LZ_HTTP_R_BARE_CR);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: h\r\n\rX"), LZ_HTTP_R_BARE_CR);
}

static void test_framing(void **state) {
    (void)state;
    struct lz_http_head h;

    h = fields_ok("Content-Length: 0\r\n");
    assert_int_equal(h.framing, LZ_HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, 0);
    h = fields_ok("Content-Length:  007 \r\n");
    assert_int_equal(h.content_length, 7);
    h = fields_ok("Content-Length: 999999999999999999\r\n");
    assert_int_equal(h.content_length, 999999999999999999ull);
    assert_int_equal(with_fields("Content-Length: 1000000000000000000\r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: 99999999999999999999999\r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: \r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: +5\r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: -1\r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: 0x10\r\n"), LZ_HTTP_R_LENGTH);
    assert_int_equal(with_fields("Content-Length: 5 5\r\n"), LZ_HTTP_R_LENGTH);
    /* A list (RFC 9110 §8.6 lets a recipient take "5, 5" as 5): refused. */
    assert_int_equal(with_fields("Content-Length: 5, 5\r\n"), LZ_HTTP_R_LENGTH);
    /* Two fields: different values (the classic CL.CL), and the same
     * value too (RFC 9112 §6.3 allows either; this reader refuses). */
    assert_int_equal(with_fields("Content-Length: 5\r\nContent-Length: 6\r\n"), LZ_HTTP_R_LENGTH_DUP);
    assert_int_equal(with_fields("Content-Length: 5\r\ncontent-length: 5\r\n"), LZ_HTTP_R_LENGTH_DUP);

    h = fields_ok("Transfer-Encoding: chunked\r\n");
    assert_int_equal(h.framing, LZ_HTTP_BODY_CHUNKED);
    h = fields_ok("transfer-encoding:\tChunKed \r\n");
    assert_int_equal(h.framing, LZ_HTTP_BODY_CHUNKED);
    /* TE (the response's codings) is not Transfer-Encoding. */
    h = fields_ok("TE: chunked\r\n");
    assert_int_equal(h.framing, LZ_HTTP_BODY_NONE);
    assert_int_equal(with_fields("Transfer-Encoding: identity\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: gzip, chunked\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: chunked, chunked\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: chunked, identity\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: xchunked\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: \"chunked\"\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: \r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), LZ_HTTP_R_TE);
    assert_int_equal(with_fields("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), LZ_HTTP_R_TE);
    /* CL.TE and TE.CL. */
    assert_int_equal(with_fields("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n"), LZ_HTTP_R_LENGTH_AND_TE);
    assert_int_equal(with_fields("Transfer-Encoding: chunked\r\nContent-Length: 6\r\n"), LZ_HTTP_R_LENGTH_AND_TE);
    assert_int_equal(with_fields("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n"), LZ_HTTP_R_LENGTH_AND_TE);

    /* Host. */
    h = ok_s("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
    assert_int_equal(h.host.len, 10);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\n\r\n"), LZ_HTTP_R_HOST_MISSING);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nX-Host: h\r\n\r\n"), LZ_HTTP_R_HOST_MISSING);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), LZ_HTTP_R_HOST_DUP);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"), LZ_HTTP_R_HOST_DUP);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost:\r\n\r\n"), LZ_HTTP_R_HOST);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), LZ_HTTP_R_HOST);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: u@h\r\n\r\n"), LZ_HTTP_R_HOST);
    assert_int_equal(refused_s("GET / HTTP/1.1\r\nHost: h/x\r\n\r\n"), LZ_HTTP_R_HOST);
    /* The sub-delims of a reg-name are allowed: the gate compares the
     * name with its own. */
    (void)ok_s("GET / HTTP/1.1\r\nHost: h,g\r\n\r\n");

    /* Expect. */
    h = fields_ok("Content-Length: 3\r\nExpect: 100-Continue\r\n");
    assert_true(h.expect_continue);
    assert_int_equal(with_fields("Expect: 100-continue, x\r\n"), LZ_HTTP_R_EXPECT);
    assert_int_equal(with_fields("Expect: 102-processing\r\n"), LZ_HTTP_R_EXPECT);
    assert_int_equal(with_fields("Expect: 100-continue\r\nExpect: 100-continue\r\n"), LZ_HTTP_R_EXPECT);

    /* Upgrades: h2c, WebSocket. */
    assert_int_equal(with_fields("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"), LZ_HTTP_R_UPGRADE);
    assert_int_equal(with_fields("Upgrade: websocket\r\n"), LZ_HTTP_R_UPGRADE);
    assert_int_equal(with_fields("HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"), LZ_HTTP_R_UPGRADE);
    assert_int_equal(with_fields("Connection: keep-alive,UPGRADE\r\n"), LZ_HTTP_R_UPGRADE);

    /* Connection. */
    h = fields_ok("Connection: close\r\n");
    assert_false(h.keep_alive);
    h = fields_ok("Connection: keep-alive\r\nConnection: , TE ,, Close\r\n");
    assert_false(h.keep_alive);
    h = fields_ok("Connection: keep-alive, x-hop\r\nConnection:\r\n");
    assert_true(h.keep_alive);
    assert_int_equal(with_fields("Connection: close;x\r\n"), LZ_HTTP_R_CONNECTION);
    assert_int_equal(with_fields("Connection: close keep-alive\r\n"), LZ_HTTP_R_CONNECTION);
    /* A hop-by-hop framing field: a proxy before the server strips it. */
    assert_int_equal(with_fields("Content-Length: 3\r\nConnection: Content-Length\r\n"), LZ_HTTP_R_CONNECTION);
    assert_int_equal(with_fields("Connection: close, transfer-encoding\r\n"), LZ_HTTP_R_CONNECTION);
    assert_int_equal(with_fields("Connection: host\r\n"), LZ_HTTP_R_CONNECTION);
}

/* A head of exactly n bytes (n >= 29): the request line, Host, and
 * filler fields of at most LZ_HTTP_LINE_MAX bytes, then the empty line. */
static size_t big_head(uint8_t *b, size_t n, unsigned *ret_fields) {
    static const char start[] = "GET / HTTP/1.1\r\nHost: h\r\n";
    size_t o = sizeof start - 1, left = n - o - 2; /* for the filler lines with their CRLF */
    memcpy(b, start, o);
    unsigned f = 1;
    while (left > 0) {
        size_t line = left - 2;
        if (line > LZ_HTTP_LINE_MAX) {
            line = LZ_HTTP_LINE_MAX;
            if (left - (line + 2) < 4) /* no room for the next line's "X:" CRLF */
                line -= 4;
        }
        memcpy(b + o, "X:", 2);
        memset(b + o + 2, 'v', line - 2);
        memcpy(b + o + line, "\r\n", 2);
        o += line + 2;
        left -= line + 2;
        f++;
    }
    memcpy(b + o, "\r\n", 2);
    *ret_fields = f;
    return o + 2;
}

static void test_bounds(void **state) {
    (void)state;
    static uint8_t b[LZ_HTTP_HEAD_MAX + 1024];
    static char s[LZ_HTTP_LINE_MAX + 256];
    struct lz_http_head h;
    unsigned nf;

    /* The head: LZ_HTTP_HEAD_MAX bytes pass, one more does not. */
    assert_int_equal(big_head(b, LZ_HTTP_HEAD_MAX, &nf), LZ_HTTP_HEAD_MAX);
    h = parse_ok(b, LZ_HTTP_HEAD_MAX);
    assert_int_equal(h.used, LZ_HTTP_HEAD_MAX);
    assert_int_equal(h.n_fields, nf);
    /* Every prefix waits, none asks for more than the bound. */
    for (size_t k = 0; k < LZ_HTTP_HEAD_MAX; k += 97) {
        size_t need = 0;
        assert_int_equal(lz_http_head_parse(b, k, &h, &need, NULL), -EAGAIN);
        assert_true(need > k && need <= LZ_HTTP_HEAD_MAX);
    }
    assert_int_equal(big_head(b, LZ_HTTP_HEAD_MAX + 1, &nf), LZ_HTTP_HEAD_MAX + 1);
    assert_int_equal(refused(b, LZ_HTTP_HEAD_MAX + 1), LZ_HTTP_R_TOO_LONG);
    /* ...and is refused as soon as no head within the bound can come:
     * its bytes before the empty line. */
    assert_int_equal(refused(b, LZ_HTTP_HEAD_MAX - 1), LZ_HTTP_R_TOO_LONG);
    assert_int_equal(refused(b, LZ_HTTP_HEAD_MAX + 512), LZ_HTTP_R_TOO_LONG);

    /* A field line of LZ_HTTP_LINE_MAX bytes, and one more. */
    memset(s, 0, sizeof s);
    memcpy(s, "X-Long: ", 8);
    memset(s + 8, 'a', LZ_HTTP_LINE_MAX - 8);
    memcpy(s + LZ_HTTP_LINE_MAX, "\r\n", 2);
    h = fields_ok(s);
    assert_int_equal(h.fields[1].value.len, LZ_HTTP_LINE_MAX - 8);
    memset(s + 8, 'a', LZ_HTTP_LINE_MAX - 7);
    memcpy(s + LZ_HTTP_LINE_MAX + 1, "\r\n", 3);
    assert_int_equal(with_fields(s), LZ_HTTP_R_LINE_TOO_LONG);
    /* A request line too. */
    memcpy(s, "GET /", 5);
    memset(s + 5, 'a', LZ_HTTP_LINE_MAX);
    static const char tail[] = " HTTP/1.1\r\nHost: h\r\n\r\n";
    memcpy(s + 5 + LZ_HTTP_LINE_MAX, tail, sizeof tail);
    assert_int_equal(refused_s(s), LZ_HTTP_R_LINE_TOO_LONG);

    /* LZ_HTTP_FIELDS_MAX fields, and one more (refused at its first byte). */
    size_t o = 0;
    o += (size_t)snprintf(s + o, sizeof s - o, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < LZ_HTTP_FIELDS_MAX; i++)
        o += (size_t)snprintf(s + o, sizeof s - o, "X-%d: %d\r\n", i, i);
    memcpy(s + o, "\r\n", 3);
    h = ok_s(s);
    assert_int_equal(h.n_fields, LZ_HTTP_FIELDS_MAX);
    assert_int_equal(lz_http_field_find(&h, (const uint8_t *)s, "x-127", 0), 127);
    memcpy(s + o, "X\r\n\r\n", 6);
    assert_int_equal(refused_s(s), LZ_HTTP_R_TOO_MANY_FIELDS);
    assert_int_equal(refused((const uint8_t *)s, o + 1), LZ_HTTP_R_TOO_MANY_FIELDS);
}

/* What -EAGAIN asks for: the rest of the line and an empty line. */
static void test_need(void **state) {
    (void)state;
    static const struct {
        const char *s;
        size_t need;
    } cases[] = {
        { "", 4 },
        { "G", 5 },
        { "GET / HTTP/1.1", 18 },
        { "GET / HTTP/1.1\r", 18 },
        { "GET / HTTP/1.1\r\n", 18 },
        { "GET / HTTP/1.1\r\nHost: h", 27 },
        { "GET / HTTP/1.1\r\nHost: h\r", 27 },
        { "GET / HTTP/1.1\r\nHost: h\r\n", 27 },
        { "GET / HTTP/1.1\r\nHost: h\r\n\r", 27 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct lz_http_head h;
        size_t need = 0;
        assert_int_equal(lz_http_head_parse((const uint8_t *)cases[i].s, strlen(cases[i].s), &h, &need, NULL), -EAGAIN);
        if (need != cases[i].need)
            fail_msg("\"%s\": need %zu, not %zu", cases[i].s, need, cases[i].need);
    }
    /* NULL ret_need and why are allowed. */
    struct lz_http_head h;
    assert_int_equal(lz_http_head_parse((const uint8_t *)"GET", 3, &h, NULL, NULL), -EAGAIN);
    assert_int_equal(lz_http_head_parse((const uint8_t *)"G\n", 2, &h, NULL, NULL), -EBADMSG);
}

static void test_placeholder(void **state) {
    (void)state;
    static const uint8_t b[] = "ab{}c\0{LZ-1}x{LZ-1}";
    size_t n = sizeof b - 1, at = 99;
    assert_true(lz_http_find_placeholder(b, n, "{}", &at));
    assert_int_equal(at, 2);
    assert_true(lz_http_find_placeholder(b, n, "{LZ-1}", &at));
    assert_int_equal(at, 6);
    assert_true(lz_http_find_placeholder(b + 7, n - 7, "{LZ-1}", &at));
    assert_int_equal(at, 6);
    assert_true(lz_http_find_placeholder(b, n, "a", &at));
    assert_int_equal(at, 0);
    assert_true(lz_http_find_placeholder(b, n, "}", &at));
    assert_int_equal(at, 3);
    assert_true(lz_http_find_placeholder(b, n, "1}", NULL));
    /* The last bytes, and one byte short of them. */
    assert_true(lz_http_find_placeholder(b, n, "x{LZ-1}", &at));
    assert_int_equal(at, n - 7);
    assert_false(lz_http_find_placeholder(b, n - 1, "x{LZ-1}", NULL));
    /* Overlapping starts: "aab" in "aaab". */
    assert_true(lz_http_find_placeholder((const uint8_t *)"aaab", 4, "aab", &at));
    assert_int_equal(at, 1);
    at = 99;
    assert_false(lz_http_find_placeholder(b, n, "{LZ-2}", &at));
    assert_int_equal(at, 99);
    assert_false(lz_http_find_placeholder(b, n, "", &at));
    assert_false(lz_http_find_placeholder(b, 0, "{}", &at));
    assert_false(lz_http_find_placeholder(b, 1, "ab", &at));
    assert_false(lz_http_find_placeholder(NULL, 0, "x", &at));
}

/* Every reason seen by some test above, and a string for each. */
static void test_reasons(void **state) {
    (void)state;
    for (int r = 1; r < LZ_HTTP_R_MAX; r++)
        if (!seen[r])
            fail_msg("no test for reason %d: %s", r, lz_http_reason_str((enum lz_http_reason)r));
    for (int r = 0; r < LZ_HTTP_R_MAX; r++)
        assert_string_not_equal(lz_http_reason_str((enum lz_http_reason)r), "unknown reason");
    assert_string_equal(lz_http_reason_str(LZ_HTTP_R_MAX), "unknown reason");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_heads),  cmocka_unit_test(test_request_line), cmocka_unit_test(test_fields),
        cmocka_unit_test(test_framing),     cmocka_unit_test(test_bounds),       cmocka_unit_test(test_need),
        cmocka_unit_test(test_placeholder), cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
