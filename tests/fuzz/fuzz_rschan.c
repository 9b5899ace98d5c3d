/* libFuzzer target: the decoder of the Coordinator <-> Supervisor control
 * channel (rschan.c). A decoded message must re-encode to the same bytes. */
#include "rschan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_RSCHAN_MAX + 16)
        return 0;
    static struct lz_rsmsg m;
    if (lz_rschan_decode(data, size, &m) == 0) {
        static uint8_t buf[LZ_RSCHAN_MAX];
        size_t len;
        if (lz_rschan_encode(&m, buf, sizeof buf, &len) != 0 || len != size || memcmp(buf, data, size))
            __builtin_trap();
        char line[256];
        lz_rschan_format(&m, line, sizeof line);
    }
    return 0;
}
