/* Unit tests for the helper environments and the env hand-over (procenv.c),
 * and for what the spawn broker lets a child inherit (spawn.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config.h"
#include "procenv.h"
#include "spawn.h"

#include <fcntl.h>
#include <sys/mman.h>

#define SECRET "lz-unit-secret-7f3a"

static bool envp_has(char **v, const char *kv) {
    for (size_t i = 0; v && v[i]; i++)
        if (!strcmp(v[i], kv))
            return true;
    return false;
}

static bool envp_mentions(char **v, const char *needle) {
    for (size_t i = 0; v && v[i]; i++)
        if (strstr(v[i], needle))
            return true;
    return false;
}

static size_t envp_len(char **v) {
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* A test hook reaches the helpers in test builds only (-Dtest_hooks=true):
 * a release build does not pass what it would not read. */
static bool test_hook_as_built(char **v) {
#ifdef LZ_TEST_HOOKS
    return envp_has(v, "LAZARET_TEST_CRASH=nowhere");
#else
    return !envp_mentions(v, "LAZARET_TEST_CRASH");
#endif
}

static int setup_env(void **state) {
    (void)state;
    setenv("LZ_UNIT_SECRET", SECRET, 1);
    setenv("LAZARET_DEBUG", "1", 1);
    setenv("LAZARET_TEST_CRASH", "nowhere", 1);
    setenv("HOME", "/home/unit", 1);
    setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
    setenv("HTTPS_PROXY", "http://proxy.invalid:3128", 1);
    return 0;
}

static void test_helper_env_is_path_only(void **state) {
    (void)state;
    char **v = lz_env_build(LZ_ENV_HELPER);
    assert_int_equal(envp_len(v), 1);
    assert_true(envp_has(v, LZ_HELPER_PATH));
    lz_env_free(v);
}

static void test_supervisor_env_has_hooks_only(void **state) {
    (void)state;
    char **v = lz_env_build(LZ_ENV_SUPERVISOR);
    assert_true(envp_has(v, LZ_HELPER_PATH));
    assert_true(envp_has(v, "LAZARET_DEBUG=1"));
    assert_true(test_hook_as_built(v));
    assert_false(envp_mentions(v, SECRET));
    assert_false(envp_mentions(v, "HOME="));
    assert_false(envp_mentions(v, "PROXY"));
    lz_env_free(v);
}

static void test_coordinator_env_has_dirs(void **state) {
    (void)state;
    char **v = lz_env_build(LZ_ENV_COORDINATOR);
    assert_true(envp_has(v, "HOME=/home/unit"));
    assert_true(envp_has(v, "XDG_RUNTIME_DIR=/run/user/4242"));
    assert_true(envp_has(v, "LAZARET_DEBUG=1"));
    assert_true(test_hook_as_built(v));
    assert_false(envp_mentions(v, SECRET));
    assert_false(envp_mentions(v, "LZ_UNIT_SECRET"));
    lz_env_free(v);
}

static void test_tool_env_keeps_proxies_not_secrets(void **state) {
    (void)state;
    char **v = lz_tool_env();
    assert_true(envp_has(v, "HTTPS_PROXY=http://proxy.invalid:3128"));
    assert_true(envp_has(v, "HOME=/home/unit"));
    assert_true(envp_mentions(v, "PATH="));
    assert_false(envp_mentions(v, SECRET));
    lz_env_free(v);
}

/* Output of `env` run through the broker with o's environment. */
static void spawn_env(char *const *envp, char *out, size_t cap) {
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    char *argv[] = { "/usr/bin/env", NULL };
    struct lz_spawn_opts o = { .path = "/usr/bin/env",
                               .argv = argv,
                               .envp = envp,
                               .stdin_fd = -1,
                               .stdout_fd = p[1],
                               .stderr_fd = -1,
                               .setns_pidfd = -1 };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    close(p[1]);
    ssize_t n = lz_read_full(p[0], out, cap - 1);
    close(p[0]);
    out[n > 0 ? n : 0] = '\0';
    int st = -1;
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    assert_int_equal(st, 0);
}

static void test_spawn_default_env_is_not_ours(void **state) {
    (void)state;
    char out[4096];
    spawn_env(NULL, out, sizeof out);
    assert_string_equal(out, LZ_HELPER_PATH "\n");
    /* Control: an explicit environment does arrive, so the check above
     * would see a secret that was passed. */
    char *e[] = { "LZ_UNIT_SECRET=" SECRET, NULL };
    spawn_env(e, out, sizeof out);
    assert_non_null(strstr(out, SECRET));
}

static int run_test_fd(int fd, const int *keep, size_t n_keep) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "test -e /proc/self/fd/%d", fd);
    char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    struct lz_spawn_opts o = { .path = "/bin/sh",
                               .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = -1,
                               .stderr_fd = -1,
                               .keep_fds = keep,
                               .n_keep_fds = n_keep,
                               .setns_pidfd = -1 };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    int st = -1;
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    return st;
}

static void test_spawn_closes_high_fds(void **state) {
    (void)state;
    /* An fd without O_CLOEXEC, above the old 1024 bound, is not inherited;
     * kept, it is (the control). */
    int fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, 1500), 1500);
    close(fd);
    assert_int_equal(run_test_fd(1500, NULL, 0), 1);
    int keep[] = { 1500 };
    assert_int_equal(run_test_fd(1500, keep, 1), 0);
    close(1500);
}

static struct lz_config *config_with(struct lz_env_entry *e, size_t n) {
    struct lz_config *c = calloc(1, sizeof *c);
    c->profile.env = e;
    c->profile.n_env = n;
    return c;
}

static void test_envpass_round_trip(void **state) {
    (void)state;
    struct lz_env_entry e[] = {
        { "A", "env:HOST_A", "value-a" },
        { "B", NULL, "literal-b" },             /* literals are not handed over */
        { "C", "env:HOST_A", "value-a" },       /* the same host variable once */
        { "D", "env:HOST_D", "" },              /* empty is a value */
        { "E", "env:HOST_E", "x=y=z\xc3\xa9" }, /* '=' and UTF-8 in a value */
    };
    struct lz_config *c = config_with(e, 5);
    int fd = -1;
    assert_int_equal(lz_envpass_create(c, &fd, NULL), 0);
    free(c);
    int fl = fcntl(fd, F_GETFD);
    assert_true(fl & FD_CLOEXEC);
    int seals = fcntl(fd, F_GET_SEALS);
    assert_true(seals & F_SEAL_WRITE);
    assert_true(seals & F_SEAL_SEAL);
    struct lz_envpass *p = NULL;
    assert_int_equal(lz_envpass_read(fd, &p, NULL), 0);
    close(fd);
    assert_string_equal(lz_envpass_get(p, "HOST_A"), "value-a");
    assert_string_equal(lz_envpass_get(p, "HOST_D"), "");
    assert_string_equal(lz_envpass_get(p, "HOST_E"), "x=y=z\xc3\xa9");
    assert_null(lz_envpass_get(p, "HOST"));
    assert_null(lz_envpass_get(p, "B"));
    assert_null(lz_envpass_get(p, "LZ_UNIT_SECRET")); /* never our own env */
    lz_envpass_free(p);
    assert_null(lz_envpass_get(NULL, "HOST_A"));
}

static int memfd_with(const char *b, size_t n) {
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, b, n), 0);
    return fd;
}

static void test_envpass_refuses_bad_records(void **state) {
    (void)state;
    static const struct {
        const char *b;
        size_t n;
    } bad[] = {
        { "A=1", 3 },        /* no terminating NUL */
        { "=1\0", 3 },       /* empty name */
        { "1A=x\0", 5 },     /* invalid name */
        { "A-B=x\0", 6 },    /* invalid name */
        { "NOEQUALS\0", 9 }, /* no '=' */
        { "A=1\0A=2\0", 8 }, /* duplicate */
        { "A=\xff\0", 4 },   /* not UTF-8 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = memfd_with(bad[i].b, bad[i].n);
        struct lz_envpass *p = NULL;
        struct lz_error err = { 0 };
        assert_int_equal(lz_envpass_read(fd, &p, &err), -EBADMSG);
        assert_null(p);
        assert_true(err.msg[0] != '\0');
        close(fd);
    }
    /* Empty is fine: a profile without references. */
    int fd = memfd_with("", 0);
    struct lz_envpass *p = NULL;
    assert_int_equal(lz_envpass_read(fd, &p, NULL), 0);
    assert_null(lz_envpass_get(p, "A"));
    lz_envpass_free(p);
    close(fd);
    /* A pipe is not a hand-over. */
    int pp[2];
    assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
    assert_int_equal(lz_envpass_read(pp[0], &p, NULL), -EBADMSG);
    close(pp[0]);
    close(pp[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helper_env_is_path_only),
        cmocka_unit_test(test_supervisor_env_has_hooks_only),
        cmocka_unit_test(test_coordinator_env_has_dirs),
        cmocka_unit_test(test_tool_env_keeps_proxies_not_secrets),
        cmocka_unit_test(test_spawn_default_env_is_not_ours),
        cmocka_unit_test(test_spawn_closes_high_fds),
        cmocka_unit_test(test_envpass_round_trip),
        cmocka_unit_test(test_envpass_refuses_bad_records),
    };
    return cmocka_run_group_tests(tests, setup_env, NULL);
}
