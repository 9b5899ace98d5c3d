/* proto.c — see proto.h. */
#include "proto.h"

#include <sys/socket.h>
#include <sys/un.h>

static void w_u32(struct lz_wbuf *w, uint32_t v) {
    uint8_t b[4];
    lz_put_u32(b, v);
    lz_wbuf_put(w, b, 4);
}
static void w_str(struct lz_wbuf *w, const char *s) {
    size_t n = strlen(s);
    if (n > LZ_PROTO_STR_MAX) {
        w->overflow = true;
        return;
    }
    w_u32(w, (uint32_t)n);
    lz_wbuf_put(w, s, n);
}

int lz_hello_encode(const struct lz_hello *h, uint8_t *buf, size_t cap, size_t *ret_len) {
    struct lz_wbuf w = { .p = buf, .cap = cap };
    uint8_t hdr[LZ_PROTO_HDR] = { LZ_MSG_HELLO, 0, 0, 0 };
    lz_wbuf_put(&w, hdr, sizeof hdr);
    w_u32(&w, h->version);
    lz_wbuf_put(&w, h->domain_id, 32);
    lz_wbuf_put(&w, h->fingerprint, 32);
    w_u32(&w, h->flags);
    uint8_t rc[4];
    lz_put_u16(rc, h->rows);
    lz_put_u16(rc + 2, h->cols);
    lz_wbuf_put(&w, rc, 4);
    if (h->argc > LZ_PROTO_ARGV_MAX || h->envc > LZ_PROTO_ENV_MAX)
        return -E2BIG;
    w_u32(&w, (uint32_t)h->argc);
    for (size_t i = 0; i < h->argc; i++)
        w_str(&w, h->argv[i]);
    w_u32(&w, (uint32_t)h->envc);
    for (size_t i = 0; i < h->envc; i++)
        w_str(&w, h->envv[i]);
    w_str(&w, h->cwd ? h->cwd : "");
    if (w.overflow || w.len > LZ_PROTO_MAX)
        return -E2BIG;
    *ret_len = w.len;
    return 0;
}

struct rbuf {
    const uint8_t *p;
    size_t len, off;
};

static int r_bytes(struct rbuf *r, void *out, size_t n) {
    if (n > r->len - r->off)
        return -EBADMSG;
    memcpy(out, r->p + r->off, n);
    r->off += n;
    return 0;
}
static int r_u32(struct rbuf *r, uint32_t *v) {
    uint8_t b[4];
    int e = r_bytes(r, b, 4);
    if (e < 0)
        return e;
    *v = lz_get_u32(b);
    return 0;
}
static int r_str(struct rbuf *r, char **out) {
    uint32_t n;
    int e = r_u32(r, &n);
    if (e < 0)
        return e;
    if (n > LZ_PROTO_STR_MAX || n > r->len - r->off)
        return -EBADMSG;
    if (memchr(r->p + r->off, '\0', n))
        return -EBADMSG;
    *out = lz_xstrndup((const char *)r->p + r->off, n);
    r->off += n;
    return 0;
}
static int r_strv(struct rbuf *r, size_t max, char ***ret_v, size_t *ret_n) {
    uint32_t n;
    int e = r_u32(r, &n);
    if (e < 0)
        return e;
    if (n > max)
        return -E2BIG;
    /* Each string needs at least its 4-byte length: bound n by what is left. */
    if ((size_t)n * 4 > r->len - r->off)
        return -EBADMSG;
    char **v = lz_xcalloc((size_t)n + 1, sizeof *v);
    for (uint32_t i = 0; i < n; i++) {
        e = r_str(r, &v[i]);
        if (e < 0) {
            for (uint32_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return e;
        }
    }
    *ret_v = v;
    *ret_n = n;
    return 0;
}

void lz_hello_clear(struct lz_hello *h) {
    for (size_t i = 0; h->argv && i < h->argc; i++)
        free(h->argv[i]);
    for (size_t i = 0; h->envv && i < h->envc; i++)
        free(h->envv[i]);
    free(h->argv);
    free(h->envv);
    free(h->cwd);
    memset(h, 0, sizeof *h);
}

/* A session's start directory: /workspace or below it, in plain segments
 * (the client's start_dir, config.h). runsc resolves it inside the
 * sandbox either way; this keeps a hello from naming anything else. */
static bool cwd_valid(const char *cwd) {
    static const char ws[] = "/workspace";
    if (!cwd[0])
        return true;
    if (strncmp(cwd, ws, sizeof ws - 1) != 0)
        return false;
    for (const char *p = cwd + sizeof ws - 1; *p;) {
        if (*p++ != '/')
            return false;
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += n;
    }
    return true;
}

int lz_hello_decode(const uint8_t *buf, size_t len, struct lz_hello *ret, struct lz_error *err) {
    struct rbuf r = { .p = buf, .len = len };
    struct lz_hello h = { 0 };
    uint8_t hdr[LZ_PROTO_HDR];
    uint8_t rc[4];
    int e;
    if (len > LZ_PROTO_MAX)
        return lz_error_set(err, -EMSGSIZE, "hello message too large");
    if ((e = r_bytes(&r, hdr, sizeof hdr)) < 0 || hdr[0] != LZ_MSG_HELLO || hdr[1] || hdr[2] || hdr[3])
        return lz_error_set(err, -EBADMSG, "expected a hello message");
    if ((e = r_u32(&r, &h.version)) < 0)
        goto bad;
    if (h.version != LZ_PROTO_VERSION)
        return lz_error_set(err, -EPROTONOSUPPORT,
                            "client speaks protocol %u, coordinator %u: use the same lazaret binary", h.version,
                            LZ_PROTO_VERSION);
    if ((e = r_bytes(&r, h.domain_id, 32)) < 0 || (e = r_bytes(&r, h.fingerprint, 32)) < 0 ||
        (e = r_u32(&r, &h.flags)) < 0 || (e = r_bytes(&r, rc, 4)) < 0)
        goto bad;
    if (h.flags & ~LZ_HELLO_TTY) {
        e = -EBADMSG;
        goto bad;
    }
    h.rows = lz_get_u16(rc);
    h.cols = lz_get_u16(rc + 2);
    if ((e = r_strv(&r, LZ_PROTO_ARGV_MAX, &h.argv, &h.argc)) < 0)
        goto bad;
    if ((e = r_strv(&r, LZ_PROTO_ENV_MAX, &h.envv, &h.envc)) < 0)
        goto bad;
    for (size_t i = 0; i < h.envc; i++)
        if (!strchr(h.envv[i], '=') || h.envv[i][0] == '=') {
            e = -EBADMSG;
            goto bad;
        }
    if ((e = r_str(&r, &h.cwd)) < 0)
        goto bad;
    if (!cwd_valid(h.cwd)) {
        e = -EBADMSG;
        goto bad;
    }
    if (r.off != r.len) {
        e = -EBADMSG;
        goto bad;
    }
    *ret = h;
    return 0;
bad:
    lz_hello_clear(&h);
    return lz_error_set(err, e, "malformed hello message");
}

int lz_msg_send(int fd, uint8_t type, uint8_t channel, const void *payload, size_t len) {
    if (len > LZ_PROTO_DATA_MAX)
        return -EMSGSIZE;
    uint8_t hdr[LZ_PROTO_HDR] = { type, channel, 0, 0 };
    struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)payload, len } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
    for (;;) {
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

ssize_t lz_msg_recv(int fd, uint8_t *buf, size_t cap) {
    struct iovec iov = { buf, cap };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    for (;;) {
        ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return 0;
        if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
            return -EBADMSG;
        if ((size_t)n < LZ_PROTO_HDR)
            return -EBADMSG;
        return n;
    }
}

int lz_control_decode(const uint8_t *buf, size_t len, uint8_t *ret_type, uint32_t *ret_flags) {
    if (len < LZ_PROTO_HDR || buf[1] != 0 || buf[2] != 0 || buf[3] != 0)
        return -EBADMSG;
    if ((buf[0] == LZ_MSG_STATUS || buf[0] == LZ_MSG_NET || buf[0] == LZ_MSG_EVENTS) && len == LZ_PROTO_HDR) {
        *ret_type = buf[0];
        *ret_flags = 0;
        return 0;
    }
    if (buf[0] == LZ_MSG_STOP && len == LZ_PROTO_HDR + 4) {
        uint32_t f = lz_get_u32(buf + LZ_PROTO_HDR);
        if (f & ~(LZ_STOP_FORCE | LZ_STOP_IF_LINGERING))
            return -EBADMSG;
        *ret_type = LZ_MSG_STOP;
        *ret_flags = f;
        return 0;
    }
    return -EBADMSG;
}

int lz_proto_connect(const char *path) {
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}
