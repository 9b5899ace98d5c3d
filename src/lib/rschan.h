/* rschan.h — the Host Coordinator <-> Runtime Supervisor control channel.
 *
 * One SOCK_SEQPACKET socket (supervisor.h, LZ_RS_CTL_FD); one message per
 * packet. Every message is a fixed 8-byte header
 *
 *     kind u16 | flags u16 (0) | length u32 (of the body that follows)
 *
 * (little-endian, as proto.h) and a body whose layout is fixed by the kind (the schema
 * table in rschan.c): n_u64 u64 fields, then, for kinds that carry one, a
 * string as u32 length + bytes (no NUL inside, at most the kind's bound).
 * The body must be consumed exactly: trailing or missing bytes, an unknown
 * kind, non-zero flags or an over-long string make the packet malformed
 * (-EBADMSG), never a partial read. Decoding reads only inside the packet
 * (tests/fuzz/fuzz_rschan.c).
 *
 * RS -> HC                         HC -> RS, in this order
 *   MAILBOX  (first; with 2 fds)     ANCHOR   mount the State Anchor
 *   ANCHORED ; mount identity        BOOT     helper launched, bundle written:
 *   DNS      (after BOOT; 5 fds)              namespace basics, routers, runsc
 *   STAGE    pid; slot               STAGED   ; slot (release that child)
 *   NET_READY ; observed policy      NET      the helper's tap is there: the
 *                                             policy (after runsc's STAGED)
 *   READY    netns,userns,mntns;     STOP     stop the sandbox
 *            observed policy [LZ_RS_TRANSPORT_SEP transport] (after NET_READY
 *            and lazaret-init's ready line)
 *   FAIL     ; message               UNMOUNT  release intent committed: unmount
 *   EXITED   status; reason ("" | "router" | "address-follow")
 *   UNMOUNTED, UNMOUNT_FAILED ; message
 *
 * The lifecycle (who waits for what) is in supervisor.h and
 * docs/hacking.md; the bounds of every wait are the table below.
 */
#pragma once

#include "util.h"

enum lz_rs_kind {
    /* Runtime Supervisor -> Host Coordinator */
    LZ_RS_STAGE = 1,
    LZ_RS_ANCHORED,
    LZ_RS_READY,
    LZ_RS_FAIL,
    LZ_RS_EXITED,
    LZ_RS_UNMOUNTED,
    LZ_RS_UNMOUNT_FAILED,
    /* Host Coordinator -> Runtime Supervisor */
    LZ_RS_ANCHOR,
    LZ_RS_STAGED,
    LZ_RS_NET,
    LZ_RS_STOP,
    LZ_RS_UNMOUNT,
    /* Runtime Supervisor -> Host Coordinator, its first message: the
     * mailbox's req/ and res/ tmpfs mounted (supervisor.h), their root
     * directories attached (SCM_RIGHTS, lz_rschan_send_fds). */
    LZ_RS_MAILBOX,
    /* Runtime Supervisor -> Host Coordinator, after BOOT, before the
     * routers and runsc (so that nothing of the sandbox can bind their
     * addresses first): the Domain resolver's sockets, opened in the
     * enforcement namespace while CAP_NET_ADMIN counts there (netpolicy.h,
     * lz_netpolicy_dns_sockets), attached in the order LZ_NET_DNS_UDP,
     * _TCP, _RTNL, _DIAG, _GATE (5 fds). */
    LZ_RS_DNS,
    /* Host Coordinator -> Runtime Supervisor: the connectivity helper is
     * launched and the bundle written; prepare the namespace (no route
     * out), start the routers and runsc. The policy follows with NET, while
     * runsc boots (docs/network.md, "Readiness"). */
    LZ_RS_BOOT,
    /* Runtime Supervisor -> Host Coordinator: the policy is installed, read
     * back and probed on the helper's tap (the model's StartSidecar). */
    LZ_RS_NET_READY,
    LZ_RS_KIND_MAX, /* not a kind */
};

/* In READY's string, after the observed policy: the FUSE transport the
 * workspace router reported ("io_uring, 2 queues", "/dev/fuse (...)"). */
#define LZ_RS_TRANSPORT_SEP "; workspace transport: "

#define LZ_RSCHAN_HDR 8
#define LZ_RSCHAN_U64_MAX 3
#define LZ_RSCHAN_STR_MAX 4095 /* the longest string any kind may carry */
#define LZ_RSCHAN_MAX (LZ_RSCHAN_HDR + 8 * LZ_RSCHAN_U64_MAX + 4 + LZ_RSCHAN_STR_MAX)
#define LZ_RSCHAN_SLOT_MAX 15 /* "router", "runsc", "vol<i>" */

struct lz_rsmsg {
    enum lz_rs_kind kind;
    uint64_t u[LZ_RSCHAN_U64_MAX];   /* the kind's u64 fields, the rest 0 */
    char str[LZ_RSCHAN_STR_MAX + 1]; /* the kind's string, "" when it has none */
};

/* The timeouts of both sides, in one place (ms). The Supervisor's own
 * steps come first; the coordinator's bounds on the Supervisor's reports
 * are derived from them below, so that the coordinator never gives up on
 * a Supervisor that is still inside its own bounds. */
#define LZ_RS_T_START_MS 60000        /* RS: runsc released -> lazaret-init ready */
#define LZ_RS_T_STAGE_MS 10000        /* RS: STAGE -> the coordinator's STAGED */
#define LZ_RS_T_ROUTER_READY_MS 15000 /* RS: a router mounts its view */
#define LZ_RS_T_ANCHOR_CMD_MS 30000   /* RS: start -> ANCHOR (the coordinator records its intent first) */
#define LZ_RS_T_BOOT_CMD_MS 30000     /* RS: -> BOOT (the coordinator launches the helper) */
#define LZ_RS_T_UNMOUNT_CMD_MS 30000  /* RS: sandbox gone -> UNMOUNT */
#define LZ_RS_T_RUNSC_TERM_MS 5000    /* RS stop: runsc run after SIGTERM */
#define LZ_RS_T_RUNSC_KILL_MS 5000    /* RS stop: `runsc kill --all KILL` */
#define LZ_RS_T_RUNSC_KILLED_MS 3000  /* RS stop: runsc run after that kill, then SIGKILL */
#define LZ_RS_T_RUNSC_DELETE_MS 10000 /* RS stop: `runsc delete --force` */
#define LZ_RS_T_ROUTER_STOP_MS 5000   /* RS stop: each router after SIGTERM, then SIGKILL */
#define LZ_RS_T_MARGIN_MS 2000        /* HC: scheduling slack on top of the RS's own bounds */
#define LZ_RS_T_START_MARGIN_MS 5000  /* HC: slack on top of the start bound */
#define LZ_RS_T_ANCHORED_MS 30000     /* HC: ANCHOR -> ANCHORED (the mount itself) */
#define LZ_RS_T_UNMOUNTED_MS 30000    /* HC: UNMOUNT -> UNMOUNTED (the unmount itself) */
#define LZ_RS_T_EXIT_MS 30000         /* HC: the RS process exits after its last report */
#define LZ_RS_T_MAILBOX_MS 10000      /* HC: released -> MAILBOX (two tmpfs mounts) */

/* HC: BOOT -> READY or FAIL (the Supervisor's start bound covers NET too:
 * READY waits for both). */
#define LZ_RS_T_READY_MS (LZ_RS_T_START_MS + LZ_RS_T_START_MARGIN_MS)

/* HC: STOP -> EXITED: the Supervisor's stop sequence of the sandbox
 * (stop_sandbox) and of the workspace router and each volume router
 * (stop_router), each at its own bound, plus slack. */
static inline int lz_rs_stop_bound_ms(size_t n_volumes) {
    return LZ_RS_T_RUNSC_TERM_MS + LZ_RS_T_RUNSC_KILL_MS + LZ_RS_T_RUNSC_KILLED_MS + LZ_RS_T_RUNSC_DELETE_MS +
        (int)(1 + n_volumes) * LZ_RS_T_ROUTER_STOP_MS + LZ_RS_T_MARGIN_MS;
}

/* "stage", "anchored", ...: the kind's name for logs; "?" if unknown. */
const char *lz_rschan_kind_name(enum lz_rs_kind kind);

/* Encodes m (its kind's fields only) into buf. -EINVAL for an unknown kind,
 * a string over its kind's bound or with a NUL; -ENOBUFS if cap is short. */
int lz_rschan_encode(const struct lz_rsmsg *m, uint8_t *buf, size_t cap, size_t *ret_len);
/* Decodes one packet; -EBADMSG when it is malformed (see above). */
int lz_rschan_decode(const uint8_t *buf, size_t n, struct lz_rsmsg *ret);

/* Sends one message: kind, its u64 fields (NULL: zeros), its string (NULL:
 * ""; one too long for the kind is cut at its bound). Negative errno. */
int lz_rschan_send(int fd, enum lz_rs_kind kind, const uint64_t *u, const char *str);
/* A FAIL (or UNMOUNT_FAILED, ...) with a formatted message, cut at the bound. */
int lz_rschan_sendf(int fd, enum lz_rs_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Receives one message, waiting at most timeout_ms (a message already
 * queued is returned even at 0). 1: *ret holds it; 0: the peer is gone
 * (end of file or a socket error); -ETIMEDOUT; -EBADMSG: a malformed
 * packet (consumed; the peer is still there). */
int lz_rschan_recv(int fd, int timeout_ms, struct lz_rsmsg *ret);

/* lz_rschan_send with descriptors attached (SCM_RIGHTS, 1..LZ_RSCHAN_FDS_MAX):
 * the peer takes them with lz_rschan_recv_fds. */
#define LZ_RSCHAN_FDS_MAX 5 /* DNS: the resolver's four and the TLS gate's listener */
int lz_rschan_send_fds(int fd, enum lz_rs_kind kind, const uint64_t *u, const char *str, const int *fds, size_t n_fds);
/* lz_rschan_recv that also takes the descriptors attached to the message
 * (close-on-exec): on 1, fds[0..*ret_n) hold them and belong to the caller
 * (the rest of fds is -EBADF). Descriptors beyond cap, or of another
 * kind of control message, are closed and the packet is -EBADMSG. */
int lz_rschan_recv_fds(int fd, int timeout_ms, struct lz_rsmsg *ret, int *fds, size_t cap, size_t *ret_n);

/* One line for logs: "exited 0", "ready 4026531840 ... routes=3 ...". */
void lz_rschan_format(const struct lz_rsmsg *m, char *buf, size_t len);
