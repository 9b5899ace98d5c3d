/* test_fqdnroute.c — learned-address routes (fqdnroute.h) and the
 * resolver's sockets (netpolicy.h, lz_netpolicy_dns_sockets), checked
 * against the kernel itself.
 *
 * The whole binary moves into a user + network namespace of its own (a
 * network namespace alone when run as root); every test then starts in a
 * fresh network namespace holding what the enforcement namespace holds: a
 * tap0 with 10.0.2.100/24 (a TUNSETIFF device, attached to the test), the
 * main table's prohibit default route and 10.0.2.0/24, lo up. The verdict
 * is the kernel's route lookup as a socket sees it: connect() on a
 * prohibit route fails at once with EACCES; a routed non-blocking TCP
 * connect is in progress, from tap0's address. Where namespaces cannot be
 * made (a CI container without user namespaces), the tests are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fqdnroute.h"
#include "netpolicy.h"
#include "rschan.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))
#define X7 A(198, 51, 100, 7)
#define X8 A(198, 51, 100, 8)
#define X9 A(198, 51, 100, 9)

static bool have_ns;
static int tap_fd = -EBADF;

static int write_file(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = lz_write_full(fd, s, strlen(s));
    close(fd);
    return r;
}

static int if_up(const char *name) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = { 0 };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return -errno;
    ifr.ifr_flags |= IFF_UP;
    return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

/* An IPv4 address on an interface (or a label "lo:N"), by ioctl. */
static int if_addr(const char *name, uint32_t addr, uint32_t mask) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = { 0 };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    struct sockaddr_in *sa = (struct sockaddr_in *)(void *)&ifr.ifr_addr;
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(addr);
    if (s < 0 || ioctl(s, SIOCSIFADDR, &ifr) < 0)
        return -errno;
    sa->sin_addr.s_addr = htonl(mask);
    return ioctl(s, SIOCSIFNETMASK, &ifr) < 0 ? -errno : 0;
}

/* A route put by hand (proto static, not Lazaret's): addr/32 via 10.0.2.2
 * dev tap0 onlink in table. 0 or -errno. */
static int hand_route(uint32_t addr, uint32_t table) {
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!nl)
        return -errno;
    char buf[512];
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_NEWROUTE;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    h->nlmsg_seq = 1;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(h, sizeof *rtm);
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = 32;
    rtm->rtm_protocol = RTPROT_STATIC;
    rtm->rtm_type = RTN_UNICAST;
    rtm->rtm_flags = RTNH_F_ONLINK;
    mnl_attr_put_u32(h, RTA_TABLE, table);
    mnl_attr_put_u32(h, RTA_DST, htonl(addr));
    mnl_attr_put_u32(h, RTA_GATEWAY, htonl(LZ_NET_GW));
    mnl_attr_put_u32(h, RTA_OIF, if_nametoindex(LZ_NET_TAP));
    int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID);
    if (r == 0 && mnl_socket_sendto(nl, h, h->nlmsg_len) < 0)
        r = -1;
    if (r == 0) {
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        r = n < 0 ? -1 : mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), NULL, NULL);
    }
    int e = errno;
    mnl_socket_close(nl);
    return r < 0 ? -e : 0;
}

static int group_setup(void **state) {
    (void)state;
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (uid == 0) {
        have_ns = unshare(CLONE_NEWNET) == 0;
        return 0;
    }
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        return 0;
    char m[64];
    snprintf(m, sizeof m, "0 %u 1\n", (unsigned)uid);
    if (write_file("/proc/self/uid_map", m) < 0 || write_file("/proc/self/setgroups", "deny") < 0)
        return 0;
    snprintf(m, sizeof m, "0 %u 1\n", (unsigned)gid);
    have_ns = write_file("/proc/self/gid_map", m) == 0;
    return 0;
}

/* A fresh namespace shaped as the enforcement namespace. */
static int setup(void **state) {
    (void)state;
    if (!have_ns)
        return 0;
    lz_closep(&tap_fd);
    assert_int_equal(unshare(CLONE_NEWNET), 0);
    assert_int_equal(if_up("lo"), 0);
    tap_fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    assert_true(tap_fd >= 0);
    struct ifreq ifr = { 0 };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", LZ_NET_TAP);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    assert_int_equal(ioctl(tap_fd, TUNSETIFF, &ifr), 0);
    assert_int_equal(if_addr(LZ_NET_TAP, LZ_NET_ADDR, 0xffffff00u), 0);
    assert_int_equal(if_up(LZ_NET_TAP), 0);
    assert_int_equal(lz_netpolicy_route_set(0, 0, LZ_NET_DENY), 0);
    assert_int_equal(lz_netpolicy_route_set(A(10, 0, 2, 0), 24, LZ_NET_DENY), 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lz_closep(&tap_fd);
    return 0;
}

#define NEED_NS()                                                                                                      \
    do {                                                                                                               \
        if (!have_ns)                                                                                                  \
            skip();                                                                                                    \
    } while (0)

/* 0: the kernel routes a connect to addr:port out through tap0 (type
 * SOCK_STREAM: a SYN in flight from tap0's address); else the negative
 * errno of connect() (-EXDEV: routed, but not from tap0's address). No
 * assertion: the forked child of test_holder_outside calls it too. */
static int reach(int type, uint32_t addr, uint16_t port) {
    _cleanup_close_ int s = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr) };
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
        return -errno;
    struct sockaddr_in me = { 0 };
    socklen_t ml = sizeof me;
    if (getsockname(s, (struct sockaddr *)&me, &ml) < 0)
        return -errno;
    return ntohl(me.sin_addr.s_addr) == LZ_NET_ADDR ? 0 : -EXDEV;
}
#define TCP(a, p) reach(SOCK_STREAM, (a), (p))
#define UDP(a, p) reach(SOCK_DGRAM, (a), (p))

static struct lz_fqdnroute *open_fr(void) {
    int rt = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    int dg = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    assert_true(rt >= 0 && dg >= 0);
    struct lz_fqdnroute *fr = NULL;
    struct lz_error err = { 0 };
    int r = lz_fqdnroute_open(rt, dg, &fr, &err);
    if (r < 0)
        fail_msg("lz_fqdnroute_open: %s", err.msg);
    return fr;
}

static void add(struct lz_fqdnroute *fr, uint32_t a, uint16_t p) {
    struct lz_error err = { 0 };
    if (lz_fqdnroute_add(fr, a, p, &err) < 0)
        fail_msg("add: %s", err.msg);
}

static void del(struct lz_fqdnroute *fr, uint32_t a, uint16_t p) {
    struct lz_error err = { 0 };
    if (lz_fqdnroute_del(fr, a, p, &err) < 0)
        fail_msg("del: %s", err.msg);
}

struct seen {
    uint32_t addr[16];
    uint16_t port[16];
    size_t n;
};

static void seen_cb(void *ud, uint32_t addr, uint16_t port) {
    struct seen *s = ud;
    assert_true(s->n < 16);
    s->addr[s->n] = addr;
    s->port[s->n++] = port;
}

static bool seen_has(const struct seen *s, uint32_t a, uint16_t p) {
    for (size_t i = 0; i < s->n; i++)
        if (s->addr[i] == a && s->port[i] == p)
            return true;
    return false;
}

static size_t list(struct lz_fqdnroute *fr, struct seen *s) {
    struct lz_error err = { 0 };
    memset(s, 0, sizeof *s);
    int n = lz_fqdnroute_list(fr, seen_cb, s, &err);
    if (n < 0)
        fail_msg("list: %s", err.msg);
    assert_int_equal((size_t)n, s->n);
    return s->n;
}

static void test_port_routes(void **state) {
    (void)state;
    NEED_NS();
    struct lz_fqdnroute *fr = open_fr();
    assert_int_equal(TCP(X7, 443), -EACCES); /* the prefix policy: prohibit */
    add(fr, X7, 443);
    assert_int_equal(TCP(X7, 443), 0);
    assert_int_equal(TCP(X7, 8080), -EACCES); /* not learned for that port */
    assert_int_equal(UDP(X7, 443), -EACCES);  /* nor over UDP */
    assert_int_equal(TCP(X8, 443), -EACCES);  /* nor another address */
    add(fr, X7, 443);                         /* idempotent */
    struct seen s;
    assert_int_equal(list(fr, &s), 1);
    del(fr, X7, 443);
    assert_int_equal(TCP(X7, 443), -EACCES);
    del(fr, X7, 443); /* gone already: fine */
    assert_int_equal(list(fr, &s), 0);
    lz_fqdnroute_free(fr);
}

static void test_every_port(void **state) {
    (void)state;
    NEED_NS();
    struct lz_fqdnroute *fr = open_fr();
    add(fr, X9, 0);
    assert_int_equal(TCP(X9, 443), 0);
    assert_int_equal(TCP(X9, 22), 0);
    assert_int_equal(TCP(X9, 65535), 0);
    assert_int_equal(UDP(X9, 53), -EACCES); /* TCP only */
    assert_int_equal(TCP(X7, 22), -EACCES);
    del(fr, X9, 0);
    assert_int_equal(TCP(X9, 22), -EACCES);
    lz_fqdnroute_free(fr);
}

static void test_list(void **state) {
    (void)state;
    NEED_NS();
    struct lz_fqdnroute *fr = open_fr();
    add(fr, X7, 443);
    add(fr, X7, 80);
    add(fr, X9, 0);
    struct seen s;
    assert_int_equal(list(fr, &s), 3);
    assert_true(seen_has(&s, X7, 443));
    assert_true(seen_has(&s, X7, 80));
    assert_true(seen_has(&s, X9, 0));
    del(fr, X7, 80);
    assert_int_equal(list(fr, &s), 2);
    assert_false(seen_has(&s, X7, 80));
    /* A route of another proto in a learned table is not Lazaret's. */
    assert_int_equal(lz_netpolicy_route_set(A(203, 0, 113, 0), 24, LZ_NET_ALLOW), 0);
    assert_int_equal(list(fr, &s), 2);
    lz_fqdnroute_free(fr);
}

/* A new holder (a restarted coordinator) starts from nothing: what an
 * earlier one learned is removed, routes and rules. */
static void test_open_flushes(void **state) {
    (void)state;
    NEED_NS();
    struct lz_fqdnroute *fr = open_fr();
    add(fr, X7, 443);
    add(fr, X8, 0);
    assert_int_equal(TCP(X7, 443), 0);
    lz_fqdnroute_free(fr);
    assert_int_equal(TCP(X7, 443), 0); /* the routes outlive their holder */
    fr = open_fr();
    struct seen s;
    assert_int_equal(list(fr, &s), 0);
    assert_int_equal(TCP(X7, 443), -EACCES);
    assert_int_equal(TCP(X8, 22), -EACCES);
    /* The rules went too: a route put into the learned tables by hand is
     * selected by no rule any more. */
    assert_int_equal(hand_route(X7, LZ_FQDN_TABLE0 + 443), 0);
    assert_int_equal(hand_route(X8, LZ_FQDN_TABLE0), 0);
    assert_int_equal(TCP(X7, 443), -EACCES);
    assert_int_equal(TCP(X8, 22), -EACCES);
    assert_int_equal(list(fr, &s), 0); /* not Lazaret's proto */
    /* and a new holder adds its rules again */
    add(fr, X9, 443);
    assert_int_equal(TCP(X7, 443), 0);
    lz_fqdnroute_free(fr);
}

static void test_in_use(void **state) {
    (void)state;
    NEED_NS();
    struct lz_fqdnroute *fr = open_fr();
    /* X7 as the namespace's own address: a real connection to it. */
    assert_int_equal(if_addr("lo:1", X7, 0xffffffffu), 0);
    _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(8443), .sin_addr.s_addr = htonl(X7) };
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(lz_fqdnroute_in_use(fr, X7), 0); /* a listener has no peer */
    _cleanup_close_ int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(A(127, 0, 0, 1)) };
    assert_int_equal(bind(c, (struct sockaddr *)&lo, sizeof lo), 0); /* the accepted end's peer is 127.0.0.1 */
    assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(lz_fqdnroute_in_use(fr, X7), 1);
    assert_int_equal(lz_fqdnroute_in_use(fr, X8), 0);
    assert_int_equal(lz_fqdnroute_in_use(fr, A(127, 0, 0, 1)), 1); /* the accepted end (not yet accepted) */
    /* A connection out through a learned route (its SYN sent on tap0,
     * nobody answering): counted by its peer, not by its own address. */
    add(fr, X8, 443);
    _cleanup_close_ int o = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in x8 = { .sin_family = AF_INET, .sin_port = htons(443), .sin_addr.s_addr = htonl(X8) };
    assert_int_equal(connect(o, (struct sockaddr *)&x8, sizeof x8), -1);
    assert_int_equal(errno, EINPROGRESS);
    assert_int_equal(lz_fqdnroute_in_use(fr, X8), 1);
    assert_int_equal(lz_fqdnroute_in_use(fr, LZ_NET_ADDR), 0);
    lz_closep(&o);
    assert_int_equal(lz_fqdnroute_in_use(fr, X8), 0); /* a SYN_SENT socket closes at once */
    lz_fqdnroute_free(fr);
}

/* The Supervisor's sockets for the resolver: 10.0.2.3:53 taken for UDP
 * and TCP; nothing else in the namespace can bind it beside them, even
 * with SO_REUSEADDR and SO_REUSEPORT. */
static void test_dns_sockets(void **state) {
    (void)state;
    NEED_NS();
    struct lz_error err = { 0 };
    int fds[LZ_NET_DNS_FDS];
    assert_int_equal(lz_netpolicy_dns_sockets(fds, &err), -EADDRNOTAVAIL); /* 10.0.2.3 not local yet */
    assert_int_equal(lz_netpolicy_dns_local(&err), 0);
    assert_int_equal(lz_netpolicy_dns_local(&err), 0); /* idempotent */
    if (lz_netpolicy_dns_sockets(fds, &err) < 0)
        fail_msg("%s", err.msg);
    static const int types[] = { SOCK_DGRAM, SOCK_STREAM };
    for (size_t i = 0; i < 2; i++)
        for (int opts = 0; opts < 2; opts++) {
            _cleanup_close_ int s = socket(AF_INET, types[i] | SOCK_CLOEXEC, 0);
            int one = 1;
            if (opts) {
                assert_int_equal(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
                assert_int_equal(setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one), 0);
            }
            struct sockaddr_in sa = { .sin_family = AF_INET,
                                      .sin_port = htons(53),
                                      .sin_addr.s_addr = htonl(LZ_NET_DNS) };
            assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), -1);
            assert_int_equal(errno, EADDRINUSE);
            /* Nor the wildcard address on that port. */
            _cleanup_close_ int w = socket(AF_INET, types[i] | SOCK_CLOEXEC, 0);
            if (opts) {
                assert_int_equal(setsockopt(w, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
                assert_int_equal(setsockopt(w, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one), 0);
            }
            struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(53) };
            assert_int_equal(bind(w, (struct sockaddr *)&any, sizeof any), -1);
            assert_int_equal(errno, EADDRINUSE);
        }
    /* The sandbox's view: 10.0.2.3 is local and answers at these sockets. */
    _cleanup_close_ int q = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in dns = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(LZ_NET_DNS) };
    assert_int_equal(sendto(q, "x", 1, 0, (struct sockaddr *)&dns, sizeof dns), 1);
    char b[4];
    assert_int_equal(recv(fds[LZ_NET_DNS_UDP], b, sizeof b, 0), 1);
    /* The route socket works for a holder (fqdnroute.h). */
    struct lz_fqdnroute *fr = NULL;
    if (lz_fqdnroute_open(fds[LZ_NET_DNS_RTNL], fds[LZ_NET_DNS_DIAG], &fr, &err) < 0)
        fail_msg("%s", err.msg);
    add(fr, X7, 443);
    assert_int_equal(TCP(X7, 443), 0);
    lz_fqdnroute_free(fr);
    close(fds[LZ_NET_DNS_UDP]);
    close(fds[LZ_NET_DNS_TCP]);
}

/* The policy's own preparation and install: 10.0.2.3 on lo, no main
 * route to it. */
static void test_policy_dns_local(void **state) {
    (void)state;
    NEED_NS();
    char *allow[] = { "198.18.0.0/15" };
    struct lz_config c = { 0 };
    c.profile.allow_egress = allow;
    c.profile.n_allow_egress = 1;
    struct lz_netpolicy p;
    struct lz_error err = { 0 };
    assert_int_equal(lz_netpolicy_derive(&c, NULL, 0, &p, &err), 0);
    if (lz_netpolicy_prepare(&err) < 0)
        fail_msg("prepare: %s", err.msg);
    if (lz_netpolicy_install(&p, &err) < 0)
        fail_msg("install: %s", err.msg);
    char sum[128];
    if (lz_netpolicy_observe(&p, sum, sizeof sum, &err) < 0)
        fail_msg("observe: %s", err.msg);
    if (lz_netpolicy_probe(&p, &err) < 0)
        fail_msg("probe: %s", err.msg);
    assert_int_equal(lz_netpolicy_route_get(LZ_NET_DNS, 32), 0); /* no main route to it */
    /* route_set (the follower) keeps that meaning */
    assert_int_equal(lz_netpolicy_route_set(LZ_NET_DNS, 32, LZ_NET_ALLOW), 0);
    assert_int_equal(lz_netpolicy_route_get(LZ_NET_DNS, 32), 0);
    /* A main-table route to 10.0.2.3 (a forwarder on tap0) is refused by
     * the read-back. */
    assert_int_equal(hand_route(LZ_NET_DNS, RT_TABLE_MAIN), 0);
    assert_int_equal(lz_netpolicy_route_get(LZ_NET_DNS, 32), LZ_NET_ALLOW);
    assert_int_equal(lz_netpolicy_observe(&p, sum, sizeof sum, &err), -EIO);
    lz_netpolicy_clear(&p);
}

/* The Domain's arrangement: the namespace belongs to a user namespace of
 * its own, whose "Supervisor" opens the sockets while it holds
 * CAP_NET_ADMIN there, then drops it and passes them; the holder (the
 * coordinator: the owner of that user namespace, outside it) changes the
 * namespace's routes through them. The child reports its verdicts in its
 * exit status (bit i: check i failed). */
static int child_checks(int sock) {
    char m[64];
    snprintf(m, sizeof m, "0 0 1\n"); /* uid 0 of the parent's user namespace, as in the Domain's map */
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 || write_file("/proc/self/setgroups", "deny") < 0 ||
        write_file("/proc/self/uid_map", m) < 0 || write_file("/proc/self/gid_map", m) < 0)
        return 100;
    if (if_up("lo") < 0)
        return 101;
    int tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    struct ifreq ifr = { 0 };
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", LZ_NET_TAP);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (tap < 0 || ioctl(tap, TUNSETIFF, &ifr) < 0 || if_addr(LZ_NET_TAP, LZ_NET_ADDR, 0xffffff00u) < 0 ||
        if_up(LZ_NET_TAP) < 0 || lz_netpolicy_route_set(0, 0, LZ_NET_DENY) < 0)
        return 102;
    struct lz_error err = { 0 };
    int fds[LZ_NET_DNS_FDS];
    if (lz_netpolicy_dns_local(&err) < 0 || lz_netpolicy_dns_sockets(fds, &err) < 0)
        return 103;
    /* CAP_NET_ADMIN gone, as the Supervisor's. */
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct caps[2];
    if (prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0) < 0 || syscall(SYS_capget, &hdr, caps) < 0)
        return 104;
    caps[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
    caps[CAP_NET_ADMIN / 32].permitted &= ~(1u << (CAP_NET_ADMIN % 32));
    if (syscall(SYS_capset, &hdr, caps) < 0 || lz_netpolicy_route_set(0, 0, LZ_NET_ALLOW) != -EPERM)
        return 105;
    int bad = 0;
    if (TCP(X7, 443) != -EACCES) /* before the holder has the sockets */
        bad |= 1;
    if (lz_rschan_send_fds(sock, LZ_RS_DNS, NULL, NULL, fds, LZ_NET_DNS_FDS) < 0)
        return 106;
    for (int i = 0; i < LZ_NET_DNS_FDS; i++)
        close(fds[i]);
    struct lz_rsmsg msg;
    if (lz_rschan_recv(sock, 5000, &msg) != 1) /* the holder added X7 on 443 */
        return 107;
    if (TCP(X7, 443) != 0)
        bad |= 2;
    if (TCP(X7, 8080) != -EACCES)
        bad |= 4;
    return bad;
}

static void test_holder_outside(void **state) {
    (void)state;
    NEED_NS();
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sp[0]);
        _exit(child_checks(sp[1]));
    }
    close(sp[1]);
    struct lz_rsmsg msg;
    int fds[LZ_RSCHAN_FDS_MAX];
    size_t n = 0;
    int r = lz_rschan_recv_fds(sp[0], 10000, &msg, fds, LZ_RSCHAN_FDS_MAX, &n);
    if (r == 1 && n == LZ_NET_DNS_FDS) {
        close(fds[LZ_NET_DNS_UDP]);
        close(fds[LZ_NET_DNS_TCP]);
        struct lz_fqdnroute *fr = NULL;
        struct lz_error err = { 0 };
        if (lz_fqdnroute_open(fds[LZ_NET_DNS_RTNL], fds[LZ_NET_DNS_DIAG], &fr, &err) < 0)
            print_error("open: %s\n", err.msg);
        else if (lz_fqdnroute_add(fr, X7, 443, &err) < 0)
            print_error("add: %s\n", err.msg);
        lz_fqdnroute_free(fr);
        assert_int_equal(lz_rschan_send(sp[0], LZ_RS_NET, NULL, NULL), 0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(sp[0]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(r, 1);
    assert_int_equal(n, LZ_NET_DNS_FDS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_port_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_port, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_flushes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_sockets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_dns_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_outside, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
