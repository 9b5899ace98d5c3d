/* domains.c — see domains.h. */
#include "domains.h"
#include "idmap.h"
#include "config.h"
#include "domain_id.h"
#include "paths.h"
#include "recovery.h"
#include "spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <sched.h>
#include <search.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>

/* Deeper directories are not counted (each level holds one fd). */
#define WALK_MAX_DEPTH 128
/* coordinator.log is read only this far for a running Domain's identity. */
#define LOG_HEAD_MAX (64 * 1024)
/* The deletion inside the Domain's user namespace. */
#define RM_CHILD_TIMEOUT_MS (30 * 60 * 1000)
/* Earlier "wall-clock" times are not wall-clock times (2000-01-01). */
#define WALL_MS_MIN INT64_C(946684800000)

static void store_closep(struct lz_store **st) { lz_store_close(*st); }
#define _cleanup_store_ _cleanup_(store_closep)

bool lz_domain_id_valid(const char *s) {
    return s && strlen(s) == LZ_DOMAIN_ID_HEX && strspn(s, "0123456789abcdef") == LZ_DOMAIN_ID_HEX;
}

/* A time from the store is shown only when it is plausibly wall-clock
 * (early stores recorded CLOCK_MONOTONIC milliseconds). */
static int64_t plausible_ms(int64_t ms) { return ms >= WALL_MS_MIN ? ms : 0; }

/* "anchor-<N>" with N a positive decimal without leading zeros: 1 and N,
 * else 0. */
static int anchor_name_gen(const char *name, int64_t *ret) {
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

static int open_domains_dir(const char *data_root, struct lz_error *err) {
    _cleanup_close_ int rfd = open(data_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return errno == ENOENT ? -ENOENT : lz_error_set(err, -errno, "cannot open the Storage Root %s: %s",
                                                        data_root, strerror(errno));
    int fd = openat(rfd, "domains", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        return lz_error_set(err, -errno, "cannot open %s/domains%s: %s", data_root,
                            errno == ELOOP || errno == ENOTDIR ? " (not a directory; refusing to follow it)" : "",
                            strerror(errno));
    }
    return fd;
}

/* The Domain Root of a validated ID, as a directory fd (never a symlink). */
static int open_root(int domfd, const char *data_root, const char *id, struct lz_error *err) {
    int fd = openat(domfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain %s under %s/domains (see `lazaret state ls`)", id, data_root);
    if (errno == ELOOP || errno == ENOTDIR)
        return lz_error_set(err, -ENOTDIR, "%s/domains/%s is not a directory; refusing to enter it", data_root, id);
    return lz_error_set(err, -errno, "cannot open %s/domains/%s: %s", data_root, id, strerror(errno));
}

/* The Domain Root of a validated 64-hex ID under <data_root>/domains. */
static int open_domain_by_id(const char *data_root, const char *id, struct lz_error *err) {
    if (!lz_domain_id_valid(id))
        return lz_error_set(err, -EINVAL, "invalid Domain ID");
    _cleanup_close_ int domfd = open_domains_dir(data_root, err);
    if (domfd == -ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain %s: %s/domains does not exist", id, data_root);
    if (domfd < 0)
        return domfd;
    return open_root(domfd, data_root, id, err);
}

/* The path lz_store_open() needs, checked to still name the directory we
 * hold (a swap for a symlink between the two is refused). */
static int root_path(const char *data_root, const char *id, int rootfd, char **ret, struct lz_error *err) {
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

/* Takes the Domain flock without waiting: 1 held by us (*ret_fd), 0 held
 * by someone else (the Domain is running), -errno. */
static int lock_domain(int rootfd, int *ret_fd, struct lz_error *err) {
    /* Created if missing, exactly as the coordinator does, so that both
     * always lock the same inode. */
    _cleanup_close_ int fd = openat(rootfd, "lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, -errno, "cannot open the Domain lock: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return lz_error_set(err, -EINVAL, "the Domain lock is not a regular file");
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return 0;
        return lz_error_set(err, -errno, "flock on the Domain lock: %s", strerror(errno));
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

/* Opens a relative path beneath dirfd one component at a time, with no
 * symlink anywhere (a persistent dir's upper, "usr/local"). */
static int open_beneath(int dirfd, const char *rel) {
    _cleanup_close_ int cur = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -errno;
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, ".") || !strcmp(c, ".."))
            return -EINVAL;
        int n = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (n < 0)
            return -errno;
        close(cur);
        cur = n;
    }
    return TAKE_FD(cur);
}

/* ---- identity of a running Domain (display only) ---- */

/* From the coordinator's "coordinator for Domain <id> (profile P, workspace
 * W)" line, accepted only when (P, W) derives this very ID. */
static void identity_from_log(int rootfd, const char *id, char **ret_profile, char **ret_workspace) {
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

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Names under domains/ that are Domain Roots (valid ID, a real directory),
 * sorted; the others go to strays when asked. */
static int scan_domains(int domfd, char ***ret_ids, size_t *ret_n, char ***ret_strays, size_t *ret_ns) {
    int fd = openat(domfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    char **ids = NULL, **strays = NULL;
    size_t n = 0, ns = 0;
    int r = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            r = -errno;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        bool is_root = lz_domain_id_valid(de->d_name) &&
                       fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (is_root) {
            ids = lz_xrealloc(ids, (n + 1) * sizeof *ids);
            ids[n++] = lz_xstrdup(de->d_name);
        } else if (ret_strays) {
            strays = lz_xrealloc(strays, (ns + 1) * sizeof *strays);
            strays[ns++] = lz_xstrdup(de->d_name);
        }
    }
    closedir(d);
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(ids[i]);
        for (size_t i = 0; i < ns; i++)
            free(strays[i]);
        free(ids);
        free(strays);
        return r;
    }
    if (n)
        qsort(ids, n, sizeof *ids, cmp_str);
    if (ns)
        qsort(strays, ns, sizeof *strays, cmp_str);
    *ret_ids = ids;
    *ret_n = n;
    if (ret_strays) {
        *ret_strays = strays;
        *ret_ns = ns;
    }
    return 0;
}

static void strv_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void summarize(int domfd, const char *data_root, const char *id, struct lz_domain_summary *s) {
    struct lz_error e = { 0 };
    snprintf(s->id, sizeof s->id, "%s", id);
    _cleanup_close_ int rootfd = open_root(domfd, data_root, id, &e);
    if (rootfd < 0) {
        s->problem = lz_xstrdup(e.msg);
        return;
    }
    _cleanup_close_ int lockfd = -EBADF;
    int r = lock_domain(rootfd, &lockfd, &e);
    if (r == 0) {
        s->running = true;
        identity_from_log(rootfd, id, &s->profile, &s->workspace);
    } else if (r < 0) {
        s->problem = lz_xstrdup(e.msg);
    } else {
        _cleanup_free_ char *path = NULL;
        _cleanup_store_ struct lz_store *st = NULL;
        struct lz_store_snapshot snap;
        if ((r = root_path(data_root, id, rootfd, &path, &e)) < 0 ||
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
    _cleanup_close_ int domfd = open_domains_dir(data_root, err);
    if (domfd == -ENOENT) {
        *ret = l;
        return 0;
    }
    if (domfd < 0)
        return domfd;
    char **ids = NULL;
    size_t n = 0;
    int r = scan_domains(domfd, &ids, &n, &l.strays, &l.n_strays);
    if (r < 0)
        return lz_error_set(err, r, "cannot read %s/domains: %s", data_root, strerror(-r));
    l.v = lz_xcalloc(n, sizeof *l.v);
    for (size_t i = 0; i < n; i++)
        summarize(domfd, data_root, ids[i], &l.v[l.n++]);
    strv_free(ids, n);
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
    strv_free(l->strays, l->n_strays);
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
    _cleanup_close_ int domfd = open_domains_dir(data_root, err);
    if (domfd == -ENOENT)
        return lz_error_set(err, -ENOENT, "no Domain matches %s: %s/domains does not exist yet", want, data_root);
    if (domfd < 0)
        return domfd;
    char **ids = NULL;
    size_t n = 0;
    int r = scan_domains(domfd, &ids, &n, NULL, NULL);
    if (r < 0)
        return lz_error_set(err, r, "cannot read %s/domains: %s", data_root, strerror(-r));
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
    strv_free(ids, n);
    if (hits == 0)
        return lz_error_set(err, -ENOENT, "no Domain matches %s (see `lazaret state ls`)", want);
    if (hits > 1)
        return lz_error_set(err, -EEXIST, "%s is ambiguous: it matches %zu Domains (%s); give more characters", want,
                            hits, list);
    return 0;
}

/* ---- the Domain's own configuration (optional) ---- */

/* Loads the Domain's profile for its workspace; NULL when that is not
 * possible (profile gone, workspace gone, configuration changed). */
static struct lz_config *domain_config(const char *config_path, const char *id, const char *profile,
                                       const char *workspace) {
    if (!profile || !workspace)
        return NULL;
    struct lz_config_opts o = { .config_path = config_path, .profile = profile, .workspace = workspace };
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

/* 1 alive (exactly that process), 0 gone, -errno when it cannot be told. */
static int proc_alive(const struct lz_procid *id) {
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
    _cleanup_close_ int rootfd = open_domain_by_id(data_root, id, err);
    if (rootfd < 0)
        return rootfd;
    struct lz_domain_info in = { 0 };
    snprintf(in.id, sizeof in.id, "%s", id);
    _cleanup_close_ int lockfd = -EBADF, anchorfd = -EBADF;
    int r = lock_domain(rootfd, &lockfd, err);
    if (r < 0)
        return r;
    if (r == 0) {
        in.running = true;
        identity_from_log(rootfd, id, &in.profile, &in.workspace);
    } else {
        _cleanup_free_ char *path = NULL;
        _cleanup_store_ struct lz_store *st = NULL;
        if ((r = root_path(data_root, id, rootfd, &path, err)) < 0)
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
                in.proc_alive[i] = proc_alive(&in.snap.procs[i].id);
            in.session_alive = lz_xcalloc(in.snap.n_sessions, sizeof *in.session_alive);
            for (size_t i = 0; i < in.snap.n_sessions; i++)
                in.session_alive[i] = strcmp(in.snap.sessions[i].phase, "unassigned") != 0
                                          ? proc_alive(&in.snap.sessions[i].exec)
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
    if (anchorfd >= 0) {
        in.anchor_size = tree_size(anchorfd, NULL);
        _cleanup_close_ int upperfd = openat(anchorfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct lz_config *c = domain_config(config_path, id, in.profile, in.workspace);
        if (c) {
            in.pdirs_from_config = true;
            for (size_t i = 0; i < c->profile.n_persistent_dirs; i++)
                add_pdir(&in, c->profile.persistent_dirs[i], upperfd, c->profile.persistent_dirs[i] + 1);
            lz_config_free(c);
        } else if (upperfd >= 0) {
            char **names = NULL;
            size_t n = 0;
            int fd = openat(upperfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
            if (!d && fd >= 0)
                close(fd);
            for (struct dirent *de; d && (de = readdir(d));) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                    continue;
                names = lz_xrealloc(names, (n + 1) * sizeof *names);
                names[n++] = lz_xstrdup(de->d_name);
            }
            if (d)
                closedir(d);
            if (n)
                qsort(names, n, sizeof *names, cmp_str);
            for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = lz_xasprintf("/%s", names[i]);
                add_pdir(&in, p, upperfd, names[i]);
            }
            strv_free(names, n);
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

/* ---- verification ---- */

struct vctx {
    const char *data_root;
    const char *config_path;
    lz_domain_report_fn report;
    void *ud;
    const struct lz_catalog *cat; /* NULL when it could not be read */
    struct lz_verify_result *res;
    struct lz_domain_verdict *cur; /* NULL for the Storage Root */
};

static void vreport(struct vctx *v, const char *sev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void vreport(struct vctx *v, const char *sev, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!strcmp(sev, "error")) {
        v->res->n_errors++;
        if (v->cur)
            v->cur->n_errors++;
    } else if (!strcmp(sev, "warn")) {
        v->res->n_warnings++;
        if (v->cur)
            v->cur->n_warnings++;
    }
    if (v->report)
        v->report(v->ud, v->cur ? v->cur->id : NULL, sev, msg);
}

static const struct lz_store_gen *find_gen(const struct lz_store_snapshot *s, int64_t gen) {
    for (size_t i = 0; i < s->n_gens; i++)
        if (s->gens[i].gen == gen)
            return &s->gens[i];
    return NULL;
}

static const struct lz_store_part *find_part(const struct lz_store_snapshot *s, int64_t gen, enum lz_role role) {
    for (size_t i = 0; i < s->n_parts; i++)
        if (s->parts[i].gen == gen && s->parts[i].role == role)
            return &s->parts[i];
    return NULL;
}

static bool has_lease(const struct lz_catalog *cat, const char *artifact, const char *domain, int64_t gen) {
    for (size_t i = 0; i < cat->n_leases; i++)
        if (cat->leases[i].generation == gen && !strcmp(cat->leases[i].domain_id, domain) &&
            !strcmp(cat->leases[i].artifact_id, artifact))
            return true;
    return false;
}

/* Is `name` (an entry of the Domain Root) the top of a volume of the
 * Domain's profile ({domain_dir}/...)? */
static bool is_volume_top(const struct lz_config *c, const char *name) {
    if (!c)
        return false;
    size_t dl = strlen(c->domain_dir), nl = strlen(name);
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        const char *h = c->profile.volumes[i].host;
        if (!strncmp(h, c->domain_dir, dl) && h[dl] == '/' && !strncmp(h + dl + 1, name, nl) &&
            (h[dl + 1 + nl] == '/' || h[dl + 1 + nl] == '\0'))
            return true;
    }
    return false;
}

static void verify_entries(struct vctx *v, int rootfd, const struct lz_store_snapshot *snap,
                           const struct lz_config *c) {
    int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        vreport(v, "error", "cannot read the Domain Root: %s", strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            names = lz_xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = lz_xstrdup(de->d_name);
        }
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    bool current_seen = false;
    for (size_t i = 0; i < n; i++) {
        const char *nm = names[i];
        struct stat st;
        if (fstatat(rootfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        int64_t g;
        bool want_dir = false, want_reg = false;
        /* SQLite's -wal/-shm exist while a store is open (ours, now). */
        if (!strcmp(nm, "lock") || !strcmp(nm, "domain.db") || !strcmp(nm, "domain.db-journal") ||
            !strcmp(nm, "domain.db-wal") || !strcmp(nm, "domain.db-shm") || !strcmp(nm, "coordinator.log")) {
            want_reg = true;
        } else if (!strcmp(nm, "overlay")) {
            want_dir = true;
        } else if (anchor_name_gen(nm, &g)) {
            want_dir = true;
            if (snap && g == snap->anchor_gen) {
                current_seen = S_ISDIR(st.st_mode);
            } else if (snap && snap->reset_intent && !strcmp(snap->reset_intent, nm)) {
                vreport(v, "warn",
                        "an interrupted `lazaret state reset` left the old State Anchor %s to delete (the Domain "
                        "already uses the new, empty anchor-%" PRId64 "); the next `lazaret state reset` finishes it",
                        nm, snap->anchor_gen);
            } else if (snap) {
                vreport(v, "warn",
                        "%s is not the current State Anchor (anchor-%" PRId64 "): a leftover of an interrupted "
                        "reset; the next `lazaret state reset` deletes it",
                        nm, snap->anchor_gen);
            }
        } else if (is_volume_top(c, nm)) {
            vreport(v, "info", "%s holds a volume of profile %s", nm, c->profile.name);
            continue;
        } else {
            vreport(v, "warn", "unexpected entry %s in the Domain Root (Lazaret did not create it)", nm);
            continue;
        }
        if (S_ISLNK(st.st_mode))
            vreport(v, "error", "%s is a symlink; Lazaret never follows it (SR-14)", nm);
        else if (want_dir && !S_ISDIR(st.st_mode))
            vreport(v, "error", "%s is not a directory", nm);
        else if (want_reg && !S_ISREG(st.st_mode))
            vreport(v, "error", "%s is not a regular file", nm);
    }
    if (snap && snap->reset_intent) {
        char want[32];
        snprintf(want, sizeof want, "anchor-%" PRId64, snap->anchor_gen);
        int64_t g;
        bool listed = false;
        for (size_t i = 0; i < n; i++)
            listed = listed || !strcmp(names[i], snap->reset_intent);
        if (!anchor_name_gen(snap->reset_intent, &g) || !strcmp(snap->reset_intent, want))
            vreport(v, "error", "the store's reset intent \"%.64s\" does not name an old State Anchor",
                    snap->reset_intent);
        else if (!listed)
            vreport(v, "warn",
                    "an interrupted `lazaret state reset` deleted %s but did not record it; the next `lazaret "
                    "state reset` clears the intent",
                    snap->reset_intent);
    }
    if (snap && !current_seen)
        vreport(v, "info", "the State Anchor anchor-%" PRId64 " does not exist yet (the next start creates it)",
                snap->anchor_gen);
    strv_free(names, n);
}

static const char *alive_text(int a) {
    return a == 1 ? "alive (recovery kills exactly this process)" : a == 0 ? "gone" : "unknown";
}

static void verify_generations(struct vctx *v, const char *id, const struct lz_store_snapshot *s) {
    for (size_t i = 0; i < s->n_gens; i++) {
        const struct lz_store_gen *g = &s->gens[i];
        if (!strcmp(g->state, "clean"))
            continue;
        char procs[1024] = "";
        size_t off = 0;
        for (size_t k = 0; k < s->n_procs && off < sizeof procs; k++) {
            const struct lz_store_proc *p = &s->procs[k];
            if (p->gen != g->gen)
                continue;
            int w = snprintf(procs + off, sizeof procs - off, "%s%s %s pid %" PRId64 " (%s): %s", off ? "; " : "",
                             lz_role_name(p->role), p->slot, p->id.pid, p->phase, alive_text(proc_alive(&p->id)));
            off += w > 0 ? (size_t)w : 0;
        }
        for (size_t k = 0; k < s->n_sessions && off < sizeof procs; k++) {
            const struct lz_store_session *t = &s->sessions[k];
            if (t->gen != g->gen || !strcmp(t->state, "clean") || !strcmp(t->phase, "unassigned"))
                continue;
            int w = snprintf(procs + off, sizeof procs - off,
                             "%ssession %" PRId64 " exec client pid %" PRId64 " (%s): %s", off ? "; " : "",
                             t->session, t->exec.pid, t->phase, alive_text(proc_alive(&t->exec)));
            off += w > 0 ? (size_t)w : 0;
        }
        vreport(v, "warn",
                "generation %" PRId64 " was left %s (interrupted): the next `lazaret run` in this Domain recovers "
                "it; recorded processes: %s",
                g->gen, g->state, procs[0] ? procs : "none");
    }
    if (!v->cat)
        return;
    /* The store says a lease is held: the catalog must have exactly it. */
    for (size_t i = 0; i < s->n_parts; i++) {
        const struct lz_store_part *p = &s->parts[i];
        if (p->role != LZ_ROLE_PREPARED_LOWER || p->state != LZ_P_LEASE_HELD)
            continue;
        if (!p->artifact_id || !has_lease(v->cat, p->artifact_id, id, p->gen))
            vreport(v, "error",
                    "inconsistent: generation %" PRId64 " holds a lease on prepared artifact %.12s per the Domain "
                    "Store, but the Storage Catalog has no such lease; recovery refuses to guess, so `lazaret run` "
                    "and `lazaret state reset` fail in this Domain until this is resolved",
                    p->gen, p->artifact_id ? p->artifact_id : "(none)");
    }
    /* Every catalog lease of this Domain must belong to a live generation
     * that recorded that artifact. */
    for (size_t i = 0; i < v->cat->n_leases; i++) {
        const struct lz_catalog_lease *l = &v->cat->leases[i];
        if (strcmp(l->domain_id, id) != 0)
            continue;
        const struct lz_store_gen *g = find_gen(s, l->generation);
        const struct lz_store_part *p = find_part(s, l->generation, LZ_ROLE_PREPARED_LOWER);
        const char *why = NULL;
        if (!g)
            why = "the Domain Store has no such generation";
        else if (!strcmp(g->state, "clean"))
            why = "that generation is clean";
        else if (!p || p->state == LZ_P_CLEAN)
            why = "that generation holds no prepared lower";
        else if (p->artifact_id && strcmp(p->artifact_id, l->artifact_id) != 0)
            why = "that generation recorded another artifact";
        if (why)
            vreport(v, "error",
                    "orphan lease: the Storage Catalog holds a lease of generation %" PRId64 " on prepared artifact "
                    "%.12s, but %s; it keeps the artifact from being reclaimed",
                    l->generation, l->artifact_id, why);
    }
}

static void verify_one(struct vctx *v, int domfd, const char *id) {
    struct lz_verify_result *res = v->res;
    res->v = lz_xrealloc(res->v, (res->n + 1) * sizeof *res->v);
    v->cur = &res->v[res->n++];
    *v->cur = (struct lz_domain_verdict){ 0 };
    snprintf(v->cur->id, sizeof v->cur->id, "%s", id);
    struct lz_error e = { 0 };
    _cleanup_close_ int rootfd = open_root(domfd, v->data_root, id, &e);
    if (rootfd < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    _cleanup_close_ int lockfd = -EBADF;
    int r = lock_domain(rootfd, &lockfd, &e);
    if (r < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    if (r == 0) {
        v->cur->running = true;
        identity_from_log(rootfd, id, &v->cur->profile, &v->cur->workspace);
        vreport(v, "info", "running; not verified");
        return;
    }
    _cleanup_free_ char *path = NULL;
    _cleanup_store_ struct lz_store *st = NULL;
    if ((r = root_path(v->data_root, id, rootfd, &path, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    r = lz_store_open(path, NULL, false, &st, &e);
    if (r == -ENOENT) {
        vreport(v, "warn", "no Domain Store: the Domain never completed a start (`lazaret run` creates it)");
        verify_entries(v, rootfd, NULL, NULL);
        return;
    }
    if (r < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    if ((r = lz_store_check(st, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    struct lz_store_snapshot snap;
    if ((r = lz_store_read(st, &snap, &e)) < 0) {
        vreport(v, "error", "%s", e.msg);
        return;
    }
    v->cur->profile = snap.profile ? lz_xstrdup(snap.profile) : NULL;
    v->cur->workspace = snap.workspace ? lz_xstrdup(snap.workspace) : NULL;
    /* SR-11: the store is this directory's, and the directory is the
     * Domain of the (profile, workspace) it records. */
    bool ident_ok = snap.domain_id && snap.profile && snap.workspace;
    if (!ident_ok)
        vreport(v, "error", "the Domain Store lacks its identity (domain_id, profile, workspace)");
    if (snap.domain_id && strcmp(snap.domain_id, id) != 0) {
        ident_ok = false;
        vreport(v, "error", "the Domain Store records Domain ID %.64s, not the directory's %s", snap.domain_id, id);
    }
    if (snap.profile && snap.workspace) {
        uint8_t raw[LZ_DOMAIN_ID_LEN];
        char hex[LZ_DOMAIN_ID_HEX + 1] = "";
        if (lz_domain_id_v1(snap.profile, snap.workspace, raw) == 0)
            lz_hex(raw, sizeof raw, hex);
        if (strcmp(hex, id) != 0) {
            ident_ok = false;
            vreport(v, "error",
                    "the Domain ID derived from the recorded profile and workspace is %s, not the directory's",
                    hex[0] ? hex : "(not computable)");
        }
    }
    if (snap.anchor_gen < 1)
        vreport(v, "error", "the Domain Store has no valid anchor_gen");
    if (ident_ok) {
        struct stat sb;
        if (stat(snap.workspace, &sb) < 0 && errno == ENOENT)
            vreport(v, "info", "the workspace no longer exists");
    }
    struct lz_config *c = ident_ok ? domain_config(v->config_path, id, snap.profile, snap.workspace) : NULL;
    verify_entries(v, rootfd, snap.anchor_gen >= 1 ? &snap : NULL, c);
    lz_config_free(c);
    /* The catalog read at the start of the run is older than this store:
     * the Domain may have started or stopped since. Under the Domain lock
     * its leases cannot change, so a fresh read is consistent with the
     * store just read. */
    struct lz_catalog fresh = { 0 };
    const struct lz_catalog *before = v->cat;
    if (before) {
        if (lz_catalog_read(v->data_root, &fresh, &e) == 0) {
            v->cat = &fresh;
        } else {
            vreport(v, "error", "cannot read the Storage Catalog again: %s (lease checks skipped)", e.msg);
            v->cat = NULL;
        }
    }
    verify_generations(v, id, &snap);
    v->cat = before;
    lz_catalog_clear(&fresh);
    lz_store_snapshot_clear(&snap);
}

static void catalog_report(void *ud, const char *severity, const char *msg) {
    struct vctx *v = ud;
    vreport(v, severity, "Storage Catalog: %s", msg);
}

static bool in_list(char **ids, size_t n, const char *id) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ids[i], id))
            return true;
    return false;
}

int lz_domains_verify(const char *data_root, const char *config_path, const char *const *ids, size_t n_ids,
                      lz_domain_report_fn report, void *ud, struct lz_verify_result *ret, struct lz_error *err) {
    struct lz_verify_result res = { 0 };
    struct vctx v = { .data_root = data_root, .config_path = config_path, .report = report, .ud = ud, .res = &res };
    struct lz_catalog cat = { 0 };
    struct lz_error e = { 0 };
    bool have_cat = lz_catalog_read(data_root, &cat, &e) == 0;
    if (have_cat)
        v.cat = &cat;
    else
        vreport(&v, "error", "cannot read the Storage Catalog: %s (lease checks skipped)", e.msg);

    _cleanup_close_ int domfd = open_domains_dir(data_root, err);
    if (domfd < 0 && domfd != -ENOENT) {
        lz_catalog_clear(&cat);
        lz_verify_result_clear(&res);
        return domfd;
    }
    char **all = NULL, **strays = NULL;
    size_t n_all = 0, n_strays = 0;
    if (domfd >= 0) {
        int r = scan_domains(domfd, &all, &n_all, &strays, &n_strays);
        if (r < 0) {
            lz_catalog_clear(&cat);
            lz_verify_result_clear(&res);
            return lz_error_set(err, r, "cannot read %s/domains: %s", data_root, strerror(-r));
        }
    }
    if (n_ids) {
        for (size_t i = 0; i < n_ids; i++)
            verify_one(&v, domfd, ids[i]);
    } else {
        for (size_t i = 0; i < n_all; i++)
            verify_one(&v, domfd, all[i]);
        v.cur = NULL;
        for (size_t i = 0; i < n_strays; i++)
            vreport(&v, "warn", "%s/domains/%s is not a Domain Root (not a directory named by a Domain ID)",
                    data_root, strays[i]);
        /* Leases of Domains that have no Domain Root at all. */
        for (size_t i = 0; have_cat && i < cat.n_leases; i++) {
            const struct lz_catalog_lease *l = &cat.leases[i];
            if (!in_list(all, n_all, l->domain_id))
                vreport(&v, "error",
                        "orphan lease: the Storage Catalog holds a lease of Domain %.12s generation %" PRId64
                        " on prepared artifact %.12s, but that Domain has no Domain Root",
                        l->domain_id, l->generation, l->artifact_id);
        }
    }
    v.cur = NULL;
    strv_free(all, n_all);
    strv_free(strays, n_strays);
    lz_catalog_clear(&cat);

    e = (struct lz_error){ 0 };
    int r = lz_catalog_verify(data_root, catalog_report, &v, &e);
    if (r < 0)
        vreport(&v, "error", "cannot verify the Storage Catalog: %s", e.msg[0] ? e.msg : strerror(-r));
    /* catalog_report already counted the catalog's errors. */
    *ret = res;
    return 0;
}

void lz_verify_result_clear(struct lz_verify_result *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].profile);
        free(r->v[i].workspace);
    }
    free(r->v);
    *r = (struct lz_verify_result){ 0 };
}

/* ---- deletion in the Domain's user namespace ---- */

/* Deletes dirfd/name as root of a new user namespace with the mapping the
 * Domain's sandbox had (the caller's ID as 0, its subordinate range from
 * 1): files a non-root sandbox user left are then ours to delete, and
 * nothing else is. -EPERM when there is no subordinate range (then every
 * file is the caller's own already). */
static int rm_tree_userns(int dirfd, const char *name, struct lz_error *err) {
    if (!lz_idmap_have_subids())
        return -EPERM;
    _cleanup_free_ char *self = NULL;
    int r = lz_self_exe(&self);
    if (r < 0)
        return lz_error_set(err, r, "cannot find the lazaret binary: %s", strerror(-r));
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", dirfd);
    char *argv[] = { self, (char *)"state", (char *)"__rm-tree", fdstr, (char *)name, NULL };
    int keep[] = { dirfd };
    struct lz_spawn_opts o = { .path = self, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = 2,
                               .keep_fds = keep, .n_keep_fds = 1, .clone_flags = CLONE_NEWUSER,
                               .setns_pidfd = -1, .barrier = true, .pdeathsig = SIGKILL };
    struct lz_child ch;
    if ((r = lz_spawn(&o, &ch)) < 0)
        return lz_error_set(err, r, "cannot create a user namespace: %s", strerror(-r));
    int st = 0;
    /* The child waits at its barrier: the PID still names it. */
    if ((r = lz_idmap_write(ch.pid, err)) < 0 || (r = lz_child_release(&ch)) < 0) {
        if (r < 0 && !err->msg[0])
            lz_error_set(err, r, "cannot start the deletion helper: %s", strerror(-r));
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
    if (r != -EACCES && r != -EPERM)
        return r < 0 ? lz_error_set(err, r, "cannot delete %s: %s", name, strerror(-r)) : 0;
    struct lz_error e2 = { 0 };
    int r2 = rm_tree_userns(dirfd, name, &e2);
    if (r2 == -EPERM && !e2.msg[0])
        return lz_error_set(err, r, "cannot delete %s: %s", name, strerror(-r));
    if (r2 < 0) {
        if (err)
            *err = e2;
        return r2;
    }
    return 0;
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
    int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int r = -errno;
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, r, "cannot read the Domain Root: %s", strerror(-r));
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        int64_t g;
        if (anchor_name_gen(de->d_name, &g) && g != keep) {
            names = lz_xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = lz_xstrdup(de->d_name);
        }
    }
    closedir(d);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        r = rm_tree(rootfd, names[i], err);
        if (r == 0)
            lz_recovery_logf(log, ud, "deleted %s, the leftover of an interrupted reset", names[i]);
    }
    strv_free(names, n);
    return r;
}

/* Empties overlay/ (runsc's scratch filestore: never persistent state). */
static int empty_overlay(int rootfd, struct lz_error *err) {
    int fd = openat(rootfd, "overlay", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : lz_error_set(err, -errno, "cannot open overlay/: %s", strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return lz_error_set(err, -errno, "cannot read overlay/: %s", strerror(errno));
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            names = lz_xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = lz_xstrdup(de->d_name);
        }
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = rm_tree(dirfd(d), names[i], err);
    closedir(d);
    strv_free(names, n);
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

int lz_domain_reset(const char *data_root, const char *id, lz_domain_log_fn log, void *ud, struct lz_error *err) {
    _cleanup_close_ int rootfd = open_domain_by_id(data_root, id, err);
    if (rootfd < 0)
        return rootfd;
    _cleanup_close_ int lockfd = -EBADF;
    int r = lock_domain(rootfd, &lockfd, err);
    if (r < 0)
        return r;
    if (r == 0)
        return lz_error_set(err, -EBUSY, "Domain %.12s is running; stop it first (exit its sessions)", id);
    _cleanup_free_ char *path = NULL;
    if ((r = root_path(data_root, id, rootfd, &path, err)) < 0)
        return r;

    /* SR-11: the store must be this directory's. */
    struct lz_store_identity sid = { .domain_id = id };
    _cleanup_store_ struct lz_store *st = NULL;
    r = lz_store_open(path, &sid, false, &st, err);
    if (r == -ENOENT) {
        /* Never started: the store precedes every anchor, so any is junk. */
        if ((r = rm_other_anchors(rootfd, 0, log, ud, err)) < 0 || (r = empty_overlay(rootfd, err)) < 0)
            return r;
        lz_recovery_logf(log, ud, "no Domain Store (the Domain never started): nothing persistent to reset");
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
        if (!anchor_name_gen(intent, &g) || g == n)
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
        lz_recovery_logf(log, ud, "finished an interrupted reset: deleted %s", intent);
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
    lz_recovery_logf(log, ud, "the Domain now uses the new, empty State Anchor %s", next);

    /* 3. The old layers. */
    if ((r = rm_tree(rootfd, cur, err)) < 0)
        return lz_error_prefix(err, r,
                               "the Domain was reset, but deleting its old State Anchor failed (the next `lazaret "
                               "state reset` retries)");
    if (fsync(rootfd) < 0)
        return lz_error_set(err, -errno, "fsync of the Domain Root: %s", strerror(errno));
    lz_crash_point("reset-deleted");
    lz_recovery_logf(log, ud, "deleted the old State Anchor %s", cur);

    /* 4. Done. */
    if ((r = lz_store_meta_del(st, "reset_intent", err)) < 0)
        return r;
    if ((r = empty_overlay(rootfd, err)) < 0)
        return r;
    return 0;
}
