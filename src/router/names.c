/* names.c: operations that create and remove names: mknod, mkdir, symlink, link,
 * unlink, rmdir, rename (with the Git index and packed-refs checks, and the
 * hidden-entry check of ignored-state routing).
 */
#include "router_int.h"

#include "router_volume.h"

/* ---- creating and removing names ---- */

/* The reply to a request that made `name` in `dir` (rc its result): the
 * new entry, or the error. */
static void reply_made(fuse_req_t req, struct router *r, struct rt_inode *dir, const char *name, int rc) {
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        reply_lookup(req, r, dir, name);
}

static int make_entry_at(struct router *r, struct rt_inode *dir, const char *name, mode_t mode, const char *target,
                         enum lz_router_op op) {
    int rc = lz_router_create_type_check(op, mode & S_IFMT);
    if (rc < 0) {
        refused(r, LZ_REFW_SHAPE, (uint8_t)op, name, NULL, rc, NULL);
        return rc;
    }
    struct rt_at at;
    neg_forget(r, dir, name);
    rc = route_at(r, dir, name, mode & S_IFMT, true, &at);
    if (rc < 0)
        return rc;
    if (at.store)
        rc = store_check(r, dir, name, op, at.fd, NULL);
    else
        rc = policy_new_entry_typed(r, dir, name, op, NULL, op == LZ_ROP_CREATE ? (mode & S_IFMT) : 0, NULL);
    if (rc < 0) {
        at_done(&at);
        return rc;
    }
    int dfd = at.fd;
    if (!at.store)
        rules_will_change(r, dir, name);
    switch (op) {
    case LZ_ROP_MKDIR: rc = mkdirat(dfd, name, mode & 01777); break;
    case LZ_ROP_SYMLINK: rc = symlinkat(target, dfd, name); break;
    case LZ_ROP_CREATE: rc = mknodat(dfd, name, (mode & S_IFMT) | (mode & 01777), 0); break;
    case LZ_ROP_LINK:
    case LZ_ROP_WRITE:
    case LZ_ROP_SETATTR:
    case LZ_ROP_UNLINK:
    case LZ_ROP_RMDIR:
    case LZ_ROP_RENAME: rc = (errno = EINVAL, -1); break;
    }
    rc = rc < 0 ? -errno : 0;
    if (!at.store)
        rules_changed(r, dir, name);
    at_done(&at);
    return rc;
}

static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, const char *target,
                       enum lz_router_op op) {
    struct router *r = begin(req);
    struct rt_inode *dir = inode_of(r, parent);
    reply_made(req, r, dir, name, make_entry_at(r, dir, name, mode, target, op));
}

void rt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
    (void)rdev;
    make_entry(req, parent, name, mode, NULL, LZ_ROP_CREATE);
}

void rt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    make_entry(req, parent, name, S_IFDIR | (mode & 07777), NULL, LZ_ROP_MKDIR);
}

void rt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
    struct router *r = begin(req);
    int rc = name_valid(name);
    if (rc == 0)
        rc = lt_check_new(r, inode_of(r, parent), name, link);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    make_entry(req, parent, name, S_IFLNK | 0777, link, LZ_ROP_SYMLINK);
}

static int link_at(struct router *r, struct rt_inode *in, struct rt_inode *dir, const char *newname) {
    char src[LZ_ROUTER_PATH_MAX + 1];
    bool noname;
    int rc = lz_router_held_check(LZ_ROP_LINK, in->type, in->sticky, in->sealed);
    if (rc < 0) {
        if (!S_ISDIR(in->type))
            refused(r, LZ_REFW_STICKY, LZ_ROP_LINK, in->name, newname, rc, NULL);
        return rc;
    }
    rc = inode_relpath(r, in, -1, src, sizeof src, &noname);
    if (rc < 0)
        return rc;
    if (noname)
        return -ENOENT;
    struct rt_at at;
    neg_forget(r, dir, newname);
    rc = route_at(r, dir, newname, in->type, in->store, &at);
    if (rc < 0)
        return rc;
    if ((rc = lz_router_backings_check(in->store, at.store)) < 0) {
        refused(r, LZ_REFW_IGNORED_XDEV, LZ_ROP_LINK, in->name, newname, rc, NULL);
        at_done(&at);
        return rc;
    }
    if (at.store) {
        _cleanup_close_ int owned = -EBADF;
        int sfd = holder_fd(r, in, &owned);
        rc = sfd < 0 ? sfd : store_check(r, dir, newname, LZ_ROP_LINK, at.fd, NULL);
        if (rc == 0 && linkat(sfd, in->name, at.fd, newname, 0) < 0)
            rc = -errno;
        at_done(&at);
        return rc;
    }
    at_done(&at);
    rc = policy_new_entry(r, dir, newname, LZ_ROP_LINK, src, NULL);
    if (rc == 0 && S_ISLNK(in->type))
        rc = lt_check_move(r, inode_fd(r, in->parent), in->name, in->type, dir, newname);
    if (rc < 0)
        return rc;
    /* inode_relpath() just checked that parent/name is this inode. */
    int sfd = inode_fd(r, in->parent), dfd = inode_fd(r, dir);
    if (sfd < 0 || dfd < 0)
        return sfd < 0 ? sfd : dfd;
    rules_will_change(r, dir, newname);
    rc = linkat(sfd, in->name, dfd, newname, 0) < 0 ? -errno : 0;
    rules_changed(r, dir, newname);
    return rc;
}

void rt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
    struct router *r = begin(req);
    struct rt_inode *dir = inode_of(r, newparent);
    reply_made(req, r, dir, newname, link_at(r, inode_of(r, ino), dir, newname));
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, enum lz_router_op op) {
    struct router *r = begin(req);
    struct rt_inode *dir = inode_of(r, parent);
    struct rt_at at;
    int rc = route_at(r, dir, name, 0, false, &at);
    if (rc == 0 && at.store) {
        rc = store_check(r, dir, name, op, at.fd, NULL);
        if (rc == 0 && unlinkat(at.fd, name, op == LZ_ROP_RMDIR ? AT_REMOVEDIR : 0) < 0)
            rc = -errno;
    } else if (rc == 0) {
        rc = policy_entry(r, dir, name, op);
        /* A host directory may have a counterpart holding its ignored
         * entries: it must be empty too, and goes with it. */
        _cleanup_close_ int cfd = -EBADF;
        if (rc == 0 && r->ig && op == LZ_ROP_RMDIR) {
            cfd = store_dir(r, dir, false);
            rc = lz_router_counterpart_check(cfd >= 0 ? dir_is_empty(cfd, name) : 1);
        }
        if (rc == 0) {
            if (op == LZ_ROP_UNLINK)
                rules_will_change(r, dir, name);
            if (unlinkat(at.fd, name, op == LZ_ROP_RMDIR ? AT_REMOVEDIR : 0) < 0)
                rc = -errno;
            if (op == LZ_ROP_UNLINK)
                rules_changed(r, dir, name);
            if (rc == 0 && cfd >= 0)
                (void)unlinkat(cfd, name, AT_REMOVEDIR);
        }
    }
    at_done(&at);
    fuse_reply_err(req, -rc);
}

void rt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_entry(req, parent, name, LZ_ROP_UNLINK); }

void rt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_entry(req, parent, name, LZ_ROP_RMDIR); }

/* Opens the regular file `name` of dfd that a rename is about to move,
 * read-only, and checks that it is still the inode `st` the rename saw. */
static int open_renamed(int dfd, const char *name, const struct stat *st) {
    if (!S_ISREG(st->st_mode))
        return -EPERM;
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat now;
    if (fstat(fd, &now) < 0)
        return -errno;
    if (!S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        return -ESTALE;
    return TAKE_FD(fd);
}

/* Refuses (EPERM, logged with the reason) a file that must not become the
 * index at `dpath` (its Git directory the first gitdir_len bytes): see
 * lz_gitindex_verify_fd(). The file is opened by name in its directory
 * and must still be the inode the rename moves. */
static int check_index(struct router *r, int dfd, const char *name, const struct stat *st, const char *dpath,
                       size_t gitdir_len) {
    _cleanup_close_ int fd = open_renamed(dfd, name, st);
    if (fd < 0)
        return fd;
    char gitdir[LZ_ROUTER_PATH_MAX + 1];
    if (gitdir_len >= sizeof gitdir)
        return -ENAMETOOLONG;
    memcpy(gitdir, dpath, gitdir_len);
    gitdir[gitdir_len] = '\0';
    /* A common Git directory (--linked-worktree): its config is at the
     * root, for its own index and for worktrees/NAME's alike. */
    if (r->worktree || !gitdir[0])
        snprintf(gitdir, sizeof gitdir, ".");
    /* Its config is the developer's (read-only to the agent): it says how
     * the host's git will read the index. */
    _cleanup_close_ int gfd = lz_openat_beneath(r->root.fd, gitdir, O_PATH | O_DIRECTORY, 0, false);
    if (gfd < 0)
        return gfd;
    struct lz_error err = { 0 };
    int rc = lz_gitindex_verify_fd(fd, gfd, &err);
    if (rc == -EFBIG || rc == -EPERM || rc == -EINVAL) {
        refused(r, LZ_REFW_INDEX, LZ_ROP_RENAME, dpath, NULL, -EPERM, err.msg);
        return -EPERM;
    }
    return rc;
}

/* Refuses (EPERM, logged with the reason) a file that must not become
 * `packed-refs` at `dpath`: a line under refs/replace/ or refs/notes/
 * that is not already there would change what the host's git displays
 * (gitrefs.h). Opened like check_index's. An exchange (`replace` false)
 * accepts none. */
static int check_packed_refs(struct router *r, int dfd, const char *name, const struct stat *st, const char *dpath,
                             bool replace) {
    _cleanup_close_ int fd = open_renamed(dfd, name, st);
    if (fd < 0)
        return fd;
    _cleanup_close_ int gfd = -EBADF;
    const char *slash = strrchr(dpath, '/');
    if (replace && (slash || r->worktree)) {
        char gitdir[LZ_ROUTER_PATH_MAX + 1];
        size_t gl = slash ? (size_t)(slash - dpath) : 0;
        memcpy(gitdir, dpath, gl);
        gitdir[gl] = '\0';
        if (!gl) /* the root: a common Git directory */
            snprintf(gitdir, sizeof gitdir, ".");
        gfd = lz_openat_beneath(r->root.fd, gitdir, O_PATH | O_DIRECTORY, 0, false);
        if (gfd < 0)
            return gfd;
    }
    struct lz_error err = { 0 };
    int rc = lz_packedrefs_verify_fd(fd, gfd >= 0 ? gfd : -1, &err);
    if (rc == -EFBIG || rc == -EPERM || rc == -EINVAL) {
        refused(r, LZ_REFW_PACKED_REFS, LZ_ROP_RENAME, dpath, NULL, -EPERM, err.msg);
        return -EPERM;
    }
    return rc;
}

/* Moves the store counterpart of host directory `spath` (now renamed to
 * `dpath` on the host) along, so that its ignored entries follow it. */
static void move_counterpart(struct router *r, const char *spath, const char *dpath, bool exchange) {
    char sd[LZ_ROUTER_PATH_MAX + 1], dd[LZ_ROUTER_PATH_MAX + 1];
    const char *sb = strrchr(spath, '/'), *db = strrchr(dpath, '/');
    snprintf(sd, sizeof sd, "%.*s", sb ? (int)(sb - spath) : 0, spath);
    snprintf(dd, sizeof dd, "%.*s", db ? (int)(db - dpath) : 0, dpath);
    sb = sb ? sb + 1 : spath;
    db = db ? db + 1 : dpath;
    int store = rt_ignore_store_fd(r->ig);
    _cleanup_close_ int sfd = rt_open_dir_p(store, sd, false);
    if (sfd < 0)
        return;
    struct stat st;
    bool src = fstatat(sfd, sb, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    _cleanup_close_ int dfd = rt_open_dir_p(store, dd, src);
    if (dfd < 0)
        return;
    bool dst = fstatat(dfd, db, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    if (exchange && src && dst)
        (void)renameat2(sfd, sb, dfd, db, RENAME_EXCHANGE);
    else if (src)
        (void)renameat(sfd, sb, dfd, db); /* over an empty one (checked before) */
    else if (exchange && dst)
        (void)renameat(dfd, db, sfd, sb);
    else if (dst)
        (void)unlinkat(dfd, db, AT_REMOVEDIR); /* replaced by a directory without ignored entries */
}

/* The host directory `name` of dfd (the inode st), at workspace path
 * `from`, may move to `to` only if the host entries below it that the
 * sandbox cannot see stay hidden there (hidden.h). Refusals are EXDEV:
 * `mv` then copies what the sandbox sees and leaves the hidden entries
 * where the host's rules hide them. */
static int hidden_check(struct router *r, int dfd, const char *name, const struct stat *st, const char *from,
                        const char *to) {
    _cleanup_close_ int fd = lz_openat_beneath(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (fd < 0)
        return fd;
    struct stat now;
    if (fstat(fd, &now) < 0)
        return -errno;
    if (now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        return -ESTALE;
    char bad[LZ_ROUTER_PATH_MAX + 1] = "";
    int rc = rt_hidden_check_move(r->ig, fd, from, to, bad, sizeof bad);
    if (rc == -EXDEV) {
        /* The hidden entry's name is the host's, not the agent's: it is
         * not shown to the developer as more than "a hidden entry" (it may
         * name a secret); the coordinator's log has it, escaped. */
        if (log_allowed(r)) {
            fputs("lazaret-router: the hidden host entry ", stderr);
            log_escaped(stderr, bad);
            fputs(" would not be hidden at its new path\n", stderr);
        }
        refused(r, LZ_REFW_HIDDEN_XDEV, LZ_ROP_RENAME, from, to, rc, NULL);
    } else if (rc == -E2BIG || rc == -ENAMETOOLONG) {
        rc = -EXDEV;
        refused(r, LZ_REFW_TOO_BIG, LZ_ROP_RENAME, from, to, rc, "too big to check for hidden host files");
    }
    return rc;
}

void rt_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
               unsigned int flags) {
    struct router *r = begin(req);
    struct rt_inode *sdir = inode_of(r, parent), *ddir = inode_of(r, newparent);
    char spath[LZ_ROUTER_PATH_MAX + 1], dpath[LZ_ROUTER_PATH_MAX + 1];
    struct stat sst, dst;
    struct rt_at sa = { .owned = -EBADF }, da = { .owned = -EBADF };
    int rc;
    if ((rc = name_valid(name)) < 0 || (rc = name_valid(newname)) < 0)
        goto fail;
    if ((rc = route_at(r, sdir, name, 0, false, &sa)) < 0)
        goto fail;
    if (fstatat(sa.fd, name, &sst, AT_SYMLINK_NOFOLLOW) < 0) {
        rc = -errno;
        goto fail;
    }
    neg_forget(r, ddir, newname);
    if ((rc = route_at(r, ddir, newname, sst.st_mode & S_IFMT, sa.store, &da)) < 0)
        goto fail;
    /* Across the two backings, as across file systems: mv copies. */
    if ((rc = lz_router_backings_check(sa.store, da.store)) < 0) {
        refused(r, LZ_REFW_IGNORED_XDEV, LZ_ROP_RENAME, name, newname, rc, NULL);
        goto fail;
    }
    int sfd = sa.fd, dfd = da.fd;
    bool dexists = fstatat(dfd, newname, &dst, AT_SYMLINK_NOFOLLOW) == 0;
    if (!dexists && errno != ENOENT) {
        rc = -errno;
        goto fail;
    }
    if (r->ig && (flags & RENAME_EXCHANGE) && dexists) {
        /* The other entry must land in its own backing too. */
        struct rt_at back = { .owned = -EBADF };
        rc = route_at(r, sdir, name, dst.st_mode & S_IFMT, sa.store, &back);
        if (rc == 0 && (rc = lz_router_backings_check(sa.store, back.store)) < 0)
            refused(r, LZ_REFW_IGNORED_XDEV, LZ_ROP_RENAME, name, newname, rc, NULL);
        at_done(&back);
        if (rc < 0)
            goto fail;
    }
    if ((rc = entry_relpath(r, sdir, name, spath, sizeof spath)) < 0 ||
        (rc = entry_relpath(r, ddir, newname, dpath, sizeof dpath)) < 0)
        goto fail;
    struct lz_router_req q = {
        .op = LZ_ROP_RENAME,
        .path = spath,
        .path2 = dpath,
        .exists = dexists,
        .is_dir = S_ISDIR(sst.st_mode),
        .is_dir2 = dexists && S_ISDIR(dst.st_mode),
        .flags = flags,
        .type = sst.st_mode & S_IFMT,
        .nlink = sst.st_nlink,
        .type2 = dexists ? dst.st_mode & S_IFMT : 0,
        .nlink2 = dexists ? dst.st_nlink : 0,
    };
    size_t gitdir_len = 0;
    int to_index = 0, from_index = 0, to_refs = 0, from_refs = 0;
    if (sa.store) {
        rc = lz_router_plain_check(&q);
        if (rc < 0)
            goto fail;
    } else {
        rc = policy(r, &q);
        if (rc == 0)
            rc = lt_check_move(r, sfd, name, sst.st_mode & S_IFMT, ddir, newname);
        if (rc == 0 && (flags & RENAME_EXCHANGE) && dexists)
            rc = lt_check_move(r, dfd, newname, dst.st_mode & S_IFMT, sdir, name);
        if (rc < 0)
            goto fail;
        /* A file becoming a Git index (git's index.lock -> index, a split
         * index's sharedindex_XXXXXX -> sharedindex.<hash>) is checked first:
         * the host's git trusts every entry of the index it reads. */
        to_index = r->plain ? 0 : lz_router_is_index(&r->pol, dpath, &gitdir_len);
        from_index = !r->plain && (flags & RENAME_EXCHANGE) ? lz_router_is_index(&r->pol, spath, NULL) : 0;
        if (to_index < 0 || from_index < 0) {
            rc = to_index < 0 ? to_index : from_index;
            goto fail;
        }
        if (to_index && (rc = check_index(r, sfd, name, &sst, dpath, gitdir_len)) < 0)
            goto fail;
        if (from_index && (rc = check_index(r, dfd, newname, &dst, spath, gitdir_len)) < 0)
            goto fail;
        /* The host's hidden entries never become visible by a move. */
        if (r->ig && S_ISDIR(sst.st_mode) && (rc = hidden_check(r, sfd, name, &sst, spath, dpath)) < 0)
            goto fail;
        if (r->ig && (flags & RENAME_EXCHANGE) && dexists && S_ISDIR(dst.st_mode) &&
            (rc = hidden_check(r, dfd, newname, &dst, dpath, spath)) < 0)
            goto fail;
        /* So is a file becoming packed-refs (git's packed-refs.lock). */
        to_refs = r->plain ? 0 : lz_router_is_packed_refs(&r->pol, dpath);
        from_refs = !r->plain && (flags & RENAME_EXCHANGE) ? lz_router_is_packed_refs(&r->pol, spath) : 0;
        if (to_refs < 0 || from_refs < 0) {
            rc = to_refs < 0 ? to_refs : from_refs;
            goto fail;
        }
        if (to_refs && (rc = check_packed_refs(r, sfd, name, &sst, dpath, !(flags & RENAME_EXCHANGE))) < 0)
            goto fail;
        if (from_refs && (rc = check_packed_refs(r, dfd, newname, &dst, spath, false)) < 0)
            goto fail;
        /* A directory replaced must be empty in both backings. */
        if (r->ig && dexists && S_ISDIR(dst.st_mode) && !(flags & RENAME_EXCHANGE)) {
            _cleanup_close_ int cfd = store_dir(r, ddir, false);
            /* Only "not empty" refuses here, as before: an unreadable
             * counterpart is left to the rename itself. */
            if (cfd >= 0 && lz_router_counterpart_check(dir_is_empty(cfd, newname)) == -ENOTEMPTY) {
                rc = -ENOTEMPTY;
                goto fail;
            }
        }
        rules_will_change(r, sdir, name);
        rules_will_change(r, ddir, newname);
    }
    if (renameat2(sfd, name, dfd, newname, flags) < 0) {
        rc = -errno;
        if (!sa.store) {
            rules_changed(r, sdir, name);
            rules_changed(r, ddir, newname);
        }
        goto fail;
    }
    if (!sa.store && r->ig) {
        rules_changed(r, sdir, name);
        rules_changed(r, ddir, newname);
        bool exch = (flags & RENAME_EXCHANGE) && dexists;
        if (S_ISDIR(sst.st_mode) || (exch && S_ISDIR(dst.st_mode)))
            move_counterpart(r, spath, dpath, exch);
        if (S_ISDIR(sst.st_mode))
            rt_ignore_renamed_dir(r->ig, dpath);
        if (exch && S_ISDIR(dst.st_mode))
            rt_ignore_renamed_dir(r->ig, spath);
    }
    struct rt_inode *moved = table_find(r, sst.st_dev, sst.st_ino);
    if (moved) {
        inode_set_name(r, moved, ddir, newname);
        moved->sealed = to_index > 0 || to_refs > 0;
    }
    if ((flags & RENAME_EXCHANGE) && dexists) {
        struct rt_inode *other = table_find(r, dst.st_dev, dst.st_ino);
        if (other) {
            inode_set_name(r, other, sdir, name);
            other->sealed = from_index > 0 || from_refs > 0;
        }
    }
    at_done(&sa);
    at_done(&da);
    fuse_reply_err(req, 0);
    return;
fail:
    at_done(&sa);
    at_done(&da);
    fuse_reply_err(req, -rc);
}
