/* paths.c — see paths.h. */
#include "paths.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>

#ifndef LZ_LIBEXECDIR
#define LZ_LIBEXECDIR "/usr/local/libexec/lazaret"
#endif

static int check_private_dir(const char *p, struct lz_error *err) {
    struct stat st;
    if (lstat(p, &st) < 0)
        return lz_error_set(err, -errno, "%s: %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return lz_error_set(err, -ENOTDIR, "%s is not a directory", p);
    if (st.st_uid != getuid())
        return lz_error_set(err, -EPERM, "%s belongs to uid %u, not to you (uid %u): remove it", p, st.st_uid,
                            getuid());
    if (st.st_mode & 077) {
        if (chmod(p, 0700) < 0)
            return lz_error_set(err, -errno, "%s has mode %o and cannot be made 0700", p, st.st_mode & 07777);
    }
    return 0;
}

int lz_runtime_dir(char **ret, struct lz_error *err) {
    const char *x = secure_getenv("XDG_RUNTIME_DIR");
    _cleanup_free_ char *dir = NULL;
    if (x && x[0] == '/' && access(x, W_OK | X_OK) == 0)
        dir = lz_xasprintf("%s/lazaret", x);
    else
        dir = lz_xasprintf("/tmp/lazaret-%u", (unsigned)getuid());
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, -errno, "cannot create runtime directory %s: %s", dir, strerror(errno));
    int r = check_private_dir(dir, err);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(dir);
    return 0;
}

int lz_self_exe(char **ret) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    *ret = lz_xstrdup(buf);
    return 0;
}

int lz_libexec_path(const char *name, char **ret, struct lz_error *err) {
    /* Next to the binary first (build tree), then the install location. */
    _cleanup_free_ char *self = NULL;
    if (lz_self_exe(&self) == 0) {
        _cleanup_free_ char *p = lz_xasprintf("%s/%s", dirname(self), name);
        if (access(p, X_OK) == 0) {
            *ret = TAKE_PTR(p);
            return 0;
        }
    }
    _cleanup_free_ char *p = lz_xasprintf("%s/%s", LZ_LIBEXECDIR, name);
    if (access(p, X_OK) == 0) {
        *ret = TAKE_PTR(p);
        return 0;
    }
    return lz_error_set(err, -ENOENT, "%s not found next to lazaret or in %s: reinstall lazaret", name, LZ_LIBEXECDIR);
}

char *lz_domain_socket_path(const char *rt, const char *hex) {
    /* 128 bits of the Domain ID keep the path within sun_path. */
    return lz_xasprintf("%s/%.32s.sock", rt, hex);
}
char *lz_domain_start_lock_path(const char *rt, const char *hex) { return lz_xasprintf("%s/%.32s.start", rt, hex); }
