/* dirs.c: operations on directories: opendir, readdir(plus), releasedir, fsyncdir;
 * with ignored-state routing a host directory is listed from both backings.
 */
#include "router_int.h"

/* ---- directories ---- */

static void snap_add(struct rt_dir *d, size_t *cap, const char *name, ino_t ino, unsigned char type, bool store) {
    if (d->n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        d->names = lz_xrealloc(d->names, *cap * sizeof *d->names);
        d->inos = lz_xrealloc(d->inos, *cap * sizeof *d->inos);
        d->types = lz_xrealloc(d->types, *cap * sizeof *d->types);
        d->store = lz_xrealloc(d->store, *cap * sizeof *d->store);
    }
    d->names[d->n] = lz_xstrdup(name);
    d->inos[d->n] = ino;
    d->types[d->n] = type;
    d->store[d->n] = store;
    d->n++;
}

static void snap_free(struct rt_dir *d) {
    for (size_t i = 0; i < d->n; i++)
        free(d->names[i]);
    free(d->names);
    free(d->inos);
    free(d->types);
    free(d->store);
    d->store = NULL;
    d->names = NULL;
    d->inos = NULL;
    d->types = NULL;
    d->n = 0;
}

static bool dtype_is_dir(int dfd, const struct dirent *de) {
    if (de->d_type != DT_UNKNOWN)
        return de->d_type == DT_DIR;
    struct stat st;
    return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* The listing of host directory `dir` (fd ifd) with ignored-state
 * routing: each name from the backing that serves it, as route_at()
 * decides (the host's entry decides the type when there is one). */
static int snap_listing(struct router *r, int ifd, struct rt_dir *d) {
    char drel[LZ_ROUTER_PATH_MAX + 1], rel[LZ_ROUTER_PATH_MAX + 1];
    size_t cap = 0;
    int rc = dir_relpath(r, ifd, drel, sizeof drel);
    if (rc < 0)
        return rc;
    DIR *dp;
    if ((rc = lz_opendir_at(ifd, &dp)) < 0)
        return rc;
    _cleanup_close_ int cfd = rt_open_dir_p(rt_ignore_store_fd(r->ig), drel, false);
    struct dirent *de;
    for (;;) {
        errno = 0;
        if (!(de = readdir(dp)))
            break;
        bool dot = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
        if (!dot) {
            if (join_path(rel, sizeof rel, drel, de->d_name) < 0)
                continue;
            struct stat hst;
            bool on_host = fstatat(dirfd(dp), de->d_name, &hst, AT_SYMLINK_NOFOLLOW) == 0;
            int b = route_of(r, ifd, drel, de->d_name, rel,
                             on_host ? S_ISDIR(hst.st_mode) : dtype_is_dir(dirfd(dp), de), on_host ? &hst : NULL);
            if (b == RT_STORE && cfd < 0) /* a host-tool path's copy may have just made it */
                cfd = rt_open_dir_p(rt_ignore_store_fd(r->ig), drel, false);
            if (b != RT_HOST) {
                /* Hidden: the store's entry of that name, if any, shows. */
                struct stat st;
                if (b == RT_STORE && cfd >= 0 && fstatat(cfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                    snap_add(d, &cap, de->d_name, st.st_ino, (unsigned char)IFTODT(st.st_mode), true);
                continue;
            }
        }
        snap_add(d, &cap, de->d_name, de->d_ino, de->d_type, false);
    }
    rc = errno ? -errno : 0;
    int hfd = dirfd(dp);
    if (rc == 0 && cfd >= 0) {
        DIR *sp;
        if (lz_opendir_at(cfd, &sp) == 0) {
            while ((de = readdir(sp))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    fstatat(hfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) /* the host's name decided */
                    continue;
                if (join_path(rel, sizeof rel, drel, de->d_name) < 0)
                    continue;
                if (route_of(r, hfd, drel, de->d_name, rel, dtype_is_dir(dirfd(sp), de), NULL) == RT_STORE)
                    snap_add(d, &cap, de->d_name, de->d_ino, de->d_type, true);
            }
            closedir(sp);
        }
    }
    closedir(dp);
    return rc;
}

void rt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    struct rt_inode *in = inode_of(r, ino);
    if (!S_ISDIR(in->type)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    int ifd = inode_fd(r, in);
    if (ifd < 0) {
        fuse_reply_err(req, -ifd);
        return;
    }
    struct rt_dir *d = lz_xcalloc(1, sizeof *d);
    int rc;
    if (r->ig && !in->store) {
        d->snap = true; /* listed by the first read (offset 0) */
        rc = 0;
    } else {
        rc = lz_opendir_at(ifd, &d->dp);
    }
    if (rc < 0) {
        snap_free(d);
        free(d);
        fuse_reply_err(req, -rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    /* A watched directory's listing may stay in the kernel's cache across
     * opens: the kernel drops it when the directory's mtime (refreshed
     * after the watcher's invalidation) or its own change count moves. */
    if (r->watch && in->wd >= 0) {
        fi->cache_readdir = 1;
        fi->keep_cache = 1;
    }
    if (fuse_reply_open(req, fi) != 0) {
        if (d->dp)
            closedir(d->dp);
        snap_free(d);
        free(d);
    }
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, bool plus) {
    struct router *r = begin(req);
    struct rt_inode *dir = inode_of(r, ino);
    struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
    _cleanup_free_ char *buf = lz_xcalloc(1, size);
    size_t rem = size;
    int err = 0;

    struct dirent snapent;
    char drel[LZ_ROUTER_PATH_MAX + 1];
    const char *dr = NULL;
    if (plus && r->ig && !dir->store) {
        int ifd = inode_fd(r, dir);
        if (ifd >= 0 && dir_relpath(r, ifd, drel, sizeof drel) == 0)
            dr = drel;
    }
    if (d->snap) {
        /* A read from the start (a first read, or a rewind: gVisor keeps
         * its directory handles and rewinds them) lists the directory as
         * it is now. */
        if (off == 0) {
            int ifd = inode_fd(r, dir);
            snap_free(d);
            int rc = ifd < 0 ? ifd : snap_listing(r, ifd, d);
            if (rc < 0) {
                fuse_reply_err(req, -rc);
                return;
            }
        }
        d->offset = off;
    } else if (off != d->offset) {
        seekdir(d->dp, off);
        d->entry = NULL;
        d->offset = off;
    }
    for (;;) {
        if (d->snap) {
            if (d->offset < 0 || (size_t)d->offset >= d->n)
                break;
            size_t i = (size_t)d->offset;
            memset(&snapent, 0, sizeof snapent);
            snprintf(snapent.d_name, sizeof snapent.d_name, "%s", d->names[i]);
            snapent.d_ino = d->inos[i];
            snapent.d_type = d->types[i];
            snapent.d_off = (off_t)i + 1;
            d->entry = &snapent;
        } else if (!d->entry) {
            errno = 0;
            d->entry = readdir(d->dp);
            if (!d->entry) {
                err = errno;
                break;
            }
        }
        const char *name = d->entry->d_name;
        off_t next = d->entry->d_off;
        bool dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
        size_t used;
        if (plus) {
            struct fuse_entry_param e = { 0 };
            if (dot) {
                memset(&e, 0, sizeof e);
                e.attr.st_ino = d->entry->d_ino;
                e.attr.st_mode = (mode_t)d->entry->d_type << 12;
            } else {
                int rc;
                if (d->snap && !d->store[d->offset]) {
                    /* Routed to the host when listed: no second decision. */
                    struct rt_at at = { .fd = inode_fd(r, dir), .owned = -EBADF };
                    rc = at.fd < 0 ? at.fd : lookup_at(r, dir, name, &at, &e);
                } else {
                    rc = do_lookup_rel(r, dir, dr, name, &e);
                }
                if (rc == -ENOENT) { /* removed meanwhile */
                    d->entry = NULL;
                    d->offset = next;
                    continue;
                }
                if (rc < 0) {
                    err = -rc;
                    break;
                }
            }
            used = fuse_add_direntry_plus(req, buf + (size - rem), rem, name, &e, next);
            if (used > rem) {
                if (!dot)
                    forget_one(r, e.ino, 1);
                break;
            }
        } else {
            struct stat st = { .st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12 };
            used = fuse_add_direntry(req, buf + (size - rem), rem, name, &st, next);
            if (used > rem)
                break;
        }
        rem -= used;
        d->entry = NULL;
        d->offset = next;
    }
    if (d->snap)
        d->entry = NULL;
    /* An error after some entries: return those, the next call reports it. */
    if (err && rem == size)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, size - rem);
}

void rt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    do_readdir(req, ino, size, off, fi, false);
}

void rt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    do_readdir(req, ino, size, off, fi, true);
}

void rt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
    if (d->dp)
        closedir(d->dp);
    snap_free(d);
    free(d);
    fuse_reply_err(req, 0);
}

void rt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
    struct router *r = fuse_req_userdata(req);
    _cleanup_close_ int owned = -EBADF;
    int fd;
    if (d->dp) {
        fd = dirfd(d->dp);
    } else {
        int ifd = inode_fd(r, inode_of(r, ino));
        fd = owned = ifd < 0 ? ifd : openat(ifd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            fuse_reply_err(req, ifd < 0 ? -ifd : errno);
            return;
        }
    }
    int rc = datasync ? fdatasync(fd) : fsync(fd);
    fuse_reply_err(req, rc < 0 ? errno : 0);
}
