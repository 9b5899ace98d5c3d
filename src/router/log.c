/* log.c: the refusal log: paths are agent-chosen bytes, so they are escaped; rate-limited. */
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

/* A refusal with a reason (already escaped by whoever made it). */
void log_refusal_why(struct router *r, const char *op, const char *path, const char *why) {
    if (!log_allowed(r))
        return;
    fprintf(stderr, "lazaret-router: refused %s ", op);
    log_escaped(stderr, path ? path : "(no name)");
    fputs(": ", stderr);
    log_escaped(stderr, why);
    fputc('\n', stderr);
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
