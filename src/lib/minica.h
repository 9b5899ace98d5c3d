/* minica.h — a Domain's own certificate authority for credentials bound
 * to endpoints (issue 24 §2).
 *
 * For a host a profile binds a credential to (api.anthropic.com), the
 * Domain's TLS gate terminates the sandbox's TLS itself, with a leaf
 * certificate this CA signs, so that it can add the credential the
 * sandbox never holds. The CA certificate goes into the sandbox's trust
 * stores; the CA's private key exists only in the memory of the process
 * that made it (the gate): it is never written, never exported, and it
 * dies with the process. Nothing here touches the file system.
 *
 * The CA (lz_minica_new):
 *   key          EC P-256 (ECDSA with SHA-256 signatures): every TLS
 *                client has it, signing is cheap, keys are made in
 *                well under a millisecond
 *   subject      CN "Lazaret Domain CA <label>" (label: the first hex
 *                digits of the Domain ID, so a user who meets the CA in a
 *                trust store can tell which Domain it belongs to)
 *   serial       128 random bits, top bit set (positive, never 0)
 *   validity     now - 1 h (a clock a little behind ours still accepts
 *                it) to now + LZ_MINICA_CA_DAYS days. A Domain's CA lives
 *                while the Domain runs and is made anew at every start;
 *                the bound is for the copy of the certificate left in a
 *                trust store (a stopped sandbox's, a backup): the key is
 *                gone, and after 30 days the certificate is worthless
 *                too. A Domain that runs longer must start again (its
 *                leaves are refused with -EKEYEXPIRED).
 *   extensions   basicConstraints critical CA:TRUE, pathlen:0 (it signs
 *                leaves only); keyUsage critical keyCertSign, cRLSign;
 *                subjectKeyIdentifier; nameConstraints critical, see
 *                below.
 *
 * Name constraints, the security point. The permitted subtrees are
 * exactly the names the CA was made for (dNSName, each a canonical host
 * name), and every IPv4 and IPv6 address is excluded (iPAddress
 * 0.0.0.0/0 and ::/0: without that, a DNS-only constraint says nothing
 * about certificates for address literals). A verifier that enforces
 * name constraints (OpenSSL, BoringSSL, Go, NSS, rustls/webpki) then
 * refuses any certificate this CA signs for another name, so the CA
 * certificate in a trust store is worth nothing beyond those hosts, even
 * if its key leaked or the certificate ended up trusted beyond the
 * sandbox. RFC 5280 §4.2.1.10: a dNSName constraint "api.example.com"
 * also permits every name below it ("x.api.example.com"); X.509 has no
 * portable way to say "this name only" (a leading dot is defined for
 * URIs and mail addresses, not DNS names). We accept that for the
 * constraint — subdomains of a host the profile already trusts with a
 * credential are the same operator's — and close it in the CA itself:
 * lz_minica_leaf signs exactly the names it was given and nothing else.
 *
 * Leaves (lz_minica_leaf): a fresh P-256 key each; subject CN=host;
 * subjectAltName DNS:host; basicConstraints CA:FALSE; keyUsage critical
 * digitalSignature; extendedKeyUsage serverAuth; authorityKeyIdentifier;
 * random 128-bit serial; validity now - 1 h to now + LZ_MINICA_LEAF_DAYS
 * days, cut at the CA's notAfter. One leaf per host is cached in the CA
 * object (the gate asks at every connection) and made again when less
 * than a day of it is left (unless the CA itself ends sooner).
 *
 * Keys are freed with their material cleared: EVP_PKEY_free of an EC key
 * ends in EC_KEY_free (the EC key manager's free function), which frees
 * the private scalar with BN_clear_free and the key with
 * OPENSSL_clear_free (OpenSSL 3, crypto/ec/ec_key.c). The private scalar
 * is allocated with BN_secure_new: in the secure heap when the process
 * set one up (CRYPTO_secure_malloc_init), in the ordinary heap otherwise.
 *
 * Errors: -EINVAL (a refused name list, with the reason), -EPERM (a leaf
 * for a name the CA was not made for), -EKEYEXPIRED (the CA is past its
 * notAfter), -EIO (an OpenSSL failure: its error queue's text is in the
 * message, and the queue is left empty). Out-parameters are untouched on
 * failure. A CA object is for one thread at a time (the gate is one
 * event loop); the references lz_minica_leaf returns are the caller's and
 * stay valid after lz_minica_free.
 */
#pragma once

#include "util.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <time.h>

#define LZ_MINICA_NAMES_MAX 64 /* names one CA may be made for */
#define LZ_MINICA_LABEL_MAX 32 /* bytes of the label in the subject */
#define LZ_MINICA_CA_DAYS 30
#define LZ_MINICA_LEAF_DAYS 7
#define LZ_MINICA_BACKDATE (60 * 60) /* seconds before now that certificates start */

struct lz_minica;

/* A new CA for the n_names canonical host names at names (1 to
 * LZ_MINICA_NAMES_MAX; each exactly as lz_hostname_canon writes it: no
 * upper case, no trailing dot, no wildcard, no address literal; no name
 * twice). label: 1 to LZ_MINICA_LABEL_MAX bytes of [A-Za-z0-9._-]. */
int lz_minica_new(const char *const *names, size_t n_names, const char *label, struct lz_minica **ret,
                  struct lz_error *err);

/* A key and certificate for host, one of the CA's names (byte for byte:
 * anything else is -EPERM); new references, the caller frees them
 * (EVP_PKEY_free, X509_free). */
int lz_minica_leaf(struct lz_minica *ca, const char *host, EVP_PKEY **ret_key, X509 **ret_cert, struct lz_error *err);

/* The CA certificate as PEM text ("-----BEGIN CERTIFICATE-----\n...
 * -----END CERTIFICATE-----\n"), for the sandbox's trust stores; free
 * with free(). 0 or -ENOMEM (no lz_error: only an allocation can fail). */
int lz_minica_cert_pem(const struct lz_minica *ca, char **ret_pem);

/* The CA certificate, borrowed (valid until lz_minica_free; X509_up_ref
 * to keep it longer). */
X509 *lz_minica_cert(const struct lz_minica *ca);

/* The CA's private key (DER, PKCS#8 or the key type's own form) and
 * certificate (DER), new buffers of the caller's: the key's to clear
 * (explicit_bzero) before it frees it. For the Host Coordinator, which
 * makes the CA before the sandbox boots (its certificate must be in the
 * sandbox's trust store by then) and hands it to the TLS gate, which
 * alone keeps it afterwards. */
int lz_minica_export(const struct lz_minica *ca, uint8_t **ret_key, size_t *ret_key_len, uint8_t **ret_cert,
                     size_t *ret_cert_len, struct lz_error *err);
/* The CA again, for names (checked as lz_minica_new checks them), from
 * what lz_minica_export wrote: the key must be the certificate's. */
int lz_minica_import(const char *const *names, size_t n_names, const uint8_t *key, size_t key_len, const uint8_t *cert,
                     size_t cert_len, struct lz_minica **ret, struct lz_error *err);

/* Frees the CA, its key (cleared, see the top) and its cached leaves.
 * NULL is allowed. */
void lz_minica_free(struct lz_minica *ca);
static inline void lz_minica_freep(struct lz_minica **p) { lz_minica_free(*p); }
#define _cleanup_minica_ _cleanup_(lz_minica_freep)

#ifdef LZ_TEST_HOOKS
/* Test builds only: the CA's private key, borrowed (the unit test signs
 * a certificate the CA itself refuses to make, to show that verifiers
 * enforce the name constraints). */
EVP_PKEY *lz_minica_test_key(struct lz_minica *ca);
/* lz_minica_leaf as if the clock read now. */
int lz_minica_leaf_at(struct lz_minica *ca, const char *host, time_t now, EVP_PKEY **ret_key, X509 **ret_cert,
                      struct lz_error *err);
#endif
