/* Unit tests for the Host Coordinator's argument codec (coordargs.c):
 * round trip, and the decoder's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "argcodec.h"
#include "coordargs.h"

static void same_str(const char *a, const char *b) {
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void roundtrip(const struct lz_coordinator_args *a) {
    char **argv = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_coordargs_encode(a, "/self", &argv, &err), 0);
    assert_string_equal(argv[0], "/self");
    assert_string_equal(argv[1], "__coordinator");
    int argc = 0;
    while (argv[argc])
        argc++;
    struct lz_coordinator_args d;
    if (lz_coordargs_decode(argc - 2, argv + 2, &d, &err) < 0)
        fail_msg("decode: %s", err.msg);
    same_str(a->config_path, d.config_path);
    same_str(a->profile, d.profile);
    same_str(a->workspace, d.workspace);
    same_str(a->expect_domain, d.expect_domain);
    same_str(a->expect_fingerprint, d.expect_fingerprint);
    same_str(a->artifact_id, d.artifact_id);
    assert_int_equal(a->ready_fd, d.ready_fd);
    assert_int_equal(a->env_fd, d.env_fd);
    assert_int_equal(a->first_session, d.first_session);
    lz_argv_free(argv);
}

static const struct lz_coordinator_args full = {
    .config_path = "/home/u/.config/lazaret/lazaret.toml",
    .profile = "claude",
    .workspace = "/home/u/my ws",
    .expect_domain = "00ff",
    .expect_fingerprint = "ee11",
    .artifact_id = "abcd",
    .ready_fd = 4,
    .env_fd = 5,
    .first_session = 1,
};

static void test_roundtrip(void **state) {
    (void)state;
    roundtrip(&full);
    struct lz_coordinator_args m = full;
    m.config_path = m.profile = NULL;
    m.ready_fd = m.env_fd = -1;
    m.first_session = 0;
    roundtrip(&m);
    m.first_session = -1;
    roundtrip(&m);
    /* The encoder refuses what the decoder would. */
    char **argv = NULL;
    struct lz_error err = { 0 };
    m.artifact_id = NULL;
    assert_int_equal(lz_coordargs_encode(&m, "/self", &argv, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--artifact is missing"));
    m = full;
    m.first_session = 2;
    assert_int_equal(lz_coordargs_encode(&m, "/self", &argv, &err), -EINVAL);
    assert_null(argv);
}

#define BASE "--workspace", "/w", "--domain", "d", "--fingerprint", "f", "--artifact", "a"

static void refused(const char *const *argv, const char *want) {
    int argc = 0;
    while (argv[argc])
        argc++;
    struct lz_coordinator_args d;
    struct lz_error err = { 0 };
    assert_int_equal(lz_coordargs_decode(argc, (char *const *)argv, &d, &err), -EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("message '%s' does not say '%s'", err.msg, want);
    assert_null(d.workspace);
    assert_int_equal(d.ready_fd, -1);
    assert_int_equal(d.first_session, -1);
}

static void test_refusals(void **state) {
    (void)state;
    const char *ok[] = { BASE, "--first-session", "pipes", NULL };
    struct lz_coordinator_args d;
    struct lz_error err = { 0 };
    assert_int_equal(lz_coordargs_decode(10, (char *const *)ok, &d, &err), 0);
    assert_int_equal(d.first_session, 0);
    assert_int_equal(d.ready_fd, -1);
    assert_int_equal(d.env_fd, -1);

    const char *kind[] = { BASE, "--first-session", "both", NULL };
    refused(kind, "--first-session: unknown value 'both'");
    const char *unknown[] = { BASE, "--help", NULL };
    refused(unknown, "unexpected argument '--help'");
    const char *dup[] = { BASE, "--domain", "d2", NULL };
    refused(dup, "--domain given twice");
    const char *missing[] = { "--workspace", "/w", "--domain", "d", "--fingerprint", "f", NULL };
    refused(missing, "--artifact is missing");
    const char *badfd[] = { BASE, "--ready-fd", "-1", NULL };
    refused(badfd, "--ready-fd: '-1' is not a descriptor number");
    const char *novalue[] = { BASE, "--env-fd", NULL };
    refused(novalue, "--env-fd needs a value");
    const char *stray[] = { "stray", BASE, NULL };
    refused(stray, "unexpected argument 'stray'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
