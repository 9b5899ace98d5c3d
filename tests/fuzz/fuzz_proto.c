/* libFuzzer target: the coordinator's decoder of untrusted HELLO messages. */
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_PROTO_MAX)
        return 0;
    struct lz_hello h;
    struct lz_error err;
    if (lz_hello_decode(data, size, &h, &err) == 0) {
        /* Re-encoding a decoded message must give the same bytes. */
        static uint8_t buf[LZ_PROTO_MAX];
        size_t len;
        if (lz_hello_encode(&h, buf, sizeof buf, &len) != 0 || len != size || memcmp(buf, data, size))
            __builtin_trap();
        lz_hello_clear(&h);
    }
    return 0;
}
