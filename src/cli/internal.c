/* internal.c — the re-executed internal roles: `lazaret __coordinator` and
 * `lazaret __supervisor`. Not for users; arguments come from the parent. */
#include "cli.h"
#include "coordinator.h"
#include "supervisor.h"

static int coordinator(int argc, char **argv) {
    struct lz_coordinator_args a;
    struct lz_error err = { 0 };
    if (lz_coordargs_decode(argc - 1, argv + 1, &a, &err) < 0) {
        lz_cli_error("__coordinator: %s", err.msg);
        return LZ_EXIT_USAGE;
    }
    return lz_coordinator_main(&a);
}

static int supervisor(int argc, char **argv) {
    struct lz_supervisor_args a;
    struct lz_error err = { 0 };
    if (lz_supargs_decode(argc - 1, argv + 1, &a, &err) < 0) {
        lz_cli_error("__supervisor: %s", err.msg);
        return LZ_EXIT_USAGE;
    }
    int r = lz_supervisor_main(&a);
    lz_supargs_clear(&a);
    return r;
}

int lz_cmd_internal(int argc, char **argv) {
    if (!strcmp(argv[0], "__coordinator"))
        return coordinator(argc, argv);
    if (!strcmp(argv[0], "__supervisor"))
        return supervisor(argc, argv);
    lz_cli_error("unknown command '%s' (see `lazaret --help`)", argv[0]);
    return LZ_EXIT_USAGE;
}
