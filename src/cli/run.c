/* run.c — `lazaret run`: start or join the Domain of (profile, workspace). */
#include "cli.h"
#include "client.h"
#include "config.h"
#include "escape.h"
#include "worktree.h"

#include <sodium.h>

static void usage(FILE *f) {
    fputs("Usage: lazaret run [-p|--profile NAME] [--config FILE] [--publish [ADDR:]PORT[:SANDBOXPORT]]...\n"
          "                   [--worktree NAME] [-- CMD ARGS...]\n"
          "\n"
          "Starts (or joins) the sandbox of the current directory and the profile,\n"
          "and attaches this terminal to it. In a subdirectory of a Git repository\n"
          "the workspace is the repository's top level and the session starts in\n"
          "the subdirectory (/workspace/SUBDIR). Without CMD: an interactive login\n"
          "shell, or the profile's `command` (claude, codex, opencode).\n"
          "With CMD: runs it; stdin/stdout/stderr are plain\n"
          "pipes when they are not a terminal, and lazaret exits with the\n"
          "command's status (128+N when it died of signal N).\n"
          "\n"
          "  -p, --profile NAME   agent profile (default: \"default\")\n"
          "      --config FILE    configuration file (default: $XDG_CONFIG_HOME/lazaret/config.toml)\n"
          "      --publish [ADDR:]PORT[:SANDBOXPORT]\n"
          "                       make the sandbox's TCP port SANDBOXPORT (default PORT) reachable\n"
          "                       on this host at ADDR:PORT (ADDR default 127.0.0.1); repeatable;\n"
          "                       with the profile's `publish`, part of the Domain's configuration\n"
          "      --worktree NAME  run in the linked worktree NAME of this repository (its branch NAME),\n"
          "                       made first with the host's `git worktree add ../REPO-NAME -b NAME`\n"
          "                       when it does not exist; one Domain per worktree\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: the command's, or 125 when the sandbox could not be started.\n",
          f);
}

/* The lower layer is prepared only when this run starts the Domain, the
 * way the binary can (struct lz_run_starter). */
struct prep_ctx {
    const struct lz_config *cfg;
    const struct lz_run_starter *starter;
    void *state;
    bool noticed;
};

/* Once, when this run starts the Domain: the rules that run the
 * workspace's code on the host without a prompt (runs_workspace_code). */
static void notice_workspace_rules(const struct lz_config *c) {
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        const struct lz_auto_approve *a = &c->auto_approve[i];
        if (!a->cwd_workspace)
            continue;
        _cleanup_free_ char *d = NULL;
        if (lz_escape(a->argv[0], strlen(a->argv[0]), LZ_ESCAPE_QUOTED, &d) < 0)
            d = lz_xstrdup("?");
        lz_cli_error("NOTICE: escalation.auto_approve[%zu] (%s%s) runs in the workspace without a prompt "
                     "(runs_workspace_code = true): code the sandbox writes there (test files, build files, tool "
                     "configuration) runs on this host as you",
                     i, d, a->argc > 1 ? " ..." : "");
    }
}

static int prepare_lower(void *ud, const char **ret, struct lz_error *err) {
    struct prep_ctx *pc = ud;
    if (!pc->noticed) {
        pc->noticed = true;
        notice_workspace_rules(pc->cfg);
    }
    return pc->starter->prepare(pc->cfg, &pc->state, ret, err);
}

int lz_cmd_run(int argc, char **argv, const struct lz_run_starter *starter) {
    const char *config_path = NULL, *profile = NULL, *worktree = NULL;
    struct lz_cli_list publish = { .n = 0 };
    const struct lz_cli_option opts[] = {
        { "profile", 'p', &profile, NULL, NULL },
        { "worktree", 0, &worktree, NULL, NULL },
        { "config", 0, &config_path, NULL, NULL },
        { "publish", 0, NULL, NULL, &publish },
        { NULL, 0, NULL, NULL, NULL },
    };
    int first;
    /* In order: options end at CMD, so CMD's own options are CMD's. */
    if (!lz_cli_getopt(argc, argv, "run", opts, true, usage, &first))
        return first;
    if (sodium_init() < 0) {
        lz_cli_error("libsodium failed to initialise");
        return LZ_EXIT_LAUNCH;
    }
    struct lz_error err = { 0 };
    struct lz_config_opts co = {
        .config_path = config_path, .profile = profile, .workspace = NULL, .publish = publish.v, .n_publish = publish.n
    };
    struct lz_config *cfg = NULL;
    if (lz_config_load(&co, &cfg, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_LAUNCH;
    }
    /* --worktree NAME: the repository's linked worktree NAME (made when it
     * is missing) is the workspace instead (worktree.h). */
    _cleanup_free_ char *wt_path = NULL;
    if (worktree) {
        if (lz_worktree_create(cfg->workspace, worktree, &wt_path, &err) < 0) {
            lz_cli_error("%s", err.msg);
            lz_config_free(cfg);
            return LZ_EXIT_LAUNCH;
        }
        lz_config_free(cfg);
        cfg = NULL;
        co.workspace = wt_path;
        co.workspace_exact = true;
        if (lz_config_load(&co, &cfg, &err) < 0) {
            lz_cli_error("%s", err.msg);
            return LZ_EXIT_LAUNCH;
        }
    }
    if (starter->builtin_notice && cfg->builtin_default)
        lz_cli_error("no configuration file found; using the built-in profile \"%s\"", cfg->profile.name);

    struct prep_ctx pc = { .cfg = cfg, .starter = starter };
    /* The coordinator loads the configuration again: it gets the same
     * --publish texts (checked above: none holds a ','). */
    char publish_arg[LZ_CLI_LIST_MAX * (LZ_PUBLISH_TEXT_MAX + 1)] = "";
    for (size_t i = 0; i < publish.n; i++) {
        size_t l = strlen(publish_arg);
        snprintf(publish_arg + l, sizeof publish_arg - l, "%s%s", i ? "," : "", publish.v[i]);
    }
    struct lz_client_opts o = {
        .cfg = cfg,
        .config_path = config_path,
        .profile = profile,
        .publish = publish.n ? publish_arg : NULL,
        .prepare = prepare_lower,
        .prepare_ud = &pc,
        .argv = argv + first,
        .argc = (size_t)(argc - first),
    };
    /* No CMD: the profile's own default command, if it has one. */
    if (o.argc == 0 && cfg->profile.command) {
        o.argv = cfg->profile.command;
        o.argc = cfg->profile.n_command;
    }
    int r = lz_client_session(&o, &err);
    if (starter->clear)
        starter->clear(pc.state);
    lz_config_free(cfg);
    if (r < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_LAUNCH;
    }
    return r;
}
