/* escalation.h — the decision interface of host escalation, and the
 * auto-approval rules (docs/escalation.md).
 *
 * The Host Coordinator's request life cycle (receive, verify, bind the
 * session, replay/expiry checks, decide, execute, stream, end) lives in
 * escalation.c behind hc.h; this header is what other modules (the
 * configuration's [[escalation.auto_approve]], the prompt) plug into.
 *
 * Matching (lz_esc_decide): a request matches a rule only when its argv[0]
 * is absolute and is, or resolves on the host (realpath) to, the rule's
 * argv[0] (a canonical absolute path, resolved once when the rule was
 * loaded), and the rest of its argv equals the rule's (or, with
 * allow_extra_args, starts with it). What runs is then the rule's argv[0]
 * (the canonical file, also as the program's argv[0]: a multi-call binary
 * reached through a link named "sh" must not become a shell) with the
 * request's other elements. Never a PATH lookup, never a shell, never a
 * string form: a relative argv[0] never matches. Further, a request does
 * not match (it is asked at the prompt instead) when
 *  - the rule runs in a fresh empty directory (no cwd = "workspace") and
 *    the request names a working directory other than /workspace, the
 *    default: it would not run where it asked;
 *  - an extra argument (allow_extra_args) names a path in a tree of
 *    p->trees (lz_autoapprove_arg_reaches).
 */
#pragma once

#include "autoapprove.h" /* struct lz_esc_rule: the configuration's resolved rules */
#include "hostrule.h"
#include "record.h"

struct lz_esc_policy {
    struct lz_esc_rule *rules;
    size_t n_rules;
    bool borrowed; /* the rules' strings are the configuration's (lz_autoapprove_rules) */
    /* The sandbox-writable and control trees an extra argument must not
     * name (lz_autoapprove_trees); owned. */
    char **trees;
    size_t n_trees;
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
    /* A host-request (lazaret-escalate --allow-host): the rule as the Host
     * Coordinator parsed it; argv is then NULL, argc 0 and cwd NULL, and
     * lz_esc_decide is never asked about it. NULL for a command. */
    const struct lz_hostrule *host;
};

#define LZ_ESC_PROMPT 0 /* no rule matches: the developer decides */
#define LZ_ESC_AUTO 1   /* a rule matches: auto-approved */

/* LZ_ESC_AUTO with the matching rule's index in *ret_rule, or
 * LZ_ESC_PROMPT. */
int lz_esc_decide(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule);
/* The same, with why (may be NULL) set to the reason a rule whose argv
 * matched did not approve ("" when none did). */
int lz_esc_decide_why(const struct lz_esc_policy *p, const struct lz_esc_request *r, size_t *ret_rule, char *why,
                      size_t why_size);

/* Rules from the test hook LAZARET_TEST_AUTO_APPROVE (test builds only;
 * the configuration's [[escalation.auto_approve]] replaces this source):
 * rules separated by \x1e, argv elements by \x1f; leading flag elements
 * before argv[0]: "+" allow_extra_args, "@workspace" cwd = "workspace".
 * A rule whose argv[0] is not an
 * absolute canonical path (realpath of itself) is refused. */
int lz_esc_rules_parse(const char *spec, struct lz_esc_policy *ret, struct lz_error *err);
void lz_esc_policy_clear(struct lz_esc_policy *p);
