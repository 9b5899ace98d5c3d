/* router.c — see router.h. The reasons for every rule: docs/security-git.md. */
#include "router.h"

#include "util.h"

#include <errno.h>
#include <linux/fs.h> /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A path split into components, in a private copy. */
struct split {
    char buf[LZ_ROUTER_PATH_MAX + 1];
    const char *c[LZ_ROUTER_DEPTH_MAX];
    size_t n;
};

static bool ieq(const char *a, const char *b) {
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return false;
        if (!x)
            return true;
    }
}

static bool ieq_any(const char *s, const char *const *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ieq(s, set[i]))
            return true;
    return false;
}

/* Length of `s` without one trailing ".lock" (any case), or 0 if it has
 * none or nothing would remain. */
static size_t lock_stem_len(const char *s) {
    size_t n = strlen(s);
    if (n <= 5 || !ieq(s + n - 5, ".lock"))
        return 0;
    return n - 5;
}

static bool is_gitname(const char *s) { return ieq(s, ".git"); }

/* Names directly inside a Git directory whose files Git reads as
 * configuration or runs as code (docs/security-git.md, "The rules"). */
static const char *const protected_files[] = { "config", "config.worktree", "commondir", "gitdir", "shallow" };
/* Directories inside a Git directory that are read-only as a whole.
 * rr-cache: its existence turns rerere on, and the host's git would replay
 * its recorded resolutions into the developer's next merge. */
static const char *const protected_dirs[] = { "hooks", "modules", "worktrees", "branches", "remotes", "rr-cache" };
/* What the host's git reads besides the objects and the refs it pushes when
 * it displays history (git log, diff, show, blame) or writes a checkout:
 * read-only, so that what it shows is what `git push` sends
 * (docs/security-git.md, "What the host's Git shows"). */
static const char *const display_info[] = { "grafts", "attributes", "sparse-checkout" };
static const char *const display_refs[] = { "replace", "notes" };
static const char *const display_objinfo[] = { "commit-graph", "commit-graphs" };
/* Names that make a directory look like a Git directory to Git's
 * is_git_directory(): HEAD and either commondir or objects + refs. */
static const char *const shape_names[] = { "HEAD", "objects", "refs", "commondir" };

/* Could a protection rule relative to a Git directory start with this
 * component? Only then is it worth asking whether its parent is one. */
static bool is_sensitive_top(const char *c) {
    char stem[256];
    size_t n;
    while ((n = lock_stem_len(c)) > 0 && n < sizeof stem) {
        memcpy(stem, c, n);
        stem[n] = '\0';
        c = stem;
    }
    return ieq_any(c, protected_files, LZ_ARRAY_SIZE(protected_files)) ||
        ieq_any(c, protected_dirs, LZ_ARRAY_SIZE(protected_dirs)) || ieq(c, "objects") || ieq(c, "info") ||
        ieq(c, "refs");
}

int lz_router_path_valid(const char *path) {
    if (!path)
        return -EINVAL;
    size_t len = strlen(path);
    if (len == 0)
        return 0;
    if (len > LZ_ROUTER_PATH_MAX)
        return -ENAMETOOLONG;
    const char *p = path;
    size_t depth = 0;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return -EINVAL;
        if (n > 255)
            return -ENAMETOOLONG;
        if (++depth > LZ_ROUTER_DEPTH_MAX)
            return -ENAMETOOLONG;
        if (!e)
            return 0;
        p = e + 1;
    }
}

static int split_path(const char *path, struct split *s) {
    int r = lz_router_path_valid(path);
    if (r < 0)
        return r;
    size_t len = strlen(path);
    memcpy(s->buf, path, len + 1);
    s->n = 0;
    if (len == 0)
        return 0;
    char *p = s->buf;
    for (;;) {
        s->c[s->n++] = p;
        char *e = strchr(p, '/');
        if (!e)
            return 0;
        *e = '\0';
        p = e + 1;
    }
}

/* The first n components joined with '/', into out (LZ_ROUTER_PATH_MAX+1). */
static void join_prefix(const struct split *s, size_t n, char *out) {
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(s->c[i]);
        if (i)
            out[o++] = '/';
        memcpy(out + o, s->c[i], l);
        o += l;
        out[o] = '\0';
    }
}

static int has_entry(const struct lz_router_policy *pol, const char *dir, const char *name) {
    if (!pol->fs || !pol->fs->has_entry)
        return -ENOSYS; /* a policy without a view of the tree fails closed */
    int r = pol->fs->has_entry(pol->fs->ctx, dir, name);
    return r < 0 ? r : r > 0;
}

/* 1 if the directory `dir` looks like a Git directory: HEAD plus either
 * commondir, or objects and refs (Git's is_git_directory()). */
static int shaped(const struct lz_router_policy *pol, const char *dir) {
    int r = has_entry(pol, dir, "HEAD");
    if (r <= 0)
        return r;
    r = has_entry(pol, dir, "commondir");
    if (r != 0)
        return r;
    r = has_entry(pol, dir, "objects");
    if (r <= 0)
        return r;
    return has_entry(pol, dir, "refs");
}

/* Classification of `rel`, a path relative to a Git directory. */
static enum lz_router_class classify_rel(const char *const *c, size_t n) {
    if (n == 0)
        return LZ_RCLASS_FREE;
    if (ieq_any(c[0], protected_files, LZ_ARRAY_SIZE(protected_files)))
        return LZ_RCLASS_PROTECTED;
    if (ieq_any(c[0], protected_dirs, LZ_ARRAY_SIZE(protected_dirs)))
        return LZ_RCLASS_PROTECTED;
    if (ieq(c[0], "objects")) {
        if (n == 1)
            return LZ_RCLASS_ANCESTOR;
        if (!ieq(c[1], "info"))
            return LZ_RCLASS_FREE;
        if (n == 2)
            return LZ_RCLASS_ANCESTOR;
        if (ieq(c[2], "alternates") || ieq(c[2], "http-alternates"))
            return LZ_RCLASS_PROTECTED;
        /* The commit-graph gives each commit's parents and root tree, and
         * git log/diff/checkout (and push's object walk) trust it over the
         * commit object. */
        if (ieq_any(c[2], display_objinfo, LZ_ARRAY_SIZE(display_objinfo)))
            return LZ_RCLASS_PROTECTED;
    }
    /* info/exclude holds the developer's private ignore rules, which decide
     * what the Ignored Workspace State hides (docs/ignored-state.md);
     * grafts rewrite parents, attributes turn diffs off or name drivers,
     * sparse-checkout decides what a checkout writes. info/refs (written
     * by git's update-server-info, read only by dumb HTTP) stays free. */
    if (ieq(c[0], "info")) {
        if (n == 1)
            return LZ_RCLASS_ANCESTOR;
        if (ieq(c[1], "exclude") || ieq_any(c[1], display_info, LZ_ARRAY_SIZE(display_info)))
            return LZ_RCLASS_PROTECTED;
    }
    /* refs/replace/ swaps any object for another in everything git
     * displays, never in what it pushes; refs/notes/ is shown by git log.
     * (Their lines in packed-refs are checked: lz_router_is_checked.) */
    if (ieq(c[0], "refs")) {
        if (n == 1)
            return LZ_RCLASS_ANCESTOR;
        if (ieq_any(c[1], display_refs, LZ_ARRAY_SIZE(display_refs)))
            return LZ_RCLASS_PROTECTED;
    }
    return LZ_RCLASS_FREE;
}

static enum lz_router_class cmax(enum lz_router_class a, enum lz_router_class b) { return a > b ? a : b; }

/* ---- linked-worktree mode (lz_router_policy.worktree) ----
 *
 * Git's own split (path.c, common_list): of a common Git directory, a
 * linked worktree's git writes the objects, the shared refs and their
 * logs, packed-refs (written as packed-refs.new or .lock, then renamed)
 * and gc.pid; its HEAD, index, logs/HEAD, rebase state
 * and per-worktree refs live in worktrees/<id>/. What is left at the root
 * is the main work tree's own state or configuration. */
static const char *const common_free[] = { "objects", "refs", "packed-refs", "packed-refs.new",
                                           "logs",    "info", "lost-found",  "gc.pid" };
static const char *const worktree_refs[] = { "bisect", "worktree", "rewritten" };

/* Components 0 and 1 are `worktrees/NAME` of this Domain (exactly its
 * name: a case variant is another directory to a case-sensitive host). */
static bool own_worktree(const struct lz_router_policy *pol, const char *const *c, size_t n) {
    return pol->worktree && n >= 2 && ieq(c[0], "worktrees") && strcmp(c[1], pol->worktree) == 0;
}

/* Classification of a path of the common Git directory (the root). */
static enum lz_router_class classify_common(const struct lz_router_policy *pol, const char *const *c, size_t n) {
    if (n == 0)
        return LZ_RCLASS_ANCESTOR;
    if (ieq(c[0], "worktrees")) {
        if (n == 1)
            return LZ_RCLASS_ANCESTOR;
        if (!own_worktree(pol, c, n))
            return LZ_RCLASS_PROTECTED; /* another work tree's */
        if (n == 2)
            return LZ_RCLASS_ANCESTOR;
        /* `locked` keeps `git worktree prune` away: the developer's. */
        if (ieq(c[2], "locked"))
            return LZ_RCLASS_PROTECTED;
        return classify_rel(c + 2, n - 2);
    }
    enum lz_router_class cls = classify_rel(c, n);
    /* The stem of a lock at the root: `packed-refs.lock` is git's way to
     * write packed-refs, `HEAD.lock` the main work tree's. */
    const char *c0 = c[0];
    char stem[256];
    size_t sl;
    if (n == 1 && (sl = lock_stem_len(c0)) > 0 && sl < sizeof stem) {
        memcpy(stem, c0, sl);
        stem[sl] = '\0';
        c0 = stem;
    }
    if (!ieq_any(c0, common_free, LZ_ARRAY_SIZE(common_free)))
        return LZ_RCLASS_PROTECTED;
    if (ieq(c0, "refs") && n >= 2 && ieq_any(c[1], worktree_refs, LZ_ARRAY_SIZE(worktree_refs)))
        return LZ_RCLASS_PROTECTED;
    if (ieq(c0, "logs")) {
        if (n == 1)
            return cmax(cls, LZ_RCLASS_ANCESTOR);
        if (!ieq(c[1], "refs")) /* logs/HEAD: the main work tree's */
            return LZ_RCLASS_PROTECTED;
        if (n == 2)
            return cmax(cls, LZ_RCLASS_ANCESTOR);
        if (ieq_any(c[2], worktree_refs, LZ_ARRAY_SIZE(worktree_refs)))
            return LZ_RCLASS_PROTECTED;
    }
    return cls;
}

/* Is the directory made of the first g components a Git directory by
 * name: `.git`, or in linked-worktree mode the root or worktrees/NAME? */
static bool gitdir_by_name(const struct lz_router_policy *pol, const char *const *c, size_t g) {
    if (g > 0 && is_gitname(c[g - 1]))
        return true;
    return pol->worktree && (g == 0 || (g == 2 && own_worktree(pol, c, 2)));
}

/* Component-wise: 0 if p equals q, 1 if p is below q, -1 if p is a strict
 * ancestor of q, 2 if unrelated. */
static int relation(const char *p, const char *q) {
    size_t lp = strlen(p), lq = strlen(q);
    if (lp == 0)
        return lq == 0 ? 0 : -1;
    if (lp == lq)
        return strcmp(p, q) == 0 ? 0 : 2;
    if (lp > lq)
        return (lq == 0 || (strncmp(p, q, lq) == 0 && p[lq] == '/')) ? 1 : 2;
    return (strncmp(q, p, lp) == 0 && q[lp] == '/') ? -1 : 2;
}

/* `objects/info/commit-graph.lock`: git writes the graph there and dies
 * when it cannot create it (git gc does so by default); the rename of it
 * onto the PROTECTED graph is refused, which git tolerates (it removes the
 * lock and goes on), so the lock stays FREE. */
static bool is_graph_lock(const struct split *s, size_t n, size_t stem) {
    return n >= 3 && stem == 12 && strncasecmp(s->c[n - 1], "commit-graph", 12) == 0 && ieq(s->c[n - 2], "info") &&
        ieq(s->c[n - 3], "objects");
}

static int classify_split(const struct lz_router_policy *pol, struct split *s, enum lz_router_class *ret) {
    enum lz_router_class cls = LZ_RCLASS_FREE;
    char prefix[LZ_ROUTER_PATH_MAX + 1];
    size_t n = s->n;

    if (n > 0 && is_gitname(s->c[n - 1]))
        cls = LZ_RCLASS_GITNAME;

    /* Every Git directory on the path applies its rules, not only the
     * innermost: `.git/modules/x` is a Git directory too, and its
     * `objects/` must stay read-only because of the outer `modules/`. */
    /* Linked-worktree mode: the root and worktrees/NAME by their own
     * rules (classify_common covers both). */
    if (pol->worktree)
        cls = cmax(cls, classify_common(pol, s->c, n));
    for (size_t g = 0; g < n; g++) {
        bool gitdir;
        if (pol->worktree && (g == 0 || (g == 2 && own_worktree(pol, s->c, n)))) {
            continue; /* done above */
        } else if (gitdir_by_name(pol, s->c, g)) {
            gitdir = true;
        } else if (is_sensitive_top(s->c[g])) {
            join_prefix(s, g, prefix);
            int r = shaped(pol, prefix);
            if (r < 0)
                return r;
            gitdir = r > 0;
        } else {
            gitdir = false;
        }
        if (gitdir)
            cls = cmax(cls, classify_rel(s->c + g, n - g));
    }

    /* The root is never renamed or replaced: it is nobody's ANCESTOR. */
    if (n > 0 && pol->n_protect > 0)
        join_prefix(s, n, prefix);
    for (size_t i = 0; n > 0 && i < pol->n_protect; i++) {
        int rel = relation(prefix, pol->protect[i]);
        if (rel == 0 || rel == 1)
            cls = cmax(cls, LZ_RCLASS_PROTECTED);
        else if (rel == -1)
            cls = cmax(cls, LZ_RCLASS_ANCESTOR);
    }

    /* `X.lock` is what Git (and libgit2, JGit) writes before renaming it
     * over X: a lock sibling of anything not FREE is PROTECTED. */
    size_t stem;
    if (n > 0 && cls < LZ_RCLASS_PROTECTED && (stem = lock_stem_len(s->c[n - 1])) > 0 && !is_graph_lock(s, n, stem)) {
        char name[256];
        const char *saved = s->c[n - 1];
        memcpy(name, saved, stem);
        name[stem] = '\0';
        s->c[n - 1] = name;
        enum lz_router_class sib;
        int r = classify_split(pol, s, &sib);
        s->c[n - 1] = saved;
        if (r < 0)
            return r;
        if (sib != LZ_RCLASS_FREE)
            cls = LZ_RCLASS_PROTECTED;
    }
    *ret = cls;
    return 0;
}

int lz_router_classify(const struct lz_router_policy *pol, const char *path, enum lz_router_class *ret_class) {
    struct split s;
    int r = split_path(path, &s);
    if (r < 0)
        return r;
    enum lz_router_class c;
    r = classify_split(pol, &s, &c);
    if (r < 0)
        return r;
    *ret_class = c;
    return 0;
}

/* Splits `path` (non-empty) into its parent directory and last name. */
static void parent_of(const char *path, char *dir, const char **ret_name) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        dir[0] = '\0';
        *ret_name = path;
        return;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    *ret_name = slash + 1;
}

/* 1 if adding `added` to directory `dir` (and, for a rename inside the same
 * directory, taking `removed` out of it) turns a directory that is not
 * shaped like a Git directory into one: Git's repository discovery would
 * then read `dir/config` (a bare repository, possibly with core.worktree)
 * as the repository's configuration. Directories named `.git` are Git
 * directories anyway, and their HEAD is rewritten by every commit. */
static int would_shape(const struct lz_router_policy *pol, const char *dir, const char *added, const char *removed) {
    if (!ieq_any(added, shape_names, LZ_ARRAY_SIZE(shape_names)))
        return 0;
    const char *last = strrchr(dir, '/');
    last = last ? last + 1 : dir;
    if (is_gitname(last))
        return 0;
    if (pol->worktree) {
        struct split ds;
        int r0 = split_path(dir, &ds);
        if (r0 < 0)
            return r0;
        if (ds.n == 0 || (ds.n == 2 && own_worktree(pol, ds.c, 2)))
            return 0; /* Git directories by name, like `.git` */
    }
    int r = shaped(pol, dir);
    if (r != 0)
        return r < 0 ? r : 0;
    bool present[LZ_ARRAY_SIZE(shape_names)];
    for (size_t i = 0; i < LZ_ARRAY_SIZE(shape_names); i++) {
        if (ieq(shape_names[i], added)) {
            present[i] = true;
            continue;
        }
        if (removed && ieq(shape_names[i], removed)) {
            present[i] = false;
            continue;
        }
        r = has_entry(pol, dir, shape_names[i]);
        if (r < 0)
            return r;
        present[i] = r > 0;
    }
    /* HEAD, objects, refs, commondir */
    return present[0] && (present[3] || (present[1] && present[2]));
}

/* The innermost Git directory that strictly contains the path of `s`:
 * 1 with *ret_g the number of its components (0: the root, which only a
 * common Git directory in linked-worktree mode is), or 0 if none. A
 * directory named `.git` is one by name; any other must be shaped like one
 * (asked for every ancestor: only links, renames and special files pay for
 * this). */
static int git_root(const struct lz_router_policy *pol, const struct split *s, size_t *ret_g) {
    char prefix[LZ_ROUTER_PATH_MAX + 1];
    for (size_t g = s->n; g-- > 1;) {
        if (gitdir_by_name(pol, s->c, g)) {
            *ret_g = g;
            return 1;
        }
        join_prefix(s, g, prefix);
        int r = shaped(pol, prefix);
        if (r < 0)
            return r;
        if (r > 0) {
            *ret_g = g;
            return 1;
        }
    }
    *ret_g = 0;
    return pol->worktree && s->n > 0 ? 1 : 0;
}

static bool is_index_name(const char *c) {
    return ieq(c, "index") || (strncasecmp(c, "sharedindex.", 12) == 0 && c[12] != '\0');
}

/* Names whose contents are checked before they may appear in a Git
 * directory (by a rename only): indexes, and packed-refs (whose lines can
 * carry replace refs and notes). */
static bool is_checked_name(const char *c) { return is_index_name(c) || ieq(c, "packed-refs"); }

int lz_router_is_packed_refs(const struct lz_router_policy *pol, const char *path) {
    struct split s;
    int r = split_path(path, &s);
    if (r < 0)
        return r;
    if (s.n < 1 || !ieq(s.c[s.n - 1], "packed-refs"))
        return 0;
    size_t g;
    if ((r = git_root(pol, &s, &g)) <= 0)
        return r;
    return g == s.n - 1;
}

int lz_router_is_index(const struct lz_router_policy *pol, const char *path, size_t *ret_gitdir_len) {
    struct split s;
    int r = split_path(path, &s);
    if (r < 0)
        return r;
    if (s.n < 1 || !is_index_name(s.c[s.n - 1]))
        return 0; /* the cheap answer for every other name */
    size_t g;
    if ((r = git_root(pol, &s, &g)) <= 0)
        return r;
    if (g != s.n - 1)
        return 0;
    if (ret_gitdir_len)
        *ret_gitdir_len = g == 0 ? 0 : (size_t)(s.c[s.n - 1] - s.buf) - 1;
    return 1;
}

static unsigned req_type(unsigned type, bool is_dir) { return type ? type : is_dir ? S_IFDIR : S_IFREG; }

/* May the object (type, nlink) that now lives at `from` (inside Git
 * directory prefix from_g of `fs` when from_in) move to `to` (inside to_g
 * of `ts` when to_in)? Only the contents of Git directories are
 * restricted: nothing the host's git could later write or append through
 * may enter one. */
static int check_entering(const struct split *fs, bool from_in, size_t from_g, const struct split *ts, bool to_in,
                          size_t to_g, unsigned type, unsigned long nlink, enum lz_router_why *why) {
    if (!to_in)
        return 0;
    *why = LZ_RWHY_GITDIR_ENTRY;
    if (S_ISLNK(type))
        return -EPERM;
    if (S_ISREG(type))
        return nlink > 1 ? -EXDEV : 0; /* a copy has one link */
    if (!S_ISDIR(type))
        return -EPERM; /* FIFOs, sockets, devices */
    /* A directory may move within its own Git directory (whose contents
     * obey these rules already); one from elsewhere may hold links: a
     * copy (mv's answer to EXDEV) brings it in entry by entry, each
     * checked. */
    bool same = from_in && from_g == to_g;
    for (size_t i = 0; same && i < to_g; i++)
        same = strcmp(fs->c[i], ts->c[i]) == 0;
    return same ? 0 : -EXDEV;
}

/* The reason of a refusal by class (the worse end of a rename). */
static enum lz_router_why class_why(enum lz_router_class c) {
    switch (c) {
    case LZ_RCLASS_GITNAME: return LZ_RWHY_GITNAME;
    case LZ_RCLASS_PROTECTED: return LZ_RWHY_PROTECTED;
    case LZ_RCLASS_ANCESTOR: return LZ_RWHY_ANCESTOR;
    case LZ_RCLASS_FREE: break;
    }
    return LZ_RWHY_NONE;
}

/* The Git-directory content rules for creations (see lz_router_check). */
static int check_create_gitdir(const struct lz_router_policy *pol, const struct lz_router_req *req,
                               enum lz_router_why *why) {
    struct split s;
    int r = split_path(req->path, &s);
    if (r < 0)
        return r;
    if (s.n == 0)
        return 0;
    bool special = req->op == LZ_ROP_SYMLINK || req->op == LZ_ROP_LINK ||
        (req->op == LZ_ROP_CREATE && req->type && !S_ISREG(req->type));
    if (!special && !is_checked_name(s.c[s.n - 1]))
        return 0;
    size_t g;
    if ((r = git_root(pol, &s, &g)) <= 0)
        return r;
    *why = special ? LZ_RWHY_GITDIR_ENTRY : LZ_RWHY_CHECKED;
    if (special)
        return -EPERM; /* links and FIFOs never enter a Git directory */
    /* An index or packed-refs only by a checked rename
     * (lz_router_is_index, lz_router_is_packed_refs). */
    return g == s.n - 1 ? -EPERM : 0;
}

static int check_create(const struct lz_router_policy *pol, const struct lz_router_req *req, enum lz_router_why *why) {
    enum lz_router_class cls;
    int r = lz_router_classify(pol, req->path, &cls);
    if (r < 0)
        return r;
    if (req->path[0] == '\0')
        return req->exists ? -EEXIST : -EINVAL;
    if (req->op == LZ_ROP_LINK && req->path2) {
        enum lz_router_class src;
        r = lz_router_classify(pol, req->path2, &src);
        if (r < 0)
            return r;
        /* A second name for a protected file would be a way to write it. */
        *why = LZ_RWHY_LINK_SOURCE;
        if (src != LZ_RCLASS_FREE)
            return -EPERM;
        /* Nor may a file inside a Git directory get a second name: the
         * host's git writes such files in place. */
        struct split ss;
        size_t sg;
        if ((r = split_path(req->path2, &ss)) < 0 || (r = git_root(pol, &ss, &sg)) < 0)
            return r;
        if (r > 0)
            return -EPERM;
    }
    bool ok = cls == LZ_RCLASS_FREE || (cls == LZ_RCLASS_ANCESTOR && req->op == LZ_ROP_MKDIR);
    *why = class_why(cls);
    if (!ok)
        return req->exists ? -EEXIST : -EPERM;
    if (req->exists)
        return 0; /* the operation itself fails with EEXIST */
    if ((r = check_create_gitdir(pol, req, why)) < 0)
        return r;
    char dir[LZ_ROUTER_PATH_MAX + 1];
    const char *name;
    parent_of(req->path, dir, &name);
    r = would_shape(pol, dir, name, NULL);
    if (r < 0)
        return r;
    *why = LZ_RWHY_GIT_SHAPE;
    return r ? -EPERM : 0;
}

static int check_rename(const struct lz_router_policy *pol, const struct lz_router_req *req, enum lz_router_why *why) {
    if (req->flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
        return -EINVAL; /* RENAME_WHITEOUT and future flags: not served */
    if ((req->flags & RENAME_NOREPLACE) && (req->flags & RENAME_EXCHANGE))
        return -EINVAL;
    if (!req->path2)
        return -EINVAL;
    int r = lz_router_path_valid(req->path2);
    if (r < 0)
        return r;
    if (req->path[0] == '\0' || req->path2[0] == '\0')
        return -EBUSY; /* the root */

    enum lz_router_class src, dst;
    r = lz_router_classify(pol, req->path, &src);
    if (r < 0)
        return r;
    r = lz_router_classify(pol, req->path2, &dst);
    if (r < 0)
        return r;
    /* Neither end may be anything but FREE: moving a protected path (or a
     * directory on the way to one) away lets a new one be planted, and
     * moving onto one replaces it. With RENAME_EXCHANGE both ends move. */
    *why = class_why(cmax(src, dst));
    if (src != LZ_RCLASS_FREE || dst != LZ_RCLASS_FREE)
        return -EPERM;

    /* Moving a directory that holds a repository would move the repository
     * under a name the agent chose (docs/security-git.md, "Renames"). */
    *why = LZ_RWHY_MOVE_REPO;
    if (req->is_dir) {
        r = has_entry(pol, req->path, ".git");
        if (r != 0)
            return r < 0 ? r : -EPERM;
    }
    if ((req->flags & RENAME_EXCHANGE) && req->is_dir2) {
        r = has_entry(pol, req->path2, ".git");
        if (r != 0)
            return r < 0 ? r : -EPERM;
    }

    /* What enters a Git directory (either way, for an exchange). */
    struct split fs, ts;
    size_t fg, tg;
    int fin, tin;
    if ((r = split_path(req->path, &fs)) < 0 || (r = split_path(req->path2, &ts)) < 0 ||
        (r = fin = git_root(pol, &fs, &fg)) < 0 || (r = tin = git_root(pol, &ts, &tg)) < 0)
        return r;
    r = check_entering(&fs, fin, fg, &ts, tin, tg, req_type(req->type, req->is_dir), req->nlink, why);
    if (r == 0 && (req->flags & RENAME_EXCHANGE))
        r = check_entering(&ts, tin, tg, &fs, fin, fg, req_type(req->type2, req->is_dir2), req->nlink2, why);
    if (r < 0)
        return r;

    /* An exchange leaves both directories with the same names; a rename
     * adds the destination name to its directory. */
    if (!(req->flags & RENAME_EXCHANGE)) {
        char sdir[LZ_ROUTER_PATH_MAX + 1], ddir[LZ_ROUTER_PATH_MAX + 1];
        const char *sname, *dname;
        parent_of(req->path, sdir, &sname);
        parent_of(req->path2, ddir, &dname);
        r = would_shape(pol, ddir, dname, strcmp(sdir, ddir) == 0 ? sname : NULL);
        if (r < 0)
            return r;
        *why = LZ_RWHY_GIT_SHAPE;
        if (r)
            return -EPERM;
    }
    return 0;
}

static int check_why(const struct lz_router_policy *pol, const struct lz_router_req *req, enum lz_router_why *why);

int lz_router_check(const struct lz_router_policy *pol, const struct lz_router_req *req) {
    return lz_router_check_why(pol, req, NULL);
}

int lz_router_check_why(const struct lz_router_policy *pol, const struct lz_router_req *req,
                        enum lz_router_why *ret_why) {
    enum lz_router_why why = LZ_RWHY_NONE;
    int r = check_why(pol, req, &why);
    if (ret_why)
        *ret_why = r == -EPERM || r == -EXDEV ? why : LZ_RWHY_NONE;
    return r;
}

static int check_why(const struct lz_router_policy *pol, const struct lz_router_req *req, enum lz_router_why *why) {
    if (!pol || !req)
        return -EINVAL;
    int r = lz_router_path_valid(req->path);
    if (r < 0)
        return r;
    if (req->op == LZ_ROP_LINK && req->path2) {
        r = lz_router_path_valid(req->path2);
        if (r < 0)
            return r;
    }

    enum lz_router_class cls;
    switch (req->op) {
    case LZ_ROP_CREATE:
    case LZ_ROP_MKDIR:
    case LZ_ROP_SYMLINK:
    case LZ_ROP_LINK: return check_create(pol, req, why);
    case LZ_ROP_RENAME: return check_rename(pol, req, why);
    case LZ_ROP_WRITE:
    case LZ_ROP_SETATTR:
    case LZ_ROP_UNLINK:
    case LZ_ROP_RMDIR:
        r = lz_router_classify(pol, req->path, &cls);
        if (r < 0)
            return r;
        if ((req->op == LZ_ROP_UNLINK || req->op == LZ_ROP_RMDIR) && req->path[0] == '\0')
            return -EBUSY;
        *why = class_why(cls);
        if (cls != LZ_RCLASS_FREE)
            return -EPERM;
        *why = LZ_RWHY_CHECKED;
        if (req->op == LZ_ROP_WRITE) {
            /* An index or packed-refs changes only by a checked rename
             * over it. */
            r = lz_router_is_index(pol, req->path, NULL);
            if (r == 0)
                r = lz_router_is_packed_refs(pol, req->path);
            if (r != 0)
                return r < 0 ? r : -EPERM;
        }
        return 0;
    }
    return -EINVAL;
}

int lz_router_normalize(const char *in, char **ret_path) {
    if (!in || in[0] == '/')
        return -EINVAL;
    size_t len = strlen(in);
    if (len > LZ_ROUTER_PATH_MAX)
        return -ENAMETOOLONG;
    _cleanup_free_ char *out = lz_xmalloc(len + 1);
    size_t o = 0;
    const char *p = in;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    out[o] = '\0';
    if (o == 0)
        return -EINVAL;
    int r = lz_router_path_valid(out);
    if (r < 0)
        return r;
    *ret_path = TAKE_PTR(out);
    return 0;
}

const char *lz_router_op_name(enum lz_router_op op) {
    switch (op) {
    case LZ_ROP_CREATE: return "create";
    case LZ_ROP_MKDIR: return "mkdir";
    case LZ_ROP_SYMLINK: return "symlink";
    case LZ_ROP_LINK: return "link";
    case LZ_ROP_WRITE: return "write";
    case LZ_ROP_SETATTR: return "setattr";
    case LZ_ROP_UNLINK: return "unlink";
    case LZ_ROP_RMDIR: return "rmdir";
    case LZ_ROP_RENAME: return "rename";
    }
    return "?";
}

const char *lz_router_class_name(enum lz_router_class c) {
    switch (c) {
    case LZ_RCLASS_FREE: return "free";
    case LZ_RCLASS_ANCESTOR: return "ancestor";
    case LZ_RCLASS_PROTECTED: return "protected";
    case LZ_RCLASS_GITNAME: return "gitname";
    }
    return "?";
}
