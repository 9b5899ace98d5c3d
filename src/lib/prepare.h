/* prepare.h — the OCI-aware preparer core (FR-22, SR-15).
 *
 * The preparer applies one OCI layer stream onto a directory. The stream is
 * untrusted (an attacker may control every byte of it); the rules below are
 * the whole contract, and every rule is checked before anything is created.
 *
 * Input: plain tar, tar+gzip or tar+zstd, detected from the bytes (the media
 * type is not trusted). Formats: ustar, pax, GNU tar (libarchive's tar reader,
 * in-process zlib/libzstd; an external decompressor is never spawned).
 *
 * Paths:
 *   - Leading "/" and "./" are stripped (as tar does), empty and "."
 *     components are dropped; any ".." component refuses the layer.
 *   - A path of PATH_MAX bytes or more, or a component longer than NAME_MAX,
 *     refuses the layer. Names are C strings: libarchive cuts a name at an
 *     embedded NUL and the remainder is validated like any other name.
 *   - Every parent directory is reached with openat2(RESOLVE_BENEATH |
 *     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): a
 *     parent that is a symlink (from this or a lower layer) or not a directory
 *     refuses the layer. Unlike Docker, symlinks are never resolved "in
 *     scope"; a layer must name real directories.
 *   - Missing parents are created (mode 0755, owned by the caller).
 *   - The root entry ("./", "/") is skipped: the rootfs directory keeps the
 *     mode its creator gave it.
 *   - A non-final component beginning with ".wh." refuses the layer.
 *
 * Entries:
 *   - Existing entries are replaced, never written through: a non-directory
 *     is unlinked (a directory removed recursively) before the new entry is
 *     created with O_EXCL|O_NOFOLLOW. A directory entry over an existing
 *     directory merges (metadata updated).
 *   - Regular files: data bounded by the entry's declared size (sparse
 *     entries supported); declared size above LZ_PREPARE_MAX_FILE_SIZE, or
 *     total data above the layer budget, refuses the layer. Any other entry
 *     declaring more than LZ_PREPARE_MAX_OTHER_DATA bytes refuses the layer,
 *     and so does an uncompressed stream longer than the layer budget plus
 *     LZ_PREPARE_MAX_OTHER_DATA per entry (decompression bombs).
 *   - Symlinks: created as-is; the target is never followed or checked
 *     (it must be non-empty and shorter than PATH_MAX).
 *   - Hard links: the target is normalised like a path, must already exist
 *     in the rootfs (this or a lower layer), reached without symlinks in its
 *     parents, and must not be a directory. A link to a symlink links the
 *     symlink itself (linkat without AT_SYMLINK_FOLLOW).
 *   - FIFOs are created. Character and block devices (and sockets) are
 *     skipped and counted in stats->devices_skipped: the sandbox runtime
 *     provides its own /dev.
 *   - OCI whiteouts: ".wh.NAME" removes NAME as left by lower layers (an
 *     entry of the same layer is kept); ".wh..wh..opq" removes every entry of
 *     its directory that this layer did not itself create or touch,
 *     recursively, in whichever order the tar lists them. Other ".wh..wh."
 *     names (AUFS metadata) are ignored. Whiteouts are never materialised.
 *   - Ownership: applied (lchown semantics) only when euid == 0 (real root
 *     or the root of a user namespace); an id the namespace cannot map is
 *     counted in stats->chown_failed and left as the caller. Otherwise skipped.
 *   - Setuid/setgid bits are kept only with CAP_CHOWN in the effective set;
 *     otherwise stripped. Other permission bits and mtimes are applied
 *     (directories at the end of the layer, so that children can be written
 *     first; utimensat with AT_SYMLINK_NOFOLLOW for symlinks).
 *   - Extended attributes, ACLs and file flags are ignored.
 *
 * Errors: the first refused entry fails the whole layer (negative errno and
 * a message naming the entry). The directory is then partially written;
 * callers prepare into a private temporary directory and discard it.
 *
 * Immutability: a prepared rootfs keeps the modes of the image (runsc must
 * read it). It is immutable because nothing writes it after the atomic
 * rename that publishes it, and runsc mounts it read-only under the State
 * Anchor overlay.
 */
#pragma once

#include "idmap.h"

#include "util.h"

/* Progress report. `phase` is a short human string ("prepare", "import",
 * or a forwarded tool output line); `total` 0 means unknown. Called from the
 * calling thread; must not call back into the library. */
typedef void (*lz_progress_fn)(void *ud, const char *phase, uint64_t done, uint64_t total);

#define LZ_PREPARE_MAX_FILE_SIZE (UINT64_C(64) << 30)    /* one file's declared size */
#define LZ_PREPARE_MAX_LAYER_BYTES (UINT64_C(256) << 30) /* data written per layer */
#define LZ_PREPARE_MAX_ENTRIES (UINT64_C(4) << 20)       /* entries per layer */
#define LZ_PREPARE_MAX_OTHER_DATA (UINT64_C(1) << 20)    /* declared data of a non-regular entry */

struct lz_prepare_stats {
    uint64_t entries; /* headers read */
    uint64_t regular, dirs, symlinks, hardlinks, fifos;
    uint64_t whiteouts, opaques;
    uint64_t devices_skipped; /* char/block devices and sockets */
    uint64_t chown_failed;    /* ids the user namespace cannot map */
    uint64_t bytes;           /* file data written */
};

struct lz_layer_opts {
    /* "sha256:<hex>": the whole stream (to EOF) must hash to this, else
     * -EBADMSG after extraction. NULL: not checked. */
    const char *expected_digest;
    lz_progress_fn progress; /* done = compressed bytes read */
    void *ud;
    const char *phase;      /* default "prepare" */
    uint64_t progress_base; /* added to done */
    uint64_t progress_total;
    uint64_t max_bytes;             /* 0: LZ_PREPARE_MAX_LAYER_BYTES */
    struct lz_prepare_stats *stats; /* accumulated into when non-NULL */
    /* When root prepares for its own Domains, which map sandbox IDs 1..N to
     * its subordinate range (idmap.h), image owner u >= 1 is stored as host
     * ID start + u - 1 so that it is u again inside (apt's _apt, daemons'
     * users); owners beyond the range are left to root. NULL: owners are
     * stored as they are (root) or not at all (anyone else). */
    const struct lz_idmap_ranges *shift;
};

/* Applies one layer read from layer_fd (read to EOF, not closed) onto the
 * directory rootfs_dirfd. opts may be NULL. */
int lz_prepare_apply_layer(int rootfs_dirfd, int layer_fd, const struct lz_layer_opts *opts, struct lz_error *err);
int lz_prepare_apply_layer_fd(int rootfs_dirfd, int layer_fd, struct lz_error *err);
int lz_prepare_apply_layer_mem(int rootfs_dirfd, const void *buf, size_t len, struct lz_error *err);
int lz_prepare_apply_layer_mem_opts(int rootfs_dirfd, const void *buf, size_t len, const struct lz_layer_opts *opts,
                                    struct lz_error *err);

/* The preparer's version string: part of the prepared-artifact ID, so any
 * change to the rules above that can change a tree must bump it. */
#define LZ_PREPARER_VERSION "lazaret-preparer-1"

/* Removes the tree dirfd/name (a partial or discarded preparation) without
 * following symlinks or crossing mounts, granting itself u+rwx on each
 * directory first (an unprivileged preparer cannot otherwise empty the
 * image's read-only directories). 0 when absent. */
int lz_prepare_remove_tree(int dirfd, const char *name);

/* Error messages quote attacker-controlled names (archive entries, tags,
 * paths): replaces control characters in err->msg by '?' so that it stays
 * one printable line (no terminal escapes reach the user's terminal) when
 * r < 0. Returns r. */
int lz_error_sanitize(struct lz_error *err, int r);

/* True when setuid/setgid bits will be kept (CAP_CHOWN effective). */
bool lz_prepare_keeps_setid(void);
