/* gitconfig.h — workspace paths the host's Git configuration points into.
 *
 * The router protects `.git` directories by name. The host's Git also runs
 * hooks from `core.hooksPath` and reads files named by `include.path` and
 * `includeIf.*.path`; when those resolve inside the workspace (husky's
 * `.husky/`, a shared `tools/gitconfig`), the agent must not write them
 * either. This module reads the host configuration with libgit2 (which
 * never runs a program) and returns those paths relative to the workspace,
 * for lazaret-router's --protect.
 */
#pragma once

#include "util.h"

/* Fills *ret with *ret_n malloc'd relative paths (may be 0). A workspace
 * that is not a Git repository yields none. */
int lz_git_protected_paths(const char *workspace, char ***ret, size_t *ret_n, struct lz_error *err);
void lz_strv_free(char **v, size_t n);
