/* coordargs.h — the Host Coordinator's arguments: the struct and its codec.
 *
 * The client starts `lazaret-core __coordinator` (coordinator.h) with
 * these fields as arguments (lz_coordargs_encode); the coordinator turns
 * its argv back into the struct (lz_coordargs_decode). Both go through
 * the one table of coordargs.c (argcodec.h). The decoder is strict: an
 * unknown, repeated, malformed (a descriptor number, a session kind other
 * than "tty" or "pipes") or missing argument is refused with a message.
 */
#pragma once

#include "util.h"

struct lz_coordinator_args {
    const char *config_path; /* may be NULL */
    const char *profile;     /* may be NULL */
    const char *publish;     /* `lazaret run --publish` texts joined by ',' (publish.h), or NULL */
    const char *workspace;
    const char *expect_domain;      /* hex */
    const char *expect_fingerprint; /* hex */
    const char *artifact_id;        /* prepared lower: <data_root>/prepared/<id>/rootfs */
    int ready_fd;                   /* or -1 */
    int env_fd;                     /* sealed memfd of the referenced host variables (procenv.h), or -1 */
    /* The starting client's session: 1 with a terminal, 0 with pipes, -1
     * unknown (no exec client is started ahead). */
    int first_session;
};

/* argv for execve: self, "__coordinator", then a's arguments
 * (NULL-terminated; free with lz_argv_free). -EINVAL with err set when a
 * could not be decoded back (a required field absent). */
int lz_coordargs_encode(const struct lz_coordinator_args *a, const char *self, char ***ret_argv, struct lz_error *err);
/* The arguments after "__coordinator" (argv[0..argc-1]) into *ret (strings
 * point into argv). 0, or -EINVAL with err set (*ret: every field absent). */
int lz_coordargs_decode(int argc, char *const *argv, struct lz_coordinator_args *ret, struct lz_error *err);
