/* escalation_exec.c — below the request life cycle of escalation.c
 * (escalation_int.h): the records the coordinator writes to the sandbox,
 * the verification of the records it takes, the host process of an
 * approved request (its identity, working directory, terminal or pipes,
 * its durable record), the result chunks through the window of at most
 * ESC_WINDOW unacknowledged ones, and its stdin (--stdin). Nothing here
 * decides a request's fate or logs a model action: what ends a request is
 * escalation.c's. */
#include "escalation_int.h"
#include "procenv.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

int64_t esc_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int esc_ep_add(struct lz_esc *e, int fd, uint32_t kind, size_t idx) {
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)kind << 32 | idx };
    return epoll_ctl(e->ep_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* ---- records to the sandbox ---- */

void esc_put(struct hc *h, struct esc_req *q, struct lz_record *rec) {
    struct lz_error err = { 0 };
    memcpy(rec->request_id, q->id, LZ_RECORD_ID_LEN);
    memcpy(rec->session_id, q->sid, LZ_RECORD_ID_LEN);
    if (lz_mbox_put_record(h->esc->res_fd, h->esc->ta->sk, rec, &err) < 0)
        hc_log("escalation: request %.12s: %s", q->hex, err.msg);
}

void esc_put_decision(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc) {
    struct lz_record rec = { .kind = LZ_REC_DEVELOPER_DECISION };
    rec.decision.decision = d;
    rec.decision.argv = (char **)argv;
    rec.decision.argc = d == LZ_DECISION_DENIED ? 0 : argc;
    rec.decision.decided_ms = (uint64_t)esc_wall_ms();
    esc_put(h, q, &rec);
}

void esc_remove_results(struct lz_esc *e, struct esc_req *q, uint64_t from_seq, uint64_t to_seq, bool all) {
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
 * for its bytes (esc_stdin_feed), so the entries still in req/ are the client's
 * window (it writes seq N once seq N - LZ_RECORD_STDIN_WINDOW is gone) and
 * the coordinator holds at most one chunk per request. Chunks that arrive
 * before the request is approved wait there; entries named outside
 * [in_next, in_next + window), duplicates, anything after the eof chunk
 * and entries of a request that did not ask for stdin are removed on
 * arrival (esc_on_stdin_entry). The request's end removes what still waits. */

void esc_remove_req_entry(struct lz_esc *e, const char *name) {
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
void esc_stdin_end(struct hc *h, struct esc_req *q) {
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
            esc_remove_req_entry(e, name);
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
    if (esc_open_entry(h, name, buf, len, LZ_REC_STDIN_CHUNK, &s, &rec) < 0)
        return -1;
    if (s->id != q->session || memcmp(rec.request_id, q->id, LZ_RECORD_ID_LEN) != 0 ||
        memcmp(rec.session_id, q->sid, LZ_RECORD_ID_LEN) != 0 || rec.stdin_chunk.seq != q->in_next) {
        esc_reject(name, "the name does not match the record");
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
void esc_stdin_feed(struct hc *h, struct esc_req *q) {
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
void esc_on_stdin_entry(struct hc *h, const char *name, const struct lz_mbox_name *mn) {
    struct lz_esc *e = h->esc;
    /* Gone already: taken by esc_stdin_feed before this event was read, or a
     * second event for one entry (the sandbox's file system may report a
     * rename as more than one event). */
    struct stat st;
    if (fstatat(e->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    struct esc_req *q = esc_find_req(e, mn->request_id);
    if (q && q->phase == EP_ENDED) {
        /* What the client sent before it saw the end: not logged. */
        esc_remove_req_entry(e, name);
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
        esc_remove_req_entry(e, name);
        esc_reject(name, why);
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
        esc_stdin_feed(h, q);
}

/* The terminal goes back to the sandbox (before its PTY master closes). */
void esc_route_end(struct hc *h, struct esc_req *q) {
    if (!q->route)
        return;
    q->route = false;
    h->esc->port.route_end(h, q->session, q->id);
}

void esc_stop_process(struct hc *h, struct esc_req *q, int *status) {
    esc_route_end(h, q);
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

/* The fresh working directory goes with its request, whatever the host
 * process left in it (its process group is gone by now); what it wrote
 * there is not kept (docs/escalation.md). */
void esc_fresh_end(struct lz_esc *e, struct esc_req *q) {
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

/* ---- execution ---- */

/* The working directory is checked when the request arrives, with the
 * executor's own check (lz_hostexec_cwd), so that a request that would be
 * refused at execution never reaches the developer's screen. */
int esc_precheck_cwd(struct hc *h, struct esc_req *q, struct lz_error *err) {
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

int esc_exec_start(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc,
                   const struct lz_hostexec_ident *shown, struct lz_error *err) {
    struct lz_esc *e = h->esc;
    size_t idx = (size_t)(q - e->req);
    char slot[32];
    snprintf(slot, sizeof slot, "hostexec%zu", idx);
    _cleanup_close_ int cwd_fd = -EBADF;
    _cleanup_close_pair_ int po[2] = { -EBADF, -EBADF };
    _cleanup_close_pair_ int pe[2] = { -EBADF, -EBADF };
    _cleanup_close_pair_ int pi[2] = { -EBADF, -EBADF };
    int r = lz_hostexec_resolve(argv[0], &q->ident, err);
    if (r == 0 && shown && !lz_hostexec_ident_equal(&q->ident, shown))
        r = lz_error_set(err, -ESTALE, "%s is no longer the file the prompt showed", argv[0]);
    if (r == 0 && q->want_fresh)
        r = fresh_begin(e, q, &cwd_fd, err);
    else if (r == 0)
        r = lz_hostexec_cwd(e->ws_fd, "/workspace", q->rec.request.cwd, &cwd_fd, err);
    if (r == 0 && !q->want_fresh) {
        const char *c = q->rec.request.cwd && *q->rec.request.cwd ? q->rec.request.cwd : "/workspace";
        q->host_cwd = lz_xasprintf("%s%s", h->cfg->workspace, c + strlen("/workspace"));
    }
    esc_put_decision(h, q, d, argv, argc);
    struct session *s = h->esc->port.session_by_id(h, q->session);
    const char *term = s ? hc_esc_host_term(s, q->rec.request.terminal && !q->rec.request.stdin_wanted) : NULL;
    _cleanup_close_ int pty_slave = -EBADF;
    if (r == 0 && term)
        r = open_pty(s, &po[0], &pty_slave, err);
    else if (r == 0 && (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0))
        r = lz_error_errno(err, -errno, "cannot create the output pipes");
    /* --stdin: a pipe (the client's chunks, esc_stdin_feed); otherwise /dev/null
     * or, on a terminal, the host PTY (never both: see hc_esc_host_term). */
    if (r == 0 && q->in_on && pipe2(pi, O_CLOEXEC) < 0)
        r = lz_error_errno(err, -errno, "cannot create the stdin pipe");
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
        r = lz_hostexec_start(&spec, &q->child, err);
    struct lz_procid pid_id;
    if (r == 0 && (r = lz_procid_from_pidfd(q->child.pidfd, q->child.pid, &pid_id)) < 0)
        lz_error_errno(err, r, "cannot identify the host process");
    if (r == 0 && (r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_SANDBOX, slot, "staged", &pid_id, err)) < 0)
        lz_error_prefix(err, r, "cannot record the host process");
    if (r == 0) {
        lz_crash_point("hostexec-staged");
        if ((r = lz_child_release(&q->child)) < 0)
            lz_error_set(err, r, "cannot run %s: %s", q->ident.path, strerror(-r));
    }
    if (r == 0)
        (void)lz_store_proc_set(h->st, h->gen, LZ_ROLE_SANDBOX, slot, "committed", &pid_id, NULL);
    if (r < 0) {
        if (q->child.pidfd >= 0) {
            int st;
            lz_hostexec_kill(&q->child, ESC_KILL_WAIT_MS, &st);
            lz_child_close(&q->child);
        }
        return r;
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
        (void)fcntl(q->out_r, F_SETPIPE_SZ, ESC_PIPE_SIZE); /* best effort: see esc_pump() */
    esc_ep_add(e, q->out_r, EV_OUT, idx);
    if (q->err_r >= 0) {
        fcntl(q->err_r, F_SETFL, O_NONBLOCK);
        esc_ep_add(e, q->err_r, EV_ERR, idx);
    }
    esc_ep_add(e, q->child.pidfd, EV_PID, idx);
    q->route = term && h->esc->port.route_begin(h, q->session, q->id, q->out_r) == 0;
    q->phase = EP_EXECUTING;
    uint32_t t = q->rec.request.timeout_s ? q->rec.request.timeout_s : ESC_DEFAULT_TIMEOUT_S;
    q->deadline = lz_now_ms() + (long)t * 1000;
    return 0;
}

/* ---- streaming ---- */

void esc_set_window(struct lz_esc *e, struct esc_req *q, bool open) {
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

void esc_pump(struct hc *h, struct esc_req *q, int *fdp, enum lz_stream stream) {
    static uint8_t buf[LZ_RECORD_CHUNK_MAX];
    while (*fdp >= 0 && q->sent - q->acked < ESC_WINDOW) {
        size_t want = sizeof buf;
        if (q->route) {
            /* Also shown on the session's terminal: no faster than it goes. */
            size_t room = h->esc->port.route_room(h, q->session);
            if (room == 0) {
                esc_set_window(h->esc, q, false);
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
            esc_put(h, q, &rec);
        }
        if (eof) {
            lz_closep(fdp); /* closing removes it from the epoll set */
            return;
        }
        if (have < want)
            return; /* drained: the next EPOLLIN */
    }
    if (*fdp >= 0 && q->sent - q->acked >= ESC_WINDOW)
        esc_set_window(h->esc, q, false);
}

/* The host process exited: the rest of its group goes (no host process
 * outlives its request), then the pipes drain through the window. */
bool esc_reap(struct esc_req *q) {
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

struct esc_req *esc_find_req(struct lz_esc *e, const uint8_t id[LZ_RECORD_ID_LEN]) {
    for (size_t i = 0; i < ESC_MAX_REQ; i++)
        if (e->req[i].phase != EP_FREE && !memcmp(e->req[i].id, id, LZ_RECORD_ID_LEN))
            return &e->req[i];
    return NULL;
}

void esc_reject(const char *name, const char *why) { hc_log("escalation: rejected %s: %s", name, why); }

/* Verifies a taken entry with the key of the session the record names (the
 * signature then decides: a record naming session A signed with B's key
 * fails). 0 with the session and the record, or -1 (rejected, logged). */
int esc_open_entry(struct hc *h, const char *name, const uint8_t *buf, size_t len, unsigned kind,
                   struct session **ret_s, struct lz_record *ret) {
    if (len < LZ_RECORD_HDR + 2 * LZ_RECORD_ID_LEN) {
        esc_reject(name, "truncated record");
        return -1;
    }
    struct session *s = h->esc->port.session_by_sid(h, buf + LZ_RECORD_HDR + LZ_RECORD_ID_LEN);
    if (!s) {
        esc_reject(name, "unknown or closed session");
        return -1;
    }
    struct lz_error err = { 0 };
    if (lz_record_open(s->anchor->pk, buf, len, LZ_REC_MASK(kind), ret, &err) < 0) {
        esc_reject(name, err.msg);
        return -1;
    }
    *ret_s = s;
    return 0;
}
