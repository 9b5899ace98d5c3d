/* catalog_int.h — what catalog.c shares with catalog_gc.c: the bounded
 * section (flock, open, store version, one transaction; see catalog.h) and
 * the row helpers. Not for other modules. */
#pragma once

#include "catalog.h"
#include "db.h"

/* A bound on what a catalog (or a prepared/ directory) can make us hold. */
#define LZ_CAT_MAX_ROWS 100000

struct cat {
    int lock_fd;
    struct lz_db *db;
    bool fresh; /* no schema yet: reads as empty */
};

/* flags: LZ_DB_WRITE, LZ_DB_CREATE (also creates data_root). Returns 0 with
 * the section open, 1 when there is no catalog.db (only without
 * LZ_DB_CREATE; nothing is created), or -errno. */
int lz_cat_section_begin(const char *data_root, unsigned flags, struct cat *ret, struct lz_error *err);
/* lz_cat_section_begin for work that needs existing rows: 1 (nothing left
 * open) also when the catalog is fresh, never created. */
int lz_cat_section_existing(const char *data_root, unsigned flags, struct cat *ret, struct lz_error *err);
/* Commits (r >= 0) or rolls back (r < 0), closes, unlocks. Returns r, or
 * the commit error. */
int lz_cat_section_end(struct cat *c, int r, struct lz_error *err);
/* The whole catalog under an open section (empty when fresh). */
int lz_cat_load(struct cat *c, struct lz_catalog *ret, struct lz_error *err);
/* Inserts (or refreshes) the row of the published tree prepared/<dir> that
 * holds artifact id: state 'ready', metadata from its artifact.json. */
int lz_cat_artifact_upsert(struct cat *c, int pfd, const char *dir, const char *id, int64_t now, struct lz_error *err);
bool lz_cat_hex64(const char *s);
/* Wall-clock milliseconds since the epoch (the catalog's times). */
int64_t lz_cat_now_ms(void);
/* <data_root>/prepared, O_DIRECTORY | O_NOFOLLOW, or -errno. */
int lz_cat_open_prepared(const char *data_root);
