/* anchor.c — the State Anchor overlays (see anchor.h). */
#include "anchor.h"
#include "evidence.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

void lz_anchor_layout(const char *anchor_root, const char *target_root, char *const *dirs, size_t n,
                      struct lz_anchor_dir **ret) {
    struct lz_anchor_dir *d = lz_xcalloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; i < n; i++) {
        d[i].path = lz_xstrdup(dirs[i]);
        d[i].upper = lz_xasprintf("%s/upper%s", anchor_root, dirs[i]);
        d[i].work = lz_xasprintf("%s/work%s", anchor_root, dirs[i]);
        d[i].target = lz_xasprintf("%s%s", target_root, dirs[i]);
    }
    *ret = d;
}

void lz_anchor_layout_free(struct lz_anchor_dir *d, size_t n) {
    for (size_t i = 0; d && i < n; i++) {
        free(d[i].path);
        free(d[i].upper);
        free(d[i].work);
        free(d[i].target);
    }
    free(d);
}

static int mount_id_of(const char *path, uint64_t *ret) {
    struct statx sx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &sx) < 0)
        return -errno;
    if (!(sx.stx_mask & STATX_MNT_ID_UNIQUE))
        return -EOPNOTSUPP;
    *ret = sx.stx_mnt_id;
    return 0;
}

static uint64_t self_mntns(void) {
    struct stat st;
    return stat("/proc/self/ns/mnt", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The lower of `path` beneath the rootfs, no symlinks: an O_PATH fd, or
 * -ENOENT when the image has no such directory. */
static int open_lower(int rootfd, const char *path, struct lz_error *err) {
    int fd = lz_openat_beneath(rootfd, path + 1, O_PATH | O_DIRECTORY, 0, false);
    if (fd >= 0)
        return fd;
    if (fd == -ENOENT) /* not a failure: the caller makes an empty lower */
        return lz_error_set(err, -ENOENT, "persistent dir %s does not exist in the image", path);
    if (fd == -ELOOP)
        return lz_error_set(err, -ELOOP,
                            "persistent dir %s is a symbolic link (or lies under one) in the image; "
                            "name the directory it points to in persistent_dirs instead",
                            path);
    if (fd == -ENOTDIR)
        return lz_error_set(err, -ENOTDIR, "persistent dir %s is not a directory in the image", path);
    return lz_error_set(err, fd, "cannot open persistent dir %s in the image: %s", path, strerror(-fd));
}

static int mount_one(const char *lower, const char *upper, const char *work, const char *target, struct lz_error *err) {
    int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
    if (fs < 0)
        return lz_error_set(err, -errno, "overlayfs is not available: %s", strerror(errno));
    struct {
        const char *k, *v;
    } opts[] = {
        { "lowerdir+", lower }, { "upperdir", upper }, { "workdir", work },
        { "userxattr", NULL },  { "index", "off" },    { "metacopy", "off" },
    };
    int r = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(opts) && r == 0; i++) {
        long rc = opts[i].v ? syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i].k, opts[i].v, 0)
                            : syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, opts[i].k, NULL, 0);
        if (rc < 0)
            r = lz_error_set(err, -errno, "overlayfs option %s: %s", opts[i].k, strerror(errno));
    }
    if (r == 0 && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        r = lz_error_set(err, -errno, "cannot create the overlay for %s: %s", target, strerror(errno));
        /* The kernel explains refusals in the fs context log. */
        char b[256];
        ssize_t n = read(fs, b, sizeof b - 1);
        if (n > 0) {
            b[n] = '\0';
            lz_error_prefix(err, r, "%.*s", (int)strcspn(b, "\n"), b);
        }
    }
    int mfd = -1;
    if (r == 0 && (mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV)) < 0)
        r = lz_error_set(err, -errno, "cannot mount the overlay for %s: %s", target, strerror(errno));
    if (r == 0 && syscall(SYS_move_mount, mfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        r = lz_error_set(err, -errno, "cannot attach the overlay at %s: %s", target, strerror(errno));
    if (mfd >= 0)
        close(mfd);
    close(fs);
    return r;
}

int lz_anchor_mount(const char *rootfs, const char *anchor_root, const struct lz_anchor_dir *d, size_t n, char *ident,
                    size_t identlen, struct lz_error *err) {
    _cleanup_close_ int rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return lz_error_set(err, -errno, "cannot open the prepared lower %s: %s", rootfs, strerror(errno));
    _cleanup_free_ char *empty = lz_xasprintf("%s/empty", anchor_root);
    int r = lz_mkdir_p(empty, 0755);
    if (r < 0)
        return lz_error_set(err, r, "cannot create %s: %s", empty, strerror(-r));
    _cleanup_free_ struct lz_evidence *ev = lz_xmalloc(sizeof *ev);
    lz_evidence_init(ev);
    lz_evidence_add_u64(ev, "mntns", self_mntns());
    size_t mounted = 0;
    for (size_t i = 0; i < n; i++) {
        int lfd = open_lower(rootfd, d[i].path, err);
        if (lfd < 0 && lfd != -ENOENT) {
            r = lfd;
            break;
        }
        char lower[64];
        if (lfd >= 0)
            snprintf(lower, sizeof lower, "/proc/self/fd/%d", lfd);
        /* The upper and work dirs belong to the developer on the host (uid
         * 0 here); mode 0755 like any root directory of an image. */
        if ((r = lz_mkdir_p(d[i].upper, 0755)) < 0 || (r = lz_mkdir_p(d[i].work, 0700)) < 0 ||
            (r = lz_mkdir_p(d[i].target, 0755)) < 0) {
            r = lz_error_set(err, r, "cannot create the State Anchor directories of %s: %s", d[i].path, strerror(-r));
            if (lfd >= 0)
                close(lfd);
            break;
        }
        r = mount_one(lfd >= 0 ? lower : empty, d[i].upper, d[i].work, d[i].target, err);
        if (lfd >= 0)
            close(lfd);
        if (r < 0)
            break;
        mounted++;
        uint64_t id = 0;
        if ((r = mount_id_of(d[i].target, &id)) < 0) {
            lz_error_set(err, r, "cannot read the mount identity of %s: %s", d[i].target, strerror(-r));
            break;
        }
        lz_evidence_add_u64(ev, d[i].path, id);
        const char *s;
        if ((r = lz_evidence_end(ev, &s)) < 0 || (r = lz_snprintf(ident, identlen, "%s", s)) < 0) {
            r = r == -E2BIG || r == -ENAMETOOLONG
                ? lz_error_set(err, -E2BIG, "too many persistent dirs")
                : lz_error_set(err, r, "cannot record the mount identity of %s", d[i].path);
            break;
        }
    }
    if (r < 0)
        for (size_t i = 0; i < mounted; i++)
            umount2(d[i].target, MNT_DETACH);
    return r;
}

/* The recorded mount id of `path` in an identity, 0 when not recorded. */
static uint64_t ident_mount(const char *ident, const char *path) {
    uint64_t id = 0;
    return lz_evidence_get_u64(ident, path, &id) == 1 ? id : 0;
}

uint64_t lz_anchor_ident_mntns(const char *ident) { return ident_mount(ident, "mntns"); }

int lz_anchor_unmount(const struct lz_anchor_dir *d, size_t n, const char *ident, struct lz_error *err) {
    int r = 0;
    for (size_t i = n; i-- > 0;) {
        uint64_t want = ident_mount(ident, d[i].path), have = 0;
        if (!want)
            continue; /* never mounted */
        if (mount_id_of(d[i].target, &have) == 0 && have == want) {
            if (umount2(d[i].target, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL) {
                r = lz_error_set(err, -errno, "cannot unmount the State Anchor of %s: %s", d[i].path, strerror(errno));
                continue;
            }
        }
        /* Absence: whatever is at the target now is not the recorded mount. */
        if (mount_id_of(d[i].target, &have) == 0 && have == want) {
            r = lz_error_set(err, -EBUSY, "the State Anchor of %s is still mounted", d[i].path);
            continue;
        }
        /* overlayfs leaves its scratch dir mode 000: make the Domain Root
         * removable with plain tools (rm -rf, file managers). */
        _cleanup_free_ char *ww = lz_xasprintf("%s/work", d[i].work);
        (void)chmod(ww, 0700);
    }
    return r;
}

int lz_ns_in_use(const char *type, uint64_t ino) {
    DIR *dir = opendir("/proc");
    if (!dir)
        return -errno;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(dir))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char p[64];
        snprintf(p, sizeof p, "/proc/%s/ns/%s", e->d_name, type);
        struct stat st;
        if (stat(p, &st) == 0 && (uint64_t)st.st_ino == ino)
            found = 1;
    }
    closedir(dir);
    return found;
}

int lz_ns_wait_unused(const char *type, uint64_t ino, int timeout_ms) {
    long deadline = lz_now_ms() + timeout_ms;
    for (unsigned i = 0;; i++) {
        int r = lz_ns_in_use(type, ino);
        if (r <= 0)
            return r;
        if (lz_now_ms() >= deadline)
            return -EBUSY;
        /* Processes killed through pdeathsig chains exit asynchronously. */
        struct timespec ts = { 0, (i < 10 ? 10 : 50) * 1000000L };
        nanosleep(&ts, NULL);
    }
}
