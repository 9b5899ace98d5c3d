/* resolver.c — the Domain's DNS resolver (resolver.h): one thread, one
 * poll loop, no blocking call.
 *
 * The loop polls an eventfd (stop), the UDP server socket, the TCP
 * listener, the TCP clients (each with an idle deadline and bounded input
 * and output buffers), the upstream sockets of the queries in flight (a
 * fresh connected UDP socket per query, then a non-blocking TCP connection
 * when the answer is truncated), and wakes for the nearest deadline of a
 * query, a client or a learned address (monotonic time).
 *
 * Learned table. A name holds the addresses of its last answer (at most
 * max_per_name), the ports its decision allowed and a deadline (now + the
 * lifetime). An address holds the number of names listing it, the ports
 * whose routes are installed (the union over every answer that named it,
 * port 0 meaning every port) and a deadline, the latest of its answers'.
 * A refresh replaces the name's address set; an address it no longer
 * lists keeps its own deadline and routes, because a client may still use
 * the earlier answer until that answer's TTL (= that deadline) runs out.
 * Since an address's deadline is the latest of every answer that named
 * it, no name needs any of its ports past it: at its deadline every
 * installed route goes at once, or all stay while a connection is open
 * (zombie). A name whose deadline passed leaves the table when none of its
 * addresses is left.
 *
 * Locking: one mutex guards everything the coordinator's thread reads or
 * changes (events, run-time allow rules, the learned table, the refused
 * list, the counters). The resolver's thread holds it while it decides and
 * while it learns, including the route calls: those wait only for a
 * netlink acknowledgement.
 */
#include "resolver.h"

#include "dnsfilter.h"
#include "dnsmsg.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#define RES_EVENTS 256
#define RES_REFUSED_MAX 64
#define RES_ALLOW_EXTRA_MAX 256
#define RES_TCP_IDLE_MS 10000
#define RES_TCP_IN_MAX (2 + LZ_DNS_MSG_MAX)
#define RES_TCP_OUT_MAX (64 * 1024)
#define RES_UDP_MAX 65536
#define RES_QUERY_MAX 512 /* the queries Lazaret builds: a 255-byte name, header, question, OPT */
#define RES_PORTS_MAX (LZ_HOSTPORTS_MAX + 1)
#define RES_REPORT_MAX (64 * 1024)

enum limit_kind { LIM_RATE, LIM_INFLIGHT, LIM_NAMES, LIM_ADDRS, LIM_PER_NAME, LIM_TCP, LIM_PORTS, LIM_N };
static const char *const limit_why[LIM_N] = {
    [LIM_RATE] = "query rate",
    [LIM_INFLIGHT] = "upstream queries in flight",
    [LIM_NAMES] = "learned names",
    [LIM_ADDRS] = "learned addresses",
    [LIM_PER_NAME] = "addresses per name (the rest of the answer dropped)",
    [LIM_TCP] = "TCP clients",
    [LIM_PORTS] = "ports per address",
};

/* Route ports of an address: 0 is every port. */
struct rports {
    uint16_t n;
    uint16_t p[RES_PORTS_MAX];
};

struct lname {
    bool used;
    char name[LZ_HOSTNAME_MAX + 1];
    struct lz_hostports ports;
    uint8_t n;
    uint32_t addrs[LZ_DNS_RR_MAX];
    int64_t deadline;
};

struct laddr {
    bool used;
    bool zombie;
    uint32_t addr;
    uint32_t refs;
    struct rports inst;
    int64_t deadline;
    int64_t first_deadline; /* the deadline at which it became a zombie */
};

struct refused {
    char name[LZ_HOSTNAME_MAX + 1];
    bool denied;
    uint64_t count;
    int64_t last;
};

/* Where a query came from. */
struct origin {
    bool tcp;
    int ci;       /* TCP: client slot */
    unsigned gen; /* TCP: the slot's generation (a closed client's answer is dropped) */
    struct sockaddr_storage peer;
    socklen_t plen;
};

enum up_state { UP_FREE = 0, UP_UDP, UP_TCP_CONNECT, UP_TCP_IO };

struct pending {
    enum up_state st;
    int fd;
    int64_t deadline;
    struct origin from;
    struct lz_dns_query q;    /* the client's */
    struct lz_dns_query sent; /* Lazaret's, as parsed back */
    struct lz_hostports ports;
    uint8_t sbuf[2 + RES_QUERY_MAX];
    size_t slen, soff; /* framed (TCP); UDP sends sbuf + 2 */
    uint8_t *rbuf;     /* TCP: RES_TCP_IN_MAX */
    size_t rlen;
};

struct tcpc {
    int fd;
    unsigned gen;
    bool eof;
    unsigned npend;
    int64_t idle;
    uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len;
};

struct lz_resolver {
    struct lz_resolver_config cfg; /* bounds resolved; the pointers below are own copies */
    char preset[32];
    struct lz_hostrule *allow; /* configured, then run-time ones */
    size_t n_allow, cap_allow;
    struct lz_hostrule *deny;
    struct lz_netrule *deny_net;
    uint32_t *host;
    int udp_fd, tcp_fd, stop_fd, ev_fd;
    int gate_fd; /* the TLS gate's channel, -EBADF without one or once it is gone */
    pthread_t thread;
    bool started;

    pthread_mutex_t mu;
    struct lz_resolver_event *ring;
    size_t ring_head, ring_n;
    uint64_t ring_lost;
    int64_t limit_last[LIM_N];
    uint64_t limited;
    struct lname *names;
    size_t n_names;
    struct laddr *addrs;
    size_t n_addrs;
    struct refused refused[RES_REFUSED_MAX];
    size_t n_refused;

    /* The thread's own. */
    struct pending *pend;
    size_t n_pend;
    struct tcpc *cli;
    unsigned cli_gen;
    double tokens;
    int64_t tokens_at;
    struct lz_dns_answer ans;
    uint8_t rx[RES_UDP_MAX];
    uint8_t tx[2 + LZ_DNS_BUILD_MAX];
};

static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void ipstr(uint32_t a, char out[static 16]) {
    snprintf(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* ---- events (under mu) ---- */

static struct lz_resolver_event *ev_push(struct lz_resolver *r, enum lz_resolver_event_kind kind, const char *name) {
    if (r->ring_n == RES_EVENTS) {
        r->ring_head = (r->ring_head + 1) % RES_EVENTS;
        r->ring_n--;
        r->ring_lost++;
    }
    struct lz_resolver_event *e = &r->ring[(r->ring_head + r->ring_n) % RES_EVENTS];
    r->ring_n++;
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->wall_ms = wall_ms();
    if (name)
        snprintf(e->name, sizeof e->name, "%s", name);
    uint64_t one = 1;
    /* Cannot fail short of a counter at 2^64 - 2; the event is in the ring either way. */
    (void)!write(r->ev_fd, &one, sizeof one);
    return e;
}

/* A bound was hit: counted always, an event at most once a second per bound. */
static void limited(struct lz_resolver *r, enum limit_kind k, const char *name) {
    r->limited++;
    int64_t now = lz_now_ms();
    if (r->limit_last[k] != 0 && now - r->limit_last[k] < 1000)
        return;
    r->limit_last[k] = now;
    struct lz_resolver_event *e = ev_push(r, LZ_RES_LIMITED, name);
    snprintf(e->why, sizeof e->why, "%s", limit_why[k]);
}

static void note_refused(struct lz_resolver *r, const char *name, bool denied) {
    size_t i;
    for (i = 0; i < r->n_refused; i++)
        if (strcmp(r->refused[i].name, name) == 0)
            break;
    struct refused x;
    if (i < r->n_refused) {
        x = r->refused[i];
        memmove(&r->refused[1], &r->refused[0], i * sizeof x);
    } else {
        memset(&x, 0, sizeof x);
        snprintf(x.name, sizeof x.name, "%s", name);
        if (r->n_refused < RES_REFUSED_MAX)
            r->n_refused++;
        memmove(&r->refused[1], &r->refused[0], (r->n_refused - 1) * sizeof x);
    }
    x.denied = denied;
    x.count++;
    x.last = lz_now_ms();
    r->refused[0] = x;
}

/* ---- the learned table (under mu) ---- */

static int64_t lifetime_ms(const struct lz_resolver *r, uint32_t seconds) {
    return r->cfg.test_lifetime_ms ? (int64_t)r->cfg.test_lifetime_ms : (int64_t)seconds * 1000;
}

static int64_t zombie_step_ms(const struct lz_resolver *r) {
    return r->cfg.test_lifetime_ms ? (int64_t)r->cfg.test_lifetime_ms : LZ_RESOLVER_ZOMBIE_STEP_S * 1000;
}

static struct laddr *addr_find(struct lz_resolver *r, uint32_t a) {
    for (size_t i = 0; i < r->cfg.max_addrs; i++)
        if (r->addrs[i].used && r->addrs[i].addr == a)
            return &r->addrs[i];
    return NULL;
}

static struct lname *name_find(struct lz_resolver *r, const char *name) {
    for (size_t i = 0; i < r->cfg.max_names; i++)
        if (r->names[i].used && strcmp(r->names[i].name, name) == 0)
            return &r->names[i];
    return NULL;
}

/* Is port reachable on an address with these routes (0: every port)? */
static bool rports_has_port(const struct rports *p, uint16_t port) {
    for (size_t i = 0; i < p->n; i++)
        if (p->p[i] == port || p->p[i] == 0)
            return true;
    return false;
}

static bool rports_has(const struct rports *p, uint16_t port) {
    for (size_t i = 0; i < p->n; i++)
        if (p->p[i] == port)
            return true;
    return false;
}

/* The route ports a decision needs. */
static void rports_of(const struct lz_hostports *hp, struct rports *ret) {
    memset(ret, 0, sizeof *ret);
    if (hp->all) {
        ret->p[ret->n++] = 0;
        return;
    }
    for (size_t i = 0; i < hp->n && ret->n < RES_PORTS_MAX; i++)
        ret->p[ret->n++] = hp->ports[i];
}

/* Deletes every installed route of a and removes it from the table and
 * from the names that list it. A route the kernel would not delete stays
 * installed, so the address stays with the ports that failed and is tried
 * again a zombie step later (a route is never forgotten while it may
 * still exist): false then. */
static bool addr_drop(struct lz_resolver *r, struct laddr *a, const char *why) {
    struct rports failed = { 0 };
    char msg[LZ_ERROR_MAX] = "";
    for (size_t i = 0; i < a->inst.n; i++) {
        struct lz_error err = { 0 };
        if (r->cfg.routes.del(r->cfg.routes.ud, a->addr, a->inst.p[i], &err) < 0) {
            failed.p[failed.n++] = a->inst.p[i];
            snprintf(msg, sizeof msg, "%s", err.msg);
        }
    }
    if (failed.n > 0) {
        struct lz_resolver_event *f = ev_push(r, LZ_RES_FAILED, NULL);
        f->n_addrs = 1;
        f->addrs[0] = a->addr;
        snprintf(f->why, sizeof f->why, "route delete (%u port%s): %s", failed.n, failed.n == 1 ? "" : "s", msg);
        a->inst = failed;
        a->zombie = false;
        a->first_deadline = 0;
        a->deadline = lz_now_ms() + zombie_step_ms(r);
        return false;
    }
    struct lz_resolver_event *e = ev_push(r, LZ_RES_EXPIRED, NULL);
    e->n_addrs = 1;
    e->addrs[0] = a->addr;
    snprintf(e->why, sizeof e->why, "%s", why);
    for (size_t i = 0; i < r->cfg.max_names; i++) {
        struct lname *n = &r->names[i];
        if (!n->used)
            continue;
        for (size_t j = 0; j < n->n; j++)
            if (n->addrs[j] == a->addr) {
                memmove(&n->addrs[j], &n->addrs[j + 1], (size_t)(n->n - j - 1) * sizeof n->addrs[0]);
                n->n--;
                break;
            }
    }
    memset(a, 0, sizeof *a);
    r->n_addrs--;
    return true;
}

static void name_drop(struct lz_resolver *r, struct lname *n) {
    for (size_t j = 0; j < n->n; j++) {
        struct laddr *a = addr_find(r, n->addrs[j]);
        if (a && a->refs > 0)
            a->refs--;
    }
    memset(n, 0, sizeof *n);
    r->n_names--;
}

/* An address at its deadline: kept while a connection is open (or when
 * that cannot be told), up to LZ_RESOLVER_ZOMBIE_MAX_S past its first
 * deadline; else its routes go. */
static void addr_due(struct lz_resolver *r, struct laddr *a, int64_t now) {
    int use = r->cfg.routes.in_use(r->cfg.routes.ud, a->addr);
    if (use != 0) {
        if (!a->zombie)
            a->first_deadline = a->deadline;
        if (now + zombie_step_ms(r) - a->first_deadline <= (int64_t)LZ_RESOLVER_ZOMBIE_MAX_S * 1000) {
            a->zombie = true;
            a->deadline = now + zombie_step_ms(r);
            return;
        }
        (void)addr_drop(r, a, "open connection past the zombie bound");
        return;
    }
    (void)addr_drop(r, a, "expired");
}

/* A name past its deadline lets go of its addresses that are not zombies
 * (another name's later answer may keep them) and leaves the table with
 * the last one. */
static void name_due(struct lz_resolver *r, struct lname *n) {
    size_t keep = 0;
    for (size_t j = 0; j < n->n; j++) {
        struct laddr *a = addr_find(r, n->addrs[j]);
        if (a && a->zombie) {
            n->addrs[keep++] = n->addrs[j];
        } else if (a && a->refs > 0) {
            a->refs--;
        }
    }
    n->n = (uint8_t)keep;
    if (keep == 0) {
        memset(n, 0, sizeof *n);
        r->n_names--;
    }
}

static void expire(struct lz_resolver *r, int64_t now) {
    for (size_t i = 0; i < r->cfg.max_addrs; i++)
        if (r->addrs[i].used && r->addrs[i].deadline <= now)
            addr_due(r, &r->addrs[i], now);
    for (size_t i = 0; i < r->cfg.max_names; i++)
        if (r->names[i].used && r->names[i].deadline <= now)
            name_due(r, &r->names[i]);
}

static int64_t next_deadline(struct lz_resolver *r, int64_t now, int64_t best) {
    for (size_t i = 0; i < r->cfg.max_addrs; i++)
        if (r->addrs[i].used && (best < 0 || r->addrs[i].deadline < best))
            best = r->addrs[i].deadline;
    for (size_t i = 0; i < r->cfg.max_names; i++)
        if (r->names[i].used && r->names[i].deadline > now && (best < 0 || r->names[i].deadline < best))
            best = r->names[i].deadline;
    return best;
}

/* Room for need new addresses: zombies whose connection has closed are
 * evicted first (an address is in the table past its deadline only as a
 * zombie). */
static bool addr_room(struct lz_resolver *r, size_t need) {
    if (r->cfg.max_addrs - r->n_addrs >= need)
        return true;
    for (size_t i = 0; i < r->cfg.max_addrs && r->cfg.max_addrs - r->n_addrs < need; i++)
        if (r->addrs[i].used && r->addrs[i].zombie && r->cfg.routes.in_use(r->cfg.routes.ud, r->addrs[i].addr) == 0)
            (void)addr_drop(r, &r->addrs[i], "evicted (table full)");
    return r->cfg.max_addrs - r->n_addrs >= need;
}

/* Learns the kept addresses of an answer for name on ports: every route in
 * place before it returns 0. -ENOSPC (a bound; the LIMITED event is
 * pushed) or the route's error (FAILED pushed). *ret_changed: a new name
 * or a new address set (for the LEARNED event). */
static int learn(struct lz_resolver *r, const char *name, const struct lz_hostports *ports, const uint32_t *addrs,
                 size_t n, uint32_t lifetime, bool *ret_changed) {
    int64_t now = lz_now_ms();
    int64_t deadline = now + lifetime_ms(r, lifetime);
    struct rports want;
    rports_of(ports, &want);
    /* Every port includes the gate's, whose routes are of their own kind
     * (fqdnroute.h): an address learned for every port gets both. */
    if (r->cfg.gate && want.n == 1 && want.p[0] == 0)
        want.p[want.n++] = LZ_GATE_PORT;
    /* What is due goes first, so the counts below are the table's now. */
    expire(r, now);

    struct lname *nm = name_find(r, name);
    if (!nm) {
        for (size_t i = 0; i < r->cfg.max_names && !nm; i++)
            if (!r->names[i].used)
                nm = &r->names[i];
        if (!nm) {
            /* Names past their deadline hold only zombie addresses: they
             * give way to a live one. */
            for (size_t i = 0; i < r->cfg.max_names && !nm; i++)
                if (r->names[i].deadline <= now) {
                    name_drop(r, &r->names[i]);
                    nm = &r->names[i];
                }
        }
        if (!nm) {
            limited(r, LIM_NAMES, name);
            return -ENOSPC;
        }
    }

    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        if (!addr_find(r, addrs[i]))
            fresh++;
    if (!addr_room(r, fresh)) {
        limited(r, LIM_ADDRS, name);
        return -ENOSPC;
    }
    for (size_t i = 0; i < n; i++) {
        struct laddr *a = addr_find(r, addrs[i]);
        size_t extra = 0;
        for (size_t k = 0; k < want.n; k++)
            if (!a || !rports_has(&a->inst, want.p[k]))
                extra++;
        if ((a ? a->inst.n : 0) + extra > RES_PORTS_MAX) {
            limited(r, LIM_PORTS, name);
            return -ENOSPC;
        }
    }

    for (size_t i = 0; i < n; i++) {
        struct laddr *a = addr_find(r, addrs[i]);
        if (!a) {
            for (size_t k = 0; k < r->cfg.max_addrs && !a; k++)
                if (!r->addrs[k].used)
                    a = &r->addrs[k];
            if (!a) /* addr_room made room: cannot happen */
                return -ENOSPC;
            memset(a, 0, sizeof *a);
            a->used = true;
            a->addr = addrs[i];
            a->deadline = deadline;
            r->n_addrs++;
        }
        /* The deadline first: a route added and then failed beside it still
         * expires. */
        if (a->deadline < deadline || a->zombie) {
            a->deadline = deadline > a->deadline ? deadline : a->deadline;
            a->zombie = false;
            a->first_deadline = 0;
        }
        for (size_t k = 0; k < want.n; k++) {
            if (rports_has(&a->inst, want.p[k]))
                continue;
            struct lz_error err = { 0 };
            int k2 = r->cfg.routes.add(r->cfg.routes.ud, a->addr, want.p[k], &err);
            if (k2 < 0) {
                struct lz_resolver_event *e = ev_push(r, LZ_RES_FAILED, name);
                e->n_addrs = 1;
                e->addrs[0] = a->addr;
                snprintf(e->why, sizeof e->why, "route add (port %u): %s", want.p[k], err.msg);
                return k2;
            }
            a->inst.p[a->inst.n++] = want.p[k];
        }
    }

    /* As sets: a resolver that rotates its records is not news. */
    bool changed = !nm->used || nm->n != n || memcmp(&nm->ports, ports, sizeof *ports) != 0;
    for (size_t i = 0; i < n && !changed; i++) {
        bool seen = false;
        for (size_t j = 0; j < nm->n && !seen; j++)
            seen = nm->addrs[j] == addrs[i];
        changed = !seen;
    }
    if (nm->used)
        for (size_t j = 0; j < nm->n; j++) {
            struct laddr *a = addr_find(r, nm->addrs[j]);
            if (a && a->refs > 0)
                a->refs--;
        }
    else
        r->n_names++;
    nm->used = true;
    snprintf(nm->name, sizeof nm->name, "%s", name);
    nm->ports = *ports;
    nm->n = (uint8_t)n;
    memcpy(nm->addrs, addrs, n * sizeof addrs[0]);
    nm->deadline = deadline;
    for (size_t j = 0; j < n; j++) {
        struct laddr *a = addr_find(r, addrs[j]);
        if (a)
            a->refs++;
    }
    *ret_changed = changed;
    return 0;
}

/* ---- replies ---- */

static void tcpc_close(struct lz_resolver *r, struct tcpc *c) {
    lz_closep(&c->fd);
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->in_len = c->out_len = 0;
    c->eof = false;
    c->gen = ++r->cli_gen;
}

static void tcpc_flush(struct lz_resolver *r, struct tcpc *c) {
    while (c->out_len > 0) {
        ssize_t k = send(c->fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                tcpc_close(r, c);
            return;
        }
        memmove(c->out, c->out + k, c->out_len - (size_t)k);
        c->out_len -= (size_t)k;
    }
}

static void reply(struct lz_resolver *r, const struct origin *o, const uint8_t *msg, size_t len) {
    if (!o->tcp) {
        (void)!sendto(r->udp_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&o->peer, o->plen);
        return;
    }
    struct tcpc *c = &r->cli[o->ci];
    if (c->fd < 0 || c->gen != o->gen)
        return;
    if (!c->out)
        c->out = lz_xmalloc(RES_TCP_OUT_MAX);
    size_t used;
    /* A client that does not read its answers is dropped, not buffered for. */
    if (lz_dns_tcp_frame(msg, len, c->out + c->out_len, RES_TCP_OUT_MAX - c->out_len, &used) < 0) {
        tcpc_close(r, c);
        return;
    }
    c->out_len += used;
    c->idle = lz_now_ms() + RES_TCP_IDLE_MS;
    tcpc_flush(r, c);
}

static void reply_rcode(struct lz_resolver *r, const struct origin *o, const struct lz_dns_query *q, unsigned rcode) {
    size_t len;
    if (lz_dns_build_rcode(q, rcode, o->tcp, r->tx, sizeof r->tx, &len) == 0)
        reply(r, o, r->tx, len);
}

/* ---- upstream ---- */

static uint16_t random_id(void) {
    uint16_t id = 0;
    while (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
        /* EINTR only: the pool is initialised long before a Domain starts. */
    }
    return id;
}

/* A fresh query with a fresh ID into p->sbuf (framed) and p->sent. */
static int up_build(struct pending *p) {
    size_t len;
    int k = lz_dns_build_query(random_id(), p->q.name, LZ_DNS_T_A, p->sbuf + 2, RES_QUERY_MAX, &len);
    if (k < 0)
        return k;
    p->sbuf[0] = (uint8_t)(len >> 8);
    p->sbuf[1] = (uint8_t)len;
    p->slen = len + 2;
    p->soff = 0;
    return lz_dns_parse_query(p->sbuf + 2, len, &p->sent, NULL);
}

static void pend_end(struct lz_resolver *r, struct pending *p) {
    lz_closep(&p->fd);
    free(p->rbuf);
    if (p->from.tcp) {
        struct tcpc *c = &r->cli[p->from.ci];
        if (c->gen == p->from.gen && c->npend > 0)
            c->npend--;
    }
    memset(p, 0, sizeof *p);
    p->fd = -EBADF;
    p->st = UP_FREE;
}

static void pend_fail(struct lz_resolver *r, struct pending *p) {
    reply_rcode(r, &p->from, &p->q, LZ_DNS_SERVFAIL);
    pend_end(r, p);
}

static int up_socket(struct lz_resolver *r, int type) {
    _cleanup_close_ int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)&r->cfg.upstream, sizeof r->cfg.upstream) < 0 && errno != EINPROGRESS)
        return -errno;
    return TAKE_FD(fd);
}

static void up_tcp_start(struct lz_resolver *r, struct pending *p) {
    lz_closep(&p->fd);
    if (up_build(p) < 0)
        return pend_fail(r, p);
    p->fd = up_socket(r, SOCK_STREAM);
    if (p->fd < 0)
        return pend_fail(r, p);
    p->st = UP_TCP_CONNECT;
}

/* An upstream response for p: parsed against what Lazaret sent, walked,
 * filtered, learned, answered. 1: done (p ended); 0: not for p (a stray
 * datagram), keep waiting. */
static int up_answer(struct lz_resolver *r, struct pending *p, const uint8_t *buf, size_t len) {
    enum lz_dns_reason why = LZ_DNS_OK;
    struct lz_dns_answer *a = &r->ans;
    if (lz_dns_parse_response(buf, len, &p->sent, a, &why) < 0) {
        if (p->st == UP_UDP && why == LZ_DNS_R_TC) {
            up_tcp_start(r, p);
            return 1;
        }
        /* Over UDP, what is not the answer to this query is ignored: the
         * real one may still come (and an off-path guess may not end it). */
        if (p->st == UP_UDP && (why == LZ_DNS_R_ID || why == LZ_DNS_R_QUESTION || why == LZ_DNS_R_DIRECTION))
            return 0;
        pend_fail(r, p);
        return 1;
    }
    struct lz_dns_chain ch;
    if (lz_dns_chain_walk(a, p->sent.qname, p->sent.qname_len, &ch, &why) < 0) {
        pend_fail(r, p);
        return 1;
    }
    struct lz_dnsfilter f;
    lz_dnsfilter_apply(a, &ch, r->deny_net, r->cfg.n_deny_net, r->host, r->cfg.n_host, &f);

    pthread_mutex_lock(&r->mu);
    if (f.n_dropped > 0) {
        struct lz_resolver_event *e = ev_push(r, LZ_RES_FILTERED, p->q.name);
        e->qtype = p->q.qtype;
        for (size_t i = 0; i < ch.n_a && e->n_addrs < LZ_RESOLVER_EVENT_ADDRS; i++) {
            bool kept = false;
            for (size_t j = 0; j < f.kept.n_a; j++)
                kept = kept || f.kept.a[j] == ch.a[i];
            if (!kept)
                e->addrs[e->n_addrs++] = a->rr[ch.a[i]].addr;
        }
        snprintf(e->why, sizeof e->why, "%u address(es) dropped (loopback, private, link-local, host or denied)",
                 f.n_dropped);
    }
    unsigned rcode = LZ_DNS_NOERROR;
    if (f.verdict == LZ_DNSF_NXDOMAIN)
        rcode = LZ_DNS_NXDOMAIN;
    else if (f.verdict != LZ_DNSF_ANSWER)
        rcode = LZ_DNS_SERVFAIL;
    if (rcode == LZ_DNS_NOERROR && f.kept.n_a > r->cfg.max_per_name) {
        f.kept.n_a = (uint8_t)r->cfg.max_per_name;
        limited(r, LIM_PER_NAME, p->q.name);
    }
    /* Only what the client is sent is learned (a UDP answer too big for
     * it carries the addresses that fit). */
    if (rcode == LZ_DNS_NOERROR)
        f.kept.n_a = (uint8_t)lz_dns_answer_room(&p->q, a, &f.kept, p->from.tcp);
    if (rcode == LZ_DNS_NOERROR && f.kept.n_a > 0 && !r->cfg.any_name) {
        uint32_t addrs[LZ_DNS_RR_MAX];
        for (size_t i = 0; i < f.kept.n_a; i++)
            addrs[i] = a->rr[f.kept.a[i]].addr;
        bool changed = false;
        if (learn(r, p->q.name, &p->ports, addrs, f.kept.n_a, f.lifetime, &changed) < 0) {
            rcode = LZ_DNS_SERVFAIL;
        } else if (changed) {
            struct lz_resolver_event *e = ev_push(r, LZ_RES_LEARNED, p->q.name);
            e->qtype = p->q.qtype;
            e->lifetime = f.lifetime;
            e->ports = p->ports;
            for (size_t i = 0; i < f.kept.n_a && i < LZ_RESOLVER_EVENT_ADDRS; i++)
                e->addrs[e->n_addrs++] = addrs[i];
        }
    }
    pthread_mutex_unlock(&r->mu);

    size_t olen;
    if (rcode != LZ_DNS_NOERROR)
        reply_rcode(r, &p->from, &p->q, rcode);
    else if (lz_dns_build_answer(&p->q, a, &f.kept, f.lifetime, p->from.tcp, r->tx, sizeof r->tx, &olen) == 0)
        reply(r, &p->from, r->tx, olen);
    else
        reply_rcode(r, &p->from, &p->q, LZ_DNS_SERVFAIL);
    pend_end(r, p);
    return 1;
}

static void up_ready(struct lz_resolver *r, struct pending *p, short rev) {
    if (p->st == UP_UDP) {
        for (int i = 0; i < 8 && p->st == UP_UDP; i++) {
            ssize_t k = recv(p->fd, r->rx, sizeof r->rx, MSG_DONTWAIT);
            if (k < 0) {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    pend_fail(r, p); /* e.g. ECONNREFUSED: nobody answers there */
                return;
            }
            if (up_answer(r, p, r->rx, (size_t)k))
                return;
        }
        return;
    }
    if (p->st == UP_TCP_CONNECT) {
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0)
            return pend_fail(r, p);
        p->st = UP_TCP_IO;
    }
    if (p->soff < p->slen) {
        ssize_t k = send(p->fd, p->sbuf + p->soff, p->slen - p->soff, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                pend_fail(r, p);
            return;
        }
        p->soff += (size_t)k;
        return;
    }
    if (!(rev & (POLLIN | POLLHUP | POLLERR)))
        return;
    if (!p->rbuf)
        p->rbuf = lz_xmalloc(RES_TCP_IN_MAX);
    ssize_t k = recv(p->fd, p->rbuf + p->rlen, RES_TCP_IN_MAX - p->rlen, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (k <= 0)
        return pend_fail(r, p);
    p->rlen += (size_t)k;
    const uint8_t *msg;
    size_t mlen, used;
    int n = lz_dns_tcp_next(p->rbuf, p->rlen, &msg, &mlen, &used);
    if (n < 0)
        return pend_fail(r, p);
    if (n == 1 && up_answer(r, p, msg, mlen) == 0)
        pend_fail(r, p); /* a TCP connection answers its own query or nothing */
}

/* ---- queries ---- */

static bool rate_ok(struct lz_resolver *r) {
    int64_t now = lz_now_ms();
    double burst = 2.0 * r->cfg.qps;
    r->tokens += (double)(now - r->tokens_at) * r->cfg.qps / 1000.0;
    r->tokens_at = now;
    if (r->tokens > burst)
        r->tokens = burst;
    if (r->tokens < 1.0)
        return false;
    r->tokens -= 1.0;
    return true;
}

static void forward(struct lz_resolver *r, const struct origin *o, const struct lz_dns_query *q,
                    const struct lz_hostports *ports) {
    if (r->cfg.upstream.sin_port == 0) { /* no upstream: nothing to ask */
        pthread_mutex_lock(&r->mu);
        struct lz_resolver_event *e = ev_push(r, LZ_RES_FAILED, q->name);
        snprintf(e->why, sizeof e->why, "no upstream resolver (set [network] resolver in lazaret.toml)");
        pthread_mutex_unlock(&r->mu);
        return reply_rcode(r, o, q, LZ_DNS_SERVFAIL);
    }
    struct pending *p = NULL;
    for (size_t i = 0; i < r->n_pend && !p; i++)
        if (r->pend[i].st == UP_FREE)
            p = &r->pend[i];
    if (!p) {
        pthread_mutex_lock(&r->mu);
        limited(r, LIM_INFLIGHT, q->name);
        pthread_mutex_unlock(&r->mu);
        return reply_rcode(r, o, q, LZ_DNS_SERVFAIL);
    }
    memset(p, 0, sizeof *p);
    p->fd = -EBADF;
    p->from = *o;
    p->q = *q;
    p->ports = *ports;
    p->deadline = lz_now_ms() + r->cfg.upstream_ms;
    if (up_build(p) < 0)
        return reply_rcode(r, o, q, LZ_DNS_SERVFAIL);
    p->fd = up_socket(r, SOCK_DGRAM);
    if (p->fd < 0 || send(p->fd, p->sbuf + 2, p->slen - 2, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        lz_closep(&p->fd);
        return reply_rcode(r, o, q, LZ_DNS_SERVFAIL);
    }
    p->st = UP_UDP;
    if (o->tcp)
        r->cli[o->ci].npend++;
}

static void handle(struct lz_resolver *r, const struct origin *o, const uint8_t *buf, size_t len) {
    struct lz_dns_query q;
    enum lz_dns_reason why = LZ_DNS_OK;
    if (lz_dns_parse_query(buf, len, &q, &why) < 0) {
        /* A message with QR=1 is a response: answering it could start a
         * loop between two resolvers. */
        if (why == LZ_DNS_R_DIRECTION)
            return;
        struct lz_dns_query h;
        memset(&h, 0, sizeof h);
        h.id = lz_dns_peek_id(buf, len);
        return reply_rcode(r, o, &h, lz_dns_reason_rcode(why));
    }
    if (q.refuse != LZ_DNS_OK)
        return reply_rcode(r, o, &q, LZ_DNS_REFUSED);

    pthread_mutex_lock(&r->mu);
    if (!rate_ok(r)) {
        limited(r, LIM_RATE, q.name);
        pthread_mutex_unlock(&r->mu);
        return reply_rcode(r, o, &q, LZ_DNS_REFUSED);
    }
    struct lz_hostports ports = { .all = true };
    int v;
    if (r->cfg.any_name) {
        v = lz_hostrule_decide(NULL, 0, r->deny, r->cfg.n_deny, q.name, &ports) == LZ_HOST_DENIED ? LZ_HOST_DENIED
                                                                                                  : LZ_HOST_ALLOWED;
        memset(&ports, 0, sizeof ports);
        ports.all = true;
    } else {
        v = lz_hostrule_decide(r->allow, r->n_allow, r->deny, r->cfg.n_deny, q.name, &ports);
    }
    if (v < 0) {
        limited(r, LIM_PORTS, q.name);
        pthread_mutex_unlock(&r->mu);
        return reply_rcode(r, o, &q, LZ_DNS_SERVFAIL);
    }
    if (v != LZ_HOST_ALLOWED) {
        bool denied = v == LZ_HOST_DENIED;
        struct lz_resolver_event *e = ev_push(r, denied ? LZ_RES_DENIED : LZ_RES_REFUSED, q.name);
        e->qtype = q.qtype;
        snprintf(e->why, sizeof e->why, "%s", denied ? "a deny rule matches" : "no rule allows the name");
        note_refused(r, q.name, denied);
        pthread_mutex_unlock(&r->mu);
        return reply_rcode(r, o, &q, LZ_DNS_REFUSED);
    }
    pthread_mutex_unlock(&r->mu);

    switch (q.qtype) {
    case LZ_DNS_T_A: return forward(r, o, &q, &ports);
    case LZ_DNS_T_AAAA:
    case LZ_DNS_T_HTTPS:
    case LZ_DNS_T_SVCB: return reply_rcode(r, o, &q, LZ_DNS_NOERROR);
    default: return reply_rcode(r, o, &q, LZ_DNS_REFUSED);
    }
}

static void udp_ready(struct lz_resolver *r) {
    /* A bounded batch, so the other sockets get their turn. */
    for (int i = 0; i < 32; i++) {
        struct origin o = { .tcp = false, .plen = sizeof o.peer };
        ssize_t k = recvfrom(r->udp_fd, r->rx, sizeof r->rx, MSG_DONTWAIT, (struct sockaddr *)&o.peer, &o.plen);
        if (k < 0)
            return;
        handle(r, &o, r->rx, (size_t)k);
    }
}

static void accept_ready(struct lz_resolver *r) {
    for (int i = 0; i < 8; i++) {
        _cleanup_close_ int fd = accept4(r->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct tcpc *c = NULL;
        for (size_t j = 0; j < r->cfg.max_tcp_clients && !c; j++)
            if (r->cli[j].fd < 0)
                c = &r->cli[j];
        if (!c) {
            pthread_mutex_lock(&r->mu);
            limited(r, LIM_TCP, NULL);
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        c->fd = TAKE_FD(fd);
        c->gen = ++r->cli_gen;
        c->npend = 0;
        c->eof = false;
        c->idle = lz_now_ms() + RES_TCP_IDLE_MS;
    }
}

static void tcpc_ready(struct lz_resolver *r, size_t ci, short rev) {
    struct tcpc *c = &r->cli[ci];
    if (rev & POLLOUT)
        tcpc_flush(r, c);
    if (c->fd < 0 || c->eof || !(rev & (POLLIN | POLLHUP | POLLERR)))
        return;
    if (!c->in)
        c->in = lz_xmalloc(RES_TCP_IN_MAX);
    ssize_t k = recv(c->fd, c->in + c->in_len, RES_TCP_IN_MAX - c->in_len, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (k <= 0) {
        c->eof = true;
        return;
    }
    c->in_len += (size_t)k;
    c->idle = lz_now_ms() + RES_TCP_IDLE_MS;
    unsigned gen = c->gen;
    for (;;) {
        const uint8_t *msg;
        size_t mlen, used;
        int n = lz_dns_tcp_next(c->in, c->in_len, &msg, &mlen, &used);
        if (n < 0) {
            tcpc_close(r, c);
            return;
        }
        if (n == 0)
            break;
        struct origin o = { .tcp = true, .ci = (int)ci, .gen = gen };
        /* handle copies what it keeps; the frame is consumed after. */
        handle(r, &o, msg, mlen);
        if (c->fd < 0 || c->gen != gen)
            return;
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
    }
}

/* ---- the TLS gate's questions ---- */

static const char *ip_text(uint32_t a, char buf[static INET_ADDRSTRLEN]) {
    struct in_addr ia = { .s_addr = htonl(a) };
    return inet_ntop(AF_INET, &ia, buf, INET_ADDRSTRLEN);
}

enum lz_gate_verdict lz_resolver_gate_decide(struct lz_resolver *r, uint32_t addr, uint16_t port, const char *sni,
                                             bool ech, bool lenient, char *why, size_t cap) {
    char ip[INET_ADDRSTRLEN];
    ip_text(addr, ip);
    why[0] = '\0';
    pthread_mutex_lock(&r->mu);
    struct laddr *a = addr_find(r, addr);
    bool learned = a && rports_has_port(&a->inst, port);
    enum lz_gate_verdict v = LZ_GATE_REFUSE;
    if (!learned)
        snprintf(why, cap, "%s:%u is not a learned address", ip, (unsigned)port);
    else if (!sni || !sni[0] || ech) /* no name to check: lenient lets it pass, strict does not */
        v = lenient ? LZ_GATE_ALLOW : LZ_GATE_REFUSE;
    else {
        /* The name, as the resolver would decide it now (a run-time allow
         * included), on this port. */
        struct lz_hostports ports = { 0 };
        int d = lz_hostrule_decide(r->allow, r->n_allow, r->deny, r->cfg.n_deny, sni, &ports);
        struct lname *nm = d == LZ_HOST_ALLOWED && lz_hostports_has(&ports, port) ? name_find(r, sni) : NULL;
        bool for_it = false;
        for (size_t i = 0; nm && i < nm->n && !for_it; i++)
            for_it = nm->addrs[i] == addr;
        if (d == LZ_HOST_DENIED)
            snprintf(why, cap, "the server name %s is denied (deny_hosts)", sni);
        else if (d != LZ_HOST_ALLOWED || !lz_hostports_has(&ports, port))
            snprintf(why, cap, "the server name %s is not allowed on port %u", sni, (unsigned)port);
        else if (!for_it)
            snprintf(why, cap, "%s was not learned for the server name %s (another name's address)", ip, sni);
        else
            v = LZ_GATE_ALLOW;
    }
    if (v == LZ_GATE_REFUSE && !why[0])
        snprintf(why, cap, "%s",
                 ech ? "an encrypted ClientHello (ECH) hides the server name"
                     : "the ClientHello names no server (no SNI)");
    if (v == LZ_GATE_REFUSE) {
        struct lz_resolver_event *e = ev_push(r, LZ_RES_TLS_REFUSED, sni ? sni : "");
        e->n_addrs = 1;
        e->addrs[0] = addr;
        e->ports.n = 1;
        e->ports.ports[0] = port;
        snprintf(e->why, sizeof e->why, "%s", why);
    }
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* The gate's requests, as many as wait (bounded per round). A malformed
 * datagram or the channel's end closes it: the gate then exits, and every
 * TCP/443 connection to a learned address is refused (its listener is
 * gone with it). */
static void gate_ready(struct lz_resolver *r) {
    for (int round = 0; round < 64 && r->gate_fd >= 0; round++) {
        struct lz_gate_req q;
        ssize_t k = recv(r->gate_fd, &q, sizeof q, MSG_DONTWAIT | MSG_TRUNC);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (k != (ssize_t)sizeof q || q.sni[sizeof q.sni - 1] != '\0') {
            pthread_mutex_lock(&r->mu);
            struct lz_resolver_event *e = ev_push(r, LZ_RES_FAILED, "");
            snprintf(e->why, sizeof e->why, "the TLS gate's channel %s; HTTPS to learned names is refused from now on",
                     k == 0      ? "closed (the gate ended)"
                         : k < 0 ? "failed"
                                 : "carried a malformed request");
            pthread_mutex_unlock(&r->mu);
            lz_closep(&r->gate_fd);
            return;
        }
        q.why[sizeof q.why - 1] = '\0';
        if (q.flags & LZ_GATE_REPORT) {
            /* What the gate did on a credential's host: an event for the
             * coordinator's audit, no reply. */
            char canon[LZ_HOSTNAME_MAX + 1] = "";
            if (lz_hostname_canon(q.sni, strlen(q.sni), canon, NULL) < 0)
                continue;
            pthread_mutex_lock(&r->mu);
            struct lz_resolver_event *e =
                ev_push(r, (q.flags & LZ_GATE_REPORT_PUSH) ? LZ_RES_GIT_PUSH : LZ_RES_CRED_REFUSED, canon);
            e->n_addrs = 1;
            e->addrs[0] = q.addr;
            e->ports.n = 1;
            e->ports.ports[0] = q.port;
            for (char *w = q.why; *w; w++)
                if ((unsigned char)*w < 0x20 || (unsigned char)*w > 0x7e)
                    *w = '?';
            snprintf(e->why, sizeof e->why, "%s", q.why);
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        struct lz_gate_rep a = { .id = q.id };
        bool has_sni = (q.flags & LZ_GATE_SNI) != 0;
        char canon[LZ_HOSTNAME_MAX + 1] = "";
        struct lz_error err = { 0 };
        /* The gate sends canonical names; a name that is not is refused here
         * too (the resolver trusts nothing it did not parse itself). */
        if (has_sni && lz_hostname_canon(q.sni, strlen(q.sni), canon, &err) < 0) {
            a.verdict = LZ_GATE_REFUSE;
            snprintf(a.why, sizeof a.why, "a server name with no host form");
        } else {
            a.verdict = (uint8_t)lz_resolver_gate_decide(r, q.addr, q.port, has_sni ? canon : NULL,
                                                         (q.flags & LZ_GATE_ECH) != 0, r->cfg.gate_lenient, a.why,
                                                         sizeof a.why);
        }
        /* A full channel: the gate's own bound refuses that connection. */
        (void)!send(r->gate_fd, &a, sizeof a, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
}

/* ---- the loop ---- */

static void *run(void *arg) {
    struct lz_resolver *r = arg;
    size_t cap = 4 + r->cfg.max_tcp_clients + r->n_pend;
    _cleanup_free_ struct pollfd *pfd = lz_xcalloc(cap, sizeof *pfd);
    _cleanup_free_ int *who = lz_xcalloc(cap, sizeof *who); /* >= 0: client; <= -10: pending -(i + 10) */
    for (;;) {
        int64_t now = lz_now_ms();
        pthread_mutex_lock(&r->mu);
        expire(r, now);
        int64_t dl = next_deadline(r, now, -1);
        pthread_mutex_unlock(&r->mu);

        size_t n = 0;
        pfd[n++] = (struct pollfd){ .fd = r->stop_fd, .events = POLLIN };
        pfd[n++] = (struct pollfd){ .fd = r->udp_fd, .events = POLLIN };
        pfd[n++] = (struct pollfd){ .fd = r->tcp_fd, .events = POLLIN };
        /* Always present (a closed channel is -EBADF, which poll skips), so
         * the clients and pendings start at 4. */
        pfd[n++] = (struct pollfd){ .fd = r->gate_fd, .events = POLLIN };
        for (size_t i = 0; i < r->n_pend; i++) {
            struct pending *p = &r->pend[i];
            if (p->st == UP_FREE)
                continue;
            if (p->deadline <= now) {
                pend_fail(r, p);
                continue;
            }
            if (dl < 0 || p->deadline < dl)
                dl = p->deadline;
            short ev = p->st == UP_UDP ? POLLIN : (p->soff < p->slen || p->st == UP_TCP_CONNECT) ? POLLOUT : POLLIN;
            who[n] = -(int)(i + 10);
            pfd[n++] = (struct pollfd){ .fd = p->fd, .events = ev };
        }
        for (size_t i = 0; i < r->cfg.max_tcp_clients; i++) {
            struct tcpc *c = &r->cli[i];
            if (c->fd < 0)
                continue;
            if (c->idle <= now || (c->eof && c->npend == 0 && c->out_len == 0)) {
                tcpc_close(r, c);
                continue;
            }
            if (dl < 0 || c->idle < dl)
                dl = c->idle;
            /* Past its EOF with nothing to send, a client waits only for its
             * answers (bounded by their deadlines): polling it would spin on
             * its hang-up. */
            if (c->eof && c->out_len == 0)
                continue;
            short ev = (short)((c->eof ? 0 : POLLIN) | (c->out_len > 0 ? POLLOUT : 0));
            who[n] = (int)i;
            pfd[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
        }
        int timeout = -1;
        if (dl >= 0)
            timeout = dl <= now ? 0 : (int)(dl - now > 60000 ? 60000 : dl - now);
        int k = poll(pfd, n, timeout);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break; /* cannot happen with valid fds; the stop joins us */
        }
        if (pfd[0].revents)
            break;
        if (pfd[1].revents)
            udp_ready(r);
        if (pfd[2].revents)
            accept_ready(r);
        if (pfd[3].revents)
            gate_ready(r);
        for (size_t i = 4; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            if (who[i] >= 0) {
                if (r->cli[who[i]].fd == pfd[i].fd)
                    tcpc_ready(r, (size_t)who[i], pfd[i].revents);
            } else {
                struct pending *p = &r->pend[-who[i] - 10];
                if (p->st != UP_FREE && p->fd == pfd[i].fd)
                    up_ready(r, p, pfd[i].revents);
            }
        }
    }
    return NULL;
}

/* ---- the public functions ---- */

static void resolver_free(struct lz_resolver *r) {
    if (!r)
        return;
    for (size_t i = 0; r->pend && i < r->n_pend; i++) {
        lz_closep(&r->pend[i].fd);
        free(r->pend[i].rbuf);
    }
    for (size_t i = 0; r->cli && i < r->cfg.max_tcp_clients; i++) {
        lz_closep(&r->cli[i].fd);
        free(r->cli[i].in);
        free(r->cli[i].out);
    }
    lz_closep(&r->udp_fd);
    lz_closep(&r->tcp_fd);
    lz_closep(&r->gate_fd);
    lz_closep(&r->stop_fd);
    lz_closep(&r->ev_fd);
    pthread_mutex_destroy(&r->mu);
    free(r->pend);
    free(r->cli);
    free(r->allow);
    free(r->deny);
    free(r->deny_net);
    free(r->host);
    free(r->ring);
    free(r->names);
    free(r->addrs);
    free(r);
}

static void *dup_array(const void *p, size_t n, size_t size) {
    if (n == 0)
        return NULL;
    void *d = lz_xcalloc(n, size);
    memcpy(d, p, n * size);
    return d;
}

int lz_resolver_start(const struct lz_resolver_config *cfg, struct lz_resolver **ret, struct lz_error *err) {
    int udp = cfg->udp_fd, tcp = cfg->tcp_fd, gate = cfg->gate ? cfg->gate_fd : -EBADF;
    if (udp < 0 || tcp < 0 || (cfg->gate && gate < 0) || !cfg->routes.add || !cfg->routes.del || !cfg->routes.in_use ||
        (cfg->n_allow && !cfg->allow) || (cfg->n_deny && !cfg->deny) || (cfg->n_deny_net && !cfg->deny_net) ||
        (cfg->n_host && !cfg->host_addrs) || cfg->upstream.sin_family != AF_INET) {
        if (udp >= 0)
            close(udp);
        if (tcp >= 0)
            close(tcp);
        if (gate >= 0)
            close(gate);
        return lz_error_set(err, -EINVAL, "resolver: incomplete configuration (sockets, routes or upstream)");
    }
    struct lz_resolver *r = lz_xcalloc(1, sizeof *r);
    r->udp_fd = udp;
    r->tcp_fd = tcp;
    r->gate_fd = gate;
    r->stop_fd = r->ev_fd = -EBADF;
    pthread_mutex_init(&r->mu, NULL);
    r->cfg = *cfg;
    struct lz_resolver_config *c = &r->cfg;
    c->max_names = c->max_names ? c->max_names : 1024;
    c->max_addrs = c->max_addrs ? c->max_addrs : 1024;
    c->max_per_name = c->max_per_name ? c->max_per_name : 32;
    if (c->max_per_name > LZ_DNS_RR_MAX)
        c->max_per_name = LZ_DNS_RR_MAX;
    c->qps = c->qps ? c->qps : 100;
    c->upstream_ms = c->upstream_ms ? c->upstream_ms : 2500;
    c->max_inflight = c->max_inflight ? c->max_inflight : 64;
    c->max_tcp_clients = c->max_tcp_clients ? c->max_tcp_clients : 16;
    snprintf(r->preset, sizeof r->preset, "%s", cfg->preset ? cfg->preset : cfg->any_name ? "open" : "names");
    c->preset = NULL;

    r->cap_allow = cfg->n_allow + RES_ALLOW_EXTRA_MAX;
    r->allow = lz_xcalloc(r->cap_allow, sizeof *r->allow);
    if (cfg->n_allow)
        memcpy(r->allow, cfg->allow, cfg->n_allow * sizeof *r->allow);
    r->n_allow = cfg->n_allow;
    r->deny = dup_array(cfg->deny, cfg->n_deny, sizeof *r->deny);
    r->deny_net = dup_array(cfg->deny_net, cfg->n_deny_net, sizeof *r->deny_net);
    r->host = dup_array(cfg->host_addrs, cfg->n_host, sizeof *r->host);
    c->allow = c->deny = NULL;
    c->deny_net = NULL;
    c->host_addrs = NULL;

    r->ring = lz_xcalloc(RES_EVENTS, sizeof *r->ring);
    r->names = lz_xcalloc(c->max_names, sizeof *r->names);
    r->addrs = lz_xcalloc(c->max_addrs, sizeof *r->addrs);
    r->n_pend = c->max_inflight;
    r->pend = lz_xcalloc(r->n_pend, sizeof *r->pend);
    for (size_t i = 0; i < r->n_pend; i++)
        r->pend[i].fd = -EBADF;
    r->cli = lz_xcalloc(c->max_tcp_clients, sizeof *r->cli);
    for (size_t i = 0; i < c->max_tcp_clients; i++)
        r->cli[i].fd = -EBADF;
    r->tokens = 2.0 * c->qps;
    r->tokens_at = lz_now_ms();

    int k;
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    r->ev_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->stop_fd < 0 || r->ev_fd < 0) {
        k = -errno;
        resolver_free(r);
        return lz_error_errno(err, k, "resolver: eventfd");
    }
    /* The server sockets are polled, never waited on. */
    if (fcntl(udp, F_SETFL, fcntl(udp, F_GETFL) | O_NONBLOCK) < 0 ||
        fcntl(tcp, F_SETFL, fcntl(tcp, F_GETFL) | O_NONBLOCK) < 0 ||
        (gate >= 0 && fcntl(gate, F_SETFL, fcntl(gate, F_GETFL) | O_NONBLOCK) < 0)) {
        k = -errno;
        resolver_free(r);
        return lz_error_errno(err, k, "resolver: the DNS sockets");
    }
    k = lz_thread_start_blocked(&r->thread, run, r);
    if (k != 0) {
        resolver_free(r);
        return lz_error_errno(err, -k, "resolver: cannot start its thread");
    }
    r->started = true;
    *ret = r;
    return 0;
}

void lz_resolver_stop(struct lz_resolver *r) {
    if (!r)
        return;
    if (r->started) {
        uint64_t one = 1;
        (void)!write(r->stop_fd, &one, sizeof one);
        pthread_join(r->thread, NULL);
    }
    resolver_free(r);
}

int lz_resolver_event_fd(const struct lz_resolver *r) { return r->ev_fd; }

size_t lz_resolver_events(struct lz_resolver *r, struct lz_resolver_event *out, size_t cap, uint64_t *ret_lost) {
    pthread_mutex_lock(&r->mu);
    uint64_t drain;
    (void)!read(r->ev_fd, &drain, sizeof drain);
    size_t n = 0;
    while (n < cap && r->ring_n > 0) {
        out[n++] = r->ring[r->ring_head];
        r->ring_head = (r->ring_head + 1) % RES_EVENTS;
        r->ring_n--;
    }
    if (ret_lost) {
        *ret_lost = r->ring_lost;
        r->ring_lost = 0;
    }
    /* Still readable while events wait. */
    if (r->ring_n > 0) {
        uint64_t one = 1;
        (void)!write(r->ev_fd, &one, sizeof one);
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

int lz_resolver_allow(struct lz_resolver *r, const struct lz_hostrule *rule, struct lz_error *err) {
    pthread_mutex_lock(&r->mu);
    if (r->n_allow >= r->cap_allow) {
        pthread_mutex_unlock(&r->mu);
        return lz_error_set(err, -E2BIG, "resolver: too many allow rules added at run time (at most %d)",
                            RES_ALLOW_EXTRA_MAX);
    }
    r->allow[r->n_allow] = *rule;
    /* The same bound as the configuration's: no decision past LZ_HOSTPORTS_MAX ports. */
    int k = lz_hostrule_check(r->allow, r->n_allow + 1, err);
    if (k == 0)
        r->n_allow++;
    pthread_mutex_unlock(&r->mu);
    return k < 0 ? -E2BIG : 0;
}

/* ---- the report ---- */

struct sbuf {
    char *b;
    size_t len;
    bool cut;
};

static void sb_add(struct sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *s, const char *fmt, ...) {
    if (s->cut)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->b + s->len, RES_REPORT_MAX - s->len, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if ((size_t)k >= RES_REPORT_MAX - s->len) {
        /* Whole lines only, and say so. */
        static const char tail[] = "... (cut at 64 KiB)\n";
        s->cut = true;
        while (s->len > 0 && s->len + sizeof tail > RES_REPORT_MAX)
            s->len--;
        while (s->len > 0 && s->b[s->len - 1] != '\n')
            s->len--;
        memcpy(s->b + s->len, tail, sizeof tail);
        s->len += sizeof tail - 1;
        return;
    }
    s->len += (size_t)k;
}

static void fmt_ports(const struct rports *p, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->n && off < cap; i++) {
        int k = p->p[i] == 0 ? snprintf(buf + off, cap - off, "%stcp/*", i ? "," : "")
                             : snprintf(buf + off, cap - off, "%stcp/%u", i ? "," : "", p->p[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

static void fmt_left(int64_t ms, char *buf, size_t cap) {
    int64_t s = (ms + 999) / 1000;
    if (s < 120)
        snprintf(buf, cap, "%" PRId64 " s", s);
    else if (s < 7200)
        snprintf(buf, cap, "%" PRId64 " min", s / 60);
    else
        snprintf(buf, cap, "%" PRId64 " h", s / 3600);
}

static void report_addr(struct sbuf *s, const char *name, const struct laddr *a, int64_t now) {
    char ip[16], ports[RES_PORTS_MAX * 10], t[32];
    ipstr(a->addr, ip);
    fmt_ports(&a->inst, ports, sizeof ports);
    if (a->zombie) {
        fmt_left(now - a->first_deadline, t, sizeof t);
        sb_add(s, "  %s  %s  %s  kept %s past expiry (open connection)\n", name, ip, ports, t);
    } else {
        fmt_left(a->deadline - now, t, sizeof t);
        sb_add(s, "  %s  %s  %s  expires in %s\n", name, ip, ports, t);
    }
}

char *lz_resolver_report(struct lz_resolver *r) {
    struct sbuf s = { .b = lz_xmalloc(RES_REPORT_MAX), .len = 0, .cut = false };
    s.b[0] = '\0';
    int64_t now = lz_now_ms();
    char up[16];
    ipstr(ntohl(r->cfg.upstream.sin_addr.s_addr), up);
    pthread_mutex_lock(&r->mu);
    if (r->cfg.upstream.sin_port == 0)
        snprintf(up, sizeof up, "none");
    char port[8] = "";
    if (r->cfg.upstream.sin_port)
        snprintf(port, sizeof port, ":%u", ntohs(r->cfg.upstream.sin_port));
    sb_add(&s, "policy: %s; %zu allow rule%s, %zu deny rule%s%s; upstream %s%s\n", r->preset, r->n_allow,
           r->n_allow == 1 ? "" : "s", r->cfg.n_deny, r->cfg.n_deny == 1 ? "" : "s",
           r->cfg.any_name ? "; every name not denied" : "", up, port);
    if (r->n_allow > r->cfg.n_allow) {
        sb_add(&s, "allowed at run time:");
        for (size_t i = r->cfg.n_allow; i < r->n_allow; i++) {
            char t[LZ_HOSTRULE_TEXT_MAX];
            if (lz_hostrule_format(&r->allow[i], t, sizeof t) >= 0)
                sb_add(&s, " %s", t);
        }
        sb_add(&s, "\n");
    }
    sb_add(&s, "learned:%s\n", r->n_addrs ? "" : " none");
    for (size_t i = 0; i < r->cfg.max_names; i++) {
        const struct lname *n = &r->names[i];
        for (size_t j = 0; n->used && j < n->n; j++) {
            const struct laddr *a = addr_find(r, n->addrs[j]);
            if (a)
                report_addr(&s, n->name, a, now);
        }
    }
    for (size_t i = 0; i < r->cfg.max_addrs; i++)
        if (r->addrs[i].used && r->addrs[i].refs == 0)
            report_addr(&s, "(an earlier answer)", &r->addrs[i], now);
    sb_add(&s, "refused (most recent first):%s\n", r->n_refused ? "" : " none");
    for (size_t i = 0; i < r->n_refused; i++) {
        const struct refused *x = &r->refused[i];
        char t[32];
        fmt_left(now - x->last, t, sizeof t);
        sb_add(&s, "  %s  %s  %" PRIu64 " quer%s, last %s ago\n", x->name, x->denied ? "denied" : "unlisted", x->count,
               x->count == 1 ? "y" : "ies", t);
    }
    sb_add(&s, "bounds: names %zu/%u, addresses %zu/%u, queries limited %" PRIu64 " times\n", r->n_names,
           r->cfg.max_names, r->n_addrs, r->cfg.max_addrs, r->limited);
    pthread_mutex_unlock(&r->mu);
    return s.b;
}

/* ---- resolv.conf ---- */

#define RESOLV_CONF_MAX (64 * 1024)
#define RESOLV_LINE_MAX 1024

int lz_resolver_upstream_from_resolv_conf(const char *path, struct sockaddr_in *ret, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    int k = lz_read_file_at(AT_FDCWD, path, RESOLV_CONF_MAX, &buf, NULL);
    if (k < 0)
        return lz_error_errno(err, k, path);
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        size_t len = next ? (size_t)(next - line) : strlen(line);
        if (next)
            *next++ = '\0';
        if (len > RESOLV_LINE_MAX)
            continue;
        char *hash = strpbrk(line, "#;");
        if (hash)
            *hash = '\0';
        char *save = NULL;
        const char *key = strtok_r(line, " \t\r", &save);
        if (!key || strcmp(key, "nameserver") != 0)
            continue;
        const char *val = strtok_r(NULL, " \t\r", &save);
        if (!val || strtok_r(NULL, " \t\r", &save))
            continue;
        struct in_addr a;
        /* inet_pton takes only dotted quads of decimals: no "1", no octal. */
        if (inet_pton(AF_INET, val, &a) != 1 || a.s_addr == htonl(INADDR_ANY))
            continue;
        memset(ret, 0, sizeof *ret);
        ret->sin_family = AF_INET;
        ret->sin_addr = a;
        ret->sin_port = htons(53);
        return 0;
    }
    return lz_error_set(err, -ENOENT, "%s names no IPv4 nameserver: set [network] resolver = \"A.B.C.D\"", path);
}
