/* Renames that would un-hide the host's hidden files.
 *
 * A host directory the sandbox can see may hold host entries the sandbox
 * cannot see: ignored by Git's rules and untracked, they are served from
 * the Domain's store instead (ignore.h). A rename of the directory moves
 * those host entries with it, on the host's disk. If the rules do not hide
 * an entry at its new path (`/config/secrets.env` is anchored: after
 * `mv config config2` it would match nothing), the sandbox would read the
 * host's file there, and the host's own git would list it as untracked,
 * for the developer's next `git add -A` to commit.
 *
 * So before the router renames a host directory, every host entry below it
 * that is hidden now is evaluated at the path it would get; the rename is
 * refused (EXDEV, as across file systems: `mv` then copies what the
 * sandbox can see and leaves the hidden entries where they are) when one
 * of them would be visible there. docs/ignored-state.md has the why.
 */
#pragma once

#include <stddef.h>

#include "ignore.h"

/* Bounds of the walk of the moved directory's host subtree: entries
 * looked at, and depth. Past them the rename is refused (fails closed;
 * `mv` copies instead). */
#define RT_HIDDEN_MAX_ENTRIES 100000u
#define RT_HIDDEN_MAX_DEPTH 64u

/* The host directory open at fd (O_PATH or not; not consumed), at
 * workspace-relative path `from`, is about to be moved to workspace-
 * relative path `to`. Returns 0 when every host entry below it that the
 * routing hides (RT_STORE) would still be hidden at its new path; -EXDEV
 * when one would not, its path (at `from`) copied to bad (NUL-terminated,
 * truncated to bad_size); -E2BIG past the bounds above; or another
 * -errno. Below a hidden directory nothing is looked at: all of it is
 * hidden with it. Entries named `.git` are skipped: they are the host's
 * wherever they are (security-git.md). */
int rt_hidden_check_move(struct rt_ignore *ig, int fd, const char *from, const char *to, char *bad, size_t bad_size);
