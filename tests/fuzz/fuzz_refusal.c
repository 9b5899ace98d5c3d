/* libFuzzer target: the decoder of the routers' refusal records
 * (refusal.c), which the coordinator reads from another process. A decoded
 * record must re-encode to the same bytes, and what the history and the
 * notice make of it must be printable ASCII or escaped text. */
#include "refusal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_REFUSAL_MAX + 16)
        return 0;
    struct lz_refusal_rec r;
    if (lz_refusal_decode(data, size, &r) != 0)
        return 0;
    /* Re-encode (strings have no NUL inside, so they are C strings once
     * copied). */
    static char p1[LZ_REFUSAL_PATH_MAX + 1], p2[LZ_REFUSAL_PATH_MAX + 1], d[LZ_REFUSAL_DETAIL_MAX + 1];
    memcpy(p1, r.path, r.path_len);
    p1[r.path_len] = '\0';
    memcpy(p2, r.path2, r.path2_len);
    p2[r.path2_len] = '\0';
    memcpy(d, r.detail, r.detail_len);
    d[r.detail_len] = '\0';
    static uint8_t buf[LZ_REFUSAL_MAX];
    ssize_t n = lz_refusal_encode(buf, sizeof buf, r.why, r.op, r.tag, r.err, r.dropped, p1, p2, d);
    if (n != (ssize_t)size || memcmp(buf, data, size))
        __builtin_trap();
    static struct lz_refusal_history h;
    const struct lz_refusal_entry *e = lz_refusal_history_add(&h, &r, "/workspace", 1);
    char line[1024];
    lz_refusal_notice(e, line, sizeof line);
    for (const char *s = line; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            __builtin_trap();
    if (h.n == LZ_REFUSAL_HISTORY)
        lz_refusal_history_clear(&h);
    return 0;
}
