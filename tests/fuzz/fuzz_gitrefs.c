/* fuzz_gitrefs.c — libFuzzer target for the packed-refs checker
 * (gitrefs.h): lz_packedrefs_check() stopping at the first problem and
 * counting every display ref.
 *
 *   ./fuzz_gitrefs tests/fuzz/corpus/gitrefs
 *
 * Checks the contract as well as memory safety: every answer is 0, -EPERM
 * or -EINVAL, a refusal comes with a one-line message, and both modes
 * agree. */
#include "gitrefs.h"

#define FUZZ_MAX_INPUT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Accepts every other display ref (by name length): exercises the
 * acceptance of refs already there. */
static bool some(void *ctx, const char *oid, size_t oid_len, const char *name, size_t name_len) {
    (void)ctx;
    return oid_len + name_len > 0 && (name_len & 1) && oid[0] && name[name_len - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT)
        return 0;
    int a = lz_packedrefs_check_allow(data, size, some, NULL, NULL, NULL);
    if (a != 0 && a != -EPERM && a != -EINVAL)
        abort();
    struct lz_error err = { 0 };
    int r = lz_packedrefs_check(data, size, NULL, &err);
    if (r != 0 && r != -EPERM && r != -EINVAL)
        abort();
    if (r != 0 && (err.code != r || err.msg[0] == '\0' || strchr(err.msg, '\n')))
        abort();
    size_t n = 0;
    int c = lz_packedrefs_check(data, size, &n, NULL);
    if (c != 0 && c != -EPERM && c != -EINVAL)
        abort();
    if (r == 0 && (c != 0 || n != 0))
        abort();
    if (c == -EPERM && n == 0)
        abort();
    if (r == -EPERM && c == 0)
        abort();
    if (r == 0 && a != 0)
        abort(); /* accepting more never refuses more */
    if (r == -EINVAL && a == 0)
        abort(); /* nor accepts what Git cannot read */
    return 0;
}
