/* paths.h — where Lazaret keeps runtime state.
 *
 * Runtime directory: $XDG_RUNTIME_DIR/lazaret (mode 0700, owned by the
 * caller), or /tmp/lazaret-<uid> when XDG_RUNTIME_DIR is unset; an existing
 * directory with another owner or group/other access is refused. Per
 * Domain: <runtime>/<domain-id>.sock (the coordinator's control socket),
 * <runtime>/<domain-id>.start (the start lock), <runtime>/<id12>/ (runsc
 * state and bundle of the running generation).
 */
#pragma once

#include "util.h"

/* Returns the runtime directory, creating and checking it. */
int lz_runtime_dir(char **ret, struct lz_error *err);
/* Directory holding lazaret's helper binaries (lazaret-init). */
int lz_libexec_path(const char *name, char **ret, struct lz_error *err);
/* Absolute path of the running lazaret binary. */
int lz_self_exe(char **ret);

/* Socket and start-lock paths of a Domain under the runtime directory. */
char *lz_domain_socket_path(const char *runtime_dir, const char *domain_hex);
char *lz_domain_start_lock_path(const char *runtime_dir, const char *domain_hex);
