/* bench/record_crypto.c — the floor the record signatures put under
 * escalation streaming: Ed25519 sign and verify (libsodium) of 100 MiB in
 * records of 49,152 output bytes (the spec's chunk bound), next to one
 * SHA-512 pass over the same bytes. Compare with `runsc exec cat` of
 * 100 MiB in bench/escalation.py.
 *
 *   cc -O2 bench/record_crypto.c -o /tmp/record_crypto -lsodium && /tmp/record_crypto
 */
#include <sodium.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void) {
    if (sodium_init() < 0)
        return 1;
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES], sig[crypto_sign_BYTES];
    crypto_sign_keypair(pk, sk);
    static unsigned char m[49152];
    randombytes_buf(m, sizeof m);
    const int n = (100 << 20) / (int)sizeof m + 1;
    double t = now();
    for (int i = 0; i < n; i++)
        crypto_sign_detached(sig, NULL, m, sizeof m, sk);
    double ts = now() - t;
    t = now();
    for (int i = 0; i < n; i++)
        if (crypto_sign_verify_detached(sig, m, sizeof m, pk) != 0)
            return 1;
    double tv = now() - t;
    unsigned char h[crypto_hash_sha512_BYTES];
    t = now();
    for (int i = 0; i < n; i++)
        crypto_hash_sha512(h, m, sizeof m);
    printf("100 MiB in %d records of %zu bytes: sign %.3f s, verify %.3f s, one SHA-512 pass %.3f s\n", n, sizeof m, ts,
           tv, now() - t);
    return 0;
}
