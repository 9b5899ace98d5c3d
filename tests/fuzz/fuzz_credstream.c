/* libFuzzer target: the credential streams (credstream.c). The first two
 * bytes choose the binds (a Bearer template, a Basic login, a header of
 * the value alone, push policies) and how the rest is cut into feeds; the
 * rest is what the sandbox sends on a credential host's connection (the
 * corpus holds requests of every kind, with the placeholders in and out
 * of place, chunked and pipelined, a captured push). Checked, whatever
 * the bytes:
 *   - the real value goes out only where a placeholder was swapped: as
 *     many values in what went out as swaps counted, no placeholder at
 *     all; what went out, the values put back to placeholders, is the
 *     input byte for byte (every other byte kept as sent);
 *   - the same answer, and on success the same bytes, fed whole and fed
 *     in cuts; a refused call appends nothing; a call appends at most its
 *     input, a released push and what the swaps add;
 *   - a refused push's report is an HTTP answer whose Content-Length is
 *     its body, made of pkt-lines (in band 1 with side-band-64k);
 *   - the response scanner, on the same bytes: refuses when they hold
 *     the value or its Basic base64, never lets either out, and passes
 *     everything else on unchanged;
 *   - the ref glob against a plain recursive one. */
#include "credstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PH "lzph_0123456789abcdef0123456789abcdef"
#define PH2 "lzph_fedcba9876543210fedcba9876543210"
#define VAL "ghp_REALsecret0123456789ABCDEFGHIJKLMNOPQ"
#define VAL2 "s3cr3t-git-token-value-XYZ-0987654321"
#define B64_PH2 "eC1hY2Nlc3MtdG9rZW46bHpwaF9mZWRjYmE5ODc2NTQzMjEwZmVkY2JhOTg3NjU0MzIxMA=="
#define B64_VAL2 "eC1hY2Nlc3MtdG9rZW46czNjcjN0LWdpdC10b2tlbi12YWx1ZS1YWVotMDk4NzY1NDMyMQ=="

static const char *const refs_agent[] = { "refs/heads/agent/*", "refs/tags/**" };

static size_t count(const uint8_t *hay, size_t n, const char *needle) {
    size_t m = strlen(needle), c = 0;
    if (m == 0 || n < m)
        return 0;
    for (const uint8_t *p = hay; (p = memmem(p, n - (size_t)(p - hay), needle, m)); p++)
        c++;
    return c;
}

/* The binds a config byte chooses. */
static size_t binds(uint8_t cfg, struct lz_cred_bind *b) {
    const struct lz_cred_bind bearer = {
        .header = "Authorization",
        .format = LZ_CRED_TEMPLATE,
        .prefix = "Bearer ",
        .placeholder = PH,
        .value = (const uint8_t *)VAL,
        .value_len = sizeof VAL - 1,
    };
    const struct lz_cred_bind key = {
        .header = "x-api-key",
        .format = LZ_CRED_TEMPLATE,
        .placeholder = PH,
        .value = (const uint8_t *)VAL,
        .value_len = sizeof VAL - 1,
    };
    struct lz_cred_bind basic = {
        .header = "authorization",
        .format = LZ_CRED_BASIC,
        .username = "x-access-token",
        .placeholder = PH2,
        .value = (const uint8_t *)VAL2,
        .value_len = sizeof VAL2 - 1,
    };
    if (cfg & 4) {
        basic.push_refs = refs_agent;
        basic.n_push_refs = 2;
        basic.push_delete = cfg & 8;
    }
    switch (cfg & 3) {
    case 0: b[0] = bearer; return 1;
    case 1: b[0] = basic; return 1;
    case 2:
        b[0] = bearer;
        b[1] = basic;
        return 2;
    default:
        b[0] = key;
        b[1] = basic;
        return 2;
    }
}

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct result {
    int r;
    char why[LZ_CRED_WHY_MAX];
    struct lz_credout sent; /* the output of the calls that succeeded */
    struct lz_credreq_counts counts;
    struct lz_credout report; /* a refused push's answer */
};

static void append(struct lz_credout *o, const uint8_t *p, size_t n) {
    if (!n)
        return;
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2;
        o->p = realloc(o->p, o->cap);
        if (!o->p)
            abort();
    }
    memcpy(o->p + o->len, p, n);
    o->len += n;
}

/* in fed to a new state: whole (seed 0) or in cuts from seed. */
static void feed(const struct lz_cred_bind *b, size_t nb, const uint8_t *in, size_t n, uint64_t seed,
                 struct result *x) {
    struct lz_credreq *s;
    if (lz_credreq_new("api.example.com", b, nb, &s) != 0)
        __builtin_trap();
    struct lz_credout o = { 0 };
    size_t off = 0;
    x->r = 0;
    while (off < n) {
        size_t k = n - off;
        if (seed) {
            uint64_t v = rnd(&seed);
            k = v % 4 == 0 ? 1 : 1 + (size_t)(v >> 8) % (v % 4 == 1 ? 8 : 600);
            if (k > n - off)
                k = n - off;
        }
        o.len = 0;
        x->r = lz_credreq_feed(s, in + off, k, &o, x->why);
        if (x->r < 0) {
            if (o.len != 0 || (x->r != -EBADMSG && x->r != -EACCES) || !x->why[0] || strlen(x->why) >= LZ_CRED_WHY_MAX)
                __builtin_trap();
            for (const char *c = x->why; *c; c++)
                if (*c < 0x20 || *c > 0x7e)
                    __builtin_trap();
            break;
        }
        /* At most the input, a released push, what swaps add. */
        if (o.len > k + LZ_CRED_PUSH_HOLD_MAX + (k / 16 + 1) * 64)
            __builtin_trap();
        append(&x->sent, o.p, o.len);
        off += k;
    }
    if (x->r == 0)
        x->r = lz_credreq_end(s, x->why);
    lz_credreq_counts(s, &x->counts);
    if (x->r == -EACCES && lz_credreq_push_report(s, &x->report) != 0)
        x->report.len = 0;
    lz_credreq_free(s);
    free(o.p);
}

/* what went out with every value put back to its placeholder form. */
static void unswap(const struct lz_credout *o, struct lz_credout *ret) {
    static const char *const from[] = { VAL, B64_VAL2 }, *const to[] = { PH, B64_PH2 };
    size_t i = 0;
    while (i < o->len) {
        bool done = false;
        for (int k = 0; k < 2 && !done; k++) {
            size_t l = strlen(from[k]);
            if (o->len - i >= l && memcmp(o->p + i, from[k], l) == 0) {
                append(ret, (const uint8_t *)to[k], strlen(to[k]));
                i += l;
                done = true;
            }
        }
        if (!done)
            append(ret, o->p + i++, 1);
    }
}

/* A push's answer: its head, then pkt-lines of its length. */
static void check_report(const struct lz_credout *rep) {
    const uint8_t *e = memmem(rep->p, rep->len, "\r\n\r\n", 4);
    if (!e)
        __builtin_trap();
    size_t hl = (size_t)(e + 4 - rep->p), bl = rep->len - hl, cl = 0;
    const uint8_t *c = memmem(rep->p, hl, "\r\nContent-Length: ", 18);
    if (!c || memcmp(rep->p, "HTTP/1.1 200 OK\r\n", 17) != 0)
        __builtin_trap();
    for (c += 18; *c >= '0' && *c <= '9'; c++)
        cl = cl * 10 + (size_t)(*c - '0');
    if (cl != bl)
        __builtin_trap();
    const uint8_t *b = e + 4;
    for (size_t off = 0; off < bl;) {
        unsigned len;
        if (bl - off < 4 || sscanf((const char *)b + off, "%4x", &len) != 1 || (len != 0 && len < 5) || len > 65520 ||
            len > bl - off)
            __builtin_trap();
        off += len ? len : 4;
    }
}

/* The ref glob, the plain way: component by component, recursively. */
static bool comp_naive(const char *p, size_t pn, const uint8_t *s, size_t sn) {
    if (pn == 0)
        return sn == 0;
    if (*p == '*')
        return comp_naive(p + 1, pn - 1, s, sn) || (sn > 0 && comp_naive(p, pn, s + 1, sn - 1));
    return sn > 0 && (uint8_t)*p == *s && comp_naive(p + 1, pn - 1, s + 1, sn - 1);
}
/* p: the pattern's components from here; r: the ref's (at least one,
 * maybe empty). */
static bool glob_naive(const char *p, const uint8_t *r, size_t rn) {
    const char *pe = strchr(p, '/');
    size_t pl = pe ? (size_t)(pe - p) : strlen(p);
    const uint8_t *re = memchr(r, '/', rn);
    size_t rl = re ? (size_t)(re - r) : rn;
    if (pl == 2 && p[0] == '*' && p[1] == '*') {
        if (!pe)
            return true; /* the last: the one or more components left */
        /* none, or this one and on */
        return glob_naive(pe + 1, r, rn) || (re && glob_naive(p, re + 1, rn - rl - 1));
    }
    if (!comp_naive(p, pl, r, rl))
        return false;
    if (!pe || !re)
        return !pe && !re;
    return glob_naive(pe + 1, re + 1, rn - rl - 1);
}

static void check_glob(const uint8_t *d, size_t n) {
    /* "pattern\0ref": short ones (the plain way is exponential). */
    const uint8_t *z = memchr(d, 0, n);
    if (!z || (size_t)(z - d) > 24 || n - (size_t)(z - d) - 1 > 40)
        return;
    char pat[32];
    memcpy(pat, d, (size_t)(z - d));
    pat[z - d] = '\0';
    const uint8_t *ref = z + 1;
    size_t rn = n - (size_t)(z - d) - 1;
    size_t stars = 0;
    for (const char *c = pat; *c; c++)
        stars += *c == '*';
    if (stars > 6 || memchr(ref, 0, rn))
        return;
    bool a = lz_cred_ref_match(pat, ref, rn), b = glob_naive(pat, ref, rn);
    if (a != b)
        __builtin_trap();
}

static void check_scan(const struct lz_cred_bind *b, size_t nb, const uint8_t *in, size_t n, uint64_t seed) {
    struct lz_credscan *s;
    if (lz_credscan_new(b, nb, &s) != 0)
        __builtin_trap();
    struct lz_credout o = { 0 }, sent = { 0 };
    int r = 0;
    for (size_t off = 0; off < n && r == 0;) {
        size_t k = 1 + (size_t)(rnd(&seed) % 64);
        if (k > n - off)
            k = n - off;
        o.len = 0;
        r = lz_credscan_feed(s, in + off, k, &o);
        if (r < 0 && (r != -EACCES || o.len))
            __builtin_trap();
        if (lz_credscan_held(s) >= sizeof B64_VAL2)
            __builtin_trap();
        append(&sent, o.p, o.len);
        off += k;
    }
    if (r == 0) {
        o.len = 0;
        r = lz_credscan_end(s, &o);
        append(&sent, o.p, o.len);
    }
    bool has = false;
    for (size_t i = 0; i < nb; i++) {
        bool basic = b[i].format == LZ_CRED_BASIC;
        has |= memmem(in, n, b[i].value, b[i].value_len) != NULL || (basic && count(in, n, B64_VAL2));
        if (memmem(sent.p, sent.len, b[i].value, b[i].value_len) || (basic && count(sent.p, sent.len, B64_VAL2)))
            __builtin_trap();
    }
    if (has && r == 0)
        __builtin_trap();
    if (r == 0 && (sent.len != n || (n && memcmp(sent.p, in, n) != 0)))
        __builtin_trap();
    lz_credscan_free(s);
    free(o.p);
    free(sent.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 300000)
        return 0;
    struct lz_cred_bind b[2];
    size_t nb = binds(data[0], b);
    uint64_t seed = (uint64_t)data[1] << 8 | data[0] | 1;
    const uint8_t *in = data + 2;
    size_t n = size - 2;

    struct result whole = { 0 }, cut = { 0 };
    feed(b, nb, in, n, 0, &whole);
    feed(b, nb, in, n, seed, &cut);
    /* Cut or not, the same answer (its reason may be another of the
     * faults when there are several), the same bytes; but for two pushes
     * in one read, which depends on the reads. */
    if (!strstr(whole.why, "a second push") && !strstr(cut.why, "a second push")) {
        if (whole.r != cut.r)
            __builtin_trap();
        if (whole.r == 0 && (whole.sent.len != cut.sent.len || memcmp(whole.sent.p, cut.sent.p, whole.sent.len) != 0))
            __builtin_trap();
    }

    /* The client never sent a value itself (else the counts below need
     * not hold). */
    bool client_value = count(in, n, VAL) || count(in, n, VAL2) || count(in, n, B64_VAL2);
    const struct result *xs[] = { &whole, &cut };
    for (int i = 0; i < 2; i++) {
        const struct result *x = xs[i];
        for (size_t k = 0; k < nb; k++)
            if (count(x->sent.p, x->sent.len, b[k].placeholder))
                __builtin_trap();
        if (!client_value) {
            size_t values = count(x->sent.p, x->sent.len, VAL) + count(x->sent.p, x->sent.len, B64_VAL2);
            if (values != x->counts.swaps || count(x->sent.p, x->sent.len, VAL2))
                __builtin_trap();
            /* Put back, what went out is what came in (a prefix of it
             * after a refusal). */
            struct lz_credout back = { 0 };
            unswap(&x->sent, &back);
            if (back.len > n || (back.len && memcmp(back.p, in, back.len) != 0) || (x->r == 0 && back.len != n))
                __builtin_trap();
            free(back.p);
        }
        if (x->report.len)
            check_report(&x->report);
    }
    free(whole.sent.p);
    free(whole.report.p);
    free(cut.sent.p);
    free(cut.report.p);

    check_scan(b, nb, in, n, seed);
    check_glob(in, n);
    return 0;
}
