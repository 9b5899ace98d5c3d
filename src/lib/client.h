/* client.h — the Client CLI side of a session.
 *
 * lz_client_session() connects to the Domain's coordinator, starting one
 * when none runs (serialised by the Domain's start lock, so that concurrent
 * `lazaret run`s of one Domain make one generation), sends HELLO, and then
 * relays the user's terminal or pipes until the coordinator reports the
 * exit status. In terminal mode the user's terminal is put in raw mode and
 * is always restored: on return, on every catchable signal, and when the
 * coordinator dies (its socket closes).
 */
#pragma once

#include "config.h"
#include "util.h"

struct lz_client_opts {
    const struct lz_config *cfg;
    const char *config_path; /* passed on to the coordinator */
    const char *profile;
    const char *publish; /* `--publish` texts joined by ',', passed on to the coordinator; or NULL */
    /* The prepared lower (prepared-artifact ID), asked for only when no
     * coordinator runs and one must be started: joining a running Domain
     * needs no image work. Returns 0 and sets *ret (owned by the callee
     * until the session ends) or -errno with err set. */
    int (*prepare)(void *ud, const char **ret, struct lz_error *err);
    void *prepare_ud;
    char *const *argv; /* command, or NULL/empty for a login shell */
    size_t argc;
};

/* Returns the command's exit status (0-255), or a negative errno with err
 * set when the session could not be established or was lost. */
int lz_client_session(const struct lz_client_opts *o, struct lz_error *err);
