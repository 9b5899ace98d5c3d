/* control.h — control connections to running Host Coordinators
 * (`lazaret ps`, `lazaret stop`, `lazaret net`, `lazaret events`).
 *
 * A running Domain is a coordinator listening on <runtime dir>/<id>.sock
 * (coordinator.h). A control connection sends one message instead of
 * HELLO (proto.h): STATUS, answered by a JSON object, NET, answered by
 * text, EVENTS, answered by a JSON object, or STOP, answered by
 * EXIT 0 once the coordinator has begun stopping. The coordinator checks
 * the peer's uid like for any session. Every wait here is bounded.
 */
#pragma once

#include <jansson.h>

#include "util.h"

/* The status of the coordinator behind sock_path (a JSON object the caller
 * frees with json_decref). -ENOENT/-ECONNREFUSED when nothing listens. */
int lz_control_status(const char *sock_path, json_t **ret, struct lz_error *err);

/* The Domain's names (`lazaret net`: resolver.h's report) as text the
 * caller frees. */
int lz_control_net(const char *sock_path, char **ret_text, struct lz_error *err);

/* The routers' refusals (`lazaret events`: hc_refusal.h's report), a
 * JSON object the caller frees with json_decref. */
int lz_control_events(const char *sock_path, json_t **ret, struct lz_error *err);

/* Asks it to stop; returns once it accepted. */
int lz_control_stop(const char *sock_path, bool force, struct lz_error *err);

/* Asks it to stop only if it has no session left (it lingers): 1 when it
 * accepted (it is stopping), 0 when it has sessions and goes on. */
int lz_control_stop_if_lingering(const char *sock_path, struct lz_error *err);

/* Statuses of every running Domain of this user, sorted by Domain ID
 * (a JSON array). Sockets nobody answers on are skipped. */
int lz_control_list(json_t **ret, struct lz_error *err);

/* Waits until the coordinator of domain_dir has exited (it holds the
 * Domain flock for its whole life), at most timeout_s. */
int lz_control_wait_stopped(const char *domain_dir, int timeout_s, struct lz_error *err);
