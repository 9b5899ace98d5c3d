/* hostexec.c — see hostexec.h. */
#include "hostexec.h"
#include "procenv.h"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
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

int lz_hostexec_open_verified(const struct lz_hostexec_ident *id, int *ret_fd, struct lz_error *err) {
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
    uint8_t h[32];
    if (!what) {
        int r = hash_fd(fd, h);
        if (r < 0)
            return lz_error_errno(err, r, "cannot read the executable");
        if (sodium_memcmp(h, id->sha256, sizeof h) != 0)
            what = "contents (SHA-256)";
    }
    if (what)
        return lz_error_set(err, -ESTALE, "the executable %s changed since it was approved (%s): refused", id->path,
                            what);
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

int lz_hostexec_start(const struct lz_hostexec_spec *s, struct lz_child *ret, struct lz_error *err) {
    _cleanup_close_ int fd = -EBADF;
    int r = lz_hostexec_open_verified(s->id, &fd, err);
    if (r < 0)
        return r;
    char cwd[32];
    snprintf(cwd, sizeof cwd, "/proc/self/fd/%d", s->cwd_fd);
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
