/* procid.h — durable process identity (pidfs).
 *
 * A process Lazaret owns is recorded by its pidfs identity: the boot ID of
 * the machine, and the device and inode of its pidfd (pidfs, kernel >= 6.9,
 * gives every process a unique inode for the life of the boot). The PID and
 * the start time (clock ticks since boot, /proc/PID/stat field 22) are kept
 * as locators only: they say where to look, never whom to signal.
 *
 * To act on a recorded process, lz_procid_open() opens a pidfd for the
 * locator PID and returns it only when that pidfd's identity equals the
 * record exactly (same boot, same pidfs device and inode). Signals then go
 * through that pidfd (pidfd_send_signal), so a PID reused by an unrelated
 * process is never signalled.
 */
#pragma once

#include "util.h"
#include <sys/types.h>

struct lz_procid {
    char boot_id[37];   /* /proc/sys/kernel/random/boot_id, "" when unset */
    uint64_t dev;       /* pidfs device of the pidfd */
    uint64_t ino;       /* pidfs inode of the pidfd */
    int64_t pid;        /* locator */
    int64_t start_time; /* locator: clock ticks after boot, -1 unknown */
};

/* This machine's boot ID (cached), or "" when unreadable. */
const char *lz_boot_id(void);

/* Identity of the process behind pidfd (pid is the locator to store). */
int lz_procid_from_pidfd(int pidfd, pid_t pid, struct lz_procid *ret);
/* Identity of the calling process. */
int lz_procid_self(struct lz_procid *ret);

/* Opens a pidfd for the recorded process. Returns the pidfd (>= 0) when a
 * process with exactly that identity is alive; 0 is never returned as "gone":
 * -ESRCH when it is gone (no process at the locator, a different process
 * there, or a different boot); other -errno on error. */
int lz_procid_open(const struct lz_procid *id);

/* Polls a pidfd until the process exits, at most timeout_ms.
 * 0 when gone, -ETIMEDOUT otherwise. Works for non-children. */
int lz_pidfd_wait_gone(int pidfd, int timeout_ms);

/* For the recorded process: if it is alive with exactly this identity, send
 * SIGKILL through a pidfd and wait (bounded) until it is gone. Returns 1 if
 * it was killed, 0 if it was already gone (or is not ours), -ETIMEDOUT if it
 * survived the wait, other -errno on error. */
int lz_procid_kill(const struct lz_procid *id, int timeout_ms);

/* Text form "BOOTID:DEV:INO:PID:START" and back (for logs and JSON). */
void lz_procid_format(const struct lz_procid *id, char *buf, size_t len);
int lz_procid_parse(const char *s, struct lz_procid *ret);
