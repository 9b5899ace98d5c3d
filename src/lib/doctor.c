/* doctor.c — see doctor.h. */
#include "doctor.h"
#include "hostca.h"
#include "idmap.h"
#include "paths.h"
#include "spawn.h"
#include "supervisor.h"

#include <fcntl.h>
#include <libgen.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>

static struct lz_check *add(struct lz_check **v, size_t *n, const char *name) {
    *v = lz_xrealloc(*v, (*n + 1) * sizeof **v);
    struct lz_check *c = &(*v)[(*n)++];
    memset(c, 0, sizeof *c);
    c->name = name;
    return c;
}

static void check_kernel(struct lz_check **v, size_t *n) {
    struct lz_check *c = add(v, n, "kernel >= 6.9 (pidfs)");
    struct utsname u;
    uname(&u);
    unsigned maj = 0, min = 0;
    sscanf(u.release, "%u.%u", &maj, &min);
    snprintf(c->detail, sizeof c->detail, "Linux %s", u.release);
    if (maj > 6 || (maj == 6 && min >= 9))
        c->status = LZ_CHECK_OK;
    else {
        c->status = LZ_CHECK_FAIL;
        snprintf(c->fix, sizeof c->fix,
                 "boot a kernel >= 6.9 (Debian 12: linux-image-amd64 from bookworm-backports; "
                 "Debian 13's own is 6.12)");
    }
}

/* The first line of root/path (a sysctl, a process attribute) into buf;
 * false when it cannot be read. */
static bool read_line(const char *root, const char *path, char *buf, size_t size) {
    char full[PATH_MAX];
    int k = snprintf(full, sizeof full, "%s/%s", root, path);
    if (k < 0 || (size_t)k >= sizeof full)
        return false;
    _cleanup_free_ char *text = NULL;
    if (lz_read_file_at(AT_FDCWD, full, 4096, &text, NULL) < 0)
        return false;
    snprintf(buf, size, "%.*s", (int)strcspn(text, "\n"), text);
    return true;
}

static bool sysctl_is(const char *root, const char *path, const char *value) {
    char v[64];
    return read_line(root, path, v, sizeof v) && !strcmp(v, value);
}

enum lz_userns_block lz_doctor_userns_block(const char *root) {
    /* Absent files mean the kernel has no such switch: nothing blocks. */
    if (sysctl_is(root, "proc/sys/kernel/unprivileged_userns_clone", "0"))
        return LZ_USERNS_CLONE_OFF;
    if (sysctl_is(root, "proc/sys/user/max_user_namespaces", "0"))
        return LZ_USERNS_MAX_ZERO;
    if (sysctl_is(root, "proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"))
        return LZ_USERNS_APPARMOR;
    return LZ_USERNS_NO_BLOCK;
}

/* This process's AppArmor label is Lazaret's profile ("lazaret
 * (unconfined)"); the attribute moved to attr/apparmor/ in Linux 5.8. */
static bool in_lazaret_profile(const char *root) {
    char label[256];
    if (!read_line(root, "proc/self/attr/apparmor/current", label, sizeof label) &&
        !read_line(root, "proc/self/attr/current", label, sizeof label))
        return false;
    return !strncmp(label, "lazaret", 7) && (label[7] == '\0' || label[7] == ' ');
}

/* The profile is in /etc/apparmor.d when the .deb or scripts/install.sh
 * installed Lazaret, but loaded only at the next boot or by this. */
#define LZ_APPARMOR_FIX                                                                                                \
    "load Lazaret's AppArmor profile, which lets lazaret-core and runsc create user namespaces: "                      \
    "sudo apparmor_parser -r /etc/apparmor.d/lazaret (the .deb and scripts/install.sh put it there; from the "         \
    "source tree: sudo install -m 0644 packaging/apparmor/lazaret /etc/apparmor.d/)"

void lz_doctor_judge_userns(struct lz_check *c, bool created, const char *root) {
    enum lz_userns_block b = lz_doctor_userns_block(root);
    if (created && b == LZ_USERNS_APPARMOR && !in_lazaret_profile(root)) {
        /* Created here (by root, or under another profile), but runsc's
         * own namespaces are restricted without the profile. */
        c->status = LZ_CHECK_WARN;
        snprintf(c->detail, sizeof c->detail,
                 "created, but AppArmor restricts unprivileged user namespaces "
                 "(kernel.apparmor_restrict_unprivileged_userns=1) and Lazaret's profile is not loaded");
        snprintf(c->fix, sizeof c->fix, "%s", LZ_APPARMOR_FIX);
        return;
    }
    if (created) {
        c->status = LZ_CHECK_OK;
        snprintf(c->detail, sizeof c->detail, "user + network + mount namespaces can be created%s",
                 b == LZ_USERNS_APPARMOR ? " (AppArmor restricts them; Lazaret's profile allows them)" : "");
        return;
    }
    c->status = LZ_CHECK_FAIL;
    switch (b) {
    case LZ_USERNS_APPARMOR:
        snprintf(c->detail, sizeof c->detail,
                 "unshare(CLONE_NEWUSER) failed: AppArmor restricts unprivileged user namespaces "
                 "(kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later)");
        snprintf(c->fix, sizeof c->fix, "%s", LZ_APPARMOR_FIX);
        break;
    case LZ_USERNS_CLONE_OFF:
        snprintf(c->detail, sizeof c->detail, "unshare(CLONE_NEWUSER) failed: kernel.unprivileged_userns_clone=0");
        snprintf(c->fix, sizeof c->fix,
                 "sudo sysctl kernel.unprivileged_userns_clone=1 (and the same line in /etc/sysctl.d/ to keep it)");
        break;
    case LZ_USERNS_MAX_ZERO:
        snprintf(c->detail, sizeof c->detail, "unshare(CLONE_NEWUSER) failed: user.max_user_namespaces=0");
        snprintf(c->fix, sizeof c->fix,
                 "sudo sysctl user.max_user_namespaces=15000 (and the same line in /etc/sysctl.d/ to keep it)");
        break;
    case LZ_USERNS_NO_BLOCK:
        snprintf(c->detail, sizeof c->detail, "unshare(CLONE_NEWUSER) failed");
        snprintf(c->fix, sizeof c->fix,
                 "enable them: sysctl kernel.unprivileged_userns_clone=1 (and "
                 "kernel.apparmor_restrict_unprivileged_userns=0 where present)");
        break;
    }
}

static void check_subids(struct lz_check **v, size_t *n);

static void check_userns(struct lz_check **v, size_t *n) {
    struct lz_check *c = add(v, n, "unprivileged user namespaces");
    /* Exactly what the coordinator does for the Runtime Supervisor. */
    char *argv[] = { (char *)"/bin/true", NULL };
    struct lz_spawn_opts o = { .path = "/bin/true",
                               .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = -1,
                               .stderr_fd = -1,
                               .setns_pidfd = -1,
                               .clone_flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS };
    struct lz_child ch;
    int st = -1;
    if (lz_spawn(&o, &ch) == 0 && lz_child_wait(&ch, 10000, &st) < 0) {
        lz_child_signal(&ch, SIGKILL);
        lz_child_wait(&ch, -1, &st);
    }
    lz_doctor_judge_userns(c, st == 0, "/");
    check_subids(v, n);
}

/* Without a subordinate range the Domain maps one ID: the sandbox's root
 * works, but nothing can switch to another user, so apt-get (which drops
 * to _apt to download) fails with "Permission denied" on
 * /var/lib/apt/lists/partial, and so do daemons and test suites that drop
 * privileges. That is a failure for the product's main job, not a warning. */
static void check_subids(struct lz_check **v, size_t *n) {
    struct lz_check *s = add(v, n, "subordinate ID ranges");
    struct passwd *pw = getpwuid(getuid());
    const char *name = pw ? pw->pw_name : "?";
    /* The ranges a Domain would map (idmap.c), not merely some range. */
    unsigned long us, u = 0, gs, g = 0;
    if (pw && !lz_subid_range("/etc/subuid", name, getuid(), &us, &u))
        u = 0;
    if (pw && !lz_subid_range("/etc/subgid", name, getuid(), &gs, &g))
        g = 0;
    bool tools = access("/usr/bin/newuidmap", X_OK) == 0 && access("/usr/bin/newgidmap", X_OK) == 0;
    if (u >= 65536 && g >= 65536 && tools) {
        s->status = LZ_CHECK_OK;
        snprintf(s->detail, sizeof s->detail, "%s has %lu subordinate uids and %lu gids; newuidmap present", name, u,
                 g);
        return;
    }
    s->status = LZ_CHECK_FAIL;
    if (!tools)
        snprintf(s->detail, sizeof s->detail, "newuidmap/newgidmap missing");
    else
        snprintf(s->detail, sizeof s->detail,
                 "%s has %lu subordinate uids and %lu gids (65536 each needed): the sandbox could map only your "
                 "own ID, so no process inside can switch users (apt-get's download user _apt fails with "
                 "\"Permission denied\")",
                 name, u, g);
    snprintf(s->fix, sizeof s->fix,
             "run scripts/setup.sh (it adds the ranges), or: apt-get install uidmap; usermod --add-subuids "
             "N-M --add-subgids N-M %s with a free range of 65536 IDs",
             name);
}

/* A runsc release date (YYYYMMDD, from "version 0.0~20240513.0" or
 * "version release-20240513.0") of 2024 or later: older ones cannot
 * network on these kernels. */
bool lz_doctor_runsc_recent(const char *out) {
    const char *p = strstr(out, "version ");
    for (p = p ? p + 8 : out; *p && *p != '\n'; p++) {
        size_t k = 0;
        while (k < 8 && p[k] >= '0' && p[k] <= '9')
            k++;
        if (k == 8 && (p[8] < '0' || p[8] > '9'))
            return strncmp(p, "20240101", 8) >= 0;
        if (k)
            p += k - 1;
    }
    return false;
}

/* Runs argv (its --version); OK when its output contains want (when
 * given) and accept says yes (when given). */
static void check_tool(struct lz_check **v, size_t *n, const char *name, const char *const *argv, const char *want,
                       bool (*accept)(const char *out), const char *fix) {
    struct lz_check *c = add(v, n, name);
    char out[512] = "";
    int st = 0;
    int r = access(argv[0], X_OK) == 0 ? lz_spawn_capture((char *const *)argv, 10000, out, sizeof out, &st) : -ENOENT;
    if (r == -ETIMEDOUT)
        r = 0; /* it answered, then hung: judge what it printed */
    if (r < 0) {
        c->status = LZ_CHECK_FAIL;
        snprintf(c->detail, sizeof c->detail, "%s not found", argv[0]);
        snprintf(c->fix, sizeof c->fix, "%s", fix);
    } else if ((want && !strstr(out, want)) || (accept && !accept(out))) {
        c->status = LZ_CHECK_FAIL;
        snprintf(c->detail, sizeof c->detail, "%s", out);
        snprintf(c->fix, sizeof c->fix, "%s", fix);
    } else {
        c->status = LZ_CHECK_OK;
        snprintf(c->detail, sizeof c->detail, "%s", out);
    }
}

static void check_dev(struct lz_check **v, size_t *n, const char *name, const char *path) {
    struct lz_check *c = add(v, n, name);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        c->status = LZ_CHECK_OK;
        snprintf(c->detail, sizeof c->detail, "%s can be opened read-write", path);
    } else {
        c->status = LZ_CHECK_FAIL;
        snprintf(c->detail, sizeof c->detail, "%s: %s", path, strerror(errno));
        snprintf(c->fix, sizeof c->fix,
                 "sudo chmod 0666 %s (stock distributions ship it 0666; "
                 "scripts/setup.sh does this)",
                 path);
    }
}

static void check_disk(struct lz_check **v, size_t *n, const char *data_root) {
    struct lz_check *c = add(v, n, "free disk under the Storage Root");
    const char *p = data_root;
    _cleanup_free_ char *probe = NULL;
    /* Walk up to the nearest existing ancestor. */
    if (p) {
        probe = lz_xstrdup(p);
        while (access(probe, F_OK) < 0) {
            char *s = strrchr(probe, '/');
            if (!s || s == probe) {
                probe[1] = '\0';
                break;
            }
            *s = '\0';
        }
        p = probe;
    } else {
        p = lz_home_dir() ? lz_home_dir() : "/";
    }
    struct statvfs sv;
    if (statvfs(p, &sv) < 0) {
        c->status = LZ_CHECK_FAIL;
        snprintf(c->detail, sizeof c->detail, "%s: %s", p, strerror(errno));
        return;
    }
    unsigned long long freeb = (unsigned long long)sv.f_bavail * sv.f_frsize;
    snprintf(c->detail, sizeof c->detail, "%.1f GiB free at %s", (double)freeb / (1ULL << 30), p);
    if (freeb >= 2ULL << 30)
        c->status = LZ_CHECK_OK;
    else {
        c->status = freeb >= (512ULL << 20) ? LZ_CHECK_WARN : LZ_CHECK_FAIL;
        snprintf(c->fix, sizeof c->fix,
                 "free some space: the default image and its prepared root "
                 "filesystem need about 1 GiB");
    }
}

/* An installed lazaret finds its helpers in LZ_LIBEXECDIR (paths.c); a
 * partial install or a copied binary fails here, before a Domain start
 * would. */
static void check_helpers(struct lz_check **v, size_t *n) {
    struct lz_check *c = add(v, n, "Lazaret helpers (router, init, escalation client)");
    static const char *const names[] = { "lazaret-router", "lazaret-init", "lazaret-escalate", "lazaret-gate" };
    _cleanup_free_ char *first = NULL;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *p = NULL;
        struct lz_error err = { 0 };
        if (lz_libexec_path(names[i], &p, &err) < 0) {
            c->status = LZ_CHECK_FAIL;
            snprintf(c->detail, sizeof c->detail, "%s", err.msg);
            snprintf(c->fix, sizeof c->fix, "reinstall lazaret (meson install, or scripts/install.sh)");
            return;
        }
        if (!first)
            first = TAKE_PTR(p);
    }
    c->status = LZ_CHECK_OK;
    snprintf(c->detail, sizeof c->detail, "in %s", dirname(first));
}

/* Behind a TLS-intercepting proxy the host trusts a company CA that the
 * sandbox's image does not: say that profiles take it (informational). */
static void check_host_ca(struct lz_check **v, size_t *n) {
    struct lz_check *c = add(v, n, "host CA certificates (TLS interception)");
    struct lz_hostca h;
    struct lz_error err = { 0 };
    c->status = LZ_CHECK_OK;
    if (lz_hostca_load(lz_hostca_dir(), &h, &err) < 0) {
        c->status = LZ_CHECK_WARN;
        snprintf(c->detail, sizeof c->detail, "%s", err.msg);
        snprintf(c->fix, sizeof c->fix, "make %s readable, or set host_ca_certificates = false in your profiles",
                 lz_hostca_dir());
        return;
    }
    if (h.n == 0)
        snprintf(c->detail, sizeof c->detail, "none in %s", lz_hostca_dir());
    else
        snprintf(c->detail, sizeof c->detail,
                 "%zu certificate(s) in %s%s: trusted inside sandboxes of profiles with host_ca_certificates "
                 "(the default)",
                 h.n, lz_hostca_dir(),
                 h.skipped_blocks ? " (other PEM blocks there, such as keys, are never copied)" : "");
    lz_hostca_clear(&h);
}

#define LZ_URING_PARAM "sys/module/fuse/parameters/enable_uring"

void lz_doctor_judge_fuse_uring(struct lz_check *c, const char *root) {
    char on[8], dis[16] = "0", grp[16] = "-1";
    c->status = LZ_CHECK_OK;
    if (!read_line(root, LZ_URING_PARAM, on, sizeof on)) {
        snprintf(c->detail, sizeof c->detail,
                 "not in this kernel (no /" LZ_URING_PARAM ": a kernel before 6.14 or without "
                 "CONFIG_FUSE_IO_URING): workspace routers use /dev/fuse");
        return;
    }
    (void)read_line(root, "proc/sys/kernel/io_uring_disabled", dis, sizeof dis);
    (void)read_line(root, "proc/sys/kernel/io_uring_group", grp, sizeof grp);
    if (!strcmp(dis, "2")) {
        snprintf(c->detail, sizeof c->detail,
                 "io_uring is disabled (kernel.io_uring_disabled=2): workspace routers use /dev/fuse");
        return;
    }
    const char *restricted = !strcmp(dis, "1") ? " (kernel.io_uring_disabled=1: only for root and members of "
                                                 "kernel.io_uring_group; others' routers use /dev/fuse)"
                                               : "";
    if (!strcmp(on, "Y") || !strcmp(on, "1")) {
        snprintf(c->detail, sizeof c->detail,
                 "enabled: workspace routers serve from per-CPU io_uring queues%s (lazaret ps shows each "
                 "Domain's)",
                 restricted);
        if (restricted[0] && strcmp(grp, "-1"))
            snprintf(c->detail + strlen(c->detail), sizeof c->detail - strlen(c->detail), "; io_uring_group %s", grp);
        return;
    }
    /* Informative: off is the default (an opt-in; docs/state.md). */
    snprintf(c->detail, sizeof c->detail,
             "available but off (enable_uring=%s): workspace routers use /dev/fuse (io_uring saved about "
             "a fifth of the time of create/stat storms and write bursts on a 2-CPU VM)%s",
             on, restricted);
    snprintf(c->fix, sizeof c->fix,
             "optional, as root: echo Y > /" LZ_URING_PARAM "; to keep it across boots: echo 'w /" LZ_URING_PARAM
             " - - - - Y' > /etc/tmpfiles.d/lazaret-fuse-uring.conf (or fuse.enable_uring=1 on the kernel command "
             "line; LAZARET_SETUP_FUSE_URING=1 scripts/setup.sh does both). It is host-wide: every FUSE server "
             "that asks gets io_uring");
}

static void check_fuse_uring(struct lz_check **v, size_t *n) {
    lz_doctor_judge_fuse_uring(add(v, n, "FUSE over io_uring"), "/");
}

int lz_doctor_run(const char *data_root, struct lz_check **ret, size_t *ret_n) {
    struct lz_check *v = NULL;
    size_t n = 0;
    check_kernel(&v, &n);
    check_userns(&v, &n);
    _cleanup_free_ char *runsc = NULL;
    const char *rs = lz_find_runsc(&runsc, NULL) == 0 ? runsc : "/usr/bin/runsc";
    const char *ra[] = { rs, "--version", NULL };
    check_tool(&v, &n, "runsc (gVisor) 2024 or newer", ra, NULL, lz_doctor_runsc_recent,
               "apt-get install runsc on Debian 13, runsc/bookworm-backports on Debian 12 (bookworm's own runsc "
               "cannot network on this kernel)");
    const char *sa[] = { "/usr/bin/slirp4netns", "--version", NULL };
    check_tool(&v, &n, "slirp4netns", sa, "slirp4netns version", NULL, "apt-get install slirp4netns");
    check_dev(&v, &n, "/dev/fuse usable", "/dev/fuse");
    check_fuse_uring(&v, &n);
    check_dev(&v, &n, "/dev/net/tun usable", "/dev/net/tun");
    check_disk(&v, &n, data_root);
    check_helpers(&v, &n);
    check_host_ca(&v, &n);
    *ret = v;
    *ret_n = n;
    return 0;
}
