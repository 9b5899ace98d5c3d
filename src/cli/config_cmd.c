/* config_cmd.c — `lazaret config check`: load, validate and resolve the
 * trusted host configuration for the current directory and print it. */

#include "cli.h"
#include "config.h"
#include "gitscan.h"
#include "netpolicy.h"
#include "worktree.h"

static void usage(FILE *out) {
    fputs("Usage: lazaret config check [--config FILE] [-p|--profile NAME]\n"
          "\n"
          "Loads, validates and resolves the trusted host configuration with the\n"
          "current directory as the workspace (inside a Git repository: the\n"
          "repository's top level, with the current directory as the start\n"
          "directory), then prints it with environment\n"
          "values redacted, followed by the Domain ID and the Configuration\n"
          "Fingerprint, the network policy, and the workspace paths the host's Git\n"
          "reads or runs that a Domain keeps read-only (with notices about what it\n"
          "cannot). See lazaret.toml(5) and docs/security-git.md.\n"
          "\n"
          "  --config FILE        read FILE instead of $XDG_CONFIG_HOME/lazaret/config.toml\n"
          "  -p, --profile NAME   select profile NAME (default: \"default\")\n"
          "  -h, --help           show this help\n",
          out);
}

/* The effective network policy of the selected profile, as the Runtime
 * Supervisor would install it (docs/network.md). */
static void print_policy(const struct lz_config *cfg) {
    uint32_t *host = NULL;
    size_t nh = 0;
    lz_host_ipv4_addrs(&host, &nh);
    struct lz_netpolicy p;
    struct lz_error err = { 0 };
    int r = lz_netpolicy_derive(cfg, host, nh, &p, &err);
    free(host);
    if (r < 0) {
        printf("\nnetwork policy: %s\n", err.msg);
        return;
    }
    printf("\nnetwork policy (IPv4; longest prefix wins, deny wins on an equal prefix; IPv6 disabled)\n");
    printf("  %-20s %s\n", "prefix", "action");
    bool have_default = false;
    for (size_t i = 0; i < p.n; i++) {
        char pre[32];
        uint32_t a = p.rules[i].addr;
        snprintf(pre, sizeof pre, "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, p.rules[i].len);
        if (p.rules[i].len == 0)
            have_default = true;
        printf("  %-20s %s\n", pre, p.rules[i].action == LZ_NET_ALLOW ? "allow" : "deny");
    }
    if (!have_default)
        printf("  %-20s %s\n", "0.0.0.0/0", "deny (nothing else allowed)");
    lz_netpolicy_clear(&p);
}

/* What the host's Git reads or runs from the workspace, as the Host
 * Coordinator will protect it at Domain start (docs/security-git.md). */
static int print_git(const struct lz_config *cfg) {
    struct lz_gitscan g;
    struct lz_error err = { 0 };
    /* A linked worktree: where its Git directories appear inside, and
     * what of them stays the developer's (worktree.h). */
    struct lz_worktree wt = { 0 };
    int w = lz_worktree_probe(cfg->workspace, &wt, &err);
    if (w < 0) {
        printf("\nlinked worktree: a Domain would not start: %s\n", err.msg);
        return -1;
    }
    if (w > 0) {
        _cleanup_free_ char *branch = lz_worktree_head(wt.gitdir);
        printf("\nlinked worktree %s of the repository %s (branch %s)\n", wt.name, wt.repo, branch ? branch : "?");
        printf("  its Git directory %s is served at " LZ_SANDBOX_GIT_COMMON " by a router of its own, and\n"
               "  " LZ_SANDBOX_WORKSPACE "/.git names " LZ_SANDBOX_GIT_COMMON "/worktrees/%s there\n",
               wt.common, wt.name);
        printf("  writable inside: objects/, refs/ (not replace/, notes/), packed-refs (checked), logs/refs/,\n"
               "  and worktrees/%s/ (HEAD, index (checked), logs/HEAD, rebase state)\n",
               wt.name);
        printf("  read-only inside: config, hooks/, info/ rules, worktrees/%s/{commondir,gitdir,locked,"
               "config.worktree},\n  every other worktree, and the main work tree's HEAD, index and logs/HEAD;\n"
               "  the main work tree's files are not served at all\n",
               wt.name);
        lz_worktree_clear(&wt);
    }
    long t0 = lz_now_ms();
    if (lz_gitscan_run(cfg->workspace, NULL, &g, &err) < 0) {
        printf("\nhost Git: a Domain would not start: %s\n", err.msg);
        return -1;
    }
    long ms = lz_now_ms() - t0;
    printf("\nhost Git (paths kept read-only inside the sandbox; %zu repositories, %zu entries scanned in %ld ms)\n",
           g.n_repos, g.n_entries, ms);
    if (g.git_missing)
        printf("  git is not installed on this host: nothing to protect\n");
    else if (!g.n_protect)
        printf("  (none beyond the Git directories)\n");
    for (size_t i = 0; i < g.n_protect; i++)
        printf("  %s\n", g.protect[i]);
    if (getenv("LAZARET_DEBUG_GITSCAN"))
        for (size_t i = 0; i < g.n_log; i++)
            printf("  log: %s\n", g.log[i]);
    if (g.n_notices) {
        printf("\nhost Git notices (what Lazaret cannot keep read-only, what the host's Git displays otherwise)\n");
        for (size_t i = 0; i < g.n_notices; i++)
            printf("  NOTICE: %s\n", g.notices[i]);
    }
    lz_gitscan_clear(&g);
    return 0;
}

int lz_cmd_config(int argc, char **argv) {
    int ret;
    if (lz_cli_help_first(argc, argv, usage, &ret))
        return ret;
    if (strcmp(argv[1], "check") != 0) {
        lz_cli_error("config: unknown subcommand \"%s\" (expected \"check\")", argv[1]);
        return LZ_EXIT_USAGE;
    }

    struct lz_config_opts opts = { 0 };
    const struct lz_cli_option options[] = {
        { "config", 0, &opts.config_path, NULL },
        { "profile", 'p', &opts.profile, NULL },
        { NULL, 0, NULL, NULL },
    };
    int sub_argc = argc - 1, first;
    char **sub_argv = argv + 1;
    if (!lz_cli_getopt(sub_argc, sub_argv, "config check", options, true, usage, &first))
        return first;
    if (first < sub_argc) {
        lz_cli_error("config check: unexpected argument \"%s\"", sub_argv[first]);
        return LZ_EXIT_USAGE;
    }

    struct lz_error err = { 0 };
    _cleanup_config_ struct lz_config *cfg = NULL;
    if (lz_config_load(&opts, &cfg, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (cfg->builtin_default)
        lz_cli_error("no configuration file found; using the built-in profile \"%s\"", cfg->profile.name);
    lz_config_print(stdout, cfg);
    print_policy(cfg);
    int gr = print_git(cfg);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        lz_cli_error("cannot write to standard output: %s", strerror(errno));
        return LZ_EXIT_FAILURE;
    }
    return gr < 0 ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
}
