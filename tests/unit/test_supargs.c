/* Unit tests for the Runtime Supervisor's argument codec (supargs.c,
 * argcodec.c): round trip, and every kind of refusal of the decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "argcodec.h"
#include "rschan.h" /* LZ_RS_T_START_MS */
#include "supargs.h"

static char *protect[] = { ".git/hooks", ".husky", "my dir/with space" };
static char *persist[] = { "/usr", "/var/lib" };
static char *vsrc[] = { "/home/u/v0", "/home/u/v1" };
static char *vview[] = { "/run/g/volume-0", "/run/g/volume-1" };
static char *deny[] = { "/s", "/run/lazaret", "/s/domains/x" };
static char *tools[] = { ".claude", ".config/gh" };

static struct lz_supervisor_args full(void) {
    return (struct lz_supervisor_args){
        .ctl_fd = 5,
        .runsc = "/usr/bin/runsc",
        .state_dir = "/run/g/runsc",
        .bundle_dir = "/run/g/bundle",
        .container_id = "lz-0123456789ab",
        .overlay_dir = "/s/d/overlay",
        .router = "/usr/libexec/lazaret/lazaret-router",
        .workspace = "/home/u/ws",
        .view = "/run/g/workspace",
        .policy_fd = 7,
        .policy_digest = "ab12",
        .addr_fd = 9,
        .refusal_fd = 11,
        .protect = protect,
        .n_protect = 3,
        .rootfs = "/s/prepared/x/rootfs",
        .anchor_root = "/s/d/anchor-1",
        .anchor_target = "/run/g/anchor",
        .persist = persist,
        .n_persist = 2,
        .vol_source = vsrc,
        .vol_view = vview,
        .n_volumes = 2,
        .deny_link = deny,
        .n_deny_link = 3,
        .ignored_state = "/s/d/ignored",
        .git_home = "/home/u",
        .git_xdg = "/home/u/.config",
        .no_ignore_rules = true,
        .host_tools = tools,
        .n_host_tools = 2,
        .mailbox = "/run/g/mailbox",
    };
}

static size_t argv_len(char **v) {
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static void same_list(char **a, size_t na, char **b, size_t nb) {
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++)
        assert_string_equal(a[i], b[i]);
}

static void same_str(const char *a, const char *b) {
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_same(const struct lz_supervisor_args *a, const struct lz_supervisor_args *d) {
    assert_int_equal(a->ctl_fd, d->ctl_fd);
    assert_int_equal(a->policy_fd, d->policy_fd);
    assert_int_equal(a->addr_fd, d->addr_fd);
    assert_int_equal(a->refusal_fd, d->refusal_fd);
    same_str(a->runsc, d->runsc);
    same_str(a->state_dir, d->state_dir);
    same_str(a->bundle_dir, d->bundle_dir);
    same_str(a->container_id, d->container_id);
    same_str(a->overlay_dir, d->overlay_dir);
    same_str(a->router, d->router);
    same_str(a->workspace, d->workspace);
    same_str(a->view, d->view);
    same_str(a->policy_digest, d->policy_digest);
    same_str(a->rootfs, d->rootfs);
    same_str(a->anchor_root, d->anchor_root);
    same_str(a->anchor_target, d->anchor_target);
    same_str(a->ignored_state, d->ignored_state);
    same_str(a->git_home, d->git_home);
    same_str(a->git_xdg, d->git_xdg);
    same_str(a->mailbox, d->mailbox);
    assert_int_equal(a->no_ignore_rules, d->no_ignore_rules);
    same_list(a->protect, a->n_protect, d->protect, d->n_protect);
    same_list(a->persist, a->n_persist, d->persist, d->n_persist);
    same_list(a->vol_source, a->n_volumes, d->vol_source, d->n_volumes);
    same_list(a->vol_view, a->n_volumes, d->vol_view, d->n_vol_view);
    same_list(a->deny_link, a->n_deny_link, d->deny_link, d->n_deny_link);
    same_list(a->host_tools, a->n_host_tools, d->host_tools, d->n_host_tools);
}

/* Encoded, then decoded (after self and "__supervisor"): the same struct. */
static void roundtrip(const struct lz_supervisor_args *a) {
    char **argv = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_supargs_encode(a, "/self", &argv, &err), 0);
    assert_string_equal(argv[0], "/self");
    assert_string_equal(argv[1], "__supervisor");
    struct lz_supervisor_args d;
    int r = lz_supargs_decode((int)argv_len(argv) - 2, argv + 2, &d, &err);
    if (r < 0)
        fail_msg("decode: %s", err.msg);
    assert_same(a, &d);
    assert_int_equal(d.start_timeout_ms, LZ_RS_T_START_MS);
    lz_supargs_clear(&d);
    lz_argv_free(argv);
}

static void test_roundtrip(void **state) {
    (void)state;
    struct lz_supervisor_args a = full();
    roundtrip(&a);
    /* The smallest: no address watch, anchor, volumes, lists or flags. */
    struct lz_supervisor_args m = full();
    m.addr_fd = m.refusal_fd = -1;
    m.rootfs = m.anchor_root = m.anchor_target = NULL;
    m.n_persist = m.n_volumes = m.n_protect = m.n_deny_link = m.n_host_tools = 0;
    m.ignored_state = m.git_home = m.git_xdg = m.mailbox = NULL;
    m.no_ignore_rules = false;
    roundtrip(&m);
    /* Values that look like options are values. */
    struct lz_supervisor_args o = full();
    o.workspace = "--view";
    o.container_id = "";
    roundtrip(&o);
}

/* The decoder's verdict on argv (NULL-terminated), with its message. */
static int decode(const char *const *argv, char *msg, size_t n) {
    int argc = 0;
    while (argv[argc])
        argc++;
    struct lz_supervisor_args d;
    struct lz_error err = { 0 };
    int r = lz_supargs_decode(argc, (char *const *)argv, &d, &err);
    if (r == 0)
        lz_supargs_clear(&d);
    else {
        assert_int_equal(d.ctl_fd, -1);
        assert_int_equal(d.n_protect, 0);
        assert_null(d.protect);
    }
    snprintf(msg, n, "%s", err.msg);
    return r;
}

#define BASE                                                                                                           \
    "--ctl-fd", "3", "--runsc", "/r", "--state", "/s", "--bundle", "/b", "--id", "i", "--overlay", "/o", "--router",   \
        "/R", "--workspace", "/w", "--view", "/v", "--policy-fd", "4", "--policy-digest", "d"

static void refused(const char *const *argv, const char *want) {
    char msg[LZ_ERROR_MAX];
    assert_int_equal(decode(argv, msg, sizeof msg), -EINVAL);
    if (!strstr(msg, want))
        fail_msg("message '%s' does not say '%s'", msg, want);
}

static void test_refusals(void **state) {
    (void)state;
    char msg[LZ_ERROR_MAX];
    const char *ok[] = { BASE, NULL };
    assert_int_equal(decode(ok, msg, sizeof msg), 0);

    const char *unknown[] = { BASE, "--frobnicate", "x", NULL };
    refused(unknown, "unexpected argument '--frobnicate'");
    const char *positional[] = { BASE, "stray", NULL };
    refused(positional, "unexpected argument 'stray'");
    const char *single_dash[] = { BASE, "-v", "/x", NULL };
    refused(single_dash, "unexpected argument '-v'");
    const char *joined[] = { BASE, "--mailbox=/m", NULL };
    refused(joined, "unexpected argument '--mailbox=/m'");
    const char *dup[] = { BASE, "--view", "/v2", NULL };
    refused(dup, "--view given twice");
    const char *dupfd[] = { BASE, "--ctl-fd", "3", NULL };
    refused(dupfd, "--ctl-fd given twice");
    const char *novalue[] = { BASE, "--mailbox", NULL };
    refused(novalue, "--mailbox needs a value");
    const char *missing[] = { "--ctl-fd", "3", "--runsc", "/r", NULL };
    refused(missing, "--state is missing");
    const char *nodigest[] = { "--ctl-fd",    "3",    "--runsc", "/r",        "--state",     "/s",       "--bundle",
                               "/b",          "--id", "i",       "--overlay", "/o",          "--router", "/R",
                               "--workspace", "/w",   "--view",  "/v",        "--policy-fd", "4",        NULL };
    refused(nodigest, "--policy-digest is missing");
    static const char *const badfd[] = { "-1", "x", "3x", "+3", " 3", "65536", "123456", "", "0x10" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(badfd); i++) {
        const char *v[] = { BASE, "--addr-fd", badfd[i], NULL };
        refused(v, "--addr-fd");
        refused(v, "is not a descriptor number");
    }
    const char *maxfd[] = { BASE, "--addr-fd", "65535", NULL };
    assert_int_equal(decode(maxfd, msg, sizeof msg), 0);
    const char *halfanchor[] = { BASE, "--persist", "/usr", "--rootfs", "/l", NULL };
    refused(halfanchor, "--persist needs --rootfs, --anchor-root and --anchor-target");
    const char *anchornopersist[] = { BASE, "--rootfs", "/l", "--anchor-root", "/a", "--anchor-target", "/t", NULL };
    refused(anchornopersist, "need --persist");
    const char *unpaired[] = { BASE, "--volume", "/a", "--volume", "/b", "--volume-view", "/va", NULL };
    refused(unpaired, "2 --volume but 1 --volume-view");
    const char *flagvalue[] = { BASE, "--no-ignore-rules", "--no-ignore-rules", NULL };
    refused(flagvalue, "--no-ignore-rules given twice");
}

/* Lists are bounded: one more than the bound is refused, by both sides. */
static void test_bounds(void **state) {
    (void)state;
    size_t n = LZ_RS_DENY_MAX + 1;
    const char *base[] = { BASE };
    size_t nb = LZ_ARRAY_SIZE(base);
    const char **v = calloc(nb + 2 * n + 1, sizeof *v);
    memcpy(v, base, sizeof base);
    for (size_t i = 0; i < n; i++) {
        v[nb + 2 * i] = "--deny-link-target";
        v[nb + 2 * i + 1] = "/x";
    }
    refused(v, "more than 16 --deny-link-target values");
    v[nb + 2 * (n - 1)] = NULL; /* at the bound */
    char msg[LZ_ERROR_MAX];
    assert_int_equal(decode(v, msg, sizeof msg), 0);
    free(v);

    struct lz_supervisor_args a = full();
    char *many[LZ_RS_DENY_MAX + 1];
    for (size_t i = 0; i < LZ_ARRAY_SIZE(many); i++)
        many[i] = "/x";
    a.deny_link = many;
    a.n_deny_link = LZ_ARRAY_SIZE(many);
    char **argv = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_supargs_encode(&a, "/self", &argv, &err), -E2BIG);
    assert_null(argv);
    a = full();
    a.view = NULL;
    assert_int_equal(lz_supargs_encode(&a, "/self", &argv, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--view is missing"));
    a = full();
    a.ctl_fd = 70000;
    assert_int_equal(lz_supargs_encode(&a, "/self", &argv, &err), -EINVAL);
    a = full();
    a.n_persist = 0; /* an anchor without its directories */
    assert_int_equal(lz_supargs_encode(&a, "/self", &argv, &err), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
