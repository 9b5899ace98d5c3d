/* libFuzzer target: the host-rule parser and the host-name canonicaliser
 * (hostrule.c). A parsed rule must print back to text that parses to the
 * same rule; a canonical name must be its own canonical form. */
#include "hostrule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_HOSTRULE_TEXT_MAX + 8)
        return 0;
    char text[LZ_HOSTRULE_TEXT_MAX + 9];
    memcpy(text, data, size);
    text[size] = '\0';
    struct lz_error e;
    char c[LZ_HOSTNAME_MAX + 1], c2[LZ_HOSTNAME_MAX + 1];
    if (lz_hostname_canon((const char *)data, size, c, &e) == 0) {
        if (lz_hostname_canon(c, strlen(c), c2, &e) != 0 || strcmp(c, c2) != 0)
            __builtin_trap();
    } else if (!e.msg[0] || strchr(e.msg, '\n')) {
        __builtin_trap();
    }
    for (unsigned flags = 0; flags <= LZ_HOSTRULE_NO_PORTS; flags++) {
        struct lz_hostrule r, r2;
        if (lz_hostrule_parse(text, flags, &r, &e) != 0) {
            if (!e.msg[0] || strchr(e.msg, '\n'))
                __builtin_trap();
            continue;
        }
        char back[LZ_HOSTRULE_TEXT_MAX];
        if (lz_hostrule_format(&r, back, sizeof back) != 0 || lz_hostrule_parse(back, flags, &r2, &e) != 0 ||
            memcmp(&r, &r2, sizeof r) != 0)
            __builtin_trap();
        /* A wildcard never matches its own suffix; an exact rule matches
         * its name. */
        if (r.wildcard == lz_hostrule_match(&r, r.name))
            __builtin_trap();
        struct lz_hostports p;
        if (lz_hostrule_decide(&r, 1, NULL, 0, r.name, &p) != (r.wildcard ? LZ_HOST_UNLISTED : LZ_HOST_ALLOWED))
            __builtin_trap();
        if (lz_hostrule_decide(&r, 1, &r, 1, r.name, &p) == LZ_HOST_ALLOWED)
            __builtin_trap();
    }
    return 0;
}
