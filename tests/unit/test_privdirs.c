/* Unit tests for privdirs.c: the start-time checks with the host's git,
 * the store directories (no symlink followed) and their place in the OCI
 * spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitscan.h"
#include "ocispec.h"
#include "privdirs.h"

static char root[4096];

/* Test set-up: fixed command lines in the test's own directory. */
static void sh(const char *cmd) { assert_int_equal(system(cmd), 0); }

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/lz-test-privdirs-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    sh(cmd);
    return 0;
}

static int has_git(void) {
    char *git = lz_gitscan_git_path();
    free(git);
    return git != NULL;
}

static int check(const char *ws, const char *dir, struct lz_error *err) {
    char *git = lz_gitscan_git_path();
    char *dirs[] = { (char *)dir };
    int r = lz_privdirs_check(ws, git, dirs, 1, err);
    free(git);
    return r;
}

static void test_check(void **state) {
    (void)state;
    if (!has_git())
        skip();
    char ws[4200], cmd[16384];
    snprintf(ws, sizeof ws, "%s/ws", root);
    snprintf(cmd, sizeof cmd,
             "set -e; git init -q '%1$s'; cd '%1$s'; printf 'node_modules/\\n/gen/\\n*.tmp\\n' > .gitignore; "
             "mkdir -p build web kept; echo x > kept/a; git add .gitignore kept/a; "
             "printf 'kept/\\n' >> .gitignore; ln -s /etc link; echo f > file",
             ws);
    sh(cmd);
    struct lz_error err = { 0 };
    assert_int_equal(check(ws, "node_modules", &err), 0);
    assert_int_equal(check(ws, "web/node_modules", &err), 0);
    /* An absent parent that is ignored: the store makes it. */
    assert_int_equal(check(ws, "gen/cache", &err), 0);
    assert_int_equal(check(ws, "build", &err), -EPERM);
    assert_non_null(strstr(err.msg, "build is not git-ignored"));
    assert_non_null(strstr(err.msg, ".gitignore"));
    assert_int_equal(check(ws, "kept", &err), -EPERM);
    assert_non_null(strstr(err.msg, "tracked"));
    assert_non_null(strstr(err.msg, "kept/a"));
    assert_int_equal(check(ws, "link/node_modules", &err), -ENOTDIR);
    assert_non_null(strstr(err.msg, "link is a symlink"));
    assert_int_equal(check(ws, "file/node_modules", &err), -ENOTDIR);
    assert_int_equal(check(ws, "nope/node_modules", &err), -ENOENT);
    assert_non_null(strstr(err.msg, "its parent nope"));
    /* A glob or magic in a name is a name. */
    assert_int_equal(check(ws, ":(glob)*", &err), -EPERM);
    /* Several at once (two git runs), and which one failed. */
    char *git = lz_gitscan_git_path();
    char *three[] = { (char *)"node_modules", (char *)"web/node_modules", (char *)"gen/cache" };
    assert_int_equal(lz_privdirs_check(ws, git, three, 3, &err), 0);
    char *two[] = { (char *)"node_modules", (char *)"build" };
    assert_int_equal(lz_privdirs_check(ws, git, two, 2, &err), -EPERM);
    assert_non_null(strstr(err.msg, "build is not git-ignored"));
    free(git);
    /* Without git, or outside a work tree: refused, with why. */
    char *dirs[] = { (char *)"node_modules" };
    assert_int_equal(lz_privdirs_check(ws, NULL, dirs, 1, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no git"));
    assert_int_equal(check(root, "node_modules", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "Git work tree"));
    assert_int_equal(lz_privdirs_check(ws, NULL, dirs, 0, &err), 0);
}

static void test_sources(void **state) {
    (void)state;
    char tree[4200], cmd[16384];
    snprintf(tree, sizeof tree, "%s/store/tree", root);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/store'", root);
    sh(cmd);
    struct lz_error err = { 0 };
    char *dirs[] = { (char *)"node_modules", (char *)"a/b/target" };
    char **src = NULL;
    assert_int_equal(lz_privdirs_sources(tree, dirs, 2, &src, &err), 0);
    char want[8192];
    snprintf(want, sizeof want, "%s/a/b/target", tree);
    assert_string_equal(src[1], want);
    struct stat st;
    assert_int_equal(lstat(src[1], &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    lz_strv_free(src, 2);
    /* Again: what is there is kept. */
    assert_int_equal(lz_privdirs_sources(tree, dirs, 2, &src, &err), 0);
    lz_strv_free(src, 2);
    /* A symlink in the way, at the end or on the way: refused, the
     * symlink's target untouched. */
    snprintf(cmd, sizeof cmd,
             "cd '%1$s' && rmdir node_modules && mkdir '%2$s/outside' && ln -s '%2$s/outside' node_modules", tree,
             root);
    sh(cmd);
    src = NULL;
    assert_true(lz_privdirs_sources(tree, dirs, 1, &src, &err) < 0);
    assert_null(src);
    assert_non_null(strstr(err.msg, "reset --ignored-only"));
    snprintf(cmd, sizeof cmd, "cd '%1$s' && rm -r a && ln -s '%2$s/outside' a", tree, root);
    sh(cmd);
    assert_true(lz_privdirs_sources(tree, dirs + 1, 1, &src, &err) < 0);
    snprintf(want, sizeof want, "%s/outside/b", root);
    assert_int_equal(lstat(want, &st), -1);
    /* A file in the way. */
    snprintf(cmd, sizeof cmd, "cd '%1$s' && rm a && echo f > a", tree);
    sh(cmd);
    assert_true(lz_privdirs_sources(tree, dirs + 1, 1, &src, &err) < 0);
}

static void test_spec(void **state) {
    (void)state;
    char ws[4200], cmd[16384];
    snprintf(ws, sizeof ws, "%s/specws", root);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", ws);
    sh(cmd);
    struct lz_oci_bind priv[] = { { (char *)"/store/tree/node_modules", (char *)"/workspace/node_modules", false } };
    struct lz_sandbox_spec s = { .rootfs = "/rootfs",
                                 .workspace = ws,
                                 .view = "/view",
                                 .init_path = "/init",
                                 .private_dirs = priv,
                                 .n_private_dirs = 1 };
    char *json = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_oci_sandbox_config(&s, &json, &err), 0);
    json_t *root_j = json_loads(json, 0, NULL);
    assert_non_null(root_j);
    json_t *mounts = json_object_get(root_j, "mounts");
    ssize_t ws_at = -1, priv_at = -1;
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        json_t *m = json_array_get(mounts, i);
        const char *d = json_string_value(json_object_get(m, "destination"));
        if (!strcmp(d, "/workspace"))
            ws_at = (ssize_t)i;
        if (!strcmp(d, "/workspace/node_modules")) {
            priv_at = (ssize_t)i;
            assert_string_equal(json_string_value(json_object_get(m, "source")), "/store/tree/node_modules");
            json_t *o = json_object_get(m, "options");
            bool rw = false, nosuid = false, nodev = false;
            for (size_t j = 0; j < json_array_size(o); j++) {
                const char *v = json_string_value(json_array_get(o, j));
                rw = rw || !strcmp(v, "rw");
                nosuid = nosuid || !strcmp(v, "nosuid");
                nodev = nodev || !strcmp(v, "nodev");
            }
            assert_true(rw && nosuid && nodev);
        }
    }
    /* Over the router's view: after it. */
    assert_true(ws_at >= 0 && priv_at > ws_at);
    json_decref(root_j);
    free(json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_spec),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
