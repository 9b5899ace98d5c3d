/* domains_reset.c — `lazaret state reset`: a new, empty State Anchor in
 * place of the old one, crash-safely (the steps are in domains.h), and the
 * deletion of trees that the Domain's subordinate IDs own. */
#include "control.h"
#include "domains_int.h"
#include "idmap.h"
#include "paths.h"
#include "spawn.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

/* The deletion inside the Domain's user namespace. */
#define RM_CHILD_TIMEOUT_MS (30 * 60 * 1000)

/* ---- deletion in the Domain's user namespace ---- */

/* Deletes dirfd/name as root of a new user namespace with the mapping the
 * Domain's sandbox had (the caller's ID as 0, its subordinate range from
 * 1): files a non-root sandbox user left are then ours to delete, and
 * nothing else is. Only with a subordinate range (without one, every
 * file is the caller's own already). */
static int rm_tree_userns(int dirfd, const char *name, struct lz_error *err) {
    _cleanup_free_ char *self = NULL;
    int r = lz_self_exe(&self);
    if (r < 0)
        return lz_error_errno(err, r, "cannot find the lazaret binary");
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", dirfd);
    char *argv[] = { self, (char *)"state", (char *)"__rm-tree", fdstr, (char *)name, NULL };
    int keep[] = { dirfd };
    struct lz_spawn_opts o = { .path = self,
                               .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = -1,
                               .stderr_fd = 2,
                               .keep_fds = keep,
                               .n_keep_fds = 1,
                               .clone_flags = CLONE_NEWUSER,
                               .setns_pidfd = -1,
                               .barrier = true,
                               .pdeathsig = SIGKILL };
    struct lz_child ch;
    if ((r = lz_spawn(&o, &ch)) < 0)
        return lz_error_errno(err, r, "cannot create a user namespace");
    int st = 0;
    /* The child waits at its barrier: the PID still names it. */
    r = lz_idmap_write(ch.pid, err);
    if (r >= 0 && (r = lz_child_release(&ch)) < 0)
        lz_error_errno(err, r, "cannot start the deletion helper");
    if (r < 0) {
        lz_child_signal(&ch, SIGKILL);
        lz_child_wait(&ch, -1, &st);
        lz_child_close(&ch);
        return r;
    }
    if (lz_child_wait(&ch, RM_CHILD_TIMEOUT_MS, &st) < 0) {
        lz_child_signal(&ch, SIGKILL);
        lz_child_wait(&ch, -1, &st);
        lz_child_close(&ch);
        return lz_error_set(err, -ETIMEDOUT, "deleting %s took longer than %d minutes", name,
                            RM_CHILD_TIMEOUT_MS / 60000);
    }
    lz_child_close(&ch);
    if (st != 0)
        return lz_error_set(err, st > 0 && st < 128 ? -st : -EIO, "cannot delete %s: %s", name,
                            st > 0 && st < 128 ? strerror(st) : "the deletion helper was killed");
    return 0;
}

int lz_domain_rm_tree_child(int dirfd, const char *name) {
    if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return -EINVAL;
    return lz_rm_rf_at(dirfd, name);
}

/* Deletes dirfd/name (a tree of the Domain Root), falling back to the
 * Domain's user namespace for content of its subordinate IDs. */
static int rm_tree(int dirfd, const char *name, struct lz_error *err) {
    int r = lz_rm_rf_at(dirfd, name);
    if ((r != -EACCES && r != -EPERM) || !lz_idmap_have_subids())
        return r < 0 ? lz_error_set(err, r, "cannot delete %s: %s", name, strerror(-r)) : 0;
    return rm_tree_userns(dirfd, name, err);
}

/* ---- reset ---- */

struct rlog {
    lz_domain_log_fn log;
    void *ud;
};

static void recovery_log(void *ud, const char *msg) {
    struct rlog *l = ud;
    if (l->log)
        l->log(l->ud, msg);
}

/* Deletes every anchor-<M> but `keep` (0: all of them). */
static int rm_other_anchors(int rootfd, int64_t keep, lz_domain_log_fn log, void *ud, struct lz_error *err) {
    char **names = NULL;
    size_t n = 0;
    int r = lz_dir_names(rootfd, SIZE_MAX, &names, &n);
    if (r < 0)
        return lz_error_errno(err, r, "cannot read the Domain Root");
    for (size_t i = 0; i < n && r == 0; i++) {
        int64_t g;
        if (!dom_anchor_name_gen(names[i], &g) || g == keep)
            continue;
        r = rm_tree(rootfd, names[i], err);
        if (r == 0)
            lz_logf(log, ud, "deleted %s, the leftover of an interrupted reset", names[i]);
    }
    lz_strv_free(names, n);
    return r;
}

/* Empties overlay/ (runsc's scratch filestore: never persistent state). */
static int empty_overlay(int rootfd, struct lz_error *err) {
    _cleanup_close_ int fd = openat(rootfd, "overlay", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : lz_error_set(err, -errno, "cannot open overlay/: %s", strerror(errno));
    char **names = NULL;
    size_t n = 0;
    int r = lz_dir_names(fd, SIZE_MAX, &names, &n);
    if (r < 0)
        return lz_error_errno(err, r, "cannot read overlay/");
    for (size_t i = 0; i < n && r == 0; i++)
        r = rm_tree(fd, names[i], err);
    lz_strv_free(names, n);
    return r < 0 ? lz_error_prefix(err, r, "overlay/") : 0;
}

static int meta_int(struct lz_store *st, const char *key, int64_t *ret, struct lz_error *err) {
    _cleanup_free_ char *v = NULL;
    int r = lz_store_meta_get(st, key, &v, err);
    if (r < 0)
        return r == -ENOENT ? lz_error_set(err, -EBADMSG, "the Domain Store has no %s", key) : r;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < 1 || x >= INT64_MAX)
        return lz_error_set(err, -EBADMSG, "the Domain Store's %s \"%.32s\" is not valid", key, v);
    *ret = x;
    return 0;
}

#define RESET_STOP_WAIT_S 30

bool lz_domain_serving(const char *id) {
    _cleanup_free_ char *rt = NULL;
    if (lz_runtime_dir(&rt, NULL) < 0)
        return false;
    _cleanup_free_ char *sock = lz_domain_socket_path(rt, id);
    json_t *st = NULL;
    if (lz_control_status(sock, &st, NULL) < 0)
        return false;
    bool lingering = json_is_true(json_object_get(st, "lingering"));
    json_decref(st);
    return !lingering;
}

/* Opens the Domain Root of `id` and takes its lock for a reset: -EBUSY
 * when it runs with a session; a stopping or lingering one is waited for.
 *
 * The lock is held by a Domain that is starting (its socket comes with
 * publication, the last step of a start), running, or stopping (its
 * coordinator removes the socket first, then lets go of the lock in a
 * moment). Looked at every 50 ms, within one bound:
 *   - no socket: starting or stopping, look again;
 *   - a socket: the coordinator decides. It stops a lingering Domain
 *     (nothing uses it; a session joining meanwhile keeps it running) and
 *     refuses while sessions are live. A coordinator that ends while it is
 *     asked (the last session's client got its exit status a moment
 *     before: `lazaret run -- X; lazaret state reset`) closes the
 *     connection; that is a stop too, so look again. */
static int reset_lock(const char *data_root, const char *id, int *ret_rootfd, int *ret_lockfd, struct lz_error *err) {
    _cleanup_close_ int rootfd = dom_open_by_id(data_root, id, err);
    if (rootfd < 0)
        return rootfd;
    _cleanup_close_ int lockfd = -EBADF;
    _cleanup_free_ char *rt = NULL, *sock = NULL;
    if (lz_runtime_dir(&rt, NULL) == 0)
        sock = lz_domain_socket_path(rt, id);
    int r = dom_lock(rootfd, &lockfd, err);
    long deadline = lz_now_ms() + RESET_STOP_WAIT_S * 1000L;
    bool stopped = false, sessions = false; /* what the coordinator answered */
    struct lz_error cerr = { 0 };           /* why it did not */
    while (r == 0 && lz_now_ms() < deadline) {
        if (!stopped && sock && access(sock, F_OK) == 0) {
            cerr = (struct lz_error){ 0 };
            int s = lz_control_stop_if_lingering(sock, &cerr);
            if (s == 0) {
                sessions = true; /* live (or starting) */
                break;
            }
            stopped = s == 1;
        }
        (void)nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
        r = dom_lock(rootfd, &lockfd, err);
    }
    if (r < 0)
        return r;
    if (r == 0 && !sessions && (stopped || !sock || access(sock, F_OK) < 0))
        return lz_error_set(err, -EBUSY,
                            "Domain %.12s is starting or stopping and still held its lock after %d s; try again", id,
                            RESET_STOP_WAIT_S);
    if (r == 0 && !sessions && cerr.msg[0])
        return lz_error_set(err, -EBUSY,
                            "Domain %.12s is running and its coordinator did not answer (%s); try again, or run "
                            "`lazaret stop --force` first",
                            id, cerr.msg);
    if (r == 0)
        return lz_error_set(err, -EBUSY,
                            "Domain %.12s is running with sessions; exit them (or run `lazaret stop`) first", id);
    *ret_rootfd = TAKE_FD(rootfd);
    *ret_lockfd = TAKE_FD(lockfd);
    return 0;
}

/* Deletes the Ignored Workspace State (`ignored/`): renamed away first, so
 * that an interruption leaves either the whole old state in place or only
 * `ignored.reset` to delete (finished by the next reset). */
static int reset_ignored(int rootfd, lz_domain_log_fn log, void *ud, struct lz_error *err) {
    struct stat st;
    int r;
    if (fstatat(rootfd, "ignored.reset", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if ((r = rm_tree(rootfd, "ignored.reset", err)) < 0)
            return r;
        lz_logf(log, ud, "finished an interrupted reset of the Ignored Workspace State");
    }
    if (fstatat(rootfd, "ignored", &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        return lz_error_set(err, -errno, "cannot look at the Ignored Workspace State: %s", strerror(errno));
    }
    if (renameat(rootfd, "ignored", rootfd, "ignored.reset") < 0 || fsync(rootfd) < 0)
        return lz_error_set(err, -errno, "cannot move the Ignored Workspace State aside: %s", strerror(errno));
    lz_crash_point("reset-ignored-moved");
    if ((r = rm_tree(rootfd, "ignored.reset", err)) < 0)
        return lz_error_prefix(err, r,
                               "the Ignored Workspace State was reset, but deleting it failed (the next "
                               "`lazaret state reset --ignored-only` retries)");
    if (fsync(rootfd) < 0)
        return lz_error_set(err, -errno, "fsync of the Domain Root: %s", strerror(errno));
    lz_logf(log, ud, "deleted the Ignored Workspace State (the next start takes the host's ignore rules as they are)");
    return 0;
}

int lz_domain_reset_ignored(const char *data_root, const char *id, lz_domain_log_fn log, void *ud,
                            struct lz_error *err) {
    _cleanup_close_ int rootfd = -EBADF, lockfd = -EBADF;
    int r = reset_lock(data_root, id, &rootfd, &lockfd, err);
    if (r < 0)
        return r;
    return reset_ignored(rootfd, log, ud, err);
}

int lz_domain_reset(const char *data_root, const char *id, lz_domain_log_fn log, void *ud, struct lz_error *err) {
    _cleanup_close_ int rootfd = -EBADF, lockfd = -EBADF;
    int r = reset_lock(data_root, id, &rootfd, &lockfd, err);
    if (r < 0)
        return r;
    if ((r = reset_ignored(rootfd, log, ud, err)) < 0)
        return r;
    _cleanup_free_ char *path = NULL;
    if ((r = dom_root_path(data_root, id, rootfd, &path, err)) < 0)
        return r;

    /* SR-11: the store must be this directory's. */
    struct lz_store_identity sid = { .domain_id = id };
    _cleanup_store_ struct lz_store *st = NULL;
    r = lz_store_open(path, &sid, false, &st, err);
    if (r == -ENOENT) {
        /* Never started: the store precedes every anchor, so any is junk. */
        if ((r = rm_other_anchors(rootfd, 0, log, ud, err)) < 0 || (r = empty_overlay(rootfd, err)) < 0)
            return r;
        lz_logf(log, ud, "no Domain Store (the Domain never started): nothing persistent to reset");
        return 0;
    }
    if (r < 0)
        return r;

    struct rlog rl = { log, ud };
    r = lz_domain_recover(st, data_root, id, recovery_log, &rl, err);
    if (r < 0)
        return lz_error_prefix(err, r, "recovery of the interrupted generation failed; nothing was reset");

    int64_t n = 0;
    if ((r = meta_int(st, "anchor_gen", &n, err)) < 0)
        return r;
    char cur[32], next[32];
    snprintf(cur, sizeof cur, "anchor-%" PRId64, n);
    snprintf(next, sizeof next, "anchor-%" PRId64, n + 1);

    /* Finish a reset that was interrupted after its commit. */
    _cleanup_free_ char *intent = NULL;
    r = lz_store_meta_get(st, "reset_intent", &intent, err);
    if (r < 0 && r != -ENOENT)
        return r;
    if (intent) {
        int64_t g;
        if (!dom_anchor_name_gen(intent, &g) || g == n)
            return lz_error_set(err, -EBADMSG,
                                "the Domain Store's reset intent \"%.64s\" does not name an old State Anchor; "
                                "refusing to delete anything (see `lazaret state verify`)",
                                intent);
        if ((r = rm_tree(rootfd, intent, err)) < 0)
            return r;
        if (fsync(rootfd) < 0)
            return lz_error_set(err, -errno, "fsync of the Domain Root: %s", strerror(errno));
        if ((r = lz_store_meta_del(st, "reset_intent", err)) < 0)
            return r;
        lz_logf(log, ud, "finished an interrupted reset: deleted %s", intent);
    }
    if ((r = rm_other_anchors(rootfd, n, log, ud, err)) < 0)
        return r;

    /* 1. The new, empty State Anchor, durable before the store names it. */
    if (mkdirat(rootfd, next, 0700) < 0)
        return lz_error_set(err, -errno, "cannot create %s: %s", next, strerror(errno));
    if (fsync(rootfd) < 0)
        return lz_error_set(err, -errno, "fsync of the Domain Root: %s", strerror(errno));
    lz_crash_point("reset-created");

    /* 2. Switch, with the intent to delete the old one, atomically. */
    char ng[24];
    snprintf(ng, sizeof ng, "%" PRId64, n + 1);
    if ((r = lz_store_begin(st, err)) < 0)
        return r;
    if ((r = lz_store_meta_set(st, "anchor_gen", ng, err)) < 0 ||
        (r = lz_store_meta_set(st, "reset_intent", cur, err)) < 0) {
        lz_store_rollback(st);
        return r;
    }
    if ((r = lz_store_commit(st, err)) < 0)
        return r;
    lz_crash_point("reset-committed");
    lz_logf(log, ud, "the Domain now uses the new, empty State Anchor %s", next);

    /* 3. The old layers. */
    if ((r = rm_tree(rootfd, cur, err)) < 0)
        return lz_error_prefix(err, r,
                               "the Domain was reset, but deleting its old State Anchor failed (the next `lazaret "
                               "state reset` retries)");
    if (fsync(rootfd) < 0)
        return lz_error_set(err, -errno, "fsync of the Domain Root: %s", strerror(errno));
    lz_crash_point("reset-deleted");
    lz_logf(log, ud, "deleted the old State Anchor %s", cur);

    /* 4. Done. */
    if ((r = lz_store_meta_del(st, "reset_intent", err)) < 0)
        return r;
    if ((r = empty_overlay(rootfd, err)) < 0)
        return r;
    return 0;
}
