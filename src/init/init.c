/* lazaret-init — PID 1 of the Agent Sandbox.
 *
 * Statically linked so it runs in any image. It announces readiness on
 * stdout (the Runtime Supervisor waits for this line before it accepts the
 * sandbox as running), reaps orphans, and exits on SIGTERM/SIGINT/SIGHUP so
 * that the sandbox stops when the supervisor asks. Sessions are separate
 * `runsc exec` processes; init never runs agent code.
 *
 * Before it announces readiness it puts the Domain CA of credentials
 * (docs/credentials.md) into the image's trust store, or takes an earlier
 * one out: the Host Coordinator binds the certificate read-only at
 * TRUST_SRC when the profile has a credential the TLS gate serves. The
 * bundle gets it between two marker lines (replaced at every start, so
 * one start's CA never piles up on another's), and LOCAL_CRT holds it so
 * that an update-ca-certificates inside (a package's trigger) keeps it.
 * Whatever fails here is said on stderr and the sandbox boots anyway:
 * tools then fail to verify the credential hosts, which says why.
 *
 * Hot reload (docs/hot-reload.md, hotnotify.h): when its stdin is a pipe,
 * the write end is the workspace router's, which writes the workspace
 * paths the host changed. gVisor raises no inotify event for a change it
 * did not make (gVisor issue 8089), so a child of init (never PID 1
 * itself, which must stay free to reap and to stop) pokes each path
 * through the sandbox's own file system: it sets the mtime to the poke
 * value, which the router recognises and does not apply to the host, and
 * gVisor raises IN_MODIFY for the path and its directory; a regular file
 * is poked through a descriptor opened for writing (never written), which
 * adds IN_OPEN and IN_CLOSE_WRITE. A path that is gone (deleted, renamed
 * away) pokes its directory instead: its watchers rescan. Only what lies
 * on /workspace's own file system (same st_dev) is poked: a volume mounted
 * below it, or a symlink out of it, is left alone. Without a pipe on stdin
 * (no router told it, /dev/null) no child is started, and a pipe that does
 * not start with the router's greeting (LZ_HOT_HELLO) ends it: no channel,
 * no pokes. Whatever reaches the pipe from inside can make the child poke
 * only paths below /workspace, which changes nothing anywhere.
 */
#include "hotnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRUST_SRC "/run/lazaret/trust/domain-ca.crt"
#define BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_TMP "/etc/ssl/certs/.ca-certificates.crt.lazaret"
#define LOCAL_DIR "/usr/local/share/ca-certificates"
#define LOCAL_CRT LOCAL_DIR "/lazaret-domain-ca.crt"
#define MARK_BEGIN "# lazaret: the Domain CA of credentials, replaced at every start\n"
#define MARK_END "# lazaret: end of the Domain CA\n"
#define CA_MAX (64 * 1024)
#define BUNDLE_MAX (16 * 1024 * 1024)

/* The whole regular file at path (NUL-terminated), at most max bytes;
 * NULL if absent, not regular, or larger. */
static char *slurp(const char *path, size_t max, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *b = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max &&
        (b = malloc((size_t)st.st_size + 1))) {
        size_t n = 0;
        while (n < (size_t)st.st_size) {
            ssize_t k = read(fd, b + n, (size_t)st.st_size - n);
            if (k <= 0)
                break;
            n += (size_t)k;
        }
        b[n] = '\0';
        *len = n;
    }
    close(fd);
    return b;
}

static int write_all(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes parts to path through tmp and a rename, mode 0644. */
static int replace(const char *path, const char *tmp, const char *const *parts, const size_t *lens, int n) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    int r = 0;
    for (int i = 0; i < n && r == 0; i++)
        r = write_all(fd, parts[i], lens[i]);
    if (close(fd) < 0)
        r = -1;
    if (r == 0 && rename(tmp, path) < 0)
        r = -1;
    if (r < 0)
        unlink(tmp);
    return r;
}

static void trust_domain_ca(void) {
    size_t ca_len = 0, bl = 0;
    char *ca = slurp(TRUST_SRC, CA_MAX, &ca_len);
    char *b = slurp(BUNDLE, BUNDLE_MAX, &bl);
    if (b) {
        /* The bundle without an earlier start's block. */
        size_t keep_a = bl, keep_b = bl;
        char *s = strstr(b, MARK_BEGIN);
        if (s) {
            char *e = strstr(s, MARK_END);
            keep_a = (size_t)(s - b);
            keep_b = e ? (size_t)(e - b) + strlen(MARK_END) : bl;
        }
        if (ca || s) {
            bool nl = keep_a > 0 && b[keep_a - 1] != '\n';
            const char *parts[] = { b,         nl ? "\n" : "", ca ? MARK_BEGIN : "", ca ? ca : "", ca ? MARK_END : "",
                                    b + keep_b };
            size_t lens[] = { keep_a,     nl ? 1 : 0, ca ? strlen(MARK_BEGIN) : 0, ca_len, ca ? strlen(MARK_END) : 0,
                              bl - keep_b };
            if (replace(BUNDLE, BUNDLE_TMP, parts, lens, 6) < 0)
                fprintf(stderr, "lazaret-init: cannot update %s: %s\n", BUNDLE, strerror(errno));
        }
    } else if (ca) {
        fprintf(stderr, "lazaret-init: this image has no %s; the Domain CA is only in %s\n", BUNDLE, TRUST_SRC);
    }
    struct stat st;
    if (ca && stat(LOCAL_DIR, &st) == 0 && S_ISDIR(st.st_mode)) {
        const char *parts[] = { ca };
        size_t lens[] = { ca_len };
        if (replace(LOCAL_CRT, LOCAL_CRT ".tmp", parts, lens, 1) < 0)
            fprintf(stderr, "lazaret-init: cannot write %s: %s\n", LOCAL_CRT, strerror(errno));
    } else if (!ca) {
        unlink(LOCAL_CRT);
    }
    free(ca);
    free(b);
}

/* Pokes `path` (relative to /workspace, wsfd) or, when it is gone or not
 * a file, directory or symlink, the nearest directory above it that is
 * there.
 * Returns 0 when something was poked. */
static int poke(int wsfd, dev_t wsdev, char *path) {
    static const struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
                                           { .tv_sec = LZ_HOT_POKE_SEC, .tv_nsec = LZ_HOT_POKE_NSEC } };
    for (;;) {
        bool root = strcmp(path, ".") == 0;
        struct stat st;
        int fd = -1;
        if (fstatat(wsfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == wsdev) {
            /* A symlink, by its name (never followed): it has no
             * descriptor to check again. Only the agent could swap
             * something else in between, and only something it could set
             * the mtime of itself. */
            if (S_ISLNK(st.st_mode) && utimensat(wsfd, path, ts, AT_SYMLINK_NOFOLLOW) == 0)
                return 0;
            if (S_ISREG(st.st_mode))
                fd = openat(wsfd, path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
            /* Not writable (mode, a running executable): read-only, which
             * still takes a poke. Directories too. */
            if (fd < 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
                fd = openat(wsfd, path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        }
        if (fd >= 0) {
            /* The descriptor's file, checked again: what was stat'ed may
             * have been replaced by something else in between. */
            struct stat fst;
            int rc = -1;
            if (fstat(fd, &fst) == 0 && fst.st_dev == wsdev && (S_ISREG(fst.st_mode) || S_ISDIR(fst.st_mode)))
                rc = futimens(fd, ts);
            close(fd);
            if (rc == 0)
                return 0;
        }
        if (root)
            return -1;
        char *slash = strrchr(path, '/');
        if (slash)
            *slash = '\0';
        else
            path[0] = '.', path[1] = '\0';
    }
}

/* The child's loop: records until the pipe is closed. `buf` keeps a
 * partial record between reads. The router coalesces: a path is queued
 * once until it is written here. */
static _Noreturn void hot_main(void) {
    int wsfd = open("/workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat wst;
    if (wsfd < 0 || fstat(wsfd, &wst) < 0)
        _exit(0);
    static char buf[4 * LZ_HOT_RECORD_MAX + 16384];
    size_t have = 0;
    /* The router's greeting first, else this pipe is not the channel. */
    const size_t hello = strlen(LZ_HOT_HELLO);
    while (have < hello) {
        ssize_t n = read(0, buf + have, hello - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0);
        have += (size_t)n;
    }
    if (memcmp(buf, LZ_HOT_HELLO, hello) != 0)
        _exit(0);
    have = 0;
    for (;;) {
        ssize_t n = read(0, buf + have, sizeof buf - have);
        if (n == 0 || (n < 0 && errno != EINTR))
            _exit(0);
        if (n < 0)
            continue;
        have += (size_t)n;
        size_t off = 0;
        for (;;) {
            size_t used = 0;
            const char *path = NULL;
            int r = lz_hot_next(buf + off, have - off, &used, &path);
            if (r == 0)
                break;
            off += used;
            if (r != 1)
                continue;
            (void)poke(wsfd, wst.st_dev, (char *)path);
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
}

int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    trust_domain_ca();
    static const char ready[] = "lazaret-init: ready\n";
    if (write(1, ready, sizeof ready - 1) < 0)
        return 1;
    struct stat st;
    if (fstat(0, &st) == 0 && S_ISFIFO(st.st_mode)) {
        pid_t pid = fork();
        if (pid == 0) {
            sigprocmask(SIG_UNBLOCK, &set, NULL);
            hot_main();
        }
        /* fork failed: no hot reload, the sandbox runs as before. */
    }
    /* The child's alone: the router sees EPIPE once it is gone. */
    (void)close(0);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}
