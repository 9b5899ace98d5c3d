/* escprompt.c — the escalation prompt on a Client Session's terminal
 * (hc_prompt.h): the Host Coordinator's side of prompt.h. A request no rule
 * approves is asked on the terminal of the session whose key signed it,
 * and only there. While the prompt is up, that session's keys go to the
 * prompt instead of the sandbox, the sandbox's output to it is held
 * (bounded; when the buffer is full the PTY master is not read any more,
 * which is backpressure towards the sandbox, and nothing is dropped), and
 * the prompt's screen goes to the client. When it is decided and its last
 * output (leaving the alternate screen) is sent, the held output follows
 * and the session is back to normal. Everything is driven from the single
 * event loop: nothing here blocks, so the other sessions of the Domain
 * stay interactive.
 *
 * [s] approvals ("grants") are kept per session: the exact identity
 * (argv, sandbox cwd, the executable's canonical path, device, inode,
 * size, mtime and SHA-256) approved; a later request of the same session
 * with the same identity is approved without a prompt (SessionApprove).
 * They end with the session.
 *
 * A host-request (lazaret-escalate --allow-host) is asked on the same
 * prompt with its network screen (prompt.h `network`): [s] allows the
 * rule for every session of the Domain (the resolver is the Domain's),
 * [d]/[q] deny; no grant ever answers one. */
#include "hc_prompt.h"
#include "hc_esc.h"
#include "hc_session.h"
#include "hostexec.h"
#include "procenv.h"
#include "prompt.h"
#include "sbwrite.h"

#include <grp.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <termios.h>

#define HELD_MAX (64 * 1024)  /* sandbox output held while a prompt is up */
#define CHUNK_MAX 32768       /* data bytes per message to the client */
#define ROUTE_MAX (64 * 1024) /* a host process's output not yet sent to the client */

struct hc_grant {
    struct hc_grant *next;
    uint8_t request_id[LZ_RECORD_ID_LEN]; /* the request whose [s] made it */
    int64_t seq;                          /* its audit row (0 until written) */
    char **argv;
    size_t argc;
    char *cwd;
    struct lz_hostexec_ident id;
};

struct hc_prompt {
    struct hc *h;
    struct lz_prompt *p;
    uint8_t id[LZ_RECORD_ID_LEN];
    char hex[2 * LZ_RECORD_ID_LEN + 1];
    int session;
    char *argv0;                         /* the request's own */
    struct lz_hostexec_ident orig, edit; /* resolved: the request's argv[0], the last accepted edit's */
    /* The identity an [s] grant would cover. */
    char **argv;
    size_t argc;
    char *cwd;
    char *host_cwd; /* where relative argv elements are looked up (the warnings) */
    /* The edit's owner and group names, for the prompt's resolve. */
    char owner[256], group[256];
    struct lz_buf out; /* prompt output not yet sent */
    size_t out_off;
    uint8_t held[HELD_MAX];
    size_t held_len, held_off;
    bool done;   /* decided or cancelled: draining */
    bool quit;   /* [q]: the session ends once drained */
    int host_fd; /* route HostProcess: the host process's PTY master (escalation.c owns it), or -1 */
    bool key_loss_logged;
    bool net; /* a host-request (--allow-host): nothing runs; [s] allows the rule */
};

static void names_of(uid_t uid, gid_t gid, char *owner, char *group, size_t n) {
    char buf[4096];
    struct passwd pw, *pp = NULL;
    struct group gr, *gp = NULL;
    owner[0] = group[0] = '\0';
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &pp) == 0 && pp)
        snprintf(owner, n, "%s", pp->pw_name);
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &gp) == 0 && gp)
        snprintf(group, n, "%s", gp->gr_name);
}

static void exe_of(const struct lz_hostexec_ident *id, char *owner, char *group, struct lz_prompt_exe *ret) {
    names_of(id->uid, id->gid, owner, group, 256);
    *ret = (struct lz_prompt_exe){ .path = id->path,
                                   .stat_known = true,
                                   .uid = id->uid,
                                   .gid = id->gid,
                                   .mode = id->mode,
                                   .owner = owner[0] ? owner : NULL,
                                   .group = group[0] ? group : NULL };
}

/* ---- the prompt's callbacks ---- */

static void on_action(void *ctx, const char *action, const char *detail) {
    struct hc_prompt *w = ctx;
    if (!strcmp(action, "QueuePrompt"))
        return; /* escalation.c logged it when it asked for this prompt */
    int a = hc_action_by_name(action);
    if (a < 0) {
        hc_log("escalation: the prompt reported an action the model does not name: %s", action);
        return;
    }
    hc_model_action((enum hc_action)a, "r=%.12s, s=%d%s%s", w->hex, w->session, detail && *detail ? ", " : "",
                    detail ? detail : "");
}

/* An edited argv[0]: the file it names now, which is what [a] approves
 * (execution checks it is still exactly that file). */
static int on_resolve(void *ctx, const char *argv0, struct lz_prompt_exe *ret, struct lz_error *err) {
    struct hc_prompt *w = ctx;
    struct lz_hostexec_ident id = { 0 };
    int r = lz_hostexec_resolve(argv0, &id, err);
    if (r < 0)
        return r;
    lz_hostexec_ident_clear(&w->edit);
    w->edit = id;
    exe_of(&w->edit, w->owner, w->group, ret);
    return 0;
}

/* What the prompt must say about files the sandbox can change (sbwrite.h). */
static char **on_warnings(void *ctx, const char *const *argv, size_t argc, const char *exe_path) {
    struct hc_prompt *w = ctx;
    const struct lz_sbw *t = hc_esc_writable(w->h);
    size_t n = 0;
    return t ? lz_sbw_warnings(t, w->host_cwd, exe_path, argv, argc, &n) : NULL;
}

/* ---- output to the client ---- */

static void collect(struct hc_prompt *w) {
    const void *b;
    size_t n;
    while (w->p && lz_prompt_output(w->p, &b, &n) == 1)
        lz_buf_add(&w->out, b, n);
}

/* One data message (terminal output, channel 1) into the session's
 * pending buffer, if it is free. */
static bool send_chunk(struct session *s, const uint8_t *b, size_t n) {
    if (!hc_flush_pending(s))
        return false;
    s->pend.buf[0] = LZ_MSG_DATA;
    s->pend.buf[1] = 1;
    s->pend.buf[2] = s->pend.buf[3] = 0;
    memcpy(s->pend.buf + LZ_PROTO_HDR, b, n);
    s->pend.len = n + LZ_PROTO_HDR;
    hc_flush_pending(s);
    return true;
}

/* The prompt's screen, then (once it is closed) the held output. */
static void drain(struct session *s, struct hc_prompt *w) {
    while (w->out_off < w->out.len) {
        size_t n = w->out.len - w->out_off;
        if (n > CHUNK_MAX)
            n = CHUNK_MAX;
        if (!send_chunk(s, (const uint8_t *)w->out.p + w->out_off, n))
            return;
        w->out_off += n;
    }
    w->out.len = w->out_off = 0;
    if (!w->done || w->host_fd >= 0)
        return;
    while (w->held_off < w->held_len) {
        size_t n = w->held_len - w->held_off;
        if (n > CHUNK_MAX)
            n = CHUNK_MAX;
        if (!send_chunk(s, w->held + w->held_off, n))
            return;
        w->held_off += n;
    }
    w->held_len = w->held_off = 0;
}

/* The held sandbox output waits while a host process has the terminal. */

static void prompt_free(struct hc_prompt *w) {
    if (!w)
        return;
    lz_prompt_free(w->p);
    free(w->argv0);
    lz_hostexec_ident_clear(&w->orig);
    lz_hostexec_ident_clear(&w->edit);
    lz_strv_free(w->argv, w->argc);
    free(w->cwd);
    free(w->host_cwd);
    free(w->out.p);
    free(w);
}

static void grants_free(struct session *s) {
    while (s->grants) {
        struct hc_grant *g = s->grants;
        s->grants = g->next;
        lz_strv_free(g->argv, g->argc);
        free(g->cwd);
        lz_hostexec_ident_clear(&g->id);
        free(g);
    }
}

/* ---- the decision ---- */

static void decided(struct hc *h, struct session *s, struct hc_prompt *w) {
    struct lz_prompt_result res;
    if (w->done || !w->p || lz_prompt_result(w->p, &res) < 0)
        return;
    w->done = true;
    collect(w);
    if (w->net && (res.decision == LZ_PROMPT_APPROVED || res.decision == LZ_PROMPT_APPROVED_SESSION)) {
        hc_log("escalation: request %.12s of session %d: allowed on the prompt (%u key(s) typed ahead discarded)",
               w->hex, w->session, res.discarded_keys);
        if (res.decision == LZ_PROMPT_APPROVED_SESSION)
            hc_esc_approve(h, w->id, LZ_AUDIT_APPROVED_FOR_SESSION, 0, NULL, 0, NULL);
        else /* not offered for a host: cannot happen */
            hc_esc_refuse(h, w->id, LZ_OUTCOME_DENIED, false, "[a] is not an answer to a host request");
        lz_prompt_result_clear(&res);
        return;
    }
    static const char *const names[] = { "pending",       "approved", "approved for the session", "denied", "timed out",
                                         "denied (quit)", "cancelled" };
    hc_log("escalation: request %.12s of session %d: %s on the prompt%s (%u key(s) typed ahead discarded)", w->hex,
           w->session, names[res.decision], res.edited ? ", edited" : "", res.discarded_keys);
    switch (res.decision) {
    case LZ_PROMPT_APPROVED:
    case LZ_PROMPT_APPROVED_SESSION: {
        /* What the prompt showed: the request's executable, or (argv[0]
         * edited) the one the edit resolved to. */
        const struct lz_hostexec_ident *shown = &w->orig;
        if (res.edited && strcmp(res.argv[0], w->argv0) != 0)
            shown = &w->edit;
        if (!shown->path || !res.exe_path || strcmp(shown->path, res.exe_path) != 0) {
            hc_esc_refuse(h, w->id, LZ_OUTCOME_DENIED, false, "the approved executable is not the one resolved");
            break;
        }
        if (res.decision == LZ_PROMPT_APPROVED_SESSION && !res.edited) {
            struct hc_grant *g = lz_xcalloc(1, sizeof *g);
            memcpy(g->request_id, w->id, LZ_RECORD_ID_LEN);
            g->argv = lz_strv_dup(w->argv, w->argc);
            g->argc = w->argc;
            g->cwd = lz_xstrdup(w->cwd);
            g->id = w->orig;
            g->id.path = lz_xstrdup(w->orig.path);
            g->next = s->grants;
            s->grants = g;
        }
        enum lz_audit_decision ad = res.edited           ? LZ_AUDIT_EDITED
            : res.decision == LZ_PROMPT_APPROVED_SESSION ? LZ_AUDIT_APPROVED_FOR_SESSION
                                                         : LZ_AUDIT_APPROVED;
        hc_esc_approve(h, w->id, ad, 0, res.argv, res.argc, shown);
        break;
    }
    case LZ_PROMPT_QUIT:
        w->quit = true;
        grants_free(s); /* its [s] approvals end with it */
        hc_esc_refuse(h, w->id, LZ_OUTCOME_DENIED, true, "denied by the developer ([q])");
        break;
    case LZ_PROMPT_DENIED: hc_esc_refuse(h, w->id, LZ_OUTCOME_DENIED, true, "denied by the developer"); break;
    case LZ_PROMPT_TIMED_OUT:
        hc_esc_refuse(h, w->id, LZ_OUTCOME_TIMED_OUT, false, "no decision before the prompt's timeout");
        break;
    case LZ_PROMPT_INTERRUPTED:
        hc_esc_refuse(h, w->id, LZ_OUTCOME_CANCELLED, true, "cancelled by Ctrl-C at the prompt");
        break;
    case LZ_PROMPT_CANCELLED:
    case LZ_PROMPT_PENDING:
    default: break;
    }
    lz_prompt_result_clear(&res);
}

/* ---- the port's prompt_begin (hc_esc.h) ---- */

static const struct hc_term_filter prompt_filter;

static const struct hc_grant *granted(struct session *s, const struct lz_esc_request *r,
                                      const struct lz_hostexec_ident *id) {
    for (const struct hc_grant *g = s->grants; g; g = g->next) {
        if (g->argc != r->argc || strcmp(g->cwd, r->cwd ? r->cwd : "") != 0 || !lz_hostexec_ident_equal(&g->id, id))
            continue;
        size_t i = 0;
        while (i < r->argc && !strcmp(g->argv[i], r->argv[i]))
            i++;
        if (i == r->argc)
            return g;
    }
    return NULL;
}

/* "example.com on TCP port 443", "... ports 443, 8443", "... every TCP
 * port": what the prompt says the sandbox asks to reach. */
static char *host_words(const struct lz_hostrule *rule) {
    struct lz_buf b = { 0 };
    lz_buf_adds(&b, rule->name);
    if (rule->n_ports == 0)
        lz_buf_adds(&b, " on every TCP port");
    else
        lz_buf_adds(&b, rule->n_ports == 1 ? " on TCP port " : " on TCP ports ");
    for (size_t i = 0; i < rule->n_ports; i++) {
        char port[16];
        snprintf(port, sizeof port, "%s%u", i ? ", " : "", rule->ports[i]);
        lz_buf_adds(&b, port);
    }
    lz_buf_add(&b, "", 1);
    return b.p;
}

/* A host-request (lazaret-escalate --allow-host) on the same prompt: the
 * host and its ports, the justification; [s] allows, [d]/[q] deny. Every
 * request is asked (no grant answers it), since the coordinator decides
 * nothing from the sandbox's claim that a name is already allowed. */
static int host_prompt_begin(struct hc *h, struct session *s, const struct lz_esc_request *r, const char *hex) {
    if (!s->tty || s->master < 0 || s->sock < 0 || s->prompt) {
        static const char msg[] = "lazaret: the sandbox asked to reach a host (lazaret-escalate --allow-host), and "
                                  "this session has no terminal to ask on: denied. Ask from an interactive "
                                  "`lazaret run` session, or add the host to the profile's allow_hosts.";
        hc_log("escalation: request %.12s of session %d: no terminal to prompt on (%s); denied", hex, s->id,
               s->prompt ? "a prompt is up" : "pipes");
        if (!s->tty)
            hc_session_send(s, LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
        return -ENOTTY;
    }
    struct lz_error err = { 0 };
    _cleanup_free_ struct hc_prompt *w = lz_xcalloc(1, sizeof *w);
    w->h = h;
    w->host_fd = -1;
    w->session = s->id;
    w->net = true;
    memcpy(w->id, r->request_id, LZ_RECORD_ID_LEN);
    snprintf(w->hex, sizeof w->hex, "%s", hex);
    char text[LZ_HOSTRULE_TEXT_MAX + 1];
    if (lz_hostrule_format(r->host, text, sizeof text) < 0)
        return -EINVAL;
    _cleanup_free_ char *words = host_words(r->host);
    _cleanup_free_ char *sess = lz_xasprintf("session %d", s->id);
    const char *argv[] = { "--allow-host", text };
    struct lz_prompt_req req = { .profile = h->cfg->profile.name,
                                 .session = sess,
                                 .request_id = hex,
                                 .exe = { .path = "" },
                                 .argv = argv,
                                 .argc = 2,
                                 .cwd = "",
                                 .justification = r->justification,
                                 .justification_len = r->justification ? strlen(r->justification) : 0,
                                 .network = words,
                                 /* The resolver is the Domain's: a rule added
                                  * stays for all its sessions (hc_net.h). */
                                 .network_scope = "for every session of this Domain until it stops" };
    struct winsize ws = { 0 };
    (void)ioctl(s->master, TIOCGWINSZ, &ws);
    struct lz_prompt_opts o = { .now_ms = lz_now_ms(),
                                .timeout_ms = (long)h->cfg->escalation_prompt_timeout_s * 1000,
                                .rows = ws.ws_row,
                                .cols = ws.ws_col,
                                .on_action = on_action,
                                .ctx = w };
    int rr = lz_prompt_new(&req, &o, &w->p, &err);
    if (rr < 0) {
        hc_log("escalation: request %.12s: cannot show the prompt: %s", hex, err.msg);
        prompt_free(TAKE_PTR(w));
        return rr;
    }
    hc_log("escalation: request %.12s: prompting on the terminal of session %d (--allow-host %s)", hex, s->id, text);
    s->prompt = TAKE_PTR(w);
    collect(s->prompt);
    drain(s, s->prompt);
    return 0;
}

int hc_prompt_begin(struct hc *h, struct session *s, const struct lz_esc_request *r) {
    /* The relay asks the prompt from now on (its hooks do nothing while
     * no prompt is up and no grant is kept). */
    s->filter = &prompt_filter;
    char hex[2 * LZ_RECORD_ID_LEN + 1];
    lz_hex(r->request_id, LZ_RECORD_ID_LEN, hex);
    if (r->host)
        return host_prompt_begin(h, s, r, hex);
    if (!s->tty || s->master < 0 || s->sock < 0 || s->prompt) {
        static const char msg[] = "lazaret: a host command was requested (lazaret-escalate) that no auto-approval "
                                  "rule allows, and this session has no terminal to ask on: denied. Run it from an "
                                  "interactive `lazaret run` session, or add an [[escalation.auto_approve]] rule.";
        hc_log("escalation: request %.12s of session %d: no terminal to prompt on (%s); denied", hex, s->id,
               s->prompt ? "a prompt is up" : "pipes");
        if (!s->tty)
            hc_session_send(s, LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
        return -ENOTTY;
    }
    struct lz_error err = { 0 };
    _cleanup_free_ struct hc_prompt *w = lz_xcalloc(1, sizeof *w);
    w->h = h;
    w->host_fd = -1;
    w->session = s->id;
    memcpy(w->id, r->request_id, LZ_RECORD_ID_LEN);
    memcpy(w->hex, hex, sizeof hex);
    int rr = lz_hostexec_resolve(r->argv[0], &w->orig, &err);
    if (rr < 0) {
        hc_log("escalation: request %.12s: %s; denied without a prompt", hex, err.msg);
        return rr;
    }
    const struct hc_grant *g = granted(s, r, &w->orig);
    if (g) {
        hc_model_action(HC_SESSION_APPROVE, "r=%.12s, s=%d", hex, s->id);
        hc_log("escalation: request %.12s: approved by an [s] approval of session %d", hex, s->id);
        hc_esc_approve(h, w->id, LZ_AUDIT_SESSION_APPROVED, g->seq, r->argv, r->argc, &w->orig);
        lz_hostexec_ident_clear(&w->orig);
        return 0;
    }
    w->argv0 = lz_xstrdup(r->argv[0]);
    w->argv = lz_strv_dup(r->argv, r->argc);
    w->argc = r->argc;
    w->cwd = lz_xstrdup(r->cwd ? r->cwd : "");
    /* The host working directory it would run in (execution checks the
     * path beneath the workspace again). */
    _cleanup_free_ char *host_cwd = NULL;
    if (!strcmp(w->cwd, "/workspace") || !strncmp(w->cwd, "/workspace/", 11)) {
        host_cwd = lz_xasprintf("%s%s", h->cfg->workspace, w->cwd + 10);
        w->host_cwd = lz_xstrdup(host_cwd);
    } else {
        host_cwd = lz_xasprintf("(not in the workspace: %s)", w->cwd);
    }
    _cleanup_free_ char *sess = lz_xasprintf("session %d", s->id);
    _cleanup_env_ char **env = lz_hostexec_env(hc_esc_host_term(s, r->terminal));
    size_t envc = 0;
    while (env && env[envc])
        envc++;
    char owner[256], group[256];
    struct lz_prompt_req req = { .profile = h->cfg->profile.name,
                                 .session = sess,
                                 .request_id = hex,
                                 .argv = (const char *const *)w->argv,
                                 .argc = w->argc,
                                 .cwd = host_cwd,
                                 .env = (const char *const *)env,
                                 .envc = envc,
                                 .justification = r->justification,
                                 .justification_len = r->justification ? strlen(r->justification) : 0 };
    exe_of(&w->orig, owner, group, &req.exe);
    struct winsize ws = { 0 };
    (void)ioctl(s->master, TIOCGWINSZ, &ws);
    struct lz_prompt_opts o = { .now_ms = lz_now_ms(),
                                .timeout_ms = (long)h->cfg->escalation_prompt_timeout_s * 1000,
                                .rows = ws.ws_row,
                                .cols = ws.ws_col,
                                .on_action = on_action,
                                .resolve = on_resolve,
                                .warnings = on_warnings,
                                .ctx = w };
    if ((rr = lz_prompt_new(&req, &o, &w->p, &err)) < 0) {
        hc_log("escalation: request %.12s: cannot show the prompt: %s", hex, err.msg);
        prompt_free(TAKE_PTR(w));
        return rr;
    }
    hc_log("escalation: request %.12s: prompting on the terminal of session %d", hex, s->id);
    s->prompt = TAKE_PTR(w);
    collect(s->prompt); /* the draw: the settle delay starts now */
    drain(s, s->prompt);
    return 0;
}

/* ---- the terminal filter on the session's relay (hc.h) ---- */

static bool prompt_input(struct hc *h, struct session *s, const uint8_t *p, size_t n) {
    struct hc_prompt *w = s->prompt;
    if (w && w->host_fd >= 0) {
        /* Route HostProcess: keys go to the host process's terminal. A
         * PTY's input queue holds 4 KiB and more; what does not fit now
         * (a huge paste) is dropped, said once in the log. */
        while (n) {
            ssize_t k = write(w->host_fd, p, n);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                if (!w->key_loss_logged)
                    hc_log("escalation: request %.12s: %zu byte(s) of input did not fit the host command's "
                           "terminal: dropped",
                           w->hex, n);
                w->key_loss_logged = true;
                break;
            }
            p += k;
            n -= (size_t)k;
        }
        return true;
    }
    if (!w || w->done)
        return false; /* after the decision, keys go to the sandbox again */
    lz_prompt_feed(w->p, p, n, lz_now_ms());
    collect(w);
    decided(h, s, w);
    drain(s, w);
    return true;
}

static bool prompt_hold_output(struct session *s, int *fdp) {
    struct hc_prompt *w = s->prompt;
    if (!w || fdp != &s->master)
        return false;
    if (w->held_off)
        return true; /* being flushed: nothing new joins it */
    while (*fdp >= 0 && w->held_len < HELD_MAX) {
        ssize_t k = read(*fdp, w->held + w->held_len, HELD_MAX - w->held_len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            break;
        if (k <= 0) {
            /* EIO on a PTY master: every slave is closed. */
            lz_closep(fdp);
            break;
        }
        w->held_len += (size_t)k;
    }
    return true;
}

static bool prompt_output_blocked(const struct session *s) {
    const struct hc_prompt *w = s->prompt;
    return w && (w->held_off || w->held_len >= HELD_MAX);
}

static void prompt_resize(struct session *s, unsigned rows, unsigned cols) {
    struct hc_prompt *w = s->prompt;
    if (w && w->host_fd >= 0) {
        struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
        (void)ioctl(w->host_fd, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH */
        return;
    }
    if (!w || w->done)
        return;
    lz_prompt_resize(w->p, rows, cols);
    collect(w);
    drain(s, w);
}

int hc_prompt_poll_timeout(struct hc *h, int timeout) {
    long now = lz_now_ms();
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (!s || !s->prompt || s->prompt->done)
            continue;
        long d = lz_prompt_deadline(s->prompt->p);
        if (d < 0)
            continue;
        long left = d > now ? d - now : 0;
        if (left < timeout)
            timeout = (int)left;
    }
    return timeout;
}

void hc_prompt_tick(struct hc *h) {
    long now = lz_now_ms();
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        struct hc_prompt *w = s ? s->prompt : NULL;
        if (!w)
            continue;
        if (!w->done) {
            long d = lz_prompt_deadline(w->p);
            if (d >= 0 && now >= d)
                lz_prompt_tick(w->p, now);
            collect(w);
            decided(h, s, w);
        }
        drain(s, w);
        if (w->host_fd >= 0) {
            if (w->out.len - w->out_off < ROUTE_MAX)
                hc_esc_route_room(h, w->id);
            continue;
        }
        if (w->done && !w->out.len && !w->held_len) {
            bool quit = w->quit;
            s->prompt = NULL;
            prompt_free(w);
            if (quit && s->state == S_RUNNING) {
                /* [q]: the session ends as if its client had left, but the
                 * client hears the exit status. */
                static const char msg[] = "the session was ended from the escalation prompt ([q])";
                hc_session_send(s, LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
                s->state = S_RELEASING;
                s->release_step = 0;
                s->deadline = lz_now_ms();
            }
        }
    }
}

void hc_prompt_request_gone(struct hc *h, int session, const uint8_t request_id[16]) {
    struct session *s = hc_session_by_id(h, session);
    struct hc_prompt *w = s ? s->prompt : NULL;
    if (!w || w->done || memcmp(w->id, request_id, LZ_RECORD_ID_LEN) != 0)
        return;
    lz_prompt_cancel(w->p);
    w->done = true;
    collect(w);
    drain(s, w);
}

/* ---- the HostProcess route ---- */

int hc_route_host_begin(struct hc *h, int session, const uint8_t request_id[16], int pty_master) {
    struct session *s = hc_session_by_id(h, session);
    if (!s || !s->tty || s->sock < 0)
        return -ENOTTY;
    struct hc_prompt *w = s->prompt;
    if (w && (!w->done || memcmp(w->id, request_id, LZ_RECORD_ID_LEN) != 0))
        return -EBUSY; /* cannot happen: one active request per session */
    if (!w) {
        /* Auto- or session-approved: no prompt was drawn; the route holds
         * the sandbox's output the same way. */
        w = lz_xcalloc(1, sizeof *w);
        w->h = h;
        w->session = s->id;
        memcpy(w->id, request_id, LZ_RECORD_ID_LEN);
        lz_hex(request_id, LZ_RECORD_ID_LEN, w->hex);
        w->done = true;
        s->prompt = w;
    }
    w->host_fd = pty_master;
    hc_log("escalation: request %.12s: the host command runs on the terminal of session %d", w->hex, s->id);
    return 0;
}

size_t hc_route_host_room(struct hc *h, int session) {
    struct session *s = hc_session_by_id(h, session);
    struct hc_prompt *w = s ? s->prompt : NULL;
    if (!w || w->host_fd < 0)
        return 0;
    size_t used = w->out.len - w->out_off;
    return used < ROUTE_MAX ? ROUTE_MAX - used : 0;
}

void hc_route_host_output(struct hc *h, int session, const uint8_t *b, size_t n) {
    struct session *s = hc_session_by_id(h, session);
    struct hc_prompt *w = s ? s->prompt : NULL;
    if (!w || w->host_fd < 0)
        return;
    lz_buf_add(&w->out, b, n);
    drain(s, w);
}

void hc_route_host_end(struct hc *h, int session, const uint8_t request_id[16]) {
    struct session *s = hc_session_by_id(h, session);
    struct hc_prompt *w = s ? s->prompt : NULL;
    if (!w || w->host_fd < 0 || memcmp(w->id, request_id, LZ_RECORD_ID_LEN) != 0)
        return;
    w->host_fd = -1; /* the held output follows what the host process printed */
    drain(s, w);
}

void hc_prompt_audited(struct hc *h, int session, const uint8_t request_id[16], int64_t seq) {
    struct session *s = hc_session_by_id(h, session);
    for (struct hc_grant *g = s ? s->grants : NULL; g; g = g->next)
        if (!memcmp(g->request_id, request_id, LZ_RECORD_ID_LEN))
            g->seq = seq;
}

static void prompt_session_free(struct session *s) {
    prompt_free(s->prompt);
    s->prompt = NULL;
    grants_free(s);
}

static const struct hc_term_filter prompt_filter = {
    .input = prompt_input,
    .hold_output = prompt_hold_output,
    .output_blocked = prompt_output_blocked,
    .resize = prompt_resize,
    .session_free = prompt_session_free,
};
