/* progress_ui.c — image progress on standard error (progress.h decides
 * what to show; this writes it): `lazaret image bootstrap|prepare` and the
 * image preparation of `lazaret run`. */
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"

void lz_cli_progress_init(struct lz_progress_view *v, const char *prefix) {
    struct winsize ws;
    bool tty = isatty(STDERR_FILENO);
    unsigned width = tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 80;
    lz_progress_view_init(v, tty, width, prefix);
}

void lz_cli_progress(void *ud, const char *phase, uint64_t done, uint64_t total) {
    char out[1024];
    if (lz_progress_view_update(ud, phase, done, total, (uint64_t)lz_now_ms(), out, sizeof out)) {
        fputs(out, stderr);
        fflush(stderr);
    }
}

void lz_cli_progress_done(struct lz_progress_view *v) {
    char out[1024];
    if (lz_progress_view_finish(v, (uint64_t)lz_now_ms(), out, sizeof out)) {
        fputs(out, stderr);
        fflush(stderr);
    }
}
