/* lookup.c: operations: lookup, forget, getattr, setattr, readlink, statfs. */
#include "router_int.h"

#include "router_volume.h"

/* ---- lookup ---- */

static void fill_entry(struct router *r, struct fuse_entry_param *e, struct rt_inode *dir, struct rt_inode *in,
                       const struct stat *st) {
    memset(e, 0, sizeof *e);
    e->ino = node_id(in);
    e->attr = *st;
    e->attr_timeout = attr_timeout_of(r, in);
    e->entry_timeout = timeout_for_dir(r, dir);
}

/* The held record for (dev, ino) of type `type`, or NULL. */
static struct rt_inode *find_live(struct router *r, const struct stat *st) {
    struct rt_inode *in = table_find(r, st->st_dev, st->st_ino);
    if (in && in->type != (st->st_mode & S_IFMT)) {
        /* Only an evicted record can meet a reused inode number: a held
         * fd pins the inode. */
        table_retire(r, in);
        in = NULL;
    }
    return in;
}

/* drel: the path of dir when the caller has it (a listing), else NULL. */
int do_lookup_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name,
                  struct fuse_entry_param *e) {
    struct rt_at at;
    int rc = route_at_rel(r, dir, drel, name, 0, false, true, &at);
    if (rc < 0)
        return rc;
    rc = lookup_at(r, dir, name, &at, e);
    at_done(&at);
    return rc;
}

int do_lookup(struct router *r, struct rt_inode *dir, const char *name, struct fuse_entry_param *e) {
    return do_lookup_rel(r, dir, NULL, name, e);
}

int lookup_at(struct router *r, struct rt_inode *dir, const char *name, const struct rt_at *at,
              struct fuse_entry_param *e) {
    int dfd = at->fd;
    struct stat st;
    if (!at->store && at->on_host)
        st = at->hst; /* just looked at while routing */
    else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    struct rt_inode *in = find_live(r, &st);
    /* Directories are held open (they anchor every name below them);
     * other inodes are reached through their (parent, name) and checked
     * by identity, an fd being opened only when an operation needs one. */
    _cleanup_close_ int fd = -EBADF;
    if (S_ISDIR(st.st_mode) && (!in || in->fd < 0)) {
        fd = lz_openat_beneath(dfd, name, O_PATH | O_NOFOLLOW, 0, false);
        if (fd < 0)
            return fd;
        if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        in = find_live(r, &st); /* the name may have been replaced meanwhile */
    }
    if (!in) {
        in = lz_xcalloc(1, sizeof *in);
        in->dev = st.st_dev;
        in->ino = st.st_ino;
        in->fd = -1;
        in->wd = -1;
        in->cfd = -1;
        in->type = st.st_mode & S_IFMT;
        in->store = at->store;
        table_insert(r, in);
    }
    if (fd >= 0 && in->fd < 0 && S_ISDIR(in->type) && !in->is_root) {
        in->fd = TAKE_FD(fd);
        lru_add(r, in);
    }
    in->nlookup++;
    inode_set_name(r, in, dir, name);
    /* Several names: remember if one of them is protected, so that another
     * name cannot be used to write it. */
    if (!r->plain && !in->store && !S_ISDIR(in->type) && st.st_nlink > 1 && !in->sticky) {
        char path[LZ_ROUTER_PATH_MAX + 1];
        enum lz_router_class cls = LZ_RCLASS_PROTECTED;
        if (entry_relpath(r, dir, name, path, sizeof path) < 0 || lz_router_classify(&r->pol, path, &cls) < 0 ||
            cls != LZ_RCLASS_FREE)
            in->sticky = true;
    }
    watch_dir(r, in);
    apply_owner(r, in, -1, &st);
    fill_entry(r, e, dir, in, &st);
    return 0;
}

static void reply_entry(fuse_req_t req, struct router *r, const struct fuse_entry_param *e) {
    if (fuse_reply_entry(req, e) != 0)
        forget_one(r, e->ino, 1); /* the kernel did not take the reference */
}

/* Answers req with the entry dir/name, or with the error looking it up. */
void reply_lookup(fuse_req_t req, struct router *r, struct rt_inode *dir, const char *name) {
    struct fuse_entry_param e = { 0 };
    /* An absent name is cached by the kernel where the watcher will drop it
     * when the host makes the name (e.ino 0 is a negative entry). The name
     * is recorded before the host is asked: a name the host makes after
     * that look gives an event the watcher turns into an invalidation,
     * which the kernel applies after this reply (it holds the directory
     * while a lookup that can cache an absent name is in flight; a
     * revalidation, which holds nothing, never caches one). */
    double neg = neg_record(r, dir, name);
    int rc = do_lookup(r, dir, name, &e);
    if (rc == -ENOENT && neg > 0) {
        e.entry_timeout = neg;
        fuse_reply_entry(req, &e);
        return;
    }
    if (neg > 0)
        neg_forget(r, dir, name);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        reply_entry(req, r, &e);
}

void rt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct router *r = begin(req);
    reply_lookup(req, r, inode_of(r, parent), name);
}

void rt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    forget_one(fuse_req_userdata(req), ino, nlookup);
    fuse_reply_none(req);
}

void rt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
    struct router *r = fuse_req_userdata(req);
    for (size_t i = 0; i < count; i++)
        forget_one(r, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* ---- attributes ---- */

static int stat_inode_raw(struct router *r, struct rt_inode *in, struct fuse_file_info *fi, struct stat *st);

static int stat_inode(struct router *r, struct rt_inode *in, struct fuse_file_info *fi, struct stat *st) {
    int rc = stat_inode_raw(r, in, fi, st);
    if (rc == 0)
        apply_owner(r, in, fh_fd(in, fi), st);
    return rc;
}

static int stat_inode_raw(struct router *r, struct rt_inode *in, struct fuse_file_info *fi, struct stat *st) {
    int fd = fh_fd(in, fi);
    if (fd >= 0)
        return fstat(fd, st) < 0 ? -errno : 0;
    if (in->fd < 0 && !S_ISDIR(in->type) && in->parent) {
        /* By name, checked by identity: no fd needed. */
        _cleanup_close_ int owned = -EBADF;
        int pfd = holder_fd(r, in, &owned);
        if (pfd < 0)
            return pfd;
        if (fstatat(pfd, in->name, st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? -ESTALE : -errno;
        return st->st_dev == in->dev && st->st_ino == in->ino ? 0 : -ESTALE;
    }
    fd = inode_fd(r, in);
    if (fd < 0)
        return fd;
    return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

void rt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct stat st;
    int rc = stat_inode(r, inode_of(r, ino), fi, &st);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &st, attr_timeout_of(r, inode_of(r, ino)));
}

/* Opens the inode's file for I/O through our own O_PATH fd (regular files
 * only: checked by the callers). */
int reopen(struct router *r, struct rt_inode *in, int flags) {
    int ifd = inode_fd(r, in);
    if (ifd < 0)
        return ifd;
    char num[24];
    snprintf(num, sizeof num, "%d", ifd);
    int fd = openat(r->proc_fd, num, (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECTORY)) | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* A hot-reload poke (hotnotify.h): the mtime alone, set to the poke value.
 * lazaret-init makes them so that gVisor raises an inotify event for a
 * change the host made. */
bool setattr_is_poke(const struct stat *attr, int valid) {
    const int other = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE |
        FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
    return (valid & FUSE_SET_ATTR_MTIME) && !(valid & other) && lz_hot_is_poke(&attr->st_mtim);
}

void rt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    int fhfd = fh_fd(in, fi), ifd = -1, rc;
    /* Zero-message opens: the handle a file was created with stays its
     * writing handle (a file created read-only can still be truncated by
     * its creator, as through that handle). */
    if (fhfd < 0 && S_ISREG(in->type) && in->cfd >= 0 && (in->cflags & O_ACCMODE) != O_RDONLY)
        fhfd = in->cfd;
    const int meta = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME |
        FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;

    /* A hot-reload poke: the host file is not touched, and the real
     * attributes are answered (the kernel and gVisor cache those). */
    if (setattr_is_poke(attr, valid)) {
        struct stat st;
        rc = stat_inode(r, in, fi, &st);
        if (rc < 0)
            goto fail;
        fuse_reply_attr(req, &st, attr_timeout_of(r, in));
        return;
    }

    /* A mode or owner that is already the inode's changes nothing, and is
     * not asked of the policy: gVisor sets the owner and mode of every
     * directory it has just made, and a directory on the way to protected
     * names (an ANCESTOR: `logs/` of a linked worktree's common Git
     * directory, `objects/info/`) may be made but not changed. Times are
     * a change. */
    if ((valid & meta) && !(valid & ~(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) & meta)) {
        struct stat cur;
        if (stat_inode(r, in, fi, &cur) == 0 &&
            (!(valid & FUSE_SET_ATTR_MODE) ||
             (lz_router_chmod_mode(in->type, attr->st_mode) & 07777) == (cur.st_mode & 07777)) &&
            (!(valid & FUSE_SET_ATTR_UID) || attr->st_uid == cur.st_uid) &&
            (!(valid & FUSE_SET_ATTR_GID) || attr->st_gid == cur.st_gid))
            valid &= ~meta;
    }
    if (valid & meta) {
        rc = policy_inode(r, in, fhfd, LZ_ROP_SETATTR);
        if (rc < 0)
            goto fail;
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
        /* ftruncate on a handle opened for writing was allowed at open(). */
        int fl = fhfd >= 0 ? fcntl(fhfd, F_GETFL) : -1;
        rc = lz_router_write_check(true, fl >= 0 && (fl & O_ACCMODE) != O_RDONLY ? LZ_HANDLE_WRITABLE : LZ_HANDLE_NONE,
                                   in->sticky, in->sealed);
        if (rc == LZ_ASK_PATH_POLICY)
            rc = policy_inode(r, in, fhfd, LZ_ROP_WRITE);
        if (rc < 0)
            goto fail;
    }
    if (fhfd < 0) {
        ifd = inode_fd(r, in);
        if (ifd < 0) {
            rc = ifd;
            goto fail;
        }
    }

    if (valid & FUSE_SET_ATTR_MODE) {
        mode_t mode = lz_router_chmod_mode(in->type, attr->st_mode);
        if (fhfd >= 0)
            rc = fchmod(fhfd, mode);
        else if (S_ISLNK(in->type))
            rc = (errno = EOPNOTSUPP, -1);
        else
            rc = (int)syscall(SYS_fchmodat2, ifd, "", mode, AT_EMPTY_PATH);
        if (rc < 0) {
            rc = -errno;
            goto fail;
        }
    }
    if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
        gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
        /* Host files stay the developer's: the sandbox-side owner is
         * kept beside them (see "owners"). */
        if ((rc = set_owner(r, in, fhfd, uid, gid)) < 0)
            goto fail;
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
        if (!S_ISREG(in->type)) {
            rc = S_ISDIR(in->type) ? -EISDIR : -EINVAL;
            goto fail;
        }
        inode_rules_will_change(r, in);
        if (fhfd >= 0) {
            rc = ftruncate(fhfd, attr->st_size) < 0 ? -errno : 0;
        } else {
            _cleanup_close_ int fd = reopen(r, in, O_WRONLY);
            if (fd < 0) {
                rc = fd;
                goto fail;
            }
            rc = ftruncate(fd, attr->st_size) < 0 ? -errno : 0;
        }
        inode_rules_changed(r, in);
        if (rc < 0)
            goto fail;
    }
    if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
        if (valid & FUSE_SET_ATTR_ATIME_NOW)
            ts[0].tv_nsec = UTIME_NOW;
        else if (valid & FUSE_SET_ATTR_ATIME)
            ts[0] = attr->st_atim;
        if (valid & FUSE_SET_ATTR_MTIME_NOW)
            ts[1].tv_nsec = UTIME_NOW;
        else if (valid & FUSE_SET_ATTR_MTIME)
            ts[1] = attr->st_mtim;
        if (fhfd >= 0)
            rc = futimens(fhfd, ts);
        else
            rc = utimensat(ifd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
        if (rc < 0) {
            rc = -errno;
            goto fail;
        }
    }
    struct stat st;
    rc = stat_inode(r, in, fi, &st);
    if (rc < 0)
        goto fail;
    fuse_reply_attr(req, &st, attr_timeout_of(r, in));
    return;
fail:
    fuse_reply_err(req, -rc);
}

void rt_readlink(fuse_req_t req, fuse_ino_t ino) {
    struct router *r = begin(req);
    int fd = inode_fd(r, inode_of(r, ino));
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    char buf[PATH_MAX + 1];
    ssize_t n = readlinkat(fd, "", buf, sizeof buf - 1);
    if (n < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
}

void rt_statfs(fuse_req_t req, fuse_ino_t ino) {
    struct router *r = begin(req);
    struct statvfs sv;
    int fd = inode_fd(r, inode_of(r, ino));
    if (fd < 0)
        fd = r->root.fd;
    if (fstatvfs(fd, &sv) < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_statfs(req, &sv);
}
