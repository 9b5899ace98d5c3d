/* coordinator.c — see coordinator.h. */
#include "coordinator.h"
#include "anchor.h"
#include "catalog.h"
#include "recovery.h"
#include "store.h"
#include "config.h"
#include "gitscan.h"
#include "idmap.h"
#include "netpolicy.h"
#include "netfollow.h"
#include "ocispec.h"
#include "paths.h"
#include "procenv.h"
#include "proto.h"
#include "rschan.h"
#include "spawn.h"
#include "supervisor.h"

#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>

#define MAX_SESSIONS 64
#define FLOCK_TIMEOUT_S 60
#define RELEASE_GRACE_MS 2000
#define DRAIN_TIMEOUT_MS 5000
#define SPEC_FEED_TIMEOUT_MS 10000


static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...) {
    char ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", gmtime_r(&now.tv_sec, &tm));
    fprintf(stderr, "%s.%03ld hc[%d]: ", ts, now.tv_nsec / 1000000, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Debug log of the protocol model's actions (docs/model/lazaret.pml), with
 * the model's action names, when LAZARET_DEBUG is set: the implementation's
 * transitions are traceable to the model (tests/integration/test_domains.py
 * checks the order). */
static void model_action(const char *action, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void model_action(const char *action, const char *fmt, ...) {
    static int debug = -1;
    if (debug < 0) {
        const char *e = getenv("LAZARET_DEBUG");
        debug = e && *e && strcmp(e, "0") != 0;
    }
    if (!debug)
        return;
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    logmsg("debug: model %s(%s)", action, b);
}

enum sess_state { S_HELLO, S_RUNNING, S_DRAINING, S_RELEASING, S_DONE };

struct outbuf { uint8_t buf[LZ_PROTO_MAX]; size_t len; };

struct session {
    int id;
    int sock;
    enum sess_state state;
    bool tty;
    struct lz_child exec;
    int master;            /* tty: PTY master */
    int in_w, out_r, err_r;/* pipes */
    uint8_t *inbuf; size_t inlen, inoff; /* pending input to the exec */
    bool in_eof_pending;
    struct outbuf pend;    /* pending message to the client (backpressure) */
    bool exited; int status;
    long deadline;         /* drain / release deadline */
    int release_step;
    char *procfile;
    char *command;         /* program name, for `lazaret ps` */
    int64_t started_wall;  /* ms since the epoch */
    bool recorded;         /* a Session Terminal record exists */
    bool release_recorded;
};

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct hc {
    const struct lz_coordinator_args *a;
    struct lz_config *cfg;
    char *rt, *gen_dir, *state_dir, *bundle_dir, *overlay_dir, *sock_path, *view;
    char *runsc, *shell, *router;
    char container_id[32];
    struct lz_child rs;
    struct lz_child slirp;
    int rs_ctl;
    struct lz_netpolicy policy;
    uint8_t policy_digest[32];
    uint8_t sidecar_id[16];
    uint8_t readiness[32];
    int listen_fd;
    int sfd;
    struct session *s[MAX_SESSIONS];
    int next_id;
    bool had_session;
    bool stopping;
    struct lz_gitscan git;         /* what the host's Git reads from the workspace */
    /* Durable generation (store.h). */
    struct lz_store *st;
    int64_t gen;
    char *rootfs;                  /* <data_root>/prepared/<artifact>/rootfs */
    char *anchor_root, *anchor_target;
    char anchor_ident[4096];       /* "" until the anchor is mounted */
    uint64_t rs_userns;            /* the Domain user namespace of this generation */
    bool recorded[LZ_ROLE_COUNT];  /* participant rows written for this generation */
    bool rs_exited_msg;            /* the Supervisor reported the sandbox gone */
    struct lz_procid router_id, runsc_id; /* the Supervisor's children, as staged */
    /* Writable volumes, each served by its own router (slot "vol<i>") at
     * vol_view[i]; vol_of[i] is its index in profile.volumes. */
    char *vol_view[LZ_RS_VOLUMES_MAX];
    size_t vol_of[LZ_RS_VOLUMES_MAX], n_vol;
    struct lz_procid vol_id[LZ_RS_VOLUMES_MAX];
};

/* "vol<i>" for a writable volume of this generation: i, else -1. */
static int vol_slot(const struct hc *h, const char *slot) {
    char *end;
    if (strncmp(slot, "vol", 3) != 0 || slot[3] < '0' || slot[3] > '9')
        return -1;
    errno = 0;
    unsigned long i = strtoul(slot + 3, &end, 10);
    if (errno || *end || i >= h->n_vol)
        return -1;
    return (int)i;
}

/* One participant transition, logged with the model's vocabulary. */
static int record(struct hc *h, enum lz_role role, enum lz_pstate state, const char *artifact, const char *mount,
                  const char *evidence, struct lz_error *err) {
    int r = lz_store_part_set(h->st, h->gen, role, state, artifact, mount, evidence, err);
    if (r < 0)
        return lz_error_prefix(err, r, "cannot record %s %s", lz_role_name(role), lz_pstate_name(state));
    h->recorded[role] = true;
    logmsg("store: generation %lld %s -> %s", (long long)h->gen, lz_role_name(role), lz_pstate_name(state));
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
    logmsg("store: generation %lld %s process %s %s (%s)", (long long)h->gen, lz_role_name(role), slot, phase, t);
    return 0;
}

/* STAGE (pid, slot): the Supervisor holds that child (lazaret-router, a
 * writable volume's router "vol<i>", or runsc) at its barrier. Its
 * identity is read through our own pidfd for the PID (the child is the
 * Supervisor's and cannot be reaped before it is released, so the PID
 * names exactly it) and recorded staged; then the Supervisor is told to
 * release it (STAGED). */
static int stage_rs_child(struct hc *h, const struct lz_rsmsg *m, struct lz_error *err) {
    const char *slot = m->str;
    if (m->u[0] == 0 || m->u[0] > INT32_MAX ||
        (strcmp(slot, "router") && strcmp(slot, "runsc") && vol_slot(h, slot) < 0))
        return lz_error_set(err, -EPROTO, "unexpected message from the Runtime Supervisor");
    pid_t pid = (pid_t)m->u[0];
    /* Volume routers are routers too: recovery stops them with the rest. */
    enum lz_role role = strcmp(slot, "runsc") ? LZ_ROLE_GIT_ROUTING : LZ_ROLE_SANDBOX;
    struct lz_child c = { .pid = pid, .pidfd = (int)syscall(SYS_pidfd_open, pid, 0), .barrier_fd = -EBADF,
                          .status_fd = -EBADF };
    if (c.pidfd < 0)
        return lz_error_set(err, -errno, "cannot open the Supervisor's %s: %s", slot, strerror(errno));
    int r = record_proc(h, role, slot, "staged", &c, err);
    int vi = vol_slot(h, slot);
    struct lz_procid *keep = vi >= 0 ? &h->vol_id[vi] : !strcmp(slot, "router") ? &h->router_id : &h->runsc_id;
    if (r == 0)
        r = lz_procid_from_pidfd(c.pidfd, c.pid, keep);
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
        char slot[16];
        snprintf(slot, sizeof slot, "vol%zu", i);
        if (h->vol_id[i].ino)
            r = lz_store_proc_set(h->st, h->gen, LZ_ROLE_GIT_ROUTING, slot, "committed", &h->vol_id[i], err);
    }
    return r;
}

/* Next message from the Supervisor, at most timeout_ms: 1, 0 when the
 * Supervisor is gone, -ETIMEDOUT, -EBADMSG (lz_rschan_recv). */
static int rs_recv(struct hc *h, int timeout_ms, struct lz_rsmsg *m) {
    return h->rs_ctl < 0 ? 0 : lz_rschan_recv(h->rs_ctl, timeout_ms, m);
}

static void ready_reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ready_reply(int fd, const char *fmt, ...) {
    if (fd < 0)
        return;
    char b[LZ_ERROR_MAX + 16];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof b - 2)
        n = (int)sizeof b - 2;
    b[n++] = '\n';
    (void)lz_write_full(fd, b, (size_t)n);
}


/* ---- generation start ---- */

static int find_shell(const char *rootfs, char **ret) {
    static const char *const cands[] = { "usr/bin/bash", "bin/bash", "usr/bin/sh", "bin/sh" };
    _cleanup_close_ int rfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return -errno;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cands); i++) {
        struct stat st;
        if (fstatat(rfd, cands[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
            *ret = lz_xasprintf("/%s", cands[i]);
            return 0;
        }
    }
    return -ENOENT;
}

static void add_terminfo_binds(struct lz_oci_bind **b, size_t *n) {
    static const char *const dirs[][2] = {
        { "/etc/terminfo", "/run/lazaret/terminfo/etc" },
        { "/lib/terminfo", "/run/lazaret/terminfo/lib" },
        { "/usr/share/terminfo", "/run/lazaret/terminfo/share" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
        struct stat st;
        if (stat(dirs[i][0], &st) == 0 && S_ISDIR(st.st_mode)) {
            *b = lz_xrealloc(*b, (*n + 1) * sizeof **b);
            (*b)[*n] = (struct lz_oci_bind){ lz_xstrdup(dirs[i][0]), lz_xstrdup(dirs[i][1]), true };
            (*n)++;
        }
    }
}

static int start_slirp(struct hc *h, struct lz_error *err) {
    static const char *const cands[] = { "/usr/bin/slirp4netns", "/usr/local/bin/slirp4netns" };
    const char *path = NULL;
    const char *env = secure_getenv("LAZARET_SLIRP4NETNS");
    if (env && env[0] == '/')
        path = env;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cands) && !path; i++)
        if (access(cands[i], X_OK) == 0)
            path = cands[i];
    if (!path)
        return lz_error_set(err, -ENOENT, "slirp4netns not found: apt-get install slirp4netns");
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) < 0)
        return lz_error_set(err, -errno, "pipe: %s", strerror(errno));
    char pid[16], ready[32];
    snprintf(pid, sizeof pid, "%d", (int)h->rs.pid);
    snprintf(ready, sizeof ready, "--ready-fd=%d", rp[1]);
    /* --disable-host-loopback: 10.0.2.2 does not lead to the host's
     * loopback; sandbox and seccomp: the helper locks itself down. */
    char *argv[] = { (char *)path, (char *)"--configure", (char *)"--mtu=65520",
                     (char *)"--disable-host-loopback", (char *)"--enable-sandbox",
                     (char *)"--enable-seccomp", ready, pid, (char *)LZ_NET_TAP, NULL };
    int keep[] = { rp[1] };
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_HELPER);
    struct lz_spawn_opts o = { .path = path, .argv = argv, .envp = envp, .stdin_fd = -1, .stdout_fd = 2,
                               .stderr_fd = 2, .keep_fds = keep, .n_keep_fds = 1, .setns_pidfd = -1,
                               .pdeathsig = SIGTERM, .barrier = true };
    int r = lz_spawn(&o, &h->slirp);
    close(rp[1]);
    if (r < 0) {
        close(rp[0]);
        return lz_error_set(err, r, "cannot start slirp4netns: %s", strerror(-r));
    }
    /* Staged ownership before the helper may proceed. */
    if ((r = record_proc(h, LZ_ROLE_HELPER, "slirp4netns", "staged", &h->slirp, err)) < 0 ||
        (r = lz_child_release(&h->slirp)) < 0) {
        close(rp[0]);
        return r < 0 && !err->msg[0] ? lz_error_set(err, r, "slirp4netns failed to start: %s", strerror(-r)) : r;
    }
    char b[8] = "";
    struct pollfd p = { .fd = rp[0], .events = POLLIN };
    ssize_t n = poll(&p, 1, 15000) > 0 ? read(rp[0], b, sizeof b) : -1;
    close(rp[0]);
    if (n < 1 || b[0] != '1')
        return lz_error_set(err, -EIO, "the connectivity helper (slirp4netns) did not become ready; "
                                       "is /dev/net/tun usable? (lazaret doctor)");
    return record_proc(h, LZ_ROLE_HELPER, "slirp4netns", "committed", &h->slirp, err);
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
    logmsg("network readiness fingerprint %s", hex);
}

/* The OCI bundle: written once the Supervisor exists, since the spec names
 * its network namespace. */
static int write_bundle(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
    _cleanup_free_ char *init = NULL;
    if ((r = lz_libexec_path("lazaret-init", &init, err)) < 0)
        return r;
    struct lz_oci_bind *binds = NULL;
    size_t nb = 0;
    add_terminfo_binds(&binds, &nb);
    /* A writable volume is seen through its router (set-id bits, device
     * nodes); a read-only bind cannot create or chmod anything. */
    for (size_t i = 0, w = 0; i < c->profile.n_volumes; i++) {
        const struct lz_volume *v = &c->profile.volumes[i];
        (void)lz_mkdir_p(v->host, 0700);
        const char *src = v->host;
        if (w < h->n_vol && h->vol_of[w] == i)
            src = h->vol_view[w++];
        binds = lz_xrealloc(binds, (nb + 1) * sizeof *binds);
        binds[nb++] = (struct lz_oci_bind){ lz_xstrdup(src), lz_xstrdup(v->container), v->read_only };
    }
    /* The sandbox's resolver is the connectivity helper's DNS forwarder. */
    static const struct { const char *name, *dest, *text; } netfiles[] = {
        { "resolv.conf", "/etc/resolv.conf", "nameserver 10.0.2.3\n" },
        { "hosts", "/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tlazaret\n" },
        { "hostname", "/etc/hostname", "lazaret\n" },
    };
    _cleanup_close_ int gfd = open(h->gen_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(netfiles); i++) {
        if (gfd < 0 || lz_write_file_atomic_at(gfd, netfiles[i].name, netfiles[i].text,
                                               strlen(netfiles[i].text), 0644) < 0)
            continue;
        binds = lz_xrealloc(binds, (nb + 1) * sizeof *binds);
        binds[nb++] = (struct lz_oci_bind){ lz_xasprintf("%s/%s", h->gen_dir, netfiles[i].name),
                                            lz_xstrdup(netfiles[i].dest), true };
    }
    char netns[64];
    snprintf(netns, sizeof netns, "/proc/%d/ns/net", (int)h->rs.pid);
    struct lz_oci_bind *anchors = lz_xcalloc(c->profile.n_persistent_dirs + 1, sizeof *anchors);
    for (size_t i = 0; i < c->profile.n_persistent_dirs; i++)
        anchors[i] = (struct lz_oci_bind){ lz_xasprintf("%s%s", h->anchor_target, c->profile.persistent_dirs[i]),
                                           lz_xstrdup(c->profile.persistent_dirs[i]), false };
    struct lz_sandbox_spec spec = {
        .rootfs = h->rootfs, .workspace = c->workspace, .view = h->view, .init_path = init,
        .hostname = "lazaret", .netns_path = netns, .binds = binds, .n_binds = nb,
        .anchors = anchors, .n_anchors = c->profile.n_persistent_dirs,
    };
    _cleanup_free_ char *json = NULL;
    r = lz_oci_sandbox_config(&spec, &json, err);
    lz_oci_binds_free(binds, nb);
    lz_oci_binds_free(anchors, c->profile.n_persistent_dirs);
    if (r < 0)
        return r;
    _cleanup_close_ int bfd = open(h->bundle_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0 || (r = lz_write_file_atomic_at(bfd, "config.json", json, strlen(json), 0600)) < 0) {
        return lz_error_set(err, bfd < 0 ? -errno : r, "cannot write the OCI bundle in %s", h->bundle_dir);
    }

    return 0;
}

static int start_generation(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
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
        return lz_error_set(err, r, "cannot create runtime directories under %s: %s", h->gen_dir,
                            strerror(-r));
    for (size_t i = 0; i < c->profile.n_volumes; i++) {
        const struct lz_volume *v = &c->profile.volumes[i];
        if (v->read_only)
            continue;
        if (h->n_vol >= LZ_RS_VOLUMES_MAX)
            return lz_error_set(err, -E2BIG, "more than %d writable volumes: make some read-only",
                                LZ_RS_VOLUMES_MAX);
        h->vol_view[h->n_vol] = lz_xasprintf("%s/volume-%zu", h->gen_dir, h->n_vol);
        h->vol_of[h->n_vol] = i;
        /* The router's source must exist before it starts. */
        if ((r = lz_mkdir_p(v->host, 0700)) < 0 || (r = lz_mkdir_p(h->vol_view[h->n_vol], 0700)) < 0)
            return lz_error_set(err, r, "cannot create %s or its view: %s", v->host, strerror(-r));
        h->n_vol++;
    }

    if ((r = lz_find_runsc(&h->runsc, err)) < 0)
        return r;
    _cleanup_free_ char *init = NULL;
    if ((r = lz_libexec_path("lazaret-init", &init, err)) < 0)
        return r;
    if ((r = lz_libexec_path("lazaret-router", &h->router, err)) < 0)
        return r;
    if (find_shell(h->rootfs, &h->shell) < 0)
        h->shell = lz_xstrdup("/bin/sh");

    /* The host's address changes, watched from here (the host namespace)
     * from before the snapshot below; the Supervisor follows them
     * (netfollow.h). LAZARET_TEST_NETFOLLOW=off is for tests only: it shows
     * that a new host address is reachable without the follower. */
    _cleanup_close_ int afd = -EBADF;
    const char *nf = getenv("LAZARET_TEST_NETFOLLOW");
    if (nf && !strcmp(nf, "off"))
        logmsg("WARNING: host addresses are NOT followed (LAZARET_TEST_NETFOLLOW=off, tests only)");
    else if ((afd = lz_netfollow_open_host_socket(err)) < 0)
        return afd;
    char afdstr[16];
    snprintf(afdstr, sizeof afdstr, "%d", afd);

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
    char pdigest[65];
    lz_hex(h->policy_digest, 32, pdigest);
    _cleanup_close_ int pfd = memfd_create("lazaret-netpolicy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (pfd < 0 || lz_write_full(pfd, pbytes, plen) < 0 ||
        fcntl(pfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        lseek(pfd, 0, SEEK_SET) < 0)
        return lz_error_set(err, -errno, "cannot pass the network policy: %s", strerror(errno));
    char pfdstr[16];
    snprintf(pfdstr, sizeof pfdstr, "%d", pfd);

    /* The prepared lower: intent, the exact catalog lease, lease held. */
    if ((r = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_INTENT, h->a->artifact_id, NULL, NULL, err)) < 0)
        return r;
    lz_crash_point("lower-intent");
    if ((r = lz_catalog_lease_acquire(c->data_root, h->a->artifact_id, c->domain_id_hex, h->gen, err)) < 0)
        return r;
    lz_crash_point("lease-inserted");
    if ((r = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_LEASE_HELD, NULL, NULL, NULL, err)) < 0)
        return r;
    lz_crash_point("lease-held");

    /* The Runtime Supervisor, in new user + network + mount namespaces. */
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return lz_error_set(err, -errno, "socketpair: %s", strerror(errno));
    h->rs_ctl = sp[0];
    _cleanup_free_ char *self = NULL;
    if ((r = lz_self_exe(&self)) < 0) {
        close(sp[1]);
        return lz_error_set(err, r, "cannot find the lazaret binary");
    }
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", sp[1]);
    /* What the host's Git reads or runs from the workspace is kept
     * read-only by the router as well (gitscan.h); all of it, or no Domain. */
    long scan_t0 = lz_now_ms();
    lz_gitscan_clear(&h->git);
    if ((r = lz_gitscan_run(c->workspace, NULL, &h->git, err)) < 0) {
        close(sp[1]);
        return r;
    }
    logmsg("host Git scan: %zu repositories, %zu entries, %zu protected paths, %ld ms", h->git.n_repos,
           h->git.n_entries, h->git.n_protect, lz_now_ms() - scan_t0);
    for (size_t i = 0; i < h->git.n_log; i++)
        logmsg("host Git: %s", h->git.log[i]);
    for (size_t i = 0; i < h->git.n_notices; i++)
        logmsg("NOTICE: %s", h->git.notices[i]);
    size_t n_persist = c->profile.n_persistent_dirs;
    _cleanup_free_ char **argv =
        lz_xcalloc(40 + 2 * h->git.n_protect + 2 * n_persist + 4 * LZ_RS_VOLUMES_MAX + 2 * 3, sizeof *argv);
    size_t na = 0;
    char *fixed[] = { self, (char *)"__supervisor", (char *)"--ctl-fd", fdstr,
                      (char *)"--runsc", h->runsc, (char *)"--state", h->state_dir,
                      (char *)"--bundle", h->bundle_dir, (char *)"--id", h->container_id,
                      (char *)"--overlay", h->overlay_dir, (char *)"--router", h->router,
                      (char *)"--workspace", c->workspace, (char *)"--view", h->view,
                      (char *)"--policy-fd", pfdstr, (char *)"--policy-digest", pdigest };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed); i++)
        argv[na++] = fixed[i];
    if (afd >= 0) {
        argv[na++] = (char *)"--addr-fd";
        argv[na++] = afdstr;
    }
    for (size_t i = 0; i < h->git.n_protect; i++) {
        argv[na++] = (char *)"--protect";
        argv[na++] = h->git.protect[i];
    }
    for (size_t i = 0; i < h->n_vol; i++) {
        argv[na++] = (char *)"--volume";
        argv[na++] = c->profile.volumes[h->vol_of[i]].host;
        argv[na++] = (char *)"--volume-view";
        argv[na++] = h->vol_view[i];
    }
    /* Symlinks the host would follow into Lazaret's own storage are refused
     * by every router (docs/security-git.md, "Symlinks to host paths"). */
    char *deny[] = { c->data_root, h->rt, c->domain_dir };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(deny); i++) {
        argv[na++] = (char *)"--deny-link-target";
        argv[na++] = deny[i];
    }
    if (n_persist) {
        char *anc[] = { (char *)"--rootfs", h->rootfs, (char *)"--anchor-root", h->anchor_root,
                        (char *)"--anchor-target", h->anchor_target };
        for (size_t i = 0; i < LZ_ARRAY_SIZE(anc); i++)
            argv[na++] = anc[i];
        for (size_t i = 0; i < n_persist; i++) {
            argv[na++] = (char *)"--persist";
            argv[na++] = c->profile.persistent_dirs[i];
        }
    }
    argv[na] = NULL;
    if ((r = record(h, LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0) {
        close(sp[1]);
        return r;
    }
    int keep[] = { sp[1], pfd, afd };
    /* Our hooks only (procenv.h); it passes the bare helper set on. */
    _cleanup_env_ char **rs_env = lz_env_build(LZ_ENV_SUPERVISOR);
    struct lz_spawn_opts o = {
        .path = self, .argv = argv, .envp = rs_env, .stdin_fd = -1, .stdout_fd = 2, .stderr_fd = 2,
        .keep_fds = keep, .n_keep_fds = afd >= 0 ? 3 : 2,
        .clone_flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS,
        .setns_pidfd = -1, .barrier = true, .pdeathsig = SIGTERM,
    };
    r = lz_spawn(&o, &h->rs);
    close(sp[1]);
    if (r < 0)
        return lz_error_set(err, r, "cannot create the Domain namespaces: %s%s", strerror(-r),
                            r == -EPERM || r == -ENOSPC
                                ? " (unprivileged user namespaces disabled? run `lazaret doctor`)"
                                : "");
    logmsg("Runtime Supervisor started (pid %d), writing ID maps", (int)h->rs.pid);
    /* Staged ownership, with the namespaces it made, before it may run. */
    {
        char ev[160];
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
        snprintf(ev, sizeof ev, "userns=%llu mntns=%llu netns=%llu", ino[0], ino[1], ino[2]);
        if ((r = lz_store_begin(h->st, err)) < 0 ||
            (r = record(h, LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, ev, err)) < 0 ||
            (r = record_proc(h, LZ_ROLE_SANDBOX, "supervisor", "staged", &h->rs, err)) < 0 ||
            (r = lz_store_commit(h->st, err)) < 0) {
            lz_store_rollback(h->st);
            lz_child_signal(&h->rs, SIGKILL);
            return r;
        }
    }
    if ((r = lz_idmap_write(h->rs.pid, err)) < 0) {
        lz_child_signal(&h->rs, SIGKILL);
        int st;
        lz_child_wait(&h->rs, -1, &st);
        return lz_error_prefix(err, r, "cannot map IDs into the Domain user namespace");
    }
    if ((r = lz_child_release(&h->rs)) < 0)
        return lz_error_set(err, r, "the Runtime Supervisor failed to start: %s", strerror(-r));

    /* The State Anchor: intent, the mount (by the Supervisor), prepared
     * with its mount identity. */
    if (c->profile.n_persistent_dirs) {
        if ((r = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_INTENT, h->a->artifact_id, NULL, NULL, err)) < 0)
            return r;
        lz_crash_point("anchor-intent");
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
        lz_crash_point("anchor-mounted");
        if ((r = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_PREPARED, NULL, h->anchor_ident, NULL, err)) < 0)
            return r;
        logmsg("State Anchor mounted: %s", h->anchor_ident);
        model_action("MountStateAnchor", "d=%.12s", c->domain_id_hex);
        lz_crash_point("anchor-prepared");
    }
    /* Three intents, one transaction. */
    if ((r = lz_store_begin(h->st, err)) < 0)
        return r;
    if ((r = record(h, LZ_ROLE_GIT_ROUTING, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = record(h, LZ_ROLE_NETWORK, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = record(h, LZ_ROLE_HELPER, LZ_P_INTENT, NULL, NULL, NULL, err)) < 0 ||
        (r = lz_store_commit(h->st, err)) < 0) {
        lz_store_rollback(h->st);
        return r;
    }

    /* The connectivity helper, in our (host) network namespace, attached to
     * the enforcement namespace; ownership recorded before readiness. */
    if ((r = start_slirp(h, err)) < 0)
        return r;
    logmsg("connectivity helper slirp4netns started (pid %d)", (int)h->slirp.pid);
    if ((r = record(h, LZ_ROLE_HELPER, LZ_P_COMMITTED, NULL, NULL, NULL, err)) < 0)
        return r;
    model_action("StartSidecar", "d=%.12s", c->domain_id_hex);

    if ((r = write_bundle(h, err)) < 0)
        return r;
    (void)lz_rschan_send(h->rs_ctl, LZ_RS_NET, NULL, NULL);

    /* Wait for READY or FAIL. */
    long deadline = lz_now_ms() + LZ_RS_T_READY_MS;
    for (;;) {
        long left = deadline - lz_now_ms();
        struct lz_rsmsg m;
        int n = rs_recv(h, left > 0 ? (int)left : 0, &m);
        if (n == -ETIMEDOUT)
            return lz_error_set(err, -ETIMEDOUT, "the Runtime Supervisor did not report readiness");
        if (n == -EBADMSG)
            return lz_error_set(err, -EPROTO, "malformed message from the Runtime Supervisor");
        if (n <= 0)
            return lz_error_set(err, -EPIPE, "the Runtime Supervisor died during start (see %s/coordinator.log)",
                                c->domain_dir);
        if (m.kind == LZ_RS_STAGE) {
            if ((r = stage_rs_child(h, &m, err)) < 0)
                return r;
            continue;
        }
        if (m.kind == LZ_RS_READY) {
            readiness_fingerprint(h, m.u[0]);
            char line[512];
            lz_rschan_format(&m, line, sizeof line);
            logmsg("sandbox ready: %s", line);
            char rhex[65], ev[256];
            lz_hex(h->readiness, 32, rhex);
            snprintf(ev, sizeof ev, "readiness=%s policy=%s", rhex, pdigest);
            /* Readiness commits network, router and sandbox together. */
            if ((r = lz_store_begin(h->st, err)) < 0)
                return r;
            if ((r = record(h, LZ_ROLE_NETWORK, LZ_P_COMMITTED, NULL, NULL, ev, err)) < 0 ||
                (r = record(h, LZ_ROLE_GIT_ROUTING, LZ_P_PREPARED, NULL, NULL, NULL, err)) < 0 ||
                (r = record_proc(h, LZ_ROLE_SANDBOX, "supervisor", "committed", &h->rs, err)) < 0 ||
                (r = commit_rs_children(h, err)) < 0 ||
                (r = record(h, LZ_ROLE_SANDBOX, LZ_P_COMMITTED, NULL, NULL, NULL, err)) < 0 ||
                (r = lz_store_commit(h->st, err)) < 0) {
                lz_store_rollback(h->st);
                return r;
            }
            model_action("StartSandbox", "d=%.12s", c->domain_id_hex);
            return 0;
        }
        if (m.kind == LZ_RS_FAIL)
            return lz_error_set(err, -EIO, "the sandbox could not start: %s", m.str);
    }
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
            logmsg("Supervisor: malformed message");
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
            logmsg("the Supervisor could not unmount the State Anchor: %s", m.str);
            return false;
        }
        char line[512];
        lz_rschan_format(&m, line, sizeof line);
        logmsg("Supervisor: %s", line);
    }
}

/* The release order of the model: publication, sandbox (and the Git router
 * with it), the connectivity helper and network, the State Anchor (exact
 * unmount, then independent absence proof), the prepared-lower lease. Each
 * step records its release intent first and clean only once the resource is
 * proven gone; a step that cannot prove it leaves the generation "failed"
 * for the next coordinator's recovery. */
static void stop_generation(struct hc *h) {
    struct lz_error err = { 0 };
    bool rec = h->st && h->gen > 0;
    bool proven = true;
    if (rec)
        lz_store_gen_set_state(h->st, h->gen, "stopping", NULL);
    model_action("BeginTeardown", "d=%.12s", h->cfg->domain_id_hex);
    if (rec && h->recorded[LZ_ROLE_PUBLICATION]) {
        record(h, LZ_ROLE_PUBLICATION, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, &err);
        if (h->sock_path)
            unlink(h->sock_path);
        record(h, LZ_ROLE_PUBLICATION, LZ_P_CLEAN, NULL, NULL, NULL, &err);
    }
    if (h->rs.pidfd >= 0) {
        if (rec)
            record(h, LZ_ROLE_SANDBOX, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, &err);
        (void)lz_rschan_send(h->rs_ctl, LZ_RS_STOP, NULL, NULL);
        if (!h->rs_exited_msg && h->rs_ctl >= 0 && !rs_await(h, LZ_RS_EXITED, lz_rs_stop_bound_ms(h->n_vol)))
            logmsg("the Supervisor did not report the sandbox stopped");
        model_action("StopSandbox", "d=%.12s", h->cfg->domain_id_hex);
    }
    if (h->slirp.pidfd >= 0) {
        int st;
        if (rec)
            record(h, LZ_ROLE_HELPER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, &err);
        lz_child_stop(&h->slirp, 3000, &st);
        if (rec)
            record(h, LZ_ROLE_HELPER, LZ_P_CLEAN, NULL, NULL, NULL, &err);
        model_action("StopSidecar", "d=%.12s", h->cfg->domain_id_hex);
    } else if (rec && h->recorded[LZ_ROLE_HELPER]) {
        record(h, LZ_ROLE_HELPER, LZ_P_CLEAN, NULL, NULL, NULL, &err);
    }
    if (h->anchor_ident[0] && rec) {
        record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, &err);
        lz_crash_point("anchor-release-intent");
        (void)lz_rschan_send(h->rs_ctl, LZ_RS_UNMOUNT, NULL, NULL);
        if (h->rs_ctl < 0 || !rs_await(h, LZ_RS_UNMOUNTED, LZ_RS_T_UNMOUNTED_MS)) {
            logmsg("the State Anchor unmount was not confirmed by the Supervisor");
            proven = false;
        }
        lz_crash_point("anchor-unmounted");
    }
    if (h->rs.pidfd >= 0) {
        int st;
        if (lz_child_wait(&h->rs, LZ_RS_T_EXIT_MS, &st) == -ETIMEDOUT) {
            logmsg("Runtime Supervisor did not stop in time; killing it");
            lz_child_signal(&h->rs, SIGKILL);
            lz_child_wait(&h->rs, -1, &st);
        }
        logmsg("Runtime Supervisor exited with status %d", st);
    }
    lz_closep(&h->rs_ctl);
    lz_netpolicy_clear(&h->policy);
    /* Independent absence proof: nothing left in the Domain user namespace
     * (runsc, gofer, sandbox, router, exec clients: all gone), so no mount
     * namespace holding the anchor is left either. */
    if (h->rs_userns && lz_ns_wait_unused("user", h->rs_userns, 10000) < 0) {
        logmsg("processes are still running in the Domain user namespace; the State Anchor is not released");
        proven = false;
    }
    if (rec && proven) {
        if (h->recorded[LZ_ROLE_SANDBOX])
            record(h, LZ_ROLE_SANDBOX, LZ_P_CLEAN, NULL, NULL, NULL, &err);
        if (h->recorded[LZ_ROLE_NETWORK])
            record(h, LZ_ROLE_NETWORK, LZ_P_CLEAN, NULL, NULL, NULL, &err);
        if (h->recorded[LZ_ROLE_GIT_ROUTING])
            record(h, LZ_ROLE_GIT_ROUTING, LZ_P_CLEAN, NULL, NULL, NULL, &err);
        bool ok = true;
        if (h->recorded[LZ_ROLE_STATE_ANCHOR] || h->recorded[LZ_ROLE_PREPARED_LOWER]) {
            ok = lz_store_begin(h->st, &err) == 0;
            if (ok && h->recorded[LZ_ROLE_STATE_ANCHOR])
                ok = record(h, LZ_ROLE_STATE_ANCHOR, LZ_P_CLEAN, NULL, NULL, NULL, &err) == 0;
            if (ok && h->recorded[LZ_ROLE_PREPARED_LOWER])
                ok = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_RELEASE_INTENT, NULL, NULL, NULL, &err) == 0;
            if (ok)
                ok = lz_store_commit(h->st, &err) == 0;
            else
                lz_store_rollback(h->st);
        }
        lz_crash_point("lower-release-intent");
        if (ok && h->recorded[LZ_ROLE_PREPARED_LOWER]) {
            int r = lz_catalog_lease_release(h->cfg->data_root, h->a->artifact_id, h->cfg->domain_id_hex, h->gen,
                                             &err);
            ok = r >= 0;
            lz_crash_point("lease-removed");
            if (ok)
                ok = record(h, LZ_ROLE_PREPARED_LOWER, LZ_P_CLEAN, NULL, NULL, NULL, &err) == 0;
        }
        if (ok && h->anchor_ident[0])
            model_action("UnmountStateAnchor", "d=%.12s", h->cfg->domain_id_hex);
        if (ok)
            ok = lz_store_gen_set_state(h->st, h->gen, "clean", &err) == 0;
        if (ok)
            model_action("FinishTeardown", "d=%.12s", h->cfg->domain_id_hex);
        if (!ok)
            logmsg("release of generation %lld incomplete: %s", (long long)h->gen, err.msg);
    } else if (rec) {
        lz_store_gen_set_state(h->st, h->gen, "failed", NULL);
        logmsg("generation %lld left for recovery by the next start", (long long)h->gen);
    }
    if (h->gen_dir) {
        _cleanup_close_ int rtfd = open(h->rt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char name[16];
        snprintf(name, sizeof name, "%.12s", h->cfg->domain_id_hex);
        if (rtfd >= 0)
            lz_rm_rf_at(rtfd, name);
    }
}

/* ---- sessions ---- */

static bool env_name_allowed(const char *kv) {
    static const char *const allowed[] = { "TERM=", "LANG=", "COLORTERM=", "LC_ALL=", "LC_CTYPE=",
                                           "LC_MESSAGES=", "LANGUAGE=", "TZ=" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(allowed); i++)
        if (!strncmp(kv, allowed[i], strlen(allowed[i])))
            return true;
    return false;
}

static void strv_push(char ***v, size_t *n, char *s) {
    *v = lz_xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}
static void strv_free(char **v) {
    /* Entries may hold resolved profile secrets. */
    for (size_t i = 0; v && v[i]; i++) {
        sodium_memzero(v[i], strlen(v[i]));
        free(v[i]);
    }
    free(v);
}

static void session_send(struct session *s, uint8_t type, uint8_t ch, const void *p, size_t n) {
    if (s->sock < 0)
        return;
    /* Control messages are small and rare; data goes through the pending
     * buffer path in pump_output. A full socket here means the client
     * stopped reading: it will see EOF when we close. */
    int r = lz_msg_send(s->sock, type, ch, p, n);
    if (r == -EAGAIN) {
        int fl = fcntl(s->sock, F_GETFL);
        fcntl(s->sock, F_SETFL, fl & ~O_NONBLOCK);
        struct timeval tv = { .tv_sec = 2 };
        setsockopt(s->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        lz_msg_send(s->sock, type, ch, p, n);
        fcntl(s->sock, F_SETFL, fl);
    }
}

static void session_refuse(struct session *s, uint32_t code, const char *msg) {
    uint8_t b[LZ_ERROR_MAX + 8];
    size_t n = strlen(msg);
    if (n > LZ_ERROR_MAX)
        n = LZ_ERROR_MAX;
    lz_put_u32(b, code);
    memcpy(b + 4, msg, n);
    session_send(s, LZ_MSG_REFUSED, 0, b, n + 4);
}

static void session_free(struct hc *h, struct session *s) {
    lz_closep(&s->sock);
    lz_closep(&s->master);
    lz_closep(&s->in_w);
    lz_closep(&s->out_r);
    lz_closep(&s->err_r);
    if (s->recorded && !s->release_recorded) {
        s->release_recorded = true;
        lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
    }
    if (s->exec.pidfd >= 0) {
        lz_child_signal(&s->exec, SIGKILL);
        int st;
        lz_child_wait(&s->exec, 5000, &st);
        lz_child_close(&s->exec);
    }
    if (s->recorded) {
        struct lz_error err = { 0 };
        if ((!s->release_recorded &&
             lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, &err) < 0) ||
            lz_store_session_set(h->st, h->gen, s->id, "clean", s->tty, NULL, NULL, NULL, &err) < 0)
            logmsg("session %d: cannot record its release: %s", s->id, err.msg);
    }
    free(s->procfile);
    free(s->command);
    free(s->inbuf);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h->s[i] == s)
            h->s[i] = NULL;
    free(s);
}

/* Frees a string that may hold resolved profile values, zeroed first. */
static void zero_freep(char **p) {
    if (*p)
        sodium_memzero(*p, strlen(*p));
    free(*p);
}

/* Writes json[*off..len) to the non-blocking pipe w, waiting at most
 * timeout_ms for room (0: only what fits now). 0 once all is written. */
static int spec_feed(int w, const char *json, size_t len, size_t *off, int timeout_ms) {
    long deadline = lz_now_ms() + timeout_ms;
    while (*off < len) {
        ssize_t k = write(w, json + *off, len - *off);
        if (k > 0) {
            *off += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN)
            return -errno;
        long left = deadline - lz_now_ms();
        if (left <= 0)
            return timeout_ms ? -ETIMEDOUT : 0;
        struct pollfd p = { .fd = w, .events = POLLOUT };
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

static int session_start_exec(struct hc *h, struct session *s, struct lz_hello *hello,
                              struct lz_error *err) {
    struct lz_config *c = h->cfg;
    char **env = NULL;
    size_t ne = 0;
    strv_push(&env, &ne, lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    strv_push(&env, &ne, lz_xstrdup("HOME=/root"));
    strv_push(&env, &ne, lz_xstrdup("USER=root"));
    strv_push(&env, &ne, lz_xstrdup("LAZARET=1"));
    /* No Domain ID: with the user name it would spell the Domain's host
     * directory, and no feature inside needs it. */
    strv_push(&env, &ne, lz_xstrdup("TERMINFO_DIRS=:/run/lazaret/terminfo/etc:/run/lazaret/terminfo/lib:/run/lazaret/terminfo/share"));
    bool have_term = false;
    for (size_t i = 0; i < hello->envc; i++)
        if (env_name_allowed(hello->envv[i])) {
            if (!strncmp(hello->envv[i], "TERM=", 5))
                have_term = true;
            strv_push(&env, &ne, lz_xstrdup(hello->envv[i]));
        }
    if (!have_term && s->tty)
        strv_push(&env, &ne, lz_xstrdup("TERM=xterm-256color"));
    /* Profile environment: resolved values go to the process spec only,
     * never to a log. */
    for (size_t i = 0; i < c->profile.n_env; i++)
        strv_push(&env, &ne, lz_xasprintf("%s=%s", c->profile.env[i].name, c->profile.env[i].value));

    char *shell_argv[] = { h->shell, (char *)"-l", NULL };
    struct lz_exec_spec es = {
        .argv = hello->argc ? hello->argv : shell_argv,
        .envv = env, .cwd = hello->cwd && hello->cwd[0] ? hello->cwd : "/workspace",
        .terminal = s->tty, .rows = hello->rows, .cols = hello->cols,
    };
    _cleanup_(zero_freep) char *json = NULL;
    int r = lz_oci_process_json(&es, &json, err);
    strv_free(env);
    if (r < 0)
        return r;
    /* The process spec holds resolved profile secrets: it goes to runsc
     * exec through a pipe, never a file, and not a memfd either: the exec
     * client keeps the descriptor for the whole session, and a memfd would
     * stay readable through /proc/PID/fd all that time, while a pipe is
     * empty once runsc has read the spec (--process /proc/self/fd/N). What
     * fits is written before the client is released; the rest after,
     * bounded (spec_feed). */
    _cleanup_close_ int spec_r = -EBADF, spec_w = -EBADF;
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return lz_error_set(err, -errno, "cannot pass the process spec: %s", strerror(errno));
    spec_r = pp[0];
    spec_w = pp[1];
    size_t spec_len = strlen(json), spec_off = 0;
    if (spec_len > 65536)
        (void)fcntl(spec_w, F_SETPIPE_SZ, spec_len < 1048576 ? (int)spec_len : 1048576);
    fcntl(spec_w, F_SETFL, O_NONBLOCK);
    spec_feed(spec_w, json, spec_len, &spec_off, 0);
    s->procfile = lz_xasprintf("/proc/self/fd/%d", spec_r);
    char *argv[] = { h->runsc, (char *)"--root", h->state_dir, (char *)"exec", (char *)"--process",
                     s->procfile, h->container_id, NULL };
    int keep[] = { spec_r };
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_HELPER);
    struct lz_spawn_opts o = {
        .path = h->runsc, .argv = argv, .envp = envp, .setns_pidfd = h->rs.pidfd,
        .setns_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET,
        .keep_fds = keep, .n_keep_fds = 1, .barrier = true,
    };
    /* The Session Terminal: intent before the exec client exists. */
    const char *prog = es.argv[0] ? es.argv[0] : "";
    const char *slash = strrchr(prog, '/');
    s->command = lz_xstrdup(slash && slash[1] ? slash + 1 : prog);
    s->started_wall = wall_ms();
    if ((r = lz_store_session_set(h->st, h->gen, s->id, "intent", s->tty, s->command, NULL, NULL, err)) < 0)
        return r;
    s->recorded = true;
    _cleanup_close_ int slave = -EBADF, in_r = -EBADF, out_w = -EBADF, err_w = -EBADF;
    if (s->tty) {
        s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (s->master < 0 || grantpt(s->master) < 0 || unlockpt(s->master) < 0)
            return lz_error_set(err, -errno, "cannot allocate a PTY: %s", strerror(errno));
        slave = ioctl(s->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
            return lz_error_set(err, -errno, "cannot open the PTY peer: %s", strerror(errno));
        /* The host PTY keeps its default (cooked) settings: runsc exec
         * adjusts them itself, and ^C/^Z/^\ typed here become signals to
         * the exec client, which forwards them to the guest terminal's
         * foreground process group. */
        if (hello->rows && hello->cols) {
            struct winsize ws = { .ws_row = hello->rows, .ws_col = hello->cols };
            ioctl(s->master, TIOCSWINSZ, &ws);
        }
        o.stdin_fd = o.stdout_fd = o.stderr_fd = slave;
        o.new_session = true;
        o.ctty = true;
    } else {
        int p0[2], p1[2], p2[2];
        if (pipe2(p0, O_CLOEXEC) < 0)
            return -errno;
        in_r = p0[0];
        s->in_w = p0[1];
        if (pipe2(p1, O_CLOEXEC) < 0)
            return -errno;
        s->out_r = p1[0];
        out_w = p1[1];
        if (pipe2(p2, O_CLOEXEC) < 0)
            return -errno;
        s->err_r = p2[0];
        err_w = p2[1];
        fcntl(s->in_w, F_SETFL, O_NONBLOCK);
        fcntl(s->out_r, F_SETFL, O_NONBLOCK);
        fcntl(s->err_r, F_SETFL, O_NONBLOCK);
        o.stdin_fd = in_r;
        o.stdout_fd = out_w;
        o.stderr_fd = err_w;
        o.new_session = true;
    }
    r = lz_spawn(&o, &s->exec);
    lz_closep(&spec_r);
    if (r < 0)
        return lz_error_set(err, r, "cannot start the session: %s", strerror(-r));
    /* Staged ownership before the exec client may run; committed after. */
    struct lz_procid id;
    if ((r = lz_procid_from_pidfd(s->exec.pidfd, s->exec.pid, &id)) < 0 ||
        (r = lz_store_session_set(h->st, h->gen, s->id, "intent", s->tty, NULL, "staged", &id, err)) < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return err->msg[0] ? r : lz_error_set(err, r, "cannot identify the session's exec client");
    }
    lz_crash_point("session-staged");
    if ((r = lz_child_release(&s->exec)) < 0)
        return lz_error_set(err, r, "cannot start the session: %s", strerror(-r));
    /* The rest of a spec larger than the pipe, while runsc reads it. */
    r = spec_feed(spec_w, json, spec_len, &spec_off, SPEC_FEED_TIMEOUT_MS);
    lz_closep(&spec_w);
    if (r < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return lz_error_set(err, r, "cannot pass the process spec to runsc: %s", strerror(-r));
    }
    if ((r = lz_store_session_set(h->st, h->gen, s->id, "running", s->tty, NULL, "committed", &id, err)) < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return r;
    }
    logmsg("session %d: exec started (pid %d, %s)", s->id, (int)s->exec.pid, s->tty ? "tty" : "pipes");
    model_action("RegisterSession", "s=%d", s->id);
    lz_crash_point("session-running");
    return 0;
}

static void session_handle_hello(struct hc *h, struct session *s, const uint8_t *buf, size_t n) {
    struct lz_error err = { 0 };
    struct lz_hello hello;
    if (lz_hello_decode(buf, (size_t)n, &hello, &err) < 0) {
        session_refuse(s, LZ_REFUSE_PROTOCOL, err.msg);
        s->state = S_DONE;
        return;
    }
    if (memcmp(hello.domain_id, h->cfg->domain_id, 32) != 0 ||
        memcmp(hello.fingerprint, h->cfg->fingerprint, 32) != 0) {
        model_action("RejectConfigurationMismatch", "s=%d", s->id);
        session_refuse(s, LZ_REFUSE_CONFIG_MISMATCH,
                       "this Domain is running with a different configuration; end its sessions "
                       "(or run `lazaret stop`) and start again to apply the new one");
        lz_hello_clear(&hello);
        s->state = S_DONE;
        return;
    }
    if (h->stopping) {
        session_refuse(s, LZ_REFUSE_STOPPING, "the Domain is stopping");
        lz_hello_clear(&hello);
        s->state = S_DONE;
        return;
    }
    s->tty = hello.flags & LZ_HELLO_TTY;
    int r = session_start_exec(h, s, &hello, &err);
    lz_hello_clear(&hello);
    if (r < 0) {
        session_refuse(s, LZ_REFUSE_LAUNCH, err.msg);
        s->state = S_DONE;
        return;
    }
    /* The host-Git notices, once, on the terminal of the first session. */
    if (!h->had_session)
        for (size_t i = 0; i < h->git.n_notices; i++) {
            _cleanup_free_ char *m = lz_xasprintf("NOTICE: %s", h->git.notices[i]);
            session_send(s, LZ_MSG_NOTICE, 0, m, strlen(m));
        }
    uint8_t sid[4];
    lz_put_u32(sid, (uint32_t)s->id);
    session_send(s, LZ_MSG_READY, 0, sid, sizeof sid);
    s->state = S_RUNNING;
    h->had_session = true;
}

/* Stops the Domain: every session is told why and released (SIGHUP,
 * grace, SIGTERM, grace, SIGKILL; with force, SIGKILL at once). */
static void begin_stop(struct hc *h, const char *why, bool force) {
    if (!h->stopping)
        logmsg("stopping the Domain: %s", why);
    h->stopping = true;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (!s || s->state == S_DONE)
            continue;
        session_send(s, LZ_MSG_NOTICE, 0, why, strlen(why));
        if (s->state == S_RUNNING || (force && s->state == S_RELEASING)) {
            s->state = S_RELEASING;
            if (force && s->release_step < 2) {
                if (s->recorded && !s->release_recorded) {
                    s->release_recorded = true;
                    lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
                }
                lz_closep(&s->master);
                lz_closep(&s->in_w);
                s->release_step = 2;
            }
            s->deadline = lz_now_ms();
        }
    }
}

/* `lazaret ps` / `lazaret stop` on a control connection. */
static void control_request(struct hc *h, struct session *s, const uint8_t *buf, size_t n) {
    s->state = S_DONE;
    uint8_t type;
    uint32_t flags;
    if (lz_control_decode(buf, n, &type, &flags) < 0) {
        session_refuse(s, LZ_REFUSE_PROTOCOL, "malformed control request");
        return;
    }
    if (type == LZ_MSG_STOP) {
        uint8_t st[4] = { 0 };
        session_send(s, LZ_MSG_EXIT, 0, st, sizeof st);
        begin_stop(h, (flags & LZ_STOP_FORCE) ? "the Domain is being stopped (lazaret stop --force)"
                                              : "the Domain is being stopped (lazaret stop)",
                   flags & LZ_STOP_FORCE);
        return;
    }
    json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:i,s:s,s:b}", "domain_id", h->cfg->domain_id_hex, "profile",
                          h->cfg->profile.name, "workspace", h->cfg->workspace, "generation", (json_int_t)h->gen,
                          "coordinator_pid", (int)getpid(), "fingerprint", h->cfg->fingerprint_hex, "stopping",
                          h->stopping);
    json_object_set_new(o, "domain_dir", json_string(h->cfg->domain_dir));
    json_t *arr = json_array();
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *t = h->s[i];
        if (!t || t == s || !t->recorded)
            continue;
        static const char *const names[] = { "starting", "running", "draining", "releasing", "done" };
        json_array_append_new(arr, json_pack("{s:i,s:b,s:s,s:I,s:s}", "session", t->id, "tty", t->tty, "command",
                                             t->command ? t->command : "", "started_ms",
                                             (json_int_t)t->started_wall, "state", names[t->state]));
    }
    json_object_set_new(o, "sessions", arr);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!txt || strlen(txt) > LZ_PROTO_DATA_MAX) {
        session_refuse(s, LZ_REFUSE_PROTOCOL, "status too large");
    } else {
        session_send(s, LZ_MSG_STATUS_REPLY, 0, txt, strlen(txt));
    }
    free(txt);
}

/* Input from the client to the exec (PTY master or stdin pipe). */
static void pump_input(struct session *s) {
    int fd = s->tty ? s->master : s->in_w;
    while (s->inbuf && s->inoff < s->inlen && fd >= 0) {
        ssize_t w = write(fd, s->inbuf + s->inoff, s->inlen - s->inoff);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            s->inoff = s->inlen; /* the reader is gone: drop */
            break;
        }
        s->inoff += (size_t)w;
    }
    if (s->inoff >= s->inlen) {
        free(s->inbuf);
        s->inbuf = NULL;
        s->inlen = s->inoff = 0;
        if (s->in_eof_pending && !s->tty)
            lz_closep(&s->in_w);
    }
}

static void session_client_msg(struct hc *h, struct session *s, short revents) {
    /* One input message at a time: the rest waits in the socket, which is
     * the backpressure towards the client. A hung-up client's leftovers do
     * not matter any more. */
    if (s->inbuf && !(revents & (POLLHUP | POLLERR)))
        return;
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = lz_msg_recv(s->sock, buf, sizeof buf);
    if (n == -EAGAIN)
        return;
    if (n <= 0) {
        /* Client gone: the session is released, never reattached. */
        lz_closep(&s->sock);
        if (s->state != S_DONE)
            model_action("DisconnectSession", "s=%d", s->id);
        if (s->state == S_HELLO) {
            s->state = S_DONE;
        } else if (s->state == S_RUNNING || s->state == S_DRAINING) {
            s->state = S_RELEASING;
            s->release_step = 0;
            s->deadline = lz_now_ms();
        }
        return;
    }
    if (s->state == S_HELLO) {
        if (buf[0] == LZ_MSG_STATUS || buf[0] == LZ_MSG_STOP)
            control_request(h, s, buf, (size_t)n);
        else
            session_handle_hello(h, s, buf, (size_t)n);
        return;
    }
    if (s->state != S_RUNNING)
        return;
    uint8_t type = buf[0], ch = buf[1];
    const uint8_t *p = buf + LZ_PROTO_HDR;
    size_t len = (size_t)n - LZ_PROTO_HDR;
    switch ((enum lz_msg_type)type) {
    case LZ_MSG_DATA:
        if (ch != 0 || s->inbuf || s->in_eof_pending)
            break;
        s->inbuf = lz_xmalloc(len);
        memcpy(s->inbuf, p, len);
        s->inlen = len;
        s->inoff = 0;
        pump_input(s);
        break;
    case LZ_MSG_EOF:
        if (s->tty) {
            /* ^D equivalent is the client's business in tty mode. */
        } else {
            s->in_eof_pending = true;
            if (!s->inbuf)
                lz_closep(&s->in_w);
        }
        break;
    case LZ_MSG_WINSIZE:
        if (len == 4 && s->tty && s->master >= 0) {
            struct winsize ws = { .ws_row = lz_get_u16(p), .ws_col = lz_get_u16(p + 2) };
            ioctl(s->master, TIOCSWINSZ, &ws);
        }
        break;
    case LZ_MSG_SIGNAL:
        if (len == 4) {
            uint32_t sig = lz_get_u32(p);
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR1 ||
                sig == SIGUSR2 || sig == SIGWINCH)
                lz_child_signal(&s->exec, (int)sig);
        }
        break;
    case LZ_MSG_HELLO:
    case LZ_MSG_READY:
    case LZ_MSG_REFUSED:
    case LZ_MSG_EXIT:
    case LZ_MSG_NOTICE:
    case LZ_MSG_STATUS:
    case LZ_MSG_STATUS_REPLY:
    case LZ_MSG_STOP:
    default:
        logmsg("session %d: unexpected message type %u; closing", s->id, type);
        lz_closep(&s->sock);
        s->state = S_RELEASING;
        s->release_step = 0;
        s->deadline = lz_now_ms();
        break;
    }
}

/* Output from the exec to the client, with backpressure: while a message
 * is pending on a full socket we stop reading its source. */
static bool flush_pending(struct session *s) {
    if (!s->pend.len)
        return true;
    if (s->sock < 0) {
        s->pend.len = 0;
        return true;
    }
    ssize_t w = send(s->sock, s->pend.buf, s->pend.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return false;
        lz_closep(&s->sock);
        s->pend.len = 0;
        return true;
    }
    s->pend.len = 0;
    return true;
}

static void pump_output(struct session *s, int *fdp, uint8_t ch) {
    if (!flush_pending(s))
        return;
    s->pend.buf[0] = LZ_MSG_DATA;
    s->pend.buf[1] = ch;
    s->pend.buf[2] = s->pend.buf[3] = 0;
    ssize_t n = read(*fdp, s->pend.buf + LZ_PROTO_HDR, 32768);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        /* EIO on a PTY master: every slave is closed. */
        lz_closep(fdp);
        return;
    }
    if (n == 0) {
        lz_closep(fdp);
        return;
    }
    s->pend.len = (size_t)n + LZ_PROTO_HDR;
    flush_pending(s);
}

static bool outputs_open(struct session *s) {
    return s->tty ? s->master >= 0 : (s->out_r >= 0 || s->err_r >= 0);
}

static void session_finish(struct session *s) {
    if (s->pend.len && !flush_pending(s))
        return;
    if (s->sock >= 0) {
        uint8_t st[4];
        lz_put_u32(st, (uint32_t)s->status);
        session_send(s, LZ_MSG_EXIT, 0, st, sizeof st);
    }
    logmsg("session %d: ended with status %d", s->id, s->status);
    s->state = S_DONE;
}

static void session_tick(struct hc *h, struct session *s) {
    if (s->exec.pidfd >= 0 && !s->exited) {
        int st;
        if (lz_child_try_reap(&s->exec, &st) == 1) {
            s->exited = true;
            s->status = st;
            if (s->state == S_RUNNING) {
                s->state = S_DRAINING;
                s->deadline = lz_now_ms() + DRAIN_TIMEOUT_MS;
            }
        }
    }
    if (s->state == S_DRAINING) {
        if (!outputs_open(s) || lz_now_ms() >= s->deadline) {
            lz_closep(&s->master);
            lz_closep(&s->out_r);
            lz_closep(&s->err_r);
            session_finish(s);
        }
    }
    if (s->state == S_RELEASING) {
        /* SIGHUP (by closing the PTY and signalling), grace, SIGTERM,
         * grace, SIGKILL; then reaped. */
        if (s->exited) {
            /* A client still connected (the Domain is being stopped) gets
             * the exit status of its command. */
            if (s->sock >= 0)
                session_finish(s);
            else
                s->state = S_DONE;
            return;
        }
        if (lz_now_ms() < s->deadline)
            return;
        switch (s->release_step++) {
        case 0:
            if (s->recorded && !s->release_recorded) {
                s->release_recorded = true;
                lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
            }
            lz_closep(&s->master);
            lz_closep(&s->in_w);
            lz_child_signal(&s->exec, SIGHUP);
            break;
        case 1:
            lz_child_signal(&s->exec, SIGTERM);
            break;
        default:
            lz_child_signal(&s->exec, SIGKILL);
            break;
        }
        s->deadline = lz_now_ms() + RELEASE_GRACE_MS;
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
        struct session *s = lz_xcalloc(1, sizeof *s);
        s->sock = fd;
        s->master = s->in_w = s->out_r = s->err_r = -EBADF;
        s->exec = LZ_CHILD_NULL;
        s->id = ++h->next_id;
        s->state = S_HELLO;
        if (slot < 0) {
            session_refuse(s, LZ_REFUSE_LAUNCH, "too many sessions in this Domain");
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
    return lz_error_set(err, -EBUSY, "the Domain is still held by another coordinator after %d s",
                        FLOCK_TIMEOUT_S);
}

static void recovery_log(void *ud, const char *msg) {
    (void)ud;
    logmsg("%s", msg);
    if (strstr(msg, " is clean") && !strncmp(msg, "recovery: generation", 20))
        model_action("ResetFailedDomain", "%s", msg + 10);
}

static void zeroing_free(void *p) {
    if (p)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

int lz_coordinator_main(const struct lz_coordinator_args *a) {
    struct lz_error err = { 0 };
    struct hc h = { .a = a, .rs = LZ_CHILD_NULL, .slirp = LZ_CHILD_NULL, .rs_ctl = -EBADF, .listen_fd = -EBADF, .sfd = -EBADF };
    int ready_fd = a->ready_fd;
    int r;
    if (sodium_init() < 0) {
        ready_reply(ready_fd, "error libsodium failed to initialise");
        return 1;
    }
    /* The referenced host variables, from the client's hand-over: we run
     * with a minimal environment (procenv.h). The memfd is closed before
     * anything is started, and the copy is zeroed once the configuration
     * holds the values. */
    struct lz_envpass *envpass = NULL;
    if (a->env_fd >= 0) {
        r = lz_envpass_read(a->env_fd, &envpass, &err);
        close(a->env_fd);
        if (r < 0) {
            ready_reply(ready_fd, "error %s", err.msg);
            return 1;
        }
    }
    /* jansson's copies of the process spec (resolved values) are zeroed
     * when freed too. */
    json_set_alloc_funcs(malloc, zeroing_free);
    struct lz_config_opts co = { .config_path = a->config_path, .profile = a->profile,
                                 .workspace = a->workspace, .lookup_env = lz_envpass_get,
                                 .lookup_env_ud = envpass };
    r = lz_config_load(&co, &h.cfg, &err);
    lz_envpass_free(envpass);
    if (r < 0) {
        ready_reply(ready_fd, "error %s", err.msg);
        return 1;
    }
    if (strcmp(h.cfg->domain_id_hex, a->expect_domain) || strcmp(h.cfg->fingerprint_hex, a->expect_fingerprint)) {
        ready_reply(ready_fd, "error the configuration changed while the Domain was starting; try again");
        lz_config_free(h.cfg);
        return 1;
    }
    logmsg("coordinator for Domain %s (profile %s, workspace %s)", h.cfg->domain_id_hex,
           h.cfg->profile.name, h.cfg->workspace);
    _cleanup_close_ int lockfd = take_domain_lock(h.cfg->domain_dir, &err);
    if (lockfd < 0) {
        ready_reply(ready_fd, "error %s", err.msg);
        lz_config_free(h.cfg);
        return 1;
    }
    if ((r = lz_runtime_dir(&h.rt, &err)) < 0) {
        ready_reply(ready_fd, "error %s", err.msg);
        lz_config_free(h.cfg);
        return 1;
    }
    h.sock_path = lz_domain_socket_path(h.rt, h.cfg->domain_id_hex);
    /* Nobody can be connected to a socket whose coordinator we replaced. */
    unlink(h.sock_path);

    /* The Domain Store: identity checked (SR-11), interrupted generations
     * recovered, then this generation recorded. */
    if (strlen(a->artifact_id) != 64 || strspn(a->artifact_id, "0123456789abcdef") != 64) {
        ready_reply(ready_fd, "error invalid prepared-artifact ID");
        lz_config_free(h.cfg);
        return 1;
    }
    h.rootfs = lz_xasprintf("%s/prepared/%s/rootfs", h.cfg->data_root, a->artifact_id);
    struct lz_store_identity sid = { .domain_id = h.cfg->domain_id_hex, .profile = h.cfg->profile.name,
                                     .workspace = h.cfg->workspace };
    struct lz_procid self_id;
    int64_t anchor_gen = 1;
    _cleanup_free_ char *ag = NULL;
    if ((r = lz_store_open(h.cfg->domain_dir, &sid, true, &h.st, &err)) < 0 ||
        (r = lz_domain_recover(h.st, h.cfg->data_root, h.cfg->domain_id_hex, recovery_log, NULL, &err)) < 0 ||
        (r = lz_procid_self(&self_id)) < 0 ||
        (r = lz_store_gen_begin(h.st, h.cfg->fingerprint_hex, &self_id, &h.gen, &err)) < 0) {
        if (r < 0 && !err.msg[0])
            lz_error_set(&err, r, "cannot read this coordinator's identity: %s", strerror(-r));
        logmsg("start refused: %s", err.msg);
        ready_reply(ready_fd, "error %s", err.msg);
        lz_store_close(h.st);
        lz_config_free(h.cfg);
        return 1;
    }
    if (lz_store_meta_get(h.st, "anchor_gen", &ag, NULL) == 0)
        anchor_gen = strtoll(ag, NULL, 10);
    h.anchor_root = lz_xasprintf("%s/anchor-%lld", h.cfg->domain_dir, (long long)anchor_gen);
    logmsg("generation %lld (State Anchor %s)", (long long)h.gen, h.anchor_root);
    model_action("StartNewDomain", "d=%.12s", h.cfg->domain_id_hex);

    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, 0 };
    h.sfd = lz_signalfd_block(sigs);

    if ((r = start_generation(&h, &err)) < 0) {
        logmsg("start failed: %s", err.msg);
        /* The client hears of the failure once nothing of it is left. */
        stop_generation(&h);
        ready_reply(ready_fd, "error %s", err.msg);
        lz_config_free(h.cfg);
        return 1;
    }
    if (record(&h, LZ_ROLE_PUBLICATION, LZ_P_INTENT, NULL, NULL, NULL, &err) == 0)
        h.listen_fd = listen_socket(h.sock_path, &err);
    if (h.listen_fd >= 0 &&
        (record(&h, LZ_ROLE_PUBLICATION, LZ_P_COMMITTED, NULL, NULL, h.sock_path, &err) < 0 ||
         lz_store_gen_set_state(h.st, h.gen, "running", &err) < 0))
        lz_closep(&h.listen_fd);
    if (h.listen_fd < 0) {
        stop_generation(&h);
        ready_reply(ready_fd, "error %s", err.msg);
        lz_config_free(h.cfg);
        return 1;
    }
    model_action("PublishDomain", "d=%.12s", h.cfg->domain_id_hex);
    lz_crash_point("running");
    ready_reply(ready_fd, "ok");
    lz_closep(&ready_fd);

    long idle_deadline = lz_now_ms() + 30000; /* the starting client must attach */
    for (;;) {
        struct pollfd p[4 + MAX_SESSIONS * 4];
        struct { struct session *s; int kind; } map[4 + MAX_SESSIONS * 4];
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
                short ev = s->pend.len ? 0 : POLLIN;
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
                logmsg("the sandbox ended (%s); closing all sessions", line);
                if (!h.stopping)
                    model_action("FailDomain", "d=%.12s", h.cfg->domain_id_hex);
                h.stopping = true;
                for (int i = 0; i < MAX_SESSIONS; i++)
                    if (h.s[i]) {
                        static const char msg[] = "the sandbox stopped unexpectedly";
                        session_send(h.s[i], LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
                    }
                if (n <= 0)
                    lz_closep(&h.rs_ctl);
            }
        }
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(h.sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP) {
                    logmsg("signal %u", si.ssi_signo);
                    begin_stop(&h, "the Domain is being stopped", false);
                }
        }
        if (p[3].revents & POLLIN) {
            int st = 0;
            if (lz_child_try_reap(&h.slirp, &st) == 1) {
                logmsg("the connectivity helper (slirp4netns) exited with status %d", st);
                begin_stop(&h, "the Domain's network helper (slirp4netns) died; the Domain is stopped", true);
            }
        }
        for (size_t i = 4; i < np; i++) {
            struct session *s = map[i].s;
            if (!p[i].revents || !s)
                continue;
            switch (map[i].kind) {
            case 0:
                if (p[i].revents & POLLOUT)
                    flush_pending(s);
                if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
                    session_client_msg(&h, s, p[i].revents);
                break;
            case 1:
                break; /* handled in session_tick */
            case 2:
                if (p[i].revents & POLLOUT)
                    pump_input(s);
                if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
                    pump_output(s, s->tty ? &s->master : &s->out_r, 1);
                break;
            case 3:
                pump_output(s, &s->err_r, 2);
                break;
            case 4:
                pump_input(s);
                break;
            default:
                break;
            }
        }
        for (int i = 0; i < MAX_SESSIONS; i++) {
            struct session *s = h.s[i];
            if (!s)
                continue;
            session_tick(&h, s);
            if (s->state == S_DONE)
                session_free(&h, s);
        }
        int live = live_sessions(&h);
        bool idle_timeout = !h.had_session && live == 0 && lz_now_ms() >= idle_deadline;
        bool rs_gone = h.rs_ctl < 0 || h.rs_exited_msg;
        if ((h.had_session && live == 0) || idle_timeout || (h.stopping && live == 0) || rs_gone) {
            if (live == 0 || rs_gone)
                break;
        }
    }
    /* Teardown: new clients must not reach this generation any more. */
    unlink(h.sock_path);
    lz_closep(&h.listen_fd);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h.s[i])
            session_free(&h, h.s[i]);
    stop_generation(&h);
    logmsg("Domain stopped");
    lz_store_close(h.st);
    free(h.rootfs);
    free(h.anchor_root);
    free(h.anchor_target);
    free(h.rt);
    free(h.gen_dir);
    free(h.state_dir);
    free(h.bundle_dir);
    free(h.overlay_dir);
    free(h.view);
    for (size_t i = 0; i < h.n_vol; i++)
        free(h.vol_view[i]);
    free(h.router);
    free(h.sock_path);
    free(h.runsc);
    free(h.shell);
    lz_closep(&h.sfd);
    lz_gitscan_clear(&h.git);
    lz_config_free(h.cfg);
    return 0;
}
