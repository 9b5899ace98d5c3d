/* coordinator.c — see coordinator.h. The entry point, the event loop and
 * the control requests (lazaret ps, stop: the relay hands them here); the
 * Domain's start and teardown are in generation.c, the sessions in
 * session.c, escalation in escalation.c, whose port this file wires to
 * the prompt and the sessions (hc.h). */
#include "hc.h"
#include "hc_esc.h"
#include "hc_gen.h"
#include "hc_creds.h"
#include "hc_net.h"
#include "hc_refusal.h"
#include "hc_prompt.h"
#include "publish.h"
#include "hc_session.h"
#include "paths.h"
#include "procenv.h"
#include "readiness.h"
#include "recovery.h"
#include "rschan.h"

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

/* `lazaret ps` / `lazaret stop` / `lazaret net` / `lazaret events` on a
 * control connection. */
static void control_request(struct hc *h, struct session *s, const uint8_t *buf, size_t n) {
    s->state = S_DONE;
    uint8_t type;
    uint32_t flags;
    if (lz_control_decode(buf, n, &type, &flags) < 0) {
        hc_session_refuse(s, LZ_REFUSE_PROTOCOL, "malformed control request");
        return;
    }
    if (type == LZ_MSG_EVENTS) {
        char *t = hc_ref_report(h, LZ_PROTO_DATA_MAX);
        if (!t || strlen(t) > LZ_PROTO_DATA_MAX)
            hc_session_refuse(s, LZ_REFUSE_PROTOCOL, "the refusals could not be listed");
        else
            hc_session_send(s, LZ_MSG_EVENTS_REPLY, 0, t, strlen(t));
        free(t);
        return;
    }
    if (type == LZ_MSG_NET) {
        char *t = hc_net_report(h);
        size_t len = strlen(t);
        hc_session_send(s, LZ_MSG_NET_REPLY, 0, t, len < LZ_PROTO_DATA_MAX ? len : LZ_PROTO_DATA_MAX);
        free(t);
        return;
    }
    if (type == LZ_MSG_STOP) {
        uint8_t st[4] = { 0 };
        if ((flags & LZ_STOP_IF_LINGERING) && !h->lingering && !h->stopping) {
            lz_put_u32(st, 1); /* sessions are live (or starting): not stopped */
            hc_session_send(s, LZ_MSG_EXIT, 0, st, sizeof st);
            return;
        }
        hc_session_send(s, LZ_MSG_EXIT, 0, st, sizeof st);
        if (flags & LZ_STOP_IF_LINGERING) {
            hc_begin_stop(h, "the Domain had no session left; it is stopped for `lazaret state reset`", false);
            return;
        }
        hc_begin_stop(h,
                      (flags & LZ_STOP_FORCE) ? "the Domain is being stopped (lazaret stop --force)"
                                              : "the Domain is being stopped (lazaret stop)",
                      flags & LZ_STOP_FORCE);
        return;
    }
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:I,s:i,s:s,s:b}", "domain_id", h->cfg->domain_id_hex, "profile", h->cfg->profile.name,
                  "workspace", h->cfg->workspace, "generation", (json_int_t)h->gen, "coordinator_pid", (int)getpid(),
                  "fingerprint", h->cfg->fingerprint_hex, "stopping", h->stopping);
    json_object_set_new(o, "lingering", json_boolean(h->lingering));
    if (h->lingering) {
        long left = h->linger_until - lz_now_ms();
        json_object_set_new(o, "linger_left_ms", json_integer(left > 0 ? left : 0));
    }
    json_object_set_new(o, "domain_dir", json_string(h->cfg->domain_dir));
    json_object_set_new(o, "refusals", json_integer((json_int_t)hc_ref_total(h)));
    if (h->fuse_transport[0])
        json_object_set_new(o, "fuse_transport", json_string(h->fuse_transport));
    /* Which repository and branch the Domain works on, read now (the
     * agent switches branches): a linked worktree's own HEAD, or the
     * workspace's `.git`. */
    {
        _cleanup_free_ char *wsgit = lz_xasprintf("%s/.git", h->cfg->workspace);
        const char *gd = h->wt.name ? h->wt.gitdir : wsgit;
        _cleanup_free_ char *branch = lz_worktree_head(gd);
        if (h->wt.name) {
            json_object_set_new(o, "repository", json_string(h->wt.repo));
            json_object_set_new(o, "worktree", json_string(h->wt.name));
        } else if (branch) {
            json_object_set_new(o, "repository", json_string(h->cfg->workspace));
        }
        if (branch)
            json_object_set_new(o, "branch", json_string(branch));
    }
    json_t *pub = json_array();
    for (size_t i = 0; i < h->cfg->profile.n_publish; i++) {
        char t[LZ_PUBLISH_TEXT_MAX];
        lz_publish_format(&h->cfg->profile.publish[i], t, sizeof t);
        json_array_append_new(pub, json_string(t));
    }
    json_object_set_new(o, "published", pub);
    json_t *arr = json_array();
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *t = h->s[i];
        if (!t || t == s || !t->recorded)
            continue;
        static const char *const names[] = { "starting", "running", "draining", "releasing", "done" };
        json_array_append_new(arr,
                              json_pack("{s:i,s:b,s:s,s:I,s:s}", "session", t->id, "tty", t->tty, "command",
                                        t->command ? t->command : "", "started_ms", (json_int_t)t->started_wall,
                                        "state", names[t->state]));
    }
    json_object_set_new(o, "sessions", arr);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!txt || strlen(txt) > LZ_PROTO_DATA_MAX) {
        hc_session_refuse(s, LZ_REFUSE_PROTOCOL, "status too large");
    } else {
        hc_session_send(s, LZ_MSG_STATUS_REPLY, 0, txt, strlen(txt));
    }
    free(txt);
}

/* The event loop's fixed descriptors, before the sessions' (below). */
#define NFIXED 7
/* The latest the resolver and gate start after publication when no
 * session has its process spec by then (net_start_when_due). */
#define NET_START_WAIT_MS 200

static void accept_clients(struct hc *h) {
    for (int k = 0; k < 16; k++) {
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != getuid()) {
            close(fd);
            continue;
        }
        int slot = -1;
        for (int i = 0; i < MAX_SESSIONS; i++)
            if (!h->s[i]) {
                slot = i;
                break;
            }
        struct session *s = hc_session_new(h);
        s->sock = fd;
        if (slot < 0) {
            hc_session_refuse(s, LZ_REFUSE_LAUNCH, "too many sessions in this Domain");
            close(fd);
            free(s);
            continue;
        }
        h->s[slot] = s;
    }
}

static int live_sessions(struct hc *h) {
    int n = 0;
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h->s[i])
            n++;
    return n;
}

/* The warm linger ([storage] linger_seconds): when the last session has
 * left a running Domain, it stays up for the linger period so that the
 * next command joins it instead of paying a cold start; a session that
 * starts meanwhile ends the linger (the model's StartReadySession), and
 * `lazaret stop` or a failure ends it at once. A status or stop request
 * (lazaret ps, lazaret stop) is not a session: it neither starts nor ends
 * it. True while the Domain lingers (the loop goes on). */
static bool linger(struct hc *h, int live, bool rs_gone) {
    int sessions = 0;
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h->s[i] && h->s[i]->recorded)
            sessions++;
    if (sessions > 0) {
        if (h->lingering)
            hc_log("a session joined: the linger ends");
        h->lingering = false;
        return false;
    }
    if (!h->had_session || h->stopping || rs_gone || h->cfg->linger_seconds <= 0)
        return false;
    long now = lz_now_ms();
    if (!h->lingering) {
        h->lingering = true;
        h->linger_until = now + (long)h->cfg->linger_seconds * 1000;
        hc_model_action(HC_START_LINGER, "d=%.12s", h->cfg->domain_id_hex);
        hc_log("no session left: the Domain lingers %" PRId64 " s for the next command", h->cfg->linger_seconds);
    }
    if (now < h->linger_until)
        return true;
    if (live > 0)
        return true; /* a status request still being answered */
    hc_log("the linger is over");
    return false;
}

static int take_domain_lock(const char *domain_dir, struct lz_error *err) {
    _cleanup_free_ char *p = lz_xasprintf("%s/lock", domain_dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return lz_error_set(err, -errno, "cannot open %s: %s", p, strerror(errno));
    /* A previous generation may still be tearing down: wait, bounded. */
    int r = lz_flock_timeout(fd, FLOCK_TIMEOUT_S);
    if (r == 0)
        return fd;
    if (r != -ETIMEDOUT) {
        close(fd);
        return lz_error_set(err, r, "flock %s: %s", p, strerror(-r));
    }
    close(fd);
    return lz_error_set(err, -EBUSY, "the Domain is still held by another coordinator after %d s", FLOCK_TIMEOUT_S);
}

static void recovery_log(void *ud, const char *msg) {
    (void)ud;
    hc_log("%s", msg);
}

static void recovery_report(void *ud, const struct lz_recovery_report *rep) {
    (void)ud;
    switch (rep->event) {
    case LZ_RECOVERY_GEN_CLEAN:
        hc_model_action(HC_RESET_FAILED_DOMAIN, "generation %" PRId64 " is clean", rep->gen);
        break;
    }
}

static void zeroing_free(void *p) {
    if (p)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

/* What a coordinator holds, released on every exit path (the generation
 * itself is released before, by hc_stop_generation). */
static void hc_done(struct hc *h) {
    hc_scan_wait(h); /* a start that failed before the Supervisor's spawn */
    hc_esc_free(h);
    hc_net_stop(h);
    hc_ref_free(h);
    lz_closep(&h->listen_fd);
    lz_closep(&h->boot.addr_fd);
    lz_closep(&h->boot.policy_fd);
    lz_closep(&h->boot.mbox_fd[0]);
    lz_closep(&h->boot.mbox_fd[1]);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(h->boot.dns_fd); i++)
        lz_closep(&h->boot.dns_fd[i]);
    lz_closep(&h->boot.slirp_ready_fd);
    if (h->boot.slirp_api)
        (void)unlink(h->boot.slirp_api);
    free(h->boot.slirp_api);
    h->boot.slirp_api = NULL;
    lz_store_close(h->st);
    free(h->rootfs);
    free(h->anchor_root);
    free(h->anchor_target);
    free(h->rt);
    free(h->gen_dir);
    hc_creds_free(h);
    free(h->state_dir);
    free(h->bundle_dir);
    free(h->overlay_dir);
    free(h->view);
    for (size_t i = 0; i < h->n_vol; i++)
        free(h->vol_view[i]);
    lz_worktree_clear(&h->wt);
    free(h->wt_gitfile);
    free(h->wt_gitdir_file);
    free(h->router);
    free(h->sock_path);
    free(h->runsc);
    free(h->shell);
    lz_closep(&h->sfd);
    lz_gitscan_clear(&h->git);
    lz_config_free(h->cfg);
    lz_closep(&h->lock_fd); /* last: the next generation may start */
}

/* The Domain Store: identity checked (SR-11), interrupted generations
 * recovered, then this generation recorded. */
static int open_store(struct hc *h, struct lz_error *err) {
    struct lz_store_identity sid = { .domain_id = h->cfg->domain_id_hex,
                                     .profile = h->cfg->profile.name,
                                     .workspace = h->cfg->workspace };
    struct lz_procid self_id;
    int r;
    if ((r = lz_store_open(h->cfg->domain_dir, &sid, true, &h->st, err)) < 0 ||
        (r = lz_domain_recover_report(h->st, h->cfg->data_root, h->cfg->domain_id_hex, recovery_log, recovery_report,
                                      NULL, err)) < 0)
        return r;
    if ((r = lz_procid_self(&self_id)) < 0)
        return lz_error_errno(err, r, "cannot read this coordinator's identity");
    return lz_store_gen_begin(h->st, h->cfg->fingerprint_hex, &self_id, &h->gen, err);
}

/* Everything up to the published Domain: configuration, the Domain lock,
 * the Domain Store (recovery, this generation), the acquisition. On
 * failure err says why, and what was acquired is released. */
static int coordinator_start(struct hc *h, struct lz_error *err) {
    const struct lz_coordinator_args *a = h->a;
    int r;
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium failed to initialise");
    /* The referenced host variables, from the client's hand-over: we run
     * with a minimal environment (procenv.h). The memfd is closed before
     * anything is started, and the copy is zeroed once the configuration
     * holds the values. */
    struct lz_envpass *envpass = NULL;
    if (a->env_fd >= 0) {
        r = lz_envpass_read(a->env_fd, &envpass, err);
        close(a->env_fd);
        if (r < 0)
            return r;
    }
    /* jansson's copies of the process spec (resolved values) are zeroed
     * when freed too. */
    json_set_alloc_funcs(malloc, zeroing_free);
    /* The client's --publish texts, as it gave them. */
    _cleanup_free_ char *pub = a->publish ? lz_xstrdup(a->publish) : NULL;
    const char *pubv[LZ_PUBLISH_MAX + 1];
    size_t n_pub = 0;
    for (char *save = NULL, *t = pub ? strtok_r(pub, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        if (n_pub == LZ_PUBLISH_MAX + 1)
            break; /* the load refuses more than the bound anyway */
        pubv[n_pub++] = t;
    }
    struct lz_config_opts co = { .config_path = a->config_path,
                                 .profile = a->profile,
                                 .workspace = a->workspace,
                                 .workspace_exact = true, /* the client's, already resolved */
                                 .lookup_env = lz_envpass_get,
                                 .lookup_env_ud = envpass,
                                 .publish = pubv,
                                 .n_publish = n_pub };
    r = lz_config_load(&co, &h->cfg, err);
    lz_envpass_free(envpass);
    if (r < 0)
        return r;
    if (strcmp(h->cfg->domain_id_hex, a->expect_domain) || strcmp(h->cfg->fingerprint_hex, a->expect_fingerprint))
        return lz_error_set(err, -ESTALE, "the configuration changed while the Domain was starting; try again");
    hc_log("coordinator for Domain %s (profile %s, workspace %s)", h->cfg->domain_id_hex, h->cfg->profile.name,
           h->cfg->workspace);
    /* It needs only the workspace; the Supervisor's spawn waits for it. */
    hc_scan_start(h);
    if ((h->lock_fd = take_domain_lock(h->cfg->domain_dir, err)) < 0)
        return h->lock_fd;
    if ((r = lz_runtime_dir(&h->rt, err)) < 0)
        return r;
    h->sock_path = lz_domain_socket_path(h->rt, h->cfg->domain_id_hex);
    /* Nobody can be connected to a socket whose coordinator we replaced. */
    unlink(h->sock_path);

    if (strlen(a->artifact_id) != 64 || strspn(a->artifact_id, "0123456789abcdef") != 64)
        return lz_error_set(err, -EINVAL, "invalid prepared-artifact ID");
    h->rootfs = lz_xasprintf("%s/prepared/%s/rootfs", h->cfg->data_root, a->artifact_id);
    if ((r = open_store(h, err)) < 0) {
        hc_log("start refused: %s", err->msg);
        return r;
    }
    int64_t anchor_gen = 1;
    _cleanup_free_ char *ag = NULL;
    if (lz_store_meta_get(h->st, "anchor_gen", &ag, NULL) == 0)
        anchor_gen = strtoll(ag, NULL, 10);
    h->anchor_root = lz_xasprintf("%s/anchor-%lld", h->cfg->domain_dir, (long long)anchor_gen);
    hc_log("generation %lld (State Anchor %s)", (long long)h->gen, h->anchor_root);
    hc_model_action(HC_START_NEW_DOMAIN, "d=%.12s", h->cfg->domain_id_hex);

    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, 0 };
    h->sfd = lz_signalfd_block(sigs);

    if ((r = hc_start_generation(h, err)) < 0) {
        hc_log("start failed: %s", err->msg);
        /* The client hears of the failure once nothing of it is left. */
        hc_session_drop_pre(h);
        hc_stop_generation(h);
        return r;
    }
    h->net_due = lz_now_ms() + NET_START_WAIT_MS;
    return 0;
}

/* The Domain's resolver and TLS gate: started after publication, once the
 * first session's process has its spec (or NET_START_WAIT_MS after
 * publication when no session came), so that their start is not in front
 * of the first command. Nothing is lost meanwhile: the resolver's sockets
 * (10.0.2.3:53) and the gate's listener (:443) were bound, and the
 * listener listening, by the Supervisor before runsc started, so a query
 * or a connection waits there; no name resolves before, so no learned
 * route exists either (the policy's routes are in place since NET_READY).
 * A start that fails stops the Domain, with the reason for its sessions. */
static void net_start_when_due(struct hc *h) {
    if (h->net_tried || h->stopping || (!h->session_fed && lz_now_ms() < h->net_due))
        return;
    h->net_tried = true;
    struct lz_error err = { 0 };
    /* Test builds: LAZARET_TEST_RESOLVER=fail, a start that fails. */
    const char *hook = lz_test_hook("LAZARET_TEST_RESOLVER");
    int r = hook && !strcmp(hook, "fail") ? lz_error_set(&err, -EIO, "the test hook LAZARET_TEST_RESOLVER=fail")
                                          : hc_net_start(h, &err);
    if (r < 0) {
        char why[LZ_ERROR_MAX + 64];
        snprintf(why, sizeof why, "the Domain's resolver could not start: %s; the Domain is stopped", err.msg);
        hc_begin_stop(h, why, true);
    }
}

/* Escalation's port: requests no rule approves are asked on the requesting
 * session's terminal (escprompt.c), which also carries the route
 * HostProcess; sessions are looked up in session.c; an approved
 * --allow-host goes to the Domain's resolver (hc_net.h). */
static const struct hc_esc_port esc_port = {
    .prompt_begin = hc_prompt_begin,
    .prompt_gone = hc_prompt_request_gone,
    .route_begin = hc_route_host_begin,
    .route_room = hc_route_host_room,
    .route_output = hc_route_host_output,
    .route_end = hc_route_host_end,
    .audited = hc_prompt_audited,
    .session_by_id = hc_session_by_id,
    .session_by_sid = hc_session_by_sid,
    .allow_host = hc_net_allow_host,
};

int lz_coordinator_main(const struct lz_coordinator_args *a) {
    struct lz_error err = { 0 };
    _cleanup_(hc_done) struct hc h = { .a = a,
                                       .rs = LZ_CHILD_NULL,
                                       .slirp = LZ_CHILD_NULL,
                                       .rs_ctl = -EBADF,
                                       .listen_fd = -EBADF,
                                       .sfd = -EBADF,
                                       .lock_fd = -EBADF,
                                       .boot = { .addr_fd = -EBADF, .policy_fd = -EBADF, .slirp_ready_fd = -EBADF } };
    h.boot.mbox_fd[0] = h.boot.mbox_fd[1] = -EBADF; /* before any exit: hc_done closes them */
    for (size_t i = 0; i < LZ_ARRAY_SIZE(h.boot.dns_fd); i++)
        h.boot.dns_fd[i] = -EBADF;
    h.esc_port = &esc_port;
    _cleanup_close_ int ready_fd = a->ready_fd;
    if (coordinator_start(&h, &err) < 0) {
        if (ready_fd >= 0)
            (void)lz_ready_write(ready_fd, LZ_READY_ERROR, err.msg);
        return 1;
    }
    if (ready_fd >= 0)
        (void)lz_ready_write(ready_fd, LZ_READY_OK, NULL);
    lz_closep(&ready_fd);

    long idle_deadline = lz_now_ms() + 30000; /* the starting client must attach */
    for (;;) {
        struct pollfd p[NFIXED + MAX_SESSIONS * 4];
        struct {
            struct session *s;
            int kind;
        } map[NFIXED + MAX_SESSIONS * 4];
        size_t np = 0;
        p[np] = (struct pollfd){ .fd = h.listen_fd, .events = POLLIN };
        map[np++].s = NULL;
        p[np] = (struct pollfd){ .fd = h.rs_exited_msg ? -1 : h.rs_ctl, .events = POLLIN };
        map[np++].s = NULL;
        p[np] = (struct pollfd){ .fd = h.sfd, .events = POLLIN };
        map[np++].s = NULL;
        /* The connectivity helper: its loss ends the generation. */
        p[np] = (struct pollfd){ .fd = h.stopping ? -1 : h.slirp.pidfd, .events = POLLIN };
        map[np++].s = NULL;
        /* Host escalation: the mailbox watch, host processes and their
         * output (escalation.c), behind one fd. */
        p[np] = (struct pollfd){ .fd = hc_esc_fd(&h), .events = POLLIN };
        map[np++].s = NULL;
        /* The resolver's reports (hc_net.c). */
        p[np] = (struct pollfd){ .fd = hc_net_fd(&h), .events = POLLIN };
        map[np++].s = NULL;
        /* The routers' refusals (hc_refusal.c). */
        p[np] = (struct pollfd){ .fd = hc_ref_fd(&h), .events = POLLIN };
        map[np++].s = NULL;
        int timeout = 1000;
        for (int i = 0; i < MAX_SESSIONS; i++) {
            struct session *s = h.s[i];
            if (!s)
                continue;
            if (s->sock >= 0) {
                short ev = 0;
                if (!s->inbuf)
                    ev |= POLLIN;
                if (s->pend.len)
                    ev |= POLLOUT;
                p[np] = (struct pollfd){ .fd = s->sock, .events = ev };
                map[np].s = s;
                map[np++].kind = 0;
            }
            if (s->exec.pidfd >= 0) {
                p[np] = (struct pollfd){ .fd = s->exec.pidfd, .events = POLLIN };
                map[np].s = s;
                map[np++].kind = 1;
            }
            int outs[2] = { s->tty ? s->master : s->out_r, s->tty ? -1 : s->err_r };
            for (int k = 0; k < 2; k++) {
                if (outs[k] < 0 || s->state == S_RELEASING)
                    continue;
                short ev = s->pend.len || (s->filter && s->filter->output_blocked(s)) ? 0 : POLLIN;
                if (k == 0 && s->inbuf)
                    ev |= POLLOUT;
                p[np] = (struct pollfd){ .fd = outs[k], .events = ev };
                map[np].s = s;
                map[np++].kind = 2 + k;
            }
            if (!s->tty && s->inbuf && s->in_w >= 0) {
                p[np] = (struct pollfd){ .fd = s->in_w, .events = POLLOUT };
                map[np].s = s;
                map[np++].kind = 4;
            }
            if (s->state == S_RELEASING || s->state == S_DRAINING)
                timeout = 100;
        }
        if (h.lingering) {
            long left = h.linger_until - lz_now_ms();
            if (left < timeout)
                timeout = left > 0 ? (int)left : 0;
        }
        if (!h.net_tried) {
            long left = h.net_due - lz_now_ms();
            if (left < timeout)
                timeout = left > 0 ? (int)left : 0;
        }
        timeout = hc_prompt_poll_timeout(&h, timeout);
        if (poll(p, np, timeout) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN && !h.stopping)
            accept_clients(&h);
        if (p[1].revents) {
            struct lz_rsmsg m;
            int n = lz_rschan_recv(h.rs_ctl, 0, &m);
            if (n == 0 || (n == 1 && m.kind == LZ_RS_EXITED)) {
                char line[128] = "supervisor gone";
                if (n > 0) {
                    lz_rschan_format(&m, line, sizeof line);
                    h.rs_exited_msg = true;
                }
                hc_log("the sandbox ended (%s); closing all sessions", line);
                if (!h.stopping)
                    hc_model_action(HC_FAIL_DOMAIN, "d=%.12s", h.cfg->domain_id_hex);
                h.stopping = true;
                for (int i = 0; i < MAX_SESSIONS; i++)
                    if (h.s[i]) {
                        static const char msg[] = "the sandbox stopped unexpectedly";
                        hc_session_send(h.s[i], LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
                    }
                if (n <= 0)
                    lz_closep(&h.rs_ctl);
            }
        }
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(h.sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP) {
                    hc_log("signal %u", si.ssi_signo);
                    hc_begin_stop(&h, "the Domain is being stopped", false);
                }
        }
        if (p[3].revents & POLLIN) {
            int st = 0;
            if (lz_child_try_reap(&h.slirp, &st) == 1) {
                hc_log("the connectivity helper (slirp4netns) exited with status %d", st);
                hc_begin_stop(&h, "the Domain's network helper (slirp4netns) died; the Domain is stopped", true);
            }
        }
        if (p[4].revents & POLLIN)
            hc_esc_dispatch(&h);
        hc_esc_tick(&h);
        if (p[5].revents & POLLIN)
            hc_net_dispatch(&h);
        if (p[6].revents & (POLLIN | POLLHUP))
            hc_ref_dispatch(&h);
        for (size_t i = NFIXED; i < np; i++) {
            struct session *s = map[i].s;
            if (!p[i].revents || !s)
                continue;
            switch (map[i].kind) {
            case 0:
                if (p[i].revents & POLLOUT)
                    hc_flush_pending(s);
                if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                    const uint8_t *msg;
                    size_t len;
                    if (hc_session_client_msg(&h, s, p[i].revents, &msg, &len) == 1)
                        control_request(&h, s, msg, len);
                }
                break;
            case 1: break; /* handled in session_tick */
            case 2:
                if (p[i].revents & POLLOUT)
                    hc_pump_input(s);
                if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
                    hc_pump_output(s, s->tty ? &s->master : &s->out_r, 1);
                break;
            case 3: hc_pump_output(s, &s->err_r, 2); break;
            case 4: hc_pump_input(s); break;
            default: break;
            }
        }
        hc_prompt_tick(&h); /* escalation prompts: timers, screens, held output */
        hc_ref_tick(&h);    /* refusal notices held back */
        for (int i = 0; i < MAX_SESSIONS; i++) {
            struct session *s = h.s[i];
            if (!s)
                continue;
            hc_session_tick(&h, s);
            if (s->state == S_DONE)
                hc_session_free(&h, s);
        }
        net_start_when_due(&h);
        int live = live_sessions(&h);
        bool idle_timeout = !h.had_session && live == 0 && lz_now_ms() >= idle_deadline;
        bool rs_gone = h.rs_ctl < 0 || h.rs_exited_msg;
        if (linger(&h, live, rs_gone))
            continue;
        if ((h.had_session && live == 0) || idle_timeout || (h.stopping && live == 0) || rs_gone) {
            if (live == 0 || rs_gone)
                break;
        }
    }
    /* Test builds: widen the window between the last session's EXIT
     * (its client has returned) and the socket's removal, in which a
     * `lazaret state reset` may connect and be left unanswered. */
    lz_sleep_ms(lz_test_hook_ms("LAZARET_TEST_EXIT_PAUSE_MS"));
    /* Teardown: new clients must not reach this generation any more. */
    unlink(h.sock_path);
    /* Test builds: widen the window between "no socket" and "lock
     * released" that `lazaret state reset` must wait through. */
    lz_sleep_ms(lz_test_hook_ms("LAZARET_TEST_TEARDOWN_PAUSE_MS"));
    lz_closep(&h.listen_fd);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h.s[i])
            hc_session_free(&h, h.s[i]);
    hc_session_drop_pre(&h); /* its client never came */
    hc_esc_free(&h);
    hc_net_stop(&h); /* DNS inside fails from here on, before the sandbox stops */
    hc_stop_generation(&h);
    hc_log("Domain stopped");
    return 0;
}
