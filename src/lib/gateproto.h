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
    char why[200];                 /* LZ_GATE_REPORT: what happened; NUL-terminated */
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

/* The gate's configuration (credentials, docs/credentials.md): records
 * the Host Coordinator writes to a stream socket the gate reads to its
 * end before it drops its privileges (--config-fd), each
 *   u8 type, u32 length (host byte order), length bytes,
 * ending with a record of type LZ_GCFG_END; LZ_GCFG_MAX bytes in all at
 * most. A LZ_GCFG_CRED record is NUL-terminated strings in this order:
 * var, host, header, "basic" or "template", prefix, suffix, username,
 * placeholder, value, push_delete ("1" or "0"), then the push_refs
 * patterns, one string each. */
enum lz_gate_cfg_type {
    LZ_GCFG_END = 0,
    LZ_GCFG_CA_KEY = 1,    /* the Domain CA's private key, DER */
    LZ_GCFG_CA_CERT = 2,   /* its certificate, DER */
    LZ_GCFG_TRUST_PEM = 3, /* CA certificates (PEM) the real servers are verified against */
    LZ_GCFG_CRED = 4,      /* one credential */
};
#define LZ_GCFG_MAX (8u << 20)
#define LZ_GCFG_CREDS_MAX 16 /* LZ_CONFIG_MAX_CREDENTIALS */

/* lz_gate_req.flags: a report of the gate, not a question (no reply): a
 * refusal on a credential's host after the gate ended TLS (sni: the
 * host; why: the reason), or a pushed ref (LZ_GATE_REPORT_PUSH). */
#define LZ_GATE_REPORT 4u
#define LZ_GATE_REPORT_PUSH 8u
