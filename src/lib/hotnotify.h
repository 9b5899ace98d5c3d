/* hotnotify.h — the hot-reload channel: which workspace paths the host
 * changed, from the workspace router to lazaret-init (docs/hot-reload.md).
 *
 * gVisor raises no inotify event for a change it did not make (gVisor issue
 * 8089), so a watcher inside misses what the host writes. The router
 * watches the host tree already (src/router/watch.c); it tells init's
 * helper which paths changed, and the helper "pokes" each one through the
 * sandbox's own file system: it sets the path's mtime to the poke value
 * below (LZ_HOT_POKE_SEC/NSEC). gVisor then raises IN_MODIFY for the path
 * and its directory (and, for a regular file opened for writing around the
 * poke, IN_OPEN and IN_CLOSE_WRITE). The router recognises that exact
 * value (lz_hot_is_poke) and changes nothing on the host: it answers with
 * the file's real attributes, so the host file's mtime and content stay
 * what the host made them, and a stat inside sees them too.
 *
 * Contract:
 * - The channel is a pipe: the router holds its write end, the sandbox's
 *   init reads it as its stdin. Nothing flows back: the sandbox cannot make
 *   the router or the host do anything through it.
 * - The router writes LZ_HOT_HELLO first; init pokes nothing unless the
 *   channel starts with it, so a pipe on init's stdin that is not this
 *   channel (a bare `runsc run` of Lazaret's spec in a pipeline, a
 *   workspace bound without the router, which would take the poke's mtime
 *   for real) makes it do nothing.
 * - A record is a path relative to the workspace followed by one NUL byte:
 *   "dir/name\0". "." names the workspace itself (a lost or collapsed batch:
 *   watchers rescan). A path is 1..LZ_HOT_PATH_MAX bytes, has no leading or
 *   trailing '/', no empty, "." or ".." component (except the lone "."),
 *   and no control bytes. NUL cannot occur in a path, so a reader that
 *   drops a bad record resynchronises at the next NUL: bytes the agent might
 *   inject lose notifications at worst.
 * - The codec is pure (no I/O, no allocation), so the static init links it
 *   alone; it is unit-tested (tests/unit/test_hotnotify.c) and fuzzed
 *   (tests/fuzz/fuzz_hotnotify.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define LZ_HOT_HELLO "lazaret-hot 1\n"
#define LZ_HOT_PATH_MAX 1024
/* The largest record: a path and its NUL. A writer writes whole batches of
 * at most PIPE_BUF bytes, so records never interleave. */
#define LZ_HOT_RECORD_MAX (LZ_HOT_PATH_MAX + 1)

/* Whether the `len` bytes at `p` are a path a record may carry. */
bool lz_hot_path_valid(const char *p, size_t len);

/* Encodes `path` as a record into buf[0..cap): returns its length, -EINVAL
 * for a path that is not valid, -ENOSPC when it does not fit. */
int lz_hot_encode(const char *path, char *buf, size_t cap);

/* Takes the first record of buf[0..len). Returns 1 with *ret_path (inside
 * buf, NUL-terminated there) and *ret_used; 0 when buf holds no complete
 * record yet (nothing used; the caller reads more); -EINVAL for a bad
 * record, -EMSGSIZE when more than LZ_HOT_RECORD_MAX bytes hold no NUL:
 * both with *ret_used set to the bytes to drop (up to and with the next NUL,
 * or all of them), *ret_path untouched. */
int lz_hot_next(const char *buf, size_t len, size_t *ret_used, const char **ret_path);

/* The poke's mtime: 1970-01-01 00:00:00.999999937 UTC. A setattr that sets
 * this mtime and nothing else is a poke: the router changes nothing. A
 * program inside that asks for this exact mtime gets its file unchanged
 * (documented in docs/hot-reload.md); no other value is affected. */
#define LZ_HOT_POKE_SEC 0
#define LZ_HOT_POKE_NSEC 999999937L

static inline bool lz_hot_is_poke(const struct timespec *ts) {
    return ts->tv_sec == LZ_HOT_POKE_SEC && ts->tv_nsec == LZ_HOT_POKE_NSEC;
}

/* The router's queue of paths not yet written to the channel: bounded in
 * count and bytes, never allocating, so a flood of host changes coalesces
 * instead of growing memory or blocking. A path already queued is not
 * queued again. When one does not fit, its parent directory takes the
 * place of everything queued below it and of the path (the helper pokes
 * the directory: its watchers rescan it); when that does not fit either,
 * the grandparent, and so on up to "." (the workspace), which is kept
 * apart and always fits. */
#define LZ_HOT_QUEUE_PATHS 256
#define LZ_HOT_QUEUE_BYTES 16384

struct lz_hot_queue {
    size_t n;                               /* paths queued */
    size_t used;                            /* bytes of buf in use */
    unsigned short len[LZ_HOT_QUEUE_PATHS]; /* each path's length, without its NUL */
    bool all;                               /* "." queued (kept apart: always fits) */
    char buf[LZ_HOT_QUEUE_BYTES];           /* the paths, NUL-terminated, in order */
    unsigned long collapsed;                /* paths queued as an ancestor instead */
};

void lz_hot_queue_init(struct lz_hot_queue *q);

/* Queues `path` (or an ancestor, see above). -EINVAL for a path that is
 * not valid (nothing queued). */
int lz_hot_queue_add(struct lz_hot_queue *q, const char *path);

bool lz_hot_queue_empty(const struct lz_hot_queue *q);

/* Encodes the first queued records into buf[0..cap) (whole records only,
 * at least one when cap >= LZ_HOT_RECORD_MAX): returns the bytes and sets
 * *ret_count; the queue is unchanged until lz_hot_queue_consume(count). */
size_t lz_hot_queue_peek(const struct lz_hot_queue *q, char *buf, size_t cap, size_t *ret_count);
void lz_hot_queue_consume(struct lz_hot_queue *q, size_t count);
