/* supervisor.c — see supervisor.h. */
#include "supervisor.h"
#include "anchor.h"
#include "child.h"
#include "crashpoint.h"
#include "mailbox.h"
#include "netpolicy.h"
#include "netfollow.h"
#include "procenv.h"
#include "readiness.h"
#include "rschan.h"
#include "rsslot.h"
#include "spawn.h"

#include <linux/capability.h>
#include <sodium.h>
#include <sys/syscall.h>

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>

#define READY_LINE "lazaret-init: ready\n"

int lz_find_runsc(char **ret, struct lz_error *err) {
    const char *env = secure_getenv("LAZARET_RUNSC");
    if (env && env[0]) {
        if (env[0] != '/' || access(env, X_OK) < 0)
            return lz_error_set(err, -ENOENT, "LAZARET_RUNSC=%s is not an absolute executable path", env);
        *ret = lz_xstrdup(env);
        return 0;
    }
    static const char *const cands[] = { "/usr/bin/runsc", "/usr/local/bin/runsc", "/usr/sbin/runsc" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cands); i++)
        if (access(cands[i], X_OK) == 0) {
            *ret = lz_xstrdup(cands[i]);
            return 0;
        }
    return lz_error_set(err, -ENOENT,
                        "runsc (gVisor) not found: install it with `apt-get install runsc/bookworm-backports` "
                        "(scripts/setup.sh does this)");
}

/* A report to the coordinator (rschan.h). Fire and forget: a coordinator
 * that is gone is noticed at the next receive (end of file). */
#define ctl_fail(fd, ...) ((void)lz_rschan_sendf((fd), LZ_RS_FAIL, __VA_ARGS__))
static void ctl_exited(int fd, int status, const char *reason) {
    uint64_t u = (uint64_t)(unsigned)status;
    (void)lz_rschan_send(fd, LZ_RS_EXITED, &u, reason);
}

static int loopback_up(void) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr = { 0 };
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return -errno;
    ifr.ifr_flags |= IFF_UP;
    return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static unsigned long ns_ino(const char *which) {
    char p[64];
    struct stat st;
    snprintf(p, sizeof p, "/proc/self/ns/%s", which);
    return stat(p, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Keeps the last bytes runsc wrote to stderr for the error message, and
 * forwards everything to our stderr (the coordinator's log). */
struct tail {
    char buf[2048];
    size_t len;
};
static void tail_add(struct tail *t, const char *b, size_t n) {
    (void)!write(2, b, n);
    const size_t cap = sizeof t->buf - 1;
    if (n > cap) {
        b += n - cap;
        n = cap;
    }
    if (t->len + n > cap) {
        size_t drop = t->len + n - cap;
        memmove(t->buf, t->buf + drop, t->len - drop);
        t->len -= drop;
    }
    memcpy(t->buf + t->len, b, n);
    t->len += n;
    t->buf[t->len] = '\0';
}
static const char *tail_last_line(struct tail *t) {
    while (t->len && (t->buf[t->len - 1] == '\n' || t->buf[t->len - 1] == '\r'))
        t->buf[--t->len] = '\0';
    char *nl = strrchr(t->buf, '\n');
    return nl ? nl + 1 : t->buf;
}

/* We are a child subreaper: runsc's sandbox and gofer processes are
 * re-parented to us when runsc exits, and `runsc delete` waits for them to
 * vanish, so zombies must be reaped while we wait for anything. Our own
 * tracked child is left for its pidfd. */
/* Our own children (runsc, the router) are reaped through their pidfds
 * only; every other child is an orphan re-parented to us (we are a
 * subreaper) and is reaped here, one PID at a time from our children list,
 * so that a zombie of ours never hides the orphans behind it. */
static const struct lz_child *owned[2 + LZ_RS_VOLUMES_MAX];

static bool is_owned(pid_t pid) {
    for (size_t i = 0; i < LZ_ARRAY_SIZE(owned); i++)
        if (owned[i] && owned[i]->pidfd >= 0 && owned[i]->pid == pid)
            return true;
    return false;
}

static void reap_orphans_except(const struct lz_child *keep) {
    (void)keep;
    /* WNOWAIT peeks at one zombie at a time; ours stay for their pidfds. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return;
    long pid;
    for (int i = 0; i < 4096 && fscanf(f, "%ld", &pid) == 1; i++) {
        if (is_owned((pid_t)pid))
            continue;
        siginfo_t w = { 0 };
        if (waitid(P_PID, (id_t)pid, &w, WEXITED | WNOHANG) < 0)
            continue;
    }
}

/* lz_child_wait that keeps reaping orphans meanwhile. A child reaped as an
 * orphan by someone else's wait counts as gone. */
static int rs_wait(struct lz_child *c, int timeout_ms, int *ret_status) {
    long deadline = lz_now_ms() + timeout_ms;
    for (;;) {
        int r = lz_child_try_reap(c, ret_status);
        if (r == 1)
            return 0;
        if (r == -ECHILD) {
            lz_child_close(c);
            *ret_status = 0;
            return 0;
        }
        if (r < 0)
            return r;
        reap_orphans_except(c);
        long left = deadline - lz_now_ms();
        if (timeout_ms >= 0 && left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        poll(&p, 1, left > 50 || timeout_ms < 0 ? 50 : (int)left);
    }
}

static int run_runsc_cmd(const struct lz_supervisor_args *a, const char *const *tail_argv, int timeout_ms) {
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)a->runsc;
    argv[n++] = (char *)"--root";
    argv[n++] = (char *)a->state_dir;
    for (; *tail_argv && n < LZ_ARRAY_SIZE(argv) - 1; tail_argv++)
        argv[n++] = (char *)*tail_argv;
    argv[n] = NULL;
    struct lz_spawn_opts o = { .path = a->runsc,
                               .argv = argv,
                               .envp = lz_helper_envp,
                               .stdin_fd = -1,
                               .stdout_fd = 2,
                               .stderr_fd = 2,
                               .setns_pidfd = -1,
                               .pdeathsig = SIGKILL };
    struct lz_child c;
    int r = lz_spawn(&o, &c);
    if (r < 0)
        return r;
    int st = 0;
    r = rs_wait(&c, timeout_ms, &st);
    if (r == -ETIMEDOUT) {
        lz_child_signal(&c, SIGKILL);
        rs_wait(&c, -1, &st);
    }
    lz_child_close(&c);
    return r < 0 ? r : st;
}

static void stop_sandbox(const struct lz_supervisor_args *a, struct lz_child *runsc) {
    int st;
    /* runsc run forwards SIGTERM to the container's init, which exits:
     * the sandbox stops and runsc cleans up after itself. */
    if (runsc->pidfd >= 0) {
        lz_child_signal(runsc, SIGTERM);
        if (rs_wait(runsc, LZ_RS_T_RUNSC_TERM_MS, &st) == -ETIMEDOUT) {
            static const char *const kill_all[] = { "kill", "--all", NULL, "KILL", NULL };
            const char *k[5];
            memcpy(k, kill_all, sizeof k);
            k[2] = a->container_id;
            run_runsc_cmd(a, k, LZ_RS_T_RUNSC_KILL_MS);
            if (rs_wait(runsc, LZ_RS_T_RUNSC_KILLED_MS, &st) == -ETIMEDOUT) {
                lz_child_signal(runsc, SIGKILL);
                rs_wait(runsc, -1, &st);
            }
        }
        lz_child_close(runsc);
    }
    const char *del[] = { "delete", "--force", a->container_id, NULL };
    run_runsc_cmd(a, del, LZ_RS_T_RUNSC_DELETE_MS);
    reap_orphans_except(NULL);
}

/* Waits (bounded) for one command from the coordinator: `want` (with the
 * string `arg` when not NULL). 0 when it came, -EPIPE when the coordinator
 * went away, -ETIMEDOUT, -EPROTO for another or a malformed command (*got
 * holds it; kind 0 when malformed). STOP while waiting for UNMOUNT is
 * skipped: the sandbox is already stopped. */
static int wait_command(int ctl, enum lz_rs_kind want, const struct lz_rs_slot *arg, int timeout_ms,
                        struct lz_rsmsg *got) {
    long deadline = lz_now_ms() + timeout_ms;
    for (;;) {
        long left = deadline - lz_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int r = lz_rschan_recv(ctl, (int)left, got);
        if (r == -ETIMEDOUT)
            return r;
        if (r == 0)
            return -EPIPE;
        if (r < 0) {
            got->kind = 0;
            return -EPROTO;
        }
        struct lz_rs_slot s;
        if (got->kind == want && (!arg || (lz_rs_slot_parse(got->str, &s) == 0 && lz_rs_slot_equal(&s, arg))))
            return 0;
        if (want == LZ_RS_UNMOUNT && got->kind == LZ_RS_STOP)
            continue;
        return -EPROTO;
    }
}

/* Causal child acquisition across the Supervisor/coordinator boundary: the
 * child waits at its barrier while the coordinator records its staged
 * ownership (it opens its own pidfd for the PID: the child cannot be reaped,
 * so the PID names it); only the coordinator's "staged" releases it. */
static int stage_child(int ctl, const struct lz_rs_slot *t, struct lz_child *c, char *msg, size_t msglen) {
    uint64_t pid = (uint64_t)c->pid;
    char slot[LZ_RS_SLOT_NAME_MAX];
    (void)lz_rschan_send(ctl, LZ_RS_STAGE, &pid, lz_rs_slot_name(t, slot));
    struct lz_rsmsg got;
    int w = wait_command(ctl, LZ_RS_STAGED, t, LZ_RS_T_STAGE_MS, &got);
    if (w == -EPROTO && got.kind == LZ_RS_STOP) {
        snprintf(msg, msglen, "stopped while starting the %s", slot);
        return -ECANCELED;
    }
    if (w < 0) {
        snprintf(msg, msglen, "the coordinator did not record the %s", slot);
        return w == -EPROTO ? -EPIPE : w;
    }
    int r = lz_child_release(c);
    if (r < 0)
        snprintf(msg, msglen, "the %s failed to start: %s", slot, strerror(-r));
    lz_crash_point(t->kind == LZ_SLOT_RUNSC ? "rs-runsc-released" : "rs-router-released");
    return r;
}

/* How long the kernel may cache what a watched directory holds: the bound
 * on staleness for what inotify does not report (shared-mmap writes; see
 * "watching the host" in src/router/main.c). */
#define LZ_ROUTER_WATCH_TIMEOUT "10"

/* The hot-reload channel (docs/hot-reload.md, hotnotify.h): a pipe whose
 * write end the workspace router holds (--notify-fd) and whose read end is
 * runsc's stdin, so lazaret-init's. One way only: router -> sandbox.
 * Only the workspace's own router gets it, and only with --watch (its
 * events are the source). LAZARET_TEST_WORKSPACE=nohot leaves it out (the
 * tests' control): no pipe, init pokes nothing. */
static int hot_pipe[2] = { -EBADF, -EBADF };

/* The FUSE transport the workspace router reported it got (its readiness
 * line), passed on in READY. */
static char ws_transport[LZ_ERROR_MAX];

/* Starts lazaret-router on `source` (the workspace, a writable volume
 * with `plain`, or with `worktree` a linked worktree's common Git
 * directory) at `view`, staged as `slot`, and waits until it mounted. */
static int start_router(const struct lz_supervisor_args *a, const char *source, const char *view, bool plain,
                        const char *worktree, const struct lz_rs_slot *slot, struct lz_child *ret, char *msg,
                        size_t msglen) {
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) < 0)
        return -errno;
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", rp[1]);
    _cleanup_free_ char **argv =
        lz_xcalloc(35 + 2 * a->n_protect + 2 * LZ_RS_DENY_MAX + 2 * a->n_host_tools, sizeof *argv);
    size_t n = 0;
    argv[n++] = (char *)a->router;
    argv[n++] = (char *)"--source";
    argv[n++] = (char *)source;
    argv[n++] = (char *)"--mountpoint";
    argv[n++] = (char *)view;
    argv[n++] = (char *)"--ready-fd";
    argv[n++] = fdstr;
    if (plain)
        argv[n++] = (char *)"--plain";
    /* Long cache timeouts where the router watches the host for changes
     * (lazaret-router --watch): the kernel then answers most of gVisor's
     * revalidations itself. LAZARET_TEST_WORKSPACE=nowatch (timeouts of 0)
     * or noinval (watching without invalidating) are for tests and bench. */
    const char *wmode = lz_test_hook("LAZARET_TEST_WORKSPACE");
    bool watch = !wmode || strcmp(wmode, "nowatch") != 0;
    if (watch) {
        argv[n++] = (char *)"--watch";
        argv[n++] = (char *)LZ_ROUTER_WATCH_TIMEOUT;
    }
    char hotstr[16];
    bool hot = !plain && !worktree && watch && hot_pipe[1] >= 0 && !(wmode && strcmp(wmode, "noinval") == 0);
    if (hot) {
        snprintf(hotstr, sizeof hotstr, "%d", hot_pipe[1]);
        argv[n++] = (char *)"--notify-fd";
        argv[n++] = hotstr;
    }
    if (wmode && strcmp(wmode, "noinval") == 0)
        argv[n++] = (char *)"--test-no-invalidate";
    /* eager: an OPEN and a RELEASE per file opened (before zero-message
     * opens), for the bench. */
    if (wmode && strcmp(wmode, "eager") == 0)
        argv[n++] = (char *)"--eager-open";
    /* LAZARET_TEST_FUSE=classic|pinned: /dev/fuse even where io_uring is
     * on (the tests of both paths, the bench's levers); break-commit: the
     * workspace router's 200th reply under io_uring goes with a commit ID
     * the kernel does not know (it must end its session, not hang). */
    const char *fmode = lz_test_hook("LAZARET_TEST_FUSE");
    if (fmode && (!strcmp(fmode, "classic") || !strcmp(fmode, "pinned"))) {
        argv[n++] = (char *)"--fuse-transport";
        argv[n++] = (char *)fmode;
    }
    if (fmode && !strcmp(fmode, "break-commit") && !plain && !worktree) {
        argv[n++] = (char *)"--test-break-commit";
        argv[n++] = (char *)"200";
    }
    for (size_t i = 0; i < a->n_deny_link && i < LZ_RS_DENY_MAX; i++) {
        argv[n++] = (char *)"--deny-link-target";
        argv[n++] = a->deny_link[i];
    }
    if (worktree) {
        argv[n++] = (char *)"--linked-worktree";
        argv[n++] = (char *)worktree;
    }
    /* Refusals to the coordinator (refusal.h), tagged with the router's
     * slot: 0 the workspace, 1 + i volume i. */
    char reffd[16], reftag[16];
    if (a->refusal_fd >= 0) {
        snprintf(reffd, sizeof reffd, "%d", a->refusal_fd);
        snprintf(reftag, sizeof reftag, "%u", slot->kind == LZ_SLOT_VOLUME ? 1u + (unsigned)slot->vol : 0u);
        argv[n++] = (char *)"--refusal-fd";
        argv[n++] = reffd;
        argv[n++] = (char *)"--refusal-tag";
        argv[n++] = reftag;
    }
    for (size_t i = 0; i < a->n_protect && !plain && !worktree; i++) {
        argv[n++] = (char *)"--protect";
        argv[n++] = a->protect[i];
    }
    if (!plain && !worktree && a->ignored_state) {
        argv[n++] = (char *)"--ignored-state";
        argv[n++] = (char *)a->ignored_state;
        if (a->git_home) {
            argv[n++] = (char *)"--git-home";
            argv[n++] = (char *)a->git_home;
        }
        if (a->git_xdg) {
            argv[n++] = (char *)"--git-xdg-config";
            argv[n++] = (char *)a->git_xdg;
        }
        if (a->no_ignore_rules)
            argv[n++] = (char *)"--no-ignore-rules";
        for (size_t i = 0; i < a->n_host_tools; i++) {
            argv[n++] = (char *)"--host-tool";
            argv[n++] = a->host_tools[i];
        }
    }
    argv[n] = NULL;
    int keep[3] = { rp[1], -EBADF, -EBADF };
    size_t n_keep = 1;
    if (a->refusal_fd >= 0)
        keep[n_keep++] = a->refusal_fd;
    if (hot)
        keep[n_keep++] = hot_pipe[1];
    struct lz_spawn_opts o = { .path = a->router,
                               .argv = argv,
                               .envp = lz_helper_envp,
                               .stdin_fd = -1,
                               .stdout_fd = 2,
                               .stderr_fd = 2,
                               .keep_fds = keep,
                               .n_keep_fds = n_keep,
                               .setns_pidfd = -1,
                               .pdeathsig = SIGTERM,
                               .barrier = true };
    int r = lz_spawn(&o, ret);
    close(rp[1]);
    if (r < 0) {
        close(rp[0]);
        snprintf(msg, msglen, "cannot start lazaret-router: %s", strerror(-r));
        return r;
    }
    if ((r = stage_child(a->ctl_fd, slot, ret, msg, msglen)) < 0) {
        close(rp[0]);
        int st;
        lz_child_signal(ret, SIGKILL);
        lz_child_wait(ret, -1, &st);
        return r;
    }
    struct lz_ready rd;
    r = lz_ready_read(rp[0], LZ_RS_T_ROUTER_READY_MS, &rd);
    close(rp[0]);
    if (r == 0 && rd.status == LZ_READY_OK) {
        if (slot->kind == LZ_SLOT_ROUTER) {
            snprintf(ws_transport, sizeof ws_transport, "%s", rd.msg[0] ? rd.msg : "/dev/fuse");
            fprintf(stderr, "rs[%d]: workspace router's FUSE transport: %s\n", (int)getpid(), ws_transport);
        }
        return 0;
    }
    snprintf(msg, msglen, "lazaret-router did not mount the %s view (see the coordinator log)",
             worktree    ? "common Git directory"
                 : plain ? "volume"
                         : "workspace");
    int st;
    lz_child_signal(ret, SIGKILL);
    lz_child_wait(ret, -1, &st);
    return -EIO;
}

static void stop_one_router(struct lz_child *router, const char *view) {
    if (router->pidfd < 0)
        return;
    int st;
    lz_child_signal(router, SIGTERM);
    if (rs_wait(router, LZ_RS_T_ROUTER_STOP_MS, &st) == -ETIMEDOUT) {
        lz_child_signal(router, SIGKILL);
        rs_wait(router, -1, &st);
    }
    umount2(view, MNT_DETACH);
}

/* The volume routers of this generation (owned[2..]). */
static struct lz_child vol_routers[LZ_RS_VOLUMES_MAX];

/* The workspace router and every volume router. */
static void stop_router(const struct lz_supervisor_args *a, struct lz_child *router) {
    stop_one_router(router, a->view);
    for (size_t i = 0; i < a->n_volumes && i < LZ_RS_VOLUMES_MAX; i++)
        stop_one_router(&vol_routers[i], a->vol_view[i]);
}

static int start_routers(const struct lz_supervisor_args *a, struct lz_child *router, char *msg, size_t msglen) {
    for (size_t i = 0; i < LZ_RS_VOLUMES_MAX; i++) {
        vol_routers[i] = LZ_CHILD_NULL;
        owned[2 + i] = &vol_routers[i];
    }
    int r = start_router(a, a->workspace, a->view, false, NULL, &(struct lz_rs_slot){ LZ_SLOT_ROUTER, 0 }, router, msg,
                         msglen);
    for (size_t i = 0; r == 0 && i < a->n_volumes && i < LZ_RS_VOLUMES_MAX; i++) {
        struct lz_rs_slot slot = { LZ_SLOT_VOLUME, (unsigned)i };
        /* A linked worktree's common Git directory is the last "volume",
         * under the Git policy (supargs.h). */
        const char *wt = a->worktree && i + 1 == a->n_volumes ? a->worktree : NULL;
        r = start_router(a, a->vol_source[i], a->vol_view[i], !wt, wt, &slot, &vol_routers[i], msg, msglen);
    }
    if (r < 0)
        stop_router(a, router);
    return r;
}

/* The follower's changes, with wall-clock time like the coordinator's own
 * lines (its handling time is in the line). */
static void follow_log(void *ud, const char *line) {
    (void)ud;
    char ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", gmtime_r(&now.tv_sec, &tm));
    fprintf(stderr, "%s.%03ld rs[%d]: %s\n", ts, now.tv_nsec / 1000000, (int)getpid(), line);
}

/* DNS: the four sockets of the Domain's resolver (rschan.h), opened here
 * in the enforcement namespace and closed once sent. */
static int pass_dns(int ctl, struct lz_error *err) {
    int fds[LZ_NET_DNS_FDS];
    int r = lz_netpolicy_dns_sockets(fds, err);
    if (r < 0)
        return r;
    r = lz_rschan_send_fds(ctl, LZ_RS_DNS, NULL, NULL, fds, LZ_NET_DNS_FDS);
    for (int i = 0; i < LZ_NET_DNS_FDS; i++)
        lz_closep(&fds[i]);
    return r;
}

/* CAP_NET_ADMIN and CAP_NET_RAW out of what anything we exec can get: the
 * bounding and inheritable sets, and the ambient set cleared (as root in
 * the Domain user namespace, an exec's permitted set is inheritable |
 * bounding). Before the routers and runsc start, so that nothing started
 * after this (router, runsc, the sandbox) can ever change the policy.
 * With `own` also from our own effective and permitted sets (the policy is
 * final), but with `keep_admin` CAP_NET_ADMIN stays permitted (not
 * effective) for the host-address follower's /32 denies. */
static int drop_net_caps(bool own, bool keep_admin) {
    if (!own &&
        (prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0) < 0 || prctl(PR_CAPBSET_DROP, CAP_NET_RAW, 0, 0, 0) < 0))
        return -errno;
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct caps[2];
    if (syscall(SYS_capget, &hdr, caps) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        uint32_t drop = 0;
        if (CAP_NET_ADMIN / 32 == i)
            drop |= 1u << (CAP_NET_ADMIN % 32);
        if (CAP_NET_RAW / 32 == i)
            drop |= 1u << (CAP_NET_RAW % 32);
        caps[i].inheritable &= ~drop;
        if (!own)
            continue;
        caps[i].effective &= ~drop;
        if (keep_admin && CAP_NET_ADMIN / 32 == i)
            drop &= ~(1u << (CAP_NET_ADMIN % 32));
        caps[i].permitted &= ~drop;
    }
    if (syscall(SYS_capset, &hdr, caps) < 0)
        return -errno;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    return 0;
}

/* BOOT: the helper is launched, the bundle written. Before anything of the
 * sandbox exists: checks the policy against its digest (kept in *pol for
 * NET), disables IPv6 and puts the resolver's address on lo (the namespace
 * has no route out: only lo, and tap0 once the helper makes it, without
 * address, routes or link), passes the resolver's sockets (bound before
 * the sandbox could bind their addresses), and drops the network
 * capabilities from everything we start (drop_net_caps). */
static int net_prepare(const struct lz_supervisor_args *a, struct lz_netpolicy *pol, char *msg, size_t msglen) {
    struct lz_rsmsg got;
    int w = wait_command(a->ctl_fd, LZ_RS_BOOT, NULL, LZ_RS_T_BOOT_CMD_MS, &got);
    if (w == -ETIMEDOUT) {
        snprintf(msg, msglen, "the coordinator did not launch the connectivity helper in time");
        return -ETIMEDOUT;
    }
    if (w < 0) {
        snprintf(msg, msglen, "the coordinator went away during network setup");
        return -EPIPE;
    }
    uint8_t buf[LZ_NETPOLICY_MAX_RULES * 6 + 64];
    ssize_t len = pread(a->policy_fd, buf, sizeof buf, 0);
    close(a->policy_fd);
    if (len < 0) {
        snprintf(msg, msglen, "cannot read the network policy: %s", strerror(errno));
        return -EIO;
    }
    uint8_t d[32];
    char hex[65];
    lz_netpolicy_digest(buf, (size_t)len, d);
    lz_hex(d, 32, hex);
    if (strcmp(hex, a->policy_digest) != 0) {
        snprintf(msg, msglen, "the network policy does not match its digest");
        return -EBADMSG;
    }
    struct lz_error err = { 0 };
    int r = lz_netpolicy_decode(buf, (size_t)len, pol, &err);
    if (r == 0)
        r = lz_netpolicy_prepare(&err);
    /* The resolver's sockets, while CAP_NET_ADMIN counts here (the netlink
     * socket's opener is checked at every route change): to the
     * coordinator, none kept. */
    if (r == 0 && (r = pass_dns(a->ctl_fd, &err)) < 0 && !err.msg[0])
        lz_error_set(&err, r, "cannot pass the resolver's sockets to the coordinator: %s", strerror(-r));
    if (r < 0) {
        snprintf(msg, msglen, "%s", err.msg);
        return r;
    }
    if ((r = drop_net_caps(false, false)) < 0) {
        snprintf(msg, msglen, "cannot drop network-administration capabilities: %s", strerror(-r));
        return r;
    }
    return 0;
}

/* NET: the helper's tap0 exists (runsc boots meanwhile). Configures it
 * with no route (lz_netpolicy_tap_up), installs the policy, reads it back
 * and probes it from this namespace's own view; with the host-address
 * watch (a->addr_fd, netfollow.h) starts the follower (*ret_follow, which
 * takes *pol) with a first reconcile; then drops the network capabilities
 * from our own sets too, but for the follower's CAP_NET_ADMIN. Only after
 * this can anything leave the namespace, and only as the policy says. */
static int net_install(const struct lz_supervisor_args *a, struct lz_netpolicy *pol, char *observed, size_t obslen,
                       struct lz_netfollow **ret_follow, char *msg, size_t msglen) {
    struct lz_error err = { 0 };
    int r = lz_netpolicy_tap_up(&err);
    /* Test builds: widen the window between the helper's tap and the
     * policy (tests/network/test_network.py, test_first_process_*). */
    long ms = lz_test_hook_ms("LAZARET_TEST_NET_DELAY_MS");
    if (r == 0 && ms > 0) {
        fprintf(stderr, "rs[%d]: WARNING: the policy waits %ld ms (a test hook; test builds only)\n", (int)getpid(),
                ms);
        lz_sleep_ms(ms);
    }
    if (r == 0)
        r = lz_netpolicy_install(pol, &err);
    if (r == 0)
        r = lz_netpolicy_observe(pol, observed, obslen, &err);
    if (r == 0)
        r = lz_netpolicy_probe(pol, &err);
    /* The follower, with a first reconcile: it closes the window between
     * the coordinator's snapshot of the host's addresses and now. */
    struct lz_netfollow *follow = NULL;
    if (r == 0 && a->addr_fd >= 0 && (r = lz_netfollow_new(a->addr_fd, pol, follow_log, NULL, &follow, &err)) == 0)
        r = lz_netfollow_reconcile(follow, "start", &err);
    if (r < 0) {
        lz_netfollow_free(follow);
        snprintf(msg, msglen, "%s", err.msg);
        return r;
    }
    if ((r = drop_net_caps(true, follow != NULL)) < 0) {
        lz_netfollow_free(follow);
        snprintf(msg, msglen, "cannot drop network-administration capabilities: %s", strerror(-r));
        return r;
    }
    *ret_follow = follow;
    return 0;
}

static int run_sandbox(const struct lz_supervisor_args *a);

/* The mailbox's two bounded tmpfs (supervisor.h, mailbox.h), before
 * anything of the sandbox exists; their roots go to the coordinator with
 * MAILBOX. Our own mount namespace holds them (private, above): the host
 * sees the empty directories, and they go when this namespace does. */
static int mount_mailbox(int ctl, const char *dir) {
    static const char *const sub[2] = { "req", "res" };
    int fds[2] = { -EBADF, -EBADF };
    char opts[128];
    snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%u,mode=0700,uid=0,gid=0", LZ_MBOX_TMPFS_BYTES,
             (unsigned)LZ_MBOX_TMPFS_INODES);
    int r = 0;
    for (int i = 0; i < 2 && r == 0; i++) {
        _cleanup_free_ char *path = lz_xasprintf("%s/%s", dir, sub[i]);
        struct statfs sf;
        if (mount("lazaret-mailbox", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
            r = -errno;
            ctl_fail(ctl, "cannot mount the escalation mailbox's %s/ (tmpfs, %s): %s", sub[i], opts, strerror(errno));
        } else if ((fds[i] = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            r = -errno;
            ctl_fail(ctl, "cannot open the escalation mailbox's %s/: %s", sub[i], strerror(errno));
        } else if (fstatfs(fds[i], &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
            r = -EXDEV;
            ctl_fail(ctl, "the escalation mailbox's %s/ is not the tmpfs just mounted", sub[i]);
        }
    }
    if (r == 0 && (r = lz_rschan_send_fds(ctl, LZ_RS_MAILBOX, NULL, NULL, fds, 2)) < 0)
        ctl_fail(ctl, "cannot pass the escalation mailbox: %s", strerror(-r));
    lz_closep(&fds[0]);
    lz_closep(&fds[1]);
    return r;
}

int lz_supervisor_main(const struct lz_supervisor_args *a) {
    int ctl = a->ctl_fd;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        ctl_fail(ctl, "cannot become a child subreaper: %s", strerror(errno));
        return 1;
    }
    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        ctl_fail(ctl, "cannot make mounts private: %s", strerror(errno));
        return 1;
    }
    if (a->mailbox && mount_mailbox(ctl, a->mailbox) < 0)
        return 1;
    if (a->n_persist == 0)
        return run_sandbox(a);

    /* The State Anchor, after the coordinator committed its intent. */
    struct lz_rsmsg got;
    int r = wait_command(ctl, LZ_RS_ANCHOR, NULL, LZ_RS_T_ANCHOR_CMD_MS, &got);
    if (r < 0) {
        ctl_fail(ctl, "the coordinator did not ask for the State Anchor");
        return 1;
    }
    struct lz_anchor_dir *ad = NULL;
    lz_anchor_layout(a->anchor_root, a->anchor_target, a->persist, a->n_persist, &ad);
    char ident[4096];
    struct lz_error err = { 0 };
    if ((r = lz_anchor_mount(a->rootfs, a->anchor_root, ad, a->n_persist, ident, sizeof ident, &err)) < 0) {
        ctl_fail(ctl, "%s", err.msg);
        lz_anchor_layout_free(ad, a->n_persist);
        return 1;
    }
    (void)lz_rschan_send(ctl, LZ_RS_ANCHORED, NULL, ident);
    lz_crash_point("rs-anchored");
    int code = run_sandbox(a);
    if (code != 0)
        ctl_exited(ctl, code, NULL); /* after a FAIL: nothing runs any more */
    /* The sandbox is gone. Unmount when the coordinator says so (it records
     * the release intent first), or at once when it is gone (lease loss). */
    lz_crash_point("rs-sandbox-stopped");
    r = wait_command(ctl, LZ_RS_UNMOUNT, NULL, LZ_RS_T_UNMOUNT_CMD_MS, &got);
    if (r == -EPROTO)
        fprintf(stderr, "rs[%d]: unexpected command \"%s\"; unmounting the State Anchor\n", (int)getpid(),
                lz_rschan_kind_name(got.kind));
    if ((r = lz_anchor_unmount(ad, a->n_persist, ident, &err)) < 0) {
        (void)lz_rschan_send(ctl, LZ_RS_UNMOUNT_FAILED, NULL, err.msg);
        code = 1;
    } else {
        (void)lz_rschan_send(ctl, LZ_RS_UNMOUNTED, NULL, NULL);
    }
    lz_anchor_layout_free(ad, a->n_persist);
    return code;
}

/* What run_sandbox started, stopped on every exit path (a cleanup
 * attribute): the sandbox (runsc kill and delete, once runsc ran; a runsc
 * still at its barrier is killed and reaped through its pidfd), then the
 * routers and their views, then the address follower. A FAIL is sent at
 * once (the starting client hears why without waiting for the stop); an
 * EXITED only after the stop, since it says the sandbox is gone. */
struct rs_run {
    const struct lz_supervisor_args *a;
    struct lz_child runsc, router;
    bool runsc_ran;
    struct lz_netfollow *follow;
    struct lz_netpolicy pol; /* from BOOT to NET (then the follower's, or cleared) */
    int outp[2], errp[2];
    bool exited; /* report EXITED (status, reason) after the stop */
    int status;
    const char *reason;
};

static void rs_run_end(struct rs_run *x) {
    if (x->runsc_ran) {
        stop_sandbox(x->a, &x->runsc);
    } else {
        lz_child_killp(&x->runsc);
    }
    stop_router(x->a, &x->router);
    owned[0] = owned[1] = NULL;
    lz_netfollow_free(x->follow);
    lz_netpolicy_clear(&x->pol);
    lz_close_pairp(&x->outp);
    lz_close_pairp(&x->errp);
    if (x->exited)
        ctl_exited(x->a->ctl_fd, x->status, x->reason);
}

/* FAIL (message) now; run_sandbox ends with exit code 1. */
#define rs_fail(x, ...) (ctl_fail((x)->a->ctl_fd, __VA_ARGS__), 1)
/* EXITED (status, reason or NULL) once everything is stopped. */
static void rs_exited(struct rs_run *x, int status, const char *reason) {
    x->exited = true;
    x->status = status;
    x->reason = reason;
}

static int run_sandbox(const struct lz_supervisor_args *a) {
    int ctl = a->ctl_fd;
    _cleanup_(rs_run_end) struct rs_run x = {
        .a = a, .runsc = LZ_CHILD_NULL, .router = LZ_CHILD_NULL, .outp = { -EBADF, -EBADF }, .errp = { -EBADF, -EBADF }
    };
    owned[1] = &x.router;
    int r = loopback_up();
    if (r < 0)
        return rs_fail(&x, "cannot bring up loopback: %s", strerror(-r));

    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD, 0 };
    _cleanup_close_ int sfd = lz_signalfd_block(sigs);
    if (sfd < 0)
        return rs_fail(&x, "signalfd: %s", strerror(-sfd));

    char msg[512];
    char observed[128] = "";
    if ((r = net_prepare(a, &x.pol, msg, sizeof msg)) < 0)
        return rs_fail(&x, "%s", msg);
    const char *wmode = lz_test_hook("LAZARET_TEST_WORKSPACE");
    if ((!wmode || strcmp(wmode, "nohot") != 0) && pipe2(hot_pipe, O_CLOEXEC) < 0)
        return rs_fail(&x, "pipe: %s", strerror(errno));
    r = start_routers(a, &x.router, msg, sizeof msg);
    /* The write end is the router's alone: init sees EOF when it ends. */
    lz_closep(&hot_pipe[1]);
    if (r < 0) {
        lz_closep(&hot_pipe[0]);
        return rs_fail(&x, "%s", msg);
    }

    if (pipe2(x.outp, O_CLOEXEC) < 0 || pipe2(x.errp, O_CLOEXEC) < 0)
        return rs_fail(&x, "pipe: %s", strerror(errno));
    _cleanup_free_ char *overlay = lz_xasprintf("--overlay2=root:dir=%s", a->overlay_dir);
    char *argv[] = { (char *)a->runsc,
                     (char *)"--root",
                     (char *)a->state_dir,
                     (char *)"--network=host",
                     (char *)"--ignore-cgroups",
                     overlay,
                     (char *)"run",
                     (char *)"--bundle",
                     (char *)a->bundle_dir,
                     (char *)a->container_id,
                     NULL };
    /* runsc passes its environment on to runsc-gofer and runsc-sandbox:
     * the bare helper set (procenv.h), never ours. */
    struct lz_spawn_opts o = { .path = a->runsc,
                               .argv = argv,
                               .envp = lz_helper_envp,
                               .stdin_fd = hot_pipe[0],
                               .stdout_fd = x.outp[1],
                               .stderr_fd = x.errp[1],
                               .setns_pidfd = -1,
                               .pdeathsig = SIGKILL,
                               .barrier = true };
    owned[0] = &x.runsc;
    r = lz_spawn(&o, &x.runsc);
    lz_closep(&hot_pipe[0]);
    lz_closep(&x.outp[1]);
    lz_closep(&x.errp[1]);
    if (r < 0)
        return rs_fail(&x, "cannot start runsc: %s", strerror(-r));
    if ((r = stage_child(ctl, &(struct lz_rs_slot){ LZ_SLOT_RUNSC, 0 }, &x.runsc, msg, sizeof msg)) < 0)
        return rs_fail(&x, "%s", msg);
    x.runsc_ran = true;
    struct tail t = { .len = 0 };
    char linebuf[256];
    size_t linelen = 0;
    /* READY once both lazaret-init said so and the policy is in place
     * (NET, while runsc boots): the model's StartSandbox after its
     * StartSidecar. */
    bool ready = false, init_ready = false, net_ready = false, stopping = false;
    long deadline = lz_now_ms() + a->start_timeout_ms;

    for (;;) {
        struct pollfd p[7 + LZ_RS_VOLUMES_MAX] = {
            { .fd = ctl, .events = POLLIN },
            { .fd = x.runsc.pidfd, .events = POLLIN },
            { .fd = x.outp[0], .events = POLLIN },
            { .fd = x.errp[0], .events = POLLIN },
            { .fd = sfd, .events = POLLIN },
            { .fd = x.router.pidfd, .events = POLLIN },
            { .fd = x.follow ? lz_netfollow_fd(x.follow) : -1, .events = POLLIN },
        };
        /* p[6] is the address follower; the volume routers come after. */
        size_t np = 7;
        for (size_t i = 0; i < a->n_volumes && i < LZ_RS_VOLUMES_MAX; i++)
            p[np++] = (struct pollfd){ .fd = vol_routers[i].pidfd, .events = POLLIN };
        int timeout = -1;
        if (!ready) {
            long left = deadline - lz_now_ms();
            if (left <= 0)
                return rs_fail(&x, "the sandbox did not start within %d s (%s: %s)", a->start_timeout_ms / 1000,
                               init_ready ? "no network policy" : "runsc", tail_last_line(&t));
            timeout = (int)left;
        }
        if (poll(p, (nfds_t)np, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        if (p[3].revents & (POLLIN | POLLHUP)) {
            char b[1024];
            ssize_t n = read(x.errp[0], b, sizeof b);
            if (n > 0)
                tail_add(&t, b, (size_t)n);
            else if (n == 0)
                lz_closep(&x.errp[0]);
        }
        if (p[2].revents & (POLLIN | POLLHUP)) {
            char b[256];
            ssize_t n = read(x.outp[0], b, sizeof b);
            if (n > 0 && !init_ready) {
                size_t take = (size_t)n < sizeof linebuf - 1 - linelen ? (size_t)n : sizeof linebuf - 1 - linelen;
                memcpy(linebuf + linelen, b, take);
                linelen += take;
                linebuf[linelen] = '\0';
                init_ready = strstr(linebuf, READY_LINE) != NULL;
            } else if (n == 0) {
                lz_closep(&x.outp[0]);
            }
        }
        if (p[4].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD) {
                    /* Orphans re-parented to us (we are a subreaper); our
                     * own runsc child is reaped through its pidfd. */
                    reap_orphans_except(&x.runsc);
                } else {
                    stopping = true;
                }
            }
        }
        if (p[0].revents) {
            struct lz_rsmsg m;
            int n = lz_rschan_recv(ctl, 0, &m);
            if (n == 0 || (n == 1 && m.kind == LZ_RS_STOP))
                stopping = true; /* STOP, or the coordinator is gone */
            if (n == 1 && m.kind == LZ_RS_NET && !net_ready && !stopping) {
                long t_net = lz_now_ms();
                if ((r = net_install(a, &x.pol, observed, sizeof observed, &x.follow, msg, sizeof msg)) < 0)
                    return rs_fail(&x, "%s", msg);
                net_ready = true;
                fprintf(stderr, "rs[%d]: network policy installed, read back and probed in %ld ms (%s)\n",
                        (int)getpid(), lz_now_ms() - t_net, observed);
                (void)lz_rschan_send(ctl, LZ_RS_NET_READY, NULL, observed);
            }
        }
        /* A volume router gone is a volume the sandbox cannot use safely. */
        bool vol_gone = false;
        for (size_t i = 7; i < np && !vol_gone; i++) {
            int st = 0;
            if ((p[i].revents & POLLIN) && lz_child_try_reap(&vol_routers[i - 7], &st) != 0) {
                fprintf(stderr, "rs[%d]: the router of volume %s exited with status %d\n", (int)getpid(),
                        a->vol_source[i - 7], st);
                vol_gone = true;
            }
        }
        if ((p[5].revents & POLLIN) || vol_gone) {
            int st = 0;
            if (vol_gone || lz_child_try_reap(&x.router, &st) != 0) {
                /* Without the router the workspace view is gone (and with it
                 * the Git policy): the sandbox cannot go on. */
                fprintf(stderr, "rs[%d]: lazaret-router exited with status %d; stopping the sandbox\n", (int)getpid(),
                        st);
                if (!ready)
                    return rs_fail(&x, "the workspace view (lazaret-router) exited");
                rs_exited(&x, 0, "router");
                return 1;
            }
        }
        if (p[6].revents) {
            struct lz_error ferr = { 0 };
            if (lz_netfollow_process(x.follow, &ferr) < 0) {
                /* A host address may be reachable: fail closed. */
                fprintf(stderr, "rs[%d]: %s; stopping the sandbox\n", (int)getpid(), ferr.msg);
                if (!ready)
                    return rs_fail(&x, "%s", ferr.msg);
                rs_exited(&x, 0, "address-follow");
                return 1;
            }
        }
        if (stopping) {
            rs_exited(&x, 0, NULL);
            return 0;
        }
        if (init_ready && net_ready && !ready) {
            ready = true;
            uint64_t ino[3] = { ns_ino("net"), ns_ino("user"), ns_ino("mnt") };
            _cleanup_free_ char *rstr = lz_xasprintf("%s" LZ_RS_TRANSPORT_SEP "%s", observed, ws_transport);
            (void)lz_rschan_send(ctl, LZ_RS_READY, ino, rstr);
        }
        if (p[1].revents & POLLIN) {
            int st = 0;
            if (lz_child_try_reap(&x.runsc, &st) == 1) {
                if (!ready)
                    return rs_fail(&x, "runsc exited with status %d before the sandbox was ready: %s", st,
                                   tail_last_line(&t));
                rs_exited(&x, st, NULL);
                return 0;
            }
        }
    }
}
