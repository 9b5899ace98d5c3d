/* owners.c: owners: the sandbox-side owner of a host file, kept in user.lazaret.owner. */
#include "router_int.h"

#include "router_volume.h"

/* ---- owners ----
 *
 * Inside the sandbox every user may own files, as on a local disk: gVisor
 * checks permissions itself against the owner it is shown, and after it
 * creates a file for a non-root user it changes the owner to that user. The
 * host file stays the developer's (uid 0 here): the sandbox-side owner is
 * kept in the file's `user.lazaret.owner` xattr ("UID:GID", ids of the
 * Domain's user namespace) and shown in its place. The router serves no
 * xattr operation, so the sandbox can neither read nor forge it. Symlinks
 * cannot carry user xattrs: they stay the developer's (a change of their
 * owner is accepted and not kept). */

#define OWNER_XATTR "user.lazaret.owner"

/* A path for the xattr calls on `in`: its handle fhfd or its held fd (a
 * magic link, to be followed), or its name in its holder (*by_name: use the
 * l* calls). 0, or -errno. */
static int owner_path(struct router *r, struct rt_inode *in, int fhfd, char *out, size_t size, int *owned,
                      bool *by_name) {
    *owned = -EBADF;
    *by_name = false;
    if (fhfd >= 0)
        return lz_snprintf(out, size, "/proc/self/fd/%d", fhfd);
    if (in->fd >= 0 || S_ISDIR(in->type) || in->is_root) {
        int fd = inode_fd(r, in);
        return fd < 0 ? fd : lz_snprintf(out, size, "/proc/self/fd/%d", fd);
    }
    int pfd = holder_fd(r, in, owned);
    if (pfd < 0)
        return pfd;
    *by_name = true; /* then never follow a symlink that took the name */
    return lz_snprintf(out, size, "/proc/self/fd/%d/%s", pfd, in->name);
}

/* Shows the sandbox-side owner of `in` in st. */
void apply_owner(struct router *r, struct rt_inode *in, int fhfd, struct stat *st) {
    if (in->own_state == 0) {
        in->own_state = 1;
        char path[PATH_MAX + 64], val[48];
        _cleanup_close_ int owned = -EBADF;
        bool by_name;
        if (!r->no_xattr && !S_ISLNK(in->type) && owner_path(r, in, fhfd, path, sizeof path, &owned, &by_name) == 0) {
            ssize_t n = by_name ? lgetxattr(path, OWNER_XATTR, val, sizeof val - 1)
                                : getxattr(path, OWNER_XATTR, val, sizeof val - 1);
            unsigned long u, g;
            char end;
            if (n > 0) {
                val[n] = '\0';
                if (sscanf(val, "%lu:%lu%c", &u, &g, &end) == 2 && u <= UINT32_MAX && g <= UINT32_MAX) {
                    in->own_state = 2;
                    in->ouid = (uid_t)u;
                    in->ogid = (gid_t)g;
                }
            } else if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
                r->no_xattr = true;
            }
        }
    }
    if (in->own_state == 2) {
        st->st_uid = in->ouid;
        st->st_gid = in->ogid;
    }
}

/* Makes uid:gid (-1: unchanged) the sandbox-side owner of `in`. */
int set_owner(struct router *r, struct rt_inode *in, int fhfd, uid_t uid, gid_t gid) {
    struct stat dummy = { .st_uid = r->uid, .st_gid = r->gid };
    apply_owner(r, in, fhfd, &dummy);
    uid_t nu = uid == (uid_t)-1 ? dummy.st_uid : uid;
    gid_t ng = gid == (gid_t)-1 ? dummy.st_gid : gid;
    int act = lz_router_owner_action(in->type, nu, ng, r->uid, r->gid, r->no_xattr);
    if (act == LZ_OWNER_NOTHING)
        return 0; /* no user xattrs on symlinks: they stay the developer's */
    char path[PATH_MAX + 64];
    _cleanup_close_ int owned = -EBADF;
    bool by_name;
    int rc = owner_path(r, in, fhfd, path, sizeof path, &owned, &by_name);
    if (rc < 0)
        return rc;
    if (act < 0)
        return act;
    if (act == LZ_OWNER_CLEAR) {
        if ((by_name ? lremovexattr(path, OWNER_XATTR) : removexattr(path, OWNER_XATTR)) < 0 && errno != ENODATA)
            return errno == ENOTSUP ? -EPERM : -errno;
        in->own_state = 1;
        return 0;
    }
    char val[48];
    snprintf(val, sizeof val, "%lu:%lu", (unsigned long)nu, (unsigned long)ng);
    if ((by_name ? lsetxattr(path, OWNER_XATTR, val, strlen(val), 0)
                 : setxattr(path, OWNER_XATTR, val, strlen(val), 0)) < 0) {
        if (errno == ENOTSUP)
            r->no_xattr = true;
        return errno == ENOTSUP ? -EPERM : -errno;
    }
    in->own_state = 2;
    in->ouid = nu;
    in->ogid = ng;
    return 0;
}
