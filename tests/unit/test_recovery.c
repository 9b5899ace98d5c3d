/* Unit tests for bootstrap recovery's typed report (recovery.c,
 * lz_domain_recover_report) and its reading of the sandbox's evidence,
 * on a real Domain Store in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "recovery.h"

#include <fcntl.h>

#define DOM "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct seen {
    int n;
    int64_t gen[4];
    int clean_lines;
};

static void log_fn(void *ud, const char *msg) {
    struct seen *s = ud;
    if (strstr(msg, " is clean"))
        s->clean_lines++;
}

static void report_fn(void *ud, const struct lz_recovery_report *rep) {
    struct seen *s = ud;
    assert_int_equal(rep->event, LZ_RECOVERY_GEN_CLEAN);
    /* The log line comes first. */
    assert_int_equal(s->clean_lines, s->n + 1);
    if (s->n < 4)
        s->gen[s->n] = rep->gen;
    s->n++;
}

/* A store with `n` generations left "failed", the sandbox of each with
 * that evidence. */
static struct lz_store *store_with(const char *dir, int n, const char *evidence, int64_t *gens) {
    struct lz_store_identity id = { .domain_id = DOM, .profile = "p", .workspace = "/w" };
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    if (lz_store_open(dir, &id, true, &st, &err) < 0)
        fail_msg("store open: %s", err.msg);
    struct lz_procid hc = { .pid = 1, .start_time = -1 };
    for (int i = 0; i < n; i++) {
        assert_int_equal(lz_store_gen_begin(st, "fp", &hc, &gens[i], &err), 0);
        assert_int_equal(lz_store_part_set(st, gens[i], LZ_ROLE_SANDBOX, LZ_P_INTENT, NULL, NULL, evidence, &err), 0);
        assert_int_equal(lz_store_gen_set_state(st, gens[i], "failed", &err), 0);
    }
    return st;
}

static void test_report(void **state) {
    (void)state;
    char dir[] = "/tmp/lz-test-recovery-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int64_t gens[2];
    /* The old text form; a boot ID of "" is another boot: no absence proof. */
    struct lz_store *st = store_with(dir, 2, "userns=4026531837 mntns=4026531840 netns=4026531992", gens);
    struct seen s = { 0 };
    struct lz_error err = { 0 };
    int r = lz_domain_recover_report(st, "/nonexistent", DOM, log_fn, report_fn, &s, &err);
    if (r < 0)
        fail_msg("recover: %s", err.msg);
    assert_int_equal(r, 2);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.gen[0], gens[0]);
    assert_int_equal(s.gen[1], gens[1]);
    /* Nothing left: no report. */
    s = (struct seen){ 0 };
    assert_int_equal(lz_domain_recover_report(st, "/nonexistent", DOM, log_fn, report_fn, &s, &err), 0);
    assert_int_equal(s.n, 0);
    lz_store_close(st);
    lz_rm_rf_at(AT_FDCWD, dir);
}

/* A sandbox record whose evidence cannot be read: recovery refuses,
 * closed, and reports nothing (it used to read userns 0 and go on). */
static void test_malformed_evidence(void **state) {
    (void)state;
    char dir[] = "/tmp/lz-test-recovery-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int64_t gen;
    struct lz_store *st = store_with(dir, 1, "userns=12 userns=13", &gen);
    struct seen s = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_domain_recover_report(st, "/nonexistent", DOM, log_fn, report_fn, &s, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "malformed"));
    assert_int_equal(s.n, 0);
    lz_store_close(st);
    lz_rm_rf_at(AT_FDCWD, dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_malformed_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
