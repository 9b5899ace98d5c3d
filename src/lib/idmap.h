/* idmap.h — the Domain's ID mapping.
 *
 * A Domain's user namespace maps the developer to 0 and, when
 * /etc/subuid and /etc/subgid give the developer a range and newuidmap and
 * newgidmap are installed, that range (at most 65536 IDs) to 1..N. Without
 * a range only the developer is mapped (files of other owners in the image
 * then show as nobody). The same mapping serves the Runtime Supervisor and
 * the `lazaret state reset` deletion helper, so that files a non-root
 * sandbox user created are deletable without root.
 */
#pragma once

#include "util.h"
#include <sys/types.h>

/* The developer's subordinate ranges (uid start/count, gid start/count),
 * each at most 65536 long: sandbox ID u >= 1 is host ID start + u - 1. */
struct lz_idmap_ranges {
    unsigned long us, un, gs, gn;
};

/* True, with the ranges, when the subordinate ranges and the setuid tools
 * are there (then the Domain maps them). */
bool lz_idmap_ranges(struct lz_idmap_ranges *ret);

/* The range of `user` (or its numeric uid) in an /etc/subuid-style file
 * that a Domain maps: the first matching line, its count capped at 65536.
 * False when there is none. */
bool lz_subid_range(const char *file, const char *user, uid_t uid, unsigned long *ret_start, unsigned long *ret_count);

/* True when the subordinate ranges and the setuid tools are there. */
bool lz_idmap_have_subids(void);

/* Writes the maps of the process `pid`, which must be held (e.g. at the
 * spawn broker's barrier) in a new user namespace. */
int lz_idmap_write(pid_t pid, struct lz_error *err);
