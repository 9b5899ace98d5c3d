/* gitrefs.c — see gitrefs.h. */
#include "gitrefs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Length of the hex object ID at p (n bytes available) followed by `end`:
 * 40 or 64, or 0. */
static size_t oid_len(const unsigned char *p, size_t n, unsigned char end) {
    size_t i = 0;
    while (i < n && i <= 64 && is_hex(p[i]))
        i++;
    if ((i != 40 && i != 64) || i >= n || p[i] != end)
        return 0;
    return i;
}

/* 0 if name (len bytes) is a ref name as Git writes one; -EINVAL if not. */
static int name_ok(const unsigned char *name, size_t len) {
    if (len == 0 || len > LZ_PACKEDREFS_NAME_MAX || name[0] == '/' || name[len - 1] == '/')
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = name[i];
        if (c <= 0x20 || c == 0x7f || strchr("~^:?*[\\", c))
            return -EINVAL;
        if (c == '/' && i + 1 < len && name[i + 1] == '/')
            return -EINVAL;
        if (c == '.' && i + 1 < len && name[i + 1] == '.')
            return -EINVAL;
        if (c == '.' && (i == 0 || name[i - 1] == '/'))
            return -EINVAL;
    }
    return 0;
}

/* 1 if a component sequence `refs/replace/` or `refs/notes/` (any case)
 * starts name or follows a '/' in it (worktree and namespace prefixes). */
static bool is_display_ref(const unsigned char *name, size_t len) {
    static const char *const bases[] = { "refs/replace/", "refs/notes/" };
    for (size_t i = 0; i < len; i++) {
        if (i > 0 && name[i - 1] != '/')
            continue;
        for (size_t b = 0; b < LZ_ARRAY_SIZE(bases); b++) {
            size_t bl = strlen(bases[b]);
            if (len - i >= bl && strncasecmp((const char *)name + i, bases[b], bl) == 0)
                return true;
        }
    }
    return false;
}

int lz_packedrefs_check(const void *buf, size_t len, size_t *n_display, struct lz_error *err) {
    return lz_packedrefs_check_allow(buf, len, NULL, NULL, n_display, err);
}

int lz_packedrefs_check_allow(const void *buf, size_t len, lz_packedrefs_allow_fn allow, void *ctx, size_t *n_display,
                              struct lz_error *err) {
    const unsigned char *p = buf;
    size_t off = 0, line = 0, n = 0;
    int first = 0;
    bool prev_ref = false; /* a peeled line follows a ref line */
    if (len > 0 && !p)
        return lz_error_set(err, -EINVAL, "no buffer");
    while (off < len) {
        const unsigned char *lf = memchr(p + off, '\n', len - off);
        line++;
        if (!lf)
            return lz_error_set(err, -EINVAL, "line %zu: not terminated by a newline", line);
        size_t ll = (size_t)(lf - (p + off));
        const unsigned char *l = p + off;
        off += ll + 1;
        if (line == 1 && ll >= 17 && memcmp(l, "# pack-refs with:", 17) == 0)
            continue;
        if (ll > 0 && l[0] == '^') {
            if (!prev_ref || oid_len(l + 1, ll, '\n') == 0)
                return lz_error_set(err, -EINVAL, "line %zu: not a peeled object ID after a ref", line);
            prev_ref = false;
            continue;
        }
        prev_ref = true;
        size_t h = oid_len(l, ll + 1, ' ');
        if (h == 0)
            return lz_error_set(err, -EINVAL, "line %zu: not `<object ID> <ref name>`", line);
        const unsigned char *name = l + h + 1;
        size_t nl = ll - h - 1;
        if (name_ok(name, nl) < 0)
            return lz_error_set(err, -EINVAL, "line %zu: not a ref name Git writes", line);
        if (is_display_ref(name, nl) && !(allow && allow(ctx, (const char *)l, h, (const char *)name, nl))) {
            if (n++ == 0) {
                lz_error_set(err, -EPERM, "line %zu: %.*s changes what git displays (replace ref or note)", line,
                             (int)(nl > 200 ? 200 : nl), (const char *)name);
                first = -EPERM;
            }
            if (!n_display)
                return -EPERM;
        }
    }
    if (n_display)
        *n_display = n;
    return first;
}

/* What is already in the Git directory: its current packed-refs, and its
 * loose refs read on demand. */
struct present {
    int gitdir_fd;
    const char *cur; /* the current packed-refs, or NULL */
    size_t cur_len;
};

static bool already_there(void *ctx, const char *oid, size_t oid_len, const char *name, size_t name_len) {
    const struct present *p = ctx;
    char line[LZ_PACKEDREFS_NAME_MAX + 80];
    if (oid_len + 1 + name_len + 1 > sizeof line)
        return false;
    /* The same line in the current packed-refs (at a line start). */
    memcpy(line, oid, oid_len);
    line[oid_len] = ' ';
    memcpy(line + oid_len + 1, name, name_len);
    line[oid_len + 1 + name_len] = '\n';
    size_t ll = oid_len + 1 + name_len + 1;
    for (const char *q = p->cur, *end = p->cur ? p->cur + p->cur_len : NULL; q && (size_t)(end - q) >= ll;) {
        const char *hit = memmem(q, (size_t)(end - q), line, ll);
        if (!hit)
            break;
        if (hit == p->cur || hit[-1] == '\n')
            return true;
        q = hit + 1;
    }
    /* The loose ref: a file at that name (no symlink on the way) holding
     * the object ID and a newline. */
    if (p->gitdir_fd < 0 || name_len >= sizeof line)
        return false;
    memcpy(line, name, name_len);
    line[name_len] = '\0';
    _cleanup_close_ int fd = lz_openat_beneath(p->gitdir_fd, line, O_RDONLY | O_NONBLOCK, 0, false);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    char v[80];
    ssize_t n = lz_read_full(fd, v, sizeof v);
    return n == (ssize_t)oid_len + 1 && v[oid_len] == '\n' && strncasecmp(v, oid, oid_len) == 0;
}

int lz_packedrefs_verify_fd(int fd, int gitdir_fd, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL, *cur = NULL;
    size_t len = 0, cur_len = 0;
    int r = lz_read_fd(fd, LZ_PACKEDREFS_MAX, &buf, &len);
    if (r == -EFBIG)
        return lz_error_set(err, r, "larger than Lazaret checks (%zu MiB)", LZ_PACKEDREFS_MAX >> 20);
    if (r < 0)
        return lz_error_errno(err, r, "cannot read packed-refs");
    struct present p = { .gitdir_fd = gitdir_fd };
    if (gitdir_fd >= 0) {
        _cleanup_close_ int cfd = lz_openat_beneath(gitdir_fd, "packed-refs", O_RDONLY | O_NONBLOCK, 0, false);
        struct stat st;
        if (cfd >= 0 && fstat(cfd, &st) == 0 && S_ISREG(st.st_mode) &&
            lz_read_fd(cfd, LZ_PACKEDREFS_MAX, &cur, &cur_len) == 0) {
            p.cur = cur;
            p.cur_len = cur_len;
        }
    }
    return lz_packedrefs_check_allow(buf, len, gitdir_fd >= 0 ? already_there : NULL, &p, NULL, err);
}
