/* hc.h — what the Host Coordinator's rooms share (coordinator.h has the
 * contract): struct hc (one per coordinator process: the Domain's
 * generation and its sessions), the session record, and the hook a
 * session's relay asks before it moves a byte (struct hc_term_filter).
 * Each room's own functions are declared in its own header:
 *
 *   hclog.h        hc_log, hc_model_action (below every room)
 *   coordinator.c  entry point, event loop, control requests (ps, stop)
 *   hc_gen.h       generation.c: Domain start and teardown (the
 *                  acquisition and release tables, docs/state.md,
 *                  docs/model/lazaret.pml); bundle.c: the OCI bundle
 *   hc_session.h   session.c: Session Terminals, runsc exec, the relay
 *   hc_esc.h       escalation.c, escalation_exec.c: the mailbox, the
 *                  request life cycle, host execution; what it needs of
 *                  the prompt and the sessions comes through its port
 *   hc_prompt.h    escprompt.c: the prompt on the session's terminal
 *   hc_net.h       hc_net.c: the Domain's resolver, learned routes,
 *                  network audit rows and notices, `lazaret net`
 *   hc_refusal.h   hc_refusal.c: the routers' refusals, `lazaret events`
 *                  and their notices on plain shells
 *
 * Who calls whom (no circle): coordinator.c calls every room; generation
 * calls bundle, session (the first exec client) and escalation (the Trust
 * Anchor); session calls escalation (anchors) and the terminal filter
 * (installed by the prompt); the prompt calls escalation (its answer) and
 * session (lookup, sends); escalation calls no other room, only its port
 * (struct hc_esc_port, wired by coordinator.c; its allow_host goes to
 * hc_net); hc_net and hc_refusal call session (sends). All log through hclog.h.
 *
 * Internal to the coordinator: nothing outside those rooms (and their unit
 * test, tests/unit/test_escalation.c) includes it.
 */
#pragma once

#include "coordinator.h"
#include "config.h"
#include "audit.h"
#include "escalation.h"
#include "gitscan.h"
#include "hclog.h"

#include <pthread.h>
#include "netpolicy.h"
#include "procid.h"
#include "proto.h"
#include "refusal.h"
#include "spawn.h"
#include "worktree.h"
#include "store.h"
#include "supervisor.h"

#define MAX_SESSIONS 64
#define FLOCK_TIMEOUT_S 60
#define RELEASE_GRACE_MS 2000
#define DRAIN_TIMEOUT_MS 5000
#define SPEC_FEED_TIMEOUT_MS 10000

enum sess_state { S_HELLO, S_RUNNING, S_DRAINING, S_RELEASING, S_DONE };

struct outbuf {
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
};

struct session {
    int id;
    int sock;
    enum sess_state state;
    bool tty;
    struct lz_child exec;
    int master;             /* tty: PTY master */
    int in_w, out_r, err_r; /* pipes */
    uint8_t *inbuf;
    size_t inlen, inoff; /* pending input to the exec */
    bool in_eof_pending;
    struct outbuf pend; /* pending message to the client (backpressure) */
    bool exited;
    int status;
    long deadline; /* drain / release deadline */
    int release_step;
    char *procfile;
    int spec_w;               /* the process spec's pipe, until runsc exec has it all */
    struct lz_procid exec_id; /* the exec client, as staged */
    char *command;            /* program name, for `lazaret ps` */
    char *term;               /* tty: the client's TERM (checked), for a host process on this terminal */
    int64_t started_wall;     /* ms since the epoch */
    bool recorded;            /* a Session Terminal record exists */
    bool release_recorded;
    struct lz_session_anchor *anchor; /* escalation: its Session Anchor (trust.h), or NULL */
    struct hc_prompt *prompt;         /* escprompt.c: the prompt on this terminal, or NULL */
    struct hc_grant *grants;          /* escprompt.c: this session's [s] approvals */
    /* The terminal filter the relay asks (installed by the prompt on its
     * first request of this session), or NULL. */
    const struct hc_term_filter *filter;
    /* hc_refusal.c: a plain shell (notices of refusals are shown there
     * only), whether a full-screen program holds its screen, and the kinds
     * of refusal shown and waiting (bits of enum lz_refusal_kind). */
    bool plain_shell;
    struct lz_altscreen alt;
    unsigned ref_shown, ref_pending;
};

struct hc;
/* A filter between a session's client and its exec (the relay in
 * session.c): keys from the client (true: taken, not for the exec), the
 * exec's output (true: taken, held), whether the client's socket must not
 * be read now (the event loop's poll), resizes, and the session's end (free what it keeps). */
struct hc_term_filter {
    bool (*input)(struct hc *h, struct session *s, const uint8_t *p, size_t n);
    bool (*hold_output)(struct session *s, int *fdp);
    bool (*output_blocked)(const struct session *s);
    void (*resize)(struct session *s, unsigned rows, unsigned cols);
    void (*session_free)(struct session *s);
};

struct hc_esc_port;

struct hc {
    const struct lz_coordinator_args *a;
    struct lz_config *cfg;
    char *rt, *gen_dir, *state_dir, *bundle_dir, *overlay_dir, *sock_path, *view;
    char *runsc, *shell, *router;
    char container_id[32];
    struct lz_child rs;
    struct lz_child slirp;
    int rs_ctl;
    struct lz_netpolicy policy;
    uint8_t policy_digest[32];
    uint8_t sidecar_id[16];
    uint8_t readiness[32];
    /* The FUSE transport the workspace router got (its readiness line,
     * passed on in the Supervisor's READY): `lazaret ps`, `doctor`. */
    char fuse_transport[128];
    int listen_fd;
    int lock_fd; /* the Domain flock, for the coordinator's life */
    int sfd;
    struct session *s[MAX_SESSIONS];
    /* The first session's exec client, started while the sandbox boots and
     * waiting for its process spec (session.c, hc_session_prestart), until
     * the starting client's hello takes it; NULL otherwise. */
    struct session *pre;
    /* The Domain's resolver and TLS gate (hc_net.c) start once the first
     * session has its process spec, or at net_due (monotonic ms) when none
     * comes: their sockets exist since the boot, so what the sandbox sends
     * them meanwhile waits there (coordinator.c, net_start_when_due). */
    bool net_tried;
    bool session_fed;
    long net_due;
    int next_id;
    bool had_session;
    bool stopping;
    bool lingering;        /* no session left: running on until linger_until (the model's StartLinger) */
    long linger_until;     /* monotonic ms */
    struct lz_gitscan git; /* what the host's Git reads from the workspace */
    /* The Git scan runs on its own thread from the configuration's load
     * until the Supervisor's spawn needs it (generation.c, hc_scan_start). */
    struct {
        pthread_t thread;
        bool started; /* hc_scan_start was called */
        bool running; /* a thread to join */
        int r;
        long ms;
        struct lz_error err;
    } scan;
    /* Durable generation (store.h). */
    struct lz_store *st;
    int64_t gen;
    char *rootfs; /* <data_root>/prepared/<artifact>/rootfs */
    char *anchor_root, *anchor_target;
    char anchor_ident[4096];              /* "" until the anchor is mounted */
    uint64_t rs_userns;                   /* the Domain user namespace of this generation */
    bool recorded[LZ_ROLE_COUNT];         /* participant rows written for this generation */
    bool rs_exited_msg;                   /* the Supervisor reported the sandbox gone */
    bool net_intents;                     /* Git routing, network, helper intents durable */
    struct lz_procid router_id, runsc_id; /* the Supervisor's children, as staged */
    /* Writable volumes, each served by its own router (slot "vol<i>") at
     * vol_view[i]; vol_of[i] is its index in profile.volumes. */
    char *vol_view[LZ_RS_VOLUMES_MAX];
    size_t vol_of[LZ_RS_VOLUMES_MAX], n_vol;
    struct lz_procid vol_id[LZ_RS_VOLUMES_MAX];
    /* A linked worktree (worktree.h; wt.name NULL otherwise): its common
     * Git directory is the last of the volume routers (vol_of SIZE_MAX),
     * and wt_gitfile the gitfile the sandbox sees at /workspace/.git. */
    struct lz_worktree wt;
    char *wt_gitfile, *wt_gitdir_file;
    /* Credentials (hc_creds.c): the Domain CA from the generation's start
     * until the TLS gate takes it (NULL without a credential the gate
     * serves), and the directory of its certificate, bound read-only at
     * /run/lazaret/trust (NULL without). */
    struct lz_minica *cred_ca;
    char *trust_dir;
    struct lz_esc *esc;                 /* escalation.c: mailbox, keys, requests (NULL before the Trust Anchor) */
    const struct hc_esc_port *esc_port; /* what escalation.c may call (coordinator.c wires it) */
    /* generation.c, while starting: what goes to the Supervisor. */
    struct {
        int addr_fd;         /* host-address watch (netfollow.h), or -EBADF */
        int policy_fd;       /* sealed memfd of the policy bytes */
        char policy_hex[65]; /* their digest */
        /* The mailbox's req/ and res/ tmpfs roots, from the Supervisor's
         * MAILBOX (supervisor.h), until the Trust Anchor takes them. */
        int mbox_fd[2];
        /* The Domain resolver's sockets from the Supervisor's DNS
         * (rschan.h), in the order LZ_NET_DNS_UDP, _TCP, _RTNL, _DIAG
         * (netpolicy.h), until the resolver takes them; -EBADF when absent. */
        int dns_fd[LZ_NET_DNS_FDS];
        /* The connectivity helper's readiness pipe (slirp.h), from its
         * launch until it reported (read while runsc boots), and its API
         * socket path for published ports (NULL: none). */
        int slirp_ready_fd;
        char *slirp_api;
        long t_slirp; /* its release (lz_now_ms), for the log */
    } boot;
    struct hc_net *net; /* hc_net.c: the resolver and what it reported (NULL before hc_net_start) */
    struct hc_ref *ref; /* hc_refusal.c: the routers' refusals (NULL before the Supervisor's spawn) */
    /* generation.c, while releasing. */
    struct {
        bool rec;    /* a durable generation to record into */
        bool proven; /* every resource so far proven gone */
        bool ok;     /* every record so far written */
        bool lease_removed;
    } rel;
};
