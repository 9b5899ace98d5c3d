/* libFuzzer target: the hot-reload channel (hotnotify.c), whose bytes init
 * reads from a pipe the agent may reach. Every record taken must be a valid
 * path that encodes back to the same bytes; the walk always advances. The
 * records also go through the router's queue, which must stay within its
 * bounds and give back only valid records. */
#include "hotnotify.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static struct lz_hot_queue q;
static unsigned data_byte;

static void check_queue(void) {
    if (q.n > LZ_HOT_QUEUE_PATHS || q.used > sizeof q.buf)
        __builtin_trap();
    char b[4096];
    size_t count = 0;
    size_t len = lz_hot_queue_peek(&q, b, sizeof b, &count);
    size_t off = 0, seen = 0;
    while (off < len) {
        size_t used = 0;
        const char *p = NULL;
        if (lz_hot_next(b + off, len - off, &used, &p) != 1)
            __builtin_trap();
        off += used;
        seen++;
    }
    if (seen != count)
        __builtin_trap();
    if (count && (data_byte++ & 3) == 0)
        lz_hot_queue_consume(&q, count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    size_t off = 0;
    lz_hot_queue_init(&q);
    while (off < size) {
        size_t used = 0;
        const char *path = NULL;
        int r = lz_hot_next(buf + off, size - off, &used, &path);
        if (r == 0)
            break;
        if (used == 0 || used > size - off)
            __builtin_trap();
        if (r == 1) {
            char b[LZ_HOT_RECORD_MAX];
            if (lz_hot_encode(path, b, sizeof b) != (int)used || memcmp(b, buf + off, used))
                __builtin_trap();
            if (lz_hot_queue_add(&q, path) != 0)
                __builtin_trap();
            check_queue();
        }
        off += used;
    }
    return 0;
}
