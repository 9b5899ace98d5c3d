/* supervisor.h — the Runtime Supervisor (RS).
 *
 * The Host Coordinator starts the RS through the spawn broker with
 * CLONE_NEWUSER|CLONE_NEWNET|CLONE_NEWNS, held at a barrier until its ID
 * maps are written (uid 0 inside = the developer, 1..65536 = the
 * developer's subordinate range). The RS then owns, inside those
 * namespaces, the attached `runsc run` of the Domain's sandbox, and later
 * the policy install and State Anchor mounts (the connectivity helper is
 * the coordinator's, attached to the RS's network namespace).
 *
 * Control channel: an inherited SOCK_SEQPACKET socket (fd LZ_RS_CTL_FD)
 * carrying typed messages (rschan.h: kinds, fields, the timeouts of both
 * sides). RS -> HC: DNS (after BOOT, before the routers and runsc start:
 * the Domain resolver's UDP and TCP sockets on 10.0.2.3:53, a
 * NETLINK_ROUTE and a NETLINK_SOCK_DIAG socket and the TLS gate's
 * listener, all opened in the enforcement namespace while the RS held
 * CAP_NET_ADMIN, netpolicy.h lz_netpolicy_dns_sockets; the RS keeps no
 * copy), NET_READY (after NET: the policy installed on the helper's tap0,
 * read back and probed; what it read back), READY (after NET_READY and
 * lazaret-init's ready line: the namespaces' inodes and what it read back
 * of the policy), FAIL, EXITED (status; reason "router", or
 * "address-follow": the host-address follower failed, netfollow.h, and
 * the sandbox was stopped), STAGE (a child held at its barrier; its slot:
 * rsslot.h), ANCHORED (the mount identity), UNMOUNTED, UNMOUNT_FAILED.
 * HC -> RS, in this order: ANCHOR (mount the State Anchor, anchor.h; the
 * coordinator committed its intent), BOOT (the connectivity helper is
 * launched and the bundle written: prepare the namespace with no route
 * out, drop the network capabilities from what the RS starts, start the
 * routers and runsc), STAGED (each staged child is recorded: release it),
 * NET (the helper's tap0 exists and runsc is released: configure tap0,
 * install and probe the policy while runsc boots; docs/network.md,
 * "Readiness"), STOP, UNMOUNT (after the sandbox and the helper are
 * stopped and the anchor's release intent is committed).
 * End of file on the channel (the coordinator died: lease loss) stops the
 * sandbox and unmounts the anchor without waiting for "unmount"; only a
 * coordinator holding the Domain lock ever releases the prepared-lower
 * lease.
 *
 * First of all, with --mailbox DIR, the RS mounts the escalation mailbox's
 * two bounded tmpfs on DIR/req and DIR/res (mailbox.h: size and inode
 * caps, nosuid, nodev, noexec, mode 0700) and sends MAILBOX with their
 * root directories attached: the coordinator reads requests and writes
 * results through those descriptors, since the mounts exist only in the
 * Domain's mount namespace (the host's DIR holds the empty mount points).
 * They go with that namespace: nothing to record or recover.
 *
 * Before runsc starts, the RS mounts the workspace view: lazaret-router
 * (FUSE, the Git policy) serving the workspace at `view`, which the OCI
 * spec names as the source of /workspace. The router is stopped after the
 * sandbox, and its mount goes away with the RS's mount namespace. Each
 * writable volume is served the same way by its own router in --plain mode
 * (no Git policy; set-id bits stripped, no device nodes or sockets), and
 * every router refuses symlinks into Lazaret's own storage
 * (--deny-link-target).
 */
#pragma once

#include "supargs.h" /* struct lz_supervisor_args: its arguments */

#define LZ_RS_CTL_FD 3

/* Runs the supervisor until the sandbox is stopped; returns an exit code. */
int lz_supervisor_main(const struct lz_supervisor_args *a);

/* Locates runsc ($LAZARET_RUNSC, then PATH). */
int lz_find_runsc(char **ret, struct lz_error *err);
