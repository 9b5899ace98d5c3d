/* table.c: the inode table keyed by (st_dev, st_ino), the watcher's indexes and
 * negative entries, held O_PATH fds within a budget (least recently used
 * closed first, reopened by name), the data fds of zero-message opens.
 */
#include "router_int.h"

/* ---- inode table ---- */

static size_t hash_key(dev_t dev, ino_t ino) {
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

struct rt_inode *table_find(struct router *r, dev_t dev, ino_t ino) {
    for (struct rt_inode *in = r->buckets[hash_key(dev, ino) & (r->nbuckets - 1)]; in; in = in->hnext)
        if (in->dev == dev && in->ino == ino)
            return in;
    return NULL;
}

void table_insert(struct router *r, struct rt_inode *in) {
    if (r->count + 1 > r->nbuckets) {
        size_t nb = r->nbuckets * 2;
        struct rt_inode **b = lz_xcalloc(nb, sizeof *b);
        for (size_t i = 0; i < r->nbuckets; i++) {
            for (struct rt_inode *x = r->buckets[i], *next; x; x = next) {
                next = x->hnext;
                size_t h = hash_key(x->dev, x->ino) & (nb - 1);
                x->hnext = b[h];
                b[h] = x;
            }
        }
        free(r->buckets);
        r->buckets = b;
        r->nbuckets = nb;
    }
    size_t h = hash_key(in->dev, in->ino) & (r->nbuckets - 1);
    in->hnext = r->buckets[h];
    r->buckets[h] = in;
    in->hashed = true;
    r->count++;
}

static void unlink_from(struct rt_inode **pp, struct rt_inode *in) {
    for (; *pp; pp = &(*pp)->hnext) {
        if (*pp == in) {
            *pp = in->hnext;
            return;
        }
    }
}

/* An evicted record whose (dev, ino) now names a different file: keep it
 * for the kernel's references, out of the table. */
void table_retire(struct router *r, struct rt_inode *in) {
    unlink_from(&r->buckets[hash_key(in->dev, in->ino) & (r->nbuckets - 1)], in);
    r->count--;
    in->hashed = false;
    in->hnext = r->retired;
    r->retired = in;
}

/* ---- indexes for the watcher thread (under r->lock) ----
 *
 * An inotify event names a watch descriptor and a name; the watcher needs
 * the FUSE node ids the kernel knows for them: the directory by wd, the
 * child by (directory, name) as the router last saw it. Only the main
 * thread changes them, under the lock; the watcher reads under it. */

static size_t hash_child(const struct rt_inode *dir, const char *name) {
    uint64_t h = (uint64_t)(uintptr_t)dir * 0x9E3779B97F4A7C15ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001B3ull;
    return (size_t)(h ^ (h >> 31));
}

static void cindex_remove(struct router *r, struct rt_inode *in) {
    if (!r->cbuckets || !in->parent || !in->name)
        return;
    struct rt_inode **pp = &r->cbuckets[hash_child(in->parent, in->name) & (r->ncbuckets - 1)];
    for (; *pp; pp = &(*pp)->cnext) {
        if (*pp == in) {
            *pp = in->cnext;
            in->cnext = NULL;
            r->ccount--;
            return;
        }
    }
}

static void cindex_add(struct router *r, struct rt_inode *in) {
    if (!r->watch || !in->parent || !in->name)
        return;
    if (r->ccount + 1 > r->ncbuckets) {
        size_t nb = r->ncbuckets ? r->ncbuckets * 2 : 1024;
        struct rt_inode **b = lz_xcalloc(nb, sizeof *b);
        for (size_t i = 0; i < r->ncbuckets; i++) {
            for (struct rt_inode *x = r->cbuckets[i], *next; x; x = next) {
                next = x->cnext;
                size_t h = hash_child(x->parent, x->name) & (nb - 1);
                x->cnext = b[h];
                b[h] = x;
            }
        }
        free(r->cbuckets);
        r->cbuckets = b;
        r->ncbuckets = nb;
    }
    size_t h = hash_child(in->parent, in->name) & (r->ncbuckets - 1);
    in->cnext = r->cbuckets[h];
    r->cbuckets[h] = in;
    r->ccount++;
}

struct rt_inode *cindex_find(struct router *r, const struct rt_inode *dir, const char *name) {
    if (!r->cbuckets)
        return NULL;
    for (struct rt_inode *in = r->cbuckets[hash_child(dir, name) & (r->ncbuckets - 1)]; in; in = in->cnext)
        if (in->parent == dir && strcmp(in->name, name) == 0)
            return in;
    return NULL;
}

struct rt_inode *windex_find(struct router *r, int wd) {
    if (!r->wbuckets)
        return NULL;
    for (struct rt_inode *in = r->wbuckets[(size_t)wd & (r->nwbuckets - 1)]; in; in = in->wnext)
        if (in->wd == wd)
            return in;
    return NULL;
}

void windex_remove(struct router *r, struct rt_inode *in) {
    if (!r->wbuckets || in->wd < 0)
        return;
    for (struct rt_inode **pp = &r->wbuckets[(size_t)in->wd & (r->nwbuckets - 1)]; *pp; pp = &(*pp)->wnext) {
        if (*pp == in) {
            *pp = in->wnext;
            in->wnext = NULL;
            r->wcount--;
            return;
        }
    }
}

static void windex_add(struct router *r, struct rt_inode *in) {
    if (r->wcount + 1 > r->nwbuckets) {
        size_t nb = r->nwbuckets ? r->nwbuckets * 2 : 256;
        struct rt_inode **b = lz_xcalloc(nb, sizeof *b);
        for (size_t i = 0; i < r->nwbuckets; i++) {
            for (struct rt_inode *x = r->wbuckets[i], *next; x; x = next) {
                next = x->wnext;
                x->wnext = b[(size_t)x->wd & (nb - 1)];
                b[(size_t)x->wd & (nb - 1)] = x;
            }
        }
        free(r->wbuckets);
        r->wbuckets = b;
        r->nwbuckets = nb;
    }
    in->wnext = r->wbuckets[(size_t)in->wd & (r->nwbuckets - 1)];
    r->wbuckets[(size_t)in->wd & (r->nwbuckets - 1)] = in;
    r->wcount++;
}

/* What the host changes in a watched directory is reported to us. Not
 * IN_CLOSE_WRITE: every write and truncation already gives IN_MODIFY. */
#define RT_WATCH_MASK                                                                                                  \
    (IN_ATTRIB | IN_MODIFY | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_MOVED_FROM | IN_MOVED_TO |     \
     IN_ONLYDIR)

/* Starts watching directory `in` (its fd held). Without a watch (the
 * user's inotify limit reached) it stays uncached: timeouts of 0. */
void watch_dir(struct router *r, struct rt_inode *in) {
    if (!r->watch || in->wd >= 0 || in->fd < 0 || !S_ISDIR(in->type) || in->store)
        return;
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", in->fd);
    int wd = inotify_add_watch(r->ino_fd, path, RT_WATCH_MASK);
    if (wd < 0)
        return;
    pthread_mutex_lock(&r->lock);
    /* One watch per inode: another record of the same directory keeps it. */
    if (!windex_find(r, wd)) {
        in->wd = wd;
        windex_add(r, in);
    }
    pthread_mutex_unlock(&r->lock);
}

/* Whether the kernel may cache what the router says about `in` (its
 * attributes) or about names in `dir`: only what a watch covers. */
double timeout_for_dir(struct router *r, const struct rt_inode *dir) {
    /* Only the router changes the Ignored Workspace State: what the kernel
     * caches of it stays true as long as a watched directory's would. */
    if (r->watch && dir && dir->store)
        return r->watch_timeout;
    return r->watch && dir && dir->wd >= 0 ? r->watch_timeout : r->timeout;
}

/* ---- negative entries (watched host directories only) ---- */

static size_t neg_hash(const struct rt_inode *dir, const char *name) {
    size_t h = (size_t)(uintptr_t)dir * 0x9e3779b97f4a7c15ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return (h >> 7) % RT_NEG_BUCKETS;
}

/* Removes (dir, name); true if it was there. Caller holds r->lock. */
bool neg_take_locked(struct router *r, const struct rt_inode *dir, const char *name) {
    for (struct rt_neg **pp = &r->negs[neg_hash(dir, name)]; *pp; pp = &(*pp)->next) {
        struct rt_neg *n = *pp;
        if (n->dir == dir && strcmp(n->name, name) == 0) {
            *pp = n->next;
            free(n);
            r->nneg--;
            return true;
        }
    }
    return false;
}

/* The timeout of a negative entry for `name` in `dir`: the watch timeout
 * when the name is now recorded (the watcher will drop the kernel's entry
 * when the host makes it), else 0 (not cached). */
double neg_record(struct router *r, const struct rt_inode *dir, const char *name) {
    if (!r->watch || !dir || dir->store || dir->wd < 0)
        return 0;
    double t = 0;
    pthread_mutex_lock(&r->lock);
    size_t h = neg_hash(dir, name);
    bool known = false;
    for (struct rt_neg *n = r->negs[h]; n && !known; n = n->next)
        known = n->dir == dir && strcmp(n->name, name) == 0;
    if (known) {
        t = r->watch_timeout;
    } else if (r->nneg < RT_NEG_MAX) {
        size_t len = strlen(name) + 1;
        struct rt_neg *n = lz_xmalloc(sizeof *n + len);
        n->dir = dir;
        memcpy(n->name, name, len);
        n->next = r->negs[h];
        r->negs[h] = n;
        r->nneg++;
        t = r->watch_timeout;
    }
    pthread_mutex_unlock(&r->lock);
    return t;
}

/* The router makes (dir, name) itself: the kernel replaces its negative
 * entry; the watcher's event for it then needs no invalidation. */
void neg_forget(struct router *r, const struct rt_inode *dir, const char *name) {
    if (!r->watch || !dir || dir->wd < 0)
        return;
    pthread_mutex_lock(&r->lock);
    (void)neg_take_locked(r, dir, name);
    pthread_mutex_unlock(&r->lock);
}

/* A directory record goes: its names go too (a new record at the same
 * address must not inherit them). Caller holds r->lock. */
static void neg_forget_dir_locked(struct router *r, const struct rt_inode *dir) {
    for (size_t i = 0; i < RT_NEG_BUCKETS && r->nneg; i++)
        for (struct rt_neg **pp = &r->negs[i]; *pp;) {
            struct rt_neg *n = *pp;
            if (n->dir == dir) {
                *pp = n->next;
                free(n);
                r->nneg--;
            } else {
                pp = &n->next;
            }
        }
}

double attr_timeout_of(struct router *r, const struct rt_inode *in) {
    if (S_ISDIR(in->type) && (in->wd >= 0 || in->store))
        return timeout_for_dir(r, in);
    return timeout_for_dir(r, in->parent);
}

/* ---- held fds: a budget, least recently used closed first ---- */

static void lru_remove(struct router *r, struct rt_inode *in) {
    if (in->lru_prev)
        in->lru_prev->lru_next = in->lru_next;
    else
        r->lru_head = in->lru_next;
    if (in->lru_next)
        in->lru_next->lru_prev = in->lru_prev;
    else
        r->lru_tail = in->lru_prev;
    in->lru_prev = in->lru_next = NULL;
    r->held--;
}

void lru_add(struct router *r, struct rt_inode *in) {
    in->lru_prev = NULL;
    in->lru_next = r->lru_head;
    if (r->lru_head)
        r->lru_head->lru_prev = in;
    else
        r->lru_tail = in;
    r->lru_head = in;
    r->held++;
}

static void lru_touch(struct router *r, struct rt_inode *in) {
    if (r->lru_head == in)
        return;
    lru_remove(r, in);
    lru_add(r, in);
}

/* The kernel keeps inodes it looked up cached until memory runs short, so
 * one fd per inode would run out on a big tree. Over budget, the coldest
 * fds are closed; inode_fd() reopens them by name. Called only when a
 * request starts, so no fd borrowed by a request is ever closed under it. */
static void lru_trim(struct router *r) {
    while (r->held > r->max_held && r->lru_tail) {
        struct rt_inode *victim = r->lru_tail;
        lru_remove(r, victim);
        close(victim->fd);
        victim->fd = -1;
    }
}

struct router *begin(fuse_req_t req) {
    struct router *r = fuse_req_userdata(req);
    lru_trim(r);
    return r;
}

struct rt_inode *inode_of(struct router *r, fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID)
        return &r->root;
    return (struct rt_inode *)(uintptr_t)ino;
}

fuse_ino_t node_id(struct rt_inode *in) { return in->is_root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in; }

/* An O_PATH fd of `in`, owned by the record (valid until the next request
 * starts). An evicted inode is reopened by the name it was last seen under
 * and must still be the same inode; otherwise -ESTALE. */
static int holder_fd_at_depth(struct router *r, struct rt_inode *in, unsigned depth, int *owned);

static int inode_fd_at_depth(struct router *r, struct rt_inode *in, unsigned depth) {
    if (in->fd >= 0) {
        if (!in->is_root)
            lru_touch(r, in);
        return in->fd;
    }
    if (!in->parent || !in->name || depth > LZ_ROUTER_DEPTH_MAX)
        return -ESTALE;
    _cleanup_close_ int owned = -EBADF;
    int pfd = holder_fd_at_depth(r, in, depth + 1, &owned);
    if (pfd < 0)
        return pfd;
    int fd = lz_openat_beneath(pfd, in->name, O_PATH | O_NOFOLLOW, 0, false);
    if (fd < 0)
        return fd == -ENOENT ? -ESTALE : fd;
    struct stat st;
    if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != in->dev || st.st_ino != in->ino) {
        close(fd);
        return -ESTALE;
    }
    in->fd = fd;
    lru_add(r, in);
    return fd;
}

int inode_fd(struct router *r, struct rt_inode *in) { return inode_fd_at_depth(r, in, 0); }

/* The data fds of `in` (zero-message opens), closed. */
static void data_forget(struct router *r, struct rt_inode *in);

/* Frees `in` (and then its parents) once nothing refers to it any more. */
static void inode_release_unused(struct router *r, struct rt_inode *in) {
    while (in && !in->is_root && in->nlookup == 0 && in->nchild == 0) {
        struct rt_inode *p = in->parent;
        if (r->watch) {
            pthread_mutex_lock(&r->lock);
            cindex_remove(r, in);
            if (in->wd >= 0 && windex_find(r, in->wd) == in) {
                windex_remove(r, in);
                (void)inotify_rm_watch(r->ino_fd, in->wd);
            }
            if (in->wd >= 0 && S_ISDIR(in->type) && r->nneg)
                neg_forget_dir_locked(r, in);
            pthread_mutex_unlock(&r->lock);
        }
        if (in->hashed) {
            unlink_from(&r->buckets[hash_key(in->dev, in->ino) & (r->nbuckets - 1)], in);
            r->count--;
        } else {
            unlink_from(&r->retired, in);
        }
        if (in->fd >= 0) {
            lru_remove(r, in);
            close(in->fd);
        }
        data_forget(r, in);
        free(in->name);
        free(in);
        if (p)
            p->nchild--;
        in = p;
    }
}

static bool is_ancestor_or_self(struct rt_inode *a, struct rt_inode *of) {
    unsigned n = 0;
    for (struct rt_inode *p = of; p && n <= LZ_ROUTER_DEPTH_MAX; p = p->parent, n++)
        if (p == a)
            return true;
    return n > LZ_ROUTER_DEPTH_MAX;
}

/* Records that `in` is now known as `name` in `dir`. */
void inode_set_name(struct router *r, struct rt_inode *in, struct rt_inode *dir, const char *name) {
    if (in->is_root)
        return;
    if (in->parent == dir && in->name && strcmp(in->name, name) == 0)
        return;
    /* Host renames can make old records disagree; never record a cycle. */
    if (S_ISDIR(in->type) && is_ancestor_or_self(in, dir))
        return;
    char *n = lz_xstrdup(name);
    dir->nchild++;
    struct rt_inode *old = in->parent;
    if (r->watch)
        pthread_mutex_lock(&r->lock);
    cindex_remove(r, in);
    in->parent = dir;
    free(in->name);
    in->name = n;
    cindex_add(r, in);
    if (r->watch)
        pthread_mutex_unlock(&r->lock);
    if (old) {
        old->nchild--;
        inode_release_unused(r, old);
    }
}

void forget_one(struct router *r, fuse_ino_t ino, uint64_t n) {
    struct rt_inode *in = inode_of(r, ino);
    if (in->is_root)
        return;
    in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
    inode_release_unused(r, in);
}

/* The fd of an open regular file handle, or -1 (directory handles are not
 * fds, and the kernel only passes file handles for regular files). */
int fh_fd(struct rt_inode *in, struct fuse_file_info *fi) {
    /* Handle 0 is a zero-message open: no fd of its own (fds 0-2 are
     * always open here, so no real handle is 0). */
    return fi && S_ISREG(in->type) && fi->fh != 0 ? (int)fi->fh : -1;
}
/* ---- the two backings (ignored-state routing, ignore.h) ---- */

/* The counterpart in the store of the host directory open at dfd (O_PATH;
 * the caller closes it), made when missing if `create`; -ENOENT when
 * absent. */
static int store_dir_of(struct router *r, int dfd, bool create) {
    char d[LZ_ROUTER_PATH_MAX + 1];
    int rc = dir_relpath(r, dfd, d, sizeof d);
    if (rc < 0)
        return rc;
    return rt_open_dir_p(rt_ignore_store_fd(r->ig), d, create);
}

int store_dir(struct router *r, struct rt_inode *dir, bool create) {
    int dfd = inode_fd(r, dir);
    return dfd < 0 ? dfd : store_dir_of(r, dfd, create);
}

/* The directory that holds `in`'s entry, in `in`'s own backing: its
 * parent's fd, or for a store entry of a host directory that directory's
 * counterpart (then *owned is set, and closed by the caller). `depth`:
 * the parent's, for inode_fd_at_depth()'s bound. */
static int holder_fd_at_depth(struct router *r, struct rt_inode *in, unsigned depth, int *owned) {
    *owned = -EBADF;
    if (!in->parent)
        return -ESTALE;
    int pfd = inode_fd_at_depth(r, in->parent, depth);
    if (pfd < 0 || !in->store || in->parent->store)
        return pfd;
    int fd = store_dir_of(r, pfd, false);
    if (fd < 0)
        return fd == -ENOENT ? -ESTALE : fd;
    return *owned = fd;
}

int holder_fd(struct router *r, struct rt_inode *in, int *owned) { return holder_fd_at_depth(r, in, 0, owned); }
struct rt_data *data_slot(struct router *r, struct rt_inode *in) {
    uintptr_t h = (uintptr_t)in;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return &r->data[(h >> 32) % RT_DATA_SLOTS];
}

void data_close(struct rt_data *d) {
    for (int i = 0; i < 3; i++) {
        if (d->fd[i] >= 0)
            close(d->fd[i]);
        d->fd[i] = -1;
    }
    d->in = NULL;
}

void created_close(struct router *r, struct rt_inode *in) {
    if (in->cfd >= 0) {
        close(in->cfd);
        in->cfd = -1;
        r->created[in->cslot] = NULL;
    }
}

static void data_forget(struct router *r, struct rt_inode *in) {
    struct rt_data *d = data_slot(r, in);
    if (d->in == in)
        data_close(d);
    created_close(r, in);
}

/* Keeps `fd`, what the sandbox created `in` with, as its writing handle:
 * the kernel sends no RELEASE for a created file's handle once it opens
 * files itself (measured: unlinked or reopened before the close), so the
 * handle is the inode's, closed when the inode is forgotten or when
 * RT_CREATED_MAX newer ones replaced it. A file created read-only
 * (0444: Git's objects) stays writable through it, as through the
 * creator's handle. */
void created_attach(struct router *r, struct rt_inode *in, int fd, int flags) {
    if (in->cfd >= 0) {
        close(in->cfd);
    } else {
        unsigned slot = (unsigned)(r->created_next++ % RT_CREATED_MAX);
        struct rt_inode *old = r->created[slot];
        if (old) {
            close(old->cfd);
            old->cfd = -1;
        }
        r->created[slot] = in;
        in->cslot = slot;
    }
    in->cfd = fd;
    in->cflags = flags;
}
