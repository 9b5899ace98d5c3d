/* hc_net.h — the Host Coordinator's egress by name (issue 23): what the
 * other rooms ask of the Domain's resolver.
 *
 * hc_net_allow_host: the developer approved a host rule (lazaret-escalate
 * --allow-host, escalation.c through its port): from now on names the rule
 * matches are allowed in this Domain (lz_resolver_allow), and the decision
 * is audited. 0, or negative with err saying why the rule could not be
 * added (the request then ends as failed).
 */
#pragma once

#include "hc.h"
#include "hostrule.h"

int hc_net_allow_host(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err);
