/* test_doctor.c — doctor's runsc version judgement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "doctor.h"

static void test_runsc_recent(void **state) {
    (void)state;
    assert_true(lz_doctor_runsc_recent("runsc version 0.0~20240729.0\nspec: 1.1.0-rc.1\n"));
    assert_true(lz_doctor_runsc_recent("runsc version release-20250101.0\n"));
    assert_true(lz_doctor_runsc_recent("runsc version 0.0~20240101\n"));
    /* bookworm's own, and what is not a date */
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~20221219.0\n"));
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~2024\n"));
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~202407291.0\n"));
    assert_false(lz_doctor_runsc_recent(""));
}

int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_runsc_recent) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
