/* gitscan_walk.c — the workspace walk of the host-Git scan: finds the
 * repositories and Git directories, refuses links and unsafe indexes in
 * the Git directories; and the entry point lz_gitscan_run. The top layer
 * (gitscan_int.h): it calls gitscan_git.c and gitscan.c, neither calls it. */
#include "gitscan_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitindex.h"
#include "gitrefs.h"
#include "worktree.h"

/* ---- the walk ----------------------------------------------------------- */

/* One entry of a directory being walked: its name, its type (DT_*), and
 * its lstat when that was needed to learn the type. */
struct entry {
    const char *name;
    int type;
    struct stat st;
    bool have_st;
};

static int entry_type(int dfd, const struct dirent *d, struct stat *st, bool *have_st) {
    *have_st = false;
    if (d->d_type != DT_UNKNOWN)
        return d->d_type;
    if (fstatat(dfd, d->d_name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return DT_UNKNOWN;
    *have_st = true;
    return S_ISDIR(st->st_mode) ? DT_DIR : S_ISLNK(st->st_mode) ? DT_LNK : S_ISREG(st->st_mode) ? DT_REG : DT_UNKNOWN;
}

/* The depth bound of both walks: -E2BIG (and s->bound) beyond it. */
static int check_depth(struct scan *s, unsigned depth) {
    if (depth <= s->max_depth)
        return 0;
    s->bound = "depth";
    return -E2BIG;
}

/* Calls fn for every entry of directory dfd but "." and "..", each counted
 * against the entries bound (-E2BIG and s->bound beyond it). Stops at fn's
 * first negative return and returns it; 0 once all were seen. */
static int each_entry(struct scan *s, int dfd, int (*fn)(struct scan *s, int dfd, const struct entry *e, void *ud),
                      void *ud) {
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return -errno;
    }
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (++s->out->n_entries > s->max_entries) {
            s->bound = "entries";
            r = -E2BIG;
            break;
        }
        struct entry e = { .name = de->d_name };
        e.type = entry_type(dfd, de, &e.st, &e.have_st);
        r = fn(s, dfd, &e, ud);
    }
    closedir(d);
    return r;
}

static bool has_entry(int dfd, const char *name) {
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int open_dir_at(int dfd, const char *name) {
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void scan_repo_gitdir(struct scan *s, const char *abs) { lz_gs_scan_repo(s, NULL, abs); }

/* An index left in a Git directory (by an agent before the router checked
 * every index, or written while no router ran) is checked like one the
 * router lets in: the host's git would act on every entry. */
static void check_index_at(struct scan *s, int gdfd, const char *name, const char *rel) {
    _cleanup_close_ int fd = openat(gdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return; /* unreadable: the host's git cannot read it either */
    struct lz_error e = { 0 };
    int r = lz_gitindex_verify_fd(fd, gdfd, &e);
    if (r == -EFBIG || r == -EPERM || r == -EINVAL)
        strv_push(&s->bad_index, lz_xasprintf("%s: %s", rel, e.msg));
}

static int walk_gitdir_at(struct scan *s, int dfd, const char *abs, const char *rel, bool in_objects, unsigned depth);

/* Regular files below directory `name` of dfd, at most `max` counted and
 * 8 levels deep (a report, not a bound of the scan). */
static size_t count_files(int dfd, const char *name, size_t max, unsigned depth) {
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || depth > 8)
        return 0;
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return 0;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return 0;
    }
    size_t n = 0;
    struct dirent *de;
    while (n < max && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR(st.st_mode))
            n += count_files(fd, de->d_name, max - n, depth + 1);
        else if (S_ISREG(st.st_mode))
            n++;
    }
    closedir(d);
    return n;
}

static bool nonempty_file(int dfd, const char *name) {
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* What makes the host's git display something else than what it pushes
 * (replace refs, notes, grafts, shallow, info/attributes): the router keeps
 * them read-only, so what is there now was there before the Domain; one
 * notice per Git directory says so (docs/security-git.md). */
static void report_display(struct scan *s, int gdfd, const char *rel) {
    char what[512] = "";
    size_t o = 0;
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        int w_ = snprintf(what + o, sizeof what - o, "%s", o ? ", " : "");                                             \
        if (w_ > 0 && (size_t)w_ < sizeof what - o)                                                                    \
            o += (size_t)w_;                                                                                           \
        w_ = snprintf(what + o, sizeof what - o, __VA_ARGS__);                                                         \
        if (w_ > 0 && (size_t)w_ < sizeof what - o)                                                                    \
            o += (size_t)w_;                                                                                           \
    } while (0)
    size_t n = count_files(gdfd, "refs/replace", 1000, 0);
    if (n)
        ADD("%s%zu replace ref%s in refs/replace/", n >= 1000 ? "over " : "", n, n == 1 ? "" : "s");
    n = count_files(gdfd, "refs/notes", 1000, 0);
    if (n)
        ADD("%zu notes ref%s in refs/notes/", n, n == 1 ? "" : "s");
    _cleanup_close_ int pfd = openat(gdfd, "packed-refs", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (pfd >= 0 && fstat(pfd, &st) == 0 && S_ISREG(st.st_mode)) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, nd = 0;
        if (lz_read_fd(pfd, LZ_PACKEDREFS_MAX, &buf, &len) == 0 && lz_packedrefs_check(buf, len, &nd, NULL) == -EPERM)
            ADD("%zu replace or notes ref%s in packed-refs", nd, nd == 1 ? "" : "s");
    }
    if (nonempty_file(gdfd, "info/grafts"))
        ADD("info/grafts");
    if (nonempty_file(gdfd, "shallow"))
        ADD("shallow");
    if (nonempty_file(gdfd, "info/attributes"))
        ADD("info/attributes");
#undef ADD
    if (o == 0)
        return;
    lz_gs_notice(s,
                 "%s: %s change what the host's git log, diff, show and checkout display, not what git push "
                 "sends; they were there before this Domain (the sandbox cannot add or change them): check "
                 "them if you did not make them (git replace -l, git notes list)",
                 rel, what);
}

/* Where walk_gitdir_at is. */
struct gitdir_pos {
    const char *abs, *rel;
    bool in_objects; /* below objects/ */
    bool is_gd;      /* the directory itself is a Git directory */
    unsigned depth;
};

static int gitdir_entry(struct scan *s, int dfd, const struct entry *e, void *ud) {
    const struct gitdir_pos *w = ud;
    _cleanup_free_ char *crel = lz_xasprintf("%s/%s", w->rel, e->name);
    if (e->type == DT_LNK) {
        if (w->is_gd && !strcmp(e->name, "hooks"))
            return 0; /* a symlinked hooks directory: scan_hooks reads it */
        strv_push(&s->links, lz_xasprintf("%s (symlink)", crel));
        return 0;
    }
    if (e->type == DT_DIR) {
        if (w->is_gd && !strcmp(e->name, "hooks"))
            return 0;
        _cleanup_close_ int cfd = open_dir_at(dfd, e->name);
        if (cfd < 0)
            return 0;
        _cleanup_free_ char *cabs = lz_xasprintf("%s/%s", w->abs, e->name);
        bool obj = w->in_objects || (w->is_gd && !strcmp(e->name, "objects"));
        return walk_gitdir_at(s, cfd, cabs, crel, obj, w->depth + 1);
    }
    if (w->in_objects)
        return 0; /* git clone --local hard-links objects */
    struct stat st = e->st;
    if (!e->have_st && fstatat(dfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1)
        strv_push(&s->links, lz_xasprintf("%s (%ju hard links)", crel, (uintmax_t)st.st_nlink));
    if (w->is_gd && S_ISREG(st.st_mode) && (!strcmp(e->name, "index") || !strncmp(e->name, "sharedindex.", 12)))
        check_index_at(s, dfd, e->name, crel);
    return 0;
}

/* Walks a Git directory: records symlinks and multi-link files (outside
 * objects/), skips hooks/ (the developer's, read by scan_hooks), and asks
 * git about every nested Git directory (modules/<name>, worktrees/<id>). */
static int walk_gitdir_at(struct scan *s, int dfd, const char *abs, const char *rel, bool in_objects, unsigned depth) {
    int r = check_depth(s, depth);
    if (r < 0)
        return r;
    /* logs/ has a HEAD too: a Git directory also has objects and refs
     * (modules/<name>) or a commondir (worktrees/<id>) */
    bool is_gd = has_entry(dfd, "HEAD") &&
        (has_entry(dfd, "commondir") || (has_entry(dfd, "objects") && has_entry(dfd, "refs")));
    if (is_gd && depth > 0)
        scan_repo_gitdir(s, abs);
    if (is_gd)
        report_display(s, dfd, rel);
    struct gitdir_pos w = { .abs = abs, .rel = rel, .in_objects = in_objects, .is_gd = is_gd, .depth = depth };
    return each_entry(s, dfd, gitdir_entry, &w);
}

/* A Git directory found in the workspace (canonical abs). */
static int walk_gitdir(struct scan *s, const char *abs) {
    const char *rel = lz_gitscan_rel(s->ws, abs);
    if (!rel || strv_has(&s->gitdirs, abs))
        return 0;
    strv_add(&s->gitdirs, abs);
    _cleanup_close_ int fd = open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    return walk_gitdir_at(s, fd, abs, rel[0] ? rel : ".", false, 0);
}

/* The target of gitfile dir/.git, canonical, or NULL. */
static char *read_gitfile(int dfd, const char *dir) {
    char buf[4097];
    _cleanup_close_ int fd = openat(dfd, ".git", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = lz_read_full(fd, buf, sizeof buf - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    if (strncmp(buf, "gitdir: ", 8))
        return NULL;
    char *v = buf + 8;
    v[strcspn(v, "\r\n")] = '\0';
    _cleanup_free_ char *j = lz_gitscan_join(v, dir, NULL);
    return j ? lz_gitscan_canon(j, NULL, NULL) : NULL;
}

/* Where lz_gs_walk_tree is. */
struct tree_pos {
    const char *abs;
    unsigned depth;
};

static int tree_entry(struct scan *s, int dfd, const struct entry *e, void *ud) {
    const struct tree_pos *w = ud;
    if (!strcmp(e->name, ".git")) {
        _cleanup_free_ char *g = NULL;
        if (e->type == DT_DIR) {
            g = lz_xasprintf("%s/.git", w->abs);
        } else if (e->type == DT_REG) {
            g = read_gitfile(dfd, w->abs);
        } else if (e->type == DT_LNK) {
            _cleanup_free_ char *l = lz_xasprintf("%s/.git", w->abs);
            g = lz_gitscan_canon(l, NULL, NULL);
        }
        int r = g ? walk_gitdir(s, g) : 0;
        if (r < 0)
            return r;
        lz_gs_scan_repo(s, w->abs, NULL);
        return 0;
    }
    if (e->type != DT_DIR)
        return 0;
    _cleanup_close_ int cfd = open_dir_at(dfd, e->name);
    if (cfd < 0)
        return 0;
    _cleanup_free_ char *cabs = lz_gs_path_child(w->abs, e->name);
    return lz_gs_walk_tree(s, cfd, cabs, w->depth + 1);
}

int lz_gs_walk_tree(struct scan *s, int dfd, const char *abs, unsigned depth) {
    int r = check_depth(s, depth);
    if (r < 0)
        return r;
    /* A directory shaped like a Git directory: Git treats it as a bare
     * repository when run inside it. */
    if (depth > 0 && has_entry(dfd, "HEAD") && has_entry(dfd, "objects") && has_entry(dfd, "refs")) {
        r = walk_gitdir(s, abs);
        scan_repo_gitdir(s, abs);
        return r;
    }
    struct tree_pos w = { .abs = abs, .depth = depth };
    return each_entry(s, dfd, tree_entry, &w);
}

/* ---- entry point -------------------------------------------------------- */

/* name with control characters, backslash and non-ASCII as \xNN */
static void escape_into(char *out, size_t cap, size_t *pos, const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p && *pos + 5 < cap; p++) {
        if (*p < 0x20 || *p >= 0x7f || *p == '\\')
            *pos += (size_t)snprintf(out + *pos, cap - *pos, "\\x%02x", *p);
        else
            out[(*pos)++] = (char)*p;
    }
    out[*pos] = '\0';
}

static size_t env_size(const char *name, size_t def) {
    const char *v = getenv(name);
    if (!v || !v[0])
        return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x == 0)
        return def;
    return (size_t)x;
}

int lz_gitscan_run(const char *workspace, const struct lz_gitscan_opts *o, struct lz_gitscan *ret,
                   struct lz_error *err) {
    struct lz_gitscan out = { 0 };
    struct scan s = { .out = &out };
    s.ws = realpath(workspace, NULL);
    if (!s.ws)
        return lz_error_set(err, -errno, "cannot resolve the workspace %s: %s", workspace, strerror(errno));
    s.home = lz_home_dir();
    s.max_entries =
        o && o->max_entries ? o->max_entries : env_size(LZ_GITSCAN_ENV_MAX_ENTRIES, LZ_GITSCAN_MAX_ENTRIES_DEFAULT);
    s.max_depth =
        o && o->max_depth ? o->max_depth : (unsigned)env_size(LZ_GITSCAN_ENV_MAX_DEPTH, LZ_GITSCAN_MAX_DEPTH_DEFAULT);
    s.timeout_ms = o && o->timeout_ms ? o->timeout_ms : 10000;
    s.git = o && o->git ? lz_xstrdup(o->git) : lz_gs_find_git();
    int r = 0;
    if (!s.git) {
        out.git_missing = true;
        lz_gs_log(&s, "git is not installed on this host: there is no host Git configuration to protect");
        goto done;
    }
    s.envp = lz_gs_clean_env();
    /* The workspace itself first: the developer's global and system
     * configuration apply even where the workspace is no repository, and
     * a workspace inside a repository is governed by that one. */
    lz_gs_scan_repo(&s, s.ws, NULL);
    {
        _cleanup_close_ int fd = open(s.ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            r = lz_error_set(err, -errno, "cannot open the workspace %s: %s", s.ws, strerror(errno));
            goto done;
        }
        r = lz_gs_walk_tree(&s, fd, s.ws, 0);
    }
    /* A linked worktree: its common Git directory is served to the
     * sandbox too (worktree.h), so it is walked like the workspace's own:
     * links, indexes (its own and every worktree's), what changes the
     * display. Named by its host path in what is reported. */
    if (r >= 0) {
        struct lz_worktree wt = { 0 };
        struct lz_error we = { 0 };
        if (lz_worktree_probe(s.ws, &wt, &we) > 0 && !strv_has(&s.gitdirs, wt.common)) {
            strv_add(&s.gitdirs, wt.common);
            _cleanup_close_ int cfd = open(wt.common, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0)
                r = walk_gitdir_at(&s, cfd, wt.common, wt.common, false, 0);
        }
        lz_worktree_clear(&wt);
    }
    if (s.bound) {
        if (!strcmp(s.bound, "entries"))
            r = lz_error_set(err, -E2BIG,
                             "the workspace has more than %zu directory entries, the bound of Lazaret's scan for "
                             "Git repositories; start from a smaller directory or raise it with %s=N",
                             s.max_entries, LZ_GITSCAN_ENV_MAX_ENTRIES);
        else
            r = lz_error_set(err, -E2BIG,
                             "the workspace has directories nested deeper than %u, the bound of Lazaret's scan for "
                             "Git repositories; raise it with %s=N",
                             s.max_depth, LZ_GITSCAN_ENV_MAX_DEPTH);
        goto done;
    }
    if (r < 0) {
        r = lz_error_set(err, r, "cannot scan the workspace for Git repositories: %s", strerror(-r));
        goto done;
    }
    if (s.links.n) {
        char msg[LZ_ERROR_MAX - 200];
        size_t pos = 0;
        msg[0] = '\0';
        size_t shown = 0;
        for (; shown < s.links.n && pos + 40 < sizeof msg - 200; shown++) {
            if (shown)
                pos += (size_t)snprintf(msg + pos, sizeof msg - pos, ", ");
            escape_into(msg, sizeof msg - 200, &pos, s.links.v[shown]);
        }
        if (shown < s.links.n)
            pos += (size_t)snprintf(msg + pos, sizeof msg - pos, " and %zu more", s.links.n - shown);
        r = lz_error_set(err, -EPERM,
                         "a Git directory of the workspace holds a link: %s; the host's git would write through "
                         "this link; check who made it, remove it, then run again",
                         msg);
        goto done;
    }
    if (s.bad_index.n) {
        char msg[LZ_ERROR_MAX - 300];
        size_t pos = 0;
        msg[0] = '\0';
        escape_into(msg, sizeof msg, &pos, s.bad_index.v[0]);
        r = lz_error_set(err, -EPERM,
                         "a Git index of the workspace is unsafe for the host's git: %s%s; its entries would make "
                         "`git checkout`/`git restore` write there; inspect it with `git ls-files --stage`, then "
                         "rebuild it (`rm INDEX && git reset`) and run again",
                         msg, s.bad_index.n > 1 ? " (and more)" : "");
        goto done;
    }
    if (s.protect.n > 1)
        qsort(s.protect.v, s.protect.n, sizeof *s.protect.v, lz_cmp_strp);
    /* A path below another protected one is covered by it. */
    {
        _cleanup_free_ bool *covered = lz_xcalloc(s.protect.n ? s.protect.n : 1, sizeof *covered);
        for (size_t i = 0; i < s.protect.n; i++) {
            _cleanup_free_ char *p = lz_xstrdup(s.protect.v[i]);
            for (char *q = strchr(p, '/'); q && !covered[i]; q = strchr(q + 1, '/')) {
                *q = '\0';
                const char *key = p;
                covered[i] = bsearch(&key, s.protect.v, s.protect.n, sizeof *s.protect.v, lz_cmp_strp) != NULL;
                *q = '/';
            }
        }
        size_t w = 0;
        for (size_t i = 0; i < s.protect.n; i++) {
            if (covered[i])
                free(s.protect.v[i]);
            else
                s.protect.v[w++] = s.protect.v[i];
        }
        s.protect.n = w;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < s.protect.n; i++)
        bytes += strlen(s.protect.v[i]) + 1 + sizeof("--protect") + 2 * sizeof(char *);
    if (s.protect.n > LZ_GITSCAN_MAX_PROTECT || bytes > LZ_GITSCAN_MAX_PROTECT_BYTES) {
        r = lz_error_set(err, -E2BIG,
                         "the host's Git configuration names %zu paths in the workspace (%zu bytes) that must be "
                         "kept read-only, more than Lazaret can pass (%d paths, %d bytes); see `lazaret config "
                         "check` and reduce the includes and hook files inside the workspace",
                         s.protect.n, bytes, LZ_GITSCAN_MAX_PROTECT, LZ_GITSCAN_MAX_PROTECT_BYTES);
        goto done;
    }
done:
    if (r >= 0) {
        out.protect = TAKE_PTR(s.protect.v);
        out.n_protect = s.protect.n;
        out.notices = TAKE_PTR(s.notices.v);
        out.n_notices = s.notices.n;
        out.log = TAKE_PTR(s.log.v);
        out.n_log = s.log.n;
        s.protect.n = s.notices.n = s.log.n = 0;
        *ret = out;
        r = 0;
    }
    strv_clear(&s.protect);
    strv_clear(&s.notices);
    strv_clear(&s.log);
    strv_clear(&s.links);
    strv_clear(&s.bad_index);
    strv_clear(&s.cfgfiles);
    strv_clear(&s.hookdirs);
    strv_clear(&s.gitdirs);
    strv_clear(&s.repos);
    if (s.envp)
        for (char **e = s.envp; *e; e++)
            free(*e);
    free(s.envp);
    free(s.git);
    free(s.ws);
    return r;
}
