/* prompt_int.h — what prompt.c (state, keys, editor) and prompt_screen.c
 * (layout and drawing) share: the prompt's state and small helpers. The
 * screen is the layer below: prompt.c calls it, it never calls prompt.c.
 * Not part of the API (prompt.h). */
#pragma once

#include "prompt.h"

#include <limits.h>

#include "escape.h"
#include "shellwords.h"

#define DEFAULT_SETTLE_MS 500L
#define DEFAULT_TIMEOUT_MS (5L * 60 * 1000)
#define DEFAULT_ESCAPE_MS 100L
#define MIN_ROWS 8u
#define MIN_COLS 40u
#define CSI_MAX 32  /* parameter bytes kept of one CSI sequence */
#define CONT "  + " /* starts a wrapped continuation row */
#define CONT_WIDTH 4u

/* ---- small growable buffers ---- */

static inline void buf_printf(struct lz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void buf_printf(struct lz_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        lz_buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* One screen row: text that is safe to print (escaped, no controls), and
 * an attribute the renderer adds around it. */
enum attr { A_NONE, A_BOLD, A_REVERSE };
struct row {
    char *text;
    enum attr attr;
};
struct rows {
    struct row *v;
    size_t n, cap;
};

static inline void rows_clear(struct rows *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].text);
    free(r->v);
    *r = (struct rows){ 0 };
}
static inline void rows_push(struct rows *r, const char *s, size_t n, enum attr a) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->v = lz_xrealloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = (struct row){ lz_xstrndup(s, n), a };
}

static inline char **strv_copy(const char *const *v, size_t n) {
    char **c = lz_xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = lz_xstrdup(v[i]);
    return c;
}
static inline void strv_free(char **v) {
    if (!v)
        return;
    for (char **i = v; *i; i++)
        free(*i);
    free(v);
}
/* ---- keys ---- */

enum key_kind {
    K_IGNORED, /* a sequence or byte that means nothing here */
    K_CHAR,
    K_ENTER,
    K_ESC,
    K_ALT, /* ESC followed by a byte that starts no sequence */
    K_CTRL,
    K_BACKSPACE,
    K_DELETE,
    K_LEFT,
    K_RIGHT,
    K_UP,
    K_DOWN,
    K_HOME,
    K_END,
    K_PGUP,
    K_PGDN,
    K_PASTE_START,
    K_PASTE_END,
};

struct key {
    enum key_kind kind;
    uint32_t cp; /* K_CHAR: the code point; K_CTRL: the letter ('A' for ^A) */
    bool pasted;
    long t; /* when its first byte arrived */
};

enum parse_state { P_GROUND, P_ESC, P_CSI, P_SS3, P_STRING, P_STRING_ESC, P_SKIP, P_UTF8 };

struct exe_copy {
    char *path, *owner, *group;
    bool stat_known;
    uid_t uid;
    gid_t gid;
    mode_t mode;
};

struct lz_prompt {
    struct lz_prompt_opts o;
    /* The request, copied. */
    char *profile, *session, *request_id, *cwd;
    struct exe_copy exe, orig_exe;
    char **orig_argv;
    size_t orig_argc;
    char **env;
    size_t envc;
    uint8_t *just;
    size_t just_len;
    char *network, *network_scope; /* a network request (prompt.h), or NULL */
    /* What the prompt shows: the request's argv, or the accepted edit. */
    char **edit_argv;
    size_t edit_argc;
    bool edited;
    char **warn; /* o.warnings for what is shown, NULL-terminated or NULL */

    enum lz_prompt_state state;
    enum lz_prompt_decision decision;
    unsigned discarded, discarded_reported;
    long deadline;       /* absolute prompt timeout */
    long settle_until;   /* LONG_MAX: waiting for the draw */
    bool settle_on_draw; /* the next output taken starts the settle delay */
    bool entered, left;  /* alternate screen */
    bool dirty;          /* the screen must be drawn again */
    bool body_valid;
    struct rows body;
    size_t top;    /* first body row shown */
    char *message; /* a one-time note under the actions (safe text) */

    /* Key parser. */
    enum parse_state ps;
    long kstart;
    uint8_t kb[CSI_MAX + 8];
    size_t klen, kneed;
    bool kover, in_paste;

    /* Editor. */
    struct lz_buf line;
    size_t cursor; /* byte offset in line, on a code point boundary */
    char *edit_err;

    struct lz_buf out;
    size_t out_given; /* bytes of out already handed out */
};

static inline void act(struct lz_prompt *p, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void act(struct lz_prompt *p, const char *name, const char *fmt, ...) {
    if (!p->o.on_action)
        return;
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *d = lz_xvasprintf(fmt, ap);
    va_end(ap);
    p->o.on_action(p->o.ctx, name, d);
}

static inline long clock_now(struct lz_prompt *p) { return p->o.clock ? p->o.clock(p->o.ctx) : lz_now_ms(); }

static inline const char *const *shown_argv(const struct lz_prompt *p, size_t *n) {
    if (p->edited) {
        *n = p->edit_argc;
        return (const char *const *)p->edit_argv;
    }
    *n = p->orig_argc;
    return (const char *const *)p->orig_argv;
}

static inline char *esc(const void *s, size_t n, unsigned flags) {
    char *r = NULL;
    if (lz_escape(s, n, flags, &r) < 0)
        return lz_xstrdup("(too long to show)");
    return r;
}
static inline char *escs(const char *s, unsigned flags) { return esc(s ? s : "", s ? strlen(s) : 0, flags); }

static inline void exe_free(struct exe_copy *e) {
    free(e->path);
    free(e->owner);
    free(e->group);
    *e = (struct exe_copy){ 0 };
}
static inline void exe_set(struct exe_copy *e, const struct lz_prompt_exe *x) {
    exe_free(e);
    e->path = lz_xstrdup(x->path ? x->path : "");
    e->owner = x->owner ? lz_xstrdup(x->owner) : NULL;
    e->group = x->group ? lz_xstrdup(x->group) : NULL;
    e->stat_known = x->stat_known;
    e->uid = x->uid;
    e->gid = x->gid;
    e->mode = x->mode;
}

/* The keys typed before the prompt could be read, reported once
 * (DiscardTypeahead): by prompt.c when the prompt settles, times out or
 * is fed while queued, by prompt_screen.c at the first draw. */
static inline void pr_report_discards(struct lz_prompt *p) {
    if (p->discarded != p->discarded_reported) {
        act(p, "DiscardTypeahead", "keys=%u", p->discarded - p->discarded_reported);
        p->discarded_reported = p->discarded;
    }
}

/* prompt_screen.c (prompt.c calls it; it calls nothing of prompt.c) */
size_t pr_body_height(struct lz_prompt *p);
