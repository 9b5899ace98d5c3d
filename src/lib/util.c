/* util.c — see util.h. */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

int lz_error_vset(struct lz_error *err, int code, const char *fmt, va_list ap) {
    if (err) {
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        err->code = code;
    }
    return code;
}

int lz_error_set(struct lz_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lz_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int lz_error_prefix(struct lz_error *err, int code, const char *fmt, ...) {
    if (!err)
        return code;
    char pre[LZ_ERROR_MAX], old[LZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    if (err->code == 0) {
        err->code = code;
        snprintf(err->msg, sizeof err->msg, "%s: %s", pre, strerror(-code));
    } else {
        snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
    }
    return err->code;
}

void *lz_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}
void *lz_xcalloc(size_t n, size_t m) {
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p)
        abort();
    return p;
}
void *lz_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}
char *lz_xstrdup(const char *s) {
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}
char *lz_xstrndup(const char *s, size_t n) {
    char *p = strndup(s, n);
    if (!p)
        abort();
    return p;
}
char *lz_xvasprintf(const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    return s;
}

char *lz_xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = lz_xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

int lz_snprintf(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (r < 0)
        return -EINVAL;
    if ((size_t)r >= size)
        return -ENAMETOOLONG;
    return 0;
}

ssize_t lz_read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int lz_thread_start_blocked(pthread_t *t, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int lz_write_full(int fd, const void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)r;
    }
    return 0;
}

int lz_read_fd(int fd, size_t max, char **ret_buf, size_t *ret_len) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    /* The size is a hint: the file may change while it is read, so it is
     * read to EOF, and a byte beyond max proves it too large. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    _cleanup_free_ char *buf = lz_xmalloc(cap + 1);
    for (;;) {
        ssize_t r = lz_read_full(fd, buf + len, cap - len);
        if (r < 0)
            return (int)r;
        len += (size_t)r;
        if (len < cap)
            break; /* a short read is EOF */
        if (len > max)
            return -EFBIG;
        cap = cap > max / 2 ? max + 1 : cap * 2;
        buf = lz_xrealloc(buf, cap + 1);
    }
    buf[len] = '\0';
    *ret_buf = TAKE_PTR(buf);
    if (ret_len)
        *ret_len = len;
    return 0;
}

int lz_read_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len) {
    _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    return lz_read_fd(fd, max, ret_buf, ret_len);
}

static int write_file_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode, bool sync) {
    char tmp[4096];
    int r = lz_snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (r < 0)
        return r;
    _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    r = lz_write_full(fd, buf, len);
    if (r == 0 && sync && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, path) < 0)
        r = -errno;
    if (r < 0)
        unlinkat(dirfd, tmp, 0);
    return r;
}

int lz_write_file_atomic_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode) {
    return write_file_at(dirfd, path, buf, len, mode, true);
}

int lz_write_file_volatile_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode) {
    return write_file_at(dirfd, path, buf, len, mode, false);
}

int lz_mkdir_p(const char *path, mode_t mode) {
    if (!path || path[0] != '/')
        return -EINVAL;
    size_t n = strlen(path);
    _cleanup_free_ char *p = lz_xstrdup(path);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
            p[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int lz_opendir_at(int dirfd, DIR **ret) {
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret = d;
    return 0;
}

int lz_cmp_strp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void lz_strv_free(char **v, size_t n) {
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

char **lz_strv_dup(char *const *v, size_t n) {
    char **r = lz_xcalloc(n + 1, sizeof *r);
    for (size_t i = 0; i < n; i++)
        r[i] = lz_xstrdup(v[i]);
    return r;
}

int lz_dir_names(int dirfd, size_t max, char ***ret, size_t *ret_n) {
    DIR *d;
    int r = lz_opendir_at(dirfd, &d);
    if (r < 0)
        return r;
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n == max) {
            r = -EFBIG;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = lz_xrealloc(v, cap * sizeof *v);
        }
        v[n++] = lz_xstrdup(de->d_name);
    }
    if (r == 0 && errno)
        r = -errno;
    closedir(d);
    if (r < 0) {
        lz_strv_free(v, n);
        return r;
    }
    if (n)
        qsort(v, n, sizeof *v, lz_cmp_strp);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int rm_rf_children(int dfd, dev_t dev, int depth) {
    if (depth > 4096)
        return -ELOOP;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -errno;
    }
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            ret = -errno;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (st.st_dev != dev) {
                ret = -EXDEV;
                continue;
            }
            int c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c < 0) {
                /* A directory without r/x permission: grant it to ourselves. */
                if (fchmodat(dirfd(d), de->d_name, 0700, 0) == 0)
                    c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (c < 0) {
                    ret = -errno;
                    continue;
                }
            }
            int r = rm_rf_children(c, dev, depth + 1);
            if (r < 0)
                ret = r;
            if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && ret == 0)
                ret = -errno;
        } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && ret == 0) {
            ret = -errno;
        }
    }
    closedir(d);
    return ret;
}

int lz_rm_rf_at(int dirfd, const char *name) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
    int c = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c < 0) {
        if (fchmodat(dirfd, name, 0700, 0) == 0)
            c = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (c < 0)
            return -errno;
    }
    int r = rm_rf_children(c, st.st_dev, 0);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && r == 0)
        r = -errno;
    return r;
}

void lz_hex(const uint8_t *in, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int lz_hex_value(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *lz_home_dir(void) {
    const char *h = secure_getenv("HOME");
    if (h && h[0] == '/')
        return h;
    struct passwd *pw = getpwuid(getuid());
    if (pw && pw->pw_dir && pw->pw_dir[0] == '/')
        return pw->pw_dir;
    return NULL;
}

void lz_logf(lz_log_fn log, void *ud, const char *fmt, ...) {
    if (!log)
        return;
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    log(ud, b);
}

#ifdef LZ_TEST_HOOKS
const char *lz_test_hook(const char *name) { return getenv(name); }
#endif

long lz_test_hook_ms(const char *name) {
    const char *v = lz_test_hook(name);
    long ms = v ? strtol(v, NULL, 10) : 0;
    return ms > 0 && ms <= 10000 ? ms : 0;
}

void lz_sleep_ms(long ms) {
    if (ms > 0)
        (void)nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000L }, NULL);
}

long lz_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int lz_signalfd_block(const int *signals) {
    sigset_t mask;
    sigemptyset(&mask);
    for (; *signals; signals++)
        sigaddset(&mask, *signals);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return -errno;
    int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

static volatile sig_atomic_t alarm_fired;
static void on_alarm(int sig) {
    (void)sig;
    alarm_fired = 1;
}

/* Blocking flock bounded by SIGALRM (flock has no timed form). */
int lz_flock_timeout(int fd, int seconds) {
    struct sigaction sa = { .sa_handler = on_alarm }, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    alarm_fired = 0;
    alarm((unsigned)seconds);
    int r = flock(fd, LOCK_EX);
    int e = errno;
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    if (r == 0)
        return 0;
    return (e == EINTR && alarm_fired) ? -ETIMEDOUT : -e;
}

int lz_error_errno(struct lz_error *err, int r, const char *what) {
    if (r >= 0)
        r = -EIO; /* a caller's bug: still a failure with a message */
    return lz_error_set(err, r, "%s: %s", what, strerror(-r));
}

int lz_openat_beneath(int dirfd, const char *path, int flags, mode_t mode, bool allow_symlinks) {
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY)),
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (allow_symlinks ? 0 : RESOLVE_NO_SYMLINKS),
    };
    for (int tries = 0;; tries++) {
        long r = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (r >= 0)
            return (int)r;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        if (tries >= 64)
            return -EAGAIN;
    }
}

void lz_buf_add(struct lz_buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = lz_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
