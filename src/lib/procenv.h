/* procenv.h — the environment of every process Lazaret starts, and the
 * hand-over of resolved profile values from the client to the coordinator.
 *
 * Contract
 * --------
 * No Lazaret process other than the sandbox's own inherits the client's
 * environment: a profile entry `env = { TOKEN = "env:API_KEY" }` makes
 * API_KEY a secret of the user's shell, and /proc/PID/environ of a
 * long-lived helper would show it for as long as the helper lives (it is
 * the environment at exec time; clearing `environ` later does not change
 * it). So every child gets an environment built here from an allow-list
 * (docs/hacking.md, "Environment of each process", has the table):
 *
 *  - LZ_ENV_HELPER: foreign helpers and the router (runsc run/exec/kill/
 *    delete and, through runsc, runsc-gofer and runsc-sandbox;
 *    slirp4netns; lazaret-router; newuidmap; `state __rm-tree`; the
 *    doctor's probes): only LZ_HELPER_PATH. lz_spawn() uses it when no
 *    envp is given.
 *  - LZ_ENV_SUPERVISOR: the Runtime Supervisor:
 *    LZ_HELPER_PATH plus Lazaret's own debug/test hooks (LZ_ENV_HOOKS),
 *    copied from the caller when set.
 *  - LZ_ENV_COORDINATOR: the Host Coordinator: the above plus the
 *    directories it must resolve exactly as the client did (HOME,
 *    XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR).
 *
 * The coordinator resolves the configuration itself (and refuses unless
 * it matches the client's); the values of the host variables the selected
 * profile references reach it not through its environment but through a
 * sealed memfd the client fills (lz_envpass_create) and the coordinator
 * reads and closes before it starts anything (lz_envpass_read). Records
 * are "NAME=value\0", NAME a valid variable name, each at most once.
 * Buffers that held values are zeroed before they are freed.
 *
 * Image tools run by the client (skopeo, mmdebstrap) get
 * lz_tool_env(): the helper set plus the user's PATH, HOME, locale,
 * TMPDIR, proxy, TLS trust and container-registry settings, which they
 * legitimately need; never the rest of the client's environment.
 */
#pragma once

#include "util.h"

#define LZ_HELPER_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Maximum size of the hand-over memfd: LZ_CONFIG_MAX_LIST references of
 * LZ_CONFIG_MAX_ENV_VALUE bytes each, plus their names. */
#define LZ_ENVPASS_MAX (256u * (128u * 1024u + 4096u + 2u))

/* LZ_ENV_HELPER as a constant: { LZ_HELPER_PATH, NULL }. */
extern char *const lz_helper_envp[];

enum lz_env_kind { LZ_ENV_HELPER, LZ_ENV_SUPERVISOR, LZ_ENV_COORDINATOR };

/* A NULL-terminated, owned environment for a child of that kind (copied
 * from this process's environment through the allow-list). */
char **lz_env_build(enum lz_env_kind kind);
/* For the image tools of the client (see above). */
char **lz_tool_env(void);
/* Frees (and zeroes) an environment built here. */
void lz_env_free(char **envp);
static inline void lz_env_freep(char ***e) { lz_env_free(*e); }
#define _cleanup_env_ _cleanup_(lz_env_freep)

/* The hook variables Lazaret's own processes read (NULL-terminated). */
extern const char *const lz_env_hooks[];

/* ---- client -> coordinator hand-over of referenced host variables ---- */

struct lz_config;
struct lz_envpass;

/* A sealed, close-on-exec memfd holding the host variables the selected
 * profile references, with the values the client resolved. */
int lz_envpass_create(const struct lz_config *c, int *ret_fd, struct lz_error *err);
/* Reads and parses the records of fd (which the caller then closes). */
int lz_envpass_read(int fd, struct lz_envpass **ret, struct lz_error *err);
/* Lookup for lz_config_opts.lookup_env: the value or NULL. */
const char *lz_envpass_get(void *envpass, const char *name);
/* Zeroes and frees. NULL is fine. */
void lz_envpass_free(struct lz_envpass *p);
