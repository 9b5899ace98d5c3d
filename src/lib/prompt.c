/* prompt.c — the escalation prompt (see prompt.h): state, keys, the line
 * editor, decisions. Layout and drawing: prompt_screen.c. */
#include "prompt_int.h"

/* ---- construction ---- */

static bool str_ok(const char *s) { return s && strnlen(s, LZ_PROMPT_TEXT_MAX + 1) <= LZ_PROMPT_TEXT_MAX; }

int lz_prompt_new(const struct lz_prompt_req *req, const struct lz_prompt_opts *o, struct lz_prompt **ret,
                  struct lz_error *err) {
    if (!req || !o || !req->argv || req->argc == 0 || req->argc > LZ_PROMPT_ARGC_MAX ||
        req->envc > LZ_PROMPT_ENVC_MAX || (req->envc && !req->env) || req->justification_len > LZ_PROMPT_TEXT_MAX ||
        (req->justification_len && !req->justification) || !str_ok(req->exe.path) || !str_ok(req->cwd) ||
        (req->network && (!str_ok(req->network) || !str_ok(req->network_scope))))
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
    if (req->network) {
        p->network = lz_xstrdup(req->network);
        p->network_scope = lz_xstrdup(req->network_scope);
    }
    p->state = LZ_PROMPT_QUEUED;
    p->deadline = o->now_ms > LONG_MAX - p->o.timeout_ms ? LONG_MAX : o->now_ms + p->o.timeout_ms;
    p->settle_until = LONG_MAX;
    p->settle_on_draw = true;
    p->dirty = true;
    if (p->o.warnings)
        p->warn = p->o.warnings(p->o.ctx, (const char *const *)p->orig_argv, p->orig_argc, p->exe.path);
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
    strv_free(p->warn);
    free(p->just);
    free(p->network);
    free(p->network_scope);
    rows_clear(&p->body);
    free(p->message);
    free(p->line.p);
    free(p->edit_err);
    free(p->out.p);
    free(p);
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

/* The settle delay has passed: keys are decisions from now on. */
static void settle_check(struct lz_prompt *p, long now) {
    if (p->state != LZ_PROMPT_SETTLING || p->settle_on_draw || now < p->settle_until)
        return;
    pr_report_discards(p);
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
        pr_report_discards(p);
    act(p, "PromptTimeout", "after_ms=%ld", p->o.timeout_ms);
    finish(p, LZ_PROMPT_TIMED_OUT);
    return true;
}

static void page(struct lz_prompt *p, long delta) {
    size_t h = pr_body_height(p);
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
            if (p->network) {
                set_message(p, "[a] is not offered for a network request: [s] allows it, [d] denies it.");
                return;
            }
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
        case 'E':
            if (p->network) {
                set_message(p, "[e] is not offered for a network request: [s] allows it, [d] denies it.");
                return;
            }
            open_editor(p);
            return;
        case ' ':
        case 'f': page(p, (long)pr_body_height(p) - 1); return;
        case 'b': page(p, -((long)pr_body_height(p) - 1)); return;
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
            /* As Ctrl-C in the sandbox would: the request is cancelled
             * (the command in the terminal was interrupted), not denied. */
            act(p, "CancelRequest", "key=ctrl-c");
            finish(p, LZ_PROMPT_INTERRUPTED);
        } else if (k->cp == 'L') {
            p->dirty = true;
        }
        return;
    case K_DOWN: page(p, 1); return;
    case K_UP: page(p, -1); return;
    case K_PGDN:
        h = pr_body_height(p);
        page(p, (long)h - 1);
        return;
    case K_PGUP:
        h = pr_body_height(p);
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
    if (p->o.warnings) {
        strv_free(p->warn);
        p->warn = p->o.warnings(p->o.ctx, (const char *const *)p->edit_argv, p->edit_argc, p->exe.path);
    }
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
        pr_report_discards(p); /* before BeginPrompt they are reported with it */
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
