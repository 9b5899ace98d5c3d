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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT)
        return 0;
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
    return 0;
}
