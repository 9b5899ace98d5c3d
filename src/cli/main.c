/* main.c — `lazaret` command dispatch. */
#include "cli.h"
#include "util.h"

#include <stdarg.h>

static void usage(FILE *f) {
    fputs("Usage: lazaret COMMAND [OPTIONS]\n"
          "\n"
          "Run AI coding agents in a rootless gVisor sandbox on this workspace.\n"
          "\n"
          "Commands:\n"
          "  run [-p NAME] [--config FILE] [-- CMD ARGS...]\n"
          "                     open a shell (or run CMD) in the sandbox of this directory\n"
          "  config check       validate and print the resolved configuration\n"
          "  image bootstrap    build the default Debian base image with mmdebstrap\n"
          "  image ls           list images and prepared root filesystems\n"
          "  image gc [--dry-run]\n"
          "                     reclaim prepared root filesystems no Domain uses\n"
          "  state ls|inspect|verify|reset\n"
          "                     list, check or reset the Domains' persistent state\n"
          "  audit [DOMAIN] [--json]\n"
          "                     list a Domain's escalation requests, verify the audit chain\n"
          "  ps [--json]        list running Domains and their sessions\n"
          "  stop [DOMAIN] [--force]\n"
          "                     stop a running Domain (default: this directory's)\n"
          "  net [DOMAIN]       what a running Domain's sandbox may reach by name: learned\n"
          "                     and refused names\n"
          "  events [DOMAIN] [--json]\n"
          "                     what a running Domain's sandbox was refused in the\n"
          "                     workspace, why, and what to do instead\n"
          "  doctor             check the host prerequisites\n"
          "\n"
          "Options:\n"
          "  -h, --help         show this help (`lazaret COMMAND --help` for a command)\n"
          "  -V, --version      show the version\n"
          "\n"
          "See lazaret(1) and lazaret.toml(5).\n",
          f);
}

static int cmd_run(int argc, char **argv) { return lz_cmd_run(argc, argv, &lz_run_core); }

static const struct lz_cli_command commands[] = {
    { "run", cmd_run },
    { "config", lz_cmd_config },
    { "image", lz_cmd_image },
    { "doctor", lz_cmd_doctor },
    { "state", lz_cmd_state },
    { "audit", lz_cmd_audit },
    { "ps", lz_cmd_ps },
    { "stop", lz_cmd_stop },
    { "net", lz_cmd_net },
    { "events", lz_cmd_events },
    { NULL, NULL },
};

int main(int argc, char **argv) {
    lz_cli_argv = argv;
    int ret;
    if (lz_cli_help_first(argc, argv, usage, &ret))
        return ret;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("lazaret %s\n", LZ_VERSION);
        return LZ_EXIT_OK;
    }
    if (lz_cli_dispatch(commands, argc, argv, &ret))
        return ret;
    if (!strncmp(cmd, "__", 2))
        return lz_cmd_internal(argc - 1, argv + 1);
    lz_cli_error("unknown command '%s' (see `lazaret --help`)", cmd);
    return LZ_EXIT_USAGE;
}
