/* setup.c: setting up and tearing down the router's state (the source root, the
 * mount point, the Ignored Workspace State opened on a thread).
 */
#include "router_int.h"

#include "router_link.h"
#include "router_volume.h"

/* --ignored-state: routing of git-ignored untracked paths (ignore.h). */
/* The checks of --ignored-state that need no repository: *ret_sfd is the
 * store's fd, or -1 when routing is off. */
int setup_ignored_check(struct router *r, const struct rt_ignored_opts *o, int *ret_sfd, struct lz_error *err) {
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
    if (lz_router_abs_within(abs, r->root_path) || lz_router_abs_within(r->root_path, abs))
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
void *ignored_open_main(void *p) {
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

int setup_router(struct router *r, const char *source, const char *mountpoint, struct lz_error *err) {
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
    if (lz_router_abs_within(mp, r->root_path) || lz_router_abs_within(r->root_path, mp))
        return lz_error_set(err, -EINVAL, "mountpoint %s and source %s must not contain each other", mp, r->root_path);
    r->mountpoint = TAKE_PTR(mp);

    /* On a case-folding directory `.git/CONFIG` is `.git/config` under
     * Unicode folding rules this policy does not implement: refuse. The
     * agent cannot set the flag (no ioctls are served). */
    _cleanup_close_ int dfd = openat(r->root.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int flags = 0;
    if (dfd >= 0 && ioctl(dfd, FS_IOC_GETFLAGS, &flags) == 0 && lz_router_root_flags_check(flags) < 0)
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
    r->pol.worktree = r->worktree;
    return 0;
}

static void free_record(struct rt_inode *in) {
    if (in->fd >= 0)
        close(in->fd);
    free(in->name);
    free(in);
}

void teardown_router(struct router *r) {
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
    for (size_t i = 0; i < RT_NEG_BUCKETS; i++)
        for (struct rt_neg *n = r->negs[i], *next; n; n = next) {
            next = n->next;
            free(n);
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
