/* Unit tests for the progress view (progress.c): redraw only on change,
 * bytes and rate, plain lines without a terminal. The clock is the test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "progress.h"

#define MiB (UINT64_C(1) << 20)

/* Everything a run of reports wrote, and how many writes it took. */
struct sink {
    char all[65536];
    size_t len;
    unsigned writes;
};

static void feed(struct lz_progress_view *v, struct sink *s, const char *phase, uint64_t done, uint64_t total,
                 uint64_t now) {
    char out[1024];
    size_t n = lz_progress_view_update(v, phase, done, total, now, out, sizeof out);
    assert_int_equal(n, strlen(out));
    if (n) {
        s->writes++;
        assert_true(s->len + n < sizeof s->all);
        memcpy(s->all + s->len, out, n + 1);
        s->len += n;
    }
}

static void finish(struct lz_progress_view *v, struct sink *s, uint64_t now) {
    char out[1024];
    size_t n = lz_progress_view_finish(v, now, out, sizeof out);
    if (n) {
        s->writes++;
        memcpy(s->all + s->len, out, n + 1);
        s->len += n;
    }
}

/* The sentinel of the no-terminal tests: plain text only. */
static bool plain(const char *s) {
    for (; *s; s++)
        if (*s == '\r' || *s == '\033' || ((unsigned char)*s < 0x20 && *s != '\n'))
            return false;
    return true;
}

static unsigned count(const char *s, const char *needle) {
    unsigned n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The bootstrap's "hashing 0%" hundreds of times: one frame. */
static void test_tty_same_state_drawn_once(void **st) {
    struct lz_progress_view v;
    struct sink s = { 0 };
    lz_progress_view_init(&v, true, 100, "lazaret: ");
    for (unsigned i = 0; i < 500; i++)
        feed(&v, &s, "bootstrap: hashing", i, 400 * MiB, 1000 + i * 7);
    assert_int_equal(s.writes, 1);
    assert_non_null(strstr(s.all, "\r\033[Klazaret: bootstrap: hashing   0% 0 B / 400.0 MiB"));
    finish(&v, &s, 5000);
    assert_int_equal(s.writes, 2);
    assert_string_equal(s.all + s.len - 4, "\r\033[K");
}

/* A new percentage is drawn, at most every LZ_PROGRESS_REDRAW_MS; the last
 * frame (100%) always; the rate once it means something. */
static void test_tty_redraw_on_change_throttled(void **st) {
    struct lz_progress_view v;
    struct sink s = { 0 };
    lz_progress_view_init(&v, true, 120, "");
    uint64_t t = 10000;
    feed(&v, &s, "prepare", 0, 100 * MiB, t);
    for (unsigned pct = 1; pct < 100; pct++) /* a percent every 10 ms */
        feed(&v, &s, "prepare", pct * MiB, 100 * MiB, t + pct * 10);
    /* 990 ms, one frame per 100 ms at most (+1 for the first) */
    assert_in_range(s.writes, 9, 11);
    feed(&v, &s, "prepare", 100 * MiB, 100 * MiB, t + 995);
    assert_non_null(strstr(s.all, " 100% 100.0 MiB / 100.0 MiB, 100.5 MiB/s"));
    /* Without a total: the MiB count and the rate. */
    unsigned w = s.writes;
    feed(&v, &s, "pull", 0, 0, 20000);
    feed(&v, &s, "pull", 1000, 0, 20200); /* same MiB: nothing */
    assert_int_equal(s.writes, w + 1);
    feed(&v, &s, "pull", 3 * MiB, 0, 21000);
    assert_int_equal(s.writes, w + 2);
    assert_non_null(strstr(s.all, "\r\033[Kpull 3.0 MiB, 3.0 MiB/s"));
    /* A long phase is cut to the terminal's width. */
    char lng[200];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    struct sink s2 = { 0 };
    lz_progress_view_init(&v, true, 40, "");
    feed(&v, &s2, lng, 0, 0, 1);
    assert_true(strlen(s2.all) <= 4 + 40);
}

/* Not a terminal: a line when a phase starts, a line at most every
 * LZ_PROGRESS_LINE_MS, a summary with the rate at its end; no \r, no escape
 * even when a tool's line holds them. */
static void test_plain_lines(void **st) {
    struct lz_progress_view v;
    struct sink s = { 0 };
    lz_progress_view_init(&v, false, 80, "lazaret: ");
    feed(&v, &s, "bootstrap", 0, 0, 0);
    feed(&v, &s, "bootstrap: I: downloading packages...", 0, 0, 10);
    feed(&v, &s, "bootstrap: I: downloading packages...", 0, 0, 20); /* the same line: once */
    feed(&v, &s, "bootstrap: Get:1 \r\033[2Kevil\033]0;t\a", 0, 0, 30);
    for (unsigned i = 0; i <= 400; i++) /* 400 MiB in 40 s */
        feed(&v, &s, "bootstrap: hashing", (uint64_t)i * MiB, 400 * MiB, 1000 + i * 100);
    feed(&v, &s, "bootstrap: done", 400 * MiB, 400 * MiB, 42000);
    finish(&v, &s, 42001);
    assert_true(plain(s.all));
    assert_int_equal(count(s.all, "I: downloading packages..."), 1);
    assert_non_null(strstr(s.all, "lazaret: bootstrap: hashing (400.0 MiB)\n"));
    /* 40 s of hashing: a line every 10 s, then the summary. */
    assert_in_range(count(s.all, "lazaret: bootstrap: hashing "), 4, 6);
    assert_non_null(strstr(s.all, "lazaret: bootstrap: hashing: 400.0 MiB in 40.0 s, 10.0 MiB/s\n"));
    assert_non_null(strstr(s.all, "lazaret: bootstrap: done (400.0 MiB)\n"));
    /* Every write is whole lines. */
    assert_int_equal(s.all[s.len - 1], '\n');
    /* An unfinished phase gets its summary from finish(). */
    struct sink s2 = { 0 };
    lz_progress_view_init(&v, false, 80, "");
    feed(&v, &s2, "import", 0, 10 * MiB, 0);
    feed(&v, &s2, "import", 5 * MiB, 10 * MiB, 2000);
    finish(&v, &s2, 2000);
    assert_string_equal(s2.all, "import (10.0 MiB)\nimport: 5.0 MiB in 2.0 s, 2.5 MiB/s\n");
}

/* Positive control: the sentinel of the plain tests fires on a terminal's
 * frames, and the once-only count on a view that draws every report. */
static void test_control_sentinels_fire(void **st) {
    struct lz_progress_view v;
    struct sink s = { 0 };
    lz_progress_view_init(&v, true, 80, "");
    feed(&v, &s, "bootstrap: hashing", 0, 100, 0);
    assert_false(plain(s.all));
    struct sink s2 = { 0 };
    for (unsigned i = 0; i < 5; i++) { /* the old display: a frame per report */
        lz_progress_view_init(&v, true, 80, "");
        feed(&v, &s2, "bootstrap: hashing", 0, 100, i);
    }
    assert_int_not_equal(s2.writes, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tty_same_state_drawn_once),
        cmocka_unit_test(test_tty_redraw_on_change_throttled),
        cmocka_unit_test(test_plain_lines),
        cmocka_unit_test(test_control_sentinels_fire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
