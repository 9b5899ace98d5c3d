/* test_doctor.c — doctor's runsc version judgement, and its judgement of
 * the user-namespace probe against fake /proc trees (the switches of
 * Debian, of every kernel, and AppArmor's restriction of Ubuntu 23.10+,
 * whose kernel this machine does not have). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"

static void test_runsc_recent(void **state) {
    (void)state;
    assert_true(lz_doctor_runsc_recent("runsc version 0.0~20240729.0\nspec: 1.1.0-rc.1\n"));
    assert_true(lz_doctor_runsc_recent("runsc version release-20250101.0\n"));
    assert_true(lz_doctor_runsc_recent("runsc version 0.0~20240101\n"));
    /* bookworm's own, and what is not a date */
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~20221219.0\n"));
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~2024\n"));
    assert_false(lz_doctor_runsc_recent("runsc version 0.0~202407291.0\n"));
    assert_false(lz_doctor_runsc_recent(""));
}

struct fake {
    char root[64];
};

static int fake_setup(void **state) {
    struct fake *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->root, sizeof f->root, "/tmp/lz-doctor.XXXXXX");
    if (!mkdtemp(f->root)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fake_teardown(void **state) {
    struct fake *f = *state;
    int r = lz_rm_rf_at(AT_FDCWD, f->root);
    free(f);
    return r < 0 ? -1 : 0;
}

/* Writes root/path (its directories made) with text. */
static void put(const struct fake *f, const char *path, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", f->root, path);
    for (char *s = strchr(p + strlen(f->root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

#define APPARMOR "proc/sys/kernel/apparmor_restrict_unprivileged_userns"
#define CLONE "proc/sys/kernel/unprivileged_userns_clone"
#define MAXNS "proc/sys/user/max_user_namespaces"

static void test_userns_block(void **state) {
    struct fake *f = *state;
    /* No switch at all (an old or a minimal kernel): nothing blocks. */
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_NO_BLOCK);
    /* This machine's Debian kernel: the switches on. */
    put(f, CLONE, "1\n");
    put(f, MAXNS, "63439\n");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_NO_BLOCK);
    put(f, APPARMOR, "0\n");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_NO_BLOCK);
    /* Ubuntu 24.04's default. */
    put(f, APPARMOR, "1\n");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_APPARMOR);
    /* The harder switches are named first: turning AppArmor's off would
     * not be enough. */
    put(f, MAXNS, "0\n");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_MAX_ZERO);
    put(f, CLONE, "0\n");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_CLONE_OFF);
    /* Not a value it knows ("10", garbage): not a block. */
    put(f, CLONE, "10\n");
    put(f, MAXNS, "x");
    put(f, APPARMOR, "");
    assert_int_equal(lz_doctor_userns_block(f->root), LZ_USERNS_NO_BLOCK);
}

#define URING "sys/module/fuse/parameters/enable_uring"

static void judge_uring(struct lz_check *c, const char *root) {
    memset(c, 0, sizeof *c);
    lz_doctor_judge_fuse_uring(c, root);
}

static void test_fuse_uring(void **state) {
    struct fake *f = *state;
    struct lz_check c;
    /* No parameter: an older kernel, or one built without it. */
    judge_uring(&c, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_non_null(strstr(c.detail, "not in this kernel"));
    /* This machine's default: available, off; the fix is root's, once
     * and to keep. */
    put(f, URING, "N\n");
    put(f, "proc/sys/kernel/io_uring_disabled", "0\n");
    judge_uring(&c, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK); /* an opt-in: informative */
    assert_non_null(strstr(c.detail, "available but off"));
    assert_non_null(strstr(c.fix, "echo Y > /sys/module/fuse/parameters/enable_uring"));
    assert_non_null(strstr(c.fix, "/etc/tmpfiles.d/"));
    assert_non_null(strstr(c.fix, "host-wide"));
    put(f, URING, "Y\n");
    judge_uring(&c, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_non_null(strstr(c.detail, "enabled"));
    assert_null(strstr(c.detail, "io_uring_disabled"));
    put(f, "proc/sys/kernel/io_uring_disabled", "1\n");
    put(f, "proc/sys/kernel/io_uring_group", "1234\n");
    judge_uring(&c, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_non_null(strstr(c.detail, "io_uring_disabled=1"));
    assert_non_null(strstr(c.detail, "io_uring_group 1234"));
    put(f, "proc/sys/kernel/io_uring_disabled", "2\n");
    judge_uring(&c, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_non_null(strstr(c.detail, "io_uring is disabled"));
}

static void judge(struct lz_check *c, bool created, const char *root) {
    memset(c, 0, sizeof *c);
    c->name = "unprivileged user namespaces";
    lz_doctor_judge_userns(c, created, root);
}

static void test_judge_userns(void **state) {
    struct fake *f = *state;
    struct lz_check c;

    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_null(strstr(c.detail, "AppArmor"));
    judge(&c, false, f->root);
    assert_int_equal(c.status, LZ_CHECK_FAIL);
    assert_string_equal(c.detail, "unshare(CLONE_NEWUSER) failed");

    /* AppArmor's restriction, the probe refused: the fix is the profile. */
    put(f, APPARMOR, "1\n");
    judge(&c, false, f->root);
    assert_int_equal(c.status, LZ_CHECK_FAIL);
    assert_non_null(strstr(c.detail, "kernel.apparmor_restrict_unprivileged_userns=1"));
    assert_non_null(strstr(c.fix, "sudo apparmor_parser -r /etc/apparmor.d/lazaret"));
    assert_non_null(strstr(c.fix, "packaging/apparmor/lazaret /etc/apparmor.d/"));

    /* Created, but not under Lazaret's profile (root, or another
     * profile's process): runsc would still be refused. */
    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_WARN);
    assert_non_null(strstr(c.fix, "apparmor_parser"));
    put(f, "proc/self/attr/apparmor/current", "unconfined\n");
    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_WARN);
    /* A profile whose name only begins with lazaret's is another one. */
    put(f, "proc/self/attr/apparmor/current", "lazaretx (enforce)\n");
    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_WARN);
    /* Under the profile: OK, and it says why. */
    put(f, "proc/self/attr/apparmor/current", "lazaret (unconfined)\n");
    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);
    assert_non_null(strstr(c.detail, "Lazaret's profile allows them"));
    /* The label in the older place only (kernels before 5.8). */
    char p[256];
    snprintf(p, sizeof p, "%s/proc/self/attr/apparmor/current", f->root);
    assert_int_equal(unlink(p), 0);
    put(f, "proc/self/attr/current", "lazaret (unconfined)\n");
    judge(&c, true, f->root);
    assert_int_equal(c.status, LZ_CHECK_OK);

    /* Debian's own switch and the namespace limit: each its sysctl. */
    put(f, MAXNS, "0\n");
    judge(&c, false, f->root);
    assert_int_equal(c.status, LZ_CHECK_FAIL);
    assert_non_null(strstr(c.fix, "user.max_user_namespaces="));
    put(f, CLONE, "0\n");
    judge(&c, false, f->root);
    assert_int_equal(c.status, LZ_CHECK_FAIL);
    assert_non_null(strstr(c.fix, "kernel.unprivileged_userns_clone=1"));
    assert_null(strstr(c.fix, "apparmor"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runsc_recent),
        cmocka_unit_test_setup_teardown(test_userns_block, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_judge_userns, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_fuse_uring, fake_setup, fake_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
