/* Unit tests for the escalation keys (trust.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "record.h"
#include "trust.h"

#include <fcntl.h>

static int setup(void **state) {
    (void)state;
    return sodium_init() < 0 ? -1 : 0;
}

static void test_session_env_round_trip(void **state) {
    (void)state;
    struct lz_session_anchor *a = NULL;
    assert_int_equal(lz_session_anchor_new(&a), 0);
    char *id = lz_session_env_id(a), *key = lz_session_env_key(a);
    assert_int_equal(strncmp(id, "LAZARET_SESSION_ID=", 19), 0);
    assert_int_equal(strlen(id + 19), 32);
    assert_int_equal(strlen(key + 20), 128);
    uint8_t sid[16], sk[crypto_sign_SECRETKEYBYTES];
    assert_int_equal(lz_trust_hex_parse(id + 19, 32, sid, 16), 0);
    assert_memory_equal(sid, a->sid, 16);
    assert_int_equal(lz_trust_parse_secret(key + 20, sk), 0);
    assert_memory_equal(sk, a->sk, sizeof sk);
    /* A record signed with the parsed key verifies with the anchor's pk. */
    struct lz_record rec = { .kind = LZ_REC_CANCEL };
    uint8_t buf[LZ_RECORD_MAX];
    size_t len;
    assert_int_equal(lz_record_seal(sk, &rec, buf, sizeof buf, &len, NULL), 0);
    struct lz_record out;
    assert_int_equal(lz_record_open(a->pk, buf, len, LZ_REC_FROM_SANDBOX, &out, NULL), 0);
    lz_record_clear(&out);
    /* ... and not with another session's key (cross-session). */
    struct lz_session_anchor *b = NULL;
    assert_int_equal(lz_session_anchor_new(&b), 0);
    assert_int_equal(lz_record_open(b->pk, buf, len, LZ_REC_FROM_SANDBOX, &out, NULL), -EBADMSG);
    assert_memory_not_equal(a->sid, b->sid, 16);
    free(id);
    free(key);
    lz_session_anchor_free(a);
    lz_session_anchor_free(b);
}

static void test_parse_secret_refuses(void **state) {
    (void)state;
    struct lz_session_anchor *a = NULL;
    assert_int_equal(lz_session_anchor_new(&a), 0);
    char *key = lz_session_env_key(a);
    char *hex = key + 20;
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    assert_int_equal(lz_trust_parse_secret(hex, sk), 0); /* positive control */
    /* public half that the seed does not derive */
    char bad[129];
    memcpy(bad, hex, 129);
    bad[127] = bad[127] == '0' ? '1' : '0';
    assert_int_equal(lz_trust_parse_secret(bad, sk), -EINVAL);
    memcpy(bad, hex, 129);
    bad[0] = 'A'; /* uppercase is not canonical */
    assert_int_equal(lz_trust_parse_secret(bad, sk), -EINVAL);
    bad[0] = hex[0];
    bad[127] = '\0'; /* short */
    assert_int_equal(lz_trust_parse_secret(bad, sk), -EINVAL);
    assert_int_equal(lz_trust_parse_secret(NULL, sk), -EINVAL);
    free(key);
    lz_session_anchor_free(a);
}

static void test_publish(void **state) {
    (void)state;
    char dir[] = "/tmp/lztrust-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct lz_trust_anchor *t = NULL;
    assert_int_equal(lz_trust_anchor_new(&t), 0);
    assert_int_equal(lz_trust_publish(t, d, "hc.pub"), 0);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(lz_read_file_at(d, "hc.pub", 256, &buf, &len), 0);
    assert_int_equal(len, 65);
    assert_int_equal(buf[64], '\n');
    uint8_t pk[32];
    assert_int_equal(lz_trust_hex_parse(buf, len, pk, 32), 0);
    assert_memory_equal(pk, t->pk, 32);
    free(buf);
    lz_trust_anchor_free(t);
    unlinkat(d, "hc.pub", 0);
    close(d);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_env_round_trip),
        cmocka_unit_test(test_parse_secret_refuses),
        cmocka_unit_test(test_publish),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
