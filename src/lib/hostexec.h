/* hostexec.h — running an approved escalation request on the host.
 *
 * What the developer (or a trusted auto-approval rule) approves is an
 * executable identity, an argv, a working directory and an environment.
 * lz_hostexec_resolve records the identity when the request is resolved:
 * the canonical absolute path (realpath of the request's absolute argv[0];
 * never a PATH lookup), device, inode, size, mtime, owner, mode and the
 * SHA-256 of the contents. lz_hostexec_start opens the canonical path
 * again without following a final symlink, checks every recorded field
 * against the open file, copies it into a sealed memfd while hashing the
 * bytes it copies (lz_hostexec_seal), compares that hash with the recorded
 * one, and runs the sealed copy (execveat AT_EMPTY_PATH) through the spawn
 * broker; a #! script's interpreter reads the same sealed copy through
 * /dev/fd/N, so nothing written to the file after approval runs. The one
 * exception, for a developer who is not root: a file owned by root and
 * writable by neither group nor others (/usr/bin/git), whose bytes only
 * host root can change, runs from the open, re-hashed file itself, so that
 * set-ID and /proc/self/exe keep working. The spawn broker gives the child: its own session
 * and process group, the clean environment of lz_hostexec_env, the mapped
 * working directory, held at the broker's barrier so that the caller
 * records ownership (Domain Store) before it runs. Anything changed since
 * resolution is refused with -ESTALE and a message naming what changed.
 *
 * /proc/self/exe of a process run from a copy names the copy
 * ("/memfd:lazaret:NAME (deleted)"); argv[0] stays the requested path
 * (docs/escalation.md).
 */
#pragma once

#include "spawn.h"
#include "util.h"

#include <sys/types.h>

struct lz_hostexec_ident {
    char *path; /* canonical, absolute */
    uint64_t dev, ino, size;
    int64_t mtime_sec, mtime_nsec;
    uint32_t mode, uid, gid;
    uint8_t sha256[32];
};

/* Resolves an absolute argv[0] (refuses a relative one: no PATH lookup)
 * to a regular, executable file and records its identity. */
int lz_hostexec_resolve(const char *argv0, struct lz_hostexec_ident *ret, struct lz_error *err);
void lz_hostexec_ident_clear(struct lz_hostexec_ident *id);
/* The same file: canonical path, device, inode, size, mtime and SHA-256
 * (false when either was never resolved). */
bool lz_hostexec_ident_equal(const struct lz_hostexec_ident *a, const struct lz_hostexec_ident *b);

/* Opens id->path and checks it is still exactly the recorded file; the
 * close-on-exec fd, or -ESTALE / -errno with err set. */
int lz_hostexec_open_verified(const struct lz_hostexec_ident *id, int *ret_fd, struct lz_error *err);

/* Refused above this size (lz_hostexec_seal). */
#define LZ_HOSTEXEC_SEAL_MAX (512ull * 1024 * 1024)

/* Checks the identity like lz_hostexec_open_verified (without hashing the
 * file), copies it into a new memfd while hashing the copied bytes, refuses
 * (-ESTALE) when that hash or length differs from id's, and seals the copy
 * (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL). *ret_fd: a
 * read-only close-on-exec descriptor of the sealed copy; ret_sha256: the
 * hash of the copied bytes. -EFBIG above LZ_HOSTEXEC_SEAL_MAX. */
int lz_hostexec_seal(const struct lz_hostexec_ident *id, int *ret_fd, uint8_t ret_sha256[32], struct lz_error *err);

/* The working directory: sandbox_cwd must be `workspace_in_sandbox` or a
 * path below it without "." or ".." components; it is opened (O_PATH,
 * directory) beneath ws_fd, following only symlinks that stay beneath. */
int lz_hostexec_cwd(int ws_fd, const char *workspace_in_sandbox, const char *sandbox_cwd, int *ret_fd,
                    struct lz_error *err);

/* The documented clean environment: PATH (LZ_HELPER_PATH), HOME and USER
 * of the developer, LANG=C.UTF-8, and TERM: term (the session's terminal
 * type, for a host process on the session's terminal) or NULL for dumb
 * (the output goes to pipes). Free with lz_env_free (procenv.h). */
char **lz_hostexec_env(const char *term);

struct lz_hostexec_spec {
    const struct lz_hostexec_ident *id;
    char *const *argv;
    char *const *envp;
    int cwd_fd;                         /* from lz_hostexec_cwd */
    int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
    bool ctty;                          /* stdin is a terminal: make it the controlling one */
};

/* Seals (lz_hostexec_seal) and spawns the sealed copy at the barrier; the
 * caller records the child and calls lz_child_release. */
int lz_hostexec_start(const struct lz_hostexec_spec *s, struct lz_child *ret, struct lz_error *err);

/* Ends a host process and its process group: SIGKILL to the group (its
 * leader is our unreaped child, so its PID is still its group's ID) and
 * through the pidfd, then reaps, bounded. Returns the status or -errno. */
int lz_hostexec_kill(struct lz_child *c, int timeout_ms, int *ret_status);
