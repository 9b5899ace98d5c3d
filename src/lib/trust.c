/* trust.c — see trust.h. */
#include "trust.h"

#include <fcntl.h>

int lz_trust_anchor_new(struct lz_trust_anchor **ret) {
    struct lz_trust_anchor *t = sodium_malloc(sizeof *t);
    if (!t)
        return -ENOMEM;
    if (crypto_sign_keypair(t->pk, t->sk) != 0) {
        sodium_free(t);
        return -EIO;
    }
    *ret = t;
    return 0;
}

void lz_trust_anchor_free(struct lz_trust_anchor *t) {
    if (t)
        sodium_free(t); /* zeroes before it unmaps */
}

int lz_trust_publish(const struct lz_trust_anchor *t, int dirfd, const char *name) {
    char line[2 * crypto_sign_PUBLICKEYBYTES + 2];
    lz_hex(t->pk, sizeof t->pk, line);
    line[2 * crypto_sign_PUBLICKEYBYTES] = '\n';
    line[2 * crypto_sign_PUBLICKEYBYTES + 1] = '\0';
    /* Into the generation's mailbox, in the runtime directory (util.h). */
    return lz_write_file_volatile_at(dirfd, name, line, sizeof line - 1, 0644);
}

int lz_session_anchor_new(struct lz_session_anchor **ret) {
    struct lz_session_anchor *a = sodium_malloc(sizeof *a);
    if (!a)
        return -ENOMEM;
    randombytes_buf(a->sid, sizeof a->sid);
    if (crypto_sign_keypair(a->pk, a->sk) != 0) {
        sodium_free(a);
        return -EIO;
    }
    *ret = a;
    return 0;
}

void lz_session_anchor_free(struct lz_session_anchor *a) {
    if (a)
        sodium_free(a);
}

char *lz_session_env_id(const struct lz_session_anchor *a) {
    char hex[2 * LZ_TRUST_SID_LEN + 1];
    lz_hex(a->sid, sizeof a->sid, hex);
    return lz_xasprintf("LAZARET_SESSION_ID=%s", hex);
}

char *lz_session_env_key(const struct lz_session_anchor *a) {
    char hex[2 * crypto_sign_SECRETKEYBYTES + 1];
    lz_hex(a->sk, sizeof a->sk, hex);
    char *s = lz_xasprintf("LAZARET_SESSION_KEY=%s", hex);
    sodium_memzero(hex, sizeof hex);
    return s;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int lz_trust_hex_parse(const char *s, size_t slen, uint8_t *out, size_t n) {
    if (slen == 2 * n + 1 && s[2 * n] == '\n')
        slen--;
    if (slen != 2 * n)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int lz_trust_parse_secret(const char *hex, uint8_t sk[crypto_sign_SECRETKEYBYTES]) {
    uint8_t tmp[crypto_sign_SECRETKEYBYTES], pk[crypto_sign_PUBLICKEYBYTES], sk2[crypto_sign_SECRETKEYBYTES];
    if (!hex || lz_trust_hex_parse(hex, strlen(hex), tmp, sizeof tmp) < 0)
        return -EINVAL;
    /* An Ed25519 secret key is seed || public key: the public half must be
     * the one the seed derives, or signatures would not verify anywhere. */
    crypto_sign_seed_keypair(pk, sk2, tmp);
    int ok = sodium_memcmp(sk2, tmp, sizeof tmp) == 0;
    sodium_memzero(sk2, sizeof sk2);
    if (!ok) {
        sodium_memzero(tmp, sizeof tmp);
        return -EINVAL;
    }
    memcpy(sk, tmp, sizeof tmp);
    sodium_memzero(tmp, sizeof tmp);
    return 0;
}
