/* Unit tests for the readiness report (readiness.c): the two lines, and
 * the decoder's and the reader's refusals (truncated, oversized, garbage,
 * silent, late). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "readiness.h"

#include <fcntl.h>

static int dec(const char *s, struct lz_ready *r) { return lz_ready_decode(s, strlen(s), r); }

static void test_lines(void **state) {
    (void)state;
    char b[LZ_READY_LINE_MAX];
    struct lz_ready r;
    size_t n = lz_ready_encode(LZ_READY_OK, NULL, b, sizeof b);
    assert_int_equal(n, 6);
    assert_memory_equal(b, "ready\n", 6); /* what tests/router/test_router.sh reads */
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_int_equal(r.status, LZ_READY_OK);
    assert_string_equal(r.msg, "");
    /* With a detail (the router's transport), bounded as a message. */
    n = lz_ready_encode(LZ_READY_OK, "io_uring, 2 queues", b, sizeof b);
    assert_memory_equal(b, "ready io_uring, 2 queues\n", n);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_int_equal(r.status, LZ_READY_OK);
    assert_string_equal(r.msg, "io_uring, 2 queues");

    n = lz_ready_encode(LZ_READY_ERROR, "cannot start: no runsc", b, sizeof b);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_int_equal(r.status, LZ_READY_ERROR);
    assert_string_equal(r.msg, "cannot start: no runsc");

    /* Control characters cannot end or forge the line. */
    n = lz_ready_encode(LZ_READY_ERROR, "a\nready\n\tb\x7f", b, sizeof b);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_string_equal(r.msg, "a?ready??b?");
    /* No message is still a message; UTF-8 is kept. */
    n = lz_ready_encode(LZ_READY_ERROR, NULL, b, sizeof b);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_string_equal(r.msg, "unknown error");
    n = lz_ready_encode(LZ_READY_ERROR, "caf\xc3\xa9", b, sizeof b);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_string_equal(r.msg, "caf\xc3\xa9");

    /* The longest message is cut at the bound, and still decodes. */
    char *big = malloc(4 * LZ_ERROR_MAX);
    memset(big, 'x', 4 * LZ_ERROR_MAX - 1);
    big[4 * LZ_ERROR_MAX - 1] = '\0';
    n = lz_ready_encode(LZ_READY_ERROR, big, b, sizeof b);
    assert_int_equal(n, LZ_READY_LINE_MAX);
    assert_int_equal(lz_ready_decode(b, n, &r), 0);
    assert_int_equal(strlen(r.msg), LZ_ERROR_MAX - 1);
    free(big);
}

static void test_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",          "\n",          "ready",    "ready\n\n", "ready\nx",     "ok\n",         "READY\n",      " ready\n",
        "ready \n",  "error\n",     "error \n", "error x",   "error a\tb\n", "error a\rb\n", "error a\nb\n", "errorx\n",
        "garbage\n", "\x00ready\n",
    };
    struct lz_ready r = { .status = LZ_READY_ERROR, .msg = "kept" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        if (dec(bad[i], &r) != -EBADMSG)
            fail_msg("accepted '%s'", bad[i]);
    assert_int_equal(lz_ready_decode("ready\n", 7, &r), -EBADMSG); /* a NUL after */
    assert_string_equal(r.msg, "kept");                            /* untouched */
    /* One byte over the longest line. */
    char b[LZ_READY_LINE_MAX + 1];
    memcpy(b, "error ", 6);
    memset(b + 6, 'x', sizeof b - 7);
    b[sizeof b - 1] = '\n';
    assert_int_equal(lz_ready_decode(b, sizeof b, &r), -EBADMSG);
    assert_int_equal(lz_ready_decode(b + 1, sizeof b - 1, &r), -EBADMSG); /* "rror ..." */
    memcpy(b + 1, "error ", 6);
    assert_int_equal(lz_ready_decode(b + 1, sizeof b - 1, &r), 0); /* exactly the bound */
}

static int read_of(const void *bytes, size_t n, bool close_writer, int timeout_ms, struct lz_ready *r) {
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(lz_write_full(p[1], bytes, n), 0);
    if (close_writer)
        close(p[1]);
    int rc = lz_ready_read(p[0], timeout_ms, r);
    close(p[0]);
    if (!close_writer)
        close(p[1]);
    return rc;
}

static void test_read(void **state) {
    (void)state;
    struct lz_ready r;
    assert_int_equal(read_of("ready\n", 6, true, 1000, &r), 0);
    assert_int_equal(r.status, LZ_READY_OK);
    /* The line is enough: the writer may stay open. */
    assert_int_equal(read_of("error it broke\n", 15, false, 1000, &r), 0);
    assert_int_equal(r.status, LZ_READY_ERROR);
    assert_string_equal(r.msg, "it broke");
    /* Gone without a word; truncated; garbage; silent; oversized. */
    assert_int_equal(read_of("", 0, true, 1000, &r), -EPIPE);
    assert_int_equal(read_of("rea", 3, true, 1000, &r), -EBADMSG);
    assert_int_equal(read_of("ok\n", 3, true, 1000, &r), -EBADMSG);
    long t0 = lz_now_ms();
    assert_int_equal(read_of("rea", 3, false, 100, &r), -ETIMEDOUT);
    assert_true(lz_now_ms() - t0 < 2000);
    size_t n = 3 * LZ_READY_LINE_MAX;
    char *big = malloc(n);
    memset(big, 'x', n);
    assert_int_equal(read_of(big, n, false, 1000, &r), -EBADMSG); /* bounded: no newline needed */
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
