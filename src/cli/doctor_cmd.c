/* doctor_cmd.c — `lazaret doctor`. */
#include "cli.h"
#include "config.h"
#include "control.h"
#include "doctor.h"

#include <jansson.h>

/* The transport each running Domain's workspace router got: what the
 * host allows is one thing, what a router got (a REGISTER refused, a
 * Domain started before the switch) another. */
static void print_transports(void) {
    struct lz_error err = { 0 };
    json_t *list = NULL;
    if (lz_control_list(&list, &err) < 0)
        return;
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d) {
        const char *ft = json_string_value(json_object_get(d, "fuse_transport"));
        printf("[info] Domain %.12s workspace FUSE transport: %s\n", json_string_value(json_object_get(d, "domain_id")),
               ft ? ft : "not reported");
    }
    json_decref(list);
}

int lz_cmd_doctor(int argc, char **argv) {
    const char *config_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts("Usage: lazaret doctor [--config FILE]\n\n"
                 "Checks every host prerequisite and says what to do when one fails.\n"
                 "Exit status 0 when all pass, 1 otherwise.");
            return LZ_EXIT_OK;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config_path = argv[++i];
            continue;
        }
        lz_cli_error("doctor: unknown argument '%s'", argv[i]);
        return LZ_EXIT_USAGE;
    }
    struct lz_error err = { 0 };
    struct lz_config_opts co = { .config_path = config_path, .no_workspace = true };
    struct lz_config *cfg = NULL;
    const char *data_root = NULL;
    if (lz_config_load(&co, &cfg, &err) == 0)
        data_root = cfg->data_root;
    struct lz_check *v;
    size_t n;
    lz_doctor_run(data_root, &v, &n);
    int failed = 0;
    bool color = isatty(STDOUT_FILENO);
    for (size_t i = 0; i < n; i++) {
        const char *tag = v[i].status == LZ_CHECK_OK ? "ok  " : v[i].status == LZ_CHECK_WARN ? "warn" : "FAIL";
        const char *col = v[i].status == LZ_CHECK_OK ? "\033[32m"
            : v[i].status == LZ_CHECK_WARN           ? "\033[33m"
                                                     : "\033[31m";
        printf("%s[%s]%s %-32s %s\n", color ? col : "", tag, color ? "\033[0m" : "", v[i].name, v[i].detail);
        /* An informative check may say what to do too (optional). */
        if (v[i].status != LZ_CHECK_OK || v[i].fix[0])
            printf("       -> %s\n", v[i].fix);
        if (v[i].status == LZ_CHECK_FAIL)
            failed++;
    }
    if (!cfg)
        printf("[FAIL] configuration                    %s\n", err.msg), failed++;
    print_transports();
    free(v);
    lz_config_free(cfg);
    return failed ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
}
