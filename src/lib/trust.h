/* trust.h — the escalation keys of one Domain generation.
 *
 * The Trust Anchor is an Ed25519 key pair the Host Coordinator makes when
 * the generation starts; its secret key exists only in the coordinator's
 * memory (locked, zeroed when freed), its public key is published to the
 * sandbox as /run/lazaret/mailbox/hc.pub (64 lowercase hex + "\n"). Each
 * Client Session gets a Session Anchor: a random 16-byte Session ID and a
 * key pair; its processes get LAZARET_SESSION_ID (32 hex) and
 * LAZARET_SESSION_KEY (the 64-byte secret key, 128 hex) in their
 * environment, and the coordinator verifies that session's records with
 * the public key. What these signatures prove inside one sandbox (any
 * process there can read any session's key) is in docs/escalation.md.
 */
#pragma once

#include "util.h"
#include <sodium.h>

#define LZ_TRUST_SID_LEN 16

struct lz_trust_anchor {
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
};

struct lz_session_anchor {
    uint8_t sid[LZ_TRUST_SID_LEN];
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
};

/* A fresh key pair in sodium_malloc'd (guarded, locked) memory; *ret is
 * freed (and zeroed) with lz_trust_anchor_free. */
int lz_trust_anchor_new(struct lz_trust_anchor **ret);
void lz_trust_anchor_free(struct lz_trust_anchor *t);

/* Writes "<pk hex>\n" as `name` in dirfd (mode 0644; atomically for
 * readers, not synced: it goes into the runtime directory, util.h). */
int lz_trust_publish(const struct lz_trust_anchor *t, int dirfd, const char *name);

/* A fresh Session Anchor (same memory rules). */
int lz_session_anchor_new(struct lz_session_anchor **ret);
void lz_session_anchor_free(struct lz_session_anchor *a);
/* "LAZARET_SESSION_ID=<32 hex>" and "LAZARET_SESSION_KEY=<128 hex>",
 * malloc'd; the caller zeroes the key string before freeing it. */
char *lz_session_env_id(const struct lz_session_anchor *a);
char *lz_session_env_key(const struct lz_session_anchor *a);

/* Parses exactly 2n lowercase hex digits (nothing after but an optional
 * single "\n"). 0 or -EINVAL. */
int lz_trust_hex_parse(const char *s, size_t slen, uint8_t *out, size_t n);
/* The Escalation Client's side: a session secret key from its hex form,
 * checked to be a valid Ed25519 secret key (its embedded public key
 * matches the seed). 0 or -EINVAL. */
int lz_trust_parse_secret(const char *hex, uint8_t sk[crypto_sign_SECRETKEYBYTES]);
