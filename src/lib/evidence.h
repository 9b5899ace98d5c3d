/* evidence.h — the durable evidence text of the Domain Store.
 *
 * What a participant's record proves is kept as one text column of
 * "key=value" fields separated by single spaces: the namespaces of the
 * Supervisor ("userns=<ino> mntns=<ino> netns=<ino>"), the readiness
 * fingerprint ("readiness=<hex> policy=<hex>"), the State Anchor's mount
 * identity ("mntns=<ino> <P>=<mount id> ..." for each persistent dir P,
 * anchor.h). Stores on users' disks hold this form, so it stays; this is
 * its one encoder and its one decoder.
 *
 * Keys and values are 1..LZ_EVIDENCE_FIELD_MAX-1 bytes; a byte outside
 * [A-Za-z0-9_./:+-] is written %XX (upper-case hex), so a path with a
 * space or a '=' stays one field. The decoder is strict: the whole text
 * must be well formed (no empty field or key or value, no leading,
 * trailing or double space, no '=' in a key or a second one in a field,
 * no escape that is not %XX of a byte that needs it, no key twice, at
 * most LZ_EVIDENCE_FIELDS_MAX fields, at most LZ_EVIDENCE_MAX-1 bytes),
 * or every lookup in it fails with -EBADMSG.
 */
#pragma once

#include "util.h"

#define LZ_EVIDENCE_MAX 4096
#define LZ_EVIDENCE_FIELD_MAX 1024
#define LZ_EVIDENCE_FIELDS_MAX 512

/* The encoder: fields appended in order; the first error sticks. */
struct lz_evidence {
    char s[LZ_EVIDENCE_MAX];
    size_t len;
    size_t n;
    int err;
};

void lz_evidence_init(struct lz_evidence *e);
void lz_evidence_add(struct lz_evidence *e, const char *key, const char *value);
void lz_evidence_add_u64(struct lz_evidence *e, const char *key, uint64_t value);
/* The text in *ret (inside e), or the first error: -EINVAL (an empty or
 * too long key or value), -EEXIST (a key twice), -E2BIG (too long, too
 * many fields). */
int lz_evidence_end(struct lz_evidence *e, const char **ret);

/* The (unescaped) value of key in ev into val (cap bytes, NUL-terminated):
 * 1 found, 0 absent (ev NULL or without key), -EBADMSG (ev malformed),
 * -E2BIG (cap too small). */
int lz_evidence_get(const char *ev, const char *key, char *val, size_t cap);
/* The same for a decimal value (no sign, no leading zero but "0", within
 * uint64): 1, 0, -EBADMSG (ev malformed, or the value is not such). */
int lz_evidence_get_u64(const char *ev, const char *key, uint64_t *ret);
/* 0 when ev is well formed (or NULL), else -EBADMSG. */
int lz_evidence_check(const char *ev);
