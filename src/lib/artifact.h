/* artifact.h — the prepared-artifact record: its ID and its artifact.json.
 *
 * Below both the image modules (image.c writes the record when it
 * prepares, reads it to reuse and to list) and the Storage Catalog
 * (catalog.c reads it to register, publish and reconcile), so that neither
 * calls into the other for it.
 *
 *   <data_root>/prepared/<artifact_id>/
 *       rootfs/                 the prepared lower (immutable)
 *       artifact.json           {artifact_id, preparer, source: {ref,
 *                               manifest_digest, config_digest}, layers,
 *                               created, size, stats: {entries,
 *                               devices_skipped}}
 *
 * Prepared-artifact ID: lowercase hex of
 *   SHA-256( "lazaret-prepared-artifact-v1"
 *            || u32be(len(manifest_digest)) || manifest_digest
 *            || u32be(len(LZ_PREPARER_VERSION)) || LZ_PREPARER_VERSION )
 * where manifest_digest is the "sha256:<hex>" string of the image manifest.
 * The same image prepared by the same preparer gives the same ID wherever it
 * is stored; a preparer change gives a new ID. An existing complete artifact
 * (directory present with a matching artifact.json and a rootfs/
 * directory) is reused as is. */
#pragma once

#include "prepare.h"

struct lz_prepared_info {
    char artifact_id[65];
    char *source_ref;
    char *manifest_digest;
    char *created; /* RFC 3339 UTC */
    uint64_t size; /* bytes on disk, measured when prepared */
};

/* Computes the prepared-artifact ID (64 hex + NUL) of a manifest digest.
 * -EINVAL when the digest is not "sha256:<64 hex>". */
int lz_prepared_artifact_id(const char *manifest_digest, char ret_id[65]);
/* The same, for an artifact whose owners were stored shifted (prepare.h,
 * lz_layer_opts.shift): `owners` describes the mapping and enters the ID,
 * so an artifact prepared another way is never taken for it. NULL: as
 * lz_prepared_artifact_id(). */
int lz_prepared_artifact_id_owned(const char *manifest_digest, const char *owners, char ret_id[65]);

/* Reads the artifact.json of the complete prepared tree <prepared_fd>/<dir>
 * (dir is the artifact ID once published, or a .tmp-* name before) and
 * checks that it names artifact_id and has a rootfs/ directory; nothing is
 * followed out of prepared_fd. -ENOENT when absent, -EBADMSG when
 * incomplete or naming another ID. Free with lz_prepared_info_clear. */
int lz_prepared_info_read(int prepared_fd, const char *dir, const char *artifact_id, struct lz_prepared_info *ret);
void lz_prepared_info_clear(struct lz_prepared_info *p);

/* What the preparer records about a tree it prepared. */
struct lz_artifact_record {
    const char *artifact_id;
    const char *source_ref; /* the store name of the image */
    const char *manifest_digest;
    const char *config_digest;
    const char *const *layers; /* layer digests, in order */
    size_t n_layers;
    const struct lz_prepare_stats *stats;
};

/* Writes artifact.json into the tree dir_fd (atomically), with the
 * creation time and the size on disk of rootfs_path measured now. */
int lz_artifact_write(int dir_fd, const char *rootfs_path, const struct lz_artifact_record *a, struct lz_error *err);
