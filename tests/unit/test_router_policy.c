/* Unit tests for the Git-protection policy of the workspace router
 * (router.c). The tree is a fake: a list of existing paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "router.h"
#include "util.h"

#include <linux/fs.h>
#include <sys/stat.h>

/* ---- fake tree ---- */

static const char *const *fake_paths;
static size_t fake_n;
static int fake_error;      /* when set, has_entry fails with it */
static unsigned fake_calls; /* has_entry calls, to check the fast path */

static int fake_has_entry(void *ctx, const char *dir, const char *name) {
    (void)ctx;
    fake_calls++;
    if (fake_error)
        return fake_error;
    char full[LZ_ROUTER_PATH_MAX + 300];
    if (dir[0])
        snprintf(full, sizeof full, "%s/%s", dir, name);
    else
        snprintf(full, sizeof full, "%s", name);
    for (size_t i = 0; i < fake_n; i++)
        if (strcmp(fake_paths[i], full) == 0)
            return 1;
    return 0;
}

static const struct lz_router_fs fake_fs = { .has_entry = fake_has_entry };

/* The tree most tests use: a repository at the root, a nested host-made
 * repository, a host-made bare repository (a test fixture), a linked
 * worktree administrative directory, and half-built Git-looking dirs. */
static const char *const tree[] = {
    ".git",
    ".git/HEAD",
    ".git/config",
    ".git/objects",
    ".git/objects/info",
    ".git/refs",
    ".git/hooks",
    ".git/index",
    "vendor",
    "vendor/lib",
    "vendor/lib/.git",
    "vendor/lib/.git/HEAD",
    "fixtures",
    "fixtures/bare.git",
    "fixtures/bare.git/HEAD",
    "fixtures/bare.git/objects",
    "fixtures/bare.git/refs",
    "fixtures/bare.git/config",
    "wtlike",
    "wtlike/HEAD",
    "wtlike/commondir",
    "evil",
    "evil/objects",
    "evil/refs", /* missing HEAD */
    "evil2",
    "evil2/HEAD",
    "evil2/objects", /* missing refs */
    "evil3",
    "evil3/HEAD", /* missing commondir */
    "src",
    "src/main.c",
    "HEAD2",
    "x",
    "d1",
};

static struct lz_router_policy pol;

static int setup(void **state) {
    (void)state;
    fake_paths = tree;
    fake_n = LZ_ARRAY_SIZE(tree);
    fake_error = 0;
    fake_calls = 0;
    memset(&pol, 0, sizeof pol);
    pol.fs = &fake_fs;
    return 0;
}

static enum lz_router_class cls(const char *path) {
    enum lz_router_class c = LZ_RCLASS_FREE;
    int r = lz_router_classify(&pol, path, &c);
    if (r < 0)
        fail_msg("classify(%s) failed: %d", path, r);
    return c;
}

#define assert_class(path, want)                                                                                       \
    do {                                                                                                               \
        enum lz_router_class got_ = cls(path);                                                                         \
        if (got_ != (want))                                                                                            \
            fail_msg("%s: class %s, want %s", path, lz_router_class_name(got_), lz_router_class_name(want));           \
    } while (0)

static int chk(enum lz_router_op op, const char *path, bool exists, const char *path2) {
    struct lz_router_req q = { .op = op, .path = path, .exists = exists, .path2 = path2 };
    return lz_router_check(&pol, &q);
}

#define assert_op(expect, op, path, exists, path2)                                                                     \
    do {                                                                                                               \
        int got_ = chk(op, path, exists, path2);                                                                       \
        if (got_ != (expect))                                                                                          \
            fail_msg("%s %s%s%s: %d, want %d", lz_router_op_name(op), path, (path2) ? " <- " : "",                     \
                     (path2) ? (const char *)(path2) : "", got_, expect);                                              \
    } while (0)

static int ren(const char *from, const char *to, bool is_dir, bool exists, bool is_dir2, unsigned flags) {
    struct lz_router_req q = { .op = LZ_ROP_RENAME,
                               .path = from,
                               .path2 = to,
                               .is_dir = is_dir,
                               .exists = exists,
                               .is_dir2 = is_dir2,
                               .flags = flags };
    return lz_router_check(&pol, &q);
}

#define assert_ren(expect, from, to, is_dir, exists, is_dir2, flags)                                                   \
    do {                                                                                                               \
        int got_ = ren(from, to, is_dir, exists, is_dir2, flags);                                                      \
        if (got_ != (expect))                                                                                          \
            fail_msg("rename %s -> %s: %d, want %d", from, to, got_, expect);                                          \
    } while (0)

/* ---- classification ---- */

static void test_classify_gitdir(void **state) {
    (void)state;
    assert_class("", LZ_RCLASS_FREE);
    assert_class("src/main.c", LZ_RCLASS_FREE);
    assert_class(".git", LZ_RCLASS_GITNAME);
    assert_class("sub/.git", LZ_RCLASS_GITNAME);
    assert_class("a/b/c/.git", LZ_RCLASS_GITNAME);
    assert_class(".GIT", LZ_RCLASS_GITNAME);
    assert_class("x/.Git", LZ_RCLASS_GITNAME);
    for (const char *const *p = (const char *const[]){ ".git/config",
                                                       ".git/CONFIG",
                                                       ".GIT/config",
                                                       ".git/config.worktree",
                                                       ".git/commondir",
                                                       ".git/gitdir",
                                                       ".git/hooks",
                                                       ".git/hooks/pre-commit",
                                                       ".git/hooks/a/b/c",
                                                       ".git/modules",
                                                       ".git/modules/x/config",
                                                       ".git/modules/x/objects/ab/cd",
                                                       ".git/modules/a/modules/b/hooks/x",
                                                       ".git/worktrees",
                                                       ".git/worktrees/wt/commondir",
                                                       ".git/worktrees/wt/gitdir",
                                                       ".git/worktrees/wt/config.worktree",
                                                       ".git/worktrees/wt/HEAD",
                                                       ".git/objects/info/alternates",
                                                       ".git/objects/info/http-alternates",
                                                       ".git/objects/INFO/Alternates",
                                                       ".git/info/exclude",
                                                       ".git/INFO/Exclude",
                                                       ".git/branches",
                                                       ".git/branches/origin",
                                                       ".git/remotes/origin",
                                                       "sub/.git/config",
                                                       "a/b/.git/hooks/post-checkout",
                                                       ".git/objects/.git/config",
                                                       ".git/refs/x/.git/hooks/y",
                                                       NULL };
         *p; p++)
        assert_class(*p, LZ_RCLASS_PROTECTED);
    assert_class(".git/objects", LZ_RCLASS_ANCESTOR);
    assert_class(".git/info", LZ_RCLASS_ANCESTOR);
    assert_class(".git/refs", LZ_RCLASS_ANCESTOR);
    assert_class(".git/info/exclude.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/objects/info", LZ_RCLASS_ANCESTOR);
    assert_class("sub/.git/objects/info", LZ_RCLASS_ANCESTOR);
    /* What git add/commit/checkout/stash/merge/rebase/gc write. */
    for (const char *const *p = (const char *const[]){ ".git/index",
                                                       ".git/index.lock",
                                                       ".git/HEAD",
                                                       ".git/HEAD.lock",
                                                       ".git/ORIG_HEAD",
                                                       ".git/FETCH_HEAD",
                                                       ".git/MERGE_HEAD",
                                                       ".git/MERGE_MSG",
                                                       ".git/COMMIT_EDITMSG",
                                                       ".git/packed-refs",
                                                       ".git/packed-refs.lock",
                                                       ".git/objects/ab/cdef0123",
                                                       ".git/objects/ab/tmp_obj_XXXX",
                                                       ".git/objects/pack/pack-1.pack",
                                                       ".git/objects/info/packs",
                                                       ".git/refs/heads/main",
                                                       ".git/refs/heads/feat.lock",
                                                       ".git/refs/stash",
                                                       ".git/logs/HEAD",
                                                       ".git/logs/refs/heads/main",
                                                       ".git/rebase-merge/done",
                                                       ".git/rebase-apply/0001",
                                                       ".git/sequencer/todo",
                                                       ".git/description",
                                                       ".git/gc.pid",
                                                       ".git/AUTO_MERGE",
                                                       ".git/refs/config",
                                                       ".git/logs/hooks",
                                                       "config",
                                                       "hooks/pre-commit",
                                                       "app/config/settings.py",
                                                       "objects/info/alternates",
                                                       "modules/x",
                                                       NULL };
         *p; p++)
        assert_class(*p, LZ_RCLASS_FREE);
}

static void test_classify_locks(void **state) {
    (void)state;
    assert_class(".git/config.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/CONFIG.LOCK", LZ_RCLASS_PROTECTED);
    assert_class(".git/config.worktree.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/commondir.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/config.lock.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/hooks.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/objects.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/objects/info.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/objects/info/alternates.lock", LZ_RCLASS_PROTECTED);
    assert_class(".git/worktrees/x/commondir.lock", LZ_RCLASS_PROTECTED);
    assert_class("sub/.git.lock", LZ_RCLASS_PROTECTED);
    assert_class(".lock", LZ_RCLASS_FREE);
    assert_class("foo.lock", LZ_RCLASS_FREE);
    assert_class(".git/index.lock", LZ_RCLASS_FREE);
    assert_class("config.lock", LZ_RCLASS_FREE);
}

static void test_classify_shaped_dirs(void **state) {
    (void)state;
    /* A host-made bare repository is a Git directory too. */
    assert_class("fixtures/bare.git/config", LZ_RCLASS_PROTECTED);
    assert_class("fixtures/bare.git/config.lock", LZ_RCLASS_PROTECTED);
    assert_class("fixtures/bare.git/hooks/post-update", LZ_RCLASS_PROTECTED);
    assert_class("fixtures/bare.git/objects", LZ_RCLASS_ANCESTOR);
    assert_class("fixtures/bare.git/objects/info/alternates", LZ_RCLASS_PROTECTED);
    assert_class("fixtures/bare.git/description", LZ_RCLASS_FREE);
    assert_class("fixtures/bare.git/refs/heads/main", LZ_RCLASS_FREE);
    /* HEAD + commondir is enough for Git. */
    assert_class("wtlike/config.worktree", LZ_RCLASS_PROTECTED);
    assert_class("wtlike/commondir", LZ_RCLASS_PROTECTED);
    /* Incomplete shapes are not Git directories. */
    assert_class("evil/config", LZ_RCLASS_FREE);
    assert_class("evil2/config", LZ_RCLASS_FREE);
    assert_class("evil3/hooks/x", LZ_RCLASS_FREE);
}

static void test_fast_path_asks_nothing(void **state) {
    (void)state;
    fake_calls = 0;
    assert_class("src/lib/router.c", LZ_RCLASS_FREE);
    assert_class(".git/objects/ab/cdef", LZ_RCLASS_FREE);
    assert_class(".git/refs/heads/main", LZ_RCLASS_FREE);
    assert_class(".git/config", LZ_RCLASS_PROTECTED);
    assert_int_equal(fake_calls, 0);
    assert_class("app/config", LZ_RCLASS_FREE); /* is `app` a Git directory? must ask */
    assert_true(fake_calls > 0);
}

static void test_fs_errors_fail_closed(void **state) {
    (void)state;
    enum lz_router_class c;
    fake_error = -EIO;
    assert_int_equal(lz_router_classify(&pol, "app/config", &c), -EIO);
    assert_int_equal(chk(LZ_ROP_WRITE, "app/config", false, NULL), -EIO);
    assert_int_equal(chk(LZ_ROP_CREATE, "x/HEAD", false, NULL), -EIO);
    assert_int_equal(ren("d1", "d2", true, false, false, 0), -EIO);
    /* Paths that need no look at the tree still work. */
    assert_int_equal(chk(LZ_ROP_WRITE, "src/main.c", false, NULL), 0);
    /* No tree at all. */
    struct lz_router_policy none = { 0 };
    assert_int_equal(lz_router_classify(&none, "app/config", &c), -ENOSYS);
}

/* ---- the rules, per operation ---- */

static void test_create_gitname_refused(void **state) {
    (void)state;
    assert_op(-EEXIST, LZ_ROP_MKDIR, ".git", true, NULL); /* the root one exists */
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, "sub/.git", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, "sub/.GIT", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, "sub/.git", false, NULL); /* a gitfile */
    assert_op(-EPERM, LZ_ROP_SYMLINK, "sub/.git", false, NULL);
    assert_op(-EPERM, LZ_ROP_LINK, "sub/.git", false, "x");
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git/refs/.git", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, ".git/modules/x/.git", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, "vendor/lib/.git", false, NULL);
    assert_op(-EPERM, LZ_ROP_SETATTR, ".git", false, NULL);
    assert_op(-EPERM, LZ_ROP_RMDIR, ".git", false, NULL);
    assert_op(-EPERM, LZ_ROP_UNLINK, "sub/.git", false, NULL);
}

static void test_protected_read_only(void **state) {
    (void)state;
    static const char *const prot[] = {
        ".git/config",
        ".git/config.lock",
        ".git/config.worktree",
        ".git/commondir",
        ".git/gitdir",
        ".git/hooks/pre-commit",
        ".git/hooks/fsmonitor-watchman",
        ".git/modules/x/config",
        ".git/modules/x/hooks/post-checkout",
        ".git/worktrees/x/commondir",
        ".git/worktrees/x/gitdir",
        ".git/worktrees/x/config.worktree",
        ".git/objects/info/alternates",
        ".git/branches/x",
        ".git/remotes/origin",
        "vendor/lib/.git/config",
        "fixtures/bare.git/config",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(prot); i++) {
        assert_op(-EPERM, LZ_ROP_CREATE, prot[i], false, NULL);
        assert_op(-EEXIST, LZ_ROP_CREATE, prot[i], true, NULL);
        assert_op(-EPERM, LZ_ROP_SYMLINK, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_MKDIR, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_LINK, prot[i], false, "src/main.c");
        assert_op(-EPERM, LZ_ROP_WRITE, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_SETATTR, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_UNLINK, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_RMDIR, prot[i], false, NULL);
    }
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git/hooks", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git/modules", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git/worktrees", false, NULL);
    assert_op(-EPERM, LZ_ROP_RMDIR, ".git/hooks", false, NULL);
}

static void test_normal_git_allowed(void **state) {
    (void)state;
    assert_op(0, LZ_ROP_CREATE, ".git/index.lock", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/HEAD.lock", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/refs/heads/feat.lock", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/objects/ab/tmp_obj_x", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, ".git/objects/ab", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, ".git/refs/heads/topic", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, ".git/rebase-merge", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/COMMIT_EDITMSG", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, ".git/index", false, NULL);           /* only by a checked rename */
    assert_op(-EPERM, LZ_ROP_WRITE, ".git/info/exclude", false, NULL);    /* decides what is hidden */
    assert_op(-EPERM, LZ_ROP_WRITE, ".git/info/attributes", false, NULL); /* changes what diff shows */
    assert_op(0, LZ_ROP_UNLINK, ".git/index.lock", false, NULL);
    assert_op(0, LZ_ROP_UNLINK, ".git/refs/stash", false, NULL);
    assert_op(0, LZ_ROP_RMDIR, ".git/objects/ab", false, NULL);
    assert_op(0, LZ_ROP_RMDIR, ".git/rebase-merge", false, NULL);
    assert_op(0, LZ_ROP_SETATTR, ".git/objects/pack/pack-1.pack", false, NULL);
    /* Git links a loose object into place and renames when link fails. */
    assert_op(-EPERM, LZ_ROP_LINK, ".git/objects/ab/cd", false, ".git/objects/ab/tmp_obj_x");
    assert_ren(0, ".git/objects/ab/tmp_obj_x", ".git/objects/ab/cd", false, false, false, 0);
    assert_ren(0, ".git/index.lock", ".git/index", false, true, false, 0);
    assert_ren(0, ".git/HEAD.lock", ".git/HEAD", false, true, false, 0);
    assert_ren(0, ".git/refs/heads/a.lock", ".git/refs/heads/a", false, false, false, 0);
    assert_ren(0, ".git/logs/refs/heads/a", ".git/logs/refs/heads/b", false, false, false, 0);
    assert_ren(0, ".git/objects/ab/tmp", ".git/objects/ab/cdef", false, false, false, RENAME_NOREPLACE);
    assert_ren(0, "src/main.c", "src/main2.c", false, false, false, 0);
    assert_ren(0, "d1", "d2", true, false, false, 0);
    /* HEAD may be recreated in a directory named .git. */
    assert_op(0, LZ_ROP_CREATE, ".git/HEAD", false, NULL);
}

static void test_ancestors(void **state) {
    (void)state;
    /* objects/info may be made as a real directory, never as anything else. */
    assert_op(0, LZ_ROP_MKDIR, ".git/objects/info", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, ".git/objects/info", true, NULL); /* mkdir itself says EEXIST */
    assert_op(-EPERM, LZ_ROP_SYMLINK, ".git/objects/info", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, ".git/objects/info", false, NULL);
    assert_op(-EPERM, LZ_ROP_SYMLINK, ".git/objects", false, NULL);
    assert_op(-EPERM, LZ_ROP_RMDIR, ".git/objects/info", false, NULL);
    assert_op(-EPERM, LZ_ROP_SETATTR, ".git/objects", false, NULL);
    assert_ren(-EPERM, ".git/objects/info", ".git/objects/x", true, false, false, 0);
    assert_ren(-EPERM, "evil", ".git/objects/info", true, false, false, 0);
    assert_ren(-EPERM, "evil", ".git/objects", true, false, false, 0);
}

static void test_link_bypasses(void **state) {
    (void)state;
    /* A second name for a protected file, from anywhere. */
    assert_op(-EPERM, LZ_ROP_LINK, "x2", false, ".git/config");
    assert_op(-EPERM, LZ_ROP_LINK, ".git/objects/ab/x", false, ".git/config");
    assert_op(-EPERM, LZ_ROP_LINK, "y", false, ".git/hooks/pre-commit");
    assert_op(-EPERM, LZ_ROP_LINK, "y", false, "vendor/lib/.git");
    /* An agent file under a protected name. */
    assert_op(-EPERM, LZ_ROP_LINK, ".git/hooks/pre-commit", false, "x");
    assert_op(-EPERM, LZ_ROP_LINK, ".git/commondir", false, "x");
    assert_op(-EPERM, LZ_ROP_LINK, ".git/config.lock", false, "x");
    assert_op(-EPERM, LZ_ROP_LINK, ".git/objects/info/alternates", false, "x");
    /* Ordinary links, and links of a file that has no name left. */
    assert_op(0, LZ_ROP_LINK, "x2", false, "x");
    assert_op(0, LZ_ROP_LINK, "x2", false, NULL);
}

static void test_rename_bypasses(void **state) {
    (void)state;
    assert_ren(-EPERM, ".git", "x", true, false, false, 0);
    assert_ren(-EPERM, ".git", "old.git", true, false, false, RENAME_NOREPLACE);
    assert_ren(-EPERM, "d1", ".git", true, false, false, 0);
    assert_ren(-EPERM, "d1", "sub/.git", true, false, false, 0);
    assert_ren(-EPERM, "x", "sub/.git", false, false, false, 0);
    assert_ren(-EPERM, "vendor/lib/.git", "vendor/lib/git", true, false, false, 0);
    assert_ren(-EPERM, ".git/config.lock", ".git/config", false, true, false, 0);
    assert_ren(-EPERM, "x", ".git/config", false, true, false, 0);
    assert_ren(-EPERM, ".git/config", "x", false, true, false, 0);
    assert_ren(-EPERM, "x", ".git/hooks/pre-commit", false, false, false, 0);
    assert_ren(-EPERM, "d1", ".git/hooks", true, true, true, 0);
    assert_ren(-EPERM, ".git/hooks", "h", true, false, false, 0);
    assert_ren(-EPERM, ".git/modules", "m", true, false, false, 0);
    assert_ren(-EPERM, "d1", ".git/modules/x", true, false, false, 0);
    assert_ren(-EPERM, "d1", ".git/worktrees/x", true, false, false, 0);
    assert_ren(-EPERM, "x", ".git/objects/info/alternates", false, false, false, 0);
    assert_ren(-EPERM, "x", ".git/commondir", false, false, false, 0);
    /* Exchanges move both ends. */
    assert_ren(-EPERM, "d1", ".git", true, true, true, RENAME_EXCHANGE);
    assert_ren(-EPERM, ".git/config", "x", false, true, false, RENAME_EXCHANGE);
    assert_ren(-EPERM, "x", ".git/config", false, true, false, RENAME_EXCHANGE);
    assert_ren(0, "x", "src/main.c", false, true, false, RENAME_EXCHANGE);
    /* A directory holding a repository does not move. */
    assert_ren(-EPERM, "vendor/lib", "vendor/lib2", true, false, false, 0);
    assert_ren(-EPERM, "d1", "vendor/lib", true, true, true, RENAME_EXCHANGE);
    /* Deeper nesting moves (the repository keeps its protection). */
    assert_ren(0, "vendor", "vendor2", true, false, false, 0);
    /* A host-made bare repository may move; it stays a Git directory. */
    assert_ren(0, "fixtures/bare.git", "fixtures/b.git", true, false, false, 0);
    /* Flags the router does not serve, and the root. */
    assert_ren(-EINVAL, "x", "y", false, false, false, RENAME_WHITEOUT);
    assert_ren(-EINVAL, "x", "y", false, false, false, RENAME_EXCHANGE | RENAME_NOREPLACE);
    assert_ren(-EBUSY, "", "y", true, false, false, 0);
}

static int ren_typed(const char *from, const char *to, unsigned type, unsigned long nlink, bool exists, unsigned type2,
                     unsigned long nlink2, unsigned flags) {
    struct lz_router_req q = { .op = LZ_ROP_RENAME,
                               .path = from,
                               .path2 = to,
                               .is_dir = S_ISDIR(type),
                               .exists = exists,
                               .is_dir2 = S_ISDIR(type2),
                               .flags = flags,
                               .type = type,
                               .nlink = nlink,
                               .type2 = type2,
                               .nlink2 = nlink2 };
    return lz_router_check(&pol, &q);
}

static int create_typed(const char *path, unsigned type) {
    struct lz_router_req q = { .op = LZ_ROP_CREATE, .path = path, .type = type };
    return lz_router_check(&pol, &q);
}

/* Nothing the host's git would write or append through may enter a Git
 * directory: COMMIT_EDITMSG -> config, logs -> elsewhere, a hard link to a
 * file outside, a FIFO that blocks the prompt. */
static void test_gitdir_contents(void **state) {
    (void)state;
    static const char *const inside[] = {
        ".git/COMMIT_EDITMSG",
        ".git/MERGE_MSG",
        ".git/ORIG_HEAD",
        ".git/FETCH_HEAD",
        ".git/logs/HEAD",
        ".git/logs/refs/heads/main",
        ".git/logs/refs",
        ".git/rebase-merge/done",
        ".git/gc.log",
        ".git/sequencer/todo",
        ".git/x/y/z",
        "vendor/lib/.git/COMMIT_EDITMSG",
        "fixtures/bare.git/FETCH_HEAD",
        "fixtures/bare.git/logs/refs",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(inside); i++) {
        assert_op(-EPERM, LZ_ROP_SYMLINK, inside[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_LINK, inside[i], false, "src/main.c");
        assert_op(-EPERM, LZ_ROP_LINK, inside[i], false, NULL);
        assert_int_equal(create_typed(inside[i], S_IFIFO), -EPERM);
        assert_int_equal(create_typed(inside[i], S_IFREG), 0);
        assert_op(0, LZ_ROP_MKDIR, inside[i], false, NULL);
        /* into it: a symlink never, a multi-link file or a directory from
         * elsewhere only as a copy (EXDEV), a single-link file yes */
        assert_int_equal(ren_typed("x", inside[i], S_IFLNK, 1, false, 0, 0, 0), -EPERM);
        assert_int_equal(ren_typed("x", inside[i], S_IFREG, 2, false, 0, 0, 0), -EXDEV);
        assert_int_equal(ren_typed("x", inside[i], S_IFIFO, 1, false, 0, 0, 0), -EPERM);
        assert_int_equal(ren_typed("d1", inside[i], S_IFDIR, 2, false, 0, 0, 0), -EXDEV);
        assert_int_equal(ren_typed("x", inside[i], S_IFREG, 1, true, S_IFREG, 1, 0), 0);
        /* an exchange moves both ways */
        assert_int_equal(ren_typed(inside[i], "x", S_IFREG, 1, true, S_IFLNK, 1, RENAME_EXCHANGE), -EPERM);
        assert_int_equal(ren_typed(inside[i], "d1", S_IFREG, 1, true, S_IFDIR, 2, RENAME_EXCHANGE), -EXDEV);
        /* a second name for a file inside one */
        assert_op(-EPERM, LZ_ROP_LINK, "elsewhere", false, inside[i]);
    }
    /* Directories move within their own Git directory (git itself never
     * needs more), not from another one. */
    assert_int_equal(ren_typed(".git/rebase-merge", ".git/rebase-merge.old", S_IFDIR, 2, false, 0, 0, 0), 0);
    assert_int_equal(ren_typed("vendor/lib/.git/logs", ".git/logs2", S_IFDIR, 2, false, 0, 0, 0), -EXDEV);
    /* Outside Git directories nothing changes. */
    assert_op(0, LZ_ROP_SYMLINK, "src/link", false, NULL);
    assert_op(0, LZ_ROP_SYMLINK, "gitish/COMMIT_EDITMSG", false, NULL);
    assert_op(0, LZ_ROP_LINK, "src/l2", false, "src/main.c");
    assert_int_equal(create_typed("src/fifo", S_IFIFO), 0);
    assert_int_equal(ren_typed("x", "src/y", S_IFLNK, 1, false, 0, 0, 0), 0);
    assert_int_equal(ren_typed("d1", "src/d1", S_IFDIR, 2, false, 0, 0, 0), 0);
    /* Moving out of a Git directory is fine. */
    assert_int_equal(ren_typed(".git/COMMIT_EDITMSG", "msg", S_IFREG, 1, false, 0, 0, 0), 0);
}

/* An index is a program for the host's git: it appears only by a rename
 * the router checks (the caller validates the source). */
static void test_index_only_by_rename(void **state) {
    (void)state;
    size_t gl = 0;
    assert_int_equal(lz_router_is_index(&pol, ".git/index", &gl), 1);
    assert_int_equal(gl, 4);
    assert_int_equal(lz_router_is_index(&pol, "vendor/lib/.git/sharedindex.0123abcd", &gl), 1);
    assert_int_equal(gl, strlen("vendor/lib/.git"));
    assert_int_equal(lz_router_is_index(&pol, "fixtures/bare.git/index", &gl), 1);
    assert_int_equal(lz_router_is_index(&pol, "src/index", NULL), 0);
    assert_int_equal(lz_router_is_index(&pol, "index", NULL), 0);
    assert_int_equal(lz_router_is_index(&pol, ".git/index.lock", NULL), 0);
    assert_int_equal(lz_router_is_index(&pol, ".git/sharedindex_AbC123", NULL), 0); /* git's temp name */
    assert_int_equal(lz_router_is_index(&pol, ".git/refs/index", NULL), 0);
    assert_op(-EPERM, LZ_ROP_WRITE, ".git/index", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, "vendor/lib/.git/index", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, ".git/sharedindex.0123", false, NULL);
    assert_op(-EINVAL, LZ_ROP_MKDIR, ".git/index2/../index", false, NULL); /* malformed */
    assert_op(-EPERM, LZ_ROP_MKDIR, ".git/index", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, "vendor/lib/.git/index", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/index.lock", false, NULL);
    assert_op(0, LZ_ROP_CREATE, ".git/sharedindex_AbC123", false, NULL);
    assert_op(0, LZ_ROP_UNLINK, ".git/index", false, NULL);
    assert_op(0, LZ_ROP_SETATTR, ".git/index", false, NULL); /* chmod, utimes; size is a write */
    assert_op(0, LZ_ROP_WRITE, "src/index", false, NULL);
    assert_ren(0, ".git/index.lock", ".git/index", false, true, false, 0);
}

/* What the host's git reads besides objects and pushed refs when it
 * displays history: read-only like hooks (docs/security-git.md). */
static void test_display_files(void **state) {
    (void)state;
    static const char *const prot[] = {
        ".git/refs/replace",
        ".git/refs/replace/0123456789012345678901234567890123456789",
        ".git/refs/replace/0123456789012345678901234567890123456789.lock",
        ".git/refs/REPLACE/x",
        ".git/refs/notes/commits",
        ".git/info/grafts",
        ".git/info/grafts.lock",
        ".git/info/attributes",
        ".git/info/sparse-checkout",
        ".git/shallow",
        ".git/shallow.lock",
        ".git/objects/info/commit-graph",
        ".git/objects/info/commit-graphs/commit-graph-chain",
        ".git/objects/info/commit-graphs/graph-abc.graph",
        ".git/rr-cache/abc/preimage",
        "vendor/lib/.git/refs/replace/x",
        "vendor/lib/.git/shallow",
        "fixtures/bare.git/refs/replace/x",
        "fixtures/bare.git/info/grafts",
        "fixtures/bare.git/info/attributes",
        "fixtures/bare.git/shallow",
        "fixtures/bare.git/objects/info/commit-graph",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(prot); i++) {
        assert_class(prot[i], LZ_RCLASS_PROTECTED);
        assert_op(-EPERM, LZ_ROP_CREATE, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_WRITE, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_UNLINK, prot[i], false, NULL);
        assert_op(-EPERM, LZ_ROP_MKDIR, prot[i], false, NULL);
        assert_ren(-EPERM, "src/main.c", prot[i], false, false, false, 0);
        assert_ren(-EPERM, ".git/x.lock", prot[i], false, false, false, 0);
    }
    /* refs/ cannot be swapped for a directory holding replace refs. */
    assert_class(".git/refs", LZ_RCLASS_ANCESTOR);
    assert_class("fixtures/bare.git/refs", LZ_RCLASS_ANCESTOR);
    assert_ren(-EPERM, ".git/refs", ".git/refs2", true, false, false, 0);
    assert_ren(-EPERM, ".git/refs2", ".git/refs", true, false, false, 0);
    assert_ren(-EPERM, "d1", ".git/refs/replace", true, false, false, 0);
    assert_op(-EPERM, LZ_ROP_RMDIR, ".git/refs", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, ".git/refs", false, NULL);
    /* Controls: the same names outside a Git directory, and the everyday
     * refs and files beside them, stay free. */
    static const char *const free_[] = {
        "src/refs/replace/x",      "evil/refs/replace/x",
        "src/info/grafts",         "src/shallow",
        ".git/refs/heads/x",       ".git/refs/tags/v1",
        ".git/refs/remotes/o/m",   ".git/refs/replacement",
        ".git/refs/stash",         ".git/info/refs",
        ".git/objects/info/packs", ".git/logs/refs/replace",
        ".git/packed-refs.lock",   ".git/objects/pack/pack-1.idx",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(free_); i++) {
        assert_class(free_[i], LZ_RCLASS_FREE);
        assert_op(0, LZ_ROP_CREATE, free_[i], false, NULL);
    }
    /* The commit-graph git gc writes: its lock is free (git dies when it
     * cannot create it), the rename onto the graph refused (git goes on). */
    assert_class(".git/objects/info/commit-graph.lock", LZ_RCLASS_FREE);
    assert_class("fixtures/bare.git/objects/info/commit-graph.lock", LZ_RCLASS_FREE);
    assert_class(".git/modules/x/objects/info/commit-graph.lock", LZ_RCLASS_PROTECTED);
    assert_ren(-EPERM, ".git/objects/info/commit-graph.lock", ".git/objects/info/commit-graph", false, false, false, 0);
    /* packed-refs: only by a rename the router checks (gitrefs.h). */
    assert_int_equal(lz_router_is_packed_refs(&pol, ".git/packed-refs"), 1);
    assert_int_equal(lz_router_is_packed_refs(&pol, ".git/PACKED-REFS"), 1);
    assert_int_equal(lz_router_is_packed_refs(&pol, "fixtures/bare.git/packed-refs"), 1);
    assert_int_equal(lz_router_is_packed_refs(&pol, "vendor/lib/.git/packed-refs"), 1);
    assert_int_equal(lz_router_is_packed_refs(&pol, "src/packed-refs"), 0);
    assert_int_equal(lz_router_is_packed_refs(&pol, ".git/packed-refs.lock"), 0);
    assert_int_equal(lz_router_is_packed_refs(&pol, ".git/refs/packed-refs"), 0);
    assert_op(-EPERM, LZ_ROP_WRITE, ".git/packed-refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, ".git/packed-refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, "fixtures/bare.git/packed-refs", false, NULL);
    assert_op(0, LZ_ROP_WRITE, "src/packed-refs", false, NULL);
    assert_op(0, LZ_ROP_UNLINK, ".git/packed-refs", false, NULL);
    assert_ren(0, ".git/packed-refs.lock", ".git/packed-refs", false, true, false, 0);
}

static void test_no_new_git_directories(void **state) {
    (void)state;
    /* The last missing piece of HEAD + objects + refs, in any order. */
    assert_op(-EPERM, LZ_ROP_CREATE, "evil/HEAD", false, NULL);
    assert_op(-EPERM, LZ_ROP_SYMLINK, "evil/HEAD", false, NULL);
    assert_op(-EPERM, LZ_ROP_LINK, "evil/HEAD", false, "x");
    assert_op(-EPERM, LZ_ROP_MKDIR, "evil/head", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, "evil2/refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_SYMLINK, "evil2/refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, "evil3/commondir", false, NULL);
    assert_ren(-EPERM, "HEAD2", "evil/HEAD", false, false, false, 0);
    assert_ren(-EPERM, "d1", "evil2/refs", true, false, false, 0);
    assert_ren(-EPERM, "x", "evil3/commondir", false, false, false, 0);
    /* Pieces that do not complete a shape are fine. */
    assert_op(0, LZ_ROP_CREATE, "src/HEAD", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, "src/objects", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, "evil/x", false, NULL);
    assert_op(0, LZ_ROP_CREATE, "evil/config", false, NULL); /* not a Git directory: never read */
    /* Existing Git directories: more names change nothing. */
    assert_op(0, LZ_ROP_CREATE, "fixtures/bare.git/FETCH_HEAD", false, NULL);
    /* Taking a shape apart is allowed; putting it back is not. */
    assert_ren(0, "fixtures/bare.git/HEAD", "fixtures/bare.git/HEAD.bak", false, false, false, 0);
    static const char *const unshaped[] = { "fixtures",
                                            "fixtures/bare.git",
                                            "fixtures/bare.git/HEAD.bak",
                                            "fixtures/bare.git/objects",
                                            "fixtures/bare.git/refs",
                                            "fixtures/bare.git/config" };
    fake_paths = unshaped;
    fake_n = LZ_ARRAY_SIZE(unshaped);
    assert_op(0, LZ_ROP_WRITE, "fixtures/bare.git/config", false, NULL);
    assert_ren(-EPERM, "fixtures/bare.git/HEAD.bak", "fixtures/bare.git/HEAD", false, false, false, 0);
    assert_op(-EPERM, LZ_ROP_CREATE, "fixtures/bare.git/HEAD", false, NULL);
}

static void test_extra_protect(void **state) {
    (void)state;
    static const char *const extra[] = { ".husky", "tools/githooks" };
    pol.protect = extra;
    pol.n_protect = LZ_ARRAY_SIZE(extra);
    assert_class(".husky", LZ_RCLASS_PROTECTED);
    assert_class(".husky/pre-commit", LZ_RCLASS_PROTECTED);
    assert_class(".husky2", LZ_RCLASS_FREE);
    assert_class("tools", LZ_RCLASS_ANCESTOR);
    assert_class("tools/githooks/x", LZ_RCLASS_PROTECTED);
    assert_class("tools/other", LZ_RCLASS_FREE);
    assert_class("", LZ_RCLASS_FREE);
    assert_op(-EPERM, LZ_ROP_WRITE, ".husky/pre-commit", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, ".husky/_/h", false, NULL);
    assert_ren(-EPERM, ".husky", "h", true, false, false, 0);
    assert_ren(-EPERM, "d1", "tools", true, false, false, 0);
    assert_op(-EPERM, LZ_ROP_SYMLINK, "tools", false, NULL);
    assert_op(0, LZ_ROP_MKDIR, "tools", false, NULL);
}

static void test_paths(void **state) {
    (void)state;
    assert_int_equal(lz_router_path_valid(""), 0);
    assert_int_equal(lz_router_path_valid("a/b"), 0);
    assert_int_equal(lz_router_path_valid("/a"), -EINVAL);
    assert_int_equal(lz_router_path_valid("a//b"), -EINVAL);
    assert_int_equal(lz_router_path_valid("a/"), -EINVAL);
    assert_int_equal(lz_router_path_valid("./a"), -EINVAL);
    assert_int_equal(lz_router_path_valid("a/../.git"), -EINVAL);
    assert_int_equal(lz_router_path_valid(NULL), -EINVAL);
    char name[300];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(lz_router_path_valid(name), -ENAMETOOLONG);
    _cleanup_free_ char *deep = lz_xmalloc(LZ_ROUTER_PATH_MAX + 2);
    memset(deep, 'a', LZ_ROUTER_PATH_MAX + 1);
    for (size_t i = 1; i < LZ_ROUTER_PATH_MAX + 1; i += 2)
        deep[i] = '/';
    deep[LZ_ROUTER_PATH_MAX + 1] = '\0';
    assert_int_equal(lz_router_path_valid(deep), -ENAMETOOLONG);
    /* Malformed requests fail. */
    assert_op(-EINVAL, LZ_ROP_WRITE, "../x", false, NULL);
    assert_op(-EINVAL, LZ_ROP_LINK, "x", false, "/etc/passwd");
    assert_ren(-EINVAL, "x", ".git/../y", false, false, false, 0);

    char *p = NULL;
    assert_int_equal(lz_router_normalize("./a//b/", &p), 0);
    assert_string_equal(p, "a/b");
    free(p);
    assert_int_equal(lz_router_normalize("/a", &p), -EINVAL);
    assert_int_equal(lz_router_normalize("a/../b", &p), -EINVAL);
    assert_int_equal(lz_router_normalize(".", &p), -EINVAL);
    assert_int_equal(lz_router_normalize("", &p), -EINVAL);
}

/* Linked-worktree mode: the tree is a common Git directory; the Domain's
 * own worktrees/wt is a Git directory with its HEAD, index and logs
 * writable; the main work tree's state and every other worktree are
 * read-only (docs/security-git.md, "Linked worktrees"). */
static const char *const common_tree[] = {
    "HEAD",
    "config",
    "index",
    "objects",
    "objects/info",
    "objects/pack",
    "refs",
    "refs/heads",
    "packed-refs",
    "logs",
    "logs/HEAD",
    "logs/refs",
    "hooks",
    "info",
    "worktrees",
    "worktrees/wt",
    "worktrees/wt/HEAD",
    "worktrees/wt/commondir",
    "worktrees/wt/gitdir",
    "worktrees/wt/index",
    "worktrees/other",
    "worktrees/other/HEAD",
    "worktrees/other/commondir",
    "worktrees/other/index",
};

static void test_linked_worktree(void **state) {
    (void)state;
    fake_paths = common_tree;
    fake_n = LZ_ARRAY_SIZE(common_tree);
    pol.worktree = "wt";
    static const char *const free_paths[] = {
        "objects/ab/cdef",
        "objects/pack/pack-1.pack",
        "objects/info/packs",
        "objects/info/commit-graph.lock",
        "refs/heads/feature",
        "refs/heads/feature.lock",
        "refs/tags/v1",
        "refs/stash",
        "packed-refs.lock",
        "packed-refs.new",
        "logs/refs/heads/feature",
        "logs/refs/stash",
        "gc.pid",
        "gc.pid.lock",
        "lost-found/commit/x",
        "info/refs",
        "worktrees/wt/HEAD",
        "worktrees/wt/HEAD.lock",
        "worktrees/wt/ORIG_HEAD",
        "worktrees/wt/index.lock",
        "worktrees/wt/logs/HEAD",
        "worktrees/wt/COMMIT_EDITMSG",
        "worktrees/wt/rebase-merge/done",
        "worktrees/wt/refs/bisect/bad",
        "worktrees/wt/AUTO_MERGE",
        "worktrees/wt/FETCH_HEAD",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(free_paths); i++)
        assert_class(free_paths[i], LZ_RCLASS_FREE);
    static const char *const prot[] = {
        /* configuration and code, as in any Git directory */
        "config",
        "config.lock",
        "hooks/pre-commit",
        "info/attributes",
        "info/exclude",
        "info/grafts",
        "shallow",
        "objects/info/alternates",
        "objects/info/commit-graph",
        "refs/replace/x",
        "refs/notes/commits",
        "rr-cache/x",
        "modules/sub/config",
        "remotes/origin",
        "branches/x",
        "commondir",
        "gitdir",
        /* the main work tree's own state */
        "HEAD",
        "HEAD.lock",
        "index",
        "index.lock",
        "ORIG_HEAD",
        "MERGE_HEAD",
        "COMMIT_EDITMSG",
        "FETCH_HEAD",
        "logs/HEAD",
        "logs/x",
        "rebase-merge/git-rebase-todo",
        "sequencer/opts",
        "description",
        "sharedindex.1",
        "refs/bisect/bad",
        "refs/worktree/x",
        "refs/rewritten/x",
        "logs/refs/bisect/bad",
        "anything-else",
        /* the worktree's own metadata */
        "worktrees/wt/commondir",
        "worktrees/wt/gitdir",
        "worktrees/wt/locked",
        "worktrees/wt/config.worktree",
        "worktrees/wt/commondir.lock",
        "worktrees/wt/hooks/pre-commit",
        "worktrees/wt/info/sparse-checkout",
        "worktrees/wt/objects/info/alternates",
        /* another work tree's, a new one, a case variant */
        "worktrees/other",
        "worktrees/other/HEAD",
        "worktrees/other/index",
        "worktrees/new",
        "worktrees/new/commondir",
        "worktrees/WT",
        "worktrees/WT/HEAD",
        "worktrees/wt.lock",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(prot); i++)
        assert_class(prot[i], LZ_RCLASS_PROTECTED);
    assert_class("", LZ_RCLASS_ANCESTOR);
    assert_class("worktrees", LZ_RCLASS_ANCESTOR);
    assert_class("worktrees/wt", LZ_RCLASS_ANCESTOR);
    assert_class("logs", LZ_RCLASS_ANCESTOR);
    assert_class("logs/refs", LZ_RCLASS_ANCESTOR);
    assert_class("objects", LZ_RCLASS_ANCESTOR);
    assert_class("refs", LZ_RCLASS_ANCESTOR);

    /* A commit from the linked worktree: objects, the branch, its log, the
     * worktree's HEAD and index (index by a checked rename only). */
    assert_op(0, LZ_ROP_CREATE, "objects/ab/tmp_obj_x", false, NULL);
    assert_ren(0, "objects/ab/tmp_obj_x", "objects/ab/cdef", false, false, false, 0);
    assert_op(0, LZ_ROP_CREATE, "refs/heads/feature.lock", false, NULL);
    assert_ren(0, "refs/heads/feature.lock", "refs/heads/feature", false, true, false, 0);
    assert_op(0, LZ_ROP_WRITE, "logs/refs/heads/feature", false, NULL);
    assert_op(0, LZ_ROP_WRITE, "worktrees/wt/logs/HEAD", false, NULL);
    assert_ren(0, "worktrees/wt/HEAD.lock", "worktrees/wt/HEAD", false, true, false, 0);
    assert_ren(0, "worktrees/wt/index.lock", "worktrees/wt/index", false, true, false, 0);
    assert_ren(0, "packed-refs.lock", "packed-refs", false, true, false, 0);
    assert_ren(0, "packed-refs.new", "packed-refs", false, true, false, 0);
    assert_int_equal(lz_router_is_index(&pol, "worktrees/wt/index", NULL), 1);
    assert_int_equal(lz_router_is_packed_refs(&pol, "packed-refs"), 1);
    assert_op(-EPERM, LZ_ROP_WRITE, "worktrees/wt/index", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, "packed-refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, "worktrees/wt/index", false, NULL);
    /* ...even when the agent took the worktree's HEAD away first: its
     * directory is a Git directory by name, not by shape. */
    static const char *const headless[] = { "worktrees", "worktrees/wt", "worktrees/wt/commondir" };
    fake_paths = headless;
    fake_n = LZ_ARRAY_SIZE(headless);
    assert_int_equal(lz_router_is_index(&pol, "worktrees/wt/index", NULL), 1);
    assert_op(-EPERM, LZ_ROP_WRITE, "worktrees/wt/index", false, NULL);
    assert_op(0, LZ_ROP_CREATE, "worktrees/wt/HEAD", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, "worktrees/wt/commondir", false, NULL);
    fake_paths = common_tree;
    fake_n = LZ_ARRAY_SIZE(common_tree);

    /* Retargeting the worktree or the repository. */
    assert_op(-EPERM, LZ_ROP_WRITE, "worktrees/wt/commondir", false, NULL);
    assert_op(-EPERM, LZ_ROP_UNLINK, "worktrees/wt/gitdir", false, NULL);
    assert_op(-EEXIST, LZ_ROP_CREATE, "worktrees/wt/commondir", true, NULL);
    assert_op(-EPERM, LZ_ROP_CREATE, "worktrees/wt/config.worktree", false, NULL);
    assert_ren(-EPERM, "x", "worktrees/wt/commondir", false, true, false, 0);
    assert_ren(-EPERM, "worktrees/wt", "worktrees/wt2", true, false, false, 0);
    assert_ren(-EPERM, "worktrees", "w2", true, false, false, 0);
    assert_ren(-EPERM, "logs", "l2", true, false, false, 0);
    assert_op(-EPERM, LZ_ROP_RMDIR, "logs/refs", false, NULL);
    assert_op(-EPERM, LZ_ROP_RMDIR, "worktrees/wt", false, NULL);
    assert_op(-EPERM, LZ_ROP_MKDIR, "worktrees/new", false, NULL);
    assert_op(-EPERM, LZ_ROP_WRITE, "worktrees/other/HEAD", false, NULL);
    assert_op(-EPERM, LZ_ROP_UNLINK, "worktrees/other/index", false, NULL);
    /* Links and special files never enter, at the root either. */
    assert_op(-EPERM, LZ_ROP_SYMLINK, "refs/heads/x", false, NULL);
    assert_op(-EPERM, LZ_ROP_SYMLINK, "worktrees/wt/COMMIT_EDITMSG", false, NULL);
    assert_op(-EPERM, LZ_ROP_LINK, "objects/ab/x", false, "objects/ab/cdef");
    assert_int_equal(create_typed("gc.pid", S_IFIFO), -EPERM);
    assert_int_equal(ren_typed("objects/ab/x", "refs/heads/y", S_IFLNK, 1, false, 0, 0, 0), -EPERM);
    assert_int_equal(ren_typed("objects/ab/x", "refs/heads/y", S_IFREG, 2, false, 0, 0, 0), -EXDEV);
    /* The root is never removed or replaced. */
    assert_op(-EPERM, LZ_ROP_SETATTR, "", false, NULL);
    /* The mode relaxes nothing but worktrees/wt/ below its own protected
     * names: every other path is at least as protected as when the same
     * tree is seen as a directory shaped like a Git directory. */
    static const char *const names[] = { "HEAD",  "config",      "index", "objects",   "refs",    "logs",    "info",
                                         "hooks", "packed-refs", "x",     "worktrees", "modules", "shallow", "gc.pid" };
    static const char *const subs[] = { "",           "/HEAD",    "/config", "/info/attributes", "/info/alternates",
                                        "/replace/x", "/heads/x", "/x.lock", "/commondir",       "/refs/notes/y" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++)
        for (size_t j = 0; j < LZ_ARRAY_SIZE(subs); j++) {
            char path[128];
            snprintf(path, sizeof path, "%s%s", names[i], subs[j]);
            enum lz_router_class in_mode = cls(path);
            pol.worktree = NULL;
            enum lz_router_class plain = cls(path);
            pol.worktree = "wt";
            /* `worktrees` itself: an ANCESTOR of the Domain's own (only a
             * mkdir of it differs, and it exists). */
            if (in_mode < plain && strcmp(path, "worktrees") != 0)
                fail_msg("%s: %s in linked-worktree mode, %s without", path, lz_router_class_name(in_mode),
                         lz_router_class_name(plain));
        }
    /* Without the mode (the positive control), the same tree is a
     * directory shaped like a Git directory: worktrees/ is read-only as a
     * whole and the main work tree's HEAD is free. */
    pol.worktree = NULL;
    assert_class("worktrees/wt/HEAD", LZ_RCLASS_PROTECTED);
    assert_class("HEAD", LZ_RCLASS_FREE);
    assert_class("logs/HEAD", LZ_RCLASS_FREE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_classify_gitdir, setup),
        cmocka_unit_test_setup(test_classify_locks, setup),
        cmocka_unit_test_setup(test_classify_shaped_dirs, setup),
        cmocka_unit_test_setup(test_fast_path_asks_nothing, setup),
        cmocka_unit_test_setup(test_fs_errors_fail_closed, setup),
        cmocka_unit_test_setup(test_create_gitname_refused, setup),
        cmocka_unit_test_setup(test_protected_read_only, setup),
        cmocka_unit_test_setup(test_normal_git_allowed, setup),
        cmocka_unit_test_setup(test_ancestors, setup),
        cmocka_unit_test_setup(test_link_bypasses, setup),
        cmocka_unit_test_setup(test_rename_bypasses, setup),
        cmocka_unit_test_setup(test_no_new_git_directories, setup),
        cmocka_unit_test_setup(test_extra_protect, setup),
        cmocka_unit_test_setup(test_paths, setup),
        cmocka_unit_test_setup(test_gitdir_contents, setup),
        cmocka_unit_test_setup(test_index_only_by_rename, setup),
        cmocka_unit_test_setup(test_display_files, setup),
        cmocka_unit_test_setup(test_linked_worktree, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
