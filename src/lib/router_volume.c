/* router_volume.c — the shape rules of the workspace router; see
 * router_volume.h. */
#include "router_volume.h"

#include <errno.h>
#include <linux/fs.h>
#include <stddef.h>
#include <sys/stat.h>

int lz_router_plain_check(const struct lz_router_req *q) {
    if (!q || !q->path)
        return -EINVAL;
    int rc = lz_router_path_valid(q->path);
    if (rc < 0)
        return rc;
    switch (q->op) {
    case LZ_ROP_CREATE:
    case LZ_ROP_MKDIR:
    case LZ_ROP_SYMLINK:
    case LZ_ROP_LINK:
        if (q->path[0] == '\0')
            return q->exists ? -EEXIST : -EINVAL;
        return 0;
    case LZ_ROP_RENAME:
        if (q->flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
            return -EINVAL;
        if (!q->path2 || lz_router_path_valid(q->path2) < 0)
            return -EINVAL;
        return q->path[0] == '\0' || q->path2[0] == '\0' ? -EBUSY : 0;
    case LZ_ROP_UNLINK:
    case LZ_ROP_RMDIR: return q->path[0] == '\0' ? -EBUSY : 0;
    case LZ_ROP_WRITE:
    case LZ_ROP_SETATTR: return 0;
    }
    return -EINVAL;
}

int lz_router_create_type_check(enum lz_router_op op, unsigned type) {
    if (op == LZ_ROP_CREATE && !S_ISREG(type) && !S_ISFIFO(type))
        return -EPERM; /* devices cannot work (nodev) and sockets are not served */
    return 0;
}

mode_t lz_router_chmod_mode(unsigned type, mode_t mode) {
    mode &= 07777;
    if (!S_ISDIR(type))
        return mode & ~(mode_t)(S_ISUID | S_ISGID); /* no set-id programs on the host */
    return mode & ~(mode_t)S_ISUID;
}

int lz_router_held_check(enum lz_router_op op, unsigned type, bool sticky, bool sealed) {
    if (op == LZ_ROP_LINK && S_ISDIR(type))
        return -EPERM;
    if (sticky && (op == LZ_ROP_WRITE || op == LZ_ROP_SETATTR || op == LZ_ROP_LINK))
        return -EPERM;
    if (sealed && op == LZ_ROP_WRITE)
        return -EPERM;
    return 0;
}

int lz_router_backings_check(bool from_store, bool to_store) { return from_store != to_store ? -EXDEV : 0; }

int lz_router_owner_action(unsigned type, uid_t uid, gid_t gid, uid_t dev_uid, gid_t dev_gid, bool no_xattr) {
    if (S_ISLNK(type))
        return LZ_OWNER_NOTHING;
    if (uid == dev_uid && gid == dev_gid)
        return LZ_OWNER_CLEAR;
    return no_xattr ? -EPERM : LZ_OWNER_SET;
}

enum lz_router_backing lz_router_backing_decide(enum lz_router_backing ignore_backing, size_t ht_match, size_t rel_len,
                                                bool under_git, bool *seed) {
    *seed = false;
    if (ignore_backing != LZ_BACKING_HOST || !ht_match || under_git)
        return ignore_backing;
    *seed = ht_match == rel_len;
    return LZ_BACKING_STORE;
}

int lz_router_counterpart_check(int counterpart_empty) {
    if (counterpart_empty == 0)
        return -ENOTEMPTY;
    if (counterpart_empty < 0 && counterpart_empty != -ENOENT && counterpart_empty != -ENOTDIR)
        return counterpart_empty;
    return 0;
}

int lz_router_root_flags_check(int flags) { return flags & FS_CASEFOLD_FL ? -EINVAL : 0; }

int lz_router_write_check(bool truncate, enum lz_router_handle h, bool sticky, bool sealed) {
    if (sealed)
        return -EPERM;
    if (truncate)
        return h != LZ_HANDLE_NONE && !sticky ? 0 : LZ_ASK_PATH_POLICY;
    if (h == LZ_HANDLE_OPEN)
        return 0;
    if (h == LZ_HANDLE_WRITABLE)
        return sticky ? -EPERM : 0;
    return LZ_ASK_PATH_POLICY;
}
