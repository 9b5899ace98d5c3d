/* libFuzzer target: the readiness line (readiness.c) a starting
 * coordinator or router writes to its parent. A decoded line must encode
 * back to exactly the same bytes. */
#include "readiness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lz_ready r;
    if (lz_ready_decode((const char *)data, size, &r) == 0) {
        char b[LZ_READY_LINE_MAX];
        size_t n = lz_ready_encode(r.status, r.msg, b, sizeof b);
        if (n != size || memcmp(b, data, size))
            __builtin_trap();
    }
    return 0;
}
