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
 * Readiness is reported to the starting client on `ready_fd`: one line,
 * "ok" or "error <message>", then the fd is closed.
 */
#pragma once

#include "util.h"

struct lz_coordinator_args {
    const char *config_path; /* may be NULL */
    const char *profile;     /* may be NULL */
    const char *workspace;
    const char *expect_domain;      /* hex */
    const char *expect_fingerprint; /* hex */
    const char *artifact_id;        /* prepared lower: <data_root>/prepared/<id>/rootfs */
    int ready_fd;
    int env_fd; /* sealed memfd of the referenced host variables (procenv.h), or -1 */
    /* The starting client's session: 1 with a terminal, 0 with pipes, -1
     * unknown (no exec client is started ahead). */
    int first_session;
};

int lz_coordinator_main(const struct lz_coordinator_args *a);

#include "paths.h" /* lz_domain_socket_path, lz_domain_start_lock_path */
