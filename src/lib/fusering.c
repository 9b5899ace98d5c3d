/* fusering.c — see fusering.h. */
#include "fusering.h"

_Static_assert(sizeof(struct lz_fuse_uring_req_header) == 288, "the kernel's header is 288 bytes");
_Static_assert(sizeof(struct lz_fuse_uring_cmd_req) == 24, "the kernel's command is 24 bytes");
_Static_assert(sizeof(struct fuse_in_header) <= LZ_FUSE_URING_IN_OUT_HEADER_SZ, "in_out holds the header");

int lz_fring_request(const struct lz_fuse_uring_req_header *hdr, char *payload, size_t payload_cap, char **ret_req,
                     size_t *ret_len) {
    struct fuse_in_header in;
    memcpy(&in, hdr->in_out, sizeof in);
    uint32_t psz = hdr->ring_ent_in_out.payload_sz;
    /* len = header + per-opcode struct (in op_in) + payload (the kernel
     * keeps the classic length); each part within its buffer. */
    if (in.len < sizeof in || psz > payload_cap || psz > in.len - sizeof in)
        return -EBADMSG;
    size_t op_len = in.len - sizeof in - psz;
    if (op_len > sizeof hdr->op_in)
        return -EBADMSG;
    char *req = payload - op_len - sizeof in;
    memmove(payload - op_len, hdr->op_in, op_len);
    memcpy(req, &in, sizeof in);
    *ret_req = req;
    *ret_len = in.len;
    return 0;
}

uint64_t lz_fring_unique(const struct lz_fuse_uring_req_header *hdr) {
    struct fuse_in_header in;
    memcpy(&in, hdr->in_out, sizeof in);
    return in.unique;
}

int lz_fring_reply(struct lz_fuse_uring_req_header *hdr, char *payload, size_t payload_cap, const struct iovec *iov,
                   int count) {
    if (count < 1 || iov[0].iov_len != sizeof(struct fuse_out_header))
        return -EBADMSG;
    size_t total = 0;
    for (int i = 1; i < count; i++) {
        if (iov[i].iov_len > payload_cap - total)
            return -EMSGSIZE;
        total += iov[i].iov_len;
    }
    /* memmove: an argument may come from the request, which is in this
     * payload too. Nothing libfuse replies with overlaps it that way
     * except in place, but the order is then still right. */
    size_t off = 0;
    for (int i = 1; i < count; i++) {
        if (iov[i].iov_len)
            memmove(payload + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    struct fuse_out_header oh;
    memcpy(&oh, iov[0].iov_base, sizeof oh);
    oh.len = (uint32_t)(sizeof oh + total);
    memcpy(hdr->in_out, &oh, sizeof oh);
    hdr->ring_ent_in_out.payload_sz = (uint32_t)total;
    return 0;
}

void lz_fring_error(struct lz_fuse_uring_req_header *hdr, uint64_t unique, int err) {
    struct fuse_out_header oh = { .len = sizeof oh, .error = err, .unique = unique };
    memcpy(hdr->in_out, &oh, sizeof oh);
    hdr->ring_ent_in_out.payload_sz = 0;
}

static bool cpu_id(const char **s, unsigned max_id, unsigned *ret) {
    if (**s < '0' || **s > '9')
        return false;
    unsigned long v = 0;
    while (**s >= '0' && **s <= '9') {
        v = v * 10 + (unsigned long)(**s - '0');
        if (v > max_id)
            return false;
        (*s)++;
    }
    *ret = (unsigned)v;
    return true;
}

int lz_fring_possible_cpus(const char *text, unsigned max_id, unsigned *ret_n) {
    const char *s = text;
    unsigned n = 0;
    for (;;) {
        unsigned a, b;
        if (!cpu_id(&s, max_id, &a))
            return -EINVAL;
        b = a;
        if (*s == '-') {
            s++;
            if (!cpu_id(&s, max_id, &b) || b < a)
                return -EINVAL;
        }
        n += b - a + 1;
        if (n > max_id + 1) /* ranges that overlap */
            return -EINVAL;
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '\n')
            s++;
        if (*s)
            return -EINVAL;
        break;
    }
    *ret_n = n;
    return 0;
}
