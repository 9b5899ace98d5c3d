/* run_prepare.c — how lazaret-core's `lazaret run` starts a Domain: it
 * prepares the profile's image (cli.h, struct lz_run_starter). */
#include "cli.h"
#include "config.h"
#include "hostca.h"
#include "image.h"

static int prepare_image(const struct lz_config *cfg, void **state, const char **ret, struct lz_error *err) {
    struct lz_prepared *p = *state;
    if (!p)
        *state = p = lz_xcalloc(1, sizeof *p);
    if (!p->rootfs) {
        struct lz_progress_view ui;
        lz_cli_progress_init(&ui, "lazaret: ");
        _cleanup_(lz_hostca_clear) struct lz_hostca ca = { 0 };
        int r = 0;
        if (cfg->profile.host_ca_certificates)
            r = lz_hostca_load(lz_hostca_dir(), &ca, err);
        if (r == 0)
            r = lz_image_prepare_ca(cfg->data_root, cfg->profile.image, &ca, lz_cli_progress, &ui, p, err);
        lz_cli_progress_done(&ui);
        if (r < 0)
            return r;
    }
    *ret = p->artifact_id;
    return 0;
}

static void clear_image(void *state) {
    struct lz_prepared *p = state;
    if (!p)
        return;
    lz_prepared_clear(p);
    free(p);
}

const struct lz_run_starter lz_run_core = {
    .prepare = prepare_image,
    .clear = clear_image,
    .builtin_notice = true,
};
