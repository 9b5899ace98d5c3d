/* hc_net.c — see hc_net.h. */
#include "hc_net.h"
#include "audit.h"
#include "fqdnroute.h"
#include "hc_creds.h"
#include "hc_session.h"
#include "paths.h"
#include "procenv.h"
#include "resolver.h"
#include "spawn.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>

/* Per generation: network rows in the audit, and distinct (kind, name)
 * pairs remembered for "once per name" (audit rows of refusals and
 * filters, terminal notices). Past either bound one "suppressed" row says
 * so and the rest goes to the coordinator's log only. */
#define NET_AUDIT_MAX 512
#define NET_SEEN_MAX 1024

/* An audit row waiting for the end of its dispatch: the rows of one
 * dispatch are appended in one transaction (one sync for a burst of
 * learned names instead of one each). */
struct net_row {
    struct lz_audit_net_entry e;
    char name[LZ_HOSTRULE_TEXT_MAX + 1];
    uint32_t addrs[LZ_RESOLVER_EVENT_ADDRS];
    char ports[LZ_HOSTPORTS_MAX * 6 + 8];
    char detail[257];
};
#define NET_ROWS_MAX 160 /* one dispatch: 8 rounds of 16 events, one row each at most, and allow_host */

struct hc_net {
    struct lz_resolver *res;
    struct lz_fqdnroute *fr;
    struct lz_child gate; /* lazaret-gate, or pidfd -EBADF without one */
    unsigned audited;     /* rows queued this generation (the bound counts them) */
    bool suppressed;
    size_t n_rows;
    struct net_row rows[NET_ROWS_MAX];
    size_t n_seen;
    char *seen[NET_SEEN_MAX];
};

static int route_add(void *ud, uint32_t addr, uint16_t port, struct lz_error *err) {
    return lz_fqdnroute_add(ud, addr, port, err);
}
static int route_del(void *ud, uint32_t addr, uint16_t port, struct lz_error *err) {
    return lz_fqdnroute_del(ud, addr, port, err);
}
static int route_in_use(void *ud, uint32_t addr) { return lz_fqdnroute_in_use(ud, addr); }

static void free_net(struct hc_net *n) {
    if (!n)
        return;
    if (n->gate.pidfd >= 0) {
        int st;
        lz_child_stop(&n->gate, 1000, &st);
    }
    lz_child_close(&n->gate);
    lz_resolver_stop(n->res); /* first: its thread uses the routes */
    lz_fqdnroute_free(n->fr);
    for (size_t i = 0; i < n->n_seen; i++)
        free(n->seen[i]);
    free(n);
}

/* Starts lazaret-gate on the listener (taken) with one end of a new
 * channel; *ret_chan: the resolver's end. */
static int gate_start(struct hc *h, struct hc_net *n, int *listener, int *ret_chan, struct lz_error *err) {
    _cleanup_free_ char *path = NULL;
    int r = lz_libexec_path("lazaret-gate", &path, err);
    if (r < 0) {
        lz_closep(listener);
        return r;
    }
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        r = -errno;
        lz_closep(listener);
        return lz_error_set(err, r, "cannot make the TLS gate's channel: %s", strerror(-r));
    }
    /* Credentials: the gate's configuration through a stream of its own
     * (gateproto.h), read before it drops its privileges. */
    int cf[2] = { -1, -1 };
    if (hc_creds_gated(h) && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cf) < 0) {
        r = -errno;
        close(sp[0]);
        close(sp[1]);
        lz_closep(listener);
        return lz_error_set(err, r, "cannot make the TLS gate's configuration socket: %s", strerror(-r));
    }
    char lfd[16], cfd[16], gfd[16];
    snprintf(lfd, sizeof lfd, "%d", *listener);
    snprintf(cfd, sizeof cfd, "%d", sp[1]);
    snprintf(gfd, sizeof gfd, "%d", cf[1]);
    char *argv[] = { path, (char *)"--listen-fd",
                     lfd,  (char *)"--channel-fd",
                     cfd,  cf[1] >= 0 ? (char *)"--config-fd" : NULL,
                     gfd,  NULL };
    int keep[] = { *listener, sp[1], cf[1] };
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_HELPER);
    struct lz_spawn_opts o = { .path = path,
                               .argv = argv,
                               .envp = envp,
                               .stdin_fd = -1,
                               .stdout_fd = 2,
                               .stderr_fd = 2,
                               .keep_fds = keep,
                               .n_keep_fds = cf[1] >= 0 ? 3 : 2,
                               .setns_pidfd = -1,
                               .pdeathsig = SIGKILL };
    r = lz_spawn(&o, &n->gate);
    /* The gate holds the listener from now on: when it ends, the
     * listener closes and connections to learned addresses on 443 are
     * refused by the kernel (fail closed). */
    lz_closep(listener);
    close(sp[1]);
    lz_closep(&cf[1]);
    if (r < 0) {
        close(sp[0]);
        lz_closep(&cf[0]);
        n->gate = LZ_CHILD_NULL;
        return lz_error_set(err, r, "cannot start lazaret-gate: %s", strerror(-r));
    }
    if (cf[0] >= 0) {
        r = hc_creds_send(h, cf[0], err);
        close(cf[0]);
        if (r < 0) {
            close(sp[0]);
            return r; /* free_net stops the gate */
        }
    }
    *ret_chan = sp[0];
    return 0;
}

int hc_net_start(struct hc *h, struct lz_error *err) {
    int *fd = h->boot.dns_fd;
    if (fd[0] < 0 || fd[1] < 0 || fd[2] < 0 || fd[3] < 0)
        return lz_error_set(err, -EPROTO, "the Runtime Supervisor passed no DNS sockets");
    const struct lz_config *c = h->cfg;
    struct hc_net *n = calloc(1, sizeof *n);
    if (!n)
        return lz_error_set(err, -ENOMEM, "out of memory");
    n->gate = LZ_CHILD_NULL;
    int r = lz_fqdnroute_open(fd[2], fd[3], &n->fr, err);
    fd[2] = fd[3] = -EBADF;
    /* The TLS gate: under a names preset unless the profile turns it off. */
    bool gate = c->profile.egress != LZ_EGRESS_OPEN && c->profile.tls_gate != LZ_TLS_GATE_OFF;
    int gate_chan = -EBADF;
    if (r == 0 && gate) {
        r = lz_fqdnroute_set_gate(n->fr, LZ_GATE_PORT, err);
        if (r == 0)
            r = gate_start(h, n, &fd[LZ_NET_DNS_GATE], &gate_chan, err);
    }
    lz_closep(&fd[LZ_NET_DNS_GATE]); /* no gate: nothing listens on 443 */
    struct sockaddr_in up = { 0 };
    if (r == 0) {
        if (c->resolver_set)
            up = c->resolver;
        else if (lz_resolver_upstream_from_resolv_conf("/etc/resolv.conf", &up, err) < 0) {
            /* The sandbox still starts: names it may resolve fail
             * (SERVFAIL), addresses its prefixes allow still work. */
            hc_log("WARNING: %s; no name will resolve in the sandbox", err->msg);
            up = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = 0 };
            *err = (struct lz_error){ 0 };
        }
    }
    /* The answers' filter: every deny of the policy (the default and the
     * profile's deny prefixes, the host's addresses at start). */
    struct lz_netrule *deny = NULL;
    size_t n_deny = 0;
    uint32_t *host = NULL;
    size_t n_host = 0;
    if (r == 0) {
        deny = calloc(h->policy.n ? h->policy.n : 1, sizeof *deny);
        for (size_t i = 0; deny && i < h->policy.n; i++)
            if (h->policy.rules[i].action == LZ_NET_DENY)
                deny[n_deny++] = h->policy.rules[i];
        if (lz_host_ipv4_addrs(&host, &n_host) < 0)
            n_host = 0;
        struct lz_resolver_config rc = {
            .allow = c->profile.allow_hosts,
            .n_allow = c->profile.n_allow_hosts,
            .deny = c->profile.deny_hosts,
            .n_deny = c->profile.n_deny_hosts,
            .any_name = c->profile.egress == LZ_EGRESS_OPEN,
            .deny_net = deny,
            .n_deny_net = n_deny,
            .host_addrs = host,
            .n_host = n_host,
            .upstream = up,
            .udp_fd = fd[0],
            .tcp_fd = fd[1],
            .routes = { .ud = n->fr, .add = route_add, .del = route_del, .in_use = route_in_use },
            .gate = gate,
            .gate_fd = gate_chan,
            .gate_lenient = c->profile.tls_gate == LZ_TLS_GATE_LENIENT,
            /* A developer's tools resolve in bursts (a package manager's
             * first install); the bound is against a runaway loop, not a
             * policy (a refused name is never forwarded anyway). */
            .qps = 500,
        };
        r = deny ? lz_resolver_start(&rc, &n->res, err) : lz_error_set(err, -ENOMEM, "out of memory");
        fd[0] = fd[1] = -EBADF; /* taken, also on failure */
        gate_chan = -EBADF;
    }
    lz_closep(&gate_chan);
    free(deny);
    free(host);
    if (r < 0) {
        free_net(n);
        return r;
    }
    char ua[INET_ADDRSTRLEN] = "none";
    if (up.sin_port)
        inet_ntop(AF_INET, &up.sin_addr, ua, sizeof ua);
    hc_log("resolver on 10.0.2.3:53: egress %s, %zu allow and %zu deny host rules, upstream %s:%u; TLS gate %s",
           lz_egress_name(c->profile.egress), c->profile.n_allow_hosts, c->profile.n_deny_hosts, ua,
           (unsigned)ntohs(up.sin_port), gate ? lz_tls_gate_name(c->profile.tls_gate) : "none");
    h->net = n;
    return 0;
}

void hc_net_stop(struct hc *h) {
    for (int i = 0; i < LZ_NET_DNS_FDS; i++)
        lz_closep(&h->boot.dns_fd[i]);
    free_net(h->net);
    h->net = NULL;
}

int hc_net_fd(struct hc *h) { return h->net ? lz_resolver_event_fd(h->net->res) : -1; }

char *hc_net_report(struct hc *h) {
    if (!h->net)
        return lz_xstrdup("This Domain's resolver is not running (the Domain is starting or stopping).\n");
    char *t = lz_resolver_report(h->net->res);
    return t ? t : lz_xstrdup("The resolver's report is not available (out of memory).\n");
}

/* "tcp/443,8443"; for every port "tcp/" and a star; or "" */
static void ports_text(const struct lz_hostports *p, char *buf, size_t cap) {
    buf[0] = '\0';
    if (p->all) {
        snprintf(buf, cap, "tcp/*");
        return;
    }
    size_t o = 0;
    for (uint16_t i = 0; i < p->n && o < cap; i++) {
        int k = snprintf(buf + o, cap - o, "%s%u", i ? "," : "tcp/", (unsigned)p->ports[i]);
        if (k < 0)
            break;
        o += (size_t)k;
    }
}

/* First time this (kind, name) is seen in this generation? Bounded: past
 * NET_SEEN_MAX, nothing is "first" any more. */
static bool first_seen(struct hc_net *n, int kind, const char *name) {
    char key[LZ_HOSTNAME_MAX + 160];
    snprintf(key, sizeof key, "%d:%s", kind, name);
    for (size_t i = 0; i < n->n_seen; i++)
        if (!strcmp(n->seen[i], key))
            return false;
    if (n->n_seen >= NET_SEEN_MAX)
        return false;
    n->seen[n->n_seen++] = lz_xstrdup(key);
    return true;
}

static void audit_net(struct hc *h, enum lz_audit_net_event kind, const char *name, const uint32_t *addrs,
                      size_t n_addrs, const char *ports, const char *detail, int64_t at_ms) {
    struct hc_net *n = h->net;
    if (!h->st)
        return;
    struct lz_audit_net_entry e = { .gen = h->gen,
                                    .at_ms = at_ms,
                                    .name = name,
                                    .addrs = addrs,
                                    .n_addrs = n_addrs,
                                    .ports = ports,
                                    .detail = detail };
    if (n->audited >= NET_AUDIT_MAX) {
        if (n->suppressed)
            return;
        n->suppressed = true;
        e.event = LZ_AUDIT_NET_SUPPRESSED;
        e.name = "";
        e.n_addrs = 0;
        e.ports = "";
        e.detail = "further network decisions of this generation are in the coordinator log only";
    } else {
        e.event = kind;
    }
    if (n->n_rows >= NET_ROWS_MAX) {
        hc_log("dns: an audit row was not recorded (more than %d in one dispatch): %s %s", NET_ROWS_MAX,
               lz_audit_net_event_name(e.event), e.name);
        return;
    }
    struct net_row *w = &n->rows[n->n_rows++];
    snprintf(w->name, sizeof w->name, "%s", e.name);
    snprintf(w->ports, sizeof w->ports, "%s", e.ports);
    snprintf(w->detail, sizeof w->detail, "%s", e.detail);
    size_t na = e.n_addrs < LZ_ARRAY_SIZE(w->addrs) ? e.n_addrs : LZ_ARRAY_SIZE(w->addrs);
    if (na)
        memcpy(w->addrs, e.addrs, na * sizeof *w->addrs);
    w->e = e;
    w->e.name = w->name;
    w->e.addrs = w->addrs;
    w->e.n_addrs = na;
    w->e.ports = w->ports;
    w->e.detail = w->detail;
    n->audited++;
}

/* Appends the queued rows: one transaction for all of them; when that
 * fails, each row on its own (a row that still fails is logged). */
static void audit_flush(struct hc *h) {
    struct hc_net *n = h->net;
    if (!n || n->n_rows == 0 || !h->st)
        return;
    struct lz_error err = { 0 };
    bool one = n->n_rows > 1 && lz_store_begin(h->st, &err) == 0;
    size_t i = 0;
    if (one) {
        for (; i < n->n_rows; i++)
            if (lz_audit_append_net(h->st, &n->rows[i].e, NULL, &err) < 0)
                break;
        if (i == n->n_rows && lz_store_commit(h->st, &err) == 0) {
            n->n_rows = 0;
            return;
        }
        lz_store_rollback(h->st);
        hc_log("dns: the audit rows of this dispatch did not go in together (%s); one at a time", err.msg);
    }
    for (i = 0; i < n->n_rows; i++) {
        err = (struct lz_error){ 0 };
        if (lz_audit_append_net(h->st, &n->rows[i].e, NULL, &err) < 0)
            hc_log("cannot append a network row to the audit: %s", err.msg);
    }
    n->n_rows = 0;
}

/* One line on every attached terminal that can take it now (not while a
 * prompt holds the screen). */
static void notice_all(struct hc *h, const char *msg) {
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (!s || !s->recorded || s->state != S_RUNNING || (s->filter && s->filter->output_blocked(s)))
            continue;
        hc_session_send(s, LZ_MSG_NOTICE, 0, msg, strlen(msg));
    }
}

static void addrs_text(const struct lz_resolver_event *e, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < e->n_addrs && i < LZ_RESOLVER_EVENT_ADDRS && o < cap; i++) {
        struct in_addr ia = { .s_addr = htonl(e->addrs[i]) };
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &ia, a, sizeof a);
        int k = snprintf(buf + o, cap - o, "%s%s", i ? " " : "", a);
        if (k < 0)
            break;
        o += (size_t)k;
    }
}

static void handle(struct hc *h, const struct lz_resolver_event *e) {
    struct hc_net *n = h->net;
    char ports[LZ_HOSTPORTS_MAX * 6 + 8], addrs[LZ_RESOLVER_EVENT_ADDRS * 16 + 1], detail[200];
    ports_text(&e->ports, ports, sizeof ports);
    addrs_text(e, addrs, sizeof addrs);
    size_t na = e->n_addrs < LZ_RESOLVER_EVENT_ADDRS ? e->n_addrs : LZ_RESOLVER_EVENT_ADDRS;
    switch (e->kind) {
    case LZ_RES_LEARNED:
        hc_log("dns: learned %s -> %s %s for %" PRIu32 " s", e->name, addrs, ports, e->lifetime);
        snprintf(detail, sizeof detail, "ttl %" PRIu32, e->lifetime);
        audit_net(h, LZ_AUDIT_NET_LEARNED, e->name, e->addrs, na, ports, detail, e->wall_ms);
        break;
    case LZ_RES_REFUSED:
    case LZ_RES_DENIED: {
        bool denied = e->kind == LZ_RES_DENIED;
        hc_log("dns: refused %s (%s)%s%s", e->name, denied ? "a deny_hosts rule matches" : "no allow rule",
               e->why[0] ? ": " : "", e->why);
        if (!first_seen(n, e->kind, e->name))
            break;
        audit_net(h, denied ? LZ_AUDIT_NET_DENIED : LZ_AUDIT_NET_REFUSED, e->name, NULL, 0, "",
                  denied ? "a deny_hosts rule matches" : "no allow_hosts rule matches", e->wall_ms);
        char msg[LZ_HOSTNAME_MAX + 256];
        if (denied)
            snprintf(msg, sizeof msg, "the sandbox looked up %s, which this profile's deny_hosts refuses", e->name);
        else
            snprintf(msg, sizeof msg,
                     "the sandbox looked up %s, which this profile does not allow (`lazaret net` lists refusals; "
                     "allow_hosts in lazaret.toml(5), or lazaret-escalate --allow-host from inside)",
                     e->name);
        notice_all(h, msg);
        break;
    }
    case LZ_RES_FILTERED:
        hc_log("dns: %s answered %s, not learned: %s", e->name, addrs, e->why);
        if (first_seen(n, e->kind, e->name))
            audit_net(h, LZ_AUDIT_NET_FILTERED, e->name, e->addrs, na, "", e->why, e->wall_ms);
        break;
    case LZ_RES_LIMITED:
        hc_log("dns: a bound was hit: %s", e->why);
        if (first_seen(n, e->kind, e->why))
            audit_net(h, LZ_AUDIT_NET_LIMITED, e->name, NULL, 0, "", e->why, e->wall_ms);
        break;
    case LZ_RES_EXPIRED:
        hc_log("dns: routes to %s removed (%s%s%s)", addrs, e->name, e->why[0] ? ": " : "", e->why);
        break;
    case LZ_RES_FAILED: hc_log("dns: %s: %s", e->name[0] ? e->name : addrs, e->why); break;
    case LZ_RES_TLS_REFUSED: {
        hc_log("tls gate: refused %s %s: %s", addrs, e->name[0] ? e->name : "(no server name)", e->why);
        char key[LZ_HOSTNAME_MAX + 20];
        snprintf(key, sizeof key, "%s %s", e->name, addrs);
        if (!first_seen(n, e->kind, key))
            break;
        audit_net(h, LZ_AUDIT_NET_TLS_REFUSED, e->name, e->addrs, na, ports, e->why, e->wall_ms);
        char msg[LZ_HOSTNAME_MAX + 300];
        snprintf(msg, sizeof msg,
                 "an HTTPS connection to %s was refused: %s (`lazaret net`; tls_gate in lazaret.toml(5))",
                 e->name[0] ? e->name : addrs, e->why);
        notice_all(h, msg);
        break;
    }
    case LZ_RES_CRED_REFUSED: {
        /* Every refused request is a row (the generation's bound applies);
         * the terminal hears of each host and reason once. */
        hc_log("tls gate: refused a request to %s (%s): %s", e->name, addrs, e->why);
        audit_net(h, LZ_AUDIT_NET_CREDENTIAL_REFUSED, e->name, e->addrs, na, ports, e->why, e->wall_ms);
        char key[LZ_HOSTNAME_MAX + 220];
        snprintf(key, sizeof key, "%s %s", e->name, e->why);
        if (!first_seen(n, e->kind, key))
            break;
        char msg[LZ_HOSTNAME_MAX + 300];
        snprintf(msg, sizeof msg, "a request to %s was refused: %s (docs/credentials.md)", e->name, e->why);
        notice_all(h, msg);
        break;
    }
    case LZ_RES_GIT_PUSH:
        /* Every pushed ref is a row (the bound of the generation applies). */
        hc_log("tls gate: push to %s: %s", e->name, e->why);
        audit_net(h, LZ_AUDIT_NET_GIT_PUSH, e->name, e->addrs, na, ports, e->why, e->wall_ms);
        break;
    }
}

void hc_net_dispatch(struct hc *h) {
    if (!h->net)
        return;
    /* The gate's end reaches the resolver as its channel's end (an event,
     * hence this dispatch): reap it here. */
    int st;
    if (h->net->gate.pidfd >= 0 && lz_child_try_reap(&h->net->gate, &st) == 1) {
        /* (lz_child_try_reap closed its pidfd) */
        hc_log("lazaret-gate ended (status %d): HTTPS to learned names is refused until the Domain restarts", st);
    }
    struct lz_resolver_event ev[16];
    uint64_t lost = 0;
    /* Bounded per call: the event loop comes back while more wait. */
    for (int round = 0; round < 8; round++) {
        size_t k = lz_resolver_events(h->net->res, ev, LZ_ARRAY_SIZE(ev), &lost);
        for (size_t i = 0; i < k; i++)
            handle(h, &ev[i]);
        if (lost)
            hc_log("dns: %" PRIu64 " resolver events were lost (the coordinator fell behind)", lost);
        if (k < LZ_ARRAY_SIZE(ev))
            break;
    }
    audit_flush(h);
}

int hc_net_allow_host(struct hc *h, const struct lz_hostrule *rule, struct lz_error *err) {
    if (!h->net)
        return lz_error_set(err, -ESRCH, "this Domain's resolver is not running");
    int r = lz_resolver_allow(h->net->res, rule, err);
    char text[LZ_HOSTRULE_TEXT_MAX];
    lz_hostrule_format(rule, text, sizeof text);
    if (r < 0) {
        hc_log("dns: the developer allowed %s, but it could not be added: %s", text, err->msg);
        return r;
    }
    hc_log("dns: the developer allowed %s for the rest of this Domain's run", text);
    audit_net(h, LZ_AUDIT_NET_ALLOWED, text, NULL, 0, "", "allowed by the developer (escalation)", 0);
    audit_flush(h);
    return 0;
}
