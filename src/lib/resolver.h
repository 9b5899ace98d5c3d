/* resolver.h — the Domain's DNS resolver, owned by the Host Coordinator
 * (egress by name, issue 23; docs/network.md "Names").
 *
 * The sandbox's resolv.conf names 10.0.2.3. slirp4netns runs with
 * --disable-dns, and the Runtime Supervisor puts 10.0.2.3/32 on the
 * enforcement namespace's loopback and binds a UDP and a TCP socket there
 * (port 53), which it passes to the coordinator (rschan.h, LZ_RS_DNS). So
 * the only resolver the sandbox can reach is this one, it runs outside the
 * sandbox, and when it is gone DNS fails closed.
 *
 * Per query (dnsmsg.h, hostrule.h, dnsfilter.h):
 *   - malformed: FORMERR / NOTIMP; names the policy cannot read: REFUSED;
 *   - over the query rate: REFUSED (event LIMITED, at most one a second);
 *   - the name is decided (lz_hostrule_decide over the allow rules, then
 *     those added at run time by lz_resolver_allow); unlisted or denied:
 *     REFUSED, and the name is NEVER forwarded upstream (event REFUSED /
 *     DENIED). With any_name (the "open" preset), every name not denied
 *     is allowed on every port;
 *   - QTYPE: A is answered; AAAA, HTTPS, SVCB of an allowed name: NODATA;
 *     any other type: REFUSED (not forwarded);
 *   - an allowed A: a query with a fresh random ID from a fresh socket to
 *     the upstream resolver (the host's), bounded in time (SERVFAIL on
 *     timeout), over TCP when the answer is truncated; the answer is
 *     parsed against the query Lazaret sent, its CNAME chain walked, and
 *     filtered (rebinding: lz_dnsfilter_apply with the profile's deny
 *     prefixes and the host's addresses);
 *   - unless any_name, every kept address gets its routes (struct
 *     lz_resolver_routes: one per allowed port, 0 for every port) and only
 *     after every route is acknowledged is the answer sent (TTL = the
 *     filter's lifetime). A route that cannot be added: SERVFAIL.
 *
 * Learned addresses: an address lives while any name that answered it
 * lives (lifetime from its last answer); at its deadline, if a TCP
 * connection to it is still open (routes->in_use), it is kept another
 * LZ_RESOLVER_ZOMBIE_STEP_S, at most LZ_RESOLVER_ZOMBIE_MAX_S past its
 * first deadline; otherwise its routes are deleted (event EXPIRED).
 * An address keeps the union of the ports its names allow.
 *
 * Bounds (per Domain): names learned, addresses learned (at most
 * max_per_name per name, the rest of an answer dropped), queries per
 * second (a token bucket), upstream queries in flight, TCP clients, and
 * the refused-names list of the report. When the address table is full,
 * expired idle addresses are evicted first; if none, the query gets
 * SERVFAIL (event LIMITED).
 *
 * Threading: the resolver runs on its own thread from lz_resolver_start
 * to lz_resolver_stop; every other function may be called from the
 * coordinator's thread at any time. The routes port is called only from
 * the resolver's thread.
 */
#pragma once

#include "gateproto.h"
#include "hostrule.h"
#include "netpolicy.h"
#include "util.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#define LZ_RESOLVER_ZOMBIE_STEP_S 60
#define LZ_RESOLVER_ZOMBIE_MAX_S (24 * 3600)
#define LZ_RESOLVER_EVENT_ADDRS 8 /* addresses an event names */

/* How learned addresses reach the kernel (fqdnroute.h in the coordinator;
 * a fake in the unit tests). port 0: every TCP port. */
struct lz_resolver_routes {
    void *ud;
    int (*add)(void *ud, uint32_t addr, uint16_t port, struct lz_error *err);
    int (*del)(void *ud, uint32_t addr, uint16_t port, struct lz_error *err);
    /* > 0: a TCP connection to addr is open; 0: none; < 0: cannot tell
     * (treated as open: a route is never taken from under a connection
     * because a query failed) */
    int (*in_use)(void *ud, uint32_t addr);
};

struct lz_resolver_config {
    /* The policy (copied at start). */
    const struct lz_hostrule *allow;
    size_t n_allow;
    const struct lz_hostrule *deny;
    size_t n_deny;
    bool any_name;                     /* the "open" preset: no routes, every name not denied */
    const struct lz_netrule *deny_net; /* the profile's and default deny prefixes (dnsfilter) */
    size_t n_deny_net;
    const uint32_t *host_addrs; /* the host's own IPv4 addresses */
    size_t n_host;
    /* Where allowed queries go: the host's resolver (IPv4); port 0 when
     * the host names none (every allowed query fails, event FAILED). */
    struct sockaddr_in upstream; /* AF_INET; port 0: none (every allowed query: SERVFAIL, nothing sent) */
    /* 10.0.2.3:53 in the enforcement namespace, bound (UDP) and listening
     * (TCP); taken (closed by lz_resolver_stop, also when start fails). */
    int udp_fd, tcp_fd;
    struct lz_resolver_routes routes;
    /* Bounds; 0 takes the default in parentheses. */
    unsigned max_names;       /* (1024) names with live addresses */
    unsigned max_addrs;       /* (1024) learned addresses */
    unsigned max_per_name;    /* (32) */
    unsigned qps;             /* (100) queries per second, burst 2x */
    unsigned upstream_ms;     /* (2500) one upstream query, UDP then TCP */
    unsigned max_inflight;    /* (64) upstream queries at once */
    unsigned max_tcp_clients; /* (16) */
    /* What the report calls the policy ("balanced"; copied, at most 31
     * bytes); NULL: "open" with any_name, else "names". */
    const char *preset;
    /* With gate: gate_fd is the TLS gate's channel (gateproto.h; taken,
     * closed by lz_resolver_stop, also when start fails), whose requests
     * are answered by lz_resolver_gate_decide with gate_lenient. */
    bool gate;
    int gate_fd;
    /* tls_gate = "lenient": a hello without a server name, or with an
     * encrypted one, passes to any learned address (the name check is
     * skipped for it); otherwise such a hello is refused. */
    bool gate_lenient;
    /* Tests only (the coordinator leaves it 0): when non-zero, every
     * learned lifetime and every zombie step lasts this many milliseconds
     * instead of its seconds (the answer's TTL is unchanged), so a unit
     * test sees expiry without waiting a minute. */
    unsigned test_lifetime_ms;
};

enum lz_resolver_event_kind {
    LZ_RES_LEARNED = 1,  /* a name answered, routes in place (also a refresh with new addresses) */
    LZ_RES_REFUSED,      /* no rule allows the name (never forwarded) */
    LZ_RES_DENIED,       /* a deny rule matches the name (never forwarded) */
    LZ_RES_FILTERED,     /* addresses of an answer dropped (rebinding, host, deny prefixes) */
    LZ_RES_LIMITED,      /* a bound was hit (why says which) */
    LZ_RES_EXPIRED,      /* an address's routes were deleted */
    LZ_RES_FAILED,       /* a route could not be added or deleted (why) */
    LZ_RES_TLS_REFUSED,  /* the TLS gate refused a connection (name: the SNI or ""; addrs[0]: its address; why) */
    LZ_RES_CRED_REFUSED, /* the gate refused a request to a credential's host (name; addrs[0]; why) */
    LZ_RES_GIT_PUSH,     /* a ref of a push through the gate, let through or refused (name; addrs[0]; why) */
};

struct lz_resolver_event {
    enum lz_resolver_event_kind kind;
    int64_t wall_ms;
    char name[LZ_HOSTNAME_MAX + 1]; /* canonical; "" when none (EXPIRED names the address) */
    uint16_t qtype;
    uint8_t n_addrs;
    uint32_t addrs[LZ_RESOLVER_EVENT_ADDRS];
    uint32_t lifetime; /* LEARNED: seconds */
    struct lz_hostports ports;
    char why[200];
};

struct lz_resolver;

/* Starts the resolver's thread. On failure the sockets are closed. */
int lz_resolver_start(const struct lz_resolver_config *cfg, struct lz_resolver **ret, struct lz_error *err);
/* Stops and joins the thread, closes every socket; routes are left to the
 * namespace (it goes with the Domain). NULL is fine. */
void lz_resolver_stop(struct lz_resolver *r);

/* Readable (an eventfd) when events are waiting. */
int lz_resolver_event_fd(const struct lz_resolver *r);
/* Takes up to cap waiting events, oldest first; returns how many. Events
 * are kept in a bounded ring: when the coordinator falls behind, the
 * oldest are dropped and *ret_lost (if not NULL) counts them. */
size_t lz_resolver_events(struct lz_resolver *r, struct lz_resolver_event *out, size_t cap, uint64_t *ret_lost);

/* Adds an allow rule from now on (the developer approved it); the next
 * query for a matching name is forwarded. -E2BIG past the bounds. */
int lz_resolver_allow(struct lz_resolver *r, const struct lz_hostrule *rule, struct lz_error *err);

/* The TLS gate's question (gateproto.h): may a connection whose
 * ClientHello names req->sni (or none) reach req->addr:req->port? Allowed
 * when the policy allows the name on that port now and the address was
 * learned from an answer for that very name (not for another name that
 * shares the address: fronting); without a name (or with an encrypted
 * hello) only when lenient and the address is learned. Refusals push a
 * LZ_RES_TLS_REFUSED event. why (cap bytes) says what was refused and
 * why. Called on the resolver's thread for the gate's channel, and by the
 * unit tests. */
enum lz_gate_verdict lz_resolver_gate_decide(struct lz_resolver *r, uint32_t addr, uint16_t port, const char *sni,
                                             bool ech, bool lenient, char *why, size_t cap);

/* What `lazaret net` shows: the policy, the learned names (addresses,
 * ports, seconds left, zombie), the recent refused names (count, last
 * time). Text, malloc'ed, at most 64 KiB. */
char *lz_resolver_report(struct lz_resolver *r);

/* The first IPv4 nameserver of path (normally /etc/resolv.conf): 0, or
 * -ENOENT with err saying so (no IPv4 nameserver: set [network] resolver). */
int lz_resolver_upstream_from_resolv_conf(const char *path, struct sockaddr_in *ret, struct lz_error *err);
