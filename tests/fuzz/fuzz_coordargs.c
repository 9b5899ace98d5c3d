/* libFuzzer target: the Host Coordinator's argument decoder (coordargs.c,
 * argcodec.c). The input is an argv, its elements separated by NUL bytes.
 * A decoded struct must encode, and decode again to what encodes to the
 * same argv (the codec's round trip). */
#include "argcodec.h"
#include "coordargs.h"

#define MAX_ARGS 512

static int count(char **v) {
    int n = 0;
    while (v[n])
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 16384)
        return 0;
    char *buf = lz_xmalloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    struct lz_coordinator_args a;
    struct lz_error err = { 0 };
    if (lz_coordargs_decode(argc, argv, &a, &err) == 0) {
        char **enc = NULL, **enc2 = NULL;
        if (lz_coordargs_encode(&a, "/self", &enc, &err) != 0)
            __builtin_trap();
        struct lz_coordinator_args b;
        if (lz_coordargs_decode(count(enc) - 2, enc + 2, &b, &err) != 0)
            __builtin_trap();
        if (lz_coordargs_encode(&b, "/self", &enc2, &err) != 0)
            __builtin_trap();
        for (int i = 0; enc[i] || enc2[i]; i++)
            if (!enc[i] || !enc2[i] || strcmp(enc[i], enc2[i]))
                __builtin_trap();
        lz_argv_free(enc);
        lz_argv_free(enc2);
    } else if (!err.msg[0]) {
        __builtin_trap(); /* a refusal always says why */
    }
    free(buf);
    return 0;
}
