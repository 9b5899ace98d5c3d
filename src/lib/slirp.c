/* slirp.c — see slirp.h. */
#include "slirp.h"
#include "netpolicy.h" /* LZ_NET_TAP */
#include "procenv.h"
#include "publish.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <fcntl.h>
#include <signal.h>

int lz_slirp_spawn(pid_t netns_pid, const char *api_path, struct lz_child *ret, int *ret_ready_fd,
                   struct lz_error *err) {
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
    _cleanup_free_ char *api = api_path ? lz_xasprintf("--api-socket=%s", api_path) : NULL;
    if (api_path)
        (void)unlink(api_path); /* a previous generation's (slirp4netns refuses an existing path) */
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)path;
    /* The tests' positive control only: the helper's own default route. */
    const char *hook = lz_test_hook("LAZARET_TEST_NET");
    if (hook && strcmp(hook, "helper-configures") == 0)
        argv[n++] = (char *)"--configure";
    argv[n++] = (char *)"--mtu=65520"; /* LZ_NET_MTU */
    argv[n++] = (char *)"--disable-host-loopback";
    argv[n++] = (char *)"--disable-dns"; /* the Domain's resolver answers on 10.0.2.3 (netpolicy.h) */
    argv[n++] = (char *)"--enable-sandbox";
    argv[n++] = (char *)"--enable-seccomp";
    argv[n++] = ready;
    if (api)
        argv[n++] = api;
    argv[n++] = pid;
    argv[n++] = (char *)LZ_NET_TAP;
    argv[n] = NULL;
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

int lz_slirp_read_ready(int ready_fd) {
    char b[8] = "";
    ssize_t n = read(ready_fd, b, sizeof b);
    return n < 1 || b[0] != '1' ? -EIO : 0;
}

/* ---- published ports ---- */

static int api_call(const char *api_path, const char *req, char *resp, size_t cap, struct lz_error *err) {
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(api_path) >= sizeof sa.sun_path)
        return lz_error_set(err, -ENAMETOOLONG, "the connectivity helper's API socket path is too long");
    memcpy(sa.sun_path, api_path, strlen(api_path) + 1);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lz_error_set(err, -errno, "socket: %s", strerror(errno));
    struct timeval tv = { .tv_sec = 2 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return lz_error_set(err, -errno, "cannot reach the connectivity helper's API socket: %s", strerror(errno));
    if (lz_write_full(fd, req, strlen(req)) < 0 || shutdown(fd, SHUT_WR) < 0)
        return lz_error_set(err, -EIO, "cannot talk to the connectivity helper's API socket");
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, resp + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return lz_error_set(err, -errno, "no answer from the connectivity helper: %s", strerror(errno));
        if (k == 0 || (n += (size_t)k) == cap - 1)
            break;
    }
    resp[n] = '\0';
    return 0;
}

int lz_slirp_publish(const char *api_path, const struct lz_publish *p, struct lz_error *err) {
    char text[LZ_PUBLISH_TEXT_MAX], host[INET_ADDRSTRLEN];
    lz_publish_format(p, text, sizeof text);
    struct in_addr ia = { .s_addr = htonl(p->host_addr) };
    inet_ntop(AF_INET, &ia, host, sizeof host);
    /* Our own bind first: "in use" and "not an address of this host" get
     * their own words (slirp4netns says only that it failed). */
    {
        _cleanup_close_ int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->host_port), .sin_addr = ia };
        /* As slirp4netns binds it: a port whose last connections are in
         * TIME_WAIT (the Domain restarted) is free, a listener is not. */
        int one = 1;
        if (s >= 0)
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
            int e = s < 0 ? EMFILE : errno;
            if (e == EADDRINUSE)
                return lz_error_set(err, -e,
                                    "cannot publish %s: %s:%u is in use on this host (choose another host port: "
                                    "--publish OTHERPORT:%u)",
                                    text, host, p->host_port, p->port);
            if (e == EADDRNOTAVAIL)
                return lz_error_set(err, -e, "cannot publish %s: %s is not an address of this host", text, host);
            if (e == EACCES)
                return lz_error_set(err, -e, "cannot publish %s: host ports below 1024 need privilege (%s)", text,
                                    strerror(e));
            return lz_error_set(err, -e, "cannot publish %s: %s", text, strerror(e));
        }
    }
    char req[256], resp[512];
    snprintf(req, sizeof req,
             "{\"execute\":\"add_hostfwd\",\"arguments\":{\"proto\":\"tcp\",\"host_addr\":\"%s\","
             "\"host_port\":%u,\"guest_addr\":\"10.0.2.100\",\"guest_port\":%u}}",
             host, p->host_port, p->port);
    int r = api_call(api_path, req, resp, sizeof resp, err);
    if (r < 0)
        return lz_error_prefix(err, r, "cannot publish %s", text);
    if (!strstr(resp, "\"return\"")) {
        /* Shown as the helper said it, cut and without control characters. */
        for (char *c = resp; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        return lz_error_set(err, -EIO, "cannot publish %s: the connectivity helper said: %.200s", text, resp);
    }
    return 0;
}
