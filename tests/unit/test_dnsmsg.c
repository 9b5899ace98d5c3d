/* Unit tests for the DNS message codec (dnsmsg.c) and the answer filter
 * (dnsfilter.c): packets written byte by byte, every refusal with a
 * well-formed positive control next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dnsfilter.h"
#include "dnsmsg.h"

/* A packet writer for the tests. */
struct pk {
    uint8_t b[LZ_DNS_MSG_MAX + 16];
    size_t n;
};
static void u8(struct pk *p, unsigned v) { p->b[p->n++] = (uint8_t)v; }
static void u16(struct pk *p, unsigned v) {
    u8(p, v >> 8);
    u8(p, v & 0xff);
}
static void u32(struct pk *p, uint32_t v) {
    u16(p, v >> 16);
    u16(p, v & 0xffff);
}
static void raw(struct pk *p, const void *s, size_t n) {
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
/* "a.b" as labels and the root; "" is the root alone. */
static void name(struct pk *p, const char *s) {
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        u8(p, (unsigned)l);
        raw(p, s, l);
        s += l + (dot ? 1 : 0);
    }
    u8(p, 0);
}
/* labels, then a compression pointer to off */
static void name_ptr(struct pk *p, const char *s, unsigned off) {
    while (s && *s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        u8(p, (unsigned)l);
        raw(p, s, l);
        s += l + (dot ? 1 : 0);
    }
    u16(p, 0xc000u | off);
}
static void hdr(struct pk *p, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns, unsigned ar) {
    p->n = 0;
    u16(p, id);
    u16(p, flags);
    u16(p, qd);
    u16(p, an);
    u16(p, ns);
    u16(p, ar);
}
static void opt(struct pk *p, unsigned size, uint32_t ttl) {
    u8(p, 0);
    u16(p, LZ_DNS_T_OPT);
    u16(p, size);
    u32(p, ttl);
    u16(p, 0);
}
static void rr_a(struct pk *p, unsigned owner_ptr, uint32_t ttl, uint32_t addr) {
    u16(p, 0xc000u | owner_ptr);
    u16(p, LZ_DNS_T_A);
    u16(p, LZ_DNS_CLASS_IN);
    u32(p, ttl);
    u16(p, 4);
    u32(p, addr);
}

/* What `dig +cookie Api.Example.COM` sends: RD|AD, an OPT of 1232 bytes
 * with a COOKIE option (10, 8 bytes). */
static void dig_query(struct pk *p) {
    hdr(p, 0xbeef, 0x0120, 1, 0, 0, 1);
    name(p, "Api.Example.COM");
    u16(p, LZ_DNS_T_A);
    u16(p, LZ_DNS_CLASS_IN);
    u8(p, 0);
    u16(p, LZ_DNS_T_OPT);
    u16(p, 1232);
    u32(p, 0);
    u16(p, 12);
    u16(p, 10);
    u16(p, 8);
    raw(p, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
}

static enum lz_dns_reason query_refused(const struct pk *p) {
    struct lz_dns_query q;
    memset(&q, 0x5a, sizeof q);
    enum lz_dns_reason why = LZ_DNS_OK;
    assert_int_equal(lz_dns_parse_query(p->b, p->n, &q, &why), -EBADMSG);
    assert_int_equal(q.id, 0x5a5a); /* untouched */
    assert_int_not_equal(why, LZ_DNS_OK);
    assert_string_not_equal(lz_dns_reason_str(why), "unknown reason");
    return why;
}

static struct lz_dns_query query_ok(const struct pk *p) {
    struct lz_dns_query q;
    enum lz_dns_reason why = LZ_DNS_OK;
    if (lz_dns_parse_query(p->b, p->n, &q, &why) != 0)
        fail_msg("query refused: %s", lz_dns_reason_str(why));
    return q;
}

static void test_query_accepted(void **state) {
    (void)state;
    struct pk *p = calloc(1, sizeof *p);
    dig_query(p);
    struct lz_dns_query q = query_ok(p);
    assert_int_equal(q.id, 0xbeef);
    assert_int_equal(q.qtype, LZ_DNS_T_A);
    assert_int_equal(q.refuse, LZ_DNS_OK);
    assert_string_equal(q.name, "api.example.com");
    assert_true(q.edns);
    assert_false(q.edns_do);
    assert_int_equal(q.udp_size, 1232);
    assert_int_equal(q.qname_len, 17);
    assert_memory_equal(q.qname, "\3Api\7Example\3COM", 17); /* the client's case kept */
    /* glibc's stub: RD, no EDNS; AAAA, HTTPS: the codec parses any type. */
    unsigned types[] = { LZ_DNS_T_A, LZ_DNS_T_AAAA, LZ_DNS_T_HTTPS, LZ_DNS_T_TXT, LZ_DNS_T_ANY };
    for (size_t i = 0; i < 5; i++) {
        hdr(p, 7, 0x0100, 1, 0, 0, 0);
        name(p, "files.example.com");
        u16(p, types[i]);
        u16(p, 1);
        q = query_ok(p);
        assert_int_equal(q.qtype, types[i]);
        assert_false(q.edns);
        assert_int_equal(q.udp_size, 0);
    }
    /* EDNS payload below 512 counts as 512; DO bit kept. */
    hdr(p, 7, 0x0100, 1, 0, 0, 1);
    name(p, "a.example");
    u16(p, 1);
    u16(p, 1);
    opt(p, 100, 0x8000);
    q = query_ok(p);
    assert_int_equal(q.udp_size, 512);
    assert_true(q.edns_do);
    free(p);
}

static void test_query_refusals(void **state) {
    (void)state;
    struct pk *p = calloc(1, sizeof *p), *good = calloc(1, sizeof *good);
    dig_query(good);
    /* Every truncation of a good query. */
    for (size_t n = 0; n < good->n; n++) {
        *p = *good;
        p->n = n;
        enum lz_dns_reason w = query_refused(p);
        assert_true(w == LZ_DNS_R_SHORT || w == LZ_DNS_R_QDCOUNT);
    }
    *p = *good;
    u8(p, 0);
    assert_int_equal(query_refused(p), LZ_DNS_R_TRAILING);
    *p = *good;
    p->b[2] |= 0x80; /* QR */
    assert_int_equal(query_refused(p), LZ_DNS_R_DIRECTION);
    *p = *good;
    p->b[2] |= 2 << 3; /* opcode STATUS */
    assert_int_equal(query_refused(p), LZ_DNS_R_OPCODE);
    assert_int_equal(lz_dns_reason_rcode(LZ_DNS_R_OPCODE), LZ_DNS_NOTIMP);
    *p = *good;
    p->b[2] |= 0x02; /* TC */
    assert_int_equal(query_refused(p), LZ_DNS_R_TC);
    for (unsigned qd = 0; qd <= 2; qd += 2) {
        *p = *good;
        p->b[5] = (uint8_t)qd;
        assert_int_equal(query_refused(p), LZ_DNS_R_QDCOUNT);
    }
    *p = *good;
    p->b[7] = 1; /* an answer in a query */
    assert_int_equal(query_refused(p), LZ_DNS_R_SECTIONS);
    *p = *good;
    p->b[9] = 1;
    assert_int_equal(query_refused(p), LZ_DNS_R_SECTIONS);
    *p = *good;
    p->b[11] = 2;
    assert_int_equal(query_refused(p), LZ_DNS_R_SECTIONS);
    assert_int_equal(lz_dns_reason_rcode(LZ_DNS_R_SECTIONS), LZ_DNS_FORMERR);
    /* The additional record is a TSIG, not an OPT. */
    hdr(p, 1, 0x0100, 1, 0, 0, 1);
    name(p, "a.example");
    u16(p, 1);
    u16(p, 1);
    name(p, "key");
    u16(p, 250);
    u16(p, 255);
    u32(p, 0);
    u16(p, 0);
    assert_int_equal(query_refused(p), LZ_DNS_R_SECTIONS);
    /* OPT owner not the root; version 1; an option that runs past its RDATA. */
    hdr(p, 1, 0x0100, 1, 0, 0, 1);
    name(p, "a.example");
    u16(p, 1);
    u16(p, 1);
    size_t at = p->n;
    name(p, "x");
    u16(p, LZ_DNS_T_OPT);
    u16(p, 1232);
    u32(p, 0);
    u16(p, 0);
    assert_int_equal(query_refused(p), LZ_DNS_R_OPT);
    p->n = at;
    opt(p, 1232, 0x00010000);
    assert_int_equal(query_refused(p), LZ_DNS_R_OPT_VERSION);
    p->n = at;
    opt(p, 1232, 0);
    p->b[p->n - 1] = 5; /* rdlen 5 */
    u16(p, 10);
    u16(p, 8); /* an 8-byte option in 5 bytes */
    u8(p, 0);
    assert_int_equal(query_refused(p), LZ_DNS_R_OPT);
    /* Label length bytes 0x40 and 0x80 (extended types, "label > 63"). */
    for (unsigned b = 0x40; b <= 0x80; b += 0x40) {
        hdr(p, 1, 0x0100, 1, 0, 0, 0);
        u8(p, b);
        for (unsigned i = 0; i < 70; i++)
            u8(p, 'a');
        u8(p, 0);
        u16(p, 1);
        u16(p, 1);
        assert_int_equal(query_refused(p), LZ_DNS_R_LABEL);
    }
    /* A 255-byte wire name (four labels of 63 minus...) is the longest. */
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    for (int i = 0; i < 3; i++) {
        u8(p, 63);
        for (int k = 0; k < 63; k++)
            u8(p, 'a');
    }
    u8(p, 61);
    for (int k = 0; k < 61; k++)
        u8(p, 'b');
    u8(p, 0);
    u16(p, 1);
    u16(p, 1);
    struct lz_dns_query q = query_ok(p);
    assert_int_equal(q.qname_len, 255);
    assert_int_equal(strlen(q.name), 253);
    p->b[LZ_DNS_HDR + 3 * 64] = 62; /* one byte more: 256 */
    p->n = LZ_DNS_HDR + 3 * 64;
    u8(p, 62);
    for (int k = 0; k < 62; k++)
        u8(p, 'b');
    u8(p, 0);
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_NAME_LONG);
    /* Compression pointers: a query's name has nowhere to point to. */
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    name_ptr(p, NULL, 12); /* to itself */
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_PTR_LOOP);
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    name_ptr(p, "a", 12); /* into its own segment */
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_PTR_LOOP);
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    name_ptr(p, "a", 17); /* past itself */
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_PTR_FORWARD);
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    name_ptr(p, "a", 2); /* into the header */
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_PTR_RANGE);
    hdr(p, 1, 0x0100, 1, 0, 0, 0);
    name_ptr(p, "a", 0x3fff); /* past the end */
    u16(p, 1);
    u16(p, 1);
    assert_int_equal(query_refused(p), LZ_DNS_R_PTR_RANGE);
    /* Longer than any DNS message. */
    p->n = LZ_DNS_MSG_MAX + 1;
    assert_int_equal(query_refused(p), LZ_DNS_R_LONG);
    free(p);
    free(good);
}

/* A well-formed query whose name the policy cannot use: parsed, refuse set,
 * no canonical name; the resolver answers REFUSED with the question. */
static void name_refused(const uint8_t *wire, size_t wlen, unsigned qclass, enum lz_dns_reason want) {
    struct pk *p = calloc(1, sizeof *p);
    hdr(p, 9, 0x0100, 1, 0, 0, 0);
    raw(p, wire, wlen);
    u16(p, 1);
    u16(p, qclass);
    struct lz_dns_query q = query_ok(p);
    assert_int_equal(q.refuse, want);
    assert_string_equal(q.name, "");
    assert_int_equal(lz_dns_reason_rcode(q.refuse), LZ_DNS_REFUSED);
    uint8_t out[512];
    size_t n;
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_REFUSED, false, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR + wlen + 4);
    assert_int_equal(out[3] & 0xf, LZ_DNS_REFUSED);
    assert_memory_equal(out + LZ_DNS_HDR, wire, wlen); /* echoed as sent */
    free(p);
}

static void test_query_names(void **state) {
    (void)state;
    /* Escapes: "allowed\.test" is one label holding a dot. If it were
     * joined as text it would read "allowed.test". */
    name_refused((const uint8_t *)"\x0c"
                                  "allowed.test\0",
                 14, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x0d"
                                  "allowed\\.test\0",
                 15, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x03"
                                  "a_b\x07"
                                  "example\0",
                 13, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x03"
                                  "a\0b\x07"
                                  "example\0",
                 13, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x03"
                                  "a b\x07"
                                  "example\0",
                 13, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x07"
                                  "b\xc3\xbc"
                                  "cher\x07"
                                  "example\0",
                 17, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\0", 1, 1, LZ_DNS_R_NAME_BYTES); /* the root */
    name_refused((const uint8_t *)"\x01"
                                  "1\x01"
                                  "2\x01"
                                  "3\x01"
                                  "4\0",
                 9, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x01"
                                  "*\x07"
                                  "example\x03"
                                  "com\0",
                 15, 1, LZ_DNS_R_NAME_BYTES);
    name_refused((const uint8_t *)"\x03"
                                  "-ab\x07"
                                  "example\0",
                 13, 1, LZ_DNS_R_NAME_BYTES);
    /* Class CHAOS (version.bind) */
    name_refused((const uint8_t *)"\x07"
                                  "version\x04"
                                  "bind\0",
                 14, 3, LZ_DNS_R_CLASS);
    /* Positive controls: the same shapes, canonical. */
    struct pk *p = calloc(1, sizeof *p);
    hdr(p, 9, 0x0100, 1, 0, 0, 0);
    name(p, "ALLOWED.test.EVIL.test");
    u16(p, 1);
    u16(p, 1);
    struct lz_dns_query q = query_ok(p);
    assert_int_equal(q.refuse, LZ_DNS_OK);
    assert_string_equal(q.name, "allowed.test.evil.test");
    /* Suffix confusion through the codec and the policy together. */
    struct lz_hostrule allow[2];
    assert_int_equal(lz_hostrule_parse("allowed.test", 0, &allow[0], NULL), 0);
    assert_int_equal(lz_hostrule_parse("*.allowed.test", 0, &allow[1], NULL), 0);
    const char *names[] = { "allowed.test.evil.test", "xallowed.test", "allowed.testx", "a.xallowed.test" };
    for (size_t i = 0; i < 4; i++) {
        hdr(p, 9, 0x0100, 1, 0, 0, 0);
        name(p, names[i]);
        u16(p, 1);
        u16(p, 1);
        q = query_ok(p);
        assert_int_equal(lz_hostrule_decide(allow, 2, NULL, 0, q.name, NULL), LZ_HOST_UNLISTED);
    }
    const char *ok[] = { "ALLOWED.TEST", "allowed.test", "deep.er.Allowed.Test" };
    for (size_t i = 0; i < 3; i++) {
        hdr(p, 9, 0x0100, 1, 0, 0, 0);
        name(p, ok[i]);
        u16(p, 1);
        u16(p, 1);
        q = query_ok(p);
        struct lz_hostports ports;
        assert_int_equal(lz_hostrule_decide(allow, 2, NULL, 0, q.name, &ports), LZ_HOST_ALLOWED);
        assert_true(ports.all);
    }
    free(p);
}

/* The query Lazaret sends upstream, parsed back (what parse_response
 * matches against). */
static struct lz_dns_query upstream(uint16_t id, const char *canon, uint16_t qtype) {
    uint8_t b[600];
    size_t n;
    assert_int_equal(lz_dns_build_query(id, canon, qtype, b, sizeof b, &n), 0);
    struct lz_dns_query q;
    assert_int_equal(lz_dns_parse_query(b, n, &q, NULL), 0);
    assert_string_equal(q.name, canon);
    assert_int_equal(q.qtype, qtype);
    assert_true(q.edns);
    assert_int_equal(q.udp_size, LZ_DNS_UDP_OURS);
    assert_int_equal(q.flags, 0x0100);
    return q;
}

/* An upstream answer for www.example.com: CNAME to cdn.example.net (the
 * target partly compressed), two A records for the target (one of them a
 * rebinding address), an injected A for another name, an AAAA, an NS in
 * authority, an OPT in additional. */
static void cdn_response(struct pk *p, uint16_t id, uint32_t ttl_cname, uint32_t ttl_a) {
    hdr(p, id, 0x8180, 1, 5, 1, 1);
    name(p, "WWW.example.com"); /* 12: 3www 7example 3com 0 */
    u16(p, 1);
    u16(p, 1);
    /* www.example.com CNAME cdn.example.net */
    u16(p, 0xc00c);
    u16(p, LZ_DNS_T_CNAME);
    u16(p, 1);
    u32(p, ttl_cname);
    u16(p, 17);
    size_t target = p->n;
    name(p, "cdn.example.net");
    rr_a(p, (unsigned)target, ttl_a, 0x5db8d822u); /* 93.184.216.34 */
    rr_a(p, (unsigned)target, ttl_a, 0x0a000001u); /* 10.0.0.1 */
    /* evil.test A 93.184.216.35: not on the chain */
    name(p, "evil.test");
    u16(p, 1);
    u16(p, 1);
    u32(p, 300);
    u16(p, 4);
    u32(p, 0x5db8d823u);
    /* cdn.example.net AAAA */
    u16(p, 0xc000u | (unsigned)target);
    u16(p, LZ_DNS_T_AAAA);
    u16(p, 1);
    u32(p, 300);
    u16(p, 16);
    for (int i = 0; i < 16; i++)
        u8(p, (unsigned)i);
    /* example.com NS ns.example.com (compressed into the question) */
    u16(p, 0xc010);
    u16(p, LZ_DNS_T_NS);
    u16(p, 1);
    u32(p, 300);
    u16(p, 5);
    name_ptr(p, "ns", 0x10);
    opt(p, 1232, 0);
}

static void test_response_chain_filter_build(void **state) {
    (void)state;
    struct pk *p = calloc(1, sizeof *p);
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    struct lz_dns_query sent = upstream(0x1234, "www.example.com", LZ_DNS_T_A);
    cdn_response(p, 0x1234, 30, 300);
    enum lz_dns_reason why = LZ_DNS_OK;
    if (lz_dns_parse_response(p->b, p->n, &sent, a, &why) != 0)
        fail_msg("response refused: %s", lz_dns_reason_str(why));
    assert_int_equal(a->rcode, 0);
    assert_int_equal(a->n, 4); /* CNAME, 2 A for the target, 1 A for evil.test */
    struct lz_dns_chain ch;
    assert_int_equal(lz_dns_chain_walk(a, sent.qname, sent.qname_len, &ch, &why), 0);
    assert_int_equal(ch.n_cname, 1);
    assert_memory_equal(a->rr[ch.cname[0]].target, "\3cdn\7example\3net", 17);
    assert_int_equal(ch.n_a, 2);
    assert_int_equal(a->rr[ch.a[0]].addr, 0x5db8d822u);
    assert_int_equal(a->rr[ch.a[1]].addr, 0x0a000001u);
    assert_int_equal(ch.min_ttl, 30);
    /* The filter drops the rebinding address; TTL 30 is clamped to 60. */
    struct lz_dnsfilter f;
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.verdict, LZ_DNSF_ANSWER);
    assert_int_equal(f.n_dropped, 1);
    assert_int_equal(f.kept.n_a, 1);
    assert_int_equal(a->rr[f.kept.a[0]].addr, 0x5db8d822u);
    assert_int_equal(f.lifetime, 60);
    /* The client's query (its case, its ID, EDNS) gets the filtered answer. */
    struct pk *c = calloc(1, sizeof *c);
    hdr(c, 0x4242, 0x0100, 1, 0, 0, 1);
    name(c, "www.EXAMPLE.com");
    u16(c, 1);
    u16(c, 1);
    opt(c, 4096, 0);
    struct lz_dns_query q = query_ok(c);
    uint8_t out[LZ_DNS_BUILD_MAX];
    size_t n;
    assert_int_equal(lz_dns_build_answer(&q, a, &f.kept, f.lifetime, false, out, sizeof out, &n), 0);
    assert_int_equal(out[2], 0x81); /* QR, RD */
    assert_int_equal(out[3], 0x80); /* RA, NOERROR */
    assert_memory_equal(out + LZ_DNS_HDR, "\3www\7EXAMPLE\3com", 17);
    /* It parses as a response to the client's question: the chain again,
     * the kept address only, every TTL the lifetime. */
    struct lz_dns_answer *b = calloc(1, sizeof *b);
    assert_int_equal(lz_dns_parse_response(out, n, &q, b, &why), 0);
    assert_int_equal(b->n, 2);
    assert_int_equal(b->rr[0].type, LZ_DNS_T_CNAME);
    assert_int_equal(b->rr[0].ttl, 60);
    assert_int_equal(b->rr[1].type, LZ_DNS_T_A);
    assert_int_equal(b->rr[1].addr, 0x5db8d822u);
    assert_int_equal(b->rr[1].ttl, 60);
    struct lz_dns_chain ch2;
    assert_int_equal(lz_dns_chain_walk(b, q.qname, q.qname_len, &ch2, &why), 0);
    assert_int_equal(ch2.n_cname, 1);
    assert_int_equal(ch2.n_a, 1);
    /* Querying the CNAME target directly is a different name for the
     * policy: an allow rule for www.example.com does not cover it. */
    struct lz_hostrule w;
    assert_int_equal(lz_hostrule_parse("www.example.com", 0, &w, NULL), 0);
    assert_int_equal(lz_hostrule_decide(&w, 1, NULL, 0, "cdn.example.net", NULL), LZ_HOST_UNLISTED);
    /* TTL clamps: huge -> 3600, in range kept, top bit -> 0 -> 60. */
    cdn_response(p, 0x1234, 100000, 100000);
    assert_int_equal(lz_dns_parse_response(p->b, p->n, &sent, a, &why), 0);
    assert_int_equal(lz_dns_chain_walk(a, sent.qname, sent.qname_len, &ch, &why), 0);
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.lifetime, 3600);
    cdn_response(p, 0x1234, 300, 1000);
    assert_int_equal(lz_dns_parse_response(p->b, p->n, &sent, a, &why), 0);
    assert_int_equal(lz_dns_chain_walk(a, sent.qname, sent.qname_len, &ch, &why), 0);
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.lifetime, 300);
    cdn_response(p, 0x1234, 0x80000000u, 1000);
    assert_int_equal(lz_dns_parse_response(p->b, p->n, &sent, a, &why), 0);
    assert_int_equal(a->rr[0].ttl, 0);
    free(p);
    free(c);
    free(a);
    free(b);
}

static enum lz_dns_reason response_refused(const struct pk *p, const struct lz_dns_query *sent) {
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    enum lz_dns_reason why = LZ_DNS_OK;
    assert_int_equal(lz_dns_parse_response(p->b, p->n, sent, a, &why), -EBADMSG);
    assert_int_equal(a->n, 0);
    free(a);
    assert_int_not_equal(why, LZ_DNS_OK);
    return why;
}

static void test_response_refusals(void **state) {
    (void)state;
    struct pk *p = calloc(1, sizeof *p), *good = calloc(1, sizeof *good);
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    struct lz_dns_query sent = upstream(0x1234, "www.example.com", LZ_DNS_T_A);
    cdn_response(good, 0x1234, 300, 300);
    assert_int_equal(lz_dns_parse_response(good->b, good->n, &sent, a, NULL), 0);
    assert_int_equal(a->n, 4);
    /* A refused response leaves the caller's answer empty, even when it is
     * refused at its first field (the answer held the previous one). */
    *p = *good;
    p->b[0] ^= 1;
    assert_int_equal(lz_dns_parse_response(p->b, p->n, &sent, a, NULL), -EBADMSG);
    assert_int_equal(a->n, 0);
    for (size_t n = 0; n < good->n; n++) {
        *p = *good;
        p->n = n;
        response_refused(p, &sent);
    }
    *p = *good;
    u8(p, 0);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_TRAILING);
    *p = *good;
    p->b[1] ^= 1;
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_ID);
    *p = *good;
    p->b[2] &= 0x7f;
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_DIRECTION);
    *p = *good;
    p->b[2] |= 0x02;
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_TC);
    *p = *good;
    p->b[2] |= 5 << 3; /* UPDATE */
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_OPCODE);
    *p = *good;
    p->b[LZ_DNS_HDR + 1] = 'x'; /* xww.example.com */
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_QUESTION);
    *p = *good;
    p->b[LZ_DNS_HDR + 17 + 1] = LZ_DNS_T_AAAA;
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_QUESTION);
    *p = *good;
    p->b[LZ_DNS_HDR + 17 + 3] = 3; /* class CH */
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_QUESTION);
    *p = *good;
    p->b[5] = 2;
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_QDCOUNT);
    /* A record with 5 bytes of RDATA */
    hdr(p, 0x1234, 0x8180, 1, 1, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    u16(p, 0xc00c);
    u16(p, 1);
    u16(p, 1);
    u32(p, 60);
    u16(p, 5);
    u32(p, 0x01020304);
    u8(p, 5);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_RDATA);
    /* A CNAME whose name ends before its RDATA does */
    hdr(p, 0x1234, 0x8180, 1, 1, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    u16(p, 0xc00c);
    u16(p, 5);
    u16(p, 1);
    u32(p, 60);
    u16(p, 4);
    name(p, "a");
    u8(p, 0);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_RDATA);
    /* ... or runs past it */
    hdr(p, 0x1234, 0x8180, 1, 1, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    u16(p, 0xc00c);
    u16(p, 5);
    u16(p, 1);
    u32(p, 60);
    u16(p, 2);
    name(p, "abc");
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_SHORT);
    /* Two OPT records */
    *p = *good;
    p->b[11] = 2;
    opt(p, 1232, 0);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_OPT);
    /* Compression pointer attacks in the answer section. Two owners that
     * point at each other: the first points forward. */
    hdr(p, 0x1234, 0x8180, 1, 2, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    size_t r1 = p->n;
    u16(p, 0xc000u | (unsigned)(r1 + 16));
    u16(p, 1);
    u16(p, 1);
    u32(p, 60);
    u16(p, 4);
    u32(p, 0x01020304);
    u16(p, 0xc000u | (unsigned)r1);
    u16(p, 1);
    u16(p, 1);
    u32(p, 60);
    u16(p, 4);
    u32(p, 0x01020304);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_PTR_FORWARD);
    /* A label, then a pointer back to that label: a loop. */
    hdr(p, 0x1234, 0x8180, 1, 1, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    r1 = p->n;
    name_ptr(p, "loop", (unsigned)r1);
    u16(p, 1);
    u16(p, 1);
    u32(p, 60);
    u16(p, 4);
    u32(p, 0x01020304);
    assert_int_equal(response_refused(p, &sent), LZ_DNS_R_PTR_LOOP);
    /* A chain of pointers, each to the one before: LZ_DNS_PTR_HOPS is
     * accepted (positive control), one more refused. */
    for (unsigned hops = LZ_DNS_PTR_HOPS; hops <= LZ_DNS_PTR_HOPS + 1; hops++) {
        hdr(p, 0x1234, 0x8180, 1, 1, 0, 1);
        name(p, "www.example.com");
        u16(p, 1);
        u16(p, 1);
        /* In the additional section, a record whose owner is the chain's
         * end; the pointers sit in an OPT-less TXT RDATA before it. */
        u16(p, 0xc00c);
        u16(p, LZ_DNS_T_TXT);
        u16(p, 1);
        u32(p, 60);
        u16(p, (unsigned)(2 * (hops - 1)));
        size_t prev = LZ_DNS_HDR;
        for (unsigned i = 0; i + 1 < hops; i++) {
            size_t here = p->n;
            u16(p, 0xc000u | (unsigned)prev);
            prev = here;
        }
        u16(p, 0xc000u | (unsigned)prev);
        u16(p, LZ_DNS_T_TXT);
        u16(p, 1);
        u32(p, 60);
        u16(p, 0);
        enum lz_dns_reason why = LZ_DNS_OK;
        int r = lz_dns_parse_response(p->b, p->n, &sent, a, &why);
        if (hops == LZ_DNS_PTR_HOPS)
            assert_int_equal(r, 0);
        else
            assert_int_equal(why, LZ_DNS_R_PTR_HOPS);
    }
    /* More answer records than collected: the rest counted, not kept. */
    hdr(p, 0x1234, 0x8180, 1, LZ_DNS_RR_MAX + 6, 0, 0);
    name(p, "www.example.com");
    u16(p, 1);
    u16(p, 1);
    for (unsigned i = 0; i < LZ_DNS_RR_MAX + 6; i++)
        rr_a(p, 12, 60, 0x5db80000u + i);
    assert_int_equal(lz_dns_parse_response(p->b, p->n, &sent, a, NULL), 0);
    assert_int_equal(a->n, LZ_DNS_RR_MAX);
    assert_int_equal(a->ignored, 6);
    free(p);
    free(good);
    free(a);
}

/* An answer of CNAME links given as "owner>target" pairs, then an A for
 * last_a_owner. */
static void chain_answer(struct lz_dns_answer *a, const char *const *links, size_t n, const char *a_owner) {
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < n; i++) {
        struct pk p = { 0 };
        char o[64], t[64];
        const char *gt = strchr(links[i], '>');
        snprintf(o, sizeof o, "%.*s", (int)(gt - links[i]), links[i]);
        snprintf(t, sizeof t, "%s", gt + 1);
        name(&p, o);
        a->rr[a->n].type = LZ_DNS_T_CNAME;
        a->rr[a->n].ttl = 100;
        a->rr[a->n].owner_len = (uint16_t)p.n;
        memcpy(a->rr[a->n].owner, p.b, p.n);
        p.n = 0;
        name(&p, t);
        a->rr[a->n].target_len = (uint16_t)p.n;
        memcpy(a->rr[a->n].target, p.b, p.n);
        a->n++;
    }
    struct pk p = { 0 };
    name(&p, a_owner);
    a->rr[a->n].type = LZ_DNS_T_A;
    a->rr[a->n].ttl = 100;
    a->rr[a->n].addr = 0x5db8d822u;
    a->rr[a->n].owner_len = (uint16_t)p.n;
    memcpy(a->rr[a->n].owner, p.b, p.n);
    a->n++;
}

static void test_chain(void **state) {
    (void)state;
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    struct lz_dns_chain ch;
    enum lz_dns_reason why;
    const uint8_t *qn = (const uint8_t *)"\1a\4test";
    size_t ql = 8;
    /* Out of order and in another case: still followed. */
    const char *ok[] = { "B.test>c.test", "a.test>b.test" };
    chain_answer(a, ok, 2, "C.TEST");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), 0);
    assert_int_equal(ch.n_cname, 2);
    assert_int_equal(ch.cname[0], 1);
    assert_int_equal(ch.cname[1], 0);
    assert_int_equal(ch.n_a, 1);
    /* The A of a name off the chain is not kept. */
    chain_answer(a, ok, 2, "b.test");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), 0);
    assert_int_equal(ch.n_a, 0);
    const char *loop[] = { "a.test>b.test", "b.test>a.test" };
    chain_answer(a, loop, 2, "a.test");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_CNAME_LOOP);
    const char *loop2[] = { "a.test>b.test", "b.test>c.test", "c.test>B.TEST" };
    chain_answer(a, loop2, 3, "c.test");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_CNAME_LOOP);
    const char *self[] = { "a.test>a.test" };
    chain_answer(a, self, 1, "a.test");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_CNAME_LOOP);
    const char *multi[] = { "a.test>b.test", "A.test>c.test" };
    chain_answer(a, multi, 2, "b.test");
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_CNAME_MULTI);
    /* LZ_DNS_CHAIN_MAX links: fine; one more: refused. */
    char bufs[LZ_DNS_CHAIN_MAX + 1][32];
    const char *links[LZ_DNS_CHAIN_MAX + 1];
    for (int i = 0; i <= LZ_DNS_CHAIN_MAX; i++) {
        snprintf(bufs[i], sizeof bufs[i], "%c.test>%c.test", 'a' + i, 'a' + i + 1);
        links[i] = bufs[i];
    }
    char last[16];
    snprintf(last, sizeof last, "%c.test", 'a' + LZ_DNS_CHAIN_MAX);
    chain_answer(a, links, LZ_DNS_CHAIN_MAX, last);
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), 0);
    assert_int_equal(ch.n_cname, LZ_DNS_CHAIN_MAX);
    assert_int_equal(ch.n_a, 1);
    snprintf(last, sizeof last, "%c.test", 'a' + LZ_DNS_CHAIN_MAX + 1);
    chain_answer(a, links, LZ_DNS_CHAIN_MAX + 1, last);
    assert_int_equal(lz_dns_chain_walk(a, qn, ql, &ch, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_CNAME_LONG);
    free(a);
}

static void test_build(void **state) {
    (void)state;
    struct pk *p = calloc(1, sizeof *p);
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    uint8_t out[LZ_DNS_BUILD_MAX];
    size_t n;
    /* NODATA for AAAA, with the client's OPT answered. */
    dig_query(p);
    p->b[LZ_DNS_HDR + 17 + 1] = LZ_DNS_T_AAAA;
    struct lz_dns_query q = query_ok(p);
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_NOERROR, false, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR + 17 + 4 + 11);
    assert_memory_equal(out, "\xbe\xef\x81\x80\0\1\0\0\0\0\0\1", 12);
    assert_memory_equal(out + n - 11, "\0\0\x29\x04\xd0\0\0\0\0\0\0", 11);
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_SERVFAIL, false, out, sizeof out, &n), 0);
    assert_int_equal(out[3], 0x82);
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_REFUSED, false, out, 20, &n), -ENOSPC);
    /* FORMERR for an unparsable query: its ID only, no question. */
    struct lz_dns_query id_only = { .id = lz_dns_peek_id((const uint8_t *)"\x12\x34\x56", 3) };
    assert_int_equal(lz_dns_build_rcode(&id_only, LZ_DNS_FORMERR, false, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR);
    assert_memory_equal(out, "\x12\x34\x80\x81\0\0\0\0\0\0\0\0", 12);
    assert_int_equal(lz_dns_peek_id((const uint8_t *)"\x12", 1), 0);
    /* 40 A records: 12 + 17 + 4 + 40 * 16 = 673 bytes. Without EDNS (512)
     * TC and the 29 records that fit (12 + 17 + 4 + 29 * 16 = 497); with
     * the client's 1232, the answer. */
    struct lz_dns_chain ch = { 0 };
    for (unsigned i = 0; i < 40; i++) {
        a->rr[i].type = LZ_DNS_T_A;
        a->rr[i].addr = 0x5db80000u + i;
        ch.a[ch.n_a++] = (uint8_t)i;
    }
    a->n = 40;
    hdr(p, 5, 0x0100, 1, 0, 0, 0);
    name(p, "Api.Example.COM");
    u16(p, 1);
    u16(p, 1);
    q = query_ok(p);
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR + 17 + 4 + 29 * 16);
    assert_true(n <= 512);
    assert_int_equal(out[2] & 0x02, 0x02);       /* TC */
    assert_int_equal(out[7], 29);                /* the first 29 answers */
    assert_int_equal((unsigned)out[n - 1], 28u); /* 0x5db80000 + 28, the last that fits */
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, true, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR + 17 + 4 + 40 * 16);
    assert_int_equal(out[2] & 0x02, 0);
    assert_int_equal(out[7], 40);
    dig_query(p);
    q = query_ok(p);
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, sizeof out, &n), 0);
    assert_int_equal(n, LZ_DNS_HDR + 17 + 4 + 40 * 16 + 11);
    assert_int_equal(out[7], 40);
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, 100, &n), -ENOSPC);
    /* An index out of the answer is refused, not read. */
    ch.a[0] = 200;
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, sizeof out, &n), -EINVAL);
    /* So is a CNAME whose target length is not a wire name's. */
    ch.a[0] = 0;
    ch.n_cname = 1;
    ch.cname[0] = 1;
    a->rr[1].type = LZ_DNS_T_CNAME;
    a->rr[1].target_len = 0;
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, sizeof out, &n), -EINVAL);
    a->rr[1].target_len = LZ_DNS_WIRE_NAME_MAX + 1;
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, false, out, sizeof out, &n), -EINVAL);
    a->rr[1].target_len = 3;
    memcpy(a->rr[1].target, "\1x\0", 3);
    assert_int_equal(lz_dns_build_answer(&q, a, &ch, 60, true, out, sizeof out, &n), 0);
    q.qname_len = LZ_DNS_WIRE_NAME_MAX + 1;
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_REFUSED, false, out, sizeof out, &n), -EINVAL);
    /* build_query refuses non-canonical names. */
    assert_int_equal(lz_dns_build_query(1, "Upper.example", 1, out, sizeof out, &n), -EINVAL);
    assert_int_equal(lz_dns_build_query(1, "a..example", 1, out, sizeof out, &n), -EINVAL);
    assert_int_equal(lz_dns_build_query(1, "a.example", 1, out, 10, &n), -ENOSPC);
    free(p);
    free(a);
}

static void test_tcp_framing(void **state) {
    (void)state;
    uint8_t msg[20], buf[64];
    memset(msg, 7, sizeof msg);
    size_t n;
    assert_int_equal(lz_dns_tcp_frame(msg, 20, buf, sizeof buf, &n), 0);
    assert_int_equal(n, 22);
    assert_int_equal(buf[0], 0);
    assert_int_equal(buf[1], 20);
    memcpy(buf + 22, buf, 22); /* two messages back to back */
    const uint8_t *m;
    size_t ml, used;
    for (size_t k = 0; k < 22; k++)
        assert_int_equal(lz_dns_tcp_next(buf, k, &m, &ml, &used), 0);
    assert_int_equal(lz_dns_tcp_next(buf, 44, &m, &ml, &used), 1);
    assert_int_equal(ml, 20);
    assert_int_equal(used, 22);
    assert_ptr_equal(m, buf + 2);
    assert_int_equal(lz_dns_tcp_next(buf + used, 44 - used, &m, &ml, &used), 1);
    assert_int_equal(lz_dns_tcp_next((const uint8_t *)"\0\5hello", 7, &m, &ml, &used), -EBADMSG);
    assert_int_equal(lz_dns_tcp_frame(msg, 20, buf, 21, &n), -ENOSPC);
    assert_int_equal(lz_dns_tcp_frame(msg, LZ_DNS_MSG_MAX + 1, buf, sizeof buf, &n), -EMSGSIZE);
}

static void test_filter(void **state) {
    (void)state;
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    /* Rebinding targets: every one refused; a public address kept. */
    const uint32_t bad[] = {
        0x0a000202u,                                        /* 10.0.2.2 slirp gateway (host loopback) */
        0x0a000203u,                                        /* 10.0.2.3 slirp DNS */
        0x0a000264u,                                        /* 10.0.2.100 the sandbox */
        0x0a0a0a0au, 0x7f000001u, 0x7f353535u, 0xa9fea9feu, /* 169.254.169.254 metadata */
        0xac100001u, 0xac1fffffu, 0xc0a80101u, 0x64400001u, 0x00000000u, 0x00010203u,
        0xe0000001u, 0xefffffffu, 0xffffffffu, 0xf0000001u, 0xc0000001u,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!lz_dnsfilter_always_denied(bad[i]))
            fail_msg("%08x not denied", bad[i]);
    const uint32_t good[] = { 0x5db8d822u, 0x08080808u, 0x0b000001u,
                              0xac0fffffu, 0xac200000u, 0xc0a70101u,
                              0x64800000u, 0xa9fd0001u, 0xc6120701u /* 198.18.7.1: the network tests' hosts */,
                              0x7effffffu, 0x80000000u, 0x01000000u,
                              0x09ffffffu, 0xc0000100u, 0x643fffffu,
                              0xa9ff0000u, 0xc0a90000u, 0xdfffffffu };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (lz_dnsfilter_always_denied(good[i]))
            fail_msg("%08x denied", good[i]);
    /* One answer: public, metadata, a host address, a profile-denied one. */
    const uint32_t addrs[] = { 0x5db8d822u, 0xa9fea9feu, 0xcb007107u /* 203.0.113.7: host */,
                               0x08080808u /* profile deny 8.8.0.0/16 */ };
    memset(a, 0, sizeof *a);
    struct lz_dns_chain ch = { 0 };
    for (unsigned i = 0; i < 4; i++) {
        a->rr[i].type = LZ_DNS_T_A;
        a->rr[i].addr = addrs[i];
        a->rr[i].ttl = 500 + i;
        ch.a[ch.n_a++] = (uint8_t)i;
    }
    a->n = 4;
    uint32_t host = 0xcb007107u;
    struct lz_netrule deny = { .addr = 0x08080000u, .len = 16, .action = LZ_NET_DENY };
    struct lz_dnsfilter f;
    lz_dnsfilter_apply(a, &ch, &deny, 1, &host, 1, &f);
    assert_int_equal(f.verdict, LZ_DNSF_ANSWER);
    assert_int_equal(f.n_dropped, 3);
    assert_int_equal(f.kept.n_a, 1);
    assert_int_equal(a->rr[f.kept.a[0]].addr, 0x5db8d822u);
    assert_int_equal(f.lifetime, 500); /* the kept records' TTL, not the dropped ones' */
    /* Positive control: without the host address and the profile's deny,
     * those two are kept; the metadata address never is. */
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.kept.n_a, 3);
    assert_int_equal(f.n_dropped, 1);
    /* Every address dropped: SERVFAIL, nothing learned. */
    a->rr[0].addr = 0x7f000001u;
    lz_dnsfilter_apply(a, &ch, &deny, 1, &host, 1, &f);
    assert_int_equal(f.verdict, LZ_DNSF_SERVFAIL);
    assert_int_equal(f.kept.n_a, 0);
    assert_int_equal(f.lifetime, 0);
    /* No A at all: NODATA (an answer without addresses). */
    struct lz_dns_chain none = { 0 };
    lz_dnsfilter_apply(a, &none, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.verdict, LZ_DNSF_ANSWER);
    assert_int_equal(f.kept.n_a, 0);
    a->rcode = LZ_DNS_NXDOMAIN;
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.verdict, LZ_DNSF_NXDOMAIN);
    assert_int_equal(f.kept.n_a, 0);
    a->rcode = LZ_DNS_REFUSED;
    lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
    assert_int_equal(f.verdict, LZ_DNSF_SERVFAIL);
    free(a);
}

/* A packet captured from dig and dnsmasq on loopback
 * (tests/unit/data/dns/capture.py). */
static size_t captured(const char *file, uint8_t *buf, size_t cap) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/dns/%s", src ? src : ".", file);
    FILE *f = fopen(path, "rbe");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    return n;
}

static void test_real_packets(void **state) {
    (void)state;
    static uint8_t b[LZ_DNS_MSG_MAX], out[LZ_DNS_BUILD_MAX];
    size_t n, on;
    struct lz_dns_query q;
    enum lz_dns_reason why = LZ_DNS_OK;
    /* dig Api.Allowed.TEST: RD|AD, OPT 1232 with a COOKIE. */
    n = captured("dig-query.bin", b, sizeof b);
    assert_int_equal(lz_dns_parse_query(b, n, &q, &why), 0);
    assert_string_equal(q.name, "api.allowed.test");
    assert_int_equal(q.qtype, LZ_DNS_T_A);
    assert_true(q.edns);
    assert_int_equal(q.udp_size, 1232);
    assert_memory_equal(q.qname, "\3Api\7Allowed\4TEST", 18);
    n = captured("dig-query-noedns.bin", b, sizeof b);
    assert_int_equal(lz_dns_parse_query(b, n, &q, &why), 0);
    assert_string_equal(q.name, "allowed.test");
    assert_int_equal(q.qtype, LZ_DNS_T_AAAA);
    assert_false(q.edns);
    /* dig 'allowed\.test': one label holding a dot. Refused, echoed. */
    n = captured("dig-query-escape.bin", b, sizeof b);
    assert_int_equal(lz_dns_parse_query(b, n, &q, &why), 0);
    assert_int_equal(q.refuse, LZ_DNS_R_NAME_BYTES);
    assert_int_equal(lz_dns_build_rcode(&q, LZ_DNS_REFUSED, false, out, sizeof out, &on), 0);
    assert_memory_equal(out + LZ_DNS_HDR,
                        "\x0c"
                        "allowed.test",
                        13);

    /* dnsmasq's answers to the queries Lazaret builds: the bytes sent are
     * exactly lz_dns_build_query's. */
    static const struct {
        const char *tag, *name;
        uint16_t id, type;
        int verdict, n_a;
    } cases[] = {
        { "cname", "www.allowed.test", 0x1001, LZ_DNS_T_A, LZ_DNSF_ANSWER, 1 },
        { "rebind", "rebind.test", 0x1002, LZ_DNS_T_A, LZ_DNSF_SERVFAIL, 0 },
        { "nxdomain", "missing.test", 0x1003, LZ_DNS_T_A, LZ_DNSF_NXDOMAIN, 0 },
        { "aaaa", "allowed.test", 0x1004, LZ_DNS_T_AAAA, LZ_DNSF_ANSWER, 0 },
    };
    struct lz_dns_answer *a = calloc(1, sizeof *a);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "sent-%s.bin", cases[i].tag);
        n = captured(file, b, sizeof b);
        assert_int_equal(lz_dns_build_query(cases[i].id, cases[i].name, cases[i].type, out, sizeof out, &on), 0);
        assert_int_equal(on, n);
        assert_memory_equal(out, b, n);
        struct lz_dns_query sent;
        assert_int_equal(lz_dns_parse_query(out, on, &sent, &why), 0);
        snprintf(file, sizeof file, "resp-%s.bin", cases[i].tag);
        n = captured(file, b, sizeof b);
        if (lz_dns_parse_response(b, n, &sent, a, &why) != 0)
            fail_msg("%s: %s", file, lz_dns_reason_str(why));
        struct lz_dns_chain ch;
        assert_int_equal(lz_dns_chain_walk(a, sent.qname, sent.qname_len, &ch, &why), 0);
        struct lz_dnsfilter f;
        lz_dnsfilter_apply(a, &ch, NULL, 0, NULL, 0, &f);
        assert_int_equal(f.verdict, cases[i].verdict);
        assert_int_equal(f.kept.n_a, cases[i].n_a);
        if (strcmp(cases[i].tag, "cname") == 0) {
            /* www -> cdn, whose 198.18.7.3 is kept and 127.0.0.1 dropped;
             * dnsmasq's TTL 30 becomes the 60 s minimum. */
            assert_int_equal(ch.n_cname, 1);
            assert_int_equal(ch.n_a, 2);
            assert_int_equal(f.n_dropped, 1);
            assert_int_equal(a->rr[f.kept.a[0]].addr, 0xc6120703u);
            assert_int_equal(f.lifetime, 60);
        }
        if (strcmp(cases[i].tag, "rebind") == 0) {
            assert_int_equal(ch.n_a, 1);
            assert_int_equal(a->rr[ch.a[0]].addr, 0xa9fea9feu);
        }
    }
    /* A response is matched to its own query only: the rebind answer
     * against the cname query is refused. */
    struct lz_dns_query sent;
    assert_int_equal(lz_dns_build_query(0x1002, "www.allowed.test", LZ_DNS_T_A, out, sizeof out, &on), 0);
    assert_int_equal(lz_dns_parse_query(out, on, &sent, &why), 0);
    n = captured("resp-rebind.bin", b, sizeof b);
    assert_int_equal(lz_dns_parse_response(b, n, &sent, a, &why), -EBADMSG);
    assert_int_equal(why, LZ_DNS_R_QUESTION);
    free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_accepted),
        cmocka_unit_test(test_query_refusals),
        cmocka_unit_test(test_query_names),
        cmocka_unit_test(test_response_chain_filter_build),
        cmocka_unit_test(test_response_refusals),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_tcp_framing),
        cmocka_unit_test(test_filter),
        cmocka_unit_test(test_real_packets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
