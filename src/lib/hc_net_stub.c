/* hc_net_stub.c — REMOVED AT MERGE: a stand-in for hc_net.c's
 * hc_net_allow_host (hc_net.h) so that the escalation side of
 * --allow-host links and its tests run before the resolver is wired. It
 * only logs the rule; weak, so the real definition wins if both are
 * linked. */
#include "hc_net.h"
#include "hclog.h"

__attribute__((weak)) int hc_net_allow_host(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err) {
    (void)h;
    (void)err;
    char text[LZ_HOSTRULE_TEXT_MAX + 1];
    if (lz_hostrule_format(rule, text, sizeof text) < 0)
        snprintf(text, sizeof text, "(unformattable)");
    hc_log("network: host rule %s allowed (stand-in: no resolver in this build)", text);
    return 0;
}
