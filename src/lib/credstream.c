/* credstream.c — a credential host's byte streams through the TLS gate
 * (credstream.h). */
#include "credstream.h"

#include "httphead.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B64_LEN(n) (((n) + 2) / 3 * 4)
/* The placeholder's base64 forms the head scan looks for: 3 alignments,
 * 2 alphabets. */
#define HIDDEN_MAX 6
/* Bytes a band-1 pkt-line carries in side-band-64k (git's send_sideband:
 * LARGE_PACKET_MAX less the length and the band byte). */
#define BAND_MAX (LZ_PKT_LEN_MAX - LZ_PKT_HDR - 1)
/* A value's base64 at an alignment is a needle of the response scan only
 * when it is this long: shorter ones could occur by chance. */
#define CORE_MIN 12

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* ---- small helpers ---- */

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c; }

/* RFC 9110 §5.6.2. */
static bool tchar(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* As eq_ci, a '_' in p read as '-' (the names some servers take for
 * the real ones). */
static bool eq_alias(const uint8_t *p, size_t n, const char *s) {
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((p[i] == '_' ? '-' : lower(p[i])) != lower((uint8_t)s[i]))
            return false;
    return true;
}

static bool has(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m) {
    return m > 0 && m <= n && memmem(hay, n, needle, m) != NULL;
}

/* base64 of in[0..n) with padding, NUL-terminated; its length. */
static size_t b64(const uint8_t *in, size_t n, const char *alphabet, char *out) {
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
        out[o++] = alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

/* Printable ASCII only, the rest as '?'. */
static void sanitize(char *s) {
    for (; *s; s++)
        if ((uint8_t)*s < 0x20 || (uint8_t)*s > 0x7e)
            *s = '?';
}

static void wipe_free(void *p, size_t n) {
    if (p)
        explicit_bzero(p, n);
    free(p);
}

/* Appends n bytes to o. The old block is wiped when it moves: out holds
 * the rewritten heads, values and all. */
static int put(struct lz_credout *o, const void *p, size_t n) {
    if (n == 0)
        return 0;
    if (o->len > LZ_CRED_OUT_MAX || n > LZ_CRED_OUT_MAX - o->len)
        return -ENOMEM;
    if (o->len + n > o->cap) {
        size_t c = o->cap < 4096 ? 4096 : o->cap;
        while (c < o->len + n)
            c = c > LZ_CRED_OUT_MAX / 2 ? LZ_CRED_OUT_MAX : c * 2;
        uint8_t *q = malloc(c);
        if (!q)
            return -ENOMEM;
        if (o->len)
            memcpy(q, o->p, o->len);
        wipe_free(o->p, o->cap);
        o->p = q;
        o->cap = c;
    }
    memcpy(o->p + o->len, p, n);
    o->len += n;
    return 0;
}

static int puts_(struct lz_credout *o, const char *s) { return put(o, s, strlen(s)); }

/* A pkt-line: 4 lower-case hex digits of the length, then the payload
 * (n bytes). */
static int pkt_hdr(struct lz_credout *o, size_t n) {
    char h[LZ_PKT_HDR + 1];
    snprintf(h, sizeof h, "%04zx", n + LZ_PKT_HDR);
    return put(o, h, LZ_PKT_HDR);
}

static int pkt(struct lz_credout *o, const void *p, size_t n) {
    int r = pkt_hdr(o, n);
    return r < 0 ? r : put(o, p, n);
}

/* ---- the needle matcher: several needles, one stream (KMP) ---- */

struct needle {
    uint8_t *p; /* owned; may be a secret */
    size_t len;
    uint32_t *pi; /* pi[k]: the longest proper prefix of p[0..k] that is also its suffix */
};

struct matcher {
    unsigned n;
    struct needle nd[LZ_CRED_BINDS_MAX * 8];
    size_t q[LZ_CRED_BINDS_MAX * 8]; /* bytes of needle i the stream ends with */
    bool idle;                       /* every q is 0 */
};

static int matcher_add(struct matcher *m, const void *p, size_t len) {
    if (len == 0)
        return 0;
    for (unsigned i = 0; i < m->n; i++)
        if (m->nd[i].len == len && memcmp(m->nd[i].p, p, len) == 0)
            return 0;
    if (m->n == sizeof m->nd / sizeof m->nd[0])
        return -EINVAL;
    struct needle *d = &m->nd[m->n];
    d->p = malloc(len);
    d->pi = malloc(len * sizeof *d->pi);
    if (!d->p || !d->pi) {
        free(d->p);
        free(d->pi);
        return -ENOMEM;
    }
    memcpy(d->p, p, len);
    d->len = len;
    d->pi[0] = 0;
    for (size_t k = 1, j = 0; k < len; k++) {
        while (j > 0 && d->p[k] != d->p[j])
            j = d->pi[j - 1];
        if (d->p[k] == d->p[j])
            j++;
        d->pi[k] = (uint32_t)j;
    }
    m->q[m->n++] = 0;
    return 0;
}

static void matcher_reset(struct matcher *m) {
    memset(m->q, 0, sizeof m->q);
    m->idle = true;
}

static void matcher_clear(struct matcher *m) {
    for (unsigned i = 0; i < m->n; i++) {
        wipe_free(m->nd[i].p, m->nd[i].len);
        free(m->nd[i].pi);
    }
    m->n = 0;
}

static size_t matcher_longest(const struct matcher *m) {
    size_t l = 0;
    for (unsigned i = 0; i < m->n; i++)
        if (m->nd[i].len > l)
            l = m->nd[i].len;
    return l;
}

/* Reads d[0..n) on: the index of the first needle to complete, or -1. */
static int matcher_feed(struct matcher *m, const uint8_t *d, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (m->idle) {
            /* No needle begun: on to the next byte that begins one. */
            size_t next = n;
            for (unsigned k = 0; k < m->n; k++) {
                const uint8_t *f = memchr(d + i, m->nd[k].p[0], next - i);
                if (f)
                    next = (size_t)(f - d);
            }
            if (next == n)
                return -1;
            i = next;
        }
        uint8_t c = d[i++];
        bool idle = true;
        for (unsigned k = 0; k < m->n; k++) {
            const struct needle *nd = &m->nd[k];
            size_t q = m->q[k];
            while (q > 0 && nd->p[q] != c)
                q = nd->pi[q - 1];
            if (nd->p[q] == c)
                q++;
            if (q == nd->len)
                return (int)k;
            m->q[k] = q;
            idle &= q == 0;
        }
        m->idle = idle;
    }
    return -1;
}

/* The longest end of the stream that begins a needle. */
static size_t matcher_hold(const struct matcher *m) {
    size_t h = 0;
    for (unsigned i = 0; i < m->n; i++)
        if (m->q[i] > h)
            h = m->q[i];
    return h;
}

/* ---- binds ---- */

static bool vis(uint8_t c) { return c >= 0x21 && c <= 0x7e; }

static bool text_ok(const char *s, size_t max, bool space, const char *forbid) {
    size_t n = strlen(s);
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(vis((uint8_t)s[i]) || (space && s[i] == ' ')) || (forbid && strchr(forbid, s[i])))
            return false;
    return true;
}

static bool placeholder_ok(const char *p) {
    size_t n = strlen(p);
    if (n < LZ_CRED_PLACEHOLDER_MIN || n > LZ_CRED_PLACEHOLDER_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Fields whose value frames or routes the request: never a credential's. */
static const char *const framing_fields[] = { "host",       "content-length", "transfer-encoding", "content-encoding",
                                              "connection", "keep-alive",     "upgrade",           "expect",
                                              "te",         "trailer",        "http2-settings" };

static bool framing_field(const uint8_t *name, size_t n) {
    for (size_t i = 0; i < sizeof framing_fields / sizeof framing_fields[0]; i++)
        if (eq_alias(name, n, framing_fields[i]))
            return true;
    return false;
}

static int bind_check(const struct lz_cred_bind *b) {
    if (!b->header || !b->placeholder || !b->value || !*b->header || strlen(b->header) > LZ_CRED_AFFIX_MAX)
        return -EINVAL;
    for (const char *c = b->header; *c; c++)
        if (!tchar((uint8_t)*c))
            return -EINVAL;
    if (framing_field((const uint8_t *)b->header, strlen(b->header)) || !placeholder_ok(b->placeholder) ||
        b->value_len < LZ_CRED_VALUE_MIN || b->value_len > LZ_CRED_VALUE_MAX)
        return -EINVAL;
    if (b->format == LZ_CRED_TEMPLATE) {
        const char *pre = b->prefix ? b->prefix : "", *suf = b->suffix ? b->suffix : "";
        if (!text_ok(pre, LZ_CRED_AFFIX_MAX, true, NULL) || !text_ok(suf, LZ_CRED_AFFIX_MAX, true, NULL))
            return -EINVAL;
        /* The ends of the field value are not whitespace: the parse drops it. */
        for (size_t i = 0; i < b->value_len; i++)
            if (!vis(b->value[i]) && b->value[i] != ' ')
                return -EINVAL;
        size_t pl = strlen(pre), sl = strlen(suf);
        if ((pl ? pre[0] : (char)b->value[0]) == ' ' || (sl ? suf[sl - 1] : (char)b->value[b->value_len - 1]) == ' ')
            return -EINVAL;
    } else if (b->format == LZ_CRED_BASIC) {
        if (!b->username || !text_ok(b->username, LZ_CRED_AFFIX_MAX, false, ":"))
            return -EINVAL;
    } else {
        return -EINVAL;
    }
    if (b->n_push_refs > LZ_CRED_PUSH_REFS_MAX || (b->n_push_refs && !b->push_refs))
        return -EINVAL;
    for (size_t i = 0; i < b->n_push_refs; i++)
        if (!b->push_refs[i] || !lz_cred_ref_pattern_ok(b->push_refs[i]))
            return -EINVAL;
    return 0;
}

static int binds_check(const struct lz_cred_bind *binds, size_t n) {
    if (!binds || n == 0 || n > LZ_CRED_BINDS_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = bind_check(&binds[i]);
        if (r < 0)
            return r;
        /* One placeholder inside another would read as out of place. */
        for (size_t j = 0; j < i; j++)
            if (strstr(binds[i].placeholder, binds[j].placeholder) ||
                strstr(binds[j].placeholder, binds[i].placeholder))
                return -EINVAL;
    }
    return 0;
}

/* "username:secret", n bytes in *ret (malloc'd, to wipe). */
static int basic_pair(const struct lz_cred_bind *b, const uint8_t *secret, size_t sl, uint8_t **ret, size_t *ret_n) {
    size_t ul = strlen(b->username), n = ul + 1 + sl;
    uint8_t *p = malloc(n);
    if (!p)
        return -ENOMEM;
    memcpy(p, b->username, ul);
    p[ul] = ':';
    memcpy(p + ul + 1, secret, sl);
    *ret = p;
    *ret_n = n;
    return 0;
}

/* The base64 of s[a..] in whole groups, for a = 0, 1, 2: what any base64
 * text holding s shows of it, whatever the bytes before it. */
static size_t b64_core(const uint8_t *s, size_t n, unsigned a, const char *alphabet, char *out) {
    if (n < a + 3) {
        out[0] = '\0';
        return 0;
    }
    return b64(s + a, (n - a) / 3 * 3, alphabet, out);
}

/* ---- ref patterns ---- */

bool lz_cred_ref_pattern_ok(const char *pattern) {
    size_t n = strlen(pattern);
    if (n <= 5 || n > LZ_PKT_REF_MAX || memcmp(pattern, "refs/", 5) != 0)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || pattern[i] == '/') {
            if (i == start)
                return false;
            start = i + 1;
            continue;
        }
        uint8_t c = (uint8_t)pattern[i];
        if (c < 0x21 || c == 0x7f || strchr("~^:?[\\", c))
            return false;
    }
    return true;
}

struct comp {
    uint16_t off, len;
};

/* The components of p[0..n), at most max; their count or -1. */
static int split(const uint8_t *p, size_t n, struct comp *c, size_t max) {
    size_t k = 0, s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        if (k == max)
            return -1;
        c[k++] = (struct comp){ .off = (uint16_t)s, .len = (uint16_t)(i - s) };
        s = i + 1;
    }
    return (int)k;
}

/* One component: '*' any run of bytes, the rest exactly. */
static bool comp_match(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn) {
    size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;
    while (j < sn) {
        if (i < pn && p[i] == '*') {
            star = i++;
            mark = j;
        } else if (i < pn && p[i] == s[j]) {
            i++;
            j++;
        } else if (star != SIZE_MAX) {
            i = star + 1;
            j = ++mark;
        } else {
            return false;
        }
    }
    while (i < pn && p[i] == '*')
        i++;
    return i == pn;
}

#define COMPS_MAX (LZ_PKT_REF_MAX / 2 + 1)

bool lz_cred_ref_match(const char *pattern, const uint8_t *ref, size_t len) {
    size_t pl = strlen(pattern);
    if (pl > LZ_PKT_REF_MAX || len > LZ_PKT_REF_MAX)
        return false;
    const uint8_t *pp = (const uint8_t *)pattern;
    struct comp pc[COMPS_MAX], rc[COMPS_MAX];
    int m = split(pp, pl, pc, COMPS_MAX), n = split(ref, len, rc, COMPS_MAX);
    if (m < 0 || n < 0)
        return false;
    /* next[j]: pattern components from i + 1 on match ref components
     * from j on; cur[j] the same from i. */
    bool a[COMPS_MAX + 1], b[COMPS_MAX + 1], *next = a, *cur = b;
    for (int j = 0; j <= n; j++)
        next[j] = j == n;
    for (int i = m - 1; i >= 0; i--) {
        bool dstar = pc[i].len == 2 && pp[pc[i].off] == '*' && pp[pc[i].off + 1] == '*';
        bool zero = dstar && i < m - 1; /* a last `**` takes one component at least */
        cur[n] = zero && next[n];
        for (int j = n - 1; j >= 0; j--) {
            if (dstar)
                cur[j] = (zero && next[j]) || next[j + 1] || cur[j + 1];
            else
                cur[j] = next[j + 1] && comp_match(pp + pc[i].off, pc[i].len, ref + rc[j].off, rc[j].len);
        }
        bool *t = next;
        next = cur;
        cur = t;
    }
    return next[0];
}

/* ---- requests ---- */

struct bind {
    char header[LZ_CRED_AFFIX_MAX + 1];
    char ph[LZ_CRED_PLACEHOLDER_MAX + 1];
    size_t ph_len;
    uint8_t *match; /* the declared form with the placeholder (BASIC: the base64 after "Basic ") */
    size_t match_len;
    uint8_t *repl; /* the same with the value: a secret */
    size_t repl_len;
    bool basic;
    char hidden[HIDDEN_MAX][B64_LEN(LZ_CRED_PLACEHOLDER_MAX) + 1];
    unsigned n_hidden;
    char **push_refs;
    size_t n_push_refs;
    bool push_delete;
};

enum state { ST_HEAD, ST_LENGTH, ST_CHUNKED, ST_CLOSED };

enum chunk_state {
    CK_SIZE,    /* hex digits */
    CK_EXT,     /* after the first ';' */
    CK_SIZE_LF, /* CR of the size line seen */
    CK_DATA,    /* left bytes of data to come */
    CK_DATA_CR, /* after the data */
    CK_DATA_LF, /* its CR seen */
    CK_TRAILER, /* at the start of a trailer line (or the last empty one) */
    CK_TR_LINE, /* in a trailer field line */
    CK_TR_LF,   /* its CR seen */
    CK_END_LF,  /* the CR of the empty line seen */
};

enum ext_state { EXT_NAME0, EXT_NAME, EXT_VAL0, EXT_TOKEN, EXT_QUOTED, EXT_ESC, EXT_QUOTE_END };

enum push_state { PUSH_NONE, PUSH_HOLD, PUSH_PASS };

enum verdict { V_OK, V_REF, V_DELETE, V_WHOLE };

static const char *const verdict_why[] = {
    [V_OK] = NULL,
    [V_REF] = "ref not allowed by push_refs",
    [V_DELETE] = "delete not allowed by push_delete",
    [V_WHOLE] = "push refused as a whole",
};

struct lz_credreq {
    char host[256];
    unsigned n_binds;
    struct bind binds[LZ_CRED_BINDS_MAX];
    bool push_policy;       /* a bind has push_refs */
    struct matcher raw;     /* the placeholders in the body as sent */
    struct matcher payload; /* and in a chunked body's payload */

    enum state st;
    uint8_t *hbuf; /* the head being read, LZ_HTTP_HEAD_MAX + 1 */
    size_t hlen;
    uint8_t *scratch; /* a percent-decoded part of a head */
    struct lz_http_head h;
    bool keep_alive; /* of the request whose body is read */
    uint64_t left;   /* bytes of the body (Content-Length) or of the chunk to come */

    enum chunk_state ck;
    enum ext_state ext;
    unsigned digits;
    uint64_t size;
    size_t ext_len;
    uint8_t *tline; /* the trailer line being read, LZ_CRED_TRAILER_MAX */
    size_t tline_len, trailer_len;
    unsigned tfields;

    enum push_state push;
    uint8_t *pkbuf; /* the push's payload up to its list, LZ_PKT_LIST_MAX */
    size_t pk_len, pk_need;
    uint8_t *hold; /* the push's body as sent, held until its list is judged */
    size_t hold_len, hold_cap;
    struct lz_pkt_push *list;
    bool list_valid;
    uint8_t verdict[LZ_PKT_COMMANDS_MAX];
    unsigned lists_in_call;
    bool push_refused;

    struct lz_credreq_counts counts;
    int err;
    char why[LZ_CRED_WHY_MAX];
};

static int refuse(struct lz_credreq *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(struct lz_credreq *s, int err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    sanitize(s->why);
    s->err = err;
    return err;
}

static int nomem(struct lz_credreq *s) { return refuse(s, -ENOMEM, "out of memory"); }

static int out_put(struct lz_credreq *s, struct lz_credout *o, const void *p, size_t n) {
    return put(o, p, n) < 0 ? nomem(s) : 0;
}

static void bind_free(struct bind *b) {
    free(b->match);
    wipe_free(b->repl, b->repl_len);
    for (size_t i = 0; i < b->n_push_refs; i++)
        free(b->push_refs[i]);
    free(b->push_refs);
}

static int bind_make(struct bind *d, const struct lz_cred_bind *b) {
    snprintf(d->header, sizeof d->header, "%s", b->header);
    snprintf(d->ph, sizeof d->ph, "%s", b->placeholder);
    d->ph_len = strlen(d->ph);
    d->basic = b->format == LZ_CRED_BASIC;
    if (d->basic) {
        uint8_t *pair = NULL;
        size_t n = 0;
        if (basic_pair(b, (const uint8_t *)d->ph, d->ph_len, &pair, &n) < 0)
            return -ENOMEM;
        d->match = malloc(B64_LEN(n) + 1);
        if (!d->match) {
            free(pair);
            return -ENOMEM;
        }
        d->match_len = b64(pair, n, b64_std, (char *)d->match);
        free(pair);
        if (basic_pair(b, b->value, b->value_len, &pair, &n) < 0)
            return -ENOMEM;
        d->repl = malloc(B64_LEN(n) + 1);
        if (!d->repl) {
            wipe_free(pair, n);
            return -ENOMEM;
        }
        d->repl_len = b64(pair, n, b64_std, (char *)d->repl);
        wipe_free(pair, n);
    } else {
        const char *pre = b->prefix ? b->prefix : "", *suf = b->suffix ? b->suffix : "";
        size_t pl = strlen(pre), sl = strlen(suf);
        d->match_len = pl + d->ph_len + sl;
        d->repl_len = pl + b->value_len + sl;
        d->match = malloc(d->match_len);
        d->repl = malloc(d->repl_len);
        if (!d->match || !d->repl)
            return -ENOMEM;
        memcpy(d->match, pre, pl);
        memcpy(d->match + pl, d->ph, d->ph_len);
        memcpy(d->match + pl + d->ph_len, suf, sl);
        memcpy(d->repl, pre, pl);
        memcpy(d->repl + pl, b->value, b->value_len);
        memcpy(d->repl + pl + b->value_len, suf, sl);
    }
    for (unsigned a = 0; a < 3; a++)
        for (unsigned k = 0; k < 2; k++) {
            char *h = d->hidden[d->n_hidden];
            if (b64_core((const uint8_t *)d->ph, d->ph_len, a, k ? b64_url : b64_std, h) > 0 &&
                (k == 0 || strcmp(h, d->hidden[d->n_hidden - 1]) != 0))
                d->n_hidden++;
        }
    if (b->n_push_refs) {
        d->push_refs = calloc(b->n_push_refs, sizeof *d->push_refs);
        if (!d->push_refs)
            return -ENOMEM;
        for (size_t i = 0; i < b->n_push_refs; i++) {
            d->push_refs[i] = strdup(b->push_refs[i]);
            if (!d->push_refs[i])
                return -ENOMEM;
            d->n_push_refs = i + 1;
        }
    }
    d->push_delete = b->push_delete;
    return 0;
}

static bool host_name_ok(const char *h) {
    size_t n = strlen(h);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = lower((uint8_t)h[i]);
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

void lz_credreq_free(struct lz_credreq *s) {
    if (!s)
        return;
    for (unsigned i = 0; i < s->n_binds; i++)
        bind_free(&s->binds[i]);
    matcher_clear(&s->raw);
    matcher_clear(&s->payload);
    free(s->hbuf);
    free(s->scratch);
    free(s->tline);
    free(s->pkbuf);
    free(s->hold);
    free(s->list);
    explicit_bzero(s, sizeof *s);
    free(s);
}

int lz_credreq_new(const char *host, const struct lz_cred_bind *binds, size_t n, struct lz_credreq **ret) {
    if (!host || !host_name_ok(host))
        return -EINVAL;
    int r = binds_check(binds, n);
    if (r < 0)
        return r;
    struct lz_credreq *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->hbuf = malloc(LZ_HTTP_HEAD_MAX + 1);
    s->scratch = malloc(LZ_HTTP_HEAD_MAX);
    if (!s->hbuf || !s->scratch)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        s->n_binds = (unsigned)i + 1;
        r = bind_make(&s->binds[i], &binds[i]);
        s->push_policy |= binds[i].n_push_refs > 0;
        if (r == 0)
            r = matcher_add(&s->raw, binds[i].placeholder, strlen(binds[i].placeholder));
        if (r == 0)
            r = matcher_add(&s->payload, binds[i].placeholder, strlen(binds[i].placeholder));
    }
    if (r < 0) {
        lz_credreq_free(s);
        return r;
    }
    matcher_reset(&s->raw);
    matcher_reset(&s->payload);
    s->st = ST_HEAD;
    *ret = s;
    return 0;
}

static bool host_ok(const struct lz_credreq *s, const uint8_t *v, size_t n) {
    size_t hl = strlen(s->host);
    if (n == hl + 4 && memcmp(v + hl, ":443", 4) == 0)
        n = hl;
    if (n != hl)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(v[i]) != lower((uint8_t)s->host[i]))
            return false;
    return true;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* p[0..n) with every %HH decoded, into out; its length. */
static size_t pct_decode(const uint8_t *p, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (p[i] == '%' && i + 2 < n && (hi = hexval(p[i + 1])) >= 0 && (lo = hexval(p[i + 2])) >= 0) {
            out[o++] = (uint8_t)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = p[i];
        }
    }
    return o;
}

/* The bind whose placeholder p[0..n) (a part of a head) holds, as it is,
 * percent-encoded or in base64; or -1. */
static int hidden_in(struct lz_credreq *s, const uint8_t *p, size_t n) {
    for (unsigned k = 0; k < s->n_binds; k++) {
        const struct bind *b = &s->binds[k];
        if (has(p, n, (const uint8_t *)b->ph, b->ph_len))
            return (int)k;
        for (unsigned i = 0; i < b->n_hidden; i++)
            if (has(p, n, (const uint8_t *)b->hidden[i], strlen(b->hidden[i])))
                return (int)k;
    }
    if (!memchr(p, '%', n))
        return -1;
    size_t dn = pct_decode(p, n, s->scratch);
    for (unsigned k = 0; k < s->n_binds; k++)
        if (has(s->scratch, dn, (const uint8_t *)s->binds[k].ph, s->binds[k].ph_len))
            return (int)k;
    return -1;
}

/* Is the value v[0..n) the bind's declared form? The span to replace. */
static bool declared(const struct bind *b, const uint8_t *v, size_t n, size_t *ret_off) {
    size_t off = 0;
    if (b->basic) {
        static const char scheme[] = "basic ";
        if (n < sizeof scheme - 1)
            return false;
        for (size_t i = 0; i < sizeof scheme - 1; i++)
            if (lower(v[i]) != (uint8_t)scheme[i])
                return false;
        off = sizeof scheme - 1;
    }
    if (n - off != b->match_len || memcmp(v + off, b->match, b->match_len) != 0)
        return false;
    *ret_off = off;
    return true;
}

struct swap {
    size_t off, len;
    unsigned field, bind;
};

/* Is this a push: the path before '?', percent-decoded, holds
 * git-receive-pack (ASCII case ignored)? Wide on purpose: a server may
 * route a path git would not send. */
static bool receive_pack(struct lz_credreq *s, const uint8_t *b, const struct lz_http_head *h) {
    static const char name[] = "git-receive-pack";
    const uint8_t *p = b + h->path.off, *q = memchr(p, '?', h->path.len);
    size_t n = pct_decode(p, q ? (size_t)(q - p) : h->path.len, s->scratch);
    for (size_t i = 0; i < n; i++)
        s->scratch[i] = lower(s->scratch[i]);
    return has(s->scratch, n, (const uint8_t *)name, sizeof name - 1);
}

static int body_end(struct lz_credreq *s) {
    if (s->push == PUSH_HOLD)
        return refuse(s, -EACCES, "push body ends before its command list");
    s->push = PUSH_NONE;
    s->st = s->keep_alive ? ST_HEAD : ST_CLOSED;
    return 0;
}

/* A whole head in hbuf (s->h): checked, rewritten, passed on. */
static int head_done(struct lz_credreq *s, struct lz_credout *out) {
    const struct lz_http_head *h = &s->h;
    const uint8_t *b = s->hbuf;
    if (!host_ok(s, b + h->host.off, h->host.len))
        return refuse(s, -EACCES, "Host %.*s is not %s", (int)h->host.len, (const char *)b + h->host.off, s->host);

    struct swap sw[LZ_CRED_BINDS_MAX];
    unsigned nsw = 0;
    for (unsigned k = 0; k < s->n_binds; k++) {
        const struct bind *bd = &s->binds[k];
        for (int i = lz_http_field_find(h, b, bd->header, 0); i >= 0;
             i = lz_http_field_find(h, b, bd->header, (unsigned)i + 1)) {
            struct lz_http_span v = h->fields[i].value;
            size_t off;
            if (!declared(bd, b + v.off, v.len, &off))
                continue;
            if (lz_http_field_count(h, b, bd->header) > 1)
                return refuse(s, -EACCES, "more than one %s header, one with the credential placeholder", bd->header);
            for (unsigned j = 0; j < nsw; j++)
                if (sw[j].field == (unsigned)i)
                    return refuse(s, -EACCES, "a %s header of two credentials", bd->header);
            sw[nsw++] = (struct swap){ .off = v.off + off, .len = v.len - off, .field = (unsigned)i, .bind = k };
        }
    }
    for (unsigned i = 1; i < nsw; i++)
        for (unsigned j = i; j > 0 && sw[j - 1].off > sw[j].off; j--) {
            struct swap t = sw[j];
            sw[j] = sw[j - 1];
            sw[j - 1] = t;
        }
    /* The placeholder anywhere but in the spans swapped. */
    size_t pos = 0;
    for (unsigned j = 0; j <= nsw; j++) {
        size_t end = j < nsw ? sw[j].off : h->used;
        int k = hidden_in(s, b + pos, end - pos);
        if (k >= 0)
            return refuse(s, -EACCES, "credential placeholder outside its %s header", s->binds[k].header);
        if (j < nsw)
            pos = sw[j].off + sw[j].len;
    }

    bool push = s->push_policy && receive_pack(s, b, h);
    if (push) {
        if (h->method.len != 4 || memcmp(b + h->method.off, "POST", 4) != 0)
            return refuse(s, -EACCES, "git-receive-pack request other than POST");
        if (h->framing == LZ_HTTP_BODY_NONE || (h->framing == LZ_HTTP_BODY_LENGTH && h->content_length == 0))
            return refuse(s, -EACCES, "push without a body");
        if (lz_http_field_find(h, b, "content-encoding", 0) >= 0)
            return refuse(s, -EACCES, "push with a Content-Encoding (its commands could not be read)");
        if (s->lists_in_call)
            return refuse(s, -EACCES, "a second push in the read that ended the first");
    }

    pos = 0;
    for (unsigned j = 0; j < nsw; j++) {
        const struct bind *bd = &s->binds[sw[j].bind];
        if (out_put(s, out, b + pos, sw[j].off - pos) < 0 || out_put(s, out, bd->repl, bd->repl_len) < 0)
            return s->err;
        pos = sw[j].off + sw[j].len;
    }
    if (out_put(s, out, b + pos, h->used - pos) < 0)
        return s->err;
    s->counts.requests++;
    s->counts.swaps += nsw;

    s->keep_alive = h->keep_alive;
    matcher_reset(&s->raw);
    matcher_reset(&s->payload);
    if (push) {
        if (!s->pkbuf && !(s->pkbuf = malloc(LZ_PKT_LIST_MAX)))
            return nomem(s);
        if (!s->list && !(s->list = malloc(sizeof *s->list)))
            return nomem(s);
        s->push = PUSH_HOLD;
        s->pk_len = 0;
        s->pk_need = 1;
        s->hold_len = 0;
        s->list_valid = false;
    }
    switch (h->framing) {
    case LZ_HTTP_BODY_LENGTH:
        if (h->content_length > 0) {
            s->st = ST_LENGTH;
            s->left = h->content_length;
            return 0;
        }
        return body_end(s);
    case LZ_HTTP_BODY_CHUNKED:
        s->st = ST_CHUNKED;
        s->ck = CK_SIZE;
        s->digits = 0;
        s->size = 0;
        s->trailer_len = 0;
        s->tfields = 0;
        return 0;
    case LZ_HTTP_BODY_NONE: break;
    }
    return body_end(s);
}

static int head_bytes(struct lz_credreq *s, const uint8_t *in, size_t len, struct lz_credout *out, size_t *ret_used) {
    size_t room = LZ_HTTP_HEAD_MAX + 1 - s->hlen, k = len < room ? len : room;
    memcpy(s->hbuf + s->hlen, in, k);
    s->hlen += k;
    *ret_used = k;
    /* A head ends in LF: parse when one came (or at the bound), not at
     * every byte of a client that sends one at a time. */
    if (!memchr(in, '\n', k) && s->hlen <= LZ_HTTP_HEAD_MAX)
        return 0;
    size_t need = 0;
    enum lz_http_reason why = LZ_HTTP_OK;
    int r = lz_http_head_parse(s->hbuf, s->hlen, &s->h, &need, &why);
    if (r == -EAGAIN)
        return 0;
    if (r < 0)
        return refuse(s, -EBADMSG, "%s", lz_http_reason_str(why));
    /* The head's last LF is in these k bytes (an earlier one would have
     * been parsed): what follows it is given back, the body's. */
    size_t extra = s->hlen - s->h.used;
    if (extra >= k)
        return refuse(s, -EBADMSG, "request head out of order");
    *ret_used = k - extra;
    s->hlen = 0;
    return head_done(s, out);
}

/* The push's list in pkbuf: every command judged; all allowed: the held
 * bytes go out. */
static int push_judge(struct lz_credreq *s, struct lz_credout *out) {
    const struct lz_pkt_push *p = s->list;
    s->list_valid = true;
    s->lists_in_call++;
    s->counts.pushes++;
    int bad = -1;
    for (unsigned i = 0; i < p->n_commands; i++) {
        const struct lz_pkt_command *c = &p->commands[i];
        bool match = false, del = false;
        for (unsigned k = 0; k < s->n_binds; k++)
            for (size_t j = 0; j < s->binds[k].n_push_refs; j++)
                if (lz_cred_ref_match(s->binds[k].push_refs[j], s->pkbuf + c->ref.off, c->ref.len)) {
                    match = true;
                    del |= s->binds[k].push_delete;
                }
        s->verdict[i] = !match ? V_REF : c->kind == LZ_PKT_DELETE && !del ? V_DELETE : V_OK;
        if (s->verdict[i] != V_OK && bad < 0)
            bad = (int)i;
    }
    if (bad >= 0) {
        for (unsigned i = 0; i < p->n_commands; i++)
            if (s->verdict[i] == V_OK)
                s->verdict[i] = V_WHOLE;
        s->push_refused = true;
        const struct lz_pkt_command *c = &p->commands[bad];
        return refuse(s, -EACCES, "push to %.*s: %s", (int)c->ref.len, (const char *)s->pkbuf + c->ref.off,
                      verdict_why[s->verdict[bad]]);
    }
    s->push = PUSH_PASS;
    int r = out_put(s, out, s->hold, s->hold_len);
    s->hold_len = 0;
    return r;
}

static int push_payload(struct lz_credreq *s, const uint8_t *p, size_t n, struct lz_credout *out) {
    size_t room = LZ_PKT_LIST_MAX - s->pk_len, k = n < room ? n : room;
    memcpy(s->pkbuf + s->pk_len, p, k);
    s->pk_len += k;
    if (s->pk_len < s->pk_need)
        return 0;
    size_t need = 0;
    enum lz_pkt_reason why = LZ_PKT_OK;
    int r = lz_pkt_push_parse(s->pkbuf, s->pk_len, s->list, &need, &why);
    if (r == -EAGAIN) {
        if (need > LZ_PKT_LIST_MAX)
            return refuse(s, -EACCES, "push command list too long");
        s->pk_need = need;
        return 0;
    }
    if (r < 0)
        return refuse(s, -EACCES, "push command list: %s", lz_pkt_reason_str(why));
    return push_judge(s, out);
}

/* Body bytes as sent: scanned, then passed on or held. */
static int body_raw(struct lz_credreq *s, const uint8_t *p, size_t n, struct lz_credout *out) {
    if (n == 0)
        return 0;
    if (matcher_feed(&s->raw, p, n) >= 0)
        return refuse(s, -EACCES, "credential placeholder in the request body");
    if (s->push != PUSH_HOLD)
        return out_put(s, out, p, n);
    if (n > LZ_CRED_PUSH_HOLD_MAX - s->hold_len)
        return refuse(s, -EACCES, "push command list spread over more than %d bytes", LZ_CRED_PUSH_HOLD_MAX);
    if (s->hold_len + n > s->hold_cap) {
        size_t c = s->hold_cap ? s->hold_cap : 16384;
        while (c < s->hold_len + n)
            c *= 2;
        if (c > LZ_CRED_PUSH_HOLD_MAX)
            c = LZ_CRED_PUSH_HOLD_MAX;
        uint8_t *q = realloc(s->hold, c);
        if (!q)
            return nomem(s);
        s->hold = q;
        s->hold_cap = c;
    }
    memcpy(s->hold + s->hold_len, p, n);
    s->hold_len += n;
    return 0;
}

/* Payload bytes (chunked: without the framing; else the body). */
static int body_data(struct lz_credreq *s, const uint8_t *p, size_t n, struct lz_credout *out) {
    int r = body_raw(s, p, n, out);
    if (r < 0)
        return r;
    if (s->st == ST_CHUNKED && matcher_feed(&s->payload, p, n) >= 0)
        return refuse(s, -EACCES, "credential placeholder in the request body");
    if (s->push == PUSH_HOLD)
        return push_payload(s, p, n, out);
    return 0;
}

static const char *const trailer_forbidden[] = { "authorization", "proxy-authorization", "cookie" };

static int trailer_line(struct lz_credreq *s) {
    const uint8_t *p = s->tline;
    size_t n = s->tline_len, i = 0;
    if (++s->tfields > LZ_HTTP_FIELDS_MAX)
        return refuse(s, -EBADMSG, "more than %d trailer fields", LZ_HTTP_FIELDS_MAX);
    while (i < n && tchar(p[i]))
        i++;
    if (i == 0 || i == n || p[i] != ':')
        return refuse(s, -EBADMSG, "malformed trailer field");
    for (size_t j = i + 1; j < n; j++)
        if ((p[j] < 0x20 && p[j] != '\t') || p[j] == 0x7f)
            return refuse(s, -EBADMSG, "control character in a trailer field");
    bool bad = framing_field(p, i);
    for (size_t k = 0; !bad && k < sizeof trailer_forbidden / sizeof trailer_forbidden[0]; k++)
        bad = eq_alias(p, i, trailer_forbidden[k]);
    for (unsigned k = 0; !bad && k < s->n_binds; k++)
        bad = eq_alias(p, i, s->binds[k].header);
    if (bad)
        return refuse(s, -EBADMSG, "trailer field %.*s not allowed", (int)i, (const char *)p);
    return 0;
}

/* One byte of a chunk extension (RFC 9112 §7.1.1, without BWS). */
static int ext_byte(struct lz_credreq *s, uint8_t c) {
    if (++s->ext_len > LZ_CRED_CHUNK_EXT_MAX)
        return refuse(s, -EBADMSG, "chunk extensions longer than %d bytes", LZ_CRED_CHUNK_EXT_MAX);
    switch (s->ext) {
    case EXT_NAME0:
        if (!tchar(c))
            break;
        s->ext = EXT_NAME;
        return 0;
    case EXT_NAME:
        if (c == ';')
            s->ext = EXT_NAME0;
        else if (c == '=')
            s->ext = EXT_VAL0;
        else if (!tchar(c))
            break;
        return 0;
    case EXT_VAL0:
        if (c == '"')
            s->ext = EXT_QUOTED;
        else if (tchar(c))
            s->ext = EXT_TOKEN;
        else
            break;
        return 0;
    case EXT_TOKEN:
        if (c == ';')
            s->ext = EXT_NAME0;
        else if (!tchar(c))
            break;
        return 0;
    case EXT_QUOTED:
        if (c == '"')
            s->ext = EXT_QUOTE_END;
        else if (c == '\\')
            s->ext = EXT_ESC;
        else if (!vis(c) && c != ' ' && c != '\t')
            break;
        return 0;
    case EXT_ESC:
        if (!vis(c) && c != ' ' && c != '\t')
            break;
        s->ext = EXT_QUOTED;
        return 0;
    case EXT_QUOTE_END:
        if (c != ';')
            break;
        s->ext = EXT_NAME0;
        return 0;
    }
    return refuse(s, -EBADMSG, "malformed chunk extension");
}

/* One framing byte of a chunked body: 0, 1 at the body's end, or a
 * refusal. */
static int frame_byte(struct lz_credreq *s, uint8_t c) {
    int v;
    switch (s->ck) {
    case CK_SIZE:
        if ((v = hexval(c)) >= 0) {
            if (s->digits == 16)
                return refuse(s, -EBADMSG, "chunk size longer than 16 hex digits");
            s->size = s->size << 4 | (uint64_t)v;
            s->digits++;
            return 0;
        }
        if (s->digits && c == ';') {
            s->ck = CK_EXT;
            s->ext = EXT_NAME0;
            s->ext_len = 0;
            return 0;
        }
        if (s->digits && c == '\r') {
            s->ck = CK_SIZE_LF;
            return 0;
        }
        return refuse(s, -EBADMSG, "malformed chunk size");
    case CK_EXT:
        if (c != '\r')
            return ext_byte(s, c);
        if (s->ext != EXT_NAME && s->ext != EXT_TOKEN && s->ext != EXT_QUOTE_END)
            return refuse(s, -EBADMSG, "malformed chunk extension");
        s->ck = CK_SIZE_LF;
        return 0;
    case CK_SIZE_LF:
        if (c != '\n')
            return refuse(s, -EBADMSG, "chunk size line not ended by CRLF");
        if (s->size == 0) {
            s->ck = CK_TRAILER;
            return 0;
        }
        s->left = s->size;
        s->ck = CK_DATA;
        return 0;
    case CK_DATA: return refuse(s, -EBADMSG, "chunk data out of order"); /* the caller passes data on itself */
    case CK_DATA_CR:
        if (c != '\r')
            return refuse(s, -EBADMSG, "chunk data not followed by CRLF");
        s->ck = CK_DATA_LF;
        return 0;
    case CK_DATA_LF:
        if (c != '\n')
            return refuse(s, -EBADMSG, "chunk data not followed by CRLF");
        s->ck = CK_SIZE;
        s->digits = 0;
        s->size = 0;
        return 0;
    case CK_TRAILER:
    case CK_TR_LINE:
    case CK_TR_LF:
    case CK_END_LF: break;
    }
    if (++s->trailer_len > LZ_CRED_TRAILER_MAX)
        return refuse(s, -EBADMSG, "chunked trailer longer than %d bytes", LZ_CRED_TRAILER_MAX);
    switch (s->ck) {
    case CK_TRAILER:
        if (c == '\r') {
            s->ck = CK_END_LF;
            return 0;
        }
        if (c == ' ' || c == '\t')
            return refuse(s, -EBADMSG, "trailer line starting with whitespace");
        if (!s->tline && !(s->tline = malloc(LZ_CRED_TRAILER_MAX)))
            return nomem(s);
        s->tline_len = 0;
        s->ck = CK_TR_LINE;
        /* fall through */
    case CK_TR_LINE:
        if (c == '\r') {
            s->ck = CK_TR_LF;
            return 0;
        }
        if (c == '\n')
            return refuse(s, -EBADMSG, "line ending in LF without CR in the trailer");
        s->tline[s->tline_len++] = c;
        return 0;
    case CK_TR_LF:
        if (c != '\n')
            return refuse(s, -EBADMSG, "CR not followed by LF in the trailer");
        s->ck = CK_TRAILER;
        return trailer_line(s);
    case CK_END_LF:
        if (c != '\n')
            return refuse(s, -EBADMSG, "CR not followed by LF in the trailer");
        return 1;
    case CK_SIZE:
    case CK_EXT:
    case CK_SIZE_LF:
    case CK_DATA:
    case CK_DATA_CR:
    case CK_DATA_LF: break;
    }
    return refuse(s, -EBADMSG, "chunked body out of order");
}

static int chunked_bytes(struct lz_credreq *s, const uint8_t *in, size_t len, struct lz_credout *out,
                         size_t *ret_used) {
    size_t i = 0, fs = 0; /* framing bytes in[fs..i) not yet passed on */
    int r;
    while (i < len) {
        if (s->ck == CK_DATA) {
            if ((r = body_raw(s, in + fs, i - fs, out)) < 0)
                return r;
            size_t k = (uint64_t)(len - i) < s->left ? len - i : (size_t)s->left;
            if ((r = body_data(s, in + i, k, out)) < 0)
                return r;
            i += k;
            fs = i;
            s->left -= k;
            if (s->left == 0)
                s->ck = CK_DATA_CR;
            continue;
        }
        r = frame_byte(s, in[i++]);
        if (r < 0)
            return r;
        if (r == 1) {
            *ret_used = i;
            if ((r = body_raw(s, in + fs, i - fs, out)) < 0)
                return r;
            return body_end(s);
        }
    }
    *ret_used = len;
    return body_raw(s, in + fs, i - fs, out);
}

int lz_credreq_feed(struct lz_credreq *s, const uint8_t *in, size_t len, struct lz_credout *out, char *why) {
    size_t start = out->len;
    struct lz_credreq_counts counts = s->counts;
    int r = s->err;
    if (r == 0) {
        s->lists_in_call = 0;
        s->list_valid = false;
    }
    while (r == 0 && len > 0) {
        size_t used = len;
        switch (s->st) {
        case ST_HEAD: r = head_bytes(s, in, len, out, &used); break;
        case ST_LENGTH: {
            size_t k = (uint64_t)len < s->left ? len : (size_t)s->left;
            used = k;
            r = body_data(s, in, k, out);
            s->left -= k;
            if (r == 0 && s->left == 0)
                r = body_end(s);
            break;
        }
        case ST_CHUNKED: r = chunked_bytes(s, in, len, out, &used); break;
        case ST_CLOSED: r = refuse(s, -EBADMSG, "bytes after a request with Connection: close"); break;
        }
        in += used;
        len -= used;
    }
    if (r < 0) {
        /* Nothing of this call goes out: its requests were not passed on. */
        out->len = start;
        s->counts.requests = counts.requests;
        s->counts.swaps = counts.swaps;
        if (why)
            snprintf(why, LZ_CRED_WHY_MAX, "%s", s->why);
    }
    return r;
}

int lz_credreq_end(struct lz_credreq *s, char *why) {
    int r = s->err;
    if (r == 0 && s->st == ST_HEAD && s->hlen > 0)
        r = refuse(s, -EBADMSG, "request head cut short");
    else if (r == 0 && (s->st == ST_LENGTH || s->st == ST_CHUNKED))
        r = refuse(s, -EBADMSG, "request body cut short");
    if (r < 0 && why)
        snprintf(why, LZ_CRED_WHY_MAX, "%s", s->why);
    return r;
}

void lz_credreq_counts(const struct lz_credreq *s, struct lz_credreq_counts *ret) { *ret = s->counts; }

unsigned lz_credreq_push_n(const struct lz_credreq *s) { return s->list_valid ? s->list->n_commands : 0; }

int lz_credreq_push_get(const struct lz_credreq *s, unsigned i, struct lz_cred_push_cmd *ret) {
    if (i >= lz_credreq_push_n(s))
        return -ENOENT;
    const struct lz_pkt_command *c = &s->list->commands[i];
    *ret = (struct lz_cred_push_cmd){
        .kind = c->kind,
        .ref = s->pkbuf + c->ref.off,
        .ref_len = c->ref.len,
        .old_id = s->pkbuf + c->old_id.off,
        .new_id = s->pkbuf + c->new_id.off,
        .id_len = c->old_id.len,
        .allowed = s->verdict[i] == V_OK,
        .why = verdict_why[s->verdict[i]],
    };
    return 0;
}

/* An answer with a body: the status line and the head, then the body. */
static int answer(const char *status, const char *type, const uint8_t *body, size_t n, struct lz_credout *out) {
    char head[256];
    snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
             status, type, n);
    size_t start = out->len;
    if (puts_(out, head) < 0 || put(out, body, n) < 0) {
        out->len = start;
        return -ENOMEM;
    }
    return 0;
}

int lz_credreq_push_report(const struct lz_credreq *s, struct lz_credout *out) {
    if (!s->push_refused || !s->list_valid)
        return -ENOENT;
    const struct lz_pkt_push *p = s->list;
    const uint8_t *b = s->pkbuf;
    bool report = lz_pkt_has_cap(p, b, "report-status") || lz_pkt_has_cap(p, b, "report-status-v2");
    bool band = lz_pkt_has_cap(p, b, "side-band-64k");
    struct lz_credout rep = { 0 }, body = { 0 };
    int r = 0;
    if (report) {
        static const char unpack[] = "unpack ok\n";
        r = pkt(&rep, unpack, sizeof unpack - 1);
        for (unsigned i = 0; r == 0 && i < p->n_commands; i++) {
            /* receive-pack's "ng REF MSG": send-pack shows MSG in
             * `! [remote rejected] REF (MSG)`. */
            char line[LZ_PKT_REF_MAX + 128];
            const struct lz_pkt_span *ref = &p->commands[i].ref;
            int n = snprintf(line, sizeof line, "ng %.*s lazaret: %s\n", (int)ref->len, (const char *)b + ref->off,
                             verdict_why[s->verdict[i]]);
            r = pkt(&rep, line, (size_t)n);
        }
        if (r == 0)
            r = put(&rep, "0000", LZ_PKT_HDR);
    }
    if (r == 0 && band) {
        /* git's send_sideband: band 1, at most BAND_MAX bytes a packet;
         * receive-pack ends with a flush-pkt of its own. */
        for (size_t off = 0; r == 0 && off < rep.len; off += BAND_MAX) {
            size_t n = rep.len - off < BAND_MAX ? rep.len - off : BAND_MAX;
            r = pkt_hdr(&body, n + 1);
            if (r == 0)
                r = put(&body, "\1", 1);
            if (r == 0)
                r = put(&body, rep.p + off, n);
        }
        if (r == 0)
            r = put(&body, "0000", LZ_PKT_HDR);
    } else if (r == 0) {
        r = put(&body, rep.p, rep.len);
    }
    if (r == 0)
        r = answer("200 OK", "application/x-git-receive-pack-result", body.p, body.len, out);
    free(rep.p);
    free(body.p);
    return r;
}

int lz_cred_forbidden(const char *why, struct lz_credout *out) {
    char body[LZ_CRED_WHY_MAX + 32];
    int n = snprintf(body, sizeof body, "lazaret: refused: %.*s", LZ_CRED_WHY_MAX - 1, why ? why : "");
    sanitize(body);
    if (n < 0 || (size_t)n >= sizeof body - 1)
        n = (int)strlen(body);
    body[n++] = '\n';
    return answer("403 Forbidden", "text/plain", (const uint8_t *)body, (size_t)n, out);
}

/* ---- responses ---- */

struct lz_credscan {
    struct matcher m;
    uint8_t *held; /* the end of the stream that begins a needle; longest needle - 1 */
    size_t held_len, held_cap;
    int err; /* -EACCES (a needle went by) or -ENOMEM: final */
};

void lz_credscan_free(struct lz_credscan *s) {
    if (!s)
        return;
    matcher_clear(&s->m);
    wipe_free(s->held, s->held_cap);
    explicit_bzero(s, sizeof *s);
    free(s);
}

/* The needles of a bind: its value, for BASIC base64(username:value), the
 * value's base64 at each alignment when long enough. */
static int scan_needles(struct matcher *m, const struct lz_cred_bind *b) {
    int r = matcher_add(m, b->value, b->value_len);
    char *enc = malloc(B64_LEN(LZ_CRED_AFFIX_MAX + 1 + LZ_CRED_VALUE_MAX) + 1);
    if (!enc)
        return -ENOMEM;
    if (r == 0 && b->format == LZ_CRED_BASIC) {
        uint8_t *pair = NULL;
        size_t n = 0;
        r = basic_pair(b, b->value, b->value_len, &pair, &n);
        if (r == 0) {
            size_t el = b64(pair, n, b64_std, enc);
            r = matcher_add(m, enc, el);
            explicit_bzero(enc, el);
            wipe_free(pair, n);
        }
    }
    for (unsigned a = 0; r == 0 && a < 3; a++)
        for (unsigned k = 0; r == 0 && k < 2; k++) {
            size_t el = b64_core(b->value, b->value_len, a, k ? b64_url : b64_std, enc);
            if (el >= B64_LEN(CORE_MIN))
                r = matcher_add(m, enc, el);
            explicit_bzero(enc, el);
        }
    free(enc);
    return r;
}

int lz_credscan_new(const struct lz_cred_bind *binds, size_t n, struct lz_credscan **ret) {
    int r = binds_check(binds, n);
    if (r < 0)
        return r;
    struct lz_credscan *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = scan_needles(&s->m, &binds[i]);
    if (r == 0) {
        s->held_cap = matcher_longest(&s->m);
        s->held = malloc(s->held_cap);
        if (!s->held)
            r = -ENOMEM;
    }
    if (r < 0) {
        lz_credscan_free(s);
        return r;
    }
    matcher_reset(&s->m);
    *ret = s;
    return 0;
}

int lz_credscan_feed(struct lz_credscan *s, const uint8_t *in, size_t len, struct lz_credout *out) {
    if (s->err)
        return s->err;
    if (matcher_feed(&s->m, in, len) >= 0)
        return s->err = -EACCES;
    /* The stream not yet sent is held + in; all but its last `hold`
     * bytes go out (hold <= held_len + len: a needle's match grows by one
     * a byte). */
    size_t hold = matcher_hold(&s->m), total = s->held_len + len, emit = total - hold, start = out->len;
    if (emit <= s->held_len) {
        if (put(out, s->held, emit) < 0)
            return s->err = -ENOMEM;
        memmove(s->held, s->held + emit, s->held_len - emit);
        memcpy(s->held + s->held_len - emit, in, len);
    } else {
        if (put(out, s->held, s->held_len) < 0 || put(out, in, emit - s->held_len) < 0) {
            out->len = start;
            return s->err = -ENOMEM;
        }
        memcpy(s->held, in + (emit - s->held_len), hold);
    }
    s->held_len = hold;
    return 0;
}

int lz_credscan_end(struct lz_credscan *s, struct lz_credout *out) {
    if (s->err)
        return s->err;
    if (put(out, s->held, s->held_len) < 0)
        return s->err = -ENOMEM;
    explicit_bzero(s->held, s->held_len);
    s->held_len = 0;
    matcher_reset(&s->m);
    return 0;
}

size_t lz_credscan_held(const struct lz_credscan *s) { return s->held_len; }
