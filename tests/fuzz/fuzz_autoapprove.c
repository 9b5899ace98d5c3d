/* libFuzzer target: what the Host Coordinator does with a request's
 * argv before auto-approving it (escalation.h, autoapprove.h): the
 * argument check against the sandbox-writable trees and the matcher with
 * its canonical argv[0]. Input: NUL-separated argv elements. Properties:
 * no crash or hang (the bounds in autoapprove.c), a reason whenever an
 * argument is refused, and an argument that names a tree as its whole
 * (normalized or not) is never accepted. */
#include "escalation.h"

static char T0[] = "/tmp/lz-fuzz-ws", T1[] = "/var/tmp/lz-fuzz-vol";
static char *TREES[] = { T0, T1, NULL };
static char ECHO[] = "/usr/bin/echo", HI[] = "hi", TRUE_[] = "/usr/bin/true";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 16384)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[64];
    size_t argc = 0;
    for (size_t off = 0; off <= size && argc < 63;) {
        argv[argc++] = buf + off;
        off += strlen(buf + off) + 1;
    }
    argv[argc] = NULL;
    for (size_t i = 0; i < argc; i++) {
        char why[512];
        size_t t = 7;
        int r = lz_autoapprove_arg_reaches(argv[i], (const char *const *)TREES, 2, &t, why, sizeof why);
        if (r != 0 && r != -EPERM && r != -E2BIG)
            __builtin_trap();
        if (r < 0 && why[0] == '\0')
            __builtin_trap();
        if (r == 0 && t != SIZE_MAX)
            __builtin_trap();
        if (r == 0 && (strcmp(argv[i], TREES[0]) == 0 || strcmp(argv[i], TREES[1]) == 0))
            __builtin_trap();
    }
    /* The matcher: the first element as argv[0] against a few rules. */
    static char *r0[] = { ECHO, HI, NULL };
    static char *r1[] = { TRUE_, NULL };
    struct lz_esc_rule rules[] = { { r0, 2, false, false }, { r1, 1, true, false } };
    struct lz_esc_policy p = { rules, 2, true, TREES, 2 };
    struct lz_esc_request q = { .argv = argv, .argc = argc, .cwd = argc > 1 ? argv[1] : NULL };
    size_t k = 99;
    char why[768];
    int d = lz_esc_decide_why(&p, &q, &k, why, sizeof why);
    if (d == LZ_ESC_AUTO && k >= 2)
        __builtin_trap();
    free(buf);
    return 0;
}
