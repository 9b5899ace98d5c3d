/* prompt.c — the escalation prompt (see prompt.h). */
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

static void buf_printf(struct lz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct lz_buf *b, const char *fmt, ...) {
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

static void rows_clear(struct rows *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].text);
    free(r->v);
    *r = (struct rows){ 0 };
}
static void rows_push(struct rows *r, const char *s, size_t n, enum attr a) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->v = lz_xrealloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = (struct row){ lz_xstrndup(s, n), a };
}

static char **strv_copy(const char *const *v, size_t n) {
    char **c = lz_xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = lz_xstrdup(v[i]);
    return c;
}
static void strv_free(char **v) {
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
    /* What the prompt shows: the request's argv, or the accepted edit. */
    char **edit_argv;
    size_t edit_argc;
    bool edited;

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

static void act(struct lz_prompt *p, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void act(struct lz_prompt *p, const char *name, const char *fmt, ...) {
    if (!p->o.on_action)
        return;
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *d = lz_xvasprintf(fmt, ap);
    va_end(ap);
    p->o.on_action(p->o.ctx, name, d);
}

static long clock_now(struct lz_prompt *p) { return p->o.clock ? p->o.clock(p->o.ctx) : lz_now_ms(); }

static const char *const *shown_argv(const struct lz_prompt *p, size_t *n) {
    if (p->edited) {
        *n = p->edit_argc;
        return (const char *const *)p->edit_argv;
    }
    *n = p->orig_argc;
    return (const char *const *)p->orig_argv;
}

static char *esc(const void *s, size_t n, unsigned flags) {
    char *r = NULL;
    if (lz_escape(s, n, flags, &r) < 0)
        return lz_xstrdup("(too long to show)");
    return r;
}
static char *escs(const char *s, unsigned flags) { return esc(s ? s : "", s ? strlen(s) : 0, flags); }

static void exe_free(struct exe_copy *e) {
    free(e->path);
    free(e->owner);
    free(e->group);
    *e = (struct exe_copy){ 0 };
}
static void exe_set(struct exe_copy *e, const struct lz_prompt_exe *x) {
    exe_free(e);
    e->path = lz_xstrdup(x->path ? x->path : "");
    e->owner = x->owner ? lz_xstrdup(x->owner) : NULL;
    e->group = x->group ? lz_xstrdup(x->group) : NULL;
    e->stat_known = x->stat_known;
    e->uid = x->uid;
    e->gid = x->gid;
    e->mode = x->mode;
}

/* ---- construction ---- */

static bool str_ok(const char *s) { return s && strnlen(s, LZ_PROMPT_TEXT_MAX + 1) <= LZ_PROMPT_TEXT_MAX; }

int lz_prompt_new(const struct lz_prompt_req *req, const struct lz_prompt_opts *o, struct lz_prompt **ret,
                  struct lz_error *err) {
    if (!req || !o || !req->argv || req->argc == 0 || req->argc > LZ_PROMPT_ARGC_MAX ||
        req->envc > LZ_PROMPT_ENVC_MAX || (req->envc && !req->env) || req->justification_len > LZ_PROMPT_TEXT_MAX ||
        (req->justification_len && !req->justification) || !str_ok(req->exe.path) || !str_ok(req->cwd))
        return lz_error_set(err, -EINVAL,
                            "escalation prompt: the request is incomplete or exceeds the prompt's bounds");
    for (size_t i = 0; i < req->argc; i++)
        if (!str_ok(req->argv[i]))
            return lz_error_set(err, -EINVAL, "escalation prompt: argv[%zu] is missing or too long", i);
    for (size_t i = 0; i < req->envc; i++)
        if (!str_ok(req->env[i]))
            return lz_error_set(err, -EINVAL, "escalation prompt: environment entry %zu is missing or too long", i);

    struct lz_prompt *p = lz_xcalloc(1, sizeof *p);
    p->o = *o;
    if (p->o.settle_ms == 0)
        p->o.settle_ms = DEFAULT_SETTLE_MS;
    else if (p->o.settle_ms < 0)
        p->o.settle_ms = 0;
    if (p->o.timeout_ms <= 0)
        p->o.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (p->o.escape_ms <= 0)
        p->o.escape_ms = DEFAULT_ESCAPE_MS;
    p->o.rows = o->rows ? o->rows : 24;
    p->o.cols = o->cols ? o->cols : 80;
    p->profile = lz_xstrdup(req->profile ? req->profile : "");
    p->session = lz_xstrdup(req->session ? req->session : "");
    p->request_id = lz_xstrdup(req->request_id ? req->request_id : "");
    p->cwd = lz_xstrdup(req->cwd);
    exe_set(&p->orig_exe, &req->exe);
    exe_set(&p->exe, &req->exe);
    p->orig_argv = strv_copy(req->argv, req->argc);
    p->orig_argc = req->argc;
    p->env = strv_copy(req->env, req->envc);
    p->envc = req->envc;
    p->just = lz_xmalloc(req->justification_len + 1);
    if (req->justification_len)
        memcpy(p->just, req->justification, req->justification_len);
    p->just_len = req->justification_len;
    p->state = LZ_PROMPT_QUEUED;
    p->deadline = o->now_ms > LONG_MAX - p->o.timeout_ms ? LONG_MAX : o->now_ms + p->o.timeout_ms;
    p->settle_until = LONG_MAX;
    p->settle_on_draw = true;
    p->dirty = true;
    act(p, "QueuePrompt", "argc=%zu", p->orig_argc);
    *ret = p;
    return 0;
}

void lz_prompt_free(struct lz_prompt *p) {
    if (!p)
        return;
    free(p->profile);
    free(p->session);
    free(p->request_id);
    free(p->cwd);
    exe_free(&p->exe);
    exe_free(&p->orig_exe);
    strv_free(p->orig_argv);
    strv_free(p->env);
    strv_free(p->edit_argv);
    free(p->just);
    rows_clear(&p->body);
    free(p->message);
    free(p->line.p);
    free(p->edit_err);
    free(p->out.p);
    free(p);
}

static void report_discards(struct lz_prompt *p);

/* ---- layout ---- */

static unsigned cp_width(uint32_t cp) {
    /* East Asian wide and emoji ranges take two cells; counting others as
     * one at worst wraps a row early (combining marks), never late. */
    if ((cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) ||
        (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
        (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) || (cp >= 0x20000 && cp <= 0x3fffd))
        return 2;
    return 1;
}

/* The character at u[i] (i < len): its length in bytes (an invalid byte
 * counts as one, shown as '?' in one column), code point and width. */
static size_t next_char(const uint8_t *u, size_t len, size_t i, uint32_t *ret_cp, unsigned *ret_width) {
    size_t n = lz_utf8_decode(u + i, len - i, ret_cp);
    if (n == 0)
        n = 1, *ret_cp = '?';
    *ret_width = cp_width(*ret_cp);
    return n;
}

/* Width-limited usable columns: one less than the terminal, so that no row
 * ever ends in the last column (terminals differ in when they wrap). */
static unsigned text_cols(const struct lz_prompt *p) {
    unsigned c = p->o.cols < MIN_COLS ? MIN_COLS : p->o.cols;
    return c - 1;
}
static unsigned screen_rows(const struct lz_prompt *p) { return p->o.rows < MIN_ROWS ? MIN_ROWS : p->o.rows; }

/* Appends s (safe text) as one or more rows of at most cols columns;
 * continuation rows start with CONT. Our own prose breaks after a space
 * (words); text from the request breaks at the column, so every character
 * of it stays where the escape put it. */
static void wrap_ex(struct rows *r, const char *s, enum attr a, unsigned cols, bool words) {
    const uint8_t *u = (const uint8_t *)s;
    size_t len = strlen(s), start = 0, i = 0, brk = 0;
    unsigned w = 0, avail = cols;
    bool first = true;
    struct lz_buf b = { 0 };
    while (i < len) {
        uint32_t cp;
        unsigned cw;
        size_t n = next_char(u, len, i, &cp, &cw);
        if (w + cw > avail && i > start) {
            size_t cut = words && brk > start ? brk : i;
            b.len = 0;
            if (!first)
                lz_buf_adds(&b, CONT);
            /* A word break drops the space it broke at. */
            lz_buf_add(&b, s + start, cut - start - (cut == brk && words ? 1 : 0));
            rows_push(r, b.p, b.len, a);
            first = false;
            start = i = cut;
            brk = 0;
            w = 0;
            avail = cols - CONT_WIDTH;
            continue;
        }
        w += cw;
        i += n;
        if (cp == ' ')
            brk = i;
    }
    b.len = 0;
    if (!first)
        lz_buf_adds(&b, CONT);
    if (i > start)
        lz_buf_add(&b, s + start, i - start);
    rows_push(r, b.p ? b.p : "", b.len, a);
    free(b.p);
}
static void wrap(struct rows *r, const char *s, enum attr a, unsigned cols) { wrap_ex(r, s, a, cols, true); }

static void vwrap(struct rows *r, enum attr a, unsigned cols, bool words, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
static void vwrap(struct rows *r, enum attr a, unsigned cols, bool words, const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    wrap_ex(r, s, a, cols, words);
    free(s);
}
/* Own prose (word breaks). */
static void wrapf(struct rows *r, enum attr a, unsigned cols, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void wrapf(struct rows *r, enum attr a, unsigned cols, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwrap(r, a, cols, true, fmt, ap);
    va_end(ap);
}
/* A row that shows request content (breaks at the column). */
static void contentf(struct rows *r, unsigned cols, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void contentf(struct rows *r, unsigned cols, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwrap(r, A_NONE, cols, false, fmt, ap);
    va_end(ap);
}

static void mode_string(mode_t m, char out[11]) {
    static const char rwx[] = "rwxrwxrwx";
    out[0] = '-';
    for (int i = 0; i < 9; i++)
        out[1 + i] = (m & (0400u >> i)) ? rwx[i] : '-';
    if (m & 04000)
        out[3] = (m & 0100) ? 's' : 'S';
    if (m & 02000)
        out[6] = (m & 010) ? 's' : 'S';
    out[10] = '\0';
}

static void exe_rows(struct rows *r, unsigned cols, const struct exe_copy *e, const char *label) {
    _cleanup_free_ char *path = escs(e->path, LZ_ESCAPE_QUOTED);
    contentf(r, cols, "  %-12s \"%s\"", label, path);
    if (!e->stat_known)
        return;
    _cleanup_free_ char *owner = e->owner ? escs(e->owner, 0) : lz_xasprintf("%u", (unsigned)e->uid);
    _cleanup_free_ char *group = e->group ? escs(e->group, 0) : lz_xasprintf("%u", (unsigned)e->gid);
    char ms[11];
    mode_string(e->mode, ms);
    wrapf(r, A_NONE, cols, "  %-12s owner %s:%s (uid %u, gid %u), mode %04o %s%s%s", "", owner, group, (unsigned)e->uid,
          (unsigned)e->gid, (unsigned)(e->mode & 07777), ms, (e->mode & 022) ? ", WRITABLE BY OTHERS" : "",
          (e->mode & 06000) ? ", SET-ID" : "");
}

static void argv_rows(struct rows *r, unsigned cols, const char *const *argv, size_t argc) {
    _cleanup_free_ char *all = NULL;
    if (lz_escape_argv(argv, argc, &all) < 0) {
        wrap(r, "  (too long to show)", A_NONE, cols);
        return;
    }
    for (char *s = all, *nl; *s; s = nl + 1) {
        nl = strchr(s, '\n');
        if (!nl)
            break;
        *nl = '\0';
        contentf(r, cols, "  %s", s);
    }
}

static void build_body(struct lz_prompt *p) {
    struct rows *r = &p->body;
    rows_clear(r);
    unsigned cols = text_cols(p);
    size_t argc;
    const char *const *argv = shown_argv(p, &argc);

    wrap(r, "Lazaret: the sandbox asks to run a command on this host, as you", A_BOLD, cols);
    wrap(r, "", A_NONE, cols);
    _cleanup_free_ char *profile = escs(p->profile, 0), *session = escs(p->session, 0), *rid = escs(p->request_id, 0),
                        *cwd = escs(p->cwd, LZ_ESCAPE_QUOTED);
    contentf(r, cols, "  %-12s %s", "profile", profile);
    contentf(r, cols, "  %-12s %s", "session", session);
    contentf(r, cols, "  %-12s %s", "request", rid);
    exe_rows(r, cols, &p->exe, "executable");
    contentf(r, cols, "  %-12s \"%s\" (host working directory)", "directory", cwd);
    wrap(r, "", A_NONE, cols);
    if (p->edited)
        wrapf(r, A_BOLD, cols, "Command line AS YOU EDITED IT (%zu argument%s, one per line, between quotes):", argc,
              argc == 1 ? "" : "s");
    else
        wrapf(r, A_BOLD, cols, "Command line (%zu argument%s, one per line, between quotes):", argc,
              argc == 1 ? "" : "s");
    argv_rows(r, cols, argv, argc);
    if (p->edited) {
        wrap(r, "", A_NONE, cols);
        wrapf(r, A_BOLD, cols, "The request asked for (%zu argument%s):", p->orig_argc, p->orig_argc == 1 ? "" : "s");
        argv_rows(r, cols, (const char *const *)p->orig_argv, p->orig_argc);
        if (strcmp(p->exe.path, p->orig_exe.path) != 0)
            exe_rows(r, cols, &p->orig_exe, "executable");
    }
    wrap(r, "", A_NONE, cols);
    wrapf(r, A_BOLD, cols, "Environment of the command (%zu variable%s, all of it):", p->envc, p->envc == 1 ? "" : "s");
    for (size_t i = 0; i < p->envc; i++) {
        _cleanup_free_ char *e = escs(p->env[i], LZ_ESCAPE_QUOTED);
        contentf(r, cols, "  \"%s\"", e);
    }
    wrap(r, "", A_NONE, cols);
    wrap(r, "Justification: text supplied by the sandbox, not checked by Lazaret", A_BOLD, cols);
    wrap(r, "  .---", A_NONE, cols);
    /* One box row per line of the text; the line feed stays visible as \n
     * at the end of its row, so the rendering is still lz_escape's. */
    size_t s = 0;
    for (;;) {
        size_t e = s;
        while (e < p->just_len && p->just[e] != '\n')
            e++;
        bool nl = e < p->just_len;
        if (!nl && e == s && s > 0)
            break; /* nothing after the last line feed */
        _cleanup_free_ char *t = esc(p->just + s, e - s, 0);
        contentf(r, cols, "  | %s%s", t, nl ? "\\n" : "");
        if (!nl)
            break;
        s = e + 1;
    }
    wrap(r, "  '---", A_NONE, cols);
    p->body_valid = true;
}

static void footer_rows(struct lz_prompt *p, struct rows *f, size_t top, size_t body_h, size_t nbody) {
    unsigned cols = text_cols(p);
    if (p->state == LZ_PROMPT_EDITING)
        return;
    size_t last = top + body_h < nbody ? top + body_h : nbody;
    if (nbody <= body_h)
        wrapf(f, A_REVERSE, cols, " all %zu lines shown ", nbody);
    else
        wrapf(f, A_REVERSE, cols, " lines %zu-%zu of %zu%s%s (Space, b: page; j, k: line) ", top + 1, last, nbody,
              last < nbody ? ", MORE BELOW" : "", top > 0 ? ", more above" : "");
    if (p->discarded)
        wrapf(f, A_NONE, cols, "%u key%s typed before the prompt %s ignored", p->discarded,
              p->discarded == 1 ? "" : "s", p->discarded == 1 ? "was" : "were");
    if (p->message)
        wrap(f, p->message, A_BOLD, cols);
    if (p->state == LZ_PROMPT_SETTLING || p->state == LZ_PROMPT_QUEUED) {
        wrap(f, "Read the request. Keys are accepted in a moment; keys typed now are ignored.", A_NONE, cols);
        return;
    }
    wrap(f, "[a] approve once  [d] deny  [e] edit  [q] deny, end session  Enter/Esc: deny", A_NONE, cols);
    if (p->edited)
        wrap(f, "This is your edit: [a] runs it once. [s] is not offered for an edited command.", A_NONE, cols);
    else
        wrap(f,
             "[s] approve, and run this exact request (same executable, arguments, directory, environment) "
             "again without asking until this Client Session ends",
             A_NONE, cols);
    long mins = p->o.timeout_ms / 60000, secs = (p->o.timeout_ms / 1000) % 60;
    wrapf(f, A_NONE, cols, "Unanswered, the request is denied %ld min %ld s after it arrived.", mins, secs);
}

static void put_row(struct lz_buf *o, const struct row *r) {
    switch (r->attr) {
    case A_BOLD: lz_buf_adds(o, "\x1b[1m"); break;
    case A_REVERSE: lz_buf_adds(o, "\x1b[7m"); break;
    case A_NONE: break;
    }
    lz_buf_adds(o, r->text);
    if (r->attr != A_NONE)
        lz_buf_adds(o, "\x1b[0m");
}

static void editor_rows(struct lz_prompt *p, struct rows *r, unsigned *ret_crow, unsigned *ret_ccol) {
    unsigned cols = text_cols(p);
    wrap(r, "Lazaret: edit the command line", A_BOLD, cols);
    wrap(r, "", A_NONE, cols);
    wrap(r,
         "The line is split into arguments by shell quoting rules ('...', \"...\", \\) and run directly, never by a "
         "shell; $ ` ; & | < > ( ) * ? [ { } ~ ! must be quoted.",
         A_NONE, cols);
    wrap(r,
         "Enter: done  Esc or Ctrl-C: back, unchanged  Ctrl-A/E: start/end  Ctrl-U/K: delete to start/end  "
         "Ctrl-W: delete word",
         A_NONE, cols);
    wrap(r, "", A_NONE, cols);
    /* The line, scrolled horizontally so the cursor is visible. Columns:
     * "> " or "< " (more on the left), then the view. */
    unsigned view = cols - 4;
    const uint8_t *u = (const uint8_t *)p->line.p;
    size_t len = p->line.len;
    /* Width from each code point start to the cursor: walk back from the
     * cursor until the view is full, so the cursor sits at the right edge
     * at worst. */
    size_t vstart = 0;
    {
        unsigned w = 0;
        size_t i = p->cursor;
        while (i > 0) {
            size_t j = i - 1;
            while (j > 0 && (u[j] & 0xc0) == 0x80)
                j--;
            uint32_t cp;
            if (lz_utf8_decode(u + j, len - j, &cp) == 0)
                cp = '?';
            unsigned cw = cp_width(cp);
            if (w + cw > view - 1)
                break;
            w += cw;
            i = j;
        }
        vstart = i;
    }
    struct lz_buf b = { 0 };
    lz_buf_adds(&b, vstart > 0 ? "< " : "> ");
    unsigned w = 0, ccol = 2;
    size_t i = vstart;
    while (i < len) {
        uint32_t cp;
        unsigned cw;
        size_t n = next_char(u, len, i, &cp, &cw);
        if (w + cw > view)
            break;
        if (i == p->cursor)
            ccol = 2 + w;
        /* Only characters lz_escape would pass are ever inserted; a '?'
         * stands in should that ever not hold. */
        if (lz_escape_needs(cp))
            lz_buf_adds(&b, "?");
        else
            lz_buf_add(&b, p->line.p + i, n);
        w += cw;
        i += n;
    }
    if (p->cursor >= i && p->cursor == len)
        ccol = 2 + w;
    if (i < len)
        lz_buf_adds(&b, " >");
    rows_push(r, b.p ? b.p : "", b.len, A_NONE);
    *ret_crow = (unsigned)r->n; /* 1-based row of the line */
    *ret_ccol = ccol + 1;
    free(b.p);
    wrap(r, "", A_NONE, cols);
    if (p->edit_err)
        wrap(r, p->edit_err, A_BOLD, cols);
    if (p->message)
        wrap(r, p->message, A_BOLD, cols);
}

/* The footer's text depends on the body's height (which lines are shown)
 * and its height on that text (wrapping): iterate to a fixed point, then
 * give the body what is left, so the screen never holds more rows than the
 * terminal (which would scroll the top away unseen). */
static size_t layout(struct lz_prompt *p, struct rows *f) {
    if (!p->body_valid)
        build_body(p);
    size_t rows = screen_rows(p), body_h = rows;
    for (int i = 0; i < 4; i++) {
        rows_clear(f);
        size_t maxtop = p->body.n > body_h ? p->body.n - body_h : 0;
        footer_rows(p, f, p->top < maxtop ? p->top : maxtop, body_h, p->body.n);
        size_t h = rows > f->n + 1 ? rows - f->n : 1;
        if (h == body_h)
            break;
        body_h = h;
    }
    /* Not stable after a few rounds (a pathological width): the footer
     * wins, the body gets what is left. */
    body_h = rows > f->n + 1 ? rows - f->n : 1;
    size_t maxtop = p->body.n > body_h ? p->body.n - body_h : 0;
    if (p->top > maxtop)
        p->top = maxtop;
    rows_clear(f);
    footer_rows(p, f, p->top, body_h, p->body.n);
    if (f->n + body_h > rows)
        body_h = rows > f->n + 1 ? rows - f->n : 1;
    return body_h;
}

/* The whole screen, from the top: resets what the session's program may
 * have left set (attributes, character set, insert mode, scrolling region),
 * clears, draws. */
static void render(struct lz_prompt *p) {
    struct lz_buf *o = &p->out;
    if (!p->entered) {
        lz_buf_adds(o, "\x1b[?1049h");
        p->entered = true;
    }
    lz_buf_adds(o, "\x1b[0m\x1b(B\x0f\x1b[4l\x1b[r\x1b[H\x1b[2J");
    unsigned rows = screen_rows(p);
    if (p->state == LZ_PROMPT_EDITING) {
        struct rows r = { 0 };
        unsigned crow = 1, ccol = 1;
        editor_rows(p, &r, &crow, &ccol);
        for (size_t i = 0; i < r.n && i < rows; i++) {
            if (i)
                lz_buf_adds(o, "\r\n");
            put_row(o, &r.v[i]);
        }
        buf_printf(o, "\x1b[%u;%uH", crow, ccol);
        rows_clear(&r);
        return;
    }
    struct rows f = { 0 };
    size_t body_h = layout(p, &f);
    size_t written = 0;
    for (size_t i = 0; i < body_h; i++, written++) {
        if (written)
            lz_buf_adds(o, "\r\n");
        if (p->top + i < p->body.n)
            put_row(o, &p->body.v[p->top + i]);
    }
    for (size_t i = 0; i < f.n; i++, written++) {
        lz_buf_adds(o, "\r\n");
        put_row(o, &f.v[i]);
    }
    rows_clear(&f);
}

static size_t body_height(struct lz_prompt *p) {
    struct rows f = { 0 };
    size_t h = layout(p, &f);
    rows_clear(&f);
    return h;
}

int lz_prompt_output(struct lz_prompt *p, const void **ret_bytes, size_t *ret_len) {
    /* Bytes handed out last time are gone now. */
    p->out.len = 0;
    if (p->state == LZ_PROMPT_DONE) {
        if (!p->entered || p->left)
            return 0;
        lz_buf_adds(&p->out, "\x1b[0m\x1b[?1049l");
        p->left = true;
    } else {
        if (!p->dirty)
            return 0;
        if (p->state == LZ_PROMPT_QUEUED) {
            p->state = LZ_PROMPT_SETTLING;
            act(p, "BeginPrompt", "argc=%zu", p->orig_argc);
            report_discards(p); /* the keys typed before the draw */
        }
        render(p);
        p->dirty = false;
        if (p->settle_on_draw) {
            p->settle_on_draw = false;
            long now = clock_now(p);
            p->settle_until = now > LONG_MAX - p->o.settle_ms ? LONG_MAX : now + p->o.settle_ms;
        }
    }
    *ret_bytes = p->out.p;
    *ret_len = p->out.len;
    return 1;
}

/* ---- decisions ---- */

static void finish(struct lz_prompt *p, enum lz_prompt_decision d) {
    p->state = LZ_PROMPT_DONE;
    p->decision = d;
    p->dirty = false;
}

static void set_message(struct lz_prompt *p, const char *m) {
    free(p->message);
    p->message = m ? lz_xstrdup(m) : NULL;
    p->dirty = true;
}

static void report_discards(struct lz_prompt *p) {
    if (p->discarded != p->discarded_reported) {
        act(p, "DiscardTypeahead", "keys=%u", p->discarded - p->discarded_reported);
        p->discarded_reported = p->discarded;
    }
}

/* The settle delay has passed: keys are decisions from now on. */
static void settle_check(struct lz_prompt *p, long now) {
    if (p->state != LZ_PROMPT_SETTLING || p->settle_on_draw || now < p->settle_until)
        return;
    report_discards(p);
    p->state = LZ_PROMPT_ASKING;
    act(p, "PromptDrawn", "edited=%d", p->edited);
    p->dirty = true;
}

static bool timeout_check(struct lz_prompt *p, long now) {
    if (p->state == LZ_PROMPT_DONE)
        return true;
    if (now < p->deadline)
        return false;
    if (p->state != LZ_PROMPT_QUEUED)
        report_discards(p);
    act(p, "PromptTimeout", "after_ms=%ld", p->o.timeout_ms);
    finish(p, LZ_PROMPT_TIMED_OUT);
    return true;
}

static void page(struct lz_prompt *p, long delta) {
    size_t h = body_height(p);
    size_t maxtop = p->body.n > h ? p->body.n - h : 0;
    long t = (long)p->top + delta;
    if (t < 0)
        t = 0;
    if ((size_t)t > maxtop)
        t = (long)maxtop;
    if ((size_t)t != p->top) {
        p->top = (size_t)t;
        p->dirty = true;
    }
}

static void open_editor(struct lz_prompt *p) {
    size_t argc;
    const char *const *argv = shown_argv(p, &argc);
    struct lz_error err = { 0 };
    char *line = NULL;
    if (lz_shellwords_quote(argv, argc, &line, &err) < 0) {
        _cleanup_free_ char *m = escs(err.msg, 0);
        _cleanup_free_ char *t = lz_xasprintf("This command cannot be edited: %s", m);
        set_message(p, t);
        return;
    }
    p->line.len = 0;
    lz_buf_adds(&p->line, line);
    free(line);
    p->cursor = p->line.len;
    free(p->edit_err);
    p->edit_err = NULL;
    set_message(p, NULL);
    p->state = LZ_PROMPT_EDITING;
    p->dirty = true;
}

static void ask_key(struct lz_prompt *p, const struct key *k) {
    if (k->pasted)
        return; /* a paste never answers the prompt */
    size_t h;
    switch (k->kind) {
    case K_CHAR:
        switch (k->cp) {
        case 'a':
        case 'A': {
            size_t argc;
            shown_argv(p, &argc);
            act(p, "DeveloperApprove", "argc=%zu edited=%d", argc, p->edited);
            finish(p, LZ_PROMPT_APPROVED);
            return;
        }
        case 's':
        case 'S':
            if (p->edited) {
                set_message(p, "[s] is not offered for an edited command: [a] approves it once.");
                return;
            }
            act(p, "DeveloperApproveSession", "argc=%zu", p->orig_argc);
            finish(p, LZ_PROMPT_APPROVED_SESSION);
            return;
        case 'd':
        case 'D':
            act(p, "DeveloperDeny", "key=d");
            finish(p, LZ_PROMPT_DENIED);
            return;
        case 'q':
        case 'Q':
            act(p, "DeveloperQuit", "key=q");
            finish(p, LZ_PROMPT_QUIT);
            return;
        case 'e':
        case 'E': open_editor(p); return;
        case ' ':
        case 'f': page(p, (long)body_height(p) - 1); return;
        case 'b': page(p, -((long)body_height(p) - 1)); return;
        case 'j': page(p, 1); return;
        case 'k': page(p, -1); return;
        case 'g': page(p, -(long)p->body.n); return;
        case 'G': page(p, (long)p->body.n); return;
        default: return;
        }
    case K_ENTER:
        act(p, "DeveloperDeny", "key=enter");
        finish(p, LZ_PROMPT_DENIED);
        return;
    case K_ESC:
    case K_ALT:
        act(p, "DeveloperDeny", "key=escape");
        finish(p, LZ_PROMPT_DENIED);
        return;
    case K_CTRL:
        if (k->cp == 'C') {
            act(p, "DeveloperDeny", "key=ctrl-c");
            finish(p, LZ_PROMPT_DENIED);
        } else if (k->cp == 'L') {
            p->dirty = true;
        }
        return;
    case K_DOWN: page(p, 1); return;
    case K_UP: page(p, -1); return;
    case K_PGDN:
        h = body_height(p);
        page(p, (long)h - 1);
        return;
    case K_PGUP:
        h = body_height(p);
        page(p, -((long)h - 1));
        return;
    case K_HOME: page(p, -(long)p->body.n); return;
    case K_END: page(p, (long)p->body.n); return;
    case K_IGNORED:
    case K_BACKSPACE:
    case K_DELETE:
    case K_LEFT:
    case K_RIGHT:
    case K_PASTE_START:
    case K_PASTE_END: return;
    }
}

/* ---- the editor ---- */

static size_t prev_cp(const struct lz_prompt *p, size_t i) {
    if (i == 0)
        return 0;
    i--;
    while (i > 0 && ((uint8_t)p->line.p[i] & 0xc0) == 0x80)
        i--;
    return i;
}
static size_t next_cp(const struct lz_prompt *p, size_t i) {
    if (i >= p->line.len)
        return p->line.len;
    i++;
    while (i < p->line.len && ((uint8_t)p->line.p[i] & 0xc0) == 0x80)
        i++;
    return i;
}
static void line_delete(struct lz_prompt *p, size_t from, size_t to) {
    if (to <= from)
        return;
    memmove(p->line.p + from, p->line.p + to, p->line.len - to);
    p->line.len -= to - from;
    p->line.p[p->line.len] = '\0';
    if (p->cursor >= to)
        p->cursor -= to - from;
    else if (p->cursor > from)
        p->cursor = from;
}
static void line_insert(struct lz_prompt *p, uint32_t cp) {
    if (cp < 0x20 || lz_escape_needs(cp)) {
        _cleanup_free_ char *m = lz_xasprintf("U+%04X cannot be typed here (it would not be visible)", (unsigned)cp);
        set_message(p, m);
        return;
    }
    uint8_t u[4];
    size_t n;
    if (cp < 0x80)
        u[0] = (uint8_t)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (uint8_t)(0xc0 | cp >> 6), u[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        u[0] = (uint8_t)(0xe0 | cp >> 12), u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)),
        u[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
    else
        u[0] = (uint8_t)(0xf0 | cp >> 18), u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f)),
        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (uint8_t)(0x80 | (cp & 0x3f)), n = 4;
    if (p->line.len + n > LZ_SHELLWORDS_LINE_MAX) {
        set_message(p, "The line is at its maximum length.");
        return;
    }
    lz_buf_add(&p->line, u, n); /* grows the buffer; then move into place */
    memmove(p->line.p + p->cursor + n, p->line.p + p->cursor, p->line.len - n - p->cursor);
    memcpy(p->line.p + p->cursor, u, n);
    p->cursor += n;
}

static void edit_submit(struct lz_prompt *p) {
    char **argv = NULL;
    size_t argc = 0;
    struct lz_error err = { 0 };
    free(p->edit_err);
    p->edit_err = NULL;
    if (lz_shellwords_split(p->line.p ? p->line.p : "", p->line.len, &argv, &argc, &err) < 0) {
        _cleanup_free_ char *m = escs(err.msg, 0);
        p->edit_err = lz_xasprintf("Not accepted: %s", m);
        return;
    }
    struct exe_copy exe = { 0 };
    if (strcmp(argv[0], p->orig_argv[0]) == 0) {
        exe_set(&exe,
                &(struct lz_prompt_exe){ .path = p->orig_exe.path,
                                         .stat_known = p->orig_exe.stat_known,
                                         .uid = p->orig_exe.uid,
                                         .gid = p->orig_exe.gid,
                                         .mode = p->orig_exe.mode,
                                         .owner = p->orig_exe.owner,
                                         .group = p->orig_exe.group });
    } else if (!p->o.resolve) {
        _cleanup_free_ char *a0 = escs(p->orig_argv[0], LZ_ESCAPE_QUOTED);
        p->edit_err = lz_xasprintf("Not accepted: the first word must stay \"%s\" (the executable the request "
                                   "resolved); deny and ask for another command instead",
                                   a0);
        lz_shellwords_free(argv);
        return;
    } else {
        struct lz_prompt_exe x = { 0 };
        struct lz_error rerr = { 0 };
        if (p->o.resolve(p->o.ctx, argv[0], &x, &rerr) < 0 || !x.path || !*x.path) {
            _cleanup_free_ char *m = escs(rerr.msg, 0);
            p->edit_err = lz_xasprintf("Not accepted: column 1: %s", *m ? m : "the command cannot be resolved");
            lz_shellwords_free(argv);
            return;
        }
        exe_set(&exe, &x);
    }
    exe_free(&p->exe);
    p->exe = exe;
    strv_free(p->edit_argv);
    /* Our own copy: the splitter's vector has its own layout (lz_shellwords_free). */
    p->edit_argv = strv_copy((const char *const *)argv, argc);
    p->edit_argc = argc;
    lz_shellwords_free(argv);
    p->edited = true;
    p->body_valid = false;
    p->top = 0;
    set_message(p, NULL);
    act(p, "DeveloperEdit", "argc=%zu", argc);
    /* Shown again, and it settles again before [a] counts. */
    p->state = LZ_PROMPT_SETTLING;
    p->settle_on_draw = true;
    p->settle_until = LONG_MAX;
    p->dirty = true;
}

static void edit_key(struct lz_prompt *p, const struct key *k) {
    size_t i;
    if (p->message)
        set_message(p, NULL);
    switch (k->kind) {
    case K_CHAR: line_insert(p, k->cp); break;
    case K_ENTER:
        if (k->pasted)
            line_insert(p, ' ');
        else
            edit_submit(p);
        break;
    case K_ESC:
    case K_ALT:
        if (k->pasted)
            break;
        p->state = LZ_PROMPT_ASKING;
        break;
    case K_BACKSPACE: line_delete(p, prev_cp(p, p->cursor), p->cursor); break;
    case K_DELETE: line_delete(p, p->cursor, next_cp(p, p->cursor)); break;
    case K_LEFT: p->cursor = prev_cp(p, p->cursor); break;
    case K_RIGHT: p->cursor = next_cp(p, p->cursor); break;
    case K_HOME: p->cursor = 0; break;
    case K_END: p->cursor = p->line.len; break;
    case K_CTRL:
        if (k->pasted)
            break;
        switch (k->cp) {
        case 'A': p->cursor = 0; break;
        case 'E': p->cursor = p->line.len; break;
        case 'B': p->cursor = prev_cp(p, p->cursor); break;
        case 'F': p->cursor = next_cp(p, p->cursor); break;
        case 'D': line_delete(p, p->cursor, next_cp(p, p->cursor)); break;
        case 'H': line_delete(p, prev_cp(p, p->cursor), p->cursor); break;
        case 'U': line_delete(p, 0, p->cursor); break;
        case 'K': line_delete(p, p->cursor, p->line.len); break;
        case 'W':
            i = p->cursor;
            while (i > 0 && (p->line.p[i - 1] == ' ' || p->line.p[i - 1] == '\t'))
                i--;
            while (i > 0 && p->line.p[i - 1] != ' ' && p->line.p[i - 1] != '\t')
                i--;
            line_delete(p, i, p->cursor);
            break;
        case 'C': p->state = LZ_PROMPT_ASKING; break;
        default: break;
        }
        break;
    case K_IGNORED:
    case K_UP:
    case K_DOWN:
    case K_PGUP:
    case K_PGDN:
    case K_PASTE_START:
    case K_PASTE_END: break;
    }
    p->dirty = true;
}

/* ---- input ---- */

static void handle_key(struct lz_prompt *p, struct key k) {
    if (k.kind == K_PASTE_START || k.kind == K_PASTE_END) {
        p->in_paste = k.kind == K_PASTE_START;
        return;
    }
    k.pasted = p->in_paste;
    if (timeout_check(p, k.t))
        return;
    settle_check(p, k.t);
    switch (p->state) {
    case LZ_PROMPT_QUEUED:
    case LZ_PROMPT_SETTLING:
        /* Typed ahead: before the draw, or before the settle delay passed. */
        if (k.kind != K_IGNORED) {
            if (p->discarded < UINT_MAX)
                p->discarded++;
            if (p->state == LZ_PROMPT_SETTLING)
                p->dirty = true; /* the footer counts them */
        }
        return;
    case LZ_PROMPT_ASKING: ask_key(p, &k); return;
    case LZ_PROMPT_EDITING: edit_key(p, &k); return;
    case LZ_PROMPT_DONE: return;
    }
}

static void emit(struct lz_prompt *p, enum key_kind kind, uint32_t cp, long t) {
    handle_key(p, (struct key){ .kind = kind, .cp = cp, .t = t });
}

static void csi_final(struct lz_prompt *p, uint8_t fin, long t) {
    if (p->kover) {
        emit(p, K_IGNORED, 0, t);
        return;
    }
    /* Only sequences without a private marker are keys; the first number
     * says which (modifiers after ';' are ignored). */
    unsigned num = 0;
    bool plain = true;
    size_t i = 0;
    for (; i < p->klen && p->kb[i] >= '0' && p->kb[i] <= '9'; i++)
        num = num < 10000 ? num * 10 + (p->kb[i] - '0') : num;
    for (size_t j = i; j < p->klen; j++)
        if (p->kb[j] != ';' && !(p->kb[j] >= '0' && p->kb[j] <= '9'))
            plain = false;
    enum key_kind k = K_IGNORED;
    if (plain) {
        switch (fin) {
        case 'A': k = K_UP; break;
        case 'B': k = K_DOWN; break;
        case 'C': k = K_RIGHT; break;
        case 'D': k = K_LEFT; break;
        case 'H': k = K_HOME; break;
        case 'F': k = K_END; break;
        case '~':
            switch (num) {
            case 1:
            case 7: k = K_HOME; break;
            case 4:
            case 8: k = K_END; break;
            case 3: k = K_DELETE; break;
            case 5: k = K_PGUP; break;
            case 6: k = K_PGDN; break;
            case 200: k = K_PASTE_START; break;
            case 201: k = K_PASTE_END; break;
            default: break;
            }
            break;
        default: break;
        }
    }
    emit(p, k, 0, t);
}

static void feed_byte(struct lz_prompt *p, uint8_t b, long now) {
again:
    switch (p->ps) {
    case P_GROUND:
        if (b == 0x1b) {
            p->ps = P_ESC;
            p->kstart = now;
        } else if (b == '\r' || b == '\n') {
            emit(p, K_ENTER, 0, now);
        } else if (b == 0x7f || b == 0x08) {
            emit(p, K_BACKSPACE, 0, now);
        } else if (b < 0x20) {
            emit(p, K_CTRL, (uint32_t)b + '@', now);
        } else if (b < 0x7f) {
            emit(p, K_CHAR, b, now);
        } else if (b >= 0xc2 && b <= 0xf4) {
            p->ps = P_UTF8;
            p->kb[0] = b;
            p->klen = 1;
            p->kneed = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
            p->kstart = now;
        } else {
            emit(p, K_IGNORED, 0, now);
        }
        return;
    case P_UTF8:
        if ((b & 0xc0) != 0x80) {
            p->ps = P_GROUND;
            emit(p, K_IGNORED, 0, p->kstart);
            goto again;
        }
        p->kb[p->klen++] = b;
        if (p->klen == p->kneed) {
            uint32_t cp;
            p->ps = P_GROUND;
            if (lz_utf8_decode(p->kb, p->klen, &cp) == p->klen)
                emit(p, K_CHAR, cp, p->kstart);
            else
                emit(p, K_IGNORED, 0, p->kstart);
        }
        return;
    case P_ESC:
        p->klen = 0;
        p->kover = false;
        if (b == '[') {
            p->ps = P_CSI;
        } else if (b == 'O') {
            p->ps = P_SS3;
        } else if (b == ']' || b == 'P' || b == '_' || b == '^' || b == 'X') {
            /* OSC, DCS, APC, PM, SOS: a terminal's reply to a query (a
             * title report could hold any text): ignored up to its end. */
            p->ps = P_STRING;
        } else if (b == 0x1b) {
            emit(p, K_ESC, 0, p->kstart);
            p->kstart = now;
        } else {
            p->ps = P_GROUND;
            emit(p, K_ALT, b, p->kstart);
        }
        return;
    case P_CSI:
        if (b == 'M' && p->klen == 0) {
            /* X10 mouse report: ESC [ M and three raw bytes, which could be
             * any letter: skipped, never read as keys. */
            p->ps = P_SKIP;
            p->kneed = 3;
            return;
        }
        if (b >= 0x40 && b <= 0x7e) {
            p->ps = P_GROUND;
            csi_final(p, b, p->kstart);
        } else if (b >= 0x20 && b < 0x40) {
            if (p->klen < CSI_MAX)
                p->kb[p->klen++] = b;
            else
                p->kover = true;
        } else {
            /* Not a CSI byte: the sequence was cut; the byte is a key. */
            p->ps = P_GROUND;
            emit(p, K_IGNORED, 0, p->kstart);
            goto again;
        }
        return;
    case P_SS3:
        p->ps = P_GROUND;
        switch (b) {
        case 'A': emit(p, K_UP, 0, p->kstart); return;
        case 'B': emit(p, K_DOWN, 0, p->kstart); return;
        case 'C': emit(p, K_RIGHT, 0, p->kstart); return;
        case 'D': emit(p, K_LEFT, 0, p->kstart); return;
        case 'H': emit(p, K_HOME, 0, p->kstart); return;
        case 'F': emit(p, K_END, 0, p->kstart); return;
        default: emit(p, K_IGNORED, 0, p->kstart); return;
        }
    case P_STRING:
        if (b == 0x07 || b == 0x18 || b == 0x1a) {
            p->ps = P_GROUND;
            emit(p, K_IGNORED, 0, p->kstart);
        } else if (b == 0x1b) {
            p->ps = P_STRING_ESC;
        }
        return;
    case P_STRING_ESC:
        if (b == '\\') {
            p->ps = P_GROUND;
            emit(p, K_IGNORED, 0, p->kstart);
        } else if (b != 0x1b) {
            p->ps = P_STRING;
        }
        return;
    case P_SKIP:
        if (--p->kneed == 0) {
            p->ps = P_GROUND;
            emit(p, K_IGNORED, 0, p->kstart);
        }
        return;
    }
}

/* A lone ESC: nothing followed within escape_ms. */
static void escape_check(struct lz_prompt *p, long now) {
    if (p->ps == P_ESC && now - p->kstart >= p->o.escape_ms) {
        p->ps = P_GROUND;
        emit(p, K_ESC, 0, p->kstart);
    }
}

void lz_prompt_feed(struct lz_prompt *p, const void *bytes, size_t n, long now_ms) {
    const uint8_t *b = bytes;
    if (timeout_check(p, now_ms))
        return;
    escape_check(p, now_ms);
    for (size_t i = 0; i < n && p->state != LZ_PROMPT_DONE; i++)
        feed_byte(p, b[i], now_ms);
    if (p->state == LZ_PROMPT_SETTLING)
        report_discards(p); /* before BeginPrompt they are reported with it */
}

void lz_prompt_tick(struct lz_prompt *p, long now_ms) {
    if (timeout_check(p, now_ms))
        return;
    escape_check(p, now_ms);
    if (p->state != LZ_PROMPT_DONE)
        settle_check(p, now_ms);
}

long lz_prompt_deadline(const struct lz_prompt *p) {
    if (p->state == LZ_PROMPT_DONE)
        return -1;
    long d = p->deadline;
    if (p->state == LZ_PROMPT_SETTLING && !p->settle_on_draw && p->settle_until < d)
        d = p->settle_until;
    if (p->ps == P_ESC && p->kstart + p->o.escape_ms < d)
        d = p->kstart + p->o.escape_ms;
    return d;
}

void lz_prompt_resize(struct lz_prompt *p, unsigned rows, unsigned cols) {
    p->o.rows = rows ? rows : 24;
    p->o.cols = cols ? cols : 80;
    p->body_valid = false;
    if (p->state != LZ_PROMPT_DONE && p->state != LZ_PROMPT_QUEUED)
        p->dirty = true;
}

void lz_prompt_cancel(struct lz_prompt *p) {
    if (p->state != LZ_PROMPT_DONE)
        finish(p, LZ_PROMPT_CANCELLED);
}

enum lz_prompt_state lz_prompt_state(const struct lz_prompt *p) { return p->state; }

void lz_prompt_shown_argv(const struct lz_prompt *p, const char *const **ret_argv, size_t *ret_argc, bool *ret_edited) {
    *ret_argv = shown_argv(p, ret_argc);
    if (ret_edited)
        *ret_edited = p->edited;
}

int lz_prompt_result(const struct lz_prompt *p, struct lz_prompt_result *ret) {
    if (p->state != LZ_PROMPT_DONE)
        return -EAGAIN;
    *ret = (struct lz_prompt_result){ .decision = p->decision, .discarded_keys = p->discarded };
    if (p->decision == LZ_PROMPT_APPROVED || p->decision == LZ_PROMPT_APPROVED_SESSION) {
        size_t argc;
        const char *const *argv = shown_argv(p, &argc);
        ret->argv = strv_copy(argv, argc);
        ret->argc = argc;
        ret->edited = p->edited;
        ret->exe_path = lz_xstrdup(p->exe.path);
    }
    return 0;
}

void lz_prompt_result_clear(struct lz_prompt_result *r) {
    strv_free(r->argv);
    free(r->exe_path);
    *r = (struct lz_prompt_result){ 0 };
}
