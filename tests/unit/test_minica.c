/* test_minica.c — the Domain's CA (minica.h): its leaves verify with
 * OpenSSL's own verifier and in a real TLS handshake; its name
 * constraints are in the certificate and enforced (a leaf the CA refuses
 * to make, signed here with its key, is refused by the verifier); names
 * it was not made for are refused, and so are lists of names that are not
 * exact canonical hosts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "minica.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define HOST "api.anthropic.com"
#define HOST2 "api.openai.com"
#define DAY (24 * 60 * 60)

static const char *const NAMES[] = { HOST, HOST2 };

static struct lz_minica *new_ca(void) {
    struct lz_minica *ca = NULL;
    struct lz_error err = { 0 };
    int r = lz_minica_new(NAMES, 2, "0123456789ab", &ca, &err);
    if (r < 0)
        fail_msg("lz_minica_new: %s", err.msg);
    assert_non_null(ca);
    return ca;
}

/* OpenSSL's verifier with only the CA trusted, strict, at time t, for
 * TLS server use; host: also the verifier's host check. Returns the
 * verification error (X509_V_OK when it verifies). */
static int verify_at(X509 *ca_cert, X509 *leaf, const char *host, time_t t) {
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_non_null(store);
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_add_cert(store, ca_cert), 1);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_X509_STRICT);
    X509_VERIFY_PARAM_set_time(p, t);
    assert_int_equal(X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER), 1);
    if (host)
        assert_int_equal(X509_VERIFY_PARAM_set1_host(p, host, 0), 1);
    int ok = X509_verify_cert(ctx);
    int e = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    ERR_clear_error();
    assert_true(ok == 1 ? e == X509_V_OK : e != X509_V_OK);
    return e;
}
static int verify(X509 *ca_cert, X509 *leaf, const char *host) { return verify_at(ca_cert, leaf, host, time(NULL)); }

static struct lz_minica *ca_ok; /* made once: the tests below only read it or ask for leaves */

static int setup(void **state) {
    ca_ok = new_ca();
    return 0;
}
static int teardown(void **state) {
    lz_minica_free(ca_ok);
    return 0;
}

static void test_leaf_verifies(void **state) {
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_leaf(ca_ok, HOST, &key, &leaf, &err), 0);
    X509 *ca = lz_minica_cert(ca_ok);
    assert_int_equal(verify(ca, leaf, NULL), X509_V_OK);
    assert_int_equal(verify(ca, leaf, HOST), X509_V_OK);
    assert_int_equal(X509_check_host(leaf, HOST, 0, 0, NULL), 1);
    /* The host check is really made: another name of the CA is refused. */
    assert_int_equal(X509_check_host(leaf, HOST2, 0, 0, NULL), 0);
    assert_int_equal(verify(ca, leaf, HOST2), X509_V_ERR_HOSTNAME_MISMATCH);
    /* The key is the certificate's. */
    assert_int_equal(X509_check_private_key(leaf, key), 1);
    /* Validity: not yet valid two hours ago, expired in eight days. */
    assert_int_equal(verify_at(ca, leaf, HOST, time(NULL) - 2 * 60 * 60), X509_V_ERR_CERT_NOT_YET_VALID);
    assert_int_equal(verify_at(ca, leaf, HOST, time(NULL) + 8 * DAY), X509_V_ERR_CERT_HAS_EXPIRED);
    /* A CA that is not this one does not verify it. */
    struct lz_minica *other = new_ca();
    assert_int_equal(verify(lz_minica_cert(other), leaf, HOST), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    lz_minica_free(other);
    assert_int_equal(ERR_peek_error(), 0);
    EVP_PKEY_free(key);
    X509_free(leaf);
}

#ifdef LZ_TEST_HOOKS
/* A leaf signed with the CA's key by hand: what a leaked key could make. */
static X509 *forge(struct lz_minica *ca, const char *cn, const char *san) {
    X509 *x = X509_new();
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(x);
    assert_non_null(k);
    time_t now = time(NULL);
    assert_true(X509_set_version(x, X509_VERSION_3));
    assert_true(ASN1_INTEGER_set(X509_get_serialNumber(x), 4242));
    assert_non_null(X509_time_adj_ex(X509_getm_notBefore(x), 0, -600, &now));
    assert_non_null(X509_time_adj_ex(X509_getm_notAfter(x), 1, 0, &now));
    assert_true(
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0));
    assert_true(X509_set_issuer_name(x, X509_get_subject_name(lz_minica_cert(ca))));
    assert_true(X509_set_pubkey(x, k));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, lz_minica_cert(ca), x, NULL, NULL, 0);
    const char *ext[][2] = {
        { "basicConstraints", "critical,CA:FALSE" },
        { "keyUsage", "critical,digitalSignature" },
        { "extendedKeyUsage", "serverAuth" },
        { "authorityKeyIdentifier", "keyid:always" },
        { "subjectAltName", san },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ext); i++) {
        if (!ext[i][1])
            continue;
        X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, ext[i][0], ext[i][1]);
        assert_non_null(e);
        assert_true(X509_add_ext(x, e, -1));
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(x, lz_minica_test_key(ca), EVP_sha256()) > 0);
    EVP_PKEY_free(k);
    return x;
}

#endif

/* Needs the CA's key (lz_minica_test_key): test builds only. */
static void test_name_constraints_enforced(void **state) {
#ifndef LZ_TEST_HOOKS
    skip();
#else
    X509 *ca = lz_minica_cert(ca_ok);
    /* The control: the same forging path for a permitted name verifies,
     * so what fails below fails for its name only. */
    X509 *x = forge(ca_ok, HOST, "DNS:" HOST);
    assert_int_equal(verify(ca, x, HOST), X509_V_OK);
    X509_free(x);
    /* A name outside the constraints: refused by the verifier itself,
     * with or without a host to check. */
    x = forge(ca_ok, "evil.example.com", "DNS:evil.example.com");
    assert_int_equal(verify(ca, x, NULL), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify(ca, x, "evil.example.com"), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(x);
    /* A permitted SAN next to a forbidden one does not help. */
    x = forge(ca_ok, HOST, "DNS:" HOST ",DNS:evil.example.com");
    assert_int_equal(verify(ca, x, HOST), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(x);
    /* A name that merely ends like a permitted one. */
    x = forge(ca_ok, "xapi.anthropic.com", "DNS:xapi.anthropic.com");
    assert_int_equal(verify(ca, x, NULL), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(x);
    /* Only a common name, no SAN: OpenSSL checks a host-like CN against
     * the DNS constraints too. */
    x = forge(ca_ok, "evil.example.com", NULL);
    assert_int_equal(verify(ca, x, NULL), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(x);
    /* Address literals: every address is excluded. */
    x = forge(ca_ok, HOST, "DNS:" HOST ",IP:192.0.2.1");
    assert_int_equal(verify(ca, x, NULL), X509_V_ERR_EXCLUDED_VIOLATION);
    X509_free(x);
    x = forge(ca_ok, HOST, "DNS:" HOST ",IP:2001:db8::1");
    assert_int_equal(verify(ca, x, NULL), X509_V_ERR_EXCLUDED_VIOLATION);
    X509_free(x);
    /* RFC 5280 §4.2.1.10: a name below a permitted one is permitted by
     * the constraint (minica.h); lz_minica_leaf refuses to make it
     * (test_leaf_refuses_other_names). */
    x = forge(ca_ok, "x." HOST, "DNS:x." HOST);
    assert_int_equal(verify(ca, x, "x." HOST), X509_V_OK);
    X509_free(x);
#endif
}

static void test_leaf_refuses_other_names(void **state) {
    const char *bad[] = {
        "evil.example.com", "x." HOST, "API.anthropic.com", HOST ".",           "anthropic.com",
        "*.anthropic.com",  "",        "192.0.2.1",         "api.anthropic.co",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        EVP_PKEY *key = (EVP_PKEY *)0x1;
        X509 *leaf = (X509 *)0x1;
        struct lz_error err = { 0 };
        assert_int_equal(lz_minica_leaf(ca_ok, bad[i], &key, &leaf, &err), -EPERM);
        assert_int_equal(err.code, -EPERM);
        assert_non_null(strstr(err.msg, "signs no certificate"));
        assert_ptr_equal(key, (EVP_PKEY *)0x1);
        assert_ptr_equal(leaf, (X509 *)0x1);
    }
    struct lz_error err = { 0 };
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    assert_int_equal(lz_minica_leaf(ca_ok, "evil.example.com", &key, &leaf, &err), -EPERM);
    assert_non_null(strstr(err.msg, "\"evil.example.com\""));
    /* A client's bytes are not quoted into the message. */
    assert_int_equal(lz_minica_leaf(ca_ok, "evil\n\x1b[2J", &key, &leaf, &err), -EPERM);
    assert_null(strchr(err.msg, '\n'));
    assert_null(strchr(err.msg, '\x1b'));
    assert_int_equal(lz_minica_leaf(ca_ok, NULL, &key, &leaf, &err), -EPERM);
}

static void expect_refused(const char *const *names, size_t n, const char *label, const char *why) {
    struct lz_minica *ca = (struct lz_minica *)0x1;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_new(names, n, label, &ca, &err), -EINVAL);
    assert_int_equal(err.code, -EINVAL);
    if (!strstr(err.msg, why))
        fail_msg("\"%s\" (%zu names): expected \"%s\" in \"%s\"", n ? names[0] : "", n, why, err.msg);
    assert_ptr_equal(ca, (struct lz_minica *)0x1);
}

static void test_new_refuses(void **state) {
    expect_refused(NAMES, 0, "x", "at least one");
    expect_refused(NULL, 0, "x", "at least one");
    const char *many[LZ_MINICA_NAMES_MAX + 1];
    char buf[LZ_MINICA_NAMES_MAX + 1][32];
    for (size_t i = 0; i < LZ_ARRAY_SIZE(many); i++) {
        snprintf(buf[i], sizeof buf[i], "h%zu.example.com", i);
        many[i] = buf[i];
    }
    expect_refused(many, LZ_MINICA_NAMES_MAX + 1, "x", "at most 64");
    struct {
        const char *name, *why;
    } bad[] = {
        { "*.example.com", "wildcard" },
        { "*", "wildcard" },
        { "a*.example.com", "wildcard" },
        { "192.0.2.1", "IP address" },
        { "::1", "IP address" },
        { "[::1]", "IP address" },
        { "2001:db8::1", "IP address" },
        { "10.1", "last label is all digits" },
        { "Example.com", "canonical form (write \"example.com\")" },
        { "example.com.", "canonical form (write \"example.com\")" },
        { "a..example.com", "empty label" },
        { "-a.example.com", "starts or ends with '-'" },
        { "a_b.example.com", "byte" },
        { "a b.example.com", "byte" },
        { "", "empty host name" },
        { "caf\xc3\xa9.example", "punycode" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        const char *one[] = { HOST, bad[i].name };
        expect_refused(one, 2, "x", bad[i].why);
    }
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *lng[] = { longname };
    expect_refused(lng, 1, "x", "longer than 253");
    const char *nul[] = { HOST, NULL };
    expect_refused(nul, 2, "x", "missing");
    const char *dup[] = { HOST, HOST2, HOST };
    expect_refused(dup, 3, "x", "listed twice");
    expect_refused(NAMES, 2, "", "label must be");
    expect_refused(NAMES, 2, NULL, "label must be");
    expect_refused(NAMES, 2, "012345678901234567890123456789012", "label must be");
    expect_refused(NAMES, 2, "a b", "label has a byte");
    expect_refused(NAMES, 2, "a/b", "label has a byte");
    /* The largest list is taken. */
    struct lz_minica *ca = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_new(many, LZ_MINICA_NAMES_MAX, "x", &ca, &err), 0);
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    assert_int_equal(lz_minica_leaf(ca, many[LZ_MINICA_NAMES_MAX - 1], &key, &leaf, &err), 0);
    assert_int_equal(verify(lz_minica_cert(ca), leaf, many[LZ_MINICA_NAMES_MAX - 1]), X509_V_OK);
    EVP_PKEY_free(key);
    X509_free(leaf);
    lz_minica_free(ca);
    lz_minica_free(NULL);
}

static void test_pem_round_trip(void **state) {
    char *pem = NULL;
    assert_int_equal(lz_minica_cert_pem(ca_ok, &pem), 0);
    assert_true(strncmp(pem, "-----BEGIN CERTIFICATE-----\n", 28) == 0);
    assert_non_null(strstr(pem, "-----END CERTIFICATE-----\n"));
    assert_null(strstr(pem, "PRIVATE"));
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *back = PEM_read_bio_X509(b, NULL, NULL, NULL);
    assert_non_null(back);
    unsigned char *d1 = NULL, *d2 = NULL;
    int n1 = i2d_X509(lz_minica_cert(ca_ok), &d1), n2 = i2d_X509(back, &d2);
    assert_true(n1 > 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(d1, d2, (size_t)n1);
    OPENSSL_free(d1);
    OPENSSL_free(d2);
    X509_free(back);
    BIO_free(b);
    free(pem);
}

static void test_two_cas_differ(void **state) {
    struct lz_minica *a = new_ca(), *b = new_ca();
    X509 *ca = lz_minica_cert(a), *cb = lz_minica_cert(b);
    assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(ca), X509_get0_pubkey(cb)), 1);
#ifdef LZ_TEST_HOOKS
    assert_int_not_equal(EVP_PKEY_eq(lz_minica_test_key(a), lz_minica_test_key(b)), 1);
#endif
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(ca), X509_get0_serialNumber(cb)), 0);
    /* 128 bits, positive. */
    for (int i = 0; i < 2; i++) {
        BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(i ? cb : ca), NULL);
        assert_non_null(bn);
        assert_int_equal(BN_num_bits(bn), 128);
        assert_false(BN_is_negative(bn));
        BN_free(bn);
    }
    /* The key is P-256, and signs the certificate. */
    char group[32];
    assert_int_equal(EVP_PKEY_get_group_name(X509_get0_pubkey(ca), group, sizeof group, NULL), 1);
    assert_string_equal(group, "prime256v1");
    assert_int_equal(X509_verify(ca, X509_get0_pubkey(ca)), 1);
    assert_int_equal(X509_get_signature_nid(ca), NID_ecdsa_with_SHA256);
    lz_minica_free(a);
    lz_minica_free(b);
}

/* The coordinator makes the CA and hands it to the gate: what the gate
 * imports signs leaves the original's certificate verifies, and a key
 * that is not the certificate's, or bytes cut short, are refused. */
static void test_export_import(void **state) {
    (void)state;
    struct lz_minica *a = new_ca(), *b = new_ca(), *imp = NULL;
    uint8_t *key = NULL, *cert = NULL, *key2 = NULL, *cert2 = NULL;
    size_t kl = 0, cl = 0, kl2 = 0, cl2 = 0;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_export(a, &key, &kl, &cert, &cl, &err), 0);
    assert_int_equal(lz_minica_export(b, &key2, &kl2, &cert2, &cl2, &err), 0);
    const char *names[] = { HOST, HOST2 };
    assert_int_equal(lz_minica_import(names, 2, key, kl, cert, cl, &imp, &err), 0);
    EVP_PKEY *lk = NULL;
    X509 *leaf = NULL;
    assert_int_equal(lz_minica_leaf(imp, HOST, &lk, &leaf, &err), 0);
    assert_int_equal(verify(lz_minica_cert(a), leaf, HOST), X509_V_OK);
    assert_int_equal(lz_minica_leaf(imp, "other.example", &lk, &leaf, &err), -EPERM);
    EVP_PKEY_free(lk);
    X509_free(leaf);
    lz_minica_free(imp);
    imp = NULL;
    /* b's key with a's certificate */
    assert_int_equal(lz_minica_import(names, 2, key2, kl2, cert, cl, &imp, &err), -EIO);
    assert_non_null(strstr(err.msg, "does not match"));
    assert_int_equal(lz_minica_import(names, 2, key, kl - 1, cert, cl, &imp, &err), -EIO);
    assert_int_equal(lz_minica_import(names, 2, key, kl, cert, cl - 3, &imp, &err), -EIO);
    const char *bad[] = { "Bad.Example" };
    assert_int_equal(lz_minica_import(bad, 1, key, kl, cert, cl, &imp, &err), -EINVAL);
    assert_null(imp);
    assert_int_equal(ERR_peek_error(), 0);
    explicit_bzero(key, kl);
    explicit_bzero(key2, kl2);
    free(key);
    free(key2);
    free(cert);
    free(cert2);
    lz_minica_free(a);
    lz_minica_free(b);
}

static void test_leaf_cached(void **state) {
    struct lz_minica *ca = new_ca();
    struct lz_error err = { 0 };
    EVP_PKEY *k1 = NULL, *k2 = NULL, *k3 = NULL;
    X509 *c1 = NULL, *c2 = NULL, *c3 = NULL;
    assert_int_equal(lz_minica_leaf(ca, HOST, &k1, &c1, &err), 0);
    assert_int_equal(lz_minica_leaf(ca, HOST, &k2, &c2, &err), 0);
    assert_ptr_equal(c1, c2);
    assert_ptr_equal(k1, k2);
    assert_int_equal(X509_cmp(c1, c2), 0);
    /* Another host has its own leaf and key. */
    assert_int_equal(lz_minica_leaf(ca, HOST2, &k3, &c3, &err), 0);
    assert_int_not_equal(X509_cmp(c1, c3), 0);
    assert_int_not_equal(EVP_PKEY_eq(k1, k3), 1);
    X509_free(c2);
    EVP_PKEY_free(k2);
    X509_free(c3);
    EVP_PKEY_free(k3);

#ifdef LZ_TEST_HOOKS
    /* Six days on, more than a day is left: the same leaf. Six and a half
     * days on, less: a new one. */
    time_t now = time(NULL);
    assert_int_equal(lz_minica_leaf_at(ca, HOST, now + 6 * DAY, &k2, &c2, &err), 0);
    assert_ptr_equal(c1, c2);
    X509_free(c2);
    EVP_PKEY_free(k2);
    assert_int_equal(lz_minica_leaf_at(ca, HOST, now + 6 * DAY + DAY / 2, &k2, &c2, &err), 0);
    assert_int_not_equal(X509_cmp(c1, c2), 0);
    assert_int_equal(verify_at(lz_minica_cert(ca), c2, HOST, now + 12 * DAY), X509_V_OK);
    X509_free(c2);
    EVP_PKEY_free(k2);
    /* The first leaf the caller still holds outlives its cache entry. */
    assert_int_equal(verify(lz_minica_cert(ca), c1, HOST), X509_V_OK);

    /* Near the CA's end a leaf ends with the CA, and is kept until then. */
    assert_int_equal(lz_minica_leaf_at(ca, HOST, now + 29 * DAY + DAY / 2, &k2, &c2, &err), 0);
    assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(c2), X509_get0_notAfter(lz_minica_cert(ca))), 0);
    assert_int_equal(lz_minica_leaf_at(ca, HOST, now + 29 * DAY + DAY / 2 + 60, &k3, &c3, &err), 0);
    assert_ptr_equal(c2, c3);
    X509_free(c2);
    EVP_PKEY_free(k2);
    X509_free(c3);
    EVP_PKEY_free(k3);
    /* After the CA's end: nothing. */
    k2 = (EVP_PKEY *)0x1;
    assert_int_equal(lz_minica_leaf_at(ca, HOST, now + 30 * DAY + 1, &k2, &c2, &err), -EKEYEXPIRED);
    assert_non_null(strstr(err.msg, "expired"));
    assert_ptr_equal(k2, (EVP_PKEY *)0x1);
#endif

    /* The references are the caller's: they outlive the CA. */
    lz_minica_free(ca);
    assert_int_equal(X509_check_host(c1, HOST, 0, 0, NULL), 1);
    assert_int_equal(X509_check_private_key(c1, k1), 1);
    X509_free(c1);
    EVP_PKEY_free(k1);
}

static int ext_critical(X509 *x, int nid) {
    int i = X509_get_ext_by_NID(x, nid, -1);
    assert_true(i >= 0);
    return X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

static long seconds_from_now(const ASN1_TIME *t) {
    int days = 0, secs = 0;
    assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
    return (long)days * DAY + secs;
}

static void test_ca_extensions(void **state) {
    X509 *ca = lz_minica_cert(ca_ok);
    assert_int_equal(X509_get_version(ca), X509_VERSION_3);
    char cn[128];
    assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(ca), NID_commonName, cn, sizeof cn) > 0);
    assert_string_equal(cn, "Lazaret Domain CA 0123456789ab");
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(ca), X509_get_issuer_name(ca)), 0);
    /* basicConstraints critical, CA, pathlen 0. */
    int crit = -1;
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
    assert_non_null(bc);
    assert_int_equal(crit, 1);
    assert_true(bc->ca);
    assert_non_null(bc->pathlen);
    assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
    BASIC_CONSTRAINTS_free(bc);
    assert_int_equal(X509_check_ca(ca), 1);
    /* keyUsage critical, exactly keyCertSign and cRLSign. */
    assert_int_equal(ext_critical(ca, NID_key_usage), 1);
    assert_int_equal(X509_get_key_usage(ca), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
    assert_non_null(X509_get0_subject_key_id(ca));
    /* nameConstraints critical: permitted exactly the names (DNS),
     * excluded every IPv4 and IPv6 address. */
    crit = -1;
    NAME_CONSTRAINTS *nc = X509_get_ext_d2i(ca, NID_name_constraints, &crit, NULL);
    assert_non_null(nc);
    assert_int_equal(crit, 1);
    assert_int_equal(sk_GENERAL_SUBTREE_num(nc->permittedSubtrees), 2);
    for (int i = 0; i < 2; i++) {
        GENERAL_SUBTREE *st = sk_GENERAL_SUBTREE_value(nc->permittedSubtrees, i);
        assert_int_equal(st->base->type, GEN_DNS);
        assert_null(st->minimum);
        assert_null(st->maximum);
        const ASN1_IA5STRING *s = st->base->d.dNSName;
        assert_int_equal(ASN1_STRING_length(s), (int)strlen(NAMES[i]));
        assert_memory_equal(ASN1_STRING_get0_data(s), NAMES[i], strlen(NAMES[i]));
    }
    assert_int_equal(sk_GENERAL_SUBTREE_num(nc->excludedSubtrees), 2);
    for (int i = 0; i < 2; i++) {
        GENERAL_SUBTREE *st = sk_GENERAL_SUBTREE_value(nc->excludedSubtrees, i);
        assert_int_equal(st->base->type, GEN_IPADD);
        static const uint8_t zero[32];
        assert_int_equal(ASN1_STRING_length(st->base->d.iPAddress), i ? 32 : 8);
        assert_memory_equal(ASN1_STRING_get0_data(st->base->d.iPAddress), zero, i ? 32 : 8);
    }
    NAME_CONSTRAINTS_free(nc);
    /* Validity: an hour back, thirty days on (a minute's slack). */
    long nb = seconds_from_now(X509_get0_notBefore(ca)), na = seconds_from_now(X509_get0_notAfter(ca));
    assert_true(nb <= -LZ_MINICA_BACKDATE + 60 && nb >= -LZ_MINICA_BACKDATE - 60);
    assert_true(na <= 30L * DAY + 60 && na >= 30L * DAY - 60);

    /* A leaf's. */
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_leaf(ca_ok, HOST2, &key, &leaf, &err), 0);
    assert_int_equal(X509_get_version(leaf), X509_VERSION_3);
    assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof cn) > 0);
    assert_string_equal(cn, HOST2);
    assert_int_equal(X509_check_ca(leaf), 0);
    assert_int_equal(ext_critical(leaf, NID_basic_constraints), 1);
    assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
    assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(leaf), *ski = X509_get0_subject_key_id(ca);
    assert_non_null(aki);
    assert_int_equal(ASN1_OCTET_STRING_cmp(aki, ski), 0);
    GENERAL_NAMES *san = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    assert_non_null(san);
    assert_int_equal(sk_GENERAL_NAME_num(san), 1);
    GENERAL_NAME *gn = sk_GENERAL_NAME_value(san, 0);
    assert_int_equal(gn->type, GEN_DNS);
    assert_int_equal(ASN1_STRING_length(gn->d.dNSName), (int)strlen(HOST2));
    assert_memory_equal(ASN1_STRING_get0_data(gn->d.dNSName), HOST2, strlen(HOST2));
    GENERAL_NAMES_free(san);
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
    assert_int_equal(BN_num_bits(bn), 128);
    BN_free(bn);
    nb = seconds_from_now(X509_get0_notBefore(leaf));
    na = seconds_from_now(X509_get0_notAfter(leaf));
    assert_true(nb <= -LZ_MINICA_BACKDATE + 60 && nb >= -LZ_MINICA_BACKDATE - 60);
    assert_true(na <= 7L * DAY + 60 && na >= 7L * DAY - 60);
    char group[32];
    assert_int_equal(EVP_PKEY_get_group_name(key, group, sizeof group, NULL), 1);
    assert_string_equal(group, "prime256v1");
    EVP_PKEY_free(key);
    X509_free(leaf);
}

/* One TLS handshake in memory (a BIO pair): a server with ca's leaf for
 * sni, a client that trusts only the PEM of trusted, sends SNI sni and
 * expects the name expect (verify mode peer). Returns the client's
 * verification result; *done: both ends finished and one message
 * crossed. */
static long handshake(struct lz_minica *ca, struct lz_minica *trusted, const char *sni, const char *expect, int version,
                      bool *done) {
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_minica_leaf(ca, sni, &key, &leaf, &err), 0);

    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method()), *cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(sctx);
    assert_non_null(cctx);
    assert_int_equal(SSL_CTX_use_certificate(sctx, leaf), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(sctx, key), 1);
    assert_int_equal(SSL_CTX_set_min_proto_version(sctx, version), 1);
    assert_int_equal(SSL_CTX_set_max_proto_version(sctx, version), 1);

    /* The client's trust store: the PEM, as the sandbox's will hold it. */
    char *pem = NULL;
    assert_int_equal(lz_minica_cert_pem(trusted, &pem), 0);
    BIO *pb = BIO_new_mem_buf(pem, -1);
    X509 *anchor = PEM_read_bio_X509(pb, NULL, NULL, NULL);
    assert_non_null(anchor);
    X509_STORE *store = SSL_CTX_get_cert_store(cctx);
    assert_int_equal(X509_STORE_add_cert(store, anchor), 1);
    X509_free(anchor);
    BIO_free(pb);
    free(pem);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
    X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(cctx), X509_V_FLAG_X509_STRICT);

    SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
    assert_non_null(s);
    assert_non_null(c);
    BIO *bs = NULL, *bc = NULL;
    assert_int_equal(BIO_new_bio_pair(&bs, 0, &bc, 0), 1);
    SSL_set_bio(s, bs, bs);
    SSL_set_bio(c, bc, bc);
    assert_int_equal(SSL_set_tlsext_host_name(c, sni), 1);
    assert_int_equal(SSL_set1_host(c, expect), 1);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);

    bool cdone = false, sdone = false, failed = false;
    for (int i = 0; i < 64 && !(cdone && sdone) && !failed; i++) {
        if (!cdone) {
            int r = SSL_do_handshake(c);
            if (r == 1)
                cdone = true;
            else if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
                failed = true;
        }
        if (!sdone && !failed) {
            int r = SSL_do_handshake(s);
            if (r == 1)
                sdone = true;
            else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
                failed = true;
        }
    }
    *done = false;
    if (cdone && sdone) {
        const char *sn = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
        assert_non_null(sn);
        assert_string_equal(sn, sni);
        assert_int_equal(SSL_version(c), version);
        char buf[16] = { 0 };
        assert_int_equal(SSL_write(c, "hello gate", 10), 10);
        assert_int_equal(SSL_read(s, buf, sizeof buf), 10);
        assert_string_equal(buf, "hello gate");
        *done = true;
    }
    long v = SSL_get_verify_result(c);
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    EVP_PKEY_free(key);
    X509_free(leaf);
    ERR_clear_error();
    return v;
}

static void test_tls_handshake(void **state) {
    const int versions[] = { TLS1_3_VERSION, TLS1_2_VERSION };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(versions); i++) {
        bool done = false;
        assert_int_equal(handshake(ca_ok, ca_ok, HOST, HOST, versions[i], &done), X509_V_OK);
        assert_true(done);
        /* The client expects another name (one the CA was also made for):
         * the handshake fails on the host check. */
        assert_int_equal(handshake(ca_ok, ca_ok, HOST, HOST2, versions[i], &done), X509_V_ERR_HOSTNAME_MISMATCH);
        assert_false(done);
        /* A client that trusts another Domain's CA (same subject, another
         * key): no chain. */
        struct lz_minica *other = new_ca();
        long v = handshake(ca_ok, other, HOST, HOST, versions[i], &done);
        assert_true(v == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE ||
                    v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
        assert_false(done);
        lz_minica_free(other);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaf_verifies),
        cmocka_unit_test(test_name_constraints_enforced),
        cmocka_unit_test(test_leaf_refuses_other_names),
        cmocka_unit_test(test_new_refuses),
        cmocka_unit_test(test_pem_round_trip),
        cmocka_unit_test(test_two_cas_differ),
        cmocka_unit_test(test_leaf_cached),
        cmocka_unit_test(test_ca_extensions),
        cmocka_unit_test(test_tls_handshake),
        cmocka_unit_test(test_export_import),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
