/* ps_cmd.c — `lazaret ps` and `lazaret stop`: the running Domains of this
 * user, asked through their coordinators' control sockets (control.h). */
#include <inttypes.h>
#include <jansson.h>
#include <time.h>

#include "cli.h"
#include "config.h"
#include "control.h"
#include "coordinator.h"
#include "paths.h"

static void ps_usage(FILE *f) {
    fputs("Usage: lazaret ps [--json]\n"
          "\n"
          "List the running Domains of this user and their sessions.\n",
          f);
}

static void since(int64_t ms, char *buf, size_t len) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int lz_cmd_ps(int argc, char **argv) {
    bool as_json = false;
    const struct lz_cli_option opts[] = { { "json", 0, NULL, &as_json }, { NULL, 0, NULL, NULL } };
    int first;
    if (!lz_cli_getopt(argc, argv, "ps", opts, false, ps_usage, &first))
        return first;
    if (first != argc) {
        ps_usage(stderr);
        return LZ_EXIT_USAGE;
    }
    struct lz_error err = { 0 };
    json_t *list = NULL;
    if (lz_control_list(&list, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (as_json) {
        char *s = json_dumps(list, JSON_INDENT(2));
        puts(s ? s : "[]");
        free(s);
        json_decref(list);
        return LZ_EXIT_OK;
    }
    if (json_array_size(list) == 0)
        puts("no running Domains");
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d) {
        json_t *ss = json_object_get(d, "sessions");
        char state[64] = "";
        if (json_is_true(json_object_get(d, "stopping")))
            snprintf(state, sizeof state, "  (stopping)");
        else if (json_is_true(json_object_get(d, "lingering")))
            snprintf(state, sizeof state, "  (lingering, stops in %.1f s unless a session joins)",
                     (double)json_integer_value(json_object_get(d, "linger_left_ms")) / 1000.0);
        printf("%.12s  profile %s  generation %" JSON_INTEGER_FORMAT "  %zu session%s%s\n    workspace %s\n",
               json_string_value(json_object_get(d, "domain_id")), json_string_value(json_object_get(d, "profile")),
               json_integer_value(json_object_get(d, "generation")), json_array_size(ss),
               json_array_size(ss) == 1 ? "" : "s", state, json_string_value(json_object_get(d, "workspace")));
        const char *ft = json_string_value(json_object_get(d, "fuse_transport"));
        if (ft)
            printf("    workspace FUSE transport %s\n", ft);
        const char *repo = json_string_value(json_object_get(d, "repository"));
        const char *branch = json_string_value(json_object_get(d, "branch"));
        const char *wt = json_string_value(json_object_get(d, "worktree"));
        if (wt)
            printf("    linked worktree %s of %s, branch %s\n", wt, repo ? repo : "?", branch ? branch : "?");
        else if (branch)
            printf("    branch %s\n", branch);
        size_t k;
        json_t *s;
        json_t *pub = json_object_get(d, "published");
        json_array_foreach(pub, k, s) {
            /* ADDR:HOSTPORT:PORT */
            const char *t = json_string_value(s);
            const char *last = t ? strrchr(t, ':') : NULL;
            if (last)
                printf("    published %.*s -> sandbox port %s\n", (int)(last - t), t, last + 1);
        }
        json_int_t nref = json_integer_value(json_object_get(d, "refusals"));
        if (nref > 0)
            printf("    %" JSON_INTEGER_FORMAT " refused operation%s in the workspace (lazaret events %.12s)\n", nref,
                   nref == 1 ? "" : "s", json_string_value(json_object_get(d, "domain_id")));
        json_array_foreach(ss, k, s) {
            char t[32];
            since(json_integer_value(json_object_get(s, "started_ms")), t, sizeof t);
            printf("    session %" JSON_INTEGER_FORMAT "  %-5s %-9s since %s  %s\n",
                   json_integer_value(json_object_get(s, "session")),
                   json_is_true(json_object_get(s, "tty")) ? "tty" : "pipes",
                   json_string_value(json_object_get(s, "state")), t, json_string_value(json_object_get(s, "command")));
        }
    }
    json_decref(list);
    return LZ_EXIT_OK;
}

static void stop_usage(FILE *f) {
    fputs("Usage: lazaret stop [DOMAIN] [--force] [-p NAME] [--config FILE]\n"
          "\n"
          "Stop a running Domain: its sessions are told why and ended (SIGHUP, then\n"
          "SIGTERM, then SIGKILL after a grace period each), then the sandbox, the\n"
          "network helper and the State Anchor are released. Persistent state stays.\n"
          "\n"
          "DOMAIN is a Domain ID or a unique prefix of one (see `lazaret ps`); without\n"
          "it, the Domain of the current directory and profile (-p, default profile).\n"
          "\n"
          "Options:\n"
          "  --force          end the sessions with SIGKILL at once\n"
          "  -p, --profile    profile of the current directory's Domain\n"
          "  --config FILE    read FILE instead of the default configuration\n",
          f);
}

bool lz_cli_domain_arg_ok(const char *want) {
    size_t l = strlen(want);
    return l >= 4 && l <= 64 && strspn(want, "0123456789abcdef") == l;
}

int lz_cli_find_running(const char *want, const char *profile, const char *config_path, json_t **ret_list,
                        json_t **ret_hit) {
    struct lz_error err = { 0 };
    _cleanup_free_ char *want_id = NULL;
    if (!want) {
        struct lz_config_opts co = { .config_path = config_path, .profile = profile, .workspace = NULL };
        struct lz_config *cfg = NULL;
        if (lz_config_load(&co, &cfg, &err) < 0) {
            lz_cli_error("%s", err.msg);
            return -EINVAL;
        }
        want_id = lz_xstrdup(cfg->domain_id_hex);
        lz_config_free(cfg);
    } else if (!lz_cli_domain_arg_ok(want)) {
        lz_cli_error("\"%s\" is not a Domain ID or a prefix of one (4 to 64 lowercase hex digits; see "
                     "`lazaret ps`)",
                     want);
        return -EINVAL;
    }
    json_t *list = NULL;
    if (lz_control_list(&list, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return -EIO;
    }
    json_t *hit = NULL;
    size_t nhit = 0, i;
    json_t *d;
    json_array_foreach(list, i, d) {
        const char *id = json_string_value(json_object_get(d, "domain_id"));
        if (!id)
            continue;
        if (want_id ? !strcmp(id, want_id) : !strncmp(id, want, strlen(want))) {
            hit = d;
            nhit++;
        }
    }
    if (nhit != 1) {
        if (nhit == 0)
            lz_cli_error("%s is not running (see `lazaret ps`)", want ? want : "the Domain of this directory");
        else
            lz_cli_error("%s matches %zu running Domains; give more digits (see `lazaret ps`)", want, nhit);
        json_decref(list);
        return -ENOENT;
    }
    *ret_list = list;
    *ret_hit = hit;
    return 0;
}

int lz_cli_running_operand(int argc, char **argv, int first, const char *profile, const char *config_path,
                           void (*usage)(FILE *), json_t **ret_list, json_t **ret_hit) {
    if (argc - first > 1) {
        usage(stderr);
        return LZ_EXIT_USAGE;
    }
    const char *want = first < argc ? argv[first] : NULL;
    if (lz_cli_find_running(want, profile, config_path, ret_list, ret_hit) < 0)
        return want && !lz_cli_domain_arg_ok(want) ? LZ_EXIT_USAGE : LZ_EXIT_FAILURE;
    return 0;
}

int lz_cmd_stop(int argc, char **argv) {
    bool force = false;
    const char *profile = NULL, *config_path = NULL;
    const struct lz_cli_option opts[] = {
        { "force", 0, NULL, &force },
        { "profile", 'p', &profile, NULL },
        { "config", 0, &config_path, NULL },
        { NULL, 0, NULL, NULL },
    };
    int first;
    if (!lz_cli_getopt(argc, argv, "stop", opts, false, stop_usage, &first))
        return first;
    struct lz_error err = { 0 };
    json_t *list = NULL, *hit = NULL;
    int ex = lz_cli_running_operand(argc, argv, first, profile, config_path, stop_usage, &list, &hit);
    if (ex)
        return ex;
    const char *sock = json_string_value(json_object_get(hit, "socket"));
    _cleanup_free_ char *ddir = lz_xstrdup(json_string_value(json_object_get(hit, "domain_dir")) ?: "");
    _cleanup_free_ char *id = lz_xstrdup(json_string_value(json_object_get(hit, "domain_id")));
    int r = lz_control_stop(sock, force, &err);
    json_decref(list);
    if (r < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (ddir[0] && lz_control_wait_stopped(ddir, 90, &err) < 0) {
        lz_cli_error("%s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    fprintf(stderr, "lazaret: Domain %.12s stopped\n", id);
    return LZ_EXIT_OK;
}
