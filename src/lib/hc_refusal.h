/* hc_refusal.h — the coordinator's refusal room (hc_refusal.c): the
 * records the Domain's routers send when they refuse an operation of the
 * sandbox (refusal.h), kept as a bounded history (`lazaret events`, the
 * count in `lazaret ps`), and one line per kind of refusal on the
 * terminal of every session that is a plain shell, never drawn into a
 * full-screen program's screen (docs/security-git.md, "When something is
 * refused"). Calls no other room but the sessions' send (hc_session.h).
 */
#pragma once

#include "hc.h"

/* Before the Supervisor starts: the channel's two ends; *ret_rs_end is the
 * routers' (the Supervisor passes it on), the caller closes it once the
 * Supervisor has its copy. */
int hc_ref_open(struct hc *h, int *ret_rs_end, struct lz_error *err);
void hc_ref_free(struct hc *h);

/* Readable when records wait; -1 without a channel. */
int hc_ref_fd(struct hc *h);
/* Takes what waits (bounded per call): history, log, notices. */
void hc_ref_dispatch(struct hc *h);
/* Every turn of the loop: notices held back (a full-screen program, the
 * prompt) go out once they can. */
void hc_ref_tick(struct hc *h);

/* Is a session with this command a plain shell (no command, or a shell
 * with at most -l/-i)? Notices are shown only there. */
bool hc_ref_plain_shell(bool tty, char *const *argv, size_t argc);

/* `lazaret events`: JSON text (malloc'ed), at most `cap` bytes: the
 * newest entries that fit. */
char *hc_ref_report(struct hc *h, size_t cap);
/* Refusals recorded so far (`lazaret ps`). */
uint64_t hc_ref_total(const struct hc *h);
