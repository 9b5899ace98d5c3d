/* archive_dl.c — see archive_dl.h. */
#define LZ_ARCHIVE_DL_IMPL
#include "archive_dl.h"

#include <dlfcn.h>
#include <pthread.h>

struct lz_archive_api lz_archive_api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_r;
static char load_msg[256];

static void load(void) {
    /* The handle stays open for the process's life. */
    void *h = dlopen(LZ_ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        load_r = -ENOENT;
        snprintf(load_msg, sizeof load_msg, "cannot load %s (apt-get install libarchive13): %s", LZ_ARCHIVE_SONAME,
                 dlerror());
        return;
    }
#define LZ_ARCHIVE_SYM(f)                                                                                              \
    if (!(lz_archive_api.p_##f = (__typeof__(f) *)dlsym(h, #f))) {                                                     \
        load_r = -ENOSYS;                                                                                              \
        snprintf(load_msg, sizeof load_msg, "%s has no %s", LZ_ARCHIVE_SONAME, #f);                                    \
        return;                                                                                                        \
    }
    LZ_ARCHIVE_FUNCS(LZ_ARCHIVE_SYM)
#undef LZ_ARCHIVE_SYM
}

int lz_archive_load(struct lz_error *err) {
    pthread_once(&once, load);
    if (load_r < 0)
        return lz_error_set(err, load_r, "%s", load_msg);
    return 0;
}
