/* links.c: symlinks the host would follow into Lazaret's own storage
 * (--deny-link-target). The rule and the resolution as the host would do
 * it are src/lib/router_link.h (pure); here the host's entries are read
 * for it, and every symlink a move would carry is found and judged again
 * at its new place.
 */
#include "router_int.h"

#include "router_link.h"

#define LT_WALK_MAX 50000 /* entries checked when a directory moves */
#define LT_DEPTH_MAX 128

/* lz_router_link_policy.readlink over the host's real tree. */
static int lt_readlink(void *ctx, const char *path, char *buf, size_t size) {
    (void)ctx;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode))
        return 0;
    ssize_t n = readlink(path, buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 1;
}

/* 0 if a symlink to `target` may live in directory `base`, else -EPERM
 * (logged as `op` on `name`) or another negative errno. */
static int lt_check(struct router *r, enum lz_router_op op, const char *base, const char *name, const char *target) {
    if (r->n_deny == 0)
        return 0;
    const struct lz_router_link_policy pol = {
        .deny = (const char *const *)r->deny,
        .n_deny = r->n_deny,
        .root = r->root_path,
        .mountpoint = r->mountpoint,
        .readlink = lt_readlink,
    };
    int rc = lz_router_link_check(&pol, base, target);
    if (rc == -EPERM)
        refused(r, LZ_REFW_LINK_TARGET, (uint8_t)op, name, target, rc, NULL);
    else if (rc < 0)
        log_refusal(r, lz_router_op_name(op), name, target, rc);
    return rc;
}

/* The kernel's current absolute path of directory inode `dir`. */
static int lt_dir_path(struct router *r, struct rt_inode *dir, char *out, size_t size) {
    int fd = inode_fd(r, dir);
    if (fd < 0)
        return fd;
    int rc = read_fd_path(r, fd, out, size);
    if (rc < 0)
        return rc;
    return out[0] == '/' ? 0 : -ESTALE;
}

/* A new symlink `name` -> `target` in `dir`. */
int lt_check_new(struct router *r, struct rt_inode *dir, const char *name, const char *target) {
    if (r->n_deny == 0)
        return 0;
    if (r->ig) {
        /* A symlink in the store is never seen by the host's tools. */
        struct rt_at at;
        int rc = route_at(r, dir, name, S_IFLNK, true, &at);
        bool store = rc == 0 && at.store;
        at_done(&at);
        if (store)
            return 0;
    }
    char base[PATH_MAX + 1];
    int rc = lt_dir_path(r, dir, base, sizeof base);
    return rc < 0 ? rc : lt_check(r, LZ_ROP_SYMLINK, base, name, target);
}

/* Every symlink below open directory `fd`, as if it were at `base`. */
static int lt_walk(struct router *r, int fd, char *base, unsigned depth, size_t *budget) {
    if (depth > LT_DEPTH_MAX)
        return -EXDEV; /* mv copies instead, through the checked operations */
    DIR *dp;
    int rc = lz_opendir_at(fd, &dp);
    if (rc < 0)
        return rc;
    int dfd = dirfd(dp);
    size_t blen = strlen(base);
    struct dirent *de;
    while (rc == 0 && (de = readdir(dp))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if ((*budget)-- == 0) {
            rc = -EXDEV;
            break;
        }
        unsigned char t = de->d_type;
        struct stat st;
        if (t == DT_UNKNOWN) {
            if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            t = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
        }
        if (t == DT_LNK) {
            char target[PATH_MAX + 1];
            ssize_t n = readlinkat(dfd, de->d_name, target, sizeof target - 1);
            if (n < 0)
                continue; /* gone meanwhile */
            target[n] = '\0';
            rc = lt_check(r, LZ_ROP_RENAME, base, de->d_name, target);
        } else if (t == DT_DIR) {
            if (lz_snprintf(base + blen, PATH_MAX + 1 - blen, "/%s", de->d_name) < 0) {
                rc = -ENAMETOOLONG;
                break;
            }
            _cleanup_close_ int sub = lz_openat_beneath(dfd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
            if (sub >= 0)
                rc = lt_walk(r, sub, base, depth + 1, budget);
            base[blen] = '\0';
        }
    }
    closedir(dp);
    return rc;
}

/* Entry `name` of type `type` in directory fd `sfd` is about to become
 * `toname` in `todir` (rename, or a hard link to a symlink): its symlink,
 * or every symlink below the directory, is judged again from there. */
int lt_check_move(struct router *r, int sfd, const char *name, mode_t type, struct rt_inode *todir,
                  const char *toname) {
    if (r->n_deny == 0 || !(S_ISLNK(type) || S_ISDIR(type)))
        return 0;
    char base[PATH_MAX + 1];
    int rc = lt_dir_path(r, todir, base, sizeof base);
    if (rc < 0)
        return rc;
    if (S_ISLNK(type)) {
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);
        if (n < 0)
            return -errno;
        target[n] = '\0';
        return lt_check(r, LZ_ROP_RENAME, base, name, target);
    }
    size_t blen = strlen(base);
    if (lz_snprintf(base + blen, sizeof base - blen, "/%s", toname) < 0)
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = lz_openat_beneath(sfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (fd < 0)
        return fd;
    size_t budget = LT_WALK_MAX;
    rc = lt_walk(r, fd, base, 0, &budget);
    if (rc == -EXDEV)
        refused(r, LZ_REFW_TOO_BIG, LZ_ROP_RENAME, name, toname, rc, "too big to check for symlinks");
    return rc;
}
