/* files.c: operations on open files: open, create, read, write, flush, release,
 * fsync, fallocate, lseek, copy_file_range.
 */
#include "router_int.h"

#include "router_volume.h"

/* ---- files ---- */

static int open_existing(struct router *r, struct rt_inode *in, int flags) {
    if (S_ISDIR(in->type))
        return -EISDIR;
    if (!S_ISREG(in->type))
        return -EINVAL; /* the kernel opens FIFOs itself */
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) {
        int rc = policy_inode(r, in, -1, LZ_ROP_WRITE);
        if (rc < 0)
            return rc;
        inode_rules_will_change(r, in);
    }
    return reopen(r, in, flags);
}

/* Zero-message opens. gVisor opens every file it looks at, so an OPEN and a
 * RELEASE per file stat'ed would cross the router. Instead the first OPEN
 * of a regular file is answered ENOSYS, after which the kernel opens files
 * itself (FUSE_NO_OPEN_SUPPORT) with handle 0, keeps their page cache
 * (FOPEN_KEEP_CACHE: the watcher and AUTO_INVAL_DATA drop it on host
 * changes), and sends no RELEASE; FLUSH is answered ENOSYS the same way.
 * What the policy checked at open for writing is checked at every write,
 * truncate and fallocate instead (a stricter rule: a file renamed to a
 * protected name cannot be written through a handle opened before). Reads
 * and writes with handle 0 go through the inode's own fds, opened on first
 * use from its O_PATH fd and kept in a small direct-mapped cache; a
 * created file's through the fd it was created with (created_attach). */

/* The fd to serve a read (DATA_READ) or a write of `in` through handle
 * `fi`: the handle's own, or one of the inode's. */
static int data_fd(struct router *r, struct rt_inode *in, struct fuse_file_info *fi, int kind) {
    if (fi->fh != 0)
        return (int)fi->fh;
    if (!S_ISREG(in->type))
        return -EBADF;
    bool cw = in->cfd >= 0 && (in->cflags & O_ACCMODE) != O_RDONLY;
    if (cw && (kind == DATA_WRITE || (kind == DATA_READ && (in->cflags & O_ACCMODE) == O_RDWR)))
        return in->cfd;
    struct rt_data *d = data_slot(r, in);
    if (d->in != in) {
        data_close(d);
        d->in = in;
    }
    if (d->fd[kind] < 0) {
        static const int flags[] = { O_RDONLY, O_WRONLY, O_WRONLY | O_APPEND };
        int fd = reopen(r, in, flags[kind]);
        if (fd < 0)
            return cw && kind == DATA_APPEND ? in->cfd : fd;
        d->fd[kind] = fd;
    }
    return d->fd[kind];
}

/* The checks of a write: a handle opened for writing before its file
 * became a checked Git index (index.lock renamed over index) must not
 * change it afterwards; through handle 0, those of an open for writing. */
static int data_write_check(struct router *r, struct rt_inode *in, struct fuse_file_info *fi) {
    /* Through handle 0, the handle it was created with counts when it was
     * opened for writing (that handle's rule was checked at create). */
    enum lz_router_handle h = fi->fh != 0                      ? LZ_HANDLE_OPEN
        : in->cfd >= 0 && (in->cflags & O_ACCMODE) != O_RDONLY ? LZ_HANDLE_WRITABLE
                                                               : LZ_HANDLE_NONE;
    int rc = lz_router_write_check(false, h, in->sticky, in->sealed);
    if (rc == LZ_ASK_PATH_POLICY)
        return policy_inode(r, in, -1, LZ_ROP_WRITE);
    if (rc < 0)
        refused(r, LZ_REFW_STICKY, LZ_ROP_WRITE, in->name, NULL, rc, NULL);
    return rc;
}

void rt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    if (r->no_open && S_ISREG(in->type)) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    int fd = open_existing(r, in, fi->flags);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    fi->fh = (uint64_t)fd;
    fi->keep_cache = 0;
    fi->direct_io = 0;
    /* A read-only handle has no delayed write error to report at close:
     * no FLUSH round trip (gVisor opens every file it stats). */
    fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
    if (fuse_reply_open(req, fi) != 0)
        close(fd);
}

void rt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *dir = inode_of(r, parent);
    struct fuse_entry_param e = { 0 };
    bool exists = false;
    struct rt_at at = { .owned = -EBADF };
    neg_forget(r, dir, name);
    int fd = -1, rc = route_at(r, dir, name, S_IFREG, true, &at);
    if (rc < 0)
        goto fail;
    rc = at.store ? store_check(r, dir, name, LZ_ROP_CREATE, at.fd, &exists)
                  : policy_new_entry(r, dir, name, LZ_ROP_CREATE, NULL, &exists);
    if (rc < 0)
        goto fail;
    if (!exists) {
        int dfd = at.fd;
        if (!at.store)
            rules_will_change(r, dir, name);
        fd = lz_openat_beneath(dfd, name, fi->flags | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 01777, false);
        if (fd < 0 && (fd != -EEXIST || (fi->flags & O_EXCL))) {
            rc = fd;
            goto fail;
        }
        exists = fd < 0;
    }
    if (exists) {
        /* Created by someone else meanwhile: an open of the existing file,
         * with the policy of an open. */
        if (fi->flags & O_EXCL) {
            rc = -EEXIST;
            goto fail;
        }
        rc = do_lookup(r, dir, name, &e);
        if (rc < 0)
            goto fail;
        fd = open_existing(r, inode_of(r, e.ino), fi->flags);
        if (fd < 0) {
            forget_one(r, e.ino, 1);
            rc = fd;
            goto fail;
        }
    } else {
        rc = do_lookup(r, dir, name, &e);
        if (rc < 0) {
            close(fd);
            goto fail;
        }
    }
    fi->fh = (uint64_t)fd;
    fi->keep_cache = 0;
    fi->direct_io = 0;
    if (r->no_open) {
        created_attach(r, inode_of(r, e.ino), fd, fi->flags);
        fi->fh = 0;
        fd = -1;
    }
    at_done(&at);
    if (fuse_reply_create(req, &e, fi) != 0) {
        if (fd >= 0)
            close(fd);
        forget_one(r, e.ino, 1);
    }
    return;
fail:
    at_done(&at);
    fuse_reply_err(req, -rc);
}

void rt_read_buf(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    int fd = data_fd(r, inode_of(r, ino), fi, DATA_READ);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void rt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    int rc = data_write_check(r, in, fi);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    /* Through handle 0: the kernel's offset of an O_APPEND write is its
     * cached size; an O_APPEND fd appends at the host file's real end. */
    int fd = data_fd(r, in, fi, (fi->flags & O_APPEND) ? DATA_APPEND : DATA_WRITE);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    if (fi->fh == 0)
        inode_rules_will_change(r, in);
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
    out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = fd;
    out.buf[0].pos = off;
    ssize_t n = fuse_buf_copy(&out, in_buf, 0);
    if (n >= 0 && fi->fh == 0 && (fi->flags & (O_SYNC | O_DSYNC)) && fdatasync(fd) < 0)
        n = -errno;
    if (fi->fh == 0)
        inode_rules_changed(r, in);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_write(req, (size_t)n);
}

void rt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    /* Zero-message opens: the handles left are created files, written
     * synchronously; no FLUSH round trip at every close. */
    if (((struct router *)fuse_req_userdata(req))->no_open) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    /* close() of a duplicate reports delayed write errors like a real close. */
    int fd = dup((int)fi->fh);
    int rc = fd < 0 || close(fd) < 0 ? errno : 0;
    fuse_reply_err(req, rc);
}

void rt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    if (fi->fh != 0)
        close((int)fi->fh);
    else if (r->no_open && S_ISREG(in->type))
        created_close(r, in); /* only a created file's handle has a RELEASE */
    /* What the sandbox left in a .gitignore it wrote (ignore.h). */
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
        inode_rules_changed(r, in);
    fuse_reply_err(req, 0);
}

void rt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    int fd = data_fd(r, inode_of(r, ino), fi, DATA_READ);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    int rc = datasync ? fdatasync(fd) : fsync(fd);
    fuse_reply_err(req, rc < 0 ? errno : 0);
}

void rt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    int fd = data_write_check(r, in, fi);
    if (fd == 0)
        fd = data_fd(r, in, fi, DATA_WRITE);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    fuse_reply_err(req, fallocate(fd, mode, off, len) < 0 ? errno : 0);
}

void rt_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    int fd = data_fd(r, inode_of(r, ino), fi, DATA_READ);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    off_t res = lseek(fd, off, whence);
    if (res < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_lseek(req, res);
}

void rt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                        fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags) {
    struct router *r = begin(req);
    struct rt_inode *out = inode_of(r, ino_out);
    /* The kernel refuses a destination that is not open for writing; the
     * policy is that of a write. */
    int ofd = data_write_check(r, out, fi_out);
    if (ofd == 0)
        ofd = data_fd(r, out, fi_out, DATA_WRITE);
    /* Its own fd: the source's data fd may share the destination's slot. */
    _cleanup_close_ int owned = ofd < 0 ? ofd : fi_out->fh != 0 ? -EBADF : fcntl(ofd, F_DUPFD_CLOEXEC, 3);
    if (fi_out->fh == 0 && ofd >= 0)
        ofd = owned < 0 ? -errno : owned;
    int ifd = ofd < 0 ? ofd : data_fd(r, inode_of(r, ino_in), fi_in, DATA_READ);
    if (ifd < 0) {
        fuse_reply_err(req, -ifd);
        return;
    }
    ssize_t n = copy_file_range(ifd, &off_in, ofd, &off_out, len, (unsigned)flags);
    if (n < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_write(req, (size_t)n);
}
