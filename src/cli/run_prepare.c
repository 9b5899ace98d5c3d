/* run_prepare.c — how lazaret-core's `lazaret run` starts a Domain: it
 * prepares the profile's image (cli.h, struct lz_run_starter). */
#include "cli.h"
#include "config.h"
#include "image.h"

static void progress(void *ud, const char *phase, uint64_t done, uint64_t total) {
    bool tty = isatty(STDERR_FILENO);
    (void)ud;
    if (!tty) {
        if (done == 0)
            fprintf(stderr, "lazaret: %s\n", phase);
        return;
    }
    if (total)
        fprintf(stderr, "\r\033[Klazaret: %s %3u%%", phase, (unsigned)(done * 100 / total));
    else
        fprintf(stderr, "\r\033[Klazaret: %s", phase);
    if (total && done >= total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int prepare_image(const struct lz_config *cfg, void **state, const char **ret, struct lz_error *err) {
    struct lz_prepared *p = *state;
    if (!p)
        *state = p = lz_xcalloc(1, sizeof *p);
    if (!p->rootfs) {
        int r = lz_image_prepare(cfg->data_root, cfg->profile.image, progress, NULL, p, err);
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
