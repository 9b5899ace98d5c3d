/* hotnotify.c — the hot-reload channel's records (hotnotify.h). */
#include "hotnotify.h"

#include <errno.h>
#include <string.h>

bool lz_hot_path_valid(const char *p, size_t len) {
    if (len == 0 || len > LZ_HOT_PATH_MAX)
        return false;
    if (len == 1 && p[0] == '.')
        return true;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len) {
            unsigned char c = (unsigned char)p[i];
            if (c < 0x20 || c == 0x7f)
                return false;
            if (c != '/')
                continue;
        }
        size_t n = i - start;
        /* Empty (leading, trailing or doubled '/'), "." and "..". */
        if (n == 0 || (n == 1 && p[start] == '.') || (n == 2 && p[start] == '.' && p[start + 1] == '.'))
            return false;
        start = i + 1;
    }
    return true;
}

int lz_hot_encode(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    if (!lz_hot_path_valid(path, n))
        return -EINVAL;
    if (n + 1 > cap)
        return -ENOSPC;
    memcpy(buf, path, n);
    buf[n] = '\0';
    return (int)(n + 1);
}

int lz_hot_next(const char *buf, size_t len, size_t *ret_used, const char **ret_path) {
    const char *nul = memchr(buf, '\0', len);
    if (!nul) {
        if (len > LZ_HOT_RECORD_MAX) {
            *ret_used = len;
            return -EMSGSIZE;
        }
        return 0;
    }
    size_t n = (size_t)(nul - buf);
    *ret_used = n + 1;
    if (!lz_hot_path_valid(buf, n))
        return -EINVAL;
    *ret_path = buf;
    return 1;
}

void lz_hot_queue_init(struct lz_hot_queue *q) { memset(q, 0, sizeof *q); }

bool lz_hot_queue_empty(const struct lz_hot_queue *q) { return q->n == 0 && !q->all; }

static bool queued(const struct lz_hot_queue *q, const char *p, size_t len) {
    size_t off = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (q->len[i] == len && memcmp(q->buf + off, p, len) == 0)
            return true;
        off += (size_t)q->len[i] + 1;
    }
    return false;
}

/* Drops the queued paths that are `dir` or below it. */
static void drop_below(struct lz_hot_queue *q, const char *dir, size_t dlen) {
    size_t in = 0, out = 0, kept = 0;
    for (size_t i = 0; i < q->n; i++) {
        size_t len = q->len[i];
        const char *p = q->buf + in;
        bool below = len >= dlen && memcmp(p, dir, dlen) == 0 && (len == dlen || p[dlen] == '/');
        if (!below) {
            memmove(q->buf + out, p, len + 1);
            q->len[kept++] = (unsigned short)len;
            out += len + 1;
        }
        in += len + 1;
    }
    q->n = kept;
    q->used = out;
}

int lz_hot_queue_add(struct lz_hot_queue *q, const char *path) {
    size_t len = strlen(path);
    if (!lz_hot_path_valid(path, len))
        return -EINVAL;
    char dir[LZ_HOT_PATH_MAX + 1];
    for (;;) {
        if (len == 1 && path[0] == '.') {
            q->all = true;
            return 0;
        }
        if (queued(q, path, len))
            return 0;
        if (q->n < LZ_HOT_QUEUE_PATHS && q->used + len + 1 <= sizeof q->buf) {
            memcpy(q->buf + q->used, path, len);
            q->buf[q->used + len] = '\0';
            q->used += len + 1;
            q->len[q->n++] = (unsigned short)len;
            return 0;
        }
        /* Full: the parent directory stands for what is queued below it
         * and for this path (a flood in one directory becomes that
         * directory); "." when the path is at the top. */
        q->collapsed++;
        const char *slash = memrchr(path, '/', len);
        if (!slash) {
            q->all = true;
            return 0;
        }
        len = (size_t)(slash - path);
        memmove(dir, path, len); /* path may be dir already */
        dir[len] = '\0';
        path = dir;
        drop_below(q, dir, len);
    }
}

size_t lz_hot_queue_peek(const struct lz_hot_queue *q, char *buf, size_t cap, size_t *ret_count) {
    size_t out = 0, off = 0, count = 0;
    /* "." first: it stands for everything, a rescan covers the rest. */
    if (q->all) {
        if (cap < 2) {
            *ret_count = 0;
            return 0;
        }
        memcpy(buf, ".", 2);
        out = 2;
        count = 1;
    }
    for (size_t i = 0; i < q->n; i++) {
        size_t n = (size_t)q->len[i] + 1;
        if (out + n > cap)
            break;
        memcpy(buf + out, q->buf + off, n);
        out += n;
        off += n;
        count++;
    }
    *ret_count = count;
    return out;
}

void lz_hot_queue_consume(struct lz_hot_queue *q, size_t count) {
    if (count > 0 && q->all) {
        q->all = false;
        count--;
    }
    if (count > q->n)
        count = q->n;
    size_t off = 0;
    for (size_t i = 0; i < count; i++)
        off += (size_t)q->len[i] + 1;
    memmove(q->buf, q->buf + off, q->used - off);
    q->used -= off;
    memmove(q->len, q->len + count, (q->n - count) * sizeof q->len[0]);
    q->n -= count;
}
