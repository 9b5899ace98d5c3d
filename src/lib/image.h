/* image.h — base images and prepared lowers under the Storage Root.
 *
 * Layout (data_root is a canonical absolute directory):
 *
 *   <data_root>/images/                 Lazaret's own OCI image layout:
 *       oci-layout, index.json          one layout holding many images; each
 *       blobs/sha256/<hex>              manifest in index.json carries
 *                                       "org.opencontainers.image.ref.name" =
 *                                       Lazaret's name for the image
 *       .lock                           flock for index.json updates
 *       .bootstrap.lock                 serialises mmdebstrap runs
 *       .import-*, .pull-*, .bootstrap-* private scratch (removed on exit)
 *   <data_root>/prepared/<artifact_id>/
 *       rootfs/                         the prepared lower (immutable)
 *       artifact.json                   {artifact_id, preparer, source:
 *                                       {ref, manifest_digest, config_digest},
 *                                       layers, created, size, ...}
 *   <data_root>/prepared/.tmp-<random>/ a preparation in progress, renamed to
 *                                       <artifact_id> only when complete
 *                                       (artifact.json written and the
 *                                       filesystem synced first); never
 *                                       deleted by anyone but its creator,
 *                                       except by `lazaret image gc` once its
 *                                       recorded owner is gone (OR-7)
 *   <data_root>/prepared/.reclaim-<id>/ an artifact being deleted by gc
 *   <data_root>/catalog.db, storage-catalog.lock, storage-gc.lock
 *                                       the Storage Catalog (catalog.h)
 *
 * Prepare intent and publication (catalog.h): before .tmp-<random> is
 * created, a prepare intent (tmp name, artifact ID, this process's pidfs
 * identity) is recorded in the catalog. Publication is one catalog section:
 * the RENAME_NOREPLACE to <artifact_id> happens under the catalog lock, in
 * the transaction that records the artifact 'ready' and deletes the intent.
 * A creator that fails, or loses the race to publish, deletes its tree and
 * then its intent. A published artifact that is reused is registered in the
 * catalog if it is not there yet (no lease is taken here), and its last use
 * is updated; an artifact that gc is reclaiming is not reused (-ESTALE).
 *
 * Image references accepted by lz_image_prepare:
 *   builtin:debian-<suite>   built with mmdebstrap on first use (see
 *                            lz_image_bootstrap), then taken from the store
 *   oci:PATH[:TAG]           an OCI layout directory; with TAG the manifest
 *                            whose ref.name annotation is TAG, else the only
 *                            one. If PATH itself exists it is taken whole.
 *   oci-archive:PATH[:TAG]   a tar of an OCI layout
 *   docker-archive:PATH[:TAG] a `docker save` tarball (manifest.json with
 *                            Config/Layers; TAG matches RepoTags)
 *   [docker://]REGISTRY-REF  e.g. docker.io/library/debian:bookworm; fetched
 *                            with `skopeo copy` as transport only, the first
 *                            time; later the stored copy is used.
 * Store names: builtin and registry references are stored under their
 * normalised form (registry: docker.io/library/NAME:latest rules); local
 * sources as "oci:/abs/path[:TAG]", "oci-archive:/abs/path[:TAG]",
 * "docker-archive:/abs/path[:TAG]". Local sources are re-read on every
 * prepare (blobs already in the store are not copied again; archives are
 * unpacked again). An image index is resolved to the linux/<host arch>
 * manifest; only that manifest is stored under the name.
 *
 * Verification: every blob read from a source is checked against its
 * descriptor's sha256 digest and size before it enters the store (blobs are
 * written to a temporary name and renamed only when they match). Only
 * sha256 digests are accepted. Layers are hashed again while prepared.
 * docker-archive has no layer digests: uncompressed layers are checked
 * against the config's rootfs.diff_ids; the config must parse.
 *
 * Prepared-artifact ID and artifact.json: artifact.h.
 *
 * Concurrency: several processes may import and prepare at once; index.json
 * updates hold images/.lock; two preparations of the same artifact both run
 * and the loser of the RENAME_NOREPLACE discards its tree and reuses the
 * winner's. Leases on prepared artifacts belong to the Storage Catalog, not
 * to this module; nothing here deletes a published artifact (only
 * lz_catalog_gc does, and never a leased one).
 *
 * Modules: oci.[ch] the store and OCI documents; imgref.[ch] references;
 * imgimport.[ch] local sources and registry pulls; imgtool.[ch] running
 * skopeo and mmdebstrap (spawn broker, bounded); bootstrap.[ch] the
 * mmdebstrap image; artifact.[ch] the prepared-artifact record; this file
 * (image.c) preparing and listing.
 */
#pragma once

#include "artifact.h"
#include "bootstrap.h"
#include "prepare.h"

struct lz_prepared {
    char artifact_id[65];
    char *rootfs;          /* absolute: <data_root>/prepared/<id>/rootfs */
    char *manifest_digest; /* "sha256:<hex>" */
    char *source_ref;      /* the store name of the image */
};

/* Resolves image reference `ref`, importing it into the store if needed,
 * then prepares (or reuses) the prepared lower. Progress phases: "pull",
 * "import", "bootstrap" (+ forwarded tool lines), "prepare" (done/total in
 * compressed layer bytes). ret is filled only on success; free with
 * lz_prepared_clear. */
int lz_image_prepare(const char *data_root, const char *ref, lz_progress_fn progress, void *ud, struct lz_prepared *ret,
                     struct lz_error *err);
/* The same, with the host CA certificates ca (hostca.h; NULL or empty:
 * none) added to the prepared tree; the set's digest is part of the
 * prepared artifact's ID. */
struct lz_hostca;
int lz_image_prepare_ca(const char *data_root, const char *ref, const struct lz_hostca *ca, lz_progress_fn progress,
                        void *ud, struct lz_prepared *ret, struct lz_error *err);
void lz_prepared_clear(struct lz_prepared *p);

struct lz_image_info {
    char *name; /* ref.name annotation */
    char *manifest_digest;
    char *config_digest; /* NULL when the manifest is unreadable */
    uint64_t size;       /* manifest + config + layer blob sizes */
};

struct lz_image_list {
    struct lz_image_info *images;
    size_t n_images;
    struct lz_prepared_info *prepared;
    size_t n_prepared;
};

/* Lists the store's images (sorted by name) and the complete prepared
 * artifacts (sorted by source ref, then ID). A missing store is empty. */
int lz_image_list(const char *data_root, struct lz_image_list *ret, struct lz_error *err);
void lz_image_list_clear(struct lz_image_list *l);
