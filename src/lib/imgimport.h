/* imgimport.h — bringing an image into the store (oci.h) from a local
 * source (oci:, oci-archive:, docker-archive:) or a registry (skopeo).
 *
 * Every blob read from a source is checked against its descriptor's sha256
 * digest and size before it enters the store. docker-archive has no layer
 * digests: uncompressed layers are checked against the config's
 * rootfs.diff_ids; the config must parse. Archives are unpacked by the
 * preparer (prepare.h) into a private scratch directory of the store. */
#pragma once

#include "imgref.h"
#include "oci.h"

/* Imports the local source p (LZ_REF_OCI, LZ_REF_OCI_ARCHIVE or
 * LZ_REF_DOCKER_ARCHIVE) under its store name; *ret_digest: the manifest
 * digest. Progress phases "unpack", "import". */
int lz_image_import_local(const struct lz_oci_store *st, const struct lz_image_ref *p, lz_progress_fn progress,
                          void *ud, char **ret_digest, struct lz_error *err);
/* Fetches a registry image with `skopeo copy` (transport only) into a
 * scratch layout, then imports it like a local one. Phase "pull". */
int lz_image_pull_registry(const struct lz_oci_store *st, const struct lz_image_ref *p, lz_progress_fn progress,
                           void *ud, char **ret_digest, struct lz_error *err);
