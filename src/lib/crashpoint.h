/* crashpoint.h — the test builds' crash points.
 *
 * lz_crash_point(STEP): when $LAZARET_TEST_CRASH equals STEP, the process
 * kills itself with SIGKILL right there, so the integration tests
 * (tests/integration/test_state.py, test_domains.py) can check what
 * recovery does with a process that died at that step. It logs nothing and
 * costs one getenv. It exists only in builds configured with
 * -Dtest_hooks=true (LZ_TEST_HOOKS, util.h lz_test_hook); elsewhere it is
 * an empty inline function, so a release binary holds no crash point.
 *
 * A module of its own so that a process that only passes crash points (the
 * Supervisor) needs no other module for them.
 */
#pragma once

#ifdef LZ_TEST_HOOKS
void lz_crash_point(const char *step);
#else
static inline void lz_crash_point(const char *step) { (void)step; }
#endif
