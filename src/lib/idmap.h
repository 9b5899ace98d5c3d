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

/* True when the subordinate ranges and the setuid tools are there. */
bool lz_idmap_have_subids(void);

/* Writes the maps of the process `pid`, which must be held (e.g. at the
 * spawn broker's barrier) in a new user namespace. */
int lz_idmap_write(pid_t pid, struct lz_error *err);
