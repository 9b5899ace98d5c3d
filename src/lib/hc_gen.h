/* hc_gen.h — the Domain's generation (generation.c) and its OCI bundle
 * (bundle.c), rooms of the Host Coordinator (hc.h); called by
 * coordinator.c, and bundle.c's also by generation.c.
 */
#pragma once

#include "hc.h"

/* generation.c: the acquisition table, up to the published socket; on
 * failure err says why and hc_stop_generation releases what was taken. */
int hc_start_generation(struct hc *h, struct lz_error *err);
/* generation.c: the host Git scan on its own thread (the Supervisor's
 * spawn joins it), and the wait for it on every other way out. */
void hc_scan_start(struct hc *h);
void hc_scan_wait(struct hc *h);
/* generation.c: the release table (best effort; what cannot be proven
 * released leaves the generation "failed" for recovery). */
void hc_stop_generation(struct hc *h);

/* bundle.c: the image's login shell (bash, else sh), as a sandbox path. */
int hc_find_shell(const char *rootfs, char **ret);
/* bundle.c: <bundle_dir>/config.json, once the Supervisor exists (the spec
 * names its network namespace). */
int hc_write_bundle(struct hc *h, struct lz_error *err);
