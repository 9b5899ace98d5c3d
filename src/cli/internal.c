/* internal.c — the re-executed internal roles: `lazaret __coordinator` and
 * `lazaret __supervisor`. Not for users; arguments come from the parent. */
#include "cli.h"
#include "coordinator.h"
#include "hosttools.h"
#include "rschan.h" /* LZ_RS_T_START_MS */
#include "supervisor.h"

#include <getopt.h>

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
    struct lz_supervisor_args a = {
        .ctl_fd = -1, .policy_fd = -1, .addr_fd = -1, .start_timeout_ms = LZ_RS_T_START_MS
    };
    static const struct option opts[] = {
        { "ctl-fd", required_argument, NULL, 'c' },
        { "runsc", required_argument, NULL, 'r' },
        { "state", required_argument, NULL, 's' },
        { "bundle", required_argument, NULL, 'b' },
        { "id", required_argument, NULL, 'i' },
        { "overlay", required_argument, NULL, 'o' },
        { "router", required_argument, NULL, 'R' },
        { "workspace", required_argument, NULL, 'w' },
        { "view", required_argument, NULL, 'v' },
        { "protect", required_argument, NULL, 'P' },
        { "policy-fd", required_argument, NULL, 'F' },
        { "policy-digest", required_argument, NULL, 'D' },
        { "addr-fd", required_argument, NULL, 'N' },
        { "rootfs", required_argument, NULL, 'L' },
        { "anchor-root", required_argument, NULL, 'A' },
        { "anchor-target", required_argument, NULL, 'T' },
        { "persist", required_argument, NULL, 'p' },
        { "volume", required_argument, NULL, 'V' },
        { "volume-view", required_argument, NULL, 'W' },
        { "deny-link-target", required_argument, NULL, 'X' },
        { "ignored-state", required_argument, NULL, 'I' },
        { "git-home", required_argument, NULL, 'H' },
        { "git-xdg-config", required_argument, NULL, 'G' },
        { "no-ignore-rules", no_argument, NULL, 'n' },
        { "host-tool", required_argument, NULL, 't' },
        { "mailbox", required_argument, NULL, 'M' },
        { 0 },
    };
    int c;
    size_t n_vsrc = 0, n_vview = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a.ctl_fd = parse_fd(optarg); break;
        case 'r': a.runsc = optarg; break;
        case 's': a.state_dir = optarg; break;
        case 'b': a.bundle_dir = optarg; break;
        case 'i': a.container_id = optarg; break;
        case 'o': a.overlay_dir = optarg; break;
        case 'R': a.router = optarg; break;
        case 'w': a.workspace = optarg; break;
        case 'v': a.view = optarg; break;
        case 'F': a.policy_fd = parse_fd(optarg); break;
        case 'D': a.policy_digest = optarg; break;
        case 'N': a.addr_fd = parse_fd(optarg); break;
        case 'L': a.rootfs = optarg; break;
        case 'A': a.anchor_root = optarg; break;
        case 'T': a.anchor_target = optarg; break;
        case 'I': a.ignored_state = optarg; break;
        case 'H': a.git_home = optarg; break;
        case 'G': a.git_xdg = optarg; break;
        case 'n': a.no_ignore_rules = true; break;
        case 't':
            if (a.n_host_tools >= LZ_HOSTTOOLS_MAX) {
                lz_cli_error("__supervisor: more than %d --host-tool names", LZ_HOSTTOOLS_MAX);
                return LZ_EXIT_USAGE;
            }
            a.host_tools = lz_xrealloc(a.host_tools, (a.n_host_tools + 1) * sizeof *a.host_tools);
            a.host_tools[a.n_host_tools++] = optarg;
            break;
        case 'M': a.mailbox = optarg; break;
        case 'p':
            if (a.n_persist < 256) {
                a.persist = lz_xrealloc(a.persist, (a.n_persist + 1) * sizeof *a.persist);
                a.persist[a.n_persist++] = optarg;
            }
            break;
        case 'V':
        case 'W': {
            /* Pairs, in order: --volume SRC --volume-view VIEW. */
            char ***v = c == 'V' ? &a.vol_source : &a.vol_view;
            size_t *n = c == 'V' ? &n_vsrc : &n_vview;
            if (*n >= LZ_RS_VOLUMES_MAX) {
                lz_cli_error("__supervisor: more than %d writable volumes", LZ_RS_VOLUMES_MAX);
                return LZ_EXIT_USAGE;
            }
            *v = lz_xrealloc(*v, (*n + 1) * sizeof **v);
            (*v)[(*n)++] = optarg;
            break;
        }
        case 'X':
            if (a.n_deny_link >= LZ_RS_DENY_MAX) {
                lz_cli_error("__supervisor: more than %d --deny-link-target paths", LZ_RS_DENY_MAX);
                return LZ_EXIT_USAGE;
            }
            a.deny_link = lz_xrealloc(a.deny_link, (a.n_deny_link + 1) * sizeof *a.deny_link);
            a.deny_link[a.n_deny_link++] = optarg;
            break;
        case 'P':
            /* every path: the coordinator bounded their number (gitscan.h) */
            a.protect = lz_xrealloc(a.protect, (a.n_protect + 1) * sizeof *a.protect);
            a.protect[a.n_protect++] = optarg;
            break;
        default: return LZ_EXIT_USAGE;
        }
    }
    if (a.ctl_fd < 0 || !a.runsc || !a.state_dir || !a.bundle_dir || !a.container_id || !a.overlay_dir || !a.router ||
        !a.workspace || !a.view || a.policy_fd < 0 || !a.policy_digest ||
        (a.n_persist && (!a.rootfs || !a.anchor_root || !a.anchor_target)) || n_vsrc != n_vview) {
        lz_cli_error("__supervisor: missing arguments");
        return LZ_EXIT_USAGE;
    }
    a.n_volumes = n_vsrc;
    return lz_supervisor_main(&a);
}

int lz_cmd_internal(int argc, char **argv) {
    if (!strcmp(argv[0], "__coordinator"))
        return coordinator(argc, argv);
    if (!strcmp(argv[0], "__supervisor"))
        return supervisor(argc, argv);
    lz_cli_error("unknown command '%s' (see `lazaret --help`)", argv[0]);
    return LZ_EXIT_USAGE;
}
