/* test_gitscan.c — the pure parts of the host-Git scan (path resolution as
 * Git and the kernel do it, hook-script words, hook-manager detection,
 * `git config -z` parsing), and whole scans of small repositories made
 * with the host's git when it is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gitscan.h"

static void test_join(void **state) {
    char *p;
    p = lz_gitscan_join("/etc/x", "/base", "/home/u");
    assert_string_equal(p, "/etc/x");
    free(p);
    p = lz_gitscan_join("~/proj/inc.cfg", "/base", "/home/u");
    assert_string_equal(p, "/home/u/proj/inc.cfg");
    free(p);
    /* Git: relative to the directory of the file that holds the key */
    p = lz_gitscan_join("proj/inc.cfg", "/home/u", "/home/u");
    assert_string_equal(p, "/home/u/proj/inc.cfg");
    free(p);
    assert_null(lz_gitscan_join("~other/x", "/base", "/home/u"));
    assert_null(lz_gitscan_join("~/x", "/base", NULL));
    assert_null(lz_gitscan_join("", "/base", "/home/u"));
}

static void test_rel(void **state) {
    assert_string_equal(lz_gitscan_rel("/w/ws", "/w/ws/a/b"), "a/b");
    assert_string_equal(lz_gitscan_rel("/w/ws", "/w/ws"), "");
    assert_null(lz_gitscan_rel("/w/ws", "/w/wsx/a"));
    assert_null(lz_gitscan_rel("/w/ws", "/w/other"));
}

struct links {
    char *v[8];
    int n;
};
static void rec_link(void *ud, const char *l) {
    struct links *x = ud;
    if (x->n < 8)
        x->v[x->n++] = strdup(l);
}

static void test_canon(void **state) {
    char tmpl[] = "/tmp/lz-gitscan-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    char *base = realpath(dir, NULL);
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/real", base);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/link", base);
    assert_int_equal(symlink("real", p), 0);
    struct links l = { 0 };
    /* through a symlink, into a missing file: the link itself is reported */
    snprintf(p, sizeof p, "%s/link/./sub//inc.cfg", base);
    char *c = lz_gitscan_canon(p, rec_link, &l);
    snprintf(q, sizeof q, "%s/real/sub/inc.cfg", base);
    assert_string_equal(c, q);
    free(c);
    assert_int_equal(l.n, 1);
    snprintf(q, sizeof q, "%s/link", base);
    assert_string_equal(l.v[0], q);
    free(l.v[0]);
    /* `..` after an existing component is resolved */
    snprintf(p, sizeof p, "%s/real/../x", base);
    c = lz_gitscan_canon(p, NULL, NULL);
    snprintf(q, sizeof q, "%s/x", base);
    assert_string_equal(c, q);
    free(c);
    /* `..` after a missing one: only up to the first missing component */
    snprintf(p, sizeof p, "%s/missing/../../etc", base);
    c = lz_gitscan_canon(p, NULL, NULL);
    snprintf(q, sizeof q, "%s/missing", base);
    assert_string_equal(c, q);
    free(c);
    /* a symlink loop gives up */
    snprintf(p, sizeof p, "%s/loop", base);
    assert_int_equal(symlink("loop", p), 0);
    snprintf(p, sizeof p, "%s/loop/x", base);
    assert_null(lz_gitscan_canon(p, NULL, NULL));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    free(base);
}

static bool has(char **v, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

static void test_tokens(void **state) {
    const char *script = "#!/bin/sh\n"
                         "# run scripts/not-this.sh\n"
                         ". \"$(dirname \"$0\")/h\"\n"
                         "./scripts/lint.sh --fix src/a.c; scripts/check&&tools/x.py | cat\n"
                         "CONFIG=ci/conf.yml exec python3 --config=tools/cfg.toml \"$HOME/x\"  # comment tools/c\n"
                         "sh 'quoted/file.sh' > out.log\n";
    char **t = NULL;
    size_t n = lz_gitscan_tokens(script, &t);
    assert_true(has(t, n, "./scripts/lint.sh"));
    assert_true(has(t, n, "scripts/check"));
    assert_true(has(t, n, "tools/x.py"));
    assert_true(has(t, n, "src/a.c"));
    assert_true(has(t, n, "ci/conf.yml"));
    assert_true(has(t, n, "tools/cfg.toml"));
    assert_true(has(t, n, "quoted/file.sh"));
    assert_true(has(t, n, "out.log"));
    assert_false(has(t, n, "scripts/not-this.sh"));
    assert_false(has(t, n, "tools/c"));
    assert_false(has(t, n, "--fix"));
    assert_false(has(t, n, "."));
    for (size_t i = 0; i < n; i++)
        assert_null(strchr(t[i], '$'));
    for (size_t i = 0; i < n; i++)
        free(t[i]);
    free(t);
}

static void test_managers(void **state) {
    assert_int_equal(lz_gitscan_managers(NULL, "/w/.husky/_"), LZ_HM_HUSKY9);
    assert_int_equal(lz_gitscan_managers(NULL, "/w/.husky/_/"), LZ_HM_HUSKY9);
    assert_int_equal(lz_gitscan_managers(NULL, "/w/x.husky/_"), 0);
    assert_int_equal(lz_gitscan_managers(NULL, "/w/.husky"), 0);
    const char *husky4 = "#!/bin/sh\n# husky\n. \"$(dirname \"$0\")/husky.sh\"\n";
    assert_true(lz_gitscan_managers(husky4, "/w/.git/hooks") & LZ_HM_HUSKY4);
    const char *pc = "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"
                     "ARGS=(hook-impl --config=ci/pc.yaml --hook-type=pre-commit)\n";
    assert_int_equal(lz_gitscan_managers(pc, "/w/.git/hooks"), LZ_HM_PRECOMMIT);
    char *cfg = lz_gitscan_precommit_config(pc);
    assert_string_equal(cfg, "ci/pc.yaml");
    free(cfg);
    cfg = lz_gitscan_precommit_config("exec pre-commit hook-impl\n");
    assert_string_equal(cfg, ".pre-commit-config.yaml");
    free(cfg);
    assert_int_equal(lz_gitscan_managers("#!/bin/sh\nlefthook run pre-commit \"$@\"\n", NULL), LZ_HM_LEFTHOOK);
    assert_true(lz_gitscan_managers("#!/bin/sh\n[ \"$SKIP_SIMPLE_GIT_HOOKS\" = 1 ] && exit 0\nnpx lint-staged\n",
                                    NULL) == (LZ_HM_SIMPLE_GIT_HOOKS | LZ_HM_PACKAGE_RUNNER));
    assert_int_equal(lz_gitscan_managers("npm run lint\n", NULL), LZ_HM_PACKAGE_RUNNER);
    assert_int_equal(lz_gitscan_managers("make check\n", NULL), LZ_HM_PACKAGE_RUNNER);
    assert_int_equal(lz_gitscan_managers("./node_modules/.bin/eslint .\n", NULL), LZ_HM_PACKAGE_RUNNER);
    assert_int_equal(lz_gitscan_managers("./remake.sh; cmake-format x; echo npm-ish\n", NULL), 0);
}

static void test_entries(void **state) {
    char buf[] = "global\0file:/h/.gitconfig\0include.path\nproj/inc.cfg\0"
                 "local\0file:.git/config\0core.bare\nfalse\0"
                 "local\0file:.git/config\0x.flag\0";
    size_t len = sizeof buf - 1;
    struct lz_gitcfg_entry e;
    size_t off = lz_gitscan_next_entry(buf, len, 0, true, &e);
    assert_true(off > 0);
    assert_string_equal(e.scope, "global");
    assert_string_equal(e.origin, "file:/h/.gitconfig");
    assert_string_equal(e.key, "include.path");
    assert_string_equal(e.value, "proj/inc.cfg");
    off = lz_gitscan_next_entry(buf, len, off, true, &e);
    assert_string_equal(e.key, "core.bare");
    off = lz_gitscan_next_entry(buf, len, off, true, &e);
    assert_true(off > 0);
    assert_string_equal(e.key, "x.flag");
    assert_null(e.value);
    assert_int_equal(lz_gitscan_next_entry(buf, len, off, true, &e), 0);
    /* truncated input ends the list */
    char bad[] = "local\0file:x";
    assert_int_equal(lz_gitscan_next_entry(bad, sizeof bad - 1, 0, true, &e), 0);
}

/* ---- whole scans, with the host's git -------------------------------- */

static char *ws_base;

static void sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    if (r != 0)
        print_error("command failed: %s\n", cmd);
    assert_int_equal(r, 0);
}

static int setup_ws(void **state) {
    if (system("command -v git >/dev/null 2>&1") != 0)
        return 0;
    char tmpl[] = "/tmp/lz-gitscan-ws-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d)
        return -1;
    ws_base = realpath(d, NULL);
    setenv("HOME", ws_base, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("GIT_CONFIG_GLOBAL");
    return 0;
}

static int teardown_ws(void **state) {
    if (ws_base) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", ws_base);
        (void)!system(cmd);
        free(ws_base);
        ws_base = NULL;
    }
    return 0;
}

static void test_scan_repo(void **state) {
    if (!ws_base)
        skip();
    sh("cd %s && git init -q proj && cd proj && mkdir -p scripts .husky/_ vendor/lib tools && "
       "echo x > scripts/lint.sh && "
       "git config include.path ../tools/inc.cfg && "
       "git config includeIf.onbranch:evil.path ../evil.cfg && "
       "printf '[include]\\n\\tpath = deeper.cfg\\n' > evil.cfg && "
       "git config core.hooksPath .husky/_ && "
       "printf '#!/bin/sh\\n./scripts/lint.sh\\nnpx lint-staged\\n' > .husky/_/pre-commit && chmod +x "
       ".husky/_/pre-commit && "
       "git -C vendor/lib init -q && git -C vendor/lib config core.hooksPath hooks2 && "
       "printf '[include]\\n\\tpath = proj/home-inc.cfg\\n' > %s/.gitconfig",
       ws_base, ws_base);
    char ws[512];
    snprintf(ws, sizeof ws, "%s/proj", ws_base);
    struct lz_gitscan g;
    struct lz_error err = { 0 };
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), 0);
    const char *want[] = { ".git/config",
                           ".husky",
                           "deeper.cfg",
                           "evil.cfg",
                           "home-inc.cfg",
                           "tools/inc.cfg",
                           "vendor/lib/.git/config",
                           "vendor/lib/hooks2" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!has(g.protect, g.n_protect, want[i]))
            fail_msg("%s not protected", want[i]);
    /* covered by .husky, so not listed on its own */
    assert_false(has(g.protect, g.n_protect, ".husky/_"));
    assert_true(g.n_notices >= 1);
    assert_true(g.n_repos >= 2);
    lz_gitscan_clear(&g);

    /* A symlink in a Git directory refuses the start, escaped. */
    sh("mkdir -p %s/.git/logs && ln -s /tmp/x %s/.git/COMMIT_EDITMSG && ln -s /tmp/x '%s/.git/logs/a\nb'", ws, ws, ws);
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), -EPERM);
    assert_non_null(strstr(err.msg, ".git/COMMIT_EDITMSG (symlink)"));
    assert_non_null(strstr(err.msg, "a\\x0ab"));
    assert_non_null(strstr(err.msg, "remove it"));
    sh("rm %s/.git/COMMIT_EDITMSG '%s/.git/logs/a\nb'", ws, ws);
    /* A hard link outside objects/ too; inside objects/ it is fine. */
    sh("ln %s/.git/config %s/.git/ORIG_HEAD", ws, ws);
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), -EPERM);
    assert_non_null(strstr(err.msg, "ORIG_HEAD"));
    sh("rm %s/.git/ORIG_HEAD && mkdir -p %s/.git/objects/ab && echo o > %s/.git/objects/ab/c && "
       "ln %s/.git/objects/ab/c %s/.git/objects/ab/d",
       ws, ws, ws, ws, ws);
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), 0);
    lz_gitscan_clear(&g);

    /* A bound exceeded refuses and says how to raise it. */
    struct lz_gitscan_opts o = { .max_entries = 5 };
    assert_int_equal(lz_gitscan_run(ws, &o, &g, &err), -E2BIG);
    assert_non_null(strstr(err.msg, LZ_GITSCAN_ENV_MAX_ENTRIES));
    o = (struct lz_gitscan_opts){ .max_depth = 1 };
    assert_int_equal(lz_gitscan_run(ws, &o, &g, &err), -E2BIG);
    assert_non_null(strstr(err.msg, LZ_GITSCAN_ENV_MAX_DEPTH));

    /* No git: nothing to protect, and the scan says so. */
    o = (struct lz_gitscan_opts){ .git = "/nonexistent/git" };
    assert_int_equal(lz_gitscan_run(ws, &o, &g, &err), 0);
    assert_int_equal(g.n_protect, 0);
    lz_gitscan_clear(&g);
}

static const char *find_notice(const struct lz_gitscan *g, const char *prefix) {
    for (size_t i = 0; i < g->n_notices; i++)
        if (!strncmp(g->notices[i], prefix, strlen(prefix)))
            return g->notices[i];
    return NULL;
}

/* What makes the host's git display something else than what it pushes,
 * already there at Domain start: one notice per Git directory, not a
 * refusal (the developer may have made it). */
static void test_display_report(void **state) {
    if (!ws_base)
        skip();
    sh("cd %s && git init -q disp && cd disp && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m one && "
       "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m two && "
       "git init -q --bare fixture.git",
       ws_base);
    char ws[512];
    snprintf(ws, sizeof ws, "%s/disp", ws_base);
    struct lz_gitscan g;
    struct lz_error err = { 0 };
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), 0);
    for (size_t i = 0; i < g.n_notices; i++) /* a clean repository: nothing */
        assert_null(strstr(g.notices[i], "git push"));
    lz_gitscan_clear(&g);

    sh("cd %s && git replace HEAD HEAD~1 && git -c user.name=a -c user.email=a@b notes add -m n HEAD && "
       "git pack-refs --all && git replace HEAD~1 HEAD && "
       "git rev-parse HEAD > .git/info/grafts && git rev-parse HEAD > .git/shallow && "
       "echo '*.py -diff' > .git/info/attributes && echo '* -diff' > fixture.git/info/attributes",
       ws);
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), 0);
    const char *n = find_notice(&g, ".git: ");
    assert_non_null(n);
    assert_non_null(strstr(n, "1 replace ref in refs/replace/"));
    assert_non_null(strstr(n, "2 replace or notes refs in packed-refs"));
    assert_non_null(strstr(n, "info/grafts"));
    assert_non_null(strstr(n, "shallow"));
    assert_non_null(strstr(n, "info/attributes"));
    assert_non_null(strstr(n, "git push"));
    n = find_notice(&g, "fixture.git: info/attributes change");
    assert_non_null(n);
    lz_gitscan_clear(&g);

    /* Files the configuration names for display are kept read-only:
     * relative to the top of the work tree, and outside it not at all. */
    sh("cd %s && git config blame.ignoreRevsFile .git-blame-ignore-revs && git config core.attributesFile tools/attrs "
       "&& git config diff.orderFile /etc/hostname && git config mailmap.file ../outside.mailmap",
       ws);
    assert_int_equal(lz_gitscan_run(ws, NULL, &g, &err), 0);
    assert_true(has(g.protect, g.n_protect, ".git-blame-ignore-revs"));
    assert_true(has(g.protect, g.n_protect, "tools/attrs"));
    for (size_t i = 0; i < g.n_protect; i++)
        assert_null(strstr(g.protect[i], "hostname"));
    for (size_t i = 0; i < g.n_protect; i++)
        assert_null(strstr(g.protect[i], "outside.mailmap"));
    lz_gitscan_clear(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_rel),
        cmocka_unit_test(test_canon),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_managers),
        cmocka_unit_test(test_entries),
        cmocka_unit_test_setup_teardown(test_scan_repo, setup_ws, teardown_ws),
        cmocka_unit_test_setup_teardown(test_display_report, setup_ws, teardown_ws),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
