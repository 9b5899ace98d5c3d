/* slirp.c — see slirp.h. */
#include "slirp.h"
#include "netpolicy.h" /* LZ_NET_TAP */
#include "procenv.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>

int lz_slirp_spawn(pid_t netns_pid, struct lz_child *ret, int *ret_ready_fd, struct lz_error *err) {
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
    snprintf(pid, sizeof pid, "%d", (int)netns_pid);
    snprintf(ready, sizeof ready, "--ready-fd=%d", rp[1]);
    char *argv[] = { (char *)path,
                     (char *)"--configure",
                     (char *)"--mtu=65520",
                     (char *)"--disable-host-loopback",
                     (char *)"--disable-dns", /* the Domain's resolver answers on 10.0.2.3 (netpolicy.h) */
                     (char *)"--enable-sandbox",
                     (char *)"--enable-seccomp",
                     ready,
                     pid,
                     (char *)LZ_NET_TAP,
                     NULL };
    int keep[] = { rp[1] };
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_HELPER);
    struct lz_spawn_opts o = { .path = path,
                               .argv = argv,
                               .envp = envp,
                               .stdin_fd = -1,
                               .stdout_fd = 2,
                               .stderr_fd = 2,
                               .keep_fds = keep,
                               .n_keep_fds = 1,
                               .setns_pidfd = -1,
                               .pdeathsig = SIGTERM,
                               .barrier = true };
    int r = lz_spawn(&o, ret);
    close(rp[1]);
    if (r < 0) {
        close(rp[0]);
        return lz_error_set(err, r, "cannot start slirp4netns: %s", strerror(-r));
    }
    *ret_ready_fd = rp[0];
    return 0;
}

int lz_slirp_await_ready(int ready_fd, int timeout_ms) {
    char b[8] = "";
    struct pollfd p = { .fd = ready_fd, .events = POLLIN };
    ssize_t n = poll(&p, 1, timeout_ms) > 0 ? read(ready_fd, b, sizeof b) : -1;
    return n < 1 || b[0] != '1' ? -EIO : 0;
}
