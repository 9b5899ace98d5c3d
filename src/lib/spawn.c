/* spawn.c — see spawn.h. */
#include "spawn.h"
#include "procenv.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static int sys_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Runs in the child after clone3: async-signal-safe calls only. Reports
 * failure as an errno over status_w and exits 127. */
__attribute__((noreturn)) static void child_main(const struct lz_spawn_opts *o, int barrier_r, int status_w) {
    int e = 0;
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    if (o->pdeathsig && prctl(PR_SET_PDEATHSIG, o->pdeathsig) < 0)
        goto fail;

    if (barrier_r >= 0) {
        char b;
        ssize_t n;
        do
            n = read(barrier_r, &b, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1) /* the parent gave up on us */
            _exit(127);
    }
    if (o->setns_pidfd >= 0 && setns(o->setns_pidfd, o->setns_flags) < 0)
        goto fail;
    if (o->new_session && setsid() < 0)
        goto fail;

    /* Move stdio into place without clobbering each other. */
    int src[3] = { o->stdin_fd, o->stdout_fd, o->stderr_fd };
    int nullfd = -1;
    for (int i = 0; i < 3; i++) {
        if (src[i] < 0) {
            if (nullfd < 0 && (nullfd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
                goto fail;
            src[i] = nullfd;
        }
        if (src[i] < 3) {
            int d = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
            if (d < 0)
                goto fail;
            src[i] = d;
        }
    }
    for (int i = 0; i < 3; i++)
        if (dup2(src[i], i) < 0)
            goto fail;
    if (o->ctty && ioctl(0, TIOCSCTTY, 0) < 0)
        goto fail;
    if (o->cwd && chdir(o->cwd) < 0)
        goto fail;
    /* Every descriptor above stdio, whatever its number, is closed at exec:
     * one that reached us without O_CLOEXEC (a library's) never reaches a
     * helper. Marking them close-on-exec, rather than closing them, keeps
     * the status pipe open until exec and lets the kept fds keep their
     * numbers: they alone lose the flag again. Linux 5.11; on an older
     * kernel the spawn fails rather than leak descriptors. */
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        goto fail;
    for (size_t i = 0; i < o->n_keep_fds; i++) {
        int fl = fcntl(o->keep_fds[i], F_GETFD);
        if (fl >= 0)
            fcntl(o->keep_fds[i], F_SETFD, fl & ~FD_CLOEXEC);
    }
    /* Never our own environment by default: the client's may hold the
     * secrets its profile references (procenv.h). */
    if (o->exec_by_fd)
        syscall(SYS_execveat, o->exec_fd, "", o->argv, o->envp ? o->envp : lz_helper_envp, AT_EMPTY_PATH);
    else
        execve(o->path, o->argv, o->envp ? o->envp : lz_helper_envp);
fail:
    e = errno;
    (void)!write(status_w, &e, sizeof e);
    _exit(127);
}

int lz_spawn(const struct lz_spawn_opts *o, struct lz_child *ret) {
    int status_pipe[2], barrier_pipe[2] = { -1, -1 };
    if (pipe2(status_pipe, O_CLOEXEC) < 0)
        return -errno;
    if (o->barrier && pipe2(barrier_pipe, O_CLOEXEC) < 0) {
        int e = -errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        return e;
    }
    int pidfd = -1;
    struct clone_args ca = {
        .flags = CLONE_PIDFD | o->clone_flags,
        .pidfd = (uint64_t)(uintptr_t)&pidfd,
        .exit_signal = SIGCHLD,
    };
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid < 0) {
        int e = -errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        if (barrier_pipe[0] >= 0) {
            close(barrier_pipe[0]);
            close(barrier_pipe[1]);
        }
        return e;
    }
    if (pid == 0) {
        if (barrier_pipe[1] >= 0)
            close(barrier_pipe[1]);
        close(status_pipe[0]);
        child_main(o, barrier_pipe[0], status_pipe[1]);
    }
    close(status_pipe[1]);
    if (barrier_pipe[0] >= 0)
        close(barrier_pipe[0]);
    struct lz_child c = LZ_CHILD_NULL;
    c.pid = (pid_t)pid;
    c.pidfd = pidfd;
    if (o->barrier) {
        c.barrier_fd = barrier_pipe[1];
        c.status_fd = status_pipe[0];
        *ret = c;
        return 0;
    }
    int e = 0;
    ssize_t n = lz_read_full(status_pipe[0], &e, sizeof e);
    close(status_pipe[0]);
    if (n == (ssize_t)sizeof e) {
        int st;
        lz_child_wait(&c, -1, &st);
        lz_child_close(&c);
        return -e;
    }
    *ret = c;
    return 0;
}

int lz_child_release(struct lz_child *c) {
    if (c->barrier_fd < 0)
        return -EINVAL;
    char b = 1;
    int r = lz_write_full(c->barrier_fd, &b, 1);
    lz_closep(&c->barrier_fd);
    if (r < 0)
        return r;
    int e = 0;
    ssize_t n = lz_read_full(c->status_fd, &e, sizeof e);
    lz_closep(&c->status_fd);
    if (n == (ssize_t)sizeof e)
        return -e;
    return 0;
}

int lz_child_signal(const struct lz_child *c, int sig) {
    if (c->pidfd < 0)
        return -ESRCH;
    return sys_pidfd_send_signal(c->pidfd, sig) < 0 ? -errno : 0;
}

int lz_status_from_siginfo(int code, int status) {
    if (code == CLD_EXITED)
        return status;
    return 128 + status;
}

int lz_child_try_reap(struct lz_child *c, int *ret_status) {
    if (c->pidfd < 0)
        return -ECHILD;
    siginfo_t si = { 0 };
    if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) < 0)
        return -errno;
    if (si.si_pid == 0)
        return 0;
    if (ret_status)
        *ret_status = lz_status_from_siginfo(si.si_code, si.si_status);
    lz_child_close(c);
    return 1;
}

int lz_child_wait(struct lz_child *c, int timeout_ms, int *ret_status) {
    if (c->pidfd < 0)
        return -ECHILD;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int r = lz_child_try_reap(c, ret_status);
        if (r != 0)
            return r < 0 ? r : 0;
        int wait_ms = -1;
        if (timeout_ms >= 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long el = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
            if (el >= timeout_ms)
                return -ETIMEDOUT;
            wait_ms = (int)(timeout_ms - el);
        }
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        if (poll(&p, 1, wait_ms) < 0 && errno != EINTR)
            return -errno;
    }
}

int lz_child_stop(struct lz_child *c, int grace_ms, int *ret_status) {
    if (c->pidfd < 0)
        return -ECHILD;
    lz_child_signal(c, SIGTERM);
    int r = lz_child_wait(c, grace_ms, ret_status);
    if (r != -ETIMEDOUT)
        return r;
    lz_child_signal(c, SIGKILL);
    return lz_child_wait(c, -1, ret_status);
}

void lz_child_close(struct lz_child *c) {
    lz_closep(&c->pidfd);
    lz_closep(&c->barrier_fd);
    lz_closep(&c->status_fd);
}

int lz_spawn_capture(char *const argv[], int timeout_ms, char *out, size_t cap, int *ret_status) {
    int p[2];
    if (cap)
        out[0] = '\0';
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    struct lz_spawn_opts o = {
        .path = argv[0], .argv = argv, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = p[1], .setns_pidfd = -1
    };
    struct lz_child c;
    int r = lz_spawn(&o, &c);
    close(p[1]);
    if (r < 0) {
        close(p[0]);
        return r;
    }
    if (cap) {
        ssize_t n = lz_read_full(p[0], out, cap - 1);
        out[n > 0 ? n : 0] = '\0';
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = '\0';
    }
    close(p[0]);
    int st = 0;
    r = lz_child_wait(&c, timeout_ms, &st);
    if (r < 0) {
        lz_child_signal(&c, SIGKILL);
        lz_child_wait(&c, -1, &st);
        lz_child_close(&c);
        return r;
    }
    *ret_status = st;
    return 0;
}

/* The value of PATH in envp, else LZ_HELPER_PATH's. */
static const char *env_path(char *const *envp) {
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], "PATH=", 5) == 0)
            return envp[i] + 5;
    return LZ_HELPER_PATH + 5;
}

/* The broker execs an absolute path: resolve name in the tool's PATH the
 * way execvp does, except that relative entries (which would depend on the
 * working directory) are skipped. -ENOENT when not found, -EACCES when
 * found but not executable. */
int lz_find_program(const char *name, char *const *envp, char **ret) {
    if (strchr(name, '/')) {
        *ret = lz_xstrdup(name);
        return 0;
    }
    int r = -ENOENT;
    for (const char *d = env_path(envp);;) {
        const char *end = strchrnul(d, ':');
        if (end > d && d[0] == '/') {
            char *cand = lz_xasprintf("%.*s/%s", (int)(end - d), d, name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
                if (access(cand, X_OK) == 0) {
                    *ret = cand;
                    return 0;
                }
                r = -EACCES;
            }
            free(cand);
        }
        if (!*end)
            return r;
        d = end + 1;
    }
}
