/* image_cmd.c — `lazaret image bootstrap|ls|prepare|gc`: the base images and
 * prepared lowers of the Storage Root (see image.h, catalog.h). */
#include <inttypes.h>
#include <jansson.h>
#include <time.h>
#include <unistd.h>

#include "agents.h"
#include "catalog.h"
#include "cli.h"
#include "config.h"
#include "hostca.h"
#include "image.h"

static void usage(FILE *out) {
    fputs("Usage: lazaret image COMMAND [--config FILE]\n"
          "\n"
          "Commands:\n"
          "  bootstrap [--suite SUITE]  build the default base image with mmdebstrap\n"
          "                             (stored as builtin:debian-SUITE; default bookworm)\n"
          "  bootstrap --agent NAME [--refresh]\n"
          "                             build the image of agent NAME (claude, codex,\n"
          "                             opencode): the base, Node.js and the agent's npm\n"
          "                             package, stored as builtin:agent-NAME; only when\n"
          "                             missing, or again with --refresh (a newer release)\n"
          "  ls [--json]                list stored images and prepared lowers\n"
          "  prepare REF [--json]       import REF if needed and prepare its lower; REF is\n"
          "                             builtin:debian-SUITE, oci:PATH[:TAG],\n"
          "                             oci-archive:PATH, docker-archive:PATH or a registry\n"
          "                             reference such as docker.io/library/debian:bookworm\n"
          "  gc [--dry-run] [--json]    reclaim unleased prepared lowers per [storage]\n"
          "                             prepared_keep_days and prepared_max_bytes, and\n"
          "                             abandoned preparations\n"
          "\n"
          "Options:\n"
          "  --config FILE              read FILE instead of the default configuration\n"
          "  -h, --help                 show this help\n",
          out);
}

/* ---- commands ---- */

/* profile: NULL for "default"; an agent's bootstrap loads the agent's own
 * profile, which every configuration has (built in, or the file's). */
static int load_data_root(const char *config_path, const char *profile, struct lz_config **ret) {
    struct lz_config_opts o = { .config_path = config_path, .profile = profile, .no_workspace = true };
    struct lz_error err = { 0 };
    int r = lz_config_load(&o, ret, &err);
    if (r < 0) {
        lz_cli_error("%s", err.msg);
        return r;
    }
    return 0;
}

static int cmd_bootstrap(const char *data_root, const char *suite) {
    struct lz_progress_view ui;
    lz_cli_progress_init(&ui, "");
    struct lz_error err = { 0 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = lz_image_bootstrap(data_root, suite, lz_cli_progress, &ui, &err);
    lz_cli_progress_done(&ui);
    if (r < 0) {
        lz_cli_error("image bootstrap: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("builtin:debian-%s built in %.0f s\n", suite,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return LZ_EXIT_OK;
}

static int cmd_bootstrap_agent(const char *data_root, const char *agent, bool refresh) {
    struct lz_progress_view ui;
    lz_cli_progress_init(&ui, "");
    struct lz_error err = { 0 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = lz_image_bootstrap_agent(data_root, agent, refresh, lz_cli_progress, &ui, &err);
    lz_cli_progress_done(&ui);
    if (r < 0) {
        lz_cli_error("image bootstrap: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (r == 1) {
        printf("builtin:agent-%s is already built (--refresh rebuilds it with the newest release)\n", agent);
        return LZ_EXIT_OK;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("builtin:agent-%s built in %.0f s\n", agent,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return LZ_EXIT_OK;
}

static int cmd_ls(const char *data_root, bool json) {
    struct lz_image_list l;
    struct lz_error err = { 0 };
    int r = lz_image_list(data_root, &l, &err);
    if (r < 0) {
        lz_cli_error("image ls: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (json) {
        json_t *imgs = json_array(), *preps = json_array();
        for (size_t i = 0; i < l.n_images; i++) {
            const struct lz_image_info *im = &l.images[i];
            json_array_append_new(imgs,
                                  json_pack("{s:s, s:s, s:s?, s:I}", "name", im->name, "manifest_digest",
                                            im->manifest_digest, "config_digest", im->config_digest, "size",
                                            (json_int_t)im->size));
        }
        for (size_t i = 0; i < l.n_prepared; i++) {
            const struct lz_prepared_info *p = &l.prepared[i];
            json_array_append_new(preps,
                                  json_pack("{s:s, s:s, s:s, s:s, s:I}", "artifact_id", p->artifact_id, "source_ref",
                                            p->source_ref, "manifest_digest", p->manifest_digest, "created", p->created,
                                            "size", (json_int_t)p->size));
        }
        lz_image_list_clear(&l);
        return lz_cli_print_json(json_pack("{s:o, s:o}", "images", imgs, "prepared", preps));
    }
    char sz[32];
    printf("IMAGES\n");
    if (!l.n_images)
        printf("  (none; `lazaret image bootstrap` builds the default)\n");
    else
        printf("  %-40s %-19s %10s\n", "NAME", "MANIFEST", "SIZE");
    for (size_t i = 0; i < l.n_images; i++) {
        const struct lz_image_info *im = &l.images[i];
        lz_cli_human_bytes(im->size, sz, sizeof sz);
        printf("  %-40s %-19.19s %10s\n", im->name, im->manifest_digest, sz);
    }
    printf("\nPREPARED LOWERS\n");
    if (!l.n_prepared)
        printf("  (none)\n");
    else
        printf("  %-12s %-40s %-20s %10s\n", "ARTIFACT", "SOURCE", "CREATED", "SIZE");
    for (size_t i = 0; i < l.n_prepared; i++) {
        const struct lz_prepared_info *p = &l.prepared[i];
        lz_cli_human_bytes(p->size, sz, sizeof sz);
        printf("  %-12.12s %-40s %-20s %10s\n", p->artifact_id, p->source_ref, p->created, sz);
    }
    lz_image_list_clear(&l);
    return LZ_EXIT_OK;
}

static int cmd_prepare(const char *data_root, const char *ref, bool json) {
    struct lz_progress_view ui;
    lz_cli_progress_init(&ui, "");
    struct lz_error err = { 0 };
    struct lz_prepared p = { 0 };
    /* As a profile's default (host_ca_certificates = true) prepares it. */
    _cleanup_(lz_hostca_clear) struct lz_hostca ca = { 0 };
    int r = lz_hostca_load(lz_hostca_dir(), &ca, &err);
    if (r == 0)
        r = lz_image_prepare_ca(data_root, ref, &ca, lz_cli_progress, &ui, &p, &err);
    lz_cli_progress_done(&ui);
    if (r < 0) {
        lz_cli_error("image prepare: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "artifact_id", p.artifact_id, "rootfs", p.rootfs,
                              "manifest_digest", p.manifest_digest, "source_ref", p.source_ref);
        char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        json_decref(o);
        if (s)
            puts(s);
        free(s);
    } else {
        printf("%s %s\n", p.artifact_id, p.rootfs);
    }
    lz_prepared_clear(&p);
    return LZ_EXIT_OK;
}

struct gc_out {
    bool json, dry_run;
    json_t *reclaimed, *kept, *failed;
};

static void on_gc_event(void *ud, const struct lz_gc_event *ev) {
    struct gc_out *o = ud;
    if (o->json) {
        json_t *a = ev->action == LZ_GC_RECLAIMED ? o->reclaimed : ev->action == LZ_GC_KEPT ? o->kept : o->failed;
        json_array_append_new(a,
                              json_pack("{s:s, s:s, s:I, s:s}", "kind", ev->kind, "name", ev->name, "size",
                                        (json_int_t)ev->size, "reason", ev->reason));
        return;
    }
    char sz[32] = "-";
    if (ev->size)
        lz_cli_human_bytes(ev->size, sz, sizeof sz);
    switch (ev->action) {
    case LZ_GC_RECLAIMED:
        printf("%-15s %-8s %-12.12s %10s  %s\n", o->dry_run ? "would reclaim" : "reclaimed", ev->kind, ev->name, sz,
               ev->reason);
        break;
    case LZ_GC_KEPT: printf("%-15s %-8s %-12.12s %10s  %s\n", "kept", ev->kind, ev->name, sz, ev->reason); break;
    case LZ_GC_FAILED: printf("%-15s %-8s %-12.12s %10s  %s\n", "FAILED", ev->kind, ev->name, sz, ev->reason); break;
    }
}

static int cmd_gc(const struct lz_config *cfg, bool dry_run, bool json) {
    struct gc_out o = { .json = json, .dry_run = dry_run };
    if (json) {
        o.reclaimed = json_array();
        o.kept = json_array();
        o.failed = json_array();
    }
    struct lz_gc_policy pol = { .keep_days = cfg->prepared_keep_days, .max_bytes = cfg->prepared_max_bytes };
    struct lz_gc_result res = { 0 };
    struct lz_error err = { 0 };
    int r = lz_catalog_gc(cfg->data_root, &pol, dry_run, on_gc_event, &o, &res, &err);
    if (r < 0) {
        json_decref(o.reclaimed);
        json_decref(o.kept);
        json_decref(o.failed);
        lz_cli_error("image gc: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    if (json) {
        json_t *root = json_pack(
            "{s:b, s:s, s:{s:I, s:I}, s:{s:I, s:I}, s:o, s:o, s:o}", "dry_run", dry_run, "data_root", cfg->data_root,
            "policy", "prepared_keep_days", (json_int_t)cfg->prepared_keep_days, "prepared_max_bytes",
            (json_int_t)cfg->prepared_max_bytes, "total", "count", (json_int_t)res.n_reclaimed, "bytes",
            (json_int_t)res.bytes_reclaimed, "reclaimed", o.reclaimed, "kept", o.kept, "failed", o.failed);
        if (lz_cli_print_json(root) != LZ_EXIT_OK)
            return LZ_EXIT_FAILURE;
    } else {
        char sz[32];
        lz_cli_human_bytes(res.bytes_reclaimed, sz, sizeof sz);
        printf("%s %zu item%s, %s%s\n", dry_run ? "would reclaim" : "reclaimed", res.n_reclaimed,
               res.n_reclaimed == 1 ? "" : "s", sz, res.n_failed ? "; some could not be removed (see above)" : "");
    }
    return res.n_failed ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
}

int lz_cmd_image(int argc, char **argv) {
    int ret;
    if (lz_cli_help_first(argc, argv, usage, &ret))
        return ret;
    const char *sub = argv[1];
    if (strcmp(sub, "bootstrap") != 0 && strcmp(sub, "ls") != 0 && strcmp(sub, "prepare") != 0 &&
        strcmp(sub, "gc") != 0) {
        lz_cli_error("image: unknown subcommand \"%s\" (expected bootstrap, ls, prepare or gc)", sub);
        return LZ_EXIT_USAGE;
    }
    const char *config_path = NULL, *suite = NULL, *agent = NULL;
    bool json = false, dry_run = false, refresh = false;
    const struct lz_cli_option opts[] = {
        { "config", 0, &config_path, NULL },
        { "suite", 0, &suite, NULL },
        { "json", 0, NULL, &json },
        { "dry-run", 0, NULL, &dry_run },
        { "agent", 0, &agent, NULL },
        { "refresh", 0, NULL, &refresh },
        { NULL, 0, NULL, NULL },
    };
    char **args;
    size_t n_args;
    int st;
    if (!lz_cli_getopt_sub(argc, argv, "image", opts, true, usage, &args, &n_args, &st))
        return st;
    bool suite_set = suite != NULL;
    if (!suite)
        suite = "bookworm";
    bool is_bootstrap = !strcmp(sub, "bootstrap"), is_ls = !strcmp(sub, "ls"), is_gc = !strcmp(sub, "gc");
    if ((suite_set && !is_bootstrap) || (json && is_bootstrap) || (dry_run && !is_gc)) {
        lz_cli_error("image %s: option %s does not apply", sub,
                     suite_set && !is_bootstrap ? "--suite"
                         : dry_run && !is_gc    ? "--dry-run"
                                                : "--json");
        return LZ_EXIT_USAGE;
    }
    if ((agent || refresh) && !is_bootstrap) {
        lz_cli_error("image %s: option %s does not apply", sub, agent ? "--agent" : "--refresh");
        return LZ_EXIT_USAGE;
    }
    if (refresh && !agent) {
        lz_cli_error("image bootstrap: --refresh applies to --agent NAME (the base image is always rebuilt)");
        return LZ_EXIT_USAGE;
    }
    if (agent && suite_set) {
        lz_cli_error("image bootstrap: --agent and --suite exclude each other (agent images use %s)", LZ_AGENT_SUITE);
        return LZ_EXIT_USAGE;
    }
    if (agent && !lz_agent_find(agent)) {
        lz_cli_error("image bootstrap: unknown agent \"%s\" (known: claude, codex, opencode)", agent);
        return LZ_EXIT_USAGE;
    }
    int want_args = is_bootstrap || is_ls || is_gc ? 0 : 1;
    if (n_args != (size_t)want_args) {
        lz_cli_error("image %s: %s", sub, want_args ? "expects one image reference" : "takes no arguments");
        return LZ_EXIT_USAGE;
    }

    struct lz_config *cfg = NULL;
    if (load_data_root(config_path, is_bootstrap ? agent : NULL, &cfg) < 0)
        return LZ_EXIT_FAILURE;
    if (is_bootstrap && agent)
        ret = cmd_bootstrap_agent(cfg->data_root, agent, refresh);
    else if (is_bootstrap)
        ret = cmd_bootstrap(cfg->data_root, suite);
    else if (is_ls)
        ret = cmd_ls(cfg->data_root, json);
    else if (is_gc)
        ret = cmd_gc(cfg, dry_run, json);
    else
        ret = cmd_prepare(cfg->data_root, args[0], json);
    lz_config_free(cfg);
    return ret;
}
