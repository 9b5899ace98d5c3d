/* lazaret-escalate — the Escalation Client (docs/escalation.md).
 *
 * Runs inside the Agent Sandbox (static: any image), as /run/lazaret/escalate
 * and lazaret-escalate on PATH. It asks the Host Coordinator to run ARGV on
 * the host: one signed escalation-request into /run/lazaret/mailbox/req/,
 * then it polls res/ for the HC-signed answers (request-ack,
 * developer-decision, result-chunk, result-end), verified with the HC's
 * public key (hc.pub), writes each chunk's bytes to its own stdout or
 * stderr as it arrives, and acknowledges the highest contiguous chunk
 * (the HC sends at most 8 unacknowledged chunks). Ctrl-C (SIGINT), SIGTERM
 * and SIGHUP send a cancel. Exit statuses: see usage().
 *
 * With --stdin, its own stdin goes to the host command as stdin-chunk
 * records (stdin_step), read only when it is readable so that results
 * and Ctrl-C are never held up; without it the host command reads
 * /dev/null.
 *
 * With --allow-host HOST[:PORT[,PORT...]] instead of ARGV it asks the
 * developer to let the sandbox reach a host by name (a host-request
 * record): the rule is checked here with the coordinator's own parser
 * (hostrule.h) for an early, clear error, and again by the coordinator,
 * whose check is the one that counts. Exit 0 allowed, 1 denied.
 */
#include "hostrule.h"
#include "mailbox.h"
#include "trust.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#define MBOX "/run/lazaret/mailbox"
#define REQ_VALID_MS 60000  /* the request must reach the HC within this */
#define ACK_WAIT_MS 15000   /* no request-ack by then: the host is not answering */
#define CANCEL_WAIT_MS 3000 /* after a cancel, wait this long for the end */
#define REASON_WAIT_MS 2000 /* after a denial's end, wait this long for its reason */
#define POLL_MIN_US 20      /* the first pause after something arrived */
#define POLL_MAX_US 10000   /* the longest pause between two looks at res/ */
#define POLL_IDLE_DIV 16    /* pause at most 1/16 of the time waited so far */
#define ACK_EVERY 6         /* acknowledge before the host's window of 8 is used up */

enum {
    EX_HOST_DENIED = 1, /* --allow-host: denied */
    EX_USAGE = 2,
    EX_TIMEDOUT = 124,
    EX_DENIED = 125,
    EX_FAILED = 126,
    EX_CANCELLED = 130,
};

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static void usage(FILE *f) {
    fputs("usage: lazaret-escalate [--justification TEXT] [--timeout SECONDS] [--cwd DIR] [--stdin] -- ARGV...\n"
          "       lazaret-escalate --allow-host HOST[:PORT[,PORT...]] [--justification TEXT] [--timeout SECONDS]\n"
          "\n"
          "Asks the host to run ARGV (argv[0] an absolute host path; no PATH lookup, no shell).\n"
          "It runs only if a trusted auto-approval rule matches it exactly or the developer\n"
          "approves it on this session's terminal. Its stdout and stderr are streamed here;\n"
          "run from a terminal (stdin and stdout), it gets the session's terminal instead and\n"
          "can ask you questions there.\n"
          "\n"
          "  --justification TEXT  why (shown to the developer as text from the sandbox)\n"
          "  --timeout SECONDS     give up after this long (the host command is cancelled)\n"
          "  --cwd DIR             working directory, /workspace or below (default /workspace)\n"
          "  --stdin               send this program's stdin to the host command (streamed until\n"
          "                        end of input; without --stdin the host command reads /dev/null)\n"
          "\n"
          "Exit status: the host command's own status; 128+N if it was killed by signal N;\n"
          "125 denied; 124 timed out; 130 cancelled (Ctrl-C); 126 could not start, verify\n"
          "or reach the host; 2 usage error.\n"
          "\n"
          "--allow-host asks the developer to let this sandbox reach HOST by name (an exact\n"
          "name, no wildcard; only on the TCP ports given, or every port without them). Allowed,\n"
          "it stays allowed for every session of this Domain until the Domain stops.\n"
          "Exit status: 0 allowed; 1 denied; 124, 130, 126, 2 as above.\n",
          f);
}

static void die_msg(const char *msg) { fprintf(stderr, "lazaret-escalate: %s\n", msg); }

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct client {
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    uint8_t hc_pk[crypto_sign_PUBLICKEYBYTES];
    uint8_t id[LZ_RECORD_ID_LEN], sid[LZ_RECORD_ID_LEN];
    int req_fd, res_fd;
    uint64_t next_seq, acked;
    bool got_ack, got_decision;
    enum lz_decision decision;
    bool stdout_gone, stderr_gone;
    /* --stdin: the next stdin-chunk seq, the lowest seq whose entry may
     * still be in req/, and the chunk read but not yet written. */
    bool in_on, in_done, in_eof, in_warned;
    uint64_t in_seq, in_gone;
    size_t in_len;
};

/* Reads res/<id>.<kind>.<seq> if it is there: 1 with *rec, 0 absent,
 * -1 present but refused (not the HC's signature, not a regular file). */
static int fetch(struct client *c, unsigned kind, uint64_t seq, struct lz_record *rec) {
    struct lz_mbox_name n = { .kind = kind, .seq = seq };
    memcpy(n.request_id, c->id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    if (lz_mbox_name_format(&n, name, sizeof name) < 0)
        return -1;
    int fd = openat(c->res_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    static uint8_t buf[LZ_RECORD_MAX + 1];
    struct stat st;
    ssize_t len = -1;
    /* One read of at most the bound + 1, not to end-of-file: every read
     * through the gofer costs, and a record read short or long fails its
     * signature (then the next look reads it again). */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= LZ_RECORD_MAX)
        do
            len = read(fd, buf, sizeof buf);
        while (len < 0 && errno == EINTR);
    close(fd);
    if (len < 0 || len > LZ_RECORD_MAX)
        return -1;
    struct lz_error err = { 0 };
    if (lz_record_open(c->hc_pk, buf, (size_t)len, LZ_REC_MASK(kind), rec, &err) < 0 ||
        memcmp(rec->request_id, c->id, LZ_RECORD_ID_LEN) != 0 || memcmp(rec->session_id, c->sid, LZ_RECORD_ID_LEN) ||
        (kind == LZ_REC_RESULT_CHUNK && rec->chunk.seq != seq)) {
        if (!err.msg[0])
            snprintf(err.msg, sizeof err.msg, "a record for another request");
        fprintf(stderr, "lazaret-escalate: ignoring a result record that does not verify: %s\n", err.msg);
        lz_record_clear(rec);
        return -1;
    }
    return 1;
}

static int send_record(struct client *c, struct lz_record *rec) {
    struct lz_error err = { 0 };
    memcpy(rec->request_id, c->id, LZ_RECORD_ID_LEN);
    memcpy(rec->session_id, c->sid, LZ_RECORD_ID_LEN);
    int r = lz_mbox_put_record(c->req_fd, c->sk, rec, &err);
    if (r == -ENOSPC || r == -EDQUOT)
        /* The mailbox's bound (docs/escalation.md): something in this
         * sandbox filled req/ or holds its files open. */
        fprintf(stderr,
                "lazaret-escalate: %s: the escalation mailbox " MBOX "/req is full (a process of this sandbox fills "
                "it or holds its files open); close them, or stop the Domain (lazaret stop) and start it again\n",
                err.msg);
    else if (r < 0)
        fprintf(stderr, "lazaret-escalate: %s\n", err.msg);
    return r;
}

static void send_ack(struct client *c) {
    if (c->next_seq == c->acked)
        return;
    struct lz_record rec = { .kind = LZ_REC_CHUNK_ACK };
    rec.chunk_ack.next_seq = c->next_seq;
    /* One ack file at a time: a newer one replaces an unread older one. */
    if (send_record(c, &rec) == 0)
        c->acked = c->next_seq;
}

static void send_cancel(struct client *c, enum lz_cancel_reason why) {
    struct lz_record rec = { .kind = LZ_REC_CANCEL };
    rec.cancel.reason = why;
    rec.cancel.cancelled_ms = (uint64_t)wall_ms();
    (void)send_record(c, &rec);
}

static void emit(struct client *c, const struct lz_record *rec) {
    if (rec->chunk.stream == LZ_STREAM_TERMINAL)
        return; /* the developer saw it on the session's terminal as it came */
    bool err = rec->chunk.stream == LZ_STREAM_STDERR;
    bool *gone = err ? &c->stderr_gone : &c->stdout_gone;
    if (!*gone && lz_write_full(err ? 2 : 1, rec->chunk.data, rec->chunk.len) < 0)
        *gone = true; /* keep acknowledging: the host command must not stall */
}

/* ---- --stdin ----
 * The Host Coordinator takes stdin-chunk entries strictly in order, one at
 * a time, when the host command's stdin pipe has room, and removes each
 * one it takes: so an entry of ours still in req/ is one not consumed, and
 * the window is at most LZ_RECORD_STDIN_WINDOW of them. Nothing else
 * bounds stdin: it streams for as long as it has bytes. */

static bool stdin_entry_present(struct client *c, uint64_t seq) {
    struct lz_mbox_name n = { .kind = LZ_REC_STDIN_CHUNK, .seq = seq };
    memcpy(n.request_id, c->id, LZ_RECORD_ID_LEN);
    char name[LZ_MBOX_NAME_MAX + 1];
    struct stat st;
    return lz_mbox_name_format(&n, name, sizeof name) == 0 && fstatat(c->req_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Reads what stdin holds now, without blocking (poll before each read, so
 * a terminal or a pipe shared with others keeps its flags): up to one
 * chunk; sets in_eof at end of input, on a read error or when fd 0 is not
 * open. */
static void stdin_read(struct client *c, uint8_t *buf) {
    while (c->in_len < LZ_RECORD_CHUNK_MAX && !c->in_eof) {
        struct pollfd p = { .fd = 0, .events = POLLIN };
        int n = poll(&p, 1, 0);
        if (n < 0 && errno == EINTR)
            return;
        if (n == 0)
            return;
        if (n < 0 || (p.revents & POLLNVAL)) {
            c->in_eof = true;
            return;
        }
        ssize_t r = read(0, buf + c->in_len, LZ_RECORD_CHUNK_MAX - c->in_len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (r < 0)
            fprintf(stderr, "lazaret-escalate: cannot read stdin (%s): the host command's input ends here\n",
                    strerror(errno));
        if (r <= 0) {
            c->in_eof = true;
            return;
        }
        c->in_len += (size_t)r;
    }
}

/* One step of --stdin from the wait loop: 1 when a record was written. */
static int stdin_step(struct client *c) {
    static uint8_t buf[LZ_RECORD_CHUNK_MAX];
    if (!c->in_on || c->in_done)
        return 0;
    while (c->in_gone < c->in_seq && !stdin_entry_present(c, c->in_gone))
        c->in_gone++;
    if (c->in_seq - c->in_gone >= LZ_RECORD_STDIN_WINDOW)
        return 0;
    stdin_read(c, buf);
    if (c->in_len == 0 && !c->in_eof)
        return 0;
    struct lz_record rec = { .kind = LZ_REC_STDIN_CHUNK };
    memcpy(rec.request_id, c->id, LZ_RECORD_ID_LEN);
    memcpy(rec.session_id, c->sid, LZ_RECORD_ID_LEN);
    rec.stdin_chunk.seq = c->in_seq;
    rec.stdin_chunk.data = buf;
    rec.stdin_chunk.len = c->in_len;
    /* A full chunk goes before the end is known; the end then follows as
     * an empty chunk with eof. */
    rec.stdin_chunk.eof = c->in_eof;
    struct lz_error err = { 0 };
    if (lz_mbox_put_record(c->req_fd, c->sk, &rec, &err) < 0) {
        /* Kept and tried again on the next step; said once. */
        if (!c->in_warned)
            fprintf(stderr, "lazaret-escalate: cannot send stdin (will retry): %s\n", err.msg);
        c->in_warned = true;
        return 0;
    }
    c->in_seq++;
    c->in_len = 0;
    c->in_done = c->in_eof;
    return 1;
}

/* Reads what has arrived; 1 when anything did. *ret_end holds the end once
 * every chunk it counts was read. */
static int progress(struct client *c, bool *have_end, struct lz_record *end) {
    int any = 0;
    struct lz_record rec;
    /* The host writes request-ack first, then (unless the request ends
     * undecided) developer-decision, the chunks, result-end: look only for
     * what can come next, each look is a lookup through the gofer. */
    if (!c->got_ack) {
        if (fetch(c, LZ_REC_REQUEST_ACK, 0, &rec) != 1)
            return 0;
        c->got_ack = true;
        any = 1;
        lz_record_clear(&rec);
    }
    if (!c->got_decision && fetch(c, LZ_REC_DEVELOPER_DECISION, 0, &rec) == 1) {
        c->got_decision = c->got_ack = true;
        c->decision = rec.decision.decision;
        any = 1;
        lz_record_clear(&rec);
    }
    int chunks = 0;
    for (int k = 0; c->got_decision && k < 64 && fetch(c, LZ_REC_RESULT_CHUNK, c->next_seq, &rec) == 1; k++) {
        emit(c, &rec);
        c->next_seq++;
        chunks++;
        lz_record_clear(&rec);
        /* Before the window is used up, not when it is drained: the host
         * signs the next chunks while this side reads the ones it has; not
         * after every chunk: an acknowledgement is a file made through the
         * gofer, which costs as much as reading two chunks. */
        if (c->next_seq - c->acked >= ACK_EVERY)
            send_ack(c);
    }
    if (chunks || any)
        send_ack(c);
    any |= chunks > 0;
    /* While chunks arrive the end cannot be complete: one lookup less per
     * chunk through the gofer. */
    if (!*have_end && !chunks && fetch(c, LZ_REC_RESULT_END, 0, &rec) == 1) {
        *have_end = true;
        *end = rec;
        c->got_ack = true;
        any = 1;
    }
    return any;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *ret) {
    char *e;
    errno = 0;
    unsigned long v = strtoul(s, &e, 10);
    if (errno || e == s || *e || s[0] == '-' || v > max)
        return -1;
    *ret = (uint32_t)v;
    return 0;
}

static int load_keys(struct client *c) {
    const char *sid = getenv("LAZARET_SESSION_ID"), *key = getenv("LAZARET_SESSION_KEY");
    if (!sid || !key || lz_trust_hex_parse(sid, strlen(sid), c->sid, sizeof c->sid) < 0 ||
        lz_trust_parse_secret(key, c->sk) < 0) {
        die_msg("not in a Lazaret session (LAZARET_SESSION_ID / LAZARET_SESSION_KEY missing or invalid)");
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    int dfd = open(MBOX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || lz_read_file_at(dfd, "hc.pub", 256, &buf, &len) < 0 ||
        lz_trust_hex_parse(buf, len, c->hc_pk, sizeof c->hc_pk) < 0) {
        free(buf);
        if (dfd >= 0)
            close(dfd);
        die_msg("cannot read the host's key " MBOX "/hc.pub: is this a Lazaret sandbox?");
        return -1;
    }
    free(buf);
    c->req_fd = openat(dfd, "req", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    c->res_fd = openat(dfd, "res", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(dfd);
    if (c->req_fd < 0 || c->res_fd < 0) {
        die_msg("cannot open the mailbox " MBOX);
        return -1;
    }
    return 0;
}

static int exit_for(const struct lz_record *end) {
    switch (end->end.outcome) {
    case LZ_OUTCOME_COMPLETED: return end->end.signal ? 128 + (int)end->end.signal : end->end.exit_status;
    case LZ_OUTCOME_DENIED:
        die_msg("denied: the host did not approve this request (no matching auto-approval rule, the "
                "developer said no, or the host refused it for the reason printed above)");
        return EX_DENIED;
    case LZ_OUTCOME_TIMED_OUT:
        die_msg("timed out on the host (no decision before the prompt's timeout, or the command ran past its "
                "time limit)");
        return EX_TIMEDOUT;
    case LZ_OUTCOME_CANCELLED:
        die_msg("cancelled (Ctrl-C at the host's prompt, or the session ended)");
        return EX_CANCELLED;
    case LZ_OUTCOME_FAILED:
        die_msg("the host could not run the command (it failed to start or its executable changed; "
                "see the Domain's coordinator.log)");
        return EX_FAILED;
    }
    return EX_FAILED;
}

/* --allow-host's outcome: one line on stderr saying which. */
static int exit_for_host(const struct lz_record *end, const char *host) {
    switch (end->end.outcome) {
    case LZ_OUTCOME_COMPLETED: fprintf(stderr, "lazaret-escalate: allowed: %s\n", host); return 0;
    case LZ_OUTCOME_DENIED:
        fprintf(stderr,
                "lazaret-escalate: denied: %s (the developer said no, or the host refused it for the reason "
                "printed above)\n",
                host);
        return EX_HOST_DENIED;
    case LZ_OUTCOME_TIMED_OUT:
        fprintf(stderr, "lazaret-escalate: timed out: %s (no decision before the prompt's timeout)\n", host);
        return EX_TIMEDOUT;
    case LZ_OUTCOME_CANCELLED:
        fprintf(stderr, "lazaret-escalate: cancelled: %s (Ctrl-C at the host's prompt, or the session ended)\n", host);
        return EX_CANCELLED;
    case LZ_OUTCOME_FAILED:
        fprintf(stderr, "lazaret-escalate: not allowed: %s (approved, but the host could not add it)\n", host);
        return EX_FAILED;
    }
    return EX_FAILED;
}

/* The sandbox's own check of --allow-host, for a clear error before
 * anything is sent (the coordinator parses it again). */
static int check_host(const char *host) {
    struct lz_hostrule rule;
    struct lz_error err = { 0 };
    if (lz_hostrule_parse(host, 0, &rule, &err) < 0) {
        fprintf(stderr, "lazaret-escalate: --allow-host: %s\n", err.msg);
        return -1;
    }
    if (rule.wildcard) {
        die_msg("--allow-host takes an exact host name, not a wildcard: a wildcard is the developer's to write in "
                "the profile's allow_hosts");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *justification = "", *cwd = NULL, *host = NULL;
    uint32_t timeout_s = 0;
    bool want_stdin = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--stdin")) {
            want_stdin = true;
            continue;
        }
        if (i + 1 >= argc ||
            (strcmp(a, "--justification") && strcmp(a, "--timeout") && strcmp(a, "--cwd") &&
             strcmp(a, "--allow-host"))) {
            usage(stderr);
            return EX_USAGE;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--justification"))
            justification = v;
        else if (!strcmp(a, "--cwd"))
            cwd = v;
        else if (!strcmp(a, "--allow-host"))
            host = v;
        else if (parse_u32(v, LZ_RECORD_TIMEOUT_MAX_S, &timeout_s) < 0) {
            die_msg("--timeout takes a number of seconds (at most 86400)");
            return EX_USAGE;
        }
    }
    if (host && (i < argc || cwd || want_stdin)) {
        die_msg("--allow-host takes no ARGV, --cwd or --stdin: it asks for a host, it runs nothing");
        return EX_USAGE;
    }
    if (host && check_host(host) < 0)
        return EX_USAGE;
    if (!host && i >= argc) {
        usage(stderr);
        return EX_USAGE;
    }
    if (!cwd)
        cwd = "/workspace";
    /* A closed stdin (or stdout, stderr) must not be taken over by the
     * mailbox descriptors opened below: --stdin would read a directory. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC) != fd)
            return EX_FAILED;
    if (sodium_init() < 0) {
        die_msg("libsodium failed to initialise");
        return EX_FAILED;
    }
    struct client c = { .req_fd = -1, .res_fd = -1, .in_on = want_stdin };
    if (load_keys(&c) < 0)
        return EX_FAILED;

    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    randombytes_buf(c.id, sizeof c.id);
    int64_t now = wall_ms();
    struct lz_record req = { .kind = host ? LZ_REC_HOST_REQUEST : LZ_REC_ESCALATION_REQUEST };
    if (host) {
        req.host.created_ms = (uint64_t)now;
        req.host.expires_ms = (uint64_t)(now + REQ_VALID_MS);
        req.host.host = (char *)host;
        req.host.justification = (char *)justification;
    } else {
        req.request.created_ms = (uint64_t)now;
        req.request.expires_ms = (uint64_t)(now + REQ_VALID_MS);
        req.request.argv = argv + i;
        req.request.argc = (size_t)(argc - i);
        req.request.cwd = (char *)cwd;
        req.request.justification = (char *)justification;
        req.request.timeout_s = timeout_s;
        req.request.stdin_wanted = want_stdin;
        /* On a terminal (and not streaming stdin), the host command gets
         * the session's terminal: it can ask the developer questions. */
        req.request.terminal = !want_stdin && isatty(0) && isatty(1);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (send_record(&c, &req) < 0)
        return EX_FAILED;

    long start = lz_now_ms();
    long deadline = timeout_s ? start + (long)timeout_s * 1000 : 0;
    /* Inside gVisor, inotify does not see what the host creates in a gofer
     * mount, so res/ is polled: after each arrival quickly again, then with
     * a pause of at most 1/POLL_IDLE_DIV of the time waited so far (the
     * answer is noticed at most that fraction late), never longer than
     * POLL_MAX_US. */
    struct timespec idle_since;
    clock_gettime(CLOCK_MONOTONIC, &idle_since);
    bool have_end = false;
    long end_seen = 0;
    struct lz_record end = { 0 };
    for (;;) {
        int any = progress(&c, &have_end, &end);
        any |= stdin_step(&c);
        /* A request that did not complete may have had its chunks removed
         * (cancelled); but a denial's reason comes as a chunk before its
         * end: wait for the chunks it counts, a bounded while. */
        if (have_end && !end_seen)
            end_seen = lz_now_ms();
        if (have_end &&
            (end.end.chunks <= c.next_seq ||
             (end.end.outcome != LZ_OUTCOME_COMPLETED &&
              (end.end.outcome != LZ_OUTCOME_DENIED || lz_now_ms() - end_seen > REASON_WAIT_MS))))
            break;
        if (g_signal || (deadline && lz_now_ms() >= deadline)) {
            bool interrupted = g_signal != 0;
            send_cancel(&c, interrupted ? LZ_CANCEL_INTERRUPTED : LZ_CANCEL_CLIENT_TIMEOUT);
            /* Bounded: the host's confirmation that it ended the command. */
            long until = lz_now_ms() + CANCEL_WAIT_MS;
            while (!have_end && lz_now_ms() < until) {
                progress(&c, &have_end, &end);
                struct timespec ts = { 0, 2000000 };
                nanosleep(&ts, NULL);
            }
            die_msg(interrupted ? "cancelled" : "timed out (the request was cancelled)");
            return interrupted ? EX_CANCELLED : EX_TIMEDOUT;
        }
        if (!c.got_ack && lz_now_ms() - start > ACK_WAIT_MS) {
            die_msg("the host did not answer (is the Domain's coordinator running?)");
            return EX_FAILED;
        }
        struct timespec tnow;
        clock_gettime(CLOCK_MONOTONIC, &tnow);
        if (any) {
            idle_since = tnow;
            continue;
        }
        long idle_us = (long)(tnow.tv_sec - idle_since.tv_sec) * 1000000 + (tnow.tv_nsec - idle_since.tv_nsec) / 1000;
        long pause_us = idle_us / POLL_IDLE_DIV;
        pause_us = pause_us < POLL_MIN_US ? POLL_MIN_US : pause_us > POLL_MAX_US ? POLL_MAX_US : pause_us;
        struct timespec ts = { 0, pause_us * 1000 };
        nanosleep(&ts, NULL);
    }
    if (getenv("LAZARET_ESCALATE_TIMING")) {
        /* bench/escalation.py: the record round trip alone, without this
         * process's own start in the sandbox. */
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
        fprintf(stderr, "lazaret-escalate: timing: request to end %ld us\n", us);
    }
    int rc = host ? exit_for_host(&end, host) : exit_for(&end);
    lz_record_clear(&end);
    sodium_memzero(c.sk, sizeof c.sk);
    return rc;
}
