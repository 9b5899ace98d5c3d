/* gitrefs.h — is a packed-refs file written by the sandboxed agent free of
 * the refs that change what the host's git displays?
 *
 * `refs/replace/<oid>` makes git log/diff/show/blame/checkout use another
 * object in place of <oid>, while `git push` sends the real one; the notes
 * under `refs/notes/` are shown by `git log`. The router keeps both
 * directories read-only (router.c); the same refs can also arrive as lines
 * of `packed-refs` (`<oid> refs/replace/<oid>`, written by hand or by
 * `git pack-refs`). lazaret-router calls lz_packedrefs_verify_fd() on the
 * complete bytes of a file before it may become `packed-refs` in a Git
 * directory, and refuses the rename on any non-zero answer; the Domain
 * start scan uses lz_packedrefs_check() to report such lines the
 * developer's repository already holds.
 *
 * The grammar is Git's (refs/packed-backend.c): an optional first line
 * `# pack-refs with: <traits>`, then lines `<hex oid> SP <refname> LF`,
 * each optionally followed by `^<hex oid> LF` (the peeled tag). Git dies
 * on anything else, so nothing else is accepted (-EINVAL).
 *
 * Return codes: 0 clean; -EPERM a ref under refs/replace/ or refs/notes/
 * (any case, anywhere in the name); -EINVAL bytes Git would not read as
 * packed-refs, or a ref name Git itself does not write (control
 * characters, space, `~^:?*[\`, `..`, `//`, a component starting with '.', longer than
 * LZ_PACKEDREFS_NAME_MAX).
 */
#pragma once

#include "util.h"

#define LZ_PACKEDREFS_NAME_MAX 4096
/* The largest packed-refs file Lazaret reads to check (a million refs is
 * about 100 MiB); a larger one is refused. */
#define LZ_PACKEDREFS_MAX ((size_t)256 << 20)

/* Checks buf (len bytes, not NUL-terminated). 0, -EPERM or -EINVAL;
 * err (may be NULL) gets one line naming the first problem. When n_display
 * is non-NULL the whole buffer is read and *n_display is the number of
 * refs under refs/replace/ or refs/notes/ (the first one named in err);
 * otherwise it stops at the first problem. Never reads outside buf. */
int lz_packedrefs_check(const void *buf, size_t len, size_t *n_display, struct lz_error *err);

/* lz_packedrefs_check() where a replace or notes ref is accepted when
 * allow (if not NULL) returns true for its object ID (hex, oid_len bytes)
 * and name (name_len bytes, a ref name as Git writes one). */
typedef bool (*lz_packedrefs_allow_fn)(void *ctx, const char *oid, size_t oid_len, const char *name, size_t name_len);
int lz_packedrefs_check_allow(const void *buf, size_t len, lz_packedrefs_allow_fn allow, void *ctx, size_t *n_display,
                              struct lz_error *err);

/* Reads the regular file fd (at most LZ_PACKEDREFS_MAX bytes, to EOF) and
 * checks it. With gitdir_fd (-1: none) the Git directory it is to become
 * packed-refs of: a replace or notes ref is accepted when the same ref,
 * with the same object ID, is already there (a line of the current
 * packed-refs, or the loose ref file): those are the developer's, which
 * the sandbox cannot add or change, and `git pack-refs`, `git gc` and
 * `git branch -d` rewrite packed-refs with them. 0; -EFBIG when larger
 * than Lazaret checks; another negative errno when it cannot be read; or
 * the refusing code of lz_packedrefs_check(); err says which. */
int lz_packedrefs_verify_fd(int fd, int gitdir_fd, struct lz_error *err);
