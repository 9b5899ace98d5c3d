/* common.c — what both the `lazaret` front end and lazaret-core share. */
#include "cli.h"
#include "progress.h"
#include "escape.h"
#include "util.h"

#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

char **lz_cli_argv;

void lz_cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("lazaret: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool lz_cli_getopt(int argc, char **argv, const char *what, const struct lz_cli_option *opts, bool in_order,
                   void (*usage)(FILE *out), int *ret) {
    struct option longopts[LZ_CLI_MAX_OPTIONS + 2];
    char shortopts[3 * LZ_CLI_MAX_OPTIONS + 8];
    size_t n = 0, o = 0;
    if (in_order)
        shortopts[o++] = '+';
    shortopts[o++] = ':'; /* a missing argument is ':', not '?' */
    for (; opts[n].name; n++) {
        if (n >= LZ_CLI_MAX_OPTIONS)
            abort(); /* a programming error, not input */
        /* Long-only options answer 256 + their index: never a character. */
        bool takes = opts[n].arg || opts[n].list;
        longopts[n] = (struct option){ opts[n].name, takes ? required_argument : no_argument, NULL,
                                       opts[n].short_name ? opts[n].short_name : 256 + (int)n };
        if (opts[n].short_name) {
            shortopts[o++] = opts[n].short_name;
            if (takes)
                shortopts[o++] = ':';
        }
    }
    longopts[n] = (struct option){ "help", no_argument, NULL, 'h' };
    longopts[n + 1] = (struct option){ NULL, 0, NULL, 0 };
    shortopts[o++] = 'h';
    shortopts[o] = '\0';

    optind = 0; /* glibc: full re-initialisation, main may have used getopt */
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            *ret = LZ_EXIT_OK;
            return false;
        }
        if (c == ':' || c == '?') {
            if (c == ':')
                lz_cli_error("%s: option %s needs an argument", what, argv[optind - 1]);
            else
                lz_cli_error("%s: unknown option %s", what, argv[optind - 1]);
            *ret = LZ_EXIT_USAGE;
            return false;
        }
        size_t i = 0;
        while (i < n && (opts[i].short_name ? opts[i].short_name : 256 + (int)i) != c)
            i++;
        if (i == n)
            abort();
        if (opts[i].list) {
            if (opts[i].list->n >= LZ_CLI_LIST_MAX) {
                lz_cli_error("%s: --%s given more than %d times", what, opts[i].name, LZ_CLI_LIST_MAX);
                *ret = LZ_EXIT_USAGE;
                return false;
            }
            opts[i].list->v[opts[i].list->n++] = optarg;
        } else if (opts[i].arg) {
            *opts[i].arg = optarg;
        } else {
            *opts[i].flag = true;
        }
    }
    *ret = optind;
    return true;
}

bool lz_cli_help_first(int argc, char **argv, void (*usage)(FILE *out), int *ret) {
    if (argc < 2) {
        usage(stderr);
        *ret = LZ_EXIT_USAGE;
        return true;
    }
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
        usage(stdout);
        *ret = LZ_EXIT_OK;
        return true;
    }
    return false;
}

bool lz_cli_dispatch(const struct lz_cli_command *cmds, int argc, char **argv, int *ret) {
    if (argc < 2)
        return false;
    for (; cmds->name; cmds++)
        if (!strcmp(argv[1], cmds->name)) {
            *ret = cmds->fn(argc - 1, argv + 1);
            return true;
        }
    return false;
}

void lz_cli_human_bytes(uint64_t n, char *out, size_t size) { lz_progress_bytes(n, out, size); }

int lz_cli_print_json(json_t *root) {
    char *s = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    if (!s) {
        lz_cli_error("cannot format JSON");
        return LZ_EXIT_FAILURE;
    }
    puts(s);
    free(s);
    return LZ_EXIT_OK;
}

void lz_cli_iso_time(int64_t ms, char *out, size_t size) {
    out[0] = '\0';
    if (ms <= 0)
        return;
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *lz_cli_esc(const char *s, const char *if_null) {
    char *out = NULL;
    if (!s)
        return lz_xstrdup(if_null);
    if (lz_escape(s, strlen(s), 0, &out) < 0)
        return lz_xstrdup("(unprintable)");
    return out;
}

bool lz_cli_getopt_sub(int argc, char **argv, const char *command, const struct lz_cli_option *opts, bool in_order,
                       void (*usage)(FILE *out), char ***ret_args, size_t *ret_n_args, int *ret) {
    char what[64];
    snprintf(what, sizeof what, "%s %s", command, argc > 1 ? argv[1] : "");
    int first;
    if (!lz_cli_getopt(argc - 1, argv + 1, what, opts, in_order, usage, &first)) {
        *ret = first;
        return false;
    }
    *ret_args = argv + 1 + first;
    *ret_n_args = (size_t)(argc - 1 - first);
    return true;
}
