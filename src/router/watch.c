/* watch.c: watching the host (--watch): the inotify thread that invalidates what
 * the kernel cached of what the host changed.
 */
#include "router_int.h"

/* ---- watching the host ----
 *
 * With --watch the kernel may cache entries and attributes of what lies in
 * a watched directory for watch_timeout seconds, instead of asking the
 * router again at every step of every path walk (gVisor revalidates each
 * component of a shared bind mount: about 12 requests per stat). The
 * host's changes are seen anyway: every directory the kernel has looked up
 * is watched with inotify, and a thread turns each event into the
 * kernel's invalidation of that name (FUSE_NOTIFY_INVAL_ENTRY, which also
 * drops the directory's attributes) and of the child inode's attributes
 * and pages (FUSE_NOTIFY_INVAL_INODE). The next access asks the router.
 *
 * Why this cannot weaken the Git policy: the policy is decided here, per
 * operation, from the real tree (fstatat of the name, the inode's current
 * path); a cached entry only spares a LOOKUP or GETATTR. A stale positive
 * entry used for a write is an OPEN of a record whose name no longer names
 * it: refused (ESTALE). An absent name is cached only in a watched
 * directory, recorded first (table.c, neg_record) so that the host's
 * IN_CREATE drops it (handle_event below).
 *
 * What inotify does not report stays stale for at most watch_timeout:
 * writes through a shared mmap, a change made through another hard link
 * in a directory the kernel never looked up. A lost queue (IN_Q_OVERFLOW)
 * invalidates everything the router knows. Directories without a watch
 * (the user's inotify limit reached) get --cache-timeout (default 0).
 *
 * Hot reload (--notify-fd, hotnotify.h, docs/hot-reload.md): the same
 * events tell the sandbox's init which paths changed, so that it makes
 * gVisor raise inotify events for them (gVisor raises none for a change it
 * did not make). The path is built from the names the records were last
 * seen under; each is queued once (a bounded queue that coalesces to the
 * parent directory when full), after this batch's invalidations so that
 * the poke sees the new state, and written without blocking: a full pipe
 * leaves the paths queued until it drains (poll for POLLOUT), a closed one
 * ends the channel. The FUSE session never waits on any of it.
 *
 * The thread never touches the session's request path: the notifications
 * are written to /dev/fuse from the thread, holding no lock the main loop
 * needs (the kernel may wait for a request in flight before it can
 * invalidate; that request is answered meanwhile by the main thread, or
 * under io_uring by its queue's thread). */

struct rt_inval {
    fuse_ino_t parent; /* 0: no entry to drop */
    fuse_ino_t node;   /* 0: no inode to drop */
    char *name;
    bool attr_only; /* the node's attributes, not its pages */
};

static void send_inval(struct router *r, const struct rt_inval *v) {
    if (r->no_inval)
        return;
    /* -ENOENT: the kernel no longer holds it, nothing to drop. */
    if (v->parent && v->name)
        (void)fuse_lowlevel_notify_inval_entry(r->se, v->parent, v->name, strlen(v->name));
    if (v->node)
        (void)fuse_lowlevel_notify_inval_inode(r->se, v->node, v->attr_only ? -1 : 0, 0);
    r->n_inval++;
}

/* Events were lost: every name and inode the router knows is dropped. */
static void inval_everything(struct router *r) {
    pthread_mutex_lock(&r->lock);
    size_t n = 0, cap = r->ccount + 1;
    struct rt_inval *v = lz_xcalloc(cap, sizeof *v);
    v[n++] = (struct rt_inval){ .node = FUSE_ROOT_ID };
    for (size_t i = 0; i < r->ncbuckets && n < cap; i++)
        for (struct rt_inode *in = r->cbuckets[i]; in && n < cap; in = in->cnext)
            v[n++] = (struct rt_inval){ node_id(in->parent), node_id(in), lz_xstrdup(in->name) };
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < n; i++) {
        send_inval(r, &v[i]);
        free(v[i].name);
    }
    free(v);
}

/* The workspace-relative path of `name` in `dir` (of `dir` itself without
 * a name; "." for the root) from the names the records were last seen
 * under, built backwards into out[0..size). Under r->lock. NULL when a
 * record on the way is no longer linked to the root or the path is too
 * long for a record. */
static const char *event_path_locked(const struct rt_inode *dir, const char *name, char *out, size_t size) {
    size_t at = size;
    out[--at] = '\0';
    const char *comp = name;
    const struct rt_inode *d = dir;
    for (;;) {
        if (!comp) {
            if (d->is_root)
                break;
            if (!d->hashed || !d->parent || !d->name)
                return NULL;
            comp = d->name;
            d = d->parent;
            continue;
        }
        size_t n = strlen(comp);
        if (n + (at < size - 1 ? 1 : 0) > at)
            return NULL;
        if (at < size - 1)
            out[--at] = '/';
        at -= n;
        memcpy(out + at, comp, n);
        comp = NULL;
    }
    if (at == size - 1)
        return ".";
    return out + at;
}

static void hot_queue(struct router *r, const char *path) {
    if (r->hot_fd >= 0 && path)
        (void)lz_hot_queue_add(r->hotq, path);
}

/* Writes what is queued until the pipe is full (whole records, at most
 * PIPE_BUF bytes a write: never interleaved, never partial). */
static void hot_flush(struct router *r) {
    char buf[PIPE_BUF];
    while (r->hot_fd >= 0 && !lz_hot_queue_empty(r->hotq)) {
        size_t count = 0;
        size_t len = lz_hot_queue_peek(r->hotq, buf, sizeof buf, &count);
        ssize_t n = write(r->hot_fd, buf, len);
        if (n == (ssize_t)len) {
            lz_hot_queue_consume(r->hotq, count);
            r->n_hot += count;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        /* The reader is gone (EPIPE): no more hot reload. */
        close(r->hot_fd);
        r->hot_fd = -EBADF;
        lz_hot_queue_init(r->hotq);
    }
}

/* ---- the sandbox's own changes ----
 *
 * What the router itself does to the host tree comes back as inotify
 * events too. Told to init, each would make gVisor raise a second event
 * for a change the sandbox made (and raised its events for) itself, and
 * cost a poke (measured: 2000 creates inside took 43% longer). So with
 * --notify-fd every operation that changes the host marks (directory,
 * name) as in flight before it runs and with its end time after
 * (hot_wrap_ops), and an event for a name in flight or ended less than
 * RT_SELF_MS ago is not told. What this costs: a host change to a name
 * less than RT_SELF_MS after the sandbox changed the same name is not told
 * either (its content is seen at the next look, as always); an
 * overwritten mark, or an event read later than RT_SELF_MS (a loaded
 * machine), gives one duplicate event, which watchers take as a second
 * write. A poke changes nothing and marks nothing: a host write right
 * after one is told.
 *
 * The marks are taken with the router and the inode looked up before the
 * operation: it answers the request, and the request is freed then. */
#define RT_SELF_MS 25
#define RT_SELF_IN_FLIGHT LONG_MAX

static long coarse_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static uint64_t self_hash(const struct rt_inode *dir, const char *name) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)dir;
    for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

static struct rt_self *self_slot(struct router *r, uint64_t h) { return &r->self[h & (RT_SELF_SLOTS - 1)]; }

/* `ms`: RT_SELF_IN_FLIGHT before the operation, its end time after. */
static void self_mark(struct router *r, const struct rt_inode *dir, const char *name, long ms) {
    if (!dir)
        return;
    uint64_t h = self_hash(dir, name);
    pthread_mutex_lock(&r->lock);
    *self_slot(r, h) = (struct rt_self){ .dir = dir, .hash = h, .ms = ms };
    pthread_mutex_unlock(&r->lock);
}

/* What an operation on an existing inode changes: its name in its
 * directory, and the inode itself as a directory (an event about a watched
 * directory's own attributes has no name). The name is copied: the
 * operation may rename or drop the record. */
struct self_ino {
    const struct rt_inode *in, *parent;
    char name[NAME_MAX + 1];
};

static void self_ino_take(struct router *r, fuse_ino_t ino, struct self_ino *si) {
    struct rt_inode *in = inode_of(r, ino);
    si->in = in;
    si->parent = in->parent;
    si->name[0] = '\0';
    if (in->parent && in->name)
        snprintf(si->name, sizeof si->name, "%s", in->name);
}

static void self_ino_mark(struct router *r, const struct self_ino *si, long ms) {
    self_mark(r, si->in, NULL, ms);
    if (si->parent && si->name[0])
        self_mark(r, si->parent, si->name, ms);
}

static bool self_recent_locked(struct router *r, const struct rt_inode *dir, const char *name) {
    uint64_t h = self_hash(dir, name);
    const struct rt_self *s = self_slot(r, h);
    return s->dir == dir && s->hash == h && (s->ms == RT_SELF_IN_FLIGHT || coarse_ms() - s->ms < RT_SELF_MS);
}

/* An entry an operation changes: `name` of `parent`, copied (the kernel's
 * buffer goes with the request). */
struct self_entry {
    const struct rt_inode *dir;
    char name[NAME_MAX + 1];
};

static void self_entry_take(struct router *r, fuse_ino_t parent, const char *name, struct self_entry *se) {
    se->dir = inode_of(r, parent);
    snprintf(se->name, sizeof se->name, "%s", name);
}

static void self_entry_mark(struct router *r, const struct self_entry *se, long ms) {
    self_mark(r, se->dir, se->name, ms);
}

static void hw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid, struct fuse_file_info *fi) {
    struct router *r = fuse_req_userdata(req);
    if (setattr_is_poke(attr, valid)) {
        rt_setattr(req, ino, attr, valid, fi);
        return;
    }
    struct self_ino si;
    self_ino_take(r, ino, &si);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    rt_setattr(req, ino, attr, valid, fi);
    self_ino_mark(r, &si, coarse_ms());
}
static void hw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry se;
    self_entry_take(r, parent, name, &se);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    rt_mknod(req, parent, name, mode, rdev);
    self_entry_mark(r, &se, coarse_ms());
}
static void hw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry se;
    self_entry_take(r, parent, name, &se);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    rt_mkdir(req, parent, name, mode);
    self_entry_mark(r, &se, coarse_ms());
}
static void hw_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry se;
    self_entry_take(r, parent, name, &se);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    rt_symlink(req, link, parent, name);
    self_entry_mark(r, &se, coarse_ms());
}
static void hw_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
    struct router *r = fuse_req_userdata(req);
    struct self_ino si; /* its link count changes too */
    struct self_entry se;
    self_ino_take(r, ino, &si);
    self_entry_take(r, newparent, newname, &se);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    rt_link(req, ino, newparent, newname);
    long now = coarse_ms();
    self_ino_mark(r, &si, now);
    self_entry_mark(r, &se, now);
}
static void hw_remove(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry se;
    self_entry_take(r, parent, name, &se);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    if (dir)
        rt_rmdir(req, parent, name);
    else
        rt_unlink(req, parent, name);
    self_entry_mark(r, &se, coarse_ms());
}
static void hw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { hw_remove(req, parent, name, false); }
static void hw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { hw_remove(req, parent, name, true); }
static void hw_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                      unsigned int flags) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry from, to;
    self_entry_take(r, parent, name, &from);
    self_entry_take(r, newparent, newname, &to);
    self_entry_mark(r, &from, RT_SELF_IN_FLIGHT);
    self_entry_mark(r, &to, RT_SELF_IN_FLIGHT);
    rt_rename(req, parent, name, newparent, newname, flags);
    long now = coarse_ms();
    self_entry_mark(r, &from, now);
    self_entry_mark(r, &to, now);
}
static void hw_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    struct router *r = fuse_req_userdata(req);
    struct self_entry se;
    self_entry_take(r, parent, name, &se);
    self_entry_mark(r, &se, RT_SELF_IN_FLIGHT);
    rt_create(req, parent, name, mode, fi);
    self_entry_mark(r, &se, coarse_ms());
}
static void hw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct router *r = fuse_req_userdata(req);
    if (!(fi->flags & O_TRUNC)) {
        rt_open(req, ino, fi);
        return;
    }
    struct self_ino si;
    self_ino_take(r, ino, &si);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    rt_open(req, ino, fi);
    self_ino_mark(r, &si, coarse_ms());
}
static void hw_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                         struct fuse_file_info *fi) {
    struct router *r = fuse_req_userdata(req);
    struct self_ino si;
    self_ino_take(r, ino, &si);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    rt_write_buf(req, ino, in_buf, off, fi);
    self_ino_mark(r, &si, coarse_ms());
}
static void hw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    struct router *r = fuse_req_userdata(req);
    struct self_ino si;
    self_ino_take(r, ino, &si);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    rt_fallocate(req, ino, mode, off, len, fi);
    self_ino_mark(r, &si, coarse_ms());
}
static void hw_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                               fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                               int flags) {
    struct router *r = fuse_req_userdata(req);
    struct self_ino si;
    self_ino_take(r, ino_out, &si);
    self_ino_mark(r, &si, RT_SELF_IN_FLIGHT);
    rt_copy_file_range(req, ino_in, off_in, fi_in, ino_out, off_out, fi_out, len, flags);
    self_ino_mark(r, &si, coarse_ms());
}

void hot_wrap_ops(struct fuse_lowlevel_ops *ops) {
    ops->setattr = hw_setattr;
    ops->mknod = hw_mknod;
    ops->mkdir = hw_mkdir;
    ops->symlink = hw_symlink;
    ops->link = hw_link;
    ops->unlink = hw_unlink;
    ops->rmdir = hw_rmdir;
    ops->rename = hw_rename;
    ops->open = hw_open;
    ops->create = hw_create;
    ops->write_buf = hw_write_buf;
    ops->fallocate = hw_fallocate;
    ops->copy_file_range = hw_copy_file_range;
}

/* `*last_dir`: the directory whose attributes this batch of events last
 * dropped (a storm of creates in one directory needs it once). */
static void handle_event(struct router *r, const struct inotify_event *ev, fuse_ino_t *last_dir) {
    if (ev->mask & IN_Q_OVERFLOW) {
        inval_everything(r);
        hot_queue(r, ".");
        *last_dir = 0;
        return;
    }
    struct rt_inval v = { 0 };
    const char *name = ev->len ? ev->name : NULL;
    char pbuf[LZ_HOT_RECORD_MAX];
    const char *hot_path = NULL;
    pthread_mutex_lock(&r->lock);
    struct rt_inode *dir = windex_find(r, ev->wd);
    if (dir) {
        if (r->hot_fd >= 0 && !(ev->mask & IN_IGNORED) && !self_recent_locked(r, dir, name))
            hot_path = event_path_locked(dir, name, pbuf, sizeof pbuf);
        struct rt_inode *child = name ? cindex_find(r, dir, name) : NULL;
        if (!name) {
            v.node = node_id(dir); /* the directory's own attributes */
        } else if ((ev->mask & IN_CREATE) && !neg_take_locked(r, dir, name)) {
            /* A new name the kernel holds no entry for (no negative entry
             * recorded; the old one, if any, went with its IN_DELETE or
             * IN_MOVED_FROM before). Only the directory's mtime and link
             * count changed. */
            v.node = node_id(dir);
            v.attr_only = true;
        } else {
            if (ev->mask & (IN_CREATE | IN_MOVED_TO))
                (void)neg_take_locked(r, dir, name); /* its negative entry is dropped below */
            v.node = child ? node_id(child) : 0;
            /* A content or attribute change keeps the name; anything else,
             * or a child we know under another name, drops the entry. */
            if (!child || (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)))
                v.parent = node_id(dir);
        }
        if (ev->mask & IN_IGNORED) /* deleted: its wd is dead */
            windex_remove(r, dir);
    }
    pthread_mutex_unlock(&r->lock);
    hot_queue(r, hot_path);
    if (!dir || (ev->mask & IN_IGNORED))
        return;
    if (v.attr_only && !v.parent && v.node == *last_dir)
        return;
    *last_dir = v.attr_only && !v.parent ? v.node : 0;
    v.name = (char *)name;
    send_inval(r, &v);
}

void *watch_main(void *arg) {
    struct router *r = arg;
    _Alignas(struct inotify_event) char buf[65536];
    for (;;) {
        bool hot_wait = r->hot_fd >= 0 && !lz_hot_queue_empty(r->hotq);
        struct pollfd p[3] = { { .fd = r->ino_fd, .events = POLLIN },
                               { .fd = r->stop_fd, .events = POLLIN },
                               { .fd = hot_wait ? r->hot_fd : -1, .events = POLLOUT } };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (p[2].revents)
            hot_flush(r);
        if (!(p[0].revents & POLLIN))
            continue;
        ssize_t n = read(r->ino_fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            break;
        }
        fuse_ino_t last_dir = 0;
        for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
            handle_event(r, ev, &last_dir);
            off += (ssize_t)(sizeof *ev + ev->len);
        }
        hot_flush(r);
    }
    return NULL;
}
