/* common.c — what both the `lazaret` front end and lazaret-core share. */
#include "cli.h"
#include "util.h"

#include <stdarg.h>

char **lz_cli_argv;

void lz_cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("lazaret: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
