/* util.h — shared conventions for every Lazaret module.
 *
 * Error contract (docs/hacking.md): a failing function returns a negative
 * errno-style int and, when given a non-NULL `struct lz_error *`, fills it
 * with a human message. Library code never prints; only src/cli/ and the
 * process entry points print. Out-parameters are named ret_*, come last,
 * and are untouched on failure. File descriptors start at -EBADF and are
 * always O_CLOEXEC.
 */
#pragma once

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LZ_ERROR_MAX 1024

struct lz_error {
    int code;               /* negative errno, 0 when unset */
    char msg[LZ_ERROR_MAX]; /* one line, no trailing newline */
};

/* Sets err (if non-NULL) and returns code (which must be negative). */
int lz_error_set(struct lz_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int lz_error_vset(struct lz_error *err, int code, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* The error contract's helper for a failed system call or library call
 * that returned the negative errno r: sets err to "what: strerror(-r)"
 * and returns r, so a negative return always comes with a message:
 *     if ((r = lz_write_full(fd, b, n)) < 0)
 *         return lz_error_errno(err, r, "cannot write the policy");  */
int lz_error_errno(struct lz_error *err, int r, const char *what);
/* Prepends "prefix: " to an already-set message; returns err->code or code. */
int lz_error_prefix(struct lz_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline void lz_freep(void *p) { free(*(void **)p); }
static inline void lz_closep(int *fd) {
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
    *fd = -EBADF;
}
static inline void lz_fclosep(FILE **f) {
    if (*f)
        fclose(*f);
}
static inline void lz_close_pairp(int (*pair)[2]) {
    lz_closep(&(*pair)[0]);
    lz_closep(&(*pair)[1]);
}

#define _cleanup_(x) __attribute__((cleanup(x)))
#define _cleanup_free_ _cleanup_(lz_freep)
#define _cleanup_close_ _cleanup_(lz_closep)
#define _cleanup_fclose_ _cleanup_(lz_fclosep)
/* int fds[2] = { -EBADF, -EBADF } from pipe2()/socketpair(). */
#define _cleanup_close_pair_ _cleanup_(lz_close_pairp)

#define TAKE_PTR(p)                                                                                                    \
    ({                                                                                                                 \
        __typeof__(p) _t = (p);                                                                                        \
        (p) = NULL;                                                                                                    \
        _t;                                                                                                            \
    })
#define TAKE_FD(fd)                                                                                                    \
    ({                                                                                                                 \
        int _t = (fd);                                                                                                 \
        (fd) = -EBADF;                                                                                                 \
        _t;                                                                                                            \
    })

#define LZ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation that aborts on OOM (there is no sane recovery for a CLI). */
void *lz_xmalloc(size_t n);
void *lz_xcalloc(size_t n, size_t m);
void *lz_xrealloc(void *p, size_t n);
char *lz_xstrdup(const char *s);
char *lz_xstrndup(const char *s, size_t n);
char *lz_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *lz_xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Bounded formatting into a fixed buffer: returns -ENAMETOOLONG on truncation. */
int lz_snprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Full read/write loops over EINTR and short transfers. */
ssize_t lz_read_full(int fd, void *buf, size_t n);    /* returns bytes read (< n only at EOF) or -errno */
int lz_write_full(int fd, const void *buf, size_t n); /* 0 or -errno */
/* pthread_create with every signal blocked in the new thread (signals stay
 * the starting thread's to take); 0 or pthread_create's error number. */
int lz_thread_start_blocked(pthread_t *t, void *(*fn)(void *), void *arg);

/* openat2() confined to dirfd: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, and
 * RESOLVE_NO_SYMLINKS unless allow_symlinks (then only symlinks that stay
 * beneath dirfd are followed). O_CLOEXEC is always added, O_NOCTTY unless
 * O_PATH (which openat2 refuses with it); EAGAIN (a concurrent rename seen
 * by the kernel's check) is retried a bounded number of times. Returns the
 * fd or -errno (-EXDEV: the path left dirfd, -ELOOP: a symlink). */
int lz_openat_beneath(int dirfd, const char *path, int flags, mode_t mode, bool allow_symlinks);

/* Reads the whole regular file open at fd (at most max bytes; -EINVAL when
 * not a regular file, -EFBIG when larger) into a NUL-terminated buffer;
 * ret_len may be NULL. */
int lz_read_fd(int fd, size_t max, char **ret_buf, size_t *ret_len);
/* lz_read_fd on path opened relative to dirfd. */
int lz_read_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len);
/* Writes a file atomically (tmp + fsync + rename) relative to dirfd. */
int lz_write_file_atomic_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode);
/* The same without the fsync: readers see the old file or the whole new
 * one, but a crash may leave either or none. For the runtime directory
 * (a generation's bundle, mailbox): no start after a crash reads what a
 * dead generation left there, it removes it. */
int lz_write_file_volatile_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode);

/* A directory stream of dirfd's directory with its own offset (dirfd may
 * be O_PATH and is not consumed); 0 or -errno. */
int lz_opendir_at(int dirfd, DIR **ret);
/* The entry names of dirfd's directory but "." and "..", sorted (strcmp);
 * -EFBIG when there are more than max. Free with lz_strv_free. */
int lz_dir_names(int dirfd, size_t max, char ***ret, size_t *ret_n);
/* Frees n strings and the array. */
void lz_strv_free(char **v, size_t n);
/* A copy of n strings, NULL-terminated (free with lz_strv_free(v, n)). */
char **lz_strv_dup(char *const *v, size_t n);
/* strcmp on two char * elements, for qsort and bsearch. */
int lz_cmp_strp(const void *a, const void *b);

/* mkdir -p with the given mode for every created component; absolute path. */
int lz_mkdir_p(const char *path, mode_t mode);
/* rm -rf relative to dirfd, never following symlinks or crossing mounts. */
int lz_rm_rf_at(int dirfd, const char *name);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void lz_hex(const uint8_t *in, size_t n, char *out);
/* The value of the hex digit c (either case), or -1. */
int lz_hex_value(int c);

/* CLOCK_MONOTONIC in milliseconds, for bounding waits. */
long lz_now_ms(void);

/* Blocks the given signals (a 0-terminated list) and returns a
 * non-blocking, close-on-exec signalfd for them, or -errno. */
int lz_signalfd_block(const int *signals);

/* flock(LOCK_EX) bounded by SIGALRM (flock has no timed form); -ETIMEDOUT
 * when it was not granted within `seconds`. */
int lz_flock_timeout(int fd, int seconds);

/* A writer into a fixed buffer for encoders of wire formats: a write that
 * does not fit sets `overflow` and every later write is dropped, so an
 * encoder checks once at the end. */
struct lz_wbuf {
    uint8_t *p;
    size_t cap, len;
    bool overflow;
};
static inline void lz_wbuf_put(struct lz_wbuf *w, const void *b, size_t n) {
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    if (n)
        memcpy(w->p + w->len, b, n);
    w->len += n;
}

/* A growable byte string, always NUL-terminated once anything was added
 * (p is NULL before). Free p with free(). */
struct lz_buf {
    char *p;
    size_t len, cap;
};
void lz_buf_add(struct lz_buf *b, const void *s, size_t n);
static inline void lz_buf_adds(struct lz_buf *b, const char *s) { lz_buf_add(b, s, strlen(s)); }
static inline void lz_buf_addc(struct lz_buf *b, char c) { lz_buf_add(b, &c, 1); }

/* $HOME, or the passwd entry's home directory. NULL if neither. */
const char *lz_home_dir(void);

/* Where a module reports what it did, one line at a time. */
typedef void (*lz_log_fn)(void *ud, const char *line);
/* Formats one line (at most 1023 bytes) and hands it to log(ud, line);
 * nothing when log is NULL. */
void lz_logf(lz_log_fn log, void *ud, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A test hook's value (LAZARET_TEST_CRASH, LAZARET_TEST_BOOT_ID,
 * LAZARET_TEST_NETFOLLOW: environment variables the tests set to crash at a
 * step, fake a reboot, ...), or NULL when unset. Only builds configured
 * with -Dtest_hooks=true (LZ_TEST_HOOKS) read them; elsewhere this is NULL
 * at compile time, so a release binary neither acts on them nor holds
 * their names. */
#ifdef LZ_TEST_HOOKS
const char *lz_test_hook(const char *name);
#else
#define lz_test_hook(name) ((void)sizeof(name), (const char *)NULL)
#endif
/* A test hook that names a delay in milliseconds (LAZARET_TEST_*_MS): its
 * value when it is a number from 1 to 10000, else 0 (unset, malformed, or
 * a release build). */
long lz_test_hook_ms(const char *name);
/* Sleeps ms milliseconds; nothing when ms <= 0. */
void lz_sleep_ms(long ms);
