/* libFuzzer target: the prompt renderer (escape.h). Properties: the
 * rendering holds only printable ASCII and well-formed UTF-8 of characters
 * that need no escape; it unescapes to the exact input (injective); text
 * that unescapes renders back to itself. */
#include "escape.h"

static void check_safe(const char *s, size_t len) {
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = lz_utf8_decode(p + i, len - i, &cp);
        if (n == 0 || lz_escape_needs(cp))
            __builtin_trap();
        i += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (unsigned flags = 0; flags <= LZ_ESCAPE_QUOTED; flags += LZ_ESCAPE_QUOTED) {
        char *out = NULL;
        ssize_t n = lz_escape(data, size, flags, &out);
        if (n < 0 || (size_t)n != strlen(out))
            __builtin_trap();
        check_safe(out, (size_t)n);
        uint8_t *back = NULL;
        if (lz_unescape(out, (size_t)n, flags, &back) != (ssize_t)size || (size && memcmp(back, data, size) != 0))
            __builtin_trap();
        free(back);
        free(out);

        uint8_t *dec = NULL;
        ssize_t m = lz_unescape((const char *)data, size, flags, &dec);
        if (m >= 0) {
            char *re = NULL;
            ssize_t k = lz_escape(dec, (size_t)m, flags, &re);
            if (k != (ssize_t)size || memcmp(re, data, size) != 0)
                __builtin_trap();
            free(re);
            free(dec);
        }
    }
    return 0;
}
