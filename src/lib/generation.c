/* generation.c — a Domain generation's start and teardown (hc.h). */
#include "hc_gen.h"
#include "hc_creds.h"
#include "hc_esc.h"
#include "hc_session.h"
#include "hc_refusal.h"
#include "anchor.h"
#include "mailbox.h"
#include "catalog.h"
#include "evidence.h"
#include "idmap.h"
#include "netfollow.h"
#include "ocispec.h"
#include "paths.h"
#include "procenv.h"
#include "rschan.h"
#include "rsslot.h"
#include "publish.h"
#include "slirp.h"
#include "argcodec.h"
#include "supargs.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

/* One step of a generation's acquisition or release: who, what, and the
 * names it is known by elsewhere (the crash point of LAZARET_TEST_CRASH,
 * store.h, passed after the step; the action of docs/model/lazaret.pml,
 * logged under LAZARET_DEBUG). An act returns 0 when it acted, STEP_QUIET
 * when there was nothing of the step to do (no model action, no crash
 * point), or a negative errno with err set (acquisition stops there). */
#define STEP_QUIET 1
struct gen_step {
    const char *participant;
    int (*act)(struct hc *h, struct lz_error *err);
    const char *crash;
    enum hc_action model; /* HC_NO_ACTION: none */
};

static int walk(struct hc *h, const struct gen_step *steps, size_t n, struct lz_error *err) {
    for (size_t i = 0; i < n; i++) {
        int r = steps[i].act(h, err);
        if (r < 0)
            return r;
        if (r == STEP_QUIET)
            continue;
        if (steps[i].model)
            hc_model_action(steps[i].model, "d=%.12s", h->cfg->domain_id_hex);
        if (steps[i].crash)
            lz_crash_point(steps[i].crash);
    }
    return 0;
}

/* One participant transition, logged with the model's vocabulary. */
static int record(struct hc *h, enum lz_role role, enum lz_pstate state, const char *artifact, const char *mount,
                  const char *evidence, struct lz_error *err) {
    int r = lz_store_part_set(h->st, h->gen, role, state, artifact, mount, evidence, err);
    if (r < 0)
        return lz_error_prefix(err, r, "cannot record %s %s", lz_role_name(role), lz_pstate_name(state));
    h->recorded[role] = true;
    hc_log("store: generation %lld %s -> %s", (long long)h->gen, lz_role_name(role), lz_pstate_name(state));
    return 0;
}

static int record_proc(struct hc *h, enum lz_role role, const char *slot, const char *phase, const struct lz_child *c,
                       struct lz_error *err) {
    struct lz_procid id;
    int r = lz_procid_from_pidfd(c->pidfd, c->pid, &id);
    if (r < 0)
        return lz_error_set(err, r, "cannot read the pidfs identity of the %s: %s", slot, strerror(-r));
    if ((r = lz_store_proc_set(h->st, h->gen, role, slot, phase, &id, err)) < 0)
        return r;
    char t[160];
    lz_procid_format(&id, t, sizeof t);
    hc_log("store: generation %lld %s process %s %s (%s)", (long long)h->gen, lz_role_name(role), slot, phase, t);
    return 0;
}

/* The helper's readiness bound, from its release. */
#define LZ_SLIRP_READY_MS 15000

/* STAGE (pid, slot): the Supervisor holds that child (lazaret-router, a
 * writable volume's router "vol<i>", or runsc) at its barrier. Its
 * identity is read through our own pidfd for the PID (the child is the
 * Supervisor's and cannot be reaped before it is released, so the PID
 * names exactly it) and recorded staged; then the Supervisor is told to
 * release it (STAGED). */
static int stage_rs_child(struct hc *h, const struct lz_rsmsg *m, struct lz_error *err) {
    const char *slot = m->str;
    struct lz_rs_slot t;
    if (m->u[0] == 0 || m->u[0] > INT32_MAX || lz_rs_slot_parse(slot, &t) < 0 ||
        (t.kind == LZ_SLOT_VOLUME && t.vol >= h->n_vol))
        return lz_error_set(err, -EPROTO, "unexpected message from the Runtime Supervisor");
    pid_t pid = (pid_t)m->u[0];
    /* Volume routers are routers too: recovery stops them with the rest. */
    enum lz_role role = t.kind == LZ_SLOT_RUNSC ? LZ_ROLE_SANDBOX : LZ_ROLE_GIT_ROUTING;
    struct lz_child c = {
        .pid = pid, .pidfd = (int)syscall(SYS_pidfd_open, pid, 0), .barrier_fd = -EBADF, .status_fd = -EBADF
    };
    if (c.pidfd < 0)
        return lz_error_set(err, -errno, "cannot open the Supervisor's %s: %s", slot, strerror(errno));
    int r = record_proc(h, role, slot, "staged", &c, err);
    struct lz_procid *keep = t.kind == LZ_SLOT_VOLUME ? &h->vol_id[t.vol]
        : t.kind == LZ_SLOT_ROUTER                    ? &h->router_id
                                                      : &h->runsc_id;
    if (r == 0 && (r = lz_procid_from_pidfd(c.pidfd, c.pid, keep)) < 0)
        lz_error_set(err, r, "cannot read the identity of the Supervisor's %s: %s", slot, strerror(-r));
    close(c.pidfd);
    if (r < 0)
        return r;
    lz_crash_point(role == LZ_ROLE_GIT_ROUTING ? "router-staged" : "runsc-staged");
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_STAGED, NULL, slot);
    return 0;
}

/* At readiness the staged Supervisor children become committed. */
static int commit_rs_children(struct hc *h, struct lz_error *err) {
    int r = 0;
    if (h->router_id.ino)
        r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_GIT_ROUTING, "router", "committed", &h->router_id, err);
    if (r == 0 && h->runsc_id.ino)
        r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_SANDBOX, "runsc", "committed", &h->runsc_id, err);
    for (size_t i = 0; r == 0 && i < h->n_vol; i++) {
        char slot[LZ_RS_SLOT_NAME_MAX];
        struct lz_rs_slot t = { LZ_SLOT_VOLUME, (unsigned)i };
        if (h->vol_id[i].ino)
            r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_GIT_ROUTING, lz_rs_slot_name(&t, slot), "committed",
                                  &h->vol_id[i], err);
    }
    return r;
}

/* Next message from the Supervisor, at most timeout_ms: 1, 0 when the
 * Supervisor is gone, -ETIMEDOUT, -EBADMSG (lz_rschan_recv). */
static int rs_recv(struct hc *h, int timeout_ms, struct lz_rsmsg *m) {
    return h->rs_ctl < 0 ? 0 : lz_rschan_recv(h->rs_ctl, timeout_ms, m);
}

/* rs_recv that also takes the descriptors a DNS message carries (the
 * resolver's sockets, rschan.h) into h->boot.dns_fd. DNS without exactly
 * those four, a second DNS, or descriptors on any other kind: -EBADMSG
 * (what came is closed). */
static int rs_recv_dns(struct hc *h, int timeout_ms, struct lz_rsmsg *m) {
    int fds[LZ_RSCHAN_FDS_MAX];
    size_t nf = 0;
    int n = h->rs_ctl < 0 ? 0 : lz_rschan_recv_fds(h->rs_ctl, timeout_ms, m, fds, LZ_RSCHAN_FDS_MAX, &nf);
    if (n <= 0)
        return n;
    bool ok = m->kind == LZ_RS_DNS ? nf == LZ_NET_DNS_FDS && h->boot.dns_fd[0] < 0 : nf == 0;
    if (ok && m->kind == LZ_RS_DNS)
        for (size_t i = 0; i < LZ_NET_DNS_FDS; i++)
            h->boot.dns_fd[i] = TAKE_FD(fds[i]);
    for (size_t i = 0; i < nf; i++)
        lz_closep(&fds[i]);
    return ok ? 1 : -EBADMSG;
}

/* The connectivity helper, staged and released; its readiness is read
 * while runsc boots (sandbox_start, slirp_ready). */
static int launch_slirp(struct hc *h, struct lz_error *err) {
    const struct lz_profile *prof = &h->cfg->profile;
    /* Published ports need the helper's API socket, for the time it takes
     * to ask (removed once they are published, or by hc_done). */
    if (prof->n_publish)
        h->boot.slirp_api = lz_xasprintf("%s/%.32s.slirp", h->rt, h->cfg->domain_id_hex);
    int r = lz_slirp_spawn(h->rs.pid, h->boot.slirp_api, &h->slirp, &h->boot.slirp_ready_fd, err);
    if (r < 0)
        return r;
    /* Staged ownership before the helper may proceed. */
    if ((r = record_proc(h, LZ_ROLE_HELPER, "slirp4netns", "staged", &h->slirp, err)) < 0)
        return r;
    if ((r = lz_child_release(&h->slirp)) < 0)
        return lz_error_errno(err, r, "slirp4netns failed to start");
    h->boot.t_slirp = lz_now_ms();
    return 0;
}

/* The helper's readiness byte came (its tap0 exists in the enforcement
 * namespace, with no address or route: slirp.h): its published ports,
 * then it is committed. The Supervisor configures tap0 and installs the
 * policy when it gets NET. */
static int slirp_ready(struct hc *h, struct lz_error *err) {
    const struct lz_profile *prof = &h->cfg->profile;
    int r = lz_slirp_read_ready(h->boot.slirp_ready_fd);
    lz_closep(&h->boot.slirp_ready_fd);
    if (r < 0)
        return lz_error_set(err, -EIO,
                            "the connectivity helper (slirp4netns) did not become ready; "
                            "is /dev/net/tun usable? (lazaret doctor)");
    hc_log("connectivity helper slirp4netns ready (pid %d) in %ld ms", (int)h->slirp.pid,
           lz_now_ms() - h->boot.t_slirp);
    for (size_t i = 0; i < prof->n_publish; i++) {
        if ((r = lz_slirp_publish(h->boot.slirp_api, &prof->publish[i], err)) < 0)
            return r;
        char t[LZ_PUBLISH_TEXT_MAX];
        lz_publish_format(&prof->publish[i], t, sizeof t);
        hc_log("published %s (host address:host port:sandbox port)", t);
    }
    if (h->boot.slirp_api) {
        (void)unlink(h->boot.slirp_api);
        free(h->boot.slirp_api);
        h->boot.slirp_api = NULL;
    }
    /* Its process and the participant committed: nothing physical happens
     * between the two records, so one transaction (one sync). */
    if ((r = lz_store_begin(h->st, err)) < 0 ||
        (r = record_proc(h, LZ_ROLE_HELPER, "slirp4netns", "committed", &h->slirp, err)) < 0 ||
        (r = record(h, LZ_ROLE_HELPER, LZ_P_COMMITTED, NULL, NULL, NULL, err)) < 0 ||
        (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        return r;
    }
    return 0;
}

/* Network readiness fingerprint: SHA-256 over Domain ID, generation,
 * Configuration Fingerprint, Network Sidecar ID, policy digest and the
 * enforcement namespace's identity. */
static void readiness_fingerprint(struct hc *h, unsigned long netns_ino) {
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    static const char ctx[] = "lazaret-network-readiness-v1";
    crypto_hash_sha256_update(&st, (const uint8_t *)ctx, sizeof ctx - 1);
    crypto_hash_sha256_update(&st, h->cfg->domain_id, 32);
    uint8_t gen[8];
    for (int i = 0; i < 8; i++)
        gen[i] = (uint8_t)((uint64_t)h->gen >> (56 - 8 * i));
    crypto_hash_sha256_update(&st, gen, 8);
    crypto_hash_sha256_update(&st, h->cfg->fingerprint, 32);
    crypto_hash_sha256_update(&st, h->sidecar_id, 16);
    crypto_hash_sha256_update(&st, h->policy_digest, 32);
    uint8_t ino[8];
    for (int i = 0; i < 8; i++)
        ino[i] = (uint8_t)((uint64_t)netns_ino >> (56 - 8 * i));
    crypto_hash_sha256_update(&st, ino, 8);
    crypto_hash_sha256_final(&st, h->readiness);
    char hex[65];
    lz_hex(h->readiness, 32, hex);
    hc_log("network readiness fingerprint %s", hex);
}

/* The host Git scan (gitscan.h) reads the host's Git configuration and
 * runs the host's git: 10-40 ms that need nothing but the workspace, while
 * the Supervisor's spawn is the first step that needs its result. So it
 * runs on a thread of its own from the moment the configuration is loaded
 * (coordinator.c), beside the Domain lock, the store, recovery and the
 * lease. The thread touches h->git and h->scan only, which nothing else
 * reads before scan_join; it runs with every signal blocked (they are the
 * main thread's, through its signalfd), and it is joined on every path out
 * of hc_start_generation, and by hc_scan_wait before h is freed. */
static void *scan_thread(void *arg) {
    struct hc *h = arg;
    long t0 = lz_now_ms();
    lz_gitscan_clear(&h->git);
    h->scan.r = lz_gitscan_run(h->cfg->workspace, NULL, &h->git, &h->scan.err);
    h->scan.ms = lz_now_ms() - t0;
    return NULL;
}

void hc_scan_start(struct hc *h) {
    h->scan.err = (struct lz_error){ 0 };
    h->scan.running = lz_thread_start_blocked(&h->scan.thread, scan_thread, h) == 0;
    h->scan.started = true;
}

void hc_scan_wait(struct hc *h) {
    if (h->scan.running) {
        pthread_join(h->scan.thread, NULL);
        h->scan.running = false;
    }
}

/* The scan's result: joined, or run here when no thread could start. */
static int scan_join(struct hc *h, struct lz_error *err) {
    if (h->scan.running)
        hc_scan_wait(h);
    else
        scan_thread(h);
    if (h->scan.r < 0 && err)
        *err = h->scan.err;
    return h->scan.r;
}

/* ---- acquisition ----
 *
 * Everything of the generation that is not a participant yet: directories,
 * binaries, the host-address watch and the network policy (nothing durable
 * is recorded here). */
static int prepare_generation(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
    if (!h->scan.started)
        hc_scan_start(h);
    snprintf(h->container_id, sizeof h->container_id, "lz-%.12s", c->domain_id_hex);
    randombytes_buf(h->sidecar_id, sizeof h->sidecar_id);
    h->gen_dir = lz_xasprintf("%s/%.12s", h->rt, c->domain_id_hex);
    _cleanup_close_ int rtfd = open(h->rt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rtfd < 0)
        return lz_error_set(err, -errno, "cannot open %s: %s", h->rt, strerror(errno));
    /* We hold the Domain flock: anything left here is from a dead
     * generation. runsc state of a dead sandbox is removed with it. */
    char name[16];
    snprintf(name, sizeof name, "%.12s", c->domain_id_hex);
    lz_rm_rf_at(rtfd, name);
    h->state_dir = lz_xasprintf("%s/runsc", h->gen_dir);
    h->bundle_dir = lz_xasprintf("%s/bundle", h->gen_dir);
    h->overlay_dir = lz_xasprintf("%s/overlay", c->domain_dir);
    h->view = lz_xasprintf("%s/workspace", h->gen_dir);
    h->anchor_target = lz_xasprintf("%s/anchor", h->gen_dir);
    if ((r = lz_mkdir_p(h->state_dir, 0700)) < 0 || (r = lz_mkdir_p(h->bundle_dir, 0700)) < 0 ||
        (r = lz_mkdir_p(h->overlay_dir, 0700)) < 0 || (r = lz_mkdir_p(h->view, 0700)) < 0)
        return lz_error_set(err, r, "cannot create runtime directories under %s: %s", h->gen_dir, strerror(-r));
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        const struct lz_volume *v = &c->profile.volumes[i];
        if (v->read_only)
            continue;
        if (h->n_vol >= LZ_RS_VOLUMES_MAX)
            return lz_error_set(err, -E2BIG, "more than %d writable volumes: make some read-only", LZ_RS_VOLUMES_MAX);
        h->vol_view[h->n_vol] = lz_xasprintf("%s/volume-%zu", h->gen_dir, h->n_vol);
        h->vol_of[h->n_vol] = i;
        /* The router's source must exist before it starts. */
        if ((r = lz_mkdir_p(v->host, 0700)) < 0 || (r = lz_mkdir_p(h->vol_view[h->n_vol], 0700)) < 0)
            return lz_error_set(err, r, "cannot create %s or its view: %s", v->host, strerror(-r));
        h->n_vol++;
    }
    /* A linked worktree: its common Git directory, served by one more
     * router in linked-worktree mode, staged as the last volume slot
     * (supargs.h); the sandbox's /workspace/.git names it there
     * (worktree.h). */
    lz_worktree_clear(&h->wt);
    if ((r = lz_worktree_probe(c->workspace, &h->wt, err)) < 0)
        return r;
    if (r > 0) {
        if (h->n_vol >= LZ_RS_VOLUMES_MAX)
            return lz_error_set(err, -E2BIG,
                                "more than %d writable volumes with the worktree's Git directory: make "
                                "some read-only",
                                LZ_RS_VOLUMES_MAX - 1);
        h->vol_view[h->n_vol] = lz_xasprintf("%s/git-common", h->gen_dir);
        h->vol_of[h->n_vol] = SIZE_MAX;
        if ((r = lz_mkdir_p(h->vol_view[h->n_vol], 0700)) < 0)
            return lz_error_set(err, r, "cannot create %s: %s", h->vol_view[h->n_vol], strerror(-r));
        h->n_vol++;
        _cleanup_free_ char *gf = lz_worktree_gitfile(h->wt.name);
        _cleanup_close_ int gd = open(h->gen_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gd < 0 || (r = lz_write_file_volatile_at(gd, "gitfile", gf, strlen(gf), 0644)) < 0)
            return lz_error_set(err, gd < 0 ? -errno : r, "cannot write the worktree's gitfile in %s", h->gen_dir);
        free(h->wt_gitfile);
        h->wt_gitfile = lz_xasprintf("%s/gitfile", h->gen_dir);
        static const char wgd[] = LZ_SANDBOX_WORKSPACE "/.git\n";
        if ((r = lz_write_file_volatile_at(gd, "worktree-gitdir", wgd, strlen(wgd), 0644)) < 0)
            return lz_error_set(err, r, "cannot write the worktree's gitdir in %s", h->gen_dir);
        free(h->wt_gitdir_file);
        h->wt_gitdir_file = lz_xasprintf("%s/worktree-gitdir", h->gen_dir);
        hc_log("linked worktree %s of %s: its Git directory %s is served at " LZ_SANDBOX_GIT_COMMON, h->wt.name,
               h->wt.repo, h->wt.common);
    }

    if ((r = lz_find_runsc(&h->runsc, err)) < 0)
        return r;
    _cleanup_free_ char *init = NULL;
    if ((r = lz_libexec_path("lazaret-init", &init, err)) < 0)
        return r;
    if ((r = lz_libexec_path("lazaret-router", &h->router, err)) < 0)
        return r;
    if (hc_find_shell(h->rootfs, &h->shell) < 0)
        h->shell = lz_xstrdup("/bin/sh");

    /* The host's address changes, watched from here (the host namespace)
     * from before the snapshot below; the Supervisor follows them
     * (netfollow.h). LAZARET_TEST_NETFOLLOW=off is for tests only: it shows
     * that a new host address is reachable without the follower. */
    const char *nf = lz_test_hook("LAZARET_TEST_NETFOLLOW");
    if (nf && !strcmp(nf, "off"))
        hc_log("WARNING: host addresses are NOT followed (a test hook; test builds only)");
    else if ((h->boot.addr_fd = lz_netfollow_open_host_socket(err)) < 0)
        return h->boot.addr_fd;

    /* The generation's network policy, derived from trusted configuration
     * only, goes to the Supervisor as canonical bytes in a sealed memfd. */
    uint32_t *host_addrs = NULL;
    size_t n_host = 0;
    lz_host_ipv4_addrs(&host_addrs, &n_host);
    r = lz_netpolicy_derive(c, host_addrs, n_host, &h->policy, err);
    free(host_addrs);
    if (r < 0)
        return r;
    _cleanup_free_ uint8_t *pbytes = NULL;
    size_t plen = 0;
    lz_netpolicy_encode(&h->policy, &pbytes, &plen);
    lz_netpolicy_digest(pbytes, plen, h->policy_digest);
    lz_hex(h->policy_digest, 32, h->boot.policy_hex);
    int pfd = h->boot.policy_fd = memfd_create("lazaret-netpolicy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (pfd < 0 || lz_write_full(pfd, pbytes, plen) < 0 ||
        fcntl(pfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        lseek(pfd, 0, SEEK_SET) < 0)
        return lz_error_set(err, -errno, "cannot pass the network policy: %s", strerror(errno));
    /* Credentials: values from files and commands, the Domain CA and its
     * certificate for the sandbox's trust store (hc_creds.h). */
    return hc_creds_prepare(h, err);
}

/* The Trust Anchor (the model's CreateTrustAnchor): the generation's
 * escalation key pair and its mailbox (escalation.c); before the sandbox,
 * whose bundle binds the mailbox. Nothing durable: the keys live in this
 * process only and the mailbox in the runtime directory. */
static int trust_anchor(struct hc *h, struct lz_error *err) { return hc_esc_create(h, err); }

/* The prepared lower: intent (with the artifact), the exact catalog lease,
 * lease held. */
static int lower_intent(struct hc *h, struct lz_error *err) {
    return record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_INTENT, h->a->artifact_id, NULL, NULL, err);
}
static int lower_lease(struct hc *h, struct lz_error *err) {
    int r = lz_catalog_lease_acquire(h->cfg->data_root, h->a->artifact_id, h->cfg->domain_id_hex, h->gen, err);
    return r < 0 ? r : 0;
}
/* lease_held, and the sandbox's intent with it: between the two nothing
 * physical happens (the Supervisor's spawn waits for the Git scan only),
 * so one transaction, one sync. */
static int lower_lease_held(struct hc *h, struct lz_error *err) {
    int r;
    if ((r = lz_store_begin(h->st, err)) < 0 ||
        (r = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_LEASE_HELD, NULL, NULL, NULL, err)) < 0 ||
        (r = record(h, LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        return r;
    }
    return 0;
}

/* <gen_dir>/mailbox with req/ and res/ (0700): the mount points. */
static int mailbox_dirs(const char *mbox) {
    if (mkdir(mbox, 0700) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int d = open(mbox, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return -errno;
    if ((mkdirat(d, "req", 0700) < 0 && errno != EEXIST) || (mkdirat(d, "res", 0700) < 0 && errno != EEXIST))
        return -errno;
    return 0;
}

/* The Runtime Supervisor, in new user + network + mount namespaces (the
 * sandbox's intent is durable since lower_lease_held), held at its
 * barrier. */
static int supervisor_spawn(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
    int afd = h->boot.addr_fd, pfd = h->boot.policy_fd;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return lz_error_set(err, -errno, "socketpair: %s", strerror(errno));
    h->rs_ctl = sp[0];
    _cleanup_close_ int rs_end = sp[1]; /* the Supervisor's end: ours closed on every return */
    _cleanup_free_ char *self = NULL;
    if ((r = lz_self_exe(&self)) < 0)
        return lz_error_set(err, r, "cannot find the lazaret binary");
    /* What the host's Git reads or runs from the workspace is kept
     * read-only by the router as well (gitscan.h); all of it, or no Domain. */
    long scan_t0 = lz_now_ms();
    if ((r = scan_join(h, err)) < 0)
        return r;
    hc_log("host Git scan: %zu repositories, %zu entries, %zu protected paths, %ld ms (waited %ld ms)", h->git.n_repos,
           h->git.n_entries, h->git.n_protect, h->scan.ms, lz_now_ms() - scan_t0);
    for (size_t i = 0; i < h->git.n_log; i++)
        hc_log("host Git: %s", h->git.log[i]);
    for (size_t i = 0; i < h->git.n_notices; i++)
        hc_log("NOTICE: %s", h->git.notices[i]);
    char *vol_source[LZ_RS_VOLUMES_MAX];
    for (size_t i = 0; i < h->n_vol; i++)
        vol_source[i] = h->vol_of[i] == SIZE_MAX ? h->wt.common : c->profile.volumes[h->vol_of[i]].host;
    /* Symlinks the host would follow into Lazaret's own storage are refused
     * by every router (docs/security-git.md, "Symlinks to host paths"). */
    char *deny[] = { c->data_root, h->rt, c->domain_dir };
    /* The routers' refusal records (hc_refusal.h) come back on a channel
     * of their own. */
    _cleanup_close_ int ref_end = -EBADF;
    if ((r = hc_ref_open(h, &ref_end, err)) < 0)
        return r;
    struct lz_supervisor_args sa = {
        .ctl_fd = rs_end,
        .runsc = h->runsc,
        .state_dir = h->state_dir,
        .bundle_dir = h->bundle_dir,
        .container_id = h->container_id,
        .overlay_dir = h->overlay_dir,
        .router = h->router,
        .workspace = c->workspace,
        .view = h->view,
        .policy_fd = pfd,
        .policy_digest = h->boot.policy_hex,
        .addr_fd = afd,
        .refusal_fd = ref_end,
        .protect = h->git.protect,
        .n_protect = h->git.n_protect,
        .vol_source = vol_source,
        .vol_view = h->vol_view,
        .n_volumes = h->n_vol,
        .worktree = h->wt.name,
        .deny_link = deny,
        .n_deny_link = LZ_ARRAY_SIZE(deny),
    };
    /* Git-ignored untracked paths are served from the Domain's Ignored
     * Workspace State (docs/ignored-state.md); the rules are the host
     * user's, so the router is told where that user's Git config is. */
    _cleanup_free_ char *ignored = NULL;
    /* Host-tool configuration paths (docs/host-tools.md) keep the sandbox's
     * copies in the same store: it is made even with ignored_state off. */
    if (c->profile.ignored_state || c->profile.n_host_tools) {
        ignored = lz_xasprintf("%s/ignored", c->domain_dir);
        if (mkdir(ignored, 0700) < 0 && errno != EEXIST)
            return lz_error_set(err, -errno, "cannot create %s: %s", ignored, strerror(errno));
        sa.ignored_state = ignored;
        const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
        sa.git_home = home && home[0] == '/' ? home : NULL;
        sa.git_xdg = xdg && xdg[0] == '/' ? xdg : NULL;
        sa.no_ignore_rules = !c->profile.ignored_state;
        sa.host_tools = c->profile.host_tools;
        sa.n_host_tools = c->profile.n_host_tools;
    }
    /* The escalation mailbox's mount points (mailbox.h): the Supervisor
     * mounts a bounded tmpfs on each before anything else. The test hook
     * leaves them plain directories of the runtime directory (the old,
     * unbounded mailbox: the positive control of test_mailbox_bound.py). */
    _cleanup_free_ char *mbox = lz_xasprintf("%s/mailbox", h->gen_dir);
    if ((r = mailbox_dirs(mbox)) < 0)
        return lz_error_set(err, r, "cannot create the escalation mailbox %s: %s", mbox, strerror(-r));
    if (!lz_test_hook("LAZARET_TEST_MAILBOX_UNBOUNDED"))
        sa.mailbox = mbox;
    else
        hc_log("escalation: WARNING: the mailbox is not bounded (test hook, test builds only)");
    if (c->profile.n_persistent_dirs) {
        sa.rootfs = h->rootfs;
        sa.anchor_root = h->anchor_root;
        sa.anchor_target = h->anchor_target;
        sa.persist = c->profile.persistent_dirs;
        sa.n_persist = c->profile.n_persistent_dirs;
    }
    char **argv = NULL;
    if ((r = lz_supargs_encode(&sa, self, &argv, err)) < 0)
        return lz_error_prefix(err, r, "cannot start the Runtime Supervisor");
    int keep[] = { rs_end, pfd, ref_end, afd };
    /* Our hooks only (procenv.h); it passes the bare helper set on. */
    _cleanup_env_ char **rs_env = lz_env_build(LZ_ENV_SUPERVISOR);
    struct lz_spawn_opts o = {
        .path = self,
        .argv = argv,
        .envp = rs_env,
        .stdin_fd = -1,
        .stdout_fd = 2,
        .stderr_fd = 2,
        .keep_fds = keep,
        .n_keep_fds = afd >= 0 ? 4 : 3,
        .clone_flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS,
        .setns_pidfd = -1,
        .barrier = true,
        .pdeathsig = SIGTERM,
    };
    r = lz_spawn(&o, &h->rs);
    lz_argv_free(argv);
    lz_closep(&rs_end);
    /* The Supervisor has its own copies now. */
    lz_closep(&h->boot.addr_fd);
    lz_closep(&h->boot.policy_fd);
    if (r < 0)
        return lz_error_set(
            err, r, "cannot create the Domain namespaces: %s%s", strerror(-r),
            r == -EPERM || r == -ENOSPC ? " (unprivileged user namespaces disabled? run `lazaret doctor`)" : "");
    hc_log("Runtime Supervisor started (pid %d), writing ID maps", (int)h->rs.pid);
    return 0;
}

/* The Supervisor's first report: the mailbox's two tmpfs mounted, their
 * roots attached (supervisor.h). Nothing durable: the mounts go with the
 * Supervisor's mount namespace. */
static int mailbox_take(struct hc *h, struct lz_error *err) {
    struct lz_rsmsg m;
    size_t nf = 0;
    int n = h->rs_ctl < 0 ? 0 : lz_rschan_recv_fds(h->rs_ctl, LZ_RS_T_MAILBOX_MS, &m, h->boot.mbox_fd, 2, &nf);
    if (n == 0 || n == -ETIMEDOUT)
        return lz_error_set(err, -EIO, "the Runtime Supervisor did not mount the escalation mailbox");
    if (n == 1 && m.kind == LZ_RS_FAIL)
        return lz_error_set(err, -EIO, "%s", m.str);
    if (n < 0 || m.kind != LZ_RS_MAILBOX || nf != 2) {
        lz_closep(&h->boot.mbox_fd[0]);
        lz_closep(&h->boot.mbox_fd[1]);
        return lz_error_set(err, -EPROTO, "unexpected message from the Runtime Supervisor: %s",
                            n < 0 ? "malformed" : lz_rschan_kind_name(m.kind));
    }
    hc_log("escalation: mailbox req/ and res/ mounted by the Supervisor (tmpfs, %llu bytes and %u inodes each)",
           LZ_MBOX_TMPFS_BYTES, (unsigned)LZ_MBOX_TMPFS_INODES);
    return 0;
}

/* Staged ownership of the Supervisor, with the namespaces it made, before
 * it may run; then its ID maps, and it is released. */
static int supervisor_staged(struct hc *h, struct lz_error *err) {
    int r;
    unsigned long long ino[3] = { 0, 0, 0 };
    static const char *const nsn[3] = { "user", "mnt", "net" };
    for (int i = 0; i < 3; i++) {
        char p[64];
        struct stat sb;
        snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)h->rs.pid, nsn[i]);
        if (stat(p, &sb) == 0)
            ino[i] = (unsigned long long)sb.st_ino;
    }
    /* The pidfd still names that process: the inodes are its own. */
    struct pollfd pp = { .fd = h->rs.pidfd, .events = POLLIN };
    if (poll(&pp, 1, 0) != 0 || !ino[0]) {
        lz_child_signal(&h->rs, SIGKILL);
        return lz_error_set(err, -ESRCH, "the Runtime Supervisor died before it was recorded");
    }
    h->rs_userns = ino[0];
    struct lz_evidence ev;
    lz_evidence_init(&ev);
    for (int i = 0; i < 3; i++) {
        char k[8];
        snprintf(k, sizeof k, "%sns", nsn[i]);
        lz_evidence_add_u64(&ev, k, ino[i]);
    }
    /* With the State Anchor's intent (anchor_intent): recorded earlier
     * than its mount needs, and nothing of the anchor happens before. */
    bool anchor = h->cfg->profile.n_persistent_dirs > 0;
    if ((r = lz_store_begin(h->st, err)) < 0 ||
        (r = record(h, LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, ev.s, err)) < 0 ||
        (r = record_proc(h, LZ_ROLE_SANDBOX, "supervisor", "staged", &h->rs, err)) < 0 ||
        (anchor && (r = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_INTENT, h->a->artifact_id, NULL, NULL, err)) < 0) ||
        (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        lz_child_signal(&h->rs, SIGKILL);
        return r;
    }
    if ((r = lz_idmap_write(h->rs.pid, err)) < 0) {
        lz_child_signal(&h->rs, SIGKILL);
        int st;
        lz_child_wait(&h->rs, -1, &st);
        return lz_error_prefix(err, r, "cannot map IDs into the Domain user namespace");
    }
    if ((r = lz_child_release(&h->rs)) < 0)
        return lz_error_set(err, r, "the Runtime Supervisor failed to start: %s", strerror(-r));
    if (!lz_test_hook("LAZARET_TEST_MAILBOX_UNBOUNDED"))
        return mailbox_take(h, err);
    return 0;
}

/* The State Anchor (with persistent directories only): intent (durable
 * since supervisor_staged, in its transaction), the mount (by the
 * Supervisor), prepared with its mount identity. */
static int anchor_intent(struct hc *h, struct lz_error *err) {
    (void)err;
    return h->cfg->profile.n_persistent_dirs ? 0 : STEP_QUIET;
}
static int anchor_mount(struct hc *h, struct lz_error *err) {
    if (!h->cfg->profile.n_persistent_dirs)
        return STEP_QUIET;
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_ANCHOR, NULL, NULL);
    struct lz_rsmsg m;
    int n = rs_recv(h, LZ_RS_T_ANCHORED_MS, &m);
    if (n == 0 || n == -ETIMEDOUT)
        return lz_error_set(err, -EIO, "the Runtime Supervisor did not mount the State Anchor");
    if (n == 1 && m.kind == LZ_RS_FAIL)
        return lz_error_set(err, -EIO, "cannot mount the State Anchor: %s", m.str);
    if (n < 0 || m.kind != LZ_RS_ANCHORED)
        return lz_error_set(err, -EPROTO, "unexpected message from the Runtime Supervisor: %s",
                            n < 0 ? "malformed" : lz_rschan_kind_name(m.kind));
    snprintf(h->anchor_ident, sizeof h->anchor_ident, "%s", m.str);
    return 0;
}
/* Git routing, network and the connectivity helper: three intents, in the
 * caller's transaction. */
static int record_network_intents(struct hc *h, struct lz_error *err) {
    int r;
    if ((r = record(h, LZ_ROLE_GIT_ROUTING, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = record(h, LZ_ROLE_NETWORK, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = record(h, LZ_ROLE_HELPER, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0)
        return r;
    h->net_intents = true;
    return 0;
}

/* The anchor prepared, and the three intents of network_intents with it:
 * between the two only the Trust Anchor is made, which records nothing
 * (one transaction, one sync). */
static int anchor_prepared(struct hc *h, struct lz_error *err) {
    if (!h->cfg->profile.n_persistent_dirs)
        return STEP_QUIET;
    int r;
    if ((r = lz_store_begin(h->st, err)) < 0 ||
        (r = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_PREPARED, NULL, h->anchor_ident, NULL, err)) < 0 ||
        (r = record_network_intents(h, err)) < 0 || (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        h->net_intents = false;
        return r;
    }
    hc_log("State Anchor mounted: %s", h->anchor_ident);
    return 0;
}

/* Git routing, network and the connectivity helper: three intents, one
 * transaction (already in anchor_prepared's with a State Anchor). */
static int network_intents(struct hc *h, struct lz_error *err) {
    if (h->net_intents)
        return STEP_QUIET;
    int r;
    if ((r = lz_store_begin(h->st, err)) < 0 || (r = record_network_intents(h, err)) < 0 ||
        (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        h->net_intents = false;
        return r;
    }
    return 0;
}

/* The connectivity helper, in our (host) network namespace, attached to
 * the enforcement namespace, where it makes tap0 and nothing else; its
 * ownership is recorded before it may proceed. Its readiness is not
 * waited for here: its start runs beside the routers' and runsc's
 * (sandbox_start). */
static int helper_launch(struct hc *h, struct lz_error *err) {
    int r;
    if ((r = launch_slirp(h, err)) < 0)
        return r;
    hc_log("connectivity helper slirp4netns launched (pid %d)", (int)h->slirp.pid);
    return 0;
}

/* The start overlap (docs/network.md, "Readiness"; the model's
 * LaunchSidecar, BootSandbox, StartSidecar, StartSandbox). The OCI bundle,
 * then BOOT: the Supervisor prepares the namespace (no route out), passes
 * the resolver's sockets, starts the routers and runsc, staging each
 * (STAGE -> stage_rs_child: the crash points "router-staged",
 * "runsc-staged"). Meanwhile the helper becomes ready (slirp_ready: its
 * ports published, committed); once it is and runsc is released, NET: the
 * Supervisor configures tap0, installs and probes the policy while runsc
 * boots (NET_READY), and reports READY only when lazaret-init is ready
 * too; readiness commits network, Git routing and sandbox in one
 * transaction. A failure of either side fails the start: the release
 * stops both (hc_stop_generation). */
static int sandbox_start(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
    if ((r = hc_write_bundle(h, err)) < 0)
        return r;
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_BOOT, NULL, NULL);

    bool helper_ready = false, runsc_released = false, net_sent = false, net_ready = false;
    long deadline = lz_now_ms() + LZ_RS_T_READY_MS;
    long slirp_deadline = h->boot.t_slirp + LZ_SLIRP_READY_MS;
    for (;;) {
        if (helper_ready && runsc_released && !net_sent) {
            (void)lz_rschan_send(h->rs_ctl, LZ_RS_NET, NULL, NULL);
            net_sent = true;
        }
        long now = lz_now_ms();
        long left = deadline - now;
        if (!helper_ready && runsc_released && slirp_deadline - now < left)
            left = slirp_deadline - now;
        if (left <= 0)
            return lz_error_set(err, -ETIMEDOUT,
                                !helper_ready && runsc_released
                                    ? "the connectivity helper (slirp4netns) did not become ready in time"
                                    : "the Runtime Supervisor did not report readiness");
        /* The helper's readiness is taken once runsc is released: its
         * commit (a sync) then runs during the boot, not in front of the
         * routers' and runsc's staging (NET waits for both anyway). */
        struct pollfd pf[2] = { { .fd = h->rs_ctl, .events = POLLIN },
                                { .fd = helper_ready || !runsc_released ? -1 : h->boot.slirp_ready_fd,
                                  .events = POLLIN } };
        if (poll(pf, 2, (int)left) < 0 && errno != EINTR)
            return lz_error_set(err, -errno, "poll: %s", strerror(errno));
        if (pf[1].revents) {
            if ((r = slirp_ready(h, err)) < 0)
                return r;
            helper_ready = true;
        }
        if (!pf[0].revents)
            continue;
        struct lz_rsmsg m;
        int n = rs_recv_dns(h, 0, &m);
        if (n == -ETIMEDOUT)
            continue;
        if (n == -EBADMSG)
            return lz_error_set(err, -EPROTO, "malformed message from the Runtime Supervisor");
        if (n <= 0)
            return lz_error_set(err, -EPIPE, "the Runtime Supervisor died during start (see %s/coordinator.log)",
                                c->domain_dir);
        if (m.kind == LZ_RS_STAGE) {
            if ((r = stage_rs_child(h, &m, err)) < 0)
                return r;
            struct lz_rs_slot t;
            if (lz_rs_slot_parse(m.str, &t) < 0 || t.kind != LZ_SLOT_RUNSC)
                continue;
            runsc_released = true;
            hc_model_action(HC_BOOT_SANDBOX, "d=%.12s", h->cfg->domain_id_hex);
            /* runsc boots now: the starting client's exec client does its
             * own start-up meanwhile and then waits for its process spec,
             * which only that client's hello gives it, after publication
             * (session.c). Without it the hello starts one as usual. */
            if (h->a->first_session >= 0 && !h->pre) {
                struct lz_error perr = { 0 };
                if (hc_session_prestart(h, h->a->first_session == 1, &perr) < 0)
                    hc_log("the first session's exec client was not started ahead: %s", perr.msg);
            }
            continue;
        }
        if (m.kind == LZ_RS_DNS) {
            hc_log("the Domain resolver's sockets received from the Runtime Supervisor");
            continue;
        }
        if (m.kind == LZ_RS_NET_READY) {
            if (!net_sent || net_ready)
                return lz_error_set(err, -EPROTO, "unexpected network readiness from the Runtime Supervisor");
            net_ready = true;
            hc_log("network policy in place: %s", m.str);
            hc_model_action(HC_START_SIDECAR, "d=%.12s", h->cfg->domain_id_hex);
            continue;
        }
        if (m.kind == LZ_RS_READY) {
            /* The Supervisor passes them before it starts runsc, and
             * reports READY only after the policy (NET_READY). */
            if (h->boot.dns_fd[0] < 0)
                return lz_error_set(err, -EPROTO, "the Runtime Supervisor did not pass the resolver's sockets");
            if (!net_ready)
                return lz_error_set(err, -EPROTO, "the Runtime Supervisor reported readiness before the network");
            readiness_fingerprint(h, m.u[0]);
            const char *tr = strstr(m.str, LZ_RS_TRANSPORT_SEP);
            snprintf(h->fuse_transport, sizeof h->fuse_transport, "%s", tr ? tr + strlen(LZ_RS_TRANSPORT_SEP) : "");
            char line[512];
            lz_rschan_format(&m, line, sizeof line);
            hc_log("sandbox ready: %s", line);
            char rhex[65];
            lz_hex(h->readiness, 32, rhex);
            struct lz_evidence ev;
            lz_evidence_init(&ev);
            lz_evidence_add(&ev, "readiness", rhex);
            lz_evidence_add(&ev, "policy", h->boot.policy_hex);
            /* Readiness commits network, router and sandbox together, and
             * the publication's intent with them: nothing physical happens
             * between the two (publish then only listens). */
            if ((r = lz_store_begin(h->st, err)) < 0)
                return r;
            if ((r = record(h, LZ_ROLE_NETWORK, LZ_P_COMMITTED, NULL, NULL, ev.s, err)) < 0 ||
                (r = record(h, LZ_ROLE_GIT_ROUTING, LZ_P_PREPARED, NULL, NULL, NULL, err)) < 0 ||
                (r = record_proc(h, LZ_ROLE_SANDBOX, "supervisor", "committed", &h->rs, err)) < 0 ||
                (r = commit_rs_children(h, err)) < 0 ||
                (r = record(h, LZ_ROLE_SANDBOX, LZ_P_COMMITTED, NULL, NULL, NULL, err)) < 0 ||
                (r = record(h, LZ_ROLE_PUBLICATION, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
                (r = lz_store_commit(h->st, err)) < 0) {
                lz_store_rollback(h->st);
                return r;
            }
            return 0;
        }
        if (m.kind == LZ_RS_FAIL)
            return lz_error_set(err, -EIO, "the sandbox could not start: %s", m.str);
    }
}

static int listen_socket(const char *path, struct lz_error *err) {
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        return lz_error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return lz_error_set(err, -errno, "socket: %s", strerror(errno));
    unlink(path); /* stale: we hold the Domain flock */
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (r < 0 || listen(fd, 64) < 0) {
        r = -errno;
        close(fd);
        return lz_error_set(err, r, "cannot listen on %s: %s", path, strerror(-r));
    }
    return fd;
}

/* Publication: the Domain's socket, where clients find it (its intent is
 * in the readiness transaction of sandbox_start). */
static int publish(struct hc *h, struct lz_error *err) {
    int r;
    if ((h->listen_fd = listen_socket(h->sock_path, err)) < 0)
        return h->listen_fd;
    /* Committed and the generation running: one transaction, nothing
     * physical between them. */
    if ((r = lz_store_begin(h->st, err)) < 0 ||
        (r = record(h, LZ_ROLE_PUBLICATION, LZ_P_COMMITTED, NULL, NULL, h->sock_path, err)) < 0 ||
        (r = lz_store_gen_set_state(h->st, h->gen, "running", err)) < 0 || (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        lz_closep(&h->listen_fd);
        return r;
    }
    return 0;
}

/* The acquisition order (docs/state.md, "Generations"; the model's
 * StartNewDomain .. PublishDomain): each step's durable intent comes
 * before its act and its evidence after. After a step that acted, its
 * model action is logged and then its crash point is passed. */
static const struct gen_step acquire[] = {
    /* participant        act                crash point         model action */
    { "prepared lower", lower_intent, "lower-intent", HC_NO_ACTION },
    { "prepared lower", lower_lease, "lease-inserted", HC_NO_ACTION },
    { "prepared lower", lower_lease_held, "lease-held", HC_NO_ACTION },
    { "sandbox", supervisor_spawn, NULL, HC_NO_ACTION },
    { "sandbox", supervisor_staged, NULL, HC_NO_ACTION },
    { "state anchor", anchor_intent, "anchor-intent", HC_NO_ACTION },
    { "state anchor", anchor_mount, "anchor-mounted", HC_NO_ACTION },
    { "state anchor", anchor_prepared, "anchor-prepared", HC_MOUNT_STATE_ANCHOR },
    { "trust anchor", trust_anchor, "trust-anchor", HC_CREATE_TRUST_ANCHOR },
    { "routing, network, helper", network_intents, NULL, HC_NO_ACTION },
    { "helper", helper_launch, NULL, HC_LAUNCH_SIDECAR },
    /* the helper's readiness and the policy (StartSidecar) run beside the
     * routers' and runsc's start (BootSandbox): both logged inside */
    { "sandbox", sandbox_start, NULL, HC_START_SANDBOX }, /* router-staged, runsc-staged */
    { "publication", publish, "running", HC_PUBLISH_DOMAIN },
};

int hc_start_generation(struct hc *h, struct lz_error *err) {
    int r = prepare_generation(h, err);
    if (r == 0)
        r = walk(h, acquire, LZ_ARRAY_SIZE(acquire), err);
    if (h->scan.running) /* a step before the Supervisor's failed */
        (void)scan_join(h, NULL);
    lz_closep(&h->boot.addr_fd);
    lz_closep(&h->boot.policy_fd);
    return r;
}

/* Waits (bounded) for the Supervisor to report `what` (EXITED,
 * UNMOUNTED); true when it did. Other reports are logged. */
static bool rs_await(struct hc *h, enum lz_rs_kind what, int timeout_ms) {
    long deadline = lz_now_ms() + timeout_ms;
    for (;;) {
        long left = deadline - lz_now_ms();
        struct lz_rsmsg m;
        int n = rs_recv(h, left > 0 ? (int)left : 0, &m);
        if (n == -EBADMSG) {
            hc_log("Supervisor: malformed message");
            continue;
        }
        if (n <= 0) {
            if (n == 0)
                lz_closep(&h->rs_ctl);
            return false;
        }
        if (m.kind == what)
            return true;
        if (m.kind == LZ_RS_UNMOUNT_FAILED) {
            hc_log("the Supervisor could not unmount the State Anchor: %s", m.str);
            return false;
        }
        char line[512];
        lz_rschan_format(&m, line, sizeof line);
        hc_log("Supervisor: %s", line);
    }
}

/* ---- release ----
 *
 * Best effort: a step never stops the walk; what it cannot prove released
 * clears h->rel.proven (or h->rel.ok) and the generation is left "failed"
 * for the next coordinator's recovery. h->rel.rec: there is a durable
 * generation to record into. */
static int rel_begin(struct hc *h, struct lz_error *err) {
    if (h->rel.rec)
        lz_store_gen_set_state(h->st, h->gen, "stopping", NULL);
    return 0;
}
static int rel_publication(struct hc *h, struct lz_error *err) {
    if (!h->rel.rec || !h->recorded[LZ_ROLE_PUBLICATION])
        return STEP_QUIET;
    record(h, LZ_ROLE_PUBLICATION, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err);
    if (h->sock_path)
        unlink(h->sock_path);
    record(h, LZ_ROLE_PUBLICATION, LZ_P_CLEAN, NULL, NULL, NULL, err);
    return STEP_QUIET;
}
/* The sandbox and its routers, by the Supervisor (STOP -> EXITED). */
static int rel_sandbox(struct hc *h, struct lz_error *err) {
    if (h->rs.pidfd < 0)
        return STEP_QUIET;
    if (h->rel.rec)
        record(h, LZ_ROLE_SANDBOX, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err);
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_STOP, NULL, NULL);
    if (!h->rs_exited_msg && h->rs_ctl >= 0 && !rs_await(h, LZ_RS_EXITED, lz_rs_stop_bound_ms(h->n_vol)))
        hc_log("the Supervisor did not report the sandbox stopped");
    return 0;
}
static int rel_helper(struct hc *h, struct lz_error *err) {
    if (h->slirp.pidfd < 0) {
        if (h->rel.rec && h->recorded[LZ_ROLE_HELPER])
            record(h, LZ_ROLE_HELPER, LZ_P_CLEAN, NULL, NULL, NULL, err);
        return STEP_QUIET;
    }
    int st;
    if (h->rel.rec)
        record(h, LZ_ROLE_HELPER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err);
    lz_child_stop(&h->slirp, 3000, &st);
    if (h->rel.rec)
        record(h, LZ_ROLE_HELPER, LZ_P_CLEAN, NULL, NULL, NULL, err);
    return 0;
}
static int rel_anchor_intent(struct hc *h, struct lz_error *err) {
    if (!h->anchor_ident[0] || !h->rel.rec)
        return STEP_QUIET;
    record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err);
    return 0;
}
/* The exact unmount, by the Supervisor (UNMOUNT -> UNMOUNTED). */
static int rel_anchor_unmount(struct hc *h, struct lz_error *err) {
    if (!h->anchor_ident[0] || !h->rel.rec)
        return STEP_QUIET;
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_UNMOUNT, NULL, NULL);
    if (h->rs_ctl < 0 || !rs_await(h, LZ_RS_UNMOUNTED, LZ_RS_T_UNMOUNTED_MS)) {
        hc_log("the State Anchor unmount was not confirmed by the Supervisor");
        h->rel.proven = false;
    }
    return 0;
}
static int rel_supervisor(struct hc *h, struct lz_error *err) {
    if (h->rs.pidfd >= 0) {
        int st;
        if (lz_child_wait(&h->rs, LZ_RS_T_EXIT_MS, &st) == -ETIMEDOUT) {
            hc_log("Runtime Supervisor did not stop in time; killing it");
            lz_child_signal(&h->rs, SIGKILL);
            lz_child_wait(&h->rs, -1, &st);
        }
        hc_log("Runtime Supervisor exited with status %d", st);
    }
    lz_closep(&h->rs_ctl);
    lz_netpolicy_clear(&h->policy);
    return STEP_QUIET;
}
/* Independent absence proof: nothing left in the Domain user namespace
 * (runsc, gofer, sandbox, router, exec clients: all gone), so no mount
 * namespace holding the anchor is left either. */
static int rel_absence_proof(struct hc *h, struct lz_error *err) {
    if (h->rs_userns && lz_ns_wait_unused("user", h->rs_userns, 10000) < 0) {
        hc_log("processes are still running in the Domain user namespace; the State Anchor is not released");
        h->rel.proven = false;
    }
    return STEP_QUIET;
}
static int rel_clean_sandbox(struct hc *h, struct lz_error *err) {
    if (!h->rel.rec || !h->rel.proven)
        return STEP_QUIET;
    if (h->recorded[LZ_ROLE_SANDBOX])
        record(h, LZ_ROLE_SANDBOX, LZ_P_CLEAN, NULL, NULL, NULL, err);
    if (h->recorded[LZ_ROLE_NETWORK])
        record(h, LZ_ROLE_NETWORK, LZ_P_CLEAN, NULL, NULL, NULL, err);
    if (h->recorded[LZ_ROLE_GIT_ROUTING])
        record(h, LZ_ROLE_GIT_ROUTING, LZ_P_CLEAN, NULL, NULL, NULL, err);
    return STEP_QUIET;
}
/* The anchor clean and the lower's release intent, one transaction. */
static int rel_lower_intent(struct hc *h, struct lz_error *err) {
    if (!h->rel.rec || !h->rel.proven)
        return STEP_QUIET;
    if (h->recorded[LZ_ROLE_STATE_ANCHOR] || h->recorded[LZ_ROLE_PREPARED_LOWER]) {
        bool ok = lz_store_begin(h->st, err) == 0;
        if (ok && h->recorded[LZ_ROLE_STATE_ANCHOR])
            ok = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_CLEAN, NULL, NULL, NULL, err) == 0;
        if (ok && h->recorded[LZ_ROLE_PREPARED_LOWER])
            ok = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, err) == 0;
        if (ok)
            ok = lz_store_commit(h->st, err) == 0;
        else
            lz_store_rollback(h->st);
        h->rel.ok = ok;
    }
    return 0;
}
static int rel_lease(struct hc *h, struct lz_error *err) {
    if (!h->rel.rec || !h->rel.proven || !h->rel.ok || !h->recorded[LZ_ROLE_PREPARED_LOWER])
        return STEP_QUIET;
    h->rel.ok = lz_catalog_lease_release(h->cfg->data_root, h->a->artifact_id, h->cfg->domain_id_hex, h->gen, err) >= 0;
    h->rel.lease_removed = h->rel.ok;
    return 0;
}
static int rel_lower_clean(struct hc *h, struct lz_error *err) {
    if (h->rel.lease_removed)
        h->rel.ok = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_CLEAN, NULL, NULL, NULL, err) == 0;
    return STEP_QUIET;
}
/* The model's UnmountStateAnchor: the anchor and the lower are released. */
static int rel_anchor_released(struct hc *h, struct lz_error *err) {
    return h->rel.rec && h->rel.proven && h->rel.ok && h->anchor_ident[0] ? 0 : STEP_QUIET;
}
static int rel_finish(struct hc *h, struct lz_error *err) {
    if (h->rel.rec && h->rel.proven) {
        if (h->rel.ok)
            h->rel.ok = lz_store_gen_set_state(h->st, h->gen, "clean", err) == 0;
        if (h->rel.ok)
            return 0;
        hc_log("release of generation %lld incomplete: %s", (long long)h->gen, err->msg);
    } else if (h->rel.rec) {
        lz_store_gen_set_state(h->st, h->gen, "failed", NULL);
        hc_log("generation %lld left for recovery by the next start", (long long)h->gen);
    }
    return STEP_QUIET;
}
static int rel_runtime_dir(struct hc *h, struct lz_error *err) {
    if (h->gen_dir) {
        _cleanup_close_ int rtfd = open(h->rt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char name[16];
        snprintf(name, sizeof name, "%.12s", h->cfg->domain_id_hex);
        if (rtfd >= 0)
            lz_rm_rf_at(rtfd, name);
    }
    return STEP_QUIET;
}

/* The release order (docs/state.md; the model's BeginTeardown ..
 * FinishTeardown): publication, sandbox (and the Git router with it), the
 * connectivity helper and network, the State Anchor (exact unmount, then
 * the independent absence proof), the prepared-lower lease. Each step
 * records its release intent first and clean only once the resource is
 * proven gone. */
static const struct gen_step release[] = {
    /* participant        act                  crash point              model action */
    { "generation", rel_begin, NULL, HC_BEGIN_TEARDOWN },
    { "publication", rel_publication, NULL, HC_NO_ACTION },
    { "sandbox", rel_sandbox, NULL, HC_STOP_SANDBOX },
    { "helper", rel_helper, NULL, HC_STOP_SIDECAR },
    { "state anchor", rel_anchor_intent, "anchor-release-intent", HC_NO_ACTION },
    { "state anchor", rel_anchor_unmount, "anchor-unmounted", HC_NO_ACTION },
    { "sandbox", rel_supervisor, NULL, HC_NO_ACTION },
    { "sandbox", rel_absence_proof, NULL, HC_NO_ACTION },
    { "sandbox, network, routing", rel_clean_sandbox, NULL, HC_NO_ACTION },
    { "prepared lower", rel_lower_intent, "lower-release-intent", HC_NO_ACTION },
    { "prepared lower", rel_lease, "lease-removed", HC_NO_ACTION },
    { "prepared lower", rel_lower_clean, NULL, HC_NO_ACTION },
    { "state anchor", rel_anchor_released, NULL, HC_UNMOUNT_STATE_ANCHOR },
    { "generation", rel_finish, NULL, HC_FINISH_TEARDOWN },
    { "generation", rel_runtime_dir, NULL, HC_NO_ACTION },
};

void hc_stop_generation(struct hc *h) {
    struct lz_error err = { 0 };
    h->rel.rec = h->st && h->gen > 0;
    h->rel.proven = h->rel.ok = true;
    h->rel.lease_removed = false;
    (void)walk(h, release, LZ_ARRAY_SIZE(release), &err);
}
