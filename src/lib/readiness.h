/* readiness.h — the one-line readiness report of a starting process.
 *
 * A process Lazaret starts and waits for reports, once, on a pipe it was
 * given, whether it is ready: the Host Coordinator to its starting client
 * (coordinator.h, `--ready-fd`), lazaret-router to the Supervisor once its
 * view is mounted (supervisor.c, `--ready-fd`). The report is a status and
 * a bounded message, one line:
 *
 *   "ready\n"            LZ_READY_OK
 *   "ready <detail>\n"   LZ_READY_OK with a detail, as bounded as a message
 *                        (the router: the FUSE transport it got)
 *   "error <message>\n"  LZ_READY_ERROR; the message is 1..LZ_ERROR_MAX-1
 *                        bytes, none of them a control character
 *
 * and nothing else: the decoder refuses any other word, a missing or an
 * early newline, an empty, oversized or control-character message, and
 * bytes after the newline. The writer makes any message fit (control
 * characters become '?', the rest is cut at the bound). The reader is
 * bounded in bytes and time.
 */
#pragma once

#include "util.h"

enum lz_ready_status {
    LZ_READY_OK,
    LZ_READY_ERROR,
};

/* The longest line: "error " + message + "\n". */
#define LZ_READY_LINE_MAX (6 + LZ_ERROR_MAX)

struct lz_ready {
    enum lz_ready_status status;
    char msg[LZ_ERROR_MAX]; /* the message, or LZ_READY_OK's detail; "" when none */
};

/* The line of (status, msg) in buf (cap >= LZ_READY_LINE_MAX; msg may be
 * NULL: with LZ_READY_ERROR it becomes "unknown error", with LZ_READY_OK
 * the line is "ready\n"). Returns its length. */
size_t lz_ready_encode(enum lz_ready_status status, const char *msg, char *buf, size_t cap);
/* 0 with *ret filled, or -EBADMSG (ret untouched). */
int lz_ready_decode(const char *buf, size_t len, struct lz_ready *ret);

/* Writes the line in one write (atomic on a pipe): 0 or -errno. */
int lz_ready_write(int fd, enum lz_ready_status status, const char *msg);
/* Reads one line from fd, at most timeout_ms in all: 0 with *ret filled,
 * -ETIMEDOUT, -EPIPE (end of file before any byte: the writer is gone
 * without a word), -EBADMSG (garbage, truncated, oversized), or -errno of
 * the read. */
int lz_ready_read(int fd, int timeout_ms, struct lz_ready *ret);
