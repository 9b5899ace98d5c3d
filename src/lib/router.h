/* router.h — the Git-protection policy of the workspace router (pure).
 *
 * THE PROPERTY this module serves: nothing the agent does to the workspace
 * may make the host's own `git` (run later by the developer anywhere in the
 * workspace, by a prompt such as __git_ps1, or by an editor) execute a
 * program or read a configuration file that the agent wrote. The threat
 * model and the reasons for every rule are in docs/security-git.md.
 *
 * `lazaret-router` (src/router/) serves the workspace through FUSE and
 * asks lz_router_check() before every operation that changes the tree
 * (the rules that are not Git's: router_volume.h, router_link.h). This
 * module never touches the file system itself: where a rule depends on what
 * exists (is this directory shaped like a Git directory? does a directory
 * being renamed hold a `.git`?) it asks through struct lz_router_fs, so the
 * whole policy runs in unit tests against a fake tree.
 *
 * Paths are relative to the workspace root: components separated by one
 * '/', no leading or trailing '/', no "", "." or ".." component; "" is the
 * root. The router derives them from the kernel's view of the real parent
 * directory (never from names the agent chose for a route to it), so a
 * symlink `x -> .git` does not make `x/config` look harmless.
 *
 * Names are compared ASCII case-insensitively: `.GIT` and `.git/CONFIG` are
 * the same files on a case-folding directory, and nothing legitimate needs
 * the other spellings.
 *
 * Contract: lz_router_check() returns 0 (allowed), -EPERM (refused),
 * -EEXIST (a creation whose target already exists: the honest answer, which
 * lets `mkdir -p`-style callers proceed), -EINVAL (malformed request), or
 * the negative errno an lz_router_fs callback returned (fail closed).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define LZ_ROUTER_PATH_MAX 4096 /* longest relative path the policy accepts */
#define LZ_ROUTER_DEPTH_MAX 1024

/* What a path is, seen from the policy. Ordered: a higher value never
 * allows more than a lower one. */
enum lz_router_class {
    LZ_RCLASS_FREE = 0,  /* ordinary: everything allowed */
    LZ_RCLASS_ANCESTOR,  /* a directory on the way to protected names
                            (`.git/objects`, `.git/objects/info`, parents of
                            --protect paths): it may be created with mkdir
                            (a new, empty, real directory) and read, but
                            not renamed, removed, replaced, or created as a
                            symlink, file or link */
    LZ_RCLASS_PROTECTED, /* configuration or code Git reads or runs
                            (`config`, `hooks/`, `commondir`, ...), what
                            changes what it displays but not what it
                            pushes (`refs/replace/`, `info/grafts`,
                            `shallow`, ...), or anything below one:
                            read-only */
    LZ_RCLASS_GITNAME,   /* an entry named `.git` (repository or gitfile):
                            never created, written, renamed or removed */
};

enum lz_router_op {
    LZ_ROP_CREATE, /* new regular file or FIFO (create, mknod) */
    LZ_ROP_MKDIR,
    LZ_ROP_SYMLINK,
    LZ_ROP_LINK,    /* new hard link: path = new name, path2 = a current
                       name of the source (NULL if it has none) */
    LZ_ROP_WRITE,   /* open for writing, truncate */
    LZ_ROP_SETATTR, /* chmod, chown, utimens */
    LZ_ROP_UNLINK,
    LZ_ROP_RMDIR,
    LZ_ROP_RENAME, /* path -> path2, flags RENAME_NOREPLACE/EXCHANGE */
};

/* What the policy may ask about the real tree. has_entry returns 1 if the
 * directory at relative path `dir` ("" = root) has an entry `name` (any
 * type, symlinks not followed), 0 if not, or a negative errno, which makes
 * the check fail with that error. */
struct lz_router_fs {
    int (*has_entry)(void *ctx, const char *dir, const char *name);
    void *ctx;
};

struct lz_router_policy {
    const struct lz_router_fs *fs;
    /* Extra protected paths (normalized with lz_router_normalize, e.g. the
     * directory named by the repository's core.hooksPath): the path and
     * everything below it is PROTECTED, its parents are ANCESTOR. */
    const char *const *protect;
    size_t n_protect;
    /* Linked-worktree mode (lazaret-router --linked-worktree NAME): the
     * tree is not a workspace but the common Git directory of a linked
     * worktree (`git worktree add`), served on its own to that worktree's
     * Domain. Then:
     *  - the root is a Git directory whatever its shape, and
     *    `worktrees/NAME` (this name exactly) is one too: the Domain's own
     *    per-worktree Git directory (HEAD, index, logs/HEAD, rebase state),
     *    under the rules of any Git directory, plus `locked`;
     *  - of the root, only what Git shares between its work trees and
     *    writes from a linked one stays writable: `objects/`, `refs/`
     *    (not `refs/bisect|worktree|rewritten`), `packed-refs` (checked),
     *    `logs/refs/` (not those three), `info/` (as in any Git
     *    directory), `lost-found/`, `gc.pid`; the rest of the root (HEAD,
     *    index, logs/HEAD, ... of the main work tree, description, and
     *    whatever else lies there) is PROTECTED;
     *  - every other `worktrees/<id>` (another agent's, the developer's) is
     *    PROTECTED, and `worktrees`, `worktrees/NAME` and `logs` are
     *    ANCESTORs.
     * NULL: an ordinary workspace. (docs/security-git.md, "Linked
     * worktrees".) */
    const char *worktree;
};

struct lz_router_req {
    enum lz_router_op op;
    const char *path;  /* the object, or the new name for creations */
    bool exists;       /* creations: `path` is already taken.
                          RENAME: the destination exists */
    bool is_dir;       /* the object at `path` is a directory (RENAME) */
    const char *path2; /* RENAME: destination; LINK: source (or NULL) */
    bool is_dir2;      /* RENAME_EXCHANGE: the destination is a directory */
    unsigned flags;    /* RENAME: RENAME_NOREPLACE | RENAME_EXCHANGE */
    /* What the object is (S_IFMT bits; 0 = a directory if is_dir, else a
     * regular file) and how many links it has (0 = 1): for CREATE the new
     * object, for LINK and RENAME the source, type2/nlink2 the destination
     * of a RENAME_EXCHANGE. Inside Git directories only real directories
     * and single-link regular files may appear (docs/security-git.md). */
    unsigned type, type2;
    unsigned long nlink, nlink2;
};

/* 0 or -EINVAL: `path` is a well-formed relative path (see above). */
int lz_router_path_valid(const char *path);

/* Normalizes a user-supplied relative path ("./a//b/" -> "a/b"): refuses
 * absolute paths, ".." and empty results with -EINVAL. */
int lz_router_normalize(const char *in, char **ret_path);

/* Classifies `path`; may call fs->has_entry to recognise directories shaped
 * like Git directories. */
int lz_router_classify(const struct lz_router_policy *pol, const char *path, enum lz_router_class *ret_class);

/* 1 if `path` names a Git index inside a Git directory (`index`,
 * `sharedindex.*`; in linked-worktree mode also directly in the root), 0
 * if not, or a negative errno. Such a file may only
 * appear by a rename whose source the caller has checked with
 * lz_gitindex_verify() (the host's git trusts every entry of an index it
 * reads); lz_router_check() refuses every other way to create or write it.
 * On success *ret_gitdir_len (may be NULL) is the length of the Git
 * directory's own path within `path` (its config tells the hash length;
 * 0: the root). */
int lz_router_is_index(const struct lz_router_policy *pol, const char *path, size_t *ret_gitdir_len);

/* 1 if `path` names `packed-refs` directly inside a Git directory, 0 if
 * not, or a negative errno. Like an index, it may only appear by a rename
 * whose source the caller has checked (lz_packedrefs_verify_fd(): no
 * refs/replace/ or refs/notes/ line); lz_router_check() refuses every
 * other way to create or write it. */
int lz_router_is_packed_refs(const struct lz_router_policy *pol, const char *path);

/* The decision for one operation (see the contract above). Besides the
 * classes: nothing but real directories and single-link regular files
 * enters a Git directory (no symlink, hard link, FIFO, or directory moved
 * in from elsewhere: the host's git would later write or append through
 * them, e.g. COMMIT_EDITMSG -> config); refusals of moves that a copy
 * would satisfy are -EXDEV, so `mv` falls back to copying. */
int lz_router_check(const struct lz_router_policy *pol, const struct lz_router_req *req);

/* Why lz_router_check refused (for the developer: refusal.h, `lazaret
 * events`, docs/security-git.md "When something is refused"). The rule
 * that refused, not a second decision. */
enum lz_router_why {
    LZ_RWHY_NONE = 0,
    LZ_RWHY_GITNAME,      /* an entry named `.git`: a new repository or gitfile (git init, clone, submodule) */
    LZ_RWHY_GIT_SHAPE,    /* would make a directory shaped like a Git directory (git init --bare) */
    LZ_RWHY_PROTECTED,    /* a protected name (config, hooks/, modules/, info/exclude, refs/replace/, ...) */
    LZ_RWHY_ANCESTOR,     /* objects/, refs/, info/ ...: made by mkdir only, never moved or removed */
    LZ_RWHY_CHECKED,      /* index, sharedindex.*, packed-refs: only by a checked rename */
    LZ_RWHY_GITDIR_ENTRY, /* a symlink, hard link, FIFO or foreign directory entering a Git directory */
    LZ_RWHY_MOVE_REPO,    /* renaming a directory whose direct child is `.git` */
    LZ_RWHY_LINK_SOURCE,  /* a second name (hard link) for a protected file or one inside a Git directory */
};

/* lz_router_check, and when it returns -EPERM or -EXDEV the rule that
 * refused in *ret_why (LZ_RWHY_NONE otherwise). ret_why may be NULL. */
int lz_router_check_why(const struct lz_router_policy *pol, const struct lz_router_req *req,
                        enum lz_router_why *ret_why);

const char *lz_router_op_name(enum lz_router_op op);
const char *lz_router_class_name(enum lz_router_class c);
