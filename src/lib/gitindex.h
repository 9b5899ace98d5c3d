/* gitindex.h — is a Git index written by the sandboxed agent safe for the
 * host's git to read?
 *
 * Git trusts its index: `git checkout -- .`, `git restore .` and
 * `git checkout-index -a -f` write every entry by name, so an index naming
 * `.git/hooks/post-checkout` or `../x` makes the host's git write there.
 * Git only applies its path rules (read-cache.c verify_path) when entries
 * are added, never when an index is read. lazaret-router calls
 * lz_gitindex_verify() on the complete bytes of a file before it may become
 * `index` or `sharedindex.<hex>` in a Git directory, and refuses the rename
 * on any non-zero answer.
 *
 * Return codes: 0 safe; -EPERM something Git would read and act on that its
 * own rules (or ours, which are stricter) refuse; -EINVAL bytes Git itself
 * could not read (truncated, bad header, unknown required extension).
 * The trailing checksum is not verified (Git verifies it itself).
 */
#pragma once

#include "util.h"

/* Longest path accepted in an index entry: no checkout can create a
 * longer one (PATH_MAX), and it bounds what a v4 index can make us build. */
#define LZ_GITINDEX_NAME_MAX 4096

/* The largest index file Lazaret reads to check (an index of a million
 * files is about 100 MiB); a larger one is refused. */
#define LZ_GITINDEX_MAX ((size_t)512 << 20)

/* 0 if Git's verify_path() rules (strictest platform variants) accept
 * `name` (len bytes, not necessarily NUL-terminated) as an index entry with
 * `mode` (S_IFREG|0644/0755, S_IFLNK, 0160000 gitlink, S_IFDIR for sparse
 * directory entries, which end in '/'), -EPERM otherwise. */
int lz_git_path_check(const char *name, size_t len, unsigned mode);

/* Checks buf as an index whose object IDs are hash_len bytes (20 SHA-1, 32
 * SHA-256): versions 2-4, every entry, every extension, the trailing hash's
 * presence. 0, -EPERM or -EINVAL (see above); err (may be NULL) gets one line
 * naming the problem, paths shown with control characters escaped. Never
 * reads outside buf. */
int lz_gitindex_check(const void *buf, size_t len, unsigned hash_len, struct lz_error *err);

/* The router's rule: lz_gitindex_check() with hash_len must give 0, and
 * the other hash length must not give -EPERM either (a misread repository
 * configuration must not open a hole), unless Git could not read the bytes
 * with that length at all: for the 32-byte reading, a trailing hash that
 * is neither the SHA-256 of the content nor all zero (index.skipHash) is
 * refused by Git itself. 0 or the refusing code. */
int lz_gitindex_verify(const void *buf, size_t len, unsigned hash_len, struct lz_error *err);

/* 20 or 32: the object ID length of a repository whose config text is given
 * (`[extensions] objectFormat = sha256`, Git config syntax). Anything else,
 * including text that does not parse, gives 20. */
unsigned lz_git_config_hash_len(const char *text, size_t len);

/* The one check of an index file the host's git would read: reads the
 * regular file index_fd (at most LZ_GITINDEX_MAX bytes, to EOF) and
 * lz_gitindex_verify()s it with the object ID length that the `config`
 * of the Git directory gitdir_fd names (20 when it has none or it cannot
 * be read: the other length is checked anyway). 0 when safe; -EFBIG when
 * larger than Lazaret checks, another negative errno when it cannot be
 * read, or the refusing code of lz_gitindex_verify(); err says which. */
int lz_gitindex_verify_fd(int index_fd, int gitdir_fd, struct lz_error *err);
