/* hc_prompt.h — the escalation prompt on the requesting session's terminal
 * (escprompt.c, hc.h): keys to prompt.c, the sandbox's output held while
 * it is up (backpressure), [s] grants per session, and the terminal route
 * HostProcess. coordinator.c wires these into escalation's port (struct
 * hc_esc_port) and calls the event-loop hooks; the relay reaches the
 * prompt only through the terminal filter hc_prompt_begin installs on the
 * session (struct hc_term_filter). The prompt answers through
 * hc_esc_approve / hc_esc_refuse (hc_esc.h).
 */
#pragma once

#include "hc.h"

/* Asks the developer about r on s's terminal (installs the terminal
 * filter on s); < 0: it cannot be shown (the request is denied). An [s]
 * grant of this session that covers r approves it at once. */
int hc_prompt_begin(struct hc *h, struct session *s, const struct lz_esc_request *r);
/* The request went away (cancel, time-out, session end): its screen
 * closes. */
void hc_prompt_request_gone(struct hc *h, int session, const uint8_t request_id[16]);
/* The terminal route HostProcess: while the request runs, the session's
 * keys go to pty_master (the host process's terminal) and what it prints
 * is shown on the session's terminal; the sandbox's output stays held
 * until hc_route_host_end. begin: -ENOTTY when the session has none. room:
 * how many bytes output may take now (0: pause reading). */
int hc_route_host_begin(struct hc *h, int session, const uint8_t request_id[16], int pty_master);
size_t hc_route_host_room(struct hc *h, int session);
void hc_route_host_output(struct hc *h, int session, const uint8_t *b, size_t n);
void hc_route_host_end(struct hc *h, int session, const uint8_t request_id[16]);
/* The audit row of the session's request is seq: an [s] approval that
 * request made remembers it (a later session-approved row refers to it). */
void hc_prompt_audited(struct hc *h, int session, const uint8_t request_id[16], int64_t seq);
/* The event loop: the poll timeout the prompts' timers need, and their
 * tick every loop. */
int hc_prompt_poll_timeout(struct hc *h, int timeout);
void hc_prompt_tick(struct hc *h);
