/* worktree.h — a workspace that is a linked worktree (`git worktree add`).
 *
 * A linked worktree's `.git` is a gitfile, `gitdir: COMMON/worktrees/NAME`:
 * its own Git directory (HEAD, index, logs/HEAD, rebase state) lies in the
 * main repository's Git directory COMMON, outside the workspace, and its
 * `commondir` file names COMMON (objects, refs, config, hooks). Inside the
 * sandbox neither host path exists, so Lazaret serves COMMON through a
 * second router in linked-worktree mode (router.h: the Domain's own
 * worktrees/NAME writable as a Git directory; the config, the hooks, the
 * main work tree's own state and every other worktree read-only; the main
 * work tree's files not served at all) at LZ_SANDBOX_GIT_COMMON, and binds
 * over /workspace/.git a gitfile naming LZ_SANDBOX_GIT_COMMON/worktrees/NAME
 * (its `commondir`, `../..`, then lands on the common directory by itself),
 * and over that worktree's `gitdir` a file naming /workspace/.git (the
 * host path it holds does not exist inside, and `git gc`'s `worktree
 * prune` would take the worktree for a stale one).
 * docs/security-git.md, "Linked worktrees".
 *
 * lz_worktree_probe() reads the host's files as they are when the Domain
 * starts (or when `config check` and `ps` ask): a gitfile the developer
 * rewrites later counts from the next start. Only Git's standard layout is
 * accepted: the gitfile's target is COMMON/worktrees/NAME and its
 * `commondir` resolves to COMMON. A submodule's gitfile (COMMON/modules/X)
 * is not a linked worktree: such a workspace keeps today's view (its
 * `.git` is a read-only gitfile naming a host path).
 */
#pragma once

#include "util.h"

/* Where the common Git directory appears inside the sandbox. Named like
 * a repository's `.git` so that Git's own idea of the main work tree (the
 * common directory's parent) is an empty directory, not the workspace. */
#define LZ_SANDBOX_GIT_COMMON "/run/lazaret/repo/.git"

struct lz_worktree {
    char *gitdir; /* canonical COMMON/worktrees/NAME */
    char *common; /* canonical common Git directory */
    char *name;   /* NAME */
    char *repo;   /* the main work tree (COMMON's parent when COMMON ends in /.git), else COMMON (bare) */
};

/* 1 with *ret filled when workspace/.git is the gitfile of a linked
 * worktree; 0 when it is not (no `.git`, a directory, a submodule's
 * gitfile, not a gitfile); a negative errno with err when it is one but
 * cannot be served (a missing or unusual Git directory, one that overlaps
 * the workspace). */
int lz_worktree_probe(const char *workspace, struct lz_worktree *ret, struct lz_error *err);
void lz_worktree_clear(struct lz_worktree *w);

/* What HEAD of Git directory gitdir names: the branch ("feature"), or
 * "detached at 1234abcd"; malloc'd, or NULL when unreadable. */
char *lz_worktree_head(const char *gitdir);

/* The content of the gitfile bound at /workspace/.git for worktree name
 * (malloc'd). */
char *lz_worktree_gitfile(const char *name);

/* `lazaret run --worktree NAME`: the linked worktree NAME of the repository
 * holding workspace (its main work tree, or one of its linked worktrees),
 * made by the host's own git when it does not exist yet (`git worktree add
 * PATH -b NAME`, or `git worktree add PATH NAME` when the branch exists;
 * its output goes to stderr), at PATH = the main work tree's sibling
 * `<repo>-NAME`. An existing PATH must be a linked worktree of the same
 * repository. NAME: letters, digits, '.', '_', '-' (not first), at most 64,
 * no ".." and no ".lock" end. On success *ret_path is PATH (malloc'd). The
 * git run gets this process's environment: it is the developer's own
 * command, hooks included, run as they would run it by hand. */
int lz_worktree_create(const char *workspace, const char *name, char **ret_path, struct lz_error *err);
