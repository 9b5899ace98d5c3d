/* slirp.h — the connectivity helper's command line and its readiness.
 *
 * slirp4netns (found at $LAZARET_SLIRP4NETNS when absolute, else its usual
 * paths) runs in the coordinator's (host) network namespace and attaches
 * the tap device LZ_NET_TAP to the Supervisor's. --disable-host-loopback:
 * 10.0.2.2 does not lead to the host's loopback; --disable-dns: slirp4netns
 * forwards nothing from 10.0.2.3 to the host's resolver (the Domain's own
 * resolver answers there, resolver.h); --enable-sandbox and
 * --enable-seccomp: the helper locks itself down. Its readiness is its
 * own protocol (one byte '1' on --ready-fd), read bounded here.
 */
#pragma once

#include "spawn.h"

/* Spawns slirp4netns for the network namespace of netns_pid, held at its
 * barrier (the caller records it, then releases it); *ret_ready_fd is the
 * read end of its readiness pipe (the caller's to close). */
int lz_slirp_spawn(pid_t netns_pid, struct lz_child *ret, int *ret_ready_fd, struct lz_error *err);
/* Waits at most timeout_ms for the readiness byte: 0, or -EIO. */
int lz_slirp_await_ready(int ready_fd, int timeout_ms);
