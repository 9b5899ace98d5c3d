/* backing.c: the two backings (the host workspace and the Ignored Workspace State,
 * ignore.h): which one serves a name, and the questions the operations ask
 * the policy (src/lib/router.h) about a name or an inode.
 */
#include "router_int.h"

#include "router_volume.h"

int entry_relpath(struct router *r, struct rt_inode *dir, const char *name, char *out, size_t size) {
    char d[LZ_ROUTER_PATH_MAX + 1] = "";
    int dfd = inode_fd(r, dir);
    if (dfd < 0)
        return dfd;
    int rc = dir_relpath(r, dfd, d, sizeof d);
    if (rc < 0)
        return rc;
    return join_path(out, size, d, name);
}

/* The backing of entry `name` (workspace-relative `rel`) of the host
 * directory hfd (`drel`): what the ignore rules decide, except that a
 * host-tool configuration path they leave to the host is the store's,
 * seeded from the host's entry (htseed.h). */
int route_of(struct router *r, int hfd, const char *drel, const char *name, const char *rel, bool is_dir,
             const struct stat *hst) {
    static char *const git[] = { (char *)".git" };
    int b = rt_ignore_route(r->ig, rel, is_dir, hst);
    if (b < 0)
        return b;
    bool seed;
    size_t m = rt_ht_match(r->ht, rel);
    /* The .git test only matters for a host-tool path (most lookups are not). */
    b = lz_router_backing_decide(b == RT_STORE ? LZ_BACKING_STORE : LZ_BACKING_HOST, m, strlen(rel),
                                 m && lz_hosttools_match(git, 1, rel), &seed) == LZ_BACKING_STORE
        ? RT_STORE
        : RT_HOST;
    if (seed)
        rt_ht_seed(r->ht, hfd, rt_ignore_store_fd(r->ig), drel, name, rel);
    return b;
}

void at_done(struct rt_at *at) {
    if (at->owned >= 0)
        close(at->owned);
    at->owned = -EBADF;
}

/* Routes `name` in `dir`. `type` is the entry's type when the caller knows
 * it (what it is making or moving), else 0: the host's entry decides, or
 * the store's when the host has none. A store counterpart of `dir` is made
 * when `create`; without it a missing one gives -ENOENT. For a `lookup`
 * (type 0), a name neither backing has gives -ENOENT at once. */
int route_at_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name, mode_t type, bool create,
                 bool lookup, struct rt_at *at) {
    at->owned = -EBADF;
    at->store = false;
    at->on_host = false;
    int rc = name_valid(name);
    if (rc < 0)
        return rc;
    int dfd = inode_fd(r, dir);
    if (dfd < 0)
        return dfd;
    at->fd = dfd;
    if (!r->ig)
        return 0;
    if (dir->store) {
        at->store = true;
        return 0;
    }
    char dbuf[LZ_ROUTER_PATH_MAX + 1], rel[LZ_ROUTER_PATH_MAX + 1];
    if (!drel) {
        if ((rc = dir_relpath(r, dfd, dbuf, sizeof dbuf)) < 0)
            return rc;
        drel = dbuf;
    }
    if ((rc = join_path(rel, sizeof rel, drel, name)) < 0)
        return rc;
    bool is_dir = S_ISDIR(type);
    struct stat sst;
    at->on_host = fstatat(dfd, name, &at->hst, AT_SYMLINK_NOFOLLOW) == 0;
    if (at->on_host && !type) {
        is_dir = S_ISDIR(at->hst.st_mode);
    } else if (!type) {
        _cleanup_close_ int sfd = rt_open_dir_p(rt_ignore_store_fd(r->ig), drel, false);
        if (sfd >= 0 && fstatat(sfd, name, &sst, AT_SYMLINK_NOFOLLOW) == 0) {
            is_dir = S_ISDIR(sst.st_mode);
        } else if (lookup) {
            /* A lookup of a name neither backing has: whichever the rules
             * chose would answer ENOENT, so they are not asked (the common
             * case of a name about to be made: it spares the evaluation of
             * the ignore rules for every new name). Only for a lookup: an
             * operation on the name must still go where the rules say,
             * whatever the host made meanwhile. */
            return -ENOENT;
        }
    }
    int b = route_of(r, dfd, drel, name, rel, is_dir, at->on_host ? &at->hst : NULL);
    if (b < 0)
        return b;
    if (b == RT_HOST)
        return 0;
    int sfd = rt_open_dir_p(rt_ignore_store_fd(r->ig), drel, create);
    if (sfd < 0)
        return sfd;
    at->fd = at->owned = sfd;
    at->store = true;
    return 0;
}

int route_at(struct router *r, struct rt_inode *dir, const char *name, mode_t type, bool create, struct rt_at *at) {
    return route_at_rel(r, dir, NULL, name, type, create, false, at);
}

/* The path checks of a store-side operation: a store is no Git work tree
 * the host's git ever reads, so only the shape rules (--plain). */
int store_check(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op, int sfd,
                bool *ret_exists) {
    char path[LZ_ROUTER_PATH_MAX + 1];
    struct stat st;
    bool exists = fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT)
        return -errno;
    int rc = entry_relpath(r, dir, name, path, sizeof path);
    if (rc < 0)
        return rc;
    struct lz_router_req q = { .op = op, .path = path, .exists = exists };
    if (ret_exists)
        *ret_exists = exists;
    return lz_router_plain_check(&q);
}

/* 1 if directory `name` in dfd has no entry, 0 if it has, -errno. */
int dir_is_empty(int dfd, const char *name) {
    _cleanup_close_ int fd = lz_openat_beneath(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (fd < 0)
        return fd;
    DIR *dp;
    int rc = lz_opendir_at(fd, &dp);
    if (rc < 0)
        return rc;
    struct dirent *de;
    rc = 1;
    while ((de = readdir(dp)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            rc = 0;
            break;
        }
    closedir(dp);
    return rc;
}

/* The .gitignore hooks (ignore.h) for the host entry `name` of `dir`. */
void rules_will_change(struct router *r, struct rt_inode *dir, const char *name) {
    char rel[LZ_ROUTER_PATH_MAX + 1];
    if (r->ig && !dir->store && rt_ignore_is_rules_file(name) && entry_relpath(r, dir, name, rel, sizeof rel) == 0)
        rt_ignore_will_change(r->ig, rel);
}

void rules_changed(struct router *r, struct rt_inode *dir, const char *name) {
    char rel[LZ_ROUTER_PATH_MAX + 1];
    if (r->ig && !dir->store && rt_ignore_is_rules_file(name) && entry_relpath(r, dir, name, rel, sizeof rel) == 0)
        rt_ignore_changed(r->ig, rel);
}

/* The same for an existing host inode, by the name it was last seen under. */
void inode_rules_will_change(struct router *r, struct rt_inode *in) {
    if (!in->store && in->parent && in->name)
        rules_will_change(r, in->parent, in->name);
}

void inode_rules_changed(struct router *r, struct rt_inode *in) {
    if (!in->store && in->parent && in->name)
        rules_changed(r, in->parent, in->name);
}

/* The current path of `in`. A non-directory with no link left has no path:
 * *ret_noname is set and nothing else. `fhfd` is an open handle of it, or
 * -1. */
int inode_relpath(struct router *r, struct rt_inode *in, int fhfd, char *out, size_t size, bool *ret_noname) {
    *ret_noname = false;
    if (S_ISDIR(in->type)) {
        int fd = inode_fd(r, in);
        return fd < 0 ? fd : dir_relpath(r, fd, out, size);
    }
    struct stat st;
    if ((fhfd >= 0 && fstat(fhfd, &st) == 0) ||
        (in->fd >= 0 && fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)) {
        if (st.st_nlink == 0) {
            *ret_noname = true;
            return 0;
        }
    }
    if (!in->parent)
        return -ESTALE;
    _cleanup_close_ int owned = -EBADF;
    int pfd = holder_fd(r, in, &owned);
    if (pfd < 0)
        return pfd;
    if (fstatat(pfd, in->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != in->dev || st.st_ino != in->ino)
        return -ESTALE; /* renamed behind our back: we no longer know its name */
    return entry_relpath(r, in->parent, in->name, out, size);
}

/* lz_router_fs.has_entry over the real tree. */
int fs_has_entry(void *ctx, const char *dir, const char *name) {
    struct router *r = ctx;
    _cleanup_close_ int owned = -EBADF;
    int dfd = r->root.fd;
    if (dir[0] != '\0') {
        owned = lz_openat_beneath(r->root.fd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
        if (owned < 0)
            return owned;
        dfd = owned;
    }
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    return errno == ENOENT ? 0 : -errno;
}

int policy(struct router *r, const struct lz_router_req *q) {
    enum lz_router_why why = LZ_RWHY_NONE;
    int rc = r->plain ? lz_router_plain_check(q) : lz_router_check_why(&r->pol, q, &why);
    if (rc == -EPERM || rc == -EXDEV || rc == -EBUSY)
        refused(r, why != LZ_RWHY_NONE ? (uint8_t)why : LZ_REFW_SHAPE, (uint8_t)q->op, q->path,
                q->op == LZ_ROP_RENAME || q->op == LZ_ROP_LINK ? q->path2 : NULL, rc, NULL);
    else if (rc < 0 && rc != -EEXIST)
        log_refusal(r, lz_router_op_name(q->op), q->path, q->op == LZ_ROP_RENAME ? q->path2 : NULL, rc);
    return rc;
}

/* Policy for an operation on existing inode `in` (open for write, setattr). */
int policy_inode(struct router *r, struct rt_inode *in, int fhfd, enum lz_router_op op) {
    char path[LZ_ROUTER_PATH_MAX + 1];
    bool noname;
    int rc = lz_router_held_check(op, in->type, in->sticky, false);
    if (rc < 0) {
        refused(r, LZ_REFW_STICKY, (uint8_t)op, in->name, NULL, rc, NULL);
        return rc;
    }
    if (in->store)
        return 0; /* --plain has nothing to refuse on an existing inode */
    rc = inode_relpath(r, in, fhfd, path, sizeof path, &noname);
    if (rc < 0) {
        log_refusal(r, lz_router_op_name(op), in->name, NULL, rc);
        return rc;
    }
    if (noname)
        return 0; /* no name left that could be a protected one */
    struct lz_router_req q = { .op = op, .path = path };
    return policy(r, &q);
}

/* Policy for creating `name` in `dir`; *ret_exists tells whether it exists. */
/* The fd of directory `dir` for an operation on its entry `name` (a name
 * from the kernel: one valid component), or a negative errno. */
static int entry_dir_fd(struct router *r, struct rt_inode *dir, const char *name) {
    int rc = name_valid(name);
    return rc < 0 ? rc : inode_fd(r, dir);
}

int policy_new_entry_typed(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op,
                           const char *src, unsigned type, bool *ret_exists) {
    char path[LZ_ROUTER_PATH_MAX + 1];
    struct stat st;
    int rc, dfd = entry_dir_fd(r, dir, name);
    if (dfd < 0)
        return dfd;
    bool exists = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT)
        return -errno;
    rc = entry_relpath(r, dir, name, path, sizeof path);
    if (rc < 0)
        return rc;
    struct lz_router_req q = { .op = op, .path = path, .exists = exists, .path2 = src, .type = type };
    rc = policy(r, &q);
    if (rc < 0)
        return rc;
    if (ret_exists)
        *ret_exists = exists;
    return 0;
}

int policy_new_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op, const char *src,
                     bool *ret_exists) {
    return policy_new_entry_typed(r, dir, name, op, src, 0, ret_exists);
}

int policy_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op) {
    char path[LZ_ROUTER_PATH_MAX + 1];
    int rc = name_valid(name);
    if (rc < 0)
        return rc;
    rc = entry_relpath(r, dir, name, path, sizeof path);
    if (rc < 0)
        return rc;
    struct lz_router_req q = { .op = op, .path = path };
    return policy(r, &q);
}
