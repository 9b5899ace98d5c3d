/* domains.c — see domains.h: the Domain Roots' directories, sizes and
 * identities (shared by domains_verify.c and domains_reset.c through
 * domains_int.h), listing, DOMAIN arguments and inspection. */
#include "domains_int.h"
#include "domain_id.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <search.h>
#include <sys/file.h>
#include <sys/stat.h>

/* Deeper directories are not counted (each level holds one fd). */
#define WALK_MAX_DEPTH 128
/* coordinator.log is read only this far for a running Domain's identity. */
#define LOG_HEAD_MAX (64 * 1024)
/* Earlier "wall-clock" times are not wall-clock times (2000-01-01). */
#define WALL_MS_MIN INT64_C(946684800000)

bool lz_domain_id_valid(const char *s) {
    return s && strlen(s) == LZ_DOMAIN_ID_HEX && strspn(s, "0123456789abcdef") == LZ_DOMAIN_ID_HEX;
}

/* A time from the store is shown only when it is plausibly wall-clock
 * (early stores recorded CLOCK_MONOTONIC milliseconds). */
static int64_t plausible_ms(int64_t ms) { return ms >= WALL_MS_MIN ? ms : 0; }

int dom_anchor_name_gen(const char *name, int64_t *ret) {
    if (strncmp(name, "anchor-", 7) != 0)
        return 0;
    const char *d = name + 7;
    size_t n = strlen(d);
    if (n == 0 || n > 18 || strspn(d, "0123456789") != n || d[0] == '0')
        return 0;
    *ret = strtoll(d, NULL, 10);
    return 1;
}

/* ---- directories ---- */

int dom_open_domains(const char *data_root, struct lz_error *err) {
    _cleanup_close_ int rfd = open(data_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0 && errno == ENOENT)
        return lz_error_set(err, -ENOENT, "the Storage Root %s does not exist", data_root);
    if (rfd < 0)
        return lz_error_set(err, -errno, "cannot open the Storage Root %s: %s", data_root, strerror(errno));
    int fd = openat(rfd, "domains", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return lz_error_set(err, -ENOENT, "%s/domains does not exist", data_root);
        return lz_error_set(err, -errno, "cannot open %s/domains%s: %s", data_root,
                            errno == ELOOP || errno == ENOTDIR ? " (not a directory; refusing to follow it)" : "",
                            strerror(errno));
    }
    return fd;
}

int dom_open_root(int domfd, const char *data_root, const char *id, struct lz_error *err) {
    int fd = openat(domfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain %s under %s/domains (see `lazaret state ls`)", id, data_root);
    if (errno == ELOOP || errno == ENOTDIR)
        return lz_error_set(err, -ENOTDIR, "%s/domains/%s is not a directory; refusing to enter it", data_root, id);
    return lz_error_set(err, -errno, "cannot open %s/domains/%s: %s", data_root, id, strerror(errno));
}

int dom_open_by_id(const char *data_root, const char *id, struct lz_error *err) {
    if (!lz_domain_id_valid(id))
        return lz_error_set(err, -EINVAL, "invalid Domain ID");
    _cleanup_close_ int domfd = dom_open_domains(data_root, err);
    if (domfd == -ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain %s: %s/domains does not exist", id, data_root);
    if (domfd < 0)
        return domfd;
    return dom_open_root(domfd, data_root, id, err);
}

int dom_root_path(const char *data_root, const char *id, int rootfd, char **ret, struct lz_error *err) {
    char *p = lz_xasprintf("%s/domains/%s", data_root, id);
    struct stat a, b;
    if (lstat(p, &a) < 0 || fstat(rootfd, &b) < 0 || !S_ISDIR(a.st_mode) || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
        int r = lz_error_set(err, -ESTALE, "%s changed while it was being opened; try again", p);
        free(p);
        return r;
    }
    *ret = p;
    return 0;
}

int lz_domain_store_open_readonly(const char *data_root, const char *id, struct lz_store **ret, struct lz_error *err) {
    _cleanup_close_ int rootfd = dom_open_by_id(data_root, id, err);
    if (rootfd < 0)
        return rootfd;
    _cleanup_free_ char *path = NULL;
    int r = dom_root_path(data_root, id, rootfd, &path, err);
    if (r < 0)
        return r;
    struct lz_store_identity sid = { .domain_id = id };
    return lz_store_open_readonly(path, &sid, ret, err);
}

int dom_lock(int rootfd, int *ret_fd, struct lz_error *err) { return dom_lock_wait(rootfd, 0, ret_fd, err); }

int dom_lock_wait(int rootfd, int seconds, int *ret_fd, struct lz_error *err) {
    /* Created if missing, exactly as the coordinator does, so that both
     * always lock the same inode. */
    _cleanup_close_ int fd = openat(rootfd, "lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, -errno, "cannot open the Domain lock: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return lz_error_set(err, -EINVAL, "the Domain lock is not a regular file");
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            return lz_error_set(err, -errno, "flock on the Domain lock: %s", strerror(errno));
        if (seconds <= 0)
            return 0;
        int r = lz_flock_timeout(fd, seconds);
        if (r == -ETIMEDOUT)
            return 0;
        if (r < 0)
            return lz_error_set(err, r, "flock on the Domain lock: %s", strerror(-r));
    }
    *ret_fd = TAKE_FD(fd);
    return 1;
}

/* ---- sizes ---- */

struct ikey {
    dev_t dev;
    ino_t ino;
};

static int ikey_cmp(const void *a, const void *b) {
    const struct ikey *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

struct walk {
    dev_t dev;
    uint64_t bytes;
    bool partial;
    void *seen; /* hard-linked inodes already counted */
};

static void walk_add(struct walk *w, const struct stat *st) {
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
        struct ikey *k = lz_xmalloc(sizeof *k);
        *k = (struct ikey){ st->st_dev, st->st_ino };
        struct ikey **slot = tsearch(k, &w->seen, ikey_cmp);
        if (!slot)
            abort();
        if (*slot != k) {
            free(k);
            return;
        }
    }
    w->bytes += (uint64_t)st->st_blocks * 512;
}

/* Counts the entries beneath fd (owned, closed here); never follows a
 * symlink and never leaves w->dev. */
static void walk_dir(struct walk *w, int fd, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        w->partial = true;
        return;
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                w->partial = true;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                w->partial = true;
            continue;
        }
        walk_add(w, &st);
        if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev)
            continue;
        if (depth >= WALK_MAX_DEPTH) {
            w->partial = true;
            continue;
        }
        int c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (c < 0) {
            if (errno != ENOENT)
                w->partial = true;
            continue;
        }
        walk_dir(w, c, depth + 1);
    }
    closedir(d);
}

/* Bytes allocated by the directory dirfd and everything beneath it. */
static uint64_t tree_size(int dirfd, bool *ret_partial) {
    struct walk w = { 0 };
    struct stat st;
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        if (ret_partial)
            *ret_partial = true;
        return 0;
    }
    w.dev = st.st_dev;
    walk_add(&w, &st);
    walk_dir(&w, fd, 0);
    tdestroy(w.seen, free);
    if (ret_partial && w.partial)
        *ret_partial = true;
    return w.bytes;
}

/* Opens a relative path beneath dirfd with no symlink anywhere (a
 * persistent dir's upper, "usr/local"); "." and ".." segments are refused,
 * not resolved. */
static int open_beneath(int dirfd, const char *rel) {
    for (const char *c = rel;;) {
        size_t n = strcspn(c, "/");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return -EINVAL;
        if (!c[n])
            break;
        c += n + 1;
    }
    return lz_openat_beneath(dirfd, rel, O_RDONLY | O_DIRECTORY, 0, false);
}

/* ---- identity of a running Domain (display only) ---- */

void dom_identity_from_log(int rootfd, const char *id, char **ret_profile, char **ret_workspace) {
    _cleanup_close_ int fd = openat(rootfd, "coordinator.log", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    _cleanup_free_ char *buf = lz_xmalloc(LOG_HEAD_MAX + 1);
    ssize_t n = lz_read_full(fd, buf, LOG_HEAD_MAX);
    if (n <= 0)
        return;
    buf[n] = '\0';
    _cleanup_free_ char *needle = lz_xasprintf("coordinator for Domain %s (profile ", id);
    for (char *p = strstr(buf, needle); p; p = strstr(p + 1, needle)) {
        char *prof = p + strlen(needle);
        char *eol = strchr(prof, '\n');
        char *sep = strstr(prof, ", workspace ");
        if (!eol || !sep || sep > eol)
            continue;
        char *ws = sep + strlen(", workspace ");
        if (eol == ws || eol[-1] != ')')
            continue;
        _cleanup_free_ char *pn = lz_xstrndup(prof, (size_t)(sep - prof));
        _cleanup_free_ char *wn = lz_xstrndup(ws, (size_t)(eol - 1 - ws));
        uint8_t raw[LZ_DOMAIN_ID_LEN];
        char hex[LZ_DOMAIN_ID_HEX + 1];
        if (!lz_profile_name_valid(pn) || wn[0] != '/' || lz_domain_id_v1(pn, wn, raw) < 0)
            continue;
        lz_hex(raw, sizeof raw, hex);
        if (strcmp(hex, id) != 0)
            continue;
        *ret_profile = TAKE_PTR(pn);
        *ret_workspace = TAKE_PTR(wn);
        return;
    }
}

/* ---- listing ---- */

int dom_scan(int domfd, const char *data_root, char ***ret_ids, size_t *ret_n, char ***ret_strays, size_t *ret_ns,
             struct lz_error *err) {
    char **names = NULL;
    size_t n_names = 0;
    int r = lz_dir_names(domfd, SIZE_MAX, &names, &n_names);
    if (r < 0)
        return lz_error_set(err, r, "cannot read %s/domains: %s", data_root, strerror(-r));
    /* Both lists keep the sorted order of names. */
    char **ids = lz_xcalloc(n_names ? n_names : 1, sizeof *ids), **strays = NULL;
    size_t n = 0, ns = 0;
    if (ret_strays)
        strays = lz_xcalloc(n_names ? n_names : 1, sizeof *strays);
    for (size_t i = 0; i < n_names; i++) {
        struct stat st;
        bool is_root = lz_domain_id_valid(names[i]) && fstatat(domfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode);
        if (is_root)
            ids[n++] = TAKE_PTR(names[i]);
        else if (ret_strays)
            strays[ns++] = TAKE_PTR(names[i]);
    }
    lz_strv_free(names, n_names);
    *ret_ids = ids;
    *ret_n = n;
    if (ret_strays) {
        *ret_strays = strays;
        *ret_ns = ns;
    }
    return 0;
}

static void summarize(int domfd, const char *data_root, const char *id, struct lz_domain_summary *s) {
    struct lz_error e = { 0 };
    snprintf(s->id, sizeof s->id, "%s", id);
    _cleanup_close_ int rootfd = dom_open_root(domfd, data_root, id, &e);
    if (rootfd < 0) {
        s->problem = lz_xstrdup(e.msg);
        return;
    }
    _cleanup_close_ int lockfd = -EBADF;
    int r = dom_lock(rootfd, &lockfd, &e);
    if (r == 0) {
        s->running = true;
        dom_identity_from_log(rootfd, id, &s->profile, &s->workspace);
    } else if (r < 0) {
        s->problem = lz_xstrdup(e.msg);
    } else {
        _cleanup_free_ char *path = NULL;
        _cleanup_store_ struct lz_store *st = NULL;
        struct lz_store_snapshot snap;
        if ((r = dom_root_path(data_root, id, rootfd, &path, &e)) < 0 ||
            (r = lz_store_open(path, NULL, false, &st, &e)) < 0 || (r = lz_store_read(st, &snap, &e)) < 0) {
            s->problem = lz_xstrdup(r == -ENOENT ? "no Domain Store yet (the Domain never started)" : e.msg);
        } else {
            s->has_store = true;
            s->profile = TAKE_PTR(snap.profile);
            s->workspace = TAKE_PTR(snap.workspace);
            s->last_used_ms = plausible_ms(snap.last_used_ms);
            lz_store_snapshot_clear(&snap);
        }
    }
    /* Sizes need no lock: the coordinator must not wait for a long walk. */
    lz_closep(&lockfd);
    s->size = tree_size(rootfd, &s->size_partial);
}

static int cmp_summary(const void *a, const void *b) {
    const struct lz_domain_summary *x = a, *y = b;
    if (x->running != y->running)
        return x->running ? -1 : 1;
    if (x->last_used_ms != y->last_used_ms)
        return x->last_used_ms > y->last_used_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

int lz_domains_list(const char *data_root, struct lz_domain_list *ret, struct lz_error *err) {
    struct lz_domain_list l = { 0 };
    _cleanup_close_ int domfd = dom_open_domains(data_root, err);
    if (domfd == -ENOENT) {
        *ret = l;
        return 0;
    }
    if (domfd < 0)
        return domfd;
    char **ids = NULL;
    size_t n = 0;
    int r = dom_scan(domfd, data_root, &ids, &n, &l.strays, &l.n_strays, err);
    if (r < 0)
        return r;
    l.v = lz_xcalloc(n, sizeof *l.v);
    for (size_t i = 0; i < n; i++)
        summarize(domfd, data_root, ids[i], &l.v[l.n++]);
    lz_strv_free(ids, n);
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, cmp_summary);
    *ret = l;
    return 0;
}

void lz_domain_list_clear(struct lz_domain_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].profile);
        free(l->v[i].workspace);
        free(l->v[i].problem);
    }
    free(l->v);
    lz_strv_free(l->strays, l->n_strays);
    *l = (struct lz_domain_list){ 0 };
}

/* ---- DOMAIN arguments ---- */

int lz_domains_resolve(const char *data_root, const char *arg, char ret_id[static LZ_DOMAIN_ID_HEX + 1],
                       struct lz_error *err) {
    size_t len = strlen(arg);
    char want[LZ_DOMAIN_ID_HEX + 1];
    if (len < LZ_DOMAIN_PREFIX_MIN || len > LZ_DOMAIN_ID_HEX || strspn(arg, "0123456789abcdefABCDEF") != len)
        return lz_error_set(err, -EINVAL,
                            "\"%.80s\" is not a Domain: give its ID or a prefix of at least %d hex characters "
                            "(see `lazaret state ls`), or --workspace PATH [-p PROFILE]",
                            arg, LZ_DOMAIN_PREFIX_MIN);
    for (size_t i = 0; i <= len; i++)
        want[i] = (char)(arg[i] >= 'A' && arg[i] <= 'F' ? arg[i] - 'A' + 'a' : arg[i]);
    _cleanup_close_ int domfd = dom_open_domains(data_root, err);
    if (domfd == -ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain matches %s: %s/domains does not exist yet", want, data_root);
    if (domfd < 0)
        return domfd;
    char **ids = NULL;
    size_t n = 0;
    int r = dom_scan(domfd, data_root, &ids, &n, NULL, NULL, err);
    if (r < 0)
        return r;
    size_t hits = 0, first = 0;
    char list[512] = "";
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(ids[i], want, len) != 0)
            continue;
        if (hits++ == 0)
            first = i;
        if (off < sizeof list) {
            int k = snprintf(list + off, sizeof list - off, "%s%.12s", hits > 1 ? ", " : "", ids[i]);
            off += k > 0 ? (size_t)k : 0;
        }
    }
    if (hits == 1)
        snprintf(ret_id, LZ_DOMAIN_ID_HEX + 1, "%s", ids[first]);
    lz_strv_free(ids, n);
    if (hits == 0)
        return lz_error_set(err, -ENOENT, "no Domain matches %s (see `lazaret state ls`)", want);
    if (hits > 1)
        return lz_error_set(err, -EEXIST, "%s is ambiguous: it matches %zu Domains (%s); give more characters", want,
                            hits, list);
    return 0;
}

/* ---- the Domain's own configuration (optional) ---- */

struct lz_config *dom_config(const char *config_path, const char *id, const char *profile, const char *workspace) {
    if (!profile || !workspace)
        return NULL;
    struct lz_config_opts o = {
        .config_path = config_path, .profile = profile, .workspace = workspace, .workspace_exact = true
    };
    struct lz_config *c = NULL;
    if (lz_config_load(&o, &c, NULL) < 0)
        return NULL;
    if (strcmp(c->domain_id_hex, id) != 0) {
        lz_config_free(c);
        return NULL;
    }
    return c;
}

/* ---- inspection ---- */

int dom_proc_alive(const struct lz_procid *id) {
    int fd = lz_procid_open(id);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return fd == -ESRCH ? 0 : fd;
}

static void add_pdir(struct lz_domain_info *in, const char *path, int upperfd, const char *rel) {
    in->pdirs = lz_xrealloc(in->pdirs, (in->n_pdirs + 1) * sizeof *in->pdirs);
    struct lz_domain_pdir *p = &in->pdirs[in->n_pdirs++];
    *p = (struct lz_domain_pdir){ .path = lz_xstrdup(path) };
    if (upperfd < 0)
        return;
    _cleanup_close_ int fd = open_beneath(upperfd, rel);
    if (fd < 0)
        return;
    p->present = true;
    p->size = tree_size(fd, NULL);
}

int lz_domain_inspect(const char *data_root, const char *config_path, const char *id, struct lz_domain_info *ret,
                      struct lz_error *err) {
    _cleanup_close_ int rootfd = dom_open_by_id(data_root, id, err);
    if (rootfd < 0)
        return rootfd;
    _cleanup_domain_info_ struct lz_domain_info in = { 0 };
    snprintf(in.id, sizeof in.id, "%s", id);
    _cleanup_close_ int lockfd = -EBADF, anchorfd = -EBADF;
    int r = dom_lock(rootfd, &lockfd, err);
    if (r < 0)
        return r;
    if (r == 0) {
        in.running = true;
        dom_identity_from_log(rootfd, id, &in.profile, &in.workspace);
    } else {
        _cleanup_free_ char *path = NULL;
        _cleanup_store_ struct lz_store *st = NULL;
        if ((r = dom_root_path(data_root, id, rootfd, &path, err)) < 0)
            return r;
        r = lz_store_open(path, NULL, false, &st, err);
        if (r < 0 && r != -ENOENT)
            return lz_error_prefix(err, r, "Domain %.12s", id);
        if (r == 0) {
            if ((r = lz_store_read(st, &in.snap, err)) < 0)
                return lz_error_prefix(err, r, "Domain %.12s", id);
            in.has_store = true;
            in.snap.created_ms = plausible_ms(in.snap.created_ms);
            in.snap.last_used_ms = plausible_ms(in.snap.last_used_ms);
            in.profile = in.snap.profile ? lz_xstrdup(in.snap.profile) : NULL;
            in.workspace = in.snap.workspace ? lz_xstrdup(in.snap.workspace) : NULL;
            in.proc_alive = lz_xcalloc(in.snap.n_procs, sizeof *in.proc_alive);
            for (size_t i = 0; i < in.snap.n_procs; i++)
                in.proc_alive[i] = dom_proc_alive(&in.snap.procs[i].id);
            in.session_alive = lz_xcalloc(in.snap.n_sessions, sizeof *in.session_alive);
            for (size_t i = 0; i < in.snap.n_sessions; i++)
                in.session_alive[i] = strcmp(in.snap.sessions[i].phase, "unassigned") != 0
                    ? dom_proc_alive(&in.snap.sessions[i].exec)
                    : 0;
            char an[32];
            snprintf(an, sizeof an, "anchor-%" PRId64, in.snap.anchor_gen);
            anchorfd = openat(rootfd, an, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            in.anchor_present = anchorfd >= 0;
        }
    }
    lz_closep(&lockfd);

    /* Sizes, outside the lock. */
    in.size = tree_size(rootfd, NULL);
    _cleanup_close_ int ignfd = openat(rootfd, "ignored", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ignfd >= 0) {
        in.ignored_present = true;
        in.ignored_size = tree_size(ignfd, NULL);
    }
    if (anchorfd >= 0) {
        in.anchor_size = tree_size(anchorfd, NULL);
        _cleanup_close_ int upperfd = openat(anchorfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct lz_config *c = dom_config(config_path, id, in.profile, in.workspace);
        if (c) {
            in.pdirs_from_config = true;
            for (size_t i = 0; i < c->profile.n_persistent_dirs; i++)
                add_pdir(&in, c->profile.persistent_dirs[i], upperfd, c->profile.persistent_dirs[i] + 1);
            lz_config_free(c);
        } else if (upperfd >= 0) {
            char **names = NULL;
            size_t n = 0;
            if (lz_dir_names(upperfd, SIZE_MAX, &names, &n) < 0)
                n = 0;
            for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = lz_xasprintf("/%s", names[i]);
                add_pdir(&in, p, upperfd, names[i]);
            }
            lz_strv_free(names, n);
        }
    }

    struct lz_catalog cat;
    struct lz_error cerr = { 0 };
    if (lz_catalog_read(data_root, &cat, &cerr) == 0) {
        for (size_t i = 0; i < cat.n_leases; i++) {
            if (strcmp(cat.leases[i].domain_id, id) != 0)
                continue;
            in.leases = lz_xrealloc(in.leases, (in.n_leases + 1) * sizeof *in.leases);
            in.leases[in.n_leases++] = cat.leases[i];
        }
        lz_catalog_clear(&cat);
    }
    *ret = in;
    in = (struct lz_domain_info){ 0 }; /* handed over */
    return 0;
}

void lz_domain_info_clear(struct lz_domain_info *i) {
    free(i->profile);
    free(i->workspace);
    if (i->has_store)
        lz_store_snapshot_clear(&i->snap);
    free(i->proc_alive);
    free(i->session_alive);
    for (size_t k = 0; k < i->n_pdirs; k++)
        free(i->pdirs[k].path);
    free(i->pdirs);
    free(i->leases);
    *i = (struct lz_domain_info){ 0 };
}
