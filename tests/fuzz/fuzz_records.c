/* libFuzzer target: the small text and binary records Lazaret parses back
 * — control requests from clients (proto.h), pidfs identities and evidence
 * read from the Domain Store (procid.h, recovery.h), State Anchor mount
 * identities reported by the Supervisor (anchor.h). */
#include "anchor.h"
#include "procid.h"
#include "proto.h"
#include "recovery.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t type;
    uint32_t flags;
    if (lz_control_decode(data, size, &type, &flags) == 0 && type != LZ_MSG_STATUS && type != LZ_MSG_NET &&
        type != LZ_MSG_EVENTS && type != LZ_MSG_STOP)
        __builtin_trap();
    if (size > 4096)
        return 0;
    char *s = lz_xstrndup((const char *)data, size);
    struct lz_procid id;
    if (lz_procid_parse(s, &id) == 0) {
        /* A parsed identity formats back to something that parses to it. */
        char buf[200];
        struct lz_procid again;
        lz_procid_format(&id, buf, sizeof buf);
        if (lz_procid_parse(buf, &again) != 0 || again.dev != id.dev || again.ino != id.ino || again.pid != id.pid ||
            strcmp(again.boot_id, id.boot_id) != 0)
            __builtin_trap();
    }
    (void)lz_evidence_u64(s, "userns");
    (void)lz_anchor_ident_mntns(s);
    free(s);
    return 0;
}
