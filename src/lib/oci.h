/* oci.h — Lazaret's own OCI image layout (<data_root>/images, see image.h)
 * and the OCI/Docker documents read from it and from import sources.
 *
 * Internal to the image modules (image.c, imgimport.c, bootstrap.c,
 * artifact.c): the store, blob verification, descriptors, manifests and
 * image configs, and the small helpers they share. Nothing here knows about
 * prepared artifacts or the Storage Catalog.
 *
 * Blobs: every blob enters the store under a temporary name and is renamed
 * to its digest only after it was hashed (and, with an expected digest and
 * size, checked) and synced. Only sha256 digests are accepted. index.json
 * updates hold images/.lock. */
#pragma once

#include <jansson.h>

#include "prepare.h"

#define LZ_OCI_MAX_JSON (4u << 20)
#define LZ_OCI_MAX_LAYERS 1024
#define LZ_OCI_MAX_BLOB (UINT64_C(64) << 30)
#define LZ_OCI_REF_NAME "org.opencontainers.image.ref.name"
#define LZ_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define LZ_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define LZ_MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define LZ_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define LZ_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define LZ_MT_LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define LZ_MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define LZ_MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define LZ_OCI_DIGEST_LEN 71 /* "sha256:" + 64 */

/* json_decrefp comes with jansson >= 2.9. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- small helpers ---- */

/* The OCI architecture name of this build's host ("amd64", ...). */
const char *lz_oci_host_arch(void);
/* Calls fn (when non-NULL) with a progress phase. */
void lz_progress_report(lz_progress_fn fn, void *ud, const char *phase, uint64_t done, uint64_t total);
/* Reads a regular file of at most max bytes, opened confined under dirfd
 * (lz_openat_beneath); returns -errno without a message. */
int lz_oci_read_beneath(int dirfd, const char *path, bool allow_symlinks, size_t max, char **ret_buf, size_t *ret_len);
/* "sha256:" + 64 lowercase hex. */
bool lz_oci_digest_valid(const char *d);
/* "blobs/sha256/<hex>" of a valid digest. */
void lz_oci_blob_path(const char *digest, char out[80]);
void lz_oci_sha256(const void *buf, size_t len, char out[LZ_OCI_DIGEST_LEN + 1]);
/* prefix + 16 random hex digits. */
void lz_oci_random_name(const char *prefix, char out[64]);
void lz_oci_now_rfc3339(char out[32]);
/* Opens (creating) dirfd/name and takes an exclusive flock on it. */
int lz_oci_lock(int dirfd, const char *name, int *ret_fd);
/* o[key] when o is an object and the value a string, else NULL. */
const char *lz_json_str(json_t *o, const char *key);
/* Parses an object or array (duplicate keys refused); what names it in the
 * error. */
int lz_json_parse(const char *buf, size_t len, json_t **ret, const char *what, struct lz_error *err);
/* Compact, key-sorted serialisation (aborts on allocation failure). */
char *lz_json_dump_compact(json_t *j);

/* ---- the store ---- */

struct lz_oci_store {
    int fd;     /* <data_root>/images */
    int blobs;  /* <data_root>/images/blobs/sha256 */
    char *path; /* <data_root>/images */
};

/* Opens <data_root>/images (with create: making it and its oci-layout and
 * index.json first). -ENOENT without a message when absent and !create. */
int lz_oci_open(const char *data_root, bool create, struct lz_oci_store *ret, struct lz_error *err);
void lz_oci_close(struct lz_oci_store *s);
int lz_oci_read_index(const struct lz_oci_store *st, json_t **ret, struct lz_error *err);
/* The ref.name annotation of an index.json descriptor, or NULL. */
const char *lz_oci_ref_name(json_t *desc);
/* -ENOENT (no message) when the store has no image of that name. */
int lz_oci_lookup(const struct lz_oci_store *st, const char *name, char **ret_digest, struct lz_error *err);
/* Points name at the manifest digest in index.json (under images/.lock). */
int lz_oci_set_name(const struct lz_oci_store *st, const char *name, const char *digest, uint64_t size,
                    const char *media_type, struct lz_error *err);
/* size < 0: any size. */
bool lz_oci_has_blob(const struct lz_oci_store *st, const char *digest, int64_t size);

struct lz_oci_copy_progress {
    lz_progress_fn fn;
    void *ud;
    const char *phase;
    uint64_t base, total;
};

/* Reads src to EOF (at most limit bytes: -EFBIG beyond), hashing it and
 * copying to dst when dst >= 0; returns -errno without a message. */
int lz_oci_hash_copy(int src, int dst, uint64_t limit, const struct lz_oci_copy_progress *pc,
                     char ret_digest[LZ_OCI_DIGEST_LEN + 1], uint64_t *ret_size);
/* Copies src into the store. With expected_digest (and expected_size >= 0)
 * the copy is refused unless it matches. */
int lz_oci_put_fd(const struct lz_oci_store *st, int src, const char *expected_digest, int64_t expected_size,
                  const struct lz_oci_copy_progress *pc, char ret_digest[LZ_OCI_DIGEST_LEN + 1], uint64_t *ret_size,
                  struct lz_error *err);
int lz_oci_put_mem(const struct lz_oci_store *st, const void *buf, size_t len, char ret_digest[LZ_OCI_DIGEST_LEN + 1],
                   struct lz_error *err);
/* Stores j in its canonical compact form (lz_json_dump_compact): its digest
 * and length. */
int lz_oci_put_json(const struct lz_oci_store *st, json_t *j, char ret_digest[LZ_OCI_DIGEST_LEN + 1], size_t *ret_len,
                    struct lz_error *err);
/* Stores an OCI image manifest and gives it name (lz_oci_set_name). */
int lz_oci_put_manifest(const struct lz_oci_store *st, const char *name, json_t *manifest,
                        char ret_digest[LZ_OCI_DIGEST_LEN + 1], struct lz_error *err);
/* Reads a small store blob (at most LZ_OCI_MAX_JSON) and checks its digest. */
int lz_oci_read_blob(const struct lz_oci_store *st, const char *digest, char **ret_buf, size_t *ret_len,
                     struct lz_error *err);
/* Creates and opens images/<prefix><random>, a private scratch directory
 * (the caller removes it with lz_prepare_remove_tree). */
int lz_oci_scratch(const struct lz_oci_store *st, const char *prefix, char name[64], int *ret_fd, struct lz_error *err);

/* ---- descriptors and manifests ---- */

struct lz_oci_desc {
    const char *media_type; /* may be NULL */
    const char *digest;
    int64_t size;
};

struct lz_oci_manifest {
    json_t *doc;
    char *raw;
    size_t raw_len;
    char digest[LZ_OCI_DIGEST_LEN + 1];
    const char *media_type;
    struct lz_oci_desc config;
    struct lz_oci_desc layers[LZ_OCI_MAX_LAYERS];
    size_t n_layers;
};

int lz_oci_parse_desc(json_t *j, struct lz_oci_desc *d, const char *what, struct lz_error *err);
void lz_oci_manifest_clear(struct lz_oci_manifest *m);
/* Parses m->doc (already digest-checked): schemaVersion 2, config, layers
 * of a known media type. */
int lz_oci_manifest_parse(struct lz_oci_manifest *m, struct lz_error *err);
/* Reads a blob of a source layout, bounded and verified against d. */
int lz_oci_src_read_blob(int src, const struct lz_oci_desc *d, size_t max, char **ret_buf, size_t *ret_len,
                         struct lz_error *err);
/* Loads the manifest jdesc points at in a source layout, resolving an
 * image index to the linux/<host arch> entry. */
int lz_oci_src_load_manifest(int src, json_t *jdesc, int depth, struct lz_oci_manifest *m, struct lz_error *err);
/* Checks a config blob: JSON object, the host's OS/architecture when it
 * says, as many diff_ids as layers. */
int lz_oci_check_config(const char *buf, size_t len, size_t n_layers, json_t **ret_doc, struct lz_error *err);
