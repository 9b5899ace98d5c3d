/* supargs.c — see supargs.h. */
#include "supargs.h"
#include "argcodec.h"
#include "gitscan.h"   /* LZ_GITSCAN_MAX_PROTECT */
#include "hosttools.h" /* LZ_HOSTTOOLS_MAX */
#include "rschan.h"    /* LZ_RS_T_START_MS */

#define S(f) offsetof(struct lz_supervisor_args, f)
#define STR(n, f, req)                                                                                                 \
    { n, LZ_ARG_STR, S(f), 0, 0, req, NULL, 0 }
#define FD(n, f, req)                                                                                                  \
    { n, LZ_ARG_FD, S(f), 0, 0, req, NULL, 0 }
#define LIST(n, f, nf, max)                                                                                            \
    { n, LZ_ARG_LIST, S(f), S(nf), max, false, NULL, 0 }

/* The one description of the Supervisor's arguments, in the order they are
 * written. */
static const struct lz_arg_spec spec[] = {
    FD("ctl-fd", ctl_fd, true),
    STR("runsc", runsc, true),
    STR("state", state_dir, true),
    STR("bundle", bundle_dir, true),
    STR("id", container_id, true),
    STR("overlay", overlay_dir, true),
    STR("router", router, true),
    STR("workspace", workspace, true),
    STR("view", view, true),
    FD("policy-fd", policy_fd, true),
    STR("policy-digest", policy_digest, true),
    FD("addr-fd", addr_fd, false),
    FD("refusal-fd", refusal_fd, false),
    LIST("protect", protect, n_protect, LZ_GITSCAN_MAX_PROTECT),
    LIST("volume", vol_source, n_volumes, LZ_RS_VOLUMES_MAX),
    LIST("volume-view", vol_view, n_vol_view, LZ_RS_VOLUMES_MAX),
    STR("worktree", worktree, false),
    LIST("deny-link-target", deny_link, n_deny_link, LZ_RS_DENY_MAX),
    STR("ignored-state", ignored_state, false),
    STR("git-home", git_home, false),
    STR("git-xdg-config", git_xdg, false),
    { "no-ignore-rules", LZ_ARG_FLAG, S(no_ignore_rules), 0, 0, false, NULL, 0 },
    LIST("host-tool", host_tools, n_host_tools, LZ_HOSTTOOLS_MAX),
    STR("mailbox", mailbox, false),
    STR("rootfs", rootfs, false),
    STR("anchor-root", anchor_root, false),
    STR("anchor-target", anchor_target, false),
    LIST("persist", persist, n_persist, LZ_RS_PERSIST_MAX),
};

/* What the table cannot say: the State Anchor's arguments all or none,
 * volumes in pairs. */
static int check(const struct lz_supervisor_args *a, struct lz_error *err) {
    bool anchor = a->rootfs || a->anchor_root || a->anchor_target;
    if (a->n_persist && !(a->rootfs && a->anchor_root && a->anchor_target))
        return lz_error_set(err, -EINVAL, "--persist needs --rootfs, --anchor-root and --anchor-target");
    if (anchor && !a->n_persist)
        return lz_error_set(err, -EINVAL, "--rootfs, --anchor-root and --anchor-target need --persist");
    if (a->n_volumes != a->n_vol_view)
        return lz_error_set(err, -EINVAL, "%zu --volume but %zu --volume-view", a->n_volumes, a->n_vol_view);
    if (a->worktree && !a->n_volumes)
        return lz_error_set(err, -EINVAL, "--worktree needs its common Git directory as the last --volume");
    return 0;
}

int lz_supargs_encode(const struct lz_supervisor_args *a, const char *self, char ***ret_argv, struct lz_error *err) {
    struct lz_supervisor_args c = *a;
    c.n_vol_view = c.n_volumes;
    int r = check(&c, err);
    if (r < 0)
        return r;
    const char *head[] = { self, "__supervisor" };
    return lz_argv_encode(spec, LZ_ARRAY_SIZE(spec), &c, head, 2, ret_argv, err);
}

int lz_supargs_decode(int argc, char *const *argv, struct lz_supervisor_args *ret, struct lz_error *err) {
    struct lz_supervisor_args a;
    int r = lz_argv_decode(spec, LZ_ARRAY_SIZE(spec), argc, argv, &a, err);
    if (r == 0 && (r = check(&a, err)) < 0)
        lz_supargs_clear(&a);
    if (r < 0) {
        *ret = (struct lz_supervisor_args){ .ctl_fd = -1, .policy_fd = -1, .addr_fd = -1, .refusal_fd = -1 };
        return r;
    }
    a.start_timeout_ms = LZ_RS_T_START_MS;
    *ret = a;
    return 0;
}

void lz_supargs_clear(struct lz_supervisor_args *a) { lz_arg_clear(spec, LZ_ARRAY_SIZE(spec), a); }
