/* credgate.h — the TLS gate's credential hosts (issue 24 §2-§3;
 * docs/credentials.md): for a host a profile binds a credential to, the
 * gate ends the sandbox's TLS itself with a certificate of the Domain's
 * CA, opens its own TLS connection to the real server (verified against
 * the host's trust store), and passes the requests through credstream.h,
 * which swaps the placeholder for the value in the declared header, and
 * the responses through its scanner, which never lets the value back.
 *
 * Part of lazaret-gate only (gate.c drives it from its event loop). The
 * configuration comes from the Host Coordinator over --config-fd
 * (gateproto.h) and is read before the gate drops its privileges:
 * cg_config_read also makes the leaves and warms OpenSSL up, so that
 * nothing it needs later opens a file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads and applies the configuration stream; msg gets the reason of a
 * failure (the gate then exits: the coordinator's log says why). */
int cg_config_read(int fd, char *msg, size_t cap);
/* How many credential hosts; 0 without --config-fd. */
size_t cg_hosts(void);
/* The index of the credential host sni names (canonical), or -1. */
int cg_host(const char *sni);

/* What the gate is told of: a refusal on a credential host (push false)
 * or a pushed ref (push true), for the Domain's audit. */
typedef void (*cg_report_fn)(uint32_t addr, uint16_t port, const char *host, bool push, const char *why);
void cg_set_report(cg_report_fn fn);

struct cg_conn;

/* A connection to credential host `host` whose TCP connection to the
 * server (ufd) is up; cfd is the sandbox's, its ClientHello unread. NULL
 * when out of memory. */
struct cg_conn *cg_conn_new(int host, int cfd, int ufd, uint32_t addr, uint16_t port);

enum cg_step {
    CG_WAIT = 0,  /* waits for its sockets */
    CG_AGAIN = 1, /* has more to do: step it again after the others */
    CG_END = 2,   /* over: close both sockets */
    CG_RESET = 3, /* refused or failed: reset the sandbox's connection (cg_conn_why says why) */
};
enum cg_step cg_conn_step(struct cg_conn *t);
/* Still in the handshakes (the gate's deadline applies)? */
bool cg_conn_handshaking(const struct cg_conn *t);
const char *cg_conn_why(const struct cg_conn *t);
/* Frees the TLS state (not the sockets: the gate closes them). */
void cg_conn_free(struct cg_conn *t);
