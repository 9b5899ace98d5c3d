/* lazaret-router — the workspace router.
 *
 *   lazaret-router --source DIR --mountpoint MP [--ready-fd N]
 *                  [--protect REL]... [--cache-timeout SECONDS]
 *                  [--watch SECONDS] [--max-held-fds N] [--allow-other] [--quiet]
 *                  [--plain] [--deny-link-target ABS]...
 *
 * A libfuse3 low-level passthrough of the real workspace directory that asks
 * the Git-protection policy (src/lib/router.h, docs/security-git.md) before
 * every operation that changes the tree. It is started by the Runtime
 * Supervisor inside the Domain's user + mount namespace (uid 0 there is the
 * developer), so everything it creates belongs to the developer on the host.
 *
 * How paths are handled (the libfuse passthrough_ll model):
 *  - every inode the kernel knows has a record keyed by (st_dev, st_ino)
 *    (the FUSE node id is its address) with the (parent, name) it was last
 *    seen under, and an O_PATH|O_NOFOLLOW fd: always opened for
 *    directories, on first need for the rest. The kernel caches inodes
 *    until memory runs short, so fds are held within a budget (half of
 *    RLIMIT_NOFILE, or --max-held-fds): the least recently used are closed
 *    and reopened by name when needed, which must yield the same inode,
 *    else the operation fails closed (ESTALE);
 *  - a name from the kernel is one component, opened relative to its
 *    parent's fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *    RESOLVE_NO_MAGICLINKS): no symlink inside the tree is ever followed,
 *    so nothing outside the source directory can be reached through one;
 *  - for the policy, the path of a directory is what the kernel says it is
 *    now (readlink of /proc/self/fd/N), relative to the source root: it
 *    follows host renames and cannot be chosen by the agent. A directory
 *    that left the tree or was deleted fails closed (ESTALE, ENOENT);
 *  - a non-directory's path is the name it was last seen under; before
 *    that name is used for a decision it is checked to still name the same
 *    inode, else the operation fails closed (ESTALE). A file with
 *    several links that was ever seen under a protected name stays
 *    protected for as long as the kernel holds it ("sticky");
 *  - data I/O reopens the held inode through /proc/self/fd/N: that is our
 *    own fd, not a path the agent chose, and only regular files are
 *    reopened.
 *
 * --plain serves a volume rather than a workspace: no Git policy (no name is
 * protected), every other rule kept (set-id bits stripped, no device nodes
 * or sockets, no chown to other ids, no symlink followed).
 * --deny-link-target: see "symlinks the host would follow" below.
 *
 * Single-threaded on purpose: a policy decision and the operation it allows
 * cannot be interleaved with another request of the agent.
 *
 * Caching: attribute and entry timeouts are 0 unless --cache-timeout says
 * otherwise, or --watch makes them long where inotify reports the host's
 * changes (see "watching the host"), no writeback cache, page cache invalidated on open and on
 * mtime change, so edits made on the host at the same time are seen at
 * once. A positive timeout only delays when host edits are seen: every
 * decision is taken on the router's side from the real tree, never from
 * what the kernel cached.
 *
 * Nothing here reads, logs or hides file contents; refusals are logged
 * (path and operation, control characters escaped, rate-limited) unless
 * --quiet.
 */
#define FUSE_USE_VERSION 312

#include "gitindex.h"
#include "hidden.h"
#include "hosttools.h"
#include "htseed.h"
#include "readiness.h"
#include "gitrefs.h"
#include "ignore.h"
#include "router.h"
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000
#endif

struct rt_inode {
    struct rt_inode *hnext;    /* hash chain (or the retired list) */
    struct rt_inode *lru_prev; /* held fds, most recently used first */
    struct rt_inode *lru_next;
    dev_t dev;
    ino_t ino;
    int fd;                  /* O_PATH | O_NOFOLLOW, or -1 while evicted */
    mode_t type;             /* S_IFMT bits */
    uint64_t nlookup;        /* references held by the kernel */
    uint64_t nchild;         /* inodes naming this one as their parent */
    struct rt_inode *parent; /* directory where `name` was last seen (counted in its nchild) */
    char *name;
    struct rt_inode *cnext; /* (parent, name) index chain, for the watcher */
    struct rt_inode *wnext; /* watch-descriptor index chain */
    int wd;                 /* inotify watch of this directory, or -1 */
    bool sticky;            /* seen under a protected name while held */
    bool sealed;            /* a checked Git index or packed-refs now: no more writes through any handle */
    /* The sandbox-side owner (see "owners"): 0 not read yet, 1 none (the
     * developer's), 2 ouid:ogid from the file's user.lazaret.owner. */
    unsigned char own_state;
    uid_t ouid;
    gid_t ogid;
    bool is_root;
    bool hashed; /* in the table (false once retired) */
    bool store;  /* in the Ignored Workspace State (see ignore.h), not the host workspace */
    /* Zero-message opens: the fd the sandbox created this file with (its
     * flags in cflags), kept as its writing handle; -1 when none. */
    int cfd;
    int cflags;
    unsigned cslot; /* its place in router.created */
};

struct rt_dir {
    DIR *dp;
    struct dirent *entry;
    off_t offset;
    /* A host directory when ignored-state routing is on: its listing
     * (both backings, each name from the backing that serves it) taken at
     * opendir; offsets are indexes + 1. */
    bool snap;
    size_t n;
    char **names;
    ino_t *inos;
    unsigned char *types;
    bool *store; /* the backing each name was routed to */
};

#define RT_DATA_SLOTS 64
#define RT_CREATED_MAX 1024
#define RT_NEG_BUCKETS 4096
#define RT_NEG_MAX 65536

struct router {
    struct rt_inode root;
    char *root_path; /* the kernel's path of the source root */
    size_t root_len;
    int proc_fd; /* /proc/self/fd */
    struct rt_inode **buckets;
    size_t nbuckets, count;
    struct rt_inode *retired;
    struct rt_inode *lru_head, *lru_tail;
    size_t held, max_held;
    struct lz_router_fs fs;
    struct lz_router_policy pol;
    char **protect;
    size_t n_protect;
    char **deny; /* --deny-link-target: canonical absolute host paths */
    size_t n_deny;
    char *mountpoint; /* canonical; never looked at by lt_resolve() */
    bool plain;       /* --plain: no Git policy (a volume, not a workspace) */
    /* --ignored-state: the routing of git-ignored untracked paths to the
     * Domain's Ignored Workspace State (ignore.h); NULL when off or when
     * the workspace is not in a Git work tree. */
    struct rt_ignore *ig;
    /* --host-tool: host-tool configuration paths, served from the store
     * after a copy of the host's (htseed.h); NULL when none. */
    struct rt_ht *ht;
    char *store_path; /* the kernel's path of the store root */
    size_t store_len;
    uid_t uid;
    gid_t gid;
    bool quiet;
    bool no_xattr;  /* the host file system has no user xattrs: owners cannot be kept */
    double timeout; /* attribute and entry cache timeout, seconds (default 0) */
    /* --watch: what lies in a watched directory is cached for
     * watch_timeout, an inotify thread invalidating what the host changes
     * (see "watching the host" below). `lock` guards what that thread
     * reads: the (parent, name) index, the wd index, and records' parent,
     * name and lifetime. */
    double watch_timeout;
    bool watch;
    bool no_inval; /* --test-no-invalidate: events read, nothing invalidated */
    int ino_fd;
    int stop_fd;
    struct fuse_session *se;
    pthread_mutex_t lock;
    struct rt_inode **cbuckets, **wbuckets;
    size_t ncbuckets, ccount, nwbuckets, wcount;
    unsigned long n_inval; /* notifications sent (watcher thread only) */
    /* Zero-message opens (see "files"): the kernel opens regular files
     * without asking; reads and writes come with handle 0 and are served
     * through per-inode fds kept here. --eager-open turns it off. */
    bool eager_open;
    bool no_open;
    struct rt_data {
        struct rt_inode *in;
        int fd[3]; /* read, write, append; -1 when not open */
    } data[RT_DATA_SLOTS];
    /* Negative entries the kernel may cache (names looked up and absent in
     * watched host directories), under `lock`: the watcher drops the
     * kernel's entry when such a name appears on the host. */
    struct rt_neg {
        struct rt_neg *next;
        const struct rt_inode *dir; /* compared, never followed */
        char name[];
    } * negs[RT_NEG_BUCKETS];
    size_t nneg;
    /* Inodes holding a created fd (cfd), oldest replaced first. */
    struct rt_inode *created[RT_CREATED_MAX];
    size_t created_next;
    time_t log_window;
    unsigned log_count, log_dropped;
};

/* ---- refusal log: paths are agent-chosen bytes, so escape them ---- */

static void log_escaped(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            fputc(*p, f);
        else
            fprintf(f, "\\x%02x", *p);
    }
}

/* Rate limit: at most 20 refusals a second are logged. */
static bool log_allowed(struct router *r) {
    if (r->quiet)
        return false;
    time_t now = time(NULL);
    if (now != r->log_window) {
        if (r->log_dropped)
            fprintf(stderr, "lazaret-router: %u more refusals not logged\n", r->log_dropped);
        r->log_window = now;
        r->log_count = 0;
        r->log_dropped = 0;
    }
    if (++r->log_count > 20) {
        r->log_dropped++;
        return false;
    }
    return true;
}

/* A refusal with a reason (already escaped by whoever made it). */
static void log_refusal_why(struct router *r, const char *op, const char *path, const char *why) {
    if (!log_allowed(r))
        return;
    fprintf(stderr, "lazaret-router: refused %s ", op);
    log_escaped(stderr, path ? path : "(no name)");
    fputs(": ", stderr);
    log_escaped(stderr, why);
    fputc('\n', stderr);
}

static void log_refusal(struct router *r, const char *op, const char *path, const char *path2, int err) {
    if (!log_allowed(r))
        return;
    fprintf(stderr, "lazaret-router: refused %s ", op);
    log_escaped(stderr, path ? path : "(no name)");
    if (path2) {
        fputs(" -> ", stderr);
        log_escaped(stderr, path2);
    }
    fprintf(stderr, ": %s\n", strerror(-err));
}

/* ---- inode table ---- */

static size_t hash_key(dev_t dev, ino_t ino) {
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static struct rt_inode *table_find(struct router *r, dev_t dev, ino_t ino) {
    for (struct rt_inode *in = r->buckets[hash_key(dev, ino) & (r->nbuckets - 1)]; in; in = in->hnext)
        if (in->dev == dev && in->ino == ino)
            return in;
    return NULL;
}

static void table_insert(struct router *r, struct rt_inode *in) {
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
static void table_retire(struct router *r, struct rt_inode *in) {
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

static struct rt_inode *cindex_find(struct router *r, const struct rt_inode *dir, const char *name) {
    if (!r->cbuckets)
        return NULL;
    for (struct rt_inode *in = r->cbuckets[hash_child(dir, name) & (r->ncbuckets - 1)]; in; in = in->cnext)
        if (in->parent == dir && strcmp(in->name, name) == 0)
            return in;
    return NULL;
}

static struct rt_inode *windex_find(struct router *r, int wd) {
    if (!r->wbuckets)
        return NULL;
    for (struct rt_inode *in = r->wbuckets[(size_t)wd & (r->nwbuckets - 1)]; in; in = in->wnext)
        if (in->wd == wd)
            return in;
    return NULL;
}

static void windex_remove(struct router *r, struct rt_inode *in) {
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
static void watch_dir(struct router *r, struct rt_inode *in) {
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
static double timeout_for_dir(struct router *r, const struct rt_inode *dir) {
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
static bool neg_take_locked(struct router *r, const struct rt_inode *dir, const char *name) {
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
static double neg_record(struct router *r, const struct rt_inode *dir, const char *name) {
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
static void neg_forget(struct router *r, const struct rt_inode *dir, const char *name) {
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

static double attr_timeout_of(struct router *r, const struct rt_inode *in) {
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

static void lru_add(struct router *r, struct rt_inode *in) {
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

static struct router *begin(fuse_req_t req) {
    struct router *r = fuse_req_userdata(req);
    lru_trim(r);
    return r;
}

static struct rt_inode *inode_of(struct router *r, fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID)
        return &r->root;
    return (struct rt_inode *)(uintptr_t)ino;
}

static fuse_ino_t node_id(struct rt_inode *in) { return in->is_root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in; }

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

static int inode_fd(struct router *r, struct rt_inode *in) { return inode_fd_at_depth(r, in, 0); }

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
static void inode_set_name(struct router *r, struct rt_inode *in, struct rt_inode *dir, const char *name) {
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

static void forget_one(struct router *r, fuse_ino_t ino, uint64_t n) {
    struct rt_inode *in = inode_of(r, ino);
    if (in->is_root)
        return;
    in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
    inode_release_unused(r, in);
}

/* The fd of an open regular file handle, or -1 (directory handles are not
 * fds, and the kernel only passes file handles for regular files). */
static int fh_fd(struct rt_inode *in, struct fuse_file_info *fi) {
    /* Handle 0 is a zero-message open: no fd of its own (fds 0-2 are
     * always open here, so no real handle is 0). */
    return fi && S_ISREG(in->type) && fi->fh != 0 ? (int)fi->fh : -1;
}

/* ---- paths for the policy ---- */

static int name_valid(const char *name) {
    size_t n = strlen(name);
    if (n > NAME_MAX)
        return -ENAMETOOLONG;
    if (n == 0 || strchr(name, '/'))
        return -EINVAL;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    return 0;
}

static int read_fd_path(struct router *r, int fd, char *buf, size_t size) {
    char num[24];
    snprintf(num, sizeof num, "%d", fd);
    ssize_t n = readlinkat(r->proc_fd, num, buf, size - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n >= size - 1)
        return -ENAMETOOLONG;
    buf[n] = '\0';
    return 0;
}

static int refresh_root_path(struct router *r) {
    char buf[PATH_MAX + 1];
    int rc = read_fd_path(r, r->root.fd, buf, sizeof buf);
    if (rc < 0)
        return rc;
    if (buf[0] != '/')
        return -ESTALE; /* "(unreachable)/..." */
    free(r->root_path);
    r->root_path = lz_xstrdup(buf);
    r->root_len = strlen(buf);
    return 0;
}

/* abs relative to directory path `root` (root_len bytes), or NULL when it
 * is not that directory or below it. */
static const char *strip_prefix(const char *abs, const char *root, size_t root_len) {
    if (root_len == 1 && root[0] == '/')
        return abs[0] == '/' ? abs + 1 : NULL;
    if (strncmp(abs, root, root_len) != 0)
        return NULL;
    if (abs[root_len] == '\0')
        return abs + root_len;
    if (abs[root_len] == '/')
        return abs + root_len + 1;
    return NULL;
}

static const char *strip_root(struct router *r, const char *abs) {
    return strip_prefix(abs, r->root_path, r->root_len);
}

/* The current path of directory fd `fd`, relative to the source root. */
static int dir_relpath(struct router *r, int fd, char *out, size_t size) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_nlink == 0)
        return -ENOENT;
    char abs[PATH_MAX + 1];
    int rc = read_fd_path(r, fd, abs, sizeof abs);
    if (rc < 0)
        return rc;
    for (int attempt = 0; attempt < 2; attempt++) {
        const char *rel = strip_root(r, abs);
        /* A directory of the Ignored Workspace State has the same
         * workspace-relative path as its place in the view. */
        if (!rel && r->store_path)
            rel = strip_prefix(abs, r->store_path, r->store_len);
        if (rel) {
            size_t len = strlen(rel);
            if (len >= size)
                return -ENAMETOOLONG;
            memcpy(out, rel, len + 1);
            return 0;
        }
        /* The workspace directory itself may have been renamed on the host. */
        if (attempt == 0 && refresh_root_path(r) < 0)
            break;
    }
    return -ESTALE;
}

static int join_path(char *out, size_t size, const char *dir, const char *name) {
    if (dir[0] == '\0')
        return lz_snprintf(out, size, "%s", name);
    return lz_snprintf(out, size, "%s/%s", dir, name);
}

static int entry_relpath(struct router *r, struct rt_inode *dir, const char *name, char *out, size_t size) {
    char d[LZ_ROUTER_PATH_MAX + 1] = "";
    int dfd = inode_fd(r, dir);
    if (dfd < 0)
        return dfd;
    int rc = dir_relpath(r, dfd, d, sizeof d);
    if (rc < 0)
        return rc;
    return join_path(out, size, d, name);
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

static int store_dir(struct router *r, struct rt_inode *dir, bool create) {
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

static int holder_fd(struct router *r, struct rt_inode *in, int *owned) { return holder_fd_at_depth(r, in, 0, owned); }

/* The backing of entry `name` (workspace-relative `rel`) of the host
 * directory hfd (`drel`): what the ignore rules decide, except that a
 * host-tool configuration path they leave to the host is the store's,
 * seeded from the host's entry (htseed.h). */
static int route_of(struct router *r, int hfd, const char *drel, const char *name, const char *rel, bool is_dir,
                    const struct stat *hst) {
    static char *const git[] = { (char *)".git" };
    int b = rt_ignore_route(r->ig, rel, is_dir, hst);
    size_t m = rt_ht_match(r->ht, rel);
    /* Below `.git` the Git policy decides (security-git.md), never this;
     * a git-ignored entry (a host `.envrc` with secrets) stays private. */
    if (b != RT_HOST || !m || lz_hosttools_match(git, 1, rel))
        return b;
    if (m == strlen(rel))
        rt_ht_seed(r->ht, hfd, rt_ignore_store_fd(r->ig), drel, name, rel);
    return RT_STORE;
}

/* Where entry `name` of `dir` lives: the backing that serves it and that
 * backing's fd of `dir`. */
struct rt_at {
    int fd;
    int owned; /* closed by at_done() */
    bool store;
    bool on_host; /* hst is the host's entry of that name (looked at while routing) */
    struct stat hst;
};

static void at_done(struct rt_at *at) {
    if (at->owned >= 0)
        close(at->owned);
    at->owned = -EBADF;
}

/* Routes `name` in `dir`. `type` is the entry's type when the caller knows
 * it (what it is making or moving), else 0: the host's entry decides, or
 * the store's when the host has none. A store counterpart of `dir` is made
 * when `create`; without it a missing one gives -ENOENT. For a `lookup`
 * (type 0), a name neither backing has gives -ENOENT at once. */
static int route_at_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name, mode_t type,
                        bool create, bool lookup, struct rt_at *at) {
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

static int route_at(struct router *r, struct rt_inode *dir, const char *name, mode_t type, bool create,
                    struct rt_at *at) {
    return route_at_rel(r, dir, NULL, name, type, create, false, at);
}

static int plain_check(const struct lz_router_req *q);

/* The path checks of a store-side operation: a store is no Git work tree
 * the host's git ever reads, so only the shape rules (--plain). */
static int store_check(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op, int sfd,
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
    return plain_check(&q);
}

/* 1 if directory `name` in dfd has no entry, 0 if it has, -errno. */
static int dir_is_empty(int dfd, const char *name) {
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
static void rules_will_change(struct router *r, struct rt_inode *dir, const char *name) {
    char rel[LZ_ROUTER_PATH_MAX + 1];
    if (r->ig && !dir->store && rt_ignore_is_rules_file(name) && entry_relpath(r, dir, name, rel, sizeof rel) == 0)
        rt_ignore_will_change(r->ig, rel);
}

static void rules_changed(struct router *r, struct rt_inode *dir, const char *name) {
    char rel[LZ_ROUTER_PATH_MAX + 1];
    if (r->ig && !dir->store && rt_ignore_is_rules_file(name) && entry_relpath(r, dir, name, rel, sizeof rel) == 0)
        rt_ignore_changed(r->ig, rel);
}

/* The same for an existing host inode, by the name it was last seen under. */
static void inode_rules_will_change(struct router *r, struct rt_inode *in) {
    if (!in->store && in->parent && in->name)
        rules_will_change(r, in->parent, in->name);
}

static void inode_rules_changed(struct router *r, struct rt_inode *in) {
    if (!in->store && in->parent && in->name)
        rules_changed(r, in->parent, in->name);
}

/* The current path of `in`. A non-directory with no link left has no path:
 * *ret_noname is set and nothing else. `fhfd` is an open handle of it, or
 * -1. */
static int inode_relpath(struct router *r, struct rt_inode *in, int fhfd, char *out, size_t size, bool *ret_noname) {
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
static int fs_has_entry(void *ctx, const char *dir, const char *name) {
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

/* --plain: a volume is not a Git workspace, so no name is protected; only
 * the shape checks every file system makes are kept (the root cannot be
 * removed or renamed, creating an existing name says EEXIST). */
static int plain_check(const struct lz_router_req *q) {
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

static int policy(struct router *r, const struct lz_router_req *q) {
    int rc = r->plain ? plain_check(q) : lz_router_check(&r->pol, q);
    if (rc < 0 && rc != -EEXIST)
        log_refusal(r, lz_router_op_name(q->op), q->path, q->op == LZ_ROP_RENAME ? q->path2 : NULL, rc);
    return rc;
}

/* Policy for an operation on existing inode `in` (open for write, setattr). */
static int policy_inode(struct router *r, struct rt_inode *in, int fhfd, enum lz_router_op op) {
    char path[LZ_ROUTER_PATH_MAX + 1];
    bool noname;
    if (in->sticky) {
        log_refusal(r, lz_router_op_name(op), in->name, NULL, -EPERM);
        return -EPERM;
    }
    if (in->store)
        return 0; /* --plain has nothing to refuse on an existing inode */
    int rc = inode_relpath(r, in, fhfd, path, sizeof path, &noname);
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

static int policy_new_entry_typed(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op,
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

static int policy_new_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op,
                            const char *src, bool *ret_exists) {
    return policy_new_entry_typed(r, dir, name, op, src, 0, ret_exists);
}

static int policy_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op) {
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

/* ---- symlinks the host would follow into Lazaret's own storage ----
 *
 * A symlink in the tree is never followed here, but the developer's shell,
 * editor and Git on the host do follow it: `cd link && git status` with
 * `link` pointing into the Storage Root (say a repository the agent made in
 * the State Anchor, with its own hooks) would run the agent's code. So a
 * symlink the agent makes (symlink, or moves: rename, link) is refused when
 * its target, resolved as the host would from the link's real directory,
 * is a --deny-link-target path, lies inside one, or is an ancestor of one
 * (`t -> ~/.local` then `u -> t/share/lazaret` would chain into it).
 *
 * Resolution: existing components with the host's symlinks followed, the
 * rest lexically. That judgement must stay true after later operations,
 * so a target with ".." after a name (`d/../..`) is refused: `d` may later
 * become a symlink somewhere else, and ".." would then climb from there.
 * Leading ".." climb through the real parents of the link, which change
 * only when a directory is moved: a moved directory's symlinks are checked
 * again at their new place. */

#define LT_FOLLOW_MAX 40
#define LT_WALK_MAX 50000 /* entries checked when a directory moves */
#define LT_DEPTH_MAX 128

static bool lt_within(const char *a, const char *b) {
    size_t lb = strlen(b);
    if (lb == 1 && b[0] == '/')
        return true;
    return strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/');
}

/* A volume kept under the Storage Root may link within itself. */
static bool lt_own(struct router *r, const char *p) {
    for (size_t i = 0; i < r->n_deny; i++)
        if (lt_within(r->root_path, r->deny[i]))
            return lt_within(p, r->root_path);
    return false;
}

/* Never looked at: inside a denied path (a resolution does not pass through
 * Lazaret's storage) or our own mount point (we would wait for ourselves). */
static bool lt_no_transit(struct router *r, const char *p) {
    if (r->mountpoint && lt_within(p, r->mountpoint))
        return true;
    if (lt_own(r, p))
        return false;
    for (size_t i = 0; i < r->n_deny; i++)
        if (lt_within(p, r->deny[i]))
            return true;
    return false;
}

static bool lt_denied(struct router *r, const char *p) {
    if (lt_own(r, p))
        return false;
    for (size_t i = 0; i < r->n_deny; i++)
        if (lt_within(p, r->deny[i]) || lt_within(r->deny[i], p))
            return true;
    return false;
}

/* ".." only at the start of the target (see above). */
static bool lt_shape_ok(const char *target) {
    bool named = false;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (named)
                return false;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            named = true;
        }
        p += n;
        p += strspn(p, "/");
    }
    return true;
}

static void lt_pop(char *cur) {
    char *slash = strrchr(cur, '/');
    if (slash == cur || !slash)
        cur[1] = '\0';
    else
        *slash = '\0';
}

/* Resolves `target` from directory `base` (absolute, real) as the host
 * would, into `cur` (PATH_MAX + 1 bytes). -EPERM for a resolution that
 * passes through a denied path or follows too many symlinks. */
static int lt_resolve(struct router *r, const char *base, const char *target, char *cur) {
    size_t cap = 2 * PATH_MAX + 2;
    _cleanup_free_ char *rest = lz_xmalloc(cap), *tmp = lz_xmalloc(cap);
    if (lz_snprintf(rest, cap, "%s", target) < 0)
        return -ENAMETOOLONG;
    if (target[0] == '/')
        memcpy(cur, "/", 2);
    else if (lz_snprintf(cur, PATH_MAX + 1, "%s", base) < 0)
        return -ENAMETOOLONG;
    unsigned follows = 0;
    size_t pos = 0;
    while (rest[pos]) {
        size_t n = strcspn(rest + pos, "/");
        const char *c = rest + pos;
        size_t next = pos + n + strspn(rest + pos + n, "/");
        if (n == 0 || (n == 1 && c[0] == '.')) {
            pos = next;
            continue;
        }
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            lt_pop(cur);
            pos = next;
            continue;
        }
        char cand[PATH_MAX + 1];
        if (lz_snprintf(cand, sizeof cand, "%s%s%.*s", strcmp(cur, "/") ? cur : "", "/", (int)n, c) < 0)
            return -ENAMETOOLONG;
        if (lt_no_transit(r, cand))
            return -EPERM;
        struct stat st;
        if (lstat(cand, &st) == 0 && S_ISLNK(st.st_mode)) {
            if (++follows > LT_FOLLOW_MAX)
                return -EPERM;
            char link[PATH_MAX + 1];
            ssize_t ln = readlink(cand, link, sizeof link - 1);
            if (ln < 0)
                return -errno;
            link[ln] = '\0';
            /* The link's target, then what was left after it. */
            if (lz_snprintf(tmp, cap, "%s/%s", link, rest + next) < 0)
                return -ENAMETOOLONG;
            memcpy(rest, tmp, strlen(tmp) + 1);
            pos = 0;
            if (link[0] == '/')
                memcpy(cur, "/", 2);
            continue;
        }
        /* A real entry, or none (then the rest is lexical). */
        memcpy(cur, cand, strlen(cand) + 1);
        pos = next;
    }
    return 0;
}

/* 0 if a symlink to `target` may live in directory `base`, else -EPERM
 * (logged as `op` on `name`) or another negative errno. */
static int lt_check(struct router *r, const char *op, const char *base, const char *name, const char *target) {
    if (r->n_deny == 0)
        return 0;
    char res[PATH_MAX + 1];
    int rc = lt_shape_ok(target) ? lt_resolve(r, base, target, res) : -EPERM;
    if (rc == 0 && lt_denied(r, res))
        rc = -EPERM;
    if (rc < 0)
        log_refusal(r, op, name, target, rc);
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
static int lt_check_new(struct router *r, struct rt_inode *dir, const char *name, const char *target) {
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
    return rc < 0 ? rc : lt_check(r, "symlink", base, name, target);
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
            rc = lt_check(r, "rename", base, de->d_name, target);
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
static int lt_check_move(struct router *r, int sfd, const char *name, mode_t type, struct rt_inode *todir,
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
        return lt_check(r, "rename", base, name, target);
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
        log_refusal(r, "rename (too big to check, copy instead)", name, toname, rc);
    return rc;
}

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

static int lookup_at(struct router *r, struct rt_inode *dir, const char *name, const struct rt_at *at,
                     struct fuse_entry_param *e);
static void apply_owner(struct router *r, struct rt_inode *in, int fhfd, struct stat *st);

/* drel: the path of dir when the caller has it (a listing), else NULL. */
static int do_lookup_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name,
                         struct fuse_entry_param *e) {
    struct rt_at at;
    int rc = route_at_rel(r, dir, drel, name, 0, false, true, &at);
    if (rc < 0)
        return rc;
    rc = lookup_at(r, dir, name, &at, e);
    at_done(&at);
    return rc;
}

static int do_lookup(struct router *r, struct rt_inode *dir, const char *name, struct fuse_entry_param *e) {
    return do_lookup_rel(r, dir, NULL, name, e);
}

static int lookup_at(struct router *r, struct rt_inode *dir, const char *name, const struct rt_at *at,
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
static void reply_lookup(fuse_req_t req, struct router *r, struct rt_inode *dir, const char *name) {
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

static void rt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct router *r = begin(req);
    reply_lookup(req, r, inode_of(r, parent), name);
}

static void rt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    forget_one(fuse_req_userdata(req), ino, nlookup);
    fuse_reply_none(req);
}

static void rt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
    struct router *r = fuse_req_userdata(req);
    for (size_t i = 0; i < count; i++)
        forget_one(r, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

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
static void apply_owner(struct router *r, struct rt_inode *in, int fhfd, struct stat *st) {
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
static int set_owner(struct router *r, struct rt_inode *in, int fhfd, uid_t uid, gid_t gid) {
    struct stat dummy = { .st_uid = r->uid, .st_gid = r->gid };
    apply_owner(r, in, fhfd, &dummy);
    uid_t nu = uid == (uid_t)-1 ? dummy.st_uid : uid;
    gid_t ng = gid == (gid_t)-1 ? dummy.st_gid : gid;
    if (S_ISLNK(in->type))
        return 0; /* no user xattrs on symlinks: they stay the developer's */
    char path[PATH_MAX + 64];
    _cleanup_close_ int owned = -EBADF;
    bool by_name;
    int rc = owner_path(r, in, fhfd, path, sizeof path, &owned, &by_name);
    if (rc < 0)
        return rc;
    if (nu == r->uid && ng == r->gid) {
        if ((by_name ? lremovexattr(path, OWNER_XATTR) : removexattr(path, OWNER_XATTR)) < 0 && errno != ENODATA)
            return errno == ENOTSUP ? -EPERM : -errno;
        in->own_state = 1;
        return 0;
    }
    if (r->no_xattr)
        return -EPERM;
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

static void rt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
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
static int reopen(struct router *r, struct rt_inode *in, int flags) {
    int ifd = inode_fd(r, in);
    if (ifd < 0)
        return ifd;
    char num[24];
    snprintf(num, sizeof num, "%d", ifd);
    int fd = openat(r->proc_fd, num, (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECTORY)) | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static void rt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid, struct fuse_file_info *fi) {
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

    if (valid & meta) {
        rc = policy_inode(r, in, fhfd, LZ_ROP_SETATTR);
        if (rc < 0)
            goto fail;
    }
    if ((valid & FUSE_SET_ATTR_SIZE) && in->sealed) {
        rc = -EPERM;
        goto fail;
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
        /* ftruncate on a handle opened for writing was allowed at open(). */
        int fl = fhfd >= 0 ? fcntl(fhfd, F_GETFL) : -1;
        if (fl >= 0 && (fl & O_ACCMODE) != O_RDONLY && !in->sticky)
            rc = 0;
        else
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
        mode_t mode = attr->st_mode & 07777;
        if (!S_ISDIR(in->type))
            mode &= ~(mode_t)(S_ISUID | S_ISGID); /* no set-id programs on the host */
        else
            mode &= ~(mode_t)S_ISUID;
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

static void rt_readlink(fuse_req_t req, fuse_ino_t ino) {
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

static void rt_statfs(fuse_req_t req, fuse_ino_t ino) {
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
    if (op == LZ_ROP_CREATE && !S_ISREG(mode) && !S_ISFIFO(mode))
        return -EPERM; /* devices cannot work (nodev) and sockets are not served */
    struct rt_at at;
    neg_forget(r, dir, name);
    int rc = route_at(r, dir, name, mode & S_IFMT, true, &at);
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

static void rt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
    (void)rdev;
    make_entry(req, parent, name, mode, NULL, LZ_ROP_CREATE);
}

static void rt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    make_entry(req, parent, name, S_IFDIR | (mode & 07777), NULL, LZ_ROP_MKDIR);
}

static void rt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
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
    if (S_ISDIR(in->type))
        return -EPERM;
    if (in->sticky) {
        log_refusal(r, "link", in->name, newname, -EPERM);
        return -EPERM;
    }
    int rc = inode_relpath(r, in, -1, src, sizeof src, &noname);
    if (rc < 0)
        return rc;
    if (noname)
        return -ENOENT;
    struct rt_at at;
    neg_forget(r, dir, newname);
    rc = route_at(r, dir, newname, in->type, in->store, &at);
    if (rc < 0)
        return rc;
    if (at.store != in->store) {
        at_done(&at);
        return -EXDEV; /* a link across the two backings, as across file systems */
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

static void rt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
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
            int empty = cfd >= 0 ? dir_is_empty(cfd, name) : 1;
            if (empty == 0)
                rc = -ENOTEMPTY;
            else if (empty < 0 && empty != -ENOENT && empty != -ENOTDIR)
                rc = empty;
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

static void rt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
    remove_entry(req, parent, name, LZ_ROP_UNLINK);
}

static void rt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
    remove_entry(req, parent, name, LZ_ROP_RMDIR);
}

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
    /* Its config is the developer's (read-only to the agent): it says how
     * the host's git will read the index. */
    _cleanup_close_ int gfd = lz_openat_beneath(r->root.fd, gitdir, O_PATH | O_DIRECTORY, 0, false);
    if (gfd < 0)
        return gfd;
    struct lz_error err = { 0 };
    int rc = lz_gitindex_verify_fd(fd, gfd, &err);
    if (rc == -EFBIG || rc == -EPERM || rc == -EINVAL) {
        log_refusal_why(r, "index", dpath, err.msg);
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
    if (replace && slash) {
        char gitdir[LZ_ROUTER_PATH_MAX + 1];
        size_t gl = (size_t)(slash - dpath);
        memcpy(gitdir, dpath, gl);
        gitdir[gl] = '\0';
        gfd = lz_openat_beneath(r->root.fd, gitdir, O_PATH | O_DIRECTORY, 0, false);
        if (gfd < 0)
            return gfd;
    }
    struct lz_error err = { 0 };
    int rc = lz_packedrefs_verify_fd(fd, gfd >= 0 ? gfd : -1, &err);
    if (rc == -EFBIG || rc == -EPERM || rc == -EINVAL) {
        log_refusal_why(r, "packed-refs", dpath, err.msg);
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
    if (rc == -EXDEV && log_allowed(r)) {
        fputs("lazaret-router: refused rename ", stderr);
        log_escaped(stderr, from);
        fputs(" -> ", stderr);
        log_escaped(stderr, to);
        fputs(": the hidden host entry ", stderr);
        log_escaped(stderr, bad);
        fputs(" would not be hidden at its new path (EXDEV: mv copies instead)\n", stderr);
    } else if (rc == -E2BIG || rc == -ENAMETOOLONG) {
        log_refusal(r, "rename (too big to check for hidden host files, copy instead)", from, to, rc);
        rc = -EXDEV;
    }
    return rc;
}

static void rt_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
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
    if (sa.store != da.store) {
        rc = -EXDEV;
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
        bool same = rc == 0 && back.store == sa.store;
        at_done(&back);
        if (rc < 0)
            goto fail;
        if (!same) {
            rc = -EXDEV;
            goto fail;
        }
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
        rc = plain_check(&q);
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
            if (cfd >= 0 && dir_is_empty(cfd, newname) == 0) {
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
enum { DATA_READ, DATA_WRITE, DATA_APPEND };

static struct rt_data *data_slot(struct router *r, struct rt_inode *in) {
    uintptr_t h = (uintptr_t)in;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return &r->data[(h >> 32) % RT_DATA_SLOTS];
}

static void data_close(struct rt_data *d) {
    for (int i = 0; i < 3; i++) {
        if (d->fd[i] >= 0)
            close(d->fd[i]);
        d->fd[i] = -1;
    }
    d->in = NULL;
}

static void created_close(struct router *r, struct rt_inode *in) {
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
static void created_attach(struct router *r, struct rt_inode *in, int fd, int flags) {
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
    if (in->sealed) {
        log_refusal(r, "write", in->name, NULL, -EPERM);
        return -EPERM;
    }
    if (fi->fh != 0)
        return 0;
    /* Through the handle it was created with: that handle's rule (checked
     * at create), unless it was seen under a protected name since. */
    if (in->cfd >= 0 && (in->cflags & O_ACCMODE) != O_RDONLY) {
        if (in->sticky) {
            log_refusal(r, "write", in->name, NULL, -EPERM);
            return -EPERM;
        }
        return 0;
    }
    return policy_inode(r, in, -1, LZ_ROP_WRITE);
}

static void rt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
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

static void rt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
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

static void rt_read_buf(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
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

static void rt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                         struct fuse_file_info *fi) {
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

static void rt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
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

static void rt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
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

static void rt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    struct router *r = begin(req);
    int fd = data_fd(r, inode_of(r, ino), fi, DATA_READ);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    int rc = datasync ? fdatasync(fd) : fsync(fd);
    fuse_reply_err(req, rc < 0 ? errno : 0);
}

static void rt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
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

static void rt_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi) {
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

static void rt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                               fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                               int flags) {
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

static void rt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
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

static void rt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    do_readdir(req, ino, size, off, fi, false);
}

static void rt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    do_readdir(req, ino, size, off, fi, true);
}

static void rt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
    if (d->dp)
        closedir(d->dp);
    snap_free(d);
    free(d);
    fuse_reply_err(req, 0);
}

static void rt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
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

static void rt_init(void *userdata, struct fuse_conn_info *conn) {
    struct router *r = userdata;
    r->no_open = !r->eager_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
    /* With no OPEN sent, an O_TRUNC the kernel leaves to OPEN would be lost:
     * let the kernel truncate with a SETATTR (checked like a write). */
    if (r->no_open)
        conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
    /* Host edits must be seen: no writeback cache. No export support (it
     * would bring lookups of ".." and by handle). No ACLs, no kill-priv
     * offload (set-id bits are stripped here anyway), no cached symlinks. */
    conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_POSIX_ACL |
                              FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_CACHE_SYMLINKS);
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
        conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_READ)
        conn->want |= FUSE_CAP_SPLICE_READ;
}

static const struct fuse_lowlevel_ops rt_ops = {
    .init = rt_init,
    .lookup = rt_lookup,
    .forget = rt_forget,
    .forget_multi = rt_forget_multi,
    .getattr = rt_getattr,
    .setattr = rt_setattr,
    .readlink = rt_readlink,
    .mknod = rt_mknod,
    .mkdir = rt_mkdir,
    .symlink = rt_symlink,
    .link = rt_link,
    .unlink = rt_unlink,
    .rmdir = rt_rmdir,
    .rename = rt_rename,
    .open = rt_open,
    .create = rt_create,
    .read = rt_read_buf,
    .write_buf = rt_write_buf,
    .flush = rt_flush,
    .release = rt_release,
    .fsync = rt_fsync,
    .opendir = rt_opendir,
    .readdir = rt_readdir,
    .readdirplus = rt_readdirplus,
    .releasedir = rt_releasedir,
    .fsyncdir = rt_fsyncdir,
    .statfs = rt_statfs,
    .fallocate = rt_fallocate,
    .lseek = rt_lseek,
    .copy_file_range = rt_copy_file_range,
    /* No xattr, ioctl, lock or access handlers: the kernel gets ENOSYS once
     * and then answers EOPNOTSUPP (xattrs) or handles locks locally. */
};

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
 * it: refused (ESTALE). No negative entries are ever cached.
 *
 * What inotify does not report stays stale for at most watch_timeout:
 * writes through a shared mmap, a change made through another hard link
 * in a directory the kernel never looked up. A lost queue (IN_Q_OVERFLOW)
 * invalidates everything the router knows. Directories without a watch
 * (the user's inotify limit reached) get --cache-timeout (default 0).
 *
 * The thread never touches the session's request path: the notifications
 * are written to /dev/fuse from the thread, holding no lock the main loop
 * needs (the kernel may wait for a request in flight before it can
 * invalidate; that request is answered by the main thread meanwhile). */

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

/* `*last_dir`: the directory whose attributes this batch of events last
 * dropped (a storm of creates in one directory needs it once). */
static void handle_event(struct router *r, const struct inotify_event *ev, fuse_ino_t *last_dir) {
    if (ev->mask & IN_Q_OVERFLOW) {
        inval_everything(r);
        *last_dir = 0;
        return;
    }
    struct rt_inval v = { 0 };
    const char *name = ev->len ? ev->name : NULL;
    pthread_mutex_lock(&r->lock);
    struct rt_inode *dir = windex_find(r, ev->wd);
    if (dir) {
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
    if (!dir || (ev->mask & IN_IGNORED))
        return;
    if (v.attr_only && !v.parent && v.node == *last_dir)
        return;
    *last_dir = v.attr_only && !v.parent ? v.node : 0;
    v.name = (char *)name;
    send_inval(r, &v);
}

static void *watch_main(void *arg) {
    struct router *r = arg;
    _Alignas(struct inotify_event) char buf[65536];
    for (;;) {
        struct pollfd p[2] = { { .fd = r->ino_fd, .events = POLLIN }, { .fd = r->stop_fd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
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
    }
    return NULL;
}

/* ---- process ---- */

static void usage(FILE *f) {
    fputs("usage: lazaret-router --source DIR --mountpoint MP [--ready-fd N]\n"
          "                      [--protect REL]... [--cache-timeout SECONDS]\n"
          "                      [--watch SECONDS] [--max-held-fds N] [--allow-other] [--quiet]\n"
          "                      [--eager-open]\n"
          "                      [--plain] [--deny-link-target ABS]...\n"
          "                      [--ignored-state DIR [--git-home DIR] [--git-xdg-config DIR]\n"
          "                       [--no-ignore-rules] [--host-tool NAME]...]\n",
          f);
}

static int parse_fd(const char *s, int *ret_fd) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX)
        return -EINVAL;
    *ret_fd = (int)v;
    return 0;
}

/* 1 if `a` is `b` or below it (both canonical absolute paths). */
static bool path_within(const char *a, const char *b) {
    size_t lb = strlen(b);
    if (lb == 1 && b[0] == '/')
        return true;
    return strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/');
}

struct rt_ignored_opts {
    const char *state, *home, *xdg;
    bool no_rules;     /* --no-ignore-rules: the store for host tools only */
    char **host_tools; /* --host-tool */
    size_t n_host_tools;
};

/* --ignored-state: routing of git-ignored untracked paths (ignore.h). */
/* The checks of --ignored-state that need no repository: *ret_sfd is the
 * store's fd, or -1 when routing is off. */
static int setup_ignored_check(struct router *r, const struct rt_ignored_opts *o, int *ret_sfd, struct lz_error *err) {
    *ret_sfd = -1;
    if (!o->state || r->plain)
        return 0;
    _cleanup_close_ int sfd = open(o->state, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return lz_error_set(err, -errno, "cannot open the Ignored Workspace State %s: %s", o->state, strerror(errno));
    char abs[PATH_MAX + 1];
    int rc = read_fd_path(r, sfd, abs, sizeof abs);
    if (rc < 0)
        return lz_error_set(err, rc, "cannot resolve %s: %s", o->state, strerror(-rc));
    if (path_within(abs, r->root_path) || path_within(r->root_path, abs))
        return lz_error_set(err, -EINVAL,
                            "the Ignored Workspace State %s and the workspace %s must not contain each other", abs,
                            r->root_path);
    *ret_sfd = TAKE_FD(sfd);
    return 0;
}

/* The repository, its index and rules (libgit2): a tenth to a quarter of a
 * second for a large repository, so it runs on a thread while the mount is
 * made and readiness reported (runsc boots meanwhile); the session loop
 * starts only once it is done. */
struct ignored_job {
    struct router *r;
    const struct rt_ignored_opts *o;
    int sfd;
    int rc;
    struct lz_error err;
};

static void *ignored_open_main(void *p) {
    struct ignored_job *j = p;
    struct router *r = j->r;
    if (!j->o->no_rules)
        j->rc = rt_ignore_open(&r->ig, r->root_path, j->sfd, j->o->home, j->o->xdg, &j->err);
    if (j->rc == 0 && !r->ig && j->o->n_host_tools)
        j->rc = rt_ignore_open_store(&r->ig, j->sfd, &j->err);
    if (j->rc < 0 || !r->ig)
        return NULL;
    if (j->o->n_host_tools)
        r->ht = rt_ht_new(j->o->host_tools, j->o->n_host_tools, j->sfd);
    char abs[PATH_MAX + 1];
    int rc = read_fd_path(r, rt_ignore_store_fd(r->ig), abs, sizeof abs);
    if (rc < 0) {
        j->rc = lz_error_set(&j->err, rc, "cannot resolve the Ignored Workspace State: %s", strerror(-rc));
        return NULL;
    }
    r->store_path = lz_xstrdup(abs);
    r->store_len = strlen(abs);
    return NULL;
}

static int setup_router(struct router *r, const char *source, const char *mountpoint, struct lz_error *err) {
    r->root.fd = open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->root.fd < 0)
        return lz_error_set(err, -errno, "cannot open source %s: %s", source, strerror(errno));
    struct stat st;
    if (fstat(r->root.fd, &st) < 0)
        return lz_error_set(err, -errno, "cannot stat source %s: %s", source, strerror(errno));
    r->root.dev = st.st_dev;
    r->root.ino = st.st_ino;
    r->root.type = S_IFDIR;
    r->root.is_root = true;
    r->proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->proc_fd < 0)
        return lz_error_set(err, -errno, "cannot open /proc/self/fd: %s", strerror(errno));
    int rc = refresh_root_path(r);
    if (rc < 0)
        return lz_error_set(err, rc, "cannot resolve the path of %s: %s", source, strerror(-rc));

    _cleanup_free_ char *mp = realpath(mountpoint, NULL);
    if (!mp)
        return lz_error_set(err, -errno, "cannot resolve mountpoint %s: %s", mountpoint, strerror(errno));
    if (path_within(mp, r->root_path) || path_within(r->root_path, mp))
        return lz_error_set(err, -EINVAL, "mountpoint %s and source %s must not contain each other", mp, r->root_path);
    r->mountpoint = TAKE_PTR(mp);

    /* On a case-folding directory `.git/CONFIG` is `.git/config` under
     * Unicode folding rules this policy does not implement: refuse. The
     * agent cannot set the flag (no ioctls are served). */
    _cleanup_close_ int dfd = openat(r->root.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int flags = 0;
    if (dfd >= 0 && ioctl(dfd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_CASEFOLD_FL))
        return lz_error_set(err, -EINVAL, "%s is a case-folding directory: not supported", r->root_path);

    r->nbuckets = 1024;
    r->buckets = lz_xcalloc(r->nbuckets, sizeof *r->buckets);
    table_insert(r, &r->root);
    if (r->watch) {
        r->ino_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->ino_fd < 0 || r->stop_fd < 0)
            return lz_error_set(err, -errno, "cannot watch %s (inotify): %s; run without --watch", r->root_path,
                                strerror(errno));
        watch_dir(r, &r->root);
    }
    r->uid = geteuid();
    r->gid = getegid();
    r->fs.has_entry = fs_has_entry;
    r->fs.ctx = r;
    r->pol.fs = &r->fs;
    r->pol.protect = (const char *const *)r->protect;
    r->pol.n_protect = r->n_protect;
    return 0;
}

static void free_record(struct rt_inode *in) {
    if (in->fd >= 0)
        close(in->fd);
    free(in->name);
    free(in);
}

static void teardown_router(struct router *r) {
    for (size_t i = 0; r->buckets && i < r->nbuckets; i++) {
        for (struct rt_inode *in = r->buckets[i], *next; in; in = next) {
            next = in->hnext;
            if (!in->is_root)
                free_record(in);
        }
    }
    for (struct rt_inode *in = r->retired, *next; in; in = next) {
        next = in->hnext;
        free_record(in);
    }
    free(r->buckets);
    free(r->cbuckets);
    free(r->wbuckets);
    if (r->ino_fd >= 0)
        close(r->ino_fd);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    if (r->root.fd >= 0)
        close(r->root.fd);
    if (r->proc_fd >= 0)
        close(r->proc_fd);
    free(r->root_path);
    rt_ignore_free(r->ig);
    rt_ht_free(r->ht);
    free(r->store_path);
    for (size_t i = 0; i < r->n_protect; i++)
        free(r->protect[i]);
    free(r->protect);
    for (size_t i = 0; i < r->n_deny; i++)
        free(r->deny[i]);
    free(r->deny);
    free(r->mountpoint);
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        { "source", required_argument, NULL, 's' },
        { "mountpoint", required_argument, NULL, 'm' },
        { "ready-fd", required_argument, NULL, 'r' },
        { "protect", required_argument, NULL, 'p' },
        { "cache-timeout", required_argument, NULL, 't' },
        { "watch", required_argument, NULL, 'w' },
        { "test-no-invalidate", no_argument, NULL, 'N' },
        { "eager-open", no_argument, NULL, 'E' },
        { "max-held-fds", required_argument, NULL, 'f' },
        { "allow-other", no_argument, NULL, 'a' },
        { "quiet", no_argument, NULL, 'q' },
        { "plain", no_argument, NULL, 'P' },
        { "deny-link-target", required_argument, NULL, 'd' },
        { "ignored-state", required_argument, NULL, 'I' },
        { "git-home", required_argument, NULL, 'H' },
        { "git-xdg-config", required_argument, NULL, 'X' },
        { "host-tool", required_argument, NULL, 'T' },
        { "no-ignore-rules", no_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct router r = {
        .root.fd = -EBADF,
        .root.wd = -1,
        .root.cfd = -1,
        .proc_fd = -EBADF,
        .ino_fd = -EBADF,
        .stop_fd = -EBADF,
        .lock = PTHREAD_MUTEX_INITIALIZER,
    };
    pthread_t watcher;
    bool watching = false;
    const char *source = NULL, *mountpoint = NULL;
    int ready_fd = -1, c, ret = 1;
    bool allow_other = false;
    struct lz_error err = { 0 };
    struct rt_ignored_opts ign = { 0 };

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': source = optarg; break;
        case 'm': mountpoint = optarg; break;
        case 'r':
            if (parse_fd(optarg, &ready_fd) < 0 || fcntl(ready_fd, F_GETFD) < 0) {
                fprintf(stderr, "lazaret-router: --ready-fd %s is not an open file descriptor\n", optarg);
                return 2;
            }
            break;
        case 'p': {
            char *p;
            if (lz_router_normalize(optarg, &p) < 0) {
                fprintf(stderr, "lazaret-router: --protect %s: not a relative path inside the source\n", optarg);
                return 2;
            }
            r.protect = lz_xrealloc(r.protect, (r.n_protect + 1) * sizeof *r.protect);
            r.protect[r.n_protect++] = p;
            break;
        }
        case 't': {
            char *end;
            errno = 0;
            r.timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(r.timeout >= 0.0 && r.timeout <= 60.0)) {
                fprintf(stderr, "lazaret-router: --cache-timeout %s: want seconds between 0 and 60\n", optarg);
                return 2;
            }
            break;
        }
        case 'w': {
            char *end;
            errno = 0;
            r.watch_timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(r.watch_timeout >= 0.0 && r.watch_timeout <= 3600.0)) {
                fprintf(stderr, "lazaret-router: --watch %s: want seconds between 0 and 3600\n", optarg);
                return 2;
            }
            r.watch = true;
            break;
        }
        /* Tests only: shows that without the invalidation host edits are
         * not seen (the positive control of the freshness test). */
        case 'N': r.no_inval = true; break;
        /* An OPEN and a RELEASE for every file opened (the router before
         * zero-message opens; benchmarks compare the two). */
        case 'E': r.eager_open = true; break;
        case 'f': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 8 || v > (1ul << 24)) {
                fprintf(stderr, "lazaret-router: --max-held-fds %s: want a number from 8 on\n", optarg);
                return 2;
            }
            r.max_held = v;
            break;
        }
        case 'a': allow_other = true; break;
        case 'P': r.plain = true; break;
        case 'd': {
            /* Canonical when it exists, so that it compares with resolved
             * paths; else as given (it may be made later). */
            char *p = realpath(optarg, NULL);
            if (optarg[0] != '/' || r.n_deny >= 64) {
                free(p);
                fprintf(stderr, "lazaret-router: --deny-link-target %s: want an absolute path (at most 64)\n", optarg);
                return 2;
            }
            r.deny = lz_xrealloc(r.deny, (r.n_deny + 1) * sizeof *r.deny);
            if (!p) {
                p = lz_xstrdup(optarg);
                for (size_t l = strlen(p); l > 1 && p[l - 1] == '/'; l--)
                    p[l - 1] = '\0';
            }
            r.deny[r.n_deny++] = p;
            break;
        }
        case 'q': r.quiet = true; break;
        case 'I': ign.state = optarg; break;
        case 'H': ign.home = optarg; break;
        case 'X': ign.xdg = optarg; break;
        case 'R': ign.no_rules = true; break;
        case 'T':
            if (ign.n_host_tools >= LZ_HOSTTOOLS_MAX || lz_hosttools_name_invalid(optarg)) {
                fprintf(stderr, "lazaret-router: --host-tool %s: not a name, or more than %d\n", optarg,
                        LZ_HOSTTOOLS_MAX);
                return 2;
            }
            ign.host_tools = lz_xrealloc(ign.host_tools, (ign.n_host_tools + 1) * sizeof *ign.host_tools);
            ign.host_tools[ign.n_host_tools++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!source || !mountpoint || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (ready_fd >= 0)
        (void)fcntl(ready_fd, F_SETFD, FD_CLOEXEC);

    /* Modes come from the kernel with the caller's umask applied already. */
    umask(0);
    /* No real handle may be 0 (handle 0 is a zero-message open): keep the
     * standard fds open. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR | O_CLOEXEC) < 0)
            return 1;
    for (size_t i = 0; i < RT_DATA_SLOTS; i++)
        r.data[i].fd[0] = r.data[i].fd[1] = r.data[i].fd[2] = -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "lazaret-router: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
        return 1;
    }
    /* One O_PATH fd per inode the kernel holds. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Half for held inode fds, the rest for open files and directories. */
    if (r.max_held == 0)
        r.max_held = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 > 64
            ? (size_t)(rl.rlim_cur / 2)
            : 512;

    struct ignored_job ij = { .r = &r, .o = &ign, .sfd = -1 };
    pthread_t ignored;
    bool ignoring = false;
    if (setup_router(&r, source, mountpoint, &err) < 0 || setup_ignored_check(&r, &ign, &ij.sfd, &err) < 0) {
        fprintf(stderr, "lazaret-router: %s\n", err.msg);
        teardown_router(&r);
        return 1;
    }
    if (ij.sfd >= 0) {
        int prc = lz_thread_start_blocked(&ignored, ignored_open_main, &ij);
        if (prc != 0) {
            fprintf(stderr, "lazaret-router: cannot start reading the repository: %s\n", strerror(prc));
            close(ij.sfd);
            teardown_router(&r);
            return 1;
        }
        ignoring = true;
    }

    char *fargv[] = { argv[0], (char *)"-o",
                      allow_other ? (char *)"fsname=lazaret-router,subtype=lazaret,allow_other"
                                  : (char *)"fsname=lazaret-router,subtype=lazaret",
                      NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &rt_ops, sizeof rt_ops, &r);
    if (!se) {
        fprintf(stderr, "lazaret-router: cannot create the FUSE session\n");
        goto out;
    }
    if (fuse_set_signal_handlers(se) != 0) {
        fprintf(stderr, "lazaret-router: cannot install signal handlers\n");
        goto out_session;
    }
    if (fuse_session_mount(se, mountpoint) != 0) {
        fprintf(stderr, "lazaret-router: cannot mount on %s\n", mountpoint);
        goto out_signals;
    }
    r.se = se;
    if (r.watch) {
        /* Signals (SIGTERM ends the session loop) go to the main thread. */
        int prc = lz_thread_start_blocked(&watcher, watch_main, &r);
        if (prc != 0) {
            fprintf(stderr, "lazaret-router: cannot start the watcher: %s\n", strerror(prc));
            goto out_unmount;
        }
        watching = true;
    }
    if (ready_fd >= 0) {
        int rc = lz_ready_write(ready_fd, LZ_READY_OK, NULL);
        close(ready_fd);
        ready_fd = -1;
        if (rc < 0) {
            fprintf(stderr, "lazaret-router: cannot report readiness: %s\n", strerror(-rc));
            goto out_unmount;
        }
    }

    if (ignoring) {
        pthread_join(ignored, NULL);
        ignoring = false;
        close(ij.sfd);
        ij.sfd = -1;
        if (ij.rc < 0) {
            fprintf(stderr, "lazaret-router: %s\n", ij.err.msg);
            goto out_unmount;
        }
    }
    int rc = fuse_session_loop(se);
    /* 0 when unmounted, a signal number after SIGTERM/SIGINT/SIGHUP. */
    ret = rc < 0 ? 1 : 0;
    if (rc < 0)
        fprintf(stderr, "lazaret-router: session loop failed: %s\n", strerror(-rc));

out_unmount:
    if (watching) {
        uint64_t one = 1;
        if (write(r.stop_fd, &one, sizeof one) == (ssize_t)sizeof one)
            pthread_join(watcher, NULL);
        else
            pthread_detach(watcher);
    }
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
out:
    if (ignoring)
        pthread_join(ignored, NULL);
    if (ij.sfd >= 0)
        close(ij.sfd);
    fuse_opt_free_args(&args);
    if (ready_fd >= 0)
        close(ready_fd);
    teardown_router(&r);
    free(ign.host_tools);
    return ret;
}
