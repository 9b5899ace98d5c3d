/* ocispec.h — the OCI runtime spec Lazaret hands to runsc.
 *
 * The sandbox runs lazaret-init as PID 1 in private PID, IPC, UTS, mount
 * (and, through runsc's own user namespace handling, user) namespaces; no
 * host namespace path is ever named except the Domain's own enforcement
 * network namespace. Sessions are `runsc exec` processes described by a
 * process spec (lz_oci_process_json).
 *
 * Workspace layout (SR-3, SR-4): /workspace is the canonical workspace,
 * read-write. When it is a Git work tree, `.git` is bound again onto itself
 * (a mount point cannot be renamed: `mv .git x` fails with EBUSY), then
 * `.git/config` read-only (bound inside the rw parent so that Git's atomic
 * replace on the host stays visible), and Git's hook directory is hidden
 * behind a sandbox-local tmpfs (host-tool configuration such as `.vscode`:
 * the router, docs/host-tools.md). See docs/security.md for
 * the full Git threat model and which layer defends each path.
 */
#pragma once

#include "util.h"
#include "worktree.h"

struct lz_oci_bind {
    char *source;      /* host path (absolute) */
    char *destination; /* sandbox path */
    bool read_only;
};

struct lz_sandbox_spec {
    const char *rootfs;    /* prepared lower (absolute, no symlinks) */
    const char *workspace; /* canonical workspace */
    const char *view;      /* the router's view of it (source of /workspace) */
    const char *init_path; /* host path of lazaret-init */
    const char *hostname;
    const char *netns_path;            /* NULL: runsc's own empty network namespace */
    const struct lz_oci_bind *anchors; /* State Anchor layers: mounted first, so that the
                                        * network files and volumes land on top of them */
    size_t n_anchors;
    const struct lz_oci_bind *binds; /* volumes, terminfo, ... */
    size_t n_binds;
    /* A linked worktree (worktree.h), or all NULL: the gitfile shown at
     * /workspace/.git (host path of a file naming
     * LZ_SANDBOX_GIT_COMMON/worktrees/NAME), the common Git directory's
     * router view (mounted at LZ_SANDBOX_GIT_COMMON) and the common Git
     * directory itself (its config bound read-only from there, its hooks
     * hidden: the same defence in depth as a workspace's `.git`). */
    const char *wt_gitfile;
    const char *wt_common_view;
    const char *wt_common;
    /* ...and the worktree's id and a file naming /workspace/.git, bound
     * over its `gitdir` (which names the host path, absent inside: Git's
     * `worktree prune`, run by `git gc`, would take the worktree for a
     * stale one and delete what it can of it). */
    const char *wt_name;
    const char *wt_gitdir_file;
    /* Private directories (privdirs.h): store directories (source)
     * bound read-write, nosuid and nodev, over /workspace/REL
     * (destination), after the workspace's own mounts. */
    const struct lz_oci_bind *private_dirs;
    size_t n_private_dirs;
    /* Test builds only (LAZARET_TEST_INIT_PRELUDE): a shell command the
     * sandbox's first process runs in the background before it execs
     * lazaret-init (tests/network/test_network.py, test_first_process_*); NULL: none. */
    const char *test_prelude;
};

/* Builds the workspace mount list (the Git protection layout) by looking
 * at the workspace through dirfd-relative, no-follow lookups. Writable
 * sources come from `view` (the router's FUSE view, which enforces the Git
 * policy); the read-only `.git/config` is bound from the workspace itself
 * so that the host's atomic replaces stay visible. Appends to *binds /
 * *tmpfs_dests. */
int lz_oci_workspace_mounts(const char *workspace, const char *view, struct lz_oci_bind **binds, size_t *n_binds,
                            char ***tmpfs_dests, size_t *n_tmpfs, struct lz_error *err);

int lz_oci_sandbox_config(const struct lz_sandbox_spec *s, char **ret_json, struct lz_error *err);

struct lz_exec_spec {
    char *const *argv;
    char *const *envv;
    const char *cwd;
    bool terminal;
    uint16_t rows, cols;
};
int lz_oci_process_json(const struct lz_exec_spec *e, char **ret_json, struct lz_error *err);

void lz_oci_binds_free(struct lz_oci_bind *b, size_t n);
