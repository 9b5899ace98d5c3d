/* Unit tests for the Coordinator <-> Supervisor channel codec (rschan.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "rschan.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

static size_t enc(const struct lz_rsmsg *m, uint8_t *buf) {
    size_t len = 0;
    assert_int_equal(lz_rschan_encode(m, buf, LZ_RSCHAN_MAX, &len), 0);
    return len;
}

static void test_roundtrip_every_kind(void **state) {
    (void)state;
    for (int k = LZ_RS_STAGE; k < LZ_RS_KIND_MAX; k++) {
        struct lz_rsmsg m = { .kind = (enum lz_rs_kind)k }, d;
        uint8_t buf[LZ_RSCHAN_MAX];
        /* Fields the kind does not carry are not sent. */
        m.u[0] = 4026531840u;
        m.u[1] = UINT64_MAX;
        m.u[2] = 7;
        snprintf(m.str, sizeof m.str, "vol3");
        size_t len = enc(&m, buf);
        assert_int_equal(lz_rschan_decode(buf, len, &d), 0);
        assert_int_equal(d.kind, k);
        uint8_t again[LZ_RSCHAN_MAX];
        assert_int_equal(enc(&d, again), len);
        assert_memory_equal(buf, again, len);
        assert_string_not_equal(lz_rschan_kind_name(d.kind), "?");
    }
    struct lz_rsmsg r = { .kind = LZ_RS_READY, .u = { 1, 2, 3 } }, d;
    snprintf(r.str, sizeof r.str, "routes=3 deny=2 allow=1");
    uint8_t buf[LZ_RSCHAN_MAX];
    assert_int_equal(lz_rschan_decode(buf, enc(&r, buf), &d), 0);
    assert_true(d.u[0] == 1 && d.u[1] == 2 && d.u[2] == 3);
    assert_string_equal(d.str, "routes=3 deny=2 allow=1");
    char line[128];
    lz_rschan_format(&d, line, sizeof line);
    assert_string_equal(line, "ready 1 2 3 routes=3 deny=2 allow=1");
    /* The longest string a kind may carry. */
    struct lz_rsmsg a = { .kind = LZ_RS_ANCHORED };
    memset(a.str, 'x', LZ_RSCHAN_STR_MAX);
    size_t len = enc(&a, buf);
    assert_int_equal(len, (size_t)LZ_RSCHAN_HDR + 4 + LZ_RSCHAN_STR_MAX);
    assert_int_equal(lz_rschan_decode(buf, len, &d), 0);
    assert_int_equal(strlen(d.str), LZ_RSCHAN_STR_MAX);
}

/* The header's body length (little-endian u32 at offset 4). */
static void set_len(uint8_t *c, size_t body) {
    for (int i = 0; i < 4; i++)
        c[4 + i] = (uint8_t)(body >> (8 * i));
}

static void test_every_truncation_refused(void **state) {
    (void)state;
    struct lz_rsmsg kinds[] = {
        { .kind = LZ_RS_STAGE, .u = { 42 }, .str = "router" },
        { .kind = LZ_RS_READY, .u = { 1, 2, 3 }, .str = "routes=1" },
        { .kind = LZ_RS_EXITED, .u = { 0 }, .str = "" },
        { .kind = LZ_RS_FAIL, .str = "the sandbox did not start" },
        { .kind = LZ_RS_STOP },
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        uint8_t buf[LZ_RSCHAN_MAX];
        size_t len = enc(&kinds[k], buf);
        struct lz_rsmsg d;
        for (size_t n = 0; n < len; n++) {
            /* As sent (length field unchanged) and as a consistent but
             * short packet (length field fixed up): both refused. */
            assert_int_equal(lz_rschan_decode(buf, n, &d), -EBADMSG);
            if (n >= LZ_RSCHAN_HDR) {
                uint8_t c[LZ_RSCHAN_MAX];
                memcpy(c, buf, n);
                set_len(c, n - LZ_RSCHAN_HDR);
                assert_int_equal(lz_rschan_decode(c, n, &d), -EBADMSG);
            }
        }
        /* A trailing byte is refused too. */
        buf[len] = 0;
        set_len(buf, len + 1 - LZ_RSCHAN_HDR);
        assert_int_equal(lz_rschan_decode(buf, len + 1, &d), -EBADMSG);
    }
}

static void test_bad_fields_refused(void **state) {
    (void)state;
    uint8_t buf[LZ_RSCHAN_MAX];
    struct lz_rsmsg m = { .kind = LZ_RS_STAGED, .str = "runsc" }, d;
    size_t len = enc(&m, buf);
    assert_int_equal(lz_rschan_decode(buf, len, &d), 0);
    uint8_t c[LZ_RSCHAN_MAX];
    /* Unknown kinds, flags, a NUL in the string, a string over the kind's bound. */
    memcpy(c, buf, len);
    c[0] = 0;
    assert_int_equal(lz_rschan_decode(c, len, &d), -EBADMSG);
    memcpy(c, buf, len);
    c[0] = LZ_RS_KIND_MAX;
    assert_int_equal(lz_rschan_decode(c, len, &d), -EBADMSG);
    memcpy(c, buf, len);
    c[2] = 1;
    assert_int_equal(lz_rschan_decode(c, len, &d), -EBADMSG);
    memcpy(c, buf, len);
    c[len - 1] = '\0';
    assert_int_equal(lz_rschan_decode(c, len, &d), -EBADMSG);
    /* The positive control of the bound: 15 is fine, 16 is not. */
    struct lz_rsmsg s = { .kind = LZ_RS_STAGED };
    memset(s.str, 'v', LZ_RSCHAN_SLOT_MAX);
    assert_int_equal(lz_rschan_decode(buf, enc(&s, buf), &d), 0);
    s.str[LZ_RSCHAN_SLOT_MAX] = 'v';
    size_t l2;
    assert_int_equal(lz_rschan_encode(&s, buf, sizeof buf, &l2), -EINVAL);
    /* Hand-made: a 16-byte slot. */
    uint8_t h[LZ_RSCHAN_HDR + 4 + 16] = { LZ_RS_STAGED, 0, 0, 0, 20, 0, 0, 0, 16, 0, 0, 0 };
    memset(h + 12, 'v', 16);
    assert_int_equal(lz_rschan_decode(h, sizeof h, &d), -EBADMSG);
    h[8] = 15;
    assert_int_equal(lz_rschan_decode(h, sizeof h, &d), -EBADMSG); /* now a trailing byte */
    h[4] = 19;
    assert_int_equal(lz_rschan_decode(h, sizeof h - 1, &d), 0);
    /* Unknown kinds cannot be encoded; a short buffer is reported. */
    struct lz_rsmsg bad = { .kind = LZ_RS_KIND_MAX };
    assert_int_equal(lz_rschan_encode(&bad, buf, sizeof buf, &l2), -EINVAL);
    assert_int_equal(lz_rschan_encode(&m, buf, 8, &l2), -ENOBUFS);
}

static void test_timeouts_derived(void **state) {
    (void)state;
    /* The coordinator's wait for EXITED covers the Supervisor's whole stop
     * sequence: today's 30 s without volumes, longer with each. */
    assert_int_equal(lz_rs_stop_bound_ms(0), 30000);
    assert_true(lz_rs_stop_bound_ms(2) == lz_rs_stop_bound_ms(0) + 2 * LZ_RS_T_ROUTER_STOP_MS);
    assert_true(LZ_RS_T_READY_MS > LZ_RS_T_START_MS);
}

static void test_socket_send_recv(void **state) {
    (void)state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    struct lz_rsmsg d;
    assert_int_equal(lz_rschan_recv(sp[1], 0, &d), -ETIMEDOUT);
    uint64_t pid = 1234;
    assert_int_equal(lz_rschan_send(sp[0], LZ_RS_STAGE, &pid, "vol0"), 0);
    assert_int_equal(lz_rschan_recv(sp[1], 1000, &d), 1);
    assert_int_equal(d.kind, LZ_RS_STAGE);
    assert_true(d.u[0] == 1234);
    assert_string_equal(d.str, "vol0");
    /* A long FAIL is cut at the bound, not refused. */
    static char big[LZ_RSCHAN_STR_MAX + 100];
    memset(big, 'm', sizeof big - 1);
    assert_int_equal(lz_rschan_sendf(sp[0], LZ_RS_FAIL, "%s", big), 0);
    assert_int_equal(lz_rschan_recv(sp[1], 1000, &d), 1);
    assert_int_equal(strlen(d.str), LZ_RSCHAN_STR_MAX);
    /* Text from before the channel was typed is malformed. */
    assert_int_equal(send(sp[0], "stop", 4, 0), 4);
    assert_int_equal(lz_rschan_recv(sp[1], 1000, &d), -EBADMSG);
    close(sp[0]);
    assert_int_equal(lz_rschan_recv(sp[1], 1000, &d), 0);
    close(sp[1]);
}

static int n_open_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

/* Raw: one MAILBOX packet with n descriptors attached (no bound). */
static void send_raw(int sock, const int *fds, size_t n) {
    uint8_t buf[LZ_RSCHAN_MAX];
    struct lz_rsmsg m = { .kind = LZ_RS_MAILBOX };
    size_t len = enc(&m, buf);
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    char cbuf[CMSG_SPACE(8 * sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = CMSG_SPACE(n * sizeof(int))
    };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    assert_true(sendmsg(sock, &mh, 0) == (ssize_t)len);
}

/* MAILBOX carries the mailbox's two directory descriptors: they arrive
 * close-on-exec and name the same files; a receiver that takes none, or
 * more than it has room for, closes every one of them (no leak) and
 * reports the packet malformed. */
static void test_fds_passed(void **state) {
    (void)state;
    int sp[2], p[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int before = n_open_fds();
    assert_int_equal(lz_rschan_send_fds(sp[0], LZ_RS_MAILBOX, NULL, NULL, p, 2), 0);
    struct lz_rsmsg m;
    int got[2];
    size_t n = 9;
    assert_int_equal(lz_rschan_recv_fds(sp[1], 1000, &m, got, 2, &n), 1);
    assert_int_equal(m.kind, LZ_RS_MAILBOX);
    assert_int_equal(n, 2);
    for (int i = 0; i < 2; i++) {
        struct stat a, b;
        assert_int_equal(fstat(got[i], &a), 0);
        assert_int_equal(fstat(p[i], &b), 0);
        assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
        close(got[i]);
    }
    assert_int_equal(n_open_fds(), before);
    /* A plain receive of a packet with descriptors. */
    assert_int_equal(lz_rschan_send_fds(sp[0], LZ_RS_MAILBOX, NULL, NULL, p, 2), 0);
    assert_int_equal(lz_rschan_recv(sp[1], 1000, &m), -EBADMSG);
    assert_int_equal(n_open_fds(), before);
    /* More than the receiver has room for. */
    int three[3] = { p[0], p[1], p[0] };
    send_raw(sp[0], three, 3);
    assert_int_equal(lz_rschan_recv_fds(sp[1], 1000, &m, got, 2, &n), -EBADMSG);
    assert_int_equal(n, 0);
    assert_true(got[0] == -EBADF && got[1] == -EBADF);
    assert_int_equal(n_open_fds(), before);
    /* The sender refuses more than LZ_RSCHAN_FDS_MAX. */
    int five[LZ_RSCHAN_FDS_MAX + 1] = { p[0], p[1], p[0], p[1], p[0] };
    assert_int_equal(lz_rschan_send_fds(sp[0], LZ_RS_MAILBOX, NULL, NULL, five, LZ_RSCHAN_FDS_MAX + 1), -EINVAL);
    /* DNS carries four (the resolver's sockets), in their order. */
    int four[4] = { p[0], p[1], p[1], p[0] };
    int got4[4];
    assert_int_equal(lz_rschan_send_fds(sp[0], LZ_RS_DNS, NULL, NULL, four, 4), 0);
    assert_int_equal(lz_rschan_recv_fds(sp[1], 1000, &m, got4, 4, &n), 1);
    assert_int_equal(m.kind, LZ_RS_DNS);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        struct stat a, b;
        assert_int_equal(fstat(got4[i], &a), 0);
        assert_int_equal(fstat(four[i], &b), 0);
        assert_true(a.st_ino == b.st_ino);
        close(got4[i]);
    }
    assert_int_equal(n_open_fds(), before);
    /* And without descriptors the channel is as before. */
    assert_int_equal(lz_rschan_send(sp[0], LZ_RS_MAILBOX, NULL, NULL), 0);
    assert_int_equal(lz_rschan_recv_fds(sp[1], 1000, &m, got, 2, &n), 1);
    assert_int_equal(n, 0);
    close(p[0]);
    close(p[1]);
    close(sp[0]);
    close(sp[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_kind), cmocka_unit_test(test_every_truncation_refused),
        cmocka_unit_test(test_bad_fields_refused),   cmocka_unit_test(test_timeouts_derived),
        cmocka_unit_test(test_socket_send_recv),     cmocka_unit_test(test_fds_passed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
