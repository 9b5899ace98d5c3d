/* hostexec.c — see hostexec.h. */
#include "hostexec.h"
#include "procenv.h"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/stat.h>

static int hash_fd(int fd, uint8_t out[32]) {
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    static uint8_t buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        crypto_hash_sha256_update(&st, buf, (size_t)n);
        off += n;
    }
    crypto_hash_sha256_final(&st, out);
    return 0;
}

int lz_hostexec_resolve(const char *argv0, struct lz_hostexec_ident *ret, struct lz_error *err) {
    if (!argv0 || argv0[0] != '/')
        return lz_error_set(err, -EINVAL, "the executable must be an absolute path (no PATH lookup is made)");
    char canon[PATH_MAX];
    if (!realpath(argv0, canon))
        return lz_error_set(err, -errno, "cannot resolve the executable %s: %s", argv0, strerror(errno));
    _cleanup_close_ int fd = open(canon, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return lz_error_set(err, -errno, "cannot open the executable %s: %s", canon, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        return lz_error_errno(err, -errno, "cannot stat the executable");
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
        return lz_error_set(err, -EACCES, "%s is not an executable regular file", canon);
    struct lz_hostexec_ident id = { .dev = st.st_dev,
                                    .ino = st.st_ino,
                                    .size = (uint64_t)st.st_size,
                                    .mtime_sec = st.st_mtim.tv_sec,
                                    .mtime_nsec = st.st_mtim.tv_nsec,
                                    .mode = st.st_mode,
                                    .uid = st.st_uid,
                                    .gid = st.st_gid };
    int r = hash_fd(fd, id.sha256);
    if (r < 0)
        return lz_error_errno(err, r, "cannot read the executable");
    id.path = lz_xstrdup(canon);
    *ret = id;
    return 0;
}

void lz_hostexec_ident_clear(struct lz_hostexec_ident *id) {
    free(id->path);
    *id = (struct lz_hostexec_ident){ 0 };
}

bool lz_hostexec_ident_equal(const struct lz_hostexec_ident *a, const struct lz_hostexec_ident *b) {
    return a->path && b->path && !strcmp(a->path, b->path) && a->dev == b->dev && a->ino == b->ino &&
        a->size == b->size && a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
        !memcmp(a->sha256, b->sha256, sizeof a->sha256);
}

/* Opens id->path and checks the recorded identity by fstat (not the
 * contents): the close-on-exec fd, or -ESTALE naming what changed. */
static int open_checked(const struct lz_hostexec_ident *id, int *ret_fd, struct lz_error *err) {
    _cleanup_close_ int fd = open(id->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return lz_error_set(err, errno == ENOENT || errno == ELOOP ? -ESTALE : -errno,
                            "the executable %s cannot be opened any more (%s): refused", id->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        return lz_error_errno(err, -errno, "cannot stat the executable");
    const char *what = NULL;
    if (!S_ISREG(st.st_mode) || st.st_mode != id->mode || st.st_uid != id->uid)
        what = "type, mode or owner";
    else if ((uint64_t)st.st_dev != id->dev || (uint64_t)st.st_ino != id->ino)
        what = "file (device/inode: it was replaced)";
    else if ((uint64_t)st.st_size != id->size)
        what = "size";
    else if (st.st_mtim.tv_sec != id->mtime_sec || st.st_mtim.tv_nsec != id->mtime_nsec)
        what = "modification time";
    if (what)
        return lz_error_set(err, -ESTALE, "the executable %s changed since it was approved (%s): refused", id->path,
                            what);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int lz_hostexec_open_verified(const struct lz_hostexec_ident *id, int *ret_fd, struct lz_error *err) {
    _cleanup_close_ int fd = -EBADF;
    int r = open_checked(id, &fd, err);
    if (r < 0)
        return r;
    uint8_t h[32];
    if ((r = hash_fd(fd, h)) < 0)
        return lz_error_errno(err, r, "cannot read the executable");
    if (sodium_memcmp(h, id->sha256, sizeof h) != 0)
        return lz_error_set(err, -ESTALE,
                            "the executable %s changed since it was approved (contents (SHA-256)): refused", id->path);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int lz_hostexec_cwd(int ws_fd, const char *ws_in_sandbox, const char *cwd, int *ret_fd, struct lz_error *err) {
    size_t wl = strlen(ws_in_sandbox);
    if (strncmp(cwd, ws_in_sandbox, wl) != 0 || (cwd[wl] != '\0' && cwd[wl] != '/'))
        return lz_error_set(err, -EPERM, "the working directory must be %s or below it", ws_in_sandbox);
    const char *rel = cwd + wl;
    while (*rel == '/')
        rel++;
    /* No "." or ".." components at all: the host path must be the one the
     * text names, not one reached by walking up. */
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return lz_error_set(err, -EPERM, "the working directory may not contain . or .. components");
        p += n;
        while (*p == '/')
            p++;
    }
    int fd = lz_openat_beneath(ws_fd, *rel ? rel : ".", O_PATH | O_DIRECTORY, 0, true);
    if (fd < 0)
        return lz_error_set(err, fd, "the working directory %s is not a directory inside the workspace: %s", cwd,
                            strerror(-fd));
    *ret_fd = fd;
    return 0;
}

char **lz_hostexec_env(const char *term) {
    const char *home = lz_home_dir();
    struct passwd *pw = getpwuid(getuid());
    char **e = lz_xcalloc(6, sizeof *e);
    size_t n = 0;
    e[n++] = lz_xstrdup(LZ_HELPER_PATH);
    if (home)
        e[n++] = lz_xasprintf("HOME=%s", home);
    if (pw && pw->pw_name)
        e[n++] = lz_xasprintf("USER=%s", pw->pw_name);
    e[n++] = lz_xstrdup("LANG=C.UTF-8");
    e[n++] = lz_xasprintf("TERM=%s", term ? term : "dumb");
    return e;
}

/* Refused above this size: the copy lives in memory (shmem) for as long as
 * the host process runs. */
#define SEAL_MAX_BYTES ((uint64_t)LZ_HOSTEXEC_SEAL_MAX)

/* A file owned by root and writable by neither group nor others, run by a
 * developer who is not root: nothing but host root can change its bytes
 * (the sandbox's users map to the developer and the developer's subordinate
 * IDs, never to host root; a replacement at its path is another inode, and
 * the open, verified one runs). It runs from itself: set-ID keeps its
 * privilege (a copy has none), and /proc/self/exe keeps naming it (Node's
 * process.execPath, Perl's $^X re-executing themselves). */
static bool run_original(const struct lz_hostexec_ident *id) {
    return geteuid() != 0 && id->uid == 0 && !(id->mode & (S_IWGRP | S_IWOTH));
}

int lz_hostexec_seal(const struct lz_hostexec_ident *id, int *ret_fd, uint8_t ret_sha256[32], struct lz_error *err) {
    if (id->size > SEAL_MAX_BYTES)
        return lz_error_set(err, -EFBIG,
                            "the executable %s is %llu bytes, more than the %llu that Lazaret copies to run it: "
                            "refused (run it yourself on the host)",
                            id->path, (unsigned long long)id->size, (unsigned long long)SEAL_MAX_BYTES);
    _cleanup_close_ int src = -EBADF;
    int r = open_checked(id, &src, err);
    if (r < 0)
        return r;
    const char *base = strrchr(id->path, '/');
    char name[64];
    snprintf(name, sizeof name, "lazaret:%s", base ? base + 1 : id->path);
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
#ifdef MFD_EXEC
    /* Kernels with vm.memfd_noexec (6.3+) may default to non-executable. */
    _cleanup_close_ int m = memfd_create(name, flags | MFD_EXEC);
    if (m < 0 && errno == EINVAL)
        m = memfd_create(name, flags);
#else
    _cleanup_close_ int m = memfd_create(name, flags);
#endif
    if (m < 0)
        return lz_error_errno(err, -errno, "cannot create the sealed copy of the executable");
    /* The hash is of the bytes copied, not of a separate read: what is
     * compared with the approved hash is exactly what will run. */
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    static uint8_t buf[65536];
    uint64_t total = 0;
    for (;;) {
        ssize_t n = pread(src, buf, sizeof buf, (off_t)total);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return lz_error_errno(err, -errno, "cannot read the executable");
        if (n == 0)
            break;
        if (total + (uint64_t)n > id->size)
            break; /* grew since it was approved: the hash below differs */
        crypto_hash_sha256_update(&st, buf, (size_t)n);
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(m, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return lz_error_errno(err, -errno, "cannot write the sealed copy of the executable");
            off += w;
        }
        total += (uint64_t)n;
    }
    uint8_t h[32];
    crypto_hash_sha256_final(&st, h);
    if (total != id->size || sodium_memcmp(h, id->sha256, sizeof h) != 0)
        return lz_error_set(err, -ESTALE,
                            "the executable %s changed since it was approved (contents (SHA-256)): refused", id->path);
    if (fcntl(m, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
        return lz_error_errno(err, -errno, "cannot seal the copy of the executable");
    /* A read-only descriptor of the sealed file: the child holds no
     * writable one (older kernels refuse to execute a file open for
     * writing, ETXTBSY). */
    char pp[64];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", m);
    int ro = open(pp, O_RDONLY | O_CLOEXEC);
    if (ro >= 0) {
        close(m);
        m = ro;
    }
    memcpy(ret_sha256, h, sizeof h);
    *ret_fd = TAKE_FD(m);
    return 0;
}

int lz_hostexec_start(const struct lz_hostexec_spec *s, struct lz_child *ret, struct lz_error *err) {
    _cleanup_close_ int fd = -EBADF;
    /* The bytes that run are the approved ones (equal SHA-256, checked on
     * the copy), so the audit's executable_sha256 is the hash of what ran. */
    uint8_t ran[32];
    int r = run_original(s->id) ? lz_hostexec_open_verified(s->id, &fd, err) : lz_hostexec_seal(s->id, &fd, ran, err);
    if (r < 0)
        return r;
    char cwd[32];
    snprintf(cwd, sizeof cwd, "/proc/self/fd/%d", s->cwd_fd);
    /* Kept open without close-on-exec in the child only: a #! script's
     * interpreter is handed /dev/fd/N and reads the sealed copy there. */
    int keep[] = { fd };
    struct lz_spawn_opts o = {
        .path = s->id->path,
        .argv = s->argv,
        .envp = s->envp,
        .stdin_fd = s->stdin_fd,
        .stdout_fd = s->stdout_fd,
        .stderr_fd = s->stderr_fd,
        .keep_fds = keep,
        .n_keep_fds = 1,
        .setns_pidfd = -1,
        .cwd = s->cwd_fd >= 0 ? cwd : NULL,
        .new_session = true,
        .ctty = s->ctty,
        .barrier = true,
        .exec_by_fd = true,
        .exec_fd = fd,
    };
    if ((r = lz_spawn(&o, ret)) < 0)
        return lz_error_set(err, r, "cannot start %s: %s", s->id->path, strerror(-r));
    return 0;
}

int lz_hostexec_kill(struct lz_child *c, int timeout_ms, int *ret_status) {
    if (c->pidfd < 0)
        return -ECHILD;
    /* The leader is not reaped yet, so its PID is still its process
     * group's ID and names no other group. */
    if (c->pid > 0)
        (void)kill(-c->pid, SIGKILL);
    lz_child_signal(c, SIGKILL);
    return lz_child_wait(c, timeout_ms, ret_status);
}
