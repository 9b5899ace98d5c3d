/* Host-tool configuration paths (docs/host-tools.md).
 *
 * Tools the developer runs on the host read configuration from the project
 * and run what it says: Claude Code's `.claude/settings.json` hooks,
 * `.mcp.json` servers, VS Code's `.vscode/tasks.json` (`runOn: folderOpen`),
 * direnv's `.envrc`, ... A sandbox that could write them would plant code
 * the host runs later. Entries named here, at ANY depth of the workspace
 * and compared without regard to ASCII case (a case-folding directory
 * treats `.VSCode` as `.vscode`), are served to the sandbox from a
 * per-Domain copy: it reads the host's file until it writes, and its
 * writes never reach the host (the router, src/router/main.c "host
 * tools"); `lazaret state diff|apply` show and bring a change over.
 *
 * A name is one path component (no '/'); a directory entry covers all that
 * is below it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define LZ_HOSTTOOLS_MAX 64       /* entries in a set */
#define LZ_HOSTTOOLS_NAME_MAX 255 /* bytes of one name */

/* The default set, NULL-terminated, each with the tool that runs it. */
struct lz_hosttool_default {
    const char *name;
    const char *tool;
};
extern const struct lz_hosttool_default lz_hosttools_defaults[];

/* NULL when `name` may be in a set, else why not (a static string). */
const char *lz_hosttools_name_invalid(const char *name);

/* 1 if `a` and `b` (lengths given) are the same name ignoring ASCII case. */
bool lz_hosttools_name_eq(const char *a, size_t alen, const char *b, size_t blen);

/* The length of the prefix of workspace-relative path `rel` (components
 * separated by '/', no leading '/') that ends with its first component
 * named in `names` (n of them): "a/.vscode/x" -> 9; 0 when none is. */
size_t lz_hosttools_match(char *const *names, size_t n, const char *rel);

/* 1 if `name` is in the default set. */
bool lz_hosttools_is_default(const char *name);
