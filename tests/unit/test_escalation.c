/* test_escalation.c — the Host Coordinator's escalation state machine
 * (escalation.c, escalation_exec.c) against fake ports (hc_esc.h), the
 * way test_router_policy.c drives router.c against a fake tree: a real
 * mailbox in a temporary directory, real Session Anchors that sign the
 * sandbox's records, a real Domain Store for the audit, real host
 * processes (echo, sleep); the prompt, the terminal route and the session
 * lookup are fakes that record every call.
 *
 * Each case drives one path of the model's request life cycle
 * (docs/model/lazaret.pml: ReceiveEscalation .. CompleteHostExecution,
 * the denials, failures, time-outs and cancellations, --stdin, and the
 * bounds) and checks the model actions logged (LAZARET_DEBUG), the port
 * calls, the records written to res/, the audit row and the request's
 * state after. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "audit.h"
#include "escalation_int.h"
#include "prepare.h"
#include "procid.h"
#include "store.h"

#define DOM "3333333333333333333333333333333333333333333333333333333333333333"
#define MAX_FAKE (ESC_MAX_REQ + 2)

/* ---- the fixture and the fake ports ---- */

struct fx {
    char dir[64];
    char *gen_dir, *ws, *data;
    int req_fd, res_fd; /* the sandbox's side of the mailbox */
    struct lz_config cfg;
    struct lz_auto_approve rule;
    struct hc h;
    struct hc_esc_port port;
    struct session *sess[MAX_FAKE];
    int n_sess;
    /* What the fakes saw. */
    int n_prompt, n_gone, n_route_begin, n_route_end, n_route_output, n_audited;
    uint8_t prompt_id[LZ_RECORD_ID_LEN], gone_id[LZ_RECORD_ID_LEN];
    int prompt_session, route_session, route_pty;
    char routed[4096];
    size_t routed_len, room;
    int64_t audited_seq;
    /* What prompt_begin does: return this; or approve at once (an [s]
     * grant: SessionApprove) with ref. */
    int prompt_ret;
    bool prompt_grants;
    int64_t grant_ref;
    /* allow_host: what it was called with, and what it returns (with
     * allow_msg as its error). */
    int n_allow, allow_ret;
    struct lz_hostrule allowed;
    const char *allow_msg;
    /* The host rule the prompt was asked about (a host-request). */
    bool prompt_net;
    struct lz_hostrule prompt_host;
    /* stderr captured while the machine runs. */
    int cap_fd, saved_err;
    char log[65536];
};
static struct fx *F;

static int fake_prompt_begin(struct hc *h, struct session *s, const struct lz_esc_request *r) {
    F->n_prompt++;
    F->prompt_session = s->id;
    memcpy(F->prompt_id, r->request_id, LZ_RECORD_ID_LEN);
    F->prompt_net = r->host != NULL;
    if (r->host) {
        /* A host-request comes without a command. */
        assert_null(r->argv);
        assert_int_equal(r->argc, 0);
        F->prompt_host = *r->host;
    }
    if (F->prompt_grants)
        hc_esc_approve(h, r->request_id, LZ_AUDIT_SESSION_APPROVED, F->grant_ref, r->argv, r->argc, NULL);
    return F->prompt_ret;
}
static void fake_prompt_gone(struct hc *h, int session, const uint8_t id[16]) {
    F->n_gone++;
    memcpy(F->gone_id, id, LZ_RECORD_ID_LEN);
}
static int fake_route_begin(struct hc *h, int session, const uint8_t id[16], int pty_master) {
    F->n_route_begin++;
    F->route_session = session;
    F->route_pty = pty_master;
    return 0;
}
static size_t fake_route_room(struct hc *h, int session) { return F->room; }
static void fake_route_output(struct hc *h, int session, const uint8_t *b, size_t n) {
    F->n_route_output++;
    if (n > sizeof F->routed - F->routed_len)
        n = sizeof F->routed - F->routed_len;
    memcpy(F->routed + F->routed_len, b, n);
    F->routed_len += n;
}
static void fake_route_end(struct hc *h, int session, const uint8_t id[16]) { F->n_route_end++; }
static void fake_audited(struct hc *h, int session, const uint8_t id[16], int64_t seq) {
    F->n_audited++;
    F->audited_seq = seq;
}
static int fake_allow_host(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err) {
    F->n_allow++;
    F->allowed = *rule;
    if (F->allow_ret < 0)
        return lz_error_set(err, F->allow_ret, "%s", F->allow_msg ? F->allow_msg : "fake failure");
    return 0;
}
static struct session *fake_by_id(struct hc *h, int id) {
    for (int i = 0; i < F->n_sess; i++)
        if (F->sess[i] && F->sess[i]->id == id)
            return F->sess[i];
    return NULL;
}
static struct session *fake_by_sid(struct hc *h, const uint8_t sid[16]) {
    for (int i = 0; i < F->n_sess; i++) {
        struct session *s = F->sess[i];
        if (s && s->anchor && s->sock >= 0 && !memcmp(s->anchor->sid, sid, LZ_RECORD_ID_LEN))
            return s;
    }
    return NULL;
}

static void cap_begin(void) {
    fflush(stderr);
    assert_int_equal(ftruncate(F->cap_fd, 0), 0);
    assert_int_equal(lseek(F->cap_fd, 0, SEEK_SET), 0);
    F->saved_err = dup(2);
    dup2(F->cap_fd, 2);
}
/* The log since cap_begin in F->log. */
static void cap_end(void) {
    fflush(stderr);
    dup2(F->saved_err, 2);
    close(F->saved_err);
    ssize_t n = pread(F->cap_fd, F->log, sizeof F->log - 1, 0);
    F->log[n > 0 ? n : 0] = '\0';
}
/* The model actions of the captured log, space-separated. */
static const char *models(void) {
    static char out[1024];
    out[0] = '\0';
    for (const char *p = F->log; (p = strstr(p, "debug: model ")) != NULL;) {
        p += strlen("debug: model ");
        size_t n = strcspn(p, "(");
        if (out[0])
            strncat(out, " ", sizeof out - strlen(out) - 1);
        strncat(out, p, n < sizeof out - strlen(out) - 1 ? n : sizeof out - strlen(out) - 1);
    }
    return out;
}

static struct session *new_session(bool tty) {
    assert_true(F->n_sess < MAX_FAKE);
    struct session *s = lz_xcalloc(1, sizeof *s);
    s->id = F->n_sess + 1;
    s->sock = open("/dev/null", O_RDWR | O_CLOEXEC);
    s->state = S_RUNNING;
    s->master = s->in_w = s->out_r = s->err_r = s->spec_w = -EBADF;
    s->exec = LZ_CHILD_NULL;
    if (tty) {
        s->tty = true;
        s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        assert_true(s->master >= 0);
        s->term = lz_xstrdup("xterm");
    }
    char *id_env = NULL, *key_env = NULL;
    assert_int_equal(hc_esc_session_begin(&F->h, s, &id_env, &key_env), 1);
    assert_non_null(s->anchor);
    assert_non_null(strstr(id_env, "LAZARET_SESSION_ID="));
    free(id_env);
    free(key_env);
    F->sess[F->n_sess++] = s;
    return s;
}

static void free_session(struct session *s) {
    lz_closep(&s->sock);
    lz_closep(&s->master);
    free(s->term);
    lz_session_anchor_free(s->anchor);
    free(s);
}

static char *host_prog(const char *name) {
    const char *dirs[] = { "/usr/bin", "/bin" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
        _cleanup_free_ char *p = lz_xasprintf("%s/%s", dirs[i], name);
        char *rp = realpath(p, NULL);
        if (rp)
            return rp;
    }
    fail_msg("no %s on this host", name);
    return NULL;
}

static char *echo_path, *sleep_path, *yes_path;

static int setup(void **state) {
    F = lz_xcalloc(1, sizeof *F);
    snprintf(F->dir, sizeof F->dir, "/tmp/lz-test-esc-XXXXXX");
    if (!mkdtemp(F->dir))
        return -1;
    F->gen_dir = lz_xasprintf("%s/gen", F->dir);
    F->ws = lz_xasprintf("%s/ws", F->dir);
    F->data = lz_xasprintf("%s/data", F->dir);
    _cleanup_free_ char *mb = lz_xasprintf("%s/mailbox", F->gen_dir);
    _cleanup_free_ char *req = lz_xasprintf("%s/req", mb);
    _cleanup_free_ char *res = lz_xasprintf("%s/res", mb);
    _cleanup_free_ char *dom = lz_xasprintf("%s/dom", F->dir);
    const char *dirs[] = { F->gen_dir, F->ws, F->data, mb, req, res, dom };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++)
        if (mkdir(dirs[i], 0700) < 0)
            return -1;
    F->req_fd = open(req, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    F->res_fd = open(res, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* An auto-approval rule: `echo auto` in a fresh directory. */
    F->rule.argv = lz_xcalloc(3, sizeof *F->rule.argv);
    F->rule.argv[0] = lz_xstrdup(echo_path);
    F->rule.argv[1] = lz_xstrdup("auto");
    F->rule.argc = 2;
    F->cfg.workspace = F->ws;
    F->cfg.data_root = F->data;
    F->cfg.auto_approve = &F->rule;
    F->cfg.n_auto_approve = 1;
    F->port = (struct hc_esc_port){ .prompt_begin = fake_prompt_begin,
                                    .prompt_gone = fake_prompt_gone,
                                    .route_begin = fake_route_begin,
                                    .route_room = fake_route_room,
                                    .route_output = fake_route_output,
                                    .route_end = fake_route_end,
                                    .audited = fake_audited,
                                    .session_by_id = fake_by_id,
                                    .session_by_sid = fake_by_sid,
                                    .allow_host = fake_allow_host };
    F->room = 1 << 20;
    F->h.cfg = &F->cfg;
    F->h.gen_dir = F->gen_dir;
    F->h.esc_port = &F->port;
    /* The Supervisor's MAILBOX descriptors (here: plain directories). */
    F->h.boot.mbox_fd[0] = open(req, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    F->h.boot.mbox_fd[1] = open(res, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct lz_store_identity id = { .domain_id = DOM, .profile = "p", .workspace = F->ws };
    struct lz_error err = { 0 };
    struct lz_procid self;
    if (lz_store_open(dom, &id, true, &F->h.st, &err) < 0 || lz_procid_self(&self) < 0 ||
        lz_store_gen_begin(F->h.st, "fp", &self, &F->h.gen, &err) < 0 ||
        /* The sandbox's row, which host processes are recorded under. */
        lz_store_part_set(F->h.st, F->h.gen, LZ_ROLE_SANDBOX, LZ_P_COMMITTED, NULL, NULL, NULL, &err) < 0) {
        fprintf(stderr, "store: %s\n", err.msg);
        return -1;
    }
    char cap[] = "/tmp/lz-test-esc-log-XXXXXX";
    F->cap_fd = mkstemp(cap);
    unlink(cap);
    cap_begin();
    int r = hc_esc_create(&F->h, &err);
    cap_end();
    if (r < 0) {
        fprintf(stderr, "hc_esc_create: %s\n", err.msg);
        return -1;
    }
    *state = F;
    return 0;
}

static int teardown(void **state) {
    cap_begin();
    hc_esc_free(&F->h);
    cap_end();
    for (int i = 0; i < F->n_sess; i++)
        if (F->sess[i])
            free_session(F->sess[i]);
    lz_store_close(F->h.st);
    close(F->req_fd);
    close(F->res_fd);
    close(F->cap_fd);
    lz_strv_free(F->rule.argv, F->rule.argc);
    int pfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    lz_prepare_remove_tree(pfd, F->dir + 5);
    close(pfd);
    free(F->gen_dir);
    free(F->ws);
    free(F->data);
    free(F);
    F = NULL;
    return 0;
}

/* ---- the sandbox's side ---- */

static void new_id(uint8_t id[LZ_RECORD_ID_LEN]) { randombytes_buf(id, LZ_RECORD_ID_LEN); }

struct req_opts {
    const char *cwd;
    bool terminal;
    bool stdin_wanted;
    int64_t created_off_ms; /* created this far from now */
    uint64_t valid_ms;      /* 0: 60 s */
    const uint8_t *sign_sk; /* NULL: the session's own key */
};

static void send_request(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN], char *const *argv, size_t argc,
                         const struct req_opts *o) {
    struct req_opts none = { 0 };
    if (!o)
        o = &none;
    struct lz_record rec = { .kind = LZ_REC_ESCALATION_REQUEST };
    memcpy(rec.request_id, id, LZ_RECORD_ID_LEN);
    memcpy(rec.session_id, s->anchor->sid, LZ_RECORD_ID_LEN);
    uint64_t now = (uint64_t)(esc_wall_ms() + o->created_off_ms);
    rec.request.created_ms = now;
    rec.request.expires_ms = now + (o->valid_ms ? o->valid_ms : 60000);
    rec.request.argv = (char **)argv;
    rec.request.argc = argc;
    rec.request.cwd = (char *)(o->cwd ? o->cwd : "/workspace");
    rec.request.justification = "test";
    rec.request.terminal = o->terminal;
    rec.request.stdin_wanted = o->stdin_wanted;
    struct lz_error err = { 0 };
    if (lz_mbox_put_record(F->req_fd, o->sign_sk ? o->sign_sk : s->anchor->sk, &rec, &err) < 0)
        fail_msg("put: %s", err.msg);
}

/* lazaret-escalate --allow-host TEXT, as the sandbox writes it. */
static void send_host_request(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN], const char *text) {
    struct lz_record rec = { .kind = LZ_REC_HOST_REQUEST };
    memcpy(rec.request_id, id, LZ_RECORD_ID_LEN);
    memcpy(rec.session_id, s->anchor->sid, LZ_RECORD_ID_LEN);
    uint64_t now = (uint64_t)esc_wall_ms();
    rec.host.created_ms = now;
    rec.host.expires_ms = now + 60000;
    rec.host.host = (char *)text;
    rec.host.justification = "read the docs";
    struct lz_error err = { 0 };
    if (lz_mbox_put_record(F->req_fd, s->anchor->sk, &rec, &err) < 0)
        fail_msg("put: %s", err.msg);
}

static void send_simple(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN], struct lz_record *rec) {
    memcpy(rec->request_id, id, LZ_RECORD_ID_LEN);
    memcpy(rec->session_id, s->anchor->sid, LZ_RECORD_ID_LEN);
    struct lz_error err = { 0 };
    if (lz_mbox_put_record(F->req_fd, s->anchor->sk, rec, &err) < 0)
        fail_msg("put: %s", err.msg);
}

static void send_cancel(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN]) {
    struct lz_record rec = { .kind = LZ_REC_CANCEL };
    rec.cancel.reason = LZ_CANCEL_INTERRUPTED;
    rec.cancel.cancelled_ms = (uint64_t)esc_wall_ms();
    send_simple(s, id, &rec);
}

static void send_stdin(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN], uint64_t seq, const char *text,
                       bool eof) {
    struct lz_record rec = { .kind = LZ_REC_STDIN_CHUNK };
    rec.stdin_chunk.seq = seq;
    rec.stdin_chunk.data = (uint8_t *)text;
    rec.stdin_chunk.len = strlen(text);
    rec.stdin_chunk.eof = eof;
    send_simple(s, id, &rec);
}

static void send_chunk_ack(struct session *s, const uint8_t id[LZ_RECORD_ID_LEN], uint64_t next) {
    struct lz_record rec = { .kind = LZ_REC_CHUNK_ACK };
    rec.chunk_ack.next_seq = next;
    send_simple(s, id, &rec);
}

/* The record of kind (seq) the coordinator wrote for id, verified with
 * the Trust Anchor's key: true and *ret (cleared by the caller). */
static bool result(const uint8_t id[LZ_RECORD_ID_LEN], unsigned kind, uint64_t seq, struct lz_record *ret) {
    struct lz_mbox_name n = { .kind = kind, .seq = seq };
    memcpy(n.request_id, id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    assert_int_equal(lz_mbox_name_format(&n, name, sizeof name), 0);
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if (lz_read_file_at(F->res_fd, name, LZ_RECORD_MAX, &buf, &len) < 0)
        return false;
    struct lz_error err = { 0 };
    if (lz_record_open(F->h.esc->ta->pk, (const uint8_t *)buf, len, LZ_REC_MASK(kind), ret, &err) < 0)
        fail_msg("%s: %s", name, err.msg);
    return true;
}

static enum lz_decision decision_of(const uint8_t id[LZ_RECORD_ID_LEN]) {
    struct lz_record rec;
    assert_true(result(id, LZ_REC_DEVELOPER_DECISION, 0, &rec));
    enum lz_decision d = rec.decision.decision;
    lz_record_clear(&rec);
    return d;
}

/* result-end's outcome and exit status. */
static enum lz_outcome outcome_of(const uint8_t id[LZ_RECORD_ID_LEN], int *ret_exit) {
    struct lz_record rec;
    assert_true(result(id, LZ_REC_RESULT_END, 0, &rec));
    enum lz_outcome o = rec.end.outcome;
    if (ret_exit)
        *ret_exit = rec.end.exit_status;
    lz_record_clear(&rec);
    return o;
}

/* The bytes of result chunks [0, n) of id, concatenated, and their stream. */
static size_t chunks_of(const uint8_t id[LZ_RECORD_ID_LEN], char *out, size_t cap, enum lz_stream *ret_stream) {
    size_t have = 0;
    struct lz_record rec;
    for (uint64_t seq = 0; result(id, LZ_REC_RESULT_CHUNK, seq, &rec); seq++) {
        size_t n = rec.chunk.len < cap - have - 1 ? rec.chunk.len : cap - have - 1;
        memcpy(out + have, rec.chunk.data, n);
        have += n;
        if (ret_stream)
            *ret_stream = rec.chunk.stream;
        lz_record_clear(&rec);
    }
    out[have] = '\0';
    return have;
}

static struct esc_req *slot_of(const uint8_t id[LZ_RECORD_ID_LEN]) { return esc_find_req(F->h.esc, id); }

/* Runs the coordinator's loop (its escalation part) until the request is
 * in phase want, at most 10 s. */
static void run_until(const uint8_t id[LZ_RECORD_ID_LEN], enum esc_phase want) {
    long end = lz_now_ms() + 10000;
    for (;;) {
        struct pollfd p = { .fd = hc_esc_fd(&F->h), .events = POLLIN };
        (void)poll(&p, 1, 20);
        hc_esc_dispatch(&F->h);
        hc_esc_tick(&F->h);
        struct esc_req *q = slot_of(id);
        if (q && q->phase == want)
            return;
        if (lz_now_ms() > end)
            fail_msg("request not in phase %d after 10 s (%s)", want, q ? "other phase" : "no slot");
    }
}

/* One pass of the loop (the records just written are taken). */
static void run_once(void) {
    hc_esc_dispatch(&F->h);
    hc_esc_tick(&F->h);
}

/* The audit's last row. */
static void last_audit(struct lz_audit_row *ret_copy, enum lz_audit_decider *by, enum lz_audit_decision *ad,
                       enum lz_outcome *end, int64_t *ref) {
    _cleanup_audit_log_ struct lz_audit_log log = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_audit_read(F->h.st, &log, &err), 0);
    assert_true(log.n > 0);
    const struct lz_audit_row *r = &log.rows[log.n - 1];
    assert_int_equal(r->seq, F->audited_seq);
    *by = r->e.decided_by;
    *ad = r->e.decision;
    *end = r->e.end_state;
    *ref = r->e.decided_ref;
    (void)ret_copy;
}

static void assert_audit(enum lz_audit_decider by, enum lz_audit_decision ad, enum lz_outcome end, int64_t ref) {
    enum lz_audit_decider b;
    enum lz_audit_decision d;
    enum lz_outcome o;
    int64_t rf;
    last_audit(NULL, &b, &d, &o, &rf);
    assert_int_equal(b, by);
    assert_int_equal(d, ad);
    assert_int_equal(o, end);
    assert_int_equal(rf, ref);
}

/* ---- receive, auto-approve, execute, complete ---- */

static void test_auto_approve_completes(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    new_id(id);
    char *argv[] = { echo_path, "auto", NULL };
    cap_begin();
    send_request(s, id, argv, 2, NULL);
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation AutoApprove StartHostExecutionPiped CompleteHostExecution");
    assert_int_equal(F->n_prompt, 0);
    assert_int_equal(F->n_route_begin, 0);
    struct lz_record ack;
    assert_true(result(id, LZ_REC_REQUEST_ACK, 0, &ack));
    assert_true(ack.ack.decide_by_ms > ack.ack.received_ms);
    lz_record_clear(&ack);
    assert_int_equal(decision_of(id), LZ_DECISION_AUTO_APPROVED);
    char out[256];
    enum lz_stream st = LZ_STREAM_TERMINAL;
    chunks_of(id, out, sizeof out, &st);
    assert_string_equal(out, "auto\n");
    assert_int_equal(st, LZ_STREAM_STDOUT);
    int ex = -1;
    assert_int_equal(outcome_of(id, &ex), LZ_OUTCOME_COMPLETED);
    assert_int_equal(ex, 0);
    assert_int_equal(F->n_audited, 1);
    assert_audit(LZ_AUDIT_BY_RULE, LZ_AUDIT_AUTO_APPROVED, LZ_OUTCOME_COMPLETED, 1);
    /* It lingers for the client, then its slot is free again. */
    struct esc_req *q = slot_of(id);
    assert_int_equal(q->phase, EP_ENDED);
    assert_null(q->fresh); /* the fresh working directory went with it */
    q->linger_until = lz_now_ms() - 1;
    run_once();
    assert_null(slot_of(id));
    assert_false(result(id, LZ_REC_RESULT_END, 0, &ack));
}

/* ---- queue prompt, and the prompt's answers ---- */

static struct esc_req *prompted_request(struct session *s, uint8_t id[16], char **argv, size_t argc) {
    new_id(id);
    cap_begin();
    send_request(s, id, argv, argc, NULL);
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt");
    assert_int_equal(F->n_prompt, 1);
    assert_int_equal(F->prompt_session, s->id);
    assert_memory_equal(F->prompt_id, id, 16);
    struct esc_req *q = slot_of(id);
    assert_non_null(q);
    assert_int_equal(q->phase, EP_PROMPT);
    struct lz_record rec;
    assert_true(result(id, LZ_REC_REQUEST_ACK, 0, &rec));
    lz_record_clear(&rec);
    assert_false(result(id, LZ_REC_DEVELOPER_DECISION, 0, &rec)); /* nothing decided yet */
    return q;
}

static void test_prompt_approve(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "asked", NULL };
    prompted_request(s, id, argv, 2);
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 2, NULL);
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "StartHostExecutionPiped CompleteHostExecution");
    assert_int_equal(decision_of(id), LZ_DECISION_APPROVED);
    char out[256];
    chunks_of(id, out, sizeof out, NULL);
    assert_string_equal(out, "asked\n");
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_COMPLETED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED, LZ_OUTCOME_COMPLETED, 0);
    assert_int_equal(F->n_gone, 0);
    /* A second answer for the same request changes nothing. */
    hc_esc_refuse(&F->h, id, LZ_OUTCOME_DENIED, true, "late");
    assert_int_equal(slot_of(id)->phase, EP_ENDED);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_COMPLETED);
}

static void test_prompt_edit(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "asked", NULL };
    prompted_request(s, id, argv, 2);
    char *edited[] = { echo_path, "edited", "twice", NULL };
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_EDITED, 0, edited, 3, NULL);
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "StartHostExecutionPiped CompleteHostExecution");
    struct lz_record rec;
    assert_true(result(id, LZ_REC_DEVELOPER_DECISION, 0, &rec));
    assert_int_equal(rec.decision.decision, LZ_DECISION_EDITED);
    assert_int_equal(rec.decision.argc, 3);
    assert_string_equal(rec.decision.argv[2], "twice");
    lz_record_clear(&rec);
    char out[256];
    chunks_of(id, out, sizeof out, NULL);
    assert_string_equal(out, "edited twice\n");
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_EDITED, LZ_OUTCOME_COMPLETED, 0);
}

static void test_prompt_deny(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "no", NULL };
    prompted_request(s, id, argv, 2);
    cap_begin();
    hc_esc_refuse(&F->h, id, LZ_OUTCOME_DENIED, true, "denied by the developer");
    cap_end();
    /* DeveloperDeny is the prompt's to log; nothing ran. */
    assert_string_equal(models(), "");
    assert_int_equal(slot_of(id)->phase, EP_ENDED);
    assert_int_equal(decision_of(id), LZ_DECISION_DENIED);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_DENIED);
    struct lz_record rec;
    assert_false(result(id, LZ_REC_RESULT_CHUNK, 0, &rec));
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_DENIED, LZ_OUTCOME_DENIED, 0);
    assert_int_equal(F->n_gone, 0);
}

static void test_prompt_timeout_and_interrupt(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "late", NULL };
    prompted_request(s, id, argv, 2);
    hc_esc_refuse(&F->h, id, LZ_OUTCOME_TIMED_OUT, false, "no decision before the prompt's timeout");
    assert_int_equal(decision_of(id), LZ_DECISION_DENIED);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_TIMED_OUT);
    assert_audit(LZ_AUDIT_BY_NONE, LZ_AUDIT_DECISION_NONE, LZ_OUTCOME_TIMED_OUT, 0);

    F->n_prompt = 0;
    struct session *s2 = new_session(false);
    uint8_t id2[16];
    prompted_request(s2, id2, argv, 2);
    hc_esc_refuse(&F->h, id2, LZ_OUTCOME_CANCELLED, true, "cancelled by Ctrl-C at the prompt");
    assert_int_equal(outcome_of(id2, NULL), LZ_OUTCOME_CANCELLED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_DECISION_NONE, LZ_OUTCOME_CANCELLED, 0);
}

/* The coordinator's own backstop when the prompt never answers. */
static void test_prompt_backstop_timeout(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "x", NULL };
    struct esc_req *q = prompted_request(s, id, argv, 2);
    assert_true(q->deadline > lz_now_ms());
    q->deadline = lz_now_ms() - 1;
    cap_begin();
    run_once();
    cap_end();
    assert_string_equal(models(), "TimeoutRequest");
    assert_int_equal(F->n_gone, 1); /* its screen closes */
    assert_memory_equal(F->gone_id, id, 16);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_TIMED_OUT);
}

/* [s]: the prompt approves at once from a grant of this session. */
static void test_session_approve(void **state) {
    struct session *s = new_session(false);
    F->prompt_grants = true;
    F->grant_ref = 7;
    uint8_t id[16];
    new_id(id);
    char *argv[] = { echo_path, "again", NULL };
    cap_begin();
    send_request(s, id, argv, 2, NULL);
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt StartHostExecutionPiped CompleteHostExecution");
    assert_int_equal(decision_of(id), LZ_DECISION_APPROVED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_SESSION_APPROVED, LZ_OUTCOME_COMPLETED, 7);
}

/* ---- denied without a prompt, each reason ---- */

static void test_deny_without_prompt(void **state) {
    struct session *s = new_session(false);
    char *argv[] = { echo_path, "x", NULL };
    /* --cwd outside the workspace: refused before the prompt, with its
     * reason on the requester's stderr. */
    uint8_t id[16];
    new_id(id);
    cap_begin();
    send_request(s, id, argv, 2, &(struct req_opts){ .cwd = "/etc" });
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt DenyWithoutPrompt");
    assert_int_equal(F->n_prompt, 0);
    assert_int_equal(decision_of(id), LZ_DECISION_DENIED);
    char out[1024];
    enum lz_stream st = LZ_STREAM_STDOUT;
    chunks_of(id, out, sizeof out, &st);
    assert_non_null(strstr(out, "refused before the prompt: --cwd"));
    assert_int_equal(st, LZ_STREAM_STDERR);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_DENIED);
    assert_audit(LZ_AUDIT_BY_NONE, LZ_AUDIT_DENIED, LZ_OUTCOME_DENIED, 0);

    /* The prompt cannot be shown. */
    F->prompt_ret = -ENOTTY;
    uint8_t id2[16];
    new_id(id2);
    cap_begin();
    send_request(s, id2, argv, 2, NULL);
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt DenyWithoutPrompt");
    assert_int_equal(F->n_prompt, 1);
    assert_int_equal(outcome_of(id2, NULL), LZ_OUTCOME_DENIED);
    assert_non_null(strstr(F->log, "the prompt could not be shown"));

    /* No prompt at all (a port without one). */
    F->h.esc->port.prompt_begin = NULL;
    uint8_t id3[16];
    new_id(id3);
    cap_begin();
    send_request(s, id3, argv, 2, NULL);
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt DenyWithoutPrompt");
    assert_int_equal(F->n_prompt, 1);
    assert_int_equal(outcome_of(id3, NULL), LZ_OUTCOME_DENIED);
    assert_non_null(strstr(F->log, "no prompt in this build"));

    /* An empty approved argv. */
    F->h.esc->port.prompt_begin = fake_prompt_begin;
    F->prompt_ret = 0;
    F->n_prompt = 0;
    uint8_t id4[16];
    prompted_request(s, id4, argv, 2);
    hc_esc_approve(&F->h, id4, LZ_AUDIT_APPROVED, 0, argv, 0, NULL);
    assert_int_equal(outcome_of(id4, NULL), LZ_OUTCOME_DENIED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_DENIED, LZ_OUTCOME_DENIED, 0);
}

/* ---- host execution fails ---- */

static void test_fail_host_execution(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { "/nonexistent/lazaret-test-prog", "x", NULL };
    prompted_request(s, id, argv, 2);
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 2, NULL);
    cap_end();
    assert_string_equal(models(), "FailHostExecution");
    assert_int_equal(slot_of(id)->phase, EP_ENDED);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_FAILED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED, LZ_OUTCOME_FAILED, 0);

    /* The file changed since the prompt showed it. */
    F->n_prompt = 0;
    struct session *s2 = new_session(false);
    uint8_t id2[16];
    char *argv2[] = { echo_path, "x", NULL };
    prompted_request(s2, id2, argv2, 2);
    struct lz_hostexec_ident other = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(sleep_path, &other, &err), 0);
    cap_begin();
    hc_esc_approve(&F->h, id2, LZ_AUDIT_APPROVED, 0, argv2, 2, &other);
    cap_end();
    lz_hostexec_ident_clear(&other);
    assert_string_equal(models(), "FailHostExecution");
    assert_non_null(strstr(F->log, "no longer the file the prompt showed"));
    assert_int_equal(outcome_of(id2, NULL), LZ_OUTCOME_FAILED);
}

/* ---- the terminal route HostProcess ---- */

static void test_routed_execution(void **state) {
    struct session *s = new_session(true);
    uint8_t id[16];
    new_id(id);
    char *argv[] = { echo_path, "routed", NULL };
    cap_begin();
    send_request(s, id, argv, 2, &(struct req_opts){ .terminal = true });
    run_once();
    cap_end();
    assert_int_equal(F->n_prompt, 1);
    /* The route has no room at first: the window pauses, nothing read. */
    F->room = 0;
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 2, NULL);
    cap_end();
    assert_string_equal(models(), "StartHostExecution");
    assert_int_equal(F->n_route_begin, 1);
    assert_int_equal(F->route_session, s->id);
    struct esc_req *q = slot_of(id);
    assert_int_equal(q->phase, EP_EXECUTING);
    assert_true(q->route);
    assert_int_equal(F->route_pty, q->out_r);
    for (int i = 0; i < 20; i++) {
        struct pollfd p = { .fd = hc_esc_fd(&F->h), .events = POLLIN };
        (void)poll(&p, 1, 20);
        run_once();
    }
    assert_int_equal(q->phase, EP_EXECUTING);
    assert_true(q->window_paused);
    assert_int_equal(F->n_route_output, 0);
    /* Room again: the output goes to the route and to the sandbox. */
    F->room = 1 << 20;
    cap_begin();
    hc_esc_route_room(&F->h, id);
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "CompleteHostExecution");
    assert_int_equal(F->n_route_end, 1);
    assert_non_null(strstr(F->routed, "routed"));
    char out[256];
    enum lz_stream st = LZ_STREAM_STDOUT;
    chunks_of(id, out, sizeof out, &st);
    assert_non_null(strstr(out, "routed"));
    assert_int_equal(st, LZ_STREAM_TERMINAL);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_COMPLETED);
}

/* ---- the window of unacknowledged chunks ---- */

static void test_window(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { yes_path, "0123456789abcdef0123456789abcdef", NULL };
    prompted_request(s, id, argv, 2);
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 2, NULL);
    struct esc_req *q = slot_of(id);
    long end = lz_now_ms() + 10000;
    while (!(q->window_paused && q->sent - q->acked >= ESC_WINDOW)) {
        struct pollfd p = { .fd = hc_esc_fd(&F->h), .events = POLLIN };
        (void)poll(&p, 1, 20);
        run_once();
        if (lz_now_ms() > end)
            fail_msg("the window never filled");
    }
    assert_int_equal(q->sent, ESC_WINDOW);
    /* An ack beyond what was sent is refused; a good one reopens it. */
    cap_begin();
    send_chunk_ack(s, id, ESC_WINDOW + 1);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "chunk-ack outside the window"));
    assert_int_equal(q->acked, 0);
    send_chunk_ack(s, id, 3);
    run_once();
    assert_int_equal(q->acked, 3);
    struct lz_record rec;
    assert_false(result(id, LZ_REC_RESULT_CHUNK, 0, &rec)); /* acknowledged chunks are removed */
    assert_true(q->sent > ESC_WINDOW);
    assert_true(q->sent - q->acked <= ESC_WINDOW);
    /* The sandbox cancels it (yes never ends): killed. */
    cap_begin();
    send_cancel(s, id);
    run_once();
    cap_end();
    assert_string_equal(models(), "CancelRequest");
    assert_int_equal(q->phase, EP_ENDED);
    assert_true(q->child.pidfd < 0);
    assert_true(q->out_r < 0);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_CANCELLED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED, LZ_OUTCOME_CANCELLED, 0);
}

/* ---- stdin (--stdin) ---- */

/* Chunks that arrive before the approval wait in req/ and go to the host
 * process in order once it runs; one outside the window is removed. */
static void test_stdin(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    new_id(id);
    _cleanup_free_ char *cat = host_prog("cat");
    char *argv[] = { cat, NULL };
    send_request(s, id, argv, 1, &(struct req_opts){ .stdin_wanted = true });
    run_once();
    assert_int_equal(F->n_prompt, 1);
    send_stdin(s, id, 0, "abc", false);
    cap_begin();
    send_stdin(s, id, LZ_RECORD_STDIN_WINDOW, "far", false);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "a stdin chunk outside the window"));
    struct esc_req *q = slot_of(id);
    assert_true(q->in_on);
    assert_int_equal(q->in_next, 0); /* not taken before it runs */
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 1, NULL);
    cap_end();
    assert_string_equal(models(), "StartHostExecutionPiped");
    assert_int_equal(q->in_next, 1);
    send_stdin(s, id, 1, "def", true);
    cap_begin();
    run_until(id, EP_ENDED);
    cap_end();
    assert_string_equal(models(), "CompleteHostExecution");
    char out[256];
    chunks_of(id, out, sizeof out, NULL);
    assert_string_equal(out, "abcdef");
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_COMPLETED);
    assert_non_null(strstr(F->log, "stdin: 6 bytes in 2 chunks to the host process, to its end"));
}

/* ---- cancellation and time-outs ---- */

static void test_cancel_at_prompt(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { echo_path, "x", NULL };
    prompted_request(s, id, argv, 2);
    cap_begin();
    send_cancel(s, id);
    run_once();
    cap_end();
    assert_string_equal(models(), "CancelRequest");
    assert_int_equal(F->n_gone, 1);
    assert_memory_equal(F->gone_id, id, 16);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_CANCELLED);
    /* A cancel of another session's request is refused. */
    struct session *s2 = new_session(false);
    uint8_t id2[16];
    F->n_prompt = 0;
    prompted_request(s2, id2, argv, 2);
    cap_begin();
    send_cancel(s, id2);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "no such request of this session"));
    assert_int_equal(slot_of(id2)->phase, EP_PROMPT);
}

static void test_timeout_host_execution(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16];
    char *argv[] = { sleep_path, "30", NULL };
    prompted_request(s, id, argv, 2);
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, argv, 2, NULL);
    struct esc_req *q = slot_of(id);
    assert_int_equal(q->phase, EP_EXECUTING);
    q->deadline = lz_now_ms() - 1;
    cap_begin();
    run_once();
    cap_end();
    assert_string_equal(models(), "TimeoutHostExecution");
    assert_non_null(strstr(F->log, "host process killed"));
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_TIMED_OUT);
    assert_true(q->child.pidfd < 0);
}

/* The session goes away: its requests end (DisconnectSession is the
 * session's to log), the prompt closes, the host process is killed and
 * the slots are free at once. */
static void test_session_end(void **state) {
    struct session *s = new_session(false);
    uint8_t id[16], id2[16];
    char *argv[] = { echo_path, "x", NULL };
    prompted_request(s, id, argv, 2);
    cap_begin();
    hc_esc_session_end(&F->h, s, "its session disconnected");
    cap_end();
    assert_string_equal(models(), "");
    assert_int_equal(F->n_gone, 1);
    assert_null(slot_of(id));
    assert_null(s->anchor);
    assert_audit(LZ_AUDIT_BY_NONE, LZ_AUDIT_DECISION_NONE, LZ_OUTCOME_CANCELLED, 0);

    struct session *s2 = new_session(false);
    char *slp[] = { sleep_path, "30", NULL };
    F->n_prompt = 0;
    prompted_request(s2, id2, slp, 2);
    hc_esc_approve(&F->h, id2, LZ_AUDIT_APPROVED, 0, slp, 2, NULL);
    assert_int_equal(slot_of(id2)->phase, EP_EXECUTING);
    cap_begin();
    hc_esc_session_end(&F->h, s2, "its session ended");
    cap_end();
    assert_non_null(strstr(F->log, "host process killed"));
    assert_null(slot_of(id2));
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED, LZ_OUTCOME_CANCELLED, 0);
}

/* The Domain stops: every request ends, every host process is killed. */
static void test_domain_stop(void **state) {
    struct session *s = new_session(false);
    struct session *s2 = new_session(false);
    uint8_t id[16], id2[16];
    char *slp[] = { sleep_path, "30", NULL };
    prompted_request(s, id, slp, 2);
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED, 0, slp, 2, NULL);
    F->n_prompt = 0;
    prompted_request(s2, id2, slp, 2);
    pid_t pid = slot_of(id)->child.pid;
    assert_true(pid > 0);
    int before = F->n_audited;
    cap_begin();
    hc_esc_free(&F->h);
    cap_end();
    assert_null(F->h.esc);
    assert_int_equal(F->n_audited, before + 2);
    assert_int_equal(F->n_gone, 1);
    assert_non_null(strstr(F->log, "the Domain is stopping; host process killed"));
    assert_int_equal(kill(pid, 0), -1); /* reaped: gone */
    /* The hooks do nothing after the end. */
    hc_esc_dispatch(&F->h);
    hc_esc_tick(&F->h);
    assert_int_equal(hc_esc_fd(&F->h), -1);
}

/* ---- bounds and refusals ---- */

static void test_refusals(void **state) {
    struct session *s = new_session(false);
    struct session *other = new_session(false);
    char *argv[] = { echo_path, "x", NULL };
    uint8_t id[16];
    prompted_request(s, id, argv, 2);
    /* One active request per session. */
    uint8_t id2[16];
    new_id(id2);
    cap_begin();
    send_request(s, id2, argv, 2, NULL);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "its session already has an active request"));
    assert_null(slot_of(id2));
    assert_string_equal(models(), "");
    /* A replayed request ID (even from another session). */
    cap_begin();
    send_request(other, id, argv, 2, NULL);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "replayed request ID"));
    /* Expired, not yet valid, valid for too long. */
    const struct req_opts bad[] = { { .created_off_ms = -120000, .valid_ms = 60000 },
                                    { .created_off_ms = ESC_SKEW_MS + 60000 },
                                    { .valid_ms = ESC_MAX_VALID_MS + 1000 } };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        uint8_t idb[16];
        new_id(idb);
        cap_begin();
        send_request(other, idb, argv, 2, &bad[i]);
        run_once();
        cap_end();
        assert_non_null(strstr(F->log, "expired (or not yet valid, or valid for too long)"));
        assert_null(slot_of(idb));
    }
    /* Signed with another session's key: the signature decides. */
    uint8_t id3[16];
    new_id(id3);
    cap_begin();
    send_request(other, id3, argv, 2, &(struct req_opts){ .sign_sk = s->anchor->sk });
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "escalation: rejected"));
    assert_null(slot_of(id3));
    /* A session the coordinator does not know (closed). */
    lz_closep(&other->sock);
    uint8_t id4[16];
    new_id(id4);
    cap_begin();
    send_request(other, id4, argv, 2, NULL);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "unknown or closed session"));
    assert_null(slot_of(id4));
    /* A foreign name in req/ is removed unread. */
    assert_int_equal(lz_mbox_put(F->req_fd, "not-a-record", (const uint8_t *)"x", 1), 0);
    cap_begin();
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "foreign name"));
    assert_int_equal(faccessat(F->req_fd, "not-a-record", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(F->n_prompt, 1);
}

/* At most ESC_MAX_REQ requests at once; a lingering one makes room. */
static void test_too_many(void **state) {
    char *argv[] = { echo_path, "x", NULL };
    uint8_t ids[ESC_MAX_REQ + 1][16];
    for (int i = 0; i < ESC_MAX_REQ; i++) {
        struct session *s = new_session(false);
        new_id(ids[i]);
        send_request(s, ids[i], argv, 2, NULL);
        run_once();
        assert_non_null(slot_of(ids[i]));
    }
    assert_int_equal(F->n_prompt, ESC_MAX_REQ);
    struct session *last = new_session(false);
    new_id(ids[ESC_MAX_REQ]);
    cap_begin();
    send_request(last, ids[ESC_MAX_REQ], argv, 2, NULL);
    run_once();
    cap_end();
    assert_non_null(strstr(F->log, "too many requests at once"));
    assert_null(slot_of(ids[ESC_MAX_REQ]));
    /* One ends (denied): its lingering slot is taken by the next. */
    hc_esc_refuse(&F->h, ids[0], LZ_OUTCOME_DENIED, true, "denied");
    assert_int_equal(slot_of(ids[0])->phase, EP_ENDED);
    uint8_t idn[16];
    new_id(idn);
    cap_begin();
    send_request(last, idn, argv, 2, NULL);
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt");
    assert_null(slot_of(ids[0]));
    assert_int_equal(slot_of(idn)->phase, EP_PROMPT);
}

/* ---- host-request (lazaret-escalate --allow-host) ---- */

/* A host-request up to its prompt: always asked (the fixture has an
 * auto-approval rule; it never applies), and nothing allowed yet. */
static struct esc_req *host_prompted(struct session *s, uint8_t id[16], const char *text) {
    new_id(id);
    int allowed_before = F->n_allow;
    cap_begin();
    send_host_request(s, id, text);
    run_once();
    cap_end();
    assert_string_equal(models(), "ReceiveEscalation QueuePrompt");
    assert_int_equal(F->n_prompt, 1);
    assert_true(F->prompt_net);
    assert_memory_equal(F->prompt_id, id, 16);
    assert_int_equal(F->n_allow, allowed_before);
    struct esc_req *q = slot_of(id);
    assert_non_null(q);
    assert_int_equal(q->phase, EP_PROMPT);
    struct lz_record rec;
    assert_true(result(id, LZ_REC_REQUEST_ACK, 0, &rec));
    lz_record_clear(&rec);
    assert_false(result(id, LZ_REC_DEVELOPER_DECISION, 0, &rec));
    return q;
}

/* The audit's last row keeps the request as the sandbox wrote it. */
static void assert_audit_argv(const char *a0, const char *a1) {
    _cleanup_audit_log_ struct lz_audit_log log = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_audit_read(F->h.st, &log, &err), 0);
    assert_true(log.n > 0);
    const struct lz_audit_row *r = &log.rows[log.n - 1];
    assert_int_equal(r->e.argc, 2);
    assert_string_equal(r->e.argv[0], a0);
    assert_string_equal(r->e.argv[1], a1);
    assert_null(r->problem);
}

static void test_host_approve(void **state) {
    struct session *s = new_session(true);
    uint8_t id[16];
    /* Written in a spelling the coordinator canonicalises. */
    host_prompted(s, id, "Docs.Example.COM.:8443,443");
    assert_string_equal(F->prompt_host.name, "docs.example.com");
    assert_false(F->prompt_host.wildcard);
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED_FOR_SESSION, 0, NULL, 0, NULL);
    cap_end();
    assert_string_equal(models(), "");
    assert_int_equal(F->n_allow, 1);
    assert_string_equal(F->allowed.name, "docs.example.com");
    assert_false(F->allowed.wildcard);
    assert_int_equal(F->allowed.n_ports, 2);
    assert_int_equal(F->allowed.ports[0], 443);
    assert_int_equal(F->allowed.ports[1], 8443);
    assert_non_null(strstr(F->log, "host rule docs.example.com:443,8443 allowed"));
    /* Nothing ran on the host: no terminal route, no chunk. */
    assert_int_equal(F->n_route_begin, 0);
    struct lz_record rec;
    assert_false(result(id, LZ_REC_RESULT_CHUNK, 0, &rec));
    assert_true(result(id, LZ_REC_DEVELOPER_DECISION, 0, &rec));
    assert_int_equal(rec.decision.decision, LZ_DECISION_APPROVED);
    assert_int_equal(rec.decision.argc, 2);
    assert_string_equal(rec.decision.argv[0], "--allow-host");
    assert_string_equal(rec.decision.argv[1], "Docs.Example.COM.:8443,443");
    lz_record_clear(&rec);
    int ex = -1;
    assert_int_equal(outcome_of(id, &ex), LZ_OUTCOME_COMPLETED);
    assert_int_equal(ex, 0);
    assert_int_equal(F->n_audited, 1);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED_FOR_SESSION, LZ_OUTCOME_COMPLETED, 0);
    assert_audit_argv("--allow-host", "Docs.Example.COM.:8443,443");
    assert_int_equal(slot_of(id)->phase, EP_ENDED);
    /* The same name again is asked again: no earlier answer decides. */
    uint8_t id2[16];
    F->n_prompt = 0;
    host_prompted(s, id2, "docs.example.com:443");
    hc_esc_refuse(&F->h, id2, LZ_OUTCOME_DENIED, true, "denied by the developer");
    assert_int_equal(F->n_allow, 1);
}

/* Denied, timed out, cancelled at the prompt or by the sandbox: the
 * callback is never called. */
static void test_host_refused(void **state) {
    struct session *s = new_session(true);
    static const struct {
        enum lz_outcome outcome;
        bool by_developer;
        enum lz_audit_decision ad;
    } cases[] = {
        { LZ_OUTCOME_DENIED, true, LZ_AUDIT_DENIED },
        { LZ_OUTCOME_TIMED_OUT, false, LZ_AUDIT_DECISION_NONE },
        { LZ_OUTCOME_CANCELLED, true, LZ_AUDIT_DECISION_NONE },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        uint8_t id[16];
        F->n_prompt = 0;
        host_prompted(s, id, "example.com:443");
        hc_esc_refuse(&F->h, id, cases[i].outcome, cases[i].by_developer, "no");
        assert_int_equal(F->n_allow, 0);
        assert_int_equal(decision_of(id), LZ_DECISION_DENIED);
        assert_int_equal(outcome_of(id, NULL), cases[i].outcome);
        assert_audit(cases[i].by_developer ? LZ_AUDIT_BY_DEVELOPER : LZ_AUDIT_BY_NONE, cases[i].ad, cases[i].outcome,
                     0);
        assert_audit_argv("--allow-host", "example.com:443");
        /* A late approval of an ended request does nothing. */
        hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED_FOR_SESSION, 0, NULL, 0, NULL);
        assert_int_equal(F->n_allow, 0);
    }
    /* The sandbox cancels while the prompt is up. */
    uint8_t id[16];
    F->n_prompt = 0;
    host_prompted(s, id, "example.com");
    cap_begin();
    send_cancel(s, id);
    run_until(id, EP_ENDED);
    cap_end();
    assert_int_equal(F->n_gone, 1);
    assert_memory_equal(F->gone_id, id, 16);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_CANCELLED);
    assert_int_equal(F->n_allow, 0);
    /* No prompt could be shown: denied. */
    F->prompt_ret = -ENOTTY;
    F->n_prompt = 0;
    new_id(id);
    send_host_request(s, id, "example.com");
    run_once();
    assert_int_equal(F->n_prompt, 1);
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_DENIED);
    assert_int_equal(F->n_allow, 0);
}

/* Malformed hosts and wildcards from the sandbox: refused before any
 * prompt with the reason on the requester's stderr; never allowed. */
static void test_host_malformed(void **state) {
    struct session *s = new_session(true);
    static const struct {
        const char *text, *reason;
    } cases[] = {
        { "exa_mple.com", "--allow-host: " },
        { "example.com:0", "--allow-host: " },
        { "example.com:65536", "--allow-host: " },
        { "example.com:", "--allow-host: " },
        { "a..b.com", "--allow-host: " },
        { "10.0.2.2", "--allow-host: " },
        { "example.com\\.evil", "--allow-host: " },
        { "*", "--allow-host: " },
        { "*.com", "--allow-host: " },
        { "*.example.com", "not a wildcard" },
        { "*.example.com:443", "not a wildcard" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        uint8_t id[16];
        new_id(id);
        cap_begin();
        send_host_request(s, id, cases[i].text);
        run_once();
        cap_end();
        if (strcmp(models(), "ReceiveEscalation QueuePrompt DenyWithoutPrompt") != 0)
            fail_msg("%s: %s", cases[i].text, models());
        char out[1024];
        enum lz_stream st = LZ_STREAM_STDOUT;
        chunks_of(id, out, sizeof out, &st);
        assert_int_equal(st, LZ_STREAM_STDERR);
        if (!strstr(out, "refused before the prompt") || !strstr(out, cases[i].reason))
            fail_msg("%s: %s", cases[i].text, out);
        assert_int_equal(decision_of(id), LZ_DECISION_DENIED);
        assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_DENIED);
        assert_audit(LZ_AUDIT_BY_NONE, LZ_AUDIT_DENIED, LZ_OUTCOME_DENIED, 0);
        assert_audit_argv("--allow-host", cases[i].text);
    }
    assert_int_equal(F->n_prompt, 0);
    assert_int_equal(F->n_allow, 0);
    /* Positive control: the same session's well-formed request is asked. */
    uint8_t id[16];
    host_prompted(s, id, "example.com");
}

/* The rule could not be added (the resolver's bounds): the request fails
 * with the reason on the requester's stderr. */
static void test_host_allow_fails(void **state) {
    struct session *s = new_session(true);
    uint8_t id[16];
    host_prompted(s, id, "example.com:443");
    F->allow_ret = -E2BIG;
    F->allow_msg = "too many host rules";
    cap_begin();
    hc_esc_approve(&F->h, id, LZ_AUDIT_APPROVED_FOR_SESSION, 0, NULL, 0, NULL);
    cap_end();
    assert_int_equal(F->n_allow, 1);
    char out[1024];
    chunks_of(id, out, sizeof out, NULL);
    assert_non_null(strstr(out, "example.com:443 was approved but could not be allowed: too many host rules"));
    assert_int_equal(outcome_of(id, NULL), LZ_OUTCOME_FAILED);
    assert_audit(LZ_AUDIT_BY_DEVELOPER, LZ_AUDIT_APPROVED_FOR_SESSION, LZ_OUTCOME_FAILED, 0);
}

/* A port without a required member is refused at creation. */
static void test_port_required(void **state) {
    struct hc_esc_port p = F->port;
    p.session_by_sid = NULL;
    struct hc h = { .cfg = &F->cfg, .gen_dir = F->gen_dir, .esc_port = &p };
    h.boot.mbox_fd[0] = h.boot.mbox_fd[1] = -EBADF;
    struct lz_error err = { 0 };
    assert_int_equal(hc_esc_create(&h, &err), -EINVAL);
    assert_null(h.esc);
    p = F->port;
    p.allow_host = NULL;
    assert_int_equal(hc_esc_create(&h, &err), -EINVAL);
    assert_null(h.esc);
    h.esc_port = NULL;
    assert_int_equal(hc_esc_create(&h, &err), -EINVAL);
}

/* ---- the model's action names (hclog.h) ---- */

/* hc_action_name's table is the model's `inline`s, exactly: every action
 * of docs/model/lazaret.pml has its enum value, and every enum value names
 * an action of the model. */
static void test_action_names(void **state) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    if (!src)
        skip();
    _cleanup_free_ char *path = lz_xasprintf("%s/docs/model/lazaret.pml", src);
    _cleanup_free_ char *pml = NULL;
    size_t len = 0;
    assert_int_equal(lz_read_file_at(AT_FDCWD, path, 1 << 22, &pml, &len), 0);
    bool seen[HC_ACTION_COUNT] = { false };
    int n = 0;
    for (const char *p = pml; (p = strstr(p, "\ninline ")) != NULL;) {
        p += strlen("\ninline ");
        size_t k = strcspn(p, "(");
        char name[64];
        assert_true(k > 0 && k < sizeof name);
        memcpy(name, p, k);
        name[k] = '\0';
        int a = hc_action_by_name(name);
        if (a < 0)
            fail_msg("the model's action %s has no enum hc_action value", name);
        assert_string_equal(hc_action_name((enum hc_action)a), name);
        seen[a] = true;
        n++;
    }
    assert_true(n > 30);
    for (int a = HC_NO_ACTION + 1; a < HC_ACTION_COUNT; a++)
        if (!seen[a])
            fail_msg("enum hc_action %d (%s) is not an action of the model", a, hc_action_name((enum hc_action)a));
    assert_null(hc_action_name(HC_NO_ACTION));
    assert_null(hc_action_name(HC_ACTION_COUNT));
    assert_int_equal(hc_action_by_name("NoSuchAction"), -1);
    assert_int_equal(hc_action_by_name(NULL), -1);
}

int main(void) {
    setenv("LAZARET_DEBUG", "1", 1);
    unsetenv("LAZARET_TEST_AUTO_APPROVE");
    unsetenv("LAZARET_TEST_CRASH");
    if (sodium_init() < 0)
        return 1;
    echo_path = host_prog("echo");
    sleep_path = host_prog("sleep");
    yes_path = host_prog("yes");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_action_names),
        cmocka_unit_test_setup_teardown(test_auto_approve_completes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_approve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_edit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_deny, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_timeout_and_interrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompt_backstop_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_approve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deny_without_prompt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_host_execution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_routed_execution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_at_prompt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_host_execution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_domain_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_port_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_approve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_allow_fails, setup, teardown),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    free(echo_path);
    free(sleep_path);
    free(yes_path);
    return r;
}
