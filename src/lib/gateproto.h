/* gateproto.h — what the TLS gate (lazaret-gate, issue 24 §1) and the
 * Domain's resolver (resolver.h) say to each other.
 *
 * The gate owns no policy. For every connection the sandbox opens to TCP
 * port 443 of a learned address it reads the ClientHello (tlshello.h) and
 * asks the resolver, which holds the names and what each was learned for,
 * whether the name may reach that address. The channel is a SOCK_SEQPACKET
 * socket pair made by the Host Coordinator: one request, one reply, each a
 * whole fixed-size datagram; anything else on it is a protocol error (the
 * resolver drops the gate's channel, the gate exits: both fail closed).
 *
 * Requests name a connection by an id the gate chooses; the reply carries
 * it back. The gate refuses every connection whose reply does not come
 * within its own bound.
 */
#pragma once

#include "hostrule.h"

#include <stdint.h>

#define LZ_GATE_PORT 443 /* the port whose learned addresses go through the gate */

/* lz_gate_req.flags */
#define LZ_GATE_SNI 1u /* sni holds the hello's server name (canonical, hostrule.h) */
#define LZ_GATE_ECH 2u /* the hello carries encrypted_client_hello (sni is then the outer name) */

struct lz_gate_req {
    uint32_t id;
    uint32_t addr; /* the connection's original destination, host byte order */
    uint16_t port;
    uint8_t flags;
    uint8_t pad;
    char sni[LZ_HOSTNAME_MAX + 1]; /* NUL-terminated; "" without LZ_GATE_SNI */
};

enum lz_gate_verdict {
    LZ_GATE_REFUSE = 0,
    LZ_GATE_ALLOW = 1,
};

struct lz_gate_rep {
    uint32_t id;
    uint8_t verdict; /* enum lz_gate_verdict */
    uint8_t pad[3];
    char why[120]; /* a refusal's reason, for the gate's log; NUL-terminated */
};
