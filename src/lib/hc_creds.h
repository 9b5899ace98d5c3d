/* hc_creds.h — the Host Coordinator's part of credentials bound to
 * endpoints (docs/credentials.md; config.h struct lz_credential;
 * credential.h).
 *
 * When a generation starts (hc_creds_prepare, before the sandbox's
 * bundle is written): the values that come from a file or a host command
 * are fetched (a failure stops the start with the credential's name and
 * what to do); if any credential is one the TLS gate serves, the
 * Domain's CA is made for their hosts (minica.h) and its certificate
 * written to <generation>/trust/domain-ca.crt, which the sandbox sees
 * read-only at /run/lazaret/trust (bundle.c) and lazaret-init adds to the
 * image's trust store when the sandbox boots. When the network starts
 * (hc_net.c), hc_creds_send writes the gate's configuration
 * (gateproto.h): the CA, the host's trust anchors, every gated
 * credential with its placeholder and value; then the coordinator frees
 * its copy of the CA: from then on only the gate holds its key. */
#pragma once

#include "hc.h"

int hc_creds_prepare(struct hc *h, struct lz_error *err);
/* Does the gate serve any credential (so it needs --config-fd)? */
bool hc_creds_gated(const struct hc *h);
/* Writes the configuration to fd (blocking) and frees the CA. */
int hc_creds_send(struct hc *h, int fd, struct lz_error *err);
void hc_creds_free(struct hc *h);
