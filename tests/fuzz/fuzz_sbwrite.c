/* libFuzzer target: the prompt's warning lines about files the sandbox can
 * write (sbwrite.h). The input is the executable's contents (a #! line the
 * sandbox wrote) up to the first NUL, then argv elements separated by NUL.
 * Properties: no crash or unbounded work; every line is printable ASCII
 * (the lines carry no request text, so nothing of the input reaches the
 * screen through them). */
#include "sbwrite.h"

#include <fcntl.h>
#include <sys/stat.h>

static struct lz_sbw trees;
static char ws[64], exe[96];

static void init(void) {
    snprintf(ws, sizeof ws, "/tmp/lzfuzz-sbw-XXXXXX");
    if (!mkdtemp(ws))
        __builtin_trap();
    snprintf(exe, sizeof exe, "%s/exe", ws);
    lz_sbw_add(&trees, ws, "the workspace");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ws[0])
        init();
    if (size > 8192)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t head = nul ? (size_t)(nul - data) : size;
    int fd = open(exe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0 || lz_write_full(fd, data, head) < 0)
        __builtin_trap();
    close(fd);
    char *argv[64];
    size_t argc = 0;
    argv[argc++] = exe;
    for (size_t i = nul ? head + 1 : size; i < size && argc < LZ_ARRAY_SIZE(argv);) {
        const uint8_t *e = memchr(data + i, 0, size - i);
        size_t n = e ? (size_t)(e - (data + i)) : size - i;
        argv[argc] = lz_xmalloc(n + 1);
        memcpy(argv[argc], data + i, n);
        argv[argc++][n] = '\0';
        i += n + 1;
    }
    size_t nw = 0;
    char **w = lz_sbw_warnings(&trees, ws, exe, (const char *const *)argv, argc, &nw);
    for (size_t k = 0; k < nw; k++) {
        for (const char *c = w[k]; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                __builtin_trap();
        free(w[k]);
    }
    if (w && w[nw] != NULL)
        __builtin_trap();
    free(w);
    for (size_t k = 1; k < argc; k++)
        free(argv[k]);
    return 0;
}
