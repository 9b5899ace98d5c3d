/* Unit tests for the hot-reload channel (hotnotify.c): valid and refused
 * paths, the round trip, partial records, resynchronisation after bytes
 * that are not a record, the router's coalescing queue, and the poke
 * value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hotnotify.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool valid(const char *s) { return lz_hot_path_valid(s, strlen(s)); }

static void test_paths(void **state) {
    (void)state;
    assert_true(valid("."));
    assert_true(valid("a"));
    assert_true(valid("src/main.c"));
    assert_true(valid(".git/HEAD"));
    assert_true(valid("a/..b/c.."));
    assert_true(valid("caf\xc3\xa9/x"));
    static const char *const bad[] = { "",   "/",    "/etc/passwd", "a/",   "a//b", "./a",  "a/.",
                                       "..", "../x", "a/../b",      "a/..", "a\nb", "a\tb", "\x7f" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(valid(bad[i]));
    char big[LZ_HOT_PATH_MAX + 2];
    memset(big, 'x', sizeof big - 1);
    big[LZ_HOT_PATH_MAX] = 0;
    assert_true(valid(big));
    big[LZ_HOT_PATH_MAX] = 'x';
    big[LZ_HOT_PATH_MAX + 1] = 0;
    assert_false(valid(big));
}

static void test_round_trip(void **state) {
    (void)state;
    char b[64];
    int n = lz_hot_encode("src/app.js", b, sizeof b);
    assert_int_equal(n, 11);
    assert_memory_equal(b, "src/app.js\0", 11);
    size_t used = 0;
    const char *p = NULL;
    assert_int_equal(lz_hot_next(b, (size_t)n, &used, &p), 1);
    assert_int_equal(used, 11);
    assert_string_equal(p, "src/app.js");
    assert_int_equal(lz_hot_encode("../x", b, sizeof b), -EINVAL);
    assert_int_equal(lz_hot_encode("src/app.js", b, 10), -ENOSPC);
}

static void test_stream(void **state) {
    (void)state;
    /* Half a record: nothing taken yet. */
    size_t used = 99;
    const char *p = NULL;
    assert_int_equal(lz_hot_next("src/a", 5, &used, &p), 0);
    assert_int_equal(used, 99);
    assert_null(p);
    /* Injected garbage is dropped up to its NUL; the next record is read. */
    static const char s[] = "/etc/shadow\0../up\0ok/x\0";
    size_t off = 0, good = 0;
    int bad = 0;
    while (off < sizeof s - 1) {
        int r = lz_hot_next(s + off, sizeof s - 1 - off, &used, &p);
        assert_true(r != 0);
        if (r == 1) {
            assert_string_equal(p, "ok/x");
            good++;
        } else {
            assert_int_equal(r, -EINVAL);
            bad++;
        }
        off += used;
    }
    assert_int_equal(good, 1);
    assert_int_equal(bad, 2);
    /* No NUL in more than a record's bytes: all of it dropped. */
    char big[LZ_HOT_RECORD_MAX + 1];
    memset(big, 'a', sizeof big);
    assert_int_equal(lz_hot_next(big, sizeof big, &used, &p), -EMSGSIZE);
    assert_int_equal(used, sizeof big);
    assert_int_equal(lz_hot_next(big, LZ_HOT_RECORD_MAX, &used, &p), 0);
}

/* Every record of buf[0..len) in order, joined by spaces. */
static void records(const char *buf, size_t len, char *out, size_t cap) {
    size_t off = 0, o = 0;
    out[0] = 0;
    while (off < len) {
        size_t used = 0;
        const char *p = NULL;
        assert_int_equal(lz_hot_next(buf + off, len - off, &used, &p), 1);
        o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? " " : "", p);
        off += used;
    }
}

static void test_queue(void **state) {
    (void)state;
    static struct lz_hot_queue q;
    lz_hot_queue_init(&q);
    assert_true(lz_hot_queue_empty(&q));
    assert_int_equal(lz_hot_queue_add(&q, "a/b"), 0);
    assert_int_equal(lz_hot_queue_add(&q, "a/c"), 0);
    assert_int_equal(lz_hot_queue_add(&q, "a/b"), 0); /* once */
    assert_int_equal(lz_hot_queue_add(&q, "../x"), -EINVAL);
    assert_false(lz_hot_queue_empty(&q));
    char buf[4096], out[8192];
    size_t count = 0;
    size_t len = lz_hot_queue_peek(&q, buf, sizeof buf, &count);
    assert_int_equal(count, 2);
    records(buf, len, out, sizeof out);
    assert_string_equal(out, "a/b a/c");
    /* Room for one record only: whole records, the first. */
    len = lz_hot_queue_peek(&q, buf, 5, &count);
    assert_int_equal(count, 1);
    assert_int_equal(len, 4);
    lz_hot_queue_consume(&q, 1);
    len = lz_hot_queue_peek(&q, buf, sizeof buf, &count);
    records(buf, len, out, sizeof out);
    assert_string_equal(out, "a/c");
    lz_hot_queue_consume(&q, count);
    assert_true(lz_hot_queue_empty(&q));
    /* Queued again once written. */
    assert_int_equal(lz_hot_queue_add(&q, "a/b"), 0);
    assert_false(lz_hot_queue_empty(&q));
    lz_hot_queue_consume(&q, 1);
    assert_true(lz_hot_queue_empty(&q));
}

static bool has(const struct lz_hot_queue *q, const char *path) {
    for (size_t i = 0, off = 0; i < q->n; off += q->len[i] + 1u, i++)
        if (strcmp(q->buf + off, path) == 0)
            return true;
    return false;
}

static void test_queue_coalesces(void **state) {
    (void)state;
    static struct lz_hot_queue q;
    lz_hot_queue_init(&q);
    char p[64];
    assert_int_equal(lz_hot_queue_add(&q, "README"), 0);
    /* A flood in one directory becomes that directory, queued once,
     * whatever its size; what lies elsewhere stays. */
    for (int i = 0; i < 10 * LZ_HOT_QUEUE_PATHS; i++) {
        snprintf(p, sizeof p, "src/gen/f%d", i);
        assert_int_equal(lz_hot_queue_add(&q, p), 0);
        assert_true(q.n <= LZ_HOT_QUEUE_PATHS);
    }
    assert_true(has(&q, "src/gen"));
    assert_true(has(&q, "README"));
    assert_false(q.all);
    assert_true(q.collapsed > 0);
    assert_int_equal(lz_hot_queue_add(&q, "other/x"), 0);
    assert_true(has(&q, "other/x"));
    /* Full of top-level names: the next one is ".", written first. */
    lz_hot_queue_init(&q);
    for (int i = 0; i < LZ_HOT_QUEUE_PATHS; i++) {
        snprintf(p, sizeof p, "t%d", i);
        assert_int_equal(lz_hot_queue_add(&q, p), 0);
    }
    assert_false(q.all);
    assert_int_equal(lz_hot_queue_add(&q, "u"), 0);
    assert_true(q.all);
    char buf[4096];
    size_t count = 0;
    size_t len = lz_hot_queue_peek(&q, buf, sizeof buf, &count);
    assert_true(len >= 2);
    assert_memory_equal(buf, ".\0", 2);
    lz_hot_queue_consume(&q, 1);
    assert_false(q.all);
    assert_int_equal(q.n, LZ_HOT_QUEUE_PATHS);
    /* Bytes bound the queue as well as the count. */
    lz_hot_queue_init(&q);
    char big[LZ_HOT_PATH_MAX + 1];
    memset(big, 'd', 100);
    big[100] = '/';
    memset(big + 101, 'x', LZ_HOT_PATH_MAX - 101);
    big[LZ_HOT_PATH_MAX] = 0;
    for (int i = 0; i < 40; i++) {
        big[LZ_HOT_PATH_MAX - 1] = (char)('A' + i);
        assert_int_equal(lz_hot_queue_add(&q, big), 0);
        assert_true(q.used <= sizeof q.buf);
    }
    assert_true(q.n < 40);
    big[100] = 0;
    assert_true(has(&q, big));
}

static void test_poke_value(void **state) {
    (void)state;
    assert_true(lz_hot_is_poke(&(struct timespec){ .tv_sec = LZ_HOT_POKE_SEC, .tv_nsec = LZ_HOT_POKE_NSEC }));
    assert_false(lz_hot_is_poke(&(struct timespec){ .tv_sec = 0, .tv_nsec = 0 }));
    assert_false(lz_hot_is_poke(&(struct timespec){ .tv_sec = 1, .tv_nsec = LZ_HOT_POKE_NSEC }));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths), cmocka_unit_test(test_round_trip),      cmocka_unit_test(test_stream),
        cmocka_unit_test(test_queue), cmocka_unit_test(test_queue_coalesces), cmocka_unit_test(test_poke_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
