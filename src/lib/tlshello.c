/* tlshello.c — the strict ClientHello reader (tlshello.h). */
#include "tlshello.h"

#include <errno.h>
#include <string.h>

#define SESSION_ID_MAX 32

static const char *const reasons[LZ_TLS_R_MAX] = {
    [LZ_TLS_OK] = "ok",
    [LZ_TLS_R_NOT_HANDSHAKE] = "not a TLS handshake record",
    [LZ_TLS_R_RECORD_VERSION] = "TLS record version other than 0x0301..0x0303",
    [LZ_TLS_R_RECORD_LENGTH] = "TLS record empty or longer than 16384 bytes",
    [LZ_TLS_R_RECORDS] = "ClientHello split over too many records",
    [LZ_TLS_R_NOT_HELLO] = "handshake message other than ClientHello",
    [LZ_TLS_R_TOO_LONG] = "ClientHello longer than 16384 bytes",
    [LZ_TLS_R_TOO_SHORT] = "ClientHello too short",
    [LZ_TLS_R_TRAILING] = "bytes after the ClientHello",
    [LZ_TLS_R_LENGTH] = "length runs past its container",
    [LZ_TLS_R_VERSION] = "neither TLS 1.2 nor TLS 1.3",
    [LZ_TLS_R_SESSION_ID] = "session ID longer than 32 bytes",
    [LZ_TLS_R_CIPHERS] = "empty or odd cipher-suite list",
    [LZ_TLS_R_COMPRESSION] = "compression methods without null",
    [LZ_TLS_R_EXT_DUP] = "extension sent twice",
    [LZ_TLS_R_PSK_LAST] = "pre_shared_key not the last extension",
    [LZ_TLS_R_SNI_LIST] = "malformed server_name list",
    [LZ_TLS_R_SNI_MULTI] = "more than one server name",
    [LZ_TLS_R_SNI_NAME] = "server name is not a host name (letters, digits, '-')",
    [LZ_TLS_R_SNI_IP] = "server name is an IP address",
    [LZ_TLS_R_ALPN] = "malformed ALPN list",
    [LZ_TLS_R_ALPN_LIMIT] = "too many or too long ALPN protocol names",
    [LZ_TLS_R_VERSIONS] = "malformed supported_versions list",
};

const char *lz_tls_reason_str(enum lz_tls_reason r) {
    return (unsigned)r < LZ_TLS_R_MAX && reasons[r] ? reasons[r] : "unknown reason";
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] << 8 | p[1]); }
static uint32_t get24(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }

static int fail(enum lz_tls_reason *why, enum lz_tls_reason r) {
    if (why)
        *why = r;
    return -EBADMSG;
}

/* A bounded cursor over one container: every take checks the bytes it
 * hands out against what is left of that container. */
struct cur {
    const uint8_t *p;
    size_t left;
};

static bool take(struct cur *c, size_t n, const uint8_t **ret) {
    if (n > c->left)
        return false;
    *ret = c->p;
    c->p += n;
    c->left -= n;
    return true;
}

static bool take8(struct cur *c, unsigned *ret) {
    const uint8_t *q;
    if (!take(c, 1, &q))
        return false;
    *ret = q[0];
    return true;
}

static bool take16(struct cur *c, unsigned *ret) {
    const uint8_t *q;
    if (!take(c, 2, &q))
        return false;
    *ret = get16(q);
    return true;
}

/* A sub-container of n bytes (its length already read). */
static bool sub(struct cur *c, size_t n, struct cur *ret) {
    const uint8_t *q;
    if (!take(c, n, &q))
        return false;
    *ret = (struct cur){ .p = q, .left = n };
    return true;
}

/* RFC 6066 §3: "Literal IPv4 and IPv6 addresses are not permitted". Digits
 * and dots, at least one digit (a dotted quad, "127.1", with or without
 * the trailing dot), or a ':' anywhere ("::1", "[::1]"). Other forms
 * ("0x7f.1") are refused by the canonical form's all-digit last label or
 * its byte set. */
static bool ip_literal(const uint8_t *s, size_t n) {
    if (memchr(s, ':', n))
        return true;
    bool digit = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= '0' && s[i] <= '9')
            digit = true;
        else if (s[i] != '.')
            return false;
    }
    return digit;
}

/* server_name: exactly one host_name entry in a list that fills the
 * extension. */
static int read_sni(struct cur e, struct lz_tls_hello *h, enum lz_tls_reason *why) {
    unsigned list_len;
    struct cur list;
    if (!take16(&e, &list_len) || list_len == 0 || list_len != e.left || !sub(&e, list_len, &list))
        return fail(why, LZ_TLS_R_SNI_LIST);
    const uint8_t *name = NULL;
    size_t name_len = 0;
    while (list.left) {
        unsigned type, len;
        const uint8_t *bytes;
        if (!take8(&list, &type) || !take16(&list, &len) || !take(&list, len, &bytes) || type != 0)
            return fail(why, LZ_TLS_R_SNI_LIST);
        if (name)
            return fail(why, LZ_TLS_R_SNI_MULTI);
        name = bytes;
        name_len = len;
    }
    if (name_len == 0)
        return fail(why, LZ_TLS_R_SNI_NAME);
    if (ip_literal(name, name_len))
        return fail(why, LZ_TLS_R_SNI_IP);
    if (lz_hostname_canon((const char *)name, name_len, h->sni, NULL) < 0)
        return fail(why, LZ_TLS_R_SNI_NAME);
    h->has_sni = true;
    return 0;
}

static int read_alpn(struct cur e, struct lz_tls_hello *h, enum lz_tls_reason *why) {
    unsigned list_len;
    struct cur list;
    if (!take16(&e, &list_len) || list_len == 0 || list_len != e.left || !sub(&e, list_len, &list))
        return fail(why, LZ_TLS_R_ALPN);
    while (list.left) {
        unsigned len;
        const uint8_t *bytes;
        if (!take8(&list, &len) || len == 0 || !take(&list, len, &bytes))
            return fail(why, LZ_TLS_R_ALPN);
        if (h->n_alpn == LZ_TLS_ALPN_MAX || len > LZ_TLS_ALPN_NAME_MAX)
            return fail(why, LZ_TLS_R_ALPN_LIMIT);
        struct lz_tls_alpn *a = &h->alpn[h->n_alpn++];
        a->len = (uint8_t)len;
        memcpy(a->name, bytes, len);
        a->name[len] = '\0';
    }
    h->has_alpn = true;
    return 0;
}

/* The ClientHello form of supported_versions: a one-byte length. */
static int read_versions(struct cur e, unsigned *ret_versions, enum lz_tls_reason *why) {
    unsigned list_len;
    if (!take8(&e, &list_len) || list_len == 0 || list_len % 2 || list_len != e.left)
        return fail(why, LZ_TLS_R_VERSIONS);
    unsigned v = 0, ver;
    while (take16(&e, &ver)) {
        if (ver == LZ_TLS_VERSION_12)
            v |= LZ_TLS_V12;
        else if (ver == LZ_TLS_VERSION_13)
            v |= LZ_TLS_V13;
    }
    *ret_versions = v;
    return 0;
}

int lz_tls_hello_parse_body(const uint8_t *body, size_t len, struct lz_tls_hello *ret, enum lz_tls_reason *why) {
    struct lz_tls_hello h = { .legacy_version = LZ_TLS_VERSION_12 };
    struct cur c = { .p = body, .left = len };
    unsigned version, n;
    const uint8_t *skip;
    if (len < LZ_TLS_HELLO_BODY_MIN)
        return fail(why, LZ_TLS_R_TOO_SHORT);
    if (len > LZ_TLS_HELLO_MAX - 4)
        return fail(why, LZ_TLS_R_TOO_LONG);
    if (!take16(&c, &version) || version != LZ_TLS_VERSION_12)
        return fail(why, LZ_TLS_R_VERSION);
    if (!take(&c, 32, &skip)) /* random */
        return fail(why, LZ_TLS_R_LENGTH);
    if (!take8(&c, &n))
        return fail(why, LZ_TLS_R_LENGTH);
    if (n > SESSION_ID_MAX)
        return fail(why, LZ_TLS_R_SESSION_ID);
    if (!take(&c, n, &skip) || !take16(&c, &n) || !take(&c, n, &skip))
        return fail(why, LZ_TLS_R_LENGTH);
    if (n == 0 || n % 2)
        return fail(why, LZ_TLS_R_CIPHERS);
    if (!take8(&c, &n) || !take(&c, n, &skip))
        return fail(why, LZ_TLS_R_LENGTH);
    if (n == 0 || !memchr(skip, 0, n))
        return fail(why, LZ_TLS_R_COMPRESSION);

    bool sv = false;
    if (c.left) { /* a hello without extensions ends here */
        struct cur exts;
        if (!take16(&c, &n) || !sub(&c, n, &exts))
            return fail(why, LZ_TLS_R_LENGTH);
        if (c.left)
            return fail(why, LZ_TLS_R_TRAILING);
        /* One bit per extension type: duplicates in linear time. */
        uint8_t seen[65536 / 8];
        memset(seen, 0, sizeof seen);
        while (exts.left) {
            unsigned type, elen;
            struct cur e;
            if (!take16(&exts, &type) || !take16(&exts, &elen) || !sub(&exts, elen, &e))
                return fail(why, LZ_TLS_R_LENGTH);
            if (seen[type / 8] & (1u << (type % 8)))
                return fail(why, LZ_TLS_R_EXT_DUP);
            seen[type / 8] |= (uint8_t)(1u << (type % 8));
            if (h.psk)
                return fail(why, LZ_TLS_R_PSK_LAST);
            int r = 0;
            switch (type) {
            case LZ_TLS_EXT_SERVER_NAME: r = read_sni(e, &h, why); break;
            case LZ_TLS_EXT_ALPN: r = read_alpn(e, &h, why); break;
            case LZ_TLS_EXT_SUPPORTED_VERSIONS:
                r = read_versions(e, &h.versions, why);
                sv = true;
                break;
            case LZ_TLS_EXT_PRE_SHARED_KEY: h.psk = true; break;
            case LZ_TLS_EXT_EARLY_DATA: h.early_data = true; break;
            case LZ_TLS_EXT_ECH: h.ech = true; break;
            default: break;
            }
            if (r < 0)
                return r;
        }
    }
    if (!sv)
        h.versions = LZ_TLS_V12;
    if (h.versions == 0)
        return fail(why, LZ_TLS_R_VERSION);
    *ret = h;
    return 0;
}

/* Checks the handshake bytes gathered so far (have of them) as far as
 * they go; *total: the hello's length with its header once known, else 0. */
static int check_head(const uint8_t *m, size_t have, size_t *total, enum lz_tls_reason *why) {
    if (have >= 1 && m[0] != LZ_TLS_HS_CLIENT_HELLO)
        return fail(why, LZ_TLS_R_NOT_HELLO);
    if (have >= 4) {
        size_t body = get24(m + 1);
        if (body > LZ_TLS_HELLO_MAX - 4)
            return fail(why, LZ_TLS_R_TOO_LONG);
        if (body < LZ_TLS_HELLO_BODY_MIN)
            return fail(why, LZ_TLS_R_TOO_SHORT);
        *total = 4 + body;
    }
    if (have >= 6 && get16(m + 4) != LZ_TLS_VERSION_12)
        return fail(why, LZ_TLS_R_VERSION);
    return 0;
}

static int again(size_t need, size_t *ret_need) {
    if (ret_need)
        *ret_need = need;
    return -EAGAIN;
}

int lz_tls_hello_parse(const uint8_t *buf, size_t len, struct lz_tls_hello *ret, size_t *ret_need,
                       enum lz_tls_reason *why) {
    /* The handshake stream, the fragments of every record concatenated:
     * read in place when one record holds it all (the usual case). */
    uint8_t msg[LZ_TLS_HELLO_MAX];
    size_t off = 0, have = 0, total = 0;
    for (unsigned rec = 0;; rec++) {
        if (rec == LZ_TLS_RECORDS_MAX)
            return fail(why, LZ_TLS_R_RECORDS);
        size_t avail = len - off;
        const uint8_t *r = buf + off;
        if (avail >= 1 && r[0] != LZ_TLS_CT_HANDSHAKE)
            return fail(why, LZ_TLS_R_NOT_HANDSHAKE);
        if (avail >= 2 && r[1] != 3)
            return fail(why, LZ_TLS_R_RECORD_VERSION);
        if (avail >= 3 && (r[2] < 1 || r[2] > 3))
            return fail(why, LZ_TLS_R_RECORD_VERSION);
        if (avail < LZ_TLS_RECORD_HDR)
            return again(off + LZ_TLS_RECORD_HDR, ret_need);
        size_t flen = get16(r + 3);
        if (flen == 0 || flen > LZ_TLS_RECORD_MAX)
            return fail(why, LZ_TLS_R_RECORD_LENGTH);
        /* A record holds hello bytes only: with the hello's length known,
         * it may not run past it; before, not past the longest hello.
         * This also keeps every *ret_need within LZ_TLS_PEEK_MAX. */
        if (total ? flen > total - have : flen > LZ_TLS_HELLO_MAX - have)
            return fail(why, total ? LZ_TLS_R_TRAILING : LZ_TLS_R_TOO_LONG);
        size_t got = avail - LZ_TLS_RECORD_HDR < flen ? avail - LZ_TLS_RECORD_HDR : flen;
        size_t before = have;
        memcpy(msg + have, r + LZ_TLS_RECORD_HDR, got);
        have += got;
        int e = check_head(msg, have, &total, why);
        if (e < 0)
            return e;
        if (total && before + flen > total)
            return fail(why, LZ_TLS_R_TRAILING);
        if (got < flen)
            return again(off + LZ_TLS_RECORD_HDR + flen, ret_need);
        off += LZ_TLS_RECORD_HDR + flen;
        if (total && have == total) {
            const uint8_t *m = rec == 0 ? buf + LZ_TLS_RECORD_HDR : msg;
            struct lz_tls_hello h;
            e = lz_tls_hello_parse_body(m + 4, total - 4, &h, why);
            if (e < 0)
                return e;
            h.used = off;
            h.n_records = (uint8_t)(rec + 1);
            *ret = h;
            return 0;
        }
    }
}

bool lz_tls_hello_offers_alpn(const struct lz_tls_hello *h, const char *proto) {
    size_t n = strlen(proto);
    for (size_t i = 0; i < h->n_alpn; i++)
        if (h->alpn[i].len == n && memcmp(h->alpn[i].name, proto, n) == 0)
            return true;
    return false;
}
