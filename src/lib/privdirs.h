/* privdirs.h — a profile's private_dirs: git-ignored directories of the
 * workspace (node_modules, target, .venv) that the sandbox gets as direct
 * binds of their copies in the Domain's Ignored Workspace State, without
 * the router (docs/ignored-state.md, "Private directories").
 *
 * The router already serves such a path from the store
 * (`<Domain>/ignored/tree/PATH`); a bind of that same directory over
 * /workspace/PATH only takes the FUSE round trips away. So a private
 * directory must be one the router would give the store: git-ignored and
 * holding nothing tracked, checked with the host's git at every start.
 * The sandbox sees the bind as another file system: renames and hard
 * links across its boundary give EXDEV, as across the router's backings.
 */
#pragma once

#include "util.h"

/* At most this many private directories in a profile, and bytes in one. */
#define LZ_PRIVDIRS_MAX 16
#define LZ_PRIVDIR_PATH_MAX 1024

/* NULL when rel may be a private directory (a workspace-relative path:
 * not empty, no leading or trailing '/', no empty, "." or ".." component,
 * no `.git` component in any case, no control byte, components of at most
 * 255 bytes), else why not (a static string). */
const char *lz_privdir_invalid(const char *rel);

/* 1 if a equals b or one lies beneath the other (component-wise). */
bool lz_privdirs_nested(const char *a, const char *b);

/* The start-time checks against the host work tree at workspace, with
 * the host's git (git: its absolute path, NULL when there is none): each
 * directory is git-ignored (`git check-ignore`), holds no tracked file
 * (`git ls-files`), and its parents on the host are directories, not
 * symlinks (those that are absent must be git-ignored themselves: the
 * store then makes them). 0, or a negative errno with err saying which
 * and what to do. */
int lz_privdirs_check(const char *workspace, const char *git, char *const *dirs, size_t n, struct lz_error *err);

/* The bind sources: each directory made below store_tree (the store's
 * `tree/`, made too) where missing, no symlink followed on the way, and
 * its absolute path returned in (*ret)[i] (free with lz_strv_free(*ret,
 * n)) once the path, as the kernel resolves it now, names the directory
 * that was made or found. A symlink or a non-directory in the way is an
 * error: the sandbox may have put it there in an earlier run. */
int lz_privdirs_sources(const char *store_tree, char *const *dirs, size_t n, char ***ret, struct lz_error *err);
