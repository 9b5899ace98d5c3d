/* Unit tests for the Supervisor child slots (rsslot.c): every name round
 * trips, anything else is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "rsslot.h"

static void test_roundtrip(void **state) {
    (void)state;
    char b[LZ_RS_SLOT_NAME_MAX];
    struct lz_rs_slot s, t;
    for (int k = LZ_SLOT_ROUTER; k <= LZ_SLOT_VOLUME; k++)
        for (unsigned v = 0; v < (k == LZ_SLOT_VOLUME ? LZ_RS_VOLUMES_MAX : 1u); v++) {
            s = (struct lz_rs_slot){ (enum lz_rs_slot_kind)k, v };
            assert_int_equal(lz_rs_slot_parse(lz_rs_slot_name(&s, b), &t), 0);
            assert_true(lz_rs_slot_equal(&s, &t));
        }
    assert_int_equal(lz_rs_slot_parse("vol31", &t), 0);
    assert_int_equal(t.kind, LZ_SLOT_VOLUME);
    assert_int_equal(t.vol, 31);
    assert_string_equal(lz_rs_slot_name(&(struct lz_rs_slot){ LZ_SLOT_RUNSC, 0 }, b), "runsc");
    struct lz_rs_slot v1 = { LZ_SLOT_VOLUME, 1 }, v2 = { LZ_SLOT_VOLUME, 2 }, r = { LZ_SLOT_ROUTER, 0 };
    assert_false(lz_rs_slot_equal(&v1, &v2));
    assert_false(lz_rs_slot_equal(&v1, &r));
}

static void test_refused(void **state) {
    (void)state;
    static const char *const bad[] = { "",      "vol",    "vol32",  "vol01",   "vol-1",   "vol+1", "vol1x",
                                       "vol 1", "vol999", "Router", "router ", "runsc\n", "volx",  "vol4294967297" };
    struct lz_rs_slot t = { LZ_SLOT_RUNSC, 7 };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        if (lz_rs_slot_parse(bad[i], &t) != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
    assert_int_equal(t.kind, LZ_SLOT_RUNSC);
    assert_int_equal(t.vol, 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
