/* libFuzzer target: the signed mailbox record codec (record.h).
 *
 * A fuzzer cannot forge Ed25519 signatures, so opening raw input alone
 * would never get past verification. The target therefore also treats the
 * input as kind byte + payload, signs the payload with a fixed test key
 * and opens the framed record: that drives the decoder with arbitrary
 * bytes through the production entry point. Properties checked: a payload
 * that decodes re-encodes to exactly the same bytes (one record, one
 * encoding); open and the bare decoder agree; a decoded record seals and
 * opens again. */
#include "record.h"

static uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
static uint8_t frame[LZ_RECORD_MAX], again[LZ_RECORD_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool init;
    if (!init) {
        uint8_t seed[crypto_sign_SEEDBYTES] = { 'l', 'a', 'z', 'a', 'r', 'e', 't' };
        if (sodium_init() < 0)
            __builtin_trap();
        crypto_sign_seed_keypair(pk, sk, seed);
        init = true;
    }
    const unsigned all = LZ_REC_FROM_SANDBOX | LZ_REC_FROM_HOST;
    struct lz_record d, d2;

    /* Raw input as a mailbox file. */
    if (lz_record_open(pk, data, size, all, &d, NULL) == 0)
        lz_record_clear(&d);

    if (size < 1 || size - 1 > LZ_RECORD_PAYLOAD_MAX)
        return 0;
    unsigned kind = data[0] % LZ_REC_KIND_MAX + 1;
    const uint8_t *payload = data + 1;
    size_t plen = size - 1;
    frame[0] = LZ_RECORD_FORMAT;
    frame[1] = (uint8_t)kind;
    if (lz_record_sign(sk, kind, payload, plen, frame + 2) != 0)
        __builtin_trap();
    memcpy(frame + LZ_RECORD_HDR, payload, plen);
    int r = lz_record_open(pk, frame, LZ_RECORD_HDR + plen, all, &d, NULL);
    int r2 = lz_record_decode(kind, payload, plen, &d2, NULL);
    if ((r == 0) != (r2 == 0))
        __builtin_trap();
    if (r2 == 0)
        lz_record_clear(&d2);
    if (r != 0)
        return 0;
    size_t alen;
    if (lz_record_encode(&d, again, sizeof again, &alen, NULL) != 0 || alen != plen ||
        memcmp(again, payload, plen) != 0)
        __builtin_trap();
    /* The signer's own seal of the decoded record opens and is identical. */
    size_t slen;
    if (lz_record_seal(sk, &d, again, sizeof again, &slen, NULL) != 0 || slen != LZ_RECORD_HDR + plen ||
        memcmp(again, frame, slen) != 0)
        __builtin_trap();
    lz_record_clear(&d);
    return 0;
}
