/* bootstrap.h — the default base image, built with mmdebstrap.
 *
 * mmdebstrap runs as the invoking user (root mode as root, unshare mode
 * with subuids otherwise) through lz_tool_run (imgtool.h, bounded by
 * LZ_TOOL_TIMEOUT_MIN) and writes one tar into a scratch directory of the
 * store; that tar becomes the image's only layer (hashed in place and
 * renamed into blobs/), with a generated config and manifest, stored as
 * "builtin:debian-<suite>". Runs are serialised by images/.bootstrap.lock. */
#pragma once

#include "prepare.h"

/* Packages added to --variant=minbase by lz_image_bootstrap. */
#define LZ_BOOTSTRAP_PACKAGES "bash,git,ca-certificates,less,vim-tiny,procps,ncurses-base"

struct lz_oci_store;

/* Builds the default base image and stores it as "builtin:debian-<suite>"
 * (replacing an older image of that name). suite: [a-z0-9-]{1,32}. Needs
 * the Debian mirror. */
int lz_image_bootstrap(const char *data_root, const char *suite, lz_progress_fn progress, void *ud,
                       struct lz_error *err);
/* The build itself, with images/.bootstrap.lock held by the caller (who
 * checks first whether another process built it meanwhile). */
int lz_bootstrap_locked(const struct lz_oci_store *st, const char *suite, lz_progress_fn progress, void *ud,
                        struct lz_error *err);
