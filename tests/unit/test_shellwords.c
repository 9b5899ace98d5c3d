/* Unit tests for the edited-command splitter (shellwords.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "shellwords.h"

static void expect_words(const char *line, const char *const *want, size_t n) {
    char **argv = NULL;
    size_t argc = 0;
    struct lz_error err = { 0 };
    int r = lz_shellwords_split(line, strlen(line), &argv, &argc, &err);
    if (r != 0)
        fail_msg("split(%s) failed: %s", line, err.msg);
    assert_int_equal(argc, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(argv[i], want[i]);
    assert_null(argv[n]);
    lz_shellwords_free(argv);
}

/* Returns the error code; the message must name a column when col > 0. */
static int expect_refused(const char *line, size_t len, size_t col) {
    char **argv = NULL;
    size_t argc = 0;
    struct lz_error err = { 0 };
    int r = lz_shellwords_split(line, len, &argv, &argc, &err);
    if (r == 0)
        fail_msg("split(%s) was accepted", line);
    assert_null(argv);
    assert_true(err.msg[0] != '\0');
    if (col) {
        char c[32];
        snprintf(c, sizeof c, "column %zu", col);
        if (!strstr(err.msg, c))
            fail_msg("message '%s' does not name %s", err.msg, c);
    }
    return r;
}

#define W(...) (const char *const[]){ __VA_ARGS__ }, LZ_ARRAY_SIZE(((const char *const[]){ __VA_ARGS__ }))

static void test_plain_and_quotes(void **state) {
    (void)state;
    expect_words("/usr/bin/make  -j4\tall", W("/usr/bin/make", "-j4", "all"));
    expect_words("  x  ", W("x"));
    expect_words("echo 'a b' \"c d\"", W("echo", "a b", "c d"));
    expect_words("echo a'b'\"c\"d", W("echo", "abcd"));
    expect_words("echo '' \"\" x", W("echo", "", "", "x"));
    /* nested quotes */
    expect_words("echo \"it's\" 'say \"hi\"'", W("echo", "it's", "say \"hi\""));
    expect_words("echo 'it'\\''s'", W("echo", "it's"));
    expect_words("echo \"a\\\"b\"", W("echo", "a\"b"));
    /* backslashes in double quotes: only $ ` " \ newline are escapable */
    expect_words("echo \"a\\b\" \"\\$x\" \"\\`\" \"\\\\\"", W("echo", "a\\b", "$x", "`", "\\"));
    expect_words("echo \"a\\\nb\"", W("echo", "ab"));
    /* single quotes keep backslashes */
    expect_words("echo 'a\\nb\\'", W("echo", "a\\nb\\"));
    /* outside quotes: backslash makes the next character literal */
    expect_words("echo a\\ b \\| \\$HOME \\* \\~ \\#x", W("echo", "a b", "|", "$HOME", "*", "~", "#x"));
    /* line continuation */
    expect_words("echo a\\\nb \\\n c", W("echo", "ab", "c"));
    /* quoted operators pass literally */
    expect_words("grep 'a|b' \"x;y\" '$(rm -rf ~)' '`id`' \"<>&()\" '*?[]{}!#'",
                 W("grep", "a|b", "x;y", "$(rm -rf ~)", "`id`", "<>&()", "*?[]{}!#"));
    /* newlines inside quotes are literal */
    expect_words("printf 'a\nb' \"c\nd\"", W("printf", "a\nb", "c\nd"));
    /* mid-word # and = are ordinary */
    expect_words("curl http://x/#frag a=b --opt=1", W("curl", "http://x/#frag", "a=b", "--opt=1"));
    /* a quoted name before = is no assignment */
    expect_words("'FOO'=1 x", W("FOO=1", "x"));
    expect_words("/bin/x=1", W("/bin/x=1"));
    expect_words("caf\xc3\xa9 \xe6\x97\xa5", W("caf\xc3\xa9", "\xe6\x97\xa5"));
}

static void test_every_operator_refused(void **state) {
    (void)state;
    const char *ops = "$`;&|<>()*?[{}~!\n";
    for (const char *o = ops; *o; o++) {
        char line[32];
        /* in the middle of a word, and as its own word */
        snprintf(line, sizeof line, "ls a%cb", *o);
        assert_int_equal(expect_refused(line, strlen(line), 5), -EINVAL);
        snprintf(line, sizeof line, "ls %c", *o);
        assert_int_equal(expect_refused(line, strlen(line), 4), -EINVAL);
        /* positive control: the same character quoted is accepted */
        snprintf(line, sizeof line, "ls 'a%cb'", *o);
        char want[8] = { 'a', *o, 'b', 0 };
        expect_words(line, W("ls", want));
        snprintf(line, sizeof line, "ls a\\%cb", *o);
        if (*o != '\n')
            expect_words(line, W("ls", want));
    }
    /* the common forms */
    expect_refused("echo $HOME", 10, 6);
    expect_refused("echo $(id)", 10, 6);
    expect_refused("echo `id`", 9, 6);
    expect_refused("make && rm -rf /", 16, 6);
    expect_refused("cat x > /etc/passwd", 19, 7);
    expect_refused("ls ~/x", 6, 4);
    expect_refused("ls *.c", 6, 4);
    /* expansion inside double quotes */
    expect_refused("echo \"$HOME\"", 12, 7);
    expect_refused("echo \"a`id`\"", 12, 8);
    expect_refused("echo \"${x}\"", 11, 7);
    /* comment and assignment */
    expect_refused("ls #x", 5, 4);
    expect_refused("FOO=1 /bin/x", 12, 4);
    expect_refused("_A9=1", 5, 4);
}

static void test_malformed(void **state) {
    (void)state;
    expect_refused("echo 'abc", 9, 6);
    expect_refused("echo \"abc", 9, 6);
    expect_refused("echo \"a\\\"", 9, 6);
    expect_refused("echo abc\\", 9, 9);
    expect_refused("", 0, 0);
    expect_refused("   \t ", 5, 0);
    expect_refused("\\\n", 2, 0);
    /* control, invisible and invalid bytes anywhere, even quoted */
    expect_refused("echo '\x1b[2J'", 11, 7);
    expect_refused("echo a\x7f", 7, 7);
    expect_refused("echo \xe2\x80\xae"
                   "x",
                   9, 6);
    expect_refused("echo '\xc2\x9b'", 9, 7);
    expect_refused("echo \xc0\xaf", 7, 6);
    expect_refused("echo \xed\xa0\x80", 8, 6);
    expect_refused("echo a\0b", 8, 7);
    expect_refused("echo \r", 6, 6);
}

static void test_bounds(void **state) {
    (void)state;
    /* LZ_SHELLWORDS_WORDS_MAX words pass, one more does not */
    char *line = lz_xmalloc(2 * (LZ_SHELLWORDS_WORDS_MAX + 1) + 1);
    size_t o = 0;
    for (int i = 0; i < LZ_SHELLWORDS_WORDS_MAX; i++) {
        line[o++] = 'a';
        line[o++] = ' ';
    }
    char **argv;
    size_t argc;
    struct lz_error err = { 0 };
    assert_int_equal(lz_shellwords_split(line, o, &argv, &argc, &err), 0);
    assert_int_equal(argc, LZ_SHELLWORDS_WORDS_MAX);
    lz_shellwords_free(argv);
    line[o++] = 'a';
    assert_int_equal(lz_shellwords_split(line, o, &argv, &argc, &err), -E2BIG);
    free(line);

    /* LZ_SHELLWORDS_BYTES_MAX bytes of words pass, one more does not */
    line = lz_xmalloc(LZ_SHELLWORDS_BYTES_MAX + 8);
    memset(line, 'b', LZ_SHELLWORDS_BYTES_MAX + 1);
    assert_int_equal(lz_shellwords_split(line, LZ_SHELLWORDS_BYTES_MAX, &argv, &argc, &err), 0);
    lz_shellwords_free(argv);
    assert_int_equal(lz_shellwords_split(line, LZ_SHELLWORDS_BYTES_MAX + 1, &argv, &argc, &err), -E2BIG);
    free(line);

    /* the line itself */
    line = lz_xmalloc(LZ_SHELLWORDS_LINE_MAX + 1);
    memset(line, ' ', LZ_SHELLWORDS_LINE_MAX + 1);
    line[0] = 'x';
    assert_int_equal(lz_shellwords_split(line, LZ_SHELLWORDS_LINE_MAX, &argv, &argc, &err), 0);
    lz_shellwords_free(argv);
    assert_int_equal(lz_shellwords_split(line, LZ_SHELLWORDS_LINE_MAX + 1, &argv, &argc, &err), -E2BIG);
    free(line);
}

static void roundtrip(const char *const *argv, size_t argc) {
    char *line = NULL;
    struct lz_error err = { 0 };
    if (lz_shellwords_quote(argv, argc, &line, &err) != 0)
        fail_msg("quote failed: %s", err.msg);
    expect_words(line, argv, argc);
    free(line);
}

static void test_quote_roundtrip(void **state) {
    (void)state;
    roundtrip(W("/usr/bin/make", "-j4"));
    roundtrip(W("/bin/echo", "", "a b", "it's", "'", "''", "\"", "\\", "$HOME", "`id`", "a|b;c&d<e>f(g)h", "*?[]{}~!#",
                "#x", "--x=1", "caf\xc3\xa9"));
    roundtrip(W("FOO=1", "BAR=2"));
    roundtrip(W("~", "!", "=", "#"));
    char *line = NULL;
    /* bare words stay bare */
    assert_int_equal(lz_shellwords_quote(W("/usr/bin/git", "status", "--short=1"), &line, NULL), 0);
    assert_string_equal(line, "/usr/bin/git status --short=1");
    free(line);
    assert_int_equal(lz_shellwords_quote(W("A=1"), &line, NULL), 0);
    assert_string_equal(line, "'A=1'");
    free(line);
    /* words the editor must not hold raw are refused */
    struct lz_error err = { 0 };
    assert_int_equal(lz_shellwords_quote(W("/bin/echo", "\x1b[2J"), &line, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "argv[1]"));
    assert_int_equal(lz_shellwords_quote(W("/bin/echo", "a\xe2\x80\xae"), &line, NULL), -EINVAL);
    assert_int_equal(lz_shellwords_quote(W("/bin/echo", "\xff"), &line, NULL), -EINVAL);
    assert_int_equal(lz_shellwords_quote(W("/bin/echo", "a\rb"), &line, NULL), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_quotes), cmocka_unit_test(test_every_operator_refused),
        cmocka_unit_test(test_malformed),        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_quote_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
