/* links.c: symlinks the host would follow into Lazaret's own storage
 * (--deny-link-target): the host's view of a link target, resolved.
 */
#include "router_int.h"

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
int lt_check_new(struct router *r, struct rt_inode *dir, const char *name, const char *target) {
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
int lt_check_move(struct router *r, int sfd, const char *name, mode_t type, struct rt_inode *todir,
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
