/* netfollow.h — following the host's addresses while a Domain runs.
 *
 * The policy denies every IPv4 address of the host itself as a /32
 * (netpolicy.h): slirp4netns connects from the host, so a host address
 * would reach the host's own services. Those addresses are a snapshot taken
 * when the Domain starts; an address the host gains later (a VPN coming up,
 * a new interface, DHCP renumbering) would be reachable through an allowed
 * prefix. The follower closes that gap.
 *
 * Design. The Host Coordinator, in the host network namespace, opens a
 * NETLINK_ROUTE socket subscribed to RTMGRP_IPV4_IFADDR before it derives
 * the policy and before it starts the Runtime Supervisor, and hands it to
 * the Supervisor (a socket stays in the namespace it was created in, so the
 * Supervisor, in the enforcement namespace, hears the host's address
 * changes and can dump the host's addresses through it). The Supervisor
 * owns the routes, so the follower lives there and no route change has to
 * cross the Coordinator<->Supervisor channel. IPv6 is not followed: it is
 * disabled in the enforcement namespace.
 *
 * What it does. A host address needs a deny exactly when the policy would
 * allow it (lz_netpolicy_lookup, longest prefix): an address inside a
 * denied prefix needs nothing; an explicit allow of exactly that /32 is
 * overridden, as at start ("deny wins on equal prefix"); 127/8 and the DNS
 * forwarder are left alone, as at start. On RTM_NEWADDR the /32 `prohibit`
 * route (the same kind as the start-time host-address denies) is installed
 * at once and read back (the route in the main table, and connect()'s
 * EACCES from the namespace's own view). On RTM_DELADDR, on ENOBUFS (events
 * lost to overflow) and once right after the policy is installed (closing
 * the window between the Coordinator's snapshot and the install), the
 * follower dumps all host addresses and reconciles: missing denies are
 * added, denies it added for addresses the host no longer has are removed
 * (a configured allow of that /32 is restored; a configured route is never
 * removed). A DELADDR alone is not trusted to remove a deny: the same
 * address can be on another interface. Every failure is final: the caller
 * stops the sandbox (fail closed).
 *
 * The Supervisor keeps CAP_NET_ADMIN in its permitted set only (not in the
 * bounding, inheritable or ambient sets, so nothing it starts can have it)
 * and raises it into the effective set only around a route change.
 */
#pragma once

#include "netpolicy.h"

#include <stdbool.h>
#include <stdint.h>

#define LZ_NETFOLLOW_MAX_ADDRS 4096

/* In the Host Coordinator (host namespace): the subscribed socket to hand
 * to the Supervisor (O_CLOEXEC; lz_spawn's keep_fds passes it on). */
int lz_netfollow_open_host_socket(struct lz_error *err);

/* Whether a host address needs a /32 deny of its own under policy p. */
bool lz_netfollow_needs_deny(const struct lz_netpolicy *p, uint32_t addr);

/* What to change, given the /32 denies added so far and the host's current
 * addresses: ret_add (addresses needing a deny not yet added) and
 * ret_remove (added denies whose address is gone). Pure; for tests too.
 * The returned arrays are malloc'd (may be NULL when empty). */
void lz_netfollow_plan(const struct lz_netpolicy *p, const uint32_t *added, size_t n_added, const uint32_t *host,
                       size_t n_host, uint32_t **ret_add, size_t *ret_n_add, uint32_t **ret_remove,
                       size_t *ret_n_remove);

struct lz_netfollow;

/* Takes ownership of host_fd and of *pol (cleared). log (with log_ud)
 * receives one line per change (with its timing) and per reconcile. */
int lz_netfollow_new(int host_fd, struct lz_netpolicy *pol, lz_log_fn log, void *log_ud, struct lz_netfollow **ret,
                     struct lz_error *err);
int lz_netfollow_fd(const struct lz_netfollow *f);
/* Dumps the host's addresses and reconciles the denies (see above). */
int lz_netfollow_reconcile(struct lz_netfollow *f, const char *why, struct lz_error *err);
/* Handles what is pending on the socket (call when it is readable). */
int lz_netfollow_process(struct lz_netfollow *f, struct lz_error *err);
void lz_netfollow_free(struct lz_netfollow *f);
