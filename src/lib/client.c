/* client.c — see client.h. */
#include "client.h"
#include "argcodec.h"
#include "coordinator.h"
#include "paths.h"
#include "procenv.h"
#include "proto.h"
#include "readiness.h"
#include "spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>

#define START_LOCK_TIMEOUT_S 120
#define COORD_READY_TIMEOUT_MS 120000

/* Terminal state, restored from any path out (including signals). */
static struct termios saved_termios;
static volatile sig_atomic_t termios_saved;
static int tty_fd = -1;

static void restore_terminal(void) {
    if (termios_saved) {
        tcsetattr(tty_fd, TCSAFLUSH, &saved_termios);
        termios_saved = 0;
    }
}

static void fatal_signal(int sig) {
    restore_terminal();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int enter_raw(int fd) {
    struct termios t;
    if (tcgetattr(fd, &saved_termios) < 0)
        return -errno;
    tty_fd = fd;
    termios_saved = 1;
    atexit(restore_terminal);
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(fatal); i++)
        signal(fatal[i], fatal_signal);
    t = saved_termios;
    cfmakeraw(&t);
    return tcsetattr(fd, TCSAFLUSH, &t) < 0 ? -errno : 0;
}

static int start_coordinator(const struct lz_client_opts *o, bool tty, struct lz_error *err) {
    const char *artifact_id = NULL;
    int prep_r = o->prepare(o->prepare_ud, &artifact_id, err);
    if (prep_r < 0)
        return prep_r;
    const struct lz_config *c = o->cfg;
    int r = lz_mkdir_p(c->domain_dir, 0700);
    if (r < 0)
        return lz_error_set(err, r, "cannot create the Domain Root %s: %s", c->domain_dir, strerror(-r));
    _cleanup_free_ char *logp = lz_xasprintf("%s/coordinator.log", c->domain_dir);
    _cleanup_close_ int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd < 0)
        return lz_error_set(err, -errno, "cannot open %s: %s", logp, strerror(errno));
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) < 0)
        return lz_error_set(err, -errno, "pipe: %s", strerror(errno));
    _cleanup_free_ char *self = NULL;
    if ((r = lz_self_exe(&self)) < 0) {
        close(rp[0]);
        close(rp[1]);
        return lz_error_set(err, r, "cannot find the lazaret binary");
    }
    /* The coordinator starts with a minimal environment (procenv.h), so
     * that no secret of ours shows in its /proc/PID/environ for the life
     * of the Domain; the values of the host variables the profile
     * references go to it in a sealed memfd that it reads and closes
     * before it starts anything. */
    _cleanup_close_ int envfd = -EBADF;
    if ((r = lz_envpass_create(c, &envfd, err)) < 0) {
        close(rp[0]);
        close(rp[1]);
        return r;
    }
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_COORDINATOR);
    /* The canonical file the client resolved (the coordinator runs in /);
     * our session's kind: its exec client is started while the sandbox
     * boots (session.c, hc_session_prestart). */
    struct lz_coordinator_args ca = { .ready_fd = rp[1],
                                      .workspace = c->workspace,
                                      .expect_domain = c->domain_id_hex,
                                      .expect_fingerprint = c->fingerprint_hex,
                                      .artifact_id = artifact_id,
                                      .env_fd = envfd,
                                      .config_path = c->source_path,
                                      .profile = o->profile,
                                      .publish = o->publish,
                                      .first_session = tty ? 1 : 0 };
    char **argv = NULL;
    if ((r = lz_coordargs_encode(&ca, self, &argv, err)) < 0) {
        close(rp[0]);
        close(rp[1]);
        return lz_error_prefix(err, r, "cannot start the Host Coordinator");
    }
    int keep[] = { rp[1], envfd };
    /* Detached: own session, no terminal; it outlives this client. */
    struct lz_spawn_opts so = { .path = self,
                                .argv = argv,
                                .envp = envp,
                                .stdin_fd = -1,
                                .stdout_fd = logfd,
                                .stderr_fd = logfd,
                                .keep_fds = keep,
                                .n_keep_fds = 2,
                                .setns_pidfd = -1,
                                .new_session = true,
                                .cwd = "/" };
    struct lz_child child;
    r = lz_spawn(&so, &child);
    lz_argv_free(argv);
    close(rp[1]);
    lz_closep(&envfd);
    if (r < 0) {
        close(rp[0]);
        return lz_error_set(err, r, "cannot start the Host Coordinator: %s", strerror(-r));
    }
    /* Once ready it is detached: we never wait for it, and it is
     * re-parented when we exit. A coordinator that failed to start has
     * cleaned up before answering: we reap it (bounded), leaving nothing. */

    struct lz_ready rd;
    r = lz_ready_read(rp[0], COORD_READY_TIMEOUT_MS, &rd);
    close(rp[0]);
    if (r == -ETIMEDOUT) {
        lz_child_close(&child);
        return lz_error_set(err, -ETIMEDOUT, "the Host Coordinator did not become ready (see %s)", logp);
    }
    if (r == 0 && rd.status == LZ_READY_OK) {
        lz_child_close(&child);
        return 0;
    }
    int st;
    if (lz_child_wait(&child, 10000, &st) < 0)
        lz_child_close(&child);
    if (r == 0)
        return lz_error_set(err, -EIO, "%s", rd.msg);
    return lz_error_set(err, -EIO, "the Host Coordinator exited during start (see %s)", logp);
}

/* Small control messages on the non-blocking socket: wait for room,
 * bounded, rather than drop a resize or a signal. */
static void send_control(int sock, uint8_t type, const void *p, size_t n) {
    for (int i = 0; i < 100; i++) {
        if (lz_msg_send(sock, type, 0, p, n) != -EAGAIN)
            return;
        struct pollfd pf = { .fd = sock, .events = POLLOUT };
        poll(&pf, 1, 50);
    }
}

static const char *const passed_env[] = { "TERM",     "LANG",        "COLORTERM", "LC_ALL",
                                          "LC_CTYPE", "LC_MESSAGES", "LANGUAGE",  "TZ" };

static int attach(const struct lz_client_opts *o, int sock, bool tty, uint32_t *ret_sid, struct lz_error *err) {
    struct lz_hello h = { .version = LZ_PROTO_VERSION, .flags = tty ? LZ_HELLO_TTY : 0 };
    memcpy(h.domain_id, o->cfg->domain_id, 32);
    memcpy(h.fingerprint, o->cfg->fingerprint, 32);
    if (tty) {
        struct winsize ws;
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
            h.rows = ws.ws_row;
            h.cols = ws.ws_col;
        }
    }
    h.argv = (char **)o->argv;
    h.argc = o->argv ? o->argc : 0;
    char *envv[LZ_ARRAY_SIZE(passed_env) + 1];
    size_t ne = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(passed_env); i++) {
        const char *v = getenv(passed_env[i]);
        if (v && strlen(v) < 256)
            envv[ne++] = lz_xasprintf("%s=%s", passed_env[i], v);
    }
    envv[ne] = NULL;
    h.envv = envv;
    h.envc = ne;
    /* The directory of the repository the user is in (config.h). */
    _cleanup_free_ char *cwd =
        o->cfg->start_dir && o->cfg->start_dir[0] ? lz_xasprintf(LZ_SANDBOX_WORKSPACE "/%s", o->cfg->start_dir) : NULL;
    h.cwd = cwd;
    static uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    int r = lz_hello_encode(&h, buf, sizeof buf, &len);
    for (size_t i = 0; i < ne; i++)
        free(envv[i]);
    if (r < 0)
        return lz_error_set(err, r, "the command line is too long for one session request");
    r = lz_msg_send(sock, LZ_MSG_HELLO, 0, buf + LZ_PROTO_HDR, len - LZ_PROTO_HDR);
    if (r < 0)
        return lz_error_set(err, r, "cannot talk to the Host Coordinator: %s", strerror(-r));
    for (;;) {
        ssize_t n = lz_msg_recv(sock, buf, sizeof buf);
        if (n <= 0)
            return lz_error_set(err, -ECONNRESET, "the Host Coordinator closed the connection");
        if (buf[0] == LZ_MSG_READY && n >= LZ_PROTO_HDR + 4) {
            *ret_sid = lz_get_u32(buf + LZ_PROTO_HDR);
            return 0;
        }
        if (buf[0] == LZ_MSG_REFUSED && n >= LZ_PROTO_HDR + 4) {
            uint32_t code = lz_get_u32(buf + LZ_PROTO_HDR);
            int mlen = (int)(n - LZ_PROTO_HDR - 4);
            lz_error_set(err, code == LZ_REFUSE_STOPPING ? -EAGAIN : -EPERM, "%.*s", mlen,
                         (const char *)buf + LZ_PROTO_HDR + 4);
            return err ? err->code : -EPERM;
        }
        if (buf[0] == LZ_MSG_NOTICE) {
            fprintf(stderr, "lazaret: %.*s\n", (int)(n - LZ_PROTO_HDR), (const char *)buf + LZ_PROTO_HDR);
            continue;
        }
        return lz_error_set(err, -EBADMSG, "unexpected message from the Host Coordinator");
    }
}

static int connect_or_start(const struct lz_client_opts *o, bool tty, int *ret_sock, struct lz_error *err) {
    _cleanup_free_ char *rt = NULL;
    int r = lz_runtime_dir(&rt, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *sp = lz_domain_socket_path(rt, o->cfg->domain_id_hex);
    _cleanup_free_ char *lp = lz_domain_start_lock_path(rt, o->cfg->domain_id_hex);
    /* A coordinator that is stopping refuses us; we then start the next
     * generation. Bounded: a few rounds only. */
    for (int attempt = 0; attempt < 5; attempt++) {
        _cleanup_close_ int lk = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lk < 0)
            return lz_error_set(err, -errno, "cannot open %s: %s", lp, strerror(errno));
        r = lz_flock_timeout(lk, START_LOCK_TIMEOUT_S);
        if (r < 0)
            return lz_error_set(err, r, "timed out waiting for another lazaret starting this Domain");
        int sock = lz_proto_connect(sp);
        if (sock == -ENOENT || sock == -ECONNREFUSED) {
            r = start_coordinator(o, tty, err);
            if (r < 0)
                return r;
            sock = lz_proto_connect(sp);
        }
        if (sock < 0)
            return lz_error_set(err, sock, "cannot connect to the Host Coordinator at %s: %s", sp, strerror(-sock));
        uint32_t sid;
        r = attach(o, sock, tty, &sid, err);
        if (r == -EAGAIN || r == -ECONNRESET) {
            close(sock);
            continue; /* stopping generation: go again */
        }
        if (r < 0) {
            close(sock);
            return r;
        }
        *ret_sock = sock;
        return 0;
    }
    return lz_error_set(err, -EAGAIN, "the Domain kept stopping while we tried to join it; try again");
}

int lz_client_session(const struct lz_client_opts *o, struct lz_error *err) {
    bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    _cleanup_close_ int sock = -EBADF;
    int r = connect_or_start(o, tty, &sock, err);
    if (r < 0)
        return r;

    static const int sigs[] = { SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, 0 };
    _cleanup_close_ int sfd = lz_signalfd_block(sigs);

    if (tty && (r = enter_raw(STDIN_FILENO)) < 0)
        return lz_error_set(err, r, "cannot put the terminal in raw mode: %s", strerror(-r));

    static uint8_t buf[LZ_PROTO_MAX];
    /* stdin data waiting for room in the socket: while it waits we stop
     * reading stdin but keep reading the socket, or a command that fills
     * its stdout before draining its stdin would deadlock us both. */
    static uint8_t out[LZ_PROTO_MAX];
    size_t outlen = 0;
    bool stdin_open = true, eof_pending = false;
    int status = -1;
    bool lost = false;
    int fl = fcntl(sock, F_GETFL);
    fcntl(sock, F_SETFL, fl | O_NONBLOCK);
    while (status < 0) {
        if (outlen || eof_pending) {
            int sr =
                outlen ? lz_msg_send(sock, LZ_MSG_DATA, 0, out, outlen) : lz_msg_send(sock, LZ_MSG_EOF, 0, NULL, 0);
            if (sr == 0) {
                if (outlen)
                    outlen = 0;
                else
                    eof_pending = false;
                continue;
            }
            if (sr != -EAGAIN) {
                /* The coordinator reads no more: the command ended and its
                 * output and EXIT may be waiting in our receive queue (a
                 * short command whose stdin we had not closed yet). Stop
                 * sending and read what is left; EOF without EXIT is the
                 * loss. */
                outlen = 0;
                eof_pending = false;
                stdin_open = false;
            }
        }
        struct pollfd p[3] = {
            { .fd = sock, .events = POLLIN | ((outlen || eof_pending) ? POLLOUT : 0) },
            { .fd = stdin_open && !outlen && !eof_pending ? STDIN_FILENO : -1, .events = POLLIN },
            { .fd = sfd, .events = POLLIN },
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH && tty) {
                    struct winsize ws;
                    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
                        uint8_t b[4];
                        lz_put_u16(b, ws.ws_row);
                        lz_put_u16(b + 2, ws.ws_col);
                        send_control(sock, LZ_MSG_WINSIZE, b, 4);
                    }
                } else if (si.ssi_signo == SIGPIPE) {
                    /* stdout closed: handled at write */
                } else if (!tty) {
                    uint8_t b[4];
                    lz_put_u32(b, si.ssi_signo);
                    send_control(sock, LZ_MSG_SIGNAL, b, 4);
                } else if (si.ssi_signo != SIGINT && si.ssi_signo != SIGQUIT) {
                    /* SIGTERM/SIGHUP to a terminal client: leave the session. */
                    restore_terminal();
                    return 128 + (int)si.ssi_signo;
                }
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(STDIN_FILENO, out, 32768);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                stdin_open = false;
                eof_pending = true;
            } else {
                outlen = (size_t)n;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = lz_msg_recv(sock, buf, sizeof buf);
            if (n <= 0) {
                lost = true;
                break;
            }
            const uint8_t *pl = buf + LZ_PROTO_HDR;
            size_t pn = (size_t)n - LZ_PROTO_HDR;
            switch (buf[0]) {
            case LZ_MSG_DATA: {
                int fd = buf[1] == 2 ? STDERR_FILENO : STDOUT_FILENO;
                if (lz_write_full(fd, pl, pn) < 0 && fd == STDOUT_FILENO) {
                    /* stdout gone (EPIPE): the session cannot continue. */
                    restore_terminal();
                    return 141;
                }
                break;
            }
            case LZ_MSG_EXIT:
                if (pn == 4)
                    status = (int)(lz_get_u32(pl) & 0xff);
                else
                    lost = true;
                break;
            case LZ_MSG_NOTICE:
                restore_terminal();
                fprintf(stderr, "%slazaret: %.*s\n", tty ? "\r\n" : "", (int)pn, (const char *)pl);
                if (tty)
                    enter_raw(STDIN_FILENO);
                break;
            default: break;
            }
            if (lost)
                break;
        }
    }
    restore_terminal();
    if (lost || status < 0)
        return lz_error_set(err, -ECONNRESET,
                            "the Host Coordinator of this Domain ended unexpectedly; the session is closed");
    return status;
}
