/* Unit tests for the router's shape rules (router_volume.c: volumes, the
 * store, what every backing keeps) and its link-target rule
 * (router_link.c). The host tree of the link rule is a fake: a table of
 * symlinks and their targets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "router_link.h"
#include "router_volume.h"
#include "util.h"

#include <limits.h>
#include <linux/fs.h>
#include <sys/stat.h>

/* ---- volume and store: lz_router_plain_check ---- */

static int plain(enum lz_router_op op, const char *path, bool exists, const char *path2, unsigned flags) {
    struct lz_router_req q = { .op = op, .path = path, .exists = exists, .path2 = path2, .flags = flags };
    return lz_router_plain_check(&q);
}

static void test_plain_creations(void **state) {
    (void)state;
    static const enum lz_router_op made[] = { LZ_ROP_CREATE, LZ_ROP_MKDIR, LZ_ROP_SYMLINK, LZ_ROP_LINK };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(made); i++) {
        assert_int_equal(plain(made[i], "a", false, NULL, 0), 0);
        assert_int_equal(plain(made[i], "a/b/c", true, NULL, 0), 0); /* the file system answers EEXIST */
        /* The root: it exists (mkdir -p goes on), it is never made. */
        assert_int_equal(plain(made[i], "", true, NULL, 0), -EEXIST);
        assert_int_equal(plain(made[i], "", false, NULL, 0), -EINVAL);
        /* No Git policy on a volume: a `.git` is an ordinary name. */
        assert_int_equal(plain(made[i], ".git", false, NULL, 0), 0);
        assert_int_equal(plain(made[i], ".git/hooks/pre-commit", false, NULL, 0), 0);
    }
}

static void test_plain_removal_and_writes(void **state) {
    (void)state;
    assert_int_equal(plain(LZ_ROP_UNLINK, "a", false, NULL, 0), 0);
    assert_int_equal(plain(LZ_ROP_RMDIR, "a/b", false, NULL, 0), 0);
    assert_int_equal(plain(LZ_ROP_UNLINK, "", false, NULL, 0), -EBUSY);
    assert_int_equal(plain(LZ_ROP_RMDIR, "", false, NULL, 0), -EBUSY);
    assert_int_equal(plain(LZ_ROP_WRITE, ".git/config", false, NULL, 0), 0);
    assert_int_equal(plain(LZ_ROP_SETATTR, "", false, NULL, 0), 0);
    assert_int_equal(plain(LZ_ROP_WRITE, "x", false, NULL, 0), 0);
}

static void test_plain_rename(void **state) {
    (void)state;
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "b", 0), 0);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", true, "d/b", RENAME_NOREPLACE), 0);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", true, "b", RENAME_EXCHANGE), 0);
    assert_int_equal(plain(LZ_ROP_RENAME, "", false, "b", 0), -EBUSY);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "", 0), -EBUSY);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, NULL, 0), -EINVAL);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "b", RENAME_WHITEOUT), -EINVAL);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "b", 0x80000000u), -EINVAL);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "../b", 0), -EINVAL);
    assert_int_equal(plain(LZ_ROP_RENAME, "a", false, "b/..", 0), -EINVAL);
    assert_int_equal(plain(LZ_ROP_RENAME, "../a", false, "b", 0), -EINVAL);
}

static void test_plain_malformed(void **state) {
    (void)state;
    static const char *const bad[] = { "..", "../x", "a/../b", "a/..", ".", "./a", "a/./b", "/a", "a/", "a//b", "/" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        for (int op = LZ_ROP_CREATE; op <= LZ_ROP_RENAME; op++)
            if (plain((enum lz_router_op)op, bad[i], false, "b", 0) != -EINVAL)
                fail_msg("%s %s: not refused", lz_router_op_name((enum lz_router_op)op), bad[i]);
    /* Longer than the policy's bound, and one byte under it. */
    char *deep = lz_xmalloc(LZ_ROUTER_PATH_MAX + 2);
    memset(deep, 'a', LZ_ROUTER_PATH_MAX + 1);
    for (size_t i = 200; i < LZ_ROUTER_PATH_MAX; i += 200)
        deep[i] = '/';
    deep[LZ_ROUTER_PATH_MAX + 1] = '\0';
    assert_int_equal(plain(LZ_ROP_CREATE, deep, false, NULL, 0), -ENAMETOOLONG);
    deep[LZ_ROUTER_PATH_MAX - 1] = '\0';
    assert_int_equal(plain(LZ_ROP_CREATE, deep, false, NULL, 0), 0);
    free(deep);
    assert_int_equal(plain((enum lz_router_op)99, "a", false, NULL, 0), -EINVAL);
    assert_int_equal(lz_router_plain_check(NULL), -EINVAL);
    assert_int_equal(plain(LZ_ROP_WRITE, NULL, false, NULL, 0), -EINVAL);
}

/* ---- what every backing keeps ---- */

static void test_create_types(void **state) {
    (void)state;
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFREG), 0);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFIFO), 0);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFCHR), -EPERM);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFBLK), -EPERM);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFSOCK), -EPERM);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFLNK), -EPERM);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, S_IFDIR), -EPERM);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_CREATE, 0), -EPERM);
    /* The other operations make what their name says. */
    assert_int_equal(lz_router_create_type_check(LZ_ROP_MKDIR, S_IFDIR), 0);
    assert_int_equal(lz_router_create_type_check(LZ_ROP_SYMLINK, S_IFLNK), 0);
}

static void test_chmod_mode(void **state) {
    (void)state;
    assert_int_equal(lz_router_chmod_mode(S_IFREG, 04755), 0755);
    assert_int_equal(lz_router_chmod_mode(S_IFREG, 02755), 0755);
    assert_int_equal(lz_router_chmod_mode(S_IFREG, 06777), 0777);
    assert_int_equal(lz_router_chmod_mode(S_IFREG, 01644), 01644);
    assert_int_equal(lz_router_chmod_mode(S_IFIFO, 06600), 0600);
    assert_int_equal(lz_router_chmod_mode(S_IFDIR, 06755), 02755); /* setgid: the group is inherited */
    assert_int_equal(lz_router_chmod_mode(S_IFDIR, 01777), 01777);
    assert_int_equal(lz_router_chmod_mode(S_IFDIR, 04700), 0700);
    assert_int_equal(lz_router_chmod_mode(S_IFREG, S_IFCHR | 0644), 0644); /* type bits never pass */
    assert_int_equal(lz_router_chmod_mode(S_IFREG, 0), 0);
}

static void test_held(void **state) {
    (void)state;
    /* Nothing known against it. */
    for (int op = LZ_ROP_CREATE; op <= LZ_ROP_RENAME; op++)
        assert_int_equal(lz_router_held_check((enum lz_router_op)op, S_IFREG, false, false), 0);
    /* Seen under a protected name: nothing that changes it. */
    assert_int_equal(lz_router_held_check(LZ_ROP_WRITE, S_IFREG, true, false), -EPERM);
    assert_int_equal(lz_router_held_check(LZ_ROP_SETATTR, S_IFREG, true, false), -EPERM);
    assert_int_equal(lz_router_held_check(LZ_ROP_LINK, S_IFREG, true, false), -EPERM);
    assert_int_equal(lz_router_held_check(LZ_ROP_UNLINK, S_IFREG, true, false), 0);
    assert_int_equal(lz_router_held_check(LZ_ROP_RENAME, S_IFREG, true, false), 0);
    /* A checked index or packed-refs: no more data, metadata as ever. */
    assert_int_equal(lz_router_held_check(LZ_ROP_WRITE, S_IFREG, false, true), -EPERM);
    assert_int_equal(lz_router_held_check(LZ_ROP_SETATTR, S_IFREG, false, true), 0);
    assert_int_equal(lz_router_held_check(LZ_ROP_LINK, S_IFREG, false, true), 0);
    /* No hard links to directories; to symlinks, FIFOs, files yes. */
    assert_int_equal(lz_router_held_check(LZ_ROP_LINK, S_IFDIR, false, false), -EPERM);
    assert_int_equal(lz_router_held_check(LZ_ROP_LINK, S_IFLNK, false, false), 0);
    assert_int_equal(lz_router_held_check(LZ_ROP_LINK, S_IFIFO, false, false), 0);
}

static void test_backings_and_owners(void **state) {
    (void)state;
    assert_int_equal(lz_router_backings_check(false, false), 0);
    assert_int_equal(lz_router_backings_check(true, true), 0);
    assert_int_equal(lz_router_backings_check(false, true), -EXDEV);
    assert_int_equal(lz_router_backings_check(true, false), -EXDEV);
    /* The developer is 1000:1000 on the host (0:0 inside). */
    assert_int_equal(lz_router_owner_action(S_IFREG, 1000, 1000, 1000, 1000, false), LZ_OWNER_CLEAR);
    assert_int_equal(lz_router_owner_action(S_IFREG, 1000, 1000, 1000, 1000, true), LZ_OWNER_CLEAR);
    assert_int_equal(lz_router_owner_action(S_IFDIR, 33, 33, 1000, 1000, false), LZ_OWNER_SET);
    assert_int_equal(lz_router_owner_action(S_IFREG, 1000, 5, 1000, 1000, false), LZ_OWNER_SET);
    assert_int_equal(lz_router_owner_action(S_IFREG, 5, 1000, 1000, 1000, false), LZ_OWNER_SET);
    assert_int_equal(lz_router_owner_action(S_IFREG, 0, 0, 1000, 1000, true), -EPERM);
    assert_int_equal(lz_router_owner_action(S_IFREG, UINT32_MAX - 1, 7, 1000, 1000, true), -EPERM);
    /* Symlinks carry no user xattrs: accepted, nothing kept. */
    assert_int_equal(lz_router_owner_action(S_IFLNK, 33, 33, 1000, 1000, false), LZ_OWNER_NOTHING);
    assert_int_equal(lz_router_owner_action(S_IFLNK, 33, 33, 1000, 1000, true), LZ_OWNER_NOTHING);
}

/* ---- link targets: lz_router_link_check against a fake host ---- */

struct fake_link {
    const char *path, *target;
    int err; /* readlink fails with it */
};

static const struct fake_link links[] = {
    { "/home/u/work/l1", "/home/u/.local", 0 },
    { "/home/u/work/l2", "l1/share", 0 },
    { "/home/u/work/deep", "/home/u/.local/share/lazaret/x", 0 },
    { "/home/u/work/safe", "/srv/data", 0 },
    { "/home/u/work/rel", "../other", 0 },
    { "/home/u/work/bad", NULL, -EACCES },
    { "/loop/a", "/loop/b", 0 },
    { "/loop/b", "/loop/a", 0 },
    { "/home/u/vol/link", "../work", 0 },
};

static unsigned readlink_calls;

static int fake_readlink(void *ctx, const char *path, char *buf, size_t size) {
    (void)ctx;
    readlink_calls++;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(links); i++) {
        if (strcmp(links[i].path, path) != 0)
            continue;
        if (links[i].err)
            return links[i].err;
        snprintf(buf, size, "%s", links[i].target);
        return 1;
    }
    return 0;
}

static const char *const deny[] = { "/home/u/.local/share/lazaret", "/run/user/1000/lazaret" };

static struct lz_router_link_policy lpol;

static int link_setup(void **state) {
    (void)state;
    memset(&lpol, 0, sizeof lpol);
    lpol.deny = deny;
    lpol.n_deny = LZ_ARRAY_SIZE(deny);
    lpol.root = "/home/u/work";
    lpol.mountpoint = "/mnt/view";
    lpol.readlink = fake_readlink;
    readlink_calls = 0;
    return 0;
}

#define assert_link(expect, base, target)                                                                              \
    do {                                                                                                               \
        int got_ = lz_router_link_check(&lpol, base, target);                                                          \
        if (got_ != (expect))                                                                                          \
            fail_msg("link %s in %s: %d, want %d", target, base, got_, expect);                                        \
    } while (0)

static void test_link_plain_targets(void **state) {
    (void)state;
    const char *b = "/home/u/work";
    assert_link(0, b, "src/main.c");
    assert_link(0, b, "a//b/./c");
    assert_link(0, b, "");
    assert_link(0, b, ".");
    assert_link(0, b, "/tmp/x");
    assert_link(0, b, "/home/u/.local/share/lazarets"); /* a sibling that shares a prefix */
    assert_link(0, b, "/home/u/.local/share/other");
    assert_link(0, b, "../../u/work/x");
    assert_link(0, b, "..foo/x"); /* not a ".." component */
    assert_link(0, b, "safe/more");
    assert_link(0, b, "rel/x"); /* /home/u/other/x */
}

static void test_link_denied_targets(void **state) {
    (void)state;
    const char *b = "/home/u/work";
    /* The denied path, inside it, an ancestor of it. */
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret");
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret/");
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret/storage/x");
    assert_link(-EPERM, b, "/run/user/1000/lazaret/sock");
    assert_link(-EPERM, b, "/home/u/.local");
    assert_link(-EPERM, b, "/home");
    assert_link(-EPERM, b, "/");
    assert_link(-EPERM, b, "//");
    /* Relative, climbing from the link's real directory. */
    assert_link(-EPERM, b, "../.local/share/lazaret");
    assert_link(-EPERM, b, "..");
    assert_link(-EPERM, b, "../..");
    assert_link(-EPERM, b, "../../../../../../../..");
    assert_link(-EPERM, "/home/u/work/a/b", "../../../.local");
    /* ".." after a name: the name may become a symlink later. */
    assert_link(-EPERM, b, "d/../x");
    assert_link(-EPERM, b, "./d/..");
    assert_link(-EPERM, b, "/tmp/../tmp");
}

static void test_link_through_symlinks(void **state) {
    (void)state;
    const char *b = "/home/u/work";
    assert_link(-EPERM, b, "l1");               /* -> /home/u/.local: an ancestor */
    assert_link(-EPERM, b, "l1/share/lazaret"); /* passes into the denied path */
    assert_link(-EPERM, b, "l2/lazaret/x");     /* a chain of two links */
    assert_link(-EPERM, b, "l2");               /* /home/u/.local/share */
    assert_link(-EPERM, b, "deep");
    assert_link(-EPERM, b, "/loop/a"); /* more than LZ_LINK_FOLLOW_MAX links */
    assert_link(-EACCES, b, "bad/x");  /* the host's error, fail closed */
    /* The router's own mount point is never looked at. */
    assert_link(-EPERM, b, "/mnt/view");
    assert_link(-EPERM, b, "/mnt/view/x");
    assert_link(0, b, "/mnt/viewer");
    /* No symlink inside a denied path is ever read. */
    readlink_calls = 0;
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret/x/y/z");
    assert_int_equal(readlink_calls, 4); /* /home, /home/u, /home/u/.local, /home/u/.local/share */
}

static void test_link_no_deny(void **state) {
    (void)state;
    lpol.n_deny = 0;
    readlink_calls = 0;
    assert_link(0, "/home/u/work", "d/../../..");
    assert_link(0, "/home/u/work", "/home/u/.local/share/lazaret");
    assert_int_equal(readlink_calls, 0);
}

static void test_link_own_volume(void **state) {
    (void)state;
    /* A volume kept under the Storage Root links within itself only. */
    lpol.root = "/home/u/.local/share/lazaret/vol/v1";
    const char *b = "/home/u/.local/share/lazaret/vol/v1/sub";
    assert_link(0, b, "x");
    assert_link(0, b, "../y");
    /* Absolute, it would pass through the Storage Root: links within a
     * volume are relative. */
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret/vol/v1/z");
    assert_link(-EPERM, b, "../..");
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret/vol/v2/z");
    assert_link(-EPERM, b, "/home/u/.local/share/lazaret");
    assert_link(0, b, "/tmp/x");
}

static void test_link_helpers_and_bounds(void **state) {
    (void)state;
    assert_true(lz_router_abs_within("/a/b", "/a/b"));
    assert_true(lz_router_abs_within("/a/b/c", "/a/b"));
    assert_true(lz_router_abs_within("/a", "/"));
    assert_true(lz_router_abs_within("/", "/"));
    assert_false(lz_router_abs_within("/a/bc", "/a/b"));
    assert_false(lz_router_abs_within("/a", "/a/b"));
    assert_false(lz_router_abs_within("/", "/a"));
    assert_true(lz_router_link_shape_ok(""));
    assert_true(lz_router_link_shape_ok("../../a/b"));
    assert_true(lz_router_link_shape_ok("./.././a"));
    assert_true(lz_router_link_shape_ok("a/...b/..c"));
    assert_false(lz_router_link_shape_ok("a/.."));
    assert_false(lz_router_link_shape_ok("../a/../b"));
    assert_false(lz_router_link_shape_ok("/a/.."));
    assert_true(lz_router_link_denied(&lpol, "/home/u/.local/share/lazaret/a"));
    assert_true(lz_router_link_denied(&lpol, "/run/user"));
    assert_false(lz_router_link_denied(&lpol, "/run/user/1000/lazaret2"));
    assert_false(lz_router_link_denied(&lpol, "/srv"));
    char out[PATH_MAX + 1];
    assert_int_equal(lz_router_link_resolve(&lpol, "/home/u/work", "rel/./x//y", out), 0);
    assert_string_equal(out, "/home/u/other/x/y");
    assert_int_equal(lz_router_link_resolve(&lpol, "/home/u/work", "../../../..", out), 0);
    assert_string_equal(out, "/");
    /* Longer than a path: refused, never truncated into a shorter one. */
    char *longt = lz_xmalloc(3 * PATH_MAX);
    memset(longt, 'a', 3 * PATH_MAX - 1);
    longt[3 * PATH_MAX - 1] = '\0';
    assert_link(-ENAMETOOLONG, "/home/u/work", longt);
    for (size_t i = 100; i < 3 * PATH_MAX - 1; i += 100)
        longt[i] = '/';
    assert_link(-ENAMETOOLONG, "/home/u/work", longt);
    longt[PATH_MAX - 5] = '\0'; /* fits as a target, not below the base */
    assert_link(-ENAMETOOLONG, "/home/u/work", longt);
    longt[PATH_MAX - 20] = '\0'; /* fits below it */
    assert_link(0, "/home/u/work", longt);
    free(longt);
}

/* The backing of a workspace entry: the ignore rules first, then the
 * host-tool set, never below .git. */
static void test_backing_decide(void **state) {
    (void)state;
    bool seed = true;
    /* Not a host-tool path: what the ignore rules say. */
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_HOST, 0, 7, false, &seed), LZ_BACKING_HOST);
    assert_false(seed);
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_STORE, 0, 7, false, &seed), LZ_BACKING_STORE);
    assert_false(seed);
    /* A host-tool path itself (".claude"): the store's, seeded from the host. */
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_HOST, 7, 7, false, &seed), LZ_BACKING_STORE);
    assert_true(seed);
    /* Below it (".claude/settings.json"): the store's, not seeded again. */
    seed = true;
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_HOST, 7, 21, false, &seed), LZ_BACKING_STORE);
    assert_false(seed);
    /* A git-ignored host-tool path (".envrc" with secrets): private to the
     * store as ignored state, never seeded from the host. */
    seed = true;
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_STORE, 6, 6, false, &seed), LZ_BACKING_STORE);
    assert_false(seed);
    /* Below .git (".git/.vscode"): the Git policy decides, the host's. */
    seed = true;
    assert_int_equal(lz_router_backing_decide(LZ_BACKING_HOST, 12, 12, true, &seed), LZ_BACKING_HOST);
    assert_false(seed);
}

static void test_counterpart_and_root_flags(void **state) {
    (void)state;
    assert_int_equal(lz_router_counterpart_check(1), 0);
    assert_int_equal(lz_router_counterpart_check(-ENOENT), 0);
    assert_int_equal(lz_router_counterpart_check(-ENOTDIR), 0);
    assert_int_equal(lz_router_counterpart_check(0), -ENOTEMPTY);
    assert_int_equal(lz_router_counterpart_check(-EACCES), -EACCES);
    assert_int_equal(lz_router_counterpart_check(-EIO), -EIO);
    assert_int_equal(lz_router_root_flags_check(0), 0);
    assert_int_equal(lz_router_root_flags_check(FS_NOATIME_FL | FS_NODUMP_FL), 0);
    assert_int_equal(lz_router_root_flags_check(FS_CASEFOLD_FL), -EINVAL);
    assert_int_equal(lz_router_root_flags_check(FS_CASEFOLD_FL | FS_NOATIME_FL), -EINVAL);
}

/* A data write or a truncation: which handle it comes through decides
 * whether the path policy is asked; a sealed inode refuses both. */
static void test_write_check(void **state) {
    (void)state;
    const enum lz_router_handle hs[] = { LZ_HANDLE_NONE, LZ_HANDLE_OPEN, LZ_HANDLE_WRITABLE };
    for (size_t i = 0; i < 3; i++)
        for (int tr = 0; tr < 2; tr++)
            for (int st = 0; st < 2; st++)
                assert_int_equal(lz_router_write_check(tr, hs[i], st, true), -EPERM);
    /* Data writes. */
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_OPEN, false, false), 0);
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_OPEN, true, false), 0);
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_WRITABLE, false, false), 0);
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_WRITABLE, true, false), -EPERM);
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_NONE, false, false), LZ_ASK_PATH_POLICY);
    assert_int_equal(lz_router_write_check(false, LZ_HANDLE_NONE, true, false), LZ_ASK_PATH_POLICY);
    /* Truncations. */
    assert_int_equal(lz_router_write_check(true, LZ_HANDLE_WRITABLE, false, false), 0);
    assert_int_equal(lz_router_write_check(true, LZ_HANDLE_WRITABLE, true, false), LZ_ASK_PATH_POLICY);
    assert_int_equal(lz_router_write_check(true, LZ_HANDLE_NONE, false, false), LZ_ASK_PATH_POLICY);
    assert_int_equal(lz_router_write_check(true, LZ_HANDLE_NONE, true, false), LZ_ASK_PATH_POLICY);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_creations),
        cmocka_unit_test(test_plain_removal_and_writes),
        cmocka_unit_test(test_plain_rename),
        cmocka_unit_test(test_plain_malformed),
        cmocka_unit_test(test_create_types),
        cmocka_unit_test(test_chmod_mode),
        cmocka_unit_test(test_held),
        cmocka_unit_test(test_backings_and_owners),
        cmocka_unit_test(test_backing_decide),
        cmocka_unit_test(test_counterpart_and_root_flags),
        cmocka_unit_test(test_write_check),
        cmocka_unit_test_setup(test_link_plain_targets, link_setup),
        cmocka_unit_test_setup(test_link_denied_targets, link_setup),
        cmocka_unit_test_setup(test_link_through_symlinks, link_setup),
        cmocka_unit_test_setup(test_link_no_deny, link_setup),
        cmocka_unit_test_setup(test_link_own_volume, link_setup),
        cmocka_unit_test_setup(test_link_helpers_and_bounds, link_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
