/* test_domain_id.c — Domain ID v1 and Configuration Fingerprint v1 against
 * vectors computed independently (python3 hashlib, following the encoding
 * written in domain_id.h):
 *
 *   import hashlib, struct
 *   S = lambda b: struct.pack('>I', len(b)) + b
 *   hashlib.sha256(b'lazaret-domain-id-v1' + S(b'default') + S(b'/home/u/proj')).hexdigest()
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "domain_id.h"

static void check_id(const char *profile, const char *ws, const char *hex) {
    uint8_t id[32];
    char got[65], hash[13];
    assert_int_equal(lz_domain_id_v1(profile, ws, id), 0);
    lz_hex(id, 32, got);
    assert_string_equal(got, hex);
    lz_domain_hash(id, hash);
    assert_int_equal(strlen(hash), 12);
    assert_memory_equal(hash, hex, 12);
}

static void test_domain_id_vectors(void **state) {
    (void)state;
    check_id("default", "/home/u/proj", "29a3b3fb3f120f285a035ccd089137f03f9eaa95b0c513d0014aebaf86cd943f");
    check_id("claude",
             "/tmp/\xc3\xbcn\xc3\xaf c\xc3\xb4"
             "de",
             "87253d93b431ac92ad412250c9acd3e23303fafa3cc2b32c953725c552aace96");
    check_id("ab", "/", "19bea1029b757efb1846dd657823bd6c191c06f97c5380c4fcf63186b45829d5");
    check_id("vector", "/usr", "d184cfb04f49bd36ae04439b849d476459b7a979c837dfbe2939b381fe396a8a");
}

static void test_domain_id_framing(void **state) {
    (void)state;
    /* Length framing keeps ("ab", "/c") and ("a", "b/c")-style splits apart. */
    uint8_t a[32], b[32];
    assert_int_equal(lz_domain_id_v1("ab", "/x", a), 0);
    assert_int_equal(lz_domain_id_v1("a", "b/x", b), 0);
    assert_memory_not_equal(a, b, 32);
    assert_int_equal(lz_domain_id_v1("default", "/home/u/proj", a), 0);
    assert_int_equal(lz_domain_id_v1("default", "/home/u/proj/", b), 0);
    assert_memory_not_equal(a, b, 32);
}

/* lz_config has mutable string members; the fingerprint only reads them,
 * so pointing them at literals is fine here. */
#define W(x) ((char *)(x))

/* The same inputs as tests/unit/data/config/vector.toml with workspace /etc. */
static char *s_dallow[] = { W("0.0.0.0/0") };
static char *s_ddeny[] = { W("192.168.0.0/16"), W("10.0.0.0/8"), W("10.0.0.0/8") };
static char *s_argv[] = { W("/usr/bin/true"), W("x") };
static char *s_pdirs[] = { W("/usr/local"), W("/root") };
static char *s_allow[] = { W("198.51.100.0/24") };

static void vector_config(struct lz_config *c, struct lz_auto_approve *rule, struct lz_env_entry env[2],
                          struct lz_volume *vol) {
    memset(c, 0, sizeof *c);
    assert_int_equal(lz_domain_id_v1("vector", "/etc", c->domain_id), 0);
    c->data_root = W("/nonexistent-lazaret-test/data");
    c->default_allow = s_dallow;
    c->n_default_allow = 1;
    c->default_deny = s_ddeny;
    c->n_default_deny = 3;
    c->escalation_enabled = false;
    c->escalation_socket_dir = W("/nonexistent-lazaret-test/sock");
    *rule = (struct lz_auto_approve){ .argv = s_argv, .argc = 2, .allow_extra_args = true };
    c->auto_approve = rule;
    c->n_auto_approve = 1;
    c->profile.name = W("vector");
    c->profile.image = W("example.org/img:1");
    c->profile.persistent_dirs = s_pdirs;
    c->profile.n_persistent_dirs = 2;
    c->profile.allow_egress = s_allow;
    c->profile.n_allow_egress = 1;
    /* deliberately unsorted: the encoding sorts by name */
    env[0] = (struct lz_env_entry){ .name = W("B"), .reference = W("env:LZ_TEST_VEC"), .value = W("host-secret") };
    env[1] = (struct lz_env_entry){ .name = W("A"), .value = W("lit") };
    c->profile.env = env;
    c->profile.n_env = 2;
    *vol = (struct lz_volume){ .host = W("/nonexistent-lazaret-test/data/vector/v"),
                               .container = W("/data"),
                               .mode = W("z") };
    c->profile.volumes = vol;
    c->profile.n_volumes = 1;
    c->profile.ignored_state = false;
    c->profile.host_ca_certificates = true; /* the default: the vector predates the key */
}

static void fp_hex(const struct lz_config *c, char out[65]) {
    uint8_t fp[32];
    assert_int_equal(lz_config_fingerprint_v1(c, fp), 0);
    lz_hex(fp, 32, out);
}

static void test_fingerprint_vector(void **state) {
    (void)state;
    struct lz_config c;
    struct lz_auto_approve rule;
    struct lz_env_entry env[2];
    struct lz_volume vol;
    char hex[65], hex2[65];
    vector_config(&c, &rule, env, &vol);
    fp_hex(&c, hex);
    assert_string_equal(hex, "25e674fd58298fe888a3a67f7c8c463ed60e7a46410b87e110f15d6161ffed82");

    /* the host value behind env: does not count */
    env[0].value = W("another-secret");
    fp_hex(&c, hex2);
    assert_string_equal(hex, hex2);
    env[0].value = NULL;
    fp_hex(&c, hex2);
    assert_string_equal(hex, hex2);
    /* "z" and "rw" are the same mount */
    vol.mode = W("rw");
    fp_hex(&c, hex2);
    assert_string_equal(hex, hex2);
}

/* Each mutation must move the fingerprint away from the vector's. */
static void test_fingerprint_sensitivity(void **state) {
    (void)state;
    static char *alt_list[] = { W("10.0.0.0/8") };
    static char *alt_argv[] = { W("/usr/bin/true"), W("y") };
    static char *alt_pdirs[] = { W("/usr/local") };
    char base[65], hex[65];
    struct lz_config c;
    struct lz_auto_approve rule;
    struct lz_env_entry env[2];
    struct lz_volume vol;
    vector_config(&c, &rule, env, &vol);
    fp_hex(&c, base);

    for (int m = 0; m < 23; m++) {
        vector_config(&c, &rule, env, &vol);
        switch (m) {
        case 0: c.domain_id[31] ^= 1; break;
        case 1: c.data_root = W("/nonexistent-lazaret-test/data2"); break;
        case 2: c.n_default_allow = 0; break;
        case 3:
            c.default_deny = alt_list;
            c.n_default_deny = 1;
            break;
        case 4: c.escalation_enabled = true; break;
        case 5: c.escalation_socket_dir = NULL; break;
        case 6: rule.argv = alt_argv; break;
        case 7: rule.allow_extra_args = false; break;
        case 8: c.n_auto_approve = 0; break;
        case 9: c.profile.name = W("vector2"); break;
        case 10: c.profile.image = W("example.org/img:2"); break;
        case 11:
            c.profile.persistent_dirs = alt_pdirs;
            c.profile.n_persistent_dirs = 1;
            break;
        case 12: c.profile.n_allow_egress = 0; break;
        case 13:
            c.profile.deny_egress = alt_list;
            c.profile.n_deny_egress = 1;
            break;
        case 14: env[1].value = W("lit2"); break;
        case 15: env[0].reference = W("env:LZ_TEST_OTHER"); break;
        case 16: env[1].name = W("C"); break;
        case 17: c.profile.n_env = 1; break;
        case 18: vol.read_only = true; break;
        case 19: vol.container = W("/data2"); break;
        case 20: vol.host = W("/nonexistent-lazaret-test/data/vector/w"); break;
        case 21: c.profile.ignored_state = true; break;
        case 22: c.profile.host_ca_certificates = false; break;
        default: break;
        }
        fp_hex(&c, hex);
        if (strcmp(hex, base) == 0)
            print_error("mutation %d did not change the fingerprint\n", m);
        assert_string_not_equal(hex, base);
    }

    /* order of set-like lists does not matter */
    static char *reordered[] = { W("10.0.0.0/8"), W("192.168.0.0/16") };
    static char *pdirs_sorted[] = { W("/root"), W("/usr/local") };
    vector_config(&c, &rule, env, &vol);
    c.default_deny = reordered;
    c.n_default_deny = 2;
    c.profile.persistent_dirs = pdirs_sorted;
    fp_hex(&c, hex);
    assert_string_equal(hex, base);
}

static void test_fingerprint_framing(void **state) {
    (void)state;
    /* ["ab"] vs ["a", "b"] as argv: count + length framing tells them apart */
    static char *one[] = { W("ab") }, *two[] = { W("a"), W("b") };
    char h1[65], h2[65];
    struct lz_config c;
    struct lz_auto_approve rule;
    struct lz_env_entry env[2];
    struct lz_volume vol;
    vector_config(&c, &rule, env, &vol);
    rule.argv = one;
    rule.argc = 1;
    fp_hex(&c, h1);
    rule.argv = two;
    rule.argc = 2;
    fp_hex(&c, h2);
    assert_string_not_equal(h1, h2);
    /* a literal equal to a reference's text is still distinguished */
    vector_config(&c, &rule, env, &vol);
    env[0].reference = NULL;
    env[0].value = W("env:LZ_TEST_VEC");
    fp_hex(&c, h1);
    vector_config(&c, &rule, env, &vol);
    fp_hex(&c, h2);
    assert_string_not_equal(h1, h2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_id_vectors),   cmocka_unit_test(test_domain_id_framing),
        cmocka_unit_test(test_fingerprint_vector),  cmocka_unit_test(test_fingerprint_sensitivity),
        cmocka_unit_test(test_fingerprint_framing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
