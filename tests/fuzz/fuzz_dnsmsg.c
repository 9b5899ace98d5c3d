/* libFuzzer target: the DNS message codec (dnsmsg.c) and the answer
 * filter (dnsfilter.c). The input is parsed as a query from the sandbox and
 * as an upstream response to a fixed query for www.example.com (the corpus
 * holds such responses). What parses is built again and must parse back:
 * a query's REFUSED/NODATA responses and its upstream query; a response's
 * filtered answer, whose chain must come out the same. */
#include "dnsfilter.h"
#include "dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_query(const uint8_t *data, size_t size) {
    struct lz_dns_query q;
    enum lz_dns_reason why = LZ_DNS_OK;
    if (lz_dns_parse_query(data, size, &q, &why) != 0) {
        if (why == LZ_DNS_OK || why >= LZ_DNS_R_MAX)
            __builtin_trap();
        struct lz_dns_query id_only = { .id = lz_dns_peek_id(data, size) };
        uint8_t out[LZ_DNS_HDR];
        size_t n;
        if (lz_dns_build_rcode(&id_only, lz_dns_reason_rcode(why), false, out, sizeof out, &n) != 0 || n != LZ_DNS_HDR)
            __builtin_trap();
        return;
    }
    static struct lz_dns_answer a;
    uint8_t out[LZ_DNS_BUILD_MAX];
    size_t n;
    unsigned rc = q.refuse == LZ_DNS_OK ? LZ_DNS_NOERROR : LZ_DNS_REFUSED;
    if (lz_dns_build_rcode(&q, rc, false, out, sizeof out, &n) != 0 || n > LZ_DNS_UDP_PLAIN)
        __builtin_trap();
    if (q.qclass == LZ_DNS_CLASS_IN) {
        if (lz_dns_parse_response(out, n, &q, &a, &why) != 0 || a.n != 0 || a.rcode != rc)
            __builtin_trap();
    }
    if (q.refuse == LZ_DNS_OK) {
        uint8_t up[600];
        struct lz_dns_query u;
        if (lz_dns_build_query(0x4242, q.name, q.qtype, up, sizeof up, &n) != 0 ||
            lz_dns_parse_query(up, n, &u, &why) != 0 || u.refuse != LZ_DNS_OK || strcmp(u.name, q.name) != 0 ||
            !lz_dns_name_eq(u.qname, u.qname_len, q.qname, q.qname_len))
            __builtin_trap();
    } else if (q.name[0]) {
        __builtin_trap();
    }
}

static void check_response(const uint8_t *data, size_t size) {
    static const uint8_t sent_bytes[] = "\x12\x34\x01\x00\0\1\0\0\0\0\0\0\3www\7example\3com\0\0\1\0\1";
    struct lz_dns_query sent;
    if (lz_dns_parse_query(sent_bytes, sizeof sent_bytes - 1, &sent, NULL) != 0)
        __builtin_trap();
    static struct lz_dns_answer a, b;
    enum lz_dns_reason why = LZ_DNS_OK;
    if (lz_dns_parse_response(data, size, &sent, &a, &why) != 0) {
        if (why == LZ_DNS_OK || a.n != 0)
            __builtin_trap();
        return;
    }
    struct lz_dns_chain ch, ch2;
    if (lz_dns_chain_walk(&a, sent.qname, sent.qname_len, &ch, &why) != 0)
        return;
    uint32_t host = 0xcb007107u;
    struct lz_netrule deny = { .addr = 0x08080000u, .len = 16, .action = LZ_NET_DENY };
    struct lz_dnsfilter f;
    lz_dnsfilter_apply(&a, &ch, &deny, 1, &host, 1, &f);
    for (size_t k = 0; k < f.kept.n_a; k++)
        if (lz_dnsfilter_always_denied(a.rr[f.kept.a[k]].addr))
            __builtin_trap();
    if (f.verdict != LZ_DNSF_ANSWER)
        return;
    if (f.lifetime < LZ_DNSFILTER_TTL_MIN || f.lifetime > LZ_DNSFILTER_TTL_MAX)
        __builtin_trap();
    uint8_t out[LZ_DNS_BUILD_MAX];
    size_t n;
    if (lz_dns_build_answer(&sent, &a, &f.kept, f.lifetime, false, out, sizeof out, &n) != 0 || n > LZ_DNS_UDP_PLAIN)
        __builtin_trap();
    if (lz_dns_build_answer(&sent, &a, &f.kept, f.lifetime, true, out, sizeof out, &n) != 0)
        __builtin_trap();
    if (lz_dns_parse_response(out, n, &sent, &b, &why) != 0 ||
        lz_dns_chain_walk(&b, sent.qname, sent.qname_len, &ch2, &why) != 0)
        __builtin_trap();
    if (ch2.n_cname != f.kept.n_cname || ch2.n_a != f.kept.n_a || b.n != f.kept.n_cname + f.kept.n_a)
        __builtin_trap();
    for (size_t k = 0; k < ch2.n_a; k++)
        if (b.rr[ch2.a[k]].addr != a.rr[f.kept.a[k]].addr || b.rr[ch2.a[k]].ttl != f.lifetime)
            __builtin_trap();
    uint8_t framed[LZ_DNS_BUILD_MAX + 2];
    const uint8_t *m;
    size_t fl, ml, used;
    if (lz_dns_tcp_frame(out, n, framed, sizeof framed, &fl) != 0 || lz_dns_tcp_next(framed, fl, &m, &ml, &used) != 1 ||
        ml != n || used != fl || memcmp(m, out, n) != 0)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_DNS_MSG_MAX + 1)
        return 0;
    check_query(data, size);
    check_response(data, size);
    const uint8_t *m;
    size_t ml, used;
    int r = lz_dns_tcp_next(data, size, &m, &ml, &used);
    if (r == 1 && (used > size || m + ml > data + size))
        __builtin_trap();
    return 0;
}
