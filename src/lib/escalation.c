/* escalation.c — the Host Coordinator's side of host escalation (hc_esc.h):
 * the Trust Anchor and the mailbox of the generation, and the request
 * life cycle of docs/model/lazaret.pml: receive (ReceiveEscalation), verify
 * and bind the session, refuse replays and expired records, decide
 * (AutoApprove, or QueuePrompt and the prompt), execute
 * (StartHostExecution), stream result chunks through the window of at most
 * LZ_ESC_WINDOW unacknowledged chunks, end (CompleteHostExecution,
 * CancelRequest, TimeoutRequest). Every transition is logged with the
 * model's action name under LAZARET_DEBUG (hc_model_action); records that
 * are refused never reach the model (its ReceiveEscalation requires a
 * valid signature) and are logged as "escalation: rejected ...".
 *
 * Below it, escalation_exec.c (escalation_int.h): records to the sandbox,
 * host execution, streaming, stdin. What it needs of the prompt and the
 * sessions comes through its port (hc_esc.h).
 *
 * Events come through one epoll fd that the coordinator's loop polls: the
 * inotify watch on req/, each running request's stdout/stderr pipes and
 * its pidfd, and (--stdin) its stdin pipe's write end while it is full. */
#include "escalation_int.h"
#include "procenv.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>

/* ---- set-up: the generation step "trust anchor" ---- */

int hc_esc_create(struct hc *h, struct lz_error *err) {
    const struct hc_esc_port *p = h->esc_port;
    if (!p || !p->prompt_gone || !p->route_begin || !p->route_room || !p->route_output || !p->route_end ||
        !p->audited || !p->session_by_id || !p->session_by_sid || !p->allow_host)
        return lz_error_set(err, -EINVAL, "escalation: incomplete port (a bug)");
    struct lz_esc *e = lz_xcalloc(1, sizeof *e);
    e->port = *p;
    e->dir_fd = e->req_fd = e->res_fd = e->ino_fd = e->ep_fd = e->ws_fd = e->hostcwd_fd = -EBADF;
    h->esc = e;
    int r;
    e->dir = lz_xasprintf("%s/mailbox", h->gen_dir);
    if (mkdir(e->dir, 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, -errno, "cannot create the escalation mailbox %s: %s", e->dir, strerror(errno));
    if ((e->dir_fd = open(e->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return lz_error_set(err, -errno, "cannot open the escalation mailbox %s: %s", e->dir, strerror(errno));
    /* req/ and res/: the bounded tmpfs the Supervisor mounted in the
     * Domain's mount namespace (mailbox.h), reached only through the
     * descriptors it passed; the host's directories are their mount
     * points. Without them (a test hook) the runtime directory's own. */
    e->req_fd = TAKE_FD(h->boot.mbox_fd[0]);
    e->res_fd = TAKE_FD(h->boot.mbox_fd[1]);
    if (e->req_fd < 0 || e->res_fd < 0) {
        if (!lz_test_hook("LAZARET_TEST_MAILBOX_UNBOUNDED"))
            return lz_error_set(err, -EPROTO, "the escalation mailbox was not mounted");
        lz_closep(&e->req_fd);
        lz_closep(&e->res_fd);
        if ((e->req_fd = openat(e->dir_fd, "req", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            (e->res_fd = openat(e->dir_fd, "res", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            return lz_error_set(err, -errno, "cannot open the mailbox directories: %s", strerror(errno));
    }
    if ((r = lz_trust_anchor_new(&e->ta)) < 0)
        return lz_error_errno(err, r, "cannot create the Trust Anchor");
    if ((r = lz_trust_publish(e->ta, e->dir_fd, "hc.pub")) < 0)
        return lz_error_errno(err, r, "cannot publish the Trust Anchor's public key");
    if ((e->ws_fd = open(h->cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return lz_error_set(err, -errno, "cannot open the workspace %s: %s", h->cfg->workspace, strerror(errno));
    lz_sbw_build(h->cfg, &e->writable);
    /* The parent of the fresh working directories of auto-approved runs:
     * Lazaret's runtime directory, which the sandbox can neither write nor
     * see, and nothing in it or above it is the workspace's (a program
     * that looks for its configuration in the parents of its working
     * directory finds none of the sandbox's). */
    e->hostcwd = lz_xasprintf("%s/hostcwd", h->gen_dir);
    if ((mkdir(e->hostcwd, 0700) < 0 && errno != EEXIST) ||
        (e->hostcwd_fd = open(e->hostcwd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return lz_error_set(err, -errno, "cannot create %s: %s", e->hostcwd, strerror(errno));
    if ((e->ep_fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return lz_error_errno(err, -errno, "epoll_create1");
    /* IN_CREATE as well: a symlink, FIFO, hard link or directory made in
     * place (not renamed in) is seen and refused too. */
    if ((e->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
        inotify_add_watch(e->ino_fd, e->dir, IN_ONLYDIR) < 0)
        return lz_error_errno(err, -errno, "cannot watch the escalation mailbox");
    /* Through our descriptor: the tmpfs is not at its path in our mount
     * namespace. */
    char reqdir[64];
    snprintf(reqdir, sizeof reqdir, "/proc/self/fd/%d", e->req_fd);
    if (inotify_add_watch(e->ino_fd, reqdir, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_ONLYDIR) < 0 ||
        (r = esc_ep_add(e, e->ino_fd, EV_INOTIFY, 0)) < 0)
        return lz_error_errno(err, r < 0 ? r : -errno, "cannot watch the escalation mailbox");
    const char *spec = lz_test_hook("LAZARET_TEST_AUTO_APPROVE");
    if (spec) {
        if ((r = lz_esc_rules_parse(spec, &e->policy, err)) < 0)
            return lz_error_prefix(err, r, "the auto-approval test hook");
        hc_log("escalation: WARNING: %zu auto-approval rule(s) from a test hook (test builds only)", e->policy.n_rules);
    } else {
        /* [[escalation.auto_approve]], resolved when the configuration was
         * loaded (argv[0] canonical): they are part of the Configuration
         * Fingerprint, so a client with other rules cannot join. */
        if ((r = lz_autoapprove_rules(h->cfg, &e->policy.rules, &e->policy.n_rules)) < 0)
            return lz_error_errno(err, r, "cannot take the auto-approval rules");
        e->policy.borrowed = true;
        hc_log("escalation: %zu auto-approval rule(s) from the configuration", e->policy.n_rules);
    }
    lz_autoapprove_trees(h->cfg, &e->policy.trees, &e->policy.n_trees);
    for (size_t i = 0; i < e->policy.n_rules; i++)
        if (e->policy.rules[i].cwd_workspace)
            hc_log("escalation: WARNING: auto-approval rule %zu (%s) runs in the workspace (runs_workspace_code): "
                   "code the sandbox writes there runs on the host without a prompt",
                   i + 1, e->policy.rules[i].argv[0]);
    for (size_t i = 0; i < ESC_MAX_REQ; i++) {
        e->req[i].child = LZ_CHILD_NULL;
        e->req[i].out_r = e->req[i].err_r = e->req[i].in_w = -EBADF;
    }
    hc_log("escalation: mailbox %s, Trust Anchor created", e->dir);
    return 0;
}

int hc_esc_fd(const struct hc *h) { return h->esc ? h->esc->ep_fd : -1; }

const char *hc_esc_mailbox_dir(const struct hc *h) { return h->esc ? h->esc->dir : NULL; }

const struct lz_sbw *hc_esc_writable(const struct hc *h) { return h->esc ? &h->esc->writable : NULL; }

/* ---- sessions ---- */

int hc_esc_session_begin(struct hc *h, struct session *s, char **ret_id_env, char **ret_key_env) {
    if (!h->esc)
        return 0;
    int r = lz_session_anchor_new(&s->anchor);
    if (r < 0)
        return r;
    *ret_id_env = lz_session_env_id(s->anchor);
    *ret_key_env = lz_session_env_key(s->anchor);
    return 1;
}

/* ---- the end of a request ---- */

/* The request's row in the Domain Store's audit (audit.h). A row that
 * cannot be written is logged loudly; the request still ends. */
static void audit(struct hc *h, struct esc_req *q, enum lz_outcome outcome, int exit_status, int sig) {
    struct lz_error err = { 0 };
    bool exited = outcome == LZ_OUTCOME_COMPLETED && !sig;
    struct lz_audit_entry ae = { .gen = h->gen,
                                 .received_ms = q->received_ms,
                                 .decided_by = q->by,
                                 .decided_ref = q->ref,
                                 .decision = q->ad,
                                 .end_state = outcome,
                                 .argv = q->net ? (const char *const *)q->net_argv
                                                : (const char *const *)q->rec.request.argv,
                                 .argc = q->net ? 2 : q->rec.request.argc,
                                 .edited_argv = (const char *const *)q->edited,
                                 .edited_argc = q->edited_argc,
                                 .executable = q->ident.path,
                                 .has_sha256 = q->ident.path != NULL,
                                 .cwd = q->host_cwd,
                                 .exit_status = exited ? exit_status : -1,
                                 .signal = outcome == LZ_OUTCOME_COMPLETED ? sig : 0,
                                 .output_bytes = (int64_t)q->out_bytes };
    memcpy(ae.request_id, q->id, LZ_RECORD_ID_LEN);
    memcpy(ae.session_id, q->sid, LZ_RECORD_ID_LEN);
    if (q->ident.path)
        memcpy(ae.executable_sha256, q->ident.sha256, sizeof ae.executable_sha256);
    int64_t seq = 0;
    if (lz_audit_append(h->st, &ae, &seq, &err) < 0) {
        hc_log("escalation: WARNING: request %.12s: its audit row could not be written: %s", q->hex, err.msg);
        return;
    }
    h->esc->port.audited(h, q->session, q->id, seq);
}

/* Writes result-end and its audit row, and moves the request to its
 * linger. */
static void end_request(struct hc *h, struct esc_req *q, enum lz_outcome outcome, int exit_status, int sig) {
    esc_stdin_end(h, q);
    struct lz_record rec = { .kind = LZ_REC_RESULT_END };
    rec.end.outcome = outcome;
    rec.end.exit_status = outcome == LZ_OUTCOME_COMPLETED && !sig ? exit_status : 0;
    rec.end.signal = (uint32_t)(outcome == LZ_OUTCOME_COMPLETED ? sig : 0);
    rec.end.chunks = q->sent;
    rec.end.ended_ms = (uint64_t)esc_wall_ms();
    esc_put(h, q, &rec);
    static const char *const names[] = { "Completed", "Denied", "TimedOut", "Cancelled", "Failed" };
    hc_log("escalation: request %.12s of session %d ended %s (exit %d, signal %d, %llu chunks, %llu bytes)", q->hex,
           q->session, names[outcome], rec.end.exit_status, sig, (unsigned long long)q->sent,
           (unsigned long long)q->out_bytes);
    audit(h, q, outcome, exit_status, sig);
    q->phase = EP_ENDED;
    q->linger_until = lz_now_ms() + ESC_LINGER_MS;
    lz_record_clear(&q->rec);
    lz_hostexec_ident_clear(&q->ident);
    lz_strv_free(q->edited, q->edited_argc);
    q->edited = NULL;
    for (size_t i = 0; i < 2; i++) {
        free(q->net_argv[i]);
        q->net_argv[i] = NULL;
    }
    free(q->host_cwd);
    q->host_cwd = NULL;
    esc_fresh_end(h->esc, q);
}

/* Cancellation, session end, Domain stop, time-out: the host process and
 * its group are killed through the pidfd before the request ends. */
static void abort_request(struct hc *h, struct esc_req *q, enum lz_outcome outcome, enum hc_action model,
                          const char *why) {
    if (q->phase != EP_EXECUTING && q->phase != EP_PROMPT)
        return;
    int st = 0;
    bool ran = q->child.pidfd >= 0;
    if (q->phase == EP_PROMPT)
        h->esc->port.prompt_gone(h, q->session, q->id); /* its screen closes */
    esc_stop_process(h, q, &st);
    if (model)
        hc_model_action(model, "r=%.12s, s=%d, reason=%s", q->hex, q->session, why);
    hc_log("escalation: request %.12s: %s%s", q->hex, why, ran ? "; host process killed" : "");
    end_request(h, q, outcome, 0, 0);
}

static void free_slot(struct hc *h, struct esc_req *q) {
    esc_remove_results(h->esc, q, q->acked, q->sent, true);
    esc_stdin_end(h, q);
    lz_record_clear(&q->rec);
    lz_hostexec_ident_clear(&q->ident);
    lz_strv_free(q->edited, q->edited_argc);
    free(q->host_cwd);
    free(q->net_argv[0]);
    free(q->net_argv[1]);
    esc_fresh_end(h->esc, q);
    *q = (struct esc_req){ .phase = EP_FREE, .child = LZ_CHILD_NULL, .out_r = -EBADF, .err_r = -EBADF, .in_w = -EBADF };
}

/* ---- execution ---- */

static void deny(struct hc *h, struct esc_req *q, const char *why) {
    q->ad = LZ_AUDIT_DENIED;
    esc_put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    hc_log("escalation: request %.12s denied: %s", q->hex, why);
    end_request(h, q, LZ_OUTCOME_DENIED, 0, 0);
}

/* One result-chunk of text on the requester's stderr (the client prints
 * it), after the decision and before the end. */
static void say(struct hc *h, struct esc_req *q, const char *text) {
    size_t len = strlen(text);
    struct lz_record rec = { .kind = LZ_REC_RESULT_CHUNK };
    rec.chunk.seq = q->sent++;
    rec.chunk.stream = LZ_STREAM_STDERR;
    rec.chunk.data = (uint8_t *)text;
    rec.chunk.len = len < LZ_RECORD_CHUNK_MAX ? len : LZ_RECORD_CHUNK_MAX;
    esc_put(h, q, &rec);
}

/* A denial whose reason the requester must read: one result-chunk on its
 * stderr between the decision and the end (the client prints it). */
static void deny_saying(struct hc *h, struct esc_req *q, const char *why) {
    q->ad = LZ_AUDIT_DENIED;
    esc_put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    _cleanup_free_ char *text = lz_xasprintf("lazaret: refused before the prompt: %s\n", why);
    say(h, q, text);
    hc_log("escalation: request %.12s denied: %s", q->hex, why);
    end_request(h, q, LZ_OUTCOME_DENIED, 0, 0);
}

/* The approved record runs (esc_exec_start), or fails. */
static void execute(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc,
                    const struct lz_hostexec_ident *shown) {
    struct lz_error err = { 0 };
    if (esc_exec_start(h, q, d, argv, argc, shown, &err) < 0) {
        hc_model_action(HC_FAIL_HOST_EXECUTION, "r=%.12s, s=%d", q->hex, q->session);
        hc_log("escalation: request %.12s failed: %s", q->hex, err.msg);
        end_request(h, q, LZ_OUTCOME_FAILED, 0, 0);
        return;
    }
    /* The argv identity that runs (ExecutedEqualsApproved). */
    uint8_t dg[32];
    crypto_hash_sha256_state hs;
    crypto_hash_sha256_init(&hs);
    for (size_t i = 0; i < argc; i++)
        crypto_hash_sha256_update(&hs, (const uint8_t *)argv[i], strlen(argv[i]) + 1);
    crypto_hash_sha256_final(&hs, dg);
    char dhex[65];
    lz_hex(dg, sizeof dg, dhex);
    /* The model routes the terminal to the host process; a request from a
     * client without a terminal leaves it with the sandbox (pipes). */
    hc_model_action(q->route ? HC_START_HOST_EXECUTION : HC_START_HOST_EXECUTION_PIPED, "r=%.12s, s=%d, argv=%.16s",
                    q->hex, q->session, dhex);
    hc_log("escalation: request %.12s: running %s (pid %d, %zu arguments)%s", q->hex, q->ident.path, (int)q->child.pid,
           argc, q->in_on ? ", stdin from the sandbox" : "");
    esc_stdin_feed(h, q); /* the chunks that waited for the approval */
}

/* An approved host-request: the decision (APPROVED, argv = the request
 * as the audit keeps it), then the rule goes to the port; the request
 * completes with exit status 0, or fails when the rule could not be
 * added (its reason on the requester's stderr). */
static void allow_host(struct hc *h, struct esc_req *q, enum lz_audit_decision ad) {
    q->ad = ad;
    q->ref = 0;
    esc_put_decision(h, q, LZ_DECISION_APPROVED, q->net_argv, 2);
    char text[LZ_HOSTRULE_TEXT_MAX + 1];
    if (lz_hostrule_format(&q->rule, text, sizeof text) < 0)
        snprintf(text, sizeof text, "%s", q->rule.name);
    struct lz_error err = { 0 };
    int r = h->esc->port.allow_host(h, &q->rule, &err);
    if (r < 0) {
        hc_log("escalation: request %.12s: host rule %s could not be allowed: %s", q->hex, text, err.msg);
        _cleanup_free_ char *msg = lz_xasprintf("lazaret: %s was approved but could not be allowed: %s\n", text,
                                                err.msg[0] ? err.msg : strerror(-r));
        say(h, q, msg);
        end_request(h, q, LZ_OUTCOME_FAILED, 0, 0);
        return;
    }
    hc_log("escalation: request %.12s of session %d: host rule %s allowed in this Domain", q->hex, q->session, text);
    end_request(h, q, LZ_OUTCOME_COMPLETED, 0, 0);
}

static struct esc_req *prompted(struct hc *h, const uint8_t id[LZ_RECORD_ID_LEN]) {
    for (size_t i = 0; h->esc && i < ESC_MAX_REQ; i++) {
        struct esc_req *q = &h->esc->req[i];
        if (q->phase == EP_PROMPT && !memcmp(q->id, id, LZ_RECORD_ID_LEN))
            return q;
    }
    return NULL;
}

void hc_esc_approve(struct hc *h, const uint8_t request_id[16], enum lz_audit_decision ad, int64_t ref,
                    char *const *argv, size_t argc, const struct lz_hostexec_ident *shown) {
    struct esc_req *q = prompted(h, request_id);
    if (!q)
        return;
    q->by = LZ_AUDIT_BY_DEVELOPER;
    if (q->net) {
        allow_host(h, q, ad);
        return;
    }
    if (argc == 0) {
        deny(h, q, "an empty argv was approved");
        return;
    }
    q->ad = ad;
    q->ref = ad == LZ_AUDIT_SESSION_APPROVED ? ref : 0;
    if (ad == LZ_AUDIT_EDITED) {
        q->edited = lz_strv_dup(argv, argc);
        q->edited_argc = argc;
    }
    execute(h, q, ad == LZ_AUDIT_EDITED ? LZ_DECISION_EDITED : LZ_DECISION_APPROVED, argv, argc, shown);
}

void hc_esc_refuse(struct hc *h, const uint8_t request_id[16], enum lz_outcome outcome, bool by_developer,
                   const char *why) {
    struct esc_req *q = prompted(h, request_id);
    if (!q)
        return;
    q->by = by_developer ? LZ_AUDIT_BY_DEVELOPER : LZ_AUDIT_BY_NONE;
    if (outcome == LZ_OUTCOME_DENIED) {
        deny(h, q, why);
        return;
    }
    /* Timed out or cancelled at the prompt: no decision was made; the
     * prompt has logged its model action (PromptTimeout, CancelRequest). */
    esc_put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    hc_log("escalation: request %.12s: %s", q->hex, why);
    end_request(h, q, outcome, 0, 0);
}

static void try_finish(struct hc *h, struct esc_req *q) {
    if (q->phase != EP_EXECUTING || q->child.pidfd >= 0 || q->out_r >= 0 || q->err_r >= 0)
        return;
    esc_route_end(h, q);
    hc_model_action(HC_COMPLETE_HOST_EXECUTION, "r=%.12s, s=%d", q->hex, q->session);
    end_request(h, q, LZ_OUTCOME_COMPLETED, q->exit_status, q->exit_sig);
}

void hc_esc_route_room(struct hc *h, const uint8_t request_id[16]) {
    for (size_t i = 0; h->esc && i < ESC_MAX_REQ; i++) {
        struct esc_req *q = &h->esc->req[i];
        if (q->phase != EP_EXECUTING || !q->route || !q->window_paused || memcmp(q->id, request_id, LZ_RECORD_ID_LEN))
            continue;
        if (q->sent - q->acked >= ESC_WINDOW)
            return; /* the chunk-ack reopens it */
        esc_set_window(h->esc, q, true);
        esc_pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
        try_finish(h, q);
        return;
    }
}

/* ---- records from the sandbox ---- */

static bool seen_before(struct lz_esc *e, const uint8_t id[LZ_RECORD_ID_LEN]) {
    for (size_t i = 0; i < e->n_seen; i++)
        if (!memcmp(e->seen[i], id, LZ_RECORD_ID_LEN))
            return true;
    return false;
}

static long prompt_timeout_ms(const struct hc *h) {
    return h->cfg->escalation_prompt_timeout_s > 0 ? (long)h->cfg->escalation_prompt_timeout_s * 1000
                                                   : ESC_PROMPT_TIMEOUT_MS;
}

/* A host-request past the checks every request gets: its text parsed
 * (the check that counts: the sandbox's bytes are untrusted), then always
 * the prompt (hc_esc.h). */
static void on_host_request(struct hc *h, struct session *s, struct esc_req *q) {
    struct lz_esc *e = h->esc;
    q->net_argv[0] = lz_xstrdup("--allow-host");
    q->net_argv[1] = lz_xstrdup(q->rec.host.host);
    q->net_argv[2] = NULL;
    hc_model_action(HC_QUEUE_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
    struct lz_error perr = { 0 };
    if (lz_hostrule_parse(q->rec.host.host, 0, &q->rule, &perr) < 0) {
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        _cleanup_free_ char *reason = lz_xasprintf("--allow-host: %s", perr.msg);
        deny_saying(h, q, reason);
        return;
    }
    if (q->rule.wildcard) {
        /* A wildcard allows names nobody has seen yet, which the agent
         * can pick: it is the developer's to write in the configuration
         * (allow_hosts), not the sandbox's to ask for. */
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        deny_saying(h, q,
                    "--allow-host takes an exact host name, not a wildcard; a wildcard is written by the developer "
                    "in the profile's allow_hosts");
        return;
    }
    if (!e->port.prompt_begin) {
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        deny(h, q, "no prompt in this build");
        return;
    }
    struct lz_esc_request er = {
        .request_id = q->id, .session_id = q->sid, .justification = q->rec.host.justification, .host = &q->rule
    };
    /* The prompt times out itself (a denial); this is the backstop. */
    q->deadline = lz_now_ms() + prompt_timeout_ms(h) + ESC_PROMPT_GRACE_MS;
    if (e->port.prompt_begin(h, s, &er) < 0) {
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        deny(h, q, "the prompt could not be shown");
    }
}

static void on_request(struct hc *h, struct session *s, const char *name, struct lz_record *rec, const uint8_t *bytes,
                       size_t len) {
    struct lz_esc *e = h->esc;
    int64_t now = esc_wall_ms();
    if (seen_before(e, rec->request_id)) {
        esc_reject(name, "replayed request ID");
        return;
    }
    if (e->n_seen >= ESC_MAX_SEEN) {
        esc_reject(name, "too many requests in this generation");
        return;
    }
    if (e->n_seen % 1024 == 0)
        e->seen = lz_xrealloc(e->seen, (e->n_seen + 1024) * sizeof *e->seen);
    memcpy(e->seen[e->n_seen++], rec->request_id, LZ_RECORD_ID_LEN);
    bool net = rec->kind == LZ_REC_HOST_REQUEST;
    uint64_t created = net ? rec->host.created_ms : rec->request.created_ms;
    uint64_t expires = net ? rec->host.expires_ms : rec->request.expires_ms;
    if ((int64_t)created > now + ESC_SKEW_MS || (int64_t)expires < now || expires - created > ESC_MAX_VALID_MS) {
        esc_reject(name, "expired (or not yet valid, or valid for too long)");
        return;
    }
    for (size_t i = 0; i < ESC_MAX_REQ; i++)
        if ((e->req[i].phase == EP_PROMPT || e->req[i].phase == EP_EXECUTING) && e->req[i].session == s->id) {
            /* One active request per session (the model's activeRequest). */
            esc_reject(name, "its session already has an active request");
            return;
        }
    struct esc_req *q = NULL;
    for (size_t i = 0; i < ESC_MAX_REQ && !q; i++)
        if (e->req[i].phase == EP_FREE)
            q = &e->req[i];
    for (size_t i = 0; i < ESC_MAX_REQ && !q; i++) /* the oldest lingering one makes room */
        if (e->req[i].phase == EP_ENDED)
            q = &e->req[i];
    if (!q) {
        esc_reject(name, "too many requests at once");
        return;
    }
    if (q->phase == EP_ENDED)
        free_slot(h, q);
    memcpy(q->id, rec->request_id, LZ_RECORD_ID_LEN);
    memcpy(q->sid, rec->session_id, LZ_RECORD_ID_LEN);
    lz_mbox_id_hex(q->id, q->hex);
    q->session = s->id;
    q->rec = *rec;
    *rec = (struct lz_record){ 0 }; /* owned by q now */
    q->phase = EP_PROMPT;
    q->received_ms = now;
    q->net = net;
    q->in_on = !net && q->rec.request.stdin_wanted;
    hc_model_action(HC_RECEIVE_ESCALATION, "r=%.12s, s=%d", q->hex, q->session);
    if (net)
        hc_log("escalation: request %.12s from session %d: --allow-host %s", q->hex, q->session, q->rec.host.host);
    else
        hc_log("escalation: request %.12s from session %d: %zu arguments, argv[0] %s", q->hex, q->session,
               q->rec.request.argc, q->rec.request.argv[0]);
    struct lz_record ack = { .kind = LZ_REC_REQUEST_ACK };
    lz_record_digest(bytes, len, ack.ack.request_digest);
    ack.ack.received_ms = (uint64_t)now;
    ack.ack.decide_by_ms = (uint64_t)now + (uint64_t)prompt_timeout_ms(h);
    esc_put(h, q, &ack);
    if (net) {
        on_host_request(h, s, q);
        return;
    }

    struct lz_esc_request er = { .request_id = q->id,
                                 .session_id = q->sid,
                                 .argv = q->rec.request.argv,
                                 .argc = q->rec.request.argc,
                                 .cwd = q->rec.request.cwd,
                                 .justification = q->rec.request.justification,
                                 .terminal = q->rec.request.terminal && !q->rec.request.stdin_wanted };
    size_t rule = 0;
    char why[768];
    if (lz_esc_decide_why(&e->policy, &er, &rule, why, sizeof why) == LZ_ESC_AUTO) {
        hc_model_action(HC_AUTO_APPROVE, "r=%.12s, s=%d, rule=%zu", q->hex, q->session, rule);
        q->by = LZ_AUDIT_BY_RULE;
        q->ad = LZ_AUDIT_AUTO_APPROVED;
        q->ref = (int64_t)rule + 1;
        /* The rule's canonical file runs, under the rule's name for it
         * (escalation.h); the request's argv is what the audit keeps. */
        q->run_argc = q->rec.request.argc;
        q->run_argv = lz_strv_dup(q->rec.request.argv, q->run_argc);
        free(q->run_argv[0]);
        q->run_argv[0] = lz_xstrdup(e->policy.rules[rule].argv[0]);
        q->want_fresh = !e->policy.rules[rule].cwd_workspace;
        execute(h, q, LZ_DECISION_AUTO_APPROVED, q->run_argv, q->run_argc, NULL);
        return;
    }
    if (why[0])
        hc_log("escalation: request %.12s: %s", q->hex, why);
    hc_model_action(HC_QUEUE_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
    struct lz_error cerr = { 0 };
    if (esc_precheck_cwd(h, q, &cerr) < 0) {
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        _cleanup_free_ char *reason = lz_xasprintf("--cwd: %s", cerr.msg);
        deny_saying(h, q, reason);
        return;
    }
    if (!e->port.prompt_begin) {
        hc_log("escalation: WARNING: request %.12s matches no auto-approval rule and this build has no prompt: "
               "denied (known gap of this build)",
               q->hex);
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        deny(h, q, "no prompt in this build");
        return;
    }
    /* The prompt times out itself (a denial); this is the backstop. */
    q->deadline = lz_now_ms() + prompt_timeout_ms(h) + ESC_PROMPT_GRACE_MS;
    if (e->port.prompt_begin(h, s, &er) < 0) {
        hc_model_action(HC_DENY_WITHOUT_PROMPT, "r=%.12s, s=%d", q->hex, q->session);
        deny(h, q, "the prompt could not be shown");
    }
}

static void on_chunk_ack(struct hc *h, struct esc_req *q, const char *name, const struct lz_record *rec) {
    uint64_t next = rec->chunk_ack.next_seq;
    if (next < q->acked || next > q->sent) {
        esc_reject(name, "chunk-ack outside the window");
        return;
    }
    esc_remove_results(h->esc, q, q->acked, next, false);
    q->acked = next;
    if (q->phase == EP_EXECUTING && q->window_paused && q->sent - q->acked < ESC_WINDOW) {
        esc_set_window(h->esc, q, true);
        /* What the pipes hold now is read at once, not on the next wake. */
        esc_pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
        esc_pump(h, q, &q->err_r, LZ_STREAM_STDERR);
        try_finish(h, q);
    }
}

static void take_entry(struct hc *h, const char *name) {
    struct lz_esc *e = h->esc;
    struct lz_mbox_name mn;
    if (name[0] == '.' && !strncmp(name, ".tmp-", 5)) {
        /* A writer's temporary file; refuse anything but a regular file
         * being written (a symlink or FIFO named like one). */
        struct stat st;
        if (fstatat(e->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
            static uint8_t b[1];
            size_t l;
            enum lz_mbox_refusal why;
            lz_mbox_take(e->req_fd, name, b, 0, &l, &why);
            hc_log("escalation: refused mailbox entry %s: %s (removed)", name, lz_mbox_refusal_name(why));
        }
        return;
    }
    static uint8_t buf[LZ_RECORD_MAX + 1];
    size_t len = 0;
    enum lz_mbox_refusal why;
    if (lz_mbox_name_parse(name, &mn) < 0 || !(LZ_REC_FROM_SANDBOX & LZ_REC_MASK(mn.kind))) {
        /* Not a name of the protocol: read nothing, remove it. */
        struct stat st;
        bool dir = fstatat(e->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (dir)
            lz_rm_rf_at(e->req_fd, name);
        else
            (void)lz_mbox_remove(e->req_fd, name);
        hc_log("escalation: refused mailbox entry with a foreign name (removed)");
        return;
    }
    if (mn.kind == LZ_REC_STDIN_CHUNK) {
        esc_on_stdin_entry(h, name, &mn); /* taken in order, when there is room */
        return;
    }
    int r = lz_mbox_take(e->req_fd, name, buf, sizeof buf, &len, &why);
    if (r == -ENOENT)
        return;
    if (r < 0) {
        hc_log("escalation: refused mailbox entry %s: %s (removed)", name, lz_mbox_refusal_name(why));
        return;
    }
    struct session *s;
    struct lz_record rec;
    if (esc_open_entry(h, name, buf, len, mn.kind, &s, &rec) < 0)
        return;
    if (memcmp(rec.request_id, mn.request_id, LZ_RECORD_ID_LEN) != 0 || (mn.kind != LZ_REC_CHUNK_ACK && mn.seq != 0)) {
        esc_reject(name, "the name does not match the record");
        lz_record_clear(&rec);
        return;
    }
    if (mn.kind == LZ_REC_ESCALATION_REQUEST || mn.kind == LZ_REC_HOST_REQUEST) {
        on_request(h, s, name, &rec, buf, len);
        lz_record_clear(&rec);
        return;
    }
    struct esc_req *q = esc_find_req(e, rec.request_id);
    if (!q || q->session != s->id || memcmp(q->sid, rec.session_id, LZ_RECORD_ID_LEN) != 0) {
        esc_reject(name, "no such request of this session");
    } else if (mn.kind == LZ_REC_CHUNK_ACK) {
        on_chunk_ack(h, q, name, &rec);
    } else if (mn.kind == LZ_REC_CANCEL) {
        if (q->phase == EP_PROMPT || q->phase == EP_EXECUTING)
            abort_request(h, q, LZ_OUTCOME_CANCELLED, HC_CANCEL_REQUEST,
                          rec.cancel.reason == LZ_CANCEL_CLIENT_TIMEOUT ? "cancelled (client timeout)"
                                                                        : "cancelled (interrupted)");
    }
    lz_record_clear(&rec);
}

/* Every entry of req/ (after an inotify overflow, and at start). */
static void scan(struct hc *h) {
    int fd = openat(h->esc->req_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        names = lz_xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = lz_xstrdup(de->d_name);
    }
    closedir(d);
    /* Requests first: a stdin-chunk met before its request would be
     * removed as belonging to no request. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if ((strstr(names[i], ".escalation-request.") != NULL || strstr(names[i], ".host-request.") != NULL) ==
                (pass == 0))
                take_entry(h, names[i]);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void on_inotify(struct hc *h) {
    _Alignas(struct inotify_event) char buf[16384];
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n = read(h->esc->ino_fd, buf, sizeof buf);
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                scan(h);
                continue;
            }
            if (!ev->len || !ev->name[0])
                continue;
            if (ev->mask & IN_CREATE) {
                /* A regular file created in place is taken when it is
                 * closed; anything else is refused now. */
                struct stat st;
                if (fstatat(h->esc->req_fd, ev->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    (S_ISREG(st.st_mode) && st.st_nlink == 1))
                    continue;
            }
            take_entry(h, ev->name);
        }
    }
}

void hc_esc_dispatch(struct hc *h) {
    struct lz_esc *e = h->esc;
    if (!e)
        return;
    struct epoll_event evs[32];
    int n = epoll_wait(e->ep_fd, evs, 32, 0);
    for (int i = 0; i < n; i++) {
        uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32);
        size_t idx = (size_t)(evs[i].data.u64 & 0xffffffffu);
        if (kind == EV_INOTIFY) {
            on_inotify(h);
            continue;
        }
        if (idx >= ESC_MAX_REQ)
            continue;
        struct esc_req *q = &e->req[idx];
        if (q->phase != EP_EXECUTING)
            continue;
        if (kind == EV_OUT)
            esc_pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
        else if (kind == EV_ERR)
            esc_pump(h, q, &q->err_r, LZ_STREAM_STDERR);
        else if (kind == EV_IN)
            esc_stdin_feed(h, q);
        else if (kind == EV_PID && q->child.pidfd >= 0) {
            /* Out of the set before esc_reap closes the pidfd. */
            (void)epoll_ctl(e->ep_fd, EPOLL_CTL_DEL, q->child.pidfd, NULL);
            if (!esc_reap(q))
                esc_ep_add(e, q->child.pidfd, EV_PID, idx);
        }
        try_finish(h, q);
    }
}

void hc_esc_tick(struct hc *h) {
    struct lz_esc *e = h->esc;
    if (!e)
        return;
    long now = lz_now_ms();
    for (size_t i = 0; i < ESC_MAX_REQ; i++) {
        struct esc_req *q = &e->req[i];
        if (q->phase == EP_EXECUTING && now >= q->deadline)
            abort_request(h, q, LZ_OUTCOME_TIMED_OUT, HC_TIMEOUT_HOST_EXECUTION, "ran past its time limit");
        else if (q->phase == EP_PROMPT && now >= q->deadline)
            abort_request(h, q, LZ_OUTCOME_TIMED_OUT, HC_TIMEOUT_REQUEST, "no decision in time");
        else if (q->phase == EP_ENDED && now >= q->linger_until)
            free_slot(h, q);
    }
}

void hc_esc_session_end(struct hc *h, struct session *s, const char *why) {
    struct lz_esc *e = h->esc;
    if (e)
        for (size_t i = 0; i < ESC_MAX_REQ; i++) {
            struct esc_req *q = &e->req[i];
            if (q->session != s->id)
                continue;
            /* DisconnectSession (logged by session.c) ends the request. */
            abort_request(h, q, LZ_OUTCOME_CANCELLED, HC_NO_ACTION, why);
            if (q->phase == EP_ENDED)
                free_slot(h, q);
        }
    lz_session_anchor_free(s->anchor);
    s->anchor = NULL;
}

void hc_esc_free(struct hc *h) {
    struct lz_esc *e = h->esc;
    if (!e)
        return;
    for (size_t i = 0; i < ESC_MAX_REQ; i++) {
        abort_request(h, &e->req[i], LZ_OUTCOME_CANCELLED, HC_NO_ACTION, "the Domain is stopping");
        free_slot(h, &e->req[i]);
    }
    lz_esc_policy_clear(&e->policy);
    lz_sbw_free(&e->writable);
    lz_trust_anchor_free(e->ta);
    lz_closep(&e->ino_fd);
    lz_closep(&e->ep_fd);
    lz_closep(&e->req_fd);
    lz_closep(&e->res_fd);
    lz_closep(&e->dir_fd);
    lz_closep(&e->ws_fd);
    lz_closep(&e->hostcwd_fd);
    free(e->hostcwd);
    free(e->seen);
    free(e->dir);
    free(e);
    h->esc = NULL;
}
