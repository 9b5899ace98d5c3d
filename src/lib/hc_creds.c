/* hc_creds.c — see hc_creds.h. */
#include "hc_creds.h"
#include "credential.h"
#include "gateproto.h"
#include "hclog.h"
#include "hostca.h"
#include "minica.h"
#include "procenv.h"

#include <fcntl.h>
#include <sys/stat.h>

#define HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define HOST_BUNDLE_MAX (4u << 20)

bool hc_creds_gated(const struct hc *h) { return h->cred_ca != NULL; }

int hc_creds_prepare(struct hc *h, struct lz_error *err) {
    struct lz_profile *p = &h->cfg->profile;
    int r;
    hc_creds_free(h); /* a generation before this one's */
    _cleanup_env_ char **envp = NULL;
    for (size_t i = 0; i < p->n_credentials; i++) {
        struct lz_credential *cr = &p->credentials[i];
        if (cr->unreachable || cr->from == LZ_CRED_FROM_ENV || cr->value)
            continue;
        if (!envp)
            envp = lz_env_build(LZ_ENV_COORDINATOR);
        if ((r = lz_credential_fetch(cr, envp, err)) < 0)
            return r;
        hc_log("credential %s: value read from %s", cr->var,
               cr->from == LZ_CRED_FROM_FILE ? cr->from_file : cr->from_command[0]);
    }
    const char *names[LZ_CONFIG_MAX_CREDENTIALS];
    size_t n = 0;
    for (size_t i = 0; i < p->n_credentials; i++) {
        const struct lz_credential *cr = &p->credentials[i];
        if (!lz_credential_gated(cr))
            continue;
        bool dup = false;
        for (size_t k = 0; k < n; k++)
            dup |= !strcmp(names[k], cr->host);
        if (!dup)
            names[n++] = cr->host;
    }
    if (n == 0)
        return 0;
    char label[13];
    snprintf(label, sizeof label, "%.12s", h->cfg->domain_id_hex);
    if ((r = lz_minica_new(names, n, label, &h->cred_ca, err)) < 0)
        return r;
    _cleanup_free_ char *pem = NULL;
    if ((r = lz_minica_cert_pem(h->cred_ca, &pem)) < 0)
        return lz_error_set(err, r, "out of memory");
    h->trust_dir = lz_xasprintf("%s/trust", h->gen_dir);
    _cleanup_free_ char *f = lz_xasprintf("%s/domain-ca.crt", h->trust_dir);
    if ((r = lz_mkdir_p(h->trust_dir, 0755)) < 0 ||
        (r = lz_write_file_atomic_at(AT_FDCWD, f, pem, strlen(pem), 0644)) < 0)
        return lz_error_set(err, r, "cannot write the Domain CA's certificate to %s: %s", f, strerror(-r));
    hc_log("Domain CA made for %zu credential host%s; its certificate is %s", n, n == 1 ? "" : "s", f);
    return 0;
}

static int put(int fd, uint8_t type, const void *data, size_t len) {
    uint8_t hdr[5] = { type };
    uint32_t l = (uint32_t)len;
    memcpy(hdr + 1, &l, 4);
    int r = lz_write_full(fd, hdr, sizeof hdr);
    return r < 0 || !len ? r : lz_write_full(fd, data, len);
}

/* var, host, header, kind, prefix, suffix, username, placeholder, value,
 * push_delete, push_refs... (gateproto.h) */
static int put_cred(int fd, const struct hc *h, const struct lz_credential *cr) {
    char ph[LZ_CRED_PLACEHOLDER_LEN + 1];
    lz_credential_placeholder(h->cfg->domain_id, cr->var, ph);
    const char *f[] = { cr->var,
                        cr->host,
                        cr->header,
                        cr->basic ? "basic" : "template",
                        cr->prefix ? cr->prefix : "",
                        cr->suffix ? cr->suffix : "",
                        cr->username ? cr->username : "",
                        ph,
                        cr->value,
                        cr->push_delete ? "1" : "0" };
    size_t len = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(f); i++)
        len += strlen(f[i]) + 1;
    for (size_t i = 0; i < cr->n_push_refs; i++)
        len += strlen(cr->push_refs[i]) + 1;
    char *buf = lz_xmalloc(len), *o = buf;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(f); i++)
        o = stpcpy(o, f[i]) + 1;
    for (size_t i = 0; i < cr->n_push_refs; i++)
        o = stpcpy(o, cr->push_refs[i]) + 1;
    int r = put(fd, LZ_GCFG_CRED, buf, len);
    explicit_bzero(buf, len);
    free(buf);
    return r;
}

int hc_creds_send(struct hc *h, int fd, struct lz_error *err) {
    const struct lz_profile *p = &h->cfg->profile;
    uint8_t *key = NULL, *cert = NULL;
    size_t kl = 0, cl = 0;
    int r = lz_minica_export(h->cred_ca, &key, &kl, &cert, &cl, err);
    if (r < 0)
        return r;
    r = put(fd, LZ_GCFG_CA_KEY, key, kl);
    explicit_bzero(key, kl);
    free(key);
    if (r == 0)
        r = put(fd, LZ_GCFG_CA_CERT, cert, cl);
    free(cert);
    lz_minica_free(h->cred_ca);
    h->cred_ca = NULL;
    /* The host's trust store, and the CAs installed on the host
     * (/usr/local/share/ca-certificates, hostca.h: a TLS-intercepting
     * proxy's) even if update-ca-certificates has not put them in the
     * bundle yet. The host trusts them whatever the profile's
     * host_ca_certificates says (which is about trust inside). */
    _cleanup_free_ char *bundle = NULL;
    size_t bl = 0;
    if (r == 0 && lz_read_file_at(AT_FDCWD, HOST_BUNDLE, HOST_BUNDLE_MAX, &bundle, &bl) == 0)
        r = put(fd, LZ_GCFG_TRUST_PEM, bundle, bl);
    else if (r == 0)
        hc_log("WARNING: cannot read %s: credential hosts are verified against the host's own CAs only", HOST_BUNDLE);
    if (r == 0) {
        struct lz_hostca ca = { 0 };
        struct lz_error e = { 0 };
        if (lz_hostca_load(lz_hostca_dir(), &ca, &e) == 0)
            for (size_t i = 0; r == 0 && i < ca.n; i++)
                r = put(fd, LZ_GCFG_TRUST_PEM, ca.pems[i], strlen(ca.pems[i]));
        else
            hc_log("WARNING: the host's CAs: %s", e.msg);
        lz_hostca_clear(&ca);
    }
    for (size_t i = 0; r == 0 && i < p->n_credentials; i++)
        if (lz_credential_gated(&p->credentials[i]))
            r = put_cred(fd, h, &p->credentials[i]);
    if (r == 0)
        r = put(fd, LZ_GCFG_END, NULL, 0);
    if (r < 0)
        return lz_error_set(err, r, "cannot hand the TLS gate its configuration: %s", strerror(-r));
    return 0;
}

void hc_creds_free(struct hc *h) {
    lz_minica_free(h->cred_ca);
    h->cred_ca = NULL;
    free(h->trust_dir);
    h->trust_dir = NULL;
}
