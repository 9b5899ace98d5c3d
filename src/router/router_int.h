/* router_int.h — what the files of lazaret-router share (internal).
 *
 *   lazaret-router --source DIR --mountpoint MP [--ready-fd N]
 *                  [--protect REL]... [--cache-timeout SECONDS]
 *                  [--watch SECONDS [--notify-fd N]] [--max-held-fds N] [--allow-other] [--quiet]
 *                  [--plain] [--deny-link-target ABS]...
 *                  [--refusal-fd N [--refusal-tag T]]
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
 * --linked-worktree NAME serves the common Git directory of a linked
 * worktree (the source is that directory, NAME the worktree's id under
 * worktrees/) to that worktree's Domain, with the Git policy in its
 * linked-worktree mode (router.h, lz_router_policy.worktree).
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
 * --quiet, and with --refusal-fd N [--refusal-tag T] each is also sent as
 * one record to the Host Coordinator (refusal.h: `lazaret events`, the
 * sessions' notices), without ever waiting for it.
 *
 * The files, each using only those above it (no file calls one below it):
 *   log.c      the refusal log (escaped, rate-limited) and records (--refusal-fd)
 *   paths.c    a name from the kernel checked; a directory's relative path
 *   table.c    the inode table, held fds (LRU), negative entries, data fds
 *   backing.c  which backing serves a name; asking the policy
 *   links.c    --deny-link-target: link targets resolved as the host would
 *   owners.c   the sandbox-side owner (user.lazaret.owner)
 *   lookup.c   lookup, forget, getattr, setattr, readlink, statfs
 *   names.c    mknod, mkdir, symlink, link, unlink, rmdir, rename
 *   files.c    open, create, read, write and the other file operations
 *   dirs.c     opendir, readdir(plus), releasedir, fsyncdir
 *   watch.c    --watch: the inotify thread and its invalidations; with
 *              --notify-fd, the changed paths told to the sandbox's init
 *   setup.c    the router's state set up and torn down
 *   main.c     options, the FUSE session, the operations table
 *
 * Every allow/deny decision is a pure function of src/lib/router.h
 * (unit-tested, fuzzed); these files gather the facts it needs from the
 * real tree, ask it, and act.
 */
#pragma once

#define FUSE_USE_VERSION 312

#include "gitindex.h"
#include "hidden.h"
#include "hosttools.h"
#include "hotnotify.h"
#include "htseed.h"
#include "gitrefs.h"
#include "ignore.h"
#include "refusal.h"
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
#include <sys/socket.h>
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
#define RT_SELF_SLOTS 1024

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
    char *worktree;   /* --linked-worktree NAME, or NULL */
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
    /* --notify-fd: the hot-reload channel's write end (hotnotify.h),
     * non-blocking, and the paths not yet written to it: the watcher
     * thread's alone. -EBADF without it or once its reader is gone. */
    int hot_fd;
    struct lz_hot_queue *hotq;
    unsigned long n_hot; /* records written (watcher thread only) */
    /* The sandbox's own changes (watch.c, "the sandbox's own changes"):
     * (directory, name hash, when) of the names the router itself is
     * changing, under `lock`; `hot` is set once before the session. */
    bool hot;
    struct rt_self {
        const struct rt_inode *dir; /* compared, never followed */
        uint64_t hash;
        long ms;
    } self[RT_SELF_SLOTS];
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
    /* --refusal-fd: one record per refusal to the Host Coordinator
     * (refusal.h), never waited for; -1 without. */
    int ref_fd;
    uint8_t ref_tag;
    uint32_t ref_dropped; /* records not sent since the last one that was */
};

/* --ignored-state and its companions, as given (setup.c). */
struct rt_ignored_opts {
    const char *state, *home, *xdg;
    bool no_rules;     /* --no-ignore-rules: the store for host tools only */
    char **host_tools; /* --host-tool */
    size_t n_host_tools;
};

/* The repository read on a thread while the mount is made (setup.c,
 * ignored_open_main). */
struct ignored_job {
    struct router *r;
    const struct rt_ignored_opts *o;
    int sfd;
    int rc;
    struct lz_error err;
};

/* Where entry `name` of `dir` lives: the backing that serves it and that
 * backing's fd of `dir`. */
struct rt_at {
    int fd;
    int owned; /* closed by at_done() */
    bool store;
    bool on_host; /* hst is the host's entry of that name (looked at while routing) */
    struct stat hst;
};

enum { DATA_READ, DATA_WRITE, DATA_APPEND }; /* the data fds of an inode (files.c) */

/* log.c */
void log_escaped(FILE *f, const char *s);
bool log_allowed(struct router *r);
void log_refusal(struct router *r, const char *op, const char *path, const char *path2, int err);
void refused(struct router *r, uint8_t why, uint8_t op, const char *path, const char *path2, int err,
             const char *detail);

/* paths.c */
int name_valid(const char *name);
int read_fd_path(struct router *r, int fd, char *buf, size_t size);
int refresh_root_path(struct router *r);
int dir_relpath(struct router *r, int fd, char *out, size_t size);
int join_path(char *out, size_t size, const char *dir, const char *name);

/* table.c */
struct rt_inode *table_find(struct router *r, dev_t dev, ino_t ino);
void table_insert(struct router *r, struct rt_inode *in);
void table_retire(struct router *r, struct rt_inode *in);
struct rt_inode *cindex_find(struct router *r, const struct rt_inode *dir, const char *name);
struct rt_inode *windex_find(struct router *r, int wd);
void windex_remove(struct router *r, struct rt_inode *in);
void watch_dir(struct router *r, struct rt_inode *in);
double timeout_for_dir(struct router *r, const struct rt_inode *dir);
bool neg_take_locked(struct router *r, const struct rt_inode *dir, const char *name);
double neg_record(struct router *r, const struct rt_inode *dir, const char *name);
void neg_forget(struct router *r, const struct rt_inode *dir, const char *name);
double attr_timeout_of(struct router *r, const struct rt_inode *in);
void lru_add(struct router *r, struct rt_inode *in);
struct router *begin(fuse_req_t req);
struct rt_inode *inode_of(struct router *r, fuse_ino_t ino);
fuse_ino_t node_id(struct rt_inode *in);
int inode_fd(struct router *r, struct rt_inode *in);
void inode_set_name(struct router *r, struct rt_inode *in, struct rt_inode *dir, const char *name);
void forget_one(struct router *r, fuse_ino_t ino, uint64_t n);
int fh_fd(struct rt_inode *in, struct fuse_file_info *fi);
int store_dir(struct router *r, struct rt_inode *dir, bool create);
int holder_fd(struct router *r, struct rt_inode *in, int *owned);
struct rt_data *data_slot(struct router *r, struct rt_inode *in);
void data_close(struct rt_data *d);
void created_close(struct router *r, struct rt_inode *in);
void created_attach(struct router *r, struct rt_inode *in, int fd, int flags);

/* backing.c */
int entry_relpath(struct router *r, struct rt_inode *dir, const char *name, char *out, size_t size);
int route_of(struct router *r, int hfd, const char *drel, const char *name, const char *rel, bool is_dir,
             const struct stat *hst);
void at_done(struct rt_at *at);
int route_at_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name, mode_t type, bool create,
                 bool lookup, struct rt_at *at);
int route_at(struct router *r, struct rt_inode *dir, const char *name, mode_t type, bool create, struct rt_at *at);
int store_check(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op, int sfd,
                bool *ret_exists);
int dir_is_empty(int dfd, const char *name);
void rules_will_change(struct router *r, struct rt_inode *dir, const char *name);
void rules_changed(struct router *r, struct rt_inode *dir, const char *name);
void inode_rules_will_change(struct router *r, struct rt_inode *in);
void inode_rules_changed(struct router *r, struct rt_inode *in);
int inode_relpath(struct router *r, struct rt_inode *in, int fhfd, char *out, size_t size, bool *ret_noname);
int fs_has_entry(void *ctx, const char *dir, const char *name);
int policy(struct router *r, const struct lz_router_req *q);
int policy_inode(struct router *r, struct rt_inode *in, int fhfd, enum lz_router_op op);
int policy_new_entry_typed(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op,
                           const char *src, unsigned type, bool *ret_exists);
int policy_new_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op, const char *src,
                     bool *ret_exists);
int policy_entry(struct router *r, struct rt_inode *dir, const char *name, enum lz_router_op op);

/* links.c */
int lt_check_new(struct router *r, struct rt_inode *dir, const char *name, const char *target);
int lt_check_move(struct router *r, int sfd, const char *name, mode_t type, struct rt_inode *todir, const char *toname);

/* owners.c */
void apply_owner(struct router *r, struct rt_inode *in, int fhfd, struct stat *st);
int set_owner(struct router *r, struct rt_inode *in, int fhfd, uid_t uid, gid_t gid);

/* lookup.c */
int do_lookup_rel(struct router *r, struct rt_inode *dir, const char *drel, const char *name,
                  struct fuse_entry_param *e);
int do_lookup(struct router *r, struct rt_inode *dir, const char *name, struct fuse_entry_param *e);
int lookup_at(struct router *r, struct rt_inode *dir, const char *name, const struct rt_at *at,
              struct fuse_entry_param *e);
void reply_lookup(fuse_req_t req, struct router *r, struct rt_inode *dir, const char *name);
void rt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void rt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void rt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void rt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
int reopen(struct router *r, struct rt_inode *in, int flags);
bool setattr_is_poke(const struct stat *attr, int valid);
void rt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid, struct fuse_file_info *fi);
void rt_readlink(fuse_req_t req, fuse_ino_t ino);
void rt_statfs(fuse_req_t req, fuse_ino_t ino);

/* names.c */
void rt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void rt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void rt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void rt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void rt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void rt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void rt_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
               unsigned int flags);

/* files.c */
void rt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi);
void rt_read_buf(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void rt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off, struct fuse_file_info *fi);
void rt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void rt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi);
void rt_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void rt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                        fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags);

/* dirs.c */
void rt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void rt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void rt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* watch.c */
void *watch_main(void *arg);
void hot_wrap_ops(struct fuse_lowlevel_ops *ops);

/* uring.c: the FUSE transport. AUTO: FUSE over io_uring when the kernel
 * offers it, else /dev/fuse; CLASSIC: /dev/fuse always; PINNED: /dev/fuse,
 * its one thread pinned to the CPU it starts on (the cheap lever measured
 * against io_uring; docs/notes/2026-12-05-router-transport.md). */
enum rt_transport_mode { RT_TRANSPORT_AUTO, RT_TRANSPORT_CLASSIC, RT_TRANSPORT_PINNED };
/* conn->max_write with io_uring (rt_init), and so the payload of each
 * ring entry, which holds a whole WRITE. */
#define RT_URING_MAX_WRITE (128 << 10)
/* After fuse_session_mount: the session's I/O through the transport. */
int rt_transport_setup(struct router *r, struct fuse_session *se, enum rt_transport_mode mode);
/* Serves INIT (queued by the mount) and, with io_uring agreed, waits for
 * the queues' registration, all bounded; desc: what the router got
 * ("io_uring, 2 queues", "/dev/fuse (...)"). 0 or negative errno. */
int rt_transport_init(char *desc, size_t len);
/* Whether the INIT reply will agree to io_uring (rt_init: smaller writes,
 * no splice, since replies go into the ring's entries). */
bool rt_transport_uring_wanted(void);
/* The session loop on /dev/fuse (with io_uring: FORGET, INTERRUPT, the
 * end); 0 at unmount or a signal, else negative errno. */
int rt_transport_loop(void);
/* Ends the queue threads (bounded) and frees the rings. */
void rt_uring_stop(void);
/* Ring entries refused for lengths that disagree. */
unsigned long rt_transport_bad(void);
/* Tests (--test-break-commit N): the Nth reply under io_uring is committed
 * with a commit ID the kernel does not know, as a kernel that lost an
 * entry would answer; the router must end its session, not hang. */
void rt_transport_test_break_commit(unsigned long n);

/* setup.c */
int setup_ignored_check(struct router *r, const struct rt_ignored_opts *o, int *ret_sfd, struct lz_error *err);
void *ignored_open_main(void *p);
int setup_router(struct router *r, const char *source, const char *mountpoint, struct lz_error *err);
void teardown_router(struct router *r);
