/* test_toml.c — the strict TOML parser: every grammar feature, every
 * refusal with its exact "FILE:LINE: message". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "toml.h"

static struct lz_toml_value *parse_ok(const char *s) {
    struct lz_toml_value *root = NULL;
    struct lz_error err = { 0 };
    int r = lz_toml_parse(s, strlen(s), "in.toml", &root, &err);
    if (r < 0)
        print_error("unexpected failure: %s\n", err.msg);
    assert_int_equal(r, 0);
    assert_non_null(root);
    assert_int_equal(root->type, LZ_TOML_TABLE);
    return root;
}

static const struct lz_toml_value *path(const struct lz_toml_value *t, const char *a, const char *b, const char *c) {
    const struct lz_toml_value *v = lz_toml_table_get(t, a);
    if (v && b)
        v = lz_toml_table_get(v, b);
    if (v && c)
        v = lz_toml_table_get(v, c);
    assert_non_null(v);
    return v;
}

static void assert_str(const struct lz_toml_value *v, const char *s) {
    assert_non_null(v);
    assert_int_equal(v->type, LZ_TOML_STRING);
    assert_string_equal(v->u.string.s, s);
    assert_int_equal(v->u.string.len, strlen(s));
}

static void assert_int(const struct lz_toml_value *v, int64_t i) {
    assert_non_null(v);
    assert_int_equal(v->type, LZ_TOML_INTEGER);
    assert_true(v->u.integer == i);
}

static void test_scalars_and_comments(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("# leading comment\n"
                                       "a = \"x\"   # trailing comment\n"
                                       "\n"
                                       "  b=true\n"
                                       "c = false\n"
                                       "\"quoted key\" = 1\n"
                                       "'lit key' = -2\n"
                                       "bare-key_9 = +3\n"
                                       "# last line without newline");
    assert_str(path(r, "a", NULL, NULL), "x");
    assert_int_equal(path(r, "b", NULL, NULL)->type, LZ_TOML_BOOL);
    assert_true(path(r, "b", NULL, NULL)->u.boolean);
    assert_false(path(r, "c", NULL, NULL)->u.boolean);
    assert_int(path(r, "quoted key", NULL, NULL), 1);
    assert_int(path(r, "lit key", NULL, NULL), -2);
    assert_int(path(r, "bare-key_9", NULL, NULL), 3);
    assert_int_equal(path(r, "a", NULL, NULL)->line, 2);
    assert_int_equal(path(r, "b", NULL, NULL)->line, 4);
    assert_int_equal(path(r, "bare-key_9", NULL, NULL)->line, 8);
    assert_int_equal(lz_toml_len(r), 6);
    /* file order is kept */
    assert_string_equal(r->u.table.entries[0].key, "a");
    assert_string_equal(r->u.table.entries[5].key, "bare-key_9");
    lz_toml_free(r);

    r = parse_ok("");
    assert_int_equal(lz_toml_len(r), 0);
    lz_toml_free(r);
    r = parse_ok("\n\n# only comments\r\n\t \n");
    assert_int_equal(lz_toml_len(r), 0);
    lz_toml_free(r);
}

static void test_integers(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("a = 0\nb = -0\nc = +0\nd = 1_000_000\n"
                                       "e = 9223372036854775807\nf = -9223372036854775808\ng = 42\n");
    assert_int(path(r, "a", NULL, NULL), 0);
    assert_int(path(r, "b", NULL, NULL), 0);
    assert_int(path(r, "c", NULL, NULL), 0);
    assert_int(path(r, "d", NULL, NULL), 1000000);
    assert_int(path(r, "e", NULL, NULL), INT64_MAX);
    assert_int(path(r, "f", NULL, NULL), INT64_MIN);
    assert_int(path(r, "g", NULL, NULL), 42);
    lz_toml_free(r);
}

static void test_strings(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("a = \"tab\\there \\\"q\\\" back\\\\slash \\b\\f\\r\\n\"\n"
                                       "b = \"\\u00e9\\U0001F600\\u20AC\"\n"
                                       "c = 'C:\\no\\escapes \"here\"'\n"
                                       "d = \"\"\"\nline1\nline2\"\"\"\n"
                                       "e = \"\"\"one \\\n     two \\\n\n   three\"\"\"\n"
                                       "f = '''\n''raw'' \\n\n'''\n"
                                       "g = \"\"\"quote\"\" inside\"\"\"\"\"\n"
                                       "h = \"\"\n"
                                       "i = ''\n"
                                       "j = \"é ünïcödé 😀\"\n"
                                       "k = \"\"\"\r\nx\r\ny\"\"\"\n");
    assert_str(path(r, "a", NULL, NULL), "tab\there \"q\" back\\slash \b\f\r\n");
    assert_str(path(r, "b", NULL, NULL), "\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac");
    assert_str(path(r, "c", NULL, NULL), "C:\\no\\escapes \"here\"");
    assert_str(path(r, "d", NULL, NULL), "line1\nline2");
    assert_str(path(r, "e", NULL, NULL), "one two three");
    assert_str(path(r, "f", NULL, NULL), "''raw'' \\n\n");
    assert_str(path(r, "g", NULL, NULL), "quote\"\" inside\"\"");
    assert_str(path(r, "h", NULL, NULL), "");
    assert_str(path(r, "i", NULL, NULL), "");
    assert_str(path(r, "j", NULL, NULL), "é ünïcödé 😀");
    assert_str(path(r, "k", NULL, NULL), "x\ny");
    /* a multi-line value is recorded at its first line; the next key's line
     * accounts for the newlines inside it */
    assert_int_equal(path(r, "d", NULL, NULL)->line, 4);
    assert_int_equal(path(r, "e", NULL, NULL)->line, 7);
    assert_int_equal(path(r, "f", NULL, NULL)->line, 11);
    assert_int_equal(path(r, "g", NULL, NULL)->line, 14);
    lz_toml_free(r);
}

static void test_arrays(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("a = []\n"
                                       "b = [ 1, 2, 3 ]\n"
                                       "c = [\n"
                                       "  \"x\", # comment\n"
                                       "  # comment line\n"
                                       "\n"
                                       "  \"y\",\n"
                                       "]\n"
                                       "d = [[1, 2], [\"m\", true], []]\n"
                                       "e = [{ k = 1 }, { k = 2 },]\n");
    const struct lz_toml_value *a = path(r, "a", NULL, NULL), *c = path(r, "c", NULL, NULL);
    assert_int_equal(a->type, LZ_TOML_ARRAY);
    assert_int_equal(lz_toml_len(a), 0);
    assert_int_equal(lz_toml_len(path(r, "b", NULL, NULL)), 3);
    assert_int(lz_toml_array_at(path(r, "b", NULL, NULL), 2), 3);
    assert_int_equal(lz_toml_len(c), 2);
    assert_str(lz_toml_array_at(c, 0), "x");
    assert_str(lz_toml_array_at(c, 1), "y");
    assert_int_equal(c->line, 3);
    assert_int_equal(lz_toml_array_at(c, 0)->line, 4);
    assert_int_equal(lz_toml_array_at(c, 1)->line, 7);
    assert_null(lz_toml_array_at(c, 2));
    const struct lz_toml_value *d = path(r, "d", NULL, NULL);
    assert_int_equal(lz_toml_len(d), 3);
    assert_int(lz_toml_array_at(lz_toml_array_at(d, 0), 1), 2);
    assert_true(lz_toml_array_at(lz_toml_array_at(d, 1), 1)->u.boolean);
    const struct lz_toml_value *e = path(r, "e", NULL, NULL);
    assert_int_equal(lz_toml_len(e), 2);
    assert_int(lz_toml_table_get(lz_toml_array_at(e, 1), "k"), 2);
    assert_false(e->flags & LZ_TOML_F_AOT);
    lz_toml_free(r);
}

static void test_inline_tables(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("env = { A = \"env:A\", B = \"lit\" }\n"
                                       "n = { x.y = 1, x.z = { w = [1] } }\n"
                                       "empty = {}\n");
    const struct lz_toml_value *env = path(r, "env", NULL, NULL);
    assert_int_equal(env->type, LZ_TOML_TABLE);
    assert_true(env->flags & LZ_TOML_F_INLINE);
    assert_str(lz_toml_table_get(env, "A"), "env:A");
    assert_str(lz_toml_table_get(env, "B"), "lit");
    assert_int(path(r, "n", "x", "y"), 1);
    assert_int(lz_toml_array_at(lz_toml_table_get(path(r, "n", "x", "z"), "w"), 0), 1);
    assert_int_equal(lz_toml_len(path(r, "empty", NULL, NULL)), 0);
    lz_toml_free(r);
}

static void test_tables(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("top = 1\n"
                                       "[storage]\n"
                                       "data_root = \"~/x\"\n"
                                       "[profiles.claude]\n"
                                       "image = \"i\"\n"
                                       "[profiles.\"quoted name\"]\n"
                                       "image = 'j'\n"
                                       "[ profiles . claude . env ]\n"
                                       "K = \"v\"\n"
                                       "[a.b.c]\n"
                                       "[a]\n"
                                       "d.e = 2\n"
                                       "[a.d.f]\n"
                                       "g = 3\n");
    assert_int(path(r, "top", NULL, NULL), 1);
    assert_str(path(r, "storage", "data_root", NULL), "~/x");
    assert_str(path(r, "profiles", "claude", "image"), "i");
    assert_str(path(r, "profiles", "quoted name", "image"), "j");
    assert_str(path(path(r, "profiles", "claude", "env"), "K", NULL, NULL), "v");
    assert_int_equal(path(r, "profiles", "claude", NULL)->line, 4);
    assert_int_equal(path(r, "profiles", "claude", "env")->line, 8);
    assert_int_equal(path(r, "a", NULL, NULL)->line, 11); /* implicit, then defined at line 11 */
    assert_int(path(r, "a", "d", "e"), 2);
    assert_int(path(path(r, "a", "d", "f"), "g", NULL, NULL), 3);
    lz_toml_free(r);
}

static void test_array_of_tables(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("[[escalation.auto_approve]]\n"
                                       "argv = [\"aws\", \"sts\"]\n"
                                       "[[escalation.auto_approve]]\n"
                                       "argv = [\"git\"]\n"
                                       "allow_extra_args = true\n"
                                       "[escalation.auto_approve.sub]\n"
                                       "x = 1\n"
                                       "[[escalation.auto_approve.list]]\n"
                                       "[escalation]\n"
                                       "enabled = true\n");
    const struct lz_toml_value *aa = path(r, "escalation", "auto_approve", NULL);
    assert_int_equal(aa->type, LZ_TOML_ARRAY);
    assert_true(aa->flags & LZ_TOML_F_AOT);
    assert_int_equal(lz_toml_len(aa), 2);
    assert_int_equal(lz_toml_array_at(aa, 0)->line, 1);
    assert_int_equal(lz_toml_array_at(aa, 1)->line, 3);
    assert_str(lz_toml_array_at(lz_toml_table_get(lz_toml_array_at(aa, 1), "argv"), 0), "git");
    assert_int(path(lz_toml_array_at(aa, 1), "sub", "x", NULL), 1);
    assert_int_equal(lz_toml_len(lz_toml_table_get(lz_toml_array_at(aa, 1), "list")), 1);
    assert_true(path(r, "escalation", "enabled", NULL)->u.boolean);
    lz_toml_free(r);
}

static void test_lookup_helpers(void **state) {
    (void)state;
    struct lz_toml_value *r = parse_ok("s = \"x\"\n");
    assert_null(lz_toml_table_get(NULL, "s"));
    assert_null(lz_toml_table_get(r, "missing"));
    assert_null(lz_toml_table_get(lz_toml_table_get(r, "s"), "s"));
    assert_null(lz_toml_array_at(r, 0));
    assert_null(lz_toml_array_at(NULL, 0));
    assert_int_equal(lz_toml_len(NULL), 0);
    assert_int_equal(lz_toml_len(lz_toml_table_get(r, "s")), 0);
    assert_int_equal(lz_toml_table_entry(r, "s")->line, 1);
    assert_string_equal(lz_toml_type_name(LZ_TOML_BOOL), "boolean");
    assert_string_equal(lz_toml_type_name(LZ_TOML_TABLE), "table");
    lz_toml_free(r);
    lz_toml_free(NULL);
}

static void test_utf8_valid(void **state) {
    (void)state;
    assert_true(lz_utf8_valid("", 0));
    assert_true(lz_utf8_valid("abc\xc3\xa9\xf4\x8f\xbf\xbf", 9));
    assert_false(lz_utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(lz_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(lz_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(lz_utf8_valid("\xe2\x82", 2));         /* truncated */
    assert_false(lz_utf8_valid("\x80", 1));
}

struct bad {
    const char *in;
    size_t len; /* 0: strlen(in) */
    const char *msg;
};

static const struct bad bad_cases[] = {
    /* keys and tables */
    { "a = 1\na = 2\n", 0, "in.toml:2: duplicate key a (first defined at line 1)" },
    { "a = 1\n\"a\" = 2\n", 0, "in.toml:2: duplicate key a (first defined at line 1)" },
    { "[t]\nx = 1\n[t]\ny = 2\n", 0, "in.toml:3: table [t] is defined twice (first at line 1)" },
    { "[a.b]\n[a]\n[a]\n", 0, "in.toml:3: table [a] is defined twice (first at line 2)" },
    { "a = 1\n[a]\n", 0, "in.toml:2: cannot define table [a]: a is already defined as an integer at line 1" },
    { "a = 1\n[a.b]\n", 0, "in.toml:2: key a is already defined as an integer at line 1" },
    { "a = {x = 1}\n[a]\n", 0, "in.toml:2: table [a] is defined twice (first at line 1)" },
    { "a = {x = 1}\n[a.b]\n", 0, "in.toml:2: cannot extend inline table a (defined at line 1)" },
    { "a = {x = 1}\na.y = 2\n", 0, "in.toml:2: cannot add keys to inline table a (defined at line 1)" },
    { "a = [1]\n[[a]]\n", 0, "in.toml:2: cannot define [[a]]: a is already defined as an array at line 1" },
    { "[[a]]\n[a]\n", 0, "in.toml:2: cannot define table [a]: a is already defined as an array of tables at line 1" },
    { "[a]\n[[a]]\n", 0, "in.toml:2: cannot define [[a]]: a is already defined as a table at line 1" },
    { "[a]\nb.c = 1\n[a.b]\n", 0, "in.toml:3: table [a.b] is defined twice (first at line 2)" },
    { "[a.b.c]\n[a]\nb.d = 1\n", 0, "in.toml:3: table a.b is defined at line 1; a dotted key cannot extend it" },
    { "a.b = 1\na.b.c = 2\n", 0, "in.toml:2: key a.b is already defined as an integer at line 1" },
    { "[p.q]\nx = 1\nx = 2\n", 0, "in.toml:3: duplicate key p.q.x (first defined at line 2)" },
    { "[]\n", 0, "in.toml:1: expected a key, found ']'" },
    { "[a\n", 0, "in.toml:1: expected ']' to close the table header, found end of line" },
    { "[[a]\n", 0, "in.toml:1: expected ']]' to close the table header, found end of line" },
    { "[a] b = 1\n", 0, "in.toml:1: expected the end of the line, found 'b'" },
    { "a = 1 b = 2\n", 0, "in.toml:1: expected the end of the line, found 'b'" },
    { "= 1\n", 0, "in.toml:1: expected a key, found '='" },
    { "a\n", 0, "in.toml:1: expected '=' after a key, found end of line" },
    { "a b = 1\n", 0, "in.toml:1: expected '=' after a key, found 'b'" },
    { "\"\"\"k\"\"\" = 1\n", 0, "in.toml:1: a multi-line string cannot be a key" },
    { "a. = 1\n", 0, "in.toml:1: expected a key, found '='" },
    /* values */
    { "a =\n", 0, "in.toml:1: expected a value" },
    { "a = # c\n", 0, "in.toml:1: expected a value" },
    { "a = bare\n", 0, "in.toml:1: invalid value (strings must be quoted)" },
    { "a = True\n", 0, "in.toml:1: invalid value (strings must be quoted)" },
    { "a = truex\n", 0, "in.toml:1: invalid value (strings must be quoted)" },
    { "a = 1.5\n", 0, "in.toml:1: floating-point values are not supported" },
    { "a = 1e3\n", 0, "in.toml:1: floating-point values are not supported" },
    { "a = inf\n", 0, "in.toml:1: floating-point values are not supported" },
    { "a = -nan\n", 0, "in.toml:1: floating-point values are not supported" },
    { "a = 1979-05-27\n", 0, "in.toml:1: date-time values are not supported" },
    { "a = 07:32:00\n", 0, "in.toml:1: date-time values are not supported" },
    { "a = 0x1F\n", 0, "in.toml:1: only decimal integers are supported" },
    { "a = 0o7\n", 0, "in.toml:1: only decimal integers are supported" },
    { "a = 0b1\n", 0, "in.toml:1: only decimal integers are supported" },
    { "a = 012\n", 0, "in.toml:1: leading zeros are not allowed in integers" },
    { "a = -01\n", 0, "in.toml:1: leading zeros are not allowed in integers" },
    { "a = 9223372036854775808\n", 0, "in.toml:1: integer out of range" },
    { "a = -9223372036854775809\n", 0, "in.toml:1: integer out of range" },
    { "a = 99999999999999999999999\n", 0, "in.toml:1: integer out of range" },
    { "a = 1__0\n", 0, "in.toml:1: '_' in an integer must sit between two digits" },
    { "a = 10_\n", 0, "in.toml:1: '_' in an integer must sit between two digits" },
    { "a = 12abc\n", 0, "in.toml:1: invalid integer: unexpected 'a'" },
    { "a = +\n", 0, "in.toml:1: invalid value" },
    /* strings */
    { "a = \"abc\n", 0, "in.toml:1: unterminated string" },
    { "a = 'abc\n", 0, "in.toml:1: unterminated string" },
    { "a = \"abc", 0, "in.toml:1: unterminated string" },
    { "x = 1\na = \"\"\"abc\n\ndef\n", 0, "in.toml:2: unterminated multi-line string" },
    { "a = '''abc\n", 0, "in.toml:1: unterminated multi-line string" },
    { "a = \"\\q\"\n", 0, "in.toml:1: invalid escape sequence: backslash followed by 'q'" },
    { "a = \"\\x41\"\n", 0, "in.toml:1: invalid escape sequence: backslash followed by 'x'" },
    { "a = \"\\ \"\n", 0, "in.toml:1: invalid escape sequence: backslash followed by byte 0x20" },
    { "a = \"\\u12\"\n", 0, "in.toml:1: \\u escape needs 4 hexadecimal digits" },
    { "a = \"\\U0001F60\"\n", 0, "in.toml:1: \\U escape needs 8 hexadecimal digits" },
    { "a = \"\\uD800\"\n", 0, "in.toml:1: \\u escape is not a Unicode scalar value" },
    { "a = \"\\U00110000\"\n", 0, "in.toml:1: \\U escape is not a Unicode scalar value" },
    { "a = \"\\u0000\"\n", 0, "in.toml:1: \\u escape of NUL is not allowed" },
    { "a = \"x\x01y\"\n", 0, "in.toml:1: control character 0x01 in a string" },
    { "a = 'x\x7fy'\n", 0, "in.toml:1: control character 0x7f in a string" },
    { "a = \"\"\"x\x1b\"\"\"\n", 0, "in.toml:1: control character 0x1b in a string" },
    { "a = \"\"\"x\"\"\"\"\"\"\n", 0, "in.toml:1: too many quotes at the end of a multi-line string" },
    { "# bad \x02 comment\n", 0, "in.toml:1: control character 0x02 in a comment" },
    { "a = 1\rb = 2\n", 0, "in.toml:1: carriage return not followed by a line feed" },
    /* arrays and inline tables */
    { "a = [1, 2\n", 0, "in.toml:1: unterminated array" },
    { "a = [1 2]\n", 0, "in.toml:1: expected ',' or ']' in an array, found '2'" },
    { "a = [,]\n", 0, "in.toml:1: expected a value, found ','" },
    { "a = [1,,2]\n", 0, "in.toml:1: expected a value, found ','" },
    { "a = { x = 1,\n y = 2 }\n", 0, "in.toml:1: an inline table must be closed on the line where it starts" },
    { "a = {\n}\n", 0, "in.toml:1: an inline table must be closed on the line where it starts" },
    { "a = { x = 1, }\n", 0, "in.toml:1: trailing comma in an inline table" },
    { "a = { x = 1 y = 2 }\n", 0, "in.toml:1: expected ',' or '}' in an inline table, found 'y'" },
    { "a = { x = 1, x = 2 }\n", 0, "in.toml:1: duplicate key x (first defined at line 1)" },
    /* bytes */
    { "a = \"x\0\"\n", 9, "in.toml:1: NUL byte in input" },
    { "a = 1\nb = \"\xff\"\n", 0, "in.toml:2: invalid UTF-8" },
    { "a = \"\xc0\xaf\"\n", 0, "in.toml:1: invalid UTF-8" },
    { "a = \"\xed\xa0\x80\"\n", 0, "in.toml:1: invalid UTF-8" },
    { "a = \"\xf4\x90\x80\x80\"\n", 0, "in.toml:1: invalid UTF-8" },
    { "\xef\xbb\xbf"
      "a = 1\n",
      0, "in.toml:1: expected a key, found byte 0xef" },
};

static void test_refusals(void **state) {
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad_cases); i++) {
        const struct bad *b = &bad_cases[i];
        struct lz_toml_value *root = NULL;
        struct lz_error err = { 0 };
        int r = lz_toml_parse(b->in, b->len ? b->len : strlen(b->in), "in.toml", &root, &err);
        if (r >= 0) {
            print_error("case %zu: accepted, expected \"%s\"\n", i, b->msg);
            lz_toml_free(root);
            failures++;
        } else if (strcmp(err.msg, b->msg) != 0 || r != -EINVAL || err.code != -EINVAL) {
            print_error("case %zu: got \"%s\" (%d), expected \"%s\"\n", i, err.msg, r, b->msg);
            failures++;
        }
        assert_null(root);
    }
    assert_int_equal(failures, 0);
}

static void test_limits(void **state) {
    (void)state;
    struct lz_error err = { 0 };
    struct lz_toml_value *root = NULL;

    /* size */
    size_t big = LZ_TOML_MAX_INPUT + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, '\n', big);
    assert_int_equal(lz_toml_parse(buf, big, "big.toml", &root, &err), -EFBIG);
    assert_string_equal(err.msg, "big.toml: larger than 1048576 bytes");
    assert_int_equal(lz_toml_parse(buf, big - 1, "big.toml", &root, &err), 0);
    lz_toml_free(root);
    root = NULL;
    free(buf);

    /* nesting: a key segment plus 31 more array levels is the deepest */
    char s[256];
    size_t o = 0;
    o += (size_t)snprintf(s + o, sizeof s - o, "a = ");
    for (int i = 0; i < 32; i++)
        s[o++] = '[';
    for (int i = 0; i < 32; i++)
        s[o++] = ']';
    s[o++] = '\n';
    s[o] = '\0';
    assert_int_equal(lz_toml_parse(s, o, "d.toml", &root, &err), 0);
    lz_toml_free(root);
    root = NULL;
    o = (size_t)snprintf(s, sizeof s, "a = ");
    for (int i = 0; i < 33; i++)
        s[o++] = '[';
    for (int i = 0; i < 33; i++)
        s[o++] = ']';
    s[o] = '\0';
    assert_int_equal(lz_toml_parse(s, o, "d.toml", &root, &err), -EINVAL);
    assert_string_equal(err.msg, "d.toml:1: nesting depth exceeds 32");

    /* dotted keys count too */
    o = 0;
    for (int i = 0; i < 33; i++)
        o += (size_t)snprintf(s + o, sizeof s - o, "%sk", i ? "." : "");
    o += (size_t)snprintf(s + o, sizeof s - o, " = 1\n");
    assert_int_equal(lz_toml_parse(s, o, "d.toml", &root, &err), -EINVAL);
    assert_string_equal(err.msg, "d.toml:1: nesting depth exceeds 32");
    o = 0;
    o += (size_t)snprintf(s + o, sizeof s - o, "[");
    for (int i = 0; i < 20; i++)
        o += (size_t)snprintf(s + o, sizeof s - o, "%sk", i ? "." : "");
    o += (size_t)snprintf(s + o, sizeof s - o, "]\n");
    for (int i = 0; i < 13; i++)
        o += (size_t)snprintf(s + o, sizeof s - o, "%sk", i ? "." : "");
    o += (size_t)snprintf(s + o, sizeof s - o, " = 1\n");
    assert_int_equal(lz_toml_parse(s, o, "d.toml", &root, &err), -EINVAL);
    assert_string_equal(err.msg, "d.toml:2: nesting depth exceeds 32");

    /* element count */
    size_t cap = 8 * (LZ_TOML_MAX_ITEMS + 2);
    buf = malloc(cap);
    assert_non_null(buf);
    o = (size_t)snprintf(buf, cap, "a = [");
    for (int i = 0; i <= LZ_TOML_MAX_ITEMS; i++)
        o += (size_t)snprintf(buf + o, cap - o, "1,");
    o += (size_t)snprintf(buf + o, cap - o, "]\n");
    assert_int_equal(lz_toml_parse(buf, o, "n.toml", &root, &err), -EINVAL);
    assert_string_equal(err.msg, "n.toml:1: too many elements in one array (more than 4096)");
    free(buf);
}

static void test_error_without_err(void **state) {
    (void)state;
    struct lz_toml_value *root = NULL;
    assert_int_equal(lz_toml_parse("a = \n", 5, NULL, &root, NULL), -EINVAL);
    assert_null(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars_and_comments),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_inline_tables),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_array_of_tables),
        cmocka_unit_test(test_lookup_helpers),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_error_without_err),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
