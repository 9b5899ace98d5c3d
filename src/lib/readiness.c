/* readiness.c — see readiness.h. */
#include "readiness.h"

#include <poll.h>

static const char ok_line[] = "ready\n";
static const char ok_word[] = "ready ";
static const char err_word[] = "error ";
#define ERR_WORD_LEN (sizeof err_word - 1)
#define OK_WORD_LEN (sizeof ok_word - 1)
_Static_assert(OK_WORD_LEN == ERR_WORD_LEN, "both words bound the line alike");

size_t lz_ready_encode(enum lz_ready_status status, const char *msg, char *buf, size_t cap) {
    if (cap < LZ_READY_LINE_MAX)
        abort(); /* the caller's buffer: a programming error */
    if (status == LZ_READY_OK && (!msg || !msg[0])) {
        memcpy(buf, ok_line, sizeof ok_line - 1);
        return sizeof ok_line - 1;
    }
    if (!msg || !msg[0])
        msg = "unknown error";
    memcpy(buf, status == LZ_READY_OK ? ok_word : err_word, ERR_WORD_LEN);
    size_t n = ERR_WORD_LEN;
    for (size_t i = 0; i < LZ_ERROR_MAX - 1 && msg[i]; i++) {
        unsigned char ch = (unsigned char)msg[i];
        buf[n++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    buf[n++] = '\n';
    return n;
}

int lz_ready_decode(const char *buf, size_t len, struct lz_ready *ret) {
    if (len < 2 || len > LZ_READY_LINE_MAX || buf[len - 1] != '\n')
        return -EBADMSG;
    if (len == sizeof ok_line - 1 && !memcmp(buf, ok_line, len)) {
        ret->status = LZ_READY_OK;
        ret->msg[0] = '\0';
        return 0;
    }
    bool ok = len >= OK_WORD_LEN && !memcmp(buf, ok_word, OK_WORD_LEN);
    if (len < ERR_WORD_LEN + 2 || (!ok && memcmp(buf, err_word, ERR_WORD_LEN)))
        return -EBADMSG;
    const char *m = buf + ERR_WORD_LEN;
    size_t mlen = len - ERR_WORD_LEN - 1;
    if (mlen > LZ_ERROR_MAX - 1)
        return -EBADMSG;
    for (size_t i = 0; i < mlen; i++)
        if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f)
            return -EBADMSG;
    ret->status = ok ? LZ_READY_OK : LZ_READY_ERROR;
    memcpy(ret->msg, m, mlen);
    ret->msg[mlen] = '\0';
    return 0;
}

int lz_ready_write(int fd, enum lz_ready_status status, const char *msg) {
    char b[LZ_READY_LINE_MAX];
    return lz_write_full(fd, b, lz_ready_encode(status, msg, b, sizeof b));
}

int lz_ready_read(int fd, int timeout_ms, struct lz_ready *ret) {
    char b[LZ_READY_LINE_MAX + 1] = "";
    size_t len = 0;
    long deadline = lz_now_ms() + timeout_ms;
    /* Up to the newline, end of file, or one byte over the bound. */
    while (!memchr(b, '\n', len) && len < sizeof b) {
        long left = deadline - lz_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno != EINTR)
            return -errno;
        if (pr <= 0)
            continue;
        ssize_t k = read(fd, b + len, sizeof b - len);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            break;
        len += (size_t)k;
    }
    if (len == 0)
        return -EPIPE;
    return lz_ready_decode(b, len, ret);
}
