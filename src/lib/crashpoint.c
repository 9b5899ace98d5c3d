/* crashpoint.c — see crashpoint.h. */
#include "crashpoint.h"

#ifdef LZ_TEST_HOOKS
#include <signal.h>
#include <string.h>

#include "util.h"

void lz_crash_point(const char *step) {
    const char *want = lz_test_hook("LAZARET_TEST_CRASH");
    if (want && !strcmp(want, step))
        raise(SIGKILL);
}
#endif
