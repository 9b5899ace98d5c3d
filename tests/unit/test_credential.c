/* Unit tests of credential.c: the placeholder, the value check, and the
 * fetch of values from files and host commands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "credential.h"

#include <fcntl.h>
#include <sys/stat.h>

static char dir[] = "/tmp/lz-test-credential-XXXXXX";

static int setup(void **state) {
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_placeholder(void **state) {
    (void)state;
    uint8_t id[32] = { 1, 2, 3 }, id2[32] = { 1, 2, 4 };
    char a[LZ_CRED_PLACEHOLDER_LEN + 1], b[LZ_CRED_PLACEHOLDER_LEN + 1], c[LZ_CRED_PLACEHOLDER_LEN + 1];
    lz_credential_placeholder(id, "ANTHROPIC_API_KEY", a);
    lz_credential_placeholder(id, "ANTHROPIC_API_KEY", b);
    assert_string_equal(a, b); /* stable for a Domain and a variable */
    assert_int_equal(strlen(a), 37);
    assert_memory_equal(a, "lzph_", 5);
    assert_int_equal(strspn(a + 5, "0123456789abcdef"), 32);
    lz_credential_placeholder(id2, "ANTHROPIC_API_KEY", c);
    assert_string_not_equal(a, c); /* another Domain */
    lz_credential_placeholder(id, "OPENAI_API_KEY", c);
    assert_string_not_equal(a, c); /* another variable */
}

static void test_value_problem(void **state) {
    (void)state;
    assert_null(lz_credential_value_problem("sk-ant-0123456789", 17));
    assert_non_null(lz_credential_value_problem("", 0));
    assert_non_null(lz_credential_value_problem("short", 5));
    assert_non_null(lz_credential_value_problem("sk-ant 0123456789", 17));
    assert_non_null(lz_credential_value_problem("sk-ant\r\n0123456789", 18));
    assert_non_null(lz_credential_value_problem("sk-ant-\xc3\xa9-0123456789", 19));
    char big[LZ_CRED_VALUE_MAX + 2];
    memset(big, 'a', sizeof big);
    assert_null(lz_credential_value_problem(big, LZ_CRED_VALUE_MAX));
    assert_non_null(lz_credential_value_problem(big, LZ_CRED_VALUE_MAX + 1));
}

static void write_mode(const char *path, const char *text, mode_t mode) {
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static int fetch_file(const char *path, char **value, struct lz_error *err) {
    struct lz_credential cr = { .var = (char *)"K", .from = LZ_CRED_FROM_FILE, .from_file = (char *)path };
    int r = lz_credential_fetch(&cr, NULL, err);
    *value = cr.value;
    return r;
}

static void test_fetch_file(void **state) {
    (void)state;
    char p[256], l[256];
    struct lz_error err = { 0 };
    char *v = NULL;
    snprintf(p, sizeof p, "%s/token", dir);
    write_mode(p, "ghp_0123456789abcdef\nsecond line\n", 0600);
    assert_int_equal(fetch_file(p, &v, &err), 0);
    assert_string_equal(v, "ghp_0123456789abcdef"); /* the first line */
    free(v);
    write_mode(p, "ghp_0123456789abcdef\r\n", 0400);
    assert_int_equal(fetch_file(p, &v, &err), 0);
    assert_string_equal(v, "ghp_0123456789abcdef");
    free(v);
    /* Readable by others: refused, with what to do. */
    write_mode(p, "ghp_0123456789abcdef\n", 0644);
    assert_int_equal(fetch_file(p, &v, &err), -EPERM);
    assert_non_null(strstr(err.msg, "chmod 600"));
    assert_null(v);
    write_mode(p, "ghp_0123456789abcdef\n", 0620);
    assert_int_equal(fetch_file(p, &v, &err), -EPERM);
    /* A symbolic link: refused (name the file itself). */
    write_mode(p, "ghp_0123456789abcdef\n", 0600);
    snprintf(l, sizeof l, "%s/link", dir);
    assert_int_equal(symlink(p, l), 0);
    assert_int_equal(fetch_file(l, &v, &err), -ELOOP);
    assert_non_null(strstr(err.msg, "symbolic link"));
    /* Missing, a directory, an empty first line, a bad value. */
    snprintf(l, sizeof l, "%s/missing", dir);
    assert_int_equal(fetch_file(l, &v, &err), -ENOENT);
    assert_int_equal(fetch_file(dir, &v, &err) < 0, 1);
    write_mode(p, "\nghp_0123456789abcdef\n", 0600);
    assert_int_equal(fetch_file(p, &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is empty"));
    write_mode(p, "ghp 0123456789abcdef\n", 0600);
    assert_int_equal(fetch_file(p, &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "cannot go into an HTTP header"));
    assert_null(strstr(err.msg, "0123456789abcdef")); /* never the value in a message */
}

static int fetch_cmd(char **argv, size_t n, char **value, struct lz_error *err) {
    struct lz_credential cr = {
        .var = (char *)"K", .from = LZ_CRED_FROM_COMMAND, .from_command = argv, .n_from_command = n
    };
    int r = lz_credential_fetch(&cr, NULL, err);
    *value = cr.value;
    return r;
}

static void test_fetch_command(void **state) {
    (void)state;
    struct lz_error err = { 0 };
    char *v = NULL;
    char *ok[] = { "sh", "-c", "echo gho_0123456789abcdef; echo more", NULL };
    assert_int_equal(fetch_cmd(ok, 3, &v, &err), 0);
    assert_string_equal(v, "gho_0123456789abcdef");
    free(v);
    char *abs[] = { "/bin/echo", "gho_abcdef0123456789", NULL };
    assert_int_equal(fetch_cmd(abs, 2, &v, &err), 0);
    assert_string_equal(v, "gho_abcdef0123456789");
    free(v);
    /* A failure says the status and the first line of stderr. */
    char *bad[] = { "sh", "-c", "echo 'not logged in' >&2; exit 3", NULL };
    assert_int_equal(fetch_cmd(bad, 3, &v, &err), -EIO);
    assert_non_null(strstr(err.msg, "exited with status 3: not logged in"));
    assert_null(v);
    char *none[] = { "lazaret-no-such-program", NULL };
    assert_int_equal(fetch_cmd(none, 1, &v, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "not found"));
    /* Endless output: bounded, the first line still taken. */
    char *flood[] = { "sh", "-c", "echo gho_0123456789abcdef; yes | head -c 200000", NULL };
    if (fetch_cmd(flood, 3, &v, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(v, "gho_0123456789abcdef");
    free(v);
    /* A program that does not end: killed at the bound. */
    lz_credential_fetch_ms = 300;
    long t0 = lz_now_ms();
    char *hang[] = { "sleep", "30", NULL };
    assert_int_equal(fetch_cmd(hang, 2, &v, &err), -ETIMEDOUT);
    assert_true(lz_now_ms() - t0 < 5000);
    assert_non_null(strstr(err.msg, "did not finish"));
    lz_credential_fetch_ms = LZ_CRED_FETCH_MS;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholder),
        cmocka_unit_test(test_value_problem),
        cmocka_unit_test(test_fetch_file),
        cmocka_unit_test(test_fetch_command),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
