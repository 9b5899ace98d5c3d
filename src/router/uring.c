/* uring.c — the router's FUSE transport: /dev/fuse, or FUSE over io_uring
 * when the kernel offers it (docs/notes/2026-12-04-fuse-io-uring.md, the
 * measurement; 2026-12-05-router-transport.md, this transport).
 *
 * Why: on a VM, handing a request to another vCPU costs ~220 µs, ten times
 * the round trip on one CPU. Classic /dev/fuse wakes whichever reader
 * waits; with io_uring the kernel puts a request on the queue of the CPU
 * its requester runs on, and queue q's thread here is pinned to CPU q, so
 * every hand-off stays on its CPU.
 *
 * How, under libfuse 3.14 (which has no io_uring), with the operations
 * unchanged:
 *   - fuse_session_custom_io: the session's read sees the INIT request
 *     (whether the kernel offers io_uring) and its writev the replies;
 *   - the INIT reply gets FUSE_OVER_IO_URING in flags2 only when the
 *     kernel offered it and every queue's ring, buffers and thread exist
 *     already (once agreed, the kernel holds every request until each
 *     queue registered, or until a REGISTER fails, which turns io_uring
 *     off for the connection: its own fallback to /dev/fuse);
 *   - one thread per possible CPU (the kernel's queue count), pinned to
 *     it when the router may run there, with an SQE128 ring and
 *     RT_URING_DEPTH entries; a completion is a request: its classic
 *     layout is rebuilt in front of the payload (fusering.h), libfuse's
 *     fuse_session_process_buf runs the operation, the writev hook puts
 *     the reply into the entry, and COMMIT_AND_FETCH sends it and waits
 *     for the next request in one step;
 *   - one mutex around every operation (`serve`): the operations have only
 *     ever run on one thread; requests are still served on their CPU;
 *   - /dev/fuse stays read on the main thread: FORGET and INTERRUPT come
 *     there, its end (ENODEV) is how unmount is noticed, and the
 *     watcher's notifications (unique 0) are written there.
 * Every operation replies before it returns (none keeps a fuse_req_t), so
 * the reply of an entry's request is always written during its
 * process_buf, on its thread.
 */
#include "router_int.h"

#include "fusering.h"

#include <liburing.h>
#include <sched.h>
#include <sys/sysinfo.h>

#define RT_URING_DEPTH 2 /* entries per queue */
#define RT_URING_MAX_QUEUES 1024
#define RT_URING_WAIT_MS 1000        /* a queue thread looks at `stop` this often (else stop_fd wakes it) */
#define RT_URING_STOP_TAG UINT64_MAX /* user_data of the poll on stop_fd */
#define RT_URING_GO_MS 30000         /* a queue thread waits this long for the INIT reply */
#define RT_URING_REG_MS 5000         /* the main thread waits this long for the REGISTERs */
#define RT_INIT_MS 10000             /* the INIT request, queued by the mount itself */
#define RT_URING_ERRORS 100          /* ring errors in a row before a queue thread gives up */
#define RT_URING_SUBMIT_TRIES 1000   /* a submission refused for a moment (EAGAIN, EBUSY) is retried */

struct ent {
    char *mem; /* LZ_FRING_ROOM, then the payload */
    struct lz_fuse_uring_req_header *hdr;
    char *payload;
    struct iovec iov[2];
    uint64_t unique; /* of the request being served */
    bool replied;
    bool dead; /* its command ended (unmount) */
    /* The command in flight, sent again when the kernel asks (a
     * completion with -EAGAIN or -EINTR). */
    uint32_t last_op;
    uint64_t last_commit;
};

struct queue {
    unsigned qid;
    struct io_uring ring;
    bool ring_ok;
    pthread_t thread;
    bool started;
    struct ent ent[RT_URING_DEPTH];
};

static struct {
    struct router *r;
    struct fuse_session *se;
    int fd;
    int stop_fd; /* an eventfd: written once at stop; each queue polls it */
    enum rt_transport_mode mode;
    /* INIT, seen by the read hook (main thread, before anything else) */
    bool init_seen;
    uint64_t init_unique;
    bool offered;
    bool agreed; /* flag set in the INIT reply: the queues exist */
    int prep_err;
    /* the queues */
    struct queue *q;
    unsigned nq;
    size_t payload_cap;
    pthread_mutex_t serve; /* every operation runs under it with io_uring */
    bool serving_locked;   /* the main thread holds it until the session loop */
    pthread_mutex_t m;     /* the fields below */
    pthread_cond_t cv;
    bool go, stop;
    unsigned n_reported, n_registered;
    int reg_err;
    unsigned long n_bad;        /* entries whose lengths disagreed */
    unsigned long break_commit; /* tests: the reply whose commit ID is broken (0: none) */
    unsigned long n_commits;
} U = {
    .fd = -1,
    .stop_fd = -1,
    .serve = PTHREAD_MUTEX_INITIALIZER,
    .m = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

static __thread struct ent *cur_ent;

static int rt_uring_prepare(void);

/* ---- the session's I/O ---- */

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    if (n < 0 || U.init_seen)
        return n;
    const struct fuse_in_header *in = buf;
    if ((size_t)n >= sizeof *in + offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t) && in->opcode == FUSE_INIT) {
        const struct fuse_init_in *ii = (const void *)(in + 1);
        U.init_seen = true;
        U.init_unique = in->unique;
        U.offered = (ii->flags & FUSE_INIT_EXT) && (ii->flags2 & (uint32_t)(LZ_FUSE_OVER_IO_URING >> 32));
        if (U.offered && U.mode == RT_TRANSPORT_AUTO) {
            int e = rt_uring_prepare();
            U.agreed = e == 0;
            U.prep_err = e;
        }
    }
    return n;
}

static void signal_go(void) {
    pthread_mutex_lock(&U.m);
    U.go = true;
    pthread_cond_broadcast(&U.cv);
    pthread_mutex_unlock(&U.m);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    struct ent *e = cur_ent;
    if (e && count >= 1 && iov[0].iov_len == sizeof(struct fuse_out_header)) {
        struct fuse_out_header oh;
        memcpy(&oh, iov[0].iov_base, sizeof oh);
        if (oh.unique == e->unique && !e->replied) {
            size_t total = 0;
            for (int i = 0; i < count; i++)
                total += iov[i].iov_len;
            if (lz_fring_reply(e->hdr, e->payload, U.payload_cap, iov, count) < 0)
                lz_fring_error(e->hdr, oh.unique, -EIO);
            e->replied = true;
            return (ssize_t)total;
        }
    }
    bool init_reply = false;
    if (U.agreed && count >= 2 && iov[0].iov_len == sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t)) {
        struct fuse_out_header oh;
        memcpy(&oh, iov[0].iov_base, sizeof oh);
        struct fuse_init_out *io = iov[1].iov_base;
        long page = sysconf(_SC_PAGESIZE);
        size_t pages = (io->flags & FUSE_MAX_PAGES) ? io->max_pages : 32;
        /* The kernel wants entries of max(max_write, max_pages pages). */
        if (oh.unique == U.init_unique && oh.error == 0 && io->max_write <= U.payload_cap &&
            pages * (size_t)(page > 0 ? page : 4096) <= U.payload_cap) {
            io->flags |= FUSE_INIT_EXT;
            io->flags2 |= (uint32_t)(LZ_FUSE_OVER_IO_URING >> 32);
            init_reply = true;
        } else if (oh.unique == U.init_unique) {
            U.agreed = false;
            U.prep_err = -EMSGSIZE;
        }
    }
    ssize_t n = writev(fd, iov, count);
    if (init_reply) {
        if (n < 0)
            U.agreed = false;
        else
            signal_go();
    }
    return n;
}

/* ---- the queues ---- */

static void prep_cmd(struct queue *q, unsigned i, uint32_t op, uint64_t commit_id) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    /* The ring has twice the entries' count of SQEs, and each entry has
     * at most one command in flight. */
    if (!sqe)
        abort();
    q->ent[i].last_op = op;
    q->ent[i].last_commit = commit_id;
    memset(sqe, 0, 128); /* SQE128 */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = U.fd;
    sqe->cmd_op = op;
    sqe->addr = (uint64_t)(uintptr_t)q->ent[i].iov;
    sqe->len = 2;
    sqe->user_data = i;
    struct lz_fuse_uring_cmd_req req = { .commit_id = commit_id, .qid = (uint16_t)q->qid };
    memcpy(sqe->cmd, &req, sizeof req);
}

/* One request of entry i: its operation, then its reply committed and the
 * next request fetched. */
static void serve_one(struct queue *q, unsigned i) {
    struct ent *e = &q->ent[i];
    uint64_t commit_id = e->hdr->ring_ent_in_out.commit_id;
    char *req;
    size_t len;
    e->unique = lz_fring_unique(e->hdr);
    e->replied = false;
    if (lz_fring_request(e->hdr, e->payload, U.payload_cap, &req, &len) < 0) {
        __atomic_add_fetch(&U.n_bad, 1, __ATOMIC_RELAXED);
        lz_fring_error(e->hdr, e->unique, -EIO);
    } else {
        struct fuse_buf fb = { .size = len, .mem = req };
        cur_ent = e;
        pthread_mutex_lock(&U.serve);
        fuse_session_process_buf(U.se, &fb);
        pthread_mutex_unlock(&U.serve);
        cur_ent = NULL;
        /* Every request on the ring wants a reply (FORGET and INTERRUPT
         * come on /dev/fuse); one never given would hang its caller. */
        if (!e->replied)
            lz_fring_error(e->hdr, e->unique, -EIO);
    }
    if (U.break_commit && __atomic_add_fetch(&U.n_commits, 1, __ATOMIC_RELAXED) == U.break_commit)
        commit_id = ~commit_id;
    prep_cmd(q, i, LZ_FUSE_IO_URING_CMD_COMMIT_AND_FETCH, commit_id);
}

/* Everything queued in the submission ring, sent: a submission the kernel
 * refuses for a moment is tried again (bounded); a commit left unsent
 * would hold its request's reply, and its caller, until another request
 * came to this queue. False when the ring refuses for good. */
static bool submit_all(struct queue *q) {
    for (int tries = 0; tries < RT_URING_SUBMIT_TRIES; tries++) {
        if (io_uring_sq_ready(&q->ring) == 0)
            return true;
        int rc = io_uring_submit(&q->ring);
        if (rc >= 0)
            continue;
        if (rc != -EAGAIN && rc != -EINTR && rc != -EBUSY)
            return false;
        (void)nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    return io_uring_sq_ready(&q->ring) == 0;
}

/* A queue that cannot go on would leave every request of its CPU waiting
 * forever (a FLUSH's caller cannot even be killed): the FUSE session is
 * ended instead, as SIGTERM does (the main thread's loop), so that the
 * kernel ends every request with an error and the Supervisor sees its
 * router gone: the Domain fails, loudly. */
static void queue_fatal(struct queue *q, const char *what, int err) {
    fprintf(stderr, "lazaret-router: io_uring queue %u: %s: %s; ending the FUSE session\n", q->qid, what,
            strerror(err < 0 ? -err : err));
    (void)kill(getpid(), SIGTERM);
}

static void report(int err) {
    pthread_mutex_lock(&U.m);
    U.n_reported++;
    if (err == 0)
        U.n_registered++;
    else if (U.reg_err == 0)
        U.reg_err = err;
    pthread_cond_broadcast(&U.cv);
    pthread_mutex_unlock(&U.m);
}

static bool stopping(void) {
    pthread_mutex_lock(&U.m);
    bool s = U.stop;
    pthread_mutex_unlock(&U.m);
    return s;
}

static void *queue_main(void *arg) {
    struct queue *q = arg;
    /* Until the INIT reply is out: REGISTER before it gets EAGAIN. */
    pthread_mutex_lock(&U.m);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += RT_URING_GO_MS / 1000;
    while (!U.go && !U.stop)
        if (pthread_cond_timedwait(&U.cv, &U.m, &until) == ETIMEDOUT)
            break;
    bool go = U.go && !U.stop;
    pthread_mutex_unlock(&U.m);
    if (!go)
        return NULL;
    /* On its CPU when the router may run there (a cpuset may not let it). */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(q->qid, &set);
    (void)sched_setaffinity(0, sizeof set, &set);

    for (unsigned i = 0; i < RT_URING_DEPTH; i++)
        prep_cmd(q, i, LZ_FUSE_IO_URING_CMD_REGISTER, 0);
    /* The stop, at once rather than at the next timeout: the teardown of
     * a Domain waits for its routers. */
    struct io_uring_sqe *psqe = io_uring_get_sqe(&q->ring);
    unsigned want = RT_URING_DEPTH;
    if (psqe) {
        memset(psqe, 0, 128);
        io_uring_prep_poll_add(psqe, U.stop_fd, POLLIN);
        psqe->user_data = RT_URING_STOP_TAG;
        want++;
    }
    int rc = io_uring_submit(&q->ring);
    if (rc >= 0 && rc != (int)want)
        rc = -EIO;
    /* A REGISTER that fails completes at once; one that works completes
     * only with a request. */
    struct io_uring_cqe *cqe;
    if (rc >= 0 && io_uring_peek_cqe(&q->ring, &cqe) == 0 && cqe->res < 0 && cqe->user_data != RT_URING_STOP_TAG) {
        rc = cqe->res;
        q->ent[cqe->user_data % RT_URING_DEPTH].dead = true;
        io_uring_cqe_seen(&q->ring, cqe);
    }
    report(rc < 0 ? rc : 0);
    if (rc < 0)
        return NULL;

    /* A queue thread that left would hang its CPU's requesters: errors of
     * the wait itself are retried, up to RT_URING_ERRORS in a row, and
     * then, as any error the kernel gives a command but "try again", end
     * the session (queue_fatal). */
    unsigned live = RT_URING_DEPTH, errors = 0;
    while (live > 0) {
        if (errors >= RT_URING_ERRORS) {
            queue_fatal(q, "waiting for requests keeps failing", rc);
            break;
        }
        struct __kernel_timespec ts = { .tv_sec = RT_URING_WAIT_MS / 1000,
                                        .tv_nsec = (RT_URING_WAIT_MS % 1000) * 1000000L };
        rc = io_uring_wait_cqe_timeout(&q->ring, &cqe, &ts);
        if (rc == -ETIME || rc == -EINTR) {
            if (stopping())
                break;
            continue;
        }
        if (rc < 0) {
            errors++;
            continue;
        }
        errors = 0;
        if (cqe->user_data == RT_URING_STOP_TAG) {
            io_uring_cqe_seen(&q->ring, cqe);
            if (stopping())
                break;
            continue;
        }
        unsigned i = (unsigned)(cqe->user_data % RT_URING_DEPTH);
        int res = cqe->res;
        io_uring_cqe_seen(&q->ring, cqe);
        if (res == -EAGAIN || res == -EINTR) {
            /* The kernel asks for the same command again. */
            prep_cmd(q, i, q->ent[i].last_op, q->ent[i].last_commit);
        } else if (res < 0) {
            if (!q->ent[i].dead) {
                q->ent[i].dead = true;
                live--;
            }
            /* -ENOTCONN, -ECANCELED, -ECONNABORTED: the connection ends
             * (unmount, teardown). A REGISTER the kernel refuses turns
             * io_uring off for the connection (its requests come on
             * /dev/fuse). Any other refused command, while the connection
             * lives, leaves this entry serving no more, and what waits
             * for it would wait forever. */
            if (q->ent[i].last_op == LZ_FUSE_IO_URING_CMD_REGISTER) {
                fprintf(stderr, "lazaret-router: io_uring queue %u: REGISTER failed: %s (requests come on /dev/fuse)\n",
                        q->qid, strerror(-res));
            } else if (res != -ENOTCONN && res != -ECANCELED && res != -ECONNABORTED && !stopping()) {
                queue_fatal(q, "COMMIT_AND_FETCH failed", res);
                break;
            }
            continue;
        } else {
            serve_one(q, i);
        }
        if (!submit_all(q)) {
            queue_fatal(q, "the ring refuses the next command", -EIO);
            break;
        }
    }
    return NULL;
}

static unsigned possible_cpus(void) {
    _cleanup_free_ char *text = NULL;
    unsigned n;
    if (lz_read_file_at(AT_FDCWD, "/sys/devices/system/cpu/possible", 4096, &text, NULL) == 0 &&
        lz_fring_possible_cpus(text, RT_URING_MAX_QUEUES - 1, &n) == 0)
        return n;
    int k = get_nprocs_conf();
    return k > 0 && k <= RT_URING_MAX_QUEUES ? (unsigned)k : 0;
}

static void free_queues(void) {
    for (unsigned k = 0; k < U.nq; k++) {
        struct queue *q = &U.q[k];
        if (q->ring_ok)
            io_uring_queue_exit(&q->ring);
        for (unsigned i = 0; i < RT_URING_DEPTH; i++)
            free(q->ent[i].mem);
    }
    free(U.q);
    U.q = NULL;
    U.nq = 0;
}

/* Everything that can fail, before the INIT reply agrees to io_uring:
 * the rings, the buffers, the threads (waiting for the reply). */
static int rt_uring_prepare(void) {
    unsigned nq = possible_cpus();
    if (nq == 0)
        return -ENOENT;
    U.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (U.stop_fd < 0)
        return -errno;
    U.payload_cap = RT_URING_MAX_WRITE;
    U.q = calloc(nq, sizeof *U.q);
    if (!U.q)
        return -ENOMEM;
    U.nq = nq;
    for (unsigned k = 0; k < nq; k++) {
        struct queue *q = &U.q[k];
        q->qid = k;
        struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
        int rc = io_uring_queue_init_params(2 * RT_URING_DEPTH, &q->ring, &p);
        if (rc < 0) {
            free_queues();
            return rc;
        }
        q->ring_ok = true;
        for (unsigned i = 0; i < RT_URING_DEPTH; i++) {
            struct ent *e = &q->ent[i];
            /* The header first, page-aligned; the payload after the room
             * where the classic layout is rebuilt. */
            size_t hdr_sz = 4096, size = hdr_sz + LZ_FRING_ROOM + U.payload_cap;
            if (posix_memalign((void **)&e->mem, 4096, size) != 0) {
                e->mem = NULL;
                free_queues();
                return -ENOMEM;
            }
            memset(e->mem, 0, hdr_sz + LZ_FRING_ROOM);
            e->hdr = (struct lz_fuse_uring_req_header *)e->mem;
            e->payload = e->mem + hdr_sz + LZ_FRING_ROOM;
            e->iov[0] = (struct iovec){ e->hdr, sizeof *e->hdr };
            e->iov[1] = (struct iovec){ e->payload, U.payload_cap };
        }
    }
    /* The main thread serves nothing on the ring until the session loop
     * (the ignored-state thread finishes first): it holds `serve`. */
    pthread_mutex_lock(&U.serve);
    U.serving_locked = true;
    for (unsigned k = 0; k < nq; k++) {
        int prc = lz_thread_start_blocked(&U.q[k].thread, queue_main, &U.q[k]);
        if (prc != 0) {
            rt_uring_stop();
            return -prc;
        }
        U.q[k].started = true;
    }
    return 0;
}

void rt_uring_stop(void) {
    pthread_mutex_lock(&U.m);
    U.stop = true;
    pthread_cond_broadcast(&U.cv);
    pthread_mutex_unlock(&U.m);
    if (U.stop_fd >= 0) {
        uint64_t one = 1;
        (void)!write(U.stop_fd, &one, sizeof one);
    }
    if (U.serving_locked) {
        U.serving_locked = false;
        pthread_mutex_unlock(&U.serve);
    }
    for (unsigned k = 0; k < U.nq; k++)
        if (U.q[k].started) {
            pthread_join(U.q[k].thread, NULL);
            U.q[k].started = false;
        }
    free_queues();
    if (U.stop_fd >= 0) {
        close(U.stop_fd);
        U.stop_fd = -1;
    }
}

/* ---- the session ---- */

int rt_transport_setup(struct router *r, struct fuse_session *se, enum rt_transport_mode mode) {
    U.r = r;
    U.se = se;
    U.mode = mode;
    U.fd = fuse_session_fd(se);
    static const struct fuse_custom_io io = { .read = io_read, .writev = io_writev };
    return fuse_session_custom_io(se, &io, U.fd);
}

bool rt_transport_uring_wanted(void) { return U.agreed; }

int rt_transport_init(char *desc, size_t len) {
    struct pollfd p = { .fd = U.fd, .events = POLLIN };
    int pr;
    long deadline = lz_now_ms() + RT_INIT_MS;
    do {
        long left = deadline - lz_now_ms();
        pr = left > 0 ? poll(&p, 1, (int)left) : 0;
    } while (pr < 0 && errno == EINTR);
    if (pr <= 0)
        return pr < 0 ? -errno : -ETIMEDOUT;
    struct fuse_buf fb = { 0 };
    int rc = fuse_session_receive_buf(U.se, &fb);
    if (rc > 0)
        fuse_session_process_buf(U.se, &fb);
    free(fb.mem);
    if (rc <= 0)
        return rc < 0 ? rc : -ENOTCONN;
    if (!U.init_seen)
        return -EPROTO;
    if (U.agreed) {
        /* Every queue registered, or one failed and the kernel went back
         * to /dev/fuse for the connection. */
        pthread_mutex_lock(&U.m);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += RT_URING_REG_MS / 1000;
        while (U.n_reported < U.nq)
            if (pthread_cond_timedwait(&U.cv, &U.m, &until) == ETIMEDOUT)
                break;
        unsigned reported = U.n_reported, registered = U.n_registered;
        int err = U.reg_err;
        pthread_mutex_unlock(&U.m);
        if (registered == U.nq)
            snprintf(desc, len, "io_uring, %u queue%s", U.nq, U.nq == 1 ? "" : "s");
        else
            snprintf(desc, len, "/dev/fuse (io_uring REGISTER failed: %s)",
                     reported < U.nq ? "timed out" : strerror(-err));
        return 0;
    }
    if (U.mode != RT_TRANSPORT_AUTO)
        snprintf(desc, len, "/dev/fuse (%s)", U.mode == RT_TRANSPORT_PINNED ? "forced, pinned" : "forced");
    else if (!U.offered)
        snprintf(desc, len, "/dev/fuse (the kernel offered no io_uring: enable_uring off)");
    else
        snprintf(desc, len, "/dev/fuse (io_uring not set up: %s)", strerror(-U.prep_err));
    return 0;
}

int rt_transport_loop(void) {
    if (U.mode == RT_TRANSPORT_PINNED) {
        /* The CPU it runs on now, within what it may use. */
        int cpu = sched_getcpu();
        cpu_set_t set;
        CPU_ZERO(&set);
        if (cpu >= 0 && cpu < CPU_SETSIZE) {
            CPU_SET(cpu, &set);
            (void)sched_setaffinity(0, sizeof set, &set);
        }
    }
    bool locking = U.nq > 0;
    if (U.serving_locked) {
        U.serving_locked = false;
        pthread_mutex_unlock(&U.serve);
    }
    struct fuse_buf fb = { 0 };
    int rc = 0;
    while (!fuse_session_exited(U.se)) {
        rc = fuse_session_receive_buf(U.se, &fb);
        if (rc == -EINTR)
            continue;
        if (rc <= 0)
            break;
        if (locking)
            pthread_mutex_lock(&U.serve);
        fuse_session_process_buf(U.se, &fb);
        if (locking)
            pthread_mutex_unlock(&U.serve);
    }
    free(fb.mem);
    return rc < 0 && rc != -EINTR ? rc : 0;
}

unsigned long rt_transport_bad(void) { return __atomic_load_n(&U.n_bad, __ATOMIC_RELAXED); }

void rt_transport_test_break_commit(unsigned long n) { U.break_commit = n; }
