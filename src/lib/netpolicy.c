/* netpolicy.c — see netpolicy.h. */
#include "netpolicy.h"
#include "gateproto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libmnl/libmnl.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

static uint32_t mask_of(unsigned len) { return len ? 0xffffffffu << (32 - len) : 0; }

static int rule_cmp(const void *a, const void *b) {
    const struct lz_netrule *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return 0;
}

static void add_rule(struct lz_netpolicy *p, uint32_t addr, unsigned len, uint8_t action) {
    addr &= mask_of(len);
    for (size_t i = 0; i < p->n; i++)
        if (p->rules[i].addr == addr && p->rules[i].len == len) {
            /* The same prefix allowed and denied: deny wins. */
            if (action == LZ_NET_DENY)
                p->rules[i].action = LZ_NET_DENY;
            return;
        }
    p->rules = lz_xrealloc(p->rules, (p->n + 1) * sizeof *p->rules);
    p->rules[p->n++] = (struct lz_netrule){ addr, (uint8_t)len, action };
}

static int add_list(struct lz_netpolicy *p, char *const *v, size_t n, uint8_t action, struct lz_error *err) {
    for (size_t i = 0; i < n; i++) {
        char canon[19];
        uint32_t addr;
        unsigned len;
        const char *why = NULL;
        if (lz_ipv4_prefix_parse(v[i], canon, &addr, &len, &why) < 0)
            return lz_error_set(err, -EINVAL, "invalid prefix \"%s\": %s", v[i], why ? why : "not IPv4 CIDR");
        add_rule(p, addr, len, action);
    }
    return 0;
}

int lz_netpolicy_derive(const struct lz_config *c, const uint32_t *host, size_t n_host, struct lz_netpolicy *ret,
                        struct lz_error *err) {
    struct lz_netpolicy p = { 0 };
    int r;
    /* [network] default_allow is the "open" preset's (config.h, enum
     * lz_egress): under "balanced" and "locked" an address is reachable
     * through the profile's own allow_egress or a learned name only.
     * Allows first, so that a deny of the same prefix wins in add_rule. */
    bool open = c->profile.egress == LZ_EGRESS_OPEN;
    if ((open && (r = add_list(&p, c->default_allow, c->n_default_allow, LZ_NET_ALLOW, err)) < 0) ||
        (r = add_list(&p, c->profile.allow_egress, c->profile.n_allow_egress, LZ_NET_ALLOW, err)) < 0 ||
        (r = add_list(&p, c->default_deny, c->n_default_deny, LZ_NET_DENY, err)) < 0 ||
        (r = add_list(&p, c->profile.deny_egress, c->profile.n_deny_egress, LZ_NET_DENY, err)) < 0) {
        lz_netpolicy_clear(&p);
        return r;
    }
    /* The host itself: slirp4netns connects from the host, so a host
     * address would reach the host's own services. */
    for (size_t i = 0; i < n_host; i++)
        add_rule(&p, host[i], 32, LZ_NET_DENY);
    /* The helper's network: only its DNS forwarder is reachable; its
     * gateway alias (the host, loopback disabled) and the rest are not. */
    add_rule(&p, LZ_NET_GW & mask_of(24), 24, LZ_NET_DENY);
    add_rule(&p, LZ_NET_DNS, 32, LZ_NET_ALLOW);
    for (size_t i = 0; i < p.n; i++)
        if (p.rules[i].addr == LZ_NET_DNS && p.rules[i].len == 32)
            p.rules[i].action = LZ_NET_ALLOW; /* DNS is part of the policy, not configurable */
    if (p.n > LZ_NETPOLICY_MAX_RULES) {
        lz_netpolicy_clear(&p);
        return lz_error_set(err, -E2BIG, "the network policy has more than %d prefixes", LZ_NETPOLICY_MAX_RULES);
    }
    qsort(p.rules, p.n, sizeof *p.rules, rule_cmp);
    /* Published sandbox ports: ascending, each once. */
    for (size_t i = 0; i < c->profile.n_publish && i < LZ_PUBLISH_MAX; i++) {
        uint16_t port = c->profile.publish[i].port;
        size_t k = 0;
        while (k < p.n_publish && p.publish[k] < port)
            k++;
        if (k < p.n_publish && p.publish[k] == port)
            continue;
        memmove(&p.publish[k + 1], &p.publish[k], (p.n_publish - k) * sizeof p.publish[0]);
        p.publish[k] = port;
        p.n_publish++;
    }
    *ret = p;
    return 0;
}

int lz_host_ipv4_addrs(uint32_t **ret, size_t *ret_n) {
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return -errno;
    uint32_t *v = NULL;
    size_t n = 0;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t a = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr);
        if ((a >> 24) == 127)
            continue; /* 127/8 is denied as a prefix already */
        v = lz_xrealloc(v, (n + 1) * sizeof *v);
        v[n++] = a;
    }
    freeifaddrs(ifa);
    *ret = v;
    *ret_n = n;
    return 0;
}

int lz_netpolicy_encode(const struct lz_netpolicy *p, uint8_t **ret_buf, size_t *ret_len) {
    size_t ml = strlen(LZ_NETPOLICY_MAGIC);
    size_t len = ml + 4 + p->n * 6 + 2 + p->n_publish * 2;
    uint8_t *b = lz_xmalloc(len), *q = b;
    memcpy(q, LZ_NETPOLICY_MAGIC, ml);
    q += ml;
    uint32_t n = htonl((uint32_t)p->n);
    memcpy(q, &n, 4);
    q += 4;
    for (size_t i = 0; i < p->n; i++) {
        uint32_t a = htonl(p->rules[i].addr);
        memcpy(q, &a, 4);
        q[4] = p->rules[i].len;
        q[5] = p->rules[i].action;
        q += 6;
    }
    /* Then the published ports: their count and each, big-endian. */
    q[0] = (uint8_t)(p->n_publish >> 8);
    q[1] = (uint8_t)p->n_publish;
    q += 2;
    for (size_t i = 0; i < p->n_publish; i++, q += 2) {
        q[0] = (uint8_t)(p->publish[i] >> 8);
        q[1] = (uint8_t)p->publish[i];
    }
    *ret_buf = b;
    *ret_len = len;
    return 0;
}

int lz_netpolicy_decode(const uint8_t *buf, size_t len, struct lz_netpolicy *ret, struct lz_error *err) {
    size_t ml = strlen(LZ_NETPOLICY_MAGIC);
    if (len < ml + 4 || memcmp(buf, LZ_NETPOLICY_MAGIC, ml))
        return lz_error_set(err, -EBADMSG, "network policy: bad header");
    uint32_t n;
    memcpy(&n, buf + ml, 4);
    n = ntohl(n);
    if (n > LZ_NETPOLICY_MAX_RULES || len < ml + 4 + (size_t)n * 6 + 2)
        return lz_error_set(err, -EBADMSG, "network policy: bad length");
    const uint8_t *pp = buf + ml + 4 + (size_t)n * 6;
    size_t np = (size_t)pp[0] << 8 | pp[1];
    if (np > LZ_PUBLISH_MAX || len != ml + 4 + (size_t)n * 6 + 2 + np * 2)
        return lz_error_set(err, -EBADMSG, "network policy: bad length");
    struct lz_netpolicy p = { .rules = lz_xcalloc(n ? n : 1, sizeof *p.rules), .n = n };
    const uint8_t *q = buf + ml + 4;
    for (uint32_t i = 0; i < n; i++, q += 6) {
        uint32_t a;
        memcpy(&a, q, 4);
        p.rules[i] = (struct lz_netrule){ ntohl(a), q[4], q[5] };
        bool bad = q[4] > 32 || (q[5] != LZ_NET_ALLOW && q[5] != LZ_NET_DENY) ||
            (p.rules[i].addr & ~mask_of(q[4])) != 0 || (i > 0 && rule_cmp(&p.rules[i - 1], &p.rules[i]) >= 0);
        if (bad) {
            lz_netpolicy_clear(&p);
            return lz_error_set(err, -EBADMSG, "network policy: rule %u is not canonical", i);
        }
    }
    for (size_t i = 0; i < np; i++) {
        uint16_t port = (uint16_t)(pp[2 + 2 * i] << 8 | pp[3 + 2 * i]);
        if (port == 0 || (i > 0 && port <= p.publish[i - 1])) {
            lz_netpolicy_clear(&p);
            return lz_error_set(err, -EBADMSG, "network policy: published port %zu is not canonical", i);
        }
        p.publish[i] = port;
    }
    p.n_publish = np;
    *ret = p;
    return 0;
}

void lz_netpolicy_digest(const uint8_t *buf, size_t len, uint8_t ret[32]) { crypto_hash_sha256(ret, buf, len); }

enum lz_net_action lz_netpolicy_lookup(const struct lz_netpolicy *p, uint32_t addr) {
    int best = -1;
    enum lz_net_action act = LZ_NET_DENY; /* no route: nothing allowed */
    for (size_t i = 0; i < p->n; i++) {
        const struct lz_netrule *r = &p->rules[i];
        if ((addr & mask_of(r->len)) == r->addr && (int)r->len > best) {
            best = r->len;
            act = (enum lz_net_action)r->action;
        }
    }
    return act;
}

void lz_netpolicy_clear(struct lz_netpolicy *p) {
    free(p->rules);
    p->rules = NULL;
    p->n = 0;
}

/* ---- installation (in the enforcement namespace) ---- */

struct nl {
    struct mnl_socket *s;
    unsigned seq;
    uint32_t portid;
};

static int nl_talk(struct nl *nl, struct nlmsghdr *h) {
    char buf[8192];
    h->nlmsg_seq = ++nl->seq;
    if (mnl_socket_sendto(nl->s, h, h->nlmsg_len) < 0)
        return -errno;
    ssize_t n = mnl_socket_recvfrom(nl->s, buf, sizeof buf);
    if (n < 0)
        return -errno;
    int r = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, nl->portid, NULL, NULL);
    return r < 0 ? -errno : 0;
}

static int route_in(struct nl *nl, uint32_t table, int cmd, unsigned flags, uint32_t dst, unsigned len,
                    unsigned char type, unsigned char scope, uint32_t gw, unsigned oif, bool onlink) {
    char buf[8192];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = (uint16_t)cmd;
    h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags);
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(h, sizeof *rtm);
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = (unsigned char)len;
    rtm->rtm_table = table < 256 ? (unsigned char)table : RT_TABLE_UNSPEC;
    rtm->rtm_protocol = cmd == RTM_DELROUTE ? RTPROT_UNSPEC : RTPROT_STATIC;
    rtm->rtm_scope = scope;
    rtm->rtm_type = type;
    if (onlink)
        rtm->rtm_flags |= RTNH_F_ONLINK;
    uint32_t d = htonl(dst);
    if (len)
        mnl_attr_put_u32(h, RTA_DST, d);
    if (gw) {
        uint32_t g = htonl(gw);
        mnl_attr_put_u32(h, RTA_GATEWAY, g);
    }
    if (oif)
        mnl_attr_put_u32(h, RTA_OIF, oif);
    if (table >= 256)
        mnl_attr_put_u32(h, RTA_TABLE, table);
    return nl_talk(nl, h);
}

static int route(struct nl *nl, int cmd, unsigned flags, uint32_t dst, unsigned len, unsigned char type,
                 unsigned char scope, uint32_t gw, unsigned oif, bool onlink) {
    return route_in(nl, RT_TABLE_MAIN, cmd, flags, dst, len, type, scope, gw, oif, onlink);
}

/* `pref PREF lookup TABLE`, and with sport (a published port) `ipproto tcp
 * sport SPORT to 10.0.2.2/32`. Once: an existing rule is EEXIST, which is
 * fine. */
static int table_rule(struct nl *nl, uint32_t pref, uint32_t table, uint16_t sport) {
    char buf[512];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_NEWRULE;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct fib_rule_hdr *fr = mnl_nlmsg_put_extra_header(h, sizeof *fr);
    fr->family = AF_INET;
    fr->action = FR_ACT_TO_TBL;
    mnl_attr_put_u32(h, FRA_PRIORITY, pref);
    mnl_attr_put_u32(h, FRA_TABLE, table);
    mnl_attr_put_u8(h, FRA_PROTOCOL, RTPROT_STATIC);
    if (sport) {
        fr->dst_len = 32;
        mnl_attr_put_u8(h, FRA_IP_PROTO, IPPROTO_TCP);
        mnl_attr_put_u32(h, FRA_DST, htonl(LZ_NET_GW));
        struct fib_rule_port_range pr = { sport, sport };
        mnl_attr_put(h, FRA_SPORT_RANGE, sizeof pr, &pr);
    }
    int r = nl_talk(nl, h);
    return r == -EEXIST ? 0 : r;
}

/* pref LZ_NET_HOSTS_RULE_PREF lookup LZ_NET_HOSTS_TABLE. */
static int hosts_rule(struct nl *nl) { return table_rule(nl, LZ_NET_HOSTS_RULE_PREF, LZ_NET_HOSTS_TABLE, 0); }

/* One published port's rule (netpolicy.h, LZ_NET_PUBLISH_TABLE). */
static int publish_rule(struct nl *nl, uint16_t port) {
    return table_rule(nl, LZ_NET_PUBLISH_RULE_PREF, LZ_NET_PUBLISH_TABLE, port);
}

static bool is_dns_rule(uint32_t addr, unsigned len, uint8_t action) {
    return addr == LZ_NET_DNS && len == 32 && action == LZ_NET_ALLOW;
}

/* The route of one policy rule: a deny is `prohibit`, an allow goes via
 * the helper's gateway. The resolver's allow (10.0.2.3/32) is no route of
 * the main table: the address is the namespace's own, on `lo`
 * (lz_netpolicy_dns_local), and the local table, looked up before main,
 * delivers it there; slirp4netns's forwarder on tap0 is off
 * (--disable-dns), and nothing reaches it. */
static int policy_route(struct nl *nl, uint32_t addr, unsigned len, uint8_t action, unsigned tap) {
    if (is_dns_rule(addr, len, action))
        return 0;
    if (action == LZ_NET_DENY)
        return route(nl, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, addr, len, RTN_PROHIBIT, RT_SCOPE_UNIVERSE, 0, 0,
                     false);
    return route(nl, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, addr, len, RTN_UNICAST, RT_SCOPE_UNIVERSE, LZ_NET_GW,
                 tap, true);
}

/* Adds (or replaces) the IPv4 address addr/len on interface ifindex;
 * with a nonzero broadcast, that and IFA_F_NOPREFIXROUTE (no connected
 * route for the prefix). */
static int add_addr(struct nl *nl, unsigned ifindex, uint32_t addr, unsigned len, uint8_t scope, uint32_t broadcast) {
    char buf[512];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_NEWADDR;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof *ifa);
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = len;
    ifa->ifa_scope = scope;
    ifa->ifa_index = ifindex;
    mnl_attr_put_u32(h, IFA_LOCAL, htonl(addr));
    mnl_attr_put_u32(h, IFA_ADDRESS, htonl(addr));
    if (broadcast) {
        mnl_attr_put_u32(h, IFA_BROADCAST, htonl(broadcast));
        mnl_attr_put_u32(h, IFA_FLAGS, IFA_F_NOPREFIXROUTE);
    }
    return nl_talk(nl, h);
}

/* 10.0.2.3/32 on lo (scope host): the kernel's local route for it. */
static int dns_addr(struct nl *nl, unsigned lo) { return add_addr(nl, lo, LZ_NET_DNS, 32, RT_SCOPE_HOST, 0); }

static int nl_open(struct nl *nl);

int lz_netpolicy_dns_local(struct lz_error *err) {
    unsigned lo = if_nametoindex("lo");
    if (!lo)
        return lz_error_set(err, -ENODEV, "the Domain network namespace has no loopback");
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0)
        return lz_error_set(err, r, "netlink: %s", strerror(-r));
    r = dns_addr(&nl, lo);
    mnl_socket_close(nl.s);
    if (r < 0)
        return lz_error_set(err, r, "cannot put the resolver's address 10.0.2.3 on lo: %s", strerror(-r));
    return 0;
}

/* One socket bound to 10.0.2.3:53, without SO_REUSEADDR or SO_REUSEPORT:
 * while it is open, no other socket of the namespace can bind that
 * address and port (the kernel's EADDRINUSE), whatever options it sets. */
static int dns_bound(int type) {
    int s = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(LZ_NET_DNS) };
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || (type == SOCK_STREAM && listen(s, 16) < 0)) {
        int r = -errno;
        close(s);
        return r;
    }
    return s;
}

/* IP_TRANSPARENT needs CAP_NET_ADMIN (or CAP_NET_RAW) in the namespace:
 * set here, before the Supervisor drops it; it stays with the socket. */
static int gate_listener(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    int one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(LZ_GATE_PORT), .sin_addr.s_addr = INADDR_ANY };
    if (setsockopt(s, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(s, 1024) < 0) {
        int r = -errno;
        close(s);
        return r;
    }
    return s;
}

static int netlink_socket(int proto) {
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
    if (s < 0)
        return -errno;
    struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int r = -errno;
        close(s);
        return r;
    }
    return s;
}

int lz_netpolicy_dns_sockets(int ret[LZ_NET_DNS_FDS], struct lz_error *err) {
    static const char *const what[LZ_NET_DNS_FDS] = { "a UDP socket on 10.0.2.3:53", "a TCP socket on 10.0.2.3:53",
                                                      "a route netlink socket", "a socket-diagnostics netlink socket",
                                                      "the TLS gate's listener on port 443" };
    int fds[LZ_NET_DNS_FDS];
    fds[LZ_NET_DNS_UDP] = dns_bound(SOCK_DGRAM);
    fds[LZ_NET_DNS_TCP] = dns_bound(SOCK_STREAM);
    fds[LZ_NET_DNS_RTNL] = netlink_socket(NETLINK_ROUTE);
    fds[LZ_NET_DNS_DIAG] = netlink_socket(NETLINK_SOCK_DIAG);
    fds[LZ_NET_DNS_GATE] = gate_listener();
    for (int i = 0; i < LZ_NET_DNS_FDS; i++)
        if (fds[i] < 0) {
            int r = fds[i];
            for (int j = 0; j < LZ_NET_DNS_FDS; j++)
                lz_closep(&fds[j]);
            return lz_error_set(err, r, "cannot open %s in the Domain network namespace: %s", what[i], strerror(-r));
        }
    memcpy(ret, fds, sizeof fds);
    return 0;
}

static int write_sysctl(const char *path, const char *v) {
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* no IPv6 in this kernel: fine */
    return lz_write_full(fd, v, strlen(v));
}

int lz_netpolicy_prepare(struct lz_error *err) {
    int r;
    if ((r = write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1")) < 0 ||
        (r = write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1")) < 0)
        return lz_error_set(err, r, "cannot disable IPv6 in the Domain network namespace: %s", strerror(-r));
    return lz_netpolicy_dns_local(err);
}

/* 10.0.2.100/24 on tap0 without the connected /24 route the kernel would
 * add with it (the policy decides about 10.0.2.0/24 like any prefix). */
static int tap_addr(struct nl *nl, unsigned tap) {
    return add_addr(nl, tap, LZ_NET_ADDR, 24, RT_SCOPE_UNIVERSE, LZ_NET_ADDR | 0xffu);
}

/* The helper's tap0 (its index) and a netlink socket to configure it. */
static int tap_nl_open(unsigned *ret_tap, struct nl *nl, struct lz_error *err) {
    *ret_tap = if_nametoindex(LZ_NET_TAP);
    if (!*ret_tap)
        return lz_error_set(err, -ENODEV, "the connectivity helper's %s is missing", LZ_NET_TAP);
    int r = nl_open(nl);
    return r < 0 ? lz_error_set(err, r, "netlink: %s", strerror(-r)) : 0;
}

int lz_netpolicy_tap_up(struct lz_error *err) {
    unsigned tap;
    struct nl nl;
    int r = tap_nl_open(&tap, &nl, err);
    if (r < 0)
        return r;
    r = tap_addr(&nl, tap);
    mnl_socket_close(nl.s);
    if (r < 0)
        return lz_error_set(err, r, "cannot put 10.0.2.100/24 on %s: %s", LZ_NET_TAP, strerror(-r));
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return lz_error_set(err, -errno, "socket: %s", strerror(errno));
    struct ifreq ifr = { 0 };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", LZ_NET_TAP);
    ifr.ifr_mtu = LZ_NET_MTU;
    if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
        return lz_error_set(err, -errno, "cannot set the MTU of %s: %s", LZ_NET_TAP, strerror(errno));
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return lz_error_set(err, -errno, "cannot read the flags of %s: %s", LZ_NET_TAP, strerror(errno));
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return lz_error_set(err, -errno, "cannot bring %s up: %s", LZ_NET_TAP, strerror(errno));
    return 0;
}

int lz_netpolicy_install(const struct lz_netpolicy *p, struct lz_error *err) {
    unsigned tap;
    struct nl nl;
    int r = tap_nl_open(&tap, &nl, err);
    if (r < 0)
        return r;
    /* What a helper that configured tap0 itself set up (slirp4netns
     * --configure; lz_netpolicy_tap_up adds neither) is replaced by the
     * policy: the default route and the connected /24. */
    route(&nl, RTM_DELROUTE, 0, 0, 0, RTN_UNICAST, RT_SCOPE_NOWHERE, 0, 0, false);
    route(&nl, RTM_DELROUTE, 0, LZ_NET_GW & 0xffffff00u, 24, RTN_UNICAST, RT_SCOPE_NOWHERE, 0, tap, false);
    bool have_default = false;
    for (size_t i = 0; i < p->n && r >= 0; i++) {
        const struct lz_netrule *x = &p->rules[i];
        if (x->len == 0)
            have_default = true;
        r = policy_route(&nl, x->addr, x->len, x->action, tap);
        if (r < 0)
            lz_error_set(err, r, "cannot install the route for %u.%u.%u.%u/%u: %s", x->addr >> 24,
                         (x->addr >> 16) & 255, (x->addr >> 8) & 255, x->addr & 255, x->len, strerror(-r));
    }
    if (r >= 0 && !have_default) {
        r = route(&nl, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, 0, 0, RTN_PROHIBIT, RT_SCOPE_UNIVERSE, 0, 0, false);
        if (r < 0)
            lz_error_set(err, r, "cannot install the default deny route: %s", strerror(-r));
    }
    if (r >= 0) {
        r = hosts_rule(&nl);
        if (r < 0)
            lz_error_set(err, r, "cannot install the rule of the host-address table: %s", strerror(-r));
    }
    if (r >= 0 && p->n_publish) {
        r = route_in(&nl, LZ_NET_PUBLISH_TABLE, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, LZ_NET_GW, 32, RTN_UNICAST,
                     RT_SCOPE_LINK, 0, tap, false);
        for (size_t i = 0; i < p->n_publish && r >= 0; i++)
            r = publish_rule(&nl, p->publish[i]);
        if (r < 0)
            lz_error_set(err, r, "cannot install the routes of the published ports: %s", strerror(-r));
    }
    mnl_socket_close(nl.s);
    return r < 0 ? r : 0;
}

struct observed {
    struct lz_netrule r[LZ_NETPOLICY_MAX_RULES + 8];
    size_t n;
    bool overflow;
    uint32_t tap_addr;
    unsigned tap_len;
    unsigned tap;
    unsigned lo;
    bool lo_dns; /* lo carries 10.0.2.3/32 */
};

static int route_attr_cb(const struct nlattr *a, void *data) {
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(a);
    if (mnl_attr_type_valid(a, RTA_MAX) > 0)
        tb[type] = a;
    return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *h, void *data) {
    struct observed *o = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(h);
    if (rtm->rtm_family != AF_INET || rtm->rtm_table != RT_TABLE_MAIN)
        return MNL_CB_OK;
    const struct nlattr *tb[RTA_MAX + 1] = { 0 };
    mnl_attr_parse(h, sizeof *rtm, route_attr_cb, tb);
    uint32_t dst = tb[RTA_DST] ? ntohl(mnl_attr_get_u32(tb[RTA_DST])) : 0;
    if (o->n >= LZ_ARRAY_SIZE(o->r)) {
        o->overflow = true;
        return MNL_CB_OK;
    }
    uint8_t act = rtm->rtm_type == RTN_PROHIBIT ? LZ_NET_DENY : rtm->rtm_type == RTN_UNICAST ? LZ_NET_ALLOW : 0;
    o->r[o->n++] = (struct lz_netrule){ dst, rtm->rtm_dst_len, act };
    return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *h, void *data) {
    struct observed *o = data;
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
    if (ifa->ifa_family != AF_INET || (ifa->ifa_index != o->tap && ifa->ifa_index != o->lo))
        return MNL_CB_OK;
    const struct nlattr *a;
    mnl_attr_for_each(a, h, sizeof *ifa) {
        if (mnl_attr_get_type(a) != IFA_LOCAL || mnl_attr_get_payload_len(a) != 4)
            continue;
        uint32_t local = ntohl(mnl_attr_get_u32(a));
        if (ifa->ifa_index == o->tap) {
            o->tap_addr = local;
            o->tap_len = ifa->ifa_prefixlen;
        } else if (local == LZ_NET_DNS && ifa->ifa_prefixlen == 32) {
            o->lo_dns = true;
        }
    }
    return MNL_CB_OK;
}

static int dump(struct mnl_socket *s, uint16_t type, mnl_cb_t cb, void *data) {
    char buf[8192];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    h->nlmsg_seq = (unsigned)time(NULL);
    struct rtgenmsg *g = mnl_nlmsg_put_extra_header(h, sizeof *g);
    g->rtgen_family = AF_INET;
    if (mnl_socket_sendto(s, h, h->nlmsg_len) < 0)
        return -errno;
    unsigned portid = mnl_socket_get_portid(s);
    for (int i = 0; i < 4096; i++) {
        ssize_t n = mnl_socket_recvfrom(s, buf, sizeof buf);
        if (n < 0)
            return -errno;
        int r = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, portid, cb, data);
        if (r < 0)
            return -errno;
        if (r == MNL_CB_STOP)
            return 0;
    }
    return -E2BIG;
}

int lz_netpolicy_observe(const struct lz_netpolicy *p, char *sum, size_t cap, struct lz_error *err) {
    static struct observed o;
    memset(&o, 0, sizeof o);
    o.tap = if_nametoindex(LZ_NET_TAP);
    o.lo = if_nametoindex("lo");
    struct mnl_socket *s = mnl_socket_open(NETLINK_ROUTE);
    if (!s)
        return lz_error_set(err, -errno, "netlink: %s", strerror(errno));
    int r = mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0 ? -errno : 0;
    if (r == 0)
        r = dump(s, RTM_GETROUTE, route_cb, &o);
    if (r == 0)
        r = dump(s, RTM_GETADDR, addr_cb, &o);
    mnl_socket_close(s);
    if (r < 0)
        return lz_error_set(err, r, "cannot read the namespace's routes back: %s", strerror(-r));
    if (o.overflow)
        return lz_error_set(err, -E2BIG, "the namespace holds more routes than the policy");
    /* Every policy rule present with its type; nothing else except the
     * default deny we add when the policy has no /0. The resolver's allow
     * is the address on lo instead (policy_route), and no route of main. */
    size_t deny = 0, allow = 0, extra = 0, want = 0;
    for (size_t i = 0; i < o.n; i++) {
        bool found = false;
        for (size_t j = 0; j < p->n && !found; j++)
            found =
                p->rules[j].addr == o.r[i].addr && p->rules[j].len == o.r[i].len && p->rules[j].action == o.r[i].action;
        if (!found && !(o.r[i].len == 0 && o.r[i].action == LZ_NET_DENY))
            extra++;
        if (o.r[i].action == LZ_NET_DENY)
            deny++;
        else if (o.r[i].action == LZ_NET_ALLOW)
            allow++;
    }
    size_t matched = 0;
    bool dns_rule = false;
    for (size_t j = 0; j < p->n; j++) {
        if (is_dns_rule(p->rules[j].addr, p->rules[j].len, p->rules[j].action)) {
            dns_rule = true;
            continue;
        }
        want++;
        for (size_t i = 0; i < o.n; i++)
            if (p->rules[j].addr == o.r[i].addr && p->rules[j].len == o.r[i].len &&
                p->rules[j].action == o.r[i].action) {
                matched++;
                break;
            }
    }
    for (size_t i = 0; i < o.n; i++)
        if (o.r[i].addr == LZ_NET_DNS && o.r[i].len == 32 && o.r[i].action == LZ_NET_ALLOW)
            extra += dns_rule; /* a main route to the resolver would lead to tap0 */
    if (extra || matched != want)
        return lz_error_set(err, -EIO,
                            "the namespace's routes differ from the policy (%zu of %zu rules present, %zu unexpected)",
                            matched, want, extra);
    if (o.tap_addr != LZ_NET_ADDR || o.tap_len != 24)
        return lz_error_set(err, -EIO, "%s does not carry 10.0.2.100/24", LZ_NET_TAP);
    if (!o.lo_dns)
        return lz_error_set(err, -EIO, "lo does not carry the resolver's address 10.0.2.3/32");
    snprintf(sum, cap, "routes=%zu deny=%zu allow=%zu addr=10.0.2.100/24 dns=lo", o.n, deny, allow);
    return 0;
}

/* 0 if the kernel would route to addr, else the connect() errno (negative). */
static int route_check(uint32_t addr) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(addr) };
    return connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
}

int lz_netpolicy_probe(const struct lz_netpolicy *p, struct lz_error *err) {
    /* One address inside every prefix: the kernel's decision must be the
     * policy's, deny as an immediate EACCES/ENETUNREACH. */
    for (size_t i = 0; i < p->n; i++) {
        uint32_t a = p->rules[i].addr | (p->rules[i].len < 31 ? 1u : 0u);
        /* 127/8 is the namespace's own loopback (local table): the
         * sandbox's loopback works; the host's is another namespace. */
        if ((a >> 24) == 127)
            continue;
        enum lz_net_action want = lz_netpolicy_lookup(p, a);
        int r = route_check(a);
        bool denied = r == -EACCES || r == -ENETUNREACH || r == -EPERM;
        if ((want == LZ_NET_DENY && !denied) || (want == LZ_NET_ALLOW && r != 0))
            return lz_error_set(err, -EIO, "network readiness probe: %u.%u.%u.%u should be %s but connect() gave %s",
                                a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255,
                                want == LZ_NET_DENY ? "denied" : "allowed", r ? strerror(-r) : "success");
    }
    /* The resolver's address: routable, and to this namespace itself (a
     * connected UDP socket's source is then the destination, from the
     * local table), never out through tap0. */
    {
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(LZ_NET_DNS) };
        struct sockaddr_in me = { 0 };
        socklen_t ml = sizeof me;
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
            return lz_error_set(err, -EIO, "network readiness probe: the resolver's address 10.0.2.3 is unreachable");
        if (getsockname(s, (struct sockaddr *)&me, &ml) < 0 || me.sin_addr.s_addr != htonl(LZ_NET_DNS))
            return lz_error_set(err, -EIO, "network readiness probe: 10.0.2.3 is not the namespace's own address");
    }
    _cleanup_close_ int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s6 >= 0) {
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(53) };
        inet_pton(AF_INET6, "2001:db8::1", &sa6.sin6_addr);
        if (connect(s6, (struct sockaddr *)&sa6, sizeof sa6) == 0)
            return lz_error_set(err, -EIO, "network readiness probe: IPv6 is routable but must be disabled");
    }
    return 0;
}

/* ---- single routes, for the host-address follower (netfollow.h) ---- */

static int nl_open(struct nl *nl) {
    *nl = (struct nl){ .s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC) };
    if (!nl->s)
        return -errno;
    if (mnl_socket_bind(nl->s, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = -errno;
        mnl_socket_close(nl->s);
        return r;
    }
    nl->portid = mnl_socket_get_portid(nl->s);
    nl->seq = (unsigned)time(NULL);
    return 0;
}

int lz_netpolicy_route_set(uint32_t addr, unsigned len, int action) {
    unsigned tap = if_nametoindex(LZ_NET_TAP);
    if (!tap)
        return -ENODEV;
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0)
        return r;
    if (action == 0)
        r = route(&nl, RTM_DELROUTE, 0, addr, len, RTN_UNSPEC, RT_SCOPE_NOWHERE, 0, 0, false);
    else
        r = policy_route(&nl, addr, len, (uint8_t)action, tap);
    mnl_socket_close(nl.s);
    return r;
}

struct want_route {
    uint32_t addr;
    unsigned len;
    int action;
};

static int want_cb(const struct nlmsghdr *h, void *data) {
    struct want_route *w = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(h);
    if (rtm->rtm_family != AF_INET || rtm->rtm_table != RT_TABLE_MAIN || rtm->rtm_dst_len != w->len)
        return MNL_CB_OK;
    const struct nlattr *tb[RTA_MAX + 1] = { 0 };
    mnl_attr_parse(h, sizeof *rtm, route_attr_cb, tb);
    uint32_t dst = tb[RTA_DST] ? ntohl(mnl_attr_get_u32(tb[RTA_DST])) : 0;
    if (dst == w->addr)
        w->action = rtm->rtm_type == RTN_PROHIBIT ? LZ_NET_DENY : rtm->rtm_type == RTN_UNICAST ? LZ_NET_ALLOW : -EPROTO;
    return MNL_CB_OK;
}

int lz_netpolicy_route_get(uint32_t addr, unsigned len) {
    /* A dump of the main table, as lz_netpolicy_observe reads it, looking
     * for the exact prefix (not a lookup: a prohibit route's lookup is an
     * error, not the route). */
    struct want_route w = { addr, len, 0 };
    struct mnl_socket *s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    int r = !s ? -errno : mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0 ? -errno : 0;
    if (r == 0)
        r = dump(s, RTM_GETROUTE, want_cb, &w);
    if (s)
        mnl_socket_close(s);
    return r < 0 ? r : w.action;
}

int lz_netpolicy_route_check(uint32_t addr) { return route_check(addr); }

int lz_netpolicy_host_deny(uint32_t addr, bool on) {
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0)
        return r;
    if (on) {
        r = hosts_rule(&nl);
        if (r == 0)
            r = route_in(&nl, LZ_NET_HOSTS_TABLE, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, addr, 32, RTN_PROHIBIT,
                         RT_SCOPE_UNIVERSE, 0, 0, false);
    } else {
        r = route_in(&nl, LZ_NET_HOSTS_TABLE, RTM_DELROUTE, 0, addr, 32, RTN_UNSPEC, RT_SCOPE_NOWHERE, 0, 0, false);
        if (r == -ESRCH)
            r = 0;
    }
    mnl_socket_close(nl.s);
    return r;
}

struct want_host {
    uint32_t addr;
    int found;
};

static int want_host_cb(const struct nlmsghdr *h, void *data) {
    struct want_host *w = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(h);
    if (rtm->rtm_family != AF_INET || rtm->rtm_dst_len != 32 || rtm->rtm_type != RTN_PROHIBIT)
        return MNL_CB_OK;
    const struct nlattr *tb[RTA_MAX + 1] = { 0 };
    mnl_attr_parse(h, sizeof *rtm, route_attr_cb, tb);
    uint32_t table = tb[RTA_TABLE] ? mnl_attr_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
    if (table == LZ_NET_HOSTS_TABLE && tb[RTA_DST] && ntohl(mnl_attr_get_u32(tb[RTA_DST])) == w->addr)
        w->found = 1;
    return MNL_CB_OK;
}

int lz_netpolicy_host_deny_get(uint32_t addr) {
    struct want_host w = { addr, 0 };
    struct mnl_socket *s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    int r = !s ? -errno : mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0 ? -errno : 0;
    if (r == 0)
        r = dump(s, RTM_GETROUTE, want_host_cb, &w);
    if (s)
        mnl_socket_close(s);
    return r < 0 ? r : w.found;
}
