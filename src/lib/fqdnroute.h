/* fqdnroute.h — learned addresses as kernel routes in the enforcement
 * network namespace (egress by name, issue 23; docs/network.md).
 *
 * The Runtime Supervisor opens a NETLINK_ROUTE and a NETLINK_SOCK_DIAG
 * socket inside the enforcement namespace, before it drops CAP_NET_ADMIN,
 * and passes them to the Host Coordinator (rschan.h, LZ_RS_DNS). A netlink
 * socket stays in the namespace it was made in; the coordinator, which
 * owns the Domain's user namespace, may change that namespace's routes
 * through it (the kernel checks the opener's and the sender's
 * capabilities in the namespace's user namespace: both hold). Nothing in
 * the sandbox holds these sockets.
 *
 * Layout: a learned address A allowed on TCP port P is the route
 *     A/32 via 10.0.2.2 dev tap0 onlink table (LZ_FQDN_TABLE0 + P) proto LZ_FQDN_RTPROT
 * and P's table is selected by the rule
 *     pref LZ_FQDN_RULE_PREF ipproto tcp dport P lookup (LZ_FQDN_TABLE0 + P)
 * (P = 0: every TCP port, the rule without dport). A lookup that finds no
 * route in a rule's table falls through to the next rule and finally to
 * the main table (the prefix policy, netpolicy.h), so an address on a port
 * it was not learned for, or over UDP, meets the main table's prohibit
 * route: EACCES at once. Rules are added on first use of a port and stay
 * for the generation (they select empty tables when unused).
 *
 * Every change waits for the kernel's acknowledgement before it returns:
 * the resolver answers a query only after its routes exist. Every receive
 * is bounded (a 2 s receive timeout on both sockets, set by
 * lz_fqdnroute_open: -ETIMEDOUT), every dump in datagrams, and answers are
 * matched by sequence number (a late answer to an abandoned request is
 * skipped).
 */
#pragma once

#include "util.h"

#include <stdint.h>

#define LZ_FQDN_RTPROT 251         /* routes and rules Lazaret learned (not a kernel/boot/static proto) */
#define LZ_FQDN_TABLE0 100000u     /* table of port P: LZ_FQDN_TABLE0 + P */
#define LZ_FQDN_RULE_PREF 1000     /* before main (32766) */
#define LZ_FQDN_GATE_RULE_PREF 999 /* the gate's port: before the every-port rule */

struct lz_fqdnroute;

/* Takes both sockets (closed by lz_fqdnroute_free, also on failure); finds
 * tap0's index; removes every route and rule of proto LZ_FQDN_RTPROT left
 * in the namespace (a restart fails closed). */
int lz_fqdnroute_open(int rtnl_fd, int diag_fd, struct lz_fqdnroute **ret, struct lz_error *err);
void lz_fqdnroute_free(struct lz_fqdnroute *fr);

/* The TLS gate (gateproto.h): from now on, routes for port are
 *     local A/32 dev lo src 10.0.2.100 table (LZ_FQDN_TABLE0 + port)
 * so the sandbox's connections to a learned address on that port are
 * delivered in the namespace itself, to the gate's IP_TRANSPARENT
 * listener, which checks their ClientHello; their rule comes at
 * LZ_FQDN_GATE_RULE_PREF, before the every-port rule (an address learned
 * for every port is also learned for the gate's port: the resolver adds
 * both). Call before the first add. */
int lz_fqdnroute_set_gate(struct lz_fqdnroute *fr, uint16_t port, struct lz_error *err);

/* addr: host byte order; port 0: every TCP port. Idempotent. */
int lz_fqdnroute_add(struct lz_fqdnroute *fr, uint32_t addr, uint16_t port, struct lz_error *err);
int lz_fqdnroute_del(struct lz_fqdnroute *fr, uint32_t addr, uint16_t port, struct lz_error *err);

/* The TCP sockets in the namespace, not listening, whose peer is addr
 * (sock_diag, no privilege needed): their count, or -errno. Every state
 * but LISTEN, CLOSE and TIME_WAIT counts (SYN_SENT and the closing states
 * included: their peer may still send; TIME_WAIT is closed both ways). */
int lz_fqdnroute_in_use(struct lz_fqdnroute *fr, uint32_t addr);

/* Every learned route in the namespace (a netlink dump of proto
 * LZ_FQDN_RTPROT routes), for tests and the read-back after a change:
 * how many were given to cb, or -errno. */
int lz_fqdnroute_list(struct lz_fqdnroute *fr, void (*cb)(void *ud, uint32_t addr, uint16_t port), void *ud,
                      struct lz_error *err);
