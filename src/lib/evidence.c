/* evidence.c — see evidence.h. */
#include "evidence.h"

#include <inttypes.h>

static bool safe(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("_./:+-", c);
}

static const char hexd[] = "0123456789ABCDEF";

void lz_evidence_init(struct lz_evidence *e) { *e = (struct lz_evidence){ .s = "" }; }

/* Appends the escaped s; -EINVAL when s is empty or too long. */
static int put(struct lz_evidence *e, const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= LZ_EVIDENCE_FIELD_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (e->len + 4 > sizeof e->s)
            return -E2BIG;
        if (safe(c)) {
            e->s[e->len++] = (char)c;
        } else {
            e->s[e->len++] = '%';
            e->s[e->len++] = hexd[c >> 4];
            e->s[e->len++] = hexd[c & 15];
        }
    }
    e->s[e->len] = '\0';
    return 0;
}

void lz_evidence_add(struct lz_evidence *e, const char *key, const char *value) {
    if (e->err)
        return;
    if (e->n >= LZ_EVIDENCE_FIELDS_MAX) {
        e->err = -E2BIG;
        return;
    }
    char v[8];
    if (lz_evidence_get(e->s, key, v, sizeof v) != 0) {
        e->err = -EEXIST;
        return;
    }
    size_t at = e->len;
    if (e->n && e->len + 1 < sizeof e->s)
        e->s[e->len++] = ' ';
    int r = put(e, key);
    if (r == 0 && e->len + 2 > sizeof e->s)
        r = -E2BIG;
    if (r == 0) {
        e->s[e->len++] = '=';
        r = put(e, value);
    }
    if (r < 0) {
        e->len = at;
        e->s[at] = '\0';
        e->err = r;
        return;
    }
    e->n++;
}

void lz_evidence_add_u64(struct lz_evidence *e, const char *key, uint64_t value) {
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, value);
    lz_evidence_add(e, key, v);
}

int lz_evidence_end(struct lz_evidence *e, const char **ret) {
    if (e->err)
        return e->err;
    *ret = e->s;
    return 0;
}

struct span {
    const char *p;
    size_t n;
};

/* One escaped key or value: its length up to stop (' ', '=' or the end),
 * or -EBADMSG. */
static int token(const char *s, size_t *ret_n, size_t *ret_raw) {
    size_t i = 0, raw = 0;
    while (s[i] && s[i] != ' ' && s[i] != '=') {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            const char *h1 = s[i + 1] ? strchr(hexd, s[i + 1]) : NULL;
            const char *h2 = h1 && s[i + 2] ? strchr(hexd, s[i + 2]) : NULL;
            if (!h1 || !h2)
                return -EBADMSG;
            unsigned char b = (unsigned char)(((h1 - hexd) << 4) | (h2 - hexd));
            if (!b || safe(b)) /* a NUL, or escaped without need: not canonical */
                return -EBADMSG;
            i += 3;
        } else if (safe(c)) {
            i++;
        } else {
            return -EBADMSG;
        }
        raw++;
    }
    if (i == 0 || raw >= LZ_EVIDENCE_FIELD_MAX)
        return -EBADMSG;
    *ret_n = i;
    *ret_raw = raw;
    return 0;
}

/* Walks the whole of ev: -EBADMSG unless well formed; the value of key
 * (escaped) in *ret_val when present (1), else 0. */
static int parse(const char *ev, const char *key, struct span *ret_val) {
    if (!ev)
        return 0;
    if (strnlen(ev, LZ_EVIDENCE_MAX) >= LZ_EVIDENCE_MAX)
        return -EBADMSG;
    struct span keys[LZ_EVIDENCE_FIELDS_MAX];
    size_t nk = 0;
    int found = 0;
    const char *s = ev;
    if (!*s)
        return 0; /* no fields */
    for (;;) {
        size_t kn, vn, raw;
        if (nk >= LZ_EVIDENCE_FIELDS_MAX || token(s, &kn, &raw) < 0 || s[kn] != '=')
            return -EBADMSG;
        const char *v = s + kn + 1;
        if (token(v, &vn, &raw) < 0 || (v[vn] != ' ' && v[vn] != '\0'))
            return -EBADMSG;
        for (size_t i = 0; i < nk; i++)
            if (keys[i].n == kn && !memcmp(keys[i].p, s, kn))
                return -EBADMSG;
        keys[nk++] = (struct span){ s, kn };
        if (key && !found) {
            /* Compare the unescaped key with the wanted one. */
            size_t j = 0, i = 0;
            bool same = true;
            while (i < kn && same) {
                unsigned char c = (unsigned char)s[i];
                if (c == '%') {
                    c = (unsigned char)(((strchr(hexd, s[i + 1]) - hexd) << 4) | (strchr(hexd, s[i + 2]) - hexd));
                    i += 3;
                } else {
                    i++;
                }
                same = key[j] && (unsigned char)key[j] == c;
                j++;
            }
            if (same && !key[j]) {
                found = 1;
                *ret_val = (struct span){ v, vn };
            }
        }
        s = v + vn;
        if (!*s)
            return found;
        if (!s[1])
            return -EBADMSG; /* trailing space */
        s++;
    }
}

int lz_evidence_check(const char *ev) {
    int r = parse(ev, NULL, NULL);
    return r < 0 ? r : 0;
}

int lz_evidence_get(const char *ev, const char *key, char *val, size_t cap) {
    struct span v;
    int r = parse(ev, key, &v);
    if (r <= 0)
        return r;
    size_t o = 0;
    for (size_t i = 0; i < v.n; o++) {
        if (o + 1 >= cap)
            return -E2BIG;
        if (v.p[i] == '%') {
            val[o] = (char)(((strchr(hexd, v.p[i + 1]) - hexd) << 4) | (strchr(hexd, v.p[i + 2]) - hexd));
            i += 3;
        } else {
            val[o] = v.p[i++];
        }
    }
    val[o] = '\0';
    return 1;
}

int lz_evidence_get_u64(const char *ev, const char *key, uint64_t *ret) {
    char v[LZ_EVIDENCE_FIELD_MAX];
    int r = lz_evidence_get(ev, key, v, sizeof v);
    if (r <= 0)
        return r == -E2BIG ? -EBADMSG : r;
    size_t n = strlen(v);
    if (n > 20 || strspn(v, "0123456789") != n || (n > 1 && v[0] == '0'))
        return -EBADMSG;
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno)
        return -EBADMSG;
    *ret = (uint64_t)x;
    return 1;
}
