/* rsslot.c — see rsslot.h. */
#include "rsslot.h"

int lz_rs_slot_parse(const char *s, struct lz_rs_slot *ret) {
    if (!strcmp(s, "router")) {
        *ret = (struct lz_rs_slot){ LZ_SLOT_ROUTER, 0 };
        return 0;
    }
    if (!strcmp(s, "runsc")) {
        *ret = (struct lz_rs_slot){ LZ_SLOT_RUNSC, 0 };
        return 0;
    }
    size_t n = strlen(s);
    if (n < 4 || n > 5 || strncmp(s, "vol", 3) || strspn(s + 3, "0123456789") != n - 3 || (n == 5 && s[3] == '0'))
        return -EINVAL;
    unsigned v = (unsigned)strtoul(s + 3, NULL, 10);
    if (v >= LZ_RS_VOLUMES_MAX)
        return -EINVAL;
    *ret = (struct lz_rs_slot){ LZ_SLOT_VOLUME, v };
    return 0;
}

const char *lz_rs_slot_name(const struct lz_rs_slot *s, char *buf) {
    switch (s->kind) {
    case LZ_SLOT_ROUTER: snprintf(buf, LZ_RS_SLOT_NAME_MAX, "router"); break;
    case LZ_SLOT_RUNSC: snprintf(buf, LZ_RS_SLOT_NAME_MAX, "runsc"); break;
    case LZ_SLOT_VOLUME: snprintf(buf, LZ_RS_SLOT_NAME_MAX, "vol%u", s->vol); break;
    }
    return buf;
}

bool lz_rs_slot_equal(const struct lz_rs_slot *a, const struct lz_rs_slot *b) {
    return a->kind == b->kind && (a->kind != LZ_SLOT_VOLUME || a->vol == b->vol);
}
