/* htseed.c — host-tool configuration paths in the router: seeding the
 * Domain's copy from the host (htseed.h). */
#include "htseed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "hosttools.h"
#include "ignore.h"
#include "util.h"

#define SEEN_MAX 4096                 /* roots remembered per run */
#define SEED_FILE_MAX (16u << 20)     /* bytes of one file */
#define SEED_TOTAL_MAX (128ull << 20) /* bytes of one root */
#define SEED_ENTRIES_MAX 20000        /* entries of one root */
#define SEED_DEPTH_MAX 32
#define TMP_NAME ".lazaret-seed.tmp"
#define LIST_MAX (4u << 20) /* bytes of <state>/hosttools (state_hosttools.c reads as much) */

struct rt_ht {
    char **names;
    size_t n;
    char **seen; /* roots seeded this run */
    size_t n_seen;
    char **listed; /* hex lines of <state>/hosttools: each root once */
    size_t n_listed;
    int list_fd; /* <state>/hosttools, O_APPEND */
};

struct budget {
    unsigned long long bytes;
    size_t entries;
};

struct rt_ht *rt_ht_new(char *const *names, size_t n, int state_fd) {
    struct rt_ht *h = lz_xcalloc(1, sizeof *h);
    h->names = lz_xcalloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        h->names[i] = lz_xstrdup(names[i]);
    h->n = n;
    h->seen = lz_xcalloc(SEEN_MAX, sizeof(char *));
    h->listed = lz_xcalloc(SEEN_MAX, sizeof(char *));
    h->list_fd = state_fd < 0
        ? -EBADF
        : openat(state_fd, "hosttools", O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    /* What earlier runs listed, so that each root is listed once and the
     * file stays bounded by the number of distinct roots. */
    _cleanup_free_ char *buf = NULL;
    if (h->list_fd >= 0 && lz_read_fd(h->list_fd, LIST_MAX, &buf, NULL) == 0)
        for (char *line = buf, *nl; line && *line && h->n_listed < SEEN_MAX; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (*line)
                h->listed[h->n_listed++] = lz_xstrdup(line);
        }
    return h;
}

void rt_ht_free(struct rt_ht *h) {
    if (!h)
        return;
    lz_strv_free(h->names, h->n);
    for (size_t i = 0; i < h->n_seen; i++)
        free(h->seen[i]);
    free(h->seen);
    lz_strv_free(h->listed, h->n_listed);
    if (h->list_fd >= 0)
        close(h->list_fd);
    free(h);
}

size_t rt_ht_match(const struct rt_ht *h, const char *rel) { return h ? lz_hosttools_match(h->names, h->n, rel) : 0; }

int rt_ht_hash_fd(int fd, char out[65]) {
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    char buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        crypto_hash_sha256_update(&st, (const unsigned char *)buf, (unsigned long long)n);
        off += n;
        if ((unsigned long long)off > SEED_FILE_MAX)
            return -EFBIG;
    }
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, d);
    lz_hex(d, sizeof d, out);
    return 0;
}

/* 1 if the store file `name` of sfd is still what seeding wrote, 0 if the
 * sandbox changed it (or it has no record), -errno. */
static int store_pristine(int sfd, const char *name) {
    _cleanup_close_ int fd = lz_openat_beneath(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    if (fd < 0)
        return fd;
    char rec[80], hash[65];
    ssize_t n = fgetxattr(fd, RT_HT_SEED_XATTR, rec, sizeof rec - 1);
    if (n < 0)
        return errno == ENODATA || errno == ENOTSUP ? 0 : -errno;
    rec[n] = '\0';
    int rc = rt_ht_hash_fd(fd, hash);
    if (rc < 0)
        return rc == -EFBIG ? 0 : rc;
    return strncmp(rec, "v1 ", 3) == 0 && strcmp(rec + 3, hash) == 0;
}

/* Copies host regular file `name` of hfd over (or as) `name` of sfd,
 * marked pristine. */
static int copy_file(int hfd, int sfd, const char *name, const struct stat *hst, struct budget *b) {
    _cleanup_close_ int in = lz_openat_beneath(hfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    if (in < 0)
        return in;
    struct stat st;
    if (fstat(in, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((unsigned long long)st.st_size > SEED_FILE_MAX || b->bytes + (unsigned long long)st.st_size > SEED_TOTAL_MAX)
        return -EFBIG;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int rc = lz_read_fd(in, SEED_FILE_MAX, &buf, &len);
    if (rc < 0)
        return rc;
    b->bytes += len;
    char hash[65], rec[80];
    crypto_hash_sha256_state hs;
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_init(&hs);
    crypto_hash_sha256_update(&hs, (const unsigned char *)buf, len);
    crypto_hash_sha256_final(&hs, d);
    lz_hex(d, sizeof d, hash);
    snprintf(rec, sizeof rec, "v1 %s", hash);
    (void)unlinkat(sfd, TMP_NAME, 0);
    _cleanup_close_ int out =
        openat(sfd, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (hst->st_mode & 0777) | 0600);
    if (out < 0)
        return -errno;
    if ((rc = lz_write_full(out, buf, len)) < 0 || fsetxattr(out, RT_HT_SEED_XATTR, rec, strlen(rec), 0) < 0 ||
        fchmod(out, (hst->st_mode & 0777) | 0600) < 0) {
        rc = rc < 0 ? rc : -errno;
        (void)unlinkat(sfd, TMP_NAME, 0);
        return rc;
    }
    if (renameat(sfd, TMP_NAME, sfd, name) < 0) {
        rc = -errno;
        (void)unlinkat(sfd, TMP_NAME, 0);
        return rc;
    }
    return 0;
}

static int seed_entry(int hfd, int sfd, const char *name, unsigned depth, struct budget *b);

static int seed_dir(int hfd, int sfd, const char *name, const struct stat *hst, unsigned depth, struct budget *b) {
    struct stat sst;
    if (fstatat(sfd, name, &sst, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISDIR(sst.st_mode))
            return 0; /* the sandbox put something else there: its own */
    } else if (errno != ENOENT) {
        return -errno;
    } else if (mkdirat(sfd, name, (hst->st_mode & 0777) | 0700) < 0 && errno != EEXIST) {
        return -errno;
    }
    if (depth >= SEED_DEPTH_MAX)
        return -ELOOP;
    _cleanup_close_ int hd = lz_openat_beneath(hfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, false);
    _cleanup_close_ int sd = lz_openat_beneath(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (hd < 0 || sd < 0)
        return hd < 0 ? hd : sd;
    DIR *dp;
    int rc = lz_opendir_at(hd, &dp);
    if (rc < 0)
        return rc;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, TMP_NAME))
            continue;
        if (++b->entries > SEED_ENTRIES_MAX) {
            rc = -EFBIG;
            break;
        }
        int e = seed_entry(hd, sd, de->d_name, depth + 1, b);
        if (e < 0 && rc == 0)
            rc = e; /* the first error; the other entries are still seeded */
    }
    closedir(dp);
    return rc;
}

static int seed_entry(int hfd, int sfd, const char *name, unsigned depth, struct budget *b) {
    struct stat hst, sst;
    if (fstatat(hfd, name, &hst, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    bool in_store = fstatat(sfd, name, &sst, AT_SYMLINK_NOFOLLOW) == 0;
    if (!in_store && errno != ENOENT)
        return -errno;
    if (S_ISDIR(hst.st_mode))
        return seed_dir(hfd, sfd, name, &hst, depth, b);
    if (S_ISREG(hst.st_mode)) {
        if (in_store) {
            if (!S_ISREG(sst.st_mode))
                return 0;
            int p = store_pristine(sfd, name);
            if (p <= 0)
                return p; /* the sandbox's version: kept */
        }
        return copy_file(hfd, sfd, name, &hst, b);
    }
    if (S_ISLNK(hst.st_mode) && !in_store) {
        /* Inside, a symlink resolves in the sandbox's own tree. */
        char t[PATH_MAX];
        ssize_t n = readlinkat(hfd, name, t, sizeof t - 1);
        if (n < 0)
            return -errno;
        t[n] = '\0';
        return symlinkat(t, sfd, name) < 0 && errno != EEXIST ? -errno : 0;
    }
    return 0; /* devices, FIFOs, sockets: not copied */
}

static bool seen(struct rt_ht *h, const char *rel) {
    for (size_t i = 0; i < h->n_seen; i++)
        if (!strcmp(h->seen[i], rel))
            return true;
    if (h->n_seen == SEEN_MAX) {
        for (size_t i = 0; i < h->n_seen; i++)
            free(h->seen[i]);
        h->n_seen = 0;
    }
    h->seen[h->n_seen++] = lz_xstrdup(rel);
    return false;
}

/* Appends rel to the list of roots (hex: names may hold any byte). */
static void list_root(struct rt_ht *h, const char *rel) {
    if (h->list_fd < 0 || h->n_listed >= SEEN_MAX)
        return;
    size_t n = strlen(rel);
    _cleanup_free_ char *line = lz_xcalloc(1, 2 * n + 2);
    lz_hex((const uint8_t *)rel, n, line);
    for (size_t i = 0; i < h->n_listed; i++)
        if (!strcmp(h->listed[i], line))
            return;
    h->listed[h->n_listed++] = lz_xstrdup(line);
    line[2 * n] = '\n';
    (void)lz_write_full(h->list_fd, line, 2 * n + 1);
}

void rt_ht_seed(struct rt_ht *h, int hfd, int store_fd, const char *drel, const char *name, const char *rel) {
    if (!h || seen(h, rel))
        return;
    list_root(h, rel);
    struct stat hst;
    if (fstatat(hfd, name, &hst, AT_SYMLINK_NOFOLLOW) < 0)
        return; /* nothing of the host's to show */
    _cleanup_close_ int sp = rt_open_dir_p(store_fd, drel, true);
    if (sp < 0) {
        fprintf(stderr, "lazaret-router: host tools: cannot prepare the Domain's copy of %s: %s\n", rel, strerror(-sp));
        return;
    }
    _cleanup_close_ int sfd = openat(sp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0)
        return;
    struct budget b = { 0 };
    int rc = seed_entry(hfd, sfd, name, 0, &b);
    if (rc < 0)
        fprintf(stderr, "lazaret-router: host tools: %s copied in part only: %s\n", rel, strerror(-rc));
}
