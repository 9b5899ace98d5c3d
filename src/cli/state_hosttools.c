/* state_hosttools.c — `lazaret state diff` and `lazaret state apply PATH`:
 * what the sandbox changed in the host-tool configuration paths (kept in
 * the Domain's copy, docs/host-tools.md), and bringing one reviewed file
 * over to the host.
 *
 * Nothing here runs anything the workspace configures: the comparison is
 * GNU diff (absolute /usr/bin/diff, explicit file arguments as /dev/fd/N
 * of files opened here), its output passed through with control bytes
 * escaped (the files are the sandbox's: they must not drive the
 * terminal). Paths are opened beneath the workspace and the Domain's copy
 * without following any symlink. */
#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "hosttools.h"
#include "spawn.h"

#define HT_LIST_MAX (4u << 20) /* bytes of <state>/hosttools */
#define HT_ROOTS_MAX 4096
#define HT_WALK_MAX 20000
#define HT_DEPTH_MAX 32
#define HT_FILE_MAX (16u << 20)
#define HT_DIFF_TIMEOUT_MS 60000
#define HT_SEED_XATTR "user.lazaret.seed" /* src/router/htseed.h */

struct ht_ctx {
    const struct lz_config *cfg;
    int ws_fd;    /* the workspace (O_PATH) */
    int store_fd; /* <domain>/ignored/tree (O_PATH) */
    size_t walked;
    size_t changed;
};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int hash_buf(const char *buf, size_t len, char out[65]) {
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256((unsigned char *)d, (const unsigned char *)buf, len);
    lz_hex(d, sizeof d, out);
    return 0;
}

/* 1 if the store file open at fd is still what the router copied from the
 * host (the sandbox did not change it), 0 if not. */
static int pristine(int fd) {
    char rec[80], hash[65];
    ssize_t n = fgetxattr(fd, HT_SEED_XATTR, rec, sizeof rec - 1);
    if (n < 0)
        return 0;
    rec[n] = '\0';
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if (lseek(fd, 0, SEEK_SET) < 0 || lz_read_fd(fd, HT_FILE_MAX, &buf, &len) < 0)
        return 0;
    hash_buf(buf, len, hash);
    return strncmp(rec, "v1 ", 3) == 0 && strcmp(rec + 3, hash) == 0;
}

/* Copies the child's output to stdout with control bytes other than
 * newline and tab shown as \xNN. */
static void relay_escaped(int fd) {
    char in[8192];
    for (;;) {
        ssize_t n = read(fd, in, sizeof in);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)in[i];
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                printf("\\x%02x", c);
            else
                putchar(c);
        }
    }
    fflush(stdout);
}

/* diff -u of host file hfd (-1: none) and store file sfd, labelled. */
static int run_diff(int hfd, int sfd, const char *rel) {
    _cleanup_free_ char *e = lz_cli_esc(rel, "-");
    _cleanup_free_ char *la = lz_xasprintf("host/%s", e), *lb = lz_xasprintf("domain/%s", e);
    char a[32] = "/dev/null", b[32];
    if (hfd >= 0)
        snprintf(a, sizeof a, "/dev/fd/%d", hfd);
    snprintf(b, sizeof b, "/dev/fd/%d", sfd);
    char *argv[] = { (char *)"/usr/bin/diff", (char *)"-u", (char *)"--label", la, (char *)"--label", lb, a, b, NULL };
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    int keep[2] = { sfd, hfd };
    struct lz_spawn_opts o = { .path = argv[0],
                               .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = p[1],
                               .stderr_fd = p[1],
                               .keep_fds = keep,
                               .n_keep_fds = hfd >= 0 ? 2 : 1,
                               .setns_pidfd = -1 };
    struct lz_child c = LZ_CHILD_NULL;
    int r = lz_spawn(&o, &c);
    close(p[1]);
    if (r < 0) {
        close(p[0]);
        return r;
    }
    relay_escaped(p[0]);
    close(p[0]);
    int st = 0;
    r = lz_child_wait(&c, HT_DIFF_TIMEOUT_MS, &st);
    if (r == -ETIMEDOUT)
        (void)lz_child_stop(&c, 100, &st);
    lz_child_close(&c);
    if (r < 0)
        return r;
    return st <= 1 ? 0 : -EIO; /* 0: same, 1: different, 2: trouble */
}

static int diff_file(struct ht_ctx *x, int sfd, const char *rel) {
    if (pristine(sfd))
        return 0; /* as copied from the host: not a change of the sandbox */
    _cleanup_close_ int hfd = lz_openat_beneath(x->ws_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    struct stat st;
    if (hfd >= 0 && (fstat(hfd, &st) < 0 || !S_ISREG(st.st_mode))) {
        _cleanup_free_ char *e = lz_cli_esc(rel, "-");
        printf("# host/%s is not a regular file: shown as absent\n", e);
        close(hfd);
        hfd = -EBADF;
    }
    x->changed++;
    return run_diff(hfd >= 0 ? hfd : -1, sfd, rel);
}

static int walk(struct ht_ctx *x, const char *rel, unsigned depth) {
    if (++x->walked > HT_WALK_MAX || depth > HT_DEPTH_MAX)
        return -EFBIG;
    struct stat st;
    _cleanup_close_ int fd = lz_openat_beneath(x->store_fd, rel, O_PATH | O_NOFOLLOW, 0, false);
    if (fd < 0)
        return fd == -ENOENT ? 0 : fd;
    if (fstat(fd, &st) < 0)
        return -errno;
    _cleanup_free_ char *e = lz_cli_esc(rel, "-");
    if (S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(fd, "", t, sizeof t - 1);
        t[n > 0 ? n : 0] = '\0';
        _cleanup_free_ char *et = lz_cli_esc(t, "-");
        printf("# domain/%s is a symlink to %s (state apply refuses symlinks)\n", e, et);
        x->changed++;
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        _cleanup_close_ int rfd = lz_openat_beneath(x->store_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
        return rfd < 0 ? rfd : diff_file(x, rfd, rel);
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    char **names = NULL;
    size_t n = 0;
    int r = lz_dir_names(fd, HT_WALK_MAX, &names, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r >= 0; i++) {
        if (!strcmp(names[i], ".lazaret-seed.tmp"))
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", rel, names[i]);
        r = walk(x, sub, depth + 1);
    }
    lz_strv_free(names, n);
    return r;
}

/* The roots the router listed (hex lines), deduplicated, that are in the
 * profile's set; sorted. */
static int read_roots(const struct lz_config *cfg, int state_fd, char ***ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    _cleanup_free_ char *buf = NULL;
    int r = lz_read_file_at(state_fd, "hosttools", HT_LIST_MAX, &buf, NULL);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    char **v = lz_xcalloc(HT_ROOTS_MAX + 1, sizeof *v);
    size_t n = 0;
    for (char *line = buf, *nl; line && *line && n < HT_ROOTS_MAX; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len == 0 || len % 2 || len / 2 > PATH_MAX)
            continue;
        char *rel = lz_xcalloc(1, len / 2 + 1);
        size_t bl = 0;
        if (sodium_hex2bin((unsigned char *)rel, len / 2, line, len, NULL, &bl, NULL) != 0 || bl != len / 2 ||
            strlen(rel) != bl || !lz_hosttools_match(cfg->profile.host_tools, cfg->profile.n_host_tools, rel)) {
            free(rel);
            continue;
        }
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = !strcmp(v[i], rel);
        if (dup)
            free(rel);
        else
            v[n++] = rel;
    }
    qsort(v, n, sizeof *v, cmp_str);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int open_dirs(const struct lz_config *cfg, int *ret_ws, int *ret_state, int *ret_store) {
    *ret_ws = *ret_state = *ret_store = -EBADF;
    _cleanup_free_ char *state = lz_xasprintf("%s/ignored", cfg->domain_dir);
    int ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0)
        return -errno;
    *ret_ws = ws;
    int st = open(state, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st < 0)
        return -errno;
    *ret_state = st;
    int tree = lz_openat_beneath(st, "tree", O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
    if (tree < 0)
        return tree;
    *ret_store = tree;
    return 0;
}

int lz_state_diff(const struct lz_config *cfg) {
    _cleanup_close_ int ws = -EBADF, st = -EBADF, tree = -EBADF;
    int r = open_dirs(cfg, &ws, &st, &tree);
    if (r == -ENOENT && ws >= 0) {
        printf("# the Domain has no copy of any host-tool configuration path\n");
        return LZ_EXIT_OK;
    }
    if (r < 0) {
        lz_cli_error("state diff: cannot open the Domain's copies: %s", strerror(-r));
        return LZ_EXIT_FAILURE;
    }
    char **roots = NULL;
    size_t n = 0;
    if ((r = read_roots(cfg, st, &roots, &n)) < 0) {
        lz_cli_error("state diff: cannot read the Domain's list of host-tool paths: %s", strerror(-r));
        return LZ_EXIT_FAILURE;
    }
    struct ht_ctx x = { .cfg = cfg, .ws_fd = ws, .store_fd = tree };
    int ret = LZ_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        fflush(stdout);
        if ((r = walk(&x, roots[i], 0)) < 0) {
            _cleanup_free_ char *e = lz_cli_esc(roots[i], "-");
            lz_cli_error("state diff: %s: %s", e, r == -EFBIG ? "too many entries, shown in part" : strerror(-r));
            ret = LZ_EXIT_FAILURE;
        }
    }
    lz_strv_free(roots, n);
    if (!x.changed && ret == LZ_EXIT_OK)
        printf("# the sandbox changed no host-tool configuration path\n");
    else if (ret == LZ_EXIT_OK)
        printf("# bring a file over after review: lazaret state apply PATH\n");
    return ret;
}

/* A workspace-relative path: no empty, "." or ".." component, no leading
 * '/', bounded. */
static const char *rel_invalid(const char *p) {
    if (!*p)
        return "it is empty";
    if (strlen(p) > PATH_MAX - 1)
        return "it is too long";
    if (p[0] == '/')
        return "it is absolute: give it relative to the workspace root";
    for (const char *c = p;;) {
        const char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return "it has an empty, . or .. component";
        if (!e)
            return NULL;
        c = e + 1;
    }
}

/* The directory of rel's parent beneath ws, made (0755) where missing,
 * no symlink followed; fd (O_PATH) or -errno. */
static int host_parent(int ws, const char *rel, char **ret_name) {
    _cleanup_free_ char *dup = lz_xstrdup(rel);
    char *slash = strrchr(dup, '/');
    *ret_name = lz_xstrdup(slash ? slash + 1 : dup);
    int fd = openat(ws, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !slash)
        return fd < 0 ? -errno : fd;
    *slash = '\0';
    for (char *c = dup, *e; c; c = e ? e + 1 : NULL) {
        e = strchr(c, '/');
        if (e)
            *e = '\0';
        if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
            int r = -errno;
            close(fd);
            return r;
        }
        int nfd = lz_openat_beneath(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, false);
        struct stat lst;
        if (nfd < 0 && fstatat(fd, c, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode))
            nfd = -ELOOP;
        close(fd);
        if (nfd < 0)
            return nfd;
        fd = nfd;
    }
    return fd;
}

int lz_state_apply(const struct lz_config *cfg, const char *rel) {
    _cleanup_free_ char *e = lz_cli_esc(rel, "-");
    const char *why = rel_invalid(rel);
    if (why) {
        lz_cli_error("state apply: %s: %s", e, why);
        return LZ_EXIT_USAGE;
    }
    if (!lz_hosttools_match(cfg->profile.host_tools, cfg->profile.n_host_tools, rel)) {
        lz_cli_error("state apply: %s is not a host-tool configuration path of profile %s (see `lazaret config "
                     "check`); other files of the sandbox are the workspace's own",
                     e, cfg->profile.name);
        return LZ_EXIT_USAGE;
    }
    _cleanup_close_ int ws = -EBADF, st = -EBADF, tree = -EBADF;
    int r = open_dirs(cfg, &ws, &st, &tree);
    if (r < 0) {
        lz_cli_error("state apply: %s: the Domain has no copy of it (%s)", e, strerror(-r));
        return LZ_EXIT_FAILURE;
    }
    _cleanup_close_ int sfd = lz_openat_beneath(tree, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    struct stat sst;
    if (sfd < 0 || fstat(sfd, &sst) < 0 || !S_ISREG(sst.st_mode)) {
        r = sfd < 0 ? sfd : -EINVAL;
        lz_cli_error("state apply: %s: %s", e,
                     r == -ENOENT      ? "the Domain has no copy of it (see `lazaret state diff`)"
                         : r == -ELOOP ? "the Domain's copy is or passes through a symlink: refused"
                                       : "the Domain's copy is not a regular file: refused");
        return LZ_EXIT_FAILURE;
    }
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if ((r = lz_read_fd(sfd, HT_FILE_MAX, &buf, &len)) < 0) {
        lz_cli_error("state apply: %s: cannot read the Domain's copy: %s", e, strerror(-r));
        return LZ_EXIT_FAILURE;
    }
    _cleanup_free_ char *name = NULL;
    _cleanup_close_ int pfd = host_parent(ws, rel, &name);
    if (pfd < 0) {
        lz_cli_error("state apply: %s: cannot open its directory in the workspace%s: %s", e,
                     pfd == -ELOOP || pfd == -EXDEV ? " (a symlink: refused)" : "", strerror(-pfd));
        return LZ_EXIT_FAILURE;
    }
    _cleanup_close_ int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        lz_cli_error("state apply: %s: %s", e, strerror(errno));
        return LZ_EXIT_FAILURE;
    }
    struct stat hst;
    mode_t mode = 0644;
    if (fstatat(dfd, name, &hst, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(hst.st_mode)) {
            lz_cli_error("state apply: %s: the host's entry is not a regular file: refused", e);
            return LZ_EXIT_FAILURE;
        }
        mode = hst.st_mode & 0777;
    }
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".lazaret-apply.%ld", (long)getpid());
    (void)unlinkat(dfd, tmp, 0);
    _cleanup_close_ int out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out < 0 || (r = lz_write_full(out, buf, len)) < 0 || fchmod(out, mode) < 0 || fsync(out) < 0 ||
        renameat(dfd, tmp, dfd, name) < 0) {
        r = out < 0 || r == 0 ? -errno : r;
        (void)unlinkat(dfd, tmp, 0);
        lz_cli_error("state apply: %s: cannot write it: %s", e, strerror(-r));
        return LZ_EXIT_FAILURE;
    }
    (void)fsync(dfd);
    /* The Domain's copy is now the host's: from here on it follows the
     * host again (htseed.h). */
    char hash[65], rec[80];
    hash_buf(buf, len, hash);
    snprintf(rec, sizeof rec, "v1 %s", hash);
    _cleanup_close_ int wfd = lz_openat_beneath(tree, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, false);
    if (wfd >= 0)
        (void)fsetxattr(wfd, HT_SEED_XATTR, rec, strlen(rec), 0);
    printf("applied %s to the workspace (%zu bytes)\n", e, len);
    return LZ_EXIT_OK;
}
