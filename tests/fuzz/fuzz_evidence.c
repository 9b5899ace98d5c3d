/* libFuzzer target: the Domain Store's evidence text (evidence.c), read
 * back by recovery and the State Anchor. Well-formed text re-encodes,
 * field by field, to the same bytes; every lookup agrees with the check. */
#include "evidence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 2 * LZ_EVIDENCE_MAX)
        return 0;
    char *s = lz_xstrndup((const char *)data, size);
    uint64_t v;
    char small[32];
    int ok = lz_evidence_check(s);
    /* Malformed text answers no lookup. */
    if (ok < 0 &&
        (lz_evidence_get_u64(s, "userns", &v) != -EBADMSG ||
         lz_evidence_get(s, "mntns", small, sizeof small) != -EBADMSG))
        __builtin_trap();
    if (ok == 0 && strlen(s)) {
        /* Re-encode: split at spaces and '=', unescape through the decoder. */
        static struct lz_evidence e;
        lz_evidence_init(&e);
        char *save = NULL, *copy = lz_xstrdup(s);
        for (char *f = strtok_r(copy, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(f, '=');
            if (!eq)
                __builtin_trap();
            *eq = '\0';
            static char key[LZ_EVIDENCE_FIELD_MAX], val[LZ_EVIDENCE_FIELD_MAX];
            /* The key unescaped (the decoder checked every escape). */
            size_t kn = 0;
            for (size_t i = 0; f[i]; kn++)
                if (f[i] == '%') {
                    key[kn] = (char)strtol((char[]){ f[i + 1], f[i + 2], 0 }, NULL, 16);
                    i += 3;
                } else {
                    key[kn] = f[i++];
                }
            key[kn] = '\0';
            if (lz_evidence_get(s, key, val, sizeof val) != 1)
                __builtin_trap();
            lz_evidence_add(&e, key, val);
        }
        free(copy);
        const char *again;
        if (lz_evidence_end(&e, &again) != 0 || strcmp(again, s))
            __builtin_trap();
    }
    free(s);
    return 0;
}
