/* netpolicy.h — the derived network policy of a Domain generation.
 *
 * The Host Coordinator derives the policy from trusted host configuration
 * only ([network] default_allow/default_deny, the profile's allow_egress/
 * deny_egress, the host's own addresses, the connectivity helper's DNS), and
 * hands it to the Runtime Supervisor as canonical bytes; the Supervisor
 * checks the digest and installs it as routes in the enforcement network
 * namespace, where the sandbox's sockets live (runsc --network=host inside
 * that namespace: see docs/network.md).
 *
 * Semantics: longest prefix wins (the kernel's own route lookup). A DENY
 * prefix becomes a `prohibit` route: connect() fails at once with EACCES
 * and nothing is sent. An ALLOW prefix becomes a route via the
 * connectivity helper's gateway. When the same prefix is both allowed and
 * denied (config check refuses that within one file; across levels it can
 * still arise from host addresses), DENY wins. Without an allow for
 * 0.0.0.0/0 everything not allowed is denied.
 *
 * Canonical encoding (LZ_NETPOLICY_MAGIC, then u32be count, then per rule
 * u32be address, u8 prefix length, u8 action (1 allow, 2 deny)), rules
 * sorted by (length, address), no duplicates, host bits zero. The policy
 * digest is SHA-256 over those bytes.
 */
#pragma once

#include "config.h"
#include "publish.h"
#include "util.h"

#define LZ_NETPOLICY_MAGIC "LZNETPOL1"
#define LZ_NETPOLICY_MAX_RULES 1024

/* The connectivity helper's fixed network (slirp4netns defaults). */
#define LZ_NET_TAP "tap0"
#define LZ_NET_ADDR 0x0a000264u /* 10.0.2.100 */
#define LZ_NET_GW 0x0a000202u   /* 10.0.2.2 */
#define LZ_NET_DNS 0x0a000203u  /* 10.0.2.3: the Domain's resolver (resolver.h), on the namespace's lo */
#define LZ_NET_MTU 65520        /* tap0's MTU, as slirp4netns --mtu (slirp.c) */
/* The host's own addresses, each a /32 prohibit route in a table of their
 * own, looked up by a rule before every other (the learned-address rules
 * of egress by name, fqdnroute.h, included): a host address is refused
 * whatever route a name taught, also one learned before the host gained
 * that address. Kept by the host-address follower (netfollow.h). */
#define LZ_NET_HOSTS_TABLE 99999u
#define LZ_NET_HOSTS_RULE_PREF 900

/* The descriptors the Supervisor opens for the resolver (rschan.h, LZ_RS_DNS), in this order. */
enum { LZ_NET_DNS_UDP, LZ_NET_DNS_TCP, LZ_NET_DNS_RTNL, LZ_NET_DNS_DIAG, LZ_NET_DNS_GATE, LZ_NET_DNS_FDS };

enum lz_net_action { LZ_NET_ALLOW = 1, LZ_NET_DENY = 2 };

struct lz_netrule {
    uint32_t addr; /* host byte order, host bits zero */
    uint8_t len;
    uint8_t action;
};

/* Published ports (publish.h): slirp4netns forwards a host port to
 * 10.0.2.100:PORT from its own 10.0.2.2, which the prefix policy denies
 * (10.0.2.0/24). The answers go back through this table, and only they:
 *     LZ_NET_PUBLISH_TABLE: 10.0.2.2/32 dev tap0
 *     pref LZ_NET_PUBLISH_RULE_PREF ipproto tcp sport PORT to 10.0.2.2/32 lookup LZ_NET_PUBLISH_TABLE
 * one rule per published sandbox port. (A connection the sandbox opens to
 * 10.0.2.2 from such a port reaches slirp4netns's host alias, whose
 * loopback is off: refused there.) */
#define LZ_NET_PUBLISH_TABLE 99998u
#define LZ_NET_PUBLISH_RULE_PREF 950

struct lz_netpolicy {
    struct lz_netrule *rules;
    size_t n;
    uint16_t publish[LZ_PUBLISH_MAX]; /* published sandbox ports, ascending, distinct */
    size_t n_publish;
};

/* Derives the policy. host_addrs: the host's own IPv4 addresses (host
 * byte order), each denied as a /32 (slirp4netns connects from the host). */
int lz_netpolicy_derive(const struct lz_config *c, const uint32_t *host_addrs, size_t n_host, struct lz_netpolicy *ret,
                        struct lz_error *err);
/* The host's IPv4 addresses (getifaddrs). */
int lz_host_ipv4_addrs(uint32_t **ret, size_t *ret_n);

int lz_netpolicy_encode(const struct lz_netpolicy *p, uint8_t **ret_buf, size_t *ret_len);
/* Decodes untrusted bytes, enforcing canonical form. */
int lz_netpolicy_decode(const uint8_t *buf, size_t len, struct lz_netpolicy *ret, struct lz_error *err);
void lz_netpolicy_digest(const uint8_t *buf, size_t len, uint8_t ret[32]);
/* The action the policy gives an address (longest prefix). */
enum lz_net_action lz_netpolicy_lookup(const struct lz_netpolicy *p, uint32_t addr);
void lz_netpolicy_clear(struct lz_netpolicy *p);

/* In the enforcement namespace (Runtime Supervisor), before anything of
 * the sandbox exists and before the helper has made its tap: disables IPv6
 * (for tap0 too, which comes later: the default) and puts the resolver's
 * address 10.0.2.3/32 on lo. The namespace then has no route out at all:
 * only lo. */
int lz_netpolicy_prepare(struct lz_error *err);
/* The helper's tap0, configured here rather than by slirp4netns (which
 * runs without --configure and so never adds a route of its own): MTU
 * LZ_NET_MTU, 10.0.2.100/24 without its prefix route (IFA_F_NOPREFIXROUTE),
 * up. Still no route out of the namespace: only lz_netpolicy_install adds
 * routes, so the booting sandbox sends nothing before the policy is in
 * place (docs/network.md, "Readiness"). */
int lz_netpolicy_tap_up(struct lz_error *err);
/* In the enforcement namespace (Runtime Supervisor), after
 * lz_netpolicy_prepare (IPv6 off, the resolver's address 10.0.2.3/32 on
 * lo; lz_netpolicy_observe and _probe check both): replaces any route to
 * or through tap0 (a helper that configured it itself) with the policy's.
 * The policy's allow of 10.0.2.3/32 (lz_netpolicy_derive) is that address,
 * not a route of the main table: the local table is looked up first, so
 * the sandbox's DNS reaches the socket bound there
 * (lz_netpolicy_dns_sockets) and nothing else; slirp4netns runs with
 * --disable-dns (slirp.c). */
int lz_netpolicy_install(const struct lz_netpolicy *p, struct lz_error *err);
/* Reads back, with netlink, what the namespace holds: the main table's
 * IPv4 routes must be exactly the policy's (type and prefix; none for
 * 10.0.2.3), tap0 must carry 10.0.2.100/24 and lo 10.0.2.3/32. Writes a
 * one-line summary of what it saw into ret_summary
 * ("routes=N deny=D allow=A addr=10.0.2.100/24 dns=lo"). */
int lz_netpolicy_observe(const struct lz_netpolicy *p, char *ret_summary, size_t cap, struct lz_error *err);

/* Pre-publication probe from the namespace's own view: a denied address
 * must be refused at once, an allowed address must be routable, the
 * resolver's 10.0.2.3 must be routable and the namespace's own (local),
 * IPv6 must be unavailable. Sends no packet (UDP connect only). */
int lz_netpolicy_probe(const struct lz_netpolicy *p, struct lz_error *err);

/* 10.0.2.3/32 on lo, alone (lz_netpolicy_prepare does it with IPv6
 * off); needs CAP_NET_ADMIN in the namespace. Idempotent. */
int lz_netpolicy_dns_local(struct lz_error *err);
/* The resolver's sockets, opened in the caller's network namespace (the
 * enforcement namespace, before CAP_NET_ADMIN is dropped), all
 * close-on-exec, into ret[LZ_NET_DNS_*]: a UDP socket bound to
 * 10.0.2.3:53 and a TCP socket bound there and listening (backlog 16),
 * both non-blocking and without SO_REUSEADDR/SO_REUSEPORT, so that no
 * other socket of the namespace can bind 10.0.2.3:53 while they are open;
 * a NETLINK_ROUTE and a NETLINK_SOCK_DIAG socket, bound (fqdnroute.h);
 * the TLS gate's listener (gateproto.h): TCP, IP_TRANSPARENT (so it may
 * answer for the learned addresses its local routes deliver to it), bound
 * to 0.0.0.0:443 and listening, non-blocking.
 * 10.0.2.3 must be on lo already. On failure none is left open. */
int lz_netpolicy_dns_sockets(int ret[LZ_NET_DNS_FDS], struct lz_error *err);

/* Single routes in the enforcement namespace, for the host-address
 * follower (netfollow.h); CAP_NET_ADMIN must be in effect for _set.
 * _set installs the route of one rule exactly as lz_netpolicy_install does
 * (action LZ_NET_DENY or LZ_NET_ALLOW, replacing whatever the prefix had),
 * or removes the prefix's route (action 0). _get reads the main table back:
 * the action of the route for exactly addr/len, 0 when there is none, or a
 * negative errno. _check: 0 if the kernel would route to addr, else the
 * negative errno connect() gives (a deny gives -EACCES). */
int lz_netpolicy_route_set(uint32_t addr, unsigned len, int action);
int lz_netpolicy_route_get(uint32_t addr, unsigned len);
/* The host-address table (LZ_NET_HOSTS_TABLE): on adds addr/32's prohibit
 * route (and the rule that selects the table, once), off removes it;
 * CAP_NET_ADMIN in effect. _get: 1 if the table holds addr/32, 0 if not,
 * or a negative errno. */
int lz_netpolicy_host_deny(uint32_t addr, bool on);
int lz_netpolicy_host_deny_get(uint32_t addr);
int lz_netpolicy_route_check(uint32_t addr);
