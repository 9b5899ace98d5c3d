/* paths.c: paths for the policy: a name from the kernel checked, a directory's path
 * relative to the source root (or the store) as the kernel sees it now.
 */
#include "router_int.h"

/* ---- paths for the policy ---- */

int name_valid(const char *name) {
    size_t n = strlen(name);
    if (n > NAME_MAX)
        return -ENAMETOOLONG;
    if (n == 0 || strchr(name, '/'))
        return -EINVAL;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    return 0;
}

int read_fd_path(struct router *r, int fd, char *buf, size_t size) {
    char num[24];
    snprintf(num, sizeof num, "%d", fd);
    ssize_t n = readlinkat(r->proc_fd, num, buf, size - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n >= size - 1)
        return -ENAMETOOLONG;
    buf[n] = '\0';
    return 0;
}

int refresh_root_path(struct router *r) {
    char buf[PATH_MAX + 1];
    int rc = read_fd_path(r, r->root.fd, buf, sizeof buf);
    if (rc < 0)
        return rc;
    if (buf[0] != '/')
        return -ESTALE; /* "(unreachable)/..." */
    free(r->root_path);
    r->root_path = lz_xstrdup(buf);
    r->root_len = strlen(buf);
    return 0;
}

/* abs relative to directory path `root` (root_len bytes), or NULL when it
 * is not that directory or below it. */
static const char *strip_prefix(const char *abs, const char *root, size_t root_len) {
    if (root_len == 1 && root[0] == '/')
        return abs[0] == '/' ? abs + 1 : NULL;
    if (strncmp(abs, root, root_len) != 0)
        return NULL;
    if (abs[root_len] == '\0')
        return abs + root_len;
    if (abs[root_len] == '/')
        return abs + root_len + 1;
    return NULL;
}

static const char *strip_root(struct router *r, const char *abs) {
    return strip_prefix(abs, r->root_path, r->root_len);
}

/* The current path of directory fd `fd`, relative to the source root. */
int dir_relpath(struct router *r, int fd, char *out, size_t size) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_nlink == 0)
        return -ENOENT;
    char abs[PATH_MAX + 1];
    int rc = read_fd_path(r, fd, abs, sizeof abs);
    if (rc < 0)
        return rc;
    for (int attempt = 0; attempt < 2; attempt++) {
        const char *rel = strip_root(r, abs);
        /* A directory of the Ignored Workspace State has the same
         * workspace-relative path as its place in the view. */
        if (!rel && r->store_path)
            rel = strip_prefix(abs, r->store_path, r->store_len);
        if (rel) {
            size_t len = strlen(rel);
            if (len >= size)
                return -ENAMETOOLONG;
            memcpy(out, rel, len + 1);
            return 0;
        }
        /* The workspace directory itself may have been renamed on the host. */
        if (attempt == 0 && refresh_root_path(r) < 0)
            break;
    }
    return -ESTALE;
}

int join_path(char *out, size_t size, const char *dir, const char *name) {
    if (dir[0] == '\0')
        return lz_snprintf(out, size, "%s", name);
    return lz_snprintf(out, size, "%s/%s", dir, name);
}
