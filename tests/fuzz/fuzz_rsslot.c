/* libFuzzer target: the slot name of the Supervisor's STAGE and STAGED
 * messages (rsslot.c). A parsed slot is named back as exactly the input. */
#include "rsslot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 || memchr(data, 0, size))
        return 0; /* a C string on the channel: no NUL inside */
    char s[65];
    memcpy(s, data, size);
    s[size] = '\0';
    struct lz_rs_slot t;
    if (lz_rs_slot_parse(s, &t) == 0) {
        char b[LZ_RS_SLOT_NAME_MAX];
        if (strcmp(lz_rs_slot_name(&t, b), s))
            __builtin_trap();
    }
    return 0;
}
