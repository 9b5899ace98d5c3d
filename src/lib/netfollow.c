/* netfollow.c — see netfollow.h. */
#include "netfollow.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/capability.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#define DUMP_TIMEOUT_MS 2000
#define DUMP_ATTEMPTS 8

struct lz_netfollow {
    int fd;          /* host namespace, RTMGRP_IPV4_IFADDR */
    uint32_t portid; /* of fd: our own dump replies carry it */
    unsigned seq;
    struct lz_netpolicy pol;
    uint32_t *added; /* the /32 denies this follower installed in the main table */
    size_t n_added;
    uint32_t *hosts; /* the addresses in the host-address table (LZ_NET_HOSTS_TABLE) */
    size_t n_hosts;
    lz_log_fn log;
    void *log_ud;
};

static void fmt4(uint32_t a, char b[16]) {
    snprintf(b, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

static long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

int lz_netfollow_open_host_socket(struct lz_error *err) {
    _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return lz_error_set(err, -errno, "cannot watch the host's addresses (netlink): %s", strerror(errno));
    /* The default receive buffer: a burst that overflows it is not lost
     * (ENOBUFS makes the follower re-dump all addresses and reconcile). */
    struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_IPV4_IFADDR };
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return lz_error_set(err, -errno, "cannot watch the host's addresses (netlink bind): %s", strerror(errno));
    return TAKE_FD(fd);
}

bool lz_netfollow_needs_deny(const struct lz_netpolicy *p, uint32_t addr) {
    /* As at start (lz_host_ipv4_addrs, lz_netpolicy_derive): 127/8 is the
     * namespace's own loopback, and the DNS forwarder is always allowed. */
    if ((addr >> 24) == 127 || addr == LZ_NET_DNS)
        return false;
    /* Allowed by its longest prefix (an explicit allow of exactly this /32
     * included): it needs its own deny. Denied already: nothing to do. */
    return lz_netpolicy_lookup(p, addr) == LZ_NET_ALLOW;
}

static bool has(const uint32_t *v, size_t n, uint32_t a) {
    for (size_t i = 0; i < n; i++)
        if (v[i] == a)
            return true;
    return false;
}

void lz_netfollow_plan(const struct lz_netpolicy *p, const uint32_t *added, size_t n_added, const uint32_t *host,
                       size_t n_host, uint32_t **ret_add, size_t *ret_n_add, uint32_t **ret_remove,
                       size_t *ret_n_remove) {
    uint32_t *add = NULL, *rm = NULL;
    size_t na = 0, nr = 0;
    for (size_t i = 0; i < n_host; i++)
        if (lz_netfollow_needs_deny(p, host[i]) && !has(added, n_added, host[i]) && !has(add, na, host[i])) {
            add = lz_xrealloc(add, (na + 1) * sizeof *add);
            add[na++] = host[i];
        }
    for (size_t i = 0; i < n_added; i++)
        if (!has(host, n_host, added[i])) {
            rm = lz_xrealloc(rm, (nr + 1) * sizeof *rm);
            rm[nr++] = added[i];
        }
    *ret_add = add;
    *ret_n_add = na;
    *ret_remove = rm;
    *ret_n_remove = nr;
}

/* CAP_NET_ADMIN in the effective set only while a route changes. */
static int net_admin(bool on) {
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct caps[2];
    if (syscall(SYS_capget, &hdr, caps) < 0)
        return -errno;
    uint32_t bit = 1u << (CAP_NET_ADMIN % 32);
    if (on)
        caps[CAP_NET_ADMIN / 32].effective |= bit;
    else
        caps[CAP_NET_ADMIN / 32].effective &= ~bit;
    return syscall(SYS_capset, &hdr, caps) < 0 ? -errno : 0;
}

static int set_route(uint32_t a, int action) {
    int r = net_admin(true);
    if (r == 0)
        r = lz_netpolicy_route_set(a, 32, action);
    int d = net_admin(false);
    return r < 0 ? r : d;
}

static int deny(struct lz_netfollow *f, uint32_t a, const char *why, struct lz_error *err) {
    char s[16];
    fmt4(a, s);
    if (f->n_added >= LZ_NETFOLLOW_MAX_ADDRS)
        return lz_error_set(err, -E2BIG, "more than %d new host addresses to deny", LZ_NETFOLLOW_MAX_ADDRS);
    long t0 = now_us();
    int r = set_route(a, LZ_NET_DENY);
    if (r < 0)
        return lz_error_set(err, r, "cannot deny the new host address %s: %s", s, strerror(-r));
    /* Read back: the route as the table holds it, and the namespace's own
     * decision (a deny is an immediate EACCES). */
    int got = lz_netpolicy_route_get(a, 32);
    int c = lz_netpolicy_route_check(a);
    if (got != LZ_NET_DENY || c != -EACCES)
        return lz_error_set(err, -EIO, "the deny of the new host address %s did not read back (route %d, connect: %s)",
                            s, got, c ? strerror(-c) : "routable");
    f->added = lz_xrealloc(f->added, (f->n_added + 1) * sizeof *f->added);
    f->added[f->n_added++] = a;
    lz_logf(f->log, f->log_ud, "host address %s %s: /32 deny installed and read back in %.2f ms", s, why,
            (double)(now_us() - t0) / 1000.0);
    return 0;
}

static int undeny(struct lz_netfollow *f, uint32_t a, struct lz_error *err) {
    char s[16];
    fmt4(a, s);
    /* Only a deny we added goes; a configured allow of exactly this /32
     * (which the deny replaced) comes back. */
    int act = 0;
    for (size_t i = 0; i < f->pol.n; i++)
        if (f->pol.rules[i].addr == a && f->pol.rules[i].len == 32)
            act = f->pol.rules[i].action;
    long t0 = now_us();
    int r = set_route(a, act);
    if (r < 0)
        return lz_error_set(err, r, "cannot remove the deny of the former host address %s: %s", s, strerror(-r));
    int got = lz_netpolicy_route_get(a, 32);
    if (got != act)
        return lz_error_set(err, -EIO, "the route of the former host address %s did not read back (%d, want %d)", s,
                            got, act);
    for (size_t i = 0; i < f->n_added; i++)
        if (f->added[i] == a) {
            f->added[i] = f->added[--f->n_added];
            break;
        }
    lz_logf(f->log, f->log_ud, "host address %s is gone: its /32 deny %s and read back in %.2f ms", s,
            act ? "replaced by the configured route" : "removed", (double)(now_us() - t0) / 1000.0);
    return 0;
}

/* Every host address but the namespace's own (127/8, the resolver's
 * 10.0.2.3) has its prohibit route in the host-address table, whatever
 * the policy: the learned routes of egress by name are looked up before
 * the main table, this table before them (netpolicy.h). */
static bool host_table_wants(uint32_t a) { return (a >> 24) != 127 && a != LZ_NET_DNS; }

static int set_host(uint32_t a, bool on) {
    int r = net_admin(true);
    if (r == 0)
        r = lz_netpolicy_host_deny(a, on);
    int d = net_admin(false);
    return r < 0 ? r : d;
}

static int host_add(struct lz_netfollow *f, uint32_t a, struct lz_error *err) {
    char s[16];
    fmt4(a, s);
    if (f->n_hosts >= LZ_NETFOLLOW_MAX_ADDRS)
        return lz_error_set(err, -E2BIG, "more than %d host addresses to deny", LZ_NETFOLLOW_MAX_ADDRS);
    int r = set_host(a, true);
    if (r < 0)
        return lz_error_set(err, r, "cannot deny the host address %s before learned routes: %s", s, strerror(-r));
    if (lz_netpolicy_host_deny_get(a) != 1 || lz_netpolicy_route_check(a) != -EACCES)
        return lz_error_set(err, -EIO, "the host-address table's deny of %s did not read back", s);
    f->hosts = lz_xrealloc(f->hosts, (f->n_hosts + 1) * sizeof *f->hosts);
    f->hosts[f->n_hosts++] = a;
    return 0;
}

static int host_del(struct lz_netfollow *f, uint32_t a, struct lz_error *err) {
    char s[16];
    fmt4(a, s);
    int r = set_host(a, false);
    if (r < 0)
        return lz_error_set(err, r, "cannot remove the former host address %s from the host-address table: %s", s,
                            strerror(-r));
    if (lz_netpolicy_host_deny_get(a) != 0)
        return lz_error_set(err, -EIO, "the former host address %s is still in the host-address table", s);
    for (size_t i = 0; i < f->n_hosts; i++)
        if (f->hosts[i] == a) {
            f->hosts[i] = f->hosts[--f->n_hosts];
            break;
        }
    return 0;
}

/* Receives one datagram. 0: nothing pending (or a datagram not from the
 * kernel: anyone may unicast to a netlink socket, so those are dropped);
 * -ENOBUFS: events were lost; else its length. */
static ssize_t recv_kernel(int fd, void *buf, size_t cap) {
    struct sockaddr_nl sa;
    struct iovec iov = { buf, cap };
    struct msghdr m = { .msg_name = &sa, .msg_namelen = sizeof sa, .msg_iov = &iov, .msg_iovlen = 1 };
    for (;;) {
        ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        if (m.msg_flags & MSG_TRUNC)
            return -ENOBUFS; /* treat a cut datagram as lost events */
        if (m.msg_namelen != sizeof sa || sa.nl_pid != 0)
            return 0;
        return n;
    }
}

/* The local IPv4 address of an RTM_NEWADDR/RTM_DELADDR message. */
static bool msg_addr(const struct nlmsghdr *h, uint32_t *ret) {
    if (h->nlmsg_len < MNL_NLMSG_HDRLEN + MNL_ALIGN(sizeof(struct ifaddrmsg)))
        return false;
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
    if (ifa->ifa_family != AF_INET)
        return false;
    /* IFA_LOCAL is the host's own address (IFA_ADDRESS is the peer on a
     * point-to-point link, a VPN's tun); without it, IFA_ADDRESS. */
    bool have_local = false, have_addr = false;
    uint32_t local = 0, addr = 0;
    const struct nlattr *a;
    mnl_attr_for_each(a, h, sizeof *ifa) {
        if (mnl_attr_get_payload_len(a) != 4)
            continue;
        if (mnl_attr_get_type(a) == IFA_LOCAL)
            local = ntohl(mnl_attr_get_u32(a)), have_local = true;
        else if (mnl_attr_get_type(a) == IFA_ADDRESS)
            addr = ntohl(mnl_attr_get_u32(a)), have_addr = true;
    }
    if (!have_local && !have_addr)
        return false;
    *ret = have_local ? local : addr;
    return true;
}

static void push(uint32_t **v, size_t *n, uint32_t a) {
    if (has(*v, *n, a) || *n >= LZ_NETFOLLOW_MAX_ADDRS)
        return;
    *v = lz_xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = a;
}

/* One dump of the host's IPv4 addresses through the subscribed socket.
 * Events interleaved with the replies count too: a NEWADDR adds its
 * address; a DELADDR or a loss (ENOBUFS) sets *ret_churn (the dump may be
 * stale: the caller dumps again). */
static int dump_host(struct lz_netfollow *f, uint32_t **ret, size_t *ret_n, bool *ret_lost, bool *ret_churn) {
    char req[512] __attribute__((aligned(8)));
    struct nlmsghdr *h = mnl_nlmsg_put_header(req);
    h->nlmsg_type = RTM_GETADDR;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    h->nlmsg_seq = ++f->seq;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof *ifa);
    ifa->ifa_family = AF_INET;
    struct sockaddr_nl k = { .nl_family = AF_NETLINK };
    if (sendto(f->fd, h, h->nlmsg_len, MSG_NOSIGNAL, (struct sockaddr *)&k, sizeof k) < 0)
        return -errno;
    uint32_t *v = NULL;
    size_t n = 0;
    bool lost = false, churn = false;
    long deadline = lz_now_ms() + DUMP_TIMEOUT_MS;
    static char buf[1 << 16] __attribute__((aligned(8)));
    for (;;) {
        long left = deadline - lz_now_ms();
        if (left <= 0) {
            free(v);
            return -ETIMEDOUT;
        }
        struct pollfd p = { .fd = f->fd, .events = POLLIN };
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t len = recv_kernel(f->fd, buf, sizeof buf);
        if (len == -ENOBUFS) {
            lost = churn = true;
            continue;
        }
        if (len < 0) {
            free(v);
            return (int)len;
        }
        bool done = false;
        int rest = (int)len;
        for (const struct nlmsghdr *m = (const void *)buf; mnl_nlmsg_ok(m, rest); m = mnl_nlmsg_next(m, &rest)) {
            bool mine = m->nlmsg_seq == f->seq && m->nlmsg_pid == f->portid;
            uint32_t a;
            if (mine && m->nlmsg_type == NLMSG_DONE)
                done = true;
            else if (mine && m->nlmsg_type == NLMSG_ERROR) {
                free(v);
                return -EIO;
            } else if (m->nlmsg_type == RTM_NEWADDR && msg_addr(m, &a))
                push(&v, &n, a);
            else if (!mine && m->nlmsg_type == RTM_DELADDR)
                churn = true;
        }
        if (done)
            break;
    }
    *ret = v;
    *ret_n = n;
    *ret_lost = lost;
    *ret_churn = churn;
    return 0;
}

int lz_netfollow_reconcile(struct lz_netfollow *f, const char *why, struct lz_error *err) {
    long t0 = now_us();
    _cleanup_free_ uint32_t *host = NULL;
    size_t n_host = 0;
    bool lost = true, churn = true;
    int attempts = 0;
    while (churn && attempts < DUMP_ATTEMPTS) {
        free(host);
        host = NULL;
        attempts++;
        int r = dump_host(f, &host, &n_host, &lost, &churn);
        if (r < 0)
            return lz_error_set(err, r, "cannot list the host's addresses: %s", strerror(-r));
    }
    /* A dump that kept losing events may miss a new address: refuse. A
     * dump that only saw removals keeps some denies a while: safe. */
    if (lost)
        return lz_error_set(err, -ENOBUFS, "the host's addresses changed too fast to follow (%d dumps lost events)",
                            attempts);
    _cleanup_free_ uint32_t *add = NULL, *rm = NULL;
    size_t na = 0, nr = 0;
    lz_netfollow_plan(&f->pol, f->added, f->n_added, host, n_host, &add, &na, &rm, &nr);
    int r;
    size_t ha = 0, hr = 0;
    for (size_t i = 0; i < n_host; i++)
        if (host_table_wants(host[i]) && !has(f->hosts, f->n_hosts, host[i])) {
            if ((r = host_add(f, host[i], err)) < 0)
                return r;
            ha++;
        }
    for (size_t i = f->n_hosts; i-- > 0;)
        if (!has(host, n_host, f->hosts[i])) {
            if ((r = host_del(f, f->hosts[i], err)) < 0)
                return r;
            hr++;
        }
    for (size_t i = 0; i < na; i++)
        if ((r = deny(f, add[i], "is new", err)) < 0)
            return r;
    for (size_t i = 0; i < nr; i++)
        if ((r = undeny(f, rm[i], err)) < 0)
            return r;
    lz_logf(f->log, f->log_ud,
            "host addresses reconciled (%s): %zu IPv4 addresses, %zu in the host-address table (+%zu -%zu), "
            "%zu followed denies (+%zu -%zu), %d dump(s), %.2f ms",
            why, n_host, f->n_hosts, ha, hr, f->n_added, na, nr, attempts, (double)(now_us() - t0) / 1000.0);
    return 0;
}

int lz_netfollow_process(struct lz_netfollow *f, struct lz_error *err) {
    static char buf[1 << 16] __attribute__((aligned(8)));
    const char *why = NULL;
    char whybuf[64];
    /* Bounded: what is left makes the socket readable again. */
    for (int i = 0; i < 256; i++) {
        ssize_t len = recv_kernel(f->fd, buf, sizeof buf);
        if (len == -ENOBUFS) {
            why = "events lost (ENOBUFS)";
            continue;
        }
        if (len < 0)
            return lz_error_set(err, (int)len, "cannot follow the host's addresses: %s", strerror((int)-len));
        if (len == 0)
            break;
        int rest = (int)len;
        for (const struct nlmsghdr *m = (const void *)buf; mnl_nlmsg_ok(m, rest); m = mnl_nlmsg_next(m, &rest)) {
            uint32_t a;
            if (!msg_addr(m, &a))
                continue;
            if (m->nlmsg_type == RTM_NEWADDR && host_table_wants(a) && !has(f->hosts, f->n_hosts, a)) {
                int r = host_add(f, a, err);
                if (r < 0)
                    return r;
            }
            if (m->nlmsg_type == RTM_NEWADDR && lz_netfollow_needs_deny(&f->pol, a) && !has(f->added, f->n_added, a)) {
                int r = deny(f, a, "appeared (RTM_NEWADDR)", err);
                if (r < 0)
                    return r;
            } else if (m->nlmsg_type == RTM_DELADDR && (has(f->added, f->n_added, a) || has(f->hosts, f->n_hosts, a)) &&
                       !why) {
                /* The address may still be on another interface: only a
                 * dump tells. */
                char s[16];
                fmt4(a, s);
                snprintf(whybuf, sizeof whybuf, "RTM_DELADDR %s", s);
                why = whybuf;
            }
        }
    }
    return why ? lz_netfollow_reconcile(f, why, err) : 0;
}

int lz_netfollow_new(int host_fd, struct lz_netpolicy *pol, lz_log_fn log, void *log_ud, struct lz_netfollow **ret,
                     struct lz_error *err) {
    struct sockaddr_nl sa;
    socklen_t sl = sizeof sa;
    if (getsockname(host_fd, (struct sockaddr *)&sa, &sl) < 0 || sa.nl_family != AF_NETLINK ||
        !(sa.nl_groups & RTMGRP_IPV4_IFADDR)) {
        close(host_fd);
        return lz_error_set(err, -EBADF, "the host-address watch is not a subscribed netlink socket");
    }
    struct lz_netfollow *f = lz_xcalloc(1, sizeof *f);
    f->fd = host_fd;
    f->portid = sa.nl_pid;
    f->seq = (unsigned)time(NULL);
    f->pol = *pol;
    *pol = (struct lz_netpolicy){ 0 };
    f->log = log;
    f->log_ud = log_ud;
    *ret = f;
    return 0;
}

int lz_netfollow_fd(const struct lz_netfollow *f) { return f->fd; }

void lz_netfollow_free(struct lz_netfollow *f) {
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    lz_netpolicy_clear(&f->pol);
    free(f->added);
    free(f->hosts);
    free(f);
}
