/* libFuzzer target: the edited-command splitter and its quoter
 * (shellwords.h). Properties: a split line quotes back to a line that
 * splits to the same argv; any argv (input split at NUL bytes) that the
 * quoter accepts splits back to itself; no operator character survives
 * unquoted (checked by the quoter's round trip). */
#include "shellwords.h"

static void same_or_trap(char **a, size_t an, char **b, size_t bn) {
    if (an != bn)
        __builtin_trap();
    for (size_t i = 0; i < an; i++)
        if (strcmp(a[i], b[i]) != 0)
            __builtin_trap();
}

static void roundtrip(char **argv, size_t argc) {
    char *line = NULL;
    if (lz_shellwords_quote((const char *const *)argv, argc, &line, NULL) != 0)
        return;
    char **back = NULL;
    size_t bn = 0;
    if (lz_shellwords_split(line, strlen(line), &back, &bn, NULL) != 0)
        __builtin_trap();
    same_or_trap(argv, argc, back, bn);
    lz_shellwords_free(back);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char **argv = NULL;
    size_t argc = 0;
    if (lz_shellwords_split((const char *)data, size, &argv, &argc, NULL) == 0) {
        if (argc == 0 || argv[argc] != NULL)
            __builtin_trap();
        roundtrip(argv, argc);
        lz_shellwords_free(argv);
    }
    /* The input as NUL-separated words. */
    if (size > 4096)
        return 0;
    char *copy = lz_xmalloc(size + 1);
    memcpy(copy, data, size);
    copy[size] = 0;
    char *words[LZ_SHELLWORDS_WORDS_MAX + 1];
    size_t n = 0;
    for (size_t i = 0; i <= size && n < LZ_SHELLWORDS_WORDS_MAX;) {
        words[n++] = copy + i;
        i += strlen(copy + i) + 1;
    }
    words[n] = NULL;
    roundtrip(words, n);
    free(copy);
    return 0;
}
