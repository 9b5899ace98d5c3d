/* pathset.h — a set of relative paths (open addressing, FNV-1a), for the
 * preparer's "touched by the current layer" bookkeeping (prepare.c). */
#pragma once

#include "util.h"

struct lz_pathset {
    char **slots;
    size_t cap, n;
};

/* Whether the first len bytes of p are in the set. */
bool lz_pathset_has(const struct lz_pathset *s, const char *p, size_t len);
/* Adds a copy of the first len bytes of p (once). */
void lz_pathset_add(struct lz_pathset *s, const char *p, size_t len);
void lz_pathset_free(struct lz_pathset *s);
