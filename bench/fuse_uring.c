/*
 * bench/fuse_uring.c: round-trip cost of one FUSE request, classic
 * /dev/fuse read/write against FUSE over io_uring (issue 26 section 2).
 *
 * A tiny FUSE server that speaks the kernel protocol directly: INIT, LOOKUP
 * and GETATTR of one file ("f" in the root), every other request ENOSYS.
 * Entry and attribute timeouts are 0, so each stat() of the file is a
 * LOOKUP and a GETATTR round trip.  The server runs in a child process (so
 * a hand-off is a switch between two address spaces, as between runsc's
 * gofer and lazaret-router); the parent is the client and times N stat()s.
 *
 * Transports:
 *   classic  server thread(s) read(/dev/fuse), write the reply;
 *   uring    FUSE_IO_URING_CMD_REGISTER of D entries per queue, one queue
 *            (one thread, one ring) per possible CPU, then
 *            FUSE_IO_URING_CMD_COMMIT_AND_FETCH via IORING_OP_URING_CMD
 *            (SQE128).  A thread still reads /dev/fuse for what the kernel
 *            keeps there (FORGET, INTERRUPT) and counts what it serves, so
 *            a silent fallback to the classic path shows in the output.
 *   none     no FUSE: stat() of a file in /tmp, the floor.
 *
 * Needs root (mount(2)), and for uring /sys/module/fuse/parameters/enable_uring=Y.
 * Build: cc -O2 -Wall -o fuse_uring bench/fuse_uring.c -luring -lpthread
 * Usage: fuse_uring -m classic|uring|none [-n N] [-c CLIENT_CPU] [-s SERVER_CPU]
 *                   [-t CLIENT_THREADS] [-T CLASSIC_SERVER_THREADS] [-d DEPTH] [-D] [-1] [-P] [-v] [-S | -C PATH]
 *   -c/-s: CPU to pin the client / the server to (-1: not pinned).  In uring
 *          mode -s is relative: queue q's thread goes to CPU (q + s) % ncpu,
 *          so -s 0 keeps every queue on its own CPU and -s 1 moves each to
 *          the next CPU (a client on CPU c is then served on another CPU).
 *   -D:    IORING_SETUP_DEFER_TASKRUN|SINGLE_ISSUER on the queue rings.
 *   -P:    classic: server thread i on CPU (s + i) % ncpu (with -T ncpu, one
 *          reader per CPU; the kernel still wakes whichever reader waits).
 *   -1:    uring with one thread and one ring holding the entries of every
 *          queue (pinned to -s), the shape a single-threaded server keeps.
 *   -v:    print the first uring requests' header lengths to stderr.
 *   -S:    serve only: print "mnt=PATH", then for each line on stdin print
 *          "served=R classic=C server_vcsw=V server_ivcsw=I" (totals so
 *          far); unmount at EOF.  For a client elsewhere (inside gVisor).
 *   -C PATH: client only: stat(PATH) N times (after a warm-up), print
 *          "us_per_stat=..."; PATH's size must be 42 (the served file's).
 * Prints one line of key=value.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

/* FUSE over io_uring, from the kernel's include/uapi/linux/fuse.h (7.42+);
 * Debian 12's linux-libc-dev (6.1) predates it. */
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)
#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128
struct fuse_uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};
struct fuse_uring_req_header {
    char in_out[FUSE_URING_IN_OUT_HEADER_SZ];
    char op_in[FUSE_URING_OP_IN_OUT_SZ];
    struct fuse_uring_ent_in_out ring_ent_in_out;
};
enum fuse_uring_cmd {
    FUSE_IO_URING_CMD_INVALID = 0,
    FUSE_IO_URING_CMD_REGISTER = 1,
    FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};
struct fuse_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
#endif

#define BUF_SZ (1 << 20) /* classic read buffer and uring payload buffer */
#define MAX_Q 64
#define MAX_D 16

enum mode { M_CLASSIC, M_URING, M_NONE };

/* Shared between the server child and the client parent. */
struct shared {
    atomic_int ready;      /* 1: serving; -1: failed */
    atomic_int init_uring; /* kernel offered FUSE_OVER_IO_URING and we accepted */
    atomic_long served_classic;
    atomic_long served_uring[MAX_Q];
    char err[256];
};

static struct shared *sh;
static int fuse_fd = -1;
static int ncpu; /* possible CPUs = kernel's queue count */
static int opt_server_cpu = -1, opt_depth = 2, opt_defer = 0, opt_classic_threads = 1;
static int opt_one_ring = 0; /* -1: one thread and one ring register the entries of every queue */
static int opt_debug = 0;    /* -v: print the first uring requests' header lengths */
static int opt_spread = 0;   /* -P: classic threads spread over the CPUs from -s */
static enum mode opt_mode = M_CLASSIC;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (sh && !sh->err[0])
        vsnprintf(sh->err, sizeof sh->err, fmt, ap);
    va_end(ap);
    if (sh)
        atomic_store(&sh->ready, -1);
    _exit(1);
}

static void pin(int cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}

static void fill_attr(struct fuse_attr *a, uint64_t nodeid) {
    memset(a, 0, sizeof *a);
    a->ino = nodeid;
    a->mode = nodeid == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0644);
    a->nlink = nodeid == FUSE_ROOT_ID ? 2 : 1;
    a->size = nodeid == FUSE_ROOT_ID ? 0 : 42;
    a->blksize = 4096;
}

/*
 * Serve one request.  name: LOOKUP's name; out: reply arguments.
 * Returns the reply's argument size, a negative errno, or 1 << 30 for "no reply".
 */
#define NO_REPLY (1 << 30)
static int handle(const struct fuse_in_header *in, const char *name, void *out) {
    switch (in->opcode) {
    case FUSE_LOOKUP: {
        if (in->nodeid != FUSE_ROOT_ID || strcmp(name, "f") != 0)
            return -ENOENT;
        struct fuse_entry_out *e = out;
        memset(e, 0, sizeof *e);
        e->nodeid = 2;
        e->generation = 1;
        fill_attr(&e->attr, 2); /* entry_valid = attr_valid = 0 */
        return sizeof *e;
    }
    case FUSE_GETATTR: {
        if (in->nodeid != FUSE_ROOT_ID && in->nodeid != 2)
            return -ENOENT;
        struct fuse_attr_out *a = out;
        memset(a, 0, sizeof *a);
        fill_attr(&a->attr, in->nodeid);
        return sizeof *a;
    }
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT: return NO_REPLY;
    case FUSE_OPEN:
    case FUSE_OPENDIR: { /* for runsc's gofer, which opens the mount */
        struct fuse_open_out *o = out;
        memset(o, 0, sizeof *o);
        return sizeof *o;
    }
    case FUSE_STATFS: {
        struct fuse_statfs_out *o = out;
        memset(o, 0, sizeof *o);
        o->st.bsize = o->st.frsize = 4096;
        o->st.namelen = 255;
        return sizeof *o;
    }
    case FUSE_READDIR: /* empty: no entries */
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FLUSH:
    case FUSE_DESTROY: return 0;
    default: return -ENOSYS;
    }
}

/* Classic loop: read a request, write its reply. */
static void *classic_loop(void *arg) {
    long cpu = (long)arg;
    pin((int)cpu);
    char *buf = malloc(BUF_SZ), out[4096];
    for (;;) {
        ssize_t n = read(fuse_fd, buf, BUF_SZ);
        if (n < 0) {
            if (errno == EINTR || errno == ENOENT || errno == EAGAIN)
                continue;
            if (errno == ENODEV) /* unmounted */
                return NULL;
            fail("read /dev/fuse: %s", strerror(errno));
        }
        struct fuse_in_header *in = (void *)buf;
        const char *body = buf + sizeof *in;
        int r = handle(in, body, out + sizeof(struct fuse_out_header));
        atomic_fetch_add(&sh->served_classic, 1);
        if (r == NO_REPLY)
            continue;
        struct fuse_out_header *oh = (void *)out;
        oh->unique = in->unique;
        oh->error = r < 0 ? r : 0;
        oh->len = sizeof *oh + (r > 0 ? r : 0);
        if (write(fuse_fd, out, oh->len) < 0 && errno != ENOENT)
            fail("write /dev/fuse: %s", strerror(errno));
    }
}

/* INIT over /dev/fuse; returns whether io_uring was agreed. */
static int do_init(int want_uring) {
    char *buf = malloc(BUF_SZ);
    ssize_t n;
    do
        n = read(fuse_fd, buf, BUF_SZ);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        fail("read INIT: %s", strerror(errno));
    struct fuse_in_header *in = (void *)buf;
    struct fuse_init_in *ii = (void *)(buf + sizeof *in);
    if (in->opcode != FUSE_INIT)
        fail("first request is opcode %u, not INIT", in->opcode);
    uint64_t kflags = ii->flags;
    if (kflags & FUSE_INIT_EXT)
        kflags |= (uint64_t)ii->flags2 << 32;
    int offered = (kflags & FUSE_OVER_IO_URING) != 0;
    struct {
        struct fuse_out_header h;
        struct fuse_init_out o;
    } r;
    memset(&r, 0, sizeof r);
    r.o.major = FUSE_KERNEL_VERSION;
    r.o.minor = ii->minor;
    r.o.max_readahead = ii->max_readahead;
    r.o.max_write = 128 * 1024;
    r.o.max_background = 16;
    r.o.congestion_threshold = 12;
    r.o.time_gran = 1;
    uint64_t flags = FUSE_INIT_EXT;
    int agreed = want_uring && offered;
    if (agreed)
        flags |= FUSE_OVER_IO_URING;
    r.o.flags = (uint32_t)flags;
    r.o.flags2 = (uint32_t)(flags >> 32);
    r.h.unique = in->unique;
    r.h.len = sizeof r;
    if (write(fuse_fd, &r, sizeof r) != (ssize_t)sizeof r)
        fail("write INIT reply: %s", strerror(errno));
    if (want_uring && !offered)
        fail("kernel did not offer FUSE_OVER_IO_URING in INIT (protocol 7.%u, "
             "flags2=%#x); is /sys/module/fuse/parameters/enable_uring Y?",
             ii->minor, ii->flags2);
    atomic_store(&sh->init_uring, agreed);
    free(buf);
    return agreed;
}

struct ent {
    struct fuse_uring_req_header *hdr;
    char *payload;
    struct iovec iov[2];
};

static void prep_cmd(struct io_uring *ring, int qid, struct ent *e, int idx, uint32_t op, uint64_t commit_id) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        fail("io_uring_get_sqe: ring full");
    memset(sqe, 0, 128); /* SQE128 */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fuse_fd;
    sqe->cmd_op = op;
    sqe->addr = (uint64_t)(uintptr_t)e->iov;
    sqe->len = 2;
    sqe->user_data = (uint64_t)idx;
    struct fuse_uring_cmd_req *req = (void *)sqe->cmd;
    req->qid = (uint16_t)qid;
    req->commit_id = commit_id;
}

static void *uring_queue(void *arg) {
    int qid0 = (int)(long)arg, nq = opt_one_ring ? ncpu : 1;
    if (opt_one_ring)
        pin(opt_server_cpu);
    else
        pin(opt_server_cpu < 0 ? -1 : (qid0 + opt_server_cpu) % ncpu);
    struct io_uring ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;
    if (opt_defer)
        p.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int r = io_uring_queue_init_params(opt_depth * nq * 2, &ring, &p);
    if (r < 0)
        fail("io_uring_queue_init_params(q%d): %s", qid0, strerror(-r));
    struct ent *ents = calloc((size_t)opt_depth * nq, sizeof *ents);
    int *qids = calloc((size_t)opt_depth * nq, sizeof *qids);
    for (int i = 0; i < opt_depth * nq; i++) {
        struct ent *e = &ents[i];
        int qid = qids[i] = qid0 + i / opt_depth;
        if (posix_memalign((void **)&e->hdr, 4096, sizeof *e->hdr) ||
            posix_memalign((void **)&e->payload, 4096, BUF_SZ))
            fail("posix_memalign");
        memset(e->hdr, 0, sizeof *e->hdr);
        e->iov[0] = (struct iovec){ e->hdr, sizeof *e->hdr };
        e->iov[1] = (struct iovec){ e->payload, BUF_SZ };
        prep_cmd(&ring, qid, e, i, FUSE_IO_URING_CMD_REGISTER, 0);
    }
    r = io_uring_submit(&ring);
    if (r < 0)
        fail("io_uring_submit REGISTER(q%d): %s", qid0, strerror(-r));
    for (;;) {
        struct io_uring_cqe *cqe;
        r = io_uring_wait_cqe(&ring, &cqe);
        if (r == -EINTR)
            continue;
        if (r < 0)
            fail("io_uring_wait_cqe(q%d): %s", qid0, strerror(-r));
        int idx = (int)cqe->user_data, res = cqe->res, qid = qids[idx];
        io_uring_cqe_seen(&ring, cqe);
        if (res < 0) {
            if (res == -ENOTCONN || res == -ECANCELED || res == -ECONNABORTED)
                return NULL; /* unmount / teardown */
            fail("uring cmd on q%d: %s (%d)", qid, strerror(-res), res);
        }
        struct ent *e = &ents[idx];
        struct fuse_in_header in;
        memcpy(&in, e->hdr->in_out, sizeof in);
        uint32_t psz = e->hdr->ring_ent_in_out.payload_sz;
        uint64_t commit_id = e->hdr->ring_ent_in_out.commit_id;
        if (opt_debug > 0) {
            opt_debug--;
            fprintf(stderr, "q%d opcode=%u in.len=%u payload_sz=%u commit_id=%llu unique=%llu\n", qid, in.opcode,
                    in.len, psz, (unsigned long long)commit_id, (unsigned long long)in.unique);
        }
        char name[256] = "";
        if (in.opcode == FUSE_LOOKUP) {
            size_t l = psz < sizeof name ? psz : sizeof name - 1;
            memcpy(name, e->payload, l);
            name[l] = 0;
        }
        int rr = handle(&in, name, e->payload);
        atomic_fetch_add(&sh->served_uring[qid], 1);
        struct fuse_out_header oh = { .unique = in.unique };
        oh.error = rr < 0 ? rr : 0;
        uint32_t outsz = rr > 0 && rr != NO_REPLY ? (uint32_t)rr : 0;
        oh.len = sizeof oh + outsz;
        memcpy(e->hdr->in_out, &oh, sizeof oh);
        e->hdr->ring_ent_in_out.payload_sz = outsz;
        prep_cmd(&ring, qid, e, idx, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, commit_id);
        r = io_uring_submit(&ring);
        if (r < 0)
            fail("io_uring_submit COMMIT_AND_FETCH(q%d): %s", qid, strerror(-r));
    }
}

static void server(void) {
    int agreed = do_init(opt_mode == M_URING);
    pthread_t t;
    if (agreed) {
        for (long q = 0; q < (opt_one_ring ? 1 : ncpu); q++)
            if (pthread_create(&t, NULL, uring_queue, (void *)q))
                fail("pthread_create");
        /* forgets, interrupts, and whatever falls back to /dev/fuse */
        atomic_store(&sh->ready, 1);
        classic_loop((void *)-1L);
    } else {
        /* -P: thread i on CPU (s + i) % ncpu, one per CPU if -T ncpu */
        for (long i = 1; i < opt_classic_threads; i++)
            if (pthread_create(
                    &t, NULL, classic_loop,
                    (void *)(long)(opt_spread && opt_server_cpu >= 0 ? (opt_server_cpu + i) % ncpu : opt_server_cpu)))
                fail("pthread_create");
        atomic_store(&sh->ready, 1);
        classic_loop((void *)(long)opt_server_cpu);
    }
    _exit(0);
}

/* Sum of context switches over the threads of pid. */
static void ctxsw(pid_t pid, long *vol, long *invol) {
    char path[64];
    *vol = *invol = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p2[384], line[256];
        snprintf(p2, sizeof p2, "%s/%s/status", path, de->d_name);
        FILE *f = fopen(p2, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f)) {
            long v;
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
                *vol += v;
            else if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
                *invol += v;
        }
        fclose(f);
    }
    closedir(d);
}

static long total_served(void) {
    long s = atomic_load(&sh->served_classic);
    for (int q = 0; q < MAX_Q; q++)
        s += atomic_load(&sh->served_uring[q]);
    return s;
}

struct client_arg {
    const char *path;
    long n;
    int cpu;
};

static void *client_loop(void *arg) {
    struct client_arg *a = arg;
    pin(a->cpu);
    struct stat st;
    for (long i = 0; i < a->n; i++)
        if (stat(a->path, &st) != 0 || st.st_size != 42) {
            fprintf(stderr, "stat %s: %s\n", a->path, strerror(errno));
            exit(1);
        }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    long n = 100000;
    int client_cpu = -1, client_threads = 1, c, serve_only = 0;
    const char *client_path = NULL;
    while ((c = getopt(argc, argv, "m:n:c:s:t:T:d:D1vSC:P")) != -1) {
        switch (c) {
        case 'm': opt_mode = !strcmp(optarg, "uring") ? M_URING : !strcmp(optarg, "none") ? M_NONE : M_CLASSIC; break;
        case 'n': n = atol(optarg); break;
        case 'c': client_cpu = atoi(optarg); break;
        case 's': opt_server_cpu = atoi(optarg); break;
        case 't': client_threads = atoi(optarg); break;
        case 'T': opt_classic_threads = atoi(optarg); break;
        case 'd': opt_depth = atoi(optarg); break;
        case 'D': opt_defer = 1; break;
        case '1': opt_one_ring = 1; break;
        case 'v': opt_debug = 8; break;
        case 'S': serve_only = 1; break;
        case 'P': opt_spread = 1; break;
        case 'C': client_path = optarg; break;
        default: fprintf(stderr, "usage: see the comment at the top of bench/fuse_uring.c\n"); return 2;
        }
    }
    if (opt_depth < 1 || opt_depth > MAX_D || client_threads < 1 || client_threads > 64)
        return 2;
    ncpu = get_nprocs_conf();
    if (client_path) {
        struct client_arg warm = { client_path, 2000, client_cpu }, a = { client_path, n, client_cpu };
        client_loop(&warm);
        double t0 = now();
        client_loop(&a);
        printf("us_per_stat=%.3f\n", (now() - t0) * 1e6 / n);
        return 0;
    }
    if (ncpu > MAX_Q)
        return 2;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof *sh);

    char mnt[] = "/tmp/fuse-uring-XXXXXX", path[64];
    if (!mkdtemp(mnt)) {
        perror("mkdtemp");
        return 1;
    }
    pid_t child = -1;
    if (opt_mode == M_NONE) {
        snprintf(path, sizeof path, "%s/f", mnt);
        int f = open(path, O_CREAT | O_WRONLY, 0644);
        if (f < 0 || write(f, "0123456789012345678901234567890123456789ab", 42) != 42)
            return 1;
        close(f);
    } else {
        fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fuse_fd < 0) {
            perror("open /dev/fuse");
            return 1;
        }
        char opts[128];
        snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fuse_fd);
        if (mount("fuse-uring-bench", mnt, "fuse", MS_NOSUID | MS_NODEV, opts) != 0) {
            perror("mount fuse");
            rmdir(mnt);
            return 1;
        }
        child = fork();
        if (child == 0)
            server();
        close(fuse_fd);
        /* bounded wait for the server */
        for (int i = 0; i < 1000 && atomic_load(&sh->ready) == 0; i++)
            usleep(10000);
        snprintf(path, sizeof path, "%s/f", mnt);
    }

    int rc = 0;
    if (opt_mode != M_NONE && atomic_load(&sh->ready) != 1) {
        fprintf(stderr, "server not ready: %s\n", sh->err[0] ? sh->err : "timeout");
        rc = 1;
        goto out;
    }
    if (serve_only) {
        printf("mnt=%s\n", mnt);
        fflush(stdout);
        char line[64];
        while (fgets(line, sizeof line, stdin)) {
            long v, i;
            ctxsw(child, &v, &i);
            printf("served=%ld classic=%ld server_vcsw=%ld server_ivcsw=%ld uring=%d\n", total_served(),
                   atomic_load(&sh->served_classic), v, i, atomic_load(&sh->init_uring));
            fflush(stdout);
        }
        goto out;
    }
    /* Warm-up (and, for uring, the ring must be ready before the first
     * request leaves the kernel's wait: that first stat may block until all
     * queues registered). Bounded by alarm. */
    alarm(60);
    struct client_arg warm = { path, 2000, client_cpu };
    client_loop(&warm);
    long served0 = total_served(), classic0 = atomic_load(&sh->served_classic);
    long sv0 = 0, si0 = 0, sv1 = 0, si1 = 0;
    if (child > 0)
        ctxsw(child, &sv0, &si0);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now();
    if (client_threads == 1) {
        struct client_arg a = { path, n, client_cpu };
        client_loop(&a);
    } else {
        pthread_t th[64];
        struct client_arg a[64];
        for (int i = 0; i < client_threads; i++) {
            a[i] = (struct client_arg){ path, n / client_threads, client_cpu < 0 ? -1 : (client_cpu + i) % ncpu };
            pthread_create(&th[i], NULL, client_loop, &a[i]);
        }
        for (int i = 0; i < client_threads; i++)
            pthread_join(th[i], NULL);
    }
    double t1 = now();
    getrusage(RUSAGE_SELF, &ru1);
    alarm(0);
    if (child > 0)
        ctxsw(child, &sv1, &si1);
    long reqs = total_served() - served0, classic = atomic_load(&sh->served_classic) - classic0;
    double us = (t1 - t0) * 1e6;
    long cv = ru1.ru_nvcsw - ru0.ru_nvcsw, ci = ru1.ru_nivcsw - ru0.ru_nivcsw;
    printf("mode=%s uring=%d n=%ld client_cpu=%d server_cpu=%d client_threads=%d depth=%d defer=%d one_ring=%d "
           "us_per_stat=%.3f reqs_per_stat=%.3f us_per_req=%.3f classic_reqs=%ld "
           "client_vcsw_per_stat=%.3f client_ivcsw_per_stat=%.3f "
           "server_vcsw_per_stat=%.3f server_ivcsw_per_stat=%.3f "
           "client_cpu_us_per_stat=%.3f\n",
           opt_mode == M_URING      ? "uring"
               : opt_mode == M_NONE ? "none"
                                    : "classic",
           atomic_load(&sh->init_uring), n, client_cpu, opt_server_cpu, client_threads, opt_depth, opt_defer,
           opt_one_ring, us / n, (double)reqs / n, reqs ? us / reqs : 0.0, classic, (double)cv / n, (double)ci / n,
           (double)(sv1 - sv0) / n, (double)(si1 - si0) / n,
           ((ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6 + (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
            (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) /
               n);
out:
    if (opt_mode != M_NONE) {
        if (umount2(mnt, MNT_DETACH) != 0)
            perror("umount2");
        if (child > 0) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
        }
    } else {
        unlink(path);
    }
    rmdir(mnt);
    return rc;
}
