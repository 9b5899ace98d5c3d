/* prompt_screen.c — the prompt's layout and drawing (see prompt.h,
 * prompt_int.h). */
#include "prompt_int.h"

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

/* The justification box: one row per line of the text; the line feed
 * stays visible as \n at the end of its row, so the rendering is still
 * lz_escape's. */
static void justification_rows(struct lz_prompt *p, struct rows *r, unsigned cols) {
    wrap(r, "Justification: text supplied by the sandbox, not checked by Lazaret", A_BOLD, cols);
    wrap(r, "  .---", A_NONE, cols);
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
}

/* A network request (lazaret-escalate --allow-host): what it reaches, and
 * for how long an allowed name stays allowed. */
static void build_network_body(struct lz_prompt *p) {
    struct rows *r = &p->body;
    unsigned cols = text_cols(p);
    wrap(r, "Lazaret: the sandbox asks for NETWORK ACCESS to a host", A_BOLD, cols);
    wrap(r, "", A_NONE, cols);
    _cleanup_free_ char *profile = escs(p->profile, 0), *session = escs(p->session, 0), *rid = escs(p->request_id, 0),
                        *what = escs(p->network, 0), *scope = escs(p->network_scope, 0);
    contentf(r, cols, "  %-12s %s", "profile", profile);
    contentf(r, cols, "  %-12s %s", "session", session);
    contentf(r, cols, "  %-12s %s", "request", rid);
    wrap(r, "", A_NONE, cols);
    wrapf(r, A_BOLD, cols, "The sandbox asks to reach %s", what);
    wrapf(r, A_NONE, cols,
          "Allowed, the name resolves in this Domain and connections to its addresses on these ports are let "
          "through, %s. Nothing runs on this host.",
          scope);
    wrap(r, "", A_NONE, cols);
    justification_rows(p, r, cols);
    p->body_valid = true;
}

static void build_body(struct lz_prompt *p) {
    struct rows *r = &p->body;
    rows_clear(r);
    if (p->network) {
        build_network_body(p);
        return;
    }
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
    /* Each on its own highlighted line (o.warnings: files the sandbox can
     * change, docs/escalation.md). */
    for (char **w = p->warn; w && *w; w++) {
        _cleanup_free_ char *t = escs(*w, 0);
        wrapf(r, A_REVERSE, cols, "%s", t);
    }
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
    justification_rows(p, r, cols);
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
    if (p->network) {
        _cleanup_free_ char *scope = escs(p->network_scope, 0);
        wrapf(f, A_NONE, cols, "[s] allow, %s  [d] deny  [q] deny, end session  Enter/Esc: deny", scope);
    } else if (p->edited) {
        wrap(f, "[a] approve once  [d] deny  [e] edit  [q] deny, end session  Enter/Esc: deny", A_NONE, cols);
        wrap(f, "This is your edit: [a] runs it once. [s] is not offered for an edited command.", A_NONE, cols);
    } else {
        wrap(f, "[a] approve once  [d] deny  [e] edit  [q] deny, end session  Enter/Esc: deny", A_NONE, cols);
        wrap(f,
             "[s] approve, and run this exact request (same executable, arguments, directory, environment) "
             "again without asking until this Client Session ends",
             A_NONE, cols);
    }
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

size_t pr_body_height(struct lz_prompt *p) {
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
            pr_report_discards(p); /* the keys typed before the draw */
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
