/* imgtool.h — running the image tools of the client (skopeo, mmdebstrap).
 *
 * A tool runs through the spawn broker (spawn.h) with a fixed argv (no
 * shell), found in the PATH of its environment (absolute entries only), and
 * the allow-listed environment of lz_tool_env() (procenv.h); stdin
 * /dev/null, stdout+stderr captured: each output line goes to the progress
 * callback as a phase ("bootstrap: I: ..."), the last LZ_TOOL_TAIL_LINES
 * lines are kept for the error message.
 *
 * The wait is bounded (LZ_TOOL_TIMEOUT_MIN): a stalled mirror or registry
 * must not hang `lazaret image` or `lazaret run` for ever. */
#pragma once

#include "prepare.h"

/* mmdebstrap of a minbase Debian takes a few minutes on a good mirror and
 * many on a slow one; a large `skopeo copy` likewise. Beyond 30 minutes the
 * tool is taken as hung: it gets SIGTERM (SIGKILL LZ_TOOL_STOP_GRACE_MS
 * later) and lz_tool_run returns -ETIMEDOUT. */
#define LZ_TOOL_TIMEOUT_MIN 30
#define LZ_TOOL_TIMEOUT_MS (LZ_TOOL_TIMEOUT_MIN * 60 * 1000)
#define LZ_TOOL_STOP_GRACE_MS 10000

#define LZ_TOOL_TAIL_LINES 4
struct lz_tool_out {
    lz_progress_fn progress;
    void *ud;
    const char *prefix; /* progress phase prefix, e.g. "bootstrap" */
    char line[512];
    size_t line_len;
    char tail[LZ_TOOL_TAIL_LINES][256];
    size_t n_tail;
};

/* Runs argv (argv[0] a program name looked up in PATH) in directory cwd
 * (NULL: unchanged), its output into o, for at most timeout_ms. Returns
 * 0 with *ret_status = exit status (128 + signal when killed); -ENOENT
 * when the program is not installed; -ETIMEDOUT when it ran longer than
 * timeout_ms (and was stopped); else the spawn error. No message is set:
 * the caller names the tool in its own. */
int lz_tool_run(char *const argv[], const char *cwd, int timeout_ms, struct lz_tool_out *o, int *ret_status);
/* The kept output lines joined with " | ". */
void lz_tool_tail(const struct lz_tool_out *o, char *out, size_t size);
/* Whether the kept output looks like a network failure (for skopeo). */
bool lz_tool_unreachable(const struct lz_tool_out *o);
