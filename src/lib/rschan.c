/* rschan.c — see rschan.h. */
#include "rschan.h"
#include "proto.h" /* lz_put_u16/u32, lz_get_u16/u32 */

#include <poll.h>
#include <sys/socket.h>

/* The body of each kind: how many u64 fields, and the bound of its string
 * (0: it carries none). */
static const struct {
    const char *name;
    uint8_t n_u64;
    uint16_t str_max;
} schema[LZ_RS_KIND_MAX] = {
    [LZ_RS_STAGE] = { "stage", 1, LZ_RSCHAN_SLOT_MAX },
    [LZ_RS_ANCHORED] = { "anchored", 0, LZ_RSCHAN_STR_MAX },
    [LZ_RS_READY] = { "ready", 3, 255 },
    [LZ_RS_FAIL] = { "fail", 0, LZ_RSCHAN_STR_MAX },
    [LZ_RS_EXITED] = { "exited", 1, 31 },
    [LZ_RS_UNMOUNTED] = { "unmounted", 0, 0 },
    [LZ_RS_UNMOUNT_FAILED] = { "unmount-failed", 0, LZ_RSCHAN_STR_MAX },
    [LZ_RS_ANCHOR] = { "anchor", 0, 0 },
    [LZ_RS_STAGED] = { "staged", 0, LZ_RSCHAN_SLOT_MAX },
    [LZ_RS_NET] = { "net", 0, 0 },
    [LZ_RS_STOP] = { "stop", 0, 0 },
    [LZ_RS_UNMOUNT] = { "unmount", 0, 0 },
    [LZ_RS_MAILBOX] = { "mailbox", 0, 0 },
    [LZ_RS_DNS] = { "dns", 0, 0 },
    [LZ_RS_BOOT] = { "boot", 0, 0 },
    [LZ_RS_NET_READY] = { "net-ready", 0, 255 },
};

static bool kind_valid(unsigned k) { return k > 0 && k < LZ_RS_KIND_MAX && schema[k].name; }

const char *lz_rschan_kind_name(enum lz_rs_kind kind) { return kind_valid((unsigned)kind) ? schema[kind].name : "?"; }

static void put_u64(uint8_t *p, uint64_t v) {
    lz_put_u32(p, (uint32_t)v);
    lz_put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)lz_get_u32(p) | (uint64_t)lz_get_u32(p + 4) << 32; }

int lz_rschan_encode(const struct lz_rsmsg *m, uint8_t *buf, size_t cap, size_t *ret_len) {
    if (!kind_valid((unsigned)m->kind))
        return -EINVAL;
    unsigned smax = schema[m->kind].str_max;
    size_t slen = smax ? strnlen(m->str, sizeof m->str) : 0;
    if (slen >= sizeof m->str || slen > smax)
        return -EINVAL;
    size_t body = 8u * schema[m->kind].n_u64 + (smax ? 4 + slen : 0);
    if (cap < LZ_RSCHAN_HDR + body)
        return -ENOBUFS;
    lz_put_u16(buf, (uint16_t)m->kind);
    lz_put_u16(buf + 2, 0);
    lz_put_u32(buf + 4, (uint32_t)body);
    uint8_t *p = buf + LZ_RSCHAN_HDR;
    for (unsigned i = 0; i < schema[m->kind].n_u64; i++, p += 8)
        put_u64(p, m->u[i]);
    if (smax) {
        lz_put_u32(p, (uint32_t)slen);
        memcpy(p + 4, m->str, slen);
    }
    *ret_len = LZ_RSCHAN_HDR + body;
    return 0;
}

int lz_rschan_decode(const uint8_t *buf, size_t n, struct lz_rsmsg *ret) {
    if (n < LZ_RSCHAN_HDR || n > LZ_RSCHAN_MAX)
        return -EBADMSG;
    unsigned kind = lz_get_u16(buf);
    if (!kind_valid(kind) || lz_get_u16(buf + 2) != 0 || lz_get_u32(buf + 4) != n - LZ_RSCHAN_HDR)
        return -EBADMSG;
    const uint8_t *p = buf + LZ_RSCHAN_HDR;
    size_t left = n - LZ_RSCHAN_HDR;
    struct lz_rsmsg m = { .kind = (enum lz_rs_kind)kind };
    for (unsigned i = 0; i < schema[kind].n_u64; i++, p += 8, left -= 8) {
        if (left < 8)
            return -EBADMSG;
        m.u[i] = get_u64(p);
    }
    if (schema[kind].str_max) {
        if (left < 4)
            return -EBADMSG;
        uint32_t slen = lz_get_u32(p);
        p += 4;
        left -= 4;
        if (slen > schema[kind].str_max || slen != left || memchr(p, '\0', slen))
            return -EBADMSG;
        memcpy(m.str, p, slen);
        m.str[slen] = '\0';
        left = 0;
    }
    if (left)
        return -EBADMSG;
    memcpy(ret, &m, sizeof m);
    return 0;
}

int lz_rschan_send(int fd, enum lz_rs_kind kind, const uint64_t *u, const char *str) {
    return lz_rschan_send_fds(fd, kind, u, str, NULL, 0);
}

int lz_rschan_send_fds(int fd, enum lz_rs_kind kind, const uint64_t *u, const char *str, const int *fds, size_t n_fds) {
    if (n_fds > LZ_RSCHAN_FDS_MAX)
        return -EINVAL;
    struct lz_rsmsg m = { .kind = kind };
    if (!kind_valid((unsigned)kind))
        return -EINVAL;
    for (unsigned i = 0; u && i < schema[kind].n_u64; i++)
        m.u[i] = u[i];
    /* A message longer than its bound is cut, never refused: a FAIL must
     * still reach the coordinator. */
    if (str && schema[kind].str_max)
        snprintf(m.str, (size_t)schema[kind].str_max + 1, "%s", str);
    uint8_t buf[LZ_RSCHAN_MAX];
    size_t len;
    int r = lz_rschan_encode(&m, buf, sizeof buf, &len);
    if (r < 0)
        return r;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    union {
        char b[CMSG_SPACE(LZ_RSCHAN_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } cm;
    if (n_fds) {
        memset(&cm, 0, sizeof cm);
        mh.msg_control = cm.b;
        mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int lz_rschan_sendf(int fd, enum lz_rs_kind kind, const char *fmt, ...) {
    char b[LZ_RSCHAN_STR_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    return lz_rschan_send(fd, kind, NULL, b);
}

int lz_rschan_recv(int fd, int timeout_ms, struct lz_rsmsg *ret) {
    size_t n_fds;
    return lz_rschan_recv_fds(fd, timeout_ms, ret, NULL, 0, &n_fds);
}

/* The descriptors of one received packet's control data: kept in fds (at
 * most cap, all SCM_RIGHTS of SOL_SOCKET), or all closed. -EBADMSG when
 * any was closed for not fitting or the control data was cut. */
static int take_fds(struct msghdr *mh, int *fds, size_t cap, size_t *ret_n) {
    size_t n = 0;
    bool bad = (mh->msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) {
            bad = true;
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (n < cap)
                fds[n++] = f;
            else {
                close(f);
                bad = true;
            }
        }
    }
    if (bad) {
        for (size_t i = 0; i < n; i++)
            lz_closep(&fds[i]);
        n = 0;
    }
    *ret_n = n;
    return bad ? -EBADMSG : 0;
}

int lz_rschan_recv_fds(int fd, int timeout_ms, struct lz_rsmsg *ret, int *fds, size_t cap, size_t *ret_n) {
    long deadline = lz_now_ms() + timeout_ms;
    uint8_t buf[LZ_RSCHAN_MAX + 1];
    *ret_n = 0;
    for (size_t i = 0; i < cap; i++)
        fds[i] = -EBADF;
    for (;;) {
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
        union {
            char b[CMSG_SPACE(LZ_RSCHAN_FDS_MAX * sizeof(int))];
            struct cmsghdr align;
        } cm;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b };
        /* Descriptors arrive close-on-exec: the coordinator spawns. */
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n > 0) {
            size_t nf;
            int tr = take_fds(&mh, fds, cap, &nf);
            if (tr < 0 || lz_rschan_decode(buf, (size_t)n, ret) < 0) {
                for (size_t i = 0; i < nf; i++)
                    lz_closep(&fds[i]);
                return -EBADMSG;
            }
            *ret_n = nf;
            return 1;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return 0;
        long left = deadline - lz_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return 0;
    }
}

void lz_rschan_format(const struct lz_rsmsg *m, char *buf, size_t len) {
    const char *name = lz_rschan_kind_name(m->kind);
    switch (m->kind) {
    case LZ_RS_STAGE: snprintf(buf, len, "%s %s %llu", name, m->str, (unsigned long long)m->u[0]); break;
    case LZ_RS_READY:
        snprintf(buf, len, "%s %llu %llu %llu %s", name, (unsigned long long)m->u[0], (unsigned long long)m->u[1],
                 (unsigned long long)m->u[2], m->str);
        break;
    case LZ_RS_EXITED:
        if (m->str[0])
            snprintf(buf, len, "%s %s", name, m->str);
        else
            snprintf(buf, len, "%s %llu", name, (unsigned long long)m->u[0]);
        break;
    case LZ_RS_ANCHORED:
    case LZ_RS_FAIL:
    case LZ_RS_UNMOUNTED:
    case LZ_RS_UNMOUNT_FAILED:
    case LZ_RS_ANCHOR:
    case LZ_RS_STAGED:
    case LZ_RS_NET:
    case LZ_RS_STOP:
    case LZ_RS_UNMOUNT:
    case LZ_RS_MAILBOX:
    case LZ_RS_DNS:
    case LZ_RS_BOOT:
    case LZ_RS_NET_READY:
    case LZ_RS_KIND_MAX:
    default: snprintf(buf, len, "%s%s%s", name, m->str[0] ? " " : "", m->str); break;
    }
}
