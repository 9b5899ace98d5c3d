/* hc_net.h — the coordinator's network room (hc_net.c): the Domain's
 * resolver (resolver.h) on the sockets the Supervisor made in the
 * enforcement namespace (LZ_RS_DNS, h->boot.dns_fd), the learned routes
 * (fqdnroute.h), and what the developer sees of it: the coordinator's log,
 * network rows in the audit (audit.h, bounded per generation), one notice
 * per refused name on the attached terminals, `lazaret net`, and the host
 * rules the developer approves through escalation. Calls no other room
 * but the sessions' send (hc_session.h).
 */
#pragma once

#include "hc.h"
#include "hostrule.h"

/* After the generation started (the sandbox is ready and the Supervisor
 * passed its DNS sockets): the resolver runs from here on. */
int hc_net_start(struct hc *h, struct lz_error *err);
/* Stops the resolver (DNS inside fails from then on) and frees the room. */
void hc_net_stop(struct hc *h);

/* Readable when the resolver has something to report; -1 without one. */
int hc_net_fd(struct hc *h);
/* Takes what the resolver reported: log, audit, notices. */
void hc_net_dispatch(struct hc *h);

/* `lazaret net`: malloc'ed text. */
char *hc_net_report(struct hc *h);

/* The developer approved rule (escalation, --allow-host): names it matches
 * resolve from now on, for the rest of this Domain's run; audited. */
int hc_net_allow_host(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err);
