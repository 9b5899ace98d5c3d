/* coordinator.h — the Host Coordinator (HC), one per Domain, detached.
 *
 * Started by the first `lazaret run` of a Domain. It resolves the
 * configuration itself and refuses unless the Domain ID and Configuration
 * Fingerprint equal what the client computed; takes the Domain flock
 * (waiting, bounded, for a previous generation to finish tearing down);
 * starts the Runtime Supervisor and waits for the sandbox; then serves
 * Client Sessions on its control socket. Each session gets a `runsc exec`
 * started through the spawn broker inside the Supervisor's namespaces:
 * with a PTY the coordinator owns (the PTY master stays here; the slave is
 * the exec client's controlling terminal), or with plain pipes. When the
 * last session leaves, the coordinator unlinks its socket (new clients then
 * start a new generation, which waits on the flock), stops the sandbox
 * through the Supervisor, and exits.
 *
 * The coordinator runs with a minimal environment (procenv.h): the values
 * of the host variables the profile references come from env_fd, which it
 * reads and closes before it starts anything; every child gets an
 * environment built by procenv.h, never the coordinator's own.
 *
 * Readiness is reported to the starting client on `ready_fd` (readiness.h:
 * "ready" or "error <message>"), then the fd is closed.
 *
 * Its arguments: struct lz_coordinator_args and their codec (coordargs.h).
 */
#pragma once

#include "coordargs.h"

int lz_coordinator_main(const struct lz_coordinator_args *a);

#include "paths.h" /* lz_domain_socket_path, lz_domain_start_lock_path */
