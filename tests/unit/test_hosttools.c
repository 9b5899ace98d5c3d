/* test_hosttools.c — the host-tool configuration path set (hosttools.h):
 * matching at any depth, ASCII case ignored, whole components only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "hosttools.h"

static char *set[] = { ".claude", ".vscode", ".mcp.json", ".envrc" };
#define N (sizeof set / sizeof *set)

static void test_match(void **state) {
    (void)state;
    assert_int_equal(lz_hosttools_match(set, N, ".claude"), 7);
    assert_int_equal(lz_hosttools_match(set, N, ".claude/settings.json"), 7);
    assert_int_equal(lz_hosttools_match(set, N, "sub/.vscode/tasks.json"), 11);
    assert_int_equal(lz_hosttools_match(set, N, "a/b/c/.envrc"), 12);
    assert_int_equal(lz_hosttools_match(set, N, ".mcp.json"), 9);
    /* case variants: a case-folding directory treats them as the same */
    assert_int_equal(lz_hosttools_match(set, N, ".VSCode/tasks.json"), 7);
    assert_int_equal(lz_hosttools_match(set, N, "x/.CLAUDE"), 9);
    /* the first component that matches */
    assert_int_equal(lz_hosttools_match(set, N, ".vscode/.claude"), 7);
    /* whole components only */
    assert_int_equal(lz_hosttools_match(set, N, ".claudex"), 0);
    assert_int_equal(lz_hosttools_match(set, N, "x.claude"), 0);
    assert_int_equal(lz_hosttools_match(set, N, "a/.vscode2/b"), 0);
    assert_int_equal(lz_hosttools_match(set, N, ".mcp.json.bak"), 0);
    assert_int_equal(lz_hosttools_match(set, N, "README"), 0);
    assert_int_equal(lz_hosttools_match(set, N, ""), 0);
    assert_int_equal(lz_hosttools_match(set, 0, ".claude"), 0);
    assert_int_equal(lz_hosttools_match(set, N, NULL), 0);
}

static void test_names(void **state) {
    (void)state;
    assert_null(lz_hosttools_name_invalid(".fleet"));
    assert_non_null(lz_hosttools_name_invalid(""));
    assert_non_null(lz_hosttools_name_invalid("."));
    assert_non_null(lz_hosttools_name_invalid(".."));
    assert_non_null(lz_hosttools_name_invalid(".git"));
    assert_non_null(lz_hosttools_name_invalid(".GIT"));
    assert_non_null(lz_hosttools_name_invalid("a/b"));
    assert_non_null(lz_hosttools_name_invalid("a\nb"));
    char big[300];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_non_null(lz_hosttools_name_invalid(big));
    /* every default is a valid name and is a default */
    size_t n = 0;
    for (const struct lz_hosttool_default *d = lz_hosttools_defaults; d->name; d++, n++) {
        assert_null(lz_hosttools_name_invalid(d->name));
        assert_true(lz_hosttools_is_default(d->name));
        assert_non_null(d->tool);
    }
    assert_true(n > 0 && n <= LZ_HOSTTOOLS_MAX / 2);
    assert_true(lz_hosttools_is_default(".Claude"));
    assert_false(lz_hosttools_is_default(".fleet"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
