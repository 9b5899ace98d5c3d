/* log.c: the refusal log: paths are agent-chosen bytes, so they are escaped;
 * rate-limited. And the refusal records for the Host Coordinator
 * (refusal.h). */
#include "router_int.h"

/* ---- refusal log: paths are agent-chosen bytes, so escape them ---- */

void log_escaped(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            fputc(*p, f);
        else
            fprintf(f, "\\x%02x", *p);
    }
}

/* Rate limit: at most 20 refusals a second are logged. */
bool log_allowed(struct router *r) {
    if (r->quiet)
        return false;
    time_t now = time(NULL);
    if (now != r->log_window) {
        if (r->log_dropped)
            fprintf(stderr, "lazaret-router: %u more refusals not logged\n", r->log_dropped);
        r->log_window = now;
        r->log_count = 0;
        r->log_dropped = 0;
    }
    if (++r->log_count > 20) {
        r->log_dropped++;
        return false;
    }
    return true;
}

void log_refusal(struct router *r, const char *op, const char *path, const char *path2, int err) {
    if (!log_allowed(r))
        return;
    fprintf(stderr, "lazaret-router: refused %s ", op);
    log_escaped(stderr, path ? path : "(no name)");
    if (path2) {
        fputs(" -> ", stderr);
        log_escaped(stderr, path2);
    }
    fprintf(stderr, ": %s\n", strerror(-err));
}

/* One record to the Host Coordinator (--refusal-fd), and the log line.
 * The agent can make refusals as fast as it likes: the send never waits
 * (a full socket drops the record, counted and reported with the next one
 * that goes through), so a FUSE request is never held up by the
 * coordinator. */
void refused(struct router *r, uint8_t why, uint8_t op, const char *path, const char *path2, int err,
             const char *detail) {
    if (log_allowed(r)) {
        fprintf(stderr, "lazaret-router: refused %s ", lz_refusal_op_name(op));
        log_escaped(stderr, path ? path : "(no name)");
        if (path2) {
            fputs(" -> ", stderr);
            log_escaped(stderr, path2);
        }
        fprintf(stderr, ": %s (%s%s", strerror(-err), lz_refusal_why_name(why), detail ? ": " : "");
        if (detail)
            log_escaped(stderr, detail);
        fputs(")\n", stderr);
    }
    if (r->ref_fd < 0)
        return;
    static uint8_t buf[LZ_REFUSAL_MAX];
    ssize_t n =
        lz_refusal_encode(buf, sizeof buf, why, op, r->ref_tag, -err, r->ref_dropped, path ? path : "", path2, detail);
    if (n < 0)
        return;
    if (send(r->ref_fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n) {
        r->ref_dropped = 0;
    } else if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) {
        if (r->ref_dropped < UINT32_MAX)
            r->ref_dropped++;
    } else {
        /* The coordinator is gone (EPIPE, ECONNREFUSED): nobody to tell. */
        close(r->ref_fd);
        r->ref_fd = -1;
    }
}
