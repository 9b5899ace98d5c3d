/* Unit tests for the ClientHello reader (tlshello.c): hellos captured from
 * openssl s_client and curl on loopback (tests/unit/data/tls/capture.py),
 * hellos written byte by byte, every prefix of each, and every refusal
 * with a well-formed control next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tlshello.h"

#include <stdio.h>
#include <stdlib.h>

/* A byte writer for the tests. */
struct pk {
    uint8_t b[LZ_TLS_PEEK_MAX + 4096];
    size_t n;
};
static void u8(struct pk *p, unsigned v) { p->b[p->n++] = (uint8_t)v; }
static void u16(struct pk *p, unsigned v) {
    u8(p, v >> 8);
    u8(p, v & 0xff);
}
static void u24(struct pk *p, unsigned v) {
    u8(p, v >> 16);
    u16(p, v & 0xffff);
}
static void raw(struct pk *p, const void *s, size_t n) {
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void fill(struct pk *p, unsigned v, size_t n) {
    memset(p->b + p->n, (int)v, n);
    p->n += n;
}
static void set16(uint8_t *at, unsigned v) {
    at[0] = (uint8_t)(v >> 8);
    at[1] = (uint8_t)v;
}
/* Overwrites the 2-byte length at off with what was written after it. */
static void patch16(struct pk *p, size_t off) {
    size_t l = p->n - off - 2;
    p->b[off] = (uint8_t)(l >> 8);
    p->b[off + 1] = (uint8_t)l;
}

/* One extension, its data given whole. */
static void ext(struct pk *p, unsigned type, const void *data, size_t n) {
    u16(p, type);
    u16(p, (unsigned)n);
    raw(p, data, n);
}
/* server_name with one host_name. */
static void ext_sni(struct pk *p, const char *name) {
    size_t l = strlen(name);
    u16(p, LZ_TLS_EXT_SERVER_NAME);
    u16(p, (unsigned)(l + 5));
    u16(p, (unsigned)(l + 3));
    u8(p, 0);
    u16(p, (unsigned)l);
    raw(p, name, l);
}
/* ALPN with the names of a NULL-terminated list. */
static void ext_alpn(struct pk *p, const char *const *names) {
    u16(p, LZ_TLS_EXT_ALPN);
    size_t at = p->n;
    u16(p, 0);
    size_t list = p->n;
    u16(p, 0);
    for (; *names; names++) {
        u8(p, (unsigned)strlen(*names));
        raw(p, *names, strlen(*names));
    }
    patch16(p, list);
    patch16(p, at);
}
static void ext_versions(struct pk *p, const uint16_t *v, size_t n) {
    u16(p, LZ_TLS_EXT_SUPPORTED_VERSIONS);
    u16(p, (unsigned)(1 + 2 * n));
    u8(p, (unsigned)(2 * n));
    for (size_t i = 0; i < n; i++)
        u16(p, v[i]);
}

/* The fields before the extensions, as a TLS 1.3 client writes them: a
 * 32-byte session ID (middlebox compatibility), three suites, null. */
static void body_head(struct pk *p) {
    p->n = 0;
    u16(p, LZ_TLS_VERSION_12);
    fill(p, 0x11, 32);
    u8(p, 32);
    fill(p, 0x22, 32);
    u16(p, 6);
    u16(p, 0x1301);
    u16(p, 0x1302);
    u16(p, 0xc02f);
    u8(p, 1);
    u8(p, 0);
}
/* body_head and an extension block of the given extensions. */
static void body_exts(struct pk *p, const struct pk *exts) {
    body_head(p);
    u16(p, (unsigned)exts->n);
    raw(p, exts->b, exts->n);
}

/* The usual extensions of a TLS 1.3 hello to name, around the given
 * extra ones (written before key_share; NULL: none). */
static void usual_exts(struct pk *e, const char *name, const struct pk *extra) {
    static const uint16_t v[] = { 0x0a0a, LZ_TLS_VERSION_13, LZ_TLS_VERSION_12 };
    static const char *const alpn[] = { "h2", "http/1.1", NULL };
    e->n = 0;
    ext(e, 0x0a0a, "", 0); /* GREASE */
    if (name)
        ext_sni(e, name);
    ext(e, 23, "", 0);                         /* extended_master_secret */
    ext(e, 10, "\x00\x04\x00\x1d\x00\x17", 6); /* supported_groups */
    ext(e, 13, "\x00\x04\x04\x03\x08\x04", 6); /* signature_algorithms */
    ext(e, 45, "\x01\x01", 2);                 /* psk_key_exchange_modes */
    ext_alpn(e, alpn);
    ext_versions(e, v, 3);
    if (extra)
        raw(e, extra->b, extra->n);
    u16(e, LZ_TLS_EXT_KEY_SHARE);
    u16(e, 2 + 4 + 32);
    u16(e, 4 + 32);
    u16(e, 0x001d);
    u16(e, 32);
    fill(e, 0x33, 32);
}

/* The handshake message (type, 24-bit length, body) in records whose
 * fragments end at the handshake offsets in cuts (ascending, n_cuts of
 * them; none: one record). */
static void records(struct pk *out, unsigned hs_type, const struct pk *body, const size_t *cuts, size_t n_cuts) {
    static struct pk m;
    m.n = 0;
    u8(&m, hs_type);
    u24(&m, (unsigned)body->n);
    raw(&m, body->b, body->n);
    out->n = 0;
    size_t from = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t to = cuts && i < n_cuts ? cuts[i] : m.n;
        u8(out, LZ_TLS_CT_HANDSHAKE);
        u16(out, 0x0301);
        u16(out, (unsigned)(to - from));
        raw(out, m.b + from, to - from);
        from = to;
    }
}
static void hello(struct pk *out, const struct pk *body) { records(out, LZ_TLS_HS_CLIENT_HELLO, body, NULL, 0); }

static struct lz_tls_hello parse_ok(const uint8_t *b, size_t n) {
    struct lz_tls_hello h;
    enum lz_tls_reason why = LZ_TLS_OK;
    size_t need = 0;
    int r = lz_tls_hello_parse(b, n, &h, &need, &why);
    if (r != 0)
        fail_msg("hello refused (%d): %s", r, r == -EAGAIN ? "need more" : lz_tls_reason_str(why));
    return h;
}

/* A refusal: ret and need untouched, a known reason. */
static enum lz_tls_reason refused(const uint8_t *b, size_t n) {
    struct lz_tls_hello h;
    memset(&h, 0x5a, sizeof h);
    enum lz_tls_reason why = LZ_TLS_OK;
    size_t need = 77;
    assert_int_equal(lz_tls_hello_parse(b, n, &h, &need, &why), -EBADMSG);
    assert_int_equal(h.n_alpn, 0x5a);
    assert_int_equal(need, 77);
    assert_int_not_equal(why, LZ_TLS_OK);
    assert_string_not_equal(lz_tls_reason_str(why), "unknown reason");
    return why;
}
static enum lz_tls_reason body_refused(const struct pk *body) {
    static struct pk p;
    hello(&p, body);
    enum lz_tls_reason why = refused(p.b, p.n), why2 = LZ_TLS_OK;
    struct lz_tls_hello h;
    assert_int_equal(lz_tls_hello_parse_body(body->b, body->n, &h, &why2), -EBADMSG);
    assert_int_equal(why2, why);
    return why;
}
static struct lz_tls_hello body_ok(const struct pk *body) {
    static struct pk p;
    hello(&p, body);
    return parse_ok(p.b, p.n);
}
/* The hello with these extensions refused for this reason. */
static void exts_refused(const struct pk *exts, enum lz_tls_reason want) {
    static struct pk body;
    body_exts(&body, exts);
    assert_int_equal(body_refused(&body), want);
}

/* Every proper prefix asks for more, never more than the whole, and
 * touches nothing else; the whole parses. */
static void prefixes_wait(const uint8_t *b, size_t n) {
    for (size_t k = 0; k < n; k++) {
        struct lz_tls_hello h;
        memset(&h, 0x5a, sizeof h);
        enum lz_tls_reason why = LZ_TLS_OK;
        size_t need = 0;
        int r = lz_tls_hello_parse(b, k, &h, &need, &why);
        if (r != -EAGAIN)
            fail_msg("prefix %zu of %zu: %d (%s)", k, n, r, lz_tls_reason_str(why));
        assert_true(need > k && need <= n && need <= LZ_TLS_PEEK_MAX);
        assert_int_equal(why, LZ_TLS_OK);
        assert_int_equal(h.n_alpn, 0x5a);
    }
    (void)parse_ok(b, n);
}

/* A hello captured on loopback (tests/unit/data/tls/capture.py). */
static size_t captured(const char *file, uint8_t *buf, size_t cap) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/tls/%s", src ? src : ".", file);
    FILE *f = fopen(path, "rbe");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    return n;
}

static void test_real_hellos(void **state) {
    (void)state;
    static struct pk p, q;
    struct lz_tls_hello h;

    /* openssl s_client -servername Api.Allowed.TEST -alpn h2,http/1.1 */
    p.n = captured("openssl-sni-alpn.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_true(h.has_sni);
    assert_string_equal(h.sni, "api.allowed.test");
    assert_int_equal(h.versions, LZ_TLS_V12 | LZ_TLS_V13);
    assert_int_equal(h.legacy_version, LZ_TLS_VERSION_12);
    assert_int_equal(h.used, p.n);
    assert_int_equal(h.n_records, 1);
    assert_true(h.has_alpn);
    assert_int_equal(h.n_alpn, 2);
    assert_string_equal(h.alpn[0].name, "h2");
    assert_int_equal(h.alpn[0].len, 2);
    assert_string_equal(h.alpn[1].name, "http/1.1");
    assert_true(lz_tls_hello_offers_alpn(&h, "http/1.1"));
    assert_false(lz_tls_hello_offers_alpn(&h, "http/1.0"));
    assert_false(lz_tls_hello_offers_alpn(&h, "h"));
    assert_false(h.ech || h.psk || h.early_data);
    prefixes_wait(p.b, p.n);

    /* -noservername: parses, with no name (the gate refuses it by policy). */
    p.n = captured("openssl-nosni.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_false(h.has_sni);
    assert_string_equal(h.sni, "");
    assert_false(h.has_alpn);
    assert_int_equal(h.n_alpn, 0);
    prefixes_wait(p.b, p.n);

    /* -tls1_2 -servername allowed.test. (a trailing dot): no
     * supported_versions, so TLS 1.2 only; the name in its canonical form. */
    p.n = captured("openssl-tls12.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_int_equal(h.versions, LZ_TLS_V12);
    assert_string_equal(h.sni, "allowed.test");
    prefixes_wait(p.b, p.n);

    /* 16 ALPN names of 24 bytes, -max_send_frag 512: OpenSSL sends the
     * hello in two records (512 + 195 bytes). */
    p.n = captured("openssl-frag.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_int_equal(h.n_records, 2);
    assert_int_equal(h.used, p.n);
    assert_int_equal(p.b[3] << 8 | p.b[4], 512);
    assert_string_equal(h.sni, "www.allowed.test");
    assert_int_equal(h.n_alpn, 16);
    assert_string_equal(h.alpn[15].name, "a-long-protocol-name-15");
    prefixes_wait(p.b, p.n);

    /* curl https://api.allowed.test/ (OpenSSL 3.0 underneath). */
    p.n = captured("curl.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_string_equal(h.sni, "api.allowed.test");
    assert_int_equal(h.versions, LZ_TLS_V12 | LZ_TLS_V13);
    assert_true(lz_tls_hello_offers_alpn(&h, "h2"));
    assert_true(lz_tls_hello_offers_alpn(&h, "http/1.1"));
    prefixes_wait(p.b, p.n);

    /* curl --tls-max 1.2 --http1.1 */
    p.n = captured("curl-tls12.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_string_equal(h.sni, "allowed.test");
    assert_int_equal(h.versions, LZ_TLS_V12);
    assert_int_equal(h.n_alpn, 1);
    assert_string_equal(h.alpn[0].name, "http/1.1");
    prefixes_wait(p.b, p.n);

    /* -sess_in with a ticket from a local s_server: pre_shared_key, last. */
    p.n = captured("openssl-resume.bin", p.b, sizeof p.b);
    h = parse_ok(p.b, p.n);
    assert_true(h.psk);
    assert_string_equal(h.sni, "allowed.test");
    prefixes_wait(p.b, p.n);

    /* What follows the hello's records (a change_cipher_spec, early data)
     * is not read: the same answer, used stops at the hello. */
    p.n = captured("openssl-sni-alpn.bin", p.b, sizeof p.b);
    q = p;
    raw(&q, "\x14\x03\x03\x00\x01\x01\x17\x03\x03\x00\x05hello", 16);
    h = parse_ok(q.b, q.n);
    assert_int_equal(h.used, p.n);
    assert_string_equal(h.sni, "api.allowed.test");
    /* A byte more inside the record is not: the record ends after the hello. */
    q = p;
    u8(&q, 0);
    set16(q.b + 3, (unsigned)(p.n - LZ_TLS_RECORD_HDR + 1));
    assert_int_equal(refused(q.b, q.n), LZ_TLS_R_TRAILING);
    /* A handshake record after the hello's is not read either. */
    q = p;
    raw(&q, "\x16\x03\x03\x00\x04\x0b\x00\x00\x00", 9);
    h = parse_ok(q.b, q.n);
    assert_int_equal(h.used, p.n);
}

/* A hello as Chrome sends it with a post-quantum hybrid key share
 * (X25519MLKEM768, 0x11ec: 1184 + 32 bytes, and a plain X25519 share),
 * GREASE, ECH and a padding extension: ~1.8 KB, one record. */
static void test_pq_ech(void **state) {
    (void)state;
    static struct pk e, extra, body, p;
    static const uint16_t v[] = { 0x5a5a, LZ_TLS_VERSION_13, LZ_TLS_VERSION_12 };
    static const char *const alpn[] = { "h2", "http/1.1", NULL };
    e.n = 0;
    ext(&e, 0x1a1a, "", 0);
    ext_sni(&e, "Chat.Example.com");
    ext(&e, 23, "", 0);
    ext(&e, 65281, "\x00", 1);
    ext(&e, 10, "\x00\x08\x2a\x2a\x11\xec\x00\x1d\x00\x17", 10);
    ext(&e, 11, "\x01\x00", 2);
    ext(&e, 35, "", 0);
    ext_alpn(&e, alpn);
    ext(&e, 5, "\x01\x00\x00\x00\x00", 5);
    ext(&e, 13, "\x00\x04\x04\x03\x08\x04", 6);
    ext(&e, 18, "", 0);
    u16(&e, LZ_TLS_EXT_KEY_SHARE);
    size_t ks = e.n;
    u16(&e, 0);
    size_t list = e.n;
    u16(&e, 0);
    u16(&e, 0x2a2a);
    u16(&e, 1);
    u8(&e, 0);
    u16(&e, 0x11ec);
    u16(&e, 1216);
    fill(&e, 0x44, 1216);
    u16(&e, 0x001d);
    u16(&e, 32);
    fill(&e, 0x55, 32);
    patch16(&e, list);
    patch16(&e, ks);
    ext(&e, 45, "\x01\x01", 2);
    ext_versions(&e, v, 3);
    ext(&e, 27, "\x02\x00\x02", 3);
    /* ECH outer: type 0, suite, config id, enc (32), payload (~200) */
    u16(&e, LZ_TLS_EXT_ECH);
    size_t ech = e.n;
    u16(&e, 0);
    raw(&e, "\x00\x00\x01\x00\x01\x7f\x00\x20", 8);
    fill(&e, 0x66, 32);
    u16(&e, 208);
    fill(&e, 0x77, 208);
    patch16(&e, ech);
    ext(&e, 0x3a3a, "\x00", 1);
    ext(&e, 21, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16); /* padding */
    body_exts(&body, &e);
    hello(&p, &body);
    assert_true(p.n > 1700 && p.n < 2000);
    struct lz_tls_hello h = parse_ok(p.b, p.n);
    assert_int_equal(h.n_records, 1);
    assert_string_equal(h.sni, "chat.example.com");
    assert_true(h.ech);
    assert_false(h.psk);
    assert_int_equal(h.versions, LZ_TLS_V12 | LZ_TLS_V13);
    assert_int_equal(h.n_alpn, 2);
    prefixes_wait(p.b, p.n);
    /* The same hello in three records cut inside its header, inside the
     * key share and one byte before the end. */
    size_t cuts[] = { 2, 900, body.n + 3 };
    records(&p, LZ_TLS_HS_CLIENT_HELLO, &body, cuts, 3);
    h = parse_ok(p.b, p.n);
    assert_int_equal(h.n_records, 4);
    assert_string_equal(h.sni, "chat.example.com");
    assert_true(h.ech);
    prefixes_wait(p.b, p.n);

    /* early_data, then pre_shared_key last. */
    extra.n = 0;
    ext(&extra, LZ_TLS_EXT_EARLY_DATA, "", 0);
    usual_exts(&e, "allowed.test", &extra);
    ext(&e, LZ_TLS_EXT_PRE_SHARED_KEY, "\x00\x00", 2);
    body_exts(&body, &e);
    h = body_ok(&body);
    assert_true(h.early_data && h.psk);
}

/* The hello in two records, cut at every offset; then at the limits of
 * the record layer. */
static void test_records(void **state) {
    (void)state;
    static struct pk e, body, p, q;
    usual_exts(&e, "www.allowed.test", NULL);
    body_exts(&body, &e);
    hello(&p, &body);
    struct lz_tls_hello one = parse_ok(p.b, p.n);
    assert_int_equal(one.n_records, 1);
    for (size_t cut = 1; cut < body.n + 4; cut++) {
        records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, &cut, 1);
        assert_int_equal(q.n, p.n + LZ_TLS_RECORD_HDR);
        struct lz_tls_hello two = parse_ok(q.b, q.n);
        assert_int_equal(two.n_records, 2);
        assert_int_equal(two.used, q.n);
        assert_string_equal(two.sni, one.sni);
        assert_int_equal(two.versions, one.versions);
        assert_int_equal(two.n_alpn, one.n_alpn);
        assert_memory_equal(two.alpn, one.alpn, sizeof one.alpn);
        if (cut % 13 == 1)
            prefixes_wait(q.b, q.n);
    }
    /* One-byte records for the header: four records are the limit. */
    size_t cuts[] = { 1, 2, 3, 4 };
    records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, cuts, 3);
    assert_int_equal(parse_ok(q.b, q.n).n_records, 4);
    records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, cuts, 4);
    assert_int_equal(refused(q.b, q.n), LZ_TLS_R_RECORDS);
    /* ... refused as soon as a fifth record is needed, before it comes. */
    assert_int_equal(refused(q.b, 4 * LZ_TLS_RECORD_HDR + 4), LZ_TLS_R_RECORDS);

    /* A record of another content type in the middle: an alert (21),
     * change_cipher_spec (20), application data (23). */
    size_t mid = 100;
    static const uint8_t types[] = { 20, 21, 23, 24, 0x80 };
    for (size_t i = 0; i < sizeof types; i++) {
        records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, &mid, 1);
        q.b[LZ_TLS_RECORD_HDR + mid] = types[i];
        assert_int_equal(refused(q.b, q.n), LZ_TLS_R_NOT_HANDSHAKE);
        assert_int_equal(refused(q.b, LZ_TLS_RECORD_HDR + mid + 1), LZ_TLS_R_NOT_HANDSHAKE);
    }
    /* An empty record, at the start or in the middle. */
    q.n = 0;
    raw(&q, "\x16\x03\x01\x00\x00", 5);
    raw(&q, p.b, p.n);
    assert_int_equal(refused(q.b, q.n), LZ_TLS_R_RECORD_LENGTH);
    assert_int_equal(refused(q.b, 5), LZ_TLS_R_RECORD_LENGTH);
    records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, &mid, 1);
    q.b[LZ_TLS_RECORD_HDR + mid + 3] = 0;
    q.b[LZ_TLS_RECORD_HDR + mid + 4] = 0;
    assert_int_equal(refused(q.b, q.n), LZ_TLS_R_RECORD_LENGTH);
    /* A record longer than 2^14. */
    q = p;
    q.b[3] = 0x40;
    q.b[4] = 0x01;
    assert_int_equal(refused(q.b, 5), LZ_TLS_R_RECORD_LENGTH);
    /* A second record that runs past the hello's end: refused at its
     * header. */
    records(&q, LZ_TLS_HS_CLIENT_HELLO, &body, &mid, 1);
    size_t r2 = LZ_TLS_RECORD_HDR + mid;
    set16(q.b + r2 + 3, (unsigned)(q.b[r2 + 3] << 8 | q.b[r2 + 4]) + 1);
    assert_int_equal(refused(q.b, r2 + LZ_TLS_RECORD_HDR), LZ_TLS_R_TRAILING);
    /* A first record longer than the hello: refused once the handshake
     * header tells the hello's length. */
    q = p;
    u8(&q, 0);
    set16(q.b + 3, (unsigned)(p.n - LZ_TLS_RECORD_HDR + 1));
    assert_int_equal(refused(q.b, LZ_TLS_RECORD_HDR + 4), LZ_TLS_R_TRAILING);
    /* A record that could not hold a hello at all: 3 header bytes in the
     * first, then a second announcing 2^14 more. */
    q.n = 0;
    raw(&q, "\x16\x03\x01\x00\x03\x01\x00\x00\x16\x03\x01\x40\x00", 13);
    assert_int_equal(refused(q.b, q.n), LZ_TLS_R_TOO_LONG);

    /* Record versions: 0x0301..0x0303, checked as soon as each byte is. */
    static const struct { uint8_t maj, min; } bad[] = { { 3, 0 }, { 3, 4 }, { 2, 0 }, { 0xfe, 0xfd }, { 0x7f, 0x1c } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        q = p;
        q.b[1] = bad[i].maj;
        q.b[2] = bad[i].min;
        assert_int_equal(refused(q.b, q.n), LZ_TLS_R_RECORD_VERSION);
        assert_int_equal(refused(q.b, bad[i].maj == 3 ? 3 : 2), LZ_TLS_R_RECORD_VERSION);
    }
    for (unsigned min = 1; min <= 3; min++) {
        q = p;
        q.b[2] = (uint8_t)min;
        (void)parse_ok(q.b, q.n);
    }
    /* Not TLS at all: refused from the first byte. */
    assert_int_equal(refused((const uint8_t *)"GET / HTTP/1.1\r\n", 16), LZ_TLS_R_NOT_HANDSHAKE);
    assert_int_equal(refused((const uint8_t *)"G", 1), LZ_TLS_R_NOT_HANDSHAKE);
    assert_int_equal(refused((const uint8_t *)"\x80\x2e\x01\x03\x01", 5), LZ_TLS_R_NOT_HANDSHAKE); /* SSLv2 */
    assert_int_equal(refused((const uint8_t *)"\x17\x03\x03\x00\x01\x00", 6), LZ_TLS_R_NOT_HANDSHAKE);
    /* Nothing yet: wait for a record header. */
    size_t need = 0;
    struct lz_tls_hello h;
    assert_int_equal(lz_tls_hello_parse(p.b, 0, &h, &need, NULL), -EAGAIN);
    assert_int_equal(need, LZ_TLS_RECORD_HDR);
    assert_int_equal(lz_tls_hello_parse(p.b, 0, &h, NULL, NULL), -EAGAIN);
    assert_int_equal(lz_tls_hello_parse(p.b, 5, &h, &need, NULL), -EAGAIN);
    assert_int_equal(need, p.n);
}

/* The handshake header and the fixed fields. */
static void test_fixed_fields(void **state) {
    (void)state;
    static struct pk e, body, p, q;
    usual_exts(&e, "allowed.test", NULL);
    body_exts(&body, &e);
    (void)body_ok(&body);

    /* A ServerHello (2), a Certificate (11): not a ClientHello, refused
     * from the first handshake byte. */
    records(&p, 2, &body, NULL, 0);
    assert_int_equal(refused(p.b, p.n), LZ_TLS_R_NOT_HELLO);
    assert_int_equal(refused(p.b, 6), LZ_TLS_R_NOT_HELLO);
    records(&p, 11, &body, NULL, 0);
    assert_int_equal(refused(p.b, p.n), LZ_TLS_R_NOT_HELLO);

    /* Handshake lengths: past LZ_TLS_HELLO_MAX, below the smallest hello. */
    hello(&p, &body);
    q = p;
    q.b[6] = 0x00;
    q.b[7] = 0x3f;
    q.b[8] = 0xfd; /* 16381 + 4 */
    assert_int_equal(refused(q.b, 9), LZ_TLS_R_TOO_LONG);
    q.b[6] = 0xff;
    assert_int_equal(refused(q.b, 9), LZ_TLS_R_TOO_LONG);
    q.b[6] = 0;
    q.b[7] = 0;
    q.b[8] = LZ_TLS_HELLO_BODY_MIN - 1;
    assert_int_equal(refused(q.b, 9), LZ_TLS_R_TOO_SHORT);
    /* The largest hello: 16384 bytes with its header, in two records
     * (a padding extension fills it). */
    static struct pk big;
    big = e;
    size_t pad = LZ_TLS_HELLO_MAX - 4 - (body.n + 4);
    u16(&big, 21);
    u16(&big, (unsigned)pad);
    fill(&big, 0, pad);
    body_exts(&body, &big);
    assert_int_equal(body.n + 4, LZ_TLS_HELLO_MAX);
    size_t cut = LZ_TLS_RECORD_MAX - 1;
    records(&p, LZ_TLS_HS_CLIENT_HELLO, &body, &cut, 1);
    assert_int_equal(parse_ok(p.b, p.n).n_records, 2);
    assert_int_equal(p.n, 2 * LZ_TLS_RECORD_HDR + LZ_TLS_HELLO_MAX);
    size_t need = 0;
    struct lz_tls_hello h;
    assert_int_equal(lz_tls_hello_parse(p.b, 5, &h, &need, NULL), -EAGAIN);
    assert_int_equal(need, LZ_TLS_RECORD_HDR + LZ_TLS_RECORD_MAX - 1);
    /* One byte more is one too many. */
    u8(&big, 0);
    big.b[big.n - pad - 3] = (uint8_t)((pad + 1) >> 8);
    big.b[big.n - pad - 2] = (uint8_t)(pad + 1);
    body_exts(&body, &big);
    records(&p, LZ_TLS_HS_CLIENT_HELLO, &body, &cut, 1);
    assert_int_equal(refused(p.b, p.n), LZ_TLS_R_TOO_LONG);
    assert_int_equal(lz_tls_hello_parse_body(body.b, body.n, &h, NULL), -EBADMSG);

    /* legacy_version: 0x0303 only, refused as soon as it is seen. */
    static const unsigned versions[] = { 0x0300, 0x0301, 0x0302, 0x0304, 0x7f1c, 0xfefd };
    usual_exts(&e, "allowed.test", NULL);
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        body_exts(&body, &e);
        body.b[0] = (uint8_t)(versions[i] >> 8);
        body.b[1] = (uint8_t)versions[i];
        assert_int_equal(body_refused(&body), LZ_TLS_R_VERSION);
        hello(&p, &body);
        assert_int_equal(refused(p.b, 11), LZ_TLS_R_VERSION);
    }
    /* Session ID: 0..32 bytes. */
    for (unsigned sid = 0; sid <= 33; sid += 11) {
        body.n = 0;
        u16(&body, LZ_TLS_VERSION_12);
        fill(&body, 0x11, 32);
        u8(&body, sid);
        fill(&body, 0x22, sid);
        raw(&body, "\x00\x02\x13\x01\x01\x00", 6);
        u16(&body, (unsigned)e.n);
        raw(&body, e.b, e.n);
        if (sid <= 32)
            assert_string_equal(body_ok(&body).sni, "allowed.test");
        else
            assert_int_equal(body_refused(&body), LZ_TLS_R_SESSION_ID);
    }
    /* Cipher suites: even and non-empty; compression: non-empty, with
     * null. Each with what follows kept whole. */
    static const struct {
        const char *bytes;
        size_t n;
        enum lz_tls_reason want;
    } mid[] = {
        { "\x00\x02\x13\x01\x01\x00", 6, LZ_TLS_OK },
        { "\x00\x04\x13\x01\xc0\x2f\x02\x01\x00", 9, LZ_TLS_OK },
        { "\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 18, LZ_TLS_R_CIPHERS },
        { "\x00\x03\x13\x01\x13\x01\x00", 7, LZ_TLS_R_CIPHERS },
        { "\x00\x02\x13\x01\x00", 5, LZ_TLS_R_COMPRESSION },
        { "\x00\x02\x13\x01\x01\x01", 6, LZ_TLS_R_COMPRESSION },
        { "\x00\x02\x13\x01\x02\x01\x40", 7, LZ_TLS_R_COMPRESSION },
    };
    for (size_t i = 0; i < sizeof mid / sizeof mid[0]; i++) {
        body.n = 0;
        u16(&body, LZ_TLS_VERSION_12);
        fill(&body, 0x11, 32);
        u8(&body, 0);
        raw(&body, mid[i].bytes, mid[i].n);
        u16(&body, (unsigned)e.n);
        raw(&body, e.b, e.n);
        if (mid[i].want == LZ_TLS_OK)
            (void)body_ok(&body);
        else
            assert_int_equal(body_refused(&body), mid[i].want);
    }
    /* Lengths that run past the hello: the session ID, the suites, the
     * compression list, the extension block. */
    body.n = 0;
    u16(&body, LZ_TLS_VERSION_12);
    fill(&body, 0x11, 32);
    u8(&body, 0);
    raw(&body, "\x00\x02\x13\x01\x01\x00", 6);
    size_t base = body.n;
    (void)body_ok(&body); /* no extensions at all: TLS 1.2 without a name */
    h = body_ok(&body);
    assert_false(h.has_sni);
    assert_int_equal(h.versions, LZ_TLS_V12);
    u16(&body, 0);
    assert_false(body_ok(&body).has_sni); /* an empty extension block */
    body.n = base;
    u8(&body, 0); /* half an extension-block length */
    assert_int_equal(body_refused(&body), LZ_TLS_R_LENGTH);
    body.n = base;
    u16(&body, 1); /* a block longer than what is left */
    assert_int_equal(body_refused(&body), LZ_TLS_R_LENGTH);
    body.n = base;
    u16(&body, 0);
    u8(&body, 0); /* a byte after the block */
    assert_int_equal(body_refused(&body), LZ_TLS_R_TRAILING);
    q.n = 0;
    u16(&q, LZ_TLS_VERSION_12);
    fill(&q, 0x11, 32);
    u8(&q, 32); /* a session ID that eats the rest */
    fill(&q, 0x22, 8);
    assert_int_equal(body_refused(&q), LZ_TLS_R_LENGTH);
    q.n = 0;
    u16(&q, LZ_TLS_VERSION_12);
    fill(&q, 0x11, 32);
    u8(&q, 0);
    u16(&q, 40); /* suites past the end */
    fill(&q, 0x13, 8);
    assert_int_equal(body_refused(&q), LZ_TLS_R_LENGTH);
    q.n = 0;
    u16(&q, LZ_TLS_VERSION_12);
    fill(&q, 0x11, 32);
    u8(&q, 0);
    raw(&q, "\x00\x02\x13\x01\x09\x00", 6); /* compression past the end */
    assert_int_equal(body_refused(&q), LZ_TLS_R_LENGTH);
}

static void test_extensions(void **state) {
    (void)state;
    static struct pk e, x, body;
    /* An extension longer than the block; a type with half a length. */
    usual_exts(&e, "allowed.test", NULL);
    e.b[e.n - 40] = 0xff; /* key_share's length */
    exts_refused(&e, LZ_TLS_R_LENGTH);
    usual_exts(&e, "allowed.test", NULL);
    raw(&e, "\x00\x15\x00", 3);
    exts_refused(&e, LZ_TLS_R_LENGTH);
    /* A type twice: key_share, server_name, a GREASE value, unknown ones. */
    static const unsigned dup[] = { LZ_TLS_EXT_KEY_SHARE, 0x0a0a, 23, 13 };
    for (size_t i = 0; i < sizeof dup / sizeof dup[0]; i++) {
        usual_exts(&e, "allowed.test", NULL);
        ext(&e, dup[i], "\x00\x00", dup[i] == 0x0a0a || dup[i] == 23 ? 0 : 2);
        exts_refused(&e, LZ_TLS_R_EXT_DUP);
    }
    x.n = 0;
    ext_sni(&x, "other.test");
    usual_exts(&e, "allowed.test", &x);
    exts_refused(&e, LZ_TLS_R_EXT_DUP);
    usual_exts(&e, "allowed.test", NULL);
    ext(&e, 0xffff, "", 0);
    ext(&e, 0xfffe, "", 0);
    ext(&e, 0, "", 0);
    exts_refused(&e, LZ_TLS_R_EXT_DUP);
    /* pre_shared_key: last only. */
    x.n = 0;
    ext(&x, LZ_TLS_EXT_PRE_SHARED_KEY, "\x00\x00", 2);
    usual_exts(&e, "allowed.test", &x);
    exts_refused(&e, LZ_TLS_R_PSK_LAST);
    usual_exts(&e, "allowed.test", NULL);
    raw(&e, x.b, x.n);
    body_exts(&body, &e);
    assert_true(body_ok(&body).psk);
    /* encrypted_client_hello: noted, the outer name read as any other. */
    x.n = 0;
    ext(&x, LZ_TLS_EXT_ECH, "\x00\x00\x01\x00\x01\x7f\x00\x00\x00\x00", 10);
    usual_exts(&e, "public.example.net", &x);
    body_exts(&body, &e);
    struct lz_tls_hello h = body_ok(&body);
    assert_true(h.ech);
    assert_string_equal(h.sni, "public.example.net");
    /* Unknown and GREASE extensions, empty or not, are skipped. */
    x.n = 0;
    ext(&x, 0xdada, "\x01\x02\x03", 3);
    ext(&x, 0x4469, "", 0);
    usual_exts(&e, "allowed.test", &x);
    body_exts(&body, &e);
    assert_string_equal(body_ok(&body).sni, "allowed.test");
}

static void test_sni(void **state) {
    (void)state;
    static struct pk e, x, body;
    /* Names: canonical form, or refused with the reason. */
    static const struct {
        const char *name;
        const char *canon;
        enum lz_tls_reason want;
    } names[] = {
        { "API.Allowed.Test", "api.allowed.test", LZ_TLS_OK },
        { "allowed.test.", "allowed.test", LZ_TLS_OK },
        { "xn--bcher-kva.example", "xn--bcher-kva.example", LZ_TLS_OK },
        { "a-b.c0.test", "a-b.c0.test", LZ_TLS_OK },
        { "localhost", "localhost", LZ_TLS_OK },
        { "127.0.0.1", NULL, LZ_TLS_R_SNI_IP },
        { "10.1", NULL, LZ_TLS_R_SNI_IP },
        { "198.18.7.2.", NULL, LZ_TLS_R_SNI_IP },
        { "::1", NULL, LZ_TLS_R_SNI_IP },
        { "[2001:db8::1]", NULL, LZ_TLS_R_SNI_IP },
        { "fe80::1%eth0", NULL, LZ_TLS_R_SNI_IP },
        { "allowed.test:443", NULL, LZ_TLS_R_SNI_IP },
        { "0x7f.1", NULL, LZ_TLS_R_SNI_NAME },
        { "a.123", NULL, LZ_TLS_R_SNI_NAME },
        { "", NULL, LZ_TLS_R_SNI_NAME },
        { ".", NULL, LZ_TLS_R_SNI_NAME },
        { "..", NULL, LZ_TLS_R_SNI_NAME },
        { "allowed.test..", NULL, LZ_TLS_R_SNI_NAME },
        { "a..b", NULL, LZ_TLS_R_SNI_NAME },
        { ".allowed.test", NULL, LZ_TLS_R_SNI_NAME },
        { "-a.test", NULL, LZ_TLS_R_SNI_NAME },
        { "a-.test", NULL, LZ_TLS_R_SNI_NAME },
        { "under_score.test", NULL, LZ_TLS_R_SNI_NAME },
        { "*.allowed.test", NULL, LZ_TLS_R_SNI_NAME },
        { "exa mple.test", NULL, LZ_TLS_R_SNI_NAME },
        { "b\xc3\xbc"
          "cher.example",
          NULL, LZ_TLS_R_SNI_NAME },
        { "a\\.b.test", NULL, LZ_TLS_R_SNI_NAME },
        { "allowed.test/", NULL, LZ_TLS_R_SNI_NAME },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        usual_exts(&e, names[i].name, NULL);
        body_exts(&body, &e);
        if (names[i].want == LZ_TLS_OK) {
            struct lz_tls_hello h = body_ok(&body);
            assert_true(h.has_sni);
            assert_string_equal(h.sni, names[i].canon);
        } else if (body_refused(&body) != names[i].want) {
            fail_msg("\"%s\": %s", names[i].name, lz_tls_reason_str(body_refused(&body)));
        }
    }
    /* A NUL inside the name. */
    e.n = 0;
    ext(&e, LZ_TLS_EXT_SERVER_NAME,
        "\x00\x0c\x00\x00\x09"
        "evil\0.com",
        14);
    exts_refused(&e, LZ_TLS_R_SNI_NAME);
    /* Lengths: 63-byte labels and 253 bytes are the limits. */
    char n[300];
    memset(n, 'a', sizeof n);
    memcpy(n + 63, ".", 1);
    memcpy(n + 127, ".", 1);
    memcpy(n + 191, ".", 1);
    n[253] = '\0';
    usual_exts(&e, n, NULL);
    body_exts(&body, &e);
    assert_int_equal(strlen(body_ok(&body).sni), 253);
    n[253] = '.';
    n[254] = '\0';
    usual_exts(&e, n, NULL);
    body_exts(&body, &e);
    assert_int_equal(strlen(body_ok(&body).sni), 253);
    n[253] = 'a';
    usual_exts(&e, n, NULL);
    exts_refused(&e, LZ_TLS_R_SNI_NAME);
    memset(n, 'a', 64);
    memcpy(n + 64, ".test", 6);
    usual_exts(&e, n, NULL);
    exts_refused(&e, LZ_TLS_R_SNI_NAME);
    memset(n, 'b', 290);
    n[290] = '\0';
    usual_exts(&e, n, NULL);
    exts_refused(&e, LZ_TLS_R_SNI_NAME);

    /* The list. */
    static const struct {
        const char *data;
        size_t n;
        enum lz_tls_reason want;
    } lists[] = {
        { "\x00\x0f\x00\x00\x0c"
          "allowed.test",
          17, LZ_TLS_OK },
        { "", 0, LZ_TLS_R_SNI_LIST },         /* empty extension (a server's form) */
        { "\x00", 1, LZ_TLS_R_SNI_LIST },     /* half a list length */
        { "\x00\x00", 2, LZ_TLS_R_SNI_LIST }, /* empty list */
        { "\x00\x10\x00\x00\x0c"
          "allowed.test",
          17, LZ_TLS_R_SNI_LIST }, /* list past the extension */
        { "\x00\x0e\x00\x00\x0c"
          "allowed.test",
          17, LZ_TLS_R_SNI_LIST }, /* list short of it */
        { "\x00\x0f\x00\x00\x0d"
          "allowed.test",
          17, LZ_TLS_R_SNI_LIST }, /* name past the list */
        { "\x00\x0f\x00\x00\x0b"
          "allowed.test",
          17, LZ_TLS_R_SNI_LIST },                    /* a byte left: half an entry */
        { "\x00\x02\x00\x00", 4, LZ_TLS_R_SNI_LIST }, /* half an entry */
        { "\x00\x0f\x01\x00\x0c"
          "allowed.test",
          17, LZ_TLS_R_SNI_LIST },                        /* a type other than host_name */
        { "\x00\x03\x00\x00\x00", 5, LZ_TLS_R_SNI_NAME }, /* an empty host_name */
        { "\x00\x1e\x00\x00\x0c"
          "allowed.test"
          "\x00\x00\x0c"
          "another.test",
          32, LZ_TLS_R_SNI_MULTI },
        { "\x00\x1e\x00\x00\x0c"
          "allowed.test"
          "\x00\x00\x0c"
          "allowed.test",
          32, LZ_TLS_R_SNI_MULTI }, /* even the same name twice */
        { "\x00\x1e\x00\x00\x0c"
          "allowed.test"
          "\x07\x00\x0c"
          "another.test",
          32, LZ_TLS_R_SNI_LIST },
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        x.n = 0;
        ext(&x, LZ_TLS_EXT_SERVER_NAME, lists[i].data, lists[i].n);
        usual_exts(&e, NULL, &x);
        body_exts(&body, &e);
        if (lists[i].want == LZ_TLS_OK)
            assert_string_equal(body_ok(&body).sni, "allowed.test");
        else if (body_refused(&body) != lists[i].want)
            fail_msg("list %zu: %s", i, lz_tls_reason_str(body_refused(&body)));
    }
}

static void test_alpn_versions(void **state) {
    (void)state;
    static struct pk e, x, body;
    /* 16 names of 32 bytes: kept whole; one more name, or a byte more. */
    char names[LZ_TLS_ALPN_MAX + 1][LZ_TLS_ALPN_NAME_MAX + 2];
    const char *list[LZ_TLS_ALPN_MAX + 2];
    for (size_t i = 0; i <= LZ_TLS_ALPN_MAX; i++) {
        snprintf(names[i], sizeof names[i], "%02zu-%029d", i, 0);
        assert_int_equal(strlen(names[i]), LZ_TLS_ALPN_NAME_MAX);
        list[i] = names[i];
    }
    list[LZ_TLS_ALPN_MAX] = NULL;
    x.n = 0;
    ext_alpn(&x, list);
    e.n = 0;
    ext_sni(&e, "allowed.test");
    raw(&e, x.b, x.n);
    body_exts(&body, &e);
    struct lz_tls_hello h = body_ok(&body);
    assert_int_equal(h.n_alpn, LZ_TLS_ALPN_MAX);
    assert_int_equal(h.alpn[15].len, LZ_TLS_ALPN_NAME_MAX);
    assert_string_equal(h.alpn[15].name, names[15]);
    assert_true(lz_tls_hello_offers_alpn(&h, names[3]));
    list[LZ_TLS_ALPN_MAX] = names[LZ_TLS_ALPN_MAX];
    list[LZ_TLS_ALPN_MAX + 1] = NULL;
    e.n = 0;
    ext_alpn(&e, list);
    exts_refused(&e, LZ_TLS_R_ALPN_LIMIT);
    strcat(names[0], "x");
    list[1] = NULL;
    e.n = 0;
    ext_alpn(&e, list);
    exts_refused(&e, LZ_TLS_R_ALPN_LIMIT);
    /* Malformed lists. */
    static const struct {
        const char *data;
        size_t n;
        enum lz_tls_reason want;
    } alpn[] = {
        { "\x00\x03\x02h2", 5, LZ_TLS_OK },
        { "\x00\x04\x02h2\x00", 6, LZ_TLS_R_ALPN }, /* an empty name */
        { "\x00\x00", 2, LZ_TLS_R_ALPN },           /* an empty list */
        { "", 0, LZ_TLS_R_ALPN },
        { "\x00", 1, LZ_TLS_R_ALPN },
        { "\x00\x04\x02h2", 5, LZ_TLS_R_ALPN }, /* list past the extension */
        { "\x00\x02\x02h2", 5, LZ_TLS_R_ALPN }, /* list short of it */
        { "\x00\x03\x03h2", 5, LZ_TLS_R_ALPN }, /* name past the list */
        { "\x00\x03\x01h2", 5, LZ_TLS_R_ALPN }, /* a name with bytes left over */
    };
    for (size_t i = 0; i < sizeof alpn / sizeof alpn[0]; i++) {
        e.n = 0;
        ext(&e, LZ_TLS_EXT_ALPN, alpn[i].data, alpn[i].n);
        body_exts(&body, &e);
        if (alpn[i].want == LZ_TLS_OK)
            assert_string_equal(body_ok(&body).alpn[0].name, "h2");
        else if (body_refused(&body) != alpn[i].want)
            fail_msg("alpn %zu: %s", i, lz_tls_reason_str(body_refused(&body)));
    }
    /* A name with a NUL in it is kept with its length. */
    e.n = 0;
    ext(&e, LZ_TLS_EXT_ALPN,
        "\x00\x04\x03h\0"
        "2",
        6);
    body_exts(&body, &e);
    h = body_ok(&body);
    assert_int_equal(h.alpn[0].len, 3);
    assert_false(lz_tls_hello_offers_alpn(&h, "h"));

    /* supported_versions. */
    static const struct {
        const char *data;
        size_t n;
        unsigned versions;
        enum lz_tls_reason want;
    } sv[] = {
        { "\x02\x03\x04", 3, LZ_TLS_V13, LZ_TLS_OK },
        { "\x02\x03\x03", 3, LZ_TLS_V12, LZ_TLS_OK },
        { "\x08\x3a\x3a\x03\x04\x03\x03\x03\x02", 9, LZ_TLS_V12 | LZ_TLS_V13, LZ_TLS_OK },
        { "\x04\x7f\x1c\x03\x04", 5, LZ_TLS_V13, LZ_TLS_OK }, /* a draft skipped */
        { "\x04\x03\x02\x03\x01", 5, 0, LZ_TLS_R_VERSION },   /* TLS 1.1 and 1.0 only */
        { "\x02\x7a\x7a", 3, 0, LZ_TLS_R_VERSION },           /* GREASE only */
        { "", 0, 0, LZ_TLS_R_VERSIONS },
        { "\x00", 1, 0, LZ_TLS_R_VERSIONS },
        { "\x03\x03\x04\x03", 4, 0, LZ_TLS_R_VERSIONS },
        { "\x04\x03\x04", 3, 0, LZ_TLS_R_VERSIONS },
        { "\x02\x03\x04\x03\x03", 5, 0, LZ_TLS_R_VERSIONS },
    };
    for (size_t i = 0; i < sizeof sv / sizeof sv[0]; i++) {
        e.n = 0;
        ext_sni(&e, "allowed.test");
        ext(&e, LZ_TLS_EXT_SUPPORTED_VERSIONS, sv[i].data, sv[i].n);
        body_exts(&body, &e);
        if (sv[i].want == LZ_TLS_OK)
            assert_int_equal(body_ok(&body).versions, sv[i].versions);
        else if (body_refused(&body) != sv[i].want)
            fail_msg("supported_versions %zu: %s", i, lz_tls_reason_str(body_refused(&body)));
    }
    /* The reason strings: one for each, none unknown. */
    for (int r = 0; r < LZ_TLS_R_MAX; r++)
        assert_string_not_equal(lz_tls_reason_str((enum lz_tls_reason)r), "unknown reason");
    assert_string_equal(lz_tls_reason_str(LZ_TLS_R_MAX), "unknown reason");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_hellos),   cmocka_unit_test(test_pq_ech),     cmocka_unit_test(test_records),
        cmocka_unit_test(test_fixed_fields),  cmocka_unit_test(test_extensions), cmocka_unit_test(test_sni),
        cmocka_unit_test(test_alpn_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
