/* prepare.c — see prepare.h for the contract. */
#include "prepare.h"
#include "archive_dl.h" /* libarchive through lz_archive_api */
#include "pathset.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define WH_META ".wh..wh."
#define READ_CHUNK (128 * 1024)

bool lz_prepare_keeps_setid(void) {
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0)
        return false;
    return (d[0].effective & (1u << CAP_CHOWN)) != 0;
}

/* ---- layer context ---- */

struct fixup {
    char *path;        /* relative, normalised, non-empty */
    size_t depth, idx; /* for ordering: deepest first, then recording order */
    mode_t mode;
    bool has_time;
    struct timespec mtime;
};

/* The ID of the mount an fd is on (statx, Linux >= 5.8; openat2 itself
 * needs 5.6 and the doctor asks for much newer). */
static int mount_id_of(int fd, uint64_t *ret) {
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0)
        return -errno;
    if (!(sx.stx_mask & STATX_MNT_ID))
        return -EOPNOTSUPP;
    *ret = sx.stx_mnt_id;
    return 0;
}

struct layer {
    int root;
    uint64_t root_mnt; /* the mount every confined open must stay on */
    bool chown_ok;     /* euid == 0 */
    bool keep_setid;   /* CAP_CHOWN */
    uid_t euid;
    const struct lz_idmap_ranges *shift; /* see lz_layer_opts */
    uint64_t bytes, max_bytes;
    struct lz_pathset seen;
    struct fixup *fixups;
    size_t n_fixups, cap_fixups;
    struct lz_prepare_stats *st;
    struct lz_error *err;
};

/* Opens path under dirfd (a directory of the layer's root) as the
 * preparer must: lz_openat_beneath without following any symlink, and
 * -EXDEV when the result is on another mount than the root (what
 * RESOLVE_NO_XDEV gives: the paths opened here have no "..", so a path
 * that entered another mount cannot come back to the root's). */
static int open_confined(const struct layer *l, int dirfd, const char *path, int flags) {
    int fd = lz_openat_beneath(dirfd, path, flags, 0, false);
    if (fd < 0)
        return fd;
    uint64_t mnt = 0;
    int r = mount_id_of(fd, &mnt);
    if (r == 0 && mnt != l->root_mnt)
        r = -EXDEV;
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

static void add_fixup(struct layer *l, const char *path, mode_t mode, const struct timespec *mtime) {
    if (l->n_fixups == l->cap_fixups) {
        l->cap_fixups = l->cap_fixups ? l->cap_fixups * 2 : 64;
        l->fixups = lz_xrealloc(l->fixups, l->cap_fixups * sizeof *l->fixups);
    }
    size_t depth = 0;
    for (const char *s = path; *s; s++)
        depth += *s == '/';
    l->fixups[l->n_fixups] = (struct fixup){
        .path = lz_xstrdup(path),
        .depth = depth,
        .idx = l->n_fixups,
        .mode = mode,
        .has_time = mtime != NULL,
        .mtime = mtime ? *mtime : (struct timespec){ 0 },
    };
    l->n_fixups++;
}

static void layer_free(struct layer *l) {
    for (size_t i = 0; i < l->n_fixups; i++)
        free(l->fixups[i].path);
    free(l->fixups);
    lz_pathset_free(&l->seen);
}

/* Normalises an archive path into out (PATH_MAX bytes): strips leading "/"
 * and "./", drops empty and "." components, refuses "..", over-long names
 * and whiteout prefixes on non-final components. Empty result: the root. */
static int normalize_path(struct layer *l, const char *in, char *out) {
    size_t inlen = strlen(in);
    if (inlen >= PATH_MAX)
        return lz_error_set(l->err, -ENAMETOOLONG, "entry name longer than PATH_MAX");
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t clen = (size_t)(p - c);
        if (clen == 1 && c[0] == '.')
            continue;
        if (clen == 2 && c[0] == '.' && c[1] == '.')
            return lz_error_set(l->err, -EPERM, "entry \"%s\" has a \"..\" component", in);
        if (clen > NAME_MAX)
            return lz_error_set(l->err, -ENAMETOOLONG, "entry \"%.64s...\" has a component longer than NAME_MAX", in);
        if (o)
            out[o++] = '/';
        memcpy(out + o, c, clen);
        o += clen;
    }
    out[o] = '\0';
    /* Only the final component may be a whiteout. */
    for (char *s = out; (s = strstr(s, WH_PREFIX)); s++) {
        bool at_start = s == out || s[-1] == '/';
        if (at_start && strchr(s, '/'))
            return lz_error_set(l->err, -EPERM, "entry \"%s\" has a whiteout as a directory", in);
    }
    return 0;
}

/* Unprivileged callers cannot write into a directory whose owner bits lack
 * w or x (e.g. /proc 0555 from a lower layer). Grant them for the duration
 * of the layer and restore the mode in the end-of-layer fixups. */
static int ensure_dir_usable(struct layer *l, int fd, const char *relpath) {
    if (l->euid == 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if ((st.st_mode & 0700) == 0700 || st.st_uid != l->euid)
        return 0;
    char proc[64];
    int r = lz_snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (r < 0)
        return r;
    if (chmod(proc, (st.st_mode & 07777) | 0700) < 0)
        return -errno;
    if (relpath[0])
        add_fixup(l, relpath, st.st_mode & 07777, NULL);
    return 0;
}

static int refuse_walk(struct layer *l, int r, const char *path) {
    switch (r) {
    case -ELOOP: return lz_error_set(l->err, -EPERM, "entry \"%s\": a parent is a symlink", path);
    case -ENOTDIR: return lz_error_set(l->err, -EPERM, "entry \"%s\": a parent is not a directory", path);
    case -EXDEV: return lz_error_set(l->err, -EPERM, "entry \"%s\": a parent escapes the rootfs", path);
    default: return lz_error_set(l->err, r, "entry \"%s\": cannot open parent: %s", path, strerror(-r));
    }
}

/* Opens the parent directory of the normalised path `norm` as an O_PATH fd,
 * creating missing directories when `create`. *ret_base points into norm. */
static int open_parent(struct layer *l, const char *norm, bool create, int *ret_fd, const char **ret_base) {
    const char *slash = strrchr(norm, '/');
    char parent[PATH_MAX];
    size_t plen = slash ? (size_t)(slash - norm) : 0;
    memcpy(parent, norm, plen);
    parent[plen] = '\0';
    const char *base = slash ? slash + 1 : norm;

    int fd = open_confined(l, l->root, plen ? parent : ".", O_PATH | O_DIRECTORY);
    if (fd >= 0) {
        int r = ensure_dir_usable(l, fd, parent);
        if (r < 0) {
            close(fd);
            return lz_error_set(l->err, r, "entry \"%s\": cannot make parent writable", norm);
        }
        *ret_fd = fd;
        *ret_base = base;
        return 0;
    }
    if (fd != -ENOENT && fd != -EACCES)
        return refuse_walk(l, fd, norm);
    if (fd == -ENOENT && !create)
        return -ENOENT;

    /* Walk one component at a time, creating and unlocking as we go. */
    _cleanup_close_ int cur = open_confined(l, l->root, ".", O_PATH | O_DIRECTORY);
    if (cur < 0)
        return lz_error_set(l->err, cur, "cannot open rootfs");
    char *p = parent;
    while (*p) {
        char *end = strchr(p, '/');
        if (end)
            *end = '\0';
        int nfd = open_confined(l, cur, p, O_PATH | O_DIRECTORY);
        if (nfd == -ENOENT) {
            if (!create)
                return -ENOENT;
            if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST)
                return lz_error_set(l->err, -errno, "entry \"%s\": cannot create parent: %m", norm);
            lz_pathset_add(&l->seen, parent, strlen(parent));
            nfd = open_confined(l, cur, p, O_PATH | O_DIRECTORY);
        }
        if (nfd < 0)
            return refuse_walk(l, nfd, norm);
        int r = ensure_dir_usable(l, nfd, parent);
        close(cur);
        cur = nfd;
        if (r < 0)
            return lz_error_set(l->err, r, "entry \"%s\": cannot make parent writable", norm);
        if (!end)
            break;
        *end = '/';
        p = end + 1;
    }
    *ret_fd = TAKE_FD(cur);
    *ret_base = base;
    return 0;
}

/* Removes whatever is at parent/name (recursively for a directory). */
static int remove_existing(struct layer *l, int parent, const char *name, bool keep_dir, bool *ret_is_dir) {
    struct stat st;
    if (ret_is_dir)
        *ret_is_dir = false;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISDIR(st.st_mode)) {
        if (keep_dir) {
            if (ret_is_dir)
                *ret_is_dir = true;
            return 0;
        }
        return lz_prepare_remove_tree(parent, name);
    }
    (void)l;
    return unlinkat(parent, name, 0) < 0 ? -errno : 0;
}

static mode_t entry_mode(const struct layer *l, struct archive_entry *e) {
    mode_t m = archive_entry_perm(e) & 07777;
    if (!l->keep_setid)
        m &= (mode_t) ~(S_ISUID | S_ISGID);
    return m;
}

/* An image ID as stored on the host: itself, or shifted into the
 * subordinate range (0 stays 0; beyond the range: root's). */
static la_int64_t host_id(la_int64_t id, unsigned long start, unsigned long count) {
    if (id == 0)
        return 0;
    return (unsigned long)id <= count ? (la_int64_t)(start + (unsigned long)id - 1) : 0;
}

static bool entry_ids(const struct layer *l, struct archive_entry *e, uid_t *uid, gid_t *gid) {
    la_int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);
    if (u < 0 || g < 0 || u >= (la_int64_t)UINT32_MAX || g >= (la_int64_t)UINT32_MAX)
        return false;
    if (l->shift) {
        u = host_id(u, l->shift->us, l->shift->un);
        g = host_id(g, l->shift->gs, l->shift->gn);
    }
    *uid = (uid_t)u;
    *gid = (gid_t)g;
    return true;
}

static void entry_mtime(struct archive_entry *e, struct timespec ts[2]) {
    if (archive_entry_mtime_is_set(e)) {
        ts[1].tv_sec = (time_t)archive_entry_mtime(e);
        long ns = archive_entry_mtime_nsec(e);
        ts[1].tv_nsec = ns >= 0 && ns < 1000000000 ? ns : 0;
    } else {
        ts[1].tv_sec = 0;
        ts[1].tv_nsec = UTIME_OMIT;
    }
    ts[0] = ts[1];
}

/* The entry's mtime on parent/base itself (never followed). */
static int set_mtime_at(struct layer *l, struct archive_entry *e, int parent, const char *base, const char *norm) {
    struct timespec ts[2];
    entry_mtime(e, ts);
    if (utimensat(parent, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": utimensat: %m", norm);
    return 0;
}

static void apply_owner_at(struct layer *l, int parent, const char *name, struct archive_entry *e) {
    uid_t uid;
    gid_t gid;
    if (!l->chown_ok || !entry_ids(l, e, &uid, &gid))
        return;
    if (fchownat(parent, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
        l->st->chown_failed++;
}

static int write_data(struct layer *l, struct archive *a, int fd, uint64_t size, const char *path) {
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = archive_read_data_block(a, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return lz_error_set(l->err, -EIO, "entry \"%s\": %s", path, archive_error_string(a) ?: "read error");
        if (off < 0 || len > size || (uint64_t)off > size - len)
            return lz_error_set(l->err, -EFBIG, "entry \"%s\": data beyond its declared size", path);
        if (len > l->max_bytes - l->bytes)
            return lz_error_set(l->err, -EFBIG, "layer writes more than %" PRIu64 " bytes", l->max_bytes);
        l->bytes += len;
        const char *b = buf;
        size_t done = 0;
        while (done < len) {
            ssize_t w = pwrite(fd, b + done, len - done, (off_t)((uint64_t)off + done));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return lz_error_set(l->err, -errno, "entry \"%s\": write: %m", path);
            }
            done += (size_t)w;
        }
        l->st->bytes += len;
    }
    if (ftruncate(fd, (off_t)size) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": truncate: %m", path);
    return 0;
}

static int do_regular(struct layer *l, struct archive *a, struct archive_entry *e, int parent, const char *base,
                      const char *norm) {
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0 ||
        (uint64_t)archive_entry_size(e) > LZ_PREPARE_MAX_FILE_SIZE)
        return lz_error_set(l->err, -EFBIG, "entry \"%s\": absurd size", norm);
    uint64_t size = (uint64_t)archive_entry_size(e);
    int r = remove_existing(l, parent, base, false, NULL);
    if (r < 0)
        return lz_error_set(l->err, r, "entry \"%s\": cannot replace existing entry: %s", norm, strerror(-r));
    _cleanup_close_ int fd =
        openat(parent, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": create: %m", norm);
    r = write_data(l, a, fd, size, norm);
    if (r < 0)
        return r;
    uid_t uid;
    gid_t gid;
    if (l->chown_ok && entry_ids(l, e, &uid, &gid) && fchown(fd, uid, gid) < 0)
        l->st->chown_failed++;
    /* After chown: chown clears setuid/setgid. */
    if (fchmod(fd, entry_mode(l, e)) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": chmod: %m", norm);
    struct timespec ts[2];
    entry_mtime(e, ts);
    if (futimens(fd, ts) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": utimens: %m", norm);
    l->st->regular++;
    return 0;
}

static int do_dir(struct layer *l, struct archive_entry *e, int parent, const char *base, const char *norm) {
    bool is_dir;
    int r = remove_existing(l, parent, base, true, &is_dir);
    if (r < 0)
        return lz_error_set(l->err, r, "entry \"%s\": cannot replace existing entry: %s", norm, strerror(-r));
    if (!is_dir && mkdirat(parent, base, 0700) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": mkdir: %m", norm);
    if (is_dir) {
        /* A lower layer's directory: an unprivileged caller may need to
         * unlock it to write this layer's children into it. */
        _cleanup_close_ int fd = open_confined(l, parent, base, O_PATH | O_DIRECTORY);
        if (fd < 0)
            return refuse_walk(l, fd, norm);
        r = ensure_dir_usable(l, fd, norm);
        if (r < 0)
            return lz_error_set(l->err, r, "entry \"%s\": chmod: %s", norm, strerror(-r));
    }
    apply_owner_at(l, parent, base, e);
    /* Mode and time at the end of the layer, after the children. */
    struct timespec ts[2];
    entry_mtime(e, ts);
    add_fixup(l, norm, entry_mode(l, e), ts[1].tv_nsec == UTIME_OMIT ? NULL : &ts[1]);
    l->st->dirs++;
    return 0;
}

static int do_symlink(struct layer *l, struct archive_entry *e, int parent, const char *base, const char *norm) {
    const char *target = archive_entry_symlink(e);
    if (!target)
        target = archive_entry_symlink_utf8(e);
    if (!target || !target[0] || strlen(target) >= PATH_MAX)
        return lz_error_set(l->err, -EINVAL, "entry \"%s\": invalid symlink target", norm);
    int r = remove_existing(l, parent, base, false, NULL);
    if (r < 0)
        return lz_error_set(l->err, r, "entry \"%s\": cannot replace existing entry: %s", norm, strerror(-r));
    if (symlinkat(target, parent, base) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": symlink: %m", norm);
    apply_owner_at(l, parent, base, e);
    r = set_mtime_at(l, e, parent, base, norm);
    if (r < 0)
        return r;
    l->st->symlinks++;
    return 0;
}

static int do_fifo(struct layer *l, struct archive_entry *e, int parent, const char *base, const char *norm) {
    int r = remove_existing(l, parent, base, false, NULL);
    if (r < 0)
        return lz_error_set(l->err, r, "entry \"%s\": cannot replace existing entry: %s", norm, strerror(-r));
    if (mknodat(parent, base, S_IFIFO | 0600, 0) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": mkfifo: %m", norm);
    apply_owner_at(l, parent, base, e);
    /* base is the FIFO just created by us (single writer to a private tree),
     * so following it is not a concern; glibc 2.36 has no AT_SYMLINK_NOFOLLOW
     * fchmodat without /proc. */
    if (fchmodat(parent, base, entry_mode(l, e), 0) < 0)
        return lz_error_set(l->err, -errno, "entry \"%s\": chmod: %m", norm);
    r = set_mtime_at(l, e, parent, base, norm);
    if (r < 0)
        return r;
    l->st->fifos++;
    return 0;
}

static int do_hardlink(struct layer *l, const char *target_raw, int parent, const char *base, const char *norm) {
    char target[PATH_MAX];
    int r = normalize_path(l, target_raw, target);
    if (r < 0)
        return lz_error_prefix(l->err, r, "hard link \"%s\"", norm);
    if (!target[0])
        return lz_error_set(l->err, -EPERM, "hard link \"%s\" points at the root", norm);
    if (strcmp(target, norm) == 0)
        return 0;
    _cleanup_close_ int tparent = -EBADF;
    const char *tbase;
    r = open_parent(l, target, false, &tparent, &tbase);
    if (r == -ENOENT)
        return lz_error_set(l->err, -ENOENT, "hard link \"%s\": target \"%s\" does not exist", norm, target);
    if (r < 0)
        return r;
    struct stat st;
    if (fstatat(tparent, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return lz_error_set(l->err, -errno, "hard link \"%s\": target \"%s\": %m", norm, target);
    if (S_ISDIR(st.st_mode))
        return lz_error_set(l->err, -EPERM, "hard link \"%s\": target \"%s\" is a directory", norm, target);
    r = remove_existing(l, parent, base, false, NULL);
    if (r < 0)
        return lz_error_set(l->err, r, "entry \"%s\": cannot replace existing entry: %s", norm, strerror(-r));
    if (linkat(tparent, tbase, parent, base, 0) < 0)
        return lz_error_set(l->err, -errno, "hard link \"%s\" -> \"%s\": %m", norm, target);
    l->st->hardlinks++;
    return 0;
}

/* Opaque directory: remove every entry that this layer did not create or
 * touch; descend into kept directories (their lower content is hidden too). */
static int opaque_clear(struct layer *l, int dfd, const char *dpath, int depth) {
    if (depth > PATH_MAX / 2)
        return lz_error_set(l->err, -ELOOP, "opaque directory \"%s\": nested too deep", dpath);
    char **names = NULL;
    size_t n = 0;
    int r = lz_dir_names(dfd, SIZE_MAX, &names, &n);
    if (r < 0)
        return lz_error_set(l->err, r, "opaque directory \"%s\": %s", dpath, strerror(-r));
    int ret = 0;
    for (size_t i = 0; i < n && ret == 0; i++) {
        char child[PATH_MAX];
        if (lz_snprintf(child, sizeof child, "%s%s%s", dpath, dpath[0] ? "/" : "", names[i]) < 0) {
            ret = lz_error_set(l->err, -ENAMETOOLONG, "opaque directory \"%s\": name too long", dpath);
            break;
        }
        if (!lz_pathset_has(&l->seen, child, strlen(child))) {
            r = lz_prepare_remove_tree(dfd, names[i]);
            if (r < 0)
                ret = lz_error_set(l->err, r, "opaque directory: cannot remove \"%s\": %s", child, strerror(-r));
            continue;
        }
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            int cfd = open_confined(l, dfd, names[i], O_PATH | O_DIRECTORY);
            if (cfd < 0) {
                ret = refuse_walk(l, cfd, child);
                break;
            }
            r = ensure_dir_usable(l, cfd, child);
            if (r == 0)
                r = opaque_clear(l, cfd, child, depth + 1);
            close(cfd);
            if (r < 0)
                ret = r;
        }
    }
    lz_strv_free(names, n);
    return ret;
}

static int do_whiteout(struct layer *l, const char *norm, const char *base) {
    if (strcmp(base, WH_OPAQUE) == 0) {
        _cleanup_close_ int parent = -EBADF;
        const char *b;
        int r = open_parent(l, norm, true, &parent, &b);
        if (r < 0)
            return r;
        size_t plen = (size_t)(base - norm);
        char dpath[PATH_MAX];
        memcpy(dpath, norm, plen);
        dpath[plen ? plen - 1 : 0] = '\0';
        l->st->opaques++;
        return opaque_clear(l, parent, dpath, 0);
    }
    if (strncmp(base, WH_META, strlen(WH_META)) == 0)
        return 0; /* AUFS metadata (.wh..wh.plnk, ...): not part of the tree */
    const char *name = base + strlen(WH_PREFIX);
    if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
        return lz_error_set(l->err, -EPERM, "entry \"%s\": invalid whiteout", norm);
    char target[PATH_MAX];
    size_t plen = (size_t)(base - norm);
    memcpy(target, norm, plen);
    memcpy(target + plen, name, strlen(name) + 1);
    l->st->whiteouts++;
    /* Whiteouts hide lower layers only; an entry of this layer stays. */
    if (lz_pathset_has(&l->seen, target, strlen(target)))
        return 0;
    _cleanup_close_ int parent = -EBADF;
    const char *b;
    int r = open_parent(l, target, false, &parent, &b);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = lz_prepare_remove_tree(parent, b);
    if (r < 0)
        return lz_error_set(l->err, r, "whiteout \"%s\": cannot remove: %s", target, strerror(-r));
    return 0;
}

static int apply_entry(struct layer *l, struct archive *a, struct archive_entry *e) {
    /* In the C locale libarchive cannot convert a pax UTF-8 name to the
     * locale charset; the UTF-8 form is the name's bytes then. */
    const char *raw = archive_entry_pathname(e);
    if (!raw)
        raw = archive_entry_pathname_utf8(e);
    if (!raw)
        return lz_error_set(l->err, -EINVAL, "entry without a usable name");
    char norm[PATH_MAX];
    int r = normalize_path(l, raw, norm);
    if (r < 0)
        return r;
    const char *hardlink = archive_entry_hardlink(e);
    if (!hardlink)
        hardlink = archive_entry_hardlink_utf8(e);
    mode_t type = archive_entry_filetype(e);
    const char *slash = strrchr(norm, '/');
    const char *base = slash ? slash + 1 : norm;
    bool whiteout = strncmp(base, WH_PREFIX, strlen(WH_PREFIX)) == 0;
    /* Data of anything we do not write as a regular file is skipped by
     * libarchive, which still has to decompress it: bound it first. */
    if ((!norm[0] || whiteout || hardlink || type != AE_IFREG) && archive_entry_size_is_set(e) &&
        archive_entry_size(e) > (la_int64_t)LZ_PREPARE_MAX_OTHER_DATA)
        return lz_error_set(l->err, -EFBIG, "entry \"%s\": absurd size for its type", raw);
    if (!norm[0])
        return 0; /* the root entry */
    /* Everything above this entry is "of this layer" for opaque dirs. */
    for (const char *s = norm; (s = strchr(s, '/')); s++)
        lz_pathset_add(&l->seen, norm, (size_t)(s - norm));

    if (whiteout)
        return do_whiteout(l, norm, base);

    lz_pathset_add(&l->seen, norm, strlen(norm));
    if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)) {
        l->st->devices_skipped++;
        return 0;
    }
    if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
        return lz_error_set(l->err, -EINVAL, "entry \"%s\": unsupported type 0%o", norm, (unsigned)type);

    _cleanup_close_ int parent = -EBADF;
    const char *b;
    r = open_parent(l, norm, true, &parent, &b);
    if (r < 0)
        return r;
    if (hardlink)
        return do_hardlink(l, hardlink, parent, base, norm);
    switch (type) {
    case AE_IFREG: return do_regular(l, a, e, parent, base, norm);
    case AE_IFDIR: return do_dir(l, e, parent, base, norm);
    case AE_IFLNK: return do_symlink(l, e, parent, base, norm);
    case AE_IFIFO: return do_fifo(l, e, parent, base, norm);
    default: return lz_error_set(l->err, -EINVAL, "entry \"%s\": unsupported type 0%o", norm, (unsigned)type);
    }
}

static int fixup_cmp(const void *pa, const void *pb) {
    const struct fixup *a = pa, *b = pb;
    if (a->depth != b->depth)
        return a->depth > b->depth ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx ? 1 : 0;
}

static int apply_fixups(struct layer *l) {
    /* Deepest first: a parent's final mode may forbid reaching its children.
     * At equal depth, recording order: a later entry for a path wins. */
    if (l->n_fixups > 1)
        qsort(l->fixups, l->n_fixups, sizeof *l->fixups, fixup_cmp);
    for (size_t i = 0; i < l->n_fixups; i++) {
        const struct fixup *f = &l->fixups[i];
        _cleanup_close_ int fd = open_confined(l, l->root, f->path, O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
            continue; /* replaced later in the layer */
        if (fd < 0)
            return lz_error_set(l->err, fd, "directory \"%s\": %s", f->path, strerror(-fd));
        if (fchmod(fd, f->mode) < 0)
            return lz_error_set(l->err, -errno, "directory \"%s\": chmod: %m", f->path);
        if (f->has_time) {
            struct timespec ts[2] = { f->mtime, f->mtime };
            if (futimens(fd, ts) < 0)
                return lz_error_set(l->err, -errno, "directory \"%s\": utimens: %m", f->path);
        }
    }
    return 0;
}

/* ---- removal ---- */

static int remove_tree_at(int dfd, const char *name, dev_t dev, int depth) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    if (st.st_dev != dev)
        return -EXDEV;
    if (depth > PATH_MAX / 2)
        return -ELOOP;
    if ((st.st_mode & 0700) != 0700)
        (void)fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0); /* a directory, not followed */
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char **names = NULL;
    size_t n = 0;
    int ret = lz_dir_names(fd, SIZE_MAX, &names, &n);
    for (size_t i = 0; i < n; i++) {
        int r = remove_tree_at(fd, names[i], dev, depth + 1);
        if (r < 0 && ret == 0)
            ret = r;
    }
    lz_strv_free(names, n);
    close(fd);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && ret == 0)
        ret = -errno;
    return ret;
}

int lz_prepare_remove_tree(int dirfd, const char *name) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    return remove_tree_at(dirfd, name, st.st_dev, 0);
}

/* Error messages quote attacker-controlled names: keep them one printable
 * line (no terminal escapes reach the user's terminal). */
int lz_error_sanitize(struct lz_error *err, int r) {
    if (r < 0 && err)
        for (char *c = err->msg; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    return r;
}

/* ---- the hashing reader under libarchive ---- */

struct reader {
    int fd;
    const uint8_t *mem;
    size_t mem_len, mem_off;
    uint8_t *buf;
    bool hashing;
    crypto_hash_sha256_state h;
    uint64_t nread;
    const struct lz_layer_opts *opts;
    int read_errno;
};

static la_ssize_t reader_read(struct archive *a, void *ud, const void **ret_buf) {
    struct reader *rd = ud;
    (void)a;
    ssize_t n;
    if (rd->mem) {
        size_t left = rd->mem_len - rd->mem_off;
        n = (ssize_t)(left > READ_CHUNK ? READ_CHUNK : left);
        *ret_buf = rd->mem + rd->mem_off;
        rd->mem_off += (size_t)n;
    } else {
        do
            n = read(rd->fd, rd->buf, READ_CHUNK);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
            rd->read_errno = errno;
            archive_set_error(a, errno, "read: %s", strerror(errno));
            return -1;
        }
        *ret_buf = rd->buf;
    }
    if (rd->hashing && n > 0)
        crypto_hash_sha256_update(&rd->h, *ret_buf, (unsigned long long)n);
    rd->nread += (uint64_t)n;
    if (rd->opts && rd->opts->progress && n > 0)
        rd->opts->progress(rd->opts->ud, rd->opts->phase ? rd->opts->phase : "prepare",
                           rd->opts->progress_base + rd->nread, rd->opts->progress_total);
    return n;
}

static int apply_stream(int rootfs_dirfd, struct reader *rd, const struct lz_layer_opts *opts, struct lz_error *err) {
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium initialisation failed");
    struct lz_prepare_stats local = { 0 };
    struct layer l = {
        .root = rootfs_dirfd,
        .euid = geteuid(),
        .chown_ok = geteuid() == 0,
        .shift = opts && geteuid() == 0 ? opts->shift : NULL,
        .keep_setid = lz_prepare_keeps_setid(),
        .max_bytes = opts && opts->max_bytes ? opts->max_bytes : LZ_PREPARE_MAX_LAYER_BYTES,
        .st = opts && opts->stats ? opts->stats : &local,
        .err = err,
    };
    int r = mount_id_of(rootfs_dirfd, &l.root_mnt);
    if (r < 0)
        return lz_error_errno(err, r, "cannot stat the rootfs");
    if ((r = lz_archive_load(err)) < 0)
        return r;
    rd->opts = opts;
    if (opts && opts->expected_digest) {
        rd->hashing = true;
        crypto_hash_sha256_init(&rd->h);
    }

    struct archive *a = archive_read_new();
    if (!a)
        abort();
    r = 0;
    /* In-process decompressors only: a WARN here means libarchive would run
     * an external program on attacker-controlled bytes. */
    if (archive_read_support_filter_gzip(a) != ARCHIVE_OK || archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
        archive_read_support_format_tar(a) != ARCHIVE_OK || archive_read_support_format_empty(a) != ARCHIVE_OK) {
        r = lz_error_set(err, -ENOTSUP, "libarchive lacks in-process gzip/zstd/tar support");
        goto out;
    }
    if (archive_read_open2(a, rd, NULL, reader_read, NULL, NULL) != ARCHIVE_OK) {
        r = lz_error_set(err, rd->read_errno ? -rd->read_errno : -EBADMSG, "layer: %s",
                         archive_error_string(a) ?: "not a tar stream");
        goto out;
    }
    for (;;) {
        struct archive_entry *e;
        int ar = archive_read_next_header(a, &e);
        if (ar == ARCHIVE_EOF)
            break;
        if (ar < ARCHIVE_WARN) {
            r = lz_error_set(err, rd->read_errno ? -rd->read_errno : -EBADMSG, "layer: %s",
                             archive_error_string(a) ?: "corrupt tar stream");
            goto out;
        }
        /* Headers, padding and skipped data also cost decompression time:
         * bound the uncompressed stream by what the entries may write. */
        la_int64_t pos = archive_filter_bytes(a, 0);
        if (pos > 0 && (uint64_t)pos > l.max_bytes + (l.st->entries + 1) * LZ_PREPARE_MAX_OTHER_DATA) {
            r = lz_error_set(err, -EFBIG, "layer stream is larger than its entries justify");
            goto out;
        }
        if (++l.st->entries > LZ_PREPARE_MAX_ENTRIES) {
            r = lz_error_set(err, -EFBIG, "layer has more than %" PRIu64 " entries", LZ_PREPARE_MAX_ENTRIES);
            goto out;
        }
        r = apply_entry(&l, a, e);
        if (r < 0)
            goto out;
    }
    r = apply_fixups(&l);
    if (r < 0)
        goto out;
    if (rd->hashing) {
        /* The tar reader stops at the end-of-archive marker; the digest
         * covers the whole blob. */
        const void *dummy;
        la_ssize_t n;
        while ((n = reader_read(a, rd, &dummy)) > 0)
            ;
        if (n < 0) {
            r = lz_error_set(err, -rd->read_errno, "layer: read: %s", strerror(rd->read_errno));
            goto out;
        }
        uint8_t md[crypto_hash_sha256_BYTES];
        char hex[2 * crypto_hash_sha256_BYTES + 1];
        crypto_hash_sha256_final(&rd->h, md);
        lz_hex(md, sizeof md, hex);
        const char *want = opts->expected_digest;
        if (strncmp(want, "sha256:", 7) != 0 || strcmp(want + 7, hex) != 0) {
            r = lz_error_set(err, -EBADMSG, "layer digest mismatch: expected %s, got sha256:%s", want, hex);
            goto out;
        }
    }
out:
    archive_read_free(a);
    layer_free(&l);
    return lz_error_sanitize(err, r);
}

int lz_prepare_apply_layer(int rootfs_dirfd, int layer_fd, const struct lz_layer_opts *opts, struct lz_error *err) {
    _cleanup_free_ uint8_t *buf = lz_xmalloc(READ_CHUNK);
    struct reader rd = { .fd = layer_fd, .buf = buf };
    return apply_stream(rootfs_dirfd, &rd, opts, err);
}

int lz_prepare_apply_layer_fd(int rootfs_dirfd, int layer_fd, struct lz_error *err) {
    return lz_prepare_apply_layer(rootfs_dirfd, layer_fd, NULL, err);
}

int lz_prepare_apply_layer_mem_opts(int rootfs_dirfd, const void *buf, size_t len, const struct lz_layer_opts *opts,
                                    struct lz_error *err) {
    static const uint8_t empty[1];
    struct reader rd = { .fd = -EBADF, .mem = len ? buf : empty, .mem_len = len };
    return apply_stream(rootfs_dirfd, &rd, opts, err);
}

int lz_prepare_apply_layer_mem(int rootfs_dirfd, const void *buf, size_t len, struct lz_error *err) {
    return lz_prepare_apply_layer_mem_opts(rootfs_dirfd, buf, len, NULL, err);
}
