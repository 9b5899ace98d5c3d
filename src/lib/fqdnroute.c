/* fqdnroute.c — see fqdnroute.h. */
#include "fqdnroute.h"
#include "netpolicy.h" /* LZ_NET_TAP, LZ_NET_GW */

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/fib_rules.h>
#include <linux/inet_diag.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

/* Every receive is bounded: a kernel that does not answer within this is
 * an error, never a hang of the resolver's thread. */
#define FQDN_RECV_TIMEOUT_MS 2000
/* The most datagrams one dump may take (each holds many entries). */
#define FQDN_DUMP_MAX_RECV 65536
/* The most entries open() collects to flush (rules: one per port; routes:
 * the resolver's bound on learned addresses times their ports, with room). */
#define FQDN_FLUSH_MAX 262144
/* One datagram of an answer (the kernel fills at most a page-sized skb per
 * dump step, more with large pages). */
#define FQDN_BUF 32768

struct lz_fqdnroute {
    struct mnl_socket *rt, *diag;
    uint32_t rt_portid, diag_portid;
    unsigned seq;
    unsigned tap;
    unsigned lo;                   /* the loopback's index, for the gate's local routes */
    uint16_t gate_port;            /* 0: none; else this port's routes deliver to the TLS gate */
    uint8_t rule_known[65536 / 8]; /* ports whose rule this holder added (or found) */
};

static bool rule_known(const struct lz_fqdnroute *fr, uint16_t p) { return fr->rule_known[p / 8] & (1u << (p % 8)); }
static void rule_set_known(struct lz_fqdnroute *fr, uint16_t p) { fr->rule_known[p / 8] |= (uint8_t)(1u << (p % 8)); }

static void fmt_addr(uint32_t a, char b[16]) {
    snprintf(b, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* Sends one request and waits for its acknowledgement (or error): 0 or
 * -errno. Answers to an earlier request (after a time-out) are skipped by
 * their sequence number. */
static int nl_talk(struct mnl_socket *s, uint32_t portid, unsigned *seq, struct nlmsghdr *h) {
    char buf[FQDN_BUF];
    h->nlmsg_seq = ++*seq;
    if (mnl_socket_sendto(s, h, h->nlmsg_len) < 0)
        return -errno;
    for (int i = 0; i < 64; i++) {
        ssize_t n = mnl_socket_recvfrom(s, buf, sizeof buf);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        const struct nlmsghdr *m = (const struct nlmsghdr *)buf;
        if (mnl_nlmsg_ok(m, (int)n) && m->nlmsg_seq != h->nlmsg_seq)
            continue; /* stale */
        int r = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, portid, NULL, NULL);
        if (r < 0)
            return -errno;
        if (r == MNL_CB_STOP || m->nlmsg_type == NLMSG_ERROR)
            return 0;
    }
    return -EPROTO;
}

/* A dump request (already built in h), every answer through cb, bounded. */
static int nl_dump(struct mnl_socket *s, uint32_t portid, unsigned *seq, struct nlmsghdr *h, mnl_cb_t cb, void *data) {
    char buf[FQDN_BUF];
    h->nlmsg_seq = ++*seq;
    if (mnl_socket_sendto(s, h, h->nlmsg_len) < 0)
        return -errno;
    for (int i = 0; i < FQDN_DUMP_MAX_RECV; i++) {
        ssize_t n = mnl_socket_recvfrom(s, buf, sizeof buf);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        const struct nlmsghdr *m = (const struct nlmsghdr *)buf;
        if (mnl_nlmsg_ok(m, (int)n) && m->nlmsg_seq != h->nlmsg_seq)
            continue; /* the rest of an earlier, abandoned exchange */
        int r = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, portid, cb, data);
        if (r < 0)
            return -errno;
        if (r == MNL_CB_STOP)
            return 0;
    }
    return -E2BIG;
}

static int wrap(int fd, struct mnl_socket **ret, uint32_t *ret_portid) {
    struct timeval tv = { .tv_sec = FQDN_RECV_TIMEOUT_MS / 1000, .tv_usec = (FQDN_RECV_TIMEOUT_MS % 1000) * 1000 };
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
        return -errno;
    struct sockaddr_nl sa;
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
        return -errno;
    if (sa.nl_family != AF_NETLINK)
        return -ENOTSOCK;
    if (sa.nl_pid == 0) {
        /* Not bound yet: let the kernel pick our port id now, so that
         * mnl_cb_run checks the answers are for us. */
        struct sockaddr_nl b = { .nl_family = AF_NETLINK };
        if (bind(fd, (struct sockaddr *)&b, sizeof b) < 0)
            return -errno;
    }
    struct mnl_socket *s = mnl_socket_fdopen(fd);
    if (!s)
        return -errno;
    *ret = s;
    *ret_portid = mnl_socket_get_portid(s);
    return 0;
}

/* ---- tap0's index ---- */

struct link_find {
    unsigned index;
};

static int link_cb(const struct nlmsghdr *h, void *data) {
    struct link_find *f = data;
    const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(h);
    const struct nlattr *a;
    mnl_attr_for_each(a, h, sizeof *ifi) {
        if (mnl_attr_get_type(a) == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
            strcmp(mnl_attr_get_str(a), LZ_NET_TAP) == 0)
            f->index = (unsigned)ifi->ifi_index;
    }
    return MNL_CB_OK;
}

static int find_tap(struct lz_fqdnroute *fr) {
    char buf[256];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_GETLINK;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof *ifi);
    ifi->ifi_family = AF_UNSPEC;
    struct link_find f = { 0 };
    int r = nl_dump(fr->rt, fr->rt_portid, &fr->seq, h, link_cb, &f);
    if (r < 0)
        return r;
    if (!f.index)
        return -ENODEV;
    fr->tap = f.index;
    return 0;
}

/* ---- what is Lazaret's: rules and routes of proto LZ_FQDN_RTPROT ---- */

struct found_route {
    uint32_t addr;
    uint32_t table;
    uint8_t len;
};

struct route_walk {
    struct found_route *v;
    size_t n, cap;
    bool overflow;
};

static int route_attr_cb(const struct nlattr *a, void *data) {
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, RTA_MAX) > 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *h, void *data) {
    struct route_walk *w = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(h);
    if (h->nlmsg_type != RTM_NEWROUTE || rtm->rtm_family != AF_INET || rtm->rtm_protocol != LZ_FQDN_RTPROT)
        return MNL_CB_OK;
    const struct nlattr *tb[RTA_MAX + 1] = { 0 };
    mnl_attr_parse(h, sizeof *rtm, route_attr_cb, tb);
    uint32_t table = rtm->rtm_table;
    if (tb[RTA_TABLE] && mnl_attr_validate(tb[RTA_TABLE], MNL_TYPE_U32) == 0)
        table = mnl_attr_get_u32(tb[RTA_TABLE]);
    uint32_t dst = 0;
    if (tb[RTA_DST] && mnl_attr_validate(tb[RTA_DST], MNL_TYPE_U32) == 0)
        dst = ntohl(mnl_attr_get_u32(tb[RTA_DST]));
    if (w->n >= FQDN_FLUSH_MAX) {
        w->overflow = true;
        return MNL_CB_OK;
    }
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->v = lz_xrealloc(w->v, w->cap * sizeof *w->v);
    }
    w->v[w->n++] = (struct found_route){ dst, table, rtm->rtm_dst_len };
    return MNL_CB_OK;
}

/* Every IPv4 route of our proto, in every table. */
static int walk_routes(struct lz_fqdnroute *fr, struct route_walk *w) {
    char buf[256];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_GETROUTE;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(h, sizeof *rtm);
    rtm->rtm_family = AF_INET;
    int r = nl_dump(fr->rt, fr->rt_portid, &fr->seq, h, route_cb, w);
    if (r == 0 && w->overflow)
        r = -E2BIG;
    return r;
}

struct found_rule {
    uint32_t table, pref;
    uint16_t dport;
    bool has_dport;
};

struct rule_walk {
    struct found_rule *v;
    size_t n, cap;
    bool overflow;
};

static int rule_attr_cb(const struct nlattr *a, void *data) {
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, FRA_MAX) > 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static int rule_cb(const struct nlmsghdr *h, void *data) {
    struct rule_walk *w = data;
    const struct fib_rule_hdr *frh = mnl_nlmsg_get_payload(h);
    if (h->nlmsg_type != RTM_NEWRULE || frh->family != AF_INET)
        return MNL_CB_OK;
    const struct nlattr *tb[FRA_MAX + 1] = { 0 };
    mnl_attr_parse(h, sizeof *frh, rule_attr_cb, tb);
    if (!tb[FRA_PROTOCOL] || mnl_attr_validate(tb[FRA_PROTOCOL], MNL_TYPE_U8) < 0 ||
        mnl_attr_get_u8(tb[FRA_PROTOCOL]) != LZ_FQDN_RTPROT)
        return MNL_CB_OK;
    struct found_rule x = { .table = frh->table };
    if (tb[FRA_TABLE] && mnl_attr_validate(tb[FRA_TABLE], MNL_TYPE_U32) == 0)
        x.table = mnl_attr_get_u32(tb[FRA_TABLE]);
    if (tb[FRA_PRIORITY] && mnl_attr_validate(tb[FRA_PRIORITY], MNL_TYPE_U32) == 0)
        x.pref = mnl_attr_get_u32(tb[FRA_PRIORITY]);
    if (tb[FRA_DPORT_RANGE] && mnl_attr_get_payload_len(tb[FRA_DPORT_RANGE]) == sizeof(struct fib_rule_port_range)) {
        struct fib_rule_port_range pr;
        memcpy(&pr, mnl_attr_get_payload(tb[FRA_DPORT_RANGE]), sizeof pr);
        x.dport = pr.start;
        x.has_dport = true;
    }
    if (w->n >= FQDN_FLUSH_MAX) {
        w->overflow = true;
        return MNL_CB_OK;
    }
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->v = lz_xrealloc(w->v, w->cap * sizeof *w->v);
    }
    w->v[w->n++] = x;
    return MNL_CB_OK;
}

static int walk_rules(struct lz_fqdnroute *fr, struct rule_walk *w) {
    char buf[256];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_GETRULE;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct fib_rule_hdr *frh = mnl_nlmsg_put_extra_header(h, sizeof *frh);
    frh->family = AF_INET;
    int r = nl_dump(fr->rt, fr->rt_portid, &fr->seq, h, rule_cb, w);
    if (r == 0 && w->overflow)
        r = -E2BIG;
    return r;
}

/* ---- single changes ---- */

static int route_msg(struct lz_fqdnroute *fr, int cmd, uint32_t addr, uint8_t len, uint32_t table) {
    /* The gate's port: the address is delivered here, to the gate's
     * listener (IP_TRANSPARENT), from the sandbox's own address (so the
     * listener's answers go back through the local table). */
    bool local = fr->gate_port && table == LZ_FQDN_TABLE0 + fr->gate_port;
    char buf[512];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = (uint16_t)cmd;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    if (cmd == RTM_NEWROUTE)
        h->nlmsg_flags |= NLM_F_CREATE | NLM_F_REPLACE;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(h, sizeof *rtm);
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = len;
    rtm->rtm_table = RT_TABLE_UNSPEC; /* past 255: RTA_TABLE */
    rtm->rtm_protocol = LZ_FQDN_RTPROT;
    if (cmd == RTM_NEWROUTE) {
        rtm->rtm_scope = local ? RT_SCOPE_HOST : RT_SCOPE_UNIVERSE;
        rtm->rtm_type = local ? RTN_LOCAL : RTN_UNICAST;
        rtm->rtm_flags = local ? 0 : RTNH_F_ONLINK;
    } else {
        rtm->rtm_scope = RT_SCOPE_NOWHERE;
    }
    mnl_attr_put_u32(h, RTA_TABLE, table);
    if (len)
        mnl_attr_put_u32(h, RTA_DST, htonl(addr));
    if (cmd == RTM_NEWROUTE && local) {
        mnl_attr_put_u32(h, RTA_PREFSRC, htonl(LZ_NET_ADDR));
        mnl_attr_put_u32(h, RTA_OIF, fr->lo);
    } else if (cmd == RTM_NEWROUTE) {
        mnl_attr_put_u32(h, RTA_GATEWAY, htonl(LZ_NET_GW));
        mnl_attr_put_u32(h, RTA_OIF, fr->tap);
    }
    return nl_talk(fr->rt, fr->rt_portid, &fr->seq, h);
}

static int rule_msg(struct lz_fqdnroute *fr, int cmd, uint32_t table, uint32_t pref, bool has_dport, uint16_t dport) {
    char buf[512];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = (uint16_t)cmd;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    /* EXCL: the kernel refuses (EEXIST) a rule identical to one it holds,
     * where without it a second copy would be added. */
    if (cmd == RTM_NEWRULE)
        h->nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
    struct fib_rule_hdr *frh = mnl_nlmsg_put_extra_header(h, sizeof *frh);
    frh->family = AF_INET;
    frh->action = FR_ACT_TO_TBL;
    frh->table = RT_TABLE_UNSPEC;
    mnl_attr_put_u32(h, FRA_TABLE, table);
    mnl_attr_put_u32(h, FRA_PRIORITY, pref);
    mnl_attr_put_u8(h, FRA_PROTOCOL, LZ_FQDN_RTPROT);
    mnl_attr_put_u8(h, FRA_IP_PROTO, IPPROTO_TCP);
    if (has_dport) {
        struct fib_rule_port_range pr = { dport, dport };
        mnl_attr_put(h, FRA_DPORT_RANGE, sizeof pr, &pr);
    }
    return nl_talk(fr->rt, fr->rt_portid, &fr->seq, h);
}

static int flush(struct lz_fqdnroute *fr, struct lz_error *err) {
    struct rule_walk rw = { 0 };
    int r = walk_rules(fr, &rw);
    for (size_t i = 0; i < rw.n && r == 0; i++) {
        r = rule_msg(fr, RTM_DELRULE, rw.v[i].table, rw.v[i].pref, rw.v[i].has_dport, rw.v[i].dport);
        if (r == -ENOENT)
            r = 0;
    }
    free(rw.v);
    if (r < 0)
        return lz_error_set(
            err, r, "cannot remove the learned-address rules left in the Domain's network namespace: %s", strerror(-r));
    struct route_walk ww = { 0 };
    r = walk_routes(fr, &ww);
    for (size_t i = 0; i < ww.n && r == 0; i++) {
        r = route_msg(fr, RTM_DELROUTE, ww.v[i].addr, ww.v[i].len, ww.v[i].table);
        if (r == -ESRCH || r == -ENOENT)
            r = 0;
    }
    free(ww.v);
    if (r < 0)
        return lz_error_set(err, r,
                            "cannot remove the learned-address routes left in the Domain's network namespace: %s",
                            strerror(-r));
    return 0;
}

void lz_fqdnroute_free(struct lz_fqdnroute *fr) {
    if (!fr)
        return;
    if (fr->rt)
        mnl_socket_close(fr->rt);
    if (fr->diag)
        mnl_socket_close(fr->diag);
    free(fr);
}

int lz_fqdnroute_open(int rtnl_fd, int diag_fd, struct lz_fqdnroute **ret, struct lz_error *err) {
    struct lz_fqdnroute *fr = lz_xcalloc(1, sizeof *fr);
    fr->seq = (unsigned)time(NULL);
    int r = wrap(rtnl_fd, &fr->rt, &fr->rt_portid);
    if (r < 0) {
        close(rtnl_fd);
        close(diag_fd);
        lz_fqdnroute_free(fr);
        return lz_error_set(err, r, "the Domain's route socket is not usable: %s", strerror(-r));
    }
    if ((r = wrap(diag_fd, &fr->diag, &fr->diag_portid)) < 0) {
        close(diag_fd);
        lz_fqdnroute_free(fr);
        return lz_error_set(err, r, "the Domain's socket-diagnostics socket is not usable: %s", strerror(-r));
    }
    if ((r = find_tap(fr)) < 0) {
        lz_fqdnroute_free(fr);
        return lz_error_set(err, r, "cannot find %s in the Domain's network namespace: %s", LZ_NET_TAP,
                            r == -ENODEV ? "no such device" : strerror(-r));
    }
    if ((r = flush(fr, err)) < 0) {
        lz_fqdnroute_free(fr);
        return r;
    }
    *ret = fr;
    return 0;
}

int lz_fqdnroute_set_gate(struct lz_fqdnroute *fr, uint16_t port, struct lz_error *err) {
    (void)err;
    fr->lo = 1; /* every namespace's loopback is index 1 (LOOPBACK_IFINDEX) */
    fr->gate_port = port;
    return 0;
}

int lz_fqdnroute_add(struct lz_fqdnroute *fr, uint32_t addr, uint16_t port, struct lz_error *err) {
    char a[16];
    fmt_addr(addr, a);
    int r;
    if (!rule_known(fr, port)) {
        r = rule_msg(fr, RTM_NEWRULE, LZ_FQDN_TABLE0 + port,
                     fr->gate_port && port == fr->gate_port ? LZ_FQDN_GATE_RULE_PREF : LZ_FQDN_RULE_PREF, port != 0,
                     port);
        if (r < 0 && r != -EEXIST)
            return lz_error_set(err, r, "cannot add the rule for TCP port %u: %s", port, strerror(-r));
        rule_set_known(fr, port);
    }
    r = route_msg(fr, RTM_NEWROUTE, addr, 32, LZ_FQDN_TABLE0 + port);
    if (r < 0)
        return lz_error_set(err, r, "cannot add the route to %s (TCP port %u): %s", a, port, strerror(-r));
    return 0;
}

int lz_fqdnroute_del(struct lz_fqdnroute *fr, uint32_t addr, uint16_t port, struct lz_error *err) {
    int r = route_msg(fr, RTM_DELROUTE, addr, 32, LZ_FQDN_TABLE0 + port);
    if (r == -ESRCH || r == -ENOENT)
        return 0;
    if (r < 0) {
        char a[16];
        fmt_addr(addr, a);
        return lz_error_set(err, r, "cannot delete the route to %s (TCP port %u): %s", a, port, strerror(-r));
    }
    return 0;
}

/* ---- sock_diag ---- */

struct diag_count {
    uint32_t addr; /* network byte order */
    int n;
};

static int diag_cb(const struct nlmsghdr *h, void *data) {
    struct diag_count *c = data;
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || mnl_nlmsg_get_payload_len(h) < sizeof(struct inet_diag_msg))
        return MNL_CB_OK;
    const struct inet_diag_msg *m = mnl_nlmsg_get_payload(h);
    if (m->idiag_family == AF_INET && m->id.idiag_dst[0] == c->addr && c->n < INT32_MAX)
        c->n++;
    return MNL_CB_OK;
}

int lz_fqdnroute_in_use(struct lz_fqdnroute *fr, uint32_t addr) {
    char buf[256];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct inet_diag_req_v2 *q = mnl_nlmsg_put_extra_header(h, sizeof *q);
    q->sdiag_family = AF_INET;
    q->sdiag_protocol = IPPROTO_TCP;
    /* Every state with a peer still talking (bit i: state i): not LISTEN
     * or CLOSE, and not TIME_WAIT, which both ends have closed (it lasts
     * 60 s after a connection the sandbox closed first; without the route
     * the peer's retransmitted FIN goes unanswered, which ends nothing). */
    q->idiag_states =
        ((1u << (TCP_CLOSING + 1)) - 1) & ~(1u << TCP_CLOSE) & ~(1u << TCP_LISTEN) & ~(1u << TCP_TIME_WAIT) & ~1u;
    q->idiag_states |= 1u << 12; /* TCP_NEW_SYN_RECV: a connection being accepted */
    struct diag_count c = { htonl(addr), 0 };
    int r = nl_dump(fr->diag, fr->diag_portid, &fr->seq, h, diag_cb, &c);
    return r < 0 ? r : c.n;
}

/* ---- list ---- */

int lz_fqdnroute_list(struct lz_fqdnroute *fr, void (*cb)(void *ud, uint32_t addr, uint16_t port), void *ud,
                      struct lz_error *err) {
    struct route_walk w = { 0 };
    int r = walk_routes(fr, &w);
    if (r < 0) {
        free(w.v);
        return lz_error_set(err, r, "cannot read the learned-address routes back: %s", strerror(-r));
    }
    int n = 0;
    for (size_t i = 0; i < w.n; i++) {
        if (w.v[i].len != 32 || w.v[i].table < LZ_FQDN_TABLE0 || w.v[i].table - LZ_FQDN_TABLE0 > 65535)
            continue;
        cb(ud, w.v[i].addr, (uint16_t)(w.v[i].table - LZ_FQDN_TABLE0));
        n++;
    }
    free(w.v);
    return n;
}
