/* dnsfilter.h — which addresses of an upstream answer the sandbox may
 * learn (issue 23), as a pure function.
 *
 * A learned address becomes a /32 route that is looked up before the main
 * table's prohibit routes (docs/notes/2026-12-03-egress-by-name-codec.md),
 * so an allowed name that answers with a private, loopback, link-local
 * (cloud metadata), multicast or host address would open exactly the hole
 * the prefix policy closes (DNS rebinding). Every A record of the chain is
 * checked against:
 *   - the always-deny set (LZ_DNSFILTER_ALWAYS below: the built-in
 *     [network] default_deny ranges, 0.0.0.0/8, 192.0.0.0/24, and
 *     slirp4netns's 10.0.2.0/24 named on its own), whatever the profile
 *     says;
 *   - the host's own addresses (each a /32);
 *   - the profile's deny prefixes (struct lz_netrule of netpolicy.h, their
 *     action ignored).
 * The documentation (TEST-NET) and benchmarking (198.18.0.0/15) ranges are
 * not in the always-deny set: they reach nothing outside a test harness,
 * and the network tests run their own hosts there; a host address in them
 * is still denied as a host address.
 *
 * Verdict:
 *   ANSWER   NOERROR with the chain and the kept A records (possibly none
 *            when upstream had none: NODATA, with the CNAMEs)
 *   NXDOMAIN upstream said NXDOMAIN: passed on, nothing learned
 *   SERVFAIL upstream failed (any other RCODE), or it had A records and
 *            every one was dropped (the client learns nothing, and cannot
 *            tell a filtered answer from a failure)
 * Lifetime: the chain's smallest TTL clamped to LZ_DNSFILTER_TTL_MIN ..
 * LZ_DNSFILTER_TTL_MAX seconds; the route lives that long, and the answer
 * carries exactly that TTL, so no client caches an address longer than
 * its route (the route layer extends it while a connection is open).
 */
#pragma once

#include "dnsmsg.h"
#include "netpolicy.h"

#define LZ_DNSFILTER_TTL_MIN 60
#define LZ_DNSFILTER_TTL_MAX 3600

enum lz_dnsfilter_verdict {
    LZ_DNSF_ANSWER = 1,
    LZ_DNSF_NXDOMAIN,
    LZ_DNSF_SERVFAIL,
};

struct lz_dnsfilter {
    enum lz_dnsfilter_verdict verdict;
    uint32_t lifetime;        /* seconds, when ANSWER */
    uint8_t n_dropped;        /* A records refused */
    struct lz_dns_chain kept; /* the chain with only the kept A records */
};

/* Is addr in the always-deny set? */
bool lz_dnsfilter_always_denied(uint32_t addr);

/* a: the parsed upstream answer; ch: its chain (lz_dns_chain_walk).
 * Never fails. */
void lz_dnsfilter_apply(const struct lz_dns_answer *a, const struct lz_dns_chain *ch, const struct lz_netrule *deny,
                        size_t n_deny, const uint32_t *host_addrs, size_t n_host, struct lz_dnsfilter *ret);
