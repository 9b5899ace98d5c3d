/* test_netfollow.c — the host-address follower's decisions (netfollow.h):
 * a host address gained while a Domain runs must end up denied exactly as
 * it would have been, had it been there at start (lz_netpolicy_derive). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "netfollow.h"

#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

static char *allow[] = { "0.0.0.0/0", "10.213.7.0/24", "10.9.9.9/32", "198.18.9.0/24" };
static char *deny[] = { "10.0.0.0/8", "127.0.0.0/8", "198.18.9.128/25" };

static void derive(const uint32_t *host, size_t n_host, struct lz_netpolicy *p) {
    struct lz_config c = { 0 };
    c.profile.egress = LZ_EGRESS_OPEN; /* default_allow (0/0) applies */
    c.default_allow = allow;
    c.n_default_allow = 1;
    c.profile.allow_egress = allow + 1;
    c.profile.n_allow_egress = 3;
    c.default_deny = deny;
    c.n_default_deny = 2;
    c.profile.deny_egress = deny + 2;
    c.profile.n_deny_egress = 1;
    struct lz_error err = { 0 };
    assert_int_equal(lz_netpolicy_derive(&c, host, n_host, p, &err), 0);
}

static void test_needs_deny(void **state) {
    (void)state;
    struct lz_netpolicy p;
    derive(NULL, 0, &p);
    assert_true(lz_netfollow_needs_deny(&p, A(198, 18, 9, 77)));   /* inside an allowed /24 */
    assert_true(lz_netfollow_needs_deny(&p, A(192, 0, 2, 9)));     /* allowed by 0/0 */
    assert_true(lz_netfollow_needs_deny(&p, A(10, 213, 7, 5)));    /* allow inside a deny */
    assert_true(lz_netfollow_needs_deny(&p, A(10, 9, 9, 9)));      /* an explicit /32 allow: deny wins */
    assert_false(lz_netfollow_needs_deny(&p, A(10, 1, 2, 3)));     /* already denied by 10/8 */
    assert_false(lz_netfollow_needs_deny(&p, A(198, 18, 9, 200))); /* denied by a longer prefix */
    assert_false(lz_netfollow_needs_deny(&p, A(10, 0, 2, 50)));    /* the helper's denied /24 */
    assert_false(lz_netfollow_needs_deny(&p, A(10, 0, 2, 3)));     /* the DNS forwarder, as at start */
    assert_false(lz_netfollow_needs_deny(&p, A(127, 0, 0, 2)));    /* loopback, as at start */
    lz_netpolicy_clear(&p);
}

/* For many addresses: the follower denies X on top of the policy derived
 * without X exactly when deriving with X as a host address changes X's
 * verdict to deny; and with the follower's /32 deny, X is denied. */
static void test_matches_start_time_derivation(void **state) {
    (void)state;
    static const uint32_t xs[] = { A(198, 18, 9, 77), A(10, 9, 9, 9),     A(10, 213, 7, 1), A(8, 8, 8, 8),
                                   A(10, 1, 1, 1),    A(198, 18, 9, 255), A(172, 16, 0, 1), A(0, 0, 0, 1) };
    struct lz_netpolicy base;
    derive(NULL, 0, &base);
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        struct lz_netpolicy with;
        derive(&xs[i], 1, &with);
        assert_int_equal(lz_netpolicy_lookup(&with, xs[i]), LZ_NET_DENY);
        bool changed = lz_netpolicy_lookup(&base, xs[i]) != lz_netpolicy_lookup(&with, xs[i]);
        assert_int_equal(lz_netfollow_needs_deny(&base, xs[i]), changed);
        lz_netpolicy_clear(&with);
    }
    lz_netpolicy_clear(&base);
}

static void test_plan(void **state) {
    (void)state;
    struct lz_netpolicy p;
    derive(NULL, 0, &p);
    const uint32_t added[] = { A(198, 18, 9, 77), A(198, 18, 9, 78) };
    const uint32_t host[] = { A(198, 18, 9, 78), A(10, 1, 1, 1), A(198, 18, 9, 79), A(198, 18, 9, 79),
                              A(127, 0, 0, 1) };
    uint32_t *add, *rm;
    size_t na, nr;
    lz_netfollow_plan(&p, added, 2, host, 5, &add, &na, &rm, &nr);
    /* .79 is new (once), .78 is kept, 10.1.1.1 is covered by 10/8; .77 is gone. */
    assert_int_equal(na, 1);
    assert_int_equal(add[0], A(198, 18, 9, 79));
    assert_int_equal(nr, 1);
    assert_int_equal(rm[0], A(198, 18, 9, 77));
    free(add);
    free(rm);
    lz_netfollow_plan(&p, NULL, 0, NULL, 0, &add, &na, &rm, &nr);
    assert_int_equal(na + nr, 0);
    lz_netpolicy_clear(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needs_deny),
        cmocka_unit_test(test_matches_start_time_derivation),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
