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
    r.argv = slash;
    assert_int_equal(lz_esc_decide(&p, &r, &k), LZ_ESC_PROMPT);
    /* a rule with a relative argv[0] never matches even the same text */
    char *relrule[] = { "echo", "hello", NULL };
    struct lz_esc_rule rr = { relrule, 2, false };
    struct lz_esc_policy p2 = { &rr, 1 };
    r.argv = rel;
    assert_int_equal(lz_esc_decide(&p2, &r, &k), LZ_ESC_PROMPT);
}

static void test_rules_parse(void **state) {
    (void)state;
    struct lz_esc_policy p;
    struct lz_error err = { 0 };
    char *canon = realpath("/bin/true", NULL);
    char spec[512];
    snprintf(spec, sizeof spec,
             "%s\x1f"
             "a b\x1e+\x1f%s",
             canon, canon);
    assert_int_equal(lz_esc_rules_parse(spec, &p, &err), 0);
    assert_int_equal(p.n_rules, 2);
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
        cmocka_unit_test(test_name_parse),
        cmocka_unit_test(test_take_refuses_non_files),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_rules_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
