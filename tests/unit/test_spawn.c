/* Unit tests for the spawn/reap broker (spawn.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spawn.h"

#include <fcntl.h>
#include <signal.h>

static void test_exit_status(void **state) {
    (void)state;
    char *argv[] = { "/bin/sh", "-c", "exit 7", NULL };
    struct lz_spawn_opts o = {
        .path = "/bin/sh", .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .setns_pidfd = -1
    };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    assert_true(c.pidfd >= 0);
    int st = -1;
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    assert_int_equal(st, 7);
    assert_int_equal(c.pidfd, -EBADF);
}

static void test_signal_status(void **state) {
    (void)state;
    char *argv[] = { "/bin/sleep", "100", NULL };
    struct lz_spawn_opts o = {
        .path = "/bin/sleep", .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .setns_pidfd = -1
    };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    int st = -1;
    assert_int_equal(lz_child_wait(&c, 50, &st), -ETIMEDOUT);
    assert_int_equal(lz_child_signal(&c, SIGINT), 0);
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    assert_int_equal(st, 128 + SIGINT);
}

static void test_exec_failure_reported(void **state) {
    (void)state;
    char *argv[] = { "/nonexistent/prog", NULL };
    struct lz_spawn_opts o = {
        .path = "/nonexistent/prog", .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .setns_pidfd = -1
    };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), -ENOENT);
}

static void test_barrier_and_stdio(void **state) {
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    char *argv[] = { "/bin/sh", "-c", "echo released", NULL };
    struct lz_spawn_opts o = { .path = "/bin/sh",
                               .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = p[1],
                               .stderr_fd = -1,
                               .setns_pidfd = -1,
                               .barrier = true };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    close(p[1]);
    /* Held at the barrier: nothing written yet, still running. */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    char b[32];
    assert_int_equal(read(p[0], b, sizeof b), -1);
    assert_int_equal(errno, EAGAIN);
    int st;
    assert_int_equal(lz_child_try_reap(&c, &st), 0);
    assert_int_equal(lz_child_release(&c), 0);
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    assert_int_equal(st, 0);
    fcntl(p[0], F_SETFL, 0);
    ssize_t n = read(p[0], b, sizeof b);
    assert_int_equal(n, 9);
    assert_memory_equal(b, "released\n", 9);
    close(p[0]);
}

static void test_stop_escalates(void **state) {
    (void)state;
    /* A child that ignores SIGTERM is killed after the grace period. */
    char *argv[] = { "/bin/sh", "-c", "trap '' TERM; echo x; while :; do sleep 1; done", NULL };
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    struct lz_spawn_opts o = {
        .path = "/bin/sh", .argv = argv, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1, .setns_pidfd = -1
    };
    struct lz_child c;
    assert_int_equal(lz_spawn(&o, &c), 0);
    close(p[1]);
    char b;
    assert_int_equal(read(p[0], &b, 1), 1); /* trap installed */
    close(p[0]);
    int st;
    assert_int_equal(lz_child_stop(&c, 200, &st), 0);
    assert_int_equal(st, 128 + SIGKILL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status),           cmocka_unit_test(test_signal_status),
        cmocka_unit_test(test_exec_failure_reported), cmocka_unit_test(test_barrier_and_stdio),
        cmocka_unit_test(test_stop_escalates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
