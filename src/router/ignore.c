/* Ignored Workspace State routing decisions: see ignore.h. */
#include "ignore.h"

#include <dirent.h>
#include <fcntl.h>
#include <git2.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "git_dl.h"

/* Larger `.gitignore` files are kept as last accepted (Git itself reads
 * them whole, but nobody writes megabytes of ignore rules). */
#define RULES_MAX (4u << 20)
/* A tracked file matching an ignore rule is hashed to compare it with its
 * index entry; larger ones are taken as not matching (store-backed). */
#define VERIFY_MAX (64u << 20)
/* Remembered decisions; the map is emptied when it grows beyond this. */
#define DECISIONS_MAX (1u << 20)
/* The walk of a directory the sandbox moved (rt_ignore_renamed_dir): the
 * bounds of the check made before the move (hidden.h). */
#define RENAMED_WALK_MAX_ENTRIES 100000u
#define RENAMED_WALK_MAX_DEPTH 64u

/* ---- a string set with a small value ---- */

struct smap {
    char **keys;
    signed char *vals;
    size_t cap, n;
};

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int smap_get(const struct smap *m, const char *k) {
    if (m->cap == 0)
        return -1;
    for (size_t i = str_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], k) == 0)
            return m->vals[i];
    }
}

static void smap_free(struct smap *m) {
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void smap_put(struct smap *m, const char *k, int v);

static void smap_grow(struct smap *m) {
    struct smap old = *m;
    m->cap = old.cap ? old.cap * 2 : 256;
    m->n = 0;
    m->keys = lz_xcalloc(m->cap, sizeof *m->keys);
    m->vals = lz_xcalloc(m->cap, sizeof *m->vals);
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i]) {
            smap_put(m, old.keys[i], old.vals[i]);
            free(old.keys[i]);
        }
    free(old.keys);
    free(old.vals);
}

static void smap_put(struct smap *m, const char *k, int v) {
    if ((m->n + 1) * 2 > m->cap)
        smap_grow(m);
    for (size_t i = str_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) {
            m->keys[i] = lz_xstrdup(k);
            m->vals[i] = (signed char)v;
            m->n++;
            return;
        }
        if (strcmp(m->keys[i], k) == 0) {
            m->vals[i] = (signed char)v;
            return;
        }
    }
}

/* ---- state ---- */

struct rt_ignore {
    git_repository *repo;
    git_index *index;
    char *prefix;             /* the workspace relative to the work tree: "" or "a/b/" */
    int live_fd;              /* the host work tree */
    int store_fd;             /* <state>/tree */
    int rules_fd;             /* <state>/rules */
    int shadow_fd;            /* <state>/rules/tree: the accepted .gitignore files */
    int meta_fd;              /* <state>/rules/meta */
    struct smap tracked;      /* repo-relative paths in the index */
    struct smap tracked_dirs; /* and their parent directories */
    struct smap acquired;     /* directories whose rules are accepted this run */
    struct smap decisions;    /* "rel" or "rel/" -> backing */
    char **renamed;           /* repo-relative directories the sandbox moved in */
    size_t n_renamed;
};

int rt_ignore_store_fd(const struct rt_ignore *ig) { return ig->store_fd; }

bool rt_ignore_is_rules_file(const char *rel) {
    const char *b = strrchr(rel, '/');
    return strcmp(b ? b + 1 : rel, ".gitignore") == 0;
}

int rt_open_dir_p(int base, const char *rel, bool create) {
    int fd = fcntl(base, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return -errno;
    const char *p = rel;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_MAX + 1];
        if (len == 0 || len > NAME_MAX) {
            close(fd);
            return len == 0 ? -EINVAL : -ENAMETOOLONG;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
            close(fd);
            return -EINVAL;
        }
        int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
                int e = -errno;
                close(fd);
                return e;
            }
            next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = next < 0 ? -errno : 0;
        close(fd);
        if (next < 0)
            return e == -ELOOP ? -ENOTDIR : e;
        fd = next;
        p += len;
        while (*p == '/')
            p++;
    }
    return fd;
}

/* The parent directory of repo-relative path rel ("" for a top-level one). */
static void dir_of(const char *rel, char *out, size_t size) {
    const char *s = strrchr(rel, '/');
    size_t n = s ? (size_t)(s - rel) : 0;
    if (n >= size)
        n = size - 1;
    memcpy(out, rel, n);
    out[n] = '\0';
}

static void fingerprint(const void *buf, size_t len, bool present, char out[65]) {
    if (!present) {
        strcpy(out, "-");
        return;
    }
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, buf, len);
    lz_hex(h, sizeof h, out);
}

/* The meta file name of repo-relative directory dir. */
static void meta_name(const char *dir, char out[65]) {
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)dir, strlen(dir));
    lz_hex(h, sizeof h, out);
}

/* Reads the host's dir/.gitignore: 1 with *buf, 0 when there is none (or
 * it is not a regular file: Git does not follow an in-tree symlink here
 * either), -errno. */
static int read_live(struct rt_ignore *ig, const char *dir, char **buf, size_t *len) {
    char path[PATH_MAX];
    if (lz_snprintf(path, sizeof path, "%s%s.gitignore", dir, dir[0] ? "/" : "") < 0)
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = lz_openat_beneath(ig->live_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
        return 0;
    if (fd < 0)
        return fd;
    int rc = lz_read_fd(fd, RULES_MAX, buf, len);
    if (rc == -EINVAL)
        return 0; /* not a regular file */
    return rc < 0 ? rc : 1;
}

static int write_meta(struct rt_ignore *ig, const char *dir, const char *line) {
    char name[65];
    meta_name(dir, name);
    return lz_write_file_atomic_at(ig->meta_fd, name, line, strlen(line), 0600);
}

/* Makes the accepted copy of dir's rules what the host has now. `meta` is
 * what meta/ says of dir now (NULL: nothing). Nothing is written when the
 * accepted copy is already that (most directories, at every start). */
static int accept_live(struct rt_ignore *ig, const char *dir, const char *meta, const char *meta_line) {
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int present = read_live(ig, dir, &buf, &len);
    if (present < 0)
        return present;
    char fp[65], line[80];
    fingerprint(buf, len, present, fp);
    snprintf(line, sizeof line, "a %s\n", fp);
    if (!meta_line && ((!present && !meta) || (meta && strcmp(meta, line) == 0)))
        return 0; /* no rules then and now, or the same accepted ones */
    _cleanup_close_ int sfd = rt_open_dir_p(ig->shadow_fd, dir, true);
    if (sfd < 0)
        return sfd;
    /* O_PATH fds cannot be written through: reopen the directory. */
    _cleanup_close_ int dfd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    int rc = present ? lz_write_file_atomic_at(dfd, ".gitignore", buf, len, 0600)
                     : (unlinkat(dfd, ".gitignore", 0) < 0 && errno != ENOENT ? -errno : 0);
    if (rc < 0)
        return rc;
    return write_meta(ig, dir, meta_line ? meta_line : line);
}

/* The fingerprint of the host's dir/.gitignore now: 1 (present) or 0
 * (none) with fp set, or -errno. */
static int live_fingerprint(struct rt_ignore *ig, const char *dir, char fp[65]) {
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int present = read_live(ig, dir, &buf, &len);
    if (present >= 0)
        fingerprint(buf, len, present, fp);
    return present;
}

/* Records that what dir/.gitignore holds now is the sandbox's. Failing to
 * read it leaves the record as it was ("d" after a write: fails closed). */
static void record_sandbox(struct rt_ignore *ig, const char *dir) {
    char fp[65], line[80];
    if (live_fingerprint(ig, dir, fp) < 0)
        return;
    snprintf(line, sizeof line, "s %s\n", fp);
    (void)write_meta(ig, dir, line);
}

static bool below_renamed(struct rt_ignore *ig, const char *dir) {
    for (size_t i = 0; i < ig->n_renamed; i++) {
        size_t n = strlen(ig->renamed[i]);
        if (strncmp(dir, ig->renamed[i], n) == 0 && (dir[n] == '\0' || dir[n] == '/'))
            return true;
    }
    return false;
}

/* The rules of repo-relative directory dir are accepted for this run (see
 * ignore.h). Failing to read or record them keeps the last accepted copy. */
static void acquire(struct rt_ignore *ig, const char *dir) {
    if (smap_get(&ig->acquired, dir) >= 0)
        return;
    smap_put(&ig->acquired, dir, 1);
    char name[65];
    meta_name(dir, name);
    _cleanup_free_ char *meta = NULL;
    int rc = lz_read_file_at(ig->meta_fd, name, 256, &meta, NULL);
    if (rc == -ENOENT) {
        if (below_renamed(ig, dir)) {
            record_sandbox(ig, dir); /* moved in by the sandbox: what is there is the sandbox's */
            return;
        }
        (void)accept_live(ig, dir, NULL, NULL);
        return;
    }
    if (rc < 0)
        return;
    if (strncmp(meta, "a ", 2) == 0) {
        (void)accept_live(ig, dir, meta, NULL); /* the host's to change */
        return;
    }
    if (strncmp(meta, "s ", 2) == 0) {
        char fp[65];
        if (live_fingerprint(ig, dir, fp) < 0)
            return;
        if (strncmp(meta + 2, fp, strlen(fp)) != 0)
            (void)accept_live(ig, dir, meta, NULL); /* the host changed it since */
        return;
    }
    /* "d": the sandbox was writing it when we stopped: keep what we had. */
}

static void acquire_ancestors(struct rt_ignore *ig, const char *rel) {
    char dir[PATH_MAX];
    acquire(ig, "");
    for (const char *p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
        size_t n = (size_t)(p - rel);
        if (n >= sizeof dir)
            return;
        memcpy(dir, rel, n);
        dir[n] = '\0';
        acquire(ig, dir);
    }
}

static int full_rel(struct rt_ignore *ig, const char *rel, char *out, size_t size) {
    return lz_snprintf(out, size, "%s%s", ig->prefix, rel);
}

static bool has_git_component(const char *rel) {
    for (const char *p = rel; p;) {
        const char *s = strchr(p, '/');
        size_t n = s ? (size_t)(s - p) : strlen(p);
        if (n == 4 && strncasecmp(p, ".git", 4) == 0)
            return true;
        p = s ? s + 1 : NULL;
    }
    return false;
}

/* The tracked file rel still holds the blob its index entry names. */
static bool matches_index(struct rt_ignore *ig, const char *rel) {
    const git_index_entry *e = git_index_get_bypath(ig->index, rel, 0);
    if (!e)
        return false;
    _cleanup_close_ int fd = lz_openat_beneath(ig->live_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if (fd >= 0) {
        if (lz_read_fd(fd, VERIFY_MAX, &buf, &len) < 0)
            return false;
    } else if (fd == -ELOOP && S_ISLNK(e->mode)) {
        /* A symlink: its blob is the target. */
        char t[PATH_MAX];
        _cleanup_close_ int pfd = -EBADF;
        char d[PATH_MAX];
        dir_of(rel, d, sizeof d);
        pfd = d[0] ? lz_openat_beneath(ig->live_fd, d, O_PATH | O_DIRECTORY, 0, false)
                   : fcntl(ig->live_fd, F_DUPFD_CLOEXEC, 3);
        if (pfd < 0)
            return false;
        const char *b = strrchr(rel, '/');
        ssize_t n = readlinkat(pfd, b ? b + 1 : rel, t, sizeof t);
        if (n < 0 || (size_t)n >= sizeof t)
            return false;
        buf = lz_xcalloc(1, (size_t)n + 1);
        memcpy(buf, t, (size_t)n);
        len = (size_t)n;
    } else {
        return false;
    }
    git_oid oid;
    if (git_odb_hash(&oid, buf, len, GIT_OBJECT_BLOB) < 0)
        return false;
    return git_oid_equal(&oid, &e->id);
}

/* The host file still has the size and modification time its index entry
 * recorded: the entry was written from this very file (by the host's git
 * or the sandbox's, which sees the same times), not made up for a file the
 * sandbox cannot see. */
static bool stat_matches_index(struct rt_ignore *ig, const char *rel, const struct stat *st) {
    const git_index_entry *e = git_index_get_bypath(ig->index, rel, 0);
    return e && S_ISREG(st->st_mode) == S_ISREG(e->mode) && (uint32_t)st->st_size == e->file_size &&
        (int64_t)st->st_mtim.tv_sec == (int64_t)e->mtime.seconds &&
        (uint32_t)st->st_mtim.tv_nsec == e->mtime.nanoseconds;
}

int rt_ignore_route(struct rt_ignore *ig, const char *rel, bool is_dir, const struct stat *host_st) {
    char full[PATH_MAX + 1];
    if (!ig->repo || has_git_component(rel)) /* store only (rt_ignore_open_store): no rules */
        return RT_HOST;
    int rc = lz_snprintf(full, sizeof full - 1, "%s%s", ig->prefix, rel);
    if (rc < 0)
        return rc;
    if (smap_get(&ig->tracked_dirs, full) >= 0)
        return RT_HOST; /* holds tracked files: both backings may have entries */
    bool tracked = smap_get(&ig->tracked, full) >= 0;
    /* The common case, cheaply: a tracked file as the index knows it is
     * the host's whatever the rules say (evaluating them costs far more). */
    if (tracked && host_st && stat_matches_index(ig, full, host_st))
        return RT_HOST;
    size_t n = strlen(full);
    if (is_dir && !tracked) {
        full[n] = '/';
        full[n + 1] = '\0';
    }
    int d = smap_get(&ig->decisions, full);
    if (d >= 0)
        return d;
    acquire_ancestors(ig, full);
    int ignored = 0;
    if (git_ignore_path_is_ignored(&ignored, ig->repo, full) < 0)
        ignored = 1; /* cannot tell: keep the host's file private */
    if (!ignored)
        d = RT_HOST;
    else if (tracked)
        d = matches_index(ig, full) ? RT_HOST : RT_STORE;
    else
        d = RT_STORE;
    if (ig->decisions.n >= DECISIONS_MAX)
        smap_free(&ig->decisions);
    smap_put(&ig->decisions, full, d);
    return d;
}

/* ---- what the sandbox does to .gitignore files ---- */

/* The repo-relative path of rules file rel and of its directory: false
 * when rel is no `.gitignore` (or too long). */
static bool rules_paths(struct rt_ignore *ig, const char *rel, char full[PATH_MAX], char dir[PATH_MAX]) {
    if (!ig || !ig->repo || !rt_ignore_is_rules_file(rel) || full_rel(ig, rel, full, PATH_MAX) < 0)
        return false;
    dir_of(full, dir, PATH_MAX);
    return true;
}

void rt_ignore_will_change(struct rt_ignore *ig, const char *rel) {
    char full[PATH_MAX], dir[PATH_MAX];
    if (!rules_paths(ig, rel, full, dir))
        return;
    acquire_ancestors(ig, full);
    (void)write_meta(ig, dir, "d\n");
}

void rt_ignore_changed(struct rt_ignore *ig, const char *rel) {
    char full[PATH_MAX], dir[PATH_MAX];
    if (rules_paths(ig, rel, full, dir))
        record_sandbox(ig, dir);
}

/* Below a directory the sandbox moved, each directory whose rules have a
 * record (meta/) or that holds a `.gitignore` now holds the sandbox's
 * rules: recorded as such ("s" with what is there now), else a record of
 * the host's ("a") would take what the rename brought at the next start
 * as the host's change (RENAME_EXCHANGE with a host directory, or a
 * record the sandbox left at that path before). Hidden directories are
 * not walked (everything below one is hidden whatever its rules say), nor
 * `.git`. Bounded like the check before the rename (hidden.h), which
 * walked the same directories. */
struct rwalk {
    struct rt_ignore *ig;
    size_t left;
    char path[PATH_MAX]; /* repo-relative */
};

static void record_tree(struct rwalk *w, int fd, unsigned depth) {
    char name[65];
    struct stat st;
    meta_name(w->path, name);
    if (faccessat(w->ig->meta_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
        fstatat(fd, ".gitignore", &st, AT_SYMLINK_NOFOLLOW) == 0)
        record_sandbox(w->ig, w->path);
    if (depth >= RENAMED_WALK_MAX_DEPTH)
        return;
    DIR *dp = NULL;
    if (lz_opendir_at(fd, &dp) < 0)
        return;
    size_t pl = strlen(w->path);
    struct dirent *de;
    while (w->left > 0 && (de = readdir(dp))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || strcasecmp(de->d_name, ".git") == 0)
            continue;
        w->left--;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (lz_snprintf(w->path + pl, sizeof w->path - pl, "/%s", de->d_name) < 0) {
            w->path[pl] = '\0';
            continue;
        }
        /* rt_ignore_route takes workspace-relative paths. */
        if (rt_ignore_route(w->ig, w->path + strlen(w->ig->prefix), true, &st) == RT_HOST) {
            int cfd = openat(dirfd(dp), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0) {
                record_tree(w, cfd, depth + 1);
                close(cfd);
            }
        }
        w->path[pl] = '\0';
    }
    closedir(dp);
}

void rt_ignore_renamed_dir(struct rt_ignore *ig, const char *rel) {
    if (!ig || !ig->repo)
        return;
    char full[PATH_MAX];
    if (full_rel(ig, rel, full, sizeof full) < 0)
        return;
    _cleanup_close_ int dfd = lz_openat_beneath(ig->live_fd, full, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (dfd >= 0) {
        struct rwalk *w = lz_xcalloc(1, sizeof *w);
        w->ig = ig;
        w->left = RENAMED_WALK_MAX_ENTRIES;
        memcpy(w->path, full, strlen(full) + 1);
        record_tree(w, dfd, 0);
        free(w);
    }
    if (below_renamed(ig, full))
        return;
    ig->renamed = lz_xrealloc(ig->renamed, (ig->n_renamed + 1) * sizeof *ig->renamed);
    ig->renamed[ig->n_renamed++] = lz_xstrdup(full);
    /* Hex, one per line: names may hold any byte but NUL and '/'. */
    size_t n = strlen(full);
    _cleanup_free_ char *line = lz_xcalloc(1, 2 * n + 2);
    lz_hex((const uint8_t *)full, n, line);
    line[2 * n] = '\n';
    _cleanup_close_ int fd =
        openat(ig->rules_fd, "renamed", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 && lz_write_full(fd, line, 2 * n + 1) == 0)
        (void)fsync(fd);
}

static void load_renamed(struct rt_ignore *ig) {
    _cleanup_free_ char *buf = NULL;
    if (lz_read_file_at(ig->rules_fd, "renamed", 64u << 20, &buf, NULL) < 0)
        return;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t n = strlen(line);
        if (n == 0 || n % 2)
            continue;
        char *p = lz_xcalloc(1, n / 2 + 1);
        bool ok = true;
        for (size_t i = 0; i < n / 2 && ok; i++) {
            int hi = lz_hex_value(line[2 * i]), lo = lz_hex_value(line[2 * i + 1]);
            ok = hi >= 0 && lo >= 0 && (hi || lo);
            p[i] = (char)(hi * 16 + lo);
        }
        if (!ok) {
            free(p);
            continue;
        }
        ig->renamed = lz_xrealloc(ig->renamed, (ig->n_renamed + 1) * sizeof *ig->renamed);
        ig->renamed[ig->n_renamed++] = p;
    }
}

/* ---- open and close ---- */

static int read_fd_link(int fd, char *out, size_t size) {
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, out, size - 1);
    if (n < 0 || (size_t)n >= size - 1)
        return -ENAMETOOLONG;
    out[n] = '\0';
    return out[0] == '/' ? 0 : -ESTALE;
}

static int load_index(struct rt_ignore *ig, struct lz_error *err) {
    if (git_repository_index(&ig->index, ig->repo) < 0) {
        const git_error *e = git_error_last();
        return lz_error_set(err, -EIO, "cannot read the Git index: %s", e ? e->message : "unknown error");
    }
    size_t n = git_index_entrycount(ig->index);
    for (size_t i = 0; i < n; i++) {
        const git_index_entry *e = git_index_get_byindex(ig->index, i);
        if (!e || !e->path)
            continue;
        smap_put(&ig->tracked, e->path, 1);
        char d[PATH_MAX];
        dir_of(e->path, d, sizeof d);
        while (d[0] && smap_get(&ig->tracked_dirs, d) < 0) {
            smap_put(&ig->tracked_dirs, d, 1);
            char up[PATH_MAX];
            dir_of(d, up, sizeof up);
            memcpy(d, up, strlen(up) + 1);
        }
    }
    return 0;
}

int rt_ignore_open(struct rt_ignore **ret, const char *root_path, int state_fd, const char *home,
                   const char *xdg_config, struct lz_error *err) {
    *ret = NULL;
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "cannot initialise libsodium");
    int lr = lz_git2_load(err);
    if (lr < 0)
        return lr;
    if (git_libgit2_init() < 0)
        return lz_error_set(err, -EIO, "cannot initialise libgit2");
    /* The host user's global configuration (core.excludesFile and its
     * default), not that of uid 0 in the Domain's namespace. */
    if (home)
        (void)git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_GLOBAL, home);
    char xdg[PATH_MAX];
    if (xdg_config && xdg_config[0] == '/')
        snprintf(xdg, sizeof xdg, "%s/git", xdg_config);
    else if (home)
        snprintf(xdg, sizeof xdg, "%s/.config/git", home);
    else
        xdg[0] = '\0';
    if (xdg[0])
        (void)git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, xdg);
    /* Files of the developer show as uid 0 here; the check is Git's
     * safe.directory, about running the repository's config, which is
     * not what is done here (only ignore rules and the index are read). */
    (void)git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);

    git_repository *repo = NULL;
    if (git_repository_open_ext(&repo, root_path, 0, NULL) < 0) {
        git_libgit2_shutdown();
        return 0; /* not in a Git work tree */
    }
    const char *wd = git_repository_workdir(repo);
    if (!wd) {
        git_repository_free(repo);
        git_libgit2_shutdown();
        return 0; /* bare */
    }
    struct rt_ignore *ig = lz_xcalloc(1, sizeof *ig);
    ig->repo = repo;
    ig->live_fd = ig->store_fd = ig->rules_fd = ig->shadow_fd = ig->meta_fd = -EBADF;
    int rc;
    size_t wl = strlen(wd);
    char root_slash[PATH_MAX];
    if (lz_snprintf(root_slash, sizeof root_slash, "%s/", root_path) < 0 || strncmp(root_slash, wd, wl) != 0) {
        rc = lz_error_set(err, -EINVAL, "the workspace %s is not inside its Git work tree %s", root_path, wd);
        goto fail;
    }
    ig->prefix = lz_xstrdup(root_slash + wl);
    ig->live_fd = open(wd, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ig->live_fd < 0) {
        rc = lz_error_set(err, -errno, "cannot open %s: %s", wd, strerror(errno));
        goto fail;
    }
    ig->store_fd = rt_open_dir_p(state_fd, "tree", true);
    ig->rules_fd = ig->store_fd < 0 ? ig->store_fd : rt_open_dir_p(state_fd, "rules", true);
    ig->shadow_fd = ig->rules_fd < 0 ? ig->rules_fd : rt_open_dir_p(ig->rules_fd, "tree", true);
    int mfd = ig->shadow_fd < 0 ? ig->shadow_fd : rt_open_dir_p(ig->rules_fd, "meta", true);
    if (mfd < 0) {
        rc = lz_error_set(err, mfd, "cannot prepare the Ignored Workspace State: %s", strerror(-mfd));
        goto fail;
    }
    /* Files are written in meta/ and rules/: real directory fds. */
    ig->meta_fd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(mfd);
    int rfd = openat(ig->rules_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ig->meta_fd < 0 || rfd < 0) {
        if (rfd >= 0)
            close(rfd);
        rc = lz_error_set(err, -errno, "cannot open the Ignored Workspace State: %s", strerror(errno));
        goto fail;
    }
    close(ig->rules_fd);
    ig->rules_fd = rfd;
    load_renamed(ig);
    if ((rc = load_index(ig, err)) < 0)
        goto fail;
    /* Rules are read from the accepted copies from now on. */
    char shadow[PATH_MAX];
    if (read_fd_link(ig->shadow_fd, shadow, sizeof shadow) < 0 || git_repository_set_workdir(repo, shadow, 0) < 0) {
        rc = lz_error_set(err, -EIO, "cannot point libgit2 at the accepted ignore rules");
        goto fail;
    }
    *ret = ig;
    return 0;
fail:
    rt_ignore_free(ig);
    return rc;
}

int rt_ignore_open_store(struct rt_ignore **ret, int state_fd, struct lz_error *err) {
    struct rt_ignore *ig = lz_xcalloc(1, sizeof *ig);
    ig->live_fd = ig->rules_fd = ig->shadow_fd = ig->meta_fd = -EBADF;
    ig->prefix = lz_xstrdup("");
    ig->store_fd = rt_open_dir_p(state_fd, "tree", true);
    if (ig->store_fd < 0) {
        int rc = lz_error_set(err, ig->store_fd, "cannot prepare the Domain's store: %s", strerror(-ig->store_fd));
        rt_ignore_free(ig);
        return rc;
    }
    *ret = ig;
    return 0;
}

void rt_ignore_free(struct rt_ignore *ig) {
    if (!ig)
        return;
    if (ig->repo) {
        git_index_free(ig->index);
        git_repository_free(ig->repo);
        git_libgit2_shutdown();
    }
    int fds[] = { ig->live_fd, ig->store_fd, ig->rules_fd, ig->shadow_fd, ig->meta_fd };
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    smap_free(&ig->tracked);
    smap_free(&ig->tracked_dirs);
    smap_free(&ig->acquired);
    smap_free(&ig->decisions);
    for (size_t i = 0; i < ig->n_renamed; i++)
        free(ig->renamed[i]);
    free(ig->renamed);
    free(ig->prefix);
    free(ig);
}
