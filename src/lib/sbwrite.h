/* sbwrite.h — the host trees the sandbox can write, and what an
 * escalation prompt must say about the files a request names in them.
 *
 * Contract
 * --------
 * A Domain's sandbox-writable trees (lz_sbw_build, once per Domain): the
 * workspace, every read-write volume of the profile, the Storage Root
 * (persistent directories, the Domain's state, the image's upper layers)
 * and Lazaret's runtime directory (the mailbox), each by its configured
 * spelling and its real path.
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
    const char *what; /* static text: "the workspace", ... */
};

struct lz_sbw {
    struct lz_sbw_tree *v;
    size_t n;
};

void lz_sbw_add(struct lz_sbw *t, const char *path, const char *what);
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
