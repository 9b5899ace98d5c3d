/* Ignored Workspace State routing: which backing serves a workspace path.
 *
 * The router presents one tree. Each path is served by exactly one backing:
 * the host workspace (tracked and ordinary non-ignored paths) or the
 * Domain's Ignored Workspace State (git-ignored untracked paths), a private
 * directory tree under the Domain Root. docs/ignored-state.md has the rules
 * for users; this is how they are decided.
 *
 * Inputs, all read on the host side with libgit2:
 *  - the ignore rules: `.gitignore` at every level, `$GIT_DIR/info/exclude`
 *    (read-only to the sandbox: router policy), the host user's
 *    `core.excludesFile` (default `$XDG_CONFIG_HOME/git/ignore`);
 *  - the tracked paths: the host's index as it was when the router started.
 *
 * The sandbox writes `.gitignore` files (they are tracked, shared files),
 * so their live contents cannot decide what the sandbox may see: rules are
 * evaluated from an "accepted" copy of each directory's `.gitignore`, kept
 * in `<state>/rules/tree/` and taken from the host's file
 *  - the first time the directory is looked at in a run, unless the
 *    sandbox was the last to write it (recorded in `<state>/rules/meta/`:
 *    a fingerprint of what the sandbox left, or "dirty" while it writes), or
 *    the directory came into place by a sandbox rename
 *    (`<state>/rules/renamed`);
 *  - never during a run afterwards: a path's backing does not change while
 *    the Domain runs.
 * A tracked path that an ignore rule matches stays on the host only while
 * its content is the blob the index records (a forged index entry cannot
 * expose a host file). `.git` at any depth is always the host's.
 */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

#include "util.h"

enum rt_backing { RT_HOST = 0, RT_STORE = 1 };

struct rt_ignore;

/* Opens routing for the workspace at root_path (canonical), with its state
 * in the directory open at state_fd (it holds `tree/`, the store, and
 * `rules/`). home and xdg_config (may be NULL) locate the host user's
 * global Git configuration. *ret is NULL (and 0 returned) when the
 * workspace is not in a Git work tree: nothing is then ignored. */
int rt_ignore_open(struct rt_ignore **ret, const char *root_path, int state_fd, const char *home,
                   const char *xdg_config, struct lz_error *err);
/* The store alone, without ignore rules (every path routes to the host):
 * for the host-tool configuration paths (htseed.h) of a workspace without
 * a Git work tree or with ignored_state = false. */
int rt_ignore_open_store(struct rt_ignore **ret, int state_fd, struct lz_error *err);
void rt_ignore_free(struct rt_ignore *ig);

/* The store's root directory (O_PATH), owned by ig. */
int rt_ignore_store_fd(const struct rt_ignore *ig);

/* The backing of workspace-relative path rel (non-empty, no leading '/'),
 * an entry of type directory when is_dir; host_st is the host's entry of
 * that path, or NULL when the host has none. RT_HOST, RT_STORE or -errno.
 * Decisions are remembered for the run. */
int rt_ignore_route(struct rt_ignore *ig, const char *rel, bool is_dir, const struct stat *host_st);

/* The sandbox is about to change the `.gitignore` at workspace-relative
 * path rel (create, write, truncate, unlink, rename to or from): its
 * directory's rules are accepted now if they were not yet, and it is
 * recorded durably that the sandbox is writing it. No-op for other names. */
void rt_ignore_will_change(struct rt_ignore *ig, const char *rel);
/* The change is done: what the sandbox left is fingerprinted. */
void rt_ignore_changed(struct rt_ignore *ig, const char *rel);
/* The sandbox moved a directory to workspace-relative path rel: the
 * `.gitignore` files below it are the sandbox's. */
void rt_ignore_renamed_dir(struct rt_ignore *ig, const char *rel);

/* 1 if the last component of rel is `.gitignore`. */
bool rt_ignore_is_rules_file(const char *rel);

/* The directory rel below base (O_PATH | O_DIRECTORY, no symlink
 * followed), made (mode 0755) where missing when create; fd or -errno. */
int rt_open_dir_p(int base, const char *rel, bool create);
