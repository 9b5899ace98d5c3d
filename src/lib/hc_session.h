/* hc_session.h — Session Terminals of the Host Coordinator (session.c,
 * hc.h): each client session's `runsc exec` with its durable record, and
 * the relay between the client's socket and the exec's PTY master or
 * pipes, with backpressure. The relay asks the session's terminal filter
 * (struct hc_term_filter, installed by the prompt) before it moves keys or
 * output; it calls escalation.c for the session's anchor and nothing of
 * the prompt or of coordinator.c. Control requests (ps, stop) it hands
 * back to its caller (hc_session_client_msg).
 */
#pragma once

#include "hc.h"

/* A session record with no client yet: ID, no descriptors. */
struct session *hc_session_new(struct hc *h);
/* The first session's exec client, started ahead (tty: with a PTY, else
 * pipes) while the sandbox boots: recorded, released, and waiting in
 * runsc's read of its process spec, which the starting client's hello
 * then gives it. Failure is not the generation's: the hello starts its
 * own exec client as usual. */
int hc_session_prestart(struct hc *h, bool tty, struct lz_error *err);
/* The exec client started ahead and never taken: killed and released. */
void hc_session_drop_pre(struct hc *h);
void hc_session_send(struct session *s, uint8_t type, uint8_t ch, const void *p, size_t n);
void hc_session_refuse(struct session *s, uint32_t code, const char *msg);
void hc_session_free(struct hc *h, struct session *s);
/* One message from the client. A control request (lazaret ps, lazaret
 * stop: LZ_MSG_STATUS or LZ_MSG_STOP before any hello) is not a session's:
 * 1 with its bytes in *ret_msg, *ret_len (valid until the next call), for
 * the caller to answer; else 0. */
int hc_session_client_msg(struct hc *h, struct session *s, short revents, const uint8_t **ret_msg, size_t *ret_len);
bool hc_flush_pending(struct session *s);
void hc_pump_input(struct session *s);
void hc_pump_output(struct session *s, int *fdp, uint8_t ch);
void hc_session_tick(struct hc *h, struct session *s);
void hc_begin_stop(struct hc *h, const char *why, bool force);
/* The live session with this id, or NULL. */
struct session *hc_session_by_id(struct hc *h, int id);
/* The running session (with a client) whose Session Anchor has this
 * session ID, or NULL: the session an escalation record names. */
struct session *hc_session_by_sid(struct hc *h, const uint8_t sid[16]);
