/* test_hostca.c — the host CA certificates (hostca.h): only certificate
 * blocks are taken, normalized; the set is installed into a root
 * filesystem without following its symlinks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hostca.h"

#include <fcntl.h>
#include <sys/stat.h>

static const char CERT[] = "-----BEGIN CERTIFICATE-----\n"
                           "MIIBijCCAS+gAwIBAgIUa96D0HU8JleyyOxQLTnpDQkPr9kwCgYIKoZIzj0EAwIw\n"
                           "GjEYMBYGA1UEAwwPTGF6YXJldCBUZXN0IENBMB4XDTI2MTIwMTE4MjMzMVoXDTM2\n"
                           "MTEyODE4MjMzMVowGjEYMBYGA1UEAwwPTGF6YXJldCBUZXN0IENBMFkwEwYHKoZI\n"
                           "zj0CAQYIKoZIzj0DAQcDQgAEDo+R0PSNl3tHbHH+HlVtEq608OdL6dByFOzduqM2\n"
                           "gcpmoFCamHgFTF5bE7YD25Tqc31GB5GVqd2bCUyLuPKak6NTMFEwHQYDVR0OBBYE\n"
                           "FE48XlkBYwo5Yst/YIAo42xZWbOUMB8GA1UdIwQYMBaAFE48XlkBYwo5Yst/YIAo\n"
                           "42xZWbOUMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAPjAT5o2\n"
                           "zIQlsMTzWl37vV5VI5ojukQGzUB3Ew+D10uDAiEAmXKH/ewyakYcJ3tZSwLuJKHF\n"
                           "cqlsT5NvIdr9paKN1Ng=\n"
                           "-----END CERTIFICATE-----\n";
static const char KEY[] = "-----BEGIN PRIVATE KEY-----\n"
                          "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgxdxUYaDAzTio+X6/\n"
                          "XyDSchm8bIVPElSTkBaQ9skL+SChRANCAAQOj5HQ9I2Xe0dscf4eVW0SrrTw50vp\n"
                          "0HIU7N26ozaBymagUJqYeAVMXlsTtgPblOpzfUYHkZWp3ZsJTIu48pqT\n"
                          "-----END PRIVATE KEY-----\n";

static char root[256];

static void put(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, text, strlen(text)), 0);
    close(fd);
}

static char *get(const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *b = NULL;
    size_t n;
    assert_int_equal(lz_read_fd(fd, 1 << 20, &b, &n), 0);
    close(fd);
    return b;
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/lz-hostca-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lz_rm_rf_at(AT_FDCWD, root);
    return 0;
}

static void test_parse_takes_only_certificates(void **state) {
    (void)state;
    struct lz_hostca h = { 0 };
    /* A certificate saved with its private key, comments around. */
    char *file = lz_xasprintf("# company CA\n%s\n%s trailing\n", KEY, CERT);
    assert_int_equal(lz_hostca_parse("corp/ca.crt", file, strlen(file), &h), 1);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.skipped_blocks, 1);
    assert_string_equal(h.names[0], "00-corp_ca.crt");
    assert_string_equal(h.pems[0], CERT); /* openssl's own form is the normal form */
    assert_null(strstr(h.pems[0], "PRIVATE"));
    /* Not base64, not DER, an unterminated block: nothing taken. */
    static const char bad[] = "-----BEGIN CERTIFICATE-----\nnot*base64\n-----END CERTIFICATE-----\n"
                              "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
                              "-----BEGIN CERTIFICATE-----\nMIIB";
    assert_int_equal(lz_hostca_parse("bad.crt", bad, strlen(bad), &h), 0);
    assert_int_equal(h.n, 1);
    free(file);
    lz_hostca_clear(&h);
}

static void test_load_walks_crt_files(void **state) {
    (void)state;
    char d[300];
    snprintf(d, sizeof d, "%s/src", root);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(d, sizeof d, "%s/src/sub", root);
    assert_int_equal(mkdir(d, 0755), 0);
    put("src/b.crt", CERT);
    put("src/sub/a.crt", CERT);
    put("src/ignored.pem", CERT); /* not .crt: update-ca-certificates ignores it too */
    char t[300], l[300];
    snprintf(t, sizeof t, "%s/src/b.crt", root);
    snprintf(l, sizeof l, "%s/src/link.crt", root);
    assert_int_equal(symlink(t, l), 0); /* not followed */
    struct lz_hostca h;
    struct lz_error err = { 0 };
    snprintf(d, sizeof d, "%s/src", root);
    assert_int_equal(lz_hostca_load(d, &h, &err), 0);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.names[0], "00-b.crt");
    assert_string_equal(h.names[1], "01-sub_a.crt");
    uint8_t dg[32];
    memcpy(dg, h.digest, sizeof dg);
    lz_hostca_clear(&h);
    /* Another set, another digest; a missing directory is an empty set. */
    put("src/sub/a.crt", "");
    assert_int_equal(lz_hostca_load(d, &h, &err), 0);
    assert_int_equal(h.n, 1);
    assert_memory_not_equal(h.digest, dg, sizeof dg);
    lz_hostca_clear(&h);
    snprintf(d, sizeof d, "%s/none", root);
    assert_int_equal(lz_hostca_load(d, &h, &err), 0);
    assert_int_equal(h.n, 0);
}

static void test_install(void **state) {
    (void)state;
    char d[300];
    snprintf(d, sizeof d, "%s/rootfs", root);
    assert_int_equal(mkdir(d, 0755), 0);
    char *certs = lz_xasprintf("%s/rootfs/etc/ssl/certs", root);
    assert_int_equal(lz_mkdir_p(certs, 0755), 0);
    free(certs);
    put("rootfs/etc/ssl/certs/ca-certificates.crt", "SYSTEM\n");
    int rfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(rfd >= 0);
    struct lz_hostca h = { 0 };
    lz_hostca_parse("corp.crt", CERT, strlen(CERT), &h);
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostca_install(rfd, &h, geteuid(), getegid(), &err), 0);
    char *b = get("rootfs/etc/ssl/certs/ca-certificates.crt");
    assert_non_null(b);
    assert_true(strncmp(b, "SYSTEM\n", 7) == 0 && !strcmp(b + 7, CERT));
    free(b);
    b = get("rootfs/usr/local/share/ca-certificates/lazaret-host/00-corp.crt");
    assert_non_null(b);
    assert_string_equal(b, CERT);
    free(b);
    /* A bundle that is a symlink (to the host's) is never written through. */
    put("outside.crt", "HOST\n");
    char t[300], l[300];
    snprintf(t, sizeof t, "%s/outside.crt", root);
    snprintf(l, sizeof l, "%s/rootfs/etc/ssl/certs/ca-certificates.crt", root);
    assert_int_equal(unlink(l), 0);
    assert_int_equal(symlink(t, l), 0);
    assert_true(lz_hostca_install(rfd, &h, geteuid(), getegid(), &err) < 0);
    b = get("outside.crt");
    assert_string_equal(b, "HOST\n");
    free(b);
    close(rfd);
    lz_hostca_clear(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_takes_only_certificates),
        cmocka_unit_test(test_load_walks_crt_files),
        cmocka_unit_test(test_install),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
