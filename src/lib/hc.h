/* hc.h — what the Host Coordinator's files share (coordinator.h has the
 * contract): struct hc (one per coordinator process: the Domain's
 * generation and its sessions), the session record, and the log.
 *
 *   coordinator.c  entry point, event loop, control requests (ps, stop)
 *   generation.c   Domain start and teardown: the acquisition and release
 *                  tables (docs/state.md, docs/model/lazaret.pml)
 *   bundle.c       the generation's OCI bundle
 *   session.c      Session Terminals: runsc exec, the PTY/pipe relay
 *   escalation.c   host escalation: the mailbox, requests, host execution
 *
 * Internal to the coordinator: nothing outside these three includes it.
 */
#pragma once

#include "coordinator.h"
#include "config.h"
#include "audit.h"
#include "escalation.h"
#include "gitscan.h"

#include <pthread.h>
#include "netpolicy.h"
#include "procid.h"
#include "proto.h"
#include "spawn.h"
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
};

struct hc;
/* The prompt (another room): asked for a request no rule approves; it
 * answers later through hc_esc_resolved. NULL: no prompt in this build. */
typedef int (*hc_esc_prompt_fn)(struct hc *h, struct session *s, const struct lz_esc_request *r);

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
    int listen_fd;
    int lock_fd; /* the Domain flock, for the coordinator's life */
    int sfd;
    struct session *s[MAX_SESSIONS];
    /* The first session's exec client, started while the sandbox boots and
     * waiting for its process spec (session.c, hc_session_prestart), until
     * the starting client's hello takes it; NULL otherwise. */
    struct session *pre;
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
    struct lz_esc *esc;          /* escalation.c: mailbox, keys, requests (NULL before the Trust Anchor) */
    hc_esc_prompt_fn esc_prompt; /* escprompt.c (hc_prompt_begin); NULL: unmatched requests are denied */
    /* generation.c, while starting: what goes to the Supervisor. */
    struct {
        int addr_fd;         /* host-address watch (netfollow.h), or -EBADF */
        int policy_fd;       /* sealed memfd of the policy bytes */
        char policy_hex[65]; /* their digest */
        /* The mailbox's req/ and res/ tmpfs roots, from the Supervisor's
         * MAILBOX (supervisor.h), until the Trust Anchor takes them. */
        int mbox_fd[2];
    } boot;
    /* generation.c, while releasing. */
    struct {
        bool rec;    /* a durable generation to record into */
        bool proven; /* every resource so far proven gone */
        bool ok;     /* every record so far written */
        bool lease_removed;
    } rel;
};

/* The coordinator's log (its stderr is coordinator.log): one line, with
 * wall-clock time and our PID. */
void hc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Debug log of the protocol model's actions (docs/model/lazaret.pml), with
 * the model's action names, when LAZARET_DEBUG is set. */
void hc_model_action(const char *action, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* generation.c: the acquisition table, up to the published socket; on
 * failure err says why and hc_stop_generation releases what was taken. */
int hc_start_generation(struct hc *h, struct lz_error *err);
/* generation.c: the host Git scan on its own thread (the Supervisor's
 * spawn joins it), and the wait for it on every other way out. */
void hc_scan_start(struct hc *h);
void hc_scan_wait(struct hc *h);
/* generation.c: the release table (best effort; what cannot be proven
 * released leaves the generation "failed" for recovery). */
void hc_stop_generation(struct hc *h);

/* bundle.c: the image's login shell (bash, else sh), as a sandbox path. */
int hc_find_shell(const char *rootfs, char **ret);
/* bundle.c: <bundle_dir>/config.json, once the Supervisor exists (the spec
 * names its network namespace). */
int hc_write_bundle(struct hc *h, struct lz_error *err);

/* session.c */
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
void hc_session_client_msg(struct hc *h, struct session *s, short revents);
bool hc_flush_pending(struct session *s);
void hc_pump_input(struct session *s);
void hc_pump_output(struct session *s, int *fdp, uint8_t ch);
void hc_session_tick(struct hc *h, struct session *s);
void hc_begin_stop(struct hc *h, const char *why, bool force);
/* The live session with this id, or NULL. */
struct session *hc_session_by_id(struct hc *h, int id);

/* escalation.c: the Trust Anchor and the mailbox (a generation step),
 * the event-loop hooks (one fd: readable -> hc_esc_dispatch; hc_esc_tick
 * every loop), the session hooks and the end of everything. */
int hc_esc_create(struct hc *h, struct lz_error *err);
int hc_esc_fd(const struct hc *h);
void hc_esc_dispatch(struct hc *h);
void hc_esc_tick(struct hc *h);
/* The session's environment entries LAZARET_SESSION_ID/KEY (its anchor is
 * made here); nothing when escalation is not set up. */
int hc_esc_session_begin(struct hc *h, struct session *s, char **ret_id_env, char **ret_key_env);
/* Ends the session's requests (host processes killed) and its anchor. */
void hc_esc_session_end(struct hc *h, struct session *s, const char *why);
/* The prompt's answer (escprompt.c). Approve: argv (the request's own, or
 * the developer's edit) runs, recorded in the audit as ad (approved,
 * edited, approved-for-session, or session-approved with ref = the audit
 * row of the [s] approval it reuses); it runs only if argv[0] still
 * resolves to exactly the file the prompt showed (shown NULL: no check). */
struct lz_hostexec_ident;
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
/* escprompt.c: the route has room again (hc_route_host_room): a request
 * paused on it reads its terminal again. */
void hc_esc_route_room(struct hc *h, const uint8_t request_id[16]);
/* Kills every host process, frees the keys (Domain stop). */
void hc_esc_free(struct hc *h);
/* The directories bound into the sandbox (bundle.c): the mailbox, its
 * res/ (read-only), and the Escalation Client binary. NULL when unset. */
const char *hc_esc_mailbox_dir(const struct hc *h);
/* The Domain's sandbox-writable trees (sbwrite.h), computed once when the
 * mailbox is created; NULL before. */
const struct lz_sbw *hc_esc_writable(const struct hc *h);

/* escprompt.c: the prompt on the requesting session's terminal (the
 * hc_esc_prompt_fn), and its hooks into the relay: keys (true: taken by
 * the prompt), the sandbox's output held while it is up (true: taken),
 * resizes, the event loop (poll timeout, tick every loop), the request
 * going away (cancel, time-out, session end) and the session's end. */
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
int hc_prompt_begin(struct hc *h, struct session *s, const struct lz_esc_request *r);
bool hc_prompt_input(struct hc *h, struct session *s, const uint8_t *p, size_t n);
bool hc_prompt_hold_output(struct session *s, int *fdp);
bool hc_prompt_output_blocked(const struct session *s);
void hc_prompt_resize(struct session *s, unsigned rows, unsigned cols);
int hc_prompt_poll_timeout(struct hc *h, int timeout);
void hc_prompt_tick(struct hc *h);
void hc_prompt_request_gone(struct hc *h, int session, const uint8_t request_id[16]);
void hc_prompt_session_free(struct session *s);

/* coordinator.c: `lazaret ps` / `lazaret stop` on a control connection. */
void hc_control_request(struct hc *h, struct session *s, const uint8_t *buf, size_t n);
