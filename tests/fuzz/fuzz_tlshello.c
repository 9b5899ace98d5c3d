/* libFuzzer target: the ClientHello reader (tlshello.c). The input is
 * parsed as the start of a TLS stream and, copied to a buffer of exactly
 * its size, as a hello body alone (the corpus holds captured hellos in
 * their records). Checked: the result is one of the three, with a reason
 * or a bound on the bytes needed; what parses is sane (a canonical name,
 * bounded ALPN names, versions offered) and parses the same from exactly
 * the bytes it used; a prefix of a stream that parses or waits always
 * waits, asking for no more than the whole; a stream that is refused has
 * no prefix that parses. */
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
    return 0;
}
