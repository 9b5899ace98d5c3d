/* lazaret-router — the workspace router.
 *
 *   lazaret-router --source DIR --mountpoint MP [--ready-fd N]
 *                  [--protect REL]... [--cache-timeout SECONDS]
 *                  [--watch SECONDS [--notify-fd N]] [--max-held-fds N] [--allow-other] [--quiet]
 *                  [--plain] [--deny-link-target ABS]...
 *                  [--linked-worktree NAME] [--refusal-fd N [--refusal-tag T]]
 *                  [--fuse-transport auto|classic|pinned] [--test-break-commit N]
 *
 * A libfuse3 low-level passthrough of the real workspace directory that asks
 * the Git-protection policy (src/lib/router.h, docs/security-git.md) before
 * every operation that changes the tree. How it handles paths, caching and
 * its files: router_int.h. This file: the options, the FUSE session and the
 * operations table.
 */
#include "readiness.h"
#include "router_int.h"

/* ---- process ---- */

static void usage(FILE *f) {
    fputs("usage: lazaret-router --source DIR --mountpoint MP [--ready-fd N]\n"
          "                      [--protect REL]... [--cache-timeout SECONDS]\n"
          "                      [--watch SECONDS [--notify-fd N]] [--max-held-fds N] [--allow-other] [--quiet]\n"
          "                      [--eager-open]\n"
          "                      [--plain] [--deny-link-target ABS]...\n"
          "                      [--linked-worktree NAME] [--refusal-fd N [--refusal-tag T]]\n"
          "                      [--fuse-transport auto|classic|pinned] [--test-break-commit N]\n"
          "                      [--ignored-state DIR [--git-home DIR] [--git-xdg-config DIR]\n"
          "                       [--no-ignore-rules] [--host-tool NAME]...]\n",
          f);
}

static int parse_fd(const char *s, int *ret_fd) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX)
        return -EINVAL;
    *ret_fd = (int)v;
    return 0;
}

static void rt_init(void *userdata, struct fuse_conn_info *conn) {
    struct router *r = userdata;
    r->no_open = !r->eager_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
    /* With no OPEN sent, an O_TRUNC the kernel leaves to OPEN would be lost:
     * let the kernel truncate with a SETATTR (checked like a write). */
    if (r->no_open)
        conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
    /* Host edits must be seen: no writeback cache. No export support (it
     * would bring lookups of ".." and by handle). No ACLs, no kill-priv
     * offload (set-id bits are stripped here anyway), no cached symlinks. */
    conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_POSIX_ACL |
                              FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_CACHE_SYMLINKS);
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
        conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    /* With io_uring, replies go into the ring's entries, not into
     * /dev/fuse (no splice), and each entry holds a whole WRITE: 128 KiB
     * keeps them small (uring.c). */
    if (rt_transport_uring_wanted()) {
        conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_MOVE);
        conn->max_write = RT_URING_MAX_WRITE;
        return;
    }
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_READ)
        conn->want |= FUSE_CAP_SPLICE_READ;
}

static const struct fuse_lowlevel_ops rt_ops = {
    .init = rt_init,
    .lookup = rt_lookup,
    .forget = rt_forget,
    .forget_multi = rt_forget_multi,
    .getattr = rt_getattr,
    .setattr = rt_setattr,
    .readlink = rt_readlink,
    .mknod = rt_mknod,
    .mkdir = rt_mkdir,
    .symlink = rt_symlink,
    .link = rt_link,
    .unlink = rt_unlink,
    .rmdir = rt_rmdir,
    .rename = rt_rename,
    .open = rt_open,
    .create = rt_create,
    .read = rt_read_buf,
    .write_buf = rt_write_buf,
    .flush = rt_flush,
    .release = rt_release,
    .fsync = rt_fsync,
    .opendir = rt_opendir,
    .readdir = rt_readdir,
    .readdirplus = rt_readdirplus,
    .releasedir = rt_releasedir,
    .fsyncdir = rt_fsyncdir,
    .statfs = rt_statfs,
    .fallocate = rt_fallocate,
    .lseek = rt_lseek,
    .copy_file_range = rt_copy_file_range,
    /* No xattr, ioctl, lock or access handlers: the kernel gets ENOSYS once
     * and then answers EOPNOTSUPP (xattrs) or handles locks locally. */
};

int main(int argc, char **argv) {
    static const struct option opts[] = {
        { "source", required_argument, NULL, 's' },
        { "mountpoint", required_argument, NULL, 'm' },
        { "ready-fd", required_argument, NULL, 'r' },
        { "protect", required_argument, NULL, 'p' },
        { "cache-timeout", required_argument, NULL, 't' },
        { "watch", required_argument, NULL, 'w' },
        { "test-no-invalidate", no_argument, NULL, 'N' },
        { "eager-open", no_argument, NULL, 'E' },
        { "max-held-fds", required_argument, NULL, 'f' },
        { "allow-other", no_argument, NULL, 'a' },
        { "quiet", no_argument, NULL, 'q' },
        { "plain", no_argument, NULL, 'P' },
        { "deny-link-target", required_argument, NULL, 'd' },
        { "ignored-state", required_argument, NULL, 'I' },
        { "git-home", required_argument, NULL, 'H' },
        { "git-xdg-config", required_argument, NULL, 'X' },
        { "host-tool", required_argument, NULL, 'T' },
        { "no-ignore-rules", no_argument, NULL, 'R' },
        { "linked-worktree", required_argument, NULL, 'W' },
        { "refusal-fd", required_argument, NULL, 'F' },
        { "refusal-tag", required_argument, NULL, 'G' },
        { "notify-fd", required_argument, NULL, 'n' },
        { "fuse-transport", required_argument, NULL, 'U' },
        { "test-break-commit", required_argument, NULL, 'B' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct router r = {
        .root.fd = -EBADF,
        .root.wd = -1,
        .root.cfd = -1,
        .proc_fd = -EBADF,
        .ino_fd = -EBADF,
        .stop_fd = -EBADF,
        .ref_fd = -1,
        .hot_fd = -EBADF,
        .lock = PTHREAD_MUTEX_INITIALIZER,
    };
    pthread_t watcher;
    bool watching = false;
    const char *source = NULL, *mountpoint = NULL;
    enum rt_transport_mode transport = RT_TRANSPORT_AUTO;
    bool transport_started = false;
    int ready_fd = -1, c, ret = 1;
    bool allow_other = false;
    struct lz_error err = { 0 };
    struct rt_ignored_opts ign = { 0 };
    struct lz_hot_queue *hotq = NULL;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': source = optarg; break;
        case 'm': mountpoint = optarg; break;
        case 'n':
            /* The hot-reload channel (watch.c): written without blocking,
             * never read. A small pipe: what the sandbox has yet to poke
             * stays bounded, the rest coalesces in the router's queue. */
            if (parse_fd(optarg, &r.hot_fd) < 0 || fcntl(r.hot_fd, F_SETFL, O_NONBLOCK) < 0 ||
                fcntl(r.hot_fd, F_SETFD, FD_CLOEXEC) < 0) {
                fprintf(stderr, "lazaret-router: --notify-fd %s is not an open file descriptor\n", optarg);
                return 2;
            }
            (void)fcntl(r.hot_fd, F_SETPIPE_SZ, 16384);
            /* The empty pipe takes it whole; else no channel. */
            if (write(r.hot_fd, LZ_HOT_HELLO, strlen(LZ_HOT_HELLO)) != (ssize_t)strlen(LZ_HOT_HELLO)) {
                close(r.hot_fd);
                r.hot_fd = -EBADF;
            }
            break;
        case 'r':
            if (parse_fd(optarg, &ready_fd) < 0 || fcntl(ready_fd, F_GETFD) < 0) {
                fprintf(stderr, "lazaret-router: --ready-fd %s is not an open file descriptor\n", optarg);
                return 2;
            }
            break;
        case 'p': {
            char *p;
            if (lz_router_normalize(optarg, &p) < 0) {
                fprintf(stderr, "lazaret-router: --protect %s: not a relative path inside the source\n", optarg);
                return 2;
            }
            r.protect = lz_xrealloc(r.protect, (r.n_protect + 1) * sizeof *r.protect);
            r.protect[r.n_protect++] = p;
            break;
        }
        case 't': {
            char *end;
            errno = 0;
            r.timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(r.timeout >= 0.0 && r.timeout <= 60.0)) {
                fprintf(stderr, "lazaret-router: --cache-timeout %s: want seconds between 0 and 60\n", optarg);
                return 2;
            }
            break;
        }
        case 'w': {
            char *end;
            errno = 0;
            r.watch_timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(r.watch_timeout >= 0.0 && r.watch_timeout <= 3600.0)) {
                fprintf(stderr, "lazaret-router: --watch %s: want seconds between 0 and 3600\n", optarg);
                return 2;
            }
            r.watch = true;
            break;
        }
        /* Tests only: shows that without the invalidation host edits are
         * not seen (the positive control of the freshness test). */
        case 'N': r.no_inval = true; break;
        /* An OPEN and a RELEASE for every file opened (the router before
         * zero-message opens; benchmarks compare the two). */
        case 'E': r.eager_open = true; break;
        case 'f': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 8 || v > (1ul << 24)) {
                fprintf(stderr, "lazaret-router: --max-held-fds %s: want a number from 8 on\n", optarg);
                return 2;
            }
            r.max_held = v;
            break;
        }
        case 'a': allow_other = true; break;
        case 'P': r.plain = true; break;
        case 'd': {
            /* Canonical when it exists, so that it compares with resolved
             * paths; else as given (it may be made later). */
            char *p = realpath(optarg, NULL);
            if (optarg[0] != '/' || r.n_deny >= 64) {
                free(p);
                fprintf(stderr, "lazaret-router: --deny-link-target %s: want an absolute path (at most 64)\n", optarg);
                return 2;
            }
            r.deny = lz_xrealloc(r.deny, (r.n_deny + 1) * sizeof *r.deny);
            if (!p) {
                p = lz_xstrdup(optarg);
                for (size_t l = strlen(p); l > 1 && p[l - 1] == '/'; l--)
                    p[l - 1] = '\0';
            }
            r.deny[r.n_deny++] = p;
            break;
        }
        case 'q': r.quiet = true; break;
        case 'W':
            /* One name under worktrees/, as git makes it. */
            if (!optarg[0] || strchr(optarg, '/') || !strcmp(optarg, ".") || !strcmp(optarg, "..") ||
                strlen(optarg) > 255) {
                fprintf(stderr, "lazaret-router: --linked-worktree %s: want a worktree's name\n", optarg);
                return 2;
            }
            r.worktree = optarg;
            break;
        case 'F':
            if (parse_fd(optarg, &r.ref_fd) < 0 || fcntl(r.ref_fd, F_GETFD) < 0) {
                fprintf(stderr, "lazaret-router: --refusal-fd %s is not an open file descriptor\n", optarg);
                return 2;
            }
            break;
        case 'G': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v >= LZ_REFUSAL_TAGS) {
                fprintf(stderr, "lazaret-router: --refusal-tag %s: want a number below %d\n", optarg, LZ_REFUSAL_TAGS);
                return 2;
            }
            r.ref_tag = (uint8_t)v;
            break;
        }
        /* auto: io_uring when the kernel offers it; classic and pinned
         * (one /dev/fuse thread on one CPU) for tests and the bench. */
        case 'U':
            if (!strcmp(optarg, "auto"))
                transport = RT_TRANSPORT_AUTO;
            else if (!strcmp(optarg, "classic"))
                transport = RT_TRANSPORT_CLASSIC;
            else if (!strcmp(optarg, "pinned"))
                transport = RT_TRANSPORT_PINNED;
            else {
                fprintf(stderr, "lazaret-router: --fuse-transport %s: want auto, classic or pinned\n", optarg);
                return 2;
            }
            break;
        case 'B': {
            char *end;
            errno = 0;
            unsigned long n = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || n == 0) {
                fprintf(stderr, "lazaret-router: --test-break-commit %s: want a positive number\n", optarg);
                return 2;
            }
            rt_transport_test_break_commit(n);
            break;
        }
        case 'I': ign.state = optarg; break;
        case 'H': ign.home = optarg; break;
        case 'X': ign.xdg = optarg; break;
        case 'R': ign.no_rules = true; break;
        case 'T':
            if (ign.n_host_tools >= LZ_HOSTTOOLS_MAX || lz_hosttools_name_invalid(optarg)) {
                fprintf(stderr, "lazaret-router: --host-tool %s: not a name, or more than %d\n", optarg,
                        LZ_HOSTTOOLS_MAX);
                return 2;
            }
            ign.host_tools = lz_xrealloc(ign.host_tools, (ign.n_host_tools + 1) * sizeof *ign.host_tools);
            ign.host_tools[ign.n_host_tools++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!source || !mountpoint || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (r.hot_fd >= 0 && (!r.watch || r.no_inval)) {
        fprintf(stderr, "lazaret-router: --notify-fd wants --watch (the host's changes come from its events)\n");
        return 2;
    }
    if (r.hot_fd >= 0) {
        hotq = lz_xcalloc(1, sizeof *hotq);
        lz_hot_queue_init(hotq);
        r.hotq = hotq;
    }
    if (r.worktree && (r.plain || ign.state)) {
        fprintf(stderr,
                "lazaret-router: --linked-worktree serves a Git directory: not with --plain or "
                "--ignored-state\n");
        return 2;
    }
    if (ready_fd >= 0)
        (void)fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
    if (r.ref_fd >= 0)
        (void)fcntl(r.ref_fd, F_SETFD, FD_CLOEXEC);

    /* Modes come from the kernel with the caller's umask applied already. */
    umask(0);
    /* No real handle may be 0 (handle 0 is a zero-message open): keep the
     * standard fds open. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR | O_CLOEXEC) < 0)
            return 1;
    for (size_t i = 0; i < RT_DATA_SLOTS; i++)
        r.data[i].fd[0] = r.data[i].fd[1] = r.data[i].fd[2] = -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "lazaret-router: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
        return 1;
    }
    /* One O_PATH fd per inode the kernel holds. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Half for held inode fds, the rest for open files and directories. */
    if (r.max_held == 0)
        r.max_held = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 > 64
            ? (size_t)(rl.rlim_cur / 2)
            : 512;

    struct ignored_job ij = { .r = &r, .o = &ign, .sfd = -1 };
    pthread_t ignored;
    bool ignoring = false;
    if (setup_router(&r, source, mountpoint, &err) < 0 || setup_ignored_check(&r, &ign, &ij.sfd, &err) < 0) {
        fprintf(stderr, "lazaret-router: %s\n", err.msg);
        teardown_router(&r);
        return 1;
    }
    if (ij.sfd >= 0) {
        int prc = lz_thread_start_blocked(&ignored, ignored_open_main, &ij);
        if (prc != 0) {
            fprintf(stderr, "lazaret-router: cannot start reading the repository: %s\n", strerror(prc));
            close(ij.sfd);
            teardown_router(&r);
            return 1;
        }
        ignoring = true;
    }

    char *fargv[] = { argv[0], (char *)"-o",
                      allow_other ? (char *)"fsname=lazaret-router,subtype=lazaret,allow_other"
                                  : (char *)"fsname=lazaret-router,subtype=lazaret",
                      NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    /* With the hot-reload channel, the operations that change the host
     * mark what they change first (watch.c, "the sandbox's own changes"). */
    struct fuse_lowlevel_ops ops = rt_ops;
    r.hot = r.hot_fd >= 0;
    if (r.hot)
        hot_wrap_ops(&ops);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, &r);
    if (!se) {
        fprintf(stderr, "lazaret-router: cannot create the FUSE session\n");
        goto out;
    }
    if (fuse_set_signal_handlers(se) != 0) {
        fprintf(stderr, "lazaret-router: cannot install signal handlers\n");
        goto out_session;
    }
    if (fuse_session_mount(se, mountpoint) != 0) {
        fprintf(stderr, "lazaret-router: cannot mount on %s\n", mountpoint);
        goto out_signals;
    }
    r.se = se;
    /* INIT first (the mount queued it), so that the readiness report says
     * which transport the kernel and the router agreed on. */
    char tdesc[160] = "";
    int trc = rt_transport_setup(&r, se, transport);
    if (trc == 0) {
        transport_started = true;
        trc = rt_transport_init(tdesc, sizeof tdesc);
    }
    if (trc < 0) {
        fprintf(stderr, "lazaret-router: the FUSE session did not start (INIT): %s\n", strerror(-trc));
        goto out_unmount;
    }
    if (!r.quiet)
        fprintf(stderr, "lazaret-router: FUSE transport: %s\n", tdesc);
    if (r.watch) {
        /* Signals (SIGTERM ends the session loop) go to the main thread. */
        int prc = lz_thread_start_blocked(&watcher, watch_main, &r);
        if (prc != 0) {
            fprintf(stderr, "lazaret-router: cannot start the watcher: %s\n", strerror(prc));
            goto out_unmount;
        }
        watching = true;
    }
    if (ready_fd >= 0) {
        int rc = lz_ready_write(ready_fd, LZ_READY_OK, tdesc);
        close(ready_fd);
        ready_fd = -1;
        if (rc < 0) {
            fprintf(stderr, "lazaret-router: cannot report readiness: %s\n", strerror(-rc));
            goto out_unmount;
        }
    }

    if (ignoring) {
        pthread_join(ignored, NULL);
        ignoring = false;
        close(ij.sfd);
        ij.sfd = -1;
        if (ij.rc < 0) {
            fprintf(stderr, "lazaret-router: %s\n", ij.err.msg);
            goto out_unmount;
        }
    }
    int rc = rt_transport_loop();
    /* 0 when unmounted, a signal number after SIGTERM/SIGINT/SIGHUP. */
    ret = rc < 0 ? 1 : 0;
    if (rc < 0)
        fprintf(stderr, "lazaret-router: session loop failed: %s\n", strerror(-rc));

out_unmount:
    if (transport_started) {
        rt_uring_stop();
        if (rt_transport_bad() > 0)
            fprintf(stderr, "lazaret-router: %lu io_uring request(s) refused for lengths that disagree\n",
                    rt_transport_bad());
    }
    if (watching) {
        uint64_t one = 1;
        if (write(r.stop_fd, &one, sizeof one) == (ssize_t)sizeof one)
            pthread_join(watcher, NULL);
        else
            pthread_detach(watcher);
    }
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
out:
    if (ignoring)
        pthread_join(ignored, NULL);
    if (ij.sfd >= 0)
        close(ij.sfd);
    fuse_opt_free_args(&args);
    if (ready_fd >= 0)
        close(ready_fd);
    teardown_router(&r);
    free(ign.host_tools);
    free(hotq);
    if (r.hot_fd >= 0)
        close(r.hot_fd);
    return ret;
}
