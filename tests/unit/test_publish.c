/* test_publish.c — published ports (publish.h) and their place in the
 * network policy's encoding (netpolicy.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "netpolicy.h"
#include "publish.h"

#include <string.h>

static void ok(const char *text, const char *want) {
    struct lz_publish p;
    struct lz_error err = { 0 };
    if (lz_publish_parse(text, &p, &err) < 0)
        fail_msg("%s: %s", text, err.msg);
    char got[LZ_PUBLISH_TEXT_MAX];
    lz_publish_format(&p, got, sizeof got);
    assert_string_equal(got, want);
}

static void bad(const char *text, const char *why) {
    struct lz_publish p = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_publish_parse(text, &p, &err), -EINVAL);
    if (!strstr(err.msg, why))
        fail_msg("%s: \"%s\" does not say \"%s\"", text, err.msg, why);
}

static void test_parse(void **state) {
    (void)state;
    ok("8080", "127.0.0.1:8080:8080");
    ok("3000:80", "127.0.0.1:3000:80");
    ok("127.0.0.1:5173", "127.0.0.1:5173:5173");
    ok("0.0.0.0:8000:8000", "0.0.0.0:8000:8000");
    ok("192.168.1.10:65535:1", "192.168.1.10:65535:1");
    bad("", "not valid");
    bad("0", "from 1 to 65535");
    bad("65536", "from 1 to 65535");
    bad("08080", "from 1 to 65535");
    bad("+80", "from 1 to 65535");
    bad("80:", "from 1 to 65535");
    bad(":80", "from 1 to 65535");
    bad("1:2:3", "need an address first");
    bad("1.2.3.4:1:2:3", "not valid");
    bad("1.2.3:80", "not an IPv4 address");
    bad("256.0.0.1:80", "not an IPv4 address");
    bad("01.2.3.4:80", "not an IPv4 address");
    bad("1.2.3.4", "not an IPv4 address"); /* an address without a port */
    bad("localhost:80", "from 1 to 65535");
    bad("80,81", "from 1 to 65535"); /* a ',' never passes: the coordinator's arguments join with it */
    bad("[::1]:80", "not valid");
    bad("123456789012345678901234567890123", "not valid");
}

static void test_check(void **state) {
    (void)state;
    struct lz_error err = { 0 };
    struct lz_publish p[3];
    assert_int_equal(lz_publish_parse("8080", &p[0], NULL), 0);
    assert_int_equal(lz_publish_parse("127.0.0.2:8080:81", &p[1], NULL), 0);
    assert_int_equal(lz_publish_check(p, 2, &err), 0); /* another address, another sandbox port */
    assert_int_equal(lz_publish_parse("0.0.0.0:8080:82", &p[2], NULL), 0);
    assert_int_equal(lz_publish_check(p, 3, &err), -EINVAL); /* 0.0.0.0 takes every address's 8080 */
    assert_non_null(strstr(err.msg, "the same host port"));
    assert_int_equal(lz_publish_parse("9000:8080", &p[1], NULL), 0);
    assert_int_equal(lz_publish_check(p, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "the same sandbox port"));
    struct lz_publish many[LZ_PUBLISH_MAX + 1];
    for (int i = 0; i <= LZ_PUBLISH_MAX; i++)
        many[i] = (struct lz_publish){ .host_addr = 0x7f000001u,
                                       .host_port = (uint16_t)(2000 + i),
                                       .port = (uint16_t)(3000 + i) };
    assert_int_equal(lz_publish_check(many, LZ_PUBLISH_MAX, &err), 0);
    assert_int_equal(lz_publish_check(many, LZ_PUBLISH_MAX + 1, &err), -EINVAL);
}

/* The published sandbox ports travel with the policy to the Supervisor:
 * they come back as sent, and the decoder refuses what is not canonical. */
static void test_policy_codec(void **state) {
    (void)state;
    struct lz_netrule rules[] = { { 0x0a000000u, 8, LZ_NET_DENY } };
    struct lz_netpolicy p = { .rules = rules, .n = 1, .publish = { 80, 5173, 8080 }, .n_publish = 3 };
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(lz_netpolicy_encode(&p, &buf, &len), 0);
    struct lz_netpolicy q;
    struct lz_error err = { 0 };
    assert_int_equal(lz_netpolicy_decode(buf, len, &q, &err), 0);
    assert_int_equal(q.n, 1);
    assert_int_equal(q.n_publish, 3);
    assert_int_equal(q.publish[0], 80);
    assert_int_equal(q.publish[2], 8080);
    lz_netpolicy_clear(&q);
    /* Out of order, zero, a count past the bound, a length that lies. */
    uint8_t *b = malloc(len);
    memcpy(b, buf, len);
    b[len - 1] = 79; /* 8080 -> 8015: 5173 then 8015 still ascending; make the last smaller */
    b[len - 2] = 0;
    assert_int_equal(lz_netpolicy_decode(b, len, &q, &err), -EBADMSG);
    memcpy(b, buf, len);
    b[len - 6] = 0;
    b[len - 5] = 0; /* the first port 0 */
    assert_int_equal(lz_netpolicy_decode(b, len, &q, &err), -EBADMSG);
    memcpy(b, buf, len);
    b[len - 8] = 0xff; /* the count */
    assert_int_equal(lz_netpolicy_decode(b, len, &q, &err), -EBADMSG);
    assert_int_equal(lz_netpolicy_decode(buf, len - 1, &q, &err), -EBADMSG);
    free(b);
    free(buf);
    /* No published port: two bytes of count. */
    struct lz_netpolicy none = { .rules = rules, .n = 1 };
    assert_int_equal(lz_netpolicy_encode(&none, &buf, &len), 0);
    assert_int_equal(lz_netpolicy_decode(buf, len, &q, &err), 0);
    assert_int_equal(q.n_publish, 0);
    lz_netpolicy_clear(&q);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_policy_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
