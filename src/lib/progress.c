/* progress.c — see progress.h. */
#include "progress.h"

#include <inttypes.h>

void lz_progress_bytes(uint64_t n, char *out, size_t size) {
    if (n >= (UINT64_C(1) << 30))
        snprintf(out, size, "%.1f GiB", (double)n / (double)(UINT64_C(1) << 30));
    else if (n >= (UINT64_C(1) << 20))
        snprintf(out, size, "%.1f MiB", (double)n / (double)(UINT64_C(1) << 20));
    else if (n >= 1024)
        snprintf(out, size, "%.1f KiB", (double)n / 1024.0);
    else
        snprintf(out, size, "%" PRIu64 " B", n);
}

void lz_progress_view_init(struct lz_progress_view *v, bool tty, unsigned width, const char *prefix) {
    memset(v, 0, sizeof *v);
    v->tty = tty;
    v->width = width > 20 ? width : 80;
    v->prefix = prefix ? prefix : "";
}

/* What a line shows of the byte counts: the key changes when the
 * percentage (or, without a total, the MiB count) does. */
static uint64_t show_key(uint64_t done, uint64_t total) {
    if (total)
        return (done >= total ? 100 : done * 100 / total) + 1;
    return (done >> 20) + 1;
}

/* " 45% 12.3 MiB / 27.0 MiB, 3.1 MiB/s": the counts of the current phase,
 * the rate once it has run long enough to mean something. */
static void tail(const struct lz_progress_view *v, uint64_t now_ms, char *out, size_t size) {
    char a[32], b[32], r[48] = "";
    out[0] = '\0';
    if (!v->done && !v->total)
        return;
    uint64_t el = now_ms - v->t0_ms;
    if (el >= 500 && v->done > v->done0) {
        char rb[32];
        lz_progress_bytes(v->done * 1000 / el, rb, sizeof rb);
        snprintf(r, sizeof r, ", %s/s", rb);
    }
    lz_progress_bytes(v->done, a, sizeof a);
    if (v->total) {
        lz_progress_bytes(v->total, b, sizeof b);
        unsigned pct = (unsigned)(v->done >= v->total ? 100 : v->done * 100 / v->total);
        snprintf(out, size, " %3u%% %s / %s%s", pct, a, b, r);
    } else {
        snprintf(out, size, " %s%s", a, r);
    }
}

/* The phase as shown: control bytes (a tool's output) become '?', so a
 * line never holds a carriage return or an escape. */
static void set_phase(struct lz_progress_view *v, const char *phase) {
    snprintf(v->phase, sizeof v->phase, "%s", phase);
    for (char *p = v->phase; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

static size_t append(char *out, size_t size, size_t off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *out, size_t size, size_t off, const char *fmt, ...) {
    if (off >= size)
        return off;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + off, size - off, fmt, ap);
    va_end(ap);
    if (n < 0)
        return off;
    return off + (size_t)n < size ? off + (size_t)n : size - 1;
}

/* A plain line's summary of a finished phase that counted bytes:
 * "import: 27.0 MiB in 4.1 s, 6.6 MiB/s". */
static size_t summary(const struct lz_progress_view *v, char *out, size_t size, size_t off) {
    if (!v->started || v->done <= v->done0)
        return off;
    char a[32], r[32];
    uint64_t el = v->last_ms - v->t0_ms;
    /* All of the phase's bytes: its first report may already count some. */
    lz_progress_bytes(v->done, a, sizeof a);
    if (el >= 100) {
        lz_progress_bytes(v->done * 1000 / el, r, sizeof r);
        return append(out, size, off, "%s%s: %s in %.1f s, %s/s\n", v->prefix, v->phase, a, (double)el / 1000.0, r);
    }
    return append(out, size, off, "%s%s: %s\n", v->prefix, v->phase, a);
}

size_t lz_progress_view_update(struct lz_progress_view *v, const char *phase, uint64_t done, uint64_t total,
                               uint64_t now_ms, char *out, size_t size) {
    size_t off = 0;
    out[0] = '\0';
    char shown[sizeof v->phase];
    snprintf(shown, sizeof shown, "%s", phase);
    for (char *p = shown; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    bool same = v->started && strcmp(shown, v->phase) == 0;
    uint64_t key = show_key(done, total);
    if (same) {
        v->last_ms = now_ms;
        bool moved = key != v->drawn_key;
        bool complete = total && done >= total;
        v->done = done;
        v->total = total;
        if (v->tty) {
            /* Redraw what changed, but not faster than the eye reads (the
             * last frame of a phase always: it shows 100%). */
            if (!moved || (!complete && now_ms - v->drawn_ms < LZ_PROGRESS_REDRAW_MS))
                return 0;
        } else if (!moved || now_ms - v->drawn_ms < LZ_PROGRESS_LINE_MS) {
            return 0;
        }
    } else {
        if (!v->tty)
            off = summary(v, out, size, off);
        set_phase(v, shown);
        v->started = true;
        v->t0_ms = v->last_ms = now_ms;
        v->done0 = done;
        v->done = done;
        v->total = total;
    }
    v->drawn_ms = now_ms;
    v->drawn_key = key;
    char t[128];
    if (v->tty) {
        tail(v, now_ms, t, sizeof t);
        size_t fixed = strlen(v->prefix) + strlen(t) + 1;
        int room = v->width > fixed + 10 ? (int)(v->width - fixed) : 10;
        v->line_open = true;
        return append(out, size, off, "\r\033[K%s%.*s%s", v->prefix, room, v->phase, t);
    }
    if (!same) {
        /* The start of a phase: its size when it has one. */
        if (total) {
            lz_progress_bytes(total, t, sizeof t);
            return append(out, size, off, "%s%s (%s)\n", v->prefix, v->phase, t);
        }
        return append(out, size, off, "%s%s\n", v->prefix, v->phase);
    }
    tail(v, now_ms, t, sizeof t);
    return append(out, size, off, "%s%s%s\n", v->prefix, v->phase, t);
}

size_t lz_progress_view_finish(struct lz_progress_view *v, uint64_t now_ms, char *out, size_t size) {
    (void)now_ms; /* the summary ends at the phase's last report */
    size_t off = 0;
    out[0] = '\0';
    if (v->tty) {
        if (v->line_open)
            off = append(out, size, off, "\r\033[K");
        v->line_open = false;
    } else {
        off = summary(v, out, size, off);
    }
    v->started = false;
    return off;
}
