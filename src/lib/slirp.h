/* slirp.h — the connectivity helper's command line and its readiness.
 *
 * slirp4netns (found at $LAZARET_SLIRP4NETNS when absolute, else its usual
 * paths) runs in the coordinator's (host) network namespace and attaches
 * the tap device LZ_NET_TAP to the Supervisor's. --disable-host-loopback:
 * 10.0.2.2 does not lead to the host's loopback; --disable-dns: slirp4netns
 * forwards nothing from 10.0.2.3 to the host's resolver (the Domain's own
 * resolver answers there, resolver.h); --enable-sandbox and
 * --enable-seccomp: the helper locks itself down. No --configure: the
 * helper only makes tap0; the Runtime Supervisor configures it
 * (lz_netpolicy_tap_up) and installs the policy, so no route of the
 * helper's own ever leaves the namespace while the sandbox boots beside it
 * (docs/network.md, "Readiness"). LAZARET_TEST_NET=helper-configures
 * (test builds only) passes --configure again: the positive control of
 * tests/network/test_network.py, test_first_process_*. Its readiness is its own protocol
 * (one byte '1' on --ready-fd, once tap0 exists and its API socket
 * listens), read by the coordinator within a bound (generation.c).
 */
#pragma once

#include "spawn.h"

/* Spawns slirp4netns for the network namespace of netns_pid, held at its
 * barrier (the caller records it, then releases it); *ret_ready_fd is the
 * read end of its readiness pipe (the caller's to close). api_path: its
 * API socket (--api-socket), for published ports (lz_slirp_publish); NULL:
 * none. */
int lz_slirp_spawn(pid_t netns_pid, const char *api_path, struct lz_child *ret, int *ret_ready_fd,
                   struct lz_error *err);
/* The readiness byte, read now (the fd polled readable; the caller bounds
 * the wait): 0, or -EIO (end of file: the helper died first). */
int lz_slirp_read_ready(int ready_fd);

struct lz_publish;
/* Publishes one port (publish.h) through the API socket of a ready
 * slirp4netns: add_hostfwd tcp HOSTADDR:HOSTPORT -> 10.0.2.100:PORT. The
 * host port is tried first with a bind of our own, so a port in use gets
 * its own message ("127.0.0.1:8080 is in use on this host"). Every step
 * bounded (2 s). 0, or -errno with err saying what and why. */
int lz_slirp_publish(const char *api_path, const struct lz_publish *p, struct lz_error *err);
