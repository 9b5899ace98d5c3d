/* Unit tests for the prompt renderer (escape.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "escape.h"

/* The property every rendering must have: printable ASCII, or well-formed
 * UTF-8 of a code point that needs no escape. Used on every output below;
 * test_checker_fires proves it rejects what a pass-through would emit. */
static bool output_is_safe(const char *s, size_t len) {
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = lz_utf8_decode(p + i, len - i, &cp);
        if (n == 0 || lz_escape_needs(cp))
            return false;
        i += n;
    }
    return true;
}

static char *render(const void *in, size_t len, unsigned flags) {
    char *out = NULL;
    ssize_t n = lz_escape(in, len, flags, &out);
    assert_true(n >= 0);
    assert_int_equal((size_t)n, strlen(out));
    assert_true(output_is_safe(out, (size_t)n));
    /* Injective: the exact bytes come back. */
    uint8_t *back = NULL;
    ssize_t m = lz_unescape(out, (size_t)n, flags, &back);
    assert_int_equal(m, (ssize_t)len);
    assert_memory_equal(back, in, len);
    free(back);
    return out;
}

static size_t utf8_encode(uint32_t cp, uint8_t *b) {
    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (uint8_t)(0xc0 | cp >> 6);
        b[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (uint8_t)(0xe0 | cp >> 12);
        b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    b[0] = (uint8_t)(0xf0 | cp >> 18);
    b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    b[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

static void test_checker_fires(void **state) {
    (void)state;
    /* Positive control: raw ESC, raw RLO and a raw C1 CSI fail the property. */
    assert_false(output_is_safe("\x1b[31m", 5));
    assert_false(output_is_safe("a\xe2\x80\xae"
                                "b",
                                5));
    assert_false(output_is_safe("\xc2\x9b"
                                "31m",
                                5));
    assert_false(output_is_safe("\xff", 1));
    assert_true(output_is_safe("plain \xc3\xa9", 8));
}

static void test_ascii_and_backslash(void **state) {
    (void)state;
    char *o = render("make -j4 \"x\"", 12, 0);
    assert_string_equal(o, "make -j4 \"x\"");
    free(o);
    o = render("a\\b", 3, 0);
    assert_string_equal(o, "a\\\\b");
    free(o);
    o = render("say \"hi\"", 8, LZ_ESCAPE_QUOTED);
    assert_string_equal(o, "say \\\"hi\\\"");
    free(o);
    o = render("\x1b[2J\t\n\r\x7f\x01", 9, 0);
    assert_string_equal(o, "\\x1b[2J\\t\\n\\r\\x7f\\x01");
    free(o);
    o = render("", 0, 0);
    assert_string_equal(o, "");
    free(o);
    /* A NUL byte is shown, not a terminator. */
    o = render("a\0b", 3, 0);
    assert_string_equal(o, "a\\x00b");
    free(o);
}

static void test_every_c0_and_c1(void **state) {
    (void)state;
    for (unsigned b = 0; b < 0x20; b++) {
        uint8_t in = (uint8_t)b;
        char *o = render(&in, 1, 0);
        assert_int_equal(o[0], '\\');
        free(o);
    }
    for (uint32_t cp = 0x80; cp <= 0x9f; cp++) {
        uint8_t b[4];
        size_t n = utf8_encode(cp, b);
        char *o = render(b, n, 0);
        char want[16];
        snprintf(want, sizeof want, "\\u{%04X}", cp);
        assert_string_equal(o, want);
        free(o);
    }
}

static void test_listed_code_points(void **state) {
    (void)state;
    static const uint32_t single[] = {
        0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068,   0x2069,
        0x200b, 0x200c, 0x200d, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xfeff, 0x180e, 0x00ad,   0x034f,
        0x115f, 0x1160, 0x3164, 0xffa0, 0x2028, 0x2029, 0x00a0, 0x3000, 0xe000, 0xfffe, 0x10ffff,
    };
    static const struct {
        uint32_t lo, hi;
    } ranges[] = {
        { 0xe0000, 0xe007f },
        { 0xfe00, 0xfe0f },
        { 0xe0100, 0xe01ef },
        { 0x2000, 0x200a },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(single); i++) {
        uint8_t b[4];
        size_t n = utf8_encode(single[i], b);
        char *o = render(b, n, 0);
        char want[16];
        snprintf(want, sizeof want, "\\u{%04X}", single[i]);
        assert_string_equal(o, want);
        free(o);
    }
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ranges); i++)
        for (uint32_t cp = ranges[i].lo; cp <= ranges[i].hi; cp++) {
            assert_true(lz_escape_needs(cp));
            uint8_t b[8];
            size_t n = utf8_encode(cp, b);
            b[n] = 'x';
            char *o = render(b, n + 1, 0);
            assert_int_equal(o[0], '\\');
            assert_int_equal(o[strlen(o) - 1], 'x');
            free(o);
        }
}

static void test_visible_unicode_passes(void **state) {
    (void)state;
    const char *s = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xef\xbf\xbd";
    char *o = render(s, strlen(s), 0);
    assert_string_equal(o, s);
    free(o);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        { "\xc0\xaf", 2, "\\xc0\\xaf" }, /* overlong '/' */
        { "\xc1\xbf", 2, "\\xc1\\xbf" },
        { "\xe0\x80\xaf", 3, "\\xe0\\x80\\xaf" },          /* overlong 3-byte */
        { "\xf0\x80\x80\xaf", 4, "\\xf0\\x80\\x80\\xaf" }, /* overlong 4-byte */
        { "\xed\xa0\x80", 3, "\\xed\\xa0\\x80" },          /* surrogate U+D800 */
        { "\xed\xbf\xbf", 3, "\\xed\\xbf\\xbf" },          /* surrogate U+DFFF */
        { "\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80" }, /* U+110000 */
        { "\xf5\x80\x80\x80", 4, "\\xf5\\x80\\x80\\x80" },
        { "\x80", 1, "\\x80" },          /* stray continuation */
        { "\xe2\x80", 2, "\\xe2\\x80" }, /* truncated */
        { "\xe2\x80"
          "a",
          3,
          "\\xe2\\x80"
          "a" },
        { "\xff\xfe", 2, "\\xff\\xfe" },
        /* the good sequence after a bad byte survives */
        { "\xe2\xc3\xa9", 3, "\\xe2\xc3\xa9" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        char *o = render(cases[i].in, cases[i].len, 0);
        assert_string_equal(o, cases[i].want);
        free(o);
        assert_false(lz_utf8_wellformed(cases[i].in, cases[i].len));
    }
    assert_true(lz_utf8_wellformed("\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", 10));
}

static void test_literal_escape_text_is_distinct(void **state) {
    (void)state;
    /* The sandbox writing the characters of an escape must not render like
     * the escaped character itself. */
    char *real = render("\xe2\x80\xae", 3, 0);
    char *fake = render("\\u{202E}", 8, 0);
    assert_string_not_equal(real, fake);
    assert_string_equal(fake, "\\\\u{202E}");
    free(real);
    free(fake);
}

static void test_unescape_strict(void **state) {
    (void)state;
    uint8_t *b = NULL;
    assert_int_equal(lz_unescape("\\x41", 4, 0, &b), -EINVAL);     /* A is never escaped */
    assert_int_equal(lz_unescape("\\u{202e}", 8, 0, &b), -EINVAL); /* lower-case */
    assert_int_equal(lz_unescape("\\u{0041}", 8, 0, &b), -EINVAL);
    assert_int_equal(lz_unescape("\x1b", 1, 0, &b), -EINVAL); /* raw control */
    assert_int_equal(lz_unescape("\\", 1, 0, &b), -EINVAL);
    assert_int_equal(lz_unescape("\\q", 2, 0, &b), -EINVAL);
    assert_int_equal(lz_unescape("\\xc3\\xa9", 8, 0, &b), -EINVAL); /* é is shown raw */
    assert_int_equal(lz_unescape("\"", 1, LZ_ESCAPE_QUOTED, &b), -EINVAL);
    assert_int_equal(lz_unescape("\\u{D800}", 8, 0, &b), -EINVAL);
    assert_int_equal(lz_unescape("\\u{202E}", 8, 0, &b), 3);
    assert_memory_equal(b, "\xe2\x80\xae", 3);
    free(b);
}

static void test_argv_lines(void **state) {
    (void)state;
    const char *argv[] = { "/usr/bin/git", "commit", "-m", " x\x1b[8m\"y\" ", "", "a\\b" };
    char *out = NULL;
    ssize_t n = lz_escape_argv(argv, 6, &out);
    assert_true(n > 0);
    assert_string_equal(out,
                        "argv[0] = \"/usr/bin/git\"\n"
                        "argv[1] = \"commit\"\n"
                        "argv[2] = \"-m\"\n"
                        "argv[3] = \" x\\x1b[8m\\\"y\\\" \"\n"
                        "argv[4] = \"\"\n"
                        "argv[5] = \"a\\\\b\"\n");
    /* Safe apart from the line ends the formatter itself writes. */
    for (char *nl = strchr(out, '\n'); nl; nl = strchr(nl, '\n'))
        *nl = ' ';
    assert_true(output_is_safe(out, (size_t)n));
    free(out);
    /* Nothing is clipped: a long element comes out whole. */
    char *big = lz_xmalloc(100001);
    memset(big, 'a', 100000);
    big[100000] = 0;
    const char *one[] = { big };
    n = lz_escape_argv(one, 1, &out);
    assert_int_equal(n, 100000 + strlen("argv[0] = \"\"\n"));
    free(out);
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fires),
        cmocka_unit_test(test_ascii_and_backslash),
        cmocka_unit_test(test_every_c0_and_c1),
        cmocka_unit_test(test_listed_code_points),
        cmocka_unit_test(test_visible_unicode_passes),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_literal_escape_text_is_distinct),
        cmocka_unit_test(test_unescape_strict),
        cmocka_unit_test(test_argv_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
