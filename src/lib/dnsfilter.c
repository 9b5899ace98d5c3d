/* dnsfilter.c — the answer filter of the resolver (dnsfilter.h). */
#include "dnsfilter.h"

static const struct {
    uint32_t addr;
    uint8_t len;
} always[] = {
    { 0x00000000u, 8 },  /* 0.0.0.0/8 "this network" */
    { 0x0a000000u, 8 },  /* 10/8 */
    { 0x0a000200u, 24 }, /* 10.0.2.0/24 slirp4netns: gateway, DNS, the sandbox itself */
    { 0x64400000u, 10 }, /* 100.64/10 CGNAT */
    { 0x7f000000u, 8 },  /* 127/8 loopback */
    { 0xa9fe0000u, 16 }, /* 169.254/16 link-local, cloud metadata */
    { 0xac100000u, 12 }, /* 172.16/12 */
    { 0xc0000000u, 24 }, /* 192.0.0.0/24 IETF protocol assignments */
    { 0xc0a80000u, 16 }, /* 192.168/16 */
    { 0xe0000000u, 4 },  /* 224/4 multicast */
    { 0xf0000000u, 4 },  /* 240/4 reserved, broadcast */
};

static bool in_prefix(uint32_t addr, uint32_t net, unsigned len) {
    uint32_t mask = len == 0 ? 0 : len >= 32 ? UINT32_MAX : ~(UINT32_MAX >> len);
    return (addr & mask) == (net & mask);
}

bool lz_dnsfilter_always_denied(uint32_t addr) {
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (in_prefix(addr, always[i].addr, always[i].len))
            return true;
    return false;
}

static bool denied(uint32_t addr, const struct lz_netrule *deny, size_t n_deny, const uint32_t *host, size_t n_host) {
    if (lz_dnsfilter_always_denied(addr))
        return true;
    for (size_t i = 0; i < n_host; i++)
        if (host[i] == addr)
            return true;
    for (size_t i = 0; i < n_deny; i++)
        if (in_prefix(addr, deny[i].addr, deny[i].len > 32 ? 32 : deny[i].len))
            return true;
    return false;
}

void lz_dnsfilter_apply(const struct lz_dns_answer *a, const struct lz_dns_chain *ch, const struct lz_netrule *deny,
                        size_t n_deny, const uint32_t *host_addrs, size_t n_host, struct lz_dnsfilter *ret) {
    struct lz_dnsfilter f = { .verdict = LZ_DNSF_SERVFAIL };
    if (a->rcode == LZ_DNS_NXDOMAIN) {
        f.verdict = LZ_DNSF_NXDOMAIN;
    } else if (a->rcode == LZ_DNS_NOERROR) {
        f.kept = *ch;
        f.kept.n_a = 0;
        uint32_t min = UINT32_MAX;
        /* Indices outside the answer (a chain not made from it) are
         * dropped, never read. */
        f.kept.n_cname = 0;
        for (size_t k = 0; k < ch->n_cname && k < LZ_DNS_CHAIN_MAX; k++) {
            if (ch->cname[k] >= a->n)
                continue;
            f.kept.cname[f.kept.n_cname++] = ch->cname[k];
            min = a->rr[ch->cname[k]].ttl < min ? a->rr[ch->cname[k]].ttl : min;
        }
        for (size_t k = 0; k < ch->n_a && k < LZ_DNS_RR_MAX; k++) {
            if (ch->a[k] >= a->n)
                continue;
            const struct lz_dns_rr *rr = &a->rr[ch->a[k]];
            if (denied(rr->addr, deny, n_deny, host_addrs, n_host)) {
                f.n_dropped++;
                continue;
            }
            f.kept.a[f.kept.n_a++] = ch->a[k];
            min = rr->ttl < min ? rr->ttl : min;
        }
        f.kept.min_ttl = min == UINT32_MAX ? 0 : min;
        f.lifetime = f.kept.min_ttl < LZ_DNSFILTER_TTL_MIN ? LZ_DNSFILTER_TTL_MIN
            : f.kept.min_ttl > LZ_DNSFILTER_TTL_MAX        ? LZ_DNSFILTER_TTL_MAX
                                                           : f.kept.min_ttl;
        f.verdict = ch->n_a > 0 && f.kept.n_a == 0 ? LZ_DNSF_SERVFAIL : LZ_DNSF_ANSWER;
        if (f.verdict != LZ_DNSF_ANSWER)
            f.lifetime = 0;
    }
    *ret = f;
}
