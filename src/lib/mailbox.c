/* mailbox.c — see mailbox.h. */
#include "mailbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sodium.h>

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase is not canonical */
}

int lz_mbox_hex_decode(const char *hex, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return hex[2 * n] == '\0' || hex[2 * n] == '.' || hex[2 * n] == '\n' ? 0 : -EINVAL;
}

void lz_mbox_id_hex(const uint8_t id[LZ_RECORD_ID_LEN], char out[2 * LZ_RECORD_ID_LEN + 1]) {
    lz_hex(id, LZ_RECORD_ID_LEN, out);
}

int lz_mbox_name_parse(const char *name, struct lz_mbox_name *ret) {
    struct lz_mbox_name n = { 0 };
    size_t len = strnlen(name, LZ_MBOX_NAME_MAX + 1);
    if (len > LZ_MBOX_NAME_MAX || len < 2 * LZ_RECORD_ID_LEN + 4 || name[2 * LZ_RECORD_ID_LEN] != '.')
        return -EINVAL;
    if (lz_mbox_hex_decode(name, n.request_id, LZ_RECORD_ID_LEN) < 0)
        return -EINVAL;
    const char *kind = name + 2 * LZ_RECORD_ID_LEN + 1;
    const char *dot = strrchr(kind, '.');
    if (!dot || dot == kind)
        return -EINVAL;
    n.kind = 0;
    for (unsigned k = 1; k <= LZ_REC_KIND_MAX; k++) {
        const char *kn = lz_record_name(k);
        if (kn && strlen(kn) == (size_t)(dot - kind) && !memcmp(kn, kind, (size_t)(dot - kind)))
            n.kind = k;
    }
    if (!n.kind)
        return -EINVAL;
    const char *s = dot + 1;
    if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 20)
        return -EINVAL;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    n.seq = v;
    *ret = n;
    return 0;
}

int lz_mbox_name_format(const struct lz_mbox_name *n, char *buf, size_t cap) {
    char hex[2 * LZ_RECORD_ID_LEN + 1];
    const char *kn = lz_record_name(n->kind);
    if (!kn)
        return -EINVAL;
    lz_mbox_id_hex(n->request_id, hex);
    return lz_snprintf(buf, cap, "%s.%s.%llu", hex, kn, (unsigned long long)n->seq);
}

const char *lz_mbox_refusal_name(enum lz_mbox_refusal r) {
    switch (r) {
    case LZ_MBOX_OK: return "ok";
    case LZ_MBOX_GONE: return "gone";
    case LZ_MBOX_SYMLINK: return "a symbolic link";
    case LZ_MBOX_NOT_REGULAR: return "not a regular file";
    case LZ_MBOX_LINKED: return "a file with more than one link";
    case LZ_MBOX_TOO_LARGE: return "larger than a record may be";
    case LZ_MBOX_IO: return "unreadable";
    }
    return "?";
}

/* Frees the pages of fd's regular file (one link) before it is unlinked:
 * gVisor keeps the host descriptor of a file the sandbox wrote or read for
 * as long as its dentry is cached, after our unlink too, and the bounded
 * tmpfs (mailbox.h) would stay full of what was already taken. Truncation
 * frees them whoever holds the inode. Through /proc/self/fd: the same
 * inode, never a name the sandbox may have replaced; a file without write
 * permission gets it first (we own what is in the mailbox). Best effort. */
static void reclaim(int fd, const struct stat *st) {
    if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || st->st_size == 0)
        return;
    char p[40];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    if (!(st->st_mode & S_IWUSR))
        (void)chmod(p, 0600);
    int w = open(p, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (w >= 0) {
        (void)ftruncate(w, 0);
        close(w);
    }
}

int lz_mbox_remove(int dirfd, const char *name) {
    int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0)
        reclaim(fd, &st);
    if (fd >= 0)
        close(fd);
    return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
}

/* Removes a refused entry whatever it is (a directory recursively, never
 * following a link). */
static void drop(int dirfd, const char *name, bool dir) {
    if (dir)
        (void)lz_rm_rf_at(dirfd, name);
    else
        (void)unlinkat(dirfd, name, 0);
}

int lz_mbox_take(int dirfd, const char *name, uint8_t *buf, size_t cap, size_t *ret_len,
                 enum lz_mbox_refusal *ret_why) {
    *ret_why = LZ_MBOX_OK;
    /* O_NONBLOCK: a FIFO must not block the coordinator's loop on open. */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            *ret_why = LZ_MBOX_GONE;
            return -ENOENT;
        }
        struct stat st;
        bool dir = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        *ret_why = e == ELOOP ? LZ_MBOX_SYMLINK : (e == ENXIO || e == EISDIR) ? LZ_MBOX_NOT_REGULAR : LZ_MBOX_IO;
        drop(dirfd, name, dir);
        return -EPERM;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        *ret_why = LZ_MBOX_IO;
        drop(dirfd, name, false);
        return -EIO;
    }
    enum lz_mbox_refusal why = LZ_MBOX_OK;
    if (!S_ISREG(st.st_mode))
        why = LZ_MBOX_NOT_REGULAR;
    else if (st.st_nlink != 1)
        why = LZ_MBOX_LINKED;
    else if (st.st_size < 0 || (uint64_t)st.st_size > LZ_RECORD_MAX || (size_t)st.st_size > cap)
        why = LZ_MBOX_TOO_LARGE;
    if (why != LZ_MBOX_OK) {
        if (why == LZ_MBOX_TOO_LARGE)
            reclaim(fd, &st);
        close(fd);
        *ret_why = why;
        drop(dirfd, name, S_ISDIR(st.st_mode));
        return -EPERM;
    }
    /* One read of at most the bound + 1: a file that grew after fstat is
     * refused rather than read twice. */
    ssize_t n = lz_read_full(fd, buf, cap < LZ_RECORD_MAX + 1 ? cap : LZ_RECORD_MAX + 1);
    reclaim(fd, &st);
    close(fd);
    (void)unlinkat(dirfd, name, 0);
    if (n < 0) {
        *ret_why = LZ_MBOX_IO;
        return -EIO;
    }
    if ((size_t)n > LZ_RECORD_MAX) {
        *ret_why = LZ_MBOX_TOO_LARGE;
        return -EPERM;
    }
    *ret_len = (size_t)n;
    return 0;
}

int lz_mbox_put(int dirfd, const char *name, const uint8_t *bytes, size_t len) {
    uint8_t rnd[8];
    char tmp[32];
    randombytes_buf(rnd, sizeof rnd);
    char hex[17];
    lz_hex(rnd, sizeof rnd, hex);
    snprintf(tmp, sizeof tmp, ".tmp-%s", hex);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = lz_write_full(fd, bytes, len);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(dirfd, tmp, 0);
    return r;
}

int lz_mbox_put_record(int dirfd, const uint8_t sk[crypto_sign_SECRETKEYBYTES], const struct lz_record *rec,
                       struct lz_error *err) {
    static uint8_t buf[LZ_RECORD_MAX];
    size_t len;
    int r = lz_record_seal(sk, rec, buf, sizeof buf, &len, err);
    if (r < 0)
        return r;
    struct lz_mbox_name n = { .kind = rec->kind, .seq = lz_record_seq(rec) };
    memcpy(n.request_id, rec->request_id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    if ((r = lz_mbox_name_format(&n, name, sizeof name)) < 0)
        return lz_error_set(err, r, "cannot name a mailbox record");
    if ((r = lz_mbox_put(dirfd, name, buf, len)) < 0)
        return lz_error_errno(err, r, "cannot write a mailbox record");
    return 0;
}
