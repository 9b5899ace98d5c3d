/* spawn.h — the spawn/reap broker.
 *
 * Every child Lazaret may later own durably is started here: clone3 with
 * CLONE_PIDFD, so the parent holds a pidfd from the first instant and never
 * signals or waits by numeric PID. A child may be held at a barrier after
 * clone and before exec: the parent records ownership (and, for a new user
 * namespace, writes its ID maps) and only then releases it ("causal child
 * acquisition"). A failure between clone and exec is reported to the parent
 * as an errno over a close-on-exec pipe, so lz_spawn() either returns a
 * child that reached exec (or the barrier) or an error.
 */
#pragma once

#include "util.h"
#include <sys/types.h>

struct lz_child {
    pid_t pid;      /* locator only: never used to signal or wait */
    int pidfd;      /* authority */
    int barrier_fd; /* write end of the barrier pipe, -EBADF once released */
    int status_fd;  /* read end of the exec-status pipe while at the barrier */
};
#define LZ_CHILD_NULL ((struct lz_child){ .pid = 0, .pidfd = -EBADF, .barrier_fd = -EBADF, .status_fd = -EBADF })

struct lz_spawn_opts {
    const char *path; /* executable (absolute) */
    char *const *argv;
    char *const *envp;                  /* NULL: only LZ_HELPER_PATH (procenv.h); never the caller's environ */
    int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
    const int *keep_fds;                /* extra fds kept open in the child (their numbers are preserved) */
    size_t n_keep_fds;
    unsigned long clone_flags; /* extra CLONE_NEW* flags for clone3 */
    int setns_pidfd;           /* >= 0: join these namespaces of that process before exec */
    int setns_flags;           /* CLONE_NEW* set for setns */
    const char *cwd;           /* NULL: unchanged */
    bool new_session;          /* setsid() */
    bool ctty;                 /* make stdin the controlling terminal (needs new_session) */
    bool barrier;              /* hold the child until lz_child_release() */
    int pdeathsig;             /* 0: none */
    /* Run the open file exec_fd (execveat AT_EMPTY_PATH) instead of path:
     * exactly the object the caller opened and checked (hostexec.h). For a
     * script the kernel hands the interpreter /dev/fd/N, so exec_fd must
     * also be in keep_fds. */
    bool exec_by_fd;
    int exec_fd;
};

/* Starts a child. On success *ret holds its pidfd (and barrier if asked). */
int lz_spawn(const struct lz_spawn_opts *o, struct lz_child *ret);
/* Releases a child held at its barrier and waits until it has exec'd
 * (returns the child's errno if exec failed). */
int lz_child_release(struct lz_child *c);
/* pidfd_send_signal; -ESRCH once the child is gone. */
int lz_child_signal(const struct lz_child *c, int sig);
/* Waits for exit, at most timeout_ms (-1: forever). Returns 0 and the
 * waitid-style status (exit code, or 128+signal) or -ETIMEDOUT. */
int lz_child_wait(struct lz_child *c, int timeout_ms, int *ret_status);
/* Non-blocking reap: 1 reaped, 0 still running, <0 error. */
int lz_child_try_reap(struct lz_child *c, int *ret_status);
/* SIGTERM, wait grace_ms, SIGKILL, wait. Returns the status. */
int lz_child_stop(struct lz_child *c, int grace_ms, int *ret_status);
void lz_child_close(struct lz_child *c);

/* Runs argv[0] (absolute) with stdin /dev/null and stdout+stderr captured,
 * for short tool runs (newuidmap, `runsc --version`). The first line of
 * the output (at most cap-1 bytes read) lands in out. Waits at most
 * timeout_ms after the output closes, then kills. Returns 0 with the exit
 * status in *ret_status, -ETIMEDOUT when it had to be killed, or the spawn
 * error. */
int lz_spawn_capture(char *const argv[], int timeout_ms, char *out, size_t cap, int *ret_status);

/* The broker execs an absolute path: name (a bare name) resolved in the
 * PATH of envp (LZ_HELPER_PATH's when envp has none) the way execvp
 * does, relative entries skipped; a name with a '/' as it is. 0, -ENOENT
 * (not found) or -EACCES (found, not executable). */
int lz_find_program(const char *name, char *const *envp, char **ret);

/* Helper: status from a siginfo_t of waitid: code or 128+signal. */
int lz_status_from_siginfo(int code, int status);
