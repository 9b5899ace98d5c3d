/* hostca.h — the host's locally installed CA certificates, for sandboxes
 * behind a TLS-intercepting proxy (profile key host_ca_certificates).
 *
 * Corporate proxies re-sign TLS with a company CA that the administrator
 * installs on the host in /usr/local/share/ca-certificates (Debian's
 * update-ca-certificates reads *.crt there, subdirectories included).
 * lz_hostca_load reads those files and keeps only their PEM CERTIFICATE
 * blocks, each checked to be well-formed base64 and bounded: nothing else
 * of a file (a private key someone saved next to its certificate,
 * comments, other PEM types) is ever taken. The set has a digest that
 * enters the prepared artifact's ID, so a changed set prepares again.
 * lz_hostca_install writes the set into a prepared root filesystem the
 * way update-ca-certificates would have: one file per certificate under
 * usr/local/share/ca-certificates/lazaret-host/ (so a later
 * update-ca-certificates inside keeps them) and appended to
 * etc/ssl/certs/ca-certificates.crt (so they are trusted at once).
 */
#pragma once

#include "util.h"

#include <sys/types.h>

#define LZ_HOSTCA_DIR "/usr/local/share/ca-certificates"
#define LZ_HOSTCA_MAX_CERTS 256
#define LZ_HOSTCA_MAX_FILE (256 * 1024) /* bytes read of one .crt file */
#define LZ_HOSTCA_MAX_CERT (64 * 1024)  /* bytes of one PEM certificate block */

struct lz_hostca {
    size_t n;
    char **names; /* "NN-<file name>.crt": flat, unique, [A-Za-z0-9._-] */
    char **pems;  /* one "-----BEGIN CERTIFICATE-----...END CERTIFICATE-----\n" each */
    uint8_t digest[32];
    size_t skipped_blocks; /* non-certificate PEM blocks left out (keys...) */
};

/* Reads every *.crt below dir (symlinks are not followed; at most
 * LZ_HOSTCA_MAX_CERTS certificates). A missing dir is an empty set. */
int lz_hostca_load(const char *dir, struct lz_hostca *ret, struct lz_error *err);
/* LZ_HOSTCA_DIR (test builds: the hook LAZARET_TEST_HOST_CA_DIR instead). */
const char *lz_hostca_dir(void);
void lz_hostca_clear(struct lz_hostca *h);

/* The certificate blocks of one file's bytes, appended to h (exposed for
 * the unit test). Returns the number of certificates taken. */
int lz_hostca_parse(const char *name, const char *buf, size_t len, struct lz_hostca *h);

/* Writes the set into the root filesystem open at rootfs_fd, files owned
 * by uid:gid (the prepared image's root). Nothing to do for an empty set. */
int lz_hostca_install(int rootfs_fd, const struct lz_hostca *h, uid_t uid, gid_t gid, struct lz_error *err);
