/* libFuzzer target: the router's decisions on agent-chosen bytes (a
 * symlink's target, router_link.h; a path on a volume, router_volume.h).
 * Input: one byte choosing the link's directory, then the target (also
 * tried as a path). Properties: no crash or overrun; the link check
 * answers only 0, -EPERM or -ENAMETOOLONG; an allowed target resolves to
 * a path that is not denied; a target with ".." after a name is refused;
 * the plain check refuses every path the path rule refuses. */
#include "router_link.h"
#include "router_volume.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static const char *const deny[] = { "/home/u/.local/share/lazaret", "/run/lazaret" };
static const char *const bases[] = { "/home/u/work", "/home/u/work/a/b", "/", "/home/u/.local/share/lazaret/vol/v1" };

/* A small fake host: a few symlinks, one of them a loop. */
static int fake_readlink(void *ctx, const char *path, char *buf, size_t size) {
    (void)ctx;
    static const char *const links[][2] = {
        { "/home/u/work/l", "/home/u/.local" },   { "/home/u/work/r", "../x/.." },
        { "/home/u/work/a/b/up", "../../../.." }, { "/loop", "/loop" },
        { "/home/u/work/abs", "/run" },
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        if (strcmp(path, links[i][0]) == 0) {
            snprintf(buf, size, "%s", links[i][1]);
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 3 * PATH_MAX)
        return 0;
    const char *base = bases[data[0] % (sizeof bases / sizeof bases[0])];
    char *t = lz_xmalloc(size);
    memcpy(t, data + 1, size - 1);
    t[size - 1] = '\0';
    struct lz_router_link_policy pol = {
        .deny = deny,
        .n_deny = 2,
        .root = data[0] & 0x80 ? bases[3] : bases[0],
        .mountpoint = "/mnt/view",
        .readlink = fake_readlink,
    };
    int rc = lz_router_link_check(&pol, base, t);
    if (rc != 0 && rc != -EPERM && rc != -ENAMETOOLONG)
        __builtin_trap();
    if (!lz_router_link_shape_ok(t) && rc != -EPERM)
        __builtin_trap();
    if (rc == 0) {
        char out[PATH_MAX + 1];
        if (lz_router_link_resolve(&pol, base, t, out) != 0 || lz_router_link_denied(&pol, out) || out[0] != '/')
            __builtin_trap();
    }
    for (int op = LZ_ROP_CREATE; op <= LZ_ROP_RENAME; op++) {
        struct lz_router_req q = { .op = (enum lz_router_op)op, .path = t, .path2 = t, .flags = data[0] & 3 };
        int prc = lz_router_plain_check(&q);
        if (lz_router_path_valid(t) < 0 && prc >= 0)
            __builtin_trap();
    }
    free(t);
    return 0;
}
