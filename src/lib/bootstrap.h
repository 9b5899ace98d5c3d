/* bootstrap.h — the default base image, built with mmdebstrap.
 *
 * mmdebstrap runs as the invoking user (root mode as root, unshare mode
 * with subuids otherwise) through lz_tool_run (imgtool.h, bounded by
 * LZ_TOOL_TIMEOUT_MIN) and writes one tar into a scratch directory of the
 * store; that tar becomes the image's only layer (hashed in place and
 * renamed into blobs/), with a generated config and manifest, stored as
 * "builtin:debian-<suite>". Runs are serialised by images/.bootstrap.lock.
 *
 * An agent image ("builtin:agent-NAME", agents.h) is the same base plus
 * LZ_AGENT_PACKAGES, with the agent's npm package installed globally by
 * mmdebstrap's customize hook (chroot; npm reaches the registry the way
 * apt reaches the mirror: the host's network, the proxies of
 * lz_tool_env) and checked with `NAME --version` before it is stored.
 * Needs the Debian mirror and the npm registry. */
#pragma once

#include "prepare.h"

/* Packages added to --variant=minbase by lz_image_bootstrap. */
#define LZ_BOOTSTRAP_PACKAGES "bash,git,ca-certificates,less,vim-tiny,procps,ncurses-base"
/* The PATH of commands run inside the new root (Debian's default). */
#define LZ_CHROOT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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
/* The same for an agent image (agent: a name of agents.h), stored as
 * "builtin:agent-NAME"; the caller holds images/.bootstrap.lock. */
int lz_bootstrap_agent_locked(const struct lz_oci_store *st, const char *agent, lz_progress_fn progress, void *ud,
                              struct lz_error *err);
/* `lazaret image bootstrap --agent NAME [--refresh]`: builds the agent
 * image when the store has none, or always with refresh (a newer release
 * of the agent; Domains take it at their next start). Returns 0 when it
 * built, 1 when the image was there already (and refresh was false). */
int lz_image_bootstrap_agent(const char *data_root, const char *agent, bool refresh, lz_progress_fn progress, void *ud,
                             struct lz_error *err);
