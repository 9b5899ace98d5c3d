/* net_cmd.c — `lazaret net`: what a running Domain's sandbox may reach by
 * name, what it learned and what was refused (the resolver's report,
 * resolver.h, asked of the Domain's coordinator; docs/network.md). */
#include "cli.h"
#include "control.h"

static void net_usage(FILE *f) {
    fputs("Usage: lazaret net [DOMAIN] [-p NAME] [--config FILE]\n"
          "\n"
          "Show what a running Domain's sandbox may reach by name: the egress preset\n"
          "and rules, the names it looked up and learned (their addresses, ports and\n"
          "how long their routes live), and the names that were refused and why.\n"
          "\n"
          "DOMAIN is a Domain ID or a unique prefix of one (see `lazaret ps`); without\n"
          "it, the Domain of the current directory and profile (-p, default profile).\n"
          "\n"
          "Options:\n"
          "  -p, --profile    profile of the current directory's Domain\n"
          "  --config FILE    read FILE instead of the default configuration\n",
          f);
}

int lz_cmd_net(int argc, char **argv) {
    const char *profile = NULL, *config_path = NULL;
    const struct lz_cli_option opts[] = {
        { "profile", 'p', &profile, NULL },
        { "config", 0, &config_path, NULL },
        { NULL, 0, NULL, NULL },
    };
    int first;
    if (!lz_cli_getopt(argc, argv, "net", opts, false, net_usage, &first))
        return first;
    json_t *list = NULL, *hit = NULL;
    int ex = lz_cli_running_operand(argc, argv, first, profile, config_path, net_usage, &list, &hit);
    if (ex)
        return ex;
    struct lz_error err = { 0 };
    char *text = NULL;
    int r = lz_control_net(json_string_value(json_object_get(hit, "socket")), &text, &err);
    json_decref(list);
    if (r < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    fputs(text, stdout);
    if (text[0] && text[strlen(text) - 1] != '\n')
        fputc('\n', stdout);
    free(text);
    return LZ_EXIT_OK;
}
