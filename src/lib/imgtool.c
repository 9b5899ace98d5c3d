/* imgtool.c — see imgtool.h. */
#include "imgtool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include "procenv.h"
#include "spawn.h"

static void tool_line(struct lz_tool_out *o) {
    o->line[o->line_len] = '\0';
    size_t n = o->line_len;
    o->line_len = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)o->line[i] < 0x20 || o->line[i] == 0x7f)
            o->line[i] = o->line[i] == '\t' ? ' ' : '?';
    while (n && (o->line[n - 1] == ' ' || o->line[n - 1] == '\t'))
        o->line[--n] = '\0';
    if (!n)
        return;
    if (o->n_tail == LZ_TOOL_TAIL_LINES) {
        memmove(o->tail[0], o->tail[1], sizeof o->tail[0] * (LZ_TOOL_TAIL_LINES - 1));
        o->n_tail--;
    }
    (void)lz_snprintf(o->tail[o->n_tail++], sizeof o->tail[0], "%s", o->line);
    if (o->progress) {
        char phase[600];
        (void)lz_snprintf(phase, sizeof phase, "%s: %s", o->prefix, o->line);
        o->progress(o->ud, phase, 0, 0);
    }
}

void lz_tool_tail(const struct lz_tool_out *o, char *out, size_t size) {
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < o->n_tail && off < size; i++) {
        int w = snprintf(out + off, size - off, "%s%s", i ? " | " : "", o->tail[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

static void feed(struct lz_tool_out *o, const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || buf[i] == '\r') {
            tool_line(o);
        } else {
            if (o->line_len == sizeof o->line - 1)
                tool_line(o);
            o->line[o->line_len++] = buf[i];
        }
    }
}

int lz_tool_run(char *const argv[], const char *cwd, int timeout_ms, struct lz_tool_out *o, int *ret_status) {
    /* Not the whole client environment (it may hold the secrets a profile
     * references): what registry and Debian-mirror tools need (procenv.h). */
    _cleanup_env_ char **envp = lz_tool_env();
    _cleanup_free_ char *path = NULL;
    int r = lz_find_program(argv[0], envp, &path);
    if (r < 0)
        return r;
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    _cleanup_close_ int rd = out[0];
    struct lz_spawn_opts so = { .path = path,
                                .argv = argv,
                                .envp = envp,
                                .stdin_fd = -1,
                                .stdout_fd = out[1],
                                .stderr_fd = out[1],
                                .setns_pidfd = -1,
                                .cwd = cwd };
    struct lz_child c = LZ_CHILD_NULL;
    r = lz_spawn(&so, &c);
    close(out[1]);
    if (r < 0)
        return r;

    /* One deadline for the output and the exit: a tool that closes its
     * output and then hangs is stopped as well. */
    long deadline = lz_now_ms() + timeout_ms;
    char buf[4096];
    for (;;) {
        long left = deadline - lz_now_ms();
        struct pollfd p = { .fd = rd, .events = POLLIN };
        int pr = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            r = pr == 0 ? -ETIMEDOUT : -errno;
            break;
        }
        ssize_t n = read(rd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        feed(o, buf, (size_t)n);
    }
    if (o->line_len)
        tool_line(o);
    int status = 0;
    if (r == 0) {
        long left = deadline - lz_now_ms();
        r = lz_child_wait(&c, left > 0 ? (int)left : 0, &status);
    }
    if (r < 0) {
        /* Timed out (or poll failed): stop it, and report that, not the
         * signal we sent. */
        lz_child_stop(&c, LZ_TOOL_STOP_GRACE_MS, &status);
        lz_child_close(&c);
        return r;
    }
    lz_child_close(&c);
    *ret_status = status;
    return 0;
}

bool lz_tool_unreachable(const struct lz_tool_out *o) {
    static const char *const marks[] = {
        "no such host",
        "dial tcp",
        "connection refused",
        "i/o timeout",
        "network is unreachable",
        "TLS handshake timeout",
        "temporary failure in name resolution",
        "server misbehaving",
    };
    for (size_t i = 0; i < o->n_tail; i++)
        for (size_t k = 0; k < LZ_ARRAY_SIZE(marks); k++)
            if (strcasestr(o->tail[i], marks[k]))
                return true;
    return false;
}
