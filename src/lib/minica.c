/* minica.c — see minica.h. */
#include "minica.h"

#include "hostrule.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <time.h>

#define DAY (24 * 60 * 60)
/* A cached leaf with less than this left is made again. */
#define LEAF_RENEW (1 * DAY)

struct leaf {
    EVP_PKEY *key;
    X509 *cert;
    time_t not_before, not_after;
};

struct lz_minica {
    EVP_PKEY *key;
    X509 *cert;
    time_t not_after;
    size_t n;
    char **names;        /* canonical, as given */
    struct leaf *leaves; /* leaves[i] for names[i]; cert NULL until asked for */
};

static void pkey_freep(EVP_PKEY **p) { EVP_PKEY_free(*p); }
static void x509_freep(X509 **p) { X509_free(*p); }
static void bio_freep(BIO **p) { BIO_free(*p); }
static void bn_freep(BIGNUM **p) { BN_free(*p); }
static void asn1_int_freep(ASN1_INTEGER **p) { ASN1_INTEGER_free(*p); }
static void nc_freep(NAME_CONSTRAINTS **p) { NAME_CONSTRAINTS_free(*p); }
static void gsub_freep(GENERAL_SUBTREE **p) { GENERAL_SUBTREE_free(*p); }
static void ia5_freep(ASN1_IA5STRING **p) { ASN1_IA5STRING_free(*p); }
static void octet_freep(ASN1_OCTET_STRING **p) { ASN1_OCTET_STRING_free(*p); }

/* An OpenSSL failure: "what: <the error queue's text>", the queue
 * emptied (the next failure must not report this one's causes). */
static int ossl_error(struct lz_error *err, const char *what) {
    char q[LZ_ERROR_MAX / 2];
    size_t o = 0;
    unsigned long e;
    q[0] = '\0';
    while ((e = ERR_get_error()) != 0) {
        char one[256];
        ERR_error_string_n(e, one, sizeof one);
        if (o + 1 >= sizeof q)
            continue;
        int n = snprintf(q + o, sizeof q - o, "%s%s", o ? "; " : "", one);
        if (n > 0)
            o = (size_t)n >= sizeof q - o ? sizeof q - 1 : o + (size_t)n;
    }
    ERR_clear_error();
    if (o == 0)
        return lz_error_set(err, -EIO, "%s (OpenSSL gave no reason)", what);
    return lz_error_set(err, -EIO, "%s: %s", what, q);
}

/* Checks one name of the list (see lz_minica_new). */
static int check_name(const char *name, struct lz_error *err) {
    if (!name)
        return lz_error_set(err, -EINVAL, "a CA host name is missing (NULL)");
    size_t len = strnlen(name, LZ_HOSTNAME_MAX + 2);
    if (len > LZ_HOSTNAME_MAX)
        return lz_error_set(err, -EINVAL, "a CA host name is longer than %d bytes", LZ_HOSTNAME_MAX);
    if (memchr(name, '*', len))
        return lz_error_set(err, -EINVAL,
                            "CA host name \"%s\" is a wildcard: a Domain's CA is made for exact hosts only", name);
    unsigned char a[16];
    if (memchr(name, ':', len) || inet_pton(AF_INET, name, a) == 1)
        return lz_error_set(err, -EINVAL,
                            "CA host name \"%s\" is an IP address: a Domain's CA is made for host names only", name);
    char canon[LZ_HOSTNAME_MAX + 1];
    struct lz_error e = { 0 };
    if (lz_hostname_canon(name, len, canon, &e) < 0)
        return lz_error_set(err, -EINVAL, "CA host name: %s", e.msg);
    /* The CA compares names byte for byte (lz_minica_leaf) and writes them
     * into the certificate as given: only the one spelling is taken. */
    if (strcmp(canon, name) != 0)
        return lz_error_set(err, -EINVAL, "CA host name \"%s\" is not in canonical form (write \"%s\")", name, canon);
    return 0;
}

static int check_label(const char *label, struct lz_error *err) {
    size_t n = label ? strnlen(label, LZ_MINICA_LABEL_MAX + 1) : 0;
    if (n == 0 || n > LZ_MINICA_LABEL_MAX)
        return lz_error_set(err, -EINVAL, "the CA label must be 1 to %d bytes", LZ_MINICA_LABEL_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = label[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_'))
            return lz_error_set(err, -EINVAL, "the CA label has a byte other than [A-Za-z0-9._-] at %zu", i);
    }
    return 0;
}

static EVP_PKEY *p256_key(void) { return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256"); }

/* 128 random bits, the top one set: positive, never 0, always 16 bytes
 * (RFC 5280 §4.1.2.2 allows up to 20). */
static bool set_serial(X509 *x) {
    _cleanup_(bn_freep) BIGNUM *bn = BN_new();
    if (!bn || !BN_rand(bn, 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY))
        return false;
    _cleanup_(asn1_int_freep) ASN1_INTEGER *ai = BN_to_ASN1_INTEGER(bn, NULL);
    return ai && X509_set_serialNumber(x, ai);
}

/* One extension from its OpenSSL configuration text; issuer and subject
 * for the key identifiers. The values are constants or a canonical host
 * name (letters, digits, '-', '.'), which the configuration syntax reads
 * literally. */
static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!e)
        return false;
    bool ok = X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok;
}

static bool push_subtree(STACK_OF(GENERAL_SUBTREE) * sk, int type, void *value) {
    _cleanup_(gsub_freep) GENERAL_SUBTREE *st = GENERAL_SUBTREE_new();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    if (!st || !gn) {
        GENERAL_NAME_free(gn);
        return false;
    }
    GENERAL_NAME_set0_value(gn, type, value);
    GENERAL_NAME_free(st->base);
    st->base = gn;
    if (!sk_GENERAL_SUBTREE_push(sk, st))
        return false;
    st = NULL;
    return true;
}

/* nameConstraints, critical: permitted dNSName subtrees exactly names,
 * excluded every IPv4 and IPv6 address (minica.h). */
static bool add_name_constraints(X509 *x, const char *const *names, size_t n) {
    _cleanup_(nc_freep) NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
    if (!nc)
        return false;
    nc->permittedSubtrees = sk_GENERAL_SUBTREE_new_null();
    nc->excludedSubtrees = sk_GENERAL_SUBTREE_new_null();
    if (!nc->permittedSubtrees || !nc->excludedSubtrees)
        return false;
    for (size_t i = 0; i < n; i++) {
        _cleanup_(ia5_freep) ASN1_IA5STRING *s = ASN1_IA5STRING_new();
        if (!s || !ASN1_STRING_set(s, names[i], (int)strlen(names[i])) ||
            !push_subtree(nc->permittedSubtrees, GEN_DNS, s))
            return false;
        s = NULL;
    }
    /* An iPAddress subtree is the address and its mask (RFC 5280
     * §4.2.1.10): all zeros is "every address". */
    static const uint8_t zero[32];
    for (int len = 8; len <= 32; len += 24) {
        _cleanup_(octet_freep) ASN1_OCTET_STRING *o = ASN1_OCTET_STRING_new();
        if (!o || !ASN1_OCTET_STRING_set(o, zero, len) || !push_subtree(nc->excludedSubtrees, GEN_IPADD, o))
            return false;
        o = NULL;
    }
    return X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT) == 1;
}

static bool set_cn(X509_NAME *nm, const char *cn) {
    return X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) == 1;
}

int lz_minica_new(const char *const *names, size_t n_names, const char *label, struct lz_minica **ret,
                  struct lz_error *err) {
    if (n_names == 0 || !names)
        return lz_error_set(err, -EINVAL, "a Domain's CA needs at least one host name");
    if (n_names > LZ_MINICA_NAMES_MAX)
        return lz_error_set(err, -EINVAL, "a Domain's CA is made for at most %d host names, not %zu",
                            LZ_MINICA_NAMES_MAX, n_names);
    int r;
    for (size_t i = 0; i < n_names; i++) {
        if ((r = check_name(names[i], err)) < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return lz_error_set(err, -EINVAL, "CA host name \"%s\" is listed twice", names[i]);
    }
    if ((r = check_label(label, err)) < 0)
        return r;
    ERR_clear_error();

    _cleanup_(pkey_freep) EVP_PKEY *key = p256_key();
    if (!key)
        return ossl_error(err, "cannot make the Domain CA's key");
    _cleanup_(x509_freep) X509 *x = X509_new();
    if (!x)
        return ossl_error(err, "cannot make the Domain CA's certificate");
    time_t now = time(NULL);
    time_t not_after = now + (time_t)LZ_MINICA_CA_DAYS * DAY;
    char cn[64 + LZ_MINICA_LABEL_MAX];
    snprintf(cn, sizeof cn, "Lazaret Domain CA %s", label);
    bool ok = X509_set_version(x, X509_VERSION_3) && set_serial(x) &&
        X509_time_adj_ex(X509_getm_notBefore(x), 0, -LZ_MINICA_BACKDATE, &now) &&
        ASN1_TIME_set(X509_getm_notAfter(x), not_after) && set_cn(X509_get_subject_name(x), cn) &&
        X509_set_issuer_name(x, X509_get_subject_name(x)) && X509_set_pubkey(x, key) &&
        add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
        add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
        add_ext(x, x, NID_subject_key_identifier, "hash") && add_name_constraints(x, names, n_names) &&
        X509_sign(x, key, EVP_sha256()) > 0;
    if (!ok)
        return ossl_error(err, "cannot make the Domain CA's certificate");

    struct lz_minica *ca = lz_xcalloc(1, sizeof *ca);
    ca->key = TAKE_PTR(key);
    ca->cert = TAKE_PTR(x);
    ca->not_after = not_after;
    ca->n = n_names;
    ca->names = lz_xcalloc(n_names, sizeof *ca->names);
    for (size_t i = 0; i < n_names; i++)
        ca->names[i] = lz_xstrdup(names[i]);
    ca->leaves = lz_xcalloc(n_names, sizeof *ca->leaves);
    *ret = ca;
    return 0;
}

static void leaf_clear(struct leaf *l) {
    EVP_PKEY_free(l->key);
    X509_free(l->cert);
    *l = (struct leaf){ 0 };
}

static int make_leaf(struct lz_minica *ca, const char *host, time_t now, struct leaf *ret, struct lz_error *err) {
    _cleanup_(pkey_freep) EVP_PKEY *key = p256_key();
    if (!key)
        return ossl_error(err, "cannot make a key for the gate's certificate");
    _cleanup_(x509_freep) X509 *x = X509_new();
    if (!x)
        return ossl_error(err, "cannot make the gate's certificate");
    time_t not_before = now - LZ_MINICA_BACKDATE;
    time_t not_after = now + (time_t)LZ_MINICA_LEAF_DAYS * DAY;
    if (not_after > ca->not_after)
        not_after = ca->not_after; /* a leaf never outlives its CA */
    char san[8 + LZ_HOSTNAME_MAX];
    snprintf(san, sizeof san, "DNS:%s", host);
    bool ok = X509_set_version(x, X509_VERSION_3) && set_serial(x) &&
        ASN1_TIME_set(X509_getm_notBefore(x), not_before) && ASN1_TIME_set(X509_getm_notAfter(x), not_after) &&
        set_cn(X509_get_subject_name(x), host) && X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) &&
        X509_set_pubkey(x, key) && add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") &&
        add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") &&
        add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") &&
        add_ext(x, ca->cert, NID_subject_key_identifier, "hash") &&
        add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") &&
        add_ext(x, ca->cert, NID_subject_alt_name, san) && X509_sign(x, ca->key, EVP_sha256()) > 0;
    if (!ok)
        return ossl_error(err, "cannot make the gate's certificate");
    *ret = (struct leaf){ .key = TAKE_PTR(key), .cert = TAKE_PTR(x), .not_before = not_before, .not_after = not_after };
    return 0;
}

static int leaf_at(struct lz_minica *ca, const char *host, time_t now, EVP_PKEY **ret_key, X509 **ret_cert,
                   struct lz_error *err) {
    size_t i = 0;
    while (i < ca->n && !(host && strcmp(ca->names[i], host) == 0))
        i++;
    if (i == ca->n) {
        char canon[LZ_HOSTNAME_MAX + 1];
        /* Only a canonical name is quoted (it may come from a client). */
        if (host && lz_hostname_canon(host, strnlen(host, LZ_HOSTNAME_MAX + 2), canon, NULL) == 0 &&
            strcmp(canon, host) == 0)
            return lz_error_set(err, -EPERM,
                                "the Domain's CA signs no certificate for \"%s\": it signs only the hosts the "
                                "profile binds credentials to",
                                host);
        return lz_error_set(err, -EPERM,
                            "the Domain's CA signs no certificate for a name that is not a canonical host name");
    }
    if (now >= ca->not_after)
        return lz_error_set(err, -EKEYEXPIRED,
                            "the Domain's CA expired (it is valid for %d days): start the Domain again",
                            LZ_MINICA_CA_DAYS);
    struct leaf *l = &ca->leaves[i];
    /* Made again when it ends within a day (unless no later end is
     * possible: the CA's own), or when the clock went back before it. */
    if (l->cert && (now < l->not_before || (l->not_after - now < LEAF_RENEW && l->not_after < ca->not_after)))
        leaf_clear(l);
    if (!l->cert) {
        ERR_clear_error();
        struct leaf fresh;
        int r = make_leaf(ca, host, now, &fresh, err);
        if (r < 0)
            return r;
        *l = fresh;
    }
    if (!EVP_PKEY_up_ref(l->key))
        return ossl_error(err, "cannot take a reference to the gate's key");
    if (!X509_up_ref(l->cert)) {
        EVP_PKEY_free(l->key);
        return ossl_error(err, "cannot take a reference to the gate's certificate");
    }
    *ret_key = l->key;
    *ret_cert = l->cert;
    return 0;
}

int lz_minica_leaf(struct lz_minica *ca, const char *host, EVP_PKEY **ret_key, X509 **ret_cert, struct lz_error *err) {
    return leaf_at(ca, host, time(NULL), ret_key, ret_cert, err);
}

int lz_minica_cert_pem(const struct lz_minica *ca, char **ret_pem) {
    _cleanup_(bio_freep) BIO *b = BIO_new(BIO_s_mem());
    char *p = NULL;
    long n;
    if (!b || !PEM_write_bio_X509(b, ca->cert) || (n = BIO_get_mem_data(b, &p)) <= 0 || !p) {
        ERR_clear_error();
        return -ENOMEM;
    }
    *ret_pem = lz_xstrndup(p, (size_t)n);
    return 0;
}

X509 *lz_minica_cert(const struct lz_minica *ca) { return ca->cert; }

void lz_minica_free(struct lz_minica *ca) {
    if (!ca)
        return;
    for (size_t i = 0; i < ca->n; i++) {
        leaf_clear(&ca->leaves[i]);
        free(ca->names[i]);
    }
    free(ca->leaves);
    free(ca->names);
    EVP_PKEY_free(ca->key); /* clears the scalar: minica.h */
    X509_free(ca->cert);
    free(ca);
}

#ifdef LZ_TEST_HOOKS
EVP_PKEY *lz_minica_test_key(struct lz_minica *ca) { return ca->key; }

int lz_minica_leaf_at(struct lz_minica *ca, const char *host, time_t now, EVP_PKEY **ret_key, X509 **ret_cert,
                      struct lz_error *err) {
    return leaf_at(ca, host, now, ret_key, ret_cert, err);
}
#endif

int lz_minica_export(const struct lz_minica *ca, uint8_t **ret_key, size_t *ret_key_len, uint8_t **ret_cert,
                     size_t *ret_cert_len, struct lz_error *err) {
    unsigned char *k = NULL, *c = NULL;
    int kl = i2d_PrivateKey(ca->key, &k);
    if (kl <= 0)
        return ossl_error(err, "cannot export the Domain CA's key");
    int cl = i2d_X509(ca->cert, &c);
    if (cl <= 0) {
        OPENSSL_clear_free(k, (size_t)kl);
        return ossl_error(err, "cannot export the Domain CA's certificate");
    }
    *ret_key = lz_xmalloc((size_t)kl);
    memcpy(*ret_key, k, (size_t)kl);
    *ret_key_len = (size_t)kl;
    OPENSSL_clear_free(k, (size_t)kl);
    *ret_cert = lz_xmalloc((size_t)cl);
    memcpy(*ret_cert, c, (size_t)cl);
    *ret_cert_len = (size_t)cl;
    OPENSSL_free(c);
    return 0;
}

int lz_minica_import(const char *const *names, size_t n_names, const uint8_t *key, size_t key_len, const uint8_t *cert,
                     size_t cert_len, struct lz_minica **ret, struct lz_error *err) {
    if (n_names == 0 || !names || n_names > LZ_MINICA_NAMES_MAX)
        return lz_error_set(err, -EINVAL, "a Domain's CA is made for 1 to %d host names", LZ_MINICA_NAMES_MAX);
    int r;
    for (size_t i = 0; i < n_names; i++)
        if ((r = check_name(names[i], err)) < 0)
            return r;
    if (key_len > LONG_MAX || cert_len > LONG_MAX)
        return lz_error_set(err, -EINVAL, "the Domain CA's key or certificate is too large");
    const unsigned char *kp = key, *cp = cert;
    _cleanup_(pkey_freep) EVP_PKEY *k = d2i_AutoPrivateKey(NULL, &kp, (long)key_len);
    _cleanup_(x509_freep) X509 *x = d2i_X509(NULL, &cp, (long)cert_len);
    if (!k || !x || kp != key + key_len || cp != cert + cert_len)
        return ossl_error(err, "the Domain CA's key or certificate does not parse");
    if (X509_check_private_key(x, k) != 1)
        return ossl_error(err, "the Domain CA's key does not match its certificate");
    struct tm tm;
    if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
        return ossl_error(err, "the Domain CA's certificate has no end of validity");
    struct lz_minica *ca = lz_xcalloc(1, sizeof *ca);
    ca->key = TAKE_PTR(k);
    ca->cert = TAKE_PTR(x);
    ca->not_after = timegm(&tm);
    ca->n = n_names;
    ca->names = lz_xcalloc(n_names, sizeof *ca->names);
    for (size_t i = 0; i < n_names; i++)
        ca->names[i] = lz_xstrdup(names[i]);
    ca->leaves = lz_xcalloc(n_names, sizeof *ca->leaves);
    *ret = ca;
    return 0;
}
