/* Unit tests for the host-name rules and the canonical host name
 * (hostrule.c): what a profile may write, and which names a rule set
 * allows, on which ports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hostrule.h"

static struct lz_hostrule rule(const char *text, unsigned flags) {
    struct lz_hostrule r;
    struct lz_error e = { 0 };
    int k = lz_hostrule_parse(text, flags, &r, &e);
    if (k != 0)
        fail_msg("rule \"%s\" refused: %s", text, e.msg);
    return r;
}

static void refused(const char *text, unsigned flags, const char *needle) {
    struct lz_hostrule r;
    memset(&r, 0x5a, sizeof r);
    struct lz_error e = { 0 };
    assert_int_equal(lz_hostrule_parse(text, flags, &r, &e), -EINVAL);
    if (!strstr(e.msg, needle))
        fail_msg("rule \"%s\": message \"%s\" lacks \"%s\"", text, e.msg, needle);
    /* Untouched on failure. */
    assert_int_equal(((uint8_t *)&r)[0], 0x5a);
}

static void canon_ok(const char *in, const char *want) {
    char out[LZ_HOSTNAME_MAX + 1];
    struct lz_error e = { 0 };
    if (lz_hostname_canon(in, strlen(in), out, &e) != 0)
        fail_msg("\"%s\" refused: %s", in, e.msg);
    assert_string_equal(out, want);
}

static void canon_bad(const char *in, size_t len, const char *needle) {
    char out[LZ_HOSTNAME_MAX + 1] = "untouched";
    struct lz_error e = { 0 };
    assert_int_equal(lz_hostname_canon(in, len, out, &e), -EINVAL);
    if (!strstr(e.msg, needle))
        fail_msg("message \"%s\" lacks \"%s\"", e.msg, needle);
    assert_string_equal(out, "untouched");
}

static void test_canon(void **state) {
    (void)state;
    canon_ok("api.anthropic.com", "api.anthropic.com");
    canon_ok("API.Anthropic.COM.", "api.anthropic.com");
    canon_ok("xn--bcher-kva.example", "xn--bcher-kva.example");
    canon_ok("a-b.c0", "a-b.c0");
    canon_ok("1.2.3.example", "1.2.3.example");
    canon_ok("localhost", "localhost");
    char l63[64];
    memset(l63, 'a', 63);
    l63[63] = '\0';
    canon_ok(l63, l63);
    canon_bad("", 0, "empty host name");
    canon_bad(".", 1, "empty host name");
    canon_bad("a..b", 4, "empty label");
    canon_bad(".a.b", 4, "empty label");
    canon_bad("a.b..", 5, "empty label"); /* only one trailing dot is the root */
    canon_bad("a_b.example", 11, "byte \"_\"");
    canon_bad("a\\.b.example", 12, "byte \"\\x5c\"");
    canon_bad("a\\065.example", 13, "byte \"\\x5c\"");
    canon_bad("a b.example", 11, "byte \" \"");
    canon_bad("a\0b.example", 11, "byte \"\\x00\"");
    canon_bad("*.example.com", 13, "byte \"*\"");
    canon_bad("b\xc3\xbc"
              "cher.example",
              13, "punycode");
    canon_bad("-a.example", 10, "starts or ends with '-'");
    canon_bad("a-.example", 10, "starts or ends with '-'");
    canon_bad("1.2.3.4", 7, "all digits");
    canon_bad("example.123", 11, "all digits");
    char l64[65];
    memset(l64, 'a', 64);
    canon_bad(l64, 64, "longer than 63");
    /* 253 is the longest name; 254 with a trailing dot is still 253. */
    char n[300];
    size_t o = 0;
    while (o + 50 <= 250) {
        memset(n + o, 'b', 49);
        n[o + 49] = '.';
        o += 50;
    }
    memset(n + o, 'c', 3);
    o += 3;
    assert_int_equal(o, 253);
    n[o] = '\0';
    canon_ok(n, n);
    n[o] = '.';
    n[o + 1] = '\0';
    char out[LZ_HOSTNAME_MAX + 1];
    assert_int_equal(lz_hostname_canon(n, o + 1, out, NULL), 0);
    n[o] = 'd';
    canon_bad(n, o + 1, "longer than 253");
}

static void test_parse(void **state) {
    (void)state;
    struct lz_hostrule r = rule("API.anthropic.com.", 0);
    assert_string_equal(r.name, "api.anthropic.com");
    assert_false(r.wildcard);
    assert_int_equal(r.n_ports, 0);
    r = rule("*.githubusercontent.com:443", 0);
    assert_true(r.wildcard);
    assert_string_equal(r.name, "githubusercontent.com");
    assert_int_equal(r.n_ports, 1);
    assert_int_equal(r.ports[0], 443);
    r = rule("h.example:8443,443,8443,1,65535", 0);
    assert_int_equal(r.n_ports, 4);
    assert_int_equal(r.ports[0], 1);
    assert_int_equal(r.ports[1], 443);
    assert_int_equal(r.ports[2], 8443);
    assert_int_equal(r.ports[3], 65535);
    char txt[LZ_HOSTRULE_TEXT_MAX];
    assert_int_equal(lz_hostrule_format(&r, txt, sizeof txt), 0);
    assert_string_equal(txt, "h.example:1,443,8443,65535");
    r = rule("*.A.example.", 0);
    assert_int_equal(lz_hostrule_format(&r, txt, sizeof txt), 0);
    assert_string_equal(txt, "*.a.example");
    assert_int_equal(lz_hostrule_format(&r, txt, 5), -ENOSPC);

    refused("", 0, "empty host rule");
    refused("*", 0, "every name");
    refused("*.", 0, "every name");
    refused("*.com", 0, "whole top-level domain");
    refused("*.test.", 0, "whole top-level domain");
    refused("*example.com", 0, "whole first label");
    refused("a*.example.com", 0, "whole first label");
    refused("a.*.example.com", 0, "whole first label");
    refused("*.*.example.com", 0, "whole first label");
    refused("**.example.com", 0, "whole first label");
    refused("example.*", 0, "whole first label");
    refused("a..example.com", 0, "empty label");
    refused("a_b.example.com", 0, "byte \"_\"");
    refused("example.com:", 0, "bad port list");
    refused("example.com:0", 0, "bad port list");
    refused("example.com:65536", 0, "bad port list");
    refused("example.com:100000", 0, "bad port list");
    refused("example.com:443,", 0, "bad port list");
    refused("example.com:,443", 0, "bad port list");
    refused("example.com:443-445", 0, "bad port list");
    refused("example.com:-1", 0, "bad port list");
    refused("example.com:443:80", 0, "bad port list");
    refused("example.com:1,2,3,4,5,6,7,8,9", 0, "more than 8 ports");
    refused("evil.example:25", LZ_HOSTRULE_NO_PORTS, "deny rule");
    refused("10.0.0.1", 0, "allow_egress");
    refused(":443", 0, "empty host rule");
    char big[LZ_HOSTRULE_TEXT_MAX + 10];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    refused(big, 0, "longer than 512");
}

static void test_match_suffix_confusion(void **state) {
    (void)state;
    struct lz_hostrule w = rule("*.allowed.test", 0), x = rule("allowed.test", 0);
    /* The wildcard: strictly below, at any depth. */
    assert_true(lz_hostrule_match(&w, "a.allowed.test"));
    assert_true(lz_hostrule_match(&w, "a.b.allowed.test"));
    assert_false(lz_hostrule_match(&w, "allowed.test"));
    assert_false(lz_hostrule_match(&w, "xallowed.test"));
    assert_false(lz_hostrule_match(&w, "a.xallowed.test"));
    assert_false(lz_hostrule_match(&w, "allowed.test.evil.test"));
    assert_false(lz_hostrule_match(&w, "a.allowed.test.evil.test"));
    assert_false(lz_hostrule_match(&w, "allowed-test"));
    assert_false(lz_hostrule_match(&w, ".allowed.test")); /* not canonical, never matched */
    assert_false(lz_hostrule_match(&w, "test"));
    assert_false(lz_hostrule_match(&w, ""));
    /* The exact rule: only itself. */
    assert_true(lz_hostrule_match(&x, "allowed.test"));
    assert_false(lz_hostrule_match(&x, "a.allowed.test"));
    assert_false(lz_hostrule_match(&x, "xallowed.test"));
    assert_false(lz_hostrule_match(&x, "allowed.test.evil.test"));
    assert_false(lz_hostrule_match(&x, "allowed.tes"));
    /* Case and trailing dot go through the canonical form only. */
    char c[LZ_HOSTNAME_MAX + 1];
    assert_int_equal(lz_hostname_canon("ALLOWED.Test.", 13, c, NULL), 0);
    assert_true(lz_hostrule_match(&x, c));
    assert_int_equal(lz_hostname_canon("allowed\\.test", 13, c, NULL), -EINVAL);
}

static void test_decide(void **state) {
    (void)state;
    struct lz_hostrule allow[] = { rule("*.example.com:443", 0), rule("api.example.com:8443", 0),
                                   rule("files.example.com", 0), rule("other.test:80", 0) };
    struct lz_hostrule deny[] = { rule("evil.example.com", LZ_HOSTRULE_NO_PORTS),
                                  rule("*.bad.example.com", LZ_HOSTRULE_NO_PORTS) };
    struct lz_hostports p;
    /* Union of the matching allow rules' ports. */
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "api.example.com", &p), LZ_HOST_ALLOWED);
    assert_false(p.all);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.ports[0], 443);
    assert_int_equal(p.ports[1], 8443);
    assert_true(lz_hostports_has(&p, 8443));
    assert_false(lz_hostports_has(&p, 80));
    /* A rule without ports: every port. */
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "files.example.com", &p), LZ_HOST_ALLOWED);
    assert_true(p.all);
    assert_true(lz_hostports_has(&p, 22));
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "www.example.com", &p), LZ_HOST_ALLOWED);
    assert_int_equal(p.n, 1);
    /* Deny wins over allow, exact and wildcard; positive control: the same
     * names without the deny rules are allowed. */
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "evil.example.com", &p), LZ_HOST_DENIED);
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "x.bad.example.com", &p), LZ_HOST_DENIED);
    assert_int_equal(lz_hostrule_decide(allow, 4, NULL, 0, "evil.example.com", &p), LZ_HOST_ALLOWED);
    assert_int_equal(lz_hostrule_decide(allow, 4, NULL, 0, "x.bad.example.com", &p), LZ_HOST_ALLOWED);
    /* The deny wildcard does not cover its own suffix. */
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "bad.example.com", &p), LZ_HOST_ALLOWED);
    /* Unlisted. */
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "example.com", &p), LZ_HOST_UNLISTED);
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "example.com.evil.test", &p), LZ_HOST_UNLISTED);
    assert_int_equal(lz_hostrule_decide(allow, 4, deny, 2, "xexample.com", &p), LZ_HOST_UNLISTED);
    assert_int_equal(lz_hostrule_decide(NULL, 0, NULL, 0, "example.com", &p), LZ_HOST_UNLISTED);
    /* More distinct ports than a decision carries: refused by the check. */
    struct lz_hostrule many[9];
    for (int i = 0; i < 9; i++) {
        char t[64];
        snprintf(t, sizeof t, "*.example.com:%d,%d,%d,%d,%d,%d,%d,%d", 8 * i + 1, 8 * i + 2, 8 * i + 3, 8 * i + 4,
                 8 * i + 5, 8 * i + 6, 8 * i + 7, 8 * i + 8);
        many[i] = rule(t, 0);
    }
    struct lz_error e = { 0 };
    assert_int_equal(lz_hostrule_check(many, 8, &e), 0);
    assert_int_equal(lz_hostrule_check(many, 9, &e), -E2BIG);
    assert_non_null(strstr(e.msg, "more than 64"));
    assert_int_equal(lz_hostrule_decide(many, 9, NULL, 0, "a.example.com", &p), -E2BIG);
    assert_int_equal(lz_hostrule_decide(many, 8, NULL, 0, "a.example.com", &p), LZ_HOST_ALLOWED);
    assert_int_equal(p.n, 64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canon),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_match_suffix_confusion),
        cmocka_unit_test(test_decide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
