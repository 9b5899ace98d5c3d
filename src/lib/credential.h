/* credential.h — credentials bound to endpoints (issue 24 §2;
 * docs/credentials.md): the placeholder the sandbox holds, the check of
 * a value, and the fetch of the values that come from a file or a host
 * command when the Domain starts. The profile's declaration is
 * config.h's struct lz_credential.
 *
 * The placeholder: "lzph_" and 32 lower-case hex digits, the first half
 * of SHA-256("lazaret credential placeholder v1" NUL domain_id var). It
 * is not a secret (the value is): it only has to be unlike anything else
 * a request carries, and stable for a Domain, so that an agent that
 * remembers the key it was given (Claude Code asks once whether to use a
 * key it finds in ANTHROPIC_API_KEY) is not asked again at every start.
 */
#pragma once

#include "config.h"

#define LZ_CRED_PLACEHOLDER_LEN 37 /* "lzph_" + 32 hex */
#define LZ_CRED_FETCH_MS 10000     /* a from_command program's time */

/* Does the TLS gate serve this credential (a value, its host allowed, the
 * gate running)? The sandbox then holds its placeholder. */
static inline bool lz_credential_gated(const struct lz_credential *cr) {
    return cr->value && !cr->unreachable && !cr->passed_plain;
}

void lz_credential_placeholder(const uint8_t domain_id[32], const char *var, char ret[LZ_CRED_PLACEHOLDER_LEN + 1]);

/* NULL when value (n bytes) can be a credential's value: 1 to
 * LZ_CRED_VALUE_MAX bytes of printable ASCII without spaces (it goes into
 * one header line); otherwise what is wrong, to follow "the value ...". */
const char *lz_credential_value_problem(const char *value, size_t n);

/* Fetches cr->value for LZ_CRED_FROM_FILE (the file's first line; the
 * file a regular one owned by this user with no group or other access)
 * and LZ_CRED_FROM_COMMAND (the first line the program prints on
 * standard output within LZ_CRED_FETCH_MS, exit status 0; run with
 * envp, standard input /dev/null). Nothing to do for LZ_CRED_FROM_ENV.
 * Errors say which credential and what to do. */
int lz_credential_fetch(struct lz_credential *cr, char *const *envp, struct lz_error *err);

#ifdef LZ_TEST_HOOKS
/* Test builds: the bound of a from_command program, in ms. */
extern int lz_credential_fetch_ms;
#endif
