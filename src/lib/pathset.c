/* pathset.c — see pathset.h. */
#include "pathset.h"

static uint64_t hash_str(const char *s, size_t len) {
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static size_t slot_of(const struct lz_pathset *s, const char *p, size_t len) {
    size_t i = (size_t)hash_str(p, len) & (s->cap - 1);
    while (s->slots[i] && !(strlen(s->slots[i]) == len && memcmp(s->slots[i], p, len) == 0))
        i = (i + 1) & (s->cap - 1);
    return i;
}

bool lz_pathset_has(const struct lz_pathset *s, const char *p, size_t len) {
    if (s->cap == 0)
        return false;
    return s->slots[slot_of(s, p, len)] != NULL;
}

void lz_pathset_add(struct lz_pathset *s, const char *p, size_t len) {
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        struct lz_pathset t = { .slots = lz_xcalloc(ncap, sizeof(char *)), .cap = ncap, .n = s->n };
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i])
                t.slots[slot_of(&t, s->slots[i], strlen(s->slots[i]))] = s->slots[i];
        free(s->slots);
        *s = t;
    }
    size_t i = slot_of(s, p, len);
    if (!s->slots[i]) {
        s->slots[i] = lz_xstrndup(p, len);
        s->n++;
    }
}

void lz_pathset_free(struct lz_pathset *s) {
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i]);
    free(s->slots);
    *s = (struct lz_pathset){ 0 };
}
