/* internal.c — the re-executed internal roles: `lazaret __coordinator` and
 * `lazaret __supervisor`. Not for users; arguments come from the parent. */
#include "cli.h"
#include "coordinator.h"
#include "supervisor.h"

static int parse_fd(const char *s) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || v < 0 || v > 65535)
        return -1;
    return (int)v;
}

static void internal_usage(FILE *out) {
    fputs("Usage: lazaret __coordinator|__supervisor OPTIONS (started by lazaret itself, not by users)\n", out);
}

static int coordinator(int argc, char **argv) {
    struct lz_coordinator_args a = { .ready_fd = -1, .env_fd = -1, .first_session = -1 };
    const char *ready_fd = NULL, *env_fd = NULL, *first = NULL;
    const struct lz_cli_option opts[] = {
        { "ready-fd", 0, &ready_fd, NULL },      { "workspace", 0, &a.workspace, NULL },
        { "domain", 0, &a.expect_domain, NULL }, { "fingerprint", 0, &a.expect_fingerprint, NULL },
        { "artifact", 0, &a.artifact_id, NULL }, { "config", 0, &a.config_path, NULL },
        { "profile", 0, &a.profile, NULL },      { "env-fd", 0, &env_fd, NULL },
        { "first-session", 0, &first, NULL },    { NULL, 0, NULL, NULL },
    };
    int first_arg;
    if (!lz_cli_getopt(argc, argv, "__coordinator", opts, false, internal_usage, &first_arg))
        return first_arg;
    if (first)
        a.first_session = !strcmp(first, "tty") ? 1 : !strcmp(first, "pipes") ? 0 : -1;
    if (ready_fd)
        a.ready_fd = parse_fd(ready_fd);
    if (env_fd)
        a.env_fd = parse_fd(env_fd);
    if (!a.workspace || !a.expect_domain || !a.expect_fingerprint || !a.artifact_id) {
        lz_cli_error("__coordinator: missing arguments");
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
