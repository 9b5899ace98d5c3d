/* libFuzzer target: the ClientHello reader (tlshello.c). The input is
 * parsed as the start of a TLS stream and, copied to a buffer of exactly
 * its size, as a hello body alone (the corpus holds captured hellos in
 * their records). Checked: the result is one of the three, with a reason
 * or a bound on the bytes needed; what parses is sane (a canonical name,
 * bounded ALPN names, versions offered) and parses the same from exactly
 * the bytes it used; a prefix of a stream that parses or waits always
 * waits, asking for no more than the whole; a stream that is refused has
 * no prefix that parses. Then the input is taken as a handshake message
 * and put in one record and in up to four (cut where three bytes of its
 * random field say, which the parse never reads): both must give the
 * same answer. */
#include "tlshello.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const struct lz_tls_hello *a, const struct lz_tls_hello *b, bool records) {
    if (records && (a->used != b->used || a->n_records != b->n_records))
        return false;
    if (a->legacy_version != b->legacy_version || a->versions != b->versions || a->has_sni != b->has_sni ||
        strcmp(a->sni, b->sni) != 0 || a->ech != b->ech || a->psk != b->psk || a->early_data != b->early_data ||
        a->has_alpn != b->has_alpn || a->n_alpn != b->n_alpn)
        return false;
    for (size_t i = 0; i < a->n_alpn; i++)
        if (a->alpn[i].len != b->alpn[i].len || memcmp(a->alpn[i].name, b->alpn[i].name, a->alpn[i].len) != 0)
            return false;
    return true;
}

static void check_sane(const struct lz_tls_hello *h) {
    if (h->legacy_version != LZ_TLS_VERSION_12 || h->versions == 0 || (h->versions & ~(LZ_TLS_V12 | LZ_TLS_V13)))
        __builtin_trap();
    if (h->has_sni) {
        char canon[LZ_HOSTNAME_MAX + 1];
        size_t n = strnlen(h->sni, sizeof h->sni);
        if (n == 0 || n > LZ_HOSTNAME_MAX || lz_hostname_canon(h->sni, n, canon, NULL) != 0 ||
            strcmp(canon, h->sni) != 0)
            __builtin_trap();
    } else if (h->sni[0] != '\0') {
        __builtin_trap();
    }
    if (h->n_alpn > LZ_TLS_ALPN_MAX || h->has_alpn != (h->n_alpn > 0))
        __builtin_trap();
    for (size_t i = 0; i < h->n_alpn; i++)
        if (h->alpn[i].len == 0 || h->alpn[i].len > LZ_TLS_ALPN_NAME_MAX || h->alpn[i].name[h->alpn[i].len] != '\0')
            __builtin_trap();
}

/* A prefix of k bytes of a stream whose whole (r, need/used: upto) is
 * known. */
static void check_prefix(const uint8_t *data, size_t k, int r, size_t upto) {
    struct lz_tls_hello h;
    enum lz_tls_reason why = LZ_TLS_OK;
    size_t need = 0;
    int p = lz_tls_hello_parse(data, k, &h, &need, &why);
    if (r == -EBADMSG) {
        if (p == 0)
            __builtin_trap();
        return;
    }
    if (p != -EAGAIN || need <= k || need > upto)
        __builtin_trap();
}

/* The message in records ending at the cuts (ascending, inside it), into
 * a buffer of exactly their size. */
static uint8_t *in_records(const uint8_t *m, size_t n, const size_t *cuts, size_t n_cuts, size_t *ret_len) {
    size_t len = n + (n_cuts + 1) * LZ_TLS_RECORD_HDR, o = 0, from = 0;
    uint8_t *b = malloc(len);
    if (!b)
        return NULL;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : n;
        b[o++] = LZ_TLS_CT_HANDSHAKE;
        b[o++] = 3;
        b[o++] = 1;
        b[o++] = (uint8_t)((to - from) >> 8);
        b[o++] = (uint8_t)(to - from);
        memcpy(b + o, m + from, to - from);
        o += to - from;
        from = to;
    }
    *ret_len = len;
    return b;
}

static void check_split(const uint8_t *m, size_t n) {
    if (n < 9 || n > LZ_TLS_RECORD_MAX)
        return;
    size_t cuts[3], n_cuts = 0;
    for (size_t i = 0; i < 3; i++) {
        size_t c = 1 + (size_t)(m[6 + i] * 61u) % (n - 1);
        if (m[6 + i] % 4 == 0)
            continue;
        size_t k = n_cuts;
        while (k > 0 && cuts[k - 1] > c) {
            cuts[k] = cuts[k - 1];
            k--;
        }
        if (k > 0 && cuts[k - 1] == c) {
            memmove(cuts + k, cuts + k + 1, (n_cuts - k) * sizeof cuts[0]);
            continue;
        }
        cuts[k] = c;
        n_cuts++;
    }
    size_t l1, l2;
    uint8_t *one = in_records(m, n, NULL, 0, &l1), *many = in_records(m, n, cuts, n_cuts, &l2);
    if (one && many) {
        struct lz_tls_hello h1, h2;
        size_t need1 = 0, need2 = 0;
        enum lz_tls_reason why1 = LZ_TLS_OK, why2 = LZ_TLS_OK;
        int r1 = lz_tls_hello_parse(one, l1, &h1, &need1, &why1);
        int r2 = lz_tls_hello_parse(many, l2, &h2, &need2, &why2);
        if (r1 == 0 && (r2 != 0 || !same(&h1, &h2, false) || h2.used != l2 || h2.n_records != n_cuts + 1))
            __builtin_trap();
        /* Refused in one record for bytes after the hello, the hello
         * may end at a cut: the records after it are not read. */
        if (r1 == -EBADMSG && r2 != -EBADMSG && !(r2 == 0 && why1 == LZ_TLS_R_TRAILING && h2.used < l2))
            __builtin_trap();
        if (r1 == -EAGAIN && r2 != -EAGAIN && !(r2 == -EBADMSG && why2 == LZ_TLS_R_RECORDS))
            __builtin_trap();
    }
    free(one);
    free(many);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536)
        return 0;
    struct lz_tls_hello h, h2;
    enum lz_tls_reason why = LZ_TLS_OK;
    size_t need = 0;
    int r = lz_tls_hello_parse(data, size, &h, &need, &why);
    size_t upto = 0;
    if (r == 0) {
        check_sane(&h);
        if (h.used > size || h.used < LZ_TLS_RECORD_HDR + 4 + LZ_TLS_HELLO_BODY_MIN || h.n_records < 1 ||
            h.n_records > LZ_TLS_RECORDS_MAX)
            __builtin_trap();
        if (lz_tls_hello_parse(data, h.used, &h2, &need, &why) != 0 || !same(&h, &h2, true))
            __builtin_trap();
        if (h.n_records == 1 &&
            (lz_tls_hello_parse_body(data + LZ_TLS_RECORD_HDR + 4, h.used - LZ_TLS_RECORD_HDR - 4, &h2, &why) != 0 ||
             !same(&h, &h2, false)))
            __builtin_trap();
        upto = h.used;
    } else if (r == -EAGAIN) {
        if (need <= size || need > LZ_TLS_PEEK_MAX)
            __builtin_trap();
        upto = need;
    } else if (r != -EBADMSG || why == LZ_TLS_OK || why >= LZ_TLS_R_MAX) {
        __builtin_trap();
    }
    /* A few prefixes, not all: the work per input stays linear. */
    size_t end = r == 0 ? h.used : size;
    if (end > 0) {
        check_prefix(data, end - 1, r, upto);
        check_prefix(data, end / 2, r, upto);
        check_prefix(data, (size_t)data[0] * 7 % end, r, upto);
    }

    /* The body alone, from a buffer of exactly its size. */
    uint8_t *body = malloc(size ? size : 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    why = LZ_TLS_OK;
    r = lz_tls_hello_parse_body(body, size, &h, &why);
    if (r == 0) {
        check_sane(&h);
        if (h.used != 0 || h.n_records != 0)
            __builtin_trap();
    } else if (r != -EBADMSG || why == LZ_TLS_OK || why >= LZ_TLS_R_MAX) {
        __builtin_trap();
    }
    free(body);
    check_split(data, size);
    return 0;
}
