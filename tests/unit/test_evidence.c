/* Unit tests for the durable evidence codec (evidence.c) and its readers
 * (recovery.h lz_evidence_u64, anchor.h lz_anchor_ident_mntns): the
 * written form, old stores' text, escapes, and the decoder's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "anchor.h"
#include "evidence.h"
#include "recovery.h"

static void test_encode(void **state) {
    (void)state;
    struct lz_evidence e;
    const char *s;
    lz_evidence_init(&e);
    assert_int_equal(lz_evidence_end(&e, &s), 0);
    assert_string_equal(s, "");
    lz_evidence_add_u64(&e, "userns", 4026531837ULL);
    lz_evidence_add_u64(&e, "mntns", 0);
    lz_evidence_add(&e, "policy", "ab12");
    assert_int_equal(lz_evidence_end(&e, &s), 0);
    assert_string_equal(s, "userns=4026531837 mntns=0 policy=ab12");
    /* A path with a space, a '=', a '%' and UTF-8 stays one field. */
    lz_evidence_init(&e);
    lz_evidence_add_u64(&e, "mntns", 7);
    lz_evidence_add_u64(&e, "/opt/my dir=x%\xc3\xa9", 42);
    assert_int_equal(lz_evidence_end(&e, &s), 0);
    assert_string_equal(s, "mntns=7 /opt/my%20dir%3Dx%25%C3%A9=42");
    uint64_t v = 0;
    assert_int_equal(lz_evidence_get_u64(s, "/opt/my dir=x%\xc3\xa9", &v), 1);
    assert_int_equal(v, 42);
    char val[64];
    assert_int_equal(lz_evidence_get(s, "mntns", val, sizeof val), 1);
    assert_string_equal(val, "7");
    assert_int_equal(lz_evidence_get(s, "/opt/my dir", val, sizeof val), 0);
    assert_int_equal(lz_evidence_get(s, "mntns", val, 1), -E2BIG);

    /* Errors stick, and the text so far stays well formed. */
    lz_evidence_init(&e);
    lz_evidence_add(&e, "a", "1");
    lz_evidence_add(&e, "a", "2");
    assert_int_equal(lz_evidence_end(&e, &s), -EEXIST);
    lz_evidence_init(&e);
    lz_evidence_add(&e, "", "1");
    assert_int_equal(lz_evidence_end(&e, &s), -EINVAL);
    lz_evidence_init(&e);
    lz_evidence_add(&e, "k", "");
    assert_int_equal(lz_evidence_end(&e, &s), -EINVAL);
    assert_int_equal(lz_evidence_check(e.s), 0);
    /* Too long: E2BIG, never a cut field. */
    lz_evidence_init(&e);
    char k[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "/dir%d", i);
        lz_evidence_add_u64(&e, k, UINT64_MAX);
    }
    assert_int_equal(lz_evidence_end(&e, &s), -E2BIG);
    assert_int_equal(lz_evidence_check(e.s), 0);
    assert_true(e.len < LZ_EVIDENCE_MAX);
}

/* The text that stores written before this codec hold reads the same. */
static void test_old_form(void **state) {
    (void)state;
    const char *sandbox = "userns=4026532712 mntns=4026532713 netns=4026532715";
    assert_int_equal(lz_evidence_u64(sandbox, "userns"), 4026532712ULL);
    assert_int_equal(lz_evidence_u64(sandbox, "netns"), 4026532715ULL);
    assert_int_equal(lz_evidence_u64(sandbox, "pidns"), 0);
    assert_int_equal(lz_evidence_u64(NULL, "userns"), 0);
    const char *net = "readiness=0f3a9c policy=ee01";
    char v[80];
    assert_int_equal(lz_evidence_get(net, "policy", v, sizeof v), 1);
    assert_string_equal(v, "ee01");
    const char *ident = "mntns=4026532713 /usr=88 /var/lib/apt=89";
    assert_int_equal(lz_anchor_ident_mntns(ident), 4026532713ULL);
    uint64_t id;
    assert_int_equal(lz_evidence_get_u64(ident, "/var/lib/apt", &id), 1);
    assert_int_equal(id, 89);
    assert_int_equal(lz_evidence_check(""), 0);
    assert_int_equal(lz_evidence_check(NULL), 0);
}

static void test_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        " a=1",  "a=1 ",  "a=1  b=2", "a=",    "=1",        "a",      "a=1=2",      "a=1 a=2",
        "a=1 b", "a b=1", "a=1\tb=2", "a=1\n", "a=%",       "a=%4",   "a=%4g",      "a=%41",
        "a=%2f", "a=%00", "a=%2",     "%61=1", "a=1 %61=2", "a=\x80", "a=\xc3\xa9", "a=1,2",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        uint64_t v = 5;
        char s[8];
        if (lz_evidence_check(bad[i]) != -EBADMSG)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(lz_evidence_get_u64(bad[i], "a", &v), -EBADMSG);
        assert_int_equal(lz_evidence_get(bad[i], "zz", s, sizeof s), -EBADMSG);
        assert_int_equal(v, 5);
        /* The old readers: malformed is absent. */
        assert_int_equal(lz_evidence_u64(bad[i], "a"), 0);
    }
    /* Numbers: decimal, no sign, no leading zero, within uint64. */
    static const char *const badnum[] = {
        "a=-1", "a=+1", "a=01", "a=1x", "a=18446744073709551616", "a=0x10", "a=123456789012345678901"
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(badnum); i++) {
        uint64_t v;
        assert_int_equal(lz_evidence_check(badnum[i]), 0);
        if (lz_evidence_get_u64(badnum[i], "a", &v) != -EBADMSG)
            fail_msg("read a number from '%s'", badnum[i]);
    }
    uint64_t v;
    assert_int_equal(lz_evidence_get_u64("a=18446744073709551615", "a", &v), 1);
    assert_true(v == UINT64_MAX);
    assert_int_equal(lz_evidence_get_u64("a=0", "a", &v), 1);
    assert_int_equal(v, 0);
    /* Too long a text. */
    char *big = malloc(LZ_EVIDENCE_MAX + 1);
    memset(big, 'x', LZ_EVIDENCE_MAX);
    big[0] = 'a';
    big[1] = '=';
    big[LZ_EVIDENCE_MAX] = '\0';
    assert_int_equal(lz_evidence_check(big), -EBADMSG);
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_old_form),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
