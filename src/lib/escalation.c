/* escalation.c — the Host Coordinator's side of host escalation (hc.h):
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
 * Events come through one epoll fd that the coordinator's loop polls: the
 * inotify watch on req/, each running request's stdout/stderr pipes and
 * its pidfd, and (--stdin) its stdin pipe's write end while it is full. */
#include "hc_esc.h"
#include "hostexec.h"
#include "mailbox.h"
#include "procenv.h"
#include "sbwrite.h"
#include "trust.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define ESC_MAX_REQ LZ_MBOX_LIVE_MAX /* live and lingering requests of a generation (the mailbox's bound) */
#define ESC_MAX_SEEN 65536           /* request IDs remembered against replay */
#define ESC_WINDOW 8                 /* unacknowledged result chunks */
#define ESC_SKEW_MS 5000             /* a request may be created this far in our future */
#define ESC_MAX_VALID_MS 600000      /* longest validity window of a request */
#define ESC_DEFAULT_TIMEOUT_S 3600
#define ESC_LINGER_MS 60000 /* result files kept after the end for the client */
#define ESC_PROMPT_TIMEOUT_MS 300000
#define ESC_PROMPT_GRACE_MS 2000
#define ESC_KILL_WAIT_MS 5000
/* Bytes the host process may write ahead of the window: a pipe of the
 * default 64 KiB hands over one writer's 128 KiB as 48 + 16 KiB, and each
 * chunk costs a signature, a file and a verification in the sandbox. */
#define ESC_PIPE_SIZE (512 * 1024)

enum { EV_INOTIFY = 0, EV_OUT = 1, EV_ERR = 2, EV_PID = 3, EV_IN = 4 };

enum esc_phase { EP_FREE, EP_PROMPT, EP_EXECUTING, EP_ENDED };

struct esc_req {
    enum esc_phase phase;
    uint8_t id[LZ_RECORD_ID_LEN];
    uint8_t sid[LZ_RECORD_ID_LEN];
    char hex[2 * LZ_RECORD_ID_LEN + 1];
    int session; /* the hc session's id */
    struct lz_record rec;
    struct lz_hostexec_ident ident;
    struct lz_child child;
    int out_r, err_r;
    uint64_t sent, acked; /* chunks written / acknowledged */
    uint64_t out_bytes;
    long deadline;     /* monotonic ms: execution or prompt deadline */
    long linger_until; /* EP_ENDED: when its result files go */
    bool window_paused;
    int exit_status, exit_sig; /* once the host process is reaped */
    /* For its audit row. */
    int64_t received_ms;
    enum lz_audit_decider by;
    enum lz_audit_decision ad;
    int64_t ref;
    char **edited; /* the approved argv when edited (NULL-terminated), else NULL */
    size_t edited_argc;
    char *host_cwd; /* where it ran (or would have), once resolved */
    /* An auto-approved request: what runs (the rule's canonical argv[0],
     * the request's other elements), and whether it runs in a fresh empty
     * directory (the rule has no cwd = "workspace"): its name beneath
     * hostcwd_fd once made, removed when the request ends. */
    char **run_argv;
    size_t run_argc;
    bool want_fresh;
    char *fresh;
    bool route; /* on the session's terminal (route HostProcess): out_r is its PTY master */
    /* stdin (--stdin, "stdin" below): the write end of the host process's
     * stdin pipe, the seq of the next stdin-chunk to take, and the one
     * chunk taken and not yet written (in_buf[in_off..in_len)). */
    int in_w;
    bool in_on;      /* asked for; until the request ends */
    bool in_eof;     /* the chunk with eof was taken */
    bool in_armed;   /* in_w is in the epoll set (EPOLLOUT) */
    bool in_dropped; /* the host process stopped reading: the rest is dropped */
    uint64_t in_next, in_chunks, in_bytes, in_dropped_bytes;
    uint8_t *in_buf;
    size_t in_len, in_off;
};

struct lz_esc {
    struct lz_trust_anchor *ta;
    char *dir;
    int dir_fd, req_fd, res_fd, ino_fd, ep_fd, ws_fd;
    int hostcwd_fd; /* {gen_dir}/hostcwd: the fresh working directories */
    char *hostcwd;
    struct hc_esc_port port; /* everything it calls outside escalation (hc_esc.h) */
    struct lz_esc_policy policy;
    struct lz_sbw writable; /* what the prompt warns about (sbwrite.h) */
    struct esc_req req[ESC_MAX_REQ];
    uint8_t (*seen)[LZ_RECORD_ID_LEN];
    size_t n_seen;
};

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ep_add(struct lz_esc *e, int fd, uint32_t kind, size_t idx) {
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)kind << 32 | idx };
    return epoll_ctl(e->ep_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* ---- set-up: the generation step "trust anchor" ---- */

int hc_esc_create(struct hc *h, struct lz_error *err) {
    const struct hc_esc_port *p = h->esc_port;
    if (!p || !p->prompt_gone || !p->route_begin || !p->route_room || !p->route_output || !p->route_end ||
        !p->audited || !p->session_by_id || !p->session_by_sid)
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
        (r = ep_add(e, e->ino_fd, EV_INOTIFY, 0)) < 0)
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

/* ---- records to the sandbox ---- */

static void put(struct hc *h, struct esc_req *q, struct lz_record *rec) {
    struct lz_error err = { 0 };
    memcpy(rec->request_id, q->id, LZ_RECORD_ID_LEN);
    memcpy(rec->session_id, q->sid, LZ_RECORD_ID_LEN);
    if (lz_mbox_put_record(h->esc->res_fd, h->esc->ta->sk, rec, &err) < 0)
        hc_log("escalation: request %.12s: %s", q->hex, err.msg);
}

static void put_decision(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc) {
    struct lz_record rec = { .kind = LZ_REC_DEVELOPER_DECISION };
    rec.decision.decision = d;
    rec.decision.argv = (char **)argv;
    rec.decision.argc = d == LZ_DECISION_DENIED ? 0 : argc;
    rec.decision.decided_ms = (uint64_t)wall_ms();
    put(h, q, &rec);
}

static void remove_results(struct lz_esc *e, struct esc_req *q, uint64_t from_seq, uint64_t to_seq, bool all) {
    struct lz_mbox_name n = { .kind = LZ_REC_RESULT_CHUNK };
    memcpy(n.request_id, q->id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    for (uint64_t s = from_seq; s < to_seq; s++) {
        n.seq = s;
        if (lz_mbox_name_format(&n, name, sizeof name) == 0)
            (void)lz_mbox_remove(e->res_fd, name);
    }
    if (!all)
        return;
    static const unsigned kinds[] = { LZ_REC_REQUEST_ACK, LZ_REC_DEVELOPER_DECISION, LZ_REC_RESULT_END };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(kinds); k++) {
        n.kind = kinds[k];
        n.seq = 0;
        if (lz_mbox_name_format(&n, name, sizeof name) == 0)
            (void)lz_mbox_remove(e->res_fd, name);
    }
}

/* ---- stdin (lazaret-escalate --stdin) ----
 *
 * A stdin-chunk is not taken when it arrives: the one that names the
 * request's next seq is taken when the host process's stdin pipe has room
 * for its bytes (stdin_feed), so the entries still in req/ are the client's
 * window (it writes seq N once seq N - LZ_RECORD_STDIN_WINDOW is gone) and
 * the coordinator holds at most one chunk per request. Chunks that arrive
 * before the request is approved wait there; entries named outside
 * [in_next, in_next + window), duplicates, anything after the eof chunk
 * and entries of a request that did not ask for stdin are removed on
 * arrival (on_stdin_entry). The request's end removes what still waits. */

static void reject(const char *name, const char *why);
static struct esc_req *find_req(struct lz_esc *e, const uint8_t id[LZ_RECORD_ID_LEN]);
static int open_entry(struct hc *h, const char *name, const uint8_t *buf, size_t len, unsigned kind,
                      struct session **ret_s, struct lz_record *ret);

static void remove_req_entry(struct lz_esc *e, const char *name) {
    struct stat st;
    if (fstatat(e->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        (void)lz_rm_rf_at(e->req_fd, name);
    else
        (void)lz_mbox_remove(e->req_fd, name);
}

/* EPOLLOUT on the write end only while a chunk waits for room: armed on a
 * writable pipe, level-triggered, it would wake the loop at once. */
static int stdin_arm(struct lz_esc *e, struct esc_req *q, bool on) {
    if (q->in_w < 0 || q->in_armed == on)
        return 0;
    struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t)EV_IN << 32 | (size_t)(q - e->req) };
    if (epoll_ctl(e->ep_fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, q->in_w, &ev) < 0)
        return -errno;
    q->in_armed = on;
    return 0;
}

static void stdin_close(struct lz_esc *e, struct esc_req *q) {
    (void)stdin_arm(e, q, false);
    lz_closep(&q->in_w);
}

/* The request ends (any outcome): the pipe closes, the chunk held and the
 * entries still waiting in req/ go. */
static void stdin_end(struct hc *h, struct esc_req *q) {
    struct lz_esc *e = h->esc;
    if (!q->in_on)
        return;
    stdin_close(e, q);
    struct lz_mbox_name n = { .kind = LZ_REC_STDIN_CHUNK };
    memcpy(n.request_id, q->id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    for (uint64_t i = 0; i < LZ_RECORD_STDIN_WINDOW; i++) {
        n.seq = q->in_next + i;
        if (lz_mbox_name_format(&n, name, sizeof name) == 0)
            remove_req_entry(e, name);
    }
    if (q->in_off < q->in_len)
        q->in_dropped_bytes += q->in_len - q->in_off;
    hc_log("escalation: request %.12s: stdin: %llu bytes in %llu chunks to the host process, %s; %llu bytes dropped%s",
           q->hex, (unsigned long long)q->in_bytes, (unsigned long long)q->in_chunks,
           q->in_eof ? "to its end" : "not to its end", (unsigned long long)q->in_dropped_bytes,
           q->in_dropped ? " (the host process stopped reading)" : "");
    free(q->in_buf);
    q->in_buf = NULL;
    q->in_len = q->in_off = 0;
    q->in_on = false;
}

/* Takes the stdin-chunk q->in_next if it is there: 1 (its bytes in
 * in_buf), 0 not there yet, -1 refused (removed and logged; the same seq
 * is awaited again, so a record dropped in by another sandbox process
 * under that name does not cut the stream short). */
static int stdin_take(struct hc *h, struct esc_req *q) {
    static uint8_t buf[LZ_RECORD_MAX + 1];
    struct lz_mbox_name n = { .kind = LZ_REC_STDIN_CHUNK, .seq = q->in_next };
    memcpy(n.request_id, q->id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    if (lz_mbox_name_format(&n, name, sizeof name) < 0)
        return -1;
    size_t len = 0;
    enum lz_mbox_refusal why;
    int r = lz_mbox_take(h->esc->req_fd, name, buf, sizeof buf, &len, &why);
    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        hc_log("escalation: refused mailbox entry %s: %s (removed)", name, lz_mbox_refusal_name(why));
        return -1;
    }
    struct session *s;
    struct lz_record rec;
    if (open_entry(h, name, buf, len, LZ_REC_STDIN_CHUNK, &s, &rec) < 0)
        return -1;
    if (s->id != q->session || memcmp(rec.request_id, q->id, LZ_RECORD_ID_LEN) != 0 ||
        memcmp(rec.session_id, q->sid, LZ_RECORD_ID_LEN) != 0 || rec.stdin_chunk.seq != q->in_next) {
        reject(name, "the name does not match the record");
        lz_record_clear(&rec);
        return -1;
    }
    if (!q->in_buf)
        q->in_buf = lz_xmalloc(LZ_RECORD_CHUNK_MAX);
    if (rec.stdin_chunk.len)
        memcpy(q->in_buf, rec.stdin_chunk.data, rec.stdin_chunk.len);
    q->in_len = rec.stdin_chunk.len;
    q->in_off = 0;
    q->in_next++;
    q->in_chunks++;
    q->in_eof = rec.stdin_chunk.eof;
    lz_record_clear(&rec);
    return 1;
}

/* Moves stdin chunks into the pipe until it is full (EPOLLOUT armed) or
 * the next chunk is not there (its arrival calls this again). */
static void stdin_feed(struct hc *h, struct esc_req *q) {
    struct lz_esc *e = h->esc;
    /* Bounded: each round writes or takes; this covers the window that was
     * there on entry, and every entry written meanwhile brings its own
     * inotify event. */
    for (int round = 0; round < 4 * LZ_RECORD_STDIN_WINDOW; round++) {
        if (q->phase != EP_EXECUTING || !q->in_on)
            return;
        if (q->in_off < q->in_len) {
            if (q->in_w < 0) {
                q->in_dropped_bytes += q->in_len - q->in_off;
                q->in_off = q->in_len;
                continue;
            }
            ssize_t n = write(q->in_w, q->in_buf + q->in_off, q->in_len - q->in_off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN) {
                if (stdin_arm(e, q, true) == 0)
                    return;
                errno = EIO; /* cannot wait for room: treated as a closed reader */
            }
            if (n < 0) {
                /* EPIPE (SIGPIPE is blocked in the coordinator and read
                 * from its signalfd): the host process closed its stdin or
                 * exited. The rest is still taken, and dropped, so the
                 * client never waits for room that will not come. */
                hc_log("escalation: request %.12s: the host process does not read its stdin (%s); the rest is "
                       "dropped",
                       q->hex, strerror(errno));
                stdin_close(e, q);
                q->in_dropped = true;
                continue;
            }
            q->in_off += (size_t)n;
            q->in_bytes += (uint64_t)n;
            continue;
        }
        if (q->in_eof) {
            stdin_close(e, q); /* the host process reads end-of-file */
            return;
        }
        if (stdin_take(h, q) <= 0) {
            (void)stdin_arm(e, q, false);
            return;
        }
    }
    /* Out of rounds with a chunk held: come back when there is room. */
    if (q->in_off < q->in_len)
        (void)stdin_arm(e, q, true);
}

/* A stdin-chunk entry appeared in req/: judged by its name (nothing is
 * read): removed when it cannot be the next ones of a live stream, left
 * waiting otherwise, and taken at once when its request runs and it is
 * the next one. */
static void on_stdin_entry(struct hc *h, const char *name, const struct lz_mbox_name *mn) {
    struct lz_esc *e = h->esc;
    /* Gone already: taken by stdin_feed before this event was read, or a
     * second event for one entry (the sandbox's file system may report a
     * rename as more than one event). */
    struct stat st;
    if (fstatat(e->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    struct esc_req *q = find_req(e, mn->request_id);
    if (q && q->phase == EP_ENDED) {
        /* What the client sent before it saw the end: not logged. */
        remove_req_entry(e, name);
        return;
    }
    const char *why = NULL;
    if (!q)
        why = "no such request";
    else if (!q->in_on)
        why = "its request did not ask for stdin";
    else if (q->in_eof && mn->seq >= q->in_next)
        why = "a stdin chunk after the end of input";
    else if (mn->seq < q->in_next)
        why = "a stdin chunk already taken (duplicate)";
    else if (mn->seq - q->in_next >= LZ_RECORD_STDIN_WINDOW)
        why = "a stdin chunk outside the window";
    if (why) {
        remove_req_entry(e, name);
        reject(name, why);
        return;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size > LZ_RECORD_MAX) {
        /* Not left waiting: take refuses and removes it. */
        static uint8_t b[1];
        size_t l;
        enum lz_mbox_refusal r;
        (void)lz_mbox_take(e->req_fd, name, b, 0, &l, &r);
        hc_log("escalation: refused mailbox entry %s: %s (removed)", name, lz_mbox_refusal_name(r));
        return;
    }
    if (q->phase == EP_EXECUTING && mn->seq == q->in_next)
        stdin_feed(h, q);
}

/* ---- the end of a request ---- */

/* The terminal goes back to the sandbox (before its PTY master closes). */
static void route_end(struct hc *h, struct esc_req *q) {
    if (!q->route)
        return;
    q->route = false;
    h->esc->port.route_end(h, q->session, q->id);
}

static void stop_process(struct hc *h, struct esc_req *q, int *status) {
    route_end(h, q);
    if (q->child.pidfd >= 0) {
        (void)epoll_ctl(h->esc->ep_fd, EPOLL_CTL_DEL, q->child.pidfd, NULL);
        if (lz_hostexec_kill(&q->child, ESC_KILL_WAIT_MS, status) < 0)
            hc_log("escalation: request %.12s: the host process (pid %d) did not exit after SIGKILL", q->hex,
                   (int)q->child.pid);
        lz_child_close(&q->child);
    }
    lz_closep(&q->out_r);
    lz_closep(&q->err_r);
}

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
                                 .argv = (const char *const *)q->rec.request.argv,
                                 .argc = q->rec.request.argc,
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

/* The fresh working directory goes with its request, whatever the host
 * process left in it (its process group is gone by now); what it wrote
 * there is not kept (docs/escalation.md). */
static void fresh_end(struct lz_esc *e, struct esc_req *q) {
    if (q->fresh) {
        int r = lz_rm_rf_at(e->hostcwd_fd, q->fresh);
        if (r < 0)
            hc_log("escalation: request %.12s: cannot remove its working directory %s/%s: %s", q->hex, e->hostcwd,
                   q->fresh, strerror(-r));
    }
    free(q->fresh);
    q->fresh = NULL;
    q->want_fresh = false;
    lz_strv_free(q->run_argv, q->run_argc);
    q->run_argv = NULL;
    q->run_argc = 0;
}

/* A new empty directory for one auto-approved run: mode 0700, the
 * developer's, beneath hostcwd_fd (never a path the sandbox names). */
static int fresh_begin(struct lz_esc *e, struct esc_req *q, int *ret_fd, struct lz_error *err) {
    for (int tries = 0; tries < 16; tries++) {
        uint8_t rnd[8];
        char hex[2 * sizeof rnd + 1];
        randombytes_buf(rnd, sizeof rnd);
        lz_hex(rnd, sizeof rnd, hex);
        _cleanup_free_ char *name = lz_xasprintf("run-%s", hex);
        if (mkdirat(e->hostcwd_fd, name, 0700) < 0) {
            if (errno == EEXIST)
                continue;
            return lz_error_set(err, -errno, "cannot create a working directory in %s: %s", e->hostcwd,
                                strerror(errno));
        }
        q->fresh = TAKE_PTR(name);
        int fd = openat(e->hostcwd_fd, q->fresh, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return lz_error_set(err, -errno, "cannot open the working directory %s/%s: %s", e->hostcwd, q->fresh,
                                strerror(errno));
        q->host_cwd = lz_xasprintf("%s/%s", e->hostcwd, q->fresh);
        *ret_fd = fd;
        return 0;
    }
    return lz_error_set(err, -EEXIST, "cannot create a working directory in %s", e->hostcwd);
}

/* Writes result-end and its audit row, and moves the request to its
 * linger. */
static void end_request(struct hc *h, struct esc_req *q, enum lz_outcome outcome, int exit_status, int sig) {
    stdin_end(h, q);
    struct lz_record rec = { .kind = LZ_REC_RESULT_END };
    rec.end.outcome = outcome;
    rec.end.exit_status = outcome == LZ_OUTCOME_COMPLETED && !sig ? exit_status : 0;
    rec.end.signal = (uint32_t)(outcome == LZ_OUTCOME_COMPLETED ? sig : 0);
    rec.end.chunks = q->sent;
    rec.end.ended_ms = (uint64_t)wall_ms();
    put(h, q, &rec);
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
    free(q->host_cwd);
    q->host_cwd = NULL;
    fresh_end(h->esc, q);
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
    stop_process(h, q, &st);
    if (model)
        hc_model_action(model, "r=%.12s, s=%d, reason=%s", q->hex, q->session, why);
    hc_log("escalation: request %.12s: %s%s", q->hex, why, ran ? "; host process killed" : "");
    end_request(h, q, outcome, 0, 0);
}

static void free_slot(struct hc *h, struct esc_req *q) {
    remove_results(h->esc, q, q->acked, q->sent, true);
    stdin_end(h, q);
    lz_record_clear(&q->rec);
    lz_hostexec_ident_clear(&q->ident);
    lz_strv_free(q->edited, q->edited_argc);
    free(q->host_cwd);
    fresh_end(h->esc, q);
    *q = (struct esc_req){ .phase = EP_FREE, .child = LZ_CHILD_NULL, .out_r = -EBADF, .err_r = -EBADF, .in_w = -EBADF };
}

/* ---- execution ---- */

static void deny(struct hc *h, struct esc_req *q, const char *why) {
    q->ad = LZ_AUDIT_DENIED;
    put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    hc_log("escalation: request %.12s denied: %s", q->hex, why);
    end_request(h, q, LZ_OUTCOME_DENIED, 0, 0);
}

/* A denial whose reason the requester must read: one result-chunk on its
 * stderr between the decision and the end (the client prints it). */
static void deny_saying(struct hc *h, struct esc_req *q, const char *why) {
    q->ad = LZ_AUDIT_DENIED;
    put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    _cleanup_free_ char *text = lz_xasprintf("lazaret: refused before the prompt: %s\n", why);
    size_t len = strlen(text);
    struct lz_record rec = { .kind = LZ_REC_RESULT_CHUNK };
    rec.chunk.seq = q->sent++;
    rec.chunk.stream = LZ_STREAM_STDERR;
    rec.chunk.data = (uint8_t *)text;
    rec.chunk.len = len < LZ_RECORD_CHUNK_MAX ? len : LZ_RECORD_CHUNK_MAX;
    put(h, q, &rec);
    hc_log("escalation: request %.12s denied: %s", q->hex, why);
    end_request(h, q, LZ_OUTCOME_DENIED, 0, 0);
}

/* The working directory is checked when the request arrives, with the
 * executor's own check (lz_hostexec_cwd), so that a request that would be
 * refused at execution never reaches the developer's screen. */
static int precheck_cwd(struct hc *h, struct esc_req *q, struct lz_error *err) {
    _cleanup_close_ int fd = -EBADF;
    return lz_hostexec_cwd(h->esc->ws_fd, "/workspace", q->rec.request.cwd, &fd, err);
}

const char *hc_esc_host_term(const struct session *s, bool terminal) {
    if (!terminal || !s->tty || s->master < 0 || s->sock < 0)
        return NULL;
    return s->term ? s->term : "xterm-256color";
}

/* A new terminal for the host process, the size of the session's. The
 * slave comes from the master (TIOCGPTPEER), not from a path lookup. */
static int open_pty(const struct session *s, int *ret_master, int *ret_slave, struct lz_error *err) {
    _cleanup_close_ int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || unlockpt(m) < 0)
        return lz_error_errno(err, -errno, "cannot open a terminal for the host command (/dev/ptmx)");
    int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (sl < 0)
        return lz_error_errno(err, -errno, "cannot open the host command's terminal");
    struct winsize ws = { 0 };
    if (ioctl(s->master, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
        (void)ioctl(m, TIOCSWINSZ, &ws);
    *ret_master = TAKE_FD(m);
    *ret_slave = sl;
    return 0;
}

/* The approved record runs: identity resolved, re-checked by the executor
 * on the open file, recorded in the Domain Store before it may run. */
static void execute(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc,
                    const struct lz_hostexec_ident *shown) {
    struct lz_esc *e = h->esc;
    struct lz_error err = { 0 };
    size_t idx = (size_t)(q - e->req);
    char slot[32];
    snprintf(slot, sizeof slot, "hostexec%zu", idx);
    _cleanup_close_ int cwd_fd = -EBADF;
    _cleanup_close_pair_ int po[2] = { -EBADF, -EBADF };
    _cleanup_close_pair_ int pe[2] = { -EBADF, -EBADF };
    _cleanup_close_pair_ int pi[2] = { -EBADF, -EBADF };
    int r = lz_hostexec_resolve(argv[0], &q->ident, &err);
    if (r == 0 && shown && !lz_hostexec_ident_equal(&q->ident, shown))
        r = lz_error_set(&err, -ESTALE, "%s is no longer the file the prompt showed", argv[0]);
    if (r == 0 && q->want_fresh)
        r = fresh_begin(e, q, &cwd_fd, &err);
    else if (r == 0)
        r = lz_hostexec_cwd(e->ws_fd, "/workspace", q->rec.request.cwd, &cwd_fd, &err);
    if (r == 0 && !q->want_fresh) {
        const char *c = q->rec.request.cwd && *q->rec.request.cwd ? q->rec.request.cwd : "/workspace";
        q->host_cwd = lz_xasprintf("%s%s", h->cfg->workspace, c + strlen("/workspace"));
    }
    put_decision(h, q, d, argv, argc);
    struct session *s = h->esc->port.session_by_id(h, q->session);
    const char *term = s ? hc_esc_host_term(s, q->rec.request.terminal && !q->rec.request.stdin_wanted) : NULL;
    _cleanup_close_ int pty_slave = -EBADF;
    if (r == 0 && term)
        r = open_pty(s, &po[0], &pty_slave, &err);
    else if (r == 0 && (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0))
        r = lz_error_errno(&err, -errno, "cannot create the output pipes");
    /* --stdin: a pipe (the client's chunks, stdin_feed); otherwise /dev/null
     * or, on a terminal, the host PTY (never both: see hc_esc_host_term). */
    if (r == 0 && q->in_on && pipe2(pi, O_CLOEXEC) < 0)
        r = lz_error_errno(&err, -errno, "cannot create the stdin pipe");
    _cleanup_env_ char **envp = lz_hostexec_env(term);
    struct lz_hostexec_spec spec = { .id = &q->ident,
                                     .argv = argv,
                                     .envp = envp,
                                     .cwd_fd = cwd_fd,
                                     .stdin_fd = term ? pty_slave
                                         : q->in_on   ? pi[0]
                                                      : -1,
                                     .stdout_fd = term ? pty_slave : po[1],
                                     .stderr_fd = term ? pty_slave : pe[1],
                                     .ctty = term != NULL };
    if (r == 0)
        r = lz_hostexec_start(&spec, &q->child, &err);
    struct lz_procid pid_id;
    if (r == 0 && (r = lz_procid_from_pidfd(q->child.pidfd, q->child.pid, &pid_id)) < 0)
        lz_error_errno(&err, r, "cannot identify the host process");
    if (r == 0 && (r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_SANDBOX, slot, "staged", &pid_id, &err)) < 0)
        lz_error_prefix(&err, r, "cannot record the host process");
    if (r == 0) {
        lz_crash_point("hostexec-staged");
        if ((r = lz_child_release(&q->child)) < 0)
            lz_error_set(&err, r, "cannot run %s: %s", q->ident.path, strerror(-r));
    }
    if (r == 0)
        (void)lz_store_proc_set(h->st, h->gen, LZ_ROLE_SANDBOX, slot, "committed", &pid_id, NULL);
    if (r < 0) {
        if (q->child.pidfd >= 0) {
            int st;
            lz_hostexec_kill(&q->child, ESC_KILL_WAIT_MS, &st);
            lz_child_close(&q->child);
        }
        hc_model_action(HC_FAIL_HOST_EXECUTION, "r=%.12s, s=%d", q->hex, q->session);
        hc_log("escalation: request %.12s failed: %s", q->hex, err.msg);
        end_request(h, q, LZ_OUTCOME_FAILED, 0, 0);
        return;
    }
    q->out_r = TAKE_FD(po[0]);
    q->err_r = TAKE_FD(pe[0]);
    lz_closep(&pty_slave); /* the master reads EIO once the host process's side is closed */
    if (q->in_on) {
        /* Only the host process holds the read end: its exit is EPIPE here. */
        lz_closep(&pi[0]);
        q->in_w = TAKE_FD(pi[1]);
        fcntl(q->in_w, F_SETFL, O_NONBLOCK);
    }
    fcntl(q->out_r, F_SETFL, O_NONBLOCK);
    if (q->err_r >= 0)
        (void)fcntl(q->err_r, F_SETPIPE_SZ, ESC_PIPE_SIZE);
    if (!term)
        (void)fcntl(q->out_r, F_SETPIPE_SZ, ESC_PIPE_SIZE); /* best effort: see pump() */
    ep_add(e, q->out_r, EV_OUT, idx);
    if (q->err_r >= 0) {
        fcntl(q->err_r, F_SETFL, O_NONBLOCK);
        ep_add(e, q->err_r, EV_ERR, idx);
    }
    ep_add(e, q->child.pidfd, EV_PID, idx);
    q->route = term && h->esc->port.route_begin(h, q->session, q->id, q->out_r) == 0;
    q->phase = EP_EXECUTING;
    uint32_t t = q->rec.request.timeout_s ? q->rec.request.timeout_s : ESC_DEFAULT_TIMEOUT_S;
    q->deadline = lz_now_ms() + (long)t * 1000;
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
    stdin_feed(h, q); /* the chunks that waited for the approval */
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
    put_decision(h, q, LZ_DECISION_DENIED, NULL, 0);
    hc_log("escalation: request %.12s: %s", q->hex, why);
    end_request(h, q, outcome, 0, 0);
}

/* ---- streaming ---- */

static void set_window(struct lz_esc *e, struct esc_req *q, bool open) {
    size_t idx = (size_t)(q - e->req);
    int fds[2] = { q->out_r, q->err_r };
    uint32_t kinds[2] = { EV_OUT, EV_ERR };
    for (int k = 0; k < 2; k++) {
        if (fds[k] < 0)
            continue;
        struct epoll_event ev = { .events = open ? EPOLLIN : 0, .data.u64 = (uint64_t)kinds[k] << 32 | idx };
        (void)epoll_ctl(e->ep_fd, EPOLL_CTL_MOD, fds[k], &ev);
    }
    q->window_paused = !open;
}

static void pump(struct hc *h, struct esc_req *q, int *fdp, enum lz_stream stream) {
    static uint8_t buf[LZ_RECORD_CHUNK_MAX];
    while (*fdp >= 0 && q->sent - q->acked < ESC_WINDOW) {
        size_t want = sizeof buf;
        if (q->route) {
            /* Also shown on the session's terminal: no faster than it goes. */
            size_t room = h->esc->port.route_room(h, q->session);
            if (room == 0) {
                set_window(h->esc, q, false);
                return;
            }
            if (room < want)
                want = room;
            stream = LZ_STREAM_TERMINAL;
        }
        /* Fill the chunk from what the pipe holds now; a short one goes
         * out at once (interactive output is not held back). */
        size_t have = 0;
        bool eof = false;
        while (have < want) {
            ssize_t n = read(*fdp, buf + have, want - have);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                break;
            if (n <= 0) { /* EOF; EIO on a PTY master once its other side is closed */
                eof = true;
                break;
            }
            have += (size_t)n;
        }
        if (have > 0) {
            struct lz_record rec = { .kind = LZ_REC_RESULT_CHUNK };
            rec.chunk.seq = q->sent++;
            rec.chunk.stream = stream;
            rec.chunk.data = buf;
            rec.chunk.len = have;
            q->out_bytes += (uint64_t)have;
            if (q->route)
                h->esc->port.route_output(h, q->session, buf, have);
            put(h, q, &rec);
        }
        if (eof) {
            lz_closep(fdp); /* closing removes it from the epoll set */
            return;
        }
        if (have < want)
            return; /* drained: the next EPOLLIN */
    }
    if (*fdp >= 0 && q->sent - q->acked >= ESC_WINDOW)
        set_window(h->esc, q, false);
}

/* The host process exited: the rest of its group goes (no host process
 * outlives its request), then the pipes drain through the window. */
static bool reap(struct esc_req *q) {
    if (q->child.pid > 0)
        (void)kill(-q->child.pid, SIGKILL); /* not reaped yet: still its group's ID */
    siginfo_t si = { 0 };
    /* waitid, not lz_child_try_reap: exit 130 and SIGINT must stay apart. */
    if (waitid((idtype_t)3 /* P_PIDFD */, (id_t)q->child.pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
        return false;
    q->exit_status = si.si_code == CLD_EXITED ? si.si_status : 0;
    q->exit_sig = si.si_code == CLD_EXITED ? 0 : si.si_status;
    lz_child_close(&q->child);
    return true;
}

static void try_finish(struct hc *h, struct esc_req *q) {
    if (q->phase != EP_EXECUTING || q->child.pidfd >= 0 || q->out_r >= 0 || q->err_r >= 0)
        return;
    route_end(h, q);
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
        set_window(h->esc, q, true);
        pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
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

static struct esc_req *find_req(struct lz_esc *e, const uint8_t id[LZ_RECORD_ID_LEN]) {
    for (size_t i = 0; i < ESC_MAX_REQ; i++)
        if (e->req[i].phase != EP_FREE && !memcmp(e->req[i].id, id, LZ_RECORD_ID_LEN))
            return &e->req[i];
    return NULL;
}

static long prompt_timeout_ms(const struct hc *h) {
    return h->cfg->escalation_prompt_timeout_s > 0 ? (long)h->cfg->escalation_prompt_timeout_s * 1000
                                                   : ESC_PROMPT_TIMEOUT_MS;
}

static void reject(const char *name, const char *why) { hc_log("escalation: rejected %s: %s", name, why); }

/* Verifies a taken entry with the key of the session the record names (the
 * signature then decides: a record naming session A signed with B's key
 * fails). 0 with the session and the record, or -1 (rejected, logged). */
static int open_entry(struct hc *h, const char *name, const uint8_t *buf, size_t len, unsigned kind,
                      struct session **ret_s, struct lz_record *ret) {
    if (len < LZ_RECORD_HDR + 2 * LZ_RECORD_ID_LEN) {
        reject(name, "truncated record");
        return -1;
    }
    struct session *s = h->esc->port.session_by_sid(h, buf + LZ_RECORD_HDR + LZ_RECORD_ID_LEN);
    if (!s) {
        reject(name, "unknown or closed session");
        return -1;
    }
    struct lz_error err = { 0 };
    if (lz_record_open(s->anchor->pk, buf, len, LZ_REC_MASK(kind), ret, &err) < 0) {
        reject(name, err.msg);
        return -1;
    }
    *ret_s = s;
    return 0;
}

static void on_request(struct hc *h, struct session *s, const char *name, struct lz_record *rec, const uint8_t *bytes,
                       size_t len) {
    struct lz_esc *e = h->esc;
    int64_t now = wall_ms();
    if (seen_before(e, rec->request_id)) {
        reject(name, "replayed request ID");
        return;
    }
    if (e->n_seen >= ESC_MAX_SEEN) {
        reject(name, "too many requests in this generation");
        return;
    }
    if (e->n_seen % 1024 == 0)
        e->seen = lz_xrealloc(e->seen, (e->n_seen + 1024) * sizeof *e->seen);
    memcpy(e->seen[e->n_seen++], rec->request_id, LZ_RECORD_ID_LEN);
    if ((int64_t)rec->request.created_ms > now + ESC_SKEW_MS || (int64_t)rec->request.expires_ms < now ||
        rec->request.expires_ms - rec->request.created_ms > ESC_MAX_VALID_MS) {
        reject(name, "expired (or not yet valid, or valid for too long)");
        return;
    }
    for (size_t i = 0; i < ESC_MAX_REQ; i++)
        if ((e->req[i].phase == EP_PROMPT || e->req[i].phase == EP_EXECUTING) && e->req[i].session == s->id) {
            /* One active request per session (the model's activeRequest). */
            reject(name, "its session already has an active request");
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
        reject(name, "too many requests at once");
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
    q->in_on = q->rec.request.stdin_wanted;
    hc_model_action(HC_RECEIVE_ESCALATION, "r=%.12s, s=%d", q->hex, q->session);
    hc_log("escalation: request %.12s from session %d: %zu arguments, argv[0] %s", q->hex, q->session,
           q->rec.request.argc, q->rec.request.argv[0]);
    struct lz_record ack = { .kind = LZ_REC_REQUEST_ACK };
    lz_record_digest(bytes, len, ack.ack.request_digest);
    ack.ack.received_ms = (uint64_t)now;
    ack.ack.decide_by_ms = (uint64_t)now + (uint64_t)prompt_timeout_ms(h);
    put(h, q, &ack);

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
    if (precheck_cwd(h, q, &cerr) < 0) {
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
        reject(name, "chunk-ack outside the window");
        return;
    }
    remove_results(h->esc, q, q->acked, next, false);
    q->acked = next;
    if (q->phase == EP_EXECUTING && q->window_paused && q->sent - q->acked < ESC_WINDOW) {
        set_window(h->esc, q, true);
        /* What the pipes hold now is read at once, not on the next wake. */
        pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
        pump(h, q, &q->err_r, LZ_STREAM_STDERR);
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
        on_stdin_entry(h, name, &mn); /* taken in order, when there is room */
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
    if (open_entry(h, name, buf, len, mn.kind, &s, &rec) < 0)
        return;
    if (memcmp(rec.request_id, mn.request_id, LZ_RECORD_ID_LEN) != 0 || (mn.kind != LZ_REC_CHUNK_ACK && mn.seq != 0)) {
        reject(name, "the name does not match the record");
        lz_record_clear(&rec);
        return;
    }
    if (mn.kind == LZ_REC_ESCALATION_REQUEST) {
        on_request(h, s, name, &rec, buf, len);
        lz_record_clear(&rec);
        return;
    }
    struct esc_req *q = find_req(e, rec.request_id);
    if (!q || q->session != s->id || memcmp(q->sid, rec.session_id, LZ_RECORD_ID_LEN) != 0) {
        reject(name, "no such request of this session");
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
            if ((strstr(names[i], ".escalation-request.") != NULL) == (pass == 0))
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
            pump(h, q, &q->out_r, LZ_STREAM_STDOUT);
        else if (kind == EV_ERR)
            pump(h, q, &q->err_r, LZ_STREAM_STDERR);
        else if (kind == EV_IN)
            stdin_feed(h, q);
        else if (kind == EV_PID && q->child.pidfd >= 0) {
            /* Out of the set before reap closes the pidfd. */
            (void)epoll_ctl(e->ep_fd, EPOLL_CTL_DEL, q->child.pidfd, NULL);
            if (!reap(q))
                ep_add(e, q->child.pidfd, EV_PID, idx);
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
