/* gitscan.h — what the host's Git reads or runs from the workspace.
 *
 * The router protects Git directories by name (docs/security-git.md). The
 * host's Git also reads configuration files and runs hooks that its own
 * configuration names, and those can lie anywhere in the workspace: an
 * `include.path` target, `core.hooksPath` (husky's `.husky/`), a file a
 * hook script runs (`scripts/lint.sh`), a hook manager's configuration
 * (`.pre-commit-config.yaml`). At Domain start this module finds them, as
 * workspace-relative paths for `lazaret-router --protect`:
 *
 *  - it asks the host's own `git` (the developer's trusted binary, run with
 *    a clean environment and a bounded wait, never through a shell) for
 *    every active key and its origin file, in every repository of the
 *    workspace (top level, nested, submodule Git directories, linked
 *    worktrees); then it reads every `include.path`/`includeIf.*.path` of
 *    every such file, active or not (the agent can switch the branch or add
 *    a remote later), to Git's include depth;
 *  - it reads the hooks Git would run and what they run;
 *  - it refuses a workspace whose Git directories hold a symlink or a
 *    hard-linked file (outside `objects/`): the host's Git writes through
 *    them (COMMIT_EDITMSG, logs/...).
 *
 * What it cannot make read-only (package.json scripts, node_modules) it
 * reports as notices: one line each for the developer.
 */
#pragma once

#include "util.h"

/* Bounds of the workspace walk; the environment variables raise them. */
#define LZ_GITSCAN_MAX_ENTRIES_DEFAULT 1000000
#define LZ_GITSCAN_MAX_DEPTH_DEFAULT 256
#define LZ_GITSCAN_ENV_MAX_ENTRIES "LAZARET_GIT_SCAN_MAX_ENTRIES"
#define LZ_GITSCAN_ENV_MAX_DEPTH "LAZARET_GIT_SCAN_MAX_DEPTH"
/* Git's own include depth (config.c, MAX_INCLUDE_DEPTH). */
#define LZ_GITSCAN_INCLUDE_DEPTH 10
/* The protected paths travel as argv of two processes; Linux allows
 * ARG_MAX (a quarter of the stack limit, 2 MiB by default) for argv plus
 * environment. Lazaret keeps them under this many bytes and paths and
 * refuses the Domain beyond that instead of dropping any. */
#define LZ_GITSCAN_MAX_PROTECT_BYTES (512 * 1024)
#define LZ_GITSCAN_MAX_PROTECT 8192

struct lz_gitscan {
    char **protect; /* workspace-relative, deduplicated, sorted */
    size_t n_protect;
    char **notices; /* one line each */
    size_t n_notices;
    char **log; /* informational lines for the coordinator log */
    size_t n_log;
    size_t n_repos;   /* Git directories and repositories looked at */
    size_t n_entries; /* directory entries walked */
    bool git_missing; /* no `git` on PATH: nothing of the host's Git to protect */
};

struct lz_gitscan_opts {
    size_t max_entries; /* 0: default or environment */
    unsigned max_depth; /* 0: default or environment */
    const char *git;    /* absolute path of git; NULL: search PATH */
    int timeout_ms;     /* per git run; 0: 10 s */
};

/* Scans workspace (a directory). 0 on success with *ret filled (free with
 * lz_gitscan_clear); a negative errno and err when the Domain must not
 * start (a link in a Git directory, a bound exceeded, too many paths). */
int lz_gitscan_run(const char *workspace, const struct lz_gitscan_opts *o, struct lz_gitscan *ret,
                   struct lz_error *err);
void lz_gitscan_clear(struct lz_gitscan *s);

/* The host's git as the scan finds it: the first `git` of PATH's absolute
 * entries (malloc'd), or NULL. */
char *lz_gitscan_git_path(void);
/* The environment the scan gives git: the variables that select the
 * developer's configuration, nothing that could redirect the repository
 * (NULL-terminated; each string and the array malloc'd). */
char **lz_gitscan_git_env(void);
/* Runs git (args[0] ignored) with envp, no stdin or stderr, cwd "/",
 * waiting at most timeout_ms; its standard output into *ret
 * (NUL-terminated, at most 64 MiB). The exit status, or a negative errno
 * (-ETIMEDOUT: it was stopped). */
int lz_gitscan_run_git(const char *git, char **envp, int timeout_ms, const char *const *args, char **ret,
                       size_t *ret_len);

/* ---- pure parts, exposed for the unit tests ---------------------------- */

/* A path as Git reads it from a config value: absolute, `~/` (home), or
 * relative to base. NULL for `~user/` forms or `~/` without home. */
char *lz_gitscan_join(const char *value, const char *base, const char *home);

/* Canonicalizes abs as the kernel would open it now: symlinks followed
 * component by component; a missing remainder is kept as written (after
 * a `..` in it, only up to the first missing component, which the agent
 * could otherwise make a symlink). Every symlink met on the way is
 * passed to on_link (its own canonical location), for it too decides
 * where the path lands. Returns a malloc'd path or NULL (too many links). */
char *lz_gitscan_canon(const char *abs, void (*on_link)(void *ud, const char *link), void *ud);

/* The workspace-relative form of canonical path p, or NULL outside ws
 * (ws itself gives ""). */
const char *lz_gitscan_rel(const char *ws, const char *p);

/* Words of a hook script that could name a file: shell comments dropped,
 * split at blanks, quotes and shell operators; `--opt=VALUE` gives VALUE;
 * words with expansions ($, `, *) are dropped. */
size_t lz_gitscan_tokens(const char *script, char ***ret);

enum {
    LZ_HM_HUSKY9 = 1 << 0,    /* hooksPath .husky/_ */
    LZ_HM_HUSKY4 = 1 << 1,    /* husky.sh, reads package.json / .huskyrc */
    LZ_HM_PRECOMMIT = 1 << 2, /* pre-commit.com */
    LZ_HM_LEFTHOOK = 1 << 3,
    LZ_HM_SIMPLE_GIT_HOOKS = 1 << 4,
    LZ_HM_PACKAGE_RUNNER = 1 << 5, /* npx, npm, yarn, pnpm, bun, make, node_modules */
};
/* Which hook managers or runners a hook script uses. hooks_dir is the
 * hooks directory (any form; only its last two components matter). */
unsigned lz_gitscan_managers(const char *script, const char *hooks_dir);
/* pre-commit's configuration file named in its hook script (--config),
 * or its default; malloc'd. */
char *lz_gitscan_precommit_config(const char *script);

/* One entry of `git config --list -z [--show-scope] --show-origin`.
 * Returns the offset after it, or 0 at the end / on malformed input. */
struct lz_gitcfg_entry {
    const char *scope, *origin, *key, *value; /* value NULL: key without `=` */
};
size_t lz_gitscan_next_entry(char *buf, size_t len, size_t off, bool with_scope, struct lz_gitcfg_entry *e);
