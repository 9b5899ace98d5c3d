/* Unit tests for worktree.c: which workspaces are linked worktrees, and
 * which layouts are refused. The trees are made by hand, as `git worktree
 * add` lays them out (no git needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worktree.h"

static char base[64];

static void put(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void mk(const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static int setup(void **state) {
    (void)state;
    snprintf(base, sizeof base, "/tmp/lz-wt-XXXXXX");
    assert_non_null(mkdtemp(base));
    char *rb = realpath(base, NULL);
    snprintf(base, sizeof base, "%s", rb);
    free(rb);
    mk("main");
    mk("main/.git");
    mk("main/.git/objects");
    mk("main/.git/refs");
    put("main/.git/HEAD", "ref: refs/heads/main\n");
    mk("main/.git/worktrees");
    mk("main/.git/worktrees/wt");
    put("main/.git/worktrees/wt/HEAD", "ref: refs/heads/feature\n");
    put("main/.git/worktrees/wt/commondir", "../..\n");
    mk("wt");
    char g[256];
    snprintf(g, sizeof g, "gitdir: %s/main/.git/worktrees/wt\n", base);
    put("wt/.git", g);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int probe(const char *ws_rel, struct lz_worktree *w, struct lz_error *e) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, ws_rel);
    return lz_worktree_probe(p, w, e);
}

static void test_linked(void **state) {
    (void)state;
    struct lz_worktree w = { 0 };
    struct lz_error e = { 0 };
    assert_int_equal(probe("wt", &w, &e), 1);
    char want[256];
    snprintf(want, sizeof want, "%s/main/.git", base);
    assert_string_equal(w.common, want);
    snprintf(want, sizeof want, "%s/main", base);
    assert_string_equal(w.repo, want);
    assert_string_equal(w.name, "wt");
    char *h = lz_worktree_head(w.gitdir);
    assert_string_equal(h, "feature");
    free(h);
    char *gf = lz_worktree_gitfile(w.name);
    assert_string_equal(gf, "gitdir: /run/lazaret/repo/.git/worktrees/wt\n");
    free(gf);
    lz_worktree_clear(&w);
    /* a relative gitfile (Git 2.48's worktree.useRelativePaths) */
    put("wt/.git", "gitdir: ../main/.git/worktrees/wt\r\n");
    assert_int_equal(probe("wt", &w, &e), 1);
    assert_string_equal(w.name, "wt");
    lz_worktree_clear(&w);
    /* detached */
    put("main/.git/worktrees/wt/HEAD", "0123456789abcdef0123456789abcdef01234567\n");
    snprintf(want, sizeof want, "%s/main/.git/worktrees/wt", base);
    h = lz_worktree_head(want);
    assert_string_equal(h, "detached at 01234567");
    free(h);
}

static void test_not_linked(void **state) {
    (void)state;
    struct lz_worktree w = { 0 };
    struct lz_error e = { 0 };
    /* the main repository itself: .git is a directory */
    assert_int_equal(probe("main", &w, &e), 0);
    /* no .git */
    mk("plain");
    assert_int_equal(probe("plain", &w, &e), 0);
    /* a submodule's gitfile */
    mk("main/.git/modules");
    mk("main/.git/modules/sub");
    mk("sub");
    char g[256];
    snprintf(g, sizeof g, "gitdir: %s/main/.git/modules/sub\n", base);
    put("sub/.git", g);
    assert_int_equal(probe("sub", &w, &e), 0);
    /* not a gitfile */
    put("wt/.git", "hello\n");
    assert_int_equal(probe("wt", &w, &e), 0);
    /* a symlink named .git is not read */
    mk("ln");
    snprintf(g, sizeof g, "%s/ln/.git", base);
    char t[256];
    snprintf(t, sizeof t, "%s/wt/.git", base);
    assert_int_equal(symlink(t, g), 0);
    assert_int_equal(probe("ln", &w, &e), 0);
}

static void test_refused(void **state) {
    (void)state;
    struct lz_worktree w = { 0 };
    struct lz_error e = { 0 };
    /* a commondir that points elsewhere (not Git's layout) */
    mk("other.git");
    put("main/.git/worktrees/wt/commondir", "../../../../other.git\n");
    assert_int_equal(probe("wt", &w, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "layout"));
    put("main/.git/worktrees/wt/commondir", "../..\n");
    /* a removed worktree's metadata */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/main/.git/worktrees/wt", base);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(probe("wt", &w, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "repair"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_linked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_linked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
