/* hostrule.c — host-name rules and the canonical host name (hostrule.h). */
#include "hostrule.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Untrusted or user bytes in a message: printable ASCII as is, the rest as
 * \xNN, at most 64 input bytes (then "..."), so a message stays one line
 * and shows exactly which byte was refused. */
static const char *quote(const char *s, size_t len, char *buf, size_t cap) {
    size_t o = 0;
    size_t n = len > 64 ? 64 : len;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    if (n < len && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

int lz_hostname_canon(const char *in, size_t len, char ret[static LZ_HOSTNAME_MAX + 1], struct lz_error *err) {
    char q[300];
    if (len > 0 && in[len - 1] == '.')
        len--; /* the root: "example.com." is "example.com" */
    if (len == 0)
        return lz_error_set(err, -EINVAL, "empty host name");
    if (len > LZ_HOSTNAME_MAX)
        return lz_error_set(err, -EINVAL, "host name \"%s\" is longer than %d bytes", quote(in, len, q, sizeof q),
                            LZ_HOSTNAME_MAX);
    char out[LZ_HOSTNAME_MAX + 1];
    size_t label = 0, last_start = 0;
    bool last_digits = true;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || in[i] == '.') {
            if (label == 0)
                return lz_error_set(err, -EINVAL, "host name \"%s\" has an empty label (\"..\", or a leading dot)",
                                    quote(in, len, q, sizeof q));
            if (label > LZ_HOSTNAME_LABEL_MAX)
                return lz_error_set(err, -EINVAL, "host name \"%s\" has a label longer than %d bytes",
                                    quote(in, len, q, sizeof q), LZ_HOSTNAME_LABEL_MAX);
            if (out[i - 1] == '-' || out[i - label] == '-')
                return lz_error_set(err, -EINVAL, "host name \"%s\" has a label that starts or ends with '-'",
                                    quote(in, len, q, sizeof q));
            if (i == len)
                break;
            out[i] = '.';
            label = 0;
            last_start = i + 1;
            last_digits = true;
            continue;
        }
        unsigned char c = (unsigned char)in[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
            if (c >= 0x80)
                return lz_error_set(err, -EINVAL,
                                    "host name \"%s\" is not ASCII: write an international name in its punycode "
                                    "form (xn--...)",
                                    quote(in, len, q, sizeof q));
            char qb[8];
            return lz_error_set(err, -EINVAL,
                                "host name \"%s\" has the byte \"%s\" at %zu: a host name has only letters, digits, "
                                "'-' and dots between labels",
                                quote(in, len, q, sizeof q), quote(in + i, 1, qb, sizeof qb), i);
        }
        if (c < '0' || c > '9')
            last_digits = false;
        out[i] = (char)c;
        label++;
    }
    (void)last_start;
    if (last_digits)
        return lz_error_set(err, -EINVAL,
                            "\"%s\" is not a host name (its last label is all digits): name an address range "
                            "with allow_egress",
                            quote(in, len, q, sizeof q));
    out[len] = '\0';
    memcpy(ret, out, len + 1);
    return 0;
}

static int parse_ports(const char *rule, const char *s, struct lz_hostrule *r, struct lz_error *err) {
    r->n_ports = 0;
    for (;;) {
        unsigned v = 0;
        size_t nd = 0;
        while (s[nd] >= '0' && s[nd] <= '9') {
            if (nd >= 5)
                break;
            v = v * 10 + (unsigned)(s[nd] - '0');
            nd++;
        }
        if (nd == 0 || v == 0 || v > 65535 || (s[nd] != ',' && s[nd] != '\0'))
            return lz_error_set(err, -EINVAL,
                                "host rule \"%s\": bad port list: write \":PORT\" or \":PORT,PORT\" with ports "
                                "1..65535",
                                rule);
        bool dup = false;
        for (size_t i = 0; i < r->n_ports; i++)
            dup |= r->ports[i] == v;
        if (!dup) {
            if (r->n_ports >= LZ_HOSTRULE_PORTS_MAX)
                return lz_error_set(err, -EINVAL, "host rule \"%s\" names more than %d ports", rule,
                                    LZ_HOSTRULE_PORTS_MAX);
            size_t at = r->n_ports;
            while (at > 0 && r->ports[at - 1] > v) {
                r->ports[at] = r->ports[at - 1];
                at--;
            }
            r->ports[at] = (uint16_t)v;
            r->n_ports++;
        }
        if (s[nd] == '\0')
            return 0;
        s += nd + 1;
    }
}

int lz_hostrule_parse(const char *text, unsigned flags, struct lz_hostrule *ret, struct lz_error *err) {
    char q[300];
    size_t len = strnlen(text, LZ_HOSTRULE_TEXT_MAX + 1);
    if (len > LZ_HOSTRULE_TEXT_MAX)
        return lz_error_set(err, -EINVAL, "host rule \"%s\" is longer than %d bytes", quote(text, len, q, sizeof q),
                            LZ_HOSTRULE_TEXT_MAX);
    quote(text, len, q, sizeof q);
    struct lz_hostrule r = { 0 };
    const char *colon = memchr(text, ':', len);
    size_t nlen = colon ? (size_t)(colon - text) : len;
    if (colon) {
        if (flags & LZ_HOSTRULE_NO_PORTS)
            return lz_error_set(err, -EINVAL,
                                "deny rule \"%s\" names a port: a deny rule denies the host on every port (allow "
                                "only the ports you want instead)",
                                q);
        int k = parse_ports(q, colon + 1, &r, err);
        if (k < 0)
            return k;
    }
    const char *name = text;
    if (nlen == 0)
        return lz_error_set(err, -EINVAL, "empty host rule: write a name (\"api.example.com\") or \"*.example.com\"");
    if (nlen >= 1 && name[0] == '*') {
        if (nlen == 1 || (nlen == 2 && name[1] == '.'))
            return lz_error_set(err, -EINVAL,
                                "host rule \"%s\" would allow every name: list the hosts, or allow address ranges "
                                "with allow_egress",
                                q);
        if (name[1] != '.')
            return lz_error_set(err, -EINVAL, "host rule \"%s\": '*' must be a whole first label, as in \"*.%s\"", q,
                                nlen > 1 ? "example.com" : "");
        r.wildcard = true;
        name += 2;
        nlen -= 2;
    }
    if (memchr(name, '*', nlen))
        return lz_error_set(err, -EINVAL,
                            "host rule \"%s\": '*' may only stand as the whole first label (\"*.example.com\")", q);
    struct lz_error e = { 0 };
    if (lz_hostname_canon(name, nlen, r.name, &e) < 0)
        return lz_error_set(err, -EINVAL, "host rule \"%s\": %s", q, e.msg);
    if (r.wildcard && !strchr(r.name, '.'))
        return lz_error_set(err, -EINVAL,
                            "host rule \"%s\" allows a whole top-level domain (any name anyone can register): "
                            "name a domain under it, \"*.example.%s\"",
                            q, r.name);
    *ret = r;
    return 0;
}

int lz_hostrule_format(const struct lz_hostrule *r, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s%s", r->wildcard ? "*." : "", r->name);
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    size_t o = (size_t)n;
    for (size_t i = 0; i < r->n_ports; i++) {
        n = snprintf(buf + o, cap - o, "%c%u", i ? ',' : ':', r->ports[i]);
        if (n < 0 || (size_t)n >= cap - o)
            return -ENOSPC;
        o += (size_t)n;
    }
    return 0;
}

bool lz_hostrule_match(const struct lz_hostrule *r, const char *canon) {
    size_t n = strnlen(canon, LZ_HOSTNAME_MAX + 1), s = strnlen(r->name, LZ_HOSTNAME_MAX + 1);
    if (!r->wildcard)
        return n == s && memcmp(canon, r->name, n) == 0;
    /* Strictly below the suffix: at least one label, then a dot at the
     * boundary ("xexample.com" has no dot there; "example.com" no label). */
    return n > s + 1 && canon[n - s - 1] == '.' && memcmp(canon + n - s, r->name, s) == 0;
}

static int ports_add(struct lz_hostports *p, uint16_t v) {
    size_t at = 0;
    while (at < p->n && p->ports[at] < v)
        at++;
    if (at < p->n && p->ports[at] == v)
        return 0;
    if (p->n >= LZ_HOSTPORTS_MAX)
        return -E2BIG;
    memmove(p->ports + at + 1, p->ports + at, (p->n - at) * sizeof p->ports[0]);
    p->ports[at] = v;
    p->n++;
    return 0;
}

int lz_hostrule_decide(const struct lz_hostrule *allow, size_t n_allow, const struct lz_hostrule *deny, size_t n_deny,
                       const char *canon, struct lz_hostports *ret_ports) {
    for (size_t i = 0; i < n_deny; i++)
        if (lz_hostrule_match(&deny[i], canon))
            return LZ_HOST_DENIED;
    struct lz_hostports p = { 0 };
    bool any = false;
    for (size_t i = 0; i < n_allow; i++) {
        if (!lz_hostrule_match(&allow[i], canon))
            continue;
        any = true;
        if (allow[i].n_ports == 0)
            p.all = true;
        for (size_t k = 0; !p.all && k < allow[i].n_ports; k++)
            if (ports_add(&p, allow[i].ports[k]) < 0)
                return -E2BIG;
    }
    if (!any)
        return LZ_HOST_UNLISTED;
    if (p.all)
        p.n = 0;
    if (ret_ports)
        *ret_ports = p;
    return LZ_HOST_ALLOWED;
}

int lz_hostrule_check(const struct lz_hostrule *allow, size_t n_allow, struct lz_error *err) {
    struct lz_hostports p = { 0 };
    for (size_t i = 0; i < n_allow; i++)
        for (size_t k = 0; k < allow[i].n_ports; k++)
            if (ports_add(&p, allow[i].ports[k]) < 0)
                return lz_error_set(err, -E2BIG, "the host rules name more than %d distinct ports", LZ_HOSTPORTS_MAX);
    return 0;
}

bool lz_hostports_has(const struct lz_hostports *p, uint16_t port) {
    if (p->all)
        return true;
    for (size_t i = 0; i < p->n; i++)
        if (p->ports[i] == port)
            return true;
    return false;
}
