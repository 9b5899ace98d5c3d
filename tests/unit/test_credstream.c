/* Unit tests for the credential streams (credstream.c): every request
 * rule with a control that differs only in the bad part and is passed on
 * with the value swapped in; the exact bytes out; the same output however
 * the input is cut into feeds (a byte at a time, at every single cut,
 * random cuts); the real value nowhere in what goes out but in the
 * swapped header; chunked bodies, pipelined and keep-alive requests; the
 * push policy on a captured `git push` (tests/unit/data/http) and on
 * lists written by hand, with the report-status git reads; the response
 * scanner's hold-back; the bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "credstream.h"
#include "httphead.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PH "lzph_0123456789abcdef0123456789abcdef"
#define PH2 "lzph_fedcba9876543210fedcba9876543210"
#define VAL "ghp_REALsecret0123456789ABCDEFGHIJKLMNOPQ"
#define VAL2 "s3cr3t-git-token-value-XYZ-0987654321"
/* base64("x-access-token:" PH2) and base64("x-access-token:" VAL2) */
#define B64_PH2 "eC1hY2Nlc3MtdG9rZW46bHpwaF9mZWRjYmE5ODc2NTQzMjEwZmVkY2JhOTg3NjU0MzIxMA=="
#define B64_VAL2 "eC1hY2Nlc3MtdG9rZW46czNjcjN0LWdpdC10b2tlbi12YWx1ZS1YWVotMDk4NzY1NDMyMQ=="
#define HOST "api.example.com"

static const char *const agent_refs[] = { "refs/heads/agent/*" };
static const char *const main_refs[] = { "refs/heads/main", "refs/heads/agent/*" };

static const struct lz_cred_bind bearer = {
    .header = "Authorization",
    .format = LZ_CRED_TEMPLATE,
    .prefix = "Bearer ",
    .placeholder = PH,
    .value = (const uint8_t *)VAL,
    .value_len = sizeof VAL - 1,
};
static const struct lz_cred_bind apikey = {
    .header = "x-api-key",
    .format = LZ_CRED_TEMPLATE,
    .placeholder = PH,
    .value = (const uint8_t *)VAL,
    .value_len = sizeof VAL - 1,
};
static const struct lz_cred_bind basic = {
    .header = "authorization",
    .format = LZ_CRED_BASIC,
    .username = "x-access-token",
    .placeholder = PH2,
    .value = (const uint8_t *)VAL2,
    .value_len = sizeof VAL2 - 1,
};

/* The binds of the test running: every helper below uses them. */
static struct lz_cred_bind B[4];
static size_t NB;
static const char *host = HOST;

static void use(const struct lz_cred_bind *b, size_t n) {
    memcpy(B, b, n * sizeof *b);
    NB = n;
}

/* ---- byte buffers ---- */

struct buf {
    uint8_t *p;
    size_t n, cap;
};
static void bput(struct buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void bputs(struct buf *b, const char *s) { bput(b, s, strlen(s)); }
static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...) {
    char t[70000];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof t);
    bput(b, t, (size_t)n);
}
static void bfree(struct buf *b) {
    free(b->p);
    *b = (struct buf){ 0 };
}

static size_t count(const uint8_t *hay, size_t n, const char *needle) {
    size_t m = strlen(needle), c = 0;
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            c++;
    return c;
}

/* ---- feeding ---- */

enum cut { WHOLE, BYTES, RANDOM, ONE_CUT };

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct run {
    int r;
    char why[LZ_CRED_WHY_MAX];
    struct buf sent; /* what the calls that succeeded appended */
    struct lz_credreq_counts counts;
    size_t out_max; /* the largest out of one call */
    bool at_end;    /* the refusal came from lz_credreq_end */
};

/* The value of each bind as it goes out: raw, or in its Basic base64. */
static size_t values_out(const uint8_t *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < NB; i++) {
        char v[LZ_CRED_VALUE_MAX + 1];
        memcpy(v, B[i].value, B[i].value_len);
        v[B[i].value_len] = '\0';
        c += count(p, n, v);
    }
    c += count(p, n, B64_VAL2);
    return c;
}

/* in fed to a new state, cut as kind and arg say; then end. The value
 * goes out exactly once a swap. */
static struct run run(const uint8_t *in, size_t n, enum cut kind, size_t arg) {
    struct run x = { 0 };
    struct lz_credreq *s = NULL;
    assert_int_equal(lz_credreq_new(host, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    uint64_t seed = arg * 0x9e3779b97f4a7c15u + 1;
    size_t off = 0;
    while (off < n || (n == 0 && off == 0)) {
        size_t k = n - off;
        if (kind == BYTES)
            k = 1;
        else if (kind == RANDOM)
            k = 1 + rnd(&seed) % (rnd(&seed) % 3 ? 17 : 700);
        else if (kind == ONE_CUT && off < arg)
            k = arg - off;
        if (k > n - off)
            k = n - off;
        o.len = 0;
        x.r = lz_credreq_feed(s, in + off, k, &o, x.why);
        if (x.r < 0) {
            assert_int_equal(o.len, 0);
            break;
        }
        if (o.len > x.out_max)
            x.out_max = o.len;
        bput(&x.sent, o.p, o.len);
        off += k;
        if (n == 0)
            break;
    }
    if (x.r == 0) {
        x.r = lz_credreq_end(s, x.why);
        x.at_end = x.r < 0;
    }
    lz_credreq_counts(s, &x.counts);
    assert_int_equal(values_out(x.sent.p, x.sent.n), x.counts.swaps);
    lz_credreq_free(s);
    free(o.p);
    return x;
}

static void assert_bytes(const uint8_t *got, size_t gn, const void *want, size_t wn) {
    if (gn != wn || memcmp(got, want, wn) != 0)
        fail_msg("got %zu bytes:\n%.*s\nwanted %zu:\n%.*s", gn, (int)gn, (const char *)got, wn, (int)wn,
                 (const char *)want);
}

/* Passed on as want (swaps swapped), however it is cut. */
static struct lz_credreq_counts pass_n(const void *in, size_t n, const void *want, size_t wn) {
    struct lz_credreq_counts c = { 0 };
    for (unsigned k = 0; k < 3 + 24; k++) {
        struct run x = run(in, n, k < 3 ? (enum cut)k : RANDOM, k);
        if (x.r != 0)
            fail_msg("refused (%d): %s", x.r, x.why);
        assert_bytes(x.sent.p, x.sent.n, want, wn);
        c = x.counts;
        bfree(&x.sent);
    }
    if (n <= 4096)
        for (size_t k = 0; k <= n; k++) {
            struct run x = run(in, n, ONE_CUT, k);
            if (x.r != 0)
                fail_msg("cut at %zu: refused (%d): %s", k, x.r, x.why);
            assert_bytes(x.sent.p, x.sent.n, want, wn);
            bfree(&x.sent);
        }
    return c;
}
static struct lz_credreq_counts pass(const char *in, const char *want) {
    return pass_n(in, strlen(in), want, strlen(want));
}
/* Passed on unchanged. */
static void same(const char *in) {
    struct lz_credreq_counts c = pass(in, in);
    assert_int_equal(c.swaps, 0);
}

/* Refused with err and a reason holding sub, however it is cut. */
static void refused_n(const void *in, size_t n, int err, const char *sub) {
    for (unsigned k = 0; k < 3 + 8; k++) {
        struct run x = run(in, n, k < 3 ? (enum cut)k : RANDOM, k);
        if (x.r != err)
            fail_msg("cut %u: %d (%s), wanted %d (%s)", k, x.r, x.why, err, sub);
        if (!strstr(x.why, sub))
            fail_msg("cut %u: reason \"%s\", wanted one with \"%s\"", k, x.why, sub);
        for (const char *c = x.why; *c; c++)
            assert_true(*c >= 0x20 && *c <= 0x7e);
        if (k == WHOLE && !x.at_end)
            assert_int_equal(x.sent.n, 0);
        bfree(&x.sent);
    }
}
static void refused(const char *in, int err, const char *sub) { refused_n(in, strlen(in), err, sub); }

/* ---- requests: heads ---- */

static void test_swap_template(void **state) {
    (void)state;
    use(&bearer, 1);
    struct lz_credreq_counts c =
        pass("GET /user HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\nAccept: */*\r\n\r\n",
             "GET /user HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\nAccept: */*\r\n\r\n");
    assert_int_equal(c.requests, 1);
    assert_int_equal(c.swaps, 1);
    /* OWS around the value and the name's case kept as sent. */
    pass("GET / HTTP/1.1\r\nauthorization:  Bearer " PH " \r\nHost: API.Example.COM:443\r\n\r\n",
         "GET / HTTP/1.1\r\nauthorization:  Bearer " VAL " \r\nHost: API.Example.COM:443\r\n\r\n");
    /* A header with the value alone. */
    use(&apikey, 1);
    pass("POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: " PH "\r\nContent-Length: 2\r\n\r\n{}",
         "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: " VAL "\r\nContent-Length: 2\r\n\r\n{}");
    /* Absolute-form. */
    use(&bearer, 1);
    pass("GET https://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n",
         "GET https://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\n\r\n");
}

static void test_unchanged(void **state) {
    (void)state;
    use(&bearer, 1);
    /* The agent's own token, no token, another header. */
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer gho_agents_own_token\r\n\r\n");
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Other: lzph_\r\nAuthorization: Bearer x\r\n"
         "Authorization: Bearer y\r\n\r\n");
    /* A placeholder of another Domain (other hex) is nothing. */
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer "
         "lzph_00000000000000000000000000000000\r\n\r\n");
}

static void test_host(void **state) {
    (void)state;
    use(&bearer, 1);
    const char *ok = "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n";
    pass(ok, "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\n\r\n");
    refused("GET / HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer " PH "\r\n\r\n", -EACCES,
            "Host evil.example is not api.example.com");
    refused("GET / HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n", -EACCES, "is not api.example.com");
    refused("GET / HTTP/1.1\r\nHost: api.example.com.\r\n\r\n", -EACCES, "is not");
    refused("GET / HTTP/1.1\r\nHost: xapi.example.com\r\n\r\n", -EACCES, "is not");
    refused("GET / HTTP/1.1\r\nHost: api.example.co\r\n\r\n", -EACCES, "is not");
    /* Without a credential in it, too: the connection is the host's. */
    refused("GET / HTTP/1.1\r\nHost: other.example\r\n\r\n", -EACCES, "is not");
    /* httphead's: an authority other than Host, no Host. */
    refused("GET https://evil.example/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EBADMSG, "absolute-form");
    refused("GET / HTTP/1.1\r\n\r\n", -EBADMSG, "no Host");
}

static void test_placeholder_elsewhere(void **state) {
    (void)state;
    use(&bearer, 1);
    /* Each with its control: the same request without the bad part. */
    same("GET /?q=1 HTTP/1.1\r\nHost: api.example.com\r\nX-Foo: bar\r\n\r\n");
    refused("GET /?q=1 HTTP/1.1\r\nHost: api.example.com\r\nX-Foo: " PH "\r\n\r\n", -EACCES,
            "credential placeholder outside its Authorization header");
    refused("GET /?q=" PH " HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES, "placeholder outside");
    refused("GET /" PH "/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES, "placeholder outside");
    refused("GET https://api.example.com/?t=" PH " HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES,
            "placeholder outside");
    /* Percent-encoded in the target, in a field. */
    refused("GET /?q=lzph%5F0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET /?q=%6c%7a%70%68_0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Foo: a%5f" PH "\r\n\r\n", -EACCES, "placeholder outside");
    /* As a field name. */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\n" PH ": 1\r\n\r\n", -EACCES, "placeholder outside");
    /* The declared field in another form. */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: bearer " PH "\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer  " PH "\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: token " PH "\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "x\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH ", Bearer " PH "\r\n\r\n", -EACCES,
            "placeholder outside");
    /* In base64: Basic of a TEMPLATE bind, another field, a cookie, at
     * each alignment and in both alphabets. base64("u:" PH) etc. */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic "
            "dTpsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm\r\n\r\n",
            -EACCES, "placeholder outside");
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic "
         "dTpsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVn\r\n\r\n");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nProxy-Authorization: Basic "
            "dTpsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm\r\n\r\n",
            -EACCES, "placeholder outside");
    /* base64(PH), base64("x" PH), base64("xy" PH) */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nCookie: "
            "s=bHpwaF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZg==\r\n\r\n",
            -EACCES, "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nCookie: "
            "s=eGx6cGhfMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\r\n\r\n",
            -EACCES, "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nCookie: "
            "s=eHlsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm\r\n\r\n",
            -EACCES, "placeholder outside");
    refused("GET /?t=eHlsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
            -EACCES, "placeholder outside");
    same("GET /?t=eHlsenBoXzAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVn HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    /* With a swap in the same head. */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\nX-Copy: " PH "\r\n\r\n",
            -EACCES, "placeholder outside");
}

static void test_duplicate(void **state) {
    (void)state;
    use(&bearer, 1);
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH
            "\r\nAuthorization: Bearer other\r\n\r\n",
            -EACCES, "more than one Authorization header");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer other\r\nAUTHORIZATION: Bearer " PH
            "\r\n\r\n",
            -EACCES, "more than one Authorization header");
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer one\r\nAuthorization: Bearer other\r\n\r\n");
    /* Two binds of one host: each swaps in its own header. */
    struct lz_cred_bind two[2] = { bearer, apikey };
    two[1].placeholder = PH2;
    two[1].value = (const uint8_t *)VAL2;
    two[1].value_len = sizeof VAL2 - 1;
    use(two, 2);
    struct lz_credreq_counts c =
        pass("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: " PH2 "\r\nAuthorization: Bearer " PH "\r\n\r\n",
             "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: " VAL2 "\r\nAuthorization: Bearer " VAL "\r\n\r\n");
    assert_int_equal(c.swaps, 2);
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: " PH "\r\n\r\n", -EACCES,
            "placeholder outside its Authorization header");
}

static void test_basic(void **state) {
    (void)state;
    use(&basic, 1);
    struct lz_credreq_counts c = pass("GET /o/r.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: "
                                      "api.example.com\r\nAuthorization: Basic " B64_PH2 "\r\n\r\n",
                                      "GET /o/r.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: "
                                      "api.example.com\r\nAuthorization: Basic " B64_VAL2 "\r\n\r\n");
    assert_int_equal(c.swaps, 1);
    /* The scheme's case kept as sent. */
    pass("GET / HTTP/1.1\r\nHost: api.example.com\r\nauthorization: bAsIc " B64_PH2 "\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: api.example.com\r\nauthorization: bAsIc " B64_VAL2 "\r\n\r\n");
    /* Not padded, another user, two spaces, the placeholder raw. */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic "
            "eC1hY2Nlc3MtdG9rZW46bHpwaF9mZWRjYmE5ODc2NTQzMjEwZmVkY2JhOTg3NjU0MzIxMA\r\n\r\n",
            -EACCES, "placeholder outside");
    /* base64("git:" PH2) */
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic "
            "Z2l0Omx6cGhfZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=\r\n\r\n",
            -EACCES, "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic  " B64_PH2 "\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic " PH2 "\r\n\r\n", -EACCES,
            "placeholder outside");
    refused("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Auth: Basic " B64_PH2 "\r\n\r\n", -EACCES,
            "placeholder outside");
    /* The agent's own Basic login. base64("x-access-token:gho_own") */
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic eC1hY2Nlc3MtdG9rZW46Z2hvX293bg==\r\n\r\n");
}

/* ---- requests: bodies ---- */

static void test_body_length(void **state) {
    (void)state;
    use(&bearer, 1);
    const char *head =
        "POST /v1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\nContent-Length: 60\r\n\r\n";
    const char *head_out =
        "POST /v1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\nContent-Length: 60\r\n\r\n";
    char in[512], want[512];
    const char *body = "{\"k\": \"lzph_0123456789abcdef0123456789abcdee\", \"x\": 1234567}";
    assert_int_equal(strlen(body), 60);
    snprintf(in, sizeof in, "%s%s", head, body);
    snprintf(want, sizeof want, "%s%s", head_out, body);
    pass(in, want);
    body = "{\"k\": \"lzph_0123456789abcdef0123456789abcdef\", \"x\": 1234567}";
    snprintf(in, sizeof in, "%s%s", head, body);
    refused(in, -EACCES, "credential placeholder in the request body");
    /* Split at every place inside the placeholder (ONE_CUT by pass_n
     * covers the control): refused every time. */
    for (size_t k = strlen(head); k < strlen(in); k++) {
        struct run x = run((const uint8_t *)in, strlen(in), ONE_CUT, k);
        assert_int_equal(x.r, -EACCES);
        bfree(&x.sent);
    }
    /* A body shorter than its Content-Length. */
    snprintf(in, sizeof in, "%s%s", head, "{\"k\": \"v\"}");
    refused(in, -EBADMSG, "request body cut short");
}

static void test_chunked(void **state) {
    (void)state;
    use(&bearer, 1);
    const char *head = "POST /v1 HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n";
    char in[1024];
    /* Passed on as sent: extensions, a trailer, upper-case hex. */
    const char *ok[] = {
        "5\r\nhello\r\n0\r\n\r\n",
        "5;ext\r\nhello\r\n6;a=b;c=\"q \\\" x\"\r\n world\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1234\r\nX-Two: a b\r\n\r\n",
        "000005\r\nhello\r\n0000\r\n\r\n",
        "0\r\n\r\n",
        "19\r\nlzph_0123456789abcdef0123\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(in, sizeof in, "%s%s", head, ok[i]);
        same(in);
    }
    /* The placeholder across chunks, in an extension, in a trailer, and
     * the raw form split by the framing (in the payload only). */
    struct {
        const char *body, *why;
        int err;
    } bad[] = {
        { "19\r\nlzph_0123456789abcdef0123\r\nC\r\n456789abcdef\r\n0\r\n\r\n", "placeholder in the request body",
          -EACCES },
        { "1\r\nl\r\n24\r\nzph_0123456789abcdef0123456789abcdef\r\n0\r\n\r\n", "placeholder in the request body",
          -EACCES },
        { "5;t=" PH "\r\nhello\r\n0\r\n\r\n", "placeholder in the request body", -EACCES },
        { "5\r\nhello\r\n0;t=\"" PH "\"\r\n\r\n", "placeholder in the request body", -EACCES },
        { "5\r\nhello\r\n0\r\nX-T: " PH "\r\n\r\n", "placeholder in the request body", -EACCES },
        { "5\r\nhello\r\n0\r\n" PH ": x\r\n\r\n", "placeholder in the request body", -EACCES },
        /* Framing. */
        { "00000000000000005\r\nhello\r\n0\r\n\r\n", "longer than 16 hex digits", -EBADMSG },
        { "5 \r\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "-5\r\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "0x5\r\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "\r\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "5\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "5\r\rhello\r\n0\r\n\r\n", "not ended by CRLF", -EBADMSG },
        { "5\r\nhelloX\r\n0\r\n\r\n", "not followed by CRLF", -EBADMSG },
        { "5\r\nhello\n0\r\n\r\n", "not followed by CRLF", -EBADMSG },
        { "5 ;a\r\nhello\r\n0\r\n\r\n", "malformed chunk size", -EBADMSG },
        { "5; a\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5;a =b\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5;a=\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5;\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5;a=\"x\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5;a=\"x\"y\r\nhello\r\n0\r\n\r\n", "malformed chunk extension", -EBADMSG },
        { "5\r\nhello\r\n0\r\n X: 1\r\n\r\n", "starting with whitespace", -EBADMSG },
        { "5\r\nhello\r\n0\r\nX : 1\r\n\r\n", "malformed trailer field", -EBADMSG },
        { "5\r\nhello\r\n0\r\nX\r\n\r\n", "malformed trailer field", -EBADMSG },
        { "5\r\nhello\r\n0\r\nX: a\x01\r\n\r\n", "control character", -EBADMSG },
        { "5\r\nhello\r\n0\r\nX: a\n\r\n", "without CR", -EBADMSG },
        { "5\r\nhello\r\n0\r\nX: a\r\r\n", "CR not followed by LF", -EBADMSG },
        { "5\r\nhello\r\n0\r\n\rX", "CR not followed by LF", -EBADMSG },
        { "5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n", "trailer field Content-Length not allowed", -EBADMSG },
        { "5\r\nhello\r\n0\r\nTransfer_Encoding: x\r\n\r\n", "not allowed", -EBADMSG },
        { "5\r\nhello\r\n0\r\nauthorization: x\r\n\r\n", "not allowed", -EBADMSG },
        { "5\r\nhello\r\n0\r\nHost: x\r\n\r\n", "not allowed", -EBADMSG },
        /* Cut short. */
        { "5\r\nhello\r\n", "request body cut short", -EBADMSG },
        { "5\r\nhello\r\n0\r\n", "request body cut short", -EBADMSG },
        { "5\r\nhel", "request body cut short", -EBADMSG },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(in, sizeof in, "%s%s", head, bad[i].body);
        refused(in, bad[i].err, bad[i].why);
    }
}

static void test_pipelined(void **state) {
    (void)state;
    use(&bearer, 1);
    const char *r1 =
        "POST /a HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\nContent-Length: 5\r\n\r\nhello";
    const char *r1o =
        "POST /a HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\nContent-Length: 5\r\n\r\nhello";
    const char *r2 = "POST /b HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n"
                     "Authorization: Bearer " PH "\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    const char *r2o = "POST /b HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n"
                      "Authorization: Bearer " VAL "\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    const char *r3 = "GET /c HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n";
    const char *r3o = "GET /c HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL "\r\n\r\n";
    char in[2048], want[2048];
    snprintf(in, sizeof in, "%s%s%s%s", r1, r2, r3, r1);
    snprintf(want, sizeof want, "%s%s%s%s", r1o, r2o, r3o, r1o);
    struct lz_credreq_counts c = pass(in, want);
    assert_int_equal(c.requests, 4);
    assert_int_equal(c.swaps, 4);
    /* The second request's body holds the placeholder: refused, and the
     * first request went out whole before it when cut between them. */
    snprintf(in, sizeof in, "%s%s", r1,
             "POST /b HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 40\r\n\r\n=" PH "..");
    refused(in, -EACCES, "placeholder in the request body");
    struct run x = run((const uint8_t *)in, strlen(in), ONE_CUT, strlen(r1));
    assert_int_equal(x.r, -EACCES);
    assert_bytes(x.sent.p, x.sent.n, r1o, strlen(r1o));
    bfree(&x.sent);
    /* Bytes after a request with Connection: close. */
    snprintf(in, sizeof in, "%s%s", "GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n", r3);
    refused(in, -EBADMSG, "after a request with Connection: close");
    same("GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n");
    /* A second Host of the keep-alive connection. */
    snprintf(in, sizeof in, "%s%s", r3, "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    refused(in, -EACCES, "is not");
    /* An empty line between requests is not skipped. */
    snprintf(in, sizeof in, "%s\r\n%s", r3, r3);
    refused(in, -EBADMSG, "");
    /* Expect: 100-continue: the head goes on alone, the body later. */
    use(&apikey, 1);
    const char *e = "PUT /f HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nx-api-key: " PH
                    "\r\nContent-Length: 3\r\n\r\n";
    const char *eo = "PUT /f HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nx-api-key: " VAL
                     "\r\nContent-Length: 3\r\n\r\n";
    struct lz_credreq *s;
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX];
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)e, strlen(e), &o, why), 0);
    assert_bytes(o.p, o.len, eo, strlen(eo));
    assert_int_equal(lz_credreq_end(s, why), -EBADMSG);
    lz_credreq_free(s);
    free(o.p);
}

static void test_refusal_final(void **state) {
    (void)state;
    use(&bearer, 1);
    struct lz_credreq *s;
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX], why2[LZ_CRED_WHY_MAX];
    const char *good = "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n";
    const char *bad = "GET /" PH " HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
    /* A good request and a bad one in one call: nothing of that call is
     * to go, out is as it was. */
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)"x", 0, &o, why), 0);
    o.len = 3;
    o.cap = 3;
    o.p = malloc(3);
    memcpy(o.p, "abc", 3);
    char both[512];
    snprintf(both, sizeof both, "%s%s", good, bad);
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)both, strlen(both), &o, why), -EACCES);
    assert_int_equal(o.len, 3);
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)good, strlen(good), &o, why2), -EACCES);
    assert_string_equal(why, why2);
    assert_int_equal(o.len, 3);
    memset(why2, 0, sizeof why2);
    assert_int_equal(lz_credreq_end(s, why2), -EACCES);
    assert_string_equal(why, why2);
    struct lz_credreq_counts c;
    lz_credreq_counts(s, &c);
    assert_int_equal(c.requests, 0);
    assert_int_equal(c.swaps, 0);
    assert_int_equal(lz_credreq_push_report(s, &o), -ENOENT);
    lz_credreq_free(s);
    free(o.p);
}

static void test_bounds(void **state) {
    (void)state;
    use(&bearer, 1);
    struct lz_credreq *s;
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX];
    uint8_t chunk[1000];
    memset(chunk, 'a', sizeof chunk);

    /* An endless head: refused at its bound, nothing out. */
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    const char *start = "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Long: ";
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)start, strlen(start), &o, why), 0);
    size_t fed = strlen(start);
    int r = 0;
    while ((r = lz_credreq_feed(s, chunk, sizeof chunk, &o, why)) == 0) {
        fed += sizeof chunk;
        assert_int_equal(o.len, 0);
        assert_true(fed <= LZ_HTTP_HEAD_MAX + sizeof chunk);
    }
    assert_int_equal(r, -EBADMSG);
    assert_non_null(strstr(why, "longer than"));
    lz_credreq_free(s);

    /* Endless fields of a head that has line ends. */
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)"GET / HTTP/1.1\r\n", 16, &o, why), 0);
    for (fed = 16; (r = lz_credreq_feed(s, (const uint8_t *)"X-A: b\r\n", 8, &o, why)) == 0; fed += 8)
        assert_true(fed <= LZ_HTTP_HEAD_MAX);
    assert_int_equal(r, -EBADMSG);
    assert_int_equal(o.len, 0);
    lz_credreq_free(s);

    /* An endless chunk extension, an endless trailer. */
    const char *ch = "POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n";
    const char *ends[] = { "1;a=", "0\r\nX: " };
    const char *whys[] = { "chunk extensions longer than", "trailer longer than" };
    for (int k = 0; k < 2; k++) {
        assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
        o.len = 0;
        assert_int_equal(lz_credreq_feed(s, (const uint8_t *)ch, strlen(ch), &o, why), 0);
        assert_int_equal(lz_credreq_feed(s, (const uint8_t *)ends[k], strlen(ends[k]), &o, why), 0);
        size_t total = o.len;
        fed = 0;
        while ((r = lz_credreq_feed(s, chunk, sizeof chunk, &o, why)) == 0) {
            fed += sizeof chunk;
            assert_true(fed <= LZ_CRED_TRAILER_MAX);
        }
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, whys[k]));
        assert_true(o.len <= total + fed);
        lz_credreq_free(s);
    }

    /* out that is never drained stops at LZ_CRED_OUT_MAX. */
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    const char *big = "PUT / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 99999999\r\n\r\n";
    o.len = 0;
    assert_int_equal(lz_credreq_feed(s, (const uint8_t *)big, strlen(big), &o, why), 0);
    uint8_t *mb = calloc(1, 1 << 20);
    assert_non_null(mb);
    while ((r = lz_credreq_feed(s, mb, 1 << 20, &o, why)) == 0)
        assert_true(o.len <= LZ_CRED_OUT_MAX);
    assert_int_equal(r, -ENOMEM);
    assert_true(o.cap <= LZ_CRED_OUT_MAX);
    free(mb);
    lz_credreq_free(s);
    free(o.p);
}

/* ---- pushes ---- */

static const char Z40[] = "0000000000000000000000000000000000000000";
static const char A40[] = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
static const char B40[] = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";

static void pkt(struct buf *b, const void *p, size_t n) {
    bprintf(b, "%04zx", n + 4);
    bput(b, p, n);
}
static void cmd(struct buf *b, const char *old, const char *new_id, const char *ref, const char *caps) {
    char l[2048];
    int n = snprintf(l, sizeof l, "%s %s %s", old, new_id, ref);
    if (caps) {
        l[n++] = '\0';
        n += snprintf(l + n, sizeof l - (size_t)n, "%s", caps);
    }
    pkt(b, l, (size_t)n);
}

/* The captured push (tests/unit/data/http/git-push.bin: creates of
 * refs/heads/main and refs/heads/agent/x, report-status-v2 and
 * side-band-64k), its Host made ours. */
static struct buf captured_push(void) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/http/git-push.bin", src ? src : ".");
    FILE *f = fopen(path, "rbe");
    if (!f)
        fail_msg("cannot open %s", path);
    static uint8_t file[8192];
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof file);
    const uint8_t *h = memmem(file, n, "\r\nHost: ", 8);
    assert_non_null(h);
    const uint8_t *e = memmem(h + 2, n - (size_t)(h + 2 - file), "\r\n", 2);
    struct buf b = { 0 };
    bput(&b, file, (size_t)(h - file));
    bputs(&b, "\r\nHost: " HOST);
    bput(&b, e, n - (size_t)(e - file));
    return b;
}

static struct lz_cred_bind git_bind(const char *const *refs, size_t n, bool del) {
    struct lz_cred_bind b = basic;
    b.push_refs = refs;
    b.n_push_refs = n;
    b.push_delete = del;
    return b;
}

/* The HTTP answer around a report body. */
static void want_answer(struct buf *w, const void *body, size_t n) {
    bprintf(w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-git-receive-pack-result\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            n);
    bput(w, body, n);
}

/* Fed whole to a new state: the refusal, the report. */
static void push_refused(const uint8_t *in, size_t n, const char *why_sub, struct buf *report) {
    for (unsigned k = 0; k < 3 + 6; k++) {
        struct run x = run(in, n, k < 3 ? (enum cut)k : RANDOM, k);
        if (x.r != -EACCES || !strstr(x.why, why_sub))
            fail_msg("%d: %s (wanted %s)", x.r, x.why, why_sub);
        /* The body never went out: at most the head did. */
        const uint8_t *he = memmem(in, n, "\r\n\r\n", 4);
        assert_true(x.sent.n <= (size_t)(he + 4 - in) + 64);
        bfree(&x.sent);
    }
    struct lz_credreq *s;
    assert_int_equal(lz_credreq_new(host, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX];
    assert_int_equal(lz_credreq_feed(s, in, n, &o, why), -EACCES);
    o.len = 0;
    assert_int_equal(lz_credreq_push_report(s, &o), 0);
    bput(report, o.p, o.len);
    struct lz_credreq_counts c;
    lz_credreq_counts(s, &c);
    assert_int_equal(c.pushes, 1);
    lz_credreq_free(s);
    free(o.p);
}

static void test_push_captured(void **state) {
    (void)state;
    struct buf in = captured_push();
    /* Both refs allowed: passed on byte for byte, the Basic swapped. */
    struct lz_cred_bind b = git_bind(main_refs, 2, false);
    use(&b, 1);
    struct lz_credreq_counts c = pass_n(in.p, in.n, in.p, in.n);
    assert_int_equal(c.pushes, 1);
    assert_int_equal(c.swaps, 0);

    struct lz_credreq *s;
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX];
    assert_int_equal(lz_credreq_feed(s, in.p, in.n, &o, why), 0);
    assert_int_equal(lz_credreq_push_n(s), 2);
    struct lz_cred_push_cmd pc;
    assert_int_equal(lz_credreq_push_get(s, 0, &pc), 0);
    assert_int_equal(pc.kind, LZ_PKT_CREATE);
    assert_int_equal(pc.ref_len, 15);
    assert_memory_equal(pc.ref, "refs/heads/main", 15);
    assert_memory_equal(pc.old_id, Z40, 40);
    assert_int_equal(pc.id_len, 40);
    assert_true(pc.allowed);
    assert_null(pc.why);
    assert_int_equal(lz_credreq_push_get(s, 1, &pc), 0);
    assert_memory_equal(pc.ref, "refs/heads/agent/x", 18);
    assert_int_equal(lz_credreq_push_get(s, 2, &pc), -ENOENT);
    /* The list is the call's: gone at the next. */
    assert_int_equal(lz_credreq_feed(s, NULL, 0, &o, why), 0);
    assert_int_equal(lz_credreq_push_n(s), 0);
    assert_int_equal(lz_credreq_push_report(s, &o), -ENOENT);
    lz_credreq_free(s);

    /* main not allowed: refused, the report as receive-pack writes it
     * (report-status-v2 and side-band-64k asked for). */
    b = git_bind(agent_refs, 1, false);
    use(&b, 1);
    struct buf rep = { 0 }, want = { 0 };
    push_refused(in.p, in.n, "push to refs/heads/main: ref not allowed by push_refs", &rep);
    static const char body[] = "008f\001"
                               "000eunpack ok\n"
                               "003dng refs/heads/main lazaret: ref not allowed by push_refs\n"
                               "003bng refs/heads/agent/x lazaret: push refused as a whole\n"
                               "0000"
                               "0000";
    want_answer(&want, body, sizeof body - 1);
    assert_bytes(rep.p, rep.n, want.p, want.n);

    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    assert_int_equal(lz_credreq_feed(s, in.p, in.n, &o, why), -EACCES);
    assert_int_equal(lz_credreq_push_n(s), 2);
    assert_int_equal(lz_credreq_push_get(s, 0, &pc), 0);
    assert_false(pc.allowed);
    assert_string_equal(pc.why, "ref not allowed by push_refs");
    assert_int_equal(lz_credreq_push_get(s, 1, &pc), 0);
    assert_false(pc.allowed);
    assert_string_equal(pc.why, "push refused as a whole");
    lz_credreq_free(s);
    free(o.p);
    bfree(&rep);
    bfree(&want);
    bfree(&in);
}

/* A push request of the list l (and a fake pack), Content-Length or
 * chunked (cut into chunks of step bytes). */
static struct buf push_request(const struct buf *l, bool chunked, size_t step) {
    struct buf r = { 0 };
    bputs(&r,
          "POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: " HOST "\r\nAuthorization: Basic " B64_PH2
          "\r\nContent-Type: application/x-git-receive-pack-request\r\n");
    static const char pack[] = "PACK\0\0\0\2\0\0\0\0 fake pack bytes";
    if (!chunked) {
        bprintf(&r, "Content-Length: %zu\r\n\r\n", l->n + sizeof pack - 1);
        bput(&r, l->p, l->n);
        bput(&r, pack, sizeof pack - 1);
        return r;
    }
    bputs(&r, "Transfer-Encoding: chunked\r\n\r\n");
    struct buf all = { 0 };
    bput(&all, l->p, l->n);
    bput(&all, pack, sizeof pack - 1);
    for (size_t off = 0; off < all.n; off += step) {
        size_t k = all.n - off < step ? all.n - off : step;
        bprintf(&r, "%zx;n=%zu\r\n", k, off);
        bput(&r, all.p + off, k);
        bputs(&r, "\r\n");
    }
    bputs(&r, "0\r\n\r\n");
    bfree(&all);
    return r;
}

/* What the gate sends of an allowed push request: the same, swapped. */
static struct buf swapped(const struct buf *r) {
    struct buf w = { 0 };
    const uint8_t *at = memmem(r->p, r->n, B64_PH2, sizeof B64_PH2 - 1);
    assert_non_null(at);
    bput(&w, r->p, (size_t)(at - r->p));
    bputs(&w, B64_VAL2);
    bput(&w, at + sizeof B64_PH2 - 1, r->n - (size_t)(at - r->p) - (sizeof B64_PH2 - 1));
    return w;
}

static void test_push_policy(void **state) {
    (void)state;
    const char *caps = " report-status side-band-64k agent=git/2.39.5";
    struct buf l = { 0 };
    cmd(&l, A40, B40, "refs/heads/agent/x", caps);
    cmd(&l, Z40, B40, "refs/heads/agent/y/z", NULL);
    cmd(&l, B40, Z40, "refs/heads/agent/old", NULL);
    bputs(&l, "0000");

    static const char *const two[] = { "refs/heads/agent/*", "refs/heads/agent/**" };
    for (int chunked = 0; chunked < 2; chunked++)
        for (size_t step = 1; step < (chunked ? 200 : 2); step += 37) {
            struct buf r = push_request(&l, chunked, step);
            /* Allowed with push_delete: passed on, swapped. */
            struct lz_cred_bind b = git_bind(two, 2, true);
            use(&b, 1);
            struct buf w = swapped(&r);
            struct lz_credreq_counts c = pass_n(r.p, r.n, w.p, w.n);
            assert_int_equal(c.pushes, 1);
            assert_int_equal(c.swaps, 1);
            /* Without push_delete: the delete refused. */
            b = git_bind(two, 2, false);
            use(&b, 1);
            struct buf rep = { 0 }, want = { 0 }, inner = { 0 }, body = { 0 };
            push_refused(r.p, r.n, "push to refs/heads/agent/old: delete not allowed by push_delete", &rep);
            pkt(&inner, "unpack ok\n", 10);
            const char *lines[] = { "ng refs/heads/agent/x lazaret: push refused as a whole\n",
                                    "ng refs/heads/agent/y/z lazaret: push refused as a whole\n",
                                    "ng refs/heads/agent/old lazaret: delete not allowed by push_delete\n" };
            for (int i = 0; i < 3; i++)
                pkt(&inner, lines[i], strlen(lines[i]));
            bputs(&inner, "0000");
            bprintf(&body, "%04zx\001", inner.n + 5);
            bput(&body, inner.p, inner.n);
            bputs(&body, "0000");
            want_answer(&want, body.p, body.n);
            assert_bytes(rep.p, rep.n, want.p, want.n);
            /* Only `*`: y/z is two components. */
            b = git_bind(agent_refs, 1, true);
            use(&b, 1);
            bfree(&rep);
            push_refused(r.p, r.n, "push to refs/heads/agent/y/z: ref not allowed", &rep);
            bfree(&rep);
            bfree(&want);
            bfree(&inner);
            bfree(&body);
            bfree(&w);
            bfree(&r);
        }
    bfree(&l);
}

static void test_push_report_forms(void **state) {
    (void)state;
    struct lz_cred_bind b = git_bind(agent_refs, 1, false);
    use(&b, 1);
    struct {
        const char *caps, *body;
        size_t body_len;
    } forms[] = {
        /* report-status alone: the pkt-lines bare. */
        { " report-status", "000eunpack ok\n003dng refs/heads/main lazaret: ref not allowed by push_refs\n0000",
          14 + 61 + 4 },
        { " report-status-v2 agent=x",
          "000eunpack ok\n003dng refs/heads/main lazaret: ref not allowed by push_refs\n0000", 14 + 61 + 4 },
        /* side-band-64k without a report: receive-pack's flush alone. */
        { " side-band-64k quiet", "0000", 4 },
        /* Neither: an empty body. Nor side-band (receive-pack knows only
         * side-band-64k). */
        { " ofs-delta", "", 0 },
        { " side-band report-status-v3", "", 0 },
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct buf l = { 0 }, rep = { 0 }, want = { 0 };
        cmd(&l, A40, B40, "refs/heads/main", forms[i].caps);
        bputs(&l, "0000");
        struct buf r = push_request(&l, false, 0);
        push_refused(r.p, r.n, "push to refs/heads/main", &rep);
        want_answer(&want, forms[i].body, forms[i].body_len);
        assert_bytes(rep.p, rep.n, want.p, want.n);
        bfree(&l);
        bfree(&rep);
        bfree(&want);
        bfree(&r);
    }

    /* 256 commands of long names: the report spans band packets of at
     * most 65520 bytes, as git's send_sideband cuts them. */
    struct buf l = { 0 }, rep = { 0 };
    char ref[1100];
    for (int i = 0; i < LZ_PKT_COMMANDS_MAX; i++) {
        int n = snprintf(ref, sizeof ref, "refs/heads/x%03d/", i);
        memset(ref + n, 'n', 1000 - (size_t)n);
        ref[1000] = '\0';
        cmd(&l, A40, B40, ref, i == 0 ? " report-status side-band-64k" : NULL);
    }
    bputs(&l, "0000");
    struct buf r = push_request(&l, false, 0);
    push_refused(r.p, r.n, "push to refs/heads/x000/", &rep);
    const uint8_t *body = (const uint8_t *)memmem(rep.p, rep.n, "\r\n\r\n", 4) + 4;
    size_t bn = rep.n - (size_t)(body - rep.p), off = 0;
    struct buf inner = { 0 };
    unsigned packets = 0;
    while (off < bn) {
        unsigned len;
        assert_int_equal(sscanf((const char *)body + off, "%4x", &len), 1);
        if (len == 0) {
            off += 4;
            break;
        }
        assert_true(len <= 65520 && len > 5);
        assert_int_equal(body[off + 4], 1);
        bput(&inner, body + off + 5, len - 5);
        off += len;
        packets++;
    }
    assert_int_equal(off, bn);
    assert_true(packets >= 4);
    assert_int_equal(count(inner.p, inner.n, " lazaret: ref not allowed by push_refs\n"), LZ_PKT_COMMANDS_MAX);
    assert_memory_equal(inner.p + inner.n - 4, "0000", 4);
    bfree(&inner);
    bfree(&l);
    bfree(&rep);
    bfree(&r);
}

static void test_push_refusals(void **state) {
    (void)state;
    static const char *const all[] = { "refs/**" };
    struct lz_cred_bind b = git_bind(all, 1, true);
    use(&b, 1);
    struct buf l = { 0 };
    cmd(&l, A40, B40, "refs/heads/main", " report-status");
    bputs(&l, "0000");
    struct buf r = push_request(&l, false, 0);
    struct buf w = swapped(&r);
    pass_n(r.p, r.n, w.p, w.n);
    bfree(&w);
    bfree(&r);
    char in[4096];
    /* Not POST, no body, Content-Encoding, a cut list, a malformed one. */
    refused("GET /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES, "other than POST");
    refused("post /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES, "other than POST");
    refused("POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n", -EACCES, "without a body");
    refused("POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n", -EACCES,
            "without a body");
    struct buf ce = { 0 };
    bprintf(&ce,
            "POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\nContent-Encoding: gzip\r\n"
            "Content-Length: %zu\r\n\r\n",
            l.n);
    bput(&ce, l.p, l.n);
    refused_n(ce.p, ce.n, -EACCES, "Content-Encoding");
    bfree(&ce);
    snprintf(
        in, sizeof in,
        "POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 10\r\n\r\n0032a1a1a1");
    refused(in, -EACCES, "push body ends before its command list");
    snprintf(in, sizeof in,
             "POST /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 8\r\n\r\n0003abcd");
    refused(in, -EACCES, "push command list: delim, response-end or empty pkt-line");
    /* The path in other spellings a server may route the same way. */
    const char *paths[] = { "/o/r.git/git-receive%2Dpack", "/o/r.git/GIT-RECEIVE-PACK", "/o/r.git/git-receive-pack/",
                            "https://api.example.com/r/git-receive-pack" };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        snprintf(in, sizeof in, "PUT %s HTTP/1.1\r\nHost: api.example.com\r\n\r\n", paths[i]);
        refused(in, -EACCES, "other than POST");
    }
    /* A query is not the path. */
    same("GET /o/r.git/info/refs?service=git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    /* Without push_refs, pushes are not read. */
    use(&basic, 1);
    same("GET /o/r.git/git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    bfree(&l);
}

static void test_push_keepalive(void **state) {
    (void)state;
    struct lz_cred_bind b = git_bind(agent_refs, 1, false);
    use(&b, 1);
    struct buf l = { 0 };
    cmd(&l, A40, B40, "refs/heads/agent/x", " report-status");
    bputs(&l, "0000");
    struct buf r = push_request(&l, true, 50);
    struct buf w = swapped(&r);
    /* Two pushes on one connection: passed on when fed in two reads. */
    struct lz_credreq *s;
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    struct lz_credout o = { 0 };
    char why[LZ_CRED_WHY_MAX];
    for (int i = 0; i < 2; i++) {
        o.len = 0;
        assert_int_equal(lz_credreq_feed(s, r.p, r.n, &o, why), 0);
        assert_bytes(o.p, o.len, w.p, w.n);
        assert_int_equal(lz_credreq_push_n(s), 1);
    }
    lz_credreq_free(s);
    /* In one read: the second refused (one list a call, for the audit). */
    struct buf both = { 0 };
    bput(&both, r.p, r.n);
    bput(&both, r.p, r.n);
    assert_int_equal(lz_credreq_new(HOST, B, NB, &s), 0);
    assert_int_equal(lz_credreq_feed(s, both.p, both.n, &o, why), -EACCES);
    assert_non_null(strstr(why, "a second push"));
    lz_credreq_free(s);
    free(o.p);
    bfree(&both);
    bfree(&w);
    bfree(&r);
    bfree(&l);
}

/* ---- the answers ---- */

static void test_forbidden(void **state) {
    (void)state;
    struct lz_credout o = { 0 };
    assert_int_equal(lz_cred_forbidden("Host evil.example is not api.example.com", &o), 0);
    static const char want[] = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 59\r\n"
                               "Connection: close\r\n\r\n"
                               "lazaret: refused: Host evil.example is not api.example.com\n";
    assert_bytes(o.p, o.len, want, sizeof want - 1);
    o.len = 0;
    assert_int_equal(lz_cred_forbidden("a\r\nSet-Cookie: x\x80\x01", &o), 0);
    static const char want2[] = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 37\r\n"
                                "Connection: close\r\n\r\n"
                                "lazaret: refused: a??Set-Cookie: x??\n";
    assert_bytes(o.p, o.len, want2, sizeof want2 - 1);
    /* A long reason is cut. */
    char longwhy[1000];
    memset(longwhy, 'w', sizeof longwhy - 1);
    longwhy[sizeof longwhy - 1] = '\0';
    o.len = 0;
    assert_int_equal(lz_cred_forbidden(longwhy, &o), 0);
    assert_true(o.len < 400);
    assert_int_equal(o.p[o.len - 1], '\n');
    free(o.p);
}

/* ---- responses ---- */

static int scan_all(const struct lz_cred_bind *b, size_t nb, const char *in, size_t cut, struct buf *sent) {
    struct lz_credscan *s;
    assert_int_equal(lz_credscan_new(b, nb, &s), 0);
    struct lz_credout o = { 0 };
    size_t n = strlen(in);
    int r = lz_credscan_feed(s, (const uint8_t *)in, cut, &o);
    if (r == 0) {
        bput(sent, o.p, o.len);
        o.len = 0;
        r = lz_credscan_feed(s, (const uint8_t *)in + cut, n - cut, &o);
    }
    if (r == 0) {
        bput(sent, o.p, o.len);
        o.len = 0;
        r = lz_credscan_end(s, &o);
        bput(sent, o.p, o.len);
    } else {
        assert_int_equal(o.len, 0);
        assert_int_equal(lz_credscan_end(s, &o), -EACCES);
    }
    lz_credscan_free(s);
    free(o.p);
    return r;
}

static void test_scan(void **state) {
    (void)state;
    struct lz_credscan *s;
    struct lz_credout o = { 0 };
    assert_int_equal(lz_credscan_new(&bearer, 1, &s), 0);
    /* Nothing that begins the value: nothing held (server-sent events
     * go out as they come). */
    const char *ev = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {\"a\": 1}\n\n";
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)ev, strlen(ev), &o), 0);
    assert_bytes(o.p, o.len, ev, strlen(ev));
    assert_int_equal(lz_credscan_held(s), 0);
    /* "gh" could begin it: held; "ghp_REALs" too; then not: out. */
    o.len = 0;
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)"data: gh", 8, &o), 0);
    assert_bytes(o.p, o.len, "data: ", 6);
    assert_int_equal(lz_credscan_held(s), 2);
    o.len = 0;
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)"p_REALs", 7, &o), 0);
    assert_int_equal(o.len, 0);
    assert_int_equal(lz_credscan_held(s), 9);
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)"ghp_", 4, &o), 0);
    assert_bytes(o.p, o.len, "ghp_REALs", 9);
    assert_int_equal(lz_credscan_held(s), 4);
    o.len = 0;
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)"X\n", 2, &o), 0);
    assert_bytes(o.p, o.len, "ghp_X\n", 6);
    assert_int_equal(lz_credscan_held(s), 0);
    /* Held at the end: flushed. */
    o.len = 0;
    assert_int_equal(lz_credscan_feed(s, (const uint8_t *)"ghp_R", 5, &o), 0);
    assert_int_equal(o.len, 0);
    assert_int_equal(lz_credscan_end(s, &o), 0);
    assert_bytes(o.p, o.len, "ghp_R", 5);
    lz_credscan_free(s);
    free(o.p);

    /* The value, split at every offset: refused, never whole out. */
    const char *resp = "{\"echo\": \"Bearer " VAL "\"}";
    for (size_t k = 0; k <= strlen(resp); k++) {
        struct buf sent = { 0 };
        assert_int_equal(scan_all(&bearer, 1, resp, k, &sent), -EACCES);
        assert_int_equal(count(sent.p ? sent.p : (const uint8_t *)"", sent.n, VAL), 0);
        assert_true(sent.n <= strlen("{\"echo\": \"Bearer "));
        bfree(&sent);
    }
    /* Control: one byte off passes whole, however cut. */
    const char *near = "{\"echo\": \"Bearer ghp_REALsecret0123456789ABCDEFGHIJKLMNOPq\"}";
    for (size_t k = 0; k <= strlen(near); k++) {
        struct buf sent = { 0 };
        assert_int_equal(scan_all(&bearer, 1, near, k, &sent), 0);
        assert_bytes(sent.p, sent.n, near, strlen(near));
        bfree(&sent);
    }
    /* BASIC: the Basic base64 too; and the value's base64 in any text
     * (base64 of "{\"t\":\"" VAL2 "\"}"). */
    const char *hidden[] = {
        "Authorization: Basic " B64_VAL2 "\r\n",
        "eyJ0IjoiczNjcjN0LWdpdC10b2tlbi12YWx1ZS1YWVotMDk4NzY1NDMyMSJ9",
        "x" VAL2 "x",
    };
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        for (size_t k = 0; k <= strlen(hidden[i]); k++) {
            struct buf sent = { 0 };
            assert_int_equal(scan_all(&basic, 1, hidden[i], k, &sent), -EACCES);
            bfree(&sent);
        }
    struct buf sent = { 0 };
    assert_int_equal(scan_all(&basic, 1, "eyJ0IjoiczNjcjN0LWdpdC10b2tlWC12YWx1ZS1YWVotMDk4NzY1NDMyMSJ9", 7, &sent), 0);
    bfree(&sent);
}

/* The scanner against a plain search, on streams made of bits of the
 * needles: it refuses exactly when a needle is in the stream, holds back
 * no more than the longest end that begins one. */
static void test_scan_model(void **state) {
    (void)state;
    struct lz_cred_bind b = bearer;
    b.value = (const uint8_t *)"abaabab1";
    b.value_len = 8;
    const char *needle = "abaabab1";
    uint64_t seed = 7;
    for (int t = 0; t < 3000; t++) {
        char in[64];
        size_t n = 1 + rnd(&seed) % 40;
        for (size_t i = 0; i < n; i++)
            in[i] = "ab1x"[rnd(&seed) % 4];
        in[n] = '\0';
        bool has = strstr(in, needle) != NULL;
        struct lz_credscan *s;
        assert_int_equal(lz_credscan_new(&b, 1, &s), 0);
        struct lz_credout o = { 0 };
        size_t off = 0, seen = 0;
        int r = 0;
        while (off < n && r == 0) {
            size_t k = 1 + rnd(&seed) % 5;
            if (k > n - off)
                k = n - off;
            r = lz_credscan_feed(s, (const uint8_t *)in + off, k, &o);
            off += k;
            if (r == 0) {
                seen = off;
                /* The held bytes: the longest end of in[0..seen) that
                 * begins the needle (a proper prefix). */
                size_t want = 0;
                for (size_t l = 1; l < strlen(needle) && l <= seen; l++)
                    if (memcmp(in + seen - l, needle, l) == 0)
                        want = l;
                assert_int_equal(lz_credscan_held(s), want);
                assert_int_equal(o.len, seen - want);
                assert_memory_equal(o.p, in, o.len);
            }
        }
        assert_int_equal(r != 0, has);
        if (!has) {
            assert_int_equal(lz_credscan_end(s, &o), 0);
            assert_bytes(o.p, o.len, in, n);
        }
        lz_credscan_free(s);
        free(o.p);
    }
}

/* ---- patterns and binds ---- */

static bool m(const char *pattern, const char *ref) {
    return lz_cred_ref_match(pattern, (const uint8_t *)ref, strlen(ref));
}

static void test_ref_match(void **state) {
    (void)state;
    assert_true(m("refs/heads/main", "refs/heads/main"));
    assert_false(m("refs/heads/main", "refs/heads/main2"));
    assert_false(m("refs/heads/main", "refs/heads/mai"));
    assert_false(m("refs/heads/main", "refs/heads/main/x"));
    assert_true(m("refs/heads/agent/*", "refs/heads/agent/x"));
    assert_false(m("refs/heads/agent/*", "refs/heads/agent/x/y"));
    assert_false(m("refs/heads/agent/*", "refs/heads/agent"));
    assert_false(m("refs/heads/agent/*", "refs/heads/agentx"));
    assert_true(m("refs/heads/agent/**", "refs/heads/agent/x"));
    assert_true(m("refs/heads/agent/**", "refs/heads/agent/x/y/z"));
    assert_false(m("refs/heads/agent/**", "refs/heads/agent"));
    assert_false(m("refs/heads/agent/**", "refs/heads/agents/x"));
    assert_true(m("refs/heads/**/wip", "refs/heads/wip"));
    assert_true(m("refs/heads/**/wip", "refs/heads/a/wip"));
    assert_true(m("refs/heads/**/wip", "refs/heads/a/b/wip"));
    assert_false(m("refs/heads/**/wip", "refs/heads/a/wip2"));
    assert_false(m("refs/heads/**/wip", "refs/heads/a/wip/x"));
    assert_true(m("refs/heads/feat-*", "refs/heads/feat-1"));
    assert_false(m("refs/heads/feat-*", "refs/heads/feat/1"));
    assert_true(m("refs/*/x", "refs/heads/x"));
    assert_false(m("refs/*/x", "refs/heads/y/x"));
    assert_true(m("refs/heads/*-wip-*", "refs/heads/a-wip-b"));
    assert_true(m("refs/heads/*-wip-*", "refs/heads/a-wip-wip-b"));
    assert_false(m("refs/heads/*-wip-*", "refs/heads/a-wipb"));
    assert_true(m("refs/**", "refs/tags/v1"));
    assert_true(m("refs/**/**", "refs/tags/v1"));
    assert_true(m("refs/heads/a**", "refs/heads/abc"));
    assert_false(m("refs/heads/a**", "refs/heads/a/bc"));

    assert_true(lz_cred_ref_pattern_ok("refs/heads/agent/*"));
    assert_true(lz_cred_ref_pattern_ok("refs/heads/**"));
    assert_true(lz_cred_ref_pattern_ok("refs/tags/v1.0"));
    assert_false(lz_cred_ref_pattern_ok("refs/"));
    assert_false(lz_cred_ref_pattern_ok("heads/main"));
    assert_false(lz_cred_ref_pattern_ok("refs//x"));
    assert_false(lz_cred_ref_pattern_ok("refs/x/"));
    assert_false(lz_cred_ref_pattern_ok("refs/a b"));
    assert_false(lz_cred_ref_pattern_ok("refs/a?"));
    assert_false(lz_cred_ref_pattern_ok("refs/a[b]"));
    assert_false(lz_cred_ref_pattern_ok("refs/a\tb"));
}

static void test_bind_checks(void **state) {
    (void)state;
    struct lz_credreq *s = NULL;
    struct lz_credscan *c = NULL;
    assert_int_equal(lz_credreq_new(HOST, &bearer, 1, &s), 0);
    lz_credreq_free(s);
    assert_int_equal(lz_credreq_new("bad host", &bearer, 1, &s), -EINVAL);
    assert_int_equal(lz_credreq_new("", &bearer, 1, &s), -EINVAL);
    assert_int_equal(lz_credreq_new(HOST, &bearer, 0, &s), -EINVAL);
    static const char *const bad_refs[] = { "heads/main" };
    struct lz_cred_bind b;
    struct {
        const char *field;
        struct lz_cred_bind v;
    } bad[] = {
        { "header", (struct lz_cred_bind){ .header = "Host" } },
        { "header", (struct lz_cred_bind){ .header = "content_length" } },
        { "header", (struct lz_cred_bind){ .header = "x y" } },
        { "header", (struct lz_cred_bind){ .header = "" } },
        { "placeholder", (struct lz_cred_bind){ .placeholder = "short" } },
        { "placeholder", (struct lz_cred_bind){ .placeholder = "lzph_0123456789:abcdef" } },
        { "value", (struct lz_cred_bind){ .value_len = 7 } },
        { "value", (struct lz_cred_bind){ .value = (const uint8_t *)"abc\r\nX-Injected: 1", .value_len = 19 } },
        { "value", (struct lz_cred_bind){ .value = (const uint8_t *)"trailing-sp ", .value_len = 12 } },
        { "prefix", (struct lz_cred_bind){ .prefix = "Bearer\r\n" } },
        { "prefix", (struct lz_cred_bind){ .prefix = " Bearer " } },
        { "suffix", (struct lz_cred_bind){ .suffix = "x " } },
        { "format", (struct lz_cred_bind){ .format = (enum lz_cred_format)7 } },
        { "push", (struct lz_cred_bind){ .push_refs = bad_refs, .n_push_refs = 1 } },
        { "push", (struct lz_cred_bind){ .n_push_refs = 1 } },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = bearer;
        const struct lz_cred_bind *v = &bad[i].v;
        if (v->header)
            b.header = v->header;
        if (v->placeholder)
            b.placeholder = v->placeholder;
        if (v->value_len)
            b.value_len = v->value_len;
        if (v->value)
            b.value = v->value;
        if (v->prefix)
            b.prefix = v->prefix;
        if (v->suffix)
            b.suffix = v->suffix;
        if (v->format)
            b.format = v->format;
        if (v->n_push_refs) {
            b.push_refs = v->push_refs;
            b.n_push_refs = v->n_push_refs;
        }
        if (lz_credreq_new(HOST, &b, 1, &s) != -EINVAL || lz_credscan_new(&b, 1, &c) != -EINVAL)
            fail_msg("bind %zu (%s) taken", i, bad[i].field);
    }
    /* BASIC: a username with ':' (the pair would read otherwise). */
    b = basic;
    b.username = "a:b";
    assert_int_equal(lz_credreq_new(HOST, &b, 1, &s), -EINVAL);
    b.username = NULL;
    assert_int_equal(lz_credreq_new(HOST, &b, 1, &s), -EINVAL);
    /* Two binds, one placeholder inside the other. */
    struct lz_cred_bind two[2] = { bearer, apikey };
    assert_int_equal(lz_credreq_new(HOST, two, 2, &s), -EINVAL);
    two[1].placeholder = PH "0";
    assert_int_equal(lz_credreq_new(HOST, two, 2, &s), -EINVAL);
    two[1].placeholder = PH2;
    assert_int_equal(lz_credreq_new(HOST, two, 2, &s), 0);
    lz_credreq_free(s);
    assert_int_equal(lz_credscan_new(two, 2, &c), 0);
    lz_credscan_free(c);
}

/* ---- many inputs: the value only where swapped ---- */

static void test_value_only_swapped(void **state) {
    (void)state;
    /* Requests put together from pieces that hold the placeholder in
     * every place: whatever is accepted carries the value once a swap
     * (run checks it) and in the swapped header only. */
    struct lz_cred_bind two[2] = { bearer, basic };
    use(two, 2);
    const char *auth[] = { "", "Authorization: Bearer " PH "\r\n", "Authorization: Basic " B64_PH2 "\r\n",
                           "Authorization: Bearer x\r\n", "authorization: Bearer " PH "\r\nAuthorization: y\r\n" };
    const char *extra[] = { "", "X-B: b\r\n", "X-A: " PH "\r\n", "X-A: lzph_\r\n" };
    const char *bodies[] = {
        "",
        "Content-Length: 5\r\n\r\nhello",
        "Content-Length: 37\r\n\r\n" PH,
        "Content-Length: 5\r\n\r\nlzph_",
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "Transfer-Encoding: chunked\r\n\r\n3\r\nlzp\r\n22\r\nh_0123456789abcdef0123456789abcdef\r\n0\r\n\r\n",
        "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: " PH "\r\n\r\n"
    };
    uint64_t seed = 99;
    unsigned accepted = 0, nrefused = 0;
    for (int t = 0; t < 1500; t++) {
        struct buf in = { 0 };
        int nreq = 1 + (int)(rnd(&seed) % 3);
        for (int q = 0; q < nreq; q++) {
            bputs(&in,
                  rnd(&seed) % 9 ? "POST /x HTTP/1.1\r\nHost: api.example.com\r\n"
                                 : "POST /" PH " HTTP/1.1\r\nHost: api.example.com\r\n");
            bputs(&in, auth[rnd(&seed) % (sizeof auth / sizeof auth[0])]);
            bputs(&in, extra[rnd(&seed) % 8 % (sizeof extra / sizeof extra[0])]);
            size_t b = rnd(&seed) % 12;
            const char *body = bodies[b < sizeof bodies / sizeof bodies[0] ? b : b % 2 * 4];
            if (!*body)
                bputs(&in, "\r\n");
            bputs(&in, body);
        }
        for (enum cut k = WHOLE; k <= RANDOM; k++) {
            struct run x = run(in.p, in.n, k, (size_t)t);
            if (x.r != 0 && k == WHOLE)
                nrefused++;
            if (x.r == 0 && k == WHOLE) {
                accepted++;
                /* Each value only on its header's line. */
                const char *v[] = { "Authorization: Bearer " VAL "\r\n", "Authorization: Basic " B64_VAL2 "\r\n" };
                assert_int_equal(count(x.sent.p, x.sent.n, v[0]) + count(x.sent.p, x.sent.n, v[1]), x.counts.swaps);
                assert_int_equal(count(x.sent.p, x.sent.n, PH), 0);
            }
            bfree(&x.sent);
        }
        bfree(&in);
    }
    print_message("%u accepted, %u refused\n", accepted, nrefused);
    assert_true(accepted > 200 && nrefused > 200);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_template), cmocka_unit_test(test_unchanged),
        cmocka_unit_test(test_host),          cmocka_unit_test(test_placeholder_elsewhere),
        cmocka_unit_test(test_duplicate),     cmocka_unit_test(test_basic),
        cmocka_unit_test(test_body_length),   cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_pipelined),     cmocka_unit_test(test_refusal_final),
        cmocka_unit_test(test_bounds),        cmocka_unit_test(test_push_captured),
        cmocka_unit_test(test_push_policy),   cmocka_unit_test(test_push_report_forms),
        cmocka_unit_test(test_push_refusals), cmocka_unit_test(test_push_keepalive),
        cmocka_unit_test(test_forbidden),     cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_model),    cmocka_unit_test(test_ref_match),
        cmocka_unit_test(test_bind_checks),   cmocka_unit_test(test_value_only_swapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
