/* thin.c — the `lazaret` front end.
 *
 * Joining a running Domain is the hot path (`lazaret run` in a second
 * terminal, an agent's tool calls): this binary does only that, plus `ps`
 * and `stop`, and links none of the image, Git or netlink libraries, so it
 * starts in a few milliseconds. Everything else — starting a Domain (image
 * preparation), the other commands, the coordinator and the supervisor —
 * is lazaret-core (libexec), which this binary execs with the same command
 * line.
 */
#include "cli.h"
#include "paths.h"
#include "util.h"

int lz_cli_exec_core(void) {
    struct lz_error err = { 0 };
    _cleanup_free_ char *core = NULL;
    if (lz_libexec_path("lazaret-core", &core, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_LAUNCH;
    }
    execv(core, lz_cli_argv);
    lz_cli_error("cannot run %s: %s", core, strerror(errno));
    return LZ_EXIT_LAUNCH;
}

/* A Domain that is not running is started by lazaret-core (this binary
 * has no image code): it runs the same command line from the start. */
static int start_in_core(const struct lz_config *cfg, void **state, const char **ret, struct lz_error *err) {
    (void)cfg;
    (void)state;
    (void)ret;
    int code = lz_cli_exec_core();
    return lz_error_set(err, -ENOEXEC, "cannot start the Domain (status %d)", code);
}

static const struct lz_run_starter exec_core = { .prepare = start_in_core };

static int cmd_run(int argc, char **argv) { return lz_cmd_run(argc, argv, &exec_core); }

static const struct lz_cli_command commands[] = {
    { "run", cmd_run },    { "ps", lz_cmd_ps },         { "stop", lz_cmd_stop },
    { "net", lz_cmd_net }, { "events", lz_cmd_events }, { NULL, NULL },
};

int main(int argc, char **argv) {
    lz_cli_argv = argv;
    int ret;
    if (lz_cli_dispatch(commands, argc, argv, &ret))
        return ret;
    if (argc >= 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
        printf("lazaret %s\n", LZ_VERSION);
        return LZ_EXIT_OK;
    }
    return lz_cli_exec_core();
}
