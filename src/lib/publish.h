/* publish.h — sandbox ports published on the host (issue 25 §3;
 * docs/network.md "Publishing a port").
 *
 * `lazaret run --publish [HOSTADDR:]HOSTPORT[:SANDBOXPORT]` and the
 * profile key `publish` make a TCP server inside the sandbox (a dev
 * server) reachable from the host: slirp4netns listens on HOSTADDR:HOSTPORT
 * in the host's network namespace (its API socket, add_hostfwd) and
 * forwards each connection to 10.0.2.100:SANDBOXPORT; the enforcement
 * namespace routes the answers (TCP from SANDBOXPORT to slirp's 10.0.2.2)
 * back, and nothing else (netpolicy.h, LZ_NET_PUBLISH_TABLE).
 *
 * The text: HOSTPORT alone (the same port inside, on the host's loopback),
 * HOSTPORT:SANDBOXPORT, ADDR:HOSTPORT (ADDR an IPv4 address in dotted
 * form: a first part with a dot is an address), or ADDR:HOSTPORT:SANDBOXPORT.
 * Ports 1..65535, decimal, no sign or leading zero; ADDR four decimal
 * octets without leading zeros. Without ADDR the host's loopback
 * (127.0.0.1): a published port reaches other machines only when an
 * address says so (0.0.0.0 for every address of the host).
 */
#pragma once

#include "util.h"

#include <stdint.h>

#define LZ_PUBLISH_MAX 32      /* ports one Domain may publish */
#define LZ_PUBLISH_TEXT_MAX 32 /* "255.255.255.255:65535:65535" and its NUL */

struct lz_publish {
    uint32_t host_addr; /* host byte order */
    uint16_t host_port;
    uint16_t port; /* inside the sandbox */
};

/* Parses one (NUL-terminated) text; -EINVAL with err quoting it and saying
 * what to write. */
int lz_publish_parse(const char *text, struct lz_publish *ret, struct lz_error *err);
/* "127.0.0.1:8080:8080": always the full form (cap >= LZ_PUBLISH_TEXT_MAX). */
void lz_publish_format(const struct lz_publish *p, char *buf, size_t cap);
/* Checks a set: at most LZ_PUBLISH_MAX, no host address and port twice (an
 * address and 0.0.0.0 on one port count as the same), no sandbox port
 * twice. -EINVAL with err naming the two. */
int lz_publish_check(const struct lz_publish *p, size_t n, struct lz_error *err);
