/* sbwrite.h — the host trees the sandbox can write, and what an
 * escalation prompt must say about the files a request names in them.
 *
 * Contract
 * --------
 * The one place that knows which host trees the sandbox can write or
 * Lazaret controls (lz_sbw_trees); every check against them takes its set
 * from here:
 *
 *  LZ_SBW_WRITABLE  what the sandbox can write: the workspace, every
 *                   read-write volume of the profile, the Storage Root
 *                   (persistent directories, the Domain's state, the
 *                   image's upper layers) and Lazaret's runtime directory
 *                   (the mailbox). The escalation prompt's warnings
 *                   (lz_sbw_build, once per Domain).
 *  LZ_SBW_REACH     those, every volume (read-only ones too: the sandbox
 *                   sees them), escalation.socket_dir and the configuration
 *                   file's directory: what an auto-approved program must
 *                   neither lie in nor be pointed at (the configuration's
 *                   load, config_paths.c; each request, autoapprove.h
 *                   lz_autoapprove_trees).
 *
 * Each tree is there by its configured spelling and, when it exists and
 * differs, its real path (right after it); the first tree that holds a
 * path names it in messages, so the order is part of the contract:
 * WRITABLE is the workspace, the volumes, the Storage Root, the runtime
 * directory; REACH is the workspace, the Storage Root, the caller's extra
 * trees, the volumes, escalation.socket_dir, the configuration file's
 * directory, the runtime directory. Relative paths are left out.
 *
 * lz_sbw_find tells whether a host path names an existing file (not a
 * directory) whose bytes or identity the sandbox can change: the path is
 * walked as the kernel resolves it, component by component, following
 * symbolic links (at most 40), and it counts when any place the walk
 * passes through (a directory entry, a link's own location, where a link
 * leads) lies at or beneath a tree. So a file in the workspace, a symbolic
 * link in the workspace pointing elsewhere (the sandbox can point it at
 * another file), a file reached through a workspace directory, and a link
 * outside whose chain passes through the workspace all count;
 * /usr/bin/git does not.
 *
 * lz_sbw_warnings builds the prompt's warning lines for an argv: the
 * executable (argv[0]'s canonical path), every later element that names
 * such a file (as written, or the part after the first '=' of
 * "--opt=PATH"; relative ones from the host working directory), the
 * interpreter on a #! line of the executable, and for a known interpreter
 * (sh, bash, python3, node, ...) with such a script argument, that the
 * script may change after approval. The lines carry no request text
 * (argv elements are named by index), so they need no escaping. The work
 * is bounded: at most LZ_SBW_MAX_ARGS elements are looked at, each at most
 * PATH_MAX bytes.
 */
#pragma once

#include "util.h"

struct lz_config;

#define LZ_SBW_MAX_ARGS 256

struct lz_sbw_tree {
    char *path;
    /* Borrowed: static text ("the workspace", ...) or a name the caller
     * gave (lz_sbw_trees' extra_what), which must outlive the set. */
    const char *what;
};

struct lz_sbw {
    struct lz_sbw_tree *v;
    size_t n;
};

enum lz_sbw_set {
    LZ_SBW_WRITABLE, /* the trees the sandbox can write */
    LZ_SBW_REACH,    /* and the ones Lazaret controls or shows the sandbox */
};

/* Appends path (absolute, else nothing) and its real path when that exists
 * and differs. */
void lz_sbw_add(struct lz_sbw *t, const char *path, const char *what);
/* The set of c (see the contract); extra (n_extra paths, with their names
 * in extra_what) go in after the Storage Root, for REACH only: the
 * configuration's loader names every profile's volumes by their key. */
void lz_sbw_trees(const struct lz_config *c, enum lz_sbw_set set, const char *const *extra,
                  const char *const *extra_what, size_t n_extra, struct lz_sbw *ret);
/* lz_sbw_trees(c, LZ_SBW_WRITABLE, NULL, NULL, 0, ret). */
void lz_sbw_build(const struct lz_config *c, struct lz_sbw *ret);
void lz_sbw_free(struct lz_sbw *t);

/* The tree (its description) in which path can be changed by the sandbox,
 * or NULL. A relative path is taken from base (NULL: not looked at). */
const char *lz_sbw_find(const struct lz_sbw *t, const char *base, const char *path);

/* The known interpreters that read a script operand as they run (by
 * basename without a trailing version: "python3.11" is "python"). */
bool lz_sbw_interpreter(const char *path);

/* The warning lines for argv run as exe (canonical path) in host_cwd:
 * a NULL-terminated vector (free each and the vector), *ret_n lines; NULL
 * and 0 when there is nothing to say. */
char **lz_sbw_warnings(const struct lz_sbw *t, const char *host_cwd, const char *exe, const char *const *argv,
                       size_t argc, size_t *ret_n);
