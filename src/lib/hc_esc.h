/* hc_esc.h — the Host Coordinator's side of host escalation (hc.h): the
 * Trust Anchor and the mailbox of the generation, and the request life
 * cycle of docs/model/lazaret.pml (escalation.c), with host execution,
 * result streaming and stdin below it (escalation_exec.c).
 *
 * Escalation reaches the rest of the coordinator only through its port
 * (struct hc_esc_port), given at creation (h->esc_port, wired by
 * coordinator.c; the unit test gives fakes): the prompt, the terminal
 * route, the audit row's number for the prompt's [s] grants, and the
 * sessions' lookup. It includes neither the prompt's nor the sessions'
 * declarations; they call it (hc_esc_approve, hc_esc_refuse,
 * hc_esc_route_room, hc_esc_session_begin/end).
 *
 * A host-request (lazaret-escalate --allow-host, record.h) goes through
 * the same life cycle: received, verified, bound to its session, replay
 * and expiry checked; its text parsed with lz_hostrule_parse here (the
 * sandbox's check is only for its own early error): a malformed rule or a
 * wildcard is refused before any prompt, with the reason sent to the
 * requester. No [[escalation.auto_approve]] rule approves it (those are
 * rules over argv) and no earlier answer does: it is always prompted.
 * Approved ([s]), the port's allow_host is called with the parsed rule
 * and the request ends completed; denied, timed out or cancelled as any
 * request. Nothing runs on the host.
 */
#pragma once

#include "hc.h"

struct lz_hostexec_ident;
struct lz_hostrule;

/* What escalation calls outside itself. All members are required except
 * prompt_begin (NULL: a request no rule approves is denied without a
 * prompt). */
struct hc_esc_port {
    /* Asks the developer; the answer comes later through hc_esc_approve or
     * hc_esc_refuse (possibly before it returns: an [s] grant). < 0: no
     * prompt could be shown. */
    int (*prompt_begin)(struct hc *h, struct session *s, const struct lz_esc_request *r);
    /* The prompted request went away (cancel, time-out, session end). */
    void (*prompt_gone)(struct hc *h, int session, const uint8_t request_id[16]);
    /* The terminal route HostProcess (hc_prompt.h hc_route_host_*). */
    int (*route_begin)(struct hc *h, int session, const uint8_t request_id[16], int pty_master);
    size_t (*route_room)(struct hc *h, int session);
    void (*route_output)(struct hc *h, int session, const uint8_t *b, size_t n);
    void (*route_end)(struct hc *h, int session, const uint8_t request_id[16]);
    /* The request's audit row is seq. */
    void (*audited)(struct hc *h, int session, const uint8_t request_id[16], int64_t seq);
    /* The live session with this id / the running session whose anchor
     * has this session ID; NULL when there is none. */
    struct session *(*session_by_id)(struct hc *h, int id);
    struct session *(*session_by_sid)(struct hc *h, const uint8_t sid[16]);
    /* The developer approved a host-request: the Domain may reach what the
     * rule names from now on (hc_net.h hc_net_allow_host). < 0 with err:
     * it could not be added (the request ends as failed). */
    int (*allow_host)(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err);
};

/* The Trust Anchor and the mailbox (a generation step), with the port
 * h->esc_port (copied at creation); -EINVAL when it lacks a
 * required member. */
int hc_esc_create(struct hc *h, struct lz_error *err);
/* The event-loop hooks: one fd (readable -> hc_esc_dispatch), and
 * hc_esc_tick every loop (deadlines, lingering results). */
int hc_esc_fd(const struct hc *h);
void hc_esc_dispatch(struct hc *h);
void hc_esc_tick(struct hc *h);
/* The session's environment entries LAZARET_SESSION_ID/KEY (its anchor is
 * made here): 1; 0 and nothing when escalation is not set up. */
int hc_esc_session_begin(struct hc *h, struct session *s, char **ret_id_env, char **ret_key_env);
/* Ends the session's requests (host processes killed) and its anchor. */
void hc_esc_session_end(struct hc *h, struct session *s, const char *why);
/* The prompt's answer. A host-request's approval takes no argv (NULL, 0,
 * shown NULL): the rule parsed from the request is what the port's
 * allow_host gets. Approve: argv (the request's own, or the
 * developer's edit) runs, recorded in the audit as ad (approved, edited,
 * approved-for-session, or session-approved with ref = the audit row of
 * the [s] approval it reuses); it runs only if argv[0] still resolves to
 * exactly the file the prompt showed (shown NULL: no check). */
void hc_esc_approve(struct hc *h, const uint8_t request_id[16], enum lz_audit_decision ad, int64_t ref,
                    char *const *argv, size_t argc, const struct lz_hostexec_ident *shown);
/* Or it ends without running: LZ_OUTCOME_DENIED (the developer: [d],
 * Enter, Escape, [q]; or no prompt could be shown), LZ_OUTCOME_TIMED_OUT
 * (the prompt's deadline), LZ_OUTCOME_CANCELLED (Ctrl-C at the prompt). */
void hc_esc_refuse(struct hc *h, const uint8_t request_id[16], enum lz_outcome outcome, bool by_developer,
                   const char *why);
/* The TERM a host process on s's terminal gets; NULL when it would not
 * get that terminal (a session without one, or not asked for). */
const char *hc_esc_host_term(const struct session *s, bool terminal);
/* The route has room again (after route_room said 0): a request paused
 * on it reads its terminal again. */
void hc_esc_route_room(struct hc *h, const uint8_t request_id[16]);
/* Kills every host process, frees the keys (Domain stop). */
void hc_esc_free(struct hc *h);
/* The directories bound into the sandbox (bundle.c): the mailbox, its
 * res/ (read-only), and the Escalation Client binary. NULL when unset. */
const char *hc_esc_mailbox_dir(const struct hc *h);
/* The Domain's sandbox-writable trees (sbwrite.h), computed once when the
 * mailbox is created; NULL before. */
const struct lz_sbw *hc_esc_writable(const struct hc *h);
