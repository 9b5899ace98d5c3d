/* router_link.h — symlink targets the host would follow into Lazaret's
 * own storage (pure).
 *
 * A symlink in the workspace is never followed by lazaret-router, but the
 * developer's shell, editor and Git on the host do follow it: `cd link &&
 * git status` with `link` pointing into the Storage Root (say a repository
 * the agent made in the State Anchor, with its own hooks) would run the
 * agent's code. So a symlink the agent makes (symlink, or moves: rename,
 * link) is refused when its target, resolved as the host would from the
 * link's real directory, is a denied path (--deny-link-target), lies
 * inside one, or is an ancestor of one (`t -> ~/.local` then
 * `u -> t/share/lazaret` would chain into it).
 *
 * Resolution: existing components with the host's symlinks followed, the
 * rest lexically. That judgement must stay true after later operations,
 * so a target with ".." after a name (`d/../..`) is refused: `d` may later
 * become a symlink somewhere else, and ".." would then climb from there.
 * Leading ".." climb through the real parents of the link, which change
 * only when a directory is moved: the router checks a moved directory's
 * symlinks again at their new place.
 *
 * What exists on the host is asked through a callback, so the whole rule
 * runs in unit tests and under the fuzzer against a fake tree.
 *
 * Contract: lz_router_link_check() returns 0 (allowed), -EPERM (refused:
 * a denied target, a resolution through a denied path or the router's own
 * mount point, more than LZ_LINK_FOLLOW_MAX symlinks, ".." after a name),
 * -ENAMETOOLONG, or the negative errno the callback returned. All paths
 * are absolute; `target` is the agent's bytes, any length or content.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define LZ_LINK_FOLLOW_MAX 40

struct lz_router_link_policy {
    /* Canonical absolute host paths no link may reach; n_deny == 0 allows
     * everything. */
    const char *const *deny;
    size_t n_deny;
    /* The source root's absolute path now: a volume kept under a denied
     * path may link within itself. */
    const char *root;
    /* The router's mount point (canonical), never looked at (the router
     * would wait for itself); NULL if none. */
    const char *mountpoint;
    /* The host's entry at absolute path `path`: if it is a symlink, its
     * target (NUL-terminated, truncated to size - 1) is written to buf and
     * 1 returned; 0 if it is not a symlink or does not exist; a negative
     * errno if the link cannot be read. */
    int (*readlink)(void *ctx, const char *path, char *buf, size_t size);
    void *ctx;
};

/* true when absolute path `a` is `b` or below it, component-wise
 * (`/a/bc` is not below `/a/b`; everything is below `/`). The router
 * also refuses a mount point and source, or a store and workspace, that
 * contain each other with it. */
bool lz_router_abs_within(const char *a, const char *b);

/* true when `target` has no ".." after a name (see above). */
bool lz_router_link_shape_ok(const char *target);

/* true when absolute path `p` may not be a link's resolved target: a
 * denied path, inside one, or an ancestor of one (unless the root's own
 * volume case above). */
bool lz_router_link_denied(const struct lz_router_link_policy *pol, const char *p);

/* Resolves `target` from directory `base` (absolute, real) as the host
 * would, into `out` (PATH_MAX + 1 bytes); see the contract. */
int lz_router_link_resolve(const struct lz_router_link_policy *pol, const char *base, const char *target, char *out);

/* 0 if a symlink to `target` may live in directory `base`, else the
 * contract's errors. */
int lz_router_link_check(const struct lz_router_link_policy *pol, const char *base, const char *target);
