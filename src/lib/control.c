/* control.c — see control.h. */
#include "control.h"
#include "paths.h"
#include "proto.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>

#define CONTROL_TIMEOUT_MS 5000

/* One request, one reply (bounded). */
static ssize_t request(const char *sock_path, uint8_t type, const void *payload, size_t len, uint8_t *reply, size_t cap,
                       struct lz_error *err) {
    _cleanup_close_ int fd = lz_proto_connect(sock_path);
    if (fd < 0)
        return lz_error_set(err, fd, "cannot connect to %s: %s", sock_path, strerror(-fd));
    int r = lz_msg_send(fd, type, 0, payload, len);
    if (r < 0)
        return lz_error_set(err, r, "cannot send to %s: %s", sock_path, strerror(-r));
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int pr = poll(&p, 1, CONTROL_TIMEOUT_MS);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0)
            return lz_error_set(err, -ETIMEDOUT, "the coordinator at %s did not answer in %d s", sock_path,
                                CONTROL_TIMEOUT_MS / 1000);
        ssize_t n = lz_msg_recv(fd, reply, cap);
        if (n <= 0)
            return lz_error_set(err, n < 0 ? (int)n : -EPIPE, "the coordinator at %s closed the connection", sock_path);
        if (reply[0] == LZ_MSG_NOTICE)
            continue;
        if (reply[0] == LZ_MSG_REFUSED) {
            int mlen = n > LZ_PROTO_HDR + 4 ? (int)(n - LZ_PROTO_HDR - 4) : 0;
            return lz_error_set(err, -EPERM, "the coordinator refused: %.*s", mlen,
                                (const char *)reply + LZ_PROTO_HDR + 4);
        }
        return n;
    }
}

int lz_control_status(const char *sock_path, json_t **ret, struct lz_error *err) {
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = request(sock_path, LZ_MSG_STATUS, NULL, 0, buf, sizeof buf, err);
    if (n < 0)
        return (int)n;
    if (buf[0] != LZ_MSG_STATUS_REPLY)
        return lz_error_set(err, -EPROTO, "unexpected reply from %s", sock_path);
    json_error_t je;
    json_t *o = json_loadb((const char *)buf + LZ_PROTO_HDR, (size_t)n - LZ_PROTO_HDR, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return lz_error_set(err, -EBADMSG, "unreadable status from %s", sock_path);
    }
    *ret = o;
    return 0;
}

int lz_control_net(const char *sock_path, char **ret_text, struct lz_error *err) {
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = request(sock_path, LZ_MSG_NET, NULL, 0, buf, sizeof buf, err);
    if (n < 0)
        return (int)n;
    if (buf[0] != LZ_MSG_NET_REPLY)
        return lz_error_set(err, -EPROTO, "unexpected reply from %s", sock_path);
    size_t len = (size_t)n - LZ_PROTO_HDR;
    if (memchr(buf + LZ_PROTO_HDR, '\0', len))
        return lz_error_set(err, -EBADMSG, "unreadable reply from %s", sock_path);
    *ret_text = lz_xstrndup((const char *)buf + LZ_PROTO_HDR, len);
    return 0;
}

int lz_control_events(const char *sock_path, json_t **ret, struct lz_error *err) {
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = request(sock_path, LZ_MSG_EVENTS, NULL, 0, buf, sizeof buf, err);
    if (n < 0)
        return (int)n;
    if (buf[0] != LZ_MSG_EVENTS_REPLY)
        return lz_error_set(err, -EPROTO, "unexpected reply from %s (a coordinator older than this lazaret?)",
                            sock_path);
    json_error_t je;
    json_t *o = json_loadb((const char *)buf + LZ_PROTO_HDR, (size_t)n - LZ_PROTO_HDR, 0, &je);
    if (!json_is_object(o) || !json_is_array(json_object_get(o, "events"))) {
        json_decref(o);
        return lz_error_set(err, -EBADMSG, "unreadable refusals from %s", sock_path);
    }
    *ret = o;
    return 0;
}

/* One STOP with `flags`; the reply's status into *ret_status when asked
 * (the EXIT must then carry one). */
static int stop_request(const char *sock_path, uint32_t flags, uint32_t *ret_status, struct lz_error *err) {
    uint8_t p[4];
    lz_put_u32(p, flags);
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = request(sock_path, LZ_MSG_STOP, p, sizeof p, buf, sizeof buf, err);
    if (n < 0)
        return (int)n;
    if (buf[0] != LZ_MSG_EXIT || (ret_status && (size_t)n < LZ_PROTO_HDR + 4))
        return lz_error_set(err, -EPROTO, "unexpected reply from %s", sock_path);
    if (ret_status)
        *ret_status = lz_get_u32(buf + LZ_PROTO_HDR);
    return 0;
}

int lz_control_stop(const char *sock_path, bool force, struct lz_error *err) {
    return stop_request(sock_path, force ? LZ_STOP_FORCE : 0, NULL, err);
}

int lz_control_stop_if_lingering(const char *sock_path, struct lz_error *err) {
    uint32_t status = 1;
    int r = stop_request(sock_path, LZ_STOP_IF_LINGERING, &status, err);
    return r < 0 ? r : status == 0 ? 1 : 0;
}

static int by_id(const void *a, const void *b) {
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "domain_id"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "domain_id"));
    return strcmp(x ? x : "", y ? y : "");
}

int lz_control_list(json_t **ret, struct lz_error *err) {
    _cleanup_free_ char *rt = NULL;
    int r = lz_runtime_dir(&rt, err);
    if (r < 0)
        return r;
    DIR *d = opendir(rt);
    if (!d) {
        if (errno == ENOENT) {
            *ret = json_array();
            return 0;
        }
        return lz_error_set(err, -errno, "cannot read %s: %s", rt, strerror(errno));
    }
    json_t **items = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".sock") != 0 || strspn(e->d_name, "0123456789abcdef") != l - 5)
            continue;
        _cleanup_free_ char *p = lz_xasprintf("%s/%s", rt, e->d_name);
        json_t *st = NULL;
        if (lz_control_status(p, &st, NULL) < 0)
            continue; /* stale socket or a coordinator going away */
        json_object_set_new(st, "socket", json_string(p));
        items = lz_xrealloc(items, (n + 1) * sizeof *items);
        items[n++] = st;
    }
    closedir(d);
    if (n)
        qsort(items, n, sizeof *items, by_id);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, items[i]);
    free(items);
    *ret = arr;
    return 0;
}

int lz_control_wait_stopped(const char *domain_dir, int timeout_s, struct lz_error *err) {
    _cleanup_free_ char *p = lz_xasprintf("%s/lock", domain_dir);
    _cleanup_close_ int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : lz_error_set(err, -errno, "cannot open %s: %s", p, strerror(errno));
    int r = lz_flock_timeout(fd, timeout_s);
    if (r < 0)
        return lz_error_set(err, r, "the Domain did not stop within %d s", timeout_s);
    flock(fd, LOCK_UN);
    return 0;
}
