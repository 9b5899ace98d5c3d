/* router_link.c — the link-target rule of the workspace router; see
 * router_link.h. */
#include "router_link.h"

#include "util.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

bool lz_router_abs_within(const char *a, const char *b) {
    size_t lb = strlen(b);
    if (lb == 1 && b[0] == '/')
        return true;
    return strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/');
}

/* A volume kept under the Storage Root may link within itself. */
static bool own(const struct lz_router_link_policy *pol, const char *p) {
    if (!pol->root)
        return false;
    for (size_t i = 0; i < pol->n_deny; i++)
        if (lz_router_abs_within(pol->root, pol->deny[i]))
            return lz_router_abs_within(p, pol->root);
    return false;
}

/* Never looked at: inside a denied path (a resolution does not pass through
 * Lazaret's storage) or our own mount point (we would wait for ourselves). */
static bool no_transit(const struct lz_router_link_policy *pol, const char *p) {
    if (pol->mountpoint && lz_router_abs_within(p, pol->mountpoint))
        return true;
    if (own(pol, p))
        return false;
    for (size_t i = 0; i < pol->n_deny; i++)
        if (lz_router_abs_within(p, pol->deny[i]))
            return true;
    return false;
}

bool lz_router_link_denied(const struct lz_router_link_policy *pol, const char *p) {
    if (own(pol, p))
        return false;
    for (size_t i = 0; i < pol->n_deny; i++)
        if (lz_router_abs_within(p, pol->deny[i]) || lz_router_abs_within(pol->deny[i], p))
            return true;
    return false;
}

bool lz_router_link_shape_ok(const char *target) {
    bool named = false;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (named)
                return false;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            named = true;
        }
        p += n;
        p += strspn(p, "/");
    }
    return true;
}

static void pop(char *cur) {
    char *slash = strrchr(cur, '/');
    if (slash == cur || !slash)
        cur[1] = '\0';
    else
        *slash = '\0';
}

int lz_router_link_resolve(const struct lz_router_link_policy *pol, const char *base, const char *target, char *cur) {
    size_t cap = 2 * PATH_MAX + 2;
    _cleanup_free_ char *rest = lz_xmalloc(cap), *tmp = lz_xmalloc(cap);
    if (lz_snprintf(rest, cap, "%s", target) < 0)
        return -ENAMETOOLONG;
    if (target[0] == '/')
        memcpy(cur, "/", 2);
    else if (lz_snprintf(cur, PATH_MAX + 1, "%s", base) < 0)
        return -ENAMETOOLONG;
    unsigned follows = 0;
    size_t pos = 0;
    while (rest[pos]) {
        size_t n = strcspn(rest + pos, "/");
        const char *c = rest + pos;
        size_t next = pos + n + strspn(rest + pos + n, "/");
        if (n == 0 || (n == 1 && c[0] == '.')) {
            pos = next;
            continue;
        }
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            pop(cur);
            pos = next;
            continue;
        }
        char cand[PATH_MAX + 1];
        if (lz_snprintf(cand, sizeof cand, "%s%s%.*s", strcmp(cur, "/") ? cur : "", "/", (int)n, c) < 0)
            return -ENAMETOOLONG;
        if (no_transit(pol, cand))
            return -EPERM;
        char link[PATH_MAX + 1];
        int rc = pol->readlink(pol->ctx, cand, link, sizeof link);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            if (++follows > LZ_LINK_FOLLOW_MAX)
                return -EPERM;
            /* The link's target, then what was left after it. */
            if (lz_snprintf(tmp, cap, "%s/%s", link, rest + next) < 0)
                return -ENAMETOOLONG;
            memcpy(rest, tmp, strlen(tmp) + 1);
            pos = 0;
            if (link[0] == '/')
                memcpy(cur, "/", 2);
            continue;
        }
        /* A real entry, or none (then the rest is lexical). */
        memcpy(cur, cand, strlen(cand) + 1);
        pos = next;
    }
    return 0;
}

int lz_router_link_check(const struct lz_router_link_policy *pol, const char *base, const char *target) {
    if (pol->n_deny == 0)
        return 0;
    if (!lz_router_link_shape_ok(target))
        return -EPERM;
    char res[PATH_MAX + 1];
    int rc = lz_router_link_resolve(pol, base, target, res);
    if (rc == 0 && lz_router_link_denied(pol, res))
        rc = -EPERM;
    return rc;
}
