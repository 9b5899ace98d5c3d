/* escalation.h — the decision interface of host escalation, and the
 * auto-approval rules (docs/escalation.md).
 *
 * The Host Coordinator's request life cycle (receive, verify, bind the
 * session, replay/expiry checks, decide, execute, stream, end) lives in
 * escalation.c behind hc.h; this header is what other modules (the
 * configuration's [[escalation.auto_approve]], the prompt) plug into.
 *
 * Matching (lz_esc_decide): a request matches a rule only when its argv[0]
 * is byte-equal to the rule's argv[0] (a canonical absolute path, resolved
 * once when the rule was loaded) and the rest of its argv equals the
 * rule's (or, with allow_extra_args, starts with it). Never a PATH lookup,
 * never a shell, never a string form: a relative argv[0] never matches.
 */
#pragma once

#include "autoapprove.h" /* struct lz_esc_rule: the configuration's resolved rules */
#include "record.h"

struct lz_esc_policy {
    struct lz_esc_rule *rules;
    size_t n_rules;
    bool borrowed; /* the rules' strings are the configuration's (lz_autoapprove_rules) */
};

/* What a decision looks at: the verified request. */
struct lz_esc_request {
    const uint8_t *request_id; /* LZ_RECORD_ID_LEN */
    const uint8_t *session_id; /* LZ_RECORD_ID_LEN */
    char *const *argv;
    size_t argc;
    const char *cwd;
    const char *justification;
    bool terminal; /* it would run on the session's terminal (route HostProcess) */
};

#define LZ_ESC_PROMPT 0 /* no rule matches: the developer decides */
#define LZ_ESC_AUTO 1   /* a rule matches: auto-approved */

/* LZ_ESC_AUTO with the matching rule's index in *ret_rule, or
 * LZ_ESC_PROMPT. */
int lz_esc_decide(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule);

/* Rules from the test hook LAZARET_TEST_AUTO_APPROVE (test builds only;
 * the configuration's [[escalation.auto_approve]] replaces this source):
 * rules separated by \x1e, argv elements by \x1f; a rule whose first
 * element is "+" has allow_extra_args. A rule whose argv[0] is not an
 * absolute canonical path (realpath of itself) is refused. */
int lz_esc_rules_parse(const char *spec, struct lz_esc_policy *ret, struct lz_error *err);
void lz_esc_policy_clear(struct lz_esc_policy *p);
