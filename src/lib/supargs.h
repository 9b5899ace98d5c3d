/* supargs.h — the Runtime Supervisor's arguments: the struct and its codec.
 *
 * The coordinator starts `lazaret-core __supervisor` (supervisor.h) with
 * these fields as arguments (lz_supargs_encode); the Supervisor turns its
 * argv back into the struct (lz_supargs_decode). Both go through the one
 * table of supargs.c (argcodec.h), so what one side writes is what the
 * other reads. The decoder is strict: an unknown, repeated (but for the
 * lists), malformed or missing argument is refused with a message; so is
 * a State Anchor half given (--persist without --rootfs, --anchor-root
 * and --anchor-target, or those without --persist) and a --volume without
 * its --volume-view (pairs, by position).
 */
#pragma once

#include "util.h"

#define LZ_RS_VOLUMES_MAX 32 /* writable volumes, each with its own router */
#define LZ_RS_DENY_MAX 16
#define LZ_RS_PERSIST_MAX 256 /* persistent dirs */

struct lz_supervisor_args {
    int ctl_fd;
    const char *runsc;      /* absolute path of runsc */
    const char *state_dir;  /* runsc --root */
    const char *bundle_dir; /* holds config.json */
    const char *container_id;
    const char *overlay_dir;   /* filestore of the root overlay */
    const char *router;        /* lazaret-router binary */
    const char *workspace;     /* canonical workspace (router source) */
    const char *view;          /* where the router mounts the workspace view */
    char **protect;            /* extra workspace-relative paths the router keeps read-only */
    int policy_fd;             /* sealed memfd: canonical network policy bytes */
    const char *policy_digest; /* hex SHA-256 the bytes must have */
    int addr_fd;               /* host-namespace address watch (netfollow.h), or -1 */
    int refusal_fd;            /* the routers' refusal records to the coordinator (refusal.h), or -1 */
    size_t n_protect;
    const char *rootfs;        /* prepared lower (State Anchor lower) */
    const char *anchor_root;   /* <domain_dir>/anchor-<N> */
    const char *anchor_target; /* <gen_dir>/anchor */
    char **persist;            /* persistent dirs (sandbox paths) */
    size_t n_persist;
    /* Writable volumes: each served by its own lazaret-router --plain from
     * vol_source[i] at vol_view[i] (the OCI spec names the view); staged
     * as slot "vol<i>". */
    char **vol_source, **vol_view;
    size_t n_volumes;
    size_t n_vol_view; /* the codec's count of vol_view: n_volumes once decoded */
    /* A linked worktree's id (worktree.h), or NULL: then the last volume
     * is its common Git directory, served with the Git policy in
     * linked-worktree mode (lazaret-router --linked-worktree), not
     * --plain. */
    const char *worktree;
    char **deny_link;          /* --deny-link-target for every router */
    const char *ignored_state; /* the Domain's Ignored Workspace State, or NULL (routing off) */
    const char *git_home;      /* the host user's HOME and XDG_CONFIG_HOME, for its Git ignore rules */
    const char *git_xdg;
    bool no_ignore_rules; /* the store serves the host-tool paths alone (ignored_state = false) */
    char **host_tools;    /* host-tool configuration paths (hosttools.h) */
    size_t n_host_tools;
    const char *mailbox; /* <gen_dir>/mailbox: mount req/ and res/ (above), or NULL */
    size_t n_deny_link;
    int start_timeout_ms; /* LZ_RS_T_START_MS (rschan.h); not an argument */
};

/* argv for execve: self, "__supervisor", then a's arguments
 * (NULL-terminated; free with lz_argv_free). -EINVAL, -E2BIG with err set
 * when a could not be decoded back (a required field absent, a bound
 * exceeded). */
int lz_supargs_encode(const struct lz_supervisor_args *a, const char *self, char ***ret_argv, struct lz_error *err);

/* The arguments after "__supervisor" (argv[0..argc-1]) into *ret (strings
 * point into argv; start_timeout_ms is LZ_RS_T_START_MS). 0, or -EINVAL
 * with err set and *ret zeroed. Free with lz_supargs_clear. */
int lz_supargs_decode(int argc, char *const *argv, struct lz_supervisor_args *ret, struct lz_error *err);
void lz_supargs_clear(struct lz_supervisor_args *a);
