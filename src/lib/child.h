/* child.h — a cleanup attribute for a child of the spawn broker (spawn.h):
 * at scope exit a child still held is killed and reaped through its pidfd,
 * never by PID. Its own header so that spawn.h stays as it is; if spawn.h
 * gains the same attribute, this one steps aside. */
#pragma once

#include "spawn.h"

#include <signal.h>

static inline void lz_child_killp(struct lz_child *c) {
    if (c->pidfd >= 0) {
        int st;
        lz_child_signal(c, SIGKILL);
        lz_child_wait(c, -1, &st);
    }
    lz_child_close(c);
}
#ifndef _cleanup_child_
#define _cleanup_child_ _cleanup_(lz_child_killp)
#endif
