/* Unit tests for sbwrite.c: which files a request names that the sandbox
 * can change, and the prompt's warning lines about them. Each "flagged"
 * case has a control that is not flagged, so the check cannot pass by
 * flagging everything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config.h"
#include "sbwrite.h"

#include <sys/stat.h>

static char dir[64], ws[128], outside[128];
static struct lz_sbw t;

static void touch(const char *path, const char *body) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    chmod(path, 0755);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/lzsbw-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    mkdir(ws, 0700);
    mkdir(outside, 0700);
    lz_sbw_add(&t, ws, "the workspace");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lz_sbw_free(&t);
    /* the test's own temporary tree */
    const char *names[] = { "ws/x.py",       "ws/run",         "ws/link",     "ws/dirlink", "ws/she", "ws/hop",
                            "outside/chain", "outside/direct", "outside/rel", "outside/y",  "ws",     "outside" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++) {
        char p[200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (unlink(p) < 0)
            rmdir(p);
    }
    rmdir(dir);
    return 0;
}

static void test_find(void **state) {
    (void)state;
    char p[200], q[200];
    snprintf(p, sizeof p, "%s/x.py", ws);
    touch(p, "print(1)\n");
    snprintf(q, sizeof q, "%s/y", outside);
    touch(q, "y\n");
    assert_string_equal(lz_sbw_find(&t, NULL, p), "the workspace");
    assert_null(lz_sbw_find(&t, NULL, q)); /* control: outside every tree */
    assert_string_equal(lz_sbw_find(&t, ws, "x.py"), "the workspace");
    assert_null(lz_sbw_find(&t, outside, "x.py")); /* does not exist there */
    assert_null(lz_sbw_find(&t, NULL, ws));        /* a directory */
    assert_null(lz_sbw_find(&t, NULL, "/bin/true"));
    /* A link in the workspace to a file outside: the sandbox can repoint it. */
    char l[200];
    snprintf(l, sizeof l, "%s/link", ws);
    assert_int_equal(symlink(q, l), 0);
    assert_string_equal(lz_sbw_find(&t, NULL, l), "the workspace");
    /* A file reached through a workspace directory link. */
    snprintf(l, sizeof l, "%s/dirlink", ws);
    assert_int_equal(symlink(outside, l), 0);
    snprintf(p, sizeof p, "%s/dirlink/y", ws);
    assert_string_equal(lz_sbw_find(&t, NULL, p), "the workspace");
    /* A link outside whose chain passes through a link in the workspace
     * (the sandbox can repoint the middle link); control: a link outside
     * straight to the outside file is not flagged. */
    char hop[200], chain[200], direct[200];
    snprintf(hop, sizeof hop, "%s/hop", ws);
    snprintf(chain, sizeof chain, "%s/chain", outside);
    snprintf(direct, sizeof direct, "%s/direct", outside);
    assert_int_equal(symlink(q, hop), 0);
    assert_int_equal(symlink(hop, chain), 0);
    assert_int_equal(symlink(q, direct), 0);
    assert_string_equal(lz_sbw_find(&t, NULL, chain), "the workspace");
    assert_null(lz_sbw_find(&t, NULL, direct));
    /* Relative links and .. are walked as the kernel does. */
    char rel[200];
    snprintf(rel, sizeof rel, "%s/rel", outside);
    assert_int_equal(symlink("../ws/x.py", rel), 0);
    assert_string_equal(lz_sbw_find(&t, NULL, rel), "the workspace");
    snprintf(rel, sizeof rel, "%s/../outside/y", ws);
    /* Through the workspace and out by "..": flagged (conservative; the
     * walk does not reason about which entries the sandbox could swap). */
    assert_string_equal(lz_sbw_find(&t, NULL, rel), "the workspace");
    /* A link outside pointing into the workspace. */
    char o[200];
    snprintf(o, sizeof o, "%s/ws/x.py", dir);
    assert_string_equal(lz_sbw_find(&t, NULL, o), "the workspace");
}

static bool any(char **v, const char *needle) {
    for (char **w = v; w && *w; w++)
        if (strstr(*w, needle))
            return true;
    return false;
}

static void free_v(char **v) {
    for (char **w = v; w && *w; w++)
        free(*w);
    free(v);
}

/* lz_sbw_trees: the prompt's set (WRITABLE) and the auto-approval set
 * (REACH) of one configuration, in their orders: REACH holds every tree of
 * WRITABLE and also the read-only volume, socket_dir, the file's directory
 * and the caller's extra trees, which WRITABLE does not; a read-write
 * volume beneath the Storage Root is named as the volume in the prompt. */
static void test_trees(void **state) {
    (void)state;
    char data[200], vol[200], ro[200], sock[200], cfgf[200], cfgd[200], rt[200], tmp[64];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(vol, sizeof vol, "%s/data/profiles/p/v", dir);
    snprintf(ro, sizeof ro, "%s/ro", dir);
    snprintf(sock, sizeof sock, "%s/sock", dir);
    snprintf(cfgd, sizeof cfgd, "%s/cfg", dir);
    snprintf(cfgf, sizeof cfgf, "%s/cfg/lazaret.toml", dir);
    snprintf(rt, sizeof rt, "%s/run", dir);
    snprintf(tmp, sizeof tmp, "/tmp/lazaret-%u", (unsigned)getuid());
    setenv("XDG_RUNTIME_DIR", rt, 1);
    struct lz_volume vols[] = { { .host = vol }, { .host = ro, .read_only = true } };
    struct lz_config c = { .workspace = ws, .data_root = data, .escalation_socket_dir = sock, .source_path = cfgf };
    c.profile.volumes = vols;
    c.profile.n_volumes = LZ_ARRAY_SIZE(vols);
    /* nothing but ws exists under dir: each tree is there once */
    struct lz_sbw w = { 0 }, r = { 0 }, b = { 0 };
    lz_sbw_trees(&c, LZ_SBW_WRITABLE, NULL, NULL, 0, &w);
    const char *ex_name = "profiles.p.volumes[0].host";
    char extra[200];
    snprintf(extra, sizeof extra, "%s/other", dir);
    const char *ex = extra;
    lz_sbw_trees(&c, LZ_SBW_REACH, &ex, &ex_name, 1, &r);
    lz_sbw_build(&c, &b);
    char rtl[210];
    snprintf(rtl, sizeof rtl, "%s/lazaret", rt);
    const char *const want_w[] = { ws, vol, data, rtl, tmp };
    const char *const want_r[] = { ws, data, extra, vol, ro, sock, cfgd, rtl, tmp };
    assert_int_equal(w.n, LZ_ARRAY_SIZE(want_w));
    for (size_t i = 0; i < w.n; i++)
        assert_string_equal(w.v[i].path, want_w[i]);
    assert_int_equal(r.n, LZ_ARRAY_SIZE(want_r));
    for (size_t i = 0; i < r.n; i++)
        assert_string_equal(r.v[i].path, want_r[i]);
    /* lz_sbw_build is the WRITABLE set, names too */
    assert_int_equal(b.n, w.n);
    for (size_t i = 0; i < b.n; i++) {
        assert_string_equal(b.v[i].path, w.v[i].path);
        assert_string_equal(b.v[i].what, w.v[i].what);
    }
    assert_string_equal(w.v[1].what, "a read-write volume");
    assert_string_equal(w.v[2].what, "the Storage Root");
    assert_string_equal(r.v[2].what, "profiles.p.volumes[0].host");
    assert_string_equal(r.v[3].what, "a volume of the selected profile");
    assert_string_equal(r.v[6].what, "the configuration file's directory");
    lz_sbw_free(&w);
    lz_sbw_free(&r);
    lz_sbw_free(&b);
    unsetenv("XDG_RUNTIME_DIR");
}

static void test_warnings(void **state) {
    (void)state;
    char p[200];
    snprintf(p, sizeof p, "%s/x.py", ws);
    touch(p, "print(1)\n");
    size_t n = 0;
    /* python3 x.py (relative, from the host working directory) */
    const char *a1[] = { "python3", "x.py" };
    char **v = lz_sbw_warnings(&t, ws, "/usr/bin/python3.11", a1, 2, &n);
    assert_true(n == 2);
    assert_true(any(v, "WRITABLE BY THE SANDBOX: argv[1]"));
    assert_true(any(v, "THE SCRIPT MAY CHANGE AFTER APPROVAL"));
    free_v(v);
    /* control: the same from a directory where x.py is not */
    v = lz_sbw_warnings(&t, outside, "/usr/bin/python3.11", a1, 2, &n);
    assert_int_equal(n, 0);
    assert_null(v);
    /* --file=PATH, a tool that is no interpreter: writable, no script line */
    _cleanup_free_ char *opt = lz_xasprintf("--file=%s", p);
    const char *a2[] = { "/bin/cat", opt };
    v = lz_sbw_warnings(&t, outside, "/bin/cat", a2, 2, &n);
    assert_int_equal(n, 1);
    assert_true(any(v, "argv[1]"));
    free_v(v);
    /* the executable itself, and a #! interpreter in the workspace */
    char run[200], she[200];
    snprintf(run, sizeof run, "%s/run", ws);
    snprintf(she, sizeof she, "%s/she", ws);
    touch(she, "#!/bin/sh\n");
    _cleanup_free_ char *body = lz_xasprintf("#!%s -x\necho\n", she);
    touch(run, body);
    const char *a3[] = { run };
    v = lz_sbw_warnings(&t, outside, run, a3, 1, &n);
    assert_int_equal(n, 2);
    assert_true(any(v, "the executable lies in the workspace"));
    assert_true(any(v, "#! line"));
    free_v(v);
    assert_true(lz_sbw_interpreter("/usr/bin/bash"));
    assert_true(lz_sbw_interpreter("/usr/bin/node"));
    assert_false(lz_sbw_interpreter("/usr/bin/git"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_trees),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
