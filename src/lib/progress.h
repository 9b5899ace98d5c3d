/* progress.h — how image progress reports (lz_progress_fn, prepare.h) read
 * to a human: on a terminal one line redrawn only when what it shows
 * changes (phase, percentage, MiB), at most every LZ_PROGRESS_REDRAW_MS;
 * elsewhere (a log, a pipe) plain lines: one when a phase starts, one every
 * LZ_PROGRESS_LINE_MS while it moves, and a summary when it ends, never a
 * carriage return or an escape. Byte counts come with their rate.
 *
 * It formats into a buffer and the caller writes it: library code never
 * prints, and the tests drive the clock. */
#pragma once

#include "util.h"

#define LZ_PROGRESS_REDRAW_MS 100
#define LZ_PROGRESS_LINE_MS 10000

struct lz_progress_view {
    bool tty;
    unsigned width;     /* terminal columns (tty) */
    const char *prefix; /* before each line, e.g. "lazaret: " (static) */
    char phase[256];
    bool started;   /* a phase was shown */
    bool line_open; /* tty: the line has text to clear */
    uint64_t t0_ms; /* when the phase started */
    uint64_t done0; /* done when it started (for the rate) */
    uint64_t done, total;
    uint64_t last_ms;   /* the phase's last report (its summary's end) */
    uint64_t drawn_ms;  /* last output */
    uint64_t drawn_key; /* what the last output showed: percentage or MiB */
};

void lz_progress_view_init(struct lz_progress_view *v, bool tty, unsigned width, const char *prefix);

/* A report; writes what to show into out (NUL-terminated) and returns its
 * length, 0 when nothing changed enough to show. */
size_t lz_progress_view_update(struct lz_progress_view *v, const char *phase, uint64_t done, uint64_t total,
                               uint64_t now_ms, char *out, size_t size);

/* The end of the reports (success or not): the last summary, or what
 * clears the terminal line. */
size_t lz_progress_view_finish(struct lz_progress_view *v, uint64_t now_ms, char *out, size_t size);

/* "12.3 MiB" */
void lz_progress_bytes(uint64_t n, char *out, size_t size);
