/* escalation_int.h — what escalation.c (the request life cycle) and
 * escalation_exec.c (below it: records to the sandbox, host execution,
 * result streaming through the window, stdin) share: the request slots and
 * the mailbox. escalation_exec.c calls nothing of escalation.c; the rest
 * of the coordinator only through the port (hc_esc.h).
 */
#pragma once

#include "hc_esc.h"
#include "hostexec.h"
#include "hostrule.h"
#include "mailbox.h"
#include "sbwrite.h"
#include "trust.h"

#define ESC_MAX_REQ LZ_MBOX_LIVE_MAX /* live and lingering requests of a generation (the mailbox's bound) */
#define ESC_MAX_SEEN 65536           /* request IDs remembered against replay */
#define ESC_WINDOW 8                 /* unacknowledged result chunks */
#define ESC_SKEW_MS 5000             /* a request may be created this far in our future */
#define ESC_MAX_VALID_MS 600000      /* longest validity window of a request */
#define ESC_DEFAULT_TIMEOUT_S 3600
#define ESC_LINGER_MS 60000 /* result files kept after the end for the client */
#define ESC_PROMPT_TIMEOUT_MS 300000
#define ESC_PROMPT_GRACE_MS 2000
#define ESC_KILL_WAIT_MS 5000
/* Bytes the host process may write ahead of the window: a pipe of the
 * default 64 KiB hands over one writer's 128 KiB as 48 + 16 KiB, and each
 * chunk costs a signature, a file and a verification in the sandbox. */
#define ESC_PIPE_SIZE (512 * 1024)

enum { EV_INOTIFY = 0, EV_OUT = 1, EV_ERR = 2, EV_PID = 3, EV_IN = 4 };

enum esc_phase { EP_FREE, EP_PROMPT, EP_EXECUTING, EP_ENDED };

struct esc_req {
    enum esc_phase phase;
    uint8_t id[LZ_RECORD_ID_LEN];
    uint8_t sid[LZ_RECORD_ID_LEN];
    char hex[2 * LZ_RECORD_ID_LEN + 1];
    int session; /* the hc session's id */
    struct lz_record rec;
    struct lz_hostexec_ident ident;
    struct lz_child child;
    int out_r, err_r;
    uint64_t sent, acked; /* chunks written / acknowledged */
    uint64_t out_bytes;
    long deadline;     /* monotonic ms: execution or prompt deadline */
    long linger_until; /* EP_ENDED: when its result files go */
    bool window_paused;
    int exit_status, exit_sig; /* once the host process is reaped */
    /* For its audit row. */
    int64_t received_ms;
    enum lz_audit_decider by;
    enum lz_audit_decision ad;
    int64_t ref;
    char **edited; /* the approved argv when edited (NULL-terminated), else NULL */
    size_t edited_argc;
    char *host_cwd; /* where it ran (or would have), once resolved */
    /* An auto-approved request: what runs (the rule's canonical argv[0],
     * the request's other elements), and whether it runs in a fresh empty
     * directory (the rule has no cwd = "workspace"): its name beneath
     * hostcwd_fd once made, removed when the request ends. */
    char **run_argv;
    size_t run_argc;
    bool want_fresh;
    char *fresh;
    bool route; /* on the session's terminal (route HostProcess): out_r is its PTY master */
    /* stdin (--stdin, "stdin" below): the write end of the host process's
     * stdin pipe, the seq of the next stdin-chunk to take, and the one
     * chunk taken and not yet written (in_buf[in_off..in_len)). */
    int in_w;
    bool in_on;      /* asked for; until the request ends */
    bool in_eof;     /* the chunk with eof was taken */
    bool in_armed;   /* in_w is in the epoll set (EPOLLOUT) */
    bool in_dropped; /* the host process stopped reading: the rest is dropped */
    uint64_t in_next, in_chunks, in_bytes, in_dropped_bytes;
    uint8_t *in_buf;
    size_t in_len, in_off;
    /* A host-request (--allow-host): its rule as parsed here from the
     * sandbox's text, and the request as the audit keeps it
     * ("--allow-host", the text as written). Nothing runs for it. */
    bool net;
    struct lz_hostrule rule;
    char *net_argv[3];
};

struct lz_esc {
    struct lz_trust_anchor *ta;
    char *dir;
    int dir_fd, req_fd, res_fd, ino_fd, ep_fd, ws_fd;
    int hostcwd_fd; /* {gen_dir}/hostcwd: the fresh working directories */
    char *hostcwd;
    struct hc_esc_port port; /* everything it calls outside escalation (hc_esc.h) */
    struct lz_esc_policy policy;
    struct lz_sbw writable; /* what the prompt warns about (sbwrite.h) */
    struct esc_req req[ESC_MAX_REQ];
    uint8_t (*seen)[LZ_RECORD_ID_LEN];
    size_t n_seen;
};

/* ---- escalation_exec.c ---- */

int64_t esc_wall_ms(void);
/* Adds fd to the escalation's epoll set as (kind, request slot idx). */
int esc_ep_add(struct lz_esc *e, int fd, uint32_t kind, size_t idx);

/* Records to the sandbox (res/), signed by the Trust Anchor: any record of
 * q, its developer-decision, and the removal of its result files (chunks
 * [from_seq, to_seq); all: also its ack, decision and end). */
void esc_put(struct hc *h, struct esc_req *q, struct lz_record *rec);
void esc_put_decision(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc);
void esc_remove_results(struct lz_esc *e, struct esc_req *q, uint64_t from_seq, uint64_t to_seq, bool all);

/* Records from the sandbox (req/): a refusal logged; the request slot of
 * an ID (any phase but free); and the verification of a taken entry with
 * the key of the session it names: 0 with the session and the record, or
 * -1 (rejected, logged). */
void esc_reject(const char *name, const char *why);
struct esc_req *esc_find_req(struct lz_esc *e, const uint8_t id[LZ_RECORD_ID_LEN]);
int esc_open_entry(struct hc *h, const char *name, const uint8_t *buf, size_t len, unsigned kind,
                   struct session **ret_s, struct lz_record *ret);
void esc_remove_req_entry(struct lz_esc *e, const char *name);

/* stdin (lazaret-escalate --stdin): a stdin-chunk entry appeared; move
 * chunks into the host process's stdin while there is room; the request's
 * end (the pipe closes, what waits in req/ goes). */
void esc_on_stdin_entry(struct hc *h, const char *name, const struct lz_mbox_name *mn);
void esc_stdin_feed(struct hc *h, struct esc_req *q);
void esc_stdin_end(struct hc *h, struct esc_req *q);

/* Host execution. esc_precheck_cwd: the request's --cwd as the executor
 * will check it. esc_exec_start: the developer-decision d is written and
 * argv runs (identity resolved, and equal to shown when given; recorded in
 * the Domain Store before it may run); 0: q is EP_EXECUTING with its
 * pipes (or PTY, routed through the port) in the epoll set; < 0 with err
 * set: nothing runs (the caller ends the request). */
int esc_precheck_cwd(struct hc *h, struct esc_req *q, struct lz_error *err);
int esc_exec_start(struct hc *h, struct esc_req *q, enum lz_decision d, char *const *argv, size_t argc,
                   const struct lz_hostexec_ident *shown, struct lz_error *err);
/* The terminal goes back to the sandbox (before the PTY master closes);
 * the host process and its group killed, the pipes closed. */
void esc_route_end(struct hc *h, struct esc_req *q);
void esc_stop_process(struct hc *h, struct esc_req *q, int *status);
/* The fresh working directory of an auto-approved run goes. */
void esc_fresh_end(struct lz_esc *e, struct esc_req *q);

/* Streaming: the window open (reading the pipes) or paused; one pipe read
 * into result chunks while the window has room; the exited host process
 * reaped (true), its group killed. */
void esc_set_window(struct lz_esc *e, struct esc_req *q, bool open);
void esc_pump(struct hc *h, struct esc_req *q, int *fdp, enum lz_stream stream);
bool esc_reap(struct esc_req *q);
