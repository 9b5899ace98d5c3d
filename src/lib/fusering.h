/* fusering.h — the pure parts of FUSE over io_uring (lazaret-router's
 * transport, src/router/uring.c; docs/notes/2026-12-05-router-transport.md).
 *
 * With FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING, the fuse
 * module's enable_uring parameter), a request arrives in a ring entry the
 * server registered: a 288-byte header (the fuse_in_header in `in_out`,
 * the per-opcode struct in `op_in`, the payload's size in
 * `ring_ent_in_out`) and a payload buffer with the rest (a name, WRITE's
 * data). The reply goes back the same way. libfuse 3.14 knows only the
 * classic layout (one buffer: header, per-opcode struct, rest), so the
 * router rebuilds that layout from an entry and splits libfuse's reply
 * into one.
 *
 * The entry's bytes come from the kernel; every length is checked against
 * the buffers anyway before anything is copied (tests/fuzz/fuzz_fusering.c).
 */
#pragma once

#include "util.h"

#include <linux/fuse.h>
#include <sys/uio.h>

/* The kernel's uapi (include/uapi/linux/fuse.h, protocol 7.42), which
 * Debian 12's and 13's linux-libc-dev (6.1, 6.12) do not have yet. The
 * layout is ABI: later protocols use only the padding. */
#define LZ_FUSE_OVER_IO_URING (1ULL << 41) /* an INIT flag: bit 9 of flags2 */
#define LZ_FUSE_URING_IN_OUT_HEADER_SZ 128
#define LZ_FUSE_URING_OP_IN_OUT_SZ 128
#define LZ_FUSE_IO_URING_CMD_REGISTER 1
#define LZ_FUSE_IO_URING_CMD_COMMIT_AND_FETCH 2

struct lz_fuse_uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id; /* the kernel's id of the request, echoed by COMMIT_AND_FETCH */
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

struct lz_fuse_uring_req_header {
    char in_out[LZ_FUSE_URING_IN_OUT_HEADER_SZ]; /* fuse_in_header / fuse_out_header */
    char op_in[LZ_FUSE_URING_OP_IN_OUT_SZ];      /* the per-opcode struct */
    struct lz_fuse_uring_ent_in_out ring_ent_in_out;
};

/* The command area of the SQE128 (IORING_OP_URING_CMD) */
struct lz_fuse_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

/* The room an entry keeps in front of its payload, where the classic
 * header and per-opcode struct are rebuilt (no copy of the payload). */
#define LZ_FRING_ROOM (sizeof(struct fuse_in_header) + LZ_FUSE_URING_OP_IN_OUT_SZ)

/* Rebuilds the classic request of the entry (hdr, payload of payload_cap
 * bytes, with LZ_FRING_ROOM writable bytes in front of it) in place: *ret_req
 * then points to the fuse_in_header, in front of the payload, and *ret_len
 * is the request's length (the header's len). -EBADMSG when the lengths
 * disagree: len shorter than the header, a per-opcode part longer than
 * op_in, or a payload_sz longer than the payload or than len allows. */
int lz_fring_request(const struct lz_fuse_uring_req_header *hdr, char *payload, size_t payload_cap, char **ret_req,
                     size_t *ret_len);

/* The unique of the request in the entry (its fuse_in_header's). */
uint64_t lz_fring_unique(const struct lz_fuse_uring_req_header *hdr);

/* Puts a classic reply (iov[0] the fuse_out_header, the rest its arguments,
 * count >= 1) into the entry: the header into in_out, the arguments into
 * the payload, payload_sz. -EBADMSG when iov[0] is not a header,
 * -EMSGSIZE when the arguments do not fit payload_cap (the entry is then
 * untouched). */
int lz_fring_reply(struct lz_fuse_uring_req_header *hdr, char *payload, size_t payload_cap, const struct iovec *iov,
                   int count);

/* An error reply (err negative) to `unique` into the entry. */
void lz_fring_error(struct lz_fuse_uring_req_header *hdr, uint64_t unique, int err);

/* The number of possible CPUs in the text of
 * /sys/devices/system/cpu/possible ("0-3", "0", "0-3,8-11"; a newline may
 * end it), as the kernel counts its queues (num_possible_cpus(): queue ids
 * 0..n-1). -EINVAL when the text is not such a list or names a CPU above
 * max_id. */
int lz_fring_possible_cpus(const char *text, unsigned max_id, unsigned *ret_n);
