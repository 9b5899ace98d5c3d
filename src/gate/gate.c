/* lazaret-gate — the TLS gate of a Domain (issue 24 §1; docs/network.md
 * "The TLS gate").
 *
 * With egress by name, a learned address is reachable on the ports its
 * name allows; but one address serves many names (shared CDN addresses,
 * domain fronting). For TCP port 443 the learned routes deliver the
 * sandbox's connections inside the enforcement namespace, to a listener
 * the Runtime Supervisor opened there with IP_TRANSPARENT (fqdnroute.h,
 * netpolicy.h) and the Host Coordinator handed to this process. For every
 * connection the gate:
 *
 *   1. takes the original destination from getsockname();
 *   2. peeks (MSG_PEEK) at the first bytes until they hold a whole
 *      ClientHello (tlshello.h: strict, bounded; reassembled over
 *      segments and records; at most GATE_HELLO_MS);
 *   3. asks the Domain's resolver (gateproto.h) whether the hello's
 *      server name may reach that address: allowed by the policy on that
 *      port, and the address learned from an answer for that very name;
 *   4. if so, connects to the original destination from the host's
 *      network namespace (this process's) and splices the two sockets
 *      together through pipes (splice(2): the bytes are never copied
 *      through this process's memory, and the hello goes on as sent);
 *      otherwise it resets the connection.
 *
 * It owns no policy, holds nothing of the Domain but its two descriptors,
 * and parses untrusted bytes at line rate, so it runs apart from the
 * coordinator with the least it needs: no new privileges, no file system
 * (seccomp refuses every open; Landlock, where the kernel has it, handles
 * every file access and allows TCP connections to port 443 only), one
 * socket family (AF_INET), and a syscall allow-list. When it ends (killed,
 * crashed), its listener closes with it: new connections to learned
 * addresses on 443 reach nothing, open ones are cut. When its
 * channel to the resolver closes, it ends. Fail closed both ways.
 *
 * Usage (by the coordinator only):
 *   lazaret-gate --listen-fd N --channel-fd M [--max-conns K]
 */
#include "credgate.h"
#include "gateproto.h"
#include "tlshello.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#define GATE_HELLO_MS 10000   /* the whole ClientHello must arrive within this */
#define GATE_ASK_MS 5000      /* the resolver's answer */
#define GATE_CONNECT_MS 15000 /* the upstream connection */
#define GATE_CONNS_DEFAULT 1024
#define GATE_CONNS_MAX 16384
#define GATE_PIPE_BYTES (256 * 1024) /* asked of each pipe (F_SETPIPE_SZ); the default 64 KiB if refused */
#define GATE_PUMP_ROUNDS 32          /* moves per direction before other connections get a turn */
#define GATE_LOG_PER_S 20            /* log lines a second; the rest are counted */

enum cstate { C_FREE = 0, C_PEEK, C_ASK, C_CONNECT, C_SPLICE, C_TLS };

struct conn {
    enum cstate st;
    uint16_t gen;
    int cfd, ufd;
    int pcu[2], puc[2]; /* client -> upstream, upstream -> client */
    size_t ncu, nuc;    /* bytes in each pipe */
    size_t pipe_cap;
    bool eof_c, eof_u;   /* read side ended */
    bool shut_u, shut_c; /* write side shut (after its pipe drained) */
    bool again;          /* on the run list: pump again before sleeping */
    int64_t deadline;    /* PEEK, ASK, CONNECT, TLS handshakes; 0 while splicing or relaying */
    struct cg_conn *tls; /* C_TLS: a credential host's connection (credgate.h) */
    uint32_t addr;       /* original destination, host byte order */
    uint16_t port;
    char sni[LZ_HOSTNAME_MAX + 1];
};

static struct conn *conns;
static size_t n_conns_max, n_live;
static int ep = -1, lfd = -1, chan = -1;
static bool listening;
static uint8_t peekbuf[LZ_TLS_PEEK_MAX];
static size_t *runq; /* connections to pump again */
static size_t n_runq;

/* ---- logging (stderr: the coordinator's log), bounded ---- */

static int64_t log_sec;
static unsigned log_n, log_dropped;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

__attribute__((format(printf, 1, 2))) static void logf_(const char *fmt, ...) {
    int64_t s = now_ms() / 1000;
    if (s != log_sec) {
        if (log_dropped) {
            char b[96];
            int k = snprintf(b, sizeof b, "lazaret-gate: %u log lines suppressed\n", log_dropped);
            (void)!write(2, b, (size_t)k);
        }
        log_sec = s;
        log_n = 0;
        log_dropped = 0;
    }
    if (log_n++ >= GATE_LOG_PER_S) {
        log_dropped++;
        return;
    }
    char b[512];
    int k = snprintf(b, sizeof b, "lazaret-gate: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(b + k, sizeof b - (size_t)k - 1, fmt, ap);
    va_end(ap);
    k += m < 0 ? 0 : m >= (int)(sizeof b - (size_t)k - 1) ? (int)(sizeof b - (size_t)k - 2) : m;
    b[k++] = '\n';
    (void)!write(2, b, (size_t)k);
}

static const char *ip_text(uint32_t a, char b[16]) {
    snprintf(b, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
    return b;
}

/* ---- least privilege ---- */

/* Landlock (uapi linux/landlock.h; defined here for older headers). */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_NET_PORT 2
#define LL_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LL_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
};
struct ll_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
} __attribute__((packed));

/* Every file access the kernel's Landlock handles, with no rule: none is
 * allowed. From ABI 4, TCP: no bind, connect to LZ_GATE_PORT only. Returns
 * the ABI applied (0: no Landlock in this kernel). */
static int landlock_apply(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    if (abi < 1)
        return 0;
    struct ll_ruleset_attr ra = { .handled_access_fs = (1ULL << 13) - 1 };
    if (abi >= 2)
        ra.handled_access_fs |= 1ULL << 13; /* REFER */
    if (abi >= 3)
        ra.handled_access_fs |= 1ULL << 14; /* TRUNCATE */
    if (abi >= 5)
        ra.handled_access_fs |= 1ULL << 15; /* IOCTL_DEV */
    size_t size = sizeof ra.handled_access_fs;
    if (abi >= 4) {
        ra.handled_access_net = LL_ACCESS_NET_BIND_TCP | LL_ACCESS_NET_CONNECT_TCP;
        size = sizeof ra;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
    if (rs < 0)
        return -errno;
    if (abi >= 4) {
        struct ll_net_port_attr pa = { .allowed_access = LL_ACCESS_NET_CONNECT_TCP, .port = LZ_GATE_PORT };
        if (syscall(SYS_landlock_add_rule, rs, LL_RULE_NET_PORT, &pa, 0) < 0) {
            int e = -errno;
            close(rs);
            return e;
        }
    }
    int k = (int)syscall(SYS_landlock_restrict_self, rs, 0);
    int e = errno;
    close(rs);
    return k < 0 ? -e : (int)abi;
}

#if defined(__x86_64__)
#define GATE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GATE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef GATE_AUDIT_ARCH
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
static int seccomp_apply(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GATE_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        /* x32 calls have their own numbers past this bit */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
        /* socket(2): AF_INET only */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(SYS_read),
        ALLOW(SYS_write),
        ALLOW(SYS_close),
        ALLOW(SYS_recvfrom),
        ALLOW(SYS_recvmsg),
        ALLOW(SYS_sendto),
        ALLOW(SYS_sendmsg),
        ALLOW(SYS_accept4),
        ALLOW(SYS_connect),
        ALLOW(SYS_getsockname),
        ALLOW(SYS_getpeername),
        ALLOW(SYS_getsockopt),
        ALLOW(SYS_setsockopt),
        ALLOW(SYS_shutdown),
        ALLOW(SYS_splice),
        ALLOW(SYS_pipe2),
        ALLOW(SYS_fcntl),
        ALLOW(SYS_epoll_ctl),
        ALLOW(SYS_epoll_pwait),
#ifdef SYS_epoll_wait
        ALLOW(SYS_epoll_wait),
#endif
#ifdef SYS_epoll_pwait2
        ALLOW(SYS_epoll_pwait2),
#endif
        ALLOW(SYS_clock_gettime),
        ALLOW(SYS_getrandom), /* OpenSSL's generator reseeds (credential hosts) */
        ALLOW(SYS_mprotect),
        ALLOW(SYS_brk),
        ALLOW(SYS_mmap),
        ALLOW(SYS_munmap),
        ALLOW(SYS_mremap),
        ALLOW(SYS_madvise),
        ALLOW(SYS_futex),
        ALLOW(SYS_getpid),
        ALLOW(SYS_gettid),
        ALLOW(SYS_tgkill),
        ALLOW(SYS_rt_sigprocmask),
        ALLOW(SYS_rt_sigreturn),
        ALLOW(SYS_restart_syscall),
        ALLOW(SYS_exit),
        ALLOW(SYS_exit_group),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = { .len = (unsigned short)(sizeof f / sizeof f[0]), .filter = f };
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0 ? -errno : 0;
}
#else
static int seccomp_apply(void) { return -ENOSYS; }
#endif

/* ---- connections ---- */

static void ep_add(int fd, uint64_t tag, uint32_t ev) {
    struct epoll_event e = { .events = ev, .data.u64 = tag };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
        logf_("epoll_ctl: %s", strerror(errno));
}

#define TAG_LISTEN UINT64_MAX
#define TAG_CHAN (UINT64_MAX - 1)
static uint64_t tag_of(size_t i, bool up) { return ((uint64_t)i << 1) | (up ? 1u : 0u); }

static void xclose(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void set_listening(bool on) {
    if (on == listening)
        return;
    struct epoll_event e = { .events = on ? EPOLLIN : 0, .data.u64 = TAG_LISTEN };
    epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &e);
    listening = on;
}

/* Ends a connection; rst: the client sees a reset (a refusal), not an
 * orderly end. */
static void conn_end(struct conn *c, bool rst) {
    if (rst && c->cfd >= 0) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };
        setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    cg_conn_free(c->tls);
    c->tls = NULL;
    xclose(&c->cfd);
    xclose(&c->ufd);
    xclose(&c->pcu[0]);
    xclose(&c->pcu[1]);
    xclose(&c->puc[0]);
    xclose(&c->puc[1]);
    uint16_t gen = (uint16_t)(c->gen + 1);
    bool again = c->again;
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->again = again; /* still on the run list; skipped there as C_FREE */
    c->cfd = c->ufd = c->pcu[0] = c->pcu[1] = c->puc[0] = c->puc[1] = -1;
    n_live--;
    set_listening(true);
}

static void refuse(struct conn *c, const char *why) {
    char ip[16];
    logf_("refused %s:%u%s%s: %s", ip_text(c->addr, ip), (unsigned)c->port, c->sni[0] ? " server name " : "", c->sni,
          why);
    conn_end(c, true);
}

/* Moves what it can between a socket and a pipe (splice). 1 progress, 0
 * would block, -1 end of input (from a socket), <-1 error. */
static ssize_t move(int from, int to, size_t len) {
    ssize_t n = splice(from, NULL, to, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0)
        return n;
    if (n == 0)
        return -1;
    return errno == EAGAIN ? 0 : -2;
}

/* One direction: src socket -> pipe -> dst socket. Returns true if it
 * moved bytes; *err on a broken connection. */
static bool pump_dir(struct conn *c, int src, int dst, int p[2], size_t *inpipe, bool *eof, bool *shut, bool *err) {
    bool progress = false;
    if (!*eof && *inpipe < c->pipe_cap) {
        ssize_t n = move(src, p[1], c->pipe_cap - *inpipe);
        if (n > 0) {
            *inpipe += (size_t)n;
            progress = true;
        } else if (n == -1) {
            *eof = true;
            progress = true;
        } else if (n < -1) {
            *err = true;
            return false;
        }
    }
    if (*inpipe > 0) {
        ssize_t n = move(p[0], dst, *inpipe);
        if (n > 0) {
            *inpipe -= (size_t)n;
            progress = true;
        } else if (n < -1) {
            *err = true;
            return false;
        }
    }
    if (*eof && *inpipe == 0 && !*shut) {
        shutdown(dst, SHUT_WR);
        *shut = true;
        progress = true;
    }
    return progress;
}

static void pump(size_t i) {
    struct conn *c = &conns[i];
    for (int round = 0; round < GATE_PUMP_ROUNDS; round++) {
        bool err = false;
        bool a = pump_dir(c, c->cfd, c->ufd, c->pcu, &c->ncu, &c->eof_c, &c->shut_u, &err);
        bool b = !err && pump_dir(c, c->ufd, c->cfd, c->puc, &c->nuc, &c->eof_u, &c->shut_c, &err);
        if (err || (c->shut_u && c->shut_c)) {
            conn_end(c, err);
            return;
        }
        if (!a && !b)
            return;
    }
    /* Still moving: another turn after the others. */
    if (!c->again) {
        c->again = true;
        runq[n_runq++] = i;
    }
}

static int make_pipe(int p[2], size_t *cap) {
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
        return -errno;
    int k = fcntl(p[0], F_SETPIPE_SZ, GATE_PIPE_BYTES);
    if (k <= 0)
        k = fcntl(p[0], F_GETPIPE_SZ);
    if (k > 0 && (size_t)k < *cap)
        *cap = (size_t)k;
    return 0;
}

static void splice_start(size_t i) {
    struct conn *c = &conns[i];
    c->pipe_cap = GATE_PIPE_BYTES;
    int r = make_pipe(c->pcu, &c->pipe_cap);
    if (r == 0)
        r = make_pipe(c->puc, &c->pipe_cap);
    if (r < 0) {
        refuse(c, "no pipe for the connection (the gate's limits)");
        return;
    }
    c->st = C_SPLICE;
    c->deadline = 0;
    pump(i);
}

/* A credential host's connection: the gate's own TLS both ways
 * (credgate.h). */
static void tls_step(size_t i) {
    struct conn *c = &conns[i];
    switch (cg_conn_step(c->tls)) {
    case CG_WAIT:
        if (!cg_conn_handshaking(c->tls))
            c->deadline = 0;
        return;
    case CG_AGAIN:
        if (!cg_conn_handshaking(c->tls))
            c->deadline = 0;
        if (!c->again) {
            c->again = true;
            runq[n_runq++] = i;
        }
        return;
    case CG_END: conn_end(c, false); return;
    case CG_RESET: refuse(c, cg_conn_why(c->tls)); return;
    }
}

static void tls_start(size_t i, int host) {
    struct conn *c = &conns[i];
    c->tls = cg_conn_new(host, c->cfd, c->ufd, c->addr, c->port);
    if (!c->tls) {
        refuse(c, "no TLS state for the connection (out of memory)");
        return;
    }
    c->st = C_TLS;
    c->deadline = now_ms() + GATE_CONNECT_MS;
    tls_step(i);
}

/* Connected to the server: a credential host's connection goes through
 * the gate's TLS, any other is spliced. */
static void connected(size_t i) {
    struct conn *c = &conns[i];
    int host = cg_host(c->sni);
    if (host >= 0)
        tls_start(i, host);
    else
        splice_start(i);
}

static void upstream_ready(size_t i, uint32_t events) {
    struct conn *c = &conns[i];
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        return;
    int e = 0;
    socklen_t el = sizeof e;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
        e = errno;
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    /* An event of a connection that had this slot before: still connecting. */
    if (!e && getpeername(c->ufd, (struct sockaddr *)&peer, &pl) < 0 && errno == ENOTCONN)
        return;
    if (e == EINPROGRESS || e == EALREADY)
        return;
    if (e) {
        char why[96];
        snprintf(why, sizeof why, "the server could not be reached: %s", strerror(e));
        refuse(c, why);
        return;
    }
    connected(i);
}

static void connect_up(size_t i) {
    struct conn *c = &conns[i];
    c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0) {
        refuse(c, "no socket for the upstream connection");
        return;
    }
    int one = 1;
    setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(c->port), .sin_addr.s_addr = htonl(c->addr) };
    c->st = C_CONNECT;
    c->deadline = now_ms() + GATE_CONNECT_MS;
    ep_add(c->ufd, tag_of(i, true), EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
    if (connect(c->ufd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        connected(i);
        return;
    }
    if (errno != EINPROGRESS) {
        char why[96];
        snprintf(why, sizeof why, "the server could not be reached: %s", strerror(errno));
        refuse(c, why);
    }
}

static void peek(size_t i, uint32_t events) {
    struct conn *c = &conns[i];
    ssize_t n = recv(c->cfd, peekbuf, sizeof peekbuf, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
        conn_end(c, false); /* gone before it said anything */
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            conn_end(c, true);
        return;
    }
    struct lz_tls_hello h;
    size_t need = 0;
    enum lz_tls_reason why = LZ_TLS_OK;
    int r = lz_tls_hello_parse(peekbuf, (size_t)n, &h, &need, &why);
    if (r == -EAGAIN) {
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            refuse(c, "the client stopped sending before its ClientHello was whole");
        return;
    }
    if (r < 0) {
        char m[128];
        snprintf(m, sizeof m, "not a TLS ClientHello the gate accepts: %s", lz_tls_reason_str(why));
        refuse(c, m);
        return;
    }
    struct lz_gate_req q = { .id = (uint32_t)i | ((uint32_t)c->gen << 16), .addr = c->addr, .port = c->port };
    if (h.has_sni) {
        q.flags |= LZ_GATE_SNI;
        snprintf(q.sni, sizeof q.sni, "%s", h.sni);
        snprintf(c->sni, sizeof c->sni, "%s", h.sni);
    }
    if (h.ech)
        q.flags |= LZ_GATE_ECH;
    if (send(chan, &q, sizeof q, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof q) {
        refuse(c, "the resolver did not take the question");
        return;
    }
    c->st = C_ASK;
    c->deadline = now_ms() + GATE_ASK_MS;
}

static void accept_ready(void) {
    while (n_live < n_conns_max) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                logf_("accept: %s", strerror(errno));
            return;
        }
        struct sockaddr_in dst;
        socklen_t dl = sizeof dst;
        if (getsockname(fd, (struct sockaddr *)&dst, &dl) < 0 || dst.sin_family != AF_INET) {
            close(fd);
            continue;
        }
        size_t i = 0;
        while (conns[i].st != C_FREE)
            i++;
        struct conn *c = &conns[i];
        n_live++;
        c->st = C_PEEK;
        c->cfd = fd;
        c->addr = ntohl(dst.sin_addr.s_addr);
        c->port = ntohs(dst.sin_port);
        c->deadline = now_ms() + GATE_HELLO_MS;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* An edge for what is already there comes with the add. */
        ep_add(fd, tag_of(i, false), EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
    }
    set_listening(false);
}

/* The resolver's answers. Its end: the gate ends (fail closed). */
static bool chan_ready(void) {
    for (;;) {
        struct lz_gate_rep a;
        ssize_t k = recv(chan, &a, sizeof a, MSG_DONTWAIT | MSG_TRUNC);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (k != (ssize_t)sizeof a) {
            logf_("the channel to the resolver %s: ending", k == 0 ? "closed" : "failed");
            return false;
        }
        size_t i = a.id & 0xffffu;
        if (i >= n_conns_max)
            continue;
        struct conn *c = &conns[i];
        if (c->st != C_ASK || c->gen != (uint16_t)(a.id >> 16))
            continue; /* late: that connection is gone */
        a.why[sizeof a.why - 1] = '\0';
        if (a.verdict == LZ_GATE_ALLOW)
            connect_up(i);
        else
            refuse(c, a.why[0] ? a.why : "refused by the policy");
    }
}

static void expire(int64_t now) {
    for (size_t i = 0; i < n_conns_max; i++) {
        struct conn *c = &conns[i];
        if (c->st == C_FREE || c->st == C_SPLICE || !c->deadline || c->deadline > now)
            continue;
        refuse(c,
               c->st == C_PEEK      ? "no whole ClientHello in time"
                   : c->st == C_ASK ? "the resolver did not answer in time"
                   : c->st == C_TLS ? "the TLS handshakes did not end in time"
                                    : "the server did not answer in time");
    }
}

static int fd_arg(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v < 3 || v > 1 << 20 ? -1 : (int)v;
}

/* A report to the resolver (gateproto.h, LZ_GATE_REPORT): no reply. */
static void report(uint32_t addr, uint16_t port, const char *host, bool push, const char *why) {
    struct lz_gate_req q = { .addr = addr, .port = port, .flags = LZ_GATE_REPORT | (push ? LZ_GATE_REPORT_PUSH : 0) };
    snprintf(q.sni, sizeof q.sni, "%s", host);
    snprintf(q.why, sizeof q.why, "%s", why);
    if (send(chan, &q, sizeof q, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof q)
        logf_("a report to the resolver was lost: %s: %s", host, why);
    logf_("%s %s: %s", push ? "push to" : "refused a request to", host, why);
}

int main(int argc, char **argv) {
    long maxc = GATE_CONNS_DEFAULT;
    int cfg = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--listen-fd") && i + 1 < argc)
            lfd = fd_arg(argv[++i]);
        else if (!strcmp(argv[i], "--channel-fd") && i + 1 < argc)
            chan = fd_arg(argv[++i]);
        else if (!strcmp(argv[i], "--config-fd") && i + 1 < argc)
            cfg = fd_arg(argv[++i]);
        else if (!strcmp(argv[i], "--max-conns") && i + 1 < argc)
            maxc = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "lazaret-gate: unknown argument %s\n(started by the Host Coordinator only: "
                    "lazaret-gate --listen-fd N --channel-fd M [--config-fd C] [--max-conns K])\n",
                    argv[i]);
            return 2;
        }
    }
    int type = 0;
    socklen_t tl = sizeof type;
    if (lfd < 0 || chan < 0 || getsockopt(lfd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM ||
        getsockopt(chan, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET || maxc < 1 ||
        maxc > GATE_CONNS_MAX) {
        fprintf(stderr,
                "lazaret-gate: needs --listen-fd (a listening TCP socket) and --channel-fd (a "
                "SOCK_SEQPACKET socket), --max-conns 1..%d; it is started by the Host Coordinator only\n",
                GATE_CONNS_MAX);
        return 2;
    }
    n_conns_max = (size_t)maxc;
    signal(SIGPIPE, SIG_IGN);
    /* Six descriptors a connection, and a few of our own. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = (rlim_t)n_conns_max * 6 + 16;
        rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < (rlim_t)n_conns_max * 6 + 16)
            n_conns_max = rl.rlim_cur > 64 ? (size_t)(rl.rlim_cur - 16) / 6 : 8;
    }
    conns = calloc(n_conns_max, sizeof *conns);
    runq = calloc(n_conns_max, sizeof *runq);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!conns || !runq || ep < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0 || fcntl(chan, F_SETFL, O_NONBLOCK) < 0) {
        fprintf(stderr, "lazaret-gate: cannot start: %s\n", strerror(errno ? errno : ENOMEM));
        return 1;
    }
    for (size_t i = 0; i < n_conns_max; i++)
        conns[i].cfd = conns[i].ufd = conns[i].pcu[0] = conns[i].pcu[1] = conns[i].puc[0] = conns[i].puc[1] = -1;

    /* Credential hosts: their configuration, read (and OpenSSL made
     * ready: leaves, trust store, random generator) while files may still
     * be opened. */
    if (cfg >= 0) {
        char m[512];
        if (cg_config_read(cfg, m, sizeof m) < 0) {
            fprintf(stderr, "lazaret-gate: credentials: %s\n", m);
            return 1;
        }
        close(cfg);
        cg_set_report(report);
    }

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "lazaret-gate: no_new_privs: %s\n", strerror(errno));
        return 1;
    }
    int ll = landlock_apply();
    int sc = seccomp_apply();
    if (sc < 0) {
        fprintf(stderr, "lazaret-gate: cannot install its seccomp filter: %s\n", strerror(-sc));
        return 1;
    }
    logf_("ready: %zu connections at most, %zu credential host%s; landlock %s; seccomp on", n_conns_max, cg_hosts(),
          cg_hosts() == 1 ? "" : "s",
          ll > 0        ? (ll >= 4 ? "(files, TCP port 443 only)" : "(files)")
              : ll == 0 ? "not in this kernel"
                        : "failed");

    ep_add(chan, TAG_CHAN, EPOLLIN);
    ep_add(lfd, TAG_LISTEN, EPOLLIN);
    listening = true;
    int64_t next_expire = now_ms() + 250;
    struct epoll_event evs[128];
    for (;;) {
        int n = epoll_wait(ep, evs, (int)(sizeof evs / sizeof evs[0]), n_runq ? 0 : 250);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            logf_("epoll_wait: %s", strerror(errno));
            return 1;
        }
        for (int k = 0; k < n; k++) {
            uint64_t t = evs[k].data.u64;
            if (t == TAG_LISTEN) {
                accept_ready();
                continue;
            }
            if (t == TAG_CHAN) {
                if (!chan_ready())
                    return 0;
                continue;
            }
            size_t i = (size_t)(t >> 1);
            bool up = t & 1;
            struct conn *c = &conns[i];
            switch (c->st) {
            case C_PEEK:
                if (!up)
                    peek(i, evs[k].events);
                break;
            case C_CONNECT:
                if (up)
                    upstream_ready(i, evs[k].events);
                break;
            case C_SPLICE: pump(i); break;
            case C_TLS: tls_step(i); break;
            case C_ASK: /* the client waits for the resolver */
            case C_FREE: /* a stale event */ break;
            }
        }
        /* The connections that had more to move. */
        size_t m = n_runq;
        n_runq = 0;
        for (size_t k = 0; k < m; k++) {
            size_t i = runq[k];
            conns[i].again = false;
            if (conns[i].st == C_SPLICE)
                pump(i);
            else if (conns[i].st == C_TLS)
                tls_step(i);
        }
        int64_t now = now_ms();
        if (now >= next_expire) {
            expire(now);
            next_expire = now + 250;
        }
    }
}
