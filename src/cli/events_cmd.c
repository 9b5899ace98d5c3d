/* events_cmd.c — `lazaret events`: what a running Domain's routers
 * refused and why (the Git property, the Ignored Workspace State's moves;
 * refusal.h, asked of the Domain's coordinator; docs/security-git.md,
 * "When something is refused"). */
#include <jansson.h>
#include <time.h>

#include "cli.h"
#include "control.h"

static void events_usage(FILE *f) {
    fputs("Usage: lazaret events [DOMAIN] [--json] [-p NAME] [--config FILE]\n"
          "\n"
          "Show the operations a running Domain's sandbox was refused in the workspace\n"
          "(a new Git repository, Git configuration and hooks, moves across git-ignored\n"
          "paths, ...): when, the path, why, and what to do instead. The newest refusals\n"
          "are kept (at most 256 per Domain run), with counts of all of them.\n"
          "\n"
          "DOMAIN is a Domain ID or a unique prefix of one (see `lazaret ps`); without\n"
          "it, the Domain of the current directory and profile (-p, default profile).\n"
          "\n"
          "Options:\n"
          "  --json           the coordinator's report as JSON\n"
          "  -p, --profile    profile of the current directory's Domain\n"
          "  --config FILE    read FILE instead of the default configuration\n",
          f);
}

static const char *str(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void print_text(json_t *o) {
    json_int_t total = json_integer_value(json_object_get(o, "total"));
    json_int_t kept = json_integer_value(json_object_get(o, "kept"));
    json_int_t dropped = json_integer_value(json_object_get(o, "dropped"));
    if (total == 0 && dropped == 0) {
        puts("nothing was refused in this Domain run");
        return;
    }
    printf("%" JSON_INTEGER_FORMAT " refused operation%s in this Domain run", total, total == 1 ? "" : "s");
    if (kept < total)
        printf(" (the newest %" JSON_INTEGER_FORMAT " kept)", kept);
    if (dropped)
        printf("; %" JSON_INTEGER_FORMAT " more not recorded (the coordinator fell behind)", dropped);
    fputs(":", stdout);
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(json_object_get(o, "by_kind"), k, v) {
        printf("%s %s %" JSON_INTEGER_FORMAT, first ? "" : ",", k, json_integer_value(v));
        first = false;
    }
    fputs("\n", stdout);
    /* Every string here was escaped by the coordinator (escape.h): only
     * printable text reaches the terminal. */
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "events"), i, e) {
        time_t t = (time_t)(json_integer_value(json_object_get(e, "at_ms")) / 1000);
        struct tm tm;
        char when[32];
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%H:%M:%S", &tm);
        printf("%s  %-14s %s %s", when, str(e, "kind"), str(e, "op"), str(e, "path"));
        if (json_object_get(e, "path2"))
            printf(" -> %s", str(e, "path2"));
        printf(": %s\n", str(e, "error"));
        printf("          why: %s", str(json_object_get(o, "reasons"), str(e, "why")));
        if (json_object_get(e, "detail"))
            printf(" (%s)", str(e, "detail"));
        printf("\n          instead: %s\n", str(json_object_get(o, "hints"), str(e, "kind")));
    }
}

int lz_cmd_events(int argc, char **argv) {
    const char *profile = NULL, *config_path = NULL;
    bool as_json = false;
    const struct lz_cli_option opts[] = {
        { "profile", 'p', &profile, NULL },
        { "config", 0, &config_path, NULL },
        { "json", 0, NULL, &as_json },
        { NULL, 0, NULL, NULL },
    };
    int first;
    if (!lz_cli_getopt(argc, argv, "events", opts, false, events_usage, &first))
        return first;
    json_t *list = NULL, *hit = NULL;
    int ex = lz_cli_running_operand(argc, argv, first, profile, config_path, events_usage, &list, &hit);
    if (ex)
        return ex;
    struct lz_error err = { 0 };
    json_t *o = NULL;
    int r = lz_control_events(json_string_value(json_object_get(hit, "socket")), &o, &err);
    json_decref(list);
    if (r < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (as_json) {
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s ? s : "{}");
        free(s);
    } else {
        print_text(o);
    }
    json_decref(o);
    return LZ_EXIT_OK;
}
