/* anchor.h — the State Anchor: per-Domain persistent layers.
 *
 * Each persistent dir P of the profile (config: persistent_dirs) is a
 * kernel overlayfs mounted by the Runtime Supervisor inside the Domain's
 * user + mount namespaces:
 *
 *   lower  <rootfs>/P of the prepared lower, resolved beneath the rootfs
 *          with no symlink anywhere (an image whose P is a symlink is
 *          refused); an empty directory when the image has no P
 *   upper  <domain_dir>/anchor-<N>/upper/P
 *   work   <domain_dir>/anchor-<N>/work/P
 *   target <gen_dir>/anchor/P   (bound into the sandbox at P)
 *
 * N is the anchor generation recorded in the Domain Store (meta anchor_gen);
 * `lazaret state reset` moves to N+1 (a new empty layer) atomically in the
 * store, then deletes anchor-<N>. Options: userxattr (unprivileged overlay
 * in a user namespace; redirect_dir is then "nofollow": renaming a directory
 * of the lower gives EXDEV and tools copy instead), index=off so that the same
 * upper stays valid over an updated image: upper files, directories and
 * whiteouts stay authoritative and unmodified content follows the new
 * lower. Mounted with the new mount API (fsopen/fsconfig "lowerdir+"), so
 * no path is ever parsed as an option string. The choice over
 * fuse-overlayfs is measured in docs/notes/anchor-overlay-choice.md.
 *
 * Mount identity: "mntns=<ino> <P>=<unique mount id> ..." (evidence.h:
 * a P with a byte outside its safe set is %XX-escaped). The mounts live
 * only in the Supervisor's mount namespace (private), so they cannot
 * outlive the generation's processes: once no process is in the Domain's
 * user namespace, they are gone (lz_ns_in_use is the independent proof).
 */
#pragma once

#include "util.h"

struct lz_anchor_dir {
    char *path; /* sandbox path, e.g. "/usr" */
    char *upper, *work, *target;
};

/* Builds the layout (no filesystem change). */
void lz_anchor_layout(const char *anchor_root, const char *target_root, char *const *dirs, size_t n,
                      struct lz_anchor_dir **ret);
void lz_anchor_layout_free(struct lz_anchor_dir *d, size_t n);

/* In the Runtime Supervisor: creates upper/work/target directories and
 * mounts every layer; writes the mount identity. On failure nothing stays
 * mounted. */
int lz_anchor_mount(const char *rootfs, const char *anchor_root, const struct lz_anchor_dir *d, size_t n, char *ident,
                    size_t identlen, struct lz_error *err);
/* Unmounts exactly the recorded mounts (identity as written by
 * lz_anchor_mount); a target whose mount is not the recorded one is left
 * untouched and reported. 0 when all are verified absent. */
int lz_anchor_unmount(const struct lz_anchor_dir *d, size_t n, const char *ident, struct lz_error *err);

/* 1 when some process visible in /proc is in the namespace of that type
 * ("user", "mnt", ...) with inode `ino`, 0 when none, -errno when /proc
 * cannot be read. The Domain's processes (Supervisor, router, runsc and its
 * gofer and sandbox, exec clients) all live in the Domain user namespace,
 * and every mount namespace that could hold a copy of the anchor mounts is
 * owned by it: no process in it is the independent absence proof. */
int lz_ns_in_use(const char *type, uint64_t ino);
/* Polls lz_ns_in_use until it is 0, at most timeout_ms: 0, -EBUSY. */
int lz_ns_wait_unused(const char *type, uint64_t ino, int timeout_ms);
/* Parses "mntns=<ino>" from an identity; 0 when absent or malformed. */
uint64_t lz_anchor_ident_mntns(const char *ident);
