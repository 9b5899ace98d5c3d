/* git_dl.c — see git_dl.h. */
#define LZ_GIT2_DL_IMPL
#include "git_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct lz_git2_api lz_git2_api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_r;
static char load_msg[256];

static void load(void) {
    /* The handle stays open for the process's life. */
    void *h = dlopen(LZ_GIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        load_r = -ENOENT;
        snprintf(load_msg, sizeof load_msg, "cannot load %s (apt-get install libgit2-" LIBGIT2_SOVERSION "): %s",
                 LZ_GIT2_SONAME, dlerror());
        return;
    }
#define LZ_GIT2_SYM(f)                                                                                                 \
    if (!(lz_git2_api.p_##f = (__typeof__(f) *)dlsym(h, #f))) {                                                        \
        load_r = -ENOSYS;                                                                                              \
        snprintf(load_msg, sizeof load_msg, "%s has no %s", LZ_GIT2_SONAME, #f);                                       \
        return;                                                                                                        \
    }
    LZ_GIT2_FUNCS(LZ_GIT2_SYM)
#undef LZ_GIT2_SYM
}

int lz_git2_load(struct lz_error *err) {
    pthread_once(&once, load);
    if (load_r < 0)
        return lz_error_set(err, load_r, "%s", load_msg);
    return 0;
}
