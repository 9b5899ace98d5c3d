/* Unit tests for mailbox names and the safe reader (mailbox.c), and the
 * auto-approval matching (escalation_rules.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "escalation.h"
#include "mailbox.h"

#include <fcntl.h>
#include <sys/stat.h>

static const char *ID = "00112233445566778899aabbccddeeff";

static void test_name_parse(void **state) {
    (void)state;
    struct lz_mbox_name n;
    char b[128];
    snprintf(b, sizeof b, "%s.escalation-request.0", ID);
    assert_int_equal(lz_mbox_name_parse(b, &n), 0);
    assert_int_equal(n.kind, LZ_REC_ESCALATION_REQUEST);
    assert_int_equal(n.seq, 0);
    assert_int_equal(n.request_id[0], 0x00);
    assert_int_equal(n.request_id[15], 0xff);
    char out[LZ_MBOX_NAME_MAX + 1];
    assert_int_equal(lz_mbox_name_format(&n, out, sizeof out), 0);
    assert_string_equal(out, b);
    snprintf(b, sizeof b, "%s.result-chunk.18446744073709551615", ID);
    assert_int_equal(lz_mbox_name_parse(b, &n), 0);
    assert_true(n.seq == UINT64_MAX);
    /* Every variation that is not the one canonical form is refused. */
    static const char *const bad[] = {
        ".tmp-0011",
        "00112233445566778899aabbccddeeff.escalation-request.01",
        "00112233445566778899aabbccddeeff.escalation-request.",
        "00112233445566778899aabbccddeeff.escalation-request.-1",
        "00112233445566778899aabbccddeeff.escalation-request.+1",
        "00112233445566778899aabbccddeeff.escalation-request.1 ",
        "00112233445566778899aabbccddeeff.result-chunk.18446744073709551616",
        "00112233445566778899AABBCCDDEEFF.escalation-request.0",
        "00112233445566778899aabbccddeef.escalation-request.0",
        "00112233445566778899aabbccddeeff0.escalation-request.0",
        "00112233445566778899aabbccddeeff.Escalation-request.0",
        "00112233445566778899aabbccddeeff.no-such-kind.0",
        "00112233445566778899aabbccddeeff..0",
        "00112233445566778899aabbccddeeff.escalation-request",
        "00112233445566778899aabbccddeeff.escalation-request.0/x",
        "",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        assert_int_equal(lz_mbox_name_parse(bad[i], &n), -EINVAL);
}

static int mkdtemp_fd(char *tmpl) {
    assert_non_null(mkdtemp(tmpl));
    return open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void test_take_refuses_non_files(void **state) {
    (void)state;
    char dir[] = "/tmp/lzmbox-XXXXXX";
    int d = mkdtemp_fd(dir);
    assert_true(d >= 0);
    static uint8_t buf[LZ_RECORD_MAX + 1];
    size_t len;
    enum lz_mbox_refusal why;
    /* positive control: a plain file is taken (and removed) */
    assert_int_equal(lz_mbox_put(d, "good", (const uint8_t *)"abc", 3), 0);
    assert_int_equal(lz_mbox_take(d, "good", buf, sizeof buf, &len, &why), 0);
    assert_int_equal(len, 3);
    assert_int_equal(faccessat(d, "good", F_OK, 0), -1);
    /* symlink */
    assert_int_equal(symlinkat("/etc/passwd", d, "link"), 0);
    assert_int_equal(lz_mbox_take(d, "link", buf, sizeof buf, &len, &why), -EPERM);
    assert_int_equal(why, LZ_MBOX_SYMLINK);
    assert_int_equal(faccessat(d, "link", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    /* FIFO: refused without blocking */
    assert_int_equal(mkfifoat(d, "fifo", 0600), 0);
    assert_int_equal(lz_mbox_take(d, "fifo", buf, sizeof buf, &len, &why), -EPERM);
    assert_int_equal(why, LZ_MBOX_NOT_REGULAR);
    /* directory (with content) */
    assert_int_equal(mkdirat(d, "dir", 0700), 0);
    int sub = openat(d, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(lz_mbox_put(sub, "x", (const uint8_t *)"x", 1), 0);
    close(sub);
    assert_int_equal(lz_mbox_take(d, "dir", buf, sizeof buf, &len, &why), -EPERM);
    assert_int_equal(why, LZ_MBOX_NOT_REGULAR);
    assert_int_equal(faccessat(d, "dir", F_OK, 0), -1);
    /* hard link */
    assert_int_equal(lz_mbox_put(d, "a", (const uint8_t *)"abc", 3), 0);
    assert_int_equal(linkat(d, "a", d, "b", 0), 0);
    assert_int_equal(lz_mbox_take(d, "b", buf, sizeof buf, &len, &why), -EPERM);
    assert_int_equal(why, LZ_MBOX_LINKED);
    unlinkat(d, "a", 0);
    /* oversized */
    static uint8_t big[LZ_RECORD_MAX + 1];
    assert_int_equal(lz_mbox_put(d, "big", big, sizeof big), 0);
    assert_int_equal(lz_mbox_take(d, "big", buf, sizeof buf, &len, &why), -EPERM);
    assert_int_equal(why, LZ_MBOX_TOO_LARGE);
    /* exactly the maximum is fine */
    assert_int_equal(lz_mbox_put(d, "max", big, LZ_RECORD_MAX), 0);
    assert_int_equal(lz_mbox_take(d, "max", buf, sizeof buf, &len, &why), 0);
    assert_int_equal(len, LZ_RECORD_MAX);
    assert_int_equal(lz_mbox_take(d, "gone", buf, sizeof buf, &len, &why), -ENOENT);
    close(d);
    rmdir(dir);
}

static char *A_echo[] = { "/usr/bin/echo", "hello", NULL };

static void test_decide(void **state) {
    (void)state;
    struct lz_esc_rule rules[] = { { A_echo, 2, false } };
    struct lz_esc_policy p = { rules, 1 };
    char *exact[] = { "/usr/bin/echo", "hello", NULL };
    char *extra[] = { "/usr/bin/echo", "hello", "x", NULL };
    char *rel[] = { "echo", "hello", NULL };
    char *fewer[] = { "/usr/bin/echo", NULL };
    char *other[] = { "/usr/bin/echo", "hellO", NULL };
    char *slash[] = { "/usr/bin//echo", "hello", NULL };
    struct lz_esc_request r = { .argv = exact, .argc = 2 };
    size_t k = 99;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    assert_int_equal(k, 0);
    r.argv = extra, r.argc = 3;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    rules[0].allow_extra_args = true; /* positive control of the same request */
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    r.argv = fewer, r.argc = 1;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    r.argv = rel, r.argc = 2;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    r.argv = other;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    /* The same file through another spelling: resolved on the host, it is
     * the rule's canonical file (and the rule's path is what runs). */
    r.argv = slash;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    /* a rule with a relative argv[0] never matches even the same text */
    char *relrule[] = { "echo", "hello", NULL };
    struct lz_esc_rule rr = { relrule, 2, false };
    struct lz_esc_policy p2 = { &rr, 1 };
    r.argv = rel;
    assert_int_equal(lz_esc_decide(&p2, &r, &k), LZ_ESC_PROMPT);
}

/* A request whose argv[0] is another name of the rule's canonical file
 * matches; a name of another file does not; never a PATH lookup. */
static void test_decide_canonical(void **state) {
    (void)state;
    char *canon = realpath("/bin/echo", NULL);
    assert_non_null(canon);
    char *rule_argv[] = { canon, "hi", NULL };
    struct lz_esc_rule rules[] = { { rule_argv, 2, false, false } };
    struct lz_esc_policy p = { rules, 1, false, NULL, 0 };
    char *via_bin[] = { "/bin/echo", "hi", NULL };
    char *dotted[] = { "/usr/./bin/echo", "hi", NULL };
    char *other[] = { "/bin/true", "hi", NULL };
    char *bare[] = { "echo", "hi", NULL };
    struct lz_esc_request r = { .argv = via_bin, .argc = 2 };
    size_t k = 99;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO); /* merged /usr: /bin/echo -> /usr/bin/echo */
    assert_int_equal(k, 0);
    r.argv = dotted;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    r.argv = other;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    r.argv = bare;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    /* a link to the rule's file in a directory of ours: it matches, and
     * what runs is the rule's path (escalation.c), never the link */
    char dir[] = "/tmp/lz-test-canon-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char lnk[256];
    snprintf(lnk, sizeof lnk, "%s/sh", dir);
    assert_int_equal(symlink(canon, lnk), 0);
    char *via_link[] = { lnk, "hi", NULL };
    r.argv = via_link;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    unlink(lnk);
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT); /* gone: nothing resolves */
    rmdir(dir);
    free(canon);
}

/* The working directory: a rule without cwd = "workspace" runs in a fresh
 * empty directory, so a request that asks for another directory than the
 * default is asked instead; the acknowledged rule takes it. */
static void test_decide_cwd(void **state) {
    (void)state;
    struct lz_esc_rule rules[] = { { A_echo, 2, false, false } };
    struct lz_esc_policy p = { rules, 1, false, NULL, 0 };
    char *exact[] = { "/usr/bin/echo", "hello", NULL };
    struct lz_esc_request r = { .argv = exact, .argc = 2, .cwd = "/workspace" };
    size_t k = 99;
    char why[512];
    assert_int_equal(lz_esc_decide_why(&p, &r, &k, why, sizeof why), LZ_ESC_AUTO);
    r.cwd = NULL;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    r.cwd = "/workspace/sub";
    assert_int_equal(lz_esc_decide_why(&p, &r, &k, why, sizeof why), LZ_ESC_PROMPT);
    assert_non_null(strstr(why, "fresh empty directory"));
    rules[0].cwd_workspace = true; /* positive control: the acknowledged rule */
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
}

/* Extra arguments (allow_extra_args) that name a sandbox-writable tree:
 * asked instead; ordinary ones still auto-approved (the control). */
static void test_decide_extra_args(void **state) {
    (void)state;
    char ws[] = "/tmp/lz-test-ws-XXXXXX";
    assert_non_null(mkdtemp(ws));
    char *trees[] = { ws, NULL };
    struct lz_esc_rule rules[] = { { A_echo, 2, true, false } };
    struct lz_esc_policy p = { rules, 1, false, trees, 1 };
    char a[512];
    const char *bad[] = { "{}/conftest.py", "--rootdir={}", "-c{}/x.ini", "@{}/args",        "/", "..",
                          "../x",           "--x=../../y",  "{}//./sub",  "PATH=/usr/bin:{}" };
    const char *good[] = { "-q", "tests/", "/usr/share/doc", "s/a/b/", "--name=x", "a..b" };
    char *argv[] = { "/usr/bin/echo", "hello", a, NULL };
    struct lz_esc_request r = { .argv = argv, .argc = 3 };
    size_t k;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        const char *h = strstr(bad[i], "{}");
        if (h)
            snprintf(a, sizeof a, "%.*s%s%s", (int)(h - bad[i]), bad[i], ws, h + 2);
        else
            snprintf(a, sizeof a, "%s", bad[i]);
        if (lz_esc_decide(&p, &r, &k) != LZ_ESC_PROMPT)
            print_error("auto-approved: %s\n", a);
        assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    }
    /* a budget over all extra arguments: many cheap ones are asked */
    char *many[300];
    many[0] = "/usr/bin/echo";
    many[1] = "hello";
    for (size_t i = 2; i < 300; i++)
        many[i] = "a/b";
    struct lz_esc_request rm = { .argv = many, .argc = 300 };
    char why[256];
    assert_int_equal(lz_esc_decide_why(&p, &rm, &k, why, sizeof why), LZ_ESC_PROMPT);
    assert_non_null(strstr(why, "more than 256 '/'"));
    rm.argc = 200; /* the control: within the budget */
    assert_int_equal(lz_esc_decide(&p, &rm, &k), LZ_ESC_AUTO);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(good); i++) {
        snprintf(a, sizeof a, "%s", good[i]);
        if (lz_esc_decide(&p, &r, &k) != LZ_ESC_AUTO)
            print_error("asked: %s\n", a);
        assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_AUTO);
    }
    rmdir(ws);
}

/* lz_autoapprove_arg_reaches: spellings, links, bounds. */
static void test_arg_reaches(void **state) {
    (void)state;
    char root[] = "/tmp/lz-test-reach-XXXXXX";
    assert_non_null(mkdtemp(root));
    char ws[256], out[256], lnk[256], dang[256], p[1024], why[512];
    snprintf(ws, sizeof ws, "%s/ws", root);
    snprintf(out, sizeof out, "%s/out", root);
    assert_int_equal(mkdir(ws, 0700), 0);
    assert_int_equal(mkdir(out, 0700), 0);
    /* a link outside the tree that points into it, and one that points
     * nowhere yet (into the tree: the sandbox would create its target) */
    snprintf(lnk, sizeof lnk, "%s/in", out);
    assert_int_equal(symlink(ws, lnk), 0);
    snprintf(dang, sizeof dang, "%s/later", out);
    snprintf(p, sizeof p, "%s/not-yet", ws);
    assert_int_equal(symlink(p, dang), 0);
    const char *trees[] = { ws };
    size_t t = 99;
    snprintf(p, sizeof p, "%s/conftest.py", lnk);
    assert_int_equal(lz_autoapprove_arg_reaches(p, trees, 1, &t, why, sizeof why), -EPERM);
    assert_int_equal(t, 0);
    assert_non_null(strstr(why, "lies inside"));
    snprintf(p, sizeof p, "--config=%s/x/y", dang);
    assert_int_equal(lz_autoapprove_arg_reaches(p, trees, 1, &t, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "symbolic link"));
    snprintf(p, sizeof p, "%s", root); /* holds the tree */
    assert_int_equal(lz_autoapprove_arg_reaches(p, trees, 1, &t, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "contains"));
    /* controls: the sibling directory, a file in it, a word */
    snprintf(p, sizeof p, "%s/file", out);
    assert_int_equal(lz_autoapprove_arg_reaches(p, trees, 1, &t, why, sizeof why), 0);
    assert_int_equal(t, SIZE_MAX);
    snprintf(p, sizeof p, "%s", ws); /* a tree's own name with a suffix is another directory */
    p[strlen(p)] = '\0';
    char sib[300];
    snprintf(sib, sizeof sib, "%s2/x", ws);
    assert_int_equal(lz_autoapprove_arg_reaches(sib, trees, 1, &t, why, sizeof why), 0);
    assert_int_equal(lz_autoapprove_arg_reaches("hello", trees, 1, &t, why, sizeof why), 0);
    /* "~/" where a path starts is the home directory's (programs expand
     * it themselves); elsewhere it is a word (the control) */
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", root, 1);
    assert_int_equal(lz_autoapprove_arg_reaches("~/ws/conftest.py", trees, 1, &t, why, sizeof why), -EPERM);
    assert_int_equal(lz_autoapprove_arg_reaches("--config=~/ws", trees, 1, &t, why, sizeof why), -EPERM);
    assert_int_equal(lz_autoapprove_arg_reaches("~/out/x", trees, 1, &t, why, sizeof why), 0);
    assert_int_equal(lz_autoapprove_arg_reaches("a~/ws", trees, 1, &t, why, sizeof why), 0);
    if (old_home)
        setenv("HOME", old_home, 1);
    else
        unsetenv("HOME");
    free(old_home);
    /* bounds: too long, too many '/' */
    char *big = lz_xcalloc(5000, 1);
    memset(big, 'a', 4999);
    assert_int_equal(lz_autoapprove_arg_reaches(big, trees, 1, &t, why, sizeof why), -E2BIG);
    memset(big, 0, 5000);
    for (size_t i = 0; i < 200; i++)
        big[i] = i % 2 ? 'a' : '/';
    assert_int_equal(lz_autoapprove_arg_reaches(big, trees, 1, &t, why, sizeof why), -E2BIG);
    free(big);
    unlink(dang);
    unlink(lnk);
    rmdir(out);
    rmdir(ws);
    rmdir(root);
}

static void test_rules_parse(void **state) {
    (void)state;
    struct lz_esc_policy p;
    struct lz_error err = { 0 };
    char *canon = realpath("/bin/true", NULL);
    char spec[512];
    snprintf(spec, sizeof spec,
             "%s\x1f"
             "a b\x1e+\x1f%s\x1e@workspace\x1f%s",
             canon, canon, canon);
    assert_int_equal(lz_esc_rules_parse(spec, &p, &err), 0);
    assert_int_equal(p.n_rules, 3);
    assert_false(p.rules[0].cwd_workspace);
    assert_true(p.rules[2].cwd_workspace);
    assert_false(p.rules[2].allow_extra_args);
    assert_int_equal(p.rules[0].argc, 2);
    assert_string_equal(p.rules[0].argv[1], "a b");
    assert_false(p.rules[0].allow_extra_args);
    assert_int_equal(p.rules[1].argc, 1);
    assert_true(p.rules[1].allow_extra_args);
    lz_esc_policy_clear(&p);
    assert_int_equal(lz_esc_rules_parse("true\x1f"
                                        "a",
                                        &p, &err),
                     -EINVAL);
    assert_int_equal(lz_esc_rules_parse("/tmp/../bin/true", &p, &err), -EINVAL);
    free(canon);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_parse),  cmocka_unit_test(test_take_refuses_non_files),
        cmocka_unit_test(test_decide),      cmocka_unit_test(test_decide_canonical),
        cmocka_unit_test(test_decide_cwd),  cmocka_unit_test(test_decide_extra_args),
        cmocka_unit_test(test_arg_reaches), cmocka_unit_test(test_rules_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
