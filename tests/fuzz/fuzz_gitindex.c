/* fuzz_gitindex.c — libFuzzer target for the Git index validator
 * (gitindex.h): lz_gitindex_verify() at both hash lengths, and the config
 * reader on the same bytes.
 *
 *   ./fuzz_gitindex tests/fuzz/corpus/gitindex
 *
 * Checks the contract as well as memory safety: every answer is 0, -EPERM
 * or -EINVAL, and a refusal always comes with a one-line message. */
#include "gitindex.h"

#define FUZZ_MAX_INPUT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size, unsigned hl) {
    struct lz_error err = { 0 };
    int r = lz_gitindex_verify(data, size, hl, &err);
    if (r != 0 && r != -EPERM && r != -EINVAL)
        abort();
    if (r != 0 && (err.code != r || err.msg[0] == '\0' || strchr(err.msg, '\n')))
        abort();
    int c = lz_gitindex_check(data, size, hl, NULL);
    if (c != 0 && c != -EPERM && c != -EINVAL)
        abort();
    if (r == 0 && c != 0)
        abort(); /* verify is at least as strict as check */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT)
        return 0;
    one(data, size, 20);
    one(data, size, 32);
    unsigned h = lz_git_config_hash_len((const char *)data, size);
    if (h != 20 && h != 32)
        abort();
    /* Path rules on the raw bytes, for every mode. */
    static const unsigned modes[] = { 0100644, 0100755, 0120000, 0160000, 040000 };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(modes); i++) {
        int p = lz_git_path_check((const char *)data, size < 8192 ? size : 8192, modes[i]);
        if (p != 0 && p != -EPERM)
            abort();
    }
    return 0;
}
