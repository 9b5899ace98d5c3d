/* test_resolver.c — the Domain's DNS resolver (resolver.c) on real
 * sockets: the test binds the "10.0.2.3" pair (UDP and TCP on 127.0.0.1,
 * ephemeral ports) and hands them to the engine, runs a fake upstream
 * resolver on its own thread (UDP and TCP on one 127.0.0.1 port, canned
 * answers written byte by byte, every query it receives counted), and
 * fakes the routes port (every add and delete recorded with a sequence
 * number from the same counter the client stamps its answers with;
 * in_use returns what the test says).
 *
 * Each check has a control beside it that shows it can fail: the same
 * path with the one thing changed that flips the outcome. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "dnsmsg.h"
#include "resolver.h"

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))
#define HOST_ADDR IP(198, 51, 100, 99)

/* ---- the fake upstream ---- */

enum up_mode { UP_ANSWER = 0, UP_SILENT, UP_TC /* TC over UDP, the answer over TCP */ };

struct entry {
    const char *name;
    const char *cname; /* the answer is name CNAME cname, then cname's A records */
    uint32_t addrs[12];
    size_t n;
    uint32_t ttl;
    enum up_mode mode;
    uint32_t inject; /* an A record for another name ("evil.test"), off the chain */
};

static struct {
    pthread_mutex_t mu;
    struct entry e[40];
    size_t n;
    atomic_uint udp_q, tcp_q;
    int udp, tcp, stop;
    uint16_t port;
    pthread_t t;
} up = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void up_set(const struct entry *e) {
    pthread_mutex_lock(&up.mu);
    assert_true(up.n < LZ_ARRAY_SIZE(up.e));
    /* Own copies: a case may pass names from its stack. */
    up.e[up.n] = *e;
    up.e[up.n].name = lz_xstrdup(e->name);
    up.e[up.n].cname = e->cname ? lz_xstrdup(e->cname) : NULL;
    up.n++;
    pthread_mutex_unlock(&up.mu);
}

static size_t wire(const char *name, uint8_t *out) {
    size_t o = 0;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        out[o++] = (uint8_t)l;
        memcpy(out + o, p, l);
        o += l;
        p += l + (dot ? 1 : 0);
    }
    out[o++] = 0;
    return o;
}

static size_t put16(uint8_t *b, size_t o, unsigned v) {
    b[o] = (uint8_t)(v >> 8);
    b[o + 1] = (uint8_t)v;
    return o + 2;
}

static size_t put32(uint8_t *b, size_t o, uint32_t v) {
    o = put16(b, o, v >> 16);
    return put16(b, o, v & 0xffff);
}

static size_t rr_a(uint8_t *b, size_t o, unsigned owner_ptr, uint32_t ttl, uint32_t addr) {
    o = put16(b, o, 0xC000 | owner_ptr);
    o = put16(b, o, LZ_DNS_T_A);
    o = put16(b, o, LZ_DNS_CLASS_IN);
    o = put32(b, o, ttl);
    o = put16(b, o, 4);
    return put32(b, o, addr);
}

/* The canned response to a query the resolver sent; 0: none. */
static size_t up_response(const uint8_t *qb, size_t qlen, bool tcp, uint8_t *b) {
    struct lz_dns_query q;
    if (lz_dns_parse_query(qb, qlen, &q, NULL) < 0)
        return 0;
    pthread_mutex_lock(&up.mu);
    struct entry e = { 0 };
    bool found = false;
    for (size_t i = 0; i < up.n && !found; i++)
        if (strcmp(up.e[i].name, q.name) == 0) {
            e = up.e[i];
            found = true;
        }
    pthread_mutex_unlock(&up.mu);
    size_t nl = strlen(q.name);
    if (!found && nl > 9 && strcmp(q.name + nl - 9, ".gen.test") == 0) {
        /* Any name under gen.test: one shared address (the report's bound). */
        e = (struct entry){ .name = q.name, .addrs = { IP(203, 0, 113, 200) }, .n = 1, .ttl = 300 };
        found = true;
    }
    if (!found || e.mode == UP_SILENT)
        return 0;
    bool tc = e.mode == UP_TC && !tcp;
    size_t an = tc ? 0 : e.n + (e.cname ? 1 : 0) + (e.inject ? 1 : 0);
    size_t o = 0;
    b[o++] = qb[0];
    b[o++] = qb[1];
    o = put16(b, o, 0x8180 | (tc ? 0x0200 : 0));
    o = put16(b, o, 1);
    o = put16(b, o, an);
    o = put16(b, o, 0);
    o = put16(b, o, 0);
    memcpy(b + o, q.qname, q.qname_len);
    o += q.qname_len;
    o = put16(b, o, q.qtype);
    o = put16(b, o, LZ_DNS_CLASS_IN);
    if (tc)
        return o;
    unsigned owner = 12;
    if (e.cname) {
        o = put16(b, o, 0xC00C);
        o = put16(b, o, LZ_DNS_T_CNAME);
        o = put16(b, o, LZ_DNS_CLASS_IN);
        o = put32(b, o, e.ttl);
        uint8_t w[256];
        size_t wl = wire(e.cname, w);
        o = put16(b, o, wl);
        owner = (unsigned)o;
        memcpy(b + o, w, wl);
        o += wl;
    }
    for (size_t i = 0; i < e.n; i++)
        o = rr_a(b, o, owner, e.ttl, e.addrs[i]);
    if (e.inject) {
        uint8_t w[256];
        size_t wl = wire("evil.test", w);
        memcpy(b + o, w, wl);
        o += wl;
        o = put16(b, o, LZ_DNS_T_A);
        o = put16(b, o, LZ_DNS_CLASS_IN);
        o = put32(b, o, e.ttl);
        o = put16(b, o, 4);
        o = put32(b, o, e.inject);
    }
    return o;
}

static void up_tcp_serve(int fd) {
    struct timeval tv = { .tv_sec = 1 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t in[2 + 512], out[4096];
    size_t got = 0;
    while (got < sizeof in) {
        ssize_t k = recv(fd, in + got, sizeof in - got, 0);
        if (k <= 0)
            return;
        got += (size_t)k;
        const uint8_t *msg;
        size_t mlen, used;
        if (lz_dns_tcp_next(in, got, &msg, &mlen, &used) == 1) {
            atomic_fetch_add(&up.tcp_q, 1);
            size_t n = up_response(msg, mlen, true, out + 2);
            if (n) {
                put16(out, 0, n);
                (void)!send(fd, out, n + 2, MSG_NOSIGNAL);
            }
            return;
        }
    }
}

static void *up_main(void *arg) {
    (void)arg;
    for (;;) {
        struct pollfd p[3] = { { .fd = up.stop, .events = POLLIN },
                               { .fd = up.udp, .events = POLLIN },
                               { .fd = up.tcp, .events = POLLIN } };
        if (poll(p, 3, 5000) < 0 || p[0].revents)
            return NULL;
        if (p[1].revents) {
            uint8_t in[1024], out[4096];
            struct sockaddr_storage from;
            socklen_t fl = sizeof from;
            ssize_t k = recvfrom(up.udp, in, sizeof in, 0, (struct sockaddr *)&from, &fl);
            if (k > 0) {
                atomic_fetch_add(&up.udp_q, 1);
                size_t n = up_response(in, (size_t)k, false, out);
                if (n)
                    (void)!sendto(up.udp, out, n, 0, (struct sockaddr *)&from, fl);
            }
        }
        if (p[2].revents) {
            int fd = accept4(up.tcp, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                up_tcp_serve(fd);
                close(fd);
            }
        }
    }
}

static unsigned up_count(void) { return atomic_load(&up.udp_q) + atomic_load(&up.tcp_q); }

/* ---- the fake routes ---- */

static atomic_ulong seq;

struct rcall {
    bool add;
    uint32_t addr;
    uint16_t port;
    unsigned long seq;
};

static struct {
    pthread_mutex_t mu;
    struct rcall c[256];
    size_t n;
    atomic_int in_use;
    atomic_int fail_add, fail_del;
} rt = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int rt_rec(bool add, uint32_t addr, uint16_t port) {
    pthread_mutex_lock(&rt.mu);
    if (rt.n < LZ_ARRAY_SIZE(rt.c))
        rt.c[rt.n++] = (struct rcall){ add, addr, port, atomic_fetch_add(&seq, 1) + 1 };
    pthread_mutex_unlock(&rt.mu);
    return 0;
}

static int rt_add(void *ud, uint32_t addr, uint16_t port, struct lz_error *err) {
    if (atomic_load(&rt.fail_add))
        return lz_error_set(err, -EPERM, "fake: no route");
    return rt_rec(true, addr, port);
}
static int rt_del(void *ud, uint32_t addr, uint16_t port, struct lz_error *err) {
    if (atomic_load(&rt.fail_del))
        return lz_error_set(err, -EIO, "fake: cannot delete");
    return rt_rec(false, addr, port);
}
static int rt_in_use(void *ud, uint32_t addr) { return atomic_load(&rt.in_use); }

/* The sequence number of the call (add or delete) of addr/port, 0: none. */
static unsigned long rt_find(bool add, uint32_t addr, uint16_t port) {
    unsigned long s = 0;
    pthread_mutex_lock(&rt.mu);
    for (size_t i = 0; i < rt.n; i++)
        if (rt.c[i].add == add && rt.c[i].addr == addr && rt.c[i].port == port)
            s = rt.c[i].seq;
    pthread_mutex_unlock(&rt.mu);
    return s;
}

static size_t rt_count(bool add) {
    size_t n = 0;
    pthread_mutex_lock(&rt.mu);
    for (size_t i = 0; i < rt.n; i++)
        n += rt.c[i].add == add;
    pthread_mutex_unlock(&rt.mu);
    return n;
}

/* ---- the engine under test ---- */

struct opts {
    const char *allow[8];
    const char *deny[4];
    bool any_name, no_host, no_upstream;
    bool gate, lenient; /* the TLS gate's channel (fx.gate: the gate's end) */
    unsigned max_addrs, qps, upstream_ms, test_lifetime_ms;
    unsigned max_names, max_per_name, max_inflight, max_tcp_clients;
};

struct fx {
    struct lz_resolver *r;
    uint16_t udp_port, tcp_port;
    int gate; /* the gate's end of the channel, or -1 */
};

static uint16_t bound_port(int fd) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    return ntohs(a.sin_port);
}

static int bind_lo(int type, uint16_t port) {
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -errno;
    }
    if (type == SOCK_STREAM)
        assert_int_equal(listen(fd, 16), 0);
    return fd;
}

static void start(struct fx *f, const struct opts *o) {
    static struct lz_hostrule allow[8], deny[4];
    size_t na = 0, nd = 0;
    for (; na < 8 && o->allow[na]; na++)
        assert_int_equal(lz_hostrule_parse(o->allow[na], 0, &allow[na], NULL), 0);
    for (; nd < 4 && o->deny[nd]; nd++)
        assert_int_equal(lz_hostrule_parse(o->deny[nd], LZ_HOSTRULE_NO_PORTS, &deny[nd], NULL), 0);
    static const uint32_t host[] = { HOST_ADDR };
    struct lz_resolver_config c = {
        .allow = allow,
        .n_allow = na,
        .deny = deny,
        .n_deny = nd,
        .any_name = o->any_name,
        .host_addrs = host,
        .n_host = o->no_host ? 0 : 1,
        .upstream = { .sin_family = AF_INET,
                      .sin_port = o->no_upstream ? 0 : htons(up.port),
                      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
        .udp_fd = bind_lo(SOCK_DGRAM, 0),
        .tcp_fd = bind_lo(SOCK_STREAM, 0),
        .routes = { .add = rt_add, .del = rt_del, .in_use = rt_in_use },
        .max_addrs = o->max_addrs,
        .max_names = o->max_names,
        .max_per_name = o->max_per_name,
        .max_inflight = o->max_inflight,
        .max_tcp_clients = o->max_tcp_clients,
        .qps = o->qps,
        .upstream_ms = o->upstream_ms,
        .test_lifetime_ms = o->test_lifetime_ms,
        .preset = "locked",
        .gate = o->gate,
        .gate_lenient = o->lenient,
        .gate_fd = -1,
    };
    f->gate = -1;
    if (o->gate) {
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        c.gate_fd = sp[0];
        f->gate = sp[1];
        struct timeval tv = { .tv_sec = 3 };
        setsockopt(f->gate, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    f->udp_port = bound_port(c.udp_fd);
    f->tcp_port = bound_port(c.tcp_fd);
    pthread_mutex_lock(&rt.mu);
    rt.n = 0;
    pthread_mutex_unlock(&rt.mu);
    atomic_store(&rt.in_use, 0);
    atomic_store(&rt.fail_add, 0);
    atomic_store(&rt.fail_del, 0);
    struct lz_error err = { 0 };
    if (lz_resolver_start(&c, &f->r, &err) != 0)
        fail_msg("start: %s", err.msg);
}

/* The client: one UDP query, its answer (bounded wait); the receive is
 * stamped with the routes' sequence. */
struct reply {
    size_t len;
    uint8_t b[4096];
    unsigned rcode;
    unsigned long seq;
    struct lz_dns_answer a;
    bool parsed;
};

static void parse_reply(struct reply *rep, uint16_t id, const char *name, uint16_t qtype) {
    uint8_t qb[512];
    size_t ql;
    struct lz_dns_query sent;
    assert_int_equal(lz_dns_build_query(id, name, qtype, qb, sizeof qb, &ql), 0);
    assert_int_equal(lz_dns_parse_query(qb, ql, &sent, NULL), 0);
    rep->rcode = rep->len >= 4 ? rep->b[3] & 15 : 99;
    rep->parsed = lz_dns_parse_response(rep->b, rep->len, &sent, &rep->a, NULL) == 0;
}

static int ask_raw(const struct fx *f, const uint8_t *q, size_t ql, struct reply *rep, int wait_ms) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(f->udp_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int k = poll(&p, 1, wait_ms);
    memset(rep, 0, sizeof *rep);
    if (k == 1) {
        ssize_t n = recv(fd, rep->b, sizeof rep->b, 0);
        rep->seq = atomic_fetch_add(&seq, 1) + 1;
        rep->len = n > 0 ? (size_t)n : 0;
    }
    close(fd);
    return k == 1 ? 0 : -ETIMEDOUT;
}

static struct reply ask(const struct fx *f, const char *name, uint16_t qtype) {
    static uint16_t id = 100;
    uint8_t qb[512];
    size_t ql;
    char low[LZ_HOSTNAME_MAX + 1];
    size_t nl = strlen(name);
    assert_true(nl < sizeof low);
    for (size_t i = 0; i <= nl; i++)
        low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
    id++;
    assert_int_equal(lz_dns_build_query(id, low, qtype, qb, sizeof qb, &ql), 0);
    /* The client's own case on the wire (DNS 0x20): label bytes sit one
     * past their place in the dotted text. */
    for (size_t i = 0; i < nl; i++)
        if (name[i] != '.')
            qb[LZ_DNS_HDR + 1 + i] = (uint8_t)name[i];
    struct reply rep;
    if (ask_raw(f, qb, ql, &rep, 3000) < 0)
        fail_msg("no answer for %s", name);
    parse_reply(&rep, id, low, qtype);
    if (rep.len > LZ_DNS_HDR + nl)
        assert_memory_equal(rep.b + LZ_DNS_HDR + 1, qb + LZ_DNS_HDR + 1, nl); /* echoed as sent */
    return rep;
}

static size_t events(struct fx *f, struct lz_resolver_event *ev, size_t cap) {
    return lz_resolver_events(f->r, ev, cap, NULL);
}

static size_t count_kind(const struct lz_resolver_event *ev, size_t n, enum lz_resolver_event_kind k) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ev[i].kind == k;
    return c;
}

static void stop(struct fx *f) {
    lz_resolver_stop(f->r);
    f->r = NULL;
    if (f->gate >= 0)
        close(f->gate);
    f->gate = -1;
}

/* ---- the cases ---- */

static void test_unlisted_refused_never_forwarded(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test:443" } });
    up_set(&(struct entry){ .name = "evil.example.test", .addrs = { IP(203, 0, 113, 5) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "api.example.test", .addrs = { IP(198, 51, 100, 7) }, .n = 1, .ttl = 5 });
    unsigned before = up_count();
    struct reply rep = ask(&f, "evil.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_REFUSED);
    assert_true(rep.parsed); /* the question is echoed */
    assert_int_equal(up_count(), before);
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_REFUSED), 1);
    assert_string_equal(ev[0].name, "evil.example.test");
    assert_int_equal(rt_count(true), 0);
    /* Control: the allowed name is forwarded (the counter moves). */
    rep = ask(&f, "api.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(up_count(), before + 1);
    stop(&f);
}

static void test_allowed_route_before_answer(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test:443" } });
    struct reply rep = ask(&f, "API.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_true(rep.parsed);
    assert_int_equal(rep.a.n, 1);
    assert_int_equal(rep.a.rr[0].addr, IP(198, 51, 100, 7));
    assert_int_equal(rep.a.rr[0].ttl, 60); /* upstream said 5: clamped */
    unsigned long add = rt_find(true, IP(198, 51, 100, 7), 443);
    assert_true(add != 0);
    assert_true(add < rep.seq);
    assert_int_equal(rt_count(true), 1); /* on the allowed port only */
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LEARNED), 1);
    assert_int_equal(ev[0].lifetime, 60);
    assert_int_equal(ev[0].ports.n, 1);
    assert_int_equal(ev[0].ports.ports[0], 443);
    /* A refresh with the same address adds nothing and sends no LEARNED. */
    rep = ask(&f, "api.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rt_count(true), 1);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LEARNED), 0);
    stop(&f);

    /* Control: when the route cannot be added, the address is not answered. */
    start(&f, &(struct opts){ .allow = { "api.example.test:443" } });
    atomic_store(&rt.fail_add, 1);
    rep = ask(&f, "api.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_SERVFAIL);
    assert_int_equal(rep.a.n, 0);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_FAILED), 1);
    stop(&f);
}

static void test_ports_union(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "a.example.test:443", "b.example.test:8443", "c.example.test:22" } });
    up_set(&(struct entry){ .name = "a.example.test", .addrs = { IP(198, 51, 100, 20) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "b.example.test", .addrs = { IP(198, 51, 100, 20) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "c.example.test", .addrs = { IP(198, 51, 100, 21) }, .n = 1, .ttl = 300 });
    assert_int_equal(ask(&f, "a.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(ask(&f, "b.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_true(rt_find(true, IP(198, 51, 100, 20), 443) != 0);
    assert_true(rt_find(true, IP(198, 51, 100, 20), 8443) != 0);
    /* Control: an address of another name gets only that name's port. */
    assert_int_equal(ask(&f, "c.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_true(rt_find(true, IP(198, 51, 100, 21), 22) != 0);
    assert_int_equal(rt_find(true, IP(198, 51, 100, 21), 443), 0);
    assert_int_equal(rt_find(true, IP(198, 51, 100, 20), 22), 0);
    assert_int_equal(rt_count(true), 3);
    char *rep = lz_resolver_report(f.r);
    assert_non_null(strstr(rep, "tcp/443,tcp/8443"));
    free(rep);
    stop(&f);
}

static void test_qtypes(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test" } });
    unsigned before = up_count();
    struct reply rep = ask(&f, "api.example.test", LZ_DNS_T_AAAA);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_true(rep.parsed);
    assert_int_equal(rep.a.n, 0);
    rep = ask(&f, "api.example.test", LZ_DNS_T_HTTPS);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rep.a.n, 0);
    rep = ask(&f, "api.example.test", LZ_DNS_T_TXT);
    assert_int_equal(rep.rcode, LZ_DNS_REFUSED);
    assert_int_equal(up_count(), before);
    /* Control: A is forwarded. */
    rep = ask(&f, "api.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rep.a.n, 1);
    assert_int_equal(up_count(), before + 1);
    stop(&f);
}

static void test_rebinding_filtered(void **state) {
    (void)state;
    const struct {
        const char *name;
        uint32_t addr;
    } bad[] = { { "lo.example.test", IP(127, 0, 0, 1) },
                { "slirp.example.test", IP(10, 0, 2, 3) },
                { "meta.example.test", IP(169, 254, 169, 254) },
                { "host.example.test", HOST_ADDR } };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        up_set(&(struct entry){ .name = bad[i].name, .addrs = { bad[i].addr }, .n = 1, .ttl = 300 });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "*.example.test" } });
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        struct reply rep = ask(&f, bad[i].name, LZ_DNS_T_A);
        assert_int_equal(rep.rcode, LZ_DNS_SERVFAIL);
        struct lz_resolver_event ev[16];
        size_t n = events(&f, ev, 16);
        assert_int_equal(count_kind(ev, n, LZ_RES_FILTERED), 1);
        assert_int_equal(ev[0].n_addrs, 1);
        assert_int_equal(ev[0].addrs[0], bad[i].addr);
    }
    assert_int_equal(rt_count(true), 0);
    stop(&f);
    /* Control: without the host's address given, that answer passes. */
    start(&f, &(struct opts){ .allow = { "*.example.test" }, .no_host = true });
    assert_int_equal(ask(&f, "host.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_true(rt_find(true, HOST_ADDR, 0) != 0);
    stop(&f);
}

static void test_cname_chain(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "cdn.example.test",
                            .cname = "edge.cdn-provider.test",
                            .addrs = { IP(198, 51, 100, 30) },
                            .n = 1,
                            .ttl = 120,
                            .inject = IP(198, 51, 100, 31) });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "cdn.example.test:443" } });
    struct reply rep = ask(&f, "cdn.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_true(rep.parsed);
    assert_int_equal(rep.a.n, 2); /* the CNAME and the target's A */
    assert_int_equal(rep.a.rr[0].type, LZ_DNS_T_CNAME);
    assert_int_equal(rep.a.rr[1].addr, IP(198, 51, 100, 30));
    assert_int_equal(rep.a.rr[1].ttl, 120);
    assert_true(rt_find(true, IP(198, 51, 100, 30), 443) != 0);
    assert_int_equal(rt_find(true, IP(198, 51, 100, 31), 443), 0); /* the injected one */
    assert_int_equal(rt_count(true), 1);
    stop(&f);
}

static void test_tc_retry_over_tcp(void **state) {
    (void)state;
    up_set(&(struct entry){
        .name = "tc.example.test", .addrs = { IP(198, 51, 100, 40) }, .n = 1, .ttl = 300, .mode = UP_TC });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "tc.example.test" } });
    unsigned tcp_before = atomic_load(&up.tcp_q);
    struct reply rep = ask(&f, "tc.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rep.a.n, 1);
    assert_int_equal(rep.a.rr[0].addr, IP(198, 51, 100, 40));
    assert_int_equal(atomic_load(&up.tcp_q), tcp_before + 1);
    assert_true(rt_find(true, IP(198, 51, 100, 40), 0) != 0); /* every port: the rule names none */
    stop(&f);
}

static void test_upstream_silent(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "silent.example.test", .mode = UP_SILENT });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "silent.example.test" }, .upstream_ms = 300 });
    long t0 = lz_now_ms();
    struct reply rep = ask(&f, "silent.example.test", LZ_DNS_T_A);
    long dt = lz_now_ms() - t0;
    assert_int_equal(rep.rcode, LZ_DNS_SERVFAIL);
    assert_true(dt >= 290); /* it waited for its budget ... */
    assert_true(dt < 1500); /* ... and not much longer */
    stop(&f);
}

/* The host names no IPv4 resolver (upstream port 0): an allowed name fails
 * at once, nothing is sent anywhere, the event says why; a refused name is
 * still refused. */
static void test_no_upstream(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "api.example.test", .addrs = { IP(198, 51, 100, 7) }, .n = 1, .ttl = 60 });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test:443" }, .no_upstream = true });
    unsigned before = up_count();
    struct reply rep = ask(&f, "api.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_SERVFAIL);
    assert_int_equal(up_count(), before);
    assert_int_equal(rt_count(true), 0);
    rep = ask(&f, "evil.example.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_REFUSED);
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_FAILED), 1);
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == LZ_RES_FAILED)
            assert_non_null(strstr(ev[i].why, "no upstream resolver"));
    char *t = lz_resolver_report(f.r);
    assert_non_null(strstr(t, "upstream none"));
    free(t);
    stop(&f);
}

static void test_rate_limit(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test" }, .qps = 5 });
    unsigned ok = 0, refused = 0;
    for (int i = 0; i < 16; i++) {
        struct reply rep = ask(&f, "api.example.test", LZ_DNS_T_AAAA);
        ok += rep.rcode == LZ_DNS_NOERROR;
        refused += rep.rcode == LZ_DNS_REFUSED;
    }
    /* Burst 10 (2 x qps), plus what refills while the 16 run. */
    assert_true(ok >= 10 && ok <= 12);
    assert_int_equal(ok + refused, 16);
    struct lz_resolver_event ev[32];
    size_t n = events(&f, ev, 32);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1); /* once a second */
    char *rep = lz_resolver_report(f.r);
    char want[64];
    snprintf(want, sizeof want, "queries limited %u times", refused);
    assert_non_null(strstr(rep, want));
    free(rep);
    stop(&f);
    /* Control: the default rate answers all 16. */
    start(&f, &(struct opts){ .allow = { "api.example.test" } });
    for (int i = 0; i < 16; i++)
        assert_int_equal(ask(&f, "api.example.test", LZ_DNS_T_AAAA).rcode, LZ_DNS_NOERROR);
    stop(&f);
}

static void test_address_bound(void **state) {
    (void)state;
    char names[9][32];
    for (int i = 0; i < 9; i++) {
        snprintf(names[i], sizeof names[i], "n%d.bound.test", i);
        up_set(&(struct entry){ .name = names[i], .addrs = { IP(203, 0, 113, 10 + i) }, .n = 1, .ttl = 300 });
    }
    struct fx f;
    start(&f, &(struct opts){ .allow = { "*.bound.test" }, .max_addrs = 8 });
    for (int i = 0; i < 8; i++)
        assert_int_equal(ask(&f, names[i], LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    (void)events(&f, (struct lz_resolver_event[16]){ 0 }, 16);
    struct reply rep = ask(&f, names[8], LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_SERVFAIL);
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1);
    assert_non_null(strstr(ev[0].why, "learned addresses"));
    assert_int_equal(rt_find(true, IP(203, 0, 113, 18), 0), 0);
    /* A name already learned still refreshes (no new address needed). */
    assert_int_equal(ask(&f, names[0], LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    char *r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "addresses 8/8"));
    free(r);
    stop(&f);
}

static bool wait_for(bool (*cond)(void), int ms) {
    long end = lz_now_ms() + ms;
    while (lz_now_ms() < end) {
        if (cond())
            return true;
        usleep(10000);
    }
    return cond();
}

static bool deleted(void) { return rt_find(false, IP(198, 51, 100, 50), 443) != 0; }

static void test_expiry_and_zombies(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "exp.example.test", .addrs = { IP(198, 51, 100, 50) }, .n = 1, .ttl = 300 });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "exp.example.test:443" }, .test_lifetime_ms = 150 });
    assert_int_equal(ask(&f, "exp.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_false(deleted());
    assert_true(wait_for(deleted, 1500));
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_EXPIRED), 1);
    stop(&f);

    /* Control: a connection open keeps the route past the deadline, until it closes. */
    start(&f, &(struct opts){ .allow = { "exp.example.test:443" }, .test_lifetime_ms = 150 });
    atomic_store(&rt.in_use, 1);
    assert_int_equal(ask(&f, "exp.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    usleep(500000);
    assert_false(deleted());
    char *r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "past expiry (open connection)"));
    free(r);
    atomic_store(&rt.in_use, -1); /* cannot tell: kept too */
    usleep(350000);
    assert_false(deleted());
    atomic_store(&rt.in_use, 0);
    assert_true(wait_for(deleted, 1500));
    r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "learned: none"));
    free(r);
    stop(&f);

    /* A route the kernel would not delete is not forgotten: FAILED, the
     * address stays, and the delete is tried again until it succeeds. */
    start(&f, &(struct opts){ .allow = { "exp.example.test:443" }, .test_lifetime_ms = 150 });
    atomic_store(&rt.fail_del, 1);
    assert_int_equal(ask(&f, "exp.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    usleep(500000);
    n = events(&f, ev, 16);
    assert_true(count_kind(ev, n, LZ_RES_FAILED) >= 2);
    assert_int_equal(count_kind(ev, n, LZ_RES_EXPIRED), 0);
    r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "198.51.100.50  tcp/443"));
    free(r);
    atomic_store(&rt.fail_del, 0);
    assert_true(wait_for(deleted, 1500));
    r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "learned: none"));
    free(r);
    stop(&f);
}

static void test_allow_at_run_time(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "late.example.test", .addrs = { IP(198, 51, 100, 60) }, .n = 1, .ttl = 300 });
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test" } });
    assert_int_equal(ask(&f, "late.example.test", LZ_DNS_T_A).rcode, LZ_DNS_REFUSED);
    struct lz_hostrule rule;
    assert_int_equal(lz_hostrule_parse("late.example.test:443", 0, &rule, NULL), 0);
    assert_int_equal(lz_resolver_allow(f.r, &rule, NULL), 0);
    assert_int_equal(ask(&f, "late.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_true(rt_find(true, IP(198, 51, 100, 60), 443) != 0);
    char *r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "allowed at run time: late.example.test:443"));
    free(r);
    stop(&f);
}

/* The gate's question over the real channel: the verdict, and why. */
static int gate_ask(struct fx *f, uint32_t addr, const char *sni, uint8_t flags, char *why) {
    static uint32_t id = 7;
    struct lz_gate_req q = { .id = ++id, .addr = addr, .port = 443, .flags = flags };
    if (sni) {
        q.flags |= LZ_GATE_SNI;
        snprintf(q.sni, sizeof q.sni, "%s", sni);
    }
    assert_int_equal(send(f->gate, &q, sizeof q, 0), (ssize_t)sizeof q);
    struct lz_gate_rep a;
    assert_int_equal(recv(f->gate, &a, sizeof a, 0), (ssize_t)sizeof a);
    assert_int_equal(a.id, q.id);
    if (why)
        snprintf(why, 120, "%s", a.why);
    return a.verdict;
}

static void test_gate_decisions(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "ga.example.test", .addrs = { IP(198, 51, 100, 80) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "gb.example.test", .addrs = { IP(198, 51, 100, 81) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "gsame.example.test", .addrs = { IP(198, 51, 100, 80) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "gany.example.test", .addrs = { IP(198, 51, 100, 82) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "gp.example.test", .addrs = { IP(198, 51, 100, 83) }, .n = 1, .ttl = 300 });
    struct fx f;
    start(&f,
          &(struct opts){ .allow = { "ga.example.test:443", "gb.example.test:443", "gsame.example.test:443",
                                     "gany.example.test", "*.wild.example.test:443", "gp.example.test:8443" },
                          .deny = { "no.wild.example.test" },
                          .gate = true });
    char why[120];
    /* Before any lookup: nothing is learned. */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "ga.example.test", 0, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "is not a learned address"));
    assert_int_equal(ask(&f, "ga.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(ask(&f, "gb.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    /* The positive control. */
    int v0 = gate_ask(&f, IP(198, 51, 100, 80), "ga.example.test", 0, why);
    if (v0 != LZ_GATE_ALLOW)
        fail_msg("positive control refused: %s", why);
    /* Fronting: an allowed name, another learned address. */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "gb.example.test", 0, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "was not learned for the server name gb.example.test"));
    /* An allowed name that shares the address but was never asked for. */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "gsame.example.test", 0, why), LZ_GATE_REFUSE);
    /* Unlisted and denied names. */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "evil.test", 0, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "not allowed on port 443"));
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "no.wild.example.test", 0, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "denied"));
    /* No name, an encrypted hello: refused (strict). */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), NULL, 0, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "no SNI"));
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "ga.example.test", LZ_GATE_ECH, why), LZ_GATE_REFUSE);
    assert_non_null(strstr(why, "ECH"));
    /* A name the gate did not canonicalise (the resolver parses it again). */
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "a..example.test", 0, why), LZ_GATE_REFUSE);
    /* A name allowed on every port: its address gets the gate's port too. */
    assert_int_equal(ask(&f, "gany.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_true(rt_find(true, IP(198, 51, 100, 82), 0) != 0);
    assert_true(rt_find(true, IP(198, 51, 100, 82), 443) != 0);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 82), "gany.example.test", 0, why), LZ_GATE_ALLOW);
    /* A name learned on another port only: not on 443. */
    assert_int_equal(ask(&f, "gp.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 83), "gp.example.test", 0, why), LZ_GATE_REFUSE);
    /* Every refusal is an event, with the address and the reason. */
    struct lz_resolver_event ev[32];
    size_t n = events(&f, ev, 32);
    assert_int_equal(count_kind(ev, n, LZ_RES_TLS_REFUSED),
                     8); /* the name with no host form is refused before the policy: no event */
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == LZ_RES_TLS_REFUSED) {
            assert_int_equal(ev[i].n_addrs, 1);
            assert_true(ev[i].why[0] != '\0');
        }
    /* A malformed request closes the channel (the gate then ends). */
    char junk[3] = "xyz";
    assert_int_equal(send(f.gate, junk, sizeof junk, 0), 3);
    char b[8];
    assert_int_equal(recv(f.gate, b, sizeof b, 0), 0);
    n = events(&f, ev, 32);
    assert_int_equal(count_kind(ev, n, LZ_RES_FAILED), 1);
    stop(&f);

    /* Lenient: a nameless or encrypted hello passes to a learned address,
     * never to another; a named one is still checked. */
    start(&f,
          &(struct opts){ .allow = { "ga.example.test:443", "gb.example.test:443" }, .gate = true, .lenient = true });
    assert_int_equal(ask(&f, "ga.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), NULL, 0, why), LZ_GATE_ALLOW);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "x.example.test", LZ_GATE_ECH, why), LZ_GATE_ALLOW);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 81), NULL, 0, why), LZ_GATE_REFUSE);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "gb.example.test", 0, why), LZ_GATE_REFUSE);
    /* A name allowed at run time, once learned, passes. */
    struct lz_hostrule rule;
    assert_int_equal(lz_hostrule_parse("gsame.example.test:443", 0, &rule, NULL), 0);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "gsame.example.test", 0, why), LZ_GATE_REFUSE);
    assert_int_equal(lz_resolver_allow(f.r, &rule, NULL), 0);
    assert_int_equal(ask(&f, "gsame.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(gate_ask(&f, IP(198, 51, 100, 80), "gsame.example.test", 0, why), LZ_GATE_ALLOW);
    stop(&f);
}

static int tcp_connect(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = { .tv_sec = 3 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* One framed message from fd, 0 at EOF. */
static size_t tcp_read_msg(int fd, uint8_t *buf, size_t cap) {
    uint8_t hdr[2];
    if (lz_read_full(fd, hdr, 2) != 2)
        return 0;
    size_t len = (size_t)hdr[0] << 8 | hdr[1];
    assert_true(len <= cap);
    assert_int_equal(lz_read_full(fd, buf, len), (ssize_t)len);
    return len;
}

static void test_tcp_client(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test:443" } });
    int fd = tcp_connect(f.tcp_port);
    /* Two queries in one write (pipelined): an A and a refused one. */
    uint8_t out[1024], q[512];
    size_t ql, o = 0, fl;
    assert_int_equal(lz_dns_build_query(7, "api.example.test", LZ_DNS_T_A, q, sizeof q, &ql), 0);
    assert_int_equal(lz_dns_tcp_frame(q, ql, out, sizeof out, &fl), 0);
    o += fl;
    assert_int_equal(lz_dns_build_query(8, "nope.example.test", LZ_DNS_T_A, q, sizeof q, &ql), 0);
    assert_int_equal(lz_dns_tcp_frame(q, ql, out + o, sizeof out - o, &fl), 0);
    o += fl;
    assert_int_equal(lz_write_full(fd, out, o), 0);
    struct reply a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    /* The refused one is answered at once, the forwarded one after. */
    b.len = tcp_read_msg(fd, b.b, sizeof b.b);
    a.len = tcp_read_msg(fd, a.b, sizeof a.b);
    parse_reply(&a, 7, "api.example.test", LZ_DNS_T_A);
    parse_reply(&b, 8, "nope.example.test", LZ_DNS_T_A);
    assert_int_equal(b.rcode, LZ_DNS_REFUSED);
    assert_true(b.parsed);
    assert_int_equal(a.rcode, LZ_DNS_NOERROR);
    assert_true(a.parsed);
    assert_int_equal(a.a.n, 1);
    assert_int_equal(a.a.rr[0].addr, IP(198, 51, 100, 7));
    /* A frame shorter than a header: the connection is closed. */
    const uint8_t bad[] = { 0, 3, 1, 2, 3 };
    assert_int_equal(lz_write_full(fd, bad, sizeof bad), 0);
    uint8_t x;
    assert_int_equal(recv(fd, &x, 1, 0), 0);
    close(fd);
    stop(&f);
}

static void test_other_bounds(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "m1.bound2.test", .addrs = { IP(203, 0, 113, 31) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "m2.bound2.test", .addrs = { IP(203, 0, 113, 32) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "m3.bound2.test", .addrs = { IP(203, 0, 113, 33) }, .n = 1, .ttl = 300 });
    up_set(&(struct entry){ .name = "many.bound2.test",
                            .addrs = { IP(203, 0, 113, 41), IP(203, 0, 113, 42), IP(203, 0, 113, 43) },
                            .n = 3,
                            .ttl = 300 });
    up_set(&(struct entry){ .name = "slow.bound2.test", .mode = UP_SILENT });
    struct lz_resolver_event ev[16];
    size_t n;

    /* Names: the third name of two allowed gets SERVFAIL; a known one refreshes. */
    struct fx f;
    start(&f, &(struct opts){ .allow = { "*.bound2.test" }, .max_names = 2 });
    assert_int_equal(ask(&f, "m1.bound2.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    assert_int_equal(ask(&f, "m2.bound2.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    (void)events(&f, ev, 16);
    assert_int_equal(ask(&f, "m3.bound2.test", LZ_DNS_T_A).rcode, LZ_DNS_SERVFAIL);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1);
    assert_non_null(strstr(ev[0].why, "learned names"));
    assert_int_equal(rt_find(true, IP(203, 0, 113, 33), 0), 0);
    assert_int_equal(ask(&f, "m1.bound2.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    stop(&f);

    /* Addresses per name: the rest of the answer is dropped, from the
     * answer and the routes alike. Control: the default keeps all three. */
    start(&f, &(struct opts){ .allow = { "*.bound2.test" }, .max_per_name = 2 });
    struct reply rep = ask(&f, "many.bound2.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rep.a.n, 2);
    assert_int_equal(rt_count(true), 2);
    assert_int_equal(rt_find(true, IP(203, 0, 113, 43), 0), 0);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1);
    stop(&f);
    start(&f, &(struct opts){ .allow = { "*.bound2.test" } });
    rep = ask(&f, "many.bound2.test", LZ_DNS_T_A);
    assert_int_equal(rep.a.n, 3);
    assert_int_equal(rt_count(true), 3);
    stop(&f);

    /* Upstream queries in flight: with one slot held by a silent upstream,
     * the next query gets SERVFAIL at once. */
    start(&f, &(struct opts){ .allow = { "*.bound2.test" }, .max_inflight = 1, .upstream_ms = 1000 });
    uint8_t q[512];
    size_t ql;
    assert_int_equal(lz_dns_build_query(9, "slow.bound2.test", LZ_DNS_T_A, q, sizeof q, &ql), 0);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(f.udp_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(sendto(fd, q, ql, 0, (struct sockaddr *)&a, sizeof a), (ssize_t)ql);
    usleep(50000);
    long t0 = lz_now_ms();
    assert_int_equal(ask(&f, "m1.bound2.test", LZ_DNS_T_A).rcode, LZ_DNS_SERVFAIL);
    assert_true(lz_now_ms() - t0 < 500);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1);
    assert_non_null(strstr(ev[0].why, "in flight"));
    close(fd);
    stop(&f);

    /* TCP clients: the second connection of one allowed is closed at once;
     * the first still answers. */
    start(&f, &(struct opts){ .allow = { "*.bound2.test" }, .max_tcp_clients = 1 });
    int c1 = tcp_connect(f.tcp_port);
    usleep(50000);
    int c2 = tcp_connect(f.tcp_port);
    uint8_t x;
    assert_int_equal(recv(c2, &x, 1, 0), 0);
    uint8_t out[600];
    size_t fl;
    assert_int_equal(lz_dns_build_query(10, "m1.bound2.test", LZ_DNS_T_AAAA, q, sizeof q, &ql), 0);
    assert_int_equal(lz_dns_tcp_frame(q, ql, out, sizeof out, &fl), 0);
    assert_int_equal(lz_write_full(c1, out, fl), 0);
    struct reply r1;
    memset(&r1, 0, sizeof r1);
    r1.len = tcp_read_msg(c1, r1.b, sizeof r1.b);
    parse_reply(&r1, 10, "m1.bound2.test", LZ_DNS_T_AAAA);
    assert_int_equal(r1.rcode, LZ_DNS_NOERROR);
    n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_LIMITED), 1);
    assert_non_null(strstr(ev[0].why, "TCP clients"));
    close(c1);
    close(c2);
    stop(&f);
}

static void test_garbage(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test" } });
    uint8_t q[512];
    size_t ql;
    assert_int_equal(lz_dns_build_query(0x4242, "api.example.test", LZ_DNS_T_A, q, sizeof q, &ql), 0);
    unsigned formerr = 0, silent = 0;
    /* Every truncation of a good query. */
    for (size_t len = 0; len < ql; len++) {
        struct reply rep;
        if (ask_raw(&f, q, len, &rep, 200) < 0)
            fail_msg("no FORMERR for a query cut at %zu bytes", len);
        assert_true(rep.len >= 4);
        assert_int_equal(rep.b[3] & 15, LZ_DNS_FORMERR);
        formerr++;
    }
    assert_int_equal(formerr, ql);
    /* Random bytes (QR cleared but in one of ten, so most reach the
     * parser's later checks); FORMERR, NOTIMP or REFUSED, or nothing for a
     * message that says it is a response. */
    srandom(23);
    for (int i = 0; i < 150; i++) {
        uint8_t g[300];
        size_t len = (size_t)(random() % (long)sizeof g);
        for (size_t j = 0; j < len; j++)
            g[j] = (uint8_t)random();
        if (len > 2 && i % 10 != 0)
            g[2] &= 0x7f;
        struct reply rep;
        if (ask_raw(&f, g, len, &rep, 50) < 0) {
            assert_true(len > 2 && (g[2] & 0x80)); /* only a response goes unanswered */
            silent++;
            continue;
        }
        unsigned rc = rep.len >= 4 ? rep.b[3] & 15 : 99;
        assert_true(rc == LZ_DNS_FORMERR || rc == LZ_DNS_NOTIMP || rc == LZ_DNS_REFUSED);
    }
    assert_true(silent > 0 && silent < 30);
    /* Control: the engine still answers the whole query. */
    struct reply rep;
    assert_int_equal(ask_raw(&f, q, ql, &rep, 3000), 0);
    assert_int_equal(rep.b[3] & 15, LZ_DNS_NOERROR);
    stop(&f);
}

static void test_open_preset(void **state) {
    (void)state;
    up_set(&(struct entry){ .name = "any.open.test", .addrs = { IP(203, 0, 113, 70) }, .n = 1, .ttl = 300 });
    struct fx f;
    start(&f, &(struct opts){ .any_name = true, .deny = { "bad.open.test" } });
    struct reply rep = ask(&f, "any.open.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_NOERROR);
    assert_int_equal(rep.a.n, 1);
    assert_int_equal(rt_count(true), 0); /* no routes with every name allowed */
    unsigned before = up_count();
    rep = ask(&f, "bad.open.test", LZ_DNS_T_A);
    assert_int_equal(rep.rcode, LZ_DNS_REFUSED);
    assert_int_equal(up_count(), before);
    struct lz_resolver_event ev[16];
    size_t n = events(&f, ev, 16);
    assert_int_equal(count_kind(ev, n, LZ_RES_DENIED), 1);
    assert_int_equal(count_kind(ev, n, LZ_RES_LEARNED), 0);
    stop(&f);
}

static void test_report(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "api.example.test:443" }, .deny = { "evil.example.test" } });
    assert_int_equal(ask(&f, "api.example.test", LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ask(&f, "other.test", LZ_DNS_T_A).rcode, LZ_DNS_REFUSED);
    assert_int_equal(ask(&f, "evil.example.test", LZ_DNS_T_A).rcode, LZ_DNS_REFUSED);
    char *r = lz_resolver_report(f.r);
    assert_non_null(strstr(r, "policy: locked; 1 allow rule, 1 deny rule; upstream 127.0.0.1:"));
    assert_non_null(strstr(r, "  api.example.test  198.51.100.7  tcp/443  expires in 60 s\n"));
    const char *ev = strstr(r, "  evil.example.test  denied  1 query, last");
    const char *ot = strstr(r, "  other.test  unlisted  3 queries, last");
    assert_non_null(ev);
    assert_non_null(ot);
    assert_true(ev < ot); /* most recent first */
    assert_non_null(strstr(r, "bounds: names 1/1024, addresses 1/1024, queries limited 0 times\n"));
    free(r);
    stop(&f);
}

static void test_report_bound(void **state) {
    (void)state;
    struct fx f;
    start(&f, &(struct opts){ .allow = { "*.gen.test" }, .qps = 100000 });
    char name[80];
    for (int i = 0; i < 800; i++) {
        snprintf(name, sizeof name, "%.50s-%d.gen.test", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", i);
        assert_int_equal(ask(&f, name, LZ_DNS_T_A).rcode, LZ_DNS_NOERROR);
    }
    char *r = lz_resolver_report(f.r);
    size_t len = strlen(r);
    assert_true(len <= 64 * 1024);
    assert_true(len > 60 * 1024); /* control: 800 lines do not fit */
    const char *tail = "\n... (cut at 64 KiB)\n";
    assert_string_equal(r + len - strlen(tail), tail);
    /* Whole lines before the marker. */
    const char *last = r + len - strlen(tail);
    while (last > r && last[-1] != '\n')
        last--;
    assert_non_null(strstr(last, "expires in 5 min"));
    free(r);
    stop(&f);
}

static void resolv(const char *text, int want, uint32_t want_addr) {
    char path[] = "/tmp/lz-resolv-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, text, strlen(text)), 0);
    close(fd);
    struct sockaddr_in a = { 0 };
    struct lz_error err = { 0 };
    int k = lz_resolver_upstream_from_resolv_conf(path, &a, &err);
    unlink(path);
    if (k != want)
        fail_msg("resolv.conf \"%s\": %d (%s), want %d", text, k, err.msg, want);
    if (want == 0) {
        assert_int_equal(ntohl(a.sin_addr.s_addr), want_addr);
        assert_int_equal(ntohs(a.sin_port), 53);
    } else {
        assert_non_null(strstr(err.msg, "[network] resolver"));
    }
}

static void test_resolv_conf(void **state) {
    (void)state;
    resolv("nameserver 192.0.2.53\n", 0, IP(192, 0, 2, 53));
    resolv("# nameserver 192.0.2.1\nsearch x\nnameserver ::1\nnameserver fe80::1%eth0\n"
           "  nameserver\t192.0.2.54  # the host's\nnameserver 192.0.2.55\n",
           0, IP(192, 0, 2, 54));
    resolv("nameserver 192.0.2.56", 0, IP(192, 0, 2, 56)); /* no final newline */
    resolv("nameserver ::1\n", -ENOENT, 0);
    resolv("", -ENOENT, 0);
    resolv("nameserver 1\nnameserver 010.1.1.1\nnameserver 192.0.2.1 extra\nnameservers 192.0.2.2\n", -ENOENT, 0);
    /* A line past the bound is skipped, whatever it holds. */
    char big[2100];
    memset(big, ' ', sizeof big);
    memcpy(big, "nameserver 192.0.2.9", 20);
    big[sizeof big - 1] = '\0';
    resolv(big, -ENOENT, 0);
    struct sockaddr_in a;
    assert_int_equal(lz_resolver_upstream_from_resolv_conf("/nonexistent/resolv.conf", &a, NULL), -ENOENT);
}

/* ---- fixture ---- */

static int group_setup(void **state) {
    (void)state;
    up.stop = eventfd(0, EFD_CLOEXEC);
    for (int i = 0; i < 20; i++) {
        up.udp = bind_lo(SOCK_DGRAM, 0);
        up.port = bound_port(up.udp);
        up.tcp = bind_lo(SOCK_STREAM, up.port);
        if (up.tcp >= 0)
            break;
        close(up.udp);
    }
    if (up.tcp < 0)
        return -1;
    up_set(&(struct entry){ .name = "api.example.test", .addrs = { IP(198, 51, 100, 7) }, .n = 1, .ttl = 5 });
    return pthread_create(&up.t, NULL, up_main, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    uint64_t one = 1;
    (void)!write(up.stop, &one, sizeof one);
    pthread_join(up.t, NULL);
    close(up.udp);
    close(up.tcp);
    close(up.stop);
    for (size_t i = 0; i < up.n; i++) {
        free((char *)up.e[i].name);
        free((char *)up.e[i].cname);
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlisted_refused_never_forwarded),
        cmocka_unit_test(test_allowed_route_before_answer),
        cmocka_unit_test(test_ports_union),
        cmocka_unit_test(test_qtypes),
        cmocka_unit_test(test_rebinding_filtered),
        cmocka_unit_test(test_cname_chain),
        cmocka_unit_test(test_tc_retry_over_tcp),
        cmocka_unit_test(test_upstream_silent),
        cmocka_unit_test(test_no_upstream),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_address_bound),
        cmocka_unit_test(test_expiry_and_zombies),
        cmocka_unit_test(test_allow_at_run_time),
        cmocka_unit_test(test_tcp_client),
        cmocka_unit_test(test_other_bounds),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_open_preset),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_report_bound),
        cmocka_unit_test(test_resolv_conf),
        cmocka_unit_test(test_gate_decisions),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
