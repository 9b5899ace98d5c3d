/* libFuzzer target: a FUSE ring entry (fusering.c) as the kernel could
 * fill it, rebuilt as the classic request. The rebuilt request must lie
 * within the entry's room and payload, and its length must be what the
 * header says. */
#include "fusering.h"

#define CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct lz_fuse_uring_req_header hdr;
    static char mem[LZ_FRING_ROOM + CAP];
    memset(&hdr, 0, sizeof hdr);
    size_t h = size < sizeof hdr ? size : sizeof hdr;
    memcpy(&hdr, data, h);
    memcpy(mem + LZ_FRING_ROOM, data + h, size - h < CAP ? size - h : CAP);
    char *req;
    size_t len;
    if (lz_fring_request(&hdr, mem + LZ_FRING_ROOM, CAP, &req, &len) == 0) {
        if (req < mem || len < sizeof(struct fuse_in_header) || req + len > mem + sizeof mem)
            __builtin_trap();
        struct fuse_in_header in;
        memcpy(&in, req, sizeof in);
        if (in.len != len)
            __builtin_trap();
    }
    return 0;
}
