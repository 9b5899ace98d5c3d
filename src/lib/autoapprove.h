/* autoapprove.h — auto-approval rules of host escalation: what the Host
 * Coordinator matches a request against, and the classification that
 * decides, at configuration load, which rules may exist at all.
 *
 * Contract
 * --------
 * A rule comes from trusted host configuration ([[escalation.auto_approve]],
 * see lazaret.toml(5)); the loader (config_paths.c) resolved its argv[0]
 * once to a canonical absolute executable and refused or flagged it with
 * lz_autoapprove_check(). The rules the HC holds are those of the one
 * configuration it loaded at Domain start: they enter the Configuration
 * Fingerprint, so a client whose rules differ cannot join that Domain
 * (docs/escalation.md, "Auto-approval").
 *
 * lz_autoapprove_match() is pure: byte comparison only. A request's argv[0]
 * must be byte-equal to the rule's canonical path (so a relative name or a
 * name that a PATH lookup would find never matches); the rest must be equal
 * element by element, with extra trailing elements only when the rule has
 * allow_extra_args. No PATH lookup, no shell, no string form, no
 * normalization of any element. The Host Coordinator's decision
 * (lz_esc_decide, escalation.h) calls it with the request's argv[0] as
 * written and, when that differs, as the host resolves it (realpath), and
 * adds the working-directory and extra-argument conditions.
 */
#pragma once

#include "util.h"

struct lz_config;

/* One resolved rule. argv[0] is the canonical absolute executable; argv has
 * argc elements (and a NULL after them when it comes from the config). */
struct lz_esc_rule {
    char **argv;
    size_t argc;
    bool allow_extra_args;
    bool cwd_workspace; /* cwd = "workspace" (acknowledged by runs_workspace_code) */
};

/* True when some rule matches argv (argc elements); *ret_rule (may be
 * NULL) is then the index of the first matching rule. False for argc 0, a
 * NULL element, or when nothing matches. */
bool lz_autoapprove_match(const struct lz_esc_rule *rules, size_t n, char *const *argv, size_t argc, size_t *ret_rule);

/* The configuration's rules as an array of lz_esc_rule (n entries) in file
 * order. The array is the caller's (free()); the strings stay the
 * configuration's, valid as long as it is. */
int lz_autoapprove_rules(const struct lz_config *c, struct lz_esc_rule **ret, size_t *ret_n);

/* ---- classification at configuration load ---- */

/* A rule's executable is known by several names: argv[0] as written, every
 * link of its symlink chain and the canonical file. Each is compared
 * without a trailing version ("python3.11" -> "python", "pip3" -> "pip").
 *
 * lz_autoapprove_check() looks at every name and at the rule's arguments:
 *  - returns -EPERM with why = the reason the rule is refused;
 *  - returns 0 with why = a warning ("" when the rule raises none);
 *  - *ret_script is set to the index of an argument that the loader must
 *    check like argv[0] (absolute, existing, outside every sandbox-writable
 *    and control tree): the script a shell or interpreter rule runs;
 *    0 when there is none.
 * Classes and reasons: docs/escalation.md, lazaret.toml(5). */
int lz_autoapprove_check(const char *const *names, size_t n_names, char *const *argv, size_t argc,
                         bool allow_extra_args, char *why, size_t why_size, size_t *ret_script);

/* The name a class table compares: the basename of path without a trailing
 * run of digits and dots. Writes at most size bytes (NUL-terminated). */
void lz_autoapprove_family(const char *path, char *ret, size_t size);

/* ---- arguments that reach a sandbox-writable tree ---- */

/* Whether one argument names, anywhere in it, a path inside one of trees
 * (absolute paths) or, where a path plainly starts in it (the whole
 * argument, an option's value after '=', ':', ',', '@', "-I/x"), a
 * directory that holds one; a "~/" where a path starts counts as the
 * developer's home directory (HOME). Each such path is compared as written
 * (normalized) and as the host resolves it now (its longest existing
 * prefix through realpath). Refused as well: a ".." path component (it
 * climbs out of any working directory), a path through a symbolic link
 * whose target does not exist yet, and an argument too long or with too
 * many '/' to check (bounds in autoapprove.c). Returns 0, or -EPERM /
 * -E2BIG with why set and *ret_tree (may be NULL) the index of the tree
 * (SIZE_MAX when no tree is the reason). Relative paths are not resolved:
 * the caller decides what they are relative to. */
int lz_autoapprove_arg_reaches(const char *arg, const char *const *trees, size_t n_trees, size_t *ret_tree, char *why,
                               size_t why_size);

/* The trees of a loaded configuration that the sandbox can write or that
 * Lazaret controls: the paths of sbwrite.h's LZ_SBW_REACH set (the
 * workspace, the Storage Root, the selected profile's volumes,
 * escalation.socket_dir, the configuration file's directory and Lazaret's
 * runtime directory; each as spelled and, when it exists, canonical), in
 * its order. NULL-terminated; free with lz_strv_free(v, n). */
void lz_autoapprove_trees(const struct lz_config *c, char ***ret, size_t *ret_n);
