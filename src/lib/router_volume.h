/* router_volume.h — the shape rules of the workspace router (pure).
 *
 * The rules every backing of lazaret-router keeps, whatever the Git
 * policy (router.h) says: a volume (--plain) and the Ignored Workspace
 * State (the store, ignore.h) have only these, a workspace has them on
 * top of the Git policy. They keep the host safe from what the sandbox
 * makes, not the host's Git: no set-id program and no device node appears
 * on the host, no socket is served, the root is neither removed nor
 * renamed, nothing moves between the two backings, and an owner other
 * than the developer is kept beside a host file, never given to it.
 *
 * Paths are relative and well-formed as in router.h ("" is the root);
 * `lazaret-router` (src/router/) gathers the facts and asks. Nothing here
 * touches the file system.
 *
 * Contract: each check returns 0 (allowed) or a negative errno: -EPERM
 * (refused), -EEXIST (a creation whose target exists: the honest answer),
 * -EBUSY (the root cannot be removed or renamed), -EXDEV (between the two
 * backings: `mv` copies instead), -EINVAL (malformed).
 */
#pragma once

#include <sys/types.h>

#include "router.h"

/* The decision for one operation on a volume or in the store (no name is
 * protected there): the request as for lz_router_check(); `exists`
 * (creations) and `path2` (RENAME) are used, the rest ignored. */
int lz_router_plain_check(const struct lz_router_req *req);

/* What may be made by CREATE (create, mknod): regular files and FIFOs.
 * `type` is the new object's S_IFMT bits. 0 or -EPERM (a device cannot
 * work on a nodev mount, a socket is not served). Other ops: 0. */
int lz_router_create_type_check(enum lz_router_op op, unsigned type);

/* The mode a chmod of an object of type `type` (S_IFMT bits) to `mode`
 * really sets: the permission bits, without set-user-ID, and without
 * set-group-ID except on a directory (where it only makes new entries
 * inherit the group): no set-id program on the host. */
mode_t lz_router_chmod_mode(unsigned type, mode_t mode);

/* The decision for an operation on an inode the router already holds,
 * from what it knows of it before asking the path policy:
 *  - `sticky`: it was seen under a protected name while held: nothing
 *    that changes it (WRITE, SETATTR, LINK) is allowed, -EPERM;
 *  - `sealed`: it became a checked Git index or packed-refs by a rename:
 *    no WRITE (data, truncation) through any handle, -EPERM;
 *  - LINK of a directory: -EPERM (no hard links to directories).
 * Returns 0 when these facts allow it (the path policy may still refuse). */
int lz_router_held_check(enum lz_router_op op, unsigned type, bool sticky, bool sealed);

/* A move or a hard link between the two backings (the host workspace and
 * the store, `from_store`/`to_store`): -EXDEV, as across file systems, so
 * `mv` copies; 0 within one. */
int lz_router_backings_check(bool from_store, bool to_store);

/* What a chown of an object of type `type` to uid:gid (already resolved:
 * -1 replaced by the current sandbox-side owner) does with the owner kept
 * beside the host file (user.lazaret.owner; the host file itself stays
 * the developer's, dev_uid:dev_gid): */
enum lz_router_owner_action {
    LZ_OWNER_NOTHING = 0, /* a symlink: no user xattrs, it stays the developer's (accepted, not kept) */
    LZ_OWNER_CLEAR,       /* back to the developer: the kept owner is removed */
    LZ_OWNER_SET,         /* another owner: kept */
};
/* Returns the action, or -EPERM when another owner cannot be kept
 * (`no_xattr`: the host file system has no user xattrs). */
int lz_router_owner_action(unsigned type, uid_t uid, gid_t gid, uid_t dev_uid, gid_t dev_gid, bool no_xattr);

/* The backing of a workspace entry with Ignored Workspace State on
 * (ignore.h), from what the router gathered:
 *  - `ignore_backing`: what the ignore rules decide (LZ_BACKING_HOST or
 *    LZ_BACKING_STORE);
 *  - `ht_match`: the length of the host-tool configuration path
 *    (hosttools.h) that `rel` is or is under, 0 when none;
 *  - `rel_len`: the length of `rel`; `under_git`: `rel` is `.git` or below.
 * A git-ignored entry stays the store's (private: a host `.envrc` with
 * secrets is never seeded); below `.git` the Git policy decides
 * (security-git.md), never the host-tool set; else a host-tool path is the
 * store's. `*seed` is set when the entry is the host-tool path itself
 * (ht_match == rel_len), which the caller copies from the host at first
 * sight (htseed.h). Never fails. */
enum lz_router_backing { LZ_BACKING_HOST = 0, LZ_BACKING_STORE = 1 };
enum lz_router_backing lz_router_backing_decide(enum lz_router_backing ignore_backing, size_t ht_match, size_t rel_len,
                                                bool under_git, bool *seed);

/* Removing (rmdir) or replacing (rename over) a host directory that has a
 * counterpart in the store: `counterpart_empty` is what the caller found
 * there: 1 empty, 0 not empty, or a negative errno (-ENOENT, -ENOTDIR: no
 * counterpart, like empty). Returns 0, -ENOTEMPTY (the ignored entries it
 * holds would be orphaned: the sandbox sees them in the directory), or
 * the other error. */
int lz_router_counterpart_check(int counterpart_empty);

/* The workspace root's inode flags (FS_IOC_GETFLAGS): a case-folding
 * directory (FS_CASEFOLD_FL) is refused, -EINVAL: `.git/CONFIG` would be
 * `.git/config` under Unicode folding rules this policy does not
 * implement. 0 otherwise. */
int lz_router_root_flags_check(int flags);

/* A data write or a truncation of a held inode, from the handle it comes
 * through (the open was checked by the path policy when it was made):
 *  - LZ_HANDLE_OPEN: a handle of an open() (write: the kernel sends data
 *    writes only through one opened for writing);
 *  - LZ_HANDLE_WRITABLE: a descriptor opened for writing that the router
 *    holds for the inode (ftruncate through a handle, or the handle the
 *    file was created with);
 *  - LZ_HANDLE_NONE: no such handle (truncate by path, write through
 *    handle 0 of a file not created for writing).
 * Returns 0 (allowed without asking the path policy), -EPERM (refused), or
 * LZ_ASK_PATH_POLICY (the caller asks the path policy for WRITE).
 * `sealed` (a checked Git index or packed-refs) refuses every write;
 * `sticky` (seen under a protected name while held) takes away what the
 * creating handle, or a writable one for truncation, would allow: a data
 * write through the creating handle is refused, a truncation asks. */
enum lz_router_handle { LZ_HANDLE_NONE = 0, LZ_HANDLE_OPEN, LZ_HANDLE_WRITABLE };
#define LZ_ASK_PATH_POLICY 1
int lz_router_write_check(bool truncate, enum lz_router_handle h, bool sticky, bool sealed);
