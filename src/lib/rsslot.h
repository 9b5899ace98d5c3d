/* rsslot.h — which Supervisor child a STAGE/STAGED message names.
 *
 * The Supervisor stages its children one by one (supervisor.h): the
 * workspace's router, each writable volume's router, runsc. On the channel
 * (rschan.h, the string field of STAGE and STAGED) and in the Domain
 * Store's process rows (store.h, the slot column) a child is named
 * "router", "runsc" or "vol<i>"; both sides work with the typed value and
 * convert only there. The parser is strict: "vol" with a decimal index
 * below LZ_RS_VOLUMES_MAX and no leading zero, nothing else.
 */
#pragma once

#include "supargs.h" /* LZ_RS_VOLUMES_MAX */

enum lz_rs_slot_kind {
    LZ_SLOT_ROUTER, /* the workspace's router */
    LZ_SLOT_RUNSC,
    LZ_SLOT_VOLUME, /* the router of writable volume `vol` */
};

struct lz_rs_slot {
    enum lz_rs_slot_kind kind;
    unsigned vol;
};

#define LZ_RS_SLOT_NAME_MAX 16

/* 0 with *ret, or -EINVAL (ret untouched). */
int lz_rs_slot_parse(const char *s, struct lz_rs_slot *ret);
/* The name of a valid slot into buf (LZ_RS_SLOT_NAME_MAX); returns buf. */
const char *lz_rs_slot_name(const struct lz_rs_slot *s, char *buf);
bool lz_rs_slot_equal(const struct lz_rs_slot *a, const struct lz_rs_slot *b);
